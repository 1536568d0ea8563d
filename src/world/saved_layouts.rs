//! What each requester was sent last, kept with the world across a restart (`snapshot`).
//!
//! Without it the first projection after a restart was laid out anew: pieces in the order of
//! their stamps rather than where the requester's earlier projections had put them, so the
//! prompt cache held none of it, and the thrash guard had forgotten every eviction it learnt
//! from. With it, a restart in which nothing changed sends the same bytes as before.
//!
//! Saved per requester: what its last selection kept and in which form, when it last showed
//! each candidate, where its pieces stand in the stream, and its thrash guard's counts. Not
//! saved: everything the selection was offered, which is every entry of the world plus the
//! command outputs; the entries are taken as offered again, the outputs are saved by key.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::path_map::{PathMap, PathSet};
use super::placements::{Placed, Placement};
use super::policy::Form;
use super::ranges::ByteRange;
use super::thrash::Thrash;
use super::{Layout, World};

/// One requester's layout as saved. Paths that are not UTF-8 are left out (JSON cannot carry
/// them); the pieces they name are placed anew.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedLayout {
    /// The requester ([`crate::projection::ProjectionRequest::requester_key`]).
    pub key: String,
    /// The newest access the selection knew of.
    pub seq: u64,
    /// When it last asked, in selections.
    pub used: u64,
    pub kept: Vec<(PathBuf, SavedForm)>,
    /// Command outputs the selection was offered (entries are taken as offered).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offered_outputs: Vec<PathBuf>,
    /// Per candidate, its stamp when a selection of this requester last kept it.
    pub shown_seq: Vec<(PathBuf, u64)>,
    /// Pieces in stream order with their placement `[major, minor, turn, fingerprint]`.
    pub placed: Vec<(PathBuf, [u64; 4])>,
    pub unchanged_prefix: usize,
    /// Per file shown in parts, its parts as (first line, count).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub segments: Vec<(PathBuf, Vec<(u64, u64)>)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rereads: Vec<(PathBuf, u16)>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub evictions: Vec<(PathBuf, u16)>,
}

/// [`Form`] as saved: byte ranges as `[start, end)` pairs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SavedForm {
    Whole,
    Notice,
    Ranges(Vec<(u64, u64)>),
}

impl From<&Form> for SavedForm {
    fn from(f: &Form) -> Self {
        match f {
            Form::Whole => SavedForm::Whole,
            Form::Notice => SavedForm::Notice,
            Form::Ranges(r) => SavedForm::Ranges(r.iter().map(|r| (r.start, r.end)).collect()),
        }
    }
}

impl From<SavedForm> for Form {
    fn from(f: SavedForm) -> Self {
        match f {
            SavedForm::Whole => Form::Whole,
            SavedForm::Notice => Form::Notice,
            SavedForm::Ranges(r) => Form::Ranges(
                r.into_iter()
                    .map(|(start, end)| ByteRange { start, end })
                    .collect(),
            ),
        }
    }
}

fn utf8(p: &Path) -> bool {
    p.to_str().is_some()
}

/// `(path, f(value))` for every UTF-8 path of `map`, in path order (two saves of the same
/// world are the same file).
fn sorted<V, T>(map: &PathMap<V>, f: impl Fn(&V) -> T) -> Vec<(PathBuf, T)> {
    let mut v: Vec<(PathBuf, T)> = map
        .iter()
        .filter(|(p, _)| utf8(p))
        .map(|(p, x)| (p.to_path_buf(), f(x)))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

impl SavedLayout {
    fn of(key: &str, l: &Layout) -> SavedLayout {
        let placed = &l.placed;
        let (rereads, evictions) = l.thrash.counts();
        let mut segments: Vec<(PathBuf, Vec<(u64, u64)>)> = placed
            .segments
            .iter()
            .filter(|(p, _)| utf8(p))
            .map(|(p, s)| (p.clone(), s.clone()))
            .collect();
        segments.sort();
        let mut offered_outputs: Vec<PathBuf> = l
            .offered
            .keys()
            .filter(|p| p.is_absolute() && utf8(p))
            .map(Path::to_path_buf)
            .collect();
        offered_outputs.sort();
        SavedLayout {
            key: key.to_owned(),
            seq: l.seq,
            used: l.used,
            kept: sorted(&l.kept, |f| SavedForm::from(f)),
            offered_outputs,
            shown_seq: sorted(&l.shown_seq, |&s| s),
            placed: placed
                .order
                .iter()
                .filter(|p| utf8(p))
                .filter_map(|p| {
                    let at = placed.by_key.get(p)?;
                    Some((p.clone(), [at.major, at.minor, at.turn, at.fingerprint]))
                })
                .collect(),
            unchanged_prefix: placed.unchanged_prefix,
            segments,
            rereads: sort_counts(rereads),
            evictions: sort_counts(evictions),
        }
    }

    /// The layout again, offered `entries` (every entry path) and its own outputs.
    fn into_layout(self, entries: &PathSet) -> Layout {
        let mut by_key = HashMap::with_capacity(self.placed.len());
        let mut order = Vec::with_capacity(self.placed.len());
        for (p, [major, minor, turn, fingerprint]) in self.placed {
            by_key.insert(
                p.clone(),
                Placement {
                    major,
                    minor,
                    turn,
                    fingerprint,
                },
            );
            order.push(p);
        }
        let mut offered = entries.clone();
        for p in &self.offered_outputs {
            offered.insert(p, ());
        }
        let kept: Vec<(PathBuf, Form)> = self
            .kept
            .into_iter()
            .map(|(p, f)| (p, Form::from(f)))
            .collect();
        Layout {
            kept: kept.iter().map(|(p, f)| (p.as_path(), f.clone())).collect(),
            offered,
            seq: self.seq,
            shown_seq: self
                .shown_seq
                .iter()
                .map(|(p, s)| (p.as_path(), *s))
                .collect(),
            placed: Arc::new(Placed {
                by_key,
                // A prefix longer than the pieces kept would point past them.
                unchanged_prefix: self.unchanged_prefix.min(order.len()),
                order,
                segments: self.segments.into_iter().collect(),
            }),
            thrash: Thrash::from_counts(self.rereads, self.evictions),
            used: self.used,
        }
    }
}

fn sort_counts(mut v: Vec<(PathBuf, u16)>) -> Vec<(PathBuf, u16)> {
    v.retain(|(p, _)| utf8(p));
    v.sort();
    v
}

impl World {
    /// Every requester's layout, and which asked last, for [`World::snapshot`].
    pub(super) fn saved_layouts(&self) -> (Vec<SavedLayout>, Option<String>) {
        let layouts = self.layouts.lock();
        let mut saved: Vec<SavedLayout> =
            layouts.iter().map(|(k, l)| SavedLayout::of(k, l)).collect();
        saved.sort_by(|a, b| a.key.cmp(&b.key));
        (saved, self.last_requester.lock().clone())
    }

    /// Takes back the layouts saved with the world, once its entries are restored: each
    /// entry shown in part gets back what it showed of it.
    pub(super) fn restore_layouts(&self, saved: Vec<SavedLayout>, last: Option<String>) {
        if saved.is_empty() {
            return;
        }
        let paths = self.cache.filter_map_in_order(|p, _| Some(p.to_path_buf()));
        let entries: PathSet = paths.iter().map(PathBuf::as_path).collect();
        let mut layouts = self.layouts.lock();
        for s in saved {
            let key = s.key.clone();
            let layout = s.into_layout(&entries);
            for (p, form) in layout.kept.iter() {
                if let Form::Ranges(r) = form
                    && let Some(mut e) = self.cache.get_mut(p)
                {
                    e.shown.set(&key, r);
                }
            }
            layouts.insert(key, layout);
        }
        *self.last_requester.lock() = last.filter(|k| layouts.contains_key(k));
    }
}
