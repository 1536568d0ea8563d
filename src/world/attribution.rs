//! Not every read is the agent looking. Each access is classified as:
//!
//! - **Agent**: the agent's own process, an explicit reader it ran (`cat`, `head`, `sed -n`, a
//!   shell redirect), or an interpreter opening a file named on its command line
//!   (`python script.py`). These create and refresh entries.
//! - **Weak**: interpreters, builds and test runs touching files nobody named (300 modules
//!   imported by `pytest`), editors and their indexers. These refresh entries the agent already
//!   has but never create new ones.
//! - **Scan**: whole-tree scanners (`rg`, `find`, `git status`, `grep -r`, `ls -R`). Ignored for
//!   the world: they must not flood it.
//!
//! Program names decide first. The pattern decides second: a process that looks at more than
//! `fanout_threshold` distinct paths within `fanout_window` is scanning, whatever its name
//! (`cat *.py`, the agent's own start-up walk); it is treated as a scanner until its window ends,
//! and entries it created earlier in the window are withdrawn. Changes (writes, renames, deletes)
//! are applied to the world whatever the class; the class only decides whether a *new* entry is
//! created.

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::config::{AttributionConfig, ClassName};
use super::procinfo::ProcInfo;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    Agent,
    Weak,
    Scan,
}

impl From<ClassName> for Class {
    fn from(c: ClassName) -> Self {
        match c {
            ClassName::Agent => Class::Agent,
            ClassName::Weak => Class::Weak,
            ClassName::Scan => Class::Scan,
        }
    }
}

/// The verdict for one access.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Verdict {
    pub class: Option<Class>,
    /// Entries this process created in its current window, to withdraw: it turned out to be
    /// scanning.
    pub withdraw: Vec<PathBuf>,
}

/// Identity of a process for fan-out tracking; start time 0 when the process was never seen.
type ProcKey = (u32, u64);

struct Window {
    start: SystemTime,
    seen: Vec<u64>,
    created: Vec<PathBuf>,
    scanning: bool,
}

impl Window {
    fn new(start: SystemTime) -> Self {
        Self {
            start,
            seen: Vec::new(),
            created: Vec::new(),
            scanning: false,
        }
    }
}

pub struct Attributor {
    agent: HashSet<String>,
    markers: Vec<String>,
    readers: HashSet<String>,
    weak: HashSet<String>,
    scan: HashSet<String>,
    removers: HashSet<String>,
    recursive: HashMap<String, Vec<String>>,
    unknown_program: Class,
    unknown_process: Class,
    threshold: usize,
    window: Duration,
    only_descendants: bool,
    windows: HashMap<ProcKey, Window>,
    last_program: RefCell<Option<ProgramMemo>>,
}

/// What `program_class` concluded from a process alone, path aside.
#[derive(Debug, Clone, Copy)]
enum ProgramBase {
    Fixed(Class),
    /// A weak program: an agent read when the path is named in its arguments (and it descends
    /// from the agent), weak otherwise.
    Weak {
        descends: bool,
    },
}

/// The last process classified, identified by its shared records rather than compared field by
/// field: holding them keeps their addresses from being reused by another process's.
struct ProgramMemo {
    comm: Arc<str>,
    args: Arc<[Box<str>]>,
    ancestry: Arc<[super::procinfo::Ancestor]>,
    base: ProgramBase,
}

impl ProgramMemo {
    fn is(&self, p: &ProcInfo) -> bool {
        Arc::ptr_eq(&self.comm, &p.comm)
            && Arc::ptr_eq(&self.args, &p.args)
            && Arc::ptr_eq(&self.ancestry, &p.ancestry)
    }
}

fn set(v: &[String]) -> HashSet<String> {
    v.iter().cloned().collect()
}

fn path_hash(p: &Path) -> u64 {
    let mut h = DefaultHasher::new();
    p.hash(&mut h);
    h.finish()
}

/// Whether `args` (argv[1..]) contain one of `flags`. A short flag like `-R` also matches inside a
/// cluster of letters (`-Rn`). Option values are not parsed, so `grep -e -R` counts as recursive;
/// the cost of that rare mistake is one missed single-file read.
fn has_flag(args: &[Box<str>], flags: &[String]) -> bool {
    args.iter().skip(1).any(|a| {
        flags.iter().any(|f| {
            if **a == **f {
                return true;
            }
            let short = f.len() == 2 && f.starts_with('-') && f != "--";
            let cluster = a.len() > 2
                && a.starts_with('-')
                && !a.starts_with("--")
                && a[1..].chars().all(|c| c.is_ascii_alphabetic());
            short && cluster && a[1..].contains(&f[1..])
        })
    })
}

/// Whether the file at `path` (relative to the root) is named on the command line, allowing for
/// the process running in a subdirectory (`foo.py` names `src/foo.py`), absolute paths
/// (`/mnt/x/src/foo.py`) and code on the line (`python -c "open('data.csv')"`).
pub fn named_in_args(path: &Path, args: &[Box<str>]) -> bool {
    let Some(p) = path.to_str() else { return false };
    if p.is_empty() {
        return false;
    }
    let file_name = path.file_name().and_then(|n| n.to_str()).unwrap_or(p);
    args.iter().skip(1).any(|a| {
        let a = a.strip_prefix("./").unwrap_or(a);
        if a.is_empty() || a.starts_with('-') && !a.contains('=') {
            return false;
        }
        // `long` ends with `short` right after a `/`: the same file seen from another directory.
        let tail = |long: &str, short: &str| {
            long.ends_with(short)
                && long
                    .len()
                    .checked_sub(short.len() + 1)
                    .is_some_and(|i| long.as_bytes().get(i) == Some(&b'/'))
        };
        a == p
            || tail(p, a)
            || tail(a, p)
            || (p.len() >= 4 && p.contains(['/', '.']) && a.contains(p))
            || (file_name.len() >= 5 && file_name.contains('.') && a.contains(file_name))
    })
}

impl Attributor {
    pub fn new(cfg: &AttributionConfig) -> Self {
        Self {
            agent: set(&cfg.agent_programs),
            markers: cfg.agent_cmdline_markers.clone(),
            readers: set(&cfg.reader_programs),
            weak: set(&cfg.weak_programs),
            scan: set(&cfg.scan_programs),
            removers: set(&cfg.remover_programs),
            recursive: cfg
                .recursive_flags
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            unknown_program: cfg.unknown_program.into(),
            unknown_process: cfg.unknown_process.into(),
            threshold: cfg.fanout_threshold as usize,
            window: Duration::from_millis(cfg.fanout_window_ms),
            only_descendants: cfg.only_agent_descendants,
            windows: HashMap::new(),
            last_program: RefCell::new(None),
        }
    }

    fn is_agent(&self, p: &ProcInfo) -> bool {
        self.agent.contains(&*p.comm)
            || p.args
                .iter()
                .any(|a| self.markers.iter().any(|m| a.contains(m.as_str())))
    }

    /// Whether a removal by `proc` was the agent's own doing, so that its step says so: the
    /// agent's process, or a remover (`rm`, which removes only what it is told) run below an
    /// agent program. A removal a program made on its own account (a test run's clean-up,
    /// `git clean`), or one from outside the agent (another terminal), is not, whatever
    /// `only_agent_descendants` says: the agent did not see what went. Nor is one whose
    /// process or ancestry could not be read in time.
    pub fn removed_by_agent(&self, proc: Option<&ProcInfo>) -> bool {
        let Some(p) = proc else { return false };
        self.is_agent(p) || (self.removers.contains(&*p.comm) && self.ran_by_agent(Some(p)))
    }

    /// Whether `proc` runs below an agent program: a command the agent started (through its
    /// shell), not one of another terminal, an editor or a daemon. Unknown when the process or
    /// its ancestry could not be read in time: then it is not.
    pub fn ran_by_agent(&self, proc: Option<&ProcInfo>) -> bool {
        proc.is_some_and(|p| p.ancestry.iter().any(|a| self.agent.contains(&*a.comm)))
    }

    /// The class from the program alone (and, for interpreters, the command line).
    pub fn program_class(&self, proc: Option<&ProcInfo>, path: &Path) -> Class {
        let Some(p) = proc else {
            return self.unknown_process;
        };
        // A process's observations come in runs (a `cat` of sixteen files, a `grep -r`), and
        // the part of its class that does not depend on the path took five set lookups and a
        // search of its arguments for agent markers each time: the last answer is kept, for
        // the same shared records of the same process.
        let base = {
            let mut memo = self.last_program.borrow_mut();
            match &*memo {
                Some(m) if m.is(p) => m.base,
                _ => {
                    let base = self.program_base(p);
                    *memo = Some(ProgramMemo {
                        comm: Arc::clone(&p.comm),
                        args: Arc::clone(&p.args),
                        ancestry: Arc::clone(&p.ancestry),
                        base,
                    });
                    base
                }
            }
        };
        match base {
            ProgramBase::Fixed(c) => c,
            ProgramBase::Weak { descends } => {
                if named_in_args(path, &p.args) && descends {
                    Class::Agent
                } else {
                    Class::Weak
                }
            }
        }
    }

    fn program_base(&self, p: &ProcInfo) -> ProgramBase {
        let comm = &*p.comm;
        if self.scan.contains(comm) {
            return ProgramBase::Fixed(Class::Scan);
        }
        if self
            .recursive
            .get(comm)
            .is_some_and(|flags| has_flag(&p.args, flags))
        {
            return ProgramBase::Fixed(Class::Scan);
        }
        if self.is_agent(p) {
            return ProgramBase::Fixed(Class::Agent);
        }
        let descends =
            !self.only_descendants || p.ancestry.iter().any(|a| self.agent.contains(&*a.comm));
        let class = if self.readers.contains(comm) {
            Class::Agent
        } else if self.weak.contains(comm) {
            return ProgramBase::Weak { descends };
        } else {
            self.unknown_program
        };
        ProgramBase::Fixed(match class {
            Class::Agent if !descends => Class::Weak,
            c => c,
        })
    }

    /// Classifies one access by `pid` to `path` at `time`. `looking` is true for reads and
    /// listings; writes are never subject to the fan-out rule (an agent's `sed -i` over fifty
    /// files still wrote them).
    pub fn classify(
        &mut self,
        pid: u32,
        proc: Option<&ProcInfo>,
        path: &Path,
        time: SystemTime,
        looking: bool,
    ) -> Verdict {
        if pid == 0 {
            // Releases and the like carry no caller; they can change entries, never create.
            return Verdict::default();
        }
        let class = self.program_class(proc, path);
        if class != Class::Agent || !looking {
            return Verdict {
                class: Some(class),
                withdraw: Vec::new(),
            };
        }
        let key = (pid, proc.map_or(0, |p| p.start_time));
        self.prune(time);
        let window = self.window;
        let w = self.windows.entry(key).or_insert_with(|| Window::new(time));
        if time.duration_since(w.start).unwrap_or(Duration::ZERO) > window {
            *w = Window::new(time);
        }
        if w.scanning {
            return Verdict {
                class: Some(Class::Scan),
                withdraw: Vec::new(),
            };
        }
        let h = path_hash(path);
        if !w.seen.contains(&h) {
            w.seen.push(h);
        }
        if w.seen.len() > self.threshold {
            w.scanning = true;
            w.seen = Vec::new();
            return Verdict {
                class: Some(Class::Scan),
                withdraw: std::mem::take(&mut w.created),
            };
        }
        Verdict {
            class: Some(Class::Agent),
            withdraw: Vec::new(),
        }
    }

    /// The access just classified created a new entry; remember it in case the process turns
    /// out to be scanning.
    pub fn created(&mut self, pid: u32, proc: Option<&ProcInfo>, path: &Path) {
        let key = (pid, proc.map_or(0, |p| p.start_time));
        if let Some(w) = self.windows.get_mut(&key)
            && !w.scanning
        {
            w.created.push(path.to_owned());
        }
    }

    /// Forgets windows long over, so a busy machine's many short processes do not accumulate.
    fn prune(&mut self, now: SystemTime) {
        if self.windows.len() < 256 {
            return;
        }
        let keep = self.window * 4;
        self.windows
            .retain(|_, w| now.duration_since(w.start).unwrap_or(Duration::ZERO) <= keep);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, comm: &str, args: &[&str]) -> ProcInfo {
        ProcInfo::synthetic(pid, comm, args, &[(10, "bash"), (5, "claude")])
    }

    fn at(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
    }

    fn class(a: &Attributor, proc: &ProcInfo, path: &str) -> Class {
        a.program_class(Some(proc), Path::new(path))
    }

    #[test]
    fn programs_decide_first() {
        let a = Attributor::new(&AttributionConfig::default());
        assert_eq!(
            class(&a, &p(1, "cat", &["cat", "a.rs"]), "a.rs"),
            Class::Agent
        );
        assert_eq!(
            class(&a, &p(1, "claude", &["claude"]), "a.rs"),
            Class::Agent
        );
        assert_eq!(class(&a, &p(1, "rg", &["rg", "foo"]), "a.rs"), Class::Scan);
        assert_eq!(
            class(&a, &p(1, "git", &["git", "status"]), "a.rs"),
            Class::Scan
        );
        assert_eq!(
            class(&a, &p(1, "grep", &["grep", "-rn", "x", "."]), "a.rs"),
            Class::Scan
        );
        assert_eq!(
            class(&a, &p(1, "grep", &["grep", "-n", "x", "a.rs"]), "a.rs"),
            Class::Agent
        );
        assert_eq!(
            class(&a, &p(1, "grep", &["grep", "-e", "-x-", "a.rs"]), "a.rs"),
            Class::Agent
        );
        assert_eq!(class(&a, &p(1, "ls", &["ls", "-la"]), ""), Class::Agent);
        assert_eq!(class(&a, &p(1, "ls", &["ls", "-laR"]), ""), Class::Scan);
        assert_eq!(
            class(
                &a,
                &p(1, "python3", &["python3", "-m", "pytest"]),
                "pkg/m.py"
            ),
            Class::Weak
        );
        assert_eq!(
            class(
                &a,
                &p(1, "python3", &["python3", "tools/gen.py"]),
                "tools/gen.py"
            ),
            Class::Agent
        );
        assert_eq!(
            class(
                &a,
                &p(
                    1,
                    "node",
                    &[
                        "node",
                        "/usr/lib/node_modules/@anthropic-ai/claude-code/cli.js"
                    ]
                ),
                "x.ts"
            ),
            Class::Agent
        );
        assert_eq!(class(&a, &p(1, "mystery", &["mystery"]), "a"), Class::Weak);
        assert_eq!(a.program_class(None, Path::new("a")), Class::Agent);
    }

    #[test]
    fn only_descendants_demotes_foreign_readers() {
        let cfg = AttributionConfig {
            only_agent_descendants: true,
            ..AttributionConfig::default()
        };
        let a = Attributor::new(&cfg);
        let foreign = ProcInfo::synthetic(1, "cat", &["cat", "a"], &[(2, "zsh")]);
        assert_eq!(class(&a, &foreign, "a"), Class::Weak);
        assert_eq!(class(&a, &p(1, "cat", &["cat", "a"]), "a"), Class::Agent);
    }

    /// A removal is the agent's when the agent made it or ran `rm` to make it; not a program's
    /// own clean-up, nor another terminal's `rm`, even where that terminal's reads count as the
    /// agent's.
    #[test]
    fn a_removal_is_the_agents_when_it_ran_a_remover() {
        let a = Attributor::new(&AttributionConfig::default());
        let gone = |p: &ProcInfo| a.removed_by_agent(Some(p));
        let claude = ProcInfo::synthetic(5, "claude", &["claude"], &[(1, "zsh")]);
        assert!(gone(&claude), "the agent's own unlink");
        assert!(gone(&p(1, "rm", &["rm", "reproduce.py"])));
        assert!(gone(&p(1, "rm", &["rm", "-rf", "build"])));
        assert!(gone(&p(1, "rmdir", &["rmdir", "out"])));
        let pytest = p(1, "python3", &["python3", "-m", "pytest"]);
        assert!(!gone(&pytest), "a test run's clean-up");
        assert!(
            !gone(&p(1, "git", &["git", "clean", "-fd"])),
            "files git chose"
        );
        let elsewhere = ProcInfo::synthetic(1, "rm", &["rm", "notes.md"], &[(2, "zsh")]);
        assert!(
            !gone(&elsewhere),
            "another terminal, though its reads count as the agent's by default"
        );
        assert!(!a.removed_by_agent(None), "nobody known");
    }

    /// A command runs below the agent when an agent program is among its ancestors; a program
    /// of another terminal, or one whose ancestry is unknown, does not.
    #[test]
    fn a_command_of_the_agents_runs_below_it() {
        let a = Attributor::new(&AttributionConfig::default());
        let script = p(1, "python3", &["python3", "fix.py"]);
        assert!(a.ran_by_agent(Some(&script)));
        let elsewhere = ProcInfo::synthetic(1, "python3", &["python3", "fix.py"], &[(2, "zsh")]);
        assert!(!a.ran_by_agent(Some(&elsewhere)));
        let claude = ProcInfo::synthetic(5, "claude", &["claude"], &[(1, "zsh")]);
        assert!(
            !a.ran_by_agent(Some(&claude)),
            "the agent itself is no command of its own"
        );
        assert!(!a.ran_by_agent(None));
    }

    /// The same process record classified again (as ingest does for every observation of one
    /// process) answers from the memo for its program, and still per path where the path
    /// matters.
    #[test]
    fn repeated_process_keeps_path_dependent_classes() {
        let a = Attributor::new(&AttributionConfig::default());
        let py = p(1, "python3", &["python3", "tools/gen.py"]);
        for _ in 0..2 {
            assert_eq!(
                a.program_class(Some(&py), Path::new("tools/gen.py")),
                Class::Agent
            );
            assert_eq!(
                a.program_class(Some(&py), Path::new("pkg/m.py")),
                Class::Weak
            );
        }
        let rg = p(2, "rg", &["rg", "x"]);
        assert_eq!(a.program_class(Some(&rg), Path::new("a.rs")), Class::Scan);
        let cat = p(3, "cat", &["cat", "a.rs"]);
        assert_eq!(a.program_class(Some(&cat), Path::new("a.rs")), Class::Agent);
        assert_eq!(
            a.program_class(Some(&py), Path::new("pkg/m.py")),
            Class::Weak
        );
    }

    #[test]
    fn named_files() {
        let args = |v: &[&str]| v.iter().map(|s| Box::<str>::from(*s)).collect::<Vec<_>>();
        assert!(named_in_args(
            Path::new("src/foo.py"),
            &args(&["python", "foo.py"])
        ));
        assert!(named_in_args(
            Path::new("src/foo.py"),
            &args(&["python", "./src/foo.py"])
        ));
        assert!(named_in_args(
            Path::new("src/foo.py"),
            &args(&["python", "/mnt/w/src/foo.py"])
        ));
        assert!(named_in_args(
            Path::new("data/x.csv"),
            &args(&["python", "-c", "print(open('data/x.csv').read())"])
        ));
        assert!(!named_in_args(
            Path::new("src/foo.py"),
            &args(&["python", "-m", "pytest"])
        ));
        assert!(!named_in_args(
            Path::new("src/xfoo.py"),
            &args(&["python", "oo.py"])
        ));
        assert!(
            !named_in_args(Path::new("foo.py"), &args(&["foo.py"])),
            "argv[0] is the program"
        );
    }

    #[test]
    fn fanout_turns_a_reader_into_a_scanner_and_withdraws() {
        let cfg = AttributionConfig {
            fanout_threshold: 3,
            fanout_window_ms: 1000,
            ..AttributionConfig::default()
        };
        let mut a = Attributor::new(&cfg);
        let cat = p(7, "cat", &["cat"]);
        for (i, f) in ["a", "b", "a", "c"].iter().enumerate() {
            let v = a.classify(7, Some(&cat), Path::new(f), at(i as u64), true);
            assert_eq!(v.class, Some(Class::Agent), "{f}");
            a.created(7, Some(&cat), Path::new(f));
        }
        let v = a.classify(7, Some(&cat), Path::new("d"), at(10), true);
        assert_eq!(v.class, Some(Class::Scan));
        assert_eq!(v.withdraw.len(), 4, "everything created in the window");
        let v = a.classify(7, Some(&cat), Path::new("a"), at(20), true);
        assert_eq!(
            v,
            Verdict {
                class: Some(Class::Scan),
                withdraw: vec![]
            }
        );
        // Writes are not looking: never subject to fan-out.
        let v = a.classify(7, Some(&cat), Path::new("e"), at(30), false);
        assert_eq!(v.class, Some(Class::Agent));
        // A new window: a reader again.
        let v = a.classify(7, Some(&cat), Path::new("a"), at(2000), true);
        assert_eq!(v.class, Some(Class::Agent));
    }

    #[test]
    fn pid_zero_is_unattributed() {
        let mut a = Attributor::new(&AttributionConfig::default());
        assert_eq!(a.classify(0, None, Path::new("a"), at(0), true).class, None);
    }
}
