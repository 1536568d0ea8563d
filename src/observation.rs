//! What the file system saw: one record per operation that reads or changes a file, a directory
//! listing or a name, plus changes the watcher saw being made behind the mount.
//!
//! This is the only type that crosses from `fs` to `world`. The file-system threads must never wait
//! on the world, so [`ObservationSink::emit`] is a non-blocking send into a bounded channel; when
//! the channel is full the observation is dropped and counted, never silently lost.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, Sender};
use serde::Serialize;

/// One thing that happened to the tree, as seen by the mount or by the watcher on SOURCE.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Observation {
    /// Monotonic per mount, starting at 1; gaps mean dropped observations.
    pub seq: u64,
    pub time: SystemTime,
    pub op: Op,
    /// Path relative to the mounted root (empty for the root itself). For renames: the old path.
    pub path: PathBuf,
    /// Pid of the calling process as the kernel reported it; 0 when unknown (watcher, release).
    pub pid: u32,
    /// The caller's program and parent, read while it was still running (opens, creates and
    /// daemon-mode reads and writes); the world falls back to it when the pid is gone from
    /// `/proc` by the time it looks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller: Option<Arc<CallerStamp>>,
}

/// Who made a request, read from `/proc/PID` on the FUSE thread while the caller still exists.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CallerStamp {
    pub comm: Arc<str>,
    pub ppid: u32,
    /// With the pid, identifies the process (a reused pid has another start time).
    pub start_time: u64,
    /// The command line (capped as [`crate::proc_stat::MAX_ARGS`] says): the rules that look at
    /// arguments (a file named on it, `grep -r`) need it for a `python3 fix.py` that exited
    /// before the world looked. Left out of the journal, which names the program only.
    #[serde(skip)]
    pub args: Arc<[Box<str>]>,
    /// The parent's stamp, read with this one (its own parent, and so on up the chain): the
    /// shell between a script and the agent has often exited too when the world looks, and
    /// whether the script ran below the agent decides whose its changes are.
    #[serde(skip)]
    pub parent: Option<Arc<CallerStamp>>,
}

impl CallerStamp {
    /// The stamped ancestors, parent first, each with its pid.
    pub fn ancestors(&self) -> impl Iterator<Item = (u32, &CallerStamp)> {
        let mut pid = self.ppid;
        std::iter::successors(self.parent.as_deref(), |a| a.parent.as_deref()).map(move |a| {
            let this = pid;
            pid = a.ppid;
            (this, a)
        })
    }
}

/// What kind of access an observation records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub enum Op {
    /// A regular file was opened. With kernel passthrough this is the only sign of reads and
    /// writes the daemon gets; the flags say which.
    Open {
        read: bool,
        write: bool,
        truncate: bool,
        /// True when this open created the file.
        created: bool,
    },
    /// Bytes read through the daemon (only in daemon I/O mode).
    Read {
        offset: u64,
        len: u64,
    },
    /// Bytes written through the daemon (only in daemon I/O mode).
    Write {
        offset: u64,
        len: u64,
    },
    /// Last close of an open file handle; `wrote` is true if it was opened for writing.
    Close {
        wrote: bool,
    },
    /// The file's size was set (truncate/ftruncate/O_TRUNC through setattr).
    Truncate {
        size: u64,
    },
    /// Metadata changed (mode, owner, times).
    SetAttr,
    /// A directory was listed.
    ReadDir,
    Mkdir,
    Mknod,
    Symlink,
    /// A new name for an existing file; `path` is the new name, `target` the existing one.
    Link {
        target: PathBuf,
    },
    Unlink,
    Rmdir,
    /// `path` moved to `to`; with `exchange`, the two swapped places.
    Rename {
        to: PathBuf,
        exchange: bool,
        /// A directory moved (either one, for an exchange), so names below it moved too. When
        /// only files moved, the world changes the two names alone instead of looking at every
        /// entry for names below them, once per rename (an editor's atomic save).
        dir: bool,
    },
    /// Space was allocated or a hole punched.
    Fallocate {
        offset: u64,
        len: u64,
        punch_hole: bool,
    },
    /// A range was copied in the kernel from another file into this one.
    CopyIn {
        from: PathBuf,
        offset: u64,
        len: u64,
    },
    /// The watcher saw this path change behind the mount (not through it).
    External {
        change: ExternalChange,
    },
}

/// A change on SOURCE that did not come through the mount, as far as the watcher can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ExternalChange {
    Created,
    Modified,
    /// Content or attributes changed while the mount itself was changing them (a handle open
    /// for writing, or moments after its last change): most likely the echo of the mount's own
    /// change, which arrives as its own observation, but possibly merged with a change made
    /// behind the mount, so the content is checked again.
    Echo,
    /// A name is gone: a directory (with everything below it), or a name of unknown kind.
    Removed,
    /// A name that was not a directory (a file, a link, a device) is gone: nothing was below it.
    RemovedFile,
    /// The watcher lost events (queue overflow): anything may have changed.
    Rescan,
    /// A file system was mounted or unmounted at this directory (with the path of the mount
    /// point; SOURCE's own directory is never one): what is below it may be other files now.
    Remounted,
    /// The watcher cannot watch this directory (inotify's watch limit): anything may have
    /// changed, and changes below it will go unseen from now on.
    Unwatched,
}

/// The sending half, shared by every file-system thread.
#[derive(Debug, Clone)]
pub struct ObservationSink {
    inner: Option<Arc<SinkInner>>,
}

#[derive(Debug)]
struct SinkInner {
    tx: Sender<Observation>,
    /// Observations in flight beyond which new ones are dropped.
    capacity: usize,
    seq: AtomicU64,
    dropped: AtomicU64,
    /// Requests answered before their observation was emitted ([`ObservationSink::answering`]),
    /// counted per thread so the file-system threads never contend for one cache line.
    answers: [AnswerShard; ANSWER_SHARDS],
}

const ANSWER_SHARDS: usize = 16;

/// One thread's (or a few threads') count of requests answered before their observation was
/// emitted, and of those that have emitted (or given up) since; a cache line of its own.
#[derive(Debug, Default)]
#[repr(align(128))]
struct AnswerShard {
    answering: AtomicU64,
    answered: AtomicU64,
}

impl SinkInner {
    fn shard(&self) -> &AnswerShard {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        thread_local! {
            static SHARD: usize = (NEXT.fetch_add(1, Ordering::Relaxed) as usize) % ANSWER_SHARDS;
        }
        &self.answers[SHARD.with(|s| *s)]
    }

    fn sum(&self, f: impl Fn(&AnswerShard) -> &AtomicU64) -> u64 {
        self.answers
            .iter()
            .map(|s| f(s).load(Ordering::Acquire))
            .sum()
    }
}

/// A request about to be answered whose observation follows the answer (so the caller does not
/// wait for it). Held across the reply and the emit; dropping it says the emit is done.
#[must_use = "hold it until the observation was emitted"]
pub struct Answering<'a> {
    shard: Option<&'a AnswerShard>,
}

impl Drop for Answering<'_> {
    fn drop(&mut self) {
        if let Some(s) = self.shard {
            s.answered.fetch_add(1, Ordering::Release);
        }
    }
}

impl ObservationSink {
    /// A sink with room for `capacity` observations in flight, and the receiving end.
    ///
    /// The channel is a linked list of small blocks bounded by a length check, not an array:
    /// crossbeam's array channel writes every slot when it is created, and 64k slots of
    /// observations were 7 MiB resident from the first second, backlog or not. Several threads
    /// may pass the check at once, so the bound can be overshot by a few observations.
    pub fn bounded(capacity: usize) -> (Self, Receiver<Observation>) {
        Self::bounded_after(capacity, 0)
    }

    /// [`bounded`](Self::bounded), numbering observations after `seq`: a restored world goes
    /// on from the sequence number it was saved at, so numbers clients noted keep their order.
    pub fn bounded_after(capacity: usize, seq: u64) -> (Self, Receiver<Observation>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        let inner = SinkInner {
            tx,
            capacity,
            seq: AtomicU64::new(seq),
            dropped: AtomicU64::new(0),
            answers: std::array::from_fn(|_| AnswerShard::default()),
        };
        (
            Self {
                inner: Some(Arc::new(inner)),
            },
            rx,
        )
    }

    /// A sink that records nothing (`--no-observe`): emitting costs one branch.
    pub fn disabled() -> Self {
        Self { inner: None }
    }

    pub fn is_enabled(&self) -> bool {
        self.inner.is_some()
    }

    /// Records an observation without ever blocking. `path` is only called when observing is on,
    /// so callers can defer path resolution to here.
    pub fn emit(&self, op: Op, pid: u32, path: impl FnOnce() -> Option<PathBuf>) {
        self.emit_from(op, pid, None, path);
    }

    /// [`emit`](Self::emit) with what is known about the caller.
    pub fn emit_from(
        &self,
        op: Op,
        pid: u32,
        caller: Option<Arc<CallerStamp>>,
        path: impl FnOnce() -> Option<PathBuf>,
    ) {
        let Some(inner) = &self.inner else { return };
        if inner.tx.len() >= inner.capacity {
            // Counted like any other drop: its sequence number is left as a gap.
            inner.seq.fetch_add(1, Ordering::Relaxed);
            inner.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        let Some(path) = path() else { return };
        let seq = inner.seq.fetch_add(1, Ordering::Relaxed) + 1;
        let obs = Observation {
            seq,
            time: SystemTime::now(),
            op,
            path,
            pid,
            caller,
        };
        if inner.tx.send(obs).is_err() {
            // The world stopped; an unbounded send never waits.
            inner.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Observations that could not be delivered because the channel was full or closed.
    pub fn dropped(&self) -> u64 {
        self.inner
            .as_ref()
            .map_or(0, |i| i.dropped.load(Ordering::Relaxed))
    }

    /// Observations emitted so far, delivered or not.
    pub fn emitted(&self) -> u64 {
        self.inner
            .as_ref()
            .map_or(0, |i| i.seq.load(Ordering::Relaxed))
    }

    /// Marks a request whose reply goes out before its observation is emitted. Without it, a
    /// process that reads a file and then asks the socket at once could be served before the
    /// read is even emitted: [`Self::emitted_settled`] waits for these.
    pub fn answering(&self) -> Answering<'_> {
        let shard = self.inner.as_deref().map(SinkInner::shard);
        if let Some(s) = shard {
            s.answering.fetch_add(1, Ordering::AcqRel);
        }
        Answering { shard }
    }

    /// [`Self::emitted`], once every request answered before this call has emitted its
    /// observation, or after `timeout`. With requests answered concurrently it counts, it does not
    /// track each one: a later request that emits first can stand in for an earlier one still
    /// on its way. A process that waited for its own replies before calling is always covered
    /// when nothing else uses the mount meanwhile.
    pub fn emitted_settled(&self, timeout: Duration) -> u64 {
        let Some(i) = self.inner.as_deref() else {
            return 0;
        };
        let target = i.sum(|s| &s.answering);
        let start = Instant::now();
        let mut spins = 0u32;
        while i.sum(|s| &s.answered) < target && start.elapsed() < timeout {
            // microseconds in practice (stamping the caller, one channel send)
            if spins < 100 {
                spins += 1;
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        self.emitted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_channel_counts_drops_and_never_blocks() {
        let (sink, rx) = ObservationSink::bounded(2);
        for _ in 0..5 {
            sink.emit(Op::ReadDir, 7, || Some(PathBuf::from("a")));
        }
        assert_eq!(sink.emitted(), 5);
        assert_eq!(sink.dropped(), 3);
        let got: Vec<u64> = rx.try_iter().map(|o| o.seq).collect();
        assert_eq!(got, vec![1, 2]);
    }

    #[test]
    fn settling_waits_for_answered_requests_to_emit() {
        let (sink, rx) = ObservationSink::bounded(16);
        std::thread::scope(|scope| {
            let answering = sink.answering();
            let sink = &sink;
            scope.spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                sink.emit(Op::ReadDir, 7, || Some(PathBuf::from("a")));
                drop(answering);
            });
            // the reply is out, the observation not yet: settling waits for it
            assert_eq!(sink.emitted_settled(Duration::from_secs(10)), 1);
        });
        assert_eq!(rx.try_iter().count(), 1);
        // nothing pending: no wait; a disabled sink has nothing to wait for
        assert_eq!(sink.emitted_settled(Duration::from_secs(10)), 1);
        let off = ObservationSink::disabled();
        drop(off.answering());
        assert_eq!(off.emitted_settled(Duration::from_secs(10)), 0);
    }

    #[test]
    fn disabled_sink_never_resolves_paths() {
        let sink = ObservationSink::disabled();
        sink.emit(Op::ReadDir, 1, || panic!("path resolved while disabled"));
        assert_eq!(sink.dropped(), 0);
        assert!(!sink.is_enabled());
    }
}
