//! The outputs a finished call leaves for the mount to keep (`command.record`).
//!
//! A call's result otherwise lives only in the conversation: behind `worldfs proxy` it is gone
//! from the model's view with the history. How long it can be kept depends on what it depends
//! on, and the call's tool tells that: a Bash output on the files the command read (cached
//! while they are unchanged), a Grep's or a Glob's on the directory searched (until anything
//! there changes), any other tool's on nothing the mount sees (kept, fading with its age, like
//! any other output). A tool whose result is kept some other way keeps none here.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::codex;
use super::plan::agent_cwd;
use super::result::media_only;
use crate::socket::fit;

/// The `tool_use_id` and command of a Bash call whose output can be cached: one with an id
/// (Pre- and PostToolUse must name the same call) that runs in the foreground (a background
/// call's result only says it started).
pub(super) fn bash_call(event: &Value) -> Option<(String, String)> {
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
pub(super) fn command_output(
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

/// The `tool_use_id` of a Grep or Glob call, whose result can be cached.
pub(super) fn search_call(event: &Value) -> Option<String> {
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
pub(super) fn search_output(event: &Value, failed: bool, step: &Value) -> Option<Value> {
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

/// `command.record` params for the result of a call of a tool not in [`NOT_KEPT`]: without
/// it, behind `worldfs proxy` the result would be gone from the model's view after one more
/// call, with the history it was part of. Kept as the policy keeps any output (it fades with
/// its age), named by the tool and its input as the step has them.
pub(super) fn kept_result(event: &Value, failed: bool, step: &Value) -> Option<Value> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claude_hook::tests::{command_params, post, pre, step_params};
    use crate::claude_hook::{Plan, plan};

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
}
