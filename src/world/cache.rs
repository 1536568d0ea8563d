//! The map of entries, keyed by path relative to the root, and the structural changes on it
//! (renames of whole subtrees, deletes).
//!
//! Only the ingest thread changes the map's structure; other threads read it or flip flags on an
//! entry (pins), which `DashMap`'s per-shard locks make safe. Subtree operations on a directory
//! (a rename, a removal) look at the keys below it through an ordered index of the keys; an
//! operation on a file touches that name alone. So the operations say when only files are
//! involved (`Op::Rename`'s `dir`, `ExternalChange::RemovedFile`, unlink). The kind the map
//! holds for an entry does not decide it: it is what was observed of the name, which may be
//! older than what the name is now.
//!
//! Where the operation cannot say (inotify reports a rename's old name without its kind), the
//! map itself answers: it keeps its keys in order too, so the keys at and below a name are one
//! range of that index, and a subtree operation costs what is below the name, not what the
//! whole map holds. 3,000 atomic saves behind a mirror mount over a world of 20,000 entries cost
//! the ingest thread 1.96 s of CPU time when each scanned every key; an `rm -rf` through the
//! mount of a tree of 1,000 directories in a world of 24,000 entries, 0.6 s.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use dashmap::DashMap;
use dashmap::mapref::one::{Ref, RefMut};
use parking_lot::Mutex;
use std::collections::BTreeSet;

use super::entry::{Entry, EntryKind, EntryState, Stamp};

#[derive(Debug, Default)]
pub struct Cache {
    map: DashMap<PathBuf, Entry>,
    /// The map's keys in order, so the keys at and below a directory are one range. Added to
    /// before a key is added to the map and taken from after one is removed, so it never holds
    /// fewer keys than the map: a key too many is only looked up for nothing.
    keys: Mutex<BTreeSet<Ordered>>,
    /// Entries marked deleted since the last [`Cache::prune_deleted`]: what tells the ingest
    /// thread a pass is due.
    deleted_since_prune: AtomicUsize,
}

/// Entry counts by state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StateCounts {
    pub live: u64,
    pub deleted: u64,
    pub withheld: u64,
    pub ignored: u64,
}

impl Cache {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn get(&self, path: &Path) -> Option<Ref<'_, PathBuf, Entry>> {
        self.map.get(path)
    }

    pub fn get_mut(&self, path: &Path) -> Option<RefMut<'_, PathBuf, Entry>> {
        self.map.get_mut(path)
    }

    pub fn contains(&self, path: &Path) -> bool {
        self.map.contains_key(path)
    }

    pub fn insert(&self, path: PathBuf, entry: Entry) -> Option<Entry> {
        self.keys.lock().insert(Ordered(path.clone()));
        self.map.insert(path, entry)
    }

    pub fn remove(&self, path: &Path) -> Option<Entry> {
        self.take(path).map(|(_, e)| e)
    }

    /// Removes the entry at `path` if it is `unwanted`, looked at and removed under one lock
    /// (a read applied in between cannot be lost).
    pub fn remove_if(&self, path: &Path, unwanted: impl FnOnce(&Entry) -> bool) -> Option<Entry> {
        let taken = self.map.remove_if(path, |_, e| unwanted(e));
        if taken.is_some() {
            self.keys.lock().remove(&Ordered(path.to_path_buf()));
        }
        taken.map(|(_, e)| e)
    }

    fn take(&self, path: &Path) -> Option<(PathBuf, Entry)> {
        let taken = self.map.remove(path);
        if taken.is_some() {
            self.keys.lock().remove(&Ordered(path.to_path_buf()));
        }
        taken
    }

    /// `f` of every entry that gives something, without copying the entries (a render looks
    /// at all of them, and copying 20,000 took a seventh of its time).
    pub fn filter_map<T>(&self, mut f: impl FnMut(&Path, &Entry) -> Option<T>) -> Vec<T> {
        // Sized up front: a render's candidates are a few hundred bytes each, and growing the
        // vector by doubling copied every one of them again and again.
        let mut out = Vec::with_capacity(self.map.len());
        out.extend(self.map.iter().filter_map(|r| f(r.key(), r.value())));
        out
    }

    /// [`Cache::filter_map`] in path order ([`path_order`]), read off the ordered index: a
    /// render wants its candidates in that order, and sorting 20,000 of them (a few hundred
    /// bytes each) afterwards moved each one many times. The index's lock is held throughout,
    /// so the ingest thread cannot add or remove a key meanwhile (it only waits; lock order is
    /// the index, then a shard of the map, as in [`Cache::insert`]).
    pub fn filter_map_in_order<T>(&self, mut f: impl FnMut(&Path, &Entry) -> Option<T>) -> Vec<T> {
        let keys = self.keys.lock();
        let mut out = Vec::with_capacity(keys.len());
        for k in keys.iter() {
            // A key can be in the index a moment before its entry is in the map.
            if let Some(e) = self.map.get(&k.0)
                && let Some(t) = f(&k.0, e.value())
            {
                out.push(t);
            }
        }
        out
    }

    /// A copy of every entry (paths and metadata only, no content).
    pub fn snapshot(&self) -> Vec<(PathBuf, Entry)> {
        self.map
            .iter()
            .map(|r| (r.key().clone(), r.value().clone()))
            .collect()
    }

    /// Files the agent accessed in `turn` or later, newest access first.
    pub fn agent_files_since(&self, turn: u64) -> Vec<PathBuf> {
        let mut out: Vec<(u64, PathBuf)> = self
            .map
            .iter()
            .filter(|r| {
                let e = r.value();
                e.kind == EntryKind::File && e.last_agent_turn >= turn
            })
            .map(|r| (r.value().last_observed.seq, r.key().clone()))
            .collect();
        out.sort_unstable_by(|a, b| b.cmp(a));
        out.into_iter().map(|(_, p)| p).collect()
    }

    /// Paths whose entry wants its hash and token count (re)computed.
    pub fn stale_paths(&self) -> Vec<PathBuf> {
        self.stale_paths_up_to(usize::MAX)
    }

    /// At most `limit` of [`stale_paths`](Self::stale_paths): ingest refreshes a few at a time,
    /// and copying every stale path for each few made refreshing thousands quadratic.
    pub fn stale_paths_up_to(&self, limit: usize) -> Vec<PathBuf> {
        self.map
            .iter()
            .filter(|r| r.value().needs_rehash)
            .take(limit)
            .map(|r| r.key().clone())
            .collect()
    }

    pub fn counts(&self) -> StateCounts {
        let mut c = StateCounts::default();
        for r in self.map.iter() {
            match r.value().state {
                EntryState::Live => c.live += 1,
                EntryState::Deleted => c.deleted += 1,
                EntryState::Withheld => c.withheld += 1,
                EntryState::Ignored(_) => c.ignored += 1,
            }
        }
        c
    }

    /// Sum of the known whole-content token counts of live entries.
    pub fn known_tokens(&self) -> u64 {
        self.map
            .iter()
            .filter(|r| r.value().state == EntryState::Live)
            .filter_map(|r| r.value().tokens)
            .map(u64::from)
            .sum()
    }

    /// Keys equal to `root` or below it.
    fn keys_under(&self, root: &Path) -> Vec<PathBuf> {
        let keys = self.keys.lock();
        if root.as_os_str().is_empty() {
            return keys.iter().map(|k| k.0.clone()).collect();
        }
        keys.range(Ordered(root.to_path_buf())..)
            .take_while(|k| is_under(&k.0, root))
            .map(|k| k.0.clone())
            .collect()
    }

    fn take_under(&self, root: &Path) -> Vec<(PathBuf, Entry)> {
        self.keys_under(root)
            .into_iter()
            .filter_map(|k| self.take(&k))
            .collect()
    }

    /// Marks `path` and everything below it deleted (unlink, rmdir, removal behind the mount),
    /// `by_agent` when the agent itself removed it. Returns how many entries changed.
    pub fn delete_subtree(&self, path: &Path, at: Stamp, by_agent: bool) -> usize {
        let mut n = 0;
        for k in self.keys_under(path) {
            if let Some(mut e) = self.map.get_mut(&k) {
                if e.state != EntryState::Deleted {
                    e.deleted(at, by_agent);
                    n += 1;
                } else if by_agent {
                    // The watcher saw the removal before the mount's own report of who made it.
                    e.deleted_by_agent = true;
                }
            }
        }
        self.deleted_since_prune.fetch_add(n, Ordering::Relaxed);
        n
    }

    /// Marks `path` alone deleted: for unlink(2), which never removes a directory, so nothing is
    /// below it and `delete_subtree`'s look at the ordered keys (per file of an `rm -rf`) is not
    /// needed. Returns whether the entry changed.
    pub fn delete_one(&self, path: &Path, at: Stamp, by_agent: bool) -> bool {
        match self.map.get_mut(path) {
            Some(mut e) if e.state != EntryState::Deleted => {
                e.deleted(at, by_agent);
                self.note_deleted();
                true
            }
            Some(mut e) => {
                // As in `delete_subtree`: who made it may be known only after the fact.
                e.deleted_by_agent |= by_agent;
                false
            }
            None => false,
        }
    }

    /// Counts an entry marked deleted outside this map's own methods.
    pub fn note_deleted(&self) {
        self.deleted_since_prune.fetch_add(1, Ordering::Relaxed);
    }

    /// Entries marked deleted since the last [`Cache::prune_deleted`].
    pub fn deletions_since_prune(&self) -> usize {
        self.deleted_since_prune.load(Ordering::Relaxed)
    }

    /// Forgets deleted entries beyond the `keep` deleted last (pinned ones stay). A deleted
    /// entry is kept so a projection can say the file is gone, which matters for the files
    /// deleted lately, not for the thousands an `rm -rf` of a build directory leaves; each one
    /// still costs memory and time in every render. Returns how many were forgotten.
    pub fn prune_deleted(&self, keep: usize) -> usize {
        self.deleted_since_prune.store(0, Ordering::Relaxed);
        let mut deleted: Vec<(u64, PathBuf)> = self
            .map
            .iter()
            .filter(|r| r.value().state == EntryState::Deleted && !r.value().pinned)
            .map(|r| (r.value().last_changed.map_or(0, |s| s.seq), r.key().clone()))
            .collect();
        let Some(excess) = deleted.len().checked_sub(keep).filter(|&n| n > 0) else {
            return 0;
        };
        deleted.sort_unstable();
        deleted[..excess]
            .iter()
            // Only the ingest thread changes the map's structure, but a pin may have come since.
            .filter(|(_, p)| {
                let gone = self
                    .map
                    .remove_if(p, |_, e| e.state == EntryState::Deleted && !e.pinned)
                    .is_some();
                if gone {
                    self.keys.lock().remove(&Ordered(p.clone()));
                }
                gone
            })
            .count()
    }

    /// Marks the listing of `path`'s parent directory changed, if the agent has seen it.
    pub fn parent_listing_changed(&self, path: &Path, at: Stamp) {
        let parent = path.parent().unwrap_or(Path::new(""));
        if let Some(mut e) = self.map.get_mut(parent)
            && e.kind == EntryKind::Dir
        {
            e.changed(at);
        }
    }

    /// Marks `root` and every entry below it as needing a re-hash (a file system was mounted or
    /// unmounted there; all of them for `""`).
    pub fn mark_stale_under(&self, root: &Path) {
        for k in self.keys_under(root) {
            if let Some(mut e) = self.map.get_mut(&k) {
                e.recheck();
                e.unverified = e.needs_rehash;
            }
        }
    }

    /// Marks every entry as needing a re-hash (the watcher lost events: anything may have changed).
    pub fn mark_all_stale(&self) {
        self.mark_stale_under(Path::new(""));
    }

    /// Moves `from` and everything below it to `to`; with `exchange`, swaps the two subtrees.
    /// Without `dir` (no directory moved), only the two names themselves can have entries.
    ///
    /// Without `exchange`, whatever was at `to` is replaced. When a file lands on a file the agent
    /// had seen (the atomic-save pattern: write `x.tmp`, rename onto `x`), the destination keeps its
    /// history (reads, pins, evictions) and is marked changed, so an editor's save does not make
    /// the agent's knowledge of `x` look brand new.
    pub fn rename(&self, from: &Path, to: &Path, exchange: bool, dir: bool, at: Stamp) {
        if from == to || to.starts_with(from) {
            // The kernel refuses moving a directory into itself; nothing sensible to do.
            return;
        }
        let take = |p: &Path| {
            if dir {
                self.take_under(p)
            } else {
                self.take(p).into_iter().collect()
            }
        };
        let moved = take(from);
        let displaced = take(to);
        let rebase = |p: &Path, old: &Path, new: &Path| -> PathBuf {
            match p.strip_prefix(old) {
                Ok(rest) if rest.as_os_str().is_empty() => new.to_path_buf(),
                Ok(rest) => new.join(rest),
                Err(_) => p.to_path_buf(),
            }
        };
        if exchange {
            for (p, mut e) in displaced {
                if p == to {
                    e.changed(at);
                }
                self.insert(rebase(&p, to, from), e);
            }
            for (p, mut e) in moved {
                if p == from {
                    e.changed(at);
                }
                self.insert(rebase(&p, from, to), e);
            }
            return;
        }
        let mut old_dest = None;
        for (p, e) in displaced {
            if p == to {
                old_dest = Some(e);
            }
            // Anything below a replaced destination is gone: rename only replaces empty
            // directories, so these were stale names.
        }
        let mut landed = false;
        let moved_any = !moved.is_empty();
        for (p, e) in moved {
            let new = rebase(&p, from, to);
            let e = if new == to {
                landed = true;
                match old_dest.take() {
                    Some(dest) if dest.kind == e.kind => merge_onto(dest, e, at),
                    _ => e,
                }
            } else {
                e
            };
            self.insert(new, e);
        }
        if !landed
            && let Some(mut dest) = old_dest
            && (!moved_any || dest.kind == EntryKind::Dir)
        {
            // What moved was never observed itself, but the destination's content (or listing)
            // was replaced. A file entry replaced by an observed directory's children is gone.
            dest.changed(at);
            self.insert(to.to_path_buf(), dest);
        }
    }
}

/// The destination's history with the source's news: an atomic save, seen as a change to `dest`.
fn merge_onto(mut dest: Entry, src: Entry, at: Stamp) -> Entry {
    dest.reads = dest.reads.saturating_add(src.reads);
    dest.weak_reads = dest.weak_reads.saturating_add(src.weak_reads);
    dest.programs.absorb(&src.programs);
    dest.agent_wrote |= src.agent_wrote;
    // the agent's atomic save (`sed -i`, an editor): its lines are the agent's edit of `dest`
    dest.agent_edit_pending |= src.agent_edit_pending || src.agent_wrote;
    dest.pinned |= src.pinned;
    dest.last_read_seq = dest.last_read_seq.max(src.last_read_seq);
    if src.last_observed.seq > dest.last_observed.seq {
        dest.last_observed = src.last_observed;
        dest.last_agent_turn = dest.last_agent_turn.max(src.last_agent_turn);
    }
    dest.state = match src.state {
        EntryState::Withheld => EntryState::Withheld,
        _ if dest.state == EntryState::Withheld => EntryState::Withheld,
        _ => EntryState::Live,
    };
    dest.changed(at);
    dest
}

/// `a.cmp(b)` for the normalized relative paths the cache holds, on bytes: the order of
/// components is the order of the bytes with `/` below every other byte. A render sorts every
/// candidate by path, and comparing components (`Path::cmp`) was a fifth of a render's time in
/// a world of 20,000 entries.
pub(super) fn path_order(a: &Path, b: &Path) -> std::cmp::Ordering {
    let (a, b) = (a.as_os_str().as_bytes(), b.as_os_str().as_bytes());
    let same = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let rank = |c: Option<&u8>| c.map(|&c| if c == b'/' { 0 } else { u16::from(c) + 1 });
    // A path that ends first is a prefix of the other, and sorts first (None < Some).
    rank(a.get(same)).cmp(&rank(b.get(same)))
}

/// A key of the ordered index, ordered as `Path` orders it (by [`path_order`], on bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ordered(PathBuf);

impl Ord for Ordered {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        path_order(&self.0, &other.0)
    }
}

impl PartialOrd for Ordered {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// `key.starts_with(root)` for the normalized relative paths the cache holds (no `.`, no
/// doubled or trailing `/`), on bytes: `Path::starts_with` walks components, and subtree
/// operations ask it of every key.
fn is_under(key: &Path, root: &Path) -> bool {
    let (k, r) = (key.as_os_str().as_bytes(), root.as_os_str().as_bytes());
    r.is_empty() || (k.starts_with(r) && (k.len() == r.len() || k[r.len()] == b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest! {
        /// Byte order with `/` lowest is `Path`'s order of components.
        #[test]
        fn path_order_is_the_order_of_components(
            a in prop::collection::vec(prop::sample::select(vec!["a", "b", "a.b", "a-b", "ab", "-", "é"]), 0..4),
            b in prop::collection::vec(prop::sample::select(vec!["a", "b", "a.b", "a-b", "ab", "-", "é"]), 0..4),
        ) {
            let (a, b): (PathBuf, PathBuf) = (a.iter().collect(), b.iter().collect());
            prop_assert_eq!(path_order(&a, &b), a.cmp(&b), "{:?} vs {:?}", a, b);
        }
    }

    #[test]
    fn under_is_by_component() {
        let u = |k: &str, r: &str| is_under(Path::new(k), Path::new(r));
        assert!(u("a/b", "a") && u("a", "a") && u("a/b/c", "a/b") && u("x", ""));
        assert!(!u("ab", "a") && !u("a", "a/b") && !u("b/a", "a"));
        for (k, r) in [
            ("src/lib.rs", "src"),
            ("srcx/y", "src"),
            ("s", "src"),
            ("", ""),
        ] {
            assert_eq!(u(k, r), Path::new(k).starts_with(r), "{k} under {r}");
        }
    }
    use proptest::prelude::*;
    use std::time::SystemTime;

    fn at(seq: u64) -> Stamp {
        Stamp {
            seq,
            time: SystemTime::UNIX_EPOCH,
            turn: 0,
        }
    }

    fn file(seq: u64) -> Entry {
        Entry::new(EntryKind::File, EntryState::Live, at(seq))
    }

    fn keys(c: &Cache) -> Vec<String> {
        let mut k: Vec<String> = c
            .snapshot()
            .into_iter()
            .map(|(p, _)| p.to_string_lossy().into_owned())
            .collect();
        k.sort();
        k
    }

    #[test]
    fn rename_directory_moves_children_only_on_component_boundary() {
        let c = Cache::new();
        c.insert(
            "src".into(),
            Entry::new(EntryKind::Dir, EntryState::Live, at(1)),
        );
        c.insert("src/a.rs".into(), file(2));
        c.insert("src/m/b.rs".into(), file(3));
        c.insert("srcfoo.rs".into(), file(4));
        c.rename(Path::new("src"), Path::new("lib"), false, true, at(5));
        assert_eq!(keys(&c), vec!["lib", "lib/a.rs", "lib/m/b.rs", "srcfoo.rs"]);
    }

    #[test]
    fn atomic_save_keeps_destination_history() {
        let c = Cache::new();
        let mut x = file(1);
        x.reads = 3;
        x.pinned = true;
        x.needs_rehash = false;
        c.insert("x".into(), x);
        let mut tmp = file(2);
        tmp.agent_wrote = true;
        c.insert("x.tmp".into(), tmp);
        c.rename(Path::new("x.tmp"), Path::new("x"), false, false, at(3));
        assert_eq!(keys(&c), vec!["x"]);
        let e = c.get(Path::new("x")).map(|r| r.clone());
        let e = e.as_ref();
        assert_eq!(e.map(|e| e.reads), Some(3));
        assert_eq!(e.map(|e| e.pinned), Some(true));
        assert_eq!(e.map(|e| e.agent_wrote), Some(true));
        assert_eq!(e.and_then(|e| e.last_changed).map(|s| s.seq), Some(3));
        assert_eq!(e.map(|e| e.needs_rehash), Some(true));
    }

    #[test]
    fn rename_of_unseen_file_onto_seen_one_marks_it_changed() {
        let c = Cache::new();
        let mut x = file(1);
        x.needs_rehash = false;
        c.insert("x".into(), x);
        c.rename(Path::new("unseen"), Path::new("x"), false, false, at(2));
        assert_eq!(
            c.get(Path::new("x"))
                .and_then(|e| e.last_changed)
                .map(|s| s.seq),
            Some(2)
        );
    }

    #[test]
    fn exchange_swaps_subtrees() {
        let c = Cache::new();
        c.insert("a/1".into(), file(1));
        c.insert("b/2".into(), file(2));
        c.rename(Path::new("a"), Path::new("b"), true, true, at(3));
        assert_eq!(keys(&c), vec!["a/2", "b/1"]);
    }

    #[test]
    fn delete_subtree_marks_all_and_counts() {
        let c = Cache::new();
        c.insert(
            "d".into(),
            Entry::new(EntryKind::Dir, EntryState::Live, at(1)),
        );
        c.insert("d/x".into(), file(2));
        c.insert("dx".into(), file(3));
        assert_eq!(c.delete_subtree(Path::new("d"), at(4), false), 2);
        let counts = c.counts();
        assert_eq!((counts.live, counts.deleted), (1, 2));
    }

    #[test]
    fn pruning_forgets_the_oldest_deleted_entries_only() {
        let c = Cache::new();
        for i in 0..10u64 {
            c.insert(format!("f{i}").into(), file(i));
        }
        c.insert("live".into(), file(100));
        // f0..f7 deleted in the order f7, f6, ..., f0; f3 pinned.
        for i in (0..8u64).rev() {
            c.delete_one(Path::new(&format!("f{i}")), at(200 - i), false);
        }
        if let Some(mut e) = c.get_mut(Path::new("f3")) {
            e.pinned = true;
        }
        assert_eq!(c.deletions_since_prune(), 8);
        // 7 unpinned deleted, keep 3: the four deleted first go (f7, f6, f5, f4).
        assert_eq!(c.prune_deleted(3), 4);
        assert_eq!(c.deletions_since_prune(), 0);
        assert_eq!(
            keys(&c),
            vec!["f0", "f1", "f2", "f3", "f8", "f9", "live"],
            "the live, the pinned and the three deleted last stay"
        );
        assert_eq!(c.prune_deleted(3), 0, "nothing beyond the limit left");
    }

    fn rel_path() -> impl Strategy<Value = PathBuf> {
        prop::collection::vec(prop::sample::select(vec!["a", "b", "c", "ab"]), 1..4)
            .prop_map(|v| v.iter().collect::<PathBuf>())
    }

    /// The map's keys, as the ordered index should hold them.
    fn map_keys(c: &Cache) -> Vec<PathBuf> {
        let mut keys: Vec<PathBuf> = c.snapshot().into_iter().map(|(k, _)| k).collect();
        keys.sort_by(|a, b| path_order(a, b));
        keys
    }

    fn index_keys(c: &Cache) -> Vec<PathBuf> {
        c.keys.lock().iter().map(|k| k.0.clone()).collect()
    }

    #[derive(Debug, Clone)]
    enum CacheOp {
        Insert(PathBuf),
        Remove(PathBuf),
        Rename(PathBuf, PathBuf, bool, bool),
        DeleteSubtree(PathBuf),
        Prune(usize),
    }

    fn cache_op() -> impl Strategy<Value = CacheOp> {
        prop_oneof![
            3 => rel_path().prop_map(CacheOp::Insert),
            1 => rel_path().prop_map(CacheOp::Remove),
            2 => (rel_path(), rel_path(), any::<bool>(), any::<bool>())
                .prop_map(|(a, b, x, d)| CacheOp::Rename(a, b, x, d)),
            1 => rel_path().prop_map(CacheOp::DeleteSubtree),
            1 => (0usize..3).prop_map(CacheOp::Prune),
        ]
    }

    proptest! {
        /// Whatever the operations, the ordered index holds exactly the map's keys after each
        /// one, and a subtree removal marks exactly the keys a scan finds below the name.
        #[test]
        fn the_ordered_index_follows_every_change(
            ops in prop::collection::vec(cache_op(), 1..40),
        ) {
            let c = Cache::new();
            for (i, op) in ops.into_iter().enumerate() {
                let seq = i as u64 + 1;
                match op {
                    CacheOp::Insert(p) => {
                        c.insert(p, file(seq));
                    }
                    CacheOp::Remove(p) => {
                        c.remove(&p);
                    }
                    CacheOp::Rename(a, b, x, d) => c.rename(&a, &b, x, d, at(seq)),
                    CacheOp::DeleteSubtree(p) => {
                        let live_below = c
                            .snapshot()
                            .into_iter()
                            .filter(|(k, e)| is_under(k, &p) && e.state != EntryState::Deleted)
                            .count();
                        prop_assert_eq!(c.delete_subtree(&p, at(seq), false), live_below);
                    }
                    CacheOp::Prune(keep) => {
                        c.prune_deleted(keep);
                    }
                }
                prop_assert_eq!(index_keys(&c), map_keys(&c));
                // What a render is built from: every entry, once, in path order.
                prop_assert_eq!(
                    c.filter_map_in_order(|p, _| Some(p.to_path_buf())),
                    map_keys(&c)
                );
            }
        }

        /// Renaming a directory moves exactly the entries at or below it, each to the same
        /// relative place under the new name, and leaves everything else alone.
        #[test]
        fn rename_moves_whole_subtree(paths in prop::collection::btree_set(rel_path(), 1..20),
                                      from in rel_path(), to in rel_path()) {
            prop_assume!(!to.starts_with(&from) && !from.starts_with(&to));
            let c = Cache::new();
            for (i, p) in paths.iter().enumerate() {
                c.insert(p.clone(), file(i as u64));
            }
            c.rename(&from, &to, false, true, at(1000));
            let mut expected: Vec<PathBuf> = paths.iter().filter_map(|p| {
                if let Ok(rest) = p.strip_prefix(&from) {
                    Some(if rest.as_os_str().is_empty() { to.clone() } else { to.join(rest) })
                } else if p.starts_with(&to) {
                    // Replaced by the move, unless nothing moved onto it.
                    if paths.iter().any(|q| q.starts_with(&from)) { None }
                    else if *p == to { Some(p.clone()) } else { None }
                } else {
                    Some(p.clone())
                }
            }).collect();
            expected.sort();
            expected.dedup();
            let mut got: Vec<PathBuf> = c.snapshot().into_iter().map(|(p, _)| p).collect();
            got.sort();
            prop_assert_eq!(got, expected);
        }

        /// Where nothing is below either name, a rename told that no directory moved (which
        /// looks at the two names only) ends exactly as the move of whole subtrees does.
        #[test]
        fn a_rename_of_files_ends_as_the_subtree_move(
            paths in prop::collection::btree_set(rel_path(), 1..20),
            from in rel_path(), to in rel_path(), exchange in any::<bool>(),
        ) {
            let below = |p: &Path, q: &Path| p != q && p.starts_with(q);
            let files: Vec<&PathBuf> = paths
                .iter()
                .filter(|p| !below(p, &from) && !below(p, &to))
                .collect();
            let (subtrees, names) = (Cache::new(), Cache::new());
            for (i, p) in files.iter().enumerate() {
                subtrees.insert((*p).clone(), file(i as u64));
                names.insert((*p).clone(), file(i as u64));
            }
            subtrees.rename(&from, &to, exchange, true, at(1000));
            names.rename(&from, &to, exchange, false, at(1000));
            let state = |c: &Cache| {
                let mut v: Vec<(PathBuf, Option<u64>)> = c
                    .snapshot()
                    .into_iter()
                    .map(|(p, e)| (p, e.last_changed.map(|s| s.seq)))
                    .collect();
                v.sort();
                v
            };
            prop_assert_eq!(state(&names), state(&subtrees));
        }
    }
}
