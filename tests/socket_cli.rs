//! The client subcommands (`worldfs ctl`, `projection`, `status`, `goal`) against a server
//! running in this test process.

mod socket_support;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use socket_support::*;

fn worldfs(args: &[&str]) -> Output {
    must(
        Command::new(env!("CARGO_BIN_EXE_worldfs"))
            .args(args)
            .env_remove("WORLDFS_SOCKET")
            .current_dir("/")
            .output(),
    )
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `worldfs status` names the hook files that tell the mount the goal and the steps, and what
/// an older install of them lacks; without any, it says how to install them.
#[test]
fn status_names_the_hooks_that_tell_the_mount() {
    let f = Fixture::new();
    let s = f.sock.to_string_lossy().into_owned();
    let home = must(tempfile::tempdir());
    let run = |args: &[&str]| {
        must(
            Command::new(env!("CARGO_BIN_EXE_worldfs"))
                .args(args)
                .env_remove("WORLDFS_SOCKET")
                .env_remove("CODEX_HOME")
                .env("HOME", home.path())
                .current_dir("/")
                .output(),
        )
    };
    let hooks = || {
        let o = text(&run(&["status", "--socket", &s]).stdout);
        o.lines()
            .find(|l| l.starts_with("hooks:"))
            .unwrap_or_default()
            .to_owned()
    };
    assert!(hooks().contains("none run `worldfs hook`"), "{}", hooks());
    let root = f.root().to_string_lossy().into_owned();
    let out = run(&["hook", "--install", "--codex", "-C", &root]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let file = f.root().join(".codex/hooks.json");
    assert_eq!(hooks(), format!("hooks:    Codex ({})", file.display()));
    let mut settings: Value = must(serde_json::from_str(&must(std::fs::read_to_string(&file))));
    if let Some(h) = settings["hooks"].as_object_mut() {
        h.remove("Stop");
    }
    must(std::fs::write(&file, settings.to_string()));
    assert!(
        hooks().ends_with("without Stop: run `worldfs hook --install --codex` again)"),
        "{}",
        hooks()
    );
}

#[test]
fn ctl_calls_methods_and_prints_json() {
    let f = Fixture::new();
    let s = f.sock.to_string_lossy().into_owned();
    let out = worldfs(&["ctl", "--socket", &s, "initialize"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: Value = must(serde_json::from_slice(&out.stdout));
    assert_eq!(v["server"]["name"], "worldfs");

    let out = worldfs(&["ctl", "--socket", &s, "goal.set", r#"{"goal":"from ctl"}"#]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let goal = f
        .world
        .harness()
        .conversations
        .read(None, |c| c.goal.clone());
    assert_eq!(goal.as_deref(), Some("from ctl"));

    // Params from stdin.
    let mut child = must(
        Command::new(env!("CARGO_BIN_EXE_worldfs"))
            .args(["ctl", "--socket", &s, "state.set", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn(),
    );
    if let Some(mut stdin) = child.stdin.take() {
        must(stdin.write_all(br#"{"intent":"via stdin"}"#));
    }
    let out = must(child.wait_with_output());
    assert!(out.status.success());
    let intent = (f.world.harness().conversations).read(None, |c| c.state.intent.clone());
    assert_eq!(intent.as_deref(), Some("via stdin"));
}

#[test]
fn ctl_errors_have_distinct_exit_codes() {
    let f = Fixture::new();
    let s = f.sock.to_string_lossy().into_owned();
    let out = worldfs(&["ctl", "--socket", &s, "nosuch"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("unknown method"),
        "{}",
        text(&out.stderr)
    );
    let out = worldfs(&["ctl", "--socket", &s, "stats", "{not json"]);
    assert_eq!(out.status.code(), Some(2));
    let out = worldfs(&["ctl", "--socket", &s, "stats", "[1]"]);
    assert_eq!(out.status.code(), Some(2));
    let out = worldfs(&["ctl", "--socket", "/nonexistent/worldfs.sock", "stats"]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(err.contains("cannot connect"), "{err}");
    // The cause is said once, after what failed.
    assert_eq!(err.matches("No such file or directory").count(), 1, "{err}");
    // Outside any mount and without --socket: a clear error.
    let out = worldfs(&["status"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("not inside a worldfs mount"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn goal_projection_and_status_subcommands() {
    let f = Fixture::new();
    f.read("src/main.rs");
    let s = f.sock.to_string_lossy().into_owned();
    let out = worldfs(&["goal", "--socket", &s, "ship the socket"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "ship the socket");
    let out = worldfs(&["goal", "--socket", &s]);
    assert_eq!(text(&out.stdout).trim(), "ship the socket");
    let out = worldfs(&["goal", "--socket", &s, "--clear"]);
    assert_eq!(text(&out.stdout).trim(), "(no goal set)");
    // Each session has its own goal; without --session, the one heard from last.
    for (session, goal) in [("a", "fix the lexer"), ("b", "explain main")] {
        let out = worldfs(&["goal", "--socket", &s, "--session", session, goal]);
        assert!(out.status.success(), "{}", text(&out.stderr));
    }
    let out = worldfs(&["goal", "--socket", &s, "--session", "a"]);
    assert_eq!(text(&out.stdout).trim(), "fix the lexer");
    let out = worldfs(&["goal", "--socket", &s]);
    assert_eq!(text(&out.stdout).trim(), "explain main");
    let out = worldfs(&["projection", "--socket", &s, "--session", "a"]);
    let o = text(&out.stdout);
    assert!(
        o.contains("fix the lexer") && !o.contains("explain main"),
        "{o}"
    );
    let o = text(&worldfs(&["status", "--socket", &s]).stdout);
    assert!(
        o.contains("\ngoal:     \"explain main\" (session b, heard from last, of 2)\n")
            && o.contains("\n          session a: \"fix the lexer\"\n"),
        "both sessions' goals:\n{o}"
    );

    let out = worldfs(&["projection", "--socket", &s, "--budget", "2000"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("println!"),
        "{}",
        text(&out.stdout)
    );
    // The body alone by default (pipeable), with the cost on stderr; --full for the envelope.
    let out = worldfs(&["projection", "--socket", &s, "--format", "json"]);
    let v: Value = must(serde_json::from_slice(&out.stdout));
    assert!(v["entries"].is_array(), "{v}");
    assert!(
        text(&out.stderr).contains("tokens of"),
        "{}",
        text(&out.stderr)
    );
    let out = worldfs(&["projection", "--socket", &s, "--format", "json", "--full"]);
    let v: Value = must(serde_json::from_slice(&out.stdout));
    assert_eq!(v["format"], "json");
    assert!(v["body"]["entries"].is_array(), "{v}");
    // --evicted-limit caps the list of what was left out, not its count.
    let out = worldfs(&[
        "projection",
        "--socket",
        &s,
        "--format",
        "json",
        "--budget",
        "30",
        "--full",
        "--evicted-limit",
        "0",
    ]);
    let v: Value = must(serde_json::from_slice(&out.stdout));
    assert_eq!(v["evicted"].as_array().map(Vec::len), Some(0), "{v}");
    assert!(v["evicted_total"].as_u64().is_some_and(|n| n >= 1), "{v}");
    // refused with the command line, before the socket is asked
    let out = worldfs(&["projection", "--socket", &s, "--budget", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("budget 0"),
        "{}",
        text(&out.stderr)
    );

    let out = worldfs(&["status", "--socket", &s]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let o = text(&out.stdout);
    for needle in [
        "mount:",
        "socket:",
        "entries:  1 live",
        "tokens:",
        "observed:",
        "behind:   changes made behind the mount 0;",
        "commands: 0 outputs cached; 0 dropped as what they depend on changed, 0 oldest dropped",
        "drops:",
        "activity:",
        // The last projection (budget 30, its list of what it left out asked to be empty).
        " by the last projection (",
        " of 30 tokens, 0 shown): `worldfs projection --full` lists them\n",
    ] {
        assert!(o.contains(needle), "{needle:?} missing from:\n{o}");
    }
    assert!(!o.contains("tasks:"), "no task list, no line:\n{o}");
    let tasks = r#"{"tasks": [{"id": "1", "subject": "a", "status": "completed"},
                               {"id": "2", "subject": "b", "status": "in_progress"},
                               {"id": "3", "subject": "c"}]}"#;
    let out = worldfs(&["ctl", "--socket", &s, "state.patch", tasks]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = worldfs(&["status", "--socket", &s]);
    let o = text(&out.stdout);
    assert!(
        o.contains("tasks:    3 (1 done, 1 in progress, 1 to do)"),
        "{o}"
    );
    assert!(!o.contains("begun"), "none begun, no mention:\n{o}");
    // A command begun and never recorded (a PostToolUse hook missing) shows.
    let out = worldfs(&[
        "ctl",
        "--socket",
        &s,
        "command.begin",
        r#"{"key": "toolu_1"}"#,
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let o = text(&worldfs(&["status", "--socket", &s]).stdout);
    assert!(
        o.contains("0 oldest dropped for room; 1 begun and not recorded yet"),
        "{o}"
    );
}

/// A reader that stops early (`worldfs status | head -3`) ends nothing: the commands exit 0
/// and quietly. `println!` panicked on the closed pipe, with a backtrace on stderr.
#[test]
fn output_to_a_reader_that_went_away_is_no_failure() {
    let f = Fixture::new();
    let s = f.sock.to_string_lossy().into_owned();
    for args in [
        vec!["status", "--socket", &s],
        vec!["projection", "--socket", &s],
        vec!["ctl", "--socket", &s, "stats"],
        vec!["goal", "--socket", &s],
    ] {
        // The read end is closed before the command starts, so its first write fails (EPIPE)
        // however fast it is.
        let mut fds = [0; 2];
        // SAFETY: fds has room for the two descriptors pipe(2) returns.
        assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
        // SAFETY: both descriptors are fresh and owned here from now on.
        let (reader, writer) = unsafe {
            use std::os::fd::FromRawFd;
            (
                std::os::fd::OwnedFd::from_raw_fd(fds[0]),
                std::os::fd::OwnedFd::from_raw_fd(fds[1]),
            )
        };
        drop(reader);
        let out = must(
            Command::new(env!("CARGO_BIN_EXE_worldfs"))
                .args(&args)
                .env_remove("WORLDFS_SOCKET")
                .current_dir("/")
                .stdout(Stdio::from(writer))
                .stderr(Stdio::piped())
                .output(),
        );
        let err = text(&out.stderr);
        assert!(out.status.success(), "{args:?}: {:?}\n{err}", out.status);
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}
