//! Kernel passthrough registrations kept after a file's last close.
//!
//! A passthrough open costs the daemon four system calls besides the round trips: opening the
//! backing file, registering it (`FUSE_DEV_IOC_BACKING_OPEN`), and on release unregistering it
//! and closing it. A scan (`grep -r`, `cat` of every file, an agent's repeated searches) opens
//! the same files again and again, and those calls were a third of the daemon's CPU time in a
//! `cat` of 10k files. Keeping the registration of recently opened files lets a read-only open
//! answer with the registration it already has and open nothing.
//!
//! What this costs: the kernel holds an open backing file per retained registration (not a
//! descriptor of the daemon, so the descriptor limit is untouched) and therefore keeps that
//! inode in memory. A file deleted while retained keeps its space until its registration goes,
//! which is why registrations are dropped when the kernel forgets the inode (an unlink through
//! the mount leads there once nothing holds the file open) and, for deletions behind the
//! mount, by the watcher.

use std::num::NonZeroUsize;

use lru::LruCache;
use parking_lot::Mutex;

/// Registrations kept at most. A 10k-file project fits; beyond it the least recently opened
/// go first. Each costs the kernel one open file and a cached inode (about a kilobyte).
pub const CAPACITY: usize = 16_384;

/// Node id -> (generation, value), least recently used dropped first. Generic so it can be
/// tested without a FUSE connection; the file system keeps `Arc<fuser::BackingId>`s in it.
pub struct Retained<T> {
    lru: Mutex<LruCache<u64, (u64, T)>>,
}

impl<T: Clone> Retained<T> {
    pub fn new(capacity: usize) -> Self {
        let cap = NonZeroUsize::new(capacity).unwrap_or(NonZeroUsize::MIN);
        Self {
            lru: Mutex::new(LruCache::new(cap)),
        }
    }

    /// The value kept for this node id, if it belongs to the same generation (a reused node id
    /// names another backing inode); marks it as just used.
    pub fn get(&self, nodeid: u64, generation: u64) -> Option<T> {
        let mut lru = self.lru.lock();
        match lru.get(&nodeid) {
            Some((g, v)) if *g == generation => Some(v.clone()),
            _ => None,
        }
    }

    /// Keeps `value` for this node id, replacing what an older generation left.
    pub fn keep(&self, nodeid: u64, generation: u64, value: T) {
        // Values may do work when dropped (unregistering from the kernel): never under the lock.
        let dropped = self.lru.lock().push(nodeid, (generation, value));
        drop(dropped);
    }

    /// Drops what is kept for a node id the kernel no longer knows.
    pub fn forget(&self, nodeid: u64) {
        let dropped = self.lru.lock().pop(&nodeid);
        drop(dropped);
    }

    /// Drops everything (a deletion behind the mount, or lost watcher events).
    pub fn clear(&self) {
        let all = {
            let mut lru = self.lru.lock();
            let cap = lru.cap();
            std::mem::replace(&mut *lru, LruCache::new(cap))
        };
        drop(all);
    }

    pub fn len(&self) -> usize {
        self.lru.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn a_reused_node_id_does_not_find_the_old_registration() {
        let r = Retained::new(4);
        r.keep(7, 1, "old");
        assert_eq!(r.get(7, 1), Some("old"));
        assert_eq!(r.get(7, 2), None);
        r.keep(7, 2, "new");
        assert_eq!(r.get(7, 2), Some("new"));
        assert_eq!(r.len(), 1);
    }

    #[test]
    fn the_least_recently_opened_goes_first_and_is_released() {
        let r = Retained::new(2);
        let (a, b, c) = (Arc::new(()), Arc::new(()), Arc::new(()));
        r.keep(1, 0, a.clone());
        r.keep(2, 0, b.clone());
        // Opening 1 again makes 2 the oldest.
        assert!(r.get(1, 0).is_some());
        r.keep(3, 0, c.clone());
        assert_eq!(r.get(2, 0), None);
        assert_eq!(Arc::strong_count(&b), 1, "the evicted value is dropped");
        assert_eq!(Arc::strong_count(&a), 2);
        r.forget(1);
        assert_eq!(Arc::strong_count(&a), 1);
        r.clear();
        assert_eq!(Arc::strong_count(&c), 1);
        assert!(r.is_empty());
    }
}
