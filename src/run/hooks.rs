//! The agent given `worldfs hook` for one run, on its command line, when none of its settings
//! files register it: the one-command set-up then needs no `worldfs hook --install` first.
//! Nothing is written to the project or the user's files, and only a `claude` or `codex`
//! started as COMMAND itself is given them (a shell's or a script's is out of reach).
//!
//! Claude Code loads `--settings JSON` over its settings files and runs the hooks it names
//! (vendor-docs/claude-code.md, "Hooks"). The option goes before the user's arguments, where
//! Claude Code takes it for its subcommands too (`claude --settings X mcp list`); after a
//! subcommand's name it is refused.
//!
//! Codex reads hooks from `-c hooks.EVENT=[...]` as from a config file of its own
//! (`/<session-flags>/config.toml`), and runs them only once trusted: a hook's trust is the
//! SHA-256 of its identity, which `-c hooks.state=...` can give for the one run, merged with
//! the user's trusted hooks (vendor-docs/codex.md, "Hooks"). worldfs gives the trust of its
//! own hooks, which the user asked for by running it: Codex would otherwise skip them
//! without a word in `codex exec`, or ask on its start screen.

use std::ffi::OsString;
use std::path::Path;

use anyhow::Context;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

use super::agent::{agent, homes};
use crate::claude_hook::install::{self, Agent, TIMEOUT_SECS, registered_for};

/// Whether `args` set Claude Code's flag settings themselves: a second `--settings` is not
/// merged with the first, so the hooks cannot be added without taking the user's away.
pub(super) fn settings_given(args: &[OsString]) -> bool {
    args.iter().any(|a| {
        let a = a.to_string_lossy();
        a == "--settings" || a.starts_with("--settings=")
    })
}

/// Whether `args` give Codex hooks of their own (`-c hooks.…`): ours would take their places
/// in its list, and their trust.
pub(super) fn codex_hooks_given(args: &[OsString]) -> bool {
    args.iter()
        .any(|a| a.to_string_lossy().trim_start().starts_with("hooks."))
}

/// The agent `program` is and the arguments to put before `args` so that it runs
/// `worldfs hook` (as `this`, or `worldfs` when `PATH` finds this program) on the events the
/// mount needs: none for a program that is neither Claude Code nor Codex, when its settings for `dir` or the user's already
/// register it, or when `args` give settings or hooks of their own.
pub(super) fn for_agent(
    program: &Path,
    args: &[OsString],
    dir: &Path,
    this: &Path,
) -> anyhow::Result<Option<(Agent, Vec<OsString>)>> {
    let Some(whose) = agent(program) else {
        return Ok(None);
    };
    let own = match whose {
        Agent::ClaudeCode => settings_given(args),
        Agent::Codex => codex_hooks_given(args),
    };
    let (home, codex_home) = homes();
    if own
        || registered_for(
            whose,
            &[dir.to_owned()],
            home.as_deref(),
            codex_home.as_deref(),
        )
    {
        return Ok(None);
    }
    let command = install::command_for(this, std::env::var_os("PATH").as_deref())
        .context("naming worldfs in the agent's hooks")?;
    let given = match whose {
        Agent::ClaudeCode => {
            let mut settings = Map::new();
            install::add(&mut settings, &command, Agent::ClaudeCode)
                .context("making Claude Code's hooks")?;
            vec![
                "--settings".into(),
                Value::Object(settings).to_string().into(),
            ]
        }
        Agent::Codex => codex_args(&command),
    };
    Ok(Some((whose, given)))
}

/// `-c hooks.EVENT=[…]` for each event `worldfs hook` needs from Codex, and one `-c
/// hooks.state={…}` with the trust of each.
fn codex_args(command: &str) -> Vec<OsString> {
    let mut args = Vec::new();
    let mut trust = Vec::new();
    for &(event, matcher) in Agent::Codex.events() {
        let handler = format!(
            "{{type=\"command\",command={},timeout={TIMEOUT_SECS}}}",
            toml_string(command)
        );
        let group = match matcher {
            Some(m) => format!("{{matcher={},hooks=[{handler}]}}", toml_string(m)),
            None => format!("{{hooks=[{handler}]}}"),
        };
        args.push("-c".into());
        args.push(format!("hooks.{event}=[{group}]").into());
        let label = snake_case(event);
        // Ours are the only hooks of the command line (`codex_hooks_given`): the first group of
        // each event, and its first handler.
        let key = format!("/<session-flags>/config.toml:{label}:0:0");
        let hash = trust_hash(&label, command, TIMEOUT_SECS, matcher);
        trust.push(format!(
            "{}={{trusted_hash={}}}",
            toml_string(&key),
            toml_string(&hash)
        ));
    }
    args.push("-c".into());
    args.push(format!("hooks.state={{{}}}", trust.join(",")).into());
    args
}

/// The trust Codex asks of a command hook: `sha256:` and the hex SHA-256 of its identity as
/// compact JSON with its keys in order: the event's snake-case name, its one handler, and its
/// matcher if it has one. Checked against the `currentHash` Codex 0.171.0's app-server lists
/// (`hooks/list`; the tests below).
fn trust_hash(label: &str, command: &str, timeout: u64, matcher: Option<&str>) -> String {
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
fn snake_case(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() && i > 0 {
            out.push('_');
        }
        out.push(c.to_ascii_lowercase());
    }
    out
}

/// `s` as a TOML basic string, which is how Codex reads a `-c` value.
fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_settings_option_of_the_users_is_seen_in_both_spellings() {
        assert!(settings_given(&args(&["-p", "hi", "--settings", "{}"])));
        assert!(settings_given(&args(&["--settings=s.json"])));
        assert!(!settings_given(&args(&["--setting-sources", "user"])));
        assert!(!settings_given(&args(&["-p", "--settings is a word here"])));
    }

    #[test]
    fn codex_hooks_of_the_users_are_seen() {
        let own = args(&["-c", "hooks.Stop=[{hooks=[]}]", "exec"]);
        assert!(codex_hooks_given(&own));
        assert!(!codex_hooks_given(&args(&["-c", "model=\"o3\"", "exec"])));
    }

    /// The hashes Codex 0.171.0's `codex app-server` listed (`hooks/list`, `currentHash`) for
    /// hooks given with `-c`.
    #[test]
    fn trust_hashes_are_codexs() {
        let ours = "/usr/local/bin/worldfs hook";
        assert_eq!(
            trust_hash("session_start", ours, 5, None),
            "sha256:9dfeb2fcb4ddfac31ba7236d1d432d392f89aca597cf17bc032bb5db3885932c"
        );
        assert_eq!(
            trust_hash("pre_tool_use", ours, 5, Some("Bash")),
            "sha256:25a7e088ea92c5a532a826fd9cc55e9ea0d6bfa2f78a73f3b58b5a1c147449bb"
        );
        assert_eq!(
            trust_hash("post_tool_use", ours, 5, Some("*")),
            "sha256:f1b8d45c710782739ac701a48cb2a227f8fa344057d4c19509f61141ffbd8e55"
        );
        // Its default timeout, 600 s, on a hook given without one.
        assert_eq!(
            trust_hash("stop", "/x/ht hook codex", 600, None),
            "sha256:18d58b48f8dadaaf0bdc0383269f6a7002e519a836c06baa95ef864bf553da2b"
        );
    }

    #[test]
    fn codex_gets_each_event_and_the_trust_of_each() {
        let a: Vec<String> = codex_args("'/opt/my tools/worldfs' hook")
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let events = Agent::Codex.events();
        assert_eq!(a.len(), 2 * (events.len() + 1));
        assert!(a.iter().step_by(2).all(|c| c == "-c"));
        assert_eq!(
            a[5],
            "hooks.PreToolUse=[{matcher=\"Bash\",hooks=[{type=\"command\",\
             command=\"'/opt/my tools/worldfs' hook\",timeout=5}]}]"
        );
        // Each value is TOML that Codex can read: `key=value`, the value a table or an array.
        for v in a.iter().skip(1).step_by(2) {
            let (key, value) = v.split_once('=').unwrap();
            let parsed: toml::Table = format!("v = {value}").parse().unwrap();
            assert!(key.starts_with("hooks."), "{key}");
            assert!(parsed["v"].is_array() || parsed["v"].is_table(), "{v}");
        }
        let state: toml::Table = format!("v = {}", &a[a.len() - 1]["hooks.state=".len()..])
            .parse()
            .unwrap();
        let state = state["v"].as_table().unwrap();
        assert_eq!(state.len(), events.len());
        let key = "/<session-flags>/config.toml:post_tool_use:0:0";
        assert_eq!(
            state[key]["trusted_hash"].as_str().unwrap(),
            trust_hash(
                "post_tool_use",
                "'/opt/my tools/worldfs' hook",
                5,
                Some("*")
            )
        );
    }

    #[test]
    fn event_names_in_snake_case() {
        assert_eq!(snake_case("UserPromptSubmit"), "user_prompt_submit");
        assert_eq!(snake_case("Stop"), "stop");
    }
}
