//! A restarted daemon goes on from the world it saved (`world::snapshot`), over real mounts:
//! what comes back, what is found changed while nothing was mounted, and how `--fresh`,
//! `--no-state` and a damaged file behave.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use serde_json::Value;

fn ctl(m: &Mount, method: &str, params: &str) -> Value {
    let sock = m.socket();
    let out = run_with_timeout(
        Command::new(bin())
            .arg("ctl")
            .arg("--socket")
            .arg(&sock)
            .arg(method)
            .arg(params),
        Duration::from_secs(30),
    );
    assert!(
        out.status.success(),
        "worldfs ctl {method} {params}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        m.log()
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{method}: {e}"))
}

/// Reads files as an agent does (`cat`, which the world attributes to the agent; the test
/// process itself is nobody's).
fn cat(m: &Mount, rels: &[&str]) {
    let out = run_with_timeout(
        Command::new("cat").args(rels).current_dir(&m.root),
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "cat {rels:?}: {out:?}");
}

fn entry<'a>(list: &'a Value, path: &str) -> &'a Value {
    list["entries"]
        .as_array()
        .and_then(|a| a.iter().find(|e| e["path"] == path))
        .unwrap_or_else(|| panic!("no entry {path} in {list:#}"))
}

fn prepare(src: &Path) {
    for (rel, text) in [
        ("src/a.py", "A = 1\n"),
        ("src/b.py", "B = 2\n"),
        ("src/gone.py", "G = 3\n"),
        ("notes.md", "# notes\n"),
    ] {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap_or(src)).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(p, text).unwrap_or_else(|e| panic!("{e}"));
    }
}

fn state_files(m: &Mount) -> Vec<PathBuf> {
    let dir = m.base.join("state/worldfs");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn a_restarted_mount_goes_on_from_the_world_it_saved() {
    let m = Mount::start(Mode::InPlace, &[], prepare);
    cat(&m, &["src/a.py", "src/b.py", "src/gone.py"]);
    ctl(&m, "goal.set", r#"{"goal":"make b right"}"#);
    ctl(
        &m,
        "step.record",
        r#"{"tool_use_id":"toolu_1","tool_name":"Bash","input":{"command":"cat src/b.py"},"result":"B = 2"}"#,
    );
    for (cmd, file) in [
        ("python src/a.py", "src/a.py"),
        ("python src/b.py", "src/b.py"),
    ] {
        ctl(
            &m,
            "command.record",
            &format!(r#"{{"command":"{cmd}","cwd":".","output":"ran {file}","files":["{file}"]}}"#),
        );
    }
    ctl(&m, "entries.pin", r#"{"path":"src/a.py"}"#);
    // Counts every entry, so the hashes compared below are known on both sides.
    ctl(&m, "projection.get", r#"{"format":"text"}"#);
    let before = ctl(&m, "entries.list", "{}");
    let known = before["entries"].as_array().map_or(0, Vec::len);
    let init = ctl(&m, "initialize", "{}");
    let (seq, turn) = (init["last_seq"].as_u64(), init["turn"].as_u64());
    assert!(seq.is_some_and(|s| s > 0) && turn == Some(1), "{init}");

    let m = m.restart(&[], |src| {
        std::fs::write(src.join("src/b.py"), "B = 22  # changed while unmounted\n")
            .unwrap_or_else(|e| panic!("{e}"));
        std::fs::remove_file(src.join("src/gone.py")).unwrap_or_else(|e| panic!("{e}"));
    });
    let log = m.log();
    assert!(log.contains("worldfs: world restored from"), "{log}");
    assert!(
        log.contains("1 command output (1 dropped"),
        "the output that read src/b.py goes: {log}"
    );

    assert_eq!(ctl(&m, "goal.get", "{}")["goal"], "make b right");
    let init = ctl(&m, "initialize", "{}");
    assert_eq!(init["turn"].as_u64(), turn, "{init}");
    assert!(init["last_seq"].as_u64() >= seq, "{init} after {seq:?}");
    let cmds = ctl(&m, "commands.list", "{}");
    let names: Vec<&str> = cmds["commands"]
        .as_array()
        .map(|a| a.iter().filter_map(|c| c["command"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, ["python src/a.py"], "{cmds:#}");

    // A projection counts every entry first: the change and the removal are found.
    let text = ctl(&m, "projection.get", r#"{"format":"text","budget":8000}"#);
    let body = text["body"].as_str().unwrap_or_default();
    assert!(
        body.contains("B = 22"),
        "current content, never the saved hash's: {body}"
    );
    assert!(body.contains("make b right"), "{body}");
    let after = ctl(&m, "entries.list", "{}");
    let (a0, a1) = (entry(&before, "src/a.py"), entry(&after, "src/a.py"));
    for field in ["pinned", "reads", "programs", "extent", "first_seq", "hash"] {
        assert_eq!(a0[field], a1[field], "src/a.py {field}");
    }
    assert_eq!(a1["pinned"], true);
    let b1 = entry(&after, "src/b.py");
    assert_ne!(b1["hash"], entry(&before, "src/b.py")["hash"]);
    assert!(
        b1["last_changed_seq"].as_u64() >= seq,
        "stamped as changed after the restart: {b1}"
    );
    assert_eq!(entry(&after, "src/gone.py")["state"], "deleted");
    let stats = ctl(&m, "stats", "{}");
    assert_eq!(
        stats["world"]["changed_unobserved"], 1,
        "{:#}",
        stats["world"]
    );
    assert_eq!(stats["world"]["kept"]["restored"]["commands_dropped"], 1);

    // Sequence numbers go on after the saved ones: a client's noted number still orders.
    cat(&m, &["notes.md"]);
    let since = ctl(
        &m,
        "changes.since",
        &format!(r#"{{"seq":{}}}"#, seq.unwrap_or(0)),
    );
    assert!(
        since["observations"]
            .as_array()
            .is_some_and(|o| o.iter().any(|o| o["path"] == "notes.md")),
        "{since:#}"
    );
    let status = run_with_timeout(
        Command::new(bin())
            .args(["status", "--socket"])
            .arg(m.socket()),
        Duration::from_secs(30),
    );
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        status.contains("kept:     ")
            && status.contains(&format!("restored at mount: {known} entries")),
        "{status}"
    );
    assert!(
        status.contains("1 found changed when counted again"),
        "{status}"
    );

    // --fresh starts empty, and its save at unmount replaces the kept world.
    let m = m.restart(&["--fresh"], |_| {});
    assert!(!m.log().contains("world restored"), "{}", m.log());
    assert_eq!(ctl(&m, "goal.get", "{}")["goal"], Value::Null);
    let m = m.restart(&[], |_| {});
    assert_eq!(ctl(&m, "goal.get", "{}")["goal"], Value::Null);
    assert_eq!(
        ctl(&m, "stats", "{}")["world"]["kept"]["restored"]["entries"],
        0
    );
}

#[test]
fn a_saved_world_that_cannot_be_read_is_set_aside_and_a_named_one_stops_the_mount() {
    let m = Mount::start(Mode::InPlace, &[], prepare);
    ctl(&m, "goal.set", r#"{"goal":"kept"}"#);
    let m = m.restart(&[], |_| {});
    assert_eq!(ctl(&m, "goal.get", "{}")["goal"], "kept");
    let files = state_files(&m);
    let kept = m.base.join("state/worldfs").join(
        files
            .iter()
            .filter_map(|f| f.file_name()?.to_str())
            .find(|n| n.ends_with(".json"))
            .unwrap_or_else(|| panic!("no kept world in {files:?}")),
    );
    assert_eq!(files.len(), 2, "the world and its lock: {files:?}");
    let m = m.restart(&[], |_| {
        std::fs::write(&kept, "{\"format\": \"worldfs-world/1\", \"trunc")
            .unwrap_or_else(|e| panic!("{e}"));
    });
    let log = m.log();
    assert!(
        log.contains("is not valid") && log.contains("starting with an empty world"),
        "{log}"
    );
    assert_eq!(ctl(&m, "goal.get", "{}")["goal"], Value::Null);
    let mut aside = kept.clone().into_os_string();
    aside.push(".bad");
    assert!(Path::new(&aside).exists(), "{:?}", state_files(&m));

    // A file the user named is not set aside: the mount refuses, with nothing mounted.
    let named = m.scratch.join("named.json");
    std::fs::write(&named, "not json").unwrap_or_else(|e| panic!("{e}"));
    let src = m.scratch.join("other");
    std::fs::create_dir(&src).unwrap_or_else(|e| panic!("{e}"));
    let out = run_with_timeout(
        Command::new(bin())
            .arg("mount")
            .arg(&src)
            .arg("--state")
            .arg(&named),
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.starts_with("worldfs: error: ") && err.contains("named.json"),
        "{err}"
    );
    assert_eq!(worldfs_mounts_at(&src), 0);
    assert_eq!(
        std::fs::read_to_string(&named).ok().as_deref(),
        Some("not json")
    );
    // Nor may it be inside what is mounted: each save would be observed and call for another.
    let out = run_with_timeout(
        Command::new(bin())
            .arg("mount")
            .arg(&src)
            .arg("--state")
            .arg(src.join("w.json")),
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains("is inside the mounted directory"), "{err}");
    assert_eq!(worldfs_mounts_at(&src), 0);
}

/// The world is kept for a directory, not for a path: SOURCE removed and made again (a fresh
/// clone at the same place), with files of the same names, starts empty, and the old world is
/// set aside rather than lost. A plain restart keeps it, as above.
#[test]
fn a_directory_made_again_at_the_same_path_starts_with_an_empty_world() {
    let m = Mount::start(Mode::InPlace, &[], prepare);
    cat(&m, &["src/a.py", "src/gone.py"]);
    ctl(&m, "goal.set", r#"{"goal":"the old project's"}"#);
    let m = m.restart(&[], |_| {});
    assert_eq!(ctl(&m, "goal.get", "{}")["goal"], "the old project's");
    let m = m.restart(&[], |src| {
        std::fs::remove_dir_all(src).unwrap_or_else(|e| panic!("{e}"));
        std::fs::create_dir(src).unwrap_or_else(|e| panic!("{e}"));
        prepare(src);
        std::fs::remove_file(src.join("src/gone.py")).unwrap_or_else(|e| panic!("{e}"));
    });
    let log = m.log();
    assert!(
        log.contains("is for an earlier directory at")
            && log.contains("starting with an empty world")
            && log.contains(".earlier)"),
        "{log}"
    );
    assert!(!log.contains("world restored"), "{log}");
    assert_eq!(ctl(&m, "goal.get", "{}")["goal"], Value::Null);
    let text = ctl(&m, "projection.get", r#"{"format":"text","budget":8000}"#);
    let body = text["body"].as_str().unwrap_or_default();
    assert!(
        !body.contains("gone.py") && !body.contains("a.py"),
        "nothing of the old world: {body}"
    );
    let files = state_files(&m);
    assert!(
        files
            .iter()
            .any(|f| f.to_string_lossy().ends_with(".json.earlier")),
        "{files:?}"
    );
    let kept = &ctl(&m, "stats", "{}")["world"]["kept"];
    let aside = kept["set_aside"]["path"].as_str().unwrap_or_default();
    assert!(
        aside.ends_with(".json.earlier")
            && kept["set_aside"]["why"]
                .as_str()
                .is_some_and(|w| w.contains("earlier directory")),
        "stats say where the old world went: {kept:#}"
    );
    let out = run_with_timeout(
        Command::new(bin()).arg("status").arg("-C").arg(&m.root),
        Duration::from_secs(30),
    );
    let status = String::from_utf8_lossy(&out.stdout);
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("kept:") && l.contains("started empty") && l.contains(aside)),
        "{status}"
    );

    // The new directory's world is kept from now on, as any other.
    ctl(&m, "goal.set", r#"{"goal":"the new project's"}"#);
    let m = m.restart(&[], |_| {});
    assert!(m.log().contains("world restored"), "{}", m.log());
    assert_eq!(ctl(&m, "goal.get", "{}")["goal"], "the new project's");
}

#[test]
fn no_state_neither_reads_nor_saves_a_world() {
    let m = Mount::start(Mode::InPlace, &["--no-state"], prepare);
    ctl(&m, "goal.set", r#"{"goal":"not kept"}"#);
    let world = &ctl(&m, "stats", "{}")["world"];
    assert_eq!(world["kept"], Value::Null);
    assert_eq!(world["not_kept"], "mounted with --no-state");
    let m = m.restart(&[], |_| {});
    assert_eq!(ctl(&m, "goal.get", "{}")["goal"], Value::Null);
    assert!(!m.log().contains("world restored"), "{}", m.log());
}

/// A daemon killed with SIGKILL cannot save at unmount: the next mount starts from the last
/// periodic save (every 10 s while the world changes).
#[test]
fn after_a_crash_the_next_mount_starts_from_the_last_periodic_save() {
    let m = Mount::start(Mode::InPlace, &[], prepare);
    cat(&m, &["src/a.py"]);
    ctl(&m, "goal.set", r#"{"goal":"survive a crash"}"#);
    let saved = wait_until(Duration::from_secs(20), || {
        ctl(&m, "stats", "{}")["world"]["kept"]["saves"].as_u64() >= Some(1)
    });
    assert!(
        saved.is_some(),
        "no periodic save in 20 s: {:#}",
        ctl(&m, "stats", "{}")
    );
    m.kill9();
    let m = m.restart(&[], |_| {});
    assert!(m.log().contains("world restored"), "{}", m.log());
    assert_eq!(ctl(&m, "goal.get", "{}")["goal"], "survive a crash");
    let list = ctl(&m, "entries.list", "{}");
    assert_eq!(entry(&list, "src/a.py")["reads"], 1);
}

/// A daemon started by hand (`worldfs mount SRC MNT`, its world kept under `state`, its output
/// in `log`); dropping it stops it and removes its mount whatever happens in the test.
struct ByHand {
    child: std::process::Child,
    mnt: PathBuf,
}

impl ByHand {
    fn start(src: &Path, mnt: &Path, state: &Path, log: &Path, env: &[(&str, &str)]) -> ByHand {
        let logf = std::fs::File::create(log).unwrap_or_else(|e| panic!("{e}"));
        let child = Command::new(bin())
            .arg("mount")
            .arg(src)
            .arg(mnt)
            .env("XDG_STATE_HOME", state)
            .envs(env.iter().copied())
            .stdin(std::process::Stdio::null())
            .stdout(logf.try_clone().unwrap_or_else(|e| panic!("{e}")))
            .stderr(logf)
            .spawn()
            .unwrap_or_else(|e| panic!("{e}"));
        ByHand {
            child,
            mnt: mnt.to_owned(),
        }
    }
}

impl Drop for ByHand {
    fn drop(&mut self) {
        // SAFETY: the child is ours and not reaped before this.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        if wait_child(&mut self.child, Duration::from_secs(10)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        if worldfs_mounts_at(&self.mnt) > 0 {
            force_unmount(&self.mnt);
        }
    }
}

/// Two mounts of one SOURCE would restore one kept world and overwrite each other's saves:
/// the second is told another daemon keeps it, and keeps nothing.
#[test]
fn a_second_mount_of_the_same_source_keeps_no_world() {
    let m = Mount::start(Mode::Mirror, &[], prepare);
    ctl(&m, "goal.set", r#"{"goal":"the first mount's"}"#);
    let mnt2 = m.scratch.join("second");
    std::fs::create_dir(&mnt2).unwrap_or_else(|e| panic!("{e}"));
    let log = m.scratch.join("second.log");
    let second = ByHand::start(&m.source, &mnt2, &m.base.join("state"), &log, &[]);
    let read = || std::fs::read_to_string(&log).unwrap_or_default();
    let up = wait_until(Duration::from_secs(10), || {
        read().contains("worldfs: socket")
    });
    assert!(up.is_some(), "the second mount did not start:\n{}", read());
    assert!(
        read().contains("another worldfs daemon (a mount of the same SOURCE) keeps its world"),
        "{}",
        read()
    );
    let sock = read()
        .lines()
        .find_map(|l| l.strip_prefix("worldfs: socket ").map(str::to_owned))
        .unwrap_or_default();
    let status = run_with_timeout(
        Command::new(bin()).args(["status", "--socket", &sock]),
        Duration::from_secs(30),
    );
    let status = String::from_utf8_lossy(&status.stdout).into_owned();
    assert!(
        status.contains("kept:     not across restarts: another worldfs daemon"),
        "{status}"
    );
    drop(second);
    // The first one still keeps its world.
    let m = m.restart(&[], |_| {});
    assert_eq!(ctl(&m, "goal.get", "{}")["goal"], "the first mount's");
}

/// A mount made right after the one before it was unmounted, while that daemon still saves
/// its world (slowed here, as saving a big world is), goes on from that world instead of
/// finding the socket and the kept world taken: `worldfs unmount` returns once the daemon has
/// exited, and a mount after a plain `umount` waits for the daemon first.
#[test]
fn a_mount_right_after_an_unmount_goes_on_from_the_world_just_saved() {
    require_fuse();
    let (_tmp, base) = tempdir();
    let (src, mnt) = (base.join("src"), base.join("mnt"));
    for d in [&src, &mnt] {
        std::fs::create_dir(d).unwrap_or_else(|e| panic!("{e}"));
    }
    prepare(&src);
    let start = |n: usize| {
        let log = base.join(format!("daemon-{n}.log"));
        let daemon = ByHand::start(
            &src,
            &mnt,
            &base.join("state"),
            &log,
            &[("WORLDFS_DEBUG_SLOW_STOP_MS", "600")],
        );
        let read = || std::fs::read_to_string(&log).unwrap_or_default();
        let up = wait_until(Duration::from_secs(10), || {
            let l = read();
            l.contains("worldfs: socket") || l.contains("worldfs: error")
        });
        assert!(
            up.is_some() && !read().contains("warning") && !read().contains("error"),
            "mount {n} did not start cleanly:\n{}",
            read()
        );
        (daemon, read())
    };
    let goal = |args: &[&str]| {
        let out = run_with_timeout(
            Command::new(bin())
                .arg("goal")
                .arg("-C")
                .arg(&mnt)
                .args(args)
                .env_remove("WORLDFS_SOCKET"),
            Duration::from_secs(30),
        );
        assert!(out.status.success(), "worldfs goal {args:?}: {out:?}");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let (mut first, _) = start(0);
    goal(&["keep me across quick restarts"]);
    let out = worldfs(&[std::ffi::OsStr::new("unmount"), mnt.as_os_str()]);
    assert!(out.status.success(), "worldfs unmount: {out:?}");
    assert!(
        first.child.try_wait().ok().flatten().is_some(),
        "worldfs unmount returned before its daemon had exited"
    );
    let (_second, log) = start(1);
    assert!(log.contains("worldfs: world restored from"), "{log}");
    assert_eq!(goal(&[]), "keep me across quick restarts");
    // SAFETY: a valid path.
    assert_eq!(
        unsafe { libc::umount2(cpath(&mnt).as_ptr(), 0) },
        0,
        "umount"
    );
    let (mut third, log) = start(2);
    assert!(log.contains("worldfs: world restored from"), "{log}");
    assert_eq!(goal(&[]), "keep me across quick restarts");
    // Detached while a process is inside it, the daemon goes on serving: a mount there is
    // refused at once, saying why, not after a wait.
    struct Inside(std::process::Child);
    impl Drop for Inside {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let inside = Inside(
        Command::new("sleep")
            .arg("30")
            .current_dir(&mnt)
            .spawn()
            .unwrap_or_else(|e| panic!("{e}")),
    );
    let out = worldfs(&[std::ffi::OsStr::new("unmount"), mnt.as_os_str()]);
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stderr).contains("detached"),
        "worldfs unmount: {out:?}"
    );
    let refused = run_with_timeout(
        Command::new(bin())
            .arg("mount")
            .arg(&src)
            .arg(&mnt)
            .env("XDG_STATE_HOME", base.join("state")),
        Duration::from_secs(30),
    );
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && err.contains("still serves it, detached"),
        "{refused:?}"
    );
    drop(inside);
    assert!(
        wait_child(&mut third.child, Duration::from_secs(10)).is_some(),
        "the detached daemon did not exit once nothing used its mount"
    );
}

#[test]
fn a_restart_sends_each_requester_the_projection_it_was_sent_before() {
    let m = Mount::start(Mode::InPlace, &[], |src| {
        prepare(src);
        let big: String = (1..=3000)
            .map(|i| format!("line {i} of a big module\n"))
            .collect();
        std::fs::write(src.join("big.py"), big).unwrap_or_else(|e| panic!("{e}"));
    });
    ctl(&m, "goal.set", r#"{"goal":"keep the layout"}"#);
    let get = |m: &Mount, budget: u64| {
        ctl(
            m,
            "projection.get",
            &format!(r#"{{"format":"anthropic","budget":{budget}}}"#),
        )["body"]
            .to_string()
    };
    // The agent looks at lines 10-20 of a file too big to show whole, then reads src/a.py.
    let look = r#"{"tool_use_id":"t1","tool_name":"Read","input":{"file_path":"big.py"},
        "result":"...","views":[{"path":"big.py","lines":[10,20]}]}"#;
    cat(&m, &["big.py"]);
    ctl(&m, "step.record", look);
    cat(&m, &["src/a.py"]);
    let first = get(&m, 8000);
    // Reading big.py again makes its part newer than src/a.py, but it shows the same bytes:
    // it keeps its place, ahead of a.
    cat(&m, &["big.py"]);
    let before = get(&m, 8000);
    assert_eq!(
        before, first,
        "an unchanged part keeps its place and its bytes"
    );
    let (big, a) = (before.find("line 10 of"), before.find("A = 1"));
    assert!(big.is_some() && a.is_some() && big < a, "{before}");

    let m = m.restart(&[], |_| {});
    assert_eq!(
        get(&m, 8000),
        before,
        "the first projection after a restart is the last one before it"
    );
    let restored = &ctl(&m, "stats", "{}")["world"]["kept"]["restored"];
    assert_eq!(restored["layouts"], 1, "{restored}");
    // What it would be without the layout: a requester seen for the first time places the
    // parts by their stamps, a before big.py.
    let fresh = get(&m, 8001);
    let (big, a) = (fresh.find("line 10 of"), fresh.find("A = 1"));
    assert!(big.is_some() && a.is_some() && a < big, "{fresh}");
}
