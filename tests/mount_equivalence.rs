//! The same sequence of operations on a native directory and through a worldfs mount gives the
//! same results: contents, metadata and errno.
//!
//! A scenario is a list of [`Op`]s. [`Runner`] executes it under a root directory and turns
//! every step into data (`Result<Out, Errno>`); [`Sc::check`] runs it on a native temporary
//! directory and through a fresh mirror mount (once with `--io passthrough`, once with
//! `--io daemon`) and compares step by step. Each step also carries what the native run must
//! give, so a scenario that went wrong on both sides in the same way still fails.

mod common;

use common::{Mode, Mount, cpath, errno, errno_name, tempdir};
use libc::c_int;
use proptest::prelude::*;
use std::collections::{BTreeMap, HashMap};
use std::ffi::{CStr, CString};
use std::fmt;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::{DirEntryExt, MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

// ---------------------------------------------------------------------------------------------
// operations and outcomes as data

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ts {
    Set(i64, i64),
    Now,
    Omit,
}

#[derive(Clone, Debug)]
enum Op {
    Open {
        path: String,
        flags: c_int,
        mode: u32,
        slot: usize,
    },
    Close {
        slot: usize,
    },
    Write {
        slot: usize,
        data: Data,
    },
    Pwrite {
        slot: usize,
        off: i64,
        data: Data,
    },
    Read {
        slot: usize,
        len: usize,
    },
    Pread {
        slot: usize,
        off: i64,
        len: usize,
    },
    Lseek {
        slot: usize,
        off: i64,
        whence: c_int,
    },
    Ftruncate {
        slot: usize,
        len: i64,
    },
    Truncate {
        path: String,
        len: i64,
    },
    Fstat {
        slot: usize,
    },
    Lstat {
        path: String,
    },
    Stat {
        path: String,
    },
    /// st_blocks (only meaningful after data reached the backing file).
    Blocks {
        path: String,
    },
    /// Exact atime and mtime.
    Times {
        path: String,
    },
    /// Whether mtime is within 10 s of the wall clock.
    MtimeIsNow {
        path: String,
    },
    Chmod {
        path: String,
        mode: u32,
    },
    Fchmod {
        slot: usize,
        mode: u32,
    },
    Lchown {
        path: String,
        uid: u32,
        gid: u32,
    },
    Fchown {
        slot: usize,
        uid: u32,
        gid: u32,
    },
    Utimens {
        path: String,
        atime: Ts,
        mtime: Ts,
        nofollow: bool,
    },
    Futimens {
        slot: usize,
        atime: Ts,
        mtime: Ts,
    },
    Mkdir {
        path: String,
        mode: u32,
    },
    Rmdir {
        path: String,
    },
    Unlink {
        path: String,
    },
    Rename {
        from: String,
        to: String,
        flags: u32,
    },
    Link {
        from: String,
        to: String,
    },
    /// A name for the open file in `slot` (linkat of /proc/self/fd/N, as for an O_TMPFILE).
    LinkFd {
        slot: usize,
        to: String,
    },
    Symlink {
        target: String,
        path: String,
    },
    Readlink {
        path: String,
    },
    Mknod {
        path: String,
        mode: u32,
    },
    Mkfifo {
        path: String,
        mode: u32,
    },
    /// Sorted (name, d_type) of a directory, "." and ".." included.
    Readdir {
        path: String,
    },
    ReadFile {
        path: String,
    },
    /// open(O_CREAT|O_WRONLY|O_TRUNC, 0644) + write + close.
    WriteFile {
        path: String,
        data: Data,
    },
    /// open(O_CREAT|O_WRONLY|O_APPEND, 0644) + write + close.
    AppendFile {
        path: String,
        data: Data,
    },
    Setxattr {
        path: String,
        name: String,
        value: Data,
        flags: c_int,
        nofollow: bool,
    },
    Getxattr {
        path: String,
        name: String,
    },
    /// getxattr into a buffer of exactly `size` bytes (ERANGE when too small).
    GetxattrSized {
        path: String,
        name: String,
        size: usize,
    },
    /// Sorted names from listxattr.
    Listxattr {
        path: String,
    },
    Removexattr {
        path: String,
        name: String,
    },
    Fallocate {
        slot: usize,
        mode: c_int,
        off: i64,
        len: i64,
    },
    /// copy_file_range in a loop until `len` bytes are copied or it returns 0.
    CopyRange {
        from: usize,
        off_in: i64,
        to: usize,
        off_out: i64,
        len: usize,
    },
    Access {
        path: String,
        mode: c_int,
    },
    Fsync {
        slot: usize,
    },
    Fdatasync {
        slot: usize,
    },
    MmapWrite {
        slot: usize,
        off: usize,
        data: Data,
    },
    MmapRead {
        slot: usize,
        off: usize,
        len: usize,
    },
    Flock {
        slot: usize,
        op: c_int,
    },
    OfdSetlk {
        slot: usize,
        typ: c_int,
        start: i64,
        len: i64,
    },
    OfdGetlk {
        slot: usize,
        typ: c_int,
        start: i64,
        len: i64,
    },
    /// pwrite of `len` copies of `byte` from a 4096-aligned buffer (for O_DIRECT).
    AlignedPwrite {
        slot: usize,
        off: i64,
        len: usize,
        byte: u8,
    },
    /// isatty(3) (an ioctl(TCGETS) every stdio library makes on the files it opens).
    Isatty {
        slot: usize,
    },
    /// pread into a 4096-aligned buffer (for O_DIRECT).
    AlignedPread {
        slot: usize,
        off: i64,
        len: usize,
    },
}

/// Bytes in an operation, shown short in reports.
#[derive(Clone)]
struct Data(Vec<u8>);

impl std::ops::Deref for Data {
    type Target = Vec<u8>;
    fn deref(&self) -> &Vec<u8> {
        &self.0
    }
}

impl fmt::Debug for Data {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", short_bytes(&self.0))
    }
}

#[derive(Clone, PartialEq, Eq)]
enum Out {
    Unit,
    Num(i64),
    Bytes(Vec<u8>),
    Meta(Meta),
    Names(Vec<(String, u8)>),
    Strings(Vec<String>),
    Times {
        atime: (i64, i64),
        mtime: (i64, i64),
    },
    Bool(bool),
    Lock {
        typ: i16,
        start: i64,
        len: i64,
        pid: i32,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Meta {
    kind: char,
    perm: u32,
    /// 0 for directories (their size depends on the backing fs's layout history).
    size: i64,
    nlink: u64,
    uid: u32,
    gid: u32,
    rdev: u64,
}

fn short_bytes(b: &[u8]) -> String {
    if b.len() <= 48 {
        format!("{:?}", String::from_utf8_lossy(b))
    } else {
        let mut h = DefaultHasher::new();
        b.hash(&mut h);
        format!(
            "<{} bytes, starts {:?}, hash {:016x}>",
            b.len(),
            String::from_utf8_lossy(&b[..16]),
            h.finish()
        )
    }
}

impl fmt::Debug for Out {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Out::Unit => write!(f, "ok"),
            Out::Num(n) => write!(f, "{n}"),
            Out::Bytes(b) => write!(f, "{}", short_bytes(b)),
            Out::Meta(m) => write!(
                f,
                "{} {:o} size={} nlink={} {}:{} rdev={}",
                m.kind, m.perm, m.size, m.nlink, m.uid, m.gid, m.rdev
            ),
            Out::Names(n) => {
                if n.len() > 12 {
                    let mut h = DefaultHasher::new();
                    n.hash(&mut h);
                    write!(f, "<{} entries, hash {:016x}>", n.len(), h.finish())
                } else {
                    write!(f, "{n:?}")
                }
            }
            Out::Strings(s) => write!(f, "{s:?}"),
            Out::Times { atime, mtime } => write!(
                f,
                "atime={}.{:09} mtime={}.{:09}",
                atime.0, atime.1, mtime.0, mtime.1
            ),
            Out::Bool(b) => write!(f, "{b}"),
            Out::Lock {
                typ,
                start,
                len,
                pid,
            } => {
                write!(f, "lock type={typ} start={start} len={len} pid={pid}")
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
struct Errno(i32);

impl fmt::Debug for Errno {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", errno_name(self.0))
    }
}

type R = Result<Out, Errno>;

fn show(r: &R) -> String {
    match r {
        Ok(o) => format!("{o:?}"),
        Err(e) => format!("Err({e:?})"),
    }
}

fn meta(st: &libc::stat) -> Meta {
    let kind = match st.st_mode & libc::S_IFMT {
        libc::S_IFREG => 'f',
        libc::S_IFDIR => 'd',
        libc::S_IFLNK => 'l',
        libc::S_IFIFO => 'p',
        libc::S_IFCHR => 'c',
        libc::S_IFBLK => 'b',
        libc::S_IFSOCK => 's',
        _ => '?',
    };
    Meta {
        kind,
        perm: st.st_mode & 0o7777,
        size: if kind == 'd' { 0 } else { st.st_size },
        nlink: st.st_nlink,
        uid: st.st_uid,
        gid: st.st_gid,
        rdev: st.st_rdev,
    }
}

fn timespec(t: Ts) -> libc::timespec {
    match t {
        Ts::Set(s, ns) => libc::timespec {
            tv_sec: s,
            tv_nsec: ns,
        },
        Ts::Now => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
        Ts::Omit => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_OMIT,
        },
    }
}

/// -1 → Err(errno), else the value.
fn chk(r: i64) -> Result<i64, Errno> {
    if r < 0 { Err(Errno(errno())) } else { Ok(r) }
}

fn unit(r: c_int) -> R {
    chk(r as i64).map(|_| Out::Unit)
}

/// A 4096-aligned heap buffer.
struct Aligned {
    ptr: *mut u8,
    layout: std::alloc::Layout,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let layout = std::alloc::Layout::from_size_align(len.max(1), 4096).unwrap();
        // SAFETY: non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        assert!(!ptr.is_null());
        Aligned { ptr, layout }
    }
    fn slice(&mut self) -> &mut [u8] {
        // SAFETY: ptr is valid for layout.size() bytes.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.layout.size()) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout.
        unsafe { std::alloc::dealloc(self.ptr, self.layout) }
    }
}

// ---------------------------------------------------------------------------------------------
// the runner

struct Runner {
    root: PathBuf,
    fds: HashMap<usize, OwnedFd>,
}

impl Runner {
    fn new(root: &Path) -> Runner {
        Runner {
            root: root.to_path_buf(),
            fds: HashMap::new(),
        }
    }

    fn p(&self, rel: &str) -> CString {
        if rel.is_empty() {
            cpath(&self.root)
        } else {
            cpath(&self.root.join(rel))
        }
    }

    /// The descriptor in `slot`, or -1 (so the call fails with EBADF) when the open failed.
    fn fd(&self, slot: usize) -> c_int {
        self.fds.get(&slot).map(|f| f.as_raw_fd()).unwrap_or(-1)
    }

    fn stat_at(&self, path: &str, follow: bool) -> Result<libc::stat, Errno> {
        let c = self.p(path);
        // SAFETY: zeroed stat is a valid out-buffer; c is a valid path.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let r = unsafe {
            if follow {
                libc::stat(c.as_ptr(), &mut st)
            } else {
                libc::lstat(c.as_ptr(), &mut st)
            }
        };
        chk(r as i64).map(|_| st)
    }

    fn run_all(&mut self, ops: &[Op]) -> Vec<R> {
        let v = ops.iter().map(|op| self.run(op)).collect();
        self.fds.clear();
        v
    }

    fn run(&mut self, op: &Op) -> R {
        // SAFETY (whole function): plain system calls on valid C strings, descriptors we own
        // (or -1) and buffers sized for the call.
        unsafe {
            match op {
                Op::Open {
                    path,
                    flags,
                    mode,
                    slot,
                } => {
                    self.fds.remove(slot);
                    let c = self.p(path);
                    let fd = libc::open(c.as_ptr(), *flags | libc::O_CLOEXEC, *mode);
                    let fd = chk(fd as i64)?;
                    self.fds.insert(*slot, OwnedFd::from_raw_fd(fd as c_int));
                    Ok(Out::Unit)
                }
                Op::Close { slot } => match self.fds.remove(slot) {
                    Some(fd) => unit(libc::close(std::os::fd::IntoRawFd::into_raw_fd(fd))),
                    None => Err(Errno(libc::EBADF)),
                },
                Op::Write { slot, data } => {
                    let n = libc::write(self.fd(*slot), data.as_ptr().cast(), data.len());
                    chk(n as i64).map(Out::Num)
                }
                Op::Pwrite { slot, off, data } => {
                    let n = libc::pwrite(self.fd(*slot), data.as_ptr().cast(), data.len(), *off);
                    chk(n as i64).map(Out::Num)
                }
                Op::Read { slot, len } => {
                    let mut buf = vec![0u8; *len];
                    let n = chk(libc::read(self.fd(*slot), buf.as_mut_ptr().cast(), *len) as i64)?;
                    buf.truncate(n as usize);
                    Ok(Out::Bytes(buf))
                }
                Op::Pread { slot, off, len } => {
                    let mut buf = vec![0u8; *len];
                    let n = chk(
                        libc::pread(self.fd(*slot), buf.as_mut_ptr().cast(), *len, *off) as i64,
                    )?;
                    buf.truncate(n as usize);
                    Ok(Out::Bytes(buf))
                }
                Op::Lseek { slot, off, whence } => {
                    chk(libc::lseek(self.fd(*slot), *off, *whence)).map(Out::Num)
                }
                Op::Ftruncate { slot, len } => unit(libc::ftruncate(self.fd(*slot), *len)),
                Op::Truncate { path, len } => unit(libc::truncate(self.p(path).as_ptr(), *len)),
                Op::Fstat { slot } => {
                    let mut st: libc::stat = std::mem::zeroed();
                    chk(libc::fstat(self.fd(*slot), &mut st) as i64)?;
                    Ok(Out::Meta(meta(&st)))
                }
                Op::Lstat { path } => self.stat_at(path, false).map(|st| Out::Meta(meta(&st))),
                Op::Stat { path } => self.stat_at(path, true).map(|st| Out::Meta(meta(&st))),
                Op::Blocks { path } => self.stat_at(path, false).map(|st| Out::Num(st.st_blocks)),
                Op::Times { path } => self.stat_at(path, false).map(|st| Out::Times {
                    atime: (st.st_atime, st.st_atime_nsec),
                    mtime: (st.st_mtime, st.st_mtime_nsec),
                }),
                Op::MtimeIsNow { path } => self.stat_at(path, false).map(|st| {
                    let now = SystemTime::now()
                        .duration_since(UNIX_EPOCH)
                        .unwrap()
                        .as_secs() as i64;
                    Out::Bool((st.st_mtime - now).abs() < 10)
                }),
                Op::Chmod { path, mode } => unit(libc::chmod(self.p(path).as_ptr(), *mode)),
                Op::Fchmod { slot, mode } => unit(libc::fchmod(self.fd(*slot), *mode)),
                Op::Lchown { path, uid, gid } => {
                    unit(libc::lchown(self.p(path).as_ptr(), *uid, *gid))
                }
                Op::Fchown { slot, uid, gid } => unit(libc::fchown(self.fd(*slot), *uid, *gid)),
                Op::Utimens {
                    path,
                    atime,
                    mtime,
                    nofollow,
                } => {
                    let ts = [timespec(*atime), timespec(*mtime)];
                    let fl = if *nofollow {
                        libc::AT_SYMLINK_NOFOLLOW
                    } else {
                        0
                    };
                    unit(libc::utimensat(
                        libc::AT_FDCWD,
                        self.p(path).as_ptr(),
                        ts.as_ptr(),
                        fl,
                    ))
                }
                Op::Futimens { slot, atime, mtime } => {
                    let ts = [timespec(*atime), timespec(*mtime)];
                    unit(libc::futimens(self.fd(*slot), ts.as_ptr()))
                }
                Op::Mkdir { path, mode } => unit(libc::mkdir(self.p(path).as_ptr(), *mode)),
                Op::Rmdir { path } => unit(libc::rmdir(self.p(path).as_ptr())),
                Op::Unlink { path } => unit(libc::unlink(self.p(path).as_ptr())),
                Op::Rename { from, to, flags } => unit(libc::renameat2(
                    libc::AT_FDCWD,
                    self.p(from).as_ptr(),
                    libc::AT_FDCWD,
                    self.p(to).as_ptr(),
                    *flags,
                )),
                Op::Link { from, to } => {
                    unit(libc::link(self.p(from).as_ptr(), self.p(to).as_ptr()))
                }
                Op::LinkFd { slot, to } => {
                    let from = CString::new(format!("/proc/self/fd/{}", self.fd(*slot))).unwrap();
                    unit(libc::linkat(
                        libc::AT_FDCWD,
                        from.as_ptr(),
                        libc::AT_FDCWD,
                        self.p(to).as_ptr(),
                        libc::AT_SYMLINK_FOLLOW,
                    ))
                }
                Op::Symlink { target, path } => {
                    let t = CString::new(target.as_str()).unwrap();
                    unit(libc::symlink(t.as_ptr(), self.p(path).as_ptr()))
                }
                Op::Readlink { path } => {
                    let mut buf = vec![0u8; 4096];
                    let n = chk(libc::readlink(
                        self.p(path).as_ptr(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                    ) as i64)?;
                    buf.truncate(n as usize);
                    Ok(Out::Bytes(buf))
                }
                Op::Mknod { path, mode } => unit(libc::mknod(self.p(path).as_ptr(), *mode, 0)),
                Op::Mkfifo { path, mode } => unit(libc::mkfifo(self.p(path).as_ptr(), *mode)),
                Op::Readdir { path } => {
                    let d = libc::opendir(self.p(path).as_ptr());
                    if d.is_null() {
                        return Err(Errno(errno()));
                    }
                    let mut names = Vec::new();
                    loop {
                        *libc::__errno_location() = 0;
                        let e = libc::readdir(d);
                        if e.is_null() {
                            let er = errno();
                            libc::closedir(d);
                            if er != 0 {
                                return Err(Errno(er));
                            }
                            break;
                        }
                        let name = CStr::from_ptr((*e).d_name.as_ptr())
                            .to_string_lossy()
                            .into_owned();
                        names.push((name, (*e).d_type));
                    }
                    names.sort();
                    Ok(Out::Names(names))
                }
                Op::ReadFile { path } => std::fs::read(self.root.join(path))
                    .map(Out::Bytes)
                    .map_err(|e| Errno(e.raw_os_error().unwrap_or(0))),
                Op::WriteFile { path, data } => self.put(path, data, libc::O_TRUNC),
                Op::AppendFile { path, data } => self.put(path, data, libc::O_APPEND),
                Op::Setxattr {
                    path,
                    name,
                    value,
                    flags,
                    nofollow,
                } => {
                    let n = CString::new(name.as_str()).unwrap();
                    let c = self.p(path);
                    let r = if *nofollow {
                        libc::lsetxattr(
                            c.as_ptr(),
                            n.as_ptr(),
                            value.as_ptr().cast(),
                            value.len(),
                            *flags,
                        )
                    } else {
                        libc::setxattr(
                            c.as_ptr(),
                            n.as_ptr(),
                            value.as_ptr().cast(),
                            value.len(),
                            *flags,
                        )
                    };
                    unit(r)
                }
                Op::Getxattr { path, name } => {
                    let n = CString::new(name.as_str()).unwrap();
                    let c = self.p(path);
                    let size = chk(
                        libc::getxattr(c.as_ptr(), n.as_ptr(), std::ptr::null_mut(), 0) as i64,
                    )?;
                    let mut buf = vec![0u8; size as usize + 64];
                    let got = chk(libc::getxattr(
                        c.as_ptr(),
                        n.as_ptr(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                    ) as i64)?;
                    buf.truncate(got as usize);
                    Ok(Out::Bytes(buf))
                }
                Op::GetxattrSized { path, name, size } => {
                    let n = CString::new(name.as_str()).unwrap();
                    let mut buf = vec![0u8; *size];
                    let got = chk(libc::getxattr(
                        self.p(path).as_ptr(),
                        n.as_ptr(),
                        buf.as_mut_ptr().cast(),
                        buf.len(),
                    ) as i64)?;
                    buf.truncate(got as usize);
                    Ok(Out::Bytes(buf))
                }
                Op::Listxattr { path } => {
                    let c = self.p(path);
                    let size = chk(libc::listxattr(c.as_ptr(), std::ptr::null_mut(), 0) as i64)?;
                    let mut buf = vec![0u8; size as usize + 256];
                    let got = chk(
                        libc::listxattr(c.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) as i64,
                    )?;
                    buf.truncate(got as usize);
                    let mut names: Vec<String> = buf
                        .split(|b| *b == 0)
                        .filter(|s| !s.is_empty())
                        .map(|s| String::from_utf8_lossy(s).into_owned())
                        .collect();
                    names.sort();
                    Ok(Out::Strings(names))
                }
                Op::Removexattr { path, name } => {
                    let n = CString::new(name.as_str()).unwrap();
                    unit(libc::removexattr(self.p(path).as_ptr(), n.as_ptr()))
                }
                Op::Fallocate {
                    slot,
                    mode,
                    off,
                    len,
                } => unit(libc::fallocate(self.fd(*slot), *mode, *off, *len)),
                Op::CopyRange {
                    from,
                    off_in,
                    to,
                    off_out,
                    len,
                } => {
                    let (mut oi, mut oo) = (*off_in, *off_out);
                    let mut total = 0usize;
                    while total < *len {
                        let n = chk(libc::copy_file_range(
                            self.fd(*from),
                            &mut oi,
                            self.fd(*to),
                            &mut oo,
                            *len - total,
                            0,
                        ) as i64)?;
                        if n == 0 {
                            break;
                        }
                        total += n as usize;
                    }
                    Ok(Out::Num(total as i64))
                }
                Op::Access { path, mode } => unit(libc::access(self.p(path).as_ptr(), *mode)),
                Op::Fsync { slot } => unit(libc::fsync(self.fd(*slot))),
                Op::Fdatasync { slot } => unit(libc::fdatasync(self.fd(*slot))),
                Op::MmapWrite { slot, off, data } => {
                    let len = off + data.len();
                    let p = libc::mmap(
                        std::ptr::null_mut(),
                        len,
                        libc::PROT_READ | libc::PROT_WRITE,
                        libc::MAP_SHARED,
                        self.fd(*slot),
                        0,
                    );
                    if p == libc::MAP_FAILED {
                        return Err(Errno(errno()));
                    }
                    std::ptr::copy_nonoverlapping(
                        data.as_ptr(),
                        (p as *mut u8).add(*off),
                        data.len(),
                    );
                    let r = libc::msync(p, len, libc::MS_SYNC);
                    let e = errno();
                    libc::munmap(p, len);
                    if r != 0 {
                        return Err(Errno(e));
                    }
                    Ok(Out::Unit)
                }
                Op::MmapRead { slot, off, len } => {
                    let total = off + len;
                    let p = libc::mmap(
                        std::ptr::null_mut(),
                        total,
                        libc::PROT_READ,
                        libc::MAP_SHARED,
                        self.fd(*slot),
                        0,
                    );
                    if p == libc::MAP_FAILED {
                        return Err(Errno(errno()));
                    }
                    let v = std::slice::from_raw_parts((p as *const u8).add(*off), *len).to_vec();
                    libc::munmap(p, total);
                    Ok(Out::Bytes(v))
                }
                Op::Flock { slot, op } => unit(libc::flock(self.fd(*slot), *op)),
                Op::OfdSetlk {
                    slot,
                    typ,
                    start,
                    len,
                } => {
                    let mut fl: libc::flock = std::mem::zeroed();
                    fl.l_type = *typ as i16;
                    fl.l_whence = libc::SEEK_SET as i16;
                    fl.l_start = *start;
                    fl.l_len = *len;
                    unit(libc::fcntl(self.fd(*slot), libc::F_OFD_SETLK, &mut fl))
                }
                Op::OfdGetlk {
                    slot,
                    typ,
                    start,
                    len,
                } => {
                    let mut fl: libc::flock = std::mem::zeroed();
                    fl.l_type = *typ as i16;
                    fl.l_whence = libc::SEEK_SET as i16;
                    fl.l_start = *start;
                    fl.l_len = *len;
                    chk(libc::fcntl(self.fd(*slot), libc::F_OFD_GETLK, &mut fl) as i64)?;
                    Ok(Out::Lock {
                        typ: fl.l_type,
                        start: fl.l_start,
                        len: fl.l_len,
                        pid: fl.l_pid,
                    })
                }
                Op::AlignedPwrite {
                    slot,
                    off,
                    len,
                    byte,
                } => {
                    let mut b = Aligned::new(*len);
                    b.slice().fill(*byte);
                    let n = libc::pwrite(self.fd(*slot), b.ptr.cast(), *len, *off);
                    chk(n as i64).map(Out::Num)
                }
                Op::Isatty { slot } => {
                    if libc::isatty(self.fd(*slot)) == 1 {
                        Ok(Out::Bool(true))
                    } else {
                        Err(Errno(errno()))
                    }
                }
                Op::AlignedPread { slot, off, len } => {
                    let mut b = Aligned::new(*len);
                    let n = chk(libc::pread(self.fd(*slot), b.ptr.cast(), *len, *off) as i64)?;
                    Ok(Out::Bytes(b.slice()[..n as usize].to_vec()))
                }
            }
        }
    }

    fn put(&self, path: &str, data: &[u8], extra: c_int) -> R {
        // SAFETY: valid path and buffer; the descriptor is closed before returning.
        unsafe {
            let fd = chk(libc::open(
                self.p(path).as_ptr(),
                libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC | extra,
                0o644,
            ) as i64)? as c_int;
            let n = libc::write(fd, data.as_ptr().cast(), data.len());
            let e = errno();
            let c = libc::close(fd);
            if n < 0 {
                return Err(Errno(e));
            }
            if c < 0 {
                return Err(Errno(errno()));
            }
            Ok(Out::Num(n as i64))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// scenarios

/// What the native run of a step must give (guards against scenarios that are wrong on both
/// sides in the same way).
#[derive(Clone, Debug)]
enum Expect {
    Ok,
    Err(i32),
    Is(Out),
}

impl Expect {
    fn matches(&self, r: &R) -> bool {
        match (self, r) {
            (Expect::Ok, Ok(_)) => true,
            (Expect::Err(e), Err(Errno(g))) => e == g,
            (Expect::Is(o), Ok(g)) => o == g,
            _ => false,
        }
    }
}

#[derive(Default)]
struct Sc {
    steps: Vec<(Expect, Op)>,
}

impl Sc {
    fn new() -> Sc {
        Sc::default()
    }
    fn ok(&mut self, op: Op) -> &mut Sc {
        self.steps.push((Expect::Ok, op));
        self
    }
    fn err(&mut self, e: i32, op: Op) -> &mut Sc {
        self.steps.push((Expect::Err(e), op));
        self
    }
    fn is(&mut self, op: Op, out: Out) -> &mut Sc {
        self.steps.push((Expect::Is(out), op));
        self
    }

    /// Runs the scenario natively and through mounts in both I/O modes; panics with a table of
    /// every difference.
    fn check(&self) {
        self.check_modes(&[&["--io", "passthrough"], &["--io", "daemon"]]);
    }

    fn check_modes(&self, modes: &[&[&str]]) {
        let ops: Vec<Op> = self.steps.iter().map(|(_, o)| o.clone()).collect();
        let (_native_tmp, native) = tempdir();
        let native = native.join("native");
        std::fs::create_dir(&native).unwrap();
        let nat = Runner::new(&native).run_all(&ops);

        let mut problems = Vec::new();
        for (i, ((exp, op), r)) in self.steps.iter().zip(&nat).enumerate() {
            if !exp.matches(r) {
                problems.push(format!(
                    "step {i} {op:?}: the NATIVE run gave {} but the scenario expects {exp:?} \
                     (scenario bug or unusual host)",
                    show(r)
                ));
            }
        }
        for args in modes {
            let m = Mount::mirror_with(args);
            let got = Runner::new(&m.root).run_all(&ops);
            let mut diffs = Vec::new();
            for (i, (op, (n, g))) in ops.iter().zip(nat.iter().zip(&got)).enumerate() {
                if n != g {
                    diffs.push(format!(
                        "  step {i:>4} {op:?}\n         native: {}\n         mount:  {}",
                        show(n),
                        show(g)
                    ));
                }
            }
            if !diffs.is_empty() {
                // short scenarios: every step with the differing ones marked; long ones: only
                // the differences
                let body = if ops.len() <= 120 {
                    let mut s = String::from("  (step: op => native | mount)\n");
                    for (i, (op, (n, g))) in ops.iter().zip(nat.iter().zip(&got)).enumerate() {
                        let mark = if n == g { " " } else { "≠" };
                        s += &format!("  {mark} {i:>3} {op:?} => {} | {}\n", show(n), show(g));
                    }
                    s
                } else {
                    diffs.join("\n")
                };
                problems.push(format!(
                    "mount {args:?}: {} of {} steps differ from native:\n{body}",
                    diffs.len(),
                    ops.len(),
                ));
            }
            if !problems.is_empty() {
                // keep the mount's log next to the report
                problems.push(format!("daemon output {args:?}:\n{}", m.log()));
            }
        }
        if !problems.is_empty() {
            panic!("{}", problems.join("\n\n"));
        }
    }
}

// constructors keep the scenarios short
fn s(x: &str) -> String {
    x.to_string()
}
fn open(path: &str, flags: c_int, mode: u32, slot: usize) -> Op {
    Op::Open {
        path: s(path),
        flags,
        mode,
        slot,
    }
}
fn close(slot: usize) -> Op {
    Op::Close { slot }
}
fn write(slot: usize, data: &[u8]) -> Op {
    Op::Write {
        slot,
        data: Data(data.to_vec()),
    }
}
fn pwrite(slot: usize, off: i64, data: &[u8]) -> Op {
    Op::Pwrite {
        slot,
        off,
        data: Data(data.to_vec()),
    }
}
fn read(slot: usize, len: usize) -> Op {
    Op::Read { slot, len }
}
fn pread(slot: usize, off: i64, len: usize) -> Op {
    Op::Pread { slot, off, len }
}
fn lseek(slot: usize, off: i64, whence: c_int) -> Op {
    Op::Lseek { slot, off, whence }
}
fn fstat(slot: usize) -> Op {
    Op::Fstat { slot }
}
fn lstat(path: &str) -> Op {
    Op::Lstat { path: s(path) }
}
fn stat(path: &str) -> Op {
    Op::Stat { path: s(path) }
}
fn readf(path: &str) -> Op {
    Op::ReadFile { path: s(path) }
}
fn writef(path: &str, data: &[u8]) -> Op {
    Op::WriteFile {
        path: s(path),
        data: Data(data.to_vec()),
    }
}
fn mkdir(path: &str, mode: u32) -> Op {
    Op::Mkdir {
        path: s(path),
        mode,
    }
}
fn rmdir(path: &str) -> Op {
    Op::Rmdir { path: s(path) }
}
fn unlink(path: &str) -> Op {
    Op::Unlink { path: s(path) }
}
fn rename(from: &str, to: &str, flags: u32) -> Op {
    Op::Rename {
        from: s(from),
        to: s(to),
        flags,
    }
}
fn readdir(path: &str) -> Op {
    Op::Readdir { path: s(path) }
}
fn chmod(path: &str, mode: u32) -> Op {
    Op::Chmod {
        path: s(path),
        mode,
    }
}
fn bytes(b: &[u8]) -> Out {
    Out::Bytes(b.to_vec())
}
fn pattern(len: usize, seed: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed) ^ (i >> 8) as u8)
        .collect()
}

const RW: c_int = libc::O_RDWR;
const CREAT: c_int = libc::O_CREAT | libc::O_RDWR;

// ---------------------------------------------------------------------------------------------
// tests

#[test]
fn open_flags_and_errors() {
    let long = "n".repeat(256);
    Sc::new()
        .err(libc::ENOENT, open("f", RW, 0, 0))
        .ok(open("f", CREAT | libc::O_EXCL, 0o640, 0))
        .is(write(0, b"hello world"), Out::Num(11))
        .ok(close(0))
        .err(libc::EEXIST, open("f", CREAT | libc::O_EXCL, 0o644, 1))
        // O_CREAT without O_EXCL on an existing file keeps it
        .ok(open("f", CREAT, 0o600, 1))
        .is(read(1, 100), bytes(b"hello world"))
        .ok(fstat(1))
        .err(libc::ENOTTY, Op::Isatty { slot: 1 })
        .ok(close(1))
        // O_TRUNC empties it
        .ok(open("f", libc::O_WRONLY | libc::O_TRUNC, 0, 2))
        .ok(fstat(2))
        .ok(close(2))
        .is(readf("f"), bytes(b""))
        // modes honour the umask the same way
        .ok(open("g", CREAT | libc::O_EXCL, 0o777, 3))
        .ok(lstat("g"))
        .ok(close(3))
        // access mode checks on descriptors
        .ok(open("g", libc::O_RDONLY, 0, 4))
        .err(libc::EBADF, write(4, b"x"))
        .ok(open("g", libc::O_WRONLY, 0, 5))
        .err(libc::EBADF, read(5, 1))
        // directories
        .ok(mkdir("d", 0o755))
        .err(libc::EISDIR, open("d", libc::O_WRONLY, 0, 6))
        .err(libc::EISDIR, open("d", CREAT, 0o644, 6))
        .ok(open("d", libc::O_RDONLY | libc::O_DIRECTORY, 0, 6))
        .err(
            libc::ENOTDIR,
            open("f", libc::O_RDONLY | libc::O_DIRECTORY, 0, 7),
        )
        .err(libc::ENOTDIR, open("f/x", CREAT, 0o644, 7))
        .err(libc::ENOENT, open("nodir/x", CREAT, 0o644, 7))
        // symlinks
        .ok(Op::Symlink {
            target: s("f"),
            path: s("l"),
        })
        .err(
            libc::ELOOP,
            open("l", libc::O_RDONLY | libc::O_NOFOLLOW, 0, 7),
        )
        .ok(open("l", libc::O_RDONLY, 0, 7))
        .ok(Op::Symlink {
            target: s("missing"),
            path: s("dangling"),
        })
        .err(
            libc::EEXIST,
            open("dangling", CREAT | libc::O_EXCL, 0o644, 8),
        )
        // O_CREAT through a dangling symlink creates its target
        .ok(open("dangling", CREAT, 0o644, 8))
        .ok(lstat("missing"))
        .err(libc::ENAMETOOLONG, open(&long, CREAT, 0o644, 9))
        .err(libc::ENAMETOOLONG, lstat(&long))
        .ok(readdir(""))
        .check();
}

#[test]
fn unnamed_files_o_tmpfile() {
    let tmp = libc::O_TMPFILE | libc::O_RDWR;
    let link_fd = |slot, to: &str| Op::LinkFd { slot, to: s(to) };
    Sc::new()
        .ok(mkdir("d", 0o755))
        .ok(open("d", tmp, 0o640, 0))
        .is(write(0, b"hello"), Out::Num(5))
        .ok(fstat(0))
        .is(pread(0, 0, 100), bytes(b"hello"))
        // nothing in the directory until it is linked
        .ok(readdir("d"))
        .ok(link_fd(0, "d/kept"))
        .ok(lstat("d/kept"))
        .is(readf("d/kept"), bytes(b"hello"))
        // the open file and the name are one file
        .is(write(0, b" world"), Out::Num(6))
        .is(readf("d/kept"), bytes(b"hello world"))
        .ok(fstat(0))
        .err(libc::EEXIST, link_fd(0, "d/kept"))
        .ok(close(0))
        // O_EXCL: never to be linked
        .ok(open("d", tmp | libc::O_EXCL, 0o600, 1))
        .is(write(1, b"secret"), Out::Num(6))
        .err(libc::ENOENT, link_fd(1, "d/leaked"))
        .ok(close(1))
        // closed without a name: gone
        .ok(open("", tmp, 0o644, 2))
        .is(write(2, b"scratch"), Out::Num(7))
        .ok(close(2))
        .ok(readdir(""))
        .ok(readdir("d"))
        // what open(2) refuses natively
        .err(
            libc::EINVAL,
            open("d", libc::O_TMPFILE | libc::O_RDONLY, 0o644, 3),
        )
        .ok(open("d/kept", libc::O_RDONLY, 0, 4))
        .err(libc::ENOTDIR, open("d/kept", tmp, 0o644, 5))
        .err(libc::ENOENT, open("nodir", tmp, 0o644, 5))
        .check();
}

#[test]
fn read_write_seek_append() {
    let big = pattern(300_000, 7);
    Sc::new()
        .ok(open("f", CREAT | libc::O_EXCL, 0o644, 0))
        .is(write(0, b"0123456789"), Out::Num(10))
        .is(lseek(0, 0, libc::SEEK_CUR), Out::Num(10))
        .is(lseek(0, 2, libc::SEEK_SET), Out::Num(2))
        .is(read(0, 3), bytes(b"234"))
        .is(write(0, b"xy"), Out::Num(2))
        .is(pread(0, 0, 100), bytes(b"01234xy789"))
        .is(pwrite(0, 20, b"tail"), Out::Num(4))
        .is(pread(0, 8, 100), bytes(b"89\0\0\0\0\0\0\0\0\0\0tail"))
        .is(lseek(0, 0, libc::SEEK_END), Out::Num(24))
        .is(lseek(0, -4, libc::SEEK_END), Out::Num(20))
        .err(libc::EINVAL, lseek(0, -100, libc::SEEK_SET))
        .is(read(0, 100), bytes(b"tail"))
        .is(read(0, 100), bytes(b""))
        .is(pread(0, 1000, 10), bytes(b""))
        .ok(fstat(0))
        .ok(close(0))
        // O_APPEND: every write goes to the end, even after a seek
        .ok(open("f", libc::O_WRONLY | libc::O_APPEND, 0, 1))
        .is(lseek(1, 0, libc::SEEK_SET), Out::Num(0))
        .is(write(1, b"+app"), Out::Num(4))
        .is(lseek(1, 0, libc::SEEK_CUR), Out::Num(28))
        .ok(close(1))
        .is(readf("f"), bytes(b"01234xy789\0\0\0\0\0\0\0\0\0\0tail+app"))
        // large write and read back in pieces
        .ok(open("big", CREAT, 0o644, 2))
        .is(write(2, &big), Out::Num(big.len() as i64))
        .is(
            pread(2, 123_457, 70_000),
            Out::Bytes(big[123_457..193_457].to_vec()),
        )
        .is(pread(2, 299_990, 100), Out::Bytes(big[299_990..].to_vec()))
        .ok(close(2))
        .is(readf("big"), Out::Bytes(big.clone()))
        // a second descriptor sees the first one's writes immediately
        .ok(open("shared", CREAT, 0o644, 3))
        .ok(open("shared", RW, 0, 4))
        .is(write(3, b"abc"), Out::Num(3))
        .is(read(4, 10), bytes(b"abc"))
        .is(pwrite(4, 1, b"Z"), Out::Num(1))
        .is(pread(3, 0, 10), bytes(b"aZc"))
        .ok(lstat("shared"))
        .check();
}

#[test]
fn truncate_and_ftruncate() {
    Sc::new()
        .ok(writef("f", b"0123456789"))
        .ok(Op::Truncate {
            path: s("f"),
            len: 4,
        })
        .is(readf("f"), bytes(b"0123"))
        .ok(Op::Truncate {
            path: s("f"),
            len: 8,
        })
        .is(readf("f"), bytes(b"0123\0\0\0\0"))
        .ok(lstat("f"))
        .err(
            libc::EINVAL,
            Op::Truncate {
                path: s("f"),
                len: -1,
            },
        )
        .err(
            libc::ENOENT,
            Op::Truncate {
                path: s("nope"),
                len: 0,
            },
        )
        .ok(mkdir("d", 0o755))
        .err(
            libc::EISDIR,
            Op::Truncate {
                path: s("d"),
                len: 0,
            },
        )
        .ok(open("f", RW, 0, 0))
        .ok(Op::Ftruncate { slot: 0, len: 2 })
        .ok(fstat(0))
        .is(pread(0, 0, 100), bytes(b"01"))
        .ok(Op::Ftruncate {
            slot: 0,
            len: 1 << 20,
        })
        .ok(fstat(0))
        .is(pread(0, (1 << 20) - 3, 100), bytes(b"\0\0\0"))
        .ok(Op::Ftruncate { slot: 0, len: 0 })
        .is(pread(0, 0, 10), bytes(b""))
        // the position survives a truncate: the next write leaves a hole
        .is(lseek(0, 5, libc::SEEK_SET), Out::Num(5))
        .is(write(0, b"x"), Out::Num(1))
        .is(readf("f"), bytes(b"\0\0\0\0\0x"))
        .ok(open("f", libc::O_RDONLY, 0, 1))
        .err(libc::EINVAL, Op::Ftruncate { slot: 1, len: 0 })
        .ok(close(0))
        .ok(close(1))
        // truncating a file that is open elsewhere: the reader sees the new size
        .ok(writef("g", b"abcdef"))
        .ok(open("g", libc::O_RDONLY, 0, 2))
        .is(read(2, 2), bytes(b"ab"))
        .ok(Op::Truncate {
            path: s("g"),
            len: 3,
        })
        .is(read(2, 10), bytes(b"c"))
        .ok(fstat(2))
        .check();
}

#[test]
fn chmod_chown_utimens() {
    let t1 = Ts::Set(1_000_000_000, 123_456_789);
    let t2 = Ts::Set(1_500_000_000, 987_654_321);
    Sc::new()
        .ok(writef("f", b"data"))
        .ok(chmod("f", 0o600))
        .ok(lstat("f"))
        .ok(chmod("f", 0o4755))
        .ok(lstat("f"))
        .ok(chmod("f", 0o2711))
        .ok(lstat("f"))
        .ok(chmod("f", 0o1000))
        .ok(lstat("f"))
        .err(libc::ENOENT, chmod("nope", 0o644))
        .ok(Op::Lchown {
            path: s("f"),
            uid: 1000,
            gid: 1000,
        })
        .ok(lstat("f"))
        .ok(Op::Lchown {
            path: s("f"),
            uid: u32::MAX,
            gid: 100,
        })
        .ok(lstat("f"))
        // chown clears set-user-ID
        .ok(chmod("f", 0o6755))
        .ok(Op::Lchown {
            path: s("f"),
            uid: 0,
            gid: 0,
        })
        .ok(lstat("f"))
        // lchown on a symlink changes the link, not the target
        .ok(Op::Symlink {
            target: s("f"),
            path: s("l"),
        })
        .ok(Op::Lchown {
            path: s("l"),
            uid: 1000,
            gid: 1000,
        })
        .ok(lstat("l"))
        .ok(stat("l"))
        // chmod through a symlink changes the target
        .ok(chmod("l", 0o640))
        .ok(lstat("f"))
        .ok(lstat("l"))
        // on descriptors
        .ok(open("f", RW, 0, 0))
        .ok(Op::Fchmod {
            slot: 0,
            mode: 0o751,
        })
        .ok(Op::Fchown {
            slot: 0,
            uid: 1000,
            gid: 2000,
        })
        .ok(fstat(0))
        // times
        .ok(Op::Utimens {
            path: s("f"),
            atime: t1,
            mtime: t2,
            nofollow: false,
        })
        .is(
            Op::Times { path: s("f") },
            Out::Times {
                atime: (1_000_000_000, 123_456_789),
                mtime: (1_500_000_000, 987_654_321),
            },
        )
        .ok(Op::Utimens {
            path: s("f"),
            atime: Ts::Omit,
            mtime: t1,
            nofollow: false,
        })
        .is(
            Op::Times { path: s("f") },
            Out::Times {
                atime: (1_000_000_000, 123_456_789),
                mtime: (1_000_000_000, 123_456_789),
            },
        )
        .ok(Op::Utimens {
            path: s("f"),
            atime: t2,
            mtime: Ts::Omit,
            nofollow: false,
        })
        .is(
            Op::Times { path: s("f") },
            Out::Times {
                atime: (1_500_000_000, 987_654_321),
                mtime: (1_000_000_000, 123_456_789),
            },
        )
        .ok(Op::Utimens {
            path: s("f"),
            atime: Ts::Omit,
            mtime: Ts::Now,
            nofollow: false,
        })
        .is(Op::MtimeIsNow { path: s("f") }, Out::Bool(true))
        .ok(Op::Futimens {
            slot: 0,
            atime: t1,
            mtime: t1,
        })
        .is(
            Op::Times { path: s("f") },
            Out::Times {
                atime: (1_000_000_000, 123_456_789),
                mtime: (1_000_000_000, 123_456_789),
            },
        )
        // a write moves mtime to now
        .ok(write(0, b"x"))
        .ok(fstat(0))
        .is(Op::MtimeIsNow { path: s("f") }, Out::Bool(true))
        // utimensat on the symlink itself
        .ok(Op::Utimens {
            path: s("l"),
            atime: t2,
            mtime: t2,
            nofollow: true,
        })
        .is(
            Op::Times { path: s("l") },
            Out::Times {
                atime: (1_500_000_000, 987_654_321),
                mtime: (1_500_000_000, 987_654_321),
            },
        )
        // directories
        .ok(mkdir("d", 0o700))
        .ok(chmod("d", 0o2775))
        .ok(lstat("d"))
        .ok(Op::Utimens {
            path: s("d"),
            atime: t1,
            mtime: t1,
            nofollow: false,
        })
        .ok(Op::Times { path: s("d") })
        .check();
}

#[test]
fn mkdir_rmdir_unlink() {
    Sc::new()
        .ok(mkdir("d", 0o755))
        .err(libc::EEXIST, mkdir("d", 0o755))
        .ok(mkdir("d/e", 0o700))
        .ok(mkdir("sticky", 0o1777))
        .ok(lstat("sticky"))
        .ok(mkdir("sgid", 0o2755))
        .ok(lstat("sgid"))
        .ok(lstat("d"))
        .ok(lstat("d/e"))
        .ok(lstat(""))
        .err(libc::ENOENT, mkdir("x/y", 0o755))
        .ok(writef("d/f", b"1"))
        .err(libc::EEXIST, mkdir("d/f", 0o755))
        .err(libc::ENOTDIR, mkdir("d/f/g", 0o755))
        .err(libc::ENOTEMPTY, rmdir("d"))
        .err(libc::ENOTDIR, rmdir("d/f"))
        .err(libc::ENOENT, rmdir("nope"))
        .err(libc::EINVAL, rmdir("d/e/."))
        .err(libc::EISDIR, unlink("d/e"))
        .err(libc::ENOENT, unlink("d/nope"))
        .err(libc::ENOTDIR, unlink("d/f/x"))
        .ok(rmdir("d/e"))
        .ok(unlink("d/f"))
        .ok(lstat("d"))
        .ok(rmdir("d"))
        .err(libc::ENOENT, lstat("d"))
        .err(libc::ENOENT, rmdir("d"))
        .ok(readdir(""))
        // create, remove, re-create the same name as another type
        .ok(writef("x", b"file"))
        .ok(unlink("x"))
        .ok(mkdir("x", 0o755))
        .ok(lstat("x"))
        .ok(rmdir("x"))
        .ok(Op::Symlink {
            target: s("t"),
            path: s("x"),
        })
        .ok(lstat("x"))
        .ok(unlink("x"))
        .err(libc::ENOENT, lstat("x"))
        .check();
}

#[test]
fn rename_variants() {
    let noreplace = libc::RENAME_NOREPLACE;
    let exchange = libc::RENAME_EXCHANGE;
    Sc::new()
        .ok(writef("a", b"A"))
        .ok(writef("b", b"BB"))
        .ok(mkdir("d", 0o755))
        .ok(mkdir("e", 0o755))
        .ok(writef("e/inner", b"I"))
        // plain rename over an existing file
        .ok(rename("a", "c", 0))
        .err(libc::ENOENT, lstat("a"))
        .is(readf("c"), bytes(b"A"))
        .ok(rename("c", "b", 0))
        .is(readf("b"), bytes(b"A"))
        .err(libc::ENOENT, rename("c", "b", 0))
        // RENAME_NOREPLACE
        .ok(writef("a", b"A2"))
        .err(libc::EEXIST, rename("a", "b", noreplace))
        .is(readf("b"), bytes(b"A"))
        .ok(rename("a", "fresh", noreplace))
        // RENAME_EXCHANGE
        .ok(rename("fresh", "b", exchange))
        .is(readf("fresh"), bytes(b"A"))
        .is(readf("b"), bytes(b"A2"))
        .err(libc::ENOENT, rename("b", "missing", exchange))
        .ok(rename("b", "d", exchange))
        .ok(lstat("b"))
        .ok(lstat("d"))
        .ok(rename("b", "d", exchange))
        .ok(lstat("d"))
        // directories
        .err(libc::ENOTEMPTY, rename("d", "e", 0))
        .ok(rename("e", "d", 0))
        .is(readf("d/inner"), bytes(b"I"))
        .err(libc::ENOENT, lstat("e"))
        .err(libc::EISDIR, rename("b", "d", 0))
        .ok(mkdir("e", 0o755))
        .err(libc::ENOTDIR, rename("e", "b", 0))
        .err(libc::EINVAL, rename("d", "d/sub", 0))
        .ok(rename("d/inner", "inner", 0))
        .ok(rename("e", "d", 0))
        .ok(readdir("d"))
        .ok(lstat("d"))
        .ok(lstat(""))
        // a file keeps its open descriptors across a rename
        .ok(open("inner", RW, 0, 0))
        .ok(rename("inner", "moved", 0))
        .ok(pwrite(0, 1, b"-after"))
        .is(readf("moved"), bytes(b"I-after"))
        .ok(fstat(0))
        // a directory moved with contents, then the contents are reachable at the new path
        .ok(mkdir("tree", 0o755))
        .ok(mkdir("tree/sub", 0o755))
        .ok(writef("tree/sub/leaf", b"leaf"))
        .ok(lstat("tree/sub/leaf"))
        .ok(rename("tree", "tree2", 0))
        .is(readf("tree2/sub/leaf"), bytes(b"leaf"))
        .err(libc::ENOENT, lstat("tree/sub/leaf"))
        // rename onto itself and onto a hard link of itself are no-ops
        .ok(rename("moved", "moved", 0))
        .ok(Op::Link {
            from: s("moved"),
            to: s("hl"),
        })
        .ok(rename("moved", "hl", 0))
        .ok(lstat("moved"))
        .ok(lstat("hl"))
        .ok(readdir(""))
        .check();
}

#[test]
fn links_and_symlinks() {
    Sc::new()
        .ok(writef("f", b"content"))
        .ok(Op::Link {
            from: s("f"),
            to: s("h"),
        })
        .ok(lstat("f"))
        .ok(lstat("h"))
        .err(
            libc::EEXIST,
            Op::Link {
                from: s("f"),
                to: s("h"),
            },
        )
        .err(
            libc::ENOENT,
            Op::Link {
                from: s("nope"),
                to: s("h2"),
            },
        )
        .ok(mkdir("d", 0o755))
        .err(
            libc::EPERM,
            Op::Link {
                from: s("d"),
                to: s("d2"),
            },
        )
        .ok(Op::Link {
            from: s("f"),
            to: s("d/h3"),
        })
        .ok(lstat("f"))
        .ok(writef("h", b"changed"))
        .is(readf("f"), bytes(b"changed"))
        .is(readf("d/h3"), bytes(b"changed"))
        .ok(unlink("f"))
        .ok(lstat("h"))
        .is(readf("h"), bytes(b"changed"))
        // symlinks
        .ok(Op::Symlink {
            target: s("h"),
            path: s("s"),
        })
        .is(Op::Readlink { path: s("s") }, bytes(b"h"))
        .ok(lstat("s"))
        .ok(stat("s"))
        .is(readf("s"), bytes(b"changed"))
        .err(
            libc::EEXIST,
            Op::Symlink {
                target: s("x"),
                path: s("s"),
            },
        )
        .err(libc::EINVAL, Op::Readlink { path: s("h") })
        .err(libc::ENOENT, Op::Readlink { path: s("none") })
        .ok(Op::Symlink {
            target: s("../h"),
            path: s("d/up"),
        })
        .is(readf("d/up"), bytes(b"changed"))
        .ok(Op::Symlink {
            target: s("/nonexistent/abs/target"),
            path: s("abs"),
        })
        .is(
            Op::Readlink { path: s("abs") },
            bytes(b"/nonexistent/abs/target"),
        )
        .err(libc::ENOENT, stat("abs"))
        .ok(lstat("abs"))
        .ok(Op::Symlink {
            target: "t".repeat(1000),
            path: s("longlink"),
        })
        .is(
            Op::Readlink {
                path: s("longlink"),
            },
            Out::Bytes(vec![b't'; 1000]),
        )
        .ok(lstat("longlink"))
        // loops
        .ok(Op::Symlink {
            target: s("loop2"),
            path: s("loop1"),
        })
        .ok(Op::Symlink {
            target: s("loop1"),
            path: s("loop2"),
        })
        .err(libc::ELOOP, stat("loop1"))
        // a hard link to a symlink links the symlink itself
        .ok(Op::Link {
            from: s("s"),
            to: s("s-hard"),
        })
        .ok(lstat("s-hard"))
        .ok(lstat("s"))
        .ok(Op::Symlink {
            target: s("d"),
            path: s("dl"),
        })
        .ok(readdir("dl"))
        .ok(readf("dl/h3"))
        .ok(readdir(""))
        .check();
}

#[test]
fn fifos_and_mknod() {
    Sc::new()
        .ok(Op::Mkfifo {
            path: s("p"),
            mode: 0o644,
        })
        .ok(lstat("p"))
        .err(
            libc::EEXIST,
            Op::Mkfifo {
                path: s("p"),
                mode: 0o644,
            },
        )
        .ok(Op::Mknod {
            path: s("p2"),
            mode: libc::S_IFIFO | 0o600,
        })
        .ok(lstat("p2"))
        .ok(Op::Mknod {
            path: s("r"),
            mode: libc::S_IFREG | 0o640,
        })
        .ok(lstat("r"))
        .is(readf("r"), bytes(b""))
        // a fifo opened non-blocking for reading succeeds without a writer
        .ok(open("p", libc::O_RDONLY | libc::O_NONBLOCK, 0, 0))
        .is(read(0, 10), bytes(b""))
        .ok(open("p", libc::O_WRONLY | libc::O_NONBLOCK, 0, 1))
        .is(write(1, b"through the pipe"), Out::Num(16))
        .is(read(0, 100), bytes(b"through the pipe"))
        .err(libc::ESPIPE, lseek(0, 0, libc::SEEK_SET))
        .ok(close(1))
        .ok(close(0))
        .ok(unlink("p"))
        .ok(Op::Link {
            from: s("p2"),
            to: s("p3"),
        })
        .ok(lstat("p3"))
        .ok(rename("p3", "p4", 0))
        .ok(lstat("p4"))
        .ok(readdir(""))
        .check();
}

#[test]
fn readdir_types_and_changes() {
    let mut sc = Sc::new();
    sc.ok(mkdir("d", 0o755))
        .ok(writef("d/file", b"f"))
        .ok(mkdir("d/sub", 0o755))
        .ok(Op::Symlink {
            target: s("file"),
            path: s("d/link"),
        })
        .ok(Op::Mkfifo {
            path: s("d/fifo"),
            mode: 0o644,
        })
        .ok(writef("d/.hidden", b"h"))
        .ok(writef("d/with space", b"s"))
        .ok(writef("d/ünïcødé", b"u"))
        .ok(readdir("d"))
        .ok(unlink("d/file"))
        .ok(rename("d/sub", "d/sub2", 0))
        .ok(readdir("d"))
        .err(libc::ENOENT, readdir("d/link/")) // dangling since d/file is gone
        .err(libc::ENOENT, readdir("nope"))
        .err(libc::ENOTDIR, readdir("d/.hidden"))
        .ok(readdir("d/sub2"));
    // readdir while the directory is being modified between two listings
    for i in 0..50 {
        sc.ok(writef(&format!("d/n{i:02}"), b""));
    }
    sc.ok(readdir("d"));
    for i in (0..50).step_by(3) {
        sc.ok(unlink(&format!("d/n{i:02}")));
    }
    sc.ok(readdir("d")).check();
}

#[test]
fn readdir_5000_entries() {
    let mut sc = Sc::new();
    sc.ok(mkdir("big", 0o755));
    for i in 0..5000 {
        let name = format!("big/entry-{i:05}-{}", "x".repeat(i % 40));
        if i % 500 == 0 {
            sc.ok(mkdir(&name, 0o755));
        } else if i % 250 == 0 {
            sc.ok(Op::Symlink {
                target: s("elsewhere"),
                path: name,
            });
        } else {
            sc.ok(writef(&name, b""));
        }
    }
    sc.ok(readdir("big")).ok(lstat("big"));
    for i in (0..5000).step_by(7) {
        let name = format!("big/entry-{i:05}-{}", "x".repeat(i % 40));
        if i % 500 == 0 {
            sc.ok(rmdir(&name));
        } else {
            sc.ok(unlink(&name));
        }
    }
    sc.ok(readdir("big")).ok(lstat("big"));
    sc.check();
}

#[test]
fn xattrs() {
    let set = |path: &str, name: &str, value: &[u8], flags: c_int| Op::Setxattr {
        path: s(path),
        name: s(name),
        value: Data(value.to_vec()),
        flags,
        nofollow: false,
    };
    let get = |path: &str, name: &str| Op::Getxattr {
        path: s(path),
        name: s(name),
    };
    Sc::new()
        .ok(writef("f", b"x"))
        .ok(mkdir("d", 0o755))
        .ok(Op::Symlink {
            target: s("f"),
            path: s("l"),
        })
        .is(Op::Listxattr { path: s("f") }, Out::Strings(vec![]))
        .err(libc::ENODATA, get("f", "user.missing"))
        .ok(set("f", "user.a", b"1", 0))
        .ok(set("f", "user.b", b"two", 0))
        .ok(set("f", "user.empty", b"", 0))
        .ok(set("f", "user.bin", &[0, 1, 2, 255, 0], 0))
        .ok(set("f", "user.big", &pattern(3000, 3), 0))
        .is(get("f", "user.a"), bytes(b"1"))
        .is(get("f", "user.empty"), bytes(b""))
        .is(get("f", "user.bin"), bytes(&[0, 1, 2, 255, 0]))
        .is(get("f", "user.big"), Out::Bytes(pattern(3000, 3)))
        .err(libc::EEXIST, set("f", "user.a", b"x", libc::XATTR_CREATE))
        .err(
            libc::ENODATA,
            set("f", "user.new", b"x", libc::XATTR_REPLACE),
        )
        .ok(set("f", "user.a", b"replaced", libc::XATTR_REPLACE))
        .is(get("f", "user.a"), bytes(b"replaced"))
        .err(
            libc::ERANGE,
            Op::GetxattrSized {
                path: s("f"),
                name: s("user.a"),
                size: 3,
            },
        )
        .is(
            Op::Listxattr { path: s("f") },
            Out::Strings(vec![
                s("user.a"),
                s("user.b"),
                s("user.big"),
                s("user.bin"),
                s("user.empty"),
            ]),
        )
        .ok(Op::Removexattr {
            path: s("f"),
            name: s("user.b"),
        })
        .err(
            libc::ENODATA,
            Op::Removexattr {
                path: s("f"),
                name: s("user.b"),
            },
        )
        .err(libc::ENODATA, get("f", "user.b"))
        .ok(Op::Listxattr { path: s("f") })
        // through a symlink (followed) and on a directory
        .is(get("l", "user.a"), bytes(b"replaced"))
        .ok(set("d", "user.dir", b"D", 0))
        .is(get("d", "user.dir"), bytes(b"D"))
        .ok(Op::Listxattr { path: s("d") })
        // user.* is not allowed on symlinks themselves
        .err(
            libc::EPERM,
            Op::Setxattr {
                path: s("l"),
                name: s("user.x"),
                value: Data(b"1".to_vec()),
                flags: 0,
                nofollow: true,
            },
        )
        // other namespaces: an unknown prefix is rejected, trusted.* works for root
        .err(libc::EOPNOTSUPP, set("f", "bogus.x", b"1", 0))
        .ok(set("f", "trusted.t", b"T", 0))
        .is(get("f", "trusted.t"), bytes(b"T"))
        .err(libc::ENOENT, get("missing", "user.a"))
        // xattrs follow the inode through rename and hard link
        .ok(rename("f", "g", 0))
        .is(get("g", "user.a"), bytes(b"replaced"))
        .ok(Op::Link {
            from: s("g"),
            to: s("h"),
        })
        .is(get("h", "user.bin"), bytes(&[0, 1, 2, 255, 0]))
        .check();
}

#[test]
fn fallocate_and_punch_hole() {
    let keep = libc::FALLOC_FL_KEEP_SIZE;
    let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
    let data = pattern(256 * 1024, 11);
    let mut expect = data.clone();
    expect[64 * 1024..128 * 1024].fill(0);
    Sc::new()
        .ok(open("f", CREAT, 0o644, 0))
        .ok(Op::Fallocate {
            slot: 0,
            mode: 0,
            off: 0,
            len: 1 << 20,
        })
        .ok(fstat(0))
        .is(pread(0, 1000, 4), bytes(&[0, 0, 0, 0]))
        .ok(Op::Fallocate {
            slot: 0,
            mode: keep,
            off: 1 << 20,
            len: 1 << 20,
        })
        .ok(fstat(0))
        .ok(Op::Ftruncate { slot: 0, len: 0 })
        .is(pwrite(0, 0, &data), Out::Num(data.len() as i64))
        .ok(Op::Fsync { slot: 0 })
        .ok(Op::Fallocate {
            slot: 0,
            mode: punch,
            off: 64 * 1024,
            len: 64 * 1024,
        })
        .ok(fstat(0))
        .is(pread(0, 0, 300 * 1024), Out::Bytes(expect.clone()))
        .is(readf("f"), Out::Bytes(expect))
        .ok(Op::Blocks { path: s("f") })
        // punching past EOF keeps the size
        .ok(Op::Fallocate {
            slot: 0,
            mode: punch,
            off: 200 * 1024,
            len: 1 << 20,
        })
        .ok(fstat(0))
        .is(pread(0, 200 * 1024, 8), bytes(&[0; 8]))
        // PUNCH_HOLE without KEEP_SIZE is invalid
        .err(
            libc::EOPNOTSUPP,
            Op::Fallocate {
                slot: 0,
                mode: libc::FALLOC_FL_PUNCH_HOLE,
                off: 0,
                len: 4096,
            },
        )
        .err(
            libc::EINVAL,
            Op::Fallocate {
                slot: 0,
                mode: 0,
                off: 0,
                len: 0,
            },
        )
        .ok(open("f", libc::O_RDONLY, 0, 1))
        .err(
            libc::EBADF,
            Op::Fallocate {
                slot: 1,
                mode: 0,
                off: 0,
                len: 4096,
            },
        )
        .check();
}

#[test]
fn copy_file_range() {
    let src = pattern(200_000, 5);
    let mut dst = vec![0u8; 5000];
    dst.extend_from_slice(&src[1000..101_000]);
    Sc::new()
        .ok(writef("src", &src))
        .ok(open("src", libc::O_RDONLY, 0, 0))
        .ok(open("dst", CREAT, 0o644, 1))
        .is(
            Op::CopyRange {
                from: 0,
                off_in: 1000,
                to: 1,
                off_out: 5000,
                len: 100_000,
            },
            Out::Num(100_000),
        )
        .ok(fstat(1))
        .is(readf("dst"), Out::Bytes(dst))
        // past the end of the source copies what is there
        .is(
            Op::CopyRange {
                from: 0,
                off_in: 199_990,
                to: 1,
                off_out: 0,
                len: 100,
            },
            Out::Num(10),
        )
        .is(pread(1, 0, 10), Out::Bytes(src[199_990..].to_vec()))
        // wrong descriptor modes
        .err(
            libc::EBADF,
            Op::CopyRange {
                from: 1,
                off_in: 0,
                to: 0,
                off_out: 0,
                len: 10,
            },
        )
        // a whole file into a new one, as `cp --reflink=auto` does
        .ok(open("copy", CREAT | libc::O_TRUNC, 0o644, 2))
        .is(
            Op::CopyRange {
                from: 0,
                off_in: 0,
                to: 2,
                off_out: 0,
                len: 200_000,
            },
            Out::Num(200_000),
        )
        .ok(close(2))
        .is(readf("copy"), Out::Bytes(src))
        .check();
}

#[test]
fn seek_data_and_hole() {
    let mb = 1i64 << 20;
    Sc::new()
        .ok(open("sparse", CREAT, 0o644, 0))
        .ok(pwrite(0, 0, &pattern(4096, 1)))
        .ok(pwrite(0, mb, &pattern(4096, 2)))
        .ok(pwrite(0, 3 * mb, &pattern(100, 3)))
        .is(lseek(0, 0, libc::SEEK_DATA), Out::Num(0))
        .is(lseek(0, 0, libc::SEEK_HOLE), Out::Num(4096))
        .is(lseek(0, 8192, libc::SEEK_DATA), Out::Num(mb))
        .is(lseek(0, mb, libc::SEEK_HOLE), Out::Num(mb + 4096))
        .is(lseek(0, mb + 4096, libc::SEEK_DATA), Out::Num(3 * mb))
        .is(lseek(0, 3 * mb, libc::SEEK_HOLE), Out::Num(3 * mb + 100))
        .err(libc::ENXIO, lseek(0, 3 * mb + 100, libc::SEEK_DATA))
        .err(libc::ENXIO, lseek(0, 10 * mb, libc::SEEK_HOLE))
        .ok(Op::Fsync { slot: 0 })
        .ok(Op::Blocks { path: s("sparse") })
        .is(lseek(0, 4096, libc::SEEK_DATA), Out::Num(mb))
        // a file that is all hole
        .ok(open("empty", CREAT, 0o644, 1))
        .ok(Op::Ftruncate { slot: 1, len: mb })
        .err(libc::ENXIO, lseek(1, 0, libc::SEEK_DATA))
        .is(lseek(1, 0, libc::SEEK_HOLE), Out::Num(0))
        // and a fresh descriptor agrees
        .ok(open("sparse", libc::O_RDONLY, 0, 2))
        .is(lseek(2, 4096, libc::SEEK_DATA), Out::Num(mb))
        .is(lseek(2, 0, libc::SEEK_END), Out::Num(3 * mb + 100))
        .check();
}

/// A read-only open of a file that was opened before is answered from the passthrough
/// registration the daemon kept, without a descriptor of its own: every operation that needs
/// one must still behave as natively (GETATTR by name, the rest with a descriptor opened late).
#[test]
fn reopened_read_only_file() {
    let mb = 1i64 << 20;
    Sc::new()
        .ok(open("sparse", CREAT, 0o644, 0))
        .ok(pwrite(0, 0, &pattern(4096, 1)))
        .ok(pwrite(0, mb, &pattern(100, 2)))
        .ok(close(0))
        .ok(open("sparse", libc::O_RDONLY, 0, 1))
        .ok(close(1))
        .ok(open("sparse", libc::O_RDONLY, 0, 2))
        .ok(fstat(2))
        .is(pread(2, 0, 4), bytes(&pattern(4096, 1)[..4]))
        .is(lseek(2, 4096, libc::SEEK_DATA), Out::Num(mb))
        .is(lseek(2, 0, libc::SEEK_HOLE), Out::Num(4096))
        .ok(Op::Fsync { slot: 2 })
        .ok(Op::Fchmod {
            slot: 2,
            mode: 0o600,
        })
        .ok(fstat(2))
        .ok(Op::OfdSetlk {
            slot: 2,
            typ: libc::F_RDLCK,
            start: 0,
            len: 10,
        })
        // the name it was reached by moves, then goes
        .ok(rename("sparse", "moved", 0))
        .ok(fstat(2))
        .ok(writef("sparse", b"another file"))
        .ok(fstat(2))
        .ok(unlink("moved"))
        .ok(fstat(2))
        .is(pread(2, mb, 100), bytes(&pattern(100, 2)))
        .ok(close(2))
        .is(readf("sparse"), bytes(b"another file"))
        .check();
}

/// Small files opened only for reading are served from the kernel's page cache, other opens
/// through passthrough, and all opens of one file share a mode. Pages the page cache holds must
/// never be older than the file: after writes by an open in either mode, every reader sees them.
#[test]
fn page_cache_and_passthrough_opens_of_one_file() {
    Sc::new()
        .ok(writef("c", b"0123456789"))
        // a cached reader fills the page cache
        .ok(open("c", libc::O_RDONLY, 0, 0))
        .is(pread(0, 0, 100), bytes(b"0123456789"))
        // a writer while it is open writes through the page cache
        .ok(open("c", RW, 0, 1))
        .ok(pwrite(1, 2, b"AB"))
        .is(pread(0, 0, 100), bytes(b"01AB456789"))
        .ok(Op::Ftruncate { slot: 1, len: 4 })
        .is(pread(0, 0, 100), bytes(b"01AB"))
        .ok(fstat(0))
        .ok(close(0))
        .ok(close(1))
        .is(readf("c"), bytes(b"01AB"))
        // a passthrough writer once no reader is left, same size: the pages cached before it
        // must not be served to the next reader
        .ok(open("c", RW, 0, 2))
        .ok(pwrite(2, 0, b"xy"))
        .ok(close(2))
        .ok(open("c", libc::O_RDONLY, 0, 3))
        .is(pread(3, 0, 100), bytes(b"xyAB"))
        .ok(fstat(3))
        // and a passthrough writer while that cached reader is open is a cached writer
        .ok(open("c", libc::O_WRONLY | libc::O_APPEND, 0, 4))
        .ok(write(4, b"!"))
        .is(pread(3, 0, 100), bytes(b"xyAB!"))
        .ok(close(4))
        .ok(close(3))
        .is(readf("c"), bytes(b"xyAB!"))
        .check();
}

#[test]
fn access_as_root() {
    Sc::new()
        .ok(writef("rw", b""))
        .ok(chmod("rw", 0o644))
        .ok(writef("none", b""))
        .ok(chmod("none", 0o000))
        .ok(writef("x", b""))
        .ok(chmod("x", 0o744))
        .ok(mkdir("d0", 0o000))
        .ok(Op::Access {
            path: s("rw"),
            mode: libc::F_OK,
        })
        .ok(Op::Access {
            path: s("none"),
            mode: libc::R_OK | libc::W_OK,
        })
        .err(
            libc::EACCES,
            Op::Access {
                path: s("rw"),
                mode: libc::X_OK,
            },
        )
        .err(
            libc::EACCES,
            Op::Access {
                path: s("none"),
                mode: libc::X_OK,
            },
        )
        .ok(Op::Access {
            path: s("x"),
            mode: libc::X_OK,
        })
        .ok(Op::Access {
            path: s("d0"),
            mode: libc::R_OK | libc::W_OK | libc::X_OK,
        })
        .err(
            libc::ENOENT,
            Op::Access {
                path: s("missing"),
                mode: libc::F_OK,
            },
        )
        .err(
            libc::EINVAL,
            Op::Access {
                path: s("rw"),
                mode: 0o100,
            },
        )
        // root reads and writes 0000 files
        .ok(open("none", RW, 0, 0))
        .ok(write(0, b"root wins"))
        .is(readf("none"), bytes(b"root wins"))
        .ok(writef("d0/inside", b"i"))
        .ok(readdir("d0"))
        .check();
}

#[test]
fn flock_and_ofd_locks() {
    let lock = |slot, typ, start, len| Op::OfdSetlk {
        slot,
        typ,
        start,
        len,
    };
    let getlk = |slot, typ, start, len| Op::OfdGetlk {
        slot,
        typ,
        start,
        len,
    };
    let wr = libc::F_WRLCK;
    let rd = libc::F_RDLCK;
    let un = libc::F_UNLCK;
    Sc::new()
        .ok(writef("f", &pattern(1000, 1)))
        .ok(open("f", RW, 0, 0))
        .ok(open("f", RW, 0, 1))
        .ok(open("f", libc::O_RDONLY, 0, 2))
        // flock: two open file descriptions conflict
        .ok(Op::Flock {
            slot: 0,
            op: libc::LOCK_EX,
        })
        .err(
            libc::EWOULDBLOCK,
            Op::Flock {
                slot: 1,
                op: libc::LOCK_EX | libc::LOCK_NB,
            },
        )
        .err(
            libc::EWOULDBLOCK,
            Op::Flock {
                slot: 1,
                op: libc::LOCK_SH | libc::LOCK_NB,
            },
        )
        .ok(Op::Flock {
            slot: 0,
            op: libc::LOCK_UN,
        })
        .ok(Op::Flock {
            slot: 1,
            op: libc::LOCK_SH | libc::LOCK_NB,
        })
        .ok(Op::Flock {
            slot: 2,
            op: libc::LOCK_SH | libc::LOCK_NB,
        })
        .err(
            libc::EWOULDBLOCK,
            Op::Flock {
                slot: 0,
                op: libc::LOCK_EX | libc::LOCK_NB,
            },
        )
        // closing the holder releases its flock
        .ok(close(1))
        .ok(close(2))
        .ok(Op::Flock {
            slot: 0,
            op: libc::LOCK_EX | libc::LOCK_NB,
        })
        .ok(Op::Flock {
            slot: 0,
            op: libc::LOCK_UN,
        })
        // OFD byte-range locks
        .ok(open("f", RW, 0, 1))
        .ok(open("f", libc::O_RDONLY, 0, 2))
        .ok(lock(0, wr, 0, 100))
        .is(
            getlk(1, wr, 50, 10),
            Out::Lock {
                typ: wr as i16,
                start: 0,
                len: 100,
                pid: -1,
            },
        )
        .is(
            getlk(1, rd, 100, 10),
            Out::Lock {
                typ: un as i16,
                start: 100,
                len: 10,
                pid: 0,
            },
        )
        .err(libc::EAGAIN, lock(1, wr, 99, 1))
        .err(libc::EAGAIN, lock(2, rd, 0, 1))
        .ok(lock(1, wr, 100, 50))
        .ok(lock(0, un, 0, 50))
        .ok(lock(2, rd, 0, 50))
        .err(libc::EBADF, lock(2, wr, 500, 1))
        .err(libc::EAGAIN, lock(0, wr, 0, 10))
        .ok(close(2))
        .ok(lock(0, wr, 0, 10))
        .check();
}

#[test]
fn mmap_read_write() {
    let data = pattern(3 * 4096 + 17, 9);
    let mut after = data.clone();
    after[5000..5011].copy_from_slice(b"via mmap!!!");
    Sc::new()
        .ok(writef("f", &data))
        .ok(open("f", RW, 0, 0))
        .is(
            Op::MmapRead {
                slot: 0,
                off: 0,
                len: data.len(),
            },
            Out::Bytes(data.clone()),
        )
        .ok(Op::MmapWrite {
            slot: 0,
            off: 5000,
            data: Data(b"via mmap!!!".to_vec()),
        })
        .is(pread(0, 0, data.len() + 10), Out::Bytes(after.clone()))
        .ok(close(0))
        .is(readf("f"), Out::Bytes(after.clone()))
        // write(2) is visible through a fresh mapping
        .ok(open("f", RW, 0, 1))
        .ok(pwrite(1, 0, b"WRITTEN"))
        .is(
            Op::MmapRead {
                slot: 1,
                off: 0,
                len: 7,
            },
            bytes(b"WRITTEN"),
        )
        // a mapping extended by ftruncate (like a linker writing its output)
        .ok(open("out", CREAT, 0o755, 2))
        .ok(Op::Ftruncate {
            slot: 2,
            len: 10_000,
        })
        .ok(Op::MmapWrite {
            slot: 2,
            off: 9_990,
            data: Data(b"0123456789".to_vec()),
        })
        .ok(Op::Fsync { slot: 2 })
        .ok(close(2))
        .ok(lstat("out"))
        .is(
            Op::ReadFile { path: s("out") },
            Out::Bytes({
                let mut v = vec![0u8; 9_990];
                v.extend_from_slice(b"0123456789");
                v
            }),
        )
        // a read-only descriptor cannot be mapped writable and shared
        .ok(open("f", libc::O_RDONLY, 0, 3))
        .err(
            libc::EACCES,
            Op::MmapWrite {
                slot: 3,
                off: 0,
                data: Data(b"x".to_vec()),
            },
        )
        .check();
}

#[test]
fn fsync_and_fdatasync() {
    Sc::new()
        .ok(open("f", CREAT, 0o644, 0))
        .ok(write(0, &pattern(100_000, 4)))
        .ok(Op::Fsync { slot: 0 })
        .ok(Op::Fdatasync { slot: 0 })
        .ok(fstat(0))
        .ok(open("f", libc::O_RDONLY, 0, 1))
        .ok(Op::Fsync { slot: 1 })
        .ok(mkdir("d", 0o755))
        .ok(open("d", libc::O_RDONLY | libc::O_DIRECTORY, 0, 2))
        .ok(Op::Fsync { slot: 2 })
        .ok(open("synced", CREAT | libc::O_SYNC, 0o644, 3))
        .is(write(3, b"osync"), Out::Num(5))
        .ok(open("dsynced", CREAT | libc::O_DSYNC, 0o644, 4))
        .is(write(4, b"odsync"), Out::Num(6))
        .is(readf("synced"), bytes(b"osync"))
        .is(readf("dsynced"), bytes(b"odsync"))
        .err(libc::EBADF, Op::Fsync { slot: 99 })
        .check();
}

#[test]
fn o_direct() {
    Sc::new()
        .ok(open("f", CREAT | libc::O_DIRECT, 0o644, 0))
        .is(
            Op::AlignedPwrite {
                slot: 0,
                off: 0,
                len: 8192,
                byte: b'a',
            },
            Out::Num(8192),
        )
        .is(
            Op::AlignedPwrite {
                slot: 0,
                off: 8192,
                len: 4096,
                byte: b'b',
            },
            Out::Num(4096),
        )
        .is(
            Op::AlignedPread {
                slot: 0,
                off: 4096,
                len: 8192,
            },
            Out::Bytes({
                let mut v = vec![b'a'; 4096];
                v.extend(vec![b'b'; 4096]);
                v
            }),
        )
        .ok(fstat(0))
        .ok(close(0))
        // buffered and direct descriptors on one file agree
        .ok(open("f", RW, 0, 1))
        .ok(pwrite(1, 0, b"buffered"))
        .ok(open("f", libc::O_RDONLY | libc::O_DIRECT, 0, 2))
        .is(
            Op::AlignedPread {
                slot: 2,
                off: 0,
                len: 4096,
            },
            Out::Bytes({
                let mut v = b"buffered".to_vec();
                v.extend(vec![b'a'; 4096 - 8]);
                v
            }),
        )
        .is(
            readf("f"),
            Out::Bytes({
                let mut v = b"buffered".to_vec();
                v.extend(vec![b'a'; 8192 - 8]);
                v.extend(vec![b'b'; 4096]);
                v
            }),
        )
        .check();
}

#[test]
fn deleted_but_open_file() {
    Sc::new()
        .ok(open("f", CREAT, 0o644, 0))
        .ok(write(0, b"still here"))
        .ok(Op::Fchmod {
            slot: 0,
            mode: 0o644,
        })
        .ok(open("f", libc::O_RDONLY, 0, 1))
        .ok(unlink("f"))
        .err(libc::ENOENT, lstat("f"))
        .is(
            fstat(0),
            Out::Meta(Meta {
                kind: 'f',
                perm: 0o644,
                size: 10,
                nlink: 0,
                uid: 0,
                gid: 0,
                rdev: 0,
            }),
        )
        .is(pread(1, 0, 100), bytes(b"still here"))
        .ok(pwrite(0, 10, b", and more"))
        .is(pread(1, 0, 100), bytes(b"still here, and more"))
        .ok(Op::Ftruncate { slot: 0, len: 5 })
        .ok(fstat(1))
        .ok(Op::Fchmod {
            slot: 0,
            mode: 0o600,
        })
        .ok(fstat(0))
        .ok(Op::Fsync { slot: 0 })
        // a new file with the same name is a different file
        .ok(writef("f", b"new"))
        .is(pread(1, 0, 100), bytes(b"still"))
        .is(readf("f"), bytes(b"new"))
        .ok(readdir(""))
        // the same for a file replaced by rename while open
        .ok(writef("g", b"old g"))
        .ok(open("g", libc::O_RDONLY, 0, 2))
        .ok(writef("g.tmp", b"new g"))
        .ok(rename("g.tmp", "g", 0))
        .is(pread(2, 0, 100), bytes(b"old g"))
        .ok(fstat(2))
        .is(readf("g"), bytes(b"new g"))
        .check();
}

// ---------------------------------------------------------------------------------------------
// tests that need more than one root's worth of steps

/// New files belong to the calling user, and permission checks apply to non-root callers.
#[test]
fn non_root_caller_owns_new_files() {
    const UID: u32 = 65534; // nobody
    const GID: u32 = 65534;
    let run_as = |dir: &Path, script: &str| -> i32 {
        let st = Command::new("sh")
            .arg("-c")
            .arg(script)
            .current_dir(dir)
            .uid(UID)
            .gid(GID)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .expect("spawn sh as nobody");
        st.code().unwrap_or(-1)
    };
    // (script, what the native run must exit with)
    let steps: &[(&str, i32)] = &[
        ("touch own", 0),
        ("mkdir ownd", 0),
        ("ln -s own ownl", 0),
        ("mkfifo ownp", 0),
        ("echo hi > own && cat own >/dev/null", 0),
        ("ln own ownh", 0),
        ("echo x > ownd/inner", 0),
        ("mv ownd/inner ownd/inner2", 0),
        ("touch sgid/child && mkdir sgid/childd", 0),
        ("test -r rootfile", 0),
        ("test -w rootfile", 1),
        ("echo x >> rootfile", 2), // dash: a failed redirection exits 2
        ("cat secret", 1),
        ("touch rootdir/x", 1),
        ("rm -f rootdir/victim", 1),
        ("ls rootdir >/dev/null", 0),
        ("chmod 600 rootfile", 1),
        ("chmod 600 own", 0),
        ("touch -d @1000000000 rootfile", 1),
        ("touch -d @1000000000 own", 0),
        ("rm own && test ! -e own", 0),
        ("rm -f sticky/rootowned", 1),
    ];
    let prepare = |root: &Path| {
        std::fs::write(root.join("rootfile"), b"root").unwrap();
        std::fs::write(root.join("secret"), b"s").unwrap();
        std::fs::set_permissions(root.join("secret"), std::fs::Permissions::from_mode(0o600))
            .unwrap();
        std::fs::create_dir(root.join("rootdir")).unwrap();
        std::fs::write(root.join("rootdir/victim"), b"v").unwrap();
        std::fs::create_dir(root.join("sgid")).unwrap();
        std::fs::set_permissions(root.join("sgid"), std::fs::Permissions::from_mode(0o2777))
            .unwrap();
        std::fs::create_dir(root.join("sticky")).unwrap();
        std::fs::set_permissions(root.join("sticky"), std::fs::Permissions::from_mode(0o1777))
            .unwrap();
        std::fs::write(root.join("sticky/rootowned"), b"r").unwrap();
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o777)).unwrap();
    };
    let perms_of = |p: &Path| {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };

    // native
    let (_t, nbase) = tempdir();
    perms_of(&nbase);
    let native = nbase.join("n");
    std::fs::create_dir(&native).unwrap();
    prepare(&native);
    let nat: Vec<i32> = steps.iter().map(|(sc, _)| run_as(&native, sc)).collect();
    for ((sc, want), got) in steps.iter().zip(&nat) {
        assert_eq!(
            got, want,
            "native run of {sc:?} as uid {UID} exited {got}, the test expects {want} (test bug?)"
        );
    }

    // through the mount
    let m = Mount::start(common::Mode::Mirror, &[], |src| prepare(src));
    perms_of(&m.base);
    let got: Vec<i32> = steps.iter().map(|(sc, _)| run_as(&m.root, sc)).collect();
    let mut problems = Vec::new();
    for ((sc, _), (n, g)) in steps.iter().zip(nat.iter().zip(&got)) {
        if n != g {
            problems.push(format!(
                "`{sc}` as uid {UID}: native exit {n}, through the mount exit {g}"
            ));
        }
    }
    // owners, read in the backing directory and natively
    for name in [
        "ownd",
        "ownl",
        "ownp",
        "ownh",
        "ownd/inner2",
        "sgid/child",
        "sgid/childd",
    ] {
        let n = std::fs::symlink_metadata(native.join(name)).map(|m| (m.uid(), m.gid(), m.mode()));
        let b = m
            .backing_lstat(name)
            .map(|st| (st.st_uid, st.st_gid, st.st_mode));
        let through = std::fs::symlink_metadata(m.path(name)).map(|m| (m.uid(), m.gid(), m.mode()));
        let (n, b, through) = (
            n.map_err(|e| e.to_string()),
            b.map_err(|e| e.to_string()),
            through.map_err(|e| e.to_string()),
        );
        if n != b || n != through {
            problems.push(format!(
                "{name}: (uid, gid, mode) native {n:?}, backing {b:?}, through the mount {through:?}"
            ));
        }
    }
    assert_eq!(
        std::fs::symlink_metadata(native.join("ownd"))
            .unwrap()
            .uid(),
        UID,
        "native sanity"
    );
    assert_eq!(
        std::fs::symlink_metadata(native.join("sgid/child"))
            .unwrap()
            .gid(),
        0,
        "native sanity: setgid dir"
    );
    if !problems.is_empty() {
        panic!(
            "non-root caller differs:\n{}\n--- daemon output ---\n{}",
            problems.join("\n"),
            m.log()
        );
    }
}

/// st_ino (and d_ino) through the mount are the backing inode numbers.
#[test]
fn st_ino_matches_source() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::create_dir_all(src.join("a/b/c")).unwrap();
        std::fs::write(src.join("a/b/c/deep"), b"d").unwrap();
        std::fs::write(src.join("top"), b"t").unwrap();
        std::fs::hard_link(src.join("top"), src.join("a/top-link")).unwrap();
        std::os::unix::fs::symlink("top", src.join("sym")).unwrap();
        let c = cpath(&src.join("fifo"));
        // SAFETY: valid path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
    });
    // entries created through the mount, too
    std::fs::write(m.path("made-through"), b"x").unwrap();
    std::fs::create_dir(m.path("a/dir-through")).unwrap();
    std::fs::rename(m.path("made-through"), m.path("a/renamed-through")).unwrap();

    let names = [
        "a",
        "a/b",
        "a/b/c",
        "a/b/c/deep",
        "top",
        "a/top-link",
        "sym",
        "fifo",
        "a/dir-through",
        "a/renamed-through",
    ];
    let mut problems = Vec::new();
    let mut devs = std::collections::BTreeSet::new();
    for name in names {
        let src = std::fs::symlink_metadata(m.backing(name)).unwrap();
        match std::fs::symlink_metadata(m.path(name)) {
            Ok(mnt) => {
                devs.insert(mnt.dev());
                if mnt.ino() != src.ino() {
                    problems.push(format!(
                        "lstat {name}: st_ino {} through the mount, {} in SOURCE",
                        mnt.ino(),
                        src.ino()
                    ));
                }
            }
            Err(e) => problems.push(format!("lstat {name} through the mount: {e}")),
        }
    }
    // hard links share an inode number through the mount
    let a = std::fs::metadata(m.path("top")).unwrap().ino();
    let b = std::fs::metadata(m.path("a/top-link")).unwrap().ino();
    if a != b {
        problems.push(format!("hard links top/a/top-link: st_ino {a} vs {b}"));
    }
    // an open descriptor reports the same number
    let f = std::fs::File::open(m.path("a/b/c/deep")).unwrap();
    let fino = f.metadata().unwrap().ino();
    let src_ino = std::fs::metadata(m.backing("a/b/c/deep")).unwrap().ino();
    if fino != src_ino {
        problems.push(format!("fstat a/b/c/deep: {fino}, SOURCE {src_ino}"));
    }
    // readdir's d_ino matches st_ino (tools such as find and du rely on it)
    for dir in ["", "a", "a/b/c"] {
        for e in std::fs::read_dir(m.path(dir)).unwrap() {
            let e = e.unwrap();
            let d_ino = e.ino();
            let st = std::fs::symlink_metadata(e.path()).unwrap().ino();
            if d_ino != st {
                problems.push(format!(
                    "readdir {}: d_ino {d_ino} but st_ino {st}",
                    e.path().display()
                ));
            }
        }
    }
    if devs.len() != 1 {
        problems.push(format!("st_dev differs inside one mount: {devs:?}"));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Writes, truncates, O_TRUNC opens, chowns and fallocates clear set-id bits and
/// `security.capability` exactly as natively. With FUSE_HANDLE_KILLPRIV_V2 the kernel leaves
/// the clearing to the daemon, which acts as root (and root keeps the bits on its own writes),
/// so each caller kind matters: an unprivileged owner, root, and root without CAP_FSETID; in
/// both I/O modes (kernel passthrough writes bypass the daemon).
#[test]
fn set_id_bits_cleared_as_natively() {
    const NOBODY: u32 = 65534;
    let who: &[(&str, &[&str])] = &[
        (
            "nobody",
            &[
                "setpriv",
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--",
            ],
        ),
        ("root", &[]),
        (
            "root-without-fsetid",
            &["setpriv", "--bounding-set=-fsetid", "--"],
        ),
    ];
    let actions: &[(&str, &str)] = &[
        ("append", "printf x >> f"),
        (
            "pwrite",
            "printf y | dd of=f bs=1 seek=1 conv=notrunc 2>/dev/null",
        ),
        ("truncate", "truncate -s 1 f"),
        ("o_trunc", ": > f"),
        ("chgrp", "chgrp 65534 f"),
        ("fallocate", "fallocate -l 8192 f"),
    ];
    // (mode, group): suid+sgid+group-exec; sgid without group-exec in the writer's group and
    // outside it (only the latter loses it natively); suid alone.
    let files: &[(u32, u32)] = &[
        (0o6775, NOBODY),
        (0o2664, NOBODY),
        (0o2664, 0),
        (0o4755, NOBODY),
    ];
    // A version 2 vfs_cap_data granting cap_net_raw, effective.
    let mut cap = Vec::new();
    cap.extend_from_slice(&0x0200_0001u32.to_le_bytes());
    cap.extend_from_slice(&(1u32 << 13).to_le_bytes());
    cap.extend_from_slice(&[0u8; 12]);

    let mut cases = Vec::new();
    for (w, prefix) in who {
        for (a, script) in actions {
            for (mode, gid) in files {
                cases.push((
                    format!("{w}-{a}-{mode:o}-{gid}"),
                    *prefix,
                    *script,
                    *mode,
                    *gid,
                ));
            }
        }
    }
    let prepare = |root: &Path| {
        std::fs::set_permissions(root, std::fs::Permissions::from_mode(0o755)).unwrap();
        for (dir, _, _, mode, gid) in &cases {
            let d = root.join(dir);
            std::fs::create_dir(&d).unwrap();
            let f = d.join("f");
            std::fs::write(&f, b"data").unwrap();
            std::os::unix::fs::chown(&f, Some(NOBODY), Some(*gid)).unwrap();
            std::fs::set_permissions(&f, std::fs::Permissions::from_mode(*mode)).unwrap();
            let c = cpath(&f);
            // SAFETY: valid path, name and buffer.
            let r = unsafe {
                libc::setxattr(
                    c.as_ptr(),
                    c"security.capability".as_ptr(),
                    cap.as_ptr().cast(),
                    cap.len(),
                    0,
                )
            };
            assert_eq!(
                r,
                0,
                "setxattr security.capability: {}",
                errno_name(errno())
            );
        }
    };
    // (exit code, permission bits, has security.capability) after each case
    let observe = |root: &Path| -> Vec<(String, i32, u32, bool)> {
        cases
            .iter()
            .map(|(dir, prefix, script, _, _)| {
                let d = root.join(dir);
                let mut cmd = Command::new(prefix.first().copied().unwrap_or("sh"));
                if !prefix.is_empty() {
                    cmd.args(&prefix[1..]).arg("sh");
                }
                let code = cmd
                    .arg("-c")
                    .arg(script)
                    .current_dir(&d)
                    .stdin(std::process::Stdio::null())
                    .status()
                    .expect("spawn the case's shell")
                    .code()
                    .unwrap_or(-1);
                let f = d.join("f");
                let mode = std::fs::metadata(&f)
                    .map(|m| m.mode() & 0o7777)
                    .unwrap_or(0);
                let c = cpath(&f);
                // SAFETY: valid path and name; a zero size only asks for the length.
                let n = unsafe {
                    libc::getxattr(
                        c.as_ptr(),
                        c"security.capability".as_ptr(),
                        std::ptr::null_mut(),
                        0,
                    )
                };
                (dir.clone(), code, mode, n > 0)
            })
            .collect()
    };

    let (_t, nbase) = tempdir();
    std::fs::set_permissions(&nbase, std::fs::Permissions::from_mode(0o755)).unwrap();
    let native_root = nbase.join("n");
    std::fs::create_dir(&native_root).unwrap();
    prepare(&native_root);
    let native = observe(&native_root);
    // The native run must show every rule the mount has to follow, or the comparison proves
    // little.
    let nat = |dir: &str| native.iter().find(|c| c.0 == dir).unwrap();
    assert_eq!(
        nat("nobody-append-6775-65534").2,
        0o775,
        "native: suid+sgid go"
    );
    assert_eq!(
        nat("nobody-append-2664-65534").2,
        0o2664,
        "native: in-group sgid stays"
    );
    assert_eq!(
        nat("nobody-append-2664-0").2,
        0o664,
        "native: out-of-group sgid goes"
    );
    assert_eq!(
        nat("root-append-6775-65534").2,
        0o6775,
        "native: root keeps the bits"
    );
    assert_eq!(
        nat("root-without-fsetid-truncate-4755-65534").2,
        0o755,
        "native: root without CAP_FSETID loses suid"
    );
    assert!(!nat("root-append-4755-65534").3, "native: capability goes");

    for args in [&["--io", "passthrough"][..], &["--io", "daemon"][..]] {
        let m = Mount::start(common::Mode::Mirror, args, |src| prepare(src));
        std::fs::set_permissions(&m.base, std::fs::Permissions::from_mode(0o755)).unwrap();
        let got = observe(&m.root);
        let mut problems = Vec::new();
        for (n, g) in native.iter().zip(&got) {
            if n != g {
                problems.push(format!(
                    "{}: native (exit, mode, capability) {:?}, through the mount {:?}",
                    n.0,
                    (n.1, format!("{:o}", n.2), n.3),
                    (g.1, format!("{:o}", g.2), g.3)
                ));
            }
            // what the mount shows is what the backing file holds (no stale cached mode)
            if let Ok(st) = m.backing_lstat(&format!("{}/f", g.0))
                && st.st_mode & 0o7777 != g.2
            {
                problems.push(format!(
                    "{}: mode {:o} through the mount but {:o} in SOURCE",
                    g.0,
                    g.2,
                    st.st_mode & 0o7777
                ));
            }
        }
        assert!(
            problems.is_empty(),
            "{args:?}:\n{}\n--- daemon output ---\n{}",
            problems.join("\n"),
            m.log()
        );
    }
}

/// statfs through the mount describes the backing file system.
#[test]
fn statfs_matches_backing() {
    let m = Mount::mirror();
    let sv = |p: &Path| {
        let c = cpath(p);
        // SAFETY: zeroed statvfs is a valid out-buffer.
        let mut s: libc::statvfs = unsafe { std::mem::zeroed() };
        // SAFETY: valid path and buffer.
        let r = unsafe { libc::statvfs(c.as_ptr(), &mut s) };
        assert_eq!(r, 0, "statvfs {}: {}", p.display(), errno_name(errno()));
        s
    };
    let n = sv(&m.source);
    let f = sv(&m.root);
    let close = |a: u64, b: u64| (a as f64 - b as f64).abs() <= (a.max(b) as f64) * 0.01 + 16.0;
    let mut problems = Vec::new();
    if n.f_bsize != f.f_bsize {
        problems.push(format!("f_bsize native {} mount {}", n.f_bsize, f.f_bsize));
    }
    if n.f_namemax != f.f_namemax {
        problems.push(format!(
            "f_namemax native {} mount {}",
            n.f_namemax, f.f_namemax
        ));
    }
    let bytes_n = n.f_blocks * n.f_frsize;
    let bytes_f = f.f_blocks * f.f_frsize;
    if !close(bytes_n, bytes_f) {
        problems.push(format!("total bytes native {bytes_n} mount {bytes_f}"));
    }
    let avail_n = n.f_bavail * n.f_frsize;
    let avail_f = f.f_bavail * f.f_frsize;
    if !close(avail_n, avail_f) {
        problems.push(format!("available bytes native {avail_n} mount {avail_f}"));
    }
    if !close(n.f_files, f.f_files) {
        problems.push(format!("f_files native {} mount {}", n.f_files, f.f_files));
    }
    assert!(
        problems.is_empty(),
        "statvfs differs: {}",
        problems.join("; ")
    );
}

/// POSIX (process-owned) fcntl locks and flock between two processes.
#[test]
fn locks_between_processes() {
    #[derive(Debug, PartialEq)]
    struct Seen {
        getlk_type: i16,
        getlk_is_child: bool,
        getlk_range: (i64, i64),
        setlk_conflict: i32,
        setlk_other_range: i32,
        flock_conflict: i32,
        after_exit_setlk: i32,
        after_exit_flock: i32,
    }
    fn run(dir: &Path) -> Seen {
        let path = dir.join("locked");
        std::fs::write(&path, pattern(4096, 1)).unwrap();
        let c = cpath(&path);
        let mut to_child = [0; 2];
        let mut to_parent = [0; 2];
        // SAFETY: the child only makes async-signal-safe system calls and _exits.
        unsafe {
            assert_eq!(libc::pipe2(to_child.as_mut_ptr(), libc::O_CLOEXEC), 0);
            assert_eq!(libc::pipe2(to_parent.as_mut_ptr(), libc::O_CLOEXEC), 0);
            let pid = libc::fork();
            assert!(pid >= 0);
            if pid == 0 {
                // the child must not hold the write end it waits on
                libc::close(to_child[1]);
                libc::close(to_parent[0]);
                let fd = libc::open(c.as_ptr(), libc::O_RDWR);
                let mut fl: libc::flock = std::mem::zeroed();
                fl.l_type = libc::F_WRLCK as i16;
                fl.l_whence = libc::SEEK_SET as i16;
                fl.l_start = 0;
                fl.l_len = 100;
                let ok1 = fd >= 0 && libc::fcntl(fd, libc::F_SETLK, &fl) == 0;
                let fd2 = libc::open(c.as_ptr(), libc::O_RDONLY);
                let ok2 = fd2 >= 0 && libc::flock(fd2, libc::LOCK_EX | libc::LOCK_NB) == 0;
                let msg = [if ok1 && ok2 { b'y' } else { b'n' }];
                libc::write(to_parent[1], msg.as_ptr().cast(), 1);
                let mut b = [0u8; 1];
                libc::read(to_child[0], b.as_mut_ptr().cast(), 1);
                libc::_exit(0);
            }
            libc::close(to_child[0]);
            libc::close(to_parent[1]);
            let mut b = [0u8; 1];
            assert_eq!(libc::read(to_parent[0], b.as_mut_ptr().cast(), 1), 1);
            let child_ok = b[0] == b'y';
            let fd = libc::open(c.as_ptr(), libc::O_RDWR | libc::O_CLOEXEC);
            assert!(fd >= 0);
            let mut fl: libc::flock = std::mem::zeroed();
            fl.l_type = libc::F_WRLCK as i16;
            fl.l_whence = libc::SEEK_SET as i16;
            fl.l_start = 50;
            fl.l_len = 10;
            libc::fcntl(fd, libc::F_GETLK, &mut fl);
            let got = (fl.l_type, fl.l_pid == pid, (fl.l_start, fl.l_len));
            let try_lock = |start: i64, typ: c_int| {
                let mut fl: libc::flock = std::mem::zeroed();
                fl.l_type = typ as i16;
                fl.l_whence = libc::SEEK_SET as i16;
                fl.l_start = start;
                fl.l_len = 10;
                if libc::fcntl(fd, libc::F_SETLK, &fl) == 0 {
                    0
                } else {
                    errno()
                }
            };
            let setlk_conflict = try_lock(0, libc::F_RDLCK);
            let setlk_other_range = try_lock(200, libc::F_WRLCK);
            let flock_conflict = if libc::flock(fd, libc::LOCK_SH | libc::LOCK_NB) == 0 {
                0
            } else {
                errno()
            };
            // let the child exit; its locks go with it
            libc::close(to_child[1]);
            let mut status = 0;
            libc::waitpid(pid, &mut status, 0);
            libc::close(to_parent[0]);
            let after_exit_setlk = try_lock(0, libc::F_WRLCK);
            let after_exit_flock = if libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) == 0 {
                0
            } else {
                errno()
            };
            libc::close(fd);
            assert!(
                child_ok,
                "child could not take its locks in {}",
                dir.display()
            );
            Seen {
                getlk_type: got.0,
                getlk_is_child: got.1,
                getlk_range: got.2,
                setlk_conflict,
                setlk_other_range,
                flock_conflict,
                after_exit_setlk,
                after_exit_flock,
            }
        }
    }
    let (_t, native) = tempdir();
    let nat = run(&native);
    assert_eq!(
        nat,
        Seen {
            getlk_type: libc::F_WRLCK as i16,
            getlk_is_child: true,
            getlk_range: (0, 100),
            setlk_conflict: libc::EAGAIN,
            setlk_other_range: 0,
            flock_conflict: libc::EWOULDBLOCK,
            after_exit_setlk: 0,
            after_exit_flock: 0,
        },
        "native sanity"
    );
    for args in [&["--io", "passthrough"][..], &["--io", "daemon"][..]] {
        let m = Mount::mirror_with(args);
        let got = run(&m.root);
        assert_eq!(
            got, nat,
            "locks through the mount {args:?} differ from native"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// random operation sequences

const NAMES: &[&str] = &["a", "b", "d", "d/a", "d/b", "e", "e/d", "e/d/a"];
const DIRS: &[&str] = &["", "d", "e", "e/d"];

fn arb_op() -> impl Strategy<Value = Op> {
    let name = || prop::sample::select(NAMES).prop_map(|n| n.to_string());
    let data = || prop::collection::vec(any::<u8>(), 0..24);
    let mode = prop::sample::select(vec![0o644u32, 0o600, 0o755, 0o000, 0o4755, 0o1777]);
    prop_oneof![
        3 => (name(), data()).prop_map(|(path, data)| Op::WriteFile { path, data: Data(data) }),
        2 => (name(), data()).prop_map(|(path, data)| Op::AppendFile { path, data: Data(data) }),
        1 => (name(), 0i64..40).prop_map(|(path, len)| Op::Truncate { path, len }),
        2 => name().prop_map(|path| Op::Mkdir { path, mode: 0o755 }),
        1 => name().prop_map(|path| Op::Rmdir { path }),
        2 => name().prop_map(|path| Op::Unlink { path }),
        2 => (name(), name(), prop::sample::select(vec![
            0u32, libc::RENAME_NOREPLACE, libc::RENAME_EXCHANGE,
        ]))
            .prop_map(|(from, to, flags)| Op::Rename { from, to, flags }),
        1 => (name(), name()).prop_map(|(from, to)| Op::Link { from, to }),
        1 => (name(), name()).prop_map(|(target, path)| Op::Symlink { target, path }),
        1 => (name(), mode).prop_map(|(path, mode)| Op::Chmod { path, mode }),
        2 => name().prop_map(|path| Op::ReadFile { path }),
        2 => name().prop_map(|path| Op::Lstat { path }),
        1 => prop::sample::select(DIRS).prop_map(|p| Op::Readdir { path: p.to_string() }),
    ]
}

/// (kind, perm, size, nlink, content or link target) of every entry below `root`.
fn shape(root: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let dir = root.join(&rel);
        let Ok(rd) = std::fs::read_dir(&dir) else {
            out.insert(rel.display().to_string(), "<unreadable dir>".into());
            continue;
        };
        for e in rd {
            let e = e.unwrap();
            let r = rel.join(e.file_name());
            let md = std::fs::symlink_metadata(e.path()).unwrap();
            let ft = md.file_type();
            let desc = if ft.is_dir() {
                stack.push(r.clone());
                format!("dir {:o} nlink={}", md.mode(), md.nlink())
            } else if ft.is_symlink() {
                format!("link -> {:?}", std::fs::read_link(e.path()).unwrap())
            } else {
                format!(
                    "file {:o} nlink={} {:?}",
                    md.mode(),
                    md.nlink(),
                    String::from_utf8_lossy(&std::fs::read(e.path()).unwrap())
                )
            };
            out.insert(r.display().to_string(), desc);
        }
    }
    out
}

#[test]
fn random_sequences_match_native() {
    let m = Mount::mirror();
    let (_t, native) = tempdir();
    let counter = std::cell::Cell::new(0u32);
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        max_shrink_time: 30_000,
        ..ProptestConfig::default()
    });
    let result = runner.run(&prop::collection::vec(arb_op(), 1..30), |ops| {
        let n = counter.get();
        counter.set(n + 1);
        let case = format!("case{n}");
        let nroot = native.join(&case);
        let mroot = m.path(&case);
        std::fs::create_dir(&nroot).unwrap();
        std::fs::create_dir(&mroot).unwrap();
        let a = Runner::new(&nroot).run_all(&ops);
        let b = Runner::new(&mroot).run_all(&ops);
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            prop_assert_eq!(
                x,
                y,
                "step {} {:?}: native {} vs mount {}",
                i,
                &ops[i],
                show(x),
                show(y)
            );
        }
        // make every directory removable again before looking at the final tree
        let sa = shape(&nroot);
        let sb = shape(&mroot);
        prop_assert_eq!(sa, sb, "final trees differ");
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}\n--- daemon output ---\n{}", m.log());
    }
}

/// Readers (page cache) and writers (passthrough) of the same small files at once: the daemon
/// must keep every inode's opens in one mode, or the kernel fails the open with EIO. Each file
/// holds one repeated byte, so a reader also sees whether a read mixed two writes' bytes badly
/// (any byte but the ones written).
#[test]
fn concurrent_readers_and_writers_of_small_files() {
    use std::io::{Read, Write};
    let m = Mount::mirror();
    let files: Vec<std::path::PathBuf> = (0..4).map(|i| m.path(format!("f{i}"))).collect();
    for f in &files {
        std::fs::write(f, vec![b'a'; 4096]).expect("seed file");
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(3);
    let mut threads = Vec::new();
    for t in 0..6 {
        let files = files.clone();
        threads.push(std::thread::spawn(move || -> Result<u64, String> {
            let mut n = 0u64;
            while std::time::Instant::now() < deadline {
                for (i, f) in files.iter().enumerate() {
                    if (t + i) % 3 == 0 {
                        let byte = b'a' + ((n % 26) as u8);
                        let mut w = std::fs::OpenOptions::new()
                            .write(true)
                            .open(f)
                            .map_err(|e| format!("open {f:?} for writing: {e}"))?;
                        w.write_all(&vec![byte; 4096])
                            .map_err(|e| format!("write {f:?}: {e}"))?;
                    } else {
                        let mut r = std::fs::File::open(f)
                            .map_err(|e| format!("open {f:?} for reading: {e}"))?;
                        let mut buf = Vec::new();
                        r.read_to_end(&mut buf)
                            .map_err(|e| format!("read {f:?}: {e}"))?;
                        if buf.len() != 4096 || buf.iter().any(|b| !b.is_ascii_lowercase()) {
                            return Err(format!(
                                "{f:?}: read {} bytes, not 4096 letters",
                                buf.len()
                            ));
                        }
                    }
                    n += 1;
                }
            }
            Ok(n)
        }));
    }
    let mut total = 0;
    for t in threads {
        match t.join() {
            Ok(Ok(n)) => total += n,
            Ok(Err(e)) => panic!("{e}\n--- daemon output ---\n{}", m.log()),
            Err(_) => panic!("a worker panicked"),
        }
    }
    println!("concurrent small-file opens: {total} operations");
    assert!(total > 100, "only {total} operations in 3 s");
}

/// Runs `exe`, which this process has just written. Another test thread that forks between
/// that write's open and its close gives the child a copy of the descriptor (close-on-exec
/// closes it only at the child's exec), and for that moment exec of `exe` fails with ETXTBSY,
/// natively as through the mount (seen once in CI). A few tries outlast it.
fn spawn_just_written(exe: &Path, arg: &str) -> std::process::Child {
    let mut tries = 0;
    loop {
        match Command::new(exe).arg(arg).spawn() {
            Ok(child) => return child,
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 50 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("run {}: {e}", exe.display()),
        }
    }
}

/// open(O_RDONLY | O_TRUNC) of a running executable fails with ETXTBSY and leaves the file whole,
/// as natively. With FUSE_ATOMIC_O_TRUNC the daemon truncated it in OPEN, before the kernel's
/// write-access check: the open still failed, but the program lost its pages, and when it died
/// of that before the check, the open even succeeded (pjdfstest open::etxtbsy, now and then).
#[test]
fn a_running_executable_is_not_truncated() {
    let sleep = ["/usr/bin/sleep", "/bin/sleep"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("no sleep binary"));
    let size = std::fs::metadata(sleep).unwrap().len();
    let (_native, native_dir) = tempdir();
    let passthrough = Mount::mirror();
    let daemon_io = Mount::mirror_with(&["--io", "daemon"]);
    for (what, exe) in [
        ("native", native_dir.join("exe")),
        ("mount", passthrough.path("exe")),
        ("mount --io daemon", daemon_io.path("exe")),
    ] {
        std::fs::copy(sleep, &exe).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut child = spawn_just_written(&exe, "30");
        let c = cpath(&exe);
        // SAFETY: valid path; the descriptor, if any, is closed at once.
        let fd = unsafe { libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_TRUNC) };
        let err = errno();
        if fd >= 0 {
            // SAFETY: the descriptor just opened.
            unsafe { libc::close(fd) };
        }
        let running = child.try_wait().unwrap().is_none();
        let len = std::fs::metadata(&exe).unwrap().len();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(
            (fd >= 0, errno_name(err), len, running),
            (false, errno_name(libc::ETXTBSY), size, true),
            "{what}: open(O_RDONLY|O_TRUNC) of a running executable"
        );
    }
}

/// `statx` of `path` (not following a last symlink), or of `fd` when `path` is empty, asking
/// for the birth time: the stx_mask the kernel answered, and the time.
fn statx_btime(fd: c_int, path: &Path) -> (u32, (i64, u32)) {
    let c = cpath(path);
    let mut stx = std::mem::MaybeUninit::<libc::statx>::zeroed();
    let flags = libc::AT_SYMLINK_NOFOLLOW | if fd >= 0 { libc::AT_EMPTY_PATH } else { 0 };
    // SAFETY: valid path and buffer; a zeroed statx is a valid value, filled in on success.
    let r = unsafe {
        libc::statx(
            if fd >= 0 { fd } else { libc::AT_FDCWD },
            if fd >= 0 { c"".as_ptr() } else { c.as_ptr() },
            flags,
            libc::STATX_BASIC_STATS | libc::STATX_BTIME,
            stx.as_mut_ptr(),
        )
    };
    assert_eq!(r, 0, "statx {}: {}", path.display(), errno_name(errno()));
    // SAFETY: zeroed, and filled in by the successful call.
    let stx = unsafe { stx.assume_init() };
    (stx.stx_mask, (stx.stx_btime.tv_sec, stx.stx_btime.tv_nsec))
}

/// With `--birth-times`, `stat FILE` shows when the file was made (statx's birth time),
/// through the mount as natively: the kernel asks the daemon for it with FUSE_STATX, which
/// fuser did not parse. Files made before the mount and through it, a directory, a symlink and
/// a fifo, by path and by open descriptor, in both I/O modes. Without it, the kernel is told
/// once that there is none, and gives none.
#[test]
fn birth_times_are_the_backing_files() {
    let m = Mount::start(Mode::Mirror, &[], |src| {
        std::fs::write(src.join("f"), "a file\n").unwrap();
    });
    for _ in 0..2 {
        let (mask, _) = statx_btime(-1, &m.path("f"));
        assert_eq!(mask & libc::STATX_BTIME, 0, "no birth time by default");
        assert_ne!(mask & libc::STATX_SIZE, 0, "the rest is there");
    }
    drop(m);
    for args in [
        &["--birth-times"][..],
        &["--birth-times", "--io", "daemon"][..],
    ] {
        let m = Mount::start(Mode::Mirror, args, |src| {
            std::fs::write(src.join("before"), "made before the mount\n").unwrap();
            std::fs::create_dir(src.join("dir")).unwrap();
            std::os::unix::fs::symlink("before", src.join("link")).unwrap();
            let fifo = cpath(&src.join("fifo"));
            // SAFETY: a valid path.
            assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
            // A minor number over 255, which `dev_t` splits in two.
            let dev = cpath(&src.join("dev"));
            // SAFETY: a valid path.
            let made = unsafe {
                libc::mknod(dev.as_ptr(), libc::S_IFCHR | 0o600, libc::makedev(136, 300))
            };
            assert_eq!(made, 0, "mknod: {}", errno_name(errno()));
        });
        std::fs::write(m.path("through"), "made through the mount\n").unwrap();
        let (mask, native) = statx_btime(-1, &m.backing("before"));
        assert_ne!(
            mask & libc::STATX_BTIME,
            0,
            "the backing file system keeps no birth times: this test needs one that does"
        );
        assert!(native.0 > 0, "{native:?}");
        // The kernel keeps a device's number from the LOOKUP that made its inode and ignores
        // the one in a STATX reply, so this checks the device as a whole, not that field.
        assert_eq!(
            std::fs::symlink_metadata(m.path("dev")).unwrap().rdev(),
            std::fs::symlink_metadata(m.backing("dev")).unwrap().rdev(),
            "a device's number ({args:?})"
        );
        for rel in ["before", "through", "dir", "link", "fifo", "dev"] {
            let (_, backing) = statx_btime(-1, &m.backing(rel));
            let (mask, mounted) = statx_btime(-1, &m.path(rel));
            assert_eq!(
                (mask & libc::STATX_BTIME, mounted),
                (libc::STATX_BTIME, backing),
                "{rel} ({args:?}): the birth time through the mount"
            );
        }
        let file = std::fs::File::open(m.path("through")).unwrap();
        let (mask, by_fd) = statx_btime(file.as_raw_fd(), Path::new(""));
        assert_eq!(
            (mask & libc::STATX_BTIME, by_fd),
            (libc::STATX_BTIME, statx_btime(-1, &m.backing("through")).1),
            "fstat of an open file ({args:?})"
        );
        let status = Command::new(common::bin())
            .arg("status")
            .arg("-C")
            .arg(&m.root)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&status.stdout);
        assert!(
            text.lines()
                .any(|l| l.starts_with("io:") && l.contains("birth times given")),
            "worldfs status says so: {text}"
        );
        // Asked again, the kernel has it from its cache; the answer is the same.
        assert_eq!(statx_btime(-1, &m.path("before")).1, native, "{}", m.log());
    }
}
