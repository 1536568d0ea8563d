//! The FUSE operations: each one is carried out on the backing tree, relative to handles opened
//! before mounting, and reported to the observation sink after it succeeded.
//!
//! This file holds the `Filesystem` impl and the helpers many operations share; the longer
//! helpers live in child modules, one concern each (after virtiofsd's `passthrough/`): `open`
//! (OPEN and CREATE: the I/O mode, passthrough registrations, handles), `setattr` (SETATTR
//! and clearing set-id bits as the caller would) and `names` (namespace changes, noted as the
//! mount's own for the watcher).

mod names;
mod open;
mod setattr;

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use fuser::{
    AccessFlags, BsdFileFlags, CopyFileRangeFlags, Errno, FileAttr, FileHandle, Filesystem,
    FopenFlags, Generation, INodeNo, InitFlags, KernelConfig, LockOwner, OpenFlags, RenameFlags,
    ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory, ReplyDirectoryPlus, ReplyEmpty, ReplyEntry,
    ReplyLseek, ReplyOpen, ReplyStatfs, ReplyStatx, ReplyWrite, ReplyXattr, Request, TimeOrNow,
    WriteFlags,
};
use tracing::{debug, info};

use super::attr::{dirent_type, to_attr};
use super::callers::{self, Callers};
use super::handles::{DirStreams, HandleTable, OpenDir, OpenFile};
use super::inode_store::{Inode, InodeFd, InodeStore};
use super::kill_priv::{self, run_as_caller_would};
use super::op_stats::{OpStats, bump};
use super::open_mode::OpenIo;
use super::read_buf;
use super::self_changes::{NameChange, SelfChanges};
use super::sys::{self, cstr, cvt};
use super::{FsOptions, IoMode, IoUringMode};
use crate::observation::{CallerStamp, ObservationSink, Op};
use open::{FMODE_EXEC, Opened};
use setattr::AttrChange;

pub struct Passthrough {
    store: Arc<InodeStore>,
    files: HandleTable<OpenFile>,
    /// Directory streams by node id: OPENDIR is declined, so listings arrive without handles.
    dirs: DirStreams,
    opts: FsOptions,
    observe: ObservationSink,
    /// Decided at INIT: the kernel supports passthrough and the options allow it.
    passthrough: AtomicBool,
    stats: Arc<OpStats>,
    /// Namespace changes made through the mount, for the watcher to recognise.
    self_changes: Arc<SelfChanges>,
    /// Program names of callers, read while they still run.
    callers: Callers,
    /// No SELinux on this host: an unlabelled file answers `security.selinux` queries with
    /// EOPNOTSUPP rather than ENODATA, so `ls -l` (which asks for every file, and the kernel
    /// never caches the answer) learns once per mount that there are no labels to show.
    no_selinux: bool,
}

type Res<T> = Result<T, Errno>;

fn errno(e: io::Error) -> Errno {
    let code = e.raw_os_error().unwrap_or(libc::EIO);
    if code == libc::EMFILE || code == libc::ENFILE {
        out_of_descriptors();
    }
    Errno::from_i32(code)
}

/// Says once why programs using the mount now fail with "Too many open files": the limit is
/// the daemon's, and every file open through the mount costs one (without root, so do files
/// the kernel knows, up to a share of the limit: see `inode_store`).
fn out_of_descriptors() {
    static SAID: AtomicBool = AtomicBool::new(false);
    if SAID.swap(true, Ordering::Relaxed) {
        return;
    }
    let limit = sys::nofile_limit().map_or_else(|| "?".to_string(), |n| n.to_string());
    crate::say!(
        "worldfs: warning: the daemon has run out of file descriptors (limit {limit}); \
         operations through the mount fail until files are closed. Every file open through the \
         mount holds one: raise the hard limit (`ulimit -Hn`, systemd's LimitNOFILE)"
    );
}

/// The attributes for `st` as the kernel will cache them, noting on the inode what it was told
/// (the watcher compares against it to recognise the echo of the mount's own changes).
fn told_attr(inode: &Inode, st: &libc::stat) -> FileAttr {
    inode.told(st);
    to_attr(inode.nodeid, st)
}

impl Passthrough {
    pub fn new(
        store: Arc<InodeStore>,
        opts: FsOptions,
        observe: ObservationSink,
        self_changes: Arc<SelfChanges>,
    ) -> Self {
        Self {
            store,
            files: HandleTable::default(),
            dirs: DirStreams::default(),
            opts,
            observe,
            passthrough: AtomicBool::new(false),
            stats: Arc::new(OpStats::default()),
            self_changes,
            callers: Callers::default(),
            no_selinux: !Path::new("/sys/fs/selinux/enforce").exists(),
        }
    }

    /// Request counters, shared with whoever reports them.
    pub fn stats(&self) -> Arc<OpStats> {
        self.stats.clone()
    }

    fn inode(&self, ino: INodeNo) -> Res<Arc<Inode>> {
        self.store.get(ino.0).map_err(errno)
    }

    fn emit(&self, op: Op, pid: u32, nodeid: u64) {
        self.observe.emit(op, pid, || self.store.path_of(nodeid));
    }

    /// Answers CREATE or TMPFILE with the new entry and its open file, then tells the world.
    fn reply_created(&self, req: &Request, opened: Res<Opened>, reply: ReplyCreate) {
        // Before the reply, as for OPEN (see `caller`).
        let caller = opened.is_ok().then(|| self.caller(req.pid())).flatten();
        let o = match opened {
            Ok(Opened {
                attr: Some(attr),
                fh,
                backing,
                nodeid,
                op,
                generation,
                fopen,
            }) => {
                let fh = FileHandle(fh);
                let ttl = &self.opts.kernel_cache.ttl();
                match &backing {
                    Some(id) => reply.created_passthrough(
                        ttl,
                        &attr,
                        Generation(generation),
                        fh,
                        FopenFlags::empty(),
                        id,
                    ),
                    None => reply.created(ttl, &attr, Generation(generation), fh, fopen),
                }
                (op, nodeid)
            }
            Ok(_) => return reply.error(Errno::EIO),
            Err(e) => return reply.error(e),
        };
        callers::late_emit_pause();
        self.emit_stamped(o.0, req.pid(), caller, o.1);
    }

    /// The caller's program and parent (see `callers`), for an observation of a program reading
    /// or writing. Requests that open a file take it before they reply: a one-shot process
    /// (`cat`, a hook's script) may exit as soon as its last request is answered, and a stamp
    /// read after that finds no process; the world would then count an unknown process's
    /// access. Taking it costs a few small reads of `/proc` on a process's first open (its `stat`,
    /// `status` and command line, and the `stat` of a parent not stamped lately), and once per
    /// [`callers::TRUST`] window after, which its `fork` and `exec` dwarf.
    fn caller(&self, pid: u32) -> Option<Arc<CallerStamp>> {
        if self.observe.is_enabled() {
            self.callers.stamp(pid)
        } else {
            None
        }
    }

    /// `emit` for requests that show a program reading or writing, with their [`Self::caller`].
    /// Called after the reply, so the caller does not wait for the channel; every request that
    /// replies first holds `observe.answering()` until it has emitted, so the socket's barrier
    /// still waits for what the caller did just before asking it.
    fn emit_stamped(&self, op: Op, pid: u32, caller: Option<Arc<CallerStamp>>, nodeid: u64) {
        self.observe
            .emit_from(op, pid, caller, || self.store.path_of(nodeid));
    }

    fn emit_child(&self, op: Op, pid: u32, parent: u64, name: &OsStr) {
        self.observe
            .emit(op, pid, || self.store.child_path(parent, name));
    }

    /// Stats the backing inode: through its name when that still leads to it (one `fstatat`;
    /// every read through the mount makes the kernel ask again, see `attr_of`), else through
    /// its handle (open, `fstat`, close).
    fn stat_inode(&self, inode: &Inode) -> io::Result<libc::stat> {
        if !inode.is_dir()
            && let Some(st) = self.store.stat_by_name(inode)
        {
            return Ok(st);
        }
        let fd = self.store.path_fd(inode)?;
        sys::fstat(fd.as_fd())
    }

    /// [`Self::attr_of`]'s `stat`, with the birth time: one `statx` where it gives every basic
    /// attribute, as for `stat_inode` through the open descriptor, the name or the inode's own.
    fn statx_inode(
        &self,
        inode: &Inode,
        fh: Option<FileHandle>,
    ) -> io::Result<(libc::stat, Option<SystemTime>)> {
        let file = fh.and_then(|fh| self.files.get(fh.0).ok());
        let open = file.as_ref().and_then(|f| f.fd_if_open());
        if open.is_none()
            && !inode.is_dir()
            && let Some(found) = self.store.statx_by_name(inode)
        {
            return Ok(found);
        }
        let of = |fd: std::os::fd::BorrowedFd<'_>| {
            let (st, born) = sys::statx_at(fd, c"", libc::AT_SYMLINK_NOFOLLOW)?;
            match st {
                Some(st) => Ok((st, born)),
                None => Ok((sys::fstat(fd)?, born)),
            }
        };
        match open {
            Some(fd) => of(fd),
            None => of(self.store.path_fd(inode)?.as_fd()),
        }
    }

    /// Every passthrough read invalidates the kernel's cached atime, so each `stat` or `fstat`
    /// of a file read before comes here: it is one of the three round trips of a `cat`.
    fn attr_of(&self, inode: &Inode, fh: Option<FileHandle>) -> io::Result<FileAttr> {
        let file = fh.and_then(|fh| self.files.get(fh.0).ok());
        let st = match file.as_ref().and_then(|f| f.fd_if_open()) {
            Some(fd) => sys::fstat(fd)?,
            None => self.stat_inode(inode)?,
        };
        Ok(told_attr(inode, &st))
    }

    fn reply_entry(&self, reply: ReplyEntry, result: io::Result<(Arc<Inode>, libc::stat)>) {
        match result {
            Ok((inode, st)) => reply.entry_with_ttls(
                &self.opts.kernel_cache.ttl(),
                &self.opts.kernel_cache.ttl(),
                &told_attr(&inode, &st),
                Generation(inode.generation),
            ),
            Err(e) => reply.error(errno(e)),
        }
    }

    /// A path for the xattr calls that reaches exactly this inode: `/proc/self/fd/N` of its
    /// O_PATH descriptor. The calls must follow that magic link (the `l*` variants would act on
    /// the link itself); following it lands on the inode, even a symlink, and goes no further.
    /// The descriptor must be kept alive while the path is used.
    fn xattr_path(&self, inode: &Inode) -> io::Result<(InodeFd, std::ffi::CString)> {
        let fd = self.store.path_fd(inode)?;
        let path = sys::proc_fd_path(fd.as_fd().as_raw_fd());
        Ok((fd, path))
    }

    fn list_dir(
        &self,
        req: &Request,
        ino: INodeNo,
        offset: u64,
        mut add: impl FnMut(&super::handles::Entry) -> bool,
    ) -> Res<()> {
        let dir = self
            .dirs
            .get_or_open(ino.0, || {
                let inode = self.store.get(ino.0)?;
                let fd = self
                    .store
                    .open(&inode, libc::O_RDONLY | libc::O_DIRECTORY)?;
                Ok(OpenDir::new(fd, inode.nodeid))
            })
            .map_err(errno)?;
        if offset == 0 {
            // Stamped as an open is, before the reply: a `find` or a `git status` over a few
            // directories exits within a millisecond, before the world could name it, and an
            // unnamed lister counts as the agent.
            let caller = self.caller(req.pid());
            self.emit_stamped(Op::ReadDir, req.pid(), caller, dir.nodeid);
        }
        dir.list(offset as i64, &mut add).map_err(errno)
    }
}

impl Filesystem for Passthrough {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        // Files are created with exactly the mode the kernel passes (it already applied the
        // caller's umask); the daemon's own umask must not strip more bits.
        unsafe { libc::umask(0) };
        let caps = config.capabilities();
        let mut want = InitFlags::FUSE_DO_READDIRPLUS
            | InitFlags::FUSE_READDIRPLUS_AUTO
            | InitFlags::FUSE_PARALLEL_DIROPS
            // Not FUSE_ATOMIC_O_TRUNC: with it the daemon truncates in OPEN, before the kernel
            // checks that the file may be written (`handle_truncate`), so open(O_RDONLY |
            // O_TRUNC) of a running executable emptied it and then failed with ETXTBSY, or,
            // once the program had crashed on its vanished pages, succeeded (pjdfstest
            // open::etxtbsy, about 1 run in 5). Without it the kernel truncates with a SETATTR
            // after that check: one round trip more for an O_TRUNC open of an existing file.
            | InitFlags::FUSE_CACHE_SYMLINKS
            | InitFlags::FUSE_NO_OPENDIR_SUPPORT
            | InitFlags::FUSE_EXPORT_SUPPORT
            // The kernel then keeps each inode's ACLs cached (and enforces them with
            // default_permissions), so `ls -l` does not cost a GETXATTR round trip per file.
            | InitFlags::FUSE_POSIX_ACL
            // The kernel then stops asking for security.capability before writes (a GETXATTR
            // round trip per write to a file whose attributes were refreshed) and leaves
            // clearing set-id bits to us: see `kill_priv`.
            | InitFlags::FUSE_HANDLE_KILLPRIV_V2;
        let root = unsafe { libc::geteuid() } == 0;
        let offered = caps.contains(InitFlags::FUSE_PASSTHROUGH);
        let passthrough = self.opts.io_mode != IoMode::Daemon && offered && root;
        *self.stats.data_path.lock() = Some(if passthrough {
            "kernel passthrough: reads and writes at native speed, observed at open and close"
                .into()
        } else {
            let why = if self.opts.io_mode == IoMode::Daemon {
                "--io daemon"
            } else if !root {
                "mounted without root; kernel passthrough needs it"
            } else {
                "the kernel does not offer FUSE passthrough (Linux 6.9 or later)"
            };
            format!("daemon: every read and write passes through worldfs ({why})")
        });
        if self.opts.birth_times
            && let Some(line) = self.stats.data_path.lock().as_mut()
        {
            line.push_str("; birth times given (--birth-times)");
        }
        if passthrough {
            want |= InitFlags::FUSE_PASSTHROUGH;
        } else if self.opts.io_mode == IoMode::Passthrough {
            return Err(io::Error::other(
                "--io passthrough: the kernel does not offer FUSE passthrough or the daemon is not root",
            ));
        }
        match self.opts.io_uring {
            IoUringMode::Off => {}
            _ if caps.contains(InitFlags::FUSE_OVER_IO_URING) => {
                want |= InitFlags::FUSE_OVER_IO_URING;
            }
            IoUringMode::Auto => {}
            IoUringMode::On => {
                return Err(io::Error::other(format!(
                    "--io-uring on: the kernel did not offer FUSE-over-io_uring (is {} Y?)",
                    super::ENABLE_URING_PARAM
                )));
            }
        }
        if let Err(missing) = config.add_capabilities(want & caps) {
            debug!("kernel lacks init flags {missing:?}");
        }
        if passthrough {
            // Backing files may themselves sit on a stacked file system (overlayfs).
            if let Err(e) = config.set_max_stack_depth(2) {
                debug!("max_stack_depth: kernel accepts at most {e}");
            }
        }
        let _ = config.set_max_write(1024 * 1024);
        let _ = config.set_max_readahead(1024 * 1024);
        self.passthrough.store(passthrough, Ordering::Relaxed);
        self.store
            .no_file_pages
            .store(passthrough, Ordering::Relaxed);
        info!(
            passthrough,
            file_handles = self.store.uses_file_handles(),
            "FUSE session initialised"
        );
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        bump(&self.stats.lookup);
        let result = self
            .store
            .get(parent.0)
            .and_then(|p| cstr(name).and_then(|c| self.store.lookup(&p, &c)));
        match result {
            Err(e)
                if e.raw_os_error() == Some(libc::ENOENT)
                    && !self.opts.kernel_cache.ttl().is_zero() =>
            {
                // A negative entry: node id 0 with a timeout makes the kernel remember that the
                // name does not exist (python imports and cargo probe many such names). The
                // watcher invalidates it when the name appears behind the mount.
                let attr = placeholder_attr(0, fuser::FileType::RegularFile);
                reply.entry(&self.opts.kernel_cache.ttl(), &attr, Generation(0));
            }
            other => self.reply_entry(reply, other),
        }
    }

    fn forget(&self, _req: &Request, ino: INodeNo, nlookup: u64) {
        bump(&self.stats.forget);
        if self.store.forget(ino.0, nlookup) {
            self.dirs.remove(ino.0);
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, fh: Option<FileHandle>, reply: ReplyAttr) {
        bump(&self.stats.getattr);
        match self
            .inode(ino)
            .and_then(|i| self.attr_of(&i, fh).map_err(errno))
        {
            Ok(attr) => reply.attr(&self.opts.kernel_cache.ttl(), &attr),
            Err(e) => reply.error(e),
        }
    }

    /// Only a caller asking for the birth time (`stat FILE`, `find -newerB`, and every `stat`
    /// of Node and Rust programs) brings this: the kernel keeps the rest from GETATTR and
    /// LOOKUP. Once answered, it keeps the birth time for the attribute timeout like the rest;
    /// refused (without `--birth-times`), it never asks again.
    fn statx(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: Option<FileHandle>,
        _sx_flags: u32,
        _sx_mask: u32,
        reply: ReplyStatx,
    ) {
        bump(&self.stats.statx);
        if !self.opts.birth_times {
            return reply.error(Errno::ENOSYS);
        }
        let result = self.inode(ino).and_then(|i| {
            let (st, born) = self.statx_inode(&i, fh).map_err(errno)?;
            Ok((told_attr(&i, &st), born))
        });
        match result {
            Ok((attr, born)) => reply.statx(&self.opts.kernel_cache.ttl(), &attr, born),
            Err(e) => reply.error(e),
        }
    }

    fn setattr(
        &self,
        req: &Request,
        ino: INodeNo,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        fh: Option<FileHandle>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<BsdFileFlags>,
        reply: ReplyAttr,
    ) {
        bump(&self.stats.setattr);
        let result = self.inode(ino).and_then(|inode| {
            let change = AttrChange {
                mode,
                uid,
                gid,
                size,
                atime,
                mtime,
            };
            // Before the change: the watcher may see its event before this call returns.
            inode.own_writes.changed();
            // Only a truncate or chown of a file with set-id bits can clear them; one fstat tells.
            let kill = if size.is_some() || uid.is_some() || gid.is_some() {
                let st = self.stat_inode(&inode).map_err(errno)?;
                self.kill_for(req, st.st_mode)
            } else {
                None
            };
            self.do_setattr(&inode, change, fh, kill).map_err(errno)
        });
        match result {
            Ok(attr) => {
                // A truncate names its caller, read before the reply as for opens: without
                // FUSE_ATOMIC_O_TRUNC every `open(O_TRUNC)` of an existing file (`> f` in a
                // shell, Python's `open(f, 'w')`) starts with this SETATTR, and the process has
                // often exited by the time the world looks, which then took the change for the
                // agent's (`unknown_process`).
                let caller = size.and_then(|_| self.caller(req.pid()));
                let _answering = self.observe.answering();
                reply.attr(&self.opts.kernel_cache.ttl(), &attr);
                let op = match size {
                    Some(size) => Op::Truncate { size },
                    None => Op::SetAttr,
                };
                self.emit_stamped(op, req.pid(), caller, ino.0);
            }
            Err(e) => reply.error(e),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        bump(&self.stats.readlink);
        let result = self.inode(ino).and_then(|i| {
            let fd = self.store.path_fd(&i).map_err(errno)?;
            sys::readlinkat(fd.as_fd(), sys::EMPTY).map_err(errno)
        });
        match result {
            Ok(target) => reply.data(&target),
            Err(e) => reply.error(e),
        }
    }

    fn mknod(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        rdev: u32,
        reply: ReplyEntry,
    ) {
        bump(&self.stats.mknod);
        let result = self.create_node(req, parent, name, |dir, c| {
            cvt(unsafe { libc::mknodat(dir.as_raw_fd(), c.as_ptr(), mode, rdev as libc::dev_t) })
                .map(drop)
        });
        if result.is_ok() {
            self.emit_child(Op::Mknod, req.pid(), parent.0, name);
        }
        self.reply_entry(reply, result);
    }

    fn mkdir(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        bump(&self.stats.mkdir);
        let result = self.create_node(req, parent, name, |dir, c| {
            cvt(unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), mode) }).map(drop)
        });
        if result.is_ok() {
            self.emit_child(Op::Mkdir, req.pid(), parent.0, name);
        }
        self.reply_entry(reply, result);
    }

    fn unlink(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        bump(&self.stats.unlink);
        self.remove(req, parent, name, 0, reply);
    }

    fn rmdir(&self, req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        bump(&self.stats.rmdir);
        self.remove(req, parent, name, libc::AT_REMOVEDIR, reply);
    }

    fn symlink(
        &self,
        req: &Request,
        parent: INodeNo,
        link_name: &OsStr,
        target: &Path,
        reply: ReplyEntry,
    ) {
        bump(&self.stats.symlink);
        let result = cstr(target.as_os_str()).and_then(|t| {
            self.create_node(req, parent, link_name, |dir, c| {
                cvt(unsafe { libc::symlinkat(t.as_ptr(), dir.as_raw_fd(), c.as_ptr()) }).map(drop)
            })
        });
        if result.is_ok() {
            self.emit_child(Op::Symlink, req.pid(), parent.0, link_name);
        }
        self.reply_entry(reply, result);
    }

    fn rename(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        newparent: INodeNo,
        newname: &OsStr,
        flags: RenameFlags,
        reply: ReplyEmpty,
    ) {
        bump(&self.stats.rename);
        match self.do_rename(req, parent, name, newparent, newname, flags) {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn link(
        &self,
        req: &Request,
        ino: INodeNo,
        newparent: INodeNo,
        newname: &OsStr,
        reply: ReplyEntry,
    ) {
        bump(&self.stats.link);
        let result = (|| {
            let inode = self.store.get(ino.0)?;
            let target_path = self.store.path_of(ino.0);
            let src = self.store.path_fd(&inode)?;
            let proc_path = sys::proc_fd_path(src.as_fd().as_raw_fd());
            let np = self.store.get(newparent.0)?;
            let npfd = self.store.path_fd(&np)?;
            let cname = cstr(newname)?;
            // Linking through /proc/self/fd needs no CAP_DAC_READ_SEARCH, unlike AT_EMPTY_PATH.
            self.changing_names(&[(&*np, newname, NameChange::Created)], || {
                cvt(unsafe {
                    libc::linkat(
                        libc::AT_FDCWD,
                        proc_path.as_ptr(),
                        npfd.as_fd().as_raw_fd(),
                        cname.as_ptr(),
                        libc::AT_SYMLINK_FOLLOW,
                    )
                })
            })?;
            let r = self.store.lookup(&np, &cname)?;
            Ok((r, target_path))
        })();
        match result {
            Ok((r, target)) => {
                match target {
                    Some(target) => {
                        self.emit_child(Op::Link { target }, req.pid(), newparent.0, newname)
                    }
                    // A file without a name (O_TMPFILE) given its first (the lookup above made
                    // it the inode's name): to the world, a file created with what it holds
                    // now, as an atomic save through rename is. Stamped like an open, so it is
                    // the caller's doing even once it exited.
                    None => {
                        let created = Op::Open {
                            read: false,
                            write: true,
                            truncate: false,
                            created: true,
                        };
                        let caller = self.caller(req.pid());
                        self.emit_stamped(created, req.pid(), caller, r.0.nodeid);
                    }
                }
                self.reply_entry(reply, Ok(r));
            }
            Err(e) => self.reply_entry(reply, Err(e)),
        }
    }

    fn open(&self, req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        bump(&self.stats.open);
        match self.do_open(req, ino, flags.0, &reply) {
            Ok(o) => {
                let caller = self.caller(req.pid());
                let _answering = self.observe.answering();
                match &o.backing {
                    Some(id) => reply.opened_passthrough(FileHandle(o.fh), FopenFlags::empty(), id),
                    None => reply.opened(FileHandle(o.fh), o.fopen),
                }
                callers::late_emit_pause();
                self.emit_stamped(o.op, req.pid(), caller, o.nodeid);
                if flags.0 & FMODE_EXEC != 0 {
                    // The caller is about to become another program.
                    self.callers.forget(req.pid());
                }
            }
            Err(e) => reply.error(e),
        }
    }

    fn read(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        bump(&self.stats.read);
        let file = match self.files.get(fh.0) {
            Ok(f) => f,
            Err(e) => return reply.error(errno(e)),
        };
        let fd = match self.fd_of(&file) {
            Ok(fd) => fd,
            Err(e) => return reply.error(errno(e)),
        };
        // With kernel passthrough on, the open already counted as reading the whole file;
        // a cached open's READs are page-cache fills and readahead, not what was read.
        let observe = !matches!(file.io, Some(OpenIo::Cached { .. }));
        let _answering = observe.then(|| self.observe.answering());
        let read = read_buf::with(size as usize, |buf| match sys::pread(fd, buf, offset) {
            Ok(n) => {
                reply.data(&buf[..n]);
                Some(n)
            }
            Err(e) => {
                reply.error(errno(e));
                None
            }
        });
        if let Some(n) = read
            && observe
        {
            self.emit_stamped(
                Op::Read {
                    offset,
                    len: n as u64,
                },
                req.pid(),
                self.caller(req.pid()),
                file.nodeid,
            );
        }
    }

    fn write(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        data: &[u8],
        write_flags: WriteFlags,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyWrite,
    ) {
        bump(&self.stats.write);
        let result = self.files.get(fh.0).and_then(|f| {
            let fd = self.fd_of(&f)?;
            // The kernel flags writes by callers without CAP_FSETID; only a file that has set-id
            // bits needs the slower write that clears them.
            let kill = if write_flags.contains(WriteFlags::FUSE_WRITE_KILL_SUIDGID) {
                let st = sys::fstat(fd)?;
                kill_priv::has_set_id_bits(st.st_mode)
                    .then(|| kill_priv::caller(req.pid(), req.gid()))
            } else {
                None
            };
            let n = run_as_caller_would(kill.as_ref(), || sys::pwrite(fd, data, offset))?;
            Ok((f.nodeid, n))
        });
        match result {
            Ok((nodeid, n)) => {
                let _answering = self.observe.answering();
                reply.written(n as u32);
                let len = n as u64;
                let caller = self.caller(req.pid());
                self.emit_stamped(Op::Write { offset, len }, req.pid(), caller, nodeid);
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn flush(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _lock_owner: LockOwner,
        reply: ReplyEmpty,
    ) {
        bump(&self.stats.flush);
        // Writes reach the backing file before they return (no writeback cache), so close has
        // nothing left to flush. ENOSYS makes the kernel stop sending FLUSH: one round trip less
        // per close.
        reply.error(Errno::ENOSYS);
    }

    fn release(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        bump(&self.stats.release);
        let file = self.files.remove(fh.0);
        // Only a close of a file written with kernel passthrough tells the world anything: the
        // writes never reached the daemon, and the close is their one sign. Writes through the
        // daemon were observed one by one. Closing a file opened only for reading changes
        // nothing the world tracks either (the open already told it what was read); not
        // emitting those halves the observations of a scan. The kernel sends RELEASE after
        // close() has returned, so an observation of it lands before or after the caller's
        // next socket call by chance: one that says nothing must not take a place in the
        // stream's order at all (a command recorded after it would take the next place).
        let emits = file.as_ref().is_some_and(|f| f.writable && f.kernel_io);
        let _answering = emits.then(|| self.observe.answering());
        reply.ok();
        if let Some(f) = &file
            && (f.io.is_some() || f.writable)
            && let Ok(inode) = self.store.get(f.nodeid)
        {
            if let Some(io) = f.io {
                inode.opens.lock().release(io);
            }
            if f.writable {
                inode.own_writes.closed_for_writing();
            }
        }
        if let Some(f) = file.filter(|_| emits) {
            self.emit(Op::Close { wrote: true }, req.pid(), f.nodeid);
        }
    }

    fn fsync(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        bump(&self.stats.fsync);
        let result = self.files.get(fh.0).and_then(|f| {
            let fd = self.fd_of(&f)?.as_raw_fd();
            cvt(unsafe {
                if datasync {
                    libc::fdatasync(fd)
                } else {
                    libc::fsync(fd)
                }
            })
        });
        match result {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn opendir(&self, _req: &Request, _ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        bump(&self.stats.opendir);
        // Declining OPENDIR saves two round trips per directory visit (OPENDIR, RELEASEDIR),
        // and the kernel then caches listings on its own (FOPEN_CACHE_DIR). The watcher
        // invalidates a cached listing when its directory changes behind the mount.
        reply.error(Errno::ENOSYS);
    }

    fn readdir(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectory,
    ) {
        bump(&self.stats.readdir);
        let store = &self.store;
        let _ = fh;
        let result = self.list_dir(req, ino, offset, |e| {
            let ino = store.listing_ino(e.ino);
            !reply.add(
                INodeNo(ino),
                e.next_offset as u64,
                dirent_type(e.d_type),
                OsStr::from_bytes(&e.name),
            )
        });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn readdirplus(
        &self,
        req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        mut reply: ReplyDirectoryPlus,
    ) {
        bump(&self.stats.readdirplus);
        let parent = match self.inode(ino) {
            Ok(p) => p,
            Err(e) => return reply.error(e),
        };
        let store = &self.store;
        let opts = &self.opts;
        let _ = fh;
        let result = self.list_dir(req, ino, offset, |e| {
            let name = OsStr::from_bytes(&e.name);
            if &*e.name == b"." || &*e.name == b".." {
                // The kernel does not count lookups for dot entries; answer without one.
                let attr = placeholder_attr(store.listing_ino(e.ino), dirent_type(e.d_type));
                // Node id 0 tells the kernel not to link this entry.
                return !reply.add(
                    INodeNo(0),
                    e.next_offset as u64,
                    name,
                    &Duration::ZERO,
                    &attr,
                    Generation(0),
                );
            }
            let Ok(c) = cstr(name) else { return true };
            match store.lookup(&parent, &c) {
                Ok((inode, st)) => {
                    let full = reply.add(
                        INodeNo(inode.nodeid),
                        e.next_offset as u64,
                        name,
                        &opts.kernel_cache.ttl(),
                        &told_attr(&inode, &st),
                        Generation(inode.generation),
                    );
                    if full {
                        // Not sent, so the kernel will not count this lookup.
                        let _ = store.forget(inode.nodeid, 1);
                    }
                    !full
                }
                // Gone between listing and lookup: skip it, as a native listing might.
                Err(_) => true,
            }
        });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn releasedir(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: OpenFlags,
        reply: ReplyEmpty,
    ) {
        bump(&self.stats.releasedir);
        reply.ok();
    }

    fn fsyncdir(
        &self,
        _req: &Request,
        ino: INodeNo,
        _fh: FileHandle,
        datasync: bool,
        reply: ReplyEmpty,
    ) {
        bump(&self.stats.fsyncdir);
        let result = self.inode(ino).and_then(|i| {
            let fd = self
                .store
                .open(&i, libc::O_RDONLY | libc::O_DIRECTORY)
                .map_err(errno)?;
            let fd = fd.as_raw_fd();
            cvt(unsafe {
                if datasync {
                    libc::fdatasync(fd)
                } else {
                    libc::fsync(fd)
                }
            })
            .map_err(errno)
        });
        match result {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn statfs(&self, _req: &Request, ino: INodeNo, reply: ReplyStatfs) {
        bump(&self.stats.statfs);
        let result = self.inode(ino).and_then(|i| {
            let fd = self.store.path_fd(&i).map_err(errno)?;
            sys::statvfs(fd.as_fd()).map_err(errno)
        });
        match result {
            Ok(s) => reply.statfs(
                s.f_blocks,
                s.f_bfree,
                s.f_bavail,
                s.f_files,
                s.f_ffree,
                s.f_bsize as u32,
                s.f_namemax as u32,
                s.f_frsize as u32,
            ),
            Err(e) => reply.error(e),
        }
    }

    fn setxattr(
        &self,
        req: &Request,
        ino: INodeNo,
        name: &OsStr,
        value: &[u8],
        flags: i32,
        _position: u32,
        reply: ReplyEmpty,
    ) {
        bump(&self.stats.setxattr);
        let result = self.inode(ino).and_then(|i| {
            let (_hold, path) = self.xattr_path(&i).map_err(errno)?;
            let n = cstr(name).map_err(errno)?;
            i.own_writes.changed();
            cvt(unsafe {
                libc::setxattr(
                    path.as_ptr(),
                    n.as_ptr(),
                    value.as_ptr().cast(),
                    value.len(),
                    flags,
                )
            })
            .map_err(errno)
        });
        match result {
            Ok(_) => {
                let _answering = self.observe.answering();
                reply.ok();
                self.emit(Op::SetAttr, req.pid(), ino.0);
            }
            Err(e) => reply.error(e),
        }
    }

    fn getxattr(&self, _req: &Request, ino: INodeNo, name: &OsStr, size: u32, reply: ReplyXattr) {
        bump(&self.stats.getxattr);
        let result = self.inode(ino).and_then(|i| {
            let (_hold, path) = self.xattr_path(&i).map_err(errno)?;
            let n = cstr(name).map_err(errno)?;
            let mut buf = vec![0u8; size as usize];
            let r = unsafe {
                libc::getxattr(
                    path.as_ptr(),
                    n.as_ptr(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                )
            };
            sys::xattr_result(r, buf).map_err(errno)
        });
        let result = match result {
            Err(e) if e == Errno::ENODATA && self.no_selinux && name == "security.selinux" => {
                Err(Errno::EOPNOTSUPP)
            }
            other => other,
        };
        reply_xattr(reply, result);
    }

    fn listxattr(&self, _req: &Request, ino: INodeNo, size: u32, reply: ReplyXattr) {
        bump(&self.stats.listxattr);
        let result = self.inode(ino).and_then(|i| {
            let (_hold, path) = self.xattr_path(&i).map_err(errno)?;
            let mut buf = vec![0u8; size as usize];
            let r = unsafe { libc::listxattr(path.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
            sys::xattr_result(r, buf).map_err(errno)
        });
        reply_xattr(reply, result);
    }

    fn removexattr(&self, req: &Request, ino: INodeNo, name: &OsStr, reply: ReplyEmpty) {
        bump(&self.stats.removexattr);
        let result = self.inode(ino).and_then(|i| {
            let (_hold, path) = self.xattr_path(&i).map_err(errno)?;
            let n = cstr(name).map_err(errno)?;
            i.own_writes.changed();
            cvt(unsafe { libc::removexattr(path.as_ptr(), n.as_ptr()) }).map_err(errno)
        });
        match result {
            Ok(_) => {
                let _answering = self.observe.answering();
                reply.ok();
                self.emit(Op::SetAttr, req.pid(), ino.0);
            }
            Err(e) => reply.error(e),
        }
    }

    fn access(&self, _req: &Request, ino: INodeNo, _mask: AccessFlags, reply: ReplyEmpty) {
        bump(&self.stats.access);
        // With default_permissions the kernel checks permissions itself; this only confirms the
        // inode still exists (and answers F_OK).
        let result = self
            .inode(ino)
            .and_then(|i| self.stat_inode(&i).map_err(errno));
        match result {
            Ok(_) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        bump(&self.stats.create);
        let _answering = self.observe.answering();
        let opened = self.do_create(req, parent, name, mode, flags, &reply);
        self.reply_created(req, opened, reply);
    }

    fn tmpfile(
        &self,
        req: &Request,
        parent: INodeNo,
        mode: u32,
        _umask: u32,
        flags: i32,
        reply: ReplyCreate,
    ) {
        bump(&self.stats.tmpfile);
        let _answering = self.observe.answering();
        let opened = self.do_tmpfile(req, parent, mode, flags, &reply);
        self.reply_created(req, opened, reply);
    }

    fn fallocate(
        &self,
        req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        length: u64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        bump(&self.stats.fallocate);
        let result = self.files.get(fh.0).and_then(|f| {
            // fallocate clears set-id bits natively too, and FALLOCATE carries no kill flag.
            let fd = self.fd_of(&f)?;
            let st = sys::fstat(fd)?;
            let kill = self.kill_for(req, st.st_mode);
            run_as_caller_would(kill.as_ref(), || {
                cvt(unsafe { libc::fallocate(fd.as_raw_fd(), mode, offset as i64, length as i64) })
            })?;
            Ok(f.nodeid)
        });
        match result {
            Ok(nodeid) => {
                // Stamped before the reply like every change of content: see `setattr`.
                let caller = self.caller(req.pid());
                let _answering = self.observe.answering();
                reply.ok();
                let punch_hole = mode & libc::FALLOC_FL_PUNCH_HOLE != 0;
                self.emit_stamped(
                    Op::Fallocate {
                        offset,
                        len: length,
                        punch_hole,
                    },
                    req.pid(),
                    caller,
                    nodeid,
                );
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn lseek(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        offset: i64,
        whence: i32,
        reply: ReplyLseek,
    ) {
        bump(&self.stats.lseek);
        match self
            .files
            .get(fh.0)
            .and_then(|f| sys::lseek(self.fd_of(&f)?, offset, whence))
        {
            Ok(off) => reply.offset(off),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn ioctl(
        &self,
        _req: &Request,
        _ino: INodeNo,
        _fh: FileHandle,
        _flags: fuser::IoctlFlags,
        _cmd: u32,
        _in_data: &[u8],
        _out_size: u32,
        reply: fuser::ReplyIoctl,
    ) {
        // Only unrestricted ioctls would reach here, and regular files have none worth passing
        // on; ENOTTY is what isatty() and friends get from a plain file too.
        reply.error(Errno::ENOTTY);
    }

    fn copy_file_range(
        &self,
        req: &Request,
        _ino_in: INodeNo,
        fh_in: FileHandle,
        offset_in: u64,
        _ino_out: INodeNo,
        fh_out: FileHandle,
        offset_out: u64,
        len: u64,
        _flags: CopyFileRangeFlags,
        reply: ReplyWrite,
    ) {
        bump(&self.stats.copy_file_range);
        let result = (|| {
            let fin = self.files.get(fh_in.0)?;
            let fout = self.files.get(fh_out.0)?;
            let (fd_in, fd_out) = (self.fd_of(&fin)?, self.fd_of(&fout)?);
            let mut off_in = offset_in as i64;
            let mut off_out = offset_out as i64;
            let n = unsafe {
                libc::copy_file_range(
                    fd_in.as_raw_fd(),
                    &mut off_in,
                    fd_out.as_raw_fd(),
                    &mut off_out,
                    len as usize,
                    0,
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            Ok((fin.nodeid, fout.nodeid, n as u64))
        })();
        match result {
            Ok((from, to, n)) => {
                // Stamped before the reply like every change of content (see `setattr`): a `cp`
                // copies with this and is gone at once, and a copy it made from another
                // terminal was the agent's read of the source and the agent's write of the copy.
                let caller = self.caller(req.pid());
                let _answering = self.observe.answering();
                reply.written(n.min(u32::MAX as u64) as u32);
                if let Some(from) = self.store.path_of(from) {
                    self.emit_stamped(
                        Op::CopyIn {
                            from,
                            offset: offset_out,
                            len: n,
                        },
                        req.pid(),
                        caller,
                        to,
                    );
                }
            }
            Err(e) => reply.error(errno(e)),
        }
    }
}

/// Attributes the kernel only reads the inode number and type of: negative lookups (node id 0)
/// and the `.`/`..` entries of a listing, which it never links.
fn placeholder_attr(ino: u64, kind: fuser::FileType) -> FileAttr {
    FileAttr {
        ino: INodeNo(ino),
        size: 0,
        blocks: 0,
        atime: UNIX_EPOCH,
        mtime: UNIX_EPOCH,
        ctime: UNIX_EPOCH,
        crtime: UNIX_EPOCH,
        kind,
        perm: 0,
        nlink: 0,
        uid: 0,
        gid: 0,
        rdev: 0,
        blksize: 0,
        flags: 0,
    }
}

fn reply_xattr(reply: ReplyXattr, result: Res<sys::XattrValue>) {
    match result {
        Ok(sys::XattrValue::Size(n)) => reply.size(n as u32),
        Ok(sys::XattrValue::Data(data)) => reply.data(&data),
        Err(e) => reply.error(e),
    }
}
