//! How each open of a regular file moves its data: kernel passthrough, or the FUSE page cache
//! filled by the daemon.
//!
//! Passthrough reads cost nothing per byte, but every one of them makes the kernel drop the
//! inode's cached atime (`fuse_file_accessed`), so the next `stat` or `fstat` is a GETATTR
//! round trip: a `grep -r` or `cat` of a file read before costs OPEN, GETATTR and RELEASE. A
//! read from the FUSE page cache drops nothing, and with `FOPEN_KEEP_CACHE` the pages survive
//! from one open to the next: OPEN and RELEASE only, and no daemon I/O at all once warm. So
//! small files opened for reading use the page cache, and everything else passthrough
//! (sequential I/O on big files stays at native speed, writes never wait on the daemon).
//!
//! The kernel refuses to mix the two on one inode (fs/fuse/iomode.c: a passthrough open while
//! cached opens exist, or the reverse, fails the caller's open with EIO), so the daemon counts
//! the opens of each inode and gives a new open the mode of those still open. Its counts may
//! lag the kernel's (RELEASE arrives after the kernel let go of the file), which only makes it
//! choose the mode of an open already gone, never a mix.
//!
//! Pages cached for an inode go stale when its data changes without passing through them: a
//! change behind the mount (the watcher drops the pages) or a passthrough write (the kernel
//! writes the backing file directly). The kernel drops an inode's pages at every open answered
//! without `FOPEN_KEEP_CACHE`, passthrough opens included, so a passthrough writer starts from
//! none; but its shared mappings outlive it and keep writing to the backing file. So the first
//! cached open after a passthrough open for writing is answered without `FOPEN_KEEP_CACHE` too.

/// Files up to this size are read through the page cache. Larger files use passthrough: their
/// reads are what passthrough is for, and caching them twice (backing and FUSE page cache)
/// would cost memory a `grep` of small files does not.
pub const CACHED_MAX: u64 = 256 * 1024;

/// The mode given to one open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenIo {
    Passthrough,
    /// Through the page cache; `keep_cache`: the pages cached from earlier opens are current.
    Cached {
        keep_cache: bool,
    },
}

/// Opens of one inode by mode, and whether its cached pages may be stale.
#[derive(Debug, Default)]
pub struct InodeOpens {
    passthrough: u32,
    cached: u32,
    pages_stale: bool,
}

impl InodeOpens {
    /// Chooses the mode of a new open and counts it. `reads_only`: opened for reading and not
    /// truncated; `size`: the file's size as last reported to the kernel; `pages_kept`: the
    /// watcher drops pages changed behind the mount (`KernelCache::keeps_pages`). Without it, a
    /// new open goes through the page cache only to join opens that do, and from no pages.
    pub fn open(&mut self, reads_only: bool, size: u64, pages_kept: bool) -> OpenIo {
        let cached = if self.passthrough > 0 {
            false
        } else if self.cached > 0 {
            // Writes of a cached open go through the page cache: the pages stay current.
            true
        } else {
            pages_kept && reads_only && size <= CACHED_MAX
        };
        if cached {
            self.cached += 1;
            let keep_cache = pages_kept && !self.pages_stale;
            self.pages_stale = false;
            OpenIo::Cached { keep_cache }
        } else {
            self.passthrough += 1;
            if !reads_only {
                self.pages_stale = true;
            }
            OpenIo::Passthrough
        }
    }

    /// Counts an open as gone (its RELEASE, or a failure after [`InodeOpens::open`]).
    pub fn release(&mut self, io: OpenIo) {
        match io {
            OpenIo::Passthrough => self.passthrough = self.passthrough.saturating_sub(1),
            OpenIo::Cached { .. } => self.cached = self.cached.saturating_sub(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_reads_are_cached_and_big_files_or_writes_pass_through() {
        let mut o = InodeOpens::default();
        assert_eq!(
            o.open(true, 1000, true),
            OpenIo::Cached { keep_cache: true }
        );
        o.release(OpenIo::Cached { keep_cache: true });
        assert_eq!(o.open(true, CACHED_MAX + 1, true), OpenIo::Passthrough);
        o.release(OpenIo::Passthrough);
        assert_eq!(o.open(false, 10, true), OpenIo::Passthrough);
    }

    #[test]
    fn a_new_open_takes_the_mode_of_the_opens_still_there() {
        let mut o = InodeOpens::default();
        let r = o.open(true, 10, true);
        assert!(matches!(r, OpenIo::Cached { .. }));
        // A writer while a cached reader is open writes through the page cache.
        let w = o.open(false, 10, true);
        assert_eq!(w, OpenIo::Cached { keep_cache: true });
        o.release(r);
        o.release(w);
        // A passthrough writer first: a small read-only open must follow it.
        let w = o.open(false, 10, true);
        assert_eq!(w, OpenIo::Passthrough);
        assert_eq!(o.open(true, 10, true), OpenIo::Passthrough);
    }

    #[test]
    fn pages_are_dropped_after_a_passthrough_write() {
        let mut o = InodeOpens::default();
        let r = o.open(true, 10, true);
        o.release(r);
        let w = o.open(false, 10, true);
        o.release(w);
        assert_eq!(o.open(true, 10, true), OpenIo::Cached { keep_cache: false });
        o.release(OpenIo::Cached { keep_cache: false });
        assert_eq!(o.open(true, 10, true), OpenIo::Cached { keep_cache: true });
    }

    #[test]
    fn without_kept_pages_small_reads_pass_through_or_start_from_no_pages() {
        let mut o = InodeOpens::default();
        assert_eq!(o.open(true, 10, false), OpenIo::Passthrough);
        o.release(OpenIo::Passthrough);
        // Opens through the page cache from before the watcher lost sight: joined, from none.
        let r = o.open(true, 10, true);
        assert_eq!(
            o.open(true, 10, false),
            OpenIo::Cached { keep_cache: false }
        );
        o.release(r);
    }
}
