#!/usr/bin/env bash
# run-example.sh (`make run`): mount the built-in example workspace in place and show it working.
#
# Copies examples/workspace (a small Cargo project) to a temporary directory, notes the inode
# of a file, mounts worldfs over the directory itself (`worldfs mount DIR`), then through the
# mount: lists it, reads a file, writes a file, and stats a file to show that the mount reports
# the backing inode number. Unmounts with SIGTERM (as Ctrl-C would) and shows that the write
# reached the directory underneath, then mounts it again: the world comes back (goal, entries)
# and a file changed while nothing was mounted is found changed. Set KEEP=1 to keep the
# workspace copy.
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
# `worldfs watch` beside everything below (from /, so it holds nothing in the mount); what it
# printed is shown before the unmount.
(cd / && exec "$WORLDFS_BIN" watch -C "$WS" > "$WORK/watch.out" 2> "$WORK/watch.err") &
WATCH_PID=$!
wfs_defer "kill $WATCH_PID 2> /dev/null || true"
timeout 10 sh -c "until grep -q watching '$WORK/watch.err'; do sleep 0.05; done" \
  || wfs_die "worldfs watch did not start: $(cat "$WORK/watch.err")"
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
LIB_AS_READ=$WORK/lib.rs.as-read   # what the agent saw of src/lib.rs before its edit
cp src/lib.rs "$LIB_AS_READ"
show sed -n 1,12p src/main.rs > /dev/null
# A search: its result is kept while nothing below notes/ changes.
hook_event "{\"hook_event_name\":\"PreToolUse\",\"cwd\":\"$WS\",\"tool_name\":\"Grep\",\"tool_use_id\":\"toolu_example_0\",\"tool_input\":{\"pattern\":\"mounted\",\"path\":\"notes\",\"output_mode\":\"files_with_matches\"}}"
hook_event "{\"hook_event_name\":\"PostToolUse\",\"cwd\":\"$WS\",\"tool_name\":\"Grep\",\"tool_use_id\":\"toolu_example_0\",\"tool_input\":{\"pattern\":\"mounted\",\"path\":\"notes\",\"output_mode\":\"files_with_matches\"},\"tool_response\":{\"mode\":\"files_with_matches\",\"filenames\":[\"$WS/notes/mounted.md\"],\"numFiles\":1}}"
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
echo "== worldfs proxy: Claude Code's next model call, sent with the projection instead of its history"
# A stand-in for the Anthropic API records what reaches it; the proxy runs outside the mount
# (from /, with the socket the daemon printed), so nothing of it holds the mount busy. The
# hook events above were given by hand, not by a settings file: --hooks-elsewhere.
SOCK=$(sed -n 's/^worldfs: socket //p' "$WFS_LOG" | head -n 1)
API_REC=$WORK/stand-in-api.jsonl
python3 "$WFS_ROOT/scripts/stand-in-api.py" --record "$API_REC" --keep-bodies > "$WORK/api.out" 2>&1 &
API_PID=$!
wfs_defer "kill $API_PID 2> /dev/null || true"
(cd / && exec "$WORLDFS_BIN" -v proxy --socket "$SOCK" --hooks-elsewhere --listen 127.0.0.1:0 \
  --upstream "http://127.0.0.1:$(timeout 10 sh -c "until grep -q 'listening on' '$WORK/api.out'; do sleep 0.05; done; sed -n 's/.*listening on //p' '$WORK/api.out'")") \
  2> "$WORK/proxy.err" &
PROXY_PID=$!
wfs_defer "kill $PROXY_PID 2> /dev/null || true"
timeout 10 sh -c "until grep -q 'proxy on http://' '$WORK/proxy.err'; do sleep 0.05; done" \
  || { cat "$WORK/proxy.err" "$WORK/api.out" >&2; wfs_die "worldfs proxy did not start"; }
PROXY=$(sed -n 's|^worldfs: proxy on \(http://[^ ]*\).*|\1|p' "$WORK/proxy.err")
grep '^worldfs:' "$WORK/proxy.err"
python3 - "$PROXY" "$WS" "$LIB_AS_READ" "$API_REC" <<'PY'
import json, sys, urllib.request
proxy, ws, lib_as_read, rec = sys.argv[1:]
old_lib = open(lib_as_read).read()
numbered = lambda text: "\n".join("%d\t%s" % (i + 1, l) for i, l in enumerate(text.splitlines()))
prompt = "Add a --top N option that prints the N most frequent words"
# The history as Claude Code would send it: its reminders and the prompt, a Read of
# src/lib.rs (before the edit: that copy is stale now), the edit, and the last call.
calls = [("Read", {"file_path": ws + "/src/lib.rs"}, numbered(old_lib)),
         ("Bash", {"command": "ls src"}, "lib.rs\nmain.rs"),
         ("Edit", {"file_path": ws + "/src/lib.rs", "old_string": "x", "new_string": "y"},
          "The file %s/src/lib.rs has been updated." % ws),
         ("Bash", {"command": "cargo build"}, "Finished `dev` profile")]
messages = [{"role": "user", "content": [
    {"type": "text", "text": "<system-reminder>\nCLAUDE.md: keep functions small.\n</system-reminder>"},
    {"type": "text", "text": prompt}]}]
for i, (name, inp, result) in enumerate(calls):
    messages.append({"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_demo_%d" % i, "name": name, "input": inp}]})
    messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_demo_%d" % i, "content": result}]})
schema = {"type": "object", "properties": {}}
body = {"model": "claude-sonnet-4-5", "max_tokens": 1024, "stream": True,
        "system": [{"type": "text", "text": "You are Claude Code."}],
        "tools": [{"name": n, "input_schema": schema} for n in ("Read", "Bash", "Edit")],
        "messages": messages}
req = urllib.request.Request(proxy + "/v1/messages?beta=true", data=json.dumps(body).encode(),
                             headers={"content-type": "application/json", "x-api-key": "demo",
                                      "anthropic-version": "2023-06-01"})
with urllib.request.urlopen(req, timeout=30) as r:
    events = [l for l in r.read().decode().splitlines() if l.startswith("event: ")]
print("answer: HTTP 200, %d server-sent events streamed back (%s ... %s)" % (
    len(events), events[0][7:], events[-1][7:]))
sent = json.loads(open(rec).read().splitlines()[-1])["body"]
text = json.dumps(sent["messages"])
print("Claude Code sent %d messages (%d bytes); the API received %d (%d bytes): %s" % (
    len(messages), len(json.dumps(messages)), len(sent["messages"]), len(text),
    " ".join(m["role"] for m in sent["messages"])))
print("src/lib.rs in what the API received: %s" % (
    "current, with top_words()" if "top_words" in text else "MISSING the edit"))
print("the stale copy of src/lib.rs from the history: %s" % (
    "gone" if numbered(old_lib) not in text else "STILL THERE"))
sys.exit(0 if "top_words" in text and numbered(old_lib) not in text else 1)
PY
grep -o '/v1/messages: sent.*' "$WORK/proxy.err" | sed 's/^/proxy log: /' || true
# The proxy reports each call to the mount once it has gone; `worldfs status` shows the totals.
for _ in $(seq 50); do "$WORLDFS_BIN" status 2> /dev/null | grep '^proxy:' && break; sleep 0.1; done
echo "(four calls in, the history is still smaller than the files it touched; as it grows, what is"
echo " sent stays within the projection's budget: 6% of the history after 100 calls, make bench-proxy)"
kill "$PROXY_PID" "$API_PID" 2> /dev/null || true
wait "$PROXY_PID" "$API_PID" 2> /dev/null || true
grep '^worldfs: proxy stopped' "$WORK/proxy.err" || true

echo
echo "== worldfs watch -C $WS, run beside all of the above: what happened in the mount, live"
cat "$WORK/watch.out"
grep -q ' sent ' "$WORK/watch.out" || wfs_die "worldfs watch showed no projection served"

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

echo
echo "== a restart: the world was saved at unmount, and the next mount starts from it"
echo "// edited while nothing was mounted" >> "$WS/src/main.rs"
echo "(appended a line to src/main.rs while nothing was mounted)"
wfs_mount "$WS"
grep '^worldfs: world restored' "$WFS_LOG" || wfs_die "the world was not restored"
cd "$WS"
show "$WORLDFS_BIN" goal
# Each restored entry is counted again when the world is idle: src/main.rs is found changed.
for _ in $(seq 50); do
  "$WORLDFS_BIN" status | grep -q 'found changed' && break
  sleep 0.1
done
show "$WORLDFS_BIN" status
"$WORLDFS_BIN" status | grep -q '1 found changed' || wfs_die "the change made while unmounted was not found"
cd /
wfs_unmount "$WS" || wfs_die "the mount did not unmount cleanly"
[ "${KEEP:-0}" != 1 ] || echo "kept: $WS"
echo "make run: OK"
