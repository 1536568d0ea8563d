//! What Codex's hook events say differently from Claude Code's.
//!
//! Codex runs hooks of Claude Code's shape (vendor-docs/codex.md): the same event names and
//! fields, its shell tool named `Bash` with the command in `tool_input.command`. Two things
//! differ where the world needs them:
//!
//! - A Bash call's `tool_response` is the command's output alone, a string, and a failed
//!   command has no failure event: its `PostToolUse` looks like a success. The exit code the
//!   model was told ("Process exited with code 3") is in the session's rollout, the JSONL file
//!   the event names as `transcript_path`: Codex writes the call's end there before it runs
//!   the hook. It is read from the file's end; when it cannot be found the code is unknown,
//!   never taken for 0 (a failed test run shown as passing would mislead the model).
//! - `apply_patch`. Models whose catalog entry makes it a freeform tool (every model Codex
//!   ships) call it as a tool of its own: `PreToolUse` and `PostToolUse` come with
//!   `tool_name: "apply_patch"` and the patch as `tool_input.command`; the step names the
//!   files the patch's headers name. Without that entry (a model Codex has no metadata for),
//!   the model calls it as a shell command, which Codex runs itself: its
//!   `PreToolUse` comes, no `PostToolUse` ever does. The mount sees the file change (written
//!   by `codex`, an agent program); no output is begun for it. The step is read back from the
//!   rollout instead, at the turn's next event (the next call's `PreToolUse` or
//!   `PostToolUse`, or `Stop`): Codex writes the patch's end there (`FileChange`, with its
//!   files and what it printed) before it tells the model. Every event of the turn offers the
//!   turn's patches again, recorded `once`, so the mount counts each one step.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

use serde_json::{Value, json};

use crate::socket::fit;

/// How much of a rollout's end is searched for a call's end, in turn: the hook runs right after
/// it is written, so the first is nearly always enough (it runs at every Bash call, and a long
/// session's rollout is megabytes); a command's record carries its output, which Codex cuts to
/// about 10 KiB for the model but keeps longer there.
const TAILS: [u64; 2] = [256 << 10, 4 << 20];

/// How a Codex command ended, as its rollout tells.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BashEnd {
    /// The exit code the model was told; `None` when it cannot be told (never taken for 0).
    pub exit: Option<i32>,
    /// Everything the command printed (`aggregated_output`). A command that outran Codex's
    /// first wait (`yield_time_ms`) was read by the model over several calls, polled with
    /// `write_stdin`, and its `PostToolUse` carries the last poll's output alone.
    pub output: Option<String>,
}

/// How the Codex Bash call this `PostToolUse` event is about ended: `None` for an event not of
/// Codex's shape (Claude Code's `tool_response` is an object).
pub fn bash_end(event: &Value) -> Option<BashEnd> {
    if event.get("tool_name").and_then(Value::as_str) != Some("Bash")
        || !event.get("tool_response").is_some_and(Value::is_string)
    {
        return None;
    }
    let id = event.get("tool_use_id").and_then(Value::as_str)?;
    let end = event
        .get("transcript_path")
        .and_then(Value::as_str)
        .filter(|p| p.starts_with('/') && !id.is_empty())
        .and_then(|p| match end_in(Path::new(p), id) {
            Ok(end) => end,
            Err(e) => {
                tracing::info!("worldfs hook: reading Codex's rollout {p}: {e}");
                None
            }
        });
    Some(end.unwrap_or_default())
}

/// Codex's tools that start, message, close or resume subagents (`multi_agent_v1`; hooks name
/// them bare, `spawn_agent`, or after their namespace, `multi_agent_v1wait_agent`). Their
/// results say only what became of the agent; its report comes with `wait_agent`'s, which is
/// kept.
const AGENT_MANAGEMENT: [&str; 4] = ["spawn_agent", "send_input", "close_agent", "resume_agent"];

/// Whether `tool` only manages Codex's subagents ([`AGENT_MANAGEMENT`]).
pub fn manages_agents(tool: &str) -> bool {
    AGENT_MANAGEMENT.iter().any(|t| tool.ends_with(t))
}

/// The freeform tool Codex gives models whose catalog entry asks for it.
pub const APPLY_PATCH: &str = "apply_patch";

/// Whether `event` is of Codex's freeform `apply_patch` tool.
pub fn is_freeform_patch(event: &Value) -> bool {
    event.get("turn_id").is_some()
        && event.get("tool_name").and_then(Value::as_str) == Some(APPLY_PATCH)
}

/// The files a patch in Codex's format names (`*** Add File: P`, `*** Update File: P`,
/// `*** Delete File: P`, `*** Move to: P`), absolute, relative ones taken from `cwd`; at most
/// 64.
pub fn patch_files(patch: &str, cwd: &str) -> Vec<String> {
    const HEADERS: [&str; 4] = [
        "*** Add File: ",
        "*** Update File: ",
        "*** Delete File: ",
        "*** Move to: ",
    ];
    let mut files: Vec<String> = Vec::new();
    for line in patch.lines() {
        let Some(path) = HEADERS.iter().find_map(|h| line.strip_prefix(h)) else {
            continue;
        };
        let path = path.trim();
        if path.is_empty() {
            continue;
        }
        let full = if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("{}/{path}", cwd.trim_end_matches('/'))
        };
        if !files.contains(&full) && files.len() < 64 {
            files.push(full);
        }
    }
    files
}

/// Whether this `PreToolUse` is of a Codex `apply_patch` call, which no `PostToolUse` ends.
pub fn is_apply_patch(event: &Value) -> bool {
    // `turn_id` is Codex's alone; Claude Code has no `apply_patch` program to run.
    event.get("turn_id").is_some()
        && event
            .pointer("/tool_input/command")
            .and_then(Value::as_str)
            .and_then(|c| c.split_whitespace().next())
            == Some("apply_patch")
}

/// The name of the file a skill's instructions are in.
const SKILL_FILE: &str = "SKILL.md";

/// The name of the file Codex writes a plan to when the user approves it for a fresh thread
/// ("Yes, clear context and implement" in Plan mode, 0.171: `CODEX_HOME/attachments/ID/`),
/// whose first prompt is "Read the approved plan at PATH and implement it."
const APPROVED_PLAN_FILE: &str = "approved-plan.md";

/// What a file of instructions [`instructions_read`] finds is, for the model: a skill's, or
/// the plan the user approved.
pub fn instructions_kind(path: &str) -> &'static str {
    if path.ends_with(APPROVED_PLAN_FILE) {
        "the plan the user approved"
    } else {
        "a skill you opened"
    }
}

/// The directories of a project Codex keeps skills in (`.agents/skills`) or its own files,
/// which the world leaves out by default (docs/worldfs.toml.md).
const SKILL_DIRS: [&str; 2] = [".agents", ".codex"];

/// The file of instructions that shell `command` reads outside the working directory `cwd`, or
/// in its [`SKILL_DIRS`], absolute: a skill the model opened itself (a `SKILL.md`: Codex lists
/// its skills, each with its file, and tells the model to open one when it applies, and not to
/// read it again), or the plan the user approved ([`APPROVED_PLAN_FILE`]), which the model
/// carries out over the whole thread. Another such file in the project is a file of the world
/// like any other.
pub fn instructions_read(command: &str, cwd: &str) -> Option<String> {
    if !cwd.starts_with('/') {
        return None;
    }
    let named = |w: &str, name: &str| w == name || w.ends_with(&format!("/{name}"));
    command
        .split_whitespace()
        .map(|w| w.trim_matches(|c| matches!(c, '\'' | '"' | ';' | '(' | ')')))
        .filter(|w| named(w, SKILL_FILE) || named(w, APPROVED_PLAN_FILE))
        .map(|w| absolute(w, cwd))
        .find(|p| {
            let p = Path::new(p);
            !p.starts_with(cwd)
                || SKILL_DIRS
                    .iter()
                    .any(|d| p.starts_with(Path::new(cwd).join(d)))
        })
}

/// `path` from `cwd`, with `.` and `..` taken out (by name: a skill's file is no symlink
/// puzzle).
fn absolute(path: &str, cwd: &str) -> String {
    crate::mount::normalize(&Path::new(cwd).join(path))
        .to_string_lossy()
        .into_owned()
}

/// Whether this Codex `PostToolUse` is of a command that read a file of instructions outside
/// the project ([`instructions_read`]): `worldfs proxy` keeps what it printed, so the hook
/// keeps no output of it (it would show twice).
pub fn reads_instructions(event: &Value) -> bool {
    event.get("turn_id").is_some()
        && event.get("tool_name").and_then(Value::as_str) == Some("Bash")
        && event
            .pointer("/tool_input/command")
            .and_then(Value::as_str)
            .zip(event.get("cwd").and_then(Value::as_str))
            .and_then(|(command, cwd)| instructions_read(command, cwd))
            .is_some()
}

/// Most patch steps one event records: those since the turn's previous event are a few.
const MAX_PATCHES: usize = 16;

/// What Codex's rollout tells that no hook event does, read at the turn's tool events and its
/// `Stop`.
#[derive(Debug, Default, PartialEq)]
pub struct RolloutNews {
    /// `step.record` params (recorded `once`) for the `apply_patch` calls Codex has finished
    /// in this event's turn, oldest first.
    pub patches: Vec<Value>,
    /// The objective of the thread goal set last, when the rollout's end tells of one. A goal
    /// set with `/goal OBJECTIVE` reaches no hook as a prompt, and while it runs Codex starts
    /// turns of its own: the objective is the user's task then, as a prompt would be.
    pub objective: Option<String>,
}

/// What the rollout tells of this event's turn ([`RolloutNews`]); nothing for an event not of
/// Codex (which names its turn), or one that comes before a patch could have ended.
pub fn rollout_news(event: &Value) -> RolloutNews {
    let field = |k: &str| {
        event
            .get(k)
            .and_then(Value::as_str)
            .filter(|v| !v.is_empty())
    };
    if !matches!(
        field("hook_event_name"),
        Some("PreToolUse" | "PostToolUse" | "Stop")
    ) {
        return RolloutNews::default();
    }
    let (Some(turn), Some(path)) = (
        field("turn_id"),
        field("transcript_path").filter(|p| p.starts_with('/')),
    ) else {
        return RolloutNews::default();
    };
    match news_in(Path::new(path), turn) {
        Ok(news) => news,
        Err(e) => {
            tracing::info!("worldfs hook: reading Codex's rollout {path}: {e}");
            RolloutNews::default()
        }
    }
}

/// The objective of the thread goal this `PostToolUse` of Codex's `create_goal` made: a goal
/// the model set at the user's word, which Codex pursues from then on (0.171 writes no
/// [`GOAL_UPDATED`] record for it).
pub fn created_goal(event: &Value) -> Option<String> {
    if event.get("turn_id").is_none()
        || event.get("hook_event_name").and_then(Value::as_str) != Some("PostToolUse")
        || event.get("tool_name").and_then(Value::as_str) != Some("create_goal")
    {
        return None;
    }
    // The goal as Codex made it (its answer), else as the model asked for it.
    let answer = match event.get("tool_response") {
        Some(Value::String(s)) => serde_json::from_str::<Value>(s).ok(),
        Some(other) => Some(other.clone()),
        None => None,
    };
    answer
        .as_ref()
        .and_then(|a| a.pointer("/goal/objective"))
        .or_else(|| event.pointer("/tool_input/objective"))
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|o| !o.is_empty())
        .map(str::to_owned)
}

/// The record type Codex writes when a thread goal is set or changes (0.171), with the goal
/// (`objective`, `status`...).
const GOAL_UPDATED: &str = "thread_goal_updated";

/// What the rollout's last part tells: the patches of turn `turn` ended, as steps, and the
/// thread goal's objective.
fn news_in(path: &Path, turn: &str) -> std::io::Result<RolloutNews> {
    let mut file = std::fs::File::open(path)?;
    let text = tail(&mut file, TAILS[0])?;
    // The model's call of each patch, written before it ran: its command is the step's input.
    let mut calls: HashMap<String, Value> = HashMap::new();
    let mut steps = Vec::new();
    let mut objective = None;
    for line in text.lines() {
        // Most records are none of these; parsing only those that may be keeps this cheap.
        if !(line.contains("\"FileChange\"")
            || line.contains("_call\"")
            || line.contains(GOAL_UPDATED))
        {
            continue;
        }
        let Ok(record) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        let Some(payload) = record.get("payload") else {
            continue;
        };
        let id = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).map(str::to_owned);
        match payload.get("type").and_then(Value::as_str) {
            Some("function_call" | "custom_tool_call") => {
                if let Some(call) = id(payload, "call_id") {
                    calls.insert(call, payload.clone());
                }
            }
            Some(GOAL_UPDATED) => {
                if let Some(o) = payload
                    .pointer("/goal/objective")
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|o| !o.is_empty())
                {
                    objective = Some(o.to_owned());
                }
            }
            Some("item_completed")
                if payload.pointer("/item/type").and_then(Value::as_str) == Some("FileChange")
                    && payload.get("turn_id").and_then(Value::as_str) == Some(turn) =>
            {
                let item = &payload["item"];
                if let Some(call) = id(item, "id") {
                    let step = patch_step(&call, item, calls.get(&call));
                    steps.push(step);
                }
            }
            _ => {}
        }
    }
    let skip = steps.len().saturating_sub(MAX_PATCHES);
    Ok(RolloutNews {
        patches: steps.split_off(skip),
        objective,
    })
}

/// The step of patch call `id`, ended as `item` says (`status`, `stdout`, `stderr`, the
/// `changes` by path), called as `call` says when the rollout still has it.
fn patch_step(id: &str, item: &Value, call: Option<&Value>) -> Value {
    let text = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or_default();
    let (tool, input) = match call {
        // The freeform tool, as its hook events have it: the patch as `command`.
        Some(c) if c.get("type").and_then(Value::as_str) == Some("custom_tool_call") => (
            c.get("name").and_then(Value::as_str).unwrap_or(APPLY_PATCH),
            json!({ "command": c.get("input").cloned().unwrap_or_default() }),
        ),
        _ => {
            let command = call
                .and_then(call_command)
                .unwrap_or_else(|| "apply_patch".to_owned());
            // As the hook's other events name a Codex shell call: `Bash`, with its command.
            ("Bash", json!({ "command": command }))
        }
    };
    let mut result = text("stdout").to_owned();
    result.push_str(text("stderr"));
    let mut files: Vec<&str> = Vec::new();
    if let Some(changes) = item.get("changes").and_then(Value::as_object) {
        for (path, change) in changes {
            files.push(path);
            if let Some(to) = change.get("move_path").and_then(Value::as_str) {
                files.push(to);
            }
        }
    }
    files.truncate(64);
    json!({
        "tool_use_id": id,
        "tool_name": tool,
        "input": fit::capped_input(input),
        "result": fit::cut_head(result, super::MAX_RESULT_BYTES),
        "is_error": text("status") != "completed",
        "files": files,
        "once": true,
    })
}

/// The command a call of Codex's shell tool gives (a `function_call` item, in the model
/// calls and the rollout alike): its `arguments`' `cmd` (or `command`), a string or a list
/// of words.
pub fn call_command(call: &Value) -> Option<String> {
    let args: Value = serde_json::from_str(call.get("arguments")?.as_str()?).ok()?;
    Some(match args.get("cmd").or_else(|| args.get("command"))? {
        Value::Array(words) => words
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" "),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    })
}

/// The last `bytes` of `file` (all of it when shorter), as text.
fn tail(file: &mut std::fs::File, bytes: u64) -> std::io::Result<String> {
    let len = file.metadata()?.len();
    let start = len.saturating_sub(bytes);
    file.seek(SeekFrom::Start(start))?;
    let mut tail = Vec::with_capacity((len - start) as usize);
    file.read_to_end(&mut tail)?;
    Ok(String::from_utf8_lossy(&tail).into_owned())
}

/// The end recorded for call `id` in the rollout at `path`, searched from its end.
fn end_in(path: &Path, id: &str) -> std::io::Result<Option<BashEnd>> {
    let mut file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    let quoted = format!("\"{id}\"");
    for tail_bytes in TAILS {
        let start = len.saturating_sub(tail_bytes);
        let tail = tail(&mut file, tail_bytes)?;
        // A record cut by the tail's start does not parse, and is found in the wider one.
        let found = tail
            .lines()
            .rev()
            .filter(|l| l.contains(&quoted))
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find_map(|record| record_end(&record, id));
        if found.is_some() || start == 0 {
            return Ok(found);
        }
    }
    Ok(None)
}

/// The end a rollout record gives for call `id`: an `item_completed` event of the command
/// (0.171), or an `exec_command_end` event (earlier versions), with its exit code.
fn record_end(record: &Value, id: &str) -> Option<BashEnd> {
    let payload = record.get("payload")?;
    let ended = match payload.get("type")?.as_str()? {
        "item_completed" => payload.get("item")?,
        "exec_command_end" => payload,
        _ => return None,
    };
    let named = ended.get("id").or_else(|| ended.get("call_id"))?.as_str()?;
    if named != id {
        return None;
    }
    let exit = i32::try_from(ended.get("exit_code")?.as_i64()?).ok()?;
    let output = ended
        .get("aggregated_output")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Some(BashEnd {
        exit: Some(exit),
        output,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn post(response: Value, transcript: &Path) -> Value {
        json!({
            "hook_event_name": "PostToolUse",
            "session_id": "s1",
            "turn_id": "t1",
            "transcript_path": transcript.to_string_lossy(),
            "tool_name": "Bash",
            "tool_input": {"command": "python3 calc.py"},
            "tool_response": response,
            "tool_use_id": "call_3",
        })
    }

    #[test]
    fn the_exit_code_is_read_from_the_rollout_or_unknown() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rollout = dir.path().join("rollout.jsonl");
        let lines = [
            json!({"type": "response_item", "payload": {"type": "function_call", "call_id": "call_3"}}),
            json!({"type": "event_msg", "payload": {"type": "item_completed",
                "item": {"type": "CommandExecution", "id": "call_2", "exit_code": 0}}}),
            json!({"type": "event_msg", "payload": {"type": "item_completed",
                "item": {"type": "CommandExecution", "id": "call_3", "exit_code": 3,
                         "aggregated_output": "4\n"}}}),
        ];
        let text: String = lines.iter().map(|l| format!("{l}\n")).collect();
        std::fs::write(&rollout, text).expect("write");
        assert_eq!(
            bash_end(&post(json!("4\n"), &rollout)).map(|e| e.exit),
            Some(Some(3))
        );

        let mut other = post(json!("4\n"), &rollout);
        other["tool_use_id"] = json!("call_2");
        assert_eq!(bash_end(&other).map(|e| e.exit), Some(Some(0)));
        // A call the rollout has not ended, and a rollout that is not there: unknown, not 0.
        other["tool_use_id"] = json!("call_9");
        assert_eq!(bash_end(&other).map(|e| e.exit), Some(None));
        let gone = dir.path().join("gone.jsonl");
        assert_eq!(
            bash_end(&post(json!("4\n"), &gone)).map(|e| e.exit),
            Some(None)
        );
        // Earlier versions' record of a command's end.
        std::fs::write(
            &rollout,
            format!(
                "{}\n",
                json!({"type": "event_msg", "payload": {"type": "exec_command_end",
                    "call_id": "call_3", "exit_code": 1}})
            ),
        )
        .expect("write");
        assert_eq!(
            bash_end(&post(json!("4\n"), &rollout)).map(|e| e.exit),
            Some(Some(1))
        );
        // A record further back than the first tail searched (a long output after it).
        let later = json!({"type": "event_msg", "payload": {"type": "agent_message",
            "message": "x".repeat(300 << 10)}});
        let mut text = std::fs::read_to_string(&rollout).expect("read");
        text.push_str(&format!("{later}\n"));
        std::fs::write(&rollout, text).expect("write");
        assert_eq!(
            bash_end(&post(json!("4\n"), &rollout)).map(|e| e.exit),
            Some(Some(1))
        );
        // Claude Code's response is an object: not Codex's, nothing read.
        assert_eq!(bash_end(&post(json!({"stdout": "4\n"}), &rollout)), None);
    }

    #[test]
    fn a_patchs_step_says_its_command_files_and_result() {
        let ended = json!({"type": "FileChange", "id": "call_1", "status": "failed",
            "changes": {"/p/a.py": {"type": "update", "move_path": "/p/b.py"},
                        "/p/c.py": {"type": "add"}},
            "stdout": "", "stderr": "patch does not apply\n"});
        let call = json!({"type": "function_call", "name": "exec_command", "call_id": "call_1",
                          "arguments": "{\"cmd\": \"apply_patch <<'P'\"}"});
        let step = patch_step("call_1", &ended, Some(&call));
        assert_eq!(step["tool_name"], "Bash");
        assert_eq!(step["input"], json!({"command": "apply_patch <<'P'"}));
        assert_eq!(step["files"], json!(["/p/a.py", "/p/b.py", "/p/c.py"]));
        assert_eq!(step["result"], "patch does not apply\n");
        assert_eq!(
            (&step["is_error"], &step["once"]),
            (&json!(true), &json!(true))
        );
        // Its call no longer in the rollout's end; or a freeform tool of its own name.
        assert_eq!(
            patch_step("call_1", &ended, None)["input"],
            json!({"command": "apply_patch"})
        );
        let custom = json!({"type": "custom_tool_call", "name": "apply_patch", "call_id": "call_1",
                            "input": "*** Begin Patch"});
        let step = patch_step("call_1", &ended, Some(&custom));
        assert_eq!(
            (&step["tool_name"], &step["input"]),
            (
                &json!("apply_patch"),
                &json!({"command": "*** Begin Patch"})
            )
        );
    }

    #[test]
    fn a_skill_is_a_skill_md_outside_the_project() {
        let cwd = "/w/project";
        assert_eq!(
            instructions_read("cat /h/.codex/skills/style/SKILL.md", cwd).as_deref(),
            Some("/h/.codex/skills/style/SKILL.md")
        );
        assert_eq!(
            instructions_read(
                "sed -n '1,200p' '../codex-home/skills/.system/x/SKILL.md'",
                cwd
            )
            .as_deref(),
            Some("/w/codex-home/skills/.system/x/SKILL.md")
        );
        // The project's own skills, which the world leaves out.
        assert_eq!(
            instructions_read("cat .agents/skills/style/SKILL.md", cwd).as_deref(),
            Some("/w/project/.agents/skills/style/SKILL.md")
        );
        // Elsewhere in the project: a file of the world. Not a skill's file, or no directory.
        assert_eq!(
            instructions_read("cat docs/skills/style/SKILL.md", cwd),
            None
        );
        assert_eq!(instructions_read("cat /h/notes/README.md", cwd), None);
        assert_eq!(instructions_read("cat /h/SKILL.md.bak", cwd), None);
        assert_eq!(
            instructions_read("cat /h/skills/x/SKILL.md", "relative"),
            None
        );
        // The plan the user approved for a fresh thread.
        let plan = "/h/.codex/attachments/48f7/approved-plan.md";
        assert_eq!(
            instructions_read(&format!("cat {plan}"), cwd).as_deref(),
            Some(plan)
        );
        assert_eq!(instructions_kind(plan), "the plan the user approved");
        assert_eq!(instructions_kind("/h/s/SKILL.md"), "a skill you opened");
        assert_eq!(instructions_read("cat docs/approved-plan.md", cwd), None);
    }

    #[test]
    fn a_patch_names_the_files_of_its_headers() {
        let patch = "*** Begin Patch\n*** Add File: new.py\n+x\n*** Update File: src/a.py\n\
                     *** Move to: src/b.py\n@@\n-a\n+b\n*** Delete File: /abs/old.py\n\
                     *** Update File: src/a.py\n*** End Patch";
        assert_eq!(
            patch_files(patch, "/p/"),
            ["/p/new.py", "/p/src/a.py", "/p/src/b.py", "/abs/old.py"]
        );
        assert!(patch_files("echo hi", "/p").is_empty());
    }

    #[test]
    fn only_codexs_apply_patch_is_told_apart() {
        let pre = |cmd: &str, codex: bool| {
            let mut ev = json!({"hook_event_name": "PreToolUse", "tool_name": "Bash",
                                "tool_input": {"command": cmd}, "tool_use_id": "call_1"});
            if codex {
                ev["turn_id"] = json!("t1");
            }
            ev
        };
        assert!(is_apply_patch(&pre(
            "apply_patch <<'PATCH'\n*** Begin Patch",
            true
        )));
        assert!(!is_apply_patch(&pre("cat calc.py", true)));
        assert!(!is_apply_patch(&pre("apply_patch x", false)));
    }
}
