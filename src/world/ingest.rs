//! Turning observations into entries, on the ingest thread.
//!
//! The hot path (one observation) touches no file and makes no syscall in the common case: the
//! process lookup is cached, the entry already exists, and hashing/token counting is deferred to
//! idle moments ([`refresh`]) or to the projection asking for it. Changes are applied whatever the
//! attribution says; attribution only decides whether a *new* entry is created.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::Receiver;

use super::attribution::{Attributor, Class};
use super::entry::{Entry, EntryKind, EntryState, Extent, IgnoreReason, Stamp};
use super::ignore_rules::{PathVerdict, content_verdict};
use super::journal::JournalItem;
use super::lines::LineMap;
use super::notebook;
use super::procinfo::ProcInfo;
use super::ranges::ByteRange;
use super::source::{Opened, SourceError, SourceRoot};
use super::stats::Counters;
use super::{CurrentContent, ReadError, World, tokens};
use crate::observation::{CallerStamp, ExternalChange, Observation, Op};

/// Observations applied per lock of the attributor.
const BATCH: usize = 1024;
/// How long the ingest thread waits for observations before doing idle work.
const TICK: Duration = Duration::from_millis(100);
/// Journal batches are handed over at least this often, so the journal's one-second flush
/// promise holds end to end.
const JOURNAL_HANDOFF: Duration = Duration::from_millis(250);
/// Idle work per tick: hashing and counting stops after this long so ingest stays responsive.
const IDLE_BUDGET: Duration = Duration::from_millis(50);
/// After draining a partial batch, wait this long before waiting on the channel again.
/// Waking per observation (a `cat` of every file sends two per file) cost the 2-core machine
/// ~18% of its time in the channel's spin-yield; napping lets observations arrive in batches
/// and lets senders skip waking a parked receiver. Each nap still costs a timed futex wait
/// (hrtimer set and cancel, VM exits on this kind of machine), a wake-up of whoever follows
/// `recent` and often a wake-up by the next sender: at 2 ms those were half of ingest's CPU
/// time during `rg` over the tree. Readers that need ingest caught up cut the nap short
/// (`World::await_ingest`), so only change feeds see the extra delay.
const COALESCE: Duration = Duration::from_millis(10);

/// The ingest thread's loop.
pub(super) fn run(world: &World, rx: &Receiver<Observation>) {
    let mut journal = world.journal.lock().take();
    let mut pending: Vec<JournalItem> = Vec::new();
    let mut last_handoff = Instant::now();
    let mut batch: Vec<Observation> = Vec::with_capacity(BATCH);
    loop {
        let stopping = world.stop.load(Ordering::Acquire);
        let first = if stopping {
            match rx.try_recv() {
                Ok(o) => Some(o),
                Err(_) => break,
            }
        } else {
            crossbeam_channel::select! {
                recv(rx) -> o => match o {
                    Ok(o) => Some(o),
                    Err(_) => break,
                },
                // Told to stop: drained above, with no idle work first.
                recv(world.stop_wake.1) -> _ => continue,
                default(TICK) => None,
            }
        };
        match first {
            Some(o) => {
                late_ingest_pause();
                batch.push(o);
                batch.extend(rx.try_iter().take(BATCH - 1));
                let mut attr = world.attributor.lock();
                let mut recent = Vec::with_capacity(batch.len());
                for obs in batch.drain(..) {
                    let item = apply(world, &mut attr, obs);
                    if journal.is_some() {
                        pending.push(item.clone());
                    }
                    recent.push(Arc::new(item));
                }
                drop(attr);
                let partial = recent.len() < BATCH;
                // After applying: a reader that sees a record also sees its effect.
                world.recent.push_batch(recent);
                if partial && !stopping {
                    world.nap(COALESCE);
                }
            }
            None => idle(world, rx),
        }
        if let Some(j) = &journal
            && (pending.len() >= BATCH || last_handoff.elapsed() >= JOURNAL_HANDOFF)
        {
            j.send(std::mem::take(&mut pending));
            last_handoff = Instant::now();
        }
    }
    if let Some(j) = journal.take() {
        j.send(pending);
        j.finish();
    }
}

/// Debug builds only: the ingest thread sleeps `WORLDFS_DEBUG_LATE_INGEST_MS` milliseconds
/// before applying what arrived, as a busy world lags: a command and the shell that ran it are
/// then both gone before the world looks them up.
fn late_ingest_pause() {
    static PAUSE: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    crate::debug_pause::pause(&PAUSE, "WORLDFS_DEBUG_LATE_INGEST_MS");
}

/// Deleted entries kept (the ones deleted last): their notices are what a projection can still
/// use, and a few hundred of them already outnumber what a budget shows.
const KEEP_DELETED: usize = 512;
/// Deletions between two pruning passes (each looks at every entry once).
const PRUNE_EVERY: usize = 512;

/// Prunes old deleted entries when enough accumulated, then hashes and counts stale entries
/// until the idle budget runs out or observations arrive.
fn idle(world: &World, rx: &Receiver<Observation>) {
    if world.cache.deletions_since_prune() >= PRUNE_EVERY
        && world.cache.prune_deleted(KEEP_DELETED) > 0
    {
        // A projection rendered before may show a notice of what was forgotten: still true
        // (the file is gone), but the next one should not.
        world.bump_generation();
    }
    let start = Instant::now();
    world.refresh_stale_while(|| start.elapsed() < IDLE_BUDGET && rx.is_empty());
}

/// What an access does to an entry.
#[derive(Debug, Clone, Copy)]
enum Access {
    /// Opened for reading (`count`: counts as a read) and possibly read `range` (daemon mode).
    Look {
        count: bool,
        range: Option<ByteRange>,
    },
    /// Opened for writing; `changed` when the content did change (truncate, create, write).
    Write {
        changed: bool,
        truncate_to: Option<u64>,
    },
}

struct Ctx<'a> {
    world: &'a World,
    proc: Option<Arc<ProcInfo>>,
    pid: u32,
    seq: u64,
    time: SystemTime,
}

impl Ctx<'_> {
    fn stamp(&self, turn: u64) -> Stamp {
        Stamp {
            seq: self.seq,
            time: self.time,
            turn,
        }
    }

    fn neutral(&self) -> Stamp {
        self.stamp(self.world.turns.current())
    }
}

/// Who `pid` is: `/proc` (through the world's cache) while it still answers for the same
/// process, else what the FUSE thread read while serving it, with the ancestry stamped with it
/// (or continuing from its parent if that is still known).
fn caller(world: &World, pid: u32, stamp: Option<&CallerStamp>) -> Option<Arc<ProcInfo>> {
    let known = world.procs.lookup(pid);
    match (known, stamp) {
        // A pid reused since the request: the stamp describes the caller, /proc someone else.
        (Some(p), Some(s)) if p.start_time != s.start_time => Some(from_stamp(world, pid, s)),
        (Some(p), _) => Some(p),
        (None, Some(s)) => Some(from_stamp(world, pid, s)),
        (None, None) => None,
    }
}

fn from_stamp(world: &World, pid: u32, stamp: &CallerStamp) -> Arc<ProcInfo> {
    // The ancestry stamped with the caller, when its parent was there to be read; else what the
    // world knows of the parent. A parent that started after the caller is a later process
    // reusing the parent's pid.
    let parent = (stamp.parent.is_none() && stamp.ppid > 1)
        .then(|| world.procs.lookup(stamp.ppid))
        .flatten()
        .filter(|p| p.start_time <= stamp.start_time);
    Arc::new(ProcInfo::from_stamp(pid, stamp, parent.as_deref()))
}

/// Applies one observation and returns its journal record.
pub(super) fn apply(world: &World, attr: &mut Attributor, obs: Observation) -> JournalItem {
    Counters::bump(&world.counters.observations);
    let proc = match obs.op {
        _ if obs.pid == 0 => None,
        // A change behind the mount whose process the watcher named (fanotify): its name, for
        // whoever reads the observation; it is no caller of the mount's.
        Op::External { .. } => world.procs.lookup(obs.pid),
        _ => caller(world, obs.pid, obs.caller.as_deref()),
    };
    let comm = proc.as_ref().map(|p| Arc::clone(&p.comm));
    let cx = Ctx {
        world,
        proc,
        pid: obs.pid,
        seq: obs.seq,
        time: obs.time,
    };
    let path = obs.path.as_path();
    let class = match &obs.op {
        Op::External { change } => {
            Counters::bump(if *change == ExternalChange::Echo {
                &world.counters.echo
            } else {
                &world.counters.external
            });
            external(&cx, path, *change);
            None
        }
        Op::Open {
            read,
            write,
            truncate,
            created,
        } => {
            let mut class = None;
            if *read {
                let count = true;
                let range = None;
                class = access(
                    &cx,
                    attr,
                    path,
                    EntryKind::File,
                    Access::Look { count, range },
                );
            }
            if *write || *truncate || *created {
                let changed = *truncate || *created;
                let truncate_to = truncate.then_some(0);
                let w = access(
                    &cx,
                    attr,
                    path,
                    EntryKind::File,
                    Access::Write {
                        changed,
                        truncate_to,
                    },
                );
                class = class.or(w);
            }
            if *created {
                world.cache.parent_listing_changed(path, cx.neutral());
            }
            class
        }
        Op::Read { offset, len } => {
            let range = Some(ByteRange::at(*offset, *len));
            access(
                &cx,
                attr,
                path,
                EntryKind::File,
                Access::Look {
                    count: false,
                    range,
                },
            )
        }
        Op::Write { .. } | Op::Fallocate { .. } => {
            let a = Access::Write {
                changed: true,
                truncate_to: None,
            };
            access(&cx, attr, path, EntryKind::File, a)
        }
        Op::Truncate { size } => {
            let a = Access::Write {
                changed: true,
                truncate_to: Some(*size),
            };
            access(&cx, attr, path, EntryKind::File, a)
        }
        Op::CopyIn { from, offset, len } => {
            let look = Access::Look {
                count: true,
                range: Some(ByteRange::at(*offset, *len)),
            };
            access(&cx, attr, from, EntryKind::File, look);
            let a = Access::Write {
                changed: true,
                truncate_to: None,
            };
            access(&cx, attr, path, EntryKind::File, a)
        }
        Op::Close { wrote } => {
            // With kernel passthrough a close is the only sign of writes. In daemon I/O mode
            // every write arrived as a Write and stamped the change when it was answered; the
            // RELEASE behind a close reaches the mount after close() has returned, so a second
            // stamp here would move the change past what the harness did next (a socket call
            // its barrier orders after the write), and with it the file's place in the stream.
            if *wrote
                && !world.reads_by_range
                && let Some(mut e) = world.cache.get_mut(path)
            {
                e.changed(cx.neutral());
                world.dirty.store(true, Ordering::Release);
            }
            None
        }
        Op::SetAttr => None,
        Op::ReadDir => {
            let look = Access::Look {
                count: true,
                range: None,
            };
            access(&cx, attr, path, EntryKind::Dir, look)
        }
        Op::Mkdir | Op::Mknod | Op::Symlink | Op::Link { .. } => {
            name_appeared(&cx, path);
            name_op_class(&cx, attr, path)
        }
        Op::Unlink | Op::Rmdir => {
            let by_agent = attr.removed_by_agent(cx.proc.as_deref());
            if matches!(obs.op, Op::Unlink) {
                world.cache.delete_one(path, cx.neutral(), by_agent);
            } else {
                world.cache.delete_subtree(path, cx.neutral(), by_agent);
            }
            world.cache.parent_listing_changed(path, cx.neutral());
            world.rules.invalidate(path);
            name_op_class(&cx, attr, path)
        }
        Op::Rename { to, exchange, dir } => {
            let replaces_seen = !*exchange && !*dir && world.cache.contains(to);
            rename(&cx, path, to, *exchange, *dir);
            let class = name_op_class(&cx, attr, path);
            if replaces_seen && class == Some(Class::Weak) && attr.ran_by_agent(cx.proc.as_deref())
            {
                saved_by_agents_program(&cx, to);
            }
            class
        }
    };
    if !matches!(obs.op, Op::External { .. }) {
        world.counters.class(class);
    }
    // A read that counted for nothing (a scan, an ignored path) leaves every projection as it
    // was; anything else may not. Withdrawals bump in `access`.
    let passive = matches!(
        obs.op,
        Op::Open {
            write: false,
            truncate: false,
            created: false,
            ..
        } | Op::Read { .. }
            | Op::ReadDir
            | Op::Close { wrote: false }
            | Op::SetAttr
    ) && !matches!(class, Some(Class::Agent) | Some(Class::Weak));
    if !passive {
        world.bump_generation();
    }
    JournalItem { obs, class, comm }
}

/// The class of a name operation, for the counters only: names change whoever changes them.
fn name_op_class(cx: &Ctx<'_>, attr: &mut Attributor, path: &Path) -> Option<Class> {
    attr.classify(cx.pid, cx.proc.as_deref(), path, cx.time, false)
        .class
}

/// A name appeared (mkdir, mknod, symlink, link): the parent's listing changed, and an entry the
/// world still had as deleted is back.
fn name_appeared(cx: &Ctx<'_>, path: &Path) {
    let at = cx.neutral();
    if let Some(mut e) = cx.world.cache.get_mut(path)
        && e.state == EntryState::Deleted
    {
        e.changed(at);
        cx.world.dirty.store(true, Ordering::Release);
    }
    cx.world.cache.parent_listing_changed(path, at);
    cx.world.rules.invalidate(path);
}

fn rename(cx: &Ctx<'_>, from: &Path, to: &Path, exchange: bool, dir: bool) {
    let w = cx.world;
    let at = cx.neutral();
    w.cache.rename(from, to, exchange, dir, at);
    w.cache.parent_listing_changed(from, at);
    w.cache.parent_listing_changed(to, at);
    w.rules.invalidate(from);
    w.rules.invalidate(to);
    // A file renamed onto a secret's name is a secret now, and the other way round.
    for p in [to, from] {
        let Some(mut e) = w.cache.get_mut(p) else {
            continue;
        };
        let is_dir = e.kind == EntryKind::Dir;
        match (w.rules.classify(p, is_dir), e.state) {
            (PathVerdict::Withheld, EntryState::Live | EntryState::Ignored(_)) => {
                e.state = EntryState::Withheld;
                e.needs_rehash = false;
            }
            (PathVerdict::Keep, EntryState::Withheld) => {
                e.state = EntryState::Live;
                e.recheck();
            }
            _ => {}
        }
    }
    w.dirty.store(true, Ordering::Release);
}

/// A program the agent ran saved a file the agent has looked at by renaming a new file over it
/// (`os.replace`, an atomic writer): the agent's edit, as when such a program rewrites the
/// file in place (see `access`). The new file itself, made by that program, never entered the
/// world, so the rename's merge of the two entries has nothing of the agent's to carry over.
fn saved_by_agents_program(cx: &Ctx<'_>, to: &Path) {
    let w = cx.world;
    if let Some(mut e) = w.cache.get_mut(to)
        && e.kind == EntryKind::File
    {
        // Only a save that counts is the agent's activity (it may start a turn).
        let at = cx.stamp(w.turns.agent_activity(cx.time));
        let write = Access::Write {
            changed: true,
            truncate_to: None,
        };
        update(
            w,
            &mut e,
            Some(Class::Agent),
            write,
            at,
            cx,
            w.reads_by_range,
        );
    }
}

fn external(cx: &Ctx<'_>, path: &Path, change: ExternalChange) {
    let w = cx.world;
    let at = cx.neutral();
    w.rules.invalidate(path);
    match change {
        ExternalChange::Created => name_appeared(cx, path),
        ExternalChange::Modified => {
            if let Some(mut e) = w.cache.get_mut(path) {
                e.changed(at);
            }
        }
        // The mount's own change stamped the file when it was observed; only what may have
        // been merged into its echo needs looking at, and counting the file again finds it.
        ExternalChange::Echo => {
            if let Some(mut e) = w.cache.get_mut(path) {
                e.recheck();
            }
        }
        ExternalChange::Removed => {
            w.cache.delete_subtree(path, at, false);
            w.cache.parent_listing_changed(path, at);
        }
        ExternalChange::RemovedFile => {
            w.cache.delete_one(path, at, false);
            w.cache.parent_listing_changed(path, at);
        }
        ExternalChange::Rescan => {
            w.cache.mark_all_stale();
            w.rules.invalidate_all();
        }
        ExternalChange::Remounted => {
            w.cache.mark_stale_under(path);
            w.rules.invalidate_all();
        }
        ExternalChange::Unwatched => {
            w.cache.mark_all_stale();
            w.rules.invalidate_all();
            w.unwatched.lock().get_or_insert_with(|| path.to_path_buf());
        }
    }
    w.dirty.store(true, Ordering::Release);
}

/// Applies an access by the observed process; returns its class.
fn access(
    cx: &Ctx<'_>,
    attr: &mut Attributor,
    path: &Path,
    kind: EntryKind,
    a: Access,
) -> Option<Class> {
    let w = cx.world;
    let looking = matches!(a, Access::Look { .. });
    let verdict = attr.classify(cx.pid, cx.proc.as_deref(), path, cx.time, looking);
    for p in &verdict.withdraw {
        withdraw(w, p);
    }
    if !verdict.withdraw.is_empty() {
        w.bump_generation();
    }
    let mut class = verdict.class;
    // A program the agent ran that changes a file the agent has looked at (`python fix.py`
    // rewriting `src/calc.py`, a formatter, a codemod) made the agent's edit: the agent ran it
    // to make that change, and its step's output does not show what changed. The file names
    // nothing on the program's command line, so the program's class alone calls it weak. What
    // such a program creates stays out of the world, as before: its outputs, caches and logs
    // are no file the agent chose to look at.
    if !looking
        && class == Some(Class::Weak)
        && attr.ran_by_agent(cx.proc.as_deref())
        && w.cache.contains(path)
    {
        class = Some(Class::Agent);
    }
    // A look that counts for nothing (a scan, an unattributed access) changes no entry (see
    // `update`) and creates none: most observations of a `grep -r` or `rg` end here, without
    // hashing the path for a cache lookup.
    if looking && !matches!(class, Some(Class::Agent) | Some(Class::Weak)) {
        return class;
    }
    let stamp = if class == Some(Class::Agent) {
        cx.stamp(w.turns.agent_activity(cx.time))
    } else {
        cx.neutral()
    };
    // A notebook's byte ranges are places in its JSON, not in the cells it is shown as.
    let by_range = w.reads_by_range && !notebook::is_notebook(path);
    let existed = if let Some(mut e) = w.cache.get_mut(path) {
        update(w, &mut e, class, a, stamp, cx, by_range);
        true
    } else {
        false
    };
    if existed || class != Some(Class::Agent) {
        return class;
    }
    let state = match w.rules.classify(path, kind == EntryKind::Dir) {
        PathVerdict::Keep => EntryState::Live,
        PathVerdict::Withheld => EntryState::Withheld,
        PathVerdict::Ignored(_) => {
            Counters::bump(&w.counters.ignored);
            return class;
        }
    };
    let mut e = Entry::new(kind, state, stamp);
    e.last_observed = stamp;
    update(w, &mut e, class, a, stamp, cx, by_range);
    w.cache.insert(path.to_owned(), e);
    if state == EntryState::Live {
        w.dirty.store(true, Ordering::Release);
    }
    attr.created(cx.pid, cx.proc.as_deref(), path);
    class
}

fn update(
    w: &World,
    e: &mut Entry,
    class: Option<Class>,
    a: Access,
    at: Stamp,
    cx: &Ctx<'_>,
    reads_by_range: bool,
) {
    let counts = matches!(class, Some(Class::Agent) | Some(Class::Weak));
    if counts && let Some(p) = &cx.proc {
        e.programs.add(&p.comm);
    }
    match a {
        Access::Look { count, range } => match class {
            Some(Class::Agent) => {
                if count {
                    e.agent_read(at);
                } else {
                    e.last_observed = at;
                    e.last_agent_turn = at.turn;
                }
                match range {
                    Some(r) if reads_by_range => {
                        e.extent.add_range(r);
                        e.recent.record(r);
                    }
                    // In passthrough mode an open for reading is all we see: assume all of it.
                    None if reads_by_range && e.kind != EntryKind::Dir => {}
                    _ => e.extent.set_whole(),
                }
            }
            Some(Class::Weak) => {
                if count {
                    e.weak_reads = e.weak_reads.saturating_add(1);
                }
                e.last_observed = at;
            }
            Some(Class::Scan) | None => {}
        },
        Access::Write {
            changed,
            truncate_to,
        } => {
            if class == Some(Class::Agent) {
                e.agent_wrote = true;
                e.last_observed = at;
                e.last_agent_turn = at.turn;
            }
            if changed {
                e.changed(at);
                e.agent_edit_pending |= class == Some(Class::Agent);
                w.dirty.store(true, Ordering::Release);
            }
            // With the lines of the version before known, the next count moves the views to
            // where their lines went (a truncate is most often the start of a rewrite).
            if let Some(size) = truncate_to.filter(|_| e.lines.is_none()) {
                e.recent.truncate(size);
                if let super::entry::Extent::Ranges(set) = &mut e.extent {
                    set.truncate(size);
                }
                e.shown.truncate(size);
            }
        }
    }
}

/// The process that created `path` turned out to be scanning: take its access back.
fn withdraw(w: &World, path: &Path) {
    let remove = match w.cache.get_mut(path) {
        Some(mut e) => {
            if e.reads <= 1 && !e.agent_wrote && !e.pinned {
                true
            } else {
                e.reads = e.reads.saturating_sub(1);
                false
            }
        }
        None => false,
    };
    if remove {
        w.cache.remove(path);
        Counters::bump(&w.counters.withdrawn);
    }
}

/// Content (or the reason there is none to project) of an opened path.
pub(super) enum Loaded {
    Content(CurrentContent),
    Ignored { reason: IgnoreReason, size: u64 },
}

pub(super) fn load(w: &World, path: &Path, opened: Opened) -> Result<Loaded, ReadError> {
    let cap = w.rules.max_file_bytes();
    match opened {
        Opened::File { file, size } => {
            // A notebook is shown as its cells: the cap applies to them, not to its figures.
            let is_notebook = notebook::is_notebook(path);
            let read_cap = match is_notebook {
                true => cap.max(notebook::MAX_NOTEBOOK_BYTES),
                false => cap,
            };
            if size > read_cap {
                return Ok(Loaded::Ignored {
                    reason: IgnoreReason::TooLarge,
                    size,
                });
            }
            let mut bytes = Vec::with_capacity(size as usize);
            file.take(read_cap.saturating_add(1))
                .read_to_end(&mut bytes)
                .map_err(|source| SourceError::Read {
                    path: path.to_owned(),
                    source,
                })?;
            let len = bytes.len() as u64;
            if let Some(reason) = content_verdict(&bytes, len, read_cap) {
                return Ok(Loaded::Ignored { reason, size: len });
            }
            let hash = tokens::hash(&bytes);
            if let Some(cells) = is_notebook
                .then(|| w.notebooks.render(&hash, &bytes))
                .flatten()
            {
                let cells = cells.as_bytes().to_vec();
                let shown = cells.len() as u64;
                if shown > cap {
                    return Ok(Loaded::Ignored {
                        reason: IgnoreReason::TooLarge,
                        size: len,
                    });
                }
                // Counted under the rendering's own hash: a copy of the JSON under another name
                // has the file's hash and other tokens.
                let tokens = w.tokens.count(&tokens::hash(&cells), &cells)?;
                return Ok(Loaded::Content(CurrentContent {
                    kind: EntryKind::File,
                    bytes: cells,
                    hash,
                    tokens,
                    size: shown,
                    notebook: true,
                }));
            }
            if len > cap {
                return Ok(Loaded::Ignored {
                    reason: IgnoreReason::TooLarge,
                    size: len,
                });
            }
            let tokens = w.tokens.count(&hash, &bytes)?;
            Ok(Loaded::Content(CurrentContent {
                kind: EntryKind::File,
                bytes,
                hash,
                tokens,
                size: len,
                notebook: false,
            }))
        }
        Opened::Dir(fd) => {
            let names = SourceRoot::list(fd, path)?;
            let mut bytes = Vec::new();
            for n in names {
                bytes.extend_from_slice(n.as_encoded_bytes());
                bytes.push(b'\n');
            }
            let hash = tokens::hash(&bytes);
            let tokens = w.tokens.count(&hash, &bytes)?;
            let size = bytes.len() as u64;
            Ok(Loaded::Content(CurrentContent {
                kind: EntryKind::Dir,
                bytes,
                hash,
                tokens,
                size,
                notebook: false,
            }))
        }
    }
}

/// Records what was loaded on the entry at `path`, unless it may have changed since
/// `seen_version` (its `version` before loading), in which case it stays stale.
pub(super) fn store_counts(w: &World, path: &Path, loaded: &Loaded, seen_version: Option<u32>) {
    // outside the entry's lock: a pass over the whole content
    let new_lines = match loaded {
        Loaded::Content(c) if c.kind == EntryKind::File => LineMap::new(&c.bytes),
        _ => None,
    };
    let Some(mut e) = w.cache.get_mut(path) else {
        return;
    };
    if let Some(seen) = seen_version
        && e.version != seen
    {
        return;
    }
    if !matches!(e.state, EntryState::Live | EntryState::Ignored(_)) {
        return;
    }
    let found_changed = e.unverified
        && match loaded {
            Loaded::Content(c) => e.hash.is_some_and(|h| h != c.hash),
            Loaded::Ignored { .. } => e.hash.is_some(),
        };
    e.unverified = false;
    if found_changed {
        // Seen by no observation: it happened before the latest one applied, at the latest.
        e.last_changed = Some(Stamp {
            seq: w.recent.last_seq(),
            time: SystemTime::now(),
            turn: w.turns.current(),
        });
        Counters::bump(&w.counters.changed_unobserved);
    }
    match loaded {
        Loaded::Content(c) => {
            match new_lines {
                Some(lines) => follow_lines(&mut e, lines, c.bytes.is_empty()),
                None => e.lines = None,
            }
            e.kind = c.kind;
            e.hash = Some(c.hash);
            e.tokens = Some(c.tokens);
            e.size = Some(c.size);
            e.state = EntryState::Live;
        }
        Loaded::Ignored { reason, size } => {
            e.hash = None;
            e.tokens = None;
            e.size = Some(*size);
            e.state = EntryState::Ignored(*reason);
        }
    }
    e.needs_rehash = false;
}

/// Lines of context around an agent's edit in the view it becomes, as a unified diff shows.
const EDIT_CONTEXT_LINES: usize = 3;

/// Moves the entry's read ranges and views to where their lines are in the version `new`
/// describes, and makes the lines an agent edit touched its most recent view (and part of what
/// it has seen: it wrote them). An empty version is kept out of it: it is most often a rewrite
/// under way (truncated, not yet written), and mapping views onto it would drop them all.
fn follow_lines(e: &mut Entry, new: LineMap, empty: bool) {
    if empty && e.lines.is_some() {
        return;
    }
    if let Some(old) = e.lines.take() {
        let change = old.diff(&new);
        if !change.is_empty() {
            e.recent.remap(|r| change.map(r));
            if let Extent::Ranges(set) = &mut e.extent {
                set.remap(|r| change.map(r));
            }
            e.shown.remap(|r| change.map(r));
            if e.agent_edit_pending {
                for r in change.touched(EDIT_CONTEXT_LINES) {
                    e.recent.record(r);
                    if let Extent::Ranges(set) = &mut e.extent {
                        set.insert(r);
                    }
                }
            }
        }
    }
    e.agent_edit_pending = false;
    e.lines = Some(Arc::new(new));
}

/// Recomputes the hash and token count of the entry at `path` from SOURCE.
pub(super) fn refresh(w: &World, path: &Path) {
    let Some((state, seen, last_seq)) = w
        .cache
        .get(path)
        .map(|e| (e.state, e.version, e.last_observed.seq))
    else {
        return;
    };
    if !matches!(state, EntryState::Live | EntryState::Ignored(_)) {
        if let Some(mut e) = w.cache.get_mut(path) {
            e.needs_rehash = false;
        }
        return;
    }
    let result = w
        .source
        .open_beneath(path)
        .map_err(ReadError::from)
        .and_then(|o| load(w, path, o));
    match result {
        Ok(loaded) => {
            store_counts(w, path, &loaded, Some(seen));
            Counters::bump(&w.counters.refreshed);
        }
        Err(ReadError::Source(SourceError::Open { source, .. }))
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            // Gone behind our back with no observation (the watcher may have dropped it).
            if let Some(mut e) = w.cache.get_mut(path)
                && e.version == seen
            {
                let at = Stamp {
                    seq: last_seq,
                    time: SystemTime::now(),
                    turn: w.turns.current(),
                };
                e.deleted(at, false);
                drop(e);
                w.cache.note_deleted();
            }
        }
        Err(ReadError::Source(SourceError::NotRegular { .. }))
        | Err(ReadError::Source(SourceError::Open { .. })) => {
            // A FIFO, a symlink we refuse to follow, a path through a symlink.
            let loaded = Loaded::Ignored {
                reason: IgnoreReason::NotRegular,
                size: 0,
            };
            store_counts(w, path, &loaded, Some(seen));
        }
        Err(e) => {
            Counters::bump(&w.counters.refresh_errors);
            tracing::debug!(path = %path.display(), "cannot refresh entry: {e}");
            if let Some(mut en) = w.cache.get_mut(path)
                && en.version == seen
            {
                en.needs_rehash = false;
            }
        }
    }
}
