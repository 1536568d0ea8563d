//! The signals `worldfs run` gets, and those it passes on to the command.

use std::process::{Command, ExitStatus};
use std::sync::Arc;

use anyhow::{Context, bail};
use parking_lot::Mutex;
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};

/// What the signal thread and the run share.
#[derive(Default)]
struct Shared {
    /// The command's pid while it runs and is not reaped; 0 otherwise.
    command: i32,
    /// The last signal that came while no command's pid was known.
    got: i32,
}

/// The signals `worldfs run` gets: before the command runs, any of them ends the run; while
/// it runs, SIGTERM and SIGHUP are passed on to it, and SIGINT and SIGQUIT, which a terminal
/// sends to the command as well, are left to it.
pub(super) struct Signals {
    shared: Arc<Mutex<Shared>>,
}

impl Signals {
    pub(super) fn watch() -> anyhow::Result<Signals> {
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGQUIT, SIGTERM, SIGHUP])
            .context("installing signal handlers")?;
        let shared = Arc::new(Mutex::new(Shared::default()));
        let s = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("worldfs-run-signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    // Under the lock, so a signal is either passed on or left for `run` to
                    // find, never lost between the two.
                    let mut s = s.lock();
                    if s.command > 0 {
                        if sig == SIGTERM || sig == SIGHUP {
                            // SAFETY: the command's pid, set only while it is not reaped.
                            unsafe { libc::kill(s.command, sig) };
                        }
                    } else {
                        s.got = sig;
                    }
                }
            })
            .context("starting the signal thread")?;
        Ok(Signals { shared })
    }

    /// An error if a signal asked the run to end while `doing`.
    pub(super) fn check(&self, doing: &str) -> anyhow::Result<()> {
        match self.shared.lock().got {
            0 => Ok(()),
            sig => bail!("stopped by signal {sig} while {doing}"),
        }
    }

    /// Runs `command` to its end, passing signals on as it runs. A SIGTERM or SIGHUP that came
    /// after the last `check`, before the command's pid was known (the command may already run
    /// by then, even have said it is ready), is passed on at once: it was meant to end the run.
    pub(super) fn run(&self, command: &mut Command) -> std::io::Result<ExitStatus> {
        let mut child = command.spawn()?;
        let pid = child.id() as i32;
        let pending = {
            let mut s = self.shared.lock();
            s.command = pid;
            std::mem::take(&mut s.got)
        };
        if pending == SIGTERM || pending == SIGHUP {
            // SAFETY: the child just spawned, not reaped.
            unsafe { libc::kill(pid, pending) };
        }
        // Waited for without reaping, so the signal thread never sends to a pid reused since.
        let waited = loop {
            // SAFETY: a zeroed siginfo_t is valid for waitid to fill.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            // SAFETY: waits for our own child, leaving it to be reaped below.
            let r = unsafe {
                libc::waitid(
                    libc::P_PID,
                    pid as libc::id_t,
                    &mut info,
                    libc::WEXITED | libc::WNOWAIT,
                )
            };
            if r == 0 {
                break Ok(());
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                break Err(e);
            }
        };
        self.shared.lock().command = 0;
        waited?;
        child.wait()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    /// A SIGTERM that comes before the command's pid is known (here, before it is started) is
    /// passed on to it: it ends the command, by its trap (9) or, if it comes before the trap is
    /// set, by itself. Lost, the command would loop for 5 s and end with 0.
    #[test]
    fn a_sigterm_before_the_commands_pid_is_known_reaches_it() {
        let signals = Signals::watch().unwrap();
        // SAFETY: a signal to this process, whose handler `watch` installed.
        unsafe { libc::kill(libc::getpid(), SIGTERM) };
        let start = Instant::now();
        while signals.shared.lock().got != SIGTERM {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the signal never came"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let script =
            "trap 'exit 9' TERM; i=0; while [ $i -lt 100 ]; do sleep 0.05; i=$((i+1)); done";
        let status = signals
            .run(Command::new("sh").args(["-c", script]))
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert!(
            status.code() == Some(9) || status.signal() == Some(SIGTERM),
            "{status}"
        );
        assert_eq!(signals.shared.lock().command, 0);
    }
}
