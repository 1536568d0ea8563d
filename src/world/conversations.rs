//! The conversations working on one mount, each with its own goal and structured state.
//!
//! Two Claude Code sessions in one project (a second terminal asking questions while the first
//! works) are two conversations on one mount: the files are one world, but each has its own
//! first prompt, compaction, resume and task list. Kept apart by the harness's id for the
//! session (Claude Code's `session_id`, which its hooks carry and its API calls repeat in the
//! `x-claude-code-session-id` header), so one session's start does not clear the other's goal,
//! nor its tasks show up in the other's projection.
//!
//! A client that names no session speaks of the *current* conversation: the one last changed.
//! A single-session harness never needs to know sessions exist, and a user's `worldfs goal`
//! edits the conversation under way. Until some client names a session, the conversation is
//! unnamed, and the first session named takes it over: a goal set by hand before Claude Code
//! starts, or one saved by a version that kept a single goal, is that session's.

use parking_lot::RwLock;
use std::path::Path;

use super::harness::{Step, StructuredState};
use super::touched::{SessionView, Touched};

/// Most conversations kept; the one changed longest ago goes first. Sessions are started by a
/// person (or a script running agents), and a goal nobody changed in 64 newer sessions is over.
pub const MAX_CONVERSATIONS: usize = 64;
/// Longest session id accepted, in bytes: ids are UUIDs; this is room for any harness's own.
pub const MAX_SESSION_BYTES: usize = 256;

/// What one conversation is working toward.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Conversation {
    pub goal: Option<String>,
    /// It was compacted (Claude Code's `/compact`, or its automatic compaction): it now opens
    /// with a summary, no longer with the first prompt, and `worldfs proxy` finds it by that.
    /// Cleared with the goal.
    pub compacted: bool,
    /// It was resumed (Claude Code's `--resume`, `--continue`), which earlier one is not known
    /// yet: `worldfs proxy` takes its next main call for it and sets the goal from it
    /// (`goal.adopt`). Not kept across restarts: it lasts one call.
    pub resumed: bool,
    pub state: StructuredState,
    /// Its steps and the files they touched: its own view of the world while other
    /// conversations work on the mount too (see `world::touched`).
    pub touched: Touched,
    /// Its last step, when its steps name it: while other conversations work on the mount too,
    /// the mount's last step may be theirs.
    pub last_step: Option<Step>,
}

impl Conversation {
    /// A conversation with nothing in it is not worth keeping (or saving).
    pub fn is_empty(&self) -> bool {
        self.goal.is_none()
            && !self.compacted
            && !self.resumed
            && self.state.is_empty()
            && self.touched.is_empty()
            && self.last_step.is_none()
    }

    /// Clears the goal, and with it what depended on it.
    pub fn set_goal(&mut self, goal: Option<String>) {
        self.goal = goal.filter(|g| !g.is_empty());
        if self.goal.is_none() {
            self.compacted = false;
            self.resumed = false;
        }
    }
}

/// The conversations by session id, the current one last. The empty id is a conversation no
/// session was named for.
#[derive(Debug, Default)]
pub struct Conversations {
    list: RwLock<Vec<(String, Conversation)>>,
}

/// A session id as given, `None` and `""` both meaning "the current conversation".
fn named(session: Option<&str>) -> Option<&str> {
    session.filter(|s| !s.is_empty())
}

/// Where the conversation of `session` is in `list`: the session's own, else the unnamed one
/// (which it takes over); without a session, the current one.
fn find(list: &[(String, Conversation)], session: Option<&str>) -> Option<usize> {
    match named(session) {
        Some(id) => list
            .iter()
            .position(|(k, _)| k == id)
            .or_else(|| list.iter().position(|(k, _)| k.is_empty())),
        None => list.len().checked_sub(1),
    }
}

/// Puts a changed conversation back as the current one, making room past the limit.
fn put_back(list: &mut Vec<(String, Conversation)>, id: String, conv: Conversation) {
    list.push((id, conv));
    if list.len() > MAX_CONVERSATIONS {
        list.remove(0);
    }
}

impl Conversations {
    /// Reads the conversation of `session` (`None`: the current one). A session not known
    /// reads as an empty conversation, and is not created.
    pub fn read<R>(&self, session: Option<&str>, f: impl FnOnce(&Conversation) -> R) -> R {
        let list = self.list.read();
        match find(&list, session) {
            Some(i) => f(&list[i].1),
            None => f(&Conversation::default()),
        }
    }

    /// Changes the conversation of `session` (`None`: the current one, or a new unnamed one
    /// when there is none), which becomes the current one. The lock is held throughout, so two
    /// changes at once (Claude Code runs tool calls in parallel, each with its own hook) both
    /// land.
    pub fn update<R>(&self, session: Option<&str>, f: impl FnOnce(&mut Conversation) -> R) -> R {
        let mut list = self.list.write();
        // Taken out rather than copied: nothing can fail, and a conversation's files are many.
        let (was, mut conv) = match find(&list, session) {
            Some(i) => list.remove(i),
            None => Default::default(),
        };
        let r = f(&mut conv);
        put_back(&mut list, named(session).map_or(was, str::to_owned), conv);
        r
    }

    /// As [`Self::update`], but a conversation already known stays where it is: noting what a
    /// request showed is no sign of which session the hooks heard from last.
    pub fn note<R>(&self, session: Option<&str>, f: impl FnOnce(&mut Conversation) -> R) -> R {
        {
            let mut list = self.list.write();
            if let Some(i) = find(&list, session) {
                return f(&mut list[i].1);
            }
        }
        self.update(session, f)
    }

    /// As [`Self::update`], but an error leaves everything as it was: the conversation is
    /// changed on a copy, kept (and made the current one) only when `f` succeeds.
    pub fn try_update<R, E>(
        &self,
        session: Option<&str>,
        f: impl FnOnce(&mut Conversation) -> Result<R, E>,
    ) -> Result<R, E> {
        let mut list = self.list.write();
        let at = find(&list, session);
        let mut conv = at.map(|i| list[i].1.clone()).unwrap_or_default();
        let r = f(&mut conv)?;
        let was = at.map(|i| list.remove(i).0).unwrap_or_default();
        put_back(&mut list, named(session).map_or(was, str::to_owned), conv);
        Ok(r)
    }

    /// How the conversation of `session` (`None`: the current one) sees the world: `None`
    /// while no other conversation has recorded a step, when the world is all its own.
    pub fn view(&self, session: Option<&str>) -> Option<SessionView> {
        let list = self.list.read();
        let at = find(&list, session);
        let others = || {
            list.iter()
                .enumerate()
                .filter(move |(i, _)| Some(*i) != at)
                .map(|(_, (_, c))| &c.touched)
        };
        if !others().any(|t| t.steps() > 0) {
            return None;
        }
        let own = at.map(|i| &list[i].1.touched);
        Some(SessionView::new(
            own.unwrap_or(&Touched::default()),
            others(),
        ))
    }

    /// Whether a step of any conversation showed `path` (a Read of it, a command that printed
    /// it) or its request did.
    pub fn ever_shown(&self, path: &Path) -> bool {
        self.list
            .read()
            .iter()
            .any(|(_, c)| c.touched.at(path).is_some())
    }

    /// The current conversation's session id (`Some("")` for an unnamed one), if any.
    pub fn current(&self) -> Option<String> {
        self.list.read().last().map(|(k, _)| k.clone())
    }

    /// Whether the session `id` has a conversation, or would take over the unnamed one.
    pub fn knows(&self, id: &str) -> bool {
        find(&self.list.read(), Some(id)).is_some()
    }

    /// How many conversations are known.
    pub fn len(&self) -> usize {
        self.list.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.list.read().is_empty()
    }

    /// Every conversation, the current one last, for a save.
    pub fn all(&self) -> Vec<(String, Conversation)> {
        self.list.read().clone()
    }

    /// Replaces every conversation, the current one last (as [`Self::all`] gives them); empty
    /// ones are dropped, and only the newest [`MAX_CONVERSATIONS`] kept.
    pub fn restore(&self, mut all: Vec<(String, Conversation)>) {
        all.retain(|(_, c)| !c.is_empty());
        let excess = all.len().saturating_sub(MAX_CONVERSATIONS);
        all.drain(..excess);
        *self.list.write() = all;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn goal(c: &Conversations, session: Option<&str>) -> Option<String> {
        c.read(session, |c| c.goal.clone())
    }

    #[test]
    fn each_session_has_its_own_goal_and_the_last_changed_is_current() {
        let c = Conversations::default();
        c.update(Some("a"), |c| c.set_goal(Some("fix a".into())));
        c.update(Some("b"), |c| c.set_goal(Some("fix b".into())));
        assert_eq!(goal(&c, Some("a")).as_deref(), Some("fix a"));
        assert_eq!(goal(&c, Some("b")).as_deref(), Some("fix b"));
        assert_eq!(goal(&c, None).as_deref(), Some("fix b"));
        // A new session's start (its goal cleared) leaves the other's goal alone.
        c.update(Some("c"), |c| c.set_goal(None));
        assert_eq!(goal(&c, Some("a")).as_deref(), Some("fix a"));
        assert_eq!(goal(&c, None), None, "the new session is the current one");
        // Without a session, a change goes to the current conversation.
        c.update(Some("a"), |c| c.compacted = true);
        c.update(None, |c| c.set_goal(Some("fix a, and more".into())));
        assert_eq!(goal(&c, Some("a")).as_deref(), Some("fix a, and more"));
        assert_eq!(c.current().as_deref(), Some("a"));
        assert_eq!(c.len(), 3);
        // Reading a session not known creates nothing; "" is no session.
        assert_eq!(goal(&c, Some("z")), None);
        assert!(!c.knows("z") && c.knows("a"));
        assert_eq!(goal(&c, Some("")).as_deref(), Some("fix a, and more"));
        assert_eq!(c.len(), 3);
        // Noting what a request showed changes a session where it is.
        c.note(Some("b"), |c| c.compacted = true);
        assert!(c.read(Some("b"), |c| c.compacted));
        assert_eq!(c.current().as_deref(), Some("a"));
        c.note(Some("d"), |c| c.set_goal(Some("new".into())));
        assert_eq!(c.current().as_deref(), Some("d"), "one not known is made");
    }

    #[test]
    fn the_first_session_named_takes_over_the_unnamed_conversation() {
        let c = Conversations::default();
        c.update(None, |c| c.set_goal(Some("set by hand".into())));
        assert_eq!(c.current().as_deref(), Some(""));
        assert!(c.knows("s1"));
        assert_eq!(goal(&c, Some("s1")).as_deref(), Some("set by hand"));
        c.update(Some("s1"), |c| c.compacted = true);
        assert_eq!(c.all().len(), 1);
        assert_eq!(c.current().as_deref(), Some("s1"));
        // Taken over: the next session starts from nothing.
        assert!(!c.knows("s2"));
        assert_eq!(goal(&c, Some("s2")), None);
    }

    #[test]
    fn a_goal_cleared_clears_its_compaction_and_resume() {
        let mut conv = Conversation {
            goal: Some("g".into()),
            compacted: true,
            resumed: true,
            ..Conversation::default()
        };
        conv.set_goal(Some("h".into()));
        assert!(conv.compacted && conv.resumed);
        conv.set_goal(Some(String::new()));
        assert_eq!(conv, Conversation::default());
        assert!(conv.is_empty());
    }

    #[test]
    fn a_failed_change_changes_nothing() {
        let c = Conversations::default();
        c.update(Some("a"), |c| c.set_goal(Some("ga".into())));
        c.update(Some("b"), |c| c.set_goal(Some("gb".into())));
        let r: Result<(), &str> = c.try_update(Some("a"), |c| {
            c.set_goal(None);
            Err("no")
        });
        assert!(r.is_err());
        assert_eq!(goal(&c, Some("a")).as_deref(), Some("ga"));
        assert_eq!(c.current().as_deref(), Some("b"), "nor made current");
        let _ = c.try_update(Some("new"), |_| Err::<(), _>("no"));
        assert_eq!(c.len(), 2, "nor created");
    }

    #[test]
    fn past_the_limit_the_conversation_changed_longest_ago_goes() {
        let c = Conversations::default();
        for i in 0..MAX_CONVERSATIONS {
            c.update(Some(&i.to_string()), |c| c.set_goal(Some(format!("g{i}"))));
        }
        // Touching the first makes it the newest, so the second is the one to go.
        c.update(Some("0"), |_| ());
        c.update(Some("new"), |c| c.set_goal(Some("n".into())));
        assert_eq!(c.len(), MAX_CONVERSATIONS);
        assert_eq!(goal(&c, Some("0")).as_deref(), Some("g0"));
        assert_eq!(goal(&c, Some("1")), None);
        assert_eq!(c.current().as_deref(), Some("new"));
    }

    #[test]
    fn a_conversation_has_a_view_of_its_own_once_another_records_steps() {
        use crate::world::touched::Seen;
        use std::path::Path;
        let c = Conversations::default();
        c.update(Some("a"), |c| {
            c.touched.touch(Path::new("a.py"));
            c.touched.step();
        });
        c.update(Some("b"), |c| c.set_goal(Some("gb".into())));
        assert!(
            c.view(Some("a")).is_none(),
            "alone with steps: the world is its own"
        );
        let b = c.view(None).expect("b, current, is new while a works");
        assert_eq!(b.seen(Path::new("a.py")), Seen::Others);
        c.update(Some("b"), |c| {
            c.touched.touch(Path::new("b.py"));
            c.touched.step();
        });
        let a = c.view(Some("a")).expect("b records steps too");
        assert_eq!(a.seen(Path::new("a.py")), Seen::Own { age: 1 });
        assert_eq!(a.seen(Path::new("b.py")), Seen::Others);
        let current = c.view(None).expect("b is the current one");
        assert_eq!(current.seen(Path::new("a.py")), Seen::Others);
        let stranger = c
            .view(Some("z"))
            .expect("a session not known sees the others'");
        assert_eq!(stranger.seen(Path::new("b.py")), Seen::Others);
        assert_eq!(stranger.seen(Path::new("x.py")), Seen::Shared);
        assert_eq!(c.len(), 2, "a view creates nothing");
    }

    #[test]
    fn a_restore_keeps_the_order_and_drops_empty_conversations() {
        let c = Conversations::default();
        c.update(Some("a"), |c| c.set_goal(Some("ga".into())));
        c.update(Some("b"), |_| ());
        c.update(Some("c"), |c| c.set_goal(Some("gc".into())));
        let back = Conversations::default();
        back.restore(c.all());
        assert_eq!(back.len(), 2);
        assert_eq!(back.current().as_deref(), Some("c"));
        assert_eq!(goal(&back, Some("a")).as_deref(), Some("ga"));
    }
}
