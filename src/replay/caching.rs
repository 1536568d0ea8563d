//! A simulation of Anthropic prompt caching, to bill a sequence of requests.
//!
//! The model (docs/replay.md has the sources and the simplifications):
//! - A request is a sequence of blocks (tools, system, message content blocks). A cache entry is
//!   a prefix ending at a block that carried a `cache_control` breakpoint in an earlier request.
//! - For each breakpoint of a request, the API looks for the longest cached prefix ending at
//!   that block or at one of the 20 blocks before it, matched byte for byte (here: a chained
//!   blake3 hash of the block texts). The longest hit over all breakpoints is read.
//! - Prefixes shorter than [`MIN_CACHEABLE`] tokens are never cached.
//! - Billing: cache reads at 0.1x, the tokens from the hit up to the last breakpoint are written
//!   at 1.25x, everything after the last breakpoint at 1x. Entries do not expire (the replay
//!   has no clock; real runs call the model within the 5-minute TTL). The same requests with
//!   hour-long breakpoints (Claude Code's on a subscription) write at 2x: [`Bill::hour_billed`].

use std::collections::{HashMap, HashSet};

use serde::Serialize;

use super::context::Block;

pub const MIN_CACHEABLE: u64 = 1024;
pub const LOOKBACK: usize = 20;
pub const READ_RATE: f64 = 0.1;
pub const WRITE_RATE: f64 = 1.25;
/// What a cache write costs when the breakpoint is kept an hour.
pub const HOUR_WRITE_RATE: f64 = 2.0;

#[derive(Debug, Clone, Copy, Default, Serialize, PartialEq)]
pub struct Bill {
    pub uncached: u64,
    pub cache_write: u64,
    pub cache_read: u64,
    /// uncached + 1.25 write + 0.1 read, in input-token equivalents.
    pub billed: f64,
    /// Of the tokens not read from the cache (written or uncached), those in blocks this
    /// requester had already sent, byte for byte, in an earlier request: content it pays for
    /// again because something before it changed, not new content. A history, which only
    /// appends, sends nothing again.
    pub sent_again: u64,
}

impl Bill {
    /// These tokens, billed with five-minute breakpoints.
    pub fn new(uncached: u64, cache_write: u64, cache_read: u64) -> Bill {
        let mut bill = Bill {
            uncached,
            cache_write,
            cache_read,
            billed: 0.0,
            sent_again: 0,
        };
        bill.billed = bill.priced(WRITE_RATE);
        bill
    }

    /// In input-token equivalents, with writes at `write_rate`.
    fn priced(&self, write_rate: f64) -> f64 {
        self.uncached as f64
            + write_rate * self.cache_write as f64
            + READ_RATE * self.cache_read as f64
    }

    /// The same tokens billed with hour-long breakpoints: within an hour nothing expires either,
    /// so only the price of a write differs.
    pub fn hour_billed(&self) -> f64 {
        self.priced(HOUR_WRITE_RATE)
    }
}

#[derive(Default)]
pub struct CacheSim {
    written: HashSet<[u8; 32]>,
    /// Per block text, the most times one earlier request carried it: the k-th copy of a text
    /// in a request was sent before only if an earlier request had k copies (a second identical
    /// empty output is new content, not the first one again).
    sent: HashMap<[u8; 32], u32>,
}

impl CacheSim {
    pub fn bill(&mut self, blocks: &[Block]) -> Bill {
        let mut texts = Vec::with_capacity(blocks.len());
        let mut chain = Vec::with_capacity(blocks.len());
        let mut cum = Vec::with_capacity(blocks.len());
        let mut h = [0u8; 32];
        let mut total = 0u64;
        for b in blocks {
            // the prefix up to a block: the one before it and this block's text, each a hash
            let text = *blake3::hash(b.text.as_bytes()).as_bytes();
            let mut hasher = blake3::Hasher::new();
            hasher.update(&h);
            hasher.update(&text);
            h = *hasher.finalize().as_bytes();
            total += b.tokens;
            texts.push(text);
            chain.push(h);
            cum.push(total);
        }
        let bps: Vec<usize> = (0..blocks.len())
            .filter(|&i| blocks[i].breakpoint)
            .collect();
        let mut hit: Option<usize> = None;
        for &b in &bps {
            for j in (b.saturating_sub(LOOKBACK)..=b).rev() {
                if self.written.contains(&chain[j]) {
                    if hit.is_none_or(|h| j > h) {
                        hit = Some(j);
                    }
                    break;
                }
            }
        }
        let read = hit.map(|j| cum[j]).unwrap_or(0);
        let last_bp = bps.last().copied();
        let write = match last_bp {
            Some(b) if cum[b] >= MIN_CACHEABLE && cum[b] > read => cum[b] - read,
            _ => 0,
        };
        for &b in &bps {
            if cum[b] >= MIN_CACHEABLE {
                self.written.insert(chain[b]);
            }
        }
        let mut copies: HashMap<[u8; 32], u32> = HashMap::new();
        let mut sent_again = 0;
        for (i, (b, text)) in blocks.iter().zip(&texts).enumerate() {
            let k = copies.entry(*text).or_default();
            *k += 1;
            // the hit ends on a block boundary: a block is read whole or not at all
            let unread = cum[i] - b.tokens >= read;
            if unread && self.sent.get(text).is_some_and(|n| *n >= *k) {
                sent_again += b.tokens;
            }
        }
        for (h, k) in copies {
            let n = self.sent.entry(h).or_default();
            *n = (*n).max(k);
        }
        Bill {
            sent_again,
            ..Bill::new(total - read - write, write, read)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blk(t: &str, tokens: u64, bp: bool) -> Block {
        Block {
            text: t.into(),
            tokens,
            breakpoint: bp,
            views: Vec::new(),
        }
    }

    #[test]
    fn growing_prefix_reads_what_was_written() {
        let mut c = CacheSim::default();
        let b1 = c.bill(&[blk("sys", 2000, true), blk("a", 100, true)]);
        assert_eq!((b1.cache_read, b1.cache_write, b1.uncached), (0, 2100, 0));
        let b2 = c.bill(&[
            blk("sys", 2000, true),
            blk("a", 100, false),
            blk("b", 50, true),
        ]);
        assert_eq!((b2.cache_read, b2.cache_write, b2.uncached), (2100, 50, 0));
        // a changed early block breaks the prefix after it
        let b3 = c.bill(&[
            blk("sys", 2000, true),
            blk("X", 100, false),
            blk("b", 50, true),
        ]);
        assert_eq!((b3.cache_read, b3.cache_write), (2000, 150));
        assert!((b3.billed - (2000.0 * 0.1 + 150.0 * 1.25)).abs() < 1e-9);
        assert!((b3.hour_billed() - (2000.0 * 0.1 + 150.0 * 2.0)).abs() < 1e-9);
        // "a" was sent before: written again after the change; "X" is new
        assert_eq!(b3.sent_again, 50);
        assert_eq!((b1.sent_again, b2.sent_again), (0, 0));
        // too small to cache
        let mut d = CacheSim::default();
        let s = d.bill(&[blk("x", 10, true)]);
        assert_eq!((s.cache_write, s.uncached), (0, 10));
    }

    #[test]
    fn a_second_copy_of_a_text_is_new_content_and_a_moved_one_is_sent_again() {
        let mut c = CacheSim::default();
        c.bill(&[
            blk("sys", 2000, true),
            blk("ok", 10, false),
            blk("f", 300, true),
        ]);
        // a history appends another identical output: nothing is sent again
        let b = c.bill(&[
            blk("sys", 2000, true),
            blk("ok", 10, false),
            blk("f", 300, true),
            blk("ok", 10, true),
        ]);
        assert_eq!((b.cache_read, b.sent_again), (2310, 0));
        // a projection that drops "ok" and keeps "f" after it writes "f" again
        let b = c.bill(&[
            blk("sys", 2000, true),
            blk("f", 300, false),
            blk("g", 40, true),
        ]);
        assert_eq!(
            (b.cache_read, b.cache_write, b.sent_again),
            (2000, 340, 300)
        );
    }
}
