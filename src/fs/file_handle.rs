//! Kernel file handles (`name_to_handle_at` / `open_by_handle_at`): how the passthrough names a
//! backing inode without holding a descriptor open for it.
//!
//! Holding one `O_PATH` descriptor per known inode (what libfuse's passthrough_hp does) runs into
//! the 20k descriptor ceiling on ordinary trees; a handle is ~20 bytes of memory instead and
//! survives renames behind the mount. Opening by handle needs `CAP_DAC_READ_SEARCH`; without it
//! (or on file systems that cannot export handles) the inode store keeps a descriptor instead.

use std::ffi::CStr;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// `MAX_HANDLE_SZ` from the kernel: large enough for every exportable file system.
const MAX_HANDLE_BYTES: usize = 128;

/// Handles up to this long are kept inside the inode record. ext4's are 8 bytes and xfs's and
/// btrfs's at most 20 or so: a separate allocation per inode would cost 32 bytes of heap on
/// top of the pointer, 3 MiB on a 100k-file tree.
const INLINE_BYTES: usize = 22;

/// An opaque handle plus the id of the mount it belongs to.
#[derive(Clone, PartialEq, Eq)]
pub struct FileHandle {
    pub mount_id: i32,
    handle_type: i32,
    bytes: HandleBytes,
}

/// The handle's bytes: inline when short (the common case), on the heap otherwise.
#[derive(Clone)]
enum HandleBytes {
    Inline { len: u8, buf: [u8; INLINE_BYTES] },
    Heap(Box<[u8]>),
}

impl HandleBytes {
    fn new(bytes: &[u8]) -> Self {
        if bytes.len() <= INLINE_BYTES {
            let mut buf = [0; INLINE_BYTES];
            buf[..bytes.len()].copy_from_slice(bytes);
            // Fits: INLINE_BYTES < 256.
            Self::Inline {
                len: bytes.len() as u8,
                buf,
            }
        } else {
            Self::Heap(bytes.into())
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Self::Inline { len, buf } => &buf[..usize::from(*len)],
            Self::Heap(b) => b,
        }
    }
}

impl PartialEq for HandleBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for HandleBytes {}

impl std::fmt::Debug for FileHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "FileHandle(mnt {}, type {}, {} bytes)",
            self.mount_id,
            self.handle_type,
            self.bytes.as_slice().len()
        )
    }
}

#[repr(C)]
struct RawHandle {
    handle_bytes: u32,
    handle_type: i32,
    f_handle: [u8; MAX_HANDLE_BYTES],
}

impl FileHandle {
    /// The handle of `name` under `dir` (or of `dir` itself when `name` is empty), without
    /// following a final symlink.
    pub fn of(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Self> {
        let mut raw = RawHandle {
            handle_bytes: MAX_HANDLE_BYTES as u32,
            handle_type: 0,
            f_handle: [0; MAX_HANDLE_BYTES],
        };
        let mut mount_id: libc::c_int = 0;
        let flags = if name.is_empty() {
            libc::AT_EMPTY_PATH
        } else {
            0
        };
        let ret = unsafe {
            libc::syscall(
                libc::SYS_name_to_handle_at,
                dir.as_raw_fd(),
                name.as_ptr(),
                &mut raw as *mut RawHandle,
                &mut mount_id as *mut libc::c_int,
                flags,
            )
        };
        if ret != 0 {
            return Err(io::Error::last_os_error());
        }
        let len = (raw.handle_bytes as usize).min(MAX_HANDLE_BYTES);
        Ok(Self {
            mount_id,
            handle_type: raw.handle_type,
            bytes: HandleBytes::new(&raw.f_handle[..len]),
        })
    }

    /// Opens the inode this handle names. `mount_fd` is any descriptor on the same mount.
    pub fn open(&self, mount_fd: BorrowedFd<'_>, flags: i32) -> io::Result<OwnedFd> {
        let bytes = self.bytes.as_slice();
        let mut raw = RawHandle {
            handle_bytes: bytes.len() as u32,
            handle_type: self.handle_type,
            f_handle: [0; MAX_HANDLE_BYTES],
        };
        raw.f_handle[..bytes.len()].copy_from_slice(bytes);
        let fd = unsafe {
            libc::syscall(
                libc::SYS_open_by_handle_at,
                mount_fd.as_raw_fd(),
                &mut raw as *mut RawHandle,
                flags | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(unsafe { OwnedFd::from_raw_fd(fd as i32) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn handle_survives_rename_and_reopens_the_same_inode() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a"), b"hello").expect("write");
        let root: OwnedFd = std::fs::File::open(dir.path()).expect("open").into();
        let h = match FileHandle::of(root.as_fd(), c"a") {
            Ok(h) => h,
            // Not every test machine runs as root; the store falls back to descriptors there.
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => return,
            Err(e) => panic!("name_to_handle_at: {e}"),
        };
        std::fs::rename(dir.path().join("a"), dir.path().join("b")).expect("rename");
        match h.open(root.as_fd(), libc::O_RDONLY) {
            Ok(fd) => {
                let content = std::fs::read(format!("/proc/self/fd/{}", fd.as_raw_fd()))
                    .expect("read through handle");
                assert_eq!(content, b"hello");
            }
            Err(e) if e.raw_os_error() == Some(libc::EPERM) => {} // no CAP_DAC_READ_SEARCH
            Err(e) => panic!("open_by_handle_at: {e}"),
        }
    }

    #[test]
    fn short_and_long_handles_compare_by_bytes() {
        let short = HandleBytes::new(&[1, 2, 3]);
        assert_eq!(short.as_slice(), &[1, 2, 3]);
        assert!(matches!(short, HandleBytes::Inline { .. }));
        let long_bytes: Vec<u8> = (0..40).collect();
        let long = HandleBytes::new(&long_bytes);
        assert!(matches!(long, HandleBytes::Heap(_)));
        assert_eq!(long.as_slice(), &long_bytes[..]);
        assert!(short != long);
        // Padding after the length must not make equal handles differ.
        assert!(HandleBytes::new(&[1, 2, 3]) == short);
        assert!(HandleBytes::new(&[1, 2]) != short);
        assert_eq!(std::mem::size_of::<HandleBytes>(), 24);
    }
}
