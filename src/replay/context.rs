//! What a request carries, strategy-independent: a list of blocks (text that is billed, with
//! its token count and whether a cache breakpoint ends it), some of which show file content
//! ([`FileView`]: which lines of which file, as the context holds them).
//!
//! Built either from the trace's history ([`super::baseline`]) or from a projection body
//! ([`from_anthropic`]).

use std::collections::HashMap;

use serde_json::Value;

use super::trace::{Kind, Step, Trace};

/// Lines of a file as a context shows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileView {
    pub path: String,
    /// 1-based number of the first line shown.
    pub first: u64,
    pub lines: Vec<String>,
    /// The lines are somewhere in the file, position unknown.
    pub partial: bool,
}

impl FileView {
    pub fn bytes(&self) -> u64 {
        self.lines.iter().map(|l| l.len() as u64 + 1).sum()
    }
}

#[derive(Debug, Clone)]
pub struct Block {
    pub text: String,
    pub tokens: u64,
    pub breakpoint: bool,
    pub views: Vec<FileView>,
}

/// Exact o200k_base counts, memoized by content (the baseline recounts the same texts every
/// turn).
#[derive(Default)]
pub struct Counter {
    memo: HashMap<[u8; 32], u64>,
}

impl Counter {
    pub fn count(&mut self, text: &str) -> u64 {
        if text.is_empty() {
            return 0;
        }
        let h = *blake3::hash(text.as_bytes()).as_bytes();
        if let Some(n) = self.memo.get(&h) {
            return *n;
        }
        let n = crate::world::tokens::count_uncached(text.as_bytes())
            .map(u64::from)
            .unwrap_or((text.len() / 4) as u64);
        self.memo.insert(h, n);
        n
    }

    pub fn block(&mut self, text: String, views: Vec<FileView>) -> Block {
        Block {
            tokens: self.count(&text),
            text,
            breakpoint: false,
            views,
        }
    }
}

/// The file content a step's result (or call) puts into the context, as recorded. A refused
/// Write's content never reached the file: the context holds it as an attempt, not as a view.
pub fn step_views(step: &Step) -> Vec<FileView> {
    if step.refused() {
        return Vec::new();
    }
    let Some(path) = step.path.clone().filter(|_| step.in_repo()) else {
        return Vec::new();
    };
    let Some(content) = &step.content else {
        return Vec::new();
    };
    let all: Vec<String> = super::text::lines(content)
        .into_iter()
        .map(str::to_string)
        .collect();
    match step.kind {
        Kind::Write => vec![FileView {
            path,
            first: 1,
            lines: all,
            partial: false,
        }],
        Kind::Read if step.partial() => vec![FileView {
            path,
            first: 1,
            lines: all,
            partial: true,
        }],
        Kind::Read => match step.line_ranges() {
            None => vec![FileView {
                path,
                first: 1,
                lines: all,
                partial: false,
            }],
            Some(rs) => {
                // consecutive ranges share the content in order
                let mut out = Vec::new();
                let mut rest = all.as_slice();
                for (i, [a, b]) in rs.iter().copied().enumerate() {
                    let n = if i + 1 == rs.len() {
                        rest.len()
                    } else {
                        ((b + 1).saturating_sub(a) as usize).min(rest.len())
                    };
                    out.push(FileView {
                        path: path.clone(),
                        first: a,
                        lines: rest[..n].to_vec(),
                        partial: false,
                    });
                    rest = &rest[n..];
                }
                out
            }
        },
        _ => Vec::new(),
    }
}

/// Splits a `Read` result with a line-number gutter (`12\tline` or `    12→line`) into its
/// first line number and lines; `None` if some line has no gutter (a listing, a notice).
pub fn parse_gutter(content: &str) -> Option<(u64, Vec<String>)> {
    let mut first = None;
    let mut lines = Vec::new();
    for l in content.split('\n') {
        let t = l.trim_start();
        let (num, rest) = t.split_once('\t').or_else(|| t.split_once('→'))?;
        let n: u64 = num.parse().ok()?;
        first.get_or_insert(n);
        lines.push(rest.to_string());
    }
    Some((first?, lines))
}

fn result_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The blocks of an anthropic body: system text, then every content block of every message.
/// `Read` calls answered with a numbered result become file views; the last real step (ids
/// `rp_<step>`) shows what that step showed.
pub fn from_anthropic(body: &Value, trace: &Trace, counter: &mut Counter) -> Vec<Block> {
    let mut out = Vec::new();
    let cc = |b: &Value| b.get("cache_control").is_some();
    if let Some(sys) = body.get("system").and_then(Value::as_array) {
        for b in sys {
            let mut blk = counter.block(
                b.get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                Vec::new(),
            );
            blk.breakpoint = cc(b);
            out.push(blk);
        }
    }
    let mut calls: HashMap<String, (String, Value)> = HashMap::new();
    let empty = Vec::new();
    let messages = body
        .get("messages")
        .and_then(Value::as_array)
        .unwrap_or(&empty);
    for m in messages {
        let content = match m.get("content") {
            Some(Value::String(s)) => {
                out.push(counter.block(s.clone(), Vec::new()));
                continue;
            }
            Some(Value::Array(a)) => a,
            _ => continue,
        };
        for b in content {
            let ty = b.get("type").and_then(Value::as_str).unwrap_or("");
            let mut blk = match ty {
                "text" => counter.block(
                    b.get("text")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                    Vec::new(),
                ),
                "tool_use" => {
                    let id = b
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let name = b
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let input = b.get("input").cloned().unwrap_or(Value::Null);
                    let text = format!("{name} {input}");
                    calls.insert(id, (name, input));
                    counter.block(text, Vec::new())
                }
                "tool_result" => {
                    let id = b
                        .get("tool_use_id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                    let text = result_text(b.get("content").unwrap_or(&Value::Null));
                    let is_error = b.get("is_error").and_then(Value::as_bool).unwrap_or(false);
                    let mut views = Vec::new();
                    if let Some(n) = id.strip_prefix("rp_").and_then(|n| n.parse::<usize>().ok()) {
                        if let Some(s) = trace.steps.iter().find(|s| s.step as usize == n) {
                            views = step_views(s);
                        }
                    } else if let (Some((_, input)), false) = (calls.get(&id), is_error) {
                        let path = input
                            .as_object()
                            .and_then(|o| o.values().find_map(|v| v.as_str().map(str::to_string)));
                        if let (Some(path), Some((first, lines))) = (path, parse_gutter(&text)) {
                            views.push(FileView {
                                path,
                                first,
                                lines,
                                partial: false,
                            });
                        }
                    }
                    counter.block(text, views)
                }
                "thinking" | "redacted_thinking" => continue,
                _ => counter.block(b.to_string(), Vec::new()),
            };
            blk.breakpoint = cc(b);
            out.push(blk);
        }
    }
    if let Some(tools) = body.get("tools").and_then(Value::as_array) {
        if !tools.is_empty() {
            // tools come first in the cached prefix; counted once as a block
            let t = counter.block(Value::Array(tools.clone()).to_string(), Vec::new());
            out.insert(0, t);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gutters() {
        assert_eq!(
            parse_gutter("3\ta\n4\tb"),
            Some((3, vec!["a".into(), "b".into()]))
        );
        assert_eq!(parse_gutter("    7→x"), Some((7, vec!["x".into()])));
        assert_eq!(parse_gutter("src/\nmain.rs"), None);
    }
}
