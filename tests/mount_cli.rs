//! The `worldfs` command line: bad input fails cleanly, signals unmount cleanly, in-place
//! mounts keep their data, `worldfs unmount` handles live and dead daemons.

mod common;

use common::{Mode, Mount, Scratch, bin, mounts_at, run_with_timeout, worldfs, worldfs_mounts_at};
use std::ffi::OsStr;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

/// A bad invocation must fail fast: a daemon that is still running after this long has
/// probably mounted something.
const ERROR_TIMEOUT: Duration = Duration::from_secs(10);

fn os(s: &impl AsRef<OsStr>) -> &OsStr {
    s.as_ref()
}

/// Runs `worldfs ARGS` expecting a prompt failure.
fn fails(args: &[&OsStr]) -> Output {
    run_with_timeout(Command::new(bin()).args(args), ERROR_TIMEOUT)
}

/// Non-zero exit and exactly one non-empty stderr line starting `worldfs: error:` that
/// mentions one of `mentions` (a path or a word naming the problem).
fn assert_error(what: &str, out: &Output, mentions: &[&str]) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert!(
        !out.status.success(),
        "{what}: exit status {} (expected failure); stderr:\n{stderr}",
        out.status
    );
    assert_eq!(
        lines.len(),
        1,
        "{what}: expected a one-line error on stderr, got {} lines:\n{stderr}",
        lines.len()
    );
    assert!(
        lines[0].starts_with("worldfs: error:"),
        "{what}: the error line does not start with `worldfs: error:`: {:?}",
        lines[0]
    );
    let lower = lines[0].to_lowercase();
    assert!(
        mentions.iter().any(|m| lower.contains(&m.to_lowercase())),
        "{what}: the error {:?} names none of {mentions:?}",
        lines[0]
    );
}

fn assert_nothing_mounted(what: &str, paths: &[&Path]) {
    for p in paths {
        let ms = mounts_at(p);
        assert!(
            ms.is_empty(),
            "{what}: something is mounted at {}: {ms:?}",
            p.display()
        );
    }
}

// ---------------------------------------------------------------------------------------------
// bad input

#[test]
fn help_mentions_every_option() {
    let top = worldfs(&[os(&"--help")]);
    assert!(top.status.success(), "worldfs --help: {}", top.status);
    let top = String::from_utf8_lossy(&top.stdout).to_string();
    for word in ["mount", "unmount"] {
        assert!(
            top.contains(word),
            "`worldfs --help` does not mention {word}:\n{top}"
        );
    }

    let mount = worldfs(&[os(&"mount"), os(&"--help")]);
    assert!(
        mount.status.success(),
        "worldfs mount --help: {}",
        mount.status
    );
    let mount = String::from_utf8_lossy(&mount.stdout).to_string();
    for word in [
        "SOURCE",
        "MOUNTPOINT",
        "--no-observe",
        "--io",
        "passthrough",
        "daemon",
        "--io-uring",
        "enable_uring",
        "-v",
        "SIGINT",
        "SIGTERM",
    ] {
        assert!(
            mount.contains(word),
            "`worldfs mount --help` does not mention {word}:\n{mount}"
        );
    }

    let un = worldfs(&[os(&"unmount"), os(&"--help")]);
    assert!(un.status.success(), "worldfs unmount --help: {}", un.status);
    let un = String::from_utf8_lossy(&un.stdout).to_string();
    assert!(
        un.contains("PATH"),
        "`worldfs unmount --help` does not mention PATH:\n{un}"
    );
}

#[test]
fn error_nonexistent_source() {
    let s = Scratch::new();
    let mnt = s.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let src = s.join("does-not-exist");
    let out = fails(&[os(&"mount"), os(&src), os(&mnt)]);
    assert_error(
        "nonexistent SOURCE",
        &out,
        &[src.to_str().unwrap(), "does-not-exist"],
    );
    assert_nothing_mounted("nonexistent SOURCE", &[&mnt, &src]);

    // in place too
    let out = fails(&[os(&"mount"), os(&src)]);
    assert_error(
        "nonexistent SOURCE in place",
        &out,
        &[src.to_str().unwrap(), "does-not-exist"],
    );
}

#[test]
fn error_source_is_a_file() {
    let s = Scratch::new();
    let mnt = s.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let file = s.join("a-file");
    std::fs::write(&file, b"not a directory").unwrap();
    let out = fails(&[os(&"mount"), os(&file), os(&mnt)]);
    assert_error(
        "SOURCE is a file",
        &out,
        &[file.to_str().unwrap(), "not a directory"],
    );
    let out = fails(&[os(&"mount"), os(&file)]);
    assert_error(
        "SOURCE is a file, in place",
        &out,
        &[file.to_str().unwrap(), "not a directory"],
    );
    assert_nothing_mounted("SOURCE is a file", &[&mnt, &file]);
    assert_eq!(std::fs::read(&file).unwrap(), b"not a directory");
}

#[test]
fn error_config_file_missing() {
    let s = Scratch::new();
    let src = s.join("src");
    std::fs::create_dir(&src).unwrap();
    let cfg = s.join("worldfs.tmol");
    let out = fails(&[os(&"mount"), os(&src), os(&"--config"), os(&cfg)]);
    assert_error(
        "a --config file that does not exist",
        &out,
        &[cfg.to_str().unwrap()],
    );
    assert_nothing_mounted("a --config file that does not exist", &[&src]);
}

#[test]
fn error_config_budget_out_of_range() {
    let s = Scratch::new();
    let src = s.join("src");
    std::fs::create_dir(&src).unwrap();
    let cfg = s.join("worldfs.toml");
    std::fs::write(&cfg, "[budget]\ntokens = 0\n").unwrap();
    let out = fails(&[os(&"mount"), os(&src), os(&"--config"), os(&cfg)]);
    assert_error(
        "a --config file whose budget is 0",
        &out,
        &[cfg.to_str().unwrap(), "budget.tokens", "out of range"],
    );
    assert_nothing_mounted("a --config file whose budget is 0", &[&src]);
}

#[test]
fn error_mountpoint_inside_source() {
    let s = Scratch::new();
    let src = s.join("src");
    let inner = src.join("sub/mnt");
    std::fs::create_dir_all(&inner).unwrap();
    let out = fails(&[os(&"mount"), os(&src), os(&inner)]);
    assert_error(
        "MOUNTPOINT inside SOURCE",
        &out,
        &[inner.to_str().unwrap(), "inside"],
    );
    assert_nothing_mounted("MOUNTPOINT inside SOURCE", &[&src, &inner]);
}

#[test]
fn error_nonexistent_mountpoint() {
    let s = Scratch::new();
    let src = s.join("src");
    std::fs::create_dir(&src).unwrap();
    let mnt = s.join("no-such-mountpoint");
    let out = fails(&[os(&"mount"), os(&src), os(&mnt)]);
    assert_error(
        "nonexistent MOUNTPOINT",
        &out,
        &[mnt.to_str().unwrap(), "no-such-mountpoint"],
    );
    assert_nothing_mounted("nonexistent MOUNTPOINT", &[&src]);
}

#[test]
fn error_mountpoint_already_mounted_by_worldfs() {
    let m = Mount::start(Mode::Mirror, &[], |src| {
        std::fs::write(src.join("first"), b"1").unwrap();
    });
    let other = m.scratch.join("other-src");
    std::fs::create_dir(&other).unwrap();
    let out = fails(&[os(&"mount"), os(&other), os(&m.root)]);
    assert_error(
        "MOUNTPOINT already a worldfs mount",
        &out,
        &[m.root.to_str().unwrap(), "already"],
    );
    assert_eq!(
        worldfs_mounts_at(&m.root),
        1,
        "exactly the first mount must remain at {}",
        m.root.display()
    );
    assert_eq!(
        std::fs::read(m.path("first")).unwrap(),
        b"1",
        "the first mount must keep working"
    );
}

#[test]
fn error_in_place_over_an_in_place_mount() {
    let m = Mount::start(Mode::InPlace, &[], |src| {
        std::fs::write(src.join("first"), b"1").unwrap();
    });
    let out = fails(&[os(&"mount"), os(&m.source)]);
    assert_error(
        "in place over a worldfs mount",
        &out,
        &[m.source.to_str().unwrap(), "already"],
    );
    // mirroring a path that is itself a worldfs mount is refused as well
    let mnt2 = m.scratch.join("mnt2");
    std::fs::create_dir(&mnt2).unwrap();
    let out = fails(&[os(&"mount"), os(&m.source), os(&mnt2)]);
    assert_error(
        "SOURCE is a worldfs mount",
        &out,
        &[m.source.to_str().unwrap(), "already"],
    );
    assert_nothing_mounted("SOURCE is a worldfs mount", &[&mnt2]);
    assert_eq!(worldfs_mounts_at(&m.source), 1);
    assert_eq!(std::fs::read(m.path("first")).unwrap(), b"1");
}

#[test]
fn error_missing_dev_fuse() {
    common::require_fuse();
    let s = Scratch::new();
    let src = s.join("src");
    let mnt = s.join("mnt");
    std::fs::create_dir(&src).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    // A private mount namespace whose /dev is an empty tmpfs: no /dev/fuse in there.
    let out = run_with_timeout(
        Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c"])
            .arg("mount -t tmpfs none /dev || exit 99; exec \"$0\" mount \"$1\" \"$2\"")
            .arg(bin())
            .arg(&src)
            .arg(&mnt),
        ERROR_TIMEOUT,
    );
    assert_ne!(
        out.status.code(),
        Some(99),
        "test setup: could not hide /dev in a private mount namespace: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_error("missing /dev/fuse", &out, &["/dev/fuse", "fuse"]);
    assert_nothing_mounted("missing /dev/fuse", &[&mnt, &src]);
}

#[test]
fn error_bad_io_value() {
    let s = Scratch::new();
    let src = s.join("src");
    let mnt = s.join("mnt");
    std::fs::create_dir(&src).unwrap();
    std::fs::create_dir(&mnt).unwrap();
    let out = fails(&[os(&"mount"), os(&src), os(&mnt), os(&"--io"), os(&"bogus")]);
    assert!(
        !out.status.success(),
        "--io bogus must be refused, got {}",
        out.status
    );
    assert_nothing_mounted("--io bogus", &[&mnt]);
}

/// `--io-uring on` either mounts over FUSE-over-io_uring or, when the kernel will not offer it,
/// refuses with a one-line error naming the module parameter; `off` always mounts. Which branch
/// runs depends on the machine (the parameter is root's to set), and both are checked for what
/// they promise.
#[test]
fn io_uring_on_mounts_or_names_the_parameter() {
    let enabled = std::fs::read_to_string("/sys/module/fuse/parameters/enable_uring")
        .map(|v| v.trim() == "Y")
        .unwrap_or(false);
    if enabled {
        let m = Mount::mirror_with(&["--io-uring", "on", "-v"]);
        std::fs::write(m.path("f"), b"ring").unwrap();
        assert_eq!(std::fs::read(m.path("f")).unwrap(), b"ring", "read back");
        assert!(
            m.log().contains("FUSE-over-io_uring"),
            "the log does not name the transport:\n{}",
            m.log()
        );
        assert!(
            status_io_line(&m).contains("; requests over FUSE-over-io_uring (one queue per CPU)"),
            "{}",
            status_io_line(&m)
        );
        m.signal(libc::SIGTERM);
        let st = m.wait_exit(common::EXIT_TIMEOUT);
        assert!(
            matches!(st, Some(s) if s.success()),
            "exit: {st:?}\n{}",
            m.log()
        );
    } else {
        let s = Scratch::new();
        let src = s.join("src");
        let mnt = s.join("mnt");
        std::fs::create_dir(&src).unwrap();
        std::fs::create_dir(&mnt).unwrap();
        let out = fails(&[
            os(&"mount"),
            os(&src),
            os(&mnt),
            os(&"--io-uring"),
            os(&"on"),
        ]);
        assert_error("--io-uring on", &out, &["enable_uring", "io_uring"]);
        assert_nothing_mounted("--io-uring on", &[&mnt]);
    }
    let m = Mount::mirror_with(&["--io-uring", "off", "-v"]);
    std::fs::write(m.path("g"), b"dev").unwrap();
    assert_eq!(
        std::fs::read(m.path("g")).unwrap(),
        b"dev",
        "read back (off)"
    );
    assert!(
        m.log().contains("/dev/fuse"),
        "the log does not name the transport:\n{}",
        m.log()
    );
    assert!(
        status_io_line(&m)
            .contains("; requests over /dev/fuse (FUSE-over-io_uring not used: --io-uring off)"),
        "{}",
        status_io_line(&m)
    );
    m.signal(libc::SIGTERM);
    let st = m.wait_exit(common::EXIT_TIMEOUT);
    assert!(
        matches!(st, Some(s) if s.success()),
        "exit (off): {st:?}\n{}",
        m.log()
    );
}

// ---------------------------------------------------------------------------------------------
// mounting, signals, unmount

#[test]
fn in_place_mount_keeps_writes_in_source() {
    let m = Mount::start(Mode::InPlace, &[], |src| {
        std::fs::write(src.join("existing"), b"before").unwrap();
        std::fs::create_dir(src.join("dir")).unwrap();
    });
    // the ready line may follow the mountinfo entry by a moment
    assert!(
        common::wait_until(common::MOUNT_TIMEOUT, || m
            .log()
            .lines()
            .any(|l| l.starts_with("worldfs: mounted")))
        .is_some(),
        "no `worldfs: mounted` line on stderr:\n{}",
        m.log()
    );
    // the existing tree shows at the same path
    assert_eq!(std::fs::read(m.path("existing")).unwrap(), b"before");
    // the path really is the mount now (not the bare directory)
    let st_root = std::fs::metadata(&m.root).unwrap();
    let st_parent = std::fs::metadata(m.root.parent().unwrap()).unwrap();
    assert_ne!(
        st_root.dev(),
        st_parent.dev(),
        "SOURCE's path is not covered by the mount"
    );

    std::fs::write(m.path("new-file"), b"written while mounted").unwrap();
    std::fs::write(m.path("dir/nested"), b"nested").unwrap();
    std::fs::write(m.path("existing"), b"after").unwrap();
    std::fs::remove_dir(m.path("dir")).unwrap_err(); // not empty
    std::fs::create_dir(m.path("made")).unwrap();

    m.signal(libc::SIGTERM);
    let st = m.wait_exit(common::EXIT_TIMEOUT);
    assert!(
        st.is_some(),
        "daemon still running {:?} after SIGTERM\n{}",
        common::EXIT_TIMEOUT,
        m.log()
    );
    assert!(st.unwrap().success(), "exit status {:?}\n{}", st, m.log());
    assert_eq!(
        worldfs_mounts_at(&m.source),
        0,
        "still mounted after SIGTERM"
    );

    // the bare directory now
    assert_eq!(
        std::fs::read(m.source.join("new-file")).unwrap(),
        b"written while mounted"
    );
    assert_eq!(
        std::fs::read(m.source.join("dir/nested")).unwrap(),
        b"nested"
    );
    assert_eq!(std::fs::read(m.source.join("existing")).unwrap(), b"after");
    assert!(m.source.join("made").is_dir());
}

fn signal_exits_cleanly(sig: i32, mode: Mode) {
    let m = Mount::start(mode, &[], |src| {
        std::fs::write(src.join("f"), b"x").unwrap();
    });
    // some traffic first, so every part of the daemon has started
    assert_eq!(std::fs::read(m.path("f")).unwrap(), b"x");
    std::fs::write(m.path("g"), b"y").unwrap();
    let _ = std::fs::read_dir(&m.root).unwrap().count();

    m.signal(sig);
    let st = m.wait_exit(common::EXIT_TIMEOUT);
    let name = if sig == libc::SIGINT {
        "SIGINT"
    } else {
        "SIGTERM"
    };
    assert!(
        st.is_some(),
        "{name} ({mode:?}): daemon still running after {:?} (mounted: {})\n{}",
        common::EXIT_TIMEOUT,
        m.is_mounted(),
        m.log()
    );
    let st = st.unwrap();
    assert!(
        st.success(),
        "{name} ({mode:?}): exit status {st}\n{}",
        m.log()
    );
    assert!(
        !m.is_mounted(),
        "{name} ({mode:?}): still mounted after a clean exit"
    );
}

#[test]
fn sigterm_unmounts_and_exits_zero() {
    signal_exits_cleanly(libc::SIGTERM, Mode::Mirror);
}

#[test]
fn sigint_unmounts_and_exits_zero() {
    signal_exits_cleanly(libc::SIGINT, Mode::Mirror);
}

#[test]
fn sigterm_in_place_unmounts_and_exits_zero() {
    signal_exits_cleanly(libc::SIGTERM, Mode::InPlace);
}

/// A shell sitting inside the mount and an open file must not keep SIGTERM from unmounting:
/// the mount leaves mountinfo at once (a lazy detach is fine), the open file keeps working,
/// and the daemon exits 0 once the last user lets go. It says who held the mount.
#[test]
fn sigterm_with_busy_mount() {
    let m = Mount::mirror();
    std::fs::write(m.path("held"), b"open").unwrap();
    let held = std::fs::File::open(m.path("held")).unwrap();
    let mut sh = Command::new("sh")
        .arg("-c")
        .arg("read line")
        .current_dir(&m.root)
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    m.signal(libc::SIGTERM);
    let gone = common::wait_until(common::EXIT_TIMEOUT, || !m.is_mounted());
    let shell = format!("sh (pid {}, working directory)", sh.id());
    let this = format!("(pid {}, open file)", std::process::id());
    let named = common::wait_until(common::EXIT_TIMEOUT, || {
        let log = m.log();
        log.contains("was busy (held by") && log.contains(&shell) && log.contains(&this)
    });
    let mut buf = [0u8; 4];
    let read_held = std::os::unix::fs::FileExt::read_at(&held, &mut buf, 0).map(|_| buf);
    // let go of the mount
    drop(held);
    drop(sh.stdin.take());
    let _ = sh.wait();
    let st = m.wait_exit(common::EXIT_TIMEOUT);
    assert!(
        gone.is_some(),
        "still in mountinfo {:?} after SIGTERM with a busy mount\n{}",
        common::EXIT_TIMEOUT,
        m.log()
    );
    assert!(
        named.is_some(),
        "the log names who held the mount ({shell}, and {this})\n{}",
        m.log()
    );
    assert_eq!(
        read_held.as_ref().ok(),
        Some(b"open"),
        "a file open through the mount stopped working after SIGTERM: {read_held:?}"
    );
    assert!(
        st.is_some(),
        "daemon still running {:?} after SIGTERM and after its last user let go\n{}",
        common::EXIT_TIMEOUT,
        m.log()
    );
    assert!(
        st.unwrap().success(),
        "exit status {:?} after SIGTERM with a busy mount\n{}",
        st,
        m.log()
    );
}

#[test]
fn unmount_with_live_daemon() {
    let m = Mount::mirror();
    std::fs::write(m.path("f"), b"x").unwrap();
    let out = worldfs(&[os(&"unmount"), os(&m.root)]);
    assert!(
        out.status.success(),
        "worldfs unmount (live daemon): {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!m.is_mounted(), "still mounted after `worldfs unmount`");
    let st = m.wait_exit(common::EXIT_TIMEOUT);
    assert!(
        st.is_some(),
        "the daemon keeps running after its mount was unmounted\n{}",
        m.log()
    );
    assert_eq!(std::fs::read(m.backing("f")).unwrap(), b"x");
}

fn unmount_dead_daemon(mode: Mode) {
    let m = Mount::start(mode, &[], |src| {
        std::fs::write(src.join("kept"), b"kept").unwrap();
    });
    std::fs::write(m.path("written"), b"through the mount").unwrap();
    m.kill9();
    assert!(m.is_mounted(), "a SIGKILLed daemon leaves its mount behind");
    let e = std::fs::metadata(&m.root).map(|_| ()).unwrap_err();
    // ENOTCONN once the watchdog has aborted the connection; ECONNABORTED for a request that
    // was already queued when it did (the kernel ends pending requests with it). Either way
    // the caller gets an error at once instead of hanging.
    assert!(
        matches!(e.raw_os_error(), Some(libc::ENOTCONN | libc::ECONNABORTED)),
        "stat of a dead mount: {e}"
    );

    let out = worldfs(&[os(&"unmount"), os(&m.root)]);
    assert!(
        out.status.success(),
        "worldfs unmount (dead daemon, {mode:?}): {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!m.is_mounted(), "still mounted after `worldfs unmount`");
    // the files are at SOURCE's path again (in place: the very same path)
    assert_eq!(std::fs::read(m.source.join("kept")).unwrap(), b"kept");
    assert_eq!(
        std::fs::read(m.source.join("written")).unwrap(),
        b"through the mount"
    );
    if mode == Mode::Mirror {
        assert!(
            std::fs::read_dir(&m.root).unwrap().next().is_none(),
            "the mount point should be the empty directory again"
        );
    }
}

#[test]
fn unmount_dead_daemon_mirror() {
    unmount_dead_daemon(Mode::Mirror);
}

#[test]
fn unmount_dead_daemon_in_place() {
    unmount_dead_daemon(Mode::InPlace);
}

#[test]
fn unmount_refuses_what_is_not_worldfs() {
    let s = Scratch::new();
    let plain = s.join("plain");
    std::fs::create_dir(&plain).unwrap();
    let out = fails(&[os(&"unmount"), os(&plain)]);
    assert_error(
        "unmount of a plain directory",
        &out,
        &[plain.to_str().unwrap(), "not"],
    );
    let out = fails(&[os(&"unmount"), os(&s.join("missing"))]);
    assert_error(
        "unmount of a missing path",
        &out,
        &["missing", "not", "exist"],
    );

    // a tmpfs is not ours to unmount
    let t = s.join("tmpfs");
    std::fs::create_dir(&t).unwrap();
    let st = Command::new("mount")
        .args(["-t", "tmpfs", "worldfs-test-tmpfs"])
        .arg(&t)
        .status()
        .unwrap();
    assert!(st.success(), "test setup: mount tmpfs");
    struct Umount<'a>(&'a Path);
    impl Drop for Umount<'_> {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg("-l").arg(self.0).status();
        }
    }
    let _guard = Umount(&t);
    let out = fails(&[os(&"unmount"), os(&t)]);
    let still = mounts_at(&t);
    assert_error(
        "unmount of a tmpfs",
        &out,
        &[t.to_str().unwrap(), "not", "worldfs"],
    );
    assert!(
        still.iter().any(|m| m.fstype == "tmpfs"),
        "`worldfs unmount` removed a tmpfs that is not a worldfs mount"
    );
}

#[test]
fn options_no_observe_verbose_and_io_modes_mount() {
    for args in [
        &["--no-observe"][..],
        &["-v"][..],
        &["--io", "daemon"][..],
        &["--io", "passthrough", "--no-observe", "-v"][..],
    ] {
        let m = Mount::mirror_with(args);
        std::fs::write(m.path("f"), b"hello").unwrap();
        assert_eq!(
            std::fs::read(m.path("f")).unwrap(),
            b"hello",
            "{args:?}: read back"
        );
        assert_eq!(
            std::fs::read(m.backing("f")).unwrap(),
            b"hello",
            "{args:?}: in SOURCE"
        );
        m.signal(libc::SIGTERM);
        let st = m.wait_exit(common::EXIT_TIMEOUT);
        assert!(
            matches!(st, Some(s) if s.success()),
            "{args:?}: exit after SIGTERM: {st:?}\n{}",
            m.log()
        );
    }
}

/// The `io:` line of `worldfs status`, after a write through the mount (the line comes once
/// the kernel's first request has).
fn status_io_line(m: &Mount) -> String {
    std::fs::write(m.path("f"), "x").unwrap_or_else(|e| panic!("{e}"));
    let out = worldfs(&[os(&"status"), os(&"--socket"), os(&m.socket())]);
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.starts_with("io:"))
        .map(str::to_owned)
        .unwrap_or_else(|| panic!("no io line: {out:?}"))
}

/// `worldfs status` says how reads and writes move, and why, and over which transport the
/// requests come (and why not the faster one): what makes a mount fast or slow is otherwise
/// invisible.
#[test]
fn status_says_how_reads_and_writes_move() {
    let io_line = status_io_line;
    let daemon = Mount::mirror_with(&["--io", "daemon"]);
    assert!(
        io_line(&daemon)
            .contains("daemon: every read and write passes through worldfs (--io daemon)"),
        "{}",
        io_line(&daemon)
    );
    drop(daemon);
    let auto = Mount::mirror();
    let line = io_line(&auto);
    assert!(
        line.contains("kernel passthrough: reads and writes at native speed")
            || line.contains("the kernel does not offer FUSE passthrough"),
        "{line}"
    );
    let ring_offered = std::fs::read_to_string("/sys/module/fuse/parameters/enable_uring")
        .map(|v| v.trim() == "Y")
        .unwrap_or(false);
    if ring_offered {
        assert!(
            line.contains("; requests over FUSE-over-io_uring (one queue per CPU)")
                || line.contains("FUSE-over-io_uring not used: io_uring is not usable"),
            "{line}"
        );
    } else {
        assert!(
            line.contains(
                "; requests over /dev/fuse (FUSE-over-io_uring not used: \
                 /sys/module/fuse/parameters/enable_uring is N (as root: echo Y > "
            ) || line.contains("the kernel lacks FUSE-over-io_uring"),
            "{line}"
        );
    }
}

/// The client commands find the mount from any directory in it given with `-C DIR` (or as
/// `status DIR` and `projection DIR`), wherever they run, as they do from the current directory.
#[test]
fn clients_find_the_mount_from_a_directory_named_on_the_command_line() {
    let m = Mount::mirror();
    std::fs::create_dir(m.path("sub")).unwrap_or_else(|e| panic!("mkdir: {e}"));
    let sub = m.path("sub");
    let run = |args: &[&OsStr]| {
        run_with_timeout(
            Command::new(bin())
                .args(args)
                .env_remove("WORLDFS_SOCKET")
                .current_dir("/"),
            Duration::from_secs(30),
        )
    };
    let socket_line = format!("socket:   {}", m.socket().display());
    for args in [
        vec![os(&"status"), os(&sub)],
        vec![os(&"status"), os(&"-C"), os(&sub)],
    ] {
        let out = run(&args);
        assert!(out.status.success(), "{args:?}: {out:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&socket_line),
            "{args:?}: {out:?}"
        );
    }
    // A directory named on the command line wins over the environment's socket.
    let out = run_with_timeout(
        Command::new(bin())
            .args([os(&"goal"), os(&"-C"), os(&sub), os(&"ship the parser")])
            .env("WORLDFS_SOCKET", "/nonexistent/worldfs.sock")
            .current_dir("/"),
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{out:?}");
    // A relative DIR is taken from the current directory (here outside the mount).
    let rel = sub
        .strip_prefix(&m.root)
        .unwrap_or_else(|e| panic!("the mount is under its test directory: {e}"));
    let out = run_with_timeout(
        Command::new(bin())
            .arg("goal")
            .arg("-C")
            .arg(rel)
            .env_remove("WORLDFS_SOCKET")
            .current_dir(&m.root),
        Duration::from_secs(30),
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "ship the parser"
    );
    let out = run(&[os(&"status"), os(&sub)]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("\ngoal:     \"ship the parser\"\n"),
        "status shows the goal: {out:?}"
    );
    // `projection DIR` as `status DIR`.
    let out = run(&[os(&"projection"), os(&sub)]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("ship the parser"),
        "the projection starts with the goal: {out:?}"
    );
    // A directory outside any mount is a clear error, as is one that does not exist; two
    // directories are a usage error.
    let out = run(&[os(&"status"), os(&"-C"), os(&"/")]);
    assert_error("status -C /", &out, &["/ is not inside a worldfs mount"]);
    let out = run(&[os(&"projection"), os(&"/no-such-dir/worldfs")]);
    assert_error(
        "projection MISSING",
        &out,
        &["/no-such-dir/worldfs: no such file or directory"],
    );
    for args in [
        vec![os(&"status"), os(&"-C"), os(&sub), os(&sub)],
        vec![
            os(&"status"),
            os(&"-C"),
            os(&sub),
            os(&"--socket"),
            os(&m.socket()),
        ],
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {out:?}");
    }
}

/// A `worldfs watch` started for a test, killed if the test ends before it does.
struct Watch {
    child: std::process::Child,
    dir: tempfile::TempDir,
}

impl Watch {
    fn start(args: &[&OsStr]) -> Watch {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let file = |name: &str| {
            std::fs::File::create(dir.path().join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
        };
        let child = Command::new(bin())
            .arg("watch")
            .args(args)
            .env_remove("WORLDFS_SOCKET")
            .current_dir("/")
            .stdin(std::process::Stdio::null())
            .stdout(file("stdout"))
            .stderr(file("stderr"))
            .spawn()
            .unwrap_or_else(|e| panic!("worldfs watch: {e}"));
        Watch { child, dir }
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default()
    }

    /// Waits until stdout has a line for which `want` holds, and returns it.
    fn line(&self, what: &str, want: impl Fn(&str) -> bool) -> String {
        let mut found = None;
        common::wait_until(Duration::from_secs(10), || {
            found = self
                .read("stdout")
                .lines()
                .find(|l| want(l))
                .map(str::to_owned);
            found.is_some()
        });
        found.unwrap_or_else(|| {
            panic!(
                "no line for {what}; stdout:\n{}\nstderr:\n{}",
                self.read("stdout"),
                self.read("stderr")
            )
        })
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `worldfs watch` prints what happens in the mount as it happens: who read which bytes of
/// which file, renames, changes made behind the mount; only below the PATH it is given, or of
/// the classes it is given; and it ends, saying so, when the mount does.
#[test]
fn watch_prints_what_happens_in_the_mount_as_it_happens() {
    let m = Mount::mirror_with(&["--io", "daemon"]);
    std::fs::create_dir(m.path("sub")).unwrap_or_else(|e| panic!("mkdir: {e}"));
    std::fs::write(m.path("sub/a.txt"), "hello\n").unwrap_or_else(|e| panic!("write: {e}"));
    let below = Watch::start(&[os(&m.path("sub"))]);
    let root = m.root.clone();
    let behind = Watch::start(&[
        os(&"-C"),
        os(&root),
        os(&"--class"),
        os(&"none"),
        os(&"--json"),
    ]);
    for w in [&below, &behind] {
        // Said once subscribed.
        common::wait_until(Duration::from_secs(10), || {
            w.read("stderr").contains("watching")
        })
        .unwrap_or_else(|| panic!("not watching: {}", w.read("stderr")));
    }

    let got = std::fs::read(m.path("sub/a.txt")).unwrap_or_else(|e| panic!("read: {e}"));
    assert_eq!(got, b"hello\n");
    // The kernel names the thread that made the request.
    // SAFETY: gettid has no preconditions.
    let me = format!("[{}]", unsafe { libc::gettid() });
    // Seen before the rename: the mount names a read by the file's name when it emits it, after
    // the reply, and a rename made at once may come first (then the read is of sub/b.txt, as
    // the file is called by then: 1 run in 20).
    let read = below.line("the read", |l| {
        l.contains(" read ") && l.contains("sub/a.txt")
    });
    assert!(read.contains(&me), "named by its pid: {read}");
    assert!(read.ends_with("sub/a.txt  bytes 0-5 (6 B)"), "{read}");
    std::fs::write(m.path("top.txt"), "outside the path watched")
        .unwrap_or_else(|e| panic!("write: {e}"));
    std::fs::rename(m.path("sub/a.txt"), m.path("sub/b.txt"))
        .unwrap_or_else(|e| panic!("rename: {e}"));
    std::fs::write(m.source.join("sub/c.txt"), "made behind the mount")
        .unwrap_or_else(|e| panic!("write behind: {e}"));

    below.line("the rename", |l| {
        l.contains(" rename ") && l.ends_with("sub/a.txt  -> sub/b.txt")
    });
    // Started after them, with --recent: what the mount still holds comes first, as it was
    // shown live.
    let later = Watch::start(&[os(&"--recent"), os(&"50"), os(&m.path("sub"))]);
    assert_eq!(
        later.line("the earlier read", |l| l.contains(" read ")),
        read
    );
    drop(later);
    // Named by the process that made it (this one), which fanotify tells.
    let made_behind = format!("behind: {}[{}]", comm(), std::process::id());
    below.line("the change behind the mount, with its process", |l| {
        l.contains(&made_behind) && l.contains(" created ") && l.contains("sub/c.txt")
    });
    let json = behind.line("the change behind the mount, as JSON", |l| {
        l.contains("sub/c.txt")
    });
    let v: serde_json::Value =
        serde_json::from_str(&json).unwrap_or_else(|e| panic!("not JSON: {e}: {json}"));
    assert_eq!(v["op"], "external", "{v}");
    // A projection served (here asked for on the command line; behind `worldfs proxy`, each
    // model call) is a line of its own, with what it cost.
    let p = worldfs(&[
        os(&"projection"),
        os(&"-C"),
        os(&root),
        os(&"--budget"),
        os(&"5000"),
    ]);
    assert!(p.status.success(), "{p:?}");
    below.line("the projection served", |l| {
        l.contains(" sent ") && l.contains(" of 5,000 tokens, ")
    });
    let out = below.read("stdout");
    assert!(
        !out.contains("top.txt"),
        "only what happens below PATH:\n{out}"
    );
    let out = behind.read("stdout");
    // Every line is of the class asked for (the watcher's echoes of the mount's own writes to
    // sub/a.txt are class none too, and `--json` leaves nothing out): none of the agent's reads.
    for l in out.lines() {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON: {e}: {l}"));
        assert!(
            v["class"].is_null() && v["op"] == "external",
            "only the class asked for: {l}"
        );
    }
    assert!(
        !out.contains("projection"),
        "a class asked for is observations alone:\n{out}"
    );

    drop(m);
    for mut w in [below, behind] {
        let st = common::wait_child(&mut w.child, Duration::from_secs(10))
            .unwrap_or_else(|| panic!("still watching an unmounted mount: {}", w.read("stderr")));
        assert!(st.success(), "{st}: {}", w.read("stderr"));
        assert!(w.read("stderr").contains("is gone"), "{}", w.read("stderr"));
    }
}

/// A PATH outside every worldfs mount is a one-line error, at once.
#[test]
fn watch_outside_a_mount_is_an_error() {
    let out = fails(&[os(&"watch"), os(&"/proc")]);
    assert_error("watch /proc", &out, &["not inside a worldfs mount"]);
}

/// This process's name as the kernel keeps it (at most 15 bytes).
fn comm() -> String {
    std::fs::read_to_string("/proc/self/comm")
        .unwrap_or_else(|e| panic!("/proc/self/comm: {e}"))
        .trim_end()
        .to_owned()
}
