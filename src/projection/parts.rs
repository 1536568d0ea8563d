//! The format-neutral parts a projection is made of, and their costs: what gathering produces
//! and every renderer, the placement and the final fit consume.

use std::path::PathBuf;

use serde_json::{Map, Value};

use crate::world::EntryKind;
use crate::world::harness::{Framing, StructuredState};
use crate::world::placements::Placement;

use super::budget::{self, BLOCK_OVERHEAD, MESSAGE_OVERHEAD, TEXT_PIECE_OVERHEAD};
use super::ids;
use super::request::Format;
use super::tools::{self, ToolDef};
use super::{Dropped, DroppedCommand, ProjectionError, Skipped};

/// Sent as the only user text when nothing else fits (messages must not be empty).
pub const MINIMAL_USER_TEXT: &str = "Continue.";

/// A text part (framing, structured state) and its cost.
#[derive(Debug, Clone)]
pub struct TextPart {
    pub text: String,
    pub cost: u64,
}

/// The first user message.
#[derive(Debug, Clone)]
pub struct GoalPart {
    pub text: String,
    pub cost: u64,
    /// False when `text` is a placeholder (no goal set, or the goal did not fit).
    pub is_goal: bool,
}

/// One synthesized read call and its result.
#[derive(Debug, Clone)]
pub struct Call {
    pub id: String,
    pub input: Map<String, Value>,
    /// 1-based first line and count, for a read of part of a file.
    pub lines: Option<(u64, u64)>,
    pub result: String,
    pub is_error: bool,
    /// Where it sits in the stream, set by [`super::placement::assign`]: each call of an entry
    /// has its own place, so a new range read of a file adds a call at the end instead of
    /// moving the file.
    pub place: Placement,
}

/// What an entry's calls show.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shown {
    Content,
    Deleted,
    Withheld,
}

/// Raw lines of an entry, for the json format.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Segment {
    pub first_line: u64,
    pub line_count: u64,
    pub text: String,
}

/// One world entry as projected.
#[derive(Debug, Clone)]
pub struct EntryPart {
    pub path: PathBuf,
    pub display: String,
    pub kind: EntryKind,
    pub shown: Shown,
    pub hash: Option<[u8; 32]>,
    /// Sequence and turn of the last change of what is shown: the projection's order.
    pub order_seq: u64,
    pub order_turn: u64,
    pub pinned: bool,
    pub agent_wrote: bool,
    /// Shown whole (not only the ranges read).
    pub whole: bool,
    /// Shown as a notebook's cells ([`crate::world::notebook`]), not as the file's bytes.
    pub notebook: bool,
    pub total_lines: u64,
    pub calls: Vec<Call>,
    /// Filled for the json format only.
    pub segments: Vec<Segment>,
    pub cost: u64,
}

/// A cached command output still valid.
#[derive(Debug, Clone)]
pub struct CommandPart {
    pub command: String,
    /// Turn it was recorded in.
    pub turn: u64,
    /// Its conversation's step count when it was recorded, if it is a conversation's own.
    pub session_step: Option<u64>,
    pub cwd: String,
    pub exit_code: Option<i32>,
    pub output: String,
    /// A tool call's result kept as it was then (no file keeps it current), not a command
    /// output the files it read vouch for.
    pub as_it_was: bool,
    pub seq: u64,
    /// Where it sits in the stream, set by [`super::placement::assign`].
    pub place: Placement,
    /// How the message formats show it (a user text block).
    pub text: String,
    pub cost: u64,
}

/// The last real step, replayed verbatim.
#[derive(Debug, Clone)]
pub struct StepPart {
    pub id: String,
    pub name: String,
    pub input: Map<String, Value>,
    pub result: String,
    pub is_error: bool,
    pub assistant_text: Option<String>,
    /// The provider's own assistant content (anthropic only), when it is valid as is.
    pub raw_anthropic: Option<Vec<Value>>,
    pub cost: u64,
    /// The step with its result as recorded, when `result` points at parts of the stream
    /// instead ([`shown_once`](super::shown_once)).
    pub verbatim: Option<Box<StepPart>>,
    /// The entries (paths) and command outputs ([`command_key`]) `result` points at.
    pub points_at: Vec<PathBuf>,
}

/// What the projection reports besides its body.
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub evicted: Vec<Dropped>,
    pub withheld: Vec<String>,
    pub stale_dropped_commands: Vec<DroppedCommand>,
    pub skipped: Vec<Skipped>,
    pub in_request: Vec<String>,
}

/// Everything a format renderer needs.
#[derive(Debug, Clone)]
pub struct Input {
    pub format: Format,
    pub turn: u64,
    pub policy: &'static str,
    pub framing: Option<TextPart>,
    pub goal: GoalPart,
    pub entries: Vec<EntryPart>,
    pub state: Option<TextPart>,
    pub commands: Vec<CommandPart>,
    pub step: Option<StepPart>,
    pub read_tool: ToolDef,
    pub max_breakpoints: u8,
    pub cache_ttl: super::CacheTtl,
    pub report: Report,
    /// Rendered framing fields, for the json format.
    pub framing_fields: Option<Framing>,
    pub state_fields: Option<StructuredState>,
    /// The requester's layout key ([`super::ProjectionRequest::requester_key`]): what
    /// placements are kept under.
    pub layout: String,
    /// Leading pieces of the stream that the previous projection for this layout showed first,
    /// unchanged ([`super::placement::unchanged_prefix`]): where a cache lookup should start.
    pub unchanged_prefix: usize,
    /// Tools the session's steps called so far, first use first ([`Harness::step_tools`]).
    ///
    /// [`Harness::step_tools`]: crate::world::harness::Harness::step_tools
    pub step_tools: Vec<String>,
}

/// One part of the stream of world content between the goal and the state: one read call of
/// an entry (by index), or a still-current command output.
#[derive(Debug, Clone, Copy)]
pub enum Piece<'a> {
    Call(&'a EntryPart, usize),
    Command(&'a CommandPart),
}

impl Piece<'_> {
    pub(super) fn place(&self) -> Placement {
        match self {
            Piece::Call(e, i) => e.calls.get(*i).map(|c| c.place).unwrap_or_default(),
            Piece::Command(c) => c.place,
        }
    }

    /// Turn in which the piece was placed where it is.
    pub fn turn(&self) -> u64 {
        self.place().turn
    }

    fn order(&self) -> (u64, u64, u8) {
        let p = self.place();
        (
            p.major,
            p.minor,
            u8::from(matches!(self, Piece::Command(_))),
        )
    }
}

impl Input {
    /// Entries' calls and command outputs as one stream, in their places: unchanged pieces
    /// where the previous projection for the same requester had them, then new and changed
    /// ones, oldest change first. Command outputs never change once recorded (they are dropped
    /// when an input changes), so they join the stable, cacheable prefix instead of following
    /// every entry; the state and the last step come after the stream.
    pub fn pieces(&self) -> Vec<Piece<'_>> {
        let mut v: Vec<Piece<'_>> = self
            .entries
            .iter()
            .flat_map(|e| (0..e.calls.len()).map(move |i| Piece::Call(e, i)))
            .chain(self.commands.iter().map(Piece::Command))
            .collect();
        // Stable: an entry's calls, and entries among equal keys, keep their order.
        v.sort_by_key(Piece::order);
        v
    }

    /// Whether the body contains tool calls (and so must define tools).
    pub fn has_calls(&self) -> bool {
        self.step.is_some() || self.entries.iter().any(|e| !e.calls.is_empty())
    }

    /// The tools the body defines: the read tool, then every tool a step of the session called,
    /// first use first, whether this body calls it or not. A list that followed the calls would
    /// change with the last step's tool, and with it every cached prefix (tools come first).
    /// Once the harness declared its tools, they are there from the first request on, calls or
    /// not: a list that appeared with the first call would rewrite the cache at turn 2.
    pub fn tools(&self) -> Vec<ToolDef> {
        if !self.has_calls() && self.step_tools.is_empty() {
            return Vec::new();
        }
        let mut v = vec![self.read_tool.clone()];
        let step_name = self.step.as_ref().and_then(|s| match &s.raw_anthropic {
            Some(raw) if self.format == Format::Anthropic => raw_tool_name(raw),
            _ => Some(s.name.clone()),
        });
        for name in self.step_tools.iter().cloned().chain(step_name) {
            if !v.iter().any(|t| t.name == name) {
                v.push(tools::step_tool(&name));
            }
        }
        v
    }

    /// What [`Self::tools`] cost rendered; nothing when there are none (no `tools` at all).
    pub fn tools_cost(&self, format: Format) -> u64 {
        let defs = self.tools();
        if defs.is_empty() {
            return 0;
        }
        let rendered = tools::render(&defs, format).to_string();
        budget::count_str(&rendered).unwrap_or(rendered.len() as u64)
    }

    /// The placeholder first message when the goal does not fit.
    pub fn minimal_goal(&self, format: Format) -> Result<GoalPart, ProjectionError> {
        if !format.is_messages() {
            return Ok(GoalPart {
                text: String::new(),
                cost: 0,
                is_goal: false,
            });
        }
        Ok(GoalPart {
            text: MINIMAL_USER_TEXT.into(),
            cost: user_text_cost(MINIMAL_USER_TEXT)?,
            is_goal: false,
        })
    }
}

pub(super) fn user_text_cost(text: &str) -> Result<u64, ProjectionError> {
    Ok(MESSAGE_OVERHEAD + BLOCK_OVERHEAD + budget::count_str(text)?)
}

pub(super) fn text_piece_cost(piece: &str) -> Result<u64, ProjectionError> {
    if piece.is_empty() {
        return Ok(0);
    }
    Ok(budget::count_str(piece)? + TEXT_PIECE_OVERHEAD)
}

/// The name of the tool_use block in a raw assistant content.
fn raw_tool_name(raw: &[Value]) -> Option<String> {
    raw.iter()
        .find(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
        .and_then(|b| b.get("name"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// The name of a command output for the policy and for placements: absolute, so it never
/// names a world entry, and unique among the outputs (the harness keeps one per command and
/// working directory; several may be recorded at one observation sequence number).
pub(super) fn command_key(c: &CommandPart) -> PathBuf {
    let mut h = blake3::Hasher::new();
    h.update(c.cwd.as_bytes());
    h.update(&[0]);
    h.update(c.command.as_bytes());
    let d = h.finalize();
    PathBuf::from(format!(
        "/command/{}/{}",
        c.seq,
        ids::hash_hex(d.as_bytes())
    ))
}
