//! A small separate process that outlives a killed daemon and aborts its FUSE connection.
//!
//! When the daemon is killed (SIGKILL) while a thread of it is inside the kernel delivering a
//! cache invalidation, that thread can wait forever for a directory lock held by a request only
//! the dead daemon could answer; the process then never finishes dying, and every program using
//! the mount hangs. Aborting the connection ends those requests (with ENOTCONN), which frees the
//! thread and lets the process die. The daemon itself cannot do this once it is killed, so a
//! watchdog process does, and only while the same mount is still in place.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const POLL: Duration = Duration::from_millis(100);
const FUSECTL: &str = "/sys/fs/fuse/connections";

/// Starts `worldfs __watchdog` for the daemon (this process) and the mount at `target`.
pub fn spawn(target: &Path) -> io::Result<Child> {
    // Not a stat of the mount point: nothing serves the mount yet, so it would never return.
    let dev = crate::mountinfo::worldfs_dev_at(target)
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "the mount is not in mountinfo"))?;
    Command::new(std::env::current_exe()?)
        .arg("__watchdog")
        .arg(std::process::id().to_string())
        .arg(dev.to_string())
        .arg(target)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .spawn()
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

/// The watchdog's loop: returns once the daemon is gone.
pub fn run(pid: u32, dev: u64, target: &Path) -> anyhow::Result<()> {
    while alive(pid) {
        std::thread::sleep(POLL);
    }
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
