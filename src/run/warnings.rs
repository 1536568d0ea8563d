//! The warnings `worldfs run` gives when the agent would miss the mount's hook or the proxy.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::ProxyOptions;
use crate::claude_hook::install::{Agent, registered_for};

/// Which agent `program` is, by its name.
pub(super) fn agent(program: &Path) -> Option<Agent> {
    match program.file_name()?.to_str()? {
        "claude" => Some(Agent::ClaudeCode),
        "codex" => Some(Agent::Codex),
        _ => None,
    }
}

/// A warning when `program` is Claude Code or Codex and none of its settings for `dir` (nor
/// the user's) register `worldfs hook`: only the hook tells the mount the session's goal and
/// its steps. Another agent's hooks do not count. For Claude Code, given when it was not given
/// the hooks on its command line (`--no-hooks`, or a `--settings` of `args`).
pub(super) fn unhooked_agent(program: &Path, args: &[OsString], dir: &Path) -> Option<String> {
    let whose = agent(program)?;
    let (agent, codex) = match whose {
        Agent::ClaudeCode => ("Claude Code", ""),
        Agent::Codex => ("Codex", " --codex"),
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let codex_home = std::env::var_os("CODEX_HOME").map(PathBuf::from);
    let dirs = [dir.to_owned()];
    if registered_for(whose, &dirs, home.as_deref(), codex_home.as_deref()) {
        return None;
    }
    let why = if whose == Agent::ClaudeCode && super::hooks::settings_given(args) {
        " (its own --settings stands in for the hooks worldfs gives it otherwise)"
    } else {
        ""
    };
    Some(format!(
        "worldfs: warning: no settings of {} register `worldfs hook`{why}, so the mount records \
         {agent}'s reads and writes but not its goal nor its steps; `worldfs hook \
         --install{codex} -C {}` registers it, once",
        dir.display(),
        dir.display()
    ))
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

/// A warning when `program` is Codex, which takes its provider's address from config.toml or
/// `-c` only, started so that nothing points it at the proxy: no `-c` naming an address or a
/// provider, and the proxy on a free port (with `--listen`, the address is taken to be the one
/// config.toml names). Its calls would go to its provider directly, and the proxy see none.
pub(super) fn codex_unpointed(
    program: &Path,
    args: &[OsString],
    proxy: &ProxyOptions,
    url: &str,
) -> Option<String> {
    if agent(program)? != Agent::Codex || proxy.listen.port() != 0 {
        return None;
    }
    let named = args.iter().any(|a| {
        let a = a.to_string_lossy();
        a.contains("base_url") || a.contains("model_provider")
    });
    (!named).then(|| {
        format!(
            "worldfs: warning: Codex takes its provider's address from config.toml or -c, not from \
             the environment, so as started its calls will not reach the proxy at {url}; run \
             `sh -c 'exec codex -c \"openai_base_url=\\\"$WORLDFS_PROXY_URL/v1\\\"\"'` as the \
             command, or give --listen the address config.toml names (README, \"With Codex\")"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codex_is_warned_of_only_when_nothing_points_it_at_the_proxy() {
        let free = ProxyOptions {
            upstream: "https://api.openai.com".into(),
            listen: "127.0.0.1:0".parse().unwrap(),
        };
        let fixed = ProxyOptions {
            listen: "127.0.0.1:8788".parse().unwrap(),
            ..free.clone()
        };
        let url = "http://127.0.0.1:41234";
        let args = |a: &[&str]| a.iter().map(OsString::from).collect::<Vec<_>>();
        let codex = Path::new("/usr/local/bin/codex");
        let w = codex_unpointed(codex, &args(&["exec", "fix it"]), &free, url);
        assert!(w.is_some_and(|w| w.contains(url) && w.contains("WORLDFS_PROXY_URL")));
        let given = args(&["-c", "openai_base_url=\"http://127.0.0.1:41234/v1\""]);
        assert_eq!(codex_unpointed(codex, &given, &free, url), None);
        let provider = args(&["-c", "model_provider=worldfs"]);
        assert_eq!(codex_unpointed(codex, &provider, &free, url), None);
        assert_eq!(codex_unpointed(codex, &[], &fixed, url), None, "--listen");
        assert_eq!(codex_unpointed(Path::new("claude"), &[], &free, url), None);
    }
}
