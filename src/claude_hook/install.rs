//! `worldfs hook --install` / `--uninstall`: registers `worldfs hook` in a Claude Code settings
//! file (or, with `--codex`, a Codex `hooks.json`: the same shape), so a user need not paste
//! the JSON of the README by hand.
//!
//! The file keeps everything else it holds: other hooks, permissions, any key. Our entries are
//! the hook commands that run `worldfs hook` (by any path); installing removes them first and
//! adds the current set, so installing twice gives the same file, and an install made by an
//! older version is brought up to date. A file that is not a JSON object is refused, never
//! overwritten. The new file replaces the old one by a rename, so a crash leaves one or the
//! other.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

/// The agent whose hooks are installed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Agent {
    ClaudeCode,
    /// Codex reads hooks of Claude Code's shape from `hooks.json` (vendor-docs/codex.md).
    Codex,
}

impl Agent {
    /// The events `worldfs hook` needs, with the tools each is for (README, "With Claude
    /// Code", "With Codex").
    pub fn events(self) -> &'static [(&'static str, Option<&'static str>)] {
        match self {
            Agent::ClaudeCode => &EVENTS,
            // Codex has no failure event (a failed command's PostToolUse says it), and its
            // only tool with a PreToolUse is its shell, `Bash`. `Stop` ends a turn whose last
            // call was an `apply_patch`, which no event of its own ends.
            Agent::Codex => &[
                ("SessionStart", None),
                ("UserPromptSubmit", None),
                ("PreToolUse", Some("Bash")),
                ("PostToolUse", Some("*")),
                ("Stop", None),
            ],
        }
    }

    /// The file a project's hooks go in when none is named: Claude Code's per-user file of a
    /// project (`DIR/.claude/settings.local.json`, not meant for version control), or Codex's
    /// `DIR/.codex/hooks.json`.
    pub fn default_settings(self, dir: &Path) -> PathBuf {
        match self {
            Agent::ClaudeCode => default_settings(dir),
            Agent::Codex => dir.join(".codex").join("hooks.json"),
        }
    }
}

/// The events `worldfs hook` needs from Claude Code, with the tools each is for (README, "With
/// Claude Code").
pub const EVENTS: [(&str, Option<&str>); 5] = [
    ("SessionStart", None),
    ("UserPromptSubmit", None),
    ("PreToolUse", Some("Bash|Grep|Glob")),
    ("PostToolUse", Some("*")),
    ("PostToolUseFailure", Some("*")),
];

/// Seconds Claude Code waits for the hook (it answers in milliseconds, and gives up by itself
/// after 3 s of a daemon that does not answer).
pub const TIMEOUT_SECS: u64 = 5;

/// Whether `command` runs `worldfs hook`: an install of ours, whatever path it used.
fn is_ours(command: &str) -> bool {
    let mut words = command.split_whitespace();
    let (Some(program), Some(sub)) = (words.next(), words.next()) else {
        return false;
    };
    Path::new(program).file_name().and_then(|n| n.to_str()) == Some("worldfs") && sub == "hook"
}

/// `settings` without any `worldfs hook` command: groups left with no hook go, and so does an
/// event left with no group, and `hooks` when it is left empty. How many commands went.
pub fn remove(settings: &mut Map<String, Value>) -> usize {
    let Some(Value::Object(hooks)) = settings.get_mut("hooks") else {
        return 0;
    };
    let mut removed = 0;
    for groups in hooks.values_mut() {
        let Value::Array(groups) = groups else {
            continue;
        };
        for group in groups.iter_mut() {
            if let Some(Value::Array(list)) = group.get_mut("hooks") {
                let before = list.len();
                list.retain(|h| {
                    !h.get("command")
                        .and_then(Value::as_str)
                        .is_some_and(is_ours)
                });
                removed += before - list.len();
            }
        }
        groups.retain(|g| {
            g.get("hooks")
                .and_then(Value::as_array)
                .is_none_or(|l| !l.is_empty())
        });
    }
    hooks.retain(|_, groups| groups.as_array().is_none_or(|g| !g.is_empty()));
    if hooks.is_empty() {
        settings.remove("hooks");
    }
    removed
}

/// `settings` with `command` registered for every event `worldfs hook` needs from `agent` (ours
/// from before replaced). Fails when `hooks` or an event's entry is not of the shape the agent
/// reads.
pub fn add(settings: &mut Map<String, Value>, command: &str, agent: Agent) -> anyhow::Result<()> {
    remove(settings);
    let hooks = settings
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(hooks) = hooks else {
        bail!("its \"hooks\" is not an object");
    };
    for &(event, matcher) in agent.events() {
        let groups = hooks
            .entry(event)
            .or_insert_with(|| Value::Array(Vec::new()));
        let Value::Array(groups) = groups else {
            bail!("its \"hooks\".\"{event}\" is not an array");
        };
        let mut group = json!({
            "hooks": [{"type": "command", "command": command, "timeout": TIMEOUT_SECS}]
        });
        if let Some(m) = matcher {
            group["matcher"] = json!(m);
        }
        groups.push(group);
    }
    Ok(())
}

/// The command to register: `worldfs hook` when `worldfs` on `PATH` is this program, else this
/// program's full path, quoted for the shell Claude Code runs it with (with the user's `PATH`).
pub fn command_for(this: &Path, path_var: Option<&std::ffi::OsStr>) -> anyhow::Result<String> {
    let on_path = path_var
        .map(|p| {
            std::env::split_paths(p)
                .map(|d| d.join("worldfs"))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.is_file());
    let same = on_path.is_some_and(
        |p| matches!((p.canonicalize(), this.canonicalize()), (Ok(a), Ok(b)) if a == b),
    );
    if same {
        return Ok("worldfs hook".to_owned());
    }
    let this = this
        .to_str()
        .with_context(|| format!("{} is not UTF-8", this.display()))?;
    let word = shlex::try_quote(this).with_context(|| format!("quoting {this}"))?;
    Ok(format!("{word} hook"))
}

/// The settings file a project's hooks go in: `DIR/.claude/settings.local.json` (Claude Code's
/// per-user file of a project, not meant for version control).
pub fn default_settings(dir: &Path) -> PathBuf {
    dir.join(".claude").join("settings.local.json")
}

/// Whether a settings file Claude Code reads for a project in one of `dirs` (its own two, or the
/// user's `~/.claude/settings.json`), or a hooks file Codex reads (the project's
/// `.codex/hooks.json`, the user's `$CODEX_HOME/hooks.json`, `~/.codex` by default), runs
/// `worldfs hook`. For a warning only: a file that cannot be read counts as not registering it.
pub fn registered(dirs: &[PathBuf], home: Option<&Path>, codex_home: Option<&Path>) -> bool {
    registered_where(dirs, home, codex_home, |_| true)
}

/// [`registered`], for one agent's files only.
pub fn registered_for(
    agent: Agent,
    dirs: &[PathBuf],
    home: Option<&Path>,
    codex_home: Option<&Path>,
) -> bool {
    registered_where(dirs, home, codex_home, |a| a == agent)
}

fn registered_where(
    dirs: &[PathBuf],
    home: Option<&Path>,
    codex_home: Option<&Path>,
    whose: impl Fn(Agent) -> bool,
) -> bool {
    hook_files(dirs, home, codex_home)
        .into_iter()
        .filter(|&(_, a)| whose(a))
        .filter_map(|(f, _)| read(&f).ok())
        .any(|mut s| remove(&mut s) > 0)
}

/// The files whose hooks Claude Code or Codex runs in the projects `dirs` (and for the user
/// whose home is `home`; Codex's `codex_home`, `~/.codex` by default), with whose they are.
fn hook_files(
    dirs: &[PathBuf],
    home: Option<&Path>,
    codex_home: Option<&Path>,
) -> Vec<(PathBuf, Agent)> {
    let codex_home = codex_dir(home, codex_home);
    let mut files = Vec::new();
    for d in dirs {
        files.push((default_settings(d), Agent::ClaudeCode));
        files.push((d.join(".claude").join("settings.json"), Agent::ClaudeCode));
        files.push((Agent::Codex.default_settings(d), Agent::Codex));
    }
    if let Some(h) = home {
        files.push((h.join(".claude").join("settings.json"), Agent::ClaudeCode));
    }
    if let Some(c) = codex_home {
        files.push((c.join("hooks.json"), Agent::Codex));
    }
    files
}

/// The hook files of [`registered`] that run `worldfs hook` but not on every event this
/// version needs (installed by an older one, before Codex's `Stop` was needed to record its
/// `apply_patch` calls), each with its agent and the events it lacks. Installing again adds
/// them.
pub fn outdated(
    dirs: &[PathBuf],
    home: Option<&Path>,
    codex_home: Option<&Path>,
) -> Vec<(PathBuf, Agent, Vec<&'static str>)> {
    let mut found = installed(dirs, home, codex_home);
    found.retain(|(_, _, missing)| !missing.is_empty());
    found
}

/// Codex's own directory: `CODEX_HOME` when set (`codex_home`), else `~/.codex`.
pub fn codex_dir(home: Option<&Path>, codex_home: Option<&Path>) -> Option<PathBuf> {
    codex_home
        .map(Path::to_path_buf)
        .or_else(|| home.map(|h| h.join(".codex")))
}

/// The Codex hooks files of [`registered`] that run `worldfs hook`, each with whether Codex
/// runs those hooks: not when its user's config.toml (in `codex_home`, else `home/.codex`) does
/// not trust one of them with its current hash, nor, for a file of a project in `dirs`, when
/// that config trusts neither the project nor a directory above it (Codex does not load the
/// hooks of an untrusted project).
pub fn codex_registered(
    dirs: &[PathBuf],
    home: Option<&Path>,
    codex_home: Option<&Path>,
) -> Vec<(PathBuf, bool)> {
    // A config that cannot be read trusts nothing.
    let config: toml::Table = codex_dir(home, codex_home)
        .and_then(|d| std::fs::read_to_string(d.join("config.toml")).ok())
        .and_then(|text| text.parse().ok())
        .unwrap_or_default();
    hook_files(dirs, home, codex_home)
        .into_iter()
        .filter(|(_, a)| *a == Agent::Codex)
        .filter_map(|(f, _)| {
            let settings = Value::Object(read(&f).ok()?);
            let keys = super::codex_trust::keys_in_file(&f, &settings, is_ours);
            let project = dirs.iter().find(|d| f.starts_with(d));
            let runs = project.is_none_or(|d| super::codex_trust::project_trusted(&config, d))
                && super::codex_trust::all_trusted(&config, &keys);
            (!keys.is_empty()).then_some((f, runs))
        })
        .collect()
}

/// The warning for a hook file `file` of `agent` that runs `worldfs hook` but not on the
/// events `missing`, as [`outdated`] lists them.
pub fn outdated_warning(file: &Path, agent: Agent, missing: &[&str]) -> String {
    let codex = if agent == Agent::Codex {
        " --codex"
    } else {
        ""
    };
    format!(
        "worldfs: warning: {} runs `worldfs hook`, but not on {} (installed by an older \
         worldfs?); run `worldfs hook --install{codex}` again for it",
        file.display(),
        missing.join(", ")
    )
}

/// The hook files of [`registered`] that run `worldfs hook`, each with its agent and the
/// events this version needs that it does not run it on.
pub fn installed(
    dirs: &[PathBuf],
    home: Option<&Path>,
    codex_home: Option<&Path>,
) -> Vec<(PathBuf, Agent, Vec<&'static str>)> {
    hook_files(dirs, home, codex_home)
        .into_iter()
        .filter_map(|(f, agent)| {
            let settings = read(&f).ok()?;
            let ours = remove(&mut settings.clone()) > 0;
            ours.then(|| {
                let missing = missing_events(&settings, agent);
                (f, agent, missing)
            })
        })
        .collect()
}

/// The events `worldfs hook` needs from `agent` that `settings` does not run it on.
fn missing_events(settings: &Map<String, Value>, agent: Agent) -> Vec<&'static str> {
    let runs_ours = |event: &str| {
        settings
            .get("hooks")
            .and_then(|h| h.get(event))
            .and_then(Value::as_array)
            .is_some_and(|groups| {
                groups
                    .iter()
                    .filter_map(|g| g.get("hooks").and_then(Value::as_array))
                    .flatten()
                    .filter_map(|h| h.get("command").and_then(Value::as_str))
                    .any(is_ours)
            })
    };
    agent
        .events()
        .iter()
        .map(|(event, _)| *event)
        .filter(|e| !runs_ours(e))
        .collect()
}

/// Reads `path` as a JSON object; a missing or empty file is an empty one.
fn read(path: &Path) -> anyhow::Result<Map<String, Value>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Map::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str(&text) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => bail!("{} is not a JSON object; left as it is", path.display()),
        Err(e) => bail!("{} is not valid JSON ({e}); left as it is", path.display()),
    }
}

/// Writes `settings` to `path` through a temporary file beside it and a rename.
fn write(path: &Path, settings: &Map<String, Value>) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut text = serde_json::to_string_pretty(settings).context("serializing the settings")?;
    text.push('\n');
    let tmp = tempfile::NamedTempFile::new_in(dir)
        .with_context(|| format!("creating a temporary file in {}", dir.display()))?;
    std::fs::write(tmp.path(), text)
        .with_context(|| format!("writing {}", tmp.path().display()))?;
    // Keep the mode of the file replaced (a private settings file stays private).
    if let Ok(meta) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(tmp.path(), meta.permissions());
    }
    tmp.persist(path)
        .with_context(|| format!("replacing {}", path.display()))?;
    Ok(())
}

/// Registers `command` for `agent` in the settings file at `path`. What was done, in one line
/// (or more: what Codex asks of the user before it runs them).
pub fn install(path: &Path, command: &str, agent: Agent) -> anyhow::Result<String> {
    let mut settings = read(path)?;
    let before = settings.clone();
    let name = match agent {
        Agent::ClaudeCode => "Claude Code",
        Agent::Codex => "Codex",
    };
    add(&mut settings, command, agent).with_context(|| {
        format!(
            "{} has hooks of a shape {name} does not read",
            path.display()
        )
    })?;
    let done = if settings == before {
        format!("{} already runs `{command}`", path.display())
    } else {
        write(path, &settings)?;
        forget_in_mount(path);
        let events: Vec<String> = agent
            .events()
            .iter()
            .map(|(e, m)| match m {
                Some(m) if *m != "*" => format!("{e} ({m})"),
                _ => (*e).to_owned(),
            })
            .collect();
        format!(
            "{} now runs `{command}` on {}",
            path.display(),
            events.join(", ")
        )
    };
    Ok(match agent {
        Agent::ClaudeCode => done,
        // Codex runs no hook it was not told to trust, and says nothing of one it skips in
        // `codex exec`: a user would see no goal and no steps, and not know why.
        Agent::Codex => format!(
            "{done}\nworldfs: Codex runs them once you trust them (and, for a project's \
             .codex/hooks.json, the project): start `codex` there and answer its \
             \"Hooks need review\" with \"Trust all and continue\"; `codex exec` skips hooks \
             not trusted, without a word"
        ),
    })
}

/// Writing the settings inside a worldfs mount is housekeeping, not the agent's work: the
/// mount's world forgets the file (else it would be projected as a file the agent wrote). Best
/// effort: without a mount, or a daemon that answers, there is nothing to forget.
fn forget_in_mount(path: &Path) {
    let Ok(path) = path.canonicalize() else {
        return;
    };
    let Ok(Some(m)) = crate::mountinfo::worldfs_mount_covering(&path) else {
        return;
    };
    // Longer than the forget itself may wait for the world to apply this write (5 s).
    let forgot = crate::cli_client::socket_for_mount(&m.mount_point)
        .and_then(|s| {
            Ok(crate::socket::Client::connect(
                &s,
                std::time::Duration::from_secs(10),
            )?)
        })
        .and_then(|mut c| Ok(c.call("entries.forget", json!({ "path": path.to_string_lossy() }))?));
    if let Err(e) = forgot {
        // Said, not failed: the settings are written; the mount may show them as the agent's.
        tracing::warn!(
            "the mount at {} did not forget {}, so it may show it as a file the agent wrote: {e:#}",
            m.mount_point.display(),
            path.display()
        );
    }
}

/// `worldfs hook --install` or `--uninstall`: the settings file given, or the project's (of
/// `agent`) in `-C DIR` or the current directory. Prints what was done; an error is one line
/// and status 1.
pub fn run(
    target: &crate::cli::SocketArg,
    settings: Option<PathBuf>,
    uninstall_them: bool,
    agent: Agent,
) -> std::process::ExitCode {
    let result = (|| {
        let path = match settings {
            Some(p) => p,
            None => match &target.dir {
                Some(d) => agent.default_settings(d),
                None => agent.default_settings(
                    &std::env::current_dir().context("reading the current directory")?,
                ),
            },
        };
        if uninstall_them {
            uninstall(&path)
        } else {
            let this = std::env::current_exe().context("finding this program's path")?;
            install(
                &path,
                &command_for(&this, std::env::var_os("PATH").as_deref())?,
                agent,
            )
        }
    })();
    match result {
        Ok(done) => {
            println!("worldfs: {done}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("worldfs: error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Removes every `worldfs hook` command from the settings file at `path`.
pub fn uninstall(path: &Path) -> anyhow::Result<String> {
    if !path.exists() {
        return Ok(format!(
            "{} does not exist: nothing to remove",
            path.display()
        ));
    }
    let mut settings = read(path)?;
    let removed = remove(&mut settings);
    if removed == 0 {
        return Ok(format!("{} has no `worldfs hook` command", path.display()));
    }
    write(path, &settings)?;
    forget_in_mount(path);
    Ok(format!(
        "{}: {removed} `worldfs hook` commands removed",
        path.display()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            other => panic!("not an object: {other}"),
        }
    }

    #[test]
    fn ours_is_any_path_to_worldfs_hook() {
        assert!(is_ours("worldfs hook"));
        assert!(is_ours("/usr/local/bin/worldfs hook"));
        assert!(is_ours("worldfs  hook -v"));
        assert!(!is_ours("worldfs proxy"));
        assert!(!is_ours("my-worldfs hook"));
        assert!(!is_ours("echo worldfs hook"));
        assert!(!is_ours(""));
    }

    #[test]
    fn adding_keeps_everything_else_and_twice_is_once() {
        let mut s = obj(json!({
            "permissions": {"allow": ["Bash(ls:*)"]},
            "hooks": {
                "PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "prettier --write"}]}],
                "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
            }
        }));
        add(&mut s, "worldfs hook", Agent::ClaudeCode).expect("add");
        let once = s.clone();
        add(&mut s, "worldfs hook", Agent::ClaudeCode).expect("add again");
        assert_eq!(s, once, "installing twice is installing once");
        assert_eq!(s["permissions"], json!({"allow": ["Bash(ls:*)"]}));
        assert_eq!(s["hooks"]["Stop"].as_array().map(Vec::len), Some(1));
        let post = s["hooks"]["PostToolUse"].as_array().expect("PostToolUse");
        assert_eq!(post.len(), 2, "the user's own group stays beside ours");
        assert_eq!(post[0]["hooks"][0]["command"], "prettier --write");
        assert_eq!(post[1]["matcher"], "*");
        assert_eq!(s["hooks"]["PreToolUse"][0]["matcher"], "Bash|Grep|Glob");
        assert!(s["hooks"]["SessionStart"][0].get("matcher").is_none());
        // An older install by another path is replaced, not doubled.
        add(&mut s, "/opt/worldfs/bin/worldfs hook", Agent::ClaudeCode).expect("add by path");
        let commands: Vec<&str> = s["hooks"]
            .as_object()
            .into_iter()
            .flat_map(|h| h.values())
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|g| g["hooks"].as_array())
            .flatten()
            .filter_map(|h| h["command"].as_str())
            .filter(|c| is_ours(c))
            .collect();
        assert_eq!(commands, vec!["/opt/worldfs/bin/worldfs hook"; 5]);

        // Removing takes ours alone, and what is left empty.
        assert_eq!(remove(&mut s), 5);
        assert_eq!(
            Value::Object(s),
            json!({
                "permissions": {"allow": ["Bash(ls:*)"]},
                "hooks": {
                    "PostToolUse": [{"matcher": "Edit", "hooks": [{"type": "command", "command": "prettier --write"}]}],
                    "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]
                }
            })
        );
        let mut only_ours = Map::new();
        add(&mut only_ours, "worldfs hook", Agent::ClaudeCode).expect("add");
        remove(&mut only_ours);
        assert!(only_ours.is_empty());
    }

    #[test]
    fn registered_looks_in_the_projects_settings_and_the_users_of_either_agent() {
        let project = tempfile::tempdir().expect("tempdir");
        let home = tempfile::tempdir().expect("tempdir");
        let dirs = [project.path().to_path_buf()];
        let claude = Agent::ClaudeCode;
        assert!(!registered(&dirs, Some(home.path()), None));
        install(
            &home.path().join(".claude/settings.json"),
            "worldfs hook",
            claude,
        )
        .expect("in");
        assert!(registered(&dirs, Some(home.path()), None));
        assert!(!registered(&dirs, None, None));
        install(&default_settings(project.path()), "/x/worldfs hook", claude).expect("in");
        assert!(registered(&dirs, None, None));
        // Codex's: the project's, and the user's in CODEX_HOME (`~/.codex` without it).
        let other = tempfile::tempdir().expect("tempdir");
        let dirs = [other.path().to_path_buf()];
        let codex_home = tempfile::tempdir().expect("tempdir");
        let hooks = codex_home.path().join("hooks.json");
        install(&hooks, "worldfs hook", Agent::Codex).expect("in");
        assert!(registered(&dirs, None, Some(codex_home.path())));
        let home = tempfile::tempdir().expect("tempdir");
        assert!(!registered(&dirs, Some(home.path()), None));
        let hooks = home.path().join(".codex/hooks.json");
        install(&hooks, "worldfs hook", Agent::Codex).expect("in");
        assert!(registered(&dirs, Some(home.path()), None));
        let third = tempfile::tempdir().expect("tempdir");
        let hooks = Agent::Codex.default_settings(third.path());
        install(&hooks, "worldfs hook", Agent::Codex).expect("in");
        assert!(registered(&[third.path().to_path_buf()], None, None));
    }

    /// Hooks an older worldfs installed lack an event this one needs: they are named, and
    /// installing again adds it.
    #[test]
    fn hooks_installed_by_an_older_version_are_told_apart() {
        let project = tempfile::tempdir().expect("tempdir");
        let dirs = [project.path().to_path_buf()];
        let path = Agent::Codex.default_settings(project.path());
        install(&path, "worldfs hook", Agent::Codex).expect("install");
        assert!(outdated(&dirs, None, None).is_empty());
        let mut s = read(&path).expect("read");
        s["hooks"].as_object_mut().expect("hooks").remove("Stop");
        write(&path, &s).expect("write");
        assert_eq!(
            outdated(&dirs, None, None),
            [(path.clone(), Agent::Codex, vec!["Stop"])]
        );
        // Others' hooks alone, or none: nothing of ours to bring up to date.
        let claude = default_settings(project.path());
        write(
            &claude,
            &serde_json::from_str(r#"{"hooks": {"Stop": []}}"#).expect("json"),
        )
        .expect("write");
        assert_eq!(outdated(&dirs, None, None).len(), 1);
        install(&path, "worldfs hook", Agent::Codex).expect("again");
        assert!(outdated(&dirs, None, None).is_empty());
    }

    #[test]
    fn codex_gets_its_own_events_in_its_own_file() {
        let project = tempfile::tempdir().expect("tempdir");
        let path = Agent::Codex.default_settings(project.path());
        assert_eq!(path, project.path().join(".codex/hooks.json"));
        let said = install(&path, "worldfs hook", Agent::Codex).expect("install");
        assert!(said.contains("Trust all and continue"), "{said}");
        let s = read(&path).expect("read");
        let events: Vec<&str> = s["hooks"]
            .as_object()
            .expect("hooks")
            .keys()
            .map(String::as_str)
            .collect();
        // Codex has no PostToolUseFailure: a failed command's PostToolUse says it.
        assert_eq!(
            events,
            [
                "PostToolUse",
                "PreToolUse",
                "SessionStart",
                "Stop",
                "UserPromptSubmit"
            ]
        );
        assert_eq!(s["hooks"]["PreToolUse"][0]["matcher"], "Bash");
        assert_eq!(
            s["hooks"]["PostToolUse"][0]["hooks"][0]["command"],
            "worldfs hook"
        );
        let again = install(&path, "worldfs hook", Agent::Codex).expect("again");
        assert!(again.contains("already runs"), "{again}");
        assert!(
            uninstall(&path)
                .expect("uninstall")
                .contains("5 `worldfs hook`")
        );
    }

    #[test]
    fn hooks_of_another_shape_are_refused() {
        let mut s = obj(json!({"hooks": []}));
        assert!(add(&mut s, "worldfs hook", Agent::ClaudeCode).is_err());
        let mut s = obj(json!({"hooks": {"PreToolUse": {"matcher": "Bash"}}}));
        assert!(add(&mut s, "worldfs hook", Agent::ClaudeCode).is_err());
    }

    #[test]
    fn the_command_names_this_program_unless_path_finds_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bin = dir.path().join("worldfs");
        std::fs::write(&bin, "").expect("write");
        let path = std::env::join_paths([dir.path()]).expect("PATH");
        assert_eq!(
            command_for(&bin, Some(&path)).expect("command"),
            "worldfs hook"
        );
        let elsewhere = tempfile::tempdir().expect("tempdir");
        let other = std::env::join_paths([elsewhere.path()]).expect("PATH");
        assert_eq!(
            command_for(&bin, Some(&other)).expect("command"),
            format!("{} hook", bin.display())
        );
        assert_eq!(
            command_for(Path::new("/a b/worldfs"), None).expect("command"),
            "'/a b/worldfs' hook"
        );
    }
}
