//! The inodes the kernel knows about: FUSE node id -> how to reach the backing inode.
//!
//! Node ids are the backing `st_ino` (fuser reports the node id as `st_ino`, and git's index
//! compares `st_ino`, so virtual numbers would make every `git status` re-read the tree). Inodes
//! on another device (a submount) or numbered 1 get synthetic ids with the top bit set, and the
//! mount root is always node 1 as FUSE requires.
//!
//! Each inode is reached through a kernel file handle, not a held descriptor, so a 100k-file tree
//! stays far below the descriptor limit. Directories additionally cache an `O_PATH` descriptor
//! (bounded) because every lookup starts from one.
//!
//! Without handles (a mount made without root cannot open by handle) an inode holds an `O_PATH`
//! descriptor while a budget of them lasts, a share of the daemon's open-file limit; beyond it,
//! inodes are reached through the name they were last seen by, checked to still lead to them.
//! Holding one per inode without a bound made `find` of an 18,000-file tree fail with "Too many
//! open files" under a 20,000 limit.

use std::ffi::{CStr, OsStr, OsString};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::SystemTime;

use dashmap::DashMap;
use fuser::BackingId;
use parking_lot::Mutex;

use super::file_handle::FileHandle;
use super::open_mode::InodeOpens;
use super::own_writes::OwnWrites;
use super::retained::{self, Retained};
use super::sys;

pub const ROOT_ID: u64 = 1;
const SYNTHETIC_BASE: u64 = 1 << 63;
/// Directory descriptors kept open for lookups; beyond this, lookups reopen by handle (or by
/// name). At most a quarter of the open-file limit.
const MAX_CACHED_DIR_FDS: usize = 4096;
/// Descriptors left for everything else: open files, the socket, the watcher, the world's reads.
const RESERVED_FDS: usize = 1024;

/// How the store reaches one backing inode.
enum Backing {
    /// The SOURCE directory itself, through the descriptor opened before mounting.
    Root,
    Handle(FileHandle),
    /// An `O_PATH` descriptor, for file systems (or privileges) without usable handles.
    Fd(HeldFd),
    /// Without handles, once the budget of held descriptors is spent: the inode is reached by
    /// the name it was last seen by, in its parent, and only if that name still leads to it.
    Name,
}

/// A descriptor counted against the store's budget while it is held.
struct HeldFd {
    fd: OwnedFd,
    held: Arc<AtomicUsize>,
}

impl Drop for HeldFd {
    fn drop(&mut self) {
        self.held.fetch_sub(1, Ordering::Relaxed);
    }
}

pub struct Inode {
    pub nodeid: u64,
    /// Bumped each time the node id is reused for a different backing inode, so the kernel
    /// drops what it cached for the old one.
    pub generation: u64,
    pub dev: u64,
    pub ino: u64,
    /// `S_IFMT` bits of the backing inode.
    pub kind: u32,
    backing: Backing,
    nlookup: AtomicU64,
    /// Last name this inode was reached by, for reporting paths: (parent node id, name).
    name: Mutex<Option<(u64, Box<OsStr>)>>,
    /// Kernel passthrough registration, shared by every open of this inode.
    pub backing_id: Mutex<Weak<BackingId>>,
    /// Fingerprint of the attributes last sent to the kernel for this inode (0: none yet), so
    /// the watcher can tell the echo of the mount's own change from a change made behind it.
    told: AtomicU64,
    /// Size last sent to the kernel: what an open goes by to choose its mode.
    told_size: AtomicU64,
    /// Open files of this inode by I/O mode (see `open_mode`).
    pub opens: Mutex<InodeOpens>,
    /// Set once an open used the page cache: from then on the kernel may hold pages of it.
    may_have_pages: AtomicBool,
    /// Writes and attribute changes the mount is making, for the watcher to tell their echo.
    pub own_writes: OwnWrites,
}

/// What the kernel caches of a stat, folded into 64 bits (never 0).
pub fn attr_fingerprint(st: &libc::stat) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::hash::DefaultHasher::new();
    (
        st.st_size,
        st.st_mtime,
        st.st_mtime_nsec,
        st.st_ctime,
        st.st_ctime_nsec,
        st.st_mode,
        st.st_nlink,
        st.st_uid,
        st.st_gid,
        st.st_blocks,
    )
        .hash(&mut h);
    h.finish() | 1
}

impl Inode {
    /// Records that the kernel was just given the attributes in `st`.
    pub fn told(&self, st: &libc::stat) {
        self.told.store(attr_fingerprint(st), Ordering::Relaxed);
        self.told_size
            .store(u64::try_from(st.st_size).unwrap_or(0), Ordering::Relaxed);
    }

    pub fn told_size(&self) -> u64 {
        self.told_size.load(Ordering::Relaxed)
    }

    pub fn set_may_have_pages(&self) {
        self.may_have_pages.store(true, Ordering::Relaxed);
    }

    pub fn may_have_pages(&self) -> bool {
        self.may_have_pages.load(Ordering::Relaxed)
    }

    /// Whether `st` is exactly what the kernel was last given for this inode.
    pub fn kernel_has(&self, st: &libc::stat) -> bool {
        self.told.load(Ordering::Relaxed) == attr_fingerprint(st)
    }

    /// Whether `backing` names the same backing inode as this one. File handles carry the
    /// inode's generation, so a reused inode number shows up as a different handle.
    fn same_backing(&self, backing: &Backing, dev: u64, kind: u32) -> bool {
        if self.dev != dev || self.kind != kind {
            return false;
        }
        match (&self.backing, backing) {
            (Backing::Handle(a), Backing::Handle(b)) => a == b,
            // Without handles, (dev, ino, type) is all there is to compare.
            _ => true,
        }
    }

    pub fn is_dir(&self) -> bool {
        self.kind == libc::S_IFDIR
    }
    pub fn is_symlink(&self) -> bool {
        self.kind == libc::S_IFLNK
    }
}

/// A descriptor for an inode: either borrowed from a cache or opened for this call.
pub enum InodeFd {
    Shared(Arc<OwnedFd>),
    Owned(OwnedFd),
}

impl AsFd for InodeFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        match self {
            InodeFd::Shared(fd) => fd.as_fd(),
            InodeFd::Owned(fd) => fd.as_fd(),
        }
    }
}

pub struct InodeStore {
    root_fd: Arc<OwnedFd>,
    root_dev: u64,
    root_ino: u64,
    root_mount_id: Option<i32>,
    map: DashMap<u64, Arc<Inode>>,
    synthetic: DashMap<(u64, u64), u64>,
    next_synthetic: AtomicU64,
    /// Cached directory descriptors by node id, with the generation of the inode they belong to
    /// (a reused node id must not find the old directory's descriptor). Kept beside the inodes
    /// rather than in them: only directories, 1% of a tree, have one.
    dir_fds: DashMap<u64, (u64, Arc<OwnedFd>)>,
    cached_dir_fds: AtomicUsize,
    max_cached_dir_fds: usize,
    /// `Backing::Fd` descriptors held, and how many may be (without handles).
    held_fds: Arc<AtomicUsize>,
    max_held_fds: usize,
    /// Regular files' data goes through kernel passthrough, so the kernel holds no pages of them
    /// that a change behind the mount could leave stale (only attributes).
    pub no_file_pages: AtomicBool,
    /// Passthrough registrations kept after their last close; they follow the inodes' lifetime.
    pub retained: Retained<Arc<BackingId>>,
}

impl InodeStore {
    /// `root_fd` is the SOURCE directory, opened before anything was mounted over it.
    pub fn new(root_fd: OwnedFd) -> io::Result<Self> {
        let limit =
            sys::nofile_limit().map_or(usize::MAX, |n| usize::try_from(n).unwrap_or(usize::MAX));
        Self::build(root_fd, limit, true)
    }

    /// [`InodeStore::new`] for a daemon that may hold `limit` descriptors, using file handles
    /// only if `handles` and they work.
    fn build(root_fd: OwnedFd, limit: usize, handles: bool) -> io::Result<Self> {
        let max_cached_dir_fds = MAX_CACHED_DIR_FDS.min(limit / 4);
        let max_held_fds = limit.saturating_sub(max_cached_dir_fds + RESERVED_FDS) / 2;
        let st = sys::fstat(root_fd.as_fd())?;
        // Handles are an optimisation: without them (unprivileged, or a file system that cannot
        // export them) inodes hold an O_PATH descriptor while the budget lasts, then go by name.
        let root_mount_id = FileHandle::of(root_fd.as_fd(), sys::EMPTY)
            .and_then(|h| h.open(root_fd.as_fd(), libc::O_PATH).map(|_| h.mount_id))
            .ok()
            .filter(|_| handles);
        let root = Arc::new(Inode {
            nodeid: ROOT_ID,
            generation: 0,
            dev: st.st_dev,
            ino: st.st_ino,
            kind: st.st_mode & libc::S_IFMT,
            backing: Backing::Root,
            nlookup: AtomicU64::new(1),
            name: Mutex::new(None),
            backing_id: Mutex::new(Weak::new()),
            told: AtomicU64::new(0),
            told_size: AtomicU64::new(0),
            opens: Mutex::new(InodeOpens::default()),
            may_have_pages: AtomicBool::new(false),
            own_writes: OwnWrites::default(),
        });
        let map = DashMap::new();
        map.insert(ROOT_ID, root);
        Ok(Self {
            root_fd: Arc::new(root_fd),
            root_dev: st.st_dev,
            root_ino: st.st_ino,
            root_mount_id,
            map,
            synthetic: DashMap::new(),
            next_synthetic: AtomicU64::new(SYNTHETIC_BASE),
            dir_fds: DashMap::new(),
            cached_dir_fds: AtomicUsize::new(0),
            max_cached_dir_fds,
            held_fds: Arc::new(AtomicUsize::new(0)),
            max_held_fds,
            no_file_pages: AtomicBool::new(false),
            retained: Retained::new(retained::CAPACITY),
        })
    }

    pub fn uses_file_handles(&self) -> bool {
        self.root_mount_id.is_some()
    }

    /// The device SOURCE's directory is on.
    pub fn root_dev(&self) -> u64 {
        self.root_dev
    }

    pub fn root_fd(&self) -> BorrowedFd<'_> {
        self.root_fd.as_fd()
    }

    pub fn get(&self, nodeid: u64) -> io::Result<Arc<Inode>> {
        self.map
            .get(&nodeid)
            .map(|i| i.clone())
            .ok_or_else(|| io::Error::from_raw_os_error(libc::ESTALE))
    }

    /// The node id a backing inode is shown under.
    pub fn nodeid_for(&self, dev: u64, ino: u64) -> u64 {
        if dev == self.root_dev {
            if ino == self.root_ino {
                return ROOT_ID;
            }
            if ino > ROOT_ID && ino < SYNTHETIC_BASE {
                return ino;
            }
        }
        *self
            .synthetic
            .entry((dev, ino))
            .or_insert_with(|| self.next_synthetic.fetch_add(1, Ordering::Relaxed))
    }

    /// The `d_ino` a directory listing shows for a backing inode number on the root's device.
    pub fn listing_ino(&self, ino: u64) -> u64 {
        if ino == self.root_ino { ROOT_ID } else { ino }
    }

    /// An `O_PATH` descriptor for `inode`, cached for directories.
    pub fn path_fd(&self, inode: &Inode) -> io::Result<InodeFd> {
        self.path_fd_within(inode, 0)
    }

    /// [`InodeStore::path_fd`], `depth` directories below a name-backed inode being reached.
    fn path_fd_within(&self, inode: &Inode, depth: usize) -> io::Result<InodeFd> {
        match &inode.backing {
            Backing::Root => Ok(InodeFd::Shared(self.root_fd.clone())),
            Backing::Fd(held) => Ok(InodeFd::Owned(held.fd.try_clone()?)),
            Backing::Handle(_) | Backing::Name => {
                if !inode.is_dir() {
                    return self
                        .reach(inode, libc::O_PATH | libc::O_NOFOLLOW, depth)
                        .map(InodeFd::Owned);
                }
                if let Some(e) = self.dir_fds.get(&inode.nodeid)
                    && e.0 == inode.generation
                {
                    return Ok(InodeFd::Shared(e.1.clone()));
                }
                let fd = self.reach(inode, libc::O_PATH | libc::O_DIRECTORY, depth)?;
                // A soft bound: threads racing past it overshoot by a few descriptors at most.
                if self.cached_dir_fds.load(Ordering::Relaxed) >= self.max_cached_dir_fds {
                    return Ok(InodeFd::Owned(fd));
                }
                let fd = Arc::new(fd);
                // Two threads may open the same directory at once: the first one cached wins.
                // A descriptor left by an older generation of this node id is replaced.
                let mut slot = self.dir_fds.entry(inode.nodeid).or_insert_with(|| {
                    self.cached_dir_fds.fetch_add(1, Ordering::Relaxed);
                    (inode.generation, fd.clone())
                });
                if slot.0 != inode.generation {
                    *slot = (inode.generation, fd);
                }
                Ok(InodeFd::Shared(slot.1.clone()))
            }
        }
    }

    /// Opens `inode` with real access flags (not `O_PATH`).
    pub fn open(&self, inode: &Inode, flags: i32) -> io::Result<OwnedFd> {
        let flags = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOCTTY);
        // `/proc/self/fd/N` is a link to follow: with the caller's O_NOFOLLOW (grep -r and
        // find pass it) the open failed with ELOOP. The kernel never opens a symlink here.
        let reopen = |fd: BorrowedFd<'_>| {
            let path = sys::proc_fd_path(fd.as_raw_fd());
            sys::openat(self.root_fd.as_fd(), &path, flags & !libc::O_NOFOLLOW, 0)
        };
        match &inode.backing {
            Backing::Root => sys::openat(self.root_fd.as_fd(), c".", flags, 0),
            Backing::Handle(h) => h.open(self.root_fd.as_fd(), flags),
            Backing::Fd(held) => reopen(held.fd.as_fd()),
            // Checked to be this inode before anything (O_TRUNC) is done to it.
            Backing::Name => reopen(
                self.by_name(inode, libc::O_PATH | libc::O_NOFOLLOW, 0)?
                    .as_fd(),
            ),
        }
    }

    /// Opens a handle- or name-backed `inode` with `flags` (`O_PATH` ones).
    fn reach(&self, inode: &Inode, flags: i32, depth: usize) -> io::Result<OwnedFd> {
        match &inode.backing {
            Backing::Handle(h) => h.open(self.root_fd.as_fd(), flags),
            Backing::Name => self.by_name(inode, flags, depth),
            Backing::Root | Backing::Fd(_) => Err(io::Error::from_raw_os_error(libc::EINVAL)),
        }
    }

    /// Opens `inode` through the name it was last seen by, in its parent (reached the same way
    /// if need be), with `flags`; ESTALE if that name now leads elsewhere or nowhere: the
    /// kernel then looks the name up again.
    fn by_name(&self, inode: &Inode, flags: i32, depth: usize) -> io::Result<OwnedFd> {
        let stale = || io::Error::from_raw_os_error(libc::ESTALE);
        // Names can form a loop only through concurrent renames.
        if depth > 4096 {
            return Err(io::Error::from_raw_os_error(libc::ELOOP));
        }
        let (parent, name) = {
            let slot = inode.name.lock();
            let (parent, name) = slot.as_ref().ok_or_else(stale)?;
            (*parent, sys::cstr(name)?)
        };
        let parent = self.get(parent)?;
        let pfd = self.path_fd_within(&parent, depth + 1)?;
        let fd = sys::openat(pfd.as_fd(), &name, flags | libc::O_NOFOLLOW, 0).map_err(|e| {
            if e.raw_os_error() == Some(libc::ENOENT) {
                stale()
            } else {
                e
            }
        })?;
        let st = sys::fstat(fd.as_fd())?;
        if st.st_dev == inode.dev
            && st.st_ino == inode.ino
            && st.st_mode & libc::S_IFMT == inode.kind
        {
            Ok(fd)
        } else {
            Err(stale())
        }
    }

    /// Resolves `name` in `parent`, counting one kernel reference to the result.
    pub fn lookup(&self, parent: &Inode, name: &CStr) -> io::Result<(Arc<Inode>, libc::stat)> {
        let pfd = self.path_fd(parent)?;
        let st = sys::fstatat(pfd.as_fd(), name, libc::AT_SYMLINK_NOFOLLOW)?;
        let backing = self.backing_for(pfd.as_fd(), name)?;
        let name_os = OsStr::from_bytes(name.to_bytes());
        let inode = self.insert(&st, backing, Some((parent.nodeid, name_os)));
        Ok((inode, st))
    }

    /// Takes in a file that has no name (`O_TMPFILE`), open as `fd`, counting one kernel
    /// reference to it. It is reached through its handle, or through a descriptor held for it
    /// (over the budget if need be: with no name there is no other way), until it is linked.
    pub fn adopt_unnamed(&self, fd: BorrowedFd<'_>) -> io::Result<(Arc<Inode>, libc::stat)> {
        let st = sys::fstat(fd)?;
        let backing = match self.handle_of(fd, c"")? {
            Some(handle) => Backing::Handle(handle),
            None => {
                let proc_path = sys::proc_fd_path(fd.as_raw_fd());
                // Following the magic link (no O_NOFOLLOW) is what reaches the file.
                let path_fd = sys::openat(self.root_fd.as_fd(), &proc_path, libc::O_PATH, 0)?;
                self.held_fds.fetch_add(1, Ordering::Relaxed);
                Backing::Fd(HeldFd {
                    fd: path_fd,
                    held: self.held_fds.clone(),
                })
            }
        };
        Ok((self.insert(&st, backing, None), st))
    }

    /// Enters the inode `st` describes, or counts one more reference to the one known.
    fn insert(&self, st: &libc::stat, backing: Backing, name: Option<(u64, &OsStr)>) -> Arc<Inode> {
        let nodeid = self.nodeid_for(st.st_dev, st.st_ino);
        let kind = st.st_mode & libc::S_IFMT;
        let existing = self.map.get(&nodeid).map(|e| e.clone());
        // A different backing under a known node id means ext4 reused the inode number of a
        // deleted file: the new inode gets the next generation so the kernel drops its old one.
        let generation = match existing {
            Some(existing) if existing.same_backing(&backing, st.st_dev, kind) => {
                existing.nlookup.fetch_add(1, Ordering::Relaxed);
                if let Some((parent, name)) = name {
                    let mut slot = existing.name.lock();
                    // Usually the same name again: keep sharing it rather than allocating.
                    if !matches!(&*slot, Some((p, n)) if *p == parent && **n == *name) {
                        *slot = Some((parent, Box::from(name)));
                    }
                }
                return existing;
            }
            Some(stale) => stale.generation + 1,
            None => 0,
        };
        let inode = Arc::new(Inode {
            nodeid,
            generation,
            dev: st.st_dev,
            ino: st.st_ino,
            kind,
            backing,
            nlookup: AtomicU64::new(0),
            name: Mutex::new(name.map(|(parent, name)| (parent, Box::from(name)))),
            backing_id: Mutex::new(Weak::new()),
            told: AtomicU64::new(0),
            told_size: AtomicU64::new(0),
            opens: Mutex::new(InodeOpens::default()),
            may_have_pages: AtomicBool::new(false),
            own_writes: OwnWrites::default(),
        });
        // Two threads may race to insert the same inode; the first one wins and both count.
        let mut replaced = None;
        let entry = self
            .map
            .entry(nodeid)
            .and_modify(|cur| {
                if !cur.same_backing(&inode.backing, st.st_dev, kind) {
                    // The old handle is stale. The kernel's references to this node id carry
                    // over to the new inode (read under the shard lock, so none is lost).
                    inode
                        .nlookup
                        .store(cur.nlookup.load(Ordering::Acquire), Ordering::Release);
                    replaced = Some(std::mem::replace(cur, inode.clone()));
                }
            })
            .or_insert_with(|| inode.clone());
        entry.nlookup.fetch_add(1, Ordering::Relaxed);
        let result = entry.clone();
        drop(entry);
        if let Some(old) = replaced {
            self.drop_cached_fd(&old);
            self.retained.forget(old.nodeid);
        }
        result
    }

    /// The handle of `name` in `dir` (of `dir` itself for ""), if handles are in use and it
    /// belongs to the mount of SOURCE.
    fn handle_of(&self, dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Option<FileHandle>> {
        let Some(mount_id) = self.root_mount_id else {
            return Ok(None);
        };
        match FileHandle::of(dir, name) {
            Ok(h) if h.mount_id == mount_id => Ok(Some(h)),
            // Another mount (a submount) or no handle support: the caller holds a descriptor.
            Ok(_) => Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn backing_for(&self, dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Backing> {
        if let Some(handle) = self.handle_of(dir, name)? {
            return Ok(Backing::Handle(handle));
        }
        // A soft bound: threads racing past it overshoot by a few descriptors at most.
        if self.held_fds.load(Ordering::Relaxed) >= self.max_held_fds {
            return Ok(Backing::Name);
        }
        let fd = sys::openat(dir, name, libc::O_PATH | libc::O_NOFOLLOW, 0)?;
        self.held_fds.fetch_add(1, Ordering::Relaxed);
        Ok(Backing::Fd(HeldFd {
            fd,
            held: self.held_fds.clone(),
        }))
    }

    /// Drops `n` kernel references; the inode is forgotten when none remain (returns true then).
    pub fn forget(&self, nodeid: u64, n: u64) -> bool {
        if nodeid == ROOT_ID {
            return false;
        }
        let removed = self.map.remove_if(&nodeid, |_, inode| {
            let prev = inode
                .nlookup
                .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| {
                    Some(c.saturating_sub(n))
                })
                .unwrap_or(0);
            prev <= n
        });
        if let Some((_, inode)) = removed {
            self.drop_cached_fd(&inode);
            self.retained.forget(nodeid);
            if nodeid >= SYNTHETIC_BASE {
                self.synthetic.remove(&(inode.dev, inode.ino));
            }
            return true;
        }
        false
    }

    fn drop_cached_fd(&self, inode: &Inode) {
        if self
            .dir_fds
            .remove_if(&inode.nodeid, |_, (generation, _)| {
                *generation == inode.generation
            })
            .is_some()
        {
            self.cached_dir_fds.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Records that `nodeid` is now reachable as `name` in `parent` (after rename or link).
    pub fn set_name(&self, nodeid: u64, parent: u64, name: &OsStr) {
        if let Some(inode) = self.map.get(&nodeid) {
            *inode.name.lock() = Some((parent, Box::from(name)));
        }
    }

    /// The path of `nodeid` relative to the root, as far as names seen through the mount tell.
    pub fn path_of(&self, nodeid: u64) -> Option<PathBuf> {
        self.path_with(nodeid, None)
    }

    /// `path_of(nodeid)` joined with `leaf`, if any. Called for every observation a FUSE thread
    /// emits, so it allocates once and writes nothing shared: names are copied leaf first, each
    /// reversed, into one buffer that is reversed at the end.
    fn path_with(&self, nodeid: u64, leaf: Option<&OsStr>) -> Option<PathBuf> {
        let mut rev: Vec<u8> = Vec::with_capacity(128);
        if let Some(leaf) = leaf {
            rev.extend(leaf.as_bytes().iter().rev());
        }
        let mut cur = nodeid;
        // A bound guards against a cycle from concurrent renames.
        for _ in 0..4096 {
            if cur == ROOT_ID {
                rev.reverse();
                return Some(PathBuf::from(OsString::from_vec(rev)));
            }
            let inode = self.map.get(&cur)?;
            let name = inode.name.lock();
            let (parent, name) = name.as_ref()?;
            if !rev.is_empty() {
                rev.push(b'/');
            }
            rev.extend(name.as_bytes().iter().rev());
            cur = *parent;
        }
        None
    }

    /// Stats a file through the last name it was reached by, if that name still leads to it:
    /// one `fstatat` in the parent's cached descriptor instead of opening the file by handle
    /// and closing it again. `None` when the name is gone or leads elsewhere.
    ///
    /// The same (dev, ino, type) under the same name is the same file, except when the file was
    /// deleted and ext4 gave its number to a new file at that very name. The kernel then asks
    /// about the old node only through a name the watcher has not invalidated yet, and for a
    /// name the new file's attributes are the right answer; the next LOOKUP finds the new file
    /// (another handle) and gives it a new generation. An open file is stat'ed through its own
    /// descriptor, or holds its registration, so it is never confused with a successor.
    pub fn stat_by_name(&self, inode: &Inode) -> Option<libc::stat> {
        self.stat_name_with(inode, |dir, name| {
            sys::fstatat(dir, name, libc::AT_SYMLINK_NOFOLLOW).map(|st| (st, ()))
        })
        .map(|(st, ())| st)
    }

    /// [`InodeStore::stat_by_name`] with the birth time (one `statx`).
    pub fn statx_by_name(&self, inode: &Inode) -> Option<(libc::stat, Option<SystemTime>)> {
        self.stat_name_with(inode, |dir, name| {
            match sys::statx_at(dir, name, libc::AT_SYMLINK_NOFOLLOW)? {
                (Some(st), born) => Ok((st, born)),
                (None, _) => Err(io::Error::from(io::ErrorKind::Unsupported)),
            }
        })
    }

    /// `stat` (by `f`) of `inode`'s name in its parent, if that is still `inode`.
    fn stat_name_with<T>(
        &self,
        inode: &Inode,
        f: impl FnOnce(BorrowedFd<'_>, &CStr) -> io::Result<(libc::stat, T)>,
    ) -> Option<(libc::stat, T)> {
        let (parent, name) = {
            let slot = inode.name.lock();
            let (parent, name) = slot.as_ref()?;
            (*parent, sys::cstr(name).ok()?)
        };
        let parent = self.get(parent).ok()?;
        let pfd = self.path_fd(&parent).ok()?;
        let (st, t) = f(pfd.as_fd(), &name).ok()?;
        (st.st_dev == inode.dev
            && st.st_ino == inode.ino
            && st.st_mode & libc::S_IFMT == inode.kind)
            .then_some((st, t))
    }

    /// The path of `name` inside directory `parent`.
    pub fn child_path(&self, parent: u64, name: &OsStr) -> Option<PathBuf> {
        self.path_with(parent, Some(name))
    }

    /// Number of inodes the kernel currently references.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Looks up which node a backing (dev, ino) is known as, if the kernel knows it at all.
    pub fn known(&self, dev: u64, ino: u64) -> Option<u64> {
        let id = if dev == self.root_dev && ino == self.root_ino {
            ROOT_ID
        } else if dev == self.root_dev && ino > ROOT_ID && ino < SYNTHETIC_BASE {
            ino
        } else {
            *self.synthetic.get(&(dev, ino))?
        };
        self.map.contains_key(&id).then_some(id)
    }

    /// Every known inode with the name it was last reached by, for a full invalidation.
    pub fn all_names(&self) -> Vec<(u64, Option<u64>, Option<OsString>)> {
        self.map
            .iter()
            .map(|e| {
                let name = e.name.lock().clone();
                let (p, n) =
                    name.map_or((None, None), |(p, n)| (Some(p), Some(n.into_os_string())));
                (*e.key(), p, n)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_dir(p: &std::path::Path) -> OwnedFd {
        std::fs::File::open(p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .into()
    }

    #[test]
    fn paths_follow_the_names_seen() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir_all(dir.path().join("src/deep")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(dir.path().join("src/deep/lib.rs"), b"x").unwrap_or_else(|e| panic!("{e}"));
        let store = InodeStore::new(open_dir(dir.path())).unwrap_or_else(|e| panic!("{e}"));
        let root = store.get(ROOT_ID).unwrap_or_else(|e| panic!("{e}"));
        let look = |parent: &Inode, name: &CStr| {
            store
                .lookup(parent, name)
                .unwrap_or_else(|e| panic!("{name:?}: {e}"))
                .0
        };
        let src = look(&root, c"src");
        let deep = look(&src, c"deep");
        let lib = look(&deep, c"lib.rs");
        assert_eq!(store.path_of(ROOT_ID), Some(PathBuf::new()));
        assert_eq!(
            store.path_of(lib.nodeid),
            Some(PathBuf::from("src/deep/lib.rs"))
        );
        assert_eq!(
            store.child_path(deep.nodeid, OsStr::new("new.rs")),
            Some(PathBuf::from("src/deep/new.rs"))
        );
        assert_eq!(
            store.child_path(ROOT_ID, OsStr::new("top")),
            Some(PathBuf::from("top"))
        );
        // A rename through the mount re-parents the name.
        store.set_name(lib.nodeid, src.nodeid, OsStr::new("moved.rs"));
        assert_eq!(
            store.path_of(lib.nodeid),
            Some(PathBuf::from("src/moved.rs"))
        );
        // Directories get a cached descriptor, shared between calls.
        let a = store.path_fd(&deep).unwrap_or_else(|e| panic!("{e}"));
        let b = store.path_fd(&deep).unwrap_or_else(|e| panic!("{e}"));
        if let (InodeFd::Shared(a), InodeFd::Shared(b)) = (&a, &b) {
            assert!(Arc::ptr_eq(a, b));
        }
    }

    /// A store that cannot use file handles (a mount made without root) and may hold `limit`
    /// descriptors, on `dir`.
    fn without_handles(dir: &std::path::Path, limit: usize) -> InodeStore {
        InodeStore::build(open_dir(dir), limit, false).unwrap_or_else(|e| panic!("{e}"))
    }

    fn look(store: &InodeStore, parent: &Inode, name: &CStr) -> Arc<Inode> {
        store
            .lookup(parent, name)
            .unwrap_or_else(|e| panic!("{name:?}: {e}"))
            .0
    }

    fn read(store: &InodeStore, inode: &Inode) -> String {
        let fd = store
            .open(inode, libc::O_RDONLY)
            .unwrap_or_else(|e| panic!("open: {e}"));
        std::io::read_to_string(std::fs::File::from(fd)).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn past_the_descriptor_budget_inodes_are_reached_by_name() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path();
        std::fs::create_dir_all(d.join("a/b")).unwrap_or_else(|e| panic!("{e}"));
        for i in 0..6 {
            std::fs::write(d.join(format!("a/b/f{i}")), format!("file {i}"))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        // 1,372 descriptors: 343 for directories, 1,024 kept free, 2 held by inodes.
        let store = without_handles(d, 1372);
        assert!(!store.uses_file_handles());
        let root = store.get(ROOT_ID).unwrap_or_else(|e| panic!("{e}"));
        let a = look(&store, &root, c"a");
        let b = look(&store, &a, c"b");
        let files: Vec<_> = (0..6)
            .map(|i| {
                let name =
                    std::ffi::CString::new(format!("f{i}")).unwrap_or_else(|e| panic!("{e}"));
                look(&store, &b, &name)
            })
            .collect();
        assert_eq!(
            store.held_fds.load(Ordering::Relaxed),
            2,
            "the budget holds"
        );
        assert!(matches!(a.backing, Backing::Fd(_)) && matches!(b.backing, Backing::Fd(_)));
        let nofollow = store.open(&files[0], libc::O_RDONLY | libc::O_NOFOLLOW);
        assert!(
            nofollow.is_ok(),
            "O_NOFOLLOW, as grep -r opens: {nofollow:?}"
        );
        for (i, f) in files.iter().enumerate() {
            assert!(matches!(f.backing, Backing::Name));
            assert_eq!(read(&store, f), format!("file {i}"), "reached through a/b");
            assert!(store.stat_by_name(f).is_some());
        }
        // Looking a held inode up again holds nothing more.
        look(&store, &root, c"a");
        assert_eq!(store.held_fds.load(Ordering::Relaxed), 2);
        // Forgetting the inodes gives their descriptors back.
        assert!(store.forget(a.nodeid, 2));
        drop(a);
        assert_eq!(store.held_fds.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn a_name_that_leads_elsewhere_is_stale_until_looked_up_again() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = dir.path();
        std::fs::create_dir(d.join("dir")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(d.join("dir/x"), "x").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(d.join("dir/y"), "y").unwrap_or_else(|e| panic!("{e}"));
        // No descriptor budget at all: every inode is reached by name.
        let store = without_handles(d, 0);
        let root = store.get(ROOT_ID).unwrap_or_else(|e| panic!("{e}"));
        let dir_inode = look(&store, &root, c"dir");
        let x = look(&store, &dir_inode, c"x");
        assert_eq!(read(&store, &x), "x");

        // Behind the store: x is renamed, and y takes its name.
        std::fs::rename(d.join("dir/x"), d.join("dir/x2")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::rename(d.join("dir/y"), d.join("dir/x")).unwrap_or_else(|e| panic!("{e}"));
        let err = store.open(&x, libc::O_RDONLY).err();
        assert_eq!(
            err.and_then(|e| e.raw_os_error()),
            Some(libc::ESTALE),
            "never the other file that now has the name"
        );
        let again = look(&store, &dir_inode, c"x2");
        assert!(
            Arc::ptr_eq(&again, &x),
            "the same inode, under its new name"
        );
        assert_eq!(read(&store, &x), "x");

        // A renamed directory: what is below it is reached again once it is looked up.
        std::fs::rename(d.join("dir"), d.join("moved")).unwrap_or_else(|e| panic!("{e}"));
        assert!(store.open(&x, libc::O_RDONLY).is_err());
        look(&store, &root, c"moved");
        assert_eq!(read(&store, &x), "x");
    }
}
