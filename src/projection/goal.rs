//! The goal as the first user message: cut to its share of the budget when it is too long, so
//! the world it is about still fits.

use super::budget::{self, JSON_FIELD_OVERHEAD};
use super::parts::{GoalPart, Report, text_piece_cost, user_text_cost};
use super::request::Format;
use super::text;
use super::{DropReason, Dropped, Part, ProjectionError};

/// First user message when the harness has not set a goal: the messages must start with a
/// user turn, and a fixed text keeps the prefix stable.
pub const NO_GOAL_TEXT: &str = "No goal has been set for this session yet. The files below are \
shown as they are now.";

/// The most of the budget the goal may take: the rest is for the world it is about.
const GOAL_MAX_SHARE_PERCENT: u64 = 50;
/// Lines longer than this are cut in pieces of this size when a goal is shortened.
const GOAL_PIECE_BYTES: usize = 400;

/// A goal over its share of `budget`, cut to its beginning and end around a marker saying how
/// many lines are left out (`goal.get` still has it whole). The task statement tends to come
/// first and the instructions on how to finish last; dropping the goal whole (what the final fit
/// would do) leaves the model with nothing to work towards. Deterministic, so the shortened
/// goal is the same bytes on every turn and stays in the cached prefix.
pub(super) fn shorten_goal(goal: String, budget: u64, report: &mut Report) -> String {
    let limit = budget.saturating_mul(GOAL_MAX_SHARE_PERCENT) / 100;
    let count = |s: &str| budget::count_str(s).unwrap_or(s.len() as u64 / 3);
    let whole = count(&goal);
    if whole <= limit {
        return goal;
    }
    // lines, and long lines in pieces, so a goal that is one long line can be cut too
    let lines: Vec<&str> = goal
        .split_inclusive('\n')
        .flat_map(|l| {
            let mut pieces = Vec::new();
            let mut rest = l;
            while rest.len() > GOAL_PIECE_BYTES {
                let mut at = GOAL_PIECE_BYTES;
                while !rest.is_char_boundary(at) {
                    at -= 1;
                }
                pieces.push(&rest[..at]);
                rest = &rest[at..];
            }
            pieces.push(rest);
            pieces
        })
        .collect();
    let cut = |keep: usize| -> String {
        // two thirds of what is kept from the start, one third from the end
        let head = (keep * 2).div_ceil(3).min(lines.len());
        let tail = (keep - head.min(keep)).min(lines.len() - head);
        let left_out: usize = lines[head..lines.len() - tail]
            .iter()
            .map(|l| l.matches('\n').count())
            .sum::<usize>()
            .max(1);
        let mut out: String = lines[..head].concat();
        if !out.ends_with('\n') && !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!(
            "\n[... {left_out} lines of the task left out here to fit the token budget ...]\n\n"
        ));
        out.push_str(&lines[lines.len() - tail..].concat());
        out
    };
    // the most lines that fit, by bisection (a line may be long: zero lines always fits)
    let (mut lo, mut hi) = (0usize, lines.len().saturating_sub(1));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if count(&cut(mid)) <= limit {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let short = cut(lo);
    report.evicted.push(Dropped {
        part: Part::Goal,
        path: None,
        reason: DropReason::Shortened,
        tokens: whole.saturating_sub(count(&short)),
    });
    short
}

pub(super) fn goal_part(goal: Option<&str>, format: Format) -> Result<GoalPart, ProjectionError> {
    let real = goal.filter(|g| !g.trim().is_empty());
    let (text, is_goal) = match real {
        Some(g) => (g.to_owned(), true),
        None if format.is_messages() => (NO_GOAL_TEXT.to_owned(), false),
        None => (String::new(), false),
    };
    let cost = match format {
        _ if text.is_empty() => 0,
        Format::Text => text_piece_cost(&text::goal_piece(&text))?,
        Format::Json => JSON_FIELD_OVERHEAD + budget::count_str(&text)?,
        _ => user_text_cost(&text)?,
    };
    Ok(GoalPart {
        text,
        cost,
        is_goal,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_goal_over_half_the_budget_keeps_its_beginning_and_end() {
        let goal: String = (1..=400)
            .map(|i| format!("requirement {i}: the parser must accept input form {i}\n"))
            .collect();
        let count = |s: &str| budget::count_str(s).unwrap_or(u64::MAX);
        let mut report = Report::default();
        // fits its share: untouched, nothing reported
        let same = shorten_goal(goal.clone(), 2 * count(&goal), &mut report);
        assert_eq!(same, goal);
        assert!(report.evicted.is_empty());
        let short = shorten_goal(goal.clone(), 2000, &mut report);
        assert!(count(&short) <= 1000, "{}", count(&short));
        assert!(count(&short) > 800, "too much left out: {}", count(&short));
        assert!(short.starts_with("requirement 1: "));
        assert!(short.ends_with("requirement 400: the parser must accept input form 400\n"));
        assert!(short.contains("lines of the task left out here"));
        assert_eq!(report.evicted.len(), 1);
        assert_eq!(report.evicted[0].reason, DropReason::Shortened);
        // the same bytes every time (the cached prefix depends on it)
        assert_eq!(shorten_goal(goal.clone(), 2000, &mut report), short);
        // one long line is cut too
        let line = "word ".repeat(5000);
        let short = shorten_goal(line.clone(), 1000, &mut report);
        assert!(
            count(&short) <= 500 && short.starts_with("word word"),
            "{short}"
        );
    }
}
