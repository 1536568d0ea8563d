//! `/proc/PID/stat` and `cmdline`, read and parsed: the FUSE threads stamp callers with them
//! while they still exist, and the world resolves processes with them after the fact. Also the
//! thread group from `/proc/PID/status`: FUSE names the calling thread, whose program is its
//! group's.

use std::path::Path;
use std::sync::Arc;

/// The fields of `/proc/PID/stat` worldfs uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    pub comm: String,
    pub ppid: u32,
    pub session: u32,
    /// Clock ticks since boot at which the process started (field 22): with the pid, it tells
    /// a process from a later one that reused its pid.
    pub start_time: u64,
}

/// Parses the text of `/proc/PID/stat`. `comm` is in parentheses and may itself contain spaces
/// and parentheses, so fields are counted from the last `)`.
pub fn parse(s: &str) -> Option<ProcStat> {
    let open = s.find('(')?;
    let close = s.rfind(')')?;
    let comm = s.get(open + 1..close)?.to_owned();
    let rest: Vec<&str> = s.get(close + 1..)?.split_ascii_whitespace().collect();
    // rest[0] is field 3 (state), so field N is rest[N - 3].
    Some(ProcStat {
        comm,
        ppid: rest.get(1)?.parse().ok()?,
        session: rest.get(3)?.parse().ok()?,
        start_time: rest.get(19)?.parse().ok()?,
    })
}

/// Reads and parses `ROOT/PID/stat` (`ROOT` is `/proc`, or a fake tree in tests); `None` once
/// the process is gone.
pub fn read(root: &Path, pid: u32) -> Option<ProcStat> {
    let s = std::fs::read_to_string(root.join(pid.to_string()).join("stat")).ok()?;
    parse(&s)
}

/// The thread group (process) that thread `pid` belongs to, from `ROOT/PID/status`; `None` once
/// it is gone.
pub fn read_tgid(root: &Path, pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(root.join(pid.to_string()).join("status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// Ancestors walked at most; real chains (terminal, shell, agent, shell, tool) are short.
pub const MAX_ANCESTRY: usize = 24;

/// Arguments kept of a command line at most; the rest cannot name much an agent reads.
pub const MAX_ARGS: usize = 16;
/// Bytes kept of each argument (a `python -c` program can be long).
pub const MAX_ARG_LEN: usize = 256;

/// The command line of `pid` from `ROOT/PID/cmdline`, capped at [`MAX_ARGS`] arguments of
/// [`MAX_ARG_LEN`] bytes; empty once the process is gone (or for a kernel thread).
pub fn read_args(root: &Path, pid: u32) -> Arc<[Box<str>]> {
    let Ok(raw) = std::fs::read(root.join(pid.to_string()).join("cmdline")) else {
        return Arc::from(Vec::new());
    };
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .take(MAX_ARGS)
        .map(|a| {
            let a = &a[..a.len().min(MAX_ARG_LEN)];
            Box::<str>::from(String::from_utf8_lossy(a).as_ref())
        })
        .collect()
}

/// The program a caller runs: the name of `pid`'s thread group leader when `pid` is a worker
/// thread with a name of its own (Claude Code's file tools run on threads named "Bun Pool N"),
/// else `stat`'s own.
pub fn program_name(root: &Path, pid: u32, stat: &ProcStat) -> String {
    match read_tgid(root, pid) {
        Some(group) if group != pid && group != 0 => {
            read(root, group).map_or_else(|| stat.comm.clone(), |g| g.comm)
        }
        _ => stat.comm.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_awkward_comm() {
        let line = "4242 (my (odd) prog) S 100 4242 99 34816 4242 4194304 98 0 0 0 0 0 0 0 20 0 1 0 777 1000 200";
        assert_eq!(
            parse(line),
            Some(ProcStat {
                comm: "my (odd) prog".into(),
                ppid: 100,
                session: 99,
                start_time: 777
            })
        );
        // A comm ending in ") " must not shift the fields.
        let tricky = "7 (a) S 1 2 3) R 55 7 66 0 0 0 0 0 0 0 0 0 0 0 20 0 1 0 888 0 0";
        assert_eq!(
            parse(tricky).map(|s| (s.comm, s.ppid, s.session, s.start_time)),
            Some(("a) S 1 2 3".into(), 55, 66, 888))
        );
        assert_eq!(parse("garbage"), None);
        assert_eq!(parse("1 (x) S 0"), None);
    }

    #[test]
    fn reads_own_stat() {
        let me = read(Path::new("/proc"), std::process::id());
        assert!(me.is_some_and(|s| !s.comm.is_empty() && s.start_time > 0));
    }
}
