//! The signals `worldfs run` gets, and those it passes on to the command.

use std::process::{Command, ExitStatus};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

use anyhow::{Context, bail};

/// The signals `worldfs run` gets: before the command runs, any of them ends the run; while
/// it runs, SIGTERM and SIGHUP are passed on to it, and SIGINT and SIGQUIT, which a terminal
/// sends to the command as well, are left to it.
pub(super) struct Signals {
    got: Arc<AtomicI32>,
    command: Arc<AtomicI32>,
}

impl Signals {
    pub(super) fn watch() -> anyhow::Result<Signals> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGQUIT, SIGTERM, SIGHUP])
            .context("installing signal handlers")?;
        let got = Arc::new(AtomicI32::new(0));
        let command = Arc::new(AtomicI32::new(0));
        let (g, c) = (Arc::clone(&got), Arc::clone(&command));
        std::thread::Builder::new()
            .name("worldfs-run-signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    let pid = c.load(Ordering::SeqCst);
                    if pid > 0 {
                        if sig == SIGTERM || sig == SIGHUP {
                            // SAFETY: the command's pid, set only while it is not reaped.
                            unsafe { libc::kill(pid, sig) };
                        }
                    } else {
                        g.store(sig, Ordering::SeqCst);
                    }
                }
            })
            .context("starting the signal thread")?;
        Ok(Signals { got, command })
    }

    /// An error if a signal asked the run to end while `doing`.
    pub(super) fn check(&self, doing: &str) -> anyhow::Result<()> {
        match self.got.load(Ordering::SeqCst) {
            0 => Ok(()),
            sig => bail!("stopped by signal {sig} while {doing}"),
        }
    }

    /// Runs `command` to its end, passing signals on as it runs.
    pub(super) fn run(&self, command: &mut Command) -> std::io::Result<ExitStatus> {
        let mut child = command.spawn()?;
        self.command.store(child.id() as i32, Ordering::SeqCst);
        let status = child.wait();
        self.command.store(0, Ordering::SeqCst);
        status
    }
}
