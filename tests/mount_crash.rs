//! The daemon killed with SIGKILL in the middle of a stream of writes: every write that
//! returned to its caller is in SOURCE, `worldfs unmount` cleans the dead mount, and nothing
//! else under SOURCE changed.

mod common;

use common::{Mode, Mount, snapshot_diff, tree_snapshot, wait_until, worldfs};
use std::ffi::OsStr;
use std::fs;
use std::io::Write;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::Duration;

const CHUNK: usize = 64 * 1024;

/// The byte at offset `i` of the stream: position-dependent, so a misplaced or lost chunk
/// shows.
fn stream_byte(i: u64) -> u8 {
    (i.wrapping_mul(2_654_435_761) >> 13) as u8 ^ (i / CHUNK as u64) as u8
}

fn small_content(k: u64) -> Vec<u8> {
    format!("small file {k}\n")
        .repeat(1 + (k % 7) as usize)
        .into_bytes()
}

fn prepare(src: &Path) {
    fs::create_dir_all(src.join("project/src")).unwrap();
    fs::create_dir_all(src.join("project/.git/objects")).unwrap();
    fs::write(src.join("project/Cargo.toml"), b"[package]\nname = \"x\"\n").unwrap();
    fs::write(
        src.join("project/src/main.rs"),
        b"fn main() {}\n".repeat(100),
    )
    .unwrap();
    fs::write(src.join("project/.git/HEAD"), b"ref: refs/heads/main\n").unwrap();
    fs::write(src.join("project/.git/objects/blob"), vec![7u8; 100_000]).unwrap();
    std::os::unix::fs::symlink("src/main.rs", src.join("project/link")).unwrap();
    fs::write(src.join("untouched"), b"never written by the test").unwrap();
    fs::create_dir(src.join("created")).unwrap();
}

/// Paths the writers touch: everything else must be byte-for-byte (and metadata) unchanged.
fn written_by_test(rel: &Path) -> bool {
    rel == Path::new("stream.bin") || rel.starts_with("created")
}

fn crash_during_writes(mode: Mode, args: &[&str]) {
    // the tree as it was before mounting
    let mut before = None;
    let m = Mount::start(mode, args, |src| {
        prepare(src);
        before = Some(tree_snapshot(src, &written_by_test));
    });
    let before = before.unwrap();
    assert!(!before.is_empty());

    let stop = Arc::new(AtomicBool::new(false));
    // stop the writers however this test ends (declared after `m`, so it runs first)
    struct StopOnDrop(Arc<AtomicBool>);
    impl Drop for StopOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let _stop_guard = StopOnDrop(stop.clone());
    let acked_bytes = Arc::new(AtomicU64::new(0));
    let acked_files = Arc::new(AtomicU64::new(0));
    let (done_tx, done_rx) = mpsc::channel::<&'static str>();
    let done_tx3 = done_tx.clone();

    // writer 1: one large file, sequential writes
    let stream_path = m.path("stream.bin");
    let (s, a, tx) = (stop.clone(), acked_bytes.clone(), done_tx.clone());
    std::thread::spawn(move || {
        let mut f = match fs::OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .mode(0o644)
            .open(&stream_path)
        {
            Ok(f) => f,
            Err(e) => {
                eprintln!("stream writer: open failed: {e}");
                let _ = tx.send("stream");
                return;
            }
        };
        let mut off = 0u64;
        let mut buf = vec![0u8; CHUNK];
        while !s.load(Ordering::SeqCst) {
            for (i, b) in buf.iter_mut().enumerate() {
                *b = stream_byte(off + i as u64);
            }
            match f.write(&buf) {
                Ok(n) => {
                    off += n as u64;
                    a.store(off, Ordering::SeqCst);
                }
                Err(_) => break,
            }
        }
        drop(f);
        let _ = tx.send("stream");
    });

    // writer 2: many small files, each acknowledged once close returned
    let created = m.path("created");
    let (s, a, tx) = (stop.clone(), acked_files.clone(), done_tx);
    std::thread::spawn(move || {
        let mut k = 0u64;
        while !s.load(Ordering::SeqCst) {
            let r = (|| -> std::io::Result<()> {
                let mut f = fs::File::create(created.join(format!("f{k:05}")))?;
                f.write_all(&small_content(k))?;
                drop(f);
                Ok(())
            })();
            if r.is_err() {
                break;
            }
            k += 1;
            a.store(k, Ordering::SeqCst);
        }
        let _ = tx.send("files");
    });

    // writer 3: someone else (an editor, git) changes the same directory behind the mount at
    // the same time, so the daemon is busy invalidating the kernel's caches when it dies
    // SAFETY: dup of a descriptor the Mount keeps open; the thread owns the copy.
    let backing_own = unsafe { OwnedFd::from_raw_fd(libc::dup(m.backing_fd())) };
    let (s, tx) = (stop.clone(), done_tx3);
    std::thread::spawn(move || {
        let backing = backing_own.as_raw_fd();
        let mut k = 0u64;
        while !s.load(Ordering::SeqCst) {
            let name = std::ffi::CString::new(format!("created/ext{k:05}")).unwrap();
            // SAFETY: valid dirfd (owned by this thread) and path.
            let fd = unsafe {
                libc::openat(
                    backing,
                    name.as_ptr(),
                    libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC,
                    0o644,
                )
            };
            if fd < 0 {
                break;
            }
            // SAFETY: fd is ours.
            unsafe {
                libc::write(fd, b"external".as_ptr().cast(), 8);
                libc::close(fd);
            }
            if k % 3 == 2 {
                let old = std::ffi::CString::new(format!("created/ext{:05}", k - 1)).unwrap();
                // SAFETY: valid dirfd and path.
                unsafe { libc::unlinkat(backing, old.as_ptr(), 0) };
            }
            k += 1;
        }
        let _ = tx.send("external");
    });

    // let the streams run, then kill the daemon while they are writing
    let enough = wait_until(Duration::from_secs(20), || {
        acked_bytes.load(Ordering::SeqCst) >= 8 << 20 && acked_files.load(Ordering::SeqCst) >= 50
    });
    let at_kill = (
        acked_bytes.load(Ordering::SeqCst),
        acked_files.load(Ordering::SeqCst),
    );
    m.kill9();
    // writes may keep succeeding after the kill (kernel passthrough does not need the
    // daemon); whatever was acknowledged until the writers stop is checked
    stop.store(true, Ordering::SeqCst);
    for _ in 0..3 {
        let who = done_rx.recv_timeout(Duration::from_secs(20));
        if who.is_err() {
            m.abort_connection();
            panic!("a writer is stuck in the dead mount 20 s after the daemon was killed");
        }
    }
    assert!(
        enough.is_some(),
        "the writers never got going through the mount: {at_kill:?} acknowledged\n{}",
        m.log()
    );
    let bytes = acked_bytes.load(Ordering::SeqCst);
    let files = acked_files.load(Ordering::SeqCst);
    println!(
        "crash {mode:?} {args:?}: killed at {} bytes / {} files acknowledged; final {bytes} bytes / {files} files",
        at_kill.0, at_kill.1
    );

    // clean the dead mount
    assert!(m.is_mounted(), "the dead mount should still be there");
    let out = worldfs(&[OsStr::new("unmount"), m.root.as_os_str()]);
    assert!(
        out.status.success(),
        "worldfs unmount of the dead mount: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!m.is_mounted(), "still mounted after `worldfs unmount`");

    // every acknowledged byte is in SOURCE
    let data = fs::read(m.source.join("stream.bin")).expect("stream.bin in SOURCE");
    assert!(
        data.len() as u64 >= bytes,
        "stream.bin in SOURCE has {} bytes but {bytes} were acknowledged",
        data.len()
    );
    if let Some(bad) = (0..bytes).find(|&i| data[i as usize] != stream_byte(i)) {
        panic!(
            "stream.bin in SOURCE differs from what was written at byte {bad} (of {bytes} acknowledged)"
        );
    }
    // every acknowledged small file is complete
    for k in 0..files {
        let p = m.source.join(format!("created/f{k:05}"));
        match fs::read(&p) {
            Ok(c) if c == small_content(k) => {}
            Ok(c) => panic!(
                "{} has {} bytes, expected {} (acknowledged before the kill)",
                p.display(),
                c.len(),
                small_content(k).len()
            ),
            Err(e) => panic!("{} acknowledged but missing in SOURCE: {e}", p.display()),
        }
    }
    // nothing else changed
    let after = tree_snapshot(&m.source, &written_by_test);
    let diff = snapshot_diff(&before, &after);
    assert!(
        diff.is_empty(),
        "SOURCE changed outside what the test wrote:\n{}",
        diff.join("\n")
    );
}

#[test]
fn sigkill_mid_write_passthrough() {
    crash_during_writes(Mode::Mirror, &["--io", "passthrough"]);
}

#[test]
fn sigkill_mid_write_daemon_io() {
    crash_during_writes(Mode::Mirror, &["--io", "daemon"]);
}

#[test]
fn sigkill_mid_write_in_place() {
    crash_during_writes(Mode::InPlace, &[]);
}

/// A killed daemon cannot remove its pid file and its socket; its watchdog does, so a runtime
/// directory does not fill with them (a crash test's temporary mounts left two files each).
#[test]
fn a_killed_daemons_pid_file_and_socket_are_removed() {
    let m = Mount::mirror();
    let socket = m.socket();
    let dir = socket
        .parent()
        .unwrap_or_else(|| panic!("the socket has a directory: {}", socket.display()))
        .to_path_buf();
    let root = m.root.display().to_string();
    // The pid file names the mount point on its second line.
    let pid_file = || {
        fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "pid"))
            .find(|p| fs::read_to_string(p).is_ok_and(|t| t.lines().nth(1) == Some(&*root)))
    };
    assert!(socket.exists(), "{}", socket.display());
    assert!(
        pid_file().is_some(),
        "no pid file for {root} in {}",
        dir.display()
    );
    m.kill9();
    let gone = wait_until(Duration::from_secs(5), || {
        !socket.exists() && pid_file().is_none()
    });
    assert!(
        gone.is_some(),
        "left after the daemon was killed: socket {} ({}), pid file {:?}",
        socket.display(),
        socket.exists(),
        pid_file()
    );
}

/// The watchdog process of the daemon `pid` (`worldfs __watchdog PID ...`).
fn watchdog_of(pid: i32) -> Option<i32> {
    let want = format!("__watchdog\0{pid}\0");
    fs::read_dir("/proc")
        .ok()?
        .filter_map(Result::ok)
        .find_map(|e| {
            let p: i32 = e.file_name().to_str()?.parse().ok()?;
            let cmdline = fs::read(e.path().join("cmdline")).ok()?;
            String::from_utf8_lossy(&cmdline)
                .contains(&want)
                .then_some(p)
        })
}

/// The device number of the worldfs mount at `root`, from mountinfo.
fn mount_dev(root: &Path) -> Option<String> {
    common::mounts_at(root)
        .into_iter()
        .find(|m| m.fstype == "fuse.worldfs")
        .map(|m| m.dev)
}

/// A killed daemon's watchdog may act late (a loaded machine), after the dead mount was removed
/// and the directory mounted again. The new mount may get the dead one's device number (the
/// kernel hands out the lowest free) and its socket the dead socket's inode: the watchdog must
/// neither abort the new mount's connection nor remove its socket.
#[test]
fn a_watchdog_late_to_a_killed_daemon_leaves_the_next_mount_alone() {
    let m = Mount::mirror();
    fs::write(m.backing("kept.txt"), "still served\n").unwrap();
    // The daemon starts it once mounted, maybe a moment after the mount answers.
    let mut watchdog = None;
    wait_until(Duration::from_secs(10), || {
        watchdog = watchdog_of(m.pid());
        watchdog.is_some()
    });
    let watchdog = watchdog.expect("the daemon's watchdog process");
    let old_dev = mount_dev(&m.root);
    // Held back until the next mount is up, as a watchdog descheduled for a while would be.
    // SAFETY: a signal to a process of this test's daemon.
    unsafe { libc::kill(watchdog, libc::SIGSTOP) };
    m.kill9();
    let m = m.restart(&[], |_| {});
    let new_dev = mount_dev(&m.root);
    eprintln!(
        "device of the killed mount {old_dev:?}, of the next one {new_dev:?} (reused: {})",
        old_dev == new_dev
    );
    unsafe { libc::kill(watchdog, libc::SIGCONT) };
    let ended = wait_until(Duration::from_secs(10), || {
        fs::read_to_string(format!("/proc/{watchdog}/stat")).map_or(true, |s| {
            s.rsplit_once(')')
                .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
        })
    });
    assert!(ended.is_some(), "the watchdog did not end");
    assert_eq!(
        fs::read_to_string(m.path("kept.txt")).map_err(|e| e.to_string()),
        Ok("still served\n".to_owned()),
        "the next mount no longer serves"
    );
    let socket = m.socket();
    assert!(
        socket.exists(),
        "the next mount's socket {} was removed",
        socket.display()
    );
    let out = worldfs(&[
        OsStr::new("ctl"),
        OsStr::new("--socket"),
        socket.as_os_str(),
        OsStr::new("stats"),
    ]);
    assert!(
        out.status.success(),
        "the next mount's socket does not answer: {out:?}"
    );
}
