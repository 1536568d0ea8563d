//! End-to-end tests of the world: realistic observation sequences against a real SOURCE tree,
//! with a fixed process table standing in for `/proc`.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::*;
use crate::observation::{ExternalChange, Observation, ObservationSink, Op};

const CLAUDE: u32 = 100;
const BASH: u32 = 101;
const CAT: u32 = 200;
const RG: u32 = 300;
const PYTEST: u32 = 400;
const SED: u32 = 500;
const CAT_GLOB: u32 = 600;
const RM: u32 = 700;
/// `python3 fix.py`, run by the agent's shell.
const FIX: u32 = 800;
/// A formatter started from another terminal (an editor's format-on-save).
const FORMATTER: u32 = 810;

fn procs() -> Arc<StaticProcesses> {
    let chain: &[(u32, &str)] = &[(BASH, "bash"), (CLAUDE, "claude")];
    Arc::new(StaticProcesses::new([
        ProcInfo::synthetic(CLAUDE, "claude", &["claude"], &[(1, "zsh")]),
        ProcInfo::synthetic(BASH, "bash", &["bash", "-c", "..."], &[(CLAUDE, "claude")]),
        ProcInfo::synthetic(CAT, "cat", &["cat", "src/main.py"], chain),
        ProcInfo::synthetic(RG, "rg", &["rg", "TODO"], chain),
        ProcInfo::synthetic(PYTEST, "python3", &["python3", "-m", "pytest"], chain),
        ProcInfo::synthetic(SED, "sed", &["sed", "-n", "1,20p", "src/util.py"], chain),
        ProcInfo::synthetic(CAT_GLOB, "cat", &["cat", "src/pkg/*.py"], chain),
        ProcInfo::synthetic(
            RM,
            "rm",
            &["rm", "src/main.py", "src/old.txt", "README.md"],
            chain,
        ),
        ProcInfo::synthetic(FIX, "python3", &["python3", "fix.py"], chain),
        ProcInfo::synthetic(FORMATTER, "black", &["black", "."], &[(2, "zsh")]),
    ]))
}

fn write(root: &Path, rel: &str, content: &[u8]) {
    let p = root.join(rel);
    if let Some(parent) = p.parent() {
        fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
    }
    fs::write(p, content).unwrap_or_else(|e| panic!("{e}"));
}

fn source_tree() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let r = dir.path();
    write(r, ".gitignore", b"*.log\n");
    write(r, "README.md", b"# demo\n");
    write(r, "src/main.py", b"print('hello')\n");
    write(r, "src/util.py", b"def helper():\n    return 42\n");
    write(r, "src/old.txt", b"obsolete notes\n");
    for i in 0..300 {
        write(
            r,
            &format!("src/pkg/mod_{i:03}.py"),
            format!("X = {i}\n").as_bytes(),
        );
    }
    write(r, ".env", b"API_KEY=hunter2\n");
    write(r, "target/debug/app", b"\x7fELF\0\0\0");
    write(r, "app.log", b"log line\n");
    write(r, "data.bin", b"\x89PNG\0\0\0\0");
    dir
}

/// Builds observations with increasing sequence numbers and a controllable clock.
struct Script {
    seq: u64,
    now: SystemTime,
    out: Vec<Observation>,
}

impl Script {
    fn new() -> Self {
        Self {
            seq: 0,
            now: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
            out: Vec::new(),
        }
    }

    fn push(&mut self, pid: u32, path: &str, op: Op) -> u64 {
        self.seq += 1;
        self.now += Duration::from_millis(1);
        self.out.push(Observation {
            seq: self.seq,
            time: self.now,
            op,
            path: PathBuf::from(path),
            pid,
            caller: None,
        });
        self.seq
    }

    fn read(&mut self, pid: u32, path: &str) -> u64 {
        let op = Op::Open {
            read: true,
            write: false,
            truncate: false,
            created: false,
        };
        self.push(pid, path, op)
    }

    fn pause(&mut self, ms: u64) {
        self.now += Duration::from_millis(ms);
    }

    fn take(&mut self) -> Vec<Observation> {
        std::mem::take(&mut self.out)
    }
}

fn world(root: &Path) -> Arc<World> {
    World::builder_at(root)
        .unwrap_or_else(|e| panic!("{e}"))
        .process_source(procs())
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

/// A world in daemon I/O mode: reads carry byte ranges.
fn ranged_world(root: &Path) -> Arc<World> {
    World::builder_at(root)
        .unwrap_or_else(|e| panic!("{e}"))
        .process_source(procs())
        .reads_by_range(true)
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn programs(e: &Entry) -> Vec<&str> {
    e.programs.iter().collect()
}

#[test]
fn agent_like_session_yields_exactly_the_expected_world() {
    let dir = source_tree();
    let root = dir.path();
    let w = world(root);
    let mut s = Script::new();

    // The agent lists the root, `cat`s a file, then rewrites it.
    s.push(CLAUDE, "", Op::ReadDir);
    s.read(CAT, "src/main.py");
    let open_w = Op::Open {
        read: false,
        write: true,
        truncate: true,
        created: false,
    };
    s.push(CLAUDE, "src/main.py", open_w);
    write(root, "src/main.py", b"print('hello, world')\n");
    let close_seq = s.push(0, "src/main.py", Op::Close { wrote: true });

    // `rg` walks the whole tree: nothing new, nothing counted.
    for d in ["", "src", "src/pkg"] {
        s.push(RG, d, Op::ReadDir);
    }
    s.read(RG, "README.md");
    s.read(RG, "src/main.py");
    for i in 0..300 {
        s.read(RG, &format!("src/pkg/mod_{i:03}.py"));
    }

    // A test run imports 300 modules and the edited file: weak, creates nothing.
    s.read(PYTEST, "src/main.py");
    for i in 0..300 {
        s.read(PYTEST, &format!("src/pkg/mod_{i:03}.py"));
    }

    // `cat src/pkg/*.py` over 40 files: a reader by name, a scanner by pattern.
    for i in 0..40 {
        s.read(CAT_GLOB, &format!("src/pkg/mod_{i:03}.py"));
    }

    // The model thinks; the next burst is a new turn.
    s.pause(5000);
    s.read(SED, "src/util.py");
    s.read(CAT, ".env");
    s.read(CAT, "target/debug/app");
    s.read(CAT, "app.log");
    s.read(CAT, "data.bin");
    s.read(CAT, "src/old.txt");
    w.ingest(s.take());

    // Rename a file, then its directory, then delete one; SOURCE follows along.
    let rename = |to: &str, dir: bool| Op::Rename {
        to: PathBuf::from(to),
        exchange: false,
        dir,
    };
    fs::rename(root.join("src/main.py"), root.join("src/app.py")).unwrap_or_else(|e| panic!("{e}"));
    s.push(CLAUDE, "src/main.py", rename("src/app.py", false));
    fs::rename(root.join("src"), root.join("lib")).unwrap_or_else(|e| panic!("{e}"));
    s.push(CLAUDE, "src", rename("lib", true));
    fs::remove_file(root.join("lib/old.txt")).unwrap_or_else(|e| panic!("{e}"));
    let unlink_seq = s.push(CLAUDE, "lib/old.txt", Op::Unlink);

    // Someone edits the renamed file behind the mount.
    write(
        root,
        "lib/app.py",
        b"print('edited outside')\nprint('twice')\n",
    );
    let ext_seq = s.push(
        0,
        "lib/app.py",
        Op::External {
            change: ExternalChange::Modified,
        },
    );
    w.ingest(s.take());
    w.refresh_stale();

    let entries = w.entries();
    let summary: Vec<(String, EntryKind, EntryState)> = entries
        .iter()
        .map(|(p, e)| (p.to_string_lossy().into_owned(), e.kind, e.state))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("".into(), EntryKind::Dir, EntryState::Live),
            (".env".into(), EntryKind::File, EntryState::Withheld),
            (
                "data.bin".into(),
                EntryKind::File,
                EntryState::Ignored(IgnoreReason::Binary)
            ),
            ("lib/app.py".into(), EntryKind::File, EntryState::Live),
            ("lib/old.txt".into(), EntryKind::File, EntryState::Deleted),
            ("lib/util.py".into(), EntryKind::File, EntryState::Live),
        ]
    );
    let get = |p: &str| {
        w.entry(Path::new(p))
            .unwrap_or_else(|| panic!("no entry {p}"))
    };

    let app = get("lib/app.py");
    assert_eq!(app.reads, 1, "only the cat counts; rg and pytest do not");
    assert_eq!(app.weak_reads, 1, "pytest imported it");
    assert!(app.agent_wrote);
    assert_eq!(programs(&app), vec!["cat", "claude", "python3"]);
    assert_eq!(app.extent, Extent::Whole);
    assert_eq!(app.last_changed.map(|c| c.seq), Some(ext_seq));
    assert!(!app.needs_rehash);
    let now = fs::read(root.join("lib/app.py")).unwrap_or_default();
    assert_eq!(app.hash, Some(tokens::hash(&now)));
    assert_eq!(app.size, Some(now.len() as u64));
    assert_eq!(app.first_observed.turn, 0);
    assert!(close_seq < ext_seq);

    let util = get("lib/util.py");
    assert_eq!(
        (util.reads, util.weak_reads, util.agent_wrote),
        (1, 0, false)
    );
    assert_eq!(programs(&util), vec!["sed"]);
    assert_eq!(util.last_agent_turn, 1, "read after the idle gap");

    let old = get("lib/old.txt");
    assert_eq!(old.last_changed.map(|c| c.seq), Some(unlink_seq));

    let listing = get("");
    assert_eq!(
        programs(&listing),
        vec!["claude"],
        "rg's listings do not count"
    );

    let env = get(".env");
    assert_eq!(
        (env.hash, env.tokens),
        (None, None),
        "withheld content is never read"
    );

    let st = w.stats();
    assert_eq!(
        st.entries,
        StateCounts {
            live: 3,
            deleted: 1,
            withheld: 1,
            ignored: 1
        }
    );
    assert_eq!(
        st.withdrawn, 32,
        "the globbing cat's entries were withdrawn"
    );
    assert_eq!(st.ignored_accesses, 2, "target/ and the gitignored log");
    assert_eq!(
        st.by_class.scan,
        3 + 2 + 300 + 8,
        "rg plus the glob cat past its threshold"
    );
    assert_eq!(st.by_class.weak, 301);
    assert_eq!(st.by_class.external, 1);
    assert_eq!(st.turn, 1);

    // Content always comes from SOURCE, never from the cache.
    let cur = w
        .read_current(Path::new("lib/app.py"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(cur.bytes, now);
    assert!(cur.tokens > 0);
    assert!(matches!(
        w.read_current(Path::new(".env")),
        Err(ReadError::Withheld { .. })
    ));
    assert!(matches!(
        w.read_current(Path::new("data.bin")),
        Err(ReadError::Ignored { .. })
    ));
    assert!(matches!(
        w.read_current(Path::new("../etc/passwd")),
        Err(ReadError::Source(SourceError::BadPath { .. }))
    ));
    let root_listing = w
        .read_current(Path::new(""))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(String::from_utf8_lossy(&root_listing.bytes).contains("lib/\n"));

    // A selection under a tight budget keeps what the agent wrote.
    let policy = w
        .policy("worldfs")
        .unwrap_or_else(|| panic!("no worldfs policy"));
    let sel = w.select(
        app.tokens.map_or(0, u64::from) + u64::from(HEADER_TOKENS),
        policy.as_ref(),
    );
    assert_eq!(
        sel.kept.first().map(|k| k.path.as_path()),
        Some(Path::new("lib/app.py"))
    );
    assert!(sel.total_tokens <= sel.budget);
}

#[test]
fn rescan_marks_everything_stale_and_removed_directories_delete_children() {
    let dir = source_tree();
    let root = dir.path();
    let w = world(root);
    let mut s = Script::new();
    s.read(CAT, "src/main.py");
    s.read(CAT, "src/util.py");
    s.read(CAT, "README.md");
    w.ingest(s.take());
    w.refresh_stale();
    assert_eq!(w.stats().stale_entries, 0);
    s.push(
        0,
        "",
        Op::External {
            change: ExternalChange::Rescan,
        },
    );
    w.ingest(s.take());
    assert_eq!(w.stats().stale_entries, 3);
    fs::remove_dir_all(root.join("src")).unwrap_or_else(|e| panic!("{e}"));
    s.push(
        0,
        "src",
        Op::External {
            change: ExternalChange::Removed,
        },
    );
    w.ingest(s.take());
    let st = w.stats();
    assert_eq!((st.entries.live, st.entries.deleted), (1, 2));
    // A file removed behind the mount is deleted alone.
    fs::remove_file(root.join("README.md")).unwrap_or_else(|e| panic!("{e}"));
    s.push(
        0,
        "README.md",
        Op::External {
            change: ExternalChange::RemovedFile,
        },
    );
    w.ingest(s.take());
    let st = w.stats();
    assert_eq!((st.entries.live, st.entries.deleted), (0, 3));
}

#[test]
fn atomic_save_and_secret_renames() {
    let dir = source_tree();
    let root = dir.path();
    let w = world(root);
    let mut s = Script::new();
    s.read(CAT, "README.md");
    s.read(CAT, "src/util.py");
    // An editor-style save: write README.md.tmp, rename it over README.md.
    let create = Op::Open {
        read: false,
        write: true,
        truncate: true,
        created: true,
    };
    s.push(CLAUDE, "README.md.tmp", create);
    s.push(
        CLAUDE,
        "README.md.tmp",
        Op::Rename {
            to: "README.md".into(),
            exchange: false,
            dir: false,
        },
    );
    // Renaming a file to a secret's name withholds it.
    s.push(
        CLAUDE,
        "src/util.py",
        Op::Rename {
            to: "src/.env.local".into(),
            exchange: false,
            dir: false,
        },
    );
    w.ingest(s.take());
    let readme = w
        .entry(Path::new("README.md"))
        .unwrap_or_else(|| panic!("no README"));
    assert_eq!((readme.reads, readme.agent_wrote), (1, true));
    assert!(w.entry(Path::new("README.md.tmp")).is_none());
    let secret = w.entry(Path::new("src/.env.local")).map(|e| e.state);
    assert_eq!(secret, Some(EntryState::Withheld));
}

#[test]
fn ranges_in_daemon_io_mode() {
    let dir = source_tree();
    let root = dir.path();
    let w = ranged_world(root);
    let mut s = Script::new();
    s.read(CAT, "src/util.py");
    s.push(CAT, "src/util.py", Op::Read { offset: 0, len: 10 });
    s.push(CAT, "src/util.py", Op::Read { offset: 10, len: 4 });
    w.ingest(s.take());
    let e = w
        .entry(Path::new("src/util.py"))
        .unwrap_or_else(|| panic!("no entry"));
    let mut want = RangeSet::new();
    want.insert(ByteRange::at(0, 14));
    assert_eq!(e.extent, Extent::Ranges(want));
    assert_eq!(e.reads, 1, "one open, however many read calls");
}

/// The byte range of 1-based lines `a..=b` of `text`.
fn lines_span(text: &str, a: usize, b: usize) -> ByteRange {
    views::line_span(text.as_bytes(), Some((a as u64, b as u64)))
}

/// `cat` reads lines `a..=b` of `path` (whose content is `text`): a view; returns its bytes.
fn view_lines(s: &mut Script, path: &str, text: &str, a: usize, b: usize) -> ByteRange {
    let seen = lines_span(text, a, b);
    s.push(
        CAT,
        path,
        Op::Read {
            offset: seen.start,
            len: seen.len(),
        },
    );
    seen
}

/// Claude writes `content` over `path` (already open for writing, as a rewrite is) and closes it.
fn agent_writes(root: &Path, s: &mut Script, path: &str, content: &[u8]) {
    write(root, path, content);
    s.push(
        CLAUDE,
        path,
        Op::Write {
            offset: 0,
            len: content.len() as u64,
        },
    );
    s.push(CLAUDE, path, Op::Close { wrote: true });
}

/// `path`'s entry once the world has taken in the script so far and counted what changed.
fn counted(w: &World, s: &mut Script, path: &str) -> Entry {
    w.ingest(s.take());
    w.refresh_stale();
    w.entry(Path::new(path))
        .unwrap_or_else(|| panic!("no entry for {path}"))
}

/// A world in daemon I/O mode where the agent read lines 20-24 of `big.py` ("line 1" to
/// "line 40"), counted.
fn viewed_lines_20_to_24(root: &Path) -> (Arc<World>, Script) {
    let old: String = (1..=40).map(|k| format!("line {k}\n")).collect();
    write(root, "big.py", old.as_bytes());
    let w = ranged_world(root);
    let mut s = Script::new();
    s.read(CAT, "big.py");
    view_lines(&mut s, "big.py", &old, 20, 24);
    w.ingest(s.take());
    w.refresh_stale();
    (w, s)
}

/// An agent read lines 20-24 of a file, then rewrote it (truncate and write, as an editor or a
/// Write tool does) with two lines inserted above and line 30 changed: the view still shows
/// lines 20-24, now two lines down, and the two places the edit touched, with three lines of
/// context, are the newest views. Before, the truncate dropped every view.
#[test]
fn views_follow_their_lines_through_an_agent_rewrite() {
    let dir = source_tree();
    let root = dir.path();
    let (w, mut s) = viewed_lines_20_to_24(root);

    let mut lines: Vec<String> = (1..=40).map(|k| format!("line {k}")).collect();
    lines.insert(5, "new a".into());
    lines.insert(6, "new b".into());
    lines[31] = "line 30, edited".into();
    let new = lines.join("\n") + "\n";
    let open = Op::Open {
        read: false,
        write: true,
        truncate: true,
        created: false,
    };
    // counted in the middle of the rewrite, while it is empty: the views wait for the content
    write(root, "big.py", b"");
    s.push(CLAUDE, "big.py", open);
    w.ingest(s.take());
    w.refresh_stale();
    agent_writes(root, &mut s, "big.py", new.as_bytes());
    let e = counted(&w, &mut s, "big.py");
    assert_eq!(
        e.recent.views(),
        &[
            lines_span(&new, 22, 26),
            lines_span(&new, 3, 10),
            lines_span(&new, 29, 35),
        ]
    );
    // what the agent wrote counts as seen: the read ranges follow too, and take in the edits
    let Extent::Ranges(set) = &e.extent else {
        panic!("extent {:?}", e.extent);
    };
    assert_eq!(
        set.as_slice(),
        &[
            lines_span(&new, 3, 10),
            lines_span(&new, 22, 26),
            lines_span(&new, 29, 35),
        ]
    );
}

/// The same through an atomic save (`sed -i`, most editors): the agent writes a temporary file
/// and renames it over the one it read.
#[test]
fn views_follow_their_lines_through_an_atomic_save() {
    let dir = source_tree();
    let root = dir.path();
    let (w, mut s) = viewed_lines_20_to_24(root);

    let mut lines: Vec<String> = (1..=40).map(|k| format!("line {k}")).collect();
    lines.remove(1);
    let new = lines.join("\n") + "\n";
    write(root, "big.py", new.as_bytes());
    let create = Op::Open {
        read: false,
        write: true,
        truncate: true,
        created: true,
    };
    s.push(SED, "sedAbc123", create);
    s.push(
        SED,
        "sedAbc123",
        Op::Rename {
            to: "big.py".into(),
            exchange: false,
            dir: false,
        },
    );
    let e = counted(&w, &mut s, "big.py");
    // line 2 removed: the view moves up a line; the place it was, with context, is newest
    assert_eq!(
        e.recent.views(),
        &[lines_span(&new, 19, 23), lines_span(&new, 1, 4)]
    );
}

#[test]
fn ingest_thread_consumes_a_sink_and_journals() {
    let dir = source_tree();
    let root = dir.path();
    let jdir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let jpath = jdir.path().join("journal.jsonl");
    let w = World::builder_at(root)
        .unwrap_or_else(|e| panic!("{e}"))
        .process_source(procs())
        .journal(&jpath)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let (sink, rx) = ObservationSink::bounded(1024);
    let handle = w.spawn_ingest(rx).unwrap_or_else(|e| panic!("{e}"));
    let sink2 = sink.clone();
    w.set_drop_counter(move || sink2.dropped());
    let open = || Op::Open {
        read: true,
        write: false,
        truncate: false,
        created: false,
    };
    sink.emit(open(), CAT, || Some(PathBuf::from("src/main.py")));
    sink.emit(Op::ReadDir, CLAUDE, || Some(PathBuf::from("src")));
    sink.emit(open(), RG, || Some(PathBuf::from("README.md")));
    drop(sink);
    // The drop-counter closure holds a sink clone, so the channel stays open: stop explicitly.
    w.stop_ingest();
    handle
        .join()
        .unwrap_or_else(|_| panic!("ingest thread panicked"));
    let st = w.stats();
    assert_eq!(st.observations, 3);
    assert_eq!(st.dropped, Some(0));
    assert_eq!(st.by_class.agent, 2);
    assert!(w.entry(Path::new("src/main.py")).is_some());
    assert!(w.entry(Path::new("README.md")).is_none());
    let journal = fs::read_to_string(&jpath).unwrap_or_default();
    assert_eq!(journal.lines().count(), 3);
    assert!(journal.contains("\"class\":\"scan\"") && journal.contains("\"comm\":\"rg\""));
}

#[test]
fn ingest_thread_ends_when_every_sink_is_gone() {
    let dir = source_tree();
    let w = world(dir.path());
    let (sink, rx) = ObservationSink::bounded(16);
    let handle = w.spawn_ingest(rx).unwrap_or_else(|e| panic!("{e}"));
    sink.emit(Op::ReadDir, CLAUDE, || Some(PathBuf::new()));
    drop(sink);
    handle
        .join()
        .unwrap_or_else(|_| panic!("ingest thread panicked"));
    assert_eq!(w.stats().observations, 1);
}

#[test]
fn thrash_guard_learns_from_each_requesters_own_evictions() {
    let dir = source_tree();
    let root = dir.path();
    write(root, "big.txt", "word ".repeat(4000).as_bytes());
    let w = world(root);
    let policy = w.policy("worldfs").unwrap_or_else(|| panic!("no policy"));
    let mut s = Script::new();
    s.read(CAT, "big.txt");
    w.ingest(s.take());
    let big_cost = w
        .candidates()
        .iter()
        .find(|c| c.path == Path::new("big.txt"))
        .map_or(0, |c| u64::from(c.whole_tokens));
    assert!(big_cost > 1000);
    let big = Path::new("big.txt");
    let first = |sel: &Selection| sel.kept.first().map(|k| k.path.clone());
    // Room for big.txt and little more: kept while alone.
    let budget = big_cost + 10;
    let sel = w.select(budget, policy.as_ref());
    assert_eq!(first(&sel), Some(big.to_path_buf()));
    // A small file read: worth more per token, so the requester drops big.txt, and counts it.
    s.read(CAT, "src/main.py");
    w.ingest(s.take());
    let sel = w.select(budget, policy.as_ref());
    assert!(sel.evicted.iter().any(|e| e.path == big));
    let last = w.last_selection().unwrap_or_else(|| panic!("no selection"));
    assert!(last.kept(Path::new("src/main.py")) && !last.kept(big));
    assert_eq!(last.evictions(big), 1);
    // The agent reads it again: that eviction was wrong, and this requester protects it now.
    s.read(CAT, "big.txt");
    w.ingest(s.take());
    let sel = w.select(budget, policy.as_ref());
    assert_eq!(first(&sel), Some(big.to_path_buf()));
    // Another requester never dropped it after a read, so it has nothing to learn: by value
    // per token, the small file goes first and big.txt does not fit.
    let sel = w.select(budget + 5, policy.as_ref());
    assert_eq!(first(&sel), Some(PathBuf::from("src/main.py")));
    assert!(sel.evicted.iter().any(|e| e.path == big));
    assert_eq!(w.last_selection().map(|l| l.evictions(big)), Some(0));
}

/// What one requester's projection keeps does not depend on who else asks: a client at a
/// tight budget beside it (a `worldfs projection --budget` typed beside a proxy, the replay's
/// strategies) must not change it through what the guard learns from its evictions.
#[test]
fn a_requesters_selections_do_not_depend_on_other_requesters() {
    const FILES: usize = 10;
    let make = || {
        let dir = source_tree();
        for i in 0..FILES {
            let body = format!("value_{i} = {i}\n").repeat(20 + 40 * i);
            write(dir.path(), &format!("m{i}.py"), body.as_bytes());
        }
        let w = world(dir.path());
        (dir, w)
    };
    // A third of what all the files cost: room for a few of them.
    let budget = {
        let (_d, w) = make();
        let mut s = Script::new();
        for i in 0..FILES {
            s.read(CAT, &format!("m{i}.py"));
        }
        w.ingest(s.take());
        w.candidates()
            .iter()
            .map(|c| u64::from(c.whole_tokens))
            .sum::<u64>()
            / 3
    };
    let mut differed_from_tight = false;
    for seed in 1..=12u64 {
        let (_d1, alone) = make();
        let (_d2, shared) = make();
        let policy = alone
            .policy("worldfs")
            .unwrap_or_else(|| panic!("no policy"));
        let (mut sa, mut sb) = (Script::new(), Script::new());
        // A fixed pseudo-random walk over the files, with comebacks to what a budget dropped.
        let mut x = seed;
        let mut next = || {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (x >> 33) as usize % FILES
        };
        for turn in 0..40 {
            let i = next();
            for s in [&mut sa, &mut sb] {
                s.pause(5000);
                s.read(CAT, &format!("m{i}.py"));
            }
            alone.ingest(sa.take());
            shared.ingest(sb.take());
            let tight = shared.select(budget / 4, policy.as_ref());
            let a = alone.select(budget, policy.as_ref());
            let b = shared.select(budget, policy.as_ref());
            assert_eq!(a.kept, b.kept, "seed {seed}, turn {turn}: kept");
            assert_eq!(a.evicted, b.evicted, "seed {seed}, turn {turn}: evicted");
            differed_from_tight |= tight.kept != b.kept;
        }
    }
    assert!(
        differed_from_tight,
        "the tight requester must choose differently"
    );
}

/// Requesters that come and go (a harness that asks with a new budget every call) make the
/// least recently asking one give way, not the one that keeps asking: it keeps its places.
#[test]
fn a_steady_requester_keeps_its_layout_while_others_come_and_go() {
    let dir = source_tree();
    let w = world(dir.path());
    let policy = w.policy("worldfs").unwrap_or_else(|| panic!("no policy"));
    let mut s = Script::new();
    s.read(CAT, "src/main.py");
    w.ingest(s.take());
    let select = |key: &str| {
        w.select_with_extra(
            10_000,
            policy.as_ref(),
            &mut |_| true,
            Vec::new(),
            Some(key),
        )
    };
    let marked = |key: &str| placements::Placed {
        order: vec![PathBuf::from(key)],
        ..Default::default()
    };
    select("steady");
    w.set_placements("steady", marked("steady"));
    for i in 0..3 * MAX_LAYOUTS {
        select(&format!("passing/{i}"));
        w.set_placements(&format!("passing/{i}"), marked("passing"));
        if i % 8 == 0 {
            select("steady");
        }
    }
    let kept = w.placements("steady").map(|p| p.order.clone());
    assert_eq!(kept, Some(vec![PathBuf::from("steady")]));
    // The bound holds: the first of the passing requesters is long forgotten.
    assert!(w.placements("passing/0").is_none());
    assert!(
        w.placements(&format!("passing/{}", 3 * MAX_LAYOUTS - 1))
            .is_some()
    );
}

/// A ranged world over a source tree with `big.py`: 3,000 lines of about ten tokens each.
fn big_py_world() -> (tempfile::TempDir, String, Arc<World>) {
    let dir = source_tree();
    let text: String = (1..=3000)
        .map(|k| format!("value_{k} = compute({k})\n"))
        .collect();
    write(dir.path(), "big.py", text.as_bytes());
    let w = ranged_world(dir.path());
    (dir, text, w)
}

/// A big file read in one place offers, besides the places read last, a glance: the head of
/// the newest view, costing about GLANCE_TOKENS, for when nothing fuller fits. A small file
/// offers none (its whole is as cheap).
#[test]
fn a_file_read_in_places_offers_a_glance_at_the_newest() {
    let (_dir, text, w) = big_py_world();
    let mut s = Script::new();
    s.read(CAT, "src/main.py");
    let seen = view_lines(&mut s, "big.py", &text, 1000, 1200);
    w.ingest(s.take());
    counted(&w, &mut s, "big.py");
    let cands = w.candidates();
    let find = |p: &str| {
        cands
            .iter()
            .find(|c| c.path == Path::new(p))
            .unwrap_or_else(|| panic!("no candidate for {p}"))
    };
    let big = find("big.py");
    let (ranges, tokens) = big.glance.clone().unwrap_or_else(|| panic!("no glance"));
    assert_eq!(ranges.len(), 1);
    assert_eq!(ranges[0].start, seen.start);
    assert!(ranges[0].len() < seen.len());
    let recent = big.recent.as_ref().map_or(u32::MAX, |r| r.1);
    let partial = big.ranges.as_ref().map_or(u32::MAX, |r| r.1);
    assert!(
        tokens < recent.min(partial),
        "{tokens} vs {recent} / {partial}"
    );
    let content = tokens - super::HEADER_TOKENS - super::RANGE_TOKENS;
    assert!(
        content.abs_diff(super::GLANCE_TOKENS) <= super::GLANCE_TOKENS / 4,
        "{content}"
    );
    assert_eq!(find("src/main.py").glance, None);
}

/// A process gone from `/proc` before the world looked is named by what the FUSE thread read
/// while serving it, with its ancestry continuing from its live parent; a pid reused since the
/// request is not mistaken for the caller.
#[test]
fn exited_callers_are_named_from_their_stamp() {
    const GONE: u32 = 900;
    let dir = source_tree();
    let root = dir.path();
    let w = world(root);
    let mut s = Script::new();
    let stamp_args = |comm: &str, ppid: u32, start_time: u64, args: &[&str]| {
        Some(Arc::new(crate::observation::CallerStamp {
            comm: Arc::from(comm),
            ppid,
            start_time,
            args: args.iter().map(|a| Box::from(*a)).collect(),
            parent: None,
        }))
    };
    let stamp = |comm: &str, ppid: u32, start_time: u64| stamp_args(comm, ppid, start_time, &[]);
    s.read(GONE, "src/main.py");
    s.out[0].caller = stamp("cat", BASH, 5);
    // RG's pid now belongs to another process than the `head` that made this request.
    s.read(RG, "src/util.py");
    s.out[1].caller = stamp("head", BASH, 7);
    // Gone and never stamped: unknown.
    s.read(GONE + 1, "README.md");
    // The rules that read the command line apply to a process known only by its stamp: an
    // interpreter opening the script it was given is the agent looking, and a `grep -r` a scan.
    s.read(GONE + 2, "src/old.txt");
    s.out[3].caller = stamp_args("python3", BASH, 9, &["python3", "src/old.txt"]);
    s.read(GONE + 3, "src/pkg/mod_007.py");
    s.out[4].caller = stamp_args("grep", BASH, 11, &["grep", "-rn", "X", "src/pkg"]);
    w.ingest(s.take());

    let entries = w.entries();
    let get = |p: &str| {
        entries
            .iter()
            .find(|(path, _)| path == Path::new(p))
            .map(|(_, e)| {
                programs(e)
                    .into_iter()
                    .map(String::from)
                    .collect::<Vec<_>>()
            })
    };
    assert_eq!(get("src/main.py"), Some(vec!["cat".to_string()]));
    assert_eq!(get("src/util.py"), Some(vec!["head".to_string()]));
    // `cat` descends from the agent through its live parent, so its read counts as the agent's.
    let main = entries
        .iter()
        .find(|(p, _)| p == Path::new("src/main.py"))
        .map(|(_, e)| e.reads);
    assert_eq!(main, Some(1));
    assert!(get("README.md").is_none_or(|p| p.is_empty()));
    assert_eq!(get("src/old.txt"), Some(vec!["python3".to_string()]));
    assert!(get("src/pkg/mod_007.py").is_none(), "a scan made no entry");
}

/// A big file the last selection showed as one place offers, once the agent read another
/// place that pushes the first out of the places read last, what was shown with the new place
/// added (`held`), so a projection can append the new place instead of dropping the old one from
/// the middle of its stream. When the file changes, what was shown moves with its lines.
#[test]
fn a_file_shown_in_part_holds_what_was_shown_and_the_new_place() {
    let (dir, text, w) = big_py_world();
    let root = dir.path();
    let policy = w.policy("worldfs").unwrap_or_else(|| panic!("no policy"));
    let mut s = Script::new();
    let first = view_lines(&mut s, "big.py", &text, 100, 160);
    counted(&w, &mut s, "big.py");
    let held_now = |w: &World| {
        let mut held = None;
        let sel = w.select_with_extra(
            100_000,
            policy.as_ref(),
            &mut |c| {
                if c.path == Path::new("big.py") {
                    held = Some((c.held.clone(), c.recent.clone()));
                }
                true
            },
            Vec::new(),
            Some("layout"),
        );
        (held.unwrap_or_else(|| panic!("no candidate")), sel)
    };
    let ((held, _), sel) = held_now(&w);
    assert_eq!(held, None, "nothing shown before");
    let shown = sel.kept.iter().find(|k| k.path == Path::new("big.py"));
    assert!(
        matches!(shown.map(|k| &k.form), Some(Form::Ranges(r)) if r.first().is_some_and(|r| r.start == first.start)),
        "{shown:?}"
    );

    // a wide place further down: the places read last are that place alone
    let second = view_lines(&mut s, "big.py", &text, 2000, 2100);
    counted(&w, &mut s, "big.py");
    let ((held, recent), _) = held_now(&w);
    let (recent, _) = recent.unwrap_or_else(|| panic!("no recent form"));
    assert!(recent.iter().all(|r| r.start >= second.start), "{recent:?}");
    let (held, tokens) = held.unwrap_or_else(|| panic!("no held form"));
    assert_eq!(held.len(), 2, "{held:?}");
    assert_eq!(held[0].start, first.start);
    assert_eq!(held[1].start, second.start);
    assert!(held[0].end >= first.end);
    assert!(tokens > 0);

    // three bytes inserted at line 5: both places are still held, three bytes further on
    let changed = text.replacen("value_5 ", "value_five ", 1);
    agent_writes(root, &mut s, "big.py", changed.as_bytes());
    counted(&w, &mut s, "big.py");
    let ((held, _), _) = held_now(&w);
    let (held, _) = held.unwrap_or_else(|| panic!("no held form after the edit"));
    for place in [first, second] {
        assert!(
            held.iter().any(|r| r.start == place.start + 3),
            "{place:?} in {held:?}"
        );
    }
}

/// The close of a handle that wrote stamps the file as changed only with kernel passthrough,
/// where it is the only sign of the writes. In daemon I/O mode the writes stamped it already,
/// and the close (the kernel's RELEASE, which reaches the mount after `close()` returned) must
/// not move the change past what the harness did after it.
#[test]
fn a_close_stamps_a_change_only_when_the_writes_were_not_seen() {
    for ranged in [true, false] {
        let dir = source_tree();
        let root = dir.path();
        let w = if ranged {
            ranged_world(root)
        } else {
            world(root)
        };
        let mut s = Script::new();
        s.read(CLAUDE, "src/main.py");
        let before = counted(&w, &mut s, "src/main.py").last_changed;
        let wrote = if ranged {
            let new = b"print('changed')\n";
            write(root, "src/main.py", new);
            Some(s.push(
                CLAUDE,
                "src/main.py",
                Op::Write {
                    offset: 0,
                    len: new.len() as u64,
                },
            ))
        } else {
            None
        };
        let closed = s.push(CLAUDE, "src/main.py", Op::Close { wrote: true });
        let after = counted(&w, &mut s, "src/main.py")
            .last_changed
            .map(|c| c.seq);
        assert_ne!(before.map(|c| c.seq), after, "ranged {ranged}");
        assert_eq!(after, Some(wrote.unwrap_or(closed)), "ranged {ranged}");
    }
}

#[test]
fn an_echo_of_the_mounts_write_is_counted_again_but_not_stamped_or_counted_external() {
    let dir = source_tree();
    let root = dir.path();
    let w = ranged_world(root);
    let mut s = Script::new();
    s.read(CLAUDE, "src/main.py");
    counted(&w, &mut s, "src/main.py");
    agent_writes(root, &mut s, "src/main.py", b"print('mine')\n");
    let wrote = counted(&w, &mut s, "src/main.py").last_changed;
    let echo = Op::External {
        change: ExternalChange::Echo,
    };

    // The echo of that very write: nothing to stamp, and nothing changed behind the mount.
    s.push(0, "src/main.py", echo.clone());
    w.ingest(s.take());
    let e = w.entry(Path::new("src/main.py")).expect("entry");
    assert!(
        e.needs_rehash,
        "an echo may carry a merged change: count again"
    );
    w.refresh_stale();
    let e = w.entry(Path::new("src/main.py")).expect("entry");
    assert_eq!(e.last_changed, wrote);
    assert_eq!(e.hash, Some(tokens::hash(b"print('mine')\n")));

    // An editor writes behind the mount while the mount's own write is still echoing: the
    // merged echo is all the watcher reports, and the content is current all the same.
    let theirs = b"print('theirs, same length')\n";
    write(root, "src/main.py", theirs);
    s.push(0, "src/main.py", echo);
    let e = counted(&w, &mut s, "src/main.py");
    assert_eq!(e.hash, Some(tokens::hash(theirs)));
    assert_eq!(e.size, Some(theirs.len() as u64));

    let st = w.stats();
    assert_eq!((st.by_class.external, st.by_class.echo), (0, 2));
}

#[test]
fn a_count_read_before_a_possible_change_is_not_stored() {
    let dir = source_tree();
    let root = dir.path();
    let w = world(root);
    let mut s = Script::new();
    s.read(CLAUDE, "src/main.py");
    let before = counted(&w, &mut s, "src/main.py");
    // A count loaded from the old content, stored after an echo arrived meanwhile (an echo
    // stamps nothing, so only the version tells that the content may have moved on).
    let stale_count = ingest::Loaded::Content(CurrentContent {
        kind: EntryKind::File,
        bytes: b"print('hello')\n".to_vec(),
        hash: tokens::hash(b"print('hello')\n"),
        tokens: 4,
        size: 15,
        notebook: false,
    });
    write(root, "src/main.py", b"print('changed behind')\n");
    s.push(
        0,
        "src/main.py",
        Op::External {
            change: ExternalChange::Echo,
        },
    );
    w.ingest(s.take());
    ingest::store_counts(
        &w,
        Path::new("src/main.py"),
        &stale_count,
        Some(before.version),
    );
    let e = w.entry(Path::new("src/main.py")).expect("entry");
    assert!(
        e.needs_rehash,
        "the stale count was stored over a possible change"
    );
    w.refresh_stale();
    let e = w.entry(Path::new("src/main.py")).expect("entry");
    assert_eq!(e.hash, Some(tokens::hash(b"print('changed behind')\n")));
}

#[test]
fn idle_catch_up_hashes_every_new_file_in_passes_and_stops_when_told() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path();
    // More than one pass collects, so catching up takes two.
    let files = super::STALE_PER_PASS + 76;
    let w = world(root);
    let mut s = Script::new();
    for i in 0..files {
        let path = format!("gen/f{i:04}.txt");
        write(root, &path, format!("file {i}\n").as_bytes());
        let created = Op::Open {
            read: false,
            write: true,
            truncate: true,
            created: true,
        };
        s.push(CLAUDE, &path, created);
    }
    w.ingest(s.take());
    assert_eq!(w.stats().stale_entries, files as u64);

    // Told to stop after a few: those few are done, the rest wait for the next idle moment.
    let mut asked = 0;
    let done = w.refresh_stale_while(|| {
        asked += 1;
        asked <= 5
    });
    assert!((1..files).contains(&done), "{done}");
    assert_eq!(w.stats().stale_entries, (files - done) as u64);

    let rest = w.refresh_stale_while(|| true);
    assert_eq!(done + rest, files);
    assert_eq!(w.stats().stale_entries, 0);
    let e = w.entry(Path::new("gen/f1099.txt")).expect("entry");
    assert_eq!(e.hash, Some(tokens::hash(b"file 1099\n")));
    // Nothing left: no pass at all.
    assert_eq!(w.refresh_stale_while(|| true), 0);
}

fn hex_hash(w: &World, path: &str) -> String {
    let h = w
        .content_hash(Path::new(path))
        .unwrap_or_else(|e| panic!("{e}"));
    blake3::Hash::from_bytes(h).to_hex().to_string()
}

fn output(
    command: &str,
    inputs: Vec<(PathBuf, String)>,
    subtrees: Vec<PathBuf>,
) -> harness::CommandOutput {
    harness::CommandOutput {
        command: command.into(),
        cwd: ".".into(),
        output: format!("output of {command}"),
        exit_code: Some(0),
        inputs,
        subtrees,
        turn: 2,
        seq: 5,
        tool: None,
        session: None,
        session_step: None,
    }
}

/// A world saved and restored through its JSON is the world that was saved: entries (read
/// ranges, views, pins, programs, stamps, hashes), turn, sequence number, goal, last step,
/// tools, task list. What changed while nothing was mounted is found when the entries are
/// counted again: a changed file (or listing) is stamped changed (after every sequence number
/// saved), a removed one is deleted. A command output is kept only if its inputs are unchanged, and
/// never when it depends on whole directories.
#[test]
fn a_restored_world_is_the_saved_one_and_finds_what_changed_meanwhile() {
    let dir = source_tree();
    let root = dir.path();
    let w = ranged_world(root);
    let mut s = Script::new();
    s.read(CAT, "src/main.py");
    s.read(CAT, "src/old.txt");
    s.read(CAT, ".env");
    s.push(CLAUDE, "src", Op::ReadDir);
    let util = "def helper():\n    return 42\n";
    view_lines(&mut s, "src/util.py", util, 2, 2);
    view_lines(&mut s, "src/util.py", util, 1, 1);
    w.ingest(s.take());
    w.advance_turn();
    w.advance_turn();
    w.refresh_stale();
    assert!(w.set_pinned(Path::new("src/main.py"), true));
    let h = w.harness();
    h.conversations.update(Some("s1"), |c| {
        c.set_goal(Some("make helper return 43".into()));
        c.compacted = true;
    });
    // Another session's conversation, changed last: both come back, this one still current.
    h.conversations.update(Some("s2"), |c| {
        c.set_goal(Some("explain the helper".into()))
    });
    *h.last_step.write() = Some(harness::Step {
        tool_use_id: "toolu_9".into(),
        tool_name: "Bash".into(),
        input: serde_json::json!({"command": "cat src/util.py"}),
        result: util.into(),
        is_error: false,
        assistant_text: Some("Looking at the helper.".into()),
        raw_assistant_content: None,
        turn: 2,
        refers_to: Vec::new(),
    });
    h.note_step_tool("Bash");
    h.conversations
        .update(Some("s1"), |c| {
            c.state.set_tasks(vec![harness::Task {
                id: "1".into(),
                subject: "fix helper".into(),
                status: harness::TaskStatus::InProgress,
            }])
        })
        .unwrap_or_else(|e| panic!("{e}"));
    h.conversations.update(Some("s2"), |c| c.resumed = true);
    let main_hash = hex_hash(&w, "src/main.py");
    h.record_command(output(
        "python src/main.py",
        vec![("src/main.py".into(), main_hash)],
        vec![],
    ));
    h.record_command(output(
        "python -c 'import src.util'",
        vec![("src/util.py".into(), hex_hash(&w, "src/util.py"))],
        vec![],
    ));
    h.record_command(output("grep -rn helper src", vec![], vec!["src".into()]));
    let saved = w.snapshot(root);
    let json = serde_json::to_vec(&saved).unwrap_or_else(|e| panic!("{e}"));
    let back: snapshot::Snapshot = serde_json::from_slice(&json).unwrap_or_else(|e| panic!("{e}"));

    // While nothing is mounted:
    write(root, "src/util.py", b"def helper():\n    return 43\n");
    fs::remove_file(root.join("src/old.txt")).unwrap_or_else(|e| panic!("{e}"));

    let w2 = ranged_world(root);
    let r = w2.restore(back, |w, c| {
        c.inputs
            .iter()
            .all(|(p, h)| hex_hash(w, &p.to_string_lossy()) == *h)
    });
    assert_eq!(r.entries, w.entries().len() as u64);
    assert_eq!((r.commands, r.commands_dropped), (1, 2), "{r:?}");
    assert_eq!(
        w2.snapshot(root).entries,
        saved.entries,
        "the entries as saved"
    );
    assert_eq!(w2.turn(), w.turn());
    assert_eq!(w2.recent().last_seq(), w.recent().last_seq());
    let h2 = w2.harness();
    let resumed = |h: &harness::Harness| h.conversations.read(Some("s2"), |c| c.resumed);
    assert!(resumed(h));
    h.conversations.update(Some("s2"), |c| c.resumed = false);
    assert_eq!(
        h2.conversations.all(),
        h.conversations.all(),
        "every conversation, the current last; a resume not yet matched is not kept"
    );
    assert_eq!(h2.conversations.current().as_deref(), Some("s2"));
    assert_eq!((r.goals, r.tasks), (2, 1));
    assert_eq!(*h2.last_step.read(), *h.last_step.read());
    assert_eq!(*h2.step_tools.read(), ["Bash"]);
    assert_eq!(h2.commands.read()[0].command, "python src/main.py");
    let util_before = w
        .entry(Path::new("src/util.py"))
        .unwrap_or_else(|| panic!());
    assert!(!util_before.recent.views().is_empty());

    w2.refresh_stale();
    let main = w2
        .entry(Path::new("src/main.py"))
        .unwrap_or_else(|| panic!());
    let main_before = w
        .entry(Path::new("src/main.py"))
        .unwrap_or_else(|| panic!());
    assert_eq!(main.last_changed, main_before.last_changed, "unchanged");
    assert_eq!(main.hash, main_before.hash);
    assert!(main.pinned);
    let u = w2
        .entry(Path::new("src/util.py"))
        .unwrap_or_else(|| panic!());
    assert_ne!(u.hash, util_before.hash);
    assert!(
        u.last_changed
            .is_some_and(|c| c.seq >= w.recent().last_seq() && c.turn == w.turn()),
        "{:?}",
        u.last_changed
    );
    assert_eq!(u.recent.views(), util_before.recent.views());
    let old = w2
        .entry(Path::new("src/old.txt"))
        .unwrap_or_else(|| panic!());
    assert_eq!(old.state, EntryState::Deleted);
    let env = w2.entry(Path::new(".env")).unwrap_or_else(|| panic!());
    assert_eq!((env.state, env.hash), (EntryState::Withheld, None));
    // The listing of src/ lost old.txt: changed too.
    let src = w2.entry(Path::new("src")).unwrap_or_else(|| panic!());
    let seq_of = |e: Option<Stamp>| e.map(|s| s.seq);
    assert!(
        seq_of(src.last_changed) > seq_of(w.entry(Path::new("src")).and_then(|e| e.last_changed))
    );
    assert_eq!(w2.stats().changed_unobserved, 2);
    assert_eq!(w.stats().changed_unobserved, 0);
}

/// After the watcher's queue overflowed (a rescan), a file found changed when counted again
/// is stamped changed, though no observation said so; an unchanged one is not.
#[test]
fn a_rescan_stamps_what_it_finds_changed() {
    let dir = source_tree();
    let root = dir.path();
    let w = world(root);
    let mut s = Script::new();
    s.read(CAT, "src/main.py");
    s.read(CAT, "src/util.py");
    w.ingest(s.take());
    w.refresh_stale();
    write(root, "src/util.py", b"def helper():\n    return 7\n");
    s.push(
        0,
        "",
        Op::External {
            change: ExternalChange::Rescan,
        },
    );
    let rescan = s.seq;
    w.ingest(s.take());
    w.refresh_stale();
    let stamp = |p: &str| {
        w.entry(Path::new(p))
            .unwrap_or_else(|| panic!("{p}"))
            .last_changed
            .map(|c| c.seq)
    };
    assert_eq!(stamp("src/util.py"), Some(rescan));
    assert_eq!(stamp("src/main.py"), None);
    assert_eq!(w.stats().changed_unobserved, 1);
}

/// A notebook is counted as the cells it is shown as: a figure's base64 is no token of it, and
/// a read of a place in its JSON is no place in its cells (it is shown whole, as Read shows it).
/// Its hash stays the file's: a change of its metadata alone changes it.
#[test]
fn a_notebook_is_counted_as_its_cells_and_shown_whole() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path();
    let figure = "iVBORw0KGgo".repeat(150_000);
    let notebook = |meta: serde_json::Value| {
        serde_json::to_vec_pretty(&serde_json::json!({
            "cells": [
                {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": "# Sales"},
                {"cell_type": "code", "id": "plot", "metadata": {}, "execution_count": 3,
                 "source": "df.plot()",
                 "outputs": [{"output_type": "display_data", "metadata": {},
                              "data": {"image/png": figure, "text/plain": "<Figure>"}}]}
            ],
            "metadata": meta, "nbformat": 4, "nbformat_minor": 5
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    };
    let raw = notebook(serde_json::json!({}));
    assert!(raw.len() as u64 > 1 << 20, "over the size cap as JSON");
    write(root, "sales.ipynb", &raw);
    let w = ranged_world(root);
    let mut s = Script::new();
    s.read(CAT, "sales.ipynb");
    s.push(
        CAT,
        "sales.ipynb",
        Op::Read {
            offset: 0,
            len: 4096,
        },
    );
    let e = counted(&w, &mut s, "sales.ipynb");
    assert_eq!(e.state, EntryState::Live);
    let tokens = e.tokens.unwrap_or_else(|| panic!("not counted"));
    assert!(tokens < 100, "{tokens} tokens");
    assert_eq!(e.hash, Some(tokens::hash(&raw)));
    assert!(matches!(e.extent, Extent::Whole), "{:?}", e.extent);
    let c = w
        .candidates()
        .into_iter()
        .find(|c| c.path == Path::new("sales.ipynb"))
        .unwrap_or_else(|| panic!("no candidate"));
    assert_eq!((c.ranges, c.recent, c.glance), (None, None, None));

    let cur = w
        .read_current(Path::new("sales.ipynb"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(cur.notebook);
    let text = String::from_utf8_lossy(&cur.bytes);
    assert!(text.starts_with("<cell id=\"intro\">"), "{text}");
    assert!(
        text.contains("[image/png output, 1208.5 KB: not shown]"),
        "{text}"
    );

    // Jupyter saves a kernel's metadata: the cells read the same, the file is another version.
    write(
        root,
        "sales.ipynb",
        &notebook(serde_json::json!({"kernelspec": {"name": "python3"}})),
    );
    let again = w
        .read_current(Path::new("sales.ipynb"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.bytes, cur.bytes);
    assert_ne!(again.hash, cur.hash);
}

/// A file the agent's tool opened and then refused to show (Claude Code's Read of a file over
/// its limits) is forgotten when no step ever showed it; one a step showed, written or pinned
/// is kept.
#[test]
fn a_refused_read_is_forgotten_when_no_step_showed_the_file() {
    let dir = source_tree();
    let root = dir.path();
    let w = world(root);
    let mut s = Script::new();
    // Claude Code's Read opens a file twice.
    for p in [
        "src/main.py",
        "src/main.py",
        "src/util.py",
        "src/util.py",
        "README.md",
    ] {
        s.read(CLAUDE, p);
    }
    w.ingest(s.take());
    // util.py was shown by a step (a Read whose lines the hook told).
    w.harness()
        .conversations
        .update(Some("s1"), |c| c.touched.touch(Path::new("src/util.py")));
    assert!(w.set_pinned(Path::new("README.md"), true));
    assert!(w.forget_refused(Path::new("src/main.py")));
    assert!(w.entry(Path::new("src/main.py")).is_none());
    assert!(
        !w.forget_refused(Path::new("src/util.py")),
        "shown by a step"
    );
    assert!(!w.forget_refused(Path::new("README.md")), "pinned");
    assert!(!w.forget_refused(Path::new("src/old.txt")), "no entry");
    agent_writes(root, &mut s, "src/new.py", b"x = 1\n");
    w.ingest(s.take());
    assert!(w.entry(Path::new("src/new.py")).is_some());
    assert!(!w.forget_refused(Path::new("src/new.py")), "written");
    assert!(w.entry(Path::new("src/util.py")).is_some());
}

/// A deletion remembers whether the agent made it (an `rm` it ran, so its own step says so) or
/// not (a removal behind the mount, a test run's clean-up): the first needs no notice in a
/// projection, the second does. A watcher that saw the agent's removal first learns who made it
/// from the mount's report after; a name that comes back is nobody's deletion; a saved world
/// keeps it.
#[test]
fn a_deletion_remembers_whether_the_agent_made_it() {
    let dir = source_tree();
    let root = dir.path();
    let w = world(root);
    let mut s = Script::new();
    let all = [
        "src/main.py",
        "src/util.py",
        "src/old.txt",
        "README.md",
        "src/pkg/mod_000.py",
    ];
    for p in all {
        s.read(CAT, p);
    }
    w.ingest(s.take());
    w.refresh_stale();
    let removed = || Op::External {
        change: ExternalChange::RemovedFile,
    };
    for p in all {
        fs::remove_file(root.join(p)).unwrap_or_else(|e| panic!("{e}"));
    }
    s.push(RM, "src/main.py", Op::Unlink);
    s.push(0, "src/util.py", removed());
    // A test run removing a file nobody named to it: its own clean-up.
    s.push(PYTEST, "src/pkg/mod_000.py", Op::Unlink);
    // The watcher's event of the agent's own removal, before the mount's report of it.
    s.push(0, "src/old.txt", removed());
    s.push(RM, "src/old.txt", Op::Unlink);
    // And after it: the agent's deletion stays the agent's.
    s.push(RM, "README.md", Op::Unlink);
    s.push(0, "README.md", removed());
    w.ingest(s.take());
    let by_agent = |w: &World, p: &str| {
        let e = w
            .entry(Path::new(p))
            .unwrap_or_else(|| panic!("no entry {p}"));
        assert_eq!(e.state, EntryState::Deleted, "{p}");
        e.deleted_by_agent
    };
    assert!(by_agent(&w, "src/main.py"));
    assert!(!by_agent(&w, "src/util.py"), "removed behind the mount");
    assert!(!by_agent(&w, "src/pkg/mod_000.py"), "a test run's clean-up");
    assert!(
        by_agent(&w, "src/old.txt"),
        "the mount said who, after the watcher"
    );
    assert!(
        by_agent(&w, "README.md"),
        "the watcher's echo after the mount's report"
    );

    let saved = w.snapshot(root);
    let json = serde_json::to_vec(&saved).unwrap_or_else(|e| panic!("{e}"));
    let back: snapshot::Snapshot = serde_json::from_slice(&json).unwrap_or_else(|e| panic!("{e}"));
    let w2 = world(root);
    w2.restore(back, |_, _| true);
    assert!(by_agent(&w2, "src/main.py"), "kept through a restart");
    assert!(!by_agent(&w2, "src/util.py"));

    write(root, "src/main.py", b"print('back')\n");
    let create = Op::Open {
        read: false,
        write: true,
        truncate: true,
        created: true,
    };
    s.push(BASH, "src/main.py", create);
    s.push(BASH, "src/main.py", Op::Close { wrote: true });
    w.ingest(s.take());
    let back = w
        .entry(Path::new("src/main.py"))
        .unwrap_or_else(|| panic!());
    assert_eq!(back.state, EntryState::Live);
    assert!(!back.deleted_by_agent, "a name that came back");
}

/// A script the agent runs that rewrites a file the agent has looked at made the agent's edit
/// (`python3 fix.py` names no file, so the program alone calls its accesses weak): the file is
/// the agent's work, and the lines the script changed become what the agent saw last of it. A
/// file such a script creates stays out of the world, and a formatter started from another
/// terminal changes the file without making it the agent's.
#[test]
fn a_file_a_script_of_the_agents_rewrote_is_its_edit() {
    let dir = source_tree();
    let root = dir.path();
    let long = write_long_py(root);
    let w = ranged_world(root);
    let mut s = Script::new();
    s.read(CAT, "src/long.py");
    s.push(
        CAT,
        "src/long.py",
        Op::Read {
            offset: 0,
            len: 120,
        },
    );
    s.read(CAT, "src/util.py");
    s.push(CAT, "src/util.py", Op::Read { offset: 0, len: 40 });
    w.ingest(s.take());
    w.refresh_stale();
    let before = w.entry(Path::new("src/long.py")).map(|e| e.recent.clone());

    let rewrite = Op::Open {
        read: false,
        write: true,
        truncate: true,
        created: false,
    };
    let changed = long.replace("line_150 = 150", "line_150 = 'fixed'");
    write(root, "src/long.py", changed.as_bytes());
    s.push(FIX, "src/long.py", rewrite.clone());
    s.push(0, "src/long.py", Op::Close { wrote: true });
    write(root, "out.csv", b"a,b\n");
    let create = Op::Open {
        read: false,
        write: true,
        truncate: true,
        created: true,
    };
    s.push(FIX, "out.csv", create);
    s.push(0, "out.csv", Op::Close { wrote: true });
    write(root, "src/util.py", b"def helper():\n    return 43\n");
    s.push(FORMATTER, "src/util.py", rewrite);
    s.push(0, "src/util.py", Op::Close { wrote: true });
    w.ingest(s.take());
    w.refresh_stale();

    assert_only_the_agents_script_edited(&w, &changed, &format!("views before: {before:?}"));
    assert!(
        w.entry(Path::new("out.csv")).is_none(),
        "what the script made is not the agent's to look at"
    );
}

/// Writes `src/long.py`, 200 lines of `line_N = N`, into `root`; returns its text.
fn write_long_py(root: &Path) -> String {
    let long: String = (1..=200).map(|i| format!("line_{i} = {i}\n")).collect();
    write(root, "src/long.py", long.as_bytes());
    long
}

/// `src/long.py`, which a script of the agent's changed into `changed` (line 150), is the
/// agent's edit with the changed line as its newest view; `src/util.py`, which a formatter from
/// another terminal changed, is live and not the agent's.
fn assert_only_the_agents_script_edited(w: &World, changed: &str, context: &str) {
    let get = |p: &str| {
        w.entry(Path::new(p))
            .unwrap_or_else(|| panic!("no entry {p}"))
    };
    let fixed = get("src/long.py");
    assert!(
        fixed.agent_wrote,
        "the agent's script changed it ({context})"
    );
    let at = changed.find("line_150").map_or(0, |i| i as u64);
    let newest = fixed.recent.views().last().copied();
    assert!(
        newest.is_some_and(|r| r.start <= at && at < r.end),
        "the changed line is the newest view: {newest:?} ({context})"
    );
    let util = get("src/util.py");
    assert!(
        !util.agent_wrote,
        "another terminal's formatter ({context})"
    );
    assert_eq!(util.state, EntryState::Live);
}

/// The same script saving atomically (a new file renamed over the old, as `os.replace` and
/// atomic writers do) made the agent's edit too: the new file never entered the world, so the
/// rename alone says who saved.
#[test]
fn a_file_a_script_of_the_agents_saved_by_a_rename_is_its_edit() {
    let dir = source_tree();
    let root = dir.path();
    let long = write_long_py(root);
    let w = ranged_world(root);
    let mut s = Script::new();
    for p in ["src/long.py", "src/util.py"] {
        s.read(CAT, p);
        s.push(CAT, p, Op::Read { offset: 0, len: 40 });
    }
    w.ingest(s.take());
    w.refresh_stale();

    let create = Op::Open {
        read: false,
        write: true,
        truncate: true,
        created: true,
    };
    let mut save = |who: u32, p: &str, text: &[u8]| {
        let tmp = format!("{p}.tmp");
        write(root, &tmp, text);
        s.push(who, &tmp, create.clone());
        s.push(0, &tmp, Op::Close { wrote: true });
        fs::rename(root.join(&tmp), root.join(p)).unwrap_or_else(|e| panic!("{e}"));
        let to = PathBuf::from(p);
        s.push(
            who,
            &tmp,
            Op::Rename {
                to,
                exchange: false,
                dir: false,
            },
        );
    };
    let changed = long.replace("line_150 = 150", "line_150 = 'fixed'");
    save(FIX, "src/long.py", changed.as_bytes());
    save(FORMATTER, "src/util.py", b"def helper():\n    return 43\n");
    w.ingest(s.take());
    w.refresh_stale();

    assert_only_the_agents_script_edited(&w, &changed, "saved by a rename");
    assert!(w.entry(Path::new("src/long.py.tmp")).is_none());
}
