//! The replay benchmark as a test: a short hand-written trace with every step kind (ranged,
//! whole, partial and multi-range reads, structured and shell edits, writes, a structured
//! search, a command with read/exec/delete/write touches, a message, another tool, unknown
//! effects, a path outside the repository) replayed through a real mount by `worldfs replay`.
//! Asserts the invariants, not the ratios: every step applied, projections API-valid and within
//! budget at every turn, no stale bytes in any projection, and nothing left mounted.

mod common;

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

#[test]
fn replay_every_kind_keeps_the_invariants() {
    common::require_fuse();
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/traces/every_kind.jsonl");
    let (_tmp, out) = common::tempdir();
    // its scratch mounts go under a directory of this test's own, so another replay running
    // on the machine (a benchmark) is not taken for one left behind
    let scratch = out.join("scratch");
    std::fs::create_dir(&scratch).unwrap();
    let run = common::run_with_timeout(
        std::process::Command::new(common::bin())
            .arg("replay")
            .arg(&trace)
            .arg("--out")
            .arg(&out)
            .args(["--budgets", "8000,16000"])
            .env("TMPDIR", &scratch),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "worldfs replay failed:\n{stderr}");
    let leftover = common::worldfs_mounts_under(&scratch);
    assert!(leftover.is_empty(), "left mounted: {leftover:?}");
    let made: Vec<_> = std::fs::read_dir(&scratch).unwrap().collect();
    assert!(made.is_empty(), "scratch left behind: {made:?}");

    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("every_kind.json")).unwrap())
            .unwrap();
    let apply = &json["apply"];
    let steps = json["steps"].as_u64().unwrap();
    assert_eq!(steps, 20);
    assert_eq!(apply["applied"].as_u64(), Some(steps), "{apply:#}");
    assert_eq!(apply["failed"].as_u64(), Some(0), "{apply:#}");
    // the second check is after `git checkout src/lib.py`: the base again
    assert_eq!(apply["sha1_checked"].as_u64(), Some(2));
    assert_eq!(apply["sha1_mismatch"].as_u64(), Some(0));
    // one of them from a pattern-range read that shows an inserted line
    assert_eq!(apply["lookahead_edits"].as_u64(), Some(3), "{apply:#}");
    assert_eq!(apply["restored"].as_u64(), Some(1), "{apply:#}");
    assert_eq!(apply["effects_unknown"].as_u64(), Some(1));
    assert_eq!(apply["outside_repo"].as_u64(), Some(1));
    assert_eq!(apply["touch_deletes"].as_u64(), Some(1));
    assert_eq!(apply["reconciled"].as_u64(), Some(0), "{apply:#}");

    let csv = std::fs::read_to_string(out.join("every_kind.csv")).unwrap();
    let mut header = Vec::new();
    let mut projection_rows = 0;
    let mut baseline_stale = 0u64;
    for (i, line) in csv.lines().enumerate() {
        let cols: Vec<&str> = line.split(',').collect();
        if i == 0 {
            header = cols.iter().map(|s| s.to_string()).collect();
            continue;
        }
        let get = |name: &str| cols[header.iter().position(|h| h == name).unwrap()];
        let strategy = get("strategy");
        if strategy == "baseline" {
            baseline_stale += get("stale_bytes").parse::<u64>().unwrap();
        }
        if get("budget").is_empty() {
            continue;
        }
        projection_rows += 1;
        assert_eq!(get("violations"), "0", "turn {}: {strategy}", get("turn"));
        assert_eq!(
            get("over_budget"),
            "false",
            "turn {}: {strategy}",
            get("turn")
        );
        assert_eq!(get("stale_bytes"), "0", "turn {}: {strategy}", get("turn"));
    }
    // 19 turns x (seed + worldfs at 2 budgets)
    assert_eq!(projection_rows, 19 * 3);
    // the baseline does carry the copy of lines 7..12 made stale by the edit
    assert!(baseline_stale > 0);
    let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
    assert!(summary.contains("| worldfs_8k |"), "{summary}");
    assert!(out.join("tokens.svg").exists());
}
