//! `projection.get`: the one method that renders, so the only one whose reply may come
//! pre-serialized from the render cache; its parameters are checked here before any work. And
//! `projections.subscribe`: each projection served, told to whoever watches (`worldfs watch`).

use std::sync::Arc;
use std::time::SystemTime;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Connection, MAX_BUDGET, MAX_REQUEST_SHOWS, Shared, ingest_barrier, rel_path, session};
use crate::socket::protocol::{Reply, RpcError, code};
use crate::socket::render::{
    CacheTtl, DEFAULT_EVICTED_LIMIT, Format, LineNumbers, ProjectionParams, StepOutput,
};
use crate::socket::subscriptions;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ProjectionGet {
    #[serde(default)]
    format: Option<Format>,
    #[serde(default)]
    budget: Option<u64>,
    #[serde(default)]
    policy: Option<String>,
    #[serde(default)]
    tool_name: Option<String>,
    #[serde(default)]
    path_param: Option<String>,
    #[serde(default)]
    max_breakpoints: Option<u8>,
    #[serde(default)]
    cache_ttl: Option<CacheTtl>,
    #[serde(default)]
    absolute_paths: bool,
    #[serde(default)]
    step_output: StepOutput,
    #[serde(default = "shows_last_step")]
    last_step: bool,
    #[serde(default)]
    line_numbers: Option<LineNumbers>,
    #[serde(default = "default_evicted_limit")]
    evicted_limit: usize,
    #[serde(default)]
    session: Option<String>,
    #[serde(default)]
    request_shows: Vec<RequestShows>,
    #[serde(default)]
    request_outputs: Vec<String>,
    #[serde(default)]
    shown_calls: Vec<String>,
}

/// A file the client's request shows whole.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestShows {
    path: String,
    hash: String,
}

/// Calls a request's last turn shows: a turn's parallel calls, a few dozen at most.
const MAX_SHOWN_CALLS: usize = 256;

fn shows_last_step() -> bool {
    true
}

fn default_evicted_limit() -> usize {
    DEFAULT_EVICTED_LIMIT
}

/// Tool and parameter names as the provider APIs accept them.
fn check_name(what: &str, v: &Option<String>) -> Result<(), RpcError> {
    if let Some(n) = v
        && (n.is_empty()
            || n.len() > 64
            || !n
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
    {
        return Err(RpcError::invalid_params(format!(
            "projection.get: {what} {n:?} must be 1 to 64 characters of [a-zA-Z0-9_-]"
        )));
    }
    Ok(())
}

pub(super) fn projection_get(shared: &Shared, p: ProjectionGet) -> Result<Reply, RpcError> {
    let w = &*shared.world;
    let budget = p.budget.unwrap_or(w.config().budget.tokens);
    if budget == 0 || budget > MAX_BUDGET {
        return Err(RpcError::invalid_params(format!(
            "projection.get: budget {budget} is out of range: ask for 1 to {MAX_BUDGET} tokens"
        ))
        .with_data(json!({ "min_budget": 1, "max_budget": MAX_BUDGET })));
    }
    if let Some(n) = p.max_breakpoints
        && n > 4
    {
        return Err(RpcError::invalid_params(format!(
            "projection.get: max_breakpoints {n}: the API allows at most 4"
        )));
    }
    check_name("tool_name", &p.tool_name)?;
    check_name("path_param", &p.path_param)?;
    if let Some(name) = &p.policy
        && w.policy(name).is_none()
    {
        return Err(RpcError::invalid_params(format!(
            "projection.get: unknown policy {name:?}"
        )));
    }
    let named = session("projection.get", &p.session)?.map(str::to_owned);
    let of_session = named.clone();
    if p.request_shows.len() > MAX_REQUEST_SHOWS {
        return Err(RpcError::invalid_params(format!(
            "projection.get: request_shows names {} files; at most {MAX_REQUEST_SHOWS}",
            p.request_shows.len()
        )));
    }
    if let Some(bad) = p
        .request_shows
        .iter()
        .find(|s| s.hash.len() != 64 || !s.hash.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(RpcError::invalid_params(format!(
            "projection.get: request_shows: the hash of {:?} is not 64 hex digits (blake3)",
            bad.path
        )));
    }
    if p.request_outputs.len() > MAX_REQUEST_SHOWS
        || p.request_outputs
            .iter()
            .any(|h| h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()))
    {
        return Err(RpcError::invalid_params(format!(
            "projection.get: request_outputs: at most {MAX_REQUEST_SHOWS} hashes, each 64 hex \
             digits (blake3)"
        )));
    }
    if p.shown_calls.len() > MAX_SHOWN_CALLS
        || p.shown_calls
            .iter()
            .any(|id| id.is_empty() || id.len() > 256)
    {
        return Err(RpcError::invalid_params(format!(
            "projection.get: shown_calls: at most {MAX_SHOWN_CALLS} call ids of 1 to 256 bytes"
        )));
    }
    let params = ProjectionParams {
        format: p.format.unwrap_or(Format::Anthropic),
        budget_tokens: budget,
        policy: p.policy,
        tool_name: p.tool_name,
        path_param: p.path_param,
        max_breakpoints: p.max_breakpoints,
        cache_ttl: p.cache_ttl,
        absolute_paths: p.absolute_paths,
        step_output: p.step_output,
        last_step: p.last_step,
        shown_calls: p.shown_calls,
        request_outputs: p
            .request_outputs
            .iter()
            .map(|h| h.to_ascii_lowercase())
            .collect(),
        line_numbers: p.line_numbers,
        evicted_limit: p.evicted_limit,
        session: named,
        request_shows: p
            .request_shows
            .into_iter()
            .map(|s| (s.path, s.hash.to_ascii_lowercase()))
            .collect(),
    };
    // What the client's request shows (files Claude Code attached to the conversation) its
    // session has seen, as it has what its tool calls read.
    if let Some(id) = &params.session
        && !params.request_shows.is_empty()
    {
        let shown: Vec<_> = params
            .request_shows
            .iter()
            .filter_map(|(raw, _)| rel_path(shared, raw).ok())
            .collect();
        let news = w.harness().conversations.note(Some(id), |c| {
            c.touched.touch_all(shown.iter().map(|p| p.as_path()))
        });
        if news {
            w.bump_generation();
        }
    }
    // What the mount saw before this request (the agent's last tool call) must be in the world.
    ingest_barrier(shared);
    // Outputs whose inputs changed must not reach the renderer.
    shared.validity.sweep(w);
    let r = shared
        .renders
        .get(w, params, shared.sees_changes_behind(), |p| {
            shared.renderer.render(w, p)
        })
        .map_err(|e| RpcError::new(code::PROJECTION_FAILED, format!("projection failed: {e}")))?;
    shared.tokens.projection(r.tokens);
    let now = SystemTime::now();
    if shared.subs.wants_projections() {
        shared
            .subs
            .publish_projection(&served(&r.json, of_session.as_deref(), now));
    }
    // Only the reply's handle: read back when `stats` asks, never on this path.
    *shared.last_served.0.lock() = Some((now, of_session, Arc::clone(&r.json)));
    Ok(Reply::Json(Arc::clone(&r.json)))
}

/// A projection served: when, for which conversation, and its reply.
type Served = (SystemTime, Option<String>, Arc<str>);

/// The last projection served.
#[derive(Default)]
pub(super) struct LastServed(parking_lot::Mutex<Option<Served>>);

/// Most of what the last projection left out that `stats` lists.
const LAST_LEFT_OUT_LISTED: usize = 5;

impl LastServed {
    /// `stats`' `last_projection`: what [`served`] tells of it, its list of what was left out
    /// cut to the first few; `null` before the first.
    pub(super) fn report(&self) -> Value {
        let Some((time, session, reply)) = self.0.lock().clone() else {
            return Value::Null;
        };
        let mut v = served(&reply, session.as_deref(), time);
        if let Some(list) = v.get_mut("evicted").and_then(Value::as_array_mut) {
            list.truncate(LAST_LEFT_OUT_LISTED);
        }
        v
    }
}

/// The fields of a reply its subscribers are told; the body is skipped unread.
#[derive(Deserialize)]
struct Told {
    #[serde(default)]
    format: Value,
    #[serde(default)]
    policy: Value,
    #[serde(default)]
    budget: Value,
    #[serde(default)]
    tokens: Value,
    #[serde(default)]
    turn: Value,
    #[serde(default)]
    entries: Value,
    #[serde(default)]
    evicted_total: Value,
    #[serde(default)]
    evicted: Value,
    #[serde(default)]
    withheld: Vec<serde::de::IgnoredAny>,
    #[serde(default)]
    in_request: Vec<serde::de::IgnoredAny>,
}

/// What a projection's subscribers are told of it: its reply without the body (what it cost,
/// and what it left out), for which conversation, and when.
fn served(reply: &str, session: Option<&str>, time: SystemTime) -> Value {
    let now = super::millis(time);
    let t: Told = match serde_json::from_str(reply) {
        Ok(t) => t,
        // The daemon's own serialization: cannot happen, and a watcher is no reason to fail.
        Err(e) => return json!({ "time_ms": now, "session": session, "error": e.to_string() }),
    };
    json!({
        "time_ms": now,
        "session": session,
        "format": t.format,
        "policy": t.policy,
        "budget": t.budget,
        "tokens": t.tokens,
        "turn": t.turn,
        "entries": t.entries,
        "evicted_total": t.evicted_total,
        "evicted": t.evicted,
        "withheld": t.withheld.len(),
        "in_request": t.in_request.len(),
    })
}

pub(super) fn projections_subscribe(
    shared: &Shared,
    conn: &dyn Connection,
) -> Result<Value, RpcError> {
    let tx = conn.notifications().map_err(RpcError::internal)?;
    match shared.subs.subscribe_projections(conn.id(), tx) {
        Ok(id) => Ok(json!({
            "subscription": id,
            "notification": subscriptions::PROJECTIONS,
        })),
        Err(n) => Err(RpcError::new(
            code::UNAVAILABLE,
            format!("this connection already has {n} subscriptions (the limit)"),
        )),
    }
}
