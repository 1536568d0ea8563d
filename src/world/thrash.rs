//! The thrash guard's memory, one per requester (budget, policy, format and options).
//!
//! A policy learns from its own evictions: an entry it dropped that the agent then read again
//! proved the eviction wrong (see the worldfs policy's thrash protection). That lesson belongs
//! to the requester whose selection dropped it. Kept on the entries, shared by every
//! requester, an eviction by a tight budget (or by another policy) protected the entry in a
//! roomy one that never dropped it: on the replay benchmark, the `seed` policy's evictions at
//! 8k set the protection the `worldfs` policy's 8k projection then used. Kept here, each
//! requester learns from what it did, and a selection touches the world's entries only for
//! what it keeps and what it stops keeping, not for the thousands it leaves out every time.

use std::path::{Path, PathBuf};

use super::path_map::PathMap;

/// A count per path, as saved.
pub(crate) type Counts = Vec<(PathBuf, u16)>;

/// What one requester's selections taught the thrash guard, by path.
#[derive(Debug, Default, Clone)]
pub(crate) struct Thrash {
    /// Agent reads of an entry that this requester's previous selection had left out.
    rereads: PathMap<u16>,
    /// Times this requester stopped keeping an entry it had kept.
    evictions: PathMap<u16>,
}

impl Thrash {
    /// Counts a read of `path` that came after this requester's selection left it out (at most
    /// once per selection: the next one sees it again).
    pub fn reread(&mut self, path: &Path) -> u16 {
        let n = self.rereads.get_mut_or_insert_with(path, || 0);
        *n = n.saturating_add(1);
        *n
    }

    /// Counts that the requester's selection dropped `path` after keeping it.
    pub fn evicted(&mut self, path: &Path) {
        let n = self.evictions.get_mut_or_insert_with(path, || 0);
        *n = n.saturating_add(1);
    }

    pub fn rereads(&self, path: &Path) -> u16 {
        self.rereads.get(path).copied().unwrap_or(0)
    }

    pub fn evictions(&self, path: &Path) -> u16 {
        self.evictions.get(path).copied().unwrap_or(0)
    }

    /// The counts, to save: (rereads, evictions) by path.
    pub fn counts(&self) -> (Counts, Counts) {
        let all = |m: &PathMap<u16>| m.iter().map(|(p, &n)| (p.to_path_buf(), n)).collect();
        (all(&self.rereads), all(&self.evictions))
    }

    /// A guard that has learnt the saved `counts`.
    pub fn from_counts(rereads: Counts, evictions: Counts) -> Thrash {
        let map = |v: Counts| v.iter().map(|(p, n)| (p.as_path(), *n)).collect();
        Thrash {
            rereads: map(rereads),
            evictions: map(evictions),
        }
    }

    /// Forgets what is known of paths `live` no longer holds, so a long session's memory stays
    /// the size of its world.
    pub fn retain(&mut self, live: impl Fn(&Path) -> bool) {
        self.rereads.retain(|p, _| live(p));
        self.evictions.retain(|p, _| live(p));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_per_path_and_forgotten_with_the_path() {
        let mut t = Thrash::default();
        assert_eq!(t.reread(Path::new("a")), 1);
        assert_eq!(t.reread(Path::new("a")), 2);
        t.evicted(Path::new("b"));
        assert_eq!(
            (t.rereads(Path::new("a")), t.rereads(Path::new("b"))),
            (2, 0)
        );
        assert_eq!(
            (t.evictions(Path::new("a")), t.evictions(Path::new("b"))),
            (0, 1)
        );
        t.retain(|p| p != Path::new("a"));
        assert_eq!(
            (t.rereads(Path::new("a")), t.evictions(Path::new("b"))),
            (0, 1)
        );
    }
}
