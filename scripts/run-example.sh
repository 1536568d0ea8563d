#!/usr/bin/env bash
# run-example.sh (`make run`): mount the built-in example workspace in place and show it working.
#
# Copies examples/workspace (a small Cargo project) to a temporary directory, notes the inode
# of a file, mounts worldfs over the directory itself (`worldfs mount DIR`), then through the
# mount: lists it, reads a file, writes a file, and stats a file to show that the mount reports
# the backing inode number. Unmounts with SIGTERM (as Ctrl-C would) and shows that the write
# reached the directory underneath. Set KEEP=1 to keep the workspace copy.
set -euo pipefail
WFS_PROG=run-example.sh
# shellcheck source=scripts/lib-mount.sh
. "$(dirname "$0")/lib-mount.sh"

wfs_init
wfs_find_bin
WORK=$(mktemp -d "${WFS_WORK_BASE:-/var/tmp}/worldfs-example.XXXXXX")
[ "${KEEP:-0}" = 1 ] || wfs_defer "wfs_rm_tree $(printf %q "$WORK")"
WS=$WORK/workspace
cp -a "$WFS_ROOT/examples/workspace" "$WS"
INO_BEFORE=$(stat -c %i "$WS/src/lib.rs")

show() { printf '\n$ %s\n' "$*"; "$@"; }

echo "== worldfs: mounting the example workspace in place: $WS"
wfs_mount "$WS"
grep " $WS " /proc/self/mountinfo | sed 's/^/mountinfo: /'
cd "$WS"   # a shell that cd's in after the mount sees the mount
wfs_defer "cd /"   # leave the mount before the unmount trap runs, or it would only detach
show ls -la
show cat src/lib.rs
echo "- [x] mounted with worldfs ($(date -u +%FT%TZ))" > notes/mounted.md
show cat notes/mounted.md
show stat src/lib.rs
INO_MOUNT=$(stat -c %i src/lib.rs)

echo
echo "== the world as a harness sees it: a goal, a few agent-like actions, then the projection"
# The prompt and a tool call as Claude Code's hooks pass them (README, "With Claude Code").
hook_event() { printf "\n$ echo '%s' | worldfs hook\n" "$1"; printf '%s' "$1" | "$WORLDFS_BIN" hook; }
hook_event "{\"hook_event_name\":\"UserPromptSubmit\",\"cwd\":\"$WS\",\"prompt\":\"Add a --top N option that prints the N most frequent words\"}"
show "$WORLDFS_BIN" goal
show sed -n 1,12p src/main.rs > /dev/null
hook_event "{\"hook_event_name\":\"PostToolUse\",\"cwd\":\"$WS\",\"tool_name\":\"Bash\",\"tool_use_id\":\"toolu_example_1\",\"tool_input\":{\"command\":\"ls src\"},\"tool_response\":{\"stdout\":\"lib.rs\\nmain.rs\\n\",\"stderr\":\"\"}}"
cat >> src/lib.rs <<'RS'

/// The `n` most frequent words of `text`, most frequent first.
pub fn top_words(text: &str, n: usize) -> Vec<(String, usize)> {
    let mut counts = std::collections::HashMap::new();
    for w in text.split_whitespace() {
        *counts.entry(w.to_lowercase()).or_insert(0) += 1;
    }
    let mut v: Vec<_> = counts.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    v.truncate(n);
    v
}
RS
echo "(appended top_words() to src/lib.rs through the mount)"
sleep 0.3   # let the world ingest what just happened
show "$WORLDFS_BIN" status
show "$WORLDFS_BIN" projection --format text --budget 4000
echo
echo "(the same world as an Anthropic Messages request body: message roles in order)"
"$WORLDFS_BIN" projection --format anthropic --budget 4000 2>/dev/null \
  | python3 -c 'import json,sys; d=json.load(sys.stdin); print(" ".join(m["role"] for m in d["messages"]), "| tools:", ", ".join(t["name"] for t in d["tools"]))' \
  || echo "(python3 missing: skipped the summary)"
echo
if [ "$INO_MOUNT" = "$INO_BEFORE" ]; then
  echo "backing inode preserved: src/lib.rs is inode $INO_MOUNT both through the mount and on disk"
else
  echo "WARNING: inode through the mount ($INO_MOUNT) differs from the backing inode ($INO_BEFORE)"
fi
cd /

echo
echo "== unmounting (SIGTERM to the daemon, as Ctrl-C would)"
wfs_unmount "$WS" || wfs_die "the mount did not unmount cleanly"
if wfs_is_worldfs_mount "$WS"; then wfs_die "$WS is still mounted"; fi
echo "after unmount, the write is in the directory itself:"
show cat "$WS/notes/mounted.md"
[ "$INO_MOUNT" = "$INO_BEFORE" ] || exit 1
[ "${KEEP:-0}" != 1 ] || echo "kept: $WS"
echo "make run: OK"
