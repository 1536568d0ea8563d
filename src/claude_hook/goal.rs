//! The goal: the user's prompts in one text, the first and those said after it.
//!
//! Every projection says what the task is from the goal. A follow-up ("now the tests too") adds
//! to it instead of replacing it, and so do the user's answers and Codex's thread goal; all of
//! them are added the one way here, since `worldfs proxy` splits the goal again on
//! [`LATER_PROMPT`] and knows the conversation by its first prompt.

use serde_json::Value;

use crate::socket::{Client, ClientError};

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

/// Adds `prompt` to the goal of the session `params` names ([`goal_with`]). `later`: only to a
/// goal the session has: the user's answers are not what it opened with, which `worldfs proxy`
/// knows the conversation by (a hook installed mid-session saw no prompt).
pub(super) fn add_to_goal(
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
pub(super) fn add_objective(c: &mut Client, params: Value, objective: &str) -> anyhow::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::claude_hook::{Plan, plan};

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
}
