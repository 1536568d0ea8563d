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
//!   any tool but those handled otherwise (`NOT_KEPT`, in [`outputs`]): the result, which
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
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use crate::cli::SocketArg;
use crate::cli_client::resolve_socket_or;
use crate::socket::client::of_session;
use crate::socket::protocol::code;
use crate::socket::{Client, ClientError};

pub(crate) mod answers;
pub(crate) mod codex;
pub mod codex_trust;
mod goal;
pub mod install;
mod notices;
mod outputs;
mod plan;
mod result;
pub(crate) mod tasks;

pub use goal::{LATER_PROMPT, goal_with};
pub use notices::notice_result;
pub use plan::{Plan, plan};

use goal::{add_objective, add_to_goal};
use plan::{agent_cwd, in_subagent};

/// Claude Code waits for its hooks; the socket answers in milliseconds, and `step.record` waits
/// at most 250 ms for the mount's observations.
const TIMEOUT: Duration = Duration::from_secs(3);
/// A result is cut to this many bytes: the socket takes lines of at most 1 MiB, and escaping can
/// make JSON text up to six times longer than the text it holds.
const MAX_RESULT_BYTES: usize = 128 * 1024;
/// Hook events are small; a bigger stdin is not an event.
const MAX_EVENT_BYTES: u64 = 64 * 1024 * 1024;

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

#[cfg(test)]
mod tests {
    use super::*;

    // Events as Claude Code sends them, and the parts of their plan: the tests of the pieces
    // (`plan`, `result`, `outputs`) make theirs with these.

    pub(super) fn post(tool: &str, input: Value, response: Value) -> Value {
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

    pub(super) fn step_params(event: &Value) -> Value {
        match plan(event) {
            Plan::Step { step, .. } => step,
            other => panic!("expected a step, got {other:?}"),
        }
    }

    pub(super) fn command_params(event: &Value) -> Option<Value> {
        match plan(event) {
            Plan::Step { command, .. } => command,
            other => panic!("expected a step, got {other:?}"),
        }
    }

    pub(super) fn pre(tool: &str, input: Value) -> Value {
        let mut ev = post(tool, input, Value::Null);
        ev["hook_event_name"] = "PreToolUse".into();
        ev.as_object_mut().map(|o| o.remove("tool_response"));
        ev
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
}
