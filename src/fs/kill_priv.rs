//! Clearing set-user-id and set-group-id bits as a native write, truncate or chown would, now that
//! the kernel leaves it to the daemon (`FUSE_HANDLE_KILLPRIV_V2`).
//!
//! Negotiating KILLPRIV_V2 spares the `GETXATTR security.capability` round trip the kernel made
//! before writes. In exchange the kernel no longer clears suid/sgid itself: it flags the request
//! instead (`FUSE_WRITE_KILL_SUIDGID` on WRITE; `FATTR_KILL_SUIDGID` and `FUSE_OPEN_KILL_SUIDGID`
//! on SETATTR and OPEN, which fuser 0.18 does not pass on, so for those the daemon asks
//! `/proc/PID/status` itself, and only when the file has a set-id bit at all).
//!
//! The daemon runs as root, and root keeps the bits on its own writes (CAP_FSETID). So an
//! operation on behalf of a caller without CAP_FSETID runs with CAP_FSETID dropped from the
//! thread's effective set and the caller's fsgid, and the backing file system then decides
//! exactly as natively: suid always goes, sgid when the file is group-executable or the caller
//! is not in its group. `security.capability` needs nothing: the backing file system removes it
//! on every write, truncate and chown, whoever makes them.

use std::io;

use super::credentials::{CapData, set_thread_caps, thread_caps};

const CAP_FSETID: u32 = 4;

/// Whether a file with this mode has set-id bits a write by an unprivileged caller could clear.
pub fn has_set_id_bits(mode: u32) -> bool {
    mode & libc::S_IFMT == libc::S_IFREG && mode & (libc::S_ISUID | libc::S_ISGID) != 0
}

/// Who an operation clears set-id bits for: the group ids `in_group_p` consults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub gid: u32,
    /// Supplementary groups; empty when the caller is gone or hidden.
    pub groups: Vec<u32>,
}

/// The caller as the kernel sees it, if it lacks CAP_FSETID (as `capable(CAP_FSETID)` would
/// answer); `None` if it holds it. One read of `/proc/PID/status`; a caller already gone is
/// judged by its uid.
pub fn caller_lacking_fsetid(pid: u32, uid: u32, gid: u32) -> Option<Caller> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let capable = parse_cap_eff(&status)
        .map(|eff| eff & (1 << CAP_FSETID) != 0)
        .unwrap_or(uid == 0);
    (!capable).then(|| Caller {
        gid,
        groups: parse_groups(&status),
    })
}

/// The caller of a write the kernel flagged (it already knows the caller lacks CAP_FSETID).
pub fn caller(pid: u32, gid: u32) -> Caller {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    Caller {
        gid,
        groups: parse_groups(&status),
    }
}

/// The `CapEff:` mask of a `/proc/PID/status` text.
fn parse_cap_eff(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|l| l.strip_prefix("CapEff:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// The `Groups:` list of a `/proc/PID/status` text.
fn parse_groups(status: &str) -> Vec<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("Groups:"))
        .map(|g| {
            g.split_whitespace()
                .filter_map(|n| n.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// What `WithoutFsetid` restores.
struct Saved {
    fsgid: u32,
    groups: Vec<libc::gid_t>,
    caps: [CapData; 2],
}

/// The calling thread acts without CAP_FSETID and with the caller's fsgid and supplementary
/// groups until dropped.
///
/// All three are per-thread (the raw syscalls, unlike glibc's `setgroups`, change only the
/// calling thread), and each request is served start to finish on one thread, so nothing else
/// the daemon does sees the change.
pub struct WithoutFsetid {
    saved: Option<Saved>,
}

fn raw_setgroups(groups: &[libc::gid_t]) -> io::Result<()> {
    let r = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn own_groups() -> io::Result<Vec<libc::gid_t>> {
    let n = unsafe { libc::getgroups(0, std::ptr::null_mut()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut groups = vec![0; n as usize];
    let n = unsafe { libc::getgroups(n, groups.as_mut_ptr()) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    groups.truncate(n as usize);
    Ok(groups)
}

impl WithoutFsetid {
    pub fn enter(caller: &Caller) -> io::Result<Self> {
        // An unprivileged daemon holds no CAP_FSETID: its own operations already clear the bits.
        if unsafe { libc::geteuid() } != 0 {
            return Ok(Self { saved: None });
        }
        let context = |what: &'static str| {
            move |e: io::Error| {
                io::Error::new(e.kind(), format!("{what} before clearing set-id bits: {e}"))
            }
        };
        let caps = thread_caps().map_err(context("capget"))?;
        let groups = own_groups().map_err(context("getgroups"))?;
        raw_setgroups(&caller.groups).map_err(context("setgroups"))?;
        let fsgid = unsafe { libc::setfsgid(caller.gid) } as u32;
        let guard = Self {
            saved: Some(Saved {
                fsgid,
                groups,
                caps,
            }),
        };
        let mut lowered = caps;
        lowered[0].effective &= !(1 << CAP_FSETID);
        set_thread_caps(&lowered).map_err(context("dropping CAP_FSETID"))?;
        Ok(guard)
    }
}

impl Drop for WithoutFsetid {
    fn drop(&mut self) {
        if let Some(saved) = self.saved.take() {
            unsafe { libc::setfsgid(saved.fsgid) };
            let restored = raw_setgroups(&saved.groups).and_then(|()| set_thread_caps(&saved.caps));
            if let Err(e) = restored {
                // Serving on with the caller's groups or without CAP_FSETID would act with the
                // wrong privileges from now on.
                tracing::error!("restoring the thread's groups and capabilities failed: {e}");
                std::process::abort();
            }
        }
    }
}

/// Runs `op` so that the backing file system clears set-id bits as it would for `kill`'s caller;
/// unchanged (as root) when `kill` is `None`.
pub fn run_as_caller_would<T>(
    kill: Option<&Caller>,
    op: impl FnOnce() -> io::Result<T>,
) -> io::Result<T> {
    match kill {
        Some(caller) => {
            let _g = WithoutFsetid::enter(caller)?;
            op()
        }
        None => op(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_eff_is_parsed_from_status() {
        let status = "Name:\tcat\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert_eq!(parse_cap_eff(status), Some(0x1ff_ffff_ffff));
        assert_eq!(parse_cap_eff("Name:\tx\n"), None);
        assert_eq!(
            parse_groups("Groups:\t4 24 27 \nNgid:\t0\n"),
            vec![4, 24, 27]
        );
        assert_eq!(parse_groups("Groups:\t\n"), Vec::<u32>::new());
    }

    #[test]
    fn set_id_bits_only_on_regular_files() {
        assert!(has_set_id_bits(libc::S_IFREG | 0o4755));
        assert!(has_set_id_bits(libc::S_IFREG | 0o2644));
        assert!(!has_set_id_bits(libc::S_IFREG | 0o755));
        assert!(!has_set_id_bits(libc::S_IFDIR | 0o2775));
    }
}
