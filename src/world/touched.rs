//! Which files each conversation's own tool calls read or changed, and when by its own clock.
//!
//! Two Claude Code sessions on one mount share the files, but not what they looked at: the
//! first one's model never saw what the second one read. Without telling them apart, each
//! session's projection would spend its budget on the other's files, and every call of one
//! would age the other's files as if its own agent had moved on. So each conversation counts
//! its own steps and notes the files its steps named (a Read's file, an Edit's, the files a
//! Bash command printed or wrote; not those it only ran through, as a test run does). While
//! another conversation works on the mount too, a projection for one shows its own files aged
//! by its own steps, leaves out the files only the others touched, and keeps showing the files
//! no session named (the user's `cat` in a terminal), aged as always. With a single
//! conversation nothing changes: the world is its own.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Most files noted per conversation. A session names a few hundred files at most; past this,
/// the one touched longest ago is forgotten (and shows as no session's, aged by the mount's turn).
pub const MAX_TOUCHED: usize = 1024;

/// One conversation's steps and the files they touched.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Touched {
    steps: u64,
    at: HashMap<PathBuf, u64>,
}

impl Touched {
    /// Steps recorded for the conversation: its own turn clock.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// A step of the conversation was recorded. Files touched during it were noted before.
    pub fn step(&mut self) {
        self.steps += 1;
    }

    /// The conversation's tool calls read or changed `paths` in its current step. Whether that
    /// is news: a path not noted at this step before.
    pub fn touch_all<'a>(&mut self, paths: impl IntoIterator<Item = &'a Path>) -> bool {
        let mut news = false;
        for p in paths {
            news |= self.at(p) != Some(self.steps);
            self.touch(p);
        }
        news
    }

    /// The conversation's tool call read or changed `path` in its current step.
    pub fn touch(&mut self, path: &Path) {
        if let Some(at) = self.at.get_mut(path) {
            *at = self.steps;
            return;
        }
        if self.at.len() >= MAX_TOUCHED
            && let Some(oldest) = self
                .at
                .iter()
                .min_by(|a, b| a.1.cmp(b.1).then_with(|| a.0.cmp(b.0)))
                .map(|(p, _)| p.clone())
        {
            self.at.remove(&oldest);
        }
        self.at.insert(path.to_path_buf(), self.steps);
    }

    /// The step at which the conversation last touched `path`.
    pub fn at(&self, path: &Path) -> Option<u64> {
        self.at.get(path).copied()
    }

    pub fn is_empty(&self) -> bool {
        self.steps == 0 && self.at.is_empty()
    }

    /// How many files are noted.
    pub fn len(&self) -> usize {
        self.at.len()
    }

    /// Every file with its step, in path order (for a save).
    pub fn files(&self) -> Vec<(PathBuf, u64)> {
        let mut v: Vec<_> = self.at.iter().map(|(p, s)| (p.clone(), *s)).collect();
        v.sort();
        v
    }

    /// As saved: the step count and the files, the newest [`MAX_TOUCHED`] of them kept, none
    /// later than the count.
    pub fn restore(steps: u64, mut files: Vec<(PathBuf, u64)>) -> Self {
        files.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        files.truncate(MAX_TOUCHED);
        Self {
            steps,
            at: files.into_iter().map(|(p, s)| (p, s.min(steps))).collect(),
        }
    }
}

/// How one conversation sees the world while others work on the mount too.
#[derive(Debug, Clone, Default)]
pub struct SessionView {
    steps: u64,
    own: HashMap<PathBuf, u64>,
    others: HashSet<PathBuf>,
}

/// What a conversation's view makes of one file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Seen {
    /// Its own steps touched it, `age` of its steps ago.
    Own { age: u64 },
    /// Only other conversations' steps touched it: not its to show.
    Others,
    /// No conversation's step named it: the mount's, aged by the mount's turn.
    Shared,
}

impl SessionView {
    /// The view of `own` among `others` (every other conversation).
    pub fn new<'a>(own: &Touched, others: impl IntoIterator<Item = &'a Touched>) -> Self {
        let mut other_files = HashSet::new();
        for t in others {
            other_files.extend(t.at.keys().filter(|p| !own.at.contains_key(*p)).cloned());
        }
        Self {
            steps: own.steps,
            own: own.at.clone(),
            others: other_files,
        }
    }

    pub fn seen(&self, path: &Path) -> Seen {
        match self.own.get(path) {
            Some(at) => Seen::Own {
                age: self.steps.saturating_sub(*at),
            },
            None if self.others.contains(path) => Seen::Others,
            None => Seen::Shared,
        }
    }

    /// How many of its own steps ago the conversation's step `at` was.
    pub fn age_of_step(&self, at: u64) -> u64 {
        self.steps.saturating_sub(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn files_age_by_the_conversations_own_steps() {
        let mut a = Touched::default();
        a.touch(&p("a.py"));
        a.step();
        a.touch(&p("b.py"));
        a.step();
        a.step();
        let mut b = Touched::default();
        b.touch(&p("b.py"));
        b.touch(&p("c.py"));
        for _ in 0..10 {
            b.step();
        }
        let view = SessionView::new(&a, [&b]);
        assert_eq!(view.seen(&p("a.py")), Seen::Own { age: 3 });
        assert_eq!(
            view.seen(&p("b.py")),
            Seen::Own { age: 2 },
            "touched by both: its own, by its own clock"
        );
        assert_eq!(view.seen(&p("c.py")), Seen::Others);
        assert_eq!(view.seen(&p("d.py")), Seen::Shared);
        let view_b = SessionView::new(&b, [&a]);
        assert_eq!(view_b.seen(&p("a.py")), Seen::Others);
        assert_eq!(view_b.seen(&p("b.py")), Seen::Own { age: 10 });
        assert_eq!(view_b.age_of_step(4), 6);
    }

    #[test]
    fn touching_again_in_the_same_step_is_no_news() {
        let mut t = Touched::default();
        assert!(t.touch_all([Path::new("a.py"), Path::new("b.py")]));
        assert!(!t.touch_all([Path::new("a.py")]));
        t.step();
        assert!(t.touch_all([Path::new("a.py")]), "a later step renews it");
        assert!(!t.touch_all(std::iter::empty()));
    }

    #[test]
    fn a_touch_again_renews_and_past_the_limit_the_oldest_goes() {
        let mut t = Touched::default();
        for i in 0..MAX_TOUCHED {
            t.touch(&p(&format!("f{i}")));
            t.step();
        }
        t.touch(&p("f0"));
        t.step();
        assert_eq!(t.at(&p("f0")), Some(MAX_TOUCHED as u64));
        t.touch(&p("new"));
        assert_eq!(t.at(&p("f1")), None, "the one touched longest ago");
        assert!(t.at(&p("f0")).is_some() && t.at(&p("new")).is_some());
        assert_eq!(t.files().len(), MAX_TOUCHED);
    }

    #[test]
    fn a_restore_keeps_the_newest_and_no_step_past_the_count() {
        let mut files: Vec<_> = (0..MAX_TOUCHED as u64 + 5)
            .map(|i| (p(&format!("f{i}")), i))
            .collect();
        files.push((p("future"), 1 << 40));
        let t = Touched::restore(2000, files);
        assert_eq!(t.steps(), 2000);
        assert_eq!(t.files().len(), MAX_TOUCHED);
        assert_eq!(t.at(&p("future")), Some(2000));
        assert_eq!(t.at(&p("f0")), None);
        assert!(Touched::restore(0, Vec::new()).is_empty());
    }
}
