//! Views a harness declares: which lines of a file a tool result showed the agent.
//!
//! The mount sees bytes read, which say little about what the agent looked at: `sed -n
//! 340,360p f`, `nl -ba f | grep x` and a Read tool asked for 20 lines all read the whole file,
//! and a re-read served from the page cache is not seen at all. The harness knows better (the
//! Read tool's offset and limit, a `sed -n` range), so `step.record` may say it, and the lines
//! become the entry's most recent view: what a projection shows of a file too big to show
//! whole. Only entries the mount already knows are refined; a declaration never creates one,
//! so ignore and withhold rules keep their say.

use std::path::Path;

use super::World;
use super::ranges::ByteRange;
use super::source::SourceError;

/// The byte range of 1-based inclusive `lines` in `text`; `None` for all of it. Lines past the
/// end are clamped; a range starting past the end is empty.
pub fn line_span(text: &[u8], lines: Option<(u64, u64)>) -> ByteRange {
    let len = text.len() as u64;
    let Some((first, last)) = lines else {
        return ByteRange { start: 0, end: len };
    };
    let first = first.max(1);
    let mut line = 1u64;
    let mut start = if first == 1 { Some(0) } else { None };
    for (i, _) in text.iter().enumerate().filter(|(_, b)| **b == b'\n') {
        let next = i as u64 + 1;
        if line == last {
            return ByteRange {
                start: start.unwrap_or(next),
                end: next,
            };
        }
        line += 1;
        if line == first {
            start = Some(next);
        }
    }
    match start {
        Some(s) => ByteRange { start: s, end: len },
        None => ByteRange {
            start: len,
            end: len,
        },
    }
}

/// How the agent came to be shown a view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Viewed {
    /// The mount saw the agent read the file this turn.
    Read,
    /// It did not: the tool showed what it had read before, or told the agent to look at an
    /// earlier result. A client that replaced the history (`worldfs proxy`) has only the
    /// projection to hold that earlier result.
    Unread,
}

impl World {
    /// Records that the agent was shown `lines` (1-based, inclusive; `None`: all) of the file
    /// at `rel`, and whether the mount saw the agent read it this turn. `None` if the world has
    /// no live file entry there (nothing is created).
    pub fn agent_viewed(
        &self,
        rel: &Path,
        lines: Option<(u64, u64)>,
    ) -> Result<Option<Viewed>, SourceError> {
        let known = self.cache.get(rel).is_some_and(|e| {
            e.kind == super::entry::EntryKind::File && e.state == super::entry::EntryState::Live
        });
        if !known {
            return Ok(None);
        }
        let text = self.source.read_prefix(rel, self.rules.max_file_bytes())?;
        let span = line_span(&text, lines);
        if span.is_empty() {
            return Ok(None);
        }
        let Some(mut e) = self.cache.get_mut(rel) else {
            return Ok(None);
        };
        e.recent.record(span);
        // The agent looks at it now, whether or not the mount saw a read: Claude Code answers
        // the Read of a file unchanged since its last Read with a note to look at that earlier
        // result, reading nothing.
        let turn = self.turns.current();
        let viewed = if e.last_agent_turn < turn {
            Viewed::Unread
        } else {
            Viewed::Read
        };
        e.last_agent_turn = turn;
        drop(e);
        self.bump_generation();
        Ok(Some(viewed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_of_lines() {
        let t = b"a\nbb\nccc\ndddd";
        assert_eq!(line_span(t, None), ByteRange { start: 0, end: 13 });
        assert_eq!(line_span(t, Some((1, 1))), ByteRange { start: 0, end: 2 });
        assert_eq!(line_span(t, Some((2, 3))), ByteRange { start: 2, end: 9 });
        // the last line has no newline; a range past the end is clamped
        assert_eq!(line_span(t, Some((4, 9))), ByteRange { start: 9, end: 13 });
        assert_eq!(line_span(t, Some((3, 99))), ByteRange { start: 5, end: 13 });
        assert!(line_span(t, Some((7, 9))).is_empty());
        assert!(line_span(b"", Some((1, 2))).is_empty());
    }
}
