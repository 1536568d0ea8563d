//! Per-user runtime files: where a running mount leaves its pid (and, later, its socket), so
//! `worldfs unmount` can tell a live daemon from a dead one.

use std::io;
use std::path::{Path, PathBuf};

/// Where runtime files may go, preferred first: `$XDG_RUNTIME_DIR/worldfs` (when set to an
/// absolute path), then `/tmp/worldfs-$UID`. Sockets and pid files use the same list.
pub fn candidate_dirs() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR") {
        let x = PathBuf::from(x);
        if x.is_absolute() {
            v.push(x.join("worldfs"));
        }
    }
    v.push(PathBuf::from(format!("/tmp/worldfs-{}", unsafe {
        libc::getuid()
    })));
    v
}

/// The first candidate directory that exists or can be created (mode 0700).
pub fn dir() -> io::Result<PathBuf> {
    use std::os::unix::fs::DirBuilderExt;
    let mut last = io::Error::from(io::ErrorKind::NotFound);
    for d in candidate_dirs() {
        match std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&d)
        {
            Ok(()) => return Ok(d),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// A short stable name for a mount point: readable tail plus a hash of the full path.
pub fn mount_key(mount_point: &Path) -> String {
    let hash = blake3::hash(mount_point.as_os_str().as_encoded_bytes());
    let tail: String = mount_point
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "root".into())
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .take(24)
        .collect();
    format!("{tail}-{}", &hash.to_hex()[..12])
}

pub fn pid_file(mount_point: &Path) -> io::Result<PathBuf> {
    Ok(dir()?.join(format!("{}.pid", mount_key(mount_point))))
}

/// The pid recorded for `mount_point`, if that process is still alive (not a zombie).
pub fn live_daemon(mount_point: &Path) -> Option<u32> {
    let text = std::fs::read_to_string(pid_file(mount_point).ok()?).ok()?;
    let pid: u32 = text.lines().next()?.trim().parse().ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // State is the field after the parenthesised command name.
    let state = stat.rsplit_once(')')?.1.split_whitespace().next()?;
    (state != "Z" && state != "X").then_some(pid)
}

/// Removes the pid file when the mount ends.
pub struct PidFile(PathBuf);

impl PidFile {
    pub fn create(mount_point: &Path) -> io::Result<Self> {
        let path = pid_file(mount_point)?;
        std::fs::write(
            &path,
            format!("{}\n{}\n", std::process::id(), mount_point.display()),
        )?;
        Ok(Self(path))
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_stable_short_and_distinct() {
        let a = mount_key(Path::new("/work/my project"));
        assert_eq!(a, mount_key(Path::new("/work/my project")));
        assert_ne!(a, mount_key(Path::new("/other/my project")));
        assert!(a.starts_with("my_project-"));
        assert!(a.len() <= 24 + 1 + 12);
    }
}
