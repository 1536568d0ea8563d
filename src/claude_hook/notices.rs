//! Claude Code's notices that a background task ended, which come to the hook as prompts.
//!
//! Claude Code passes such a notice to `UserPromptSubmit` hooks as if the user had typed it. It
//! is not the user's, and taken into the goal it would tell the model the user asked it; what
//! it carries that the model needs later, a background agent's report, is kept as that agent's
//! result instead.

use serde_json::{Value, json};

use super::MAX_RESULT_BYTES;
use super::plan::agent_cwd;
use crate::socket::fit;

/// How Claude Code opens what it tells the model of a background task that ended (a command
/// run with `run_in_background`, a background agent). It passes that to `UserPromptSubmit`
/// hooks as a prompt (2.1.332), while it tells the model, in a system message, that it is
/// "NOT a message from the user": a goal saying the user asked it would mislead the model.
/// The system message, which says where the task's output is, stays in the conversation; a
/// background agent's report in it is kept as the agent's result ([`notice_report`]).
const NOTICES: [&str; 2] = ["<task-notification>", "<task_notification>"];

/// Whether a prompt is Claude Code's notice of a background task ([`NOTICES`]).
pub(super) fn is_notice(prompt: &str) -> bool {
    let p = prompt.trim_start();
    NOTICES.iter().any(|n| p.starts_with(n))
}

/// `command.record` params keeping the report a background agent's notice carries
/// (`<result>`), as the report of an agent in the foreground is kept (its call's result): the
/// notice is the only place it comes, and behind `worldfs proxy` the notice itself is one of
/// the last few kept. A notice with no result (a background command's: its output is in a
/// file the model reads) keeps nothing.
pub(super) fn notice_report(event: &Value, notice: &str) -> Option<Value> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::claude_hook::{Plan, plan};

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
}
