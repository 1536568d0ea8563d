//! Which conversation a request is, and what its goal is.
//!
//! The projection stands for the session's main conversation only: a subagent's history, or a
//! side request's, replaced by it would lose the task it was given. The hook knows the
//! session's goal but not whose a call is, so a call is matched to the goal by what it says:
//! its opening messages, its tools, Claude Code's mark on a subagent's call. The goal is read
//! back from the conversation too, where no hook hears of a change: a resume that brings
//! another conversation back, a prompt the user took back.

use std::borrow::Cow;

use serde_json::Value;

use super::content::{all_strings, any_text, kind, role, texts};
use super::{COMPACTED_OPENING, READ_TOOL, SUBAGENT_TOOLS};
use crate::claude_hook::{LATER_PROMPT, goal_with};

/// Whether `content` has the prompt as a text of its own (Claude Code sends what the user
/// typed as one block, after its reminders). A text that only contains it is another
/// conversation quoting it: a subagent given the user's words as part of its task.
pub(super) fn holds_prompt(content: Option<&Value>, prompt: &str) -> bool {
    any_text(content, |t| t.trim() == prompt)
        || invocation(content).is_some_and(|(said, _)| said == prompt)
}

/// How Claude Code (2.1.332) wraps the user's `/NAME ARGS` (a custom command of
/// `.claude/commands`, or a skill invoked by name) in the message it sends: a text block with
/// `<command-message>NAME</command-message>`, `<command-name>/NAME</command-name>` and, with
/// arguments, `<command-args>ARGS</command-args>`; the command's text, its arguments filled
/// in, follows in a block of its own. The hooks get the prompt as typed.
const COMMAND_NAME: [&str; 2] = ["<command-name>", "</command-name>"];
const COMMAND_ARGS: [&str; 2] = ["<command-args>", "</command-args>"];

/// The command the user invoked in a message (`content`), as typed (`/NAME ARGS`, as the
/// hooks get it), and its text as the model got it, if the message says one. Claude Code's
/// own commands (`/model`), which it runs itself, send the model no text: they are no prompt.
pub(super) fn invocation(content: Option<&Value>) -> Option<(String, &str)> {
    let between = |t: &'_ str, [open, close]: [&str; 2]| -> Option<String> {
        let start = t.find(open)? + open.len();
        let end = t[start..].find(close)?;
        Some(t[start..start + end].trim().to_owned())
    };
    let texts = texts(content);
    let (i, name, args) = texts.iter().enumerate().find_map(|(i, t)| {
        let name = between(t, COMMAND_NAME).filter(|n| n.starts_with('/'))?;
        Some((i, name, between(t, COMMAND_ARGS).unwrap_or_default()))
    })?;
    let said = if args.is_empty() {
        name
    } else {
        format!("{name} {args}")
    };
    let text = texts[i + 1..]
        .iter()
        .copied()
        .find(|t| !t.trim_start().starts_with('<') && !t.trim().is_empty())?;
    Some((said, text))
}

/// What the user said in a message, as the hooks got it: the command invoked, or what was
/// typed ([`typed_text`]).
fn said_in(content: Option<&Value>) -> Option<Cow<'_, str>> {
    match invocation(content) {
        Some((said, _)) => Some(Cow::Owned(said)),
        None => typed_text(content).map(Cow::Borrowed),
    }
}

/// Whether `content` has a text that opens with [`COMPACTED_OPENING`]: Claude Code's summary of
/// the conversation it compacted (after its reminders, if any).
pub(super) fn opens_compacted(content: Option<&Value>) -> bool {
    any_text(content, |t| t.trim_start().starts_with(COMPACTED_OPENING))
}

/// How many user messages open `messages`: the first, and those Claude Code put right after it
/// (a file named with `@` in the first prompt comes as a message of its own in 2.1.332). A
/// later prompt always follows an answer, so it is never among them.
pub(super) fn opening_len(messages: &[Value]) -> usize {
    messages
        .iter()
        .take_while(|m| role(m) == Some("user"))
        .count()
}

/// What a Claude Code conversation says its goal is, read from one of its calls: the prompt of
/// its opening messages, then the prompts of the user's later messages, joined as `worldfs
/// hook` joins them; and whether it opens with the summary of a compaction (its first prompt is
/// then gone, and the prompts after the summary are the goal). `None` when it holds no prompt.
pub fn conversation_goal(body: &Value) -> Option<(String, bool)> {
    let messages = body.get("messages")?.as_array()?;
    let opening = &messages[..opening_len(messages)];
    if opening.is_empty() {
        return None;
    }
    let compacted = opening.iter().any(|m| opens_compacted(m.get("content")));
    let first_prompt = opening.iter().rev().find_map(|m| said_in(m.get("content")));
    if !compacted && first_prompt.is_none() {
        return None;
    }
    let later = messages[opening.len()..]
        .iter()
        .filter(|m| role(m) == Some("user"))
        .filter_map(|m| said_in(m.get("content")));
    first_prompt
        .into_iter()
        .chain(later)
        .fold(None, |goal: Option<String>, p| {
            Some(goal_with(goal.as_deref(), &p))
        })
        .map(|g| (g, compacted))
}

/// What the user typed in a message: its last text that is not Claude Code's own. Its reminders
/// and command wrappers open with `<`, its notes of an interruption with `[`, and a message
/// with tool results answers calls; the summary of a compaction is not typed either.
fn typed_text(content: Option<&Value>) -> Option<&str> {
    let typed = |t: &&str| {
        let t = t.trim_start();
        !t.is_empty()
            && !t.starts_with('<')
            && !t.starts_with('[')
            && !t.starts_with(COMPACTED_OPENING)
    };
    let answers_calls = content
        .and_then(Value::as_array)
        .is_some_and(|blocks| blocks.iter().any(|b| kind(b) == Some("tool_result")));
    if answers_calls {
        return None;
    }
    texts(content).into_iter().rev().find(typed)
}

/// The session's first prompt, as `worldfs hook` recorded it, and the prompts after it.
pub(super) fn split_goal(goal: &str) -> (&str, Option<&str>) {
    match goal.split_once(LATER_PROMPT) {
        Some((first, later)) => (first.trim(), Some(later)),
        None => (goal.trim(), None),
    }
}

/// Whether `body` defines the tools only a session's main thread has: `Read`, and the one that
/// starts subagents.
pub fn looks_main(body: &Value) -> bool {
    defines(body, &[READ_TOOL]) && defines(body, &SUBAGENT_TOOLS)
}

/// Whether `body`'s tools include one of `names`.
pub(super) fn defines(body: &Value, names: &[&str]) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| {
            t.iter().any(|t| {
                t.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| names.contains(&n))
            })
        })
}

/// What the billing text at the head of a subagent's system prompt says (2.1.332).
const SUBAGENT_MARK: &str = "cc_is_subagent=true";

/// Whether Claude Code marked `body` as a subagent's: its system prompt opens with a billing
/// text saying so. (Its calls also carry [`AGENT_HEADER`](super::AGENT_HEADER), which the
/// proxy checks.)
pub(super) fn marked_subagent(body: &Value) -> bool {
    body.get("system").is_some_and(|s| {
        texts(Some(s))
            .iter()
            .any(|t| t.starts_with("x-anthropic-billing-header:") && t.contains(SUBAGENT_MARK))
    })
}

/// The later prompts of the goal (`later`, joined by [`LATER_PROMPT`]) that the conversation
/// (`messages`, not compacted) still holds. The user can take prompts back: Claude Code's
/// rewind (Esc Esc, "Restore conversation") sends the conversation as it was before one, and
/// no hook hears of it, so the goal still says it. A prompt is taken back only when no text
/// of the conversation holds it at all (nor, for the user's answers, the question, which is
/// in the agent's call), and the last is always kept (a prompt the user queued may not be in
/// the call yet).
pub(in crate::proxy) fn unretracted(later: &str, messages: &[Value]) -> String {
    let parts: Vec<&str> = later.split(LATER_PROMPT).collect();
    let last = parts.len().saturating_sub(1);
    // Most prompts are a message's text as typed; every string of the user's messages is
    // searched only for the others.
    let typed = |p: &str| messages.iter().any(|m| holds_prompt(m.get("content"), p));
    let mut strings: Option<Vec<&str>> = None;
    let mut held = |said: &str| {
        let all = strings.get_or_insert_with(|| {
            let mut out = Vec::new();
            for m in messages {
                all_strings(Some(m), &mut out);
            }
            out
        });
        all.iter().any(|s| s.contains(said))
    };
    let mut kept = Vec::with_capacity(parts.len());
    for (i, part) in parts.iter().enumerate() {
        let p = part.trim();
        let keep = i == last
            || p.is_empty()
            || typed(p)
            || match crate::claude_hook::answers::first_question(p) {
                // An answer whose question cannot be read back is kept.
                Some(q) => q.is_none_or(|q| held(&q)),
                None => held(p),
            };
        if keep {
            kept.push(*part);
        }
    }
    kept.join(LATER_PROMPT)
}

#[cfg(test)]
mod tests {
    use super::super::tests::{PROMPT, compacted_request, request};
    use super::super::{Skip, plan};
    use super::*;
    use serde_json::json;

    /// In 2.1.332 a subagent may start subagents too: the compacted conversation of one,
    /// with the `Agent` tool, is told from the session's by the mark Claude Code puts in its
    /// billing text.
    #[test]
    fn a_call_marked_as_a_subagents_is_never_rewritten() {
        let mut body = compacted_request(5);
        assert!(plan(&body, Some(PROMPT), true).is_ok(), "the session's own");
        body["system"] = json!([
            {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.332.5ac; cc_entrypoint=sdk-cli; cc_is_subagent=true;"},
            {"type": "text", "text": "You are an agent.", "cache_control": {"type": "ephemeral"}}
        ]);
        assert_eq!(plan(&body, Some(PROMPT), true), Err(Skip::Subagent));
        let mut main = request(5);
        main["system"][0]["text"] =
            json!("x-anthropic-billing-header: cc_version=2.1.332.fb8; cc_entrypoint=sdk-cli;");
        assert!(plan(&main, Some(PROMPT), false).is_ok());
    }

    /// A prompt the user took back (Claude Code's rewind) is no later prompt of the call: the
    /// conversation holds it nowhere. One it holds anywhere stays, as does the last, and an
    /// answer stays while its question is there.
    #[test]
    fn prompts_the_conversation_no_longer_holds_are_taken_back() {
        let mut body = request(4);
        let messages = body["messages"].as_array_mut().expect("messages");
        messages.insert(
            3,
            json!({"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>r</system-reminder>"},
            {"type": "text", "text": "[Image #1] make it italic"}]}),
        );
        messages.insert(
            4,
            json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_ask", "name": "AskUserQuestion",
             "input": {"questions": [{"question": "Which \"style\"?"}]}}]}),
        );
        messages.insert(
            5,
            json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_ask",
             "content": "User has answered your questions: \"Which \"style\"?\"=\"Bold\""}]}),
        );
        let answer = r#"The user answered: "Which \"style\"?" = "Bold""#;
        let gone = r#"The user answered: "Which size?" = "Big""#;
        let goal = [
            PROMPT,
            "make it bold",
            "[Image #1] make it italic",
            answer,
            gone,
            "and the tests",
        ]
        .join(LATER_PROMPT);
        let later = |body: &Value| {
            plan(body, Some(&goal), false)
                .expect("eligible")
                .later_prompts
                .unwrap_or_default()
        };
        let said = later(&body);
        assert!(
            !said.contains("make it bold") && !said.contains("Which size?"),
            "{said}"
        );
        for kept in ["[Image #1] make it italic", answer, "and the tests"] {
            assert!(said.contains(kept), "{kept}: {said}");
        }
        // Said in a result (the model quoted it), it stays.
        body["messages"][2]["content"][0]["content"] = json!("a.py\nmake it bold");
        assert!(later(&body).contains("make it bold"));
    }

    #[test]
    fn a_conversation_says_its_goal() {
        let mut body = request(3);
        let m = body["messages"].as_array_mut().expect("messages");
        m.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}]}));
        m.push(json!({"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>a todo list</system-reminder>"},
            {"type": "text", "text": "now the tests too"}
        ]}));
        m.push(json!({"role": "assistant", "content": [{"type": "text", "text": "On it."}]}));
        m.push(json!({"role": "user", "content": "[Request interrupted by user]"}));
        m.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Stopped."}]}));
        m.push(json!({"role": "user", "content": "<command-name>/model</command-name>"}));
        let (goal, compacted) = conversation_goal(&body).expect("a goal");
        assert_eq!(goal, format!("{PROMPT}{LATER_PROMPT}now the tests too"));
        assert!(!compacted);
        // Read back, the goal finds the conversation.
        assert!(plan(&body, Some(&goal), false).is_ok());

        // After a compaction, the prompts after the summary are the goal; with none, none.
        let mut body = compacted_request(3);
        assert_eq!(conversation_goal(&body), None);
        if let Some(first) = body["messages"][0]["content"].as_array_mut() {
            first.push(json!({"type": "text", "text": "go on with the parser"}));
        }
        assert_eq!(
            conversation_goal(&body),
            Some(("go on with the parser".to_owned(), true))
        );
        assert_eq!(conversation_goal(&json!({"messages": []})), None);
    }
}
