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

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::claude_hook::{LATER_PROMPT, goal_with};
use crate::projection::validate::{self, count_cache_control};
use crate::projection::{CacheTtl, LineNumbers};

/// The header Claude Code names a subagent in, on each of its calls (2.1.332).
pub const AGENT_HEADER: &str = "x-claude-code-agent-id";
/// What the billing text at the head of a subagent's system prompt says (2.1.332).
const SUBAGENT_MARK: &str = "cc_is_subagent=true";

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

fn role(m: &Value) -> Option<&str> {
    m.get("role").and_then(Value::as_str)
}

/// Whether a text of `content` (a string, or one of its text blocks) satisfies `pred`.
fn any_text(content: Option<&Value>, pred: impl Fn(&str) -> bool) -> bool {
    texts(content).into_iter().any(pred)
}

/// The texts of the text blocks among `blocks`, in order.
pub(super) fn block_texts(blocks: &[Value]) -> impl Iterator<Item = &str> {
    blocks
        .iter()
        .filter(|b| kind(b) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
}

/// The texts of a message's `content`: the string, or its text blocks in order.
pub(super) fn texts(content: Option<&Value>) -> Vec<&str> {
    match content {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(blocks)) => block_texts(blocks).collect(),
        _ => Vec::new(),
    }
}

/// Whether `content` has the prompt as a text of its own (Claude Code sends what the user
/// typed as one block, after its reminders). A text that only contains it is another
/// conversation quoting it: a subagent given the user's words as part of its task.
fn holds_prompt(content: Option<&Value>, prompt: &str) -> bool {
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
fn invocation(content: Option<&Value>) -> Option<(String, &str)> {
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
fn opens_compacted(content: Option<&Value>) -> bool {
    any_text(content, |t| t.trim_start().starts_with(COMPACTED_OPENING))
}

/// How many user messages open `messages`: the first, and those Claude Code put right after it
/// (a file named with `@` in the first prompt comes as a message of its own in 2.1.332). A
/// later prompt always follows an answer, so it is never among them.
fn opening_len(messages: &[Value]) -> usize {
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
fn split_goal(goal: &str) -> (&str, Option<&str>) {
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
fn defines(body: &Value, names: &[&str]) -> bool {
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

/// Whether Claude Code marked `body` as a subagent's: its system prompt opens with a billing
/// text saying so. (Its calls also carry [`AGENT_HEADER`], which the proxy checks.)
fn marked_subagent(body: &Value) -> bool {
    body.get("system").is_some_and(|s| {
        texts(Some(s))
            .iter()
            .any(|t| t.starts_with("x-anthropic-billing-header:") && t.contains(SUBAGENT_MARK))
    })
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

/// The later prompts of the goal (`later`, joined by [`LATER_PROMPT`]) that the conversation
/// (`messages`, not compacted) still holds. The user can take prompts back: Claude Code's
/// rewind (Esc Esc, "Restore conversation") sends the conversation as it was before one, and
/// no hook hears of it, so the goal still says it. A prompt is taken back only when no text
/// of the conversation holds it at all (nor, for the user's answers, the question, which is
/// in the agent's call), and the last is always kept (a prompt the user queued may not be in
/// the call yet).
pub(super) fn unretracted(later: &str, messages: &[Value]) -> String {
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

/// Every string `v` holds, at any depth.
pub(super) fn all_strings<'a>(v: Option<&'a Value>, out: &mut Vec<&'a str>) {
    match v {
        Some(Value::String(s)) => out.push(s),
        Some(Value::Array(a)) => a.iter().for_each(|x| all_strings(Some(x), out)),
        Some(Value::Object(o)) => o.values().for_each(|x| all_strings(Some(x), out)),
        _ => {}
    }
}

/// The later prompts of the goal (`later`, joined by [`LATER_PROMPT`]), each command the user
/// invoked in `history` followed by its text: the goal says `/NAME ARGS`, as the hooks got it,
/// and with the history the model would lose what the command told it. A skill's text is
/// kept with the skills' instructions ([`skill_loads`]) instead.
fn with_command_texts(later: &str, history: &[Value]) -> String {
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

pub(super) fn kind(b: &Value) -> Option<&str> {
    b.get("type").and_then(Value::as_str)
}

/// The blocks of `messages` with role `r`.
pub(super) fn blocks_of<'a>(messages: &'a [Value], r: &'a str) -> impl Iterator<Item = &'a Value> {
    messages
        .iter()
        .filter(move |m| role(m) == Some(r))
        .filter_map(|m| m.get("content")?.as_array())
        .flatten()
}

/// The image and document blocks of the user's messages in `history`, once each, without
/// breakpoints.
fn prompt_media(history: &[Value]) -> Vec<Value> {
    let mut seen = HashSet::new();
    blocks_of(history, "user")
        .filter(|b| matches!(kind(b), Some("image" | "document")))
        .map(without_breakpoints)
        .filter(|b| seen.insert(b.to_string()))
        .collect()
}

/// How Claude Code (2.1.332) opens the text block with a skill's instructions, which it puts
/// after the `Skill` call's result ("Launching skill: NAME") in the same message.
const SKILL_LOADED: &str = "Base directory for this skill: ";

/// The instructions of the skills the agent loaded in `history`, once each, without
/// breakpoints. They are instructions, not a result that ages: with the history they would
/// leave the model's view one call after the `Skill` call that loaded them, while the agent
/// still follows them. (The skill's file is under `.claude`, which the world leaves out.)
fn skill_loads(history: &[Value]) -> Vec<Value> {
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
fn nested_instructions(history: &[Value]) -> Vec<Value> {
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

/// How Claude Code (2.1.332) opens the result of an `ExitPlanMode` call the user approved; the
/// plan follows, as the agent wrote its file, after [`APPROVED_PLAN`].
pub(super) const PLAN_APPROVED: &str = "User has approved your plan.";
pub(super) const APPROVED_PLAN: &str = "## Approved Plan:\n";

/// The last plan the user approved in `history` (an `ExitPlanMode` call's result), as a text
/// block. The agent works through it for the rest of the session, as it does through its task
/// list: with the history it would go one call after the approval. (The plan file is under
/// `~/.claude/plans`, outside the project.)
fn approved_plan(history: &[Value]) -> Option<Value> {
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
fn user_feedback(history: &[Value]) -> Vec<Value> {
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
fn shell_runs(history: &[Value]) -> Vec<Value> {
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

/// The images and documents that tool calls of `history` returned (Claude Code's Read of a
/// screenshot or a PDF), without breakpoints, each file's after a text block naming it. The
/// world leaves binary files out, so the projection cannot show them from disk, and with the
/// history they would leave the model's view one call after it saw them. Only the last read
/// of each file (by the call's `file_path`) is kept, and of the last [`READ_MEDIA_KEPT`]
/// files: an agent reads an image again once it has changed it. A file the last turn (`tail`,
/// sent as it came) reads again is left to it.
fn read_media(history: &[Value], tail: &[Value]) -> Vec<Value> {
    fn paths(messages: &[Value]) -> HashMap<&str, &str> {
        blocks_of(messages, "assistant")
            .filter(|b| kind(b) == Some("tool_use"))
            .filter_map(|b| {
                let id = b.get("id")?.as_str()?;
                let input = b.get("input")?;
                let path = ["file_path", "notebook_path", "path", "url"]
                    .iter()
                    .find_map(|k| input.get(*k).and_then(Value::as_str))?;
                Some((id, path))
            })
            .collect()
    }
    /// Each tool result's id and its images and documents, for those that have some.
    fn media(messages: &[Value]) -> impl Iterator<Item = (&str, Vec<Value>)> {
        blocks_of(messages, "user")
            .filter(|b| kind(b) == Some("tool_result"))
            .filter_map(|result| {
                let media: Vec<Value> = result
                    .get("content")
                    .and_then(Value::as_array)?
                    .iter()
                    .filter(|b| matches!(kind(b), Some("image" | "document")))
                    .map(without_breakpoints)
                    .collect();
                let id = result.get("tool_use_id").and_then(Value::as_str)?;
                (!media.is_empty()).then_some((id, media))
            })
    }
    let path_of = paths(history);
    // Sent as the last turn has them: only a call there that returned media again (a
    // NotebookEdit names the notebook whose figures a Read returned, and returns none).
    let tail_paths = paths(tail);
    let read_again: HashSet<&str> = media(tail)
        .filter_map(|(id, _)| tail_paths.get(id).copied())
        .collect();
    let views = media(history).map(|(id, media)| {
        let name = path_of.get(id).copied().unwrap_or(id).to_owned();
        (name, media)
    });
    last_views(views, &read_again, "text")
}

/// At most this many files' images or documents, returned by tool calls, are kept (the ones
/// read last): an image costs up to about 1,600 tokens.
const READ_MEDIA_KEPT: usize = 4;

/// The text that names what a tool call returned of a file, kept as it was then.
pub(super) fn earlier_media_label(name: &str) -> String {
    format!(
        "{name}, as a tool call returned it earlier (the files shown below are as they are now; \
         this one is as it was then):"
    )
}

/// What tool calls returned of files no projection shows (`(file, blocks)`, oldest first),
/// as kept ([`read_media`]; the Responses side's `viewed_media`): the last of each file, of
/// the last [`READ_MEDIA_KEPT`] files, none of those in `again` (the last turn returns them
/// anew), each after a text block (of type `text_type`) naming it as it was then.
pub(super) fn last_views(
    views: impl Iterator<Item = (String, Vec<Value>)>,
    again: &HashSet<&str>,
    text_type: &str,
) -> Vec<Value> {
    let mut files: Vec<(String, Vec<Value>)> = Vec::new();
    for (name, blocks) in views {
        files.retain(|(n, _)| *n != name);
        files.push((name, blocks));
    }
    files.retain(|(name, _)| !again.contains(name.as_str()));
    let skip = files.len().saturating_sub(READ_MEDIA_KEPT);
    files
        .into_iter()
        .skip(skip)
        .flat_map(|(name, blocks)| {
            let label = serde_json::json!({"type": text_type, "text": earlier_media_label(&name)});
            std::iter::once(label).chain(blocks)
        })
        .collect()
}

/// The calls of `history` whose results load deferred tools (hold `tool_reference` blocks:
/// Claude Code's ToolSearch, with `ENABLE_TOOL_SEARCH`), as one assistant message, and those
/// results as the user message answering it. Without them, a deferred tool the agent found
/// would be unknown to the API again, and a call of it refused.
fn tool_loads(history: &[Value]) -> Vec<Value> {
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

/// The line-number gutter Claude Code's own Read results use in this request, so the
/// projection's reads match what its Edit tool strips. `None` when the request holds no Read
/// result yet.
pub fn read_gutter(body: &Value) -> Option<LineNumbers> {
    let messages = body.get("messages")?.as_array()?;
    let read_ids: HashSet<&str> = messages
        .iter()
        .filter_map(|m| m.get("content")?.as_array())
        .flatten()
        .filter(|b| {
            b.get("type").and_then(Value::as_str) == Some("tool_use")
                && b.get("name").and_then(Value::as_str) == Some(READ_TOOL)
        })
        .filter_map(|b| b.get("id").and_then(Value::as_str))
        .collect();
    messages
        .iter()
        .rev()
        .filter_map(|m| m.get("content")?.as_array())
        .flatten()
        .filter(|b| {
            b.get("tool_use_id")
                .and_then(Value::as_str)
                .is_some_and(|id| read_ids.contains(id))
        })
        .find_map(|b| LineNumbers::of_read_result(&result_text(b.get("content"))))
}

/// Claude Code's notices of background tasks that ended ([`TASK_NOTICE`]) kept: each names
/// one task and the file its output went to. The last few are what the model may still act
/// on; a session that runs a command in the background now and then would otherwise carry
/// every notice it ever got (about 150 tokens each).
const NOTICES_KEPT: usize = 4;

/// What opens the body of Claude Code's notice of a background task that ended, in a `system`
/// message of its own (2.1.332).
pub(super) const TASK_NOTICE: &str = "<task-notification>";

/// Whether `m` is Claude Code's notice of a background task ([`TASK_NOTICE`]).
fn is_task_notice(m: &Value) -> bool {
    any_text(m.get("content"), |t| t.contains(TASK_NOTICE))
}

/// The text of a tool result's content (a string, or text blocks); a Responses call output's
/// `output` is of the same shape.
pub(super) fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A message without `cache_control` on it or on its blocks.
fn without_breakpoints(m: &Value) -> Value {
    let mut m = m.clone();
    if let Some(o) = m.as_object_mut() {
        o.remove("cache_control");
        if let Some(Value::Array(blocks)) = o.get_mut("content") {
            for b in blocks.iter_mut().filter_map(Value::as_object_mut) {
                b.remove("cache_control");
            }
        }
    }
    m
}

/// A message's content as an array of blocks (the API takes a string as one text block).
fn into_blocks(content: Option<Value>) -> Vec<Value> {
    match content {
        Some(Value::Array(a)) => a,
        Some(Value::String(s)) => vec![serde_json::json!({"type": "text", "text": s})],
        _ => Vec::new(),
    }
}

/// Appends `m` to `out`, merging it into the last message when both have the same role (the
/// API would merge them; merged here, the result is checked as the API will read it).
fn push_message(out: &mut Vec<Value>, m: Value) {
    if let Some(last) = out.last_mut()
        && matches!(role(last), Some("user" | "assistant"))
        && role(last) == role(&m)
        && let Some(last) = last.as_object_mut()
    {
        let mut merged = into_blocks(last.remove("content"));
        merged.extend(into_blocks(m.get("content").cloned()));
        last.insert("content".into(), Value::Array(merged));
        return;
    }
    out.push(m);
}

/// Why a rewritten body was not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub Vec<String>);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the rewritten request breaks the API's rules: {}",
            self.0.join("; ")
        )
    }
}

impl std::error::Error for Invalid {}

/// `body` with its history replaced by `projection` (the projection's `messages`), cut as
/// `plan` says. The result is checked against the rules the API enforces before it is returned.
pub fn splice(body: &Value, plan: &Plan, projection: &[Value]) -> Result<Value, Invalid> {
    let (Some(fields), Some(messages)) = (
        body.as_object(),
        body.get("messages").and_then(Value::as_array),
    ) else {
        return Err(Invalid(vec!["no messages".into()]));
    };
    let mut new: Vec<Value> = Vec::with_capacity(
        projection.len() + plan.opening_instructions.len() + plan.instructions.len() + 3,
    );
    let mut head = plan.head.clone();
    let opening = projection.first().and_then(|m| {
        let (m, breakpoint) = without_goal(m, plan);
        // The goal block ended the stable part; the opening messages, as stable, end it now.
        if let (Some(cc), Some(last)) = (breakpoint, head.last_mut()) {
            mark_last_block(last, cc);
        }
        m
    });
    // As they came, each one: Claude Code derives its billing check from the first.
    new.extend(head);
    for m in plan.tool_loads.iter().cloned() {
        push_message(&mut new, m);
    }
    // Where the later prompts are said (the projection's opening), and as stable as they are.
    if !plan.kept_blocks.is_empty() {
        let kept = serde_json::json!({ "role": "user", "content": plan.kept_blocks });
        push_message(&mut new, kept);
    }
    for m in opening
        .into_iter()
        .chain(projection.iter().skip(1).cloned())
    {
        push_message(&mut new, m);
    }
    // Where they stood: after the user's messages that open the request, before the first
    // answer (so between a user message and an assistant one, as Claude Code sends them).
    let first_call = new
        .iter()
        .skip(1)
        .position(|m| role(m) == Some("assistant"))
        .map_or(new.len(), |i| i + 1);
    new.splice(
        first_call..first_call,
        plan.opening_instructions.iter().cloned(),
    );
    for m in plan.instructions.iter().chain(&messages[plan.tail_start..]) {
        push_message(&mut new, m.clone());
    }
    // Every field but the history as it came; the history itself is not copied only to be
    // replaced.
    let mut out: serde_json::Map<String, Value> = fields
        .iter()
        .filter(|(k, _)| k.as_str() != "messages")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.insert("messages".into(), Value::Array(new));
    let out = Value::Object(out);
    check(&out)?;
    Ok(out)
}

/// The projection's opening message without what the head already says: its goal block
/// becomes the prompts after the first, or goes; a message left empty goes too. Also the
/// breakpoint of a goal block that went.
fn without_goal(m: &Value, plan: &Plan) -> (Option<Value>, Option<Value>) {
    let mut m = m.clone();
    if plan.compacted {
        return (Some(m), None);
    }
    let Some(Value::Array(blocks)) = m.get_mut("content") else {
        return (Some(m), None);
    };
    let goal = plan.goal.trim();
    let mut dropped = None;
    if let Some(i) = blocks.iter().position(|b| {
        b.get("type").and_then(Value::as_str) == Some("text")
            && b.get("text").and_then(Value::as_str).map(str::trim) == Some(goal)
    }) {
        match &plan.later_prompts {
            Some(later) => blocks[i]["text"] = Value::String(later.clone()),
            None => dropped = blocks.remove(i).get("cache_control").cloned(),
        }
    }
    let m = (!blocks.is_empty()).then_some(m);
    (m, dropped)
}

/// Puts `cache_control` on the last block of message `m` (a string content becomes one text
/// block, the same text).
fn mark_last_block(m: &mut Value, cache_control: Value) {
    let Some(o) = m.as_object_mut() else { return };
    let mut blocks = into_blocks(o.remove("content"));
    if let Some(last) = blocks.last_mut().and_then(Value::as_object_mut) {
        last.insert("cache_control".into(), cache_control);
    }
    o.insert("content".into(), Value::Array(blocks));
}

/// The API's rules on the messages (`projection::validate`). Two things are Claude Code's and
/// not ours to judge: its server tools (web search) have no input schema, and its
/// `role: "system"` messages, which current models take inside `messages`, are set aside
/// before the check.
fn check(body: &Value) -> Result<(), Invalid> {
    let mut seen = body.clone();
    if let Some(Value::Array(m)) = seen.get_mut("messages") {
        m.retain(|m| role(m) != Some("system"));
    }
    match validate::anthropic(&seen) {
        Ok(()) => Ok(()),
        Err(v) => {
            let real: Vec<String> = v
                .iter()
                .filter(|v| !v.at.starts_with("/tools/"))
                .map(ToString::to_string)
                .collect();
            if real.is_empty() {
                Ok(())
            } else {
                Err(Invalid(real))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const PROMPT: &str = "Fix the date parser";

    fn read_tool() -> Value {
        json!({"name": "Read", "description": "Reads a file", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}})
    }

    /// A Claude Code request after `turns` tool calls.
    fn request(turns: usize) -> Value {
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

    fn projection() -> Vec<Value> {
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

    /// An image or a PDF a Read returned is in no file the projection can show: the last copy
    /// of each file is kept, named, where the later prompts' media are.
    #[test]
    fn images_tool_calls_returned_are_kept_the_last_of_each_file() {
        let mut body = request(5);
        let png = |data: &str| json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}});
        let pdf = json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}});
        for (call, path, block) in [
            (0, "/p/shot.png", png("c2hvdDE=")),
            (1, "/p/spec.pdf", pdf.clone()),
            (2, "/p/shot.png", png("c2hvdDI=")),
            (4, "/p/tail.png", png("dGFpbA==")),
        ] {
            let m = &mut body["messages"];
            m[1 + 2 * call]["content"][1] = json!({"type": "tool_use", "id": format!("toolu_{call}"),
                "name": "Read", "input": {"file_path": path}});
            m[2 + 2 * call]["content"][0]["content"] = json!([block]);
        }
        let first = plan(&body, Some(PROMPT), false).expect("eligible");
        let labels: Vec<&str> = first
            .kept_blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect();
        assert_eq!(labels.len(), 2, "{:?}", first.kept_blocks);
        assert!(labels[0].starts_with("/p/spec.pdf") && labels[1].starts_with("/p/shot.png"));
        let out = splice(&body, &first, &projection()).expect("valid");
        let text = out["messages"].to_string();
        // The first read of shot.png is gone, the second kept once; the last turn's as it came.
        for (data, n) in [
            ("c2hvdDE=", 0),
            ("c2hvdDI=", 1),
            ("JVBERi0=", 1),
            ("dGFpbA==", 1),
        ] {
            assert_eq!(text.matches(data).count(), n, "{data}: {text}");
        }
        // Read again in the last turn, which goes as it came: that copy alone.
        body["messages"][9]["content"][1]["input"]["file_path"] = json!("/p/shot.png");
        body["messages"][10]["content"][0]["content"] = json!([png("c2hvdDM=")]);
        let again = plan(&body, Some(PROMPT), false).expect("eligible");
        let out = splice(&body, &again, &projection()).expect("valid");
        let text = out["messages"].to_string();
        for (data, n) in [("c2hvdDI=", 0), ("c2hvdDM=", 1), ("JVBERi0=", 1)] {
            assert_eq!(text.matches(data).count(), n, "{data}: {text}");
        }
        // Named in the last turn by a call that returned no media (a NotebookEdit of the
        // notebook whose figure a Read returned): the kept copy stays.
        body["messages"][9]["content"][1] = json!({"type": "tool_use", "id": "toolu_4",
            "name": "NotebookEdit", "input": {"notebook_path": "/p/shot.png", "new_source": "x"}});
        body["messages"][10]["content"][0]["content"] = json!("Updated cell");
        body["tools"]
            .as_array_mut()
            .expect("tools")
            .push(json!({"name": "NotebookEdit", "input_schema": {"type": "object"}}));
        let edited = plan(&body, Some(PROMPT), false).expect("eligible");
        let out = splice(&body, &edited, &projection()).expect("valid");
        let text = out["messages"].to_string();
        for (data, n) in [("c2hvdDI=", 1), ("c2hvdDM=", 0), ("JVBERi0=", 1)] {
            assert_eq!(text.matches(data).count(), n, "{data}: {text}");
        }
        // No more than READ_MEDIA_KEPT files.
        let mut body = request(7);
        for call in 0..6 {
            let m = &mut body["messages"];
            m[1 + 2 * call]["content"][1] = json!({"type": "tool_use", "id": format!("toolu_{call}"),
                "name": "Read", "input": {"file_path": format!("/p/{call}.png")}});
            m[2 + 2 * call]["content"][0]["content"] = json!([png(&format!("aW1n{call}"))]);
        }
        let many = plan(&body, Some(PROMPT), false).expect("eligible");
        let kept: Vec<String> = many
            .kept_blocks
            .iter()
            .filter_map(|b| b["source"]["data"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(kept, ["aW1n2", "aW1n3", "aW1n4", "aW1n5"]);
    }

    /// A screenshot the user pasted into a later prompt is part of the request the history
    /// held: it is kept, once, where the later prompts are said.
    #[test]
    fn images_of_later_prompts_are_kept_once() {
        let mut body = request(5);
        let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}});
        let pdf = json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}});
        for (at, extra) in [
            (4, vec![image.clone(), pdf.clone()]),
            (6, vec![image.clone()]),
        ] {
            let blocks = body["messages"][at]["content"]
                .as_array_mut()
                .expect("blocks");
            blocks.extend(extra);
            blocks.push(json!({"type": "text", "text": "[Image #1] this is what I see"}));
        }
        // One in the last turn too: it goes with the turn, as it came.
        let tail_image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "R0lGODlh"}});
        body["messages"][10]["content"]
            .as_array_mut()
            .expect("blocks")
            .push(tail_image.clone());
        let plan = plan(&body, Some(PROMPT), false).expect("eligible");
        assert_eq!(plan.kept_blocks, [image.clone(), pdf.clone()]);
        let out = splice(&body, &plan, &projection()).expect("valid");
        let text = out["messages"].to_string();
        for (block, n) in [(&image, 1), (&pdf, 1), (&tail_image, 1)] {
            assert_eq!(
                text.matches(&block.to_string()).count(),
                n,
                "{block}: {text}"
            );
        }
        let m = out["messages"].as_array().expect("messages");
        let at = m
            .iter()
            .position(|m| m["content"].to_string().contains("iVBORw0KGgo="))
            .expect("kept");
        assert_eq!(m[at]["role"], "user");
        assert!(at < m.len() - 2, "before the last turn");
        // Merged into the first message, after its blocks, as the later prompts are.
        let head = without_breakpoints(&body["messages"][0]);
        let n = head["content"].as_array().map_or(0, Vec::len);
        assert_eq!(
            m[0]["content"].as_array().map(|b| &b[..n]),
            head["content"].as_array().map(Vec::as_slice),
            "the first message's own blocks as they came, first"
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
        let plain = super::plan(&request(4), Some(PROMPT), false).expect("eligible");
        assert!(plain.tool_loads.is_empty());
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
    fn compacted_request(turns: usize) -> Value {
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

    fn plan_of(body: &Value) -> Plan {
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

    #[test]
    fn the_gutter_follows_claude_codes_own_reads() {
        let mut body = request(2);
        assert_eq!(read_gutter(&body), None, "no Read yet");
        let m = body["messages"].as_array_mut().expect("messages");
        m.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": "/p/a.py"}}]}));
        m.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "r1", "content": "     1\u{2192}import os\n     2\u{2192}"}]}));
        assert_eq!(read_gutter(&body), Some(LineNumbers::Arrow));
        let m = body["messages"].as_array_mut().expect("messages");
        m.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": "r2", "name": "Read", "input": {"file_path": "/p/b.py"}}]}));
        m.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "r2", "content": [{"type": "text", "text": "12\tx = 1"}]}]}));
        assert_eq!(
            read_gutter(&body),
            Some(LineNumbers::Tab),
            "the newest Read decides"
        );
        assert_eq!(
            LineNumbers::of_read_result("a.py"),
            None,
            "a Bash result is no Read"
        );
        assert_eq!(LineNumbers::of_read_result("  12\tx"), None);
        assert_eq!(LineNumbers::of_read_result("Error: 12"), None);
    }

    #[test]
    fn a_spliced_body_that_breaks_a_rule_is_refused() {
        let body = request(3);
        let plan = plan(&body, Some(PROMPT), false).expect("eligible");
        // A projection whose call has no result.
        let broken = vec![
            json!({"role": "user", "content": PROMPT}),
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "wfs_1", "name": "Read", "input": {}}]}),
        ];
        let err = splice(&body, &plan, &broken).expect_err("invalid");
        assert!(err.to_string().contains("MissingResult"), "{err}");
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
