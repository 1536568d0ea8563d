//! `worldfs proxy`: Claude Code's (and Codex's) requests sent with the projection instead of
//! the history.
//!
//! Claude Code sends every model call to `ANTHROPIC_BASE_URL`. Pointed at this proxy, each
//! `/v1/messages` (and `/v1/messages/count_tokens`, so Claude Code's own count of its context
//! agrees with what is sent) of the session's main conversation is rewritten (see [`rewrite`]):
//! the history between the first message and the last turn becomes the mount's projection of
//! the present. Codex's calls (the Responses API: a path ending in `/responses`, from a model
//! provider whose `base_url` is this proxy) are rewritten the same way ([`responses`]).
//! Everything else is forwarded byte for byte, and every answer streams back as it arrives
//! (server-sent events unbuffered), with upstream errors unchanged.
//!
//! The proxy never stands between the agent and the model: when the mount cannot be asked, or
//! the rewritten request would break a rule of the API, the original request goes upstream.
//! With `--observe` nothing is ever rewritten; each call of the main conversation only prints
//! what would have been sent in its place.

pub mod responses;
pub mod rewrite;

mod account;
mod attached;
mod encoding;
mod forward;
mod session;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use crate::cli::SocketArg;
use crate::cli_client::resolve_socket;
use crate::socket::Client;
use crate::socket::client::of_session;

/// The socket answers a projection in milliseconds; a daemon that does not must not hold the
/// agent's request for long.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(5);

/// How the proxy was asked to run (`worldfs proxy --help`).
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    pub listen: SocketAddr,
    pub upstream: String,
    pub budget: Option<u64>,
    pub observe: bool,
    /// The agent gets `worldfs hook` other than from a settings file: none is looked for.
    pub hooks_elsewhere: bool,
    pub socket: SocketArg,
}

/// What the proxy did with the conversation calls, for the summary when it stops.
#[derive(Debug, Default)]
struct Counts {
    rewritten: AtomicU64,
    untouched: AtomicU64,
    failed: AtomicU64,
}

struct State {
    cfg: ProxyConfig,
    socket: PathBuf,
    client: reqwest::Client,
    counts: Counts,
    /// Token counts of messages seen, for the accounting.
    memo: crate::world::tokens::TokenCounter,
    /// Calls whose account the mount has not been told yet (`account::record` under way).
    recording: AtomicU64,
}

/// How long a stopping proxy waits for the accounts of its last calls to reach the mount: the
/// first call's counts the tokens with a tokenizer it loads first.
const RECORD_WAIT: Duration = Duration::from_secs(5);

/// Runs the proxy until it is killed.
pub fn run(cfg: ProxyConfig) -> anyhow::Result<()> {
    let upstream = reqwest::Url::parse(&cfg.upstream).ok();
    if !upstream.is_some_and(|u| matches!(u.scheme(), "http" | "https") && u.host().is_some()) {
        anyhow::bail!(
            "--upstream {:?}: give an http or https URL, such as https://api.anthropic.com",
            cfg.upstream
        );
    }
    let socket = resolve_socket(&cfg.socket)?;
    // Read before leaving it: the project is the current directory unless `-C` names one.
    let here = match &cfg.socket.dir {
        Some(d) => std::fs::canonicalize(d).ok(),
        None => std::env::current_dir().ok(),
    };
    // Started inside the mount (how it finds the socket), it must not keep the mount busy: an
    // unmount would only detach it.
    if let Err(e) = std::env::set_current_dir("/") {
        tracing::debug!("leaving the current directory: {e}");
    }
    // Fail at start, not at the agent's first call, when the mount is not there.
    let hello = Client::connect(&socket, SOCKET_TIMEOUT)
        .and_then(|mut c| c.call("initialize", json!({})))
        .with_context(|| format!("asking the mount's socket {}", socket.display()))?;
    let mount_point = hello
        .pointer("/root/mount_point")
        .and_then(Value::as_str)
        .map(PathBuf::from);
    let places = hook_places(here, mount_point);
    let unhooked = (!cfg.hooks_elsewhere)
        .then(|| without_hooks(&places))
        .flatten();
    let outdated = outdated_hooks(&places);
    if let Some(dir) = unhooked {
        crate::say!(
            "worldfs: warning: no Claude Code settings (nor Codex hooks) of {} register \
             `worldfs hook`, so the mount will not know the session's goal and every call will \
             go as it came; run `worldfs hook --install` (for Codex: `--install --codex`) there",
            dir.display()
        );
    }
    for (file, agent, missing) in outdated {
        crate::say!(
            "{}",
            crate::claude_hook::install::outdated_warning(&file, agent, &missing)
        );
    }
    let client = reqwest::Client::builder()
        // Claude Code's calls stream for minutes; only connecting is bounded.
        .connect_timeout(Duration::from_secs(30))
        .build()
        .context("building the HTTPS client")?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the proxy's runtime")?;
    let state = Arc::new(State {
        cfg,
        socket,
        client,
        counts: Counts::default(),
        memo: crate::world::tokens::TokenCounter::new(account::MEMO_MESSAGES),
        recording: AtomicU64::new(0),
    });
    runtime.block_on(forward::serve(Arc::clone(&state)))?;
    // What the mount says of the session after the proxy has stopped (`worldfs run`, `worldfs
    // status`) must hold every call the proxy took, the last one's included.
    let deadline = std::time::Instant::now() + RECORD_WAIT;
    while state.recording.load(Ordering::SeqCst) > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
    crate::say!(
        "worldfs: proxy stopped; model calls: {} sent with the projection, {} as they came, {} as \
         they came because the projection failed",
        n(&state.counts.rewritten),
        n(&state.counts.untouched),
        n(&state.counts.failed),
    );
    // Connections still open (a stream under way) must not hold the exit.
    runtime.shutdown_background();
    Ok(())
}

/// The project's directory (the first of `places`) when no Claude Code settings or Codex hooks
/// of it (nor of the mount's root, nor the user's) register `worldfs hook`: without it the
/// mount has no goal, and every call goes upstream as it came.
fn without_hooks(places: &HookPlaces) -> Option<PathBuf> {
    let (dirs, home, codex_home) = places;
    let first = dirs.first()?;
    (!crate::claude_hook::install::registered(dirs, home.as_deref(), codex_home.as_deref()))
        .then(|| first.clone())
}

/// The hook files of the project that run `worldfs hook` but not on every event this version
/// needs, with what they lack.
fn outdated_hooks(
    places: &HookPlaces,
) -> Vec<(
    PathBuf,
    crate::claude_hook::install::Agent,
    Vec<&'static str>,
)> {
    let (dirs, home, codex_home) = places;
    crate::claude_hook::install::outdated(dirs, home.as_deref(), codex_home.as_deref())
}

/// Where hooks of the project are looked for: the project's directories (the current one or
/// `-C DIR`, and the mount's root), the user's home, and Codex's home.
type HookPlaces = (Vec<PathBuf>, Option<PathBuf>, Option<PathBuf>);

/// `here` (the current directory or `-C DIR`) is the project only when it is in the mount the
/// socket serves: a proxy started elsewhere with `--socket` is for that mount, whose root
/// (`mount_point`, from the daemon) is then the only project directory.
fn hook_places(here: Option<PathBuf>, mount_point: Option<PathBuf>) -> HookPlaces {
    let mut dirs = Vec::new();
    match (here, mount_point) {
        (Some(here), Some(root)) => {
            if here.starts_with(&root) && here != root {
                dirs.push(here);
            }
            dirs.push(root);
        }
        (Some(here), None) => dirs.push(here),
        (None, Some(root)) => dirs.push(root),
        (None, None) => {}
    }
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let codex_home = std::env::var_os("CODEX_HOME").map(PathBuf::from);
    (dirs, home, codex_home)
}

/// Outcome of preparing one request body.
pub(crate) enum Prepared {
    Rewritten(bytes::Bytes),
    Untouched,
}

/// Decides what goes upstream for a `/v1/messages` body (or Codex's `.../responses`); blocking
/// (socket calls). A call of the main conversation also gives what to account for it, off the
/// call's path. `session_header`: the value of the header the client names its session in;
/// `subagent`: the call carries the header Claude Code names a subagent in.
fn prepare(
    state: &State,
    path: &str,
    body: &[u8],
    coding: Result<Option<encoding::Coding>, String>,
    session_header: Option<&[u8]>,
    subagent: bool,
) -> (Prepared, Option<account::Call>) {
    // A compressed body is read decoded, and goes upstream compressed the same way.
    let coding = match coding {
        Ok(c) => c,
        Err(name) => {
            let why = rewrite::Skip::Encoded(format!("a coding not read here: {name}"));
            return (untouched(state, path, &why, true), None);
        }
    };
    let decoded;
    let body = match coding {
        None => body,
        Some(c) => match encoding::decode(c, body, MAX_DECODED_BYTES) {
            Ok(d) => {
                decoded = d;
                decoded.as_slice()
            }
            Err(e) => {
                let why = rewrite::Skip::Encoded(format!("{}, but does not decode: {e}", c.name()));
                return (untouched(state, path, &why, true), None);
            }
        },
    };
    let parsed: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => return (untouched(state, path, &rewrite::Skip::NotJson, false), None),
    };
    if subagent {
        return (
            untouched(state, path, &rewrite::Skip::Subagent, false),
            None,
        );
    }
    // Codex's calls (the Responses API) and Claude Code's (the Messages API).
    let codex = path.ends_with("/responses");
    let rewritten = if codex {
        let session = session::of_codex_call(session_header, &parsed);
        try_rewrite_responses(state, &parsed, session)
    } else {
        let session = session::of_call(session_header, &parsed);
        try_rewrite(state, &parsed, session)
    };
    match rewritten {
        Ok(Ok((out, summary))) => {
            let prepared = if state.cfg.observe {
                state.counts.untouched.fetch_add(1, Ordering::Relaxed);
                Prepared::Untouched
            } else {
                let bytes = serde_json::to_vec(&out)
                    .map_err(|e| format!("serializing the request: {e}"))
                    .and_then(|b| match coding {
                        None => Ok(b),
                        Some(c) => encoding::encode(c, &b)
                            .map_err(|e| format!("compressing the request ({}): {e}", c.name())),
                    });
                match bytes {
                    Ok(bytes) => {
                        tracing::info!("{path}: sent {summary}");
                        state.counts.rewritten.fetch_add(1, Ordering::Relaxed);
                        Prepared::Rewritten(bytes.into())
                    }
                    Err(why) => return (failed(state, path, &why), None),
                }
            };
            let rewritten = matches!(prepared, Prepared::Rewritten(_));
            let call = account::Call {
                path: path.to_owned(),
                summary,
                original: parsed,
                sent: out,
                rewritten,
            };
            (prepared, Some(call))
        }
        Ok(Err(skip)) => {
            // A call that looks like the session's own (it can Read and start subagents) but is
            // not taken for it is the one a user needs to hear about at `-v`.
            let main = if codex {
                responses::looks_main(&parsed)
            } else {
                rewrite::looks_main(&parsed)
            };
            let surprising = matches!(
                skip,
                rewrite::Skip::NoGoal
                    | rewrite::Skip::OtherConversation
                    | rewrite::Skip::UnknownItems
            ) && main;
            (untouched(state, path, &skip, surprising), None)
        }
        Err(e) => (failed(state, path, &format!("{e:#}")), None),
    }
}

fn untouched(state: &State, path: &str, why: &rewrite::Skip, surprising: bool) -> Prepared {
    if surprising {
        tracing::info!("{path}: sent as it came: {why}");
    } else {
        tracing::debug!("{path}: sent as it came: {why}");
    }
    state.counts.untouched.fetch_add(1, Ordering::Relaxed);
    Prepared::Untouched
}

fn failed(state: &State, path: &str, why: &str) -> Prepared {
    tracing::warn!("{path}: sent as it came, the projection could not replace its history: {why}");
    state.counts.failed.fetch_add(1, Ordering::Relaxed);
    Prepared::Untouched
}

/// A compressed body that decodes to more than this is not read: as much as the proxy takes
/// plain.
const MAX_DECODED_BYTES: usize = 256 * 1024 * 1024;

/// The rewritten body and a one-line account of it, or why it stays as it is.
type Rewrite = Result<(Value, String), rewrite::Skip>;

/// What the mount knows of the call's session (`goal.get`), and the session asked for then.
fn known_session(
    c: &mut Client,
    session: Option<String>,
) -> anyhow::Result<(Value, Option<String>)> {
    let known = c.call("goal.get", of_session(json!({}), session.as_deref()))?;
    // A session the hook never told of (no hook registered for it, or a mount set up by hand):
    // the conversation under way is the best guess, and a wrong one costs nothing, since a call
    // is only rewritten when its conversation is the goal's.
    if session.is_some() && known.get("session").is_none_or(Value::is_null) {
        let known = c.call("goal.get", json!({}))?;
        let session = known
            .get("session")
            .and_then(Value::as_str)
            .map(str::to_owned);
        return Ok((known, session));
    }
    Ok((known, session))
}

/// Codex's call: the history replaced by the projection's text ([`responses`]).
fn try_rewrite_responses(
    state: &State,
    body: &Value,
    session: Option<String>,
) -> anyhow::Result<Rewrite> {
    let mut c = Client::connect(&state.socket, SOCKET_TIMEOUT)?;
    let (known, session) = known_session(&mut c, session)?;
    let session = session.as_deref();
    let goal = known.get("goal").and_then(Value::as_str);
    let plan = match responses::plan(body, goal) {
        Ok(p) => p,
        Err(skip) => return Ok(Err(skip)),
    };
    let mut params = json!({
        "format": "text",
        "absolute_paths": true,
        "last_step": true,
        "shown_calls": plan.tail_calls,
    });
    let shows = responses::instruction_files(body, &plan);
    if !shows.is_empty() {
        params["request_shows"] = shows
            .iter()
            .map(|(path, hash)| json!({ "path": path, "hash": hash }))
            .collect();
    }
    if let Some(b) = state.cfg.budget {
        params["budget"] = json!(b);
    }
    let p = c.call("projection.get", of_session(params, session))?;
    let text = p
        .get("body")
        .and_then(Value::as_str)
        .context("the projection has no text")?;
    let out = responses::splice(body, &plan, text)?;
    let count = |v: &Value| v.get("input").and_then(Value::as_array).map_or(0, Vec::len);
    let summary = format!(
        "{} items ({} tokens of projection, budget {}) instead of {}{}",
        count(&out),
        p.get("tokens").and_then(Value::as_u64).unwrap_or(0),
        p.get("budget").and_then(Value::as_u64).unwrap_or(0),
        count(body),
        session.map_or_else(String::new, |s| format!(", for session {s}")),
    );
    Ok(Ok((out, summary)))
}

fn try_rewrite(state: &State, body: &Value, session: Option<String>) -> anyhow::Result<Rewrite> {
    let mut c = Client::connect(&state.socket, SOCKET_TIMEOUT)?;
    let (known, session) = known_session(&mut c, session)?;
    let session = session.as_deref();
    let flag = |k: &str| known.get(k).and_then(Value::as_bool) == Some(true);
    let goal = known.get("goal").and_then(Value::as_str).map(str::to_owned);
    let compacted = flag("compacted");
    let mut plan = rewrite::plan(body, goal.as_deref(), compacted);
    // After a resume, the first call of a main conversation says which conversation it is:
    // the one the goal is of (the resume is then matched as it is), or another, whose goal is
    // read from the call.
    if flag("resumed") && rewrite::looks_main(body) {
        let adopted = match &plan {
            Ok(_) => goal.clone().map(|g| (g, compacted)),
            Err(rewrite::Skip::NoGoal | rewrite::Skip::OtherConversation) => {
                rewrite::conversation_goal(body)
            }
            Err(_) => None,
        };
        if let Some((g, was_compacted)) = adopted {
            c.call(
                "goal.adopt",
                of_session(json!({ "goal": g, "compacted": was_compacted }), session),
            )?;
            if plan.is_err() {
                tracing::info!(
                    "the conversation resumed is another one: its goal is now read from it ({} \
                     prompts{})",
                    g.matches(crate::claude_hook::LATER_PROMPT).count() + 1,
                    if was_compacted { ", compacted" } else { "" }
                );
                plan = rewrite::plan(body, Some(&g), was_compacted);
            }
        }
    }
    let plan = match plan {
        Ok(p) => p,
        Err(skip) => return Ok(Err(skip)),
    };
    let mut params = json!({
        "format": "anthropic",
        "tool_name": rewrite::READ_TOOL,
        "path_param": "file_path",
        "absolute_paths": true,
        "max_breakpoints": plan.breakpoints,
        "cache_ttl": plan.cache_ttl,
        "last_step": false,
    });
    if let Some(g) = rewrite::read_gutter(body) {
        params["line_numbers"] = json!(g);
    }
    if let Some(b) = state.cfg.budget {
        params["budget"] = json!(b);
    }
    let shows = attached::in_request(body, &plan);
    if !shows.is_empty() {
        params["request_shows"] = shows
            .iter()
            .map(|s| json!({ "path": s.path, "hash": s.hash }))
            .collect();
    }
    let outputs = attached::outputs_in_request(body, &plan);
    if !outputs.is_empty() {
        params["request_outputs"] = json!(outputs);
    }
    let params = of_session(params, session);
    let p = c.call_or_older("projection.get", params, "request_outputs")?;
    let messages = p
        .pointer("/body/messages")
        .and_then(Value::as_array)
        .context("the projection has no messages")?;
    let out = rewrite::splice(body, &plan, messages)?;
    let before = body
        .get("messages")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let after = out
        .get("messages")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let in_request = p
        .get("in_request")
        .and_then(Value::as_array)
        .map_or(0, Vec::len);
    let summary = format!(
        "{after} messages ({} tokens of projection, budget {}{}) instead of {before}{}",
        p.get("tokens").and_then(Value::as_u64).unwrap_or(0),
        p.get("budget").and_then(Value::as_u64).unwrap_or(0),
        match in_request {
            0 => String::new(),
            1 => "; 1 file left out, the request shows it as it is".to_owned(),
            n => format!("; {n} files left out, the request shows them as they are"),
        },
        // With two sessions on the mount, which one each call was of.
        session.map_or_else(String::new, |s| format!(", for session {s}")),
    );
    Ok(Ok((out, summary)))
}
