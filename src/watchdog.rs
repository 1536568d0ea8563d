//! A small separate process that outlives a killed daemon and aborts its FUSE connection.
//!
//! When the daemon is killed (SIGKILL) while a thread of it is inside the kernel delivering a
//! cache invalidation, that thread can wait forever for a directory lock held by a request only
//! the dead daemon could answer; the process then never finishes dying, and every program using
//! the mount hangs. Aborting the connection ends those requests (with ENOTCONN), which frees the
//! thread and lets the process die. The daemon itself cannot do this once it is killed, so a
//! watchdog process does, and only while the same mount is still in place. It also removes
//! what the dead daemon would have removed at its end: its pid file and its socket.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const POLL: Duration = Duration::from_millis(100);
const FUSECTL: &str = "/sys/fs/fuse/connections";

/// Starts `worldfs __watchdog` for the daemon (this process), the mount at `target` and the
/// daemon's `socket`.
pub fn spawn(target: &Path, socket: Option<&Path>) -> io::Result<Child> {
    // Not a stat of the mount point: nothing serves the mount yet, so it would never return.
    let dev = crate::mountinfo::worldfs_dev_at(target)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the mount is not in mountinfo"))?;
    let mut cmd = Command::new(std::env::current_exe()?);
    cmd.arg("__watchdog")
        .arg(std::process::id().to_string())
        .arg(dev.to_string())
        .arg(target);
    if let Some(s) = socket {
        cmd.arg(s);
    }
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).spawn()
}

/// True while `pid`'s main thread is alive (a zombie main thread means it was killed or exited).
fn alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    match stat
        .rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().next())
    {
        Some(state) => state != "Z" && state != "X",
        None => false,
    }
}

/// Aborts the FUSE connection of the mount whose device is `dev`: every request waiting on it
/// fails with ENOTCONN. fusectl's files belong to the user who mounted, so this needs no root
/// when the control file system is mounted (root mounts it if not).
pub fn abort_connection(dev: u64) -> io::Result<()> {
    let n = libc::minor(dev);
    let abort = PathBuf::from(FUSECTL).join(n.to_string()).join("abort");
    if !abort.exists() {
        // The control file system is not always mounted; as root we can mount it.
        let _ = std::fs::create_dir_all(FUSECTL);
        unsafe {
            libc::mount(
                c"fusectl".as_ptr(),
                c"/sys/fs/fuse/connections".as_ptr(),
                c"fusectl".as_ptr(),
                0,
                std::ptr::null(),
            );
        }
    }
    std::fs::write(&abort, b"1")
}

/// Which file a path is now (device and inode), to tell the daemon's socket from one a daemon
/// started since made at the same path.
fn identity(p: &Path) -> Option<(u64, u64)> {
    std::fs::symlink_metadata(p)
        .ok()
        .map(|m| (m.dev(), m.ino()))
}

/// Removes the pid file of `target` while it is still `pid`'s, and `socket` while it is still
/// the file the daemon made (`socket_file`): a killed daemon leaves both, one pair per mount
/// point (a crash test's temporary ones piled up by the hundred). A daemon started since for
/// the same mount point has written its own, which stay.
fn forget_dead(pid: u32, target: &Path, socket: Option<(&Path, (u64, u64))>) {
    if let Ok(file) = crate::runtime::pid_file(target)
        && std::fs::read_to_string(&file)
            .is_ok_and(|t| t.lines().next().map(str::trim) == Some(pid.to_string().as_str()))
    {
        let _ = std::fs::remove_file(&file);
    }
    if let Some((path, made)) = socket
        && identity(path) == Some(made)
    {
        let _ = std::fs::remove_file(path);
    }
}

/// The watchdog's loop: returns once the daemon is gone.
pub fn run(pid: u32, dev: u64, target: &Path, socket: Option<&Path>) -> anyhow::Result<()> {
    // The daemon made its socket before starting this process.
    let socket = socket.and_then(|s| identity(s).map(|made| (s, made)));
    while alive(pid) {
        std::thread::sleep(POLL);
    }
    forget_dead(pid, target, socket);
    // A clean exit unmounts first; only a mount still standing with the same device belongs to
    // a daemon that died without cleaning up.
    if crate::mountinfo::worldfs_dev_at(target) == Some(dev) {
        abort_connection(dev)?;
        eprintln!(
            "worldfs: the daemon for {} died; its connection was aborted (run `worldfs unmount {}`)",
            target.display(),
            target.display()
        );
    }
    Ok(())
}
