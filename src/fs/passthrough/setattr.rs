//! SETATTR: mode, owner, size and times changed on the backing inode, by handle or by path.
//! Apart because one request becomes up to four system calls, each choosing between the
//! handle's descriptor and the inode's path. `kill_for` lives here too: chown and truncate are
//! where set-id bits must be cleared as the caller would, though OPEN with O_TRUNC and
//! FALLOCATE ask it as well.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::time::UNIX_EPOCH;

use fuser::{FileAttr, FileHandle, Request, TimeOrNow};

use super::{Passthrough, told_attr};
use crate::fs::inode_store::Inode;
use crate::fs::kill_priv::{self, run_as_caller_would};
use crate::fs::sys::{self, cvt};

/// The attributes one SETATTR asks to change.
pub(super) struct AttrChange {
    pub(super) mode: Option<u32>,
    pub(super) uid: Option<u32>,
    pub(super) gid: Option<u32>,
    pub(super) size: Option<u64>,
    pub(super) atime: Option<TimeOrNow>,
    pub(super) mtime: Option<TimeOrNow>,
}

fn system_time_spec(t: Option<TimeOrNow>) -> libc::timespec {
    match t {
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
        Some(TimeOrNow::Now) => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Some(TimeOrNow::SpecificTime(t)) => match t.duration_since(UNIX_EPOCH) {
            Ok(d) => libc::timespec {
                tv_sec: d.as_secs() as libc::time_t,
                tv_nsec: d.subsec_nanos() as libc::c_long,
            },
            Err(e) => {
                // Before 1970: a negative seconds count with a positive nanosecond part.
                let d = e.duration();
                let mut secs = -(d.as_secs() as i64);
                let mut nsec = d.subsec_nanos() as i64;
                if nsec > 0 {
                    secs -= 1;
                    nsec = 1_000_000_000 - nsec;
                }
                libc::timespec {
                    tv_sec: secs as libc::time_t,
                    tv_nsec: nsec as libc::c_long,
                }
            }
        },
    }
}

impl Passthrough {
    /// The caller's gid when an operation on a file with mode `mode` must clear its set-id bits
    /// as the caller would natively (it lacks CAP_FSETID); `None` when root may keep them.
    pub(super) fn kill_for(&self, req: &Request, mode: u32) -> Option<kill_priv::Caller> {
        if !kill_priv::has_set_id_bits(mode) {
            return None;
        }
        kill_priv::caller_lacking_fsetid(req.pid(), req.uid(), req.gid())
    }

    /// `kill`: truncate and chown clear set-id bits as the caller would (see `kill_priv`).
    pub(super) fn do_setattr(
        &self,
        inode: &Inode,
        change: AttrChange,
        fh: Option<FileHandle>,
        kill: Option<kill_priv::Caller>,
    ) -> io::Result<FileAttr> {
        let AttrChange {
            mode,
            uid,
            gid,
            size,
            atime,
            mtime,
        } = change;
        let file = fh.and_then(|fh| self.files.get(fh.0).ok());
        // A handle without a descriptor of its own is served by path, as without a handle.
        let file_fd = file.as_ref().and_then(|f| f.fd_if_open());
        let writable = file.as_ref().is_some_and(|f| f.writable);
        let pfd = self.store.path_fd(inode)?;
        let proc_path = sys::proc_fd_path(pfd.as_fd().as_raw_fd());
        if let Some(mode) = mode {
            match file_fd {
                Some(fd) => cvt(unsafe { libc::fchmod(fd.as_raw_fd(), mode) })?,
                None => cvt(unsafe { libc::chmod(proc_path.as_ptr(), mode) })?,
            };
        }
        if uid.is_some() || gid.is_some() {
            let u = uid.unwrap_or(u32::MAX);
            let g = gid.unwrap_or(u32::MAX);
            run_as_caller_would(kill.as_ref(), || {
                cvt(unsafe {
                    libc::fchownat(
                        pfd.as_fd().as_raw_fd(),
                        sys::EMPTY.as_ptr(),
                        u,
                        g,
                        libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
                    )
                })
            })?;
        }
        if let Some(size) = size {
            run_as_caller_would(kill.as_ref(), || match file_fd {
                Some(fd) if writable => {
                    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), size as i64) })
                }
                _ => cvt(unsafe { libc::truncate(proc_path.as_ptr(), size as i64) }),
            })?;
        }
        if atime.is_some() || mtime.is_some() {
            let times = [system_time_spec(atime), system_time_spec(mtime)];
            if inode.is_symlink() {
                cvt(unsafe {
                    libc::utimensat(
                        pfd.as_fd().as_raw_fd(),
                        sys::EMPTY.as_ptr(),
                        times.as_ptr(),
                        libc::AT_EMPTY_PATH,
                    )
                })?;
            } else {
                match file_fd {
                    Some(fd) => cvt(unsafe { libc::futimens(fd.as_raw_fd(), times.as_ptr()) })?,
                    None => cvt(unsafe {
                        libc::utimensat(libc::AT_FDCWD, proc_path.as_ptr(), times.as_ptr(), 0)
                    })?,
                };
            }
        }
        let st = match file_fd {
            Some(fd) => sys::fstat(fd)?,
            None => sys::fstat(pfd.as_fd())?,
        };
        Ok(told_attr(inode, &st))
    }
}
