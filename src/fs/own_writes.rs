//! Whether the mount itself is changing an inode's content or attributes, so the watcher can
//! tell the echo of those changes from changes made behind the mount.
//!
//! Every write through the mount reaches the backing file, and inotify reports it on SOURCE
//! like any other change: three `echo x > f` through a mount used to count as six changes
//! behind it, each stamping the file as changed again. Unlike name events (`self_changes`),
//! data and attribute events cannot be matched one for one: inotify merges an event with an
//! identical one still queued, so the mount's write and a write behind the mount can arrive as
//! one. The watcher therefore only *suspects* an echo, while the inode is open for writing
//! through the mount or for `ECHO_WINDOW` after the mount last changed it, and the world still
//! re-hashes the file for a suspected echo; it only does not count or stamp it as a change
//! made behind the mount. A change behind the mount in that window is thus never missed, only
//! stamped with the mount's change instead of its own.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How long after the mount's last change an event is still taken for its echo. Inotify
/// delivers in microseconds; the watcher thread can fall behind by much more while it
/// invalidates a burst (an `rm -rf` of thousands of files), and an echo it reaches too late is
/// only counted as a change behind the mount, as before.
pub const ECHO_WINDOW: Duration = Duration::from_secs(2);

/// Per inode: open writable handles, and when the mount last changed it.
#[derive(Debug, Default)]
pub struct OwnWrites {
    writers: AtomicU32,
    /// Milliseconds since `epoch()` plus one; 0 when the mount never changed it.
    last_ms: AtomicU64,
}

fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    u64::try_from(epoch().elapsed().as_millis())
        .unwrap_or(u64::MAX - 1)
        .saturating_add(1)
}

impl OwnWrites {
    /// A handle that can write was opened through the mount.
    pub fn opened_for_writing(&self) {
        self.writers.fetch_add(1, Ordering::AcqRel);
        self.changed();
    }

    /// A handle that could write was released; its writes reached the backing file before.
    pub fn closed_for_writing(&self) {
        // Saturating: a release without its open (a handle from before a restart) is ignored.
        let _ = self
            .writers
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        self.changed();
    }

    /// The mount changed the inode's data or attributes (setattr, xattrs).
    pub fn changed(&self) {
        self.last_ms.store(now_ms(), Ordering::Release);
    }

    /// Whether an inotify event on this inode may be the echo of the mount's own change.
    pub fn may_echo(&self) -> bool {
        self.may_echo_at(now_ms())
    }

    fn may_echo_at(&self, now_ms: u64) -> bool {
        if self.writers.load(Ordering::Acquire) > 0 {
            return true;
        }
        let last = self.last_ms.load(Ordering::Acquire);
        last != 0 && now_ms.saturating_sub(last) <= ECHO_WINDOW.as_millis() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inode_never_changed_by_the_mount_is_never_an_echo() {
        assert!(!OwnWrites::default().may_echo());
    }

    #[test]
    fn open_writers_and_recent_changes_may_echo() {
        let w = OwnWrites::default();
        w.opened_for_writing();
        w.opened_for_writing();
        w.closed_for_writing();
        assert!(w.may_echo());
        w.closed_for_writing();
        assert!(
            w.may_echo(),
            "just closed: its last write may still be queued"
        );
        // An unmatched release must not wrap the count around and mark it open forever.
        w.closed_for_writing();
        assert_eq!(w.writers.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn the_window_closes() {
        let w = OwnWrites::default();
        w.changed();
        let last = w.last_ms.load(Ordering::Relaxed);
        let window = ECHO_WINDOW.as_millis() as u64;
        assert!(w.may_echo_at(last + window));
        assert!(!w.may_echo_at(last + window + 1));
        // An open writer keeps it open however long the write takes.
        w.opened_for_writing();
        assert!(w.may_echo_at(last + 10 * window));
    }
}
