//! Token accounting and the final fit.
//!
//! Counts use tiktoken's `o200k_base`, like the world. Every string a projection contains is
//! counted exactly once per distinct content and memoized by a hash of what determines it (file
//! content hash, lines shown, gutter style), so an unchanged file is never re-tokenized. What the
//! providers add around the strings (role markers, block framing, JSON keys) is estimated with
//! fixed, deliberately generous constants: the reported figure is an upper bound of the text
//! tokens, not an exact provider count (Claude's tokenizer is not public).
//!
//! The policy chooses with estimated costs; [`fit`] then checks the real total and drops parts
//! until it fits, in a fixed order: entries (unpinned, oldest first), command outputs (oldest
//! first), structured state, framing, the last step, and finally the goal (replaced by a
//! one-word user message). What a last step points at instead of repeating it goes last among
//! the entries, and when it goes the step gets its recorded result back. If even that does not fit, the request fails with
//! [`ProjectionError::BudgetTooSmall`].

use std::sync::OnceLock;

use crate::world::tokens::{self, TokenCounter, TokenizerError};

use super::parts::Input;
use super::request::Format;
use super::{DropReason, Dropped, Part, ProjectionError};

/// Per message (role marker, separators), in any format.
pub const MESSAGE_OVERHEAD: u64 = 4;
/// Per content block (type marker, framing).
pub const BLOCK_OVERHEAD: u64 = 3;
/// Per synthesized call: a tool_use block, its tool_result block (or OpenAI `tool` message) and
/// their type markers, beyond the id, name, input and result strings.
pub const CALL_OVERHEAD: u64 = 12;
/// Per piece of the text format: the blank line joining it to the next, and the slack of
/// tokenizing pieces separately (a token may straddle a boundary).
pub const TEXT_PIECE_OVERHEAD: u64 = 3;
/// Per entry of the json format: its keys and metadata values.
pub const JSON_ENTRY_OVERHEAD: u64 = 48;
/// Per top-level field of the json format.
pub const JSON_FIELD_OVERHEAD: u64 = 6;

/// Memo of counts, keyed by a hash of what determined the string. Shared by every world in
/// the process, bounded: a miss only costs one tokenization.
fn memo() -> &'static TokenCounter {
    static MEMO: OnceLock<TokenCounter> = OnceLock::new();
    MEMO.get_or_init(|| TokenCounter::new(1 << 16))
}

/// Tokens of `s`, memoized by its own hash (for short or rarely repeated strings).
pub fn count_str(s: &str) -> Result<u64, TokenizerError> {
    if s.is_empty() {
        return Ok(0);
    }
    let h = tokens::hash(s.as_bytes());
    memo().count(&h, s.as_bytes()).map(u64::from)
}

/// Tokens of `s`, memoized by `key`, which must determine `s` completely (hashing a large
/// rendered file on every projection would cost more than the lookup saves).
pub fn count_keyed(key: &[u8; 32], s: &str) -> Result<u64, TokenizerError> {
    if s.is_empty() {
        return Ok(0);
    }
    memo().count(key, s.as_bytes()).map(u64::from)
}

/// The total the projection reports for `format`.
pub fn total(input: &Input, format: Format) -> u64 {
    let mut t: u64 = 0;
    let mut add = |n: u64| t = t.saturating_add(n);
    if let Some(f) = &input.framing {
        add(f.cost);
    }
    add(input.goal.cost);
    for e in &input.entries {
        add(e.cost);
    }
    if let Some(s) = &input.state {
        add(s.cost);
    }
    for c in &input.commands {
        add(c.cost);
    }
    if let Some(s) = &input.step {
        add(s.cost);
    }
    if format.is_messages() {
        add(input.tools_cost(format));
    }
    t
}

/// Shows the last step's result as recorded again, if it pointed at parts of the stream: one of
/// them is about to go.
fn restore_step(input: &mut Input) {
    if let Some(s) = &mut input.step
        && let Some(v) = s.verbatim.take()
    {
        *s = *v;
    }
}

/// Drops parts until the projection fits `budget` (see the module comment for the order).
pub fn fit(input: &mut Input, budget: u64, format: Format) -> Result<(), ProjectionError> {
    if total(input, format) <= budget {
        return Ok(());
    }
    // Entries: unpinned before pinned, oldest change first; what the last step points at goes
    // with the pinned ones.
    let points_at = |input: &Input, key: &std::path::Path| {
        input
            .step
            .as_ref()
            .is_some_and(|s| s.points_at.iter().any(|p| p == key))
    };
    let mut order: Vec<usize> = (0..input.entries.len()).collect();
    order.sort_by_key(|&i| {
        let e = &input.entries[i];
        (
            e.pinned || points_at(input, &e.path),
            e.order_seq,
            e.path.clone(),
        )
    });
    let mut gone = vec![false; input.entries.len()];
    let mut over = total(input, format) - budget;
    // Entries marked gone still count in `total` until they are removed below.
    let mut dropped: u64 = 0;
    for i in order {
        if over == 0 {
            break;
        }
        gone[i] = true;
        let cost = input.entries[i].cost;
        input.report.evicted.push(Dropped {
            part: Part::Entry,
            path: Some(input.entries[i].display.clone()),
            reason: DropReason::OverBudgetAfterRender,
            tokens: cost,
        });
        over = over.saturating_sub(cost);
        dropped = dropped.saturating_add(cost);
        if points_at(input, &input.entries[i].path) {
            restore_step(input);
            over = total(input, format)
                .saturating_sub(dropped)
                .saturating_sub(budget);
        }
    }
    let mut idx = 0;
    input.entries.retain(|_| {
        let keep = !gone[idx];
        idx += 1;
        keep
    });
    // The tool definitions go away with the last call, so recompute rather than trust `over`.
    while total(input, format) > budget && !input.commands.is_empty() {
        let c = input.commands.remove(0);
        if points_at(input, &super::parts::command_key(&c)) {
            restore_step(input);
        }
        input.report.evicted.push(Dropped {
            part: Part::Command,
            path: Some(c.command.clone()),
            reason: DropReason::OverBudgetAfterRender,
            tokens: c.cost,
        });
    }
    let drop_text = |input: &mut Input, part: Part| {
        let slot = match part {
            Part::State => &mut input.state,
            _ => &mut input.framing,
        };
        if let Some(t) = slot.take() {
            input.report.evicted.push(Dropped {
                part,
                path: None,
                reason: DropReason::OverBudgetAfterRender,
                tokens: t.cost,
            });
        }
    };
    if total(input, format) > budget {
        drop_text(input, Part::State);
    }
    if total(input, format) > budget {
        drop_text(input, Part::Framing);
    }
    if total(input, format) > budget
        && let Some(s) = input.step.take()
    {
        input.report.evicted.push(Dropped {
            part: Part::LastStep,
            path: None,
            reason: DropReason::OverBudgetAfterRender,
            tokens: s.cost,
        });
    }
    if total(input, format) > budget && input.goal.is_goal {
        let cost = input.goal.cost;
        input.goal = input.minimal_goal(format)?;
        input.report.evicted.push(Dropped {
            part: Part::Goal,
            path: None,
            reason: DropReason::OverBudgetAfterRender,
            tokens: cost,
        });
    }
    let t = total(input, format);
    if t > budget {
        return Err(ProjectionError::BudgetTooSmall {
            budget,
            minimum: t,
            format,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_match_the_tokenizer_and_memoize() {
        let s = "fn main() { println!(\"hi\"); }";
        let n = count_str(s).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            Some(n),
            tokens::count_uncached(s.as_bytes()).ok().map(u64::from)
        );
        let key = tokens::hash(b"some key");
        let first = count_keyed(&key, s).unwrap_or_else(|e| panic!("{e}"));
        // Same key, other text: the memo answers, proving the count was not redone.
        assert_eq!(count_keyed(&key, "x").ok(), Some(first));
        assert_eq!(count_str("").ok(), Some(0));
    }
}
