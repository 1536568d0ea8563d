//! `worldfs.toml`: how attribution, ignore rules, turns, the budget and the journal behave.
//!
//! Every field has a default, so a missing file (or an empty one) means "defaults", and a file
//! only needs the keys it changes. Unknown keys are errors: a typo that silently does nothing is
//! worse than a refusal. The format is documented in `docs/worldfs.toml.md`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Largest token budget a projection may be given, from the configuration, the socket or the
/// command line: well above any model's context window, so a larger one is a typo (a budget
/// in bytes, an extra zero), not a wish.
pub const MAX_BUDGET: u64 = 2_000_000;

/// `tokens` if it is a budget a projection can be given; else what is wrong with it, for the
/// configuration and the command line to prefix with where it came from.
pub fn check_budget(tokens: u64) -> Result<u64, String> {
    if (1..=MAX_BUDGET).contains(&tokens) {
        Ok(tokens)
    } else {
        Err(format!(
            "{tokens} is out of range: a budget is at least one token and at most {MAX_BUDGET}"
        ))
    }
}

/// A problem with the configuration file, always naming the file.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Parse {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: {message}")]
    Invalid { path: PathBuf, message: String },
}

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub attribution: AttributionConfig,
    pub ignore: IgnoreConfig,
    pub turns: TurnsConfig,
    pub budget: BudgetConfig,
    pub tokens: TokensConfig,
    pub journal: JournalConfig,
}

/// How an access is classified (agent, weak or scan). Lists replace the defaults.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AttributionConfig {
    /// Programs (`comm`) that are the agent itself: their accesses count as the agent looking.
    pub agent_programs: Vec<String>,
    /// Substrings of a command line that identify the agent when it runs under a generic
    /// interpreter (Claude Code started as `node .../claude-code/cli.js`).
    pub agent_cmdline_markers: Vec<String>,
    /// Explicit readers: what they open is what the agent asked to see.
    pub reader_programs: Vec<String>,
    /// Interpreters, build tools and test runners: they count as the agent only for files named
    /// on their command line (`python script.py`), weakly otherwise.
    pub weak_programs: Vec<String>,
    /// Whole-tree scanners: never create entries.
    pub scan_programs: Vec<String>,
    /// Programs that remove only what their command line names: a file one of them removes,
    /// run by the agent, is the agent's own deletion, which a projection has no notice of.
    pub remover_programs: Vec<String>,
    /// Per program, arguments that make it a scanner (`grep -r`, `ls -R`). Short options also
    /// match inside clusters: `-R` matches `-Rn`.
    pub recursive_flags: BTreeMap<String, Vec<String>>,
    /// Class for programs in no list: "agent", "weak" or "scan".
    pub unknown_program: ClassName,
    /// Class when the process exited before it could be identified. Short-lived one-file readers
    /// are the common case, and the fan-out rule still catches scanners.
    pub unknown_process: ClassName,
    /// A process touching more than this many distinct paths within `fanout_window_ms` is a
    /// scanner for the rest of that window, and the entries it created in it are withdrawn.
    pub fanout_threshold: u32,
    pub fanout_window_ms: u64,
    /// Only processes descending from an agent program can be attributed to the agent; others
    /// (an editor's indexer, a second terminal) count weakly at most.
    pub only_agent_descendants: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassName {
    Agent,
    Weak,
    Scan,
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| (*s).to_owned()).collect()
}

impl Default for AttributionConfig {
    fn default() -> Self {
        let grep_flags = strings(&["-r", "-R", "--recursive", "--dereference-recursive"]);
        let mut recursive_flags = BTreeMap::new();
        for g in ["grep", "egrep", "fgrep", "zgrep"] {
            recursive_flags.insert(g.to_owned(), grep_flags.clone());
        }
        recursive_flags.insert("ls".into(), strings(&["-R", "--recursive"]));
        recursive_flags.insert(
            "cp".into(),
            strings(&["-r", "-R", "-a", "--recursive", "--archive"]),
        );
        recursive_flags.insert("chmod".into(), strings(&["-R", "--recursive"]));
        Self {
            agent_programs: strings(&[
                "claude",
                "codex",
                "aider",
                "gemini",
                "opencode",
                "goose",
                "amp",
                "cursor-agent",
                "crush",
            ]),
            agent_cmdline_markers: strings(&[
                "claude-code",
                "@anthropic-ai/claude",
                "@openai/codex",
            ]),
            reader_programs: strings(&[
                "cat", "head", "tail", "sed", "nl", "less", "more", "most", "awk", "gawk", "mawk",
                "bat", "batcat", "view", "vi", "vim", "nvim", "nano", "emacs", "ed", "jq", "yq",
                "xxd", "od", "hexdump", "wc", "sort", "uniq", "cut", "tr", "diff", "cmp", "patch",
                "tee", "cp", "mv", "touch", "ls", "stat", "file", "grep", "egrep", "fgrep",
                "zgrep", "bash", "sh", "dash", "zsh", "fish", "perl",
            ]),
            weak_programs: strings(&[
                "python",
                "python3",
                "node",
                "deno",
                "bun",
                "ruby",
                "php",
                "java",
                "go",
                "cargo",
                "rustc",
                "rust-analyzer",
                "gcc",
                "cc",
                "c++",
                "g++",
                "clang",
                "ld",
                "make",
                "cmake",
                "ninja",
                "npm",
                "npx",
                "pnpm",
                "yarn",
                "pytest",
                "jest",
                "vitest",
                "tsc",
                "esbuild",
                "uv",
                "pip",
                "pip3",
                "mypy",
                "ruff",
                "black",
                "eslint",
                "prettier",
                "gopls",
                "tsserver",
                "clangd",
                "pyright",
            ]),
            scan_programs: strings(&[
                "rg",
                "fd",
                "fdfind",
                "find",
                "git",
                "tree",
                "ag",
                "ack",
                "locate",
                "updatedb",
                "rsync",
                "tar",
                "zip",
                "du",
                "ctags",
                "watchman",
                "fsnotifier",
                "baloo_file",
                "tracker-miner-f",
            ]),
            remover_programs: strings(&["rm", "rmdir", "unlink"]),
            recursive_flags,
            unknown_program: ClassName::Weak,
            unknown_process: ClassName::Agent,
            fanout_threshold: 32,
            fanout_window_ms: 2000,
            only_agent_descendants: false,
        }
    }
}

/// What is never projected, and what is withheld. Patterns use `.gitignore` syntax, relative to
/// the root.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IgnoreConfig {
    /// Directory names that are never projected wherever they appear (replaces the defaults).
    pub dirs: Vec<String>,
    /// More paths never projected, in `.gitignore` syntax.
    pub patterns: Vec<String>,
    /// Honour `.gitignore` files (and `.git/info/exclude`) found in SOURCE.
    pub use_gitignore: bool,
    /// Files larger than this are never projected.
    pub max_file_bytes: u64,
    /// Secrets to withhold in addition to the built-in list (which cannot be switched off; use
    /// `allow` for a specific path).
    pub extra_secrets: Vec<String>,
    /// Paths whose content may be projected even though they look like secrets.
    pub allow: Vec<String>,
}

impl Default for IgnoreConfig {
    fn default() -> Self {
        Self {
            dirs: strings(&[
                ".git",
                ".hg",
                ".svn",
                "target",
                "node_modules",
                "__pycache__",
                ".venv",
                "venv",
                "dist",
                "build",
                ".mypy_cache",
                ".pytest_cache",
                ".ruff_cache",
                ".tox",
                ".next",
                ".nuxt",
                ".gradle",
                ".cache",
                ".direnv",
                ".terraform",
                "coverage",
                ".idea",
                // Jupyter's autosaved copies of every notebook open in it.
                ".ipynb_checkpoints",
                // Claude Code's own: settings it reads at every start and writes when a
                // permission is granted, hooks, commands. Its model never sees them as files.
                ".claude",
                // Codex's, the same: its config and hooks, read at every start; and its skills.
                ".codex",
                ".agents",
            ]),
            // Claude Code's project MCP configuration: it reads it at every start, its model
            // never sees it, and its servers' `env` and `headers` often hold tokens.
            patterns: strings(&[".mcp.json"]),
            use_gitignore: true,
            max_file_bytes: 1 << 20,
            extra_secrets: Vec::new(),
            allow: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TurnsConfig {
    /// With no harness driving turns, a gap this long in agent activity starts a new turn.
    pub idle_gap_ms: u64,
    /// After a harness advances the turn, idle gaps are ignored for this long.
    pub harness_grace_ms: u64,
}

impl Default for TurnsConfig {
    fn default() -> Self {
        Self {
            idle_gap_ms: 2000,
            harness_grace_ms: 120_000,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetConfig {
    /// Tokens a projection may use.
    pub tokens: u64,
    /// Eviction policy: "worldfs", "seed" or "lru".
    pub policy: String,
    /// For the worldfs policy: files above this many tokens are projected as the ranges read.
    pub big_file_tokens: u32,
}

impl Default for BudgetConfig {
    fn default() -> Self {
        Self {
            tokens: 8000,
            policy: "worldfs".into(),
            big_file_tokens: 1500,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TokensConfig {
    /// Token counts remembered by content hash.
    pub memo_entries: usize,
}

impl Default for TokensConfig {
    fn default() -> Self {
        Self {
            memo_entries: 16_384,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct JournalConfig {
    /// A journal file is rotated when it reaches this size.
    pub max_file_mib: u64,
    /// Rotated files kept besides the current one.
    pub keep_files: u32,
}

impl Default for JournalConfig {
    fn default() -> Self {
        Self {
            max_file_mib: 16,
            keep_files: 4,
        }
    }
}

impl Config {
    /// Reads `path`. A missing file is an error: it is named by `--config`, and a mistyped
    /// path would otherwise go unnoticed, every setting in it left at its default.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text, path),
            Err(source) => Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// Parses `text`; `path` only names the file in errors.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let cfg: Config = toml::from_str(text).map_err(|e| {
            let (line, column) = e.span().map_or((0, 0), |span| line_col(text, span.start));
            ConfigError::Parse {
                path: path.to_owned(),
                line,
                column,
                message: e.message().to_owned(),
            }
        })?;
        cfg.validate().map_err(|message| ConfigError::Invalid {
            path: path.to_owned(),
            message,
        })?;
        Ok(cfg)
    }

    fn validate(&self) -> Result<(), String> {
        check_budget(self.budget.tokens).map_err(|e| format!("budget.tokens: {e}"))?;
        if super::policy::by_name(&self.budget.policy).is_none() {
            return Err(format!(
                "budget.policy: unknown policy {:?} (known: {})",
                self.budget.policy,
                super::policy::NAMES.join(", ")
            ));
        }
        if self.attribution.fanout_threshold == 0 {
            return Err("attribution.fanout_threshold must be at least 1".into());
        }
        if self.journal.max_file_mib == 0 {
            return Err("journal.max_file_mib must be at least 1".into());
        }
        Ok(())
    }
}

/// 1-based line and column of byte offset `at` in `text`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text.as_bytes()[..at.min(text.len())];
    let line = before.iter().filter(|b| **b == b'\n').count() + 1;
    let col = before.iter().rev().take_while(|b| **b != b'\n').count() + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_file_is_an_error_that_names_it() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("worldfs.toml");
        let err = Config::load(&path).expect_err("a missing file");
        assert!(
            err.to_string().contains(path.to_str().unwrap_or_default()),
            "{err}"
        );
    }

    #[test]
    fn an_empty_file_means_defaults() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("worldfs.toml");
        std::fs::write(&path, "").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Config::load(&path).ok(), Some(Config::default()));
    }

    #[test]
    fn partial_file_keeps_other_defaults() {
        let cfg = Config::parse(
            "[budget]\ntokens = 4000\n[attribution]\nscan_programs = [\"rg\"]\n",
            Path::new("w.toml"),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.budget.tokens, 4000);
        assert_eq!(cfg.budget.policy, "worldfs");
        assert_eq!(cfg.attribution.scan_programs, vec!["rg".to_string()]);
        assert_eq!(
            cfg.attribution.reader_programs,
            AttributionConfig::default().reader_programs
        );
    }

    #[test]
    fn bad_file_names_path_and_line() {
        let err = Config::parse(
            "[budget]\ntokens = 1\npolcy = \"lru\"\n",
            Path::new("/x/worldfs.toml"),
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(err.starts_with("/x/worldfs.toml:3:"), "{err}");
        assert!(err.contains("polcy"), "{err}");
        let err = Config::parse("[budget]\ntokens = \"many\"\n", Path::new("w.toml"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.starts_with("w.toml:2:"), "{err}");
    }

    #[test]
    fn a_budget_out_of_range_is_refused_with_the_range() {
        for bad in [0, MAX_BUDGET + 1] {
            let err = Config::parse(&format!("[budget]\ntokens = {bad}\n"), Path::new("w.toml"))
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains("budget.tokens"), "{err}");
            assert!(err.contains(&format!("{bad} is out of range")), "{err}");
        }
        for good in [1, MAX_BUDGET] {
            let cfg = Config::parse(&format!("[budget]\ntokens = {good}\n"), Path::new("w.toml"));
            assert_eq!(cfg.ok().map(|c| c.budget.tokens), Some(good));
        }
    }

    #[test]
    fn unknown_policy_is_rejected() {
        let err = Config::parse("[budget]\npolicy = \"fifo\"\n", Path::new("w.toml"))
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("fifo") && err.contains("worldfs"), "{err}");
    }

    #[test]
    fn example_file_parses_and_matches_defaults_where_documented() {
        let text = include_str!("../../worldfs.example.toml");
        let cfg = Config::parse(text, Path::new("worldfs.example.toml"))
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(cfg.turns, TurnsConfig::default());
    }
}
