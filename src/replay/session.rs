//! One replay's mount: `worldfs mount DIR` (this binary, in place, daemon I/O so byte ranges are
//! observed) and a socket client. Dropping the session always unmounts: SIGTERM, up to 5 s for
//! a clean exit, then SIGKILL and a lazy unmount, so nothing stays mounted after an error.

use std::ffi::CString;
use std::io::{BufRead, BufReader};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::Value;

use crate::socket::client::Client;

const START_TIMEOUT: Duration = Duration::from_secs(20);
const EXIT_TIMEOUT: Duration = Duration::from_secs(5);

/// The world settings of a replay: the replaying process stands in for the agent and every
/// program it ran, so it is the agent, and fan-out (which would take one process reading dozens
/// of files for a scanner) is off.
///
/// The world knows processes by name (`/proc/PID/comm`), so the agent is named as this process
/// is now, not as `worldfs`: a copy under another name (`/tmp/worldfs-old`, for an A/B run) was
/// otherwise an unknown program whose reads made no entries, and replayed with recall 11 of 33
/// instead of 33 of 33 in a trace, without a word.
pub fn replay_config() -> String {
    let own = std::fs::read_to_string("/proc/self/comm")
        .map(|c| c.trim_end_matches('\n').to_owned())
        .ok()
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| "worldfs".to_owned());
    // A JSON string is a valid TOML basic string (same escapes).
    format!(
        "[attribution]\nagent_programs = [{}]\nfanout_threshold = 1000000\n",
        serde_json::Value::from(own)
    )
}

pub struct Session {
    pub root: PathBuf,
    /// O_PATH descriptor of the directory opened before mounting: the disk beneath the mount.
    pub backing: OwnedFd,
    child: Option<Child>,
    client: Option<Client>,
    pub socket: PathBuf,
    log: std::sync::Arc<std::sync::Mutex<String>>,
}

fn cpath(p: &Path) -> Result<CString> {
    CString::new(p.as_os_str().as_bytes()).with_context(|| format!("NUL in {}", p.display()))
}

impl Session {
    /// Mounts `root` in place with `exe` and connects to its socket (`socket`, `config` are
    /// files outside `root`).
    pub fn start(exe: &Path, root: &Path, socket: &Path, config: &Path) -> Result<Session> {
        if !Path::new("/dev/fuse").exists() {
            bail!("/dev/fuse is missing: the replay needs FUSE");
        }
        let c = cpath(root)?;
        // SAFETY: valid path; the descriptor is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error())
                .with_context(|| format!("opening {}", root.display()));
        }
        // SAFETY: fd is a fresh descriptor we own.
        let backing = unsafe { OwnedFd::from_raw_fd(fd) };
        // One FUSE thread: the mount emits an observation after replying, so with several
        // threads two files the replay creates or deletes one after the other could be stamped
        // in either order, and the stream would differ from run to run. The replay makes one
        // system call at a time, so nothing waits on the lone thread.
        // No watcher: the replay changes nothing behind the mount. (With one, the CSVs are
        // the same: the echo of the mount's own writes stamps nothing since session 13.)
        let mut child = Command::new(exe)
            .arg("mount")
            .arg(root)
            .args([
                "--io",
                "daemon",
                "--threads",
                "1",
                "--no-watch",
                "--no-state",
            ])
            .arg("--socket")
            .arg(socket)
            .arg("--config")
            .arg(config)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .with_context(|| format!("starting {} mount {}", exe.display(), root.display()))?;
        let stderr = child.stderr.take().context("daemon stderr")?;
        let log = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel::<PathBuf>();
        {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stderr).lines() {
                    let Ok(line) = line else { break };
                    if let Some(p) = line.strip_prefix("worldfs: socket ") {
                        let _ = tx.send(PathBuf::from(p.trim()));
                    }
                    if let Ok(mut l) = log.lock()
                        && l.len() < 1 << 20
                    {
                        l.push_str(&line);
                        l.push('\n');
                    }
                }
            });
        }
        let mut session = Session {
            root: root.to_owned(),
            backing,
            child: Some(child),
            client: None,
            socket: socket.to_owned(),
            log,
        };
        let start = Instant::now();
        let sock = loop {
            match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(p) => break p,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    bail!(
                        "worldfs mount exited before printing its socket:\n{}",
                        session.log()
                    )
                }
            }
            if let Some(c) = session.child.as_mut()
                && let Ok(Some(st)) = c.try_wait()
            {
                bail!("worldfs mount exited with {st}:\n{}", session.log());
            }
            if start.elapsed() > START_TIMEOUT {
                bail!(
                    "no `worldfs: socket` line after {START_TIMEOUT:?}:\n{}",
                    session.log()
                );
            }
        };
        session.socket = sock.clone();
        session.client = Some(
            Client::connect(&sock, Duration::from_secs(60))
                .with_context(|| format!("connecting to {}", sock.display()))?,
        );
        Ok(session)
    }

    pub fn log(&self) -> String {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }

    pub fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        self.client
            .as_mut()
            .context("not connected")?
            .call(method, params)
            .map_err(|e| anyhow!("{method}: {e}"))
    }

    pub fn backing_fd(&self) -> i32 {
        self.backing.as_raw_fd()
    }

    /// Unmounts (also what Drop does); returns an error if the daemon did not exit cleanly.
    pub fn stop(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        // SAFETY: the child is not reaped, so its pid is still ours.
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let start = Instant::now();
        let status = loop {
            if let Ok(Some(st)) = child.try_wait() {
                break Some(st);
            }
            if start.elapsed() > EXIT_TIMEOUT {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let still = crate::mountinfo::worldfs_mounts()
            .map(|ms| ms.iter().any(|m| m.mount_point == self.root))
            .unwrap_or(false);
        if still && let Ok(c) = cpath(&self.root) {
            // SAFETY: valid path.
            unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        }
        match status {
            Some(st) if st.success() && !still => Ok(()),
            other => bail!(
                "worldfs mount did not exit cleanly ({other:?}, still mounted: {still}):\n{}",
                self.log()
            ),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("worldfs replay: {e:#}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replay_config_names_this_process_as_the_agent() {
        let own = std::fs::read_to_string("/proc/self/comm")
            .unwrap_or_else(|e| panic!("/proc/self/comm: {e}"));
        let cfg = crate::world::config::Config::parse(&replay_config(), Path::new("replay.toml"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.attribution.agent_programs, [own.trim_end()]);
        assert_eq!(cfg.attribution.fanout_threshold, 1_000_000);
    }
}
