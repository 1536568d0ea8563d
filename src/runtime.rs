//! Per-user runtime files: where a running mount leaves its pid (and, later, its socket), so
//! `worldfs unmount` can tell a live daemon from a dead one.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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

/// The pid recorded for `mount_point`, if that process is still alive (not a zombie) and is a
/// `worldfs mount`: a pid file a killed daemon left may name a pid given to another program
/// since.
pub fn live_daemon(mount_point: &Path) -> Option<u32> {
    recorded(mount_point).and_then(|(pid, _)| alive(pid))
}

/// The pid and the FUSE connection's device number (when it was known) a daemon recorded for
/// `mount_point`.
fn recorded(mount_point: &Path) -> Option<(u32, Option<u64>)> {
    let text = std::fs::read_to_string(pid_file(mount_point).ok()?).ok()?;
    let mut lines = text.lines();
    let pid = lines.next()?.trim().parse().ok()?;
    let dev = lines.nth(1).and_then(|l| l.trim().parse().ok());
    Some((pid, dev))
}

/// `pid`, if it is a live `worldfs mount` process.
fn alive(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // State is the field after the parenthesised command name.
    let state = stat.rsplit_once(')')?.1.split_whitespace().next()?;
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    let mounting = cmdline.split(|&b| b == 0).skip(1).any(|a| a == b"mount");
    (state != "Z" && state != "X" && mounting).then_some(pid)
}

/// Waits until process `pid` has exited, at most `timeout`; whether it did (or was gone
/// already). A pidfd, so the wait ends the moment it exits, without polling.
pub fn wait_exit(pid: u32, timeout: Duration) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    let Ok(fd) = RawFd::try_from(fd) else {
        return false;
    };
    // SAFETY: a descriptor pidfd_open just returned, owned by nobody else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let deadline = Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = i32::try_from(left.as_millis()).unwrap_or(i32::MAX);
        let mut p = libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        match unsafe { libc::poll(&mut p, 1, ms) } {
            n if n > 0 => return true,
            0 => return false,
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
            _ => return false,
        }
    }
}

/// What the live daemon of a mount point is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Daemon {
    /// It serves its FUSE connection: mounted, or detached by a lazy unmount while files in it
    /// were in use (it serves those until they are closed).
    Serving(u32),
    /// Its connection is gone (its mount was unmounted): it is on its way out, saving the
    /// world and letting go of its socket.
    Stopping(u32),
}

/// The live daemon of `mount_point`, and whether it still serves a FUSE connection. Without
/// the FUSE control file system to tell, a live daemon counts as stopping.
pub fn daemon(mount_point: &Path) -> Option<Daemon> {
    let (pid, dev) = recorded(mount_point)?;
    let pid = alive(pid)?;
    let serving = dev.is_some_and(|dev| crate::watchdog::connection_dir(dev).exists());
    Some(if serving {
        Daemon::Serving(pid)
    } else {
        Daemon::Stopping(pid)
    })
}

/// Removes the pid file when the mount ends.
pub struct PidFile(PathBuf);

impl PidFile {
    /// Records this process as the daemon of `mount_point`, serving the FUSE connection `dev`
    /// (its device number, as mountinfo gives it).
    pub fn create(mount_point: &Path, dev: Option<u64>) -> io::Result<Self> {
        let path = pid_file(mount_point)?;
        let dev = dev.map(|d| d.to_string()).unwrap_or_default();
        std::fs::write(
            &path,
            format!("{}\n{}\n{dev}\n", std::process::id(), mount_point.display()),
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
