//! The mount and the proxy as `worldfs run` starts and stops them.

use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;

use super::log::Log;
use super::{POLL, STOP_WAIT, describe};

/// The daemons started, stopped in the reverse order when the run ends, however it ends, and
/// the log their messages go to.
pub(super) struct Daemons {
    /// The directory mounted.
    dir: PathBuf,
    pub(super) log: Log,
    pub(super) started: Vec<Daemon>,
}

pub(super) struct Daemon {
    pub(super) name: &'static str,
    child: Child,
    /// Whether it is the mount, which may outlive the run detached.
    mount: bool,
}

impl Daemons {
    pub(super) fn new(log: Log, dir: &Path) -> Daemons {
        Daemons {
            dir: dir.to_owned(),
            log,
            started: Vec::new(),
        }
    }

    /// Starts `cmd` in a process group of its own, its stderr the log; returns its index for
    /// [`Daemons::exited`].
    pub(super) fn spawn(
        &mut self,
        name: &'static str,
        mut cmd: Command,
        proxy: bool,
    ) -> anyhow::Result<usize> {
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.log.writer()?)
            .process_group(0);
        // SAFETY: prctl and getppid are async-signal-safe system calls, and the closure
        // allocates nothing, as code between fork and exec must.
        unsafe {
            cmd.pre_exec(move || {
                // SIGTERM is what `stop` sends too: the mount unmounts (detached if busy), the
                // proxy stops. Sent when the thread that forked ends; this is the main one,
                // which lives as long as `worldfs run`.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Ended between the fork and the prctl: no signal will come.
                if libc::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        let child = cmd.spawn().with_context(|| format!("starting {name}"))?;
        self.started.push(Daemon {
            name,
            child,
            mount: !proxy,
        });
        Ok(self.started.len() - 1)
    }

    /// The exit status of the `i`th daemon started, once it has ended.
    pub(super) fn exited(&mut self, i: usize) -> anyhow::Result<Option<ExitStatus>> {
        let Some(d) = self.started.get_mut(i) else {
            return Ok(None);
        };
        let st = d
            .child
            .try_wait()
            .with_context(|| format!("waiting for {}", d.name))?;
        if st.is_some() {
            // Its last lines (the error) are shown before the message that points to them.
            self.log.pump();
        }
        Ok(st)
    }

    /// Stops the daemons started after the mount (the proxy), the last started first, leaving
    /// the mount serving: what they told it is then all in.
    pub(super) fn stop_all_but_the_mount(&mut self) {
        while self.started.last().is_some_and(|d| !d.mount) {
            self.stop_last();
        }
    }

    /// Stops each daemon (SIGTERM), the last started first. The mount may stay as a detached
    /// mount, served until the processes that hold it let go, which is said.
    pub(super) fn stop(&mut self) {
        while !self.started.is_empty() {
            self.stop_last();
        }
    }

    /// Stops the last daemon started, and says how it ended when that is news.
    fn stop_last(&mut self) {
        let Some(mut d) = self.started.pop() else {
            return;
        };
        if let Ok(Some(_)) = d.child.try_wait() {
            return;
        }
        let pid = d.child.id() as libc::pid_t;
        // SAFETY: a signal to our own child, not reaped yet, so the pid is still its.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let stopped = self.wait_stopped(&mut d);
        // Its warnings (a failed save) come before what is said of its end.
        self.log.pump();
        match stopped {
            Stopped::Exited(st) if d.mount && st.success() => {
                eprintln!("worldfs: unmounted {}", self.dir.display());
            }
            Stopped::Exited(st) if !st.success() && st.signal() != Some(libc::SIGTERM) => {
                eprintln!(
                    "worldfs: warning: {} ended with {} (see {})",
                    d.name,
                    describe(st),
                    self.log.path.display()
                );
            }
            Stopped::Exited(_) => {}
            Stopped::Detached => eprintln!(
                "worldfs: {} was still in use, so it is detached: its daemon (pid {pid}) \
                 serves the processes that hold it until they let go (see {})",
                self.dir.display(),
                self.log.path.display()
            ),
            Stopped::Running => eprintln!(
                "worldfs: warning: {} (pid {pid}) did not stop within {} s (see {}){}",
                d.name,
                STOP_WAIT.as_secs(),
                self.log.path.display(),
                if d.mount {
                    format!(
                        "; `worldfs unmount {}` removes the mount",
                        self.dir.display()
                    )
                } else {
                    String::new()
                }
            ),
        }
    }

    /// Waits for `d`, told to stop, to end; for the mount, also for it to leave the mount
    /// table (a busy mount is detached and its daemon goes on serving it).
    fn wait_stopped(&self, d: &mut Daemon) -> Stopped {
        let start = Instant::now();
        loop {
            match d.child.try_wait() {
                Ok(Some(st)) => return Stopped::Exited(st),
                Ok(None) => {}
                Err(_) => return Stopped::Running,
            }
            // Given a moment first: a daemon that unmounted is about to exit.
            if d.mount && start.elapsed() > Duration::from_secs(1) && !self.mounted() {
                return Stopped::Detached;
            }
            if start.elapsed() > STOP_WAIT {
                return Stopped::Running;
            }
            std::thread::sleep(POLL);
        }
    }

    /// Whether a worldfs mount is at the directory.
    fn mounted(&self) -> bool {
        crate::mountinfo::worldfs_mount_covering(&self.dir)
            .ok()
            .flatten()
            .is_some_and(|m| m.mount_point == self.dir)
    }
}

/// How a daemon told to stop ended up.
enum Stopped {
    Exited(ExitStatus),
    /// The mount, detached: its daemon serves those still holding it.
    Detached,
    /// Still there after [`STOP_WAIT`].
    Running,
}

impl Drop for Daemons {
    /// A run that failed before its command ended stops what it started all the same.
    fn drop(&mut self) {
        self.stop();
    }
}
