//! Plain LRU: pinned entries first, then the most recently used entries, whole, until the next
//! one does not fit; that one and everything older is evicted. Nothing is shortened to ranges and
//! nothing older is squeezed in behind a miss, which is what makes it the honest baseline.

use super::{Candidate, EvictReason, Packer, Policy, Selection};

#[derive(Debug, Clone, Copy, Default)]
pub struct Lru;

impl Policy for Lru {
    fn name(&self) -> &'static str {
        "lru"
    }

    fn select(&self, candidates: &[Candidate], budget: u64) -> Selection {
        let mut p = Packer::new(candidates, budget);
        let mut order: Vec<usize> = (0..candidates.len()).collect();
        order.sort_by_key(|&i| {
            (
                !candidates[i].pinned,
                std::cmp::Reverse(candidates[i].last_seq),
            )
        });
        let mut full = false;
        for i in order {
            let c = &candidates[i];
            if c.pinned {
                p.offer(i, [c.whole()]);
            } else if full {
                p.evict(i, EvictReason::OverBudget);
            } else {
                full = !p.offer(i, [c.whole()]);
            }
        }
        p.finish(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{cand, kept_paths};
    use super::*;

    #[test]
    fn keeps_a_recency_prefix() {
        let cands = vec![
            cand("oldest", 10, 5, 1),
            cand("old", 500, 3, 2),
            cand("new", 400, 0, 3),
            cand("newest", 300, 0, 4),
        ];
        let s = Lru.select(&cands, 800);
        // "old" does not fit after newest+new; "oldest" would, but LRU does not skip ahead.
        assert_eq!(kept_paths(&s), vec!["newest", "new"]);
        assert_eq!(s.evicted.len(), 2);
    }

    #[test]
    fn pins_first() {
        let mut pinned = cand("pinned", 500, 9, 1);
        pinned.pinned = true;
        let s = Lru.select(&[cand("new", 400, 0, 9), pinned], 800);
        assert_eq!(kept_paths(&s), vec!["pinned"]);
    }
}
