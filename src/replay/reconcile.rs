//! Fitting what the trace recorded to the files as they are. An earlier step the trace could not
//! describe (a `sed -i`, a script) can leave a file that does not show what the agent later saw:
//! the recorded lines of a read must be placed where they belong, and a write of unknown effect
//! takes it from what the trace shows next (the file's next view, or paths below it that make it
//! a directory). A wrong placement would corrupt the file, so whatever cannot be placed without
//! guessing is not.

use std::path::Path;

use super::apply::clean_rel;
use super::text;
use super::trace::{Kind, Trace};

/// A view of a file the trace shows later: its lines, and where they start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FutureView {
    /// 1-based first line; `None`: the whole file, or (`partial`) not known.
    pub(super) first: Option<u64>,
    pub(super) text: String,
    /// The lines are somewhere in the file (a pattern range such as `sed -n '/a/,/b/p'`).
    pub(super) partial: bool,
}

/// The next view of `rel` the trace shows after step `idx` (a read of one range, of the whole
/// file, or of a pattern range), if no structured write or edit of it comes first.
pub(super) fn future_view(trace: &Trace, idx: usize, rel: &Path) -> Option<FutureView> {
    for s in &trace.steps[idx + 1..] {
        let same = s
            .path
            .as_deref()
            .and_then(clean_rel)
            .is_some_and(|p| p == rel);
        if !same {
            continue;
        }
        if s.refused() {
            continue;
        }
        match s.kind {
            Kind::Read => {
                let text = s.content.clone()?;
                if s.partial() {
                    return Some(FutureView {
                        first: None,
                        text,
                        partial: true,
                    });
                }
                return match s.line_ranges() {
                    None => Some(FutureView {
                        first: None,
                        text,
                        partial: false,
                    }),
                    Some(rs) if rs.len() == 1 => Some(FutureView {
                        first: Some(rs[0][0]),
                        text,
                        partial: false,
                    }),
                    _ => None,
                };
            }
            Kind::Write => return None,
            Kind::Edit if !s.replacements().is_empty() => return None,
            _ => {}
        }
    }
    None
}

/// Does any step of the trace name a path below `rel` (so `rel` is a directory)?
pub(super) fn names_directory(trace: &Trace, rel: &Path) -> bool {
    let below = |p: &str| clean_rel(p).is_some_and(|p| p != rel && p.starts_with(rel));
    trace
        .steps
        .iter()
        .any(|s| s.path.as_deref().is_some_and(below) || s.touches().iter().any(|t| below(&t.path)))
}

/// Where the lines of a `partial` read (a pattern range such as `sed -n '/def f/,/^$/p'`) sit
/// in `cur`, when they are not there verbatim (an edit the trace could not describe came
/// before): the 1-based line where they start. First choice, a span as long as the recorded
/// lines that starts with their first line and ends with their last (only lines inside it
/// differ); else the one place where they differ from `cur` by a single insertion (some lines
/// added, maybe some replaced) with matching lines on both sides. `None` when they are there
/// verbatim or cannot be placed without guessing: a pure deletion looks the same as several
/// ranges run together, and a wrong guess would corrupt the file.
pub(super) fn partial_at(cur: &str, recorded: &[&str]) -> Option<u64> {
    let c = text::lines(cur);
    let (first, last) = (*recorded.first()?, *recorded.last()?);
    let k = recorded.len();
    if first.trim().is_empty() || last.trim().is_empty() || k < 2 {
        return None;
    }
    if c.windows(k).any(|w| w == recorded) {
        return None;
    }
    let starts = || (0..c.len()).filter(|&i| c[i] == first);
    if let Some(i) = starts().find(|&i| c.len() - i >= k && c[i + k - 1] == last) {
        return Some(i as u64 + 1);
    }
    let mut found = starts().filter(|&i| one_insertion(&c[i..], recorded));
    match (found.next(), found.next()) {
        (Some(i), None) => Some(i as u64 + 1),
        _ => None,
    }
}

/// Does `recorded` read like the start of `c` after one insertion: a common head, a common
/// tail of at least two lines (one line such as `return x` recurs too often to anchor), and
/// between them more lines added than removed, few enough that the anchors mean something?
fn one_insertion(c: &[&str], recorded: &[&str]) -> bool {
    let k = recorded.len();
    let slack = (k / 4).max(3);
    let head = recorded.iter().zip(c).take_while(|(a, b)| a == b).count();
    (head + 1..=c.len().min(k + slack)).any(|end| {
        // the recorded lines after the head end where `c[..end]` ends
        let tail = recorded[head..]
            .iter()
            .rev()
            .zip(c[head..end].iter().rev())
            .take_while(|(a, b)| a == b)
            .count();
        let added = k - head - tail;
        let removed = end - head - tail;
        tail >= 2 && added > removed && added - removed <= slack && removed <= slack
    })
}

/// `cur` with empty lines appended so that line `first` exists: a read that saw lines past the
/// end of the rebuilt file (earlier changes the trace could not describe made it longer) puts
/// them where the agent saw them, not right after the last line.
pub(super) fn pad_to(cur: &str, first: u64) -> std::borrow::Cow<'_, str> {
    let n = text::lines(cur).len() as u64;
    if first <= n + 1 {
        return std::borrow::Cow::Borrowed(cur);
    }
    let mut s = cur.to_string();
    if !s.is_empty() && !s.ends_with('\n') {
        s.push('\n');
    }
    s.push_str(&"\n".repeat((first - 1 - n) as usize));
    std::borrow::Cow::Owned(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_read_is_placed_only_where_its_span_fits() {
        let cur = "a\ndef f():\n    x = 1\n    return x\nb\n";
        // edited inside: same span, first and last lines in place
        let rec = ["def f():", "    x = 2", "    return x"];
        assert_eq!(partial_at(cur, &rec), Some(2));
        // there verbatim: nothing to do
        let same = ["def f():", "    x = 1", "    return x"];
        assert_eq!(partial_at(cur, &same), None);
        // two ranges run together (span shorter than the distance): not placed
        assert_eq!(partial_at(cur, &["a", "b"]), None);
    }

    #[test]
    fn a_partial_read_with_inserted_lines_is_placed_where_both_ends_match() {
        let cur = "import os\ndef f():\n    a = 1\n    b = 2\n    return a\n\ndef g():\n    pass\n";
        // `sed -i` inserted a check; `sed -n '/def f/,/return/p'` shows it
        let rec = [
            "def f():",
            "    if x:",
            "        raise",
            "    a = 1",
            "    b = 2",
            "    return a",
        ];
        assert_eq!(partial_at(cur, &rec), Some(2));
        assert_eq!(
            text::splice(cur, 2, &rec).unwrap(),
            "import os\ndef f():\n    if x:\n        raise\n    a = 1\n    b = 2\n    return a\n\ndef g():\n    pass\n"
        );
        // two ranges run together: lines missing in between, none added: not placed
        let two = "def f():\n    return 1\nx = 1\ny = 2\ndef g():\n    return 2\n";
        let rec = ["def f():", "    return 1", "def g():", "    return 2"];
        assert_eq!(partial_at(two, &rec), None);
        // the same insertion fits two places: not placed
        let twice = "def f():\n    a = 1\n    return a\ndef f():\n    a = 1\n    return a\n";
        let rec = ["def f():", "    new", "    a = 1", "    return a"];
        assert_eq!(partial_at(twice, &rec), None);
        // a lone matching last line is no anchor
        let rec = ["a", "n1", "n2", "n3", "x"];
        assert_eq!(partial_at("a\nb\nc\nx\n", &rec), None);
    }

    #[test]
    fn padding_puts_lines_where_the_agent_saw_them() {
        assert_eq!(pad_to("a\nb\n", 3), "a\nb\n");
        assert_eq!(pad_to("a\nb", 5), "a\nb\n\n\n");
        assert_eq!(text::lines(&pad_to("a\nb\n", 5)).len(), 4);
    }
}
