//! The parts of a file an agent has read, as a sorted set of disjoint byte ranges.
//!
//! The mount sees bytes, not lines; turning byte ranges into line ranges is the projection's job,
//! because it needs the current content anyway and lines move when the file is edited.

use serde::Serialize;

/// A half-open byte range `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct ByteRange {
    pub start: u64,
    pub end: u64,
}

impl ByteRange {
    /// The range starting at `offset` spanning `len` bytes, saturating at `u64::MAX`.
    pub fn at(offset: u64, len: u64) -> Self {
        Self {
            start: offset,
            end: offset.saturating_add(len),
        }
    }

    pub fn len(&self) -> u64 {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

/// Disjoint, sorted, non-adjacent ranges. Adjacent or overlapping inserts are coalesced so that a
/// sequential reader (4 KiB at a time) costs one range, not thousands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RangeSet {
    ranges: Vec<ByteRange>,
}

impl RangeSet {
    /// Above this many fragments the set is collapsed into its hull: a reader that scattered more
    /// reads than this over a file has effectively seen all of the span, and the set stays small.
    pub const MAX_FRAGMENTS: usize = 32;

    pub fn new() -> Self {
        Self::default()
    }

    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    pub fn as_slice(&self) -> &[ByteRange] {
        &self.ranges
    }

    /// Total bytes covered.
    pub fn covered(&self) -> u64 {
        self.ranges.iter().map(ByteRange::len).sum()
    }

    /// Each range lengthened past its end by `percent` of its length, up to `size`.
    pub fn extended_ahead(&self, percent: u64, size: u64) -> RangeSet {
        let mut set = RangeSet::new();
        for r in &self.ranges {
            let more = r.len().saturating_mul(percent) / 100;
            let end = r.end.saturating_add(more).min(size).max(r.end);
            set.insert(ByteRange {
                start: r.start,
                end,
            });
        }
        set
    }

    pub fn insert(&mut self, r: ByteRange) {
        if r.is_empty() {
            return;
        }
        // First range that ends at or after r.start can touch r; everything before it is untouched.
        let first = self.ranges.partition_point(|x| x.end < r.start);
        let mut merged = r;
        let mut last = first;
        while last < self.ranges.len() && self.ranges[last].start <= merged.end {
            merged.start = merged.start.min(self.ranges[last].start);
            merged.end = merged.end.max(self.ranges[last].end);
            last += 1;
        }
        self.ranges.splice(first..last, std::iter::once(merged));
        if self.ranges.len() > Self::MAX_FRAGMENTS {
            self.collapse();
        }
    }

    /// Replaces the set with a single range spanning all of it.
    fn collapse(&mut self) {
        if let (Some(first), Some(last)) = (self.ranges.first(), self.ranges.last()) {
            let hull = ByteRange {
                start: first.start,
                end: last.end,
            };
            self.ranges = vec![hull];
        }
    }

    /// Shifts nothing but drops what lies at or beyond `size` (after a truncate).
    pub fn truncate(&mut self, size: u64) {
        self.ranges.retain(|r| r.start < size);
        if let Some(last) = self.ranges.last_mut() {
            last.end = last.end.min(size);
        }
    }

    /// Each range replaced by `f` of it (dropped on `None`), for a new version of the file.
    pub fn remap(&mut self, f: impl Fn(ByteRange) -> Option<ByteRange>) {
        let old = std::mem::take(&mut self.ranges);
        for r in old.into_iter().filter_map(f) {
            self.insert(r);
        }
    }

    /// Whether `[0, size)` is entirely covered.
    pub fn covers(&self, size: u64) -> bool {
        size == 0 || matches!(self.ranges.as_slice(), [only] if only.start == 0 && only.end >= size)
    }
}

/// The last few distinct places an agent read in a file, most recent last.
///
/// The extent ([`RangeSet`]) only grows: once a file was read whole, it says nothing about where
/// the agent is looking now. When a file is too big to show whole, these are what a projection
/// shows instead. A read that continues or widens the latest view extends it, so one logical
/// read split into many kernel requests stays one view; a read inside the latest view is a
/// narrower look and becomes a view of its own (after `nl -ba f | grep` read a big file whole,
/// `sed -n 340,360p f` says where the agent is looking).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct RecentViews {
    views: Vec<ByteRange>,
}

impl RecentViews {
    /// Views remembered; older ones are forgotten.
    pub const CAP: usize = 6;

    pub fn record(&mut self, r: ByteRange) {
        if r.is_empty() {
            return;
        }
        if let Some(last) = self.views.last_mut() {
            let inside = r.start >= last.start && r.end <= last.end;
            if r == *last {
                return;
            }
            if !inside && r.start <= last.end && r.end >= last.start {
                last.start = last.start.min(r.start);
                last.end = last.end.max(r.end);
                return;
            }
        }
        // A view seen again becomes the most recent.
        self.views
            .retain(|v| !(v.start >= r.start && v.end <= r.end));
        self.views.push(r);
        if self.views.len() > Self::CAP {
            self.views.remove(0);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.views.is_empty()
    }

    /// Views exactly as [`RecentViews::views`] gave them (a saved world), not recorded one by
    /// one: recording would merge views that only came to overlap as their lines moved.
    pub fn restored(mut views: Vec<ByteRange>) -> Self {
        views.retain(|v| !v.is_empty());
        let excess = views.len().saturating_sub(Self::CAP);
        views.drain(..excess);
        Self { views }
    }

    /// The views, most recent last.
    pub fn views(&self) -> &[ByteRange] {
        &self.views
    }

    /// The views as a set (sorted, merged).
    pub fn as_set(&self) -> RangeSet {
        let mut set = RangeSet::new();
        for v in &self.views {
            set.insert(*v);
        }
        set
    }

    /// The first `limit` bytes of the newest view: where the agent was last, when there is room
    /// for no more.
    pub fn newest_head(&self, limit: u64) -> Option<ByteRange> {
        let v = self.views.last()?;
        let len = v.len().min(limit);
        (len > 0).then(|| ByteRange::at(v.start, len))
    }

    /// The newest views whose union stays within `limit` bytes, newest first; a view wider than
    /// `limit` on its own is passed over (a whole-file scan says nothing about where to look).
    pub fn newest_within(&self, limit: u64) -> RangeSet {
        let mut set = RangeSet::new();
        for v in self.views.iter().rev() {
            if v.len() > limit {
                continue;
            }
            let mut next = set.clone();
            next.insert(*v);
            if next.covered() > limit {
                break;
            }
            set = next;
        }
        set
    }

    /// Each view replaced by `f` of it (dropped on `None`), in the same order, for a new
    /// version of the file.
    pub fn remap(&mut self, f: impl Fn(ByteRange) -> Option<ByteRange>) {
        let old = std::mem::take(&mut self.views);
        for v in old.into_iter().filter_map(f) {
            if !v.is_empty() {
                self.views.retain(|w| *w != v);
                self.views.push(v);
            }
        }
    }

    /// Drops what lies at or beyond `size` (after a truncate).
    pub fn truncate(&mut self, size: u64) {
        self.views.retain(|r| r.start < size);
        for v in &mut self.views {
            v.end = v.end.min(size);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn views_extend_ahead_within_the_file() {
        let mut s = RangeSet::new();
        s.insert(ByteRange::at(100, 400));
        s.insert(ByteRange::at(1000, 100));
        let e = s.extended_ahead(25, 1110);
        assert_eq!(
            e.as_slice(),
            &[ByteRange::at(100, 500), ByteRange::at(1000, 110)]
        );
        // lengthened ranges that meet merge
        let e = s.extended_ahead(200, 10_000);
        assert_eq!(e.as_slice(), &[ByteRange::at(100, 1200)]);
    }

    #[test]
    fn sequential_reads_coalesce() {
        let mut s = RangeSet::new();
        for i in 0..100 {
            s.insert(ByteRange::at(i * 4096, 4096));
        }
        assert_eq!(s.as_slice(), &[ByteRange::at(0, 409_600)]);
        assert!(s.covers(409_600));
        assert!(!s.covers(409_601));
    }

    #[test]
    fn overlapping_and_disjoint() {
        let mut s = RangeSet::new();
        s.insert(ByteRange::at(100, 10));
        s.insert(ByteRange::at(0, 10));
        s.insert(ByteRange::at(105, 20));
        s.insert(ByteRange::at(50, 0));
        assert_eq!(
            s.as_slice(),
            &[
                ByteRange { start: 0, end: 10 },
                ByteRange {
                    start: 100,
                    end: 125
                }
            ]
        );
        assert_eq!(s.covered(), 35);
    }

    #[test]
    fn truncate_drops_tail() {
        let mut s = RangeSet::new();
        s.insert(ByteRange::at(0, 10));
        s.insert(ByteRange::at(20, 10));
        s.truncate(25);
        assert_eq!(
            s.as_slice(),
            &[
                ByteRange { start: 0, end: 10 },
                ByteRange { start: 20, end: 25 }
            ]
        );
        s.truncate(5);
        assert_eq!(s.as_slice(), &[ByteRange { start: 0, end: 5 }]);
    }

    #[test]
    fn too_many_fragments_collapse_to_hull() {
        let mut s = RangeSet::new();
        for i in 0..=RangeSet::MAX_FRAGMENTS as u64 {
            s.insert(ByteRange::at(i * 10, 1));
        }
        assert_eq!(s.as_slice().len(), 1);
        assert_eq!(s.as_slice()[0].start, 0);
    }

    proptest! {
        /// With fewer inserts than the fragment cap the set is exactly the union of what was
        /// inserted; with any number, it stays sorted, disjoint, non-adjacent and covers at
        /// least everything inserted.
        #[test]
        fn merging_matches_a_bitmap(ops in prop::collection::vec((0u64..400, 0u64..40), 0..80)) {
            let mut s = RangeSet::new();
            let mut bitmap = vec![false; 512];
            for (off, len) in &ops {
                s.insert(ByteRange::at(*off, *len));
                for b in *off..off + len { bitmap[b as usize] = true; }
            }
            let r = s.as_slice();
            for w in r.windows(2) {
                prop_assert!(w[0].end < w[1].start, "not disjoint/non-adjacent: {:?}", r);
            }
            prop_assert!(r.iter().all(|x| !x.is_empty()));
            let mut from_set = vec![false; 512];
            for x in r { for b in x.start..x.end { from_set[b as usize] = true; } }
            for (i, want) in bitmap.iter().enumerate() {
                prop_assert!(!want || from_set[i], "byte {} read but not covered", i);
            }
            if ops.len() <= RangeSet::MAX_FRAGMENTS {
                prop_assert_eq!(from_set, bitmap);
            }
        }
    }

    #[test]
    fn recent_views_merge_continuations_and_forget_the_oldest() {
        let mut v = RecentViews::default();
        v.record(ByteRange::at(0, 4096));
        v.record(ByteRange::at(4096, 4096));
        assert_eq!(v.as_set().as_slice(), &[ByteRange::at(0, 8192)]);
        let cap = RecentViews::CAP as u64;
        for i in 1..=cap {
            v.record(ByteRange::at(i * 100_000, 10));
        }
        let set = v.as_set();
        assert_eq!(set.as_slice().len(), RecentViews::CAP);
        assert!(!set.as_slice().contains(&ByteRange::at(0, 8192)));
        assert_eq!(
            set.as_slice().last(),
            Some(&ByteRange::at(cap * 100_000, 10))
        );
        // seen again: moves to the end instead of taking another slot
        v.record(ByteRange::at(200_000, 10));
        assert_eq!(v.as_set().as_slice().len(), RecentViews::CAP);
        v.truncate(250_000);
        assert_eq!(
            v.as_set().as_slice(),
            &[ByteRange::at(100_000, 10), ByteRange::at(200_000, 10)]
        );
    }

    #[test]
    fn a_narrow_look_after_a_whole_scan_is_a_view_of_its_own() {
        let mut v = RecentViews::default();
        // `nl -ba big.py | grep ...` scans it whole, then `sed -n` looks at two places
        v.record(ByteRange::at(0, 500_000));
        v.record(ByteRange::at(40_000, 2_000));
        v.record(ByteRange::at(90_000, 1_000));
        assert_eq!(v.as_set().as_slice(), &[ByteRange::at(0, 500_000)]);
        // the scan is passed over; the two looks fit in 4 KB, only the newest in 1.5 KB
        assert_eq!(
            v.newest_within(4_000).as_slice(),
            &[ByteRange::at(40_000, 2_000), ByteRange::at(90_000, 1_000)]
        );
        assert_eq!(
            v.newest_within(1_500).as_slice(),
            &[ByteRange::at(90_000, 1_000)]
        );
        // a glance: the head of the newest view
        assert_eq!(v.newest_head(300), Some(ByteRange::at(90_000, 300)));
        assert_eq!(v.newest_head(5_000), Some(ByteRange::at(90_000, 1_000)));
        assert_eq!(RecentViews::default().newest_head(300), None);
        // widening the newest view still extends it
        v.record(ByteRange::at(90_500, 1_000));
        assert_eq!(
            v.newest_within(4_000).as_slice(),
            &[ByteRange::at(40_000, 2_000), ByteRange::at(90_000, 1_500)]
        );
    }
}
