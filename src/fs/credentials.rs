//! Acting as the caller: new files must belong to the process that created them, not to the
//! daemon (the failure that costs libfuse's passthrough_hp 4 pjdfstest cases).
//!
//! `setfsuid`/`setfsgid` are per-thread on Linux, and each FUSE request is served start to finish
//! on one thread, so a guard that switches and restores around one request is race-free. Access
//! checks were already made by the kernel (`default_permissions`) with the caller's full
//! credentials, including supplementary groups we cannot see; so while acting as the caller the
//! thread keeps its DAC override capabilities, and only ownership comes from the switch.

use std::io;

/// Switched credentials for the current thread; restored on drop.
pub struct AsCaller {
    switched: bool,
}

const CAP_DAC_OVERRIDE: u32 = 1;
const CAP_DAC_READ_SEARCH: u32 = 2;
const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct CapData {
    pub effective: u32,
    pub permitted: u32,
    pub inheritable: u32,
}

/// The calling thread's capability sets (capabilities are per thread on Linux).
pub(super) fn thread_caps() -> io::Result<[CapData; 2]> {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(data)
}

/// Sets the calling thread's capability sets; the raw syscall affects this thread only.
pub(super) fn set_thread_caps(data: &[CapData; 2]) -> io::Result<()> {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Re-raises the DAC capabilities the kernel drops from the effective set when fsuid leaves 0.
fn raise_dac_override() -> io::Result<()> {
    let mut data = thread_caps()?;
    let want = (1 << CAP_DAC_OVERRIDE) | (1 << CAP_DAC_READ_SEARCH);
    if data[0].permitted & want != want {
        return Ok(());
    }
    data[0].effective |= want;
    set_thread_caps(&data)
}

impl AsCaller {
    /// Switches the thread's file-system ids to the caller's when the daemon runs as root and the
    /// caller is someone else; otherwise does nothing (an unprivileged daemon can only create
    /// files as itself).
    pub fn switch(uid: u32, gid: u32) -> io::Result<Self> {
        if unsafe { libc::geteuid() } != 0 || (uid == 0 && gid == 0) {
            return Ok(Self { switched: false });
        }
        unsafe {
            libc::setfsgid(gid);
            libc::setfsuid(uid);
        }
        let guard = Self { switched: true };
        raise_dac_override()?;
        Ok(guard)
    }
}

impl Drop for AsCaller {
    fn drop(&mut self) {
        if self.switched {
            // Back to fsuid 0, which also restores the file-system capabilities.
            unsafe {
                libc::setfsuid(0);
                libc::setfsgid(0);
            }
        }
    }
}
