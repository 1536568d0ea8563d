//! The replay benchmark (`worldfs replay`, docs/replay.md): recorded agent runs replayed through
//! a real mount and socket, measuring what each context strategy would have sent.
//!
//! One file per concept: [`trace`] (the format), [`session`] (the mount and its socket),
//! [`apply`] (a step as system calls; with `disk`, `git_commands`, `git_effects` and
//! `reconcile`), [`text`] (line arithmetic), [`context`] (a request as blocks and file views),
//! [`baseline`] (the history strategies), [`caching`] (prompt-cache billing), [`metrics`] (stale
//! bytes, recall, re-reads), [`report`] (CSV, JSON, table, SVG), [`sha1`] (checking
//! `disk_sha1_before`). What is too long for the socket is cut by [`crate::socket::fit`].

pub mod apply;
pub mod baseline;
pub mod caching;
pub mod context;
mod disk;
mod git_commands;
mod git_effects;
pub mod metrics;
pub mod oracle;
mod reconcile;
pub mod report;
pub mod session;
pub mod sha1;
pub mod shown_lines;
pub mod text;
pub mod trace;

use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde_json::{Value, json};

use apply::{Applier, ApplyCounts, clean_rel};
use baseline::History;
use caching::{Bill, CacheSim};
use context::{Block, Counter};
use metrics::{Seen, TurnMeasure};
use session::{Session, replay_config};
use trace::{Kind, Trace};

use crate::socket::fit;

#[derive(Debug, Clone)]
pub struct Options {
    pub traces: Vec<PathBuf>,
    pub out: PathBuf,
    /// Budgets for the worldfs policy; the first is also the seed policy's.
    pub budgets: Vec<u64>,
    /// The binary that mounts (normally this one).
    pub exe: PathBuf,
    /// Write every projection served here, one JSON file per trace, turn and strategy.
    pub dump_projections: Option<PathBuf>,
    /// Write one JSON line per next-step need a strategy missed, and per stale view a request
    /// held, here (emptied first).
    pub misses: Option<PathBuf>,
}

/// A strategy under measurement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Strategy {
    History(History),
    Projection {
        policy: String,
        budget: u64,
    },
    /// The clairvoyant floor ([`oracle`]): not a strategy, a bound on every strategy.
    Oracle,
}

impl Strategy {
    pub fn name(&self) -> String {
        match self {
            Strategy::History(h) => h.name(),
            // In thousands, exactly: 8500 must not be named as 8000 is, or their rows would be
            // summed as one strategy's.
            Strategy::Projection { policy, budget } => {
                format!("{policy}_{}k", *budget as f64 / 1000.0)
            }
            Strategy::Oracle => "oracle".into(),
        }
    }
}

pub fn strategies(budgets: &[u64]) -> Vec<Strategy> {
    let mut v = vec![
        Strategy::History(History::Baseline),
        Strategy::History(History::LastResults(5)),
        Strategy::History(History::AnchorTail { first: 2, last: 6 }),
    ];
    if let Some(&b) = budgets.first() {
        v.push(Strategy::Projection {
            policy: "seed".into(),
            budget: b,
        });
    }
    for &b in budgets {
        v.push(Strategy::Projection {
            policy: "worldfs".into(),
            budget: b,
        });
    }
    v.push(Strategy::Oracle);
    v
}

/// One request of one strategy at one turn.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub turn: u64,
    pub strategy: String,
    /// Exact o200k_base count of every string the request carries.
    pub tokens: u64,
    /// The projection's own (upper-bound) estimate, plus the system prompt.
    pub tokens_estimate: Option<u64>,
    pub budget: Option<u64>,
    pub over_budget: bool,
    pub violations: u64,
    /// `tokens_in_reported` of this turn (baseline rows only).
    pub reported: Option<u64>,
    #[serde(flatten)]
    pub bill: Bill,
    #[serde(flatten)]
    pub measure: TurnMeasure,
}

#[derive(Debug, Clone, Serialize)]
pub struct TraceResult {
    pub trace_id: String,
    pub turns: u64,
    pub steps: u64,
    pub strategies: Vec<String>,
    pub apply: ApplyCounts,
    /// Steps whose output was cut to fit the socket's request line ([`fit`]).
    pub outputs_cut: u64,
    /// No `X.base.tar.gz` beside the trace: it was replayed from an empty directory, so what it
    /// read of a file it did not create was made from the lines the agent saw (`reconciled`).
    pub no_base: bool,
    pub rows: Vec<Row>,
    pub seconds: f64,
}

fn scratch_dir(trace_id: &str) -> Result<PathBuf> {
    let safe: String = trace_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(60)
        .collect();
    let base = std::env::temp_dir().join(format!(
        "worldfs-replay-{}-{}-{safe}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() % 1_000_000_000)
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(base.join("root"))
        .with_context(|| format!("creating {}", base.display()))?;
    Ok(base)
}

/// Unpacks `archive` into `root` with the `tar` command.
fn unpack(archive: &Path, root: &Path) -> Result<()> {
    let out = Command::new("tar")
        .arg("-xzf")
        .arg(archive)
        .arg("-C")
        .arg(root)
        .arg("--no-same-owner")
        .output()
        .context("running tar")?;
    if !out.status.success() {
        bail!(
            "tar -xzf {}: {}",
            archive.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

/// Replays one trace: unpack, mount, replay every turn, measure, unmount.
pub fn run_trace(path: &Path, opts: &Options) -> Result<TraceResult> {
    let t0 = Instant::now();
    let trace = Trace::load(path)?;
    let base = scratch_dir(&trace.header.trace_id)?;
    let root = base.join("root");
    let archive = trace.base_archive();
    let pristine = base.join("pristine");
    let no_base = !archive.exists();
    if no_base {
        // Legitimate for a trace that creates what it reads, but the numbers of one whose
        // base went missing rest on files made up from its reads: say so where it is seen.
        eprintln!(
            "worldfs replay: {}: no base files ({} not found): replayed from an empty directory",
            path.display(),
            archive.display()
        );
    } else {
        unpack(&archive, &root)?;
        std::fs::create_dir_all(&pristine)
            .with_context(|| format!("creating {}", pristine.display()))?;
        unpack(&archive, &pristine)?;
    }
    let root = root
        .canonicalize()
        .with_context(|| format!("canonicalizing {}", root.display()))?;
    let config = base.join("worldfs.toml");
    std::fs::write(&config, replay_config()).context("writing the replay config")?;
    let result = (|| -> Result<TraceResult> {
        let mut session = Session::start(&opts.exe, &root, &base.join("socket"), &config)?;
        let r = replay(&trace, &mut session, opts, (!no_base).then_some(pristine));
        let stopped = session.stop();
        let r = r?;
        stopped?;
        Ok(r)
    })();
    let _ = std::fs::remove_dir_all(&base);
    let mut r: TraceResult =
        result.with_context(|| format!("replaying {}", trace.path.display()))?;
    r.seconds = t0.elapsed().as_secs_f64();
    Ok(r)
}

fn replay(
    trace: &Trace,
    session: &mut Session,
    opts: &Options,
    pristine: Option<PathBuf>,
) -> Result<TraceResult> {
    let strategies = strategies(&opts.budgets);
    session.call("goal.set", json!({ "goal": trace.first_prompt() }))?;
    // A harness knows its agent's tools before the first call (they are in every request);
    // declared up front, the projection's tool list never changes mid-run.
    let mut tools: Vec<String> = Vec::new();
    for s in &trace.steps {
        let name = s.tool_name();
        if !tools.contains(&name) {
            tools.push(name);
        }
    }
    tools.truncate(crate::world::harness::MAX_STEP_TOOLS);
    session.call("tools.declare", json!({ "names": tools }))?;
    let no_base = pristine.is_none();
    let mut applier = Applier::new(&session.root.clone(), session.backing_fd(), pristine);
    let mut counter = Counter::default();
    let prompt = baseline::prompt(trace, &mut counter);
    let system_block = trace
        .header
        .system_prompt
        .clone()
        .filter(|s| !s.is_empty())
        .map(|s| counter.block(s, Vec::new()));
    let mut sims: Vec<CacheSim> = strategies.iter().map(|_| CacheSim::default()).collect();
    let mut history = Vec::new();
    let mut seen = Seen::default();
    let mut rows = Vec::new();
    let mut outputs_cut = 0;
    let turns = trace.turns();
    let gutter = trace.read_gutter();
    for (turn, idxs) in &turns {
        let steps: Vec<&trace::Step> = idxs.iter().map(|&i| &trace.steps[i]).collect();
        let needs = metrics::needs(&steps, &applier);
        let reported = steps.iter().find_map(|s| s.tokens_in_reported);
        for (si, st) in strategies.iter().enumerate() {
            let mut evicted = Value::Null;
            // the oracle bills itself: it is a floor, not a layout the cache simulation judges
            let mut own_bill = None;
            let (blocks, est, budget, over, violations) = match st {
                Strategy::History(h) => (
                    h.request(&prompt, &history, &mut counter),
                    None,
                    None,
                    false,
                    0,
                ),
                Strategy::Oracle => {
                    let (blocks, bill) = oracle::request(
                        &prompt,
                        history.last(),
                        &needs,
                        &seen,
                        &applier,
                        &mut counter,
                    );
                    own_bill = Some(bill);
                    (blocks, None, None, false, 0)
                }
                Strategy::Projection { policy, budget } => {
                    let p = session.call("projection.get", {
                        // Every evicted entry: `--misses` says which one a miss was.
                        let mut q = json!({"format": "anthropic", "budget": budget,
                                           "policy": policy, "evicted_limit": u32::MAX});
                        if let Some(style) = gutter {
                            q["line_numbers"] = json!(style);
                        }
                        q
                    })?;
                    let body = p.get("body").cloned().unwrap_or(Value::Null);
                    evicted = p.get("evicted").cloned().unwrap_or(Value::Null);
                    if let Some(dir) = &opts.dump_projections {
                        let f = dir.join(format!(
                            "{}-t{turn:03}-{}.json",
                            trace.header.trace_id,
                            st.name()
                        ));
                        std::fs::write(&f, p.to_string())
                            .with_context(|| format!("writing {}", f.display()))?;
                    }
                    let tokens = p.get("tokens").and_then(Value::as_u64).unwrap_or(u64::MAX);
                    let violations = match crate::projection::validate::anthropic(&body) {
                        Ok(()) => 0,
                        Err(v) => {
                            for x in v.iter().take(3) {
                                eprintln!(
                                    "worldfs replay: {} turn {turn} {}: {x}",
                                    trace.header.trace_id,
                                    st.name()
                                );
                            }
                            v.len() as u64
                        }
                    };
                    let mut blocks = context::from_anthropic(&body, trace, &mut counter);
                    let sys_tokens = system_block.as_ref().map(|b| b.tokens).unwrap_or(0);
                    if let Some(b) = &system_block {
                        blocks.insert(0, b.clone());
                    }
                    (
                        blocks,
                        Some(tokens.saturating_add(sys_tokens)),
                        Some(*budget),
                        tokens > *budget,
                        violations,
                    )
                }
            };
            let bill = own_bill.unwrap_or_else(|| sims[si].bill(&blocks));
            let (measure, misses) = metrics::measure(&blocks, &needs, &seen, &applier);
            if let Some(file) = &opts.misses {
                write_misses(
                    file,
                    &trace.header.trace_id,
                    *turn,
                    &st.name(),
                    &misses,
                    &evicted,
                )
                .with_context(|| format!("writing {}", file.display()))?;
            }
            rows.push(Row {
                turn: *turn,
                strategy: st.name(),
                tokens: blocks.iter().map(|b: &Block| b.tokens).sum(),
                tokens_estimate: est,
                budget,
                over_budget: over,
                violations,
                reported: if matches!(st, Strategy::History(History::Baseline)) {
                    reported
                } else {
                    None
                },
                bill,
                measure,
            });
        }
        for &i in idxs {
            let before = Seen::before(&trace.steps[i], &applier);
            if replay_step(trace, i, session, &mut applier)? {
                outputs_cut += 1;
            }
            seen.record(&trace.steps[i], before.as_deref(), &applier);
        }
        history.push(baseline::turn_blocks(trace, *turn, idxs, &mut counter));
    }
    Ok(TraceResult {
        trace_id: trace.header.trace_id.clone(),
        turns: turns.len() as u64,
        steps: trace.steps.len() as u64,
        strategies: strategies.iter().map(Strategy::name).collect(),
        apply: applier.counts.clone(),
        outputs_cut,
        no_base,
        rows,
        seconds: 0.0,
    })
}

fn write_misses(
    file: &Path,
    trace: &str,
    turn: u64,
    strategy: &str,
    misses: &[metrics::Miss],
    evicted: &Value,
) -> std::io::Result<()> {
    use std::io::Write as _;
    if misses.is_empty() {
        return Ok(());
    }
    let mut f = std::fs::OpenOptions::new().append(true).open(file)?;
    for m in misses {
        let why = evicted.as_array().and_then(|a| {
            a.iter()
                .find(|e| e.get("path").and_then(Value::as_str) == Some(m.path.as_str()))
        });
        let line =
            json!({"trace": trace, "turn": turn, "strategy": strategy, "miss": m, "evicted": why});
        writeln!(f, "{line}")?;
    }
    Ok(())
}

/// Most views one step declares (the socket's limit).
const MAX_STEP_VIEWS: usize = 64;

/// Fewest consecutive lines of a file a command's output must show to count as a view of it:
/// `grep -A 20`, `head`, `sed -n` in a pipeline show runs; a `grep` hit is one line, where the
/// agent searched, not where it reads (declared, single hits displaced the places the agent
/// had read, and file recall fell).
const MIN_COMMAND_VIEW_LINES: u64 = 5;

/// A step's output as the socket gets it: cut to its head and tail when too long for a request
/// line ([`fit::for_socket`]); true when it was cut.
fn sent_output(s: &trace::Step) -> (Cow<'_, str>, bool) {
    let output = s.output.as_deref().unwrap_or("");
    match fit::for_socket(output) {
        Some(c) => (Cow::Owned(c.text), true),
        None => (Cow::Borrowed(output), false),
    }
}

/// What a step's result showed, as a harness that knows its tools would declare it with
/// `step.record`: a read's line ranges, in file order and each line once (or the whole file,
/// when the result shows it all); for a read of unknown places (`partial`) or a whole read
/// whose output was cut to its head and tail (no `content`: mini-swe-agent's own cut; or cut
/// here to fit the socket), the runs of lines of the file the output sent shows; for a
/// command, the runs of at least [`MIN_COMMAND_VIEW_LINES`] lines of each file it read.
fn shown_views(s: &trace::Step, disk: impl Fn(&Path) -> Option<String>) -> Vec<Value> {
    let mut out = Vec::new();
    if s.refused() {
        return out;
    }
    let (output, cut) = sent_output(s);
    let exact = s.kind == Kind::Read && !s.partial() && s.content.is_some() && !cut;
    if exact
        && s.in_repo()
        && let Some(rel) = s.path.as_deref().and_then(clean_rel)
    {
        let path = rel.to_string_lossy().into_owned();
        match s.line_ranges() {
            Some(rs) => out.extend(
                text::merged_ranges(&rs)
                    .into_iter()
                    .map(|(a, b)| json!({"path": path, "lines": [a, b]})),
            ),
            None => out.push(json!({ "path": path })),
        }
    } else if matches!(s.kind, Kind::Read | Kind::Command) && !output.is_empty() {
        let min = if s.kind == Kind::Command {
            MIN_COMMAND_VIEW_LINES
        } else {
            1
        };
        for t in s.touches() {
            if !matches!(t.op, trace::TouchOp::Read | trace::TouchOp::Search)
                || t.in_repo == Some(false)
            {
                continue;
            }
            let Some(rel) = clean_rel(&t.path) else {
                continue;
            };
            let Some(cur) = disk(&rel) else {
                continue;
            };
            let path = rel.to_string_lossy().into_owned();
            let range = t.range.map(|[a, b]| (a, b));
            for (a, b) in shown_lines::shown_runs(&cur, range, &output) {
                if b + 1 - a >= min {
                    out.push(json!({"path": path, "lines": [a, b]}));
                }
            }
        }
    }
    out.truncate(MAX_STEP_VIEWS);
    out
}

/// Applies step `i` through the mount and tells the socket about it; true when its output was
/// too long for the socket and was cut ([`fit::for_socket`]).
fn replay_step(
    trace: &Trace,
    i: usize,
    session: &mut Session,
    applier: &mut Applier,
) -> Result<bool> {
    let s = &trace.steps[i];
    let inputs = applier
        .apply(trace, i)
        .with_context(|| format!("step {} ({})", s.step, s.kind.name()))?;
    let (command, step, cut) = record_params(s, &inputs, |rel| applier.disk_text(rel));
    // What `worldfs hook` tells the mount of a call that edits the agent's task list, so the
    // projections carry the plan as they would in the session. A trace keeps the call's input
    // but not the tool's own response: a TodoWrite (the whole list) and a TaskUpdate apply,
    // a TaskCreate (its id is in the response) does not.
    if !s.is_error.unwrap_or(false)
        && let (Some(tool), Some(input)) = (&s.tool, &s.input)
        && let Some(params) = crate::claude_hook::tasks::patch(tool, input, &Value::Null)
        && let Err(e) = session.call("state.patch", params)
    {
        // A TaskUpdate of a task the trace created before: nothing to change.
        tracing::debug!("step {}: the task list is not changed: {e:#}", s.step);
    }
    if let Some(params) = command {
        session
            .call("command.record", params)
            .with_context(|| format!("step {}", s.step))?;
    }
    session
        .call("step.record", step)
        .with_context(|| format!("step {}", s.step))?;
    Ok(cut)
}

/// What the socket is told of step `s` once applied (`inputs`: the files it read): the
/// `command.record` params of a command or search, the `step.record` params, and whether the
/// output they carry was cut to fit a request line. Only the socket gets the cut output: the
/// history strategies, the baseline among them, are built from the trace and keep the full
/// text, as the agent saw it.
fn record_params(
    s: &trace::Step,
    inputs: &[PathBuf],
    disk: impl Fn(&Path) -> Option<String>,
) -> (Option<Value>, Value, bool) {
    let (output, cut) = sent_output(s);
    let command = matches!(s.kind, Kind::Command | Kind::Search).then(|| {
        let command = match &s.command {
            Some(c) if !c.is_empty() => c.clone(),
            _ => format!("{} {}", s.tool_name(), s.call_input()),
        };
        let cwd = s
            .cwd
            .as_deref()
            .and_then(clean_rel)
            .map(|p| p.to_string_lossy().into_owned())
            .filter(|p| !p.is_empty())
            .unwrap_or_else(|| ".".into());
        let files: Vec<String> = inputs
            .iter()
            .map(|p| p.to_string_lossy().into_owned())
            .collect();
        let mut params = json!({
            // a heredoc can carry a whole file
            "command": fit::cut_head(command, fit::MAX_INPUT_BYTES),
            "cwd": cwd,
            "output": output,
            "files": files,
        });
        if let Some(rc) = s.returncode.and_then(|r| i32::try_from(r).ok()) {
            params["exit_code"] = json!(rc);
        }
        if let Some(dir) = &s.search_dir {
            params["subtrees"] = json!([dir]);
        }
        params
    });
    let mut step = json!({
        "tool_use_id": format!("rp_{}", s.step),
        "tool_name": s.tool_name(),
        // a Write carries the whole file: its long strings are cut like the output
        "input": fit::capped_input(s.call_input()),
        "result": output,
        "is_error": s.is_error.unwrap_or(false),
    });
    if let Some(t) = s
        .assistant_text
        .as_deref()
        .map(|t| without_the_call(t, s.command.as_deref()))
        .filter(|t| !t.trim().is_empty())
    {
        step["assistant_text"] = json!(t);
    }
    let views = shown_views(s, disk);
    if !views.is_empty() {
        step["views"] = Value::Array(views);
    }
    (command, step, cut)
}

/// The assistant's text of a step as a harness that turns it into a tool call would record it:
/// mini-swe-agent's model writes its command in a fenced `bash` block, which its harness parses
/// and runs; the call the step records carries the command, so the block is left out of the
/// text. Sent with it, a projection showed the command twice in its last step (a heredoc that
/// writes a whole file, three times with the file the stream shows). Any other text is kept
/// as it is; the history strategies are built from the trace and count the command once.
fn without_the_call(text: &str, command: Option<&str>) -> String {
    let Some(command) = command.filter(|c| !c.is_empty()) else {
        return text.to_owned();
    };
    let block = format!("```bash\n{command}\n```");
    match text.find(&block) {
        Some(at) => {
            let before = text[..at].trim_end();
            let after = text[at + block.len()..].trim_start();
            match (before.is_empty(), after.is_empty()) {
                (_, true) => before.to_owned(),
                (true, false) => after.to_owned(),
                (false, false) => format!("{before}\n\n{after}"),
            }
        }
        None => text.to_owned(),
    }
}

/// What [`run`] made of the traces.
#[derive(Debug)]
pub struct Outcome {
    /// The summary table over the traces replayed (also in `summary.md`).
    pub summary: String,
    /// Traces that could not be replayed, each with why.
    pub failed: Vec<String>,
}

/// Replays every trace in `opts` and writes the reports to `opts.out`. A trace that cannot be
/// replayed (it does not parse, its mount fails) is reported and the others go on: one bad
/// file among many should not cost the run.
pub fn run(opts: &Options) -> Result<Outcome> {
    for (i, b) in opts.budgets.iter().enumerate() {
        if opts.budgets[..i].contains(b) {
            anyhow::bail!("--budgets names {b} twice: each budget is one strategy");
        }
    }
    std::fs::create_dir_all(&opts.out)
        .with_context(|| format!("creating {}", opts.out.display()))?;
    if let Some(dir) = &opts.dump_projections {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    if let Some(file) = &opts.misses {
        // Started empty: lines of an earlier run would be counted with this one's.
        std::fs::File::create(file).with_context(|| format!("creating {}", file.display()))?;
    }
    let mut results = Vec::new();
    let mut failed = Vec::new();
    for t in &opts.traces {
        eprintln!("worldfs replay: {}", t.display());
        let r = match run_trace(t, opts) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("worldfs replay: {}: not replayed: {e:#}", t.display());
                failed.push(format!("{}: {e:#}", t.display()));
                continue;
            }
        };
        report::write_trace(&opts.out, &r)?;
        eprintln!(
            "worldfs replay: {} turns, {} steps ({} applied, {} failed) in {:.1}s",
            r.turns, r.steps, r.apply.applied, r.apply.failed, r.seconds
        );
        results.push(r);
    }
    let mut summary = report::summary(&results);
    if !failed.is_empty() {
        summary.push_str(&format!(
            "\nNot replayed ({} of {} traces):\n\n",
            failed.len(),
            opts.traces.len()
        ));
        for f in &failed {
            summary.push_str(&format!("- {f}\n"));
        }
    }
    std::fs::write(opts.out.join("summary.md"), &summary).context("writing summary.md")?;
    report::write_svg(&opts.out.join("tokens.svg"), &results)?;
    Ok(Outcome { summary, failed })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_budget_is_its_own_strategy() {
        let names: Vec<String> = strategies(&[8000, 8500, 500])
            .iter()
            .map(Strategy::name)
            .collect();
        for n in ["seed_8k", "worldfs_8k", "worldfs_8.5k", "worldfs_0.5k"] {
            assert!(names.iter().any(|x| x == n), "{n} not in {names:?}");
        }
        let twice = Options {
            traces: vec![],
            out: std::env::temp_dir().join("worldfs-replay-budgets-twice"),
            budgets: vec![8000, 4000, 8000],
            exe: PathBuf::from("worldfs"),
            dump_projections: None,
            misses: None,
        };
        let err = run(&twice).err().map(|e| e.to_string());
        assert_eq!(
            err.as_deref(),
            Some("--budgets names 8000 twice: each budget is one strategy")
        );
    }

    fn step(v: Value) -> trace::Step {
        serde_json::from_value(v).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_call_is_not_repeated_in_the_text() {
        let cmd = "cat <<'EOF' > r.py\nprint(1)\nEOF";
        let text = format!("THOUGHT: write it.\n\n```bash\n{cmd}\n```");
        assert_eq!(without_the_call(&text, Some(cmd)), "THOUGHT: write it.");
        let after = format!("```bash\n{cmd}\n```\nThen run it.");
        assert_eq!(without_the_call(&after, Some(cmd)), "Then run it.");
        let around = format!("Before.\n```bash\n{cmd}\n```\n\nAfter.");
        assert_eq!(without_the_call(&around, Some(cmd)), "Before.\n\nAfter.");
        // not the command's own block: kept as it is
        assert_eq!(
            without_the_call("run `ls -la`", Some("ls -la")),
            "run `ls -la`"
        );
        assert_eq!(without_the_call(&text, None), text);
        // the step sent to the socket: the text without the block, the call with the command
        let s = step(
            json!({"record": "step", "step": 4, "turn": 2, "kind": "command",
            "command": cmd, "assistant_text": text, "output": "<returncode>0</returncode>"}),
        );
        let (_, params, _) = record_params(&s, &[], |_| None);
        assert_eq!(params["assistant_text"], "THOUGHT: write it.");
        assert_eq!(params["input"]["command"], cmd);
        // a text that was only the block: none at all
        let bare = step(
            json!({"record": "step", "step": 5, "turn": 3, "kind": "command",
            "command": "ls", "assistant_text": "```bash\nls\n```", "output": "a"}),
        );
        let (_, params, _) = record_params(&bare, &[], |_| None);
        assert!(params.get("assistant_text").is_none(), "{params}");
    }

    #[test]
    fn views_are_what_the_output_shows() {
        let file: String = (1..=30).map(|k| format!("line {k}\n")).collect();
        let disk = |rel: &Path| (rel == Path::new("f.py")).then(|| file.clone());
        let touch = json!([{"path": "f.py", "op": "read", "range": null}]);
        // a command: the 6-line run (grep -A 5) is a view, the lone hit is not
        let out = "<output>\n3:line 3\n20:line 20\n21-line 21\n22-line 22\n23-line 23\n24-line 24\n25-line 25\n</output>";
        let cmd = step(
            json!({"record": "step", "step": 1, "turn": 1, "kind": "command",
            "command": "grep -n -A 5 x f.py", "output": out, "touches": touch}),
        );
        assert_eq!(
            shown_views(&cmd, disk),
            [json!({"path": "f.py", "lines": [20, 25]})]
        );
        // a whole read cut to its head and tail: both runs, however short (each is placed by
        // its neighbouring lines; a lone short line would say nothing of where it is)
        let cut = "<output_head>\nline 1\nline 2\n</output_head>\n<output_tail>\nline 29\nline 30\n</output_tail>";
        let read = step(
            json!({"record": "step", "step": 2, "turn": 2, "kind": "read",
            "path": "f.py", "path_in_repo": true, "command": "cat f.py", "output": cut,
            "touches": touch}),
        );
        assert_eq!(
            shown_views(&read, disk),
            [
                json!({"path": "f.py", "lines": [1, 2]}),
                json!({"path": "f.py", "lines": [29, 30]})
            ]
        );
        // a whole read with its content: the whole file
        let whole = step(
            json!({"record": "step", "step": 3, "turn": 3, "kind": "read",
            "path": "f.py", "path_in_repo": true, "content": file, "output": "...",
            "touches": touch}),
        );
        assert_eq!(shown_views(&whole, disk), [json!({"path": "f.py"})]);
    }

    #[test]
    fn several_ranges_are_declared_in_file_order_each_line_once() {
        let file: String = (1..=30).map(|k| format!("line {k}\n")).collect();
        let disk = |rel: &Path| (rel == Path::new("f.py")).then(|| file.clone());
        let read = |ranges: Value| {
            step(
                json!({"record": "step", "step": 1, "turn": 1, "kind": "read",
                "path": "f.py", "ranges": ranges, "content": "…", "output": "…"}),
            )
        };
        let lines =
            |v: Vec<Value>| -> Vec<Value> { v.into_iter().map(|v| v["lines"].clone()).collect() };
        assert_eq!(
            lines(shown_views(&read(json!([[8, 9], [1, 2]])), disk)),
            [json!([1, 2]), json!([8, 9])]
        );
        assert_eq!(
            lines(shown_views(&read(json!([[1, 5], [3, 8]])), disk)),
            [json!([1, 8])]
        );
        assert_eq!(
            lines(shown_views(&read(json!([[8, u64::MAX], [1, 2]])), disk)),
            [json!([1, 2]), json!([8, u64::MAX])]
        );
    }

    /// Bytes of the request line `params` makes (without its envelope, a few dozen bytes).
    fn line_len(params: &Value) -> usize {
        serde_json::to_vec(params).map_or(usize::MAX, |v| v.len())
    }

    #[test]
    fn an_output_too_long_for_a_request_line_is_cut_to_fit() {
        let max = crate::socket::protocol::MAX_LINE;
        let output: String = (0..100_000)
            .map(|k| format!("tests/test_x.py::test_{k} PASSED\n"))
            .collect();
        assert!(output.len() > 3 * max);
        let cmd = step(
            json!({"record": "step", "step": 4, "turn": 1, "kind": "command",
            "command": "pytest -v", "output": output}),
        );
        let (command, step_params, cut) = record_params(&cmd, &[], |_| None);
        assert!(cut);
        let command = command.unwrap_or_else(|| panic!("no command.record"));
        assert!(line_len(&command) < max / 2, "{}", line_len(&command));
        assert!(
            line_len(&step_params) < max / 2,
            "{}",
            line_len(&step_params)
        );
        let sent = command["output"].as_str().unwrap_or("");
        assert_eq!(Some(sent), step_params["result"].as_str());
        assert!(sent.starts_with("tests/test_x.py::test_0 PASSED\n"));
        assert!(sent.ends_with("tests/test_x.py::test_99999 PASSED\n"));
        assert!(
            sent.contains("bytes of this output left out here"),
            "{}",
            &sent[..200]
        );
        // an output that fits is sent as it is
        let small = step(
            json!({"record": "step", "step": 5, "turn": 2, "kind": "command",
            "command": "ls", "output": "a\nb\n"}),
        );
        let (command, step_params, cut) = record_params(&small, &[], |_| None);
        assert!(!cut);
        assert_eq!(command.map(|c| c["output"].clone()), Some(json!("a\nb\n")));
        assert_eq!(step_params["result"], json!("a\nb\n"));
    }

    #[test]
    fn a_big_write_and_a_big_heredoc_fit_a_request_line() {
        let max = crate::socket::protocol::MAX_LINE;
        let file = "x = 1\n".repeat(400_000);
        let write = step(
            json!({"record": "step", "step": 1, "turn": 1, "kind": "write",
            "tool": "Write", "path": "big.py", "content": file,
            "input": {"file_path": "big.py", "content": file}, "output": "ok"}),
        );
        let (_, params, _) = record_params(&write, &[], |_| None);
        assert!(line_len(&params) < max / 2, "{}", line_len(&params));
        assert_eq!(params["input"]["file_path"], json!("big.py"));
        let heredoc = step(
            json!({"record": "step", "step": 2, "turn": 2, "kind": "command",
            "command": format!("cat > big.py <<'EOF'\n{file}EOF"), "output": ""}),
        );
        let (command, params, _) = record_params(&heredoc, &[], |_| None);
        let command = command.unwrap_or_else(|| panic!("no command.record"));
        assert!(line_len(&command) < max / 2, "{}", line_len(&command));
        assert!(line_len(&params) < max / 2, "{}", line_len(&params));
    }

    #[test]
    fn a_read_cut_to_fit_declares_only_what_it_still_shows() {
        // a whole Read of a file whose numbered output is over the cap
        let pad = "x".repeat(190);
        let file: String = (1..=2000).map(|k| format!("line {k} {pad}\n")).collect();
        let output: String = (1..=2000)
            .map(|k| format!("{k:>6}\u{2192}line {k} {pad}\n"))
            .collect();
        assert!(output.len() > fit::SOCKET_OUTPUT_CAP);
        let disk = |rel: &Path| (rel == Path::new("big.py")).then(|| file.clone());
        let read = step(
            json!({"record": "step", "step": 1, "turn": 1, "kind": "read",
            "tool": "Read", "path": "big.py", "content": file, "output": output,
            "touches": [{"path": "big.py", "op": "read", "range": null}]}),
        );
        let views = shown_views(&read, disk);
        let runs: Vec<(u64, u64)> = views
            .iter()
            .filter_map(|v| Some((v["lines"][0].as_u64()?, v["lines"][1].as_u64()?)))
            .collect();
        assert_eq!(runs.len(), 2, "{views:?}");
        assert_eq!(runs[0].0, 1);
        assert_eq!(runs[1].1, 2000);
        assert!(
            runs[0].1 + 1 < runs[1].0,
            "the middle is not shown: {runs:?}"
        );
    }
}
