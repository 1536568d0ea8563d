//! Latency over the socket with 16 concurrent clients and 500 observed files (the issue's
//! benchmark shape, without the FUSE load). Ignored by default; run with
//! `cargo test --release --test socket_bench -- --ignored --nocapture`.

mod socket_support;

use std::time::{Duration, Instant};

use serde_json::json;
use socket_support::*;

fn percentile(v: &mut [Duration], q: f64) -> Duration {
    v.sort();
    v[((v.len() as f64 * q) as usize).min(v.len() - 1)]
}

#[test]
#[ignore = "benchmark; run in release with --ignored"]
fn projection_latency_16_clients_500_files() {
    // One synthetic `cat` reads all 500 files within milliseconds: by default the fan-out rule
    // would take it for a scanner and withdraw every entry (the world would be empty).
    let mut config = worldfs::world::Config::default();
    config.attribution.fanout_threshold = 1_000_000;
    let f = Fixture::with_config(config, |_| {});
    for i in 0..500 {
        let rel = format!("bench/d{}/f{i:03}.rs", i % 10);
        let p = f.root().join(&rel);
        must(std::fs::create_dir_all(p.parent().unwrap_or(f.root())));
        must(std::fs::write(
            &p,
            format!("// file {i}\n{}", "let x = 1;\n".repeat(20 + i % 50)),
        ));
        f.read(&rel);
    }
    let mut warm = f.connect();
    let live = warm.call("entries.list", json!({}));
    let n = live["entries"].as_array().map_or(0, Vec::len);
    assert!(
        n >= 500,
        "expected 500 observed files in the world, found {n}"
    );
    warm.call(
        "projection.get",
        json!({"format": "anthropic", "budget": 8000}),
    );
    for method in ["stats", "projection.get"] {
        let per_client = 300;
        let handles: Vec<_> = (0..16)
            .map(|_| {
                let mut c = f.connect();
                std::thread::spawn(move || {
                    let mut times = Vec::with_capacity(per_client);
                    for _ in 0..per_client {
                        let t = Instant::now();
                        if method == "stats" {
                            c.call("goal.get", json!({}));
                        } else {
                            c.call(method, json!({"format": "anthropic", "budget": 8000}));
                        }
                        times.push(t.elapsed());
                    }
                    times
                })
            })
            .collect();
        let mut all: Vec<Duration> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect();
        let p50 = percentile(&mut all, 0.5);
        let p99 = percentile(&mut all, 0.99);
        eprintln!(
            "{}: {} calls, p50 {:?}, p99 {:?}",
            if method == "stats" {
                "goal.get (socket overhead)"
            } else {
                method
            },
            all.len(),
            p50,
            p99
        );
    }
}
