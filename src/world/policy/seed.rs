//! The seed policy, as first specified: an entry goes when its token cost times its age in turns
//! exceeds the budget. Big files age out fast, small ones linger; an entry read this turn (age 0)
//! never ages out. What survives is then packed most-recent-first, so the budget always holds.
//! Pinned entries never age out and are packed first.

use super::{Candidate, EvictReason, Packer, Policy, Selection};

#[derive(Debug, Clone, Copy, Default)]
pub struct Seed;

impl Policy for Seed {
    fn name(&self) -> &'static str {
        "seed"
    }

    fn select(&self, candidates: &[Candidate], budget: u64) -> Selection {
        let mut p = Packer::new(candidates, budget);
        let mut order: Vec<usize> = Vec::with_capacity(candidates.len());
        for (i, c) in candidates.iter().enumerate() {
            let cost_times_age = u64::from(c.whole_tokens).saturating_mul(c.age_turns);
            if !c.pinned && cost_times_age > budget {
                p.evict(i, EvictReason::Aged { cost_times_age });
            } else {
                order.push(i);
            }
        }
        order.sort_by_key(|&i| {
            (
                !candidates[i].pinned,
                std::cmp::Reverse(candidates[i].last_seq),
            )
        });
        for i in order {
            p.offer(i, [candidates[i].whole()]);
        }
        p.finish(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{cand, kept_paths};
    use super::*;

    #[test]
    fn cost_times_age_over_budget_goes() {
        let cands = vec![
            cand("big-old", 600, 2, 1),   // 1200 > 1000: aged out
            cand("small-old", 100, 9, 2), // 900: stays
            cand("big-new", 900, 0, 3),   // 0: stays, but does not fit with the rest
        ];
        let s = Seed.select(&cands, 1000);
        assert_eq!(kept_paths(&s), vec!["big-new", "small-old"]);
        assert_eq!(s.total_tokens, 1000);
        assert_eq!(
            s.evicted
                .iter()
                .map(|e| (e.path.to_string_lossy().into_owned(), e.reason))
                .collect::<Vec<_>>(),
            vec![(
                "big-old".to_string(),
                EvictReason::Aged {
                    cost_times_age: 1200
                }
            )]
        );
    }

    #[test]
    fn pins_never_age_out() {
        let mut c = cand("pinned", 600, 50, 1);
        c.pinned = true;
        let s = Seed.select(&[c], 1000);
        assert_eq!(kept_paths(&s), vec!["pinned"]);
    }
}
