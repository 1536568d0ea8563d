//! Open files and directories, by the handle number the kernel hands back on every call.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use dashmap::DashMap;
use fuser::BackingId;
use parking_lot::Mutex;

use super::open_mode::OpenIo;
use super::sys;

pub struct OpenFile {
    /// The daemon's own descriptor. A read-only open answered with a passthrough registration
    /// the inode already had gets none until an operation needs one: the kernel reads and
    /// writes through its own backing file, and most such opens only ever see a GETATTR.
    fd: OnceLock<OwnedFd>,
    /// The flags to open `fd` with when it is needed late.
    flags: i32,
    pub nodeid: u64,
    pub writable: bool,
    /// Keeps the inode's passthrough registration alive while this handle is open.
    pub _backing: Option<Arc<BackingId>>,
    /// The mode `open_mode` chose, given back at RELEASE (`None` when it was not asked).
    pub io: Option<OpenIo>,
    /// The reply passed the handle through (kernel passthrough): its reads and writes go
    /// straight to the backing file and the daemon sees none of them.
    pub kernel_io: bool,
}

impl OpenFile {
    pub fn new(
        fd: Option<OwnedFd>,
        flags: i32,
        nodeid: u64,
        writable: bool,
        backing: Option<Arc<BackingId>>,
        (io, kernel_io): (Option<OpenIo>, bool),
    ) -> Self {
        Self {
            fd: fd.map(OnceLock::from).unwrap_or_default(),
            flags,
            nodeid,
            writable,
            _backing: backing,
            io,
            kernel_io,
        }
    }

    /// The descriptor, if the open made one or an operation needed one since.
    pub fn fd_if_open(&self) -> Option<BorrowedFd<'_>> {
        self.fd.get().map(|fd| fd.as_fd())
    }

    /// The descriptor, opened now with the open's flags (`open`) if there is none yet. Two
    /// threads may both open; one descriptor is kept and the other closed.
    pub fn fd(&self, open: impl FnOnce(i32) -> io::Result<OwnedFd>) -> io::Result<BorrowedFd<'_>> {
        if let Some(fd) = self.fd.get() {
            return Ok(fd.as_fd());
        }
        let fd = open(self.flags)?;
        let _ = self.fd.set(fd);
        self.fd
            .get()
            .map(|fd| fd.as_fd())
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))
    }
}

pub struct OpenDir {
    pub fd: OwnedFd,
    pub nodeid: u64,
    cursor: Mutex<DirCursor>,
}

/// Entries read from the backing directory but not yet handed to the kernel. Listing resumes
/// from the kernel's offset; as long as it asks for the offset right after the last entry it got,
/// the buffered entries are used without seeking or reading again.
#[derive(Default)]
struct DirCursor {
    pending: VecDeque<Entry>,
    resume_at: Option<i64>,
    eof: bool,
}

pub struct Entry {
    pub ino: u64,
    pub next_offset: i64,
    pub d_type: u8,
    pub name: Box<[u8]>,
}

impl OpenDir {
    pub fn new(fd: OwnedFd, nodeid: u64) -> Self {
        Self {
            fd,
            nodeid,
            cursor: Mutex::new(DirCursor::default()),
        }
    }

    /// Feeds entries starting at `offset` to `take` until it returns false (reply buffer full);
    /// the entry it refused is kept for the next call.
    pub fn list(&self, offset: i64, mut take: impl FnMut(&Entry) -> bool) -> io::Result<()> {
        let mut cur = self.cursor.lock();
        // A listing from the start must see the directory as it is now, not buffered entries.
        if offset == 0 || cur.resume_at != Some(offset) {
            sys::lseek(self.fd.as_fd(), offset, libc::SEEK_SET)?;
            cur.pending.clear();
            cur.eof = false;
            cur.resume_at = Some(offset);
        }
        let mut buf = Vec::new();
        loop {
            if cur.pending.is_empty() {
                if cur.eof {
                    return Ok(());
                }
                if buf.is_empty() {
                    buf = vec![0u8; 32 * 1024];
                }
                let n = sys::getdents64(self.fd.as_fd(), &mut buf)?;
                if n == 0 {
                    cur.eof = true;
                    return Ok(());
                }
                for e in sys::parse_dirents(&buf[..n]) {
                    cur.pending.push_back(Entry {
                        ino: e.ino,
                        next_offset: e.next_offset,
                        d_type: e.d_type,
                        name: e.name.into(),
                    });
                }
            }
            let Some(entry) = cur.pending.front() else {
                continue;
            };
            if !take(entry) {
                return Ok(());
            }
            let next = entry.next_offset;
            cur.pending.pop_front();
            cur.resume_at = Some(next);
        }
    }
}

/// Open directory streams by node id, bounded: listings resume where the kernel left off
/// without reopening, and a full cache drops an arbitrary stream (it is reopened on demand).
pub struct DirStreams {
    map: DashMap<u64, Arc<OpenDir>>,
}

const MAX_DIR_STREAMS: usize = 256;

impl Default for DirStreams {
    fn default() -> Self {
        Self {
            map: DashMap::new(),
        }
    }
}

impl DirStreams {
    pub fn get_or_open(
        &self,
        nodeid: u64,
        open: impl FnOnce() -> io::Result<OpenDir>,
    ) -> io::Result<Arc<OpenDir>> {
        if let Some(d) = self.map.get(&nodeid) {
            return Ok(d.clone());
        }
        let dir = Arc::new(open()?);
        if self.map.len() >= MAX_DIR_STREAMS {
            // A separate statement: the iterator's shard lock must be gone before remove().
            let victim = self.map.iter().next().map(|e| *e.key());
            if let Some(victim) = victim {
                self.map.remove(&victim);
            }
        }
        Ok(self.map.entry(nodeid).or_insert(dir).clone())
    }

    /// Forgets the stream of a directory the kernel no longer knows.
    pub fn remove(&self, nodeid: u64) {
        self.map.remove(&nodeid);
    }
}

/// Handle number -> open object.
pub struct HandleTable<T> {
    next: AtomicU64,
    map: DashMap<u64, Arc<T>>,
}

impl<T> Default for HandleTable<T> {
    fn default() -> Self {
        Self {
            next: AtomicU64::new(1),
            map: DashMap::new(),
        }
    }
}

impl<T> HandleTable<T> {
    pub fn insert(&self, value: T) -> u64 {
        let fh = self.next.fetch_add(1, Ordering::Relaxed);
        self.map.insert(fh, Arc::new(value));
        fh
    }

    pub fn get(&self, fh: u64) -> io::Result<Arc<T>> {
        self.map
            .get(&fh)
            .map(|v| v.clone())
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EBADF))
    }

    pub fn remove(&self, fh: u64) -> Option<Arc<T>> {
        self.map.remove(&fh).map(|(_, v)| v)
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}
