//! What `worldfs run --proxy` says of the session when the command has ended: what its model
//! calls were sent against the history the agent sent. The same numbers as `worldfs status`'s
//! `proxy:` line, whose mount is gone by then.

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::socket::Client;

/// The line, from the mount's `stats`: none when the mount does not answer or took no call.
pub(super) fn summary(socket: &Path) -> Option<String> {
    let stats = Client::connect(socket, Duration::from_secs(5))
        .and_then(|mut c| c.call("stats", json!({})))
        .ok()?;
    line(&stats)
}

fn line(stats: &Value) -> Option<String> {
    let n = |ptr: &str| stats.pointer(ptr).and_then(Value::as_u64).unwrap_or(0);
    let calls = n("/proxy/calls");
    if calls == 0 {
        return None;
    }
    let (history, sent) = (
        n("/proxy/history_tokens_total"),
        n("/proxy/sent_tokens_total"),
    );
    let share = if history > 0 {
        format!(" ({:.1}%)", sent as f64 * 100.0 / history as f64)
    } else {
        String::new()
    };
    Some(format!(
        "worldfs: {calls} model call{} of the session through the proxy, {} with the \
         projection: their messages {sent} tokens as sent, against {history} as the agent sent \
         them{share}",
        if calls == 1 { "" } else { "s" },
        n("/proxy/rewritten"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn said_after_calls_only() {
        let mut stats = json!({"proxy": {"calls": 0, "rewritten": 0,
                                          "history_tokens_total": 0, "sent_tokens_total": 0}});
        assert_eq!(line(&stats), None);
        stats["proxy"] = json!({"calls": 3, "rewritten": 2, "history_tokens_total": 30000,
                                "sent_tokens_total": 9000});
        assert_eq!(
            line(&stats).as_deref(),
            Some(
                "worldfs: 3 model calls of the session through the proxy, 2 with the \
                 projection: their messages 9000 tokens as sent, against 30000 as the agent \
                 sent them (30.0%)"
            )
        );
    }
}
