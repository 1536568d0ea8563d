//! Who a pid is: program name (`comm`), command line and ancestry up to init.
//! FUSE gives the calling thread's id: a worker thread is its thread group's program.
//!
//! Lookups happen on the ingest thread for every observation, so they must usually cost no
//! syscall: a resolved process is trusted for [`ProcFs::VERIFY_AFTER`], then re-verified with one
//! read of `/proc/PID/stat`. Identity is (pid, start time), so a reused pid is noticed; an `exec`
//! keeps both but changes `comm`, which the verification also notices.
//!
//! Processes often exit before their observations are ingested (`cat` lives for a millisecond).
//! Once resolved, a process is remembered after it exits, so its late observations are still
//! attributed; a process never seen alive degrades to `None`.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::observation::CallerStamp;
use crate::proc_stat::{self, ProcStat};

/// One ancestor in a process's chain.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ancestor {
    pub pid: u32,
    pub comm: Arc<str>,
}

/// What attribution needs to know about a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcInfo {
    pub pid: u32,
    /// Clock ticks since boot at which the process started (field 22 of `/proc/PID/stat`).
    pub start_time: u64,
    pub ppid: u32,
    pub comm: Arc<str>,
    /// The command line, capped in count and length (see [`proc_stat::MAX_ARGS`]).
    pub args: Arc<[Box<str>]>,
    /// Parent first, up to init's child (or [`ProcFs::MAX_DEPTH`] of them). Not only up to the
    /// session leader: Claude Code runs each command in a shell that leads a session of its own.
    pub ancestry: Arc<[Ancestor]>,
}

impl ProcInfo {
    /// A process record for tests and replays, where `/proc` is not the source of truth.
    pub fn synthetic(pid: u32, comm: &str, args: &[&str], ancestry: &[(u32, &str)]) -> Self {
        Self {
            pid,
            start_time: 0,
            ppid: ancestry.first().map_or(0, |a| a.0),
            comm: Arc::from(comm),
            args: args.iter().map(|a| Box::<str>::from(*a)).collect(),
            ancestry: ancestry
                .iter()
                .map(|(pid, comm)| Ancestor {
                    pid: *pid,
                    comm: Arc::from(*comm),
                })
                .collect(),
        }
    }
}

impl ProcInfo {
    /// A process that was gone from `/proc` before the world looked, from what the FUSE thread
    /// read while serving it. Its ancestry is the one stamped with it (the shell between it and
    /// the agent is often gone as well), else continues from `parent` when that is known.
    pub fn from_stamp(pid: u32, stamp: &CallerStamp, parent: Option<&ProcInfo>) -> Self {
        let mut ancestry = Vec::new();
        if stamp.parent.is_some() {
            ancestry.extend(stamp.ancestors().map(|(pid, a)| Ancestor {
                pid,
                comm: Arc::clone(&a.comm),
            }));
        } else if let Some(parent) = parent {
            ancestry.push(Ancestor {
                pid: parent.pid,
                comm: Arc::clone(&parent.comm),
            });
            ancestry.extend(parent.ancestry.iter().cloned());
        }
        Self {
            pid,
            start_time: stamp.start_time,
            ppid: stamp.ppid,
            comm: Arc::clone(&stamp.comm),
            args: Arc::clone(&stamp.args),
            ancestry: Arc::from(ancestry),
        }
    }
}

/// Resolves pids. The real one reads `/proc`; tests and replays supply a table.
pub trait ProcessSource: Send + Sync {
    fn lookup(&self, pid: u32) -> Option<Arc<ProcInfo>>;
}

/// A fixed pid table, for tests and replays.
#[derive(Debug, Default)]
pub struct StaticProcesses {
    table: HashMap<u32, Arc<ProcInfo>>,
}

impl StaticProcesses {
    pub fn new(procs: impl IntoIterator<Item = ProcInfo>) -> Self {
        Self {
            table: procs.into_iter().map(|p| (p.pid, Arc::new(p))).collect(),
        }
    }
}

impl ProcessSource for StaticProcesses {
    fn lookup(&self, pid: u32) -> Option<Arc<ProcInfo>> {
        self.table.get(&pid).cloned()
    }
}

struct Cached {
    info: Arc<ProcInfo>,
    /// The name `/proc/PID/stat` gave when it was resolved: a thread's own, where `info` has
    /// its program's.
    stat_comm: Arc<str>,
    verified: Instant,
    /// Whether the process was still alive at the last verification; exited processes are kept
    /// (their late observations still need a name) but go first when the cache is full.
    alive: bool,
}

/// Resolves pids through `/proc`, with a small cache keyed by pid and checked against start time.
pub struct ProcFs {
    root: PathBuf,
    cache: Mutex<HashMap<u32, Cached>>,
}

impl ProcFs {
    /// How long a resolved process is trusted without looking at `/proc` again.
    pub const VERIFY_AFTER: Duration = Duration::from_millis(100);
    /// Processes remembered at most; beyond it exited ones are forgotten first.
    pub const CAPACITY: usize = 1024;
    /// Longest ancestry walked.
    pub const MAX_DEPTH: usize = proc_stat::MAX_ANCESTRY;

    pub fn new() -> Self {
        Self::with_root("/proc")
    }

    /// Reads process information under `root` instead of `/proc` (tests use a fake tree).
    pub fn with_root(root: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            cache: Mutex::new(HashMap::new()),
        }
    }

    fn read_stat(&self, pid: u32) -> Option<ProcStat> {
        proc_stat::read(&self.root, pid)
    }

    fn read_comm(&self, pid: u32) -> Option<String> {
        let s = std::fs::read_to_string(self.root.join(pid.to_string()).join("comm")).ok()?;
        Some(s.trim_end_matches('\n').to_owned())
    }

    /// Resolves `pid` from scratch (no cache), including its ancestry through the cache. Also
    /// returns the name `/proc/PID/stat` gave, which verifies it later.
    fn resolve(&self, pid: u32, depth: usize) -> Option<(Arc<ProcInfo>, Arc<str>)> {
        let stat = self.read_stat(pid)?;
        // FUSE names the calling thread, not its process. A worker thread has a name of its own
        // (Claude Code's file tools run on Bun's pool: "Bun Pool 0"), so the program, command
        // line and ancestry are its thread group's; the start time stays the thread's, which is
        // what the FUSE thread's stamp of the same caller holds.
        if let Some(tgid) = proc_stat::read_tgid(&self.root, pid).filter(|t| *t != pid && *t != 0) {
            let group = self.lookup_depth(tgid, depth)?;
            let again = self.read_stat(pid)?;
            if again.start_time != stat.start_time {
                return None;
            }
            let info = ProcInfo {
                pid,
                start_time: stat.start_time,
                ..(*group).clone()
            };
            return Some((Arc::new(info), Arc::from(stat.comm)));
        }
        let comm = self.read_comm(pid).unwrap_or_else(|| stat.comm.clone());
        let args = proc_stat::read_args(&self.root, pid);
        // The pid may have been reused between the reads; if so, the process we want is gone.
        let again = self.read_stat(pid)?;
        if again.start_time != stat.start_time {
            return None;
        }
        let mut ancestry = Vec::new();
        // Past session leaders too: Claude Code starts each command's shell in a session of its
        // own, so the agent is above the leader.
        let at_top = stat.ppid <= 1 || depth >= Self::MAX_DEPTH;
        if !at_top && let Some(parent) = self.lookup_depth(stat.ppid, depth + 1) {
            ancestry.push(Ancestor {
                pid: parent.pid,
                comm: Arc::clone(&parent.comm),
            });
            ancestry.extend(parent.ancestry.iter().cloned());
        }
        Some((
            Arc::new(ProcInfo {
                pid,
                start_time: stat.start_time,
                ppid: stat.ppid,
                comm: Arc::from(comm),
                args,
                ancestry: Arc::from(ancestry),
            }),
            Arc::from(stat.comm),
        ))
    }

    fn lookup_depth(&self, pid: u32, depth: usize) -> Option<Arc<ProcInfo>> {
        if pid == 0 {
            return None;
        }
        let now = Instant::now();
        let cached = {
            let cache = self.cache.lock();
            cache.get(&pid).map(|c| {
                (
                    Arc::clone(&c.info),
                    Arc::clone(&c.stat_comm),
                    c.verified,
                    c.alive,
                )
            })
        };
        if let Some((info, stat_comm, verified, alive)) = cached {
            if !alive || now.duration_since(verified) < Self::VERIFY_AFTER {
                return Some(info);
            }
            match self.read_stat(pid) {
                None => {
                    // Exited: its pending observations still belong to it.
                    self.remember(pid, Arc::clone(&info), stat_comm, now, false);
                    return Some(info);
                }
                Some(st) if st.start_time == info.start_time && *st.comm == *stat_comm => {
                    self.remember(pid, Arc::clone(&info), stat_comm, now, true);
                    return Some(info);
                }
                Some(_) => {} // reused pid or exec: resolve again
            }
        }
        let (info, stat_comm) = self.resolve(pid, depth)?;
        self.remember(pid, Arc::clone(&info), stat_comm, now, true);
        Some(info)
    }

    fn remember(
        &self,
        pid: u32,
        info: Arc<ProcInfo>,
        stat_comm: Arc<str>,
        verified: Instant,
        alive: bool,
    ) {
        let mut cache = self.cache.lock();
        if cache.len() >= Self::CAPACITY && !cache.contains_key(&pid) {
            cache.retain(|_, c| c.alive);
            if cache.len() >= Self::CAPACITY {
                cache.clear();
            }
        }
        cache.insert(
            pid,
            Cached {
                info,
                stat_comm,
                verified,
                alive,
            },
        );
    }
}

impl Default for ProcFs {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcessSource for ProcFs {
    fn lookup(&self, pid: u32) -> Option<Arc<ProcInfo>> {
        self.lookup_depth(pid, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn fake_proc(
        dir: &std::path::Path,
        pid: u32,
        comm: &str,
        ppid: u32,
        sid: u32,
        start: u64,
        args: &[&str],
    ) {
        let d = dir.join(pid.to_string());
        fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
        let stat = format!(
            "{pid} ({comm}) S {ppid} {pid} {sid} 0 0 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0"
        );
        fs::write(d.join("stat"), stat).unwrap_or_else(|e| panic!("{e}"));
        fs::write(d.join("comm"), format!("{comm}\n")).unwrap_or_else(|e| panic!("{e}"));
        fs::write(d.join("cmdline"), args.join("\0") + "\0").unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn resolves_ancestry_past_session_leaders() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        fake_proc(dir.path(), 10, "bash", 5, 10, 1, &["-bash"]);
        fake_proc(dir.path(), 20, "claude", 10, 10, 2, &["claude"]);
        // Claude Code's shell for a command leads a session of its own.
        fake_proc(dir.path(), 30, "bash", 20, 30, 3, &["bash", "-c", "cat x"]);
        fake_proc(dir.path(), 40, "cat", 30, 30, 4, &["cat", "src/main.rs"]);
        let p = ProcFs::with_root(dir.path());
        let info = p.lookup(40).unwrap_or_else(|| panic!("not resolved"));
        assert_eq!(&*info.comm, "cat");
        assert_eq!(&*info.args, &[Box::from("cat"), Box::from("src/main.rs")]);
        let chain: Vec<(u32, &str)> = info.ancestry.iter().map(|a| (a.pid, &*a.comm)).collect();
        assert_eq!(chain, vec![(30, "bash"), (20, "claude"), (10, "bash")]);
    }

    #[test]
    fn exited_process_is_none_unless_seen_alive() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = ProcFs::with_root(dir.path());
        assert!(p.lookup(999).is_none());
        fake_proc(dir.path(), 50, "cat", 1, 50, 9, &["cat"]);
        assert!(p.lookup(50).is_some());
        fs::remove_dir_all(dir.path().join("50")).unwrap_or_else(|e| panic!("{e}"));
        std::thread::sleep(ProcFs::VERIFY_AFTER * 2);
        assert_eq!(p.lookup(50).map(|i| i.comm.to_string()), Some("cat".into()));
    }

    #[test]
    fn reused_pid_is_resolved_again() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = ProcFs::with_root(dir.path());
        fake_proc(dir.path(), 60, "cat", 1, 60, 100, &["cat"]);
        assert_eq!(p.lookup(60).map(|i| i.comm.to_string()), Some("cat".into()));
        fake_proc(dir.path(), 60, "rg", 1, 60, 200, &["rg", "foo"]);
        std::thread::sleep(ProcFs::VERIFY_AFTER * 2);
        let info = p.lookup(60);
        assert_eq!(info.as_ref().map(|i| i.comm.to_string()), Some("rg".into()));
        assert_eq!(info.map(|i| i.start_time), Some(200));
    }

    #[test]
    fn exec_changes_comm_and_is_noticed() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let p = ProcFs::with_root(dir.path());
        fake_proc(dir.path(), 70, "bash", 1, 70, 5, &["bash"]);
        assert!(p.lookup(70).is_some());
        fake_proc(dir.path(), 70, "rg", 1, 70, 5, &["rg", "x"]);
        std::thread::sleep(ProcFs::VERIFY_AFTER * 2);
        assert_eq!(p.lookup(70).map(|i| i.comm.to_string()), Some("rg".into()));
    }

    #[test]
    fn a_thread_is_its_program() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        fake_proc(dir.path(), 10, "bash", 5, 10, 1, &["-bash"]);
        fake_proc(dir.path(), 80, "claude", 10, 10, 2, &["claude", "-p"]);
        // A worker thread of 80, named by its pool, started later than its process.
        fake_proc(dir.path(), 83, "Bun Pool 0", 10, 10, 7, &["claude", "-p"]);
        let status = |pid: u32, tgid: u32| {
            fs::write(
                dir.path().join(pid.to_string()).join("status"),
                format!(
                    "Name:\tx\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t{tgid}\nPid:\t{pid}\n"
                ),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        };
        status(80, 80);
        status(83, 80);
        let p = ProcFs::with_root(dir.path());
        let info = p.lookup(83).unwrap_or_else(|| panic!("not resolved"));
        assert_eq!((info.pid, &*info.comm, info.start_time), (83, "claude", 7));
        assert_eq!(&*info.args, &[Box::from("claude"), Box::from("-p")]);
        let chain: Vec<(u32, &str)> = info.ancestry.iter().map(|a| (a.pid, &*a.comm)).collect();
        assert_eq!(chain, vec![(10, "bash")]);
        // Verified by the thread's own name, so it is not resolved again and again.
        std::thread::sleep(ProcFs::VERIFY_AFTER * 2);
        let again = p.lookup(83).unwrap_or_else(|| panic!("not resolved"));
        assert!(Arc::ptr_eq(&info, &again));
        // The process itself is untouched by its thread.
        assert_eq!(p.lookup(80).map(|i| (i.pid, i.start_time)), Some((80, 2)));
    }

    #[test]
    fn real_thread_resolves_to_this_process() {
        let p = ProcFs::new();
        let me = p
            .lookup(std::process::id())
            .unwrap_or_else(|| panic!("this process not resolved"));
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
        let t = std::thread::Builder::new()
            .name("pool worker".into())
            // SAFETY: gettid has no preconditions.
            .spawn(move || {
                let _ = tx.send(u32::try_from(unsafe { libc::gettid() }).unwrap_or(0));
                let _ = done_rx.recv();
            })
            .unwrap_or_else(|e| panic!("{e}"));
        let tid = rx.recv().unwrap_or_else(|e| panic!("{e}"));
        let info = p.lookup(tid);
        let _ = done_tx.send(());
        let _ = t.join();
        let info = info.unwrap_or_else(|| panic!("thread {tid} not resolved"));
        assert_eq!(info.pid, tid);
        assert_eq!(
            &*info.comm, &*me.comm,
            "the program's name, not the thread's"
        );
    }

    #[test]
    fn real_proc_resolves_self() {
        let p = ProcFs::new();
        let me = p.lookup(std::process::id());
        assert!(me.is_some_and(|i| !i.comm.is_empty()));
    }
}
