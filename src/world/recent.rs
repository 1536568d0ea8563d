//! A bounded ring of the most recent observations, each with what the world made of it (class,
//! program), for readers outside the ingest thread: the socket's `changes.since`, its
//! subscriptions and its command-output validity checks.
//!
//! The ingest thread pushes one batch per lock, after the batch was applied, so a reader that
//! sees a record also sees its effect on the entries. Readers copy `Arc`s out under the lock and
//! do their work after releasing it, so a slow reader never holds up ingest for longer than a
//! copy. When the ring is full the oldest records go; readers learn that they missed some
//! (by sequence number or by push index) instead of silently getting a partial answer.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::journal::JournalItem;

/// Records kept by default: a few MiB at most, minutes of agent activity, seconds of a build.
pub const DEFAULT_CAPACITY: usize = 8192;

/// One recent observation and its attribution.
pub type Record = Arc<JournalItem>;

pub struct Recent {
    capacity: usize,
    ring: Mutex<Ring>,
    grew: Condvar,
    /// Highest observation sequence number pushed so far (lock-free for cheap polling).
    last_seq: AtomicU64,
    /// Records pushed so far, ever (lock-free for cheap "anything new?" checks).
    pushed: AtomicU64,
}

#[derive(Default)]
struct Ring {
    items: VecDeque<Record>,
    /// Push index of `items[0]`.
    first_index: u64,
    /// Highest sequence number among evicted records (0: none evicted).
    evicted_max_seq: u64,
}

/// Records after a sequence number.
#[derive(Debug, Clone, Default)]
pub struct SinceSeq {
    pub records: Vec<Record>,
    /// False when records that may have matched were already evicted from the ring.
    pub complete: bool,
    /// True when `limit` cut the answer short.
    pub truncated: bool,
    /// Lowest sequence number still in the ring (0 when empty).
    pub oldest_seq: u64,
    pub last_seq: u64,
}

/// Records from a push index on.
#[derive(Debug, Clone, Default)]
pub struct FromIndex {
    pub records: Vec<Record>,
    /// Records between the requested index and the first returned one that were evicted.
    pub missed: u64,
    /// Where to continue next time.
    pub next_index: u64,
}

impl Recent {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            ring: Mutex::new(Ring::default()),
            grew: Condvar::new(),
            last_seq: AtomicU64::new(0),
            pushed: AtomicU64::new(0),
        }
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Highest sequence number seen.
    pub fn last_seq(&self) -> u64 {
        self.last_seq.load(Ordering::Acquire)
    }

    /// Records pushed so far; the push index the next record will get.
    pub fn pushed(&self) -> u64 {
        self.pushed.load(Ordering::Acquire)
    }

    /// Goes on after `seq`, where a saved world left off (`snapshot`): observations up to it
    /// count as applied, and as no longer held (a `since_seq` before it is incomplete).
    pub fn resume_after(&self, seq: u64) {
        let mut ring = self.ring.lock();
        ring.evicted_max_seq = ring.evicted_max_seq.max(seq);
        self.last_seq.fetch_max(seq, Ordering::AcqRel);
    }

    /// Appends a batch (already applied to the world) and wakes waiting readers.
    pub fn push_batch(&self, batch: Vec<Record>) {
        if batch.is_empty() {
            return;
        }
        let mut ring = self.ring.lock();
        let mut max_seq = 0;
        for r in batch {
            max_seq = max_seq.max(r.obs.seq);
            ring.items.push_back(r);
        }
        while ring.items.len() > self.capacity {
            if let Some(old) = ring.items.pop_front() {
                ring.first_index += 1;
                ring.evicted_max_seq = ring.evicted_max_seq.max(old.obs.seq);
            }
        }
        let pushed = ring.first_index + ring.items.len() as u64;
        self.pushed.store(pushed, Ordering::Release);
        self.last_seq.fetch_max(max_seq, Ordering::AcqRel);
        drop(ring);
        self.grew.notify_all();
    }

    /// Waits until a record with sequence number `seq` or above was pushed, at most `timeout`;
    /// true if one was.
    pub fn wait_for_seq(&self, seq: u64, timeout: Duration) -> bool {
        let deadline = std::time::Instant::now() + timeout;
        let mut ring = self.ring.lock();
        while self.last_seq() < seq {
            if self.grew.wait_until(&mut ring, deadline).timed_out() {
                return self.last_seq() >= seq;
            }
        }
        true
    }

    /// Records with a sequence number above `seq`, oldest first, at most `limit`.
    pub fn since_seq(&self, seq: u64, limit: usize) -> SinceSeq {
        let ring = self.ring.lock();
        let mut out = SinceSeq {
            // Sequence numbers come from concurrent file-system threads, so they are only
            // nearly ordered in the ring: scan everything rather than binary-search.
            complete: ring.evicted_max_seq <= seq,
            oldest_seq: ring.items.iter().map(|r| r.obs.seq).min().unwrap_or(0),
            last_seq: self.last_seq(),
            ..SinceSeq::default()
        };
        for r in ring.items.iter().filter(|r| r.obs.seq > seq) {
            if out.records.len() >= limit {
                out.truncated = true;
                break;
            }
            out.records.push(Arc::clone(r));
        }
        drop(ring);
        out.records.sort_by_key(|r| r.obs.seq);
        out
    }

    /// Records from push index `index` on, at most `limit`.
    pub fn from_index(&self, index: u64, limit: usize) -> FromIndex {
        let ring = self.ring.lock();
        let missed = ring.first_index.saturating_sub(index);
        let start = index.max(ring.first_index);
        let skip = usize::try_from(start - ring.first_index).unwrap_or(usize::MAX);
        let records: Vec<Record> = ring
            .items
            .iter()
            .skip(skip)
            .take(limit)
            .map(Arc::clone)
            .collect();
        let next_index = start + records.len() as u64;
        FromIndex {
            records,
            missed,
            next_index,
        }
    }

    /// Wakes every [`Recent::wait_past`] at once (a thread told to stop should not wait out
    /// its timeout).
    pub fn wake(&self) {
        let _ring = self.ring.lock();
        self.grew.notify_all();
    }

    /// Waits until a record with push index `index` or later exists, or `timeout` passes.
    /// Returns whether one exists.
    pub fn wait_past(&self, index: u64, timeout: Duration) -> bool {
        if self.pushed() > index {
            return true;
        }
        let mut ring = self.ring.lock();
        if ring.first_index + ring.items.len() as u64 > index {
            return true;
        }
        self.grew.wait_for(&mut ring, timeout);
        ring.first_index + ring.items.len() as u64 > index
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::SystemTime;

    use super::*;
    use crate::observation::{Observation, Op};

    fn rec(seq: u64) -> Record {
        Arc::new(JournalItem {
            obs: Observation {
                seq,
                time: SystemTime::UNIX_EPOCH,
                op: Op::ReadDir,
                path: PathBuf::from(format!("d{seq}")),
                pid: 1,
                caller: None,
            },
            class: None,
            comm: None,
        })
    }

    fn seqs(v: &[Record]) -> Vec<u64> {
        v.iter().map(|r| r.obs.seq).collect()
    }

    #[test]
    fn bounded_and_reports_what_it_lost() {
        let r = Recent::new(3);
        r.push_batch((1..=5).map(rec).collect());
        assert_eq!(r.pushed(), 5);
        assert_eq!(r.last_seq(), 5);
        let s = r.since_seq(0, 100);
        assert_eq!(seqs(&s.records), vec![3, 4, 5]);
        assert!(!s.complete, "1 and 2 were evicted");
        assert_eq!(s.oldest_seq, 3);
        let s = r.since_seq(2, 100);
        assert!(s.complete, "nothing after 2 was lost");
        let s = r.since_seq(3, 1);
        assert_eq!(seqs(&s.records), vec![4]);
        assert!(s.truncated);
    }

    #[test]
    fn index_cursor_counts_missed_records() {
        let r = Recent::new(3);
        r.push_batch((1..=2).map(rec).collect());
        let a = r.from_index(0, 10);
        assert_eq!(
            (seqs(&a.records), a.missed, a.next_index),
            (vec![1, 2], 0, 2)
        );
        r.push_batch((3..=6).map(rec).collect());
        let b = r.from_index(a.next_index, 10);
        assert_eq!(seqs(&b.records), vec![4, 5, 6]);
        assert_eq!((b.missed, b.next_index), (1, 6));
        let c = r.from_index(b.next_index, 10);
        assert!(c.records.is_empty());
        assert_eq!(c.next_index, 6);
    }

    #[test]
    fn nearly_ordered_sequences_are_sorted_on_the_way_out() {
        let r = Recent::new(10);
        r.push_batch(vec![rec(2), rec(1), rec(3)]);
        assert_eq!(seqs(&r.since_seq(0, 10).records), vec![1, 2, 3]);
        assert_eq!(r.last_seq(), 3);
    }

    #[test]
    fn waiting_wakes_on_push() {
        let r = Arc::new(Recent::new(10));
        assert!(!r.wait_past(0, Duration::from_millis(1)));
        let r2 = Arc::clone(&r);
        let t = std::thread::spawn(move || r2.wait_past(0, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(20));
        r.push_batch(vec![rec(1)]);
        assert!(t.join().unwrap_or(false));
    }
}
