//! Render micro-benchmark: how long a projection takes after a change, in a world of many
//! live entries.
//!
//! `make bench-render`, or `cargo run --release --example render_bench -- [--files N] [--renders R]`
//!
//! The agent (`cat` under `claude`) reads N one-line files (default 20,000) and a small
//! `a.txt`; then, R times (default 30), a line is appended to `a.txt` on disk, the world is
//! told of the write, and one Anthropic projection at 8,000 tokens is rendered, as
//! `projection.get` does after a change. Prints the median, p90 and max render time and the
//! time of building the policy's candidates alone. No assertion: timing depends on the machine.

use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use worldfs::observation::{Observation, Op};
use worldfs::projection::{Format, ProjectionRequest, render};
use worldfs::world::config::ClassName;
use worldfs::world::{Config, ProcInfo, StaticProcesses, World};

fn arg(name: &str, default: usize) -> usize {
    std::env::args()
        .skip_while(|a| a != name)
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[i]
}

fn main() -> anyhow::Result<()> {
    let files = arg("--files", 20_000);
    let renders = arg("--renders", 30).max(1);
    let dir = tempfile::tempdir()?;
    let paths: Vec<PathBuf> = (0..files)
        .map(|i| PathBuf::from(format!("src/d{}/f{i}.txt", i / 500)))
        .collect();
    for p in &paths {
        let full = dir.path().join(p);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(full, format!("line of {}\n", p.display()))?;
    }
    std::fs::write(dir.path().join("a.txt"), "start\n")?;

    let chain: &[(u32, &str)] = &[(2, "bash"), (1, "claude")];
    let procs = StaticProcesses::new([
        ProcInfo::synthetic(10, "cat", &["cat"], chain),
        ProcInfo::synthetic(1, "claude", &["claude"], &[]),
    ]);
    let mut config = Config::default();
    config.attribution.unknown_program = ClassName::Agent;
    // One process reads every file here; keep the fan-out rule from calling it a scanner.
    config.attribution.fanout_threshold = u32::MAX;
    let world = World::builder_at(dir.path())?
        .config(config)
        .process_source(Arc::new(procs))
        .build()?;

    let t0 = SystemTime::now();
    let mut seq = 0u64;
    let mut obs = |op: Op, path: PathBuf| {
        seq += 1;
        Observation {
            seq,
            time: t0 + Duration::from_micros(seq),
            op,
            path,
            pid: 10,
            caller: None,
        }
    };
    let open = || Op::Open {
        read: true,
        write: false,
        truncate: false,
        created: false,
    };
    let mut batch: Vec<Observation> = paths.iter().map(|p| obs(open(), p.clone())).collect();
    batch.push(obs(open(), PathBuf::from("a.txt")));
    world.ingest(batch);
    world.advance_turn();

    // As the socket asks by default: the evicted list cut to its first 100.
    let req = ProjectionRequest {
        evicted_limit: Some(100),
        ..ProjectionRequest::new(Format::Anthropic, 8000)
    };
    // The first render hashes and counts every file; the loop measures the steady state.
    let t = Instant::now();
    render(&world, &req)?;
    println!(
        "{} live entries; first render (hash and count every file): {:.1} ms",
        world.stats().entries.live,
        t.elapsed().as_secs_f64() * 1e3
    );

    let mut times = Vec::with_capacity(renders);
    let mut cands = Vec::with_capacity(renders);
    let mut a = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path().join("a.txt"))?;
    for i in 0..renders {
        writeln!(a, "line {i}")?;
        world.ingest([obs(Op::Write { offset: 0, len: 8 }, PathBuf::from("a.txt"))]);
        world.advance_turn();
        let t = Instant::now();
        let n = world.candidates().len();
        cands.push(t.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(n);
        let t = Instant::now();
        let p = render(&world, &req)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(p.tokens);
    }
    times.sort_by(f64::total_cmp);
    cands.sort_by(f64::total_cmp);
    println!(
        "render after a change, {renders} renders: median {:.2} ms, p90 {:.2} ms, max {:.2} ms",
        quantile(&times, 0.5),
        quantile(&times, 0.9),
        quantile(&times, 1.0)
    );
    println!(
        "of which building the candidates alone: median {:.2} ms",
        quantile(&cands, 0.5)
    );
    Ok(())
}
