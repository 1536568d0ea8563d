//! The `anthropic` format: `{system, messages, tools}` for `POST /v1/messages`.
//!
//! Messages: the goal as user text; then the stream ([`Input::pieces`]) in its places, so an
//! unchanged world renders a byte-identical prefix: one assistant `tool_use` / user
//! `tool_result` pair per read call (an entry shown as several ranges has one per range), and
//! still-valid command outputs as user text (merged after the results before them, which stay
//! first in their message); then the structured state; the last real step verbatim; and it
//! always ends on a user message. `cache_control` breakpoints go, in this priority, at the end
//! of the stream (what the next request reads back), at the end of the part of the stream the
//! previous request showed first, unchanged (what it wrote that is still valid, read back now),
//! at the end of the part placed before the last turn, and at the very end; at most
//! `max_breakpoints`.

use serde_json::{Map, Value, json};

use super::parts::{Input, MINIMAL_USER_TEXT, Piece};
use super::request::Format;
use super::tools;

/// A message under construction; consecutive same-role messages are merged as they are pushed,
/// as the API would merge them.
struct Msg {
    role: &'static str,
    content: Vec<Value>,
}

/// Position of a content block: (message, block).
type Loc = (usize, usize);

fn push(msgs: &mut Vec<Msg>, role: &'static str, blocks: Vec<Value>) -> Loc {
    match msgs.last_mut() {
        Some(last) if last.role == role => last.content.extend(blocks),
        _ => msgs.push(Msg {
            role,
            content: blocks,
        }),
    }
    let m = msgs.len() - 1;
    (m, msgs[m].content.len().saturating_sub(1))
}

fn text(t: &str) -> Value {
    json!({"type": "text", "text": t})
}

fn tool_use(id: &str, name: &str, input: &Map<String, Value>) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

fn tool_result(id: &str, content: &str, is_error: bool) -> Value {
    let mut v = json!({"type": "tool_result", "tool_use_id": id, "content": content});
    if is_error && let Value::Object(m) = &mut v {
        m.insert("is_error".into(), Value::Bool(true));
    }
    v
}

pub fn render(input: &Input) -> Value {
    let mut msgs: Vec<Msg> = Vec::new();
    let goal_loc = push(&mut msgs, "user", vec![text(&input.goal.text)]);
    let pieces = input.pieces();
    let mut piece_locs: Vec<(u64, Loc)> = Vec::with_capacity(pieces.len());
    for piece in &pieces {
        let loc = match piece {
            Piece::Call(e, i) => {
                let c = &e.calls[*i];
                let uses = vec![tool_use(&c.id, &input.read_tool.name, &c.input)];
                push(&mut msgs, "assistant", uses);
                push(
                    &mut msgs,
                    "user",
                    vec![tool_result(&c.id, &c.result, c.is_error)],
                )
            }
            // After results in the same user message: results stay first, as the API requires.
            Piece::Command(c) => push(&mut msgs, "user", vec![text(&c.text)]),
        };
        piece_locs.push((piece.turn(), loc));
    }
    if let Some(s) = &input.state {
        push(&mut msgs, "user", vec![text(&s.text)]);
    }
    if let Some(s) = &input.step {
        let assistant = match &s.raw_anthropic {
            Some(raw) => raw.clone(),
            None => {
                let mut blocks = Vec::new();
                if let Some(t) = &s.assistant_text {
                    blocks.push(text(t));
                }
                blocks.push(tool_use(&s.id, &s.name, &s.input));
                blocks
            }
        };
        push(&mut msgs, "assistant", assistant);
        push(
            &mut msgs,
            "user",
            vec![tool_result(&s.id, &s.result, s.is_error)],
        );
    }
    // Unreachable with the parts above (each ends on a user message), but the rule must hold
    // whatever is added later.
    if msgs.last().is_none_or(|m| m.role != "user") {
        push(&mut msgs, "user", vec![text(MINIMAL_USER_TEXT)]);
    }

    let last = msgs.len() - 1;
    let end = (last, msgs[last].content.len().saturating_sub(1));
    let stable = |before: u64| {
        piece_locs
            .iter()
            .rev()
            .find(|(turn, _)| *turn < before)
            .map(|(_, loc)| *loc)
    };
    // The stream only grows at its end while the world allows, so its end is what the next
    // request reads back. What this request can read is the part of the stream the previous
    // request showed first, unchanged: a breakpoint at its end finds the entry written there or
    // up to 20 blocks before. Ending at the part placed before this turn instead would look
    // for it after a piece that was dropped or changed, where nothing matches, and the whole
    // projection would be written again. The state and the last step change every turn; a
    // breakpoint after them would write what is never read, so the very end comes last.
    let mut wanted: Vec<Loc> = Vec::new();
    wanted.push(piece_locs.last().map_or(goal_loc, |(_, loc)| *loc));
    wanted.push(match input.unchanged_prefix {
        0 => goal_loc,
        n => piece_locs.get(n - 1).map_or(goal_loc, |(_, loc)| *loc),
    });
    if input.turn > 0
        && let Some(loc) = stable(input.turn - 1)
    {
        wanted.push(loc);
    }
    wanted.push(end);
    let mut placed: Vec<Loc> = Vec::new();
    for loc in wanted {
        if placed.len() >= usize::from(input.max_breakpoints) {
            break;
        }
        if !placed.contains(&loc) {
            placed.push(loc);
        }
    }
    for (m, b) in placed {
        if let Some(Value::Object(block)) = msgs.get_mut(m).and_then(|x| x.content.get_mut(b)) {
            block.insert("cache_control".into(), input.cache_ttl.cache_control());
        }
    }

    let messages: Vec<Value> = msgs
        .into_iter()
        .map(|m| json!({"role": m.role, "content": m.content}))
        .collect();
    let mut body = Map::new();
    if let Some(f) = &input.framing {
        body.insert("system".into(), json!([text(&f.text)]));
    }
    body.insert("messages".into(), Value::Array(messages));
    let defs = input.tools();
    body.insert("tools".into(), tools::render(&defs, Format::Anthropic));
    Value::Object(body)
}
