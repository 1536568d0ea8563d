//! What one hook event asks of the socket: the [`Plan`], decided before anything is told.
//!
//! Deciding is kept apart from telling. [`plan`] reads the event (and, for Codex, its rollout)
//! and tells the socket nothing, so every shape an agent sends (a tool call, a failure, a
//! subagent's call, an event of no known shape) can be tested without a mount, and `run` only
//! carries out what the plan says. The step a tool call becomes (`step.record`) is made here
//! too: its input, what its result says ([`result`](super::result)), and what comes with it
//! (an output, the task list, the user's answers).

use std::path::Path;

use serde_json::{Map, Value, json};

use super::notices::{is_notice, notice_report};
use super::outputs::{bash_call, command_output, kept_result, search_call, search_output};
use super::result::{edited_file, read_view, result_text, text_of, written};
use super::{MAX_RESULT_BYTES, answers, codex, tasks};
use crate::socket::client::of_session;
use crate::socket::fit;

/// What one event asks of the socket.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// An event that says nothing the world needs.
    Nothing,
    /// A new conversation: the previous goal and task list are over.
    ClearGoal,
    /// The user's prompt: the goal, or an addition to it.
    AddToGoal(String),
    /// The conversation was compacted: it now opens with Claude Code's summary of it.
    Compacted,
    /// A conversation was resumed, maybe another one than the goal's.
    Resumed,
    /// `command.begin` for the Bash call with this `tool_use_id`, about to run.
    Begin(String),
    /// `command.record` with a result no tool call's event brought: a background agent's
    /// report, which comes in Claude Code's notice that it ended ([`notice_report`]).
    Keep(Value),
    /// `state.patch` with a change to the task list alone (a subagent's, which is shared).
    Tasks(Value),
    /// `step.record` with `step`, after `command.record` with `command` (a Bash call's output,
    /// recorded first so that it belongs to the turn the step ends) and `state.patch` with
    /// `tasks` (a change to the agent's task list, in the state of the turn the step ends).
    /// `abandon`: the key of the call's `command.begin` when no output is recorded for it
    /// (`command.abandon`).
    Step {
        step: Value,
        command: Option<Value>,
        tasks: Option<Value>,
        abandon: Option<String>,
        /// `entries.refused` with this file, after the step: a Read Claude Code refused (the
        /// file over its size or token limit), which opened the file and showed nothing.
        refused: Option<String>,
        /// Added to the goal before the step: the user's answers to the agent's question.
        answered: Option<String>,
    },
}

/// What `event` asks of the socket.
pub fn plan(event: &Value) -> Plan {
    let field = |k: &str| event.get(k).and_then(Value::as_str);
    match field("hook_event_name") {
        // A subagent's start (Claude Code's compacted subagents) and its task, which a Codex
        // subagent gets as a prompt of its own (same session, with its `agent_id`), are not
        // the user's: the goal is not theirs.
        Some("UserPromptSubmit" | "SessionStart") if in_subagent(event) => Plan::Nothing,
        Some("UserPromptSubmit") => match field("prompt") {
            Some(p) if is_notice(p) => notice_report(event, p).map_or(Plan::Nothing, Plan::Keep),
            Some(p) if !p.trim().is_empty() => Plan::AddToGoal(p.to_owned()),
            _ => Plan::Nothing,
        },
        Some("SessionStart") => match field("source") {
            Some("startup" | "clear") => Plan::ClearGoal,
            Some("compact") => Plan::Compacted,
            Some("resume") => Plan::Resumed,
            _ => Plan::Nothing,
        },
        // A subagent's tool calls are steps of its own conversation, which the session's model
        // never sees (it gets the subagent's answer, the step of its own Agent call). Only the
        // task list is shared with it.
        Some("PostToolUse") if in_subagent(event) => tool_tasks(event)
            .filter(|_| tasks::shared(field("tool_name").unwrap_or_default()))
            .map_or(Plan::Nothing, Plan::Tasks),
        Some("PreToolUse" | "PostToolUseFailure") if in_subagent(event) => Plan::Nothing,
        // Codex runs `apply_patch` itself, and no PostToolUse ever ends it.
        Some("PreToolUse") if codex::is_apply_patch(event) => Plan::Nothing,
        Some("PreToolUse") => begun_key(event).map_or(Plan::Nothing, Plan::Begin),
        Some(name @ ("PostToolUse" | "PostToolUseFailure")) => {
            let failed = name == "PostToolUseFailure";
            let codex_end = codex::bash_end(event);
            let codex_exit = codex_end.as_ref().map(|e| e.exit);
            match step(event, failed) {
                Some(mut step) => {
                    // A Codex command that outran its first wait: the model read its output
                    // over several polls, and the event carries the last alone.
                    if let Some(full) = codex_end.as_ref().and_then(|e| e.output.as_deref())
                        && let Some(said) = step["result"].as_str()
                        && full.len() > said.len()
                        && full.ends_with(said)
                    {
                        step["result"] = fit::cut_head(full.to_owned(), MAX_RESULT_BYTES).into();
                    }
                    // A failed Codex command has no failure event: its step says so here, as
                    // Claude Code's failure result does.
                    if let Some(Some(code)) = codex_exit
                        && code != 0
                    {
                        let said = step["result"].as_str().unwrap_or_default();
                        step["result"] = format!("Exit code {code}\n{said}").into();
                        step["is_error"] = true.into();
                    }
                    let command = if codex::reads_instructions(event) {
                        None
                    } else {
                        command_output(event, failed, codex_exit, &step)
                            .or_else(|| search_output(event, failed, &step))
                            .or_else(|| kept_result(event, failed, &step))
                    };
                    if codex::is_freeform_patch(event) {
                        freeform_patch(event, &mut step);
                    }
                    let tasks = if failed { None } else { tool_tasks(event) };
                    // Its PreToolUse began it (the same test); nothing will record it now.
                    let abandon = match command {
                        Some(_) => None,
                        None => begun_key(event),
                    };
                    // The step, its output and the files they touched are the session's own.
                    let session = field("session_id").filter(|s| !s.is_empty());
                    Plan::Step {
                        step: of_session(step, session),
                        command: command.map(|c| of_session(c, session)),
                        tasks,
                        abandon,
                        refused: refused_read(event, failed),
                        answered: if failed { None } else { answers::said(event) },
                    }
                }
                None => Plan::Nothing,
            }
        }
        _ => Plan::Nothing,
    }
}

fn step(event: &Value, failed: bool) -> Option<Value> {
    let tool = event.get("tool_name")?.as_str()?;
    let input = event.get("tool_input").cloned().unwrap_or(Value::Null);
    let id = match event.get("tool_use_id").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => id.to_owned(),
        // Older versions send no id: one derived from the event keeps a re-sent event the same.
        _ => format!(
            "toolu_wfs_{}",
            &blake3::hash(event.to_string().as_bytes()).to_hex()[..24]
        ),
    };
    let response = event.get("tool_response").unwrap_or(&Value::Null);
    let result = if failed {
        event
            .get("error")
            .map(text_of)
            .unwrap_or_else(|| "the tool failed".to_owned())
    } else {
        result_text(tool, response)
    };
    let mut params = Map::new();
    params.insert("tool_use_id".into(), id.into());
    params.insert("tool_name".into(), tool.into());
    params.insert("input".into(), fit::capped_input(input.clone()));
    params.insert(
        "result".into(),
        fit::cut_head(result, MAX_RESULT_BYTES).into(),
    );
    params.insert("is_error".into(), failed.into());
    if !failed && let Some(view) = read_view(tool, &input, response) {
        params.insert("views".into(), json!([view]));
        // A file the projection will not show (outside the project, or in `.venv`): its
        // result is kept instead, or behind `worldfs proxy` the model would lose it.
        params.insert("keep_unshown".into(), true.into());
    }
    if !failed && let Some(file) = edited_file(tool, &input) {
        params.insert("files".into(), json!([file]));
        // A file outside the agent's directory (Claude Code's plan file, under
        // `~/.claude/plans`): what it holds now, which the mount keeps when no projection shows
        // the file. Behind `worldfs proxy` the call that wrote it goes with the history, and
        // the agent would not see its own plan when the user sends it back.
        if let Some(cwd) = agent_cwd(event)
            && Path::new(file).is_absolute()
            && !Path::new(file).starts_with(cwd)
            && let Some(content) = written(tool, &input, response)
        {
            params.insert(
                "wrote".into(),
                json!({ "path": file, "content": fit::cut_head(content, MAX_RESULT_BYTES) }),
            );
        }
    }
    Some(Value::Object(params))
}

/// A Codex freeform `apply_patch` step: its files are those the patch names, it failed when
/// Codex says an exit code other than 0 ("Exit code: 1\n..."), and it is recorded `once`,
/// since the turn's later events read the same patch back from the rollout.
fn freeform_patch(event: &Value, step: &mut Value) {
    let said = step["result"].as_str().unwrap_or_default();
    if let Some(code) = said
        .strip_prefix("Exit code: ")
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|d| d.parse::<i32>().ok())
        && code != 0
    {
        step["is_error"] = true.into();
    }
    let patch = event
        .pointer("/tool_input/command")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if let Some(cwd) = agent_cwd(event) {
        let files = codex::patch_files(patch, cwd);
        if !files.is_empty() {
            step["files"] = files.into();
        }
    }
    step["once"] = true.into();
}

/// The file of a Read that Claude Code refused because of its size ("File content (324.4KB)
/// exceeds maximum allowed size (256KB)", "... (31250 tokens) exceeds maximum allowed tokens
/// (25000)"): it opened the file to tell, and the model saw none of it.
fn refused_read(event: &Value, failed: bool) -> Option<String> {
    if !failed || event.get("tool_name").and_then(Value::as_str) != Some("Read") {
        return None;
    }
    let error = event.get("error").map(text_of).unwrap_or_default();
    if !error.contains("exceeds maximum allowed") {
        return None;
    }
    event
        .pointer("/tool_input/file_path")
        .and_then(Value::as_str)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
}

/// The key under which a call's `PreToolUse` begins it (`command.begin`): a Bash call's or a
/// search's `tool_use_id`, when its output can be cached.
fn begun_key(event: &Value) -> Option<String> {
    bash_call(event)
        .map(|(id, _)| id)
        .or_else(|| search_call(event))
}

/// Whether a subagent made the call: Claude Code names it with `agent_id` (absent on the
/// session's own thread, also in an `--agent` session).
pub(super) fn in_subagent(event: &Value) -> bool {
    event
        .get("agent_id")
        .and_then(Value::as_str)
        .is_some_and(|a| !a.is_empty())
}

/// The change a finished call made to the task list, if any.
fn tool_tasks(event: &Value) -> Option<Value> {
    let tool = event.get("tool_name")?.as_str()?;
    let null = Value::Null;
    let input = event.get("tool_input").unwrap_or(&null);
    let response = event.get("tool_response").unwrap_or(&null);
    tasks::patch(tool, input, response)
}

/// The agent's working directory, as an absolute path (relative ones name nothing here).
pub(super) fn agent_cwd(event: &Value) -> Option<&str> {
    event
        .get("cwd")
        .and_then(Value::as_str)
        .filter(|c| c.starts_with('/'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claude_hook::tests::{post, pre, step_params};

    /// A skill Codex's model opened itself: `worldfs proxy` keeps what the read printed, so
    /// the hook keeps no output of it; a read of another file outside the project is kept.
    #[test]
    fn a_skill_codexs_model_opened_is_no_output_of_the_hooks() {
        let read = |command: &str| {
            json!({"hook_event_name": "PostToolUse", "turn_id": "t1", "cwd": "/p",
                   "session_id": "s1", "tool_name": "Bash", "tool_use_id": "call_1",
                   "tool_input": {"command": command}, "tool_response": "RULE: docstrings\n"})
        };
        let command = |ev: &Value| match plan(ev) {
            Plan::Step { command, .. } => command,
            other => panic!("a step: {other:?}"),
        };
        assert_eq!(command(&read("cat /h/.codex/skills/style/SKILL.md")), None);
        assert!(command(&read("cat /h/notes.txt")).is_some());
    }

    /// A Read refused for the file's size asks the mount to forget the open it made; any other
    /// failure, or a success, does not.
    #[test]
    fn a_read_refused_for_its_size_is_told_to_the_mount() {
        let refused = |error: &str, tool: &str| {
            let mut ev = post(tool, json!({"file_path": "/p/huge.py"}), Value::Null);
            ev["hook_event_name"] = "PostToolUseFailure".into();
            ev["error"] = error.into();
            match plan(&ev) {
                Plan::Step { refused, .. } => refused,
                other => panic!("expected a step, got {other:?}"),
            }
        };
        let size = "File content (324.4KB) exceeds maximum allowed size (256KB). Use offset and limit parameters to read specific portions of the file.";
        let tokens = "File content (31250 tokens) exceeds maximum allowed tokens (25000). Please use offset and limit parameters.";
        assert_eq!(refused(size, "Read").as_deref(), Some("/p/huge.py"));
        assert_eq!(refused(tokens, "Read").as_deref(), Some("/p/huge.py"));
        assert_eq!(refused("File does not exist.", "Read"), None);
        assert_eq!(refused(size, "Edit"), None);
        let ok = post(
            "Read",
            json!({"file_path": "/p/a.py"}),
            json!({"type": "text", "file": {"filePath": "/p/a.py", "content": "x\n"}}),
        );
        assert!(matches!(plan(&ok), Plan::Step { refused: None, .. }));
    }

    fn abandoned(event: &Value) -> Option<String> {
        match plan(event) {
            Plan::Step { abandon, .. } => abandon,
            other => panic!("expected a step, got {other:?}"),
        }
    }

    #[test]
    fn a_call_begun_and_not_recorded_is_abandoned() {
        let id = Some("toolu_01abc".to_owned());
        let mut grep = post("Grep", json!({"pattern": "("}), Value::Null);
        grep["hook_event_name"] = "PostToolUseFailure".into();
        grep["error"] = "regex parse error".into();
        assert_eq!(abandoned(&grep), id, "a failed search");
        let sleep = post(
            "Bash",
            json!({"command": "sleep 100"}),
            json!({"stdout": "", "stderr": "", "interrupted": true}),
        );
        assert_eq!(abandoned(&sleep), id, "an interrupted command");
        let mut nowhere = post("Glob", json!({"pattern": "*.py"}), json!({"filenames": []}));
        nowhere["cwd"] = "relative/dir".into();
        assert_eq!(abandoned(&nowhere), id, "no directory to depend on");
        // Recorded: nothing to abandon. Never begun: nothing either.
        let ls = post("Bash", json!({"command": "ls"}), json!({"stdout": "a"}));
        assert_eq!(abandoned(&ls), None);
        let mut failed_ls = ls.clone();
        failed_ls["hook_event_name"] = "PostToolUseFailure".into();
        failed_ls["error"] = "Exit code 2\nls: cannot access".into();
        assert_eq!(abandoned(&failed_ls), None, "a failed command is recorded");
        let background = post(
            "Bash",
            json!({"command": "npm run dev", "run_in_background": true}),
            json!({"stdout": "", "backgroundTaskId": "b1"}),
        );
        assert_eq!(abandoned(&background), None);
        let read = post("Read", json!({"file_path": "/p/a"}), json!({"file": {}}));
        assert_eq!(abandoned(&read), None);
    }

    #[test]
    fn a_change_to_the_task_list_comes_with_its_step() {
        let todo = post(
            "TodoWrite",
            json!({"todos": [{"content": "Fix it", "status": "in_progress", "activeForm": "F"}]}),
            json!({"oldTodos": [], "newTodos": []}),
        );
        match plan(&todo) {
            Plan::Step { step, tasks, .. } => {
                assert_eq!(step["tool_name"], "TodoWrite");
                assert_eq!(
                    tasks,
                    Some(json!({"tasks": [{"id": "1", "subject": "Fix it",
                                           "status": "in_progress"}]}))
                );
            }
            other => panic!("expected a step, got {other:?}"),
        }
        // A call that failed changed nothing; other tools change no task.
        let mut failed = todo.clone();
        failed["hook_event_name"] = "PostToolUseFailure".into();
        failed["error"] = "InputValidationError".into();
        assert!(matches!(plan(&failed), Plan::Step { tasks: None, .. }));
        let read = post("Read", json!({"file_path": "/p/a"}), json!({}));
        assert!(matches!(plan(&read), Plan::Step { tasks: None, .. }));
    }

    #[test]
    fn a_subagents_calls_are_not_the_sessions_steps_but_share_its_tasks() {
        let sub = |mut ev: Value| {
            ev["agent_id"] = "a1b2".into();
            ev["agent_type"] = "general-purpose".into();
            ev
        };
        let bash = json!({"command": "cat calc.py"});
        assert_eq!(plan(&sub(pre("Bash", bash.clone()))), Plan::Nothing);
        assert_eq!(
            plan(&sub(post("Bash", bash, json!({"stdout": "x = 1\n"})))),
            Plan::Nothing
        );
        let todo = json!({"todos": [{"content": "its own", "status": "pending"}]});
        assert_eq!(
            plan(&sub(post("TodoWrite", todo, json!({})))),
            Plan::Nothing
        );
        assert_eq!(
            plan(&sub(post(
                "TaskUpdate",
                json!({"taskId": "2", "status": "completed"}),
                json!({"success": true})
            ))),
            Plan::Tasks(json!({"tasks": {"upsert": [{"id": "2", "status": "completed"}]}}))
        );
        let mut failed = sub(post("Read", json!({"file_path": "/p/a"}), Value::Null));
        failed["hook_event_name"] = "PostToolUseFailure".into();
        assert_eq!(plan(&failed), Plan::Nothing);
        // An `--agent` session's own thread has an agent_type and no agent_id: its calls count.
        let mut own = post("Read", json!({"file_path": "/p/a"}), json!({}));
        own["agent_type"] = "reviewer".into();
        assert!(matches!(plan(&own), Plan::Step { .. }));
    }

    #[test]
    fn a_failed_call_is_an_error_step() {
        let mut ev = post("Bash", json!({"command": "false"}), Value::Null);
        ev["hook_event_name"] = "PostToolUseFailure".into();
        ev["error"] = "Exit code 1".into();
        let p = step_params(&ev);
        assert_eq!(
            (p["result"].as_str(), p["is_error"].as_bool()),
            (Some("Exit code 1"), Some(true))
        );
    }

    #[test]
    fn an_event_without_an_id_gets_a_stable_one() {
        let mut ev = post(
            "Grep",
            json!({"pattern": "x"}),
            json!({"content": "a.rs:1:x"}),
        );
        ev.as_object_mut().map(|o| o.remove("tool_use_id"));
        let a = step_params(&ev);
        let b = step_params(&ev);
        assert_eq!(a["tool_use_id"], b["tool_use_id"]);
        assert!(
            a["tool_use_id"]
                .as_str()
                .is_some_and(|s| s.starts_with("toolu_wfs_"))
        );
        assert_eq!(a["result"], "a.rs:1:x");
    }

    #[test]
    fn big_results_and_inputs_are_cut() {
        let big = "é".repeat(MAX_RESULT_BYTES);
        let ev = post(
            "Write",
            json!({"file_path": "/p/big.txt", "content": big}),
            json!({"stdout": big}),
        );
        let p = step_params(&ev);
        let result = p["result"].as_str().unwrap_or_default();
        assert!(result.len() < MAX_RESULT_BYTES + 100, "{}", result.len());
        assert!(result.ends_with("bytes left out by worldfs ...]"));
        let content = p["input"]["content"].as_str().unwrap_or_default();
        assert!(content.len() < 2048 + 100);
        assert_eq!(p["input"]["file_path"], "/p/big.txt");
    }

    #[test]
    fn other_events_and_odd_shapes_ask_nothing() {
        for ev in [
            json!({"hook_event_name": "PreToolUse", "tool_name": "Read"}),
            json!({"hook_event_name": "Stop"}),
            json!({"hook_event_name": "PostToolUse"}),
            json!({"no": "event"}),
            json!([1, 2]),
        ] {
            assert_eq!(plan(&ev), Plan::Nothing, "{ev}");
        }
    }
}
