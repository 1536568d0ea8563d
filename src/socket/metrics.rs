//! What the socket reports in `stats`: request latencies per method, and the token accounting
//! that shows what the projection saves over a growing history.
//!
//! Everything is a relaxed atomic: recording must not serialize concurrent requests (the
//! benchmark runs 16 clients), and a report that is a few increments out of date is fine.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::Serialize;

/// Sub-buckets per power of two: quantiles are accurate to about 1/8 (12%).
const SUB: u32 = 8;
/// Powers of two covered, in microseconds: 1 µs .. ~18 minutes.
const OCTAVES: u32 = 30;
const BUCKETS: usize = (SUB * OCTAVES) as usize;

/// A lock-free log-scale histogram of durations.
pub struct Histogram {
    buckets: Box<[AtomicU64]>,
    count: AtomicU64,
    sum_us: AtomicU64,
    max_us: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Self {
            buckets: (0..BUCKETS).map(|_| AtomicU64::new(0)).collect(),
            count: AtomicU64::new(0),
            sum_us: AtomicU64::new(0),
            max_us: AtomicU64::new(0),
        }
    }
}

fn bucket_of(us: u64) -> usize {
    if us < u64::from(SUB) {
        return us as usize;
    }
    let octave = 63 - us.leading_zeros(); // >= 3
    let shift = octave - SUB.trailing_zeros();
    let sub = ((us >> shift) as u32) & (SUB - 1);
    let idx = (octave - SUB.trailing_zeros() + 1) * SUB + sub;
    (idx as usize).min(BUCKETS - 1)
}

/// The largest value that lands in bucket `idx` (what quantiles report: an upper bound).
fn bucket_top(idx: usize) -> u64 {
    let idx = idx as u32;
    if idx < SUB {
        return u64::from(idx);
    }
    let shift = idx / SUB - 1;
    let sub = u64::from(idx % SUB);
    ((u64::from(SUB) + sub + 1) << shift) - 1
}

/// Quantiles of a histogram, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Quantiles {
    pub count: u64,
    pub p50_us: u64,
    pub p90_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    pub mean_us: u64,
}

impl Histogram {
    pub fn record(&self, d: Duration) {
        let us = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        self.buckets[bucket_of(us)].fetch_add(1, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.max_us.fetch_max(us, Ordering::Relaxed);
    }

    pub fn quantiles(&self) -> Quantiles {
        let counts: Vec<u64> = self
            .buckets
            .iter()
            .map(|b| b.load(Ordering::Relaxed))
            .collect();
        let total: u64 = counts.iter().sum();
        let max = self.max_us.load(Ordering::Relaxed);
        let at = |q: f64| -> u64 {
            if total == 0 {
                return 0;
            }
            let rank = ((total as f64) * q).ceil().max(1.0) as u64;
            let mut seen = 0;
            for (i, c) in counts.iter().enumerate() {
                seen += c;
                if seen >= rank {
                    return bucket_top(i).min(max);
                }
            }
            max
        };
        Quantiles {
            count: total,
            p50_us: at(0.50),
            p90_us: at(0.90),
            p99_us: at(0.99),
            max_us: max,
            mean_us: self
                .sum_us
                .load(Ordering::Relaxed)
                .checked_div(total)
                .unwrap_or(0),
        }
    }
}

/// Token accounting: what the harness would have sent with a growing transcript, against what
/// the projections cost.
#[derive(Debug, Default)]
pub struct TokenAccount {
    /// Current size of the transcript a history-keeping harness would hold: every recorded
    /// step (call, result, assistant text) and command output adds its tokens.
    history: AtomicU64,
    /// Sum over projection requests of `history` at that moment: what resending the whole
    /// transcript each time would have cost.
    history_sent: AtomicU64,
    projection_sent: AtomicU64,
    projections: AtomicU64,
    last_projection: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct TokenReport {
    pub history_tokens: u64,
    pub history_tokens_sent_total: u64,
    pub projection_tokens_sent_total: u64,
    pub projections: u64,
    pub last_projection_tokens: u64,
    /// projection_sent / history_sent (lower is better); `None` before any projection.
    pub ratio: Option<f64>,
}

impl TokenAccount {
    pub fn add_history(&self, tokens: u64) {
        self.history.fetch_add(tokens, Ordering::Relaxed);
    }

    pub fn projection(&self, tokens: u64) {
        let h = self.history.load(Ordering::Relaxed);
        self.history_sent.fetch_add(h, Ordering::Relaxed);
        self.projection_sent.fetch_add(tokens, Ordering::Relaxed);
        self.projections.fetch_add(1, Ordering::Relaxed);
        self.last_projection.store(tokens, Ordering::Relaxed);
    }

    pub fn report(&self) -> TokenReport {
        let hs = self.history_sent.load(Ordering::Relaxed);
        let ps = self.projection_sent.load(Ordering::Relaxed);
        TokenReport {
            history_tokens: self.history.load(Ordering::Relaxed),
            history_tokens_sent_total: hs,
            projection_tokens_sent_total: ps,
            projections: self.projections.load(Ordering::Relaxed),
            last_projection_tokens: self.last_projection.load(Ordering::Relaxed),
            ratio: (hs > 0).then(|| ps as f64 / hs as f64),
        }
    }
}

/// What `worldfs proxy` reported of the model calls it took from the session's main
/// conversation (`proxy.record`): the messages as the client sent them against the messages sent
/// upstream, in tokens. The system prompt and tools are sent either way, so are not counted.
#[derive(Debug, Default)]
pub struct ProxyAccount {
    calls: AtomicU64,
    rewritten: AtomicU64,
    history: AtomicU64,
    sent: AtomicU64,
    last_history: AtomicU64,
    last_sent: AtomicU64,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct ProxyReport {
    pub calls: u64,
    /// Calls sent with the projection (the others were observed: `--observe`).
    pub rewritten: u64,
    pub history_tokens_total: u64,
    pub sent_tokens_total: u64,
    pub last_history_tokens: u64,
    pub last_sent_tokens: u64,
    /// sent / history over every call (lower is better); `None` before any call.
    pub ratio: Option<f64>,
}

impl ProxyAccount {
    pub fn record(&self, history: u64, sent: u64, rewritten: bool) {
        self.calls.fetch_add(1, Ordering::Relaxed);
        if rewritten {
            self.rewritten.fetch_add(1, Ordering::Relaxed);
        }
        self.history.fetch_add(history, Ordering::Relaxed);
        self.sent.fetch_add(sent, Ordering::Relaxed);
        self.last_history.store(history, Ordering::Relaxed);
        self.last_sent.store(sent, Ordering::Relaxed);
    }

    pub fn report(&self) -> ProxyReport {
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let (h, s) = (get(&self.history), get(&self.sent));
        ProxyReport {
            calls: get(&self.calls),
            rewritten: get(&self.rewritten),
            history_tokens_total: h,
            sent_tokens_total: s,
            last_history_tokens: get(&self.last_history),
            last_sent_tokens: get(&self.last_sent),
            ratio: (h > 0).then(|| s as f64 / h as f64),
        }
    }
}

/// o200k tokens of `text`; a rough estimate if the tokenizer is unavailable (stats only).
pub fn count_tokens(text: &str) -> u64 {
    crate::world::tokens::count_uncached(text.as_bytes())
        .map(u64::from)
        .unwrap_or_else(|_| (text.len() as u64).div_ceil(4))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_monotonic_and_tops_contain_values() {
        let mut last = 0;
        for us in (0..100_000u64).step_by(7).chain([u64::MAX / 2, u64::MAX]) {
            let b = bucket_of(us);
            assert!(b >= last, "{us}");
            last = b;
            if b < BUCKETS - 1 {
                assert!(
                    bucket_top(b) >= us,
                    "{us} -> bucket {b} top {}",
                    bucket_top(b)
                );
                assert!(
                    bucket_top(b) <= us + us / 4 + 1,
                    "{us} -> top {}",
                    bucket_top(b)
                );
            }
        }
    }

    #[test]
    fn quantiles_within_resolution() {
        let h = Histogram::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let q = h.quantiles();
        assert_eq!(q.count, 1000);
        assert!((500..=570).contains(&q.p50_us), "{q:?}");
        assert!((990..=1000).contains(&q.p99_us), "{q:?}");
        assert_eq!(q.max_us, 1000);
        assert_eq!(Histogram::default().quantiles(), Quantiles::default());
    }

    #[test]
    fn token_account_compares_history_with_projections() {
        let t = TokenAccount::default();
        t.add_history(100);
        t.projection(40);
        t.add_history(100);
        t.projection(50);
        let r = t.report();
        assert_eq!(r.history_tokens_sent_total, 300);
        assert_eq!(r.projection_tokens_sent_total, 90);
        assert_eq!(r.ratio, Some(0.3));
    }
}
