//! The clairvoyant floor: what a context manager that knew the next step would send.
//!
//! Not a strategy anyone can run: it sends the agent's instructions, its last turn as the agent
//! saw it, and exactly the current lines of every file the next turn reads or edits that the
//! agent had seen before (the whole file for a whole read), nothing else: no other file, no
//! command output, no older turn. So it holds every need fresh by construction, and any
//! strategy that holds them (or resends the instructions every turn) sends at least this much.
//! Its ratios to the baseline say how far a target is from what is possible at all: a target
//! below them cannot be met by keeping what the agent needs, however well it is predicted.
//!
//! Billing, a floor too: the instructions and every needed line are billed as read from the
//! prompt cache (0.1x; the agent saw each line before, so some request could have written it),
//! the last turn as sent once, uncached (1x: it is new, nothing could have cached it), and the
//! instructions as written (1.25x) at the first turn. A request that holds more than this, or
//! in another order, pays at least as much.

use super::apply::{Applier, clean_rel};
use super::baseline::TurnBlocks;
use super::caching::Bill;
use super::context::{Block, Counter, FileView};
use super::metrics::{Need, Seen};
use super::text;

/// The oracle's request before a turn whose steps need `needs`, after `last` (the turn before;
/// `None` at the first turn), and its bill.
pub fn request(
    prompt: &[Block],
    last: Option<&TurnBlocks>,
    needs: &[Need],
    seen: &Seen,
    applier: &Applier,
    counter: &mut Counter,
) -> (Vec<Block>, Bill) {
    let mut out: Vec<Block> = prompt.to_vec();
    let instructions: u64 = prompt.iter().map(|b| b.tokens).sum();
    if let Some(t) = last {
        out.extend(t.assistant.iter().chain(&t.results).cloned());
    }
    let new: u64 = out[prompt.len()..].iter().map(|b| b.tokens).sum();
    let mut needed = 0u64;
    for (path, first, lines) in needed_lines(needs, seen, applier) {
        let mut text = format!("{path}\n");
        for (i, l) in lines.iter().enumerate() {
            text.push_str(&format!("{}\t{l}\n", first + i as u64));
        }
        let view = FileView {
            path,
            first,
            lines,
            partial: false,
        };
        let block = counter.block(text, vec![view]);
        needed += block.tokens;
        out.push(block);
    }
    let bill = if last.is_none() {
        Bill::new(new + needed, instructions, 0)
    } else {
        Bill::new(new, 0, instructions + needed)
    };
    (out, bill)
}

/// The current lines each need asks for: `(path, first line, lines)`, one run per stretch of
/// needed lines. Needs of files the agent has not seen are left out, as every strategy must,
/// and so are needs of files that are gone.
fn needed_lines(needs: &[Need], seen: &Seen, applier: &Applier) -> Vec<(String, u64, Vec<String>)> {
    let mut out = Vec::new();
    for (path, runs) in runs_per_file(needs, |p| seen.knows(p)) {
        let Some(text) = clean_rel(&path).and_then(|r| applier.disk_text(&r)) else {
            continue;
        };
        for (first, lines) in cut(&text, &runs) {
            out.push((path.clone(), first, lines));
        }
    }
    out
}

/// The needed runs of lines per file (1-based, inclusive; a whole-file need is `1..=MAX`),
/// overlapping and adjacent ones merged ([`text::merged_ranges`]), files in the order first
/// needed; only files `knows`.
fn runs_per_file(needs: &[Need], knows: impl Fn(&str) -> bool) -> Vec<(String, Vec<(u64, u64)>)> {
    let mut per_file: Vec<(String, Vec<[u64; 2]>)> = Vec::new();
    for n in needs.iter().filter(|n| knows(&n.path)) {
        let (a, b) = n.lines.unwrap_or((1, u64::MAX));
        match per_file.iter_mut().find(|(p, _)| *p == n.path) {
            Some((_, ranges)) => ranges.push([a, b]),
            None => per_file.push((n.path.clone(), vec![[a, b]])),
        }
    }
    per_file
        .into_iter()
        .map(|(p, ranges)| (p, text::merged_ranges(&ranges)))
        .collect()
}

/// The lines of `text` in each run, as `(first line, lines)`; runs past the end are cut at it,
/// and runs wholly past it are left out.
fn cut(text: &str, runs: &[(u64, u64)]) -> Vec<(u64, Vec<String>)> {
    let lines: Vec<&str> = text.lines().collect();
    let n = lines.len() as u64;
    runs.iter()
        .filter(|(a, _)| *a <= n)
        .map(|&(a, b)| {
            let shown = lines[(a - 1) as usize..b.min(n) as usize]
                .iter()
                .map(|l| (*l).to_string())
                .collect();
            (a, shown)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(path: &str, lines: Option<(u64, u64)>) -> Need {
        Need {
            path: path.into(),
            lines,
            is_read: true,
        }
    }

    #[test]
    fn needs_merge_per_file_and_unseen_files_are_left_out() {
        let needs = [
            need("b.py", Some((10, 20))),
            need("a.py", Some((5, 6))),
            need("b.py", Some((21, 30))),
            need("b.py", Some((1, 3))),
            need("new.py", None),
            need("a.py", Some((6, 9))),
        ];
        let runs = runs_per_file(&needs, |p| p != "new.py");
        assert_eq!(
            runs,
            vec![
                ("b.py".to_string(), vec![(1, 3), (10, 30)]),
                ("a.py".to_string(), vec![(5, 9)]),
            ]
        );
        // a whole read swallows the ranges of the same file
        let runs = runs_per_file(&[need("a.py", Some((5, 6))), need("a.py", None)], |_| true);
        assert_eq!(runs, vec![("a.py".to_string(), vec![(1, u64::MAX)])]);
    }

    #[test]
    fn runs_are_cut_at_the_end_of_the_file() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(
            cut(text, &[(2, 2), (3, u64::MAX), (9, 12)]),
            vec![(2, vec!["two".to_string()]), (3, vec!["three".to_string()])]
        );
        assert_eq!(
            cut(text, &[(1, u64::MAX)]),
            vec![(1, vec!["one".into(), "two".into(), "three".into()])]
        );
    }
}
