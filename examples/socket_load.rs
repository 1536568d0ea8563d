//! Socket latency under concurrency: N clients call one method in a loop for a fixed time.
//!
//! ```text
//! socket_load --socket PATH [--clients 16] [--secs 30] [--method projection.get]
//!             [--params JSON] [--label NAME] [--timeout-ms 10000] [--no-parse]
//! ```
//!
//! Every client has its own connection and thread. Each makes one untimed call first
//! (connecting, warming the renderer), then all start together and call `--method` back to back
//! until `--secs` have passed. The default params are `{"format":"anthropic","budget":8000}`
//! for `projection.get` and `{}` otherwise.
//!
//! What is timed: from writing the request until the whole response line has arrived (the
//! socket's latency as a client sees it). Then, untimed in that figure, the client parses the
//! line as a harness would (checking its id and that it is not an error) and times the parse
//! separately (`parse_mean_ms`, and `call_p50_ms`.. for request to parsed response, the figure
//! earlier versions of this program reported as p50). The parse still runs on the same CPUs as
//! the daemon, so it still slows the other clients down. `--no-parse` skips it and only checks
//! that the line starts as the success response to this request's id: a harness that forwards
//! the bytes as a request body needs no parse.
//!
//! Prints every statistic on one line for scripts to pick up:
//!
//! ```text
//! socket_load: label=L method=M clients=16 secs=30.0 count=N errors=E rate_per_s=R
//!   p50_ms=.. p95_ms=.. p99_ms=.. max_ms=.. mean_ms=.. tokens=T bytes=B
//! ```
//!
//! (one line, shown wrapped; it also has `parse_mean_ms`, `call_p50_ms`, `call_p99_ms` and
//! `call_mean_ms` as above). `tokens` is the `tokens` field of the last result (the
//! projection's own estimate; `-` when absent), `bytes` the size of that result as JSON.
//! The line also has `server_mean_ms`, the daemon's own mean time in the method over the run
//! (from the `stats` latency histogram, before and after: valid when nothing else calls the
//! method meanwhile; it excludes reading the request and writing the response), and
//! `parse_ms`, the time one thread takes to parse the last result's JSON (part of every call's
//! latency here, as in any harness), measured after the run.
//! Exit status 0 when every call succeeded, 1 when any failed (the line is printed anyway,
//! the first error on stderr), 2 on bad usage.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use worldfs::socket::Client;

const USAGE: &str = "usage: socket_load --socket PATH [--clients N] [--secs S] [--method M] \
                     [--params JSON] [--label NAME] [--timeout-ms MS] [--no-parse]";

struct Args {
    socket: PathBuf,
    clients: usize,
    secs: f64,
    method: String,
    params: Value,
    label: String,
    timeout: Duration,
    parse: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut socket = None;
    let mut clients = 16;
    let mut secs: f64 = 30.0;
    let mut method = "projection.get".to_string();
    let mut params = None;
    let mut label = "-".to_string();
    let mut timeout_ms = 10_000;
    let mut parse = true;
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--socket" => socket = Some(PathBuf::from(val()?)),
            "--clients" => clients = val()?.parse().map_err(|e| format!("--clients: {e}"))?,
            "--secs" => secs = val()?.parse().map_err(|e| format!("--secs: {e}"))?,
            "--method" => method = val()?,
            "--params" => {
                params = Some(serde_json::from_str(&val()?).map_err(|e| format!("--params: {e}"))?)
            }
            "--label" => label = val()?,
            "--timeout-ms" => {
                timeout_ms = val()?.parse().map_err(|e| format!("--timeout-ms: {e}"))?
            }
            "--no-parse" => parse = false,
            "-h" | "--help" => return Err(String::new()),
            _ => return Err(format!("unknown argument {a:?}")),
        }
    }
    if clients == 0 || secs.is_nan() || secs <= 0.0 {
        return Err("--clients and --secs must be positive".into());
    }
    let params = params.unwrap_or_else(|| {
        if method == "projection.get" {
            json!({"format": "anthropic", "budget": 8000})
        } else {
            json!({})
        }
    });
    Ok(Args {
        socket: socket.ok_or("--socket is required")?,
        clients,
        secs,
        method,
        params,
        label: label.replace(char::is_whitespace, "_"),
        timeout: Duration::from_millis(timeout_ms),
        parse,
    })
}

/// What one client measured.
#[derive(Default)]
struct Outcome {
    /// Request written until the whole response line arrived.
    times: Vec<Duration>,
    /// Parsing each response (empty with `--no-parse`).
    parses: Vec<Duration>,
    errors: u64,
    first_error: Option<String>,
    last: Option<Value>,
}

/// One connection, speaking the protocol by hand so the response line can be timed apart
/// from its parse.
struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next_id: u64,
    line: Vec<u8>,
}

impl Conn {
    fn connect(args: &Args) -> Result<Conn, String> {
        let s = UnixStream::connect(&args.socket)
            .map_err(|e| format!("connecting to {:?}: {e}", args.socket))?;
        let setup = |e: std::io::Error| format!("setting up the connection: {e}");
        s.set_read_timeout(Some(args.timeout)).map_err(setup)?;
        s.set_write_timeout(Some(args.timeout)).map_err(setup)?;
        let writer = s.try_clone().map_err(setup)?;
        Ok(Conn {
            // A projection response is ~85 KB: read it in a few large reads, not 8 KB ones.
            reader: BufReader::with_capacity(256 * 1024, s),
            writer,
            next_id: 0,
            line: Vec::new(),
        })
    }

    /// Writes one request and reads lines until the one answering it; returns its id and how
    /// long the line's `{"jsonrpc":"2.0","id":ID,` head is. The line is left in `self.line`.
    fn round_trip(&mut self, method: &str, params: &Value) -> Result<(u64, usize), String> {
        self.next_id += 1;
        let id = self.next_id;
        let mut req = serde_json::to_vec(
            &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        )
        .map_err(|e| format!("serializing the request: {e}"))?;
        req.push(b'\n');
        self.writer
            .write_all(&req)
            .map_err(|e| format!("writing the request: {e}"))?;
        let head = format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},");
        loop {
            self.line.clear();
            let n = self
                .reader
                .read_until(b'\n', &mut self.line)
                .map_err(|e| format!("reading the response: {e}"))?;
            if n == 0 {
                return Err("the daemon closed the connection".into());
            }
            // Notifications (the only other lines) start with "method" after "jsonrpc".
            if self.line.starts_with(head.as_bytes()) {
                return Ok((id, head.len()));
            }
        }
    }
}

/// The result of the response line in `line`, checked to answer `id`.
fn parse_response(line: &[u8], id: u64) -> Result<Value, String> {
    let mut v: Value = serde_json::from_slice(line).map_err(|e| format!("not JSON: {e}"))?;
    if v.get("id") != Some(&Value::from(id)) {
        return Err(format!("response to another id: {:?}", v.get("id")));
    }
    if let Some(e) = v.get("error") {
        return Err(format!("error response: {e}"));
    }
    v.get_mut("result")
        .map(Value::take)
        .ok_or_else(|| "a response without a result".to_string())
}

fn client_loop(args: &Args, start: &Barrier) -> Outcome {
    fn fail(out: &mut Outcome, e: String) {
        out.errors += 1;
        out.first_error.get_or_insert(e);
    }
    let mut out = Outcome::default();
    let mut conn = match Conn::connect(args) {
        Ok(c) => Some(c),
        Err(e) => {
            fail(&mut out, e);
            None
        }
    };
    if let Some(c) = &mut conn {
        match c
            .round_trip(&args.method, &args.params)
            .and_then(|(id, _)| parse_response(&c.line, id))
        {
            Ok(v) => out.last = Some(v),
            Err(e) => fail(&mut out, format!("warm-up call: {e}")),
        }
    }
    start.wait();
    let Some(mut c) = conn else { return out };
    let deadline = Instant::now() + Duration::from_secs_f64(args.secs);
    while Instant::now() < deadline {
        let t = Instant::now();
        let r = c.round_trip(&args.method, &args.params);
        out.times.push(t.elapsed());
        let r = r.and_then(|(id, head)| {
            if !args.parse {
                // The line answers this id; a success has "result" right after it.
                return if c.line[head..].starts_with(b"\"result\":") {
                    Ok(None)
                } else {
                    Err(format!(
                        "not a success: {}",
                        String::from_utf8_lossy(&c.line)
                    ))
                };
            }
            let p = Instant::now();
            let v = parse_response(&c.line, id);
            out.parses.push(p.elapsed());
            v.map(Some)
        });
        match r {
            Ok(Some(v)) => out.last = Some(v),
            Ok(None) => {}
            Err(e) => {
                fail(&mut out, e);
                // A broken connection stays broken: reconnect rather than spin on errors.
                match Conn::connect(args) {
                    Ok(n) => c = n,
                    Err(e) => {
                        fail(&mut out, e);
                        break;
                    }
                }
            }
        }
    }
    out
}

/// The daemon's count of `args.method` calls and their total time in microseconds (from the
/// histogram's count and mean), or None when `stats` does not say.
fn server_time(args: &Args) -> Option<(u64, f64)> {
    let mut c = Client::connect(&args.socket, args.timeout).ok()?;
    let stats = c.call("stats", json!({})).ok()?;
    let Some(q) = stats.get("latency")?.get(&args.method) else {
        return Some((0, 0.0));
    };
    let count = q.get("count")?.as_u64()?;
    let mean = q.get("mean_us")?.as_u64()?;
    Some((count, (count * mean) as f64))
}

/// Milliseconds to parse `v` serialized, the median of 21 tries.
fn parse_ms(v: Option<&Value>) -> f64 {
    let Some(text) = v.map(Value::to_string) else {
        return f64::NAN;
    };
    let mut t: Vec<f64> = (0..21)
        .map(|_| {
            let s = Instant::now();
            let parsed: Result<Value, _> = serde_json::from_str(&text);
            std::hint::black_box(parsed.is_ok());
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    t.sort_by(f64::total_cmp);
    t[t.len() / 2]
}

/// Milliseconds with 3 decimals, or `-` when nothing was measured (`--no-parse`).
fn or_dash(ms: f64) -> String {
    if ms.is_nan() {
        "-".into()
    } else {
        format!("{ms:.3}")
    }
}

/// Mean of durations, in milliseconds.
fn mean_ms(d: &[Duration]) -> f64 {
    if d.is_empty() {
        return f64::NAN;
    }
    d.iter().map(Duration::as_secs_f64).sum::<f64>() * 1e3 / d.len() as f64
}

/// Nearest-rank quantile of sorted durations, in milliseconds.
fn quantile_ms(sorted: &[Duration], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1].as_secs_f64() * 1e3
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => Arc::new(a),
        Err(e) => {
            if !e.is_empty() {
                eprintln!("socket_load: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let before = server_time(&args);
    let start = Arc::new(Barrier::new(args.clients + 1));
    let handles: Vec<_> = (0..args.clients)
        .map(|_| {
            let (args, start) = (Arc::clone(&args), Arc::clone(&start));
            std::thread::spawn(move || client_loop(&args, &start))
        })
        .collect();
    start.wait();
    let t0 = Instant::now();
    let outcomes: Vec<Outcome> = handles
        .into_iter()
        .map(|h| {
            h.join().unwrap_or_else(|_| Outcome {
                errors: 1,
                first_error: Some("client thread panicked".into()),
                ..Outcome::default()
            })
        })
        .collect();
    let wall = t0.elapsed().as_secs_f64();
    let server_mean = match (before, server_time(&args)) {
        (Some((c0, s0)), Some((c1, s1))) if c1 > c0 => {
            format!("{:.3}", (s1 - s0) / (c1 - c0) as f64 / 1e3)
        }
        _ => "-".to_string(),
    };

    let mut times: Vec<Duration> = outcomes.iter().flat_map(|o| o.times.clone()).collect();
    times.sort_unstable();
    let parses: Vec<Duration> = outcomes.iter().flat_map(|o| o.parses.clone()).collect();
    // Request to parsed response, per call (each client's calls and parses pair up in order).
    let mut calls: Vec<Duration> = outcomes
        .iter()
        .flat_map(|o| o.times.iter().zip(&o.parses).map(|(t, p)| *t + *p))
        .collect();
    calls.sort_unstable();
    let errors: u64 = outcomes.iter().map(|o| o.errors).sum();
    let last = outcomes.iter().rev().find_map(|o| o.last.as_ref());
    let tokens = last
        .and_then(|v| v.get("tokens"))
        .map_or_else(|| "-".to_string(), Value::to_string);
    let bytes = last.map_or(0, |v| v.to_string().len());
    let mean = mean_ms(&times);
    println!(
        "socket_load: label={} method={} clients={} secs={:.1} count={} errors={} \
         rate_per_s={:.1} p50_ms={:.3} p95_ms={:.3} p99_ms={:.3} max_ms={:.3} mean_ms={:.3} \
         tokens={} bytes={} server_mean_ms={} parse_ms={:.3} parse_mean_ms={} \
         call_p50_ms={} call_p99_ms={} call_mean_ms={}",
        args.label,
        args.method,
        args.clients,
        wall,
        times.len(),
        errors,
        times.len() as f64 / wall,
        quantile_ms(&times, 0.50),
        quantile_ms(&times, 0.95),
        quantile_ms(&times, 0.99),
        quantile_ms(&times, 1.0),
        mean,
        tokens,
        bytes,
        server_mean,
        parse_ms(last),
        or_dash(mean_ms(&parses)),
        or_dash(quantile_ms(&calls, 0.50)),
        or_dash(quantile_ms(&calls, 0.99)),
        or_dash(mean_ms(&calls)),
    );
    if let Some(e) = outcomes.iter().find_map(|o| o.first_error.as_ref()) {
        eprintln!("socket_load: {errors} error(s); the first: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
