//! Socket latency under concurrency: N clients call one method in a loop for a fixed time.
//!
//! ```text
//! socket_load --socket PATH [--clients 16] [--secs 30] [--method projection.get]
//!             [--params JSON] [--label NAME] [--timeout-ms 10000]
//! ```
//!
//! Every client is a [`worldfs::socket::Client`] (the CLI's own blocking client, so each call
//! also pays for serializing the request and parsing the whole response, as a harness would) on
//! its own connection and thread. Each makes one untimed call first (connecting, warming the
//! renderer), then all start together and call `--method` back to back until `--secs` have
//! passed. The default params are `{"format":"anthropic","budget":8000}` for `projection.get`
//! and `{}` otherwise.
//!
//! Prints every statistic on one line for scripts to pick up:
//!
//! ```text
//! socket_load: label=L method=M clients=16 secs=30.0 count=N errors=E rate_per_s=R
//!   p50_ms=.. p95_ms=.. p99_ms=.. max_ms=.. mean_ms=.. tokens=T bytes=B
//! ```
//!
//! (one line, shown wrapped). `tokens` is the `tokens` field of the last result (the
//! projection's own estimate; `-` when absent), `bytes` the size of that result as JSON.
//! Latency is measured around `Client::call`: write the request, read and parse the response.
//! The line also has `server_mean_ms`, the daemon's own mean time in the method over the run
//! (from the `stats` latency histogram, before and after: valid when nothing else calls the
//! method meanwhile; it excludes reading the request and writing the response), and
//! `parse_ms`, the time one thread takes to parse the last result's JSON (part of every call's
//! latency here, as in any harness), measured after the run.
//! Exit status 0 when every call succeeded, 1 when any failed (the line is printed anyway,
//! the first error on stderr), 2 on bad usage.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use worldfs::socket::Client;

const USAGE: &str = "usage: socket_load --socket PATH [--clients N] [--secs S] [--method M] \
                     [--params JSON] [--label NAME] [--timeout-ms MS]";

struct Args {
    socket: PathBuf,
    clients: usize,
    secs: f64,
    method: String,
    params: Value,
    label: String,
    timeout: Duration,
}

fn parse_args() -> Result<Args, String> {
    let mut socket = None;
    let mut clients = 16;
    let mut secs: f64 = 30.0;
    let mut method = "projection.get".to_string();
    let mut params = None;
    let mut label = "-".to_string();
    let mut timeout_ms = 10_000;
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
    })
}

/// What one client measured.
#[derive(Default)]
struct Outcome {
    times: Vec<Duration>,
    errors: u64,
    first_error: Option<String>,
    last: Option<Value>,
}

fn client_loop(args: &Args, start: &Barrier) -> Outcome {
    fn fail(out: &mut Outcome, e: String) {
        out.errors += 1;
        out.first_error.get_or_insert(e);
    }
    let mut out = Outcome::default();
    let mut client = match Client::connect(&args.socket, args.timeout) {
        Ok(c) => Some(c),
        Err(e) => {
            fail(&mut out, e.to_string());
            None
        }
    };
    if let Some(c) = &mut client
        && let Err(e) = c.call(&args.method, args.params.clone())
    {
        fail(&mut out, format!("warm-up call: {e}"));
    }
    start.wait();
    let Some(mut c) = client else { return out };
    let deadline = Instant::now() + Duration::from_secs_f64(args.secs);
    while Instant::now() < deadline {
        let t = Instant::now();
        let r = c.call(&args.method, args.params.clone());
        out.times.push(t.elapsed());
        match r {
            Ok(v) => out.last = Some(v),
            Err(e) => {
                fail(&mut out, e.to_string());
                // A broken connection stays broken: reconnect rather than spin on errors.
                match Client::connect(&args.socket, args.timeout) {
                    Ok(n) => c = n,
                    Err(e) => {
                        fail(&mut out, e.to_string());
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
    let errors: u64 = outcomes.iter().map(|o| o.errors).sum();
    let last = outcomes.iter().rev().find_map(|o| o.last.as_ref());
    let tokens = last
        .and_then(|v| v.get("tokens"))
        .map_or_else(|| "-".to_string(), Value::to_string);
    let bytes = last.map_or(0, |v| v.to_string().len());
    let mean = if times.is_empty() {
        f64::NAN
    } else {
        times.iter().map(Duration::as_secs_f64).sum::<f64>() * 1e3 / times.len() as f64
    };
    println!(
        "socket_load: label={} method={} clients={} secs={:.1} count={} errors={} \
         rate_per_s={:.1} p50_ms={:.3} p95_ms={:.3} p99_ms={:.3} max_ms={:.3} mean_ms={:.3} \
         tokens={} bytes={} server_mean_ms={} parse_ms={:.3}",
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
    );
    if let Some(e) = outcomes.iter().find_map(|o| o.first_error.as_ref()) {
        eprintln!("socket_load: {errors} error(s); the first: {e}");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
