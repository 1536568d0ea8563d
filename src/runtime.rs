//! Per-user runtime files: where a running mount leaves its pid (and, later, its socket), so
//! `worldfs unmount` can tell a live daemon from a dead one.

use std::io;
use std::path::{Path, PathBuf};

/// `$XDG_RUNTIME_DIR/worldfs`, or `/tmp/worldfs-$UID` without one; created 0700.
pub fn dir() -> io::Result<PathBuf> {
    let dir = match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(d) => PathBuf::from(d).join("worldfs"),
        None => PathBuf::from(format!("/tmp/worldfs-{}", unsafe { libc::getuid() })),
    };
    std::fs::create_dir_all(&dir)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700))?;
    Ok(dir)
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
