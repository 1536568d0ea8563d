//! worldfs mounted by a user other than root, as most people run it: the daemon, the agent's
//! commands and the client all run as `nobody`.
//!
//! That path differs from root's in every layer: fusermount3 makes the mount (and removes it),
//! only the user's own processes may enter it, reads and writes go through the daemon (kernel
//! passthrough needs root), the inode store holds descriptors instead of file handles (opening
//! by handle needs CAP_DAC_READ_SEARCH), and no credentials are switched per request.
//!
//! Needs fusermount3 (package fuse3) and a `/dev/fuse` the user may open (mode 0666, as
//! distributions ship it). `make test` provides both for its run; without them these tests
//! fail and say so, they do not skip.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use common::{
    FSTYPE, MOUNT_TIMEOUT, force_unmount, mounts_at, run_with_timeout, tempdir, unmount_all_under,
    wait_child, wait_until,
};

const USER: &str = "nobody";
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

/// The user the tests run as, after checking (loudly) that it can mount at all.
#[derive(Clone, Copy)]
struct User {
    uid: u32,
    gid: u32,
}

fn user() -> User {
    common::require_fuse();
    let name = std::ffi::CString::new(USER).expect("user name");
    // SAFETY: a valid C string; the record is copied out before any other getpw* call.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    assert!(!pw.is_null(), "no user {USER} on this machine");
    // SAFETY: non-null, points at libc's static record.
    let u = unsafe {
        User {
            uid: (*pw).pw_uid,
            gid: (*pw).pw_gid,
        }
    };
    let ok = |script: &str| {
        run_with_timeout(
            Command::new("sh")
                .args(["-c", script])
                .uid(u.uid)
                .gid(u.gid),
            COMMAND_TIMEOUT,
        )
        .status
        .success()
    };
    assert!(
        ok("command -v fusermount3"),
        "fusermount3 is missing: a user other than root mounts through it (apt-get install fuse3; \
         `make test` installs it)"
    );
    assert!(
        ok("test -r /dev/fuse && test -w /dev/fuse"),
        "{USER} cannot open /dev/fuse ({:o}): distributions make it mode 0666, and `make test` \
         sets that for its run",
        std::fs::metadata("/dev/fuse").map_or(0, |m| m.permissions().mode() & 0o7777)
    );
    u
}

/// Gives `path` and everything below it to `u`.
fn chown_tree(path: &Path, u: User) {
    std::os::unix::fs::lchown(path, Some(u.uid), Some(u.gid))
        .unwrap_or_else(|e| panic!("chown {}: {e}", path.display()));
    if path.is_dir() && !path.is_symlink() {
        for e in std::fs::read_dir(path).expect("read_dir") {
            chown_tree(&e.expect("dir entry").path(), u);
        }
    }
}

/// A `worldfs mount` run by the user, on temporary directories that belong to it. Dropping it
/// stops the daemon and, as root, removes anything left mounted.
struct UserMount {
    user: User,
    _tmp: tempfile::TempDir,
    base: PathBuf,
    source: PathBuf,
    root: PathBuf,
    /// The daemon; `None` only before the first launch.
    child: Option<Child>,
    log: PathBuf,
    /// The daemon's open-file limit (soft and hard), if lowered.
    fd_limit: Option<u64>,
}

impl UserMount {
    fn start(in_place: bool, prepare: impl FnOnce(&Path)) -> UserMount {
        Self::start_with(in_place, None, prepare)
    }

    fn start_with(in_place: bool, fd_limit: Option<u64>, prepare: impl FnOnce(&Path)) -> UserMount {
        let user = user();
        let (tmp, base) = tempdir();
        let source = base.join("src");
        std::fs::create_dir(&source).unwrap();
        std::fs::create_dir(base.join("home")).unwrap();
        let root = if in_place {
            source.clone()
        } else {
            let m = base.join("mnt");
            std::fs::create_dir(&m).unwrap();
            m
        };
        prepare(&source);
        chown_tree(&base, user);
        let log = base.join("daemon.log");
        let mut m = UserMount {
            user,
            _tmp: tmp,
            base,
            source,
            root,
            child: None,
            log,
            fd_limit,
        };
        m.launch();
        m
    }

    /// Starts the daemon again on the same directories.
    fn launch(&mut self) {
        let logf = std::fs::File::create(&self.log).unwrap();
        let mut cmd = self.as_user(Command::new(common::bin()));
        cmd.arg("mount").arg(&self.source);
        if self.root != self.source {
            cmd.arg(&self.root);
        }
        cmd.stdin(Stdio::null())
            .stdout(logf.try_clone().unwrap())
            .stderr(logf);
        if let Some(n) = self.fd_limit {
            let lim = libc::rlimit {
                rlim_cur: n,
                rlim_max: n,
            };
            // SAFETY: only setrlimit, which is async-signal-safe, runs between fork and exec.
            unsafe {
                cmd.pre_exec(move || {
                    if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) == 0 {
                        Ok(())
                    } else {
                        Err(std::io::Error::last_os_error())
                    }
                });
            }
        }
        self.child = Some(cmd.spawn().expect("spawn worldfs mount"));
        let up = wait_until(MOUNT_TIMEOUT, || {
            self.is_mounted() || self.daemon().try_wait().ok().flatten().is_some()
        });
        assert!(
            up.is_some() && self.is_mounted(),
            "no {FSTYPE} mount at {} by {USER}\n--- daemon output ---\n{}",
            self.root.display(),
            self.log()
        );
    }

    /// `cmd` set up to run as the user, with a home of its own in the test's directory.
    fn as_user(&self, mut cmd: Command) -> Command {
        cmd.uid(self.user.uid)
            .gid(self.user.gid)
            .env("HOME", self.base.join("home"))
            .env("XDG_STATE_HOME", self.base.join("state"))
            .env_remove("WORLDFS_SOCKET")
            .current_dir(&self.base);
        cmd
    }

    /// `sh -c script` as the user, in the mount's root; it must succeed.
    fn sh(&self, script: &str) -> String {
        let mut cmd = self.as_user(Command::new("sh"));
        cmd.args(["-ec", script]).current_dir(&self.root);
        let out = run_with_timeout(&mut cmd, COMMAND_TIMEOUT);
        assert!(
            out.status.success(),
            "as {USER}: {script}\n{}\n--- daemon output ---\n{}",
            String::from_utf8_lossy(&out.stderr),
            self.log()
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `worldfs ARGS...` as the user, in the mount's root.
    fn worldfs(&self, args: &[&OsStr]) -> Output {
        let mut cmd = self.as_user(Command::new(common::bin()));
        cmd.args(args).current_dir(&self.root);
        run_with_timeout(&mut cmd, COMMAND_TIMEOUT)
    }

    /// `worldfs unmount ROOT` as the user, from outside the mount; it must succeed.
    fn unmount(&self) -> String {
        let mut cmd = self.as_user(Command::new(common::bin()));
        cmd.arg("unmount").arg(&self.root);
        let out = run_with_timeout(&mut cmd, COMMAND_TIMEOUT);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "worldfs unmount as {USER}: {err}\n--- daemon output ---\n{}",
            self.log()
        );
        assert!(!self.is_mounted(), "still mounted after: {err}");
        err
    }

    fn is_mounted(&self) -> bool {
        mounts_at(&self.root).iter().any(|m| m.fstype == FSTYPE)
    }

    fn daemon(&mut self) -> &mut Child {
        self.child.as_mut().expect("launched")
    }

    fn wait_exit(&mut self) -> Option<std::process::ExitStatus> {
        wait_child(self.daemon(), Duration::from_secs(10))
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for UserMount {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child
            && child.try_wait().ok().flatten().is_none()
        {
            // SAFETY: not reaped, so the pid is still this child's.
            unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
            if wait_child(child, Duration::from_secs(5)).is_none() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if self.is_mounted() {
            force_unmount(&self.root);
        }
        unmount_all_under(&self.base);
        if std::thread::panicking() {
            eprintln!("--- worldfs daemon output ---\n{}--- end ---", self.log());
        }
    }
}

#[test]
fn a_user_mounts_in_place_sees_its_world_and_unmounts_with_worldfs_unmount() {
    let mut m = UserMount::start(true, |src| {
        std::fs::write(src.join("notes.txt"), "first line\nsecond line\n").unwrap();
    });
    m.sh(
        "cat notes.txt > /dev/null; printf 'fn main() {}\\n' > main.rs; mkdir -p src; \
          mv main.rs src/main.rs; cat src/main.rs > /dev/null",
    );
    assert!(
        wait_until(Duration::from_secs(5), || m
            .log()
            .contains("only your own processes can enter it"))
        .is_some(),
        "the mount says what differs for a user:\n{}",
        m.log()
    );
    let status = m.worldfs(&[OsStr::new("status")]);
    assert!(status.status.success(), "worldfs status: {status:?}");
    assert!(
        String::from_utf8_lossy(&status.stdout).contains(
            "io:       daemon: every read and write passes through worldfs (mounted without root"
        ),
        "status says why the mount is slower: {status:?}"
    );
    assert!(
        String::from_utf8_lossy(&status.stdout)
            .contains("watched with inotify, a watch on each directory (fanotify could not: the daemon is not root)"),
        "status says why SOURCE is watched with inotify: {status:?}"
    );
    let text = m.worldfs(&[
        OsStr::new("projection"),
        OsStr::new("--budget"),
        OsStr::new("4000"),
    ]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains("second line") && text.contains("fn main() {}"),
        "the projection holds what the user's commands read:\n{text}"
    );

    let said = m.unmount();
    assert!(said.contains("unmounted"), "{said}");
    let st = m.wait_exit();
    assert!(
        st.is_some_and(|s| s.success()),
        "the daemon exits cleanly after `worldfs unmount`: {st:?}\n{}",
        m.log()
    );
    let made = std::fs::metadata(m.source.join("src/main.rs")).expect("src/main.rs kept");
    assert_eq!(
        (made.uid(), made.gid()),
        (m.user.uid, m.user.gid),
        "files the user makes belong to it"
    );

    // The world was kept in the user's state directory, and the next mount starts from it.
    m.launch();
    assert!(
        m.log().contains("world restored from"),
        "the remount restores the user's world:\n{}",
        m.log()
    );
    let text = m.worldfs(&[OsStr::new("projection")]);
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("second line"),
        "the restored world projects the files read before"
    );
}

#[test]
fn a_users_mount_left_by_a_killed_daemon_is_removed_by_worldfs_unmount() {
    let mut m = UserMount::start(false, |src| {
        std::fs::write(src.join("a.txt"), "a\n").unwrap();
    });
    m.sh("cat a.txt > /dev/null");
    m.daemon().kill().expect("kill the daemon");
    let _ = m.daemon().wait();
    assert!(
        m.is_mounted(),
        "the dead daemon's mount is still in place until someone removes it"
    );
    m.unmount();
}

#[test]
fn a_users_busy_mount_is_detached_and_its_daemon_serves_until_the_last_user_leaves() {
    let mut m = UserMount::start(false, |src| {
        std::fs::write(src.join("a.txt"), "a\n").unwrap();
    });
    let mut inside = m.as_user(Command::new("sleep"));
    let mut inside = inside
        .arg("60")
        .current_dir(&m.root)
        .spawn()
        .expect("spawn a process inside the mount");
    let said = m.unmount();
    assert!(
        said.contains("detached"),
        "a busy mount is detached: {said}"
    );
    assert!(
        said.contains(&format!(
            "held by sleep (pid {}, working directory)",
            inside.id()
        )),
        "and says what holds it: {said}"
    );
    assert!(
        m.daemon().try_wait().expect("try_wait").is_none(),
        "the daemon serves the process still inside"
    );
    let _ = inside.kill();
    let _ = inside.wait();
    let st = m.wait_exit();
    assert!(
        st.is_some_and(|s| s.success()),
        "the daemon exits once the last user left: {st:?}\n{}",
        m.log()
    );
}

/// What a tree holds, comparable between two runs: kind, permission bits, size, owner, and
/// the content or link target, by relative path (times differ between runs, so they are left
/// out).
fn tree(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).expect("read_dir") {
            let p = e.expect("dir entry").path();
            let md = std::fs::symlink_metadata(&p).expect("lstat");
            let what = if md.is_symlink() {
                format!("link {:?}", std::fs::read_link(&p).expect("readlink"))
            } else if md.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else {
                format!(
                    "file {:?} links {}",
                    String::from_utf8_lossy(&std::fs::read(&p).expect("read")),
                    md.nlink()
                )
            };
            let mode = md.permissions().mode() & 0o7777;
            let rel = p.strip_prefix(root).expect("below root").to_path_buf();
            out.insert(
                rel,
                format!("{what} mode {mode:o} size {} uid {}", md.len(), md.uid()),
            );
        }
    }
    out
}

#[test]
fn a_users_mirror_mount_does_what_the_files_beneath_do() {
    // Every kind of change a build or an agent makes, through the mount and natively.
    let script = "
        printf 'one\\n' > a; printf 'two\\n' >> a; cp a b; truncate -s 2 b
        mkdir -p d/e; printf 'x' > d/e/f; mv d/e/f d/g; rmdir d/e
        printf 'new\\n' > tmp; mv tmp a
        ln a hard; ln -s d/g soft; chmod 640 b; chmod 750 d
        dd if=/dev/zero of=sparse bs=1 count=1 seek=65536 2> /dev/null
        exec 3< hard; rm hard; cat <&3 > read-after-unlink; exec 3<&-
        printf 'z' > gone; rm gone
        cat a b d/g soft > all
        python3 -c \"$TMPFILE\" d unnamed-then-linked
    ";
    // A file made with no name (O_TMPFILE), written, then linked: without file handles the
    // mount holds a descriptor for it, the only way to reach a file that has no name.
    let tmpfile = "
import ctypes, os, sys
fd = os.open(sys.argv[1], os.O_TMPFILE | os.O_RDWR, 0o640)
os.write(fd, b'no name yet\\n')
assert os.pread(fd, 100, 0) == b'no name yet\\n'
src = f'/proc/self/fd/{fd}'.encode()
dst = os.path.join(sys.argv[1], sys.argv[2]).encode()
# AT_FDCWD, AT_SYMLINK_FOLLOW: os.link would link the magic link itself.
assert ctypes.CDLL(None).linkat(-100, src, -100, dst, 0x400) == 0, 'linkat'
os.write(fd, b'and then a name\\n')
os.close(fd)
";
    let m = UserMount::start(false, |_| {});
    m.sh(&format!("TMPFILE=\"{tmpfile}\"; {script}"));
    let native = m.base.join("native");
    std::fs::create_dir(&native).unwrap();
    chown_tree(&native, m.user);
    let mut cmd = m.as_user(Command::new("sh"));
    cmd.args(["-ec", script])
        .env("TMPFILE", tmpfile)
        .current_dir(&native);
    let out = run_with_timeout(&mut cmd, COMMAND_TIMEOUT);
    assert!(out.status.success(), "the script natively: {out:?}");
    let through = tree(&m.source);
    assert!(!through.is_empty());
    assert_eq!(through, tree(&native), "through the mount vs natively");

    // Changes behind the mount show through it once the watcher has told the kernel (within
    // milliseconds: `make bench-latency`); with descriptors in place of file handles, the
    // inode store follows a renamed directory.
    std::fs::rename(m.source.join("d"), m.source.join("renamed")).unwrap();
    std::fs::write(m.source.join("renamed/g"), "changed behind\n").unwrap();
    let script = "cat renamed/g; test ! -e d && echo old-name-gone || true";
    let want = "changed behind\nold-name-gone\n";
    let seen = wait_until(Duration::from_secs(5), || m.sh(script) == want);
    assert!(seen.is_some(), "within 5 s: {:?}", m.sh(script));
}

#[test]
fn a_users_daemon_unmounts_on_sigterm() {
    let mut m = UserMount::start(true, |src| {
        std::fs::write(src.join("a.txt"), "a\n").unwrap();
    });
    m.sh("cat a.txt > /dev/null");
    // SAFETY: the child is alive and not reaped.
    unsafe { libc::kill(m.daemon().id() as i32, libc::SIGTERM) };
    let st = m.wait_exit();
    assert!(
        st.is_some_and(|s| s.success()),
        "SIGTERM ends a user's mount cleanly: {st:?}\n{}",
        m.log()
    );
    assert!(!m.is_mounted(), "nothing stays mounted");
}

#[test]
fn a_users_mount_serves_a_tree_with_more_files_than_it_may_hold_descriptors() {
    // Without root there are no file handles: an inode is reached through a descriptor while
    // a share of the limit lasts, and by its name after that. 3,000 files under a limit of
    // 1,500 failed with "Too many open files" when every inode held one.
    let limit = 1500;
    let m = UserMount::start_with(false, Some(limit), |src| {
        for d in 0..30 {
            let dir = src.join(format!("d{d:02}"));
            std::fs::create_dir(&dir).unwrap();
            for f in 0..100 {
                std::fs::write(dir.join(format!("f{f:03}")), format!("file {d} {f}\n")).unwrap();
            }
        }
    });
    let files = m.sh("find . -type f | wc -l");
    assert_eq!(files.trim(), "3000");
    // stat and read every file, each in its own open, twice (the kernel keeps what it learnt)
    for _ in 0..2 {
        let listed = m.sh("ls -lR . | grep -c '^-'");
        assert_eq!(listed.trim(), "3000");
        let read = m.sh("find . -type f -exec cat {} + | wc -l");
        assert_eq!(read.trim(), "3000");
        let found = m.sh("grep -rl 'file 29 ' . | wc -l");
        assert_eq!(found.trim(), "100");
    }
    // a renamed directory, behind the mount and through it, is read under its new names
    std::fs::rename(m.source.join("d07"), m.source.join("moved")).unwrap();
    m.sh("mv d08 moved-too");
    assert_eq!(
        m.sh("cat moved/f042 moved-too/f001"),
        "file 7 42\nfile 8 1\n"
    );
    m.sh("printf 'changed\\n' > moved/f042");
    assert_eq!(
        std::fs::read_to_string(m.source.join("moved/f042")).unwrap(),
        "changed\n"
    );
    assert!(
        !m.log().contains("run out of file descriptors"),
        "the daemon never ran out:\n{}",
        m.log()
    );
}

#[test]
fn a_users_mount_over_a_directory_it_may_not_read_says_what_it_cannot_watch() {
    // A build directory root made, inside the user's project: inotify cannot watch it.
    let m = UserMount::start_with(false, None, |src| {
        std::fs::create_dir(src.join("ok")).unwrap();
        std::fs::write(src.join("ok/a"), "a\n").unwrap();
        std::fs::create_dir(src.join("locked")).unwrap();
        std::fs::write(src.join("locked/x"), "x\n").unwrap();
    });
    std::os::unix::fs::chown(m.source.join("locked"), Some(0), Some(0)).unwrap();
    std::fs::set_permissions(
        m.source.join("locked"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    // The watch was set before the chown: mount again so it meets the locked directory.
    let mut m = m;
    m.unmount();
    let _ = m.wait_exit();
    m.launch();
    assert_eq!(m.sh("cat ok/a"), "a\n");
    std::fs::write(m.source.join("ok/a"), "changed behind\n").unwrap();
    let seen = wait_until(Duration::from_secs(5), || {
        m.sh("cat ok/a") == "changed behind\n"
    });
    assert!(
        seen.is_some(),
        "a change behind the mount elsewhere is still seen"
    );
    let log = m.log();
    assert!(
        log.contains("cannot watch locked (permission denied)"),
        "says which directory is not watched:\n{log}"
    );
    assert!(!log.contains("invalidating everything"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "no colour codes in a log file:\n{log}"
    );
}

#[test]
fn everyday_tools_work_through_a_users_mount() {
    // scripts/everyday-tools.sh, as tests/mount_everyday.rs runs it natively and through root's
    // mounts: here the daemon and the tools are `nobody`'s, with no file handles and every
    // byte through the daemon. The script is passed as text: `nobody` may not read the checkout.
    let m = UserMount::start(false, |_| {});
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/everyday-tools.sh");
    let script = std::fs::read_to_string(&script).expect("read scripts/everyday-tools.sh");
    let mut cmd = m.as_user(Command::new("bash"));
    cmd.args(["-c", &script, "everyday-tools.sh"]).arg(&m.root);
    let out = run_with_timeout(&mut cmd, COMMAND_TIMEOUT);
    let text = String::from_utf8_lossy(&out.stdout);
    let checks = text.lines().filter(|l| l.starts_with("ok ")).count();
    assert!(
        out.status.success() && checks >= 30,
        "as {USER} ({checks} checks passed):\n{text}\n{}\n--- daemon output ---\n{}",
        String::from_utf8_lossy(&out.stderr),
        m.log()
    );
}
