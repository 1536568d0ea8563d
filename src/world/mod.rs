//! The world cache: what the agent has seen of its tree, attributed, tokenized and budgeted.
//!
//! The file system emits [`Observation`]s; the ingest thread ([`World::spawn_ingest`]) turns them
//! into [`Entry`]s keyed by path. Entries hold metadata only — the content of a projection is
//! read from SOURCE at the moment it is asked for ([`World::read_current`]), so it cannot be
//! stale. A [`Policy`] chooses what fits a token budget ([`World::select`]).
//!
//! Threads: file-system threads only send into the channel. The ingest thread is the only one
//! that changes the map's structure; it also hashes and counts tokens when idle. Projection
//! threads read entries, pin them, select and read current content.

pub mod attribution;
mod bpe;
pub mod cache;
pub mod config;
pub mod conversations;
pub mod entry;
pub mod harness;
pub mod ignore_rules;
mod ingest;
pub mod journal;
pub mod lines;
pub mod notebook;
mod path_map;
pub mod placements;
pub mod policy;
pub mod procinfo;
pub mod ranges;
pub mod recent;
pub mod saved_layouts;
#[cfg(test)]
mod scenario_tests;
pub mod shown;
pub mod snapshot;
pub mod source;
pub mod stats;
mod thrash;
pub mod tokens;
pub mod touched;
pub mod turns;
pub mod views;

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::SystemTime;

use crossbeam_channel::Receiver;
use std::collections::HashMap;

use parking_lot::{Mutex, RwLock};

pub use attribution::Class;
pub use cache::StateCounts;
pub use config::{Config, ConfigError};
pub use entry::{Entry, EntryKind, EntryState, Extent, IgnoreReason, Stamp};
pub use policy::{Candidate, EvictReason, Evicted, Form, Kept, Policy, Selection};
pub use procinfo::{ProcFs, ProcInfo, ProcessSource, StaticProcesses};
pub use ranges::{ByteRange, RangeSet};
pub use source::{SourceError, SourceRoot};
pub use stats::Stats;

/// [`World::input_fingerprint`] of an input that does not exist (or cannot be opened): it
/// "changes" when it appears.
pub const INPUT_ABSENT: &str = "absent";

use crate::observation::Observation;
use attribution::Attributor;
use cache::Cache;
use ignore_rules::{IgnoreRules, PathVerdict};
use journal::{Journal, JournalCounters};
use path_map::{PathMap, PathSet};
use stats::Counters;
use thrash::Thrash;
use tokens::TokenCounter;
use turns::TurnClock;

/// Tokens a projection spends on an entry besides its content (path header, fences).
pub const HEADER_TOKENS: u32 = 12;
/// Tokens of a one-line notice ("deleted", "withheld").
pub const NOTICE_TOKENS: u32 = 16;
/// Extra tokens per range shown ("lines 10-40").
pub const RANGE_TOKENS: u32 = 6;
/// Assumed bytes per token for entries not yet counted.
const BYTES_PER_TOKEN_GUESS: u64 = 4;
/// The most the places an agent looked at last may cost when a file is shown as them: the
/// newest views that fit (see [`ranges::RecentViews::newest_within`]).
pub const RECENT_VIEW_TOKENS: u32 = 1500;
/// The most a glance may cost: the head of the place the agent looked last, shown when a file
/// has room for nothing more (about twenty lines of code); see the worldfs policy. On the
/// replay of the dev traces at 8k, 120, 200 and 300 tokens gave the same file recall within
/// half a point (BENCHMARKS.md, session 9).
pub const GLANCE_TOKENS: u32 = 200;
/// A view is shown with this much more after it (percent of its length): agents page forward
/// (`sed -n 100,150p`, then `150,200p`). In the replay of the dev traces at 8k, 25% took forced
/// re-reads from 27.3% to 26.1% and range recall from 46.5% to 48.8%, for 0.1 point of tokens
/// per request at turns >= 40 and 0.4 of whole-run tokens; 50% and 100% saved a little more
/// re-reading for twice and four times that (BENCHMARKS.md, session 5).
const VIEW_AHEAD_PERCENT: u64 = 25;

#[derive(Debug, thiserror::Error)]
pub enum WorldError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error(transparent)]
    Pattern(#[from] ignore_rules::PatternError),
    #[error(transparent)]
    Journal(#[from] journal::JournalError),
    #[error("cannot start the ingest thread: {0}")]
    Spawn(#[source] std::io::Error),
}

/// Why [`World::read_current`] returned no content.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    #[error(transparent)]
    Source(#[from] SourceError),
    #[error("{path:?} is withheld (looks like a secret; allow it in worldfs.toml to project it)")]
    Withheld { path: PathBuf },
    #[error("{path:?} is ignored ({why})")]
    Ignored { path: PathBuf, why: String },
    #[error(transparent)]
    Tokenizer(#[from] tokens::TokenizerError),
}

/// The current content of a path in SOURCE.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurrentContent {
    pub kind: EntryKind,
    /// File bytes, or for a directory its listing: sorted names, one a line, `/` after
    /// directories.
    pub bytes: Vec<u8>,
    /// Of the file's bytes, also for a notebook: its version, whatever `bytes` show of it.
    pub hash: [u8; 32],
    pub tokens: u32,
    pub size: u64,
    /// `bytes` are a notebook's cells as [`notebook::render`] shows them, not the file's JSON.
    pub notebook: bool,
}

/// Builds a [`World`].
pub struct WorldBuilder {
    root: SourceRoot,
    config: Config,
    procs: Option<Arc<dyn ProcessSource>>,
    journal: Option<PathBuf>,
    reads_by_range: bool,
}

impl WorldBuilder {
    pub fn config(mut self, config: Config) -> Self {
        self.config = config;
        self
    }

    /// Where pids are resolved; `/proc` by default. Tests and replays pass a fixed table.
    pub fn process_source(mut self, procs: Arc<dyn ProcessSource>) -> Self {
        self.procs = Some(procs);
        self
    }

    /// Journal observations to `path` (JSONL, rotated by size).
    pub fn journal(mut self, path: impl Into<PathBuf>) -> Self {
        self.journal = Some(path.into());
        self
    }

    /// Whether reads arrive as [`crate::observation::Op::Read`] ranges (daemon I/O mode). With
    /// kernel passthrough (the default, `false`) an open for reading is all we see, and it counts
    /// as reading the whole file.
    pub fn reads_by_range(mut self, yes: bool) -> Self {
        self.reads_by_range = yes;
        self
    }

    pub fn build(self) -> Result<Arc<World>, WorldError> {
        let source = Arc::new(self.root);
        let rules = IgnoreRules::new(&self.config.ignore, Arc::clone(&source))?;
        let journal_counters = Arc::new(JournalCounters::default());
        let journal = match &self.journal {
            Some(p) => Some(Journal::start(
                p,
                &self.config.journal,
                Arc::clone(&journal_counters),
            )?),
            None => None,
        };
        Ok(Arc::new(World {
            cache: Cache::new(),
            rules,
            attributor: Mutex::new(Attributor::new(&self.config.attribution)),
            procs: self.procs.unwrap_or_else(|| Arc::new(ProcFs::new())),
            tokens: TokenCounter::new(self.config.tokens.memo_entries),
            notebooks: notebook::Renders::default(),
            turns: TurnClock::new(&self.config.turns),
            counters: Counters::default(),
            journal: Mutex::new(journal),
            journaling: self.journal.is_some(),
            journal_counters,
            dropped: RwLock::new(None),
            dirty: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            stop_wake: crossbeam_channel::bounded(1),
            reads_by_range: self.reads_by_range,
            source,
            config: self.config,
            harness: harness::Harness::default(),
            recent: recent::Recent::new(recent::DEFAULT_CAPACITY),
            layouts: Mutex::new(HashMap::new()),
            last_requester: Mutex::new(None),
            generation: AtomicU64::new(0),
            urgent: AtomicU64::new(0),
            nap: (Mutex::new(()), parking_lot::Condvar::new()),
            keeping: Mutex::new(snapshot::KeptStats::default()),
            not_kept: Mutex::new(None),
            unwatched: Mutex::new(None),
        }))
    }
}

type DropCounter = Box<dyn Fn() -> u64 + Send + Sync>;

/// Requester keys remembered at once.
const MAX_LAYOUTS: usize = 64;
/// Stale entries one idle pass over the cache collects (see [`World::refresh_stale_while`]).
const STALE_PER_PASS: usize = 1024;

/// What one selection kept, and the newest access it knew of; and where the projection that
/// made it placed its pieces.
struct Layout {
    /// What was kept, in which form.
    kept: PathMap<Form>,
    /// Everything that selection saw: a candidate it did not see is new, whatever its stamp
    /// (a command output held back while it was the last step's own output, for one).
    offered: PathSet,
    seq: u64,
    /// Per candidate, its stamp (`last_seq`) when a selection under this key last kept it: an
    /// access after that stamp has not been shown yet.
    shown_seq: PathMap<u64>,
    /// Where the last projection for this key placed its pieces.
    placed: Arc<placements::Placed>,
    /// What this requester's selections taught the thrash guard.
    thrash: Thrash,
    /// When this requester last asked, in selections (larger is more recent).
    used: u64,
}

/// [`World::last_selection`].
#[derive(Debug, Default)]
pub struct LastSelection {
    kept: PathSet,
    thrash: Thrash,
}

impl LastSelection {
    pub fn kept(&self, path: &Path) -> bool {
        self.kept.contains(path)
    }

    /// Times that selection's requester stopped keeping `path` after keeping it.
    pub fn evictions(&self, path: &Path) -> u16 {
        self.thrash.evictions(path)
    }
}

impl Layout {
    /// Tells `c` what this selection showed of it and whether it was accessed since.
    fn mark(&self, c: &mut Candidate) {
        c.last_form = self.kept.get(&c.path).cloned();
        c.fresh = c.last_seq > self.seq || !self.offered.contains(&c.path);
        c.unshown = c.fresh || self.shown_seq.get(&c.path).is_none_or(|&s| c.last_seq > s);
    }
}

/// The world cache. Share it as `Arc<World>`.
pub struct World {
    cache: Cache,
    rules: IgnoreRules,
    attributor: Mutex<Attributor>,
    procs: Arc<dyn ProcessSource>,
    tokens: TokenCounter,
    /// Notebooks as their cells, kept by the hash of their bytes.
    notebooks: notebook::Renders,
    turns: TurnClock,
    counters: Counters,
    /// Taken by the ingest thread when it starts.
    journal: Mutex<Option<Journal>>,
    journaling: bool,
    journal_counters: Arc<JournalCounters>,
    dropped: RwLock<Option<DropCounter>>,
    /// Some entry may need a hash or token count.
    dirty: AtomicBool,
    stop: AtomicBool,
    /// Wakes the ingest thread from its wait for observations when it is told to stop, which
    /// would otherwise wait out its tick (100 ms of every unmount).
    stop_wake: (crossbeam_channel::Sender<()>, Receiver<()>),
    reads_by_range: bool,
    source: Arc<SourceRoot>,
    config: Config,
    harness: harness::Harness,
    /// Recent observations for the socket (changes since, subscriptions, command validity).
    recent: recent::Recent,
    /// What the last selection for each requester key kept ([`World::select_with_extra`]).
    layouts: Mutex<HashMap<String, Layout>>,
    /// The layout key of the most recent selection.
    last_requester: Mutex<Option<String>>,
    /// Bumped whenever an observation may have changed what a projection shows (anything but a
    /// read that counted for nothing): lets the socket reuse a rendering while it is unchanged.
    generation: AtomicU64,
    /// Readers waiting for ingest to catch up ([`World::await_ingest`]); ingest skips its nap
    /// while there are any.
    urgent: AtomicU64,
    nap: (Mutex<()>, parking_lot::Condvar),
    /// Where this world is kept across restarts, and how that went (`snapshot`).
    keeping: Mutex<snapshot::KeptStats>,
    /// Why this world is not kept across restarts, when it is not.
    not_kept: Mutex<Option<String>>,
    /// The first directory the watcher could not watch (`ExternalChange::Unwatched`): changes
    /// made behind the mount may go unseen since, so nothing derived from them may be reused.
    unwatched: Mutex<Option<PathBuf>>,
}

impl World {
    /// Starts building a world over the SOURCE directory open as `root`.
    pub fn builder(root: OwnedFd) -> WorldBuilder {
        WorldBuilder {
            root: SourceRoot::new(root),
            config: Config::default(),
            procs: None,
            journal: None,
            reads_by_range: false,
        }
    }

    /// Starts building a world over the SOURCE directory at `dir`.
    pub fn builder_at(dir: &Path) -> Result<WorldBuilder, WorldError> {
        let root = SourceRoot::open(dir)?;
        Ok(WorldBuilder {
            root,
            config: Config::default(),
            procs: None,
            journal: None,
            reads_by_range: false,
        })
    }

    /// A world with `config`, resolving pids through `/proc`, no journal.
    pub fn new(root: OwnedFd, config: Config) -> Result<Arc<World>, WorldError> {
        Self::builder(root).config(config).build()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Starts the ingest thread. It runs until the channel disconnects (every sink dropped) or
    /// [`World::stop_ingest`] is called, draining what is queued either way.
    pub fn spawn_ingest(
        self: &Arc<Self>,
        rx: Receiver<Observation>,
    ) -> std::io::Result<JoinHandle<()>> {
        let world = Arc::clone(self);
        tokens::warm_in_background();
        std::thread::Builder::new()
            .name("worldfs-ingest".into())
            .spawn(move || ingest::run(&world, &rx))
    }

    /// Asks the ingest thread to finish (after draining the channel) and flush the journal.
    pub fn stop_ingest(&self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.stop_wake.0.try_send(());
    }

    /// Applies observations synchronously on the calling thread (tests, replays). Not to be
    /// mixed with a running ingest thread.
    pub fn ingest(&self, batch: impl IntoIterator<Item = Observation>) {
        let mut journal = self.journal.lock();
        let mut attr = self.attributor.lock();
        let items: Vec<_> = batch
            .into_iter()
            .map(|obs| ingest::apply(self, &mut attr, obs))
            .collect();
        drop(attr);
        self.recent
            .push_batch(items.iter().cloned().map(Arc::new).collect());
        if let Some(j) = journal.as_mut()
            && self.journaling
        {
            j.send(items);
        }
    }

    /// The ring of recent observations (socket: changes since a sequence number,
    /// subscriptions, command-output validity).
    pub fn recent(&self) -> &recent::Recent {
        &self.recent
    }

    /// Removes the entry at `path` (the harness asked the world to forget it); a later agent
    /// access creates it afresh. False if there was none.
    pub fn forget(&self, path: &Path) -> bool {
        self.cache.remove(path).is_some()
    }

    /// Forgets `path` if the agent's tool opened it and showed nothing of it (Claude Code's Read
    /// of a file over its size or token limit opens the file, twice, then refuses it), and no
    /// step ever showed it: counted as a read of the whole file, it would be projected although
    /// the model never saw a line of it. A file a step showed (a Read, a `cat`), or the agent
    /// wrote or pinned, is kept.
    pub fn forget_refused(&self, path: &Path) -> bool {
        if self.harness.conversations.ever_shown(path) {
            return false;
        }
        self.cache
            .remove_if(path, |e| {
                e.kind == EntryKind::File && !e.agent_wrote && !e.pinned
            })
            .is_some()
    }

    /// The blake3 hash of `path`'s current content in SOURCE (for a directory: of its listing,
    /// as [`World::read_current`] renders it, less its empty hidden directories: see
    /// [`World::placeholder`]), whatever the ignore rules say and whatever its
    /// size: command outputs are keyed by the exact content of the files the command read, and
    /// only the hash leaves this function. Never follows a symlink or leaves the root.
    pub fn content_hash(&self, path: &Path) -> Result<[u8; 32], SourceError> {
        match self.source.open_beneath(path)? {
            source::Opened::File { file, .. } => {
                let mut h = blake3::Hasher::new();
                h.update_reader(file).map_err(|e| SourceError::Read {
                    path: path.to_owned(),
                    source: e,
                })?;
                Ok(*h.finalize().as_bytes())
            }
            source::Opened::Dir(fd) => {
                let mut h = blake3::Hasher::new();
                for n in SourceRoot::list(fd, path)? {
                    // Directories are named with a trailing `/`.
                    if let Some(dir) = n.as_encoded_bytes().strip_suffix(b"/")
                        && self.placeholder(&path.join(OsStr::from_bytes(dir)))
                    {
                        continue;
                    }
                    h.update(n.as_encoded_bytes());
                    h.update(b"\n");
                }
                Ok(*h.finalize().as_bytes())
            }
        }
    }

    /// Whether a directory's listing, as what a command read, leaves `path` out: an empty
    /// hidden directory (its name starts with a dot), which no import, glob or plain `ls`
    /// sees. Codex's sandbox makes an empty `.git`, `.agents` and `.aws` in the project for
    /// every command it runs (mount points for the read-only masks it puts there) and removes
    /// them after, so a listing with them would tell a change whenever another command is
    /// running, and drop every output that listed the directory (a Python import lists it)
    /// for nothing.
    fn placeholder(&self, path: &Path) -> bool {
        if !path
            .file_name()
            .is_some_and(|n| n.as_encoded_bytes().starts_with(b"."))
        {
            return false;
        }
        match self.source.open_beneath(path) {
            Ok(source::Opened::Dir(fd)) => SourceRoot::is_empty_dir(fd, path).unwrap_or(false),
            _ => false,
        }
    }

    /// Whether the ignore rules leave `path` out of the world (a build directory, a package
    /// directory, a `.gitignore`d file): nothing of it is ever projected.
    pub fn ignores(&self, path: &Path, is_dir: bool) -> bool {
        matches!(self.rules.classify(path, is_dir), PathVerdict::Ignored(_))
    }

    /// Whether a path outside the project looks like a secret (see
    /// [`IgnoreRules::looks_secret`]).
    pub fn looks_secret(&self, abs: &Path) -> bool {
        self.rules.looks_secret(abs)
    }

    /// What a command output keeps of an input, to tell later whether it changed (see
    /// [`harness::CommandOutput::inputs`]): the hex of [`Self::content_hash`], or
    /// [`INPUT_ABSENT`] when there is nothing to read. A file the ignore rules leave out (a
    /// build directory's artifacts, `__pycache__`, `node_modules`) is known by its size,
    /// modification time and inode instead: a command reads such files by the hundred (a
    /// `cargo test` reads hundreds of MB of libraries), every projection checks them again,
    /// and their tools rewrite them whole rather than edit them in place.
    pub fn input_fingerprint(&self, path: &Path) -> String {
        let hex = |h: [u8; 32]| blake3::Hash::from_bytes(h).to_hex().to_string();
        match self.source.open_beneath(path) {
            Ok(source::Opened::File { file, .. }) if self.ignores(path, false) => {
                use std::os::unix::fs::MetadataExt;
                match file.metadata() {
                    Ok(m) => format!(
                        "stat:{}:{}.{:09}:{}",
                        m.size(),
                        m.mtime(),
                        m.mtime_nsec(),
                        m.ino()
                    ),
                    Err(_) => INPUT_ABSENT.to_owned(),
                }
            }
            Ok(_) => self
                .content_hash(path)
                .map_or_else(|_| INPUT_ABSENT.to_owned(), hex),
            Err(_) => INPUT_ABSENT.to_owned(),
        }
    }

    /// Lets [`World::stats`] report the file system's drop counter, e.g.
    /// `world.set_drop_counter(move || sink.dropped())`. The closure should not keep the last
    /// sink alive longer than the mount, or the ingest thread only ends via `stop_ingest`.
    pub fn set_drop_counter(&self, f: impl Fn() -> u64 + Send + Sync + 'static) {
        *self.dropped.write() = Some(Box::new(f));
    }

    /// The current turn.
    pub fn turn(&self) -> u64 {
        self.turns.current()
    }

    /// A harness starts a new turn. Returns the new turn number.
    pub fn advance_turn(&self) -> u64 {
        self.turns.advance(SystemTime::now())
    }

    /// A copy of the entry at `path`.
    pub fn entry(&self, path: &Path) -> Option<Entry> {
        self.cache.get(path).map(|e| e.clone())
    }

    /// A copy of every entry, sorted by path.
    /// Session state the harness provides (goal, framing, state, last step, command outputs).
    pub fn harness(&self) -> &harness::Harness {
        &self.harness
    }

    pub fn entries(&self) -> Vec<(PathBuf, Entry)> {
        let mut v = self.cache.snapshot();
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    /// Pins or unpins `path`; false if the world has no entry for it.
    pub fn set_pinned(&self, path: &Path, pinned: bool) -> bool {
        match self.cache.get_mut(path) {
            Some(mut e) => {
                e.pinned = pinned;
                true
            }
            None => false,
        }
    }

    /// The policy `name` with this world's parameters.
    pub fn policy(&self, name: &str) -> Option<Box<dyn Policy>> {
        match name {
            "worldfs" => Some(Box::new(policy::Worldfs::new(
                self.config.budget.big_file_tokens,
            ))),
            other => policy::by_name(other),
        }
    }

    /// Files the agent accessed in `turn` or later (its last step's reads and writes, for
    /// `turn` the step's own), newest access first.
    pub fn agent_files_since(&self, turn: u64) -> Vec<PathBuf> {
        self.cache.agent_files_since(turn)
    }

    /// Computes missing hashes and token counts (reading SOURCE), then returns every projectable
    /// entry as a policy candidate.
    pub fn candidates(&self) -> Vec<Candidate> {
        self.refresh_stale();
        let turn = self.turns.current();
        // In path order, the one order every render starts from.
        self.cache
            .filter_map_in_order(|path, e| candidate(path.to_path_buf(), e, turn))
    }

    /// Chooses what fits in `budget` tokens with `policy`, and records the outcome for this
    /// requester (policy and budget): its evictions feed its thrash guard.
    pub fn select(&self, budget: u64, policy: &dyn Policy) -> Selection {
        self.select_with(budget, policy, &mut |_| {})
    }

    /// [`World::select`] after `adjust` has seen (and possibly changed) every candidate. A
    /// projection adds its real per-entry overhead (tool call envelope, ids, line numbers) to the
    /// costs, so the policy packs what will actually fit instead of what the bare content costs.
    pub fn select_with(
        &self,
        budget: u64,
        policy: &dyn Policy,
        adjust: &mut dyn FnMut(&mut Candidate),
    ) -> Selection {
        let mut keep_all = |c: &mut Candidate| {
            adjust(c);
            true
        };
        self.select_with_extra(budget, policy, &mut keep_all, Vec::new(), None)
    }

    /// [`Candidate::held`]: what the previous selection for `layout` showed of `c` in part
    /// (moved with its lines if the file changed since), with the places read since.
    fn held(&self, c: &Candidate, layout: &str) -> Option<(Vec<ByteRange>, u32)> {
        let Some(Form::Ranges(_)) = &c.last_form else {
            return None;
        };
        let (recent, _) = c.recent.as_ref()?;
        let e = self.cache.get(&c.path)?;
        let (size, content_tokens) = (e.size?, e.tokens?);
        let mut set = e.shown.get(layout)?.clone();
        for r in recent {
            set.insert(*r);
        }
        (!set.covers(size) && set.as_slice() != recent.as_slice())
            .then(|| shown_part(content_tokens, size, set.as_slice()))
    }

    /// Where the last projection for `layout` placed its pieces (see [`placements`]).
    pub fn placements(&self, layout: &str) -> Option<Arc<placements::Placed>> {
        self.layouts
            .lock()
            .get(layout)
            .map(|l| Arc::clone(&l.placed))
    }

    /// Records where a projection for `layout` placed its pieces. Kept with that layout's last
    /// selection (made by the same projection), and forgotten with it.
    pub fn set_placements(&self, layout: &str, placed: placements::Placed) {
        if let Some(l) = self.layouts.lock().get_mut(layout) {
            l.placed = Arc::new(placed);
        }
    }

    /// [`World::select_with`], with `extra` candidates that are not world entries (command
    /// outputs the harness recorded) competing for the same budget under the same policy. Their
    /// paths must not name entries (use absolute paths: entry paths are relative). An entry
    /// for which `adjust` answers false is not a candidate at all (another conversation's file):
    /// neither kept nor evicted, as if it were not in the world.
    ///
    /// With a `layout` key (the requester: budget, policy, format and options), the candidates are told
    /// what the previous selection under that key kept and what is new since, so a policy can
    /// grow the projection at its end instead of reshuffling it (prompt-cache friendly).
    pub fn select_with_extra(
        &self,
        budget: u64,
        policy: &dyn Policy,
        adjust: &mut dyn FnMut(&mut Candidate) -> bool,
        extra: Vec<Candidate>,
        layout: Option<&str>,
    ) -> Selection {
        // A selection without a layout still has a requester, for the thrash guard's memory.
        let key = match layout {
            Some(k) => k.to_owned(),
            None => format!("select:{}/{budget}", policy.name()),
        };
        let mut cands = self.candidates();
        let mut extra = extra;
        let mut thrash = Thrash::default();
        // Against the previous selection first, so `adjust` prices the held form too. The
        // lock is not held over `adjust`, which reads entries.
        if let Some(prev) = self.layouts.lock().get(&key) {
            thrash = prev.thrash.clone();
            for c in &mut cands {
                // Read since this requester's last selection left it out: that eviction was
                // wrong, and the guard learns it (once per selection, however many reads).
                if c.last_read_seq > prev.seq
                    && prev.offered.contains(&c.path)
                    && !prev.kept.contains(&c.path)
                {
                    thrash.reread(&c.path);
                }
                c.rereads_after_eviction = thrash.rereads(&c.path);
                c.evictions = thrash.evictions(&c.path);
                if layout.is_some() {
                    prev.mark(c);
                    c.held = self.held(c, &key);
                }
            }
            if layout.is_some() {
                for c in &mut extra {
                    prev.mark(c);
                }
            }
        }
        cands.retain_mut(|c| adjust(c));
        cands.extend(extra);
        let sel = policy.select(&cands, budget);
        let offered: PathSet = cands.iter().map(|c| c.path.as_path()).collect();
        // What this requester kept last time and left out now.
        let dropped: Vec<&PathBuf> = {
            let mut layouts = self.layouts.lock();
            if layouts.len() >= MAX_LAYOUTS && !layouts.contains_key(&key) {
                // Requesters with ever new budgets: the one that asked least recently makes
                // room, so a requester that keeps asking (a proxy at its budget) keeps its
                // places and what its thrash guard learnt, whoever else comes and goes.
                let oldest = layouts
                    .iter()
                    .min_by_key(|(_, l)| l.used)
                    .map(|(k, _)| k.clone());
                if let Some(k) = oldest {
                    layouts.remove(&k);
                }
            }
            let used = layouts.values().map(|l| l.used).max().unwrap_or(0) + 1;
            let (placed, mut shown_seq, kept_before) = layouts
                .get_mut(&key)
                .map(|l| {
                    (
                        Arc::clone(&l.placed),
                        std::mem::take(&mut l.shown_seq),
                        std::mem::take(&mut l.kept),
                    )
                })
                .unwrap_or_default();
            let kept: PathSet = sel.kept.iter().map(|k| k.path.as_path()).collect();
            // What this selection kept, at its stamp now; the rest as before, for candidates of
            // this selection only: what left the world is forgotten here too. Visits the
            // entries kept, now or before, not every candidate twice.
            let mut now_shown = PathMap::with_capacity(shown_seq.len() + kept.len());
            for c in cands.iter().filter(|c| kept.contains(&c.path)) {
                now_shown.insert(&c.path, c.last_seq);
            }
            for (p, &at) in shown_seq.iter() {
                if !kept.contains(p) && offered.contains(p) {
                    now_shown.insert(p, at);
                }
            }
            shown_seq = now_shown;
            let dropped: Vec<&PathBuf> = sel
                .evicted
                .iter()
                .map(|e| &e.path)
                .filter(|p| kept_before.contains(p))
                .collect();
            for p in &dropped {
                thrash.evicted(p);
            }
            thrash.retain(|p| offered.contains(p));
            layouts.insert(
                key.clone(),
                Layout {
                    kept: sel
                        .kept
                        .iter()
                        .map(|k| (k.path.as_path(), k.form.clone()))
                        .collect(),
                    seq: cands.iter().map(|c| c.last_seq).max().unwrap_or(0),
                    offered,
                    shown_seq,
                    placed,
                    thrash,
                    used,
                },
            );
            *self.last_requester.lock() = Some(key.clone());
            dropped
        };
        // What this requester shows of a file in part, for its next selection's held form. An
        // entry it did not keep last time has nothing recorded: only the ones it stops keeping
        // are visited, not every entry left out.
        if layout.is_some() {
            for k in &sel.kept {
                if let Some(mut e) = self.cache.get_mut(&k.path) {
                    match &k.form {
                        Form::Ranges(r) => e.shown.set(&key, r),
                        _ => e.shown.forget(&key),
                    }
                }
            }
            for p in dropped {
                if let Some(mut e) = self.cache.get_mut(p) {
                    e.shown.forget(&key);
                }
            }
        }
        sel
    }

    /// The most recent selection, by any requester: what it kept and how often that
    /// requester stopped keeping each entry (`entries.list`'s `in_projection`, `evictions`).
    pub fn last_selection(&self) -> Option<LastSelection> {
        let key = self.last_requester.lock().clone()?;
        let layouts = self.layouts.lock();
        let l = layouts.get(&key)?;
        Some(LastSelection {
            kept: l.kept.keys().collect(),
            thrash: l.thrash.clone(),
        })
    }

    /// Changes when an observation may have changed what a projection shows.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    pub(crate) fn bump_generation(&self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// Waits until ingest has applied every observation up to sequence number `seq`, or until
    /// `timeout`; true if it did. Ingest stops coalescing (napping) while anyone waits here.
    pub fn await_ingest(&self, seq: u64, timeout: std::time::Duration) -> bool {
        if self.recent.last_seq() >= seq {
            return true;
        }
        self.urgent.fetch_add(1, Ordering::AcqRel);
        {
            // Under the nap lock, so a napping ingest thread cannot miss the wake-up.
            let _g = self.nap.0.lock();
            self.nap.1.notify_all();
        }
        let done = self.recent.wait_for_seq(seq, timeout);
        self.urgent.fetch_sub(1, Ordering::AcqRel);
        done
    }

    /// Ingest's pause between partial batches; cut short by [`World::await_ingest`].
    pub(crate) fn nap(&self, d: std::time::Duration) {
        let mut g = self.nap.0.lock();
        if self.urgent.load(Ordering::Acquire) == 0 {
            self.nap.1.wait_for(&mut g, d);
        }
    }

    /// [`World::select`] with the configured budget and policy.
    pub fn select_configured(&self) -> Selection {
        let policy = self
            .policy(&self.config.budget.policy)
            .unwrap_or_else(|| Box::new(policy::Worldfs::default()));
        self.select(self.config.budget.tokens, policy.as_ref())
    }

    /// Reads `path` from SOURCE now: bytes, hash and token count. Secrets, ignored paths, binary
    /// and oversized files are refused. Also refreshes the entry's hash and count if it has one.
    pub fn read_current(&self, path: &Path) -> Result<CurrentContent, ReadError> {
        // Taken before reading: a change observed while it reads keeps the entry stale.
        let version = self.cache.get(path).map(|e| e.version);
        let opened = self.source.open_beneath(path)?;
        let is_dir = matches!(opened, source::Opened::Dir(_));
        match self.rules.classify(path, is_dir) {
            PathVerdict::Keep => {}
            PathVerdict::Withheld => {
                return Err(ReadError::Withheld {
                    path: path.to_owned(),
                });
            }
            PathVerdict::Ignored(why) => {
                return Err(ReadError::Ignored {
                    path: path.to_owned(),
                    why: format!("{why:?}"),
                });
            }
        }
        let content = ingest::load(self, path, opened)?;
        match content {
            ingest::Loaded::Content(c) => {
                let loaded = ingest::Loaded::Content(c.clone());
                ingest::store_counts(self, path, &loaded, version);
                Ok(c)
            }
            ingest::Loaded::Ignored { reason, .. } => Err(ReadError::Ignored {
                path: path.to_owned(),
                why: format!("{reason:?}"),
            }),
        }
    }

    /// Hashes and counts every entry that needs it, even one the ingest thread is working on
    /// (a projection about to select needs them all).
    pub fn refresh_stale(&self) -> usize {
        self.dirty.store(false, Ordering::Release);
        let stale = self.cache.stale_paths_up_to(usize::MAX);
        for p in &stale {
            ingest::refresh(self, p);
        }
        stale.len()
    }

    /// Hashes and counts entries that need it while `go_on` says so, for idle moments. Each
    /// pass over the cache collects up to [`STALE_PER_PASS`] of them: the pass costs as much as
    /// the cache is big, so collecting a few at a time made catching up after a burst of new
    /// files quadratic (5,000 files created in a world of 30,000 entries: about 100 ms of
    /// scanning).
    pub(crate) fn refresh_stale_while(&self, mut go_on: impl FnMut() -> bool) -> usize {
        let mut done = 0;
        while go_on() && self.dirty.swap(false, Ordering::AcqRel) {
            // One more than the pass takes tells whether any are left.
            let stale = self.cache.stale_paths_up_to(STALE_PER_PASS + 1);
            let take = stale.len().min(STALE_PER_PASS);
            let mut n = 0;
            while n < take && (n == 0 || go_on()) {
                ingest::refresh(self, &stale[n]);
                n += 1;
            }
            done += n;
            if n < stale.len() {
                self.dirty.store(true, Ordering::Release);
            }
        }
        done
    }

    pub fn stats(&self) -> Stats {
        let mut s = Stats::default();
        self.counters.fill(&mut s);
        s.dropped = self.dropped.read().as_ref().map(|f| f());
        s.entries = self.cache.counts();
        s.known_tokens = self.cache.known_tokens();
        s.stale_entries = self.cache.stale_paths().len() as u64;
        s.turn = self.turns.current();
        s.token_memo_entries = self.tokens.len() as u64;
        if self.journaling {
            s.journal = Some(stats::JournalStats::from_counters(&self.journal_counters));
        }
        s.kept = self.kept_stats();
        s.not_kept = self.not_kept_reason();
        s.unwatched = self
            .unwatched
            .lock()
            .as_ref()
            .map(|p| p.to_string_lossy().into_owned());
        s
    }

    /// Whether every change made behind the mount reaches the world (as far as it can tell: a
    /// mount without a watcher says so to its clients itself).
    pub fn sees_every_change(&self) -> bool {
        self.unwatched.lock().is_none()
    }
}

/// About how many bytes of a file of `size` bytes and `content_tokens` tokens cost `tokens`.
fn bytes_costing(tokens: u32, size: u64, content_tokens: u32) -> u64 {
    (u128::from(size) * u128::from(tokens) / u128::from(content_tokens.max(1))) as u64
}

/// `ranges` of a file as a form: the ranges and the estimated tokens of showing them (their
/// share of the content, the entry's header, a line per range).
fn shown_part(content_tokens: u32, size: u64, ranges: &[ByteRange]) -> (Vec<ByteRange>, u32) {
    let covered = ranges.iter().map(ByteRange::len).sum();
    let n = u32::try_from(ranges.len()).unwrap_or(u32::MAX);
    let t = tokens::estimate_part(content_tokens, size, covered)
        .saturating_add(HEADER_TOKENS)
        .saturating_add(n.saturating_mul(RANGE_TOKENS));
    (ranges.to_vec(), t)
}

/// What a policy needs to know about an entry, or `None` if it can never be projected.
fn candidate(path: PathBuf, e: &Entry, turn: u64) -> Option<Candidate> {
    let notice_only = match e.state {
        EntryState::Live => false,
        EntryState::Deleted | EntryState::Withheld => true,
        EntryState::Ignored(_) => return None,
    };
    let content_tokens = e.tokens.unwrap_or_else(|| {
        let guess = e.size.unwrap_or(1024) / BYTES_PER_TOKEN_GUESS;
        u32::try_from(guess).unwrap_or(u32::MAX)
    });
    let whole_tokens = if notice_only {
        NOTICE_TOKENS
    } else {
        content_tokens.saturating_add(HEADER_TOKENS)
    };
    // A notebook is shown whole, as its cells, as Claude Code's Read shows one: no place in it
    // was read (its reads are of JSON), and a part of it would be cells cut in two.
    let in_part = !notice_only && !notebook::is_notebook(&path);
    let ranges = match (&e.extent, e.size) {
        (Extent::Ranges(set), Some(size)) if in_part && !set.covers(size) => {
            Some(shown_part(content_tokens, size, set.as_slice()))
        }
        _ => None,
    };
    let recent = match e.size {
        Some(size) if in_part && !e.recent.is_empty() && content_tokens > 0 => {
            let limit = bytes_costing(RECENT_VIEW_TOKENS, size, content_tokens);
            let set = e
                .recent
                .newest_within(limit)
                .extended_ahead(VIEW_AHEAD_PERCENT, size);
            (!set.is_empty() && !set.covers(size))
                .then(|| shown_part(content_tokens, size, set.as_slice()))
        }
        _ => None,
    };
    let glance = match e.size {
        Some(size) if in_part && content_tokens > 0 => e
            .recent
            .newest_head(bytes_costing(GLANCE_TOKENS, size, content_tokens))
            .filter(|r| r.len() < size)
            .map(|r| shown_part(content_tokens, size, &[r]))
            // only as a last resort: cheaper than every fuller form
            .filter(|(_, t)| {
                let fuller = [
                    Some(whole_tokens),
                    ranges.as_ref().map(|r| r.1),
                    recent.as_ref().map(|r| r.1),
                ];
                fuller.into_iter().flatten().all(|f| *t < f)
            }),
        _ => None,
    };
    Some(Candidate {
        path,
        kind: e.kind,
        whole_tokens,
        ranges,
        recent,
        glance,
        held: None,
        notice_only,
        age_turns: turn.saturating_sub(e.last_agent_turn),
        last_seq: e.last_observed.seq,
        pinned: e.pinned,
        agent_wrote: e.agent_wrote,
        reads: e.reads,
        weak_reads: e.weak_reads,
        evictions: 0,
        rereads_after_eviction: 0,
        last_read_seq: e.last_read_seq,
        last_form: None,
        fresh: false,
        unshown: false,
        in_last_step: false,
    })
}
