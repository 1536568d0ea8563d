//! Tool call ids and tool names that every provider accepts.
//!
//! Synthesized ids are derived from what the call shows (path, content hash, lines), so an
//! unchanged file keeps its id, and therefore its bytes and its cached prefix, turn after turn.
//! One alphabet and length serve all formats: Anthropic wants `^[a-zA-Z0-9_-]+$`, OpenAI rejects
//! call ids over 40 characters.

use std::path::Path;

/// Longest id OpenAI accepts.
pub const MAX_ID_LEN: usize = 40;
/// Prefix of every synthesized id; harness ids are never rewritten into this namespace unless
/// they are invalid.
const PREFIX: &str = "wf_";
/// 64 bits of blake3 for the ids of steps, which are few.
const HASH_HEX_CHARS: usize = 16;
/// Bytes of blake3 in a call id, written in decimal. An id is sent twice per call (the call and
/// its result), every turn, and carries nothing the model reads: 16 hex digits are 11 tokens
/// (o200k_base), 40 bits in decimal (at most 13 digits) about 6. Ids only need to be unique
/// within one request (hundreds of calls: a collision is about one in ten million requests,
/// and then the later call gets a suffix, the same every time).
const CALL_ID_BYTES: usize = 5;

pub fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// Id of a synthesized read of `path` at content `hash`; `part` tells apart the calls of one
/// entry (line ranges) and is empty for a whole-file read.
pub fn call_id(path: &Path, hash: &[u8; 32], part: &str) -> String {
    let mut h = blake3::Hasher::new();
    h.update(path.as_os_str().as_encoded_bytes());
    // Length-prefixing nothing is needed: the hash has a fixed size, so path || hash is
    // unambiguous; the part comes after a separator byte paths cannot contain.
    h.update(&[0]);
    h.update(hash);
    h.update(part.as_bytes());
    let d = h.finalize();
    let n = d.as_bytes()[..CALL_ID_BYTES]
        .iter()
        .fold(0u64, |n, b| (n << 8) | u64::from(*b));
    format!("{PREFIX}{n}")
}

/// The harness's own id when it is valid everywhere, else a stable replacement derived from it.
pub fn step_id(harness_id: &str) -> String {
    if valid_id(harness_id) && !harness_id.starts_with(PREFIX) {
        return harness_id.to_owned();
    }
    let d = blake3::hash(harness_id.as_bytes());
    format!("{PREFIX}s_{}", hex(&d.as_bytes()[..HASH_HEX_CHARS / 2]))
}

/// A tool name every provider accepts: invalid characters become `_`, cut to 64.
pub fn tool_name(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if s.is_empty() {
        s.push_str("tool");
    }
    s
}

/// Full blake3 hex of `bytes` (what command outputs record for their inputs).
pub fn hash_hex(hash: &[u8; 32]) -> String {
    hex(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_valid_stable_and_distinct() {
        let a = call_id(Path::new("src/a.rs"), &[1; 32], "");
        assert!(valid_id(&a), "{a}");
        assert_eq!(a, call_id(Path::new("src/a.rs"), &[1; 32], ""));
        assert_ne!(a, call_id(Path::new("src/a.rs"), &[2; 32], ""));
        assert_ne!(a, call_id(Path::new("src/b.rs"), &[1; 32], ""));
        assert_ne!(a, call_id(Path::new("src/a.rs"), &[1; 32], "L1+5"));
    }

    #[test]
    fn harness_ids_kept_when_valid() {
        assert_eq!(step_id("toolu_01AbC"), "toolu_01AbC");
        let long = "x".repeat(41);
        for bad in ["", "a b", "toolu.1", long.as_str(), "wf_0123"] {
            let id = step_id(bad);
            assert!(valid_id(&id), "{bad:?} -> {id}");
            assert_ne!(id, bad);
        }
    }

    #[test]
    fn tool_names_sanitized() {
        assert_eq!(tool_name("Read"), "Read");
        assert_eq!(tool_name("my.tool"), "my_tool");
        assert_eq!(tool_name(""), "tool");
        assert_eq!(tool_name(&"a".repeat(100)).len(), 64);
        assert!(valid_tool_name(&tool_name("é/ü")));
    }
}
