//! A small separate process that outlives a killed daemon and aborts its FUSE connection.
//!
//! When the daemon is killed (SIGKILL) while a thread of it is inside the kernel delivering a
//! cache invalidation, that thread can wait forever for a directory lock held by a request only
//! the dead daemon could answer; the process then never finishes dying, and every program using
//! the mount hangs. Aborting the connection ends those requests (with ENOTCONN), which frees the
//! thread and lets the process die. The daemon itself cannot do this once it is killed, so a
//! watchdog process does, and only while the same mount is still in place. It also removes
//! what the dead daemon would have removed at its end: its pid file and its socket.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::socket::paths::{self, SocketIdentity};

const POLL: Duration = Duration::from_millis(100);
const FUSECTL: &str = "/sys/fs/fuse/connections";

/// The descriptor the watchdog finds the connection's `abort` file at.
const ABORT_FD: RawFd = 3;

/// Starts `worldfs __watchdog` for the daemon (this process), the mount at `target` and the
/// daemon's `socket`. The connection's `abort` file is opened here, while the connection is
/// surely this mount's, and handed down: the watchdog, started a moment later, could already
/// find another mount's connection under the same number (see [`open_abort`]).
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
    // Without the control file system (not root), the watchdog tries by the path at the end.
    let abort = open_abort(dev).ok();
    if let Some(file) = &abort {
        let fd = file.as_raw_fd();
        cmd.arg("--abort-fd").arg(ABORT_FD.to_string());
        // SAFETY: only dup2 and fcntl between fork and exec, both async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                if fd == ABORT_FD {
                    // dup2 onto itself keeps close-on-exec set.
                    if libc::fcntl(fd, libc::F_SETFD, 0) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                } else if libc::dup2(fd, ABORT_FD) < 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
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

/// Waits (a few seconds at most) until every thread of `pid` has ended: its main thread ends
/// before the rest, whose descriptors, its socket's among them, stay open until the last one
/// is gone (and `/proc/PID/fd`, read through the main thread, already shows none).
fn wait_released(pid: u32) {
    for _ in 0..50 {
        let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) else {
            return;
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::trim)
                .unwrap_or_default()
                .to_owned()
        };
        // A zombie counts itself until it is reaped.
        if field("State:").starts_with('Z') && field("Threads:") == "1" {
            return;
        }
        std::thread::sleep(POLL);
    }
}

/// Aborts the FUSE connection of the mount whose device is `dev`: every request waiting on it
/// fails with ENOTCONN. fusectl's files belong to the user who mounted, so this needs no root
/// when the control file system is mounted (root mounts it if not).
pub fn abort_connection(dev: u64) -> io::Result<()> {
    abort(&mut open_abort(dev)?)
}

/// The `abort` file of the FUSE connection whose device is `dev`, opened for writing.
///
/// A connection is named by its device's minor number, which the next FUSE mount reuses once
/// the connection is gone; a descriptor opened while the connection is there stays that
/// connection's: once it is gone, a write to it reaches none (the kernel unhooks its files).
fn open_abort(dev: u64) -> io::Result<File> {
    let path = abort_path(dev);
    if !path.exists() {
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
    OpenOptions::new().write(true).open(&path)
}

fn abort_path(dev: u64) -> PathBuf {
    connection_dir(dev).join("abort")
}

/// The FUSE control file system's directory of the connection whose device is `dev`: there
/// while the connection lives (and the control file system is mounted).
pub fn connection_dir(dev: u64) -> PathBuf {
    PathBuf::from(FUSECTL).join(libc::minor(dev).to_string())
}

fn abort(file: &mut File) -> io::Result<()> {
    file.write_all(b"1")
}

/// Whether `file`, opened by [`open_abort`] for `dev`, is still the `abort` file of the
/// connection that device names: a new connection's files are new inodes. (A write to a gone
/// connection's file is accepted and does nothing, so it cannot tell.)
fn same_connection(file: &File, dev: u64) -> bool {
    match (file.metadata(), std::fs::metadata(abort_path(dev))) {
        (Ok(held), Ok(now)) => (held.dev(), held.ino()) == (now.dev(), now.ino()),
        _ => false,
    }
}

/// Whether a daemon listens on the socket at `p`.
fn answers(p: &Path) -> bool {
    std::os::unix::net::UnixStream::connect(p).is_ok()
}

/// Removes the pid file of `target` while it is still `pid`'s, and `socket` while it is still
/// the file the daemon made (`socket_file`): a killed daemon leaves both, one pair per mount
/// point (a crash test's temporary ones piled up by the hundred). A daemon started since for
/// the same mount point has written its own, which stay.
fn forget_dead(pid: u32, target: &Path, socket: Option<(&Path, SocketIdentity)>) {
    if let Ok(file) = crate::runtime::pid_file(target)
        && std::fs::read_to_string(&file)
            .is_ok_and(|t| t.lines().next().map(str::trim) == Some(pid.to_string().as_str()))
    {
        let _ = std::fs::remove_file(&file);
    }
    if let Some((path, made)) = socket
        && paths::identity(path) == Some(made)
        && !answers(path)
    {
        let _ = std::fs::remove_file(path);
    }
}

/// The watchdog's loop: returns once the daemon is gone.
pub fn run(
    pid: u32,
    dev: u64,
    target: &Path,
    socket: Option<&Path>,
    abort_fd: Option<RawFd>,
) -> anyhow::Result<()> {
    // The daemon made its socket before starting this process.
    let socket = socket.and_then(|s| paths::identity(s).map(|made| (s, made)));
    let held = match abort_fd {
        // SAFETY: the descriptor the daemon handed down (`spawn`), ours alone.
        Some(fd) => Ok(unsafe { File::from_raw_fd(fd) }),
        None => open_abort(dev),
    };
    while alive(pid) {
        std::thread::sleep(POLL);
    }
    // A clean exit unmounts first; only a mount still standing with the same device belongs to
    // a daemon that died without cleaning up, and only if the descriptor still reaches the
    // daemon's connection: the same device may be a mount made since.
    if crate::mountinfo::worldfs_dev_at(target) == Some(dev) {
        let aborted = match held {
            Ok(mut file) if same_connection(&file, dev) => abort(&mut file).map(|()| true),
            // The daemon's connection is gone: the mount there now is another daemon's.
            Ok(_) => Ok(false),
            // Opening it failed at the start (no control file system, not root): by the path.
            Err(_) => abort_connection(dev).map(|()| true),
        };
        match aborted {
            Ok(true) => crate::say!(
                "worldfs: the daemon for {} died; its connection was aborted (run `worldfs unmount {}`)",
                target.display(),
                target.display()
            ),
            Ok(false) => {}
            Err(e) => crate::say!(
                "worldfs: warning: the daemon for {} died, and its connection could not be \
                 aborted: {e}",
                target.display()
            ),
        }
    }
    // After the abort: threads stuck in the kernel keep the process, and its socket, open
    // until then.
    wait_released(pid);
    forget_dead(pid, target, socket);
    Ok(())
}
