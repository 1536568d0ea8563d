//! The passthrough file system: every operation is carried out on SOURCE, relative to handles
//! opened before mounting, and reported to the observation sink without waiting on it.
//!
//! One concern per file, after virtiofsd's `passthrough/`: `inode_store` (node ids and how to
//! reach backing inodes), `file_handle` (kernel file handles), `handles` (open files and
//! directories), `callers` (who made a request, read while it runs), `credentials` (acting as
//! the caller), `kill_priv`
//! (clearing set-id bits as a native write would), `attr` (stat to FUSE attributes),
//! `open_mode` (page cache or passthrough, per open), `retained` (passthrough registrations
//! kept after close), `watcher` (changes behind the
//! mount -> kernel cache invalidation), `passthrough` (the operations), `sys` (libc wrappers).

pub mod attr;
pub mod callers;
pub mod credentials;
pub mod file_handle;
pub mod handles;
pub mod inode_store;
pub mod kernel_cache;
pub mod kill_priv;
pub mod op_stats;
pub mod open_mode;
pub mod own_writes;
pub mod passthrough;
pub mod read_buf;
pub mod retained;
pub mod self_changes;
pub mod sys;
pub mod watcher;

pub use kernel_cache::KernelCache;

pub use inode_store::InodeStore;
pub use passthrough::Passthrough;

/// Where file data flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IoMode {
    /// Kernel passthrough when available (native speed; the daemon sees opens and closes,
    /// not individual reads and writes; small files opened only for reading go through the
    /// page cache, see `open_mode`), daemon I/O otherwise.
    Auto,
    /// As `auto`, but fail at mount time if kernel passthrough is not available.
    Passthrough,
    /// Every read and write goes through the daemon, which observes byte ranges.
    Daemon,
}

/// Which transport carries FUSE requests (`worldfs mount --io-uring`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IoUringMode {
    /// FUSE-over-io_uring when the kernel offers it, /dev/fuse otherwise.
    Auto,
    /// FUSE-over-io_uring or fail at mount time.
    On,
    /// /dev/fuse only.
    Off,
}

/// The `fuse` module parameter that lets the kernel offer FUSE-over-io_uring (read at INIT).
pub const ENABLE_URING_PARAM: &str = "/sys/module/fuse/parameters/enable_uring";

/// Whether the kernel will offer FUSE-over-io_uring to the next mount, and if not, why.
pub fn io_uring_available() -> Result<(), String> {
    match std::fs::read_to_string(ENABLE_URING_PARAM) {
        Ok(v) if v.trim() == "Y" || v.trim() == "1" => {}
        Ok(_) => {
            return Err(format!(
                "{ENABLE_URING_PARAM} is N (as root: echo Y > {ENABLE_URING_PARAM})"
            ));
        }
        Err(e) => {
            return Err(format!(
                "{ENABLE_URING_PARAM}: {e} (the kernel lacks FUSE-over-io_uring; it needs Linux 6.14+ with CONFIG_FUSE_IO_URING)"
            ));
        }
    }
    fuser::io_uring_usable().map_err(|e| format!("io_uring is not usable by this process: {e}"))
}

#[derive(Debug, Clone)]
pub struct FsOptions {
    pub io_mode: IoMode,
    /// Ask the kernel for FUSE-over-io_uring in INIT (decided before mounting).
    pub io_uring: IoUringMode,
    /// Answer FUSE_STATX (a caller asking for the birth time). Off, ENOSYS makes the kernel
    /// stop asking and serve every `statx` from what it has, without a birth time: LOOKUP and
    /// GETATTR replies carry none, so answering costs a round trip per file the first time a
    /// program asks, and Node's and Rust's `stat` always ask (BENCHMARKS.md, session 54).
    pub birth_times: bool,
    /// What the kernel may keep (names, attributes, pages), for as long as the watcher sees
    /// every change behind the mount.
    pub kernel_cache: KernelCache,
}
