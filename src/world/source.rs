//! Reading SOURCE safely, relative to a directory handle taken at construction.
//!
//! The world never keeps content; it reads the current bytes from SOURCE when asked. Paths come
//! from observations (ultimately from whatever the agent typed), so they are treated as hostile:
//! absolute paths and `..` are refused, and every component is opened with `O_NOFOLLOW` relative
//! to the previous one, so no symlink is ever followed — not even one pointing inside the tree.
//! That is stricter than needed, but it makes "never escape the root" hold by construction, and
//! the mount reports resolved paths anyway (the kernel follows symlinks before asking the
//! daemon), so observed paths rarely contain one.

use std::ffi::{CStr, CString, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

/// Why SOURCE could not give us what we asked for.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    #[error("refusing path {path:?}: only plain relative paths below the root are allowed")]
    BadPath { path: PathBuf },
    #[error("cannot open {path:?} in SOURCE: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot read {path:?} in SOURCE: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("{path:?} is neither a regular file nor a directory")]
    NotRegular { path: PathBuf },
}

/// What a path in SOURCE is, once opened.
#[derive(Debug)]
pub enum Opened {
    File { file: File, size: u64 },
    Dir(OwnedFd),
}

/// The SOURCE directory, as an open handle.
#[derive(Debug)]
pub struct SourceRoot {
    fd: OwnedFd,
}

const DIR_FLAGS: libc::c_int =
    libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
// O_NONBLOCK: a FIFO planted in the tree must not hang the reader; regular files ignore it.
const LEAF_FLAGS: libc::c_int =
    libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK | libc::O_NOCTTY;

/// Opens a leaf for the world's own reading. Those reads are not the user's: natively nobody
/// read the file, so they must not move its access time (`find -atime`, a mail client's "new
/// mail", a test that sets a time and reads it back would all see the daemon). `O_NOATIME` needs
/// the file's owner or `CAP_FOWNER`; a daemon that is neither reads without it.
fn open_leaf(dir: libc::c_int, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    match openat(dir, name, flags | libc::O_NOATIME) {
        Err(e) if e.raw_os_error() == Some(libc::EPERM) => openat(dir, name, flags),
        r => r,
    }
}

fn openat(dir: libc::c_int, name: &CStr, flags: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: `name` is a valid NUL-terminated string and `dir` a descriptor we own for the
    // duration of the call; the returned descriptor is fresh and owned by nobody else.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by openat and is not owned elsewhere.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl SourceRoot {
    /// Wraps an open handle on the SOURCE directory.
    pub fn new(fd: OwnedFd) -> Self {
        Self { fd }
    }

    /// Opens `dir` as the root.
    pub fn open(dir: &Path) -> Result<Self, SourceError> {
        let c = CString::new(dir.as_os_str().as_bytes()).map_err(|_| SourceError::BadPath {
            path: dir.to_owned(),
        })?;
        let fd = openat(
            libc::AT_FDCWD,
            &c,
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
        .map_err(|source| SourceError::Open {
            path: dir.to_owned(),
            source,
        })?;
        Ok(Self { fd })
    }

    /// The root directory's own attributes (through its handle, never its path).
    pub fn metadata(&self) -> io::Result<std::fs::Metadata> {
        File::from(self.fd.try_clone()?).metadata()
    }

    /// The plain components of `rel`, or an error if it is absolute or climbs out.
    fn components(rel: &Path) -> Result<Vec<CString>, SourceError> {
        let bad = || SourceError::BadPath {
            path: rel.to_owned(),
        };
        let mut out = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(name) => {
                    out.push(CString::new(name.as_bytes()).map_err(|_| bad())?);
                }
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                    return Err(bad());
                }
            }
        }
        Ok(out)
    }

    /// Opens `rel` (a regular file or a directory) without following any symlink.
    pub fn open_beneath(&self, rel: &Path) -> Result<Opened, SourceError> {
        let parts = Self::components(rel)?;
        let open_err = |source| SourceError::Open {
            path: rel.to_owned(),
            source,
        };
        let Some((leaf, dirs)) = parts.split_last() else {
            let me = open_leaf(self.fd.as_raw_fd(), c".", LEAF_FLAGS | libc::O_DIRECTORY)
                .map_err(open_err)?;
            return Ok(Opened::Dir(me));
        };
        let mut cur: Option<OwnedFd> = None;
        for d in dirs {
            let at = cur.as_ref().map_or(self.fd.as_raw_fd(), AsRawFd::as_raw_fd);
            cur = Some(openat(at, d, DIR_FLAGS).map_err(open_err)?);
        }
        let at = cur.as_ref().map_or(self.fd.as_raw_fd(), AsRawFd::as_raw_fd);
        let fd = open_leaf(at, leaf, LEAF_FLAGS).map_err(open_err)?;
        let file = File::from(fd);
        let meta = file.metadata().map_err(|source| SourceError::Read {
            path: rel.to_owned(),
            source,
        })?;
        if meta.is_file() {
            Ok(Opened::File {
                file,
                size: meta.len(),
            })
        } else if meta.is_dir() {
            Ok(Opened::Dir(OwnedFd::from(file)))
        } else {
            Err(SourceError::NotRegular {
                path: rel.to_owned(),
            })
        }
    }

    /// Reads at most `limit` bytes of the regular file `rel`.
    pub fn read_prefix(&self, rel: &Path, limit: u64) -> Result<Vec<u8>, SourceError> {
        match self.open_beneath(rel)? {
            Opened::File { file, size } => {
                let mut buf = Vec::with_capacity(size.min(limit) as usize);
                file.take(limit)
                    .read_to_end(&mut buf)
                    .map_err(|source| SourceError::Read {
                        path: rel.to_owned(),
                        source,
                    })?;
                Ok(buf)
            }
            Opened::Dir(_) => Err(SourceError::NotRegular {
                path: rel.to_owned(),
            }),
        }
    }

    /// The names in directory `dir` (an fd from [`Self::open_beneath`]), sorted, directories
    /// marked with a trailing `/`.
    pub fn list(dir: OwnedFd, rel: &Path) -> Result<Vec<OsString>, SourceError> {
        Self::list_up_to(dir, rel, usize::MAX)
    }

    /// Whether directory `dir` (an fd from [`Self::open_beneath`]) holds nothing; reads one
    /// entry at most past `.` and `..`.
    pub fn is_empty_dir(dir: OwnedFd, rel: &Path) -> Result<bool, SourceError> {
        Ok(Self::list_up_to(dir, rel, 1)?.is_empty())
    }

    /// [`Self::list`], stopping after `max` names.
    fn list_up_to(dir: OwnedFd, rel: &Path, max: usize) -> Result<Vec<OsString>, SourceError> {
        let read_err = |source| SourceError::Read {
            path: rel.to_owned(),
            source,
        };
        // O_PATH descriptors cannot be listed; reopen the directory itself for reading.
        let readable =
            open_leaf(dir.as_raw_fd(), c".", LEAF_FLAGS | libc::O_DIRECTORY).map_err(read_err)?;
        let raw = readable.into_raw_fd();
        // SAFETY: `raw` is an open directory descriptor; on success fdopendir takes ownership of
        // it (released by closedir below), on failure we still own it and close it.
        let stream = unsafe { libc::fdopendir(raw) };
        if stream.is_null() {
            let e = io::Error::last_os_error();
            // SAFETY: fdopendir failed, so `raw` is still ours to close.
            unsafe { libc::close(raw) };
            return Err(read_err(e));
        }
        let mut names = Vec::new();
        let mut failure = None;
        while names.len() < max {
            // SAFETY: errno is thread-local; clearing it lets us tell end-of-stream from error.
            unsafe { *libc::__errno_location() = 0 };
            // SAFETY: `stream` is a valid DIR* until closedir.
            let ent = unsafe { libc::readdir(stream) };
            if ent.is_null() {
                let e = io::Error::last_os_error();
                if e.raw_os_error().unwrap_or(0) != 0 {
                    failure = Some(e);
                }
                break;
            }
            // SAFETY: readdir returned a valid dirent whose d_name is NUL-terminated and lives
            // until the next readdir call; we copy it out before that.
            let (name, dtype) = unsafe { (CStr::from_ptr((*ent).d_name.as_ptr()), (*ent).d_type) };
            let bytes = name.to_bytes();
            if bytes == b"." || bytes == b".." {
                continue;
            }
            let mut n = bytes.to_vec();
            let is_dir = match dtype {
                libc::DT_DIR => true,
                libc::DT_UNKNOWN => is_dir_at(raw, name),
                _ => false,
            };
            if is_dir {
                n.push(b'/');
            }
            names.push(OsString::from_vec(n));
        }
        // SAFETY: `stream` is valid and closed exactly once; this also closes `raw`.
        unsafe { libc::closedir(stream) };
        if let Some(e) = failure {
            return Err(read_err(e));
        }
        names.sort();
        Ok(names)
    }
}

/// Whether `name` in directory `dir` is a directory, not following a symlink.
fn is_dir_at(dir: libc::c_int, name: &CStr) -> bool {
    let mut st = std::mem::MaybeUninit::<libc::stat>::uninit();
    // SAFETY: `st` is a valid out-pointer for one `stat`, `name` is NUL-terminated.
    let rc = unsafe {
        libc::fstatat(
            dir,
            name.as_ptr(),
            st.as_mut_ptr(),
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    if rc != 0 {
        return false;
    }
    // SAFETY: fstatat succeeded, so it initialized `st`.
    let st = unsafe { st.assume_init() };
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::symlink;

    fn tree() -> (tempfile::TempDir, SourceRoot) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let root = dir.path().join("root");
        fs::create_dir_all(root.join("sub")).unwrap_or_else(|e| panic!("{e}"));
        fs::write(root.join("sub/a.txt"), "hello").unwrap_or_else(|e| panic!("{e}"));
        fs::write(dir.path().join("outside.txt"), "secret").unwrap_or_else(|e| panic!("{e}"));
        symlink(dir.path().join("outside.txt"), root.join("escape"))
            .unwrap_or_else(|e| panic!("{e}"));
        symlink(dir.path(), root.join("escdir")).unwrap_or_else(|e| panic!("{e}"));
        let src = SourceRoot::open(&root).unwrap_or_else(|e| panic!("{e}"));
        (dir, src)
    }

    #[test]
    fn reads_below_root() {
        let (_d, src) = tree();
        let got = src.read_prefix(Path::new("sub/a.txt"), 100);
        assert_eq!(got.ok(), Some(b"hello".to_vec()));
        let got = src.read_prefix(Path::new("./sub/a.txt"), 3);
        assert_eq!(got.ok(), Some(b"hel".to_vec()));
    }

    #[test]
    fn refuses_escapes() {
        let (_d, src) = tree();
        for p in ["../outside.txt", "/etc/passwd", "sub/../../outside.txt"] {
            assert!(
                matches!(
                    src.read_prefix(Path::new(p), 100),
                    Err(SourceError::BadPath { .. })
                ),
                "{p}"
            );
        }
        for p in ["escape", "escdir/outside.txt"] {
            assert!(
                matches!(
                    src.read_prefix(Path::new(p), 100),
                    Err(SourceError::Open { .. })
                ),
                "{p}"
            );
        }
    }

    fn atime(p: &Path) -> std::time::SystemTime {
        fs::metadata(p)
            .and_then(|m| m.accessed())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_worlds_own_reads_leave_access_times_alone() {
        let (d, src) = tree();
        let root = d.path().join("root");
        // A day old is what relatime updates on any read; modified after that, too.
        let old = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        for p in [root.join("sub/a.txt"), root.join("sub")] {
            let f = fs::File::open(&p).unwrap_or_else(|e| panic!("{e}"));
            f.set_times(fs::FileTimes::new().set_accessed(old))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let got = src.read_prefix(Path::new("sub/a.txt"), 100);
        assert_eq!(got.ok(), Some(b"hello".to_vec()));
        let Ok(Opened::Dir(fd)) = src.open_beneath(Path::new("sub")) else {
            panic!("sub is not a directory")
        };
        let names = SourceRoot::list(fd, Path::new("sub")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(names.len(), 1);
        assert_eq!(atime(&root.join("sub/a.txt")), old);
        assert_eq!(atime(&root.join("sub")), old);
        // A plain read does move it here, so the check above can tell.
        fs::read(root.join("sub/a.txt")).unwrap_or_else(|e| panic!("{e}"));
        assert_ne!(
            atime(&root.join("sub/a.txt")),
            old,
            "this file system keeps no atime"
        );
    }

    #[test]
    fn lists_directories_sorted_with_marks() {
        let (_d, src) = tree();
        let Ok(Opened::Dir(fd)) = src.open_beneath(Path::new("")) else {
            panic!("root is not a directory")
        };
        let names = SourceRoot::list(fd, Path::new("")).unwrap_or_else(|e| panic!("{e}"));
        let names: Vec<String> = names
            .iter()
            .map(|n| n.to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["escape", "escdir", "sub/"]);
    }
}
