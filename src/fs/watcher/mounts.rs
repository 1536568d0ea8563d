//! File systems mounted below SOURCE, as they come and go.
//!
//! Neither watcher sees a file system mounted below SOURCE on its own: fanotify's mark covers
//! SOURCE's file system only, and inotify's watches are on the directories notify walked, so a
//! file system mounted after the walk is unwatched (and one unmounted leaves the directory it
//! covered unwatched, if the walk went into the mount instead). The kernel would then serve
//! what it cached there stale, and the mount, which reaches a directory it has looked up by its
//! handle or descriptor, would go on showing the directory a new mount covers.
//!
//! So the mount table is watched: a `poll` of /proc/self/mountinfo wakes at every change in the
//! daemon's mount namespace, and the table is read again. A mount belongs to SOURCE's tree if it
//! is mounted on SOURCE's own mount or on one that does, at a path below SOURCE; a mount made
//! on the worldfs mount itself (in place, SOURCE's path leads into it) does not.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::{self, Read, Seek};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use crate::fs::sys;
use crate::mountinfo::{self, MountEntry};

/// The mounts below SOURCE (whose path is `source`, on the mount `source_mount`): each one's
/// mount point relative to SOURCE, and its id (two mounts stacked on one path are two).
pub fn below(table: &[MountEntry], source: &Path, source_mount: u64) -> BTreeSet<(PathBuf, u64)> {
    let mut tree = vec![source_mount];
    // Parents usually come before their children in the table, but a moved mount need not:
    // go over it until nothing is added.
    loop {
        let before = tree.len();
        for m in table {
            if !tree.contains(&m.id)
                && tree.contains(&m.parent)
                && m.mount_point != source
                && m.mount_point.starts_with(source)
            {
                tree.push(m.id);
            }
        }
        if tree.len() == before {
            break;
        }
    }
    table
        .iter()
        .filter(|m| tree[1..].contains(&m.id))
        .filter_map(|m| Some((m.mount_point.strip_prefix(source).ok()?.to_path_buf(), m.id)))
        .collect()
}

/// Where a file system came or went below SOURCE between two reads of the mount table (each
/// path relative to SOURCE, once).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Changes {
    pub mounted: Vec<PathBuf>,
    pub unmounted: Vec<PathBuf>,
}

/// The mount table, as it stands below SOURCE.
pub struct Table {
    file: File,
    /// SOURCE's directory: its path is read again at each change (it may have been renamed).
    root: OwnedFd,
    root_mount: u64,
    below: BTreeSet<(PathBuf, u64)>,
}

impl Table {
    /// Reads the table as it is now, for SOURCE's directory `root`.
    pub fn open(root: OwnedFd) -> io::Result<Self> {
        let root_mount = sys::mount_id(root.as_fd())?;
        let mut table = Self {
            file: File::open("/proc/self/mountinfo")?,
            root,
            root_mount,
            below: BTreeSet::new(),
        };
        table.below = table.read()?;
        Ok(table)
    }

    /// The mount points below SOURCE, relative to it, as last read.
    pub fn below(&self) -> impl Iterator<Item = &Path> {
        let mut paths: Vec<&Path> = self.below.iter().map(|(p, _)| p.as_path()).collect();
        paths.dedup();
        paths.into_iter()
    }

    /// Whether a file system is mounted at `rel` (relative to SOURCE), as last read.
    pub fn mounted_at(&self, rel: &Path) -> bool {
        self.below().any(|p| p == rel)
    }

    /// Waits for the mount table to change, then says what came and went below SOURCE (often
    /// nothing: the change was elsewhere).
    pub fn next_change(&mut self) -> io::Result<Changes> {
        let mut fds = [libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLPRI,
            revents: 0,
        }];
        loop {
            // The kernel reports a change of the namespace's mounts as POLLPRI | POLLERR.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 1, -1) };
            if n >= 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
        let now = self.read()?;
        let paths = |a: &BTreeSet<(PathBuf, u64)>, b: &BTreeSet<(PathBuf, u64)>| {
            let mut v: Vec<PathBuf> = a.difference(b).map(|(p, _)| p.clone()).collect();
            v.dedup();
            v
        };
        let changes = Changes {
            mounted: paths(&now, &self.below),
            unmounted: paths(&self.below, &now),
        };
        self.below = now;
        Ok(changes)
    }

    fn read(&mut self) -> io::Result<BTreeSet<(PathBuf, u64)>> {
        let source = sys::fd_path(self.root.as_fd())?;
        let mut text = String::new();
        self.file.rewind()?;
        self.file.read_to_string(&mut text)?;
        Ok(below(&mountinfo::parse(&text), &source, self.root_mount))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: u64, parent: u64, at: &str) -> MountEntry {
        MountEntry {
            id,
            parent,
            mount_point: at.into(),
            fstype: "tmpfs".into(),
            source: "none".into(),
            dev: id,
        }
    }

    fn rel(set: BTreeSet<(PathBuf, u64)>) -> Vec<String> {
        set.iter().map(|(p, _)| p.display().to_string()).collect()
    }

    #[test]
    fn mounts_in_sources_tree_are_below_it() {
        let table = [
            entry(1, 0, "/"),
            entry(2, 1, "/work/proj/cache"),
            // Mounted on the one above: below SOURCE too, listed before its parent.
            entry(4, 3, "/work/proj/vol/sub"),
            entry(3, 1, "/work/proj/vol"),
            entry(5, 1, "/work/projector"),
            entry(6, 1, "/work"),
            entry(7, 1, "/work/proj"),
            // A second file system mounted on the first one's mount point.
            entry(11, 2, "/work/proj/cache"),
        ];
        let source = Path::new("/work/proj");
        assert_eq!(
            rel(below(&table, source, 1)),
            ["cache", "cache", "vol", "vol/sub"],
            "a sibling that shares a prefix, an ancestor and SOURCE's own path are not below it"
        );
    }

    #[test]
    fn what_is_mounted_on_the_worldfs_mount_is_not_below_source() {
        // In place: worldfs is mounted on SOURCE's path (8), and a mount made later at a path
        // below it goes on the worldfs mount, not on SOURCE's file system.
        let table = [
            entry(1, 0, "/"),
            entry(2, 1, "/work/proj/cache"),
            entry(8, 1, "/work/proj"),
            entry(9, 8, "/work/proj/tmp"),
            entry(10, 9, "/work/proj/tmp/x"),
        ];
        assert_eq!(rel(below(&table, Path::new("/work/proj"), 1)), ["cache"]);
    }

    #[test]
    fn sources_own_mount_counts_from_its_id() {
        // SOURCE is itself a mount point (a bind mount, 5): what is on its parent is not below.
        let table = [
            entry(1, 0, "/"),
            entry(5, 1, "/data/proj"),
            entry(6, 5, "/data/proj/build"),
        ];
        assert_eq!(rel(below(&table, Path::new("/data/proj"), 5)), ["build"]);
        assert!(below(&table, Path::new("/data/proj"), 1).is_empty());
    }

    #[test]
    fn a_table_read_now_finds_a_mount_made_below_source() {
        // Needs root (a tmpfs mounted in a private mount namespace would not show in ours).
        if unsafe { libc::geteuid() } != 0 {
            panic!("this test mounts a tmpfs: run it as root (make test does)");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir(dir.path().join("m")).expect("mkdir");
        let root = File::open(dir.path()).expect("open SOURCE").into();
        let mut table = Table::open(root).expect("reading the mount table");
        assert_eq!(table.below().count(), 0);
        let at = dir.path().join("m");
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "worldfs-unit-test"])
            .arg(&at)
            .status()
            .expect("running mount");
        assert!(ok.success(), "mounting a tmpfs");
        let mounted = table.next_change();
        let stacked = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "worldfs-unit-test"])
            .arg(&at)
            .status();
        let mounted_again = table.next_change();
        let still = table.mounted_at(Path::new("m"));
        let unmounted = std::process::Command::new("umount").arg(&at).status();
        let second = table.next_change();
        // Both gone before anything is asserted: a failure must not leave a mount behind.
        let _ = std::process::Command::new("umount").arg(&at).status();
        let third = table.next_change();
        let came = |p: &str| Changes {
            mounted: vec![p.into()],
            unmounted: vec![],
        };
        let went = |p: &str| Changes {
            mounted: vec![],
            unmounted: vec![p.into()],
        };
        assert_eq!(mounted.expect("reading the table"), came("m"));
        assert!(stacked.expect("running mount").success());
        assert_eq!(mounted_again.expect("reading the table"), came("m"));
        assert!(still);
        assert!(unmounted.expect("running umount").success());
        assert_eq!(second.expect("reading the table"), went("m"));
        assert_eq!(third.expect("reading the table"), went("m"));
        assert!(!table.mounted_at(Path::new("m")));
    }
}
