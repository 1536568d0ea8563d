//! Opening and creating files (OPEN, CREATE): choosing how a handle's I/O travels (kernel
//! passthrough, page cache, or through the daemon), registering passthrough backings and filing
//! the handle. Apart because these helpers decide together what the open reply says, and no
//! other operation needs them beyond `fd_of`.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

use fuser::{FileAttr, FopenFlags, INodeNo, ReplyCreate, ReplyOpen, Request};
use tracing::warn;

use super::{Passthrough, Res, errno, told_attr};
use crate::fs::credentials::AsCaller;
use crate::fs::handles::OpenFile;
use crate::fs::inode_store::Inode;
use crate::fs::kill_priv::{self, run_as_caller_would};
use crate::fs::open_mode::OpenIo;
use crate::fs::self_changes::NameChange;
use crate::fs::sys::{self, cstr};
use crate::observation::Op;

/// The kernel's `__FMODE_EXEC` open flag (not in libc): the file is opened to be executed, so
/// the opener is about to run another program.
pub(super) const FMODE_EXEC: i32 = 0o40;

/// A file opened on the backing tree, not yet announced to the kernel.
pub(super) struct Opened {
    pub(super) fh: u64,
    pub(super) backing: Option<Arc<fuser::BackingId>>,
    pub(super) nodeid: u64,
    pub(super) op: Op,
    /// Set for CREATE, whose reply carries the new entry.
    pub(super) attr: Option<FileAttr>,
    pub(super) generation: u64,
    /// The reply's flags when `backing` is `None`: FOPEN_KEEP_CACHE when the pages the kernel
    /// holds are current, FOPEN_DIRECT_IO for writes that must reach the daemon (set-id bits to
    /// clear) although kernel passthrough is on (the only non-passthrough mode the kernel lets
    /// coexist with passthrough opens of the same inode).
    pub(super) fopen: FopenFlags,
}

impl Opened {
    fn new(
        inode: &Inode,
        (fh, backing, fopen): (u64, Option<Arc<fuser::BackingId>>, FopenFlags),
        op: Op,
        attr: Option<FileAttr>,
    ) -> Self {
        Self {
            fh,
            backing,
            nodeid: inode.nodeid,
            op,
            attr,
            generation: inode.generation,
            fopen,
        }
    }
}

/// Flags for the daemon's own descriptor of an open file. O_APPEND would make `pwrite` ignore
/// the offset the kernel already chose, O_DIRECT would demand aligned buffers.
fn backing_open_flags(flags: i32) -> i32 {
    flags & !(libc::O_APPEND | libc::O_DIRECT | libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY)
}

/// Flags for a descriptor opened after the open itself (see `OpenFile`): never truncate again.
fn late_open_flags(flags: i32) -> i32 {
    backing_open_flags(flags) & !libc::O_TRUNC
}

/// What an OPEN or CREATE reply says: the registration to pass through, or the flags of an
/// open without one.
fn reply_mode(
    inode: &Inode,
    (io, direct): (Option<OpenIo>, bool),
    held: Option<&Arc<fuser::BackingId>>,
    pages_kept: bool,
) -> (Option<Arc<fuser::BackingId>>, FopenFlags) {
    match io {
        Some(OpenIo::Cached { keep_cache }) => {
            inode.set_may_have_pages();
            let flags = if keep_cache {
                FopenFlags::FOPEN_KEEP_CACHE
            } else {
                FopenFlags::empty()
            };
            (None, flags)
        }
        _ if direct => (None, FopenFlags::FOPEN_DIRECT_IO),
        // A passthrough reply ignores the flags. Without a registration (no kernel passthrough)
        // the daemon serves every read and the watcher drops pages changed behind the mount, so
        // they may be kept across opens; without the watcher, each open starts from none.
        _ if pages_kept => (held.cloned(), FopenFlags::FOPEN_KEEP_CACHE),
        _ => (held.cloned(), FopenFlags::empty()),
    }
}

fn access_mode(flags: i32) -> (bool, bool) {
    match flags & libc::O_ACCMODE {
        libc::O_RDONLY => (true, false),
        libc::O_WRONLY => (false, true),
        _ => (true, true),
    }
}

impl Passthrough {
    /// Registers (or reuses) the inode's kernel passthrough backing for an open descriptor.
    /// `retain`: keep a new registration after the last close (see `retained`). Only reads
    /// ask for it: a file being written is as likely deleted soon (build outputs, temporary
    /// files), and a kept registration turns its unlink into an orphan that ext4 frees later.
    fn backing_for(
        &self,
        inode: &Inode,
        fd: &OwnedFd,
        retain: bool,
        open_backing: impl FnOnce(&OwnedFd) -> io::Result<fuser::BackingId>,
    ) -> Option<Arc<fuser::BackingId>> {
        if !self.passthrough.load(Ordering::Relaxed) {
            return None;
        }
        let mut slot = inode.backing_id.lock();
        if let Some(id) = self.existing_backing(inode, &mut slot) {
            return Some(id);
        }
        match open_backing(fd) {
            Ok(id) => {
                let id = Arc::new(id);
                *slot = Arc::downgrade(&id);
                if retain {
                    self.store
                        .retained
                        .keep(inode.nodeid, inode.generation, id.clone());
                }
                Some(id)
            }
            Err(e) => {
                // Without CAP_SYS_ADMIN (or on a stacked backing file system) passthrough cannot
                // work at all; serve I/O through the daemon from now on instead of failing opens.
                warn!(
                    "kernel passthrough unavailable ({e}); serving reads and writes in the daemon"
                );
                self.passthrough.store(false, Ordering::Relaxed);
                *self.stats.data_path.lock() = Some(format!(
                    "daemon: every read and write passes through worldfs (kernel passthrough \
                     failed: {e})"
                ));
                None
            }
        }
    }

    /// Files an open under a new handle; returns it with the registration the reply passes
    /// through (if any) and the reply's flags otherwise. `io`: the mode `open_mode` chose
    /// (`None`: no kernel passthrough, or writes that must come through the daemon, `direct`).
    ///
    /// `held` is the inode's registration, which a cached open holds too, though its reply does
    /// not pass it: it keeps the backing inode alive while the handle is open, so a descriptor
    /// opened later (a page-cache miss after the file was deleted or replaced) still reaches
    /// it, and the next open of the file finds it.
    fn insert_opened(
        &self,
        inode: &Inode,
        (fd, held): (Option<OwnedFd>, Option<Arc<fuser::BackingId>>),
        flags: i32,
        write: bool,
        (io, direct): (Option<OpenIo>, bool),
    ) -> (u64, Option<Arc<fuser::BackingId>>, FopenFlags) {
        let pages_kept = self.opts.kernel_cache.keeps_pages();
        let (reply_backing, fopen) = reply_mode(inode, (io, direct), held.as_ref(), pages_kept);
        if write {
            inode.own_writes.opened_for_writing();
        }
        let fh = self.files.insert(OpenFile::new(
            fd,
            late_open_flags(flags),
            inode.nodeid,
            write,
            held,
            (io, reply_backing.is_some()),
        ));
        (fh, reply_backing, fopen)
    }

    /// The inode's passthrough registration if it has one: shared with an open still running,
    /// or retained since an earlier one closed.
    fn existing_backing(
        &self,
        inode: &Inode,
        slot: &mut Weak<fuser::BackingId>,
    ) -> Option<Arc<fuser::BackingId>> {
        if let Some(id) = slot.upgrade() {
            return Some(id);
        }
        let id = self.store.retained.get(inode.nodeid, inode.generation)?;
        *slot = Arc::downgrade(&id);
        Some(id)
    }

    /// The handle's own descriptor, opened now if the open did without one.
    pub(super) fn fd_of<'a>(&self, file: &'a OpenFile) -> io::Result<BorrowedFd<'a>> {
        file.fd(|flags| {
            let inode = self.store.get(file.nodeid)?;
            self.store.open(&inode, flags)
        })
    }

    /// Opens the backing file; the caller replies, so errors never leave a reply unsent.
    pub(super) fn do_open(
        &self,
        req: &Request,
        ino: INodeNo,
        flags: i32,
        reply: &ReplyOpen,
    ) -> Res<Opened> {
        let inode = self.inode(ino)?;
        let (read, write) = access_mode(flags);
        let truncate = flags & libc::O_TRUNC != 0;
        let reads_only = !write && !truncate;
        let passthrough = self.passthrough.load(Ordering::Relaxed);
        // Set-id bits only matter to opens that can write; read-only opens cost nothing more.
        let mode = if reads_only {
            0
        } else {
            self.stat_inode(&inode).map_err(errno)?.st_mode
        };
        // Passthrough writes never reach the daemon, and the backing file system writes them as
        // root, keeping set-id bits a native write by the caller would clear.
        let direct = write && kill_priv::has_set_id_bits(mode) && passthrough;
        let pages_kept = self.opts.kernel_cache.keeps_pages();
        let io = (passthrough && !direct).then(|| {
            inode
                .opens
                .lock()
                .open(reads_only, inode.told_size(), pages_kept)
        });
        let opened = self.open_as(req, &inode, flags, (io, direct, mode), reply);
        if opened.is_err()
            && let Some(io) = io
        {
            inode.opens.lock().release(io);
        }
        let op = Op::Open {
            read,
            write,
            truncate,
            created: false,
        };
        Ok(Opened::new(&inode, opened?, op, None))
    }

    /// The backing side of `do_open`, once the I/O mode is chosen: a handle, with the
    /// registration the reply passes through (if any) and the reply's flags otherwise.
    fn open_as(
        &self,
        req: &Request,
        inode: &Inode,
        flags: i32,
        (io, direct, mode): (Option<OpenIo>, bool, u32),
        reply: &ReplyOpen,
    ) -> Res<(u64, Option<Arc<fuser::BackingId>>, FopenFlags)> {
        let (_, write) = access_mode(flags);
        let truncate = flags & libc::O_TRUNC != 0;
        let reads_only = !write && !truncate;
        if reads_only && io.is_some() {
            // Nothing to open on the backing tree when the inode still has a registration: the
            // kernel opens its own backing file from it (passthrough), or the handle holds it
            // while pages are read on demand (cached). Permissions were checked by the kernel
            // (default_permissions) before OPEN. Its own statement: the slot's lock must be
            // gone before `backing_for` registers.
            let existing = self.existing_backing(inode, &mut inode.backing_id.lock());
            if existing.is_some() {
                return Ok(self.insert_opened(inode, (None, existing), flags, false, (io, direct)));
            }
        }
        // The kernel sends O_TRUNC in OPEN only with FUSE_ATOMIC_O_TRUNC, which `init` does
        // not ask for; honoured anyway, as the protocol allows it.
        let kill = if truncate {
            self.kill_for(req, mode)
        } else {
            None
        };
        let fd = run_as_caller_would(kill.as_ref(), || {
            self.store.open(inode, backing_open_flags(flags))
        })
        .map_err(errno)?;
        let held = if direct {
            None
        } else {
            self.backing_for(inode, &fd, reads_only, |fd| reply.open_backing(fd))
        };
        Ok(self.insert_opened(inode, (Some(fd), held), flags, write, (io, direct)))
    }

    pub(super) fn do_create(
        &self,
        req: &Request,
        parent: INodeNo,
        name: &OsStr,
        mode: u32,
        flags: i32,
        reply: &ReplyCreate,
    ) -> Res<Opened> {
        let parent_inode = self.inode(parent)?;
        let cname = cstr(name).map_err(errno)?;
        let pfd = self.store.path_fd(&parent_inode).map_err(errno)?;
        // The kernel sends CREATE only for names it believes absent; if it raced with an external
        // create (no event of ours then), the unmatched note simply expires.
        let fd = {
            let _as = AsCaller::switch(req.uid(), req.gid()).map_err(errno)?;
            let created = [(&*parent_inode, name, NameChange::Created)];
            self.changing_names(&created, || {
                sys::openat(
                    pfd.as_fd(),
                    &cname,
                    backing_open_flags(flags) | libc::O_CREAT,
                    mode,
                )
            })
            .map_err(errno)?
        };
        let (inode, st) = self.store.lookup(&parent_inode, &cname).map_err(errno)?;
        Ok(self.file_created(inode, &st, fd, flags, reply))
    }

    /// TMPFILE: a file with no name in `parent` (`O_TMPFILE`), created as the caller, opened
    /// as CREATE opens. It gets a name only if it is linked (LINK); until then nothing about it
    /// reaches the world, which knows files by path.
    pub(super) fn do_tmpfile(
        &self,
        req: &Request,
        parent: INodeNo,
        mode: u32,
        flags: i32,
        reply: &ReplyCreate,
    ) -> Res<Opened> {
        let parent_inode = self.inode(parent)?;
        let pfd = self.store.path_fd(&parent_inode).map_err(errno)?;
        // O_EXCL keeps the file from ever being linked; it must reach the backing open. The
        // kernel's flags may or may not carry O_TMPFILE's bits: they are set here either way.
        let flags = flags & !(libc::O_TMPFILE | libc::O_CREAT);
        let open_flags = backing_open_flags(flags) | (flags & libc::O_EXCL) | libc::O_TMPFILE;
        let fd = {
            let _as = AsCaller::switch(req.uid(), req.gid()).map_err(errno)?;
            sys::openat(pfd.as_fd(), c".", open_flags, mode).map_err(errno)?
        };
        let (inode, st) = self.store.adopt_unnamed(fd.as_fd()).map_err(errno)?;
        Ok(self.file_created(inode, &st, fd, flags, reply))
    }

    /// What CREATE and TMPFILE share once the backing file is open: the I/O mode, the
    /// passthrough registration, the handle, and the observation.
    fn file_created(
        &self,
        inode: Arc<Inode>,
        st: &libc::stat,
        fd: OwnedFd,
        flags: i32,
        reply: &ReplyCreate,
    ) -> Opened {
        let (read, write) = access_mode(flags);
        let passthrough = self.passthrough.load(Ordering::Relaxed);
        // As in `do_open`: writes to a set-id file must come through the daemon.
        let direct = write && kill_priv::has_set_id_bits(st.st_mode) && passthrough;
        let pages_kept = self.opts.kernel_cache.keeps_pages();
        let io = (passthrough && !direct).then(|| inode.opens.lock().open(false, 0, pages_kept));
        let held = if direct {
            None
        } else {
            self.backing_for(&inode, &fd, false, |fd| reply.open_backing(fd))
        };
        let handle = self.insert_opened(&inode, (Some(fd), held), flags, write, (io, direct));
        let op = Op::Open {
            read,
            write,
            truncate: flags & libc::O_TRUNC != 0,
            created: true,
        };
        let attr = told_attr(&inode, st);
        Opened::new(&inode, handle, op, Some(attr))
    }
}
