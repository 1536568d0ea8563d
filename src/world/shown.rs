//! What each requester's last selection showed of a file in part, kept on the file's entry so
//! it moves with its lines when the file changes (as the views in `recent` do).
//!
//! A projection that showed some places of a big file keeps them when the agent reads another
//! place ([`super::Candidate::held`]): dropping a part from the middle of a prompt-cached stream
//! writes everything after it again, and the agent often returns to places it read. After an
//! edit, byte ranges of the old version would show other lines, so the ranges follow the edit.
//!
//! Most entries are never shown in part: the record is one pointer until one is.

use std::sync::Arc;

use super::ranges::{ByteRange, RangeSet};

/// Past this many requesters, the oldest record is forgotten (the world forgets their layouts
/// too).
const MAX_REQUESTERS: usize = 64;

/// One requester's record: its layout key and the ranges its last selection showed.
type Record = (Arc<str>, RangeSet);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[expect(
    clippy::box_collection,
    reason = "one pointer on every entry (a Vec is three), and few entries ever have a record"
)]
pub struct ShownParts(Option<Box<Vec<Record>>>);

impl ShownParts {
    /// What the last selection for `layout` showed in part, if it did.
    pub fn get(&self, layout: &str) -> Option<&RangeSet> {
        self.0
            .as_deref()?
            .iter()
            .find(|(l, _)| &**l == layout)
            .map(|(_, s)| s)
    }

    /// Records that the selection for `layout` showed `ranges`.
    pub fn set(&mut self, layout: &str, ranges: &[ByteRange]) {
        let mut set = RangeSet::new();
        for r in ranges {
            set.insert(*r);
        }
        let all = self.0.get_or_insert_with(Box::default);
        match all.iter_mut().find(|(l, _)| &**l == layout) {
            Some((_, s)) => *s = set,
            None => {
                if all.len() >= MAX_REQUESTERS {
                    all.remove(0);
                }
                all.push((Arc::from(layout), set));
            }
        }
    }

    /// The selection for `layout` did not show it in part.
    pub fn forget(&mut self, layout: &str) {
        if let Some(all) = &mut self.0 {
            all.retain(|(l, _)| &**l != layout);
            if all.is_empty() {
                self.0 = None;
            }
        }
    }

    /// Every record moved to where its lines are in a new version (see `RangeSet::remap`).
    pub fn remap(&mut self, f: impl Fn(ByteRange) -> Option<ByteRange>) {
        for (_, s) in self.0.iter_mut().flat_map(|all| all.iter_mut()) {
            s.remap(&f);
        }
    }

    /// Drops what lies at or beyond `size` (after a truncate).
    pub fn truncate(&mut self, size: u64) {
        for (_, s) in self.0.iter_mut().flat_map(|all| all.iter_mut()) {
            s.truncate(size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_record_per_requester_following_the_file() {
        let mut s = ShownParts::default();
        assert_eq!(s.get("a"), None);
        s.set("a", &[ByteRange::at(100, 10), ByteRange::at(0, 10)]);
        s.set("b", &[ByteRange::at(50, 5)]);
        s.set("a", &[ByteRange::at(200, 10)]);
        assert_eq!(
            s.get("a").map(RangeSet::as_slice),
            Some(&[ByteRange::at(200, 10)][..])
        );
        // three bytes inserted before everything
        s.remap(|r| Some(ByteRange::at(r.start + 3, r.len())));
        assert_eq!(
            s.get("b").map(RangeSet::as_slice),
            Some(&[ByteRange::at(53, 5)][..])
        );
        s.truncate(100);
        assert_eq!(s.get("a").map(RangeSet::as_slice), Some(&[][..]));
        s.forget("a");
        s.forget("b");
        assert_eq!(s, ShownParts::default());
    }
}
