//! `worldfs hook` through a real mount: Claude Code's events as it passes them on stdin set the
//! goal and record the last step; without a mount, or with garbage, it stays silent and exits 0.

mod common;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use worldfs::socket::Client;

use common::Mount;

fn goal(c: &mut Client) -> Value {
    c.call("goal.get", json!({})).expect("goal.get")["goal"].clone()
}

fn turn(c: &mut Client) -> u64 {
    let s = c.call("stats", json!({})).expect("stats");
    s["world"]["turn"].as_u64().unwrap_or(0)
}

#[test]
fn claude_code_events_set_the_goal_and_the_last_step() {
    let text: String = (1..=40).map(|i| format!("line {i} of calc\n")).collect();
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::write(src.join("calc.py"), &text).expect("write");
    });
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let root = m.root.clone();
    let cwd = root.to_string_lossy().into_owned();
    let event = |v: Value| {
        let mut v = v;
        v["session_id"] = "s1".into();
        v["cwd"] = cwd.clone().into();
        v.to_string()
    };

    c.call("goal.set", json!({"goal": "an old session's task"}))
        .expect("goal.set");
    common::hook(
        Path::new("/"),
        &event(json!({"hook_event_name": "SessionStart", "source": "startup"})),
    );
    assert_eq!(goal(&mut c), Value::Null, "a new session clears the goal");
    common::hook(
        Path::new("/"),
        &event(json!({"hook_event_name": "UserPromptSubmit", "prompt": "Fix the rounding bug"})),
    );
    assert_eq!(goal(&mut c), "Fix the rounding bug");

    // Claude Code's Read runs in its own process; here a read of the file through the mount.
    let shown: String = text
        .lines()
        .skip(9)
        .take(3)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::read(root.join("calc.py")).expect("read through the mount");
    let file_path = root.join("calc.py").to_string_lossy().into_owned();
    let before = turn(&mut c);
    common::hook(
        Path::new("/"),
        &event(json!({
            "hook_event_name": "PostToolUse",
            "tool_name": "Read",
            "tool_use_id": "toolu_hooktest_read",
            "tool_input": {"file_path": file_path, "offset": 10, "limit": 3},
            "tool_response": {"type": "text", "file": {"filePath": file_path, "content": shown,
                              "numLines": 3, "startLine": 10, "totalLines": 40}},
        })),
    );
    assert_eq!(turn(&mut c), before + 1, "the step advanced the turn");
    let p = c
        .call(
            "projection.get",
            json!({"format": "anthropic", "budget": 8000, "step_output": "verbatim"}),
        )
        .expect("projection");
    let body = p["body"].to_string();
    assert!(body.contains("toolu_hooktest_read"), "{body}");
    assert!(body.contains("10\\tline 10 of calc"), "{body}");

    // A Read of a file outside the mount: the daemon refuses the view, the step still counts.
    common::hook(
        Path::new("/"),
        &event(json!({
            "hook_event_name": "PostToolUse",
            "tool_name": "Read",
            "tool_use_id": "toolu_hooktest_outside",
            "tool_input": {"file_path": "/etc/hostname"},
            "tool_response": {"file": {"filePath": "/etc/hostname", "content": "box\n",
                              "numLines": 1, "startLine": 1, "totalLines": 1}},
        })),
    );
    assert_eq!(turn(&mut c), before + 2);

    common::hook(
        Path::new("/"),
        &event(json!({"hook_event_name": "UserPromptSubmit", "prompt": "and add a test"})),
    );
    assert_eq!(
        goal(&mut c),
        "Fix the rounding bug\n\nThen the user asked:\nand add a test"
    );
}

#[test]
fn without_a_mount_or_with_garbage_the_hook_stays_out_of_the_way() {
    let (_tmp, dir) = common::tempdir();
    let prompt = json!({"hook_event_name": "UserPromptSubmit", "prompt": "x",
                        "cwd": dir.to_string_lossy()});
    for stdin in [prompt.to_string(), "not json".into(), String::new()] {
        let out = common::hook(&dir, &stdin);
        assert!(out.stderr.is_empty(), "{out:?}");
    }
}
