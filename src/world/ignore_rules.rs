//! What never reaches a projection, and what is withheld.
//!
//! Order matters, first match wins:
//! 1. a component named like a build/VCS directory (`.git`, `target`, `node_modules`...) — ignored;
//! 2. a path the config explicitly `allow`s — kept, even if it looks like a secret or is
//!    gitignored (the user asked for it by name);
//! 3. a secret (`.env*`, `*.pem`, `id_rsa*`, credential files) — withheld: listed, never read;
//! 4. the config's extra ignore patterns, then `.gitignore` files read from SOURCE — ignored.
//!
//! Secrets come before gitignore because `.env` is usually gitignored, and "there is a `.env`
//! here, withheld" is more useful to an agent than silence. Content-based rules (binary, too
//! large) need the bytes and are applied when an entry is hashed, see [`content_verdict`].
//!
//! Claude Code's worktrees ([`WORKTREES`]) are checkouts of the project inside its `.claude`:
//! each is judged as a project of its own, from its root down.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dashmap::DashMap;
use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

use super::config::IgnoreConfig;
use super::entry::IgnoreReason;
use super::source::SourceRoot;

/// Where Claude Code puts the git worktrees it works in (`claude --worktree NAME`; its binary
/// names the same place for its EnterWorktree tool and agents run in isolation):
/// `.claude/worktrees/NAME` in the project. A
/// worktree is a checkout of the project, the agent's work, not Claude Code's own files:
/// without this, the `.claude` of [`IgnoreConfig::dirs`] would leave every file the agent
/// reads and edits there out of the world.
pub const WORKTREES: [&str; 2] = [".claude", "worktrees"];

/// Where `rel` is in Claude Code's worktrees ([`WORKTREES`], at any depth: the project may be
/// below the mount's root, a worktree may hold another): how many of its leading components
/// make the innermost worktree's root (0: in none), and which components are the `.claude`,
/// `worktrees` and name of a worktree, which are no directory of Claude Code's own.
fn worktree_parts(rel: &Path) -> (usize, Vec<bool>) {
    let parts: Vec<&std::ffi::OsStr> = rel.components().map(|c| c.as_os_str()).collect();
    let mut naming = vec![false; parts.len()];
    let mut root = 0;
    let mut i = 0;
    while i + 2 < parts.len() {
        if parts[i] == WORKTREES[0] && parts[i + 1] == WORKTREES[1] {
            naming[i..i + 3].fill(true);
            root = i + 3;
            i += 3;
        } else {
            i += 1;
        }
    }
    (root, naming)
}

/// Built-in secrets, in `.gitignore` syntax. Always applied; `allow` exempts specific paths.
pub const SECRETS: &[&str] = &[
    ".env*",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "*.jks",
    "*.keystore",
    "*.kdbx",
    "id_rsa*",
    "id_dsa*",
    "id_ecdsa*",
    "id_ed25519*",
    ".netrc",
    "_netrc",
    ".npmrc",
    ".pypirc",
    ".pgpass",
    ".git-credentials",
    "credentials.json",
    "credentials",
    "**/.aws/credentials",
    "**/.docker/config.json",
    "*.tfvars",
    "secrets.yml",
    "secrets.yaml",
    "service-account*.json",
];

/// Bytes inspected for a NUL to call a file binary.
pub const BINARY_SNIFF: usize = 8192;

/// What the path alone says about an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathVerdict {
    Keep,
    Withheld,
    Ignored(PathIgnore),
}

/// Which rule made a path ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathIgnore {
    BuildOrVcsDir,
    ConfigPattern,
    Gitignored,
}

#[derive(Debug, thiserror::Error)]
#[error("invalid pattern {pattern:?} in ignore.{field}: {message}")]
pub struct PatternError {
    field: &'static str,
    pattern: String,
    message: String,
}

fn matcher(field: &'static str, lines: &[&str]) -> Result<Gitignore, PatternError> {
    let mut b = GitignoreBuilder::new(".");
    for l in lines {
        b.add_line(None, l).map_err(|e| PatternError {
            field,
            pattern: (*l).to_owned(),
            message: e.to_string(),
        })?;
    }
    b.build().map_err(|e| PatternError {
        field,
        pattern: lines.join(" "),
        message: e.to_string(),
    })
}

fn as_str(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

fn hit(m: Match<&ignore::gitignore::Glob>) -> Option<bool> {
    match m {
        Match::None => None,
        Match::Ignore(_) => Some(true),
        Match::Whitelist(_) => Some(false),
    }
}

pub struct IgnoreRules {
    dirs: HashSet<OsString>,
    patterns: Gitignore,
    secrets: Gitignore,
    allow: Gitignore,
    use_gitignore: bool,
    max_file_bytes: u64,
    source: Arc<SourceRoot>,
    /// `.gitignore` matchers by directory (relative), loaded from SOURCE on first use; `None`
    /// when the directory has none.
    gitignores: DashMap<PathBuf, Option<Arc<Gitignore>>>,
}

impl IgnoreRules {
    /// Largest `.gitignore` read; anything bigger is not a hand-written ignore file.
    const MAX_GITIGNORE: u64 = 1 << 20;

    pub fn new(cfg: &IgnoreConfig, source: Arc<SourceRoot>) -> Result<Self, PatternError> {
        let mut secrets: Vec<&str> = SECRETS.to_vec();
        secrets.extend(as_str(&cfg.extra_secrets));
        Ok(Self {
            dirs: cfg.dirs.iter().map(OsString::from).collect(),
            patterns: matcher("patterns", &as_str(&cfg.patterns))?,
            secrets: matcher("extra_secrets", &secrets)?,
            allow: matcher("allow", &as_str(&cfg.allow))?,
            use_gitignore: cfg.use_gitignore,
            max_file_bytes: cfg.max_file_bytes,
            source,
            gitignores: DashMap::new(),
        })
    }

    /// Whether a path outside the project looks like a secret (`~/.aws/credentials`, a key
    /// file) by the secret patterns, applied to its directories and name: what no projection
    /// shows, wherever the file is.
    pub fn looks_secret(&self, abs: &Path) -> bool {
        let rel: PathBuf = abs
            .components()
            .filter(|c| matches!(c, std::path::Component::Normal(_)))
            .collect();
        !rel.as_os_str().is_empty()
            && hit(self.secrets.matched_path_or_any_parents(&rel, false)) == Some(true)
    }

    pub fn max_file_bytes(&self) -> u64 {
        self.max_file_bytes
    }

    pub fn classify(&self, rel: &Path, is_dir: bool) -> PathVerdict {
        // In a worktree, every rule reads the path from the worktree's root. Most paths are in
        // none: one with no `worktrees` component is not looked at twice.
        let (depth, naming) = if rel.components().any(|c| c.as_os_str() == WORKTREES[1]) {
            worktree_parts(rel)
        } else {
            (0, Vec::new())
        };
        let root = rel
            .ancestors()
            .nth(rel.components().count() - depth)
            .unwrap_or(Path::new(""));
        let inner = rel.strip_prefix(root).unwrap_or(rel);
        if rel.components().enumerate().any(|(i, c)| {
            !naming.get(i).copied().unwrap_or(false) && self.dirs.contains(c.as_os_str())
        }) {
            return PathVerdict::Ignored(PathIgnore::BuildOrVcsDir);
        }
        if inner.as_os_str().is_empty() {
            return PathVerdict::Keep;
        }
        if hit(self.allow.matched_path_or_any_parents(inner, is_dir)) == Some(true) {
            return PathVerdict::Keep;
        }
        if hit(self.secrets.matched_path_or_any_parents(inner, is_dir)) == Some(true) {
            return PathVerdict::Withheld;
        }
        if hit(self.patterns.matched_path_or_any_parents(inner, is_dir)) == Some(true) {
            return PathVerdict::Ignored(PathIgnore::ConfigPattern);
        }
        if self.use_gitignore && self.gitignored(rel, is_dir, root) {
            return PathVerdict::Ignored(PathIgnore::Gitignored);
        }
        PathVerdict::Keep
    }

    /// Git's rule: a path is ignored if it or any parent directory is, and for each of those the
    /// deepest `.gitignore` with an opinion decides. Only the `.gitignore` files from `root`
    /// down count (a worktree's own).
    fn gitignored(&self, rel: &Path, is_dir: bool, root: &Path) -> bool {
        let comps: Vec<&Path> = rel
            .ancestors()
            .filter(|a| a.starts_with(root) && *a != root)
            .collect();
        // `comps` is deepest first; check from the top so an ignored parent short-circuits.
        for (depth, prefix) in comps.iter().rev().enumerate() {
            let prefix_is_dir = depth + 1 < comps.len() || is_dir;
            let mut dir = prefix.parent();
            while let Some(d) = dir {
                if let Some(m) = self.matcher_for(d) {
                    let local = prefix.strip_prefix(d).unwrap_or(prefix);
                    match hit(m.matched(local, prefix_is_dir)) {
                        Some(true) => return true,
                        Some(false) => break,
                        None => {}
                    }
                }
                if d == root {
                    break;
                }
                dir = d.parent();
            }
        }
        false
    }

    fn matcher_for(&self, dir: &Path) -> Option<Arc<Gitignore>> {
        if let Some(m) = self.gitignores.get(dir) {
            return m.clone();
        }
        let loaded = self.load_gitignore(dir).map(Arc::new);
        self.gitignores.insert(dir.to_owned(), loaded.clone());
        loaded
    }

    fn load_gitignore(&self, dir: &Path) -> Option<Gitignore> {
        let mut b = GitignoreBuilder::new(".");
        let mut any = false;
        let mut add = |rel: PathBuf| {
            if let Ok(bytes) = self.source.read_prefix(&rel, Self::MAX_GITIGNORE) {
                for line in String::from_utf8_lossy(&bytes).lines() {
                    // A bad line in someone's .gitignore must not disable the others.
                    if b.add_line(Some(rel.clone()), line).is_ok() {
                        any = true;
                    }
                }
            }
        };
        if dir.as_os_str().is_empty() {
            // Lower precedence than the root .gitignore: added first, and later lines win.
            add(PathBuf::from(".git/info/exclude"));
        }
        add(dir.join(".gitignore"));
        if !any {
            return None;
        }
        b.build().ok().filter(|g| !g.is_empty())
    }

    /// Forgets cached `.gitignore` matchers affected by a change to `rel`.
    pub fn invalidate(&self, rel: &Path) {
        let name = rel.file_name().and_then(|n| n.to_str());
        if name == Some(".gitignore") {
            let dir = rel.parent().unwrap_or(Path::new(""));
            self.gitignores.remove(dir);
        } else if rel == Path::new(".git/info/exclude") {
            self.gitignores.remove(Path::new(""));
        } else if self.gitignores.contains_key(rel) {
            // A directory was renamed or removed: its matcher (and any below it) is stale.
            self.gitignores.retain(|d, _| !d.starts_with(rel));
        }
    }

    /// Forgets every cached matcher (the watcher lost events).
    pub fn invalidate_all(&self) {
        self.gitignores.clear();
    }
}

/// What the content says: binary (NUL in the first 8 KiB) or over the size cap.
pub fn content_verdict(prefix: &[u8], size: u64, max_file_bytes: u64) -> Option<IgnoreReason> {
    if size > max_file_bytes {
        return Some(IgnoreReason::TooLarge);
    }
    let sniff = &prefix[..prefix.len().min(BINARY_SNIFF)];
    if sniff.contains(&0) {
        return Some(IgnoreReason::Binary);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn rules(cfg: IgnoreConfig, files: &[(&str, &str)]) -> (tempfile::TempDir, IgnoreRules) {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        for (p, content) in files {
            let p = dir.path().join(p);
            if let Some(parent) = p.parent() {
                fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
            }
            fs::write(p, content).unwrap_or_else(|e| panic!("{e}"));
        }
        let src = Arc::new(SourceRoot::open(dir.path()).unwrap_or_else(|e| panic!("{e}")));
        let r = IgnoreRules::new(&cfg, src).unwrap_or_else(|e| panic!("{e}"));
        (dir, r)
    }

    fn v(r: &IgnoreRules, p: &str) -> PathVerdict {
        r.classify(Path::new(p), false)
    }

    #[test]
    fn build_and_vcs_dirs_anywhere() {
        let (_d, r) = rules(IgnoreConfig::default(), &[]);
        for p in [
            ".git/HEAD",
            "target/debug/x",
            "web/node_modules/a.js",
            "pkg/__pycache__/m.pyc",
            "notebooks/.ipynb_checkpoints/sales-checkpoint.ipynb",
        ] {
            assert_eq!(
                v(&r, p),
                PathVerdict::Ignored(PathIgnore::BuildOrVcsDir),
                "{p}"
            );
        }
        assert_eq!(v(&r, "src/target.rs"), PathVerdict::Keep);
        assert_eq!(v(&r, ".github/workflows/ci.yml"), PathVerdict::Keep);
    }

    #[test]
    fn an_agents_own_configuration_is_left_out() {
        let (_d, r) = rules(IgnoreConfig::default(), &[]);
        for p in [
            ".mcp.json",
            "web/.mcp.json",
            ".claude/settings.json",
            ".codex/config.toml",
        ] {
            assert!(matches!(v(&r, p), PathVerdict::Ignored(_)), "{p}");
        }
        assert_eq!(v(&r, "docs/mcp.json"), PathVerdict::Keep);
        // A list of patterns replaces the default, as every list does.
        let cfg = IgnoreConfig {
            patterns: vec!["*.snap".into()],
            ..IgnoreConfig::default()
        };
        let (_d, r) = rules(cfg, &[]);
        assert_eq!(v(&r, ".mcp.json"), PathVerdict::Keep);
    }

    /// A Claude Code worktree is a checkout of the project: judged from its own root, with its
    /// own `.gitignore` files, not left out with the rest of `.claude`.
    #[test]
    fn a_claude_code_worktree_is_a_project_of_its_own() {
        let wt = ".claude/worktrees/fix-1";
        let (_d, r) = rules(
            IgnoreConfig::default(),
            &[
                (".gitignore", "*.log\n.claude/worktrees/\n"),
                (&format!("{wt}/.gitignore"), "out/\n*.tmp\n"),
                ("web/.gitignore", "cache/\n"),
                (&format!("{wt}/web/.gitignore"), "*.snap\n"),
            ],
        );
        for keep in ["src/calc.py", "README.md", "web/cache.js", "a.log"] {
            assert_eq!(v(&r, &format!("{wt}/{keep}")), PathVerdict::Keep, "{keep}");
        }
        assert_eq!(r.classify(Path::new(wt), true), PathVerdict::Keep);
        for (gone, why) in [
            ("out/x.js", PathIgnore::Gitignored),
            ("b.tmp", PathIgnore::Gitignored),
            ("web/ui.snap", PathIgnore::Gitignored),
            (".git", PathIgnore::BuildOrVcsDir),
            (".claude/settings.json", PathIgnore::BuildOrVcsDir),
            ("node_modules/x/index.js", PathIgnore::BuildOrVcsDir),
            (".mcp.json", PathIgnore::ConfigPattern),
        ] {
            assert_eq!(
                v(&r, &format!("{wt}/{gone}")),
                PathVerdict::Ignored(why),
                "{gone}"
            );
        }
        assert_eq!(v(&r, &format!("{wt}/.env")), PathVerdict::Withheld);
        // Below the mount's root, and one in another: the innermost is the root.
        assert_eq!(
            v(&r, "proj/.claude/worktrees/a/src/x.py"),
            PathVerdict::Keep
        );
        assert_eq!(
            v(&r, &format!("{wt}/.claude/worktrees/b/src/x.py")),
            PathVerdict::Keep
        );
        assert!(matches!(
            v(&r, "node_modules/p/.claude/worktrees/a/x.js"),
            PathVerdict::Ignored(PathIgnore::BuildOrVcsDir)
        ));
        // Claude Code's own files stay out, and the project's rules are the project's.
        assert!(matches!(
            v(&r, ".claude/worktrees"),
            PathVerdict::Ignored(_)
        ));
        assert!(matches!(
            v(&r, ".claude/settings.json"),
            PathVerdict::Ignored(_)
        ));
        assert!(matches!(v(&r, "a.log"), PathVerdict::Ignored(_)));
        assert_eq!(v(&r, "b.tmp"), PathVerdict::Keep);
    }

    #[test]
    fn secrets_are_withheld_unless_allowed() {
        let cfg = IgnoreConfig {
            allow: vec!["config/.env.example".into()],
            ..IgnoreConfig::default()
        };
        let (_d, r) = rules(cfg, &[(".gitignore", ".env\n")]);
        for p in [
            ".env",
            "app/.env.local",
            "certs/server.pem",
            "tls.key",
            "home/id_rsa",
            ".netrc",
            "x/credentials.json",
            ".npmrc",
            "a.p12",
            "u/.aws/credentials",
        ] {
            assert_eq!(v(&r, p), PathVerdict::Withheld, "{p}");
        }
        assert_eq!(v(&r, "config/.env.example"), PathVerdict::Keep);
        assert_eq!(v(&r, "src/keys.rs"), PathVerdict::Keep);
    }

    #[test]
    fn nested_gitignores_from_source() {
        let (_d, r) = rules(
            IgnoreConfig::default(),
            &[
                (".gitignore", "*.log\n/out/\nlogs/\n"),
                ("sub/.gitignore", "!keep.log\n/local.txt\n"),
                (".git/info/exclude", "scratch/\n"),
            ],
        );
        assert_eq!(v(&r, "a.log"), PathVerdict::Ignored(PathIgnore::Gitignored));
        assert_eq!(
            v(&r, "deep/x/a.log"),
            PathVerdict::Ignored(PathIgnore::Gitignored)
        );
        assert_eq!(v(&r, "sub/keep.log"), PathVerdict::Keep);
        assert_eq!(
            v(&r, "sub/other.log"),
            PathVerdict::Ignored(PathIgnore::Gitignored)
        );
        assert_eq!(
            v(&r, "sub/local.txt"),
            PathVerdict::Ignored(PathIgnore::Gitignored)
        );
        assert_eq!(v(&r, "local.txt"), PathVerdict::Keep);
        assert_eq!(
            v(&r, "out/x.txt"),
            PathVerdict::Ignored(PathIgnore::Gitignored)
        );
        assert_eq!(
            v(&r, "src/out/x.txt"),
            PathVerdict::Keep,
            "anchored pattern"
        );
        assert_eq!(
            v(&r, "logs/today.txt"),
            PathVerdict::Ignored(PathIgnore::Gitignored)
        );
        assert_eq!(
            v(&r, "scratch/n.md"),
            PathVerdict::Ignored(PathIgnore::Gitignored)
        );
        assert_eq!(v(&r, "src/main.rs"), PathVerdict::Keep);
    }

    #[test]
    fn gitignore_change_is_picked_up_after_invalidate() {
        let (d, r) = rules(IgnoreConfig::default(), &[(".gitignore", "")]);
        assert_eq!(v(&r, "a.tmp"), PathVerdict::Keep);
        fs::write(d.path().join(".gitignore"), "*.tmp\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(v(&r, "a.tmp"), PathVerdict::Keep, "cached until told");
        r.invalidate(Path::new(".gitignore"));
        assert_eq!(v(&r, "a.tmp"), PathVerdict::Ignored(PathIgnore::Gitignored));
    }

    #[test]
    fn config_patterns_and_bad_pattern_error() {
        let cfg = IgnoreConfig {
            patterns: vec!["*.snap".into()],
            ..IgnoreConfig::default()
        };
        let (_d, r) = rules(cfg, &[]);
        assert_eq!(
            v(&r, "t/a.snap"),
            PathVerdict::Ignored(PathIgnore::ConfigPattern)
        );
        let bad = IgnoreConfig {
            patterns: vec!["a{b".into()],
            ..IgnoreConfig::default()
        };
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let src = Arc::new(SourceRoot::open(dir.path()).unwrap_or_else(|e| panic!("{e}")));
        let err = IgnoreRules::new(&bad, src)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("a{b"), "{err}");
    }

    #[test]
    fn content_rules() {
        assert_eq!(content_verdict(b"fn main() {}", 12, 100), None);
        assert_eq!(
            content_verdict(b"\x7fELF\0\0", 6, 100),
            Some(IgnoreReason::Binary)
        );
        assert_eq!(
            content_verdict(b"abc", 101, 100),
            Some(IgnoreReason::TooLarge)
        );
        let mut late_nul = vec![b'a'; BINARY_SNIFF + 10];
        late_nul[BINARY_SNIFF + 5] = 0;
        assert_eq!(
            content_verdict(&late_nul, late_nul.len() as u64, 1 << 20),
            None
        );
    }
}
