//! Which agent COMMAND is, and where that agent's settings of the user live: what the hooks
//! given (`hooks`), the address given (`codex_address`) and the warnings (`warnings`) go by.

use std::path::{Path, PathBuf};

use crate::claude_hook::install::Agent;

/// Which agent `program` is, by its name.
pub(super) fn agent(program: &Path) -> Option<Agent> {
    match program.file_name()?.to_str()? {
        "claude" => Some(Agent::ClaudeCode),
        "codex" => Some(Agent::Codex),
        _ => None,
    }
}

/// The user's home and Codex's (`CODEX_HOME`, when set), where their own settings are.
pub(super) fn homes() -> (Option<PathBuf>, Option<PathBuf>) {
    (
        std::env::var_os("HOME").map(PathBuf::from),
        std::env::var_os("CODEX_HOME").map(PathBuf::from),
    )
}
