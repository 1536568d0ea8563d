//! The world cache through a live mount and the real socket: an agent-like sequence (read a file,
//! edit one, scan the tree, import modules, rename, delete, read a secret) and an edit made
//! behind the mount yield exactly the expected entries.

mod common;

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use worldfs::socket::Client;

use common::{Mount, wait_until};

const MODULES: usize = 40;

fn sh(dir: &Path, script: &str) {
    let st = Command::new("sh")
        .arg("-c")
        .arg(script)
        .current_dir(dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .expect("spawn sh");
    assert!(st.success(), "`{script}` failed: {st}");
}

fn entries(c: &mut Client) -> Vec<Value> {
    let r = c
        .call("entries.list", json!({}))
        .expect("entries.list answers");
    r["entries"].as_array().cloned().unwrap_or_default()
}

fn entry<'a>(list: &'a [Value], path: &str) -> Option<&'a Value> {
    list.iter().find(|e| e["path"] == path)
}

/// Polls until `cond` holds on the entry list (ingest is asynchronous), failing loudly.
fn until(c: &mut Client, what: &str, mut cond: impl FnMut(&[Value]) -> bool) -> Vec<Value> {
    let mut last = Vec::new();
    let ok = wait_until(Duration::from_secs(5), || {
        last = entries(c);
        cond(&last)
    });
    assert!(
        ok.is_some(),
        "{what}: not reached within 5 s; entries: {}",
        serde_json::to_string_pretty(&last).unwrap_or_default()
    );
    last
}

#[test]
fn agent_sequence_through_the_mount_yields_the_expected_world() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::create_dir_all(src.join("src/pkg")).expect("mkdir");
        std::fs::write(src.join("src/app.py"), "print('app')\n").expect("write");
        std::fs::write(src.join("src/util.py"), "def helper():\n    return 1\n").expect("write");
        std::fs::write(src.join(".env"), "API_KEY=very-secret\n").expect("write");
        std::fs::write(src.join("src/notes.txt"), "notes\n").expect("write");
        for i in 0..MODULES {
            std::fs::write(
                src.join(format!("src/pkg/m{i}.py")),
                format!("X{i} = {i}\n"),
            )
            .expect("write");
        }
    });
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let root = m.root.clone();

    // The agent reads one file and edits another.
    sh(&root, "cat src/app.py");
    sh(&root, "echo '# edited' >> src/util.py");
    let list = until(&mut c, "read and edit recorded", |l| {
        entry(l, "src/app.py").is_some_and(|e| e["reads"].as_u64() >= Some(1))
            && entry(l, "src/util.py").is_some_and(|e| e["agent_wrote"] == true)
    });
    let app = entry(&list, "src/app.py").expect("app entry");
    assert_eq!(app["state"], "live");
    // The FUSE thread reads the caller's name right after replying, so even a `cat` that has
    // exited before the world looks is usually named; but it may exit before that read, too
    // (docs/observation.md). When the name is known, it must be the reader.
    let programs = app["programs"].as_array().cloned().unwrap_or_default();
    assert!(programs.iter().all(|x| x == "cat"), "{app}");

    // A reader still running when its open is served is named for certain, also after it
    // exited: it is blocked on its stdin (held here) until the world has recorded the read.
    let mut held = Command::new("cat")
        .args(["src/notes.txt", "-"])
        .current_dir(&root)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("spawn cat");
    let list = until(&mut c, "held reader recorded", |l| {
        entry(l, "src/notes.txt").is_some_and(|e| e["reads"].as_u64() >= Some(1))
    });
    drop(held.stdin.take());
    let st = held.wait().expect("wait for cat");
    assert!(st.success(), "cat: {st}");
    let notes = entry(&list, "src/notes.txt").expect("notes entry");
    assert_eq!(notes["programs"], json!(["cat"]), "{notes}");

    // A whole-tree scan and an interpreter importing many modules must not flood the world.
    sh(&root, "grep -r needle . > /dev/null || true");
    let imports: Vec<String> = (0..MODULES).map(|i| format!("m{i}")).collect();
    sh(
        &root,
        &format!(
            "python3 -c 'import sys; sys.path.insert(0, \"src/pkg\"); import {}'",
            imports.join(", ")
        ),
    );

    // Rename, delete, and a secret.
    sh(&root, "mv src/util.py src/helpers.py");
    sh(&root, "rm src/app.py");
    sh(&root, "cat .env > /dev/null");
    let list = until(&mut c, "rename, delete and secret recorded", |l| {
        entry(l, "src/helpers.py").is_some()
            && entry(l, "src/util.py").is_none()
            && entry(l, "src/app.py").is_some_and(|e| e["state"] == "deleted")
            && entry(l, ".env").is_some_and(|e| e["state"] == "withheld")
    });
    let pkg: Vec<&Value> = list
        .iter()
        .filter(|e| {
            e["path"]
                .as_str()
                .is_some_and(|p| p.starts_with("src/pkg/"))
        })
        .collect();
    assert!(pkg.is_empty(), "scans and imports created entries: {pkg:?}");
    assert!(
        entry(&list, "src/helpers.py").is_some_and(|e| e["agent_wrote"] == true),
        "the rename kept what the agent did: {list:?}"
    );

    // A secret's content never comes out, even when asked for directly.
    let r = c.call("entries.read", json!({"path": ".env"}));
    let text = format!("{r:?}");
    assert!(!text.contains("very-secret"), "secret leaked: {text}");

    // An edit behind the mount shows up in the entry's current content and through the mount.
    std::fs::write(
        m.source.join("src/helpers.py"),
        "def helper():\n    return 2  # changed behind the mount\n",
    )
    .expect("external write");
    let seen = wait_until(Duration::from_secs(5), || {
        c.call("entries.read", json!({"path": "src/helpers.py"}))
            .map(|r| r.to_string().contains("changed behind the mount"))
            .unwrap_or(false)
    });
    assert!(seen.is_some(), "the external edit never reached the world");
    let through = std::fs::read_to_string(root.join("src/helpers.py")).expect("read");
    assert!(through.contains("changed behind the mount"), "{through}");

    let stats = c.call("stats", json!({})).expect("stats");
    assert_eq!(stats["drops"]["observations"], 0, "{stats}");
}

/// A file written with no name (`O_TMPFILE`) and then linked into place, the way some tools
/// save atomically, enters the world as the agent's new file with what it holds, and its link
/// is no change behind the mount.
#[test]
fn a_file_made_without_a_name_and_linked_is_the_agents_new_file() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::create_dir(src.join("out")).expect("mkdir");
    });
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    sh(
        &m.root,
        // An interpreter's writes are the agent's when it was told the file's name
        // (src/world/attribution.rs), as the name is here.
        "python3 -c '
import os, sys
fd = os.open(\"out\", os.O_TMPFILE | os.O_WRONLY, 0o644)
os.write(fd, b\"made unnamed\\n\")
import ctypes
src = f\"/proc/self/fd/{fd}\".encode()
# AT_FDCWD, AT_SYMLINK_FOLLOW: os.link would link the magic link itself.
assert ctypes.CDLL(None).linkat(-100, src, -100, sys.argv[1].encode(), 0x400) == 0
os.close(fd)
' out/report.txt",
    );
    let want = blake3::hash(b"made unnamed\n").to_hex().to_string();
    let list = until(&mut c, "the linked file recorded", |l| {
        entry(l, "out/report.txt")
            .is_some_and(|e| e["agent_wrote"] == true && e["hash"] == want.as_str())
    });
    assert_eq!(
        entry(&list, "out/report.txt").expect("entry")["state"],
        "live"
    );
    let r = c
        .call("entries.read", json!({"path": "out/report.txt"}))
        .expect("entries.read");
    assert!(r.to_string().contains("made unnamed"), "{r}");
    assert_eq!(
        world_counts(&mut c)["external"],
        0,
        "the link came through the mount"
    );
}

/// FUSE names the calling thread. Claude Code's file tools run on a pool of threads named
/// "Bun Pool N": what they read and write is still the `claude` program's, the agent's.
#[test]
fn a_programs_worker_thread_is_the_program() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::write(
            src.join("notes.md"),
            "# Notes\n\nRead by a worker thread.\n",
        )
        .expect("write");
    });
    // A program named `claude` (an interpreter under that name) whose worker thread names itself.
    // The interpreter itself: a version manager's shim would look for a program named `claude`.
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    let python = String::from_utf8_lossy(&python.stdout).trim().to_owned();
    assert!(!python.is_empty(), "python3 is needed");
    let claude = m.scratch.join("claude");
    std::os::unix::fs::symlink(&python, &claude).expect("symlink");
    let st = Command::new(&claude)
        .arg("-c")
        .arg(
            "import ctypes, os, threading
def work():
    # PR_SET_NAME: the thread's own name, as Bun's pool sets it.
    ctypes.CDLL(None).prctl(15, b'Bun Pool 0', 0, 0, 0)
    assert open('/proc/thread-self/comm').read().strip() == 'Bun Pool 0'
    open('notes.md').read()
    with open('out.txt.tmp', 'w') as f:
        f.write('written by a worker thread\\n')
    os.rename('out.txt.tmp', 'out.txt')
t = threading.Thread(target=work)
t.start()
t.join()
",
        )
        .current_dir(&m.root)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .status()
        .expect("run the program");
    assert!(st.success(), "{st}");
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let list = until(&mut c, "the worker's read and write recorded", |l| {
        entry(l, "notes.md").is_some()
            && entry(l, "out.txt").is_some_and(|e| e["agent_wrote"] == true)
    });
    let programs = &entry(&list, "notes.md").expect("notes.md")["programs"];
    assert_eq!(programs, &json!(["claude"]), "{programs}");
}

#[test]
fn a_process_gone_before_its_open_is_emitted_keeps_its_name() {
    // Debug builds pause the FUSE thread between answering an open and emitting it: every
    // process below has exited, and been reaped, before anything after the reply runs.
    let m = Mount::start_env(
        common::Mode::Mirror,
        &[],
        &[("WORLDFS_DEBUG_LATE_EMIT_MS", "400")],
        |src| {
            std::fs::write(src.join("data.csv"), "a,b\n1,2\n").expect("write");
            std::fs::write(src.join("notes.md"), "# Notes\n").expect("write");
            std::fs::write(src.join("fix.py"), "print('fixed')\n").expect("write");
        },
    );
    let started = std::time::Instant::now();
    // An interpreter opening a file its command line does not name: a weak access, no entry.
    // Were it taken for a process nobody could name, it would count as the agent's.
    let st = Command::new("python3")
        .args([
            "-c",
            "import os; os.close(os.open(os.environ['F'], os.O_RDONLY))",
        ])
        .env("F", "data.csv")
        .current_dir(&m.root)
        .status()
        .expect("python3");
    assert!(st.success(), "{st}");
    // The rules that read a command line hold for a process gone as well: the script an
    // interpreter was given is the agent's read (unstamped, it was a weak one: no entry).
    sh(&m.root, "python3 fix.py >/dev/null");
    sh(&m.root, "cat notes.md; echo made > made.txt");
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let list = until(&mut c, "the read and the create recorded", |l| {
        entry(l, "notes.md").is_some() && entry(l, "made.txt").is_some()
    });
    assert_eq!(
        entry(&list, "fix.py").map(|e| &e["programs"]),
        Some(&json!(["python3"])),
        "{list:#?}"
    );
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "the pause did not apply: a debug build is needed"
    );
    assert_eq!(
        entry(&list, "notes.md").map(|e| &e["programs"]),
        Some(&json!(["cat"]))
    );
    assert_eq!(
        entry(&list, "made.txt").map(|e| &e["programs"]),
        Some(&json!(["sh"]))
    );
    assert!(entry(&list, "data.csv").is_none(), "{list:#?}");
}

/// A scanner that lists a few directories and exits within a millisecond (`find`, a shell
/// prompt's `git status`) is named by the mount while it waits for its listing: its listings
/// are a scan, not the agent's. Unnamed, they counted as the agent's (190 of 200 listings by
/// 100 `find` runs, before).
#[test]
fn a_quick_scanners_listings_are_not_the_agents() {
    const DIRS: usize = 20;
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        for i in 0..DIRS {
            std::fs::create_dir_all(src.join(format!("d{i}/sub"))).expect("mkdir");
            std::fs::write(src.join(format!("d{i}/sub/f")), "x\n").expect("write");
        }
    });
    for i in 1..DIRS {
        let st = Command::new("find")
            .arg(format!("d{i}"))
            .current_dir(&m.root)
            .stdout(Stdio::null())
            .status()
            .expect("find");
        assert!(st.success(), "{st}");
    }
    // The agent's own listing, after them: once it is in, so are theirs.
    sh(&m.root, "ls d0/sub");
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let list = until(&mut c, "the agent's listing recorded", |l| {
        entry(l, "d0/sub").is_some()
    });
    assert_eq!(
        entry(&list, "d0/sub").map(|e| &e["programs"]),
        Some(&json!(["ls"]))
    );
    let scanned: Vec<&str> = list
        .iter()
        .filter_map(|e| e["path"].as_str())
        .filter(|p| p.starts_with('d') && *p != "d0/sub" && *p != "d0")
        .collect();
    assert!(
        scanned.is_empty(),
        "listings by `find` taken for the agent's: {scanned:?}"
    );
}

/// The world's counters from `stats`.
fn world_counts(c: &mut Client) -> Value {
    let stats = c.call("stats", json!({})).expect("stats");
    stats["world"]["by_class"].clone()
}

fn hash_of(list: &[Value], path: &str) -> Option<String> {
    entry(list, path).and_then(|e| e["hash"].as_str().map(str::to_owned))
}

#[test]
fn the_mounts_own_writes_are_not_changes_behind_it() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::write(src.join("notes.txt"), "first\n").expect("write");
    });
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let root = m.root.clone();

    sh(
        &root,
        "cat notes.txt; echo one > notes.txt; echo two > notes.txt; echo three >> notes.txt; \
         chmod 600 notes.txt; touch notes.txt",
    );
    // Names made, moved and removed through the mount, many in a row: the watcher may read an
    // event before the system call that caused it has returned.
    sh(
        &root,
        "mkdir d; for i in $(seq 1 60); do echo $i > d/f$i; mv d/f$i d/g$i; ln d/g$i d/h$i; \
         rm d/g$i; done; rm -r d; mkdir -p a/b; mv a z; mv z/b z/c; rm -r z; \
         echo 1 > x1; echo 2 > x2; \
         python3 -c 'import ctypes; assert ctypes.CDLL(None).renameat2(-100, b\"x1\", -100, b\"x2\", 2) == 0' && \
         rm x1 x2",
    );
    // The watcher reports in order: once a directory made behind the mount is counted, every
    // echo of the writes above has been too.
    std::fs::create_dir(m.source.join("made-behind")).expect("mkdir behind the mount");
    let ok = wait_until(Duration::from_secs(5), || {
        world_counts(&mut c)["external"].as_u64() >= Some(1)
    });
    assert!(ok.is_some(), "the mkdir behind the mount was never seen");
    let counts = world_counts(&mut c);
    assert_eq!(
        counts["external"], 1,
        "only the mkdir is behind the mount: {counts}"
    );
    assert!(
        counts["echo"].as_u64() >= Some(1),
        "no echo reported: {counts}"
    );
    // The same count, as `worldfs status` shows it to a user (echoes may still be arriving:
    // the kernel releases a closed file after close() has returned).
    let status = m.status();
    assert!(
        status.contains("behind:   changes made behind the mount 1; echoes of the mount's own"),
        "{status}"
    );
    let want = blake3::hash(b"two\nthree\n").to_hex().to_string();
    until(&mut c, "the mount's writes counted", |l| {
        hash_of(l, "notes.txt").as_deref() == Some(want.as_str())
    });

    // A write behind the mount just after one through it, of the same length, so that even
    // the file's size cannot tell them apart: it arrives as (or merged into) an echo, and the
    // world must still count the content behind the mount.
    std::fs::write(root.join("notes.txt"), "mount\n").expect("write through the mount");
    std::fs::write(m.source.join("notes.txt"), "other\n").expect("write behind the mount");
    let want = blake3::hash(b"other\n").to_hex().to_string();
    until(&mut c, "the write behind the mount counted", |l| {
        hash_of(l, "notes.txt").as_deref() == Some(want.as_str())
    });
    let r = c
        .call("projection.get", json!({"format": "text", "budget": 4000}))
        .expect("projection");
    assert!(r.to_string().contains("other"), "{r}");
}

#[test]
fn status_says_when_nothing_watches_behind_the_mount() {
    let m = Mount::start(common::Mode::Mirror, &["--no-watch"], |_| {});
    let status = m.status();
    assert!(
        status.contains("behind:   not watched (--no-watch,"),
        "{status}"
    );
}

/// The ops the journal recorded for `path`, in order, after the daemon stopped.
fn journaled_ops(journal: &Path, path: &str) -> Vec<String> {
    std::fs::read_to_string(journal)
        .expect("journal")
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("journal line"))
        .filter(|r| r["path"] == path)
        .filter_map(|r| r["op"]["op"].as_str().map(str::to_owned))
        .collect()
}

/// A close is observed only where it is the one sign of writes: with kernel passthrough the
/// writes never reach the daemon. Through the daemon each write was observed already, and the
/// kernel sends RELEASE after close() returned, so an observation of it would land before or
/// after the caller's next socket call by chance, and take a place in the stream's order that
/// a command recorded next would otherwise have (the replay's numbers changed under load).
#[test]
fn a_close_is_observed_only_when_it_is_the_sign_of_writes() {
    for (io, close_wanted) in [("passthrough", true), ("daemon", false)] {
        let (_tmp, dir) = common::tempdir();
        let journal = dir.join("journal.jsonl");
        let journal_arg = journal.to_str().expect("utf-8 path").to_owned();
        let m = Mount::start(
            common::Mode::Mirror,
            &["--io", io, "--journal", &journal_arg],
            |_| {},
        );
        sh(&m.root, "echo one > f.txt; cat f.txt > /dev/null");
        m.signal(libc::SIGTERM);
        assert!(
            m.wait_exit(Duration::from_secs(10)).is_some(),
            "--io {io}: the daemon did not stop"
        );
        let ops = journaled_ops(&journal, "f.txt");
        assert_eq!(
            ops.iter().any(|o| o == "close"),
            close_wanted,
            "--io {io}: {ops:?}"
        );
        // either way the write itself is recorded
        let wrote = if close_wanted { "open" } else { "write" };
        assert!(ops.iter().any(|o| o == wrote), "--io {io}: {ops:?}");
    }
}

/// The opens for reading and reads of `path` after `since`, as `changes.since` returns them.
fn reads_since(c: &mut Client, since: u64, path: &str) -> usize {
    let r = c
        .call("changes.since", json!({"seq": since}))
        .expect("changes.since answers");
    r["observations"].as_array().map_or(0, |o| {
        o.iter()
            .filter(|o| o["path"] == path && (o["op"] == "read" || o["read"] == true))
            .count()
    })
}

fn last_seq(c: &mut Client) -> u64 {
    let r = c
        .call("changes.since", json!({"seq": 0, "limit": 0}))
        .expect("changes.since answers");
    r["last_seq"].as_u64().expect("last_seq")
}

#[test]
fn changes_since_already_holds_what_the_client_just_did() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::write(src.join("a.txt"), "a\n").expect("write");
    });
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    // The mount emits a read after replying to it and the world applies it on its own thread,
    // so without waiting for that, `changes.since` missed a read made just before it about one
    // call in three, and a `last_seq` noted right after a read came before it: the read then
    // counted as the command's that followed (docs/protocol.md, `since_seq`).
    for round in 1..=20 {
        let since = last_seq(&mut c);
        // A new open each round: the kernel would serve a second read of an open file from its
        // page cache.
        let text = std::fs::read_to_string(m.path("a.txt")).expect("read through the mount");
        assert_eq!(text, "a\n");
        assert!(
            reads_since(&mut c, since, "a.txt") >= 1,
            "round {round}: the read just made is not in changes.since"
        );
        assert!(
            last_seq(&mut c) > since,
            "round {round}: last_seq does not cover the read"
        );
    }
}

/// A file system mounted below SOURCE (bound there with its files already in it, so no watcher
/// event tells of them) makes the world count what it had seen there again, and so does its
/// unmount. The mount's own changes on it are echoes, not changes behind the mount, though
/// inotify watches it without naming processes while fanotify watches SOURCE's file system.
#[test]
fn a_file_system_mounted_below_source_is_counted_again_as_it_comes_and_goes() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::create_dir(src.join("sub")).expect("mkdir");
        std::fs::write(src.join("sub/notes.txt"), "covered\n").expect("write");
    });
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let root = m.root.clone();
    sh(&root, "cat sub/notes.txt");
    let covered = blake3::hash(b"covered\n").to_hex().to_string();
    until(&mut c, "the file read", |l| {
        hash_of(l, "sub/notes.txt").as_deref() == Some(covered.as_str())
    });

    let ready = m.scratch.join("ready");
    std::fs::create_dir(&ready).expect("mkdir");
    let tmpfs = common::TestFs::tmpfs(&ready);
    std::fs::write(ready.join("notes.txt"), "on the tmpfs\n").expect("write");
    let bound = Command::new("mount")
        .arg("--bind")
        .arg(&ready)
        .arg(m.source.join("sub"))
        .status()
        .expect("running mount --bind");
    assert!(bound.success(), "mount --bind");
    // Unmounted (lazily) before the tmpfs below it, and before the mount, if anything fails.
    let bind = Unmount(m.source.join("sub"));
    let on_tmpfs = blake3::hash(b"on the tmpfs\n").to_hex().to_string();
    until(&mut c, "the file on the mounted file system counted", |l| {
        hash_of(l, "sub/notes.txt").as_deref() == Some(on_tmpfs.as_str())
    });

    let before = world_counts(&mut c)["external"].as_u64().unwrap_or(0);
    sh(
        &root,
        "for i in $(seq 1 20); do echo $i > sub/f$i; mv sub/f$i sub/g$i; rm sub/g$i; done; \
         mkdir sub/d; rmdir sub/d",
    );
    std::fs::create_dir(m.source.join("sub/made-behind")).expect("mkdir behind the mount");
    let ok = wait_until(Duration::from_secs(5), || {
        world_counts(&mut c)["external"].as_u64() > Some(before)
    });
    assert!(ok.is_some(), "the mkdir behind the mount was never seen");
    let counts = world_counts(&mut c);
    assert_eq!(
        counts["external"].as_u64(),
        Some(before + 1),
        "only the mkdir is behind the mount: {counts}"
    );

    drop(bind);
    until(
        &mut c,
        "the covered file counted again once unmounted",
        |l| hash_of(l, "sub/notes.txt").as_deref() == Some(covered.as_str()),
    );
    drop(tmpfs);
}

/// Unmounts a path lazily when dropped.
struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// What the agent deletes itself (an `rm` it runs, naming the file) gets no notice in the
/// projection: its step said so. A file removed from another shell, and one removed behind the
/// mount, are said to be gone.
#[test]
fn only_deletions_the_agent_did_not_make_are_noticed() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        for f in ["scratch.py", "notes.md", "behind.txt"] {
            std::fs::write(src.join(f), format!("{f}\n")).expect("write");
        }
    });
    let agent = stand_in_agent(&m);
    let _reader = agent("cat scratch.py notes.md behind.txt");
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    until(&mut c, "the agent's reads recorded", |l| {
        ["scratch.py", "notes.md", "behind.txt"]
            .iter()
            .all(|f| entry(l, f).is_some())
    });
    let _remover = agent("rm scratch.py");
    sh(&m.root, "rm notes.md");
    std::fs::remove_file(m.source.join("behind.txt")).expect("remove behind the mount");
    until(&mut c, "the three deletions recorded", |l| {
        ["scratch.py", "notes.md", "behind.txt"]
            .iter()
            .all(|f| entry(l, f).is_some_and(|e| e["state"] == "deleted"))
    });
    let text = c
        .call("projection.get", json!({"format": "text", "budget": 8000}))
        .expect("projection.get")["body"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!text.contains("scratch.py"), "the agent's own rm: {text}");
    assert!(
        text.contains("notes.md (deleted)"),
        "another shell's rm: {text}"
    );
    assert!(
        text.contains("behind.txt (deleted)"),
        "behind the mount: {text}"
    );
}

/// A script the agent runs that rewrites a file it has looked at made the agent's edit, though
/// the script's command line names no such file; the same script run from another shell did
/// not, and what the agent's script creates stays out of the world. Python's `open(f, 'w')`
/// truncates with a SETATTR before its open, and the script has exited by the time the world
/// looks: without the truncate's own caller stamp, the other shell's change was the agent's.
#[test]
fn a_file_a_script_of_the_agents_rewrote_is_the_agents() {
    let l = the_agents_script_and_anothers(&[], "{}", |target| {
        format!(
            "open('{target}', 'w').write('x = 2\\n')\nopen('{target}.out', 'w').write('made\\n')\n"
        )
    });
    assert!(entry(&l, "calc.py.out").is_none(), "what the script made");
    assert!(entry(&l, "other.py.out").is_none());
}

/// The same for a script that saves by renaming a new file over the old one (`os.replace`, as
/// atomic writers do): the rename is the script's last call, and the world still tells the
/// agent's script from another shell's by who renamed.
#[test]
fn a_file_a_script_of_the_agents_saved_by_a_rename_is_the_agents() {
    let l = the_agents_script_and_anothers(&[], "{}", |target| {
        format!(
            "import os\nopen('{target}.tmp', 'w').write('x = 2\\n')\n\
             os.replace('{target}.tmp', '{target}')\n"
        )
    });
    assert!(entry(&l, "calc.py.tmp").is_none(), "what the script made");
}

/// Claude Code runs each command in a shell that leads a session of its own (as `setsid`
/// does). The agent is above that shell: the world's walk up a live script's ancestry went on
/// past the session leader. (The script stays a moment, so the world finds it running.)
#[test]
fn a_script_run_in_a_session_of_its_own_below_the_agent_is_the_agents() {
    the_agents_script_and_anothers(&[], "setsid sh -c '{}; true'", |target| {
        format!("import time\nopen('{target}', 'w').write('x = 2\\n')\ntime.sleep(1)\n")
    });
}

/// The same when the script and the shell that ran it have both exited before the world looks
/// (here it lags 400 ms; the ingest thread naps 10 ms between batches anyway, longer than the
/// shell outlives the script): the stamps of the script's requests carry its parent's, and
/// theirs, so the world need not find the shell. Before, 26 to 32 of 50 such rewrites through
/// `bash -c 'python3 w.py && pwd -P'` were the agent's.
#[test]
fn a_script_whose_shell_is_gone_before_the_world_looks_is_still_the_agents() {
    the_agents_script_and_anothers(
        &[("WORLDFS_DEBUG_LATE_INGEST_MS", "400")],
        "setsid sh -c '{}; true'",
        |target| format!("open('{target}', 'w').write('x = 2\\n')\n"),
    );
}

/// Mounts `calc.py` and `other.py` (the daemon with `env`), has the stand-in agent read both,
/// then runs the Python script `body(target)` (which writes `x = 2` into `target`) below the
/// agent on `calc.py`, as the shell command `how` with `{}` for `python3 SCRIPT`, and from
/// another shell on `other.py`. Checks that only the first is the agent's, and returns the
/// entries.
fn the_agents_script_and_anothers(
    env: &[(&str, &str)],
    how: &str,
    body: impl Fn(&str) -> String,
) -> Vec<Value> {
    let m = Mount::start_env(common::Mode::Mirror, &[], env, |src| {
        for f in ["calc.py", "other.py"] {
            std::fs::write(src.join(f), "x = 1\n").expect("write");
        }
    });
    let script = |name: &str, target: &str| {
        let p = m.scratch.join(name);
        std::fs::write(&p, body(target)).expect("write the script");
        p
    };
    let fix = script("fix.py", "calc.py");
    let tidy = script("tidy.py", "other.py");
    let agent = stand_in_agent(&m);
    let _reader = agent("cat calc.py other.py");
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    until(&mut c, "the agent's reads recorded", |l| {
        entry(l, "calc.py").is_some() && entry(l, "other.py").is_some()
    });
    let _fixer = agent(&how.replace("{}", &format!("python3 {}", fix.display())));
    sh(&m.root, &format!("python3 {}", tidy.display()));
    let changed = |f: &str| std::fs::read_to_string(m.root.join(f)).is_ok_and(|t| t == "x = 2\n");
    assert!(changed("other.py"), "the other shell's script ran");
    let settled = |l: &[Value]| {
        changed("calc.py") && entry(l, "calc.py").is_some_and(|e| e["agent_wrote"] == true)
    };
    let l = until(&mut c, "the agent's script's change recorded", settled);
    assert_eq!(
        entry(&l, "other.py").map(|e| e["agent_wrote"].clone()),
        Some(json!(false)),
        "another shell's script: {:?}",
        entry(&l, "other.py")
    );
    l
}

/// Runs a script in a shell named `claude`, which stands for the agent. It stays until killed
/// (`sleep`, which also keeps it from exec'ing into its last command), as the agent outlives
/// the commands it runs.
fn stand_in_agent(m: &Mount) -> impl Fn(&str) -> KillOnDrop + '_ {
    let claude = m.scratch.join("claude");
    std::os::unix::fs::symlink("/bin/sh", &claude).expect("symlink");
    move |script: &str| {
        Command::new(&claude)
            .arg("-c")
            .arg(format!("{script}; sleep 30"))
            .current_dir(&m.root)
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .stdout(Stdio::null())
            .process_group(0)
            .spawn()
            .map(KillOnDrop)
            .expect("run the stand-in agent")
    }
}

/// A child started in a process group of its own, killed with everything it started (and
/// reaped) when the test is done with it, also on failure: a `sleep` left behind would keep
/// its working directory in the mount busy.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Ok(pgid) = i32::try_from(self.0.id()) {
            // SAFETY: kill(2) with a process group id and a signal number; no memory involved.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
        let _ = self.0.wait();
    }
}
