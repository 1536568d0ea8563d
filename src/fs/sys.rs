//! Thin wrappers over the libc calls the passthrough makes, turning `-1`/errno into `io::Error`.
//!
//! Everything here works on raw descriptors relative to directory handles, never on absolute
//! paths: SOURCE may be hidden under the mount itself (in-place mode), so only handles opened
//! before mounting reach the real files.

use std::ffi::{CStr, CString, OsStr};
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;

/// Converts a libc return value into a `Result`, reading errno on `-1`.
pub fn cvt(ret: libc::c_int) -> io::Result<libc::c_int> {
    if ret == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn cvt_size(ret: libc::ssize_t) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

/// A name from the kernel as a C string. Names with an interior NUL cannot exist on Linux.
pub fn cstr(name: &OsStr) -> io::Result<CString> {
    CString::new(name.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

pub const EMPTY: &CStr = c"";

pub fn openat(dir: BorrowedFd<'_>, name: &CStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let fd = cvt(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    })?;
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

pub fn fstatat(dir: BorrowedFd<'_>, name: &CStr, flags: i32) -> io::Result<libc::stat> {
    let mut st = MaybeUninit::<libc::stat>::uninit();
    cvt(unsafe { libc::fstatat(dir.as_raw_fd(), name.as_ptr(), st.as_mut_ptr(), flags) })?;
    Ok(unsafe { st.assume_init() })
}

pub fn fstat(fd: BorrowedFd<'_>) -> io::Result<libc::stat> {
    fstatat(fd, EMPTY, libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW)
}

/// The id of the mount an open descriptor is on (mountinfo's first field). Linux 5.8 and later.
pub fn mount_id(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    cvt(unsafe {
        libc::statx(
            fd.as_raw_fd(),
            EMPTY.as_ptr(),
            libc::AT_EMPTY_PATH | libc::AT_SYMLINK_NOFOLLOW,
            libc::STATX_MNT_ID,
            stx.as_mut_ptr(),
        )
    })?;
    // Zeroed, then filled in by the kernel where it returned success.
    let stx = unsafe { stx.assume_init() };
    if stx.stx_mask & libc::STATX_MNT_ID == 0 {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "statx gave no mount id (Linux before 5.8)",
        ));
    }
    Ok(stx.stx_mnt_id)
}

/// `statx` of `name` in `dir` (of `dir` itself for an empty name): the attributes `stat`
/// gives, and the birth time (`None` where the file system keeps none). `None` for the
/// attributes too when the file system left out one of the basic ones, which `fstatat` then
/// fills in the kernel's way.
pub fn statx_at(
    dir: BorrowedFd<'_>,
    name: &CStr,
    flags: i32,
) -> io::Result<(Option<libc::stat>, Option<std::time::SystemTime>)> {
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    let flags = flags
        | if name.is_empty() {
            libc::AT_EMPTY_PATH
        } else {
            0
        };
    cvt(unsafe {
        libc::statx(
            dir.as_raw_fd(),
            name.as_ptr(),
            flags,
            libc::STATX_BASIC_STATS | libc::STATX_BTIME,
            stx.as_mut_ptr(),
        )
    })?;
    // Zeroed, then filled in by the kernel where it returned success.
    let x = unsafe { stx.assume_init() };
    let born = (x.stx_mask & libc::STATX_BTIME != 0)
        .then(|| super::attr::time(x.stx_btime.tv_sec, x.stx_btime.tv_nsec.into()));
    if x.stx_mask & libc::STATX_BASIC_STATS != libc::STATX_BASIC_STATS {
        return Ok((None, born));
    }
    // SAFETY: `stat` is plain data, for which all zeroes is a valid value (its padding too).
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    st.st_dev = libc::makedev(x.stx_dev_major, x.stx_dev_minor);
    st.st_ino = x.stx_ino;
    st.st_nlink = x.stx_nlink.into();
    st.st_mode = x.stx_mode.into();
    st.st_uid = x.stx_uid;
    st.st_gid = x.stx_gid;
    st.st_rdev = libc::makedev(x.stx_rdev_major, x.stx_rdev_minor);
    st.st_size = x.stx_size as libc::off_t;
    st.st_blksize = x.stx_blksize as libc::blksize_t;
    st.st_blocks = x.stx_blocks as libc::blkcnt_t;
    st.st_atime = x.stx_atime.tv_sec;
    st.st_atime_nsec = x.stx_atime.tv_nsec.into();
    st.st_mtime = x.stx_mtime.tv_sec;
    st.st_mtime_nsec = x.stx_mtime.tv_nsec.into();
    st.st_ctime = x.stx_ctime.tv_sec;
    st.st_ctime_nsec = x.stx_ctime.tv_nsec.into();
    Ok((Some(st), born))
}

/// The `/proc/self/fd/N` path of a descriptor: lets path-only calls (chmod, xattrs, truncate)
/// act on an `O_PATH` descriptor's inode without resolving any name again.
pub fn proc_fd_path(fd: RawFd) -> CString {
    // A formatted integer never contains NUL.
    CString::new(format!("/proc/self/fd/{fd}")).unwrap_or_default()
}

/// The path the kernel gives an open descriptor now (its `/proc/self/fd/N` link).
pub fn fd_path(fd: BorrowedFd<'_>) -> io::Result<std::path::PathBuf> {
    std::fs::read_link(OsStr::from_bytes(proc_fd_path(fd.as_raw_fd()).as_bytes()))
}

pub fn readlinkat(dir: BorrowedFd<'_>, name: &CStr) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize];
    let n = cvt_size(unsafe {
        libc::readlinkat(
            dir.as_raw_fd(),
            name.as_ptr(),
            buf.as_mut_ptr().cast(),
            buf.len(),
        )
    })?;
    buf.truncate(n);
    Ok(buf)
}

pub fn pread(fd: BorrowedFd<'_>, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    cvt_size(unsafe {
        libc::pread64(
            fd.as_raw_fd(),
            buf.as_mut_ptr().cast(),
            buf.len(),
            offset as i64,
        )
    })
}

pub fn pwrite(fd: BorrowedFd<'_>, buf: &[u8], offset: u64) -> io::Result<usize> {
    cvt_size(unsafe {
        libc::pwrite64(
            fd.as_raw_fd(),
            buf.as_ptr().cast(),
            buf.len(),
            offset as i64,
        )
    })
}

/// Reads raw `linux_dirent64` records into `buf`; returns the number of bytes filled.
pub fn getdents64(fd: BorrowedFd<'_>, buf: &mut [u8]) -> io::Result<usize> {
    let n = unsafe {
        libc::syscall(
            libc::SYS_getdents64,
            fd.as_raw_fd(),
            buf.as_mut_ptr(),
            buf.len(),
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// One record out of a `getdents64` buffer.
pub struct DirEntry<'a> {
    pub ino: u64,
    /// Position just past this entry, to resume listing from.
    pub next_offset: i64,
    pub d_type: u8,
    pub name: &'a [u8],
}

/// Walks the records `getdents64` filled into `buf[..len]`.
pub fn parse_dirents(buf: &[u8]) -> impl Iterator<Item = DirEntry<'_>> {
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        // linux_dirent64: u64 ino, i64 off, u16 reclen, u8 type, name (NUL-terminated).
        const HEADER: usize = 19;
        if pos + HEADER > buf.len() {
            return None;
        }
        let rec = &buf[pos..];
        let ino = u64::from_ne_bytes(rec[0..8].try_into().ok()?);
        let next_offset = i64::from_ne_bytes(rec[8..16].try_into().ok()?);
        let reclen = u16::from_ne_bytes(rec[16..18].try_into().ok()?) as usize;
        let d_type = rec[18];
        if reclen < HEADER || pos + reclen > buf.len() {
            return None;
        }
        let raw = &rec[HEADER..reclen];
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        pos += reclen;
        Some(DirEntry {
            ino,
            next_offset,
            d_type,
            name: &raw[..end],
        })
    })
}

pub fn lseek(fd: BorrowedFd<'_>, offset: i64, whence: i32) -> io::Result<i64> {
    let r = unsafe { libc::lseek64(fd.as_raw_fd(), offset, whence) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

pub fn statvfs(fd: BorrowedFd<'_>) -> io::Result<libc::statvfs> {
    let mut st = MaybeUninit::<libc::statvfs>::uninit();
    cvt(unsafe { libc::fstatvfs(fd.as_raw_fd(), st.as_mut_ptr()) })?;
    Ok(unsafe { st.assume_init() })
}

/// The soft open-file limit.
pub fn nofile_limit() -> Option<u64> {
    nofile_rlimit().map(|l| l.rlim_cur)
}

fn nofile_rlimit() -> Option<libc::rlimit> {
    let mut lim = MaybeUninit::<libc::rlimit>::uninit();
    // SAFETY: getrlimit fills the struct when it returns 0.
    unsafe {
        (libc::getrlimit(libc::RLIMIT_NOFILE, lim.as_mut_ptr()) == 0).then(|| lim.assume_init())
    }
}

/// Raises the soft open-file limit to the hard one: a busy mount keeps many files open.
pub fn raise_nofile_limit() {
    if let Some(mut lim) = nofile_rlimit()
        && lim.rlim_cur < lim.rlim_max
    {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: a valid rlimit; failure leaves the limit as it was.
        unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) };
    }
}

/// What a getxattr/listxattr call returned: with an empty buffer (a size query) only the
/// length is known; otherwise the bytes themselves.
pub enum XattrValue {
    Size(usize),
    Data(Vec<u8>),
}

/// Applies the buffer-size protocol shared by getxattr/listxattr: size 0 asks for the length.
pub fn xattr_result(ret: libc::ssize_t, mut buf: Vec<u8>) -> io::Result<XattrValue> {
    let n = cvt_size(ret)?;
    if buf.is_empty() {
        return Ok(XattrValue::Size(n));
    }
    buf.truncate(n);
    Ok(XattrValue::Data(buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsFd;

    #[test]
    fn parses_dirents_of_a_real_directory() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("a"), b"x").expect("write");
        std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
        let fd = std::fs::File::open(dir.path()).expect("open");
        let fd: OwnedFd = fd.into();
        let mut buf = vec![0u8; 4096];
        let n = getdents64(fd.as_fd(), &mut buf).expect("getdents");
        let mut names: Vec<(Vec<u8>, u8)> = parse_dirents(&buf[..n])
            .map(|e| (e.name.to_vec(), e.d_type))
            .collect();
        names.sort();
        assert_eq!(
            names,
            vec![
                (b".".to_vec(), libc::DT_DIR),
                (b"..".to_vec(), libc::DT_DIR),
                (b"a".to_vec(), libc::DT_REG),
                (b"sub".to_vec(), libc::DT_DIR),
            ]
        );
    }
}
