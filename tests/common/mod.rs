//! Shared harness for the mount integration tests.
//!
//! [`Mount`] starts `worldfs mount` on fresh temporary directories, waits for the mount to show
//! in `/proc/self/mountinfo` and tears everything down on drop (also while a test panics):
//! SIGTERM, up to 5 s for a clean exit, then SIGKILL and a lazy unmount, so nothing stays
//! mounted. Every guard has its own temporary directories, so tests that mount run in parallel.
//!
//! The tests never skip: a missing `/dev/fuse` or a mount that never appears is a loud failure
//! that prints the daemon's output.
//!
//! `WORLDFS_TEST_BIN` may point the tests at another binary (to check the harness itself); by
//! default they run the crate's own `worldfs`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The file system type every worldfs mount shows in mountinfo.
pub const FSTYPE: &str = "fuse.worldfs";
/// How long a mount may take to appear.
pub const MOUNT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the daemon gets to exit after SIGTERM before it is killed.
pub const EXIT_TIMEOUT: Duration = Duration::from_secs(5);
/// A mount guard older than this kills its daemon, so an operation hung in the file system
/// fails (ENOTCONN) instead of hanging the whole test run.
pub const WATCHDOG: Duration = Duration::from_secs(90);

/// The binary under test.
pub fn bin() -> PathBuf {
    match std::env::var_os("WORLDFS_TEST_BIN") {
        Some(p) => PathBuf::from(p),
        None => PathBuf::from(env!("CARGO_BIN_EXE_worldfs")),
    }
}

/// Panics (never skips) when FUSE is not available: these tests are meaningless without it.
pub fn require_fuse() {
    if !Path::new("/dev/fuse").exists() {
        panic!(
            "/dev/fuse is missing: the mount tests need FUSE (load the fuse module or run in a \
             container with /dev/fuse); refusing to skip silently"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// mountinfo

/// One line of `/proc/self/mountinfo`.
#[derive(Debug, Clone)]
pub struct MountEntry {
    pub mount_id: u64,
    /// `major:minor` of the mounted file system.
    pub dev: String,
    pub mount_point: PathBuf,
    pub fstype: String,
    pub source: String,
}

fn unescape_mountinfo(s: &str) -> PathBuf {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    PathBuf::from(OsStr::from_bytes(&out))
}

/// Every mount visible to this process.
pub fn mounts() -> Vec<MountEntry> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").expect("read /proc/self/mountinfo");
    text.lines()
        .filter_map(|line| {
            let (pre, post) = line.split_once(" - ")?;
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            Some(MountEntry {
                mount_id: pre.first()?.parse().ok()?,
                dev: pre.get(2)?.to_string(),
                mount_point: unescape_mountinfo(pre.get(4)?),
                fstype: post.first()?.to_string(),
                source: post.get(1).unwrap_or(&"").to_string(),
            })
        })
        .collect()
}

/// Mounts (of any type) whose mount point is exactly `path`.
pub fn mounts_at(path: &Path) -> Vec<MountEntry> {
    mounts()
        .into_iter()
        .filter(|m| m.mount_point == path)
        .collect()
}

/// How many worldfs mounts sit at `path`.
pub fn worldfs_mounts_at(path: &Path) -> usize {
    mounts_at(path)
        .iter()
        .filter(|m| m.fstype == FSTYPE)
        .count()
}

/// Every worldfs mount at or below `dir`.
pub fn worldfs_mounts_under(dir: &Path) -> Vec<MountEntry> {
    mounts()
        .into_iter()
        .filter(|m| m.fstype == FSTYPE && m.mount_point.starts_with(dir))
        .collect()
}

/// Lazily unmounts every worldfs mount at `path` (used for cleanup only).
pub fn force_unmount(path: &Path) {
    let c = cpath(path);
    for _ in 0..8 {
        if worldfs_mounts_at(path) == 0 {
            return;
        }
        // SAFETY: c is a valid NUL-terminated path.
        let r = unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
        if r != 0 {
            let _ = Command::new("umount").arg("-l").arg(path).status();
        }
    }
}

/// Aborts the FUSE connection `dev` (`major:minor` from mountinfo): every request waiting on
/// it fails with ENOTCONN. The last resort when a daemon cannot die (a thread stuck in the
/// kernel) and the mount's users hang. Mounts fusectl at its standard place if needed.
pub fn abort_fuse_connection(dev: &str) -> bool {
    let Some(minor) = dev.split(':').nth(1) else {
        return false;
    };
    let dir = Path::new("/sys/fs/fuse/connections");
    if !dir.join(minor).exists() {
        let _ = Command::new("mount")
            .args(["-t", "fusectl", "fusectl"])
            .arg(dir)
            .status();
    }
    let ok = std::fs::write(dir.join(minor).join("abort"), "1").is_ok();
    eprintln!("worldfs test harness: aborted FUSE connection {dev}: {ok}");
    ok
}

/// One line per thread of `pid`: id, name, state and where it waits in the kernel.
pub fn thread_states(pid: i32) -> String {
    let mut out = String::new();
    let Ok(rd) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return format!("(no /proc/{pid}/task)");
    };
    for t in rd.flatten() {
        let p = t.path();
        let read = |f: &str| {
            std::fs::read_to_string(p.join(f))
                .unwrap_or_default()
                .trim()
                .to_string()
        };
        let stat = read("stat");
        let state = stat
            .rsplit_once(") ")
            .map(|(_, r)| r.split(' ').next().unwrap_or("?").to_string())
            .unwrap_or_default();
        out += &format!(
            "  tid {} {:<16} state {state} wchan {}\n",
            t.file_name().to_string_lossy(),
            read("comm"),
            read("wchan")
        );
        if state == "D" {
            for l in read("stack").lines().take(6) {
                out += &format!("      {l}\n");
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// small utilities

/// A path as a C string.
pub fn cpath(p: &Path) -> CString {
    CString::new(p.as_os_str().as_bytes()).expect("path without NUL")
}

/// The calling thread's errno.
pub fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// A readable name for an errno value.
pub fn errno_name(e: i32) -> String {
    let name = match e {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::EXDEV => "EXDEV",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::EMFILE => "EMFILE",
        libc::EFBIG => "EFBIG",
        libc::ENOSPC => "ENOSPC",
        libc::ESPIPE => "ESPIPE",
        libc::EROFS => "EROFS",
        libc::EMLINK => "EMLINK",
        libc::ERANGE => "ERANGE",
        libc::ENAMETOOLONG => "ENAMETOOLONG",
        libc::ENOSYS => "ENOSYS",
        libc::ENOTEMPTY => "ENOTEMPTY",
        libc::ELOOP => "ELOOP",
        libc::ENODATA => "ENODATA",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENOTCONN => "ENOTCONN",
        libc::ETXTBSY => "ETXTBSY",
        libc::ENOTTY => "ENOTTY",
        libc::EINTR => "EINTR",
        libc::ESTALE => "ESTALE",
        _ => "",
    };
    if name.is_empty() {
        format!("errno {e}")
    } else {
        format!("{name}({e})")
    }
}

/// Polls `cond` (every 2 ms) until it holds; returns how long that took, or `None` after
/// `timeout`.
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    loop {
        if cond() {
            return Some(start.elapsed());
        }
        if start.elapsed() >= timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Waits for a child with a deadline; `None` if it is still running.
pub fn wait_child(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().expect("try_wait") {
            return Some(st);
        }
        if start.elapsed() >= timeout {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Runs a command to completion with a deadline; a command that hangs is killed and fails the
/// test.
pub fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Output {
    let dir = tempfile::tempdir().expect("tempdir");
    let out_path = dir.path().join("stdout");
    let err_path = dir.path().join("stderr");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(File::create(&out_path).expect("stdout file"))
        .stderr(File::create(&err_path).expect("stderr file"))
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let status = match wait_child(&mut child, timeout) {
        Some(st) => st,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} still running after {timeout:?}; stderr:\n{}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
    };
    Output {
        status,
        stdout: std::fs::read(&out_path).unwrap_or_default(),
        stderr: std::fs::read(&err_path).unwrap_or_default(),
    }
}

/// `worldfs ARGS...`, run to completion (30 s cap).
pub fn worldfs(args: &[&OsStr]) -> Output {
    run_with_timeout(Command::new(bin()).args(args), Duration::from_secs(30))
}

/// A temporary directory that, when dropped, first lazily unmounts every worldfs mount left
/// below it (for tests where a mount is not expected to happen but might).
pub struct Scratch {
    _tmp: tempfile::TempDir,
    pub path: PathBuf,
}

impl Scratch {
    pub fn new() -> Scratch {
        let (t, p) = tempdir();
        Scratch { _tmp: t, path: p }
    }

    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.path.join(rel)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        unmount_all_under(&self.path);
    }
}

/// Lazily unmounts every worldfs mount at or below `dir`, deepest first.
pub fn unmount_all_under(dir: &Path) {
    let mut ms = worldfs_mounts_under(dir);
    ms.sort_by_key(|m| std::cmp::Reverse(m.mount_point.components().count()));
    for m in ms {
        eprintln!(
            "cleanup: lazy unmount of leftover {}",
            m.mount_point.display()
        );
        force_unmount(&m.mount_point);
    }
}

/// A fresh temporary directory under /tmp with a canonical path.
pub fn tempdir() -> (tempfile::TempDir, PathBuf) {
    let t = tempfile::Builder::new()
        .prefix("worldfs-test-")
        .tempdir()
        .expect("create tempdir");
    let p = t.path().canonicalize().expect("canonicalize tempdir");
    (t, p)
}

/// A stable summary of a tree: for every entry below `root` (not following symlinks) its kind,
/// permissions, size, mtime, owner and a hash of its content or link target. Paths for which
/// `skip` returns true are left out.
pub fn tree_snapshot(root: &Path, skip: &dyn Fn(&Path) -> bool) -> BTreeMap<PathBuf, String> {
    fn walk(
        root: &Path,
        dir: &Path,
        skip: &dyn Fn(&Path) -> bool,
        out: &mut BTreeMap<PathBuf, String>,
    ) {
        let mut entries: Vec<_> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("read_dir {}: {e}", dir.display()))
            .map(|e| e.expect("dir entry").path())
            .collect();
        entries.sort();
        for p in entries {
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            if skip(&rel) {
                continue;
            }
            let md = std::fs::symlink_metadata(&p).expect("lstat");
            let ft = md.file_type();
            let mut h = DefaultHasher::new();
            let kind = if ft.is_dir() {
                "dir"
            } else if ft.is_symlink() {
                std::fs::read_link(&p).unwrap().hash(&mut h);
                "symlink"
            } else if ft.is_file() {
                let mut buf = Vec::new();
                File::open(&p).unwrap().read_to_end(&mut buf).unwrap();
                buf.hash(&mut h);
                "file"
            } else {
                "other"
            };
            let size = if ft.is_dir() { 0 } else { md.size() };
            out.insert(
                rel,
                format!(
                    "{kind} mode={:o} size={size} mtime={}.{:09} uid={} gid={} nlink={} hash={:016x}",
                    md.mode(),
                    md.mtime(),
                    md.mtime_nsec(),
                    md.uid(),
                    md.gid(),
                    md.nlink(),
                    h.finish()
                ),
            );
            if ft.is_dir() {
                walk(root, &p, skip, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, skip, &mut out);
    out
}

/// Lists the differences between two snapshots (empty when equal).
pub fn snapshot_diff(
    before: &BTreeMap<PathBuf, String>,
    after: &BTreeMap<PathBuf, String>,
) -> Vec<String> {
    let mut d = Vec::new();
    for (k, v) in before {
        match after.get(k) {
            None => d.push(format!("removed: {}  ({v})", k.display())),
            Some(w) if w != v => {
                d.push(format!("changed: {}\n   was {v}\n   now {w}", k.display()))
            }
            _ => {}
        }
    }
    for (k, v) in after {
        if !before.contains_key(k) {
            d.push(format!("added: {}  ({v})", k.display()));
        }
    }
    d
}

// ---------------------------------------------------------------------------------------------
// the mount guard

/// Locks the child, ignoring poisoning (a panic elsewhere must not stop the cleanup).
fn lock(c: &Mutex<Child>) -> std::sync::MutexGuard<'_, Child> {
    c.lock().unwrap_or_else(|e| e.into_inner())
}

/// Which way to mount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `worldfs mount SOURCE MOUNTPOINT`: SOURCE stays reachable at its own path.
    Mirror,
    /// `worldfs mount SOURCE`: the mount covers SOURCE.
    InPlace,
}

/// A file system mounted for a test (a tmpfs, an overlay); dropping it unmounts it (lazily: a
/// mount over it may still hold names in it).
pub struct TestFs(CString);

impl TestFs {
    /// A tmpfs of 256 MiB at `at`.
    pub fn tmpfs(at: &Path) -> TestFs {
        Self::mount(at, c"tmpfs", c"size=256m")
    }

    /// An overlay at `at` whose layers are made in `layers` (`lower`, `upper`, `work`), as a
    /// container's root is. Returns it with the lower layer's path, to fill before use (or
    /// not: files made at `at` go to the upper layer).
    pub fn overlay(at: &Path, layers: &Path) -> (TestFs, PathBuf) {
        let [lower, upper, work] = ["lower", "upper", "work"].map(|l| layers.join(l));
        for d in [&lower, &upper, &work] {
            std::fs::create_dir_all(d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        }
        let opts = format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.display(),
            upper.display(),
            work.display()
        );
        let opts = CString::new(opts).unwrap_or_else(|e| panic!("overlay options: {e}"));
        (Self::mount(at, c"overlay", &opts), lower)
    }

    fn mount(at: &Path, kind: &std::ffi::CStr, opts: &std::ffi::CStr) -> TestFs {
        let c = cpath(at);
        // SAFETY: valid NUL-terminated strings.
        let r = unsafe {
            libc::mount(
                kind.as_ptr(),
                c.as_ptr(),
                kind.as_ptr(),
                0,
                opts.as_ptr().cast(),
            )
        };
        assert_eq!(
            r,
            0,
            "mount {kind:?} on {}: {}",
            at.display(),
            errno_name(errno())
        );
        TestFs(c)
    }
}

impl Drop for TestFs {
    fn drop(&mut self) {
        // SAFETY: a valid path string.
        unsafe { libc::umount2(self.0.as_ptr(), libc::MNT_DETACH) };
    }
}

/// The file system SOURCE is on.
#[derive(Clone, Copy)]
enum SourceFs {
    /// The temporary directory's, as it is.
    Disk,
    /// A tmpfs of its own.
    Tmpfs,
    /// An overlay, its layers beside SOURCE.
    Overlay,
}

/// What a mount is made on: [`Mount::start_with`] makes it, [`Mount::restart`] hands it on.
struct Dirs {
    tmp: tempfile::TempDir,
    source_tmpfs: Option<TestFs>,
    base: PathBuf,
    source: PathBuf,
    root: PathBuf,
    scratch: PathBuf,
    mode: Mode,
    args: Vec<String>,
    /// Variables set for the daemon only (a debug knob), kept across restarts.
    env: Vec<(String, String)>,
}

/// A running `worldfs mount` on temporary directories. Dropping it unmounts.
pub struct Mount {
    /// File systems a test mounted below SOURCE ([`Mount::keep_mounted`]): unmounted after the
    /// daemon is gone, before the tmpfs below and the directories.
    _below: Vec<TestFs>,
    /// Before `_tmp`: fields drop in order, after the daemon is gone, so the tmpfs is off
    /// SOURCE before the directories are removed.
    _source_tmpfs: Option<TestFs>,
    /// `None` once [`Mount::restart`] handed the directories to the next mount.
    _tmp: Option<tempfile::TempDir>,
    /// The temporary directory holding `src`, `mnt` and `scratch`.
    pub base: PathBuf,
    /// The backing directory (for in-place mounts it is covered by the mount; use
    /// [`Mount::backing_fd`] to reach beneath).
    pub source: PathBuf,
    /// Where the file system is reached (equal to `source` for in-place mounts).
    pub root: PathBuf,
    /// A directory on the same file system, outside SOURCE and the mount.
    pub scratch: PathBuf,
    pub mode: Mode,
    pub args: Vec<String>,
    env: Vec<(String, String)>,
    /// An O_PATH descriptor of SOURCE opened before mounting: reaches the backing tree even
    /// when an in-place mount covers it.
    backing: OwnedFd,
    child: Arc<Mutex<Child>>,
    /// `major:minor` of the FUSE connection (from mountinfo).
    conn: Arc<Mutex<String>>,
    log: PathBuf,
    watchdog: Option<(mpsc::Sender<()>, JoinHandle<()>)>,
}

impl Mount {
    /// `worldfs mount SRC MNT` on an empty SRC.
    pub fn mirror() -> Mount {
        Mount::start(Mode::Mirror, &[], |_| {})
    }

    /// `worldfs mount SRC MNT ARGS...` on an empty SRC.
    pub fn mirror_with(args: &[&str]) -> Mount {
        Mount::start(Mode::Mirror, args, |_| {})
    }

    /// `worldfs mount SRC` (in place) on an empty SRC.
    pub fn in_place() -> Mount {
        Mount::start(Mode::InPlace, &[], |_| {})
    }

    /// Creates the temporary directories, lets `prepare` fill SOURCE, then mounts and waits for
    /// the mount to appear (up to 10 s). Panics with the daemon's output if it does not.
    pub fn start(mode: Mode, args: &[&str], prepare: impl FnOnce(&Path)) -> Mount {
        Self::start_with(mode, args, SourceFs::Disk, prepare)
    }

    /// [`Mount::start`] with variables in the daemon's environment, and only there (the tests
    /// beside it in the same binary do not see them).
    pub fn start_env(
        mode: Mode,
        args: &[&str],
        env: &[(&str, &str)],
        prepare: impl FnOnce(&Path),
    ) -> Mount {
        Self::start_with_env(mode, args, SourceFs::Disk, env, prepare)
    }

    /// [`Mount::start`] with SOURCE on a tmpfs of its own (256 MiB): its free space changes
    /// with what the test does only, whatever else writes to the machine's disks.
    pub fn start_on_tmpfs(mode: Mode, args: &[&str], prepare: impl FnOnce(&Path)) -> Mount {
        Self::start_with(mode, args, SourceFs::Tmpfs, prepare)
    }

    /// [`Mount::start`] with SOURCE an overlay (as in a container); `prepare` is given its
    /// lower layer, whose files SOURCE shows.
    pub fn start_on_overlay(mode: Mode, args: &[&str], prepare: impl FnOnce(&Path)) -> Mount {
        Self::start_with(mode, args, SourceFs::Overlay, prepare)
    }

    fn start_with(mode: Mode, args: &[&str], on: SourceFs, prepare: impl FnOnce(&Path)) -> Mount {
        Self::start_with_env(mode, args, on, &[], prepare)
    }

    fn start_with_env(
        mode: Mode,
        args: &[&str],
        on: SourceFs,
        env: &[(&str, &str)],
        prepare: impl FnOnce(&Path),
    ) -> Mount {
        require_fuse();
        let (tmp, base) = tempdir();
        let source = base.join("src");
        let scratch = base.join("scratch");
        std::fs::create_dir(&source).unwrap();
        std::fs::create_dir(&scratch).unwrap();
        let root = match mode {
            Mode::Mirror => {
                let m = base.join("mnt");
                std::fs::create_dir(&m).unwrap();
                m
            }
            Mode::InPlace => source.clone(),
        };
        // Declared after `tmp`: if anything below panics, it is unmounted before the
        // directories are removed.
        let source_tmpfs = match on {
            SourceFs::Disk => {
                prepare(&source);
                None
            }
            SourceFs::Tmpfs => {
                let fs = TestFs::tmpfs(&source);
                prepare(&source);
                Some(fs)
            }
            SourceFs::Overlay => {
                let (fs, lower) = TestFs::overlay(&source, &base.join("layers"));
                prepare(&lower);
                Some(fs)
            }
        };
        Self::launch(Dirs {
            tmp,
            source_tmpfs,
            base,
            source,
            root,
            scratch,
            mode,
            args: args.iter().map(|s| s.to_string()).collect(),
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        })
    }

    /// Stops the daemon with SIGTERM (it must exit 0 and leave nothing mounted), lets
    /// `between` change SOURCE while nothing is mounted, then mounts the same directories again
    /// with `args`: what a user restarting the daemon does.
    ///
    /// After [`Mount::kill9`], the dead mount is removed with `worldfs unmount` first, as a user
    /// would.
    pub fn restart(mut self, args: &[&str], between: impl FnOnce(&Path)) -> Mount {
        let killed = lock(&self.child).try_wait().ok().flatten().is_some();
        if killed {
            let out = worldfs(&[OsStr::new("unmount"), self.root.as_os_str()]);
            assert!(
                out.status.success(),
                "worldfs unmount after a crash: {out:?}"
            );
        } else {
            self.signal(libc::SIGTERM);
            let st = self.wait_exit(EXIT_TIMEOUT);
            assert!(
                st.is_some_and(|s| s.success()),
                "the daemon did not exit cleanly on SIGTERM: {st:?}\n{}",
                self.log()
            );
        }
        assert!(!self.is_mounted(), "still mounted after the daemon exited");
        if let Some((tx, h)) = self.watchdog.take() {
            drop(tx);
            let _ = h.join();
        }
        between(&self.source);
        let dirs = Dirs {
            tmp: self._tmp.take().expect("a mount owns its directories"),
            source_tmpfs: self._source_tmpfs.take(),
            base: self.base.clone(),
            source: self.source.clone(),
            root: self.root.clone(),
            scratch: self.scratch.clone(),
            mode: self.mode,
            args: args.iter().map(|s| s.to_string()).collect(),
            env: std::mem::take(&mut self.env),
        };
        // The earlier log stays readable beside the new one.
        let _ = std::fs::rename(&self.log, self.base.join("daemon.before-restart.log"));
        drop(self);
        Self::launch(dirs)
    }

    fn launch(d: Dirs) -> Mount {
        let Dirs {
            tmp,
            source_tmpfs,
            base,
            source,
            root,
            scratch,
            mode,
            args,
            env,
        } = d;
        let c = cpath(&source);
        // SAFETY: valid path; the returned descriptor is owned below.
        let fd = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC,
            )
        };
        assert!(
            fd >= 0,
            "open O_PATH {}: {}",
            source.display(),
            errno_name(errno())
        );
        // SAFETY: fd is a fresh descriptor we own.
        let backing = unsafe { OwnedFd::from_raw_fd(fd) };

        let log = base.join("daemon.log");
        let logf = File::create(&log).unwrap();
        let mut cmd = Command::new(bin());
        cmd.arg("mount").arg(&source);
        if mode == Mode::Mirror {
            cmd.arg(&root);
        }
        // Worlds kept across restarts stay in the test's own directory.
        cmd.args(&args)
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("XDG_STATE_HOME", base.join("state"))
            .stdin(Stdio::null())
            .stdout(logf.try_clone().unwrap())
            .stderr(logf);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {:?}: {e}", bin()));
        let child = Arc::new(Mutex::new(child));

        let mut m = Mount {
            _below: Vec::new(),
            _source_tmpfs: source_tmpfs,
            _tmp: Some(tmp),
            base,
            source,
            root,
            scratch,
            mode,
            args,
            env,
            backing,
            child,
            conn: Arc::new(Mutex::new(String::new())),
            log,
            watchdog: None,
        };

        let start = Instant::now();
        loop {
            if let Some(e) = mounts_at(&m.root).into_iter().find(|e| e.fstype == FSTYPE) {
                *m.conn.lock().unwrap() = e.dev;
                break;
            }
            let exited = lock(&m.child).try_wait().unwrap();
            if let Some(st) = exited {
                panic!(
                    "worldfs exited with {st} before the mount appeared at {}\n--- daemon output ---\n{}",
                    m.root.display(),
                    m.log()
                );
            }
            if start.elapsed() > MOUNT_TIMEOUT {
                // Drop cleans up; say why first.
                let log = m.log();
                panic!(
                    "no {FSTYPE} mount at {} after {MOUNT_TIMEOUT:?}\n--- daemon output ---\n{log}",
                    m.root.display()
                );
            }
            std::thread::sleep(Duration::from_millis(5));
        }

        // Watchdog: kill a daemon whose mount outlives any sane test, so hung operations fail.
        let (tx, rx) = mpsc::channel::<()>();
        let child = m.child.clone();
        let root = m.root.clone();
        let conn = m.conn.lock().unwrap().clone();
        let h = std::thread::spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(WATCHDOG) {
                eprintln!(
                    "worldfs test watchdog: mount at {} alive for {WATCHDOG:?}; killing the daemon \
                     and aborting its connection so hung operations fail",
                    root.display()
                );
                let _ = lock(&child).kill();
                abort_fuse_connection(&conn);
            }
        });
        m.watchdog = Some((tx, h));
        m
    }

    /// `root/rel`: a path through the mount.
    /// Keeps `t`, mounted below SOURCE, until this mount is gone; then unmounts it before the
    /// directories are removed (which its mount point would keep from going).
    pub fn keep_mounted(&mut self, t: TestFs) {
        self._below.push(t);
    }

    pub fn path(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.root.join(rel)
    }

    /// `source/rel`: the backing path (mirror mode only; in-place mounts cover it).
    pub fn backing(&self, rel: impl AsRef<Path>) -> PathBuf {
        assert_eq!(
            self.mode,
            Mode::Mirror,
            "backing paths are covered by an in-place mount; use backing_fd"
        );
        self.source.join(rel)
    }

    /// The O_PATH descriptor of SOURCE opened before mounting.
    pub fn backing_fd(&self) -> i32 {
        self.backing.as_raw_fd()
    }

    /// lstat of `rel` in the backing tree (works beneath an in-place mount too).
    pub fn backing_lstat(&self, rel: &str) -> std::io::Result<libc::stat> {
        let c = CString::new(rel).unwrap();
        // SAFETY: zeroed stat is a valid out-buffer.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid dirfd, path and buffer.
        let r = unsafe {
            libc::fstatat(
                self.backing.as_raw_fd(),
                c.as_ptr(),
                &mut st,
                libc::AT_SYMLINK_NOFOLLOW,
            )
        };
        if r == 0 {
            Ok(st)
        } else {
            Err(std::io::Error::last_os_error())
        }
    }

    /// Contents of `rel` in the backing tree (works beneath an in-place mount too).
    pub fn backing_read(&self, rel: &str) -> std::io::Result<Vec<u8>> {
        let c = CString::new(rel).unwrap();
        // SAFETY: valid dirfd and path.
        let fd = unsafe {
            libc::openat(
                self.backing.as_raw_fd(),
                c.as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fresh descriptor we own.
        let mut f = unsafe { File::from_raw_fd(fd) };
        let mut v = Vec::new();
        f.read_to_end(&mut v)?;
        Ok(v)
    }

    /// Is a worldfs mount at `root`?
    pub fn is_mounted(&self) -> bool {
        worldfs_mounts_at(&self.root) > 0
    }

    /// The socket path the daemon prints right after mounting (polled: `start` returns as soon
    /// as the mount exists, which may be before the line is written).
    pub fn socket(&self) -> PathBuf {
        // Whole lines only: the daemon's stderr is unbuffered, so a line can be read before
        // its path is written (a test once connected to "").
        let find = || {
            let log = self.log();
            let whole = log.rsplit_once('\n').map_or("", |(done, _)| done);
            whole
                .lines()
                .find_map(|l| l.strip_prefix("worldfs: socket "))
                .map(|p| PathBuf::from(p.trim()))
        };
        wait_until(Duration::from_secs(5), || find().is_some());
        find().unwrap_or_else(|| panic!("the daemon printed no socket path:\n{}", self.log()))
    }

    /// What `worldfs status` prints for this mount (it must succeed).
    #[allow(dead_code)] // not every test binary that includes this module uses it
    pub fn status(&self) -> String {
        let out = worldfs(&[
            OsStr::new("status"),
            OsStr::new("--socket"),
            self.socket().as_os_str(),
        ]);
        assert!(out.status.success(), "worldfs status: {out:?}");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The daemon's combined stdout and stderr so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_else(|e| format!("<no log: {e}>"))
    }

    pub fn pid(&self) -> i32 {
        lock(&self.child).id() as i32
    }

    /// Sends `sig` to the daemon (unless it was already reaped).
    pub fn signal(&self, sig: i32) {
        let mut c = lock(&self.child);
        if c.try_wait().unwrap().is_none() {
            // SAFETY: the child is not reaped, so its pid is still ours.
            unsafe { libc::kill(c.id() as i32, sig) };
        }
    }

    /// Waits up to `timeout` for the daemon to exit.
    pub fn wait_exit(&self, timeout: Duration) -> Option<ExitStatus> {
        let mut c = lock(&self.child);
        wait_child(&mut c, timeout)
    }

    /// SIGKILLs the daemon and reaps it; the mount stays behind, dead. Panics (after aborting
    /// the connection so nothing hangs) if the daemon cannot die within 5 s.
    pub fn kill9(&self) {
        let stuck = {
            let mut c = lock(&self.child);
            let _ = c.kill();
            self.reap_or_abort(&mut c, EXIT_TIMEOUT).err()
        };
        if let Some(diag) = stuck {
            panic!(
                "the daemon did not die within {EXIT_TIMEOUT:?} of SIGKILL (threads stuck in the \
                 kernel keep the FUSE connection open, so every process using the mount hangs; \
                 the test aborted the connection to recover). Daemon threads:\n{diag}"
            );
        }
    }

    /// Aborts this mount's FUSE connection (see [`abort_fuse_connection`]).
    pub fn abort_connection(&self) -> bool {
        let conn = self.conn.lock().unwrap().clone();
        abort_fuse_connection(&conn)
    }

    /// Waits for the (already signalled) daemon; if it is still there after `timeout`, records
    /// its threads, aborts the connection and waits once more.
    fn reap_or_abort(&self, c: &mut Child, timeout: Duration) -> Result<ExitStatus, String> {
        if let Some(st) = wait_child(c, timeout) {
            return Ok(st);
        }
        let diag = thread_states(c.id() as i32);
        self.abort_connection();
        let _ = c.kill();
        match wait_child(c, EXIT_TIMEOUT) {
            Some(_) => Err(diag),
            None => Err(format!(
                "{diag}  (still alive after aborting the connection)"
            )),
        }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        if let Some((tx, h)) = self.watchdog.take() {
            drop(tx);
            let _ = h.join();
        }
        let exited = {
            let mut c = lock(&self.child);
            if c.try_wait().ok().flatten().is_none() {
                // SAFETY: the child is not reaped, so its pid is still ours.
                unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
            }
            match wait_child(&mut c, EXIT_TIMEOUT) {
                Some(st) => Some(st),
                None => {
                    eprintln!(
                        "worldfs daemon for {} ignored SIGTERM for {EXIT_TIMEOUT:?}; killing it",
                        self.root.display()
                    );
                    let _ = c.kill();
                    if let Err(diag) = self.reap_or_abort(&mut c, EXIT_TIMEOUT) {
                        eprintln!("the daemon did not die after SIGKILL; threads:\n{diag}");
                    }
                    None
                }
            }
        };
        if self.is_mounted() {
            eprintln!(
                "{} still mounted after the daemon exited ({exited:?}); lazy unmount",
                self.root.display()
            );
            force_unmount(&self.root);
        }
        // anything else a test left mounted below its directories
        unmount_all_under(&self.base);
        if std::thread::panicking() {
            eprintln!(
                "--- worldfs daemon output ({} {:?}, exit {exited:?}) ---\n{}--- end ---",
                self.root.display(),
                self.args,
                self.log()
            );
        }
    }
}

/// Runs `worldfs hook` in `dir` with `stdin`, as Claude Code runs it: it must exit 0 and print
/// nothing, whatever happens.
pub fn hook(dir: &Path, stdin: &str) -> Output {
    let mut child = Command::new(bin())
        .arg("hook")
        .env_remove("WORLDFS_SOCKET")
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn worldfs hook");
    if let Some(mut i) = child.stdin.take() {
        i.write_all(stdin.as_bytes()).expect("write the event");
    }
    let out = child.wait_with_output().expect("wait for worldfs hook");
    assert!(out.status.success(), "worldfs hook failed: {out:?}");
    assert!(out.stdout.is_empty(), "a hook prints nothing: {out:?}");
    out
}
