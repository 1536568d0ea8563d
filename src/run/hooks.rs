//! Claude Code given `worldfs hook` for one run, on its command line, when none of its settings
//! files register it: the one-command set-up then needs no `worldfs hook --install` first.
//!
//! Claude Code loads `--settings JSON` over its settings files and runs the hooks it names
//! (vendor-docs/claude-code.md, "Hooks"). The option goes before the user's arguments, where
//! Claude Code takes it for its subcommands too (`claude --settings X mcp list`); after a
//! subcommand's name it is refused. Nothing is written to the project or the user's files.
//! Only `claude` started as COMMAND itself is given them: a shell's or a script's `claude` is
//! out of reach.

use std::ffi::OsString;
use std::path::Path;

use anyhow::Context;
use serde_json::{Map, Value};

use super::warnings::agent;
use crate::claude_hook::install::{self, Agent, registered_for};

/// Whether `args` set Claude Code's flag settings themselves: a second `--settings` is not
/// merged with the first, so the hooks cannot be added without taking the user's away.
pub(super) fn settings_given(args: &[OsString]) -> bool {
    args.iter().any(|a| {
        let a = a.to_string_lossy();
        a == "--settings" || a.starts_with("--settings=")
    })
}

/// The arguments to put before `args` so that `program`, when it is Claude Code, runs
/// `worldfs hook` (as `this`, or `worldfs` when `PATH` finds this program) on the events the
/// mount needs: none when another agent, when its settings for `dir` or the user's already
/// register it, or when `args` give their own `--settings`.
pub(super) fn for_claude(
    program: &Path,
    args: &[OsString],
    dir: &Path,
    this: &Path,
) -> anyhow::Result<Option<[OsString; 2]>> {
    if agent(program) != Some(Agent::ClaudeCode) || settings_given(args) {
        return Ok(None);
    }
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let codex_home = std::env::var_os("CODEX_HOME").map(std::path::PathBuf::from);
    if registered_for(
        Agent::ClaudeCode,
        &[dir.to_owned()],
        home.as_deref(),
        codex_home.as_deref(),
    ) {
        return Ok(None);
    }
    let command = install::command_for(this, std::env::var_os("PATH").as_deref())
        .context("naming worldfs in Claude Code's hooks")?;
    let mut settings = Map::new();
    install::add(&mut settings, &command, Agent::ClaudeCode)
        .context("making Claude Code's hooks")?;
    Ok(Some([
        "--settings".into(),
        Value::Object(settings).to_string().into(),
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_settings_option_of_the_users_is_seen_in_both_spellings() {
        let args = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        assert!(settings_given(&args(&["-p", "hi", "--settings", "{}"])));
        assert!(settings_given(&args(&["--settings=s.json"])));
        assert!(!settings_given(&args(&["--setting-sources", "user"])));
        assert!(!settings_given(&args(&["-p", "--settings is a word here"])));
    }
}
