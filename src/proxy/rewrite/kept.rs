//! What of the history replaced goes on in the rewritten request.
//!
//! The projection gives back the files and command outputs as they are now. Some of what the
//! history held is in no file the world has, or is no result that ages: the skills and the
//! instructions the agent still follows, the plan the user approved, what the user said turning
//! a call down or showed with a command of its own, the text of a command the user invoked, the
//! tool searches that made deferred tools known to the API. Gone with the history, each would
//! leave the model's view one call later while it still matters; kept, each is kept once.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::content::{any_text, blocks_of, kind, role, texts, without_breakpoints};
use super::conversation::invocation;
use super::{EXIT_PLAN_MODE, PLAN_APPROVED, TASK_NOTICE};
use crate::claude_hook::LATER_PROMPT;

/// How Claude Code (2.1.332) opens the text block with a skill's instructions, which it puts
/// after the `Skill` call's result ("Launching skill: NAME") in the same message.
pub(super) const SKILL_LOADED: &str = "Base directory for this skill: ";

/// The instructions of the skills the agent loaded in `history`, once each, without
/// breakpoints. They are instructions, not a result that ages: with the history they would
/// leave the model's view one call after the `Skill` call that loaded them, while the agent
/// still follows them. (The skill's file is under `.claude`, which the world leaves out.)
pub(super) fn skill_loads(history: &[Value]) -> Vec<Value> {
    let mut seen = HashSet::new();
    blocks_of(history, "user")
        .filter(|b| {
            kind(b) == Some("text")
                && b.get("text")
                    .and_then(Value::as_str)
                    .is_some_and(|t| t.starts_with(SKILL_LOADED))
        })
        .map(without_breakpoints)
        .filter(|b| seen.insert(b.to_string()))
        .collect()
}

/// How Claude Code (2.1.332) opens the reminder that brings an instruction file below the
/// project's root (`src/CLAUDE.md`) into the conversation: it adds it to the result of the
/// first call that reads a file in that directory, as `Contents of PATH:`, a blank line and
/// the file's text. (The files of the first message say what they are: `Contents of PATH
/// (project instructions, ...):`.)
const NESTED_INSTRUCTIONS: &str = "Contents of /";
const REMINDER: &str = "<system-reminder>\n";

/// The instruction files Claude Code attached to tool results in `history`
/// ([`NESTED_INSTRUCTIONS`] in a reminder of its own), the last copy of each file, without
/// breakpoints. They are instructions for the rest of the session, as the first message's
/// CLAUDE.md is: with the history they would go one call after the result that brought them,
/// and as a file of the world they would fade with its age, while the agent still works in
/// that directory.
pub(super) fn nested_instructions(history: &[Value]) -> Vec<Value> {
    let mut out: Vec<(&str, Value)> = Vec::new();
    for b in blocks_of(history, "user").filter(|b| kind(b) == Some("text")) {
        let Some(text) = b.get("text").and_then(Value::as_str) else {
            continue;
        };
        let Some(heading) = text
            .strip_prefix(REMINDER)
            .filter(|t| t.starts_with(NESTED_INSTRUCTIONS))
            .and_then(|t| t.split_once('\n'))
            .map(|(heading, _)| heading)
            .filter(|h| h.ends_with(':'))
        else {
            continue;
        };
        out.retain(|(h, _)| *h != heading);
        out.push((heading, without_breakpoints(b)));
    }
    out.into_iter().map(|(_, b)| b).collect()
}

/// The last plan the user approved in `history` (an `ExitPlanMode` call's result), as a text
/// block. The agent works through it for the rest of the session, as it does through its task
/// list: with the history it would go one call after the approval. (The plan file is under
/// `~/.claude/plans`, outside the project.)
pub(super) fn approved_plan(history: &[Value]) -> Option<Value> {
    let text = tool_results(history)
        .filter(|(tool, _)| *tool == EXIT_PLAN_MODE)
        .map(|(_, b)| texts(b.get("content")).join("\n"))
        .filter(|t| t.starts_with(PLAN_APPROVED))
        .last()?;
    Some(serde_json::json!({ "type": "text", "text": text }))
}

/// The tool results of `history`, each with the name of the tool its call named.
fn tool_results(history: &[Value]) -> impl Iterator<Item = (&str, &Value)> {
    let names: HashMap<&str, &str> = blocks_of(history, "assistant")
        .filter(|b| kind(b) == Some("tool_use"))
        .filter_map(|b| Some((b.get("id")?.as_str()?, b.get("name")?.as_str()?)))
        .collect();
    blocks_of(history, "user")
        .filter(|b| kind(b) == Some("tool_result"))
        .filter_map(move |b| Some((*names.get(b.get("tool_use_id")?.as_str()?)?, b)))
}

/// What Claude Code (2.1.332) puts before the user's words in the result of a call the user
/// turned down with a reason ("Tell Claude what to change" on a plan, "No" with a note on an
/// edit): no hook hears of such a call, nor of the words.
const USER_SAID: &str = "To tell you how to proceed, the user said:\n";

/// What the user said when turning down the agent's calls in `history`, as text blocks, once
/// each, in order. They are the user's words, as a prompt is: with the history they would go
/// one call after, while the agent still has to act on them.
pub(super) fn user_feedback(history: &[Value]) -> Vec<Value> {
    let mut seen = HashSet::new();
    tool_results(history)
        .filter(|(_, b)| b.get("is_error").and_then(Value::as_bool) == Some(true))
        .filter_map(|(tool, b)| {
            let text = texts(b.get("content")).join("\n");
            let (_, said) = text.split_once(USER_SAID)?;
            let said = said.trim();
            (!said.is_empty()).then(|| {
                format!("The user turned down the agent's `{tool}` call and said:\n{said}")
            })
        })
        .filter(|t| seen.insert(t.clone()))
        .map(|text| serde_json::json!({ "type": "text", "text": text }))
        .collect()
}

/// How Claude Code (2.1.332) sends a command the user ran in bash mode (`! python3 calc.py` at
/// its prompt): a user message of its own, a text block with the command in `<bash-input>`,
/// then one with its output in `<bash-stdout>` and `<bash-stderr>`. No hook hears of it.
const BASH_INPUT: &str = "<bash-input>";
const BASH_OUTPUT: [&str; 2] = ["<bash-stdout>", "<bash-stderr>"];

/// The last this many commands the user ran in bash mode are kept: like the notices, each is
/// small, and a session where the user runs one now and then would otherwise carry them all.
const SHELL_RUNS_KEPT: usize = 4;

/// The commands the user ran in bash mode in `history` and their output ([`BASH_INPUT`]), the
/// last [`SHELL_RUNS_KEPT`], once each, as they came, without breakpoints. The user ran them
/// to show the agent something (a failing test, a log): with the history they would go one
/// call later, and no file or hook keeps them.
pub(super) fn shell_runs(history: &[Value]) -> Vec<Value> {
    let starts = |b: &Value, marks: &[&str]| {
        kind(b) == Some("text")
            && b.get("text")
                .and_then(Value::as_str)
                .is_some_and(|t| marks.iter().any(|m| t.trim_start().starts_with(m)))
    };
    let mut runs: Vec<Vec<Value>> = Vec::new();
    for m in history.iter().filter(|m| role(m) == Some("user")) {
        let Some(blocks) = m.get("content").and_then(Value::as_array) else {
            continue;
        };
        // An output goes with the command before it in the same message.
        let mut open = false;
        for b in blocks {
            if starts(b, &[BASH_INPUT]) {
                runs.push(vec![without_breakpoints(b)]);
                open = true;
            } else if open
                && starts(b, &BASH_OUTPUT)
                && let Some(run) = runs.last_mut()
            {
                run.push(without_breakpoints(b));
            } else {
                open = false;
            }
        }
    }
    // The same command run again with the same output is kept once, where it ran last.
    let mut seen = HashSet::new();
    let mut kept: Vec<Vec<Value>> = runs
        .into_iter()
        .rev()
        .filter(|r| seen.insert(Value::Array(r.clone()).to_string()))
        .take(SHELL_RUNS_KEPT)
        .collect();
    kept.reverse();
    kept.into_iter().flatten().collect()
}

/// The later prompts of the goal (`later`, joined by [`LATER_PROMPT`]), each command the user
/// invoked in `history` followed by its text: the goal says `/NAME ARGS`, as the hooks got it,
/// and with the history the model would lose what the command told it. A skill's text is
/// kept with the skills' instructions ([`skill_loads`]) instead.
pub(super) fn with_command_texts(later: &str, history: &[Value]) -> String {
    let texts: HashMap<String, &str> = history
        .iter()
        .filter(|m| role(m) == Some("user"))
        .filter_map(|m| match invocation(m.get("content"))? {
            (said, text) if !text.starts_with(SKILL_LOADED) => Some((said, text)),
            _ => None,
        })
        .collect();
    if texts.is_empty() {
        return later.to_owned();
    }
    later
        .split(LATER_PROMPT)
        .map(|p| match texts.get(p.trim()) {
            Some(text) => format!("{}\n\n{}", p.trim_end(), text.trim()),
            None => p.to_owned(),
        })
        .collect::<Vec<_>>()
        .join(LATER_PROMPT)
}

/// The calls of `history` whose results load deferred tools (hold `tool_reference` blocks:
/// Claude Code's ToolSearch, with `ENABLE_TOOL_SEARCH`), as one assistant message, and those
/// results as the user message answering it. Without them, a deferred tool the agent found
/// would be unknown to the API again, and a call of it refused.
pub(super) fn tool_loads(history: &[Value]) -> Vec<Value> {
    let loads = |b: &&Value| {
        kind(b) == Some("tool_result")
            && b.get("content")
                .and_then(Value::as_array)
                .is_some_and(|c| c.iter().any(|p| kind(p) == Some("tool_reference")))
    };
    let mut results: Vec<&Value> = blocks_of(history, "user").filter(loads).collect();
    fn id_of<'a>(b: &'a Value, key: &str) -> Option<&'a str> {
        b.get(key).and_then(Value::as_str)
    }
    let loading: HashSet<&str> = results
        .iter()
        .filter_map(|b| id_of(b, "tool_use_id"))
        .collect();
    let calls: Vec<&Value> = blocks_of(history, "assistant")
        .filter(|b| {
            kind(b) == Some("tool_use") && id_of(b, "id").is_some_and(|id| loading.contains(id))
        })
        .collect();
    let called: HashSet<&str> = calls.iter().filter_map(|b| id_of(b, "id")).collect();
    results.retain(|b| id_of(b, "tool_use_id").is_some_and(|id| called.contains(id)));
    if results.is_empty() {
        return Vec::new();
    }
    fn unmark(v: &mut Value) {
        match v {
            Value::Object(o) => {
                o.remove("cache_control");
                o.values_mut().for_each(unmark);
            }
            Value::Array(a) => a.iter_mut().for_each(unmark),
            _ => {}
        }
    }
    let bare = |b: &&Value| {
        let mut b = (*b).clone();
        unmark(&mut b);
        b
    };
    vec![
        serde_json::json!({"role": "assistant", "content": calls.iter().map(bare).collect::<Vec<_>>()}),
        serde_json::json!({"role": "user", "content": results.iter().map(bare).collect::<Vec<_>>()}),
    ]
}

/// Whether `m` is Claude Code's notice of a background task ([`TASK_NOTICE`]).
pub(super) fn is_task_notice(m: &Value) -> bool {
    any_text(m.get("content"), |t| t.contains(TASK_NOTICE))
}

#[cfg(test)]
mod tests {
    use super::super::tests::{PROMPT, plan_of, projection, request};
    use super::super::{block_texts, plan, splice};
    use super::*;
    use crate::projection::validate::count_cache_control;
    use serde_json::json;

    /// A skill's instructions, loaded by a `Skill` call in the history replaced, stay: the
    /// agent still follows them. Once each, however often it was loaded.
    #[test]
    fn skills_loaded_in_the_history_are_kept_once() {
        let mut body = request(5);
        let skill =
            format!("{SKILL_LOADED}/p/.claude/skills/style\n\nEvery function gets a docstring.\n");
        for call in [0, 2] {
            let m = &mut body["messages"];
            m[1 + 2 * call]["content"][1] = json!({"type": "tool_use", "id": format!("toolu_{call}"),
                "name": "Skill", "input": {"skill": "style"}});
            m[2 + 2 * call]["content"][0]["content"] = json!("Launching skill: style");
            m[2 + 2 * call]["content"]
                .as_array_mut()
                .expect("blocks")
                .push(
                    json!({"type": "text", "text": skill, "cache_control": {"type": "ephemeral"}}),
                );
        }
        let plan = plan(&body, Some(PROMPT), false).expect("eligible");
        assert_eq!(plan.kept_blocks, [json!({"type": "text", "text": skill})]);
        let out = splice(&body, &plan, &projection()).expect("valid");
        assert_eq!(
            out["messages"]
                .to_string()
                .matches("gets a docstring")
                .count(),
            1,
            "{out}"
        );
    }

    /// A CLAUDE.md below the root, which Claude Code attached to a tool result, is kept as the
    /// instructions it is: the last copy of each file, once. One the last turn brings is left
    /// to it.
    #[test]
    fn instructions_attached_to_results_are_kept_the_last_of_each_file() {
        let mut body = request(5);
        let nested = |path: &str, text: &str| {
            format!("<system-reminder>\nContents of {path}:\n\n{text}\n\n</system-reminder>")
        };
        for (call, path, text) in [
            (0, "/p/src/CLAUDE.md", "Tabs, not spaces."),
            (1, "/p/web/CLAUDE.md", "No jQuery."),
            (2, "/p/src/CLAUDE.md", "Spaces, not tabs."),
            (4, "/p/docs/CLAUDE.md", "British spelling."),
        ] {
            body["messages"][2 + 2 * call]["content"]
                .as_array_mut()
                .expect("blocks")
                .push(json!({"type": "text", "text": nested(path, text)}));
        }
        // Not such a reminder: a prompt that says the words.
        body["messages"][4]["content"]
            .as_array_mut()
            .expect("blocks")
            .push(json!({"type": "text", "text": "Contents of /p/x.md:\n\nno"}));
        let plan = plan(&body, Some(PROMPT), false).expect("eligible");
        assert_eq!(
            plan.kept_blocks,
            [
                json!({"type": "text", "text": nested("/p/web/CLAUDE.md", "No jQuery.")}),
                json!({"type": "text", "text": nested("/p/src/CLAUDE.md", "Spaces, not tabs.")}),
            ]
        );
        let out = splice(&body, &plan, &projection()).expect("valid");
        let sent = out["messages"].to_string();
        assert_eq!(sent.matches("not tabs").count(), 1, "{out}");
        assert_eq!(sent.matches("British spelling").count(), 1, "{out}");
    }

    /// The plan the user approved (an ExitPlanMode call's result) is kept for the session: the
    /// last one approved. A plan sent back, and one approved in the last turn, are not.
    #[test]
    fn the_last_plan_approved_is_kept() {
        let approved = |plan: &str| {
            format!(
                "{PLAN_APPROVED} You can now start coding.\n\nYour plan has been saved to: \
                 /h/.claude/plans/p.md\n\n## Approved Plan:\n{plan}\n"
            )
        };
        let mut body = request(6);
        for (call, tool, result) in [
            (0, EXIT_PLAN_MODE, approved("1. Make add() add.")),
            (
                1,
                EXIT_PLAN_MODE,
                "The user doesn't want to proceed: use sums".to_owned(),
            ),
            (2, EXIT_PLAN_MODE, approved("1. Make add() sum.")),
            // Not ExitPlanMode's: a Bash that printed the words.
            (3, "Bash", approved("1. Echoed.")),
            (5, EXIT_PLAN_MODE, approved("1. In the last turn.")),
        ] {
            let m = &mut body["messages"];
            m[1 + 2 * call]["content"][1] = json!({"type": "tool_use",
                "id": format!("toolu_{call}"), "name": tool, "input": {}});
            m[2 + 2 * call]["content"][0]["content"] = json!(result);
        }
        let plan = plan(&body, Some(PROMPT), false).expect("eligible");
        assert_eq!(
            plan.kept_blocks,
            [json!({"type": "text", "text": approved("1. Make add() sum.")})]
        );
        let none = plan_of(&request(6));
        assert!(none.kept_blocks.is_empty());
    }

    /// What the user said when turning a call down reached no hook: it is kept, once each, as
    /// the user's words. A refusal without words, and one in the last turn, are not.
    #[test]
    fn what_the_user_said_turning_a_call_down_is_kept() {
        let refused = "The user doesn't want to proceed with this tool use. The tool use was \
                       rejected (eg. if it was a file edit, the new_string was NOT written to the \
                       file).";
        let said = |words: &str| format!("{refused} {USER_SAID}{words}");
        let mut body = request(6);
        for (call, tool, result) in [
            (0, EXIT_PLAN_MODE, said("Use sums instead")),
            (
                1,
                "Edit",
                format!("{refused} STOP what you are doing and wait."),
            ),
            (2, "Edit", said("Keep the old name")),
            (3, EXIT_PLAN_MODE, said("Use sums instead")),
            (5, "Bash", said("Not in the last turn")),
        ] {
            let m = &mut body["messages"];
            m[1 + 2 * call]["content"][1] = json!({"type": "tool_use",
                "id": format!("toolu_{call}"), "name": tool, "input": {}});
            m[2 + 2 * call]["content"][0]["content"] = json!(result);
            m[2 + 2 * call]["content"][0]["is_error"] = json!(true);
        }
        let plan = plan(&body, Some(PROMPT), false).expect("eligible");
        assert_eq!(
            plan.kept_blocks,
            [
                json!({"type": "text", "text": "The user turned down the agent's `ExitPlanMode` call and said:\nUse sums instead"}),
                json!({"type": "text", "text": "The user turned down the agent's `Edit` call and said:\nKeep the old name"}),
            ]
        );
    }

    #[test]
    fn the_tool_searches_that_loaded_deferred_tools_are_kept() {
        let mut body = request(4);
        body["tools"]
            .as_array_mut()
            .expect("tools")
            .extend([
                json!({"name": "ToolSearch", "input_schema": {"type": "object"}}),
                json!({"name": "mcp__db__query", "input_schema": {"type": "object"}, "defer_loading": true}),
            ]);
        let messages = body["messages"].as_array_mut().expect("messages");
        let search = json!({"role": "assistant", "content": [
            {"type": "text", "text": "I need the database tool."},
            {"type": "tool_use", "id": "toolu_s", "name": "ToolSearch", "input": {"query": "select:mcp__db__query"}},
            {"type": "tool_use", "id": "toolu_ls", "name": "Bash", "input": {"command": "ls"}}
        ]});
        let found = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_s", "content": [
                {"type": "tool_reference", "tool_name": "mcp__db__query"}
            ], "cache_control": {"type": "ephemeral"}},
            {"type": "tool_result", "tool_use_id": "toolu_ls", "content": "a.py"}
        ]});
        messages.insert(1, search);
        messages.insert(2, found);
        let plan = plan(&body, Some(PROMPT), false).expect("eligible");
        assert_eq!(plan.tool_loads.len(), 2);
        assert_eq!(
            count_cache_control(&Value::Array(plan.tool_loads.clone())),
            0
        );
        let out = splice(&body, &plan, &projection()).expect("valid");
        let m = out["messages"].as_array().expect("messages");
        // Right after the first message: the search alone, then its result alone.
        assert_eq!(
            m[1]["content"],
            json!([{"type": "tool_use", "id": "toolu_s", "name": "ToolSearch", "input": {"query": "select:mcp__db__query"}}])
        );
        assert_eq!(
            m[2]["content"][0],
            json!({"type": "tool_result", "tool_use_id": "toolu_s", "content": [
                {"type": "tool_reference", "tool_name": "mcp__db__query"}
            ]})
        );
        // The Bash call beside it was history like any other.
        assert_eq!(m[2]["content"].as_array().map(Vec::len), Some(1));
        // A history without such results keeps nothing of it.
        let plain = super::super::plan(&request(4), Some(PROMPT), false).expect("eligible");
        assert!(plain.tool_loads.is_empty());
    }

    /// The commands the user ran in bash mode (`!`), with their output: the last four, once
    /// each, as they came; not an output that is no command's, nor what the last turn holds.
    #[test]
    fn the_users_own_shell_runs_are_kept() {
        let run = |cmd: &str, out: &str| {
            json!({"role": "user", "content": [
                {"type": "text", "text": format!("<bash-input>{cmd}</bash-input>\n")},
                {"type": "text", "text": format!("<bash-stdout>{out}</bash-stdout><bash-stderr></bash-stderr>"),
                 "cache_control": {"type": "ephemeral"}}
            ]})
        };
        let mut body = request(3);
        let messages = body["messages"].as_array_mut().expect("messages");
        let at = 3;
        let runs = [
            run("make", "built"),
            run("pytest", "1 failed"),
            run("git log", "abc"),
            run("pytest", "1 failed"),
            run("ls", "a.py"),
            json!({"role": "user", "content": [{"type": "text", "text": "<bash-stdout>stray</bash-stdout>"}]}),
            run("cat log", "E: boom"),
        ];
        for (i, m) in runs.into_iter().enumerate() {
            messages.insert(at + 2 * i, m);
            messages.insert(
                at + 2 * i + 1,
                json!({"role": "assistant", "content": [{"type": "text", "text": "Seen."}]}),
            );
        }
        let last = messages.len() - 1;
        messages[last]["content"]
            .as_array_mut()
            .expect("blocks")
            .push(json!({"type": "text", "text": "<bash-input>tail</bash-input>"}));
        let plan = plan(&body, Some(PROMPT), false).expect("eligible");
        let kept: Vec<&str> = block_texts(&plan.kept_blocks).collect();
        assert_eq!(
            kept,
            [
                "<bash-input>git log</bash-input>\n",
                "<bash-stdout>abc</bash-stdout><bash-stderr></bash-stderr>",
                "<bash-input>pytest</bash-input>\n",
                "<bash-stdout>1 failed</bash-stdout><bash-stderr></bash-stderr>",
                "<bash-input>ls</bash-input>\n",
                "<bash-stdout>a.py</bash-stdout><bash-stderr></bash-stderr>",
                "<bash-input>cat log</bash-input>\n",
                "<bash-stdout>E: boom</bash-stdout><bash-stderr></bash-stderr>",
            ]
        );
        assert!(
            plan.kept_blocks
                .iter()
                .all(|b| b.get("cache_control").is_none())
        );
    }
}
