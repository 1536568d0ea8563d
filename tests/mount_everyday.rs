//! What tools do in a project (`scripts/everyday-tools.sh`: sqlite with its WAL, shared mmap,
//! fifos and sockets in the tree, locks, `O_TMPFILE`, `copy_file_range`, odd names, building
//! and running a binary, git, a venv...) passes natively and through a mirror mount in both I/O
//! modes. tests/mount_unprivileged.rs runs the same script through a mount made by `nobody`.
//! A check that fails natively fails the test too: the host lacks something it needs.

mod common;

use std::path::Path;
use std::process::Command;

use common::Mount;

/// Runs the script in `dir`; the names of the checks that failed, with why, and the output.
fn everyday_tools(dir: &Path) -> (Vec<String>, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/everyday-tools.sh");
    let out = Command::new("bash")
        .arg(&script)
        .arg(dir)
        .output()
        .unwrap_or_else(|e| panic!("running {}: {e}", script.display()));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let failed: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("FAIL"))
        .map(str::to_owned)
        .collect();
    let checks = text.lines().filter(|l| l.starts_with("ok ")).count() + failed.len();
    assert!(
        checks >= 30,
        "the script ran {checks} checks:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        out.status.success(),
        failed.is_empty(),
        "exit status and the checks disagree:\n{text}"
    );
    (failed, text)
}

#[test]
fn everyday_tools_work_through_the_mount_as_natively() {
    let (_tmp, base) = common::tempdir();
    let native = base.join("native");
    std::fs::create_dir(&native).unwrap();
    let (failed, text) = everyday_tools(&native);
    assert!(
        failed.is_empty(),
        "natively (the host lacks something?):\n{text}"
    );
    for args in [["--io", "passthrough"], ["--io", "daemon"]] {
        let m = Mount::mirror_with(&args);
        let (failed, text) = everyday_tools(&m.root);
        assert!(
            failed.is_empty(),
            "through the mount {args:?}:\n{}\n\nall checks:\n{text}\ndaemon output:\n{}",
            failed.join("\n"),
            m.log()
        );
    }
}
