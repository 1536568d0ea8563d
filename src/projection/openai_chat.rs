//! The `openai_chat` format: `{messages, tools}` for `POST /v1/chat/completions`.
//!
//! Same content and order as the anthropic format. Each read call is an assistant message with
//! one of `tool_calls` followed by its `tool` message; arguments are JSON
//! strings with sorted keys, so unchanged entries keep their bytes (OpenAI caches prefixes
//! automatically, no breakpoints). There is no error flag: error results say so in their text.

use serde_json::{Map, Value, json};

use super::parts::{Input, Piece};
use super::request::Format;
use super::tools;

fn call(id: &str, name: &str, input: &Map<String, Value>) -> Value {
    json!({"id": id, "type": "function",
           "function": {"name": name, "arguments": Value::Object(input.clone()).to_string()}})
}

fn tool_msg(id: &str, content: &str, is_error: bool) -> Value {
    let content = if is_error {
        format!("Error: {content}")
    } else {
        content.to_owned()
    };
    json!({"role": "tool", "tool_call_id": id, "content": content})
}

pub fn render(input: &Input) -> Value {
    let mut msgs = Vec::new();
    if let Some(f) = &input.framing {
        msgs.push(json!({"role": "system", "content": f.text}));
    }
    msgs.push(json!({"role": "user", "content": input.goal.text}));
    for piece in input.pieces() {
        match piece {
            Piece::Call(e, i) => {
                let c = &e.calls[i];
                let calls = vec![call(&c.id, &input.read_tool.name, &c.input)];
                msgs.push(json!({"role": "assistant", "content": null, "tool_calls": calls}));
                msgs.push(tool_msg(&c.id, &c.result, c.is_error));
            }
            Piece::Command(c) => msgs.push(json!({"role": "user", "content": c.text})),
        }
    }
    if let Some(s) = &input.state {
        msgs.push(json!({"role": "user", "content": s.text}));
    }
    if let Some(s) = &input.step {
        msgs.push(json!({"role": "assistant", "content": s.assistant_text,
                         "tool_calls": [call(&s.id, &s.name, &s.input)]}));
        msgs.push(tool_msg(&s.id, &s.result, s.is_error));
    }
    let defs = input.tools();
    json!({"messages": msgs, "tools": tools::render(&defs, Format::OpenaiChat)})
}
