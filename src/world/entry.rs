//! One thing the agent has seen: a file, a directory listing or (later) a command's output.
//!
//! Entries are metadata only. Content is never copied into an entry: it is read from SOURCE when a
//! projection asks for it, so the cache cannot serve stale text and stays small (a few hundred
//! bytes per entry).

use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::lines::LineMap;
use super::ranges::{ByteRange, RangeSet, RecentViews};
use super::shown::ShownParts;

/// What an entry stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    File,
    /// A directory's listing (the names in it), as the agent got it from `readdir`.
    Dir,
    /// The output of a command the harness reported (reserved for the socket layer).
    Command,
}

/// Why an entry's content is never projected even though the path is known.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum IgnoreReason {
    /// A NUL byte in the first 8 KiB.
    Binary,
    /// Larger than the configured size cap.
    TooLarge,
    /// Not a regular file or directory (FIFO, socket, device), or a symlink we refuse to follow.
    NotRegular,
}

/// Lifecycle of an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "state", content = "reason")]
pub enum EntryState {
    Live,
    /// Removed (through the mount or behind it); kept so the projection can say so.
    Deleted,
    /// A secret: listed as present, content never read for projection.
    Withheld,
    /// Known by name only; its content is never stored or projected.
    Ignored(IgnoreReason),
}

/// A point on both clocks: the observation sequence (total order) and wall time (for humans).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Stamp {
    pub seq: u64,
    pub time: SystemTime,
    pub turn: u64,
}

/// What of the entry the agent has read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "extent", content = "ranges")]
pub enum Extent {
    /// Known to exist, never read (e.g. created or written without being read back).
    #[default]
    None,
    Whole,
    Ranges(RangeSet),
}

impl Extent {
    /// Records a read of `r`; a whole-file read absorbs any ranges.
    pub fn add_range(&mut self, r: ByteRange) {
        match self {
            Extent::Whole => {}
            Extent::Ranges(set) => set.insert(r),
            Extent::None => {
                let mut set = RangeSet::new();
                set.insert(r);
                if !set.is_empty() {
                    *self = Extent::Ranges(set);
                }
            }
        }
    }

    pub fn set_whole(&mut self) {
        *self = Extent::Whole;
    }
}

/// The few program names (`comm`) that touched an entry, oldest first. Capped so an entry touched
/// by many programs stays a fixed size; `more` counts the ones that did not fit.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Programs {
    names: [Option<Arc<str>>; Programs::CAP],
    pub more: u16,
}

impl Programs {
    pub const CAP: usize = 4;

    pub fn add(&mut self, name: &Arc<str>) {
        for slot in &mut self.names {
            match slot {
                Some(n) if **n == **name => return,
                Some(_) => {}
                None => {
                    *slot = Some(Arc::clone(name));
                    return;
                }
            }
        }
        self.more = self.more.saturating_add(1);
    }

    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.names.iter().flatten().map(|n| &**n)
    }

    pub fn contains(&self, name: &str) -> bool {
        self.iter().any(|n| n == name)
    }

    /// Merges `other` into `self` (used when a rename lands on an existing entry).
    pub fn absorb(&mut self, other: &Programs) {
        for n in other.names.iter().flatten() {
            self.add(n);
        }
        self.more = self.more.saturating_add(other.more);
    }
}

impl Serialize for Programs {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.iter())
    }
}

/// Everything the world knows about one path, without its content.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Entry {
    pub kind: EntryKind,
    pub state: EntryState,
    pub extent: Extent,
    /// Where the agent read last (when reads carry byte ranges).
    pub recent: RecentViews,
    pub first_observed: Stamp,
    /// Last access that counted (agent or weak), not scans.
    pub last_observed: Stamp,
    /// Last time the content changed, through the mount or behind it.
    pub last_changed: Option<Stamp>,
    /// Turn of the last agent-attributed access; what policies age by.
    pub last_agent_turn: u64,
    pub programs: Programs,
    /// The agent wrote (or created, or truncated) this entry.
    pub agent_wrote: bool,
    /// Deleted by the agent itself (its own unlink or rmdir, or an `rm` it ran:
    /// `Attributor::removed_by_agent`): the step that did it says so, so a projection shows no
    /// notice of it, as it does of a deletion the agent did not make. Cleared when the name
    /// comes back.
    pub deleted_by_agent: bool,
    /// Pinned by the harness or user: policies keep it before anything unpinned.
    pub pinned: bool,
    /// Content hash (blake3) of the version last counted; `None` until counted.
    #[serde(serialize_with = "ser_hash")]
    pub hash: Option<[u8; 32]>,
    /// o200k_base tokens of the whole content at `hash`.
    pub tokens: Option<u32>,
    /// Size in bytes at `hash`.
    pub size: Option<u64>,
    /// The content changed (or was never counted) since `hash`/`tokens` were filled.
    pub needs_rehash: bool,
    /// Bumped whenever the content may have changed: a count loaded from SOURCE is stored
    /// only if this did not move while it was read (a change can arrive without a new
    /// `last_changed`: an echo re-checked, a rescan).
    #[serde(skip)]
    pub version: u32,
    /// Agent-attributed reads.
    pub reads: u32,
    /// Weakly attributed reads (a test run importing it, an indexer).
    pub weak_reads: u32,
    /// Sequence number of the last agent-attributed read: a read after a requester's
    /// selection left the entry out is what its thrash guard learns from (`world::thrash`).
    pub last_read_seq: u64,
    /// The lines of the version at `hash`, to move `extent` and `recent` to where their lines
    /// went when the content changes; `None` until counted (and for directories).
    #[serde(skip)]
    pub lines: Option<Arc<LineMap>>,
    /// The agent changed the content since `lines` was taken: when it is next counted, the
    /// lines it touched become the most recent view.
    #[serde(skip)]
    pub agent_edit_pending: bool,
    /// The content may have changed at a moment nobody saw (while nothing was mounted, or
    /// while the watcher's queue overflowed): if the next count finds another hash than the
    /// one kept, that is a change behind the mount, stamped then.
    #[serde(skip)]
    pub unverified: bool,
    /// What the last selection of each requester (layout key) showed of it in part; moved with
    /// its lines when the content changes, like `recent`.
    #[serde(skip)]
    pub shown: ShownParts,
}

fn ser_hash<S: serde::Serializer>(h: &Option<[u8; 32]>, s: S) -> Result<S::Ok, S::Error> {
    match h {
        Some(bytes) => s.serialize_some(&blake3::Hash::from_bytes(*bytes).to_hex().as_str()),
        None => s.serialize_none(),
    }
}

impl Entry {
    pub fn new(kind: EntryKind, state: EntryState, at: Stamp) -> Self {
        Self {
            kind,
            state,
            extent: Extent::None,
            recent: RecentViews::default(),
            first_observed: at,
            last_observed: at,
            last_changed: None,
            last_agent_turn: at.turn,
            programs: Programs::default(),
            agent_wrote: false,
            deleted_by_agent: false,
            pinned: false,
            hash: None,
            tokens: None,
            size: None,
            needs_rehash: state == EntryState::Live,
            version: 0,
            reads: 0,
            weak_reads: 0,
            last_read_seq: 0,
            lines: None,
            agent_edit_pending: false,
            unverified: false,
            shown: ShownParts::default(),
        }
    }

    /// Records an agent-attributed read at `at`.
    pub fn agent_read(&mut self, at: Stamp) {
        self.reads = self.reads.saturating_add(1);
        self.last_read_seq = self.last_read_seq.max(at.seq);
        self.last_observed = at;
        self.last_agent_turn = at.turn;
    }

    /// Records that the content changed at `at`; the hash and token count become stale.
    pub fn changed(&mut self, at: Stamp) {
        self.last_changed = Some(at);
        if self.state == EntryState::Deleted {
            self.state = EntryState::Live;
            self.deleted_by_agent = false;
        }
        self.recheck();
    }

    /// The content may have changed, at no known moment: count it again, without stamping a
    /// change (an echo of the mount's own write, lost watcher events).
    pub fn recheck(&mut self) {
        self.version = self.version.wrapping_add(1);
        if matches!(self.state, EntryState::Live | EntryState::Ignored(_)) {
            self.needs_rehash = true;
        }
    }

    /// Marks the entry deleted at `at`, `by_agent` when the agent itself removed it.
    pub fn deleted(&mut self, at: Stamp, by_agent: bool) {
        self.version = self.version.wrapping_add(1);
        self.state = EntryState::Deleted;
        self.deleted_by_agent = by_agent;
        self.last_changed = Some(at);
        self.needs_rehash = false;
    }

    /// Whether policies may ever put content of this entry into a projection.
    pub fn projectable(&self) -> bool {
        self.state == EntryState::Live
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seq: u64) -> Stamp {
        Stamp {
            seq,
            time: SystemTime::UNIX_EPOCH,
            turn: seq,
        }
    }

    #[test]
    fn programs_dedupe_and_cap() {
        let mut p = Programs::default();
        for n in ["cat", "cat", "head", "sed", "awk", "nl", "cat"] {
            p.add(&Arc::from(n));
        }
        assert_eq!(
            p.iter().collect::<Vec<_>>(),
            vec!["cat", "head", "sed", "awk"]
        );
        assert_eq!(p.more, 1);
    }

    #[test]
    fn whole_read_absorbs_ranges() {
        let mut e = Extent::None;
        e.add_range(ByteRange::at(0, 10));
        assert!(matches!(e, Extent::Ranges(_)));
        e.set_whole();
        e.add_range(ByteRange::at(100, 10));
        assert_eq!(e, Extent::Whole);
    }

    #[test]
    fn an_agent_read_counts_and_stamps() {
        let mut e = Entry::new(EntryKind::File, EntryState::Live, at(1));
        e.agent_read(at(2));
        e.agent_read(at(3));
        assert_eq!(e.reads, 2);
        assert_eq!(e.last_read_seq, 3);
        assert_eq!(e.last_agent_turn, 3);
    }

    #[test]
    fn change_revives_deleted_and_marks_stale() {
        let mut e = Entry::new(EntryKind::File, EntryState::Live, at(1));
        e.needs_rehash = false;
        e.deleted(at(2), true);
        assert_eq!(e.state, EntryState::Deleted);
        assert!(e.deleted_by_agent);
        e.changed(at(3));
        assert_eq!(e.state, EntryState::Live);
        assert!(
            !e.deleted_by_agent,
            "a name that came back is no deletion of anyone's"
        );
        assert!(e.needs_rehash);
        let mut w = Entry::new(EntryKind::File, EntryState::Withheld, at(1));
        w.changed(at(2));
        assert!(
            !w.needs_rehash,
            "a withheld entry is never read, so never rehashed"
        );
    }

    #[test]
    fn entry_stays_compact() {
        // No content copies: an entry is metadata only. Guard against accidental growth (328
        // since `version`, which made it cross a word).
        assert!(
            std::mem::size_of::<Entry>() <= 328,
            "{}",
            std::mem::size_of::<Entry>()
        );
    }
}
