//! `worldfs hook` through a real mount: Claude Code's events as it passes them on stdin set the
//! goal and record the last step; without a mount, or with garbage, it stays silent and exits 0.

mod common;

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use worldfs::claude_hook::LATER_PROMPT;
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

/// What the projection's state says of the agent's tasks, line by line.
fn task_lines(c: &mut Client) -> Vec<String> {
    let p = c
        .call("projection.get", json!({"format": "text", "budget": 8000}))
        .expect("projection");
    let body = p["body"].as_str().unwrap_or_default().to_owned();
    body.split_once("Tasks:\n")
        .map(|(_, rest)| {
            rest.lines()
                .take_while(|l| l.starts_with("- ["))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Runs the hook on `ev`, an event of `session` in the project at `cwd`.
fn tell_as(cwd: &str, session: &str, ev: Value) {
    let mut ev = ev;
    ev["session_id"] = session.into();
    ev["cwd"] = cwd.into();
    common::hook(Path::new("/"), &ev.to_string());
}

/// Runs the hook on a Codex event of session `s1` in turn `turn`, whose rollout is at
/// `rollout`: of the call `(tool, id, command)`, with `response` when it has ended, or of no
/// call (`Stop`).
fn tell_codex(
    cwd: &str,
    rollout: &Path,
    name: &str,
    turn: &str,
    call: Option<(&str, &str, &str)>,
    response: Option<&str>,
) {
    let mut ev = json!({"hook_event_name": name, "turn_id": turn, "model": "gpt-5-codex",
                        "transcript_path": rollout.to_string_lossy()});
    if let Some((tool, id, command)) = call {
        ev["tool_name"] = tool.into();
        ev["tool_use_id"] = id.into();
        ev["tool_input"] = json!({ "command": command });
    }
    if let Some(r) = response {
        ev["tool_response"] = r.into();
    }
    tell_as(cwd, "s1", ev);
}

/// A session starts in the project at `cwd`, and its user types `prompt`.
fn start_as(cwd: &str, session: &str, prompt: &str) {
    tell_as(
        cwd,
        session,
        json!({"hook_event_name": "SessionStart", "source": "startup"}),
    );
    tell_as(
        cwd,
        session,
        json!({"hook_event_name": "UserPromptSubmit", "prompt": prompt}),
    );
}

/// A mount holding `calc.py` (`x = 1`), a client of its socket, and its root as a hook
/// event's `cwd`.
fn calc_mount() -> (Mount, Client, String) {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::write(src.join("calc.py"), "x = 1\n").expect("write");
    });
    let c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let cwd = m.root.to_string_lossy().into_owned();
    (m, c, cwd)
}

#[test]
fn the_agents_task_list_is_carried_by_the_projection() {
    let (_m, mut c, cwd) = calc_mount();
    let mut n = 0;
    let mut post = |tool: &str, input: Value, response: Value| {
        n += 1;
        let ev = json!({"hook_event_name": "PostToolUse", "session_id": "s1", "cwd": cwd,
                        "tool_name": tool, "tool_use_id": format!("toolu_tasks_{n}"),
                        "tool_input": input, "tool_response": response});
        common::hook(Path::new("/"), &ev.to_string());
    };

    // Claude Code 2.1.142 and later: one task per call, by id.
    post(
        "TaskCreate",
        json!({"subject": "Reproduce the bug", "description": "run calc.py"}),
        json!({"task": {"id": "1", "subject": "Reproduce the bug"}}),
    );
    post(
        "TaskCreate",
        json!({"subject": "Fix the rounding", "description": "in calc.py"}),
        json!({"task": {"id": "2", "subject": "Fix the rounding"}}),
    );
    post(
        "TaskUpdate",
        json!({"taskId": "1", "status": "completed"}),
        json!({"success": true, "taskId": "1"}),
    );
    post(
        "TaskUpdate",
        json!({"taskId": "2", "status": "in_progress"}),
        json!({"success": true, "taskId": "2"}),
    );
    assert_eq!(
        task_lines(&mut c),
        [
            "- [done] Reproduce the bug",
            "- [in progress] Fix the rounding"
        ]
    );
    post(
        "TaskUpdate",
        json!({"taskId": "1", "status": "deleted"}),
        json!({"success": true, "taskId": "1"}),
    );
    assert_eq!(task_lines(&mut c), ["- [in progress] Fix the rounding"]);

    // A subagent: its calls are not the session's steps, but the Task list is shared.
    let sub = |tool: &str, id: &str, input: Value, response: Value| {
        let ev = json!({"hook_event_name": "PostToolUse", "session_id": "s1", "cwd": cwd,
                        "agent_id": "sub1", "agent_type": "general-purpose",
                        "tool_name": tool, "tool_use_id": id,
                        "tool_input": input, "tool_response": response});
        common::hook(Path::new("/"), &ev.to_string());
    };
    let before = turn(&mut c);
    sub(
        "Bash",
        "toolu_sub_bash",
        json!({"command": "cat calc.py"}),
        json!({"stdout": "x = 1\n", "stderr": "", "interrupted": false}),
    );
    sub(
        "TaskCreate",
        "toolu_sub_create",
        json!({"subject": "Check the docs"}),
        json!({"task": {"id": "3", "subject": "Check the docs"}}),
    );
    assert_eq!(turn(&mut c), before, "a subagent's call is not a step");
    assert_eq!(
        task_lines(&mut c),
        [
            "- [in progress] Fix the rounding",
            "- [to do] Check the docs"
        ]
    );

    // Older versions: TodoWrite rewrites the whole list.
    post(
        "TodoWrite",
        json!({"todos": [
            {"content": "Fix the rounding", "status": "completed", "activeForm": "Fixing"},
            {"content": "Add a test", "status": "pending", "activeForm": "Adding a test"},
        ]}),
        json!({"oldTodos": [], "newTodos": []}),
    );
    assert_eq!(
        task_lines(&mut c),
        ["- [done] Fix the rounding", "- [to do] Add a test"]
    );

    // A new conversation starts without the old one's plan.
    let start = json!({"hook_event_name": "SessionStart", "source": "clear", "cwd": cwd});
    common::hook(Path::new("/"), &start.to_string());
    assert!(task_lines(&mut c).is_empty());
    assert_eq!(
        c.call("state.get", json!({})).expect("state")["state"]["tasks"],
        json!([])
    );
}

/// Two Claude Code sessions in one project (two terminals): the second one's start and
/// prompts leave the first one's goal and task list alone.
#[test]
fn two_sessions_keep_their_own_goals_and_task_lists() {
    let (_m, mut c, cwd) = calc_mount();
    let tell = |session: &str, ev: Value| tell_as(&cwd, session, ev);
    let goal_of = |c: &mut Client, session: &str| {
        c.call("goal.get", json!({ "session": session }))
            .expect("goal.get")["goal"]
            .clone()
    };
    let start = |session: &str, prompt: &str| start_as(&cwd, session, prompt);
    start("s1", "Fix the rounding bug");
    tell(
        "s1",
        json!({"hook_event_name": "PostToolUse", "tool_name": "TaskCreate",
               "tool_use_id": "toolu_s1_task", "tool_input": {"subject": "Reproduce it"},
               "tool_response": {"task": {"id": "1", "subject": "Reproduce it"}}}),
    );
    start("s2", "What does calc.py do?");
    assert_eq!(goal_of(&mut c, "s1"), "Fix the rounding bug");
    assert_eq!(goal_of(&mut c, "s2"), "What does calc.py do?");
    tell(
        "s1",
        json!({"hook_event_name": "UserPromptSubmit", "prompt": "and add a test"}),
    );
    assert_eq!(
        goal_of(&mut c, "s1"),
        "Fix the rounding bug\n\nThen the user asked:\nand add a test"
    );
    assert_eq!(goal_of(&mut c, "s2"), "What does calc.py do?");
    let tasks = |c: &mut Client, session: &str| {
        c.call("state.get", json!({ "session": session }))
            .expect("state.get")["state"]["tasks"]
            .clone()
    };
    assert_eq!(tasks(&mut c, "s1")[0]["subject"], "Reproduce it");
    assert_eq!(tasks(&mut c, "s2"), json!([]));
}

/// Two sessions on one mount each see the files their own tool calls touched, and the files
/// no session's call named (the user's `cat` in a terminal), but not the files only the other
/// session's calls touched: its model never saw them.
#[test]
fn two_sessions_each_see_their_own_files() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::write(src.join("alpha.py"), "def alpha():\n    return 1\n").expect("write");
        std::fs::write(src.join("beta.py"), "def beta():\n    return 2\n").expect("write");
        std::fs::write(src.join("gamma.py"), "def gamma():\n    return 3\n").expect("write");
        std::fs::write(src.join("delta.py"), "def delta():\n    return 4\n").expect("write");
        std::fs::write(src.join("notes.md"), "shared notes\n").expect("write");
    });
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let root = m.root.clone();
    let cwd = root.to_string_lossy().into_owned();
    let tell = |session: &str, ev: Value| tell_as(&cwd, session, ev);
    start_as(&cwd, "s1", "Tidy the code");
    start_as(&cwd, "s2", "Explain the code");
    // A Read: Claude Code reads the file through the mount, then its hook runs.
    let read = |session: &str, name: &str| {
        let content = run(&root, "cat", &[name]);
        let file_path = root.join(name).to_string_lossy().into_owned();
        tell(
            session,
            json!({"hook_event_name": "PostToolUse", "tool_name": "Read",
                   "tool_use_id": format!("toolu_{session}_{name}"),
                   "tool_input": {"file_path": file_path},
                   "tool_response": {"type": "text", "file": {"filePath": file_path,
                       "content": content, "numLines": 2, "startLine": 1, "totalLines": 2}}}),
        );
    };
    read("s1", "alpha.py");
    read("s2", "beta.py");
    read("s2", "delta.py");
    // s2 rewrites gamma.py with its Write tool.
    std::fs::write(root.join("gamma.py"), "def gamma():\n    return 33\n").expect("write");
    let gamma = root.join("gamma.py").to_string_lossy().into_owned();
    tell(
        "s2",
        json!({"hook_event_name": "PostToolUse", "tool_name": "Write",
               "tool_use_id": "toolu_s2_write",
               "tool_input": {"file_path": gamma, "content": "def gamma():\n    return 33\n"},
               "tool_response": {"type": "update", "filePath": gamma}}),
    );
    // The user reads the notes in a terminal: no session's call.
    run(&root, "cat", &["notes.md"]);
    let shown = |c: &mut Client, session: &str| {
        c.call(
            "projection.get",
            json!({"format": "text", "budget": 8000, "session": session}),
        )
        .expect("projection.get")["body"]
            .to_string()
    };
    let s1 = shown(&mut c, "s1");
    assert!(
        s1.contains("def alpha") && s1.contains("shared notes"),
        "{s1}"
    );
    assert!(
        !s1.contains("def beta") && !s1.contains("def gamma") && !s1.contains("def delta"),
        "{s1}"
    );
    let s2 = shown(&mut c, "s2");
    assert!(s2.contains("def beta") && s2.contains("return 33"), "{s2}");
    assert!(
        s2.contains("shared notes") && !s2.contains("def alpha"),
        "{s2}"
    );

    // What a session's Bash command reads or writes is its own too.
    let command = "cat beta.py && echo made by s1 > made.txt";
    let bash = |name: &str| {
        json!({"hook_event_name": name, "tool_name": "Bash", "tool_use_id": "toolu_s1_cat",
               "tool_input": {"command": command, "description": "show it"}})
    };
    tell("s1", bash("PreToolUse"));
    let printed = run(&root, "sh", &["-c", command]);
    let mut done = bash("PostToolUse");
    done["tool_response"] = json!({"stdout": printed, "stderr": "", "interrupted": false});
    tell("s1", done);
    let s1 = shown(&mut c, "s1");
    assert!(s1.contains("def beta") && s1.contains("made by s1"), "{s1}");
    assert!(!s1.contains("def gamma"), "{s1}");
    let s2 = shown(&mut c, "s2");
    assert!(!s2.contains("made by s1"), "{s2}");

    // A command that only runs through a file (an interpreter importing it, as a test run
    // imports every module) does not make it the session's: s1's model saw the output, not
    // delta.py, which stays s2's.
    let command = "PYTHONDONTWRITEBYTECODE=1 python3 -c 'import delta; print(delta.delta() + 1)'";
    let run_it = |name: &str| {
        json!({"hook_event_name": name, "tool_name": "Bash", "tool_use_id": "toolu_s1_py",
               "tool_input": {"command": command, "description": "run it"}})
    };
    tell("s1", run_it("PreToolUse"));
    let printed = run(&root, "sh", &["-c", command]);
    assert_eq!(printed, "5\n");
    let mut done = run_it("PostToolUse");
    done["tool_response"] = json!({"stdout": printed, "stderr": "", "interrupted": false});
    tell("s1", done);
    let s1 = shown(&mut c, "s1");
    assert!(
        s1.contains("import delta"),
        "the command's output is shown: {s1}"
    );
    assert!(!s1.contains("def delta"), "{s1}");
    // delta.py is still an input of that output.
    let commands = c.call("commands.list", json!({})).expect("commands.list");
    let inputs = commands["commands"]
        .as_array()
        .and_then(|l| l.iter().find(|o| o["command"] == command))
        .map(|o| o["inputs"].to_string());
    assert!(
        inputs.as_ref().is_some_and(|i| i.contains("delta.py")),
        "{commands}"
    );

    // `worldfs status` tells each session's steps and files.
    let status = m.status();
    assert!(
        status.contains("(session s1, heard from last, of 2); 3 steps and 3 files of its own"),
        "{status}"
    );
    assert!(
        status.contains("session s2: \"Explain the code\"; 3 steps and 3 files of its own"),
        "{status}"
    );
}

/// The `PostToolUse` event of a call of `tool`.
fn post_event(tool: &str, id: &str, input: Value, response: Value) -> Value {
    json!({"hook_event_name": "PostToolUse", "tool_name": tool, "tool_use_id": id,
           "tool_input": input, "tool_response": response})
}

/// The `PostToolUse` event of a Read of `path` (read through the mount now, all of it).
fn read_event(path: &Path, id: &str) -> Value {
    let content = std::fs::read_to_string(path).expect("read");
    let lines = content.lines().count();
    let file_path = path.to_string_lossy();
    post_event(
        "Read",
        id,
        json!({"file_path": file_path}),
        json!({"type": "text", "file": {"filePath": file_path, "content": content,
               "numLines": lines, "startLine": 1, "totalLines": lines}}),
    )
}

/// The text projection `session` is shown.
fn shown_to(c: &mut Client, session: &str) -> String {
    let p = c
        .call(
            "projection.get",
            json!({"format": "text", "budget": 8000, "session": session}),
        )
        .expect("projection.get");
    p["body"].as_str().unwrap_or_default().to_owned()
}

/// A mount of `dates.py` alone, on which session `s1` was asked to fix issue 7: the mount, a
/// client, and the project's directory as Claude Code names it.
fn issue_session() -> (Mount, Client, String) {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::write(src.join("dates.py"), "def parse(s):\n    return s\n").expect("write");
    });
    let c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let cwd = m.root.to_string_lossy().into_owned();
    start_as(&cwd, "s1", "Fix issue 7");
    (m, c, cwd)
}

/// Whatever tool the hook does not handle otherwise keeps its result as an earlier result: an
/// MCP server's answer. Behind `worldfs proxy` it would leave the model's view one call later.
/// The user's answers to the agent's questions are the user's words: the goal says them after
/// the prompt, and they do not fade.
#[test]
fn an_mcp_answer_is_kept_and_the_users_answers_join_the_goal() {
    let (m, mut c, cwd) = issue_session();
    let post = |tool: &str, id: &str, input: Value, response: Value| {
        tell_as(&cwd, "s1", post_event(tool, id, input, response));
    };
    post(
        "mcp__tracker__get_issue",
        "toolu_mcp",
        json!({"id": 7}),
        json!([{"type": "text", "text": "Issue 7: parse() drops the time zone"}]),
    );
    // As 2.1.332 sends it (seen in tmux): the input comes back with the answers, as the
    // response.
    let asked = json!({"annotations": {}, "answers": {"Keep or drop the zone?": "Keep"},
        "questions": [{"question": "Keep or drop the zone?", "header": "Zone",
            "options": [{"label": "Keep", "description": "Parse it into an aware datetime"},
                        {"label": "Drop", "description": "Leave parse() as it is"}],
            "multiSelect": false}]});
    post("AskUserQuestion", "toolu_ask", asked.clone(), asked);
    tell_as(
        &cwd,
        "s1",
        read_event(&m.root.join("dates.py"), "toolu_read"),
    );
    let body = shown_to(&mut c, "s1");
    for said in [
        "Result of an earlier mcp__tracker__get_issue call with {\"id\":7}, as it was then",
        "Issue 7: parse() drops the time zone",
    ] {
        assert!(body.contains(said), "{said}: {body}");
    }
    let answer = "The user answered: \"Keep or drop the zone?\" = \"Keep\"";
    let goal = c
        .call("goal.get", json!({"session": "s1"}))
        .expect("goal.get")["goal"]
        .clone();
    assert_eq!(goal, json!(format!("Fix issue 7{LATER_PROMPT}{answer}")));
    assert_eq!(body.matches(answer).count(), 1, "{body}");
    assert!(
        !body.contains("Result of an earlier AskUserQuestion"),
        "{body}"
    );
    // The Read is the last step, and its file is in the world: not kept as a result.
    assert!(!body.contains("Result of an earlier Read call"), "{body}");
    let status = m.status();
    assert!(
        status.contains("commands: 1 output cached (1 of them an earlier result, kept as it was)"),
        "{status}"
    );
}

/// A Read of a file the projection will not show (outside the project; a library's source in
/// `.venv`) is kept as an earlier result: behind `worldfs proxy` the model would otherwise lose
/// it with the history one call later. A secret's is not.
#[test]
fn a_read_of_a_file_the_world_leaves_out_is_kept_as_it_was() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::create_dir_all(src.join(".venv/lib")).expect("mkdir");
        std::fs::write(
            src.join(".venv/lib/dep.py"),
            "def dep():\n    return 'VENDORED'\n",
        )
        .expect("write");
        std::fs::write(src.join("main.py"), "import dep\n").expect("write");
        std::fs::write(src.join(".env"), "TOKEN=hunter2\n").expect("write");
    });
    let outside = m.scratch.join("outside.py");
    std::fs::write(&outside, "OUTSIDE = 1\n").expect("write");
    let aws = m.scratch.join(".aws");
    std::fs::create_dir_all(&aws).expect("mkdir");
    std::fs::write(aws.join("credentials"), "aws_secret = AKIA_SECRET\n").expect("write");
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let root = m.root.clone();
    let cwd = root.to_string_lossy().into_owned();
    start_as(&cwd, "s1", "Why does dep() return that?");
    for (path, id) in [
        (outside.clone(), "toolu_outside"),
        (root.join(".venv/lib/dep.py"), "toolu_dep"),
        (root.join(".env"), "toolu_env"),
        (aws.join("credentials"), "toolu_aws"),
        (root.join("main.py"), "toolu_main"),
    ] {
        tell_as(&cwd, "s1", read_event(&path, id));
    }
    let body = shown_to(&mut c, "s1");
    assert!(body.contains("import dep"), "{body}");
    for (file, what) in [
        (outside.to_string_lossy(), "OUTSIDE = 1"),
        (root.join(".venv/lib/dep.py").to_string_lossy(), "VENDORED"),
    ] {
        assert!(
            body.contains(&format!("Result of an earlier Read call ({file:?})"))
                && body.contains(what),
            "{file}: {body}"
        );
    }
    assert!(!body.contains("hunter2"), "{body}");
    assert!(
        !body.contains("AKIA_SECRET"),
        "a secret outside the project: {body}"
    );
}

/// A file the agent wrote outside the project (Claude Code's plan file) is kept as it is after
/// the write, the last copy alone: behind `worldfs proxy` the model would lose its own plan
/// with the history. A file it wrote in the project is shown from disk, as always.
#[test]
fn a_file_written_outside_the_project_is_kept_as_it_was_left() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::write(src.join("main.py"), "print('MAIN')\n").expect("write");
    });
    let plan = m.scratch.join("plans").join("plan.md");
    std::fs::create_dir_all(plan.parent().expect("parent")).expect("mkdir");
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let root = m.root.clone();
    let cwd = root.to_string_lossy().into_owned();
    start_as(&cwd, "s1", "Plan the fix");
    let post = |tool: &str, id: &str, input: Value, response: Value| {
        tell_as(&cwd, "s1", post_event(tool, id, input, response));
    };
    // A Write of `content` to `path`, as Claude Code tells it.
    let write = |id: &str, path: &str, content: &str| {
        post(
            "Write",
            id,
            json!({"file_path": path, "content": content}),
            json!({"type": "create", "filePath": path, "content": content}),
        );
    };
    let file = plan.to_string_lossy().into_owned();
    write("toolu_w", &file, "# Plan\n\n1. PLAN ONE\n");
    tell_as(&cwd, "s1", read_event(&root.join("main.py"), "toolu_r1"));
    let body = shown_to(&mut c, "s1");
    assert!(
        body.contains(&format!("Result of an earlier Write call ({file:?})"))
            && body.contains("1. PLAN ONE"),
        "{body}"
    );
    post(
        "Edit",
        "toolu_e",
        json!({"file_path": file, "old_string": "PLAN ONE", "new_string": "PLAN TWO"}),
        json!({"filePath": file, "oldString": "PLAN ONE", "newString": "PLAN TWO",
               "originalFile": "# Plan\n\n1. PLAN ONE\n", "structuredPatch": [],
               "replaceAll": false}),
    );
    let key = m.scratch.join("deploy.pem").to_string_lossy().into_owned();
    write("toolu_key", &key, "PRIVATE KEY MATERIAL\n");
    let inside = root.join("new.py").to_string_lossy().into_owned();
    write("toolu_w2", &inside, "INSIDE = 1\n");
    tell_as(&cwd, "s1", read_event(&root.join("main.py"), "toolu_r2"));
    let body = shown_to(&mut c, "s1");
    assert!(
        body.contains("1. PLAN TWO") && !body.contains("PLAN ONE"),
        "the last copy alone: {body}"
    );
    assert!(!body.contains("PRIVATE KEY"), "a secret's: {body}");
    assert!(
        !body.contains(&format!("Result of an earlier Write call ({inside:?})")),
        "{body}"
    );
}

/// A subagent's report is in no file: behind `worldfs proxy` it would be gone with the history
/// one call later. It is kept as an earlier result, shown once while it is the last step.
#[test]
fn a_subagents_report_outlives_its_turn() {
    let (m, mut c, cwd) = calc_mount();
    let post = |tool: &str, id: &str, input: Value, response: Value| {
        let ev = json!({"hook_event_name": "PostToolUse", "session_id": "s1", "cwd": cwd,
                        "tool_name": tool, "tool_use_id": id,
                        "tool_input": input, "tool_response": response});
        common::hook(Path::new("/"), &ev.to_string());
    };
    let report = "The parser is parse() in dates.py; it drops the time zone.";
    post(
        "Agent",
        "toolu_agent",
        json!({"description": "Find the parser", "prompt": "Where is the date parser?",
               "subagent_type": "Explore"}),
        json!({"status": "completed", "content": [{"type": "text", "text": report}]}),
    );
    let text = |c: &mut Client, last_step: bool| -> String {
        let p = c
            .call(
                "projection.get",
                json!({"format": "text", "budget": 8000, "last_step": last_step}),
            )
            .expect("projection");
        p["body"].as_str().unwrap_or_default().to_owned()
    };
    assert_eq!(
        text(&mut c, true).matches(report).count(),
        1,
        "once, as the step"
    );
    assert!(
        !text(&mut c, false).contains(report),
        "a client that sends the last turn itself shows it there"
    );
    let file = m.root.join("calc.py").to_string_lossy().into_owned();
    std::fs::read(m.root.join("calc.py")).expect("read through the mount");
    post(
        "Read",
        "toolu_read",
        json!({"file_path": file}),
        json!({"type": "text", "file": {"filePath": file, "content": "x = 1\n", "numLines": 1,
                                        "startLine": 1, "totalLines": 1}}),
    );
    let after = text(&mut c, false);
    assert!(
        after.contains("Result of an earlier Agent call (\"Find the parser\"), as it was then")
            && after.contains(report),
        "{after}"
    );
    // Another session on the mount never saw it.
    let p = c
        .call(
            "projection.get",
            json!({"format": "text", "budget": 8000, "last_step": false, "session": "s2"}),
        )
        .expect("projection");
    let other = p["body"].as_str().unwrap_or_default();
    assert!(!other.contains(report), "{other}");
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

/// The outputs `commands.list` holds, by command.
fn cached(c: &mut Client) -> Vec<String> {
    outputs(c, false)
}

/// The commands of the outputs kept (`kept_as_results`: those kept as earlier results, as they
/// were then, since nothing would tell when they go out of date; else those cached).
fn outputs(c: &mut Client, kept_as_results: bool) -> Vec<String> {
    let r = c.call("commands.list", json!({})).expect("commands.list");
    r["commands"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|o| o["tool"].is_null() != kept_as_results)
                .filter_map(|o| o["command"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// Runs `program args` in `dir` (through the mount) as the Bash tool's shell would.
fn run(dir: &Path, program: &str, args: &[&str]) -> String {
    let out = std::process::Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A Bash call's output that reads no file through the mount (`gh issue view`, `curl`) is
/// not cached, since nothing would tell when it goes out of date; it is kept as an earlier
/// result, as it was then, so that behind `worldfs proxy` the model does not lose it one call
/// later.
#[test]
fn an_output_nothing_tracks_is_kept_as_it_was() {
    let (m, mut c, cwd) = issue_session();
    let command = "gh issue view 7";
    let call = |name: &str| {
        json!({"hook_event_name": name, "tool_name": "Bash", "tool_use_id": "toolu_gh",
               "tool_input": {"command": command, "description": "Read the issue"}})
    };
    tell_as(&cwd, "s1", call("PreToolUse"));
    let mut done = call("PostToolUseFailure");
    done["error"] = json!("Exit code 1\nIssue 7: parse() drops the time zone");
    tell_as(&cwd, "s1", done);
    tell_as(
        &cwd,
        "s1",
        read_event(&m.root.join("dates.py"), "toolu_read"),
    );
    let body = shown_to(&mut c, "s1");
    assert!(
        body.contains(
            "Result of an earlier Bash call (`gh issue view 7`), exit code 1, as it was then"
        ) && body.contains("parse() drops the time zone"),
        "{body}"
    );
}

#[test]
fn a_bash_calls_output_is_cached_while_what_it_read_is_unchanged() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::write(src.join("calc.py"), "def add(a, b):\n    return a + b\n").expect("write");
        std::fs::create_dir(src.join("docs")).expect("mkdir");
        std::fs::write(src.join("docs/a.md"), "add numbers\n").expect("write");
    });
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let root = m.root.clone();
    let cwd = root.to_string_lossy().into_owned();
    let bash = |name: &str, id: &str, command: &str, response: Value| {
        let mut ev = json!({
            "session_id": "s1", "cwd": cwd, "hook_event_name": name, "tool_name": "Bash",
            "tool_use_id": id, "tool_input": {"command": command, "description": "run"},
        });
        if name == "PostToolUse" {
            ev["tool_response"] = response;
        } else if name == "PostToolUseFailure" {
            ev["error"] = response;
        }
        common::hook(Path::new("/"), &ev.to_string());
    };
    common::hook(
        Path::new("/"),
        &json!({"session_id": "s1", "cwd": cwd, "hook_event_name": "UserPromptSubmit",
                "prompt": "Fix add"})
        .to_string(),
    );

    // `cat calc.py`: begun, read through the mount, finished.
    bash("PreToolUse", "toolu_cat", "cat calc.py", Value::Null);
    let printed = run(&root, "cat", &["calc.py"]);
    bash(
        "PostToolUse",
        "toolu_cat",
        "cat calc.py",
        json!({"stdout": printed, "stderr": "", "interrupted": false, "isImage": false}),
    );
    assert_eq!(cached(&mut c), ["cat calc.py"]);
    let r = c.call("commands.list", json!({})).expect("list");
    assert_eq!(r["commands"][0]["inputs"][0][0], "calc.py", "{r}");
    assert_eq!(r["commands"][0]["exit_code"], 0, "{r}");

    // A failing command: recorded with its exit code.
    bash("PreToolUse", "toolu_fail", "grep sub calc.py", Value::Null);
    let _ = std::process::Command::new("grep")
        .args(["sub", "calc.py"])
        .current_dir(&root)
        .output()
        .expect("grep");
    bash(
        "PostToolUseFailure",
        "toolu_fail",
        "grep sub calc.py",
        "Exit code 1".into(),
    );
    assert_eq!(cached(&mut c), ["cat calc.py", "grep sub calc.py"]);
    let r = c.call("commands.list", json!({})).expect("list");
    assert_eq!(r["commands"][1]["exit_code"], 1, "{r}");

    // The projection shows the older output while it is current; the newest is the last step's
    // result, shown once: as the step, or by the client that asks without it (`worldfs proxy`
    // sends the real last turn).
    for last_step in [true, false] {
        let p = c
            .call(
                "projection.get",
                json!({"format": "text", "budget": 8000, "last_step": last_step}),
            )
            .expect("projection");
        let body = p["body"].as_str().unwrap_or_default();
        assert_eq!(body.matches("Output of `cat calc.py`").count(), 1, "{body}");
        assert_eq!(
            body.matches("Output of `grep sub calc.py`").count(),
            0,
            "{body}"
        );
    }

    // A whole-tree scanner read files meanwhile: what it read is not tracked, so the output
    // is kept only until anything in the tree changes. (A scanner by its name, `rg`, alive long
    // enough for the mount to name it: a process gone before that is taken for the agent, and
    // then its reads are inputs, which is safe too.)
    let rg = m.scratch.join("rg");
    std::fs::write(
        &rg,
        "#!/bin/sh\nwhile read l; do echo \"$l\"; done < calc.py\nsleep 0.5\n",
    )
    .expect("write the scanner");
    std::fs::set_permissions(&rg, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    bash(
        "PreToolUse",
        "toolu_scan",
        "rg add; cat calc.py",
        Value::Null,
    );
    let found = run(&root, &rg.to_string_lossy(), &[]);
    let printed = run(&root, "cat", &["calc.py"]);
    bash(
        "PostToolUse",
        "toolu_scan",
        "rg add; cat calc.py",
        json!({"stdout": format!("{found}{printed}"), "stderr": ""}),
    );
    // Nor without its PreToolUse (the hook not installed for it): when it started is unknown.
    let _ = run(&root, "cat", &["calc.py"]);
    bash(
        "PostToolUse",
        "toolu_unbegun",
        "head calc.py",
        json!({"stdout": "def add(a, b):\n", "stderr": ""}),
    );
    // Nor one that read nothing through the mount: nothing would tell that it is out of date.
    // It is kept as the Bash call's earlier result instead, as it was then.
    bash("PreToolUse", "toolu_echo", "echo hi", Value::Null);
    bash(
        "PostToolUse",
        "toolu_echo",
        "echo hi",
        json!({"stdout": "hi", "stderr": ""}),
    );
    assert_eq!(
        cached(&mut c),
        ["cat calc.py", "grep sub calc.py", "rg add; cat calc.py"]
    );
    assert_eq!(outputs(&mut c, true), ["echo hi"]);
    let s = c.call("stats", json!({})).expect("stats");
    assert_eq!(s["commands_begun"], 0, "every begun command was taken: {s}");

    // A Grep call: its result depends on every file below the directory it searched.
    let grep = |name: &str, id: &str| {
        let mut ev = json!({"session_id": "s1", "cwd": cwd, "hook_event_name": name,
            "tool_name": "Grep", "tool_use_id": id,
            "tool_input": {"pattern": "add", "path": "docs", "output_mode": "files_with_matches"}});
        if name == "PostToolUse" {
            ev["tool_response"] = json!({"mode": "files_with_matches", "numFiles": 1,
                                         "filenames": [root.join("docs/a.md")]});
        } else if name == "PostToolUseFailure" {
            ev["error"] = "regex parse error".into();
        }
        common::hook(Path::new("/"), &ev.to_string());
    };
    grep("PreToolUse", "toolu_grep");
    grep("PostToolUse", "toolu_grep");
    let grep_name = r#"Grep {"output_mode":"files_with_matches","path":"docs","pattern":"add"}"#;
    assert_eq!(
        cached(&mut c),
        [
            "cat calc.py",
            "grep sub calc.py",
            "rg add; cat calc.py",
            grep_name
        ]
    );
    // A new file outside `docs`: the scanner's output goes, the Grep's stays.
    std::fs::write(root.join("notes.txt"), "x\n").expect("write through the mount");
    let wait_for = |c: &mut Client, want: &[&str]| {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while cached(c) != want {
            assert!(
                std::time::Instant::now() < deadline,
                "cached: {:?}, want {want:?}",
                cached(c)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    wait_for(&mut c, &["cat calc.py", "grep sub calc.py", grep_name]);
    // Until the step after it, the Grep's result is the last step's own output: shown once.
    let p = c
        .call("projection.get", json!({"format": "text", "budget": 8000}))
        .expect("projection");
    let body = p["body"].as_str().unwrap_or_default();
    assert_eq!(body.matches("docs/a.md").count(), 1, "{body}");
    // One below it (behind the mount): gone too.
    std::fs::write(m.source.join("docs/b.md"), "more\n").expect("write behind the mount");
    wait_for(&mut c, &["cat calc.py", "grep sub calc.py"]);
    // Not cached without its PreToolUse, nor when something below `docs` changed while it ran.
    grep("PostToolUse", "toolu_grep_unbegun");
    grep("PreToolUse", "toolu_grep_raced");
    std::fs::write(root.join("docs/c.md"), "x\n").expect("write through the mount");
    grep("PostToolUse", "toolu_grep_raced");
    assert_eq!(cached(&mut c), ["cat calc.py", "grep sub calc.py"]);
    // A search that fails is not cached, and its start does not wait for a record.
    grep("PreToolUse", "toolu_grep_failed");
    grep("PostToolUseFailure", "toolu_grep_failed");
    assert_eq!(cached(&mut c), ["cat calc.py", "grep sub calc.py"]);
    let s = c.call("stats", json!({})).expect("stats");
    assert_eq!(s["commands_begun"], 0, "the failed search still waits: {s}");

    // The file changes (here behind the mount): both outputs that read it are dropped.
    std::fs::write(
        m.source.join("calc.py"),
        "def add(a, b):\n    return b + a\n",
    )
    .expect("write behind the mount");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !cached(&mut c).is_empty() {
        assert!(
            std::time::Instant::now() < deadline,
            "outputs still cached: {:?}",
            cached(&mut c)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let p = c
        .call("projection.get", json!({"format": "text", "budget": 8000}))
        .expect("projection");
    assert!(
        !p["body"].to_string().contains("Output of `cat calc.py`"),
        "{p}"
    );
}

/// Codex's hook events are Claude Code's shape, but a Bash call's result is its output alone,
/// with no failure event: the exit code the model was told comes from the session's rollout
/// (here one written as Codex 0.171 writes it), and is unknown, never 0, without it. Its
/// `apply_patch`, which no PostToolUse ends, begins no output.
#[test]
fn codex_events_record_the_exit_code_the_model_was_told() {
    let (m, mut c, cwd) = calc_mount();
    let rollouts = tempfile::tempdir().expect("tempdir");
    let rollout = rollouts.path().join("rollout.jsonl");
    let ended = |id: &str, code: i32| {
        json!({"type": "event_msg", "payload": {"type": "item_completed", "turn_id": "t1",
               "item": {"type": "CommandExecution", "id": id, "exit_code": code}}})
        .to_string()
            + "\n"
    };
    let codex = |name: &str, id: &str, command: &str, output: Option<&str>| {
        tell_codex(
            &cwd,
            &rollout,
            name,
            "t1",
            Some(("Bash", id, command)),
            output,
        );
    };
    tell_as(
        &cwd,
        "s1",
        json!({"hook_event_name": "UserPromptSubmit", "turn_id": "t1", "prompt": "Fix calc"}),
    );
    assert_eq!(goal(&mut c), "Fix calc");

    codex("PreToolUse", "call_0", "cat calc.py", None);
    let printed = run(&m.root, "cat", &["calc.py"]);
    std::fs::write(&rollout, ended("call_0", 0)).expect("rollout");
    codex("PostToolUse", "call_0", "cat calc.py", Some(&printed));
    assert_eq!(cached(&mut c), ["cat calc.py"]);

    codex(
        "PreToolUse",
        "call_1",
        "apply_patch <<'PATCH'\n*** Begin Patch",
        None,
    );
    let stats = c.call("stats", json!({})).expect("stats");
    assert_eq!(stats["commands_begun"], 0, "{stats}");

    // A failing run: the rollout says 3, and so does what is cached and the last step.
    codex(
        "PreToolUse",
        "call_2",
        "python3 -c 'import calc, sys; sys.exit(3)'",
        None,
    );
    let _ = std::process::Command::new("python3")
        .args(["-c", "import calc, sys; sys.exit(3)"])
        .current_dir(&m.root)
        .output()
        .expect("python3");
    let mut text = std::fs::read_to_string(&rollout).expect("rollout");
    text.push_str(&ended("call_2", 3));
    std::fs::write(&rollout, text).expect("rollout");
    codex(
        "PostToolUse",
        "call_2",
        "python3 -c 'import calc, sys; sys.exit(3)'",
        Some("4\n"),
    );
    let r = c.call("commands.list", json!({})).expect("list");
    let codes: Vec<&Value> = r["commands"]
        .as_array()
        .expect("commands")
        .iter()
        .map(|o| &o["exit_code"])
        .collect();
    assert_eq!(codes, [&json!(0), &json!(3)], "{r}");
    let p = c
        .call("projection.get", json!({"format": "text", "budget": 8000}))
        .expect("projection");
    let body = p["body"].as_str().unwrap_or_default();
    assert!(body.contains("Exit code 3\n4"), "{body}");

    // A call the rollout does not tell of: its code is unknown.
    codex("PreToolUse", "call_3", "cat calc.py", None);
    run(&m.root, "cat", &["calc.py"]);
    codex("PostToolUse", "call_3", "cat calc.py", Some(&printed));
    let r = c.call("commands.list", json!({})).expect("list");
    let last = r["commands"].as_array().and_then(|a| a.last()).cloned();
    assert_eq!(
        last.map(|o| o["exit_code"].clone()),
        Some(Value::Null),
        "{r}"
    );
}

/// A Codex command that outran its first wait is read by the model over several polls
/// (`write_stdin`), and its PostToolUse carries the last poll's output alone: the output cached
/// is the whole of it, as the rollout has it.
#[test]
fn a_codex_command_read_over_several_polls_is_cached_whole() {
    let (m, mut c, cwd) = calc_mount();
    let rollouts = tempfile::tempdir().expect("tempdir");
    let rollout = rollouts.path().join("rollout.jsonl");
    let command = "cat calc.py; sleep 20; echo finished; exit 3";
    let event = |name: &str, response: Option<&str>| {
        tell_codex(
            &cwd,
            &rollout,
            name,
            "t1",
            Some(("Bash", "call_1", command)),
            response,
        );
    };
    event("PreToolUse", None);
    let printed = run(&m.root, "cat", &["calc.py"]);
    let whole = format!("{printed}finished\n");
    let ended = json!({"type": "event_msg", "payload": {"type": "item_completed", "turn_id": "t1",
        "item": {"type": "CommandExecution", "id": "call_1", "process_id": "64300",
                 "source": "unified_exec_startup", "status": "failed",
                 "aggregated_output": whole, "exit_code": 3}}});
    std::fs::write(&rollout, format!("{ended}\n")).expect("rollout");
    event("PostToolUse", Some("finished\n"));
    let r = c.call("commands.list", json!({})).expect("list");
    let cached = &r["commands"][0];
    assert_eq!(cached["exit_code"], 3, "{r}");
    assert_eq!(cached["output"], format!("Exit code 3\n{whole}"), "{r}");
}

/// A Codex session begun with `/goal OBJECTIVE` has no prompt: the goal is the objective its
/// rollout tells of, once, and a later prompt is added to it as to any goal.
#[test]
fn a_codex_thread_goal_is_the_goal() {
    let (_m, mut c, cwd) = calc_mount();
    let rollouts = tempfile::tempdir().expect("tempdir");
    let rollout = rollouts.path().join("rollout.jsonl");
    let goal_set = |objective: &str| {
        let record = json!({"type": "event_msg", "payload": {"type": "thread_goal_updated",
            "threadId": "s1", "goal": {"threadId": "s1", "objective": objective,
                                       "status": "active", "tokensUsed": 0}}});
        let mut text = std::fs::read_to_string(&rollout).unwrap_or_default();
        text.push_str(&format!("{record}\n"));
        std::fs::write(&rollout, text).expect("rollout");
    };
    tell_as(
        &cwd,
        "s1",
        json!({"hook_event_name": "SessionStart", "source": "startup"}),
    );
    goal_set("Fix calc");
    let cat = Some(("Bash", "call_1", "cat calc.py"));
    tell_codex(&cwd, &rollout, "PreToolUse", "t1", cat, None);
    assert_eq!(goal(&mut c), "Fix calc");
    tell_codex(&cwd, &rollout, "PostToolUse", "t1", cat, Some("x = 1\n"));
    tell_codex(&cwd, &rollout, "Stop", "t1", None, None);
    assert_eq!(goal(&mut c), "Fix calc", "told once");
    tell_as(
        &cwd,
        "s1",
        json!({"hook_event_name": "UserPromptSubmit", "turn_id": "t2", "prompt": "Now test it"}),
    );
    // The objective edited: the new one is added as a later prompt would be.
    goal_set("Fix calc and test it");
    tell_codex(&cwd, &rollout, "Stop", "t2", None, None);
    assert_eq!(
        goal(&mut c),
        "Fix calc\n\nThen the user asked:\nNow test it\n\nThen the user asked:\nFix calc and test it"
    );

    // A goal the model creates (at the user's word) has no record in the rollout: its
    // `create_goal` tells it.
    tell_as(
        &cwd,
        "s1",
        json!({"hook_event_name": "PostToolUse", "turn_id": "t3", "model": "gpt-5-codex",
               "transcript_path": rollouts.path().join("none.jsonl").to_string_lossy(),
               "tool_name": "create_goal", "tool_use_id": "call_g",
               "tool_input": {"objective": "Document calc"},
               "tool_response": "{\"goal\":{\"objective\":\"Document calc\",\"status\":\"active\"}}"}),
    );
    assert!(
        goal(&mut c)
            .as_str()
            .is_some_and(|g| g.ends_with("\n\nThen the user asked:\nDocument calc")),
        "{}",
        goal(&mut c)
    );
}

/// Codex tells no hook when an `apply_patch` is done: the turn's next event reads it back from
/// the rollout and records it as a step, once, before its own; a patch of another turn is not
/// this turn's to record.
#[test]
fn codex_patches_are_steps_read_back_from_the_rollout() {
    let (m, mut c, cwd) = calc_mount();
    let rollouts = tempfile::tempdir().expect("tempdir");
    let rollout = rollouts.path().join("rollout.jsonl");
    let patch = "apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: calc.py\n@@\n-x = 1\n+x = 2\n*** End Patch\nPATCH";
    let calc = m.root.join("calc.py").to_string_lossy().into_owned();
    let append = |records: &[Value]| {
        let mut text = std::fs::read_to_string(&rollout).unwrap_or_default();
        for r in records {
            text.push_str(&format!("{r}\n"));
        }
        std::fs::write(&rollout, text).expect("rollout");
    };
    let patched = |turn: &str, id: &str| {
        [
            json!({"type": "response_item", "payload": {"type": "function_call", "name": "exec_command",
                   "call_id": id, "arguments": json!({"cmd": patch}).to_string()}}),
            json!({"type": "event_msg", "payload": {"type": "item_completed", "turn_id": turn,
                   "item": {"type": "FileChange", "id": id, "status": "completed",
                            "changes": {&calc: {"type": "update", "unified_diff": "-x = 1\n+x = 2\n", "move_path": null}},
                            "stdout": "Success. Updated the following files:\nM calc.py\n", "stderr": ""}}}),
        ]
    };
    let event = |name: &str, turn: &str, id: Option<&str>| {
        tell_codex(
            &cwd,
            &rollout,
            name,
            turn,
            id.map(|id| ("Bash", id, patch)),
            None,
        );
    };
    tell_as(
        &cwd,
        "s1",
        json!({"hook_event_name": "UserPromptSubmit", "turn_id": "t1", "prompt": "Fix calc"}),
    );
    let before = turn(&mut c);
    event("PreToolUse", "t1", Some("call_p"));
    assert_eq!(turn(&mut c), before, "the patch has not run yet");
    std::fs::write(m.root.join("calc.py"), "x = 2\n").expect("patch");
    append(&patched("t1", "call_p"));
    // The turn ends with the patch: Stop records it.
    event("Stop", "t1", None);
    assert_eq!(turn(&mut c), before + 1);
    let shown = |c: &mut Client| {
        let p = c
            .call(
                "projection.get",
                json!({"format": "text", "budget": 8000, "session": "s1"}),
            )
            .expect("projection");
        p["body"].as_str().unwrap_or_default().to_owned()
    };
    let body = shown(&mut c);
    assert!(
        body.contains("Success. Updated the following files:") && body.contains("x = 2"),
        "{body}"
    );
    let s = c.call("goal.list", json!({})).expect("goal.list");
    let steps = s.to_string();
    assert!(
        steps.contains("\"steps\":1"),
        "the session's own step: {steps}"
    );
    // Told again by each later event of the turn: one step still.
    event("Stop", "t1", None);
    event("PreToolUse", "t1", Some("call_q"));
    assert_eq!(turn(&mut c), before + 1);
    // The next turn's first call: the last turn's patches are not its to record; a patch of
    // its own that ended before the next call is.
    append(&patched("t0", "call_old"));
    event("PreToolUse", "t2", Some("call_r"));
    assert_eq!(turn(&mut c), before + 1);
    append(&patched("t2", "call_s"));
    event("PreToolUse", "t2", Some("call_t"));
    assert_eq!(turn(&mut c), before + 2);
}

/// A model whose catalog entry makes `apply_patch` a freeform tool (every model Codex ships)
/// calls it as a tool of its own, with a PostToolUse: one step, named by the files the patch
/// names, and not kept as an output (the file shows as it is now). A failed patch is an error.
#[test]
fn a_freeform_apply_patch_is_one_step_of_the_files_it_names() {
    let (m, mut c, cwd) = calc_mount();
    let rollouts = tempfile::tempdir().expect("tempdir");
    let rollout = rollouts.path().join("rollout.jsonl");
    let patch = "*** Begin Patch\n*** Update File: calc.py\n@@\n-x = 1\n+x = 2\n*** End Patch";
    let calc = m.root.join("calc.py").to_string_lossy().into_owned();
    let event = |name: &str, id: &str, response: Option<&str>| {
        tell_codex(
            &cwd,
            &rollout,
            name,
            "t1",
            Some(("apply_patch", id, patch)),
            response,
        );
    };
    tell_as(
        &cwd,
        "s1",
        json!({"hook_event_name": "UserPromptSubmit", "turn_id": "t1", "prompt": "Fix calc"}),
    );
    let before = turn(&mut c);
    event("PreToolUse", "call_p", None);
    std::fs::write(m.root.join("calc.py"), "x = 2\n").expect("patch");
    let ended = json!({"type": "event_msg", "payload": {"type": "item_completed", "turn_id": "t1",
        "item": {"type": "FileChange", "id": "call_p", "status": "completed",
                 "changes": {&calc: {"type": "update"}}, "stdout": "Success.\n", "stderr": ""}}});
    std::fs::write(&rollout, format!("{ended}\n")).expect("rollout");
    let said = "Exit code: 0\nWall time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nM calc.py\n";
    event("PostToolUse", "call_p", Some(said));
    assert_eq!(turn(&mut c), before + 1);
    let p = c
        .call(
            "projection.get",
            json!({"format": "text", "budget": 8000, "session": "s1"}),
        )
        .expect("projection");
    let body = p["body"].as_str().unwrap_or_default();
    assert!(
        body.contains("Wall time: 0 seconds"),
        "the hook's own result: {body}"
    );
    assert!(outputs(&mut c, true).is_empty(), "not kept as an output");
    let list = c
        .call("goal.list", json!({}))
        .expect("goal.list")
        .to_string();
    assert!(
        list.contains("\"steps\":1") && list.contains("\"files\":1"),
        "the session's step, and its file: {list}"
    );
    // The turn's end reads the same patch back from the rollout: still one step.
    tell_codex(&cwd, &rollout, "Stop", "t1", None, None);
    assert_eq!(turn(&mut c), before + 1);
    // A patch that does not apply.
    event(
        "PostToolUse",
        "call_q",
        Some("Exit code: 1\nWall time: 0 seconds\nOutput:\napply_patch verification failed\n"),
    );
    let p = c
        .call(
            "projection.get",
            json!({"format": "anthropic", "budget": 8000, "session": "s1"}),
        )
        .expect("projection");
    let last = p["body"].to_string();
    assert!(
        last.contains("verification failed") && last.contains("\"is_error\":true"),
        "{last}"
    );
}

#[test]
fn what_was_read_just_before_a_bash_call_is_not_its_input() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::write(src.join("calc.py"), "def add(a, b):\n    return a + b\n").expect("write");
        std::fs::write(src.join("notes.md"), "read before\n").expect("write");
    });
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let root = m.root.clone();
    let cwd = root.to_string_lossy().into_owned();
    // Read right before the call's PreToolUse, the world may not have applied it yet when the
    // call begins: it must still count as before the command. Several times, as it was a race.
    for i in 0..6 {
        let id = format!("toolu_{i}");
        let _ = run(&root, "cat", &["notes.md"]);
        let event = |name: &str, response: Value| {
            let mut ev = json!({"session_id": "s1", "cwd": cwd, "hook_event_name": name,
                "tool_name": "Bash", "tool_use_id": id,
                "tool_input": {"command": "cat calc.py"}});
            if name == "PostToolUse" {
                ev["tool_response"] = response;
            }
            common::hook(Path::new("/"), &ev.to_string());
        };
        event("PreToolUse", Value::Null);
        let printed = run(&root, "cat", &["calc.py"]);
        event("PostToolUse", json!({"stdout": printed, "stderr": ""}));
        let r = c.call("commands.list", json!({})).expect("list");
        assert_eq!(
            r["commands"][0]["inputs"].as_array().map(Vec::len),
            Some(1),
            "{r}"
        );
        assert_eq!(r["commands"][0]["inputs"][0][0], "calc.py", "{r}");
    }
}

/// Claude Code answers a Read of a file unchanged since its last Read with a note to look at
/// that earlier result, reading nothing. Behind `worldfs proxy` the earlier result is gone with
/// the history, so the projection must show the file again, even though the mount saw no read.
#[test]
fn a_read_answered_unchanged_since_the_last_read_brings_the_file_back() {
    let body = |tag: &str| -> String {
        (0..60)
            .map(|i| format!("def {tag}_{i}(x):\n    return x * {i}  # in {tag}\n"))
            .collect()
    };
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::write(src.join("looked.py"), body("looked")).expect("write");
        for i in 0..12 {
            std::fs::write(src.join(format!("other{i}.py")), body(&format!("other{i}")))
                .expect("write");
        }
    });
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let cwd = m.root.to_string_lossy().into_owned();
    let event = |v: Value| {
        let mut v = v;
        v["session_id"] = "s1".into();
        v["cwd"] = cwd.clone().into();
        v.to_string()
    };
    c.call("goal.set", json!({"goal": "tidy the helpers"}))
        .expect("goal.set");
    // One turn per file, each read by `cat` (a reader the world counts as the agent's).
    let mut step = 0;
    let mut cat = |name: &str| {
        run(&m.root, "cat", &[name]);
        step += 1;
        common::hook(
            Path::new("/"),
            &event(json!({
                "hook_event_name": "PostToolUse",
                "tool_name": "Bash",
                "tool_use_id": format!("toolu_cat{step}"),
                "tool_input": {"command": format!("cat {name}")},
                "tool_response": {"stdout": "(the file)", "stderr": ""},
            })),
        );
    };
    cat("looked.py");
    for i in 0..12 {
        cat(&format!("other{i}.py"));
    }
    // What the proxy asks for: without the last step, which it sends itself.
    let proxy_view = |c: &mut Client| {
        c.call(
            "projection.get",
            json!({"format": "anthropic", "budget": 4000, "last_step": false,
                   "tool_name": "Read", "path_param": "file_path", "absolute_paths": true}),
        )
        .expect("projection")["body"]
            .to_string()
    };
    assert!(
        !proxy_view(&mut c).contains("# in looked"),
        "read twelve turns ago, evicted"
    );
    let file_path = m.path("looked.py").to_string_lossy().into_owned();
    common::hook(
        Path::new("/"),
        &event(json!({
            "hook_event_name": "PostToolUse",
            "tool_name": "Read",
            "tool_use_id": "toolu_reread",
            "tool_input": {"file_path": file_path},
            "tool_response": {"type": "file_unchanged", "file": {"filePath": file_path}},
        })),
    );
    assert!(
        proxy_view(&mut c).contains("# in looked"),
        "the file the last step refers to is shown again"
    );
}

/// `worldfs hook --install` registers the hook in the project's Claude Code settings, keeping
/// what else they hold, and the command it registers is one Claude Code can run: here through
/// `sh -c`, as Claude Code runs hook commands, it sets the mount's goal.
/// Claude Code reads its settings at every start, and writes them when a permission is granted:
/// none of it is the agent's work, and its model never sees them as files.
/// Codex's `.codex` (its config and hooks, read at every start) neither.
#[test]
fn the_agents_own_directories_are_not_in_the_world() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::create_dir(src.join(".claude")).expect("mkdir");
        std::fs::write(src.join(".claude/settings.json"), r#"{"permissions": {}}"#).expect("write");
        std::fs::create_dir(src.join(".codex")).expect("mkdir");
        std::fs::write(src.join(".codex/hooks.json"), r#"{"hooks": {}}"#).expect("write");
        std::fs::write(src.join("main.py"), "print('hi')\n").expect("write");
    });
    run(&m.root, "cat", &[".claude/settings.json"]);
    run(&m.root, "ls", &[".claude"]);
    run(&m.root, "cat", &[".codex/hooks.json"]);
    run(&m.root, "ls", &[".codex"]);
    std::fs::write(m.path(".claude/settings.local.json"), "{}").expect("write");
    run(&m.root, "cat", &["main.py"]);
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let mut paths = Vec::new();
    let seen = common::wait_until(Duration::from_secs(5), || {
        let list = c.call("entries.list", json!({})).expect("entries.list");
        paths = list["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter_map(|e| e["path"].as_str().map(str::to_owned))
            .collect::<Vec<_>>();
        paths.iter().any(|p| p == "main.py")
    });
    assert!(seen.is_some(), "main.py never listed: {paths:?}");
    assert_eq!(paths, vec!["main.py"]);
}

#[test]
fn install_registers_a_command_that_works_and_uninstall_takes_it_back() {
    // `.claude` is ignored by default; a user who has it projected still gets the settings the
    // install writes forgotten.
    let cfg = tempfile::tempdir().expect("tempdir");
    let cfg = cfg.path().join("worldfs.toml");
    std::fs::write(&cfg, "[ignore]\ndirs = [\".git\"]\n").expect("config");
    let cfg = cfg.to_str().expect("UTF-8 path");
    let m = Mount::start(common::Mode::Mirror, &["--config", cfg], |src| {
        std::fs::create_dir(src.join(".claude")).expect("mkdir");
        std::fs::write(
            src.join(".claude/settings.local.json"),
            r#"{"permissions": {"allow": ["Bash(ls:*)"]}}"#,
        )
        .expect("write");
    });
    let settings = m.path(".claude/settings.local.json");
    let bin = common::bin();
    let bin = bin.to_str().expect("UTF-8 path");
    let root = m.root.to_str().expect("UTF-8 path");
    // The agent read the settings (Claude Code itself writes there too): they are in the world.
    run(&m.root, "cat", &[".claude/settings.local.json"]);
    let mut c = Client::connect(&m.socket(), Duration::from_secs(10)).expect("connect");
    let listed = |c: &mut Client| {
        c.call("entries.list", json!({}))
            .expect("entries.list")
            .to_string()
            .contains("settings.local.json")
    };
    assert!(listed(&mut c), "read by the agent");
    let out = run(Path::new("/"), bin, &["hook", "--install", "-C", root]);
    assert!(out.contains("now runs"), "{out}");
    // Done through the mount, and not the agent's work: the world forgot the file. Asked here,
    // before anything reads it again: a later read by a process that exits before the mount can
    // tell who it was (the second install below) counts as the agent's (`unknown_process`).
    assert!(!listed(&mut c), "forgotten after the install");
    let read = || -> Value {
        serde_json::from_str(&std::fs::read_to_string(&settings).expect("read")).expect("JSON")
    };
    let s = read();
    assert_eq!(s["permissions"], json!({"allow": ["Bash(ls:*)"]}));
    let commands: Vec<String> = s["hooks"]
        .as_object()
        .expect("hooks")
        .values()
        .filter_map(Value::as_array)
        .flatten()
        .filter_map(|g| g["hooks"].as_array())
        .flatten()
        .filter_map(|h| h["command"].as_str().map(str::to_owned))
        .collect();
    assert_eq!(commands.len(), 5, "{s}");
    assert_eq!(s["hooks"]["PreToolUse"][0]["matcher"], "Bash|Grep|Glob");
    let again = run(Path::new("/"), bin, &["hook", "--install", "-C", root]);
    assert!(again.contains("already runs"), "{again}");

    // The registered command, run the way Claude Code runs it.
    let event = json!({"session_id": "s1", "hook_event_name": "UserPromptSubmit",
                       "cwd": root, "prompt": "Make the parser strict"});
    let mut child = std::process::Command::new("sh")
        .args(["-c", &commands[0]])
        .current_dir("/")
        .env_remove("WORLDFS_SOCKET")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .expect("sh");
    use std::io::Write;
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(event.to_string().as_bytes())
        .expect("event");
    assert!(child.wait().expect("wait").success());
    assert_eq!(goal(&mut c), "Make the parser strict");

    let out = run(Path::new("/"), bin, &["hook", "--uninstall", "-C", root]);
    assert!(out.contains("5 `worldfs hook` commands removed"), "{out}");
    assert_eq!(read(), json!({"permissions": {"allow": ["Bash(ls:*)"]}}));

    // A file that is not JSON is left as it is.
    std::fs::write(&settings, "{not json").expect("write");
    let out = std::process::Command::new(bin)
        .args(["hook", "--install", "-C", root])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not valid JSON"));
    assert_eq!(
        std::fs::read_to_string(&settings).expect("read"),
        "{not json"
    );
}
