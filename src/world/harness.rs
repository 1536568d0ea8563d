//! What a harness tells the world about the agent's session, as opposed to what the file system
//! saw: the goal, the runtime framing, structured state, the last real tool call and its result,
//! and command outputs. The socket writes these; projections read them.
//!
//! Framing (workspace, shell, date, model...) is kept apart from content so a projection can put
//! it in the system prompt and keep the cached prefix stable.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;
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
}

impl StructuredState {
    pub fn is_empty(&self) -> bool {
        self.intent.is_none()
            && self.decisions.is_empty()
            && self.constraints.is_empty()
            && self.open_loops.is_empty()
            && self.ruled_out.is_empty()
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
}

/// A command's output, valid as long as the files it read through the mount are unchanged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandOutput {
    pub command: String,
    /// Working directory relative to the root ("." for the root).
    pub cwd: String,
    pub output: String,
    pub exit_code: Option<i32>,
    /// Files the command read, with the blake3 hash (hex) of their content when recorded.
    pub inputs: Vec<(PathBuf, String)>,
    pub turn: u64,
    /// Observation sequence number when it was recorded.
    pub seq: u64,
}

/// Harness-provided session state. Cheap to read concurrently; written rarely.
#[derive(Debug, Default)]
pub struct Harness {
    pub goal: RwLock<Option<String>>,
    pub framing: RwLock<Framing>,
    pub state: RwLock<StructuredState>,
    pub last_step: RwLock<Option<Step>>,
    /// Keyed by (cwd, command); newest last.
    pub commands: RwLock<Vec<CommandOutput>>,
    /// Names of the tools the recorded steps called, first use first (at most
    /// [`MAX_STEP_TOOLS`]): a projection defines them all, so its tool list, the first thing
    /// in a prompt cache's prefix, does not change with the last step's tool.
    pub step_tools: RwLock<Vec<String>>,
    /// Outputs dropped to stay within [`MAX_COMMANDS`] and [`MAX_COMMAND_BYTES`].
    pub commands_dropped_for_room: AtomicU64,
}

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
    /// Notes that a step called `name`.
    pub fn note_step_tool(&self, name: &str) {
        let mut tools = self.step_tools.write();
        if tools.len() < MAX_STEP_TOOLS && !tools.iter().any(|t| t == name) {
            tools.push(name.to_owned());
        }
    }

    /// Records a command output, replacing an older one of the same command in the same cwd;
    /// the oldest outputs go when more than [`MAX_COMMANDS`] or [`MAX_COMMAND_BYTES`] are kept.
    pub fn record_command(&self, out: CommandOutput) {
        let mut cmds = self.commands.write();
        cmds.retain(|c| !(c.command == out.command && c.cwd == out.cwd));
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
            turn: 1,
            seq: 1,
        }
    }

    fn commands(h: &Harness) -> Vec<String> {
        h.commands
            .read()
            .iter()
            .map(|c| c.command.clone())
            .collect()
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
