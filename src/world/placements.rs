//! Where each piece of a projection was placed the last time a requester asked, so the next
//! projection for the same requester keeps unchanged pieces where they were and appends the
//! rest: a prompt cache holds a prefix, so a piece that moves costs everything after it.
//!
//! The world only stores these records for the projection (keyed by the requester's layout:
//! policy, budget, format); it never reads them. They are bounded like the selection layouts:
//! requesters with ever new keys make the store forget everyone rather than grow.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use parking_lot::Mutex;

/// Layout keys remembered at once.
const MAX_KEYS: usize = 64;

/// One piece's place in the stream of a projection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Placement {
    /// Pieces sort by `(major, minor)`: `major` grows with every projection that placed new
    /// pieces, `minor` orders the pieces placed by one projection (by their own stamps).
    pub major: u64,
    pub minor: u64,
    /// World turn when the piece was placed.
    pub turn: u64,
    /// What the piece showed when placed: a changed piece is placed anew, at the end.
    pub fingerprint: u64,
}

/// Placements of one layout, by piece key (an entry's path, or a command output's key).
pub type Layout = HashMap<PathBuf, Placement>;

#[derive(Default)]
pub struct Placements {
    by_key: Mutex<HashMap<String, Arc<Layout>>>,
}

impl Placements {
    pub fn get(&self, key: &str) -> Option<Arc<Layout>> {
        self.by_key.lock().get(key).cloned()
    }

    pub fn set(&self, key: &str, layout: Layout) {
        let mut m = self.by_key.lock();
        if m.len() >= MAX_KEYS && !m.contains_key(key) {
            m.clear();
        }
        m.insert(key.to_owned(), Arc::new(layout));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stores_and_forgets_when_full() {
        let p = Placements::default();
        let place = Placement {
            major: 1,
            minor: 2,
            turn: 3,
            fingerprint: 4,
        };
        p.set("a", HashMap::from([(PathBuf::from("f"), place)]));
        assert_eq!(
            p.get("a").and_then(|l| l.get(&PathBuf::from("f")).copied()),
            Some(place)
        );
        for i in 0..MAX_KEYS {
            p.set(&format!("k{i}"), Layout::new());
        }
        assert!(
            p.get("a").is_none(),
            "a full store forgets rather than grows"
        );
        assert!(p.get(&format!("k{}", MAX_KEYS - 1)).is_some());
    }
}
