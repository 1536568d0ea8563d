//! Which lines of a file a tool's output shows.
//!
//! A bash agent looks at files through `nl -ba f | sed -n 294,298p`, `grep -n x f`, `cat f`,
//! `head`, `grep -A 5`. The replay needs to know which lines of the file such an output put in
//! front of the agent: to declare them as the step's views (what a harness that knows its
//! tools would tell the socket) and to know what the agent has seen (the metrics).
//!
//! Matching each file line against every output line alone is wrong for the lines that occur
//! many times in a file (`    )`, `        return None`, `combine_attrs=combine_attrs,`): a
//! `sed -n '294,298p;312,315p'` would "show" every closing parenthesis of the file. So a match
//! needs evidence of where it is:
//!
//! - a gutter (`   294\t`, `294:`, `294-`, `path:294:`, `   294→`) says the line number, and
//!   only the line with that number matches;
//! - without one, the match is kept when a neighbouring line of the output is the neighbouring
//!   line of the file (blank lines skipped), as in `cat`, `head` or `grep -A`; or when the line
//!   is distinctive: it occurs once in the whole file and is not trivially short.
//!
//! A blank line is shown when the lines on both sides of it are.

use std::collections::HashMap;

use super::text;

/// A single gutter-less line counts on its own only when it is unique in the file and at least
/// this long (trimmed): `return x` alone says nothing of where it is, `def merge_attrs(` does.
const DISTINCTIVE_CHARS: usize = 12;

/// The runs of lines of `file` (within `range`, 1-based inclusive; `None`: all) that `output`
/// shows, 1-based inclusive, in order.
pub fn shown_runs(file: &str, range: Option<(u64, u64)>, output: &str) -> Vec<(u64, u64)> {
    let lines = text::lines(file);
    let n = lines.len() as u64;
    let (a, b) = range.unwrap_or((1, n));
    let (a, b) = (a.max(1), b.min(n));
    if a > b || output.is_empty() {
        return Vec::new();
    }
    let out: Vec<&str> = output.lines().map(str::trim_end).collect();
    let at = |i: u64| lines[(i - 1) as usize].trim_end();
    let blank = |s: &str| s.trim().is_empty();
    let len = (b + 1 - a) as usize;

    // Per file line: matched through its own gutter, or the gutter-less output lines that end
    // with it (candidates, still to be placed).
    let mut exact = vec![false; len];
    let mut loose: Vec<Vec<usize>> = vec![Vec::new(); len];
    for i in a..=b {
        let l = at(i);
        if blank(l) {
            continue;
        }
        let slot = (i - a) as usize;
        for (k, o) in out.iter().enumerate() {
            let Some(prefix) = o.strip_suffix(l) else {
                continue;
            };
            match gutter(prefix) {
                Some(g) => exact[slot] |= g == i,
                None => loose[slot].push(k),
            }
        }
    }

    // The neighbours a gutter-less match is checked against: the nearest non-blank line on
    // each side, in the file (within the range) and in the output. Candidate lists are sorted
    // (built in output order), so a check is a binary search: a `cat` of a file with a thousand
    // `    )` lines stays linearithmic.
    let nonblank_neighbours = |n: usize, is_blank: &dyn Fn(usize) -> bool| {
        let mut prev = vec![None; n];
        let mut next = vec![None; n];
        let mut last = None;
        for (j, p) in prev.iter_mut().enumerate() {
            *p = last;
            if !is_blank(j) {
                last = Some(j);
            }
        }
        last = None;
        for (j, x) in next.iter_mut().enumerate().rev() {
            *x = last;
            if !is_blank(j) {
                last = Some(j);
            }
        }
        (prev, next)
    };
    let (prev_line, next_line) = nonblank_neighbours(len, &|j| blank(at(a + j as u64)));
    let (prev_out, next_out) = nonblank_neighbours(out.len(), &|j| blank(out[j]));
    let pair = |slot: Option<usize>, k: Option<usize>| match (slot, k) {
        (Some(slot), Some(k)) => loose[slot].binary_search(&k).is_ok(),
        _ => false,
    };
    let mut counts: Option<HashMap<&str, u32>> = None;
    let mut shown: Vec<bool> = Vec::with_capacity(len);
    for i in a..=b {
        let slot = (i - a) as usize;
        let placed = exact[slot]
            || loose[slot]
                .iter()
                .any(|&k| pair(prev_line[slot], prev_out[k]) || pair(next_line[slot], next_out[k]));
        let distinctive = !placed && !loose[slot].is_empty() && {
            let key = at(i).trim();
            let counts = counts.get_or_insert_with(|| {
                let mut m = HashMap::new();
                for l in &lines {
                    *m.entry(l.trim()).or_insert(0u32) += 1;
                }
                m
            });
            key.chars().count() >= DISTINCTIVE_CHARS && counts.get(key) == Some(&1)
        };
        shown.push(placed || distinctive);
    }
    for k in 0..len {
        if blank(at(a + k as u64)) {
            let prev = k > 0 && shown[k - 1];
            let next = k + 1 < len && shown[k + 1];
            shown[k] = prev && next;
        }
    }

    let mut runs = Vec::new();
    let mut start = None;
    for (k, on) in shown.iter().copied().chain([false]).enumerate() {
        let i = a + k as u64;
        match (on, start) {
            (true, None) => start = Some(i),
            (false, Some(s0)) => {
                runs.push((s0, i - 1));
                start = None;
            }
            _ => {}
        }
    }
    runs
}

/// The line number a gutter before a line's text gives: `   294\t`, `294:`, `294-` (grep's
/// context lines), `path/to/f.py:294:`, `   294→` (a Read tool). The number must stand alone
/// (start of the prefix, or after a space, tab, `:` or grep's `-`), so `file_v2:` is not line 2.
fn gutter(prefix: &str) -> Option<u64> {
    let p = prefix.trim_end_matches([' ', '\t', ':', '-', '|', '→']);
    let digits = p.len() - p.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    if digits == 0 {
        return None;
    }
    let (before, number) = p.split_at(p.len() - digits);
    let stands_alone = before
        .chars()
        .next_back()
        .is_none_or(|c| matches!(c, ' ' | '\t' | ':' | '-'));
    if stands_alone {
        number.parse().ok()
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "def f():\n    return 1\n\ndef g():\n    return 2\n";

    #[test]
    fn a_command_shows_the_lines_its_output_holds() {
        // grep -n showed one line; cat showed all; a scan that printed nothing showed nothing
        assert_eq!(shown_runs(FILE, None, "4:def g():"), vec![(4, 4)]);
        assert_eq!(shown_runs(FILE, None, FILE), vec![(1, 5)]);
        assert_eq!(shown_runs(FILE, None, ""), vec![]);
        // nl -ba | sed -n 2,4p: gutters first; the blank line goes with its neighbours
        let out = "     2\t    return 1\n     3\t\n     4\tdef g():";
        assert_eq!(shown_runs(FILE, Some((1, 5)), out), vec![(2, 4)]);
        assert_eq!(shown_runs(FILE, Some((4, 9)), out), vec![(4, 4)]);
    }

    /// The bug this module exists for: `sed -n '2,3p;8,9p'` of a file where `    )` closes
    /// many calls showed two places, not every `)` of the file.
    #[test]
    fn a_gutter_names_the_one_line_it_shows() {
        let file = "a(\n    x,\n    )\nb(\n    y,\n    )\nc(\n    z,\n    )\n";
        let out = "     2\t    x,\n     3\t    )\n     8\t    z,\n     9\t    )";
        assert_eq!(shown_runs(file, None, out), vec![(2, 3), (8, 9)]);
        // grep -n context lines and a path before the number
        let out = "f.py:5:    y,\nf.py-6-    )";
        assert_eq!(shown_runs(file, None, out), vec![(5, 6)]);
        // a Read tool's arrow
        assert_eq!(shown_runs(file, None, "     6→    )"), vec![(6, 6)]);
    }

    #[test]
    fn a_line_without_a_gutter_needs_a_neighbour_or_to_be_unique() {
        let file = "a(\n    x,\n    )\nb(\n    y,\n    )\ndef distinctive_name(arg):\n";
        // a lone `)` could be any of them: nothing
        assert_eq!(shown_runs(file, None, "    )"), vec![]);
        // with the line before it, it is placed
        assert_eq!(shown_runs(file, None, "    y,\n    )"), vec![(5, 6)]);
        // a unique, long enough line is placed alone (grep without -n)
        assert_eq!(
            shown_runs(file, None, "def distinctive_name(arg):"),
            vec![(7, 7)]
        );
        // a short unique line is not: `b(` says little of where the agent is
        assert_eq!(shown_runs(file, None, "b("), vec![]);
    }

    #[test]
    fn a_whole_file_of_repeated_lines_is_shown_whole() {
        // `cat` of a file where most lines are the same `    )`: each is placed by its
        // neighbours, and the candidates (every `)` of the output for every `)` of the file)
        // are searched, not scanned
        let file: String = (0..3000)
            .map(|k| {
                if k % 3 == 0 {
                    format!("call_{k}(\n")
                } else {
                    "    )\n".to_string()
                }
            })
            .collect();
        assert_eq!(shown_runs(&file, None, &file), vec![(1, 3000)]);
        // the same lines without their first call: lines 2-3000
        let tail = file.split_once('\n').map(|(_, t)| t).unwrap_or_default();
        assert_eq!(shown_runs(&file, None, tail), vec![(2, 3000)]);
    }

    #[test]
    fn gutters_stand_alone() {
        assert_eq!(gutter("   294\t"), Some(294));
        assert_eq!(gutter("294:"), Some(294));
        assert_eq!(gutter("src/a.py:294:"), Some(294));
        assert_eq!(gutter("file_v2:"), None);
        assert_eq!(gutter("    "), None);
        assert_eq!(gutter(""), None);
    }
}
