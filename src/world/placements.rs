//! Where each piece of a projection was placed the last time a requester asked, so the next
//! projection for the same requester keeps unchanged pieces where they were and appends the
//! rest: a prompt cache holds a prefix, so a piece that moves costs everything after it.
//!
//! The world keeps these records beside the requester's last selection (same layout key:
//! `ProjectionRequest::requester_key`; same bound) for the projection; it never reads them itself.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// One piece's place in the stream of a projection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Placement {
    /// Pieces sort by `(major, minor)`: `major` grows with every projection that placed new
    /// pieces, `minor` orders the pieces placed by one projection (by their own stamps).
    pub major: u64,
    pub minor: u64,
    /// World turn when the piece was placed.
    pub turn: u64,
    /// What the piece showed when placed: a changed piece is placed anew, at the end.
    pub fingerprint: u64,
}

/// Placements of one layout: by piece key (an entry's call, or a command output's key), and
/// the keys in the order the stream showed them.
#[derive(Debug, Clone, Default)]
pub struct Placed {
    pub by_key: HashMap<PathBuf, Placement>,
    /// Keys in stream order: the prefix a later projection shares with this one is what a
    /// prompt cache can still serve of it.
    pub order: Vec<PathBuf>,
    /// What that projection counted as unchanged from the one before it: a projection of
    /// the same stream again reuses it, so asking twice gives the same bytes.
    pub unchanged_prefix: usize,
    /// Per entry path, the parts of the file it showed as ranges: (1-based first line, count).
    pub segments: HashMap<PathBuf, Vec<(u64, u64)>>,
}

impl Placed {
    pub fn get(&self, key: &Path) -> Option<&Placement> {
        self.by_key.get(key)
    }

    pub fn values(&self) -> impl Iterator<Item = &Placement> {
        self.by_key.values()
    }
}
