//! Writes tiktoken-rs's o200k_base vocabulary to `$OUT_DIR/o200k_base.vocab` in a compact form
//! that `src/world/tokens.rs` embeds.
//!
//! tiktoken-rs's `CoreBPE` keeps three copies of the 200k-token vocabulary (an encoder map, a
//! decoder map and a sorted token list): about 41 MiB of heap, peaking at 52 MiB while it is
//! built. Counting needs only the encoder, so the daemon builds that one map (14 MiB) from
//! these bytes and runs tiktoken-rs's own pattern and byte-pair merge on it. The vocabulary
//! still comes from tiktoken-rs, exactly: it is read back from its `CoreBPE` token by token.
//!
//! Format: for each rank from 0, a little-endian u16 length and that many bytes; a length of 0
//! marks a rank the vocabulary does not use (no token is empty).

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("o200k_base.vocab");
    let bpe = tiktoken_rs::o200k_base().expect("tiktoken-rs builds o200k_base");
    // Special tokens (`<|endoftext|>`…) decode too, but `encode_ordinary` never produces them.
    let special: HashSet<u32> = bpe
        .special_tokens()
        .iter()
        .flat_map(|s| bpe.encode_with_special_tokens(s))
        .collect();
    let mut blob = Vec::with_capacity(2 << 20);
    let mut missing_run = 0u32;
    let mut rank: u32 = 0;
    // Ranks are dense; stop after a long run of unused ones (the special tokens start at
    // 199999 and are not part of the ordinary vocabulary).
    while missing_run < 1024 {
        match bpe.decode_bytes(&[rank]) {
            Ok(bytes) if !bytes.is_empty() && !special.contains(&rank) => {
                let len = u16::try_from(bytes.len()).expect("tokens are shorter than 64 KiB");
                blob.extend_from_slice(&len.to_le_bytes());
                blob.extend_from_slice(&bytes);
                missing_run = 0;
            }
            _ => {
                blob.extend_from_slice(&0u16.to_le_bytes());
                missing_run += 1;
            }
        }
        rank += 1;
    }
    // The trailing run of unused ranks carries nothing.
    blob.truncate(blob.len() - 2 * missing_run as usize);
    std::fs::File::create(&out)
        .and_then(|mut f| f.write_all(&blob))
        .unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}
