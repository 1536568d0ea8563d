//! Command outputs the harness records, and keeping them valid: an output stays cached exactly
//! as long as the content of every file (or directory listing) the command read through the
//! mount is unchanged, and nothing changed below the directories it depends on as a whole (a
//! search's, or a command's that a whole-tree scanner read for: which of their files matter
//! cannot be told, so any change below them counts).
//!
//! Which files a command read comes from the world's ring of recent observations (everything the
//! agent or its subprocesses read after the sequence number the harness noted before running
//! the command), or from an explicit list. Each input is stored with the blake3 hash of its
//! content at recording time.
//!
//! Validity is checked lazily, before anything reads the cached outputs: the observations since
//! the last check name the paths that may have changed; only outputs depending on those are
//! re-hashed, and an output is dropped when a hash differs (so rewriting a file with the same
//! bytes keeps it), or when one of those paths is below one of its directories. If the ring lost
//! observations since the last check (or the watcher asked for a rescan), every input of every
//! output is re-hashed, and every output that depends on a directory is dropped: correct, only
//! slower.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::observation::{ExternalChange, Op};
use crate::world::harness::CommandOutput;
use crate::world::recent::SinceSeq;
use crate::world::{Class, World};

/// Most inputs per command: a bigger set is a build, whose output is not worth caching by file.
pub const MAX_INPUTS: usize = 10_000;

/// Why inputs could not be determined.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InputsError {
    #[error(
        "observations after seq {since} were partly dropped from the world's ring (it keeps the \
         last {capacity}; oldest kept: {oldest}); pass `files` explicitly"
    )]
    Lost {
        since: u64,
        oldest: u64,
        capacity: usize,
    },
    #[error("the command read {0} files; at most {MAX_INPUTS} are tracked")]
    TooMany(usize),
}

/// What was read through the mount after a sequence number, as a command's inputs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Reads {
    /// Paths the agent (or a process it started) read: the inputs.
    pub paths: Vec<PathBuf>,
    /// Those of `paths` a program that shows what it reads read (`cat`, `sed`, the agent's
    /// own tools: class `agent`): what the command put before the model, so its session's own.
    /// What an interpreter or a compiler read (`weak`: `python3 calc.py`, a test run importing
    /// every module) is an input of the output, but the model never saw it.
    pub shown: Vec<PathBuf>,
    /// Reads by whole-tree scanners (`rg`, `grep -r`, `git`, a fan-out): not inputs, since an
    /// indexer running beside the agent would otherwise tie every output to the whole tree, so
    /// a change to what they read goes unnoticed.
    pub scanned: u64,
    /// Files the agent (or a process it started) wrote, created or renamed into place, at most
    /// [`MAX_WRITTEN`] (none when it wrote more: a build, an install): not inputs, but what the
    /// command's session changed.
    pub written: Vec<PathBuf>,
}

/// Most files a command may write for them to be noted as its session's: more is a build or an
/// install, not files the agent works in.
pub const MAX_WRITTEN: usize = 256;

/// The file an observation wrote, if it wrote one.
fn written_path<'a>(op: &'a Op, path: &'a Path) -> Option<&'a Path> {
    match op {
        Op::Open {
            write,
            truncate,
            created,
            ..
        } if *write || *truncate || *created => Some(path),
        Op::Write { .. }
        | Op::Truncate { .. }
        | Op::Fallocate { .. }
        | Op::CopyIn { .. }
        | Op::Close { wrote: true } => Some(path),
        Op::Rename { to, .. } => Some(to),
        _ => None,
    }
}

/// Every observation after `since_seq` still in the world's ring; an error if some may have
/// been dropped from it already.
fn everything_since(world: &World, since_seq: u64) -> Result<SinceSeq, InputsError> {
    let recent = world.recent();
    let got = recent.since_seq(since_seq, recent.capacity());
    if !got.complete {
        return Err(InputsError::Lost {
            since: since_seq,
            oldest: got.oldest_seq,
            capacity: recent.capacity(),
        });
    }
    Ok(got)
}

/// What the agent (or a process it started) read after `since_seq`, per the world's ring.
pub fn inputs_since(world: &World, since_seq: u64) -> Result<Reads, InputsError> {
    let got = everything_since(world, since_seq)?;
    let mut paths = BTreeSet::new();
    let mut shown = BTreeSet::new();
    let mut written = BTreeSet::new();
    let mut scanned = 0;
    for r in &got.records {
        if matches!(r.class, Some(Class::Agent | Class::Weak))
            && let Some(w) = written_path(&r.obs.op, &r.obs.path)
        {
            written.insert(w.to_path_buf());
        }
        let read = match &r.obs.op {
            Op::Open { read: true, .. } | Op::Read { .. } | Op::ReadDir => &r.obs.path,
            Op::CopyIn { from, .. } => from,
            _ => continue,
        };
        match r.class {
            Some(Class::Agent) => {
                paths.insert(read.clone());
                shown.insert(read.clone());
            }
            Some(Class::Weak) => {
                paths.insert(read.clone());
            }
            Some(Class::Scan) => scanned += 1,
            // Unattributed: nothing the world keeps (an ignored path).
            None => {}
        }
    }
    if paths.len() > MAX_INPUTS {
        return Err(InputsError::TooMany(paths.len()));
    }
    let written = if written.len() > MAX_WRITTEN {
        Vec::new()
    } else {
        written.into_iter().collect()
    };
    Ok(Reads {
        paths: paths.into_iter().collect(),
        shown: shown.into_iter().collect(),
        scanned,
        written,
    })
}

/// The first path below one of `dirs` (relative to the root; the empty path is the whole tree)
/// that an observation after `since_seq` may have changed, per the world's ring: an output that
/// depends on them as a whole cannot be told apart from the change if it ran meanwhile.
pub fn changed_below(
    world: &World,
    since_seq: u64,
    dirs: &[PathBuf],
) -> Result<Option<PathBuf>, InputsError> {
    let got = everything_since(world, since_seq)?;
    let mut changed = HashSet::new();
    for r in &got.records {
        if changed_paths(&r.obs.op, &r.obs.path, &mut changed).is_none() {
            // A rescan: anything may have changed.
            return Ok(Some(PathBuf::new()));
        }
    }
    // Looked up first: comparing each changed path with each directory is for the answer only.
    let touched = changed_and_above(&changed);
    if !dirs.iter().any(|d| touched.contains(d.as_path())) {
        return Ok(None);
    }
    Ok(first_below(&changed, dirs).cloned())
}

/// A path of `changed` below (or at) one of `dirs`.
fn first_below<'a>(changed: &'a HashSet<PathBuf>, dirs: &[PathBuf]) -> Option<&'a PathBuf> {
    changed
        .iter()
        .find(|p| dirs.iter().any(|d| p.starts_with(d)))
}

/// Every path of `changed` and every directory above one (the empty path, the root, among
/// them): a directory is in it exactly when something below it changed. Made once per sweep,
/// so that each output's directories are looked up, not compared with every changed path (a
/// build through the mount changes thousands).
fn changed_and_above(changed: &HashSet<PathBuf>) -> HashSet<&Path> {
    changed.iter().flat_map(|p| p.ancestors()).collect()
}

/// Every input as it is now ([`World::input_fingerprint`]).
pub fn hash_inputs(world: &World, paths: Vec<PathBuf>) -> Vec<(PathBuf, String)> {
    paths
        .into_iter()
        .map(|p| {
            let h = world.input_fingerprint(&p);
            (p, h)
        })
        .collect()
}

/// Whether every input is still as recorded.
pub fn still_valid(world: &World, out: &CommandOutput) -> bool {
    out.inputs
        .iter()
        .all(|(p, h)| world.input_fingerprint(p) == *h)
}

/// Paths an observation may have changed the content of (a name appearing or vanishing changes
/// its directory's listing too). `None`: anything may have changed.
fn changed_paths(op: &Op, path: &Path, out: &mut HashSet<PathBuf>) -> Option<()> {
    let parent = |p: &Path| p.parent().map(Path::to_path_buf).unwrap_or_default();
    match op {
        Op::Open {
            write,
            truncate,
            created,
            ..
        } => {
            if *write || *truncate || *created {
                out.insert(path.to_owned());
            }
            if *created {
                out.insert(parent(path));
            }
        }
        Op::Write { .. }
        | Op::Truncate { .. }
        | Op::Fallocate { .. }
        | Op::CopyIn { .. }
        | Op::Close { wrote: true } => {
            out.insert(path.to_owned());
        }
        Op::Close { wrote: false } | Op::Read { .. } | Op::ReadDir | Op::SetAttr => {}
        Op::Mkdir | Op::Mknod | Op::Symlink | Op::Link { .. } | Op::Unlink | Op::Rmdir => {
            out.insert(path.to_owned());
            out.insert(parent(path));
        }
        Op::Rename { to, .. } => {
            for p in [path, to.as_path()] {
                out.insert(p.to_owned());
                out.insert(parent(p));
            }
        }
        Op::External { change } => match change {
            ExternalChange::Rescan | ExternalChange::Unwatched | ExternalChange::Remounted => {
                return None;
            }
            ExternalChange::Modified | ExternalChange::Echo => {
                out.insert(path.to_owned());
            }
            ExternalChange::Created | ExternalChange::Removed | ExternalChange::RemovedFile => {
                out.insert(path.to_owned());
                out.insert(parent(path));
            }
        },
    }
    Some(())
}

/// Keeps the harness's command outputs valid; see the module docs.
#[derive(Debug, Default)]
pub struct Validity {
    /// Ring push index up to which observations were checked.
    checked: Mutex<u64>,
    /// Copy of `checked` for the lock-free fast path.
    seen: AtomicU64,
    /// Outputs dropped because an input changed.
    dropped: AtomicU64,
}

/// A whole re-check is needed when the ring dropped observations we had not seen; also bounds
/// how much of the ring one sweep reads.
const SWEEP_CHUNK: usize = 4096;

impl Validity {
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Drops every cached output whose inputs changed since the last sweep. Cheap (one atomic
    /// load) when nothing was observed since.
    pub fn sweep(&self, world: &World) {
        let recent = world.recent();
        if recent.pushed() == self.seen.load(Ordering::Acquire) {
            return;
        }
        let mut checked = self.checked.lock();
        if recent.pushed() == *checked {
            return; // another request swept while we waited
        }
        if world.harness().commands.read().is_empty() {
            // Nothing cached: outputs recorded later hash their inputs then, so earlier
            // changes cannot matter to them.
            *checked = recent.pushed();
            self.seen.store(*checked, Ordering::Release);
            return;
        }
        let mut changed = HashSet::new();
        let mut everything = false;
        loop {
            let got = recent.from_index(*checked, SWEEP_CHUNK);
            everything |= got.missed > 0;
            for r in &got.records {
                if !everything && changed_paths(&r.obs.op, &r.obs.path, &mut changed).is_none() {
                    everything = true;
                }
            }
            *checked = got.next_index;
            if got.records.len() < SWEEP_CHUNK {
                break;
            }
        }
        // A change below a directory an output depends on as a whole drops it: which files
        // of the directory it depends on cannot be told, so there is nothing to re-hash.
        let touched = changed_and_above(&changed);
        let below = |c: &CommandOutput| {
            !c.subtrees.is_empty()
                && (everything || c.subtrees.iter().any(|d| touched.contains(d.as_path())))
        };
        // Hash outside the harness lock: other requests read the outputs meanwhile.
        let candidates: Vec<CommandOutput> = world
            .harness()
            .commands
            .read()
            .iter()
            .filter(|c| everything || below(c) || c.inputs.iter().any(|(p, _)| changed.contains(p)))
            .cloned()
            .collect();
        // Still holding `checked`: two sweeps never race to drop the same output twice.
        let stale: Vec<(String, String, u64)> = candidates
            .into_iter()
            .filter(|c| below(c) || !still_valid(world, c))
            .map(|c| (c.command, c.cwd, c.seq))
            .collect();
        if stale.is_empty() {
            self.seen.store(*checked, Ordering::Release);
            return;
        }
        let mut cmds = world.harness().commands.write();
        let before = cmds.len();
        // Matching the recording seq too: an output recorded again meanwhile is not dropped.
        cmds.retain(|c| {
            !stale
                .iter()
                .any(|(cmd, cwd, seq)| c.command == *cmd && c.cwd == *cwd && c.seq == *seq)
        });
        let n = before - cmds.len();
        drop(cmds);
        self.dropped.fetch_add(n as u64, Ordering::Relaxed);
        // Only now may the fast path skip: the stale outputs are gone.
        self.seen.store(*checked, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Relative paths of up to three components from a small alphabet, so that prefixes that
    /// are not components (`a` and `ab`) meet often.
    fn rel_path() -> impl Strategy<Value = PathBuf> {
        prop::collection::vec(prop::sample::select(vec!["a", "ab", "b", "a.b"]), 0..4)
            .prop_map(|parts| parts.iter().collect())
    }

    proptest! {
        /// Looking a directory up among the changed paths and the directories above them says
        /// what comparing it with every changed path says.
        #[test]
        fn the_lookup_agrees_with_comparing_every_path(
            changed in prop::collection::hash_set(rel_path(), 0..8),
            dir in rel_path(),
        ) {
            let touched = changed_and_above(&changed);
            let dirs = [dir.clone()];
            prop_assert_eq!(
                touched.contains(dir.as_path()),
                first_below(&changed, &dirs).is_some(),
                "{:?} under {:?}", changed, dir
            );
        }
    }

    #[test]
    fn change_ops_name_the_right_paths() {
        let mut s = HashSet::new();
        let p = Path::new("src/a.rs");
        assert!(changed_paths(&Op::ReadDir, p, &mut s).is_some());
        assert!(s.is_empty(), "reads change nothing");
        changed_paths(&Op::Unlink, p, &mut s);
        assert!(s.contains(p) && s.contains(Path::new("src")));
        s.clear();
        changed_paths(
            &Op::Rename {
                to: "b.rs".into(),
                exchange: false,
                dir: false,
            },
            p,
            &mut s,
        );
        assert!(s.contains(Path::new("b.rs")) && s.contains(Path::new("")));
        let rescan = Op::External {
            change: ExternalChange::Rescan,
        };
        assert!(changed_paths(&rescan, p, &mut s).is_none());
    }

    #[test]
    fn written_files_are_the_ones_written_created_or_renamed_into_place() {
        let p = Path::new("a.rs");
        let rename = Op::Rename {
            to: "b.rs".into(),
            exchange: false,
            dir: false,
        };
        assert_eq!(written_path(&rename, p), Some(Path::new("b.rs")));
        assert_eq!(written_path(&Op::Close { wrote: true }, p), Some(p));
        assert_eq!(written_path(&Op::Close { wrote: false }, p), None);
        assert_eq!(written_path(&Op::ReadDir, p), None);
        assert_eq!(
            written_path(&Op::Unlink, p),
            None,
            "gone, not the session's"
        );
    }

    #[test]
    fn a_directory_is_touched_by_a_change_anywhere_below_it() {
        let changed: HashSet<PathBuf> = ["src/core/a.rs", "docs"]
            .iter()
            .map(PathBuf::from)
            .collect();
        let touched = changed_and_above(&changed);
        for (dir, below) in [
            ("", true),
            ("src", true),
            ("src/core", true),
            ("src/core/a.rs", true),
            ("docs", true),
            ("src/cor", false),
            ("src/core/b.rs", false),
            ("tests", false),
        ] {
            assert_eq!(touched.contains(Path::new(dir)), below, "{dir}");
            let dirs = [PathBuf::from(dir)];
            assert_eq!(first_below(&changed, &dirs).is_some(), below, "{dir}");
        }
    }
}
