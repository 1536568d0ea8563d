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
use std::fs::File;
use std::fs::OpenOptions;
use std::io::Read;
use std::net::SocketAddr;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use crossbeam_channel::{Receiver, Sender};
use parking_lot::Mutex;
use serde_json::json;

use crate::cli::MountOptions;
use crate::socket::Client;

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
    pub upstream: String,
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
    if let Some(p) = &cfg.proxy {
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
            .arg(&p.upstream);
        let proxy = daemons.spawn("the proxy", proxy, true)?;
        let addr = daemons.log.proxy_url.clone();
        let url = wait_ready(&mut daemons, proxy, PROXY_WAIT, &signals, || {
            addr.try_recv().ok()
        })?;
        let anthropic = for_anthropic(&p.upstream);
        let set = if anthropic {
            "ANTHROPIC_BASE_URL and WORLDFS_PROXY_URL are"
        } else {
            "WORLDFS_PROXY_URL is"
        };
        eprintln!(
            "worldfs: proxy on {url}, forwarding to {}: {set} set to it",
            p.upstream
        );
        if let Some(warning) = codex_unpointed(Path::new(program), args, p, &url) {
            eprintln!("{warning}");
        }
        if anthropic
            && Path::new(program)
                .file_name()
                .is_some_and(|n| n == "claude")
            && let Some((file, base)) = claude_base_url_setting(&dir)
        {
            eprintln!(
                "worldfs: warning: {} sets ANTHROPIC_BASE_URL ({base}) for Claude Code, over the \
                 proxy's address in its environment: its calls will not go through the proxy \
                 (to put the proxy in front of it, take it out there and give --upstream {base})",
                file.display()
            );
        }
        proxy_url = Some((url, anthropic));
    }

    // The proxy says so itself.
    if cfg.proxy.is_none()
        && let Some(warning) = unhooked_agent(Path::new(program), &dir)
    {
        eprintln!("{warning}");
    }
    let mut command = Command::new(program);
    command
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
    daemons.stop();
    // A setting of the agent's own (an `env` in Claude Code's settings, a provider in Codex's)
    // can send its calls past the proxy, and nothing else would tell.
    if let Some((url, _)) = &proxy_url
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

/// A warning when `program` is Claude Code or Codex and none of its settings for `dir` (nor
/// the user's) register `worldfs hook`: only the hook tells the mount the session's goal and
/// its steps. Another agent's hooks do not count.
fn unhooked_agent(program: &Path, dir: &Path) -> Option<String> {
    use crate::claude_hook::install::{Agent, registered_for};
    let (whose, agent, codex) = match program.file_name()?.to_str()? {
        "claude" => (Agent::ClaudeCode, "Claude Code", ""),
        "codex" => (Agent::Codex, "Codex", " --codex"),
        _ => return None,
    };
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let codex_home = std::env::var_os("CODEX_HOME").map(PathBuf::from);
    let dirs = [dir.to_owned()];
    if registered_for(whose, &dirs, home.as_deref(), codex_home.as_deref()) {
        return None;
    }
    Some(format!(
        "worldfs: warning: no settings of {} register `worldfs hook`, so the mount records {agent}'s \
         reads and writes but not its goal nor its steps; `worldfs hook --install{codex} -C {}` \
         registers it, once",
        dir.display(),
        dir.display()
    ))
}

/// The first of Claude Code's settings files, in the order it ranks them, whose `env` sets
/// `ANTHROPIC_BASE_URL`, and that value. Claude Code applies a setting's `env` over the
/// environment it was started with (2.1.332: its call went to that address, none through the
/// proxy).
fn claude_base_url_setting(dir: &Path) -> Option<(PathBuf, String)> {
    let user = std::env::var_os("CLAUDE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".claude")));
    let mut files = vec![
        PathBuf::from("/etc/claude-code/managed-settings.json"),
        dir.join(".claude").join("settings.local.json"),
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
fn codex_unpointed(
    program: &Path,
    args: &[OsString],
    proxy: &ProxyOptions,
    url: &str,
) -> Option<String> {
    if program.file_name()? != "codex" || proxy.listen.port() != 0 {
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

/// The daemons started, stopped in the reverse order when the run ends, however it ends, and
/// the log their messages go to.
struct Daemons {
    /// The directory mounted.
    dir: PathBuf,
    log: Log,
    started: Vec<Daemon>,
}

struct Daemon {
    name: &'static str,
    child: Child,
    /// Whether it is the mount, which may outlive the run detached.
    mount: bool,
}

impl Daemons {
    fn new(log: Log, dir: &Path) -> Daemons {
        Daemons {
            dir: dir.to_owned(),
            log,
            started: Vec::new(),
        }
    }

    /// Starts `cmd` in a process group of its own, its stderr the log; returns its index for
    /// [`Daemons::exited`].
    fn spawn(
        &mut self,
        name: &'static str,
        mut cmd: Command,
        proxy: bool,
    ) -> anyhow::Result<usize> {
        // SAFETY: getpid has no preconditions.
        let parent = unsafe { libc::getpid() };
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(self.log.writer()?)
            .process_group(0);
        // SAFETY: prctl and getppid are async-signal-safe system calls, and the closure
        // allocates nothing, as code between fork and exec must.
        unsafe {
            cmd.pre_exec(move || {
                // SIGTERM is what `stop` sends too: the mount unmounts (detached if busy), the
                // proxy stops. Sent when the thread that forked ends; this is the main one,
                // which lives as long as `worldfs run`.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // Ended between the fork and the prctl: no signal will come.
                if libc::getppid() != parent {
                    return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                }
                Ok(())
            });
        }
        let child = cmd.spawn().with_context(|| format!("starting {name}"))?;
        self.started.push(Daemon {
            name,
            child,
            mount: !proxy,
        });
        Ok(self.started.len() - 1)
    }

    /// The exit status of the `i`th daemon started, once it has ended.
    fn exited(&mut self, i: usize) -> anyhow::Result<Option<ExitStatus>> {
        let Some(d) = self.started.get_mut(i) else {
            return Ok(None);
        };
        let st = d
            .child
            .try_wait()
            .with_context(|| format!("waiting for {}", d.name))?;
        if st.is_some() {
            // Its last lines (the error) are shown before the message that points to them.
            self.log.pump();
        }
        Ok(st)
    }

    /// Stops each daemon (SIGTERM), the last started first. The mount may stay as a detached
    /// mount, served until the processes that hold it let go, which is said.
    fn stop(&mut self) {
        while let Some(mut d) = self.started.pop() {
            if let Ok(Some(_)) = d.child.try_wait() {
                continue;
            }
            let pid = d.child.id() as libc::pid_t;
            // SAFETY: a signal to our own child, not reaped yet, so the pid is still its.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let stopped = self.wait_stopped(&mut d);
            // Its warnings (a failed save) come before what is said of its end.
            self.log.pump();
            match stopped {
                Stopped::Exited(st) if d.mount && st.success() => {
                    eprintln!("worldfs: unmounted {}", self.dir.display());
                }
                Stopped::Exited(st) if !st.success() && st.signal() != Some(libc::SIGTERM) => {
                    eprintln!(
                        "worldfs: warning: {} ended with {} (see {})",
                        d.name,
                        describe(st),
                        self.log.path.display()
                    );
                }
                Stopped::Exited(_) => {}
                Stopped::Detached => eprintln!(
                    "worldfs: {} was still in use, so it is detached: its daemon (pid {pid}) \
                     serves the processes that hold it until they let go (see {})",
                    self.dir.display(),
                    self.log.path.display()
                ),
                Stopped::Running => eprintln!(
                    "worldfs: warning: {} (pid {pid}) did not stop within {} s (see {}){}",
                    d.name,
                    STOP_WAIT.as_secs(),
                    self.log.path.display(),
                    if d.mount {
                        format!(
                            "; `worldfs unmount {}` removes the mount",
                            self.dir.display()
                        )
                    } else {
                        String::new()
                    }
                ),
            }
        }
    }

    /// Waits for `d`, told to stop, to end; for the mount, also for it to leave the mount
    /// table (a busy mount is detached and its daemon goes on serving it).
    fn wait_stopped(&self, d: &mut Daemon) -> Stopped {
        let start = Instant::now();
        loop {
            match d.child.try_wait() {
                Ok(Some(st)) => return Stopped::Exited(st),
                Ok(None) => {}
                Err(_) => return Stopped::Running,
            }
            // Given a moment first: a daemon that unmounted is about to exit.
            if d.mount && start.elapsed() > Duration::from_secs(1) && !self.mounted() {
                return Stopped::Detached;
            }
            if start.elapsed() > STOP_WAIT {
                return Stopped::Running;
            }
            std::thread::sleep(POLL);
        }
    }

    /// Whether a worldfs mount is at the directory.
    fn mounted(&self) -> bool {
        crate::mountinfo::worldfs_mount_covering(&self.dir)
            .ok()
            .flatten()
            .is_some_and(|m| m.mount_point == self.dir)
    }
}

/// How a daemon told to stop ended up.
enum Stopped {
    Exited(ExitStatus),
    /// The mount, detached: its daemon serves those still holding it.
    Detached,
    /// Still there after [`STOP_WAIT`].
    Running,
}

impl Drop for Daemons {
    /// A run that failed before its command ended stops what it started all the same.
    fn drop(&mut self) {
        self.stop();
    }
}

/// The log file: the daemons' stderr, and a thread reading back what they add to it.
struct Log {
    path: PathBuf,
    tail: Arc<Mutex<Tail>>,
    /// The proxy's address, from the line it prints once it listens.
    proxy_url: Receiver<String>,
    stop: Arc<AtomicBool>,
}

/// Where the reading of the log is.
struct Tail {
    file: File,
    /// The end of a line not written whole yet.
    partial: Vec<u8>,
    /// While the command runs, warnings go to the log only.
    quiet: bool,
    proxy_url: Sender<String>,
    /// The model calls the proxy took, from the line it prints when it stops.
    proxy_calls: Option<u64>,
}

impl Log {
    fn create(path: &Path) -> anyhow::Result<Log> {
        // Read back as it grows: a terminal or a pipe would hold the reading (a FIFO, even the
        // opening), and /dev/null would hide the proxy's address. Looked at before it is
        // opened, or truncated.
        let regular = std::fs::metadata(path).map_or(true, |m| m.is_file());
        if !regular {
            bail!(
                "--log {}: not a regular file (the daemons write to it and `worldfs run` reads \
                 their warnings back from it)",
                path.display()
            );
        }
        File::create(path).with_context(|| format!("creating {}", path.display()))?;
        let file = File::open(path).with_context(|| format!("reading {}", path.display()))?;
        let (tx, rx) = crossbeam_channel::bounded(1);
        let tail = Arc::new(Mutex::new(Tail {
            file,
            partial: Vec::new(),
            quiet: false,
            proxy_url: tx,
            proxy_calls: None,
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let (t, st) = (Arc::clone(&tail), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("worldfs-run-log".into())
            .spawn(move || {
                while !st.load(Ordering::Relaxed) {
                    // While the command runs nothing is shown: the lines wait in the file,
                    // and are gone over when the command has ended (`quiet`).
                    let (shown, quiet) = {
                        let mut t = t.lock();
                        let shown = if t.quiet { Vec::new() } else { t.pump() };
                        (shown, t.quiet)
                    };
                    show(&shown);
                    std::thread::sleep(if quiet { QUIET_POLL } else { POLL });
                }
            })
            .context("starting the log thread")?;
        Ok(Log {
            path: path.to_owned(),
            tail,
            proxy_url: rx,
            stop,
        })
    }

    /// A daemon's stderr: the log, appended to (each of the daemons' lines is one write, so
    /// theirs do not mix).
    fn writer(&self) -> anyhow::Result<File> {
        OpenOptions::new()
            .append(true)
            .open(&self.path)
            .with_context(|| format!("opening {}", self.path.display()))
    }

    /// Whether warnings are shown; what was written before is handled as it was then (shown,
    /// or while quiet, only kept in the log).
    fn quiet(&self, on: bool) {
        let shown = {
            let mut t = self.tail.lock();
            let shown = t.pump();
            t.quiet = on;
            shown
        };
        show(&shown);
    }

    /// How many model calls the proxy took, once it has stopped and said so.
    fn proxy_calls(&self) -> Option<u64> {
        self.pump();
        self.tail.lock().proxy_calls
    }

    /// Reads what the daemons have added to the log by now.
    fn pump(&self) {
        let shown = self.tail.lock().pump();
        show(&shown);
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Tail {
    /// Goes over each whole line added since the last look: the proxy's address is passed on;
    /// the warnings and errors, unless quiet, are returned to be shown.
    fn pump(&mut self) -> Vec<String> {
        let mut shown_lines = Vec::new();
        let mut buf = [0u8; 8192];
        loop {
            match self.file.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => self.partial.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        while let Some(end) = self.partial.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line[..end]);
            if let Some(url) = proxy_url(&line) {
                let _ = self.proxy_url.try_send(url);
            }
            if let Some(n) = proxy_calls(&line) {
                self.proxy_calls = Some(n);
            }
            // `error:` is clap's, for arguments it refused.
            let shown = ["worldfs: warning", "worldfs: error", "error:"]
                .iter()
                .any(|p| line.starts_with(p));
            if shown && !self.quiet {
                shown_lines.push(line.into_owned());
            }
        }
        shown_lines
    }
}

/// Shows the daemons' warnings on our stderr.
fn show(lines: &[String]) {
    for l in lines {
        eprintln!("{l}");
    }
}

/// The model calls counted in the line `worldfs proxy` prints when it stops ("model calls: 3
/// sent with the projection, 1 as they came, 0 as they came because ...").
fn proxy_calls(line: &str) -> Option<u64> {
    let counts = line.strip_prefix("worldfs: proxy stopped; model calls: ")?;
    counts
        .split(", ")
        .map(|c| c.split_whitespace().next()?.parse::<u64>().ok())
        .sum()
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

/// The proxy's address from the line `worldfs proxy` prints once it listens.
fn proxy_url(line: &str) -> Option<String> {
    let rest = line.strip_prefix("worldfs: proxy on ")?;
    let url = rest.split_whitespace().next()?;
    url.starts_with("http://").then(|| url.to_owned())
}

/// The signals `worldfs run` gets: before the command runs, any of them ends the run; while
/// it runs, SIGTERM and SIGHUP are passed on to it, and SIGINT and SIGQUIT, which a terminal
/// sends to the command as well, are left to it.
struct Signals {
    got: Arc<AtomicI32>,
    command: Arc<AtomicI32>,
}

impl Signals {
    fn watch() -> anyhow::Result<Signals> {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGQUIT, SIGTERM, SIGHUP])
            .context("installing signal handlers")?;
        let got = Arc::new(AtomicI32::new(0));
        let command = Arc::new(AtomicI32::new(0));
        let (g, c) = (Arc::clone(&got), Arc::clone(&command));
        std::thread::Builder::new()
            .name("worldfs-run-signals".into())
            .spawn(move || {
                for sig in signals.forever() {
                    let pid = c.load(Ordering::SeqCst);
                    if pid > 0 {
                        if sig == SIGTERM || sig == SIGHUP {
                            // SAFETY: the command's pid, set only while it is not reaped.
                            unsafe { libc::kill(pid, sig) };
                        }
                    } else {
                        g.store(sig, Ordering::SeqCst);
                    }
                }
            })
            .context("starting the signal thread")?;
        Ok(Signals { got, command })
    }

    /// An error if a signal asked the run to end while `doing`.
    fn check(&self, doing: &str) -> anyhow::Result<()> {
        match self.got.load(Ordering::SeqCst) {
            0 => Ok(()),
            sig => bail!("stopped by signal {sig} while {doing}"),
        }
    }

    /// Runs `command` to its end, passing signals on as it runs.
    fn run(&self, command: &mut Command) -> std::io::Result<ExitStatus> {
        let mut child = command.spawn()?;
        self.command.store(child.id() as i32, Ordering::SeqCst);
        let status = child.wait();
        self.command.store(0, Ordering::SeqCst);
        status
    }
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

    /// A log file being written, and a reader of it as `worldfs run` has.
    fn tail() -> (tempfile::TempDir, File, Tail, Receiver<String>) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.log");
        let writer = File::create(&path).unwrap();
        let (tx, rx) = crossbeam_channel::bounded(1);
        let tail = Tail {
            file: File::open(&path).unwrap(),
            partial: Vec::new(),
            quiet: false,
            proxy_url: tx,
            proxy_calls: None,
        };
        (dir, writer, tail, rx)
    }

    fn write(mut f: &File, s: &str) {
        std::io::Write::write_all(&mut f, s.as_bytes()).unwrap();
    }

    #[test]
    fn warnings_are_shown_once_their_line_is_whole() {
        let (_d, w, mut t, _) = tail();
        write(
            &w,
            "worldfs: mounted /p in place\nworldfs: warning: the wor",
        );
        assert!(t.pump().is_empty(), "half a line shown");
        write(
            &w,
            "ld is not kept\nerror: unexpected argument\n2026 INFO x\n",
        );
        assert_eq!(
            t.pump(),
            [
                "worldfs: warning: the world is not kept",
                "error: unexpected argument"
            ]
        );
        assert!(t.pump().is_empty(), "a line shown twice");
    }

    #[test]
    fn while_quiet_warnings_stay_in_the_log_and_the_proxy_address_still_comes() {
        let (_d, w, mut t, rx) = tail();
        t.quiet = true;
        write(
            &w,
            "worldfs: warning: while the agent runs\nworldfs: proxy on http://127.0.0.1:5 for\n",
        );
        assert!(t.pump().is_empty());
        assert_eq!(rx.try_recv().as_deref(), Ok("http://127.0.0.1:5"));
        t.quiet = false;
        write(&w, "worldfs: warning: after\n");
        assert_eq!(t.pump(), ["worldfs: warning: after"]);
    }

    #[test]
    fn the_proxy_address_is_read_from_its_line() {
        let line = "worldfs: proxy on http://127.0.0.1:41234 for the mount's socket /run/x.sock, \
                    forwarding to https://api.anthropic.com";
        assert_eq!(proxy_url(line).as_deref(), Some("http://127.0.0.1:41234"));
        assert_eq!(
            proxy_url("worldfs: start Claude Code with ANTHROPIC_BASE_URL=x"),
            None
        );
    }

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

    #[test]
    fn the_proxys_calls_are_read_from_its_last_line() {
        let line = "worldfs: proxy stopped; model calls: 3 sent with the projection, 1 as they \
                    came, 2 as they came because the projection failed";
        assert_eq!(proxy_calls(line), Some(6));
        let none = "worldfs: proxy stopped; model calls: 0 sent with the projection, 0 as they \
                    came, 0 as they came because the projection failed";
        assert_eq!(proxy_calls(none), Some(0));
        assert_eq!(
            proxy_calls("worldfs: proxy on http://127.0.0.1:5 for"),
            None
        );
    }

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
