//! The last step's output, less the runs of lines the stream above already shows; and each
//! command output in the stream, less the runs of lines of the files it shows.
//!
//! A step that read a file (`cat`, `sed -n`, `grep -A`, a `Read`) returns lines the world has
//! just recorded as a view of that file, so the same request would carry them twice: in the
//! stream, current, and in the step's result. The step is the one part of a request that is
//! new every turn and sits after the last cache breakpoint, so those lines would also be paid
//! in full once as the step and once more (as a cache write) when they join the stream.
//!
//! Every run of at least [`MIN_RUN_LINES`] consecutive output lines that are consecutive lines
//! of one piece of the stream (a file read, or an earlier command output) becomes one line that
//! names them. Everything else stays verbatim: lines that differ from the file as it is now
//! (it changed after the step ran), lines the stream does not show, the wrapper a harness puts
//! around an output. A gutter (`cat -n`, `grep -n`, a `Read` result) is ignored when matching,
//! so numbered and raw copies of the same lines match.
//!
//! A command output in the stream is shortened the same way against the files ([`in_context`]):
//! an agent that reads with its shell (Codex always does: `cat`, `sed -n`) would otherwise have
//! every file it read twice in a projection, once as the file, once as the output. Its markers
//! say "in this context": the output may stand before the file, where sticky placement keeps
//! what an earlier request sent.

use std::collections::HashMap;

use std::path::{Path, PathBuf};

use super::parts::{CommandPart, EntryPart, Shown, command_key};
use super::request::LineNumbers;
use crate::world::EntryKind;

/// Shorter runs stay: a marker line costs about as much as a few short lines, and scattered
/// matches (`}` or a blank line) say nothing about the stream.
pub const MIN_RUN_LINES: usize = 4;
/// A run must also be worth a marker: about 40 tokens of text.
const MIN_RUN_BYTES: usize = 160;
/// Lines shorter than this (trimmed) do not start a run; they only extend one.
const MIN_ANCHOR_LEN: usize = 4;
/// Where one line appears in many places (a repeated `return None`), only the first few
/// places are tried.
const MAX_PLACES_PER_LINE: usize = 16;
/// Line comparisons one output may cost; past it the rest is kept verbatim.
const MAX_COMPARISONS: usize = 4_000_000;

/// Lines shown in the stream, the part they belong to, and how a run of them is named.
#[derive(Debug)]
pub struct Source<'a> {
    /// An entry's path, or a command output's [`command_key`].
    key: PathBuf,
    kind: SourceKind<'a>,
    lines: Vec<&'a str>,
}

#[derive(Debug)]
enum SourceKind<'a> {
    /// A read of a file, starting at this 1-based line.
    File { display: &'a str, first_line: u64 },
    /// An earlier command output.
    Command { command: &'a str },
}

impl<'a> Source<'a> {
    /// Raw lines (no gutter) of the file at `path`, from 1-based line `first_line` on.
    pub fn file(path: &Path, display: &'a str, first_line: u64, text: &'a str) -> Self {
        Source {
            key: path.to_owned(),
            kind: SourceKind::File {
                display,
                first_line,
            },
            lines: text.split('\n').collect(),
        }
    }

    /// The lines of a command output.
    pub fn command(c: &'a CommandPart) -> Self {
        Source {
            key: command_key(c),
            kind: SourceKind::Command {
                command: &c.command,
            },
            lines: c.output.split('\n').collect(),
        }
    }

    fn marker(&self, start: usize, len: usize, place: Place) -> String {
        let place = match place {
            Place::Above => "shown above",
            Place::InContext => "shown in this context",
        };
        match &self.kind {
            SourceKind::File {
                display,
                first_line,
            } => {
                let a = first_line + start as u64;
                let b = a + len as u64 - 1;
                format!("[lines {a}-{b} of {display}: not repeated, {place} as they are now]")
            }
            SourceKind::Command { command } => format!(
                "[{len} lines not repeated: the same as in the output of `{command}` shown above]"
            ),
        }
    }
}

/// The gutter `style` puts before a line (see [`super::entry_calls`]'s `numbered`), removed.
fn strip_own_gutter(line: &str, style: LineNumbers) -> &str {
    match style {
        LineNumbers::Tab => line.split_once('\t').map_or(line, |(_, rest)| rest),
        LineNumbers::Arrow => line.split_once('\u{2192}').map_or(line, |(_, rest)| rest),
        LineNumbers::None => line,
    }
}

/// The file reads of the stream, one source per call.
pub fn file_sources(entries: &[EntryPart], style: LineNumbers) -> Vec<Source<'_>> {
    let mut out = Vec::new();
    for e in entries {
        if e.shown != Shown::Content || e.kind == EntryKind::Dir || e.total_lines == 0 {
            continue;
        }
        for c in &e.calls {
            out.push(Source {
                key: e.path.clone(),
                kind: SourceKind::File {
                    display: &e.display,
                    first_line: c.lines.map_or(1, |(first, _)| first),
                },
                lines: c
                    .result
                    .split('\n')
                    .map(|l| strip_own_gutter(l, style))
                    .collect(),
            });
        }
    }
    out
}

/// Where the lines a marker names are, from the marker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Above,
    InContext,
}

/// A command output of the stream without the runs of lines the stream's files (`files`, from
/// [`file_sources`]) show; `None` if no run qualifies.
pub fn in_context(output: &str, files: &[Source<'_>]) -> Option<String> {
    without_shown(output, files, Place::InContext).map(|(text, _)| text)
}

/// `output` shortened by each group of sources in turn (files before command outputs: a file's
/// view stays current, an output only until a file it read changes), and the keys of the
/// parts its markers name; `None` if no run qualifies.
pub fn shorten(output: &str, groups: &[Vec<Source<'_>>]) -> Option<(String, Vec<PathBuf>)> {
    let mut result: Option<String> = None;
    let mut keys: Vec<PathBuf> = Vec::new();
    for sources in groups {
        let from = result.as_deref().unwrap_or(output);
        if let Some((r, used)) = without_shown(from, sources, Place::Above) {
            keys.extend(used.into_iter().map(|i| sources[i].key.clone()));
            result = Some(r);
        }
    }
    keys.sort();
    keys.dedup();
    result.map(|r| (r, keys))
}

/// The line without a leading line number (`  12\t`, `12:`, `12-`, `    12→`), if it has one.
fn without_gutter(line: &str) -> Option<&str> {
    let t = line.trim_start_matches(' ');
    let digits = t.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    let rest = &t[digits..];
    let sep = rest.chars().next()?;
    matches!(sep, '\t' | ':' | '-' | '|' | '\u{2192}').then(|| &rest[sep.len_utf8()..])
}

fn same(out: &str, src: &str) -> bool {
    let out = out.strip_suffix('\r').unwrap_or(out);
    let src = src.strip_suffix('\r').unwrap_or(src);
    out == src || without_gutter(out) == Some(src)
}

/// A run: output lines `at..at + len` are source `source`'s lines `start..start + len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Run {
    at: usize,
    len: usize,
    source: usize,
    start: usize,
}

/// `output` with every run of lines that `sources` show replaced by a marker line, and the
/// indices of the sources the markers name; `None` if no run qualifies.
fn without_shown(
    output: &str,
    sources: &[Source<'_>],
    place: Place,
) -> Option<(String, Vec<usize>)> {
    if sources.is_empty() {
        return None;
    }
    let mut index: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
    for (s, src) in sources.iter().enumerate() {
        for (i, l) in src.lines.iter().enumerate() {
            let l = l.strip_suffix('\r').unwrap_or(l);
            if l.trim().len() < MIN_ANCHOR_LEN {
                continue;
            }
            let places = index.entry(l).or_default();
            if places.len() < MAX_PLACES_PER_LINE {
                places.push((s, i));
            }
        }
    }
    // A final newline ends the last line; it is not a line of its own.
    let (body, ending) = match output.strip_suffix('\n') {
        Some(b) => (b, "\n"),
        None => (output, ""),
    };
    let out: Vec<&str> = body.split('\n').collect();
    let mut runs: Vec<Run> = Vec::new();
    let mut floor = 0;
    let mut i = 0;
    let mut budget = MAX_COMPARISONS;
    while i < out.len() && budget > 0 {
        let line = out[i].strip_suffix('\r').unwrap_or(out[i]);
        let mut best: Option<Run> = None;
        for key in [Some(line), without_gutter(line)].into_iter().flatten() {
            for &(s, p) in index.get(key).map_or(&[][..], Vec::as_slice) {
                let src = &sources[s].lines;
                let mut fwd = 0;
                while i + fwd < out.len() && p + fwd < src.len() && same(out[i + fwd], src[p + fwd])
                {
                    fwd += 1;
                }
                let mut back = 0;
                while i - back > floor && p > back && same(out[i - back - 1], src[p - back - 1]) {
                    back += 1;
                }
                budget = budget.saturating_sub(fwd + back + 1);
                let run = Run {
                    at: i - back,
                    len: back + fwd,
                    source: s,
                    start: p - back,
                };
                if best.is_none_or(|b| run.len > b.len) {
                    best = Some(run);
                }
            }
        }
        match best {
            Some(r) if worth_it(&out[r.at..r.at + r.len]) => {
                runs.push(r);
                i = r.at + r.len;
                floor = i;
            }
            _ => i += 1,
        }
    }
    if runs.is_empty() {
        return None;
    }
    let mut lines: Vec<String> = Vec::with_capacity(out.len());
    let mut at = 0;
    for r in &runs {
        lines.extend(out[at..r.at].iter().map(|l| (*l).to_owned()));
        lines.push(sources[r.source].marker(r.start, r.len, place));
        at = r.at + r.len;
    }
    lines.extend(out[at..].iter().map(|l| (*l).to_owned()));
    let mut used: Vec<usize> = runs.iter().map(|r| r.source).collect();
    used.sort_unstable();
    used.dedup();
    Some((lines.join("\n") + ending, used))
}

fn worth_it(run: &[&str]) -> bool {
    run.len() >= MIN_RUN_LINES && run.iter().map(|l| l.len() + 1).sum::<usize>() >= MIN_RUN_BYTES
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file<'a>(display: &'a str, first_line: u64, text: &'a str) -> Source<'a> {
        Source::file(Path::new(display), display, first_line, text)
    }

    fn shortened(output: &str, sources: &[Source<'_>]) -> Option<String> {
        without_shown(output, sources, Place::Above).map(|(text, _)| text)
    }

    fn body(n: std::ops::RangeInclusive<usize>) -> String {
        n.map(|i| format!("    value_{i} = compute_something({i})"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn a_cat_of_shown_lines_becomes_one_marker() {
        let shown = body(10..=40);
        let src = [file("src/a.py", 10, &shown)];
        let output = format!(
            "<returncode>0</returncode>\n<output>\n{}\n</output>",
            body(12..=30)
        );
        let got = shortened(&output, &src).expect("a run");
        assert_eq!(
            got,
            "<returncode>0</returncode>\n<output>\n[lines 12-30 of src/a.py: not repeated, \
             shown above as they are now]\n</output>"
        );
    }

    #[test]
    fn numbered_output_matches_raw_lines() {
        let shown = body(1..=20);
        let src = [file("a.py", 1, &shown)];
        let output: String = (5..=12)
            .map(|i| format!("{i:>6}\t    value_{i} = compute_something({i})"))
            .collect::<Vec<_>>()
            .join("\n");
        let got = shortened(&output, &src).expect("a run");
        assert_eq!(
            got,
            "[lines 5-12 of a.py: not repeated, shown above as they are now]"
        );
    }

    #[test]
    fn lines_that_changed_since_stay_verbatim() {
        let mut now: Vec<String> = body(1..=30).split('\n').map(str::to_owned).collect();
        now[14] = "    value_15 = edited_since(15)".into();
        let now = now.join("\n");
        let src = [file("a.py", 1, &now)];
        let output = body(1..=30);
        let got = shortened(&output, &src).expect("runs");
        let lines: Vec<&str> = got.split('\n').collect();
        assert_eq!(
            lines,
            vec![
                "[lines 1-14 of a.py: not repeated, shown above as they are now]",
                "    value_15 = compute_something(15)",
                "[lines 16-30 of a.py: not repeated, shown above as they are now]",
            ]
        );
    }

    #[test]
    fn short_or_scattered_matches_are_kept() {
        let shown = body(1..=30);
        let src = [file("a.py", 1, &shown)];
        // three consecutive lines: under the minimum run
        let three = body(3..=5);
        assert_eq!(shortened(&three, &src), None);
        // lines that exist, but not in this order
        let scattered = [body(9..=9), body(3..=3), body(20..=20), body(1..=1)].join("\n");
        assert_eq!(shortened(&scattered, &src), None);
        assert_eq!(shortened(&body(1..=30), &[]), None);
    }

    #[test]
    fn runs_can_start_on_short_lines() {
        let text = "}\n\nfn main() {\n    let first_value = compute_the_first_thing();\n    \
                    let second_value = compute_another_thing(first_value);\n    \
                    println!(\"{first_value} {second_value}\");\n}";
        let src = [file("main.rs", 7, text)];
        let got = shortened(text, &src).expect("a run");
        assert_eq!(
            got,
            "[lines 7-13 of main.rs: not repeated, shown above as they are now]"
        );
    }

    #[test]
    fn a_repeated_command_output_points_at_the_first() {
        let out = (1..=12)
            .map(|i| format!("tests/test_mod.py::test_case_{i} PASSED"))
            .collect::<Vec<_>>()
            .join("\n");
        let src = [Source {
            key: PathBuf::from("/pytest -v"),
            kind: SourceKind::Command {
                command: "pytest -v",
            },
            lines: out.split('\n').collect(),
        }];
        let step = format!("{out}\n===== 12 passed in 0.31s =====");
        let got = shortened(&step, &src).expect("a run");
        assert_eq!(
            got,
            "[12 lines not repeated: the same as in the output of `pytest -v` shown above]\n\
             ===== 12 passed in 0.31s ====="
        );
        // a final newline is kept, and is no line of its own
        let got = shortened(&format!("{out}\n"), &src).expect("a run");
        assert_eq!(
            got,
            "[12 lines not repeated: the same as in the output of `pytest -v` shown above]\n"
        );
    }

    #[test]
    fn gutters() {
        assert_eq!(without_gutter("    12\tcode"), Some("code"));
        assert_eq!(without_gutter("12:code"), Some("code"));
        assert_eq!(without_gutter("12-code"), Some("code"));
        assert_eq!(without_gutter("    12\u{2192}code"), Some("code"));
        assert_eq!(without_gutter("12"), None);
        assert_eq!(without_gutter("code"), None);
        assert_eq!(without_gutter("x12:code"), None);
    }
}
