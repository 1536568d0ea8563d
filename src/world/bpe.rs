//! o200k_base token counts on one copy of tiktoken-rs's vocabulary.
//!
//! This is tiktoken-rs's `CoreBPE::encode_ordinary`, taken apart: its o200k_base pattern splits
//! the text, a piece in the vocabulary is one token, and any other piece is split by byte-pair
//! merges. `CoreBPE` holds the vocabulary three times over (an encoder map, a decoder map and a
//! sorted token list: 41 MiB, 52 MiB while it is built) where counting needs the encoder alone
//! (14 MiB). `build.rs` reads the vocabulary back out of tiktoken-rs's `CoreBPE` at build time,
//! and the encoder is built from those bytes. The tests check the counts against `CoreBPE`.

use std::collections::BinaryHeap;

use fancy_regex::Regex;
use rustc_hash::FxHashMap;
use tiktoken_rs::Rank;

/// tiktoken-rs's o200k_base vocabulary: per rank from 0, a little-endian `u16` length and the
/// token's bytes; length 0 for a rank the vocabulary does not use.
static VOCAB: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/o200k_base.vocab"));

/// Pieces this long or longer are merged with a heap, as tiktoken does: the simple merge is
/// quadratic in the piece's length.
const LARGE_PIECE: usize = 100;

/// What `encode_ordinary` needs: the split pattern and the rank of every token.
pub struct Bpe {
    pattern: Regex,
    /// Keyed as tiktoken-rs's merge functions expect.
    encoder: FxHashMap<Vec<u8>, Rank>,
}

impl Bpe {
    pub fn o200k_base() -> Result<Self, String> {
        let pattern = Regex::new(tiktoken_rs::O200K_BASE_PAT_STR).map_err(|e| e.to_string())?;
        let mut encoder = FxHashMap::with_capacity_and_hasher(200_000, Default::default());
        let mut rest = VOCAB;
        let mut rank: Rank = 0;
        while let [lo, hi, tail @ ..] = rest {
            let len = usize::from(u16::from_le_bytes([*lo, *hi]));
            let token = tail
                .get(..len)
                .ok_or_else(|| format!("the embedded vocabulary is cut short at rank {rank}"))?;
            if len > 0 {
                encoder.insert(token.to_vec(), rank);
            }
            rest = &tail[len..];
            rank += 1;
        }
        if encoder.len() < 199_000 {
            return Err(format!(
                "the embedded vocabulary has {} tokens, o200k_base has 199998",
                encoder.len()
            ));
        }
        Ok(Self { pattern, encoder })
    }

    /// `CoreBPE::encode_ordinary(text).len()`, without building the token list.
    pub fn count(&self, text: &str) -> Result<usize, String> {
        let mut n = 0;
        for piece in self.pattern.find_iter(text) {
            let piece = piece.map_err(|e| e.to_string())?.as_str().as_bytes();
            n += if self.encoder.contains_key(piece) {
                1
            } else if piece.len() < LARGE_PIECE {
                // Longer than one byte: every single byte is a token.
                tiktoken_rs::byte_pair_split(piece, &self.encoder).len()
            } else {
                self.count_large(piece)
            };
        }
        Ok(n)
    }

    /// The number of tokens tiktoken's `_byte_pair_merge_large` splits `piece` into (the same
    /// merges, in the same order; tiktoken-rs does not export it). Each position keeps where
    /// its token ends and the rank of merging it with the next one; the heap yields the
    /// lowest-ranked merge first, leftmost on ties, and stale heap entries are skipped.
    fn count_large(&self, piece: &[u8]) -> usize {
        #[derive(PartialEq, Eq)]
        struct Merge {
            start: usize,
            rank: Rank,
        }
        impl Ord for Merge {
            fn cmp(&self, other: &Self) -> std::cmp::Ordering {
                other
                    .rank
                    .cmp(&self.rank)
                    .then_with(|| other.start.cmp(&self.start))
            }
        }
        impl PartialOrd for Merge {
            fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
                Some(self.cmp(other))
            }
        }
        struct State {
            prev: usize,
            end: usize,
            next_end: usize,
            next_rank: Rank,
        }
        let rank_of =
            |range: std::ops::Range<usize>| piece.get(range).and_then(|b| self.encoder.get(b));
        let mut state: Vec<State> = (0..piece.len())
            .map(|i| State {
                prev: i.wrapping_sub(1),
                end: i + 1,
                next_end: i + 2,
                next_rank: Rank::MAX,
            })
            .collect();
        let mut heap = BinaryHeap::with_capacity(piece.len());
        for (i, s) in state.iter_mut().enumerate().take(piece.len() - 1) {
            if let Some(&rank) = rank_of(i..i + 2) {
                heap.push(Merge { start: i, rank });
                s.next_rank = rank;
            }
        }
        let mut tokens = piece.len();
        let potential = |state: &mut [State], heap: &mut BinaryHeap<Merge>, start, next_end| {
            let s: &mut State = &mut state[start];
            s.next_end = next_end;
            s.next_rank = Rank::MAX;
            if let Some(&rank) = rank_of(start..next_end) {
                heap.push(Merge { start, rank });
                s.next_rank = rank;
            }
        };
        while let Some(left) = heap.pop() {
            if left.rank != state[left.start].next_rank {
                continue;
            }
            let left_start = left.start;
            let right_start = state[left_start].end;
            let right_end = state[left_start].next_end;
            let right_next_end = state[right_start].next_end;
            state[left_start].end = right_end;
            tokens -= 1;
            potential(&mut state, &mut heap, left_start, right_next_end);
            if right_end < state.len() {
                state[right_end].prev = left_start;
            }
            if left_start > 0 {
                let prev_start = state[left_start].prev;
                potential(&mut state, &mut heap, prev_start, right_end);
            }
            state[right_start].next_rank = Rank::MAX;
        }
        tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The counts are tiktoken-rs's own: source code, prose, other scripts, emoji, runs of
    /// whitespace and digits, and pieces long enough for the heap merge.
    #[test]
    fn counts_match_tiktoken_rs() {
        let reference = tiktoken_rs::o200k_base().unwrap_or_else(|e| panic!("{e}"));
        let bpe = Bpe::o200k_base().unwrap_or_else(|e| panic!("{e}"));
        let mut texts: Vec<String> = vec![
            String::new(),
            "fn main() { println!(\"hello world\"); }\n".into(),
            "Grüße, 世界! Привет мир. こんにちは 🦀🦀 naïve café x²\r\n\t  \n\n".into(),
            "    indented\n\n\n        more   spaces   \t\t end ".into(),
            "1234567890 3.14159 0xdeadbeef 1e-9 ---- ==== //// '' I'M you're WE'LL".into(),
            "a".repeat(5000),
            "x".repeat(99) + " " + &"x".repeat(100) + " " + &"x".repeat(199),
            "ab".repeat(300) + &"🦀".repeat(150) + &"é".repeat(257),
            "QmFzZTY0IGVuY29kZWQgYmxvYnMgYXJlIGxvbmcgcGllY2Vz".repeat(40),
            "<|endoftext|> <|endofprompt|> special tokens are ordinary text here".into(),
        ];
        let root = env!("CARGO_MANIFEST_DIR");
        for f in [
            "src/world/bpe.rs",
            "src/fs/passthrough.rs",
            "README.md",
            "Cargo.lock",
        ] {
            let path = std::path::Path::new(root).join(f);
            texts.push(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{f}: {e}")));
        }
        for t in &texts {
            let want = reference.encode_ordinary(t).len();
            let got = bpe.count(t).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(got, want, "{:?}", t.chars().take(40).collect::<String>());
        }
    }
}
