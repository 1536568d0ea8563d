//! Sticky placement: a projection keeps every piece that is unchanged since the previous
//! projection for the same requester where it was, and appends new and changed pieces at the
//! end, in the order of their own stamps.
//!
//! Prompt caches hold prefixes, so what matters for the bill is not how a piece compares with
//! others but whether it moved: ordering by last change alone puts an entry that returns after
//! an eviction (unchanged since long ago) back in the middle, and everything after it is
//! written again. With placements, the stream only changes where something was dropped, and
//! what is new is appended after what the previous request wrote.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::world::World;
use crate::world::placements::{Placed, Placement};

use super::parts::{Call, EntryPart, Input, Piece, command_key};

fn fingerprint(parts: &[&[u8]]) -> u64 {
    let mut h = blake3::Hasher::new();
    for p in parts {
        // length-prefixed, so the concatenation is unambiguous
        h.update(&(p.len() as u64).to_le_bytes());
        h.update(p);
    }
    let mut b = [0u8; 8];
    b.copy_from_slice(&h.finalize().as_bytes()[..8]);
    u64::from_le_bytes(b)
}

fn call_fingerprint(e: &EntryPart, c: &Call) -> u64 {
    let input = serde_json::Value::Object(c.input.clone()).to_string();
    fingerprint(&[
        e.display.as_bytes(),
        c.id.as_bytes(),
        input.as_bytes(),
        c.result.as_bytes(),
        &[u8::from(c.is_error)],
    ])
}

/// A call's key among the placements: its entry's path and where in the file it starts
/// (every key ends in `#` and a tag, so no two entries' keys collide).
fn call_key(e: &EntryPart, c: &Call) -> PathBuf {
    let tag = match c.lines {
        Some((first, _)) => format!("L{first}"),
        None => "all".into(),
    };
    let mut s = e.path.as_os_str().to_owned();
    s.push(format!("#{tag}"));
    PathBuf::from(s)
}

/// Gives every call and command output of `input` its place: the previous one if it shows the
/// same bytes as then, else a new one after every earlier placement.
pub fn assign(world: &World, layout: &str, input: &mut Input) {
    let prev = world.placements(layout);
    let next_major = prev
        .iter()
        .flat_map(|l| l.values())
        .map(|p| p.major)
        .max()
        .map_or(1, |m| m + 1);
    let turn = input.turn;
    let place =
        |key: &Path, fingerprint: u64, own_seq: u64| match prev.as_ref().and_then(|l| l.get(key)) {
            Some(p) if p.fingerprint == fingerprint => *p,
            _ => Placement {
                major: next_major,
                minor: own_seq,
                turn,
                fingerprint,
            },
        };
    for e in &mut input.entries {
        let places: Vec<Placement> = e
            .calls
            .iter()
            .map(|c| place(&call_key(e, c), call_fingerprint(e, c), e.order_seq))
            .collect();
        for (c, p) in e.calls.iter_mut().zip(places) {
            c.place = p;
        }
    }
    for c in &mut input.commands {
        let fp = fingerprint(&[c.text.as_bytes()]);
        c.place = place(&command_key(c), fp, c.seq);
    }
}

/// The key a piece is placed under.
fn piece_key(piece: &Piece<'_>) -> PathBuf {
    match piece {
        Piece::Call(e, i) => call_key(e, &e.calls[*i]),
        Piece::Command(c) => command_key(c),
    }
}

/// How many leading pieces of `input`'s stream the previous projection for the same layout
/// showed first, in the same place and with the same bytes: the part of the stream a prompt
/// cache written by that request can still serve. Call before [`record`].
pub fn unchanged_prefix(world: &World, input: &Input) -> usize {
    let Some(prev) = world.placements(&input.layout) else {
        return 0;
    };
    let pieces = input.pieces();
    let same = |(piece, key): (&Piece<'_>, &PathBuf)| {
        let k = piece_key(piece);
        k == *key && prev.get(&k) == Some(&piece.place())
    };
    let n = pieces
        .iter()
        .zip(&prev.order)
        .take_while(|&p| same(p))
        .count();
    if n == pieces.len() && n == prev.order.len() {
        // The same stream as last time: the same breakpoints as last time.
        return prev.unchanged_prefix;
    }
    n
}

/// Remembers where the pieces that were finally shown were placed, and in which order.
pub fn record(world: &World, layout: &str, input: &Input) {
    let pieces = input.pieces();
    let mut placed = Placed {
        by_key: HashMap::with_capacity(pieces.len()),
        order: Vec::with_capacity(pieces.len()),
        unchanged_prefix: input.unchanged_prefix,
        segments: HashMap::new(),
    };
    for piece in &pieces {
        let key = piece_key(piece);
        placed.by_key.insert(key.clone(), piece.place());
        placed.order.push(key);
    }
    for e in &input.entries {
        let shown: Vec<(u64, u64)> = e.calls.iter().filter_map(|c| c.lines).collect();
        if !shown.is_empty() {
            placed.segments.insert(e.path.clone(), shown);
        }
    }
    world.set_placements(layout, placed);
}
