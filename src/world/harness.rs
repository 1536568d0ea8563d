//! What a harness tells the world about the agent's session, as opposed to what the file system
//! saw: the goal, the runtime framing, structured state, the last real tool call and its result,
//! and command outputs. The socket writes these; projections read them.
//!
//! Framing (workspace, shell, date, model...) is kept apart from content so a projection can put
//! it in the system prompt and keep the cached prefix stable.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};

/// The runtime frame of the session, rendered into the system prompt.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Framing {
    pub workspace: Option<String>,
    pub shell: Option<String>,
    pub date: Option<String>,
    pub timezone: Option<String>,
    pub model: Option<String>,
    /// Anything else the harness wants in the frame (free-form JSON object).
    #[serde(default)]
    pub settings: serde_json::Map<String, serde_json::Value>,
}

/// What the agent has decided and still has to do, kept by the harness.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StructuredState {
    pub intent: Option<String>,
    #[serde(default)]
    pub decisions: Vec<String>,
    #[serde(default)]
    pub constraints: Vec<String>,
    #[serde(default)]
    pub open_loops: Vec<String>,
    #[serde(default)]
    pub ruled_out: Vec<String>,
    /// The agent's own task list, in its order (Claude Code's `TodoWrite` and `Task*` tools,
    /// told by `worldfs hook`): a plan that lives only in the history unless the projection
    /// carries it.
    #[serde(default)]
    pub tasks: Vec<Task>,
}

impl StructuredState {
    pub fn is_empty(&self) -> bool {
        self.intent.is_none()
            && self.decisions.is_empty()
            && self.constraints.is_empty()
            && self.open_loops.is_empty()
            && self.ruled_out.is_empty()
            && self.tasks.is_empty()
    }

    /// Replaces the task list. Ids must be unique and not empty.
    pub fn set_tasks(&mut self, tasks: Vec<Task>) -> Result<(), String> {
        let mut list: Vec<Task> = Vec::with_capacity(tasks.len());
        for mut t in tasks {
            check_id(&t.id)?;
            if list.iter().any(|x| x.id == t.id) {
                return Err(format!("task id {:?} given twice", t.id));
            }
            t.subject = subject(t.subject);
            list.push(t);
        }
        make_room(&mut list)?;
        self.tasks = list;
        Ok(())
    }

    /// Removes the tasks `remove` names (ids not in the list are ignored), then applies
    /// `upsert`: a known id gets the fields given, a new one is added at the end and needs a
    /// subject. On error nothing is changed.
    pub fn edit_tasks(&mut self, upsert: Vec<TaskEdit>, remove: &[String]) -> Result<(), String> {
        let mut list = self.tasks.clone();
        list.retain(|t| !remove.contains(&t.id));
        for e in upsert {
            check_id(&e.id)?;
            if let Some(t) = list.iter_mut().find(|t| t.id == e.id) {
                if let Some(s) = e.subject {
                    t.subject = subject(s);
                }
                if let Some(st) = e.status {
                    t.status = st;
                }
            } else {
                let Some(s) = e.subject else {
                    return Err(format!(
                        "task {:?} is not in the list and has no subject",
                        e.id
                    ));
                };
                list.push(Task {
                    id: e.id,
                    subject: subject(s),
                    status: e.status.unwrap_or_default(),
                });
            }
        }
        make_room(&mut list)?;
        self.tasks = list;
        Ok(())
    }
}

fn check_id(id: &str) -> Result<(), String> {
    if id.is_empty() {
        return Err("a task id must not be empty".into());
    }
    Ok(())
}

fn subject(mut s: String) -> String {
    if s.len() > MAX_TASK_SUBJECT_BYTES {
        let mut at = MAX_TASK_SUBJECT_BYTES;
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        s.truncate(at);
    }
    s
}

/// Over [`MAX_TASKS`], the oldest finished tasks go first; a list of more unfinished ones than
/// that is refused.
fn make_room(list: &mut Vec<Task>) -> Result<(), String> {
    while list.len() > MAX_TASKS {
        match list.iter().position(|t| t.status == TaskStatus::Completed) {
            Some(i) => {
                list.remove(i);
            }
            None => {
                return Err(format!(
                    "at most {MAX_TASKS} tasks that are not done ({} given)",
                    list.len()
                ));
            }
        }
    }
    Ok(())
}

/// A change to one task ([`StructuredState::edit_tasks`]).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskEdit {
    pub id: String,
    pub subject: Option<String>,
    pub status: Option<TaskStatus>,
}

/// Most tasks a state holds. An agent plans in tens; a runaway one must not fill the budget
/// with its list.
pub const MAX_TASKS: usize = 200;
/// Longest task subject kept, in bytes (cut at a character boundary).
pub const MAX_TASK_SUBJECT_BYTES: usize = 500;

/// One item of the agent's task list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Task {
    /// The agent's id for it (Claude Code's task id, or the item's place in a `TodoWrite` list).
    pub id: String,
    pub subject: String,
    #[serde(default)]
    pub status: TaskStatus,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskStatus {
    #[default]
    Pending,
    InProgress,
    Completed,
}

impl TaskStatus {
    /// How a projection labels it.
    pub fn label(self) -> &'static str {
        match self {
            TaskStatus::Pending => "to do",
            TaskStatus::InProgress => "in progress",
            TaskStatus::Completed => "done",
        }
    }
}

/// The last real tool call and its result, projected verbatim at the end.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The harness's own tool_use id (kept as is when it is API-valid).
    pub tool_use_id: String,
    pub tool_name: String,
    pub input: serde_json::Value,
    /// The tool result text as the agent saw it.
    pub result: String,
    #[serde(default)]
    pub is_error: bool,
    /// The assistant's text that accompanied the call, if any.
    #[serde(default)]
    pub assistant_text: Option<String>,
    /// The assistant message's content blocks exactly as the provider returned them (thinking
    /// blocks with signatures must be replayed byte for byte); overrides the fields above when
    /// rendering the assistant turn in the provider's own format.
    #[serde(default)]
    pub raw_assistant_content: Option<serde_json::Value>,
    /// Turn at which it was recorded (filled by the world).
    #[serde(default)]
    pub turn: u64,
    /// Files whose lines the result showed without the mount seeing them read (a Read that
    /// Claude Code answered with "unchanged since your last Read"): the projection keeps them
    /// as it keeps what the step points at, since the result refers to content it does not
    /// hold (filled by the world).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refers_to: Vec<std::path::PathBuf>,
}

/// A command's output, valid as long as the files it read through the mount are unchanged,
/// and nothing below its `subtrees` changed. Or the result of a tool call that no file keeps
/// current (`tool`: a subagent's report, a web page), kept for as long as the policy keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandOutput {
    pub command: String,
    /// Working directory relative to the root ("." for the root).
    pub cwd: String,
    pub output: String,
    pub exit_code: Option<i32>,
    /// Files the command read, with the blake3 hash (hex) of their content when recorded.
    pub inputs: Vec<(PathBuf, String)>,
    /// Directories relative to the root (the empty path: the whole tree) that the output
    /// depends on as a whole: a search's, a listing's, or a command's that a whole-tree scanner
    /// read for. Any change below one (a file's content, a name appearing or going) after `seq`
    /// drops the output, since which of their files it depends on cannot be told.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub subtrees: Vec<PathBuf>,
    pub turn: u64,
    /// Observation sequence number when it was recorded.
    pub seq: u64,
    /// The tool whose call this is the result of, when it is not a command's output (Claude
    /// Code's `Agent`, `WebFetch`, `WebSearch`): what it says was true when it was made, and is
    /// shown as such. `command` is then the tool and its input (`Agent {...}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// The conversation the output belongs to (a subagent's report is its session's, and
    /// another session never saw it); `None`: the mount's, shown to every conversation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// With `session`: how many steps that conversation had recorded, what the output ages by
    /// in its own view of the world (`world::touched`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_step: Option<u64>,
}

/// Harness-provided session state. Cheap to read concurrently; written rarely.
#[derive(Debug, Default)]
pub struct Harness {
    /// What each conversation on the mount works toward: its goal and structured state.
    pub conversations: super::conversations::Conversations,
    pub framing: RwLock<Framing>,
    pub last_step: RwLock<Option<Step>>,
    /// Keyed by (cwd, command); newest last.
    pub commands: RwLock<Vec<CommandOutput>>,
    /// Names of the tools the recorded steps called, first use first (at most
    /// [`MAX_STEP_TOOLS`]): a projection defines them all, so its tool list, the first thing
    /// in a prompt cache's prefix, does not change with the last step's tool.
    pub step_tools: RwLock<Vec<String>>,
    /// Outputs dropped to stay within [`MAX_COMMANDS`] and [`MAX_COMMAND_BYTES`].
    pub commands_dropped_for_room: AtomicU64,
    /// The ids of the last [`RECENT_STEP_IDS`] steps recorded `once`, newest last.
    recent_once: Mutex<std::collections::VecDeque<String>>,
}

/// How many ids of steps recorded `once` are remembered: a harness that cannot tell whether it
/// recorded a step already (Codex's `apply_patch`, read back from its rollout at each later
/// event of its turn) records it again within a few calls.
pub const RECENT_STEP_IDS: usize = 256;

/// Most command outputs kept. A hook records every command the agent runs, and a long session
/// runs thousands; every projection weighs every output kept, while an output many turns old
/// is worth next to nothing to any policy (the worldfs policy halves a command's value every
/// turn). The oldest go first.
pub const MAX_COMMANDS: usize = 256;
/// Most bytes of command text and output kept, for the same reason: far more than any budget
/// shows (32,000 tokens are about 128 KiB of text).
pub const MAX_COMMAND_BYTES: usize = 8 << 20;

/// Tool names [`Harness::step_tools`] keeps; a harness has a few dozen tools at most.
pub const MAX_STEP_TOOLS: usize = 64;

impl Harness {
    /// Whether a step with this id is recorded `once` for the first time (among the last
    /// [`RECENT_STEP_IDS`]); notes it. Checked and noted under one lock: two hooks racing
    /// with the same step record it once.
    pub fn first_time(&self, tool_use_id: &str) -> bool {
        let mut ids = self.recent_once.lock();
        if ids.iter().any(|i| i == tool_use_id) {
            return false;
        }
        if ids.len() == RECENT_STEP_IDS {
            ids.pop_front();
        }
        ids.push_back(tool_use_id.to_owned());
        true
    }

    /// Notes that a step called `name`.
    pub fn note_step_tool(&self, name: &str) {
        let mut tools = self.step_tools.write();
        if tools.len() < MAX_STEP_TOOLS && !tools.iter().any(|t| t == name) {
            tools.push(name.to_owned());
        }
    }

    /// Drops the outputs of `session` whose command `pred` matches.
    pub fn forget_commands(&self, session: Option<&str>, pred: impl Fn(&str) -> bool) {
        self.commands
            .write()
            .retain(|c| !(c.session.as_deref() == session && pred(&c.command)));
    }

    /// Records a command output, replacing an older one of the same command in the same cwd;
    /// the oldest outputs go when more than [`MAX_COMMANDS`] or [`MAX_COMMAND_BYTES`] are kept.
    pub fn record_command(&self, out: CommandOutput) {
        let mut cmds = self.commands.write();
        cmds.retain(|c| {
            !(c.command == out.command && c.cwd == out.cwd && c.session == out.session)
        });
        cmds.push(out);
        let size = |c: &CommandOutput| c.command.len() + c.output.len();
        let mut bytes: usize = cmds.iter().map(size).sum();
        let mut excess = 0;
        // The newest is always kept, however big: it is what the agent just saw.
        while excess + 1 < cmds.len()
            && (cmds.len() - excess > MAX_COMMANDS || bytes > MAX_COMMAND_BYTES)
        {
            bytes -= size(&cmds[excess]);
            excess += 1;
        }
        if excess > 0 {
            cmds.drain(..excess);
            self.commands_dropped_for_room
                .fetch_add(excess as u64, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn output(command: &str, bytes: usize) -> CommandOutput {
        CommandOutput {
            command: command.to_owned(),
            cwd: ".".into(),
            output: "x".repeat(bytes),
            exit_code: Some(0),
            inputs: Vec::new(),
            subtrees: Vec::new(),
            turn: 1,
            seq: 1,
            tool: None,
            session: None,
            session_step: None,
        }
    }

    fn commands(h: &Harness) -> Vec<String> {
        h.commands
            .read()
            .iter()
            .map(|c| c.command.clone())
            .collect()
    }

    fn task(id: &str, subject: &str, status: TaskStatus) -> Task {
        Task {
            id: id.into(),
            subject: subject.into(),
            status,
        }
    }

    fn edit(id: &str, subject: Option<&str>, status: Option<TaskStatus>) -> TaskEdit {
        TaskEdit {
            id: id.into(),
            subject: subject.map(Into::into),
            status,
        }
    }

    #[test]
    fn tasks_are_edited_by_id_in_their_order() {
        let mut s = StructuredState::default();
        s.edit_tasks(vec![edit("1", Some("reproduce"), None)], &[])
            .unwrap();
        s.edit_tasks(
            vec![
                edit("2", Some("fix"), Some(TaskStatus::InProgress)),
                edit("1", None, Some(TaskStatus::Completed)),
            ],
            &[],
        )
        .unwrap();
        assert_eq!(
            s.tasks,
            [
                task("1", "reproduce", TaskStatus::Completed),
                task("2", "fix", TaskStatus::InProgress)
            ]
        );
        // Removing happens first, so an id can be removed and added back in one edit.
        s.edit_tasks(
            vec![edit("1", Some("again"), None)],
            &["1".into(), "9".into()],
        )
        .unwrap();
        assert_eq!(
            s.tasks,
            [
                task("2", "fix", TaskStatus::InProgress),
                task("1", "again", TaskStatus::Pending)
            ]
        );
        // An unknown id without a subject is refused, and the edit changes nothing.
        let before = s.clone();
        let err = s
            .edit_tasks(
                vec![edit("2", Some("renamed"), None), edit("7", None, None)],
                &[],
            )
            .unwrap_err();
        assert!(err.contains("\"7\""), "{err}");
        assert_eq!(s, before);
    }

    #[test]
    fn a_task_list_is_bounded_finished_tasks_going_first() {
        let mut s = StructuredState::default();
        let mut list: Vec<Task> = (0..MAX_TASKS)
            .map(|i| task(&i.to_string(), "t", TaskStatus::Pending))
            .collect();
        list[5].status = TaskStatus::Completed;
        list[9].status = TaskStatus::Completed;
        s.set_tasks(list).unwrap();
        s.edit_tasks(vec![edit("new", Some("n"), None)], &[])
            .unwrap();
        assert_eq!(s.tasks.len(), MAX_TASKS);
        assert!(!s.tasks.iter().any(|t| t.id == "5"));
        assert!(s.tasks.iter().any(|t| t.id == "9"));
        for t in &mut s.tasks {
            t.status = TaskStatus::Pending;
        }
        let err = s
            .edit_tasks(vec![edit("more", Some("m"), None)], &[])
            .unwrap_err();
        assert!(err.contains("at most"), "{err}");
        assert_eq!(s.tasks.len(), MAX_TASKS);
        // Ids are unique and not empty; long subjects are cut at a character boundary.
        assert!(
            s.set_tasks(vec![task("a", "x", TaskStatus::Pending); 2])
                .is_err()
        );
        assert!(
            s.set_tasks(vec![task("", "x", TaskStatus::Pending)])
                .is_err()
        );
        s.set_tasks(vec![task("a", &"é".repeat(400), TaskStatus::Pending)])
            .unwrap();
        assert_eq!(s.tasks[0].subject.len(), MAX_TASK_SUBJECT_BYTES);
    }

    #[test]
    fn the_same_command_in_the_same_place_is_kept_once_newest_last() {
        let h = Harness::default();
        h.record_command(output("a", 1));
        h.record_command(output("b", 1));
        h.record_command(output("a", 2));
        assert_eq!(commands(&h), ["b", "a"]);
        assert_eq!(h.commands.read()[1].output.len(), 2);
        assert_eq!(h.commands_dropped_for_room.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn past_the_count_limit_the_oldest_go() {
        let h = Harness::default();
        for i in 0..MAX_COMMANDS + 3 {
            h.record_command(output(&format!("c{i}"), 10));
        }
        let kept = commands(&h);
        assert_eq!(kept.len(), MAX_COMMANDS);
        assert_eq!(kept[0], "c3");
        assert_eq!(
            kept.last().map(String::as_str),
            Some(&*format!("c{}", MAX_COMMANDS + 2))
        );
        assert_eq!(h.commands_dropped_for_room.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn past_the_byte_limit_the_oldest_go_but_never_the_newest() {
        let h = Harness::default();
        let third = MAX_COMMAND_BYTES / 3 - 1; // and one byte of name each
        for name in ["a", "b", "c"] {
            h.record_command(output(name, third));
        }
        assert_eq!(
            commands(&h),
            ["a", "b", "c"],
            "exactly at the limit: all kept"
        );
        h.record_command(output("d", third));
        assert_eq!(commands(&h), ["b", "c", "d"]);
        h.record_command(output("huge", 2 * MAX_COMMAND_BYTES));
        assert_eq!(
            commands(&h),
            ["huge"],
            "alone over the limit, and still kept"
        );
        assert_eq!(h.commands_dropped_for_room.load(Ordering::Relaxed), 4);
    }
}
