//! From the world and the harness state to a format-neutral [`Input`]: which entries are shown
//! (the world's policy chooses), their current content read from SOURCE now, the synthesized
//! calls that show it, and the exact token cost of every part in the requested format.
//!
//! Nothing here is cached across projections except token counts keyed by content hash: the
//! content itself is read at render time ([`World::read_current`]), so a projection is never
//! stale.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::world::harness::{CommandOutput, Framing, Step, StructuredState};
use crate::world::placements::Placement;
use crate::world::{
    ByteRange, Candidate, CurrentContent, Entry, EntryKind, EntryState, EvictReason, Extent, Form,
    Policy, ReadError, SourceError, World,
};

use super::budget::{
    self, BLOCK_OVERHEAD, CALL_OVERHEAD, JSON_ENTRY_OVERHEAD, JSON_FIELD_OVERHEAD,
    MESSAGE_OVERHEAD, TEXT_PIECE_OVERHEAD,
};
use super::ids;
use super::request::{Format, LineNumbers, ProjectionRequest, StepOutput};
use super::shown_once;
use super::text;
use super::tools::{self, ToolDef};
use super::{
    CommandDropReason, DropReason, Dropped, DroppedCommand, Part, ProjectionError, Skipped,
};

/// Claude Code's `Read` returns at most this many lines unless given a limit: a whole-file
/// call over it states its `limit` so the call and its result agree.
const READ_DEFAULT_LINES: u64 = 2000;
/// Sent as the only user text when nothing else fits (messages must not be empty).
pub const MINIMAL_USER_TEXT: &str = "Continue.";
/// First user message when the harness has not set a goal: the messages must start with a
/// user turn, and a fixed text keeps the prefix stable.
pub const NO_GOAL_TEXT: &str = "No goal has been set for this session yet. The files below are \
shown as they are now.";
const EMPTY_FILE_TEXT: &str = "(the file exists but is empty)";

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
    pub cwd: String,
    pub exit_code: Option<i32>,
    pub output: String,
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
    /// instead ([`shown_once`]).
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
    pub report: Report,
    /// Rendered framing fields, for the json format.
    pub framing_fields: Option<Framing>,
    pub state_fields: Option<StructuredState>,
    /// The requester's layout key (policy, budget, format): what placements are kept under.
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

fn user_text_cost(text: &str) -> Result<u64, ProjectionError> {
    Ok(MESSAGE_OVERHEAD + BLOCK_OVERHEAD + budget::count_str(text)?)
}

fn text_piece_cost(piece: &str) -> Result<u64, ProjectionError> {
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

/// How a path is shown to the model.
pub fn display_path(root: Option<&Path>, rel: &Path) -> String {
    match root {
        Some(r) if rel.as_os_str().is_empty() => r.to_string_lossy().into_owned(),
        Some(r) => r.join(rel).to_string_lossy().into_owned(),
        None if rel.as_os_str().is_empty() => ".".into(),
        None => rel.to_string_lossy().into_owned(),
    }
}

/// Gathers the projection input: harness state, the policy's selection and current content.
pub fn gather(
    world: &World,
    req: &ProjectionRequest,
    policy: &dyn Policy,
    budget: u64,
) -> Result<Input, ProjectionError> {
    let format = req.format;
    let h = world.harness();
    let goal_text = h.goal.read().clone();
    let framing = h.framing.read().clone();
    let state = h.state.read().clone();
    let step = if req.last_step {
        h.last_step.read().clone()
    } else {
        None
    };
    let commands = h.commands.read().clone();

    let mut report = Report::default();
    let goal_text = goal_text.map(|g| shorten_goal(g, budget, &mut report));
    let goal = goal_part(goal_text.as_deref(), format)?;
    let framing_part = framing_part(&framing, format)?;
    let state_part = state_part(&state, format)?;
    let last_step = match &step {
        Some(s) => Some(step_part(s, format)?),
        None => None,
    };
    let mut command_parts = command_parts(world, &commands, format, &mut report)?;
    // The last step's own output, recorded as a command output too, is shown once: as the step
    // now, and as a command output in the stream from the next turn on; or, when the step
    // points at it (below), in the stream already.
    let mut step_command = match &step {
        Some(s) => command_parts
            .iter()
            .position(|c| is_step_output(c, s))
            .map(|i| command_parts.remove(i)),
        None => None,
    };
    let read_tool = tools::read_tool(req);

    let mut input = Input {
        format,
        turn: world.turn(),
        policy: policy.name(),
        framing: framing_part,
        goal,
        entries: Vec::new(),
        state: state_part,
        commands: command_parts,
        step: last_step,
        read_tool,
        max_breakpoints: req.max_breakpoints,
        report,
        framing_fields: (framing != Framing::default()).then_some(framing),
        state_fields: (!state.is_empty()).then_some(state),
        layout: format!("{}/{budget}/{format:?}", policy.name()),
        unchanged_prefix: 0,
        step_tools: h
            .step_tools
            .read()
            .iter()
            .map(|n| ids::tool_name(n))
            .collect(),
    };

    // The step's result will point at lines the stream shows instead of repeating them. The
    // budget is set as if it does for the files the step itself touched, and the policy is
    // told to keep them; whatever the rendered stream does not show in the end stays verbatim
    // (and the final fit makes room for it).
    let shorten = req.step_output == StepOutput::ShownOnce && format != Format::Json;
    // What the prediction read, for the rendering to use rather than read again.
    let mut prefetched: Vec<(PathBuf, CurrentContent)> = Vec::new();
    let mut points_at: Vec<PathBuf> = Vec::new();
    if shorten
        && policy.keeps_last_step()
        && let Some(s) = &step
    {
        prefetched = step_files(world, s);
        if let Some((result, keys)) =
            predicted_step_output(req, s, &prefetched, step_command.as_ref())
        {
            if let Some(c) = step_command.take_if(|c| keys.contains(&command_key(c))) {
                input.commands.push(c);
            }
            points_at = keys;
            input.step = Some(shortened_step(s, result, points_at.clone(), format)?);
        }
    }

    // What the entries may use: the budget minus everything else, with the tool definitions
    // counted as if there were calls (there will be, if any entry is kept).
    let fixed = {
        let mut probe = input.clone();
        probe.entries.clear();
        probe.commands.clear();
        let mut t = budget::total(&probe, format);
        if format.is_messages() && probe.tools().is_empty() {
            let rendered = tools::render(std::slice::from_ref(&probe.read_tool), format);
            t = t.saturating_add(budget::count_str(&rendered.to_string())?);
        }
        t
    };
    let entries_budget = budget.saturating_sub(fixed);

    let root = req.absolute_paths.as_deref();
    let mut withheld_paths: Vec<PathBuf> = Vec::new();
    let mut omitted: Vec<PathBuf> = Vec::new();
    let mut adjust = |c: &mut Candidate| {
        if c.notice_only {
            match world.entry(&c.path).map(|e| e.state) {
                Some(EntryState::Withheld) => withheld_paths.push(c.path.clone()),
                Some(EntryState::Deleted) if !req.include_deleted => {
                    // Free, so the policy keeps it and we can leave it out without it being
                    // reported as evicted.
                    c.whole_tokens = 0;
                    omitted.push(c.path.clone());
                    return;
                }
                _ => {}
            }
        }
        c.in_last_step = points_at.contains(&c.path);
        // The agent's own edits are shown whole when they fit (it needs them to keep editing);
        // what it read of them before is no measure of what it needs now, where it read last is.
        if c.agent_wrote {
            c.ranges = None;
        }
        let path_tokens = estimate_path_tokens(root, &c.path);
        let per_call = estimate_call_overhead(format, path_tokens);
        let content = |t: u32| {
            // Line-number gutters add about a quarter to code (one or two tokens a line).
            if matches!(req.line_numbers, LineNumbers::None) || format == Format::Json {
                0
            } else {
                u64::from(t) / 4
            }
        };
        let whole = u64::from(c.whole_tokens)
            .saturating_add(per_call)
            .saturating_add(content(c.whole_tokens));
        c.whole_tokens = u32::try_from(whole).unwrap_or(u32::MAX);
        if let Some((ranges, t)) = &mut c.ranges {
            let n = ranges.len() as u64;
            let cost = u64::from(*t)
                .saturating_add(per_call.saturating_mul(n))
                .saturating_add(content(*t));
            *t = u32::try_from(cost).unwrap_or(u32::MAX);
            // A partly read file is shown as what was read, whatever form the policy picks
            // ([`shown_form`]), so both forms cost that.
            c.whole_tokens = *t;
        }
        for (ranges, t) in [&mut c.recent, &mut c.glance, &mut c.held]
            .into_iter()
            .flatten()
        {
            let n = ranges.len() as u64;
            let cost = u64::from(*t)
                .saturating_add(per_call.saturating_mul(n))
                .saturating_add(content(*t));
            *t = u32::try_from(cost).unwrap_or(u32::MAX);
        }
    };
    // Command outputs compete with the entries for the same budget, as entries the agent saw
    // once when they were recorded: an old `pip list` must not outlive the file being edited.
    let turn_now = world.turn();
    let command_cands: Vec<Candidate> = input
        .commands
        .iter()
        .map(|c| {
            let mut cand = Candidate::seen_once(
                command_key(c),
                EntryKind::Command,
                u32::try_from(c.cost).unwrap_or(u32::MAX),
                turn_now.saturating_sub(c.turn),
                c.seq,
            );
            cand.in_last_step = points_at.contains(&cand.path);
            cand
        })
        .collect();
    let layout = input.layout.clone();
    let selection = world.select_with_extra(
        entries_budget,
        policy,
        &mut adjust,
        command_cands,
        Some(&layout),
    );
    let kept_commands: Vec<bool> = input
        .commands
        .iter()
        .map(|c| {
            let key = command_key(c);
            selection.kept.iter().any(|k| k.path == key)
        })
        .collect();
    let mut keep = kept_commands.iter();
    let commands = std::mem::take(&mut input.commands);
    for c in commands {
        if keep.next().copied().unwrap_or(false) {
            input.commands.push(c);
        } else {
            input.report.evicted.push(Dropped {
                part: Part::Command,
                path: Some(c.command.clone()),
                reason: DropReason::OverBudget,
                tokens: c.cost,
            });
        }
    }

    for ev in selection.evicted.iter().filter(|e| e.path.is_relative()) {
        let reason = match ev.reason {
            EvictReason::OverBudget => DropReason::OverBudget,
            EvictReason::Aged { .. } => DropReason::Aged,
        };
        input.report.evicted.push(Dropped {
            part: Part::Entry,
            path: Some(display_path(root, &ev.path)),
            reason,
            tokens: u64::from(ev.tokens),
        });
    }
    for p in &withheld_paths {
        input.report.withheld.push(display_path(root, p));
    }

    let mut entries = Vec::with_capacity(selection.kept.len());
    let prev = world.placements(&layout);
    for k in selection.kept.iter().filter(|k| k.path.is_relative()) {
        if omitted.contains(&k.path) {
            continue;
        }
        let Some(meta) = world.entry(&k.path) else {
            continue;
        };
        let shown_before = prev
            .as_ref()
            .and_then(|p| p.segments.get(&k.path))
            .map_or(&[][..], Vec::as_slice);
        let read = prefetched
            .iter()
            .position(|(p, _)| *p == k.path)
            .map(|i| prefetched.swap_remove(i).1);
        match entry_part(world, req, &k.path, &meta, &k.form, shown_before, read)? {
            Rendered::Part(p) => {
                if p.shown == Shown::Withheld && !withheld_paths.contains(&k.path) {
                    input.report.withheld.push(p.display.clone());
                }
                if p.shown == Shown::Deleted && !req.include_deleted {
                    continue;
                }
                entries.push(p);
            }
            Rendered::Skip(reason) => input.report.skipped.push(Skipped {
                path: display_path(root, &k.path),
                reason,
            }),
        }
    }
    entries.sort_by(|a, b| (a.order_seq, &a.path).cmp(&(b.order_seq, &b.path)));
    dedupe_ids(&mut entries, input.step.as_ref());
    input.entries = entries;
    if let Some(s) = &step
        && shorten
    {
        let groups = [
            shown_once::file_sources(&input.entries, req.line_numbers),
            input
                .commands
                .iter()
                .map(shown_once::Source::command)
                .collect(),
        ];
        input.step = Some(match shown_once::shorten(&s.result, &groups) {
            Some((result, keys)) => shortened_step(s, result, keys, format)?,
            None => step_part(s, format)?,
        });
    }
    input.report.withheld.sort();
    input.report.withheld.dedup();
    super::placement::assign(world, &layout, &mut input);
    Ok(input)
}

/// The step `s` with `result` in place of its own, keeping the verbatim one to fall back on.
fn shortened_step(
    s: &Step,
    result: String,
    points_at: Vec<PathBuf>,
    format: Format,
) -> Result<StepPart, ProjectionError> {
    let shortened = Step {
        result,
        ..s.clone()
    };
    let mut part = step_part(&shortened, format)?;
    part.verbatim = Some(Box::new(step_part(s, format)?));
    part.points_at = points_at;
    Ok(part)
}

/// Files the prediction reads, newest access first: a step rarely shows more, and a `grep -r`
/// that touched hundreds shows none of them as runs of lines.
const PREDICT_MAX_FILES: usize = 8;
/// Bigger files are not read for the prediction (their lines may still be matched against what
/// the stream shows of them).
const PREDICT_MAX_BYTES: usize = 1 << 20;

/// The files the step touched, newest access first, as they are now (read from SOURCE).
fn step_files(world: &World, s: &Step) -> Vec<(PathBuf, CurrentContent)> {
    world
        .agent_files_since(s.turn.saturating_sub(1))
        .into_iter()
        .take(PREDICT_MAX_FILES)
        .filter_map(|p| {
            let c = world.read_current(&p).ok()?;
            (c.kind == EntryKind::File && c.bytes.len() <= PREDICT_MAX_BYTES).then_some((p, c))
        })
        .collect()
}

/// The step's output as [`shown_once::shorten`] would shorten it if `files` were shown whole
/// and its own output, recorded as a command output, was in the stream; and the keys of what
/// it would point at.
fn predicted_step_output(
    req: &ProjectionRequest,
    s: &Step,
    files: &[(PathBuf, CurrentContent)],
    own_output: Option<&CommandPart>,
) -> Option<(String, Vec<PathBuf>)> {
    let root = req.absolute_paths.as_deref();
    let texts: Vec<(&PathBuf, String, std::borrow::Cow<'_, str>)> = files
        .iter()
        .map(|(p, c)| (p, display_path(root, p), String::from_utf8_lossy(&c.bytes)))
        .collect();
    let groups = [
        texts
            .iter()
            .map(|(p, display, text)| shown_once::Source::file(p, display, 1, text))
            .collect(),
        own_output
            .into_iter()
            .map(shown_once::Source::command)
            .collect(),
    ];
    shown_once::shorten(&s.result, &groups)
}

/// Whether `c` is the output of the step `s` (same text, and the step's input names the
/// command).
fn is_step_output(c: &CommandPart, s: &Step) -> bool {
    c.output == s.result
        && match &s.input {
            Value::String(v) => *v == c.command,
            Value::Object(m) => m.values().any(|v| v.as_str() == Some(c.command.as_str())),
            _ => false,
        }
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

/// A conservative guess of a path's tokens without tokenizing it (paths tokenize at about
/// three bytes a token).
fn estimate_path_tokens(root: Option<&Path>, rel: &Path) -> u64 {
    let bytes = root.map_or(0, |r| r.as_os_str().len() + 1) + rel.as_os_str().len();
    (bytes as u64).div_ceil(3) + 1
}

/// The per-call envelope a policy should add to an entry's content cost.
fn estimate_call_overhead(format: Format, path_tokens: u64) -> u64 {
    match format {
        // Two ids (about 10 tokens each), name, input JSON with the path.
        Format::Anthropic | Format::OpenaiChat | Format::OpenaiResponses => {
            MESSAGE_OVERHEAD * 2 + CALL_OVERHEAD + 20 + 8 + path_tokens
        }
        Format::Text => TEXT_PIECE_OVERHEAD + 12 + path_tokens,
        Format::Json => JSON_ENTRY_OVERHEAD + path_tokens,
    }
}

/// Two different calls hashing to the same 40-bit id is most unlikely, but ids must be unique
/// in a request: suffix later duplicates deterministically.
fn dedupe_ids(entries: &mut [EntryPart], step: Option<&StepPart>) {
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    if let Some(s) = step {
        seen.insert(s.id.clone());
    }
    for e in entries.iter_mut() {
        for c in &mut e.calls {
            let mut n = 1;
            while !seen.insert(c.id.clone()) {
                n += 1;
                let base: String = c.id.chars().take(ids::MAX_ID_LEN - 4).collect();
                c.id = format!("{base}_{n}");
            }
        }
    }
}

/// The most of the budget the goal may take: the rest is for the world it is about.
const GOAL_MAX_SHARE_PERCENT: u64 = 50;
/// Lines longer than this are cut in pieces of this size when a goal is shortened.
const GOAL_PIECE_BYTES: usize = 400;

/// A goal over its share of `budget`, cut to its beginning and end around a marker saying how
/// many lines are left out (`goal.get` still has it whole). The task statement tends to come
/// first and the instructions on how to finish last; dropping the goal whole (what the final fit
/// would do) leaves the model with nothing to work towards. Deterministic, so the shortened
/// goal is the same bytes on every turn and stays in the cached prefix.
fn shorten_goal(goal: String, budget: u64, report: &mut Report) -> String {
    let limit = budget.saturating_mul(GOAL_MAX_SHARE_PERCENT) / 100;
    let count = |s: &str| budget::count_str(s).unwrap_or(s.len() as u64 / 3);
    let whole = count(&goal);
    if whole <= limit {
        return goal;
    }
    // lines, and long lines in pieces, so a goal that is one long line can be cut too
    let lines: Vec<&str> = goal
        .split_inclusive('\n')
        .flat_map(|l| {
            let mut pieces = Vec::new();
            let mut rest = l;
            while rest.len() > GOAL_PIECE_BYTES {
                let mut at = GOAL_PIECE_BYTES;
                while !rest.is_char_boundary(at) {
                    at -= 1;
                }
                pieces.push(&rest[..at]);
                rest = &rest[at..];
            }
            pieces.push(rest);
            pieces
        })
        .collect();
    let cut = |keep: usize| -> String {
        // two thirds of what is kept from the start, one third from the end
        let head = (keep * 2).div_ceil(3).min(lines.len());
        let tail = (keep - head.min(keep)).min(lines.len() - head);
        let left_out: usize = lines[head..lines.len() - tail]
            .iter()
            .map(|l| l.matches('\n').count())
            .sum::<usize>()
            .max(1);
        let mut out: String = lines[..head].concat();
        if !out.ends_with('\n') && !out.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!(
            "\n[... {left_out} lines of the task left out here to fit the token budget ...]\n\n"
        ));
        out.push_str(&lines[lines.len() - tail..].concat());
        out
    };
    // the most lines that fit, by bisection (a line may be long: zero lines always fits)
    let (mut lo, mut hi) = (0usize, lines.len().saturating_sub(1));
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if count(&cut(mid)) <= limit {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    let short = cut(lo);
    report.evicted.push(Dropped {
        part: Part::Goal,
        path: None,
        reason: DropReason::Shortened,
        tokens: whole.saturating_sub(count(&short)),
    });
    short
}

fn goal_part(goal: Option<&str>, format: Format) -> Result<GoalPart, ProjectionError> {
    let real = goal.filter(|g| !g.trim().is_empty());
    let (text, is_goal) = match real {
        Some(g) => (g.to_owned(), true),
        None if format.is_messages() => (NO_GOAL_TEXT.to_owned(), false),
        None => (String::new(), false),
    };
    let cost = match format {
        _ if text.is_empty() => 0,
        Format::Text => text_piece_cost(&text::goal_piece(&text))?,
        Format::Json => JSON_FIELD_OVERHEAD + budget::count_str(&text)?,
        _ => user_text_cost(&text)?,
    };
    Ok(GoalPart {
        text,
        cost,
        is_goal,
    })
}

/// The framing as system text: one `Key: value` line per field set, settings as sorted JSON.
pub fn framing_text(f: &Framing) -> Option<String> {
    let mut lines = Vec::new();
    let fields = [
        ("Workspace", &f.workspace),
        ("Shell", &f.shell),
        ("Date", &f.date),
        ("Timezone", &f.timezone),
        ("Model", &f.model),
    ];
    for (k, v) in fields {
        if let Some(v) = v.as_deref().map(str::trim).filter(|v| !v.is_empty()) {
            lines.push(format!("{k}: {v}"));
        }
    }
    if !f.settings.is_empty() {
        lines.push(format!("Settings: {}", Value::Object(f.settings.clone())));
    }
    (!lines.is_empty()).then(|| lines.join("\n"))
}

fn framing_part(f: &Framing, format: Format) -> Result<Option<TextPart>, ProjectionError> {
    let Some(text) = framing_text(f) else {
        return Ok(None);
    };
    let cost = match format {
        Format::Text => text_piece_cost(&text::framing_piece(&text))?,
        Format::Json => JSON_FIELD_OVERHEAD + budget::count_str(&text)?,
        _ => MESSAGE_OVERHEAD + budget::count_str(&text)?,
    };
    Ok(Some(TextPart { text, cost }))
}

/// Structured state as a short labelled list; `None` when there is nothing to say.
pub fn state_text(s: &StructuredState) -> Option<String> {
    let mut out = String::new();
    if let Some(i) = s.intent.as_deref().map(str::trim).filter(|i| !i.is_empty()) {
        out.push_str(&format!("Intent: {i}\n"));
    }
    let lists = [
        ("Decisions", &s.decisions),
        ("Constraints", &s.constraints),
        ("Open loops", &s.open_loops),
        ("Ruled out", &s.ruled_out),
    ];
    for (label, items) in lists {
        let items: Vec<&str> = items
            .iter()
            .map(|x| x.trim())
            .filter(|x| !x.is_empty())
            .collect();
        if items.is_empty() {
            continue;
        }
        out.push_str(label);
        out.push_str(":\n");
        for x in items {
            out.push_str("- ");
            out.push_str(x);
            out.push('\n');
        }
    }
    if out.is_empty() {
        return None;
    }
    Some(format!(
        "Current state of the work (kept by the harness):\n{}",
        out.trim_end()
    ))
}

fn state_part(s: &StructuredState, format: Format) -> Result<Option<TextPart>, ProjectionError> {
    let Some(text) = state_text(s) else {
        return Ok(None);
    };
    let cost = match format {
        Format::Text => text_piece_cost(&text::state_piece(&text))?,
        Format::Json => JSON_FIELD_OVERHEAD + budget::count_str(&text)?,
        _ => user_text_cost(&text)?,
    };
    Ok(Some(TextPart { text, cost }))
}

/// A raw assistant content usable verbatim: an array of typed blocks with exactly one tool_use,
/// carrying the step's (valid) id and a valid name, and no empty text.
fn usable_raw(raw: &Value, id: &str) -> Option<Vec<Value>> {
    let blocks = raw.as_array()?;
    let mut uses = 0;
    for b in blocks {
        match b.get("type").and_then(Value::as_str)? {
            "tool_use" => {
                uses += 1;
                let ok = b.get("id").and_then(Value::as_str) == Some(id)
                    && b.get("name")
                        .and_then(Value::as_str)
                        .is_some_and(ids::valid_tool_name)
                    && b.get("input").is_some_and(Value::is_object);
                if !ok {
                    return None;
                }
            }
            "text" => {
                let t = b.get("text").and_then(Value::as_str)?;
                if t.trim().is_empty() {
                    return None;
                }
            }
            "tool_result" => return None,
            _ => {}
        }
    }
    (uses == 1).then(|| blocks.clone())
}

fn step_part(s: &Step, format: Format) -> Result<StepPart, ProjectionError> {
    let id = ids::step_id(&s.tool_use_id);
    let name = ids::tool_name(&s.tool_name);
    // Tool inputs must be JSON objects; anything else is wrapped rather than dropped.
    let input = match &s.input {
        Value::Object(m) => m.clone(),
        other => {
            let mut m = Map::new();
            m.insert("input".into(), other.clone());
            m
        }
    };
    let assistant_text = s.assistant_text.clone().filter(|t| !t.trim().is_empty());
    let raw_anthropic = match (&s.raw_assistant_content, format) {
        (Some(raw), Format::Anthropic) if id == s.tool_use_id => usable_raw(raw, &id),
        _ => None,
    };
    let input_json = Value::Object(input.clone()).to_string();
    let cost = match format {
        Format::Text => {
            text_piece_cost(&text::step_piece(&name, &input_json, &s.result, s.is_error))?
        }
        Format::Json => {
            JSON_ENTRY_OVERHEAD
                + budget::count_str(&id)?
                + budget::count_str(&name)?
                + budget::count_str(&input_json)?
                + budget::count_str(&s.result)?
                + match &assistant_text {
                    Some(t) => budget::count_str(t)?,
                    None => 0,
                }
        }
        _ => {
            let mut c = 2 * MESSAGE_OVERHEAD
                + CALL_OVERHEAD
                + 2 * budget::count_str(&id)?
                + budget::count_str(&name)?
                + budget::count_str(&input_json)?
                + budget::count_str(&s.result)?;
            if let Some(t) = &assistant_text {
                c += BLOCK_OVERHEAD + budget::count_str(t)?;
            }
            if let Some(raw) = &raw_anthropic {
                // Thinking blocks and signatures count too: take the serialized size.
                c += BLOCK_OVERHEAD * raw.len() as u64
                    + budget::count_str(&Value::Array(raw.clone()).to_string())?;
            }
            c
        }
    };
    Ok(StepPart {
        id,
        name,
        input,
        result: s.result.clone(),
        is_error: s.is_error,
        assistant_text,
        raw_anthropic,
        cost,
        verbatim: None,
        points_at: Vec::new(),
    })
}

/// The text a command output is shown as in the message formats.
fn command_text(c: &CommandOutput) -> String {
    let cwd = if c.cwd.is_empty() || c.cwd == "." {
        String::new()
    } else {
        format!(" (in {})", c.cwd)
    };
    let code = match c.exit_code {
        Some(n) => format!("exit code {n}"),
        None => "exit code unknown".into(),
    };
    let output = if c.output.trim().is_empty() {
        "(no output)"
    } else {
        c.output.as_str()
    };
    format!(
        "Output of `{}`{cwd}, {code}. Still current: the files it read are unchanged.\n{output}",
        c.command
    )
}

/// Command outputs whose inputs are unchanged now (re-read from SOURCE), oldest first.
fn command_parts(
    world: &World,
    commands: &[CommandOutput],
    format: Format,
    report: &mut Report,
) -> Result<Vec<CommandPart>, ProjectionError> {
    let mut out = Vec::new();
    'cmds: for c in commands {
        for (path, recorded) in &c.inputs {
            let reason = match world.read_current(path) {
                Ok(cur) if ids::hash_hex(&cur.hash).eq_ignore_ascii_case(recorded) => continue,
                Ok(_) => CommandDropReason::InputChanged,
                // Its output may quote the secret: never shown.
                Err(ReadError::Withheld { .. }) => CommandDropReason::InputWithheld,
                Err(_) => CommandDropReason::InputUnreadable,
            };
            report.stale_dropped_commands.push(DroppedCommand {
                command: c.command.clone(),
                cwd: c.cwd.clone(),
                path: path.to_string_lossy().into_owned(),
                reason,
            });
            continue 'cmds;
        }
        let text = command_text(c);
        let cost = match format {
            Format::Text => text_piece_cost(&text::command_piece(&text))?,
            Format::Json => {
                JSON_ENTRY_OVERHEAD + budget::count_str(&c.command)? + budget::count_str(&c.output)?
            }
            _ => user_text_cost(&text)?,
        };
        out.push(CommandPart {
            command: c.command.clone(),
            turn: c.turn,
            cwd: c.cwd.clone(),
            exit_code: c.exit_code,
            output: c.output.clone(),
            seq: c.seq,
            place: Placement::default(),
            text,
            cost,
        });
    }
    out.sort_by_key(|c| c.seq);
    Ok(out)
}

enum Rendered {
    Part(EntryPart),
    Skip(String),
}

/// Start offsets of the lines of `bytes` (a final newline does not start a line).
fn line_starts(bytes: &[u8]) -> Vec<usize> {
    let mut v = Vec::new();
    if bytes.is_empty() {
        return v;
    }
    v.push(0);
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'\n' && i + 1 < bytes.len() {
            v.push(i + 1);
        }
    }
    v
}

/// Bytes of line `i` (0-based) without its newline.
fn line<'a>(bytes: &'a [u8], starts: &[usize], i: usize) -> &'a [u8] {
    let start = starts[i];
    let end = starts.get(i + 1).map_or(bytes.len(), |n| n - 1);
    let l = &bytes[start..end.max(start)];
    l.strip_suffix(b"\n").unwrap_or(l)
}

/// Lines `first..first+count` (0-based) with the gutter of `style`.
fn numbered(
    bytes: &[u8],
    starts: &[usize],
    first: usize,
    count: usize,
    style: LineNumbers,
) -> String {
    let mut out = String::with_capacity(bytes.len() / starts.len().max(1) * count + count * 8);
    for i in first..first + count {
        if i > first {
            out.push('\n');
        }
        let text = String::from_utf8_lossy(line(bytes, starts, i));
        match style {
            LineNumbers::Tab => {
                out.push_str(&(i + 1).to_string());
                out.push('\t');
            }
            LineNumbers::Arrow => {
                out.push_str(&format!("{:>6}\u{2192}", i + 1));
            }
            LineNumbers::None => {}
        }
        out.push_str(&text);
    }
    out
}

/// Line ranges (0-based first, count) covering the byte ranges, merged, within the content.
fn line_ranges(ranges: &[ByteRange], starts: &[usize], len: usize) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for r in ranges {
        let Ok(start) = usize::try_from(r.start) else {
            continue;
        };
        if start >= len || r.is_empty() {
            continue;
        }
        let end = usize::try_from(r.end).unwrap_or(usize::MAX).min(len);
        let first = starts.partition_point(|&s| s <= start).saturating_sub(1);
        let last = starts.partition_point(|&s| s < end).saturating_sub(1);
        out.push((first, last));
    }
    out.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (f, l) in out {
        match merged.last_mut() {
            Some(m) if f <= m.1 + 1 => m.1 = m.1.max(l),
            _ => merged.push((f, l)),
        }
    }
    merged.into_iter().map(|(f, l)| (f, l - f + 1)).collect()
}

/// `spans` (0-based first line, count) cut wherever a part the previous projection showed
/// (1-based first line, count) starts or ends inside them. A part shown before and still inside
/// a span comes out whole and alone: the same lines render the same bytes under the same id, so
/// it keeps its place in the stream, and only the lines read since are new. Merged into one call,
/// a range read next to an earlier one would send the earlier lines again, and move them.
fn split_at(spans: &[(usize, usize)], shown_before: &[(u64, u64)]) -> Vec<(usize, usize)> {
    if shown_before.is_empty() {
        return spans.to_vec();
    }
    let mut cuts: Vec<usize> = shown_before
        .iter()
        .flat_map(|&(first, count)| {
            let start = usize::try_from(first.saturating_sub(1)).unwrap_or(usize::MAX);
            [
                start,
                start.saturating_add(usize::try_from(count).unwrap_or(usize::MAX)),
            ]
        })
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let mut out = Vec::with_capacity(spans.len());
    for &(first, count) in spans {
        let end = first + count;
        let mut at = first;
        for &c in cuts.iter().filter(|&&c| c > first && c < end) {
            out.push((at, c - at));
            at = c;
        }
        out.push((at, end - at));
    }
    out
}

/// Memo key of a rendered result: it is determined by the content, the lines and the gutter.
fn result_key(
    hash: &[u8; 32],
    lines: Option<(usize, usize)>,
    style: LineNumbers,
    tag: &[u8],
) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(tag);
    h.update(hash);
    h.update(&[style as u8]);
    if let Some((f, n)) = lines {
        h.update(&(f as u64).to_le_bytes());
        h.update(&(n as u64).to_le_bytes());
    }
    *h.finalize().as_bytes()
}

/// Which stamp orders an entry: its last change; for a file shown as ranges, also its last
/// read (a new range changes what is shown without changing the file).
fn order_of(meta: &Entry, form: &Form) -> (u64, u64) {
    let mut s = meta.last_changed.unwrap_or(meta.first_observed);
    if matches!(form, Form::Ranges(_)) && meta.last_observed.seq > s.seq {
        s = meta.last_observed;
    }
    (s.seq, s.turn)
}

/// The form actually shown: a file the agent read only in part is shown as those parts (the
/// model saw nothing else of it), unless the agent wrote it (then whole: it needs all of its
/// own edit). Policies may prefer the whole of a small file; this overrides them. Ranges a
/// policy chose (a file too big to show whole) are shown as chosen.
fn shown_form(meta: &Entry, form: &Form) -> Form {
    match (form, &meta.extent) {
        (Form::Whole, Extent::Ranges(set))
            if !meta.agent_wrote && meta.size.is_none_or(|size| !set.covers(size)) =>
        {
            Form::Ranges(set.as_slice().to_vec())
        }
        _ => form.clone(),
    }
}

fn entry_part(
    world: &World,
    req: &ProjectionRequest,
    path: &Path,
    meta: &Entry,
    form: &Form,
    shown_before: &[(u64, u64)],
    read: Option<CurrentContent>,
) -> Result<Rendered, ProjectionError> {
    let display = display_path(req.absolute_paths.as_deref(), path);
    let form = &shown_form(meta, form);
    let (order_seq, order_turn) = order_of(meta, form);
    let mut part = EntryPart {
        path: path.to_owned(),
        display,
        kind: meta.kind,
        shown: Shown::Content,
        hash: None,
        order_seq,
        order_turn,
        pinned: meta.pinned,
        agent_wrote: meta.agent_wrote,
        whole: true,
        total_lines: 0,
        calls: Vec::new(),
        segments: Vec::new(),
        cost: 0,
    };
    let current = match (form, meta.state) {
        (Form::Notice, EntryState::Withheld) => Err(Shown::Withheld),
        (Form::Notice, _) => Err(Shown::Deleted),
        // What was read for this projection already (the last step's files) is not read again.
        _ => match read.map_or_else(|| world.read_current(path), Ok) {
            Ok(c) => Ok(c),
            Err(ReadError::Withheld { .. }) => Err(Shown::Withheld),
            Err(ReadError::Source(SourceError::Open { source, .. }))
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Err(Shown::Deleted)
            }
            Err(e) => return Ok(Rendered::Skip(e.to_string())),
        },
    };
    match current {
        Ok(c) => content_calls(req, &mut part, &c, form, shown_before)?,
        Err(shown) => notice_call(req, &mut part, shown),
    }
    part.cost = entry_cost(req, &part)?;
    Ok(Rendered::Part(part))
}

fn input_for(
    req: &ProjectionRequest,
    display: &str,
    lines: Option<(u64, u64)>,
) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert(req.path_param.clone(), Value::String(display.to_owned()));
    if let Some((offset, limit)) = lines {
        m.insert("offset".into(), json!(offset));
        m.insert("limit".into(), json!(limit));
    }
    m
}

fn notice_call(req: &ProjectionRequest, part: &mut EntryPart, shown: Shown) {
    part.shown = shown;
    let (tag, result, is_error) = match shown {
        Shown::Deleted => (
            "deleted",
            format!("File does not exist: {} (it was deleted).", part.display),
            true,
        ),
        _ => (
            "withheld",
            format!(
                "{} exists, but its content is withheld by policy (it looks like a secret).",
                part.display
            ),
            false,
        ),
    };
    let id = ids::call_id(&part.path, &[0; 32], tag);
    part.calls.push(Call {
        id,
        input: input_for(req, &part.display, None),
        lines: None,
        result,
        is_error,
        place: Placement::default(),
    });
}

fn content_calls(
    req: &ProjectionRequest,
    part: &mut EntryPart,
    c: &CurrentContent,
    form: &Form,
    shown_before: &[(u64, u64)],
) -> Result<(), ProjectionError> {
    part.hash = Some(c.hash);
    part.kind = c.kind;
    let bytes = &c.bytes;
    if c.kind == EntryKind::Dir {
        // A listing has no lines to number; shown as it is.
        let listing = String::from_utf8_lossy(bytes).trim_end().to_owned();
        part.total_lines = listing.lines().count() as u64;
        part.calls.push(Call {
            id: ids::call_id(&part.path, &c.hash, ""),
            input: input_for(req, &part.display, None),
            lines: None,
            result: if listing.is_empty() {
                "(empty directory)".into()
            } else {
                listing.clone()
            },
            is_error: false,
            place: Placement::default(),
        });
        if req.format == Format::Json {
            part.segments.push(Segment {
                first_line: 1,
                line_count: part.total_lines,
                text: listing,
            });
        }
        return Ok(());
    }
    let starts = line_starts(bytes);
    let n = starts.len();
    part.total_lines = n as u64;
    let ranges = match form {
        Form::Ranges(r) => {
            let lr = line_ranges(r, &starts, bytes.len());
            // Lines read before the file shrank are gone: show it whole rather than nothing.
            (!lr.is_empty() && lr != [(0, n)]).then(|| split_at(&lr, shown_before))
        }
        _ => None,
    };
    let spans: Vec<(usize, usize)> = match &ranges {
        Some(lr) => lr.clone(),
        None => vec![(0, n)],
    };
    part.whole = ranges.is_none();
    for (first, count) in spans {
        let lines_arg = match &ranges {
            Some(_) => Some((first as u64 + 1, count as u64)),
            None if n as u64 > READ_DEFAULT_LINES => Some((1, n as u64)),
            None => None,
        };
        let tag = match &ranges {
            Some(_) => format!("L{}+{}", first + 1, count),
            None => String::new(),
        };
        let result = if n == 0 {
            EMPTY_FILE_TEXT.to_owned()
        } else {
            numbered(bytes, &starts, first, count, req.line_numbers)
        };
        // A part of a file is named by what it shows, so an edit elsewhere in the file leaves
        // its id, bytes and place alone.
        let id = match &ranges {
            Some(_) => ids::call_id(&part.path, blake3::hash(result.as_bytes()).as_bytes(), &tag),
            None => ids::call_id(&part.path, &c.hash, &tag),
        };
        part.calls.push(Call {
            id,
            input: input_for(req, &part.display, lines_arg),
            lines: ranges.as_ref().map(|_| (first as u64 + 1, count as u64)),
            result,
            is_error: false,
            place: Placement::default(),
        });
        if req.format == Format::Json && n > 0 {
            let start = starts[first];
            let end = starts.get(first + count).copied().unwrap_or(bytes.len());
            part.segments.push(Segment {
                first_line: first as u64 + 1,
                line_count: count as u64,
                text: String::from_utf8_lossy(&bytes[start..end]).into_owned(),
            });
        }
    }
    Ok(())
}

/// Exact tokens of an entry's strings plus the format's envelope.
fn entry_cost(req: &ProjectionRequest, part: &EntryPart) -> Result<u64, ProjectionError> {
    let result_tokens = |call: &Call| -> Result<u64, ProjectionError> {
        Ok(match part.hash {
            Some(h) if part.shown == Shown::Content => {
                let lines = call.lines.map(|(f, n)| (f as usize, n as usize));
                let key = result_key(&h, lines, req.line_numbers, b"result");
                budget::count_keyed(&key, &call.result)?
            }
            _ => budget::count_str(&call.result)?,
        })
    };
    Ok(match req.format {
        Format::Anthropic | Format::OpenaiChat | Format::OpenaiResponses => {
            // Every call is an assistant message and a result message of its own.
            let mut c = 0;
            for call in &part.calls {
                let input = Value::Object(call.input.clone()).to_string();
                c += 2 * MESSAGE_OVERHEAD
                    + CALL_OVERHEAD
                    + 2 * budget::count_str(&call.id)?
                    + budget::count_str(&req.tool_name)?
                    + budget::count_str(&input)?
                    + result_tokens(call)?;
            }
            c
        }
        Format::Text => {
            let mut c = 0;
            for (i, call) in part.calls.iter().enumerate() {
                let (head, tail) = text::entry_frame(part, i);
                c += budget::count_str(&head)? + budget::count_str(&tail)? + result_tokens(call)?;
                c += TEXT_PIECE_OVERHEAD;
            }
            c
        }
        Format::Json => {
            let mut c = JSON_ENTRY_OVERHEAD + budget::count_str(&part.display)?;
            match part.hash {
                Some(h) => {
                    for s in &part.segments {
                        let lines = Some((s.first_line as usize, s.line_count as usize));
                        let key = result_key(&h, lines, LineNumbers::None, b"raw");
                        c += budget::count_keyed(&key, &s.text)? + JSON_FIELD_OVERHEAD;
                    }
                }
                None => {
                    for call in &part.calls {
                        c += budget::count_str(&call.result)?;
                    }
                }
            }
            c
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_goal_over_half_the_budget_keeps_its_beginning_and_end() {
        let goal: String = (1..=400)
            .map(|i| format!("requirement {i}: the parser must accept input form {i}\n"))
            .collect();
        let count = |s: &str| budget::count_str(s).unwrap_or(u64::MAX);
        let mut report = Report::default();
        // fits its share: untouched, nothing reported
        let same = shorten_goal(goal.clone(), 2 * count(&goal), &mut report);
        assert_eq!(same, goal);
        assert!(report.evicted.is_empty());
        let short = shorten_goal(goal.clone(), 2000, &mut report);
        assert!(count(&short) <= 1000, "{}", count(&short));
        assert!(count(&short) > 800, "too much left out: {}", count(&short));
        assert!(short.starts_with("requirement 1: "));
        assert!(short.ends_with("requirement 400: the parser must accept input form 400\n"));
        assert!(short.contains("lines of the task left out here"));
        assert_eq!(report.evicted.len(), 1);
        assert_eq!(report.evicted[0].reason, DropReason::Shortened);
        // the same bytes every time (the cached prefix depends on it)
        assert_eq!(shorten_goal(goal.clone(), 2000, &mut report), short);
        // one long line is cut too
        let line = "word ".repeat(5000);
        let short = shorten_goal(line.clone(), 1000, &mut report);
        assert!(
            count(&short) <= 500 && short.starts_with("word word"),
            "{short}"
        );
    }

    #[test]
    fn lines_and_ranges() {
        let b = b"a\nbb\nccc\n";
        let s = line_starts(b);
        assert_eq!(s, vec![0, 2, 5]);
        assert_eq!(
            numbered(b, &s, 0, 3, LineNumbers::Tab),
            "1\ta\n2\tbb\n3\tccc"
        );
        assert_eq!(
            numbered(b, &s, 1, 1, LineNumbers::Arrow),
            "     2\u{2192}bb"
        );
        // Byte 3 is in line 2, bytes 5..7 in line 3: adjacent lines merge.
        let r = [ByteRange::at(3, 1), ByteRange::at(5, 2)];
        assert_eq!(line_ranges(&r, &s, b.len()), vec![(1, 2)]);
        let r = [ByteRange::at(0, 1), ByteRange::at(6, 100)];
        assert_eq!(line_ranges(&r, &s, b.len()), vec![(0, 1), (2, 1)]);
        assert!(line_ranges(&[ByteRange::at(100, 5)], &s, b.len()).is_empty());
        let no_nl = b"x\ny";
        let s = line_starts(no_nl);
        assert_eq!(numbered(no_nl, &s, 0, 2, LineNumbers::None), "x\ny");
        assert!(line_starts(b"").is_empty());
    }

    #[test]
    fn spans_are_cut_where_earlier_parts_start_and_end() {
        // Nothing shown before: unchanged.
        assert_eq!(split_at(&[(0, 50)], &[]), vec![(0, 50)]);
        // Lines 1-20 shown before (1-based), now 1-30 (0-based 0, 30): the old part alone,
        // then the new lines.
        assert_eq!(split_at(&[(0, 30)], &[(1, 20)]), vec![(0, 20), (20, 10)]);
        // An old part inside a wider span, and one that does not touch it.
        assert_eq!(
            split_at(&[(10, 40)], &[(21, 10), (100, 5)]),
            vec![(10, 10), (20, 10), (30, 20)]
        );
        // Two spans, cuts apply to each.
        assert_eq!(
            split_at(&[(0, 10), (20, 10)], &[(6, 20)]),
            vec![(0, 5), (5, 5), (20, 5), (25, 5)]
        );
    }
}
