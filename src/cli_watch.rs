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

mod file_lines;
mod format;
mod projection_lines;

use self::file_lines::FileLines;
pub(crate) use self::format::{clock, cost, short_id, thousands};
use self::projection_lines::ProjectionLines;
pub(crate) use self::projection_lines::left_out;

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
    let mut files = FileLines::new(opts.all);
    let mut projections = ProjectionLines::default();
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
        // The last N lines: all of the ring is made into lines, so that a close is still
        // named by its opener, and the lines it leaves out count for nothing.
        let text = if opts.json {
            let recent = &records[records.len().saturating_sub(opts.recent)..];
            observations(&json!({ "observations": recent }), 0, true, &mut files)
        } else {
            let lines = files.lines(records);
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
                observations(&params, dropped, opts.json, &mut files)
            }
            Some("projections") => projection(&params, dropped, opts.json, &mut projections),
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
fn observations(params: &Value, dropped: u64, json: bool, files: &mut FileLines) -> String {
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
    for line in files.lines(records) {
        s.push_str(&line.render());
        s.push('\n');
    }
    s
}

/// The text for one notification of a projection served.
fn projection(
    params: &Value,
    dropped: u64,
    json: bool,
    projections: &mut ProjectionLines,
) -> String {
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
    for line in projections.projection(event) {
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
        id => format!("step[{}]", short_id(id)),
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

/// Most characters of a step's input shown when it names no path, command or pattern.
const STEP_INPUT_CHARS: usize = 100;

#[cfg(test)]
mod tests {
    use super::*;

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
}
