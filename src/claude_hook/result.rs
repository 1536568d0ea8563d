//! A tool call's result as the model saw it, read from the event's `tool_response`.
//!
//! The response is the tool's data, not what the model was told: a Read's file without its
//! line numbers, an Edit's whole file before and after, an image's base64. The step (and an
//! output kept of it) says what the model read, no more: the response as it comes would spend
//! a projection's budget on what the model never saw. So each shape is told here as near as the
//! hook can to how the agent showed it; what the call showed or changed of a file (a Read's
//! lines, an edit's file and what it left there) is read from the same response.

use serde_json::{Value, json};

use super::answers;
use crate::socket::fit;
use crate::world::notebook;

/// The result as the model saw it, as near as the hook can tell: a Read's lines numbered the
/// way Claude Code numbers them (`N<TAB>line`, 2.1.228 and later), a Bash's output and errors.
pub(super) fn result_text(tool: &str, response: &Value) -> String {
    if tool == "Read"
        && response.get("type").and_then(Value::as_str) == Some("notebook")
        && let Some(cells) = response.pointer("/file/cells").and_then(Value::as_array)
    {
        return notebook_read_text(cells);
    }
    if tool == "Read"
        && let Some(file) = response.get("file")
        && let Some(content) = file.get("content").and_then(Value::as_str)
    {
        let start = file.get("startLine").and_then(Value::as_u64).unwrap_or(1);
        let mut out = String::with_capacity(content.len() + content.len() / 8);
        for (i, line) in content.lines().enumerate() {
            out.push_str(&format!("{}\t{line}\n", start + i as u64));
        }
        return out;
    }
    if let Some(stdout) = response.get("stdout").and_then(Value::as_str) {
        if let Some(shown) = persisted(response, stdout) {
            return shown;
        }
        let mut out = stdout.to_owned();
        if let Some(err) = response.get("stderr").and_then(Value::as_str)
            && !err.is_empty()
        {
            if !out.is_empty() && !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(err);
        }
        if response.get("interrupted").and_then(Value::as_bool) == Some(true) {
            out.push_str("\n[interrupted]");
        }
        return out;
    }
    // A NotebookEdit's carries the whole notebook before and after too; the model is told
    // which cell changed, and how.
    if tool == "NotebookEdit" && response.get("edit_mode").is_some() {
        let s = |k: &str| response.get(k).and_then(Value::as_str).unwrap_or_default();
        if !s("error").is_empty() {
            return s("error").to_owned();
        }
        let (cell, source) = (s("cell_id"), s("new_source"));
        return match s("edit_mode") {
            "insert" if cell.is_empty() => format!("Inserted a new cell with {source}"),
            "insert" => format!("Inserted cell {cell} with {source}"),
            "delete" => format!("Deleted cell {cell}"),
            _ => format!("Updated cell {cell} with {source}"),
        };
    }
    // An Edit's or a Write's result carries the whole file before (and after) the change; the
    // model is told only that the file changed, and the world shows the file as it is now.
    if matches!(tool, "Edit" | "MultiEdit" | "Write" | "NotebookEdit")
        && let Some(path) = response.get("filePath").and_then(Value::as_str)
    {
        return if response.get("type").and_then(Value::as_str) == Some("create") {
            format!("File created successfully at: {path}")
        } else {
            format!("The file {path} has been updated.")
        };
    }
    // An Agent call's result (the subagent's last message) and an MCP tool's: text blocks.
    if let Some(blocks) = response.get("content").and_then(Value::as_array) {
        let texts: Vec<&str> = blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect();
        if !texts.is_empty() {
            return texts.join("\n");
        }
    }
    // WebSearch: the query, then each result: the search's text, or the links it found.
    if tool == "WebSearch"
        && let Some(query) = response.get("query").and_then(Value::as_str)
        && let Some(results) = response.get("results").and_then(Value::as_array)
    {
        let mut out = format!("Web search results for query: {query:?}\n");
        for r in results {
            match (r.as_str(), r.get("content")) {
                (Some(text), _) => out.push_str(&format!("\n{text}\n")),
                (None, Some(links)) => out.push_str(&format!("\nLinks: {links}\n")),
                (None, None) => {}
            }
        }
        return out;
    }
    // AskUserQuestion: the input comes back with the user's answers, by question.
    if let Some(pairs) = answers::claude_code(response) {
        return answers::text(&pairs);
    }
    // Grep (files mode) and Glob: the paths, one per line.
    let mut text = match response.get("filenames").and_then(Value::as_array) {
        Some(names) if response.get("content").is_none() => {
            let names: Vec<&str> = names.iter().filter_map(Value::as_str).collect();
            names.join("\n")
        }
        _ => text_of(response),
    };
    // What the tool says of what it left out, as the model saw it: without it, a search cut at
    // its limit reads as if it found nothing more.
    let num = |k: &str| response.get(k).and_then(Value::as_u64);
    if tool == "Grep"
        && let Some(limit) = num("appliedLimit")
    {
        let offset = num("appliedOffset").map_or_else(String::new, |o| format!(", offset: {o}"));
        text.push_str(&format!(
            "\n\n[Showing results with pagination = limit: {limit}{offset}]"
        ));
    }
    if tool == "Glob" && response.get("truncated").and_then(Value::as_bool) == Some(true) {
        text.push_str("\n(Results are truncated. Consider using a more specific path or pattern.)");
    }
    text
}

/// How much of an output too large to send Claude Code shows the model (its "Preview (first
/// 2KB)").
const PERSISTED_PREVIEW_BYTES: usize = 2_000;

/// What the model saw of a Bash output Claude Code found too large to send (2.1.2xx and later:
/// the response names `persistedOutputPath`): where the whole output was saved, and its first
/// 2 KB, with its last lines when `stdout` holds them too. The hook's `stdout` has 30,000
/// characters of it, which shown whole would take most of a budget or, more often, not fit
/// and leave the model's view with nothing of the run.
fn persisted(response: &Value, stdout: &str) -> Option<String> {
    let path = response.get("persistedOutputPath")?.as_str()?;
    let size = match response.get("persistedOutputSize").and_then(Value::as_u64) {
        Some(n) if n >= 1024 * 1024 => format!(" ({:.1}MB)", n as f64 / (1024.0 * 1024.0)),
        Some(n) if n >= 1024 => format!(" ({:.1}KB)", n as f64 / 1024.0),
        Some(n) => format!(" ({n} bytes)"),
        None => String::new(),
    };
    // Whole lines: the head up to the last line end within the preview, the tail from the
    // first line start within it.
    let mut cut = PERSISTED_PREVIEW_BYTES.min(stdout.len());
    while !stdout.is_char_boundary(cut) {
        cut -= 1;
    }
    let head = match stdout[..cut].rfind('\n') {
        Some(i) if cut < stdout.len() => &stdout[..i],
        _ => &stdout[..cut],
    };
    let mut out = format!(
        "<persisted-output>\nOutput too large{size}. Full output saved to: {path}\n\n\
         Preview (first 2KB):\n{}\n",
        head.trim_end()
    );
    // Its end too, when Claude Code kept it in `stdout` (a line says the middle was left out).
    let holds_end = response
        .get("stdoutHoldsOutputEnd")
        .and_then(Value::as_bool)
        == Some(true);
    if holds_end && head.len() < stdout.len() {
        let mut from = stdout.len().saturating_sub(PERSISTED_PREVIEW_BYTES);
        while !stdout.is_char_boundary(from) {
            from += 1;
        }
        let tail = match stdout[from..].find('\n') {
            Some(i) if from > head.len() => &stdout[from + i + 1..],
            _ => &stdout[head.len()..],
        };
        out.push_str(&format!("...\n{}\n", tail.trim_end()));
    } else if head.len() < stdout.len() {
        out.push_str("...\n");
    }
    out.push_str("</persisted-output>");
    Some(out)
}

/// A notebook's Read as the model saw it: each cell as Read shows it (the world's rendering
/// too, [`notebook::cell_text`]), each output's text after a blank line, and a line for a
/// figure it sent as an image.
fn notebook_read_text(cells: &[Value]) -> String {
    let s = |v: &Value, k: &str| {
        v.get(k)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let mut blocks = Vec::new();
    for c in cells {
        let kind = c.get("cellType").and_then(Value::as_str).unwrap_or("code");
        let language = c
            .get("language")
            .and_then(Value::as_str)
            .unwrap_or("python");
        blocks.push(notebook::cell_text(
            &s(c, "cell_id"),
            kind,
            language,
            &s(c, "source"),
        ));
        for out in c
            .get("outputs")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let text = s(out, "text");
            if !text.is_empty() {
                blocks.push(format!("\n{text}"));
            }
            if let Some(image) = out.get("image") {
                let mime = image
                    .get("media_type")
                    .and_then(Value::as_str)
                    .unwrap_or("image");
                blocks.push(format!("\n[{mime} output, sent as an image]"));
            }
        }
    }
    blocks.join("\n")
}

/// A value as text: a string as it is, an object by its first text field, else compact JSON
/// with its long strings cut.
pub(super) fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        Value::Object(o) => ["content", "output", "result", "text", "message"]
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_str))
            .map_or_else(
                || fit::shorten_strings(v.clone()).to_string(),
                str::to_owned,
            ),
        // Content blocks (an MCP tool's answer, Codex's `view_image`): their texts, and a
        // word for each image or document, whose base64 data is no text a model reads.
        Value::Array(blocks)
            if blocks
                .iter()
                .any(|b| b.get("text").is_some() || is_media(b)) =>
        {
            // Blocks of other kinds (a tool reference, a resource link) are left out.
            blocks
                .iter()
                .filter_map(|b| match b.get("text").and_then(Value::as_str) {
                    Some(t) => Some(t),
                    None => is_media(b).then_some(MEDIA_SHOWN),
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
        _ => v.to_string(),
    }
}

/// What a result's image or document reads as in its text.
const MEDIA_SHOWN: &str = "[an image or a document, shown to the model]";

/// Whether a content block is an image or a document (Claude Code's `image`, `document`; the
/// Responses API's `input_image`, `input_file`).
fn is_media(block: &Value) -> bool {
    matches!(
        block.get("type").and_then(Value::as_str),
        Some("image" | "document" | "input_image" | "input_file")
    )
}

/// Whether a tool's response is images or documents alone: nothing to keep as text (`worldfs
/// proxy` keeps the pictures themselves).
pub(super) fn media_only(response: &Value) -> bool {
    response
        .as_array()
        .or_else(|| response.get("content").and_then(Value::as_array))
        .is_some_and(|blocks| !blocks.is_empty() && blocks.iter().all(is_media))
}

/// The lines a Read showed: from the result when it says (start and count), else from the
/// call's offset and limit. No lines: the whole file.
pub(super) fn read_view(tool: &str, input: &Value, response: &Value) -> Option<Value> {
    if tool != "Read" {
        return None;
    }
    let file = response.get("file");
    let path = file
        .and_then(|f| f.get("filePath"))
        .or_else(|| input.get("file_path"))
        .and_then(Value::as_str)?;
    let num = |v: Option<&Value>, k: &str| v.and_then(|v| v.get(k)).and_then(Value::as_u64);
    let lines = match (num(file, "startLine"), num(file, "numLines")) {
        (Some(start), Some(n)) => {
            let total = num(file, "totalLines");
            let whole = start <= 1 && total.is_some_and(|t| n >= t);
            (!whole && n > 0).then(|| [start.max(1), start.max(1) + n - 1])
        }
        _ => {
            let offset = num(Some(input), "offset");
            let limit = num(Some(input), "limit");
            match (offset, limit) {
                (None, None) => None,
                (o, l) => {
                    let first = o.unwrap_or(1).max(1);
                    l.filter(|&l| l > 0).map(|l| [first, first + l - 1])
                }
            }
        }
    };
    Some(match lines {
        Some(l) => json!({ "path": path, "lines": l }),
        None => json!({ "path": path }),
    })
}

/// What a successful Write, Edit or MultiEdit left in its file, from the call itself: a Write's
/// content, or the file before an edit (the response's `originalFile`) with the edits made.
/// `None` when that cannot be told (an edit whose text is not in the file as sent).
pub(super) fn written(tool: &str, input: &Value, response: &Value) -> Option<String> {
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
    let apply = |text: String, e: &Value| -> Option<String> {
        let (old, new) = (s(e, "old_string")?, s(e, "new_string")?);
        if old.is_empty() || !text.contains(&old) {
            return None;
        }
        Some(
            if e.get("replace_all").and_then(Value::as_bool) == Some(true) {
                text.replace(&old, &new)
            } else {
                text.replacen(&old, &new, 1)
            },
        )
    };
    match tool {
        "Write" => s(input, "content"),
        "Edit" => apply(s(response, "originalFile")?, input),
        "MultiEdit" => input
            .get("edits")?
            .as_array()?
            .iter()
            .try_fold(s(response, "originalFile")?, apply),
        _ => None,
    }
}

/// The file an editing call changed: the session's own from then on, as a Read's file is.
pub(super) fn edited_file<'a>(tool: &str, input: &'a Value) -> Option<&'a str> {
    let key = match tool {
        "Edit" | "MultiEdit" | "Write" => "file_path",
        "NotebookEdit" => "notebook_path",
        _ => return None,
    };
    input.get(key)?.as_str().filter(|p| !p.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claude_hook::tests::{command_params, post, step_params};

    /// An image a tool returned is no text: its base64 data would cost a projection thousands
    /// of tokens of nothing. Codex's `view_image` returns images alone, which are not kept
    /// (the proxy keeps the picture); an MCP answer keeps its text, the image named.
    #[test]
    fn images_in_results_are_named_not_spelled_out() {
        let data = format!("data:image/png;base64,{}", "iVBORw0KGgo".repeat(2000));
        let image = json!({"type": "input_image", "image_url": data, "detail": "high"});
        let viewed = post("view_image", json!({"path": "shot.png"}), json!([image]));
        let step = step_params(&viewed);
        assert_eq!(step["result"], MEDIA_SHOWN);
        assert_eq!(command_params(&viewed), None, "nothing kept");
        let mcp = post(
            "mcp__shots__take",
            json!({"url": "http://localhost"}),
            json!({"content": [{"type": "text", "text": "the page"},
                               {"type": "image", "source": {"type": "base64", "data": data}}]}),
        );
        let kept = command_params(&mcp).expect("kept");
        let output = kept["output"].as_str().expect("output");
        assert!(output.starts_with("the page"), "{output}");
        assert!(output.len() < 200, "{output}");
        let only = post(
            "mcp__shots__take",
            json!({"url": "http://localhost"}),
            json!({"content": [{"type": "image", "source": {"type": "base64", "data": data}}]}),
        );
        assert_eq!(command_params(&only), None);
        // Blocks of other kinds are left out, as always.
        let mixed = post(
            "mcp__docs__find",
            json!({"q": "x"}),
            json!([{"type": "text", "text": "found"}, {"type": "resource_link", "uri": "file:///x"}]),
        );
        assert_eq!(step_params(&mixed)["result"], "found");
    }

    /// What an editing call left in its file is told from the call alone: a Write's content,
    /// the file before an Edit with the edit made (all of them with `replace_all`), a
    /// MultiEdit's edits in order; nothing when an edit's text is not in the file as sent.
    #[test]
    fn what_a_write_or_an_edit_left_is_told_from_the_call() {
        let before = json!({"originalFile": "a = 1\na = 1\nb = 2\n"});
        let edit = |old: &str, new: &str, all: bool| json!({"old_string": old, "new_string": new, "replace_all": all});
        assert_eq!(
            written("Write", &json!({"content": "x"}), &Value::Null).as_deref(),
            Some("x")
        );
        assert_eq!(
            written("Edit", &edit("a = 1", "a = 3", false), &before).as_deref(),
            Some("a = 3\na = 1\nb = 2\n")
        );
        assert_eq!(
            written("Edit", &edit("a = 1", "a = 3", true), &before).as_deref(),
            Some("a = 3\na = 3\nb = 2\n")
        );
        let multi =
            json!({"edits": [edit("b = 2", "b = 4", false), edit("b = 4", "c = 5", false)]});
        assert_eq!(
            written("MultiEdit", &multi, &before).as_deref(),
            Some("a = 1\na = 1\nc = 5\n")
        );
        assert_eq!(written("Edit", &edit("zzz", "y", false), &before), None);
        assert_eq!(
            written("Edit", &edit("a = 1", "y", false), &Value::Null),
            None
        );
        assert_eq!(written("Read", &json!({"content": "x"}), &before), None);
    }

    /// An output Claude Code found too large to send is kept as the model saw it: where the
    /// whole is, and its first 2 KB (and its end, when `stdout` holds it), not the 30,000
    /// characters of `stdout`, which no budget shows.
    #[test]
    fn an_output_too_large_to_send_is_kept_as_the_model_saw_it() {
        let lines: String = (0..3000).map(|i| format!("test_{i} PASSED\n")).collect();
        let stdout = &lines[..30_000];
        let response = json!({"stdout": stdout, "stderr": "", "interrupted": false,
            "persistedOutputPath": "/home/u/.claude/projects/p/s/tool-results/b1.txt",
            "persistedOutputSize": 121_940});
        let ev = post("Bash", json!({"command": "pytest"}), response.clone());
        let out = command_params(&ev).expect("recorded")["output"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            out.starts_with("<persisted-output>\nOutput too large (119.1KB). Full output saved to: /home/u/.claude/projects/p/s/tool-results/b1.txt\n\nPreview (first 2KB):\ntest_0 PASSED\n"),
            "{out}"
        );
        assert!(out.ends_with(" PASSED\n...\n</persisted-output>"), "{out}");
        assert!(out.len() < 2_300, "{}", out.len());
        assert_eq!(step_params(&ev)["result"], out.as_str());
        // Its end, when Claude Code kept it.
        let mut with_end = response;
        let end = "\n[... middle left out ...]\nFAILED test_edge\n=== 1 failed, 2999 passed ===\n";
        with_end["stdout"] = format!("{}{end}", &lines[..20_000]).into();
        with_end["stdoutHoldsOutputEnd"] = true.into();
        let out = command_params(&post("Bash", json!({"command": "pytest"}), with_end))
            .expect("recorded")["output"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        assert!(
            out.ends_with("FAILED test_edge\n=== 1 failed, 2999 passed ===\n</persisted-output>"),
            "{out}"
        );
        assert!(out.contains("test_0 PASSED") && out.len() < 4_300, "{out}");
        // A small output, or one without the path, is as it came.
        let ev = post(
            "Bash",
            json!({"command": "ls"}),
            json!({"stdout": "a.py\n"}),
        );
        assert_eq!(command_params(&ev).expect("recorded")["output"], "a.py\n");
    }

    /// A notebook's Read is its cells as the model saw them, not the response's JSON.
    #[test]
    fn a_notebook_read_is_its_cells() {
        let ev = post(
            "Read",
            json!({"file_path": "/p/n.ipynb"}),
            json!({"type": "notebook", "file": {"filePath": "/p/n.ipynb", "cells": [
                {"cellType": "markdown", "source": "# Sum", "cell_id": "m"},
                {"cellType": "code", "source": "print(1)", "execution_count": 1, "cell_id": "a",
                 "language": "python", "outputs": [{"output_type": "stream", "text": "1\n"},
                 {"output_type": "display_data", "text": "<Figure>",
                  "image": {"image_data": "iVBOR", "media_type": "image/png"}}]}
            ]}}),
        );
        assert_eq!(
            step_params(&ev)["result"],
            "<cell id=\"m\"><cell_type>markdown</cell_type># Sum</cell id=\"m\">\n\
             <cell id=\"a\">print(1)</cell id=\"a\">\n\n1\n\n\n<Figure>\n\n[image/png output, sent as an image]"
        );
    }

    /// A NotebookEdit's result is what the model was told, not the notebook before and after.
    #[test]
    fn a_notebook_edit_is_what_the_model_was_told() {
        let response = |mode: &str, cell: &str| {
            json!({"new_source": "print(2)", "cell_type": "code", "language": "python",
                   "edit_mode": mode, "cell_id": cell, "error": "",
                   "notebook_path": "/p/n.ipynb", "original_file": "{\"cells\": []}",
                   "updated_file": "{\"cells\": [1]}"})
        };
        let input =
            json!({"notebook_path": "/p/n.ipynb", "cell_id": "a", "new_source": "print(2)"});
        for (mode, cell, told) in [
            ("replace", "a", "Updated cell a with print(2)"),
            ("insert", "b", "Inserted cell b with print(2)"),
            ("insert", "", "Inserted a new cell with print(2)"),
            ("delete", "a", "Deleted cell a"),
        ] {
            let ev = post("NotebookEdit", input.clone(), response(mode, cell));
            assert_eq!(step_params(&ev)["result"], told);
        }
        let mut failed = response("replace", "z");
        failed["error"] = "Cell with ID \"z\" not found in notebook.".into();
        let ev = post("NotebookEdit", input, failed);
        assert_eq!(
            step_params(&ev)["result"],
            "Cell with ID \"z\" not found in notebook."
        );
    }

    /// A search cut at its limit says so, as Claude Code told the model.
    #[test]
    fn a_search_cut_at_its_limit_says_so() {
        let ev = post(
            "Grep",
            json!({"pattern": "PASSED", "output_mode": "content"}),
            json!({"mode": "content", "numFiles": 0, "filenames": [],
                   "content": "log.txt:1:case 0 PASSED", "numLines": 250, "totalLines": 4001,
                   "appliedLimit": 250}),
        );
        assert_eq!(
            step_params(&ev)["result"],
            "log.txt:1:case 0 PASSED\n\n[Showing results with pagination = limit: 250]"
        );
        let ev = post(
            "Glob",
            json!({"pattern": "**/*.py"}),
            json!({"filenames": ["a.py", "b.py"], "numFiles": 2, "truncated": true}),
        );
        assert_eq!(
            step_params(&ev)["result"],
            "a.py\nb.py\n(Results are truncated. Consider using a more specific path or pattern.)"
        );
        let ev = post(
            "Glob",
            json!({"pattern": "*.md"}),
            json!({"filenames": ["README.md"], "numFiles": 1, "truncated": false}),
        );
        assert_eq!(step_params(&ev)["result"], "README.md");
    }

    #[test]
    fn a_read_becomes_a_step_with_numbered_lines_and_its_view() {
        let ev = post(
            "Read",
            json!({"file_path": "/work/project/src/lib.rs", "offset": 10, "limit": 2}),
            json!({"type": "text", "file": {"filePath": "/work/project/src/lib.rs",
                   "content": "fn a() {}\nfn b() {}\n", "numLines": 2, "startLine": 10,
                   "totalLines": 40}}),
        );
        let p = step_params(&ev);
        assert_eq!(p["tool_use_id"], "toolu_01abc");
        assert_eq!(p["tool_name"], "Read");
        assert_eq!(p["result"], "10\tfn a() {}\n11\tfn b() {}\n");
        assert_eq!(p["is_error"], false);
        assert_eq!(
            p["views"],
            json!([{"path": "/work/project/src/lib.rs", "lines": [10, 11]}])
        );
    }

    #[test]
    fn a_whole_read_is_a_view_of_the_whole_file() {
        let ev = post(
            "Read",
            json!({"file_path": "/p/a.py"}),
            json!({"file": {"filePath": "/p/a.py", "content": "x = 1\n", "numLines": 1,
                   "startLine": 1, "totalLines": 1}}),
        );
        assert_eq!(step_params(&ev)["views"], json!([{"path": "/p/a.py"}]));
        // Without the result's numbers, the call's offset and limit say which lines.
        let ev = post(
            "Read",
            json!({"file_path": "/p/a.py", "offset": 5, "limit": 10}),
            json!("     5\tx"),
        );
        let p = step_params(&ev);
        assert_eq!(p["views"], json!([{"path": "/p/a.py", "lines": [5, 14]}]));
        assert_eq!(p["result"], "     5\tx");
    }

    #[test]
    fn a_bash_result_is_its_output_then_its_errors() {
        let ev = post(
            "Bash",
            json!({"command": "cargo test"}),
            json!({"stdout": "running 3 tests", "stderr": "warning: x", "interrupted": false}),
        );
        let p = step_params(&ev);
        assert_eq!(p["result"], "running 3 tests\nwarning: x");
        assert!(p.get("views").is_none());
        assert_eq!(p["input"], json!({"command": "cargo test"}));
    }

    #[test]
    fn edits_and_listings_read_as_the_model_saw_them() {
        let original = "x\n".repeat(10_000);
        let ev = post(
            "Edit",
            json!({"file_path": "/p/a.py", "old_string": "x", "new_string": "y"}),
            json!({"filePath": "/p/a.py", "oldString": "x", "newString": "y",
                   "originalFile": original, "structuredPatch": []}),
        );
        let p = step_params(&ev);
        assert_eq!(p["result"], "The file /p/a.py has been updated.");
        // The file is the session's own from now on, as a Read's is.
        assert_eq!(p["files"], json!(["/p/a.py"]));
        assert_eq!(p["session"], "s1");
        let ev = post(
            "Write",
            json!({"file_path": "/p/new.py", "content": "y = 2\n"}),
            json!({"type": "create", "filePath": "/p/new.py", "content": "y = 2\n"}),
        );
        assert_eq!(
            step_params(&ev)["result"],
            "File created successfully at: /p/new.py"
        );
        let ev = post(
            "Glob",
            json!({"pattern": "**/*.py"}),
            json!({"filenames": ["/p/a.py", "/p/new.py"], "numFiles": 2, "truncated": false}),
        );
        assert_eq!(step_params(&ev)["result"], "/p/a.py\n/p/new.py");
        // An unknown shape: compact JSON, its long strings cut.
        let ev = post("Mystery", json!({}), json!({"blob": original, "n": 1}));
        let r = step_params(&ev)["result"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        // (escaped: each cut newline takes two characters)
        assert!(r.len() < 2 * 2048 + 200, "{}", r.len());
        assert!(r.contains("\"n\":1"), "{r}");
    }
}
