//! `worldfs hook`: Claude Code's hook events, told to the mount's socket.
//!
//! Claude Code runs a hook's command with one event as JSON on stdin (vendor-docs/claude-code.md,
//! section 2). The mount sees every file access on its own; what only the agent knows comes from
//! these events:
//!
//! - `UserPromptSubmit`: the user's prompt is the goal. A later prompt in the same session is
//!   added to it (a follow-up such as "now the tests too" does not replace the task).
//! - `SessionStart` from `startup` or `clear`: a new conversation, so the goal is cleared and the
//!   next prompt sets it. `resume` and `compact` keep it; `compact` also tells the mount that
//!   the conversation now opens with Claude Code's summary of it (`goal.compacted`), which is
//!   how `worldfs proxy` still finds it, and `resume` that a conversation was resumed
//!   (`goal.resumed`), maybe another one than the goal's: the proxy then reads the goal from
//!   the conversation's next call.
//! - `PostToolUse`, `PostToolUseFailure`: the tool call and its result become the last step
//!   (`step.record`), which advances the turn; a Read's shown lines become the file's view.
//! - `PreToolUse` of a Bash call, then its `PostToolUse` (exit code 0) or `PostToolUseFailure`
//!   (any other): the mount saw everything the command read in between, so its output is cached
//!   (`command.begin`, `command.record`) and projected for as long as those files are unchanged.
//!   Only when that can be told: an output is not cached if the command read no file through
//!   the mount (it is kept as the call's earlier result instead, as it was then:
//!   `untracked_tool`). If a whole-tree scanner (`rg`, `grep -r`, `git`) read files meanwhile,
//!   whose reads are not tracked, the output is kept only until anything in the tree changes.
//!   Without the `PreToolUse` hook, no output is cached. A call begun whose output cannot be
//!   cached (interrupted, or a search that failed) is abandoned (`command.abandon`).
//! - `PreToolUse`, then `PostToolUse`, of `Grep` or `Glob`: the result is cached until anything
//!   changes below the directory searched (which files it depends on cannot be told), and
//!   projected until then; not if something there changed while it ran.
//! - `PostToolUse` of `AskUserQuestion` (Codex: `request_user_input`): the user's answers are
//!   added to the goal, as a later prompt is ([`answers`]).
//! - `PostToolUse` of `Agent` (`Task` before 2.1.63), `WebFetch`, `WebSearch`, an MCP tool,
//!   any tool but those handled otherwise ([`NOT_KEPT`]): the result, which
//!   no file holds, is kept as an output (`command.record` with `tool`) that fades with its age
//!   like any other, instead of leaving the projection with the next call.
//! - `PostToolUse` of `Read` of a file no projection shows (outside the mount, or ignored):
//!   the result is kept the same way (`step.record`'s `keep_unshown`).
//! - `PostToolUse` of `TodoWrite`, `TaskCreate`, `TaskUpdate` or `TaskList`: the agent's task
//!   list goes into the structured state ([`tasks`]), so a projection carries the plan that
//!   otherwise lives only in the history. A new conversation clears it with the goal.
//! - A subagent's calls (the event has an `agent_id`) are not the session's steps, and their
//!   Bash outputs are not cached: the session's model never saw them. Its Task tool calls
//!   still edit the task list, which Claude Code shares between the agents of a session.
//!
//! - Every event's `session_id` names the conversation whose goal and task list it changes, so
//!   two sessions in one project (two terminals) each keep their own: one's start does not
//!   clear the other's goal, and `worldfs proxy` picks the goal by the session id Claude Code
//!   sends with each call.
//!
//! - Codex runs hooks of the same shape (`worldfs hook --install --codex`); what its events
//!   say differently (a failed command's exit code, `apply_patch`) is read in [`codex`].
//!
//! A hook must never get in the agent's way. Whatever goes wrong (no mount, no socket, a daemon
//! that does not answer, an event of a shape not known here), it exits 0 without output, so
//! Claude Code carries on; `-v` prints why on stderr.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde_json::{Map, Value, json};

use crate::cli::SocketArg;
use crate::cli_client::resolve_socket_or;
use crate::socket::client::of_session;
use crate::socket::protocol::code;
use crate::socket::{Client, ClientError, fit};
use crate::world::notebook;

pub(crate) mod answers;
pub(crate) mod codex;
pub mod install;
pub(crate) mod tasks;

/// Claude Code waits for its hooks; the socket answers in milliseconds, and `step.record` waits
/// at most 250 ms for the mount's observations.
const TIMEOUT: Duration = Duration::from_secs(3);
/// A result is cut to this many bytes: the socket takes lines of at most 1 MiB, and escaping can
/// make JSON text up to six times longer than the text it holds.
const MAX_RESULT_BYTES: usize = 128 * 1024;
/// Hook events are small; a bigger stdin is not an event.
const MAX_EVENT_BYTES: u64 = 64 * 1024 * 1024;

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

/// Reads one event from `input`, tells the socket, and never fails (see the module docs).
pub fn run(arg: &SocketArg, input: impl Read) {
    if let Err(e) = forward(arg, input) {
        tracing::info!("worldfs hook: nothing told to the mount: {e:#}");
    }
}

fn forward(arg: &SocketArg, input: impl Read) -> anyhow::Result<()> {
    let mut text = String::new();
    input
        .take(MAX_EVENT_BYTES)
        .read_to_string(&mut text)
        .context("reading the hook event from stdin")?;
    let event: Value = serde_json::from_str(&text).context("the hook event is not JSON")?;
    let plan = plan(&event);
    // Codex's `apply_patch` calls that ended since the turn's previous event: steps no event
    // of their own tells, recorded before this event's (they came first). And its thread
    // goal, which no prompt told.
    let own = event.get("tool_use_id").and_then(Value::as_str);
    // A subagent's patches are its own conversation's steps, as its other calls are, and its
    // task is not the user's goal.
    let codex::RolloutNews {
        mut patches,
        objective,
    } = if in_subagent(&event) {
        codex::RolloutNews::default()
    } else {
        codex::rollout_news(&event)
    };
    // The goal the rollout tells of came before one this event's `create_goal` made.
    let objectives: Vec<String> = objective
        .into_iter()
        .chain(codex::created_goal(&event).filter(|_| !in_subagent(&event)))
        .collect();
    // A freeform `apply_patch`'s own PostToolUse tells it, with what the model was told.
    patches.retain(|p| p.get("tool_use_id").and_then(Value::as_str) != own);
    if plan == Plan::Nothing && patches.is_empty() && objectives.is_empty() {
        return Ok(());
    }
    // The event's `cwd` is the agent's; the hook may run elsewhere. The hook's own directory
    // is asked only when nothing else names the socket.
    let socket = resolve_socket_or(arg, || match agent_cwd(&event) {
        Some(cwd) => Ok(PathBuf::from(cwd)),
        None => std::env::current_dir().context("reading the current directory"),
    })?;
    let mut c = Client::connect(&socket, TIMEOUT)?;
    // Each session's goal and task list are its own: two sessions in one project must not
    // clear or extend each other's.
    let session = event
        .get("session_id")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty());
    let in_session = |params: Value| of_session(params, session);
    for objective in &objectives {
        if let Err(e) = add_objective(&mut c, in_session(json!({})), objective) {
            tracing::info!("worldfs hook: Codex's thread goal is not recorded: {e}");
        }
    }
    for patch in patches {
        if let Err(e) = record_step(&mut c, in_session(patch)) {
            tracing::info!("worldfs hook: an apply_patch step is not recorded: {e}");
        }
    }
    match plan {
        Plan::Nothing => {}
        Plan::ClearGoal => {
            c.call("goal.set", in_session(json!({ "goal": null })))?;
            c.call("state.patch", in_session(json!({ "tasks": null })))?;
        }
        Plan::AddToGoal(prompt) => add_to_goal(&mut c, in_session(json!({})), &prompt, false)?,
        Plan::Compacted => {
            c.call("goal.compacted", in_session(json!({})))?;
        }
        Plan::Resumed => {
            c.call("goal.resumed", in_session(json!({})))?;
        }
        Plan::Begin(key) => {
            c.call("command.begin", json!({ "key": key }))?;
        }
        Plan::Keep(params) => {
            record_command(&mut c, in_session(params))?;
        }
        Plan::Tasks(params) => {
            c.call("state.patch", in_session(params))?;
        }
        Plan::Step {
            step,
            command,
            tasks,
            abandon,
            refused,
            answered,
        } => {
            // Before the step, as the prompt of the turn it ends would be; and whatever becomes
            // of it, the step is recorded.
            if let Some(said) = answered
                && let Err(e) = add_to_goal(&mut c, in_session(json!({})), &said, true)
            {
                tracing::info!("worldfs hook: the user's answers are not in the goal: {e}");
            }
            // The task list and the output are a bonus: the step must be recorded whatever
            // becomes of them.
            if let Some(params) = tasks
                && let Err(e) = c.call("state.patch", in_session(params))
            {
                let e = anyhow::Error::from(e);
                tracing::info!("worldfs hook: the task list is not changed: {e:#}");
            }
            if let Some(params) = command {
                match record_command(&mut c, params) {
                    Ok(r) if r.get("cached") == Some(&Value::Bool(false)) => {
                        let why = r.get("why").and_then(|w| w.as_str()).unwrap_or("no reason");
                        let kept = if r.get("kept") == Some(&Value::Bool(true)) {
                            "; kept as an earlier result, as it was then"
                        } else {
                            ""
                        };
                        tracing::info!(
                            "worldfs hook: the command's output is not cached: {why}{kept}"
                        );
                    }
                    Ok(_) => {}
                    Err(e) => tracing::info!("worldfs hook: command.record: {e}"),
                }
            }
            if let Some(key) = abandon
                && let Err(e) = c.call("command.abandon", json!({ "key": key }))
            {
                tracing::info!("worldfs hook: command.abandon: {e}");
            }
            record_step(&mut c, step)?;
            // After the step: the step's own barrier has the refused open applied by then.
            if let Some(path) = refused
                && let Err(e) = c.call("entries.refused", json!({ "path": path }))
            {
                // A daemon older than the hook knows no such method: the file stays counted.
                tracing::info!("worldfs hook: entries.refused: {e}");
            }
        }
    }
    Ok(())
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

/// Records a command's output. A daemon older than the hook (a mount started before worldfs
/// was upgraded) refuses `untracked_tool`, a field it does not know; the output is then
/// recorded without it, as that daemon always did.
fn record_command(c: &mut Client, params: Value) -> Result<Value, ClientError> {
    c.call_or_older("command.record", params, "untracked_tool")
}

/// Fields of `step.record` newer than some daemons.
const NEWER_STEP_FIELDS: [&str; 2] = ["once", "wrote"];

/// Whether a daemon's refusal says it knows no `field`.
fn unknown_field(message: &str, field: &str) -> bool {
    message.contains(&format!("unknown field `{field}`"))
}

/// Records the step; a view the daemon refuses (a file outside the mount, with a daemon older
/// than `keep_unshown`) must not cost the step itself, so it is recorded again without views.
fn record_step(c: &mut Client, params: Value) -> Result<(), ClientError> {
    match c.call("step.record", params.clone()) {
        // A daemon older than the hook (a mount started before worldfs was upgraded) knows no
        // `once` or `wrote`: the step is recorded without it (at worst twice, or without the
        // file's copy).
        Err(ClientError::Rpc(e))
            if e.code == code::INVALID_PARAMS
                && NEWER_STEP_FIELDS
                    .iter()
                    .any(|f| unknown_field(&e.message, f)) =>
        {
            let mut plain = params;
            if let Some(o) = plain.as_object_mut() {
                o.retain(|k, _| !unknown_field(&e.message, k));
            }
            record_step(c, plain)
        }
        Err(ClientError::Rpc(e)) if params.get("views").is_some() => {
            tracing::info!(
                "worldfs hook: step.record refused its views ({}); without",
                e.message
            );
            let mut bare = params;
            if let Some(o) = bare.as_object_mut() {
                o.remove("views");
                // A daemon older than the hook knows no such field.
                o.remove("keep_unshown");
            }
            c.call("step.record", bare).map(drop)
        }
        other => other.map(drop),
    }
}

/// Adds `prompt` to the goal of the session `params` names ([`goal_with`]). `later`: only to a
/// goal the session has: the user's answers are not what it opened with, which `worldfs proxy`
/// knows the conversation by (a hook installed mid-session saw no prompt).
fn add_to_goal(
    c: &mut Client,
    params: Value,
    prompt: &str,
    later: bool,
) -> Result<(), ClientError> {
    let now = c.call("goal.get", params.clone())?;
    let now = now.get("goal").and_then(Value::as_str);
    if later && now.is_none_or(|g| g.trim().is_empty()) {
        tracing::info!("worldfs hook: no goal to add the user's answers to");
        return Ok(());
    }
    let mut params = params;
    params["goal"] = goal_with(now, prompt).into();
    c.call("goal.set", params).map(drop)
}

/// Adds a Codex thread goal's `objective` to the goal of the session `params` names, as a
/// prompt, unless one of its prompts says it already: every event of a turn reads it again.
fn add_objective(c: &mut Client, params: Value, objective: &str) -> anyhow::Result<()> {
    let now = c.call("goal.get", params.clone())?;
    let now = now.get("goal").and_then(Value::as_str);
    if now.is_some_and(|g| g.split(LATER_PROMPT).any(|p| p.trim() == objective)) {
        return Ok(());
    }
    let mut params = params;
    params["goal"] = goal_with(now, objective).into();
    c.call("goal.set", params)?;
    Ok(())
}

/// How Claude Code opens what it tells the model of a background task that ended (a command
/// run with `run_in_background`, a background agent). It passes that to `UserPromptSubmit`
/// hooks as a prompt (2.1.332), while it tells the model, in a system message, that it is
/// "NOT a message from the user": a goal saying the user asked it would mislead the model.
/// The system message, which says where the task's output is, stays in the conversation; a
/// background agent's report in it is kept as the agent's result ([`notice_report`]).
const NOTICES: [&str; 2] = ["<task-notification>", "<task_notification>"];

/// Whether a prompt is Claude Code's notice of a background task ([`NOTICES`]).
fn is_notice(prompt: &str) -> bool {
    let p = prompt.trim_start();
    NOTICES.iter().any(|n| p.starts_with(n))
}

/// `command.record` params keeping the report a background agent's notice carries
/// (`<result>`), as the report of an agent in the foreground is kept (its call's result): the
/// notice is the only place it comes, and behind `worldfs proxy` the notice itself is one of
/// the last few kept. A notice with no result (a background command's: its output is in a
/// file the model reads) keeps nothing.
fn notice_report(event: &Value, notice: &str) -> Option<Value> {
    let tag = |name: &str| notice_tag(notice, name);
    let report = notice_result(notice)?;
    let summary = tag("summary").unwrap_or_default();
    // `Agent "Look at util" finished`: the tool is the summary's first word.
    let tool = summary
        .split_whitespace()
        .next()
        .filter(|t| crate::projection::valid_tool_name(t))
        .unwrap_or("Agent");
    // One task may notify more than once: its latest report replaces the one before.
    let input = json!({ "task": tag("task-id").unwrap_or_default(), "summary": summary });
    Some(json!({
        "command": format!("{tool} {input}"),
        "cwd": agent_cwd(event)?,
        "output": fit::cut_head(report.to_owned(), MAX_RESULT_BYTES),
        "files": [],
        "tool": tool,
    }))
}

/// The text of the first `<NAME>` element of a notice ([`NOTICES`]), trimmed.
fn notice_tag<'a>(notice: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let start = notice.find(&open)? + open.len();
    let end = notice[start..].find(&format!("</{name}>"))?;
    Some(notice[start..start + end].trim())
}

/// The report a notice of a background task carries (`<result>`), as the hook keeps it;
/// `worldfs proxy` tells the projection which of them its request holds.
pub fn notice_result(notice: &str) -> Option<&str> {
    notice_tag(notice, "result").filter(|r| !r.is_empty())
}

/// What joins a later prompt to the goal; `worldfs proxy` splits the goal on it.
pub const LATER_PROMPT: &str = "\n\nThen the user asked:\n";

/// The goal once `prompt` is added to the goal `now`. A prompt said again (a "continue", a
/// prompt scheduled to come back every few minutes) is said once, where it was said last: the
/// goal says what the user asked, the last ask last, and does not grow with each repeat. The
/// first prompt stays where it is (the proxy knows the conversation by it), so a prompt is
/// in the goal at most twice.
pub fn goal_with(now: Option<&str>, prompt: &str) -> String {
    let Some(g) = now.map(str::trim_end).filter(|g| !g.is_empty()) else {
        return prompt.to_owned();
    };
    let said = prompt.trim();
    let mut parts: Vec<&str> = g.split(LATER_PROMPT).collect();
    if parts.last().is_some_and(|p| p.trim() == said) {
        return g.to_owned();
    }
    if let Some(i) = parts.iter().skip(1).position(|p| p.trim() == said) {
        parts.remove(i + 1);
    }
    parts.push(prompt);
    parts.join(LATER_PROMPT)
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

/// The key under which a call's `PreToolUse` begins it (`command.begin`): a Bash call's or a
/// search's `tool_use_id`, when its output can be cached.
fn begun_key(event: &Value) -> Option<String> {
    bash_call(event)
        .map(|(id, _)| id)
        .or_else(|| search_call(event))
}

/// Whether a subagent made the call: Claude Code names it with `agent_id` (absent on the
/// session's own thread, also in an `--agent` session).
fn in_subagent(event: &Value) -> bool {
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

/// The `tool_use_id` and command of a Bash call whose output can be cached: one with an id
/// (Pre- and PostToolUse must name the same call) that runs in the foreground (a background
/// call's result only says it started).
fn bash_call(event: &Value) -> Option<(String, String)> {
    if event.get("tool_name")?.as_str()? != "Bash" {
        return None;
    }
    let id = event
        .get("tool_use_id")?
        .as_str()
        .filter(|id| !id.is_empty())?;
    let input = event.get("tool_input")?;
    if input.get("run_in_background").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    // As the step's input has it, so the projection knows the step's output for this output.
    let capped = fit::capped_input(input.clone());
    let command = capped.get("command")?.as_str().filter(|c| !c.is_empty())?;
    Some((id.to_owned(), command.to_owned()))
}

/// `command.record` params for a finished Bash call (`step`: its `step.record` params), if its
/// output can be cached: not interrupted, and begun by a `PreToolUse` event (`begun`).
/// `codex_exit`: the exit code of a Codex call ([`codex::bash_end`]).
fn command_output(
    event: &Value,
    failed: bool,
    codex_exit: Option<Option<i32>>,
    step: &Value,
) -> Option<Value> {
    let (id, command) = bash_call(event)?;
    let interrupted = if failed {
        event.get("is_interrupt").and_then(Value::as_bool) == Some(true)
    } else {
        event
            .pointer("/tool_response/interrupted")
            .and_then(Value::as_bool)
            == Some(true)
    };
    if interrupted {
        return None;
    }
    let cwd = agent_cwd(event)?;
    // Claude Code reports a failed command as "Exit code N" and what it printed.
    let exit_code = if let Some(code) = codex_exit {
        code.map_or(Value::Null, Value::from)
    } else if failed {
        step.get("result")
            .and_then(Value::as_str)
            .and_then(|r| r.strip_prefix("Exit code "))
            .and_then(|r| {
                let digits = r.split(|c: char| !c.is_ascii_digit() && c != '-').next()?;
                digits.parse::<i32>().ok()
            })
            .map_or(Value::Null, Value::from)
    } else {
        Value::from(0)
    };
    Some(json!({
        "command": command,
        "cwd": cwd,
        "output": step.get("result").cloned().unwrap_or_default(),
        "exit_code": exit_code,
        "begun": id,
        "only_if_tracked": true,
        // Kept as it was then when nothing would tell it is out of date (`curl`, `gh issue
        // view`): behind `worldfs proxy` it would otherwise leave the model's view.
        "untracked_tool": "Bash",
    }))
}

/// The agent's working directory, as an absolute path (relative ones name nothing here).
fn agent_cwd(event: &Value) -> Option<&str> {
    event
        .get("cwd")
        .and_then(Value::as_str)
        .filter(|c| c.starts_with('/'))
}

/// The `tool_use_id` of a Grep or Glob call, whose result can be cached.
fn search_call(event: &Value) -> Option<String> {
    let tool = event.get("tool_name")?.as_str()?;
    if !matches!(tool, "Grep" | "Glob") {
        return None;
    }
    let id = event.get("tool_use_id")?.as_str()?;
    (!id.is_empty()).then(|| id.to_owned())
}

/// `command.record` params for a finished Grep or Glob call: its result depends on every file
/// below the directory it searched (a match can appear in any of them), so it is cached until
/// anything there changes. Begun by its `PreToolUse` (`begun`), so that a change made there
/// while it ran (a parallel Edit) keeps it out. Named by the tool and its input as the step has
/// them, so the projection knows it for the step's own output.
fn search_output(event: &Value, failed: bool, step: &Value) -> Option<Value> {
    let id = search_call(event)?;
    let tool = event.get("tool_name")?.as_str()?;
    if failed {
        return None;
    }
    let cwd = agent_cwd(event)?;
    let input = step.get("input")?;
    // Without a path, the tool searches the working directory.
    let dir = match input.get("path").and_then(Value::as_str) {
        Some(p) if !p.is_empty() => std::path::Path::new(cwd).join(p),
        _ => PathBuf::from(cwd),
    };
    Some(json!({
        "command": format!("{tool} {input}"),
        "cwd": cwd,
        "output": step.get("result").cloned().unwrap_or_default(),
        "exit_code": 0,
        "begun": id,
        "subtrees": [dir.to_string_lossy()],
    }))
}

/// Tools whose result is kept some other way, or says nothing worth keeping: the file tools
/// (the world shows the file as it is now; a Read of a file it leaves out is kept by
/// `keep_unshown`), Bash (its output is cached, or kept by `untracked_tool`), the searches
/// (cached), the task tools (the structured state), ToolSearch and Skill (the proxy keeps what
/// they load), ExitPlanMode (the proxy keeps the plan approved), a background shell's kill,
/// and Codex's goal tools (the objective is the goal,
/// and Codex tells the model where its goal stands at every turn it runs). Every other tool's
/// result is kept: a subagent's report (the work of many calls, in a few paragraphs), a
/// fetched page, a web search, an MCP tool's answer (an issue, a query's rows), the user's
/// answers to the agent's questions.
const NOT_KEPT: &[&str] = &[
    "Read",
    "NotebookRead",
    "Edit",
    "MultiEdit",
    "Write",
    "NotebookEdit",
    // Codex's: the patched files show as they are now.
    "apply_patch",
    "Bash",
    "Grep",
    "Glob",
    "LS",
    "TodoWrite",
    "TodoRead",
    "TaskCreate",
    "TaskUpdate",
    "TaskList",
    "TaskGet",
    "ToolSearch",
    "Skill",
    "KillShell",
    "KillBash",
    "get_goal",
    "create_goal",
    "update_goal",
    // The plan the user approved: `worldfs proxy` keeps it whole for the rest of the session.
    "ExitPlanMode",
    // The user's answers: the goal says them.
    "AskUserQuestion",
    "request_user_input",
];

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

/// `command.record` params for the result of a call of a tool not in [`NOT_KEPT`]: without
/// it, behind `worldfs proxy` the result would be gone from the model's view after one more
/// call, with the history it was part of. Kept as the policy keeps any output (it fades with
/// its age), named by the tool and its input as the step has them.
fn kept_result(event: &Value, failed: bool, step: &Value) -> Option<Value> {
    let tool = event.get("tool_name")?.as_str()?;
    if failed
        || NOT_KEPT.contains(&tool)
        || codex::manages_agents(tool)
        || !crate::projection::valid_tool_name(tool)
    {
        return None;
    }
    if event.get("tool_response").is_some_and(media_only) {
        return None;
    }
    let cwd = agent_cwd(event)?;
    let input = step.get("input")?;
    // A subagent started in the background answers that it started; its report comes later.
    if input.get("run_in_background").and_then(Value::as_bool) == Some(true) {
        return None;
    }
    let output = step.get("result")?.as_str()?;
    if output.trim().is_empty() {
        return None;
    }
    Some(json!({
        "command": format!("{tool} {input}"),
        "cwd": cwd,
        "output": output,
        "files": [],
        "tool": tool,
    }))
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

/// What a successful Write, Edit or MultiEdit left in its file, from the call itself: a Write's
/// content, or the file before an edit (the response's `originalFile`) with the edits made.
/// `None` when that cannot be told (an edit whose text is not in the file as sent).
fn written(tool: &str, input: &Value, response: &Value) -> Option<String> {
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
fn edited_file<'a>(tool: &str, input: &'a Value) -> Option<&'a str> {
    let key = match tool {
        "Edit" | "MultiEdit" | "Write" => "file_path",
        "NotebookEdit" => "notebook_path",
        _ => return None,
    };
    input.get(key)?.as_str().filter(|p| !p.is_empty())
}

/// The result as the model saw it, as near as the hook can tell: a Read's lines numbered the
/// way Claude Code numbers them (`N<TAB>line`, 2.1.228 and later), a Bash's output and errors.
fn result_text(tool: &str, response: &Value) -> String {
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
fn text_of(v: &Value) -> String {
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
fn media_only(response: &Value) -> bool {
    response
        .as_array()
        .or_else(|| response.get("content").and_then(Value::as_array))
        .is_some_and(|blocks| !blocks.is_empty() && blocks.iter().all(is_media))
}

/// The lines a Read showed: from the result when it says (start and count), else from the
/// call's offset and limit. No lines: the whole file.
fn read_view(tool: &str, input: &Value, response: &Value) -> Option<Value> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn post(tool: &str, input: Value, response: Value) -> Value {
        json!({
            "session_id": "s1",
            "hook_event_name": "PostToolUse",
            "cwd": "/work/project",
            "tool_name": tool,
            "tool_use_id": "toolu_01abc",
            "tool_input": input,
            "tool_response": response,
        })
    }

    fn step_params(event: &Value) -> Value {
        match plan(event) {
            Plan::Step { step, .. } => step,
            other => panic!("expected a step, got {other:?}"),
        }
    }

    fn command_params(event: &Value) -> Option<Value> {
        match plan(event) {
            Plan::Step { command, .. } => command,
            other => panic!("expected a step, got {other:?}"),
        }
    }

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

    /// Codex's subagents: starting one answers with its id, which is not kept; waiting for it
    /// answers with its report, which is.
    #[test]
    fn a_codex_subagents_report_is_kept_and_its_start_is_not() {
        let spawned = post(
            "spawn_agent",
            json!({"message": "Summarize a.py"}),
            json!("{\"agent_id\":\"01a2\",\"nickname\":\"Averroes\"}"),
        );
        assert_eq!(command_params(&spawned), None);
        let waited = post(
            "multi_agent_v1wait_agent",
            json!({"targets": ["01a2"]}),
            json!("{\"status\":{\"01a2\":{\"completed\":\"a.py sets x.\"}}}"),
        );
        let kept = command_params(&waited).expect("kept");
        assert!(
            kept["output"]
                .as_str()
                .is_some_and(|o| o.contains("a.py sets x.")),
            "{kept}"
        );
    }

    /// A background agent's report comes only in Claude Code's notice that it ended: kept as
    /// its result, as a report of an agent in the foreground is; a background command's notice
    /// (its output is in a file) keeps nothing.
    #[test]
    fn a_background_agents_report_is_kept_from_its_notice() {
        let notice = |summary: &str, result: &str| {
            json!({"hook_event_name": "UserPromptSubmit", "cwd": "/p", "session_id": "s1",
                   "prompt": format!("<task-notification>\n<task-id>ad3a</task-id>\n\
                    <status>completed</status>\n<summary>{summary}</summary>\n{result}\
                    </task-notification>")})
        };
        let ev = notice(
            "Agent \"Look at util\" finished",
            "<result>show() prints its argument.</result>\n",
        );
        let Plan::Keep(kept) = plan(&ev) else {
            panic!("kept: {:?}", plan(&ev));
        };
        assert_eq!(kept["output"], "show() prints its argument.");
        assert_eq!(kept["tool"], "Agent");
        assert!(
            kept["command"].as_str().is_some_and(|c| c.contains("ad3a")),
            "{kept}"
        );
        let command = notice("Background command \"Run it\" completed (exit code 0)", "");
        assert_eq!(plan(&command), Plan::Nothing);
    }

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

    /// Codex's thread goal: what its tools answer is the goal and its budget, which the
    /// projection's goal and Codex's own word at each turn tell; kept, each answer would be an
    /// output in every projection until it faded.
    #[test]
    fn codexs_goal_tools_answers_are_not_kept() {
        let goal = "{\"goal\":{\"objective\":\"Fix calc\",\"status\":\"active\",\"tokensUsed\":6}}";
        for (tool, input) in [
            ("get_goal", json!({})),
            ("create_goal", json!({"objective": "Fix calc"})),
            ("update_goal", json!({"status": "complete"})),
        ] {
            let ev = post(tool, input, json!(goal));
            assert_eq!(command_params(&ev), None, "{tool}");
            assert_eq!(step_params(&ev)["tool_name"], tool, "still the last step");
        }
    }

    /// The plan the user approved is the proxy's to keep: as an output it would fade.
    #[test]
    fn the_approved_plan_is_no_output_of_the_hooks() {
        let ev = post(
            "ExitPlanMode",
            json!({}),
            json!({"plan": "# Fix add()\n\n1. Make it add.\n", "isAgent": false,
                   "filePath": "/h/.claude/plans/fix-add-blue-kettle.md"}),
        );
        assert_eq!(command_params(&ev), None);
        assert_eq!(
            step_params(&ev)["tool_name"],
            "ExitPlanMode",
            "still the last step"
        );
    }

    fn pre(tool: &str, input: Value) -> Value {
        let mut ev = post(tool, input, Value::Null);
        ev["hook_event_name"] = "PreToolUse".into();
        ev.as_object_mut().map(|o| o.remove("tool_response"));
        ev
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

    /// A daemon older than the hook, on a socket in `dir`: it refuses a call naming `field`, as
    /// serde does, then answers `{"cached": true}` to one without it; the thread returns the
    /// params of every call it got.
    fn older_daemon(
        dir: &std::path::Path,
        field: &'static str,
    ) -> (Client, std::thread::JoinHandle<Vec<Value>>) {
        use std::io::{BufRead, BufReader, Write};
        let path = dir.join("old.sock");
        let listener =
            std::os::unix::net::UnixListener::bind(&path).unwrap_or_else(|e| panic!("{e}"));
        let daemon = std::thread::spawn(move || {
            let (s, _) = listener.accept().unwrap_or_else(|e| panic!("{e}"));
            let mut w = s.try_clone().unwrap_or_else(|e| panic!("{e}"));
            let mut seen = Vec::new();
            for line in BufReader::new(s).lines() {
                let req: Value = serde_json::from_str(&line.unwrap_or_else(|e| panic!("{e}")))
                    .unwrap_or_default();
                let known = req["params"].get(field).is_none();
                let reply = if known {
                    json!({"jsonrpc": "2.0", "id": req["id"], "result": {"cached": true}})
                } else {
                    json!({"jsonrpc": "2.0", "id": req["id"], "error": {"code": -32602,
                        "message": format!("unknown field `{field}`, expected one of `x`")}})
                };
                seen.push(req["params"].clone());
                writeln!(w, "{reply}").unwrap_or_else(|e| panic!("{e}"));
                if known {
                    break;
                }
            }
            seen
        });
        let c = Client::connect(&path, std::time::Duration::from_secs(5))
            .unwrap_or_else(|e| panic!("{e}"));
        (c, daemon)
    }

    /// A mount started before worldfs was upgraded knows no `untracked_tool`: the output is
    /// recorded without it, as that daemon always did, instead of being lost. Nor `wrote`: the
    /// step is recorded without the file's copy.
    #[test]
    fn an_older_daemon_gets_the_output_without_the_field_it_does_not_know() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (mut c, daemon) = older_daemon(dir.path(), "untracked_tool");
        let params = json!({"command": "ls", "output": "a.py", "begun": "toolu_1",
                            "only_if_tracked": true, "untracked_tool": "Bash"});
        let r = record_command(&mut c, params).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r["cached"], true);
        let seen = daemon
            .join()
            .unwrap_or_else(|_| panic!("the daemon thread"));
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[1]["untracked_tool"], Value::Null);
        assert_eq!(seen[1]["command"], "ls");

        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (mut c, daemon) = older_daemon(dir.path(), "wrote");
        let step = json!({"tool_use_id": "toolu_w", "tool_name": "Write", "result": "ok",
                          "wrote": {"path": "/p/plan.md", "content": "x"}});
        record_step(&mut c, step).unwrap_or_else(|e| panic!("{e}"));
        let seen = daemon
            .join()
            .unwrap_or_else(|_| panic!("the daemon thread"));
        assert_eq!(seen.len(), 2);
        assert_eq!(seen[1].get("wrote"), None);
        assert_eq!(seen[1]["tool_use_id"], "toolu_w");
    }

    #[test]
    fn a_bash_call_is_begun_before_it_runs_and_its_output_recorded_after() {
        let input = json!({"command": "pytest -q tests/test_calc.py", "description": "Run"});
        assert_eq!(
            plan(&pre("Bash", input.clone())),
            Plan::Begin("toolu_01abc".into())
        );
        let ev = post(
            "Bash",
            input,
            json!({"stdout": "1 passed", "stderr": "", "interrupted": false, "isImage": false}),
        );
        let cmd = command_params(&ev).expect("an output to record");
        assert_eq!(
            cmd,
            json!({"command": "pytest -q tests/test_calc.py", "cwd": "/work/project",
                   "output": "1 passed", "exit_code": 0, "begun": "toolu_01abc",
                   "only_if_tracked": true, "untracked_tool": "Bash", "session": "s1"})
        );
        assert_eq!(
            cmd["output"],
            step_params(&ev)["result"],
            "the step's result, as it is"
        );
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
    fn a_failed_bash_call_records_its_exit_code() {
        let mut ev = post("Bash", json!({"command": "pytest"}), Value::Null);
        ev["hook_event_name"] = "PostToolUseFailure".into();
        ev["error"] = "Exit code 2\nE   AssertionError".into();
        let cmd = command_params(&ev).expect("an output to record");
        assert_eq!(cmd["exit_code"], 2);
        assert_eq!(cmd["output"], "Exit code 2\nE   AssertionError");
        ev["error"] = "Command timed out".into();
        assert_eq!(
            command_params(&ev).expect("recorded")["exit_code"],
            Value::Null
        );
    }

    #[test]
    fn outputs_that_say_nothing_lasting_are_not_recorded() {
        let background = json!({"command": "npm run dev", "run_in_background": true});
        assert_eq!(plan(&pre("Bash", background.clone())), Plan::Nothing);
        let ev = post(
            "Bash",
            background,
            json!({"stdout": "", "backgroundTaskId": "b1"}),
        );
        assert_eq!(command_params(&ev), None, "a background call only started");
        let ev = post(
            "Bash",
            json!({"command": "sleep 100"}),
            json!({"stdout": "", "stderr": "", "interrupted": true}),
        );
        assert_eq!(command_params(&ev), None, "interrupted");
        let mut ev = post("Bash", json!({"command": "sleep 100"}), Value::Null);
        ev["hook_event_name"] = "PostToolUseFailure".into();
        ev["is_interrupt"] = true.into();
        assert_eq!(
            command_params(&ev),
            None,
            "interrupted, reported as a failure"
        );
        let mut ev = post("Bash", json!({"command": "ls"}), json!({"stdout": "a"}));
        ev.as_object_mut().map(|o| o.remove("tool_use_id"));
        assert_eq!(
            command_params(&ev),
            None,
            "no id: no PreToolUse to pair it with"
        );
        assert_eq!(
            plan(&pre("Read", json!({"file_path": "/p/a"}))),
            Plan::Nothing
        );
        let read = post("Read", json!({"file_path": "/p/a"}), json!({"file": {}}));
        assert_eq!(command_params(&read), None);
    }

    #[test]
    fn a_subagents_report_and_a_fetched_page_are_kept() {
        let input = json!({"description": "Find the parser", "prompt": "Where is the date parser?",
                           "subagent_type": "Explore"});
        let ev = post(
            "Agent",
            input.clone(),
            json!({"status": "completed", "agentId": "a1", "totalDurationMs": 5000,
                   "content": [{"type": "text", "text": "It is in src/dates.py,"},
                               {"type": "text", "text": "function parse()."}]}),
        );
        let report = "It is in src/dates.py,\nfunction parse().";
        assert_eq!(step_params(&ev)["result"], report);
        assert_eq!(
            command_params(&ev),
            Some(
                json!({"command": format!("Agent {input}"), "cwd": "/work/project",
                        "output": report, "files": [], "tool": "Agent", "session": "s1"})
            )
        );
        let fetch = post(
            "WebFetch",
            json!({"url": "https://docs.rs/x", "prompt": "the API"}),
            json!({"result": "x::parse takes a &str", "code": 200, "url": "https://docs.rs/x"}),
        );
        let kept = command_params(&fetch).expect("kept");
        assert_eq!(kept["output"], "x::parse takes a &str");
        assert_eq!(kept["tool"], "WebFetch");
        let search = post(
            "WebSearch",
            json!({"query": "x parse"}),
            json!({"query": "x parse", "durationSeconds": 1.5, "results": [
                {"tool_use_id": "srvtoolu_1", "content": [{"title": "x docs", "url": "https://docs.rs/x"}]},
                "x::parse takes a &str and returns a Date."]}),
        );
        assert_eq!(
            command_params(&search).expect("kept")["output"],
            "Web search results for query: \"x parse\"\n\nLinks: \
             [{\"title\":\"x docs\",\"url\":\"https://docs.rs/x\"}]\n\n\
             x::parse takes a &str and returns a Date.\n"
        );
        // Not a failed call, nor an empty result, nor another tool's.
        let mut failed = ev.clone();
        failed["hook_event_name"] = "PostToolUseFailure".into();
        failed["error"] = "the subagent was interrupted".into();
        assert_eq!(command_params(&failed), None);
        let empty = post(
            "Agent",
            input.clone(),
            json!({"content": [{"type": "text", "text": " "}]}),
        );
        assert_eq!(command_params(&empty), None);
        let mut background = input;
        background["run_in_background"] = true.into();
        let started = post(
            "Agent",
            background,
            json!({"content": [{"type": "text", "text": "Agent started in the background."}]}),
        );
        assert_eq!(command_params(&started), None, "only started");
        let edit = post(
            "Edit",
            json!({"file_path": "/work/project/a.py"}),
            json!({"filePath": "/work/project/a.py"}),
        );
        assert_eq!(command_params(&edit), None);
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

    #[test]
    fn a_search_result_is_cached_until_anything_below_the_searched_directory_changes() {
        let grep = post(
            "Grep",
            json!({"pattern": "def add", "path": "src", "output_mode": "content"}),
            json!({"mode": "content", "content": "src/calc.py:1:def add(a, b):", "numLines": 1}),
        );
        assert_eq!(
            command_params(&grep),
            Some(json!({
                "command": r#"Grep {"output_mode":"content","path":"src","pattern":"def add"}"#,
                "cwd": "/work/project",
                "output": "src/calc.py:1:def add(a, b):",
                "exit_code": 0,
                "begun": "toolu_01abc",
                "subtrees": ["/work/project/src"],
                "session": "s1",
            }))
        );
        // Its PreToolUse notes where it starts, as a Bash call's does.
        let pre_grep = pre("Grep", json!({"pattern": "def add", "path": "src"}));
        assert_eq!(plan(&pre_grep), Plan::Begin("toolu_01abc".into()));
        assert_eq!(
            plan(&pre("Read", json!({"file_path": "/p/a"}))),
            Plan::Nothing
        );
        // No path: the working directory; an absolute one as it is.
        let glob = post(
            "Glob",
            json!({"pattern": "**/*.py"}),
            json!({"filenames": ["/work/project/a.py"], "numFiles": 1}),
        );
        assert_eq!(
            command_params(&glob).map(|c| c["subtrees"].clone()),
            Some(json!(["/work/project"]))
        );
        let glob = post(
            "Glob",
            json!({"pattern": "*.py", "path": "/elsewhere"}),
            json!({"filenames": []}),
        );
        assert_eq!(
            command_params(&glob).map(|c| c["subtrees"].clone()),
            Some(json!(["/elsewhere"]))
        );
        // A failed search, or a subagent's, is not cached.
        let mut failed = grep.clone();
        failed["hook_event_name"] = "PostToolUseFailure".into();
        failed["error"] = "bad regex".into();
        assert_eq!(command_params(&failed), None);
        let mut sub = grep;
        sub["agent_id"] = "a1".into();
        assert_eq!(plan(&sub), Plan::Nothing);
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
    fn prompts_and_sessions_make_the_goal() {
        let ev = json!({"hook_event_name": "UserPromptSubmit", "prompt": "Fix the parser"});
        assert_eq!(plan(&ev), Plan::AddToGoal("Fix the parser".into()));
        let blank = json!({"hook_event_name": "UserPromptSubmit", "prompt": "  "});
        assert_eq!(plan(&blank), Plan::Nothing);
        for (source, want) in [
            ("startup", Plan::ClearGoal),
            ("clear", Plan::ClearGoal),
            ("resume", Plan::Resumed),
            ("compact", Plan::Compacted),
        ] {
            let ev = json!({"hook_event_name": "SessionStart", "source": source});
            assert_eq!(plan(&ev), want, "{source}");
        }
        let sub = json!({"hook_event_name": "SessionStart", "source": "compact", "agent_id": "a1"});
        assert_eq!(plan(&sub), Plan::Nothing, "a subagent's compaction");
        // A Codex subagent's task, a prompt of its own in the session: not the user's.
        let task = json!({"hook_event_name": "UserPromptSubmit", "prompt": "Summarize a.py",
                          "agent_id": "019a", "agent_type": "default", "turn_id": "t2"});
        assert_eq!(plan(&task), Plan::Nothing, "a Codex subagent's task");
        // Claude Code's notice that a background command ended, passed on as a prompt.
        let notice = json!({"hook_event_name": "UserPromptSubmit", "prompt":
            "<task-notification>\n<task-id>b3r6</task-id>\n<status>completed</status>\n\
             <summary>Background command \"Run it\" completed (exit code 0)</summary>\n\
             </task-notification>"});
        assert_eq!(plan(&notice), Plan::Nothing, "a background task's notice");
        let start =
            json!({"hook_event_name": "SessionStart", "source": "startup", "agent_id": "a1"});
        assert_eq!(plan(&start), Plan::Nothing, "a subagent's start");
        assert_eq!(goal_with(None, "Fix it"), "Fix it");
        assert_eq!(goal_with(Some(""), "Fix it"), "Fix it");
        assert_eq!(
            goal_with(Some("Fix it\n"), "and the tests"),
            "Fix it\n\nThen the user asked:\nand the tests"
        );
        // Said again: once, where it was said last; the first prompt stays first.
        let prompts = [
            "Fix it",
            "continue",
            "Run the tests",
            "continue",
            "continue",
            "Fix it",
        ];
        let goal = prompts.iter().fold(None, |g: Option<String>, p| {
            Some(goal_with(g.as_deref(), p))
        });
        assert_eq!(
            goal.as_deref(),
            Some(
                "Fix it\n\nThen the user asked:\nRun the tests\n\nThen the user asked:\ncontinue\
                 \n\nThen the user asked:\nFix it"
            )
        );
        assert_eq!(goal_with(Some("Fix it"), "Fix it "), "Fix it");
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
