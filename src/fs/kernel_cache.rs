//! What the kernel may keep of what the daemon tells it: names, attributes and file pages.
//!
//! Long timeouts and pages kept from one open to the next are what make the mount fast, and
//! they are safe only while the watcher sees every change made behind the mount and drops what
//! it changed. Without a watcher (`--no-watch`, or one that could not start), nothing is kept:
//! names and attributes are asked for again at each use, and an open starts from no cached
//! pages, so a change behind the mount is seen at the next open. A watcher can also lose sight
//! while it runs: inotify's watch limit refuses a watch for a directory created later (an
//! `npm install` of thousands), and changes below it would go unseen. From then on the mount
//! keeps nothing, as without a watcher.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// Shared by the file system, which asks it for each reply, and the watcher, which may
/// withdraw it.
#[derive(Debug, Clone)]
pub struct KernelCache {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    timeout: Duration,
    trusted: AtomicBool,
}

impl KernelCache {
    /// `timeout` for names and attributes while `watched`; nothing kept otherwise.
    pub fn new(timeout: Duration, watched: bool) -> Self {
        Self {
            inner: Arc::new(Inner {
                timeout,
                trusted: AtomicBool::new(watched),
            }),
        }
    }

    /// How long the kernel may trust a name (also a name that does not exist) or attributes.
    pub fn ttl(&self) -> Duration {
        if self.keeps_pages() {
            self.inner.timeout
        } else {
            Duration::ZERO
        }
    }

    /// Whether pages cached by one open may serve the next: the watcher drops the pages of a
    /// file changed behind the mount.
    pub fn keeps_pages(&self) -> bool {
        self.inner.trusted.load(Ordering::Acquire)
    }

    /// Changes behind the mount may go unseen from now on: nothing more is kept. Whether this
    /// is news (the first time).
    pub fn withdraw(&self) -> bool {
        self.inner.trusted.swap(false, Ordering::AcqRel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_watched_mount_keeps_until_withdrawn() {
        let k = KernelCache::new(Duration::from_secs(300), true);
        let shared = k.clone();
        assert_eq!(k.ttl(), Duration::from_secs(300));
        assert!(k.keeps_pages());
        assert!(shared.withdraw(), "news the first time");
        assert!(!shared.withdraw());
        assert_eq!(k.ttl(), Duration::ZERO);
        assert!(!k.keeps_pages());
        let unwatched = KernelCache::new(Duration::from_secs(300), false);
        assert_eq!(unwatched.ttl(), Duration::ZERO);
        assert!(!unwatched.keeps_pages());
    }
}
