//! `worldfs proxy` between a client and a stand-in for the Anthropic API, over a real mount: the
//! main conversation goes upstream with the projection in place of its history, everything
//! else byte for byte, and answers stream back as they come.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;
use std::time::Duration;

use serde_json::{Value, json};
use worldfs::socket::Client;

use common::Mount;

const PROMPT: &str = "Make add() in calc.py round to two places";
const WAIT: Duration = Duration::from_secs(20);

/// One request as the stand-in API received it.
#[derive(Debug)]
struct Received {
    request_line: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Received {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("the forwarded body is JSON")
    }
}

/// How the stand-in answers one request.
enum Answer {
    /// Two server-sent events, the second only once the test says so.
    Stream { go_on: mpsc::Receiver<()> },
    /// A status and a JSON body, with a content length.
    Plain { status: u16, body: String },
}

/// A stand-in for the API: answers each connection's one request as told (and closes it, saying
/// so, so the proxy's pool never sends a second request down it), and hands the test what it
/// received. (A test double, so HTTP/1.1 is written out by hand here.)
struct Upstream {
    port: u16,
    received: mpsc::Receiver<Received>,
    answers: mpsc::Sender<Answer>,
}

fn read_request(s: &mut TcpStream) -> Received {
    let mut r = BufReader::new(s.try_clone().expect("clone"));
    let mut request_line = String::new();
    r.read_line(&mut request_line).expect("request line");
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        r.read_line(&mut l).expect("header line");
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        let (k, v) = l.split_once(':').expect("a header has a colon");
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    let len: usize = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("content-length"))
        .map_or(0, |(_, v)| v.parse().expect("content-length"));
    let mut body = vec![0; len];
    r.read_exact(&mut body).expect("body");
    Received {
        request_line: request_line.trim_end().to_owned(),
        headers,
        body,
    }
}

fn chunk(s: &mut TcpStream, data: &str) {
    write!(s, "{:x}\r\n{data}\r\n", data.len()).expect("write chunk");
    s.flush().expect("flush");
}

impl Upstream {
    fn start() -> Upstream {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind the stand-in");
        let port = l.local_addr().expect("addr").port();
        let (rtx, received) = mpsc::channel();
        let (answers, arx) = mpsc::channel::<Answer>();
        thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let req = read_request(&mut s);
                if rtx.send(req).is_err() {
                    return;
                }
                let Ok(answer) = arx.recv() else { return };
                match answer {
                    Answer::Stream { go_on } => {
                        write!(
                            s,
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                             request-id: req_1\r\nconnection: close\r\ntransfer-encoding: chunked\r\n\r\n"
                        )
                        .expect("head");
                        chunk(&mut s, "event: message_start\ndata: {\"n\":1}\n\n");
                        // Holds the rest until the client has the first event.
                        let _ = go_on.recv_timeout(WAIT);
                        chunk(&mut s, "event: message_stop\ndata: {\"n\":2}\n\n");
                        let _ = s.write_all(b"0\r\n\r\n");
                    }
                    Answer::Plain { status, body } => {
                        let _ = write!(
                            s,
                            "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n\
                             content-length: {}\r\nconnection: close\r\n\r\n{body}",
                            body.len()
                        );
                    }
                }
            }
        });
        Upstream {
            port,
            received,
            answers,
        }
    }

    fn next(&self) -> Received {
        self.received
            .recv_timeout(WAIT)
            .expect("the proxy forwarded the request")
    }
}

/// `worldfs proxy` as a child, killed when dropped.
struct Proxy {
    child: Child,
    addr: String,
    /// What it printed on stderr so far.
    said: Arc<Mutex<Vec<String>>>,
}

impl Proxy {
    fn start(m: &Mount, upstream: u16, extra: &[&str]) -> Proxy {
        let mut args: Vec<std::ffi::OsString> = vec!["--socket".into(), m.socket().into()];
        args.extend(extra.iter().map(Into::into));
        Proxy::spawn(Command::new(common::bin()), upstream, &args)
    }

    /// Started in `dir` without `--socket`, as a user starts it in the mounted project.
    fn start_in(dir: &std::path::Path, upstream: u16) -> Proxy {
        let mut cmd = Command::new(common::bin());
        cmd.current_dir(dir).env_remove("WORLDFS_SOCKET");
        Proxy::spawn(cmd, upstream, &[])
    }

    /// `cmd` runs `worldfs`; the proxy's options every test uses come first, then `args`.
    fn spawn(mut cmd: Command, upstream: u16, args: &[std::ffi::OsString]) -> Proxy {
        let mut child = cmd
            .args(["-v", "proxy", "--listen", "127.0.0.1:0", "--upstream"])
            .arg(format!("http://127.0.0.1:{upstream}"))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn worldfs proxy");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, rx) = mpsc::channel();
        let said = Arc::new(Mutex::new(Vec::new()));
        let keep = Arc::clone(&said);
        thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                eprintln!("proxy: {line}");
                if let Ok(mut v) = keep.lock() {
                    v.push(line.clone());
                }
                if let Some(rest) = line.strip_prefix("worldfs: proxy on http://") {
                    let addr = rest.split_whitespace().next().unwrap_or_default();
                    let _ = tx.send(addr.to_owned());
                }
            }
        });
        let addr = match rx.recv_timeout(WAIT) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                panic!("worldfs proxy did not say where it listens");
            }
        };
        Proxy { child, addr, said }
    }

    /// SIGTERM, as a service manager or Ctrl-C stops it; its exit status.
    fn stop(&mut self) -> std::process::ExitStatus {
        let pid = i32::try_from(self.child.id()).expect("pid");
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        common::wait_child(&mut self.child, WAIT).expect("the proxy stops on SIGTERM")
    }

    /// Waits until a line it printed contains `what`.
    fn says(&self, what: &str) -> bool {
        common::wait_until(WAIT, || {
            self.said
                .lock()
                .is_ok_and(|v| v.iter().any(|l| l.contains(what)))
        })
        .is_some()
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Claude Code request: reminders and the prompt, `turns` Bash calls, a Read of calc.py as
/// the last turn.
fn claude_request(first_prompt: &str, file: &str, turns: usize) -> Value {
    let mut messages = vec![json!({"role": "user", "content": [
        {"type": "text", "text": "<system-reminder>\nAs you answer, use CLAUDE.md: tabs only.\n</system-reminder>"},
        {"type": "text", "text": first_prompt, "cache_control": {"type": "ephemeral"}}
    ]})];
    for i in 0..turns {
        messages.push(json!({"role": "assistant", "content": [
            {"type": "text", "text": format!("Let me look around, step {i}.")},
            {"type": "tool_use", "id": format!("toolu_bash{i}"), "name": "Bash", "input": {"command": "ls -la"}}
        ]}));
        messages.push(json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": format!("toolu_bash{i}"), "content": "a long stale listing ".repeat(200)}
        ]}));
    }
    messages.push(json!({"role": "assistant", "content": [
        {"type": "thinking", "thinking": "Read the file.", "signature": "c2lnbmF0dXJl"},
        {"type": "tool_use", "id": "toolu_read", "name": "Read", "input": {"file_path": file}}
    ]}));
    messages.push(json!({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_read", "content": "1\tdef add(a, b):", "cache_control": {"type": "ephemeral"}}
    ]}));
    json!({
        "model": "claude-sonnet-x",
        "max_tokens": 32000,
        "stream": true,
        "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
        "tools": [
            {"name": "Read", "description": "Read a file", "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"}}}},
            {"name": "Bash", "description": "Run a command", "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}}}
        ],
        "messages": messages,
        "metadata": {"user_id": "u1"},
        "a_field_from_next_year": [1, 2, 3]
    })
}

fn post(url: &str, body: &Value) -> reqwest::blocking::Response {
    post_as(url, body, None)
}

/// Posts as Claude Code does, naming its session in a header when `session` is given.
fn post_as(url: &str, body: &Value, session: Option<&str>) -> reqwest::blocking::Response {
    post_with(url, body, session, None)
}

/// [`post_as`], naming a subagent in a header as Claude Code does on its subagents' calls.
fn post_with(
    url: &str,
    body: &Value,
    session: Option<&str>,
    agent: Option<&str>,
) -> reqwest::blocking::Response {
    let mut req = reqwest::blocking::Client::builder()
        .timeout(WAIT)
        .build()
        .expect("client")
        .post(url);
    if let Some(s) = session {
        req = req.header("x-claude-code-session-id", s);
    }
    if let Some(a) = agent {
        req = req.header("x-claude-code-agent-id", a);
    }
    req.header("x-api-key", "sk-test")
        .header("anthropic-version", "2023-06-01")
        .header("anthropic-beta", "interleaved-thinking-2025-05-14")
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .expect("the proxy answers")
}

/// `body` with the tool that starts subagents, which only a session's main thread has.
fn with_agent(mut body: Value) -> Value {
    body["tools"]
        .as_array_mut()
        .expect("tools")
        .push(json!({"name": "Agent", "description": "Start a subagent", "input_schema": {"type": "object"}}));
    body
}

/// Posts `body` through the proxy (the API answers `{}`) and returns what reached the API.
fn received(up: &Upstream, proxy: &Proxy, body: &Value) -> Received {
    received_as(up, proxy, body, None)
}

/// As [`received`], for a call that names its session in the header.
fn received_as(up: &Upstream, proxy: &Proxy, body: &Value, session: Option<&str>) -> Received {
    up.answers
        .send(Answer::Plain {
            status: 200,
            body: "{}".into(),
        })
        .expect("queue");
    let _ = post_as(&proxy.url("/v1/messages"), body, session);
    up.next()
}

/// The body that reached the API, as JSON.
fn send_through(up: &Upstream, proxy: &Proxy, body: &Value) -> Value {
    received(up, proxy, body).json()
}

/// Posts `body` through the proxy and checks the API received it byte for byte.
fn assert_passes_untouched(up: &Upstream, proxy: &Proxy, body: &Value) {
    assert_eq!(
        received(up, proxy, body).body,
        body.to_string().into_bytes()
    );
}

fn texts(v: &Value) -> String {
    let mut out = String::new();
    match v {
        Value::String(s) => out.push_str(s),
        Value::Array(a) => a.iter().for_each(|x| out.push_str(&texts(x))),
        Value::Object(o) => o.values().for_each(|x| out.push_str(&texts(x))),
        _ => {}
    }
    out
}

/// Runs `worldfs hook` on `event`, as Claude Code passes it for a session working in the
/// mount's root; from `/`, since the hook finds the mount by the event's `cwd`.
fn tell(m: &Mount, event: Value) {
    tell_as(m, "s1", event);
}

/// As [`tell`], for the session `session`.
fn tell_as(m: &Mount, session: &str, event: Value) {
    let mut v = event;
    v["session_id"] = session.into();
    v["cwd"] = m.root.to_string_lossy().into_owned().into();
    common::hook(std::path::Path::new("/"), &v.to_string());
}

/// What the hooks tell when `session` starts a conversation (`source`: `startup`, `clear`) and
/// its user types `prompt`.
fn start_as(m: &Mount, session: &str, source: &str, prompt: &str) {
    tell_as(
        m,
        session,
        json!({"hook_event_name": "SessionStart", "source": source}),
    );
    tell_as(
        m,
        session,
        json!({"hook_event_name": "UserPromptSubmit", "prompt": prompt}),
    );
}

/// A mount holding `calc.py`, with the goal set and the file read by the agent (`cat`: a
/// reader the world counts as the agent's, which this test's own process is not).
fn session_that_read_calc() -> (Mount, Client) {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::write(src.join("calc.py"), "def add(a, b):\n    return a + b\n").expect("write");
    });
    let mut c = Client::connect(&m.socket(), WAIT).expect("connect");
    c.call("goal.set", json!({ "goal": PROMPT }))
        .expect("goal.set");
    let out = Command::new("cat")
        .arg(m.path("calc.py"))
        .output()
        .expect("cat through the mount");
    assert!(out.status.success());
    (m, c)
}

#[test]
fn the_main_conversation_goes_upstream_as_the_present() {
    // The agent reads the file, then edits it: the history's copy is stale, the projection's
    // must be what is on disk.
    let (m, mut c) = session_that_read_calc();
    std::fs::write(
        m.path("calc.py"),
        "def add(a, b):\n    return round(a + b, 2)\n",
    )
    .expect("edit through the mount");
    let file = m.path("calc.py").to_string_lossy().into_owned();

    let up = Upstream::start();
    let proxy = Proxy::start(&m, up.port, &[]);

    // 1. The main conversation, streamed.
    let body = claude_request(PROMPT, &file, 6);
    let (go_on_tx, go_on) = mpsc::channel();
    up.answers
        .send(Answer::Stream { go_on })
        .expect("queue the answer");
    let resp = post(&proxy.url("/v1/messages?beta=true"), &body);
    let got = up.next();
    assert_eq!(got.request_line, "POST /v1/messages?beta=true HTTP/1.1");
    for (k, v) in [
        ("x-api-key", "sk-test"),
        ("anthropic-version", "2023-06-01"),
        ("anthropic-beta", "interleaved-thinking-2025-05-14"),
    ] {
        assert_eq!(got.header(k), Some(v), "header {k} passes through");
    }
    let sent = got.json();
    for k in [
        "model",
        "max_tokens",
        "stream",
        "system",
        "tools",
        "metadata",
        "a_field_from_next_year",
    ] {
        assert_eq!(sent[k], body[k], "{k} passes untouched");
    }
    let msgs = sent["messages"].as_array().expect("messages");
    let orig = body["messages"].as_array().expect("messages");
    let n = msgs.len();
    assert_eq!(
        &msgs[n - 2..],
        &orig[orig.len() - 2..],
        "the real last turn is kept verbatim"
    );
    let all = texts(&sent["messages"]);
    assert!(
        all.contains("CLAUDE.md"),
        "Claude Code's reminders are kept"
    );
    assert!(all.contains(PROMPT), "the goal opens the projection");
    assert!(
        all.contains("return round(a + b, 2)"),
        "the file as it is now"
    );
    assert!(
        !all.contains("a long stale listing"),
        "the history between is replaced"
    );
    assert!(worldfs::projection::validate::count_cache_control(&sent) <= 4);
    if let Err(v) = worldfs::projection::validate::anthropic(&sent) {
        panic!("the rewritten request breaks the API's rules: {v:?}");
    }

    // The answer streams: the first event arrives while the stand-in still holds the second.
    assert_eq!(resp.status(), 200);
    assert_eq!(
        resp.headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok()),
        Some("text/event-stream")
    );
    assert_eq!(
        resp.headers()
            .get("request-id")
            .and_then(|v| v.to_str().ok()),
        Some("req_1")
    );
    let mut r = BufReader::new(resp);
    let mut first = String::new();
    while !first.ends_with("\n\n") {
        let before = first.len();
        r.read_line(&mut first).expect("read the stream");
        assert!(first.len() > before, "the stream ended early: {first:?}");
    }
    assert_eq!(first, "event: message_start\ndata: {\"n\":1}\n\n");
    go_on_tx.send(()).expect("let the stand-in go on");
    let mut rest = String::new();
    r.read_to_string(&mut rest).expect("read the rest");
    assert_eq!(rest, "event: message_stop\ndata: {\"n\":2}\n\n");

    // 2. count_tokens is rewritten the same way, so Claude Code's count agrees with what is sent.
    up.answers
        .send(Answer::Plain {
            status: 200,
            body: r#"{"input_tokens": 1234}"#.into(),
        })
        .expect("queue");
    let mut count_body = body.clone();
    if let Some(o) = count_body.as_object_mut() {
        for k in ["max_tokens", "stream", "metadata"] {
            o.remove(k);
        }
    }
    let resp = post(
        &proxy.url("/v1/messages/count_tokens?beta=true"),
        &count_body,
    );
    assert_eq!(resp.text().expect("body"), r#"{"input_tokens": 1234}"#);
    let counted = up.next().json();
    assert_eq!(counted["messages"], sent["messages"]);

    // 3. A subagent's conversation (its first message is its own task) goes byte for byte.
    let sub = claude_request("Find where add() is called", &file, 3);
    assert_passes_untouched(&up, &proxy, &sub);

    // 4. Upstream errors come back unchanged.
    let err = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    up.answers
        .send(Answer::Plain {
            status: 529,
            body: err.into(),
        })
        .expect("queue");
    let resp = post(&proxy.url("/v1/messages"), &body);
    assert_eq!(resp.status().as_u16(), 529);
    assert_eq!(resp.text().expect("body"), err);
    up.next();

    // The mount keeps the account of the main conversation's calls (counted after each call),
    // and `worldfs status` shows it.
    let proxy_stats = |c: &mut Client| c.call("stats", json!({})).expect("stats")["proxy"].clone();
    common::wait_until(WAIT, || proxy_stats(&mut c)["calls"] == 3)
        .expect("three calls of the main conversation reported");
    let p = proxy_stats(&mut c);
    assert_eq!(p["rewritten"], 3);
    let (history, sent) = (
        p["history_tokens_total"].as_u64().unwrap_or(0),
        p["sent_tokens_total"].as_u64().unwrap_or(u64::MAX),
    );
    assert!(sent < history, "sent {sent} of {history} tokens");
    let status = common::run_with_timeout(
        Command::new(common::bin())
            .args(["status", "--socket"])
            .arg(m.socket()),
        WAIT,
    );
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains("proxy:    3 model calls (3 sent with the projection)"),
        "{status}"
    );

    // Stopped, it says what it did: three calls rewritten (the stream, the count, the one the
    // API refused), the subagent's passed.
    let mut proxy = proxy;
    assert!(proxy.stop().success());
    assert!(
        proxy.says("proxy stopped; model calls: 3 sent with the projection, 1 as they came, 0 "),
        "the summary at exit"
    );
}

/// `v` with every `cache_control` in it set to `cc`.
fn mark_all(v: &mut Value, cc: &Value) {
    match v {
        Value::Object(m) => {
            if m.contains_key("cache_control") {
                m.insert("cache_control".into(), cc.clone());
            }
            m.values_mut().for_each(|x| mark_all(x, cc));
        }
        Value::Array(a) => a.iter_mut().for_each(|x| mark_all(x, cc)),
        _ => {}
    }
}

#[test]
fn an_hour_long_prompt_cache_is_kept_hour_long_around_the_projection() {
    let (m, _c) = session_that_read_calc();
    let file = m.path("calc.py").to_string_lossy().into_owned();
    let up = Upstream::start();
    let proxy = Proxy::start(&m, up.port, &[]);

    // Claude Code on a subscription asks the cache to keep its system prompt (for every
    // session) and its messages for an hour. The API refuses an hour-long breakpoint after a
    // five-minute one, so the projection's, placed before the last turn's, must be an hour
    // long too, or every rewritten call would come back 400.
    let mut body = claude_request(PROMPT, &file, 6);
    mark_all(
        &mut body["system"],
        &json!({"type": "ephemeral", "ttl": "1h", "scope": "global"}),
    );
    mark_all(
        &mut body["messages"],
        &json!({"type": "ephemeral", "ttl": "1h"}),
    );
    up.answers
        .send(Answer::Plain {
            status: 200,
            body: "{}".into(),
        })
        .expect("queue");
    let resp = post(&proxy.url("/v1/messages"), &body);
    assert_eq!(resp.status(), 200);
    let sent = up.next().json();
    assert_eq!(
        sent["system"], body["system"],
        "the system prompt as it came"
    );
    let all = texts(&sent["messages"]);
    assert!(all.contains("def add(a, b):"), "the projection was sent");
    assert!(
        !all.contains("a long stale listing"),
        "the history between is replaced"
    );
    if let Err(v) = worldfs::projection::validate::anthropic(&sent) {
        panic!("the rewritten request breaks the API's rules: {v:?}");
    }
    let ttls = worldfs::projection::validate::breakpoint_ttls(&sent);
    assert!(
        ttls.len() > 2,
        "the projection placed breakpoints: {ttls:?}"
    );
    assert!(
        ttls.iter()
            .all(|t| *t == Some(worldfs::projection::CacheTtl::OneHour)),
        "{ttls:?}"
    );
}

#[test]
fn with_claude_codes_hooks_the_session_is_rewritten_and_later_prompts_follow() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::write(src.join("calc.py"), "def add(a, b):\n    return a + b\n").expect("write");
    });
    let file = m.path("calc.py").to_string_lossy().into_owned();
    // What Claude Code's hooks tell the mount (README, "With Claude Code"): a new session, the
    // prompt, a Read (the mount sees the file read), and a second prompt later on.
    start_as(&m, "s1", "startup", PROMPT);
    // A Bash call: its output stays in the projection while calc.py is unchanged.
    let bash = |name: &str, extra: Value| {
        let mut ev = json!({"hook_event_name": name, "tool_name": "Bash",
                            "tool_use_id": "toolu_grep",
                            "tool_input": {"command": "grep -n return calc.py"}});
        for (k, v) in extra.as_object().into_iter().flatten() {
            ev[k] = v.clone();
        }
        tell(&m, ev);
    };
    bash("PreToolUse", json!({}));
    let out = Command::new("grep")
        .args(["-n", "return", "calc.py"])
        .current_dir(&m.root)
        .output()
        .expect("grep");
    assert!(out.status.success());
    let grepped = String::from_utf8_lossy(&out.stdout).into_owned();
    bash(
        "PostToolUse",
        json!({"tool_response": {"stdout": grepped, "stderr": "", "interrupted": false}}),
    );
    let out = Command::new("cat").arg(&file).output().expect("cat");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    tell(
        &m,
        json!({
            "hook_event_name": "PostToolUse", "tool_name": "Read", "tool_use_id": "toolu_read",
            "tool_input": {"file_path": file},
            "tool_response": {"type": "text", "file": {"filePath": file, "content": text,
                              "numLines": 2, "startLine": 1, "totalLines": 2}},
        }),
    );
    // The agent's plan (TodoWrite): in the history only, so the projection must carry it.
    tell(
        &m,
        json!({
            "hook_event_name": "PostToolUse", "tool_name": "TodoWrite", "tool_use_id": "toolu_todo",
            "tool_input": {"todos": [
                {"content": "Make add() round", "status": "completed", "activeForm": "Making"},
                {"content": "Check sub()", "status": "in_progress", "activeForm": "Checking"},
            ]},
            "tool_response": {"oldTodos": [], "newTodos": []},
        }),
    );
    let later = "now make sub() round too";
    tell(
        &m,
        json!({"hook_event_name": "UserPromptSubmit", "prompt": later}),
    );

    let up = Upstream::start();
    let proxy = Proxy::start(&m, up.port, &[]);
    // The conversation so far, then the answer to the first prompt and the second prompt.
    let mut body = claude_request(PROMPT, &file, 3);
    let msgs = body["messages"].as_array_mut().expect("messages");
    msgs.push(
        json!({"role": "assistant", "content": [{"type": "text", "text": "add() rounds now."}]}),
    );
    msgs.push(json!({"role": "user", "content": [{"type": "text", "text": later}]}));
    let sent = send_through(&up, &proxy, &body);
    let msgs = sent["messages"].as_array().expect("messages");
    let orig = body["messages"].as_array().expect("messages");
    assert!(msgs.len() < orig.len(), "the history was replaced");
    let block_texts = |m: &Value| -> Vec<Value> {
        m["content"]
            .as_array()
            .map(|c| c.iter().map(|b| b["text"].clone()).collect())
            .unwrap_or_default()
    };
    let (first, was) = (block_texts(&msgs[0]), block_texts(&orig[0]));
    assert_eq!(
        &first[..was.len()],
        &was[..],
        "the first message goes as it came, the projection after it"
    );
    assert_eq!(&msgs[msgs.len() - 2..], &orig[orig.len() - 2..]);
    let all = texts(&sent["messages"]);
    assert!(
        all.contains(&format!("Then the user asked:\n{later}")),
        "the later prompt, from the goal the hook kept"
    );
    assert!(all.contains("return a + b"), "the file read, as it is");
    assert!(
        all.contains("Output of `grep -n return calc.py`, exit code 0")
            && all.contains("2:    return a + b"),
        "the Bash call's output, still current: {all}"
    );
    assert!(
        all.contains("Tasks:\n- [done] Make add() round\n- [in progress] Check sub()"),
        "the agent's task list: {all}"
    );
    assert!(!all.contains("a long stale listing"));
}

#[test]
fn after_claude_code_compacts_the_conversation_it_is_still_rewritten() {
    let (m, mut c) = session_that_read_calc();
    let file = m.path("calc.py").to_string_lossy().into_owned();
    let up = Upstream::start();
    let proxy = Proxy::start(&m, up.port, &[]);
    // Claude Code's conversation after `/compact`: the summary opens it, not the prompt.
    let mut body = claude_request("unused", &file, 3);
    body["messages"][0]["content"][1]["text"] = json!(format!(
        "This session is being continued from a previous conversation that ran out of \
         context. The summary below covers the earlier portion of the conversation.\n\n\
         Summary:\n1. Primary Request and Intent: the user asked: {PROMPT}"
    ));
    let body = with_agent(body);
    // Until the hook tells of the compaction, it is no conversation the mount knows, and `-v`
    // says why, since the call looks like the session's own (it can start subagents).
    assert_passes_untouched(&up, &proxy, &body);
    assert!(proxy.says("sent as it came: its first message is neither the session's first prompt"));

    tell(
        &m,
        json!({"hook_event_name": "SessionStart", "source": "compact"}),
    );
    let g = c.call("goal.get", json!({})).expect("goal.get");
    assert_eq!(g["compacted"], true, "{g}");
    assert_eq!(g["goal"], PROMPT, "a compaction keeps the goal");

    let sent = send_through(&up, &proxy, &body);
    let msgs = sent["messages"].as_array().expect("messages");
    let orig = body["messages"].as_array().expect("messages");
    assert!(msgs.len() < orig.len(), "the history was replaced");
    assert_eq!(
        msgs[0]["content"][1]["text"], orig[0]["content"][1]["text"],
        "the summary goes as it came"
    );
    let goal_block = msgs[0]["content"]
        .as_array()
        .expect("blocks")
        .iter()
        .any(|b| b["text"] == PROMPT);
    assert!(
        goal_block,
        "the goal, whole, after the summary: {}",
        msgs[0]
    );
    assert_eq!(&msgs[msgs.len() - 2..], &orig[orig.len() - 2..]);
    let all = texts(&sent["messages"]);
    assert!(all.contains("return a + b"), "the file read, as it is");
    assert!(!all.contains("a long stale listing"));

    // Claude Code attaches the files read last to the summary: the projection does not show
    // calc.py a second time while that copy is what is on disk.
    let mut attached = body.clone();
    let copy = format!(
        "<system-reminder>\nCalled the Read tool with the following input: {}\nResult of \
         calling the Read tool:\n1\tdef add(a, b):\n2\t    return a + b\n</system-reminder>",
        json!({ "file_path": file })
    );
    attached["messages"][0]["content"]
        .as_array_mut()
        .expect("blocks")
        .push(json!({"type": "text", "text": copy}));
    let sent = send_through(&up, &proxy, &attached);
    let all = texts(&sent["messages"]);
    assert_eq!(all.matches("return a + b").count(), 1, "shown once: {all}");
    assert!(proxy.says("1 file left out, the request shows it as it is"));
    // Changed since, it is shown as it is now.
    std::fs::write(m.path("calc.py"), "def add(a, b):\n    return a - b\n").expect("write");
    let sent = send_through(&up, &proxy, &attached);
    let all = texts(&sent["messages"]);
    assert!(all.contains("return a - b"), "{all}");

    // A subagent's own compacted conversation looks the same (since 2.1.332 subagents can start
    // subagents), but Claude Code names the subagent in a header: it goes as it came.
    up.answers
        .send(Answer::Plain {
            status: 200,
            body: "{}".into(),
        })
        .expect("queue");
    let _ = post_with(&proxy.url("/v1/messages"), &body, None, Some("a1b2c3"));
    assert_eq!(up.next().body, body.to_string().into_bytes(), "as it came");

    // A new conversation ends the compacted one: with the same prompt again, the summary's
    // conversation is no longer the session's.
    start_as(&m, "s1", "clear", PROMPT);
    let g = c.call("goal.get", json!({})).expect("goal.get");
    assert_eq!(g["compacted"], false, "{g}");
    assert_passes_untouched(&up, &proxy, &body);
}

/// Claude Code reads CLAUDE.md through the mount (so it is in the world) and puts it into the
/// first message, which goes as it came: the projection does not show it a second time while
/// that copy is what is on disk.
#[test]
fn claude_md_in_the_first_message_is_not_projected_again() {
    let (m, _c) = session_that_read_calc();
    let rules = "# Rules\n\nUse tabs, and run the tests after a change.\n";
    std::fs::write(m.path("CLAUDE.md"), rules).expect("write");
    let out = Command::new("cat")
        .arg(m.path("CLAUDE.md"))
        .output()
        .expect("cat through the mount");
    assert!(out.status.success());
    let up = Upstream::start();
    let proxy = Proxy::start(&m, up.port, &[]);
    let file = m.path("calc.py").to_string_lossy().into_owned();
    let mut body = claude_request(PROMPT, &file, 3);
    body["messages"][0]["content"][0]["text"] = json!(format!(
        "<system-reminder>\nCodebase and user instructions are shown below.\n\nContents of {} \
         (project instructions, checked into the codebase):\n\n{rules}\n</system-reminder>",
        m.path("CLAUDE.md").display()
    ));
    let once = "Use tabs, and run the tests after a change.";
    let sent = send_through(&up, &proxy, &body);
    let all = texts(&sent["messages"]);
    assert!(
        all.contains("return a + b"),
        "the projection is there: {all}"
    );
    assert_eq!(all.matches(once).count(), 1, "shown once: {all}");
    // Changed since, the projection shows it as it is now, after the first message's copy.
    std::fs::write(m.path("CLAUDE.md"), "# Rules\n\nUse spaces.\n").expect("write");
    let all = texts(&send_through(&up, &proxy, &body)["messages"]);
    assert!(all.contains("Use spaces."), "{all}");
}

/// The file the last turn's Read returned whole is in front of the model as it came: the
/// projection before it does not show it a second time, while that copy is what is on disk.
#[test]
fn a_file_the_last_turn_read_whole_is_not_projected_again() {
    let (m, _c) = session_that_read_calc();
    let up = Upstream::start();
    let proxy = Proxy::start(&m, up.port, &[]);
    let file = m.path("calc.py").to_string_lossy().into_owned();
    let mut body = claude_request(PROMPT, &file, 3);
    let last = body["messages"].as_array().map_or(0, Vec::len) - 1;
    body["messages"][last]["content"][0]["content"] =
        json!("1\tdef add(a, b):\n2\t    return a + b\n3\t");
    let sent = send_through(&up, &proxy, &body);
    let all = texts(&sent["messages"]);
    assert!(
        sent["messages"].as_array().map_or(0, Vec::len)
            < body["messages"].as_array().map_or(0, Vec::len),
        "rewritten: {all}"
    );
    assert_eq!(all.matches("return a + b").count(), 1, "shown once: {all}");
    assert!(proxy.says("1 file left out, the request shows it as it is"));
    // Changed since (another program's save), the projection shows it as it is now.
    std::fs::write(m.path("calc.py"), "def add(a, b):\n    return a - b\n").expect("write");
    let all = texts(&send_through(&up, &proxy, &body)["messages"]);
    assert!(
        all.contains("return a - b") && all.contains("return a + b"),
        "{all}"
    );
}

/// So is a notebook the last turn read: Read shows its cells as the world does.
#[test]
fn a_notebook_the_last_turn_read_is_not_projected_again() {
    let (m, _c) = session_that_read_calc();
    let nb = json!({"cells": [
        {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": "# Totals"},
        {"cell_type": "code", "id": "sum", "metadata": {}, "execution_count": 1,
         "source": "print(sum([1, 2]))",
         "outputs": [{"output_type": "stream", "name": "stdout", "text": "3\n"}]}
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5});
    std::fs::write(m.path("totals.ipynb"), nb.to_string()).expect("write");
    let out = Command::new("cat")
        .arg(m.path("totals.ipynb"))
        .output()
        .expect("cat through the mount");
    assert!(out.status.success());
    let up = Upstream::start();
    let proxy = Proxy::start(&m, up.port, &[]);
    let file = m.path("totals.ipynb").to_string_lossy().into_owned();
    let body = claude_request(PROMPT, &file, 3);
    let cells = "<cell id=\"intro\"><cell_type>markdown</cell_type># Totals</cell id=\"intro\">\n\
                 <cell id=\"sum\">print(sum([1, 2]))</cell id=\"sum\">\n\n3\n";
    let mut read = body.clone();
    let last = read["messages"].as_array().map_or(0, Vec::len) - 1;
    read["messages"][last]["content"][0]["content"] = json!([{"type": "text", "text": cells}]);
    let all = texts(&send_through(&up, &proxy, &read)["messages"]);
    assert_eq!(
        all.matches("print(sum([1, 2]))").count(),
        1,
        "shown once: {all}"
    );
    assert!(proxy.says("1 file left out, the request shows it as it is"));
    // A result that is not the cells as they are: the projection shows the notebook.
    let all = texts(&send_through(&up, &proxy, &body)["messages"]);
    assert_eq!(all.matches("print(sum([1, 2]))").count(), 1, "{all}");
    assert!(all.contains("<cell id=\"sum\">"), "{all}");
}

#[test]
fn a_resumed_conversation_is_the_sessions_from_its_first_call() {
    let (m, mut c) = session_that_read_calc();
    let file = m.path("calc.py").to_string_lossy().into_owned();
    let up = Upstream::start();
    let proxy = Proxy::start(&m, up.port, &[]);
    let other = "Make sub() saturate";
    let mut resumed = with_agent(claude_request(other, &file, 3));
    let msgs = resumed["messages"].as_array_mut().expect("messages");
    msgs.push(
        json!({"role": "assistant", "content": [{"type": "text", "text": "sub() saturates."}]}),
    );
    msgs.push(json!({"role": "user", "content": [{"type": "text", "text": "and add()"}]}));
    // Another conversation than the goal's: it goes as it came, until a resume is told.
    assert_passes_untouched(&up, &proxy, &resumed);

    tell(
        &m,
        json!({"hook_event_name": "SessionStart", "source": "resume"}),
    );
    // What Claude Code does next: the prompt typed after the resume, then the call.
    tell(
        &m,
        json!({"hook_event_name": "UserPromptSubmit", "prompt": "and add()"}),
    );
    assert_eq!(
        c.call("goal.get", json!({})).expect("goal.get")["resumed"],
        true
    );
    // A subagent's call (no Agent tool) says nothing of the conversation resumed.
    assert_passes_untouched(&up, &proxy, &claude_request("List callers", &file, 3));
    let sent = send_through(&up, &proxy, &resumed);
    let orig = resumed["messages"].as_array().expect("messages");
    let sent_msgs = sent["messages"].as_array().expect("messages");
    assert!(sent_msgs.len() < orig.len(), "the history was replaced");
    let g = c.call("goal.get", json!({})).expect("goal.get");
    assert_eq!(
        g,
        json!({"goal": format!("{other}\n\nThen the user asked:\nand add()"), "compacted": false,
               "resumed": false, "session": "s1", "conversations": 1}),
        "the goal, read from the conversation resumed"
    );
    assert!(proxy.says("the conversation resumed is another one"));
    let all = texts(&sent["messages"]);
    assert!(all.contains("return a + b"), "the file read, as it is");
    assert!(!all.contains("a long stale listing"));

    // Resuming the goal's own conversation changes nothing but the mark.
    tell(
        &m,
        json!({"hook_event_name": "SessionStart", "source": "resume"}),
    );
    let again = send_through(&up, &proxy, &resumed);
    assert_eq!(again["messages"], sent["messages"]);
    assert_eq!(c.call("goal.get", json!({})).expect("goal.get"), g);
}

/// Two Claude Code sessions in one project, both through the proxy: the second one's start
/// does not end the first one's rewriting, and each call is sent with its own session's goal
/// and task list.
#[test]
fn two_sessions_on_one_mount_are_each_rewritten_with_their_own_goal() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::write(src.join("calc.py"), "def add(a, b):\n    return a + b\n").expect("write");
    });
    let file = m.path("calc.py").to_string_lossy().into_owned();
    let (a, b) = (
        "6b1e0c52-0a4f-4c1e-8d9b-1f2e3a4b5c6d",
        "0d6f1c2e-7b5a-4c1e-9a0b-3f2d5e6a7b8c",
    );
    let other = "What does calc.py do?";
    start_as(&m, a, "startup", PROMPT);
    tell_as(
        &m,
        a,
        json!({"hook_event_name": "PostToolUse", "tool_name": "TaskCreate",
               "tool_use_id": "toolu_a_task", "tool_input": {"subject": "Make add() round"},
               "tool_response": {"task": {"id": "1", "subject": "Make add() round"}}}),
    );
    let out = Command::new("cat").arg(&file).output().expect("cat");
    assert!(out.status.success());
    // The second terminal starts, later.
    start_as(&m, b, "startup", other);

    let up = Upstream::start();
    let proxy = Proxy::start(&m, up.port, &[]);
    let first_message_texts = |sent: &Value| texts(&sent["messages"][0]);
    let body_a = with_agent(claude_request(PROMPT, &file, 3));
    let sent = received_as(&up, &proxy, &body_a, Some(a)).json();
    let orig = body_a["messages"].as_array().expect("messages");
    assert!(
        sent["messages"].as_array().expect("messages").len() < orig.len(),
        "the first session's call is rewritten after the second one started"
    );
    let all = texts(&sent["messages"]);
    assert!(all.contains("Tasks:\n- [to do] Make add() round"), "{all}");
    assert!(all.contains("return a + b"), "the file read, as it is");
    assert!(!all.contains(other), "nothing of the other session");

    let body_b = with_agent(claude_request(other, &file, 3));
    let sent = received_as(&up, &proxy, &body_b, Some(b)).json();
    assert!(
        sent["messages"].as_array().expect("messages").len() < orig.len(),
        "the second session's call is rewritten"
    );
    let all = texts(&sent["messages"]);
    assert!(first_message_texts(&sent).contains(other));
    assert!(
        !all.contains("Make add() round"),
        "not the other's tasks: {all}"
    );

    assert!(
        proxy.says(&format!("for session {b}")),
        "-v says which session"
    );
    // Claude Code before 2.1.86 names its session in the body's metadata only.
    let mut by_metadata = body_a.clone();
    by_metadata["metadata"]["user_id"] = json!(
        json!({"device_id": "d", "account_uuid": "",
                                                        "session_id": a})
        .to_string()
    );
    let sent = send_through(&up, &proxy, &by_metadata);
    assert!(
        sent["messages"].as_array().expect("messages").len() < orig.len(),
        "named in the metadata, the first session's call is rewritten too"
    );
    // A call naming no session is taken for the session changed last: the second one.
    assert_passes_untouched(&up, &proxy, &body_a);
    assert!(proxy.says("sent as it came"));
}

/// A Codex request (the Responses API, vendor-docs/codex.md): its instructions and
/// environment, the prompt, then `turns` commands with their reasoning, each a `cat calc.py`
/// whose output is the file as it was then.
fn codex_request(prompt: &str, turns: usize) -> Value {
    let text = |role: &str, t: &str| json!({"type": "message", "role": role, "content": [{"type": "input_text", "text": t}]});
    let mut input = vec![
        text(
            "developer",
            "You are a coding agent running in the Codex CLI.",
        ),
        text(
            "user",
            "<environment_context>\n  <cwd>/p</cwd>\n</environment_context>",
        ),
        text("user", prompt),
    ];
    for i in 0..turns {
        input.push(
            json!({"type": "reasoning", "id": format!("rs_{i}"), "summary": [],
                          "encrypted_content": format!("gAAAAB{i}")}),
        );
        input.push(json!({"type": "function_call", "id": format!("fc_{i}"), "name": "exec_command",
                          "arguments": "{\"cmd\":\"cat calc.py\"}", "call_id": format!("call_{i}")}));
        input.push(json!({"type": "function_call_output", "call_id": format!("call_{i}"),
                          "output": format!("Process exited with code 0\nOutput:\ndef add(a, b):\n    return a + b  # then {i}\n")}));
    }
    json!({
        "model": "gpt-5-codex", "instructions": "", "stream": true, "store": false,
        "include": ["reasoning.encrypted_content"],
        "tools": [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}],
        "input": input, "prompt_cache_key": "s1",
    })
}

/// Posts `body` as Codex does (to `/v1/responses`, its session in a header) through the proxy
/// (the API answers `{}`) and returns what reached the API.
fn received_from_codex(up: &Upstream, proxy: &Proxy, body: &Value) -> Received {
    received_from_codex_as(up, proxy, body.to_string().into_bytes(), None)
}

/// [`received_from_codex`] with the body as bytes, compressed as `coding` says
/// (`Content-Encoding`).
fn received_from_codex_as(
    up: &Upstream,
    proxy: &Proxy,
    body: Vec<u8>,
    coding: Option<&str>,
) -> Received {
    up.answers
        .send(Answer::Plain {
            status: 200,
            body: "{}".into(),
        })
        .expect("queue");
    let mut req = reqwest::blocking::Client::builder()
        .timeout(WAIT)
        .build()
        .expect("client")
        .post(proxy.url("/v1/responses"))
        .header("session-id", "s1")
        .header("authorization", "Bearer sk-test")
        .header("content-type", "application/json");
    if let Some(c) = coding {
        req = req.header("content-encoding", c);
    }
    let _ = req.body(body).send().expect("the proxy answers");
    up.next()
}

/// Codex signed in with ChatGPT compresses its calls with zstd: they are read, rewritten, and
/// sent compressed the same way; gzip too. A coding not read here, or a body that does not
/// decode, goes byte for byte.
#[test]
fn compressed_calls_are_rewritten_and_compressed_again() {
    use std::io::Read;
    let (m, _c) = session_that_read_calc();
    let up = Upstream::start();
    let proxy = Proxy::start(&m, up.port, &[]);
    let body = codex_request(PROMPT, 3);
    let plain = body.to_string().into_bytes();
    let zstd = ruzstd::encoding::compress_to_vec(
        plain.as_slice(),
        ruzstd::encoding::CompressionLevel::Fastest,
    );
    let mut gzip = Vec::new();
    flate2::read::GzEncoder::new(plain.as_slice(), flate2::Compression::fast())
        .read_to_end(&mut gzip)
        .expect("gzip");
    let unzstd = |b: &[u8]| {
        let mut src = b;
        let mut out = Vec::new();
        ruzstd::decoding::StreamingDecoder::new(&mut src)
            .expect("a zstd frame")
            .read_to_end(&mut out)
            .expect("zstd");
        out
    };
    let ungzip = |b: &[u8]| {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(b)
            .read_to_end(&mut out)
            .expect("gzip");
        out
    };
    type Unpack = fn(&[u8]) -> Vec<u8>;
    let cases: [(&str, Vec<u8>, Unpack); 2] = [("zstd", zstd, unzstd), ("gzip", gzip, ungzip)];
    for (coding, packed, unpack) in cases {
        let got = received_from_codex_as(&up, &proxy, packed.clone(), Some(coding));
        assert_eq!(got.header("content-encoding"), Some(coding));
        let sent: Value = serde_json::from_slice(&unpack(&got.body)).expect("JSON");
        let items = sent["input"].as_array().expect("input");
        assert_eq!(items.len(), 7, "{coding}: rewritten");
        assert!(
            texts(&items[3]).contains("def add"),
            "{coding}: the projection"
        );
    }
    for (coding, packed) in [("br", plain.clone()), ("zstd", plain.clone())] {
        let got = received_from_codex_as(&up, &proxy, packed.clone(), Some(coding));
        assert_eq!(got.body, packed, "{coding}: as it came");
        assert_eq!(got.header("content-encoding"), Some(coding));
    }
    assert!(
        proxy.says("compressed in a coding not read here: br")
            && proxy.says("compressed in zstd, but does not decode"),
        "the log says why"
    );
}

/// Codex's calls (the Responses API) go upstream with the projection in place of the history
/// between the prompt and the last turn; its side requests and other conversations as they
/// came.
#[test]
fn codexs_calls_go_upstream_as_the_present() {
    let (m, _c) = session_that_read_calc();
    std::fs::write(
        m.path("calc.py"),
        "def add(a, b):\n    return round(a + b, 2)\n",
    )
    .expect("edit through the mount");
    let up = Upstream::start();
    let proxy = Proxy::start(&m, up.port, &[]);
    let body = codex_request(PROMPT, 3);
    let got = received_from_codex(&up, &proxy, &body);
    assert_eq!(got.header("session-id"), Some("s1"));
    let sent = got.json();
    let before = body["input"].as_array().expect("input");
    let after = sent["input"].as_array().expect("input");
    assert_eq!(&after[..3], &before[..3], "the head as it came");
    let projected = texts(&after[3]);
    assert!(projected.contains("round(a + b, 2)"), "{projected}");
    assert!(
        !projected.contains(PROMPT),
        "the head says the goal: {projected}"
    );
    // The last turn as it came, its reasoning's encrypted content included; no stale copy
    // before it.
    assert_eq!(&after[4..], &before[9..]);
    assert_eq!(after.len(), 7);
    let stale = texts(&Value::Array(after[..4].to_vec()));
    assert!(
        !stale.contains("# then 0") && !stale.contains("# then 1"),
        "{stale}"
    );
    for k in [
        "model",
        "instructions",
        "tools",
        "prompt_cache_key",
        "include",
        "store",
    ] {
        assert_eq!(sent[k], body[k], "{k} as it came");
    }
    assert!(
        proxy.says("/v1/responses: sent 7 items"),
        "the log says what went"
    );

    // Another conversation (a subagent's task is its prompt) and a request without the shell
    // tool go byte for byte.
    let other = codex_request("Find where add() is called", 3);
    assert_eq!(
        received_from_codex(&up, &proxy, &other).body,
        other.to_string().into_bytes()
    );
    let mut side = body.clone();
    side["tools"] = json!([]);
    assert_eq!(
        received_from_codex(&up, &proxy, &side).body,
        side.to_string().into_bytes()
    );

    // Codex's `openai` provider asks for a WebSocket first: refused at once, never forwarded,
    // so that it sends its calls over HTTP.
    let ws = reqwest::blocking::Client::new()
        .get(proxy.url("/v1/responses"))
        .header("connection", "Upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .expect("the proxy answers");
    assert_eq!(ws.status().as_u16(), 426);
    assert!(
        up.received
            .recv_timeout(Duration::from_millis(500))
            .is_err(),
        "the WebSocket's request reached upstream"
    );
    assert!(proxy.says("a WebSocket was asked for"), "the log says why");

    // --observe, a user's first look: the call goes as it came, and the proxy says what it
    // would have sent instead.
    drop(proxy);
    let proxy = Proxy::start(&m, up.port, &["--observe"]);
    assert_eq!(
        received_from_codex(&up, &proxy, &body).body,
        body.to_string().into_bytes()
    );
    assert!(
        proxy.says("/v1/responses: would send 7 items"),
        "--observe says what it would send"
    );
}

#[test]
fn observe_mode_and_a_missing_goal_send_requests_as_they_came() {
    let m = Mount::start(common::Mode::Mirror, &[], |src| {
        std::fs::write(src.join("calc.py"), "def add(a, b):\n    return a + b\n").expect("write");
    });
    let file = m.path("calc.py").to_string_lossy().into_owned();
    let up = Upstream::start();
    let body = claude_request(PROMPT, &file, 4);

    // No goal yet (no hook): nothing to match the conversation against.
    let proxy = Proxy::start(&m, up.port, &[]);
    assert_passes_untouched(&up, &proxy, &body);
    drop(proxy);

    // --observe: the goal matches, and still nothing is rewritten.
    let mut c = Client::connect(&m.socket(), WAIT).expect("connect");
    c.call("goal.set", json!({ "goal": PROMPT }))
        .expect("goal.set");
    let proxy = Proxy::start(&m, up.port, &["--observe"]);
    assert_passes_untouched(&up, &proxy, &body);
    assert!(
        proxy.says("/v1/messages: would send"),
        "--observe prints what it would have sent"
    );
    assert!(proxy.says("tokens instead of"), "and what it saves");
    let observed = common::wait_until(WAIT, || {
        let p = c.call("stats", json!({})).expect("stats")["proxy"].clone();
        p["calls"] == 1 && p["rewritten"] == 0
    });
    assert!(observed.is_some(), "one call observed, none rewritten");
}

#[test]
fn an_unreachable_upstream_is_an_api_error_and_no_mount_is_a_clear_start_error() {
    let m = Mount::start(common::Mode::Mirror, &[], |_| {});
    // A port nothing listens on: bind one, then let it go.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    // Started in the mounted directory, as a user would: it finds the socket from there, and
    // then leaves the directory, so it never keeps the mount busy.
    let proxy = Proxy::start_in(&m.root, port);
    let cwd = std::fs::read_link(format!("/proc/{}/cwd", proxy.child.id())).expect("its cwd");
    assert_eq!(cwd, std::path::Path::new("/"));
    let resp = post(&proxy.url("/v1/messages"), &json!({"messages": []}));
    assert_eq!(resp.status().as_u16(), 502);
    let v: Value = serde_json::from_str(&resp.text().expect("body")).expect("JSON error");
    assert_eq!(v["type"], "error");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|s| s.starts_with("worldfs proxy: ")),
        "{v}"
    );
    drop(proxy);

    for (args, says) in [
        (
            &["--upstream", "api.anthropic.com"][..],
            "give an http or https URL",
        ),
        (
            &["--upstream", "ftp://example.com"][..],
            "give an http or https URL",
        ),
        (&["--budget", "0"][..], "at least one token"),
    ] {
        let out = common::run_with_timeout(
            Command::new(common::bin())
                .args(["proxy", "--socket", "/nonexistent/worldfs.sock"])
                .args(args),
            WAIT,
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains(says),
            "{args:?}: {err}"
        );
    }
    let out = common::run_with_timeout(
        Command::new(common::bin())
            .args(["proxy", "--socket", "/nonexistent/worldfs.sock"])
            .env_remove("WORLDFS_SOCKET"),
        WAIT,
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.starts_with("worldfs: error:") && err.contains("/nonexistent/worldfs.sock"),
        "{err}"
    );
}

/// Started in a project whose Claude Code settings do not run `worldfs hook`, the proxy says
/// so (the mount would never learn the goal, and nothing would be rewritten); once `worldfs
/// hook --install` ran there, it does not. Started elsewhere with `--socket`, the project it
/// looks in is the mount's.
#[test]
fn the_proxy_warns_when_the_project_has_no_hooks() {
    let m = Mount::start(common::Mode::Mirror, &[], |_| {});
    let home = tempfile::tempdir().expect("an empty home");
    let up = Upstream::start();
    let start = || {
        let mut cmd = Command::new(common::bin());
        cmd.current_dir(&m.root)
            .env_remove("WORLDFS_SOCKET")
            .env("HOME", home.path());
        Proxy::spawn(cmd, up.port, &[])
    };
    let warned = |p: &Proxy| {
        p.said
            .lock()
            .is_ok_and(|v| v.iter().any(|l| l.contains("register `worldfs hook`")))
    };
    // `worldfs hook --install` in the project, with `extra` arguments.
    let install = |extra: &[&str]| {
        let out = Command::new(common::bin())
            .args(["hook", "--install"])
            .args(extra)
            .arg("-C")
            .arg(&m.root)
            .output()
            .expect("worldfs hook --install");
        assert!(out.status.success(), "{out:?}");
    };
    // Started outside the mount, with `--socket`: the project is the mount's root, not the
    // current directory.
    let elsewhere = || {
        let mut cmd = Command::new(common::bin());
        cmd.current_dir("/")
            .env_remove("WORLDFS_SOCKET")
            .env("HOME", home.path());
        Proxy::spawn(cmd, up.port, &["--socket".into(), m.socket().into()])
    };
    let names_the_root = |p: &Proxy| {
        let of = format!("of {} register `worldfs hook`", m.root.display());
        p.said
            .lock()
            .is_ok_and(|v| v.iter().any(|l| l.contains(&of)))
    };
    let p = start();
    assert!(warned(&p), "no hooks: a warning before it listens");
    assert!(names_the_root(&p), "the warning names the project");
    drop(p);
    let p = elsewhere();
    assert!(
        names_the_root(&p),
        "started in /, the warning names the mount's root"
    );
    drop(p);
    install(&[]);
    let p = start();
    assert!(!warned(&p), "hooks installed: no warning");
    drop(p);
    let p = elsewhere();
    assert!(!warned(&p), "hooks installed, started in /: no warning");
    drop(p);

    // Codex hooks an older worldfs installed, without Stop: the proxy says to install again.
    install(&["--codex"]);
    let hooks = m.root.join(".codex/hooks.json");
    let mut s: Value =
        serde_json::from_str(&std::fs::read_to_string(&hooks).expect("read")).expect("json");
    s["hooks"].as_object_mut().expect("hooks").remove("Stop");
    std::fs::write(&hooks, s.to_string()).expect("write");
    let outdated = |p: &Proxy| {
        p.said.lock().is_ok_and(|v| {
            v.iter().any(|l| {
                l.contains(".codex/hooks.json runs `worldfs hook`, but not on Stop")
                    && l.contains("--install --codex")
            })
        })
    };
    let p = start();
    assert!(outdated(&p), "an older install: a warning");
    drop(p);
    install(&["--codex"]);
    let p = start();
    assert!(!outdated(&p), "installed again: no warning");
}

/// SIGTERM while connections keep coming stops the proxy: the loop that takes them is busy
/// with one when the signal comes (`worldfs run` stops the proxy so, its agent's last call
/// just made). Each round has a stream of connections; a stop missed in any fails the test.
#[test]
fn a_sigterm_while_connections_come_stops_the_proxy() {
    let m = Mount::mirror();
    let up = Upstream::start();
    for round in 0..10 {
        let mut proxy = Proxy::start(&m, up.port, &[]);
        let addr: std::net::SocketAddr = proxy.addr.parse().expect("the proxy's address");
        let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let knocking = Arc::clone(&done);
        let knocker = thread::spawn(move || {
            let mut n = 0u64;
            while !knocking.load(std::sync::atomic::Ordering::Relaxed) {
                match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                    Ok(c) => drop(c),
                    Err(_) => break,
                }
                // About as often as a Python loop connects, which missed the stop 5 of 20 times.
                thread::sleep(Duration::from_micros(200));
                n += 1;
            }
            n
        });
        thread::sleep(Duration::from_millis(500));
        let pid = i32::try_from(proxy.child.id()).expect("pid");
        // SAFETY: signalling our own child process.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let exited = common::wait_child(&mut proxy.child, Duration::from_secs(10));
        done.store(true, std::sync::atomic::Ordering::Relaxed);
        let n = knocker.join().expect("the connecting thread");
        assert!(
            exited.is_some_and(|st| st.success()),
            "round {round}: the proxy took no notice of SIGTERM ({n} connections made) ({exited:?})"
        );
    }
}

/// A proxy stopped right after its last answer (as `worldfs run` stops it when the agent
/// exits) has told the mount the account of every call it took: `worldfs run` and `worldfs
/// status` read the session's numbers from the mount. The first call's account loads the
/// tokenizer, so it comes well after the answer.
#[test]
fn a_stopped_proxy_has_told_the_mount_of_every_call() {
    let (m, mut c) = session_that_read_calc();
    let file = m.path("calc.py").to_string_lossy().into_owned();
    let up = Upstream::start();
    let mut proxy = Proxy::start(&m, up.port, &[]);
    let sent = send_through(&up, &proxy, &claude_request(PROMPT, &file, 3));
    assert!(sent["messages"].is_array(), "{sent}");
    assert!(proxy.stop().success());
    let stats = c.call("stats", json!({})).expect("stats");
    assert_eq!(stats["proxy"]["calls"], 1, "{}", stats["proxy"]);
    assert_eq!(stats["proxy"]["rewritten"], 1, "{}", stats["proxy"]);
}
