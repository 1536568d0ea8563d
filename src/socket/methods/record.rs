//! What the harness records as the session happens: the agent's steps (and the tools a step may
//! name), command outputs, and the model calls `worldfs proxy` took. Kept together because they
//! are the session's history: steps and commands add what a history-keeping harness would have
//! kept, and wait on the ingest barrier so what the mount saw is counted as their doing.

use std::path::Path;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Empty, Shared, ingest_barrier, lossy, rel_path, session};
use crate::socket::metrics::count_tokens;
use crate::socket::protocol::{RpcError, code};
use crate::socket::{begun, commands};
use crate::world::harness::{CommandOutput, MAX_STEP_TOOLS, Step};
use crate::world::views::Viewed;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct StepRecord {
    tool_use_id: String,
    tool_name: String,
    #[serde(default)]
    input: Value,
    result: String,
    #[serde(default)]
    is_error: bool,
    #[serde(default)]
    assistant_text: Option<String>,
    #[serde(default)]
    raw_assistant_content: Option<Value>,
    /// What the result showed of which files (see `world::views`).
    #[serde(default)]
    views: Vec<ViewDecl>,
    /// When a view is of a file the projection will not show (outside the mount, or left out
    /// by the ignore rules: a library's source in `.venv` or `node_modules`), keep the result
    /// as an earlier result instead (what `command.record` does with `tool`), and do not
    /// refuse a view outside the mount: a history-replacing harness would lose it otherwise.
    #[serde(default)]
    keep_unshown: bool,
    /// Files the call read or changed besides its views (an Edit's file): with `session`,
    /// they are that conversation's own from now on. A path outside the mount is no file of
    /// the world's, and is passed over.
    #[serde(default)]
    files: Vec<String>,
    /// The conversation whose step this is: it counts its own steps, and the files its steps
    /// touched are its own view of the world (`world::touched`).
    #[serde(default)]
    session: Option<String>,
    /// Record the step only if no step of this id was recorded `once` lately: for a harness
    /// that learns of a call after the fact and may tell it twice.
    #[serde(default)]
    once: bool,
    /// A file the call wrote (a Write, an Edit) and what it holds now: when no projection
    /// shows it (outside the mount, or left out by the ignore rules: Claude Code's plan file
    /// under `~/.claude/plans`), it is kept as an earlier result, the last one of that file.
    #[serde(default)]
    wrote: Option<Wrote>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Wrote {
    path: String,
    content: String,
}

/// The tools whose kept copy of a file [`Wrote`] replaces: the last one stands for the file.
const WRITING_TOOLS: [&str; 4] = ["Write", "Edit", "MultiEdit", "NotebookEdit"];

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ViewDecl {
    path: String,
    /// 1-based inclusive first and last line; absent or null: the whole file.
    #[serde(default)]
    lines: Option<[u64; 2]>,
}

/// At most this many views per step (a result showing more files than this is a listing).
const MAX_VIEWS: usize = 64;

pub(super) fn step_record(shared: &Shared, p: StepRecord) -> Result<Value, RpcError> {
    if p.tool_use_id.is_empty() || p.tool_use_id.len() > 256 {
        return Err(RpcError::invalid_params(
            "step.record: tool_use_id must be 1 to 256 characters",
        ));
    }
    if p.tool_name.is_empty() || p.tool_name.len() > 256 {
        return Err(RpcError::invalid_params(
            "step.record: tool_name must be 1 to 256 characters",
        ));
    }
    if p.views.len() > MAX_VIEWS {
        return Err(RpcError::invalid_params(format!(
            "step.record: {} views; at most {MAX_VIEWS}",
            p.views.len()
        )));
    }
    if p.files.len() > MAX_VIEWS {
        return Err(RpcError::invalid_params(format!(
            "step.record: {} files; at most {MAX_VIEWS}",
            p.files.len()
        )));
    }
    let of_session = session("step.record", &p.session)?;
    let mut touched = Vec::with_capacity(p.views.len() + p.files.len());
    touched.extend(p.files.iter().filter_map(|f| rel_path(shared, f).ok()));
    let w = &*shared.world;
    let mut views = Vec::with_capacity(p.views.len());
    let mut unshown = false;
    let mut secret = false;
    for v in &p.views {
        if let Some([a, b]) = v.lines
            && (a == 0 || b < a)
        {
            return Err(RpcError::invalid_params(format!(
                "step.record: view of {}: lines [{a}, {b}] must be 1-based with first <= last",
                v.path
            )));
        }
        let rel = match rel_path(shared, &v.path) {
            Ok(rel) => rel,
            Err(_) if p.keep_unshown && Path::new(&v.path).is_absolute() => {
                // Not a secret's (a key, `~/.aws/credentials`): no projection shows one.
                secret |= w.looks_secret(Path::new(&v.path));
                unshown = true;
                continue;
            }
            Err(e) => return Err(e),
        };
        unshown |= w.ignores(&rel, false);
        views.push((rel, v.lines.map(|[a, b]| (a, b))));
    }
    touched.extend(views.iter().map(|(rel, _)| rel.clone()));
    // Checked once the params are known good: a refused call noted nothing.
    if p.once && !shared.world.harness().first_time(&p.tool_use_id) {
        return Ok(json!({
            "recorded": false,
            "turn": shared.world.turn(),
            "history_tokens": shared.tokens.report().history_tokens,
            "views_applied": 0,
        }));
    }
    // What the mount saw before the step was recorded is the step's doing: it must be applied
    // before the turn advances, or a read still in the channel would count as the next turn's
    // (younger than it is, and differently from one run to the next). The views also refine
    // entries those reads create.
    ingest_barrier(shared);
    let mut viewed = 0u64;
    let mut refers_to = Vec::new();
    for (rel, lines) in &views {
        match w.agent_viewed(rel, *lines) {
            Ok(Some(how)) => {
                viewed += 1;
                if how == Viewed::Unread && !refers_to.contains(rel) {
                    refers_to.push(rel.clone());
                }
            }
            Ok(None) => {}
            Err(e) => tracing::debug!(path = %rel.display(), "step.record: view not applied: {e}"),
        }
    }
    // What a history-keeping harness would have appended: the call, its result, the text.
    let mut added = count_tokens(&p.result) + count_tokens(&p.input.to_string());
    if let Some(t) = &p.assistant_text {
        added += count_tokens(t);
    }
    shared.tokens.add_history(added);
    let kept = unshown && !secret && p.keep_unshown && !p.is_error && !p.result.trim().is_empty();
    // A file written that no projection shows: outside the mount, or ignored.
    let wrote = p.wrote.as_ref().filter(|wr| {
        !p.is_error
            && Path::new(&wr.path).is_absolute()
            && match rel_path(shared, &wr.path) {
                Ok(rel) => w.ignores(&rel, false),
                Err(_) => !w.looks_secret(Path::new(&wr.path)),
            }
    });
    if kept || wrote.is_some() {
        // In the turn the step ends, as `worldfs hook` records a Bash call's output.
        let session_step = of_session.map(|id| {
            w.harness()
                .conversations
                .update(Some(id), |c| c.touched.steps())
        });
        let kept_output = |command: String, output: String| CommandOutput {
            command,
            cwd: ".".into(),
            output,
            exit_code: None,
            inputs: Vec::new(),
            subtrees: Vec::new(),
            turn: w.turn(),
            seq: w.recent().last_seq(),
            tool: Some(p.tool_name.clone()),
            session: of_session.map(str::to_owned),
            session_step,
        };
        if kept {
            w.harness().record_command(kept_output(
                format!("{} {}", p.tool_name, p.input),
                p.result.clone(),
            ));
        }
        if let Some(wr) = wrote {
            // Named by the file alone, so the last write of it replaces the copy before,
            // whichever tool made either.
            let about = json!({ "file_path": wr.path }).to_string();
            w.harness().forget_commands(of_session, |c| {
                WRITING_TOOLS.iter().any(|t| c == format!("{t} {about}"))
            });
            w.harness().record_command(kept_output(
                format!("{} {about}", p.tool_name),
                wr.content.clone(),
            ));
        }
    }
    let turn = w.advance_turn();
    w.harness().note_step_tool(&p.tool_name);
    if let Some(name) = p
        .raw_assistant_content
        .as_ref()
        .and_then(|raw| raw.as_array())
        .and_then(|blocks| {
            blocks
                .iter()
                .find(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
        })
        .and_then(|b| b.get("name"))
        .and_then(Value::as_str)
    {
        w.harness().note_step_tool(name);
    }
    if shared.subs.wants_projections() {
        shared.subs.publish_step(&json!({
            "time_ms": super::millis(std::time::SystemTime::now()),
            "session": of_session,
            "turn": turn,
            "tool_name": p.tool_name,
            "input": shortened(&p.input),
            "is_error": p.is_error,
            "result_bytes": p.result.len(),
        }));
    }
    let step = Step {
        tool_use_id: p.tool_use_id,
        tool_name: p.tool_name,
        input: p.input,
        result: p.result,
        is_error: p.is_error,
        assistant_text: p.assistant_text,
        raw_assistant_content: p.raw_assistant_content,
        turn,
        refers_to,
    };
    if let Some(id) = of_session {
        w.harness().conversations.update(Some(id), |c| {
            c.touched.touch_all(touched.iter().map(|p| p.as_path()));
            c.touched.step();
            c.last_step = Some(step.clone());
        });
    }
    *w.harness().last_step.write() = Some(step);
    Ok(json!({
        "recorded": true,
        "turn": turn,
        "history_tokens": shared.tokens.report().history_tokens,
        "views_applied": viewed,
    }))
}

/// Longest string of a step's input told to subscribers, in characters: a Write's content can be
/// megabytes, and a watch wants the path.
const TOLD_STRING_CHARS: usize = 200;

/// `input` with every string longer than [`TOLD_STRING_CHARS`] cut there (marked `…`).
fn shortened(input: &Value) -> Value {
    crate::socket::fit::map_strings(input.clone(), &|s| match s
        .char_indices()
        .nth(TOLD_STRING_CHARS)
    {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s,
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ToolsDeclare {
    names: Vec<String>,
}

pub(super) fn tools_declare(shared: &Shared, p: ToolsDeclare) -> Result<Value, RpcError> {
    let w = &*shared.world;
    if p.names.len() > MAX_STEP_TOOLS {
        return Err(RpcError::invalid_params(format!(
            "tools.declare: {} names; at most {MAX_STEP_TOOLS}",
            p.names.len()
        )));
    }
    if let Some(bad) = p.names.iter().find(|n| n.is_empty() || n.len() > 256) {
        return Err(RpcError::invalid_params(format!(
            "tools.declare: tool name {bad:?} must be 1 to 256 characters"
        )));
    }
    for name in &p.names {
        w.harness().note_step_tool(name);
    }
    Ok(json!({ "tools": *w.harness().step_tools.read() }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CommandBegin {
    key: String,
}

/// Notes where a command starts, for a client that records its output from another process.
pub(super) fn command_begin(shared: &Shared, p: CommandBegin) -> Result<Value, RpcError> {
    if p.key.is_empty() || p.key.len() > begun::MAX_KEY_BYTES {
        return Err(RpcError::invalid_params(format!(
            "command.begin: key must be 1 to {} bytes",
            begun::MAX_KEY_BYTES
        )));
    }
    // What the mount saw before the call is not the command's doing: applied first, it comes
    // before the noted sequence number. Without the wait, a read or a change the world had
    // not applied yet counted as the command's, by chance: an extra input that dropped the
    // output when that file changed, or a change that kept a search's output from being cached.
    ingest_barrier(shared);
    let seq = shared.world.recent().last_seq();
    shared.begun.begin(&p.key, seq);
    Ok(json!({ "key": p.key, "seq": seq }))
}

/// Forgets a `command.begin` whose output will not be recorded (the call failed, was
/// interrupted or denied), so it does not wait among the starts until newer ones push it out.
pub(super) fn command_abandon(shared: &Shared, p: CommandBegin) -> Result<Value, RpcError> {
    let waiting = shared.begun.take(&p.key).is_some();
    Ok(json!({ "key": p.key, "waiting": waiting }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CommandRecord {
    command: String,
    #[serde(default = "dot")]
    cwd: String,
    output: String,
    #[serde(default)]
    exit_code: Option<i32>,
    #[serde(default)]
    since_seq: Option<u64>,
    /// The key of a `command.begin`: the same as `since_seq` with the sequence number it noted.
    #[serde(default)]
    begun: Option<String>,
    #[serde(default)]
    files: Option<Vec<String>>,
    /// Directories (or files) the output depends on as a whole: any change below one drops it.
    #[serde(default)]
    subtrees: Option<Vec<String>>,
    /// Cache the output only if a change to what it depends on would be noticed: not if it
    /// read nothing; if a whole-tree scanner read files meanwhile, until anything changes.
    #[serde(default)]
    only_if_tracked: bool,
    /// The tool whose call's result this is, when it is not a command's output: a result no
    /// file keeps current (a subagent's report, a web page), recorded with `files: []`.
    #[serde(default)]
    tool: Option<String>,
    /// The tool whose call ran the command (`Bash`): an output that cannot be cached (it read
    /// no file through the mount, or the tree changed while it ran) is kept instead as that
    /// tool's earlier result, as it was then, as `tool` keeps one. A harness that replaces its
    /// history would otherwise lose it (a `gh issue view`, a `curl` of the dev server).
    #[serde(default)]
    untracked_tool: Option<String>,
    /// The conversation the output belongs to: shown only in its projections.
    #[serde(default)]
    session: Option<String>,
}

pub(super) fn command_record(shared: &Shared, p: CommandRecord) -> Result<Value, RpcError> {
    if p.command.is_empty() {
        return Err(RpcError::invalid_params(
            "command.record: command must not be empty",
        ));
    }
    let of_session = session("command.record", &p.session)?.map(str::to_owned);
    for t in p.tool.iter().chain(&p.untracked_tool) {
        if !crate::projection::valid_tool_name(t) {
            return Err(RpcError::invalid_params(format!(
                "command.record: tool {t:?} is not a tool name (^[a-zA-Z0-9_-]{{1,64}}$)"
            )));
        }
    }
    if p.since_seq.is_some() && p.begun.is_some() {
        return Err(RpcError::invalid_params(
            "command.record: pass since_seq or begun, not both (both say when the command started)",
        ));
    }
    if p.since_seq.is_none() && p.begun.is_none() && p.files.is_none() && p.subtrees.is_none() {
        return Err(RpcError::invalid_params(
            "command.record: pass since_seq (the last_seq noted before the command ran), begun \
             (the key of its command.begin), files (the paths it read) or subtrees (the \
             directories it depends on as a whole)",
        ));
    }
    if let Some(t) = &p.subtrees
        && t.len() > MAX_SUBTREES
    {
        return Err(RpcError::invalid_params(format!(
            "command.record: {} subtrees; at most {MAX_SUBTREES}",
            t.len()
        )));
    }
    let w = &*shared.world;
    let cwd = display_cwd(&rel_path(shared, &p.cwd)?);
    let since = match &p.begun {
        Some(key) => Some(shared.begun.take(key).ok_or_else(|| {
            RpcError::new(
                code::NOT_FOUND,
                format!(
                    "command.record: no command.begin with key {key:?} is waiting (never begun, \
                     already recorded, or one of more than {} begun since)",
                    begun::MAX_OPEN
                ),
            )
        })?),
        None => p.since_seq,
    };
    let mut paths = Vec::new();
    if let Some(files) = &p.files {
        if files.len() > commands::MAX_INPUTS {
            return Err(RpcError::invalid_params(format!(
                "command.record: {} files; at most {} are tracked",
                files.len(),
                commands::MAX_INPUTS
            )));
        }
        for f in files {
            paths.push(rel_path(shared, f)?);
        }
    }
    let mut subtrees = Vec::new();
    for t in p.subtrees.iter().flatten() {
        subtrees.push(rel_path(shared, t)?);
    }
    // The command's reads are in the world before its inputs are collected and its place
    // (`seq`, after them) is taken, whichever way the inputs are named.
    ingest_barrier(shared);
    let mut scanned = 0;
    let mut written = Vec::new();
    // The files the client named, and what the command showed of the files it read.
    let mut own = paths.clone();
    if let Some(since) = since {
        let reads = commands::inputs_since(w, since)
            .map_err(|e| RpcError::new(code::HISTORY_LOST, format!("command.record: {e}")))?;
        paths.extend(reads.paths);
        own.extend(reads.shown);
        scanned = reads.scanned;
        written = reads.written;
    }
    paths.sort();
    paths.dedup();
    // What the command showed or wrote is its session's own from now on, cached or not; and
    // the session is the one heard from last, as after any change to its conversation. What
    // it only ran through (a test run importing every module, a Grep's search) is not: that
    // session's model never saw those files, and another session may be working in them.
    let session_step = of_session.as_deref().map(|id| {
        w.harness().conversations.update(Some(id), |c| {
            c.touched
                .touch_all(own.iter().chain(&written).map(|p| p.as_path()));
            c.touched.steps()
        })
    });
    // What a whole-tree scanner (rg, grep -r, git, find...) read is not an input: an indexer
    // running beside the agent would tie every output to the whole tree. A client that wants
    // every change noticed gets the output tied to the whole tree instead, so that any change
    // drops it; another gets it checked against the files it read.
    if scanned > 0 && p.only_if_tracked {
        subtrees.push(std::path::PathBuf::new());
    }
    if subtrees.iter().any(|t| t.as_os_str().is_empty()) {
        subtrees = vec![std::path::PathBuf::new()];
    }
    subtrees.sort();
    subtrees.dedup();
    // Changes seen before now are no concern of an output recorded now: swept first, so that a
    // later sweep sees only what comes after the check below.
    shared.validity.sweep(w);
    let not_cached = |why: String| {
        let kept = p.untracked_tool.as_ref().map(|tool| {
            let out = CommandOutput {
                command: p.command.clone(),
                cwd: cwd.clone(),
                output: p.output.clone(),
                exit_code: p.exit_code,
                inputs: Vec::new(),
                subtrees: Vec::new(),
                turn: w.turn(),
                seq: w.recent().last_seq(),
                tool: Some(tool.clone()),
                session: of_session.clone(),
                session_step,
            };
            w.harness().record_command(out);
        });
        json!({"command": p.command, "cwd": cwd, "cached": false, "why": why,
               "scanned": scanned, "kept": kept.is_some()})
    };
    if let Some(since) = since
        && !subtrees.is_empty()
    {
        let changed = commands::changed_below(w, since, &subtrees)
            .map_err(|e| RpcError::new(code::HISTORY_LOST, format!("command.record: {e}")))?;
        if let Some(path) = changed {
            // Run before or after the change, the output cannot be told apart.
            let path = if path.as_os_str().is_empty() {
                "the tree".to_owned()
            } else {
                lossy(&path)
            };
            return Ok(not_cached(format!(
                "{path} changed while it ran, below what it depends on as a whole"
            )));
        }
    }
    if p.only_if_tracked && paths.is_empty() && subtrees.is_empty() {
        return Ok(not_cached(
            "it read no file through the mount, so no change would tell that it is out of date"
                .into(),
        ));
    }
    // A file input is checked against the disk at every projection; a directory's changes are
    // known only from what the watcher reports.
    if !subtrees.is_empty() && !shared.sees_changes_behind() {
        return Ok(not_cached(
            "it depends on a directory as a whole, and changes made behind the mount are not \
             all watched (--no-watch, or inotify's watch limit), so one below it could go unseen"
                .into(),
        ));
    }
    // Not added to the history estimate: a history-keeping harness holds the output once, as
    // the result of the step that ran the command, which `step.record` counts.
    let inputs = commands::hash_inputs(w, paths);
    let out = CommandOutput {
        command: p.command,
        cwd,
        output: p.output,
        exit_code: p.exit_code,
        inputs,
        subtrees,
        turn: w.turn(),
        seq: w.recent().last_seq(),
        tool: p.tool,
        session: of_session,
        session_step,
    };
    let reply = json!({
        "command": out.command,
        "cwd": out.cwd,
        "cached": true,
        "inputs": out.inputs.iter().map(|(p, h)| json!({"path": lossy(p), "hash": h})).collect::<Vec<_>>(),
        "subtrees": out.subtrees.iter().map(|t| display_cwd(t)).collect::<Vec<_>>(),
        "scanned": scanned,
        "turn": out.turn,
        "seq": out.seq,
    });
    w.harness().record_command(out);
    Ok(reply)
}

/// Most directories one output depends on as a whole.
const MAX_SUBTREES: usize = 64;

pub(super) fn commands_list(shared: &Shared, _: Empty) -> Result<Value, RpcError> {
    let w = &*shared.world;
    shared.validity.sweep(w);
    Ok(json!({ "commands": *w.harness().commands.read() }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct CommandKey {
    command: String,
    #[serde(default = "dot")]
    cwd: String,
}

pub(super) fn commands_forget(shared: &Shared, p: CommandKey) -> Result<Value, RpcError> {
    let w = &*shared.world;
    let cwd = rel_path(shared, &p.cwd)?;
    let cwd = display_cwd(&cwd);
    let mut cmds = w.harness().commands.write();
    let before = cmds.len();
    cmds.retain(|c| !(c.command == p.command && c.cwd == cwd));
    Ok(json!({ "forgotten": cmds.len() != before }))
}

fn dot() -> String {
    ".".into()
}

fn display_cwd(p: &Path) -> String {
    if p.as_os_str().is_empty() {
        ".".into()
    } else {
        lossy(p)
    }
}

/// One model call `worldfs proxy` took from the session's main conversation.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProxyRecord {
    /// Tokens of the messages as the client sent them.
    history_tokens: u64,
    /// Tokens of the messages sent upstream (or that would have been, under `--observe`).
    sent_tokens: u64,
    /// Whether it was sent with the projection.
    rewritten: bool,
}

pub(super) fn proxy_record(shared: &Shared, p: ProxyRecord) -> Result<Value, RpcError> {
    shared
        .proxy
        .record(p.history_tokens, p.sent_tokens, p.rewritten);
    if shared.subs.wants_projections() {
        shared.subs.publish_model_call(&json!({
            "time_ms": super::millis(std::time::SystemTime::now()),
            "history_tokens": p.history_tokens,
            "sent_tokens": p.sent_tokens,
            "rewritten": p.rewritten,
        }));
    }
    Ok(json!(shared.proxy.report()))
}
