//! Every method over a real Unix socket, against a world built over a temporary tree.

mod socket_support;

use serde_json::{Value, json};
use socket_support::*;
use worldfs::socket::{METHODS, code};

#[test]
fn initialize_reports_version_capabilities_and_methods() {
    let f = Fixture::new();
    let mut c = f.connect();
    let r = c.call("initialize", json!({}));
    assert_eq!(r["server"]["name"], "worldfs");
    assert_eq!(r["protocol_version"], 1);
    let methods: Vec<&str> = r["methods"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    assert_eq!(methods, METHODS);
    let formats = &r["capabilities"]["formats"];
    for f in [
        "anthropic",
        "openai_chat",
        "openai_responses",
        "text",
        "json",
    ] {
        assert!(
            formats
                .as_array()
                .is_some_and(|a| a.contains(&Value::from(f))),
            "{f}"
        );
    }
    assert_eq!(r["capabilities"]["max_line_bytes"], 1 << 20);
    assert_eq!(r["root"]["socket"], json!(f.sock));
}

#[test]
fn every_method_is_dispatched() {
    // Unknown-method errors would mean a listed method is not wired.
    let f = Fixture::new();
    let mut c = f.connect();
    for m in METHODS {
        let r = c.call_raw(m, json!({"__probe": 1}));
        if let Some(e) = r.get("error") {
            assert_ne!(e["code"], code::METHOD_NOT_FOUND, "{m}: {r}");
        }
    }
}

#[test]
fn projection_respects_budget_and_formats() {
    let f = Fixture::new();
    for p in ["README.md", "src/main.rs", "src/lib.rs"] {
        f.read(p);
    }
    let mut c = f.connect();
    for fmt in [
        "anthropic",
        "openai_chat",
        "openai_responses",
        "text",
        "json",
    ] {
        let r = c.call("projection.get", json!({"format": fmt, "budget": 8000}));
        assert_eq!(r["format"], fmt);
        assert!(
            r["tokens"].as_u64().is_some_and(|t| t > 0 && t <= 8000),
            "{r}"
        );
    }
    let text = c.call("projection.get", json!({"format": "text", "budget": 8000}));
    let t = text["body"].as_str().unwrap_or("");
    assert!(t.contains("fn main()"), "{t}");
    // A budget too small for everything keeps the total under it.
    let small = c.call("projection.get", json!({"format": "json", "budget": 30}));
    assert!(small["tokens"].as_u64().is_some_and(|t| t <= 30), "{small}");
    // Options pass through validation.
    c.call(
        "projection.get",
        json!({"tool_name": "Read", "path_param": "file_path", "max_breakpoints": 0,
               "absolute_paths": true, "policy": "lru"}),
    );
    // Breakpoints an hour long, for a harness whose own are: the API refuses one after a
    // five-minute breakpoint.
    for (ttl, want) in [
        (json!("1h"), json!({"type": "ephemeral", "ttl": "1h"})),
        (json!("5m"), json!({"type": "ephemeral"})),
        (Value::Null, json!({"type": "ephemeral"})),
    ] {
        let mut params = json!({"format": "anthropic", "max_breakpoints": 4});
        if !ttl.is_null() {
            params["cache_ttl"] = ttl.clone();
        }
        let p = c.call("projection.get", params);
        let marks = p["body"]["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|m| m["content"].as_array())
            .flatten()
            .filter_map(|b| b.get("cache_control"))
            .collect::<Vec<_>>();
        assert!(!marks.is_empty(), "{p}");
        assert!(marks.iter().all(|m| **m == want), "{ttl}: {marks:?}");
    }
}

/// What a projection left out is listed up to `evicted_limit` (100 unless asked), and counted
/// in full: a big world's list would otherwise be most of every reply.
#[test]
fn evicted_entries_are_listed_up_to_a_limit_and_counted_in_full() {
    let f = Fixture::new();
    // Written by the agent: a shell reading 150 files would be a scan, not the agent's reads.
    must(std::fs::create_dir_all(f.root().join("notes")));
    for i in 0..150 {
        let p = format!("notes/f{i:03}.txt");
        f.write(&p, &format!("file {i} {}\n", "word ".repeat(40)));
    }
    let mut c = f.connect();
    let listed = |r: &Value| r["evicted"].as_array().map_or(0, Vec::len);
    let r = c.call("projection.get", json!({"format": "text", "budget": 300}));
    let total = r["evicted_total"].as_u64().unwrap_or(0) as usize;
    assert!(
        total > 100,
        "{total} evicted of 150 files at 300 tokens: {r}"
    );
    assert_eq!(listed(&r), 100, "the default limit");
    let all = c.call(
        "projection.get",
        json!({"format": "text", "budget": 300, "evicted_limit": 100000}),
    );
    assert_eq!(listed(&all), total);
    assert_eq!(all["evicted_total"], r["evicted_total"]);
    // The listed ones are the first of the full list, in the same order.
    assert_eq!(
        all["evicted"].as_array().map(|a| a[..100].to_vec()),
        r["evicted"].as_array().cloned()
    );
    let none = c.call(
        "projection.get",
        json!({"format": "text", "budget": 300, "evicted_limit": 0}),
    );
    assert_eq!(
        (listed(&none), &none["evicted_total"]),
        (0, &r["evicted_total"])
    );
    assert_eq!(
        none["body"], r["body"],
        "the limit changes the report, not the projection"
    );
}

/// Renders are reused only while nothing they show changed: every harness call that changes
/// state, every agent access and every change behind the mount makes the next one fresh.
#[test]
fn reused_projections_are_never_stale() {
    let f = Fixture::new();
    f.read("src/lib.rs");
    let mut c = f.connect();
    let text = |c: &mut Conn| {
        let r = c.call("projection.get", json!({"format": "text", "budget": 8000}));
        r["body"].as_str().unwrap_or("").to_owned()
    };
    let first = text(&mut c);
    assert_eq!(
        text(&mut c),
        first,
        "an unchanged world renders the same bytes"
    );
    c.call("goal.set", json!({"goal": "make add saturate"}));
    let with_goal = text(&mut c);
    assert!(with_goal.contains("make add saturate"), "{with_goal}");
    f.external_write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a.saturating_add(b)\n}\n",
    );
    let edited = text(&mut c);
    assert!(edited.contains("saturating_add"), "{edited}");
    f.write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a.wrapping_add(b)\n}\n",
    );
    let rewritten = text(&mut c);
    assert!(
        rewritten.contains("wrapping_add") && !rewritten.contains("saturating_add"),
        "{rewritten}"
    );
    f.read("src/util.rs");
    assert!(text(&mut c).contains("fn helper()"));
}

#[test]
fn projection_rejects_bad_parameters_clearly() {
    let f = Fixture::new();
    let mut c = f.connect();
    let cases = [
        (json!({"budget": 0}), "budget 0"),
        (json!({"budget": 1_000_000_000u64}), "out of range"),
        (json!({"budget": -5}), "invalid value"),
        (json!({"budget": 1.5}), "invalid type"),
        (json!({"budget": "8000"}), "invalid type"),
        (json!({"format": "xml"}), "unknown variant"),
        (json!({"tool_name": "has space"}), "tool_name"),
        (json!({"tool_name": ""}), "tool_name"),
        (json!({"max_breakpoints": 5}), "at most 4"),
        (json!({"max_breakpoints": 300}), "invalid value"),
        (json!({"cache_ttl": "2h"}), "unknown variant"),
        (json!({"policy": "nope"}), "unknown policy"),
        (json!({"budgett": 10}), "unknown field"),
    ];
    for (params, needle) in cases {
        let (code_, msg) = c.call_err("projection.get", params.clone());
        assert_eq!(code_, code::INVALID_PARAMS, "{params}: {msg}");
        assert!(msg.contains(needle), "{params}: {msg:?} lacks {needle:?}");
    }
    // Still usable afterwards.
    c.call("projection.get", json!({"budget": 100}));
}

#[test]
fn goal_set_get_clear() {
    let f = Fixture::new();
    let mut c = f.connect();
    assert_eq!(c.call("goal.get", json!({}))["goal"], Value::Null);
    c.call("goal.set", json!({"goal": "make the tests pass"}));
    assert_eq!(c.call("goal.get", json!({}))["goal"], "make the tests pass");
    assert_eq!(
        f.world
            .harness()
            .conversations
            .read(None, |c| c.goal.clone()),
        Some("make the tests pass".to_owned())
    );
    c.call("goal.set", json!({"goal": null}));
    assert_eq!(c.call("goal.get", json!({}))["goal"], Value::Null);
    let (code_, _) = c.call_err("goal.set", json!({"goal": 5}));
    assert_eq!(code_, code::INVALID_PARAMS);

    // A compaction is noted only for a conversation with a goal, lasts through later prompts,
    // and ends with the goal.
    assert_eq!(c.call("goal.compacted", json!({}))["compacted"], false);
    c.call("goal.set", json!({"goal": "make the tests pass"}));
    assert_eq!(c.call("goal.get", json!({}))["compacted"], false);
    let r = c.call("goal.compacted", json!({}));
    assert_eq!(r["goal"], "make the tests pass");
    assert_eq!(r["compacted"], true);
    c.call(
        "goal.set",
        json!({"goal": "make the tests pass, then lint"}),
    );
    assert_eq!(c.call("goal.get", json!({}))["compacted"], true);
    c.call("goal.set", json!({"goal": ""}));
    assert_eq!(c.call("goal.get", json!({}))["compacted"], false);
    let (code_, _) = c.call_err("goal.compacted", json!({"summary": "x"}));
    assert_eq!(code_, code::INVALID_PARAMS);

    // A resume is noted until a goal is adopted, or the goal cleared.
    c.call("goal.set", json!({"goal": "old task"}));
    assert_eq!(c.call("goal.resumed", json!({}))["resumed"], true);
    let r = c.call("goal.adopt", json!({"goal": "new task", "compacted": true}));
    assert_eq!(
        r,
        json!({"goal": "new task", "compacted": true, "resumed": false, "session": null,
               "conversations": 1})
    );
    c.call("goal.resumed", json!({}));
    c.call("goal.set", json!({"goal": null}));
    assert_eq!(
        c.call("goal.get", json!({})),
        json!({"goal": null, "compacted": false, "resumed": false, "session": null,
               "conversations": 1})
    );
    let (code_, _) = c.call_err("goal.adopt", json!({"goal": " ", "compacted": false}));
    assert_eq!(code_, code::INVALID_PARAMS);
    let (code_, _) = c.call_err("goal.adopt", json!({"goal": "x"}));
    assert_eq!(code_, code::INVALID_PARAMS);
}

/// Two sessions on one mount (two Claude Code terminals in one project): each has its goal,
/// compaction and task list, and its projection shows its own; a method naming no session
/// speaks of the one changed last.
/// Once two sessions record steps, each one's projection shows the files its steps named and
/// the files no session named, its own last step, and not the other's files.
#[test]
fn each_session_sees_the_files_its_steps_named() {
    let f = Fixture::new();
    let mut c = f.connect();
    for path in ["src/lib.rs", "src/util.rs", "README.md"] {
        f.read(path);
    }
    let step = |c: &mut Conn, session: &str, id: &str, files: Value| {
        c.call(
            "step.record",
            json!({"tool_use_id": id, "tool_name": "Edit", "input": {},
                   "result": format!("edited by {session}"), "files": files,
                   "session": session}),
        )
    };
    // A file outside the mount is no file of the world's: passed over, the step recorded.
    step(
        &mut c,
        "a",
        "toolu_a1",
        json!(["src/lib.rs", "/etc/hostname"]),
    );
    let text = |c: &mut Conn, session: &str| -> String {
        c.call(
            "projection.get",
            json!({"format": "text", "budget": 4000, "session": session}),
        )["body"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let alone = text(&mut c, "a");
    assert!(
        alone.contains("a + b") && alone.contains("42"),
        "one session alone sees the whole world: {alone}"
    );
    step(&mut c, "b", "toolu_b1", json!(["src/util.rs"]));
    let a = text(&mut c, "a");
    assert!(a.contains("a + b") && a.contains("A small project"), "{a}");
    assert!(!a.contains("42"), "src/util.rs is b's alone: {a}");
    assert!(
        a.contains("edited by a") && !a.contains("edited by b"),
        "its own last step: {a}"
    );
    let b = text(&mut c, "b");
    assert!(b.contains("42") && b.contains("A small project"), "{b}");
    let listed = c.call("goal.list", json!({}));
    assert_eq!(listed["conversations"][0]["steps"], 1, "{listed}");
    assert_eq!(
        listed["conversations"][0]["files"], 1,
        "src/lib.rs; /etc/hostname passed over: {listed}"
    );
    // A file b's request shows (Claude Code attached it) b has seen: it is b's from now on.
    let readme = f.root().join("README.md").to_string_lossy().into_owned();
    c.call(
        "projection.get",
        json!({"format": "text", "budget": 4000, "session": "b",
               "request_shows": [{"path": readme, "hash": "0".repeat(64)}]}),
    );
    let listed = c.call("goal.list", json!({}));
    assert_eq!(listed["conversations"][1]["files"], 2, "{listed}");
    assert!(!text(&mut c, "a").contains("A small project"));
    assert!(!b.contains("a + b") && b.contains("edited by b"), "{b}");
    let too_many: Vec<String> = (0..65).map(|i| format!("f{i}")).collect();
    let (code, msg) = c.call_err(
        "step.record",
        json!({"tool_use_id": "t", "tool_name": "Edit", "result": "", "files": too_many}),
    );
    assert_eq!(code, -32602, "{msg}");
}

#[test]
fn each_session_has_its_own_goal_and_state() {
    let f = Fixture::new();
    let mut c = f.connect();
    c.call(
        "goal.set",
        json!({"goal": "fix the parser", "session": "a"}),
    );
    c.call(
        "state.patch",
        json!({"session": "a", "tasks": [{"id": "1", "subject": "reproduce the parse error"}]}),
    );
    c.call("goal.compacted", json!({"session": "a"}));
    // The second session starts: its start clears its own goal, not the first one's.
    c.call("goal.set", json!({"goal": null, "session": "b"}));
    c.call("state.patch", json!({"session": "b", "tasks": null}));
    c.call(
        "goal.set",
        json!({"goal": "explain the lexer", "session": "b"}),
    );
    let a = c.call("goal.get", json!({"session": "a"}));
    assert_eq!(
        a,
        json!({"goal": "fix the parser", "compacted": true, "resumed": false, "session": "a",
               "conversations": 2})
    );
    let current = c.call("goal.get", json!({}));
    assert_eq!(current["goal"], "explain the lexer");
    assert_eq!(current["session"], "b");
    assert_eq!(
        c.call("goal.get", json!({"session": "nobody"})),
        json!({"goal": null, "compacted": false, "resumed": false, "session": null,
               "conversations": 2}),
        "a session not known is said to be"
    );

    let text = |c: &mut Conn, session: Option<&str>| -> String {
        let mut params = json!({"format": "text", "budget": 4000});
        if let Some(s) = session {
            params["session"] = json!(s);
        }
        c.call("projection.get", params)["body"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let for_a = text(&mut c, Some("a"));
    assert!(
        for_a.contains("fix the parser") && for_a.contains("reproduce the parse error"),
        "{for_a}"
    );
    assert!(!for_a.contains("explain the lexer"), "{for_a}");
    let for_b = text(&mut c, Some("b"));
    assert!(for_b.contains("explain the lexer"), "{for_b}");
    assert!(
        !for_b.contains("fix the parser") && !for_b.contains("reproduce"),
        "{for_b}"
    );
    assert_eq!(text(&mut c, None), for_b, "the current conversation is b");
    assert_eq!(
        c.call("goal.list", json!({})),
        json!({"conversations": [
            {"session": "a", "goal": "fix the parser", "compacted": true, "resumed": false,
             "tasks": 1, "steps": 0, "files": 0},
            {"session": "b", "goal": "explain the lexer", "compacted": false, "resumed": false,
             "tasks": 0, "steps": 0, "files": 0},
        ]}),
        "every conversation, the current one last"
    );
    assert_eq!(
        c.call("state.get", json!({"session": "a"}))["state"]["tasks"][0]["id"],
        "1"
    );
    assert_eq!(c.call("state.get", json!({}))["state"]["tasks"], json!([]));

    // Naming no session changes the current one, which a named change makes `a` again.
    c.call("state.patch", json!({"session": "a", "intent": "a fix"}));
    c.call(
        "goal.set",
        json!({"goal": "fix the parser, then the tests"}),
    );
    assert_eq!(
        c.call("goal.get", json!({"session": "a"}))["goal"],
        "fix the parser, then the tests"
    );
    assert_eq!(
        c.call("goal.get", json!({"session": "b"}))["goal"],
        "explain the lexer"
    );
    c.call(
        "state.set",
        json!({"session": "b", "intent": "explain", "decisions": ["read lexer.rs first"]}),
    );
    assert_eq!(
        c.call("state.get", json!({"session": "b"}))["state"]["decisions"],
        json!(["read lexer.rs first"])
    );
    assert_eq!(
        c.call("state.get", json!({"session": "a"}))["state"]["intent"],
        "a fix"
    );

    let long = "x".repeat(300);
    for (method, params) in [
        ("goal.get", json!({"session": long})),
        ("goal.set", json!({"goal": "g", "session": long})),
        ("state.patch", json!({"session": long, "intent": "i"})),
        ("state.patch", json!({"session": 5, "intent": "i"})),
        ("projection.get", json!({"session": long})),
    ] {
        let (code_, msg) = c.call_err(method, params);
        assert_eq!(code_, code::INVALID_PARAMS, "{method}: {msg}");
        assert!(msg.contains("session"), "{method}: {msg}");
    }
}

/// A file the client's request shows whole, as it is now, is left out of the projection (and
/// of its budget); a copy that is no longer the file leaves it in, as it is.
#[test]
fn a_file_the_request_shows_as_it_is_is_left_out() {
    // As a mount serves it: absolute paths under the mount point.
    let f = Fixture::with(|o| {
        o.renderer = std::sync::Arc::new(worldfs::socket::Projections {
            mount_point: o.mount_point.clone(),
        });
    });
    f.read("src/lib.rs");
    f.read("src/util.rs");
    let mut c = f.connect();
    let lib = f.root().join("src/lib.rs").to_string_lossy().into_owned();
    let now = must(std::fs::read(f.root().join("src/lib.rs")));
    let hash = worldfs::projection::shown_hash(&now);
    let get = |c: &mut Conn, shows: Value| {
        c.call(
            "projection.get",
            json!({"format": "text", "budget": 4000, "absolute_paths": true,
                   "request_shows": shows}),
        )
    };
    for path in [lib.as_str(), "src/lib.rs"] {
        let r = get(&mut c, json!([{ "path": path, "hash": hash }]));
        let body = r["body"].as_str().unwrap_or_default();
        assert!(!body.contains("a + b"), "left out: {body}");
        assert!(body.contains("fn helper"), "{body}");
        assert_eq!(r["in_request"], json!([lib]), "{r}");
        let evicted = r["evicted"].as_array().cloned().unwrap_or_default();
        assert!(
            !evicted.iter().any(|e| e["path"] == json!(lib)),
            "not evicted either: {r}"
        );
    }
    let old = worldfs::projection::shown_hash(b"pub fn add() {}\n");
    let r = get(&mut c, json!([{ "path": lib, "hash": old }]));
    assert!(r["body"].as_str().unwrap_or_default().contains("a + b"));
    assert!(r.get("in_request").is_none(), "{r}");
    f.write(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    b + a\n}\n",
    );
    let r = get(&mut c, json!([{ "path": lib, "hash": hash }]));
    assert!(
        r["body"].as_str().unwrap_or_default().contains("b + a"),
        "changed since the copy: shown as it is {r}"
    );
    for (shows, needle) in [
        (json!([{"path": lib, "hash": "xyz"}]), "64 hex digits"),
        (json!([{"path": lib}]), "missing field"),
        (
            json!(vec![json!({"path": lib, "hash": hash}); 65]),
            "at most 64",
        ),
    ] {
        let (code_, msg) = c.call_err(
            "projection.get",
            json!({"format": "text", "request_shows": shows}),
        );
        assert_eq!(code_, code::INVALID_PARAMS, "{msg}");
        assert!(msg.contains(needle), "{msg}");
    }
}

/// A kept output the client's request holds as it came (a background agent's report, in
/// Claude Code's notice that it ended) is not shown a second time; another one is.
#[test]
fn an_output_the_request_holds_is_left_out() {
    let f = Fixture::new();
    let mut c = f.connect();
    for (task, report) in [
        ("t1", "REPORT ONE: show() prints"),
        ("t2", "REPORT TWO: util"),
    ] {
        c.call(
            "command.record",
            json!({"command": format!("Agent {{\"task\":\"{task}\"}}"), "cwd": ".",
                   "output": report, "files": [], "tool": "Agent"}),
        );
    }
    let get = |c: &mut Conn, outputs: Value| {
        let r = c.call(
            "projection.get",
            json!({"format": "text", "budget": 4000, "request_outputs": outputs}),
        );
        r["body"].as_str().unwrap_or_default().to_owned()
    };
    let body = get(&mut c, json!([]));
    assert!(
        body.contains("REPORT ONE") && body.contains("REPORT TWO"),
        "{body}"
    );
    // As the request holds it: the trailing line break is no difference.
    let one = worldfs::projection::shown_hash(b"REPORT ONE: show() prints\n");
    let body = get(&mut c, json!([one.to_ascii_uppercase()]));
    assert!(
        !body.contains("REPORT ONE") && body.contains("REPORT TWO"),
        "{body}"
    );
    let other = worldfs::projection::shown_hash(b"REPORT ONE: show() print");
    assert!(get(&mut c, json!([other])).contains("REPORT ONE"));
    for bad in [json!(["xyz"]), json!(vec![one.clone(); 65]), json!("x")] {
        let (code_, msg) = c.call_err(
            "projection.get",
            json!({"format": "text", "request_outputs": bad}),
        );
        assert_eq!(code_, code::INVALID_PARAMS, "{msg}");
    }
}

#[test]
fn step_record_advances_the_turn_and_counts_history() {
    let f = Fixture::new();
    let mut c = f.connect();
    let before = f.world.turn();
    let r = c.call(
        "step.record",
        json!({"tool_use_id": "toolu_01", "tool_name": "Bash", "input": {"command": "ls"},
               "result": "README.md\nsrc\n", "assistant_text": "Let me look."}),
    );
    assert_eq!(r["turn"], before + 1);
    assert_eq!(f.world.turn(), before + 1);
    let step = f.world.harness().last_step.read().clone();
    assert_eq!(step.map(|s| s.tool_use_id), Some("toolu_01".to_string()));
    assert!(r["history_tokens"].as_u64().is_some_and(|t| t > 5), "{r}");
    c.call("projection.get", json!({"budget": 1000}));
    let s = c.call("stats", json!({}));
    assert!(
        s["tokens"]["history_tokens_sent_total"]
            .as_u64()
            .is_some_and(|t| t > 5)
    );
    let (code_, msg) = c.call_err("step.record", json!({"tool_use_id": "x"}));
    assert_eq!(code_, code::INVALID_PARAMS);
    assert!(msg.contains("missing field"), "{msg}");
    let (code_, _) = c.call_err(
        "step.record",
        json!({"tool_use_id": "", "tool_name": "Bash", "result": ""}),
    );
    assert_eq!(code_, code::INVALID_PARAMS);
}

/// A step recorded `once` is recorded the first time only: a harness that reads its calls back
/// after the fact (Codex's `apply_patch`) may tell one twice, and must not advance the turn
/// twice or make an older call the last step again.
#[test]
fn a_step_recorded_once_is_not_recorded_again() {
    let f = Fixture::new();
    let mut c = f.connect();
    let step = |id: &str| {
        json!({"tool_use_id": id, "tool_name": "Bash", "input": {"command": "apply_patch"},
               "result": "Success.", "once": true})
    };
    let r = c.call("step.record", step("call_p1"));
    assert_eq!(r["recorded"], true);
    let turn = r["turn"].as_u64().expect("turn");
    c.call(
        "step.record",
        json!({"tool_use_id": "call_x", "tool_name": "Bash", "result": "ok"}),
    );
    let again = c.call("step.record", step("call_p1"));
    assert_eq!(again["recorded"], false, "{again}");
    assert_eq!(again["turn"], turn + 1, "the turn did not advance");
    let last = f.world.harness().last_step.read().clone();
    assert_eq!(last.map(|s| s.tool_use_id).as_deref(), Some("call_x"));
    // Without `once`, as always: every record is a step.
    let r = c.call(
        "step.record",
        json!({"tool_use_id": "call_x", "tool_name": "Bash", "result": "ok"}),
    );
    assert_eq!(
        (r["recorded"].clone(), r["turn"].clone()),
        (json!(true), json!(turn + 2))
    );
    // A refused record notes nothing: the good one after it is recorded.
    let mut bad = step("call_p2");
    bad["views"] = json!([{"path": "a.txt", "lines": [0, 1]}]);
    c.call_err("step.record", bad);
    assert_eq!(c.call("step.record", step("call_p2"))["recorded"], true);
}

/// Declared tools and tools steps called are all defined, first use first, whatever the
/// last step called: the tool list opens every cached prefix.
#[test]
fn tools_declare_keeps_the_tool_list_stable() {
    let f = Fixture::new();
    let mut c = f.connect();
    let r = c.call("tools.declare", json!({"names": ["Bash", "Edit", "Bash"]}));
    assert_eq!(r["tools"], json!(["Bash", "Edit"]));
    let names = |c: &mut Conn| -> Vec<String> {
        let p = c.call(
            "projection.get",
            json!({"format": "anthropic", "budget": 4000}),
        );
        p["body"]["tools"]
            .as_array()
            .map(|t| {
                t.iter()
                    .filter_map(|t| t["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    // declared, the tools are there before any call: the first request's cache prefix holds
    assert_eq!(names(&mut c), vec!["Read", "Bash", "Edit"]);
    c.call(
        "step.record",
        json!({"tool_use_id": "toolu_01", "tool_name": "Grep", "input": {"pattern": "x"},
               "result": "none"}),
    );
    assert_eq!(names(&mut c), vec!["Read", "Bash", "Edit", "Grep"]);
    c.call(
        "step.record",
        json!({"tool_use_id": "toolu_02", "tool_name": "Bash", "input": {"command": "ls"},
               "result": "a"}),
    );
    assert_eq!(names(&mut c), vec!["Read", "Bash", "Edit", "Grep"]);
    let (code_, msg) = c.call_err("tools.declare", json!({"names": [""]}));
    assert_eq!(code_, code::INVALID_PARAMS);
    assert!(msg.contains("1 to 256"), "{msg}");
    let (code_, _) = c.call_err("tools.declare", json!({"names": "Bash"}));
    assert_eq!(code_, code::INVALID_PARAMS);
}

/// The lines of `path` a JSON projection shows, as (first, last) per segment.
fn shown_lines(c: &mut Conn, path: &str, budget: u64) -> Vec<(u64, u64)> {
    let p = c.call(
        "projection.get",
        json!({"format": "json", "budget": budget}),
    );
    let entries = p["body"]["entries"].as_array().cloned().unwrap_or_default();
    entries
        .iter()
        .filter(|e| e["path"] == path)
        .flat_map(|e| e["segments"].as_array().cloned().unwrap_or_default())
        .filter_map(|s| {
            let first = s["first_line"].as_u64()?;
            Some((first, first + s["line_count"].as_u64()? - 1))
        })
        .collect()
}

/// What the mount saw before a step (or a command) was recorded is its doing, even while ingest has
/// not applied it yet (it naps between batches): `step.record` waits for it before advancing
/// the turn, so the read is not taken for one of the next turn.
#[test]
fn a_step_counts_what_the_mount_saw_before_it() {
    use std::path::Path;
    use std::time::{Duration, Instant};
    let (sink, rx) = worldfs::observation::ObservationSink::bounded(64);
    let counter = sink.clone();
    let f = Fixture::with(|o| o.emitted = Some(std::sync::Arc::new(move || counter.emitted())));
    let ingest = must(f.world.spawn_ingest(rx));
    let open = worldfs::observation::Op::Open {
        read: true,
        write: false,
        truncate: false,
        created: false,
    };
    let mut c = f.connect();
    // A first read, applied: ingest naps after each batch, so every read below arrives while
    // it naps.
    sink.emit(open.clone(), CAT, || Some("README.md".into()));
    let start = Instant::now();
    while f.world.entry(Path::new("README.md")).is_none() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "ingest never ran"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    for path in ["src/lib.rs", "src/util.rs", "pkg/m01.py", "pkg/m02.py"] {
        let turn = f.world.turn();
        sink.emit(open.clone(), CAT, || Some(path.into()));
        let r = c.call(
            "step.record",
            json!({"tool_use_id": path, "tool_name": "Bash",
                   "input": {"command": format!("cat {path}")}, "result": "..."}),
        );
        assert_eq!(r["turn"], turn + 1);
        let e = f
            .world
            .entry(Path::new(path))
            .unwrap_or_else(|| panic!("{path}: the read was not applied before the step"));
        assert_eq!(e.last_agent_turn, turn, "{path}");
    }
    // a command's place in the stream comes after the reads it made, however its inputs are
    // named (the first read wakes ingest, which naps after it; the second waits in the channel)
    sink.emit(open.clone(), CAT, || Some("pkg/m03.py".into()));
    std::thread::sleep(Duration::from_millis(2));
    sink.emit(open.clone(), CAT, || Some("pkg/m03.py".into()));
    let r = c.call(
        "command.record",
        json!({"command": "python pkg/m03.py", "output": "3\n", "files": ["pkg/m03.py"]}),
    );
    assert_eq!(r["seq"], sink.emitted(), "{r}");
    // the server holds a clone of the sink: ingest ends once both are gone
    drop(f);
    drop(sink);
    must(ingest.join().map_err(|_| "ingest panicked"));
}

#[test]
fn step_record_views_say_where_the_agent_looked_in_a_big_file() {
    let f = Fixture::new();
    let mut c = f.connect();
    // far more than a 2,000-token projection can show whole
    let big: String = (1..=3000)
        .map(|i| format!("line {i} of a big module\n"))
        .collect();
    must(std::fs::write(f.root().join("big.py"), &big));
    // `nl -ba big.py | grep x`, or a Read tool asked for 21 lines: the mount sees it read whole
    f.read("big.py");
    let step = |views: Value| {
        json!({"tool_use_id": "t1", "tool_name": "Read", "input": {"file_path": "big.py"},
               "result": "...", "views": views})
    };
    assert_eq!(shown_lines(&mut c, "big.py", 2000), vec![]);
    let r = c.call(
        "step.record",
        step(json!([{"path": "big.py", "lines": [1200, 1220]}])),
    );
    assert_eq!(r["views_applied"], 1, "{r}");
    // with a margin after it of a quarter of its bytes, to the end of the line: agents page on
    assert_eq!(shown_lines(&mut c, "big.py", 2000), vec![(1200, 1226)]);
    // the next look is shown with it while both fit
    c.call(
        "step.record",
        step(json!([{"path": "big.py", "lines": [40, 45]}])),
    );
    assert_eq!(
        shown_lines(&mut c, "big.py", 2000),
        vec![(40, 47), (1200, 1226)]
    );
    // a file the world does not know is not created by a declaration
    let r = c.call(
        "step.record",
        step(json!([{"path": "src/never_read.rs", "lines": [1, 2]}])),
    );
    assert_eq!(r["views_applied"], 0, "{r}");
    for bad in [
        json!([{"path": "big.py", "lines": [0, 3]}]),
        json!([{"path": "big.py", "lines": [9, 3]}]),
        json!([{"path": "big.py", "lines": [1]}]),
    ] {
        let (code_, msg) = c.call_err("step.record", step(bad.clone()));
        assert_eq!(code_, code::INVALID_PARAMS, "{bad}: {msg}");
    }
    let (code_, msg) = c.call_err(
        "step.record",
        step(json!([{"path": "../outside.py", "lines": [1, 2]}])),
    );
    assert_ne!(code_, 0, "{msg}");
}

#[test]
fn command_output_is_dropped_exactly_when_an_input_changes() {
    let f = Fixture::new();
    let mut c = f.connect();
    f.read("src/util.rs"); // before the command: not an input
    let since = c.call("changes.since", json!({"seq": 0}))["last_seq"]
        .as_u64()
        .unwrap_or(0);
    // The command (run by the agent's shell) reads two files; an indexer scans a third.
    f.read("src/main.rs");
    f.read("src/lib.rs");
    f.read_as(INDEXER, "README.md");
    let r = c.call(
        "command.record",
        json!({"command": "cargo test", "output": "test result: ok", "exit_code": 0,
               "since_seq": since}),
    );
    let inputs: Vec<&str> = r["inputs"]
        .as_array()
        .map(|a| a.iter().filter_map(|i| i["path"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(inputs, vec!["src/lib.rs", "src/main.rs"]);
    assert!(
        r["inputs"][0]["hash"]
            .as_str()
            .is_some_and(|h| h.len() == 64)
    );
    let list = c.call("commands.list", json!({}));
    assert_eq!(list["commands"].as_array().map(Vec::len), Some(1));

    // An unrelated change and a same-bytes rewrite keep it.
    f.write("src/util.rs", "pub fn helper() -> u32 { 7 }\n");
    let same = must(std::fs::read_to_string(f.root().join("src/lib.rs")));
    f.write("src/lib.rs", &same);
    let list = c.call("commands.list", json!({}));
    assert_eq!(list["commands"].as_array().map(Vec::len), Some(1), "{list}");

    // A real change to an input (behind the mount, even) drops it.
    f.external_write("src/main.rs", "fn main() { panic!() }\n");
    let p = c.call("projection.get", json!({"format": "json", "budget": 4000}));
    assert_eq!(
        p["body"]["commands"].as_array().map(Vec::len),
        Some(0),
        "{p}"
    );
    let s = c.call("stats", json!({}));
    assert_eq!(s["drops"]["commands_invalidated"], 1);
}

/// An output that listed a directory (a Python import lists the project) stays while the
/// listing is the same, leaving out empty hidden directories: Codex's sandbox makes an empty
/// `.git`, `.agents` and `.aws` in the project for every command it runs, and removes them
/// after. A new directory, or a hidden one with something in it, drops the output.
#[test]
fn an_empty_ignored_directory_does_not_change_a_listing() {
    let f = Fixture::new();
    let mut c = f.connect();
    let record = |c: &mut Conn| {
        let since = c.call("changes.since", json!({"seq": 0}))["last_seq"]
            .as_u64()
            .unwrap_or(0);
        f.list_dir("");
        f.read("src/main.rs");
        let r = c.call(
            "command.record",
            json!({"command": "python3 -m pytest", "output": "1 passed", "exit_code": 0,
                   "since_seq": since}),
        );
        let inputs: Vec<&str> = r["inputs"]
            .as_array()
            .map(|a| a.iter().filter_map(|i| i["path"].as_str()).collect())
            .unwrap_or_default();
        assert_eq!(inputs, ["", "src/main.rs"], "{r}");
    };
    let created = |path: &str| f.external_create(path);
    let kept = |c: &mut Conn| {
        c.call("commands.list", json!({}))["commands"]
            .as_array()
            .map_or(0, Vec::len)
    };
    record(&mut c);
    for dir in [".agents", ".aws", ".git"] {
        must(std::fs::create_dir(f.root().join(dir)));
        created(dir);
    }
    assert_eq!(kept(&mut c), 1, "the sandbox's empty mount points");
    for dir in [".agents", ".aws", ".git"] {
        must(std::fs::remove_dir(f.root().join(dir)));
    }
    // A directory not hidden, even empty, is part of the listing.
    must(std::fs::create_dir(f.root().join("docs")));
    created("docs");
    assert_eq!(kept(&mut c), 0, "a new directory of the project");
    must(std::fs::remove_dir(f.root().join("docs")));
    record(&mut c);
    must(std::fs::create_dir(f.root().join(".aws")));
    must(std::fs::write(f.root().join(".aws/config"), "[default]\n"));
    created(".aws");
    assert_eq!(kept(&mut c), 0, "a hidden directory with something in it");
}

#[test]
fn command_record_with_explicit_files_and_bad_input() {
    let f = Fixture::new();
    let mut c = f.connect();
    let abs = f.root().join("README.md");
    let r = c.call(
        "command.record",
        json!({"command": "wc -l README.md", "cwd": ".", "output": "3 README.md",
               "files": [abs, "missing.txt"]}),
    );
    assert_eq!(
        r["inputs"][0]["path"], "README.md",
        "absolute under the root is accepted"
    );
    assert_eq!(r["inputs"][1]["hash"], "absent");
    // Creating the missing input invalidates the output.
    std::fs::write(f.root().join("missing.txt"), "now here").unwrap_or_else(|e| panic!("{e}"));
    f.list_dir(""); // any observation triggers a check; the creation itself:
    f.world.ingest([worldfs::observation::Observation {
        seq: 10_000,
        time: std::time::SystemTime::now(),
        op: worldfs::observation::Op::External {
            change: worldfs::observation::ExternalChange::Created,
        },
        path: "missing.txt".into(),
        pid: 0,
        caller: None,
    }]);
    assert_eq!(
        c.call("commands.list", json!({}))["commands"]
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    let (code_, msg) = c.call_err("command.record", json!({"command": "x", "output": ""}));
    assert_eq!(code_, code::INVALID_PARAMS);
    assert!(msg.contains("since_seq"), "{msg}");
    let (code_, _) = c.call_err(
        "command.record",
        json!({"command": "x", "output": "", "files": ["../outside"]}),
    );
    assert_eq!(code_, code::REFUSED);
    let (code_, _) = c.call_err(
        "command.record",
        json!({"command": "x", "output": "", "cwd": "/etc", "files": []}),
    );
    assert_eq!(code_, code::REFUSED);
    let (code_, msg) = c.call_err(
        "command.record",
        json!({"command": "x", "output": "", "files": [], "tool": "no spaces"}),
    );
    assert_eq!(code_, code::INVALID_PARAMS);
    assert!(msg.contains("not a tool name"), "{msg}");
    // A tool's result is listed with its tool.
    c.call(
        "command.record",
        json!({"command": "WebFetch {\"url\":\"https://x\"}", "output": "a page", "files": [],
               "tool": "WebFetch"}),
    );
    let listed = c.call("commands.list", json!({}))["commands"].clone();
    assert_eq!(listed[0]["tool"], "WebFetch", "{listed}");
    // Forget by key.
    c.call(
        "command.record",
        json!({"command": "ls", "cwd": "src", "output": "main.rs", "files": ["src"]}),
    );
    assert_eq!(
        c.call("commands.forget", json!({"command": "ls", "cwd": "src"}))["forgotten"],
        true
    );
}

/// A run reads what the ignore rules leave out besides the sources: `python3` a module's
/// `.pyc`, `cargo test` the libraries in `target/`. Those are never shown, but the output is
/// kept while they are unchanged, and dropped once one is rewritten.
#[test]
fn an_output_that_read_ignored_files_is_kept_until_they_change() {
    let f = Fixture::new();
    must(std::fs::create_dir_all(f.root().join("__pycache__")));
    must(std::fs::write(
        f.root().join("__pycache__/util.pyc"),
        b"\0compiled v1",
    ));
    let mut c = f.connect();
    c.call("command.begin", json!({"key": "run"}));
    f.read("src/main.rs");
    f.read("__pycache__/util.pyc");
    let r = c.call(
        "command.record",
        json!({"command": "python3 run.py", "output": "RESULT 42", "exit_code": 0,
               "begun": "run"}),
    );
    assert_eq!(r["cached"], true, "{r}");
    let inputs: Vec<(String, String)> = r["inputs"]
        .as_array()
        .map(|l| {
            l.iter()
                .map(|i| (i["path"].to_string(), i["hash"].to_string()))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(inputs.len(), 2, "{r}");
    assert!(
        inputs
            .iter()
            .any(|(p, h)| p.contains("util.pyc") && h.starts_with("\"stat:")),
        "an ignored file is known by its size, time and inode: {r}"
    );
    let projection = |c: &mut Conn| c.call("projection.get", json!({"format": "text"}));
    let p = projection(&mut c);
    assert!(
        p["body"].as_str().is_some_and(|b| b.contains("RESULT 42")),
        "{p}"
    );
    assert_eq!(p["stale_dropped_commands"], json!([]), "{p}");
    assert!(
        !p["body"].as_str().is_some_and(|b| b.contains("compiled")),
        "{p}"
    );

    f.write("__pycache__/util.pyc", "\0compiled v2, another size");
    let p = projection(&mut c);
    assert!(
        !p["body"].as_str().is_some_and(|b| b.contains("RESULT 42")),
        "{p}"
    );
    let listed = c.call("commands.list", json!({}));
    assert_eq!(listed["commands"], json!([]), "{listed}");
}

/// A notebook is shown as its cells, as Claude Code's Read shows them: no JSON, no figure data,
/// no line numbers. An output that read it goes out of date when the file changes, also where
/// its cells read the same (a kernel's metadata saved).
#[test]
fn a_notebook_is_shown_as_its_cells_and_its_outputs_follow_the_file() {
    let f = Fixture::new();
    let notebook = |kernel: &str| {
        json!({
            "cells": [
                {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": ["# Sales\n", "By month."]},
                {"cell_type": "code", "id": "plot", "metadata": {}, "execution_count": 1,
                 "source": "df.plot()",
                 "outputs": [{"output_type": "display_data", "metadata": {},
                              "data": {"image/png": "iVBORw0KGgo".repeat(4000),
                                       "text/plain": "<Figure size 640x480>"}}]}
            ],
            "metadata": {"kernelspec": {"name": kernel}}, "nbformat": 4, "nbformat_minor": 5
        })
        .to_string()
    };
    must(std::fs::write(
        f.root().join("sales.ipynb"),
        notebook("python3"),
    ));
    let mut c = f.connect();
    c.call("command.begin", json!({"key": "jq"}));
    f.read("sales.ipynb");
    let r = c.call(
        "command.record",
        json!({"command": "jq .metadata sales.ipynb", "output": "KERNEL python3", "exit_code": 0,
               "begun": "jq"}),
    );
    assert_eq!(r["cached"], true, "{r}");

    let p = c.call("projection.get", json!({"format": "text"}));
    let body = p["body"].as_str().unwrap_or_default();
    assert!(body.contains("## sales.ipynb (notebook cells)\n"), "{body}");
    assert!(
        body.contains("<cell id=\"intro\"><cell_type>markdown</cell_type># Sales\nBy month.</cell id=\"intro\">\n<cell id=\"plot\">df.plot()</cell id=\"plot\">"),
        "{body}"
    );
    assert!(
        body.contains("[image/png output, 32.2 KB: not shown]"),
        "{body}"
    );
    assert!(
        !body.contains("iVBOR") && !body.contains("nbformat"),
        "{body}"
    );
    assert!(body.contains("KERNEL python3"), "{body}");

    let p = c.call(
        "projection.get",
        json!({"format": "anthropic", "tool_name": "Read"}),
    );
    let results: Vec<String> = p["body"]["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .filter(|b| b["type"] == "tool_result")
        .map(|b| b["content"].to_string())
        .filter(|t| t.contains("cell id"))
        .collect();
    assert_eq!(results.len(), 1, "{p}");
    assert!(
        results[0].starts_with("\"<cell id=\\\"intro\\\">"),
        "no line numbers: {}",
        results[0]
    );
    let listed = c.call("entries.read", json!({"path": "sales.ipynb"}));
    assert_eq!(listed["notebook"], true, "{listed}");

    f.external_write("sales.ipynb", &notebook("python3.12"));
    let p = c.call("projection.get", json!({"format": "text"}));
    let body = p["body"].as_str().unwrap_or_default();
    assert!(!body.contains("KERNEL python3"), "{body}");
    assert!(
        body.contains("<cell id=\"plot\">df.plot()</cell id=\"plot\">"),
        "{body}"
    );
}

#[test]
fn command_begin_marks_where_a_command_starts_for_a_later_record() {
    let f = Fixture::new();
    let mut c = f.connect();
    let listed = |c: &mut Conn| {
        c.call("commands.list", json!({}))["commands"]
            .as_array()
            .map(Vec::len)
    };
    f.read("src/util.rs"); // before the command: not an input
    let r = c.call("command.begin", json!({"key": "toolu_1"}));
    assert_eq!(r["key"], "toolu_1", "{r}");
    assert_eq!(c.call("stats", json!({}))["commands_begun"], 1);
    f.read("src/main.rs");
    let r = c.call(
        "command.record",
        json!({"command": "cat src/main.rs", "output": "fn main() {}", "exit_code": 0,
               "begun": "toolu_1", "only_if_tracked": true}),
    );
    assert_eq!(
        (r["cached"].as_bool(), r["scanned"].as_u64()),
        (Some(true), Some(0)),
        "{r}"
    );
    assert_eq!(r["inputs"].as_array().map(Vec::len), Some(1), "{r}");
    assert_eq!(r["inputs"][0]["path"], "src/main.rs");
    assert_eq!(listed(&mut c), Some(1));
    assert_eq!(
        c.call("stats", json!({}))["commands_begun"],
        0,
        "taken by the record"
    );

    // A start is recorded once; an unknown key says what may have happened.
    let (code_, msg) = c.call_err(
        "command.record",
        json!({"command": "x", "output": "", "begun": "toolu_1"}),
    );
    assert_eq!(code_, code::NOT_FOUND, "{msg}");
    assert!(msg.contains("toolu_1"), "{msg}");

    // A whole-tree scanner read files meanwhile: what it read is not an input, so the output
    // depends on the whole tree instead.
    c.call("command.begin", json!({"key": "toolu_2"}));
    f.read("src/lib.rs");
    f.read_as(INDEXER, "README.md");
    let r = c.call(
        "command.record",
        json!({"command": "cat src/lib.rs", "output": "", "begun": "toolu_2",
               "only_if_tracked": true}),
    );
    assert_eq!(
        (&r["cached"], &r["scanned"], &r["subtrees"]),
        (&json!(true), &json!(1), &json!(["."])),
        "{r}"
    );
    assert_eq!(listed(&mut c), Some(2));
    // So a change to a file it never read drops it, and only it.
    f.write("README.md", "# changed\n");
    assert_eq!(listed(&mut c), Some(1), "the change anywhere drops it");
    // Nor when the tree changed while it ran: it may show the tree before or after.
    c.call("command.begin", json!({"key": "toolu_2b"}));
    f.read_as(INDEXER, "README.md");
    f.write("src/util.rs", "// changed\n");
    let r = c.call(
        "command.record",
        json!({"command": "rg util", "output": "", "begun": "toolu_2b", "only_if_tracked": true}),
    );
    assert_eq!(r["cached"], false, "{r}");
    assert!(
        r["why"]
            .as_str()
            .is_some_and(|w| w.contains("src/util.rs changed while it ran")),
        "{r}"
    );
    c.call("command.begin", json!({"key": "toolu_3"}));
    let r = c.call(
        "command.record",
        json!({"command": "echo hi", "output": "hi", "begun": "toolu_3", "only_if_tracked": true}),
    );
    assert_eq!(r["cached"], false, "{r}");
    assert!(
        r["why"].as_str().is_some_and(|w| w.contains("no file")),
        "{r}"
    );
    assert_eq!(listed(&mut c), Some(1), "neither was cached");
    // Without `only_if_tracked`, an output that read nothing is cached all the same.
    c.call("command.begin", json!({"key": "toolu_4"}));
    let r = c.call(
        "command.record",
        json!({"command": "echo hi", "output": "hi", "begun": "toolu_4"}),
    );
    assert_eq!(r["cached"], true, "{r}");
    assert_eq!(listed(&mut c), Some(2));

    // A start whose output will never come (the call failed) is abandoned: it waits no more.
    c.call("command.begin", json!({"key": "toolu_5"}));
    assert_eq!(c.call("stats", json!({}))["commands_begun"], 1);
    let r = c.call("command.abandon", json!({"key": "toolu_5"}));
    assert_eq!(r, json!({"key": "toolu_5", "waiting": true}));
    assert_eq!(c.call("stats", json!({}))["commands_begun"], 0);
    let r = c.call("command.abandon", json!({"key": "toolu_5"}));
    assert_eq!(r["waiting"], false, "abandoned once");
    let (code_, msg) = c.call_err(
        "command.record",
        json!({"command": "x", "output": "", "begun": "toolu_5"}),
    );
    assert_eq!(code_, code::NOT_FOUND, "{msg}");

    for (params, want) in [
        (json!({"key": ""}), "key"),
        (json!({"key": "k".repeat(257)}), "key"),
        (json!({}), "key"),
    ] {
        let (code_, msg) = c.call_err("command.begin", params.clone());
        assert_eq!(code_, code::INVALID_PARAMS, "{params}: {msg}");
        assert!(msg.contains(want), "{msg}");
    }
    let (code_, msg) = c.call_err(
        "command.record",
        json!({"command": "x", "output": "", "begun": "k", "since_seq": 0}),
    );
    assert_eq!(code_, code::INVALID_PARAMS, "{msg}");
    assert!(msg.contains("not both"), "{msg}");
}

#[test]
fn an_output_that_depends_on_a_directory_goes_with_any_change_below_it() {
    let f = Fixture::new();
    let mut c = f.connect();
    let listed = |c: &mut Conn| -> Vec<String> {
        let r = c.call("commands.list", json!({}));
        r["commands"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|c| c["command"].as_str().map(str::to_owned))
            .collect()
    };
    // A search tool's result: which files of `src` it depends on cannot be told.
    let r = c.call(
        "command.record",
        json!({"command": "Glob {\"pattern\":\"*.rs\",\"path\":\"src\"}",
               "output": "src/main.rs\nsrc/lib.rs", "exit_code": 0,
               "subtrees": [f.root().join("src").to_string_lossy()]}),
    );
    assert_eq!(
        (&r["cached"], &r["subtrees"]),
        (&json!(true), &json!(["src"])),
        "{r}"
    );
    let r = c.call(
        "command.record",
        json!({"command": "Grep {\"pattern\":\"demo\"}", "output": "README.md", "subtrees": ["."]}),
    );
    assert_eq!(r["subtrees"], json!(["."]), "{r}");
    let listed_after = c.call("commands.list", json!({}));
    assert_eq!(
        listed_after["commands"][0]["subtrees"],
        json!(["src"]),
        "{listed_after}"
    );
    // Outside `src`: the Glob's is kept, the whole tree's search is not.
    f.write("README.md", "# changed\n");
    assert_eq!(
        listed(&mut c),
        ["Glob {\"pattern\":\"*.rs\",\"path\":\"src\"}"]
    );
    // Below it, a name appearing is a change too.
    f.create("src/new.rs", "");
    assert!(listed(&mut c).is_empty(), "{:?}", listed(&mut c));

    let (code_, msg) = c.call_err(
        "command.record",
        json!({"command": "x", "output": "", "subtrees": ["/etc"]}),
    );
    assert_eq!(code_, code::REFUSED, "{msg}");
    let many: Vec<String> = (0..65).map(|i| format!("d{i}")).collect();
    let (code_, msg) = c.call_err(
        "command.record",
        json!({"command": "x", "output": "", "subtrees": many}),
    );
    assert_eq!(code_, code::INVALID_PARAMS, "{msg}");
}

/// Without a watcher, a change behind the mount below a directory would go unseen: an output
/// that depends on the directory as a whole is not kept. One with file inputs is, since those
/// are checked against the disk at every projection.
#[test]
fn without_a_watcher_an_output_that_depends_on_a_directory_is_not_kept() {
    let f = Fixture::with(|o| o.cache_renders = false);
    let mut c = f.connect();
    let r = c.call(
        "command.record",
        json!({"command": "Grep {\"pattern\":\"demo\"}", "output": "README.md",
               "subtrees": ["."]}),
    );
    assert_eq!(r["cached"], false, "{r}");
    assert!(
        r["why"]
            .as_str()
            .unwrap_or_default()
            .contains("not all watched"),
        "{r}"
    );
    let r = c.call(
        "command.record",
        json!({"command": "cat README.md", "output": "# demo", "files": ["README.md"]}),
    );
    assert_eq!(r["cached"], true, "{r}");
}

/// Once the watcher cannot watch a directory, a change behind the mount may bump nothing: no
/// projection is reused, no search is cached, and `stats` says so.
#[test]
fn a_watcher_that_lost_sight_reuses_nothing() {
    let f = Fixture::new();
    let mut c = f.connect();
    let get = |c: &mut Conn| {
        c.call(
            "projection.get",
            json!({"format": "anthropic", "budget": 4000}),
        );
    };
    get(&mut c);
    get(&mut c);
    let renders = |c: &mut Conn| c.call("stats", json!({}))["renders"].clone();
    assert_eq!(
        renders(&mut c),
        json!({"enabled": true, "rendered": 1, "reused": 1})
    );
    f.lose_sight_of("node_modules");
    get(&mut c);
    get(&mut c);
    assert_eq!(
        renders(&mut c),
        json!({"enabled": false, "rendered": 3, "reused": 1})
    );
    assert_eq!(
        c.call("stats", json!({}))["world"]["unwatched"],
        "node_modules"
    );
    let r = c.call(
        "command.record",
        json!({"command": "Glob {\"pattern\":\"*.rs\"}", "output": "src/lib.rs",
               "subtrees": ["src"]}),
    );
    assert_eq!(r["cached"], false, "{r}");
}

#[test]
fn command_record_reports_lost_history() {
    let f = Fixture::new();
    let mut c = f.connect();
    let cap = f.world.recent().capacity();
    for _ in 0..(cap + 10) {
        f.list_dir("src");
    }
    let (code_, msg) = c.call_err(
        "command.record",
        json!({"command": "x", "output": "", "since_seq": 1}),
    );
    assert_eq!(code_, code::HISTORY_LOST, "{msg}");
    assert!(msg.contains("pass `files`"), "{msg}");
}

#[test]
fn structured_state_set_patch_get() {
    let f = Fixture::new();
    let mut c = f.connect();
    c.call(
        "state.set",
        json!({"intent": "fix bug", "decisions": ["use serde"], "open_loops": ["a", "b"]}),
    );
    let r = c.call(
        "state.patch",
        json!({"decisions": {"add": ["keep API", "use serde"]}, "open_loops": {"remove": ["a"]},
               "ruled_out": ["rewrite"], "intent": null}),
    );
    assert_eq!(
        r["state"],
        json!({"intent": null, "decisions": ["use serde", "keep API"], "constraints": [],
               "open_loops": ["b"], "ruled_out": ["rewrite"], "tasks": []})
    );
    // A failing patch changes nothing.
    let (code_, msg) = c.call_err("state.patch", json!({"constraints": ["x"], "nonsense": 1}));
    assert_eq!(code_, code::INVALID_PARAMS);
    assert!(msg.contains("nonsense"), "{msg}");
    let (code_, _) = c.call_err("state.patch", json!({"decisions": {"add": [1]}}));
    assert_eq!(code_, code::INVALID_PARAMS);
    let got = c.call("state.get", json!({}));
    assert_eq!(got["state"]["constraints"], json!([]));
    let (code_, _) = c.call_err("state.set", json!({"decisions": "not a list"}));
    assert_eq!(code_, code::INVALID_PARAMS);
}

#[test]
fn the_agents_tasks_are_set_edited_by_id_and_projected() {
    let f = Fixture::new();
    let mut c = f.connect();
    c.call(
        "state.patch",
        json!({"tasks": [{"id": "1", "subject": "Reproduce the bug", "status": "completed"},
                         {"id": "2", "subject": "Fix the parser"}]}),
    );
    let r = c.call(
        "state.patch",
        json!({"tasks": {"upsert": [{"id": "2", "status": "in_progress"},
                                    {"id": "3", "subject": "Run the tests"}],
                         "remove": ["1"]}}),
    );
    assert_eq!(
        r["state"]["tasks"],
        json!([{"id": "2", "subject": "Fix the parser", "status": "in_progress"},
               {"id": "3", "subject": "Run the tests", "status": "pending"}])
    );
    let p = c.call("projection.get", json!({"format": "text"}));
    let body = p["body"].as_str().unwrap();
    assert!(
        body.contains("Tasks:\n- [in progress] Fix the parser\n- [to do] Run the tests"),
        "{body}"
    );
    assert!(!body.contains("Reproduce"), "{body}");
    // Errors change nothing: an unknown id without a subject, a bad status, a duplicate id.
    for bad in [
        json!({"tasks": {"upsert": [{"id": "9", "status": "completed"}]}}),
        json!({"tasks": {"upsert": [{"id": "2", "status": "finished"}]}}),
        json!({"tasks": [{"id": "a", "subject": "x"}, {"id": "a", "subject": "y"}]}),
        json!({"tasks": {"add": []}}),
        json!({"tasks": "all"}),
    ] {
        let (code_, msg) = c.call_err("state.patch", bad.clone());
        assert_eq!(code_, code::INVALID_PARAMS, "{bad}: {msg}");
        assert!(msg.contains("tasks"), "{bad}: {msg}");
    }
    let (code_, _) = c.call_err(
        "state.set",
        json!({"tasks": [{"id": "a", "subject": "x"}, {"id": "a", "subject": "y"}]}),
    );
    assert_eq!(code_, code::INVALID_PARAMS);
    assert_eq!(
        c.call("state.get", json!({}))["state"]["tasks"],
        r["state"]["tasks"]
    );
    c.call("state.patch", json!({"tasks": null}));
    assert_eq!(c.call("state.get", json!({}))["state"]["tasks"], json!([]));
}

/// Claude Code runs tool calls in parallel, each with its own hook process: patches that
/// arrive at once must all land, none over a copy of the state taken before another.
#[test]
fn patches_at_the_same_time_all_land() {
    let f = Fixture::new();
    let (threads, each) = (8, 20);
    std::thread::scope(|scope| {
        for t in 0..threads {
            let f = &f;
            scope.spawn(move || {
                let mut c = f.connect();
                for i in 0..each {
                    let id = format!("t{t}-{i}");
                    c.call(
                        "state.patch",
                        json!({"tasks": {"upsert": [{"id": id, "subject": id}]},
                               "decisions": {"add": [id]}}),
                    );
                }
            });
        }
    });
    let mut c = f.connect();
    let state = c.call("state.get", json!({}))["state"].clone();
    let n = |field: &str| state[field].as_array().map_or(0, Vec::len);
    assert_eq!(n("tasks"), threads * each, "{state}");
    assert_eq!(n("decisions"), threads * each, "{state}");
}

#[test]
fn framing_set_patch_get_kept_apart() {
    let f = Fixture::new();
    let mut c = f.connect();
    c.call(
        "framing.set",
        json!({"workspace": "/w", "shell": "bash", "model": "m1", "settings": {"a": 1, "b": 2}}),
    );
    let r = c.call(
        "framing.patch",
        json!({"model": "m2", "shell": null, "settings": {"a": null, "c": true}}),
    );
    assert_eq!(
        r["framing"],
        json!({"workspace": "/w", "shell": null, "date": null, "timezone": null, "model": "m2",
               "settings": {"b": 2, "c": true}})
    );
    assert_eq!(c.call("framing.get", json!({}))["framing"]["model"], "m2");
    let (code_, _) = c.call_err("framing.set", json!({"colour": "red"}));
    assert_eq!(code_, code::INVALID_PARAMS);
    let (code_, _) = c.call_err("framing.patch", json!({"settings": 3}));
    assert_eq!(code_, code::INVALID_PARAMS);
}

#[test]
fn entries_list_read_pin_forget() {
    let f = Fixture::new();
    f.read("src/main.rs");
    f.read("src/lib.rs");
    f.read("README.md");
    f.read(".env");
    let mut c = f.connect();
    let all = c.call("entries.list", json!({}));
    assert_eq!(all["total"], 4);
    let src = c.call(
        "entries.list",
        json!({"prefix": "src", "limit": 1, "offset": 1}),
    );
    assert_eq!(src["total"], 2);
    assert_eq!(src["entries"][0]["path"], "src/main.rs");
    let withheld = c.call("entries.list", json!({"state": "withheld"}));
    assert_eq!(withheld["entries"][0]["path"], ".env");

    let r = c.call("entries.read", json!({"path": "src/main.rs"}));
    assert!(
        r["content"]
            .as_str()
            .is_some_and(|s| s.contains("println!"))
    );
    assert!(r["tokens"].as_u64().is_some_and(|t| t > 3));
    assert_eq!(r["entry"]["state"], "live");
    // Tokens are known now, so the listing shows them.
    let again = c.call("entries.list", json!({"prefix": "src/main.rs"}));
    assert!(again["entries"][0]["tokens"].as_u64().is_some());
    // A file the world has no entry for can still be read (current content), entry null.
    let r = c.call("entries.read", json!({"path": "src/util.rs"}));
    assert_eq!(r["entry"], Value::Null);

    c.call("entries.pin", json!({"path": "README.md"}));
    assert_eq!(
        f.world
            .entry(std::path::Path::new("README.md"))
            .map(|e| e.pinned),
        Some(true)
    );
    c.call("entries.unpin", json!({"path": "./README.md"}));
    assert_eq!(
        f.world
            .entry(std::path::Path::new("README.md"))
            .map(|e| e.pinned),
        Some(false)
    );
    let (code_, _) = c.call_err("entries.pin", json!({"path": "nope.txt"}));
    assert_eq!(code_, code::NOT_FOUND);
    assert_eq!(
        c.call("entries.forget", json!({"path": "README.md"}))["forgotten"],
        true
    );
    assert_eq!(
        c.call("entries.forget", json!({"path": "README.md"}))["forgotten"],
        false
    );
}

/// A forget or a pin is seen by the next projection, also where nothing else changed and the
/// last render would be reused.
#[test]
fn forget_and_pin_reach_the_next_projection() {
    let f = Fixture::new();
    let mut c = f.connect();
    f.read("src/util.rs");
    f.read("README.md");
    let pinned = |c: &mut Conn| -> Vec<(String, bool)> {
        let p = c.call("projection.get", json!({"format": "json"}));
        p["body"]["entries"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|e| {
                (
                    e["path"].as_str().unwrap_or_default().to_owned(),
                    e["pinned"] == true,
                )
            })
            .collect()
    };
    let readme = |v: &[(String, bool)]| v.iter().find(|(p, _)| p == "README.md").map(|e| e.1);
    assert_eq!(readme(&pinned(&mut c)), Some(false));
    c.call("entries.pin", json!({"path": "README.md"}));
    assert_eq!(readme(&pinned(&mut c)), Some(true));
    assert_eq!(
        c.call("entries.forget", json!({"path": "README.md"}))["forgotten"],
        true
    );
    assert_eq!(readme(&pinned(&mut c)), None, "forgotten");
}

/// `entries.refused`: a file the agent's tool opened and refused to show is forgotten, unless a
/// step showed it before (a Read the hook told of).
#[test]
fn a_refused_read_forgets_only_what_no_step_showed() {
    let f = Fixture::new();
    let mut c = f.connect();
    f.read("src/lib.rs");
    f.read("src/util.rs");
    c.call(
        "step.record",
        json!({"tool_use_id": "toolu_1", "tool_name": "Read", "session": "s1",
               "input": {"file_path": "src/util.rs"}, "result": "1\tpub fn helper() -> u32 {",
               "views": [{"path": "src/util.rs"}]}),
    );
    let r = c.call("entries.refused", json!({"path": "src/lib.rs"}));
    assert_eq!(r["forgotten"], true, "{r}");
    let r = c.call("entries.refused", json!({"path": "src/util.rs"}));
    assert_eq!(r["forgotten"], false, "{r}");
    let p = c.call("projection.get", json!({"format": "text"}));
    let body = p["body"].as_str().unwrap_or_default();
    assert!(
        !body.contains("## src/lib.rs") && body.contains("## src/util.rs"),
        "{body}"
    );
}

/// A forget applied before a read the mount had already answered would be undone by that read:
/// the forget waits for the world, longer than the other methods do, and says so if it cannot.
#[test]
fn forget_waits_for_what_the_mount_saw_before_it() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let emitted = Arc::new(AtomicU64::new(0));
    let e = Arc::clone(&emitted);
    let f = Fixture::with(move |o| o.emitted = Some(Arc::new(move || e.load(Ordering::SeqCst))));
    let listed = |c: &mut Conn, path: &str| {
        c.call("entries.list", json!({}))["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .any(|e| e["path"] == path)
    };
    f.read("README.md");
    // The mount answered one more read of it, which the world has not applied yet.
    emitted.store(f.last_seq() + 1, Ordering::SeqCst);
    let sock = f.sock.clone();
    let forget = std::thread::spawn(move || {
        Conn::open(&sock).call("entries.forget", json!({"path": "README.md"}))
    });
    // Longer than the 250 ms the other methods wait.
    std::thread::sleep(std::time::Duration::from_millis(800));
    f.read("README.md");
    let r = forget.join().expect("the forget call");
    assert_eq!(r["forgotten"], true, "{r}");
    let mut c = f.connect();
    assert!(
        !listed(&mut c, "README.md"),
        "the read before the forget brought it back"
    );

    // A world that does not catch up: nothing is forgotten, and the error says why.
    f.read("src/main.rs");
    emitted.store(f.last_seq() + 1, Ordering::SeqCst);
    let (code_, msg) = c.call_err("entries.forget", json!({"path": "src/main.rs"}));
    assert_eq!(code_, code::UNAVAILABLE, "{msg}");
    assert!(msg.contains("nothing was forgotten"), "{msg}");
    assert!(listed(&mut c, "src/main.rs"));
}

#[test]
fn paths_escaping_the_root_are_refused() {
    let f = Fixture::new();
    let outside = must(tempfile::tempdir());
    std::fs::write(outside.path().join("secret"), "x").unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(outside.path().join("secret"), f.root().join("link"))
        .unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(outside.path(), f.root().join("linkdir"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut c = f.connect();
    for p in [
        "../etc/passwd",
        "src/../../x",
        "/etc/passwd",
        "link",
        "linkdir/secret",
        ".env",
        "a\u{0}b",
    ] {
        let (code_, msg) = c.call_err("entries.read", json!({ "path": p }));
        assert_eq!(code_, code::REFUSED, "{p}: {msg}");
    }
    let (code_, _) = c.call_err("entries.read", json!({"path": "does/not/exist"}));
    assert_eq!(code_, code::NOT_FOUND);
    let (code_, _) = c.call_err("entries.read", json!({"path": 42}));
    assert_eq!(code_, code::INVALID_PARAMS);
    // Absolute paths inside the root are fine.
    let abs = f.root().join("src/lib.rs");
    c.call("entries.read", json!({ "path": abs }));
}

#[test]
fn changes_since_filters_and_pages() {
    let f = Fixture::new();
    f.read("src/main.rs");
    f.read_as(INDEXER, "README.md");
    f.write("src/lib.rs", "pub fn add() {}\n");
    let mut c = f.connect();
    let all = c.call("changes.since", json!({"seq": 0}));
    let obs = all["observations"].as_array().cloned().unwrap_or_default();
    assert_eq!(obs.len(), 4);
    assert_eq!(all["complete"], true);
    assert_eq!(all["last_seq"], 4);
    assert_eq!(obs[0]["op"], "open");
    assert_eq!(obs[0]["path"], "src/main.rs");
    assert_eq!(obs[0]["class"], "agent");
    assert_eq!(obs[0]["comm"], "cat");
    assert_eq!(obs[1]["class"], "scan");
    let after = c.call("changes.since", json!({"seq": 2}));
    assert_eq!(after["observations"].as_array().map(Vec::len), Some(2));
    let agent = c.call("changes.since", json!({"classes": ["scan"]}));
    assert_eq!(agent["observations"].as_array().map(Vec::len), Some(1));
    let page = c.call("changes.since", json!({"limit": 1}));
    assert_eq!(page["truncated"], true);
    let pre = c.call("changes.since", json!({"prefix": "src"}));
    assert_eq!(pre["observations"].as_array().map(Vec::len), Some(3));
    let (code_, _) = c.call_err("changes.since", json!({"seq": "x"}));
    assert_eq!(code_, code::INVALID_PARAMS);
    let (code_, _) = c.call_err("changes.since", json!({"limit": 1_000_000}));
    assert_eq!(code_, code::INVALID_PARAMS);
}

#[test]
fn subscriptions_push_notifications_and_unsubscribe() {
    let f = Fixture::new();
    let mut c = f.connect();
    let r = c.call("observations.subscribe", json!({"prefix": "src"}));
    let id = r["subscription"].clone();
    f.read("README.md"); // filtered out
    f.read("src/main.rs");
    let n = c.read_value();
    assert_eq!(n["method"], "observations");
    assert_eq!(n["params"]["subscription"], id);
    assert_eq!(n["params"]["dropped"], 0);
    let paths: Vec<&str> = n["params"]["observations"]
        .as_array()
        .map(|a| a.iter().filter_map(|o| o["path"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(paths, vec!["src/main.rs"]);
    // Requests keep working next to notifications.
    c.call("stats", json!({}));
    let mut other = f.connect();
    let (code_, _) = other.call_err("observations.unsubscribe", json!({"subscription": id}));
    assert_eq!(code_, code::NOT_FOUND, "only the owner may cancel");
    c.call("observations.unsubscribe", json!({"subscription": id}));
    f.read("src/lib.rs");
    // No notification arrives for it: the next message is the response.
    let r = c.call_raw("goal.get", json!({}));
    assert!(r.get("result").is_some(), "{r}");
}

/// Each projection served is told to the subscribers of projections: what it cost and what it
/// left out, for which conversation, without its body; so are the model calls a proxy reports
/// and the steps recorded; and nothing once they unsubscribe.
#[test]
fn projections_served_are_told_to_their_subscribers() {
    let f = Fixture::new();
    f.read("src/main.rs");
    f.read("README.md");
    let mut watcher = f.connect();
    let r = watcher.call("projections.subscribe", json!({}));
    assert_eq!(r["notification"], "projections");
    let id = r["subscription"].clone();
    let mut c = f.connect();
    // Room for one of the two files at most.
    let p = c.call("projection.get", json!({"budget": 40, "session": "s-1"}));
    let n = watcher.read_value();
    assert_eq!(n["method"], "projections");
    assert_eq!(n["params"]["subscription"], id);
    assert_eq!(n["params"]["dropped"], 0);
    let e = &n["params"]["projection"];
    assert!(p["evicted_total"].as_u64().unwrap_or(0) >= 1, "{p}");
    for key in [
        "tokens",
        "budget",
        "policy",
        "format",
        "entries",
        "evicted_total",
        "evicted",
    ] {
        assert_eq!(e[key], p[key], "{key}: {e}");
    }
    assert_eq!(e["session"], "s-1");
    assert!(e.get("body").is_none(), "{e}");
    assert!(e["time_ms"].as_u64().unwrap_or(0) > 0, "{e}");
    // `stats` says the same of the last projection served (what `worldfs status` shows).
    assert_eq!(&c.call("stats", json!({}))["last_projection"], e);
    // A proxy's account of the model call goes to the same subscribers.
    c.call(
        "proxy.record",
        json!({"history_tokens": 900, "sent_tokens": 300, "rewritten": true}),
    );
    let n = watcher.read_value();
    assert_eq!(n["method"], "model_calls");
    assert_eq!(n["params"]["subscription"], id);
    let call = &n["params"]["call"];
    assert_eq!(
        (
            &call["history_tokens"],
            &call["sent_tokens"],
            &call["rewritten"]
        ),
        (&json!(900), &json!(300), &json!(true)),
        "{call}"
    );
    // And each step recorded, its input's long strings cut (a Write's content).
    let content = "x".repeat(5000);
    c.call(
        "step.record",
        json!({"tool_use_id": "t1", "tool_name": "Write", "session": "s-1",
               "input": {"file_path": "notes.md", "content": content}, "result": "ok"}),
    );
    let n = watcher.read_value();
    assert_eq!(n["method"], "steps");
    let step = &n["params"]["step"];
    assert_eq!(
        (&step["tool_name"], &step["session"]),
        (&json!("Write"), &json!("s-1"))
    );
    assert_eq!(step["input"]["file_path"], "notes.md");
    let told = step["input"]["content"].as_str().unwrap_or_default();
    assert!(told.ends_with('…') && told.chars().count() == 201, "{told}");
    // Observations are not sent to it.
    f.read("src/lib.rs");
    watcher.call("projections.unsubscribe", json!({"subscription": id}));
    c.call("projection.get", json!({"budget": 2000}));
    let r = watcher.call_raw("goal.get", json!({}));
    assert!(r.get("result").is_some(), "nothing but the response: {r}");
}

#[test]
fn stats_reports_entries_latency_and_drops() {
    let f = Fixture::new();
    f.read("src/main.rs");
    let mut c = f.connect();
    for _ in 0..5 {
        c.call("projection.get", json!({"budget": 2000}));
    }
    let s = c.call("stats", json!({}));
    assert_eq!(s["entries"]["live"], 1);
    assert_eq!(s["latency"]["projection.get"]["count"], 5);
    assert!(s["latency"]["all"]["p50_us"].as_u64().is_some());
    assert_eq!(s["tokens"]["projections"], 5);
    assert!(s["drops"].is_object());
    assert_eq!(s["connections"]["open"], 1);
    assert_eq!(s["root"]["socket"], json!(f.sock));
}

#[test]
fn batches_notifications_and_missing_jsonrpc() {
    let f = Fixture::new();
    let mut c = f.connect();
    // No "jsonrpc" member: accepted.
    c.send_raw(b"{\"id\":1,\"method\":\"goal.get\"}\n");
    assert!(c.read_value()["result"].is_object());
    // A notification (no id) is applied and not answered.
    c.send_raw(b"{\"method\":\"goal.set\",\"params\":{\"goal\":\"quiet\"}}\n");
    // A mixed batch: answers for the requests with ids, in order, errors inline.
    c.send_raw(
        br#"[{"id":"a","method":"goal.get"},{"method":"goal.set","params":{"goal":"x"}},5,{"id":"c","method":"nope"}]
"#,
    );
    let b = c.read_value();
    let arr = b.as_array().cloned().unwrap_or_default();
    assert_eq!(arr.len(), 3, "{b}");
    assert_eq!(arr[0]["id"], "a");
    assert_eq!(arr[0]["result"]["goal"], "quiet");
    assert_eq!(arr[1]["error"]["code"], code::INVALID_REQUEST);
    assert_eq!(arr[2]["error"]["code"], code::METHOD_NOT_FOUND);
    // A batch of notifications only: no answer at all; the next answer is for the next request.
    c.send_raw(b"[{\"method\":\"goal.set\",\"params\":{\"goal\":\"y\"}}]\n");
    c.send_raw(b"{\"id\":2,\"method\":\"goal.get\"}\n");
    let r = c.read_value();
    assert_eq!(r["id"], 2);
    assert_eq!(r["result"]["goal"], "y");
    // Blank lines and CRLF are tolerated.
    c.send_raw(b"\n\r\n{\"id\":3,\"method\":\"goal.get\"}\r\n");
    assert_eq!(c.read_value()["id"], 3);
}

/// A step that printed a file the projection shows points at it; `step_output: verbatim` asks
/// for the result as recorded; an unknown value is a clear error.
#[test]
fn step_output_is_chosen_per_request() {
    let f = Fixture::new();
    let mut c = f.connect();
    let text: String = (1..=30)
        .map(|i| format!("    total_{i} = accumulate(values[{i}], weight={i})\n"))
        .collect();
    must(std::fs::write(f.root().join("calc.py"), &text));
    f.read("calc.py");
    c.call(
        "step.record",
        json!({"tool_use_id": "t1", "tool_name": "Bash", "input": {"command": "cat calc.py"},
               "result": text}),
    );
    let last_result = |p: &Value| {
        p["body"]["messages"]
            .as_array()
            .and_then(|m| m.last())
            .map(|m| m["content"][0]["content"].clone())
            .unwrap_or(Value::Null)
    };
    let p = c.call(
        "projection.get",
        json!({"format": "anthropic", "budget": 8000}),
    );
    assert_eq!(
        last_result(&p),
        json!("[lines 1-30 of calc.py: not repeated, shown above as they are now]\n")
    );
    let p = c.call(
        "projection.get",
        json!({"format": "anthropic", "budget": 8000, "step_output": "verbatim"}),
    );
    assert_eq!(last_result(&p), json!(text));
    let (code_, msg) = c.call_err(
        "projection.get",
        json!({"format": "anthropic", "step_output": "sometimes"}),
    );
    assert_eq!(code_, code::INVALID_PARAMS, "{msg}");
}

/// A client whose request shows some tool calls with their results (its real last turn) names
/// them: the last step is left out when it is one of them, and shown when it is not (Codex runs
/// `apply_patch` itself, so the step before it is not in its last turn).
#[test]
fn the_last_step_is_shown_unless_the_request_shows_it() {
    let f = Fixture::new();
    let mut c = f.connect();
    c.call(
        "step.record",
        json!({"tool_use_id": "call_7", "tool_name": "Bash",
               "input": {"command": "python3 check.py"}, "result": "Exit code 2\nno docstring"}),
    );
    let shows_step = |c: &mut Conn, extra: Value| {
        let mut params = json!({"format": "text", "budget": 8000});
        for (k, v) in extra.as_object().into_iter().flatten() {
            params[k] = v.clone();
        }
        let p = c.call("projection.get", params);
        p["body"]
            .as_str()
            .unwrap_or_default()
            .contains("# Last step")
    };
    assert!(shows_step(&mut c, json!({})));
    assert!(!shows_step(&mut c, json!({"shown_calls": ["call_7"]})));
    assert!(shows_step(
        &mut c,
        json!({"shown_calls": ["call_8", "call_9"]})
    ));
    assert!(!shows_step(
        &mut c,
        json!({"last_step": false, "shown_calls": ["call_8"]})
    ));
    let (code_, msg) = c.call_err(
        "projection.get",
        json!({"format": "text", "shown_calls": [""]}),
    );
    assert_eq!(code_, code::INVALID_PARAMS, "{msg}");
}
