//! A tree with more directories than inotify may watch (`fs.inotify.max_user_watches`) is
//! watched whole by a root mount, which marks SOURCE's file system with fanotify instead.
//!
//! The limit is the machine's, per user: this test lowers it for its own run (its own test
//! binary, so no other mount of the suite runs meanwhile) and puts it back when done, also
//! when it fails.

mod common;

use common::{Mode, Mount, wait_until};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: &str = "/proc/sys/fs/inotify/max_user_watches";
const DIRS: usize = 1000;

/// Puts the machine's inotify limit back when dropped.
struct Limit {
    was: String,
}

impl Limit {
    fn lower_to(n: usize) -> Limit {
        let was = fs::read_to_string(LIMIT).unwrap_or_else(|e| panic!("{LIMIT}: {e}"));
        fs::write(LIMIT, n.to_string()).unwrap_or_else(|e| panic!("lowering {LIMIT}: {e}"));
        Limit { was }
    }
}

impl Drop for Limit {
    fn drop(&mut self) {
        if let Err(e) = fs::write(LIMIT, self.was.trim()) {
            eprintln!("could not restore {LIMIT} to {}: {e}", self.was.trim());
        }
    }
}

/// The inotify watches root's processes hold: the limit is per user, so a limit this far above
/// them leaves far fewer than [`DIRS`] for the mount.
fn watches_in_use() -> usize {
    let mut n = 0;
    for proc in fs::read_dir("/proc").into_iter().flatten().flatten() {
        let root = fs::read_to_string(proc.path().join("status")).is_ok_and(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().next())
                == Some("0")
        });
        if !root {
            continue;
        }
        let Ok(fds) = fs::read_dir(proc.path().join("fdinfo")) else {
            continue;
        };
        for fd in fds.flatten() {
            if let Ok(info) = fs::read_to_string(fd.path()) {
                n += info
                    .lines()
                    .filter(|l| l.starts_with("inotify wd:"))
                    .count();
            }
        }
    }
    n
}

fn tree(src: &Path) {
    for i in 0..DIRS {
        fs::create_dir_all(src.join(format!("d{}/e{i}", i % 10))).unwrap_or_else(|e| panic!("{e}"));
    }
}

fn deepest() -> PathBuf {
    PathBuf::from(format!("d{}/e{}/new.txt", (DIRS - 1) % 10, DIRS - 1))
}

#[test]
fn a_tree_past_inotifys_watch_limit_is_watched_whole() {
    common::require_fuse();
    let _limit = Limit::lower_to(watches_in_use() + 100);

    // The premise: inotify cannot watch this tree now.
    let m = Mount::start(Mode::Mirror, &["--watcher", "inotify"], tree);
    let status = m.status();
    assert!(
        !status.contains("watched with inotify"),
        "inotify watched all {DIRS} directories under the lowered limit:\n{status}"
    );
    assert!(
        m.log().contains("inotify's watch limit is reached"),
        "{}",
        m.log()
    );
    drop(m);

    // A root mount as it starts by default.
    let m = Mount::start(Mode::Mirror, &[], tree);
    let status = m.status();
    assert!(status.contains("watched with fanotify"), "{status}");
    assert!(!status.contains("no longer all watched"), "{status}");
    let new = deepest();
    // Cached by the kernel as missing, then made behind the mount.
    assert!(fs::metadata(m.path(&new)).is_err());
    fs::write(m.backing(&new), "made behind").unwrap_or_else(|e| panic!("{e}"));
    let seen = wait_until(Duration::from_secs(5), || {
        fs::read(m.path(&new)).ok().as_deref() == Some(&b"made behind"[..])
    });
    assert!(
        seen.is_some(),
        "a file made behind the mount in its {DIRS}th directory never showed:\n{}",
        m.log()
    );
    // And the world was told (made, then written).
    let status = m.status();
    assert!(
        status.contains("behind:   changes made behind the mount ")
            && !status.contains("behind:   changes made behind the mount 0;"),
        "{status}"
    );
}
