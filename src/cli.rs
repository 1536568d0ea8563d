//! Command-line interface.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

use crate::fs::watcher::WatchWith;
use crate::fs::{IoMode, IoUringMode};

/// worldfs: a FUSE passthrough that records what a coding agent reads and writes, so a harness
/// can send the model the present state of its files instead of a growing, stale history.
#[derive(Debug, Parser)]
#[command(name = "worldfs", version, propagate_version = true)]
pub struct Cli {
    /// More logging on stderr (-v info, -vv debug); WORLDFS_LOG=FILTER overrides.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Mount SOURCE (in place, or at MOUNTPOINT) and serve it until unmounted.
    ///
    /// Every operation passes through to the files in SOURCE. Without MOUNTPOINT the mount
    /// covers SOURCE's own path, so tools keep working at the same path (a shell already inside
    /// SOURCE should `cd .` to enter the mount). Runs in the foreground; SIGINT or SIGTERM
    /// unmounts cleanly. Changes made to SOURCE behind the mount are picked up by a watcher and
    /// are visible through the mount at once.
    Mount {
        /// The project directory to serve.
        source: PathBuf,
        /// Where to show it; defaults to SOURCE itself (mount in place).
        mountpoint: Option<PathBuf>,
        #[command(flatten)]
        options: MountOptions,
    },
    /// Mount DIR in place, run COMMAND in it, and unmount when COMMAND ends: the whole set-up in
    /// one command (`worldfs run -- claude`, or `worldfs run --proxy -- claude`).
    ///
    /// The mount (and with --proxy, `worldfs proxy`) run as processes of their own, in their
    /// own process group, so a Ctrl-C meant for the agent reaches the agent only; their
    /// messages go to --log. COMMAND runs in the mount, with WORLDFS_SOCKET set to the mount's
    /// socket (and with --proxy, WORLDFS_PROXY_URL to the proxy, and ANTHROPIC_BASE_URL unless
    /// the upstream is OpenAI's), in the foreground: SIGTERM and SIGHUP sent to `worldfs run` are passed on to it. When it ends,
    /// the proxy stops and DIR is unmounted (detached, if a process COMMAND left behind still
    /// uses it: the daemon then serves it until it lets go), and `worldfs run` exits with
    /// COMMAND's status (128+N if a signal N ended it; 127 if COMMAND cannot be found).
    /// If `worldfs run` is killed, the mount and the proxy stop too (COMMAND goes on).
    /// `claude` or `codex` as COMMAND is given `worldfs hook` on its command line when none of
    /// its settings files register it (Claude Code's `--settings`; Codex's `-c hooks.…` with
    /// their trust for the run), nothing written; --no-hooks leaves the command as it is.
    /// With --proxy, `codex` using its `openai` provider is given the proxy's address on its
    /// command line (`-c openai_base_url=...`; Codex reads no variable for it). What would send
    /// the agent's calls past the proxy is warned of: a Claude Code settings file that sets
    /// ANTHROPIC_BASE_URL, a Codex provider of your own on a free port, and a run in which no
    /// model call reached the proxy.
    Run {
        /// The directory to mount in place and run COMMAND in; by default the current one.
        #[arg(short = 'C', value_name = "DIR")]
        dir: Option<PathBuf>,
        #[command(flatten)]
        options: MountOptions,
        /// Also serve COMMAND's model calls with the projection in place of their history:
        /// starts `worldfs proxy` for the mount and sets WORLDFS_PROXY_URL to it in COMMAND's
        /// environment, and ANTHROPIC_BASE_URL (Claude Code) unless --upstream is OpenAI's.
        #[arg(long)]
        proxy: bool,
        /// With --proxy: where the proxy sends requests. By default, for `codex`, where its
        /// `openai` provider goes (the origin of a config's openai_base_url, a gateway, else
        /// https://api.openai.com); for any other COMMAND, ANTHROPIC_BASE_URL when the
        /// environment sets it (a gateway the agent would have used), else
        /// https://api.anthropic.com.
        #[arg(long, env = "WORLDFS_PROXY_UPSTREAM", value_name = "URL")]
        upstream: Option<String>,
        /// With --proxy: the address it listens on (port 0 picks a free one).
        #[arg(long, default_value = "127.0.0.1:0", value_name = "ADDR")]
        listen: std::net::SocketAddr,
        /// Where the mount's and the proxy's messages go (replaced at each run; a regular
        /// file); by default NAME.log beside the mount's socket. Warnings are also shown on
        /// stderr while COMMAND does not run. A mount left detached at the end writes its
        /// last messages there after `worldfs run` has exited.
        #[arg(long, value_name = "FILE")]
        log: Option<PathBuf>,
        /// Do not give `claude` or `codex` worldfs's hooks on its command line, which `worldfs
        /// run` does when none of the agent's settings files register `worldfs hook` (for
        /// Codex: none whose hooks it trusts, in a project it trusts) and
        /// COMMAND gives no settings (`claude --settings`) or hooks (`codex -c hooks.…`) of
        /// its own: Claude Code gets `--settings` with the hooks `worldfs hook --install`
        /// writes, Codex `-c hooks.EVENT=…` for each and `-c hooks.state=…` trusting them for
        /// this run. Without the hooks the mount knows neither the session's goal nor its
        /// steps.
        #[arg(long)]
        no_hooks: bool,
        /// The program to run in the mount, and its arguments (after `--`).
        #[arg(
            required = true,
            trailing_var_arg = true,
            allow_hyphen_values = true,
            value_name = "COMMAND"
        )]
        command: Vec<OsString>,
    },
    /// Internal: watches a daemon and aborts its connection if it dies (started by `mount`).
    #[command(name = "__watchdog", hide = true)]
    Watchdog {
        pid: u32,
        dev: u64,
        target: PathBuf,
        /// The daemon's socket, removed if the daemon dies without removing it.
        socket: Option<PathBuf>,
        /// The descriptor of the connection's fusectl `abort` file, opened by the daemon.
        #[arg(long)]
        abort_fd: Option<i32>,
    },
    /// Unmount a worldfs mount, also one whose daemon died.
    ///
    /// Returns once the daemon has saved the world and exited (at most 10 s), so a `worldfs
    /// mount` right after goes on from that world. A mount still in use (a shell inside it) is
    /// detached instead, saying by what: its daemon serves those files until they are closed.
    Unmount {
        /// The mount point (SOURCE for an in-place mount).
        path: PathBuf,
    },
    /// Call a socket method and print its result as JSON (a raw JSON-RPC client).
    ///
    /// Example: `worldfs ctl projection.get '{"format":"text","budget":4000}'`. The methods are
    /// listed by `worldfs ctl initialize` and documented in docs/protocol.md.
    Ctl {
        #[command(flatten)]
        target: SocketArg,
        /// Method name, e.g. `stats`.
        method: String,
        /// Params as a JSON object; `-` reads them from stdin.
        params: Option<String>,
    },
    /// Print the current projection of the world.
    Projection {
        #[command(flatten)]
        target: SocketArg,
        #[command(flatten)]
        options: ProjectionOptions,
        /// Print the whole response (body, token estimate, evicted and withheld entries) as
        /// JSON instead of only the body.
        #[arg(long)]
        full: bool,
        /// List at most N of the entries the projection left out (the daemon lists 100 unless
        /// told; `evicted_total` counts them all).
        #[arg(long, value_name = "N")]
        evicted_limit: Option<usize>,
        /// A directory in the mount (`-C DIR` says the same); by default the current one.
        #[arg(value_name = "DIR", conflicts_with = "dir")]
        at: Option<PathBuf>,
    },
    /// Human summary of a mount: socket, entries, tokens, what was observed (and what changed
    /// behind the mount), drops, the goal and the task list.
    Status {
        #[command(flatten)]
        target: SocketArg,
        /// A directory in the mount (`-C DIR` says the same); by default the current one.
        #[arg(value_name = "DIR", conflicts_with = "dir")]
        at: Option<PathBuf>,
    },
    /// Replay recorded agent runs (worldfs-trace/1) through a real mount and measure what each
    /// context strategy would have sent (docs/replay.md).
    ///
    /// Each trace's `.base.tar.gz` beside it is unpacked into a fresh temporary directory,
    /// mounted in place; every step is replayed with real system calls (recorded commands are
    /// never run, only their file accesses). Writes per-trace CSV/JSON, summary.md and
    /// tokens.svg to --out, and prints the summary table.
    Replay {
        /// Trace files (`*.jsonl`).
        #[arg(required = true)]
        traces: Vec<PathBuf>,
        /// Where the reports go.
        #[arg(long, default_value = "replay-out")]
        out: PathBuf,
        /// Budgets for the worldfs policy, in tokens (the first is also the seed policy's):
        /// `8000` or `8k`, each at most once.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "8000,16000,32000",
            value_parser = tokens
        )]
        budgets: Vec<u64>,
        /// Also write every projection served into DIR (created if missing), one JSON file per
        /// trace, turn and strategy: its body, tokens, and what the policy evicted and why. For
        /// seeing what a policy kept at the turn a metric moved.
        #[arg(long, value_name = "DIR")]
        dump_projections: Option<PathBuf>,
        /// Also write one JSON line per next-step need a strategy missed to FILE (emptied first):
        /// the path and lines, what of the file the request held, and why the projection evicted
        /// it; and one per stale view a request held, with where it disagrees with the disk.
        #[arg(long, value_name = "FILE")]
        misses: Option<PathBuf>,
    },
    /// Tell the mount what a Claude Code (or Codex) hook event means (the goal, the last tool
    /// call).
    ///
    /// Reads one hook event (JSON) on stdin, as Claude Code passes it (Codex's are of the same
    /// shape: `worldfs hook --install --codex`), and forwards it to the
    /// socket of the mount containing the event's `cwd`: a prompt sets the goal (later prompts
    /// are added to it), a new session (`startup`, `clear`) clears it, a compaction is noted
    /// (the conversation then opens with its summary, and `worldfs proxy` finds it by that), so
    /// is a resume (the proxy reads which conversation from its next call), and each finished
    /// tool call becomes the last step, with the lines a Read showed as the file's view. A
    /// Bash call's output is cached while the files it read are unchanged, and a Grep or Glob
    /// result until anything changes below the directory it searched: their PreToolUse marks
    /// where they start. The agent's task list (TodoWrite, or TaskCreate, TaskUpdate and
    /// TaskList) goes into the structured state, so projections carry its plan; a new session
    /// clears it with the goal. A subagent's calls are not the session's steps. Register it for
    /// SessionStart, UserPromptSubmit, PreToolUse (Bash, Grep, Glob), PostToolUse and
    /// PostToolUseFailure (README, "With Claude Code"); `worldfs hook --install` does that. It
    /// always exits 0 without output, so a missing mount never gets in the agent's way; `-v`
    /// prints what went wrong on stderr.
    Hook {
        #[command(flatten)]
        target: SocketArg,
        /// Register `worldfs hook` for those events in Claude Code's settings of the project in
        /// the current directory (or -C DIR): DIR/.claude/settings.local.json, created if
        /// missing. Everything else the file holds stays; installing again replaces ours. Then
        /// exit.
        #[arg(long, conflicts_with = "uninstall")]
        install: bool,
        /// Remove every `worldfs hook` command from those settings, then exit.
        #[arg(long)]
        uninstall: bool,
        /// The settings file for --install or --uninstall instead (`~/.claude/settings.json`:
        /// every project of this user; with --codex, `~/.codex/hooks.json`).
        #[arg(long, value_name = "FILE")]
        settings: Option<PathBuf>,
        /// --install or --uninstall for Codex instead of Claude Code: its hooks file of the
        /// project, DIR/.codex/hooks.json, with SessionStart, UserPromptSubmit, PreToolUse
        /// (Bash), PostToolUse and Stop. Codex runs them once you trust them (README, "With
        /// Codex").
        #[arg(long)]
        codex: bool,
    },
    /// Serve Claude Code's (or Codex's) API calls with the projection in place of its history.
    ///
    /// Start it in the mounted project, then start Claude Code there with
    /// `ANTHROPIC_BASE_URL=http://ADDR` (the address it prints); for Codex, give it
    /// `--upstream https://api.openai.com` and make `http://ADDR/v1` the `base_url` of Codex's
    /// model provider (README, "With Codex"). Each request of the session's
    /// main conversation is sent upstream with its history replaced by the mount's projection:
    /// Claude Code's first message as it came (the first prompt, or after a compaction the
    /// summary the conversation opens with), the later prompts, the files and outputs as they
    /// are now, then the real last turn verbatim. System prompt, tools and every other field pass
    /// untouched; subagents and side requests pass as they came, and so does any request the
    /// mount cannot project (the agent is never stopped). Needs `worldfs hook` (for the goal).
    /// Answers stream back unbuffered. `-v` logs each request rewritten (what was sent instead
    /// of what), and why a call that looks like the session's own went as it came; `-vv` also
    /// why every other call did.
    Proxy {
        #[command(flatten)]
        target: SocketArg,
        /// Address to listen on (port 0 picks a free one; the address is printed).
        #[arg(long, default_value = "127.0.0.1:8788")]
        listen: std::net::SocketAddr,
        /// Where requests go.
        #[arg(
            long,
            env = "WORLDFS_PROXY_UPSTREAM",
            default_value = "https://api.anthropic.com"
        )]
        upstream: String,
        /// Token budget of the projection (`8000` or `8k`); the daemon's configured budget when
        /// absent.
        #[arg(long, value_parser = tokens)]
        budget: Option<u64>,
        /// Rewrite nothing: forward every request as it came, and print for each one of the main
        /// conversation what the projection would have sent instead.
        #[arg(long)]
        observe: bool,
        /// The agent is given `worldfs hook` another way than a settings file (as `worldfs run`
        /// gives Claude Code the hooks on its command line): no warning that no settings file
        /// of the project registers it.
        #[arg(long)]
        hooks_elsewhere: bool,
    },
    /// Set the agent's goal (shown first in every projection); without TEXT, print it.
    ///
    /// With several Claude Code sessions on the mount, each has its own goal: this one is the
    /// goal of the session heard from last, unless --session names another.
    Goal {
        #[command(flatten)]
        target: SocketArg,
        /// The session whose goal it is (Claude Code's session id, as its hooks and transcripts
        /// name it).
        #[arg(long, value_name = "ID")]
        session: Option<String>,
        /// The goal, in words.
        text: Option<String>,
        /// Remove the goal.
        #[arg(long, conflicts_with = "text")]
        clear: bool,
    },
    /// Print what happens in the mount as it happens, one line each: who read or wrote which
    /// file (program, pid, byte ranges), listings, renames and removals, what changed behind
    /// the mount, each tool call the hook records, and each projection served (each model call
    /// behind `worldfs proxy`): its tokens, and what it newly left out. Runs until Ctrl-C or
    /// until the mount goes away.
    ///
    /// Each line: local time, the program and its pid, how the world counts it (`agent`: the
    /// agent or a tool it ran that shows what it reads, `weak`: an interpreter, compiler or
    /// search, `scan`: a burst of reads such as a walk of the tree), what was done, the path
    /// (relative to the mount's root) and details. Consecutive reads or writes of one file by
    /// one process arriving together are one line. A projection's line says its tokens of the
    /// budget, the entries shown and left out, and below it each part left out that the
    /// previous projection of the same conversation showed (and why: no room, or faded).
    Watch {
        #[command(flatten)]
        target: SocketArg,
        /// Only what happens at or below PATH (a file or directory in the mount; it also says
        /// which mount, as `-C` would).
        #[arg(value_name = "PATH")]
        path: Option<PathBuf>,
        /// Only observations of these classes (comma-separated): agent, weak, scan, and none
        /// (changes behind the mount, and callers the world could not name); no projections.
        #[arg(long, value_enum, value_delimiter = ',', value_name = "CLASS")]
        class: Vec<WatchClass>,
        /// One JSON object per observation, as the socket sends them (docs/protocol.md,
        /// `observations.subscribe`), nothing left out or merged; a projection served is one
        /// with `"event": "projection"` (`projections.subscribe`).
        #[arg(long)]
        json: bool,
        /// Also the lines left out by default: closes of files that were only read, and the
        /// watcher's echoes of the mount's own changes.
        #[arg(long, conflicts_with = "json")]
        all: bool,
        /// First print the last N observations (of those PATH and --class keep) that the mount
        /// still holds: it keeps the last 8,192 it made, so what led up to now can be read
        /// after the fact.
        #[arg(long, value_name = "N", default_value_t = 0)]
        recent: usize,
    },
}

/// A class `worldfs watch --class` may name (the socket's `classes` filter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WatchClass {
    Agent,
    Weak,
    Scan,
    None,
}

/// What `worldfs projection` asks the daemon for.
#[derive(Debug, Clone, clap::Args)]
pub struct ProjectionOptions {
    /// anthropic, openai_chat, openai_responses, text or json.
    #[arg(long, default_value = "text")]
    pub format: String,
    /// Token budget (`8000` or `8k`); the daemon's configured budget when absent.
    #[arg(long, value_parser = tokens)]
    pub budget: Option<u64>,
    /// Name of the synthesized read tool (e.g. `Read`).
    #[arg(long)]
    pub tool_name: Option<String>,
    /// Selection policy; the configured one when absent.
    #[arg(long)]
    pub policy: Option<String>,
    /// Show the last tool call's result as recorded. By default, runs of lines it shares with
    /// the files and outputs shown above are replaced by one line naming them.
    #[arg(long)]
    pub verbatim_step: bool,
    /// Project for this session's conversation (Claude Code's session id, as `worldfs status`
    /// counts them): its goal and task list, and, while other sessions work on the mount too,
    /// its own files, last step and outputs. By default, the session heard from last.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
}

/// Which daemon a client command talks to.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SocketArg {
    /// The daemon's socket; by default, the socket of the worldfs mount that contains DIR
    /// (-C), else $WORLDFS_SOCKET, else the mount that contains the current directory.
    #[arg(long, value_name = "PATH", conflicts_with = "dir")]
    pub socket: Option<PathBuf>,
    /// Talk to the worldfs mount that contains DIR, as if run there (like `git -C`).
    #[arg(short = 'C', value_name = "DIR")]
    pub dir: Option<PathBuf>,
}

/// How `worldfs mount` (and the mount `worldfs run` makes) serves SOURCE.
#[derive(Debug, Clone, PartialEq, clap::Args)]
pub struct MountOptions {
    /// How file data flows: `auto` uses kernel passthrough when the kernel offers it and the
    /// daemon is root (native speed; reads and writes are observed at open and close; files
    /// up to 256 KiB opened only for reading are served from the kernel's page cache, which
    /// saves a round trip per open), `daemon` routes every read and write through worldfs
    /// (byte ranges observed).
    #[arg(long, value_enum, default_value_t = IoMode::Auto)]
    pub io: IoMode,
    /// How requests travel between the kernel and worldfs. `auto` uses FUSE-over-io_uring
    /// when the kernel offers it: one queue per CPU, so a request is served on the CPU that
    /// made it (much faster metadata on small VMs); `on` fails at mount time if it is not
    /// available; `off` uses /dev/fuse only. The kernel (Linux 6.14+) offers it only while
    /// /sys/module/fuse/parameters/enable_uring is Y (root: `echo Y > ...`; worldfs never
    /// changes it).
    #[arg(long, value_enum, default_value_t = IoUringMode::Auto, env = "WORLDFS_IO_URING")]
    pub io_uring: IoUringMode,
    /// Do not record observations (pure passthrough, for comparison).
    #[arg(long)]
    pub no_observe: bool,
    /// Threads reading FUSE requests from /dev/fuse. With FUSE-over-io_uring (--io-uring),
    /// one more thread per CPU serves the requests and these carry only FORGET and INTERRUPT.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: u16,
    /// Seconds the kernel may cache names and attributes. Safe to keep long: the watcher
    /// invalidates whatever changes behind the mount.
    #[arg(long, default_value_t = 300.0)]
    pub cache_timeout: f64,
    /// Give `statx` callers each file's birth time (`stat FILE`'s "Birth", `find -newerB`),
    /// which the kernel must ask worldfs for, once per file and cache timeout: Node's and
    /// Rust's `stat` ask for it on every call, so a first walk of a tree by such a program
    /// takes about twice as long (a Node walk of 19,000 files, 0.8 -> 1.6 s here). Without
    /// it, birth times are missing through the mount ("Birth: -") and nothing else changes.
    #[arg(long)]
    pub birth_times: bool,
    /// Do not watch SOURCE for changes behind the mount (kernel caching is then disabled,
    /// so nothing is ever served stale, at a cost in speed). Wins over --watcher.
    #[arg(long)]
    pub no_watch: bool,
    /// How SOURCE is watched for changes behind the mount. `fanotify` (root only, Linux
    /// 5.9+) puts one mark on SOURCE's file system: no limit on directories, nothing to
    /// walk at mount, and a directory made behind the mount is watched from its first
    /// file. `inotify` sets a watch on every directory (fs.inotify.max_user_watches bounds
    /// them). `auto` uses fanotify where it can: as root, on a file system with file
    /// handles. Either way, a file system mounted below SOURCE (also after the mount) is
    /// watched with inotify, and shown through the mount as it is mounted or unmounted.
    #[arg(long, value_enum, default_value_t = WatchWith::Auto, env = "WORLDFS_WATCHER")]
    pub watcher: WatchWith,
    /// World cache settings (attribution, ignore rules, secrets, budget, policy); see
    /// docs/worldfs.toml.md. Without it the defaults apply.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Append every observation to this JSONL file (rotated by size; for audit only).
    #[arg(long, value_name = "FILE")]
    pub journal: Option<PathBuf>,
    /// Serve the socket here instead of the default ($XDG_RUNTIME_DIR/worldfs/NAME.sock, or
    /// /tmp/worldfs-$UID/NAME.sock, NAME made from the mountpoint path; printed at start).
    #[arg(long, value_name = "PATH")]
    pub socket: Option<PathBuf>,
    /// Keep the world in this file across restarts of the daemon, instead of the default
    /// ($XDG_STATE_HOME/worldfs/NAME.json, or ~/.local/state/worldfs/NAME.json, NAME made
    /// from the SOURCE path). The world is saved every 10 s while it changes and at
    /// unmount, and the next mount of SOURCE starts from it: what the agent saw and
    /// changed, the goal, the last step, the task list, and the command outputs whose
    /// input files are unchanged. No file content is saved; it is read from disk as always.
    /// A world saved for a directory since removed and made again at the same path is not
    /// used (the default file is set aside as NAME.json.earlier; a FILE named here stops the
    /// mount).
    #[arg(long, value_name = "FILE", conflicts_with = "no_state")]
    pub state: Option<PathBuf>,
    /// Start with an empty world, leaving out what was saved (the next save replaces it).
    #[arg(long, conflicts_with = "no_state")]
    pub fresh: bool,
    /// Neither read nor save a kept world: the world lives as long as the mount.
    #[arg(long)]
    pub no_state: bool,
}

impl MountOptions {
    /// The same options as `worldfs mount` arguments: `worldfs run` starts its mount as a
    /// process of its own, so that a Ctrl-C meant for the agent does not unmount it.
    pub fn args(&self) -> Vec<OsString> {
        let name = |v: Option<clap::builder::PossibleValue>| {
            v.map(|v| v.get_name().to_owned()).unwrap_or_default()
        };
        let mut a: Vec<OsString> = vec![
            "--io".into(),
            name(self.io.to_possible_value()).into(),
            "--io-uring".into(),
            name(self.io_uring.to_possible_value()).into(),
            "--threads".into(),
            self.threads.to_string().into(),
            "--cache-timeout".into(),
            self.cache_timeout.to_string().into(),
            "--watcher".into(),
            name(self.watcher.to_possible_value()).into(),
        ];
        let flags = [
            (self.no_observe, "--no-observe"),
            (self.no_watch, "--no-watch"),
            (self.birth_times, "--birth-times"),
            (self.fresh, "--fresh"),
            (self.no_state, "--no-state"),
        ];
        a.extend(flags.iter().filter(|(on, _)| *on).map(|(_, f)| f.into()));
        let paths = [
            (&self.config, "--config"),
            (&self.journal, "--journal"),
            (&self.socket, "--socket"),
            (&self.state, "--state"),
        ];
        for (p, flag) in paths {
            if let Some(p) = p {
                a.push(flag.into());
                a.push(p.clone().into_os_string());
            }
        }
        a
    }
}

/// A token budget: a count, or thousands with `k` (`8k`, `1.5k`), as budgets are spoken of;
/// within what the socket accepts, so a bad one fails here and not at the first request.
fn tokens(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let n = match t.strip_suffix(['k', 'K']) {
        None => t
            .parse::<u64>()
            .map_err(|_| format!("`{t}` is not a number of tokens (such as 8000 or 8k)"))?,
        Some(num) => {
            let x: f64 = num
                .parse()
                .map_err(|_| format!("`{num}` is not a number of thousands"))?;
            let n = x * 1000.0;
            if !n.is_finite() || n.fract() != 0.0 || n < 0.0 {
                return Err(format!("{t} is not a whole number of tokens"));
            }
            n as u64
        }
    };
    crate::world::config::check_budget(n).map_err(|e| format!("budget {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_are_counts_or_thousands() {
        assert_eq!(tokens("8000"), Ok(8000));
        assert_eq!(tokens("8k"), Ok(8000));
        assert_eq!(tokens("16K"), Ok(16000));
        assert_eq!(tokens("1.5k"), Ok(1500));
        for bad in [
            "0", "0k", "-1", "8kb", "1.0005k", "k", "3000000", "nan k", "infk",
        ] {
            assert!(tokens(bad).is_err(), "{bad} accepted");
        }
        let replay = Cli::try_parse_from(["worldfs", "replay", "t.jsonl", "--budgets", "4k,6000"]);
        match replay.map(|c| c.command) {
            Ok(Command::Replay { budgets, .. }) => assert_eq!(budgets, vec![4000, 6000]),
            other => panic!("not a replay: {other:?}"),
        }
    }

    fn mount_options(args: &[OsString]) -> MountOptions {
        let mut argv: Vec<OsString> = vec!["worldfs".into(), "mount".into(), "/p".into()];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv).map(|c| c.command) {
            Ok(Command::Mount { options, .. }) => options,
            other => panic!("not a mount: {other:?}"),
        }
    }

    /// `worldfs run` hands its mount options on as arguments: every one must come back as it
    /// was given, or the mount would not be the one asked for.
    #[test]
    fn mount_options_come_back_from_their_arguments() {
        let defaults = mount_options(&[]);
        assert_eq!(mount_options(&defaults.args()), defaults);
        let every = MountOptions {
            io: IoMode::Daemon,
            io_uring: IoUringMode::Off,
            no_observe: true,
            threads: 9,
            cache_timeout: 2.5,
            no_watch: true,
            birth_times: true,
            watcher: WatchWith::Inotify,
            config: Some("/c.toml".into()),
            journal: Some("/j.jsonl".into()),
            socket: Some("/s.sock".into()),
            state: None,
            fresh: false,
            no_state: true,
        };
        assert_eq!(mount_options(&every.args()), every);
        let kept = MountOptions {
            state: Some("/state.json".into()),
            fresh: true,
            no_state: false,
            ..every
        };
        assert_eq!(mount_options(&kept.args()), kept);
    }
}
