//! The worldfs policy.
//!
//! It fills the budget in four tiers. (1) Pinned entries. (2) What the agent wrote: its own
//! edits are the part of the world it is most certain to need again and least able to
//! re-derive. (3) Thrash-protected entries: a file that was evicted and then read again proved
//! the eviction wrong, so it is protected for 2^k turns after its k-th such re-read (2, 4, 8...
//! turns), which breaks the evict/re-read cycle that plain LRU falls into under a tight budget.
//! (4) Everything else by value per token, where value is `(1 + log2(1 + reads) + 0.25 *
//! log2(1 + weak_reads)) * 0.75^age_in_turns`: re-read entries are worth more, stale ones fade,
//! and cheap entries win ties against expensive ones. Within tiers 1–3 the most recent goes first.
//! Big files (over `big_file_tokens`) that the agent read only partly are shown as the ranges it
//! read; any entry that does not fit whole falls back to its ranges before being evicted.

use super::{Candidate, Form, Packer, Policy, Selection};

#[derive(Debug, Clone, Copy)]
pub struct Worldfs {
    /// Above this, a partly read file is shown as its ranges even when the whole would fit.
    pub big_file_tokens: u32,
}

impl Default for Worldfs {
    fn default() -> Self {
        Self {
            big_file_tokens: 1500,
        }
    }
}

/// Longest thrash protection, in doublings (2^6 = 64 turns).
const MAX_PROTECTION_DOUBLINGS: u16 = 6;
const DECAY_PER_TURN: f64 = 0.75;

impl Worldfs {
    pub fn new(big_file_tokens: u32) -> Self {
        Self { big_file_tokens }
    }

    fn tier(c: &Candidate) -> u8 {
        if c.pinned {
            0
        } else if c.agent_wrote {
            1
        } else if Self::thrash_protected(c) {
            2
        } else {
            3
        }
    }

    fn thrash_protected(c: &Candidate) -> bool {
        let k = c.rereads_after_eviction.min(MAX_PROTECTION_DOUBLINGS);
        k > 0 && c.age_turns < (1u64 << k)
    }

    fn value(c: &Candidate) -> f64 {
        let reads = 1.0 + f64::from(c.reads).ln_1p() / std::f64::consts::LN_2;
        let weak = 0.25 * f64::from(c.weak_reads).ln_1p() / std::f64::consts::LN_2;
        let age = i32::try_from(c.age_turns).unwrap_or(i32::MAX);
        (reads + weak) * DECAY_PER_TURN.powi(age)
    }

    /// Forms to try, preferred first.
    fn forms(&self, c: &Candidate) -> Vec<(Form, u32)> {
        let whole = c.whole();
        match c.partial() {
            Some(part) if c.whole_tokens > self.big_file_tokens => vec![part, whole],
            Some(part) => vec![whole, part],
            None => vec![whole],
        }
    }

    /// Cost of the preferred form, for value density.
    fn cost(&self, c: &Candidate) -> u32 {
        self.forms(c).first().map_or(c.whole_tokens, |f| f.1).max(1)
    }
}

impl Policy for Worldfs {
    fn name(&self) -> &'static str {
        "worldfs"
    }

    fn select(&self, candidates: &[Candidate], budget: u64) -> Selection {
        let mut p = Packer::new(candidates, budget);
        let mut order: Vec<(u8, f64, u64, usize)> = candidates
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let tier = Self::tier(c);
                // Tiers 0-2 go by recency alone; tier 3 by value density.
                let density = if tier < 3 {
                    0.0
                } else {
                    Self::value(c) / f64::from(self.cost(c))
                };
                (tier, density, c.last_seq, i)
            })
            .collect();
        order.sort_by(|a, b| {
            a.0.cmp(&b.0)
                .then(b.1.total_cmp(&a.1))
                .then(b.2.cmp(&a.2))
                .then(a.3.cmp(&b.3))
        });
        for (_, _, _, i) in order {
            let forms = self.forms(&candidates[i]);
            p.offer(i, forms);
        }
        p.finish(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{cand, kept_paths};
    use super::super::{Form, Lru, Seed};
    use super::*;
    use crate::world::ranges::ByteRange;

    #[test]
    fn agent_writes_beat_reads() {
        let mut wrote = cand("wrote", 500, 5, 1);
        wrote.agent_wrote = true;
        let s = Worldfs::default().select(&[cand("read", 500, 0, 9), wrote], 600);
        assert_eq!(kept_paths(&s), vec!["wrote"]);
    }

    #[test]
    fn big_partly_read_files_show_ranges() {
        let mut big = cand("big", 10_000, 0, 1);
        big.ranges = Some((vec![ByteRange::at(0, 4000)], 900));
        let s = Worldfs::default().select(&[big.clone()], 50_000);
        assert_eq!(
            s.kept.first().map(|k| &k.form),
            Some(&Form::Ranges(vec![ByteRange::at(0, 4000)]))
        );
        // A small partly read file is shown whole when it fits, as its ranges when it does not.
        let mut small = cand("small", 1000, 0, 1);
        small.ranges = Some((vec![ByteRange::at(0, 100)], 100));
        let s = Worldfs::default().select(&[small.clone()], 5000);
        assert_eq!(s.kept.first().map(|k| &k.form), Some(&Form::Whole));
        let s = Worldfs::default().select(&[small], 500);
        assert_eq!(s.kept.first().map(|k| k.tokens), Some(100));
    }

    #[test]
    fn re_read_beats_read_once_at_same_age_and_cost() {
        let mut twice = cand("twice", 500, 1, 1);
        twice.reads = 4;
        let s = Worldfs::default().select(&[cand("once", 500, 1, 2), twice], 600);
        assert_eq!(kept_paths(&s), vec!["twice"]);
    }

    #[test]
    fn thrash_protection_grows_with_re_reads() {
        let mut t = cand("thrash", 500, 3, 1);
        t.rereads_after_eviction = 1; // protected for 2 turns: expired at age 3
        assert_eq!(Worldfs::tier(&t), 3);
        t.rereads_after_eviction = 2; // protected for 4 turns
        assert_eq!(Worldfs::tier(&t), 2);
        let s = Worldfs::default().select(&[cand("fresh", 500, 0, 9), t], 600);
        assert_eq!(kept_paths(&s), vec!["thrash"]);
    }

    /// A file re-read every turn under a budget that holds it but not also the steady stream of
    /// one-off reads: LRU drops it whenever a newer read crowds it out; worldfs, after seeing it
    /// re-read after an eviction, keeps it.
    #[test]
    fn beats_lru_and_seed_on_a_thrash_loop() {
        let policies: [&dyn Policy; 3] = [&Worldfs::default(), &Lru, &Seed];
        let mut misses = [0u32; 3];
        for (pi, policy) in policies.iter().enumerate() {
            let mut hot = cand("hot", 3000, 0, 0);
            for turn in 1..30u64 {
                // The agent needs "hot" this turn: a miss if the last projection lacked it.
                let noise: Vec<Candidate> = (0..3)
                    .map(|k| cand(&format!("noise{turn}-{k}"), 1500, 0, turn * 10 + k + 1))
                    .collect();
                let mut all = noise;
                hot.age_turns = turn.saturating_sub(hot.last_seq / 10);
                all.push(hot.clone());
                let s = policy.select(&all, 6000);
                let kept = s.kept.iter().any(|k| k.path.as_os_str() == "hot");
                if !kept {
                    misses[pi] += 1;
                    hot.evictions += 1;
                    hot.rereads_after_eviction += 1;
                    hot.reads += 1;
                    hot.last_seq = turn * 10 + 9;
                    hot.age_turns = 0;
                }
            }
        }
        assert!(
            misses[0] < misses[1],
            "worldfs {} vs lru {}",
            misses[0],
            misses[1]
        );
        assert!(
            misses[0] < misses[2],
            "worldfs {} vs seed {}",
            misses[0],
            misses[2]
        );
    }
}
