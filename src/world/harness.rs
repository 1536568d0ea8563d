//! What a harness tells the world about the agent's session, as opposed to what the file system
//! saw: the goal, the runtime framing, structured state, the last real tool call and its result,
//! and command outputs. The socket writes these; projections read them.
//!
//! Framing (workspace, shell, date, model...) is kept apart from content so a projection can put
//! it in the system prompt and keep the cached prefix stable.

use std::path::PathBuf;

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
}

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

    /// Records a command output, replacing an older one of the same command in the same cwd.
    pub fn record_command(&self, out: CommandOutput) {
        let mut cmds = self.commands.write();
        cmds.retain(|c| !(c.command == out.command && c.cwd == out.cwd));
        cmds.push(out);
    }
}
