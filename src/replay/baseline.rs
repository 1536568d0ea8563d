//! The growing-history strategies, built from the trace as the agent sent it:
//!
//! - `baseline`: system prompt, initial prompt, then every assistant text, tool call and tool
//!   result so far, verbatim. Cache breakpoints: end of the prompt and end of the request
//!   (where Claude Code puts them).
//! - `last5`: the same, with every tool result but the last 5 replaced by a one-line
//!   placeholder (the SWE-agent / OpenHands practice).
//! - `anchor_tail`: the prompt, then the first 2 and the last 6 turns verbatim.

use super::context::{Block, Counter, step_views};
use super::trace::{Kind, Trace};

pub const CLEARED: &str = "[Old tool result content cleared]";

/// One turn of history: the assistant's message (text + calls) and the results.
#[derive(Debug, Clone)]
pub struct TurnBlocks {
    pub turn: u64,
    pub assistant: Vec<Block>,
    pub results: Vec<Block>,
}

/// The prompt blocks (system, initial prompt), shared by the history strategies.
pub fn prompt(trace: &Trace, counter: &mut Counter) -> Vec<Block> {
    let mut v = Vec::new();
    if let Some(s) = trace.header.system_prompt.clone().filter(|s| !s.is_empty()) {
        v.push(counter.block(s, Vec::new()));
    }
    v.push(counter.block(trace.first_prompt(), Vec::new()));
    if let Some(b) = v.last_mut() {
        b.breakpoint = true;
    }
    v
}

/// The history blocks of one turn's steps.
pub fn turn_blocks(trace: &Trace, turn: u64, steps: &[usize], counter: &mut Counter) -> TurnBlocks {
    let mut assistant = Vec::new();
    let mut results = Vec::new();
    for &i in steps {
        let s = &trace.steps[i];
        let text = s.assistant_text.clone().unwrap_or_default();
        if !text.is_empty() {
            assistant.push(counter.block(text.clone(), Vec::new()));
        }
        if s.kind != Kind::Message {
            // the call, unless the text already carries it (mini-swe-agent's ```bash blocks)
            let cmd = s.command.as_deref().unwrap_or("");
            if cmd.is_empty() || !text.contains(cmd) {
                let call = format!("{} {}", s.tool_name(), s.call_input());
                let views = if s.kind == Kind::Write {
                    step_views(s)
                } else {
                    Vec::new()
                };
                assistant.push(counter.block(call, views));
            }
        }
        let out = s.output.clone().unwrap_or_default();
        let views = if s.kind == Kind::Read {
            step_views(s)
        } else {
            Vec::new()
        };
        results.push(counter.block(out, views));
    }
    TurnBlocks {
        turn,
        assistant,
        results,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum History {
    Baseline,
    LastResults(usize),
    AnchorTail { first: usize, last: usize },
}

impl History {
    pub fn name(self) -> String {
        match self {
            History::Baseline => "baseline".into(),
            History::LastResults(n) => format!("last{n}"),
            History::AnchorTail { first, last } => format!("anchor{first}_tail{last}"),
        }
    }

    /// The request this strategy sends, given the prompt and the turns so far.
    pub fn request(
        self,
        prompt: &[Block],
        turns: &[TurnBlocks],
        counter: &mut Counter,
    ) -> Vec<Block> {
        let mut out: Vec<Block> = prompt.to_vec();
        match self {
            History::Baseline => {
                for t in turns {
                    out.extend(t.assistant.iter().cloned());
                    out.extend(t.results.iter().cloned());
                }
            }
            History::LastResults(n) => {
                let total: usize = turns.iter().map(|t| t.results.len()).sum();
                let mut seen = 0usize;
                for t in turns {
                    out.extend(t.assistant.iter().cloned());
                    for r in &t.results {
                        seen += 1;
                        if total - seen < n {
                            out.push(r.clone());
                        } else {
                            out.push(counter.block(CLEARED.to_string(), Vec::new()));
                        }
                    }
                }
            }
            History::AnchorTail { first, last } => {
                let n = turns.len();
                for (i, t) in turns.iter().enumerate() {
                    if i < first || i + last >= n {
                        out.extend(t.assistant.iter().cloned());
                        out.extend(t.results.iter().cloned());
                    }
                }
            }
        }
        if let Some(b) = out.last_mut() {
            b.breakpoint = true;
        }
        out
    }
}
