//! The replay benchmark as a test: short hand-written traces replayed through a real mount by
//! `worldfs replay`. `every_kind` has every step kind (ranged, whole, partial and multi-range
//! reads, structured and shell edits, writes, a structured search, a command with
//! read/exec/delete/write touches, a message, another tool, unknown effects, a path outside the
//! repository); `claude_code` has the shapes of Claude Code's tools (parallel calls, file tools
//! that answer an error, a MultiEdit, a clone before the base; `tests/traces/claude_code.py`
//! writes it).
//! Asserts the invariants, not the ratios: every step applied, projections API-valid and within
//! budget at every turn, no stale bytes in any projection, and nothing left mounted.

mod common;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

/// One finished replay of `tests/traces/<name>.jsonl` at 8k and 16k.
struct Replayed {
    _tmp: tempfile::TempDir,
    out: PathBuf,
    json: Value,
    /// The per-turn CSV, one map of column to value per row.
    rows: Vec<std::collections::HashMap<String, String>>,
}

/// Runs `worldfs replay TRACES --out OUT --budgets BUDGETS` and checks it left nothing mounted
/// and no scratch behind.
fn run_replay(traces: &[&Path], out: &Path, budgets: &str) -> std::process::Output {
    run_replay_with(traces, out, budgets, &[])
}

fn run_replay_with(
    traces: &[&Path],
    out: &Path,
    budgets: &str,
    extra: &[&std::ffi::OsStr],
) -> std::process::Output {
    // its scratch mounts go under a directory of this test's own, so another replay running
    // on the machine (a benchmark) is not taken for one left behind
    let scratch = out.join("scratch");
    std::fs::create_dir_all(&scratch).unwrap();
    let run = common::run_with_timeout(
        std::process::Command::new(common::bin())
            .arg("replay")
            .args(traces)
            .arg("--out")
            .arg(out)
            .args(["--budgets", budgets])
            .args(extra)
            .env("TMPDIR", &scratch),
        Duration::from_secs(60),
    );
    let leftover = common::worldfs_mounts_under(&scratch);
    assert!(leftover.is_empty(), "left mounted: {leftover:?}");
    let made: Vec<_> = std::fs::read_dir(&scratch).unwrap().collect();
    assert!(made.is_empty(), "scratch left behind: {made:?}");
    run
}

fn replay(name: &str) -> Replayed {
    common::require_fuse();
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/traces/{name}.jsonl"));
    let (tmp, out) = common::tempdir();
    let run = run_replay(&[&trace], &out, "8000,16000");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "worldfs replay failed:\n{stderr}");

    let json: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join(format!("{name}.json"))).unwrap())
            .unwrap();
    let rows = csv_rows(&out.join(format!("{name}.csv")));
    Replayed {
        _tmp: tmp,
        out,
        json,
        rows,
    }
}

/// A per-turn CSV, one map of column to value per row.
fn csv_rows(path: &Path) -> Vec<std::collections::HashMap<String, String>> {
    let csv = std::fs::read_to_string(path).unwrap();
    let mut lines = csv.lines();
    let header: Vec<String> = lines
        .next()
        .unwrap()
        .split(',')
        .map(str::to_string)
        .collect();
    lines
        .map(|l| {
            header
                .iter()
                .cloned()
                .zip(l.split(',').map(str::to_string))
                .collect()
        })
        .collect()
}

/// Every projection row: API-valid, within budget, no stale bytes. Returns how many there were.
fn projection_invariants(r: &Replayed) -> usize {
    let mut n = 0;
    for row in &r.rows {
        if row["budget"].is_empty() {
            continue;
        }
        n += 1;
        let at = format!("turn {}: {}", row["turn"], row["strategy"]);
        assert_eq!(row["violations"], "0", "{at}");
        assert_eq!(row["over_budget"], "false", "{at}");
        assert_eq!(row["stale_bytes"], "0", "{at}");
    }
    n
}

/// The oracle (the clairvoyant floor) holds every need, fresh, at every turn: what the measures
/// count as needed is what it shows, so a miss of another strategy is a real one.
fn oracle_holds_every_need(r: &Replayed) {
    let mut turns = 0;
    for row in r.rows.iter().filter(|row| row["strategy"] == "oracle") {
        turns += 1;
        let at = format!("turn {}: oracle", row["turn"]);
        assert_eq!(row["fresh_file"], row["needs_file"], "{at}");
        assert_eq!(row["fresh_range"], row["needs_range"], "{at}");
        assert_eq!(row["forced_rereads"], "0", "{at}");
        assert_eq!(row["stale_bytes"], "0", "{at}");
    }
    assert_eq!(Some(turns), r.json["turns"].as_u64());
}

#[test]
fn replay_every_kind_keeps_the_invariants() {
    let r = replay("every_kind");
    let apply = &r.json["apply"];
    let steps = r.json["steps"].as_u64().unwrap();
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
    // a shell command's error is not a refusal: its effects stand
    assert_eq!(apply["refused"].as_u64(), Some(0), "{apply:#}");

    // 19 turns x (seed + worldfs at 2 budgets)
    assert_eq!(projection_invariants(&r), 19 * 3);
    oracle_holds_every_need(&r);
    // the baseline does carry the copy of lines 7..12 made stale by the edit
    let baseline_stale: u64 = r
        .rows
        .iter()
        .filter(|row| row["strategy"] == "baseline")
        .map(|row| row["stale_bytes"].parse::<u64>().unwrap())
        .sum();
    assert!(baseline_stale > 0);
    let summary = std::fs::read_to_string(r.out.join("summary.md")).unwrap();
    assert!(summary.contains("| worldfs_8k |"), "{summary}");
    assert!(r.out.join("tokens.svg").exists());
}

/// Claude Code's file tools do all of their work or none: a call that answered an error is
/// replayed as nothing, so the accepted call after it finds the file as the trace recorded it
/// (its `disk_sha1_before` matches) and nothing the agent never saw counts as seen. A MultiEdit
/// makes its replacements in order. A CRLF file read and edited as LF lines is neither
/// reconciled nor stale, and neither is a notebook, which Read shows as its cells.
#[test]
fn replay_claude_code_refused_calls_change_nothing() {
    let r = replay("claude_code");
    let apply = &r.json["apply"];
    let steps = r.json["steps"].as_u64().unwrap();
    assert_eq!(steps, 28);
    assert_eq!(apply["applied"].as_u64(), Some(steps), "{apply:#}");
    assert_eq!(apply["failed"].as_u64(), Some(0), "{apply:#}");
    // an Edit and a Write before a Read, an Edit matching three times, a Read too long, an
    // Edit of text not in the file
    assert_eq!(apply["refused"].as_u64(), Some(5), "{apply:#}");
    // five Edits (two of them of a CRLF file, matched as LF lines and written back as CRLF),
    // a MultiEdit (two replacements, the second in the first one's result) and a Write say
    // what the file was before them
    assert_eq!(apply["sha1_checked"].as_u64(), Some(7), "{apply:#}");
    assert_eq!(apply["sha1_mismatch"].as_u64(), Some(0), "{apply:#}");
    // nothing to put right: no read finds the file other than the trace recorded it
    assert_eq!(apply["reconciled"].as_u64(), Some(0), "{apply:#}");
    assert_eq!(apply["lookahead_edits"].as_u64(), Some(0), "{apply:#}");
    assert_eq!(apply["pre_setup_skipped"].as_u64(), Some(1), "{apply:#}");
    assert_eq!(apply["outside_repo"].as_u64(), Some(1), "{apply:#}");

    // 25 turns x (seed + worldfs at 2 budgets)
    assert_eq!(projection_invariants(&r), 25 * 3);
    oracle_holds_every_need(&r);
    // The whole run fits either budget many times over, so worldfs holds the current content
    // of every file the next step needs, at every turn.
    for row in r
        .rows
        .iter()
        .filter(|row| row["strategy"].starts_with("worldfs"))
    {
        let at = format!("turn {}: {}", row["turn"], row["strategy"]);
        assert_eq!(row["fresh_file"], row["needs_file"], "{at}");
        assert_eq!(row["fresh_range"], row["needs_range"], "{at}");
        assert_eq!(row["forced_rereads"], "0", "{at}");
    }
}

/// The agent's TodoWrite list reaches the replayed projections as the hook would tell it.
#[test]
fn replay_claude_code_projections_carry_the_agents_task_list() {
    common::require_fuse();
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/traces/claude_code.jsonl");
    let (_tmp, out) = common::tempdir();
    let dumps = out.join("dumps");
    let run = run_replay_with(
        &[&trace],
        &out.join("report"),
        "8000",
        &["--dump-projections".as_ref(), dumps.as_os_str()],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let body = |turn: u32| -> String {
        let f = dumps.join(format!("claude_code-t{turn:03}-worldfs_8k.json"));
        let dump: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap())
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        dump["body"].to_string()
    };
    let line = "Tasks:\\n- [in progress] fix mul typing";
    assert!(!body(1).contains("Tasks:"), "{}", body(1));
    assert!(body(22).contains(line), "{}", body(22));
}

/// A base archive from elsewhere can hold links out of the repository, a FIFO, files that are
/// not UTF-8: the replay neither writes outside its scratch copy, nor hangs, nor stops; what
/// it cannot do is listed. Paths a converter left odd (`./src/../src/a.py`, `/repo/src/a.py`)
/// are the repository's files. `git checkout .` puts the base back, `git stash` and `git stash
/// pop` take the agent's changes away and back.
#[test]
fn replay_of_a_hostile_base_stays_inside_and_goes_on() {
    let escape = Path::new("/tmp/worldfs-replay-escape-check");
    let _ = std::fs::remove_file(escape);
    let r = replay("hostile");
    let escaped = escape.exists();
    let _ = std::fs::remove_file(escape);
    assert!(!escaped, "the replay wrote through a link to /tmp");
    let apply = &r.json["apply"];
    assert_eq!(r.json["steps"].as_u64(), Some(20));
    let problems: Vec<&str> = apply["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert_eq!(problems.len(), 3, "{apply:#}");
    assert!(problems[0].contains("ext is a symlink to /tmp, outside the repository"));
    assert!(problems[1].contains("nullconf is a symlink to /dev/null"));
    assert!(problems[2].contains("pipe is not a regular file"));
    assert_eq!(apply["failed"].as_u64(), Some(3), "{apply:#}");
    // the latin-1 file kept its bytes through the shell edit, `rm l.py` left src/a.py, and
    // `git checkout .` put both back as in the base; `git stash` put src/a.py and latin.txt
    // back for a test run (the Read after it is not reconciled) and `git stash pop` brought
    // them back (the Edit after it finds the agent's src/a.py)
    assert_eq!(apply["sha1_checked"].as_u64(), Some(5), "{apply:#}");
    assert_eq!(apply["restored"].as_u64(), Some(2), "{apply:#}");
    assert_eq!(apply["stashed"].as_u64(), Some(4), "{apply:#}");
    assert_eq!(apply["sha1_mismatch"].as_u64(), Some(0), "{apply:#}");
    assert_eq!(apply["unchanged_rewrites"].as_u64(), Some(1), "{apply:#}");
    // gen.py, seen from line 3 on, made by a script the trace cannot follow
    assert_eq!(apply["reconciled"].as_u64(), Some(1), "{apply:#}");
    assert_eq!(apply["outside_repo"].as_u64(), Some(0), "{apply:#}");
    assert_eq!(projection_invariants(&r), 20 * 3);
    oracle_holds_every_need(&r);
}

/// One trace that cannot be replayed does not cost the others: they are replayed and
/// summarised, the bad one is named with why, and the exit status says something failed.
#[test]
fn a_trace_that_cannot_be_replayed_is_listed_and_the_rest_go_on() {
    common::require_fuse();
    let good = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/traces/every_kind.jsonl");
    let (_tmp, out) = common::tempdir();
    let bad = out.join("broken.jsonl");
    std::fs::write(
        &bad,
        "{\"record\": \"header\", \"format\": \"worldfs-trace/1\", \"trace_id\": \"broken\"}\n\
         {\"record\": \"step\", \"step\": 0, \"turn\": 1, \"kind\": \"teleport\"}\n",
    )
    .unwrap();
    let report = out.join("report");
    let run = run_replay(&[&bad, &good], &report, "8000");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        !run.status.success(),
        "a failed trace must fail the run:\n{stderr}"
    );
    assert!(stderr.contains("broken.jsonl:2: bad step"), "{stderr}");
    assert!(
        stderr.contains("1 of the traces could not be replayed"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(stdout.contains("| worldfs_8k |"), "{stdout}");
    let summary = std::fs::read_to_string(report.join("summary.md")).unwrap();
    assert!(summary.starts_with("1 traces,"), "{summary}");
    assert!(
        summary.contains("Not replayed (1 of 2 traces)"),
        "{summary}"
    );
    assert!(report.join("every_kind.json").exists());
}

/// `--dump-projections` and `--misses`, the aids for seeing why a measure moved: one dump per
/// turn and projection strategy, in a directory made for them; lines for exactly the rows of
/// the CSV that count a need as missed or hold a stale view, and none left from an earlier run.
#[test]
fn a_replay_can_dump_its_projections_and_list_what_they_missed() {
    common::require_fuse();
    let trace = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/traces/every_kind.jsonl");
    let (_tmp, out) = common::tempdir();
    let dumps = out.join("not/yet/there");
    let misses = out.join("misses.jsonl");
    std::fs::write(&misses, "{\"left\": \"from an earlier run\"}\n").unwrap();
    let report = out.join("report");
    let run = run_replay_with(
        &[&trace],
        &report,
        "8000",
        &[
            "--dump-projections".as_ref(),
            dumps.as_os_str(),
            "--misses".as_ref(),
            misses.as_os_str(),
        ],
    );
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let num = |v: &str| -> u64 { v.parse().unwrap_or(0) };
    let mut projections = 0;
    let mut missed_rows = std::collections::BTreeSet::new();
    for row in csv_rows(&report.join("every_kind.csv")) {
        let (turn, strategy) = (&row["turn"], &row["strategy"]);
        if !row["budget"].is_empty() {
            projections += 1;
            let f = dumps.join(format!("every_kind-t{:03}-{strategy}.json", num(turn)));
            let dump: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap())
                .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            assert!(dump["body"]["messages"].is_array(), "{}", f.display());
            assert!(dump["evicted"].is_array(), "{}", f.display());
        }
        // a need not held fresh, or a stale view (listed with where it disagrees with the disk)
        if num(&row["fresh_file"]) < num(&row["needs_file"])
            || num(&row["fresh_range"]) < num(&row["needs_range"])
            || num(&row["stale_bytes"]) > 0
        {
            missed_rows.insert((turn.clone(), strategy.clone()));
        }
    }
    assert!(projections > 0);
    assert_eq!(std::fs::read_dir(&dumps).unwrap().count(), projections);
    let mut listed = std::collections::BTreeSet::new();
    for l in std::fs::read_to_string(&misses).unwrap().lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        assert_eq!(v["trace"], "every_kind", "{l}");
        assert!(v["miss"]["path"].is_string(), "{l}");
        listed.insert((
            v["turn"].to_string(),
            v["strategy"].as_str().unwrap().to_string(),
        ));
    }
    assert!(
        !missed_rows.is_empty(),
        "the history strategies hold stale views"
    );
    assert_eq!(listed, missed_rows);
}
