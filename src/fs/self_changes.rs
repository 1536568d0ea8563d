//! Names the mount itself just created or removed, so the watcher can tell its own echo from a
//! change made behind the mount.
//!
//! Every operation through the mount also shows up as an inotify event on SOURCE. Invalidating
//! for those drops dentries and directory attributes the kernel has just made correct, and costs
//! a LOOKUP or GETATTR round trip per name afterwards (rm -rf and bulk creates pay it 5,000 times).
//!
//! Only namespace events are matched (created, removed): inotify never merges two of them for
//! one name, because the opposite event must come in between, so counting them is exact. Data
//! and attribute events (modify, attrib, close-write) can be merged with an external writer's and
//! are always invalidated. An entry not matched within `TTL` is dropped, so a lost event can never
//! hide a later external change for longer than that.
//!
//! A watcher that names the process behind each change (fanotify) needs none of this: every
//! name change the daemon's own process made is the mount's. fanotify also merges queued events
//! about one name, which would leave noted changes unmatched, each hiding a change made behind
//! the mount for `TTL`; so nothing is noted on the file system it marks
//! ([`SelfChanges::by_process`]). A file system mounted below SOURCE is watched with inotify even
//! then, and its names are noted as above.
//!
//! One creation can also be reported twice: notify walks a directory it starts watching and
//! reports what it finds there as created, and the kernel may have queued the same creation
//! (a `mkdir -p a/b` made while `a`'s watch was being added). The second report of a name that
//! still leads to the same inode, with no removal of it reported in between, is no change.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

const TTL: Duration = Duration::from_millis(500);
const MAX_ENTRIES: usize = 65_536;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NameChange {
    Created,
    Removed,
}

type Key = (u64, u64, Box<[u8]>, NameChange);
/// A name in a directory of the backing tree: (dev, directory inode, name).
type NameKey = (u64, u64, Box<[u8]>);

#[derive(Default)]
pub struct SelfChanges {
    pending: Mutex<HashMap<Key, (u32, Instant)>>,
    /// Creations reported lately, with the inode each name led to when it was reported.
    created: Mutex<HashMap<NameKey, (u64, Instant)>>,
    /// The device whose changes the watcher tells by the process that made them (SOURCE's, with
    /// fanotify).
    by_process: OnceLock<u64>,
}

impl SelfChanges {
    /// From now on the watcher tells the mount's own name changes on the file system `dev` by
    /// their process: nothing is noted there for it to match.
    pub fn by_process(&self, dev: u64) {
        if self.by_process.set(dev).is_ok() {
            self.pending.lock().retain(|k, _| k.0 != dev);
        }
    }

    fn told_by_process(&self, dev: u64) -> bool {
        self.by_process.get() == Some(&dev)
    }

    /// Notes that the mount changed `name` in the directory (dev, ino) of the backing tree.
    pub fn record(&self, dev: u64, dir_ino: u64, name: &OsStr, change: NameChange) {
        if self.told_by_process(dev) {
            return;
        }
        let now = Instant::now();
        let mut p = self.pending.lock();
        if p.len() >= MAX_ENTRIES {
            p.retain(|_, (_, t)| now.duration_since(*t) < TTL);
        }
        let e = p
            .entry((dev, dir_ino, name.as_bytes().into(), change))
            .or_insert((0, now));
        e.0 += 1;
        e.1 = now;
    }

    /// Takes back one occurrence noted by [`SelfChanges::record`] for an operation that then
    /// failed: left in place, it would hide a real change behind the mount for up to `TTL`.
    pub fn withdraw(&self, dev: u64, dir_ino: u64, name: &OsStr, change: NameChange) {
        let key = (dev, dir_ino, name.as_bytes().into(), change);
        let mut p = self.pending.lock();
        if let Some((count, _)) = p.get_mut(&key) {
            *count -= 1;
            if *count == 0 {
                p.remove(&key);
            }
        }
    }

    /// True if the watcher already reported `name` created, leading to inode `ino`, within
    /// `TTL`, and not removed since: a second report of one creation. Otherwise notes this one.
    ///
    /// Never with a watcher that names processes (fanotify): it walks nothing, so it reports
    /// each creation once, and its events are read after the fact, so a merged event of the
    /// mount's could note the inode of a name made since behind the mount, and make that real
    /// creation look like a second report.
    pub fn created_again(&self, dev: u64, dir_ino: u64, name: &OsStr, ino: u64) -> bool {
        if self.told_by_process(dev) {
            return false;
        }
        let now = Instant::now();
        let mut c = self.created.lock();
        if c.len() >= MAX_ENTRIES {
            c.retain(|_, (_, t)| now.duration_since(*t) < TTL);
        }
        let key = (dev, dir_ino, name.as_bytes().into());
        match c.insert(key, (ino, now)) {
            Some((seen, at)) => seen == ino && now.duration_since(at) < TTL,
            None => false,
        }
    }

    /// The watcher reported `name` removed: a creation reported after this is a new one.
    pub fn removal_reported(&self, dev: u64, dir_ino: u64, name: &OsStr) {
        if self.told_by_process(dev) {
            return;
        }
        let key: NameKey = (dev, dir_ino, name.as_bytes().into());
        self.created.lock().remove(&key);
    }

    /// True (and forgets one occurrence) if the watcher's event is the mount's own change.
    pub fn take(&self, dev: u64, dir_ino: u64, name: &OsStr, change: NameChange) -> bool {
        let key = (dev, dir_ino, name.as_bytes().into(), change);
        let mut p = self.pending.lock();
        let Some((count, at)) = p.get_mut(&key) else {
            return false;
        };
        let fresh = at.elapsed() < TTL;
        *count -= 1;
        if *count == 0 {
            p.remove(&key);
        }
        fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_each_recorded_change_once() {
        let s = SelfChanges::default();
        let n = OsStr::new("a");
        s.record(1, 2, n, NameChange::Created);
        assert!(!s.take(1, 2, n, NameChange::Removed));
        assert!(s.take(1, 2, n, NameChange::Created));
        assert!(!s.take(1, 2, n, NameChange::Created), "consumed once only");
        assert!(!s.take(1, 3, n, NameChange::Created), "other directory");
    }

    #[test]
    fn a_creation_reported_twice_is_one_creation() {
        let s = SelfChanges::default();
        let n = OsStr::new("b");
        assert!(!s.created_again(1, 2, n, 10), "the first report");
        assert!(s.created_again(1, 2, n, 10), "the same creation again");
        assert!(
            !s.created_again(1, 2, n, 11),
            "another inode took the name (rename over it)"
        );
        assert!(!s.created_again(1, 3, n, 11), "another directory");
        s.removal_reported(1, 2, n);
        assert!(!s.created_again(1, 2, n, 11), "removed, then created anew");
        let old = Instant::now() - TTL;
        s.created
            .lock()
            .insert((1, 2, n.as_bytes().into()), (11, old));
        assert!(
            !s.created_again(1, 2, n, 11),
            "too long ago to be the same report"
        );
    }

    #[test]
    fn a_withdrawn_change_matches_nothing() {
        let s = SelfChanges::default();
        let n = OsStr::new("a");
        s.record(1, 2, n, NameChange::Removed);
        s.record(1, 2, n, NameChange::Removed);
        s.withdraw(1, 2, n, NameChange::Removed);
        assert!(s.take(1, 2, n, NameChange::Removed));
        assert!(
            !s.take(1, 2, n, NameChange::Removed),
            "the failed one was withdrawn"
        );
        s.withdraw(1, 2, n, NameChange::Removed);
        assert!(s.pending.lock().is_empty());
    }

    #[test]
    fn nothing_is_noted_for_a_watcher_that_names_processes() {
        let s = SelfChanges::default();
        let n = OsStr::new("a");
        s.record(1, 2, n, NameChange::Created);
        s.record(7, 2, n, NameChange::Created);
        s.by_process(1);
        s.record(1, 2, n, NameChange::Created);
        s.withdraw(1, 2, n, NameChange::Created);
        assert!(!s.take(1, 2, n, NameChange::Created));
        // Nor is any creation taken for a second report of one.
        assert!(!s.created_again(1, 2, n, 10));
        assert!(!s.created_again(1, 2, n, 10));
        // Another file system (mounted below SOURCE, watched with inotify) is noted as before,
        // and what was noted there before is kept.
        assert!(s.take(7, 2, n, NameChange::Created));
        s.record(7, 2, n, NameChange::Created);
        assert!(s.take(7, 2, n, NameChange::Created));
        assert!(!s.created_again(7, 2, n, 10));
        assert!(s.created_again(7, 2, n, 10));
    }
}
