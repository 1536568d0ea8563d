//! What a request carries, strategy-independent: a list of blocks (text that is billed, with
//! its token count and whether a cache breakpoint ends it), some of which show file content
//! ([`FileView`]: which lines of which file, as the context holds them).
//!
//! Built either from the trace's history ([`super::baseline`]) or from a projection body
//! ([`from_anthropic`]).

use std::collections::HashMap;
use std::path::Path;

use serde_json::Value;

use super::trace::{Kind, Step, Trace};
use crate::world::notebook;

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
                // the content holds the ranges' lines in file order, each once (`sed -n`
                // prints so); the last run takes what is left, however long it says it is
                let rs = super::text::merged_ranges(&rs);
                let mut out = Vec::new();
                let mut rest = all.as_slice();
                for (i, &(a, b)) in rs.iter().enumerate() {
                    let n = if i + 1 == rs.len() {
                        rest.len()
                    } else {
                        usize::try_from(b.saturating_sub(a).saturating_add(1))
                            .unwrap_or(usize::MAX)
                            .min(rest.len())
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

/// The file content a step's result shows as the socket got it: a read whose output was cut to
/// fit the socket ([`crate::socket::fit`]) no longer shows its middle, and which of its lines the head
/// and tail hold is not known here; it shows no view, as a read that mini-swe-agent cut (no
/// `content`) shows none in the history.
fn served_step_views(step: &Step) -> Vec<FileView> {
    let cut = step.kind == Kind::Read
        && crate::socket::fit::too_long(step.output.as_deref().unwrap_or(""));
    if cut { Vec::new() } else { step_views(step) }
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
                            views = served_step_views(s);
                        }
                    } else if let (Some((_, input)), false) = (calls.get(&id), is_error) {
                        let path = input
                            .as_object()
                            .and_then(|o| o.values().find_map(|v| v.as_str().map(str::to_string)));
                        if let (Some(path), Some((first, lines))) =
                            (path.clone(), parse_gutter(&text))
                        {
                            views.push(FileView {
                                path,
                                first,
                                lines,
                                partial: false,
                            });
                        } else if let Some(path) = path.filter(|p| {
                            notebook::is_notebook(Path::new(p)) && text.starts_with("<cell id=")
                        }) {
                            // A notebook's cells (world::notebook) have no gutter and no line of
                            // the file's JSON: placed nowhere, each must be a line of the cells.
                            views.push(FileView {
                                path,
                                first: 1,
                                lines: text.split('\n').map(str::to_owned).collect(),
                                partial: true,
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
    if let Some(tools) = body.get("tools").and_then(Value::as_array)
        && !tools.is_empty()
    {
        // tools come first in the cached prefix; counted once as a block
        let t = counter.block(Value::Array(tools.clone()).to_string(), Vec::new());
        out.insert(0, t);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(ranges: &str, content: &str) -> Step {
        serde_json::from_str(&format!(
            r#"{{"record":"step","step":0,"turn":1,"kind":"read","path":"f","ranges":{ranges},"content":{}}}"#,
            serde_json::Value::from(content)
        ))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn placed(views: &[FileView]) -> Vec<(u64, Vec<&str>)> {
        views
            .iter()
            .map(|v| (v.first, v.lines.iter().map(String::as_str).collect()))
            .collect()
    }

    #[test]
    fn several_ranges_are_placed_in_file_order_each_line_once() {
        // sed -n '8,9p;1,2p' prints lines 1, 2, 8, 9
        let v = step_views(&read("[[8,9],[1,2]]", "l1\nl2\nl8\nl9\n"));
        assert_eq!(placed(&v), [(1, vec!["l1", "l2"]), (8, vec!["l8", "l9"])]);
        // sed -n '1,5p;3,8p' prints lines 1 to 8 once
        let all = "l1\nl2\nl3\nl4\nl5\nl6\nl7\nl8\n";
        let v = step_views(&read("[[1,5],[3,8]]", all));
        assert_eq!(
            placed(&v),
            [(1, vec!["l1", "l2", "l3", "l4", "l5", "l6", "l7", "l8"])]
        );
        // sed -n '8,$p;1,2p': the sentinel end is not a length
        let v = step_views(&read(
            "[[8,18446744073709551615],[1,2]]",
            "l1\nl2\nl8\nl9\nl10\n",
        ));
        assert_eq!(
            placed(&v),
            [(1, vec!["l1", "l2"]), (8, vec!["l8", "l9", "l10"])]
        );
    }

    #[test]
    fn the_last_step_of_a_projection_shows_no_view_when_its_read_was_cut_to_fit() {
        let h = r#"{"record":"header","format":"worldfs-trace/1","trace_id":"t"}"#;
        let file: String = (1..=40_000).map(|k| format!("line {k}\n")).collect();
        let read = |step: u64, output: &str| {
            serde_json::json!({"record": "step", "step": step, "turn": step + 1, "kind": "read",
                "path": "f", "content": file, "output": output})
            .to_string()
        };
        let text = format!("{h}\n{}\n{}", read(0, &file), read(1, "short"));
        let trace = Trace::parse(std::path::Path::new("t.jsonl"), &text)
            .unwrap_or_else(|e| panic!("{e:#}"));
        let body = |id: &str| {
            serde_json::json!({"messages": [{"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": id, "content": "head … tail"}]}]})
        };
        let views = |id| {
            from_anthropic(&body(id), &trace, &mut Counter::default())
                .into_iter()
                .flat_map(|b| b.views)
                .count()
        };
        // the socket got the head and tail of step 0's output, not the file
        assert_eq!(views("rp_0"), 0);
        assert_eq!(views("rp_1"), 1);
    }

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
