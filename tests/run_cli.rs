//! `worldfs run`: the mount is there for the command and gone after it, the command's exit
//! status comes back, a terminal's Ctrl-C reaches the command and not the mount, SIGTERM is
//! passed on, and `--proxy` points the command at a proxy that stops with it.

mod common;

use common::{
    Mount, Scratch, bin, require_fuse, run_with_timeout, wait_child, worldfs, worldfs_mounts_at,
};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::Duration;

const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// A project to run in, and a place outside it for the command's reports.
struct Setup {
    scratch: Scratch,
}

impl Setup {
    fn new() -> Setup {
        require_fuse();
        let scratch = Scratch::new();
        for d in ["proj", "out", "runtime"] {
            std::fs::create_dir(scratch.join(d)).unwrap();
        }
        std::fs::write(scratch.join("proj/notes.txt"), "a line the agent reads\n").unwrap();
        Setup { scratch }
    }

    fn proj(&self) -> std::path::PathBuf {
        self.scratch.join("proj")
    }

    fn out(&self, name: &str) -> std::path::PathBuf {
        self.scratch.join("out").join(name)
    }

    /// `worldfs run -C proj --no-state ARGS... -- sh -c SCRIPT`, its socket and log in a
    /// runtime directory of the test's own.
    fn command(&self, args: &[&str], script: &str) -> Command {
        let mut c = Command::new(bin());
        c.env("XDG_RUNTIME_DIR", self.scratch.join("runtime"))
            .env("WFS", bin())
            .env("OUT", self.scratch.join("out"))
            .arg("run")
            .arg("-C")
            .arg(self.proj())
            .arg("--no-state")
            .args(args)
            .args(["--", "sh", "-c", script]);
        c
    }

    fn run(&self, args: &[&str], script: &str) -> Output {
        run_with_timeout(&mut self.command(args, script), RUN_TIMEOUT)
    }

    /// [`Setup::run`], which must succeed: its stderr.
    fn run_ok(&self, args: &[&str], script: &str) -> String {
        let out = self.run(args, script);
        assert!(out.status.success(), "stderr:\n{}", stderr(&out));
        stderr(&out)
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.out(name))
            .unwrap_or_else(|e| panic!("the command's report {name}: {e}"))
    }

    /// A stand-in for an agent (`out/NAME`, a script that does nothing): for `worldfs run`'s
    /// warnings, the program's name is what counts.
    fn stand_in(&self, name: &str) -> std::path::PathBuf {
        self.stand_in_doing(name, "#!/bin/sh\nexit 0\n")
    }

    /// A stand-in program `out/NAME` whose text is `script`.
    fn stand_in_doing(&self, name: &str, script: &str) -> std::path::PathBuf {
        let p = self.out(name);
        std::fs::write(&p, script).unwrap();
        let exec = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
        std::fs::set_permissions(&p, exec).unwrap();
        p
    }

    /// `worldfs run -C proj --no-state ARGS... -- PROGRAM EXTRA...`, with HOME at `home` (and
    /// neither CODEX_HOME nor CLAUDE_CONFIG_DIR), which must succeed: its stderr.
    fn run_program(&self, args: &[&str], home: &Path, program: &Path, extra: &[&str]) -> String {
        let mut c = Command::new(bin());
        c.env("XDG_RUNTIME_DIR", self.scratch.join("runtime"))
            .env("HOME", home)
            .env_remove("CODEX_HOME")
            .env_remove("CLAUDE_CONFIG_DIR")
            .arg("run")
            .arg("-C")
            .arg(self.proj())
            .arg("--no-state")
            .args(args)
            .arg("--")
            .arg(program)
            .args(extra);
        let out = run_with_timeout(&mut c, RUN_TIMEOUT);
        assert!(out.status.success(), "stderr:\n{}", stderr(&out));
        stderr(&out)
    }

    /// `worldfs hook --install EXTRA... -C proj`, which must succeed.
    fn install_hooks(&self, extra: &[&str]) {
        let proj = self.proj();
        let mut args: Vec<&std::ffi::OsStr> = vec!["hook".as_ref(), "--install".as_ref()];
        args.extend(extra.iter().map(std::ffi::OsStr::new));
        args.extend(["-C".as_ref(), proj.as_os_str()]);
        let installed = worldfs(&args);
        assert!(installed.status.success(), "{installed:?}");
    }

    fn assert_unmounted(&self, out: &Output) {
        assert_eq!(
            worldfs_mounts_at(&self.proj()),
            0,
            "still mounted after `worldfs run` ended; stderr:\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// `worldfs run` started in a process group of its own (as a shell starts a job); the group is
/// killed if the test ends before it does, so a failed test leaves no command running.
struct Running {
    child: Child,
    done: bool,
}

impl Running {
    fn start(mut cmd: Command) -> Running {
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .unwrap();
        Running { child, done: false }
    }

    /// Waits for `ready` (a report the command writes once it runs).
    fn wait_ready(&mut self, ready: &Path) {
        if common::wait_until(Duration::from_secs(30), || ready.exists()).is_none() {
            panic!("the command never started");
        }
    }

    fn signal_group(&self, sig: i32) {
        // SAFETY: a signal to the group the test's own child leads, not reaped yet.
        unsafe { libc::kill(-(self.child.id() as i32), sig) };
    }

    fn signal(&self, sig: i32) {
        // SAFETY: a signal to the test's own child, not reaped yet.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Its exit status and stderr.
    fn wait(&mut self) -> (ExitStatus, String) {
        let status = wait_child(&mut self.child, RUN_TIMEOUT).expect("worldfs run did not end");
        self.done = true;
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            std::io::Read::read_to_string(&mut e, &mut err).unwrap();
        }
        (status, err)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if !self.done {
            self.signal_group(libc::SIGKILL);
            let _ = self.child.wait();
        }
    }
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Whether the mount table this process sees has a worldfs mount at `dir`, as a report line.
const MOUNTED: &str =
    r#"awk -v d="$PWD" '$5 == d && / - fuse.worldfs /' /proc/self/mountinfo | wc -l"#;

#[test]
fn the_command_runs_in_the_mount_which_is_gone_after_it_with_its_exit_status() {
    let s = Setup::new();
    let script = format!(
        r#"cat notes.txt > /dev/null
{MOUNTED} > "$OUT/mounted"
echo "$WORLDFS_SOCKET" > "$OUT/socket"
cd / && "$WFS" ctl entries.list > "$OUT/entries"
exit 7"#
    );
    let out = s.run(&[], &script);
    assert_eq!(out.status.code(), Some(7), "stderr:\n{}", stderr(&out));
    assert_eq!(
        s.read("mounted").trim(),
        "1",
        "the command ran outside the mount"
    );
    // Found through WORLDFS_SOCKET alone: the client ran from `/`.
    assert!(
        s.read("entries").contains("notes.txt"),
        "the mount did not record the command's read: {}",
        s.read("entries")
    );
    let socket = s.read("socket");
    assert!(
        socket
            .trim()
            .starts_with(s.scratch.join("runtime").to_str().unwrap()),
        "WORLDFS_SOCKET {socket:?}"
    );
    s.assert_unmounted(&out);
    let err = stderr(&out);
    assert!(err.contains("worldfs: mounted "), "stderr:\n{err}");
    assert!(err.contains("worldfs: unmounted "), "stderr:\n{err}");
    // The mount's own messages went to the log, named as the socket is, beside it.
    let log = Path::new(socket.trim()).with_extension("log");
    let log = std::fs::read_to_string(&log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    assert!(log.contains("worldfs: socket "), "log:\n{log}");
}

#[test]
fn a_command_that_cannot_run_exits_127_and_leaves_nothing_mounted() {
    let s = Setup::new();
    let mut c = Command::new(bin());
    c.env("XDG_RUNTIME_DIR", s.scratch.join("runtime"))
        .args(["run", "--no-state", "-C"])
        .arg(s.proj())
        .args(["--", "/no/such/program", "arg"]);
    let out = run_with_timeout(&mut c, RUN_TIMEOUT);
    assert_eq!(out.status.code(), Some(127), "stderr:\n{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot run /no/such/program"),
        "stderr:\n{}",
        stderr(&out)
    );
    s.assert_unmounted(&out);
}

#[test]
fn a_directory_already_in_a_worldfs_mount_is_refused() {
    let s = Setup::new();
    // The first run's command runs a second one inside its mount.
    let script = r#"mkdir -p sub && "$WFS" run -C sub --no-state -- true 2> "$OUT/second"; echo $? > "$OUT/second-status""#;
    let out = s.run(&[], script);
    assert!(out.status.success(), "stderr:\n{}", stderr(&out));
    assert_eq!(s.read("second-status").trim(), "1");
    let second = s.read("second");
    assert!(
        second.contains("is already in the worldfs mount at"),
        "second run's stderr:\n{second}"
    );
    s.assert_unmounted(&out);
}

/// A mount whose daemon died is not taken for a live one to run in: the error says how to remove it.
#[test]
fn a_dead_mount_is_named_with_the_way_out() {
    let m = Mount::in_place();
    m.kill9();
    let root = m.path("");
    let out = worldfs(&[
        "run".as_ref(),
        "-C".as_ref(),
        root.as_os_str(),
        "--".as_ref(),
        "true".as_ref(),
    ]);
    let err = stderr(&out);
    assert!(!out.status.success(), "stderr:\n{err}");
    assert!(
        err.contains("does not answer") && err.contains("worldfs unmount"),
        "stderr:\n{err}"
    );
}

/// A terminal sends Ctrl-C to its foreground process group: `worldfs run` and the command. The
/// mount, in a group of its own, must not get it (it would unmount under the agent).
#[test]
fn a_ctrl_c_to_the_terminals_group_reaches_the_command_not_the_mount() {
    let s = Setup::new();
    let script = format!(
        r#"trap "echo got > \"$OUT/int\"" INT
touch "$OUT/ready"
i=0; while [ ! -e "$OUT/go" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done
cat notes.txt > "$OUT/read"
{MOUNTED} > "$OUT/mounted""#
    );
    let mut run = Running::start(s.command(&[], &script));
    run.wait_ready(&s.out("ready"));
    run.signal_group(libc::SIGINT);
    common::wait_until(Duration::from_secs(10), || s.out("int").exists());
    std::fs::write(s.out("go"), "").unwrap();
    let (status, err) = run.wait();
    assert!(status.success(), "{status}; stderr:\n{err}");
    assert_eq!(
        s.read("int").trim(),
        "got",
        "the command did not get the Ctrl-C"
    );
    assert_eq!(
        s.read("mounted").trim(),
        "1",
        "the mount was gone after the Ctrl-C; stderr:\n{err}"
    );
    assert_eq!(s.read("read"), "a line the agent reads\n");
    assert_eq!(worldfs_mounts_at(&s.proj()), 0, "stderr:\n{err}");
}

#[test]
fn sigterm_is_passed_on_to_the_command() {
    let s = Setup::new();
    let script = r#"trap 'echo term > "$OUT/term"; exit 9' TERM
touch "$OUT/ready"
while :; do sleep 0.05; done"#;
    let mut run = Running::start(s.command(&[], script));
    run.wait_ready(&s.out("ready"));
    run.signal(libc::SIGTERM);
    let (status, _) = run.wait();
    assert_eq!(status.code(), Some(9));
    assert_eq!(s.read("term").trim(), "term");
    assert_eq!(worldfs_mounts_at(&s.proj()), 0);
}

#[test]
fn with_proxy_the_command_is_pointed_at_a_proxy_that_stops_with_it() {
    let s = Setup::new();
    let script = r#"echo "$ANTHROPIC_BASE_URL" > "$OUT/url"
echo "$WORLDFS_PROXY_URL" > "$OUT/proxy-url""#;
    let out = s.run(&["--proxy", "--upstream", "http://127.0.0.1:9"], script);
    assert!(out.status.success(), "stderr:\n{}", stderr(&out));
    let url = s.read("url").trim().to_owned();
    assert_eq!(url, s.read("proxy-url").trim());
    let addr = url
        .strip_prefix("http://")
        .unwrap_or_else(|| panic!("ANTHROPIC_BASE_URL {url:?}"));
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    assert!(addr.ip().is_loopback() && addr.port() != 0, "{addr}");
    // The project has no hooks: the proxy's warning is shown before the command runs.
    assert!(
        stderr(&out).contains("register `worldfs hook`"),
        "stderr:\n{}",
        stderr(&out)
    );
    assert!(
        std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err(),
        "the proxy still listens at {addr} after the run"
    );
    s.assert_unmounted(&out);
}

/// While the command runs, the proxy answers at the address it was given.
#[test]
fn with_proxy_the_proxy_listens_while_the_command_runs() {
    let s = Setup::new();
    let script = r#"hostport=${ANTHROPIC_BASE_URL#http://}
echo "$hostport" > "$OUT/addr"
touch "$OUT/ready"
i=0; while [ ! -e "$OUT/go" ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done"#;
    let mut run =
        Running::start(s.command(&["--proxy", "--upstream", "http://127.0.0.1:9"], script));
    run.wait_ready(&s.out("ready"));
    let addr: std::net::SocketAddr = s.read("addr").trim().parse().unwrap();
    let connected = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5));
    std::fs::write(s.out("go"), "").unwrap();
    let (status, _) = run.wait();
    assert!(connected.is_ok(), "no proxy at {addr}: {connected:?}");
    assert!(status.success(), "{status}");
    assert_eq!(worldfs_mounts_at(&s.proj()), 0);
}

/// The children of the process `pid` (its main thread's, which starts them all).
fn children(pid: u32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Kills what `worldfs run` left behind if the test fails, so no proxy or daemon runs on.
struct Orphans(Vec<i32>);

impl Drop for Orphans {
    fn drop(&mut self) {
        for &pid in &self.0 {
            // SAFETY: pids of processes this test started, through `worldfs run`.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// Killed so that it cannot stop anything itself, `worldfs run` leaves no mount and no proxy:
/// they are told to stop when it ends. The command goes on, out of the mount here.
#[test]
fn a_killed_run_leaves_no_mount_and_no_proxy() {
    let s = Setup::new();
    let script = r#"echo "${WORLDFS_PROXY_URL#http://}" > "$OUT/addr"
cd /
touch "$OUT/ready"
i=0; while [ ! -e "$OUT/go" ] && [ $i -lt 600 ]; do sleep 0.05; i=$((i+1)); done
touch "$OUT/done""#;
    let mut run =
        Running::start(s.command(&["--proxy", "--upstream", "http://127.0.0.1:9"], script));
    run.wait_ready(&s.out("ready"));
    let addr: std::net::SocketAddr = s.read("addr").trim().parse().unwrap();
    let started = children(run.child.id());
    assert_eq!(started.len(), 3, "the mount, the proxy and the command");
    let _orphans = Orphans(started);
    assert_eq!(worldfs_mounts_at(&s.proj()), 1);

    run.signal(libc::SIGKILL);
    // Not `wait`: the command, still running, holds the stderr it would read to its end.
    let status = wait_child(&mut run.child, RUN_TIMEOUT).expect("a SIGKILL did not end it");
    run.done = true;
    assert_eq!(status.signal(), Some(libc::SIGKILL));
    let unmounted = common::wait_until(Duration::from_secs(20), || {
        worldfs_mounts_at(&s.proj()) == 0
    });
    let closed = common::wait_until(Duration::from_secs(20), || {
        std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(2)).is_err()
    });
    // The command was not the run's to stop.
    let command_on = !s.out("done").exists();
    std::fs::write(s.out("go"), "").unwrap();
    assert!(
        unmounted.is_some(),
        "the mount stayed after `worldfs run` was killed"
    );
    assert!(
        closed.is_some(),
        "the proxy at {addr} stayed after `worldfs run` was killed"
    );
    assert!(command_on, "the command ended with `worldfs run`");
}

/// A mount still in use at the end is detached and served on after `worldfs run` has exited;
/// what its daemon says then, its unmount at last, is in the log.
#[test]
fn a_detached_mounts_last_words_are_in_the_log() {
    let s = Setup::new();
    let log = s.out("run.log");
    // Left behind in the mount, reading from it after the run.
    let script = r#"(sleep 1; cat notes.txt > "$OUT/late") > /dev/null 2>&1 &"#;
    let out = s.run(&["--log", log.to_str().unwrap()], script);
    assert!(out.status.success(), "stderr:\n{}", stderr(&out));
    assert!(
        stderr(&out).contains("still in use, so it is detached"),
        "stderr:\n{}",
        stderr(&out)
    );
    let said = common::wait_until(Duration::from_secs(20), || {
        std::fs::read_to_string(&log).is_ok_and(|l| l.contains("worldfs: unmounted"))
    });
    assert_eq!(s.read("late"), "a line the agent reads\n");
    assert!(
        said.is_some(),
        "the daemon's unmount is not in the log:\n{}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
}

/// The log is read back as it grows; a terminal or /dev/null in its place is refused, before
/// anything is mounted.
#[test]
fn a_log_that_is_not_a_regular_file_is_refused() {
    let s = Setup::new();
    let out = s.run(&["--log", "/dev/null"], "true");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("--log /dev/null: not a regular file"),
        "stderr:\n{}",
        stderr(&out)
    );
    s.assert_unmounted(&out);
    // A FIFO: opening it to write would wait for a reader, and the run with it.
    let fifo = s.out("fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    let out = s.run(&["--log", fifo.to_str().unwrap()], "true");
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("not a regular file"),
        "stderr:\n{}",
        stderr(&out)
    );
}

/// Claude Code run without `worldfs hook` registered is said to leave the mount without its
/// goal and steps; once its hooks are installed, or for another program, nothing is said; for
/// Codex, Claude Code's hooks do not count.
#[test]
fn an_agent_without_hooks_is_warned_of() {
    let s = Setup::new();
    let home = s.scratch.join("home");
    std::fs::create_dir(&home).unwrap();
    let claude = s.stand_in("claude");
    // Not given the hooks on its command line, which the next test is about.
    let run = |program: &Path| s.run_program(&["--no-hooks"], &home, program, &[]);
    let warned = "register `worldfs hook`";
    let err = run(&claude);
    assert!(
        err.contains(warned) && err.contains("Claude Code's reads and writes"),
        "stderr:\n{err}"
    );
    assert!(!run(Path::new("true")).contains(warned));
    s.install_hooks(&[]);
    let err = run(&claude);
    assert!(!err.contains(warned), "stderr:\n{err}");
    // Claude Code's hooks do not run for Codex.
    let err = run(&s.stand_in("codex"));
    assert!(
        err.contains(warned) && err.contains("hook --install --codex"),
        "stderr:\n{err}"
    );
}

/// Codex reads its provider's address from no environment variable: under `--proxy`, its
/// `openai` provider is given the proxy's address on its command line (before its own
/// arguments), and the proxy forwards to OpenAI's API unless told otherwise. Not when the
/// command line names an address itself; a provider of the user's own on a free port is
/// warned of instead.
#[test]
fn codex_is_pointed_at_the_proxy_on_its_command_line() {
    let s = Setup::new();
    let home = s.scratch.join("home");
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    let out = s.scratch.join("out");
    let codex = s.stand_in_doing(
        "codex",
        &format!(
            "#!/usr/bin/env python3\nimport json, sys\n\
             json.dump(sys.argv[1:], open({:?} + \"/codex-args.json\", \"w\"))\n",
            out.to_str().unwrap()
        ),
    );
    let args = || -> Vec<String> { serde_json::from_str(&s.read("codex-args.json")).unwrap() };
    // Its hooks are the next test's.
    let proxy = ["--proxy", "--upstream", "http://127.0.0.1:9", "--no-hooks"];
    let pointed = "Codex's `openai` provider is pointed at the proxy";
    let warned = "its calls will not reach the proxy";

    let err = s.run_program(&proxy, &home, &codex, &["exec", "fix it"]);
    let url = err
        .split("worldfs: proxy on ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap_or_else(|| panic!("no proxy address in stderr:\n{err}"));
    assert!(
        err.contains(pointed) && !err.contains(warned),
        "stderr:\n{err}"
    );
    assert_eq!(
        args(),
        [
            "-c".to_owned(),
            format!("openai_base_url=\"{url}/v1\""),
            "exec".to_owned(),
            "fix it".to_owned()
        ]
    );

    let own = ["-c", "openai_base_url=\"http://127.0.0.1:1/v1\"", "exec"];
    let err = s.run_program(&proxy, &home, &codex, &own);
    assert!(
        !err.contains(pointed) && !err.contains(warned),
        "stderr:\n{err}"
    );
    assert_eq!(args(), own);

    // OpenAI's API is the upstream for Codex unless --upstream says otherwise.
    let err = s.run_program(&["--proxy", "--no-hooks"], &home, &codex, &[]);
    assert!(
        err.contains("forwarding to https://api.openai.com:") && err.contains(pointed),
        "stderr:\n{err}"
    );

    // A gateway in config.toml: the proxy forwards there, and Codex keeps its path.
    let config = home.join(".codex/config.toml");
    std::fs::write(
        &config,
        "openai_base_url = \"http://127.0.0.1:9/openai/v1\"\n",
    )
    .unwrap();
    let err = s.run_program(&["--proxy", "--no-hooks"], &home, &codex, &["exec"]);
    assert!(
        err.contains("forwarding to http://127.0.0.1:9 (Codex's openai_base_url):"),
        "stderr:\n{err}"
    );
    let a = args();
    assert!(
        a[1].starts_with("openai_base_url=\"http://127.0.0.1:") && a[1].ends_with("/openai/v1\""),
        "{a:?}"
    );

    std::fs::write(&config, "model_provider = \"mine\"\n").unwrap();
    let err = s.run_program(&proxy, &home, &codex, &["exec"]);
    assert!(
        !err.contains(pointed) && err.contains(warned) && err.contains("`mine`"),
        "stderr:\n{err}"
    );
    assert_eq!(args(), ["exec"]);
    // With --listen, the provider is taken to name the proxy's address.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let err = s.run_program(
        &[&proxy[..], &["--listen", &listen]].concat(),
        &home,
        &codex,
        &[],
    );
    assert!(
        !err.contains(pointed) && !err.contains(warned),
        "stderr:\n{err}"
    );
}

/// A command whose model calls never reached the proxy (a base URL in its own settings) is
/// said to have bypassed it; one that made a call through it is not.
#[test]
fn a_run_whose_calls_never_reached_the_proxy_is_warned_of() {
    let s = Setup::new();
    let args = ["--proxy", "--upstream", "http://127.0.0.1:9"];
    let warned = "no model call went through the proxy";
    let err = s.run_ok(&args, "true");
    assert!(err.contains(warned), "stderr:\n{err}");
    // One call, which the proxy passes on (to nothing there: the answer does not matter).
    let call = r#"python3 -c '
import os, urllib.request
req = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages", data=b"{}",
                             headers={"content-type": "application/json"})
try:
    urllib.request.urlopen(req, timeout=10)
except Exception:
    pass
'"#;
    let err = s.run_ok(&args, call);
    assert!(!err.contains(warned), "stderr:\n{err}");
    // A command that could not start made no calls to miss.
    let mut c = Command::new(bin());
    c.env("XDG_RUNTIME_DIR", s.scratch.join("runtime"))
        .arg("run")
        .arg("-C")
        .arg(s.proj())
        .arg("--no-state")
        .args(args)
        .args(["--", "/nonexistent/agent"]);
    let out = run_with_timeout(&mut c, RUN_TIMEOUT);
    assert_eq!(out.status.code(), Some(127), "stderr:\n{}", stderr(&out));
    assert!(!stderr(&out).contains(warned), "stderr:\n{}", stderr(&out));
}

/// Claude Code applies its settings' `env` over the environment it was started with: a base
/// URL there sends its calls past the proxy, which is said before it starts, naming the file.
#[test]
fn a_base_url_in_claude_codes_settings_is_warned_of() {
    let s = Setup::new();
    let home = s.scratch.join("home");
    std::fs::create_dir_all(home.join(".claude")).unwrap();
    let claude = s.stand_in("claude");
    let proxy = ["--proxy", "--upstream", "http://127.0.0.1:9"];
    let run = || s.run_program(&proxy, &home, &claude, &[]);
    let warned = "sets ANTHROPIC_BASE_URL (http://gateway.example:4000) for Claude Code";
    assert!(!run().contains("sets ANTHROPIC_BASE_URL"));
    let settings = home.join(".claude/settings.json");
    std::fs::write(
        &settings,
        r#"{"env": {"ANTHROPIC_BASE_URL": "http://gateway.example:4000"}}"#,
    )
    .unwrap();
    let err = run();
    assert!(
        err.contains(warned) && err.contains(settings.to_str().unwrap()),
        "stderr:\n{err}"
    );
}

/// A stand-in for Claude Code or Codex (`out/NAME`) that records its arguments in
/// `out/NAME-args.json`, runs the `UserPromptSubmit` hooks they give it as the agent would
/// (Claude Code's `--settings JSON`, Codex's `-c hooks.UserPromptSubmit=[...]`, trusted by a
/// `-c hooks.state` entry of the right key), and writes what `worldfs goal` and `worldfs status`
/// say after to `out/goal.txt` and `out/status.txt`. With it, an empty HOME for the runs.
fn hooked_stand_in(s: &Setup, name: &str) -> (std::path::PathBuf, std::path::PathBuf) {
    let home = s.scratch.join("home");
    std::fs::create_dir_all(&home).unwrap();
    let out = s.scratch.join("out");
    let program = s.stand_in_doing(
        name,
        &format!(
            r#"#!/usr/bin/env python3
import json, os, subprocess, sys, tomllib
out, args = {out:?}, sys.argv[1:]
json.dump(args, open(f"{{out}}/{name}-args.json", "w"))
groups = []
if "--settings" in args:
    groups = json.loads(args[args.index("--settings") + 1]).get("hooks", {{}}).get("UserPromptSubmit", [])
values = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "-c"]
config = {{}}
for v in values:
    key, value = v.split("=", 1)
    config[key] = tomllib.loads("v = " + value)["v"]
trusted = config.get("hooks.state", {{}}).get("/<session-flags>/config.toml:user_prompt_submit:0:0")
if trusted:
    groups += config.get("hooks.UserPromptSubmit", [])
event = {{"hook_event_name": "UserPromptSubmit", "prompt": "fix the parser", "session_id": "s1",
         "cwd": os.getcwd()}}
for group in groups:
    for hook in group["hooks"]:
        subprocess.run(["sh", "-c", hook["command"]], input=json.dumps(event).encode(), check=True)
with open(f"{{out}}/goal.txt", "w") as f:
    subprocess.run([{wfs:?}, "goal"], stdout=f, stderr=subprocess.DEVNULL)
with open(f"{{out}}/status.txt", "w") as f:
    subprocess.run([{wfs:?}, "status"], stdout=f, stderr=subprocess.DEVNULL)
"#,
            out = out.to_str().unwrap(),
            wfs = bin().to_str().unwrap(),
        ),
    );
    (home, program)
}

/// The arguments the stand-in `name` of [`hooked_stand_in`] was given last.
fn recorded_args(s: &Setup, name: &str) -> Vec<String> {
    serde_json::from_str(&s.read(&format!("{name}-args.json"))).unwrap()
}

/// `claude` with no settings file registering `worldfs hook` gets worldfs's hooks on its command
/// line (`--settings`, before its own arguments), and they work: the stand-in runs the
/// `UserPromptSubmit` hooks it was given, as Claude Code does, and the mount has the goal. Not
/// with `--no-hooks`, over a `--settings` of the user's, or when the hooks are installed; and
/// a proxy started with it is not told to warn of missing hooks.
#[test]
fn claude_is_given_the_hooks_on_its_command_line() {
    let s = Setup::new();
    let (home, claude) = hooked_stand_in(&s, "claude");
    let args = || recorded_args(&s, "claude");
    let given = "Claude Code gets worldfs's hooks for this run";
    let warned = "register `worldfs hook`";

    let err = s.run_program(&[], &home, &claude, &["-p", "hi"]);
    assert!(
        err.contains(given) && !err.contains(warned),
        "stderr:\n{err}"
    );
    let a = args();
    assert_eq!(a.len(), 4, "{a:?}");
    assert_eq!(
        (a[0].as_str(), &a[2..]),
        ("--settings", &["-p".to_owned(), "hi".to_owned()][..])
    );
    let settings: serde_json::Value = serde_json::from_str(&a[1]).unwrap();
    let mut events: Vec<&str> = settings["hooks"]
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    events.sort_unstable();
    let mut needed: Vec<&str> = worldfs::claude_hook::install::EVENTS
        .iter()
        .map(|e| e.0)
        .collect();
    needed.sort_unstable();
    assert_eq!(events, needed);
    assert!(
        s.read("goal.txt").contains("fix the parser"),
        "goal: {}",
        s.read("goal.txt")
    );
    // `worldfs status` tells hooks given so from none at all.
    assert!(
        s.read("status.txt")
            .contains("the session's hooks tell the mount"),
        "{}",
        s.read("status.txt")
    );

    let proxy = ["--proxy", "--upstream", "http://127.0.0.1:9"];
    let err = s.run_program(&proxy, &home, &claude, &[]);
    assert!(
        err.contains(given) && !err.contains(warned),
        "stderr:\n{err}"
    );

    let err = s.run_program(&["--no-hooks"], &home, &claude, &["-p", "hi"]);
    assert!(
        !err.contains(given) && err.contains(warned),
        "stderr:\n{err}"
    );
    assert_eq!(args(), ["-p", "hi"]);
    assert!(!s.read("goal.txt").contains("fix the parser"));
    assert!(
        s.read("status.txt").contains("none run `worldfs hook`"),
        "{}",
        s.read("status.txt")
    );

    let err = s.run_program(&[], &home, &claude, &["--settings", "{}"]);
    assert!(
        !err.contains(given) && err.contains(warned) && err.contains("its own --settings"),
        "stderr:\n{err}"
    );
    assert_eq!(args(), ["--settings", "{}"]);

    s.install_hooks(&[]);
    let err = s.run_program(&[], &home, &claude, &["-p", "hi"]);
    assert!(
        !err.contains(given) && !err.contains(warned),
        "stderr:\n{err}"
    );
    assert_eq!(args(), ["-p", "hi"]);
}

/// `codex` with no hooks file registering `worldfs hook` gets worldfs's hooks on its command line
/// (`-c hooks.EVENT=[...]` and their trust, `-c hooks.state={...}`), before the proxy's address
/// and its own arguments, and they work: the stand-in runs the trusted `UserPromptSubmit` hook,
/// and the mount has the goal. Not with `--no-hooks`, over hooks of the user's on the command
/// line, or when the hooks are installed.
#[test]
fn codex_is_given_the_hooks_and_their_trust_on_its_command_line() {
    let s = Setup::new();
    let (home, codex) = hooked_stand_in(&s, "codex");
    let args = || recorded_args(&s, "codex");
    let given = "Codex gets worldfs's hooks for this run";
    let warned = "register `worldfs hook`";
    let proxy = ["--proxy", "--upstream", "http://127.0.0.1:9"];

    let err = s.run_program(&proxy, &home, &codex, &["exec", "fix it"]);
    assert!(
        err.contains(given) && !err.contains(warned),
        "stderr:\n{err}"
    );
    let a = args();
    let events = worldfs::claude_hook::install::Agent::Codex.events();
    let n = 2 * (events.len() + 1);
    assert!(a.len() == n + 4, "{a:?}");
    for (i, (event, _)) in events.iter().enumerate() {
        assert!(
            a[2 * i + 1].starts_with(&format!("hooks.{event}=[")),
            "{a:?}"
        );
    }
    assert!(a[n - 1].starts_with("hooks.state={"), "{a:?}");
    assert!(a[n + 1].starts_with("openai_base_url="), "{a:?}");
    assert_eq!(a[n + 2..], ["exec", "fix it"]);
    assert!(
        s.read("goal.txt").contains("fix the parser"),
        "goal: {}",
        s.read("goal.txt")
    );

    let err = s.run_program(&["--no-hooks"], &home, &codex, &["exec"]);
    assert!(
        !err.contains(given) && err.contains(warned),
        "stderr:\n{err}"
    );
    assert_eq!(args(), ["exec"]);
    assert!(!s.read("goal.txt").contains("fix the parser"));

    let own = [
        "-c",
        "hooks.Stop=[{hooks=[{type=\"command\",command=\"true\"}]}]",
    ];
    let err = s.run_program(&[], &home, &codex, &own);
    assert!(
        !err.contains(given) && err.contains(warned),
        "stderr:\n{err}"
    );
    assert_eq!(args(), own);

    s.install_hooks(&["--codex"]);
    // Installed, but not trusted by Codex, which would skip them: given all the same.
    let err = s.run_program(&[], &home, &codex, &["exec"]);
    assert!(
        err.contains(given) && err.contains("which it does not trust"),
        "stderr:\n{err}"
    );
    assert!(args().len() > 1);
    // Not given when Codex is told to run hooks untrusted: the installed ones run.
    let bypass = ["--dangerously-bypass-hook-trust", "exec"];
    let err = s.run_program(&[], &home, &codex, &bypass);
    assert!(!err.contains(given), "stderr:\n{err}");
    assert_eq!(args(), bypass);
    // Trusted, as Codex's screen writes it (the project, and each hook's hash): left alone.
    let file = s.proj().join(".codex/hooks.json");
    let hooks: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let keys = worldfs::claude_hook::codex_trust::keys_in_file(&file, &hooks, |_| true);
    let mut config = format!(
        "[projects.\"{}\"]\ntrust_level = \"trusted\"\n",
        s.proj().display()
    );
    for (key, hash) in &keys {
        config.push_str(&format!(
            "[hooks.state.\"{key}\"]\ntrusted_hash = \"{hash}\"\n"
        ));
    }
    std::fs::create_dir_all(home.join(".codex")).unwrap();
    std::fs::write(home.join(".codex/config.toml"), &config).unwrap();
    let err = s.run_program(&[], &home, &codex, &["exec"]);
    assert!(
        !err.contains(given) && !err.contains(warned),
        "stderr:\n{err}"
    );
    assert_eq!(args(), ["exec"]);
    // The project not trusted: Codex does not load its hooks.
    std::fs::write(
        home.join(".codex/config.toml"),
        config.replace("trust_level = \"trusted\"", "trust_level = \"untrusted\""),
    )
    .unwrap();
    let err = s.run_program(&[], &home, &codex, &["exec"]);
    assert!(err.contains("which it does not trust"), "stderr:\n{err}");
}

/// Without `--proxy` (whose own warning it is otherwise), hooks an older worldfs installed,
/// which lack an event this one needs, are named for the agent started, and only for it.
#[test]
fn an_agents_hooks_from_an_older_install_are_warned_of() {
    let s = Setup::new();
    let home = s.scratch.join("home");
    std::fs::create_dir(&home).unwrap();
    s.install_hooks(&["--codex"]);
    let hooks = s.proj().join(".codex/hooks.json");
    let mut settings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&hooks).unwrap()).unwrap();
    settings["hooks"].as_object_mut().unwrap().remove("Stop");
    std::fs::write(&hooks, settings.to_string()).unwrap();
    let warned = ".codex/hooks.json runs `worldfs hook`, but not on Stop";
    // Not given the hooks (which they are, as Codex trusts none of these).
    let err = s.run_program(&["--no-hooks"], &home, &s.stand_in("codex"), &[]);
    assert!(err.contains(warned), "stderr:\n{err}");
    let err = s.run_program(&[], &home, &s.stand_in("claude"), &[]);
    assert!(!err.contains(warned), "stderr:\n{err}");
}

/// With `--proxy`, the end of the run says what the proxy told the mount of the session's model
/// calls (here told by the command itself, as the proxy does: `proxy.record`); nothing after a
/// run without such calls.
#[test]
fn the_proxys_account_is_said_at_the_end() {
    let s = Setup::new();
    let args = ["--proxy", "--upstream", "http://127.0.0.1:9"];
    let said = "of the session through the proxy";
    let err = s.run_ok(&args, "true");
    assert!(!err.contains(said), "stderr:\n{err}");
    let record = r#"for sent in 250 350; do
  "$WFS" ctl proxy.record "{\"history_tokens\": 1000, \"sent_tokens\": $sent, \"rewritten\": true}" > /dev/null
done"#;
    let err = s.run_ok(&args, record);
    assert!(
        err.contains(
            "2 model calls of the session through the proxy, 2 with the projection: their \
             messages 600 tokens as sent, against 2000 as the agent sent them (30.0%)"
        ),
        "stderr:\n{err}"
    );
}

/// Claude Code started with `ANTHROPIC_BASE_URL` (a gateway) would have sent its calls there:
/// the proxy forwards there unless `--upstream` says otherwise, and the command is given the
/// proxy's address in its place.
#[test]
fn an_anthropic_base_url_of_the_environment_is_the_upstream() {
    let s = Setup::new();
    let script = r#"echo "$ANTHROPIC_BASE_URL" > "$OUT/url""#;
    let run = |args: &[&str]| {
        let mut c = s.command(args, script);
        c.env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/gateway");
        let out = run_with_timeout(&mut c, RUN_TIMEOUT);
        assert!(out.status.success(), "stderr:\n{}", stderr(&out));
        stderr(&out)
    };
    let err = run(&["--proxy"]);
    assert!(
        err.contains("forwarding to http://127.0.0.1:9/gateway (ANTHROPIC_BASE_URL's):"),
        "stderr:\n{err}"
    );
    let url = s.read("url");
    assert!(
        url.starts_with("http://127.0.0.1:") && !url.contains("gateway"),
        "{url}"
    );
    let err = run(&["--proxy", "--upstream", "http://127.0.0.1:8"]);
    assert!(
        err.contains("forwarding to http://127.0.0.1:8:"),
        "stderr:\n{err}"
    );
    // The address a `worldfs run` around this one set (its proxy, for another mount) is not.
    let mut c = s.command(&["--proxy"], script);
    c.env("ANTHROPIC_BASE_URL", "http://127.0.0.1:9/gateway")
        .env("WORLDFS_PROXY_URL", "http://127.0.0.1:9/gateway");
    let out = run_with_timeout(&mut c, RUN_TIMEOUT);
    assert!(
        stderr(&out).contains("forwarding to https://api.anthropic.com:"),
        "stderr:\n{}",
        stderr(&out)
    );
}
