//! The `openai_responses` format: `{instructions, input, tools}` for `POST /v1/responses`.
//!
//! The framing goes in `instructions` (kept byte-stable for caching); the goal and every other
//! part are input items in the same order as the other formats. Each synthesized
//! `function_call` is followed directly by its `function_call_output` (some compatible backends
//! require adjacency), and synthesized items carry no `id`: the API only accepts server item
//! ids there.

use serde_json::{Map, Value, json};

use super::parts::{Input, Piece};
use super::request::Format;
use super::tools;

fn call(id: &str, name: &str, input: &Map<String, Value>) -> Value {
    json!({"type": "function_call", "call_id": id, "name": name,
           "arguments": Value::Object(input.clone()).to_string()})
}

fn output(id: &str, content: &str, is_error: bool) -> Value {
    let content = if is_error {
        format!("Error: {content}")
    } else {
        content.to_owned()
    };
    json!({"type": "function_call_output", "call_id": id, "output": content})
}

fn message(role: &str, text: &str) -> Value {
    json!({"type": "message", "role": role, "content": text})
}

pub fn render(input: &Input) -> Value {
    let mut items = vec![message("user", &input.goal.text)];
    for piece in input.pieces() {
        match piece {
            Piece::Call(e, i) => {
                let c = &e.calls[i];
                items.push(call(&c.id, &input.read_tool.name, &c.input));
                items.push(output(&c.id, &c.result, c.is_error));
            }
            Piece::Command(c) => items.push(message("user", &c.text)),
        }
    }
    if let Some(s) = &input.state {
        items.push(message("user", &s.text));
    }
    if let Some(s) = &input.step {
        if let Some(t) = &s.assistant_text {
            items.push(message("assistant", t));
        }
        items.push(call(&s.id, &s.name, &s.input));
        items.push(output(&s.id, &s.result, s.is_error));
    }
    let defs = input.tools();
    let mut body = Map::new();
    if let Some(f) = &input.framing {
        body.insert("instructions".into(), Value::String(f.text.clone()));
    }
    body.insert("input".into(), Value::Array(items));
    body.insert(
        "tools".into(),
        tools::render(&defs, Format::OpenaiResponses),
    );
    Value::Object(body)
}
