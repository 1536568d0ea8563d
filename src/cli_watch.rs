//! `worldfs watch`: what happens in a mount as it happens, one line per observation.
//!
//! A client of the socket's `observations.subscribe`: the mount's record of every read, write
//! and name change (docs/protocol.md), which otherwise only a harness or `--journal` sees; and
//! of `projections.subscribe`: each projection served (a model call behind `worldfs proxy`),
//! what it cost and what it newly left out, which is what a user otherwise cannot see being
//! dropped. The daemon never waits for this client: when it reads too slowly, what it missed is
//! counted in the next notification, and the count is printed where it would have been.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde_json::{Value, json};

use crate::cli::{SocketArg, WatchClass};
use crate::cli_client::resolve_socket;
use crate::socket::protocol::code;
use crate::socket::{Client, ClientError};

/// For the calls before the stream starts; the stream itself may be quiet for hours.
const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// What `changes.since` lists at most: more than the mount's ring holds (8,192).
const MAX_RECENT: usize = 10_000;

/// What `worldfs watch` was asked for.
#[derive(Debug, Clone)]
pub struct WatchOptions {
    pub target: SocketArg,
    pub path: Option<PathBuf>,
    pub classes: Vec<WatchClass>,
    pub json: bool,
    pub all: bool,
    /// Observations of the mount's ring printed before following.
    pub recent: usize,
}

/// Follows the mount's observations (and the projections it serves) until the mount goes away
/// or stdout's reader does.
pub fn run(opts: &WatchOptions) -> anyhow::Result<()> {
    let path = match &opts.path {
        // Resolved, so a relative or symlinked PATH names what the mount sees; a path that does
        // not exist yet (a directory a build will make) is only made absolute.
        Some(p) => Some(
            p.canonicalize()
                .or_else(|_| std::path::absolute(p))
                .with_context(|| format!("{}", p.display()))?,
        ),
        None => None,
    };
    let mut target = opts.target.clone();
    if target.socket.is_none() && target.dir.is_none() {
        target.dir = path.clone();
    }
    let socket = resolve_socket(&target)?;
    let mut c = Client::connect(&socket, CALL_TIMEOUT)?;
    let init = c.call("initialize", json!({"client": {"name": "worldfs watch"}}))?;
    let mount_point = init
        .pointer("/root/mount_point")
        .and_then(Value::as_str)
        .map(PathBuf::from);
    let mut params = json!({});
    if let Some(p) = &path {
        params["prefix"] = json!(p.to_string_lossy());
    }
    if !opts.classes.is_empty() {
        params["classes"] = opts.classes.iter().map(|c| class_name(*c)).collect();
    }
    c.call("observations.subscribe", params.clone())
        .with_context(|| match &path {
            Some(p) => format!("watching {}", p.display()),
            None => "subscribing to the mount's observations".to_owned(),
        })?;
    let mut printer = Printer::new(opts.all);
    // Read once subscribed, so nothing falls between the two; what both hold is printed once.
    let mut earlier = std::collections::HashSet::new();
    if opts.recent > 0 {
        params["seq"] = json!(0);
        params["limit"] = json!(MAX_RECENT);
        let got = c
            .call("changes.since", params)
            .context("reading the mount's recent observations")?;
        let records = got
            .get("observations")
            .and_then(Value::as_array)
            .map_or(&[][..], Vec::as_slice);
        earlier.extend(
            records
                .iter()
                .filter_map(|r| r.get("seq").and_then(Value::as_u64)),
        );
        // The last N lines: all of the ring goes through the printer, so that a close is still
        // named by its opener, and the lines it leaves out count for nothing.
        let text = if opts.json {
            let recent = &records[records.len().saturating_sub(opts.recent)..];
            observations(&json!({ "observations": recent }), 0, true, &mut printer)
        } else {
            let lines = printer.lines(records);
            lines[lines.len().saturating_sub(opts.recent)..]
                .iter()
                .fold(String::new(), |mut s, l| {
                    s.push_str(&l.render());
                    s.push('\n');
                    s
                })
        };
        if write(&text)? == Written::ReaderGone {
            return Ok(());
        }
    }
    // The classes are the observations'; a watch narrowed to some wants those alone.
    if opts.classes.is_empty() {
        match c.call("projections.subscribe", json!({})) {
            Ok(_) => {}
            // A daemon older than this client: its observations alone.
            Err(ClientError::Rpc(e)) if e.code == code::METHOD_NOT_FOUND => {}
            Err(e) => return Err(e).context("subscribing to the projections served"),
        }
    }
    c.set_read_timeout(None)?;
    let place = mount_point.as_deref().unwrap_or(Path::new("the mount"));
    // On stderr in both forms, so that stdout is the stream alone.
    eprintln!(
        "worldfs: watching {}{} (Ctrl-C to stop)",
        match &path {
            Some(p) => p.display().to_string(),
            None => place.display().to_string(),
        },
        if opts.classes.is_empty() {
            String::new()
        } else {
            let names: Vec<&str> = opts.classes.iter().map(|c| class_name(*c)).collect();
            format!(", only {}", names.join(", "))
        },
    );
    loop {
        let msg = match c.read_message() {
            Ok(m) => m,
            Err(ClientError::Closed) => {
                eprintln!(
                    "worldfs: {} is gone (unmounted, or its daemon stopped)",
                    place.display()
                );
                return Ok(());
            }
            Err(e) => return Err(e).context("reading the mount's observations"),
        };
        let mut params = msg.get("params").cloned().unwrap_or(Value::Null);
        let dropped = params.get("dropped").and_then(Value::as_u64).unwrap_or(0);
        let text = match msg.get("method").and_then(Value::as_str) {
            Some("observations") => {
                if !earlier.is_empty()
                    && let Some(list) = params.get_mut("observations").and_then(Value::as_array_mut)
                {
                    let seq = |r: &Value| r.get("seq").and_then(Value::as_u64);
                    let before = earlier.iter().max().copied().unwrap_or(0);
                    list.retain(|r| seq(r).is_none_or(|s| !earlier.contains(&s)));
                    // Past what was read before, nothing more can come twice.
                    if list
                        .iter()
                        .filter_map(seq)
                        .min()
                        .is_some_and(|s| s > before)
                    {
                        earlier.clear();
                    }
                }
                observations(&params, dropped, opts.json, &mut printer)
            }
            Some("projections") => projection(&params, dropped, opts.json, &mut printer),
            Some("model_calls") => model_call(&params, opts.json),
            Some("steps") => step(&params, opts.json, mount_point.as_deref()),
            _ => continue,
        };
        if write(&text)? == Written::ReaderGone {
            return Ok(());
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Written {
    Done,
    /// `worldfs watch | head`: the reader had what it wanted.
    ReaderGone,
}

fn write(text: &str) -> anyhow::Result<Written> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(Written::Done),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(Written::ReaderGone),
        Err(e) => Err(e).context("writing to stdout"),
    }
}

/// The text for one notification of observations.
fn observations(params: &Value, dropped: u64, json: bool, printer: &mut Printer) -> String {
    let records = params
        .get("observations")
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice);
    if json {
        if dropped > 0 {
            eprintln!("worldfs: {dropped} observations lost before these (read too slowly)");
        }
        return records.iter().fold(String::new(), |mut s, r| {
            s.push_str(&r.to_string());
            s.push('\n');
            s
        });
    }
    let mut s = String::new();
    if dropped > 0 {
        s.push_str(&format!(
            "... {dropped} observations lost here (this watch read too slowly)\n"
        ));
    }
    for line in printer.lines(records) {
        s.push_str(&line.render());
        s.push('\n');
    }
    s
}

/// The text for one notification of a projection served.
fn projection(params: &Value, dropped: u64, json: bool, printer: &mut Printer) -> String {
    let event = params.get("projection").unwrap_or(&Value::Null);
    if json {
        if dropped > 0 {
            eprintln!("worldfs: {dropped} projections not told before this one");
        }
        return event_line("projection", event);
    }
    let mut s = String::new();
    if dropped > 0 {
        s.push_str(&format!("... {dropped} projections not told here\n"));
    }
    for line in printer.projection(event) {
        s.push_str(&line);
        s.push('\n');
    }
    s
}

/// The text for one model call a proxy reported: what its messages would have been, and what
/// went instead. Told after the call went upstream, so it follows its projection's line.
fn model_call(params: &Value, json: bool) -> String {
    let call = params.get("call").unwrap_or(&Value::Null);
    if json {
        return event_line("model_call", call);
    }
    let u = |k: &str| call.get(k).and_then(Value::as_u64).unwrap_or(0);
    let (history, sent) = (u("history_tokens"), u("sent_tokens"));
    let what = if call.get("rewritten").and_then(Value::as_bool) == Some(true) {
        format!(
            "messages of {} tokens instead of the history's {}{}",
            thousands(sent),
            thousands(history),
            match history {
                0 => String::new(),
                h => format!(" ({:.1}%)", sent as f64 * 100.0 / h as f64),
            }
        )
    } else if sent == history {
        format!("messages of {} tokens, as they came", thousands(history))
    } else {
        // `--observe`: nothing rewritten, what would have been said.
        format!(
            "messages of {} tokens, as they came (the projection would have sent {})",
            thousands(history),
            thousands(sent)
        )
    };
    format!(
        "{}  {:<22} {:<5}  {:<9} {what}\n",
        clock(u("time_ms")),
        "worldfs proxy",
        "-",
        "call"
    )
}

/// The text for one step recorded: the agent's tool call, named by what it was about (a path,
/// shown relative to the mount, a command, a pattern).
fn step(params: &Value, json: bool, mount_point: Option<&Path>) -> String {
    let step = params.get("step").unwrap_or(&Value::Null);
    if json {
        return event_line("step", step);
    }
    let s = |k: &str| step.get(k).and_then(Value::as_str).unwrap_or("");
    let who = match s("session") {
        "" => "step".to_owned(),
        id => format!("step[{}]", id.chars().take(8).collect::<String>()),
    };
    let input = step.get("input").unwrap_or(&Value::Null);
    let about = [
        "file_path",
        "notebook_path",
        "command",
        "pattern",
        "url",
        "query",
        "path",
    ]
    .iter()
    .find_map(|k| input.get(*k).and_then(Value::as_str))
    .map(|v| {
        mount_point
            .and_then(|m| Path::new(v).strip_prefix(m).ok())
            .map_or_else(|| v.to_owned(), |rel| rel.display().to_string())
    })
    .unwrap_or_else(|| {
        let all = input.to_string();
        match all.char_indices().nth(STEP_INPUT_CHARS) {
            Some((i, _)) => format!("{}…", &all[..i]),
            None => all,
        }
    });
    // One line each: a command may span several.
    let about = about.replace('\n', " ");
    let error = if step.get("is_error").and_then(Value::as_bool) == Some(true) {
        "  (error)"
    } else {
        ""
    };
    format!(
        "{}  {:<22} {:<5}  {:<9} {about}{error}\n",
        clock(step.get("time_ms").and_then(Value::as_u64).unwrap_or(0)),
        who,
        "-",
        s("tool_name"),
    )
}

/// `--json`'s line for what is not an observation: its fields, and `event` saying what it is.
fn event_line(event: &str, fields: &Value) -> String {
    let mut v = json!({ "event": event });
    if let (Some(o), Some(f)) = (v.as_object_mut(), fields.as_object()) {
        o.extend(f.clone());
    }
    format!("{v}\n")
}

fn class_name(c: WatchClass) -> &'static str {
    match c {
        WatchClass::Agent => "agent",
        WatchClass::Weak => "weak",
        WatchClass::Scan => "scan",
        WatchClass::None => "none",
    }
}

/// One printed line: an observation, or several reads (writes) of one file by one process that
/// arrived together, merged.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Line {
    time_ms: u64,
    who: String,
    class: String,
    op: String,
    path: String,
    /// What was read or written: merged while the ranges touch.
    range: Option<(u64, u64)>,
    pid: u64,
    detail: String,
}

impl Line {
    fn render(&self) -> String {
        let range = match self.range {
            Some((start, end)) if end > start => {
                format!("  bytes {start}-{} ({})", end - 1, size(end - start))
            }
            Some((start, _)) => format!("  nothing, at byte {start}"),
            None => String::new(),
        };
        let path = if self.path.is_empty() {
            "."
        } else {
            &self.path
        };
        format!(
            "{}  {:<22} {:<5}  {:<9} {path}{range}{}",
            clock(self.time_ms),
            self.who,
            self.class,
            self.op,
            self.detail
        )
    }

    /// Takes `next` into this line when it goes on the same read (or write) of the same file
    /// by the same process: FUSE splits a large read into requests that threads answer in any
    /// order.
    fn absorb(&mut self, next: &Line) -> bool {
        let (Some((a, b)), Some((c, d))) = (self.range, next.range) else {
            return false;
        };
        if self.op != next.op || self.pid != next.pid || self.path != next.path || c > b || a > d {
            return false;
        }
        self.range = Some((a.min(c), b.max(d)));
        true
    }
}

/// Most files whose last opener is remembered; past it the memory starts again.
const OPENERS_KEPT: usize = 4096;
/// Most requesters whose last projection is remembered; past it the memory starts again.
const REQUESTERS_KEPT: usize = 256;
/// Most characters of a step's input shown when it names no path, command or pattern.
const STEP_INPUT_CHARS: usize = 100;
/// Most of a projection's left-out parts listed on their own lines.
const LEFT_OUT_LISTED: usize = 8;

/// Whose projections are compared, one with the one before: a conversation's, in one format,
/// policy and budget (a replay asks for several side by side).
type Requester = (String, String, String, String);
/// A left-out part: its kind (`entry`, `command`...) and its path or command line.
type Part = (String, String);

/// Turns notifications into lines, remembering across them who opened each file: the kernel
/// says who closes a file no more than the daemon learns it (a close may come from a process
/// that has exited), so a close is shown as its opener's.
struct Printer {
    /// Also what is left out by default: closes of files only read (the open already said
    /// it), and the watcher's echoes of the mount's own changes.
    all: bool,
    openers: std::collections::HashMap<String, (String, String)>,
    /// What each requester's last projection left out, so the next one's line can say what it
    /// newly left out.
    left_out: std::collections::HashMap<Requester, std::collections::HashSet<Part>>,
}

impl Printer {
    fn new(all: bool) -> Printer {
        Printer {
            all,
            openers: Default::default(),
            left_out: Default::default(),
        }
    }

    /// The lines for a projection served: what it cost, then each part it newly left out (the
    /// first one of a requester seen here lists what it left out, from the policy's first).
    fn projection(&mut self, e: &Value) -> Vec<String> {
        let text = |k: &str| match e.get(k) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(v) => v.to_string(),
        };
        let u = |k: &str| e.get(k).and_then(Value::as_u64).unwrap_or(0);
        let session = text("session");
        let who = if session.is_empty() {
            "projection".to_owned()
        } else {
            format!(
                "projection[{}]",
                session.chars().take(8).collect::<String>()
            )
        };
        let total = u("evicted_total");
        let mut head = format!(
            "{} of {} tokens, {} shown, {total} left out",
            thousands(u("tokens")),
            thousands(u("budget")),
            u("entries"),
        );
        if u("in_request") > 0 {
            head.push_str(&format!(", {} in the request itself", u("in_request")));
        }
        if u("withheld") > 0 {
            head.push_str(&format!(", {} withheld (secrets)", u("withheld")));
        }
        let mut out = vec![format!(
            "{}  {:<22} {:<5}  {:<9} {head}",
            clock(u("time_ms")),
            who,
            "-",
            "sent"
        )];
        let listed: Vec<(Part, &Value)> = e
            .get("evicted")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|d| {
                let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                ((s("part"), s("path")), d)
            })
            .collect();
        let key = (session, text("format"), text("policy"), text("budget"));
        if self.left_out.len() >= REQUESTERS_KEPT && !self.left_out.contains_key(&key) {
            self.left_out.clear();
        }
        let now: std::collections::HashSet<Part> = listed.iter().map(|(p, _)| p.clone()).collect();
        let before = self.left_out.insert(key, now);
        let new: Vec<&(Part, &Value)> = listed
            .iter()
            .filter(|(p, _)| before.as_ref().is_none_or(|b| !b.contains(p)))
            .collect();
        let pad = " ".repeat(clock(0).len());
        for (_, d) in new.iter().take(LEFT_OUT_LISTED) {
            let (what, tokens, why) = left_out(d);
            out.push(format!(
                "{pad}  {:<22} {:<5}  {:<9} {what}  {} tokens ({why})",
                "",
                "",
                "left out",
                thousands(tokens)
            ));
        }
        if new.len() > LEFT_OUT_LISTED {
            out.push(format!(
                "{pad}  {:<22} {:<5}  {:<9} ... and {} more (`worldfs projection --full` lists them)",
                "",
                "",
                "",
                new.len() - LEFT_OUT_LISTED
            ));
        }
        out
    }

    /// The lines for one notification's observations, in order.
    fn lines(&mut self, records: &[Value]) -> Vec<Line> {
        let mut out: Vec<Line> = Vec::new();
        for r in records {
            let Some(mut line) = line(r, self.all) else {
                continue;
            };
            match line.op.as_str() {
                "open" | "create" => {
                    if self.openers.len() >= OPENERS_KEPT {
                        self.openers.clear();
                    }
                    self.openers
                        .insert(line.path.clone(), (line.who.clone(), line.class.clone()));
                }
                "close" if line.pid == 0 => {
                    if let Some((who, class)) = self.openers.get(&line.path) {
                        line.who.clone_from(who);
                        line.class.clone_from(class);
                    }
                }
                _ => {}
            }
            if let Some(last) = out.last_mut()
                && last.absorb(&line)
            {
                continue;
            }
            out.push(line);
        }
        out
    }
}

fn line(r: &Value, all: bool) -> Option<Line> {
    let u = |k: &str| r.get(k).and_then(Value::as_u64).unwrap_or(0);
    let s = |k: &str| r.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
    let flag = |k: &str| r.get(k).and_then(Value::as_bool).unwrap_or(false);
    let op = s("op");
    let pid = u("pid");
    let mut range = None;
    let (name, detail) = match op.as_str() {
        "open" => {
            let how = match (flag("read"), flag("write")) {
                (true, true) => Some("for reading and writing"),
                (false, true) => Some("for writing"),
                (true, false) => Some("for reading"),
                (false, false) => None,
            };
            let said: Vec<&str> = how
                .into_iter()
                .chain(flag("truncate").then_some("emptied"))
                .collect();
            let name = if flag("created") { "create" } else { "open" };
            let detail = if said.is_empty() {
                String::new()
            } else {
                format!("  {}", said.join(", "))
            };
            (name.to_owned(), detail)
        }
        "read" | "write" => {
            range = Some((u("offset"), u("offset").saturating_add(u("len"))));
            (op.clone(), String::new())
        }
        "close" if !flag("wrote") && !all => return None,
        "close" => (
            op.clone(),
            if flag("wrote") { "  (written)" } else { "" }.to_owned(),
        ),
        "truncate" => (op.clone(), format!("  to {} bytes", u("size"))),
        "set_attr" => ("setattr".to_owned(), String::new()),
        "read_dir" => ("list".to_owned(), String::new()),
        "unlink" => ("remove".to_owned(), String::new()),
        "link" => (
            "link".to_owned(),
            format!("  (another name of {})", s("target")),
        ),
        "rename" if flag("exchange") => ("exchange".to_owned(), format!("  <-> {}", s("to"))),
        "rename" => (op.clone(), format!("  -> {}", s("to"))),
        "fallocate" => {
            range = Some((u("offset"), u("offset").saturating_add(u("len"))));
            let name = if flag("punch_hole") {
                "punch"
            } else {
                "allocate"
            };
            (name.to_owned(), String::new())
        }
        "copy_in" => {
            range = Some((u("offset"), u("offset").saturating_add(u("len"))));
            ("copy".to_owned(), format!("  from {}", s("from")))
        }
        "external" => match s("change").as_str() {
            "echo" if !all => return None,
            "removed_file" => ("removed".to_owned(), String::new()),
            "rescan" => (
                "rescan".to_owned(),
                "  (the watcher lost events: anything may have changed)".to_owned(),
            ),
            "unwatched" => (
                "unwatched".to_owned(),
                "  (inotify's watch limit: changes below go unseen until it is mounted again)"
                    .to_owned(),
            ),
            change => (change.to_owned(), String::new()),
        },
        "mkdir" | "mknod" | "symlink" | "rmdir" => (op.clone(), String::new()),
        // A newer daemon's operation: named as it comes, with its fields.
        _ => (op.clone(), format!("  {}", extra_fields(r))),
    };
    let who = if op == "external" {
        "behind the mount".to_owned()
    } else {
        match (r.get("comm").and_then(Value::as_str), pid) {
            (Some(comm), pid) => format!("{comm}[{pid}]"),
            (None, 0) => "-".to_owned(),
            (None, pid) => format!("pid {pid}"),
        }
    };
    Some(Line {
        time_ms: u("time_ms"),
        who,
        class: r
            .get("class")
            .and_then(Value::as_str)
            .unwrap_or("-")
            .to_owned(),
        op: name,
        path: s("path"),
        range,
        pid,
        detail,
    })
}

/// The fields of an observation other than those every line shows.
fn extra_fields(r: &Value) -> String {
    const SHOWN: &[&str] = &["op", "seq", "time_ms", "path", "pid", "class", "comm"];
    let rest: serde_json::Map<String, Value> = r
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| !SHOWN.contains(&k.as_str()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if rest.is_empty() {
        String::new()
    } else {
        Value::Object(rest).to_string()
    }
}

/// One part a projection left out (an item of its `evicted`): what it is (`src/big.rs`, the
/// output of a command), its tokens, and why (`no room`, `faded`).
pub(crate) fn left_out(d: &Value) -> (String, u64, &str) {
    let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("");
    let what = match s("part") {
        "entry" => s("path").to_owned(),
        "command" => format!("output of `{}`", s("path")),
        "last_step" => "the last step".to_owned(),
        other => format!("the {other}"),
    };
    let why = match s("reason") {
        "over_budget" | "over_budget_after_render" => "no room",
        "aged" => "faded",
        other => other,
    };
    let tokens = d.get("tokens").and_then(Value::as_u64).unwrap_or(0);
    (what, tokens, why)
}

/// `12,400`: token counts are read at a glance.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn size(bytes: u64) -> String {
    const KIB: u64 = 1024;
    match bytes {
        b if b < KIB => format!("{b} B"),
        b if b < KIB * KIB => format!("{:.1} KiB", b as f64 / KIB as f64),
        b => format!("{:.1} MiB", b as f64 / (KIB * KIB) as f64),
    }
}

/// The time of day in the local time zone, to the millisecond.
pub(crate) fn clock(time_ms: u64) -> String {
    i64::try_from(time_ms)
        .ok()
        .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
        .map(|t| {
            t.to_zoned_datetime(jiff::tz::TimeZone::system())
                .strftime("%H:%M:%S%.3f")
                .to_string()
        })
        .unwrap_or_else(|| "--:--:--.---".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obs(op: Value) -> Value {
        let mut v = json!({"seq": 1, "time_ms": 0, "path": "src/a.py", "pid": 42,
                           "class": "agent", "comm": "cat"});
        if let (Some(o), Some(extra)) = (v.as_object_mut(), op.as_object()) {
            o.extend(extra.clone());
        }
        v
    }

    fn lines(records: &[Value], all: bool) -> Vec<Line> {
        Printer::new(all).lines(records)
    }

    fn rendered(records: &[Value], all: bool) -> Vec<String> {
        lines(records, all)
            .iter()
            // Without the clock, which depends on the machine's time zone.
            .map(|l| {
                l.render()
                    .split_once("  ")
                    .map_or_else(String::new, |(_, r)| r.to_owned())
            })
            .collect()
    }

    #[test]
    fn each_kind_of_observation_has_its_line() {
        let cases = [
            (
                json!({"op": "open", "read": true, "write": false, "truncate": false,
                    "created": false}),
                "open      src/a.py  for reading",
            ),
            (
                json!({"op": "open", "read": false, "write": true, "truncate": true,
                    "created": true}),
                "create    src/a.py  for writing, emptied",
            ),
            (
                json!({"op": "read", "offset": 0, "len": 4096}),
                "read      src/a.py  bytes 0-4095 (4.0 KiB)",
            ),
            (
                json!({"op": "write", "offset": 10, "len": 0}),
                "write     src/a.py  nothing, at byte 10",
            ),
            (
                json!({"op": "close", "wrote": true}),
                "close     src/a.py  (written)",
            ),
            (
                json!({"op": "truncate", "size": 3}),
                "truncate  src/a.py  to 3 bytes",
            ),
            (json!({"op": "read_dir"}), "list      src/a.py"),
            (
                json!({"op": "rename", "to": "src/b.py", "exchange": false, "dir": false}),
                "rename    src/a.py  -> src/b.py",
            ),
            (
                json!({"op": "rename", "to": "src/b.py", "exchange": true, "dir": false}),
                "exchange  src/a.py  <-> src/b.py",
            ),
            (
                json!({"op": "link", "target": "src/c.py"}),
                "link      src/a.py  (another name of src/c.py)",
            ),
            (json!({"op": "unlink"}), "remove    src/a.py"),
            (
                json!({"op": "copy_in", "from": "x", "offset": 0, "len": 2048}),
                "copy      src/a.py  bytes 0-2047 (2.0 KiB)  from x",
            ),
            (
                json!({"op": "something_new", "n": 1}),
                "something_new src/a.py  {\"n\":1}",
            ),
        ];
        for (op, want) in cases {
            let got = rendered(&[obs(op.clone())], false);
            assert_eq!(got.len(), 1, "{op}");
            let expected = format!("{:<22} {:<5}  {want}", "cat[42]", "agent");
            assert_eq!(got[0], expected, "{op}");
        }
    }

    #[test]
    fn changes_behind_the_mount_name_no_program() {
        let mut v = json!({"seq": 3, "time_ms": 0, "path": "", "pid": 0, "class": null,
                           "comm": null, "op": "external", "change": "modified"});
        let got = rendered(std::slice::from_ref(&v), false);
        assert_eq!(
            got,
            [format!(
                "{:<22} {:<5}  modified  .",
                "behind the mount", "-"
            )]
        );
        v["change"] = json!("removed_file");
        assert!(rendered(std::slice::from_ref(&v), false)[0].ends_with("removed   ."));
    }

    #[test]
    fn reads_of_one_file_by_one_process_arriving_together_are_one_line() {
        let read = |pid: u64, offset: u64| {
            let mut v = obs(json!({"op": "read", "offset": offset, "len": 131072}));
            v["pid"] = json!(pid);
            v
        };
        // Out of order (two threads answered), then another process, then the first again
        // after a gap: three lines.
        let got = lines(
            &[
                read(42, 131072),
                read(42, 0),
                read(42, 262144),
                read(7, 0),
                read(42, 0),
            ],
            false,
        );
        let ranges: Vec<_> = got.iter().map(|l| (l.pid, l.range)).collect();
        assert_eq!(
            ranges,
            [
                (42, Some((0, 393216))),
                (7, Some((0, 131072))),
                (42, Some((0, 131072)))
            ]
        );
        // A read and a write of the same bytes are two things done.
        let write = obs(json!({"op": "write", "offset": 0, "len": 10}));
        assert_eq!(lines(&[read(42, 0), write], false).len(), 2);
    }

    #[test]
    fn a_close_is_shown_as_its_openers() {
        let mut p = Printer::new(false);
        let open = obs(
            json!({"op": "open", "read": false, "write": true, "truncate": false,
                             "created": false}),
        );
        assert_eq!(p.lines(&[open]).len(), 1);
        // In a later notification, without the pid the kernel does not give for a close.
        let mut close = obs(json!({"op": "close", "wrote": true}));
        close["pid"] = json!(0);
        close["comm"] = json!(null);
        close["class"] = json!(null);
        let got = p.lines(&[close.clone()]);
        assert_eq!(
            (got[0].who.as_str(), got[0].class.as_str()),
            ("cat[42]", "agent")
        );
        // A file nobody was seen opening: no one is named.
        close["path"] = json!("other");
        let got = p.lines(&[close]);
        assert_eq!((got[0].who.as_str(), got[0].class.as_str()), ("-", "-"));
    }

    #[test]
    fn plain_closes_and_echoes_show_only_with_all() {
        let close = obs(json!({"op": "close", "wrote": false}));
        let echo = json!({"seq": 2, "time_ms": 0, "path": "a", "pid": 0, "class": null,
                          "comm": null, "op": "external", "change": "echo"});
        let records = [close, echo];
        assert!(lines(&records, false).is_empty());
        assert_eq!(lines(&records, true).len(), 2);
    }

    #[test]
    fn a_projection_says_what_it_newly_left_out() {
        let served = |evicted: Value, session: Value| {
            json!({"time_ms": 0, "session": session, "format": "anthropic", "policy": "worldfs",
                   "budget": 8000, "tokens": 7812, "entries": 3, "in_request": 1,
                   "evicted_total": evicted.as_array().map_or(0, Vec::len), "evicted": evicted,
                   "withheld": 0})
        };
        let big = json!({"part": "entry", "path": "src/big.rs", "reason": "over_budget",
                         "tokens": 12400});
        let out = json!({"part": "command", "path": "pytest", "reason": "aged", "tokens": 900});
        let mut p = Printer::new(false);
        let first = p.projection(&served(json!([big.clone()]), json!("5f2c1a9b-77")));
        assert_eq!(first.len(), 2, "{first:?}");
        let head = first[0].split_once("  ").map_or("", |(_, r)| r);
        assert_eq!(
            head,
            format!(
                "{:<22} {:<5}  {:<9} 7,812 of 8,000 tokens, 3 shown, 1 left out, 1 in \
                     the request itself",
                "projection[5f2c1a9b]", "-", "sent"
            )
        );
        assert_eq!(
            first[1].trim_start(),
            "left out  src/big.rs  12,400 tokens (no room)"
        );
        // Under the head's column of what was done.
        assert_eq!(
            first[1].find("left out"),
            first[0].find("sent"),
            "{first:?}"
        );
        // The next of the same requester: only what it newly left out.
        let next = p.projection(&served(json!([big.clone(), out]), json!("5f2c1a9b-77")));
        assert_eq!(next.len(), 2, "{next:?}");
        assert!(
            next[1].ends_with("left out  output of `pytest`  900 tokens (faded)"),
            "{next:?}"
        );
        // Another conversation's projections are compared with its own.
        let other = p.projection(&served(json!([big]), json!(null)));
        assert!(other[0].contains("projection "), "{other:?}");
        assert_eq!(other.len(), 2, "{other:?}");
    }

    #[test]
    fn a_model_call_says_what_went_instead_of_the_history() {
        let call = |rewritten: bool, sent: u64| {
            let v = json!({"call": {"time_ms": 0, "history_tokens": 45210, "sent_tokens": sent,
                                    "rewritten": rewritten}});
            let line = model_call(&v, false);
            line.split_once("  ")
                .map_or(String::new(), |(_, r)| r.trim_end().to_owned())
        };
        let head = format!("{:<22} {:<5}  {:<9} ", "worldfs proxy", "-", "call");
        assert_eq!(
            call(true, 7812),
            format!("{head}messages of 7,812 tokens instead of the history's 45,210 (17.3%)")
        );
        assert_eq!(
            call(false, 45210),
            format!("{head}messages of 45,210 tokens, as they came")
        );
        assert!(call(false, 7812).ends_with("(the projection would have sent 7,812)"));
        let json: Value = serde_json::from_str(&model_call(
            &json!({"call": {"history_tokens": 1, "sent_tokens": 1, "rewritten": false}}),
            true,
        ))
        .unwrap_or_default();
        assert_eq!(json["event"], "model_call");
    }

    #[test]
    fn a_step_is_named_by_what_it_was_about() {
        let line = |step: Value| {
            let l = super::step(&json!({ "step": step }), false, Some(Path::new("/p")));
            l.split_once("  ")
                .map_or(String::new(), |(_, r)| r.trim_end().to_owned())
        };
        let head = |who: &str, tool: &str| format!("{who:<22} {:<5}  {tool:<9} ", "-");
        assert_eq!(
            line(json!({"session": "5f2c1a9b-77", "tool_name": "Read",
                        "input": {"file_path": "/p/src/a.py"}})),
            format!("{}src/a.py", head("step[5f2c1a9b]", "Read"))
        );
        assert_eq!(
            line(
                json!({"tool_name": "Bash", "input": {"command": "cd x &&\npytest"},
                        "is_error": true})
            ),
            format!("{}cd x && pytest  (error)", head("step", "Bash"))
        );
        let long = "y".repeat(300);
        let other = line(json!({"tool_name": "Task", "input": {"x": long}}));
        assert!(
            other.ends_with('…') && other.chars().count() < 160,
            "{other}"
        );
    }

    #[test]
    fn thousands_are_grouped() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
        assert_eq!(thousands(1234567), "1,234,567");
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size(512), "512 B");
        assert_eq!(size(1536), "1.5 KiB");
        assert_eq!(size(3 * 1024 * 1024), "3.0 MiB");
    }
}
