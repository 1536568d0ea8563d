//! Where a mount's socket lives, and claiming that path safely.
//!
//! The name is derived from the mount point alone, so the daemon and any client that knows the
//! mount point (from `/proc/self/mountinfo`) agree on it without talking. The directory is
//! private (0700, ours), which is the first line of defence; the peer-credential check in
//! `server` is the second.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

/// `sun_path` holds 108 bytes including the terminating NUL.
pub const MAX_SOCKET_PATH: usize = 107;
/// Hex digits of the mount point's hash in the name: enough to keep two mounts apart.
const HASH_HEX: usize = 8;
/// Longest readable part of the name; the hash keeps names unique when it is cut.
const MAX_LABEL: usize = 48;

#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("no socket directory leaves room for a socket name under 108 bytes; pass --socket")]
    TooLong,
    #[error("socket path {path:?} is {len} bytes; Unix sockets allow at most {MAX_SOCKET_PATH}")]
    PathTooLong { path: PathBuf, len: usize },
    #[error("socket directory {dir:?}: {what}")]
    UnsafeDir { dir: PathBuf, what: String },
    #[error("a worldfs daemon is already serving {path:?} (its socket answers)")]
    Live { path: PathBuf },
    #[error("{path:?} exists and is not a socket; refusing to replace it")]
    NotSocket { path: PathBuf },
    #[error("{what} {path:?}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn uid() -> u32 {
    // SAFETY: getuid cannot fail and has no preconditions.
    unsafe { libc::getuid() }
}

/// Candidate directories, preferred first: `$XDG_RUNTIME_DIR/worldfs`, `/tmp/worldfs-$UID`.
pub fn runtime_dirs() -> Vec<PathBuf> {
    crate::runtime::candidate_dirs()
}

pub fn socket_name(dir: &Path, mount_point: &Path) -> Option<String> {
    let hash = blake3::hash(mount_point.as_os_str().as_bytes()).to_hex();
    let hash = &hash.as_str()[..HASH_HEX];
    let fixed = 1 + HASH_HEX + ".sock".len(); // "-" + hash + ".sock"
    let room = MAX_SOCKET_PATH.checked_sub(dir.as_os_str().len() + 1 + fixed)?;
    let mut label: String = mount_point
        .as_os_str()
        .as_bytes()
        .iter()
        .map(|&b| match b {
            b'/' => '-',
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'.' | b'_' | b'-' => b as char,
            _ => '_',
        })
        .collect::<String>()
        .trim_matches('-')
        .to_string();
    if label.is_empty() {
        label = "root".into();
    }
    let keep = room.min(MAX_LABEL);
    if label.len() > keep {
        // Keep the tail: the last components tell mounts apart, the hash does the rest.
        label = label[label.len() - keep..]
            .trim_start_matches('-')
            .to_string();
    }
    // Never start with a dot: a hidden socket confuses people looking for it.
    let label = label.trim_start_matches('.');
    if label.is_empty() {
        Some(format!("{hash}.sock"))
    } else {
        Some(format!("{label}-{hash}.sock"))
    }
}

/// Every place a socket for `mount_point` may be, preferred first.
pub fn candidate_paths(mount_point: &Path) -> Vec<PathBuf> {
    runtime_dirs()
        .into_iter()
        .filter_map(|d| socket_name(&d, mount_point).map(|n| d.join(n)))
        .collect()
}

/// The default socket path for `mount_point` (the first candidate that fits).
pub fn default_socket_path(mount_point: &Path) -> Result<PathBuf, PathError> {
    candidate_paths(mount_point)
        .into_iter()
        .next()
        .ok_or(PathError::TooLong)
}

/// Creates `dir` (mode 0700) or checks that the existing one is ours and private. A directory
/// under /tmp that someone else made (or a symlink planted there) would let them replace our
/// socket, so it is refused rather than used.
pub fn prepare_dir(dir: &Path) -> Result<(), PathError> {
    let io_err = |what, source| PathError::Io {
        what,
        path: dir.to_owned(),
        source,
    };
    if let Some(parent) = dir.parent()
        && !parent.as_os_str().is_empty()
        && !parent.exists()
    {
        // Parents are ordinary directories (e.g. a custom --socket under $HOME).
        std::fs::create_dir_all(parent).map_err(|e| io_err("creating", e))?;
    }
    match std::fs::DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => return Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(io_err("creating", e)),
    }
    let meta = std::fs::symlink_metadata(dir).map_err(|e| io_err("inspecting", e))?;
    let unsafe_dir = |what: String| PathError::UnsafeDir {
        dir: dir.to_owned(),
        what,
    };
    if !meta.file_type().is_dir() {
        return Err(unsafe_dir("exists and is not a directory".into()));
    }
    if meta.uid() != uid() {
        return Err(unsafe_dir(format!(
            "owned by uid {}, not by us ({})",
            meta.uid(),
            uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| io_err("making private", e))?;
    }
    Ok(())
}

/// A socket file as a daemon made it: device, inode, and change time (seconds, nanoseconds).
pub type SocketIdentity = (u64, u64, i64, i64);

/// Which file the socket path `p` is now, to tell a daemon's socket from one a daemon started
/// since made at the same path: the change time too, since a file system may give the new
/// socket the inode number the old one freed (ext4 does).
pub fn identity(p: &Path) -> Option<SocketIdentity> {
    std::fs::symlink_metadata(p).ok().map(|m| identity_of(&m))
}

/// [`identity`] of a file whose metadata was read already.
pub fn identity_of(m: &std::fs::Metadata) -> SocketIdentity {
    (m.dev(), m.ino(), m.ctime(), m.ctime_nsec())
}

/// Makes `path` free for binding: a leftover socket of a dead daemon (nobody answers) is
/// removed; a live one is an error, and so is anything that is not a socket.
pub fn claim(path: &Path) -> Result<(), PathError> {
    let len = path.as_os_str().len();
    if len > MAX_SOCKET_PATH {
        return Err(PathError::PathTooLong {
            path: path.to_owned(),
            len,
        });
    }
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => {
            return Err(PathError::Io {
                what: "inspecting",
                path: path.to_owned(),
                source: e,
            });
        }
    };
    if !meta.file_type().is_socket() {
        return Err(PathError::NotSocket {
            path: path.to_owned(),
        });
    }
    match UnixStream::connect(path) {
        Ok(_) => Err(PathError::Live {
            path: path.to_owned(),
        }),
        Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => std::fs::remove_file(path)
            .map_err(|e| PathError::Io {
                what: "removing stale socket",
                path: path.to_owned(),
                source: e,
            }),
        Err(e) => Err(PathError::Io {
            what: "probing existing socket",
            path: path.to_owned(),
            source: e,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_readable_unique_and_fit() {
        let dir = Path::new("/run/user/1000/worldfs");
        let a = socket_name(dir, Path::new("/work/main")).unwrap_or_default();
        assert!(a.starts_with("work-main-") && a.ends_with(".sock"), "{a}");
        let b = socket_name(dir, Path::new("/work/main2")).unwrap_or_default();
        assert_ne!(a, b);
        let long = PathBuf::from(format!("/{}", "x/".repeat(200)));
        let n = socket_name(dir, &long).unwrap_or_default();
        assert!(dir.join(&n).as_os_str().len() <= MAX_SOCKET_PATH, "{n}");
        let odd = socket_name(dir, Path::new("/home/me/my proj/ü")).unwrap_or_default();
        assert!(
            odd.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
            "{odd}"
        );
        assert!(
            socket_name(dir, Path::new("/"))
                .unwrap_or_default()
                .starts_with("root-")
        );
    }

    #[test]
    fn no_room_means_none() {
        let dir = PathBuf::from(format!("/{}", "d".repeat(100)));
        assert_eq!(socket_name(&dir, Path::new("/a")), None);
        let dir = PathBuf::from(format!("/{}", "d".repeat(90)));
        let n = socket_name(&dir, Path::new("/abc/def")).unwrap_or_default();
        assert!(dir.join(&n).as_os_str().len() <= MAX_SOCKET_PATH);
    }

    #[test]
    fn claim_replaces_stale_refuses_live_and_non_sockets() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = tmp.path().join("s.sock");
        assert!(claim(&p).is_ok(), "free path");
        let l = std::os::unix::net::UnixListener::bind(&p).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(claim(&p), Err(PathError::Live { .. })));
        drop(l); // the file stays, nobody listens: stale
        assert!(claim(&p).is_ok());
        assert!(!p.exists());
        std::fs::write(&p, b"x").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(claim(&p), Err(PathError::NotSocket { .. })));
    }

    #[test]
    fn prepare_dir_makes_private_and_fixes_mode() {
        let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let d = tmp.path().join("a/worldfs");
        prepare_dir(&d).unwrap_or_else(|e| panic!("{e}"));
        let mode = std::fs::metadata(&d).map(|m| m.mode() & 0o777).unwrap_or(0);
        assert_eq!(mode, 0o700);
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755))
            .unwrap_or_else(|e| panic!("{e}"));
        prepare_dir(&d).unwrap_or_else(|e| panic!("{e}"));
        let mode = std::fs::metadata(&d).map(|m| m.mode() & 0o777).unwrap_or(0);
        assert_eq!(mode, 0o700);
        let f = tmp.path().join("file");
        std::fs::write(&f, b"").unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(prepare_dir(&f), Err(PathError::UnsafeDir { .. })));
    }
}
