//! The methods: parameter checking and dispatch to the world, the harness state and the renderer.
//!
//! Every handler takes its params as a typed struct (`deny_unknown_fields`, so a misspelt
//! parameter is an error rather than silently ignored) and returns a JSON value or an
//! [`RpcError`] whose message says what to fix. Nothing here panics on client input.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::Sender;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value, json};

use super::commands::{self, Validity};
use super::metrics::{Histogram, ProxyAccount, TokenAccount, count_tokens};
use super::protocol::{self, Incoming, Parsed, Reply, RpcError, code};
use super::render::{Format, LineNumbers, ProjectionParams, Renderer, StepOutput};
use super::render_cache::RenderCache;
use super::subscriptions::{self, Filter, Registry};
use crate::fs::op_stats::OpStats;
use crate::world::harness::{CommandOutput, Framing, MAX_STEP_TOOLS, Step, StructuredState};
use crate::world::source::SourceError;
use crate::world::{Entry, EntryState, Extent, ReadError, World};

/// Protocol version reported by `initialize`; bumped on incompatible changes.
pub const PROTOCOL_VERSION: u32 = 1;
/// Largest token budget accepted: well above any model's context window.
pub const MAX_BUDGET: u64 = 2_000_000;
/// Most items `entries.list` and `changes.since` return per call.
pub const MAX_LIST: usize = 10_000;
/// How long `command.record` waits for the world to catch up with the mount's observations.
const INGEST_BARRIER: Duration = Duration::from_millis(250);

/// Every method, in the order `initialize` lists them.
pub const METHODS: &[&str] = &[
    "initialize",
    "projection.get",
    "goal.set",
    "goal.get",
    "step.record",
    "tools.declare",
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
    "changes.since",
    "observations.subscribe",
    "observations.unsubscribe",
    "proxy.record",
    "stats",
];

/// Methods that change nothing a projection shows.
const READ_ONLY: &[&str] = &[
    "initialize",
    "projection.get",
    "goal.get",
    "commands.list",
    "state.get",
    "framing.get",
    "entries.list",
    "entries.read",
    "changes.since",
    "observations.subscribe",
    "observations.unsubscribe",
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
    pub subs: Arc<Registry>,
    /// One histogram per method (same order as [`METHODS`]), then one for all requests.
    latency: Vec<Histogram>,
    pub conns: ConnCounters,
    pub started: Instant,
    pub started_wall: SystemTime,
    /// The last projections rendered, reused while nothing they depend on changed.
    renders: RenderCache,
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
        cache_renders: bool,
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
            subs: Arc::new(Registry::default()),
            latency: (0..=METHODS.len()).map(|_| Histogram::default()).collect(),
            conns: ConnCounters::default(),
            started: Instant::now(),
            started_wall: SystemTime::now(),
            renders: RenderCache::new(cache_renders),
        }
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
        "projection.get" => projection_get(shared, parse(method, params)?),
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
    let w = &*shared.world;
    match method {
        "initialize" => initialize(shared),
        "goal.set" => {
            let p: GoalSet = parse(method, params)?;
            *w.harness().goal.write() = p.goal.filter(|g| !g.is_empty());
            Ok(json!({ "goal": *w.harness().goal.read() }))
        }
        "goal.get" => {
            let _: Empty = parse(method, params)?;
            Ok(json!({ "goal": *w.harness().goal.read() }))
        }
        "step.record" => step_record(shared, parse(method, params)?),
        "tools.declare" => {
            let p: ToolsDeclare = parse(method, params)?;
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
        "command.record" => command_record(shared, parse(method, params)?),
        "commands.list" => {
            let _: Empty = parse(method, params)?;
            shared.validity.sweep(w);
            Ok(json!({ "commands": *w.harness().commands.read() }))
        }
        "commands.forget" => {
            let p: CommandKey = parse(method, params)?;
            let cwd = rel_path(shared, &p.cwd)?;
            let cwd = display_cwd(&cwd);
            let mut cmds = w.harness().commands.write();
            let before = cmds.len();
            cmds.retain(|c| !(c.command == p.command && c.cwd == cwd));
            Ok(json!({ "forgotten": cmds.len() != before }))
        }
        "state.set" => {
            let s: StructuredState = parse(method, params)?;
            *w.harness().state.write() = s;
            Ok(json!({ "state": *w.harness().state.read() }))
        }
        "state.patch" => state_patch(shared, params),
        "state.get" => {
            let _: Empty = parse(method, params)?;
            Ok(json!({ "state": *w.harness().state.read() }))
        }
        "framing.set" => {
            let f: Framing = parse(method, params)?;
            *w.harness().framing.write() = f;
            Ok(json!({ "framing": *w.harness().framing.read() }))
        }
        "framing.patch" => framing_patch(shared, params),
        "framing.get" => {
            let _: Empty = parse(method, params)?;
            Ok(json!({ "framing": *w.harness().framing.read() }))
        }
        "entries.list" => entries_list(shared, parse(method, params)?),
        "entries.read" => entries_read(shared, parse(method, params)?),
        "entries.pin" | "entries.unpin" => {
            let p: PathParam = parse(method, params)?;
            let path = rel_path(shared, &p.path)?;
            let pinned = method == "entries.pin";
            if !w.set_pinned(&path, pinned) {
                return Err(no_entry(&path));
            }
            Ok(json!({ "path": lossy(&path), "pinned": pinned }))
        }
        "entries.forget" => {
            let p: PathParam = parse(method, params)?;
            let path = rel_path(shared, &p.path)?;
            Ok(json!({ "path": lossy(&path), "forgotten": w.forget(&path) }))
        }
        "changes.since" => changes_since(shared, parse(method, params)?),
        "observations.subscribe" => {
            let mut f: Filter = parse(method, params)?;
            if let Some(p) = &f.prefix {
                f.prefix = Some(rel_path(shared, &p.to_string_lossy())?);
            }
            let tx = conn.notifications().map_err(RpcError::internal)?;
            match shared.subs.subscribe(conn.id(), f, tx) {
                Ok(id) => Ok(json!({
                    "subscription": id,
                    "notification": subscriptions::NOTIFICATION,
                    "last_seq": w.recent().last_seq(),
                })),
                Err(n) => Err(RpcError::new(
                    code::UNAVAILABLE,
                    format!("this connection already has {n} subscriptions (the limit)"),
                )),
            }
        }
        "observations.unsubscribe" => {
            let p: Unsubscribe = parse(method, params)?;
            if shared.subs.unsubscribe(conn.id(), p.subscription) {
                Ok(json!({ "unsubscribed": p.subscription }))
            } else {
                Err(RpcError::not_found(format!(
                    "no subscription {} on this connection",
                    p.subscription
                )))
            }
        }
        "proxy.record" => {
            let p: ProxyRecord = parse(method, params)?;
            shared
                .proxy
                .record(p.history_tokens, p.sent_tokens, p.rewritten);
            Ok(json!(shared.proxy.report()))
        }
        "stats" => {
            let _: Empty = parse(method, params)?;
            Ok(stats(shared))
        }
        other => Err(RpcError::method_not_found(other)),
    }
}

/// One model call `worldfs proxy` took from the session's main conversation.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProxyRecord {
    /// Tokens of the messages as the client sent them.
    history_tokens: u64,
    /// Tokens of the messages sent upstream (or that would have been, under `--observe`).
    sent_tokens: u64,
    /// Whether it was sent with the projection.
    rewritten: bool,
}

fn parse<T: DeserializeOwned>(method: &str, params: Value) -> Result<T, RpcError> {
    serde_json::from_value(params).map_err(|e| RpcError::invalid_params(format!("{method}: {e}")))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Empty {}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ToolsDeclare {
    names: Vec<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct GoalSet {
    goal: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PathParam {
    path: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Unsubscribe {
    subscription: u64,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandKey {
    command: String,
    #[serde(default = "dot")]
    cwd: String,
}

fn dot() -> String {
    ".".into()
}

fn lossy(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

fn display_cwd(p: &Path) -> String {
    if p.as_os_str().is_empty() {
        ".".into()
    } else {
        lossy(p)
    }
}

fn no_entry(path: &Path) -> RpcError {
    RpcError::not_found(format!(
        "the world has no entry for {:?} (entries.list shows what it has)",
        lossy(path)
    ))
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

fn state_name(s: EntryState) -> &'static str {
    match s {
        EntryState::Live => "live",
        EntryState::Deleted => "deleted",
        EntryState::Withheld => "withheld",
        EntryState::Ignored(_) => "ignored",
    }
}

/// An entry's metadata as the protocol shows it.
pub fn entry_json(path: &Path, e: &Entry) -> Value {
    let extent = match &e.extent {
        Extent::None => json!("none"),
        Extent::Whole => json!("whole"),
        Extent::Ranges(set) => json!({
            "ranges": set.as_slice().iter().map(|r| json!([r.start, r.end])).collect::<Vec<_>>()
        }),
    };
    let ignored = match e.state {
        EntryState::Ignored(r) => serde_json::to_value(r).unwrap_or(Value::Null),
        _ => Value::Null,
    };
    json!({
        "path": lossy(path),
        "kind": e.kind,
        "state": state_name(e.state),
        "ignored_reason": ignored,
        "tokens": e.tokens,
        "size": e.size,
        "hash": e.hash.map(|h| blake3::Hash::from_bytes(h).to_hex().to_string()),
        "stale": e.needs_rehash,
        "pinned": e.pinned,
        "agent_wrote": e.agent_wrote,
        "in_projection": e.in_projection,
        "extent": extent,
        "reads": e.reads,
        "weak_reads": e.weak_reads,
        "evictions": e.evictions,
        "programs": e.programs.iter().collect::<Vec<_>>(),
        "first_seq": e.first_observed.seq,
        "last_seq": e.last_observed.seq,
        "last_changed_seq": e.last_changed.map(|s| s.seq),
        "last_agent_turn": e.last_agent_turn,
        "last_observed_ms": millis(e.last_observed.time),
    })
}

fn initialize(shared: &Shared) -> Result<Value, RpcError> {
    let w = &shared.world;
    Ok(json!({
        "server": { "name": "worldfs", "version": env!("CARGO_PKG_VERSION") },
        "protocol_version": PROTOCOL_VERSION,
        "methods": METHODS,
        "capabilities": {
            "formats": Format::ALL.iter().map(|f| f.name()).collect::<Vec<_>>(),
            "tokenizer": "o200k_base",
            "default_budget": w.config().budget.tokens,
            "max_budget": MAX_BUDGET,
            "default_policy": w.config().budget.policy,
            "max_line_bytes": protocol::MAX_LINE,
            "max_batch": protocol::MAX_BATCH,
            "batches": true,
            "subscriptions": { "notification": subscriptions::NOTIFICATION },
            "recent_observations": w.recent().capacity(),
        },
        "root": {
            "source": shared.info.source,
            "mount_point": shared.info.mount_point,
            "socket": shared.info.socket,
        },
        "last_seq": w.recent().last_seq(),
        "turn": w.turn(),
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ProjectionGet {
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
    absolute_paths: bool,
    #[serde(default)]
    step_output: StepOutput,
    #[serde(default = "shows_last_step")]
    last_step: bool,
    #[serde(default)]
    line_numbers: Option<LineNumbers>,
}

fn shows_last_step() -> bool {
    true
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

fn projection_get(shared: &Shared, p: ProjectionGet) -> Result<Reply, RpcError> {
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
    let params = ProjectionParams {
        format: p.format.unwrap_or(Format::Anthropic),
        budget_tokens: budget,
        policy: p.policy,
        tool_name: p.tool_name,
        path_param: p.path_param,
        max_breakpoints: p.max_breakpoints,
        absolute_paths: p.absolute_paths,
        step_output: p.step_output,
        last_step: p.last_step,
        line_numbers: p.line_numbers,
    };
    // What the mount saw before this request (the agent's last tool call) must be in the world.
    ingest_barrier(shared);
    // Outputs whose inputs changed must not reach the renderer.
    shared.validity.sweep(w);
    let r = shared
        .renders
        .get(w, params, |p| shared.renderer.render(w, p))
        .map_err(|e| RpcError::new(code::PROJECTION_FAILED, format!("projection failed: {e}")))?;
    shared.tokens.projection(r.tokens);
    Ok(Reply::Json(Arc::clone(&r.json)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StepRecord {
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
}

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

fn step_record(shared: &Shared, p: StepRecord) -> Result<Value, RpcError> {
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
    let mut views = Vec::with_capacity(p.views.len());
    for v in &p.views {
        if let Some([a, b]) = v.lines
            && (a == 0 || b < a)
        {
            return Err(RpcError::invalid_params(format!(
                "step.record: view of {}: lines [{a}, {b}] must be 1-based with first <= last",
                v.path
            )));
        }
        views.push((rel_path(shared, &v.path)?, v.lines.map(|[a, b]| (a, b))));
    }
    let w = &*shared.world;
    // What the mount saw before the step was recorded is the step's doing: it must be applied
    // before the turn advances, or a read still in the channel would count as the next turn's
    // (younger than it is, and differently from one run to the next). The views also refine
    // entries those reads create.
    ingest_barrier(shared);
    let mut viewed = 0u64;
    for (rel, lines) in &views {
        match w.agent_viewed(rel, *lines) {
            Ok(true) => viewed += 1,
            Ok(false) => {}
            Err(e) => tracing::debug!(path = %rel.display(), "step.record: view not applied: {e}"),
        }
    }
    // What a history-keeping harness would have appended: the call, its result, the text.
    let mut added = count_tokens(&p.result) + count_tokens(&p.input.to_string());
    if let Some(t) = &p.assistant_text {
        added += count_tokens(t);
    }
    shared.tokens.add_history(added);
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
    *w.harness().last_step.write() = Some(Step {
        tool_use_id: p.tool_use_id,
        tool_name: p.tool_name,
        input: p.input,
        result: p.result,
        is_error: p.is_error,
        assistant_text: p.assistant_text,
        raw_assistant_content: p.raw_assistant_content,
        turn,
    });
    Ok(json!({
        "turn": turn,
        "history_tokens": shared.tokens.report().history_tokens,
        "views_applied": viewed,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CommandRecord {
    command: String,
    #[serde(default = "dot")]
    cwd: String,
    output: String,
    #[serde(default)]
    exit_code: Option<i32>,
    #[serde(default)]
    since_seq: Option<u64>,
    #[serde(default)]
    files: Option<Vec<String>>,
}

/// Waits (briefly) until the world has applied what the mount emitted so far, so a command's
/// reads are in the ring when its inputs are collected.
fn ingest_barrier(shared: &Shared) {
    let Some(emitted) = &shared.emitted else {
        return;
    };
    shared.world.await_ingest(emitted(), INGEST_BARRIER);
}

fn command_record(shared: &Shared, p: CommandRecord) -> Result<Value, RpcError> {
    if p.command.is_empty() {
        return Err(RpcError::invalid_params(
            "command.record: command must not be empty",
        ));
    }
    if p.since_seq.is_none() && p.files.is_none() {
        return Err(RpcError::invalid_params(
            "command.record: pass since_seq (the last_seq noted before the command ran) or \
             files (the paths it read), or both",
        ));
    }
    let w = &*shared.world;
    let cwd = display_cwd(&rel_path(shared, &p.cwd)?);
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
    // The command's reads are in the world before its inputs are collected and its place
    // (`seq`, after them) is taken, whichever way the inputs are named.
    ingest_barrier(shared);
    if let Some(since) = p.since_seq {
        let seen = commands::inputs_since(w, since)
            .map_err(|e| RpcError::new(code::HISTORY_LOST, format!("command.record: {e}")))?;
        paths.extend(seen);
    }
    paths.sort();
    paths.dedup();
    let inputs = commands::hash_inputs(w, paths);
    shared
        .tokens
        .add_history(count_tokens(&p.command) + count_tokens(&p.output));
    let out = CommandOutput {
        command: p.command,
        cwd,
        output: p.output,
        exit_code: p.exit_code,
        inputs,
        turn: w.turn(),
        seq: w.recent().last_seq(),
    };
    let reply = json!({
        "command": out.command,
        "cwd": out.cwd,
        "inputs": out.inputs.iter().map(|(p, h)| json!({"path": lossy(p), "hash": h})).collect::<Vec<_>>(),
        "turn": out.turn,
        "seq": out.seq,
    });
    w.harness().record_command(out);
    Ok(reply)
}

/// A list field of `state.patch`: an array replaces, `{add, remove}` edits.
fn patch_list(field: &str, v: Value, list: &mut Vec<String>) -> Result<(), RpcError> {
    let strings = |v: Value, what: &str| -> Result<Vec<String>, RpcError> {
        serde_json::from_value::<Vec<String>>(v)
            .map_err(|e| RpcError::invalid_params(format!("state.patch: {field}{what}: {e}")))
    };
    match v {
        Value::Null => list.clear(),
        a @ Value::Array(_) => *list = strings(a, "")?,
        Value::Object(mut m) => {
            let add = m.remove("add");
            let remove = m.remove("remove");
            if let Some(k) = m.keys().next() {
                return Err(RpcError::invalid_params(format!(
                    "state.patch: {field}: unknown key {k:?} (use \"add\" and \"remove\")"
                )));
            }
            if let Some(r) = remove {
                let r = strings(r, ".remove")?;
                list.retain(|x| !r.contains(x));
            }
            if let Some(a) = add {
                for x in strings(a, ".add")? {
                    if !list.contains(&x) {
                        list.push(x);
                    }
                }
            }
        }
        _ => {
            return Err(RpcError::invalid_params(format!(
                "state.patch: {field}: expected an array of strings (replaces the list), \
                 {{\"add\": [...], \"remove\": [...]}} or null (clears it)"
            )));
        }
    }
    Ok(())
}

fn state_patch(shared: &Shared, params: Value) -> Result<Value, RpcError> {
    let Value::Object(m) = params else {
        return Err(RpcError::invalid_params("state.patch: expected an object"));
    };
    // Apply to a copy, so an error half way leaves the state untouched.
    let mut s = shared.world.harness().state.read().clone();
    for (k, v) in m {
        match k.as_str() {
            "intent" => match v {
                Value::Null => s.intent = None,
                Value::String(t) => s.intent = Some(t),
                _ => {
                    return Err(RpcError::invalid_params(
                        "state.patch: intent must be a string or null",
                    ));
                }
            },
            "decisions" => patch_list(&k, v, &mut s.decisions)?,
            "constraints" => patch_list(&k, v, &mut s.constraints)?,
            "open_loops" => patch_list(&k, v, &mut s.open_loops)?,
            "ruled_out" => patch_list(&k, v, &mut s.ruled_out)?,
            other => {
                return Err(RpcError::invalid_params(format!(
                    "state.patch: unknown field {other:?} (intent, decisions, constraints, \
                     open_loops, ruled_out)"
                )));
            }
        }
    }
    *shared.world.harness().state.write() = s.clone();
    Ok(json!({ "state": s }))
}

fn framing_patch(shared: &Shared, params: Value) -> Result<Value, RpcError> {
    let Value::Object(m) = params else {
        return Err(RpcError::invalid_params(
            "framing.patch: expected an object",
        ));
    };
    let mut f = shared.world.harness().framing.read().clone();
    for (k, v) in m {
        let slot = match k.as_str() {
            "workspace" => &mut f.workspace,
            "shell" => &mut f.shell,
            "date" => &mut f.date,
            "timezone" => &mut f.timezone,
            "model" => &mut f.model,
            "settings" => {
                let Value::Object(s) = v else {
                    return Err(RpcError::invalid_params(
                        "framing.patch: settings must be an object (a null value removes a key)",
                    ));
                };
                for (sk, sv) in s {
                    if sv.is_null() {
                        f.settings.remove(&sk);
                    } else {
                        f.settings.insert(sk, sv);
                    }
                }
                continue;
            }
            other => {
                return Err(RpcError::invalid_params(format!(
                    "framing.patch: unknown field {other:?} (workspace, shell, date, timezone, \
                     model, settings)"
                )));
            }
        };
        *slot = match v {
            Value::Null => None,
            Value::String(s) => Some(s),
            _ => {
                return Err(RpcError::invalid_params(format!(
                    "framing.patch: {k} must be a string or null"
                )));
            }
        };
    }
    *shared.world.harness().framing.write() = f.clone();
    Ok(json!({ "framing": f }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntriesList {
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    state: Option<StateFilter>,
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum StateFilter {
    Live,
    Deleted,
    Withheld,
    Ignored,
}

fn entries_list(shared: &Shared, p: EntriesList) -> Result<Value, RpcError> {
    let limit = p.limit.unwrap_or(1000);
    if limit > MAX_LIST {
        return Err(RpcError::invalid_params(format!(
            "entries.list: limit {limit} exceeds {MAX_LIST}; page with offset"
        )));
    }
    let prefix = match &p.prefix {
        Some(s) => Some(rel_path(shared, s)?),
        None => None,
    };
    let all = shared.world.entries();
    let matching: Vec<&(PathBuf, Entry)> = all
        .iter()
        .filter(|(path, _)| prefix.as_ref().is_none_or(|pre| path.starts_with(pre)))
        .filter(|(_, e)| {
            p.state.is_none_or(|s| {
                state_name(e.state)
                    == match s {
                        StateFilter::Live => "live",
                        StateFilter::Deleted => "deleted",
                        StateFilter::Withheld => "withheld",
                        StateFilter::Ignored => "ignored",
                    }
            })
        })
        .collect();
    let total = matching.len();
    let tokens: u64 = matching
        .iter()
        .filter(|(_, e)| e.state == EntryState::Live)
        .filter_map(|(_, e)| e.tokens)
        .map(u64::from)
        .sum();
    let page: Vec<Value> = matching
        .iter()
        .skip(p.offset)
        .take(limit)
        .map(|(path, e)| entry_json(path, e))
        .collect();
    Ok(json!({ "total": total, "offset": p.offset, "live_tokens": tokens, "entries": page }))
}

fn read_error(path: &Path, e: ReadError) -> RpcError {
    let shown = lossy(path);
    match e {
        ReadError::Source(SourceError::BadPath { .. }) => {
            RpcError::refused(format!("path {shown:?} is not a plain path below the root"))
        }
        ReadError::Source(SourceError::Open { source, .. }) => match source.raw_os_error() {
            Some(libc::ENOENT) => RpcError::not_found(format!("{shown:?} does not exist")),
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => RpcError::refused(format!(
                "{shown:?} is or goes through a symlink; worldfs never follows symlinks"
            )),
            _ => RpcError::refused(format!("cannot open {shown:?}: {source}")),
        },
        ReadError::Source(SourceError::NotRegular { .. }) => RpcError::refused(format!(
            "{shown:?} is neither a regular file nor a directory"
        )),
        e @ (ReadError::Withheld { .. } | ReadError::Ignored { .. }) => {
            RpcError::refused(e.to_string())
        }
        e @ (ReadError::Source(SourceError::Read { .. }) | ReadError::Tokenizer(_)) => {
            RpcError::internal(e)
        }
    }
}

fn entries_read(shared: &Shared, p: PathParam) -> Result<Value, RpcError> {
    let path = rel_path(shared, &p.path)?;
    let w = &*shared.world;
    let c = w.read_current(&path).map_err(|e| read_error(&path, e))?;
    let entry = w.entry(&path).map(|e| entry_json(&path, &e));
    Ok(json!({
        "path": lossy(&path),
        "kind": c.kind,
        "content": String::from_utf8_lossy(&c.bytes),
        "tokens": c.tokens,
        "size": c.size,
        "hash": blake3::Hash::from_bytes(c.hash).to_hex().to_string(),
        "entry": entry,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ChangesSince {
    #[serde(default)]
    seq: u64,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    classes: Option<Vec<subscriptions::ClassFilter>>,
    #[serde(default)]
    prefix: Option<PathBuf>,
}

fn changes_since(shared: &Shared, p: ChangesSince) -> Result<Value, RpcError> {
    let limit = p.limit.unwrap_or(1000);
    if limit > MAX_LIST {
        return Err(RpcError::invalid_params(format!(
            "changes.since: limit {limit} exceeds {MAX_LIST}; page with seq"
        )));
    }
    let filter = Filter {
        classes: p.classes,
        prefix: match &p.prefix {
            Some(pre) => Some(rel_path(shared, &pre.to_string_lossy())?),
            None => None,
        },
    };
    let recent = shared.world.recent();
    let got = recent.since_seq(p.seq, recent.capacity());
    let mut matched = got.records.iter().filter(|r| filter.matches(r));
    let page: Vec<Value> = matched
        .by_ref()
        .take(limit)
        .map(subscriptions::record_json)
        .collect();
    let truncated = matched.next().is_some();
    Ok(json!({
        "observations": page,
        "last_seq": got.last_seq,
        "oldest_seq": got.oldest_seq,
        "complete": got.complete,
        "truncated": truncated,
    }))
}

fn stats(shared: &Shared) -> Value {
    let w = &*shared.world;
    let world = w.stats();
    let latency: Map<String, Value> = METHODS
        .iter()
        .copied()
        .chain(std::iter::once("all"))
        .zip(&shared.latency)
        .filter_map(|(m, h)| {
            let q = h.quantiles();
            (q.count > 0).then(|| (m.to_string(), json!(q)))
        })
        .collect();
    let fuse = shared.op_stats.as_ref().map(|s| {
        s.snapshot()
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::from(v)))
            .collect::<Map<_, _>>()
    });
    let c = &shared.conns;
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    json!({
        "tokens": shared.tokens.report(),
        "proxy": shared.proxy.report(),
        "entries": world.entries,
        "known_tokens": world.known_tokens,
        "drops": {
            "observations": world.dropped,
            "subscription_observations": shared.subs.dropped_total(),
            "journal": world.journal.map(|j| j.dropped),
            "commands_invalidated": shared.validity.dropped(),
        },
        "observations": {
            "last_seq": w.recent().last_seq(),
            "ring_capacity": w.recent().capacity(),
        },
        "commands_cached": w.harness().commands.read().len(),
        "renders": shared.renders.counts(),
        "latency": latency,
        "connections": {
            "open": get(&c.open),
            "total": get(&c.total),
            "refused_peer": get(&c.refused_peer),
            "refused_busy": get(&c.refused_busy),
            "requests": get(&c.requests),
            "errors": get(&c.errors),
            "lines_too_long": get(&c.lines_too_long),
        },
        "subscriptions": {
            "active": shared.subs.count(),
            "delivered": shared.subs.delivered_total(),
            "dropped": shared.subs.dropped_total(),
        },
        "fuse_ops": fuse,
        "world": world,
        "root": {
            "source": shared.info.source,
            "mount_point": shared.info.mount_point,
            "socket": shared.info.socket,
        },
        "uptime_ms": u64::try_from(shared.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "started_ms": millis(shared.started_wall),
        "pid": std::process::id(),
    })
}
