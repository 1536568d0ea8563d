//! Commands a client said it is about to run (`command.begin`), waiting for their output
//! (`command.record` with `begun`).
//!
//! A hook-driven harness runs one process per event: the one that sees a command start is gone
//! when another sees it end, so the start (the world's last sequence number then) is kept here,
//! under a key the client chooses (Claude Code's `tool_use_id`). A start whose end never comes
//! (the user denied the command, the hook for the end is not installed) must not pile up: only
//! the most recent [`MAX_OPEN`] are kept.

use std::collections::{HashMap, VecDeque};

use parking_lot::Mutex;

/// Starts kept at once; beyond this the oldest is forgotten.
pub const MAX_OPEN: usize = 1024;
/// Longest key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 256;

#[derive(Debug, Default)]
pub struct Begun {
    open: Mutex<Open>,
}

#[derive(Debug, Default)]
struct Open {
    seq: HashMap<String, u64>,
    /// Keys, oldest first (a key begun again moves to the back).
    order: VecDeque<String>,
}

impl Begun {
    /// Notes that the command `key` starts after observation `seq`. Beginning a key again
    /// restarts it.
    pub fn begin(&self, key: &str, seq: u64) {
        let mut o = self.open.lock();
        if o.seq.insert(key.to_owned(), seq).is_some() {
            o.order.retain(|k| k != key);
        }
        o.order.push_back(key.to_owned());
        while o.order.len() > MAX_OPEN {
            if let Some(old) = o.order.pop_front() {
                o.seq.remove(&old);
            }
        }
    }

    /// The start of `key`, forgotten as it is returned: an output is recorded once.
    pub fn take(&self, key: &str) -> Option<u64> {
        let mut o = self.open.lock();
        let seq = o.seq.remove(key)?;
        o.order.retain(|k| k != key);
        Some(seq)
    }

    /// Starts waiting for their output.
    pub fn len(&self) -> usize {
        self.open.lock().seq.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_is_taken_once() {
        let b = Begun::default();
        b.begin("toolu_1", 7);
        assert_eq!(b.take("toolu_1"), Some(7));
        assert_eq!(b.take("toolu_1"), None);
        assert!(b.is_empty());
    }

    #[test]
    fn beginning_again_restarts_and_keeps_one() {
        let b = Begun::default();
        b.begin("k", 1);
        b.begin("k", 5);
        assert_eq!(b.len(), 1);
        assert_eq!(b.take("k"), Some(5));
    }

    #[test]
    fn only_the_most_recent_starts_are_kept() {
        let b = Begun::default();
        for i in 0..(MAX_OPEN as u64 + 10) {
            b.begin(&format!("k{i}"), i);
        }
        assert_eq!(b.len(), MAX_OPEN);
        assert_eq!(b.take("k0"), None, "the oldest went first");
        assert_eq!(b.take("k9"), None);
        assert_eq!(b.take("k10"), Some(10));
        let last = MAX_OPEN as u64 + 9;
        assert_eq!(b.take(&format!("k{last}")), Some(last));
    }

    #[test]
    fn a_restarted_key_is_not_evicted_by_its_old_place() {
        let b = Begun::default();
        b.begin("early", 0);
        for i in 1..MAX_OPEN as u64 {
            b.begin(&format!("k{i}"), i);
        }
        b.begin("early", 99); // moves to the back
        b.begin("one more", 100); // evicts k1, not "early"
        assert_eq!(b.take("early"), Some(99));
        assert_eq!(b.take("k1"), None);
    }
}
