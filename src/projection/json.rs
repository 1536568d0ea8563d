//! The `json` format: the raw entries and harness state, for harnesses that build their own
//! prompt. Content is the current text without a line-number gutter; line numbers are fields.

use serde_json::{Value, json};

use super::ids;
use super::parts::{EntryPart, Input, Shown};

fn entry(e: &EntryPart) -> Value {
    let mut v = json!({
        "path": e.path.to_string_lossy(),
        "display_path": e.display,
        "kind": e.kind,
        "state": e.shown,
        "pinned": e.pinned,
        "agent_wrote": e.agent_wrote,
        "last_change_seq": e.order_seq,
        "last_change_turn": e.order_turn,
    });
    if let Value::Object(m) = &mut v {
        match e.shown {
            Shown::Content => {
                m.insert("hash".into(), json!(e.hash.as_ref().map(ids::hash_hex)));
                m.insert("whole".into(), json!(e.whole));
                if e.notebook {
                    // The segments hold its cells, not its JSON: the hash is of the JSON.
                    m.insert("notebook".into(), json!(true));
                }
                m.insert("total_lines".into(), json!(e.total_lines));
                m.insert("segments".into(), json!(e.segments));
            }
            Shown::Deleted | Shown::Withheld => {
                let notice = e.calls.first().map(|c| c.result.clone());
                m.insert("notice".into(), json!(notice));
            }
        }
    }
    v
}

pub fn render(input: &Input) -> Value {
    let goal = input.goal.is_goal.then(|| input.goal.text.clone());
    let commands: Vec<Value> = input
        .commands
        .iter()
        .map(|c| {
            json!({"command": c.command, "cwd": c.cwd, "exit_code": c.exit_code,
                   "output": c.output, "seq": c.seq})
        })
        .collect();
    let step = input.step.as_ref().map(|s| {
        json!({"tool_use_id": s.id, "tool_name": s.name, "input": s.input,
               "result": s.result, "is_error": s.is_error, "assistant_text": s.assistant_text})
    });
    json!({
        "turn": input.turn,
        "goal": goal,
        "framing": input.framing.as_ref().and(input.framing_fields.as_ref()),
        "state": input.state.as_ref().and(input.state_fields.as_ref()),
        "entries": input.entries.iter().map(entry).collect::<Vec<_>>(),
        "commands": commands,
        "last_step": step,
    })
}
