//! `worldfs run`: mount a project in place, run the agent in it, unmount when it ends.
//!
//! What a user otherwise does in three terminals (README, "Usage" and "With Claude Code"):
//! `worldfs mount`, `worldfs proxy`, then the agent pointed at the proxy. The mount and the
//! proxy are started as processes of their own, in a process group of their own: a terminal
//! sends Ctrl-C to its whole foreground group, and it is meant for the agent alone (Claude Code
//! asks for a second one before it quits; the mount would have been gone after the first).
//! Their messages go to a log file, since the agent usually owns the terminal and a line
//! printed into a full-screen program is drawn over; warnings are shown on stderr too while
//! the agent is not running. The log is the daemons' stderr itself, not a pipe through
//! `worldfs run`: a mount left detached at the end serves on after `worldfs run` has exited,
//! and what it says then (its unmount, a failed save) is kept.
//!
//! The daemons are told (`PR_SET_PDEATHSIG`) to stop when `worldfs run` ends, however it ends:
//! killed with SIGKILL, it cannot stop them itself, and the mount and the proxy would stay for
//! nobody, the mount holding the project's directory until `worldfs unmount`.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, ExitStatus};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;

use crate::cli::MountOptions;
use crate::socket::Client;

mod agent;
mod codex_address;
mod daemons;
mod hooks;
mod log;
mod signals;
mod summary;
mod warnings;

use self::codex_address::{CodexAddress, Layers};
use self::daemons::Daemons;
use self::log::Log;
use self::signals::Signals;
use self::warnings::{claude_past_the_proxy, codex_own_provider, outdated_hooks, unhooked_agent};

/// How long the mount may take to answer: restoring a kept world of many entries, or an
/// inotify walk of a large tree, comes before the socket answers.
const MOUNT_WAIT: Duration = Duration::from_secs(120);
/// How long the proxy may take to listen.
const PROXY_WAIT: Duration = Duration::from_secs(30);
/// How long a daemon may take to stop once told to.
const STOP_WAIT: Duration = Duration::from_secs(30);
/// How often a start or a stop is looked at, and the log read back.
const POLL: Duration = Duration::from_millis(20);
/// How often the log's reader wakes while the command runs, when it reads nothing.
const QUIET_POLL: Duration = Duration::from_millis(250);

/// `--proxy` and the proxy's settings.
#[derive(Debug, Clone)]
pub struct ProxyOptions {
    /// Where the proxy sends requests; by default the agent's API (`default_upstream`).
    pub upstream: Option<String>,
    pub listen: SocketAddr,
}

/// What `worldfs run` was asked to do.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The directory to mount in place; the current one when absent.
    pub dir: Option<PathBuf>,
    pub options: MountOptions,
    pub proxy: Option<ProxyOptions>,
    pub log: Option<PathBuf>,
    /// Whether `claude` or `codex` may be given worldfs's hooks on its command line (module
    /// `hooks`).
    pub hooks: bool,
    /// The program and its arguments.
    pub command: Vec<OsString>,
    /// `-v` given this many times, passed on to the mount and the proxy.
    pub verbose: u8,
}

/// Mounts, runs the command, unmounts; the exit code is the command's.
pub fn run(cfg: RunConfig) -> anyhow::Result<ExitCode> {
    let Some((program, args)) = cfg.command.split_first() else {
        bail!("no COMMAND to run (`worldfs run -- claude`)");
    };
    let given = match &cfg.dir {
        Some(d) => d.clone(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let dir = match given.canonicalize() {
        Ok(d) => d,
        // A path in a mount whose daemon died cannot be resolved; said below.
        Err(e) => match std::path::absolute(&given) {
            Ok(d) if crate::mountinfo::worldfs_mount_covering(&d).is_ok_and(|m| m.is_some()) => d,
            _ if cfg.dir.is_some() => return Err(e).context(format!("-C {}", given.display())),
            _ => return Err(e).context(format!("resolving {}", given.display())),
        },
    };
    // The new mount could not start there, and until it failed the readiness check below
    // would take that mount's socket for the new one's.
    if let Some(m) = crate::mountinfo::worldfs_mount_covering(&dir).context("reading mountinfo")? {
        if answering(&m.mount_point, None).is_none() {
            bail!(
                "{} is in the worldfs mount at {}, whose socket does not answer (if its daemon \
                 died, `worldfs unmount {}` removes the mount)",
                dir.display(),
                m.mount_point.display(),
                m.mount_point.display()
            );
        }
        bail!(
            "{} is already in the worldfs mount at {}: run the command there as it is (the \
             mount's socket is found from the directory)",
            dir.display(),
            m.mount_point.display()
        );
    }
    let log_path = match &cfg.log {
        Some(p) => p.clone(),
        // Named as the mount's socket is, beside it.
        None => {
            let socket = crate::socket::paths::default_socket_path(&dir)
                .context("finding a place for the mount's log")?;
            if let Some(parent) = socket.parent() {
                crate::socket::paths::prepare_dir(parent)
                    .context("making the directory for the mount's log")?;
            }
            socket.with_extension("log")
        }
    };
    let mut daemons = Daemons::new(Log::create(&log_path)?, &dir);
    let signals = Signals::watch()?;
    let exe = std::env::current_exe().context("finding the worldfs program")?;
    let verbose = (cfg.verbose > 0).then(|| format!("-{}", "v".repeat(cfg.verbose.into())));
    // Decided before anything starts, so that a proxy is not told to warn of missing hooks.
    let hooks = if cfg.hooks {
        hooks::for_agent(Path::new(program), args, &dir, &exe)?
    } else {
        None
    };

    let mut mount = Command::new(&exe);
    mount
        .args(&verbose)
        .arg("mount")
        .arg(&dir)
        .args(cfg.options.args());
    let mount = daemons.spawn("the mount", mount, false)?;
    let socket = wait_ready(&mut daemons, mount, MOUNT_WAIT, &signals, || {
        answering(&dir, cfg.options.socket.as_deref())
    })?;
    eprintln!(
        "worldfs: mounted {} in place (socket {}); messages in {}",
        dir.display(),
        socket.display(),
        log_path.display()
    );

    let mut proxy_url = None;
    let mut codex_args = None;
    if let Some(p) = &cfg.proxy {
        let codex = codex_address::for_codex(Path::new(program), args, &Layers::of(&dir));
        let (upstream, whose) = match &p.upstream {
            Some(u) => (u.clone(), ""),
            None => default_upstream(Path::new(program), &codex),
        };
        let mut proxy = Command::new(&exe);
        proxy
            .args(&verbose)
            .arg("proxy")
            .arg("--socket")
            .arg(&socket)
            // Where it looks for the project's hooks (it leaves for `/` once started).
            .current_dir(&dir)
            .arg("--listen")
            .arg(p.listen.to_string())
            .arg("--upstream")
            .arg(&upstream);
        if hooks.is_some() {
            proxy.arg("--hooks-elsewhere");
        }
        let proxy = daemons.spawn("the proxy", proxy, true)?;
        let addr = daemons.log.proxy_url.clone();
        let url = wait_ready(&mut daemons, proxy, PROXY_WAIT, &signals, || {
            addr.try_recv().ok()
        })?;
        // Codex reads no variable for its address, and calls OpenAI's API.
        let anthropic = agent::agent(Path::new(program))
            != Some(crate::claude_hook::install::Agent::Codex)
            && for_anthropic(&upstream);
        let set = if anthropic {
            "ANTHROPIC_BASE_URL and WORLDFS_PROXY_URL are"
        } else {
            "WORLDFS_PROXY_URL is"
        };
        eprintln!("worldfs: proxy on {url}, forwarding to {upstream}{whose}: {set} set to it");
        match codex {
            CodexAddress::Untouched => {}
            CodexAddress::Openai { base } => {
                let a = codex_address::pointing(&base, &url);
                eprintln!(
                    "worldfs: Codex's `openai` provider is pointed at the proxy on its command \
                     line ({} {})",
                    a[0].to_string_lossy(),
                    a[1].to_string_lossy()
                );
                codex_args = Some(a);
            }
            // With --listen, taken to be the address it names.
            CodexAddress::OwnProvider { name, from } if p.listen.port() == 0 => {
                eprintln!("{}", codex_own_provider(&name, &from, &url));
            }
            CodexAddress::OwnProvider { .. } => {}
        }
        if anthropic && let Some(warning) = claude_past_the_proxy(Path::new(program), &dir) {
            eprintln!("{warning}");
        }
        proxy_url = Some((url, anthropic));
    }

    if let Some(given) = &hooks {
        let (agent, codex) = match given.agent {
            crate::claude_hook::install::Agent::ClaudeCode => ("Claude Code", ""),
            crate::claude_hook::install::Agent::Codex => ("Codex", " --codex"),
        };
        if given.untrusted.is_empty() {
            eprintln!(
                "worldfs: {agent} gets worldfs's hooks for this run on its command line; \
                 `worldfs hook --install{codex} -C {}` registers them for every start",
                dir.display()
            );
        } else {
            let files: Vec<String> = given
                .untrusted
                .iter()
                .map(|f| f.display().to_string())
                .collect();
            eprintln!(
                "worldfs: Codex gets worldfs's hooks for this run on its command line: it would \
                 skip those of {}, which it does not trust (or a project it does not trust); \
                 start `codex` there once and trust them (README, \"With Codex\")",
                files.join(" and ")
            );
        }
    } else if cfg.proxy.is_none() {
        // The proxy says these itself.
        let warnings = unhooked_agent(Path::new(program), args, &dir)
            .into_iter()
            .chain(outdated_hooks(Path::new(program), &dir));
        for warning in warnings {
            eprintln!("{warning}");
        }
    }
    let mut command = Command::new(program);
    command
        .args(hooks.iter().flat_map(|given| &given.args))
        .args(codex_args.iter().flatten())
        .args(args)
        // Resolved again by the child: it leads into the mount now.
        .current_dir(&dir)
        .env("WORLDFS_SOCKET", &socket);
    if let Some((url, anthropic)) = &proxy_url {
        command.env("WORLDFS_PROXY_URL", url);
        if *anthropic {
            command.env("ANTHROPIC_BASE_URL", url);
        }
    }
    daemons.log.quiet(true);
    let status = signals.run(&mut command);
    daemons.log.quiet(false);
    let ran = status.is_ok();
    let code = match status {
        Ok(st) => exit_code(st),
        Err(e) => {
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            eprintln!(
                "worldfs: error: cannot run {}: {e}",
                Path::new(program).display()
            );
            code
        }
    };
    // The proxy first, so that every call it took is in the mount's account.
    daemons.stop_all_but_the_mount();
    if ran
        && cfg.proxy.is_some()
        && let Some(line) = summary::summary(&socket)
    {
        eprintln!("{line}");
    }
    daemons.stop();
    // A setting of the agent's own (an `env` in Claude Code's settings, a provider in Codex's)
    // can send its calls past the proxy, and nothing else would tell.
    if let Some((url, _)) = &proxy_url
        && ran
        && daemons.log.proxy_calls() == Some(0)
    {
        eprintln!(
            "worldfs: warning: no model call went through the proxy at {url} while {} ran; if it \
             made any, they went elsewhere (a base URL in its own settings?)",
            Path::new(program).display()
        );
    }
    Ok(ExitCode::from(code))
}

/// Waits until `ready` gives something, while the `i`th daemon started runs: an error if it
/// ends first, if a signal asks the run to end, or after `limit`.
fn wait_ready<T>(
    daemons: &mut Daemons,
    i: usize,
    limit: Duration,
    signals: &Signals,
    mut ready: impl FnMut() -> Option<T>,
) -> anyhow::Result<T> {
    let name = daemons.started.get(i).map_or("a daemon", |d| d.name);
    let log = daemons.log.path.clone();
    let start = Instant::now();
    loop {
        if let Some(t) = ready() {
            return Ok(t);
        }
        signals.check(&format!("starting {name}"))?;
        if let Some(st) = daemons.exited(i)? {
            bail!(
                "{name} did not start ({}; its messages are in {})",
                describe(st),
                log.display()
            );
        }
        if start.elapsed() > limit {
            bail!(
                "{name} was not ready after {} s (its messages are in {})",
                limit.as_secs(),
                log.display()
            );
        }
        std::thread::sleep(POLL);
    }
}

/// The socket of the worldfs mount at `dir` once it answers.
fn answering(dir: &Path, socket: Option<&Path>) -> Option<PathBuf> {
    let m = crate::mountinfo::worldfs_mount_covering(dir).ok()??;
    if m.mount_point != dir {
        return None;
    }
    let socket = match socket {
        Some(s) => s.to_owned(),
        None => crate::cli_client::socket_for_mount(dir).ok()?,
    };
    Client::connect(&socket, Duration::from_secs(5))
        .and_then(|mut c| c.call("initialize", json!({})))
        .ok()?;
    Some(socket)
}

/// Where the proxy sends requests unless told, and whose address that is when it is not the
/// API's own: for Codex, where its `openai` provider goes (a gateway a config layer names, or
/// OpenAI's API); for any other program (Claude Code, and the programs a user wraps it in),
/// the `ANTHROPIC_BASE_URL` of the environment (a gateway the agent would have used), else
/// Anthropic's API.
fn default_upstream(program: &Path, codex: &CodexAddress) -> (String, &'static str) {
    const OPENAI: &str = "https://api.openai.com";
    if let CodexAddress::Openai { base } = codex {
        return match codex_address::upstream_for(base) {
            Some(u) if u != OPENAI => (u, " (Codex's openai_base_url)"),
            _ => (OPENAI.to_owned(), ""),
        };
    }
    if agent::agent(program) == Some(crate::claude_hook::install::Agent::Codex) {
        return (OPENAI.to_owned(), "");
    }
    // Not the proxy of a `worldfs run` this one runs in (which set both): that proxy serves
    // another mount, and would rewrite the calls again with its projection.
    let outer = std::env::var("WORLDFS_PROXY_URL").ok();
    match std::env::var("ANTHROPIC_BASE_URL") {
        Ok(u) if !u.trim().is_empty() && outer.as_deref() != Some(u.as_str()) => {
            (u, " (ANTHROPIC_BASE_URL's)")
        }
        _ => ("https://api.anthropic.com".to_owned(), ""),
    }
}

/// Whether the proxy forwarding to `upstream` is one for Anthropic's API, whose clients (Claude
/// Code) `ANTHROPIC_BASE_URL` points at it: any upstream but OpenAI's. Not for OpenAI's: the
/// agent's commands inherit the variable, and a program of the project that calls Anthropic's
/// API would reach OpenAI's.
fn for_anthropic(upstream: &str) -> bool {
    reqwest::Url::parse(upstream)
        .ok()
        .and_then(|u| u.host_str().map(str::to_owned))
        .is_none_or(|h| h != "api.openai.com")
}

/// The exit code a shell gives for `st`.
fn exit_code(st: ExitStatus) -> u8 {
    match (st.code(), st.signal()) {
        (Some(c), _) => (c & 0xff) as u8,
        (None, Some(s)) => (128 + s).clamp(0, 255) as u8,
        (None, None) => 1,
    }
}

fn describe(st: ExitStatus) -> String {
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!("signal {s}"),
        _ => st.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anthropic_base_url_is_for_any_upstream_but_openais() {
        assert!(for_anthropic("https://api.anthropic.com"));
        assert!(for_anthropic("http://127.0.0.1:9"));
        assert!(!for_anthropic("https://api.openai.com"));
        assert!(!for_anthropic("https://api.openai.com/"));
    }

    #[test]
    fn exit_codes_are_a_shells() {
        assert_eq!(exit_code(ExitStatus::from_raw(7 << 8)), 7);
        assert_eq!(exit_code(ExitStatus::from_raw(libc::SIGTERM)), 143);
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
    }
}
