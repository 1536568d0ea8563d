//! Counts of FUSE requests by operation: which round trips a workload really costs, for
//! `worldfs status` and for tuning (a warm `stat` of every file should cost none).

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! op_counters {
    ($($name:ident),* $(,)?) => {
        /// One counter per FUSE operation the passthrough serves, and how it moves data.
        #[derive(Debug, Default)]
        pub struct OpStats {
            $(pub $name: AtomicU64,)*
            /// How reads and writes move, for `worldfs status`: decided at INIT, and again if
            /// kernel passthrough fails later. `None` before INIT.
            pub data_path: parking_lot::Mutex<Option<String>>,
            /// How requests reach the daemon, for `worldfs status`: FUSE-over-io_uring, or
            /// `/dev/fuse` and why not the ring. `None` before the session starts.
            pub transport: parking_lot::Mutex<Option<String>>,
            /// How SOURCE is watched for changes behind the mount, for `worldfs status`:
            /// set at mount time, and again as file systems below SOURCE come and go. `None`
            /// when it is not watched.
            pub watcher: parking_lot::Mutex<Option<String>>,
        }

        impl OpStats {
            /// `(operation, count)` for every operation seen at least once.
            pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
                let mut v = Vec::new();
                $(
                    let n = self.$name.load(Ordering::Relaxed);
                    if n > 0 {
                        v.push((stringify!($name), n));
                    }
                )*
                v
            }
        }
    };
}

op_counters!(
    lookup,
    forget,
    getattr,
    statx,
    setattr,
    readlink,
    mknod,
    mkdir,
    unlink,
    rmdir,
    symlink,
    rename,
    link,
    open,
    read,
    write,
    flush,
    release,
    fsync,
    opendir,
    readdir,
    readdirplus,
    releasedir,
    fsyncdir,
    statfs,
    setxattr,
    getxattr,
    listxattr,
    removexattr,
    access,
    create,
    tmpfile,
    fallocate,
    lseek,
    copy_file_range,
);

/// Bumps one counter; relaxed ordering is enough for statistics.
pub fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}
