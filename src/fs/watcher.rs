//! Changes made to SOURCE behind the mount (an editor, git, a build on the underlying tree)
//! invalidate the kernel's caches for exactly the names and inodes they touch, so long cache
//! timeouts stay safe. Each change is also reported as an `External` observation.
//!
//! Two watchers feed it. As root, one fanotify mark on SOURCE's file system
//! ([`fanotify`]); otherwise, or where that cannot work, notify's recursive inotify watch, one
//! per directory. Either way, file systems mounted below SOURCE are watched with inotify, and
//! the mount table is followed for those that come and go ([`mounts`]). Either names paths below `/proc/self/fd/N` of the SOURCE descriptor opened
//! before mounting: in in-place mode SOURCE's path leads into the mount itself, where no
//! backing change is visible.

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread::JoinHandle;

use anyhow::Context;
use fuser::{INodeNo, Notifier};
use notify::event::{
    AccessKind, AccessMode, EventKind, EventKindMask, ModifyKind, RemoveKind, RenameMode,
};
use notify::{RecommendedWatcher, RecursiveMode, Watcher as _};
use parking_lot::Mutex;
use tracing::{debug, info, warn};

use self::inbox::Inbox;
use super::inode_store::{Inode, InodeStore, ROOT_ID};
use super::kernel_cache::KernelCache;
use super::op_stats::OpStats;
use super::self_changes::{NameChange, SelfChanges};
use super::sys;
use crate::observation::{ExternalChange, ObservationSink, Op};

mod fanotify;
mod inbox;
mod mounts;

type WatchEvent = notify::Result<notify::Event>;

/// What the watcher thread is told.
enum Seen {
    /// A change a watcher reported.
    Change(WatchEvent),
    /// A file system was mounted or unmounted at this path (relative to SOURCE).
    Remounted(PathBuf),
}

/// Which watcher reports the changes made behind the mount (`worldfs mount --watcher`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum WatchWith {
    /// fanotify where it can watch SOURCE, inotify otherwise.
    Auto,
    /// fanotify, or fail at mount time.
    Fanotify,
    /// inotify, one watch per directory.
    Inotify,
}

/// Which watcher a watch started as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Fanotify,
    Inotify,
}

impl Kind {
    /// How SOURCE is watched, for `worldfs status`, with the file systems mounted `below` it
    /// (each relative to SOURCE), which inotify watches either way.
    fn describe<'a>(self, below: impl Iterator<Item = &'a Path>) -> String {
        let below: Vec<String> = below.map(|p| p.display().to_string()).collect();
        let how = match self {
            Kind::Fanotify => "fanotify, one mark on SOURCE's file system",
            Kind::Inotify => "inotify, a watch on each directory",
        };
        match (self, below.is_empty()) {
            (_, true) => how.to_owned(),
            (Kind::Fanotify, false) => format!(
                "{how}, and inotify on the file systems mounted below it: {}",
                below.join(", ")
            ),
            (Kind::Inotify, false) => format!(
                "{how}, also on the file systems mounted below SOURCE: {}",
                below.join(", ")
            ),
        }
    }

    /// Each event names the process that made the change (fanotify), so the mount's own are
    /// known by the daemon's pid (`SelfChanges::by_process`).
    pub fn names_processes(self) -> bool {
        self == Kind::Fanotify
    }
}

/// Why fanotify could not watch SOURCE, in a few words for `worldfs status`; the whole error is
/// in the log (`-v`).
fn why_not_fanotify(e: &anyhow::Error) -> String {
    use fanotify_fid::FanotifyError;
    let fan = e.chain().find_map(|c| c.downcast_ref::<FanotifyError>());
    match fan {
        Some(FanotifyError::Init(libc::EPERM) | FanotifyError::Mark(libc::EPERM)) => {
            "the daemon is not root".to_owned()
        }
        Some(FanotifyError::Init(libc::EINVAL)) => {
            "the kernel's fanotify does not report names (Linux 5.9 or later does)".to_owned()
        }
        Some(FanotifyError::Mark(libc::EOPNOTSUPP)) => {
            "SOURCE's file system gives file handles fanotify cannot open again, as overlayfs does"
                .to_owned()
        }
        Some(FanotifyError::Mark(libc::ENODEV | libc::EXDEV)) => {
            "SOURCE's file system has no id of its own, as a btrfs subvolume".to_owned()
        }
        _ => format!("{e:#}"),
    }
}

/// A watch on SOURCE whose events wait for a kernel connection to invalidate.
pub struct Watcher {
    /// notify's watches, which stop when dropped: on SOURCE with inotify, on the file systems
    /// mounted below it with fanotify (made when there is one). Shared with the thread that
    /// follows the mount table.
    inotify: Arc<Mutex<Option<RecommendedWatcher>>>,
    events: Arc<Inbox<Seen>>,
    prefix: PathBuf,
    pub kind: Kind,
    /// Why inotify, when fanotify was tried first and could not watch SOURCE.
    not_fanotify: Option<String>,
    /// The mount table, read before any watch was set; followed from [`Watcher::run`] on.
    table: Option<mounts::Table>,
}

impl Watcher {
    /// Starts watching before the mount exists, so nothing changed in between is missed.
    pub fn start(store: &InodeStore, with: WatchWith) -> anyhow::Result<Self> {
        let prefix = PathBuf::from(format!("/proc/self/fd/{}", store.root_fd().as_raw_fd()));
        // Read before any watch is set: whatever is mounted below SOURCE after it is reported.
        let table = store
            .root_fd()
            .try_clone_to_owned()
            .and_then(mounts::Table::open)
            .inspect_err(|e| {
                warn!(
                    "file systems mounted below SOURCE may go unwatched (mounted later, or \
                     with fanotify at all): reading the mount table failed: {e}"
                )
            })
            .ok();
        let mut watcher = Self {
            inotify: Arc::default(),
            events: Arc::new(Inbox::default()),
            prefix,
            kind: Kind::Inotify,
            not_fanotify: None,
            table: None,
        };
        let mark = match with {
            WatchWith::Inotify => None,
            _ => Some(
                sys::fd_path(store.root_fd())
                    .context("reading SOURCE's path back")
                    .and_then(|source| fanotify::Mark::start(store.root_fd(), source)),
            ),
        };
        match mark {
            Some(Ok(mark)) => {
                let tx = watcher.events.clone();
                mark.spawn(watcher.prefix.clone(), move |ev| tx.push(Seen::Change(ev)))
                    .context("spawning the fanotify thread")?;
                watcher.kind = Kind::Fanotify;
                // The mark sees SOURCE's file system only.
                for rel in table.iter().flat_map(|t| t.below()) {
                    watcher.watch_tree(rel);
                }
            }
            Some(Err(e)) if with == WatchWith::Fanotify => {
                return Err(e.context("--watcher fanotify: SOURCE cannot be watched with fanotify"));
            }
            Some(Err(e)) => {
                info!("watching SOURCE with inotify: fanotify cannot: {e:#}");
                watcher.not_fanotify = Some(why_not_fanotify(&e));
                watcher.watch_source()?;
            }
            None => watcher.watch_source()?,
        }
        watcher.table = table;
        Ok(watcher)
    }

    /// How SOURCE is watched, for `worldfs status`: with inotify where fanotify could not,
    /// why (a watch per directory costs more on a big tree, and can run out).
    pub fn describe(&self) -> String {
        let how = self
            .kind
            .describe(self.table.iter().flat_map(|t| t.below()));
        match &self.not_fanotify {
            Some(why) => format!("{how} (fanotify could not: {why})"),
            None => how,
        }
    }

    /// notify's recursive inotify watch on the whole of SOURCE, file systems mounted below it
    /// included.
    fn watch_source(&mut self) -> anyhow::Result<()> {
        let mut inotify = self.inotify.lock();
        let watching = watch(&mut inotify, &self.events, &self.prefix);
        if let Err(e) = watching {
            if matches!(e.kind, notify::ErrorKind::MaxFilesWatch) {
                let at = e
                    .paths
                    .first()
                    .map(|p| p.strip_prefix(&self.prefix).unwrap_or(p));
                anyhow::bail!("{}", unwatched_message(at));
            }
            return Err(anyhow::Error::new(e).context(
                "watching SOURCE for changes behind the mount failed, so the kernel caches \
                 nothing (slower, never stale)",
            ));
        }
        Ok(())
    }

    /// An inotify watch on `rel` and the directories below it (a file system mounted there).
    /// Failing, it is handled as a watcher's error: named, and what it leaves unseen is not
    /// cached.
    fn watch_tree(&self, rel: &Path) {
        watch_tree(&self.inotify, &self.events, &self.prefix, rel);
    }

    /// Follows the mount table: a file system mounted below SOURCE is watched, the path where
    /// one came or went is told to the watcher thread, and `told` (what `worldfs status`
    /// shows) says how SOURCE is watched now. A change made since the table was read is
    /// reported at once.
    fn follow(&self, mut table: mounts::Table, told: Arc<OpStats>) -> std::io::Result<()> {
        let (inotify, events, prefix) = (
            self.inotify.clone(),
            self.events.clone(),
            self.prefix.clone(),
        );
        let kind = self.kind;
        std::thread::Builder::new()
            .name("worldfs-mounts".into())
            .spawn(move || {
                loop {
                    let changes = match table.next_change() {
                        Ok(changes) => changes,
                        Err(e) => {
                            warn!(
                                "following the mount table failed: file systems mounted or \
                                 unmounted below SOURCE from now on will not be watched: {e}"
                            );
                            return;
                        }
                    };
                    for rel in &changes.mounted {
                        info!("a file system was mounted at {} in SOURCE", rel.display());
                        watch_tree(&inotify, &events, &prefix, rel);
                    }
                    for rel in &changes.unmounted {
                        info!(
                            "the file system at {} in SOURCE was unmounted",
                            rel.display()
                        );
                        // What it covered: a directory inotify's walk may have gone past
                        // into the mount (fanotify's mark sees it), or a file system mounted
                        // there before it, whose watches the one on top replaced.
                        if kind == Kind::Inotify || table.mounted_at(rel) {
                            watch_tree(&inotify, &events, &prefix, rel);
                        }
                    }
                    if !changes.mounted.is_empty() || !changes.unmounted.is_empty() {
                        *told.watcher.lock() = Some(kind.describe(table.below()));
                    }
                    // After the watches: whatever is counted again from here is watched.
                    for rel in changes.mounted.into_iter().chain(changes.unmounted) {
                        events.push(Seen::Remounted(rel));
                    }
                }
            })
            .map(drop)
    }

    /// Hands events to a thread that invalidates through `notifier` until the watcher drops,
    /// and follows the mount table from here on (`told`: where `worldfs status` reads how
    /// SOURCE is watched).
    pub fn run(
        mut self,
        store: Arc<InodeStore>,
        notifier: Notifier,
        observe: ObservationSink,
        self_changes: Arc<SelfChanges>,
        kernel_cache: KernelCache,
        told: Arc<OpStats>,
    ) -> std::io::Result<JoinHandle<()>> {
        if let Some(table) = self.table.take() {
            self.follow(table, told)?;
        }
        std::thread::Builder::new()
            .name("worldfs-watch".into())
            .spawn(move || {
                let inval = Invalidator {
                    store,
                    notifier,
                    observe,
                    self_changes,
                };
                // Kept until the process ends: dropping notify's watcher would stop its watches.
                let Watcher {
                    inotify: _inotify,
                    events,
                    prefix,
                    ..
                } = self;
                let mut batch = Vec::new();
                loop {
                    events.take_all(&mut batch);
                    let mut last: Option<&notify::Event> = None;
                    for seen in &batch {
                        let ev = match seen {
                            Seen::Change(ev) => ev,
                            Seen::Remounted(rel) => {
                                inval.remounted(rel);
                                last = None;
                                continue;
                            }
                        };
                        match ev {
                            Ok(ev) if last.is_some_and(|l| repeats(l, ev)) => {}
                            // inotify's word for each watched directory of a file system
                            // unmounted below SOURCE, which is not a removal: the mount table
                            // names the mount point (`Seen::Remounted`).
                            Ok(ev) if ev.info() == Some("unmount") => {}
                            Ok(ev) => inval.handle(&prefix, ev),
                            Err(e) if permission_denied(e) => {
                                // Nothing was missed: the directory was never watched. A rescan
                                // would not watch it either.
                                for p in &e.paths {
                                    let rel = p.strip_prefix(&prefix).unwrap_or(p);
                                    warn!(
                                        "cannot watch {} (permission denied): changes made behind \
                                         the mount below it are not seen",
                                        rel.display()
                                    );
                                }
                            }
                            Err(e) if matches!(e.kind, notify::ErrorKind::MaxFilesWatch) => {
                                // A directory created since (an `npm install` makes thousands)
                                // is not watched: changes below it would go unseen, and what
                                // the kernel keeps could be served stale. Nothing is kept from
                                // now on, and the world is told it cannot see every change.
                                if kernel_cache.withdraw() {
                                    let at = e.paths.first().map(|p| {
                                        p.strip_prefix(&prefix).unwrap_or(p).to_path_buf()
                                    });
                                    warn!("{}", unwatched_message(at.as_deref()));
                                    inval.lost_sight(at.unwrap_or_default());
                                }
                            }
                            Err(e) => {
                                warn!("watcher error, invalidating everything: {e}");
                                inval.everything();
                            }
                        }
                        last = ev.as_ref().ok();
                    }
                }
            })
    }
}

/// notify's recursive watch on `path`, made with the watcher if there is none yet.
fn watch(
    inotify: &mut Option<RecommendedWatcher>,
    events: &Arc<Inbox<Seen>>,
    path: &Path,
) -> notify::Result<()> {
    let watcher = match inotify {
        Some(w) => w,
        None => {
            let tx = events.clone();
            // Only changes: notify's default mask includes opens and closes, so every file the
            // mount opens would wake two threads for an event that is then ignored (8% of a
            // `cat` of every file went into queuing them).
            let config = notify::Config::default().with_event_kinds(EventKindMask::CORE);
            inotify.insert(RecommendedWatcher::new(
                move |ev| tx.push(Seen::Change(ev)),
                config,
            )?)
        }
    };
    watcher.watch(path, RecursiveMode::Recursive)
}

/// [`Watcher::watch_tree`], for the mount table's thread too.
fn watch_tree(
    inotify: &Mutex<Option<RecommendedWatcher>>,
    events: &Arc<Inbox<Seen>>,
    prefix: &Path,
    rel: &Path,
) {
    if let Err(e) = watch(&mut inotify.lock(), events, &prefix.join(rel)) {
        events.push(Seen::Change(Err(e)));
    }
}

/// What `worldfs mount` says when inotify refused to watch `at` (relative to SOURCE).
fn unwatched_message(at: Option<&Path>) -> String {
    let place = match at {
        Some(p) if !p.as_os_str().is_empty() => format!("{} (and what is below it)", p.display()),
        _ => "a directory of SOURCE".to_owned(),
    };
    format!(
        "inotify's watch limit is reached: {place} cannot be watched, and changes made behind \
         the mount there would go unseen, so the kernel caches nothing from now on (slower, \
         never stale). Raise the limit (sysctl fs.inotify.max_user_watches) and mount again"
    )
}

/// inotify needs read access to a directory to watch it: a mount made without root meets
/// directories it may not read (a build directory root made, say).
fn permission_denied(e: &notify::Error) -> bool {
    matches!(&e.kind, notify::ErrorKind::Io(io) if io.kind() == std::io::ErrorKind::PermissionDenied)
}

/// Whether `ev`, right after `prev`, says nothing new: the same content or metadata change of
/// the same names. A file written in many pieces (behind the mount, or through it when the
/// kernel writes to the backing file) reports each; handling one stats the names as they are
/// when it is handled, so its twin queued behind it would find the same and repeat the work.
fn repeats(prev: &notify::Event, ev: &notify::Event) -> bool {
    let content = matches!(
        ev.kind,
        EventKind::Modify(ModifyKind::Data(_) | ModifyKind::Metadata(_))
            | EventKind::Access(AccessKind::Close(AccessMode::Write))
    );
    content && prev.kind == ev.kind && prev.paths == ev.paths && !ev.need_rescan()
}

struct Invalidator {
    store: Arc<InodeStore>,
    notifier: Notifier,
    observe: ObservationSink,
    self_changes: Arc<SelfChanges>,
}

impl Invalidator {
    fn handle(&self, prefix: &Path, ev: &notify::Event) {
        if ev.need_rescan() {
            self.everything();
            return;
        }
        // A rename comes as its old name (`From`), its new name (`To`), then both together:
        // the last says nothing new, and taking it again would count each name twice.
        if matches!(
            ev.kind,
            EventKind::Modify(ModifyKind::Name(RenameMode::Both))
        ) {
            return;
        }
        // A watched directory that moved also reports itself (inotify's MOVE_SELF, the only
        // old-name event without a rename cookie), after its parent reported the same name.
        if matches!(
            ev.kind,
            EventKind::Modify(ModifyKind::Name(RenameMode::From))
        ) && ev.tracker().is_none()
            && ev.paths.iter().all(|p| p.as_path() != prefix)
        {
            return;
        }
        let change = match ev.kind {
            EventKind::Create(_) => ExternalChange::Created,
            EventKind::Remove(RemoveKind::File) => ExternalChange::RemovedFile,
            EventKind::Remove(_) => ExternalChange::Removed,
            // Named by the event, not by whether the name exists when the event is read: a
            // watcher running behind would take the new name of a file deleted since for a
            // removal, and match the mount's own removal of it to the wrong event.
            EventKind::Modify(ModifyKind::Name(RenameMode::From)) => ExternalChange::Removed,
            EventKind::Modify(ModifyKind::Name(_)) => ExternalChange::Created,
            EventKind::Modify(_) => ExternalChange::Modified,
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => ExternalChange::Modified,
            EventKind::Access(_) => return,
            EventKind::Any | EventKind::Other => ExternalChange::Modified,
        };
        let namespace = matches!(
            ev.kind,
            EventKind::Create(_) | EventKind::Remove(_) | EventKind::Modify(ModifyKind::Name(_))
        );
        // Named by fanotify: the daemon makes every name change and setattr the mount serves
        // (and, with daemon I/O, every write).
        let own = ev.attrs.process_id() == Some(std::process::id());
        for path in &ev.paths {
            let Ok(rel) = path.strip_prefix(prefix) else {
                continue;
            };
            if own && namespace && rel.file_name().is_some() {
                // The echo of a name change made through the mount, named by its process:
                // nothing to learn from it, so nothing to stat.
                continue;
            }
            // One stat of the path (and, for name changes, of its parent) serves every decision.
            let st = self.stat(rel);
            let mut change = match (ev.kind, &st) {
                // A rename of which side is not known: the old name is gone, the new one exists.
                (
                    EventKind::Modify(ModifyKind::Name(RenameMode::Any | RenameMode::Other)),
                    None,
                ) => ExternalChange::Removed,
                _ => change,
            };
            let name_change = match change {
                ExternalChange::Created if namespace => Some(NameChange::Created),
                ExternalChange::Removed | ExternalChange::RemovedFile if namespace => {
                    Some(NameChange::Removed)
                }
                _ => None,
            };
            match (name_change, rel.file_name()) {
                (Some(nc), Some(name)) => {
                    let parent_rel = rel.parent().unwrap_or(Path::new(""));
                    let parent_st = self.stat(parent_rel);
                    let Some(p) = &parent_st else {
                        // The directory is gone (an `rm -r` through the mount or behind it has
                        // moved on to it): its own removal or rename is reported, and drops
                        // every cached name below it, in the kernel and in the world. Without
                        // it, its names cannot be matched to the mount's own changes either.
                        continue;
                    };
                    match (nc, &st) {
                        (NameChange::Created, Some(child))
                            if self.self_changes.created_again(
                                p.st_dev,
                                p.st_ino,
                                name,
                                child.st_ino,
                            ) =>
                        {
                            // notify's walk of a new directory and the kernel both reported it.
                            continue;
                        }
                        (NameChange::Removed, _) => {
                            self.self_changes.removal_reported(p.st_dev, p.st_ino, name)
                        }
                        _ => {}
                    }
                    if self.self_changes.take(p.st_dev, p.st_ino, name, nc) {
                        // The echo of an operation made through the mount.
                        continue;
                    }
                    if nc == NameChange::Removed {
                        // A kept passthrough registration holds its file open. The kernel
                        // usually forgets an inode once its name is invalidated, which drops
                        // the registration; one it keeps (another cached name) must not keep
                        // a deleted file's space. Which one it was is not worth finding.
                        self.store.retained.clear();
                    }
                    self.inval_known(st.as_ref());
                    if let Some(parent) = self.node_at(parent_rel, parent_st.as_ref()) {
                        self.inval_entry(parent, name);
                        // The parent's cached listing and mtime are stale too.
                        self.inval_inode(parent);
                    }
                }
                _ => {
                    let inode = st.as_ref().and_then(|st| self.inode_at(st));
                    if let (Some(st), Some(inode)) = (&st, &inode) {
                        self.inval_changed(st, inode);
                    }
                    if change == ExternalChange::Modified {
                        match (&st, &inode) {
                            // Gone already: its removal is reported on its own (by the mount or
                            // as a removal behind it), and a change to a name that no longer
                            // exists would only bring a deleted entry back until re-hashed.
                            (None, _) => continue,
                            (Some(_), _) if own => change = ExternalChange::Echo,
                            // Perhaps the echo of a change the mount itself is making.
                            (Some(_), Some(i)) if i.own_writes.may_echo() => {
                                change = ExternalChange::Echo;
                            }
                            _ => {}
                        }
                    }
                }
            }
            // Who made it, when the watcher says and it was not the mount itself.
            let pid = match ev.attrs.process_id() {
                Some(p) if !own => p,
                _ => 0,
            };
            self.observe
                .emit(Op::External { change }, pid, || Some(rel.to_path_buf()));
        }
    }

    /// What `rel` leads to is another directory now (a file system was mounted or unmounted
    /// there): the kernel looks the name up again, which reaches it, and the world counts what
    /// is below it again.
    fn remounted(&self, rel: &Path) {
        if let (Some(name), Some(parent_rel)) = (rel.file_name(), rel.parent())
            && let Some(parent) = self.node_at(parent_rel, self.stat(parent_rel).as_ref())
        {
            self.inval_entry(parent, name);
        }
        self.observe.emit(
            Op::External {
                change: ExternalChange::Remounted,
            },
            0,
            || Some(rel.to_path_buf()),
        );
    }

    /// The node id the kernel knows for the directory at `rel`, stated as `st`.
    fn node_at(&self, rel: &Path, st: Option<&libc::stat>) -> Option<u64> {
        if rel.as_os_str().is_empty() {
            return Some(ROOT_ID);
        }
        st.and_then(|st| self.store.known(st.st_dev, st.st_ino))
    }

    fn stat(&self, rel: &Path) -> Option<libc::stat> {
        if rel.as_os_str().is_empty() {
            return sys::fstat(self.store.root_fd()).ok();
        }
        let c = sys::cstr(rel.as_os_str()).ok()?;
        sys::fstatat(self.store.root_fd().as_fd(), &c, libc::AT_SYMLINK_NOFOLLOW).ok()
    }

    /// The inode the kernel knows for the backing inode `st` describes, if it knows it.
    fn inode_at(&self, st: &libc::stat) -> Option<Arc<Inode>> {
        self.store
            .known(st.st_dev, st.st_ino)
            .and_then(|id| self.store.get(id).ok())
    }

    /// Drops the kernel's cached attributes and pages of the inode now at a path, if the kernel
    /// knows it (its content or metadata changed, or a name now leads to it).
    fn inval_known(&self, st: Option<&libc::stat>) {
        if let Some(id) = st.and_then(|st| self.store.known(st.st_dev, st.st_ino)) {
            self.inval_inode(id);
        }
    }

    /// [`Invalidator::inval_known`] for a content or metadata change of a regular file, except
    /// when the kernel already has exactly these attributes and holds no pages of the file
    /// (kernel passthrough, and never opened through the page cache): then the event is the
    /// echo of the mount's own write or setattr, and dropping the kernel's attributes would
    /// only cost a GETATTR per file (an `rm -rf` after creating files through the mount paid
    /// one each).
    fn inval_changed(&self, st: &libc::stat, inode: &Inode) {
        if st.st_mode & libc::S_IFMT == libc::S_IFREG
            && self.store.no_file_pages.load(Ordering::Relaxed)
            && !inode.may_have_pages()
            && inode.kernel_has(st)
        {
            return;
        }
        self.inval_inode(inode.nodeid);
    }

    fn inval_inode(&self, id: u64) {
        if let Err(e) = self.notifier.inval_inode(INodeNo(id), 0, 0) {
            debug!("inval_inode({id}): {e}");
        }
    }

    fn inval_entry(&self, parent: u64, name: &OsStr) {
        if let Err(e) = self.notifier.inval_entry(INodeNo(parent), name) {
            debug!("inval_entry({parent}, {:?}): {e}", name.as_bytes());
        }
    }

    /// After lost events nothing cached can be trusted: drop every known inode and name.
    fn everything(&self) {
        self.drop_all();
        self.observe.emit(
            Op::External {
                change: ExternalChange::Rescan,
            },
            0,
            || Some(PathBuf::new()),
        );
    }

    /// Changes below `at` (relative to SOURCE) will go unseen: what the kernel holds is
    /// dropped, and the world told.
    fn lost_sight(&self, at: PathBuf) {
        self.drop_all();
        self.observe.emit(
            Op::External {
                change: ExternalChange::Unwatched,
            },
            0,
            || Some(at),
        );
    }

    /// Drops every name, attribute and page the kernel holds.
    fn drop_all(&self) {
        self.store.retained.clear();
        for (id, parent, name) in self.store.all_names() {
            self.inval_inode(id);
            if let Some((parent, name)) = parent.zip(name) {
                self.inval_entry(parent, &name);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use notify::event::{CreateKind, DataChange};

    fn event(kind: EventKind, path: &str) -> notify::Event {
        notify::Event::new(kind).add_path(PathBuf::from(path))
    }

    #[test]
    fn the_watch_limit_is_named_with_the_directory_and_the_way_out() {
        let m = unwatched_message(Some(Path::new("node_modules/left-pad")));
        assert!(
            m.starts_with(
                "inotify's watch limit is reached: node_modules/left-pad (and what is below it) \
                 cannot be watched, and changes"
            ),
            "{m}"
        );
        assert!(
            m.ends_with("fs.inotify.max_user_watches) and mount again"),
            "{m}"
        );
        assert!(!m.contains("  "), "{m}");
        assert!(unwatched_message(None).contains("a directory of SOURCE cannot be watched"));
    }

    #[test]
    fn only_a_content_change_right_after_its_twin_is_skipped() {
        let write = EventKind::Modify(ModifyKind::Data(DataChange::Any));
        let a = event(write, "/s/a");
        assert!(repeats(&a, &event(write, "/s/a")));
        assert!(!repeats(&a, &event(write, "/s/b")));
        let create = EventKind::Create(CreateKind::File);
        // A name that comes back is news even if it looks the same.
        assert!(!repeats(&event(create, "/s/a"), &event(create, "/s/a")));
        assert!(!repeats(&event(create, "/s/a"), &a));
        let rescan = event(write, "/s/a").set_flag(notify::event::Flag::Rescan);
        assert!(!repeats(&a, &rescan));
    }
}
