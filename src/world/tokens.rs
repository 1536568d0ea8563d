//! Token counts with tiktoken's `o200k_base`, memoized by content hash.
//!
//! The counter (`bpe`) is built once, on first use, and shared by every world in the process.
//! Counting never happens on file-system threads: the ingest thread counts when idle, and
//! projections count what is still missing.

use std::collections::{HashMap, VecDeque};
use std::sync::OnceLock;

use parking_lot::Mutex;

use super::bpe::Bpe;

#[derive(Debug, Clone, thiserror::Error)]
#[error("cannot count o200k_base tokens: {0}")]
pub struct TokenizerError(String);

fn bpe() -> Result<&'static Bpe, TokenizerError> {
    static BPE: OnceLock<Result<Bpe, String>> = OnceLock::new();
    BPE.get_or_init(Bpe::o200k_base)
        .as_ref()
        .map_err(|e| TokenizerError(e.clone()))
}

/// Builds the counter on a thread of its own, so that the first file to enter the world does not
/// wait for it: building it (200,000 tokens and a large regex) stalls the ingest thread for a
/// while, which also leaves the processes behind the observations queued meanwhile time to exit
/// before the world looks them up. Called when a live world starts ingesting; counting before it
/// is done waits for it, as it would have anyway.
pub fn warm_in_background() {
    // Once per process: every world shares the counter (a replay starts dozens).
    static STARTED: std::sync::Once = std::sync::Once::new();
    STARTED.call_once(spawn_warm_up);
}

fn spawn_warm_up() {
    let spawned = std::thread::Builder::new()
        .name("worldfs-tokenizer".into())
        .spawn(|| {
            let t = std::time::Instant::now();
            match bpe() {
                Ok(_) => tracing::debug!(elapsed = ?t.elapsed(), "o200k_base counter built"),
                Err(e) => tracing::warn!("{e}"),
            }
        });
    if let Err(e) = spawned {
        // Then the first count builds it, as before.
        tracing::debug!("no thread to build the token counter ahead: {e}");
    }
}

/// Counts `text` (lossily decoded as UTF-8) without any memo.
pub fn count_uncached(text: &[u8]) -> Result<u32, TokenizerError> {
    let s = String::from_utf8_lossy(text);
    let n = bpe()?.count(&s).map_err(TokenizerError)?;
    Ok(u32::try_from(n).unwrap_or(u32::MAX))
}

/// Short memo key: 128 bits of the blake3 hash are plenty to tell contents apart.
fn key(hash: &[u8; 32]) -> u128 {
    let mut k = [0u8; 16];
    k.copy_from_slice(&hash[..16]);
    u128::from_le_bytes(k)
}

/// Token counts by content hash, bounded; the oldest counts go first.
pub struct TokenCounter {
    capacity: usize,
    memo: Mutex<Memo>,
}

#[derive(Default)]
struct Memo {
    counts: HashMap<u128, u32>,
    order: VecDeque<u128>,
    hits: u64,
    misses: u64,
}

impl TokenCounter {
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            memo: Mutex::new(Memo::default()),
        }
    }

    /// The count for `text`, whose blake3 hash is `hash`.
    pub fn count(&self, hash: &[u8; 32], text: &[u8]) -> Result<u32, TokenizerError> {
        let k = key(hash);
        {
            let mut m = self.memo.lock();
            if let Some(n) = m.counts.get(&k).copied() {
                m.hits += 1;
                return Ok(n);
            }
            m.misses += 1;
        }
        // Counted outside the lock: a big file must not stall other lookups.
        let n = count_uncached(text)?;
        let mut m = self.memo.lock();
        if m.counts.insert(k, n).is_none() {
            m.order.push_back(k);
            while m.order.len() > self.capacity {
                if let Some(old) = m.order.pop_front() {
                    m.counts.remove(&old);
                }
            }
        }
        Ok(n)
    }

    /// (hits, misses) so far.
    pub fn hit_rate(&self) -> (u64, u64) {
        let m = self.memo.lock();
        (m.hits, m.misses)
    }

    pub fn len(&self) -> usize {
        self.memo.lock().counts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Hashes `bytes` with blake3.
pub fn hash(bytes: &[u8]) -> [u8; 32] {
    *blake3::hash(bytes).as_bytes()
}

/// Tokens of `part` bytes out of a `whole`-byte content counted at `whole_tokens`, rounded up;
/// used for byte ranges, whose exact count would need reading them.
pub fn estimate_part(whole_tokens: u32, whole: u64, part: u64) -> u32 {
    if whole == 0 {
        return 0;
    }
    let est = (u128::from(whole_tokens) * u128::from(part.min(whole))).div_ceil(u128::from(whole));
    u32::try_from(est).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_memoizes() {
        let t = TokenCounter::new(2);
        let text = b"fn main() { println!(\"hello world\"); }";
        let h = hash(text);
        let n = t.count(&h, text).unwrap_or_else(|e| panic!("{e}"));
        assert!(n > 5 && n < 30, "{n}");
        // Same hash, different bytes: the memo answers without recounting, proving it was used.
        assert_eq!(t.count(&h, b"").ok(), Some(n));
        assert_eq!(t.hit_rate(), (1, 1));
    }

    #[test]
    fn memo_is_bounded() {
        let t = TokenCounter::new(2);
        for s in [&b"a"[..], b"b b", b"c c c"] {
            let _ = t.count(&hash(s), s);
        }
        assert_eq!(t.len(), 2);
        // The oldest ("a") was forgotten: asking again is a miss.
        let _ = t.count(&hash(b"a"), b"a");
        assert_eq!(t.hit_rate(), (0, 4));
    }

    #[test]
    fn empty_and_non_utf8() {
        assert_eq!(count_uncached(b"").ok(), Some(0));
        assert!(count_uncached(&[0xff, 0xfe, b'a']).is_ok_and(|n| n > 0));
    }

    #[test]
    fn part_estimates() {
        assert_eq!(estimate_part(100, 1000, 100), 10);
        assert_eq!(estimate_part(100, 1000, 101), 11);
        assert_eq!(estimate_part(100, 1000, 5000), 100);
        assert_eq!(estimate_part(100, 0, 10), 0);
    }
}
