//! The methods: parameter checking and dispatch to the world, the harness state and the renderer.
//!
//! Every handler takes its params as a typed struct (`deny_unknown_fields`, so a misspelt
//! parameter is an error rather than silently ignored) and returns a JSON value or an
//! [`RpcError`] whose message says what to fix. Nothing here panics on client input.
//!
//! One file per method family, so a method's handler is found by its name: `projection`
//! (`projection.get`), `record` (steps, tools, command outputs, the proxy's calls),
//! `harness_state` (goal, structured state, framing), `entries` (the world's entries),
//! `observations` (`changes.since` and subscriptions), `daemon` (`initialize`, `stats`). This
//! file holds what they share: the server-wide state, the dispatch and the path checks.

mod daemon;
mod entries;
mod harness_state;
mod observations;
mod projection;
mod record;

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::Sender;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::begun::Begun;
use super::commands::Validity;
use super::metrics::{Histogram, ProxyAccount, TokenAccount};
use super::protocol::{self, Incoming, Parsed, Reply, RpcError};
use super::render::Renderer;
use super::render_cache::RenderCache;
use super::subscriptions::Registry;
use crate::fs::op_stats::OpStats;
use crate::world::World;

pub use entries::entry_json;

/// Protocol version reported by `initialize`; bumped on incompatible changes.
pub const PROTOCOL_VERSION: u32 = 1;
/// Largest token budget accepted; the world's configuration holds the same bound.
pub use crate::world::config::MAX_BUDGET;
/// Most files `projection.get`'s `request_shows` may name: Claude Code attaches five after a
/// compaction, and a prompt names a few.
pub const MAX_REQUEST_SHOWS: usize = 64;
/// Most items `entries.list` and `changes.since` return per call.
pub const MAX_LIST: usize = 10_000;
/// How long `command.record` waits for the world to catch up with the mount's observations.
const INGEST_BARRIER: Duration = Duration::from_millis(250);
/// How long `entries.forget` waits for the same. A forget applied before a read or rename the
/// mount had already answered is undone by it (the file comes back as the agent's), so it waits
/// for the world rather than guess, and fails only if the world lags this far behind.
const FORGET_BARRIER: Duration = Duration::from_secs(5);

/// Methods whose answer shows what the mount saw, besides those that wait on their own
/// (`projection.get` and the records): they first wait for the world to apply what the mount
/// emitted before the call, so a client sees what it just did, and a `last_seq` it notes before
/// running a command does not leave the command's own reads before it.
const AFTER_INGEST: &[&str] = &[
    "initialize",
    "commands.list",
    "entries.list",
    "entries.read",
    "entries.pin",
    "changes.since",
    "stats",
];

/// Every method, in the order `initialize` lists them.
pub const METHODS: &[&str] = &[
    "initialize",
    "projection.get",
    "goal.set",
    "goal.get",
    "goal.compacted",
    "goal.resumed",
    "goal.adopt",
    "goal.list",
    "step.record",
    "tools.declare",
    "command.begin",
    "command.abandon",
    "command.record",
    "commands.list",
    "commands.forget",
    "state.set",
    "state.patch",
    "state.get",
    "framing.set",
    "framing.patch",
    "framing.get",
    "entries.list",
    "entries.read",
    "entries.pin",
    "entries.unpin",
    "entries.forget",
    "entries.refused",
    "changes.since",
    "observations.subscribe",
    "observations.unsubscribe",
    "projections.subscribe",
    "projections.unsubscribe",
    "proxy.record",
    "stats",
];

/// Methods that change nothing a projection shows.
const READ_ONLY: &[&str] = &[
    "initialize",
    "projection.get",
    "goal.get",
    "goal.list",
    "command.begin",
    "command.abandon",
    "commands.list",
    "state.get",
    "framing.get",
    "entries.list",
    "entries.read",
    "changes.since",
    "observations.subscribe",
    "observations.unsubscribe",
    "projections.subscribe",
    "projections.unsubscribe",
    "proxy.record",
    "stats",
];

/// What the daemon serves, for `initialize`, `stats` and `worldfs status`.
#[derive(Debug, Clone, Default)]
pub struct DaemonInfo {
    pub socket: PathBuf,
    /// SOURCE, when serving a mount.
    pub source: Option<PathBuf>,
    /// Where SOURCE is mounted (the same path for an in-place mount).
    pub mount_point: Option<PathBuf>,
}

/// How many observations the mount has emitted so far (for the ingest barrier).
pub type EmittedFn = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Server-wide state shared by every connection. Nothing in it is a lock held across a request.
pub struct Shared {
    pub world: Arc<World>,
    pub renderer: Arc<dyn Renderer>,
    pub info: DaemonInfo,
    pub op_stats: Option<Arc<OpStats>>,
    pub emitted: Option<EmittedFn>,
    pub tokens: TokenAccount,
    pub proxy: ProxyAccount,
    pub validity: Validity,
    /// Commands begun and not recorded yet (`command.begin`).
    pub begun: Begun,
    pub subs: Arc<Registry>,
    /// One histogram per method (same order as [`METHODS`]), then one for all requests.
    latency: Vec<Histogram>,
    pub conns: ConnCounters,
    pub started: Instant,
    pub started_wall: SystemTime,
    /// The last projections rendered, reused while nothing they depend on changed.
    renders: RenderCache,
    /// The last projection served, read back only by `stats` (what it left out).
    last_served: projection::LastServed,
    /// A watcher reports the changes made behind the mount (it may still lose sight of a
    /// directory: `World::sees_every_change`).
    watched: bool,
}

#[derive(Debug, Default)]
pub struct ConnCounters {
    pub open: AtomicU64,
    pub total: AtomicU64,
    pub refused_peer: AtomicU64,
    pub refused_busy: AtomicU64,
    pub requests: AtomicU64,
    pub errors: AtomicU64,
    pub lines_too_long: AtomicU64,
}

impl Shared {
    pub fn new(
        world: Arc<World>,
        renderer: Arc<dyn Renderer>,
        info: DaemonInfo,
        op_stats: Option<Arc<OpStats>>,
        emitted: Option<EmittedFn>,
        watched: bool,
    ) -> Self {
        Self {
            world,
            renderer,
            info,
            op_stats,
            emitted,
            tokens: TokenAccount::default(),
            proxy: ProxyAccount::default(),
            validity: Validity::default(),
            begun: Begun::default(),
            subs: Arc::new(Registry::default()),
            latency: (0..=METHODS.len()).map(|_| Histogram::default()).collect(),
            conns: ConnCounters::default(),
            started: Instant::now(),
            started_wall: SystemTime::now(),
            renders: RenderCache::default(),
            last_served: projection::LastServed::default(),
            watched,
        }
    }

    /// Whether every change made behind the mount reaches the world: what lets anything be
    /// kept on the strength of no change having been seen.
    pub fn sees_changes_behind(&self) -> bool {
        self.watched && self.world.sees_every_change()
    }

    fn record_latency(&self, method: &str, d: Duration) {
        if let Some(i) = METHODS.iter().position(|m| *m == method) {
            self.latency[i].record(d);
        }
        self.latency[METHODS.len()].record(d);
    }
}

/// What a method needs from its connection.
pub trait Connection {
    fn id(&self) -> u64;
    /// The queue notifications for this connection go to (created on first use).
    fn notifications(&self) -> Result<Sender<Vec<u8>>, String>;
}

/// Handles one line; returns the response line, if any (notifications get none).
pub fn handle_line(shared: &Shared, conn: &dyn Connection, line: &[u8]) -> Option<Vec<u8>> {
    if line.iter().all(u8::is_ascii_whitespace) {
        return None; // blank lines are keep-alives, not errors
    }
    match protocol::parse_line(line) {
        Incoming::Single(p) => {
            handle_parsed(shared, conn, p).map(|(id, r)| protocol::response_line(&id, &r))
        }
        Incoming::Batch(items) => {
            let out: Vec<Value> = items
                .into_iter()
                .filter_map(|p| handle_parsed(shared, conn, p))
                .map(|(id, r)| protocol::response(&id, &r.map(Reply::into_value)))
                .collect();
            // A batch of notifications only gets no answer at all (JSON-RPC 2.0, section 6).
            (!out.is_empty()).then(|| protocol::to_line(&Value::Array(out)))
        }
    }
}

/// Runs one parsed request: the id to answer and the outcome (`None` for a notification).
fn handle_parsed(
    shared: &Shared,
    conn: &dyn Connection,
    p: Parsed,
) -> Option<(Value, Result<Reply, RpcError>)> {
    shared.conns.requests.fetch_add(1, Ordering::Relaxed);
    match p {
        Err((id, e)) => {
            shared.conns.errors.fetch_add(1, Ordering::Relaxed);
            Some((id, Err(e)))
        }
        Ok(req) => {
            let start = Instant::now();
            let outcome = dispatch(shared, conn, &req.method, req.params);
            if !READ_ONLY.contains(&req.method.as_str()) {
                // It may have changed the harness state a projection shows (goal, steps, state,
                // pins): no rendering made before it may be reused.
                shared.world.bump_generation();
            }
            shared.record_latency(&req.method, start.elapsed());
            if outcome.is_err() {
                shared.conns.errors.fetch_add(1, Ordering::Relaxed);
            }
            req.id.map(|id| (id, outcome))
        }
    }
}

/// Runs one method.
pub fn dispatch(
    shared: &Shared,
    conn: &dyn Connection,
    method: &str,
    params: Value,
) -> Result<Reply, RpcError> {
    match method {
        // The one method whose result may come pre-serialized.
        "projection.get" => projection::projection_get(shared, parse(method, params)?),
        _ => dispatch_value(shared, conn, method, params).map(Reply::Value),
    }
}

/// Runs one method whose result is built as a value.
fn dispatch_value(
    shared: &Shared,
    conn: &dyn Connection,
    method: &str,
    params: Value,
) -> Result<Value, RpcError> {
    if AFTER_INGEST.contains(&method) {
        ingest_barrier(shared);
    }
    match method {
        "initialize" => daemon::initialize(shared),
        "goal.set" => harness_state::goal_set(shared, parse(method, params)?),
        "goal.get" => harness_state::goal_get(shared, parse(method, params)?),
        "goal.compacted" => harness_state::goal_compacted(shared, parse(method, params)?),
        "goal.resumed" => harness_state::goal_resumed(shared, parse(method, params)?),
        "goal.adopt" => harness_state::goal_adopt(shared, parse(method, params)?),
        "goal.list" => harness_state::goal_list(shared, parse(method, params)?),
        "step.record" => record::step_record(shared, parse(method, params)?),
        "tools.declare" => record::tools_declare(shared, parse(method, params)?),
        "command.begin" => record::command_begin(shared, parse(method, params)?),
        "command.abandon" => record::command_abandon(shared, parse(method, params)?),
        "command.record" => record::command_record(shared, parse(method, params)?),
        "commands.list" => record::commands_list(shared, parse(method, params)?),
        "commands.forget" => record::commands_forget(shared, parse(method, params)?),
        "state.set" => harness_state::state_set(shared, params),
        "state.patch" => harness_state::state_patch(shared, params),
        "state.get" => harness_state::state_get(shared, parse(method, params)?),
        "framing.set" => harness_state::framing_set(shared, parse(method, params)?),
        "framing.patch" => harness_state::framing_patch(shared, params),
        "framing.get" => harness_state::framing_get(shared, parse(method, params)?),
        "entries.list" => entries::entries_list(shared, parse(method, params)?),
        "entries.read" => entries::entries_read(shared, parse(method, params)?),
        "entries.pin" | "entries.unpin" => {
            entries::entries_pin(shared, parse(method, params)?, method == "entries.pin")
        }
        "entries.forget" => entries::entries_forget(shared, parse(method, params)?),
        "entries.refused" => entries::entries_refused(shared, parse(method, params)?),
        "changes.since" => observations::changes_since(shared, parse(method, params)?),
        "observations.subscribe" => {
            observations::observations_subscribe(shared, conn, parse(method, params)?)
        }
        // One registry holds both kinds: either call cancels either.
        "observations.unsubscribe" | "projections.unsubscribe" => {
            observations::observations_unsubscribe(shared, conn, parse(method, params)?)
        }
        "projections.subscribe" => {
            let _: Empty = parse(method, params)?;
            projection::projections_subscribe(shared, conn)
        }
        "proxy.record" => record::proxy_record(shared, parse(method, params)?),
        "stats" => {
            let _: Empty = parse(method, params)?;
            Ok(daemon::stats(shared))
        }
        other => Err(RpcError::method_not_found(other)),
    }
}

fn parse<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params).map_err(|e| RpcError::invalid_params(format!("{method}: {e}")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

/// The `session` a method names, checked (`world::conversations`); `""` names none.
fn session<'a>(method: &str, s: &'a Option<String>) -> Result<Option<&'a str>, RpcError> {
    use crate::world::conversations::MAX_SESSION_BYTES;
    match s.as_deref() {
        Some(id) if id.len() > MAX_SESSION_BYTES => Err(RpcError::invalid_params(format!(
            "{method}: session is {} bytes long; at most {MAX_SESSION_BYTES}",
            id.len()
        ))),
        other => Ok(other.filter(|id| !id.is_empty())),
    }
}

fn lossy(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// A client path as a path relative to the root. Absolute paths are accepted when they lie
/// under the mount point (or SOURCE), since harnesses often use absolute paths; anything else
/// absolute, and any `..`, is refused: the world never reads outside its root.
pub fn rel_path(shared: &Shared, raw: &str) -> Result<PathBuf, RpcError> {
    if raw.contains('\0') {
        return Err(RpcError::refused(format!(
            "path {raw:?} contains a NUL byte"
        )));
    }
    let p = Path::new(raw);
    let rel = if p.is_absolute() {
        let bases = [&shared.info.mount_point, &shared.info.source];
        let stripped = bases
            .into_iter()
            .flatten()
            .find_map(|b| p.strip_prefix(b).ok());
        match stripped {
            Some(r) => r,
            None => {
                return Err(RpcError::refused(format!(
                    "path {raw:?} is outside the root: use a path relative to the mount root{}",
                    shared
                        .info
                        .mount_point
                        .as_ref()
                        .map(|m| format!(" (or an absolute one under {})", m.display()))
                        .unwrap_or_default()
                )));
            }
        }
    } else {
        p
    };
    let mut out = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::Normal(n) => out.push(n),
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(RpcError::refused(format!(
                    "path {raw:?} contains `..`: only paths below the root are accepted"
                )));
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(RpcError::refused(format!(
                    "path {raw:?} is outside the root"
                )));
            }
        }
    }
    Ok(out)
}

fn millis(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Waits (briefly) until the world has applied what the mount emitted so far, so a command's
/// reads are in the ring when its inputs are collected.
fn ingest_barrier(shared: &Shared) {
    caught_up(shared, INGEST_BARRIER);
}

/// Waits at most `timeout` until the world has applied what the mount emitted so far; false if
/// it has not. True at once without a mount.
fn caught_up(shared: &Shared, timeout: Duration) -> bool {
    let Some(emitted) = &shared.emitted else {
        return true;
    };
    shared.world.await_ingest(emitted(), timeout)
}
