//! Which agent COMMAND is, where that agent's settings of the user live, and how a value is
//! written for Codex's command line: what the hooks given (`hooks`), the address given
//! (`codex_address`) and the warnings (`warnings`) go by.

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

/// `s` as a TOML basic string, which is how Codex reads a `-c KEY=VALUE` value.
pub(super) fn toml_string(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}
