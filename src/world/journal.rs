//! Append-only JSONL journal of observations, for audit. Never read back into the world.
//!
//! It runs on its own thread so serializing and writing never slows ingest: the ingest thread
//! hands over batches (moving the observations, no copies) through a bounded channel, and a full
//! channel drops the batch and counts it rather than stalling ingest. The writer flushes at least
//! once a second, so a crash loses at most the last second, and rotates by size: `PATH` is the
//! current file, `PATH.1` the previous one, up to `PATH.<keep_files>`.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TrySendError};
use serde::Serialize;

use super::attribution::Class;
use super::config::JournalConfig;
use crate::observation::Observation;

/// One journal line: the observation plus what the world made of it.
#[derive(Debug, Clone, Serialize)]
pub struct JournalItem {
    #[serde(flatten)]
    pub obs: Observation,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub class: Option<Class>,
    #[serde(skip_serializing_if = "Option::is_none", serialize_with = "ser_comm")]
    pub comm: Option<Arc<str>>,
}

fn ser_comm<S: serde::Serializer>(c: &Option<Arc<str>>, s: S) -> Result<S::Ok, S::Error> {
    match c {
        Some(c) => s.serialize_str(c),
        None => s.serialize_none(),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum JournalError {
    #[error("cannot open journal {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot start the journal thread: {0}")]
    Spawn(#[source] io::Error),
}

/// Counters shared with stats.
#[derive(Debug, Default)]
pub struct JournalCounters {
    pub written: AtomicU64,
    pub dropped: AtomicU64,
    pub write_errors: AtomicU64,
    pub rotations: AtomicU64,
}

/// The sending side, owned by the ingest thread.
pub struct Journal {
    tx: Option<Sender<Vec<JournalItem>>>,
    thread: Option<JoinHandle<()>>,
    counters: Arc<JournalCounters>,
}

/// Batches in flight before the journal starts dropping.
const QUEUE_BATCHES: usize = 256;
const FLUSH_EVERY: Duration = Duration::from_secs(1);

impl Journal {
    pub fn start(
        path: &Path,
        cfg: &JournalConfig,
        counters: Arc<JournalCounters>,
    ) -> Result<Self, JournalError> {
        let writer = Writer::open(path, cfg, Arc::clone(&counters))?;
        let (tx, rx) = crossbeam_channel::bounded(QUEUE_BATCHES);
        let thread = std::thread::Builder::new()
            .name("worldfs-journal".into())
            .spawn(move || writer.run(rx))
            .map_err(JournalError::Spawn)?;
        Ok(Self {
            tx: Some(tx),
            thread: Some(thread),
            counters,
        })
    }

    /// Hands a batch to the writer without blocking; a full queue drops it (counted).
    pub fn send(&self, batch: Vec<JournalItem>) {
        if batch.is_empty() {
            return;
        }
        let n = batch.len() as u64;
        let Some(tx) = &self.tx else { return };
        match tx.try_send(batch) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.counters.dropped.fetch_add(n, Ordering::Relaxed);
            }
        }
    }

    /// Flushes everything sent so far and stops the writer.
    pub fn finish(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take()
            && t.join().is_err()
        {
            tracing::error!("journal writer thread panicked");
        }
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        self.shutdown();
    }
}

struct Writer {
    path: PathBuf,
    out: BufWriter<File>,
    size: u64,
    max_bytes: u64,
    keep: u32,
    counters: Arc<JournalCounters>,
    warned: bool,
}

fn open_append(path: &Path) -> Result<(File, u64), JournalError> {
    let err = |source| JournalError::Open {
        path: path.to_owned(),
        source,
    };
    let f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(err)?;
    let size = f.metadata().map_err(err)?.len();
    Ok((f, size))
}

impl Writer {
    fn open(
        path: &Path,
        cfg: &JournalConfig,
        counters: Arc<JournalCounters>,
    ) -> Result<Self, JournalError> {
        let (f, size) = open_append(path)?;
        Ok(Self {
            path: path.to_owned(),
            out: BufWriter::with_capacity(64 * 1024, f),
            size,
            max_bytes: cfg.max_file_mib.saturating_mul(1 << 20),
            keep: cfg.keep_files,
            counters,
            warned: false,
        })
    }

    fn run(mut self, rx: Receiver<Vec<JournalItem>>) {
        let mut last_flush = Instant::now();
        loop {
            match rx.recv_timeout(FLUSH_EVERY) {
                Ok(batch) => {
                    for item in &batch {
                        self.write(item);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if last_flush.elapsed() >= FLUSH_EVERY || rx.is_empty() {
                self.flush();
                last_flush = Instant::now();
            }
        }
        self.flush();
    }

    fn write(&mut self, item: &JournalItem) {
        let mut line = match serde_json::to_vec(item) {
            Ok(l) => l,
            Err(e) => return self.failed(&e),
        };
        line.push(b'\n');
        if self.size > 0 && self.size + line.len() as u64 > self.max_bytes {
            self.rotate();
        }
        match self.out.write_all(&line) {
            Ok(()) => {
                self.size += line.len() as u64;
                self.counters.written.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => self.failed(&e),
        }
    }

    fn flush(&mut self) {
        if let Err(e) = self.out.flush() {
            self.failed(&e);
        }
    }

    fn failed(&mut self, e: &dyn std::fmt::Display) {
        self.counters.write_errors.fetch_add(1, Ordering::Relaxed);
        if !self.warned {
            tracing::warn!(path = %self.path.display(), "journal write failed: {e}");
            self.warned = true;
        }
    }

    fn numbered(&self, n: u32) -> PathBuf {
        let mut p = self.path.clone().into_os_string();
        p.push(format!(".{n}"));
        PathBuf::from(p)
    }

    fn rotate(&mut self) {
        self.flush();
        if self.keep == 0 {
            // Nothing to keep: start the file over.
            if let Err(e) = self.out.get_ref().set_len(0) {
                return self.failed(&e);
            }
        } else {
            let _ = std::fs::remove_file(self.numbered(self.keep));
            for n in (1..self.keep).rev() {
                let _ = std::fs::rename(self.numbered(n), self.numbered(n + 1));
            }
            if let Err(e) = std::fs::rename(&self.path, self.numbered(1)) {
                return self.failed(&e);
            }
        }
        match open_append(&self.path) {
            Ok((f, size)) => {
                self.out = BufWriter::with_capacity(64 * 1024, f);
                self.size = size;
                self.counters.rotations.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => self.failed(&e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::Op;
    use std::time::SystemTime;

    fn item(seq: u64) -> JournalItem {
        JournalItem {
            obs: Observation {
                seq,
                time: SystemTime::UNIX_EPOCH,
                op: Op::Read { offset: 0, len: 10 },
                path: PathBuf::from(format!("dir/file-{seq:06}.rs")),
                pid: 42,
                caller: None,
            },
            class: Some(Class::Agent),
            comm: Some(Arc::from("cat")),
        }
    }

    #[test]
    fn writes_jsonl_with_attribution() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("j.jsonl");
        let counters = Arc::new(JournalCounters::default());
        let j = Journal::start(&path, &JournalConfig::default(), Arc::clone(&counters))
            .unwrap_or_else(|e| panic!("{e}"));
        j.send(vec![item(1), item(2)]);
        j.finish();
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["seq"], 1);
        assert_eq!(lines[0]["op"]["op"], "read");
        assert_eq!(lines[0]["class"], "agent");
        assert_eq!(lines[0]["comm"], "cat");
        assert_eq!(counters.written.load(Ordering::Relaxed), 2);
    }

    #[test]
    fn flushes_within_a_second_without_more_input() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("j.jsonl");
        let j = Journal::start(&path, &JournalConfig::default(), Arc::default())
            .unwrap_or_else(|e| panic!("{e}"));
        j.send(vec![item(1)]);
        // Poll rather than assert a duration: the line must appear while the journal is open.
        let mut seen = false;
        for _ in 0..100 {
            if std::fs::read_to_string(&path).is_ok_and(|t| t.lines().count() == 1) {
                seen = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(seen, "journal never flushed while still open");
        j.finish();
    }

    #[test]
    fn rotates_and_keeps_n_files() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("j.jsonl");
        let cfg = JournalConfig {
            max_file_mib: 1,
            keep_files: 2,
        };
        let counters = Arc::new(JournalCounters::default());
        let j =
            Journal::start(&path, &cfg, Arc::clone(&counters)).unwrap_or_else(|e| panic!("{e}"));
        // ~170 bytes a line: 40k lines is ~6.5 MiB, several rotations.
        for b in 0..40 {
            j.send((0..1000).map(|i| item(b * 1000 + i)).collect());
            while counters.written.load(Ordering::Relaxed)
                + counters.dropped.load(Ordering::Relaxed)
                < (b + 1) * 1000
            {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        j.finish();
        let mut names: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        names.sort();
        assert_eq!(names, vec!["j.jsonl", "j.jsonl.1", "j.jsonl.2"]);
        assert!(counters.rotations.load(Ordering::Relaxed) >= 3);
        for n in &names {
            let len = std::fs::metadata(dir.path().join(n))
                .map(|m| m.len())
                .unwrap_or(u64::MAX);
            assert!(len <= 1 << 20, "{n} is {len} bytes");
        }
        // The newest line is in the current file, and lines are whole.
        let cur = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            cur.lines()
                .last()
                .is_some_and(|l| l.contains("\"seq\":39999"))
        );
        assert!(cur.ends_with('\n'));
    }
}
