//! What a client sends must fit one request line of the socket ([`MAX_LINE`]): the socket
//! refuses a longer line whole. The limit stays (it bounds what one connection can make the
//! daemon hold), so the clients that forward an agent's tool calls (`worldfs hook`, `worldfs
//! replay`) send what fits: a long output as its head and tail with a line between them
//! saying what was left out ([`for_socket`]), a big tool input with its long strings cut
//! ([`capped_input`]; a Write carries the whole file, which the world has from the disk).
//! The agent saw, and a history holds, the whole text; only the socket gets the cut.

use serde_json::Value;

use super::protocol::MAX_LINE;

/// Most bytes an output may take in a `command.record` or `step.record` line, as JSON: a
/// quarter of the line, which leaves the rest for what the same line carries besides (the
/// call's input, the assistant text, the command, the field names). Counted as JSON because
/// escaping grows a string: a control character takes 6 bytes.
pub const SOCKET_OUTPUT_CAP: usize = 256 * 1024;

const _: () = assert!(4 * SOCKET_OUTPUT_CAP <= MAX_LINE);

/// An output cut to fit [`SOCKET_OUTPUT_CAP`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cut {
    /// Head, notice line, tail.
    pub text: String,
    /// Bytes of the output the text leaves out.
    pub left_out: u64,
}

/// Bytes `c` takes in a JSON string as serde_json writes it.
fn json_len(c: char) -> usize {
    match c {
        '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
        c if u32::from(c) < 0x20 => 6,
        c => c.len_utf8(),
    }
}

/// Whether `text` is longer, as JSON, than [`SOCKET_OUTPUT_CAP`].
pub fn too_long(text: &str) -> bool {
    // no char takes more than 6 bytes of JSON per byte of it: most outputs need no scan
    text.len().saturating_mul(6) > SOCKET_OUTPUT_CAP
        && text.chars().map(json_len).sum::<usize>() > SOCKET_OUTPUT_CAP
}

fn notice(left_out: u64) -> String {
    format!(
        "[worldfs: {left_out} bytes of this output left out here: the socket takes request \
         lines of at most {MAX_LINE} bytes]"
    )
}

/// A tool input whose JSON is longer than this has its long strings cut.
pub const MAX_INPUT_BYTES: usize = 32 * 1024;
const MAX_INPUT_STRING_BYTES: usize = 2 * 1024;

/// `s` cut to at most `max` bytes at a character boundary, saying how much was left out.
pub fn cut_head(mut s: String, max: usize) -> String {
    if s.len() <= max {
        return s;
    }
    let mut at = max;
    while !s.is_char_boundary(at) {
        at -= 1;
    }
    let left = s.len() - at;
    s.truncate(at);
    s.push_str(&format!("\n[... {left} bytes left out by worldfs ...]"));
    s
}

/// The tool input, with long strings cut when its JSON is longer than [`MAX_INPUT_BYTES`].
pub fn capped_input(v: Value) -> Value {
    if v.to_string().len() <= MAX_INPUT_BYTES {
        return v;
    }
    shorten_strings(v)
}

/// `v` with every string longer than 2 KiB cut.
pub fn shorten_strings(v: Value) -> Value {
    map_strings(v, &|s| cut_head(s, MAX_INPUT_STRING_BYTES))
}

/// `v` with `cut` applied to every string in it, however deep (not to object keys).
pub fn map_strings(v: Value, cut: &impl Fn(String) -> String) -> Value {
    match v {
        Value::String(s) => Value::String(cut(s)),
        Value::Array(a) => Value::Array(a.into_iter().map(|v| map_strings(v, cut)).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, v)| (k, map_strings(v, cut)))
                .collect(),
        ),
        other => other,
    }
}

/// `text` cut to its head and tail at char boundaries, with a notice line between them, when
/// its JSON is longer than [`SOCKET_OUTPUT_CAP`]; `None` when it fits. Each piece ends at a line
/// end when that keeps at least half of it: a partial line reads as a whole one to the
/// agent and to the matching of output lines to file lines (`shown_lines`).
pub fn for_socket(text: &str) -> Option<Cut> {
    if !too_long(text) {
        return None;
    }
    // room for the notice with the longest count and the two newlines around it
    let half = (SOCKET_OUTPUT_CAP - notice(u64::MAX).len() - 2) / 2;
    let mut used = 0;
    let mut head_end = 0;
    for (i, c) in text.char_indices() {
        used += json_len(c);
        if used > half {
            break;
        }
        head_end = i + c.len_utf8();
    }
    used = 0;
    let mut tail_start = text.len();
    for (i, c) in text.char_indices().rev() {
        used += json_len(c);
        if used > half || i < head_end {
            break;
        }
        tail_start = i;
    }
    let mut head = &text[..head_end];
    if let Some(i) = head.rfind('\n').filter(|&i| i + 1 >= head.len() / 2) {
        head = &head[..=i];
    }
    let mut tail = &text[tail_start..];
    if let Some((_, rest)) = tail
        .split_once('\n')
        .filter(|(_, r)| r.len() >= tail.len() / 2)
    {
        tail = rest;
    }
    let left_out = (text.len() - head.len() - tail.len()) as u64;
    let mut out = String::with_capacity(head.len() + tail.len() + 200);
    out.push_str(head);
    if !head.is_empty() && !head.ends_with('\n') {
        out.push('\n');
    }
    out.push_str(&notice(left_out));
    out.push('\n');
    out.push_str(tail);
    Some(Cut {
        text: out,
        left_out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json_bytes(s: &str) -> usize {
        serde_json::to_string(s).map_or(usize::MAX, |j| j.len() - 2)
    }

    #[test]
    fn an_output_that_fits_is_sent_whole() {
        assert_eq!(for_socket("short\n"), None);
        let exact = "x".repeat(SOCKET_OUTPUT_CAP);
        assert_eq!(for_socket(&exact), None);
    }

    #[test]
    fn a_long_output_keeps_whole_lines_of_its_head_and_tail() {
        let text: String = (1..=200_000).map(|i| format!("line {i}\n")).collect();
        let cut = for_socket(&text).unwrap_or_else(|| panic!("not cut"));
        assert!(json_bytes(&cut.text) <= SOCKET_OUTPUT_CAP);
        let lines: Vec<&str> = cut.text.lines().collect();
        assert_eq!(lines.first(), Some(&"line 1"));
        assert_eq!(lines.last(), Some(&"line 200000"));
        let notice = lines.iter().position(|l| l.starts_with("[worldfs: "));
        let notice = notice.unwrap_or_else(|| panic!("no notice"));
        // every line around the notice is a whole line of the output, in order
        let k: Vec<usize> = lines
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != notice)
            .map(|(_, l)| {
                l.strip_prefix("line ")
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0)
            })
            .collect();
        assert!(k.iter().all(|&n| n > 0), "a partial line was sent");
        let gaps = k.windows(2).filter(|w| w[1] != w[0] + 1).count();
        assert_eq!(gaps, 1, "one run of lines left out");
        // the notice counts exactly the bytes not sent
        let shown: usize = lines
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != notice)
            .map(|(_, l)| l.len() + 1)
            .sum();
        assert_eq!(cut.left_out, (text.len() - shown) as u64);
        assert!(lines[notice].contains(&format!("{} bytes", cut.left_out)));
    }

    #[test]
    fn the_cap_counts_json_escapes_and_cuts_at_char_boundaries() {
        // a control character takes 6 bytes of JSON: 100 KiB of them is 600 KiB of line
        let controls = "\u{1}".repeat(100 * 1024);
        let cut = for_socket(&controls).unwrap_or_else(|| panic!("not cut"));
        assert!(json_bytes(&cut.text) <= SOCKET_OUTPUT_CAP);
        // one long line of multi-byte chars: no line end to cut at
        let wide = "é€😀".repeat(200_000);
        let cut = for_socket(&wide).unwrap_or_else(|| panic!("not cut"));
        assert!(json_bytes(&cut.text) <= SOCKET_OUTPUT_CAP);
        assert!(cut.text.starts_with("é€😀"));
        assert!(cut.text.ends_with("é€😀"));
        assert_eq!(cut.text.lines().count(), 3);
    }
}
