//! From the world and the harness state to a format-neutral [`Input`]: the harness's parts,
//! the entries the world's policy keeps within what the budget leaves them, and the last step's
//! output pointing at what the stream shows rather than repeating it.
//!
//! Nothing here is cached across projections except token counts keyed by content hash: the
//! content itself is read at render time ([`World::read_current`]), so a projection is never
//! stale.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::world::harness::{Framing, Step};
use crate::world::touched::Seen;
use crate::world::{Candidate, CurrentContent, EntryKind, EntryState, EvictReason, Policy, World};

use super::budget::{
    self, CALL_OVERHEAD, JSON_ENTRY_OVERHEAD, MESSAGE_OVERHEAD, TEXT_PIECE_OVERHEAD,
};
use super::entry_calls::{Rendered, display_path, entry_part};
use super::goal::{goal_part, shorten_goal};
use super::harness_parts::{
    command_parts, framing_part, is_step_output, state_part, step_part, with_output,
};
use super::ids;
use super::parts::{CommandPart, EntryPart, Input, Report, Shown, StepPart, command_key};
use super::request::{Format, LineNumbers, ProjectionRequest, StepOutput, shown_hash};
use super::shown_once;
use super::tools;
use super::{DropReason, Dropped, Part, ProjectionError, Skipped};

/// Gathers the projection input: harness state, the policy's selection and current content.
pub fn gather(
    world: &World,
    req: &ProjectionRequest,
    policy: &dyn Policy,
    budget: u64,
) -> Result<Input, ProjectionError> {
    let format = req.format;
    let h = world.harness();
    let (goal_text, state) = h.conversations.read(req.session.as_deref(), |c| {
        (c.goal.clone(), c.state.clone())
    });
    let framing = h.framing.read().clone();
    // While other conversations work on the mount too: this one's files aged by its own steps,
    // without the files only the others' steps touched, and its own last step.
    let view = h.conversations.view(req.session.as_deref());
    let recorded_step = match &view {
        Some(_) => h
            .conversations
            .read(req.session.as_deref(), |c| c.last_step.clone()),
        None => h.last_step.read().clone(),
    };
    // A step the client's request shows (its real last turn) is not shown twice.
    let step = recorded_step
        .clone()
        .filter(|s| req.last_step && !req.shown_calls.contains(&s.tool_use_id));
    // Another conversation's own outputs (its subagent's report) are not this one's to show,
    // nor is one the client's request holds already.
    let own = req.session.clone().or_else(|| h.conversations.current());
    let commands: Vec<_> = h
        .commands
        .read()
        .iter()
        .filter(|c| c.session.is_none() || c.session == own)
        .filter(|c| {
            req.request_outputs.is_empty()
                || !req
                    .request_outputs
                    .contains(&shown_hash(c.output.as_bytes()))
        })
        .cloned()
        .collect();

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
    // points at it (below), in the stream already. A client that asks without the last step
    // sends the real last turn itself (`worldfs proxy`), which shows it.
    let mut step_command = match &recorded_step {
        Some(s) => command_parts
            .iter()
            .position(|c| is_step_output(c, s))
            .map(|i| command_parts.remove(i)),
        None => None,
    }
    .filter(|_| step.is_some());
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
        cache_ttl: req.cache_ttl,
        report,
        framing_fields: (framing != Framing::default()).then_some(framing),
        state_fields: (!state.is_empty()).then_some(state),
        layout: req.requester_key(policy.name(), budget),
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
    // What the step showed only by reference ("unchanged since your last Read") is kept as
    // what it points at, also for a client that sends the step itself: nothing else in its
    // request holds those lines.
    if policy.keeps_last_step()
        && let Some(s) = &recorded_step
    {
        for p in &s.refers_to {
            if !points_at.contains(p) {
                points_at.push(p.clone());
            }
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
    // What the client's request holds already, as it is now, costs the budget nothing and is
    // not shown again; a copy that is no longer the file is no reason to leave it out.
    let in_request: Vec<PathBuf> = req
        .request_shows
        .iter()
        .filter(|(p, hash)| {
            world.entry(p).is_some()
                && world
                    .read_current(p)
                    .is_ok_and(|c| c.kind == EntryKind::File && shown_hash(&c.bytes) == *hash)
        })
        .map(|(p, _)| p.clone())
        .collect();
    let mut withheld_paths: Vec<PathBuf> = Vec::new();
    let mut omitted: Vec<PathBuf> = in_request.clone();
    let mut adjust = |c: &mut Candidate| {
        match view.as_ref().map(|v| v.seen(&c.path)) {
            Some(Seen::Others) => return false,
            Some(Seen::Own { age }) => c.age_turns = age,
            Some(Seen::Shared) | None => {}
        }
        if in_request.contains(&c.path) {
            // Free in every form, so the policy keeps it and it is left out unreported.
            c.whole_tokens = 0;
            c.ranges = None;
            c.recent = None;
            c.glance = None;
            c.held = None;
            return true;
        }
        if c.notice_only {
            match world.entry(&c.path).map(|e| (e.state, e.deleted_by_agent)) {
                Some((EntryState::Withheld, _)) => withheld_paths.push(c.path.clone()),
                // What the agent deleted itself, the step that did it says.
                Some((EntryState::Deleted, by_agent)) if by_agent || !req.include_deleted => {
                    // Free, so the policy keeps it and we can leave it out without it being
                    // reported as evicted.
                    c.whole_tokens = 0;
                    omitted.push(c.path.clone());
                    return true;
                }
                _ => {}
            }
        }
        c.in_last_step = points_at.contains(&c.path);
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
            // (`entry_calls::shown_form`), so both forms cost that.
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
        true
    };
    // Command outputs compete with the entries for the same budget, as entries the agent saw
    // once when they were recorded: an old `pip list` must not outlive the file being edited.
    let turn_now = world.turn();
    let command_cands: Vec<Candidate> = input
        .commands
        .iter()
        .map(|c| {
            let age = match (&view, c.session_step) {
                (Some(v), Some(at)) => v.age_of_step(at),
                _ => turn_now.saturating_sub(c.turn),
            };
            let mut cand = Candidate::seen_once(
                command_key(c),
                EntryKind::Command,
                u32::try_from(c.cost).unwrap_or(u32::MAX),
                age,
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
    // What became of each command output (the absolute paths among the candidates): kept
    // (`None`) or left out, and why.
    let command_fate: HashMap<&Path, Option<EvictReason>> = selection
        .kept
        .iter()
        .map(|k| (k.path.as_path(), None))
        .chain(
            selection
                .evicted
                .iter()
                .map(|e| (e.path.as_path(), Some(e.reason))),
        )
        .filter(|(p, _)| p.is_absolute())
        .collect();
    let commands = std::mem::take(&mut input.commands);
    for c in commands {
        let reason = match command_fate.get(command_key(&c).as_path()) {
            Some(None) => {
                input.commands.push(c);
                continue;
            }
            Some(Some(r)) => drop_reason(*r),
            None => DropReason::OverBudget,
        };
        input.report.evicted.push(Dropped {
            part: Part::Command,
            path: Some(c.command.clone()),
            reason,
            tokens: c.cost,
        });
    }

    for ev in selection.evicted.iter().filter(|e| e.path.is_relative()) {
        input.report.evicted.push(Dropped {
            part: Part::Entry,
            path: Some(display_path(root, &ev.path)),
            reason: drop_reason(ev.reason),
            tokens: u64::from(ev.tokens),
        });
    }
    for p in &withheld_paths {
        input.report.withheld.push(display_path(root, p));
    }
    input.report.in_request = in_request.iter().map(|p| display_path(root, p)).collect();

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
    // An output that repeats files the stream shows (a `cat`, a `sed -n`) names their lines
    // instead: the same request would carry them twice. Costs only go down, so the selection
    // still fits; the room freed is not given to another part of this projection.
    // The files' lines, split once for both: they are every entry's text.
    if shorten {
        let files = shown_once::file_sources(&input.entries, req.line_numbers);
        let shortened: Vec<(usize, String)> = input
            .commands
            .iter()
            .enumerate()
            .filter(|(_, c)| !c.as_it_was)
            .filter_map(|(i, c)| Some((i, shown_once::in_context(&c.output, &files)?)))
            .collect();
        for (i, output) in shortened {
            with_output(&mut input.commands[i], output, format)?;
        }
        if let Some(s) = &step {
            let commands = input
                .commands
                .iter()
                .map(shown_once::Source::command)
                .collect();
            let groups = [files, commands];
            input.step = Some(match shown_once::shorten(&s.result, &groups) {
                Some((result, keys)) => shortened_step(s, result, keys, format)?,
                None => step_part(s, format)?,
            });
        }
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

/// How a policy's reason for leaving something out is reported.
fn drop_reason(r: EvictReason) -> DropReason {
    match r {
        EvictReason::OverBudget => DropReason::OverBudget,
        EvictReason::Aged { .. } | EvictReason::Faded => DropReason::Aged,
    }
}
