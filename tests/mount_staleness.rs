//! Never stale: changes made to SOURCE behind a mirror mount (an editor, git) become visible
//! through the mount.
//!
//! Every test first primes the kernel's caches through the mount (lookup, stat, read, readdir,
//! and negative lookups of names that do not exist yet), then changes SOURCE directly, then
//! polls through the mount until the change shows (cap: 5 s). Timing is never asserted; the
//! observed latency is printed (`cargo test -- --nocapture` shows it; the target is 100 ms).
//! Each test runs with `--io passthrough` and with `--io daemon`, whose page cache behaves
//! differently, both watched as a root mount is by default (fanotify), and once more with
//! `--watcher inotify`, what a mount without root (or on a file system fanotify cannot mark)
//! is watched with.

mod common;

use common::{Mode, Mount, TestFs, wait_until};
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{FileExt, MetadataExt, PermissionsExt};
use std::path::Path;
use std::time::Duration;

const CAP: Duration = Duration::from_secs(5);
const MODES: [&[&str]; 3] = [
    &["--io", "passthrough"],
    &["--io", "daemon"],
    &["--io", "passthrough", "--watcher", "inotify"],
];

/// Polls `cond` through the mount; prints the latency, fails after [`CAP`].
fn visible(m: &Mount, what: &str, mut cond: impl FnMut() -> bool) {
    match wait_until(CAP, &mut cond) {
        Some(d) => println!("staleness {:?}: {what}: visible after {d:?}", m.args),
        None => panic!(
            "{:?}: {what}: still not visible through the mount after {CAP:?}\n--- daemon output ---\n{}",
            m.args,
            m.log()
        ),
    }
}

fn read(p: &Path) -> Option<Vec<u8>> {
    fs::read(p).ok()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Touches `rel` through the mount every way a tool would, so that whatever the kernel
/// caches for it is cached.
fn prime(m: &Mount, rel: &str) {
    let p = m.path(rel);
    let _ = fs::symlink_metadata(&p);
    let _ = fs::metadata(&p);
    if p.is_file() {
        let _ = fs::read(&p);
        let _ = fs::read(&p);
    }
    if let Some(parent) = p.parent() {
        let _ = names(parent);
    }
}

fn mirror(args: &[&str], prepare: impl FnOnce(&Path)) -> Mount {
    Mount::start(Mode::Mirror, args, prepare)
}

#[test]
fn new_file_appears() {
    for args in MODES {
        let m = mirror(args, |src| fs::create_dir(src.join("d")).unwrap());
        prime(&m, "d");
        prime(&m, "d/new.txt"); // a negative lookup
        prime(&m, "top.txt");
        fs::write(m.backing("d/new.txt"), b"fresh").unwrap();
        fs::write(m.backing("top.txt"), b"top").unwrap();
        visible(&m, "new file: read", || {
            read(&m.path("d/new.txt")).as_deref() == Some(b"fresh")
        });
        visible(&m, "new file: readdir", || {
            names(&m.path("d")) == ["new.txt"]
        });
        visible(&m, "new file at the root: read", || {
            read(&m.path("top.txt")).as_deref() == Some(b"top")
        });
    }
}

#[test]
fn in_place_rewrite_same_size() {
    for args in MODES {
        let m = mirror(args, |src| {
            fs::write(src.join("f.rs"), b"fn main() { v1(); }\n").unwrap()
        });
        prime(&m, "f.rs");
        let before = fs::metadata(m.path("f.rs")).unwrap();
        {
            let f = fs::OpenOptions::new()
                .write(true)
                .open(m.backing("f.rs"))
                .unwrap();
            f.write_all_at(b"fn main() { v2(); }\n", 0).unwrap();
        }
        visible(&m, "same-size in-place rewrite: content", || {
            read(&m.path("f.rs")).as_deref() == Some(b"fn main() { v2(); }\n")
        });
        let src = fs::metadata(m.backing("f.rs")).unwrap();
        visible(&m, "same-size in-place rewrite: mtime", || {
            fs::metadata(m.path("f.rs"))
                .map(|s| (s.mtime(), s.mtime_nsec()) == (src.mtime(), src.mtime_nsec()))
                .unwrap_or(false)
        });
        assert_eq!(before.ino(), src.ino(), "same inode (test sanity)");
    }
}

/// Without a watcher (`--no-watch`, or one that lost sight of a directory), the kernel keeps
/// nothing: a change behind the mount shows at the next use, with no wait. A same-size rewrite
/// of a file read before is the hard case: its cached pages were kept across opens.
#[test]
fn without_a_watcher_nothing_is_served_stale() {
    for args in MODES {
        let args = [args, &["--no-watch"]].concat();
        let m = mirror(&args, |src| {
            fs::write(src.join("f.rs"), b"fn main() { v1(); }\n").unwrap();
            fs::write(src.join("gone.txt"), b"here").unwrap();
        });
        prime(&m, "f.rs");
        prime(&m, "gone.txt");
        prime(&m, "new.txt");
        fs::write(m.backing("f.rs"), b"fn main() { v2(); }\n").unwrap();
        fs::write(m.backing("new.txt"), b"new").unwrap();
        fs::remove_file(m.backing("gone.txt")).unwrap();
        assert_eq!(
            read(&m.path("f.rs")).as_deref(),
            Some(&b"fn main() { v2(); }\n"[..]),
            "{args:?}: same-size rewrite behind the mount"
        );
        assert_eq!(
            read(&m.path("new.txt")).as_deref(),
            Some(&b"new"[..]),
            "{args:?}"
        );
        assert!(!m.path("gone.txt").exists(), "{args:?}");
    }
}

#[test]
fn rewrite_with_truncate_longer() {
    for args in MODES {
        let m = mirror(args, |src| fs::write(src.join("f"), b"short").unwrap());
        prime(&m, "f");
        let long = b"a much longer replacement written with O_TRUNC".repeat(100);
        fs::write(m.backing("f"), &long).unwrap();
        visible(&m, "O_TRUNC rewrite: content", || {
            read(&m.path("f")).as_deref() == Some(&long[..])
        });
        visible(&m, "O_TRUNC rewrite: size", || {
            fs::metadata(m.path("f")).map(|s| s.len()).ok() == Some(long.len() as u64)
        });
    }
}

#[test]
fn append_shows() {
    for args in MODES {
        let m = mirror(args, |src| fs::write(src.join("log"), b"line 1\n").unwrap());
        prime(&m, "log");
        fs::OpenOptions::new()
            .append(true)
            .open(m.backing("log"))
            .unwrap()
            .write_all(b"line 2\n")
            .unwrap();
        visible(&m, "append: content", || {
            read(&m.path("log")).as_deref() == Some(b"line 1\nline 2\n")
        });
        visible(&m, "append: size", || {
            fs::metadata(m.path("log")).map(|s| s.len()).ok() == Some(14)
        });
    }
}

#[test]
fn truncate_shows() {
    for args in MODES {
        let m = mirror(args, |src| {
            fs::write(src.join("f"), b"0123456789abcdef").unwrap()
        });
        prime(&m, "f");
        fs::OpenOptions::new()
            .write(true)
            .open(m.backing("f"))
            .unwrap()
            .set_len(3)
            .unwrap();
        visible(&m, "truncate: size", || {
            fs::metadata(m.path("f")).map(|s| s.len()).ok() == Some(3)
        });
        visible(&m, "truncate: content", || {
            read(&m.path("f")).as_deref() == Some(b"012")
        });
    }
}

#[test]
fn atomic_save_rename_over() {
    for args in MODES {
        let m = mirror(args, |src| {
            fs::write(src.join("doc.md"), b"# old\n").unwrap()
        });
        prime(&m, "doc.md");
        prime(&m, ".doc.md.swp");
        fs::write(m.backing(".doc.md.swp"), b"# new and longer\n").unwrap();
        fs::rename(m.backing(".doc.md.swp"), m.backing("doc.md")).unwrap();
        let ino = fs::metadata(m.backing("doc.md")).unwrap().ino();
        visible(&m, "atomic save: content", || {
            read(&m.path("doc.md")).as_deref() == Some(b"# new and longer\n")
        });
        visible(&m, "atomic save: st_ino of the new file", || {
            fs::metadata(m.path("doc.md")).map(|s| s.ino()).ok() == Some(ino)
        });
        visible(&m, "atomic save: temp name gone", || {
            names(&m.root) == ["doc.md"]
        });
    }
}

#[test]
fn delete_shows() {
    for args in MODES {
        let m = mirror(args, |src| {
            fs::write(src.join("gone"), b"x").unwrap();
            fs::write(src.join("stays"), b"y").unwrap();
        });
        prime(&m, "gone");
        fs::remove_file(m.backing("gone")).unwrap();
        visible(&m, "delete: lookup fails", || {
            fs::symlink_metadata(m.path("gone"))
                .err()
                .and_then(|e| e.raw_os_error())
                == Some(libc::ENOENT)
        });
        visible(&m, "delete: readdir", || names(&m.root) == ["stays"]);
    }
}

/// Free bytes of the file system holding `dir`, after committing what it has pending (ext4
/// returns freed blocks only once the journal commits).
fn free_bytes(dir: &Path) -> u64 {
    let f = fs::File::open(dir).expect("open the backing directory");
    use std::os::fd::AsRawFd;
    // SAFETY: a valid descriptor and a zeroed out-struct.
    unsafe {
        libc::syncfs(f.as_raw_fd());
        let mut st: libc::statvfs = std::mem::zeroed();
        assert_eq!(libc::fstatvfs(f.as_raw_fd(), &mut st), 0, "fstatvfs");
        st.f_bavail * st.f_frsize
    }
}

/// A file read through the mount and then deleted, behind the mount or through it, gives its
/// space back: the daemon keeps the passthrough registrations of files it opened (so opening
/// them again is cheap), and a registration holds its file open. SOURCE is a tmpfs of the
/// test's own: on a shared disk, another writer (a build beside the tests) moved the free space
/// the test waits for.
#[test]
fn deleted_file_space_is_freed() {
    const MB: usize = 1 << 20;
    let m = Mount::start_on_tmpfs(Mode::Mirror, &["--io", "passthrough"], |src| {
        fs::write(src.join("behind"), vec![7u8; 48 * MB]).unwrap();
        fs::write(src.join("through"), vec![8u8; 48 * MB]).unwrap();
    });
    for name in ["behind", "through"] {
        // Twice: the second open is answered from the kept registration.
        for _ in 0..2 {
            assert_eq!(read(&m.path(name)).map(|v| v.len()), Some(48 * MB));
        }
    }
    let root = m.backing("");
    for name in ["behind", "through"] {
        let before = free_bytes(&root);
        if name == "behind" {
            fs::remove_file(m.backing(name)).unwrap();
        } else {
            fs::remove_file(m.path(name)).unwrap();
        }
        visible(
            &m,
            &format!("space of a file deleted {name} the mount"),
            || free_bytes(&root) >= before + (40 * MB) as u64,
        );
    }
}

#[test]
fn mkdir_and_files_inside_new_dir() {
    for args in MODES {
        let m = mirror(args, |_| {});
        prime(&m, "newdir");
        fs::create_dir(m.backing("newdir")).unwrap();
        visible(&m, "mkdir: is a directory", || m.path("newdir").is_dir());
        // a directory created behind the mount is watched too
        prime(&m, "newdir/inner");
        fs::create_dir(m.backing("newdir/sub")).unwrap();
        fs::write(m.backing("newdir/inner"), b"inside").unwrap();
        fs::write(m.backing("newdir/sub/deeper"), b"deeper").unwrap();
        visible(&m, "file in a new directory", || {
            read(&m.path("newdir/inner")).as_deref() == Some(b"inside")
        });
        visible(&m, "file two levels into new directories", || {
            read(&m.path("newdir/sub/deeper")).as_deref() == Some(b"deeper")
        });
        // and a change to it once it has been read
        prime(&m, "newdir/sub/deeper");
        fs::write(m.backing("newdir/sub/deeper"), b"changed").unwrap();
        visible(&m, "change in a new directory", || {
            read(&m.path("newdir/sub/deeper")).as_deref() == Some(b"changed")
        });
        fs::remove_dir_all(m.backing("newdir")).unwrap();
        visible(&m, "rm -rf behind the mount", || !m.path("newdir").exists());
    }
}

#[test]
fn chmod_shows() {
    for args in MODES {
        let m = mirror(args, |src| {
            fs::write(src.join("script"), b"#!/bin/sh\n").unwrap()
        });
        prime(&m, "script");
        fs::set_permissions(m.backing("script"), fs::Permissions::from_mode(0o750)).unwrap();
        visible(&m, "chmod", || {
            fs::metadata(m.path("script"))
                .map(|s| s.mode() & 0o7777)
                .ok()
                == Some(0o750)
        });
    }
}

#[test]
fn directory_rename_shows() {
    for args in MODES {
        let m = mirror(args, |src| {
            fs::create_dir_all(src.join("a/b")).unwrap();
            fs::write(src.join("a/b/x"), b"x").unwrap();
        });
        prime(&m, "a/b/x");
        prime(&m, "c");
        fs::rename(m.backing("a"), m.backing("c")).unwrap();
        visible(&m, "directory rename: new path", || {
            read(&m.path("c/b/x")).as_deref() == Some(b"x")
        });
        visible(&m, "directory rename: old path gone", || {
            !m.path("a").exists() && !m.path("a/b/x").exists()
        });
        // and a change below the moved directory
        fs::write(m.backing("c/b/x"), b"after the move").unwrap();
        visible(&m, "change below a moved directory", || {
            read(&m.path("c/b/x")).as_deref() == Some(b"after the move")
        });
    }
}

/// git checkout: a file read and stat'd through the mount (page cache and attr cache warm) is
/// replaced behind it; the next stat and read through the mount must give the new file.
#[test]
fn git_like_replace_after_read_and_stat() {
    for args in MODES {
        let m = mirror(args, |src| {
            fs::create_dir(src.join("src")).unwrap();
            fs::write(src.join("src/lib.rs"), b"pub fn a() {}\n".repeat(50)).unwrap();
        });
        for _ in 0..3 {
            prime(&m, "src/lib.rs");
        }
        // same length, different bytes, as git writes it: new file, then rename over
        let new = b"pub fn b() {}\n".repeat(50);
        fs::write(m.backing("src/.lib.rs.lock"), &new).unwrap();
        fs::rename(m.backing("src/.lib.rs.lock"), m.backing("src/lib.rs")).unwrap();
        let src = fs::symlink_metadata(m.backing("src/lib.rs")).unwrap();
        visible(&m, "git replace: stat (ino, size, mtime)", || {
            fs::symlink_metadata(m.path("src/lib.rs"))
                .map(|s| {
                    (s.ino(), s.size(), s.mtime(), s.mtime_nsec())
                        == (src.ino(), src.size(), src.mtime(), src.mtime_nsec())
                })
                .unwrap_or(false)
        });
        visible(&m, "git replace: content", || {
            read(&m.path("src/lib.rs")).as_deref() == Some(&new[..])
        });
        // in place as well (same inode), e.g. a formatter rewriting the file
        prime(&m, "src/lib.rs");
        let newer = b"pub fn c() {}\n".repeat(50);
        fs::write(m.backing("src/lib.rs"), &newer).unwrap();
        visible(&m, "git-like in-place rewrite after read: content", || {
            read(&m.path("src/lib.rs")).as_deref() == Some(&newer[..])
        });
    }
}

/// A descriptor opened through the mount sees a rewrite of the same inode behind the mount
/// (what a native descriptor sees).
#[test]
fn open_descriptor_sees_rewrite_behind() {
    for args in MODES {
        let m = mirror(args, |src| fs::write(src.join("f"), b"AAAAAAAA").unwrap());
        let mut f = fs::File::open(m.path("f")).unwrap();
        let mut buf = Vec::new();
        f.read_to_end(&mut buf).unwrap();
        assert_eq!(buf, b"AAAAAAAA");
        fs::OpenOptions::new()
            .write(true)
            .open(m.backing("f"))
            .unwrap()
            .write_all_at(b"BBBB", 2)
            .unwrap();
        visible(&m, "open descriptor: pread after a rewrite behind", || {
            let mut b = vec![0u8; 16];
            let n = f.read_at(&mut b, 0).unwrap_or(0);
            &b[..n] == b"AABBBBAA"
        });
        // and it sees an append
        fs::OpenOptions::new()
            .append(true)
            .open(m.backing("f"))
            .unwrap()
            .write_all(b"CC")
            .unwrap();
        visible(
            &m,
            "open descriptor: read to end after an append behind",
            || {
                let mut b = Vec::new();
                f.seek(SeekFrom::Start(0)).is_ok()
                    && f.read_to_end(&mut b).is_ok()
                    && b == b"AABBBBAACC"
            },
        );
    }
}

/// Watching SOURCE with inotify reads its directories (each one when the mount starts, and each
/// directory that comes into the tree when its arrival is seen), and must leave their access
/// times as they were, as a native tree's stay: pjdfstest's `utimensat` check once saw a
/// directory's times, set through the mount, overwritten when the watch got to it late.
/// fanotify reads no directory; it is checked all the same.
#[test]
fn watching_changes_no_access_time() {
    for watcher in ["inotify", "fanotify"] {
        watching_changes_no_access_time_with(watcher);
    }
}

fn watching_changes_no_access_time_with(watcher: &str) {
    use std::ffi::OsStr;
    // 2020-01-01: more than a day old, so any read of the directory would renew it.
    const OLD: i64 = 1_577_836_800;
    let set_old_atime = |p: &Path| {
        let times = [
            libc::timespec {
                tv_sec: OLD,
                tv_nsec: 0,
            },
            libc::timespec {
                tv_sec: 0,
                tv_nsec: libc::UTIME_OMIT,
            },
        ];
        let c = common::cpath(p);
        // SAFETY: a valid path and two timespecs.
        let r = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) };
        assert_eq!(
            r,
            0,
            "utimensat {}: {}",
            p.display(),
            common::errno_name(common::errno())
        );
    };
    let atime = |p: &Path| {
        fs::metadata(p)
            .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
            .atime()
    };
    let m = mirror(&["--watcher", watcher], |src| {
        fs::create_dir_all(src.join("a/b")).unwrap_or_else(|e| panic!("{e}"));
        set_old_atime(&src.join("a"));
        set_old_atime(&src.join("a/b"));
    });
    // The watch is set before the mount appears: its walk of the tree is over.
    for dir in ["a", "a/b"] {
        assert_eq!(
            atime(&m.backing(dir)),
            OLD,
            "{dir}, read to be watched at the mount"
        );
    }
    // A tree moved in behind the mount is walked when the move is seen.
    let outside = m.scratch.join("tree");
    fs::create_dir_all(outside.join("x/y")).unwrap_or_else(|e| panic!("{e}"));
    for dir in ["", "x", "x/y"] {
        set_old_atime(&outside.join(dir));
    }
    fs::rename(&outside, m.backing("moved")).unwrap_or_else(|e| panic!("rename: {e}"));
    // Its deepest directory is watched once a file made in it is reported (a file made before
    // the watch is set goes unreported: each try makes another).
    let socket = m.socket();
    let mut tries = 0;
    let reported = || {
        tries += 1;
        fs::write(m.backing(format!("moved/x/y/f{tries}")), "f").unwrap_or_else(|e| panic!("{e}"));
        let out = common::worldfs(&[
            OsStr::new("ctl"),
            OsStr::new("--socket"),
            socket.as_os_str(),
            OsStr::new("changes.since"),
            OsStr::new(r#"{"classes": ["none"], "prefix": "moved/x/y"}"#),
        ]);
        String::from_utf8_lossy(&out.stdout).contains("\"moved/x/y/f")
    };
    visible(
        &m,
        "a file made behind the mount in a directory moved in",
        reported,
    );
    for dir in ["moved", "moved/x", "moved/x/y"] {
        assert_eq!(
            atime(&m.backing(dir)),
            OLD,
            "{dir}, read to be watched once moved in"
        );
    }
}

/// A mount made by root watches SOURCE with one fanotify mark, and so holds no inotify watch
/// however many directories SOURCE has; `--watcher inotify` still sets one on each.
#[test]
fn a_root_mount_watches_with_one_mark_not_a_watch_per_directory() {
    const DIRS: usize = 300;
    let tree = |src: &Path| {
        for i in 0..DIRS {
            fs::create_dir_all(src.join(format!("d{}/e{i}", i % 10)))
                .unwrap_or_else(|e| panic!("{e}"));
        }
    };
    for (args, watched_with, at_least, at_most) in [
        (&[][..], "watched with fanotify", 0, 0),
        (
            &["--watcher", "inotify"][..],
            "watched with inotify",
            DIRS,
            usize::MAX,
        ),
    ] {
        let m = mirror(args, tree);
        let status = m.status();
        assert!(status.contains(watched_with), "{args:?}: {status}");
        let watches = inotify_watches(m.pid());
        assert!(
            (at_least..=at_most).contains(&watches),
            "{args:?}: the daemon holds {watches} inotify watches"
        );
        // Watched all the same: a change behind the mount in the last directory shows.
        let last = format!("d{}/e{}/new.txt", (DIRS - 1) % 10, DIRS - 1);
        prime(&m, &last);
        fs::write(m.backing(&last), "made behind").unwrap_or_else(|e| panic!("{e}"));
        visible(&m, "a file made behind the mount, deep in the tree", || {
            read(&m.path(&last)).as_deref() == Some(&b"made behind"[..])
        });
    }
}

/// SOURCE on an overlay, as in a container: fanotify cannot mark it (its file handles cannot be
/// opened again), so it is watched with inotify, `worldfs status` says why, and changes behind
/// the mount show through it, to files of the lower layer and the upper alike.
#[test]
fn an_overlay_source_is_watched_with_inotify_and_says_why() {
    for mode in [Mode::Mirror, Mode::InPlace] {
        let m = Mount::start_on_overlay(mode, &[], |lower| {
            fs::write(lower.join("image.py"), "x = 1\n").unwrap_or_else(|e| panic!("{e}"));
        });
        let status = m.status();
        assert!(
            status.contains(
                "watched with inotify, a watch on each directory (fanotify could not: SOURCE's \
                 file system gives file handles fanotify cannot open again, as overlayfs does)"
            ),
            "{mode:?}: {status}"
        );
        assert!(
            status.contains("io:       kernel passthrough"),
            "{mode:?}: {status}"
        );
        fs::write(m.path("made.py"), "y = 1\n").unwrap_or_else(|e| panic!("{e}"));
        for (rel, was) in [("image.py", "x = 1\n"), ("made.py", "y = 1\n")] {
            assert_eq!(
                read(&m.path(rel)).as_deref(),
                Some(was.as_bytes()),
                "{mode:?}"
            );
        }
        if mode == Mode::InPlace {
            continue;
        }
        for rel in ["image.py", "made.py"] {
            prime(&m, rel);
            fs::write(m.backing(rel), "changed behind\n").unwrap_or_else(|e| panic!("{e}"));
            visible(
                &m,
                &format!("{mode:?}: {rel} changed on the overlay"),
                || read(&m.path(rel)).as_deref() == Some(&b"changed behind\n"[..]),
            );
        }
    }
}

/// The inotify watches a process holds, from its descriptors' fdinfo.
fn inotify_watches(pid: i32) -> usize {
    let dir = format!("/proc/{pid}/fdinfo");
    fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{dir}: {e}"))
        .filter_map(Result::ok)
        .filter_map(|e| fs::read_to_string(e.path()).ok())
        .map(|info| {
            info.lines()
                .filter(|l| l.starts_with("inotify wd:"))
                .count()
        })
        .sum()
}

/// The mount's own name changes come back from the watcher as echoes to drop. fanotify merges
/// queued events about one name (a name made and removed 200 times can come back as far fewer
/// events), so counting echoes would leave some unmatched, and a change behind the mount to the
/// same name right after would pass for one of them and never be invalidated.
#[test]
fn a_name_made_behind_right_after_the_mount_made_it_many_times_shows() {
    for args in MODES {
        let m = mirror(args, |_| {});
        for round in 0..3 {
            for _ in 0..200 {
                fs::write(m.path("x"), "").unwrap_or_else(|e| panic!("create: {e}"));
                fs::remove_file(m.path("x")).unwrap_or_else(|e| panic!("unlink: {e}"));
            }
            prime(&m, "x");
            let want = format!("made behind, round {round}");
            fs::write(m.backing("x"), &want).unwrap_or_else(|e| panic!("{e}"));
            visible(
                &m,
                "a name made behind the mount after the mount's own",
                || read(&m.path("x")).as_deref() == Some(want.as_bytes()),
            );
            fs::remove_file(m.backing("x")).unwrap_or_else(|e| panic!("{e}"));
            visible(&m, "its removal behind the mount", || !m.path("x").exists());
        }
    }
}

/// SOURCE itself renamed behind the mount (its parent directory, here): the mount keeps
/// serving it, and a change made in it under its new name still shows. fanotify names
/// directories by path when an event is read, so the new name must be learnt.
#[test]
fn source_renamed_behind_the_mount_is_still_watched() {
    for args in MODES {
        let m = mirror(args, |src| {
            fs::write(src.join("f.txt"), "before").unwrap_or_else(|e| panic!("{e}"))
        });
        prime(&m, "f.txt");
        let moved = m.base.join("src-moved");
        fs::rename(&m.source, &moved).unwrap_or_else(|e| panic!("rename SOURCE: {e}"));
        fs::write(moved.join("f.txt"), "after the move").unwrap_or_else(|e| panic!("{e}"));
        visible(&m, "a change in SOURCE under its new name", || {
            read(&m.path("f.txt")).as_deref() == Some(&b"after the move"[..])
        });
        // Put back, so the mount's teardown finds what it made.
        fs::rename(&moved, &m.source).unwrap_or_else(|e| panic!("rename back: {e}"));
    }
}

/// A file system mounted below SOURCE after the mount (a tmpfs for a build directory, a
/// volume) shows through the mount in place of the directory it covers, and a change made on
/// it behind the mount shows; once it is unmounted, the directory it covered shows again, and
/// a change there too. Before, neither watcher saw the new file system: the mount went on
/// showing the covered directory (looked up before), or served what it cached of the new one
/// stale.
#[test]
fn a_file_system_mounted_below_source_after_the_mount_shows_and_is_watched() {
    for args in MODES {
        let m = mirror(args, |src| {
            fs::create_dir(src.join("sub")).unwrap_or_else(|e| panic!("{e}"));
            fs::write(src.join("sub/f.txt"), "covered").unwrap_or_else(|e| panic!("{e}"));
        });
        prime(&m, "sub/f.txt");
        prime(&m, "sub/g.txt");
        // Declared after the mount, so dropped (unmounted) first if anything below fails.
        let tmpfs = TestFs::tmpfs(&m.backing("sub"));
        fs::write(m.backing("sub/g.txt"), "on the tmpfs").unwrap_or_else(|e| panic!("{e}"));
        visible(
            &m,
            "the mounted file system in place of the covered directory",
            || names(&m.path("sub")) == ["g.txt"],
        );
        let status = m.status();
        assert!(
            status.contains("file systems mounted below") && status.contains(": sub\n"),
            "{args:?}: `worldfs status` names the file system watched below SOURCE: {status}"
        );
        prime(&m, "sub/g.txt");
        fs::write(
            m.backing("sub/g.txt"),
            "changed behind the mount, on the tmpfs",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        visible(&m, "a change on the mounted file system", || {
            read(&m.path("sub/g.txt")).as_deref()
                == Some(&b"changed behind the mount, on the tmpfs"[..])
        });
        // Lazily: the mount holds names on it, as any process that had looked them up would.
        drop(tmpfs);
        visible(&m, "the covered directory again, once unmounted", || {
            names(&m.path("sub")) == ["f.txt"]
                && read(&m.path("sub/f.txt")).as_deref() == Some(&b"covered"[..])
        });
        let status = m.status();
        assert!(!status.contains("mounted below"), "{args:?}: {status}");
        fs::write(
            m.backing("sub/f.txt"),
            "changed behind the mount, uncovered",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        visible(&m, "a change in the directory uncovered", || {
            read(&m.path("sub/f.txt")).as_deref()
                == Some(&b"changed behind the mount, uncovered"[..])
        });
    }
}

/// A file system mounted below SOURCE before the mount: a root mount still watches SOURCE with
/// one fanotify mark (before, it fell back to inotify for the whole tree), and the file system
/// below with inotify, so a change made behind the mount on either shows.
#[test]
fn a_file_system_mounted_below_source_before_the_mount_is_watched_too() {
    for args in MODES {
        let mut tmpfs = None;
        let mut m = mirror(args, |src| {
            fs::create_dir(src.join("sub")).unwrap_or_else(|e| panic!("{e}"));
            tmpfs = Some(TestFs::tmpfs(&src.join("sub")));
            fs::write(src.join("sub/f.txt"), "one").unwrap_or_else(|e| panic!("{e}"));
            fs::write(src.join("top.txt"), "one").unwrap_or_else(|e| panic!("{e}"));
        });
        // Unmounted once the mount is gone, before its directories are removed.
        if let Some(t) = tmpfs.take() {
            m.keep_mounted(t);
        }
        let status = m.status();
        let watched_with = if args.contains(&"inotify") {
            "watched with inotify"
        } else {
            "watched with fanotify"
        };
        assert!(
            status.contains(watched_with)
                && status.contains("file systems mounted below")
                && status.contains(": sub\n"),
            "{args:?}: {status}"
        );
        for rel in ["sub/f.txt", "top.txt", "sub/new.txt"] {
            prime(&m, rel);
        }
        fs::write(m.backing("sub/f.txt"), "two, on the tmpfs").unwrap_or_else(|e| panic!("{e}"));
        fs::write(m.backing("top.txt"), "two, on SOURCE's").unwrap_or_else(|e| panic!("{e}"));
        fs::write(m.backing("sub/new.txt"), "new").unwrap_or_else(|e| panic!("{e}"));
        visible(&m, "a change on the file system below SOURCE", || {
            read(&m.path("sub/f.txt")).as_deref() == Some(&b"two, on the tmpfs"[..])
        });
        visible(&m, "a file made on the file system below SOURCE", || {
            read(&m.path("sub/new.txt")).as_deref() == Some(&b"new"[..])
        });
        visible(&m, "a change on SOURCE's file system", || {
            read(&m.path("top.txt")).as_deref() == Some(&b"two, on SOURCE's"[..])
        });
    }
}
