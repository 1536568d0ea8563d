//! Which processes keep a mount busy: those whose working directory or root is in it, or that
//! hold a file in it open. An unmount that has to detach names them, so that a user knows what
//! to stop (a shell left in the project, an editor, the app-server daemon Codex's interactive
//! UI leaves behind in the directory it was started from).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// At most this many are named; the rest are counted.
const NAMED: usize = 5;

/// A process that keeps the mount busy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub program: String,
    /// How: `working directory`, `root`, or `open file`.
    pub how: &'static str,
}

/// The processes but this one that use the mount at `mount_point`, whose device is `dev`. A
/// path under the mount point is not enough: a process of an in-place mount's daemon (or one
/// that entered the directory before it was mounted over) uses the directory underneath, under
/// the same path; the device tells them apart. Best effort: processes that end meanwhile, or
/// whose `/proc` entries this user may not read, are skipped.
pub fn of(mount_point: &Path, dev: u64) -> Vec<Holder> {
    let me = std::process::id();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found: Vec<Holder> = procs
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != me)
        .filter_map(|pid| holds(pid, mount_point, dev).map(|how| (pid, how)))
        .map(|(pid, how)| Holder {
            pid,
            program: program(pid),
            how,
        })
        .collect();
    found.sort_by_key(|h| h.pid);
    found
}

/// How process `pid` uses the mount, if it does.
fn holds(pid: u32, mount_point: &Path, dev: u64) -> Option<&'static str> {
    let base = PathBuf::from(format!("/proc/{pid}"));
    let inside = |link: &Path| {
        std::fs::read_link(link).is_ok_and(|to| to.starts_with(mount_point))
            && std::fs::metadata(link).is_ok_and(|m| m.dev() == dev)
    };
    if inside(&base.join("cwd")) {
        return Some("working directory");
    }
    if inside(&base.join("root")) {
        return Some("root");
    }
    let fds = std::fs::read_dir(base.join("fd")).ok()?;
    fds.filter_map(Result::ok)
        .any(|fd| inside(&fd.path()))
        .then_some("open file")
}

fn program(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim_end().to_owned())
        .unwrap_or_else(|_| "?".to_owned())
}

/// `holders` as a user reads them: `codex (pid 13601, working directory), ...`.
pub fn describe(holders: &[Holder]) -> String {
    let mut named: Vec<String> = holders
        .iter()
        .take(NAMED)
        .map(|h| format!("{} (pid {}, {})", h.program, h.pid, h.how))
        .collect();
    if holders.len() > NAMED {
        named.push(format!("{} more", holders.len() - NAMED));
    }
    named.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_in_the_directory_is_named_and_the_device_must_match() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .current_dir(dir.path())
            .spawn()
            .expect("sleep");
        let dev = std::fs::metadata(dir.path()).expect("stat").dev();
        let found = of(dir.path(), dev);
        let pid = child.id();
        let _ = child.kill();
        let _ = child.wait();
        assert!(
            found.contains(&Holder {
                pid,
                program: "sleep".into(),
                how: "working directory"
            }),
            "{found:?}"
        );
        // The same path on another device: a directory a mount covers, not the mount.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .current_dir(dir.path())
            .spawn()
            .expect("sleep");
        let found = of(dir.path(), dev.wrapping_add(1));
        let _ = child.kill();
        let _ = child.wait();
        assert!(found.iter().all(|h| h.pid != child.id()), "{found:?}");
    }

    #[test]
    fn a_long_list_is_cut() {
        let h = |pid| Holder {
            pid,
            program: "bash".into(),
            how: "open file",
        };
        let many: Vec<Holder> = (1..=7).map(h).collect();
        assert_eq!(
            describe(&many[..1]),
            "bash (pid 1, open file)",
            "one is named as it is"
        );
        assert!(describe(&many).ends_with("bash (pid 5, open file), 2 more"));
    }
}
