//! Ingest micro-benchmark: how many observations per second the world absorbs on one core.
//!
//! `cargo run --release --example ingest_bench [-- --procfs] [-- --journal]`
//!
//! A SOURCE tree of 2,000 files is observed through a realistic mix: agent reads (opens and
//! ranges) over the 2,000 files, an `rg`-like scan over 20,000 paths, a test run's weak reads,
//! writes and closes. Observations go through a real channel to the ingest thread. Prints the
//! rate and the process RSS. No assertion: timing depends on the machine.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use worldfs::observation::{Observation, Op};
use worldfs::world::config::ClassName;
use worldfs::world::{Config, ProcInfo, ProcessSource, StaticProcesses, World};

/// Files the agent observes.
const FILES: usize = 2000;
const OBSERVATIONS: u64 = 2_000_000;

fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn main() -> anyhow::Result<()> {
    let use_procfs = std::env::args().any(|a| a == "--procfs");
    let journal = std::env::args().any(|a| a == "--journal");
    // `--tree N`: also create N scanned files (the memory target is a 100k-file tree).
    let tree: usize = std::env::args()
        .skip_while(|a| a != "--tree")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let dir = tempfile::tempdir()?;
    for d in 0..20 {
        std::fs::create_dir_all(dir.path().join(format!("src/m{d}")))?;
    }
    for i in 0..FILES {
        let p = dir.path().join(format!("src/m{}/f{i}.rs", i % 20));
        std::fs::write(p, format!("pub fn f{i}() -> u32 {{ {i} }}\n"))?;
    }
    for d in 0..tree.div_ceil(500) {
        std::fs::create_dir_all(dir.path().join(format!("vendor/lib{d}")))?;
    }
    for i in 0..tree {
        std::fs::write(
            dir.path().join(format!("vendor/lib{}/x{i}.c", i / 500)),
            "int x;\n",
        )?;
    }
    std::fs::write(dir.path().join(".gitignore"), "*.log\n")?;

    // With /proc, every observation carries this process's own pid; count unknown programs as
    // the agent so they create entries like an agent would.
    let (pids, procs): ([u32; 4], Arc<dyn ProcessSource>) = if use_procfs {
        let me = std::process::id();
        ([me; 4], Arc::new(worldfs::world::ProcFs::new()))
    } else {
        let chain: &[(u32, &str)] = &[(2, "bash"), (1, "claude")];
        let table = StaticProcesses::new([
            ProcInfo::synthetic(10, "cat", &["cat"], chain),
            ProcInfo::synthetic(11, "rg", &["rg", "x"], chain),
            ProcInfo::synthetic(12, "python3", &["python3", "-m", "pytest"], chain),
            ProcInfo::synthetic(1, "claude", &["claude"], &[]),
        ]);
        ([10, 11, 12, 1], Arc::new(table))
    };
    let mut config = Config::default();
    config.attribution.unknown_program = ClassName::Agent;
    // Benchmark traffic is dense; keep the fan-out rule from reclassifying the agent itself.
    config.attribution.fanout_threshold = u32::MAX;
    let jdir = tempfile::tempdir()?;
    let mut b = World::builder_at(dir.path())?
        .config(config)
        .process_source(procs);
    if journal {
        b = b.journal(jdir.path().join("journal.jsonl"));
    }
    let world = b.build()?;

    let files: Vec<PathBuf> = (0..FILES)
        .map(|i| PathBuf::from(format!("src/m{}/f{i}.rs", i % 20)))
        .collect();
    let scanned: Vec<PathBuf> = (0..tree.max(20_000))
        .map(|i| PathBuf::from(format!("vendor/lib{}/x{i}.c", i / 500)))
        .collect();
    println!("rss before ingest: {:.1} MiB", rss_mib());
    let (tx, rx) = crossbeam_channel::bounded(65_536);
    let handle = world.spawn_ingest(rx)?;
    let start = Instant::now();
    // Generated on the fly on the other core, so no pre-built vector inflates the RSS.
    let producer = std::thread::spawn(move || {
        let t0 = SystemTime::now();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        let open = Op::Open {
            read: true,
            write: false,
            truncate: false,
            created: false,
        };
        for seq in 1..=OBSERVATIONS {
            // xorshift: deterministic, cheap, no dependency.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let r = x % 100;
            let f = || files[(x >> 8) as usize % files.len()].clone();
            let (op, pid, path) = match r {
                0..=49 => (open.clone(), pids[0], f()),
                50..=64 => (
                    Op::Read {
                        offset: (x >> 20) % 4096,
                        len: 4096,
                    },
                    pids[0],
                    f(),
                ),
                65..=84 => (
                    open.clone(),
                    pids[1],
                    scanned[(x >> 8) as usize % scanned.len()].clone(),
                ),
                85..=92 => (open.clone(), pids[2], f()),
                93..=96 => (
                    Op::Write {
                        offset: 0,
                        len: 100,
                    },
                    pids[3],
                    f(),
                ),
                _ => (Op::Close { wrote: true }, 0, f()),
            };
            let o = Observation {
                seq,
                time: t0 + Duration::from_micros(seq),
                op,
                path,
                pid,
                caller: None,
            };
            if tx.send(o).is_err() {
                break;
            }
        }
    });
    producer
        .join()
        .map_err(|_| anyhow::anyhow!("producer panicked"))?;
    handle
        .join()
        .map_err(|_| anyhow::anyhow!("ingest thread panicked"))?;
    let secs = start.elapsed().as_secs_f64();
    let stats = world.stats();
    println!(
        "ingested {} observations in {:.3} s: {:.0} observations/s (procfs: {use_procfs}, journal: {journal})",
        stats.observations,
        secs,
        stats.observations as f64 / secs
    );
    println!(
        "entries: {:?}; classes: {:?}",
        stats.entries, stats.by_class
    );
    println!("rss after ingest: {:.1} MiB", rss_mib());
    let t = Instant::now();
    let sel = world.select_configured();
    println!(
        "select (hash+count {} entries, policy {}): {:.3} s, kept {}, evicted {}, {} tokens",
        stats.entries.live,
        sel.policy,
        t.elapsed().as_secs_f64(),
        sel.kept.len(),
        sel.evicted.len(),
        sel.total_tokens
    );
    println!("rss after select (tokenizer loaded): {:.1} MiB", rss_mib());
    if let Some(j) = world.stats().journal {
        println!("journal: {j:?}");
    }
    Ok(())
}
