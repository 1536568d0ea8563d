//! The seam between the socket and the projection renderers.
//!
//! The socket validates and normalizes the request ([`ProjectionParams`]), then hands it to a
//! [`Renderer`]. The real renderers live in `crate::projection`; wiring them is one impl:
//!
//! ```ignore
//! impl Renderer for Projections {
//!     fn render(&self, world: &World, p: &ProjectionParams) -> Result<Rendered, String> {
//!         crate::projection::render(world, &p.to_request())
//!             .map(|proj| Rendered { tokens: proj.tokens, value: serde_json::to_value(proj).unwrap_or_default() })
//!             .map_err(|e| e.to_string())
//!     }
//! }
//! ```
//!
//! [`StandIn`] is a minimal renderer for tests and for daemons built before the projection
//! module: it selects with the world's policy and lists current contents, within budget.

use serde::Serialize;
use serde_json::{Value, json};

use crate::world::{Form, World};

pub use crate::projection::{CacheTtl, Format, LineNumbers, StepOutput};

/// Evicted entries a projection lists unless asked for another number: enough for a person or
/// a harness to see what went, not the whole world of a big tree.
pub const DEFAULT_EVICTED_LIMIT: usize = 100;

/// A validated projection request (mirrors `projection::ProjectionRequest`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProjectionParams {
    pub format: Format,
    /// 1..=[`crate::world::config::MAX_BUDGET`] tokens.
    pub budget_tokens: u64,
    /// Selection policy name; `None`: the configured one.
    pub policy: Option<String>,
    /// Name of the synthesized read tool (e.g. Claude Code's `Read`).
    pub tool_name: Option<String>,
    /// Its path parameter (e.g. `file_path`).
    pub path_param: Option<String>,
    /// Most `cache_control` breakpoints (0..=4).
    pub max_breakpoints: Option<u8>,
    /// How long the prompt cache keeps what they mark; `None`: five minutes.
    pub cache_ttl: Option<CacheTtl>,
    /// Show absolute paths (under the mount point) instead of root-relative ones.
    pub absolute_paths: bool,
    /// Whether the last step's result repeats lines the stream shows.
    pub step_output: StepOutput,
    /// Show the last step (`false`: the client sends the real last turn itself).
    pub last_step: bool,
    /// Line-number gutter of synthesized reads; `None`: the renderer's default.
    pub line_numbers: Option<LineNumbers>,
    /// At most this many evicted entries listed (all are counted in `evicted_total`).
    pub evicted_limit: usize,
    /// The conversation whose goal and state are shown; `None`: the current one.
    pub session: Option<String>,
    /// Files the client's request shows whole, as it names them (absolute under the mount
    /// point, or root-relative), with the hash of what it shows.
    pub request_shows: Vec<(String, String)>,
    /// The hashes of outputs the client's request holds as they were recorded.
    pub request_outputs: Vec<String>,
    /// Call ids the client's request shows with their results: the last step is not shown
    /// when it is one of them.
    pub shown_calls: Vec<String>,
}

/// A rendered projection and its token estimate (for stats).
#[derive(Debug, Clone, PartialEq)]
pub struct Rendered {
    pub value: Value,
    pub tokens: u64,
}

/// Renders projections. Must be cheap to call concurrently: every connection calls it.
pub trait Renderer: Send + Sync {
    fn render(&self, world: &World, params: &ProjectionParams) -> Result<Rendered, String>;
}

/// A stand-in renderer: the world's selection with current contents, plus the harness state, in
/// a neutral JSON shape (and plain markdown for `text`). Never exceeds the budget, since it only
/// emits what the policy kept.
#[derive(Debug, Default, Clone, Copy)]
pub struct StandIn;

impl Renderer for StandIn {
    fn render(&self, world: &World, p: &ProjectionParams) -> Result<Rendered, String> {
        let name = p
            .policy
            .clone()
            .unwrap_or_else(|| world.config().budget.policy.clone());
        let policy = world
            .policy(&name)
            .ok_or_else(|| format!("unknown policy {name:?}"))?;
        let sel = world.select(p.budget_tokens, policy.as_ref());
        let mut entries = Vec::with_capacity(sel.kept.len());
        let mut text = String::new();
        for k in &sel.kept {
            let content = match k.form {
                Form::Notice => None,
                _ => world
                    .read_current(&k.path)
                    .ok()
                    .map(|c| String::from_utf8_lossy(&c.bytes).into_owned()),
            };
            let path = if k.path.as_os_str().is_empty() {
                ".".into()
            } else {
                k.path.to_string_lossy()
            };
            text.push_str(&format!("## {path}\n"));
            if let Some(c) = &content {
                text.push_str(c);
                text.push('\n');
            }
            entries.push(json!({ "path": path, "tokens": k.tokens, "content": content }));
        }
        let h = world.harness();
        let (goal, state) = h
            .conversations
            .read(p.session.as_deref(), |c| (c.goal.clone(), c.state.clone()));
        let value = json!({
            "format": p.format.name(),
            "stand_in": true,
            "tokenizer": "o200k_base",
            "budget": p.budget_tokens,
            "tokens": sel.total_tokens,
            "policy": sel.policy,
            "goal": goal,
            "framing": *h.framing.read(),
            "state": state,
            "last_step": h.last_step.read().clone()
                .filter(|s| p.last_step && !p.shown_calls.contains(&s.tool_use_id)),
            "commands": *h.commands.read(),
            "entries": entries,
            "evicted_total": sel.evicted.len(),
            "evicted": sel.evicted.iter().take(p.evicted_limit).collect::<Vec<_>>(),
            "text": if p.format == Format::Text { Some(text) } else { None },
        });
        Ok(Rendered {
            value,
            tokens: sel.total_tokens,
        })
    }
}

/// The real renderers (`crate::projection`), with absolute paths shown under `mount_point`.
#[derive(Debug, Default, Clone)]
pub struct Projections {
    pub mount_point: Option<std::path::PathBuf>,
}

impl Renderer for Projections {
    fn render(&self, world: &World, p: &ProjectionParams) -> Result<Rendered, String> {
        use crate::projection::{self, ProjectionRequest};
        let mut req = ProjectionRequest::new(p.format, p.budget_tokens);
        req.policy = p.policy.clone();
        if let Some(t) = &p.tool_name {
            req.tool_name = t.clone();
        }
        if let Some(pp) = &p.path_param {
            req.path_param = pp.clone();
        }
        if let Some(b) = p.max_breakpoints {
            req.max_breakpoints = b;
        }
        if let Some(t) = p.cache_ttl {
            req.cache_ttl = t;
        }
        if p.absolute_paths {
            req.absolute_paths = self.mount_point.clone();
        }
        req.step_output = p.step_output;
        req.last_step = p.last_step;
        if let Some(l) = p.line_numbers {
            req.line_numbers = l;
        }
        req.evicted_limit = Some(p.evicted_limit);
        req.session = p.session.clone();
        req.shown_calls = p.shown_calls.clone();
        req.request_outputs = p.request_outputs.clone();
        req.request_shows = p
            .request_shows
            .iter()
            .filter_map(|(path, hash)| {
                let path = std::path::Path::new(path);
                let relative = if path.is_absolute() {
                    path.strip_prefix(self.mount_point.as_deref()?).ok()?
                } else {
                    path
                };
                Some((relative.to_path_buf(), hash.clone()))
            })
            .collect();
        let proj = projection::render(world, &req).map_err(|e| e.to_string())?;
        let tokens = proj.tokens;
        let value =
            serde_json::to_value(&proj).map_err(|e| format!("serializing the projection: {e}"))?;
        Ok(Rendered { value, tokens })
    }
}
