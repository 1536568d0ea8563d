//! Budgets and eviction: given what the world knows and a token budget, choose what a projection
//! shows.
//!
//! A policy sees [`Candidate`]s (costs, ages in turns, pins, reads, eviction history) and returns
//! a [`Selection`]: what is kept and in which form (whole, only the ranges read, or a one-line
//! notice for deleted/withheld entries), what was evicted and why, and the total. Every policy
//! guarantees `total_tokens <= budget` and considers pinned entries before unpinned ones.
//! Policies are pure: the world applies the bookkeeping (eviction counts) afterwards, so a replay
//! benchmark can run the same candidates through every policy.

mod lru;
mod seed;
mod worldfs;

use std::path::PathBuf;

use serde::Serialize;

pub use lru::Lru;
pub use seed::Seed;
pub use worldfs::Worldfs;

use super::entry::EntryKind;
use super::ranges::ByteRange;

/// Names accepted by [`by_name`], the default first.
pub const NAMES: &[&str] = &["worldfs", "seed", "lru"];

/// A policy by name, with default parameters.
pub fn by_name(name: &str) -> Option<Box<dyn Policy>> {
    match name {
        "worldfs" => Some(Box::new(Worldfs::default())),
        "seed" => Some(Box::new(Seed)),
        "lru" => Some(Box::new(Lru)),
        _ => None,
    }
}

pub trait Policy: Send + Sync {
    fn name(&self) -> &'static str;
    /// Chooses what fits in `budget` tokens. Every candidate ends up in exactly one of
    /// `kept`/`evicted`, and `total_tokens <= budget`.
    fn select(&self, candidates: &[Candidate], budget: u64) -> Selection;
    /// Whether `select` keeps candidates [`Candidate::in_last_step`] before any other (when
    /// they fit at all), so a projection may count them as shown when it sets its budget.
    fn keeps_last_step(&self) -> bool {
        false
    }
}

/// One entry as a policy sees it. Costs already include the projection's per-entry overhead.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Candidate {
    pub path: PathBuf,
    pub kind: EntryKind,
    /// Tokens to show the whole entry (for `notice_only`, the notice).
    pub whole_tokens: u32,
    /// The ranges the agent read and their estimated tokens, when it read only part of a file.
    pub ranges: Option<(Vec<ByteRange>, u32)>,
    /// The places the agent read most recently and their estimated tokens, when they are less
    /// than the whole file: what to show of a file too big to show whole.
    pub recent: Option<(Vec<ByteRange>, u32)>,
    /// The head of the place the agent read last and its estimated tokens, when that is less
    /// than every other form: what to show of a file that has room for nothing more.
    pub glance: Option<(Vec<ByteRange>, u32)>,
    /// What the previous projection (same budget and policy) showed of a file it showed in
    /// part (moved with its lines if the file changed since), with the places read since, and
    /// their estimated tokens; set only when that is more than [`Candidate::recent`]. Showing it
    /// keeps every part shown before and appends the new one, where the places read last alone
    /// would push an older part out, change the stream after it, and lose a place the agent may
    /// come back to.
    pub held: Option<(Vec<ByteRange>, u32)>,
    /// Deleted or withheld: only a one-line notice can be shown.
    pub notice_only: bool,
    pub age_turns: u64,
    /// Sequence number of the last access that counted: recency with a total order.
    pub last_seq: u64,
    pub pinned: bool,
    pub agent_wrote: bool,
    pub reads: u32,
    pub weak_reads: u32,
    /// Times this requester stopped keeping it after keeping it.
    pub evictions: u16,
    /// Agent reads of it that came after this requester's selection left it out: the thrash
    /// signal.
    pub rereads_after_eviction: u16,
    /// Sequence number of the last agent read (0: none, or not an entry).
    pub last_read_seq: u64,
    /// The form the previous projection with the same budget and policy showed it in, if it
    /// showed it.
    pub last_form: Option<Form>,
    /// Accessed or recorded since that projection.
    pub fresh: bool,
    /// Accessed or recorded since a projection with the same budget and policy last showed it
    /// (or never shown): what the agent last saw of it is not in the projection yet. Covers
    /// `fresh`, and also an entry evicted in the very projection that followed its read.
    pub unshown: bool,
    /// The last step's result shows lines of it and points at them instead of repeating them
    /// (see `projection::shown_once`): the projection counts on them being shown.
    pub in_last_step: bool,
}

impl Candidate {
    /// Something seen once by the agent, `age_turns` ago, never evicted, neither pinned nor
    /// written: the plain case the other fields refine.
    pub fn seen_once(
        path: PathBuf,
        kind: EntryKind,
        tokens: u32,
        age_turns: u64,
        seq: u64,
    ) -> Self {
        Candidate {
            path,
            kind,
            whole_tokens: tokens,
            ranges: None,
            recent: None,
            glance: None,
            held: None,
            notice_only: false,
            age_turns,
            last_seq: seq,
            pinned: false,
            agent_wrote: false,
            reads: 1,
            weak_reads: 0,
            evictions: 0,
            rereads_after_eviction: 0,
            last_read_seq: seq,
            last_form: None,
            fresh: false,
            unshown: false,
            in_last_step: false,
        }
    }

    /// Whether the previous projection with the same budget and policy showed it.
    pub fn shown_last(&self) -> bool {
        self.last_form.is_some()
    }

    /// The whole form and its cost.
    pub fn whole(&self) -> (Form, u32) {
        if self.notice_only {
            (Form::Notice, self.whole_tokens)
        } else {
            (Form::Whole, self.whole_tokens)
        }
    }

    /// The ranges form and its cost, if the agent read only part of the entry.
    pub fn partial(&self) -> Option<(Form, u32)> {
        self.ranges_form(self.ranges.as_ref())
    }

    /// The glance and its cost, if it is less than every other form.
    pub fn glance(&self) -> Option<(Form, u32)> {
        self.ranges_form(self.glance.as_ref())
    }

    /// What the previous projection showed with the places read since, and its cost.
    pub fn held_form(&self) -> Option<(Form, u32)> {
        self.ranges_form(self.held.as_ref())
    }

    /// The most recent views and their cost, if they are less than the whole entry.
    pub fn recent_views(&self) -> Option<(Form, u32)> {
        self.ranges_form(self.recent.as_ref())
    }

    /// Deleted and withheld entries have no content to show in part.
    fn ranges_form(&self, ranges: Option<&(Vec<ByteRange>, u32)>) -> Option<(Form, u32)> {
        if self.notice_only {
            return None;
        }
        ranges.map(|(r, t)| (Form::Ranges(r.clone()), *t))
    }
}

/// How a kept entry is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "form", content = "ranges")]
pub enum Form {
    Whole,
    Ranges(Vec<ByteRange>),
    /// A one-line "deleted"/"withheld" notice, no content.
    Notice,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Kept {
    pub path: PathBuf,
    pub form: Form,
    pub tokens: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "reason")]
pub enum EvictReason {
    /// Did not fit in what the budget had left.
    OverBudget,
    /// Seed policy: token cost times age in turns exceeded the budget.
    Aged { cost_times_age: u64 },
    /// Worldfs policy: its value faded below what a compaction brings back.
    Faded,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Evicted {
    pub path: PathBuf,
    pub reason: EvictReason,
    /// What the whole form would have cost.
    pub tokens: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Selection {
    pub policy: &'static str,
    pub budget: u64,
    pub kept: Vec<Kept>,
    pub evicted: Vec<Evicted>,
    pub total_tokens: u64,
}

/// Greedy packing shared by the policies: offer candidates in priority order, each with the forms
/// it may take in order of preference; the first that fits is kept.
pub(crate) struct Packer<'a> {
    cands: &'a [Candidate],
    budget: u64,
    used: u64,
    kept: Vec<Kept>,
    evicted: Vec<Evicted>,
}

impl<'a> Packer<'a> {
    pub(crate) fn new(cands: &'a [Candidate], budget: u64) -> Self {
        Self {
            cands,
            budget,
            used: 0,
            kept: Vec::new(),
            evicted: Vec::new(),
        }
    }

    pub(crate) fn remaining(&self) -> u64 {
        self.budget - self.used
    }

    /// Keeps candidate `i` in the first of `forms` that fits; evicts it as over budget otherwise.
    pub(crate) fn offer(&mut self, i: usize, forms: impl IntoIterator<Item = (Form, u32)>) -> bool {
        for (form, tokens) in forms {
            if u64::from(tokens) <= self.remaining() {
                self.used += u64::from(tokens);
                self.kept.push(Kept {
                    path: self.cands[i].path.clone(),
                    form,
                    tokens,
                });
                return true;
            }
        }
        self.evict(i, EvictReason::OverBudget);
        false
    }

    /// Lets later offers use up to `budget`, never less than what is already used.
    pub(crate) fn set_budget(&mut self, budget: u64) {
        self.budget = budget.max(self.used);
    }

    pub(crate) fn evict(&mut self, i: usize, reason: EvictReason) {
        self.evicted.push(Evicted {
            path: self.cands[i].path.clone(),
            reason,
            tokens: self.cands[i].whole_tokens,
        });
    }

    pub(crate) fn finish(self, policy: &'static str) -> Selection {
        Selection {
            policy,
            budget: self.budget,
            kept: self.kept,
            evicted: self.evicted,
            total_tokens: self.used,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashSet;

    pub(crate) fn cand(path: &str, tokens: u32, age: u64, seq: u64) -> Candidate {
        Candidate::seen_once(path.into(), EntryKind::File, tokens, age, seq)
    }

    pub(crate) fn kept_paths(s: &Selection) -> Vec<String> {
        s.kept
            .iter()
            .map(|k| k.path.to_string_lossy().into_owned())
            .collect()
    }

    fn arb_candidate(i: usize) -> impl Strategy<Value = Candidate> {
        (
            1u32..3000,
            0u64..20,
            0u64..1000,
            any::<bool>(),
            any::<bool>(),
            0u32..5,
            0u16..4,
            prop::option::of(1u32..500),
            prop::bool::weighted(0.1),
            prop::option::of(1u32..200),
        )
            .prop_map(
                move |(tokens, age, seq, pinned, wrote, reads, rereads, part, notice, glance)| {
                    let mut c = cand(&format!("f{i}"), tokens, age, seq);
                    c.pinned = pinned;
                    c.agent_wrote = wrote;
                    c.reads = reads;
                    c.rereads_after_eviction = rereads;
                    c.evictions = rereads;
                    c.ranges = part.map(|t| (vec![ByteRange::at(0, 10)], t.min(tokens)));
                    c.notice_only = notice;
                    let fuller = c.ranges.as_ref().map_or(tokens, |r| r.1.min(tokens));
                    c.glance = glance
                        .filter(|&t| t < fuller)
                        .map(|t| (vec![ByteRange::at(0, 5)], t));
                    c
                },
            )
    }

    fn arb_candidates() -> impl Strategy<Value = Vec<Candidate>> {
        (0usize..40).prop_flat_map(|n| (0..n).map(arb_candidate).collect::<Vec<_>>())
    }

    fn policies() -> Vec<Box<dyn Policy>> {
        NAMES.iter().filter_map(|n| by_name(n)).collect()
    }

    /// Cheapest form a policy may fall back to: worldfs uses ranges and glances, the others
    /// only whole.
    fn min_cost(policy: &str, c: &Candidate) -> u32 {
        let whole = c.whole().1;
        if policy != "worldfs" {
            return whole;
        }
        [c.partial(), worldfs::Worldfs::glance(c)]
            .into_iter()
            .flatten()
            .map(|(_, t)| t)
            .fold(whole, u32::min)
    }

    proptest! {
        #[test]
        fn never_exceeds_budget_and_accounts_for_everyone(cands in arb_candidates(), budget in 0u64..20_000) {
            for p in policies() {
                let s = p.select(&cands, budget);
                prop_assert!(s.total_tokens <= budget, "{}: {} > {}", p.name(), s.total_tokens, budget);
                prop_assert_eq!(s.total_tokens, s.kept.iter().map(|k| u64::from(k.tokens)).sum::<u64>());
                let mut seen = HashSet::new();
                for path in s.kept.iter().map(|k| &k.path).chain(s.evicted.iter().map(|e| &e.path)) {
                    prop_assert!(seen.insert(path.clone()), "{}: {:?} twice", p.name(), path);
                }
                prop_assert_eq!(seen.len(), cands.len());
            }
        }

        /// A protected entry (pinned; for worldfs also agent-written) is evicted only if even its
        /// cheapest form does not fit next to the protected entries that were kept: protected
        /// entries are never evicted to make room for unprotected ones.
        #[test]
        fn protected_entries_go_last(cands in arb_candidates(), budget in 0u64..20_000) {
            for p in policies() {
                let protected = |c: &Candidate| c.pinned || (p.name() == "worldfs" && c.agent_wrote);
                let s = p.select(&cands, budget);
                let by_path = |path: &PathBuf| cands.iter().find(|c| &c.path == path);
                let kept_protected: u64 = s.kept.iter()
                    .filter(|k| by_path(&k.path).is_some_and(&protected))
                    .map(|k| u64::from(k.tokens))
                    .sum();
                for e in &s.evicted {
                    let Some(c) = by_path(&e.path) else { continue };
                    if protected(c) {
                        prop_assert!(u64::from(min_cost(p.name(), c)) > budget - kept_protected,
                            "{}: evicted protected {:?} (cost {}) with {} of {} used by protected",
                            p.name(), c.path, min_cost(p.name(), c), kept_protected, budget);
                    }
                }
            }
        }
    }

    #[test]
    fn names_resolve() {
        for n in NAMES {
            assert_eq!(by_name(n).map(|p| p.name()), Some(*n));
        }
        assert!(by_name("fifo").is_none());
    }
}
