//! What a call of the main conversation cost, against what its history would have: counted
//! after the call has gone upstream (tokenizing a long history takes longer than the rest of the
//! proxy's work on a call), then logged and reported to the mount (`proxy.record`), where
//! `worldfs status` shows the totals.

use serde_json::{Value, json};

use super::{SOCKET_TIMEOUT, State};
use crate::socket::Client;
use crate::world::tokens::{self, TokenCounter};

/// Messages whose counts are kept: a history resends every earlier message at every call, so
/// each is tokenized once (a long session's history is megabytes).
pub(crate) const MEMO_MESSAGES: usize = 1 << 14;

/// One call of the main conversation, as it came and as it went (or would have gone).
pub(crate) struct Call {
    pub path: String,
    /// The proxy's one-line account of the splice.
    pub summary: String,
    pub original: Value,
    pub sent: Value,
    /// Sent with the projection; `false` under `--observe`.
    pub rewritten: bool,
}

/// Keys whose string values are not text the model reads as content (ids, markers, signatures).
const NOT_TEXT: &[&str] = &[
    "type",
    "id",
    "tool_use_id",
    "call_id",
    "role",
    "signature",
    "encrypted_content",
    "status",
    "cache_control",
];

/// The text of `messages` the model reads: every string in them but ids and markers, with tool
/// inputs as their JSON. Both sides of a call are measured the same way.
fn text_of(messages: Option<&Value>, out: &mut String) {
    match messages {
        Some(Value::String(s)) => {
            out.push_str(s);
            out.push('\n');
        }
        Some(Value::Array(a)) => a.iter().for_each(|v| text_of(Some(v), out)),
        Some(Value::Object(o)) => {
            for (k, v) in o {
                if k == "input" {
                    out.push_str(&v.to_string());
                    out.push('\n');
                } else if !NOT_TEXT.contains(&k.as_str()) {
                    text_of(Some(v), out);
                }
            }
        }
        _ => {}
    }
}

/// Tokens (o200k_base) of the text of a body's `messages` (a Responses API body's `input`),
/// message by message.
pub(crate) fn message_tokens(memo: &TokenCounter, body: &Value) -> u64 {
    let messages = body.get("messages").or_else(|| body.get("input"));
    let Some(messages) = messages.and_then(Value::as_array) else {
        return 0;
    };
    let mut total = 0u64;
    let mut text = String::new();
    for m in messages {
        text.clear();
        text_of(Some(m), &mut text);
        let bytes = text.as_bytes();
        // A rough count if the tokenizer is unavailable: these are statistics.
        let n = memo
            .count(&tokens::hash(bytes), bytes)
            .map_or_else(|_| (bytes.len() as u64).div_ceil(4), u64::from);
        total = total.saturating_add(n);
    }
    total
}

/// Counts the call, logs it, and reports it to the mount. Never fails: it is bookkeeping.
pub(crate) fn record(state: &State, call: &Call) {
    let history = message_tokens(&state.memo, &call.original);
    let sent = message_tokens(&state.memo, &call.sent);
    let tokens = format!("messages of {sent} tokens instead of {history}");
    if call.rewritten {
        tracing::info!("{}: {tokens}", call.path);
    } else {
        // What --observe is for: printed whatever the log level.
        crate::say!(
            "worldfs proxy: {}: would send {}, {tokens} (--observe: sent as it came)",
            call.path,
            call.summary
        );
    }
    let reported = Client::connect(&state.socket, SOCKET_TIMEOUT).and_then(|mut c| {
        c.call(
            "proxy.record",
            json!({"history_tokens": history, "sent_tokens": sent, "rewritten": call.rewritten}),
        )
    });
    if let Err(e) = reported {
        tracing::debug!(
            "{}: not reported to the mount: {:#}",
            call.path,
            anyhow::Error::from(e)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_markers_are_not_text() {
        let body = json!({"messages": [
            {"role": "user", "content": [{"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}]},
            {"role": "assistant", "content": [
                {"type": "thinking", "thinking": "hm", "signature": "c2lnbmF0dXJlc2lnbmF0dXJl"},
                {"type": "tool_use", "id": "toolu_0123456789", "name": "Read", "input": {"file_path": "/a"}}
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_0123456789", "content": "1\tx"}]}
        ]});
        let mut t = String::new();
        text_of(body.get("messages"), &mut t);
        for kept in ["hello", "hm", "Read", "{\"file_path\":\"/a\"}", "1\tx"] {
            assert!(t.contains(kept), "{kept} in {t:?}");
        }
        for dropped in ["toolu_", "c2lnbm", "ephemeral", "assistant", "tool_result"] {
            assert!(!t.contains(dropped), "{dropped} in {t:?}");
        }
        let memo = TokenCounter::new(4);
        let once = message_tokens(&memo, &body);
        assert!(once > 0);
        assert_eq!(message_tokens(&memo, &body), once, "the same from the memo");
    }
}
