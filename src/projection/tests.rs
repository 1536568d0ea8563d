//! Property tests: random worlds, random harness state, random budgets and options. Every
//! projection validates, stays within its budget (counted conservatively), is deterministic,
//! and keeps its prefix byte-identical when one file changes.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use proptest::prelude::*;
use serde_json::Value;

use super::*;
use crate::observation::{Observation, Op};
use crate::world::harness::{CommandOutput, Framing, Step, StructuredState};
use crate::world::tokens;
use crate::world::{ProcInfo, StaticProcesses, World};

const CLAUDE: u32 = 100;

#[derive(Debug, Clone)]
enum Action {
    ReadWhole(usize),
    ReadRange(usize, u64, u64),
    Write(usize, String),
    Delete(usize),
    ListRoot,
    AdvanceTurn,
    Pin(usize),
}

#[derive(Debug, Clone)]
struct Scenario {
    files: Vec<(String, String)>,
    actions: Vec<Action>,
    goal: Option<String>,
    framing: bool,
    state: Option<Vec<String>>,
    step: Option<(String, String, Value, String, bool, Option<String>)>,
    commands: Vec<(String, usize, bool)>,
}

fn content() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            "[a-z ]{0,30}",
            Just(String::new()),
            Just("```rust".to_string()),
            Just("  indented\t tab".to_string()),
            "[éü漢\\-_{}()]{0,8}",
        ],
        0..25,
    )
    .prop_map(|lines| lines.join("\n"))
}

fn scenario() -> impl Strategy<Value = Scenario> {
    let names = prop::sample::subsequence(
        vec![
            "a.rs",
            "b.txt",
            "src/c.rs",
            "src/d.py",
            ".env",
            "docs/e.md",
            "f",
            "g.json",
        ],
        1..8,
    );
    (names, any::<u64>()).prop_flat_map(|(names, _)| {
        let n = names.len();
        let files = names
            .into_iter()
            .map(|name: &'static str| content().prop_map(move |c| (name.to_string(), c)))
            .collect::<Vec<_>>();
        let action = prop_oneof![
            4 => (0..n).prop_map(Action::ReadWhole),
            2 => (0..n, 0u64..400, 1u64..200).prop_map(|(i, o, l)| Action::ReadRange(i, o, l)),
            2 => (0..n, content()).prop_map(|(i, c)| Action::Write(i, c)),
            1 => (0..n).prop_map(Action::Delete),
            1 => Just(Action::ListRoot),
            1 => Just(Action::AdvanceTurn),
            1 => (0..n).prop_map(Action::Pin),
        ];
        let step = prop::option::of((
            prop_oneof![
                Just("toolu_01abc".to_string()),
                Just("bad id!".to_string()),
                "[a-z]{41,45}"
            ],
            prop_oneof![
                Just("Read".to_string()),
                Just("Bash".to_string()),
                Just("mcp.tool".to_string())
            ],
            prop_oneof![
                Just(serde_json::json!({"command": "ls"})),
                Just(serde_json::json!("not an object")),
                Just(serde_json::json!({})),
            ],
            "[a-z \n]{0,40}",
            any::<bool>(),
            prop::option::of(prop_oneof![Just("  ".to_string()), "[a-z ]{1,20}"]),
        ));
        (
            files,
            prop::collection::vec(action, 0..20),
            prop::option::of(prop_oneof![Just("   ".to_string()), "[a-zA-Z ]{1,60}"]),
            any::<bool>(),
            prop::option::of(prop::collection::vec("[a-z ]{0,20}", 0..4)),
            step,
            prop::collection::vec(("[a-z ]{1,12}", 0..n, any::<bool>()), 0..3),
        )
            .prop_map(
                |(files, actions, goal, framing, state, step, commands)| Scenario {
                    files,
                    actions,
                    goal,
                    framing,
                    state,
                    step,
                    commands,
                },
            )
    })
}

struct Built {
    _dir: tempfile::TempDir,
    world: Arc<World>,
    seq: u64,
    now: SystemTime,
}

impl Built {
    fn obs(&mut self, path: &str, op: Op) -> Observation {
        self.seq += 1;
        self.now += Duration::from_millis(1);
        Observation {
            seq: self.seq,
            time: self.now,
            op,
            path: PathBuf::from(path),
            pid: CLAUDE,
            caller: None,
        }
    }

    fn write_file(&mut self, path: &str, text: &str) {
        let p = self._dir.path().join(path);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
        }
        fs::write(&p, text).unwrap_or_else(|e| panic!("{e}"));
        let open = self.obs(
            path,
            Op::Open {
                read: false,
                write: true,
                truncate: true,
                created: false,
            },
        );
        let close = self.obs(path, Op::Close { wrote: true });
        self.world.ingest([open, close]);
    }
}

fn build(s: &Scenario) -> Built {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for (name, text) in &s.files {
        let p = dir.path().join(name);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent).unwrap_or_else(|e| panic!("{e}"));
        }
        fs::write(p, text).unwrap_or_else(|e| panic!("{e}"));
    }
    let procs = Arc::new(StaticProcesses::new([ProcInfo::synthetic(
        CLAUDE,
        "claude",
        &["claude"],
        &[(1, "zsh")],
    )]));
    let world = World::builder_at(dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .process_source(procs)
        .reads_by_range(true)
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let mut b = Built {
        _dir: dir,
        world,
        seq: 0,
        now: SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000),
    };
    let read_open = Op::Open {
        read: true,
        write: false,
        truncate: false,
        created: false,
    };
    for a in &s.actions {
        match a {
            Action::ReadWhole(i) => {
                let name = &s.files[*i].0;
                let o = b.obs(name, read_open.clone());
                let r = b.obs(
                    name,
                    Op::Read {
                        offset: 0,
                        len: 1 << 20,
                    },
                );
                b.world.ingest([o, r]);
            }
            Action::ReadRange(i, offset, len) => {
                let name = &s.files[*i].0;
                let o = b.obs(name, read_open.clone());
                let r = b.obs(
                    name,
                    Op::Read {
                        offset: *offset,
                        len: *len,
                    },
                );
                b.world.ingest([o, r]);
            }
            Action::Write(i, text) => {
                let name = s.files[*i].0.clone();
                b.write_file(&name, text);
            }
            Action::Delete(i) => {
                let name = &s.files[*i].0;
                let _ = fs::remove_file(b._dir.path().join(name));
                let o = b.obs(name, Op::Unlink);
                b.world.ingest([o]);
            }
            Action::ListRoot => {
                let o = b.obs("", Op::ReadDir);
                b.world.ingest([o]);
            }
            Action::AdvanceTurn => {
                b.world.advance_turn();
            }
            Action::Pin(i) => {
                b.world.set_pinned(Path::new(&s.files[*i].0), true);
            }
        }
    }
    let h = b.world.harness();
    h.conversations.update(None, |c| c.set_goal(s.goal.clone()));
    if s.framing {
        *h.framing.write() = Framing {
            workspace: Some("/w".into()),
            shell: Some("  ".into()),
            model: Some("m".into()),
            ..Framing::default()
        };
    }
    if let Some(items) = &s.state {
        h.conversations.update(None, |c| {
            c.state = StructuredState {
                intent: items.first().cloned(),
                decisions: items.clone(),
                ..StructuredState::default()
            }
        });
    }
    if let Some((id, name, input, result, is_error, text)) = &s.step {
        *h.last_step.write() = Some(Step {
            tool_use_id: id.clone(),
            tool_name: name.clone(),
            input: input.clone(),
            result: result.clone(),
            is_error: *is_error,
            assistant_text: text.clone(),
            raw_assistant_content: None,
            turn: 0,
            refers_to: Vec::new(),
        });
    }
    for (k, (cmd, i, fresh)) in s.commands.iter().enumerate() {
        let name = &s.files[*i].0;
        let hash = match fs::read(b._dir.path().join(name)) {
            Ok(bytes) if *fresh => blake3::hash(&bytes).to_hex().to_string(),
            _ => "0".repeat(64),
        };
        h.record_command(CommandOutput {
            command: cmd.clone(),
            cwd: ".".into(),
            output: format!("output {k}"),
            exit_code: Some(0),
            inputs: vec![(PathBuf::from(name), hash)],
            subtrees: Vec::new(),
            turn: 0,
            seq: k as u64,
            tool: None,
            session: None,
            session_step: None,
        });
    }
    b
}

/// Sum of the exact token counts of every string in `v`: what the body carries besides its
/// JSON structure. The reported figure must be at least this.
fn leaf_tokens(v: &Value) -> u64 {
    match v {
        Value::String(s) => tokens::count_uncached(s.as_bytes()).map_or(0, u64::from),
        Value::Array(a) => a.iter().map(leaf_tokens).sum(),
        Value::Object(m) => m.values().map(leaf_tokens).sum(),
        _ => 0,
    }
}

/// Every `cache_control` value in `v`, in document order.
fn cache_controls(v: &Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a.iter().flat_map(cache_controls).collect(),
        Value::Object(m) => m
            .iter()
            .flat_map(|(k, v)| {
                if k == "cache_control" {
                    vec![v.clone()]
                } else {
                    cache_controls(v)
                }
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// Every string in `v` (recursively).
fn strings(v: &Value) -> Vec<&str> {
    match v {
        Value::String(s) => vec![s.as_str()],
        Value::Array(a) => a.iter().flat_map(strings).collect(),
        Value::Object(m) => m.values().flat_map(strings).collect(),
        _ => Vec::new(),
    }
}

/// Whether message `m` shows a command output that `after` no longer shows (it read a file
/// that changed since, so it was dropped).
fn shows_dropped_command(m: &Value, after: &Value) -> bool {
    let rest = strings(after);
    strings(m)
        .into_iter()
        .filter(|t| t.starts_with("Output of `"))
        .any(|t| !rest.contains(&t))
}

fn strip_cache_control(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(k, _)| k.as_str() != "cache_control")
                .map(|(k, v)| (k.clone(), strip_cache_control(v)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(strip_cache_control).collect()),
        other => other.clone(),
    }
}

fn budget_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        1u64..60,
        60u64..600,
        600u64..20_000,
        Just(u64::MAX / 2),
        Just(u64::MAX),
    ]
}

fn format_strategy() -> impl Strategy<Value = Format> {
    prop::sample::select(Format::ALL.to_vec())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, ..ProptestConfig::default() })]

    #[test]
    fn every_projection_is_valid_within_budget_and_deterministic(
        s in scenario(),
        budget in budget_strategy(),
        format in format_strategy(),
        breakpoints in 0u8..=4,
        hour in any::<bool>(),
        absolute in any::<bool>(),
        include_deleted in any::<bool>(),
        policy in prop::sample::select(vec!["worldfs", "seed", "lru"]),
    ) {
        let b = build(&s);
        let cache_ttl = if hour { CacheTtl::OneHour } else { CacheTtl::FiveMinutes };
        let req = ProjectionRequest {
            format,
            budget_tokens: Some(budget),
            policy: Some(policy.to_string()),
            max_breakpoints: breakpoints,
            cache_ttl,
            absolute_paths: absolute.then(|| PathBuf::from("/mnt/work")),
            include_deleted,
            ..ProjectionRequest::default()
        };
        match render(&b.world, &req) {
            Ok(p) => {
                prop_assert!(p.tokens <= budget, "{} > {}", p.tokens, budget);
                if let Err(v) = validate_projection(&p) {
                    prop_assert!(false, "{format}: {v:#?}\n{}", p.body);
                }
                let marks = cache_controls(&p.body);
                prop_assert!(marks.len() <= usize::from(breakpoints));
                for m in marks {
                    prop_assert_eq!(m, cache_ttl.cache_control());
                }
                let carried = match &p.body {
                    Value::String(t) => tokens::count_uncached(t.as_bytes()).map_or(0, u64::from),
                    other => leaf_tokens(other),
                };
                prop_assert!(carried <= p.tokens, "{format}: body carries {carried} > reported {}", p.tokens);
                let bps = serde_json::to_string(&p.body).unwrap_or_default().matches("cache_control").count();
                prop_assert!(bps <= usize::from(breakpoints));
                let again = render(&b.world, &req);
                prop_assert_eq!(again.ok(), Some(p));
            }
            Err(ProjectionError::BudgetTooSmall { minimum, .. }) => {
                prop_assert!(format.is_messages(), "{format} has an empty minimal projection");
                prop_assert!(budget < minimum && minimum < 40, "budget {budget}, minimum {minimum}");
            }
            Err(e) => prop_assert!(false, "{e}"),
        }
    }

    #[test]
    fn prefix_before_a_changed_file_is_byte_identical(
        s in scenario(),
        pick in any::<prop::sample::Index>(),
        new_text in content(),
        format in prop::sample::select(vec![Format::Anthropic, Format::OpenaiChat, Format::OpenaiResponses]),
    ) {
        let mut b = build(&s);
        let req = ProjectionRequest::new(format, u64::MAX / 2);
        let before = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
        // A live file that is shown with content.
        let shown: Vec<String> = s.files.iter().map(|f| f.0.clone())
            .filter(|name| b._dir.path().join(name).is_file())
            .filter(|name| b.world.entry(Path::new(name)).is_some_and(|e| e.projectable()))
            .filter(|name| !name.starts_with(".env"))
            .collect();
        prop_assume!(!shown.is_empty());
        let name = pick.get(&shown).clone();
        b.write_file(&name, &format!("{new_text}\nchanged"));
        let after = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
        let (list_key, is_call): (&str, fn(&Value, &str) -> bool) = match format {
            // Blocks (below), as a prompt cache sees them: consecutive user texts merge into
            // one message, so whole messages may differ where no block does.
            Format::Anthropic => ("messages", |b, name| b["input"]["file_path"] == name),
            Format::OpenaiChat => ("messages", |m, name| {
                m["tool_calls"].as_array().is_some_and(|c| c.iter().any(|c| c["function"]["arguments"].as_str().is_some_and(|a| a.contains(&format!("\"{name}\"")))))
            }),
            _ => ("input", |m, name| {
                m["type"] == "function_call" && m["arguments"].as_str().is_some_and(|a| a.contains(&format!("\"{name}\"")))
            }),
        };
        let units = |body: &Value| -> Vec<Value> {
            let list = body[list_key].as_array().cloned().unwrap_or_default();
            if format != Format::Anthropic {
                return list;
            }
            list.iter().flat_map(|m| m["content"].as_array().cloned().unwrap_or_default()).collect()
        };
        let old = units(&before.body);
        let new = units(&after.body);
        // The first place the change shows: the file's call, or a command output that read
        // the file (command outputs share the stream with the files, in the order recorded).
        let cut = old
            .iter()
            .position(|m| is_call(m, &name) || shows_dropped_command(m, &after.body))
            .unwrap_or(old.len());
        // Everything before it: same bytes (breakpoint markers aside, which move with the
        // stable boundary and are not part of the cached content).
        let before_cut = |v: &[Value]| v.iter().take(cut).map(strip_cache_control).collect::<Vec<_>>();
        let old_prefix = before_cut(&old);
        let new_prefix = before_cut(&new);
        // The goal message may have received the state text when there were no entries
        // before the cut; compare only complete messages that are entries or the goal.
        let n = if cut == old.len() { cut.saturating_sub(4) } else { cut };
        prop_assert_eq!(&old_prefix[..n.min(old_prefix.len())], &new_prefix[..n.min(new_prefix.len())]);
        prop_assert_eq!(&before.body["tools"], &after.body["tools"]);
        prop_assert_eq!(&before.body["system"], &after.body["system"]);
        // And the changed file is now after every unchanged one.
        let moved = new.iter().rposition(|m| is_call(m, &name));
        prop_assert!(moved.is_some_and(|i| i >= cut.min(new.len().saturating_sub(1)) || cut == old.len()));
    }
}

#[test]
fn zero_budget_is_a_clear_error_for_messages_and_empty_for_text() {
    let s = Scenario {
        files: vec![("a.rs".into(), "fn a() {}".into())],
        actions: vec![Action::ReadWhole(0)],
        goal: Some("do it".into()),
        framing: false,
        state: None,
        step: None,
        commands: vec![],
    };
    let b = build(&s);
    let err = render(&b.world, &ProjectionRequest::new(Format::Anthropic, 0));
    assert!(
        matches!(err, Err(ProjectionError::BudgetTooSmall { budget: 0, .. })),
        "{err:?}"
    );
    let msg = err.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(msg.contains("too small"), "{msg}");
    let t = render(&b.world, &ProjectionRequest::new(Format::Text, 0))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(t.body, Value::String(String::new()));
    assert_eq!(t.tokens, 0);
    // A small budget: the goal alone, entries reported as evicted.
    let p = render(&b.world, &ProjectionRequest::new(Format::Anthropic, 20))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.entries, 0);
    assert!(!p.evicted.is_empty());
    assert_eq!(validate_projection(&p), Ok(()));
}

#[test]
fn bad_requests_are_rejected_with_the_field() {
    let s = Scenario {
        files: vec![("a.rs".into(), "x".into())],
        actions: vec![],
        goal: None,
        framing: false,
        state: None,
        step: None,
        commands: vec![],
    };
    let b = build(&s);
    let cases = [
        ProjectionRequest {
            tool_name: "bad name".into(),
            ..ProjectionRequest::default()
        },
        ProjectionRequest {
            path_param: "offset".into(),
            ..ProjectionRequest::default()
        },
        ProjectionRequest {
            max_breakpoints: 5,
            ..ProjectionRequest::default()
        },
        ProjectionRequest {
            absolute_paths: Some("rel".into()),
            ..ProjectionRequest::default()
        },
    ];
    for req in cases {
        let e = render(&b.world, &req);
        assert!(
            matches!(e, Err(ProjectionError::InvalidRequest { .. })),
            "{e:?}"
        );
    }
    let e = render(
        &b.world,
        &ProjectionRequest {
            policy: Some("fifo".into()),
            ..ProjectionRequest::default()
        },
    );
    assert!(
        e.err()
            .is_some_and(|e| e.to_string().contains("worldfs, seed, lru"))
    );
    let parsed: Result<ProjectionRequest, _> =
        serde_json::from_str(r#"{"format": "openai_chat", "budget_tokens": 100}"#);
    assert!(parsed.is_ok_and(|r| r.format == Format::OpenaiChat && r.tool_name == "Read"));
    let bad: Result<ProjectionRequest, _> = serde_json::from_str(r#"{"format": "xml"}"#);
    assert!(bad.is_err());
}

#[test]
fn raw_assistant_content_with_thinking_is_replayed_verbatim() {
    let s = Scenario {
        files: vec![("a.rs".into(), "x".into())],
        actions: vec![Action::ReadWhole(0)],
        goal: Some("g".into()),
        framing: false,
        state: None,
        step: None,
        commands: vec![],
    };
    let b = build(&s);
    let raw = serde_json::json!([
        {"type": "thinking", "thinking": "hmm", "signature": "c2lnbmF0dXJl"},
        {"type": "tool_use", "id": "toolu_01X", "name": "Bash", "input": {"command": "ls"}}
    ]);
    *b.world.harness().last_step.write() = Some(Step {
        tool_use_id: "toolu_01X".into(),
        tool_name: "Bash".into(),
        input: serde_json::json!({"command": "ls"}),
        result: "a.rs".into(),
        is_error: false,
        assistant_text: None,
        raw_assistant_content: Some(raw.clone()),
        turn: 0,
        refers_to: Vec::new(),
    });
    let p = render(&b.world, &ProjectionRequest::new(Format::Anthropic, 10_000))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(validate_projection(&p), Ok(()));
    let msgs = p.body["messages"].as_array().cloned().unwrap_or_default();
    let n = msgs.len();
    assert_eq!(msgs[n - 2]["content"], raw);
    let names: Vec<&str> = p.body["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(names, vec!["Read", "Bash"]);
}

/// The texts of an anthropic body's blocks, in order, without breakpoint markers: what a
/// prompt cache compares.
fn block_texts(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .map(|msgs| {
            msgs.iter()
                .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                .map(|b| strip_cache_control(&b).to_string())
                .collect()
        })
        .unwrap_or_default()
}

fn read_obs(b: &mut Built, name: &str, offset: u64, len: u64) {
    let o = b.obs(
        name,
        Op::Open {
            read: true,
            write: false,
            truncate: false,
            created: false,
        },
    );
    let r = b.obs(name, Op::Read { offset, len });
    b.world.ingest([o, r]);
}

/// Command outputs join the stream in the order they were recorded, so one recorded before a
/// later read sits before that read (cacheable), not after every file; a new range of a file
/// already shown is appended as its own call and leaves the earlier call in place.
#[test]
fn the_stream_only_grows_at_its_end() {
    let lines: String = (1..=200).map(|i| format!("line {i}\n")).collect();
    let s = Scenario {
        files: vec![
            ("big.py".into(), lines),
            ("b.rs".into(), "fn b() {}".into()),
        ],
        actions: vec![Action::ReadRange(0, 0, 60)],
        goal: Some("g".into()),
        framing: false,
        state: None,
        step: None,
        commands: vec![],
    };
    let mut b = build(&s);
    let seq = b.seq;
    b.world.harness().record_command(CommandOutput {
        command: "pytest -q".into(),
        cwd: ".".into(),
        output: "1 passed".into(),
        exit_code: Some(0),
        inputs: vec![],
        subtrees: Vec::new(),
        turn: 0,
        seq,
        tool: None,
        session: None,
        session_step: None,
    });
    read_obs(&mut b, "b.rs", 0, 100);
    let req = ProjectionRequest::new(Format::Anthropic, 100_000);
    let first = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    let t1 = block_texts(&first.body);
    let pos = |t: &[String], needle: &str| t.iter().position(|x| x.contains(needle));
    let (cmd, b_rs) = (pos(&t1, "pytest -q"), pos(&t1, "fn b()"));
    assert!(cmd.is_some() && cmd < b_rs, "{t1:#?}");

    // A new range of big.py: the old call stays, the new one is appended.
    b.world.advance_turn();
    read_obs(&mut b, "big.py", 900, 60);
    let second = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    let t2 = block_texts(&second.body);
    assert_eq!(
        t1[..t1.len()],
        t2[..t1.len()],
        "the earlier stream is a prefix"
    );
    let last_use = t2.iter().rposition(|x| x.contains(r#""type":"tool_use""#));
    assert!(
        last_use.is_some_and(|i| t2[i].contains("big.py") && i > t1.len() - 1),
        "{t1:#?}\n{t2:#?}"
    );
    assert_eq!(validate_projection(&second), Ok(()));
    // The breakpoint is at the end of the stream, where the next request reads back.
    let msgs = second.body["messages"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let marked: Vec<usize> = msgs
        .iter()
        .enumerate()
        .filter(|(_, m)| m.to_string().contains("cache_control"))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(marked.last(), Some(&(msgs.len() - 1)), "{msgs:#?}");
}

/// Another client asking with the same budget, policy and format but other rendering options
/// (`worldfs projection` typed beside `worldfs proxy`) is another requester: what the first
/// one is sent, cache breakpoints included, is the same byte for byte as without it.
#[test]
fn a_client_with_other_options_does_not_change_what_another_is_sent() {
    let (a, b, c) = (
        "fn a() {}\n".repeat(8),
        "fn b() {}\n".repeat(8),
        "fn c() {}\n".repeat(8),
    );
    let s = reads_with_goal(
        &[("a.rs", &a), ("b.rs", &b), ("c.rs", &c)],
        vec![Action::ReadWhole(0), Action::ReadWhole(1)],
    );
    let mut proxy = ProjectionRequest::new(Format::Anthropic, 100_000);
    proxy.last_step = false;
    let run = |others: bool| {
        let mut b = build(&s);
        let mut bodies = Vec::new();
        for next in ["c.rs", "a.rs"] {
            bodies.push(
                render(&b.world, &proxy)
                    .unwrap_or_else(|e| panic!("{e}"))
                    .body,
            );
            if others {
                for numbers in [LineNumbers::None, LineNumbers::Arrow] {
                    let mut cli = ProjectionRequest::new(Format::Anthropic, 100_000);
                    cli.line_numbers = numbers;
                    render(&b.world, &cli).unwrap_or_else(|e| panic!("{e}"));
                }
            }
            b.world.advance_turn();
            read_obs(&mut b, next, 0, 100);
        }
        bodies.push(
            render(&b.world, &proxy)
                .unwrap_or_else(|e| panic!("{e}"))
                .body,
        );
        bodies
    };
    let alone = run(false);
    let beside = run(true);
    for (turn, (a, b)) in alone.iter().zip(&beside).enumerate() {
        assert_eq!(a, b, "turn {turn}");
    }
}

/// A file that leaves the projection and comes back unchanged is appended, not put back in
/// the middle where it would invalidate everything after it.
#[test]
fn a_returning_file_is_appended() {
    let s = Scenario {
        files: vec![
            ("a.rs".into(), "fn a() {}".into()),
            ("b.rs".into(), "fn b() {}".into()),
            ("c.rs".into(), "fn c() {}".into()),
        ],
        actions: vec![Action::ReadWhole(0), Action::ReadWhole(1)],
        goal: Some("g".into()),
        framing: false,
        state: None,
        step: None,
        commands: vec![],
    };
    let mut b = build(&s);
    let req = ProjectionRequest::new(Format::Anthropic, 100_000);
    let p = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    let t = block_texts(&p.body);
    assert!(
        t.iter().position(|x| x.contains("fn a()")) < t.iter().position(|x| x.contains("fn b()"))
    );
    b.world.forget(Path::new("a.rs"));
    render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    read_obs(&mut b, "c.rs", 0, 100);
    read_obs(&mut b, "a.rs", 0, 100);
    let p = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    let t = block_texts(&p.body);
    let at = |n: &str| t.iter().position(|x| x.contains(n));
    assert!(
        at("fn b()") < at("fn c()") && at("fn c()") < at("fn a()"),
        "{t:#?}"
    );
}

/// The last step's own output, also recorded as a command output, is shown once.
#[test]
fn the_last_steps_output_is_not_shown_twice() {
    let s = Scenario {
        files: vec![("a.rs".into(), "x".into())],
        actions: vec![Action::ReadWhole(0)],
        goal: Some("g".into()),
        framing: false,
        state: None,
        step: None,
        commands: vec![],
    };
    let b = build(&s);
    let h = b.world.harness();
    ran(&b, "pytest -q", "3 passed in 0.1s");
    let req = ProjectionRequest::new(Format::Anthropic, 100_000);
    let p = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.body.to_string().matches("3 passed in 0.1s").count(), 1);
    // Once another step is the last one, the output is in the stream.
    *h.last_step.write() = None;
    let p = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.body.to_string().matches("3 passed in 0.1s").count(), 1);
    assert!(p.body.to_string().contains("Output of `pytest -q`"));
}

/// A scenario of `files` read by `actions`, with a goal and nothing else.
fn reads_with_goal(files: &[(&str, &str)], actions: Vec<Action>) -> Scenario {
    Scenario {
        files: files
            .iter()
            .map(|(n, t)| ((*n).to_owned(), (*t).to_owned()))
            .collect(),
        actions,
        goal: Some("g".into()),
        framing: false,
        state: None,
        step: None,
        commands: vec![],
    }
}

/// Where an anthropic body's breakpoints are, as indexes into [`block_texts`].
fn breakpoint_blocks(body: &Value) -> Vec<usize> {
    body["messages"]
        .as_array()
        .map(|msgs| {
            msgs.iter()
                .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                .enumerate()
                .filter(|(_, b)| b.get("cache_control").is_some())
                .map(|(i, _)| i)
                .collect()
        })
        .unwrap_or_default()
}

/// When a piece in the middle of the stream goes, the cache can only serve what came before
/// it: the breakpoint that reads back must end there, not after the pieces that followed it
/// (their prefix changed, so nothing written after the gap matches).
#[test]
fn a_dropped_piece_moves_the_read_breakpoint_before_it() {
    let s = reads_with_goal(
        &[
            ("a.rs", "fn a() {}"),
            ("b.rs", "fn b() {}"),
            ("c.rs", "fn c() {}"),
        ],
        vec![
            Action::ReadWhole(0),
            Action::ReadWhole(1),
            Action::ReadWhole(2),
        ],
    );
    let mut b = build(&s);
    let req = ProjectionRequest::new(Format::Anthropic, 100_000);
    render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    b.world.advance_turn();
    b.world.forget(Path::new("b.rs"));
    read_obs(&mut b, "a.rs", 0, 100);
    let p = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    let t = block_texts(&p.body);
    let a_result = t
        .iter()
        .position(|x| x.contains("fn a()"))
        .unwrap_or_else(|| panic!("{t:#?}"));
    let c_result = t
        .iter()
        .position(|x| x.contains("fn c()"))
        .unwrap_or_else(|| panic!("{t:#?}"));
    assert!(a_result < c_result, "{t:#?}");
    let marked = breakpoint_blocks(&p.body);
    assert_eq!(marked, vec![a_result, c_result], "{t:#?}");
    assert_eq!(validate_projection(&p), Ok(()));
}

/// The tool list comes first in a cached prefix: it holds every tool the session declared or
/// called, first use first, whichever tool the last step called.
#[test]
fn the_tool_list_does_not_follow_the_last_step() {
    let s = reads_with_goal(&[("a.rs", "x")], vec![Action::ReadWhole(0)]);
    let b = build(&s);
    let h = b.world.harness();
    h.note_step_tool("Bash");
    let step = |name: &str| Step {
        tool_use_id: "toolu_01".into(),
        tool_name: name.into(),
        input: serde_json::json!({}),
        result: "ok".into(),
        is_error: false,
        assistant_text: None,
        raw_assistant_content: None,
        turn: 0,
        refers_to: Vec::new(),
    };
    let names = |p: &Projection| -> Vec<String> {
        p.body["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    let req = ProjectionRequest::new(Format::Anthropic, 100_000);
    h.note_step_tool("Grep");
    *h.last_step.write() = Some(step("Grep"));
    let first = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(names(&first), vec!["Read", "Bash", "Grep"]);
    *h.last_step.write() = Some(step("Bash"));
    let second = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(names(&second), names(&first));
    assert_eq!(validate_projection(&second), Ok(()));
    // A step whose tool was never declared still gets it defined.
    *h.last_step.write() = Some(step("Edit"));
    let third = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(names(&third), vec!["Read", "Bash", "Grep", "Edit"]);
    assert_eq!(validate_projection(&third), Ok(()));
}

/// Reading on from where an earlier read stopped adds only the new lines: the earlier call
/// keeps its bytes and its place (merged into one wider call, it would be sent again).
#[test]
fn reading_on_adds_only_the_new_lines() {
    let lines: String = (1..=200).map(|i| format!("line {i:03}\n")).collect();
    let s = reads_with_goal(&[("big.py", lines.as_str())], vec![]);
    let mut b = build(&s);
    // "line 001\n" is 9 bytes: lines 1-10, then 11-20.
    read_obs(&mut b, "big.py", 0, 90);
    let req = ProjectionRequest::new(Format::Anthropic, 100_000);
    let first = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    let t1 = block_texts(&first.body);
    b.world.advance_turn();
    read_obs(&mut b, "big.py", 90, 90);
    let second = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    let t2 = block_texts(&second.body);
    assert_eq!(t1[..], t2[..t1.len()], "the earlier stream is a prefix");
    let results: Vec<&String> = t2.iter().filter(|x| x.contains("tool_result")).collect();
    assert_eq!(results.len(), 2, "{t2:#?}");
    assert!(
        results[0].contains("line 010") && !results[0].contains("line 011"),
        "{t2:#?}"
    );
    assert!(
        results[1].contains("line 011") && results[1].contains("line 020"),
        "{t2:#?}"
    );
    assert!(!results[1].contains("line 010"), "{t2:#?}");
    assert_eq!(validate_projection(&second), Ok(()));
}

/// Parts of a file kept apart for the prompt cache are one call again once the stream before
/// them changed: the request writes them anew anyway, and one call costs one envelope. While
/// the stream before them is unchanged, they stay apart; joined, they stay joined.
#[test]
fn touching_parts_are_joined_where_the_stream_is_written_anew() {
    let lines: String = (1..=200).map(|i| format!("line {i:03}\n")).collect();
    let s = reads_with_goal(
        &[
            ("a.py", "def a():\n    return 1\n"),
            ("big.py", lines.as_str()),
        ],
        vec![Action::ReadWhole(0)],
    );
    let mut b = build(&s);
    let req = ProjectionRequest::new(Format::Anthropic, 100_000);
    let calls_of_big = |p: &Projection| -> Vec<(u64, u64)> {
        p.body["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
            .filter(|b| b["type"] == "tool_use" && b["input"]["file_path"] == "big.py")
            .map(|b| {
                let n = |k: &str| b["input"][k].as_u64().unwrap_or(0);
                (n("offset"), n("limit"))
            })
            .collect()
    };
    // "line 001\n" is 9 bytes: lines 1-10, then 11-20.
    read_obs(&mut b, "big.py", 0, 90);
    let first = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(calls_of_big(&first), vec![(1, 10)]);
    b.world.advance_turn();
    read_obs(&mut b, "big.py", 90, 90);
    let second = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(calls_of_big(&second), vec![(1, 10), (11, 10)], "kept apart");

    // a.py, before both parts in the stream, changes: from it on the stream is new.
    b.world.advance_turn();
    b.write_file("a.py", "def a():\n    return 2\n");
    let third = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(calls_of_big(&third), vec![(1, 20)], "joined");
    let joined = block_texts(&third.body)
        .into_iter()
        .find(|t| t.contains("line 001"))
        .unwrap_or_default();
    assert!(joined.contains("10\\tline 010\\n11\\tline 011"), "{joined}");
    assert!(
        third.tokens < second.tokens,
        "{} >= {}",
        third.tokens,
        second.tokens
    );
    assert_eq!(validate_projection(&third), Ok(()));

    // The joined call is the call a read of those lines renders: it keeps its place.
    b.world.advance_turn();
    let fourth = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(block_texts(&fourth.body), block_texts(&third.body));
    assert_eq!(calls_of_big(&fourth), vec![(1, 20)]);
}

/// A file too big to show whole, shown as the places read last: reading a new place far from
/// the one shown keeps that one where it was and appends the new one. The places read last
/// alone would be the new place only, and the earlier part would leave the middle of the
/// stream, taking everything after it out of the prompt cache.
#[test]
fn a_new_place_in_a_big_file_keeps_the_part_shown_before() {
    let text = numbered_source(3000);
    let s = reads_with_goal(&[("big.py", text.as_str())], vec![]);
    let mut b = build(&s);
    // Byte offset and length of `n` lines from 1-based line `first`.
    let span = |first: usize, n: usize| {
        let start = line_start(&text, first);
        (start, line_start(&text, first + n) - start)
    };
    // The agent scanned the whole file, then looked at lines 100-129.
    read_obs(&mut b, "big.py", 0, text.len() as u64);
    let (at, len) = span(100, 30);
    read_obs(&mut b, "big.py", at, len);
    let req = ProjectionRequest::new(Format::Anthropic, 8000);
    let first = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    let t1 = block_texts(&first.body);
    assert!(t1.iter().any(|x| x.contains("inputs[100]")), "{t1:#?}");

    // Lines 2000-2069: with the earlier place, more than the places read last may hold.
    b.world.advance_turn();
    let (at, len) = span(2000, 70);
    read_obs(&mut b, "big.py", at, len);
    let second = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    let t2 = block_texts(&second.body);
    assert_eq!(t1[..], t2[..t1.len()], "the earlier stream is a prefix");
    assert!(
        t2[t1.len()..].iter().any(|x| x.contains("inputs[2000]")),
        "{t2:#?}"
    );
    assert_eq!(validate_projection(&second), Ok(()));
}

/// Byte offset where 1-based line `first` of `text` starts (its length past the last line).
fn line_start(text: &str, first: usize) -> u64 {
    text.split_inclusive('\n')
        .take(first - 1)
        .map(str::len)
        .sum::<usize>() as u64
}

/// Lines of `n` distinct lines long enough to be worth a marker in runs of a few.
fn numbered_source(n: usize) -> String {
    (1..=n)
        .map(|i| format!("    result_{i} = transform(inputs[{i}], scale={i})\n"))
        .collect()
}

fn last_result(body: &Value) -> String {
    let msgs = body["messages"].as_array().cloned().unwrap_or_default();
    msgs.last()
        .and_then(|m| m["content"].as_array().cloned())
        .and_then(|c| c.first().cloned())
        .and_then(|b| b["content"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The last step: `command` run in Bash, printing `output`.
fn bash_step(b: &Built, command: &str, output: &str) {
    *b.world.harness().last_step.write() = Some(Step {
        tool_use_id: "toolu_01".into(),
        tool_name: "Bash".into(),
        input: serde_json::json!({ "command": command }),
        result: output.into(),
        is_error: false,
        assistant_text: None,
        raw_assistant_content: None,
        turn: b.world.turn(),
        refers_to: Vec::new(),
    });
}

/// The last step ran `command`, and the harness recorded its output as a command output too.
fn ran(b: &Built, command: &str, output: &str) {
    output_of(b, command, output, None);
    bash_step(b, command, output);
}

/// A command output recorded for `command`, printing `output`; `tool`: kept as a tool call's
/// result as it was then.
fn output_of(b: &Built, command: &str, output: &str, tool: Option<&str>) {
    b.world.harness().record_command(CommandOutput {
        command: command.into(),
        cwd: ".".into(),
        output: output.into(),
        exit_code: Some(0),
        inputs: vec![],
        subtrees: Vec::new(),
        turn: 0,
        seq: 99,
        tool: tool.map(str::to_owned),
        session: None,
        session_step: None,
    });
}

/// A command output that repeats a file the stream shows (an agent reading with `cat`, as
/// Codex does) names the file's lines instead; what the file does not hold stays; a tool's
/// result kept as it was stays whole, and so does every output for `verbatim`.
#[test]
fn a_command_output_names_the_lines_of_files_the_stream_shows() {
    let text = numbered_source(40);
    let s = reads_with_goal(&[("calc.py", text.as_str())], vec![Action::ReadWhole(0)]);
    let b = build(&s);
    let marker = "[lines 1-40 of calc.py: not repeated, shown in this context as they are now]";
    let line = "transform(inputs[17], scale=17)";
    output_of(
        &b,
        "cat calc.py && echo done",
        &format!("{text}done\n"),
        None,
    );
    bash_step(&b, "ls", "calc.py\n");
    let req = ProjectionRequest::new(Format::Text, 100_000);
    let p = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    let body = p.body.as_str().unwrap_or_default().to_owned();
    assert!(body.contains(&format!("{marker}\ndone")), "{body}");
    assert_eq!(body.matches(line).count(), 1, "{body}");
    let shortened_tokens = p.tokens;

    let verbatim = ProjectionRequest {
        step_output: StepOutput::Verbatim,
        ..req.clone()
    };
    let p = render(&b.world, &verbatim).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.body.as_str().unwrap_or_default().matches(line).count(), 2);
    assert!(
        p.tokens > shortened_tokens + 300,
        "{} against {shortened_tokens}",
        p.tokens
    );

    let b = build(&s);
    output_of(&b, "cat calc.py", &text, Some("Bash"));
    bash_step(&b, "ls", "calc.py\n");
    let p = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    let body = p.body.as_str().unwrap_or_default();
    assert_eq!(body.matches(line).count(), 2, "kept as it was: {body}");
}

fn cat_step(b: &Built, result: String) {
    bash_step(b, "cat -n calc.py | sed -n 5,30p", &result);
}

/// A step that printed lines of a file the stream shows points at them instead of repeating
/// them; lines that changed since stay as the step saw them; `verbatim` turns it off.
#[test]
fn the_last_step_points_at_the_lines_the_stream_shows() {
    let text = numbered_source(40);
    let s = reads_with_goal(&[("calc.py", text.as_str())], vec![Action::ReadWhole(0)]);
    let mut b = build(&s);
    let printed: Vec<String> = text
        .lines()
        .enumerate()
        .skip(4)
        .take(26)
        .map(|(i, l)| format!("{:>6}\t{l}", i + 1))
        .collect();
    let output = format!(
        "<returncode>0</returncode>\n<output>\n{}\n</output>",
        printed.join("\n")
    );
    cat_step(&b, output.clone());
    let req = ProjectionRequest::new(Format::Anthropic, 100_000);
    let p = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(validate_projection(&p), Ok(()));
    assert_eq!(
        last_result(&p.body),
        "<returncode>0</returncode>\n<output>\n[lines 5-30 of calc.py: not repeated, shown \
         above as they are now]\n</output>"
    );
    // every printed line is in the body once: in the stream
    let body = p.body.to_string();
    assert_eq!(body.matches("transform(inputs[17], scale=17)").count(), 1);

    // Line 17 changes on disk after the step: the step keeps it as it printed it.
    let changed = text.replace(
        "transform(inputs[17], scale=17)",
        "transform(inputs[17], scale=0)",
    );
    b.write_file("calc.py", &changed);
    cat_step(&b, output.clone());
    let p = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    let r = last_result(&p.body);
    assert!(
        r.contains("[lines 5-16 of calc.py")
            && r.contains("scale=17)")
            && r.contains("[lines 18-30 of calc.py"),
        "{r}"
    );

    let verbatim = ProjectionRequest {
        step_output: StepOutput::Verbatim,
        ..req.clone()
    };
    let p = render(&b.world, &verbatim).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(last_result(&p.body), output);
    // The json format always carries the result as recorded.
    let json = ProjectionRequest::new(Format::Json, 100_000);
    let p = render(&b.world, &json).unwrap_or_else(|e| panic!("{e}"));
    assert!(p.body.to_string().contains("scale=16)"), "{}", p.body);
}

/// Counting the step's lines once leaves room for the file they came from: at budgets where the
/// verbatim step and the file do not both fit, the file is shown and the step points at it;
/// and a step never points at lines the projection does not show.
#[test]
fn a_step_pointing_at_a_file_leaves_room_for_it() {
    let text = numbered_source(60);
    let s = reads_with_goal(&[("calc.py", text.as_str())], vec![Action::ReadWhole(0)]);
    let b = build(&s);
    let printed: Vec<&str> = text.lines().collect();
    let output = printed.join("\n");
    let shown = |p: &Projection| {
        p.body.to_string().contains(r#"\"file_path\":\"calc.py\""#)
            || p.body.to_string().contains(r#""file_path":"calc.py""#)
    };
    let mut only_shortened = 0;
    for budget in (800..4000).step_by(100) {
        let req = ProjectionRequest::new(Format::Anthropic, budget);
        let verbatim = ProjectionRequest {
            step_output: StepOutput::Verbatim,
            ..req.clone()
        };
        cat_step(&b, output.clone());
        let (Ok(short), Ok(long)) = (render(&b.world, &req), render(&b.world, &verbatim)) else {
            continue;
        };
        assert!(short.tokens <= budget && long.tokens <= budget);
        assert_eq!(validate_projection(&short), Ok(()));
        let r = last_result(&short.body);
        if r.contains("not repeated") {
            assert!(
                shown(&short),
                "budget {budget}: the marker points at nothing"
            );
        }
        if shown(&short) && !shown(&long) {
            only_shortened += 1;
        }
    }
    assert!(
        only_shortened > 0,
        "no budget where counting once made room"
    );
}

/// The step's own output, long enough to point at, joins the stream at once and the step points
/// at it: it is sent once, and from this request on it is part of the cached prefix.
#[test]
fn a_long_step_output_joins_the_stream_at_once() {
    let s = reads_with_goal(&[("a.rs", "x")], vec![Action::ReadWhole(0)]);
    let b = build(&s);
    let output: String = (1..=12)
        .map(|i| format!("tests/test_mod.py::test_case_number_{i} PASSED\n"))
        .collect();
    ran(&b, "pytest -v", &output);
    let req = ProjectionRequest::new(Format::Anthropic, 100_000);
    let p = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(validate_projection(&p), Ok(()));
    let body = p.body.to_string();
    assert_eq!(body.matches("test_case_number_7 PASSED").count(), 1);
    assert!(body.contains("Output of `pytest -v`"), "{body}");
    assert!(
        last_result(&p.body).starts_with("[12 lines not repeated"),
        "{}",
        last_result(&p.body)
    );
}

/// The final fit drops what the step points at last, and when it must, the step gets its
/// recorded result back: a marker never points at something the projection does not show.
#[test]
fn the_final_fit_never_leaves_a_marker_without_its_lines() {
    let text = numbered_source(40);
    let s = reads_with_goal(
        &[
            ("other.py", "def other():\n    return 1\n"),
            ("calc.py", text.as_str()),
        ],
        // calc.py is the older of the two: it would go first, were it not pointed at
        vec![Action::ReadWhole(1), Action::ReadWhole(0)],
    );
    let b = build(&s);
    let output: String = text.lines().collect::<Vec<_>>().join("\n");
    cat_step(&b, output.clone());
    let req = ProjectionRequest::new(Format::Anthropic, 100_000);
    let policy = b
        .world
        .policy("worldfs")
        .unwrap_or_else(|| panic!("worldfs policy"));
    let full =
        gather::gather(&b.world, &req, policy.as_ref(), 100_000).unwrap_or_else(|e| panic!("{e}"));
    let step_result = |i: &parts::Input| i.step.as_ref().map(|s| s.result.clone());
    assert!(
        step_result(&full).is_some_and(|r| r.contains("not repeated")),
        "{:?}",
        step_result(&full)
    );
    let total = budget::total(&full, Format::Anthropic);
    let other = full
        .entries
        .iter()
        .find(|e| e.path == Path::new("other.py"))
        .map_or(0, |e| e.cost);
    // One token short: the older, unrelated file goes; the step still points at calc.py.
    let mut input = full.clone();
    budget::fit(&mut input, total - 1, Format::Anthropic).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(input.entries.len(), 1);
    assert!(step_result(&input).is_some_and(|r| r.contains("not repeated")));
    // Short by more than that: calc.py goes too, and the step shows what it printed.
    let mut input = full.clone();
    budget::fit(&mut input, total - other - 1, Format::Anthropic).unwrap_or_else(|e| panic!("{e}"));
    assert!(input.entries.iter().all(|e| e.path != Path::new("calc.py")));
    if let Some(r) = step_result(&input) {
        assert_eq!(r, output);
    }
}

/// A file the agent read in part and then edited is shown as what it saw: the lines it read
/// (moved with the edit) and the lines its edits touched, with a few around them; not the
/// rest of the file, which it never saw. Until session 47 such a file was shown whole, and every
/// edit wrote all of it to the prompt cache again.
#[test]
fn an_edited_file_is_shown_as_what_the_agent_saw_and_changed() {
    let text = numbered_source(80);
    let s = reads_with_goal(&[("big.py", text.as_str())], vec![]);
    let mut b = build(&s);
    let (at, end) = (line_start(&text, 20), line_start(&text, 40));
    read_obs(&mut b, "big.py", at, end - at);
    // The harness's request of this turn, which counts the file as the agent read it.
    let req = ProjectionRequest::new(Format::Anthropic, 8000);
    render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    b.world.advance_turn();
    // A small file (about 1,200 tokens), read at lines 20-39. Line 30 changed where the agent
    // read; line 70, which it never read, too (`sed -i '70s/.../.../'`); and a line inserted
    // after line 10: all three are the agent's own.
    let edited: String = text
        .lines()
        .enumerate()
        .map(|(i, l)| match i + 1 {
            30 => "    result_30 = fixed(inputs[30])\n".to_owned(),
            70 => "    result_70 = fixed(inputs[70])\n".to_owned(),
            10 => format!("{l}\n    inserted = True\n"),
            _ => format!("{l}\n"),
        })
        .collect();
    b.write_file("big.py", &edited);
    let p = render(&b.world, &req).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(validate_projection(&p), Ok(()));
    let shown = block_texts(&p.body).join("\n");
    for seen in [
        "fixed(inputs[30])",
        "inputs[21],",
        "inputs[39],",
        "fixed(inputs[70])",
        "inserted = True",
    ] {
        assert!(shown.contains(seen), "{seen} missing: {shown}");
    }
    for unseen in ["inputs[3],", "inputs[55],", "inputs[80],"] {
        assert!(!shown.contains(unseen), "{unseen} shown: {shown}");
    }
}
