//! External-change visibility latency of a mirror mount.
//!
//! ```text
//! change_latency SOURCE_DIR MOUNT_DIR [--trials N] [--mode overwrite|rename|append]
//!                [--timeout-ms MS] [--gap-ms MS]
//! ```
//!
//! MOUNT_DIR must show SOURCE_DIR (for example `worldfs mount SOURCE_DIR MOUNT_DIR`).
//! Each trial writes a new value to a file *in SOURCE_DIR* (behind the mount, as an editor or
//! git would) and then polls the same file through MOUNT_DIR until the new content is read
//! there. The latency is the time from the moment the write returned to the first read that
//! shows the new content. Before every trial the mount has read (and may have cached) the old
//! content. Modes:
//!
//! - `overwrite` (default): open with O_TRUNC and write a value of the same length;
//! - `rename`: write a temporary file and rename it over the target (editors, git checkout);
//! - `append`: append a line (the size changes).
//!
//! Prints every statistic on one line, `change_latency: mode=... median_ms=... max_ms=...`,
//! for scripts to pick up. Exit status 0 even with timeouts (they are counted and printed);
//! 2 on bad usage; 1 on an I/O error.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::thread::sleep;
use std::time::{Duration, Instant};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Overwrite,
    Rename,
    Append,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Overwrite => "overwrite",
            Mode::Rename => "rename",
            Mode::Append => "append",
        }
    }
}

struct Args {
    source: PathBuf,
    mount: PathBuf,
    trials: usize,
    mode: Mode,
    timeout: Duration,
    gap: Duration,
}

const USAGE: &str = "usage: change_latency SOURCE_DIR MOUNT_DIR [--trials N] \
                     [--mode overwrite|rename|append] [--timeout-ms MS] [--gap-ms MS]";

fn parse_args() -> Result<Args, String> {
    let mut positional = Vec::new();
    let mut trials = 100usize;
    let mut mode = Mode::Overwrite;
    let mut timeout_ms = 5000u64;
    let mut gap_ms = 20u64;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match arg.as_str() {
            "--trials" => {
                trials = value("--trials")?
                    .parse()
                    .map_err(|e| format!("--trials: {e}"))?
            }
            "--timeout-ms" => {
                timeout_ms = value("--timeout-ms")?
                    .parse()
                    .map_err(|e| format!("--timeout-ms: {e}"))?
            }
            "--gap-ms" => {
                gap_ms = value("--gap-ms")?
                    .parse()
                    .map_err(|e| format!("--gap-ms: {e}"))?
            }
            "--mode" => {
                mode = match value("--mode")?.as_str() {
                    "overwrite" => Mode::Overwrite,
                    "rename" => Mode::Rename,
                    "append" => Mode::Append,
                    other => return Err(format!("unknown mode {other}")),
                }
            }
            "-h" | "--help" => return Err(String::new()),
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            _ => positional.push(PathBuf::from(arg)),
        }
    }
    if positional.len() != 2 {
        return Err("need SOURCE_DIR and MOUNT_DIR".into());
    }
    if trials == 0 {
        return Err("--trials must be at least 1".into());
    }
    let mount = positional.pop().unwrap_or_default();
    let source = positional.pop().unwrap_or_default();
    Ok(Args {
        source,
        mount,
        trials,
        mode,
        timeout: Duration::from_millis(timeout_ms),
        gap: Duration::from_millis(gap_ms),
    })
}

/// Write `content` as the new value of `path` (behind the mount), the way `mode` says.
fn change(path: &Path, content: &[u8], mode: Mode) -> std::io::Result<()> {
    match mode {
        Mode::Overwrite => {
            let mut f = OpenOptions::new().write(true).truncate(true).open(path)?;
            f.write_all(content)
        }
        Mode::Rename => {
            let tmp = path.with_extension("tmp");
            fs::write(&tmp, content)?;
            fs::rename(&tmp, path)
        }
        Mode::Append => {
            let mut f = OpenOptions::new().append(true).open(path)?;
            f.write_all(content)
        }
    }
}

/// Poll `path` until its content equals `want`; the elapsed time, or None after `timeout`.
fn wait_visible(path: &Path, want: &[u8], start: Instant, timeout: Duration) -> Option<Duration> {
    loop {
        // A read error (e.g. ENOENT between unlink and rename in some tools) counts as "not yet".
        if fs::read(path).is_ok_and(|got| got == want) {
            return Some(start.elapsed());
        }
        if start.elapsed() > timeout {
            return None;
        }
        sleep(Duration::from_micros(250));
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn run(args: &Args) -> std::io::Result<()> {
    let name = format!("change-latency-{}.txt", std::process::id());
    let src = args.source.join(&name);
    let mnt = args.mount.join(&name);
    // For `append` the expected content grows; keep the whole expected value.
    let mut expected: Vec<u8> = b"value 000000\n".to_vec();
    fs::write(&src, &expected)?;
    let initial = wait_visible(&mnt, &expected, Instant::now(), args.timeout);
    if initial.is_none() {
        eprintln!(
            "change_latency: {} never showed the file created in {} (after {:?})",
            args.mount.display(),
            args.source.display(),
            args.timeout
        );
    }

    let mut seen = Vec::with_capacity(args.trials);
    let mut timeouts = 0usize;
    for i in 1..=args.trials {
        // Make sure the mount has read the current (old) value: it may cache it now.
        let _ = fs::read(&mnt);
        let _ = fs::metadata(&mnt);
        sleep(args.gap);
        let value = format!("value {i:06}\n");
        match args.mode {
            Mode::Append => expected.extend_from_slice(value.as_bytes()),
            _ => expected = value.clone().into_bytes(),
        }
        change(&src, value.as_bytes(), args.mode)?;
        let start = Instant::now();
        match wait_visible(&mnt, &expected, start, args.timeout) {
            Some(d) => seen.push(d),
            None => {
                timeouts += 1;
                // Re-synchronise so that later trials start from a known state.
                let _ = wait_visible(&mnt, &expected, Instant::now(), args.timeout);
            }
        }
    }
    let _ = fs::remove_file(&src);

    seen.sort();
    let (median, p90, max, min) = if seen.is_empty() {
        (f64::NAN, f64::NAN, f64::NAN, f64::NAN)
    } else {
        (
            ms(percentile(&seen, 0.5)),
            ms(percentile(&seen, 0.9)),
            ms(*seen.last().unwrap_or(&Duration::ZERO)),
            ms(seen[0]),
        )
    };
    let within_100ms = seen
        .iter()
        .filter(|d| **d <= Duration::from_millis(100))
        .count();
    println!(
        "change_latency: mode={} trials={} seen={} timeouts={} timeout_ms={} min_ms={:.2} \
         median_ms={:.2} p90_ms={:.2} max_ms={:.2} within_100ms={}",
        args.mode.name(),
        args.trials,
        seen.len(),
        timeouts,
        args.timeout.as_millis(),
        min,
        median,
        p90,
        max,
        within_100ms
    );
    Ok(())
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            if !e.is_empty() {
                eprintln!("change_latency: {e}");
            }
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    for dir in [&args.source, &args.mount] {
        if !dir.is_dir() {
            eprintln!("change_latency: {} is not a directory", dir.display());
            return ExitCode::from(2);
        }
    }
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("change_latency: {e}");
            ExitCode::FAILURE
        }
    }
}
