//! The `worldfs-trace/1` format (`../shared/traces/FORMAT.md`): a header line, then one line per
//! step. Parsing is strict about shape (every error names the file and line) and lenient about
//! optional fields (missing and `null` are the same).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::Deserialize;
use serde_json::Value;

pub const FORMAT: &str = "worldfs-trace/1";

/// Line 1 of a trace.
#[derive(Debug, Clone, Deserialize)]
pub struct Header {
    pub record: String,
    pub format: String,
    pub trace_id: String,
    #[serde(default)]
    pub goal: Option<String>,
    #[serde(default)]
    pub initial_prompt: Option<String>,
    #[serde(default)]
    pub system_prompt: Option<String>,
    #[serde(default)]
    pub setup_end_step: Option<u64>,
    /// The repository root as the source's raw paths spell it (`/repo`, `/testbed`).
    #[serde(default)]
    pub repo_root_in_source: Option<String>,
}

impl Header {
    /// `p` relative to the repository when the source spelled it absolute under its root
    /// (`/testbed/src/a.py`), as a converter may leave a path it marked as in the repository.
    fn relative<'a>(&self, p: &'a str) -> &'a str {
        let Some(root) = self
            .repo_root_in_source
            .as_deref()
            .map(|r| r.trim_end_matches('/'))
            .filter(|r| r.starts_with('/') && r.len() > 1)
        else {
            return p;
        };
        match p.strip_prefix(root) {
            Some("") => ".",
            Some(rest) if rest.starts_with('/') => rest.trim_start_matches('/'),
            _ => p,
        }
    }

    /// The directory a search tool's call searched, relative to the repository: its `path`
    /// input, else its working directory. `None` when that is outside the repository.
    fn search_dir(&self, step: &Step) -> Option<String> {
        let cwd = step.cwd.as_deref().filter(|c| !c.is_empty()).unwrap_or(".");
        let dir = match step.input.as_ref().and_then(|i| i.get("path")?.as_str()) {
            Some(p) if p.starts_with('/') => p.to_owned(),
            Some(p) if !p.is_empty() => format!("{}/{p}", self.relative(cwd)),
            _ => cwd.to_owned(),
        };
        let dir = self.normalized(&dir);
        // A path that leaves the repository stays as written, and is no directory of it.
        super::apply::clean_rel(&dir).map(|_| dir)
    }

    /// `p` as the replay names the file everywhere (views, needs, the disk): relative to the
    /// repository, without `.` and `..` parts that stay inside it (`./src/../src/a.py` is
    /// `src/a.py`). A path that leaves the repository stays as written.
    fn normalized(&self, p: &str) -> String {
        let rel = self.relative(p);
        match super::apply::clean_rel(rel) {
            Some(c) if !c.as_os_str().is_empty() => c.to_string_lossy().into_owned(),
            _ => rel.to_string(),
        }
    }
}

/// What a step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Read,
    Write,
    Edit,
    Command,
    Search,
    Message,
    Other,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Read => "read",
            Kind::Write => "write",
            Kind::Edit => "edit",
            Kind::Command => "command",
            Kind::Search => "search",
            Kind::Message => "message",
            Kind::Other => "other",
        }
    }
}

/// A file access a shell command made (best-effort parse of the command).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TouchOp {
    Read,
    Write,
    Delete,
    Search,
    Exec,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Touch {
    pub path: String,
    pub op: TouchOp,
    #[serde(default)]
    pub range: Option<[u64; 2]>,
    #[serde(default)]
    pub ranges: Option<Vec<[u64; 2]>>,
    #[serde(default)]
    pub partial: Option<bool>,
    #[serde(default)]
    pub in_repo: Option<bool>,
}

/// One str_replace of an edit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replacement {
    pub old: String,
    pub new: String,
    /// Every occurrence, not only the first.
    pub all: bool,
}

/// One tool call (or one tool-less assistant message).
#[derive(Debug, Clone, Deserialize)]
pub struct Step {
    pub record: String,
    pub step: u64,
    pub turn: u64,
    #[serde(default)]
    pub turn_first: bool,
    pub kind: Kind,
    #[serde(default)]
    pub tool: Option<String>,
    #[serde(default)]
    pub tool_use_id: Option<String>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub path_in_repo: Option<bool>,
    #[serde(default)]
    pub range: Option<[u64; 2]>,
    #[serde(default)]
    pub ranges: Option<Vec<[u64; 2]>>,
    #[serde(default)]
    pub partial: Option<bool>,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub old_text: Option<String>,
    #[serde(default)]
    pub new_text: Option<String>,
    #[serde(default)]
    pub replace_all: Option<bool>,
    #[serde(default)]
    pub disk_sha1_before: Option<String>,
    #[serde(default)]
    pub command: Option<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// `"bash"` when the kind was derived by parsing a shell command.
    #[serde(default)]
    pub via: Option<String>,
    #[serde(default)]
    pub input: Option<Value>,
    #[serde(default)]
    pub output: Option<String>,
    #[serde(default)]
    pub is_error: Option<bool>,
    #[serde(default)]
    pub returncode: Option<i64>,
    #[serde(default)]
    pub touches: Option<Vec<Touch>>,
    #[serde(default)]
    pub effects_unknown: Option<bool>,
    #[serde(default)]
    pub pre_setup: Option<bool>,
    #[serde(default)]
    pub assistant_text: Option<String>,
    #[serde(default)]
    pub tokens_in_reported: Option<u64>,
    /// For a search tool's call (Grep, Glob; not a shell command's search), the directory it
    /// searched, relative to the repository (set when the trace is loaded; `None` when it is
    /// outside): its result depends on every file below it, as `worldfs hook` records it.
    #[serde(skip)]
    pub search_dir: Option<String>,
}

impl Step {
    pub fn touches(&self) -> &[Touch] {
        self.touches.as_deref().unwrap_or(&[])
    }

    pub fn in_repo(&self) -> bool {
        self.path_in_repo.unwrap_or(true)
    }

    pub fn partial(&self) -> bool {
        self.partial.unwrap_or(false)
    }

    pub fn effects_unknown(&self) -> bool {
        self.effects_unknown.unwrap_or(false)
    }

    /// The text replacements an edit makes, in order: `old_text` by `new_text`, or, when the
    /// trace has no texts, the `edits` of a MultiEdit call's input (Claude Code applies them
    /// one after the other, to the result of the one before).
    pub fn replacements(&self) -> Vec<Replacement> {
        if let (Some(old), Some(new)) = (&self.old_text, &self.new_text) {
            return vec![Replacement {
                old: old.clone(),
                new: new.clone(),
                all: self.replace_all.unwrap_or(false),
            }];
        }
        let edits = self
            .input
            .as_ref()
            .and_then(|i| i.get("edits"))
            .and_then(Value::as_array);
        edits
            .into_iter()
            .flatten()
            .map_while(|e| {
                Some(Replacement {
                    old: e.get("old_string")?.as_str()?.to_string(),
                    new: e.get("new_string")?.as_str()?.to_string(),
                    all: e
                        .get("replace_all")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                })
            })
            .collect()
    }

    /// A file tool's call that answered an error: Claude Code's Read, Edit and Write either
    /// do all of their work or none (an Edit of a file not read yet, an `old_string` found
    /// twice, a file too long to read whole), so the step changed nothing and showed nothing.
    /// A shell command parsed into a read or an edit is never taken for one: its exit code
    /// may come from another part of the command line, after the effect.
    pub fn refused(&self) -> bool {
        let shell = self.via.as_deref() == Some("bash")
            || self
                .tool
                .as_deref()
                .is_some_and(|t| t.eq_ignore_ascii_case("bash"));
        self.is_error == Some(true)
            && !shell
            && matches!(self.kind, Kind::Read | Kind::Edit | Kind::Write)
    }

    /// The line ranges a read showed: `ranges`, else `range`; `None` = whole file (or unknown
    /// when `partial`).
    pub fn line_ranges(&self) -> Option<Vec<[u64; 2]>> {
        match (&self.ranges, self.range) {
            (Some(rs), _) if !rs.is_empty() => Some(rs.clone()),
            (_, Some(r)) => Some(vec![r]),
            _ => None,
        }
    }

    /// The tool input as the agent sent it (the command for shell steps).
    pub fn call_input(&self) -> Value {
        if let Some(i) = &self.input
            && i.is_object()
        {
            return i.clone();
        }
        let mut m = serde_json::Map::new();
        if let Some(c) = &self.command {
            m.insert("command".into(), Value::from(c.clone()));
        }
        if m.is_empty() {
            if let Some(p) = &self.path {
                m.insert("file_path".into(), Value::from(p.clone()));
            }
            if let Some(t) = &self.old_text {
                m.insert("old_string".into(), Value::from(t.clone()));
            }
            if let Some(t) = &self.new_text {
                m.insert("new_string".into(), Value::from(t.clone()));
            }
            if self.kind == Kind::Write
                && let Some(c) = &self.content
            {
                m.insert("content".into(), Value::from(c.clone()));
            }
        }
        Value::Object(m)
    }

    /// A tool name valid for the APIs (`^[a-zA-Z0-9_-]{1,64}$`).
    pub fn tool_name(&self) -> String {
        let raw = self
            .tool
            .clone()
            .unwrap_or_else(|| self.kind.name().to_string());
        crate::projection::ids::tool_name(&raw)
    }
}

/// A parsed trace.
#[derive(Debug, Clone)]
pub struct Trace {
    pub path: PathBuf,
    pub header: Header,
    pub steps: Vec<Step>,
}

impl Trace {
    pub fn load(path: &Path) -> Result<Trace> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading trace {}", path.display()))?;
        Trace::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Trace> {
        let mut lines = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty());
        let (_, first) = lines
            .next()
            .with_context(|| format!("{}: empty trace", path.display()))?;
        let header: Header = serde_json::from_str(first)
            .with_context(|| format!("{}:1: not a trace header", path.display()))?;
        if header.record != "header" || header.format != FORMAT {
            bail!(
                "{}:1: expected a {FORMAT} header, found record {:?} format {:?}",
                path.display(),
                header.record,
                header.format
            );
        }
        let mut steps = Vec::new();
        for (i, line) in lines {
            let step: Step = serde_json::from_str(line)
                .with_context(|| format!("{}:{}: bad step", path.display(), i + 1))?;
            if step.record != "step" {
                bail!(
                    "{}:{}: expected record \"step\", found {:?}",
                    path.display(),
                    i + 1,
                    step.record
                );
            }
            let mut step = step;
            if let Some(p) = &step.path {
                step.path = Some(header.normalized(p));
            }
            for t in step.touches.iter_mut().flatten() {
                t.path = header.normalized(&t.path);
            }
            if step.kind == Kind::Search && step.via.as_deref() != Some("bash") {
                step.search_dir = header.search_dir(&step);
            }
            if step.turn == 0 {
                bail!("{}:{}: turns are 1-based", path.display(), i + 1);
            }
            if let Some(prev) = steps.last() {
                let prev: &Step = prev;
                if step.turn < prev.turn {
                    bail!(
                        "{}:{}: turn {} after turn {}",
                        path.display(),
                        i + 1,
                        step.turn,
                        prev.turn
                    );
                }
            }
            steps.push(step);
        }
        Ok(Trace {
            path: path.to_owned(),
            header,
            steps,
        })
    }

    /// Steps grouped by model turn, in order.
    pub fn turns(&self) -> Vec<(u64, Vec<usize>)> {
        let mut m: BTreeMap<u64, Vec<usize>> = BTreeMap::new();
        for (i, s) in self.steps.iter().enumerate() {
            m.entry(s.turn).or_default().push(i);
        }
        m.into_iter().collect()
    }

    /// `X.base.tar.gz` beside `X.jsonl`.
    pub fn base_archive(&self) -> PathBuf {
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem = name.strip_suffix(".jsonl").unwrap_or(&name);
        self.path.with_file_name(format!("{stem}.base.tar.gz"))
    }

    /// The line-number gutter of the agent's own `Read` results (the first that has one), so
    /// the projection's reads look like them; `None` for an agent without a Read tool.
    pub fn read_gutter(&self) -> Option<crate::projection::LineNumbers> {
        self.steps
            .iter()
            .filter(|s| s.kind == Kind::Read && s.tool.as_deref() == Some("Read") && !s.refused())
            .find_map(|s| crate::projection::LineNumbers::of_read_result(s.output.as_deref()?))
    }

    /// The first user message: the initial prompt, else the goal.
    pub fn first_prompt(&self) -> String {
        self.header
            .initial_prompt
            .clone()
            .or_else(|| self.header.goal.clone())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind_and_rejects_bad_lines() {
        let h = r#"{"record":"header","format":"worldfs-trace/1","trace_id":"t","goal":"g"}"#;
        let mut text = String::from(h);
        for (i, k) in [
            "read", "write", "edit", "command", "search", "message", "other",
        ]
        .iter()
        .enumerate()
        {
            text += &format!(
                "\n{{\"record\":\"step\",\"step\":{i},\"turn\":{},\"kind\":\"{k}\",\"touches\":[{{\"path\":\"a\",\"op\":\"exec\"}}]}}",
                i + 1
            );
        }
        let t = Trace::parse(Path::new("x.jsonl"), &text).unwrap();
        assert_eq!(t.steps.len(), 7);
        assert_eq!(t.turns().len(), 7);
        assert_eq!(t.base_archive(), Path::new("x.base.tar.gz"));
        let bad = format!("{h}\n{{\"record\":\"step\",\"step\":0,\"turn\":1,\"kind\":\"fly\"}}");
        let e = Trace::parse(Path::new("x.jsonl"), &bad).unwrap_err();
        assert!(format!("{e:#}").contains("x.jsonl:2"), "{e:#}");
        assert!(Trace::parse(Path::new("x.jsonl"), "{}").is_err());
    }

    #[test]
    fn only_file_tools_that_answered_an_error_are_refused() {
        let step = |kind: &str, tool: &str, via: &str, err: bool| {
            let via = if via.is_empty() {
                "null".to_string()
            } else {
                format!("\"{via}\"")
            };
            serde_json::from_str::<Step>(&format!(
                r#"{{"record":"step","step":0,"turn":1,"kind":"{kind}","tool":"{tool}","via":{via},"is_error":{err}}}"#
            ))
            .unwrap()
        };
        assert!(step("edit", "Edit", "", true).refused());
        assert!(step("write", "Write", "", true).refused());
        assert!(step("read", "Read", "", true).refused());
        assert!(!step("edit", "Edit", "", false).refused());
        // a shell command's exit code may come after its effect
        assert!(!step("edit", "bash", "", true).refused());
        assert!(!step("read", "Bash", "bash", true).refused());
        assert!(!step("edit", "Edit", "bash", true).refused());
        // a command's effects stand whatever it answered
        assert!(!step("command", "Bash", "", true).refused());
        assert!(!step("search", "Grep", "", true).refused());
    }

    #[test]
    fn replacements_come_from_the_texts_else_a_multiedit_input() {
        let one: Step = serde_json::from_str(
            r#"{"record":"step","step":0,"turn":1,"kind":"edit","old_text":"a","new_text":"b","replace_all":true}"#,
        )
        .unwrap();
        let r = |old: &str, new: &str, all| Replacement {
            old: old.into(),
            new: new.into(),
            all,
        };
        assert_eq!(one.replacements(), vec![r("a", "b", true)]);
        let multi: Step = serde_json::from_str(
            r#"{"record":"step","step":0,"turn":1,"kind":"edit","tool":"MultiEdit","input":{"file_path":"f","edits":[{"old_string":"a","new_string":"b"},{"old_string":"b","new_string":"c","replace_all":true}]}}"#,
        )
        .unwrap();
        assert_eq!(
            multi.replacements(),
            vec![r("a", "b", false), r("b", "c", true)]
        );
        let shell: Step = serde_json::from_str(
            r#"{"record":"step","step":0,"turn":1,"kind":"edit","tool":"bash","command":"sed -i s/a/b/ f"}"#,
        )
        .unwrap();
        assert!(shell.replacements().is_empty());
    }

    #[test]
    fn the_gutter_is_the_one_of_the_agents_read_results() {
        let h = r#"{"record":"header","format":"worldfs-trace/1","trace_id":"t","goal":"g"}"#;
        let step = |i: usize, tool: &str, err: bool, output: &str| {
            serde_json::json!({"record": "step", "step": i, "turn": i + 1, "kind": "read",
                "tool": tool, "is_error": err, "output": output})
            .to_string()
        };
        let trace = |steps: &[String]| {
            Trace::parse(Path::new("t.jsonl"), &format!("{h}\n{}", steps.join("\n"))).unwrap()
        };
        let shell = step(0, "bash", false, "1\tx");
        assert_eq!(trace(std::slice::from_ref(&shell)).read_gutter(), None);
        let refused = step(1, "Read", true, "1\tFile does not exist.");
        let arrow = step(2, "Read", false, "     1\u{2192}x");
        let t = trace(&[shell, refused, arrow]);
        assert_eq!(t.read_gutter(), Some(crate::projection::LineNumbers::Arrow));
    }

    #[test]
    fn paths_become_relative_and_lose_dots_that_stay_inside() {
        let h = r#"{"record":"header","format":"worldfs-trace/1","trace_id":"t","goal":"g","repo_root_in_source":"/testbed/"}"#;
        let s = r#"{"record":"step","step":0,"turn":1,"kind":"read","path":"/testbed/src/a.py","touches":[{"path":"/testbed/b.py","op":"read"},{"path":"/testbedx/c.py","op":"read"},{"path":"/testbed","op":"search"},{"path":"./d/../e.py","op":"read"},{"path":"../up.py","op":"read"}]}"#;
        let t = Trace::parse(Path::new("t.jsonl"), &format!("{h}\n{s}")).unwrap();
        let st = &t.steps[0];
        assert_eq!(st.path.as_deref(), Some("src/a.py"));
        let touched: Vec<&str> = st.touches().iter().map(|t| t.path.as_str()).collect();
        assert_eq!(touched, ["b.py", "/testbedx/c.py", ".", "e.py", "../up.py"]);
    }

    #[test]
    fn a_search_tools_call_depends_on_the_directory_it_searched() {
        let h = r#"{"record":"header","format":"worldfs-trace/1","trace_id":"t","goal":"g","repo_root_in_source":"/testbed"}"#;
        let step = |i: usize, rest: &str| {
            format!(
                r#"{{"record":"step","step":{i},"turn":{},"kind":"search",{rest}}}"#,
                i + 1
            )
        };
        let steps = [
            step(
                0,
                r#""tool":"Grep","input":{"pattern":"x","path":"/testbed/src"}"#,
            ),
            step(1, r#""tool":"Glob","input":{"pattern":"*.py"},"cwd":".""#),
            step(
                2,
                r#""tool":"Grep","input":{"pattern":"x","path":"lib"},"cwd":"pkg""#,
            ),
            step(3, r#""tool":"Grep","input":{"pattern":"x","path":"/etc"}"#),
            step(4, r#""tool":"bash","via":"bash","command":"grep -r x src""#),
        ];
        let text = format!("{h}\n{}", steps.join("\n"));
        let t = Trace::parse(Path::new("t.jsonl"), &text).unwrap();
        let dirs: Vec<Option<&str>> = t.steps.iter().map(|s| s.search_dir.as_deref()).collect();
        assert_eq!(dirs, [Some("src"), Some("."), Some("pkg/lib"), None, None]);
    }
}
