#!/usr/bin/env bash
# Drives a real Claude Code through a scripted session on a worldfs mount, and checks what the
# mount, the hook and the proxy made of it. No model is called: the stand-in API
# (scripts/stand-in-api.py --script) answers the session's model calls with the tool calls of
# a small bug fix (two Reads at once, a task planned with TaskCreate, which ToolSearch loads, a
# Bash `cat`, Edit, a Bash run, done). Claude Code runs them for real,
# through the mount, with `worldfs hook` installed and its calls going through `worldfs proxy`.
# Then the session is resumed to `/compact` it (the stand-in answers with a summary), and
# resumed again with a new prompt, whose calls open with the summary. Then a new session hands
# a question to a subagent (Agent), which reads a file and answers; a session whose first prompt
# names a file with `@` (Claude Code attaches it as a Read of its own); a session whose
# context the stand-in reports full, so that Claude Code compacts it on its own; and last a
# session that reads a file another program then rewrites (an editor's save), resumed with a
# new prompt: its history holds the old copy, the call sent upstream must hold the new one; a
# session that Greps and Reads part of a big file; one that reads a screenshot, a file outside
# the project and an issue (a Bash output that read no file); one that loads a skill; one that
# asks an MCP server (a stand-in issue tracker, over stdio) for an issue; one that reads a Jupyter
# notebook with a figure and edits a cell (NotebookEdit); one whose test run prints more than
# Claude Code sends (it saves the output to a file, and shows where, and its head); one signed
# in with a subscription (an OAuth token), whose prompt-cache breakpoints are hour-long; one that
# runs an agent and a command in the background; one that reads in a directory with a CLAUDE.md
# of its own (the project also has a `.mcp.json`, which must stay out of the world); one in a git
# worktree (`claude --worktree`, in a repository of its own below the project); one opened with
# a custom command (`/look util.py`) and resumed with it again; and last,
# in tmux, an interactive session whose agent asks the user a question (AskUserQuestion,
# answered with Enter: the answer joins the goal), whose user runs a command in bash mode (`!`),
# then takes a second prompt, and takes it back (rewind) for another. What the history held that no file does must stay in the model's
# view behind the proxy.
#
#   scripts/claude-live.sh            # `make check-claude-code`
#
# CLAUDE_CODE_VERSION (default below) picks the npm release of @anthropic-ai/claude-code; it is
# installed once under bench-work/claude-code/. KEEP=1 leaves the work directory for a look.
# INTERACTIVE=0 leaves the interactive session out (it needs tmux).
# The checks follow the default release's shapes: an older one misses those of what it lacks
# (2.1.100, the last one run by node: no ToolSearch or TaskCreate, no subagent header, and no
# environment message, so a conversation with one call before its last turn has nothing the
# proxy would replace).
# Needs root (mounting), npm, python3, tmux. Exits non-zero, saying which check failed, on any miss.
set -euo pipefail

WFS_ROOT=$(cd "$(dirname "$0")/.." && pwd)
BIN=${WFS_BIN:-$WFS_ROOT/target/release/worldfs}
VERSION=${CLAUDE_CODE_VERSION:-2.1.332}
PREFIX=$WFS_ROOT/bench-work/claude-code/$VERSION
CLAUDE=$PREFIX/node_modules/.bin/claude

say() { echo "claude-live: $*"; }
fail() { echo "claude-live: FAILED: $*" >&2; exit 1; }

[ -x "$BIN" ] || fail "no worldfs at $BIN (make build)"
# shellcheck source=scripts/lib-npm.sh
. "$WFS_ROOT/scripts/lib-npm.sh"
# shellcheck source=scripts/lib-stand-in.sh
. "$WFS_ROOT/scripts/lib-stand-in.sh"
npm_once @anthropic-ai/claude-code "$VERSION" "$PREFIX" claude || fail "no Claude Code to run"
say "$("$CLAUDE" --version), $("$BIN" --version)"

WORK=$(mktemp -d /tmp/worldfs-claude-live.XXXXXX)
PROJ=$WORK/project
pids=()
mount_pid=
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2> /dev/null || true; done
  if grep -q " $PROJ fuse" /proc/mounts 2> /dev/null; then
    cd /
    "$BIN" unmount "$PROJ" > /dev/null 2>&1 || true
  fi
  [ -z "$mount_pid" ] || wait "$mount_pid" 2> /dev/null || true
  if [ "${KEEP:-0}" = 1 ]; then say "work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

mkdir -p "$PROJ" "$WORK/home"
cat > "$PROJ/calc.py" << 'EOF'
from util import show


def add(a, b):
    return a - b


show(add(2, 3))
EOF
cat > "$PROJ/util.py" << 'EOF'
def show(x):
    print(f"result: {x}")
EOF
cat > "$PROJ/CLAUDE.md" << 'EOF'
# Project rules

Keep functions small; run `python3 calc.py` after a change.
EOF
python3 -c 'print("".join(f"def f{i}():\n    return {i}\n\n\n" if i != 52 else "LIMIT = 10\n\n\n" for i in range(100)), end="")' > "$PROJ/big.py"
# A 64x48 red PNG: a screenshot the agent looks at.
python3 - "$PROJ/shot.png" << 'PY'
import struct, sys, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
rows = b"".join(b"\0" + b"\xc8\x1e\x1e" * 64 for _ in range(48))
png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 64, 48, 8, 2, 0, 0, 0))
       + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
open(sys.argv[1], "wb").write(png)
PY
# A notebook with two figures of noise: a small one (2 KB of base64), which Read sends as an
# image, and one of 60 KB, past what Read sends of a cell's outputs (10,000 characters).
python3 - "$PROJ/sales.ipynb" << 'PY'
import base64, json, random, struct, sys, zlib
def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
rng = random.Random(7)
def png(w, h):
    rows = b"".join(b"\0" + bytes(rng.randrange(256) for _ in range(w * 3)) for _ in range(h))
    raw = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))
    return base64.b64encode(raw).decode()
code = lambda id, src, outputs: {"cell_type": "code", "id": id, "metadata": {}, "execution_count": 1,
                                 "source": src, "outputs": outputs}
figure = lambda data, text: [{"output_type": "display_data", "metadata": {},
                              "data": {"image/png": data, "text/plain": [text]}}]
nb = {"cells": [
    {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": ["# Sales\n", "Monthly totals."]},
    code("load", "sales = [3, 4, 5]", []),
    code("total", "print(sales)", [{"output_type": "stream", "name": "stdout", "text": ["[3, 4, 5]\n"]}]),
    code("plot", "plt.plot(sales)", figure(png(24, 16), "<Figure size 240x160 with 1 Axes>")),
    code("heat", "plt.imshow(grid)", figure(png(150, 100), "<Figure size 640x480 with 1 Axes>")),
], "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5}
json.dump(nb, open(sys.argv[1], "w"), indent=1)
PY
# A generated module of 320 KB, over the size Claude Code's Read shows.
python3 -c 'print("".join(f"def f{i}(x):\n    return x * {i}  # a generated line of the table\n\n" for i in range(4500)), end="")' > "$PROJ/generated.py"
# A test run whose output (some 120 KB) is too large for Claude Code to send whole.
cat > "$PROJ/run_tests.py" << 'EOF'
for i in range(3000):
    print(f"tests/test_calc.py::test_case_{i} PASSED")
print("FAILED tests/test_calc.py::test_edge - AssertionError: 3 != 4")
EOF
# A directory with instructions of its own: Claude Code attaches them to the result of the first
# Read there. And Claude Code's project MCP configuration, which it reads at every start.
mkdir -p "$PROJ/pkg"
echo 'RATE = 3' > "$PROJ/pkg/rates.py"
echo 'PKG RULE: rates are integers.' > "$PROJ/pkg/CLAUDE.md"
echo '{"mcpServers": {}}' > "$PROJ/.mcp.json"
# A git repository of its own, for a session in a worktree (`claude --worktree`).
mkdir -p "$PROJ/app"
echo 'RATE = 3' > "$PROJ/app/rates.py"
echo 'Rates are set by finance.' > "$PROJ/app/notes.md"
git -C "$PROJ/app" init -q
git -C "$PROJ/app" -c user.name=live -c user.email=live@example.com add -A
git -C "$PROJ/app" -c user.name=live -c user.email=live@example.com commit -qm "rates"
cat > "$PROJ/NOTES.md" << 'EOF'
# Notes

add() must add; the tests expect show(add(2, 3)) to print 5.
EOF
cat > "$WORK/script.json" << EOF
[
  {"calls": [{"tool": "Read", "input": {"file_path": "$PROJ/calc.py"}},
             {"tool": "Read", "input": {"file_path": "$PROJ/NOTES.md"}}]},
  {"tool": "ToolSearch", "input": {"query": "select:TaskCreate"}},
  {"tool": "TaskCreate", "input": {"subject": "Make add() add", "description": "add() subtracts", "activeForm": "Fixing add()"}},
  {"tool": "Bash", "input": {"command": "cat util.py", "description": "Show util.py"}},
  {"tool": "Edit", "input": {"file_path": "$PROJ/calc.py", "old_string": "a - b", "new_string": "a + b"}},
  {"tool": "Bash", "input": {"command": "python3 calc.py", "description": "Run it"}},
  {"text": "Fixed: add() now adds."},
  {"tool": "Bash", "input": {"command": "python3 calc.py", "description": "Run it again"}},
  {"text": "It prints 5."},
  {"tool": "Agent", "input": {"description": "Look at util", "prompt": "Read util.py and say what show() does.", "subagent_type": "general-purpose", "run_in_background": false}},
  {"text": "show() prints its argument."},
  {"tool": "Read", "input": {"file_path": "$PROJ/calc.py"}},
  {"text": "Explained util.py."},
  {"tool": "Read", "input": {"file_path": "$PROJ/calc.py"}, "input_tokens": 999000},
  {"tool": "Bash", "input": {"command": "python3 calc.py", "description": "Run it"}},
  {"text": "It still prints 5."},
  {"tool": "Read", "input": {"file_path": "$PROJ/util.py"}},
  {"text": "util.py has show()."},
  {"text": "show() now prints its label first."},
  {"tool": "Grep", "input": {"pattern": "LIMIT", "output_mode": "content", "-n": true}},
  {"tool": "Read", "input": {"file_path": "$PROJ/big.py", "offset": 200, "limit": 20}},
  {"text": "LIMIT is set in big.py."},
  {"tool": "Read", "input": {"file_path": "$PROJ/shot.png"}},
  {"tool": "Read", "input": {"file_path": "$WORK/lib/helper.py"}},
  {"tool": "Bash", "input": {"command": "echo 'Issue 7: the label must be bold'", "description": "Read the issue"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/util.py"}},
  {"text": "The screenshot is red."},
  {"tool": "Skill", "input": {"skill": "house-style"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/util.py"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/calc.py"}},
  {"text": "Styled."},
  {"tool": "mcp__tracker__get_issue", "input": {"id": 7}},
  {"tool": "Read", "input": {"file_path": "$PROJ/util.py"}},
  {"text": "Issue 7 read."},
  {"tool": "Read", "input": {"file_path": "$PROJ/sales.ipynb"}},
  {"tool": "NotebookEdit", "input": {"notebook_path": "$PROJ/sales.ipynb", "cell_id": "total", "new_source": "print(sum(sales))"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/util.py"}},
  {"text": "The total is summed."},
  {"tool": "Read", "input": {"file_path": "$PROJ/generated.py"}},
  {"tool": "Bash", "input": {"command": "python3 run_tests.py", "description": "Run the tests"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/util.py"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/calc.py"}},
  {"text": "One test fails."},
  {"tool": "Read", "input": {"file_path": "$PROJ/calc.py"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/util.py"}},
  {"text": "Read on a subscription."},
  {"tool": "Agent", "input": {"description": "Look at util in the background", "prompt": "Read util.py and say what show() does.", "subagent_type": "general-purpose", "run_in_background": true}},
  {"tool": "Bash", "input": {"command": "sleep 1; python3 calc.py; echo background run done", "description": "Run calc.py in the background", "run_in_background": true}},
  {"tool": "Bash", "input": {"command": "sleep 3", "description": "Wait for it"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/util.py"}},
  {"text": "The background run ended."},
  {"tool": "Read", "input": {"file_path": "$PROJ/pkg/rates.py"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/util.py"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/calc.py"}},
  {"text": "Rates read."},
  {"tool": "Read", "input": {"file_path": "$PROJ/app/.claude/worktrees/wt1/rates.py"}},
  {"tool": "Edit", "input": {"file_path": "$PROJ/app/.claude/worktrees/wt1/rates.py", "old_string": "RATE = 3", "new_string": "RATE = 4"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/app/.claude/worktrees/wt1/notes.md"}},
  {"tool": "Bash", "input": {"command": "cat notes.md", "description": "Notes again"}},
  {"text": "Rate raised."},
  {"tool": "Read", "input": {"file_path": "$PROJ/util.py"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/NOTES.md"}},
  {"text": "Looked."},
  {"tool": "Read", "input": {"file_path": "$PROJ/calc.py"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/NOTES.md"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/util.py"}},
  {"text": "Looked again."},
  {"tool": "ToolSearch", "input": {"query": "select:AskUserQuestion"}},
  {"tool": "AskUserQuestion", "input": {"questions": [{"question": "Which label style?", "header": "Style", "multiSelect": false, "options": [{"label": "Bold", "description": "Print the label in bold"}, {"label": "Plain", "description": "Leave it as it is"}]}]}},
  {"tool": "Read", "input": {"file_path": "$PROJ/util.py"}},
  {"text": "Bold it is."},
  {"tool": "Read", "input": {"file_path": "$PROJ/calc.py"}},
  {"text": "Saw the run."},
  {"text": "Still bold."},
  {"tool": "Read", "input": {"file_path": "$PROJ/util.py"}},
  {"text": "Red it is."},
  {"tool": "Read", "input": {"file_path": "$PROJ/calc.py"}},
  {"tool": "Write", "input": {"file_path": "\$PLAN_FILE", "content": "# Fix add()\\n\\n1. Make add() add.\\n"}},
  {"tool": "ToolSearch", "input": {"query": "select:ExitPlanMode"}},
  {"tool": "ExitPlanMode", "input": {}},
  {"tool": "Write", "input": {"file_path": "\$PLAN_FILE", "content": "# Fix add()\\n\\n1. Make add() sum its arguments.\\n\\nPLAN: SUMS\\n"}},
  {"tool": "ExitPlanMode", "input": {}},
  {"tool": "Read", "input": {"file_path": "$PROJ/util.py"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/NOTES.md"}},
  {"tool": "Read", "input": {"file_path": "$PROJ/calc.py"}},
  {"text": "Planned."}
]
EOF
cat > "$WORK/subagent.json" << EOF
[
  {"tool": "Read", "input": {"file_path": "$PROJ/util.py"}},
  {"text": "show() prints its argument after 'result: '."}
]
EOF

"$BIN" mount "$PROJ" --no-state > "$WORK/mount.log" 2>&1 &
mount_pid=$!
for _ in $(seq 50); do grep -q " $PROJ fuse" /proc/mounts && break; sleep 0.1; done
grep -q " $PROJ fuse" /proc/mounts || fail "the mount did not appear: $(cat "$WORK/mount.log")"
cd "$PROJ"
"$BIN" hook --install > /dev/null
# What a user watching the mount sees of each projection served (from /: not keeping it busy).
(cd / && exec "$BIN" watch -C "$PROJ" --json > "$WORK/watch.jsonl" 2> "$WORK/watch.err") &
pids+=($!)
for _ in $(seq 50); do grep -q watching "$WORK/watch.err" && break; sleep 0.1; done

stand_in "$WORK/api.out" --record "$WORK/api.jsonl" --keep-bodies \
  --script "$WORK/script.json" --summary "1. Primary Request and Intent: fix add() in calc.py." \
  --subagent-script "$WORK/subagent.json" --subagent-prompt "Read util.py and say what show() does."
pids+=("$STAND_IN_PID")
API_PORT=$STAND_IN_PORT
[ -n "$API_PORT" ] || fail "the stand-in API did not start: $(cat "$WORK/api.out")"
"$BIN" proxy --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$API_PORT" -v > "$WORK/proxy.log" 2>&1 &
pids+=($!)
for _ in $(seq 50); do grep -q "proxy on" "$WORK/proxy.log" && break; sleep 0.1; done
PROXY=$(sed -n 's/.*proxy on \(http:[^ ]*\).*/\1/p' "$WORK/proxy.log")
[ -n "$PROXY" ] || fail "the proxy did not start: $(cat "$WORK/proxy.log")"

# claude_run NAME PROMPT [ARGS...]: one `claude -p`, its JSON result in $WORK/NAME.json; signed
# in with an API key, or as CLAUDE_AUTH (VAR=VALUE) says.
claude_run() {
  local name=$1 prompt=$2 rc
  shift 2
  set +e
  env HOME="$WORK/home" ANTHROPIC_BASE_URL="$PROXY" "${CLAUDE_AUTH:-ANTHROPIC_API_KEY=sk-stand-in}" \
    CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 \
    timeout 180 "$CLAUDE" -p "$prompt" --allowedTools "Read,Edit,Bash,ToolSearch,TaskCreate" \
    --permission-mode acceptEdits --output-format json "$@" > "$WORK/$name.json" 2> "$WORK/$name.err"
  rc=$?
  set -e
  [ "$rc" = 0 ] || fail "claude ($name) exited $rc: $(tail -5 "$WORK/$name.err" "$WORK/$name.json")"
}

say "running claude -p in $PROJ (API calls through $PROXY)"
claude_run fix "Fix add() in calc.py"
grep -q "Fixed: add() now adds." "$WORK/fix.json" || fail "claude did not finish the script: $(tail -c 500 "$WORK/fix.json")"
SID=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["session_id"])' "$WORK/fix.json")

"$BIN" ctl entries.list '{}' > "$WORK/entries.json"
"$BIN" ctl goal.list '{}' > "$WORK/goals.json"
"$BIN" ctl state.get "{\"session\": \"$SID\"}" > "$WORK/state.json"
"$BIN" projection --format text > "$WORK/projection.txt" 2> /dev/null
FIRST_CALLS=$(wc -l < "$WORK/api.jsonl")
FIRST_REWRITTEN=$(grep -c "sent .* instead of" "$WORK/proxy.log" || true)
# The proxy tells each rewritten call's account once it has gone upstream: wait for them all.
for _ in $(seq 50); do
  [ "$(grep -c '"event":"model_call"' "$WORK/watch.jsonl" || true)" -ge "$FIRST_REWRITTEN" ] && break
  sleep 0.1
done
wc -l < "$WORK/watch.jsonl" > "$WORK/watch-first.count"

say "resuming session $SID to /compact it, then with a new prompt"
claude_run compact "/compact" --resume "$SID"
claude_run again "Check that it prints 5" --resume "$SID"
grep -q "It prints 5." "$WORK/again.json" || fail "the resumed session did not finish: $(tail -c 500 "$WORK/again.json")"
"$BIN" ctl goal.get "{\"session\": \"$SID\"}" > "$WORK/goal-after.json"
BEFORE_AGENT_CALLS=$(wc -l < "$WORK/api.jsonl")
BEFORE_AGENT_REWRITTEN=$(grep -c "sent .* instead of" "$WORK/proxy.log" || true)

say "a new session whose question a subagent answers"
claude_run agent "What does show() do?" --allowedTools "Read,Agent"
grep -q "show() prints its argument." "$WORK/agent.json" || fail "the subagent session did not finish: $(tail -c 500 "$WORK/agent.json")"
ASID=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["session_id"])' "$WORK/agent.json")
AGENT_REWRITTEN=$(( $(grep -c "sent .* instead of" "$WORK/proxy.log" || true) - BEFORE_AGENT_REWRITTEN ))
"$BIN" ctl goal.list '{}' > "$WORK/goals-agent.json"
"$BIN" projection --format text --session "$ASID" > "$WORK/projection-agent.txt" 2> /dev/null
BEFORE_AT_CALLS=$(wc -l < "$WORK/api.jsonl")
BEFORE_AT_REWRITTEN=$(grep -c "sent .* instead of" "$WORK/proxy.log" || true)

say "a new session whose first prompt names a file with @"
claude_run at "Explain @util.py"
grep -q "Explained util.py." "$WORK/at.json" || fail "the @ session did not finish: $(tail -c 500 "$WORK/at.json")"
AT_REWRITTEN=$(( $(grep -c "sent .* instead of" "$WORK/proxy.log" || true) - BEFORE_AT_REWRITTEN ))
BEFORE_AUTO_CALLS=$(wc -l < "$WORK/api.jsonl")
BEFORE_AUTO_LOG=$(wc -l < "$WORK/proxy.log")

say "a new session whose context fills up, so that Claude Code compacts it on its own"
claude_run auto "Run calc.py"
grep -q "It still prints 5." "$WORK/auto.json" || fail "the compacted session did not finish: $(tail -c 500 "$WORK/auto.json")"
AUTO_SID=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["session_id"])' "$WORK/auto.json")
"$BIN" ctl goal.get "{\"session\": \"$AUTO_SID\"}" > "$WORK/goal-auto.json"
tail -n +$((BEFORE_AUTO_LOG + 1)) "$WORK/proxy.log" > "$WORK/proxy-auto.log"
BEFORE_EDITOR_CALLS=$(wc -l < "$WORK/api.jsonl")

say "a new session that reads util.py; the user's editor changes it; the session is resumed"
claude_run editor "Read util.py"
grep -q "util.py has show()." "$WORK/editor.json" || fail "the editor session did not finish: $(tail -c 500 "$WORK/editor.json")"
ESID=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["session_id"])' "$WORK/editor.json")
# Another program writes the file, as an editor saving it would (a rename over it).
python3 - "$PROJ/util.py" << 'PY'
import os, sys
path = sys.argv[1]
with open(path + ".swp", "w") as f:
    f.write('LABEL = "result"\n\n\ndef show(x):\n    print(f"{LABEL}: {x}")\n')
os.replace(path + ".swp", path)
PY
sleep 1
claude_run editor2 "What changed in util.py?" --resume "$ESID"
grep -q "show() now prints its label first." "$WORK/editor2.json" || fail "the resumed editor session did not finish: $(tail -c 500 "$WORK/editor2.json")"
BEFORE_SEARCH_CALLS=$(wc -l < "$WORK/api.jsonl")
BEFORE_SEARCH_LOG=$(wc -l < "$WORK/proxy.log")

say "a new session that searches with Grep and reads a part of a big file"
claude_run search "Where is LIMIT set?" --allowedTools "Read,Grep"
grep -q "LIMIT is set in big.py." "$WORK/search.json" || fail "the search session did not finish: $(tail -c 500 "$WORK/search.json")"
# The world as the session left it (for a look with KEEP=1), and its projection (checked).
"$BIN" ctl entries.list '{}' > "$WORK/entries-search.json"
SSID=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["session_id"])' "$WORK/search.json")
"$BIN" ctl goal.list '{}' > "$WORK/goals-search.json"
"$BIN" ctl commands.list > "$WORK/commands-search.json"
"$BIN" projection --format text --session "$SSID" > "$WORK/projection-search.txt" 2> /dev/null
tail -n +$((BEFORE_SEARCH_LOG + 1)) "$WORK/proxy.log" > "$WORK/proxy-search.log"
BEFORE_IMAGE_CALLS=$(wc -l < "$WORK/api.jsonl")

say "a new session that reads a screenshot, a file outside the project, an issue, then a file"
mkdir -p "$WORK/lib"
echo 'HELPER_LIMIT = 7  # a library outside the project' > "$WORK/lib/helper.py"
claude_run image "Look at shot.png" --allowedTools "Read,Bash" --add-dir "$WORK/lib"
grep -q "The screenshot is red." "$WORK/image.json" || fail "the image session did not finish: $(tail -c 500 "$WORK/image.json")"
BEFORE_SKILL_CALLS=$(wc -l < "$WORK/api.jsonl")

say "a new session that loads a project skill, then reads two files"
mkdir -p "$PROJ/.claude/skills/house-style"
printf -- '---\nname: house-style\ndescription: How code in this project is styled\n---\n\nHOUSE RULE: every function gets a docstring.\n' \
  > "$PROJ/.claude/skills/house-style/SKILL.md"
claude_run skill "Style util.py" --allowedTools "Read,Skill"
grep -q "Styled." "$WORK/skill.json" || fail "the skill session did not finish: $(tail -c 500 "$WORK/skill.json")"
BEFORE_MCP_CALLS=$(wc -l < "$WORK/api.jsonl")

say "a new session that asks an MCP server (an issue tracker) for an issue, then reads a file"
# A stdio MCP server with one tool (newline-delimited JSON-RPC 2.0).
cat > "$WORK/tracker.py" << 'PY'
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method, result = msg.get("method"), {}
    if method == "initialize":
        result = {"protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "tracker", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "get_issue", "description": "An issue of the tracker",
                             "inputSchema": {"type": "object", "properties": {"id": {"type": "integer"}}}}]}
    elif method == "tools/call":
        n = msg["params"]["arguments"].get("id")
        result = {"content": [{"type": "text", "text": f"Issue {n}: show() must print the label in bold"}]}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
PY
cat > "$WORK/tracker-mcp.json" << EOF
{"mcpServers": {"tracker": {"command": "python3", "args": ["$WORK/tracker.py"]}}}
EOF
claude_run mcp "What does issue 7 say?" --allowedTools "Read,mcp__tracker__get_issue" \
  --mcp-config "$WORK/tracker-mcp.json"
grep -q "Issue 7 read." "$WORK/mcp.json" || fail "the MCP session did not finish: $(tail -c 500 "$WORK/mcp.json")"
BEFORE_NB_CALLS=$(wc -l < "$WORK/api.jsonl")

say "a new session that reads a notebook, edits one of its cells, then reads a file"
claude_run notebook "Make the total cell print the sum" --allowedTools "Read,NotebookEdit"
grep -q "The total is summed." "$WORK/notebook.json" || fail "the notebook session did not finish: $(tail -c 500 "$WORK/notebook.json")"
"$BIN" ctl entries.list '{}' > "$WORK/entries-notebook.json"
BEFORE_BIG_CALLS=$(wc -l < "$WORK/api.jsonl")

say "a new session whose Read of a big file is refused, that runs the tests, whose output is too large to send whole, then reads two files"
claude_run big "Run the tests" --allowedTools "Read,Bash"
grep -q "One test fails." "$WORK/big.json" || fail "the test-run session did not finish: $(tail -c 500 "$WORK/big.json")"
"$BIN" ctl entries.list '{}' > "$WORK/entries-big.json"
BEFORE_SUB_CALLS=$(wc -l < "$WORK/api.jsonl")

# Signed in with a subscription (an OAuth token; the stand-in takes any), Claude Code asks for
# an hour-long prompt cache: each of its breakpoints says `"ttl": "1h"`. The API refuses an
# hour-long breakpoint after a five-minute one, so the projection's must be hour-long too.
say "a new session signed in with a subscription (an OAuth token), whose breakpoints are hour-long"
BEFORE_SUB_REWRITTEN=$(grep -c "sent .* instead of" "$WORK/proxy.log" || true)
CLAUDE_AUTH=CLAUDE_CODE_OAUTH_TOKEN=sk-ant-oat01-stand-in claude_run sub "Read calc.py and util.py"
grep -q "Read on a subscription." "$WORK/sub.json" || fail "the subscription session did not finish: $(tail -c 500 "$WORK/sub.json")"
SUB_REWRITTEN=$(( $(grep -c "sent .* instead of" "$WORK/proxy.log" || true) - BEFORE_SUB_REWRITTEN ))

# An agent and a command run in the background: when each ends, Claude Code tells the model
# with a <task-notification> (the agent's holds its report), which it also passes to
# UserPromptSubmit hooks as if it were a prompt.
say "a new session that runs an agent and a command in the background, and hears that they ended"
BEFORE_BG_CALLS=$(wc -l < "$WORK/api.jsonl")
claude_run bg "Run calc.py in the background" --allowedTools "Read,Bash,Agent"
grep -q "The background run ended." "$WORK/bg.json" || fail "the background session did not finish: $(tail -c 500 "$WORK/bg.json")"
"$BIN" ctl goal.get '{}' > "$WORK/goal-bg.json"
"$BIN" ctl commands.list '{}' > "$WORK/commands-bg.json"
python3 - "$WORK" "$BEFORE_BG_CALLS" << 'PY' || exit 1
import json
import sys

work, before = sys.argv[1], int(sys.argv[2])
goal = json.load(open(f"{work}/goal-bg.json")).get("goal")
calls = [json.loads(line) for line in open(f"{work}/api.jsonl")][before:]
main = [c for c in calls if c.get("answer", 0) > 0 and not c.get("subagent")]
last = json.dumps(main[-1]["body"]["messages"]) if main else ""
reports = [c for c in json.load(open(f"{work}/commands-bg.json"))["commands"]
           if c.get("tool") == "Agent" and "Look at util in the background" in c.get("command", "")
           and "prints its argument" in c.get("output", "")]
# The report, in each call from the one that has the agent's notice on: once, in the notice
# the proxy keeps, not a second time as the output the hook keeps.
told = [json.dumps(c["body"]["messages"]) for c in main]
told = [t.count("prints its argument") for t in told if "Look at util in the background" in t and "<result>" in t]
if (goal != "Run calc.py in the background" or last.count("<task-notification>") != 2 or not reports
        or len(told) < 2 or set(told) != {1}):
    print(f"claude-live: FAILED: the ends of background tasks are not prompts of the user's, "
          f"their notices stay in the model's view once each, and the agent's report is kept, "
          f"and shown once: goal {goal!r}; {last.count('<task-notification>')} notices; "
          f"{len(reports)} reports; the report in each call: {told}; {last[-3000:]}", file=sys.stderr)
    sys.exit(1)
print("claude-live: ok: the <task-notification>s of background tasks are not taken for prompts "
      "of the user's (the goal is the prompt alone), stay in the model's view once each, and "
      f"the background agent's report in one is kept as its result, and shown once ({told})")
PY

# A CLAUDE.md below the root comes into the conversation once, with the first Read in its
# directory. Behind the proxy it must stay in the model's view with the instructions, once in
# each call, however many calls later.
say "a new session that reads a file in a directory with its own CLAUDE.md, then two files"
BEFORE_NESTED_CALLS=$(wc -l < "$WORK/api.jsonl")
claude_run nested "Read the rates" --allowedTools "Read"
grep -q "Rates read." "$WORK/nested.json" || fail "the nested-instructions session did not finish: $(tail -c 500 "$WORK/nested.json")"
"$BIN" ctl entries.list '{}' > "$WORK/entries-nested.json"
python3 - "$WORK" "$BEFORE_NESTED_CALLS" << 'PY' || exit 1
import json
import sys

work, before = sys.argv[1], int(sys.argv[2])
every = [json.loads(line) for line in open(f"{work}/api.jsonl")]
calls = every[before:]
main = [c for c in calls if not c.get("subagent") and "PKG RULE" in json.dumps(c.get("body"))]
counts = [json.dumps(c["body"]["messages"]).count("PKG RULE") for c in main]
if len(main) < 3 or counts != [1] * len(main):
    print(f"claude-live: FAILED: a CLAUDE.md below the root stays in the model's view, once in "
          f"each call: 'PKG RULE' in the calls after the Read that brought it: {counts}",
          file=sys.stderr)
    sys.exit(1)
print(f"claude-live: ok: a CLAUDE.md below the root stays in the model's view, once in each of "
      f"the {len(main)} calls after the Read that brought it")
entries = [e["path"] for e in json.load(open(f"{work}/entries-nested.json"))["entries"]]
sent = sum("mcpServers" in json.dumps(c.get("body")) for c in every)
if ".mcp.json" in entries or sent:
    print(f"claude-live: FAILED: Claude Code's .mcp.json is not in the world: entries "
          f"{entries}; {sent} calls hold it", file=sys.stderr)
    sys.exit(1)
print("claude-live: ok: Claude Code's .mcp.json, read at every start, is not in the world nor "
      "in any call")
PY

# `claude --worktree NAME` works in a git worktree it makes in the project's
# `.claude/worktrees/NAME`: the agent's files, though under `.claude`.
say "a new session in a git worktree (claude --worktree), which edits a file there"
BEFORE_WT_CALLS=$(wc -l < "$WORK/api.jsonl")
# The repository's own settings, which its worktrees' sessions read.
"$BIN" hook --install -C "$PROJ/app" > /dev/null
(cd "$PROJ/app" && claude_run worktree "Raise the rate" --worktree wt1)
grep -q "Rate raised." "$WORK/worktree.json" || fail "the worktree session did not finish: $(tail -c 500 "$WORK/worktree.json")"
"$BIN" ctl entries.list '{}' > "$WORK/entries-worktree.json"
python3 - "$WORK" "$BEFORE_WT_CALLS" << 'PY' || exit 1
import json
import sys

work, before = sys.argv[1], int(sys.argv[2])
calls = [json.loads(line) for line in open(f"{work}/api.jsonl")][before:]
main = [json.dumps(c["body"]["messages"]) for c in calls if c.get("answer", 0) > 0]
entries = {e["path"]: e for e in json.load(open(f"{work}/entries-worktree.json"))["entries"]}
rates = entries.get("app/.claude/worktrees/wt1/rates.py", {})
# From the call after the edit on: the file as it is now, not the Read's copy from before it.
after = [(m.count("RATE = 4"), m.count("RATE = 3")) for m in main[3:]]
if not rates.get("agent_wrote") or len(after) < 2 or any(new < 1 or old > 1 for new, old in after):
    print(f"claude-live: FAILED: a worktree's files are the agent's: rates.py in the world "
          f"{rates or 'no'}; (now, before) in each call after the edit: {after}", file=sys.stderr)
    sys.exit(1)
print("claude-live: ok: in a worktree (claude --worktree), the files the agent reads and edits "
      "are in the world, and each call holds them as they are now")
PY

# A custom command (.claude/commands/look.md): the prompt is `/look util.py`, as the hooks get
# it, and the first message holds the command's name and arguments, then its text. Then the
# session is resumed with the command again.
say "a new session opened with a custom command (/look), resumed with it again"
mkdir -p "$PROJ/.claude/commands"
printf -- '---\ndescription: Look at a file\n---\nRead $ARGUMENTS and say what it does. LOOK COMMAND\n' \
  > "$PROJ/.claude/commands/look.md"
BEFORE_CMD_CALLS=$(wc -l < "$WORK/api.jsonl")
BEFORE_CMD_REWRITTEN=$(grep -c "sent .* instead of" "$WORK/proxy.log" || true)
claude_run cmd "/look util.py" --allowedTools "Read"
grep -q "Looked." "$WORK/cmd.json" || fail "the command's session did not finish: $(tail -c 500 "$WORK/cmd.json")"
CMD_SID=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["session_id"])' "$WORK/cmd.json")
claude_run cmd2 "/look calc.py" --allowedTools "Read" --resume "$CMD_SID"
grep -q "Looked again." "$WORK/cmd2.json" || fail "the resumed command's session did not finish: $(tail -c 500 "$WORK/cmd2.json")"
CMD_REWRITTEN=$(( $(grep -c "sent .* instead of" "$WORK/proxy.log" || true) - BEFORE_CMD_REWRITTEN ))
"$BIN" ctl goal.get "{\"session\": \"$CMD_SID\"}" > "$WORK/goal-cmd.json"
python3 - "$WORK" "$BEFORE_CMD_CALLS" "$CMD_REWRITTEN" << 'PY' || exit 1
import json
import sys

work, before, rewritten = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
calls = [json.loads(line) for line in open(f"{work}/api.jsonl")][before:]
main = [json.dumps(c["body"]["messages"]) for c in calls if c.get("answer", 0) > 0]
goal = json.load(open(f"{work}/goal-cmd.json")).get("goal")
# The resumed run's calls (all but the first run's first call are rewritten): the second
# command's text once in each, in its message, then after the later prompt that says it.
text = "Read calc.py and say what it does. LOOK COMMAND"
later = [m.count(text) for m in main if "/look calc.py" in m or "<command-args>calc.py<" in m]
if (goal != "/look util.py\n\nThen the user asked:\n/look calc.py" or rewritten != len(main) - 1
        or len(later) < 2 or set(later) != {1}):
    print(f"claude-live: FAILED: a session opened with a custom command is rewritten, and a "
          f"command invoked later keeps its text: goal {goal!r}; {rewritten} of {len(main)} calls "
          f"rewritten; the later command's text in each call after it: {later}", file=sys.stderr)
    sys.exit(1)
print(f"claude-live: ok: a session opened with a custom command is the goal `/look util.py`, "
      f"its calls are rewritten ({rewritten} of {len(main)}: all but the first), and "
      f"the command invoked after the resume keeps its text in each call ({later})")
PY
BEFORE_TUI_CALLS=$(wc -l < "$WORK/api.jsonl")

# until SECONDS WHAT CMD...: polls CMD every 0.2 s; fails saying WHAT (and the screen) if it
# never holds.
until_ok() {
  local secs=$1 what=$2 i
  shift 2
  for i in $(seq $((secs * 5))); do "$@" && return 0; sleep 0.2; done
  fail "interactive session: $what (screen: $(tmux capture-pane -t "$TUI" -p 2> /dev/null | grep -v '^\s*$' | tail -15))"
}
screen_has() { tmux capture-pane -t "$TUI" -p 2> /dev/null | grep -qF -- "$1"; }
answered() { python3 -c 'import json, sys; n = sum(1 for l in open(sys.argv[1]) if json.loads(l).get("answer", 0) > 0); sys.exit(n < int(sys.argv[2]))' "$WORK/api.jsonl" "$1"; }
main_calls() { python3 -c 'import json, sys; print(sum(1 for l in open(sys.argv[1]) if json.loads(l).get("answer", 0) > 0))' "$WORK/api.jsonl"; }

if [ "${INTERACTIVE:-1}" = 1 ]; then
  say "an interactive session (in tmux): the agent asks the user a question, then a second prompt"
  command -v tmux > /dev/null || fail "the interactive session needs tmux (apt-get install tmux), or INTERACTIVE=0 to leave it out"
  # What a user's first start would ask: the theme, trusting the folder, the API key.
  python3 - "$WORK/home/.claude.json" "$PROJ" << 'PY'
import json, os, sys
path, proj = sys.argv[1], sys.argv[2]
cfg = json.load(open(path)) if os.path.exists(path) else {}
cfg.update({"hasCompletedOnboarding": True, "theme": "dark"})
cfg.setdefault("projects", {}).setdefault(proj, {})["hasTrustDialogAccepted"] = True
cfg["customApiKeyResponses"] = {"approved": ["sk-stand-in"], "rejected": []}
json.dump(cfg, open(path, "w"))
PY
  TUI=worldfs-live-$$
  tmux new-session -d -s "$TUI" -x 200 -y 50 -c "$PROJ" \
    "HOME=$WORK/home ANTHROPIC_BASE_URL=$PROXY ANTHROPIC_API_KEY=sk-stand-in CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 $CLAUDE --allowedTools Read,ToolSearch,AskUserQuestion --permission-mode acceptEdits 2> $WORK/tui.err; sleep 30"
  tui_done() { tmux kill-session -t "$TUI" 2> /dev/null || true; }
  trap 'tui_done; cleanup' EXIT
  until_ok 30 "Claude Code did not show its prompt" screen_has "accept edits"
  N0=$(main_calls)
  # type PROMPT: types it, and sends it once the screen shows it typed.
  type_prompt() {
    tmux send-keys -t "$TUI" "$1"
    until_ok 10 "the prompt did not show as typed" screen_has "$1"
    sleep 0.3
    tmux send-keys -t "$TUI" Enter
  }
  type_prompt "Make the label nicer"
  until_ok 30 "the question was not shown" screen_has "Which label style?"
  until_ok 10 "the question's options were not shown" screen_has "Enter to select"
  # The first option, with Enter. Right after it shows, the menu may not take keys yet (seen
  # under load): Enter again while it is still there.
  for _ in 1 2 3 4 5; do
    sleep 1
    screen_has "Enter to select" || break
    tmux send-keys -t "$TUI" Enter
  done
  until_ok 30 "the first prompt's turn did not finish" answered $((N0 + 4))
  until_ok 10 "the first answer was not shown" screen_has "Bold it is."
  # The user runs a command in bash mode (`!`) to show the agent its output; Claude Code sends
  # it to the model at once, as a turn of its own.
  tmux send-keys -t "$TUI" "!"
  sleep 0.5
  type_prompt "echo BANG RUN \$((6 * 7))"
  until_ok 10 "the command's output was not shown" screen_has "BANG RUN 42"
  until_ok 30 "the command's turn did not finish" answered $((N0 + 6))
  until_ok 10 "the command's answer was not shown" screen_has "Saw the run."
  type_prompt "Is it still bold?"
  until_ok 30 "the second prompt's turn did not finish" answered $((N0 + 7))
  until_ok 10 "the second answer was not shown" screen_has "Still bold."
  # The user takes the second prompt back (Esc Esc, the prompt, "Restore conversation"), which
  # no hook hears of, and asks something else.
  tmux send-keys -t "$TUI" Escape
  sleep 0.3
  tmux send-keys -t "$TUI" Escape
  until_ok 10 "the rewind menu was not shown" screen_has "Restore the code and/or conversation"
  tmux send-keys -t "$TUI" Up
  until_ok 10 "the second prompt was not chosen to rewind to" screen_has "❯ Is it still bold?"
  tmux send-keys -t "$TUI" Enter
  until_ok 10 "the rewind's choices were not shown" screen_has "Restore conversation"
  tmux send-keys -t "$TUI" Enter
  # The prompt taken back comes back in the input box (after "❯" and a no-break space), and
  # its answer leaves the screen: cleared first.
  restored() { ! screen_has "Summarize from here" && ! screen_has "Still bold." && screen_has "Is it still bold?"; }
  until_ok 20 "the prompt taken back was not put back in the input box" restored
  for _ in $(seq 20); do tmux send-keys -t "$TUI" BSpace; done
  sleep 0.3
  screen_has "Is it still bold?" && fail "the prompt taken back was not cleared from the input box"
  type_prompt "Make it red"
  until_ok 30 "the prompt after the rewind did not finish" answered $((N0 + 9))
  tui_done
  AFTER_TUI_CALLS=$(wc -l < "$WORK/api.jsonl")
  "$BIN" ctl goal.list '{}' > "$WORK/goals-tui.json"
  "$BIN" ctl commands.list '{}' > "$WORK/commands-tui.json"

  # Plan mode: the agent writes a plan (to a file under ~/.claude/plans) and asks for approval
  # (ExitPlanMode). The user sends it back with a note, then approves the second one. Neither
  # the note nor the approved plan reaches a hook as anything it keeps, and with the history
  # they would leave the model's view one call later.
  say "an interactive session in plan mode: a plan sent back with a note, then one approved"
  BEFORE_PLAN_CALLS=$(wc -l < "$WORK/api.jsonl")
  TUI=worldfs-live-plan-$$
  tmux new-session -d -s "$TUI" -x 200 -y 50 -c "$PROJ" \
    "HOME=$WORK/home ANTHROPIC_BASE_URL=$PROXY ANTHROPIC_API_KEY=sk-stand-in CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_AUTOUPDATER=1 $CLAUDE --allowedTools Read,ToolSearch --permission-mode plan 2> $WORK/tui-plan.err; sleep 30"
  until_ok 30 "Claude Code did not show its prompt in plan mode" screen_has "plan mode on"
  N0=$(main_calls)
  type_prompt "Plan how to fix add()"
  until_ok 30 "the first plan was not shown for approval" screen_has "Would you like to proceed?"
  # The third option takes the note typed over it.
  tmux send-keys -t "$TUI" Down
  sleep 0.3
  tmux send-keys -t "$TUI" Down
  until_ok 10 "the option to send the plan back was not chosen" screen_has "❯ 3."
  tmux send-keys -t "$TUI" "Use sums instead"
  until_ok 10 "the note did not show as typed" screen_has "Use sums instead"
  sleep 0.3
  tmux send-keys -t "$TUI" Enter
  until_ok 30 "the second plan was not shown for approval" screen_has "PLAN: SUMS"
  until_ok 10 "the second plan's question was not shown" screen_has "Would you like to proceed?"
  # "Yes, manually approve edits".
  tmux send-keys -t "$TUI" Down
  until_ok 10 "the option to approve was not chosen" screen_has "❯ 2."
  sleep 0.3
  tmux send-keys -t "$TUI" Enter
  until_ok 30 "the plan-mode session's turn did not finish" answered $((N0 + 10))
  until_ok 10 "its last answer was not shown" screen_has "Planned."
  tui_done
  python3 - "$WORK" "$BEFORE_PLAN_CALLS" << 'PY' || exit 1
import json
import sys

work, before = sys.argv[1], int(sys.argv[2])
calls = [json.loads(line) for line in open(f"{work}/api.jsonl")][before:]
main = [json.dumps(c["body"]["messages"]) for c in calls if c.get("answer", 0) > 0]
note = [m.count("Use sums instead") for m in main]
plan = [m.count("## Approved Plan") for m in main]
faded = sum("earlier ExitPlanMode" in m for m in main)
# The note is in the model's view from the call after it was typed on, once in each call; the
# approved plan from the call after the approval on.
after_note = note[note.index(1):] if 1 in note else []
after_plan = plan[plan.index(1):] if 1 in plan else []
if len(after_note) < 5 or set(after_note) != {1} or len(after_plan) < 3 or set(after_plan) != {1} or faded:
    print(f"claude-live: FAILED: interactive: in plan mode, the user's note on a plan sent back "
          f"and the plan approved stay in the model's view, once each: the note {note}, the "
          f"approved plan {plan}, {faded} calls with the plan as an output", file=sys.stderr)
    sys.exit(1)
print(f"claude-live: ok: interactive: in plan mode, the user's note on a plan sent back stays in "
      f"the model's view ({after_note}), and so does the plan approved ({after_plan}), once each")
# The plan file is outside the project: the first plan as the agent wrote it stays in view
# after the call that wrote it, until the second replaces it (the user sent the first back, and
# the agent revises it); the approved one is then shown once, not also as the file's copy.
first = [m.count("1. Make add() add.") for m in main]
sums = [m.count("PLAN: SUMS") for m in main]
# The call that wrote it (its last turn holds the Write) is the first that shows it.
wrote = next((n for n, c in enumerate(first) if c), len(first))
between = first[wrote + 1:wrote + 3]
approved = sums[plan.index(1):] if 1 in plan else []
if between != [1, 1] or len(approved) < 3 or set(approved) != {1}:
    print(f"claude-live: FAILED: interactive: the plan file the agent wrote outside the project "
          f"stays in view until rewritten, and the approved plan once: the first plan in each "
          f"call {first}, the approved one {sums}", file=sys.stderr)
    sys.exit(1)
print(f"claude-live: ok: interactive: the plan the agent wrote to its file outside the project "
      f"stays in the model's view after the call that wrote it ({between}), and the approved "
      f"one is shown once ({approved})")
PY
fi

python3 - "$WORK" "$PROJ" "$FIRST_CALLS" "$FIRST_REWRITTEN" "$BEFORE_AGENT_CALLS" "$AGENT_REWRITTEN" "$ASID" \
  "$BEFORE_AT_CALLS" "$AT_REWRITTEN" "$BEFORE_AUTO_CALLS" "$BEFORE_EDITOR_CALLS" "$BEFORE_SEARCH_CALLS" \
  "$BEFORE_IMAGE_CALLS" "$BEFORE_SKILL_CALLS" "$BEFORE_MCP_CALLS" "$BEFORE_NB_CALLS" "$BEFORE_BIG_CALLS" \
  "$BEFORE_TUI_CALLS" "${INTERACTIVE:-1}" "$BEFORE_SUB_CALLS" "$SUB_REWRITTEN" "$BEFORE_BG_CALLS" \
  "${AFTER_TUI_CALLS:-0}" << 'EOF'
import json, sys
work, proj = sys.argv[1], sys.argv[2]
first_calls, first_rewritten = int(sys.argv[3]), int(sys.argv[4])
before_agent, agent_rewritten, agent_session = int(sys.argv[5]), int(sys.argv[6]), sys.argv[7]
before_at, at_rewritten = int(sys.argv[8]), int(sys.argv[9])
before_auto = int(sys.argv[10])
before_editor = int(sys.argv[11])
before_search = int(sys.argv[12])
before_image = int(sys.argv[13])
before_skill = int(sys.argv[14])
before_mcp = int(sys.argv[15])
before_nb = int(sys.argv[16])
before_big = int(sys.argv[17])
before_tui, interactive = int(sys.argv[18]), sys.argv[19] == "1"
before_sub, sub_rewritten = int(sys.argv[20]), int(sys.argv[21])
before_bg = int(sys.argv[22])
after_tui = int(sys.argv[23]) or None
fails = []
def check(ok, what):
    print(("  ok    " if ok else "  MISS  ") + what)
    if not ok:
        fails.append(what)

calc = open(f"{proj}/calc.py").read()
check("return a + b" in calc, "Claude Code's Edit reached the file through the mount")
entries = {e["path"]: e for e in json.load(open(f"{work}/entries.json"))["entries"]}
c = entries.get("calc.py", {})
check("claude" in c.get("programs", []), "calc.py was read by the `claude` program (its file tools' threads are its own)")
check(c.get("agent_wrote") is True, "calc.py is known as written by the agent")
n = entries.get("NOTES.md", {})
check("claude" in n.get("programs", []), "NOTES.md, which only the Read tool read, is in the world as read by `claude`")
check("util.py" in entries, "util.py (read by `cat` in a Bash call) is in the world")
check(not any(p == ".claude" or p.startswith(".claude/") for p in entries), "nothing of .claude (Claude Code's settings) is in the world")
goals = json.load(open(f"{work}/goals.json"))
text = json.dumps(goals)
check("Fix add() in calc.py" in text, "the hook recorded the prompt as the goal")
projection = open(f"{work}/projection.txt").read()
check("return a + b" in projection and "return a - b" not in projection, "the projection shows calc.py as it is now")

every_call = [json.loads(l) for l in open(f"{work}/api.jsonl")]
calls, later = every_call[:first_calls], every_call[first_calls:before_agent]
agent_calls = every_call[before_agent:before_at]
at_calls = [c for c in every_call[before_at:before_auto] if c.get("answer", 0) > 0]
auto_calls = every_call[before_auto:before_editor]
editor_calls = [c for c in every_call[before_editor:before_search] if c.get("answer", 0) > 0]
search_calls = [c for c in every_call[before_search:before_image] if c.get("answer", 0) > 0]
image_calls = [c for c in every_call[before_image:before_skill] if c.get("answer", 0) > 0]
skill_calls = [c for c in every_call[before_skill:before_mcp] if c.get("answer", 0) > 0]
mcp_calls = [c for c in every_call[before_mcp:before_nb] if c.get("answer", 0) > 0]
nb_calls = [c for c in every_call[before_nb:before_big] if c.get("answer", 0) > 0]
big_calls = [c for c in every_call[before_big:before_sub] if c.get("answer", 0) > 0]
sub_calls = [c for c in every_call[before_sub:before_bg] if c.get("answer", 0) > 0]
tui_calls = [c for c in every_call[before_tui:after_tui] if c.get("answer", 0) > 0]
main = [c for c in calls if c.get("answer", 0) > 0]
check(len(main) == 7, f"the session made 7 model calls of its main conversation ({len(main)})")
tasks = json.load(open(f"{work}/state.json"))["state"].get("tasks", [])
check([t.get("subject") for t in tasks] == ["Make add() add"], f"the task planned with TaskCreate is in the session's state ({tasks})")
check("Make add() add" in projection, "and in the projection")
both = [c for c in calls if c.get("answer") == 2]
both_results = [b for m in (both[0]["body"]["messages"] if both else []) if isinstance(m.get("content"), list) for b in m["content"] if b.get("type") == "tool_result"]
check(len(both_results) >= 2, f"the two Reads made at once were answered together, and that call went upstream whole ({len(both_results)} results)")
check(first_rewritten == len(main) - 1, f"the proxy replaced the history of every call after the first ({first_rewritten} of {len(main) - 1})")
first_sid = json.load(open(f"{work}/fix.json"))["session_id"]
watched = [json.loads(l) for l in open(f"{work}/watch.jsonl").readlines()[:int(open(f"{work}/watch-first.count").read())]]
told = [e for e in watched if e.get("event") == "projection" and e.get("session") == first_sid]
accounts = [e for e in watched if e.get("event") == "model_call" and e.get("rewritten")]
edits = [e for e in watched if e.get("event") == "step" and e.get("session") == first_sid and e.get("tool_name") == "Edit"
         and e.get("input", {}).get("file_path", "").endswith("/calc.py")]
check(len(told) == first_rewritten == len(accounts) and all(e["tokens"] <= e["budget"] for e in told) and any(e.get("op") == "open" and e.get("path") == "calc.py" for e in watched) and len(edits) == 1,
      f"`worldfs watch` showed the reads of calc.py, its Edit as a step of the session ({len(edits)}), and each call the proxy rewrote as a projection of the session within its budget and with its account ({len(told)} and {len(accounts)} of {first_rewritten})")
last = json.dumps(main[-1]["body"]["messages"]) if main else ""
check("return a + b" in last and "return a - b" not in last, "the last call sent upstream holds calc.py as it is now, and not its stale first read")
rule = "run `python3 calc.py` after a change"
check(last.count(rule) == 1, f"CLAUDE.md, which Claude Code puts in the first message, is sent once, not projected again ({last.count(rule)} times)")
h = {k.lower(): v for k, v in (main[-1].get("headers", {}) if main else {}).items()}
check(bool(h.get("x-claude-code-session-id")), "Claude Code names its session in a header (x-claude-code-session-id)")

after = json.load(open(f"{work}/goal-after.json"))
check(after.get("compacted") is True, "the hook told the mount that the session was compacted")
check("Check that it prints 5" in after.get("goal", ""), "the prompt after the resume was added to the goal")
check(any(c.get("compaction") for c in later), "Claude Code's compaction call went through the proxy")
resumed = [c for c in later if c.get("answer", 0) > 0]
opening = json.dumps(resumed[0]["body"]["messages"][0]) if resumed else ""
check("This session is being continued" in opening, "after the compaction, the conversation opens with the summary")
body = json.dumps(resumed[0]["body"]["messages"]) if resumed else ""
check("return a + b" in body, "that call went upstream with the projection: calc.py as it is now, which the summary does not hold")

sub = [c for c in agent_calls if c.get("subagent")]
sub_headers = [{k.lower() for k in c.get("headers", {})} for c in sub]
check(len(sub) >= 2 and all("x-claude-code-agent-id" in h for h in sub_headers), f"the subagent made its calls, each naming itself in x-claude-code-agent-id ({len(sub)})")
session_calls = [c for c in agent_calls if c.get("answer", 0) > 0 and not c.get("subagent")]
check(agent_rewritten == len(session_calls) - 1, f"the proxy rewrote the session's calls after its first and none of the subagent's ({agent_rewritten} rewritten, {len(session_calls)} of the session's)")
convs = {c["session"]: c for c in json.load(open(f"{work}/goals-agent.json"))["conversations"]}
check(convs.get(agent_session, {}).get("steps") == 1, f"the subagent's Read is not a step of the session: its one step is the Agent call ({convs.get(agent_session, {}).get('steps')})")
check("show() prints its argument after 'result: '." in open(f"{work}/projection-agent.txt").read(), "the subagent's report is in the session's projection")

opening = [m["role"] for m in at_calls[0]["body"]["messages"][:2]] if at_calls else []
check(opening == ["user", "user"], f"naming a file with @ in the first prompt, the conversation opens with two user messages ({opening})")
check(at_rewritten == len(at_calls) - 1 and at_calls, f"the proxy rewrote that session's calls after its first ({at_rewritten} of {len(at_calls) - 1})")
last_at = json.dumps(at_calls[-1]["body"]["messages"]) if at_calls else ""
util_line = 'print(f\\"result: {x}\\")'
check(last_at.count(util_line) == 1, f"util.py, attached whole, is not projected again ({last_at.count(util_line)} copies)")

check(any(c.get("compaction") for c in auto_calls), "a context reported full made Claude Code compact on its own, through the proxy")
check(json.load(open(f"{work}/goal-auto.json")).get("compacted") is True, "the hook told the mount of that compaction")
after_auto = [c for c in auto_calls if c.get("answer", 0) > 0][-1:]
calls_log = [l for l in open(f"{work}/proxy-auto.log") if "/v1/messages: sent" in l]
last_log = calls_log[-1] if calls_log else ""
check(bool(after_auto) and "This session is being continued" in json.dumps(after_auto[0]["body"]["messages"][:2])
      and "sent as it came" not in last_log and "left out, the request shows" in last_log,
      "after it, with the file Claude Code put back in its own message, its last call was rewritten, and the files the request shows not projected again")

resumed_editor = json.dumps(editor_calls[-1]["body"]["messages"]) if editor_calls else ""
check('LABEL = \\"result\\"' in resumed_editor and 'print(f\\"result: {x}\\")' not in resumed_editor,
      "after the user's editor changed util.py, the resumed session's call holds util.py as it is now, and not the copy its Read got")

search_projection = open(f"{work}/projection-search.txt").read()
check("## big.py" in search_projection and "## calc.py" not in search_projection and "## NOTES.md" not in search_projection,
      "a session's Grep, which reads every file, does not make them its own: its projection shows the file it Read, not the other sessions' files")
grep_line = "big.py:209:LIMIT = 10"
last_search = json.dumps(search_calls[-1]["body"]["messages"]) if search_calls else ""
check(grep_line in search_projection and grep_line in last_search,
      "the Grep's result, which the replaced history held, is kept: in the session's projection and in its last call upstream")

images = [json.dumps(c["body"]["messages"]).count('"type": "image"') for c in image_calls]
check(len(images) == 5 and images[1:] == [1, 1, 1, 1],
      f"a screenshot the Read tool returned stays in the model's view after the call that read it, once ({images})")
helper = [json.dumps(c["body"]["messages"]).count("HELPER_LIMIT = 7") for c in image_calls]
check(len(helper) == 5 and helper[2:] == [1, 1, 1],
      f"a file read outside the project stays in the model's view after the call that read it, once ({helper})")
last_image = json.dumps(image_calls[-1]["body"]["messages"]) if image_calls else ""
check(last_image.count("Result of an earlier Bash call (`echo 'Issue 7: the label must be bold'`)") == 1
      and last_image.count("Issue 7: the label must be bold") == 2,
      "a Bash output that read no file (as `gh issue view` would) stays in the model's view after its call, once")

rule = [json.dumps(c["body"]["messages"]).count("HOUSE RULE: every function gets a docstring.") for c in skill_calls]
check(len(rule) == 4 and rule[1:] == [1, 1, 1],
      f"a skill's instructions, loaded by a Skill call, stay in the model's view after that call, once ({rule})")
issue7 = [json.dumps(c["body"]["messages"]).count("Issue 7: show() must print the label in bold") for c in mcp_calls]
check(len(issue7) == 3 and issue7[1:] == [1, 1],
      f"an MCP tool's answer stays in the model's view after its call, once ({issue7})")
nb_raw = __import__("os").path.getsize(f"{proj}/sales.ipynb")
nb_entry = {e["path"]: e for e in json.load(open(f"{work}/entries-notebook.json"))["entries"]}.get("sales.ipynb", {})
check(nb_raw > 40000 and 0 < (nb_entry.get("tokens") or 0) < 400,
      f"a notebook is counted as its cells, not its JSON ({nb_raw} bytes on disk, {nb_entry.get('tokens')} tokens)")
last_nb = json.dumps(nb_calls[-1]["body"]["messages"]) if nb_calls else ""
check(len(nb_calls) == 4 and 'print(sum(sales))</cell id=\\"total\\">' in last_nb
      and "print(sales)<" not in last_nb and "nbformat" not in last_nb,
      "behind the proxy, the notebook is shown as its cells as they are after NotebookEdit, not as JSON")
figures = [json.dumps(c["body"]["messages"]).count('"type": "image"') for c in nb_calls]
check(figures == [0, 1, 1, 1],
      f"the notebook's small figure, which Read sent as an image, stays in the model's view, once ({figures})")
check("<Figure size 640x480 with 1 Axes>" in last_nb and "[image/png output, 44.1 KB: not shown]" in last_nb
      and "Outputs are too large to include" not in last_nb,
      "its big figure, whose outputs Read left out whole, is named with its text")
big_entries = {e["path"] for e in json.load(open(f"{work}/entries-big.json"))["entries"]}
refusal = "exceeds maximum allowed size" in json.dumps(big_calls[1]["body"]["messages"]) if len(big_calls) > 1 else False
check(refusal and "generated.py" not in big_entries and "run_tests.py" in big_entries,
      "a file whose Read Claude Code refused (too large) is not in the world as read, though Claude Code opened it")
saved = [json.dumps(c["body"]["messages"]).count("Full output saved to: ") for c in big_calls]
check(saved == [0, 0, 1, 1, 1],
      f"a test run's output too large to send stays in the model's view as Claude Code showed it: where it was saved, and its first lines, once ({saved})")


def marks(value, where=""):
    """Every cache_control in `value`, with where it is."""
    if isinstance(value, dict):
        found = [(where, value["cache_control"])] if "cache_control" in value else []
        return found + [m for k, v in value.items() for m in marks(v, f"{where}/{k}")]
    if isinstance(value, list):
        return [m for i, v in enumerate(value) for m in marks(v, f"{where}/{i}")]
    return []


sub_last = sub_calls[-1] if sub_calls else {"body": {}, "headers": {}}
sub_marks = marks(sub_last["body"])
# The projection's: on a message between the first and the last.
sub_inner = [w for w, _ in sub_marks if w.startswith("/messages/")
             and 0 < int(w.split("/")[2]) < len(sub_last["body"].get("messages", [])) - 1]
sub_rewritten_marks = [marks(c["body"]) for c in sub_calls[1:]]
check(len(sub_calls) >= 3 and sub_rewritten == len(sub_calls) - 1 and sub_inner
      and all(0 < len(found) <= 4 and all(m.get("ttl") == "1h" for _, m in found)
              for found in sub_rewritten_marks)
      and {k.lower(): v for k, v in sub_last["headers"].items()}.get("authorization")
      == "Bearer sk-ant-oat01-stand-in",
      f"signed in with a subscription, the rewritten calls keep every breakpoint hour-long, the "
      f"projection's too, and the token ({sub_rewritten} of {len(sub_calls) - 1} rewritten; {sub_marks})")
if interactive:
    answer = 'The user answered: \\"Which label style?\\" = \\"Bold\\"'
    seen = [json.dumps(c["body"]["messages"]).count(answer) for c in tui_calls]
    check(len(seen) == 9 and seen[2:] == [1] * 7,
          f"interactive: the user's answer to the agent's question stays in the model's view, through a later prompt, once ({seen})")
    tui_goals = [c.get("goal") or "" for c in json.load(open(f"{work}/goals-tui.json"))["conversations"]]
    kept_asks = [c for c in json.load(open(f"{work}/commands-tui.json"))["commands"]
                 if c.get("tool") == "AskUserQuestion"]
    check(any(g.startswith("Make the label nicer") and answer.replace('\\"', '"') in g for g in tui_goals)
          and not kept_asks,
          f"interactive: the answer is in the goal, after the prompt, and kept as no output, which would fade ({tui_goals}; {len(kept_asks)} kept)")
    ran = [json.dumps(c["body"]["messages"]).count("<bash-stdout>BANG RUN 42") for c in tui_calls]
    check(len(ran) == 9 and ran[4:] == [1] * 5,
          f"interactive: a command the user ran in bash mode (!) and its output stay in the model's view, once ({ran})")
    second = json.dumps(tui_calls[6]["body"]["messages"]) if len(tui_calls) > 6 else ""
    check("Make the label nicer" in second and "Is it still bold?" in second,
          "interactive: the second prompt's call holds both prompts")
    # After the rewind: the prompt taken back in no call, the one asked instead in each.
    rewound = [(json.dumps(c["body"]["messages"]).count("Is it still bold?"),
                json.dumps(c["body"]["messages"]).count("Make it red")) for c in tui_calls[7:]]
    check(len(rewound) == 2 and all(back == 0 and red >= 1 for back, red in rewound),
          f"interactive: a prompt the user took back (rewind) is in no later call, though the goal still says it "
          f"((taken back, asked instead) in each call after: {rewound})")

first = main[0]["body"] if main else {}
print("  shapes: first call roles", [m.get("role") for m in first.get("messages", [])],
      "; last call roles", [m.get("role") for m in main[-1]["body"]["messages"]] if main else [])
print("  tools:", ", ".join(t.get("name", "?") for t in first.get("tools", [])))
print("  anthropic-beta:", h.get("anthropic-beta", "-"))
if fails:
    print(f"claude-live: FAILED: {len(fails)} check(s) missed", file=sys.stderr)
    sys.exit(1)
EOF

# One command instead of three: `worldfs run --proxy` mounts a second project, starts the proxy,
# runs claude -p in the mount pointed at it, and unmounts when it ends. No hooks are installed
# there: claude gets them on its command line, and without them no call would be rewritten
# (the mount would have no goal).
say "worldfs run --proxy: a project without hooks mounted and proxied for one claude -p, unmounted after"
PROJ2=$WORK/run-project
mkdir -p "$PROJ2"
cp "$PROJ/util.py" "$PROJ2/"
cat > "$WORK/run-script.json" << EOF
[
  {"tool": "Read", "input": {"file_path": "$PROJ2/util.py"}},
  {"tool": "Bash", "input": {"command": "cat util.py", "description": "Show util.py"}},
  {"text": "Ran under worldfs run."}
]
EOF
stand_in "$WORK/run-api.out" --record "$WORK/run-api.jsonl" --keep-bodies \
  --script "$WORK/run-script.json"
pids+=("$STAND_IN_PID")
RUN_API_PORT=$STAND_IN_PORT
[ -n "$RUN_API_PORT" ] || fail "the second stand-in API did not start: $(cat "$WORK/run-api.out")"
set +e
# ANTHROPIC_BASE_URL at the stand-in, as at a gateway the user's Claude Code goes through: the
# proxy forwards there with no --upstream.
env HOME="$WORK/home" ANTHROPIC_API_KEY=sk-stand-in CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
  DISABLE_AUTOUPDATER=1 ANTHROPIC_BASE_URL="http://127.0.0.1:$RUN_API_PORT" timeout 240 \
  "$BIN" -v run --proxy \
  --no-state --log "$WORK/run.log" -C "$PROJ2" -- "$CLAUDE" -p "Look at util.py" \
  --allowedTools "Read,Bash" --permission-mode acceptEdits --output-format json \
  > "$WORK/run.json" 2> "$WORK/run.err"
rc=$?
set -e
[ "$rc" = 0 ] || fail "worldfs run exited $rc: $(tail -5 "$WORK/run.err" "$WORK/run.json")"
grep -q "Ran under worldfs run." "$WORK/run.json" || fail "claude under worldfs run did not finish: $(tail -c 500 "$WORK/run.json")"
if grep -q " $PROJ2 fuse" /proc/mounts; then fail "$PROJ2 is still mounted after worldfs run"; fi
grep -q "worldfs: unmounted $PROJ2" "$WORK/run.err" || fail "worldfs run did not say it unmounted: $(cat "$WORK/run.err")"
grep -qF "forwarding to http://127.0.0.1:$RUN_API_PORT (ANTHROPIC_BASE_URL's)" "$WORK/run.err" || fail "the proxy under worldfs run did not forward to ANTHROPIC_BASE_URL: $(cat "$WORK/run.err")"
grep -q "Claude Code gets worldfs's hooks for this run" "$WORK/run.err" || fail "worldfs run did not give claude the hooks: $(cat "$WORK/run.err")"
if [ -e "$PROJ2/.claude/settings.local.json" ]; then fail "worldfs run wrote hooks into $PROJ2"; fi
RUN_CALLS=$(wc -l < "$WORK/run-api.jsonl")
RUN_REWRITTEN=$(grep -c "sent .* instead of" "$WORK/run.log" || true)
[ "$RUN_REWRITTEN" -ge 1 ] || fail "no call under worldfs run went with the projection ($RUN_CALLS calls): $(tail -5 "$WORK/run.log")"
grep -qE "worldfs: [0-9]+ model calls? of the session through the proxy, $RUN_REWRITTEN with the projection" "$WORK/run.err" \
  || fail "worldfs run did not say the proxy's account at the end: $(cat "$WORK/run.err")"
say "ok: worldfs run --proxy: claude ran in the mount with the hooks on its command line, the proxy forwarding to its ANTHROPIC_BASE_URL ($RUN_REWRITTEN of $RUN_CALLS calls sent with the projection); the mount and the proxy went with it"

# Claude Code runs each Bash command in a shell that leads a session of its own and exits right
# after it. A script the agent runs that rewrites a file it read is the agent's edit, and a
# file it removes with rm gets no notice of removal (it knows): the world finds the agent above
# that shell, also when the script and the shell are gone by the time it looks.
say "a script claude runs rewrites a file it read; it removes another with rm"
PROJ3=$WORK/script-project
mkdir -p "$PROJ3"
echo 'RATE = 3' > "$PROJ3/rates.py"
echo 'old notes' > "$PROJ3/old.txt"
printf '%s\n' "open('rates.py', 'w').write('RATE = 4\\n')" > "$PROJ3/bump.py"
cat > "$WORK/script3.json" << EOF
[
  {"calls": [{"tool": "Read", "input": {"file_path": "$PROJ3/rates.py"}},
             {"tool": "Read", "input": {"file_path": "$PROJ3/old.txt"}}]},
  {"tool": "Bash", "input": {"command": "python3 bump.py", "description": "Bump the rate"}},
  {"tool": "Bash", "input": {"command": "rm old.txt", "description": "Remove the old notes"}},
  {"text": "Bumped."}
]
EOF
stand_in "$WORK/api3.out" --record "$WORK/api3.jsonl" --script "$WORK/script3.json"
pids+=("$STAND_IN_PID")
[ -n "$STAND_IN_PORT" ] || fail "the third stand-in API did not start: $(cat "$WORK/api3.out")"
set +e
# The world is asked from inside the run, before it unmounts.
env HOME="$WORK/home" ANTHROPIC_API_KEY=sk-stand-in CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 \
  DISABLE_AUTOUPDATER=1 ANTHROPIC_BASE_URL="http://127.0.0.1:$STAND_IN_PORT" timeout 240 \
  "$BIN" run --no-state --log "$WORK/run3.log" -C "$PROJ3" -- sh -c \
  '"$1" -p "Bump the rate" --allowedTools "Read,Bash" --permission-mode acceptEdits \
     --output-format json > "$2" && "$3" ctl entries.list "{}" > "$4" \
     && "$3" projection --format text > "$5" 2> /dev/null' \
  sh "$CLAUDE" "$WORK/run3.json" "$BIN" "$WORK/entries3.json" "$WORK/projection3.txt" \
  > "$WORK/run3.out" 2>&1
rc=$?
set -e
[ "$rc" = 0 ] || fail "the run with a script exited $rc: $(tail -5 "$WORK/run3.out" "$WORK/run3.json")"
grep -q "Bumped." "$WORK/run3.json" || fail "claude did not finish the script's run: $(tail -c 500 "$WORK/run3.json")"
python3 - "$WORK/entries3.json" "$WORK/projection3.txt" << 'PY' || exit 1
import json, sys
entries = {e["path"]: e for e in json.load(open(sys.argv[1]))["entries"]}
projection = open(sys.argv[2]).read()
rates = entries.get("rates.py", {})
if rates.get("agent_wrote") is not True:
    sys.exit(f"claude-live: FAILED: rates.py, rewritten by the script claude ran, is not the agent's edit: {rates}")
if "RATE = 4" not in projection:
    sys.exit("claude-live: FAILED: the projection does not show rates.py as the script left it")
if "old.txt (deleted)" in projection:
    sys.exit("claude-live: FAILED: the projection has a notice of old.txt, which claude's rm removed")
PY
say "ok: a script claude ran made its edit, and what its rm removed has no notice"
say "all checks passed"
