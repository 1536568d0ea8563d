//! What the harness reported (framing, structured state, the last step, command outputs) as
//! parts, each with its cost in the requested format; command outputs only while their inputs
//! are unchanged.

use std::path::Path;

use serde_json::{Map, Value};

use crate::world::harness::{CommandOutput, Framing, Step, StructuredState};
use crate::world::placements::Placement;
use crate::world::{INPUT_ABSENT, ReadError, World};

use super::budget::{
    self, BLOCK_OVERHEAD, CALL_OVERHEAD, JSON_ENTRY_OVERHEAD, JSON_FIELD_OVERHEAD, MESSAGE_OVERHEAD,
};
use super::ids;
use super::parts::{CommandPart, Report, StepPart, TextPart, text_piece_cost, user_text_cost};
use super::request::Format;
use super::text;
use super::{CommandDropReason, DroppedCommand, ProjectionError};

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

pub(super) fn framing_part(
    f: &Framing,
    format: Format,
) -> Result<Option<TextPart>, ProjectionError> {
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
    // The agent's own plan, as it last left it: what is done says as much as what is not.
    let tasks: Vec<_> = s
        .tasks
        .iter()
        .filter(|t| !t.subject.trim().is_empty())
        .collect();
    if !tasks.is_empty() {
        out.push_str("Tasks:\n");
        for t in tasks {
            out.push_str(&format!("- [{}] {}\n", t.status.label(), t.subject.trim()));
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

pub(super) fn state_part(
    s: &StructuredState,
    format: Format,
) -> Result<Option<TextPart>, ProjectionError> {
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

pub(super) fn step_part(s: &Step, format: Format) -> Result<StepPart, ProjectionError> {
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
    if let Some(tool) = &c.tool {
        return tool_result_text(c, tool);
    }
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
    let current = match c.subtrees.as_slice() {
        [] => "the files it read are unchanged".to_owned(),
        [t] if t.as_os_str().is_empty() => "no file has changed since it ran".to_owned(),
        dirs => {
            let dirs: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
            format!("nothing below {} has changed since it ran", dirs.join(", "))
        }
    };
    format!(
        "Output of `{}`{cwd}, {code}. Still current: {current}.\n{output}",
        c.command
    )
}

/// Characters of a command shown where it names an earlier result.
const MAX_NAMED_COMMAND: usize = 200;

/// A tool call's result that no file keeps current: said to be as it was then, and named by
/// what its input says it was for (an `Agent` call's description, a fetch's URL, a search's
/// query, the file a Read outside the world read), not by the whole input (a subagent's
/// prompt can be long).
fn tool_result_text(c: &CommandOutput, tool: &str) -> String {
    let input = c
        .command
        .strip_prefix(tool)
        .and_then(|rest| serde_json::from_str::<Value>(rest.trim_start()).ok());
    let cut = |text: &str| {
        let shown: String = text.chars().take(MAX_NAMED_COMMAND).collect();
        let more = if shown.len() < text.len() { "..." } else { "" };
        format!("{shown}{more}")
    };
    let about = match &input {
        Some(i) => ["description", "url", "query", "file_path"]
            .iter()
            .find_map(|k| i.get(*k).and_then(Value::as_str))
            .map(|a| format!(" ({a:?})"))
            // Else the input itself when it is short (an MCP tool's: which issue, which query).
            .or_else(|| {
                let text = i.to_string();
                (i.as_object().is_some_and(|o| !o.is_empty())
                    && text.chars().count() <= MAX_NAMED_COMMAND)
                    .then(|| format!(" with {text}"))
            })
            .unwrap_or_default(),
        // A command its call ran (`command.record`'s `untracked_tool`): named by itself.
        None => format!(" (`{}`)", cut(&c.command)),
    };
    let code = match c.exit_code {
        Some(n) if n != 0 => format!(", exit code {n}"),
        _ => String::new(),
    };
    let output = if c.output.trim().is_empty() {
        "(no output)"
    } else {
        c.output.as_str()
    };
    format!(
        "Result of an earlier {tool} call{about}{code}, as it was then: what it says of files \
         may be out of date (the files shown here are as they are now).\n{output}"
    )
}

/// Command outputs whose inputs are unchanged now (re-read from SOURCE), oldest first.
pub(super) fn command_parts(
    world: &World,
    commands: &[CommandOutput],
    format: Format,
    report: &mut Report,
) -> Result<Vec<CommandPart>, ProjectionError> {
    let mut out = Vec::new();
    'cmds: for c in commands {
        for (path, recorded) in &c.inputs {
            let Some(reason) = input_change(world, path, recorded) else {
                continue;
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
        let cost = command_cost(format, &c.command, &c.output, &text)?;
        out.push(CommandPart {
            command: c.command.clone(),
            turn: c.turn,
            session_step: c.session_step,
            cwd: c.cwd.clone(),
            exit_code: c.exit_code,
            output: c.output.clone(),
            as_it_was: c.tool.is_some(),
            seq: c.seq,
            place: Placement::default(),
            text,
            cost,
        });
    }
    out.sort_by_key(|c| c.seq);
    Ok(out)
}

/// What a command output with this `text` costs in `format`.
fn command_cost(
    format: Format,
    command: &str,
    output: &str,
    text: &str,
) -> Result<u64, ProjectionError> {
    Ok(match format {
        Format::Text => text_piece_cost(&text::command_piece(text))?,
        Format::Json => {
            JSON_ENTRY_OVERHEAD + budget::count_str(command)? + budget::count_str(output)?
        }
        _ => user_text_cost(text)?,
    })
}

/// `c` with `output` in place of its own (the same output with the runs of lines the stream's
/// files show named instead), its text and cost made anew.
pub(super) fn with_output(
    c: &mut CommandPart,
    output: String,
    format: Format,
) -> Result<(), ProjectionError> {
    // The text is a header, then the output (a blank output, "(no output)", is never shortened).
    let Some(header) = c.text.strip_suffix(c.output.as_str()) else {
        return Ok(());
    };
    let text = format!("{header}{output}");
    c.cost = command_cost(format, &c.command, &output, &text)?;
    c.text = text;
    c.output = output;
    Ok(())
}

/// Why an output's input `path` no longer vouches for it, `None` while it is as `recorded`.
fn input_change(world: &World, path: &Path, recorded: &str) -> Option<CommandDropReason> {
    // Not a file the projection shows (ignored: a build artifact, a `.pyc`; binary; too large),
    // or gone: the output is still keyed by what it read.
    let by_fingerprint = || match world.input_fingerprint(path) {
        now if now == recorded => None,
        now if now == INPUT_ABSENT => Some(CommandDropReason::InputUnreadable),
        _ => Some(CommandDropReason::InputChanged),
    };
    // An ignored file is known by its fingerprint alone: one look at it, not two.
    if world.ignores(path, false) {
        return by_fingerprint();
    }
    match world.read_current(path) {
        Ok(cur) if ids::hash_hex(&cur.hash).eq_ignore_ascii_case(recorded) => None,
        Ok(_) => Some(CommandDropReason::InputChanged),
        // Its output may quote the secret: never shown.
        Err(ReadError::Withheld { .. }) => Some(CommandDropReason::InputWithheld),
        Err(_) => by_fingerprint(),
    }
}

/// Whether `c` is the output of the step `s` (same text, and the step's input names the
/// command).
pub(super) fn is_step_output(c: &CommandPart, s: &Step) -> bool {
    c.output == s.result
        && match &s.input {
            Value::String(v) => *v == c.command,
            // A search tool's output is named by the tool and its input (`Grep {...}`).
            Value::Object(m) => {
                m.values().any(|v| v.as_str() == Some(c.command.as_str()))
                    || c.command
                        .strip_prefix(s.tool_name.as_str())
                        .and_then(|rest| rest.strip_prefix(' '))
                        .is_some_and(|rest| {
                            serde_json::from_str::<Value>(rest).ok().as_ref() == Some(&s.input)
                        })
            }
            _ => false,
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_output_says_what_keeps_it_current() {
        let mut c = CommandOutput {
            command: "Grep {\"pattern\":\"x\"}".into(),
            cwd: ".".into(),
            output: "a.py".into(),
            exit_code: Some(0),
            inputs: Vec::new(),
            subtrees: Vec::new(),
            turn: 1,
            seq: 1,
            tool: None,
            session: None,
            session_step: None,
        };
        let current = |c: &CommandOutput| {
            let t = command_text(c);
            let start = t.find("Still current: ").map_or(0, |i| i + 15);
            t[start..].lines().next().unwrap_or_default().to_owned()
        };
        assert_eq!(current(&c), "the files it read are unchanged.");
        c.subtrees = vec![std::path::PathBuf::new()];
        assert_eq!(current(&c), "no file has changed since it ran.");
        c.subtrees = vec!["docs".into(), "src/core".into()];
        assert_eq!(
            current(&c),
            "nothing below docs, src/core has changed since it ran."
        );
    }

    #[test]
    fn a_tool_result_says_it_is_as_it_was_then() {
        let input = serde_json::json!({"description": "Find the parser", "prompt": "x".repeat(500),
                                       "subagent_type": "Explore"});
        let c = CommandOutput {
            command: format!("Agent {input}"),
            cwd: ".".into(),
            output: "The parser is in src/parse.rs.".into(),
            exit_code: None,
            inputs: Vec::new(),
            subtrees: Vec::new(),
            turn: 1,
            seq: 1,
            tool: Some("Agent".into()),
            session: None,
            session_step: None,
        };
        let t = command_text(&c);
        assert!(
            t.starts_with("Result of an earlier Agent call (\"Find the parser\"), as it was then"),
            "{t}"
        );
        assert!(t.ends_with("\nThe parser is in src/parse.rs."), "{t}");
        assert!(!t.contains("xxxx"), "not the whole prompt: {t}");
    }
}
