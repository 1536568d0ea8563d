//! A world entry shown as the synthesized read calls that would have returned its current
//! content (or a notice that it is deleted or withheld), with their exact cost.

use std::path::Path;

use serde_json::{Map, Value, json};

use crate::world::placements::Placement;
use crate::world::{
    ByteRange, CurrentContent, Entry, EntryKind, EntryState, Extent, Form, ReadError, SourceError,
    World,
};

use super::ProjectionError;
use super::budget::{
    self, CALL_OVERHEAD, JSON_ENTRY_OVERHEAD, JSON_FIELD_OVERHEAD, MESSAGE_OVERHEAD,
    TEXT_PIECE_OVERHEAD,
};
use super::ids;
use super::parts::{Call, EntryPart, Segment, Shown};
use super::request::{Format, LineNumbers, ProjectionRequest};
use super::text;

/// Claude Code's `Read` returns at most this many lines unless given a limit: a whole-file
/// call over it states its `limit` so the call and its result agree.
const READ_DEFAULT_LINES: u64 = 2000;
const EMPTY_FILE_TEXT: &str = "(the file exists but is empty)";

/// How a path is shown to the model.
pub fn display_path(root: Option<&Path>, rel: &Path) -> String {
    match root {
        Some(r) if rel.as_os_str().is_empty() => r.to_string_lossy().into_owned(),
        Some(r) => r.join(rel).to_string_lossy().into_owned(),
        None if rel.as_os_str().is_empty() => ".".into(),
        None => rel.to_string_lossy().into_owned(),
    }
}

pub(super) enum Rendered {
    Part(EntryPart),
    Skip(String),
}

/// Start offsets of the lines of `bytes` (a final newline does not start a line).
fn line_starts(bytes: &[u8]) -> Vec<usize> {
    let mut v = Vec::new();
    if bytes.is_empty() {
        return v;
    }
    v.push(0);
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'\n' && i + 1 < bytes.len() {
            v.push(i + 1);
        }
    }
    v
}

/// Bytes of line `i` (0-based) without its newline.
fn line<'a>(bytes: &'a [u8], starts: &[usize], i: usize) -> &'a [u8] {
    let start = starts[i];
    let end = starts.get(i + 1).map_or(bytes.len(), |n| n - 1);
    let l = &bytes[start..end.max(start)];
    l.strip_suffix(b"\n").unwrap_or(l)
}

/// Lines `first..first+count` (0-based) with the gutter of `style`.
fn numbered(
    bytes: &[u8],
    starts: &[usize],
    first: usize,
    count: usize,
    style: LineNumbers,
) -> String {
    let mut out = String::with_capacity(bytes.len() / starts.len().max(1) * count + count * 8);
    for i in first..first + count {
        if i > first {
            out.push('\n');
        }
        let text = String::from_utf8_lossy(line(bytes, starts, i));
        match style {
            LineNumbers::Tab => {
                out.push_str(&(i + 1).to_string());
                out.push('\t');
            }
            LineNumbers::Arrow => {
                out.push_str(&format!("{:>6}\u{2192}", i + 1));
            }
            LineNumbers::None => {}
        }
        out.push_str(&text);
    }
    out
}

/// Line ranges (0-based first, count) covering the byte ranges, merged, within the content.
fn line_ranges(ranges: &[ByteRange], starts: &[usize], len: usize) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for r in ranges {
        let Ok(start) = usize::try_from(r.start) else {
            continue;
        };
        if start >= len || r.is_empty() {
            continue;
        }
        let end = usize::try_from(r.end).unwrap_or(usize::MAX).min(len);
        let first = starts.partition_point(|&s| s <= start).saturating_sub(1);
        let last = starts.partition_point(|&s| s < end).saturating_sub(1);
        out.push((first, last));
    }
    out.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (f, l) in out {
        match merged.last_mut() {
            Some(m) if f <= m.1 + 1 => m.1 = m.1.max(l),
            _ => merged.push((f, l)),
        }
    }
    merged.into_iter().map(|(f, l)| (f, l - f + 1)).collect()
}

/// `spans` (0-based first line, count) cut wherever a part the previous projection showed
/// (1-based first line, count) starts or ends inside them. A part shown before and still inside
/// a span comes out whole and alone: the same lines render the same bytes under the same id, so
/// it keeps its place in the stream, and only the lines read since are new. Merged into one call,
/// a range read next to an earlier one would send the earlier lines again, and move them.
fn split_at(spans: &[(usize, usize)], shown_before: &[(u64, u64)]) -> Vec<(usize, usize)> {
    if shown_before.is_empty() {
        return spans.to_vec();
    }
    let mut cuts: Vec<usize> = shown_before
        .iter()
        .flat_map(|&(first, count)| {
            let start = usize::try_from(first.saturating_sub(1)).unwrap_or(usize::MAX);
            [
                start,
                start.saturating_add(usize::try_from(count).unwrap_or(usize::MAX)),
            ]
        })
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::with_capacity(spans.len());
    for &(first, count) in spans {
        let end = first + count;
        let mut at = first;
        for &c in cuts.iter().filter(|&&c| c > first && c < end) {
            out.push((at, c - at));
            at = c;
        }
        out.push((at, end - at));
    }
    out
}

/// Memo key of a rendered result: it is determined by the content, the lines and the gutter.
fn result_key(
    hash: &[u8; 32],
    lines: Option<(usize, usize)>,
    style: LineNumbers,
    tag: &[u8],
) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(tag);
    h.update(hash);
    h.update(&[style as u8]);
    if let Some((f, n)) = lines {
        h.update(&(f as u64).to_le_bytes());
        h.update(&(n as u64).to_le_bytes());
    }
    *h.finalize().as_bytes()
}

/// Which stamp orders an entry: its last change; for a file shown as ranges, also its last
/// read (a new range changes what is shown without changing the file).
fn order_of(meta: &Entry, form: &Form) -> (u64, u64) {
    let mut s = meta.last_changed.unwrap_or(meta.first_observed);
    if matches!(form, Form::Ranges(_)) && meta.last_observed.seq > s.seq {
        s = meta.last_observed;
    }
    (s.seq, s.turn)
}

/// The form actually shown: a file the agent saw only in part is shown as those parts (the
/// model saw nothing else of it). What it saw of a file it edited includes the lines its edits
/// touched, with a few lines around them (`world::ingest`), so its own edit is shown whole; a
/// file it created, or wrote without having read it, is known only whole. Policies may prefer
/// the whole of a small file; this overrides them. Ranges a policy chose (a file too big to show
/// whole) are shown as chosen.
fn shown_form(meta: &Entry, form: &Form) -> Form {
    match (form, &meta.extent) {
        (Form::Whole, Extent::Ranges(set)) if meta.size.is_none_or(|size| !set.covers(size)) => {
            Form::Ranges(set.as_slice().to_vec())
        }
        _ => form.clone(),
    }
}

pub(super) fn entry_part(
    world: &World,
    req: &ProjectionRequest,
    path: &Path,
    meta: &Entry,
    form: &Form,
    shown_before: &[(u64, u64)],
    read: Option<CurrentContent>,
) -> Result<Rendered, ProjectionError> {
    let display = display_path(req.absolute_paths.as_deref(), path);
    let form = &shown_form(meta, form);
    let (order_seq, order_turn) = order_of(meta, form);
    let mut part = EntryPart {
        path: path.to_owned(),
        display,
        kind: meta.kind,
        shown: Shown::Content,
        hash: None,
        order_seq,
        order_turn,
        pinned: meta.pinned,
        agent_wrote: meta.agent_wrote,
        whole: true,
        notebook: false,
        total_lines: 0,
        calls: Vec::new(),
        segments: Vec::new(),
        cost: 0,
    };
    let current = match (form, meta.state) {
        (Form::Notice, EntryState::Withheld) => Err(Shown::Withheld),
        (Form::Notice, _) => Err(Shown::Deleted),
        // What was read for this projection already (the last step's files) is not read again.
        _ => match read.map_or_else(|| world.read_current(path), Ok) {
            Ok(c) => Ok(c),
            Err(ReadError::Withheld { .. }) => Err(Shown::Withheld),
            Err(ReadError::Source(SourceError::Open { source, .. }))
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Err(Shown::Deleted)
            }
            Err(e) => return Ok(Rendered::Skip(e.to_string())),
        },
    };
    match current {
        Ok(c) => content_calls(req, &mut part, &c, form, shown_before)?,
        Err(shown) => notice_call(req, &mut part, shown),
    }
    part.cost = entry_cost(req, &part)?;
    Ok(Rendered::Part(part))
}

fn input_for(
    req: &ProjectionRequest,
    display: &str,
    lines: Option<(u64, u64)>,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(req.path_param.clone(), Value::String(display.to_owned()));
    if let Some((offset, limit)) = lines {
        m.insert("offset".into(), json!(offset));
        m.insert("limit".into(), json!(limit));
    }
    m
}

fn notice_call(req: &ProjectionRequest, part: &mut EntryPart, shown: Shown) {
    part.shown = shown;
    let (tag, result, is_error) = match shown {
        Shown::Deleted => (
            "deleted",
            format!("File does not exist: {} (it was deleted).", part.display),
            true,
        ),
        _ => (
            "withheld",
            format!(
                "{} exists, but its content is withheld by policy (it looks like a secret).",
                part.display
            ),
            false,
        ),
    };
    let id = ids::call_id(&part.path, &[0; 32], tag);
    part.calls.push(Call {
        id,
        input: input_for(req, &part.display, None),
        lines: None,
        result,
        is_error,
        place: Placement::default(),
    });
}

fn content_calls(
    req: &ProjectionRequest,
    part: &mut EntryPart,
    c: &CurrentContent,
    form: &Form,
    shown_before: &[(u64, u64)],
) -> Result<(), ProjectionError> {
    part.hash = Some(c.hash);
    part.kind = c.kind;
    part.notebook = c.notebook;
    let bytes = &c.bytes;
    if c.kind == EntryKind::Dir || c.notebook {
        // A listing has no lines to number, nor has a notebook's cells (Read numbers neither,
        // and NotebookEdit names cells by id); each is shown whole, as it is.
        let listing = String::from_utf8_lossy(bytes).trim_end().to_owned();
        part.total_lines = listing.lines().count() as u64;
        let empty = match c.notebook {
            true => "(a notebook with no cells)",
            false => "(empty directory)",
        };
        part.calls.push(Call {
            id: ids::call_id(&part.path, &c.hash, ""),
            input: input_for(req, &part.display, None),
            lines: None,
            result: if listing.is_empty() {
                empty.into()
            } else {
                listing.clone()
            },
            is_error: false,
            place: Placement::default(),
        });
        if req.format == Format::Json {
            part.segments.push(Segment {
                first_line: 1,
                line_count: part.total_lines,
                text: listing,
            });
        }
        return Ok(());
    }
    let starts = line_starts(bytes);
    let n = starts.len();
    part.total_lines = n as u64;
    let ranges = match form {
        Form::Ranges(r) => {
            let lr = line_ranges(r, &starts, bytes.len());
            // Lines read before the file shrank are gone: show it whole rather than nothing.
            (!lr.is_empty() && lr != [(0, n)]).then(|| split_at(&lr, shown_before))
        }
        _ => None,
    };
    let spans: Vec<(usize, usize)> = match &ranges {
        Some(lr) => lr.clone(),
        None => vec![(0, n)],
    };
    part.whole = ranges.is_none();
    for (first, count) in spans {
        let result = if n == 0 {
            EMPTY_FILE_TEXT.to_owned()
        } else {
            numbered(bytes, &starts, first, count, req.line_numbers)
        };
        let call = match &ranges {
            Some(_) => range_call(req, part, first as u64 + 1, count as u64, result),
            None => Call {
                id: ids::call_id(&part.path, &c.hash, ""),
                input: input_for(
                    req,
                    &part.display,
                    (n as u64 > READ_DEFAULT_LINES).then_some((1, n as u64)),
                ),
                lines: None,
                result,
                is_error: false,
                place: Placement::default(),
            },
        };
        part.calls.push(call);
        if req.format == Format::Json && n > 0 {
            let start = starts[first];
            let end = starts.get(first + count).copied().unwrap_or(bytes.len());
            part.segments.push(Segment {
                first_line: first as u64 + 1,
                line_count: count as u64,
                text: String::from_utf8_lossy(&bytes[start..end]).into_owned(),
            });
        }
    }
    Ok(())
}

/// The call that reads lines `first..first + count` (1-based) of `part`'s file and returns
/// `result`, those lines with their gutter. A part of a file is named by what it shows, so an
/// edit elsewhere in the file leaves its id, bytes and place alone; and the same lines give
/// the same call however they came to be one part ([`super::rejoin`]).
pub(super) fn range_call(
    req: &ProjectionRequest,
    part: &EntryPart,
    first: u64,
    count: u64,
    result: String,
) -> Call {
    let tag = format!("L{first}+{count}");
    Call {
        id: ids::call_id(&part.path, blake3::hash(result.as_bytes()).as_bytes(), &tag),
        input: input_for(req, &part.display, Some((first, count))),
        lines: Some((first, count)),
        result,
        is_error: false,
        place: Placement::default(),
    }
}

/// Exact tokens of an entry's strings plus the format's envelope.
pub(super) fn entry_cost(
    req: &ProjectionRequest,
    part: &EntryPart,
) -> Result<u64, ProjectionError> {
    // A notebook's text is its cells, not the bytes its hash is of: a copy of the file under
    // another name has the same hash and other text.
    let (result_tag, raw_tag): (&[u8], &[u8]) = match part.notebook {
        true => (b"notebook", b"notebook-raw"),
        false => (b"result", b"raw"),
    };
    let result_tokens = |call: &Call| -> Result<u64, ProjectionError> {
        Ok(match part.hash {
            Some(h) if part.shown == Shown::Content => {
                let lines = call.lines.map(|(f, n)| (f as usize, n as usize));
                let key = result_key(&h, lines, req.line_numbers, result_tag);
                budget::count_keyed(&key, &call.result)?
            }
            _ => budget::count_str(&call.result)?,
        })
    };
    Ok(match req.format {
        Format::Anthropic | Format::OpenaiChat | Format::OpenaiResponses => {
            // Every call is an assistant message and a result message of its own.
            let mut c = 0;
            for call in &part.calls {
                let input = Value::Object(call.input.clone()).to_string();
                c += 2 * MESSAGE_OVERHEAD
                    + CALL_OVERHEAD
                    + 2 * budget::count_str(&call.id)?
                    + budget::count_str(&req.tool_name)?
                    + budget::count_str(&input)?
                    + result_tokens(call)?;
            }
            c
        }
        Format::Text => {
            let mut c = 0;
            for (i, call) in part.calls.iter().enumerate() {
                let (head, tail) = text::entry_frame(part, i);
                c += budget::count_str(&head)? + budget::count_str(&tail)? + result_tokens(call)?;
                c += TEXT_PIECE_OVERHEAD;
            }
            c
        }
        Format::Json => {
            let mut c = JSON_ENTRY_OVERHEAD + budget::count_str(&part.display)?;
            match part.hash {
                Some(h) => {
                    for s in &part.segments {
                        let lines = Some((s.first_line as usize, s.line_count as usize));
                        let key = result_key(&h, lines, LineNumbers::None, raw_tag);
                        c += budget::count_keyed(&key, &s.text)? + JSON_FIELD_OVERHEAD;
                    }
                }
                None => {
                    for call in &part.calls {
                        c += budget::count_str(&call.result)?;
                    }
                }
            }
            c
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_ranges() {
        let b = b"a\nbb\nccc\n";
        let s = line_starts(b);
        assert_eq!(s, vec![0, 2, 5]);
        assert_eq!(
            numbered(b, &s, 0, 3, LineNumbers::Tab),
            "1\ta\n2\tbb\n3\tccc"
        );
        assert_eq!(
            numbered(b, &s, 1, 1, LineNumbers::Arrow),
            "     2\u{2192}bb"
        );
        // Byte 3 is in line 2, bytes 5..7 in line 3: adjacent lines merge.
        let r = [ByteRange::at(3, 1), ByteRange::at(5, 2)];
        assert_eq!(line_ranges(&r, &s, b.len()), vec![(1, 2)]);
        let r = [ByteRange::at(0, 1), ByteRange::at(6, 100)];
        assert_eq!(line_ranges(&r, &s, b.len()), vec![(0, 1), (2, 1)]);
        assert!(line_ranges(&[ByteRange::at(100, 5)], &s, b.len()).is_empty());
        let no_nl = b"x\ny";
        let s = line_starts(no_nl);
        assert_eq!(numbered(no_nl, &s, 0, 2, LineNumbers::None), "x\ny");
        assert!(line_starts(b"").is_empty());
    }

    #[test]
    fn spans_are_cut_where_earlier_parts_start_and_end() {
        // Nothing shown before: unchanged.
        assert_eq!(split_at(&[(0, 50)], &[]), vec![(0, 50)]);
        // Lines 1-20 shown before (1-based), now 1-30 (0-based 0, 30): the old part alone,
        // then the new lines.
        assert_eq!(split_at(&[(0, 30)], &[(1, 20)]), vec![(0, 20), (20, 10)]);
        // An old part inside a wider span, and one that does not touch it.
        assert_eq!(
            split_at(&[(10, 40)], &[(21, 10), (100, 5)]),
            vec![(10, 10), (20, 10), (30, 20)]
        );
        // Two spans, cuts apply to each.
        assert_eq!(
            split_at(&[(0, 10), (20, 10)], &[(6, 20)]),
            vec![(0, 5), (5, 5), (20, 5), (25, 5)]
        );
    }
}
