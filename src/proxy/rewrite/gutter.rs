//! The line-number gutter of the projection's reads, as Claude Code's own.
//!
//! Claude Code changed its Read output between versions, and its Edit tool strips the gutter by
//! its separator: a read of the projection's in another one would leave its line numbers in the
//! agent's edits. The request says which one the client uses, in its own Read results.

use std::collections::HashSet;

use serde_json::Value;

use super::READ_TOOL;
use super::content::result_text;
use crate::projection::LineNumbers;

/// The line-number gutter Claude Code's own Read results use in this request, so the
/// projection's reads match what its Edit tool strips. `None` when the request holds no Read
/// result yet.
pub fn read_gutter(body: &Value) -> Option<LineNumbers> {
    let messages = body.get("messages")?.as_array()?;
    let read_ids: HashSet<&str> = messages
        .iter()
        .filter_map(|m| m.get("content")?.as_array())
        .flatten()
        .filter(|b| {
            b.get("type").and_then(Value::as_str) == Some("tool_use")
                && b.get("name").and_then(Value::as_str) == Some(READ_TOOL)
        })
        .filter_map(|b| b.get("id").and_then(Value::as_str))
        .collect();
    messages
        .iter()
        .rev()
        .filter_map(|m| m.get("content")?.as_array())
        .flatten()
        .filter(|b| {
            b.get("tool_use_id")
                .and_then(Value::as_str)
                .is_some_and(|id| read_ids.contains(id))
        })
        .find_map(|b| LineNumbers::of_read_result(&result_text(b.get("content"))))
}

#[cfg(test)]
mod tests {
    use super::super::tests::request;
    use super::*;
    use serde_json::json;

    #[test]
    fn the_gutter_follows_claude_codes_own_reads() {
        let mut body = request(2);
        assert_eq!(read_gutter(&body), None, "no Read yet");
        let m = body["messages"].as_array_mut().expect("messages");
        m.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": "r1", "name": "Read", "input": {"file_path": "/p/a.py"}}]}));
        m.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "r1", "content": "     1\u{2192}import os\n     2\u{2192}"}]}));
        assert_eq!(read_gutter(&body), Some(LineNumbers::Arrow));
        let m = body["messages"].as_array_mut().expect("messages");
        m.push(json!({"role": "assistant", "content": [{"type": "tool_use", "id": "r2", "name": "Read", "input": {"file_path": "/p/b.py"}}]}));
        m.push(json!({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "r2", "content": [{"type": "text", "text": "12\tx = 1"}]}]}));
        assert_eq!(
            read_gutter(&body),
            Some(LineNumbers::Tab),
            "the newest Read decides"
        );
        assert_eq!(
            LineNumbers::of_read_result("a.py"),
            None,
            "a Bash result is no Read"
        );
        assert_eq!(LineNumbers::of_read_result("  12\tx"), None);
        assert_eq!(LineNumbers::of_read_result("Error: 12"), None);
    }
}
