//! SOURCE watched with one fanotify mark on the file system it lives on, instead of an inotify
//! watch on each of its directories.
//!
//! inotify needs a watch per directory: a tree with more directories than
//! `fs.inotify.max_user_watches` (a monorepo, an `npm install`) cannot be fully watched, each
//! watch pins kernel memory, every mount walks the whole tree to set them, and a directory that
//! comes into the tree is only watched once notify has walked it, so what is made in it before
//! goes unseen. A file-system mark has none of these: one mark, nothing walked, every change
//! on the file system reported, including in a directory made a microsecond ago. It needs
//! `CAP_SYS_ADMIN` (a file-system mark) and `CAP_DAC_READ_SEARCH` (to open the directories the
//! events name by their handles), so only a root mount uses it.
//!
//! Each event names a directory by its file handle, and an entry by its name. The directory
//! is opened by its handle and its path read back; an event whose directory is outside SOURCE
//! (the mark sees the whole file system) is dropped. Which path a directory handle has (or that
//! it is outside SOURCE) is remembered until a directory moves, anywhere: cheap next to the
//! system calls it saves for every other event.
//!
//! The events are handed on as notify's, with paths below the same `/proc/self/fd/N` prefix
//! notify's watch reports, so the invalidator treats both watchers alike.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use fanotify_fid::consts::{
    FAN_ATTRIB, FAN_CLASS_NOTIF, FAN_CLOEXEC, FAN_CREATE, FAN_DELETE, FAN_MARK_ADD,
    FAN_MARK_FILESYSTEM, FAN_MODIFY, FAN_MOVED_FROM, FAN_MOVED_TO, FAN_ONDIR, FAN_REPORT_DFID_NAME,
    FAN_UNLIMITED_QUEUE,
};
use fanotify_fid::{Fanotify, FidEvent};
use notify::event::{CreateKind, DataChange, Flag, MetadataKind, ModifyKind, RemoveKind};
use notify::event::{EventKind, RenameMode};
use tracing::{debug, warn};

use super::WatchEvent;
use crate::fs::sys;

/// What the mark asks for: the changes notify's `CORE` kinds give from inotify.
const MASK: u64 =
    FAN_CREATE | FAN_DELETE | FAN_MOVED_FROM | FAN_MOVED_TO | FAN_MODIFY | FAN_ATTRIB | FAN_ONDIR;

/// How long the reader pauses after a read that held nothing in SOURCE.
const ELSEWHERE_PAUSE: Duration = Duration::from_millis(2);

/// Directory handles remembered at most; past it the memory starts again (a build elsewhere on
/// the file system can name many directories, each outside SOURCE).
const REMEMBERED: usize = 16 * 1024;

/// A fanotify group marking SOURCE's file system, not yet read.
pub struct Mark {
    group: Fanotify,
    root: OwnedFd,
    root_path: PathBuf,
}

impl Mark {
    /// Marks the file system `root` (SOURCE's directory, whose path is `root_path`) is on.
    /// Fails where fanotify cannot watch it: without root, on a kernel before 5.9, on a file
    /// system without file handles.
    pub fn start(root: BorrowedFd<'_>, root_path: PathBuf) -> anyhow::Result<Self> {
        // An unlimited queue: the mark sees the whole file system, and a queue that overflows
        // costs every cached name and page of the mount (a rescan).
        let group = Fanotify::new(
            FAN_CLASS_NOTIF | FAN_CLOEXEC | FAN_REPORT_DFID_NAME | FAN_UNLIMITED_QUEUE,
        )
        .context("fanotify_init")?;
        group
            .mark_fd(root, FAN_MARK_ADD | FAN_MARK_FILESYSTEM, MASK)
            .context("marking SOURCE's file system")?;
        // Every event is read back through a directory's handle: a file system whose handles
        // cannot be opened (or a daemon without CAP_DAC_READ_SEARCH) would make each one a
        // rescan.
        fanotify_fid::handle::handle_from_fd(root)
            .and_then(|h| fanotify_fid::handle::open_by_handle_at(root, &h))
            .context("opening SOURCE by its file handle")?;
        let root = root
            .try_clone_to_owned()
            .context("keeping SOURCE's descriptor")?;
        Ok(Self {
            group,
            root,
            root_path,
        })
    }

    /// Reads events until the process ends, handing each on to `push` as notify's event with
    /// its paths below `prefix`.
    pub fn spawn(
        self,
        prefix: PathBuf,
        push: impl Fn(WatchEvent) + Send + 'static,
    ) -> std::io::Result<()> {
        std::thread::Builder::new()
            .name("worldfs-fanotify".into())
            .spawn(move || {
                let mut paths = Paths::new(self.root, self.root_path, prefix);
                // The read size: a batch of a few hundred events.
                let mut buf = Vec::with_capacity(64 * 1024);
                let mut failing = false;
                loop {
                    let events = match self.group.read_events(&mut buf) {
                        Ok(events) => events,
                        Err(e) => {
                            // Nothing is known to fail here for long (ENOMEM); whatever was
                            // missed meanwhile is made up for by dropping everything cached,
                            // again at each try while it lasts. Said once per spell.
                            if !failing {
                                warn!(
                                    "reading fanotify events failed, invalidating everything \
                                     until it works again: {e}"
                                );
                            }
                            failing = true;
                            std::thread::sleep(Duration::from_millis(100));
                            push(Ok(rescan()));
                            continue;
                        }
                    };
                    failing = false;
                    let mut inside = false;
                    for ev in &events {
                        for out in paths.translate(ev) {
                            inside = true;
                            push(Ok(out));
                        }
                    }
                    if !inside {
                        // Busy elsewhere on the file system (a build, a browser's cache):
                        // waking for each of its events one at a time cost more than reading
                        // them. A pause lets them gather into one read; a change in SOURCE
                        // waits for it at most, and one that comes while the reader is
                        // blocked is read at once.
                        std::thread::sleep(ELSEWHERE_PAUSE);
                    }
                }
            })
            .map(drop)
    }
}

/// What each directory handle is, relative to SOURCE.
struct Paths {
    root: OwnedFd,
    /// SOURCE's path as the kernel names it now (`readlink` of its descriptor).
    root_path: PathBuf,
    prefix: PathBuf,
    /// A handle's path below SOURCE, or `None` outside it.
    known: HashMap<Vec<u8>, Option<PathBuf>>,
    /// Paired with nothing: notify's inotify events carry a rename cookie, which the
    /// invalidator takes to tell a rename from a directory reporting its own move.
    renames: usize,
}

/// Why an event's directory has no path below SOURCE.
#[derive(Debug)]
enum Outside {
    /// Elsewhere on the file system, or gone (its own removal is reported by its parent).
    Elsewhere,
    /// It could not be opened for a reason that says nothing about where it is: whatever it
    /// changed is made up for by a rescan.
    Unknown(std::io::Error),
}

impl Paths {
    fn new(root: OwnedFd, root_path: PathBuf, prefix: PathBuf) -> Self {
        Self {
            root,
            root_path,
            prefix,
            known: HashMap::new(),
            renames: 0,
        }
    }

    /// SOURCE itself may have been renamed behind the mount (or a directory above it): every
    /// path known is then wrong.
    fn check_root(&mut self) {
        match sys::fd_path(self.root.as_fd()) {
            Ok(p) if p != self.root_path => {
                debug!("SOURCE is now {}", p.display());
                self.root_path = p;
                self.known.clear();
            }
            _ => {}
        }
    }

    /// Notify's events for one fanotify event: none when it is outside SOURCE.
    fn translate(&mut self, ev: &FidEvent<'_>) -> Vec<notify::Event> {
        if ev.is_overflow() {
            self.known.clear();
            return vec![rescan()];
        }
        let mask = ev.mask();
        let dir = mask & FAN_ONDIR != 0;
        if dir && mask & (FAN_MOVED_FROM | FAN_MOVED_TO) != 0 {
            // A directory moved: the paths known for it and below it are wrong now, and one
            // outside SOURCE may have come in. (One removed needs nothing: its handle and its
            // children's are never reported again.) Before resolving this event's own parent,
            // which has not moved. It may have been SOURCE itself.
            self.known.clear();
            self.check_root();
        }
        let (Some(handle), Some(name)) = (ev.dfid_name_handle(), ev.dfid_name()) else {
            return Vec::new();
        };
        let rel = match self.resolve(handle) {
            Ok(rel) => rel,
            Err(Outside::Elsewhere) => return Vec::new(),
            Err(Outside::Unknown(e)) => {
                debug!("an event's directory could not be opened ({e}): rescanning");
                return vec![rescan()];
            }
        };
        let path = if name == OsStr::new(".") {
            self.prefix.join(&rel)
        } else {
            self.prefix.join(&rel).join(name)
        };
        // The process that made the change: the daemon's own is the mount's echo.
        let pid = u32::try_from(ev.pid()).unwrap_or(0);
        self.kinds(mask, dir, &path)
            .into_iter()
            .map(|(kind, tracker)| {
                let e = notify::Event::new(kind)
                    .add_path(path.clone())
                    .set_process_id(pid);
                match tracker {
                    Some(t) => e.set_tracker(t),
                    None => e,
                }
            })
            .collect()
    }

    /// The kinds one event's mask stands for, in the order they happened. A name made and
    /// removed between two reads can come as one event with both bits: whether it exists now
    /// says which came last.
    fn kinds(&mut self, mask: u64, dir: bool, path: &Path) -> Vec<(EventKind, Option<usize>)> {
        let mut came = Vec::new();
        if mask & FAN_MOVED_TO != 0 {
            self.renames += 1;
            came.push((
                EventKind::Modify(ModifyKind::Name(RenameMode::To)),
                Some(self.renames),
            ));
        }
        if mask & FAN_CREATE != 0 {
            let kind = if dir {
                CreateKind::Folder
            } else {
                CreateKind::File
            };
            came.push((EventKind::Create(kind), None));
        }
        let mut went = Vec::new();
        if mask & FAN_MOVED_FROM != 0 {
            self.renames += 1;
            went.push((
                EventKind::Modify(ModifyKind::Name(RenameMode::From)),
                Some(self.renames),
            ));
        }
        if mask & FAN_DELETE != 0 {
            let kind = if dir {
                RemoveKind::Folder
            } else {
                RemoveKind::File
            };
            went.push((EventKind::Remove(kind), None));
        }
        let mut kinds = if !came.is_empty() && !went.is_empty() && path.symlink_metadata().is_ok() {
            went.append(&mut came);
            went
        } else {
            came.append(&mut went);
            came
        };
        if mask & FAN_MODIFY != 0 {
            kinds.push((EventKind::Modify(ModifyKind::Data(DataChange::Any)), None));
        }
        if mask & FAN_ATTRIB != 0 {
            kinds.push((
                EventKind::Modify(ModifyKind::Metadata(MetadataKind::Any)),
                None,
            ));
        }
        kinds
    }

    /// The path below SOURCE of the directory `handle` names.
    fn resolve(&mut self, handle: &[u8]) -> Result<PathBuf, Outside> {
        if let Some(known) = self.known.get(handle) {
            return known.clone().ok_or(Outside::Elsewhere);
        }
        let found = match self.open_by_handle(handle) {
            Ok(fd) => self.below_root(fd.as_fd()),
            // The directory is gone, or the handle is not of this file system.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ESTALE | libc::EXDEV)) => None,
            Err(e) => return Err(Outside::Unknown(e)),
        };
        if self.known.len() >= REMEMBERED {
            self.known.clear();
        }
        self.known.insert(handle.to_vec(), found.clone());
        found.ok_or(Outside::Elsewhere)
    }

    /// Opens the directory `handle` names. For a directory removed a moment before, the kernel
    /// can answer ENOMEM rather than ESTALE (its unit test failed so in 2 of 600 runs while
    /// other directories were made and removed beside it, and in CI once); asked again, it said
    /// ESTALE each time (4 of 4 in 1,500 more runs). That window is the removed inode's
    /// eviction, which another CPU may be in the middle of: the tries wait a little longer each
    /// time (a yield, then 0.1, 0.2, 0.4 ms), under a millisecond in all, where three yields in
    /// a row can all fall inside it (the unit test failed once more in a later run, not
    /// reproduced in 1,200 runs under churn since). A real shortage of memory lasts, and after
    /// the last try still fails: the caller then drops everything cached, as for any error it
    /// cannot place.
    fn open_by_handle(&self, handle: &[u8]) -> std::io::Result<OwnedFd> {
        const TRIES: u32 = 4;
        let mut tries = 0;
        loop {
            match fanotify_fid::handle::open_by_handle_at(self.root.as_fd(), handle) {
                Err(e) if e.raw_os_error() == Some(libc::ENOMEM) && tries < TRIES => {
                    if tries == 0 {
                        std::thread::yield_now();
                    } else {
                        std::thread::sleep(Duration::from_micros(50 << tries));
                    }
                    tries += 1;
                }
                other => return other,
            }
        }
    }

    /// Where an open directory is below SOURCE, if it is and still exists.
    fn below_root(&self, fd: BorrowedFd<'_>) -> Option<PathBuf> {
        // A removed directory's path reads with " (deleted)" appended: its link count says so
        // without trusting a name.
        match sys::fstat(fd) {
            Ok(st) if st.st_nlink == 0 => return None,
            Ok(_) => {}
            Err(_) => return None,
        }
        let path = sys::fd_path(fd).ok()?;
        path.strip_prefix(&self.root_path)
            .ok()
            .map(Path::to_path_buf)
    }
}

/// What tells the invalidator events were lost: it drops everything the kernel caches.
fn rescan() -> notify::Event {
    notify::Event::new(EventKind::Other).set_flag(Flag::Rescan)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fanotify_fid::handle::name_to_handle_at;

    /// A SOURCE with `a/b` in it, and a directory beside it, outside.
    fn source() -> (tempfile::TempDir, Paths) {
        let tmp = tempfile::tempdir().expect("tempdir");
        std::fs::create_dir_all(tmp.path().join("src/a/b")).expect("mkdir");
        std::fs::create_dir(tmp.path().join("outside")).expect("mkdir");
        let root: OwnedFd = std::fs::File::open(tmp.path().join("src"))
            .expect("open SOURCE")
            .into();
        let root_path = sys::fd_path(root.as_fd()).expect("SOURCE's path");
        let paths = Paths::new(root, root_path, PathBuf::from("/proc/self/fd/7"));
        (tmp, paths)
    }

    fn handle(p: &Path) -> Vec<u8> {
        name_to_handle_at(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
    }

    fn kinds(paths: &mut Paths, mask: u64, path: &Path) -> Vec<EventKind> {
        let dir = mask & FAN_ONDIR != 0;
        paths
            .kinds(mask, dir, path)
            .into_iter()
            .map(|(k, _)| k)
            .collect()
    }

    // Opening a directory by its handle needs CAP_DAC_READ_SEARCH: the suite runs as root,
    // as a mount that watches with fanotify does.
    #[test]
    fn directories_resolve_below_source_or_not_at_all() {
        let (tmp, mut paths) = source();
        let src = tmp.path().join("src");
        let rel = |paths: &mut Paths, p: &Path| match paths.resolve(&handle(p)) {
            Ok(rel) => Some(rel),
            Err(Outside::Elsewhere) => None,
            Err(Outside::Unknown(e)) => panic!("{}: {e}", p.display()),
        };
        assert_eq!(rel(&mut paths, &src), Some(PathBuf::new()));
        assert_eq!(
            rel(&mut paths, &src.join("a/b")),
            Some(PathBuf::from("a/b"))
        );
        assert_eq!(rel(&mut paths, &tmp.path().join("outside")), None);

        // Removed: its handle names nothing any more.
        let gone = handle(&src.join("a/b"));
        paths.known.clear();
        std::fs::remove_dir(src.join("a/b")).expect("rmdir");
        let got = paths.resolve(&gone);
        assert!(matches!(got, Err(Outside::Elsewhere)), "{got:?}");

        // Moved: what was known is dropped when the move is read, and the new path found.
        let a = handle(&src.join("a"));
        assert_eq!(rel(&mut paths, &src.join("a")), Some(PathBuf::from("a")));
        std::fs::rename(src.join("a"), src.join("c")).expect("rename");
        assert_eq!(
            paths.resolve(&a).ok(),
            Some(PathBuf::from("a")),
            "remembered"
        );
        paths.known.clear();
        assert_eq!(paths.resolve(&a).ok(), Some(PathBuf::from("c")));

        // SOURCE itself renamed: everything below it is found again under its new name.
        std::fs::rename(&src, tmp.path().join("src2")).expect("rename SOURCE");
        paths.check_root();
        assert!(paths.known.is_empty());
        assert_eq!(paths.resolve(&a).ok(), Some(PathBuf::from("c")));
    }

    #[test]
    fn a_name_made_and_removed_in_one_event_is_ordered_by_what_exists_now() {
        let (tmp, mut paths) = source();
        let there = tmp.path().join("src/a");
        let not_there = tmp.path().join("src/nothing");
        let created = EventKind::Create(CreateKind::File);
        let removed = EventKind::Remove(RemoveKind::File);
        assert_eq!(
            kinds(&mut paths, FAN_CREATE | FAN_DELETE, &not_there),
            [created, removed]
        );
        assert_eq!(
            kinds(&mut paths, FAN_CREATE | FAN_DELETE, &there),
            [removed, created]
        );
        let to = EventKind::Modify(ModifyKind::Name(RenameMode::To));
        let from = EventKind::Modify(ModifyKind::Name(RenameMode::From));
        assert_eq!(
            kinds(
                &mut paths,
                FAN_MOVED_FROM | FAN_MOVED_TO | FAN_ONDIR,
                &there
            ),
            [from, to]
        );
        // Content and metadata come after the names, each once.
        assert_eq!(
            kinds(&mut paths, FAN_CREATE | FAN_MODIFY | FAN_ATTRIB, &there),
            [
                created,
                EventKind::Modify(ModifyKind::Data(DataChange::Any)),
                EventKind::Modify(ModifyKind::Metadata(MetadataKind::Any)),
            ]
        );
        assert_eq!(
            kinds(&mut paths, FAN_CREATE | FAN_ONDIR, &there),
            [EventKind::Create(CreateKind::Folder)]
        );
    }

    #[test]
    fn every_rename_carries_a_tracker() {
        // The invalidator takes an old name without one for a directory reporting its own move.
        let (tmp, mut paths) = source();
        let p = tmp.path().join("src/a");
        for mask in [FAN_MOVED_FROM, FAN_MOVED_TO] {
            let got = paths.kinds(mask, false, &p);
            assert!(got.iter().all(|(_, t)| t.is_some()), "{got:?}");
        }
        assert!(paths.kinds(FAN_MODIFY, false, &p)[0].1.is_none());
    }
}
