//! Line arithmetic shared by the replay: lines without their `\n`, byte spans of line ranges,
//! and splicing a recorded view of some lines into the current text.

/// The lines of `text` without their `\n` (a final newline does not start a new line).
pub fn lines(text: &str) -> Vec<&str> {
    let mut v: Vec<&str> = text.split('\n').collect();
    if v.last() == Some(&"") {
        v.pop();
    }
    v
}

/// `text` with CRLF line ends as LF, when it has any: Claude Code's Read shows a CRLF file as LF
/// lines, and its Edit matches `old_string` in that form and writes CRLF back.
pub fn crlf_as_lf(text: &str) -> Option<String> {
    text.contains("\r\n").then(|| text.replace("\r\n", "\n"))
}

/// `text` with every line end CRLF (what Claude Code writes back to a CRLF file).
pub fn lf_as_crlf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\n', "\r\n")
}

/// Is a line of the disk the line a view shows? Equal, or equal but for the CR of a CRLF line
/// end, which a tool that reads CRLF files as LF lines does not show.
pub fn same_line(disk: &str, shown: &str) -> bool {
    disk == shown || disk.strip_suffix('\r') == Some(shown)
}

/// The runs of lines that `ranges` (1-based inclusive) select, as `sed -n '8,9p;1,2p'` prints
/// them: in file order and each line once, so a read's content is split in that order and
/// overlapping or adjacent ranges are one run. An end before its start selects the start line
/// alone (sed's rule, and the one line such a read shows); there is no line 0. The end may be
/// `u64::MAX` (`sed -n '8,$p'`), hence the saturating arithmetic.
pub fn merged_ranges(ranges: &[[u64; 2]]) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = ranges
        .iter()
        .map(|&[a, b]| {
            let a = a.max(1);
            (a, b.max(a))
        })
        .collect();
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (a, b) in v {
        match out.last_mut() {
            Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
            _ => out.push((a, b)),
        }
    }
    out
}

/// Byte span `[start, end)` of 1-based inclusive lines `first..=last` (clamped to the text).
pub fn line_span(text: &str, first: u64, last: u64) -> (usize, usize) {
    let first = first.max(1);
    let mut line = 1u64;
    let mut start = None;
    let mut pos = 0usize;
    for (i, b) in text.bytes().enumerate() {
        if line == first && start.is_none() {
            start = Some(pos);
        }
        if b == b'\n' {
            if line == last {
                return (start.unwrap_or(i), i + 1);
            }
            line += 1;
            pos = i + 1;
        }
    }
    if line == first && start.is_none() && pos < text.len() {
        start = Some(pos);
    }
    match start {
        Some(s) => (s, text.len()),
        None => (text.len(), text.len()),
    }
}

/// Puts `recorded` (the lines an agent saw starting at line `first`) into `cur`, replacing the
/// lines that differ and keeping the unchanged lines around them aligned (an insertion or
/// deletion inside the range shifts the rest). `None` when `cur` already shows exactly that.
pub fn splice(cur: &str, first: u64, recorded: &[&str]) -> Option<String> {
    let c = lines(cur);
    let start = (first.max(1) as usize - 1).min(c.len());
    let k = recorded.len();
    let p = recorded
        .iter()
        .zip(&c[start..])
        .take_while(|(a, b)| a == b)
        .count();
    if p == k {
        return None;
    }
    // Align the end: the shift d (lines inserted, negative: removed) with the longest common
    // suffix between the recorded lines after p and the current lines after start + p.
    let mut best = (0usize, 0i64);
    let lo = -(k as i64);
    let hi = k as i64 + 200;
    for d in lo..=hi {
        let end = start as i64 + k as i64 + d; // exclusive end in c
        if end < (start + p) as i64 || end > c.len() as i64 {
            continue;
        }
        let mut s = 0usize;
        while s < k - p {
            let ci = end - 1 - s as i64;
            if ci < (start + p) as i64 || recorded[k - 1 - s] != c[ci as usize] {
                break;
            }
            s += 1;
        }
        if s > best.0 || (s == best.0 && s > 0 && d.abs() < best.1.abs()) {
            best = (s, d);
        }
    }
    let (s, d) = best;
    let end =
        ((start as i64 + k as i64 + d - s as i64).max((start + p) as i64) as usize).min(c.len());
    let mut out: Vec<&str> = Vec::with_capacity(c.len() + k);
    out.extend_from_slice(&c[..start + p]);
    out.extend_from_slice(&recorded[p..k - s]);
    out.extend_from_slice(&c[end.max(start + p)..]);
    let mut text = out.join("\n");
    if !out.is_empty() && (cur.ends_with('\n') || cur.is_empty()) {
        text.push('\n');
    }
    if text == cur { None } else { Some(text) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans() {
        let t = "a\nbb\nccc\n";
        assert_eq!(line_span(t, 2, 2), (2, 5));
        assert_eq!(line_span(t, 1, 3), (0, 9));
        assert_eq!(line_span(t, 2, 99), (2, 9));
        assert_eq!(line_span(t, 5, 6), (9, 9));
        assert_eq!(line_span("x\ny", 2, 2), (2, 3));
    }

    #[test]
    fn ranges_merge_in_file_order() {
        // sed prints in file order, each line once
        assert_eq!(merged_ranges(&[[8, 9], [1, 2]]), vec![(1, 2), (8, 9)]);
        assert_eq!(merged_ranges(&[[1, 5], [3, 8]]), vec![(1, 8)]);
        assert_eq!(merged_ranges(&[[1, 5], [6, 9]]), vec![(1, 9)]);
        assert_eq!(merged_ranges(&[[3, 4], [1, 9]]), vec![(1, 9)]);
        // a sentinel end neither overflows nor stops a later range from merging into it
        assert_eq!(
            merged_ranges(&[[8, u64::MAX], [1, 2], [9, 10]]),
            vec![(1, 2), (8, u64::MAX)]
        );
        assert_eq!(
            merged_ranges(&[[u64::MAX, u64::MAX], [1, u64::MAX]]),
            vec![(1, u64::MAX)]
        );
        // sed -n '5,3p' prints line 5; line 0 does not exist
        assert_eq!(merged_ranges(&[[5, 3]]), vec![(5, 5)]);
        assert_eq!(merged_ranges(&[[0, 2]]), vec![(1, 2)]);
        assert!(merged_ranges(&[]).is_empty());
    }

    #[test]
    fn splice_insert_delete_replace() {
        let cur = "1\n2\n3\n4\n5\n6\n";
        // two lines inserted after 2, seen as lines 2..6
        let seen = ["2", "a", "b", "3", "4"];
        assert_eq!(splice(cur, 2, &seen).unwrap(), "1\n2\na\nb\n3\n4\n5\n6\n");
        // line 3 removed
        assert_eq!(splice(cur, 2, &["2", "4", "5"]).unwrap(), "1\n2\n4\n5\n6\n");
        // line 4 replaced
        assert_eq!(
            splice(cur, 3, &["3", "X", "5"]).unwrap(),
            "1\n2\n3\nX\n5\n6\n"
        );
        assert_eq!(splice(cur, 1, &["1", "2"]), None);
        // whole file from scratch
        assert_eq!(splice("", 1, &["new"]).unwrap(), "new\n");
    }

    #[test]
    fn crlf_files_read_as_lf_lines() {
        assert_eq!(crlf_as_lf("a\r\nb\r\n").as_deref(), Some("a\nb\n"));
        assert_eq!(crlf_as_lf("a\nb\n"), None);
        assert_eq!(lf_as_crlf("a\nb\r\nc"), "a\r\nb\r\nc");
        assert!(same_line("x\r", "x"));
        assert!(same_line("x", "x"));
        assert!(!same_line("x", "x\r"));
        assert!(!same_line("x\r\r", "x"));
    }
}
