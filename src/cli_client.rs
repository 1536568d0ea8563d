//! The client subcommands: `worldfs ctl`, `projection`, `status` and `goal` (and the dispatch of
//! `watch`, in [`crate::cli_watch`]).
//!
//! Each finds the daemon's socket from `--socket`, else from the worldfs mount containing `-C
//! DIR`, else from `WORLDFS_SOCKET`, else from the mount containing the current directory, named
//! the way the daemon names it. Exit codes: 0 on success, 1 when the daemon cannot be reached or
//! answers with an error, 2 for bad usage.

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use serde_json::{Value, json};

use crate::cli::{Command, ProjectionOptions, SocketArg};
use crate::mountinfo;
use crate::socket::{Client, ClientError, paths};

/// Long enough for a projection of a big world; short enough that a hung daemon is noticed.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Runs a client subcommand.
pub fn run(cmd: Command) -> ExitCode {
    let result = match cmd {
        Command::Ctl {
            target,
            method,
            params,
        } => ctl(&target, &method, params.as_deref()),
        Command::Projection {
            mut target,
            options,
            full,
            evicted_limit,
            at,
        } => {
            target.dir = target.dir.or(at);
            projection(&target, &options, full, evicted_limit)
        }
        Command::Status { mut target, at } => {
            target.dir = target.dir.or(at);
            status(&target)
        }
        Command::Goal {
            target,
            session,
            text,
            clear,
        } => goal(&target, session.as_deref(), text, clear),
        Command::Watch {
            target,
            path,
            class,
            json,
            all,
            recent,
        } => crate::cli_watch::run(&crate::cli_watch::WatchOptions {
            target,
            path,
            classes: class,
            json,
            all,
            recent,
        })
        .map_err(Failure::from),
        Command::Mount { .. }
        | Command::Run { .. }
        | Command::Unmount { .. }
        | Command::Watchdog { .. }
        | Command::Hook { .. }
        | Command::Proxy { .. }
        | Command::Replay { .. } => Err(Failure::Usage("not a client subcommand".into())),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(m)) => {
            eprintln!("worldfs: {m}");
            ExitCode::from(2)
        }
        Err(Failure::Failed(e)) => {
            eprintln!("worldfs: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

enum Failure {
    Usage(String),
    Failed(anyhow::Error),
}

impl From<anyhow::Error> for Failure {
    fn from(e: anyhow::Error) -> Self {
        Failure::Failed(e)
    }
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        Failure::Failed(e.into())
    }
}

/// `$WORLDFS_SOCKET`, when set: below what the command line says, above the current directory.
fn socket_from_env() -> Option<PathBuf> {
    std::env::var_os("WORLDFS_SOCKET")
        .filter(|s| !s.is_empty())
        .map(PathBuf::from)
}

/// The socket to talk to: `--socket`, or the one of the mount containing `-C DIR`, or
/// `$WORLDFS_SOCKET`, else the one of the mount containing the current directory.
pub fn resolve_socket(arg: &SocketArg) -> anyhow::Result<PathBuf> {
    resolve_socket_or(arg, || {
        std::env::current_dir().context("reading the current directory")
    })
}

/// The order of [`resolve_socket`]; `fallback` gives the directory last in it, asked only when
/// nothing before it answers.
pub(crate) fn resolve_socket_or(
    arg: &SocketArg,
    fallback: impl FnOnce() -> anyhow::Result<PathBuf>,
) -> anyhow::Result<PathBuf> {
    if let Some(p) = &arg.socket {
        return Ok(p.clone());
    }
    let dir = match &arg.dir {
        // Made absolute and resolved, so a relative or symlinked DIR names the mount it is in;
        // only made absolute when it cannot be resolved (a mount whose daemon died).
        Some(d) => d
            .canonicalize()
            .or_else(|_| std::path::absolute(d))
            .with_context(|| format!("-C {}", d.display()))?,
        None => match socket_from_env() {
            Some(p) => return Ok(p),
            None => fallback()?,
        },
    };
    let Some(m) = mountinfo::worldfs_mount_covering(&dir).context("reading mountinfo")? else {
        // A mistyped DIR is said as such, not as a directory outside every mount.
        if let Some(d) = &arg.dir
            && let Err(e) = std::fs::symlink_metadata(d)
            && e.kind() == std::io::ErrorKind::NotFound
        {
            bail!("{}: no such file or directory", d.display());
        }
        bail!(
            "{} is not inside a worldfs mount; pass --socket PATH (printed by `worldfs mount`)",
            dir.display()
        );
    };
    socket_for_mount(&m.mount_point)
}

/// The socket of the daemon serving `mount_point`: the first candidate path that exists.
pub fn socket_for_mount(mount_point: &Path) -> anyhow::Result<PathBuf> {
    let candidates = paths::candidate_paths(mount_point);
    if let Some(p) = candidates.iter().find(|p| p.exists()) {
        return Ok(p.clone());
    }
    bail!(
        "no socket for the mount at {} (looked for {}); if it was started with --socket, pass \
         the same --socket here",
        mount_point.display(),
        candidates
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

fn connect(arg: &SocketArg) -> Result<Client, Failure> {
    let path = resolve_socket(arg)?;
    Ok(Client::connect(&path, TIMEOUT)?)
}

/// `println!` into a `String` that [`emit`] writes out at once.
macro_rules! outln {
    ($out:ident, $($arg:tt)*) => {{
        $out.push_str(&format!($($arg)*));
        $out.push('\n');
    }};
}

/// Writes `text` to stdout. A reader that went away (`worldfs status | head -3`) is no failure:
/// the output was for it alone, and `println!` would have panicked.
pub fn write_stdout(text: &str) -> std::io::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        r => r,
    }
}

fn emit(text: &str) -> Result<(), Failure> {
    write_stdout(text)
        .context("writing to stdout")
        .map_err(Failure::from)
}

fn print_json(v: &Value) -> Result<(), Failure> {
    let text = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
    emit(&format!("{text}\n"))
}

fn ctl(arg: &SocketArg, method: &str, params: Option<&str>) -> Result<(), Failure> {
    let params = match params {
        None => json!({}),
        Some("-") => {
            let mut s = String::new();
            std::io::stdin()
                .read_to_string(&mut s)
                .context("reading params from stdin")?;
            parse_params(&s)?
        }
        Some(s) => parse_params(s)?,
    };
    let mut c = connect(arg)?;
    let r = c.call(method, params)?;
    print_json(&r)
}

fn parse_params(s: &str) -> Result<Value, Failure> {
    let v: Value = serde_json::from_str(s)
        .map_err(|e| Failure::Usage(format!("params are not valid JSON: {e}")))?;
    if !v.is_object() {
        return Err(Failure::Usage(
            "params must be a JSON object, e.g. '{\"budget\": 8000}'".into(),
        ));
    }
    Ok(v)
}

fn projection(
    arg: &SocketArg,
    o: &ProjectionOptions,
    full: bool,
    evicted_limit: Option<usize>,
) -> Result<(), Failure> {
    let mut params = json!({ "format": o.format });
    if let Some(n) = evicted_limit {
        params["evicted_limit"] = json!(n);
    }
    if let Some(b) = o.budget {
        params["budget"] = json!(b);
    }
    if let Some(t) = &o.tool_name {
        params["tool_name"] = json!(t);
    }
    if let Some(p) = &o.policy {
        params["policy"] = json!(p);
    }
    if o.verbatim_step {
        params["step_output"] = json!("verbatim");
    }
    if let Some(s) = &o.session {
        params["session"] = json!(s);
    }
    let mut c = connect(arg)?;
    let r = c.call("projection.get", params)?;
    if full {
        return print_json(&r);
    }
    // The body is what goes to the model: markdown as is, request bodies as JSON. What it cost
    // and what was left out goes to stderr, so stdout can be piped into a request.
    match r.get("body") {
        Some(Value::String(t)) => {
            emit(t)?;
            // The body is sent as is, without a last newline; on a terminal, the summary below
            // would otherwise start at the end of its last line.
            if !t.ends_with('\n') && std::io::stdout().is_terminal() {
                emit("\n")?;
            }
        }
        Some(body) => print_json(body)?,
        None => print_json(&r)?,
    }
    let count = |k: &str| r.get(k).and_then(Value::as_array).map_or(0, Vec::len);
    let entries = r.get("entries").and_then(Value::as_u64).unwrap_or(0);
    eprintln!(
        "worldfs: {} tokens of {} ({}), {entries} {}, {} evicted, {} withheld, policy {}",
        r.get("tokens").and_then(Value::as_u64).unwrap_or(0),
        r.get("budget").and_then(Value::as_u64).unwrap_or(0),
        r.get("tokenizer").and_then(Value::as_str).unwrap_or("?"),
        if entries == 1 { "entry" } else { "entries" },
        r.get("evicted_total")
            .and_then(Value::as_u64)
            .unwrap_or(count("evicted") as u64),
        count("withheld"),
        r.get("policy").and_then(Value::as_str).unwrap_or("?"),
    );
    Ok(())
}

fn goal(
    arg: &SocketArg,
    session: Option<&str>,
    text: Option<String>,
    clear: bool,
) -> Result<(), Failure> {
    let mut c = connect(arg)?;
    let (method, mut params) = if clear {
        ("goal.set", json!({ "goal": null }))
    } else if let Some(t) = text {
        ("goal.set", json!({ "goal": t }))
    } else {
        ("goal.get", json!({}))
    };
    if let Some(s) = session {
        params["session"] = json!(s);
    }
    let r = c.call(method, params)?;
    match r.get("goal").and_then(Value::as_str) {
        Some(g) => emit(&format!("{g}\n")),
        None => emit("(no goal set)\n"),
    }
}

fn num(v: &Value, ptr: &str) -> String {
    match v.pointer(ptr) {
        Some(Value::Number(n)) => n.to_string(),
        Some(Value::Null) | None => "-".into(),
        Some(other) => other.to_string(),
    }
}

fn status(arg: &SocketArg) -> Result<(), Failure> {
    let path = resolve_socket(arg)?;
    let stats = Client::connect(&path, TIMEOUT)
        .and_then(|mut c| c.call("stats", json!({})).map(|s| (c, s)));
    let (mut client, s) = match stats {
        Ok(cs) => cs,
        Err(e) => {
            emit(&format!("socket:   {} (not answering)\n", path.display()))?;
            return Err(Failure::Failed(e.into()));
        }
    };
    // Written at once at the end, so a reader that stops early (`| head -3`) ends nothing.
    let mut out = String::new();
    let text = |ptr: &str| {
        s.pointer(ptr)
            .and_then(Value::as_str)
            .unwrap_or("-")
            .to_string()
    };
    let mount = text("/root/mount_point");
    let source = text("/root/source");
    if mount == source {
        outln!(out, "mount:    {mount} (in place)");
    } else {
        outln!(out, "mount:    {source} at {mount}");
    }
    if let Some(io) = s.pointer("/data_path").and_then(Value::as_str) {
        let over = s
            .pointer("/transport")
            .and_then(Value::as_str)
            .map(|t| format!("; requests over {t}"))
            .unwrap_or_default();
        outln!(out, "io:       {io}{over}");
    }
    outln!(out, "socket:   {}", path.display());
    outln!(
        out,
        "entries:  {} live, {} deleted, {} withheld, {} ignored ({} tokens of live content known)",
        num(&s, "/entries/live"),
        num(&s, "/entries/deleted"),
        num(&s, "/entries/withheld"),
        num(&s, "/entries/ignored"),
        num(&s, "/known_tokens"),
    );
    let ratio = s
        .pointer("/tokens/ratio")
        .and_then(Value::as_f64)
        .map(|r| format!(" ({:.1}% of a growing history)", r * 100.0))
        .unwrap_or_default();
    let sent = num(&s, "/tokens/projections");
    let projections = if sent == "1" {
        "projection"
    } else {
        "projections"
    };
    outln!(
        out,
        "tokens:   last projection {}, {sent} {projections} sent {} tokens; a growing history ({} \
         now) would have sent {}{ratio}",
        num(&s, "/tokens/last_projection_tokens"),
        num(&s, "/tokens/projection_tokens_sent_total"),
        num(&s, "/tokens/history_tokens"),
        num(&s, "/tokens/history_tokens_sent_total"),
    );
    if let Some(last) = s.get("last_projection").filter(|v| v.is_object()) {
        outln!(out, "{}", last_projection_line(last));
    }
    // Only a proxy (`worldfs proxy`) reports model calls; without one the line would be noise.
    if s.pointer("/proxy/calls")
        .and_then(Value::as_u64)
        .unwrap_or(0)
        > 0
    {
        let ratio = s
            .pointer("/proxy/ratio")
            .and_then(Value::as_f64)
            .map(|r| format!(" ({:.1}%)", r * 100.0))
            .unwrap_or_default();
        outln!(
            out,
            "proxy:    {} model calls ({} sent with the projection): their messages {} tokens, \
             sent {}{ratio}; the last {} -> {}",
            num(&s, "/proxy/calls"),
            num(&s, "/proxy/rewritten"),
            num(&s, "/proxy/history_tokens_total"),
            num(&s, "/proxy/sent_tokens_total"),
            num(&s, "/proxy/last_history_tokens"),
            num(&s, "/proxy/last_sent_tokens"),
        );
    }
    outln!(
        out,
        "observed: {} by the agent, {} weakly attributed, {} by scans, {} unattributed",
        num(&s, "/world/by_class/agent"),
        num(&s, "/world/by_class/weak"),
        num(&s, "/world/by_class/scan"),
        num(&s, "/world/by_class/unattributed"),
    );
    // Echoes are shown apart so a user can tell the watcher is working without mistaking the
    // mount's own writes for someone else's. Reused renders need the watcher, so their flag
    // says whether there is one.
    if let Some(at) = s.pointer("/world/unwatched").and_then(Value::as_str) {
        let at = if at.is_empty() { "SOURCE" } else { at };
        outln!(
            out,
            "behind:   no longer all watched: inotify's watch limit was reached at {at}, so \
             changes behind the mount there may go unseen by the world; the kernel caches \
             nothing since (slower, never stale). Raise fs.inotify.max_user_watches and mount \
             again"
        );
    } else if s.pointer("/renders/enabled").and_then(Value::as_bool) == Some(false) {
        outln!(
            out,
            "behind:   not watched (--no-watch, or the watcher could not start: see the mount's \
             log): changes behind the mount are not reported"
        );
    } else {
        // Found only by counting a file again: while nothing was mounted, or while the
        // watcher's queue overflowed.
        let unseen = match s
            .pointer("/world/changed_unobserved")
            .and_then(Value::as_u64)
        {
            Some(n) if n > 0 => format!("; {n} found changed when counted again after a restart"),
            _ => String::new(),
        };
        let with = s
            .pointer("/watcher")
            .and_then(Value::as_str)
            .map(|w| format!("; watched with {w}"))
            .unwrap_or_default();
        outln!(
            out,
            "behind:   changes made behind the mount {}; echoes of the mount's own writes {} \
             (re-checked, not counted as changes){unseen}{with}",
            num(&s, "/world/by_class/external"),
            num(&s, "/world/by_class/echo"),
        );
    }
    outln!(
        out,
        "kept:     {}",
        kept_line(s.pointer("/world/kept"), s.pointer("/world/not_kept"))
    );
    // Starts that wait long are calls whose end nobody recorded: a PostToolUse hook missing
    // from the settings leaves one per Bash call.
    let begun = match s.pointer("/commands_begun").and_then(Value::as_u64) {
        Some(n) if n > 0 => format!("; {n} begun and not recorded yet"),
        _ => String::new(),
    };
    // Results no file keeps current (a subagent's report, an output nothing tracks), as they were.
    let kept = match s
        .pointer("/commands_kept_as_results")
        .and_then(Value::as_u64)
    {
        Some(1) => " (1 of them an earlier result, kept as it was)".to_owned(),
        Some(n) if n > 0 => format!(" ({n} of them earlier results, kept as they were)"),
        _ => String::new(),
    };
    let cached = num(&s, "/commands_cached");
    let outputs = if cached == "1" { "output" } else { "outputs" };
    outln!(
        out,
        "commands: {cached} {outputs} cached{kept}; {} dropped as what they depend on changed, {} \
         oldest dropped for room{begun}",
        num(&s, "/drops/commands_invalidated"),
        num(&s, "/drops/commands_for_room"),
    );
    outln!(
        out,
        "drops:    observations {}, to subscribers {}, journal {}",
        num(&s, "/drops/observations"),
        num(&s, "/drops/subscription_observations"),
        num(&s, "/drops/journal"),
    );
    outln!(
        out,
        "activity: turn {}, last seq {}, {} connections open, {} requests, projection.get p50 {} µs \
         p99 {} µs",
        num(&s, "/world/turn"),
        num(&s, "/observations/last_seq"),
        num(&s, "/connections/open"),
        num(&s, "/connections/requests"),
        num(&s, "/latency/projection.get/p50_us"),
        num(&s, "/latency/projection.get/p99_us"),
    );
    // What `worldfs proxy` knows the conversation by; none is the first thing to check when it
    // sends every call as it came.
    let goal = match client.call("goal.get", json!({})) {
        Ok(goal) => goal,
        Err(e) => {
            emit(&out)?;
            return Err(Failure::Failed(e.into()));
        }
    };
    // The other sessions' goals, when several share the mount, the current one last.
    let all = if goal.get("conversations").and_then(Value::as_u64) > Some(1) {
        client
            .call("goal.list", json!({}))
            .ok()
            .and_then(|l| l["conversations"].as_array().cloned())
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let current = all.last().map_or_else(String::new, own_files);
    outln!(out, "goal:     {}{current}", goal_line(&goal));
    for c in all.iter().rev().skip(1) {
        let id = c["session"].as_str().unwrap_or("(no session)");
        outln!(
            out,
            "          session {id}: {}{}",
            goal_line(c),
            own_files(c)
        );
    }
    // A session the hooks told of, though no file registers them: given on the command line.
    let heard = goal.get("session").and_then(Value::as_str).is_some();
    outln!(out, "hooks:    {}", hooks_line(Path::new(&mount), heard));
    // The agent's task list, when a harness keeps one (`worldfs hook` does for Claude Code).
    let state = match client.call("state.get", json!({})) {
        Ok(state) => state,
        Err(e) => {
            emit(&out)?;
            return Err(Failure::Failed(e.into()));
        }
    };
    if let Some(tasks) = state.pointer("/state/tasks").and_then(Value::as_array)
        && !tasks.is_empty()
    {
        let count = |status: &str| tasks.iter().filter(|t| t["status"] == status).count();
        outln!(
            out,
            "tasks:    {} ({} done, {} in progress, {} to do)",
            tasks.len(),
            count("completed"),
            count("in_progress"),
            count("pending"),
        );
    }
    emit(&out)
}

/// The `hooks:` line of `worldfs status`: which agents' hook files of the project (or the
/// user's) run `worldfs hook`, and what an older install lacks. Without them the mount never
/// hears the goal, the steps or the outputs.
/// What the last projection served left out: what a user asks after the agent lost sight of
/// something (`worldfs watch` shows it for every one).
fn last_projection_line(last: &Value) -> String {
    use crate::cli_watch::{clock, cost, left_out, short_id, thousands};
    let u = |k: &str| last.get(k).and_then(Value::as_u64).unwrap_or(0);
    let whose = match last.get("session").and_then(Value::as_str) {
        Some(s) => format!(", session {}", short_id(s)),
        None => String::new(),
    };
    let total = u("evicted_total");
    let head = format!(
        "left out: {} by the last projection ({}{whose}: {})",
        if total == 0 {
            "nothing".to_owned()
        } else {
            total.to_string()
        },
        clock(u("time_ms")),
        cost(last),
    );
    let listed: Vec<String> = last
        .get("evicted")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|d| {
            let (what, tokens, why) = left_out(d);
            format!("{what} ({} tokens, {why})", thousands(tokens))
        })
        .collect();
    if listed.is_empty() {
        return match total {
            0 => head,
            // Its request asked for no list (`evicted_limit` 0).
            _ => format!("{head}: `worldfs projection --full` lists them"),
        };
    }
    let more = match total.saturating_sub(listed.len() as u64) {
        0 => String::new(),
        n => format!(", and {n} more (`worldfs projection --full` lists them)"),
    };
    format!("{head}: {}{more}", listed.join(", "))
}

fn hooks_line(project: &Path, heard: bool) -> String {
    use crate::claude_hook::install::{self, Agent};
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let codex_home = std::env::var_os("CODEX_HOME").map(PathBuf::from);
    let found = install::installed(
        &[project.to_path_buf()],
        home.as_deref(),
        codex_home.as_deref(),
    );
    if found.is_empty() && heard {
        return "none of the project's files run `worldfs hook`, but the session's hooks tell \
                the mount (given on the agent's command line, as `worldfs run` gives them; \
                `worldfs hook --install` registers them for every start)"
            .into();
    }
    if found.is_empty() {
        return "none run `worldfs hook` (run `worldfs hook --install` in the project; for \
                Codex, `--install --codex`)"
            .into();
    }
    found
        .iter()
        .map(|(file, agent, missing)| {
            let (name, flag) = match agent {
                Agent::ClaudeCode => ("Claude Code", ""),
                Agent::Codex => ("Codex", " --codex"),
            };
            if missing.is_empty() {
                format!("{name} ({})", file.display())
            } else {
                format!(
                    "{name} ({}, without {}: run `worldfs hook --install{flag}` again)",
                    file.display(),
                    missing.join(", ")
                )
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What a `goal.list` entry says of the session's own view of the world: its steps, and the
/// files they touched (which the other sessions' projections leave out).
fn own_files(c: &Value) -> String {
    match (c["steps"].as_u64(), c["files"].as_u64()) {
        (Some(steps), Some(files)) if steps > 0 => {
            let s = |n: u64| if n == 1 { "" } else { "s" };
            format!(
                "; {steps} step{} and {files} file{} of its own",
                s(steps),
                s(files)
            )
        }
        _ => String::new(),
    }
}

/// The `goal:` line of `worldfs status`: the first prompt's first line, cut, and what followed.
fn goal_line(answer: &Value) -> String {
    const SHOWN: usize = 60;
    let Some(goal) = answer.get("goal").and_then(Value::as_str) else {
        return "none (a harness sets it; for Claude Code, `worldfs hook --install`)".into();
    };
    let mut prompts = goal.split(crate::claude_hook::LATER_PROMPT);
    let first = prompts.next().unwrap_or_default().trim();
    let line = first.lines().next().unwrap_or_default();
    let mut shown: String = line.chars().take(SHOWN).collect();
    if shown.len() < first.len() {
        shown.push_str("...");
    }
    let mut notes = Vec::new();
    match prompts.count() {
        0 => {}
        1 => notes.push("1 later prompt".to_owned()),
        n => notes.push(format!("{n} later prompts")),
    }
    if answer.get("compacted").and_then(Value::as_bool) == Some(true) {
        notes.push("the conversation was compacted".into());
    }
    if answer.get("resumed").and_then(Value::as_bool) == Some(true) {
        notes.push("a conversation was resumed: the proxy reads which from its next call".into());
    }
    // With several sessions on the mount, the goal shown is the one of the session that told
    // the mount something last.
    if let Some(n) = answer.get("conversations").and_then(Value::as_u64)
        && n > 1
    {
        match answer.get("session").and_then(Value::as_str) {
            Some(id) => notes.push(format!("session {id}, heard from last, of {n}")),
            None => notes.push(format!("the session heard from last, of {n}")),
        }
    }
    if notes.is_empty() {
        format!("{shown:?}")
    } else {
        format!("{shown:?} ({})", notes.join("; "))
    }
}

/// The `kept:` line of `worldfs status`: where the world is kept across restarts and how
/// saving it goes.
fn kept_line(kept: Option<&Value>, not_kept: Option<&Value>) -> String {
    let Some(k) = kept.filter(|k| !k.is_null()) else {
        return match not_kept.and_then(Value::as_str) {
            Some(why) => format!("not across restarts: {why}"),
            None => "not across restarts".into(),
        };
    };
    let ago = |t: Option<&Value>| {
        let secs = t?.get("secs_since_epoch")?.as_u64()?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?
            .as_secs();
        Some(format!("{} s ago", now.saturating_sub(secs)))
    };
    let n = |p: &str| k.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    let mut line = format!(
        "{}; saved {} times",
        k.get("path").and_then(Value::as_str).unwrap_or("?"),
        n("/saves")
    );
    if let Some(when) = ago(k.get("last_saved")) {
        line += &format!(
            ", last {when} ({} KiB in {} ms)",
            n("/last_save_bytes").div_ceil(1024),
            n("/last_save_ms")
        );
    }
    if let Some(r) = k.get("restored").filter(|r| !r.is_null()) {
        let rn = |f: &str| r.get(f).and_then(Value::as_u64).unwrap_or(0);
        line += &format!(
            "; restored at mount: {} entries, {} command outputs ({} dropped as what they \
             depend on may have changed meanwhile)",
            rn("entries"),
            rn("commands"),
            rn("commands_dropped")
        );
    }
    if let Some(a) = k.get("set_aside").filter(|a| !a.is_null()) {
        let s = |f: &str| a.get(f).and_then(Value::as_str).unwrap_or("?");
        line += &format!(
            "; started empty, the file found set aside as {}: {}",
            s("path"),
            s("why")
        );
    }
    if n("/save_errors") > 0 {
        line += &format!(
            "; {} saves failed, the last: {}",
            n("/save_errors"),
            k.get("last_error").and_then(Value::as_str).unwrap_or("?")
        );
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_goal_line_says_the_first_prompt_and_what_followed() {
        assert!(goal_line(&json!({"goal": null})).starts_with("none"));
        assert_eq!(
            goal_line(&json!({"goal": "Fix the parser", "compacted": false})),
            "\"Fix the parser\""
        );
        let long = format!("{}\nsecond line", "a".repeat(70));
        let goal =
            format!("{long}\n\nThen the user asked:\nand lint\n\nThen the user asked:\nship");
        assert_eq!(
            goal_line(&json!({"goal": goal, "compacted": true})),
            format!(
                "\"{}...\" (2 later prompts; the conversation was compacted)",
                "a".repeat(60)
            )
        );
        let two_lines = json!({"goal": "Fix it\nin src/", "compacted": false});
        assert_eq!(goal_line(&two_lines), "\"Fix it...\"");
        let resumed = json!({"goal": "Fix it", "compacted": false, "resumed": true});
        assert!(
            goal_line(&resumed).ends_with(
                "(a conversation was resumed: the proxy reads which from its next call)"
            )
        );
        let two = json!({"goal": "Fix it", "compacted": false, "conversations": 2});
        assert_eq!(
            goal_line(&two),
            "\"Fix it\" (the session heard from last, of 2)"
        );
        let named = json!({"goal": "Fix it", "compacted": false, "conversations": 2,
                           "session": "0d6f"});
        assert_eq!(
            goal_line(&named),
            "\"Fix it\" (session 0d6f, heard from last, of 2)"
        );
        let one = json!({"goal": "Fix it", "compacted": false, "conversations": 1});
        assert_eq!(goal_line(&one), "\"Fix it\"");
        let listed = json!({"goal": "Fix it", "steps": 12, "files": 1});
        assert_eq!(own_files(&listed), "; 12 steps and 1 file of its own");
        assert_eq!(
            own_files(&json!({"goal": "Fix it", "steps": 0, "files": 0})),
            ""
        );
        assert_eq!(
            own_files(&json!({"goal": "Fix it"})),
            "",
            "an older daemon's"
        );
    }
}
