//! What `worldfs proxy` sends instead of Codex's history: the Responses API side.
//!
//! Codex sends each model call as `POST .../responses` with the whole conversation in `input`
//! (stateless: `store: false`; vendor-docs/codex.md, section 2). A call is rewritten only when
//! it is the main conversation of the session the mount knows: it defines Codex's shell tool
//! (`exec_command`, or `shell` in older versions), and one of its user messages is the goal's
//! first prompt, as `worldfs hook` heard it (`UserPromptSubmit`). A subagent (its task is its
//! prompt), a side request without that tool, or a conversation of another session goes
//! upstream untouched, and so does one holding an item of a kind not known here: what it is
//! for cannot be told, so it is not dropped.
//!
//! The rewritten `input` is, in order:
//! 1. every item up to the first prompt's message, and that message, as they came: Codex's
//!    developer messages (its instructions, the skills), its environment context, the
//!    project's AGENTS.md. They are the same at every call, so a prompt cache keeps them; and
//!    the projection leaves out the AGENTS.md they show while it is as they show it. A
//!    session begun with a thread goal (`/goal OBJECTIVE`) has no prompt's message: its
//!    objective comes as an output of no call, `goal_objective` ([`GOAL_OBJECTIVE`]), which
//!    stands for it;
//! 2. the last compaction OpenAI's servers made of the conversation, as it came (with the
//!    `openai` provider Codex compacts by sending the conversation with a `compaction_trigger`
//!    item last, and the answer's one `compaction` item, encrypted, stands for the history
//!    before it from then on); then the developer messages of the history replaced (Codex
//!    says there when permissions or the model change), and its updates of the environment
//!    context (the sandbox, the date, when a session is resumed with other settings), and the
//!    skills the user named in a prompt (`$house-style`: Codex sends the `SKILL.md` in a user
//!    message after the prompt's, which the model follows from then on), once each, in
//!    order, and the last of each kind of what Codex tells the model of its thread
//!    goal (`<codex_internal_context source="goal">`, repeated at every turn a goal runs,
//!    about 6 KB, with the tokens used so far: only the last is still true);
//! 3. what of the history replaced no file holds, as one user message: the summary Codex
//!    made when it compacted the conversation (with a provider of one's own it compacts by
//!    asking the model, and puts the answer in a user message after the prompts), what the
//!    model read of the skills it opened itself and of a plan approved for a fresh thread
//!    ([`instruction_reads`]), the images the user
//!    attached to later prompts (a screenshot of the bug), once each, the last images
//!    `view_image` returned, each after a line naming it, the last reports of subagents
//!    Codex told the conversation of (`<subagent_notification>`), the last commands the user
//!    ran at Codex's prompt (`!pytest`: `<user_shell_command>`), and the last plan the model
//!    proposed in Plan mode (`<proposed_plan>`, which "Implement the plan." refers to). The
//!    projection's text cannot show them, and without them they would leave the model's view
//!    at the next call;
//! 4. the projection, as one user message (the `text` format): the prompts after the first,
//!    then the files and command outputs as they are now, then the agent's state, and the last
//!    step the mount knows when the last turn does not hold it (Codex runs `apply_patch` itself,
//!    and the hook records it only at the turn's next event, after the model call that
//!    follows it). The model's own tools cannot be named for synthesized calls
//!    here, so the files are shown as text;
//! 5. the real last turn, verbatim: the model's last output items (its reasoning, whose
//!    encrypted content the API requires back as it was sent, its message, its calls) and
//!    everything after them (the calls' outputs, a new prompt). When those calls poll a
//!    command that outran Codex's wait (`write_stdin`), with nothing but polls since it began,
//!    the turn starts where the command did: what it printed before the last poll is in no
//!    hook's record until it ends (and then as the step the turn shows), so it stays as the
//!    model read it, chunk by chunk.
//!
//! Every other field of the body (`instructions`, `tools`, `prompt_cache_key`, `reasoning`...)
//! is left as it came.

use std::collections::{HashMap, HashSet};

use serde_json::{Map, Value, json};

use super::rewrite::{Invalid, Skip, last_views, result_text};
use crate::claude_hook::{LATER_PROMPT, codex};

/// Codex's shell tool, by the names it has had: the projection's files are what it reads.
const SHELL_TOOLS: [&str; 3] = ["exec_command", "shell", "shell_command"];

/// Item types the model outputs. A turn's output is a run of these; what follows it (the
/// calls' outputs, a prompt) is input.
const OUTPUT_ITEMS: [&str; 12] = [
    "reasoning",
    "function_call",
    "custom_tool_call",
    "local_shell_call",
    "web_search_call",
    "file_search_call",
    "computer_call",
    "code_interpreter_call",
    "image_generation_call",
    "mcp_call",
    "mcp_list_tools",
    "tool_search_call",
];

/// Item types the history replaced may hold: what they said, the projection says (the files,
/// the outputs it tracks, the results no file holds, which the hook keeps).
const REPLACEABLE: [&str; 9] = [
    "message",
    "reasoning",
    "function_call",
    "function_call_output",
    "custom_tool_call",
    "custom_tool_call_output",
    "local_shell_call",
    "local_shell_call_output",
    "web_search_call",
];

/// Codex's tool that polls a command still running (and writes to its input), naming it by the
/// `session_id` its start answered with ([`RUNNING`]).
const POLL_TOOL: &str = "write_stdin";

/// How Codex tells the model that a command outran its wait, before the command's session id.
const RUNNING: &str = "Process running with session ID ";

/// How Codex opens the user message that tells the model its environment (working directory,
/// date, sandbox): at the head, and again in the history when a resumed session runs with
/// other settings (0.171: the date, the time zone and the sandbox then).
const ENVIRONMENT_CONTEXT: &str = "<environment_context>";

/// How Codex opens the user message that gives the model a skill the user named in a prompt
/// (`$house-style`): its name, its path, then its `SKILL.md` whole.
const SKILL: &str = "<skill>";

/// Whether `item` is a developer message, one of Codex's [`ENVIRONMENT_CONTEXT`] messages, or
/// a skill the user named ([`SKILL`]): what they say holds until another says otherwise, and
/// nothing else in the request says it.
fn is_instruction(item: &Value) -> bool {
    kind(item) == "message"
        && (role(item) == Some("developer")
            || (is_user_message(item)
                && texts(item).first().is_some_and(|t| {
                    let t = t.trim_start();
                    t.starts_with(ENVIRONMENT_CONTEXT) || t.starts_with(SKILL)
                })))
}

/// How Codex opens a user message that tells the model what it keeps of the thread, before
/// the kind (`source="goal"`: go on with the thread's goal; `source="user_goal"`: the user set
/// it).
const INTERNAL_CONTEXT: &str = "<codex_internal_context source=\"";

/// The kind of one of Codex's [`INTERNAL_CONTEXT`] messages. Each kind says where the thread
/// stands now, so a later one of a kind replaces an earlier one.
fn internal_context(item: &Value) -> Option<&str> {
    if !is_user_message(item) {
        return None;
    }
    let rest = texts(item)
        .first()?
        .trim_start()
        .strip_prefix(INTERNAL_CONTEXT)?;
    rest.split_once('"').map(|(source, _)| source)
}

/// The name of the output, answering no call, in which Codex gives the model its thread
/// goal's objective: after the head, in place of a prompt, when a session begins with a goal.
const GOAL_OBJECTIVE: &str = "goal_objective";

/// Whether `item` gives the thread goal's objective as `objective`.
fn is_objective(item: &Value, objective: &str) -> bool {
    kind(item) == "function_call_output"
        && item.get("name").and_then(Value::as_str) == Some(GOAL_OBJECTIVE)
        && item
            .get("output")
            .and_then(Value::as_str)
            .is_some_and(|o| o.trim() == objective)
}

/// Item types of the compaction OpenAI's servers make of a conversation: opaque (encrypted), read
/// by the model alone, so kept, the last one ([`Plan::compaction`]). `compaction_summary` is the
/// name Codex took them by before.
const COMPACTIONS: [&str; 2] = ["compaction", "compaction_summary"];

/// How a Codex call eligible for rewriting is cut.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Items kept as they came before the projection: up to the first prompt's message.
    pub head_len: usize,
    /// Index of the first item of the real last turn ([`last_turn_start`]).
    pub tail_start: usize,
    /// The call ids of the last turn's calls: the mount's last step is shown unless it is one
    /// of them (Codex's `apply_patch` is not yet a step when the call after it is made, so the
    /// step before it is not in the turn). A polled command's start is one: its step, recorded
    /// when it ended, is the turn's.
    pub tail_calls: Vec<String>,
    /// The last compaction of the history replaced ([`COMPACTIONS`]): what the model wrote
    /// down of the conversation before it, which nothing else holds.
    pub compaction: Option<Value>,
    /// The developer messages and environment updates of the history replaced
    /// ([`is_instruction`]), once each, and the last of each kind of [`internal_context`], in
    /// order.
    pub instructions: Vec<Value>,
    /// Content parts of the history replaced that no file holds ([`instruction_reads`],
    /// [`prompt_media`], [`viewed_media`], [`subagent_reports`], [`shell_runs`],
    /// [`proposed_plan`]).
    pub kept: Vec<Value>,
    /// The goal the projection opens with, and what of it the head does not already say.
    pub goal: String,
    pub later_prompts: Option<String>,
}

fn kind(item: &Value) -> &str {
    item.get("type")
        .and_then(Value::as_str)
        .unwrap_or("message")
}

fn role(item: &Value) -> Option<&str> {
    item.get("role").and_then(Value::as_str)
}

/// Whether `item` is a message in the user's role (a prompt, or what Codex says as the user).
fn is_user_message(item: &Value) -> bool {
    kind(item) == "message" && role(item) == Some("user")
}

/// Whether the model produced `item` (an assistant message, a call, its reasoning).
fn is_output(item: &Value) -> bool {
    let k = kind(item);
    OUTPUT_ITEMS.contains(&k) || (k == "message" && role(item) == Some("assistant"))
}

/// The texts of a message's content: a string, or its text parts.
fn texts(item: &Value) -> Vec<&str> {
    match item.get("content") {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(parts)) => parts
            .iter()
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether the request defines Codex's shell tool: the main conversation, or a subagent's.
pub fn looks_main(body: &Value) -> bool {
    body.get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| {
            tools.iter().any(|t| {
                t.get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| SHELL_TOOLS.contains(&n))
            })
        })
}

/// How `body` is cut, or why it goes as it came. `goal`: the session's, as the hook recorded
/// it (its first prompt, then each later one after [`LATER_PROMPT`]).
pub fn plan(body: &Value, goal: Option<&str>) -> Result<Plan, Skip> {
    let items = body
        .get("input")
        .and_then(Value::as_array)
        .ok_or(Skip::NoMessages)?;
    if !looks_main(body) {
        return Err(Skip::NoReadTool);
    }
    let goal = goal.filter(|g| !g.trim().is_empty()).ok_or(Skip::NoGoal)?;
    let (prompt, later) = match goal.split_once(LATER_PROMPT) {
        Some((first, rest)) => (first, Some(rest)),
        None => (goal, None),
    };
    let prompt = prompt.trim();
    // The prompt's message is the first user message saying it (or the objective of the
    // thread goal that began the session); before it, only what Codex puts at the head of
    // every conversation (no model output).
    let prompt_at = items
        .iter()
        .position(|it| {
            (is_user_message(it) && texts(it).iter().any(|t| t.trim() == prompt))
                || is_objective(it, prompt)
        })
        .filter(|&p| !items[..p].iter().any(is_output))
        .ok_or(Skip::OtherConversation)?;
    let head_len = prompt_at + 1;
    let tail_start = last_turn_start(items)?;
    if tail_start <= head_len {
        return Err(Skip::TooShort);
    }
    let replaced = &items[head_len..tail_start];
    if replaced.iter().any(|it| {
        !(REPLACEABLE.contains(&kind(it)) || COMPACTIONS.contains(&kind(it)))
            || role(it) == Some("system")
    }) {
        return Err(Skip::UnknownItems);
    }
    // Each compaction stood for all before it, an earlier one too.
    let compaction = replaced
        .iter()
        .rfind(|it| COMPACTIONS.contains(&kind(it)))
        .cloned();
    let mut seen = HashSet::new();
    let last_of_kind: HashMap<&str, usize> = replaced
        .iter()
        .enumerate()
        .filter_map(|(i, it)| Some((internal_context(it)?, i)))
        .collect();
    let instructions = replaced
        .iter()
        .enumerate()
        .filter(|&(i, it)| match internal_context(it) {
            Some(k) => last_of_kind.get(k) == Some(&i),
            None => is_instruction(it),
        })
        .map(|(_, it)| it)
        // Each message has an id of its own: the same words twice are one instruction.
        .filter(|it| seen.insert(it.get("content").map(Value::to_string)))
        .cloned()
        .collect();
    let mut kept = compaction_summary(replaced);
    // A compaction leaves out prompts the goal still has; without one, a later prompt the
    // input holds nowhere was taken back (Codex's Esc Esc, "Conversation reverted to this
    // point"), and is not said again.
    let whole = kept.is_empty() && !items.iter().any(|it| COMPACTIONS.contains(&kind(it)));
    let later = later
        .map(|l| match whole {
            true => super::rewrite::unretracted(l, items),
            false => l.to_owned(),
        })
        .filter(|l| !l.trim().is_empty());
    if let Some(cwd) = working_directory(items) {
        kept.extend(instruction_reads(replaced, cwd));
    }
    kept.extend(prompt_media(replaced));
    kept.extend(viewed_media(replaced, &items[tail_start..]));
    kept.extend(subagent_reports(replaced));
    kept.extend(shell_runs(replaced));
    kept.extend(proposed_plan(replaced));
    let tail_calls = items[tail_start..]
        .iter()
        .filter(|it| is_output(it))
        .filter_map(|it| it.get("call_id").and_then(Value::as_str))
        .map(str::to_owned)
        .collect();
    Ok(Plan {
        head_len,
        tail_start,
        tail_calls,
        compaction,
        instructions,
        kept,
        goal: goal.to_owned(),
        later_prompts: later.map(|l| format!("{}{l}", LATER_PROMPT.trim_start())),
    })
}

/// Where the real last turn starts: at the run of the model's last output items (before the
/// trailing inputs), or earlier while that run polls a command ([`POLL_TOOL`]): at the run
/// holding the call that started it, when the model has done nothing but poll since. A
/// command polled now and then among other work (a server left running) stays where it was:
/// its start may be a hundred turns back, and the history since then is the projection's.
fn last_turn_start(items: &[Value]) -> Result<usize, Skip> {
    let is_call = |it: &&Value| kind(it).ends_with("_call");
    let is_poll =
        |it: &Value| kind(it) == "function_call" && it.get("name") == Some(&json!(POLL_TOOL));
    let run_start = |end: usize| {
        items[..end]
            .iter()
            .rposition(|it| !is_output(it))
            .map_or(0, |i| i + 1)
    };
    let last_output = items.iter().rposition(is_output).ok_or(Skip::TooShort)?;
    let mut start = run_start(last_output + 1);
    // The runs taken in may poll other commands, started earlier still. Each move goes back,
    // so this ends.
    loop {
        let began = items[start..]
            .iter()
            .enumerate()
            .filter(|(_, it)| is_poll(it))
            .filter_map(|(i, it)| command_start(&items[..start + i], &polled_session(it)?))
            .filter(|&b| b < start && items[b + 1..start].iter().filter(is_call).all(is_poll))
            .min();
        match began {
            Some(b) => start = run_start(b),
            None => return Ok(start),
        }
    }
}

/// The session id a [`POLL_TOOL`] call names, as Codex prints it.
fn polled_session(call: &Value) -> Option<String> {
    let args: Value = serde_json::from_str(call.get("arguments")?.as_str()?).ok()?;
    match args.get("session_id")? {
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

/// Index of the call, not itself a poll, whose output says it left `session` running: the
/// nearest in `items` (Codex may give a later command the id of one that ended), and none
/// across a compaction (the history before it is not in the call).
fn command_start(items: &[Value], session: &str) -> Option<usize> {
    let said = format!("{RUNNING}{session}");
    let since = items
        .iter()
        .rposition(|it| COMPACTIONS.contains(&kind(it)))
        .map_or(0, |i| i + 1);
    let items = &items[since..];
    items.iter().enumerate().rev().find_map(|(i, it)| {
        if kind(it) != "function_call_output"
            || !result_text(it.get("output"))
                .lines()
                .any(|l| l.trim() == said)
        {
            return None;
        }
        let id = it.get("call_id")?;
        let call = items[..i].iter().rposition(|c| {
            kind(c) == "function_call"
                && c.get("call_id") == Some(id)
                && c.get("name") != Some(&json!(POLL_TOOL))
        })?;
        Some(since + call)
    })
}

/// Whether a content part is an image or a file (what the model sees, and no text says).
fn is_media(part: &Value) -> bool {
    matches!(kind(part), "input_image" | "input_file")
}

/// The images (and files) the user attached to the prompts of `replaced`, once each, each with
/// the tags Codex wraps it in (`<image name=[Image #1] path="...">`, `</image>`), which is how
/// the prompt's words refer to it. The goal keeps what the user typed; the picture is as much
/// the request, and no file the projection shows holds it.
fn prompt_media(replaced: &[Value]) -> Vec<Value> {
    let tag = |p: Option<&Value>, pred: &dyn Fn(&str) -> bool| {
        p.filter(|p| kind(p) == "input_text")
            .and_then(|p| p.get("text").and_then(Value::as_str))
            .is_some_and(pred)
    };
    let mut seen = HashSet::new();
    let mut kept = Vec::new();
    for item in replaced.iter().filter(|it| is_user_message(it)) {
        let Some(parts) = item.get("content").and_then(Value::as_array) else {
            continue;
        };
        for (i, part) in parts.iter().enumerate() {
            if !is_media(part) || !seen.insert(part.to_string()) {
                continue;
            }
            let before = i.checked_sub(1).map(|b| &parts[b]);
            let after = parts.get(i + 1);
            if tag(before, &|t| t.starts_with("<image")) {
                kept.extend(before.cloned());
            }
            kept.push(part.clone());
            if tag(after, &|t| t.trim() == "</image>") {
                kept.extend(after.cloned());
            }
        }
    }
    kept
}

/// The images that calls of `replaced` returned (`view_image`'s output is a list of
/// `input_image` parts), each file's after a line naming it: only the last of each file (by
/// the call's `path` argument), of the last four files, and not of a file the
/// last turn (`tail`, sent as it came) views again. The world leaves binary files out, so the
/// projection cannot show them; an agent looks at an image again once it has changed it.
fn viewed_media(replaced: &[Value], tail: &[Value]) -> Vec<Value> {
    /// Each call's id and what it names: its `path` argument, else its id.
    fn names(items: &[Value]) -> std::collections::HashMap<&str, String> {
        items
            .iter()
            .filter(|it| is_output(it))
            .filter_map(|it| {
                let id = it.get("call_id")?.as_str()?;
                let path = it
                    .get("arguments")
                    .and_then(Value::as_str)
                    .and_then(|a| serde_json::from_str::<Value>(a).ok())
                    .and_then(|a| a.get("path")?.as_str().map(str::to_owned));
                Some((id, path.unwrap_or_else(|| id.to_owned())))
            })
            .collect()
    }
    /// Each call output's id and its media parts, for those that have some.
    fn media(items: &[Value]) -> impl Iterator<Item = (&str, Vec<Value>)> {
        items
            .iter()
            .filter(|it| kind(it).ends_with("_call_output"))
            .filter_map(|it| {
                let parts: Vec<Value> = it
                    .get("output")?
                    .as_array()?
                    .iter()
                    .filter(|p| is_media(p))
                    .cloned()
                    .collect();
                let id = it.get("call_id")?.as_str()?;
                (!parts.is_empty()).then_some((id, parts))
            })
    }
    let name_of = names(replaced);
    let tail_names = names(tail);
    let again: HashSet<&str> = media(tail)
        .filter_map(|(id, _)| tail_names.get(id).map(String::as_str))
        .collect();
    let views = media(replaced).map(|(id, parts)| {
        let name = name_of.get(id).cloned().unwrap_or_else(|| id.to_owned());
        (name, parts)
    });
    last_views(views, &again, "input_text")
}

/// How Codex opens the message holding its summary of a conversation it compacted (0.171, its
/// `summary_prefix` template), which then stands for the history before it.
const COMPACTION_SUMMARY: &str = "Another language model started to solve this problem";

/// The texts of the last message of `replaced` that holds Codex's summary of the conversation
/// it compacted: the history it stands for is gone from the request, and what the summary
/// says of decisions and progress no file holds.
fn compaction_summary(replaced: &[Value]) -> Vec<Value> {
    replaced
        .iter()
        .rev()
        .filter(|it| is_user_message(it))
        .find(|it| {
            texts(it)
                .first()
                .is_some_and(|t| t.trim_start().starts_with(COMPACTION_SUMMARY))
        })
        .map(|it| {
            texts(it)
                .into_iter()
                .map(|t| json!({"type": "input_text", "text": t}))
                .collect()
        })
        .unwrap_or_default()
}

/// How Codex opens the message that tells a conversation one of its subagents finished (0.171):
/// the agent and its report, as JSON, between these tags.
const SUBAGENT_NOTIFICATION: &str = "<subagent_notification>";

/// At most this many subagent reports are kept, the last ones.
const SUBAGENT_REPORTS_KEPT: usize = 4;

/// The texts of the last [`SUBAGENT_REPORTS_KEPT`] messages of `replaced` in which Codex told
/// the conversation that a subagent finished, with its report: no hook hears them (the
/// subagent's result reaches the hook only when the model waited for it with `wait_agent`),
/// and the report is the subagent's whole work.
fn subagent_reports(replaced: &[Value]) -> Vec<Value> {
    last_user_texts(replaced, SUBAGENT_NOTIFICATION, SUBAGENT_REPORTS_KEPT)
}

/// How Codex (0.171) tells the model of a command the user ran at its prompt (`!pytest`): a
/// user message of its own, the command and its result (exit code, duration, output) between
/// these tags, sent with the next prompt. No hook hears of it.
const USER_SHELL_COMMAND: &str = "<user_shell_command>";

/// At most this many of the user's commands are kept, the last ones: a session where the user
/// runs one now and then would otherwise carry them all.
const SHELL_RUNS_KEPT: usize = 4;

/// The last [`SHELL_RUNS_KEPT`] commands the user ran in `replaced` ([`USER_SHELL_COMMAND`]),
/// with their results. The user ran them to show the model something (a failing test, a log):
/// with the history they would leave the model's view one call later.
fn shell_runs(replaced: &[Value]) -> Vec<Value> {
    last_user_texts(replaced, USER_SHELL_COMMAND, SHELL_RUNS_KEPT)
}

/// The texts of `replaced`'s user messages that open with `opening`, as text parts: the last
/// `n`, once each, in order.
fn last_user_texts(replaced: &[Value], opening: &str, n: usize) -> Vec<Value> {
    let mut seen = HashSet::new();
    let mut found: Vec<&str> = replaced
        .iter()
        .filter(|it| is_user_message(it))
        .flat_map(texts)
        .filter(|t| t.trim_start().starts_with(opening))
        .rev()
        .filter(|t| seen.insert(*t))
        .take(n)
        .collect();
    found.reverse();
    found
        .into_iter()
        .map(|t| json!({"type": "input_text", "text": t}))
        .collect()
}

/// How the model wraps the plan it proposes in Codex's Plan mode (0.171: its instructions say
/// so, and the UI then asks the user "Implement this plan?").
const PLAN_OPEN: &str = "<proposed_plan>";
const PLAN_CLOSE: &str = "</proposed_plan>";

/// The last plan the model proposed in Plan mode in `replaced`, as a text part. Choosing to
/// implement it sends the prompt "Implement the plan." and nothing else: the plan itself is in
/// the model's answer, in the history, which without this would leave the model's view one
/// call into the work it plans. A later plan replaces an earlier one whole (the model is told
/// so).
fn proposed_plan(replaced: &[Value]) -> Option<Value> {
    let plan = replaced
        .iter()
        .rev()
        .filter(|it| kind(it) == "message" && role(it) == Some("assistant"))
        .flat_map(|it| texts(it).into_iter().rev())
        .filter_map(|t| {
            let start = t.find(PLAN_OPEN)?;
            let end = t[start..].find(PLAN_CLOSE)? + start + PLAN_CLOSE.len();
            Some(&t[start..end])
        })
        .next()?;
    Some(json!({
        "type": "input_text",
        "text": format!("The plan you proposed last, in Plan mode:\n{plan}"),
    }))
}

/// Files of instructions kept ([`instruction_reads`]): the last read of each of the last few.
const INSTRUCTION_READS_KEPT: usize = 4;

/// The working directory Codex's first environment context names (`<cwd>...</cwd>`).
fn working_directory(items: &[Value]) -> Option<&str> {
    items
        .iter()
        .filter(|it| is_user_message(it))
        .flat_map(texts)
        .find_map(|t| {
            let start = t.find("<cwd>")? + "<cwd>".len();
            let end = t[start..].find("</cwd>")?;
            Some(t[start..start + end].trim())
        })
}

/// What the shell calls of the history replaced printed of the files of instructions the model
/// read ([`codex::instructions_read`]): the skills it opened itself (a `SKILL.md` outside the
/// project), and the plan the user approved for a fresh thread; as text parts, the last read
/// of each of the last [`INSTRUCTION_READS_KEPT`]. Codex tells the model to follow a skill it
/// opened and not to read it again, and to carry out the plan; no file of the world holds
/// them, and the hook keeps no output of such a read, so without this they would leave the
/// model's view after one call.
fn instruction_reads(replaced: &[Value], cwd: &str) -> Vec<Value> {
    let mut reads: Vec<(String, Value)> = Vec::new();
    for (i, call) in replaced.iter().enumerate() {
        let Some(command) = shell_command(call) else {
            continue;
        };
        let Some(path) = codex::instructions_read(&command, cwd) else {
            continue;
        };
        let id = call.get("call_id");
        let Some(output) = replaced[i + 1..]
            .iter()
            .find(|o| kind(o) == "function_call_output" && o.get("call_id") == id)
        else {
            continue;
        };
        let text = format!(
            "{path}, {}, as `{command}` showed it:\n{}",
            codex::instructions_kind(&path),
            result_text(output.get("output"))
        );
        reads.retain(|(p, _)| *p != path);
        reads.push((path, json!({"type": "input_text", "text": text})));
    }
    let skip = reads.len().saturating_sub(INSTRUCTION_READS_KEPT);
    reads.split_off(skip).into_iter().map(|(_, t)| t).collect()
}

/// The command of a call of Codex's shell tool ([`SHELL_TOOLS`], [`codex::call_command`]).
fn shell_command(call: &Value) -> Option<String> {
    let shell = kind(call) == "function_call"
        && call
            .get("name")
            .and_then(Value::as_str)
            .is_some_and(|n| SHELL_TOOLS.contains(&n));
    shell.then(|| codex::call_command(call)).flatten()
}

/// How Codex heads the project's AGENTS.md in the messages that open a conversation (0.171):
/// `# AGENTS.md instructions for DIR`, a blank line, then the file between these marks.
const AGENTS_HEADING: &str = "# AGENTS.md instructions for ";
const AGENTS_OPEN: &str = "\n\n<INSTRUCTIONS>\n";
const AGENTS_CLOSE: &str = "\n</INSTRUCTIONS>";

/// The instruction files the head shows whole (Codex read them through the mount at start):
/// each as `(path, hash of what it shows)`, for the projection's `request_shows`, so that it
/// does not show them a second time while they are as the head has them.
pub fn instruction_files(body: &Value, plan: &Plan) -> Vec<(String, String)> {
    let Some(items) = body.get("input").and_then(Value::as_array) else {
        return Vec::new();
    };
    items[..plan.head_len.min(items.len())]
        .iter()
        .flat_map(texts)
        .filter_map(|t| {
            let rest = t.strip_prefix(AGENTS_HEADING)?;
            let (dir, rest) = rest.split_once(AGENTS_OPEN)?;
            let content = rest.strip_suffix(AGENTS_CLOSE)?;
            // Several files (one per directory down to the working one) are one text: none
            // of them is known whole.
            (!content.contains("<INSTRUCTIONS>") && dir.starts_with('/')).then(|| {
                let path = format!("{}/AGENTS.md", dir.trim_end_matches('/'));
                (path, crate::projection::shown_hash(content.as_bytes()))
            })
        })
        .collect()
}

/// The projection's text without what the head already says: its goal section holds the
/// later prompts alone, or goes.
fn without_goal(projection: &str, plan: &Plan) -> String {
    let section = crate::projection::goal_piece(&plan.goal);
    let Some(at) = projection.find(&section) else {
        return projection.to_owned();
    };
    let rest = projection[at + section.len()..].trim_start_matches('\n');
    let mut out = projection[..at].to_owned();
    if let Some(later) = &plan.later_prompts {
        out.push_str(&crate::projection::goal_piece(later));
        out.push_str("\n\n");
    }
    out.push_str(rest);
    out
}

/// `body` with its history replaced by `projection` (the `text` format's body), cut as `plan`
/// says, and checked against the rules the API enforces.
pub fn splice(body: &Value, plan: &Plan, projection: &str) -> Result<Value, Invalid> {
    let (Some(fields), Some(items)) = (
        body.as_object(),
        body.get("input").and_then(Value::as_array),
    ) else {
        return Err(Invalid(vec!["no input".into()]));
    };
    let mut input: Vec<Value> =
        Vec::with_capacity(plan.head_len + 3 + items.len() - plan.tail_start);
    input.extend(items[..plan.head_len].iter().cloned());
    // Where Codex puts it: after the prompts, before what came since.
    input.extend(plan.compaction.iter().cloned());
    input.extend(plan.instructions.iter().cloned());
    // Before the projection: they change only when a new image comes, the projection at
    // every call, so a prompt cache keeps them with the head.
    if !plan.kept.is_empty() {
        input.push(json!({"type": "message", "role": "user", "content": plan.kept}));
    }
    let text = without_goal(projection, plan);
    if !text.trim().is_empty() {
        input.push(json!({
            "type": "message",
            "role": "user",
            "content": [{"type": "input_text", "text": text}],
        }));
    }
    input.extend(items[plan.tail_start..].iter().cloned());
    let mut out: Map<String, Value> = fields
        .iter()
        .filter(|(k, _)| k.as_str() != "input")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.insert("input".into(), Value::Array(input));
    let out = Value::Object(out);
    check(&out)?;
    Ok(out)
}

/// The rules of the API a splice could break: every call's output follows a call of its
/// `call_id`, and every call before the last turn's outputs has one.
fn check(body: &Value) -> Result<(), Invalid> {
    let Some(items) = body.get("input").and_then(Value::as_array) else {
        return Err(Invalid(vec!["no input".into()]));
    };
    let mut problems = Vec::new();
    let mut called = HashSet::new();
    let mut answered = HashSet::new();
    for (i, it) in items.iter().enumerate() {
        let id = it.get("call_id").and_then(Value::as_str);
        match kind(it) {
            "function_call" | "custom_tool_call" | "local_shell_call" => {
                if let Some(id) = id {
                    called.insert(id);
                }
            }
            k if k.ends_with("_call_output") => match id {
                Some(id) if called.contains(id) => {
                    answered.insert(id);
                }
                // Codex's own context ([`GOAL_OBJECTIVE`]) answers no call: a cut cannot have
                // orphaned it.
                None if it.get("name").is_some() => {}
                _ => problems.push(format!("/input/{i}: an output of no call before it")),
            },
            _ => {}
        }
    }
    // A call left unanswered may only be the request's last items (the model's calls, whose
    // outputs the client has not sent yet); Codex always sends them, so any is a cut gone
    // wrong.
    let open = called.difference(&answered).count();
    if open > 0 {
        problems.push(format!("{open} calls without their output"));
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Invalid(problems))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::rewrite::earlier_media_label;

    const PROMPT: &str = "Fix add() in calc.py";

    fn developer(text: &str) -> Value {
        json!({"type": "message", "role": "developer", "content": [{"type": "input_text", "text": text}]})
    }

    fn user(text: &str) -> Value {
        json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": text}]})
    }

    /// A Codex request after `turns` commands, each with its reasoning.
    fn request(turns: usize) -> Value {
        let mut input = vec![
            developer("You are a coding agent running in the Codex CLI."),
            user("<environment_context>\n  <cwd>/p</cwd>\n</environment_context>"),
            user(PROMPT),
        ];
        for i in 0..turns {
            input.push(
                json!({"type": "reasoning", "id": format!("rs_{i}"), "summary": [],
                              "encrypted_content": format!("gAAA{i}")}),
            );
            input.push(json!({"type": "function_call", "id": format!("fc_{i}"), "name": "exec_command",
                              "arguments": "{\"cmd\": \"cat calc.py\"}", "call_id": format!("call_{i}")}));
            input.push(
                json!({"type": "function_call_output", "call_id": format!("call_{i}"),
                              "output": "Process exited with code 0\nOutput:\ndef add(a, b):\n"}),
            );
        }
        json!({
            "model": "gpt-5-codex", "instructions": "", "stream": true, "store": false,
            "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}],
            "input": input,
            "prompt_cache_key": "s1",
        })
    }

    /// Everything `items` say, as one JSON text.
    fn said(items: &[Value]) -> String {
        Value::Array(items.to_vec()).to_string()
    }

    const PROJECTION: &str = "# Goal\n\nFix add() in calc.py\n\n## calc.py\n```\n1\tdef add(a, b):\n2\t    return a + b\n```";

    #[test]
    fn the_history_between_the_prompt_and_the_last_turn_is_the_projection() {
        let body = request(3);
        let plan = plan(&body, Some(PROMPT)).expect("plan");
        assert_eq!((plan.head_len, plan.tail_start), (3, 9));
        assert_eq!(plan.tail_calls, ["call_2"]);
        let out = splice(&body, &plan, PROJECTION).expect("splice");
        let input = out["input"].as_array().expect("input");
        assert_eq!(&input[..3], &body["input"].as_array().expect("input")[..3]);
        let text = input[3]["content"][0]["text"].as_str().expect("text");
        assert!(
            text.starts_with("## calc.py"),
            "the head says the goal: {text}"
        );
        assert!(text.contains("return a + b"));
        // The last turn as it came: its reasoning (encrypted), its call, its output.
        assert_eq!(&input[4..], &body["input"].as_array().expect("input")[9..]);
        assert_eq!(input.len(), 7);
        for k in [
            "model",
            "instructions",
            "tools",
            "prompt_cache_key",
            "store",
            "stream",
        ] {
            assert_eq!(out[k], body[k], "{k} as it came");
        }
    }

    #[test]
    fn later_prompts_and_mid_conversation_instructions_stay() {
        let mut body = request(2);
        let input = body["input"].as_array_mut().expect("input");
        input.insert(6, user("now the tests too"));
        let mut again = developer("Approval policy changed to never.");
        again["id"] = json!("msg_2");
        input.insert(6, again);
        input.insert(6, developer("Approval policy changed to never."));
        // A resumed session run read-only: Codex says so, and tells the environment again.
        let sandbox =
            "<environment_context>\n  <filesystem>read-only</filesystem>\n</environment_context>";
        input.insert(9, user(sandbox));
        input.extend([
            json!({"type": "reasoning", "id": "rs_x", "summary": [], "encrypted_content": "gAAAx"}),
            json!({"type": "function_call", "id": "fc_x", "name": "exec_command", "arguments": "{}", "call_id": "call_x"}),
            json!({"type": "function_call", "id": "fc_y", "name": "exec_command", "arguments": "{}", "call_id": "call_y"}),
            json!({"type": "function_call_output", "call_id": "call_x", "output": "a"}),
            json!({"type": "function_call_output", "call_id": "call_y", "output": "b"}),
        ]);
        let goal = format!("{PROMPT}{LATER_PROMPT}now the tests too");
        let plan = plan(&body, Some(&goal)).expect("plan");
        assert_eq!(plan.instructions.len(), 2, "once each");
        let projection = format!("# Goal\n\n{goal}\n\n## calc.py\n```\n1\tx\n```");
        let out = splice(&body, &plan, &projection).expect("splice");
        let input = out["input"].as_array().expect("input");
        assert_eq!(
            input[3]["content"],
            developer("Approval policy changed to never.")["content"]
        );
        assert_eq!(input[4], user(sandbox));
        let text = input[5]["content"][0]["text"].as_str().expect("text");
        assert!(
            text.starts_with("# Goal\n\nThen the user asked:\nnow the tests too\n\n## calc.py"),
            "{text}"
        );
        // Two parallel calls and their outputs: the last turn whole.
        assert_eq!(input.len(), 11);
        assert_eq!(input[6]["id"], "rs_x");
        // A prompt the user took back (rewind) is in the goal, and nowhere in the input: it
        // is not said; after a compaction, which leaves prompts out, every one is.
        let goal = format!("{PROMPT}{LATER_PROMPT}make it bold{LATER_PROMPT}now the tests too");
        let later = |body: &Value| super::plan(body, Some(&goal)).expect("plan").later_prompts;
        assert_eq!(
            later(&body).as_deref(),
            Some("Then the user asked:\nnow the tests too")
        );
        let mut compacted = body.clone();
        let input = compacted["input"].as_array_mut().expect("input");
        input.insert(
            4,
            json!({"type": "compaction", "id": "cmp_1", "encrypted_content": "gAAA"}),
        );
        assert!(later(&compacted).is_some_and(|l| l.contains("make it bold")));
    }

    /// A skill the user named (`$house-style`) comes as a user message after the prompt's: the
    /// model follows it from then on, so it stays, once.
    #[test]
    fn a_skill_the_user_named_stays() {
        let skill = user(
            "<skill>\n<name>house-style</name>\n<path>/h/skills/house-style/SKILL.md</path>\n\
             HOUSE RULE: every function gets a docstring.\n</skill>",
        );
        let mut body = request(3);
        let input = body["input"].as_array_mut().expect("input");
        input.insert(3, skill.clone());
        input.insert(7, skill.clone());
        let plan = plan(&body, Some(PROMPT)).expect("plan");
        assert_eq!(plan.instructions, [skill]);
        let out = splice(&body, &plan, PROJECTION).expect("splice");
        let sent = said(out["input"].as_array().expect("input"));
        assert_eq!(sent.matches("HOUSE RULE").count(), 1, "{sent}");
    }

    /// The plan the model proposed in Plan mode stays in view while it implements it: the last
    /// one, once. One the last turn holds is left to it.
    #[test]
    fn the_last_plan_proposed_stays() {
        let answer = |text: &str| {
            json!({"type": "message", "role": "assistant",
                   "content": [{"type": "output_text", "text": text}]})
        };
        let mut body = request(4);
        let input = body["input"].as_array_mut().expect("input");
        // After the second command, a plan; after the third, its replacement.
        input.insert(
            9,
            answer("Here it is.\n\n<proposed_plan>\n1. Subtract.\n</proposed_plan>"),
        );
        input.insert(10, user("No: it must add"));
        input.insert(
            14,
            answer("Revised.\n<proposed_plan>\n1. Add.\n</proposed_plan>\nThat's all."),
        );
        input.insert(15, user("Implement the plan."));
        let p = plan(&body, Some(PROMPT)).expect("plan");
        assert_eq!(
            said(&p.kept),
            said(&[json!({"type": "input_text", "text":
                "The plan you proposed last, in Plan mode:\n<proposed_plan>\n1. Add.\n</proposed_plan>"})])
        );
        let out = splice(&body, &p, PROJECTION).expect("splice");
        let sent = said(out["input"].as_array().expect("input"));
        assert_eq!(sent.matches("1. Add.").count(), 1, "{sent}");
        assert!(!sent.contains("Subtract"), "{sent}");
        assert!(
            plan(&request(4), Some(PROMPT))
                .expect("plan")
                .kept
                .is_empty()
        );
    }

    /// The plan the user approved for a fresh thread ("Read the approved plan at PATH and
    /// implement it."), as the model's read of it printed, stays in view.
    #[test]
    fn the_approved_plan_the_model_read_stays() {
        let mut body = request(3);
        let input = body["input"].as_array_mut().expect("input");
        let cmd = json!({"cmd": "cat /h/.codex/attachments/48f7/approved-plan.md"});
        input.splice(
            3..3,
            call(0, "exec_command", cmd, "Output:\n1. Make add() add.\n"),
        );
        let kept = said(&plan(&body, Some(PROMPT)).expect("plan").kept);
        assert!(
            kept.contains(
                "/h/.codex/attachments/48f7/approved-plan.md, the plan the user approved, as \
                 `cat /h/.codex/attachments/48f7/approved-plan.md` showed it"
            ) && kept.contains("1. Make add() add."),
            "{kept}"
        );
    }

    /// A skill the model opened itself (a `cat` of a `SKILL.md` outside the project) stays in
    /// view: the last read of each of the last four, as it printed.
    #[test]
    fn the_skills_the_model_opened_stay() {
        let mut body = request(2);
        let input = body["input"].as_array_mut().expect("input");
        // Read in this order, after the prompt.
        for (n, skill) in ["a", "b", "c", "d", "e", "a"].iter().enumerate() {
            let cmd = json!({"cmd": format!("cat /h/skills/{skill}/SKILL.md")});
            let printed = format!("Output:\nRULE {skill}{n}\n");
            input.splice(3 + 3 * n..3 + 3 * n, call(n, "exec_command", cmd, &printed));
        }
        // One in the project is the world's.
        let local = json!({"cmd": "cat skills/z/SKILL.md"});
        input.splice(3..3, call(9, "exec_command", local, "Output:\nRULE z\n"));
        let p = plan(&body, Some(PROMPT)).expect("plan");
        let kept = said(&p.kept);
        let order: Vec<usize> = ["RULE c2", "RULE d3", "RULE e4", "RULE a5"]
            .iter()
            .map(|r| kept.find(r).unwrap_or_else(|| panic!("{r}: {kept}")))
            .collect();
        assert!(order.is_sorted(), "in the order read: {kept}");
        for gone in ["RULE a0", "RULE b1", "RULE z"] {
            assert!(!kept.contains(gone), "{gone}: {kept}");
        }
        assert!(
            kept.contains(
                "/h/skills/a/SKILL.md, a skill you opened, as `cat /h/skills/a/SKILL.md` showed it"
            ),
            "{kept}"
        );
    }

    /// A `view_image` call of `path` and its output, an image of `data`.
    fn viewed(n: usize, path: &str, data: &str) -> [Value; 2] {
        [
            json!({"type": "function_call", "name": "view_image", "call_id": format!("v{n}"),
                   "arguments": json!({"path": path}).to_string()}),
            json!({"type": "function_call_output", "call_id": format!("v{n}"),
                   "output": [{"type": "input_image", "image_url": format!("data:image/png;base64,{data}"), "detail": "high"}]}),
        ]
    }

    /// Images are in no file the projection shows: the user's, attached to a later prompt,
    /// stay once each with their tags; of those `view_image` returned, the last of each file,
    /// unless the last turn views it again.
    #[test]
    fn images_of_later_prompts_and_of_view_image_stay() {
        let mut body = request(2);
        let shot = json!({"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "high"});
        let later = json!({"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "<image name=[Image #1] path=\"bug.png\">"},
            shot,
            {"type": "input_text", "text": "</image>"},
            {"type": "input_text", "text": "now this"},
        ]});
        let input = body["input"].as_array_mut().expect("input");
        input.insert(6, later.clone());
        input.insert(7, later.clone());
        input.extend(viewed(1, "a.png", "A1"));
        input.extend(viewed(2, "b.png", "B1"));
        input.extend(viewed(3, "a.png", "A2"));
        input.extend(viewed(4, "c.png", "C1"));
        // The last turn views c.png again: its image there is the one to see.
        input.extend(viewed(5, "c.png", "C2"));
        let goal = format!("{PROMPT}{LATER_PROMPT}now this");
        let plan = plan(&body, Some(&goal)).expect("plan");
        let texts: Vec<&str> = plan
            .kept
            .iter()
            .map(|p| {
                p.get("text")
                    .or_else(|| p.get("image_url"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            })
            .collect();
        let label = |n: &str| earlier_media_label(n);
        assert_eq!(
            texts,
            [
                "<image name=[Image #1] path=\"bug.png\">",
                "data:image/png;base64,AAAA",
                "</image>",
                &label("b.png"),
                "data:image/png;base64,B1",
                &label("a.png"),
                "data:image/png;base64,A2",
            ]
        );
        let out = splice(&body, &plan, PROJECTION).expect("splice");
        let input = out["input"].as_array().expect("input");
        assert_eq!(
            input[3]["content"],
            json!(plan.kept),
            "before the projection"
        );
        assert_eq!(input[3]["role"], "user");
        assert!(input[4]["content"][0]["text"].as_str().is_some());
        // After Codex compacted the conversation, its summary stays, the last one.
        let mut body = request(2);
        let summary =
            |n: usize| format!("{COMPACTION_SUMMARY} and produced a summary.\nSUMMARY {n}");
        let input = body["input"].as_array_mut().expect("input");
        input.insert(3, user(&summary(1)));
        input.insert(7, user(&summary(2)));
        let p = super::plan(&body, Some(PROMPT)).expect("plan");
        let kept: Vec<&str> = p.kept.iter().filter_map(|k| k["text"].as_str()).collect();
        assert_eq!(kept, [summary(2)]);
        // A subagent's report Codex told the conversation of stays, the last ones.
        let mut body = request(2);
        let note = |n: usize| {
            format!(
                "<subagent_notification>\n{{\"agent_path\":\"a{n}\",\"status\":{{\"completed\":\"report {n}\"}}}}\n</subagent_notification>"
            )
        };
        let input = body["input"].as_array_mut().expect("input");
        for n in (0..6).rev() {
            input.insert(6, user(&note(n)));
        }
        let p = super::plan(&body, Some(PROMPT)).expect("plan");
        let kept: Vec<&str> = p.kept.iter().filter_map(|k| k["text"].as_str()).collect();
        assert_eq!(kept, [note(2), note(3), note(4), note(5)]);
        // The commands the user ran at the prompt (`!`), the last ones, a repeat once, where
        // it ran last.
        let mut body = request(2);
        let ran = |cmd: &str| {
            format!(
                "<user_shell_command>\n<command>\n{cmd}\n</command>\n<result>\nExit code: 0\nOutput:\nok\n</result>\n</user_shell_command>"
            )
        };
        let input = body["input"].as_array_mut().expect("input");
        for cmd in ["make", "pytest", "ls", "git log", "pytest", "cat log"]
            .iter()
            .rev()
        {
            input.insert(6, user(&ran(cmd)));
        }
        let p = super::plan(&body, Some(PROMPT)).expect("plan");
        let kept: Vec<&str> = p.kept.iter().filter_map(|k| k["text"].as_str()).collect();
        assert_eq!(
            kept,
            [ran("ls"), ran("git log"), ran("pytest"), ran("cat log")]
        );
        // Without images, no message for them.
        let plain = request(3);
        let p = super::plan(&plain, Some(PROMPT)).expect("plan");
        assert!(p.kept.is_empty());
        let out = splice(&plain, &p, PROJECTION).expect("splice");
        assert_eq!(out["input"].as_array().expect("input").len(), 7);
    }

    #[test]
    fn other_conversations_and_unknown_items_go_as_they_came() {
        let body = request(3);
        assert_eq!(plan(&body, None), Err(Skip::NoGoal));
        assert_eq!(
            plan(&body, Some("another task")),
            Err(Skip::OtherConversation)
        );
        assert_eq!(plan(&request(1), Some(PROMPT)), Err(Skip::TooShort));
        assert_eq!(plan(&request(0), Some(PROMPT)), Err(Skip::TooShort));
        let mut no_shell = body.clone();
        no_shell["tools"] = json!([]);
        assert_eq!(plan(&no_shell, Some(PROMPT)), Err(Skip::NoReadTool));
        let mut unknown = body.clone();
        unknown["input"]
            .as_array_mut()
            .expect("input")
            .insert(4, json!({"type": "item_reference", "id": "msg_1"}));
        assert_eq!(plan(&unknown, Some(PROMPT)), Err(Skip::UnknownItems));
        // The prompt quoted after the model answered (a subagent's task naming it) is not the
        // conversation's opening.
        let mut quoted = request(3);
        let input = quoted["input"].as_array_mut().expect("input");
        input.remove(2);
        input.insert(4, user(PROMPT));
        assert_eq!(plan(&quoted, Some(PROMPT)), Err(Skip::OtherConversation));
    }

    /// With the `openai` provider, Codex 0.171 compacts on OpenAI's servers: it sends the
    /// conversation with a `compaction_trigger` item last, and from then on the prompts are
    /// followed by the answer's `compaction` item, then what came since (observed).
    #[test]
    fn a_compaction_openais_servers_made_stays_before_the_projection() {
        let compaction = |n: u8| json!({"type": "compaction", "id": format!("cmp_{n}"), "encrypted_content": format!("gAAA-{n}")});
        let mut body = request(3);
        let input = body["input"].as_array_mut().expect("input");
        input.insert(3, compaction(1));
        input.insert(4, compaction(2));
        let p = plan(&body, Some(PROMPT)).expect("a compacted conversation is the session's");
        assert_eq!(p.compaction, Some(compaction(2)));
        let out = splice(&body, &p, PROJECTION).expect("splice");
        let input = out["input"].as_array().expect("input");
        // The prompts, the last compaction, the projection, the last turn.
        assert_eq!(input[3], compaction(2));
        assert!(said(&input[4..5]).contains("return a + b"), "{input:?}");
        assert_eq!(input.len(), 8);
        assert!(
            !said(input).contains("gAAA-1"),
            "only the last compaction: {input:?}"
        );

        // The call that asks for the compaction is rewritten too: the model compacts what it
        // has been shown, and the trigger stays last.
        let mut asks = request(3);
        asks["input"]
            .as_array_mut()
            .expect("input")
            .push(json!({"type": "compaction_trigger"}));
        let p = plan(&asks, Some(PROMPT)).expect("the compaction's call");
        assert_eq!(p.compaction, None);
        let out = splice(&asks, &p, PROJECTION).expect("splice");
        assert_eq!(
            out["input"].as_array().and_then(|i| i.last()),
            Some(&json!({"type": "compaction_trigger"}))
        );
    }

    /// A call of `name` with its output, after its reasoning.
    fn call(n: usize, name: &str, arguments: Value, output: &str) -> [Value; 3] {
        [
            json!({"type": "reasoning", "id": format!("rs_p{n}"), "summary": [],
                   "encrypted_content": format!("gAAA-p{n}")}),
            json!({"type": "function_call", "name": name, "arguments": arguments.to_string(),
                   "call_id": format!("poll_{n}")}),
            json!({"type": "function_call_output", "call_id": format!("poll_{n}"), "output": output}),
        ]
    }

    fn running(session: u32, printed: &str) -> String {
        format!(
            "Chunk ID: 1f2e\nWall time: 0.2501 seconds\nProcess running with session ID {session}\nOriginal token count: 3\nOutput:\n{printed}"
        )
    }

    #[test]
    fn a_polled_command_is_the_last_turn_from_its_start() {
        let slow = json!({"cmd": "python3 test_calc.py; sleep 1; echo done", "yield_time_ms": 250});
        let poll = |s: Value| json!({"session_id": s, "chars": "", "yield_time_ms": 5000});
        let mut body = request(2);
        let input = body["input"].as_array_mut().expect("input");
        // An earlier command that had the same session id, and ended polled.
        input.extend(call(0, "exec_command", slow.clone(), &running(7, "")));
        input.extend(call(
            1,
            POLL_TOOL,
            poll(json!(7)),
            "Process exited with code 0\nOutput:\n",
        ));
        let started = input.len();
        input.extend(call(2, "exec_command", slow, &running(7, "1 passed\n")));
        input.extend(call(3, POLL_TOOL, poll(json!(7)), &running(7, "")));
        input.extend(call(
            4,
            POLL_TOOL,
            poll(json!("7")),
            "Process exited with code 0\nOutput:\ndone\n",
        ));
        let p = plan(&body, Some(PROMPT)).expect("plan");
        assert_eq!(
            p.tail_start, started,
            "the turn starts with the command's reasoning"
        );
        assert_eq!(p.tail_calls, ["poll_2", "poll_3", "poll_4"]);
        let out = splice(&body, &p, PROJECTION).expect("splice");
        let sent = out["input"].as_array().expect("input");
        assert_eq!(
            &sent[4..],
            &body["input"].as_array().expect("input")[started..]
        );
        assert_eq!(said(sent).matches("1 passed").count(), 1, "{sent:?}");

        // While it runs, the same: what it printed first is in no record yet.
        let mut running_now = body.clone();
        running_now["input"]
            .as_array_mut()
            .expect("input")
            .truncate(started + 6);
        let p = plan(&running_now, Some(PROMPT)).expect("plan");
        assert_eq!((p.tail_start, p.tail_calls.len()), (started, 2));

        // A poll whose start is not in the call (compacted, or not Codex's words) moves nothing.
        let mut compacted = body.clone();
        let input = compacted["input"].as_array_mut().expect("input");
        input.insert(
            started + 2,
            json!({"type": "compaction", "id": "cmp", "encrypted_content": "x"}),
        );
        let p = plan(&compacted, Some(PROMPT)).expect("plan");
        assert_eq!(p.tail_calls, ["poll_4"]);
        // Other work since the command began (a server polled now and then): its start stays
        // in the history replaced.
        let mut busy = body.clone();
        let input = busy["input"].as_array_mut().expect("input");
        let other = call(
            9,
            "exec_command",
            json!({"cmd": "cat calc.py"}),
            "def add(a, b):\n",
        );
        input.splice(started + 3..started + 3, other);
        let p = plan(&busy, Some(PROMPT)).expect("plan");
        assert_eq!(p.tail_calls, ["poll_4"]);
        let mut unknown = body.clone();
        for at in [started - 4, started + 2] {
            unknown["input"][at]["output"] = json!("Output:\n1 passed\n");
        }
        let p = plan(&unknown, Some(PROMPT)).expect("plan");
        assert_eq!(p.tail_calls, ["poll_4"]);
    }

    #[test]
    fn a_session_begun_with_a_thread_goal_is_cut_after_its_objective() {
        let goal = |used: usize| {
            user(&format!(
                "<codex_internal_context source=\"goal\">\nContinue working toward the active \
                 thread goal.\n\nBudget:\n- Tokens used: {used}\n</codex_internal_context>"
            ))
        };
        let mut input = vec![
            developer("You are Codex, a coding agent."),
            user(
                "<codex_internal_context source=\"user_goal\">\nUser set the goal: \"Fix add() in calc.py\"\n</codex_internal_context>",
            ),
            user("<environment_context>\n  <cwd>/p</cwd>\n</environment_context>"),
            json!({"type": "function_call_output", "name": GOAL_OBJECTIVE, "namespace": "agent",
                   "output": PROMPT}),
        ];
        for turn in 0..3 {
            input.push(goal(turn * 4));
            input.extend(call(
                turn,
                "exec_command",
                json!({"cmd": "cat calc.py"}),
                "def add(a, b):\n",
            ));
            input.push(json!({"type": "message", "role": "assistant",
                              "content": [{"type": "output_text", "text": format!("Turn {turn}.")}]}));
        }
        input.push(user("Now read NOTES.md"));
        input.extend(call(
            3,
            "exec_command",
            json!({"cmd": "cat NOTES.md"}),
            "# Notes\n",
        ));
        input.extend(call(
            4,
            "exec_command",
            json!({"cmd": "cat NOTES.md"}),
            "# Notes\n",
        ));
        let mut body = request(0);
        body["input"] = Value::Array(input);
        let goal_text = format!("{PROMPT}{LATER_PROMPT}Now read NOTES.md");
        let p = plan(&body, Some(&goal_text)).expect("a goal's session is the session's");
        assert_eq!(p.head_len, 4, "the head ends with the objective");
        // Of Codex's word on the goal, the last turn's alone: the earlier ones' budgets are
        // out of date.
        assert_eq!(p.instructions, [goal(8)]);
        let out = splice(&body, &p, &format!("# Goal\n\n{goal_text}\n\n{PROJECTION}"))
            .expect("Codex's objective, an output of no call, is no cut gone wrong");
        let sent = said(out["input"].as_array().expect("input"));
        assert_eq!(sent.matches("Continue working toward").count(), 1, "{sent}");
        assert_eq!(sent.matches("Now read NOTES.md").count(), 1, "{sent}");

        // A goal the mount does not know of (no hook told it) is not taken for this one.
        assert_eq!(
            plan(&body, Some("Now read NOTES.md")),
            Err(Skip::OtherConversation)
        );
    }

    #[test]
    fn the_agents_md_the_head_shows_is_named_with_its_hash() {
        let mut body = request(3);
        let file = "# Rules\n\nRun the tests.\n";
        body["input"][1]["content"]
            .as_array_mut()
            .expect("content")
            .insert(
                0,
                json!({"type": "input_text", "text": format!(
                "{AGENTS_HEADING}/p{AGENTS_OPEN}{file}{AGENTS_CLOSE}")}),
            );
        let plan = plan(&body, Some(PROMPT)).expect("plan");
        assert_eq!(
            instruction_files(&body, &plan),
            [(
                "/p/AGENTS.md".to_owned(),
                crate::projection::shown_hash(file.as_bytes())
            )]
        );
        assert!(instruction_files(&request(3), &plan).is_empty());
    }

    #[test]
    fn a_cut_that_orphans_an_output_is_refused() {
        let body = request(3);
        let mut plan = plan(&body, Some(PROMPT)).expect("plan");
        plan.tail_start += 2;
        let err = splice(&body, &plan, PROJECTION).expect_err("orphaned output");
        assert!(err.to_string().contains("an output of no call"), "{err}");
    }
}
