//! Where the lines of a file's previous version went in its new one.
//!
//! Views and read ranges are byte ranges of the version the agent read. When the file changes
//! (the agent's own `sed -i`, an editor's atomic save, a formatter, `git checkout`), the same
//! bytes hold other lines: a view of lines 1710-1720 is somewhere else after ten lines were
//! inserted above it, and dropping it (as a truncate used to) leaves a big edited file with
//! nothing to show but its whole, which does not fit. So the world keeps a fingerprint of every
//! line of the version it last counted ([`LineMap`]), and when it counts the next one, diffs the
//! two ([`similar`], Myers, on line hashes) to move each range to where its lines went
//! ([`Change::map`]) and to say which lines the change touched ([`Change::touched`]).
//!
//! Memory: 12 bytes a line (a 64-bit hash and the line's end), about a quarter of the text.

use std::time::{Duration, Instant};

use rustc_hash::FxHasher;
use similar::{Algorithm, DiffOp, DiffTag};

use super::ranges::ByteRange;

/// Longest a diff may take; past it `similar` settles for a coarser (still correct) one. Only a
/// rewrite of most of a large file gets near it.
const DIFF_DEADLINE: Duration = Duration::from_millis(50);

/// The lines of one version of a file: a hash of each, and where each ends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineMap {
    hashes: Vec<u64>,
    /// Byte offset just past each line (its `\n` included).
    ends: Vec<u32>,
}

impl LineMap {
    /// `None` for content too large for 32-bit offsets (the world never counts such files).
    pub fn new(bytes: &[u8]) -> Option<LineMap> {
        u32::try_from(bytes.len()).ok()?;
        let mut hashes = Vec::new();
        let mut ends = Vec::new();
        let mut start = 0usize;
        for line in bytes.split_inclusive(|b| *b == b'\n') {
            use std::hash::Hasher;
            let mut h = FxHasher::default();
            h.write(line.strip_suffix(b"\n").unwrap_or(line));
            hashes.push(h.finish());
            start += line.len();
            ends.push(start as u32);
        }
        Some(LineMap { hashes, ends })
    }

    pub fn lines(&self) -> usize {
        self.hashes.len()
    }

    fn size(&self) -> u64 {
        self.ends.last().map_or(0, |e| u64::from(*e))
    }

    /// Byte offset where line `i` (0-based) starts; the size for `i` past the last line.
    fn start(&self, i: usize) -> u64 {
        match i {
            0 => 0,
            _ => self.ends.get(i - 1).map_or(self.size(), |e| u64::from(*e)),
        }
    }

    /// The line holding byte `offset` (the line count for an offset at or past the end).
    fn line_of(&self, offset: u64) -> usize {
        self.ends.partition_point(|e| u64::from(*e) <= offset)
    }

    /// What changed from `self` to `new`.
    pub fn diff<'a>(&'a self, new: &'a LineMap) -> Change<'a> {
        let ops = similar::capture_diff_slices_deadline(
            Algorithm::Myers,
            &self.hashes,
            &new.hashes,
            Some(Instant::now() + DIFF_DEADLINE),
        );
        Change {
            old: self,
            new,
            ops,
        }
    }
}

/// The difference between two versions of a file, line by line.
pub struct Change<'a> {
    old: &'a LineMap,
    new: &'a LineMap,
    /// In order of old (and new) lines; `Insert`s have no old lines.
    ops: Vec<DiffOp>,
}

impl Change<'_> {
    /// The versions have the same lines.
    pub fn is_empty(&self) -> bool {
        self.ops.iter().all(|op| op.tag() == DiffTag::Equal)
    }

    /// The op that covers old line `i`, if any (an old line past the end has none).
    fn op_of(&self, i: usize) -> Option<&DiffOp> {
        let at = self.ops.partition_point(|op| op.old_range().end <= i);
        self.ops[at..]
            .iter()
            .find(|op| !op.old_range().is_empty())
            .filter(|op| op.old_range().contains(&i))
    }

    /// Where the new version has old line `i`, or the line after the place it was removed from.
    fn new_start(&self, i: usize) -> usize {
        match self.op_of(i) {
            Some(op) if op.tag() == DiffTag::Equal => {
                op.new_range().start + (i - op.old_range().start)
            }
            Some(op) => op.new_range().start,
            None => self.new.lines(),
        }
    }

    /// One past where the new version has old line `i` (or what replaced it).
    fn new_end(&self, i: usize) -> usize {
        match self.op_of(i) {
            Some(op) if op.tag() == DiffTag::Equal => {
                op.new_range().start + (i - op.old_range().start) + 1
            }
            Some(op) => op.new_range().end,
            None => self.new.lines(),
        }
    }

    /// Where the lines of old byte range `r` are in the new version (with what was inserted
    /// or replaced among them); `None` when none of them is left.
    pub fn map(&self, r: ByteRange) -> Option<ByteRange> {
        if r.is_empty() || r.start >= self.old.size() {
            return None;
        }
        let first = self.old.line_of(r.start);
        let last = self.old.line_of(r.end - 1).min(self.old.lines() - 1);
        let (a, b) = (self.new_start(first), self.new_end(last));
        (b > a).then(|| ByteRange {
            start: self.new.start(a),
            end: self.new.start(b),
        })
    }

    /// The byte ranges of the new version the change touched (lines inserted or replaced; for
    /// lines removed, the place they were), each widened by `context` lines on both sides as a
    /// unified diff shows an edit, merged where they meet.
    pub fn touched(&self, context: usize) -> Vec<ByteRange> {
        let n = self.new.lines();
        let mut out: Vec<ByteRange> = Vec::new();
        for op in self.ops.iter().filter(|op| op.tag() != DiffTag::Equal) {
            let lines = op.new_range();
            let a = lines.start.saturating_sub(context);
            let b = (lines.end + context).min(n);
            if b <= a {
                continue;
            }
            let r = ByteRange {
                start: self.new.start(a),
                end: self.new.start(b),
            };
            match out.last_mut() {
                Some(prev) if prev.end >= r.start => prev.end = prev.end.max(r.end),
                _ => out.push(r),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn text(lines: &[&str]) -> String {
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    /// The lines of `s` in byte range `r`.
    fn lines_in(s: &str, r: ByteRange) -> Vec<&str> {
        s[r.start as usize..r.end as usize].lines().collect()
    }

    #[test]
    fn a_view_follows_its_lines_past_an_insertion_above_it() {
        let old = text(&["a", "b", "c", "d", "e", "f"]);
        let new = text(&["a", "x", "y", "b", "c", "d", "e", "f"]);
        let (o, n) = (
            LineMap::new(old.as_bytes()).unwrap(),
            LineMap::new(new.as_bytes()).unwrap(),
        );
        let ch = o.diff(&n);
        // old lines d..e (bytes 6..10)
        let r = ch.map(ByteRange::at(6, 4)).unwrap();
        assert_eq!(lines_in(&new, r), ["d", "e"]);
        // the insertion, with one line of context each side
        let t = ch.touched(1);
        assert_eq!(t.len(), 1);
        assert_eq!(lines_in(&new, t[0]), ["a", "x", "y", "b"]);
    }

    #[test]
    fn a_view_takes_in_what_replaced_its_lines_and_goes_when_they_are_gone() {
        let old = text(&["a", "b", "c", "d", "e"]);
        let new = text(&["a", "B1", "B2", "d", "e"]);
        let (o, n) = (
            LineMap::new(old.as_bytes()).unwrap(),
            LineMap::new(new.as_bytes()).unwrap(),
        );
        let ch = o.diff(&n);
        // old a..d (bytes 0..8): a, the replacement, d
        let r = ch.map(ByteRange::at(0, 8)).unwrap();
        assert_eq!(lines_in(&new, r), ["a", "B1", "B2", "d"]);
        // a view of old lines b..c only: what replaced them
        let r = ch.map(ByteRange::at(2, 4)).unwrap();
        assert_eq!(lines_in(&new, r), ["B1", "B2"]);
        let gone = text(&["a", "d", "e"]);
        let g = LineMap::new(gone.as_bytes()).unwrap();
        assert_eq!(o.diff(&g).map(ByteRange::at(2, 4)), None);
        // a deletion is shown as the place it was
        let t = o.diff(&g).touched(0);
        assert!(t.is_empty(), "{t:?}");
        assert_eq!(lines_in(&gone, o.diff(&g).touched(1)[0]), ["a", "d"]);
    }

    #[test]
    fn unchanged_content_is_an_empty_change() {
        let s = text(&["a", "b"]);
        let m = LineMap::new(s.as_bytes()).unwrap();
        let ch = m.diff(&m);
        assert!(ch.is_empty());
        assert!(ch.touched(3).is_empty());
        assert_eq!(ch.map(ByteRange::at(2, 2)), Some(ByteRange::at(2, 2)));
        // a range past the end maps to nothing; a last line without a newline still counts
        assert_eq!(ch.map(ByteRange::at(9, 2)), None);
        let m2 = LineMap::new(b"a\nb").unwrap();
        assert_eq!(
            m2.diff(&m2).map(ByteRange::at(2, 1)),
            Some(ByteRange::at(2, 1))
        );
    }

    proptest! {
        /// Whatever the edit, a view's surviving lines are all in its mapped range, in order,
        /// and the mapped range lies within the new file on line boundaries.
        #[test]
        fn mapped_views_hold_their_surviving_lines(
            old in proptest::collection::vec(0u8..6, 1..40),
            edits in proptest::collection::vec((0usize..40, 0u8..3, 0u8..6), 0..6),
            a in 0usize..40,
            len in 1usize..10,
        ) {
            // distinct lines, so "surviving" is well defined: line k of old is "o{k}"
            let old_lines: Vec<String> = old.iter().enumerate().map(|(k, _)| format!("o{k}")).collect();
            let mut new_lines = old_lines.clone();
            for (i, (at, kind, v)) in edits.iter().enumerate() {
                let at = (*at).min(new_lines.len());
                match kind {
                    0 => new_lines.insert(at, format!("n{i}-{v}")),
                    1 if at < new_lines.len() => { new_lines.remove(at); }
                    _ if at < new_lines.len() => new_lines[at] = format!("r{i}-{v}"),
                    _ => {}
                }
            }
            let old_s: String = old_lines.iter().map(|l| format!("{l}\n")).collect();
            let new_s: String = new_lines.iter().map(|l| format!("{l}\n")).collect();
            let o = LineMap::new(old_s.as_bytes()).unwrap();
            let n = LineMap::new(new_s.as_bytes()).unwrap();
            let a = a.min(old_lines.len() - 1);
            let b = (a + len).min(old_lines.len());
            let r = ByteRange { start: o.start(a), end: o.start(b) };
            let surviving: Vec<&String> = old_lines[a..b].iter().filter(|l| new_lines.contains(l)).collect();
            match o.diff(&n).map(r) {
                None => prop_assert!(surviving.is_empty()),
                Some(m) => {
                    prop_assert!(m.end <= new_s.len() as u64);
                    prop_assert!(m.start == 0 || new_s.as_bytes()[m.start as usize - 1] == b'\n');
                    let shown: Vec<&str> = lines_in(&new_s, m);
                    let mut it = shown.iter();
                    for l in surviving {
                        prop_assert!(it.any(|s| s == l), "{l} not in {shown:?}");
                    }
                }
            }
        }
    }
}
