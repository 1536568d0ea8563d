//! The log of `worldfs run`'s daemons, and the warnings read back from it.

use std::fs::File;
use std::fs::OpenOptions;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context, bail};
use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;

use super::{POLL, QUIET_POLL};

/// The log file: the daemons' stderr, and a thread reading back what they add to it.
pub(super) struct Log {
    pub(super) path: PathBuf,
    tail: Arc<Mutex<Tail>>,
    /// The proxy's address, from the line it prints once it listens.
    pub(super) proxy_url: Receiver<String>,
    stop: Arc<AtomicBool>,
}

/// Where the reading of the log is.
struct Tail {
    file: File,
    /// The end of a line not written whole yet.
    partial: Vec<u8>,
    /// While the command runs, warnings go to the log only.
    quiet: bool,
    proxy_url: Sender<String>,
    /// The model calls the proxy took, from the line it prints when it stops.
    proxy_calls: Option<u64>,
}

impl Log {
    pub(super) fn create(path: &Path) -> anyhow::Result<Log> {
        // Read back as it grows: a terminal or a pipe would hold the reading (a FIFO, even the
        // opening), and /dev/null would hide the proxy's address. Looked at before it is
        // opened, or truncated.
        let regular = std::fs::metadata(path).map_or(true, |m| m.is_file());
        if !regular {
            bail!(
                "--log {}: not a regular file (the daemons write to it and `worldfs run` reads \
                 their warnings back from it)",
                path.display()
            );
        }
        File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let file = File::open(path).with_context(|| format!("reading {}", path.display()))?;
        let (tx, rx) = crossbeam_channel::bounded(1);
        let tail = Arc::new(Mutex::new(Tail {
            file,
            partial: Vec::new(),
            quiet: false,
            proxy_url: tx,
            proxy_calls: None,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, st) = (Arc::clone(&tail), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("worldfs-run-log".into())
            .spawn(move || {
                while !st.load(Ordering::Relaxed) {
                    // While the command runs nothing is shown: the lines wait in the file,
                    // and are gone over when the command has ended (`quiet`).
                    let (shown, quiet) = {
                        let mut t = t.lock();
                        let shown = if t.quiet { Vec::new() } else { t.pump() };
                        (shown, t.quiet)
                    };
                    show(&shown);
                    std::thread::sleep(if quiet { QUIET_POLL } else { POLL });
                }
            })
            .context("starting the log thread")?;
        Ok(Log {
            path: path.to_owned(),
            tail,
            proxy_url: rx,
            stop,
        })
    }

    /// A daemon's stderr: the log, appended to (each of the daemons' lines is one write, so
    /// theirs do not mix).
    pub(super) fn writer(&self) -> anyhow::Result<File> {
        OpenOptions::new()
            .append(true)
            .open(&self.path)
            .with_context(|| format!("opening {}", self.path.display()))
    }

    /// Whether warnings are shown; what was written before is handled as it was then (shown,
    /// or while quiet, only kept in the log).
    pub(super) fn quiet(&self, on: bool) {
        let shown = {
            let mut t = self.tail.lock();
            let shown = t.pump();
            t.quiet = on;
            shown
        };
        show(&shown);
    }

    /// How many model calls the proxy took, once it has stopped and said so.
    pub(super) fn proxy_calls(&self) -> Option<u64> {
        self.pump();
        self.tail.lock().proxy_calls
    }

    /// Reads what the daemons have added to the log by now.
    pub(super) fn pump(&self) {
        let shown = self.tail.lock().pump();
        show(&shown);
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Tail {
    /// Goes over each whole line added since the last look: the proxy's address is passed on;
    /// the warnings and errors, unless quiet, are returned to be shown.
    fn pump(&mut self) -> Vec<String> {
        let mut shown = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            let n = match self.file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            };
            // Line by line as it is read: a log grown large while the command ran (with -v)
            // is never held whole.
            let mut pending = std::mem::take(&mut self.partial);
            pending.extend_from_slice(&buf[..n]);
            let mut start = 0;
            while let Some(len) = pending[start..].iter().position(|&b| b == b'\n') {
                self.line(
                    &String::from_utf8_lossy(&pending[start..start + len]),
                    &mut shown,
                );
                start += len + 1;
            }
            pending.drain(..start);
            self.partial = pending;
        }
        shown
    }

    fn line(&mut self, line: &str, shown: &mut Vec<String>) {
        if let Some(url) = proxy_url(line) {
            let _ = self.proxy_url.try_send(url);
        }
        if let Some(n) = proxy_calls(line) {
            self.proxy_calls = Some(n);
        }
        // `error:` is clap's, for arguments it refused.
        let warning = ["worldfs: warning", "worldfs: error", "error:"]
            .iter()
            .any(|p| line.starts_with(p));
        if warning && !self.quiet {
            shown.push(line.to_owned());
        }
    }
}

/// Shows the daemons' warnings on our stderr.
fn show(lines: &[String]) {
    for l in lines {
        eprintln!("{l}");
    }
}

/// The model calls counted in the line `worldfs proxy` prints when it stops ("model calls: 3
/// sent with the projection, 1 as they came, 0 as they came because ...").
fn proxy_calls(line: &str) -> Option<u64> {
    let counts = line.strip_prefix("worldfs: proxy stopped; model calls: ")?;
    counts
        .split(", ")
        .map(|c| c.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
}

/// The proxy's address from the line `worldfs proxy` prints once it listens.
fn proxy_url(line: &str) -> Option<String> {
    let rest = line.strip_prefix("worldfs: proxy on ")?;
    let url = rest.split_whitespace().next()?;
    url.starts_with("http://").then(|| url.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A log file being written, and a reader of it as `worldfs run` has.
    fn tail() -> (tempfile::TempDir, File, Tail, Receiver<String>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.log");
        let writer = File::create(&path).unwrap();
        let (tx, rx) = crossbeam_channel::bounded(1);
        let tail = Tail {
            file: File::open(&path).unwrap(),
            partial: Vec::new(),
            quiet: false,
            proxy_url: tx,
            proxy_calls: None,
        };
        (dir, writer, tail, rx)
    }

    fn write(mut f: &File, s: &str) {
        std::io::Write::write_all(&mut f, s.as_bytes()).unwrap();
    }

    #[test]
    fn warnings_are_shown_once_their_line_is_whole() {
        let (_d, w, mut t, _) = tail();
        write(
            &w,
            "worldfs: mounted /p in place\nworldfs: warning: the wor",
        );
        assert!(t.pump().is_empty(), "half a line shown");
        write(
            &w,
            "ld is not kept\nerror: unexpected argument\n2026 INFO x\n",
        );
        assert_eq!(
            t.pump(),
            [
                "worldfs: warning: the world is not kept",
                "error: unexpected argument"
            ]
        );
        assert!(t.pump().is_empty(), "a line shown twice");
    }

    /// Read 8 KiB at a time, a line across two reads comes out whole, once.
    #[test]
    fn a_line_across_two_reads_is_whole() {
        let (_d, w, mut t, _) = tail();
        write(
            &w,
            &format!("{}\nworldfs: warning: split\n", "x".repeat(8185)),
        );
        assert_eq!(t.pump(), ["worldfs: warning: split"]);
    }

    #[test]
    fn while_quiet_warnings_stay_in_the_log_and_the_proxy_address_still_comes() {
        let (_d, w, mut t, rx) = tail();
        t.quiet = true;
        write(
            &w,
            "worldfs: warning: while the agent runs\nworldfs: proxy on http://127.0.0.1:5 for\n",
        );
        assert!(t.pump().is_empty());
        assert_eq!(rx.try_recv().as_deref(), Ok("http://127.0.0.1:5"));
        t.quiet = false;
        write(&w, "worldfs: warning: after\n");
        assert_eq!(t.pump(), ["worldfs: warning: after"]);
    }

    #[test]
    fn the_proxy_address_is_read_from_its_line() {
        let line = "worldfs: proxy on http://127.0.0.1:41234 for the mount's socket /run/x.sock, \
                    forwarding to https://api.anthropic.com";
        assert_eq!(proxy_url(line).as_deref(), Some("http://127.0.0.1:41234"));
        assert_eq!(
            proxy_url("worldfs: start Claude Code with ANTHROPIC_BASE_URL=x"),
            None
        );
    }

    #[test]
    fn the_proxys_calls_are_read_from_its_last_line() {
        let line = "worldfs: proxy stopped; model calls: 3 sent with the projection, 1 as they \
                    came, 2 as they came because the projection failed";
        assert_eq!(proxy_calls(line), Some(6));
        let none = "worldfs: proxy stopped; model calls: 0 sent with the projection, 0 as they \
                    came, 0 as they came because the projection failed";
        assert_eq!(proxy_calls(none), Some(0));
        assert_eq!(
            proxy_calls("worldfs: proxy on http://127.0.0.1:5 for"),
            None
        );
    }
}
