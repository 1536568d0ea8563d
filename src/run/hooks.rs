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

use super::agent::{agent, homes, toml_string};
use crate::claude_hook::codex_trust;
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

/// Hooks given to the agent on its command line.
pub(super) struct Given {
    pub agent: Agent,
    /// To put before the user's arguments.
    pub args: Vec<OsString>,
    /// Codex's hooks files that register `worldfs hook` but that it would not run (untrusted).
    pub untrusted: Vec<std::path::PathBuf>,
}

/// The agent `program` is and the arguments to put before `args` so that it runs
/// `worldfs hook` (as `this`, or `worldfs` when `PATH` finds this program) on the events the
/// mount needs: none for a program that is neither Claude Code nor Codex, when its settings
/// for `dir` or the user's already register it (for Codex, in a file whose hooks it runs), or
/// when `args` give settings or hooks of their own.
pub(super) fn for_agent(
    program: &Path,
    args: &[OsString],
    dir: &Path,
    this: &Path,
) -> anyhow::Result<Option<Given>> {
    let Some(whose) = agent(program) else {
        return Ok(None);
    };
    let own = match whose {
        Agent::ClaudeCode => settings_given(args),
        Agent::Codex => codex_hooks_given(args),
    };
    let (home, codex_home) = homes();
    let dirs = [dir.to_owned()];
    // Codex skips a hook it does not trust, without a word in `codex exec`: its hooks count
    // when one file of them runs (both would run, were ours given too), or when it is told to
    // run them untrusted.
    let bypass = args.iter().any(|a| a == "--dangerously-bypass-hook-trust");
    let mut untrusted = Vec::new();
    let registered = match whose {
        Agent::ClaudeCode => registered_for(whose, &dirs, home.as_deref(), codex_home.as_deref()),
        Agent::Codex => {
            let files = install::codex_registered(&dirs, home.as_deref(), codex_home.as_deref());
            let runs = files.iter().any(|(_, runs)| *runs) || (bypass && !files.is_empty());
            untrusted = files
                .into_iter()
                .filter(|(_, r)| !r)
                .map(|(f, _)| f)
                .collect();
            runs
        }
    };
    if own || registered {
        return Ok(None);
    }
    let command = install::command_for(this, std::env::var_os("PATH").as_deref())
        .context("naming worldfs in the agent's hooks")?;
    let args = match whose {
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
    Ok(Some(Given {
        agent: whose,
        args,
        untrusted,
    }))
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
        let label = codex_trust::snake_case(event);
        // Ours are the only hooks of the command line (`codex_hooks_given`): the first group of
        // each event, and its first handler.
        let key = format!("/<session-flags>/config.toml:{label}:0:0");
        let hash = codex_trust::hash(&label, command, TIMEOUT_SECS, matcher);
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
            codex_trust::hash(
                "post_tool_use",
                "'/opt/my tools/worldfs' hook",
                5,
                Some("*")
            )
        );
    }
}
