//! The world kept across restarts of the daemon.
//!
//! Without it, a restart (an upgrade, a Ctrl-C, a crash, a reboot) forgets everything the agent
//! saw and did while the agent goes on: the next projection would hold none of its files, and
//! `worldfs proxy`, which finds the session's conversation by its goal, would stop replacing the
//! history until a new goal is set. So a mounted world is saved to one JSON file every
//! [`SAVE_EVERY`] while it changes, and once more at unmount, and the next mount of the same
//! SOURCE starts from it.
//!
//! What is saved is what the world knows, never file content: entries (what was read, where,
//! by which programs, when; the hash of the version last counted), the turn, the last sequence
//! number, and the harness's state (each conversation's goal, structured state and task list,
//! the framing, last step, command outputs, the tools the steps called, what each requester was
//! sent last). Content is read from disk when projected, as
//! always, so nothing restored can be stale; what may have changed while nothing was mounted
//! is found like this:
//!
//! - every entry is counted again (idle, or when a projection needs it); one whose hash differs
//!   from the saved one is stamped changed behind the mount, one that is gone is deleted;
//! - a command output is kept only if every file it read still has the hash it had when it was
//!   recorded, and an output that depends on whole directories (a search) is dropped, since what
//!   appeared in them meanwhile cannot be told.
//!
//! Not saved: the ring of recent observations, counters, and a resume not yet matched (it lasts
//! one call).

use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use parking_lot::{Condvar, Mutex};
use serde::{Deserialize, Serialize};

use super::World;
use super::conversations::Conversation;
use super::entry::{Entry, EntryKind, EntryState, Stamp};
use super::harness::{CommandOutput, Framing, Step, StructuredState};
use super::ignore_rules::PathVerdict;
use super::ranges::{ByteRange, RecentViews};
use super::saved_layouts::SavedLayout;
use super::touched::Touched;

/// The `format` of a saved world; a file with another is not read.
pub const FORMAT: &str = "worldfs-world/1";
/// How often a world that changed is saved while mounted: what a crash can lose.
pub const SAVE_EVERY: Duration = Duration::from_secs(10);
/// Saved worlds not written for this long are removed when a mount starts (their SOURCE is
/// most likely gone, or a test's temporary directory).
pub const FORGET_AFTER: Duration = Duration::from_secs(30 * 24 * 3600);

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("cannot read the saved world {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("the saved world {path} is not valid: {source}")]
    Parse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error("the saved world {path} has format {found:?}, not {FORMAT:?}")]
    Format { path: PathBuf, found: String },
    #[error("the saved world {path} belongs to {found}, not {expected}")]
    Source {
        path: PathBuf,
        found: PathBuf,
        expected: PathBuf,
    },
    #[error(
        "the saved world {path} is for an earlier directory at {dir} ({}; this one: {}): it was \
         removed and made again since",
        saved.describe(),
        found.describe()
    )]
    Recreated {
        path: PathBuf,
        dir: PathBuf,
        saved: SourceId,
        found: SourceId,
    },
    #[error("cannot save the world to {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl SnapshotError {
    /// The suffix a default kept world that cannot be used is set aside with: `.earlier` for
    /// the world of a directory that is gone (nothing wrong with the file), `.bad` otherwise.
    pub fn aside_suffix(&self) -> &'static str {
        match self {
            Self::Recreated { .. } => ".earlier",
            _ => ".bad",
        }
    }
}

/// Which directory SOURCE is. Its path outlives it: a directory removed and made again at the
/// same path (a fresh clone over the old one, a recycled temporary directory) is another
/// project, and the world kept for the old one would fill the new one's projection with its
/// files (each found deleted, or changed), its goal and its task list.
///
/// The inode number alone does not tell: ext4 hands a freed one to the next directory made. So
/// the birth time too, where the file system keeps one. On overlayfs a directory's birth time
/// changes once, when it is first copied up (a write below it); a world saved before that, and
/// not saved again before the daemon stopped (every save records the id anew), is then taken
/// for an earlier directory's and set aside, not lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceId {
    pub ino: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub born: Option<SystemTime>,
}

impl SourceId {
    pub fn of(meta: &fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            ino: meta.ino(),
            born: meta.created().ok(),
        }
    }

    /// Whether `self` and `other` may be the same directory: the same inode, born at the same
    /// time where both know it (a file saved on a file system without birth times, or copied
    /// from one, has none).
    pub fn may_be(&self, other: &SourceId) -> bool {
        self.ino == other.ino
            && match (self.born, other.born) {
                (Some(a), Some(b)) => a == b,
                _ => true,
            }
    }

    /// For people: "inode 12, made 2026-12-03 17:34:19" (local time).
    pub fn describe(&self) -> String {
        let born = self
            .born
            .and_then(|t| jiff::Timestamp::try_from(t).ok())
            .map(|t| {
                let local = t.to_zoned_datetime(jiff::tz::TimeZone::system());
                format!(", made {}", local.strftime("%Y-%m-%d %H:%M:%S"))
            })
            .unwrap_or_default();
        format!("inode {}{born}", self.ino)
    }
}

/// One daemon's exclusive use of a kept world: two mounts of the same SOURCE would otherwise
/// restore the same file and overwrite each other's saves. An advisory lock on `PATH.lock`,
/// held as long as the daemon keeps the world; the kernel drops it when the daemon dies, so a
/// crash leaves nothing to clean up.
#[derive(Debug)]
pub struct Claim {
    _lock: File,
}

#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("another worldfs daemon (a mount of the same SOURCE) keeps its world in {path}")]
    Taken { path: PathBuf },
    #[error("cannot lock {path}: {source}")]
    Lock {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

impl Claim {
    pub fn take(path: &Path) -> Result<Self, ClaimError> {
        let lock = beside(path, ".lock");
        let err = |source| ClaimError::Lock {
            path: lock.clone(),
            source,
        };
        private_dir_of(path).map_err(err)?;
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&lock)
            .map_err(err)?;
        // SAFETY: flock on a descriptor this function owns; no memory is involved.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = io::Error::last_os_error();
            return Err(if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                ClaimError::Taken {
                    path: path.to_owned(),
                }
            } else {
                err(e)
            });
        }
        Ok(Self { _lock: file })
    }
}

/// Everything a restarted world starts from.
#[derive(Debug, Serialize, Deserialize)]
pub struct Snapshot {
    pub format: String,
    /// SOURCE, canonical: a file found for another directory is not used.
    pub source: PathBuf,
    /// Which directory that was: one made again at the same path is another (absent in files
    /// saved before session 54, and where SOURCE could not be looked at).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_id: Option<SourceId>,
    pub saved_at: SystemTime,
    /// The last observation sequence number applied: the next mount continues after it, so
    /// sequence numbers a client noted keep their order.
    pub seq: u64,
    pub turn: u64,
    /// The current conversation's goal, compaction and state, also in `conversations`: what a
    /// file saved before session 30 has alone, and what a version of before then reads.
    pub goal: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compacted: bool,
    pub framing: Framing,
    pub state: StructuredState,
    /// Every conversation, the current one last (absent in files saved before session 30).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conversations: Vec<SavedConversation>,
    pub last_step: Option<Step>,
    pub commands: Vec<CommandOutput>,
    pub step_tools: Vec<String>,
    pub entries: Vec<SavedEntry>,
    /// What each requester was sent last (absent in files saved before session 26).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub layouts: Vec<SavedLayout>,
    /// The requester that asked last.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_requester: Option<String>,
}

/// A [`Conversation`] as saved (a resume not yet matched is not).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedConversation {
    /// The harness's session id; empty for a conversation no session was named for.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub session: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goal: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub compacted: bool,
    #[serde(default, skip_serializing_if = "StructuredState::is_empty")]
    pub state: StructuredState,
    /// Its steps, and the files they touched with the step of the last touch (absent in
    /// files saved before session 31).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub steps: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub touched: Vec<(PathBuf, u64)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_step: Option<Step>,
}

impl SavedConversation {
    fn of((session, c): (String, Conversation)) -> Self {
        Self {
            session,
            goal: c.goal,
            compacted: c.compacted,
            state: c.state,
            steps: c.touched.steps(),
            touched: c.touched.files(),
            last_step: c.last_step,
        }
    }

    fn into_conversation(self) -> (String, Conversation) {
        let c = Conversation {
            goal: self.goal,
            compacted: self.compacted,
            resumed: false,
            state: self.state,
            touched: Touched::restore(self.steps, self.touched),
            last_step: self.last_step,
        };
        (self.session, c)
    }
}

/// An [`Entry`] as saved: what the world knows of a path, without its content or anything
/// derived from the content (line maps, what each requester was shown). Compact, since a big
/// world has tens of thousands: defaults are left out, stamps are `[seq, unix ms, turn]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedEntry {
    pub path: PathBuf,
    pub kind: EntryKind,
    pub state: EntryState,
    pub extent: SavedExtent,
    /// Where the agent read last, oldest first, as `[start, end)` byte offsets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub views: Vec<(u64, u64)>,
    pub first_observed: SavedStamp,
    pub last_observed: SavedStamp,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_changed: Option<SavedStamp>,
    pub last_agent_turn: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub programs: Vec<String>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub more_programs: u16,
    #[serde(default, skip_serializing_if = "is_false")]
    pub agent_wrote: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub deleted_by_agent: bool,
    #[serde(default, skip_serializing_if = "is_false")]
    pub pinned: bool,
    /// blake3 (hex) of the version last counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reads: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub weak_reads: u32,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub last_read_seq: u64,
}

fn is_false(b: &bool) -> bool {
    !*b
}

fn is_zero<T: Default + PartialEq>(n: &T) -> bool {
    *n == T::default()
}

/// A [`Stamp`] as `[seq, milliseconds since the epoch, turn]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedStamp(pub u64, pub u64, pub u64);

impl From<Stamp> for SavedStamp {
    fn from(s: Stamp) -> Self {
        let ms = s
            .time
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Self(s.seq, ms, s.turn)
    }
}

impl From<SavedStamp> for Stamp {
    fn from(SavedStamp(seq, ms, turn): SavedStamp) -> Self {
        Self {
            seq,
            time: SystemTime::UNIX_EPOCH + Duration::from_millis(ms),
            turn,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SavedExtent {
    None,
    Whole,
    Ranges(Vec<(u64, u64)>),
}

/// What a restore brought back, for the log line and `stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Restored {
    pub saved_at: Option<SystemTime>,
    pub entries: u64,
    /// Entries of the file left out: their path is ignored now (the rules changed).
    pub entries_ignored_now: u64,
    pub commands: u64,
    /// Outputs dropped because a file they read changed, or went, while nothing was mounted,
    /// or because they depend on whole directories.
    pub commands_dropped: u64,
    /// Conversations with a goal.
    pub goals: u64,
    pub last_step: bool,
    /// Tasks, in every conversation's list.
    pub tasks: u64,
    pub turn: u64,
    pub seq: u64,
    /// Requesters whose layout came back: their next projection is laid out as before.
    pub layouts: u64,
}

/// Where the world is kept and how keeping it went, for `stats` (and `worldfs status`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct KeptStats {
    pub path: PathBuf,
    pub restored: Option<Restored>,
    pub saves: u64,
    pub save_errors: u64,
    pub last_saved: Option<SystemTime>,
    /// Time the last save took, serializing and writing.
    pub last_save_ms: u64,
    pub last_save_bytes: u64,
    pub last_error: Option<String>,
    /// The kept file this mount found but could not use, set aside for whoever wants it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub set_aside: Option<SetAside>,
}

/// A kept world left out at mount, and where it went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SetAside {
    pub path: PathBuf,
    pub why: String,
}

/// The default place for SOURCE's saved world: `$XDG_STATE_HOME/worldfs/`, else
/// `~/.local/state/worldfs/`, named like the mount's other runtime files. State, not runtime
/// data: it must outlive a reboot, since an agent's session can be resumed after one.
pub fn default_path(source: &Path) -> Option<PathBuf> {
    let base = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .map(PathBuf::from)
                .filter(|p| p.is_absolute())
                .map(|h| h.join(".local/state"))
        })?;
    Some(
        base.join("worldfs")
            .join(format!("{}.json", crate::runtime::mount_key(source))),
    )
}

/// Reads the saved world at `path` for SOURCE, canonical at `source`, which is the directory
/// `id` (when it could be looked at); `Ok(None)` when there is none.
pub fn load(
    path: &Path,
    source: &Path,
    id: Option<SourceId>,
) -> Result<Option<Snapshot>, SnapshotError> {
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(SnapshotError::Read {
                path: path.to_owned(),
                source,
            });
        }
    };
    let snap: Snapshot =
        serde_json::from_reader(BufReader::new(file)).map_err(|source| SnapshotError::Parse {
            path: path.to_owned(),
            source,
        })?;
    if snap.format != FORMAT {
        return Err(SnapshotError::Format {
            path: path.to_owned(),
            found: snap.format,
        });
    }
    if snap.source != source {
        return Err(SnapshotError::Source {
            path: path.to_owned(),
            found: snap.source,
            expected: source.to_owned(),
        });
    }
    if let (Some(saved), Some(found)) = (snap.source_id, id)
        && !saved.may_be(&found)
    {
        return Err(SnapshotError::Recreated {
            path: path.to_owned(),
            dir: source.to_owned(),
            saved,
            found,
        });
    }
    Ok(Some(snap))
}

/// Writes `snap` to `path` atomically (a temporary file beside it, synced, renamed over it), in
/// a directory only its user can enter: command outputs and the goal can hold anything.
/// Returns the bytes written.
pub fn save(path: &Path, snap: &Snapshot) -> Result<u64, SnapshotError> {
    let err = |source| SnapshotError::Write {
        path: path.to_owned(),
        source,
    };
    private_dir_of(path).map_err(err)?;
    let tmp = beside(path, &format!(".tmp.{}", std::process::id()));
    let written = (|| {
        let file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        let mut out = BufWriter::new(file);
        serde_json::to_writer(&mut out, snap)?;
        out.write_all(b"\n")?;
        let file = out.into_inner().map_err(|e| e.into_error())?;
        file.sync_all()?;
        let len = file.metadata()?.len();
        fs::rename(&tmp, path)?;
        Ok::<u64, io::Error>(len)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    written.map_err(err)
}

/// `path` with `suffix` appended to its name: the files kept beside a kept world (its lock, a
/// save under way, one set aside).
pub fn beside(path: &Path, suffix: &str) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(suffix);
    PathBuf::from(name)
}

/// Creates the directory `path` goes in, if needed, for its user alone (0700).
fn private_dir_of(path: &Path) -> io::Result<()> {
    match path.parent() {
        Some(dir) => fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir),
        None => Ok(()),
    }
}

/// Removes saved worlds in `path`'s directory that were not written for [`FORGET_AFTER`],
/// and temporary files a crash left. Returns how many went.
pub fn forget_old(path: &Path) -> usize {
    let Some(dir) = path.parent() else { return 0 };
    let Ok(list) = fs::read_dir(dir) else {
        return 0;
    };
    let now = SystemTime::now();
    list.flatten()
        .filter(|d| {
            let name = d.file_name();
            let name = name.to_string_lossy();
            let ours = name.ends_with(".json")
                || name.ends_with(".json.bad")
                || name.ends_with(".json.earlier")
                || name.contains(".json.tmp.");
            let old = d
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| now.duration_since(t).unwrap_or_default() > FORGET_AFTER);
            ours && old && d.path() != path && fs::remove_file(d.path()).is_ok()
        })
        .count()
}

impl SavedEntry {
    /// `None` for a path that is not UTF-8 (JSON strings must be): such a name is rare enough
    /// to be worth losing at a restart rather than an encoding of its own.
    fn of(path: &Path, e: &Entry) -> Option<Self> {
        path.to_str()?;
        let pairs = |rs: &[ByteRange]| rs.iter().map(|r| (r.start, r.end)).collect();
        Some(Self {
            path: path.to_owned(),
            kind: e.kind,
            state: e.state,
            extent: match &e.extent {
                super::Extent::None => SavedExtent::None,
                super::Extent::Whole => SavedExtent::Whole,
                super::Extent::Ranges(set) => SavedExtent::Ranges(pairs(set.as_slice())),
            },
            views: pairs(e.recent.views()),
            first_observed: e.first_observed.into(),
            last_observed: e.last_observed.into(),
            last_changed: e.last_changed.map(Into::into),
            last_agent_turn: e.last_agent_turn,
            programs: e.programs.iter().map(str::to_owned).collect(),
            more_programs: e.programs.more,
            agent_wrote: e.agent_wrote,
            deleted_by_agent: e.deleted_by_agent,
            pinned: e.pinned,
            hash: e
                .hash
                .map(|h| blake3::Hash::from_bytes(h).to_hex().to_string()),
            tokens: e.tokens,
            size: e.size,
            reads: e.reads,
            weak_reads: e.weak_reads,
            last_read_seq: e.last_read_seq,
        })
    }

    /// The entry, to be verified: counted again before anything trusts its hash.
    fn into_entry(self) -> (PathBuf, Entry) {
        let mut e = Entry::new(self.kind, self.state, self.first_observed.into());
        let range = |(start, end): (u64, u64)| ByteRange { start, end };
        match self.extent {
            SavedExtent::None => {}
            SavedExtent::Whole => e.extent.set_whole(),
            SavedExtent::Ranges(rs) => {
                for r in rs {
                    e.extent.add_range(range(r));
                }
            }
        }
        e.recent = RecentViews::restored(self.views.into_iter().map(range).collect());
        e.last_observed = self.last_observed.into();
        e.last_changed = self.last_changed.map(Into::into);
        e.last_agent_turn = self.last_agent_turn;
        for p in &self.programs {
            e.programs.add(&Arc::from(p.as_str()));
        }
        e.programs.more = e.programs.more.saturating_add(self.more_programs);
        e.agent_wrote = self.agent_wrote;
        e.deleted_by_agent = self.deleted_by_agent && self.state == EntryState::Deleted;
        e.pinned = self.pinned;
        e.hash = self
            .hash
            .as_deref()
            .and_then(|h| blake3::Hash::from_hex(h).ok().map(|h| *h.as_bytes()));
        e.tokens = e.hash.and(self.tokens);
        e.size = self.size;
        e.reads = self.reads;
        e.weak_reads = self.weak_reads;
        e.last_read_seq = self.last_read_seq;
        e.needs_rehash = matches!(e.state, EntryState::Live | EntryState::Ignored(_));
        e.unverified = e.needs_rehash;
        (self.path, e)
    }
}

impl World {
    /// What a restart needs to go on from here; `source` is SOURCE's canonical path.
    pub fn snapshot(&self, source: &Path) -> Snapshot {
        // In path order, so two saves of the same world are the same file.
        let entries = self.cache.filter_map_in_order(SavedEntry::of);
        let h = &self.harness;
        let utf8 = |p: &PathBuf| p.to_str().is_some();
        let (layouts, last_requester) = self.saved_layouts();
        let conversations: Vec<SavedConversation> = h
            .conversations
            .all()
            .into_iter()
            .filter(|(_, c)| !c.is_empty())
            .map(SavedConversation::of)
            .collect();
        let current = conversations.last().cloned();
        Snapshot {
            format: FORMAT.to_owned(),
            source: source.to_owned(),
            source_id: self.source_id(),
            saved_at: SystemTime::now(),
            seq: self.recent.last_seq(),
            turn: self.turns.current(),
            goal: current.as_ref().and_then(|c| c.goal.clone()),
            compacted: current.as_ref().is_some_and(|c| c.compacted),
            framing: h.framing.read().clone(),
            state: current.map(|c| c.state).unwrap_or_default(),
            conversations,
            last_step: h.last_step.read().clone(),
            commands: h
                .commands
                .read()
                .iter()
                .filter(|c| c.inputs.iter().all(|(p, _)| utf8(p)) && c.subtrees.iter().all(utf8))
                .cloned()
                .collect(),
            step_tools: h.step_tools.read().clone(),
            entries,
            layouts,
            last_requester,
        }
    }

    /// Starts this (new, empty) world from `snap`, before any observation is applied. A command
    /// output is kept only if `still_valid` says so (its inputs unchanged since it was recorded).
    pub fn restore(
        &self,
        snap: Snapshot,
        still_valid: impl Fn(&World, &CommandOutput) -> bool,
    ) -> Restored {
        let conversations: Vec<(String, Conversation)> = if snap.conversations.is_empty() {
            // Saved before conversations were kept apart: one, named by no session.
            vec![(
                String::new(),
                Conversation {
                    goal: snap.goal,
                    compacted: snap.compacted,
                    resumed: false,
                    state: snap.state,
                    touched: Touched::default(),
                    last_step: None,
                },
            )]
        } else {
            snap.conversations
                .into_iter()
                .map(SavedConversation::into_conversation)
                .collect()
        };
        let mut r = Restored {
            saved_at: Some(snap.saved_at),
            seq: snap.seq,
            turn: snap.turn,
            goals: conversations
                .iter()
                .filter(|(_, c)| c.goal.is_some())
                .count() as u64,
            last_step: snap.last_step.is_some(),
            tasks: conversations
                .iter()
                .map(|(_, c)| c.state.tasks.len() as u64)
                .sum(),
            ..Restored::default()
        };
        for saved in snap.entries {
            let (path, mut e) = saved.into_entry();
            match self.rules.classify(&path, e.kind == EntryKind::Dir) {
                PathVerdict::Ignored(_) => {
                    r.entries_ignored_now += 1;
                    continue;
                }
                PathVerdict::Withheld => {
                    if e.state != EntryState::Deleted {
                        e.state = EntryState::Withheld;
                    }
                    e.needs_rehash = false;
                    e.unverified = false;
                }
                PathVerdict::Keep => {
                    if e.state == EntryState::Withheld {
                        e.state = EntryState::Live;
                        e.needs_rehash = true;
                    }
                }
            }
            if e.state == EntryState::Deleted {
                self.cache.note_deleted();
            }
            self.cache.insert(path, e);
            r.entries += 1;
        }
        self.restore_layouts(snap.layouts, snap.last_requester);
        r.layouts = self.layouts.lock().len() as u64;
        self.turns.resume_at(snap.turn);
        self.recent.resume_after(snap.seq);
        let h = &self.harness;
        h.conversations.restore(conversations);
        *h.framing.write() = snap.framing;
        *h.last_step.write() = snap.last_step;
        *h.step_tools.write() = snap.step_tools;
        let before = snap.commands.len();
        let kept: Vec<CommandOutput> = snap
            .commands
            .into_iter()
            .filter(|c| c.subtrees.is_empty() && still_valid(self, c))
            .collect();
        r.commands = kept.len() as u64;
        r.commands_dropped = (before - kept.len()) as u64;
        *h.commands.write() = kept;
        self.dirty.store(true, Ordering::Release);
        self.bump_generation();
        self.keeping.lock().restored = Some(r.clone());
        r
    }

    /// Which directory SOURCE is, as its open handle says (in place, its path leads into the
    /// mount); `None` if it cannot be looked at.
    pub fn source_id(&self) -> Option<SourceId> {
        self.source.metadata().ok().map(|m| SourceId::of(&m))
    }

    /// Says where this world is kept, for [`World::stats`].
    pub fn keep_at(&self, path: &Path) {
        self.keeping.lock().path = path.to_owned();
    }

    /// Saves the world to `path` now, and counts how that went.
    pub fn save_to(&self, path: &Path, source: &Path) -> Result<u64, SnapshotError> {
        let start = Instant::now();
        let result = save(path, &self.snapshot(source));
        let mut k = self.keeping.lock();
        match &result {
            Ok(bytes) => {
                k.saves += 1;
                k.last_saved = Some(SystemTime::now());
                k.last_save_ms = start.elapsed().as_millis() as u64;
                k.last_save_bytes = *bytes;
                k.last_error = None;
            }
            Err(e) => {
                k.save_errors += 1;
                k.last_error = Some(e.to_string());
            }
        }
        result
    }

    /// Says that the world kept for SOURCE could not be used and is now at `path`, for
    /// [`World::stats`].
    pub fn set_aside(&self, path: &Path, why: &str) {
        self.keeping.lock().set_aside = Some(SetAside {
            path: path.to_owned(),
            why: why.to_owned(),
        });
    }

    /// Says why this world is not kept across restarts, for [`World::stats`].
    pub fn not_kept(&self, why: &str) {
        *self.not_kept.lock() = Some(why.to_owned());
    }

    pub(super) fn not_kept_reason(&self) -> Option<String> {
        self.not_kept.lock().clone()
    }

    pub(super) fn kept_stats(&self) -> Option<KeptStats> {
        let k = self.keeping.lock();
        (!k.path.as_os_str().is_empty()).then(|| k.clone())
    }
}

/// Saves a mounted world every [`SAVE_EVERY`] while it changes; [`Saver::finish`] stops it
/// and saves once more.
pub struct Saver {
    world: Arc<World>,
    path: PathBuf,
    source: PathBuf,
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: Option<JoinHandle<()>>,
    /// Released when the saver is dropped, after its last save.
    _claim: Claim,
}

impl Saver {
    pub fn start(
        world: Arc<World>,
        path: PathBuf,
        source: PathBuf,
        every: Duration,
        claim: Claim,
    ) -> io::Result<Self> {
        world.keep_at(&path);
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        // What the world looked like at the last save: a save only when it moved. Taken here,
        // not in the thread, so a change made before the thread runs is not taken for the
        // state already saved.
        let mark = |w: &World| (w.generation(), w.recent.last_seq(), w.turn());
        let mut saved = mark(&world);
        let thread = {
            let (world, path, source, stop) = (
                Arc::clone(&world),
                path.clone(),
                source.clone(),
                Arc::clone(&stop),
            );
            std::thread::Builder::new()
                .name("worldfs-saver".into())
                .spawn(move || {
                    loop {
                        {
                            let mut stopped = stop.0.lock();
                            if !*stopped {
                                stop.1.wait_for(&mut stopped, every);
                            }
                            if *stopped {
                                return;
                            }
                        }
                        let now = mark(&world);
                        if now == saved {
                            continue;
                        }
                        match world.save_to(&path, &source) {
                            Ok(_) => saved = now,
                            Err(e) => tracing::warn!("{e}"),
                        }
                    }
                })?
        };
        Ok(Self {
            world,
            path,
            source,
            stop,
            thread: Some(thread),
            _claim: claim,
        })
    }

    /// Stops the periodic saves and saves the world as it is now (call it once ingest has
    /// applied everything).
    pub fn finish(mut self) -> Result<u64, SnapshotError> {
        self.halt();
        self.world.save_to(&self.path, &self.source)
    }

    fn halt(&mut self) {
        *self.stop.0.lock() = true;
        self.stop.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Saver {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observation::{Observation, Op};
    use crate::world::{ProcInfo, StaticProcesses};
    use std::os::unix::fs::PermissionsExt;

    const CAT: u32 = 200;

    /// A world over `dir` where pid [`CAT`] is `cat` run by a shell: the agent reading.
    fn world_over(dir: &Path) -> Arc<World> {
        let procs = StaticProcesses::new([ProcInfo::synthetic(
            CAT,
            "cat",
            &["cat", "a.txt"],
            &[(1, "bash")],
        )]);
        World::builder_at(dir)
            .map(|b| b.process_source(Arc::new(procs)))
            .and_then(|b| b.build())
            .unwrap_or_else(|e| panic!("{e}"))
    }

    fn a_read(seq: u64, path: &str) -> Observation {
        Observation {
            seq,
            time: SystemTime::now(),
            op: Op::Open {
                read: true,
                write: false,
                truncate: false,
                created: false,
            },
            path: path.into(),
            pid: CAT,
            caller: None,
        }
    }

    #[test]
    fn a_saved_world_loads_only_for_its_source_and_format() {
        let src = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let state = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = state.path().join("private/w.json");
        assert!(
            matches!(load(&path, src.path(), None), Ok(None)),
            "none yet"
        );
        let w = world_over(src.path());
        w.harness().conversations.update(None, |c| {
            c.set_goal(Some("g".into()));
            c.compacted = true;
        });
        let bytes = save(&path, &w.snapshot(src.path())).unwrap_or_else(|e| panic!("{e}"));
        let meta = fs::metadata(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(meta.len(), bytes);
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        let dir = fs::metadata(state.path().join("private")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(dir.permissions().mode() & 0o777, 0o700);
        let back = load(&path, src.path(), None).unwrap_or_else(|e| panic!("{e}"));
        let back = back.unwrap_or_else(|| panic!("saved"));
        assert!(back.compacted, "the conversation's compaction is kept");
        assert_eq!(back.goal.as_deref(), Some("g"));
        let again = world_over(src.path());
        again.restore(back, |_, _| true);
        assert!(again.harness().conversations.read(None, |c| c.compacted));
        let listed: Vec<_> = fs::read_dir(state.path().join("private"))
            .unwrap_or_else(|e| panic!("{e}"))
            .flatten()
            .map(|d| d.file_name())
            .collect();
        assert_eq!(listed, ["w.json"], "no temporary file left");

        let other = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            load(&path, other.path(), None),
            Err(SnapshotError::Source { .. })
        ));
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
        fs::write(&path, text.replace(FORMAT, "worldfs-world/0")).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(
            load(&path, src.path(), None),
            Err(SnapshotError::Format { .. })
        ));
        fs::write(&path, &text[..text.len() / 2]).unwrap_or_else(|e| panic!("{e}"));
        let e = load(&path, src.path(), None).err();
        assert!(matches!(e, Some(SnapshotError::Parse { .. })), "{e:?}");
    }

    /// A world is for one directory, not one path: the directory removed and made again at
    /// the same path (and filled again with files of the same names) is another one.
    #[test]
    fn a_saved_world_is_not_the_world_of_a_directory_made_again_at_its_path() {
        let top = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let src = top.path().join("project");
        let state = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = state.path().join("w.json");
        fs::create_dir(&src).unwrap_or_else(|e| panic!("{e}"));
        fs::write(src.join("a.txt"), "a\n").unwrap_or_else(|e| panic!("{e}"));
        let w = world_over(&src);
        w.ingest([a_read(1, "a.txt")]);
        let id = w
            .source_id()
            .unwrap_or_else(|| panic!("SOURCE can be looked at"));
        save(&path, &w.snapshot(&src)).unwrap_or_else(|e| panic!("{e}"));
        let same = world_over(&src).source_id();
        assert_eq!(same, Some(id), "another handle on the same directory");
        assert!(matches!(load(&path, &src, same), Ok(Some(_))));

        // Birth times are kept to the nanosecond where the file system has them; where it has
        // none, the inode number alone tells, and the same number may come back.
        fs::remove_dir_all(&src).unwrap_or_else(|e| panic!("{e}"));
        fs::create_dir(&src).unwrap_or_else(|e| panic!("{e}"));
        fs::write(src.join("a.txt"), "a\n").unwrap_or_else(|e| panic!("{e}"));
        let again = world_over(&src)
            .source_id()
            .unwrap_or_else(|| panic!("looked at"));
        if id.born.is_some() || again.ino != id.ino {
            let e = load(&path, &src, Some(again)).err();
            assert!(matches!(e, Some(SnapshotError::Recreated { .. })), "{e:?}");
            let text = e.map(|e| e.to_string()).unwrap_or_default();
            assert!(
                text.contains("is for an earlier directory at")
                    && text.contains(&format!("inode {}", id.ino)),
                "{text}"
            );
            assert_eq!(
                load(&path, &src, Some(again))
                    .err()
                    .map(|e| e.aside_suffix()),
                Some(".earlier")
            );
        } else {
            assert!(matches!(load(&path, &src, Some(again)), Ok(Some(_))));
        }

        // What cannot be told is not refused: a file saved before the id was kept, a directory
        // that could not be looked at, a file system without birth times on either side.
        assert!(matches!(load(&path, &src, None), Ok(Some(_))));
        let mut old = serde_json::to_value(w.snapshot(&src)).unwrap_or_else(|e| panic!("{e}"));
        old.as_object_mut()
            .map(|o| o.remove("source_id"))
            .unwrap_or_else(|| panic!("an object"));
        fs::write(&path, old.to_string()).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(load(&path, &src, Some(again)), Ok(Some(_))));
        let unborn = |ino| SourceId { ino, born: None };
        assert!(unborn(7).may_be(&SourceId {
            ino: 7,
            born: id.born
        }));
        assert!(!unborn(7).may_be(&unborn(8)));
    }

    /// A file saved before conversations were kept apart has one goal; it comes back as the
    /// conversation of the first session that speaks, and a file saved now still carries the
    /// current conversation where a version of before reads it.
    #[test]
    fn a_world_saved_with_one_goal_gives_it_to_the_first_session() {
        let src = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let w = world_over(src.path());
        w.harness().conversations.update(Some("a"), |c| {
            c.set_goal(Some("ga".into()));
            c.compacted = true;
        });
        w.harness()
            .conversations
            .update(Some("b"), |c| c.set_goal(Some("gb".into())));
        let mut saved =
            serde_json::to_value(w.snapshot(src.path())).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(saved["goal"], "gb", "the current conversation, as before");
        assert_eq!(saved["conversations"][0]["session"], "a");
        let obj = saved.as_object_mut().unwrap_or_else(|| panic!("an object"));
        obj.remove("conversations");
        obj.insert("goal".into(), "the old goal".into());
        obj.insert("compacted".into(), true.into());
        let old: Snapshot = serde_json::from_value(saved).unwrap_or_else(|e| panic!("{e}"));
        let again = world_over(src.path());
        let r = again.restore(old, |_, _| true);
        assert_eq!(r.goals, 1);
        let cs = &again.harness().conversations;
        let (goal, compacted) = cs.read(Some("s9"), |c| (c.goal.clone(), c.compacted));
        assert_eq!(goal.as_deref(), Some("the old goal"));
        assert!(compacted);
        cs.update(Some("s9"), |c| c.resumed = true);
        assert_eq!(cs.current().as_deref(), Some("s9"));
        assert_eq!(cs.len(), 1);
    }

    /// Each session's steps, files and last step come back: after a restart, two sessions
    /// still each see their own files.
    #[test]
    fn each_sessions_own_view_is_kept() {
        let src = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let w = world_over(src.path());
        let step = |id: &str| Step {
            tool_use_id: id.into(),
            tool_name: "Read".into(),
            input: serde_json::Value::Null,
            result: String::new(),
            is_error: false,
            assistant_text: None,
            raw_assistant_content: None,
            turn: 1,
            refers_to: Vec::new(),
        };
        for (session, file) in [("a", "a.py"), ("b", "b.py")] {
            w.harness().conversations.update(Some(session), |c| {
                c.touched.touch(Path::new(file));
                c.touched.step();
                c.last_step = Some(step(session));
            });
        }
        let text = serde_json::to_string(&w.snapshot(src.path())).unwrap_or_else(|e| panic!("{e}"));
        let back: Snapshot = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        let again = world_over(src.path());
        again.restore(back, |_, _| true);
        let cs = &again.harness().conversations;
        assert_eq!(
            cs.read(Some("a"), |c| (c.touched.clone(), c.last_step.clone())),
            w.harness()
                .conversations
                .read(Some("a"), |c| (c.touched.clone(), c.last_step.clone()))
        );
        let a = cs.view(Some("a")).unwrap_or_else(|| panic!("b has steps"));
        assert_eq!(
            a.seen(Path::new("b.py")),
            crate::world::touched::Seen::Others
        );
        assert_eq!(
            a.seen(Path::new("a.py")),
            crate::world::touched::Seen::Own { age: 1 }
        );
    }

    #[test]
    fn the_saver_saves_a_changing_world_and_once_more_when_it_finishes() {
        let src = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        fs::write(src.path().join("a.txt"), "a\n").unwrap_or_else(|e| panic!("{e}"));
        fs::write(src.path().join("b.txt"), "b\n").unwrap_or_else(|e| panic!("{e}"));
        let state = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = state.path().join("w.json");
        let w = world_over(src.path());
        let claim = Claim::take(&path).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            matches!(Claim::take(&path), Err(ClaimError::Taken { .. })),
            "one daemon at a time"
        );
        let saver = Saver::start(
            Arc::clone(&w),
            path.clone(),
            src.path().to_owned(),
            Duration::from_millis(20),
            claim,
        )
        .unwrap_or_else(|e| panic!("{e}"));
        w.ingest([a_read(1, "a.txt")]);
        let saved = |n: usize| {
            load(&path, src.path(), None)
                .ok()
                .flatten()
                .is_some_and(|s| s.entries.len() == n)
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !saved(1) {
            assert!(
                Instant::now() < deadline,
                "never saved: {:?}",
                w.stats().kept
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        // Unchanged, it is not written again.
        std::thread::sleep(Duration::from_millis(100));
        let saves = w.stats().kept.map_or(0, |k| k.saves);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(w.stats().kept.map_or(0, |k| k.saves), saves);
        // What came last is in the final save.
        w.ingest([a_read(2, "b.txt")]);
        saver.finish().unwrap_or_else(|e| panic!("{e}"));
        assert!(saved(2));
        let kept = w.stats().kept.unwrap_or_else(|| panic!("kept"));
        assert_eq!((kept.saves, kept.save_errors), (saves + 1, 0));
        assert_eq!(kept.path, path);
        assert!(
            Claim::take(&path).is_ok(),
            "released once the saver is gone"
        );
    }

    #[test]
    fn old_saved_worlds_are_forgotten_and_the_current_one_is_not() {
        let state = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let old_time = SystemTime::now() - FORGET_AFTER - Duration::from_secs(60);
        for name in [
            "old.json",
            "mine.json",
            "crash.json.tmp.42",
            "damaged.json.bad",
            "recreated.json.earlier",
            "notes.txt",
            "new.json",
        ] {
            let p = state.path().join(name);
            fs::write(&p, "{}").unwrap_or_else(|e| panic!("{e}"));
            if name != "new.json" {
                let f = File::options()
                    .write(true)
                    .open(&p)
                    .unwrap_or_else(|e| panic!("{e}"));
                f.set_modified(old_time).unwrap_or_else(|e| panic!("{e}"));
            }
        }
        assert_eq!(forget_old(&state.path().join("mine.json")), 4);
        let mut left: Vec<_> = fs::read_dir(state.path())
            .unwrap_or_else(|e| panic!("{e}"))
            .flatten()
            .map(|d| d.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["mine.json", "new.json", "notes.txt"]);
    }
}
