//! What `worldfs proxy` sends instead of Claude Code's history.
//!
//! A request is rewritten only when it is the main conversation of the session the mount knows:
//! it defines the `Read` tool the projection's synthesized calls use, and its first user message
//! has the first prompt of the goal that `worldfs hook` recorded as a text block of its own. A
//! subagent (its first message is the task it was given, which may quote the prompt), a title
//! or summary request without tools, or a conversation of another session goes upstream
//! untouched.
//!
//! Once Claude Code has compacted the conversation (`/compact`, or on its own), its first
//! message is the summary instead, which opens with [`COMPACTED_OPENING`]. Such a conversation
//! is the main one when the hook saw the session compacted (`goal.compacted`) and the request
//! can start subagents (defines `Agent`, or `Task` as older versions call it), which a subagent
//! once could not. In 2.1.332 subagents may start subagents too, and Claude Code marks their
//! calls (the `x-claude-code-agent-id` header, `cc_is_subagent` in the billing text of the
//! system prompt): a marked call is never rewritten, so a subagent's own compacted
//! conversation is never taken for the session's. The goal then stays whole in the projection,
//! since the first message no longer says it.
//!
//! The rewritten `messages` are, in order:
//! 1. the first user message as it came (Claude Code's `<system-reminder>` blocks, CLAUDE.md,
//!    then the prompt), without its breakpoints: Claude Code derives a check value in its
//!    billing header from this message's text, so it stays as it is. A file named with `@` in
//!    the first prompt comes, in 2.1.332, as a user message of its own before it (the Read
//!    call; the prompt's message opens with the result): all the user messages that open the
//!    conversation are kept so, one by one. After them, the tool searches
//!    of the history replaced whose results load deferred tools, each call with its result (the
//!    API knows such a tool only from the `tool_reference` blocks of a result in the request),
//!    then, as one user message, what of the history replaced no file gives back
//!    ([`Plan::kept_blocks`]): the skills loaded, the CLAUDE.md files below the root attached
//!    to results, the last plan approved in plan mode, what the user said turning a call
//!    down, the commands the user ran in bash mode (`!`) and their output, the images and
//!    documents;
//! 2. the projection, asked for without its own last step: the rest of the goal (the prompts
//!    after the first), then the files and command outputs as they are now;
//! 3. the `role: "system"` messages Claude Code put in the history replaced, once each: those
//!    it put before the first answer (its environment block, about 2,000 tokens in 2.1.332) where
//!    they were, before the projection's first call, so they stay in the cached prefix; the
//!    later ones (its mid-conversation instructions, and the last [`NOTICES_KEPT`] of its
//!    notices that a background task ended) after the projection;
//! 4. the real last turn, verbatim: the last assistant message (its thinking block and signature
//!    included, which the API requires as sent) and everything after it.
//!
//! `system`, `tools` and every other field of the body are left as they came. Breakpoints: the
//! API counts every `cache_control` in the request; the projection gets what the system prompt,
//! the tools and the last turn leave of the 4.

use std::collections::HashSet;

use serde_json::Value;

use crate::claude_hook::LATER_PROMPT;
use crate::projection::CacheTtl;
use crate::projection::validate::{self, count_cache_control};

mod content;
mod conversation;
mod gutter;
mod kept;
mod media;
mod splice;

pub(super) use content::{all_strings, block_texts, blocks_of, kind, result_text, texts};
use content::{role, without_breakpoints};
pub(super) use conversation::unretracted;
pub use conversation::{conversation_goal, looks_main};
use conversation::{
    defines, holds_prompt, marked_subagent, opening_len, opens_compacted, split_goal,
};
pub use gutter::read_gutter;
use kept::{
    approved_plan, is_task_notice, nested_instructions, shell_runs, skill_loads, tool_loads,
    user_feedback, with_command_texts,
};
// Named by the Responses side's tests.
#[cfg(test)]
pub(super) use media::earlier_media_label;
pub(super) use media::last_views;
use media::{prompt_media, read_media};
pub use splice::{Invalid, splice};

/// The header Claude Code names a subagent in, on each of its calls (2.1.332).
pub const AGENT_HEADER: &str = "x-claude-code-agent-id";

/// The API's limit on `cache_control` breakpoints in one request.
pub const MAX_BREAKPOINTS: usize = 4;
/// The tool the projection's synthesized calls use; Claude Code defines it.
pub const READ_TOOL: &str = "Read";
/// Claude Code's tool that asks the user to approve the plan made in plan mode.
pub const EXIT_PLAN_MODE: &str = "ExitPlanMode";
/// How Claude Code's summary of a compacted conversation begins. These words have stayed since
/// 2025; the sentence after them changed ("The conversation is summarized below", then "The
/// summary below covers the earlier portion of the conversation").
pub const COMPACTED_OPENING: &str = "This session is being continued from a previous conversation";
/// The tool that starts subagents, by its current name and its name before 2.1.63; subagents
/// are not given it.
const SUBAGENT_TOOLS: [&str; 2] = ["Agent", "Task"];

/// Why a request goes upstream as it came.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skip {
    NotJson,
    NoMessages,
    /// No `Read` tool (for Codex, no shell tool): a side request (titles, summaries) or
    /// another client.
    NoReadTool,
    /// The mount has no goal: `worldfs hook` is not installed, or no prompt was given yet.
    NoGoal,
    /// The first message is not the session's first prompt (nor, once the session was
    /// compacted, its summary): a subagent or another conversation.
    OtherConversation,
    /// Nothing between the first message and the last turn yet.
    TooShort,
    /// A subagent's call, by Claude Code's own mark: in 2.1.332 subagents can start
    /// subagents too, so their tools no longer tell.
    Subagent,
    /// Codex: the history holds an item of a kind the projection does not stand for (a
    /// compaction's summary, say).
    UnknownItems,
    /// The body is compressed in a way the proxy cannot read (why).
    Encoded(String),
}

impl std::fmt::Display for Skip {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Skip::NotJson => "the body is not a JSON object",
            Skip::NoMessages => "no messages array ending with a user message",
            Skip::NoReadTool => {
                "no Read tool (Claude Code's) nor shell tool (Codex's): a side request"
            }
            Skip::NoGoal => "the mount has no goal (is `worldfs hook` installed?)",
            Skip::OtherConversation => {
                "its first message is neither the session's first prompt nor the summary of its compaction (a subagent or another conversation)"
            }
            Skip::TooShort => "nothing to replace yet",
            Skip::Subagent => {
                "a subagent's call (Claude Code marks it: `x-claude-code-agent-id`, `cc_is_subagent`)"
            }
            Skip::UnknownItems => {
                "the history holds items of a kind the projection does not stand for (a compaction?)"
            }
            Skip::Encoded(why) => return write!(f, "the body is compressed in {why}"),
        })
    }
}

/// How a request eligible for rewriting is cut.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Index of the first message of the real last turn, kept verbatim.
    pub tail_start: usize,
    /// The user messages that open the conversation, without their breakpoints: the first,
    /// and those Claude Code put right after it (2.1.332 sends a file named with `@` in the
    /// first prompt as a message of its own, the Read call, then the prompt's message starting
    /// with its result).
    pub head: Vec<Value>,
    /// `role: "system"` messages of the history replaced that came before its first answer,
    /// once each, without breakpoints: they stay before the projection's first call.
    pub opening_instructions: Vec<Value>,
    /// The later `role: "system"` messages of the history replaced, once each and not among
    /// the opening ones, without breakpoints: they go after the projection.
    pub instructions: Vec<Value>,
    /// The history's calls whose results load deferred tools, then those results (two
    /// messages, or none), without breakpoints.
    pub tool_loads: Vec<Value>,
    /// What of the history replaced nothing else gives back, without breakpoints: the skills
    /// the agent loaded ([`skill_loads`]); images and documents the user attached to its
    /// prompts, once each (the goal keeps what the user typed, and these are as much the
    /// request: a screenshot of the bug, which nothing on disk holds); then those its tool calls
    /// returned ([`read_media`]), which the projection cannot show from disk.
    pub kept_blocks: Vec<Value>,
    /// The goal the projection opens with, and what of it the head does not already say.
    pub goal: String,
    pub later_prompts: Option<String>,
    /// The head is the summary of a compacted conversation: it does not say the goal, which
    /// the projection keeps whole.
    pub compacted: bool,
    /// Breakpoints the projection may place.
    pub breakpoints: u8,
    /// Their time to live: the API refuses a breakpoint kept an hour after one kept five
    /// minutes, so the projection's, placed between the system prompt's and the last turn's,
    /// take the time of the next one after them (Claude Code marks its messages for an hour on
    /// a subscription), or of the last one before.
    pub cache_ttl: CacheTtl,
}

/// Decides whether `body` is rewritten, and how. `compacted`: the hook saw the session's
/// conversation compacted (`goal.compacted`).
pub fn plan(body: &Value, goal: Option<&str>, compacted: bool) -> Result<Plan, Skip> {
    let obj = body.as_object().ok_or(Skip::NotJson)?;
    if marked_subagent(body) {
        return Err(Skip::Subagent);
    }
    let messages = obj
        .get("messages")
        .and_then(Value::as_array)
        .ok_or(Skip::NoMessages)?;
    // The last user message; only Claude Code's own system messages (its environment block)
    // may follow it.
    let last_user = messages
        .iter()
        .rposition(|m| role(m) == Some("user"))
        .filter(|&u| messages[u + 1..].iter().all(|m| role(m) == Some("system")))
        .ok_or(Skip::NoMessages)?;
    if !defines(body, &[READ_TOOL]) {
        return Err(Skip::NoReadTool);
    }
    let goal = goal.filter(|g| !g.trim().is_empty()).ok_or(Skip::NoGoal)?;
    let (prompt, later) = split_goal(goal);
    let head_len = opening_len(messages);
    let opening = &messages[..head_len];
    let opens_with_prompt = opening
        .iter()
        .any(|m| holds_prompt(m.get("content"), prompt));
    let compacted = !opens_with_prompt
        && compacted
        && opening.iter().any(|m| opens_compacted(m.get("content")))
        && defines(body, &SUBAGENT_TOOLS);
    if !opens_with_prompt && !compacted {
        return Err(Skip::OtherConversation);
    }
    let tail_start = messages[..last_user]
        .iter()
        .rposition(|m| role(m) == Some("assistant"))
        .unwrap_or(last_user);
    if tail_start <= head_len {
        return Err(Skip::TooShort);
    }
    let first_answer = messages
        .iter()
        .position(|m| role(m) == Some("assistant"))
        .map_or(tail_start, |a| a.min(tail_start));
    let mut seen = HashSet::new();
    let mut system_messages = |range: std::ops::Range<usize>| -> Vec<Value> {
        messages[range]
            .iter()
            .filter(|m| role(m) == Some("system"))
            .map(without_breakpoints)
            .filter(|m| seen.insert(m.to_string()))
            .collect()
    };
    let opening_instructions = system_messages(head_len..first_answer);
    let mut instructions = system_messages(first_answer..tail_start);
    let notices = instructions.iter().filter(|m| is_task_notice(m)).count();
    let mut dropped = notices.saturating_sub(NOTICES_KEPT);
    instructions.retain(|m| {
        let drop = dropped > 0 && is_task_notice(m);
        dropped -= usize::from(drop);
        !drop
    });
    let tool_loads = tool_loads(&messages[head_len..tail_start]);
    let replaced = &messages[head_len..tail_start];
    let mut kept_blocks = skill_loads(replaced);
    kept_blocks.extend(nested_instructions(replaced));
    kept_blocks.extend(approved_plan(replaced));
    kept_blocks.extend(user_feedback(replaced));
    kept_blocks.extend(shell_runs(replaced));
    kept_blocks.extend(prompt_media(replaced));
    kept_blocks.extend(read_media(replaced, &messages[tail_start..]));
    // A top-level `cache_control` (automatic caching) is a breakpoint the API places itself.
    let used = usize::from(obj.contains_key("cache_control"))
        + obj.get("system").map_or(0, count_cache_control)
        + obj.get("tools").map_or(0, count_cache_control)
        + messages[tail_start..]
            .iter()
            .map(count_cache_control)
            .sum::<usize>();
    let breakpoints = u8::try_from(MAX_BREAKPOINTS.saturating_sub(used)).unwrap_or(0);
    // A top-level `cache_control` (automatic caching) marks the last block: it comes after.
    let after = messages[tail_start..]
        .iter()
        .flat_map(validate::breakpoint_ttls)
        .chain(obj.get("cache_control").map(CacheTtl::of))
        .flatten()
        .next();
    let before = || {
        ["tools", "system"]
            .iter()
            .filter_map(|k| obj.get(*k))
            .flat_map(validate::breakpoint_ttls)
            .flatten()
            .last()
    };
    let cache_ttl = after.or_else(before).unwrap_or_default();
    Ok(Plan {
        tail_start,
        head: opening.iter().map(without_breakpoints).collect(),
        opening_instructions,
        instructions,
        tool_loads,
        kept_blocks,
        goal: goal.to_owned(),
        later_prompts: later
            .map(|l| match compacted {
                true => l.to_owned(),
                false => unretracted(l, messages),
            })
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let said = with_command_texts(&l, &messages[head_len..tail_start]);
                format!("{}{said}", LATER_PROMPT.trim_start())
            }),
        compacted,
        breakpoints,
        cache_ttl,
    })
}

/// How Claude Code (2.1.332) opens the result of an `ExitPlanMode` call the user approved; the
/// plan follows, as the agent wrote its file, after [`APPROVED_PLAN`].
pub(super) const PLAN_APPROVED: &str = "User has approved your plan.";
pub(super) const APPROVED_PLAN: &str = "## Approved Plan:\n";

/// Claude Code's notices of background tasks that ended ([`TASK_NOTICE`]) kept: each names
/// one task and the file its output went to. The last few are what the model may still act
/// on; a session that runs a command in the background now and then would otherwise carry
/// every notice it ever got (about 150 tokens each).
const NOTICES_KEPT: usize = 4;

/// What opens the body of Claude Code's notice of a background task that ended, in a `system`
/// message of its own (2.1.332).
pub(super) const TASK_NOTICE: &str = "<task-notification>";

#[cfg(test)]
mod tests {
    use super::kept::SKILL_LOADED;
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    pub(super) const PROMPT: &str = "Fix the date parser";

    fn read_tool() -> Value {
        json!({"name": "Read", "description": "Reads a file", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}})
    }

    /// A Claude Code request after `turns` tool calls.
    pub(super) fn request(turns: usize) -> Value {
        let mut messages = vec![json!({"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>CLAUDE.md says: use tabs</system-reminder>", "cache_control": {"type": "ephemeral"}},
            {"type": "text", "text": PROMPT}
        ]})];
        for i in 0..turns {
            messages.push(json!({"role": "assistant", "content": [
                {"type": "thinking", "thinking": "look", "signature": format!("sig{i}")},
                {"type": "tool_use", "id": format!("toolu_{i}"), "name": "Bash", "input": {"command": "ls"}}
            ]}));
            let mut result = json!({"type": "tool_result", "tool_use_id": format!("toolu_{i}"), "content": "a.py"});
            if i + 1 == turns {
                result["cache_control"] = json!({"type": "ephemeral"});
            }
            messages.push(json!({"role": "user", "content": [result]}));
        }
        json!({
            "model": "claude-x",
            "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
            "tools": [read_tool(), {"name": "Bash", "input_schema": {"type": "object"}}, {"type": "web_search_20250305", "name": "web_search"}],
            "messages": messages,
            "max_tokens": 100,
            "stream": true,
            "some_future_field": {"kept": true}
        })
    }

    pub(super) fn projection() -> Vec<Value> {
        vec![
            json!({"role": "user", "content": [{"type": "text", "text": PROMPT}]}),
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "wfs_1", "name": "Read", "input": {"file_path": "/p/a.py"}}]}),
            json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "wfs_1", "content": "1\tx = 1", "cache_control": {"type": "ephemeral"}}]}),
        ]
    }

    #[test]
    fn the_main_conversation_is_rewritten_around_its_last_turn() {
        let body = request(5);
        let plan = plan(&body, Some(PROMPT), false).expect("eligible");
        assert_eq!(plan.tail_start, 9);
        // system 1 + the last result 1.
        assert_eq!(plan.breakpoints, 2);
        assert_eq!(plan.head.iter().map(count_cache_control).sum::<usize>(), 0);

        let out = splice(&body, &plan, &projection()).expect("valid");
        let m = out["messages"].as_array().expect("messages");
        // The first message as it came (the goal block of the projection said the same), the
        // Read pair, then the real last turn.
        assert_eq!(m.len(), 5);
        assert_eq!(m[0], without_breakpoints(&body["messages"][0]));
        assert_eq!(m[1]["content"][0]["name"], "Read");
        assert_eq!(m[3], body["messages"][9]);
        assert_eq!(m[4], body["messages"][10]);
        for k in [
            "system",
            "tools",
            "model",
            "max_tokens",
            "stream",
            "some_future_field",
        ] {
            assert_eq!(out[k], body[k], "{k} must pass untouched");
        }
        assert!(count_cache_control(&out) <= MAX_BREAKPOINTS);

        // The projection's goal block carried its stable breakpoint: the first message, as
        // stable, carries it now.
        let mut proj = projection();
        proj[0]["content"][0]["cache_control"] = json!({"type": "ephemeral"});
        let out = splice(&body, &plan, &proj).expect("valid");
        let first = &out["messages"][0];
        assert_eq!(count_cache_control(first), 1);
        assert!(first["content"][1].get("cache_control").is_some());
        assert_eq!(
            first["content"][1]["text"],
            body["messages"][0]["content"][1]["text"]
        );
    }

    /// `body` with every breakpoint of `key` (`system`, `tools` or `messages`) set to `cc`.
    fn with_marks(mut body: Value, key: &str, cc: &Value) -> Value {
        fn set(v: &mut Value, cc: &Value) {
            match v {
                Value::Object(m) => {
                    if m.contains_key("cache_control") {
                        m.insert("cache_control".into(), cc.clone());
                    }
                    m.values_mut().for_each(|x| set(x, cc));
                }
                Value::Array(a) => a.iter_mut().for_each(|x| set(x, cc)),
                _ => {}
            }
        }
        set(&mut body[key], cc);
        body
    }

    #[test]
    fn the_projections_breakpoints_take_the_time_of_claude_codes() {
        let hour = json!({"type": "ephemeral", "ttl": "1h"});
        let global = json!({"type": "ephemeral", "ttl": "1h", "scope": "global"});
        let five = json!({"type": "ephemeral"});
        let ttl = |body: &Value| plan(body, Some(PROMPT), false).expect("eligible").cache_ttl;
        // Claude Code on a subscription: an hour on the system prompt and on its messages.
        let sub = with_marks(with_marks(request(4), "system", &global), "messages", &hour);
        assert_eq!(ttl(&sub), CacheTtl::OneHour);
        assert_eq!(ttl(&request(4)), CacheTtl::FiveMinutes);
        // The next breakpoint after the projection decides; without one, the last before it.
        let hour_then_five = with_marks(with_marks(request(4), "system", &hour), "messages", &five);
        assert_eq!(ttl(&hour_then_five), CacheTtl::FiveMinutes);
        let mut unmarked_tail = with_marks(request(4), "system", &hour);
        unmarked_tail["messages"][8]["content"][0]
            .as_object_mut()
            .expect("result")
            .remove("cache_control");
        assert_eq!(ttl(&unmarked_tail), CacheTtl::OneHour);
        // Automatic caching marks the last block.
        let mut auto = unmarked_tail.clone();
        auto["system"][0]
            .as_object_mut()
            .expect("block")
            .remove("cache_control");
        auto["cache_control"] = hour.clone();
        assert_eq!(ttl(&auto), CacheTtl::OneHour);

        // The request the proxy sends is one the API takes: every breakpoint an hour long.
        let plan = plan(&sub, Some(PROMPT), false).expect("eligible");
        let mut proj = projection();
        for m in &mut proj {
            for b in m["content"].as_array_mut().expect("blocks") {
                if b.get("cache_control").is_some() {
                    b["cache_control"] = plan.cache_ttl.cache_control();
                }
            }
        }
        proj[0]["content"][0]["cache_control"] = plan.cache_ttl.cache_control();
        let out = splice(&sub, &plan, &proj).expect("valid");
        let ttls = validate::breakpoint_ttls(&out);
        assert_eq!(ttls.len(), 4, "{out}");
        assert!(
            ttls.iter().all(|t| *t == Some(CacheTtl::OneHour)),
            "{ttls:?}"
        );
        // Five-minute breakpoints in between would be refused by the API, and so by the check.
        let mut five_between = projection();
        five_between[2]["content"][0]["cache_control"] = five;
        let refused = splice(&sub, &plan, &five_between).expect_err("refused");
        assert!(refused.to_string().contains("CacheTtlOrder"), "{refused}");
    }

    #[test]
    fn later_prompts_follow_the_first_message() {
        let body = request(3);
        let goal = format!("{PROMPT}{LATER_PROMPT}now the tests too");
        let plan = plan(&body, Some(&goal), false).expect("eligible");
        let mut proj = projection();
        proj[0]["content"][0]["text"] = json!(goal);
        let out = splice(&body, &plan, &proj).expect("valid");
        let first = &out["messages"][0]["content"];
        let n = first.as_array().map_or(0, Vec::len);
        assert_eq!(n, 3, "reminder, prompt, then the later prompts: {first}");
        assert_eq!(first[2]["text"], "Then the user asked:\nnow the tests too");
    }

    #[test]
    fn claude_codes_system_messages_are_kept() {
        let mut body = request(4);
        let env = json!({"role": "system", "content": [{"type": "text", "text": "# Environment\ncwd: /p"}]});
        let mode = json!({"role": "system", "content": "Plan mode is on."});
        let m = body["messages"].as_array_mut().expect("messages");
        m.insert(3, mode.clone());
        m.insert(6, mode.clone());
        m.push(env.clone());
        let plan =
            plan(&body, Some(PROMPT), false).expect("a trailing system message is Claude Code's");
        assert_eq!(plan.instructions, vec![mode.clone()], "once each");
        let out = splice(&body, &plan, &projection()).expect("valid");
        let m = out["messages"].as_array().expect("messages");
        let n = m.len();
        assert_eq!(m[n - 1], env, "the environment block stays last");
        assert_eq!(m[n - 4], mode, "instructions before the last turn");
        assert_eq!(m.iter().filter(|x| **x == mode).count(), 1);
    }

    /// Each background task that ended is a system message of its own: the last few stay.
    #[test]
    fn the_last_notices_of_background_tasks_stay() {
        let mut body = request(8);
        let notice = |n: usize| {
            json!({"role": "system", "content": format!(
                "[SYSTEM NOTIFICATION - NOT USER INPUT]\n<task-notification>\n<task-id>b{n}</task-id>\n\
                 <status>completed</status>\n</task-notification>")})
        };
        let mode = json!({"role": "system", "content": "Plan mode is on."});
        let m = body["messages"].as_array_mut().expect("messages");
        for n in 0..6 {
            m.insert(3 + 2 * n, notice(n));
        }
        m.insert(4, mode.clone());
        let plan = plan(&body, Some(PROMPT), false).expect("eligible");
        assert_eq!(
            plan.instructions,
            [mode, notice(2), notice(3), notice(4), notice(5)],
            "other instructions, and the last four notices, in order"
        );
    }

    /// Claude Code 2.1.332 sends its environment block (about 2,000 tokens) as a system message
    /// right after the first message, for the whole conversation: it stays there, ahead of the
    /// projection, where a prompt cache keeps it, instead of after the projection, where every
    /// change of the projection would write it to the cache again.
    #[test]
    fn an_opening_system_message_stays_before_the_projection() {
        let mut body = request(4);
        let env = json!({"role": "system", "content": [{"type": "text", "text": "# Environment\ncwd: /p"}]});
        let mode = json!({"role": "system", "content": "Plan mode is on."});
        let m = body["messages"].as_array_mut().expect("messages");
        m.insert(1, env.clone());
        m.insert(4, mode.clone());
        let plan = plan(&body, Some(PROMPT), false).expect("eligible");
        assert_eq!(plan.opening_instructions, vec![env.clone()]);
        assert_eq!(plan.instructions, vec![mode.clone()]);
        // The environment block between the opening and the projection's first call; the
        // later instruction between the projection and the last turn.
        let expected = [
            "user",
            "system",
            "assistant",
            "user",
            "system",
            "assistant",
            "user",
        ];
        let roles_of = |out: &Value| -> Vec<String> {
            out["messages"]
                .as_array()
                .expect("messages")
                .iter()
                .filter_map(|m| role(m).map(str::to_owned))
                .collect()
        };
        let out = splice(&body, &plan, &projection()).expect("valid");
        let m = out["messages"].as_array().expect("messages");
        assert_eq!(roles_of(&out), expected);
        assert_eq!(m[1], env);
        assert_eq!(
            m[2]["content"][0]["name"], "Read",
            "the projection's first call"
        );
        assert_eq!(m[4], mode, "a later instruction, before the last turn");
        // With later prompts the projection opens with a user message: the block goes after it,
        // still before the first call.
        let out = splice(
            &body,
            &plan,
            &[
                json!({"role": "user", "content": [{"type": "text", "text": "later: also the tests"}]}),
                projection()[1].clone(),
                projection()[2].clone(),
            ],
        )
        .expect("valid");
        assert_eq!(roles_of(&out), expected);
    }

    /// The same request once Claude Code compacted the conversation: it opens with the summary,
    /// and the main thread can start subagents.
    pub(super) fn compacted_request(turns: usize) -> Value {
        let mut body = request(turns);
        body["messages"][0] = json!({"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>CLAUDE.md says: use tabs</system-reminder>"},
            {"type": "text", "text": format!("{COMPACTED_OPENING} that ran out of context. The summary below covers the earlier portion of the conversation.\n\nSummary:\n1. Primary Request and Intent: {PROMPT}"), "cache_control": {"type": "ephemeral"}}
        ]});
        with_agent(&mut body);
        body
    }

    /// 2.1.332 sends a file named with `@` in the first prompt as a message of its own (the
    /// Read call), then the prompt's message, which opens with the call's result: the
    /// conversation opens with both, and both go as they came.
    #[test]
    fn a_first_prompt_naming_a_file_opens_with_two_messages() {
        let mut body = request(4);
        let call = json!({"role": "user", "content": "<system-reminder>\nCalled the Read tool with the following input: {\"file_path\":\"/p/a.py\"}\n</system-reminder>"});
        let env = json!({"role": "system", "content": "# Environment\ncwd: /p"});
        let m = body["messages"].as_array_mut().expect("messages");
        m[0]["content"]
            .as_array_mut()
            .expect("blocks")
            .insert(0, json!({"type": "text", "text": "<system-reminder>\nResult of calling the Read tool:\n1\tx = 1\n</system-reminder>"}));
        m.insert(0, call.clone());
        m.insert(2, env.clone());
        let plan = plan(&body, Some(PROMPT), false).expect("the session's own");
        assert_eq!(plan.head.len(), 2);
        assert_eq!(plan.head[0], call);
        let out = splice(&body, &plan, &projection()).expect("valid");
        let m = out["messages"].as_array().expect("messages");
        assert_eq!(m[0], call, "as it came");
        assert_eq!(
            m[1],
            without_breakpoints(&body["messages"][1]),
            "as it came"
        );
        assert_eq!(m[2], env);
        assert_eq!(m[3]["content"][0]["name"], "Read", "then the projection");
        // The conversation's goal, read from a call after a resume, is the prompt.
        assert_eq!(conversation_goal(&body), Some((PROMPT.to_owned(), false)));
    }

    /// After Claude Code compacts a conversation on its own, 2.1.332 puts the file read last
    /// back as a message of its own, before the one with the summary.
    #[test]
    fn a_compacted_conversation_that_opens_with_a_file_put_back_is_the_sessions() {
        let mut body = compacted_request(4);
        let call = json!({"role": "user", "content": "<system-reminder>\nCalled the Read tool with the following input: {\"file_path\":\"/p/a.py\"}\n</system-reminder>"});
        body["messages"]
            .as_array_mut()
            .expect("messages")
            .insert(0, call.clone());
        let plan = plan(&body, Some(PROMPT), true).expect("the session's own, compacted");
        assert!(plan.compacted);
        assert_eq!(plan.head.len(), 2);
        let out = splice(&body, &plan, &projection()).expect("valid");
        assert_eq!(out["messages"][0], call);
        assert_eq!(
            super::plan(&body, Some(PROMPT), false),
            Err(Skip::OtherConversation),
            "only once the hook told of the compaction"
        );
    }

    /// Adds the tool that starts subagents, which only a session's main thread has.
    fn with_agent(body: &mut Value) {
        if let Some(tools) = body["tools"].as_array_mut() {
            tools.push(json!({"name": "Agent", "input_schema": {"type": "object"}}));
        }
    }

    #[test]
    fn a_compacted_conversation_is_rewritten_with_the_whole_goal() {
        let body = compacted_request(5);
        assert_eq!(
            plan(&body, Some(PROMPT), false),
            Err(Skip::OtherConversation),
            "the hook did not see a compaction"
        );
        let goal = format!("{PROMPT}{LATER_PROMPT}now the tests too");
        let plan = plan(&body, Some(&goal), true).expect("eligible");
        assert!(plan.compacted);
        assert_eq!(plan.tail_start, 9);
        let mut proj = projection();
        proj[0]["content"][0]["text"] = json!(goal);
        proj[0]["content"][0]["cache_control"] = json!({"type": "ephemeral"});
        let out = splice(&body, &plan, &proj).expect("valid");
        let m = out["messages"].as_array().expect("messages");
        assert_eq!(
            m[0]["content"][1]["text"],
            body["messages"][0]["content"][1]["text"]
        );
        assert!(
            m[0]["content"][1].get("cache_control").is_none(),
            "the summary as it came, unmarked"
        );
        // The summary, then the whole goal with its breakpoint, the Read pair, the last turn.
        let n = m[0]["content"].as_array().map_or(0, Vec::len);
        assert_eq!(n, 3, "{}", m[0]);
        assert_eq!(m[0]["content"][2]["text"], json!(goal));
        assert!(m[0]["content"][2].get("cache_control").is_some());
        assert_eq!(m[m.len() - 1], body["messages"][10]);

        // A subagent's own compacted conversation: it cannot start subagents.
        let mut sub = body.clone();
        if let Some(tools) = sub["tools"].as_array_mut() {
            tools.retain(|t| t["name"] != "Agent");
        }
        assert_eq!(
            super::plan(&sub, Some(PROMPT), true),
            Err(Skip::OtherConversation)
        );
        assert!(
            looks_main(&body) && !looks_main(&sub),
            "what `-v` speaks up for"
        );
        let mut older = sub.clone();
        if let Some(tools) = older["tools"].as_array_mut() {
            tools.push(json!({"name": "Task", "input_schema": {"type": "object"}}));
        }
        assert!(
            super::plan(&older, Some(PROMPT), true).is_ok(),
            "Task, as before 2.1.63"
        );
        // The summary alone, as a string, as Claude Code sends a message of one text.
        let mut bare = body.clone();
        bare["messages"][0]["content"] = body["messages"][0]["content"][1]["text"].clone();
        assert!(super::plan(&bare, Some(PROMPT), true).is_ok_and(|p| p.compacted));
        // Another conversation that is no summary, and one that opens with the first prompt.
        let mut other = body.clone();
        other["messages"][0]["content"][1]["text"] = json!("List the callers of parse_date.");
        assert_eq!(
            super::plan(&other, Some(PROMPT), true),
            Err(Skip::OtherConversation)
        );
        let uncompacted = super::plan(&request(5), Some(PROMPT), true).expect("eligible");
        assert!(!uncompacted.compacted, "the first prompt says the goal");
    }

    /// A command the user invoked (`/look src/a.py`), as 2.1.332 sends it: the command's name
    /// and arguments, then its text.
    fn command(said: &str, args: &str, text: &str) -> Value {
        let name = said.split_whitespace().next().unwrap_or(said);
        let args = if args.is_empty() {
            String::new()
        } else {
            format!("<command-args>{args}</command-args>\n")
        };
        json!({"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>context</system-reminder>"},
            {"type": "text", "text": format!(
                "<command-message>{}</command-message>\n<command-name>{name}</command-name>\n{args}",
                name.trim_start_matches('/'))},
            {"type": "text", "text": text}
        ]})
    }

    /// A session opened with a command is the hook's goal, `/NAME ARGS` as typed: it is
    /// rewritten, and a command invoked later keeps its text after the history is gone (a
    /// skill's is kept with the skills' instructions).
    #[test]
    fn commands_the_user_invoked_are_prompts_with_their_text() {
        let mut body = request(4);
        body["messages"][0] = command("/look", "src/a.py", "Read src/a.py and say what it does.");
        let messages = body["messages"].as_array_mut().expect("messages");
        messages.insert(
            5,
            json!({"role": "assistant", "content": [{"type": "text", "text": "It parses."}]}),
        );
        messages.insert(
            6,
            command("/look", "src/b.py", "Read src/b.py and say what it does."),
        );
        messages.insert(
            7,
            json!({"role": "assistant", "content": [{"type": "text", "text": "Styled."}]}),
        );
        messages.insert(
            8,
            command(
                "/sty",
                "",
                &format!("{SKILL_LOADED}/p/.claude/skills/sty\n\nUse tabs."),
            ),
        );
        let (goal, _) = conversation_goal(&body).expect("a goal");
        assert_eq!(
            goal,
            format!("/look src/a.py{LATER_PROMPT}/look src/b.py{LATER_PROMPT}/sty")
        );
        let plan = plan(&body, Some(&goal), false).expect("eligible: the command opens it");
        assert_eq!(
            plan.later_prompts.as_deref(),
            Some(
                "Then the user asked:\n/look src/b.py\n\nRead src/b.py and say what it does.\
                 \n\nThen the user asked:\n/sty"
            )
        );
        assert_eq!(
            block_texts(&plan.kept_blocks).count(),
            1,
            "the skill's text"
        );
        // Another conversation's command is not this one's.
        assert_eq!(
            super::plan(&body, Some("/look src/c.py"), false),
            Err(Skip::OtherConversation)
        );
    }

    #[test]
    fn other_requests_pass_untouched() {
        let body = request(5);
        assert_eq!(plan(&body, None, false), Err(Skip::NoGoal));
        assert_eq!(plan(&body, Some("  "), false), Err(Skip::NoGoal));
        assert_eq!(
            plan(&body, Some("Explore the parser module"), false),
            Err(Skip::OtherConversation)
        );
        // A subagent handed the user's words inside its own task.
        let mut quoting = body.clone();
        quoting["messages"][0]["content"] = json!(format!(
            "Your task, for the user who asked \"{PROMPT}\": list the callers."
        ));
        assert_eq!(
            plan(&quoting, Some(PROMPT), false),
            Err(Skip::OtherConversation)
        );
        let mut no_tools = body.clone();
        no_tools["tools"] = json!([]);
        assert_eq!(plan(&no_tools, Some(PROMPT), false), Err(Skip::NoReadTool));
        assert_eq!(plan(&request(0), Some(PROMPT), false), Err(Skip::TooShort));
        assert_eq!(plan(&request(1), Some(PROMPT), false), Err(Skip::TooShort));
        assert_eq!(plan(&json!([1]), Some(PROMPT), false), Err(Skip::NotJson));
        let mut ends_assistant = body;
        ends_assistant["messages"]
            .as_array_mut()
            .expect("messages")
            .pop();
        assert_eq!(
            plan(&ends_assistant, Some(PROMPT), false),
            Err(Skip::NoMessages)
        );
    }

    #[test]
    fn breakpoints_never_exceed_the_limit() {
        let mut body = request(4);
        for t in body["tools"].as_array_mut().expect("tools") {
            t["cache_control"] = json!({"type": "ephemeral"});
        }
        let plan = plan(&body, Some(PROMPT), false).expect("eligible");
        assert_eq!(plan.breakpoints, 0);

        let mut body = request(4);
        body["cache_control"] = json!({"type": "ephemeral"});
        let plan = plan_of(&body);
        assert_eq!(plan.breakpoints, 1, "automatic caching takes one of the 4");
    }

    pub(super) fn plan_of(body: &Value) -> Plan {
        plan(body, Some(PROMPT), false).expect("eligible")
    }

    #[test]
    fn a_new_prompt_after_an_answer_keeps_the_answer() {
        let mut body = request(3);
        let m = body["messages"].as_array_mut().expect("messages");
        m.push(json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}]}));
        m.push(json!({"role": "user", "content": "now the tests too"}));
        let plan = plan(&body, Some(PROMPT), false).expect("eligible");
        let out = splice(&body, &plan, &projection()).expect("valid");
        let m = out["messages"].as_array().expect("messages");
        assert_eq!(m[m.len() - 2]["content"][0]["text"], "Done.");
        assert_eq!(m[m.len() - 1]["content"], "now the tests too");
    }

    /// One model turn of a generated conversation: tool calls (Read or Bash), whether the
    /// assistant thinks first, whether Claude Code slips a system message in after it.
    #[derive(Debug, Clone)]
    struct Turn {
        calls: Vec<bool>,
        thinking: bool,
        system_after: bool,
    }

    fn turn() -> impl Strategy<Value = Turn> {
        (
            prop::collection::vec(any::<bool>(), 1..4),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(calls, thinking, system_after)| Turn {
                calls,
                thinking,
                system_after,
            })
    }

    /// A Claude Code request: the first message, the turns, then maybe a final answer and a
    /// new prompt, maybe a trailing system message; breakpoints on the system prompt and on
    /// the newest message, as Claude Code places them.
    fn conversation(turns: &[Turn], answer_then_prompt: bool, trailing_system: bool) -> Value {
        let mut messages = vec![json!({"role": "user", "content": [
            {"type": "text", "text": "<system-reminder>ctx</system-reminder>"},
            {"type": "text", "text": PROMPT}
        ]})];
        for (t, turn) in turns.iter().enumerate() {
            let mut a = Vec::new();
            if turn.thinking {
                a.push(json!({"type": "thinking", "thinking": "hm", "signature": "s"}));
            }
            let mut u = Vec::new();
            for (c, read) in turn.calls.iter().enumerate() {
                let id = format!("toolu_{t}_{c}");
                let name = if *read { "Read" } else { "Bash" };
                a.push(json!({"type": "tool_use", "id": id, "name": name, "input": {}}));
                u.push(json!({"type": "tool_result", "tool_use_id": id, "content": "out"}));
            }
            messages.push(json!({"role": "assistant", "content": a}));
            messages.push(json!({"role": "user", "content": u}));
            if turn.system_after {
                messages.push(json!({"role": "system", "content": format!("note {}", t % 2)}));
            }
        }
        if answer_then_prompt {
            messages
                .push(json!({"role": "assistant", "content": [{"type": "text", "text": "Done."}]}));
            messages.push(json!({"role": "user", "content": "and now?"}));
        }
        if let Some(last) = messages
            .iter_mut()
            .rev()
            .find(|m| role(m) == Some("user"))
            .and_then(|m| m.get_mut("content"))
            .and_then(Value::as_array_mut)
            .and_then(|c| c.last_mut())
        {
            last["cache_control"] = json!({"type": "ephemeral"});
        }
        if trailing_system {
            messages.push(json!({"role": "system", "content": "# Environment"}));
        }
        let mut body = request(0);
        body["messages"] = Value::Array(messages);
        body
    }

    /// A projection as the socket renders it: the goal, then `files` Read pairs, with up to
    /// `breakpoints` markers (on the goal, then on the last result).
    fn rendered(files: usize, later: bool, breakpoints: u8) -> Vec<Value> {
        let goal = if later {
            format!("{PROMPT}{LATER_PROMPT}and now?")
        } else {
            PROMPT.to_owned()
        };
        let mut goal_block = json!({"type": "text", "text": goal});
        if breakpoints >= 1 {
            goal_block["cache_control"] = json!({"type": "ephemeral"});
        }
        let mut m = vec![json!({"role": "user", "content": [goal_block]})];
        for f in 0..files {
            let id = format!("wf_{f}");
            m.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": id, "name": "Read", "input": {"file_path": "/p/x"}}]}));
            m.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": id, "content": "1\tx"}]}));
        }
        if breakpoints >= 2
            && files > 0
            && let Some(b) = m.last_mut().and_then(|x| x["content"].get_mut(0))
        {
            b["cache_control"] = json!({"type": "ephemeral"});
        }
        m
    }

    proptest! {
        /// Any conversation of Claude Code's shapes, spliced with any projection of the
        /// socket's shapes: the result keeps the API's rules (the splice never has to fall
        /// back), at most 4 breakpoints, the first message's text, and the last turn verbatim.
        #[test]
        fn splices_keep_the_rules_the_head_and_the_tail(
            turns in prop::collection::vec(turn(), 0..8),
            answer_then_prompt in any::<bool>(),
            trailing_system in any::<bool>(),
            files in 0usize..5,
            later in any::<bool>(),
            compacted in any::<bool>(),
        ) {
            let mut body = conversation(&turns, answer_then_prompt, trailing_system);
            if compacted {
                body["messages"][0]["content"][1]["text"] = json!(format!("{COMPACTED_OPENING}. Summary: fixing dates."));
                with_agent(&mut body);
            }
            let goal = if later { format!("{PROMPT}{LATER_PROMPT}and now?") } else { PROMPT.to_owned() };
            let Ok(plan) = plan(&body, Some(&goal), compacted) else {
                // Only a conversation with nothing between its first message and its last
                // turn is left alone.
                prop_assert!(turns.len() + usize::from(answer_then_prompt) <= 1);
                return Ok(());
            };
            let out = splice(&body, &plan, &rendered(files, later, plan.breakpoints));
            prop_assert!(out.is_ok(), "{:?}", out.err());
            let out = out.unwrap_or_default();
            prop_assert!(count_cache_control(&out) <= MAX_BREAKPOINTS);
            let sent = out["messages"].as_array().cloned().unwrap_or_default();
            let orig = body["messages"].as_array().cloned().unwrap_or_default();
            let tail = &orig[plan.tail_start..];
            prop_assert!(sent.len() >= tail.len());
            prop_assert_eq!(&sent[sent.len() - tail.len()..], tail);
            let texts = |m: &Value| -> Vec<Value> {
                m["content"].as_array().map(|c| c.iter().map(|b| b["text"].clone()).collect()).unwrap_or_default()
            };
            let head = texts(&orig[0]);
            prop_assert_eq!(&texts(&sent[0])[..head.len()], &head[..]);
            // After a compaction the goal is said once, whole, right after the summary.
            let goal_blocks = sent
                .iter()
                .flat_map(texts)
                .skip(head.len())
                .filter(|t| *t == json!(goal))
                .count();
            prop_assert_eq!(goal_blocks, usize::from(compacted));
        }
    }
}
