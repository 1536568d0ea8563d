//! Which Claude Code (or Codex) session a call belongs to, so the proxy asks the mount for that session's
//! goal and projection when two sessions share one mount.
//!
//! Claude Code names its session in every call: since 2.1.86 in the `x-claude-code-session-id`
//! header, and before that (and still) in the body's `metadata.user_id`, as JSON
//! (`{"device_id": ..., "account_uuid": ..., "session_id": ...}`, 2.1.78 and later) or as
//! `user_<hash>_account_<uuid>_session_<uuid>`. It is the `session_id` its hooks carry, which
//! is how `worldfs hook` keys each session's goal.

use serde_json::Value;

use crate::world::conversations::MAX_SESSION_BYTES;

/// The header Claude Code names its session in.
pub const HEADER: &str = "x-claude-code-session-id";

/// The header Codex names its session (its hooks' `session_id`) in.
pub const CODEX_HEADER: &str = "session-id";

/// The session a Codex call names: the header's value, else the body's
/// `client_metadata.session_id`, else its `prompt_cache_key` (Codex keys its cache by session).
pub fn of_codex_call(header: Option<&[u8]>, body: &Value) -> Option<String> {
    header
        .and_then(|h| std::str::from_utf8(h).ok())
        .and_then(usable)
        .or_else(|| {
            ["/client_metadata/session_id", "/prompt_cache_key"]
                .iter()
                .find_map(|p| body.pointer(p).and_then(Value::as_str).and_then(usable))
        })
}

/// The session a call names: the header's value, else the one in `metadata.user_id`.
pub fn of_call(header: Option<&[u8]>, body: &Value) -> Option<String> {
    header
        .and_then(|h| std::str::from_utf8(h).ok())
        .and_then(usable)
        .or_else(|| from_metadata(body))
}

fn from_metadata(body: &Value) -> Option<String> {
    let user = body.pointer("/metadata/user_id")?.as_str()?;
    if user.starts_with('{') {
        let v: Value = serde_json::from_str(user).ok()?;
        return v.get("session_id")?.as_str().and_then(usable);
    }
    user.rsplit_once("_session_").and_then(|(_, s)| usable(s))
}

/// A session id the mount takes: not empty, not too long, printable.
fn usable(s: &str) -> Option<String> {
    let s = s.trim();
    let ok =
        !s.is_empty() && s.len() <= MAX_SESSION_BYTES && s.chars().all(|c| c.is_ascii_graphic());
    ok.then(|| s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const ID: &str = "0d6f1c2e-7b5a-4c1e-9a0b-3f2d5e6a7b8c";

    #[test]
    fn the_header_names_the_session_first() {
        let body = json!({"metadata": {"user_id": "user_ab_account__session_other"}});
        assert_eq!(of_call(Some(ID.as_bytes()), &body).as_deref(), Some(ID));
    }

    #[test]
    fn without_the_header_the_metadata_names_it_in_either_form() {
        let json_form = json!({"device_id": "d", "account_uuid": "", "session_id": ID});
        let body = json!({"metadata": {"user_id": json_form.to_string()}});
        assert_eq!(of_call(None, &body).as_deref(), Some(ID));
        let legacy = format!("user_3f9a_account_1b2c-aa_session_{ID}");
        let body = json!({"metadata": {"user_id": legacy}});
        assert_eq!(of_call(None, &body).as_deref(), Some(ID));
        // An empty or unusable header is no header.
        assert_eq!(of_call(Some(b" "), &body).as_deref(), Some(ID));
        assert_eq!(of_call(Some(&[0xff, 0xfe]), &body).as_deref(), Some(ID));
    }

    #[test]
    fn a_codex_call_names_its_session_in_a_header_or_its_body() {
        let body =
            json!({"client_metadata": {"session_id": "from-metadata"}, "prompt_cache_key": "key"});
        assert_eq!(
            of_codex_call(Some(ID.as_bytes()), &body).as_deref(),
            Some(ID)
        );
        assert_eq!(of_codex_call(None, &body).as_deref(), Some("from-metadata"));
        let body = json!({"prompt_cache_key": "key"});
        assert_eq!(of_codex_call(Some(b" "), &body).as_deref(), Some("key"));
        assert_eq!(of_codex_call(None, &json!({})), None);
    }

    #[test]
    fn a_call_that_names_no_session_has_none() {
        for body in [
            json!({}),
            json!({"metadata": {}}),
            json!({"metadata": {"user_id": "someone"}}),
            json!({"metadata": {"user_id": "{\"session_id\": 5}"}}),
            json!({"metadata": {"user_id": "{not json"}}),
            json!({"metadata": {"user_id": format!("u_session_{}", "x".repeat(300))}}),
        ] {
            assert_eq!(of_call(None, &body), None, "{body}");
        }
    }
}
