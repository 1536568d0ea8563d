//! The trust Codex asks of a hook before it runs it (vendor-docs/codex.md, "Hooks"): a key
//! naming where the hook is (`FILE:event_snake_case:GROUP:HANDLER`) and a hash of what it is,
//! kept in the user's config.toml (`[hooks.state."KEY"] trusted_hash`) once the user trusted it
//! on Codex's screen, or given for one run with `-c hooks.state={…}`.

use std::path::Path;

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The hash Codex trusts a command hook by: `sha256:` and the hex SHA-256 of its identity as
/// compact JSON with its keys in order: the event's snake-case name, its one handler, and its
/// matcher if it has one. Checked against the `currentHash` Codex 0.171.0's app-server lists
/// (`hooks/list`; the tests below), for hooks from a file and from `-c`.
pub fn hash(label: &str, command: &str, timeout: u64, matcher: Option<&str>) -> String {
    let json = |s: &str| Value::String(s.to_owned()).to_string();
    let handler = format!(
        "{{\"async\":false,\"command\":{},\"timeout\":{timeout},\"type\":\"command\"}}",
        json(command)
    );
    let matcher = matcher.map_or_else(String::new, |m| format!(",\"matcher\":{}", json(m)));
    let identity = format!(
        "{{\"event_name\":{},\"hooks\":[{handler}]{matcher}}}",
        json(label)
    );
    let digest = Sha256::digest(identity.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// `PreToolUse` → `pre_tool_use`, as Codex names events in its hooks' keys.
pub fn snake_case(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// Codex's default timeout, for a hook that gives none.
const DEFAULT_TIMEOUT: u64 = 600;

/// The key and hash of each command hook in the hooks file `file` (its JSON, `hooks`) whose
/// command passes `wanted`.
pub fn keys_in_file(
    file: &Path,
    hooks: &Value,
    wanted: impl Fn(&str) -> bool,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(events) = hooks.get("hooks").and_then(Value::as_object) else {
        return out;
    };
    for (event, groups) in events {
        let label = snake_case(event);
        for (g, group) in groups.as_array().into_iter().flatten().enumerate() {
            let matcher = group.get("matcher").and_then(Value::as_str);
            let handlers = group.get("hooks").and_then(Value::as_array);
            for (h, handler) in handlers.into_iter().flatten().enumerate() {
                let Some(command) = handler.get("command").and_then(Value::as_str) else {
                    continue;
                };
                if !wanted(command) {
                    continue;
                }
                let timeout = handler
                    .get("timeout")
                    .and_then(Value::as_u64)
                    .unwrap_or(DEFAULT_TIMEOUT);
                out.push((
                    format!("{}:{label}:{g}:{h}", file.display()),
                    hash(&label, command, timeout, matcher),
                ));
            }
        }
    }
    out
}

/// Whether the user's Codex config trusts each of `keys` with its hash.
pub fn all_trusted(config: &toml::Table, keys: &[(String, String)]) -> bool {
    let state = config.get("hooks").and_then(|h| h.get("state"));
    keys.iter().all(|(key, hash)| {
        state
            .and_then(|s| s.get(key))
            .and_then(|k| k.get("trusted_hash"))
            .and_then(toml::Value::as_str)
            == Some(hash.as_str())
    })
}

/// Whether the user's Codex config trusts the project `dir` (or a directory above it: a
/// repository's root), whose hooks files Codex loads only then.
pub fn project_trusted(config: &toml::Table, dir: &Path) -> bool {
    let projects = config.get("projects").and_then(toml::Value::as_table);
    dir.ancestors().any(|a| {
        projects
            .and_then(|p| p.get(a.to_string_lossy().as_ref()))
            .and_then(|p| p.get("trust_level"))
            .and_then(toml::Value::as_str)
            == Some("trusted")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hashes Codex 0.171.0's `codex app-server` listed (`hooks/list`, `currentHash`): for
    /// hooks given with `-c`, and for one in a hooks file.
    #[test]
    fn hashes_are_codexs() {
        let ours = "/usr/local/bin/worldfs hook";
        assert_eq!(
            hash("session_start", ours, 5, None),
            "sha256:9dfeb2fcb4ddfac31ba7236d1d432d392f89aca597cf17bc032bb5db3885932c"
        );
        assert_eq!(
            hash("pre_tool_use", ours, 5, Some("Bash")),
            "sha256:25a7e088ea92c5a532a826fd9cc55e9ea0d6bfa2f78a73f3b58b5a1c147449bb"
        );
        assert_eq!(
            hash("post_tool_use", ours, 5, Some("*")),
            "sha256:f1b8d45c710782739ac701a48cb2a227f8fa344057d4c19509f61141ffbd8e55"
        );
        // Its default timeout, 600 s, on hooks given without one.
        assert_eq!(
            hash("stop", "/x/ht hook codex", 600, None),
            "sha256:18d58b48f8dadaaf0bdc0383269f6a7002e519a836c06baa95ef864bf553da2b"
        );
        let file = serde_json::json!({"hooks": {"Stop": [{"hooks": [
            {"type": "command", "command": "/bin/true"}]}]}});
        assert_eq!(
            keys_in_file(Path::new("/c/hooks.json"), &file, |_| true),
            [(
                "/c/hooks.json:stop:0:0".to_owned(),
                "sha256:fef68b1a8a8090019e0421bcd64cfac1f7b7c21980e2f35d49b46427395a6dda"
                    .to_owned()
            )]
        );
    }

    #[test]
    fn trusted_only_with_each_key_and_its_hash() {
        let file = serde_json::json!({"hooks": {
            "Stop": [{"hooks": [{"type": "command", "command": "worldfs hook", "timeout": 5}]}],
            "PreToolUse": [{"matcher": "Bash", "hooks": [
                {"type": "command", "command": "other"},
                {"type": "command", "command": "worldfs hook", "timeout": 5}]}]
        }});
        let keys = keys_in_file(Path::new("/p/.codex/hooks.json"), &file, |c| {
            c == "worldfs hook"
        });
        assert_eq!(keys.len(), 2);
        assert!(
            keys.iter()
                .any(|(k, _)| k == "/p/.codex/hooks.json:pre_tool_use:0:1")
        );
        let config: String = keys
            .iter()
            .map(|(k, h)| format!("[hooks.state.\"{k}\"]\ntrusted_hash = \"{h}\"\n"))
            .collect();
        let table = |text: &str| text.parse::<toml::Table>().unwrap();
        assert!(all_trusted(&table(&config), &keys));
        assert!(!all_trusted(
            &table(&config.replacen("sha256:", "sha256:0", 1)),
            &keys
        ));
        assert!(!all_trusted(&table("model = \"o3\"\n"), &keys));
        assert!(all_trusted(&table(""), &[]));
        let projects = table("[projects.\"/r\"]\ntrust_level = \"trusted\"\n");
        assert!(project_trusted(&projects, Path::new("/r/sub")));
        assert!(!project_trusted(&projects, Path::new("/q")));
    }

    #[test]
    fn event_names_in_snake_case() {
        assert_eq!(snake_case("UserPromptSubmit"), "user_prompt_submit");
        assert_eq!(snake_case("Stop"), "stop");
    }
}
