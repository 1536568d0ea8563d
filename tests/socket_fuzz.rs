//! 100k random and mutated requests over several connections, while the world keeps ingesting:
//! every answer is well-formed JSON-RPC, and afterwards the server is alive and correct.
//!
//! Seeded (WORLDFS_FUZZ_SEED overrides) so a failure can be replayed.

mod socket_support;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};
use socket_support::*;
use worldfs::socket::METHODS;

const TOTAL: usize = 100_000;
const CONNECTIONS: usize = 4;

/// xorshift64*: tiny, deterministic, good enough for test inputs.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const KEYS: &[&str] = &[
    "format",
    "budget",
    "policy",
    "tool_name",
    "path_param",
    "max_breakpoints",
    "cache_ttl",
    "absolute_paths",
    "goal",
    "tool_use_id",
    "tool_name",
    "input",
    "result",
    "is_error",
    "command",
    "cwd",
    "output",
    "exit_code",
    "since_seq",
    "files",
    "intent",
    "decisions",
    "open_loops",
    "tasks",
    "upsert",
    "remove",
    "id",
    "subject",
    "status",
    "workspace",
    "settings",
    "path",
    "prefix",
    "state",
    "limit",
    "offset",
    "seq",
    "classes",
    "subscription",
];

fn random_value(r: &mut Rng, depth: u32) -> Value {
    match r.below(if depth > 2 { 8 } else { 11 }) {
        0 => Value::Null,
        1 => Value::Bool(r.chance(50)),
        2 => json!(r.below(10_000)),
        3 => json!(*r.pick(&[0i64, -1, 1, 4, 5, 8000, 2_000_001, i64::MAX, i64::MIN])),
        4 => json!(*r.pick(&[0.5f64, -3.25, 1e300, 8000.0])),
        5 => json!(*r.pick(&[
            "",
            "text",
            "json",
            "anthropic",
            "src/main.rs",
            "../etc/passwd",
            "/etc/passwd",
            "README.md",
            ".env",
            "Read",
            "bad name",
            "lru",
            "worldfs",
            "agent",
            "scan",
            "\u{0}",
            "é😀",
            "src",
            ".",
        ])),
        6 => Value::String("x".repeat(r.below(400))),
        7 => json!(u64::MAX),
        8 => Value::Array(
            (0..r.below(4))
                .map(|_| random_value(r, depth + 1))
                .collect(),
        ),
        _ => {
            let mut m = Map::new();
            for _ in 0..r.below(4) {
                m.insert(r.pick(KEYS).to_string(), random_value(r, depth + 1));
            }
            Value::Object(m)
        }
    }
}

fn random_request(r: &mut Rng) -> Value {
    let method = if r.chance(90) {
        r.pick(METHODS).to_string()
    } else {
        r.pick(&["", "nope", "stats ", "initialize.x", "rpc.discover"])
            .to_string()
    };
    let mut params = Map::new();
    for _ in 0..r.below(5) {
        params.insert(r.pick(KEYS).to_string(), random_value(r, 0));
    }
    let mut req = Map::new();
    if r.chance(70) {
        req.insert("jsonrpc".into(), json!("2.0"));
    }
    if r.chance(85) {
        req.insert("id".into(), json!(r.below(1_000_000)));
    }
    req.insert("method".into(), json!(method));
    if r.chance(90) {
        req.insert("params".into(), Value::Object(params));
    }
    Value::Object(req)
}

fn mutate(r: &mut Rng, mut bytes: Vec<u8>) -> Vec<u8> {
    for _ in 0..=r.below(4) {
        if bytes.is_empty() {
            bytes.push(b'{');
        }
        let i = r.below(bytes.len());
        match r.below(6) {
            0 => bytes[i] ^= 1 << r.below(8),
            1 => {
                bytes.remove(i);
            }
            2 => bytes.insert(i, *r.pick(b"{}[]\",:0-\\ena\xff")),
            3 => bytes.truncate(i),
            4 => {
                let end = (i + r.below(20)).min(bytes.len());
                let dup = bytes[i..end].to_vec();
                bytes.splice(i..i, dup);
            }
            _ => bytes[i] = (r.next() & 0xff) as u8,
        }
    }
    bytes
}

fn line(r: &mut Rng) -> Vec<u8> {
    let mut l = match r.below(10) {
        0 | 1 => (0..r.below(200)).map(|_| (r.next() & 0xff) as u8).collect(),
        2..=5 => {
            let valid = serde_json::to_vec(&random_request(r)).unwrap_or_default();
            mutate(r, valid)
        }
        6 if r.chance(30) => {
            let batch: Vec<Value> = (0..=r.below(5)).map(|_| random_request(r)).collect();
            serde_json::to_vec(&batch).unwrap_or_default()
        }
        _ => serde_json::to_vec(&random_request(r)).unwrap_or_default(),
    };
    l.retain(|&b| b != b'\n');
    l.push(b'\n');
    l
}

/// A response (or notification) as JSON-RPC 2.0 says it must look.
fn well_formed(v: &Value) -> bool {
    let one = |o: &Value| -> bool {
        let Some(m) = o.as_object() else { return false };
        if m.get("jsonrpc") != Some(&json!("2.0")) {
            return false;
        }
        if m.contains_key("method") {
            return !m.contains_key("id") && m.get("params").is_some_and(Value::is_object);
        }
        let has_result = m.contains_key("result");
        let err_ok = m.get("error").is_some_and(|e| {
            e.get("code").is_some_and(Value::is_i64)
                && e.get("message").is_some_and(Value::is_string)
        });
        m.contains_key("id") && (has_result ^ err_ok)
    };
    match v {
        Value::Array(items) => !items.is_empty() && items.iter().all(one),
        other => one(other),
    }
}

#[test]
fn fuzz_100k_requests_server_stays_alive_and_correct() {
    let seed = std::env::var("WORLDFS_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_F00D_u64);
    let f = Arc::new(Fixture::new());
    for p in ["README.md", "src/main.rs", "src/lib.rs", ".env"] {
        f.read(p);
    }
    // The world keeps changing while the fuzzers run (subscriptions, command validity).
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let f = Arc::clone(&f);
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut i = 0u64;
            // Bounded, so the ring (which changes.since serializes) stays small.
            while !stop.load(Ordering::Relaxed) && i < 200 {
                f.read(&format!("pkg/m{:02}.py", i % 20));
                if i.is_multiple_of(50) {
                    f.write(
                        "src/util.rs",
                        &format!("pub fn helper() -> u32 {{ {i} }}\n"),
                    );
                }
                i += 1;
                std::thread::sleep(Duration::from_millis(3));
            }
        })
    };
    let started = std::time::Instant::now();
    let mut workers = Vec::new();
    for k in 0..CONNECTIONS {
        let sock = f.sock.clone();
        workers.push(std::thread::spawn(move || {
            let s = must(UnixStream::connect(&sock));
            must(s.set_read_timeout(Some(Duration::from_secs(60))));
            let mut w = must(s.try_clone());
            let writer = std::thread::spawn(move || {
                let mut r = Rng(seed ^ (k as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let mut buf = Vec::with_capacity(1 << 16);
                for _ in 0..TOTAL / CONNECTIONS {
                    buf.extend(line(&mut r));
                    if buf.len() > 32 * 1024 {
                        must(w.write_all(&buf));
                        buf.clear();
                    }
                }
                buf.extend(
                    b"{\"jsonrpc\":\"2.0\",\"id\":\"sentinel\",\"method\":\"initialize\"}\n",
                );
                must(w.write_all(&buf));
            });
            let mut reader = BufReader::new(s);
            let mut answers = 0usize;
            loop {
                let mut l = String::new();
                let n = must(reader.read_line(&mut l));
                assert!(n > 0, "connection {k} closed after {answers} answers");
                let v: Value = serde_json::from_str(&l)
                    .unwrap_or_else(|e| panic!("connection {k}: not JSON ({e}): {l}"));
                assert!(well_formed(&v), "connection {k}: malformed answer {l}");
                answers += 1;
                if v.get("id") == Some(&json!("sentinel")) {
                    assert_eq!(v["result"]["server"]["name"], "worldfs", "{v}");
                    break;
                }
            }
            must(writer.join().map_err(|_| "writer panicked"));
            answers
        }));
    }
    let mut answers = 0;
    for w in workers {
        answers += w
            .join()
            .unwrap_or_else(|_| panic!("a fuzz connection failed"));
    }
    stop.store(true, Ordering::Relaxed);
    let _ = churn.join();
    if std::env::var_os("WORLDFS_FUZZ_VERBOSE").is_some() {
        eprintln!("{answers} answers in {:?}", started.elapsed());
    }
    // Most lines get an answer (only well-formed notifications do not).
    assert!(answers > TOTAL / 2, "{answers} answers");

    // Alive and still correct for a fresh client.
    let mut c = f.connect();
    let s = c.call("stats", json!({}));
    if std::env::var_os("WORLDFS_FUZZ_VERBOSE").is_some() {
        eprintln!("{:#}", s["latency"]);
    }
    assert!(
        s["connections"]["requests"].as_u64().unwrap_or(0) >= TOTAL as u64,
        "{s}"
    );
    c.call("goal.set", json!({"goal": "after the storm"}));
    assert_eq!(c.call("goal.get", json!({}))["goal"], "after the storm");
    let p = c.call("projection.get", json!({"format": "json", "budget": 8000}));
    assert!(p["tokens"].as_u64().is_some_and(|t| t <= 8000));
    let (code_, _) = c.call_err("entries.read", json!({"path": "../x"}));
    assert_eq!(code_, worldfs::socket::code::REFUSED);
}
