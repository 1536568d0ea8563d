//! Files a request already shows whole, in what it keeps as it came.
//!
//! Claude Code attaches files to a conversation as a Read it made itself: a text saying
//! `Called the Read tool with the following input: {"file_path": ...}`, then `Result of calling
//! the Read tool:` and the file's lines with their numbers. It does so for a file named with `@`
//! in a prompt, and after a compaction for the files the conversation read or edited last. Those
//! texts sit in the first message (or in `role: "system"` messages), which the proxy sends as
//! they came, so the projection after them would show the same lines a second time. The mount is
//! told which files they are and what their copy holds (its hash), and leaves out each file
//! whose copy is still what is on disk; one changed since is shown as it is now.
//!
//! The same goes for a background agent's report: Claude Code tells the model that the agent
//! ended in a notice (`<task-notification>`) with the report in it (`<result>`), which the
//! proxy keeps among the last few notices, while `worldfs hook` keeps the report as an output.
//! The mount is told the hashes of the reports the request holds, and leaves those outputs out;
//! and of the plan the user approved, which the mount keeps as the agent wrote its file.
//!
//! Claude Code also puts its instruction files (CLAUDE.md, CLAUDE.local.md, its memory) into
//! the first message, each as `Contents of PATH (what it is):`, a blank line, then the text as
//! it is on disk. It reads them through the mount to do so, which puts them in the world; they
//! are told to the mount the same way, so that they are not projected a second time.

use std::collections::HashMap;

use serde_json::Value;

use super::rewrite::{
    APPROVED_PLAN, PLAN_APPROVED, Plan, READ_TOOL, TASK_NOTICE, all_strings, block_texts,
    blocks_of, kind, texts,
};
use crate::claude_hook::notice_result;
use crate::projection::shown_hash;
use crate::socket::methods::MAX_REQUEST_SHOWS;

const CALLED: &str = "Called the Read tool with the following input:";
const RESULT: &str = "Result of calling the Read tool:";
const CONTENTS: &str = "Contents of ";
/// What ends an instruction file's text: the next file's heading, the reminder's end, or (in
/// versions like 2.1.100, whose reminder goes on with more context) the date's heading.
const CONTENTS_ENDS: [&str; 3] = [
    "\n\nContents of ",
    "\n</system-reminder>",
    "\n# currentDate\n",
];

/// A file the request shows whole: its path as the request gives it, and the hash of what it
/// shows ([`shown_hash`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shown {
    pub path: String,
    pub hash: String,
}

/// The files shown whole in what the request sent for `plan` keeps verbatim: the opening
/// messages, the `role: "system"` messages of the history, what it keeps of the history (the
/// instruction files attached to tool results), and the last turn (a prompt naming a file
/// with `@` is in it). Their texts are read as one, in order: 2.1.332 puts a Read call in
/// a message of its own and its result at the head of the next.
pub fn in_request(body: &Value, plan: &Plan) -> Vec<Shown> {
    let tail = body
        .get("messages")
        .and_then(Value::as_array)
        .map_or(&[][..], |m| m.get(plan.tail_start..).unwrap_or_default());
    let joined = plan
        .head
        .iter()
        .chain(&plan.opening_instructions)
        .chain(&plan.instructions)
        .flat_map(|m| texts(m.get("content")))
        .chain(block_texts(&plan.kept_blocks))
        .chain(tail.iter().flat_map(|m| texts(m.get("content"))))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out: Vec<Shown> = Vec::new();
    for s in read_copies(&joined)
        .into_iter()
        .chain(instruction_copies(&joined))
        .chain(last_turn_reads(tail))
    {
        if out.len() < MAX_REQUEST_SHOWS && !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// The [`shown_hash`] of each output the mount keeps that what the request sent for `plan`
/// holds as it came: the report of a background task in a notice (`<result>`, as `worldfs
/// hook` keeps it), and the plan the user approved (the plan file as the agent wrote it, which
/// the mount keeps while the file is outside the project).
pub fn outputs_in_request(body: &Value, plan: &Plan) -> Vec<String> {
    let tail = body
        .get("messages")
        .and_then(Value::as_array)
        .map_or(&[][..], |m| m.get(plan.tail_start..).unwrap_or_default());
    let mut out: Vec<String> = Vec::new();
    let mut add = |text: &str| {
        let hash = shown_hash(text.as_bytes());
        if out.len() < MAX_REQUEST_SHOWS && !out.contains(&hash) {
            out.push(hash);
        }
    };
    // Notices come as system messages of their own, the approval as a call's result: in the
    // history's instructions and what is kept of it, or anywhere in the last turn.
    let mut strings: Vec<&str> = plan
        .instructions
        .iter()
        .flat_map(|m| texts(m.get("content")))
        .chain(block_texts(&plan.kept_blocks))
        .collect();
    for m in tail {
        all_strings(Some(m), &mut strings);
    }
    for text in strings {
        for notice in text.split(TASK_NOTICE).skip(1) {
            if let Some(report) = notice_result(notice) {
                add(report);
            }
        }
        if text.starts_with(PLAN_APPROVED)
            && let Some((_, approved)) = text.split_once(APPROVED_PLAN)
        {
            add(approved);
        }
    }
    out
}

/// Every whole-file Read copy in `text`.
fn read_copies(text: &str) -> Vec<Shown> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find(CALLED) {
        rest = &rest[at + CALLED.len()..];
        let (input, mut after) = rest.split_once('\n').unwrap_or((rest, ""));
        // The call and its result may sit in reminders of their own.
        while let Some((line, next)) = after.split_once('\n')
            && matches!(line.trim(), "" | "</system-reminder>" | "<system-reminder>")
        {
            after = next;
        }
        let Some(after) = after.strip_prefix(RESULT) else {
            continue;
        };
        let after = after.strip_prefix('\n').unwrap_or(after);
        let path = serde_json::from_str::<Value>(input.trim())
            .ok()
            .and_then(|v| v.get("file_path")?.as_str().map(str::to_owned));
        // A Read of part of a file (`offset`, `limit`) starts its numbers elsewhere, or stops
        // early: its hash is then not the file's, and the file is projected as usual.
        if let (Some(path), Some(lines)) = (path, ungutter(after)) {
            out.push(Shown {
                path,
                hash: shown_hash(lines.as_bytes()),
            });
        }
        rest = after;
    }
    out
}

/// The files the last turn's Read calls returned whole. The model has that copy right in front
/// of it, as it came, after the projection: shown there too, the file would go twice in the
/// call, and take the budget's room from another. From the next call on, that turn is history
/// and the projection shows the file. A Read of part of a file (`offset`, `limit`, or the
/// first 2,000 lines of a longer one) does not hash as the file does, and leaves it projected.
fn last_turn_reads(tail: &[Value]) -> Vec<Shown> {
    let reads: HashMap<&str, &str> = blocks_of(tail, "assistant")
        .filter(|b| kind(b) == Some("tool_use"))
        .filter(|b| b.get("name").and_then(Value::as_str) == Some(READ_TOOL))
        .filter_map(|b| {
            let id = b.get("id")?.as_str()?;
            Some((id, b.get("input")?.get("file_path")?.as_str()?))
        })
        .collect();
    blocks_of(tail, "user")
        .filter(|b| kind(b) == Some("tool_result"))
        .filter(|b| b.get("is_error").and_then(Value::as_bool) != Some(true))
        .filter_map(|b| {
            let path = reads.get(b.get("tool_use_id")?.as_str()?)?;
            let result = texts(b.get("content")).join("\n");
            // A notebook's cells have no numbers; the world shows them as Read does.
            let shown = match ungutter(&result) {
                Some(lines) => lines,
                None if result.starts_with("<cell id=") => result,
                None => return None,
            };
            Some(Shown {
                path: (*path).to_owned(),
                hash: shown_hash(shown.as_bytes()),
            })
        })
        .collect()
}

/// Every instruction file in `text`, as Claude Code puts them in the first message:
/// `Contents of PATH (what it is):`, a blank line, then the file's text; or, for one below the
/// root attached to a tool result, `Contents of PATH:` with an absolute path. A file whose
/// text it changed on the way (an `@` import expanded) has another hash, and is projected as
/// usual.
fn instruction_copies(text: &str) -> Vec<Shown> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(found) = text[at..].find(CONTENTS) {
        let start = at + found;
        at = start + CONTENTS.len();
        if start > 0 && !text[..start].ends_with('\n') {
            continue;
        }
        let Some((heading, body)) = text[at..].split_once('\n') else {
            break;
        };
        let Some(body) = body.strip_prefix('\n') else {
            continue;
        };
        let described = heading.strip_suffix("):").and_then(|h| h.rsplit_once(" ("));
        let Some(path) = described
            .map(|(path, _what)| path)
            .or_else(|| heading.strip_suffix(':').filter(|p| p.starts_with('/')))
        else {
            continue;
        };
        let end = CONTENTS_ENDS
            .iter()
            .filter_map(|e| body.find(e))
            .min()
            .unwrap_or(body.len());
        out.push(Shown {
            path: path.to_owned(),
            hash: shown_hash(&body.as_bytes()[..end]),
        });
    }
    out
}

/// The lines a listing numbered from 1 (`12\tline` or `    12→line`) shows, without their
/// numbers, up to the first line that is not the next one; `None` when there is none.
fn ungutter(listing: &str) -> Option<String> {
    let mut out = String::new();
    let mut n: u64 = 0;
    for line in listing.split('\n') {
        let rest = line.trim_start_matches(' ');
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if rest[..digits].parse::<u64>().ok() != Some(n + 1) {
            break;
        }
        let content = match rest[digits..].chars().next() {
            Some(c @ ('\t' | '\u{2192}')) => &rest[digits + c.len_utf8()..],
            _ => break,
        };
        if n > 0 {
            out.push('\n');
        }
        out.push_str(content);
        n += 1;
    }
    (n > 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn copy(path: &str, listing: &str) -> String {
        format!(
            "{CALLED} {}\n{RESULT}\n{listing}",
            json!({ "file_path": path })
        )
    }

    #[test]
    fn a_call_and_its_result_in_reminders_of_their_own_are_one_copy() {
        // As 2.1.332 sends a file named with `@` in the first prompt, messages joined.
        let text = format!(
            "<system-reminder>\n{CALLED} {}\n</system-reminder>\n<system-reminder>\n{RESULT}\n1\ta = 1\n2\t\n</system-reminder>",
            json!({ "file_path": "/w/a.py" })
        );
        assert_eq!(
            read_copies(&text),
            [Shown {
                path: "/w/a.py".into(),
                hash: shown_hash(b"a = 1\n")
            }]
        );
    }

    #[test]
    fn instruction_files_in_the_first_message_are_found() {
        let claude_md = "# Rules\n\nUse tabs.\n";
        let local = "Be brief.\n";
        let text = format!(
            "<system-reminder>\nCodebase and user instructions are shown below.\n\n\
             Contents of /w/CLAUDE.md (project instructions, checked into the codebase):\n\n{claude_md}\n\
             Contents of /w/CLAUDE.local.md (user's private project instructions, not checked in):\n\n{local}\n\
             </system-reminder>"
        );
        assert_eq!(
            instruction_copies(&text),
            [
                Shown {
                    path: "/w/CLAUDE.md".into(),
                    hash: shown_hash(claude_md.as_bytes())
                },
                Shown {
                    path: "/w/CLAUDE.local.md".into(),
                    hash: shown_hash(local.as_bytes())
                }
            ]
        );
        // As 2.1.100 sends it: the date's section follows the file.
        let older = format!(
            "<system-reminder>\n# claudeMd\nContents of /w/CLAUDE.md (project instructions, \
             checked into the codebase):\n\n{claude_md}# currentDate\nToday's date is 2026-11-27.\n</system-reminder>"
        );
        assert_eq!(
            instruction_copies(&older),
            [Shown {
                path: "/w/CLAUDE.md".into(),
                hash: shown_hash(claude_md.as_bytes())
            }]
        );
        // One below the root, attached to a tool result, says only its path.
        let nested =
            "<system-reminder>\nContents of /w/src/CLAUDE.md:\n\nSpaces.\n\n</system-reminder>";
        assert_eq!(
            instruction_copies(nested),
            [Shown {
                path: "/w/src/CLAUDE.md".into(),
                hash: shown_hash(b"Spaces.\n")
            }]
        );
        // Mid-line, or without its heading's shape, it is someone's prose.
        assert!(instruction_copies("See the Contents of /w/x (a):\n\nno").is_empty());
        assert!(instruction_copies("Contents of the box:\n\nsocks").is_empty());
    }

    #[test]
    fn a_whole_read_copy_is_found_in_either_gutter() {
        let file = "def add(a, b):\n    return a + b\n";
        let tab = copy("/w/calc.py", "1\tdef add(a, b):\n2\t    return a + b");
        let arrow = copy(
            "/w/calc.py",
            "     1\u{2192}def add(a, b):\n     2\u{2192}    return a + b\n",
        );
        for text in [tab, arrow] {
            assert_eq!(
                read_copies(&text),
                [Shown {
                    path: "/w/calc.py".into(),
                    hash: shown_hash(file.as_bytes())
                }],
                "{text}"
            );
        }
    }

    #[test]
    fn copies_are_found_wrapped_and_several_to_a_text() {
        let text = format!(
            "<system-reminder>\n{}\n</system-reminder>\n<system-reminder>\n{}\n</system-reminder>",
            copy("/w/a.py", "1\ta = 1"),
            copy("/w/b.py", "1\tb = 2\n2\t"),
        );
        let found = read_copies(&text);
        assert_eq!(
            found,
            [
                Shown {
                    path: "/w/a.py".into(),
                    hash: shown_hash(b"a = 1\n")
                },
                Shown {
                    path: "/w/b.py".into(),
                    hash: shown_hash(b"b = 2\n\n")
                }
            ]
        );
    }

    #[test]
    fn part_of_a_file_or_no_listing_is_no_copy() {
        let from_line_10 = copy("/w/big.py", "10\tx = 1\n11\ty = 2");
        let no_lines = copy("/w/empty.py", "<system-reminder>empty</system-reminder>");
        let not_json = format!("{CALLED} file_path=/w/a.py\n{RESULT}\n1\ta");
        let no_result = format!("{CALLED} {}\n1\ta", json!({"file_path": "/w/a.py"}));
        for text in [from_line_10, no_lines, not_json, no_result] {
            assert_eq!(read_copies(&text), [], "{text}");
        }
        // A gap in the numbers ends the copy there: what it holds is then not the whole file.
        assert_eq!(ungutter("1\ta\n3\tc").as_deref(), Some("a"));
    }

    #[test]
    fn only_what_goes_as_it_came_is_searched() {
        let body = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": copy("/w/head.py", "1\th")}]},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
            {"role": "user", "content": copy("/w/history.py", "1\tx")},
            {"role": "system", "content": copy("/w/system.py", "1\ts")},
            {"role": "assistant", "content": [{"type": "text", "text": "last"}]},
            // A later prompt naming a file with `@`, as 2.1.332 sends it: the call, its result
            // and the prompt, each a block of its own.
            {"role": "user", "content": [
                {"type": "text", "text": format!("<system-reminder>\n{CALLED} {}\n</system-reminder>", json!({"file_path": "/w/tail.py"}))},
                {"type": "text", "text": format!("<system-reminder>\n{RESULT}\n1\tt\n</system-reminder>\n")},
                {"type": "text", "text": "Now explain @tail.py"}
            ]},
            {"role": "system", "content": copy("/w/tail-system.py", "1\tts")},
            // The last turn's own Reads, at once: one whole, one of a part, one refused, one
            // whose result is blocks.
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": "/w/read.py"}},
                {"type": "tool_use", "id": "r2", "name": "Read", "input": {"file_path": "/w/part.py", "offset": 10}},
                {"type": "tool_use", "id": "r3", "name": "Read", "input": {"file_path": "/w/err.py"}},
                {"type": "tool_use", "id": "r4", "name": "Read", "input": {"file_path": "/w/blocks.py"}},
                {"type": "tool_use", "id": "r5", "name": "Read", "input": {"file_path": "/w/n.ipynb"}},
                {"type": "tool_use", "id": "b1", "name": "Bash", "input": {"command": "nl -ba x.py"}}
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "r1", "content": "1\tr = 1\n2\t"},
                {"type": "tool_result", "tool_use_id": "r2", "content": "10\tp = 10"},
                {"type": "tool_result", "tool_use_id": "r3", "content": "1\tnot this", "is_error": true},
                {"type": "tool_result", "tool_use_id": "r4", "content": [{"type": "text", "text": "1\tb = 1"}]},
                {"type": "tool_result", "tool_use_id": "r5", "content": [{"type": "text", "text": "<cell id=\"a\">x = 1</cell id=\"a\">"}]},
                {"type": "tool_result", "tool_use_id": "b1", "content": "1\tx = 1"}
            ]},
        ]});
        let messages = body["messages"].as_array().cloned().unwrap_or_default();
        let plan = Plan {
            tail_start: 4,
            head: vec![messages[0].clone()],
            opening_instructions: Vec::new(),
            instructions: vec![messages[3].clone()],
            tool_loads: Vec::new(),
            kept_blocks: vec![
                json!({"type": "text", "text": "<system-reminder>\nContents of /w/sub/CLAUDE.md:\n\nkept\n\n</system-reminder>"}),
            ],
            goal: String::new(),
            later_prompts: None,
            compacted: false,
            breakpoints: 0,
            cache_ttl: Default::default(),
        };
        let paths: Vec<String> = in_request(&body, &plan)
            .into_iter()
            .map(|s| s.path)
            .collect();
        assert_eq!(
            paths,
            [
                "/w/head.py",
                "/w/system.py",
                "/w/tail.py",
                "/w/tail-system.py",
                "/w/sub/CLAUDE.md",
                "/w/read.py",
                "/w/blocks.py",
                "/w/n.ipynb"
            ]
        );
        let read = in_request(&body, &plan)
            .into_iter()
            .find(|s| s.path == "/w/read.py");
        assert_eq!(read.map(|s| s.hash), Some(shown_hash(b"r = 1\n")));
    }

    /// The reports of the notices the request keeps, once each, as the hook keeps them; not
    /// those of the history the projection replaces.
    #[test]
    fn the_reports_of_kept_notices_are_found() {
        let notice = |id: &str, result: &str| {
            format!(
                "[SYSTEM NOTIFICATION - NOT USER INPUT]\n{TASK_NOTICE}\n<task-id>{id}</task-id>\n\
                 <status>completed</status>\n<result>{result}</result>\n</task-notification>"
            )
        };
        let system = |text: String| json!({"role": "system", "content": text});
        let body = json!({"messages": [
            {"role": "user", "content": "Run it in the background"},
            {"role": "assistant", "content": [{"type": "text", "text": "ok"}]},
            system(notice("a", "\nREPORT A\n")),
            system(notice("h", "REPORT IN THE HISTORY")),
            {"role": "assistant", "content": [{"type": "text", "text": "last"}]},
            system(format!("{}\n{}", notice("b", "REPORT B"), notice("c", ""))),
        ]});
        let plan = Plan {
            tail_start: 4,
            head: vec![body["messages"][0].clone()],
            opening_instructions: Vec::new(),
            instructions: vec![body["messages"][2].clone(), body["messages"][2].clone()],
            tool_loads: Vec::new(),
            kept_blocks: Vec::new(),
            goal: String::new(),
            later_prompts: None,
            compacted: false,
            breakpoints: 0,
            cache_ttl: Default::default(),
        };
        assert_eq!(
            outputs_in_request(&body, &plan),
            [shown_hash(b"REPORT A"), shown_hash(b"REPORT B")]
        );
        assert_eq!(
            crate::claude_hook::notice_result(&notice("x", " R \n")),
            Some("R")
        );
        // The plan the user approved, kept with the blocks no file gives back: the plan
        // file's copy the mount keeps is left out while it is what was approved.
        let mut plan = plan;
        plan.kept_blocks = vec![json!({"type": "text", "text": format!(
            "{PLAN_APPROVED} You can now start coding.\n\n{APPROVED_PLAN}# Fix\n\n1. Sum.\n"
        )})];
        assert!(outputs_in_request(&body, &plan).contains(&shown_hash(b"# Fix\n\n1. Sum.\n")));
    }
}
