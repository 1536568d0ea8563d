//! The warnings `worldfs run` gives when the agent would miss the mount's hook or the proxy.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::agent::{agent, homes};
use crate::claude_hook::install::{Agent, registered_for};

/// A warning when `program` is Claude Code or Codex and none of its settings for `dir` (nor
/// the user's) register `worldfs hook`: only the hook tells the mount the session's goal and
/// its steps. Another agent's hooks do not count. Given when the agent was not given the hooks
/// on its command line (`--no-hooks`, or settings or hooks of its own in `args`).
pub(super) fn unhooked_agent(program: &Path, args: &[OsString], dir: &Path) -> Option<String> {
    let whose = agent(program)?;
    let (agent, codex) = match whose {
        Agent::ClaudeCode => ("Claude Code", ""),
        Agent::Codex => ("Codex", " --codex"),
    };
    let (home, codex_home) = homes();
    let dirs = [dir.to_owned()];
    if registered_for(whose, &dirs, home.as_deref(), codex_home.as_deref()) {
        return None;
    }
    let why = match whose {
        Agent::ClaudeCode if super::hooks::settings_given(args) => {
            " (its own --settings stands in for the hooks worldfs gives it otherwise)"
        }
        Agent::Codex if super::hooks::codex_hooks_given(args) => {
            " (its own -c hooks.… stand in for the hooks worldfs gives it otherwise)"
        }
        _ => "",
    };
    Some(format!(
        "worldfs: warning: no settings of {} register `worldfs hook`{why}, so the mount records \
         {agent}'s reads and writes but not its goal nor its steps; `worldfs hook \
         --install{codex} -C {}` registers it, once",
        dir.display(),
        dir.display()
    ))
}

/// Warnings for hook files of `program`'s agent, for `dir` or the user's, that run `worldfs
/// hook` but not on every event this version needs (installed by an older one).
pub(super) fn outdated_hooks(program: &Path, dir: &Path) -> Vec<String> {
    let Some(whose) = agent(program) else {
        return Vec::new();
    };
    let (home, codex_home) = homes();
    crate::claude_hook::install::outdated(&[dir.to_owned()], home.as_deref(), codex_home.as_deref())
        .into_iter()
        .filter(|(_, a, _)| *a == whose)
        .map(|(file, a, missing)| crate::claude_hook::install::outdated_warning(&file, a, &missing))
        .collect()
}

/// A warning when `program` is Claude Code and one of its settings files sets
/// `ANTHROPIC_BASE_URL`: Claude Code applies a setting's `env` over the environment it was
/// started with (2.1.332: its call went to that address, none through the proxy).
pub(super) fn claude_past_the_proxy(program: &Path, dir: &Path) -> Option<String> {
    if agent(program)? != Agent::ClaudeCode {
        return None;
    }
    let (file, base) = claude_base_url_setting(dir)?;
    Some(format!(
        "worldfs: warning: {} sets ANTHROPIC_BASE_URL ({base}) for Claude Code, over the proxy's \
         address in its environment: its calls will not go through the proxy (to put the proxy \
         in front of it, take it out there and give --upstream {base})",
        file.display()
    ))
}

/// The first of Claude Code's settings files, in the order it ranks them, whose `env` sets
/// `ANTHROPIC_BASE_URL`, and that value.
fn claude_base_url_setting(dir: &Path) -> Option<(PathBuf, String)> {
    let user = std::env::var_os("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude")));
    let mut files = vec![
        PathBuf::from("/etc/claude-code/managed-settings.json"),
        crate::claude_hook::install::default_settings(dir),
        dir.join(".claude").join("settings.json"),
    ];
    files.extend(user.map(|u| u.join("settings.json")));
    files.into_iter().find_map(|f| {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&f).ok()?).ok()?;
        let base = v.pointer("/env/ANTHROPIC_BASE_URL")?.as_str()?.to_owned();
        Some((f, base))
    })
}

/// A warning when Codex's model provider is one of the user's own (`name`, set where `from`
/// says) and the proxy is on a free port: its calls go to that provider's own address, which
/// worldfs does not set, and the proxy sees none.
pub(super) fn codex_own_provider(name: &str, from: &str, url: &str) -> String {
    format!(
        "worldfs: warning: Codex's model provider is `{name}` ({from}), whose address worldfs \
         does not set: its calls will not reach the proxy at {url}; give --listen the address \
         its base_url names, or run Codex's own `openai` provider (README, \"With Codex\")"
    )
}
