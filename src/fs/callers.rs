//! Who made a request, read while the caller still exists.
//!
//! The world resolves pids from `/proc` after the fact, and a `cat` has usually exited by then.
//! So for the requests that show a program reading or writing (OPEN, CREATE, READDIR,
//! daemon-mode READ and WRITE), and for removals (UNLINK, RMDIR), the FUSE thread reads
//! `/proc/PID/stat` itself (and `status`, for the program of a worker thread:
//! [`proc_stat::program_name`]), its command line, which rules of the world read (a file
//! named on it, `grep -r`), and the `stat` of its parent and theirs (whether a script ran below
//! the agent decides whose its changes are, and the shell in between is often gone first).
//! OPEN, CREATE, READDIR and the removals read them before they reply: a one-shot process may
//! be gone soon after it is answered (with kernel passthrough its reads never reach worldfs; a
//! `find` of two directories lives a millisecond), and neither a FUSE thread preempted after
//! replying nor the world would find it.
//! Daemon-mode READ and WRITE, whose process opened the file before, read it after replying,
//! so the caller does not wait. A small cache keyed by pid keeps that to one look per process
//! and [`TRUST`] window (a `grep -r` opening 10 000 files in a second costs ten). When the
//! window is over the entry is read again, which also notices a reused pid (another start
//! time) and an exec (another comm); an exec through the mount (an OPEN with `FMODE_EXEC`)
//! drops the entry at once.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::observation::CallerStamp;
use crate::proc_stat;

/// How long a stamp is reused without reading `/proc` again; the world's own cache trusts a
/// resolved process as long.
pub const TRUST: Duration = Duration::from_millis(100);
/// Processes remembered at most; a full cache drops what is past its window, then everything.
const CAPACITY: usize = 512;

struct Entry {
    read_at: Instant,
    stamp: Arc<CallerStamp>,
    /// The name `/proc/PID/stat` gave: a worker thread's own, where the stamp has its program's.
    stat_comm: Arc<str>,
    /// Whether the stamp was read as a caller's, with its command line; a parent's is only its
    /// name (`stat`, one read), which is all an ancestry needs.
    full: bool,
}

#[derive(Default)]
pub struct Callers {
    map: Mutex<HashMap<u32, Entry>>,
}

impl Callers {
    /// The caller `pid` as it is now; `None` if it is already gone (the world then falls back on
    /// what it resolved earlier, if anything).
    pub fn stamp(&self, pid: u32) -> Option<Arc<CallerStamp>> {
        self.stamp_under(Path::new("/proc"), pid, Instant::now())
    }

    fn stamp_under(&self, proc_root: &Path, pid: u32, now: Instant) -> Option<Arc<CallerStamp>> {
        self.stamp_depth(proc_root, pid, now, 0)
    }

    /// The stamp of `pid`, `depth` parents above the caller (0: the caller itself).
    fn stamp_depth(
        &self,
        proc_root: &Path,
        pid: u32,
        now: Instant,
        depth: usize,
    ) -> Option<Arc<CallerStamp>> {
        if pid == 0 {
            return None;
        }
        let full = depth == 0;
        let previous = {
            let map = self.map.lock();
            match map.get(&pid) {
                Some(e) if now.duration_since(e.read_at) < TRUST && (e.full || !full) => {
                    return Some(e.stamp.clone());
                }
                Some(e) => Some((e.stamp.clone(), e.stat_comm.clone(), e.full)),
                None => None,
            }
        };
        // Read without holding the lock: other FUSE threads go on meanwhile.
        let st = proc_stat::read(proc_root, pid)?;
        let stat_comm: Arc<str> = Arc::from(st.comm.as_str());
        let same = |p: &CallerStamp, c: &Arc<str>| p.start_time == st.start_time && *c == stat_comm;
        let (stamp, full) = match previous {
            // The same process, same program (its own name unchanged, so no exec): keep sharing
            // the allocation, without looking up its thread group again.
            Some((p, c, was_full)) if same(&p, &c) && (was_full || !full) => (p, was_full),
            // Known as a parent, now a caller itself: its command line and program added, its
            // ancestry kept.
            Some((p, c, _)) if same(&p, &c) => {
                (Self::as_caller(proc_root, pid, &st, p.parent.clone()), true)
            }
            _ => {
                // The parent is stamped too, up the chain: most callers share their shell and
                // agent, whose stamps come from the cache. One that started after this process
                // is a later process that reused the parent's pid.
                let parent = (st.ppid > 1 && depth < proc_stat::MAX_ANCESTRY)
                    .then(|| self.stamp_depth(proc_root, st.ppid, now, depth + 1))
                    .flatten()
                    .filter(|p| p.start_time <= st.start_time);
                let stamp = if full {
                    Self::as_caller(proc_root, pid, &st, parent)
                } else {
                    // A parent is a process (a thread group), so `stat` names its program.
                    Arc::new(CallerStamp {
                        comm: Arc::clone(&stat_comm),
                        ppid: st.ppid,
                        start_time: st.start_time,
                        args: Arc::from(Vec::new()),
                        parent,
                    })
                };
                (stamp, full)
            }
        };
        let mut map = self.map.lock();
        if map.len() >= CAPACITY && !map.contains_key(&pid) {
            map.retain(|_, e| now.duration_since(e.read_at) < TRUST);
            if map.len() >= CAPACITY {
                map.clear();
            }
        }
        map.insert(
            pid,
            Entry {
                read_at: now,
                stamp: stamp.clone(),
                stat_comm,
                full,
            },
        );
        Some(stamp)
    }

    /// A caller's stamp: its program (its thread group's, for a worker thread) and command line.
    fn as_caller(
        proc_root: &Path,
        pid: u32,
        st: &proc_stat::ProcStat,
        parent: Option<Arc<CallerStamp>>,
    ) -> Arc<CallerStamp> {
        Arc::new(CallerStamp {
            comm: Arc::from(proc_stat::program_name(proc_root, pid, st)),
            ppid: st.ppid,
            start_time: st.start_time,
            args: proc_stat::read_args(proc_root, pid),
            parent,
        })
    }

    /// `pid` is about to run another program: its next request reads `/proc` again.
    pub fn forget(&self, pid: u32) {
        self.map.lock().remove(&pid);
    }
}

/// Debug builds only: the FUSE thread sleeps `WORLDFS_DEBUG_LATE_EMIT_MS` milliseconds between
/// answering an open and emitting it, as a thread preempted on a loaded machine may: the caller
/// exits before anything after the reply runs.
pub fn late_emit_pause() {
    static PAUSE: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    crate::debug_pause::pause(&PAUSE, "WORLDFS_DEBUG_LATE_EMIT_MS");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn fake(dir: &Path, pid: u32, comm: &str, ppid: u32, start: u64) {
        let d = dir.join(pid.to_string());
        fs::create_dir_all(&d).unwrap_or_else(|e| panic!("{e}"));
        let stat = format!(
            "{pid} ({comm}) S {ppid} {pid} {pid} 0 0 0 0 0 0 0 0 0 0 0 20 0 1 0 {start} 0 0"
        );
        fs::write(d.join("stat"), stat).unwrap_or_else(|e| panic!("{e}"));
    }

    #[test]
    fn one_read_per_window_then_reused_pids_and_execs_are_noticed() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let c = Callers::default();
        let t0 = Instant::now();
        fake(dir.path(), 40, "cat", 30, 7);
        let a = c
            .stamp_under(dir.path(), 40, t0)
            .unwrap_or_else(|| panic!("not read"));
        assert_eq!((&*a.comm, a.ppid, a.start_time), ("cat", 30, 7));
        // Within the window the cache answers: even a vanished /proc entry is not read.
        fs::remove_dir_all(dir.path().join("40")).unwrap_or_else(|e| panic!("{e}"));
        let b = c.stamp_under(dir.path(), 40, t0 + TRUST / 2);
        assert!(b.is_some_and(|b| Arc::ptr_eq(&a, &b)));
        // After it, a reused pid shows its own program.
        fake(dir.path(), 40, "rg", 31, 9);
        let r = c.stamp_under(dir.path(), 40, t0 + TRUST * 2);
        assert_eq!(
            r.map(|r| (r.comm.to_string(), r.ppid, r.start_time)),
            Some(("rg".into(), 31, 9))
        );
        // An exec through the mount drops the entry at once.
        fake(dir.path(), 40, "python3", 31, 9);
        c.forget(40);
        let p = c.stamp_under(dir.path(), 40, t0 + TRUST * 2);
        assert_eq!(p.map(|p| p.comm.to_string()), Some("python3".into()));
        // Gone and past the window: unknown.
        fs::remove_dir_all(dir.path().join("40")).unwrap_or_else(|e| panic!("{e}"));
        assert!(c.stamp_under(dir.path(), 40, t0 + TRUST * 4).is_none());
        assert!(c.stamp_under(dir.path(), 0, t0).is_none());
    }

    #[test]
    fn the_command_line_is_stamped_with_the_program() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let c = Callers::default();
        fake(dir.path(), 50, "python3", 10, 3);
        let long = "x".repeat(proc_stat::MAX_ARG_LEN + 40);
        fs::write(
            dir.path().join("50/cmdline"),
            format!("python3\0fix.py\0{long}\0"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let s = c
            .stamp_under(dir.path(), 50, Instant::now())
            .unwrap_or_else(|| panic!("not read"));
        let args: Vec<&str> = s.args.iter().map(|a| &**a).collect();
        assert_eq!(
            args,
            ["python3", "fix.py", &long[..proc_stat::MAX_ARG_LEN]],
            "the program's words, each capped"
        );
        // No command line to read (a kernel thread, or gone between the reads): none, and the
        // program is still named.
        fake(dir.path(), 51, "kworker", 2, 4);
        let k = c
            .stamp_under(dir.path(), 51, Instant::now())
            .unwrap_or_else(|| panic!("not read"));
        assert_eq!((&*k.comm, k.args.len()), ("kworker", 0));
    }

    #[test]
    fn the_parents_are_stamped_up_the_chain() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let c = Callers::default();
        let t0 = Instant::now();
        fake(dir.path(), 10, "claude", 1, 2);
        fake(dir.path(), 30, "bash", 10, 5);
        fake(dir.path(), 40, "python3", 30, 6);
        let s = c
            .stamp_under(dir.path(), 40, t0)
            .unwrap_or_else(|| panic!("not read"));
        let chain: Vec<(u32, &str)> = s.ancestors().map(|(pid, a)| (pid, &*a.comm)).collect();
        assert_eq!(chain, [(30, "bash"), (10, "claude")], "up to init's child");
        // A parent is read for its name only; once a caller itself, its command line is read
        // too, and its ancestry kept.
        assert!(s.parent.as_ref().is_some_and(|p| p.args.is_empty()));
        fs::write(dir.path().join("30/cmdline"), "bash\0-c\0python3 fix.py\0")
            .unwrap_or_else(|e| panic!("{e}"));
        let b = c
            .stamp_under(dir.path(), 30, t0)
            .unwrap_or_else(|| panic!("not read"));
        assert_eq!(b.args.len(), 3);
        assert!(
            b.parent
                .as_ref()
                .zip(s.parent.as_ref().and_then(|p| p.parent.as_ref()))
                .is_some_and(|(a, b)| Arc::ptr_eq(a, b))
        );
        // A sibling shares its parent's stamp, as it is now.
        fake(dir.path(), 41, "rm", 30, 7);
        let r = c
            .stamp_under(dir.path(), 41, t0)
            .unwrap_or_else(|| panic!("not read"));
        assert!(r.parent.as_ref().is_some_and(|p| Arc::ptr_eq(p, &b)));
        // A "parent" that started after its child is a later process on a reused pid: the chain
        // stops below it.
        fake(dir.path(), 50, "sh", 1, 9);
        fake(dir.path(), 60, "cat", 50, 8);
        let o = c
            .stamp_under(dir.path(), 60, t0)
            .unwrap_or_else(|| panic!("not read"));
        assert!(o.parent.is_none());
    }

    #[test]
    fn a_worker_thread_is_stamped_with_its_programs_name() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let c = Callers::default();
        fake(dir.path(), 80, "claude", 10, 2);
        fake(dir.path(), 83, "Bun Pool 0", 10, 7);
        fs::write(
            dir.path().join("83/status"),
            "Name:\tBun Pool 0\nTgid:\t80\nPid:\t83\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let s = c
            .stamp_under(dir.path(), 83, Instant::now())
            .unwrap_or_else(|| panic!("not read"));
        // The thread's own start time: the world tells callers apart by it.
        assert_eq!((&*s.comm, s.ppid, s.start_time), ("claude", 10, 7));
        // Past the window, the same thread under its own name is the same caller: its thread
        // group is not looked up again.
        fs::remove_file(dir.path().join("83/status")).unwrap_or_else(|e| panic!("{e}"));
        let again = c.stamp_under(dir.path(), 83, Instant::now() + TRUST * 2);
        assert!(again.is_some_and(|a| Arc::ptr_eq(&a, &s)));
    }

    #[test]
    fn stays_bounded() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let c = Callers::default();
        let t0 = Instant::now();
        for pid in 1..=(CAPACITY as u32 + 10) {
            fake(dir.path(), pid, "sh", 1, u64::from(pid));
            assert!(c.stamp_under(dir.path(), pid, t0).is_some());
        }
        assert!(c.map.lock().len() <= CAPACITY);
    }
}
