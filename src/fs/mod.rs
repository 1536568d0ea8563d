//! The passthrough file system: every operation is carried out on SOURCE, relative to handles
//! opened before mounting, and reported to the observation sink without waiting on it.
//!
//! One concern per file, after virtiofsd's `passthrough/`: `inode_store` (node ids and how to
//! reach backing inodes), `file_handle` (kernel file handles), `handles` (open files and
//! directories), `callers` (who made a request, read while it runs), `credentials` (acting as
//! the caller), `kill_priv`
//! (clearing set-id bits as a native write would), `attr` (stat to FUSE attributes),
//! `watcher` (changes behind the mount -> kernel cache invalidation), `passthrough` (the
//! operations), `sys` (libc wrappers).

pub mod attr;
pub mod callers;
pub mod credentials;
pub mod file_handle;
pub mod handles;
pub mod inode_store;
pub mod kill_priv;
pub mod op_stats;
pub mod passthrough;
pub mod self_changes;
pub mod sys;
pub mod watcher;

use std::time::Duration;

pub use inode_store::InodeStore;
pub use passthrough::Passthrough;

/// Where file data flows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IoMode {
    /// Kernel passthrough when available (native speed; the daemon sees opens and closes,
    /// not individual reads and writes), daemon I/O otherwise.
    Auto,
    /// Kernel passthrough or fail at mount time.
    Passthrough,
    /// Every read and write goes through the daemon, which observes byte ranges.
    Daemon,
}

#[derive(Debug, Clone)]
pub struct FsOptions {
    pub io_mode: IoMode,
    /// How long the kernel may trust a name lookup (also negative ones).
    pub entry_ttl: Duration,
    /// How long the kernel may trust attributes.
    pub attr_ttl: Duration,
}
