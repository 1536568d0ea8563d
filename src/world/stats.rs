//! Counters kept while ingesting, and the snapshot reported to the socket layer.

use std::sync::atomic::{AtomicU64, Ordering};

use serde::Serialize;

use super::attribution::Class;
use super::cache::StateCounts;

/// Live counters; relaxed atomics, since they are only ever reported, never synchronized on.
#[derive(Debug, Default)]
pub struct Counters {
    pub observations: AtomicU64,
    pub agent: AtomicU64,
    pub weak: AtomicU64,
    pub scan: AtomicU64,
    /// No caller pid (releases): can change entries, never create them.
    pub unattributed: AtomicU64,
    pub external: AtomicU64,
    /// The watcher's reports of what were most likely the mount's own changes.
    pub echo: AtomicU64,
    /// Agent accesses to paths the ignore rules keep out of the world.
    pub ignored: AtomicU64,
    /// Entries withdrawn because the process that created them turned out to be scanning.
    pub withdrawn: AtomicU64,
    /// Entries whose hash and token count were (re)computed.
    pub refreshed: AtomicU64,
    pub refresh_errors: AtomicU64,
    /// Entries found changed when counted again after a moment nobody saw (a restart, an
    /// overflow of the watcher's queue).
    pub changed_unobserved: AtomicU64,
}

impl Counters {
    pub fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }

    pub fn class(&self, class: Option<Class>) {
        Self::bump(match class {
            Some(Class::Agent) => &self.agent,
            Some(Class::Weak) => &self.weak,
            Some(Class::Scan) => &self.scan,
            None => &self.unattributed,
        });
    }
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ClassCounts {
    pub agent: u64,
    pub weak: u64,
    pub scan: u64,
    pub unattributed: u64,
    /// Changes the watcher saw behind the mount.
    pub external: u64,
    /// Changes the watcher saw while the mount itself was changing the file: its own, most
    /// likely; re-checked, not counted as `external`.
    pub echo: u64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct JournalStats {
    pub written: u64,
    pub dropped: u64,
    pub write_errors: u64,
    pub rotations: u64,
}

/// A point-in-time report of the world.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Stats {
    pub observations: u64,
    /// Observations the file system could not deliver (channel full); `None` when no drop
    /// counter was attached.
    pub dropped: Option<u64>,
    pub by_class: ClassCounts,
    pub ignored_accesses: u64,
    pub withdrawn: u64,
    pub entries: StateCounts,
    /// Whole-content tokens of live entries whose count is known.
    pub known_tokens: u64,
    /// Live entries still waiting for a hash and token count.
    pub stale_entries: u64,
    pub refreshed: u64,
    pub refresh_errors: u64,
    /// Entries found changed when counted again after a moment nobody saw.
    pub changed_unobserved: u64,
    pub turn: u64,
    pub token_memo_entries: u64,
    pub journal: Option<JournalStats>,
    /// Where the world is kept across restarts, and how that went; `None` when it is not kept.
    pub kept: Option<super::snapshot::KeptStats>,
    /// Why the world is not kept, when the mount said (`kept` is then `None`).
    pub not_kept: Option<String>,
    /// The first directory the watcher could not watch (relative to the root; "" for the
    /// root): changes behind the mount may go unseen since.
    pub unwatched: Option<String>,
}

impl Counters {
    /// Fills the counter-derived fields of a report.
    pub fn fill(&self, s: &mut Stats) {
        s.observations = get(&self.observations);
        s.by_class = ClassCounts {
            agent: get(&self.agent),
            weak: get(&self.weak),
            scan: get(&self.scan),
            unattributed: get(&self.unattributed),
            external: get(&self.external),
            echo: get(&self.echo),
        };
        s.ignored_accesses = get(&self.ignored);
        s.withdrawn = get(&self.withdrawn);
        s.refreshed = get(&self.refreshed);
        s.refresh_errors = get(&self.refresh_errors);
        s.changed_unobserved = get(&self.changed_unobserved);
    }
}

impl JournalStats {
    pub fn from_counters(c: &super::journal::JournalCounters) -> Self {
        Self {
            written: get(&c.written),
            dropped: get(&c.dropped),
            write_errors: get(&c.write_errors),
            rotations: get(&c.rotations),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_counters_land_in_their_bucket() {
        let c = Counters::default();
        c.class(Some(Class::Agent));
        c.class(Some(Class::Scan));
        c.class(Some(Class::Scan));
        c.class(None);
        let mut s = Stats::default();
        c.fill(&mut s);
        assert_eq!(
            s.by_class,
            ClassCounts {
                agent: 1,
                weak: 0,
                scan: 2,
                unattributed: 1,
                external: 0,
                echo: 0,
            }
        );
    }
}
