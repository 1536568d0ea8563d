//! Golden projections: a fixed small world rendered in every format, compared byte for byte
//! with `tests/golden/`. Regenerate with `UPDATE_GOLDEN=1 cargo test --test projection_golden`
//! and review the diff: every change to a golden file is a change of what models see (and of
//! their prompt caches).

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use worldfs::observation::{ExternalChange, Observation, Op};
use worldfs::projection::{self, Format, ProjectionRequest, validate};
use worldfs::world::harness::{CommandOutput, Framing, Step, StructuredState};
use worldfs::world::{ProcInfo, StaticProcesses, World};

const CLAUDE: u32 = 100;

fn write(root: &Path, rel: &str, content: &[u8]) {
    let p = root.join(rel);
    if let Some(parent) = p.parent() {
        fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
    }
    fs::write(p, content).unwrap_or_else(|e| panic!("{e}"));
}

/// Observations with fixed sequence numbers and times, so the world is the same every run.
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

    fn push(&mut self, path: &str, op: Op) {
        self.push_by(CLAUDE, path, op);
    }

    /// An observation made for `pid` (0: the watcher, a change behind the mount).
    fn push_by(&mut self, pid: u32, path: &str, op: Op) {
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
    }

    fn read(&mut self, path: &str, offset: u64, len: u64) {
        let open = Op::Open {
            read: true,
            write: false,
            truncate: false,
            created: false,
        };
        self.push(path, open);
        self.push(path, Op::Read { offset, len });
    }

    fn write(&mut self, path: &str, created: bool) {
        let open = Op::Open {
            read: false,
            write: true,
            truncate: true,
            created,
        };
        self.push(path, open);
        self.push(path, Op::Close { wrote: true });
    }

    fn take(&mut self) -> Vec<Observation> {
        std::mem::take(&mut self.out)
    }
}

fn world(root: &Path) -> Arc<World> {
    let procs = Arc::new(StaticProcesses::new([ProcInfo::synthetic(
        CLAUDE,
        "claude",
        &["claude"],
        &[(1, "zsh")],
    )]));
    World::builder_at(root)
        .unwrap_or_else(|e| panic!("{e}"))
        .process_source(procs)
        .reads_by_range(true)
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

fn hash_hex(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// The fixed world: a whole read, a partial read, a listing, a secret, a file deleted behind
/// the mount, one the agent created and deleted itself, and a file the agent wrote in the
/// current turn; goal, framing, state, two command outputs (one stale) and a last step.
fn fixed_world(root: &Path) -> Arc<World> {
    let lib: String = (1..=40)
        .map(|i| format!("pub fn f{i}() -> u32 {{ {i} }}\n"))
        .collect();
    write(root, "README.md", b"# demo\n\nA tiny crate.\n");
    write(root, "src/lib.rs", lib.as_bytes());
    write(
        root,
        "src/main.rs",
        b"fn main() {\n    println!(\"{}\", demo::f1());\n}\n",
    );
    write(root, ".env", b"API_KEY=hunter2\n");
    write(root, "notes.txt", b"old notes\n");
    let w = world(root);
    let mut s = Script::new();
    s.push("", Op::ReadDir);
    s.read("README.md", 0, 4096);
    s.read("src/main.rs", 0, 4096);
    // Lines 3-5 and 20 of lib.rs (each line is 26-27 bytes).
    s.read("src/lib.rs", 60, 70);
    s.read("src/lib.rs", 540, 10);
    s.read(".env", 0, 4096);
    s.read("notes.txt", 0, 4096);
    write(root, "scratch.py", b"print(1)\n");
    s.write("scratch.py", true);
    w.ingest(s.take());
    w.advance_turn();
    fs::remove_file(root.join("notes.txt")).unwrap_or_else(|e| panic!("{e}"));
    let removed = Op::External {
        change: ExternalChange::RemovedFile,
    };
    s.push_by(0, "notes.txt", removed);
    fs::remove_file(root.join("scratch.py")).unwrap_or_else(|e| panic!("{e}"));
    s.push("scratch.py", Op::Unlink);
    write(root, "src/new.rs", b"pub fn new() {}\n");
    s.write("src/new.rs", true);
    w.ingest(s.take());

    let h = w.harness();
    h.conversations.update(None, |c| {
        c.set_goal(Some(
            "Add a `sum` function to src/lib.rs and call it from main.".into(),
        ))
    });
    *h.framing.write() = Framing {
        workspace: Some("/work/demo".into()),
        shell: Some("bash".into()),
        date: Some("2026-11-02".into()),
        timezone: Some("UTC".into()),
        model: Some("claude-sonnet-5".into()),
        settings: serde_json::Map::new(),
    };
    h.conversations.update(None, |c| {
        c.state = StructuredState {
            intent: Some("add sum()".into()),
            decisions: vec!["sum lives in lib.rs".into()],
            constraints: vec![],
            open_loops: vec!["call it from main".into()],
            ruled_out: vec![],
            tasks: vec![],
        }
    });
    h.record_command(CommandOutput {
        command: "wc -l README.md".into(),
        cwd: ".".into(),
        output: "3 README.md\n".into(),
        exit_code: Some(0),
        inputs: vec![("README.md".into(), hash_hex(b"# demo\n\nA tiny crate.\n"))],
        subtrees: Vec::new(),
        turn: 1,
        seq: 20,
        tool: None,
        session: None,
        session_step: None,
    });
    h.record_command(CommandOutput {
        command: "cat notes.txt".into(),
        cwd: ".".into(),
        output: "old notes\n".into(),
        exit_code: Some(0),
        inputs: vec![("notes.txt".into(), hash_hex(b"old notes\n"))],
        subtrees: Vec::new(),
        turn: 0,
        seq: 10,
        tool: None,
        session: None,
        session_step: None,
    });
    *h.last_step.write() = Some(Step {
        tool_use_id: "toolu_01GoldenStep".into(),
        tool_name: "Write".into(),
        input: serde_json::json!({"file_path": "/work/demo/src/new.rs", "content": "pub fn new() {}\n"}),
        result: "File created successfully at: /work/demo/src/new.rs".into(),
        is_error: false,
        assistant_text: Some("Creating the new module.".into()),
        raw_assistant_content: None,
        turn: 1,
        refers_to: Vec::new(),
    });
    w
}

fn request(format: Format) -> ProjectionRequest {
    ProjectionRequest {
        absolute_paths: Some(PathBuf::from("/work/demo")),
        ..ProjectionRequest::new(format, 4000)
    }
}

fn golden_path(format: Format) -> PathBuf {
    let ext = if format == Format::Text { "md" } else { "json" };
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(format!("{}.{ext}", format.name()))
}

#[test]
fn golden_projections() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let w = fixed_world(dir.path());
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut mismatched = Vec::new();
    for format in Format::ALL {
        let p = projection::render(&w, &request(format)).unwrap_or_else(|e| panic!("{e}"));
        if let Err(v) = projection::validate_projection(&p) {
            panic!("{format}: golden body violates the rules: {v:#?}");
        }
        assert!(p.tokens <= p.budget);
        let rendered = match format {
            Format::Text => p.body.as_str().map(str::to_owned).unwrap_or_default() + "\n",
            _ => serde_json::to_string_pretty(&p).unwrap_or_else(|e| panic!("{e}")) + "\n",
        };
        let path = golden_path(format);
        if update {
            fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))
                .unwrap_or_else(|e| panic!("{e}"));
            fs::write(&path, &rendered).unwrap_or_else(|e| panic!("{e}"));
            continue;
        }
        let want = fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
                path.display()
            )
        });
        if want != rendered {
            mismatched.push(format!(
                "{}: differs from the rendered projection; got:\n{rendered}",
                path.display()
            ));
        }
    }
    assert!(mismatched.is_empty(), "{}", mismatched.join("\n\n"));
}

/// The stored golden bodies themselves pass the validator (they are what other tools compare
/// against).
#[test]
fn golden_files_validate() {
    for format in [
        Format::Anthropic,
        Format::OpenaiChat,
        Format::OpenaiResponses,
    ] {
        let path = golden_path(format);
        let Ok(text) = fs::read_to_string(&path) else {
            panic!("{} missing (UPDATE_GOLDEN=1 creates it)", path.display());
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
        let body = &v["body"];
        if let Err(errs) = validate::body(format, body) {
            panic!("{}: {errs:#?}", path.display());
        }
    }
}

/// What the fixed world must show, independently of the exact bytes.
#[test]
fn fixed_world_content() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let w = fixed_world(dir.path());
    let p = projection::render(&w, &request(Format::Anthropic)).unwrap_or_else(|e| panic!("{e}"));
    let body = serde_json::to_string(&p.body).unwrap_or_default();
    assert!(!body.contains("hunter2"), "secret leaked");
    assert_eq!(p.withheld, vec!["/work/demo/.env".to_string()]);
    assert!(
        body.contains("\"offset\":3"),
        "partial read of lib.rs as lines 3..: {body}"
    );
    assert!(body.contains("3\\tpub fn f3()"), "gutter: {body}");
    assert!(
        !body.contains("pub fn f10()"),
        "unread lines of lib.rs shown"
    );
    assert!(
        body.contains("File does not exist: /work/demo/notes.txt"),
        "a deletion behind the mount is said: {body}"
    );
    assert!(
        !body.contains("scratch.py"),
        "the agent's own deletion needs no notice: {body}"
    );
    assert!(body.contains("wc -l README.md"));
    assert!(!body.contains("cat notes.txt"), "stale command shown");
    assert_eq!(p.stale_dropped_commands.len(), 1);
    assert!(body.contains("toolu_01GoldenStep"));
    let messages = p.body["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    assert_eq!(last["role"], "user");
    // The file written this turn comes last among the entries.
    let paths: Vec<String> = messages
        .iter()
        .filter(|m| m["role"] == "assistant")
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter_map(|b| b["input"]["file_path"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(
        paths.last().map(String::as_str),
        Some("/work/demo/src/new.rs")
    );
    let bps = body.matches("cache_control").count();
    assert_eq!(bps, 2);
}

/// Rendering speed at the target shape: 500 observed files, 8k budget. Run with
/// `cargo test --release --test projection_golden -- --ignored --nocapture`.
#[test]
#[ignore]
fn render_speed() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let root = dir.path();
    let body: String = (0..60)
        .map(|i| format!("    let x{i} = compute({i}, \"value\");\n"))
        .collect();
    for i in 0..500 {
        write(
            root,
            &format!("src/m{i:03}.rs"),
            format!("// module {i}\n{body}").as_bytes(),
        );
    }
    let w = world(root);
    let mut s = Script::new();
    for i in 0..500 {
        s.read(&format!("src/m{i:03}.rs"), 0, 1 << 20);
        // Stay under the fan-out threshold: a pause every few files.
        if i % 8 == 7 {
            s.now += Duration::from_secs(3);
        }
    }
    w.ingest(s.take());
    assert!(w.entries().len() >= 450, "{}", w.entries().len());
    for format in Format::ALL {
        let req = ProjectionRequest::new(format, 8192);
        let _ = projection::render(&w, &req).unwrap_or_else(|e| panic!("{e}"));
        let mut times = Vec::new();
        for _ in 0..200 {
            let t = Instant::now();
            let p = projection::render(&w, &req).unwrap_or_else(|e| panic!("{e}"));
            times.push(t.elapsed());
            assert!(p.tokens <= 8192);
        }
        times.sort();
        println!(
            "{format}: p50 {:?} p99 {:?}",
            times[times.len() / 2],
            times[times.len() * 99 / 100]
        );
    }
}
