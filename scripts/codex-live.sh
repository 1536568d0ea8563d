#!/usr/bin/env bash
# make check-codex: a real Codex CLI (npm @openai/codex, version CODEX_VERSION, 0.171.0 by
# default, installed once under bench-work/codex/) runs a small fix on a worldfs mount, with the
# hooks `worldfs hook --install --codex` writes, and checks what the mount and the hook made of
# it, and what `worldfs proxy` sent in Codex's model calls' place. No model is called: the
# stand-in API (scripts/stand-in-api.py, its Responses side) answers Codex's model calls with
# the fix's tool calls: a `cat`, a `sed -n` of a range, a check that fails (exit 2), an
# `apply_patch`, then the test run.
#
# Codex runs the hooks of a trusted project once its user trusted them (its "Hooks need review"
# screen); `codex exec` skips the others without a word. This check trusts the project in its
# own CODEX_HOME and runs `codex exec --dangerously-bypass-hook-trust`, which stands for that
# screen.
#
# Then a new session with OpenAI's own provider (`model_provider = "openai"`, its
# `openai_base_url` the proxy) fills its context, and Codex compacts it on the server (the
# stand-in answers the `compaction_trigger` call with a `compaction` item), and one with the
# stand-in's own provider is compacted by a summary Codex asks the model for.
#
# Then an interactive Codex (in tmux) is trusted its hooks on its own "Hooks need review" screen,
# as the README says, and its prompt becomes the goal; then, in Plan mode, it asks the user a
# question (request_user_input), proposes a plan and carries it out; the user runs a command at
# the prompt (`!`); a second plan is carried out in a fresh thread, where the user takes a
# prompt back (Esc Esc) for another (INTERACTIVE=0 leaves both out).
#
# Needs root (mounting), npm, python3 and tmux. Exits non-zero, saying which check failed, on any
# miss. KEEP=1 keeps the work directory; WORLDFS_BIN=PATH runs another build (lib-mount.sh).
set -euo pipefail
WFS_PROG=codex-live
# shellcheck source=scripts/lib-mount.sh
. "$(dirname "$0")/lib-mount.sh"

VERSION=${CODEX_VERSION:-0.171.0}
PREFIX=$WFS_ROOT/bench-work/codex/$VERSION
CODEX=$PREFIX/node_modules/.bin/codex

say() { echo "codex-live: $*"; }
TUI=
# The interactive Codex works in the mount: it goes first, or the unmount could only detach.
fail() {
  echo "codex-live: FAILED: $*" >&2
  [ -z "$TUI" ] || tmux kill-session -t "$TUI" 2> /dev/null || true
  exit 1
}
checks=0
pass() { checks=$((checks + 1)); say "ok: $*"; }

wfs_init
wfs_find_bin
BIN=$WORLDFS_BIN
# shellcheck source=scripts/lib-npm.sh
. "$WFS_ROOT/scripts/lib-npm.sh"
# shellcheck source=scripts/lib-stand-in.sh
. "$WFS_ROOT/scripts/lib-stand-in.sh"
npm_once @openai/codex "$VERSION" "$PREFIX" codex || fail "no Codex to run"
say "$("$CODEX" --version), $("$BIN" --version)"

WORK=$(mktemp -d /tmp/worldfs-codex-live.XXXXXX)
PROJ=$WORK/project
if [ "${KEEP:-0}" = 1 ]; then
  wfs_defer "say 'work directory kept: $WORK'"
else
  wfs_defer "rm -rf $(printf %q "$WORK")"
fi
mkdir -p "$PROJ" "$WORK/codex-home"
cat > "$PROJ/calc.py" << 'EOF'
def add(a, b):
    return a - b
EOF
cat > "$PROJ/util.py" << 'EOF'
def show(x):
    print(f"result: {x}")


def unused():
    pass
EOF
cat > "$PROJ/check_util.py" << 'EOF'
import sys

text = open("util.py").read()
if '"""' not in text:
    print("util.py: show() has no docstring")
    sys.exit(2)
EOF
cat > "$PROJ/test_calc.py" << 'EOF'
from calc import add

assert add(2, 3) == 5, add(2, 3)
print("1 passed")
EOF
printf '# Notes\n' > "$PROJ/NOTES.md"
cat > "$PROJ/AGENTS.md" << 'EOF'
# Project rules

Run `python3 test_calc.py` after a change.
EOF
# A screenshot the agent looks at with view_image, and one the user attaches to a later prompt:
# 1x1 PNGs of their own colours.
python3 - "$PROJ/shot.png" "$WORK/later.png" << 'PY'
import struct, sys, zlib
def png(rgb):
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(b"\x00" + bytes(rgb))) + chunk(b"IEND", b""))
open(sys.argv[1], "wb").write(png((255, 0, 0)))
open(sys.argv[2], "wb").write(png((0, 0, 255)))
PY
cat > "$WORK/script.json" << 'EOF'
[
  {"tool": "exec_command", "input": {"cmd": "cat calc.py"}},
  {"tool": "view_image", "input": {"path": "shot.png"}},
  {"tool": "exec_command", "input": {"cmd": "sed -n 1,2p util.py"}},
  {"tool": "exec_command", "input": {"cmd": "python3 check_util.py"}},
  {"tool": "apply_patch", "custom": "*** Begin Patch\n*** Update File: calc.py\n@@\n def add(a, b):\n-    return a - b\n+    return a + b\n*** End Patch"},
  {"tool": "exec_command", "input": {"cmd": "python3 test_calc.py"}},
  {"text": "Fixed: add() now adds."},
  {"tool": "exec_command", "input": {"cmd": "cat util.py"}},
  {"tool": "exec_command", "input": {"cmd": "apply_patch <<'PATCH'\n*** Begin Patch\n*** Update File: NOTES.md\n@@\n # Notes\n+util.show() still needs a docstring.\n*** End Patch\nPATCH"}},
  {"tool": "exec_command", "input": {"cmd": "cat NOTES.md"}},
  {"tool": "exec_command", "input": {"cmd": "python3 test_calc.py; sleep 1; echo slow part done", "yield_time_ms": 250}},
  {"tool": "write_stdin", "input": {"session_id": "$LAST_SESSION", "chars": "", "yield_time_ms": 5000}},
  {"tool": "spawn_agent", "namespace": "multi_agent_v1", "input": {"message": "Tell me what util.py prints"}},
  {"tool": "wait_agent", "namespace": "multi_agent_v1", "input": {"targets": ["$AGENT"], "timeout_ms": 30000}},
  {"tool": "exec_command", "input": {"cmd": "ls"}},
  {"text": "Noted: util.py still needs a docstring."},
  {"tool": "exec_command", "input": {"cmd": "cat calc.py"}, "input_tokens": 250000},
  {"tool": "exec_command", "input": {"cmd": "cat util.py"}},
  {"text": "Compacted: calc.py is fixed."},
  {"tool": "exec_command", "input": {"cmd": "cat calc.py"}, "input_tokens": 250000},
  {"tool": "exec_command", "input": {"cmd": "cat util.py"}},
  {"tool": "create_goal", "input": {"objective": "Document util.py"}},
  {"text": "Summarised: util.py is not documented."},
  {"tool": "exec_command", "input": {"cmd": "cat ../codex-home/skills/.system/skill-creator/SKILL.md"}},
  {"tool": "exec_command", "input": {"cmd": "cat util.py"}},
  {"tool": "exec_command", "input": {"cmd": "cat calc.py"}},
  {"text": "Styled: util.py needs a docstring."},
  {"tool": "exec_command", "input": {"cmd": "cat util.py"}},
  {"tool": "exec_command", "input": {"cmd": "sed -n 1,2p util.py"}},
  {"text": "Goal turn one: util.py read."},
  {"tool": "exec_command", "input": {"cmd": "cat check_util.py"}},
  {"tool": "exec_command", "input": {"cmd": "cat NOTES.md"}},
  {"tool": "update_goal", "input": {"status": "complete"}},
  {"text": "Goal met: util.py prints its argument."},
  {"tool": "exec_command", "input": {"cmd": "cat calc.py"}},
  {"tool": "request_user_input", "input": {"questions": [{"id": "style", "header": "Style", "question": "Which docstring style?", "options": [{"label": "One line (Recommended)", "description": "A short summary"}, {"label": "Google", "description": "Args and Returns sections"}]}]}},
  {"text": "Here is the plan.\n\n<proposed_plan>\n# Document util.py\n\n1. Give show() a docstring.\n\nPLAN: DOCSTRING\n</proposed_plan>"},
  {"tool": "exec_command", "input": {"cmd": "cat util.py"}},
  {"tool": "exec_command", "input": {"cmd": "cat NOTES.md"}},
  {"tool": "exec_command", "input": {"cmd": "cat calc.py"}},
  {"text": "Plan carried out."},
  {"tool": "exec_command", "input": {"cmd": "cat util.py"}},
  {"tool": "exec_command", "input": {"cmd": "cat check_util.py"}},
  {"text": "<proposed_plan>\n# Test util.py\n\n1. Test show().\n\nPLAN: TESTS\n</proposed_plan>"},
  {"tool": "exec_command", "input": {"cmd": "cat $PLAN_FILE"}},
  {"tool": "exec_command", "input": {"cmd": "cat util.py"}},
  {"tool": "exec_command", "input": {"cmd": "cat check_util.py"}},
  {"tool": "exec_command", "input": {"cmd": "cat calc.py"}},
  {"text": "Second plan carried out."},
  {"tool": "exec_command", "input": {"cmd": "cat calc.py"}},
  {"text": "Bold done."},
  {"tool": "exec_command", "input": {"cmd": "cat util.py"}},
  {"tool": "exec_command", "input": {"cmd": "cat calc.py"}},
  {"text": "Red done."}
]
EOF
# The subagent the resumed turn starts: its own conversation, whose calls are not the session's.
cat > "$WORK/subagent.json" << 'EOF'
[
  {"tool": "exec_command", "input": {"cmd": "cat check_util.py"}},
  {"text": "util.show() prints its argument after 'result: '."}
]
EOF
# Codex's catalog entry for the model: what tools it gets. As for every model Codex ships,
# apply_patch is a freeform tool of its own (a model it has no entry for patches through
# exec_command instead, which the resumed turn does).
cat > "$WORK/models.json" << 'EOF'
{"models": [{
  "slug": "gpt-5-codex", "display_name": "gpt-5-codex", "description": "stand-in",
  "default_reasoning_level": "medium",
  "supported_reasoning_levels": [{"effort": "medium", "description": "Medium"}],
  "shell_type": "unified_exec", "visibility": "list", "supported_in_api": true, "priority": 1,
  "upgrade": null, "base_instructions": "You are Codex, a coding agent.",
  "supports_reasoning_summaries": true, "default_reasoning_summary": "none",
  "support_verbosity": true, "default_verbosity": "low", "apply_patch_tool_type": "freeform",
  "truncation_policy": {"mode": "tokens", "limit": 10000}, "supports_parallel_tool_calls": true,
  "context_window": 272000, "effective_context_window_percent": 95,
  "experimental_supported_tools": [], "input_modalities": ["text", "image"],
  "supports_search_tool": false
}]}
EOF

wfs_mount "$PROJ" -- --no-state
# What a user watching the mount sees of each projection served.
(cd / && exec "$BIN" watch -C "$PROJ" --json > "$WORK/watch.jsonl" 2> "$WORK/watch.err") &
wfs_defer "kill $! 2> /dev/null || true"
for _ in $(seq 50); do grep -q watching "$WORK/watch.err" && break; sleep 0.1; done
# Nothing here runs in the mount but Codex: a shell left in it would keep it busy at the end.
"$BIN" hook --install --codex -C "$PROJ" > "$WORK/install.out"
grep -q "Trust all and continue" "$WORK/install.out" || fail "the install did not say how to trust: $(cat "$WORK/install.out")"

stand_in "$WORK/api.out" --record "$WORK/api.jsonl" --keep-bodies \
  --script "$WORK/script.json" --subagent-script "$WORK/subagent.json" \
  --subagent-prompt "Tell me what util.py prints"
wfs_defer "kill $STAND_IN_PID 2> /dev/null || true"
API_PORT=$STAND_IN_PORT
[ -n "$API_PORT" ] || fail "the stand-in API did not start: $(cat "$WORK/api.out")"
"$BIN" -v proxy -C "$PROJ" --listen 127.0.0.1:0 --upstream "http://127.0.0.1:$API_PORT" \
  > "$WORK/proxy.log" 2>&1 &
wfs_defer "kill $! 2> /dev/null || true"
for _ in $(seq 50); do grep -q "proxy on" "$WORK/proxy.log" && break; sleep 0.1; done
PROXY=$(sed -n 's/.*proxy on \(http:[^ ]*\).*/\1/p' "$WORK/proxy.log")
[ -n "$PROXY" ] || fail "the proxy did not start: $(cat "$WORK/proxy.log")"
cat > "$WORK/codex-home/config.toml" << EOF
model = "gpt-5-codex"
model_catalog_json = "$WORK/models.json"
model_provider = "stand-in"
check_for_update_on_startup = false

[model_providers.stand-in]
name = "stand-in"
base_url = "$PROXY/v1"
wire_api = "responses"
env_key = "STAND_IN_KEY"

[projects."$PROJ"]
trust_level = "trusted"
EOF

# codex_exec NAME SAYS ARGS...: `codex exec ARGS...` in the project, its hooks trusted, its
# model calls through the proxy, its output in $WORK/NAME.out; fails unless it exits 0 having
# said SAYS (the last answer of its part of the script).
codex_exec() {
  local name=$1 says=$2 rc=0
  shift 2
  (cd "$PROJ" && CODEX_HOME=$WORK/codex-home STAND_IN_KEY=sk-stand-in OPENAI_API_KEY=sk-stand-in \
    timeout 180 "$CODEX" exec --dangerously-bypass-hook-trust --skip-git-repo-check \
    -s workspace-write "$@") > "$WORK/$name.out" 2>&1 || rc=$?
  [ "$rc" = 0 ] || fail "codex exec ($name) exited $rc: $(tail -20 "$WORK/$name.out")"
  grep -qF "$says" "$WORK/$name.out" \
    || fail "codex exec ($name) did not finish its script: $(tail -20 "$WORK/$name.out")"
}

say "running codex exec in $PROJ (model calls through $PROXY)"
codex_exec codex "Fixed: add() now adds." "Fix add() in calc.py"
grep -q "return a + b" "$PROJ/calc.py" || fail "the patch was not applied: $(cat "$PROJ/calc.py")"
grep -q '"type": "custom_tool_call"' "$WORK/api.jsonl" || fail "the patch was not made with the freeform apply_patch tool"
pass "codex ran the fix through the mount"

# A later prompt, with an image, in the same conversation.
codex_exec resume "Noted: util.py" resume --last \
  "Does util.py still look like this screenshot?" -i "$WORK/later.png"
pass "a resumed codex answered a later prompt with an image"

"$BIN" ctl -C "$PROJ" goal.get '{}' > "$WORK/goal.json"
grep -qF '"Fix add() in calc.py\n\nThen the user asked:\nDoes util.py still look like this screenshot?"' "$WORK/goal.json" \
  || fail "the goal is not the two prompts: $(cat "$WORK/goal.json")"
pass "the prompts are the goal"

"$BIN" ctl -C "$PROJ" entries.list '{}' > "$WORK/entries.json"
"$BIN" ctl -C "$PROJ" commands.list '{}' > "$WORK/commands.json"
"$BIN" ctl -C "$PROJ" stats '{}' > "$WORK/stats.json"
"$BIN" ctl -C "$PROJ" goal.list '{}' > "$WORK/conversations.json"
"$BIN" projection -C "$PROJ" --format text > "$WORK/projection.txt" 2> "$WORK/projection.err"
PYTHONPATH="$WFS_ROOT/scripts" python3 - "$WORK" << 'PY' || exit 1
import json
import sys

from live_check import check

work = sys.argv[1]
load = lambda name: json.load(open(f"{work}/{name}.json"))
entries = {e["path"]: e for e in load("entries")["entries"]}
commands = load("commands")["commands"]
stats = load("stats")
projection = open(f"{work}/projection.txt").read()



check(not any(p.startswith(".codex") for p in entries),
      "Codex's own .codex (its hooks, read at start) is not in the world", sorted(entries))
calc = entries.get("calc.py", {})
check("cat" in calc.get("programs", []) and "codex" in calc.get("programs", []),
      "calc.py read by the agent's cat and patched by codex", calc)
check("sed" in entries.get("util.py", {}).get("programs", []),
      "util.py read by the agent's sed", entries.get("util.py"))
by_command = {c["command"]: c for c in commands}
check(by_command.get("python3 check_util.py", {}).get("exit_code") == 2,
      "the failing check's output is cached with the exit code Codex told the model (2)",
      by_command.get("python3 check_util.py"))
check(by_command.get("python3 test_calc.py", {}).get("exit_code") == 0,
      "the test run's output is cached with exit code 0", by_command.get("python3 test_calc.py"))
check("cat calc.py" not in by_command,
      "the cat of calc.py, out of date since the patch, is not kept", sorted(by_command))
check(stats.get("commands_begun") == 0,
      "apply_patch, which no PostToolUse ends, began no output", stats.get("commands_begun"))
conversations = load("conversations")["conversations"]
# cat, view_image, sed, the check, apply_patch (freeform), the test run; then cat, an
# apply_patch through exec_command (no PostToolUse: read back from the rollout), a cat, and a
# slow command polled with write_stdin (no hook of its own), spawn_agent, wait_agent; not the
# subagent's cat; then ls.
check([c["steps"] for c in conversations if c["session"]] == [13],
      "every call is a step of the session, each apply_patch once", conversations)
check("return a + b" in projection and "return a - b" not in projection,
      "the projection shows calc.py as it is now, and no old copy", projection)
check("Exit code 2" in projection or "exit code 2" in projection,
      "the projection tells the check's exit code", projection)
slow = by_command.get("python3 test_calc.py; sleep 1; echo slow part done", {})
check(slow.get("exit_code") == 0 and "1 passed" in slow.get("output", "")
      and "slow part done" in slow.get("output", ""),
      "a command polled with write_stdin is cached whole, though its PostToolUse has the last "
      "poll's output alone", slow)
kept_tools = {c.get("tool") for c in commands if c.get("tool")}
report = [c for c in commands if (c.get("tool") or "").endswith("wait_agent")]
check(report and "prints its argument" in report[0]["output"]
      and not any(t.endswith("spawn_agent") for t in kept_tools)
      and "cat check_util.py" not in by_command,
      "the subagent's report is kept; its start and its own commands are not", sorted(kept_tools))
check(not any(c.get("tool") == "view_image" for c in commands) and "base64" not in projection,
      "view_image's image is not kept as text (the proxy keeps the picture)", projection)
PY
checks=$((checks + 13))

PYTHONPATH="$WFS_ROOT/scripts" python3 - "$WORK" << 'PY' || exit 1
import json
import sys

from live_check import calls, check

work = sys.argv[1]
calls = calls(work)
main = [c for c in calls if c["path"] == "/v1/responses" and c.get("answer", 0) > 0
        and not c.get("subagent")]
subagent = [c for c in calls if c.get("subagent")]



def said(item):
    return json.dumps(item)


check(len(main) == 16, "every call of the script went to the model", len(main))
check(len(subagent) == 2 and not any("# Goal" in said(i) or "## calc.py" in said(i)
                                     for c in subagent for i in c["body"]["input"]),
      "the subagent's calls went as they came (its task is its prompt)",
      [len(c["body"]["input"]) for c in subagent])
first, resumed = main[:7], main[7:]
# The first two calls have no history to replace; from the third on, the calls between the
# prompt and the last turn are the projection.
projected = [c for c in first[2:] if any(
    i.get("role") == "user" and "calc.py" in said(i) and "# Goal" not in said(i)
    and i is not c["body"]["input"][-1] for i in c["body"]["input"])]
check(len(projected) == 5, "the calls with a history went with the projection in its place",
      [len(c["body"]["input"]) for c in main])


def images(body):
    """The image parts of the items between the head and the last turn, with the text before."""
    out = []
    for i in body["input"][3:-2]:
        parts = i.get("content") if isinstance(i.get("content"), list) else []
        out += [(parts[n - 1].get("text", "") if n else "", p["image_url"])
                for n, p in enumerate(parts) if p.get("type") == "input_image"]
    return out


# The call right after view_image has it in its last turn, as it came.
shot = [(t, u) for c in first[3:] for t, u in images(c["body"]) if t.startswith("shot.png, as")]
check(len(shot) == 4 and all(u == shot[0][1] for _, u in shot),
      "the image view_image returned stays in every later call, named", images(first[-1]["body"]))
after_patch = main[5]["body"]["input"]
history = said(after_patch[:-2])  # the last turn, the patch and its result, as it came
check("return a + b" in history and "return a - b" not in history,
      "the call after the patch holds calc.py as it is now, and no old copy", history[-2000:])
check("show() has no docstring" in history,
      "and the failed check's output, cached", history[-2000:])
last = main[6]["body"]["input"]
check(last[-1].get("type") == "function_call_output" and "1 passed" in said(last[-1]),
      "the last turn went as it came", last[-2:])
# A file shown is a heading, then its lines in a fence.
check(not any("/AGENTS.md\\n```" in said(i)
               for c in main for i in c["body"]["input"][3:-2]),
      "AGENTS.md, which the head shows as it is, is not projected again", "")
check(all(c["body"].get("prompt_cache_key") == main[0]["body"].get("prompt_cache_key")
          for c in main), "every other field as it came (prompt_cache_key)", "")
kept = images(resumed[-1]["body"])
check(any(t.startswith("<image name=") for t, _ in kept) and any(
          t.startswith("shot.png, as") for t, _ in kept),
      "after the resumed turn's calls, the later prompt's image stays too", kept)
middle = said(resumed[-1]["body"]["input"][3:-2])
check("<subagent_notification>" in middle and "prints its argument" in middle,
      "the subagent's report Codex told the conversation of stays after the turn moved on",
      middle[-1500:])
text = said(resumed[-1]["body"]["input"])
check("Does util.py still look like this screenshot?" in text and "return a + b" in text,
      "and the later prompt, with calc.py as it is now", text[-2000:])
# The call after the slow command ended during its poll (its last call the poll): its last
# turn is the command's, from its start, and what it printed is there once.
polled = next(c["body"]["input"] for c in main if [
    i.get("name") for i in c["body"]["input"] if i.get("type") == "function_call"][-1:]
    == ["write_stdin"])
started = [n for n, i in enumerate(polled) if i.get("type") == "function_call"
           and "slow part done" in i.get("arguments", "")]
printed = [t for i in polled for t in [i.get("output")] + [
    p.get("text") for p in (i.get("content") if isinstance(i.get("content"), list) else [])]
    if isinstance(t, str) and "slow part done\n" in t]
check(started and started[0] > 3 and len(printed) == 1
      and "session ID" in said(polled[started[0]:]) and "1 passed" in said(polled[started[0]:]),
      "the call after a polled command ended holds the command from its start as it came, and "
      "what it printed once", [said(i)[:200] for i in polled[3:]])
PY
checks=$((checks + 13))
grep -q "/v1/responses: sent" "$WORK/proxy.log" || fail "the proxy logged no rewritten call: $(tail -5 "$WORK/proxy.log")"
pass "the proxy says what it sent instead"
SENT=$(grep -c "/v1/responses: sent .* instead of" "$WORK/proxy.log")
# The proxy tells each rewritten call's account once it has gone upstream: wait for them all.
for _ in $(seq 50); do
  [ "$(grep -c '"event":"model_call"' "$WORK/watch.jsonl" || true)" -ge "$SENT" ] && break
  sleep 0.1
done
TOLD=$(python3 -c '
import json, sys
# The proxy asks for the text it puts in place of the history, for the session of the conversation
# (`worldfs projection` above asked for none).
seen = list(map(json.loads, open(sys.argv[1])))
told = [e for e in seen if e.get("event") == "projection"
        and e.get("format") == "text" and e.get("session") and e["tokens"] <= e["budget"]]
accounts = [e for e in seen if e.get("event") == "model_call" and e.get("rewritten")]
print(len(told), len(accounts))' "$WORK/watch.jsonl")
[ "$TOLD" = "$SENT $SENT" ] || fail "worldfs watch told (projections within budget, accounts) $TOLD of the $SENT calls the proxy rewrote"
pass "worldfs watch told each call the proxy rewrote as a projection within its budget, and its account ($TOLD)"

# With OpenAI's own provider (an API key), Codex compacts on OpenAI's servers: a call whose
# input ends with a `compaction_trigger` item, answered with one encrypted `compaction` item
# that stands for the history before it from then on. A new session, whose first answer
# reports a context past the limit: Codex compacts before its next call.
before=$(wc -l < "$WORK/api.jsonl")
codex_exec compact "Compacted: calc.py is fixed." -c model_provider=openai \
  -c "openai_base_url=\"$PROXY/v1\"" -c model_auto_compact_token_limit=100000 "Is calc.py fixed?"
PYTHONPATH="$WFS_ROOT/scripts" python3 - "$WORK" "$before" << 'PY' || exit 1
import json
import sys

from live_check import calls, check

work, before = sys.argv[1], int(sys.argv[2])
calls = calls(work, before)
asked = [c for c in calls if c.get("compaction")]
last = calls[-1]["body"]["input"]
kinds = [i.get("type") for i in last]
at = kinds.index("compaction") if "compaction" in kinds else -1
after = json.dumps(last[at + 1:-2]) if at >= 0 else ""
check(len(asked) == 1 and kinds.count("compaction") == 1 and "return a + b" in after
      and "Is calc.py fixed?" in json.dumps(last[:at]),
      "after Codex compacted on the server, its calls hold the prompt, the compaction, then "
      "the projection (calc.py as it is now) in place of what came since",
      f"{len(asked)} compactions asked for; {kinds} {after[-1500:]}")
PY
checks=$((checks + 1))
# The `openai` provider asks for a WebSocket first; refused, Codex sends its calls over HTTP at
# once (any other answer, and it asks again for about seven seconds).
grep -q "a WebSocket was asked for: refused (426)" "$WORK/proxy.log" \
  || fail "the proxy did not refuse the openai provider's WebSocket: $(grep -i websocket "$WORK/proxy.log")"
pass "the openai provider's WebSocket was refused, and its calls came over HTTP"

# With a provider of one's own, Codex compacts by asking the model for a summary (a call with
# no tools, which the stand-in answers "Done."), and keeps it as a user message after the
# prompts. Another new session whose first answer reports a context past the limit.
before=$(wc -l < "$WORK/api.jsonl")
codex_exec summary "Summarised: util.py is not documented." \
  -c model_auto_compact_token_limit=100000 "Is util.py documented?"
PYTHONPATH="$WFS_ROOT/scripts" python3 - "$WORK" "$before" << 'PY' || exit 1
import json
import sys

from live_check import calls, check

work, before = sys.argv[1], int(sys.argv[2])
calls = calls(work, before)
asked = [c for c in calls if "CONTEXT CHECKPOINT COMPACTION" in json.dumps(c["body"]["input"][-1:])]
last = calls[-1]["body"]["input"]
summary = [n for n, i in enumerate(last)
           if "Another language model started to solve this problem" in json.dumps(i)]
prompt = [n for n, i in enumerate(last) if "Is util.py documented?" in json.dumps(i)]
after = json.dumps(last[summary[-1] + 1:-2]) if summary else ""
check(len(asked) == 1 and len(summary) == 1 and prompt and prompt[0] < summary[0]
      and "def show(x):" in after,
      "after Codex compacted by asking for a summary, its calls hold the prompt, the summary "
      "once, then the projection",
      f"asked {len(asked)}, summary at {summary}, prompt at {prompt}: {after[-1500:]}")
PY
checks=$((checks + 1))
# That session's model made a thread goal at last (`create_goal`, as at a user's word): the
# goal of its next calls, which no prompt says.
"$BIN" ctl -C "$PROJ" goal.get '{}' | grep -qF 'Is util.py documented?\n\nThen the user asked:\nDocument util.py"' \
  || fail "the goal the model created is not the session's: $("$BIN" ctl -C "$PROJ" goal.get '{}')"
pass "a thread goal the model created joins the session's goal"

# A skill the user names in a prompt (`$house-style`): Codex sends its SKILL.md in a user
# message after the prompt's, and the model follows it from then on. And one the model opens
# itself (Codex's own skill-creator, a `cat` of its SKILL.md outside the project).
mkdir -p "$WORK/codex-home/skills/house-style"
printf -- '---\nname: house-style\ndescription: The house style for Python files.\n---\n\nHOUSE RULE: every function gets a docstring.\n' \
  > "$WORK/codex-home/skills/house-style/SKILL.md"
before=$(wc -l < "$WORK/api.jsonl")
codex_exec skill "Styled: util.py needs a docstring." 'Use $house-style on util.py'
PYTHONPATH="$WFS_ROOT/scripts" python3 - "$WORK" "$before" << 'PY' || exit 1
import json
import sys

from live_check import calls, check

work, before = sys.argv[1], int(sys.argv[2])
inputs = [c["body"]["input"] for c in calls(work, before)]
inputs = [i for i in inputs if any("Use $house-style" in json.dumps(item) for item in i)]
last = json.dumps(inputs[-1]) if inputs else ""
check(len(inputs) == 4 and last.count("HOUSE RULE") == 1 and "/project/util.py\\n```" in last,
      "a skill the user named ($house-style) stays in the model's view after the first call, "
      "once, beside the projection", f"{len(inputs)} calls; {last[-2500:]}")
check(last.count("name: skill-creator") == 1
      and "skill-creator/SKILL.md, a skill you opened" in last,
      "a skill the model opened itself (a cat of its SKILL.md) stays in its view, once",
      last[-2500:])
PY
checks=$((checks + 2))
"$BIN" ctl -C "$PROJ" commands.list '{}' | grep -q 'SKILL.md' \
  && fail "the hook kept the skill's read as an output too: $("$BIN" ctl -C "$PROJ" commands.list '{}')"
pass "the hook keeps no output of it (the proxy keeps the skill)"

# The way the README says to trust the hooks: Codex's own screen, in its interactive UI (in
# tmux), with a CODEX_HOME that trusts the project and not yet the hooks.
if [ "${INTERACTIVE:-1}" = 1 ]; then
  command -v tmux > /dev/null || fail "tmux is needed for the interactive part (INTERACTIVE=0 leaves it out)"
  mkdir -p "$WORK/codex-home-tui"
  # As the README says: without it, Codex's app-server daemon stays in the project after the UI
  # quits, and the mount can only be detached.
  { cat "$WORK/codex-home/config.toml"; printf '\n[features]\ndaemon_auto_start = false\n'; } \
    > "$WORK/codex-home-tui/config.toml"
  TUI=worldfs-codex-live-$$
  tmux new-session -d -s "$TUI" -x 160 -y 45 \
    "cd '$PROJ' && CODEX_HOME='$WORK/codex-home-tui' STAND_IN_KEY=sk-stand-in '$CODEX'"
  wfs_defer "tmux kill-session -t $TUI 2> /dev/null || true"
  screen_has() {  # TEXT SECONDS: waits until the screen shows TEXT
    local i
    for ((i = 0; i < $2 * 10; i++)); do
      tmux capture-pane -p -t "$TUI" 2> /dev/null | grep -qF "$1" && return 0
      sleep 0.1
    done
    return 1
  }
  screen_has "Hooks need review" 30 || fail "Codex did not ask to review the hooks: $(tmux capture-pane -p -t "$TUI")"
  # The choices show before they take keys: "2" is sent until the mark is on it.
  for _ in 1 2 3 4 5; do
    tmux send-keys -t "$TUI" 2
    screen_has "› 2. Trust all" 1 && break
  done
  tmux send-keys -t "$TUI" Enter
  # If the mark never moved, Enter chose "Review hooks", and the list of hooks opened: "t"
  # trusts them all there, Escape closes it.
  if ! screen_has "Ask Codex" 10 && tmux capture-pane -p -t "$TUI" | grep -qF "t trust all"; then
    say "the list of hooks opened instead; trusting them there"
    tmux send-keys -t "$TUI" t
    sleep 0.5
    tmux send-keys -t "$TUI" Escape
  fi
  screen_has "Ask Codex" 30 || fail "Codex did not start after the hooks were trusted: $(tmux capture-pane -p -t "$TUI")"
  grep -q "trusted_hash" "$WORK/codex-home-tui/config.toml" || fail "trusting wrote no hook trust: $(cat "$WORK/codex-home-tui/config.toml")"
  # The input box shows before it takes keys. A thread goal, which Codex pursues over turns
  # of its own, and which reaches the hooks as no prompt.
  sleep 1
  before=$(wc -l < "$WORK/api.jsonl")
  tmux send-keys -t "$TUI" -l "/goal What does util.py do?"
  sleep 0.3
  tmux send-keys -t "$TUI" Enter
  screen_has "Goal met" 30 || fail "the goal's turns did not end: $(tmux capture-pane -p -t "$TUI")"
  "$BIN" ctl -C "$PROJ" goal.get '{}' | grep -q '"goal": "What does util.py do?"' \
    || fail "the trusted hooks did not set the interactive session's goal: $("$BIN" ctl -C "$PROJ" goal.get '{}'); the screen: $(tmux capture-pane -p -t "$TUI")"
  # Codex's working directory is in the mount: it must be gone before the unmount.
  tmux kill-session -t "$TUI"
  pass "after \"Trust all and continue\", an interactive Codex's hooks set its goal: the objective of its /goal"
  PYTHONPATH="$WFS_ROOT/scripts" python3 - "$WORK" "$before" << 'PY' || exit 1
import json
import sys

from live_check import calls, check

work, before = sys.argv[1], int(sys.argv[2])
inputs = [c["body"]["input"] for c in calls(work, before)]
inputs = [i for i in inputs if any(item.get("name") == "goal_objective" for item in i)]
last = inputs[-1] if inputs else []
text = json.dumps(last)
# Two turns: two reads, an answer; two reads, update_goal, the answer.
made = [i.get("name") for i in last if i.get("type") == "function_call"]
check(len(inputs) == 7 and "/project/NOTES.md\\n```" in text and made == ["update_goal"]
      and text.count("Continue working toward") == 1,
      "the calls of the goal's turns went with the projection in place of their history, "
      "Codex's word on the goal once", f"{len(inputs)} calls, {made}; {text[-3000:]}")
PY
  checks=$((checks + 1))
  "$BIN" ctl -C "$PROJ" commands.list '{}' > "$WORK/commands-goal.json"
  ! grep -q '"tool": "update_goal"' "$WORK/commands-goal.json" \
    || fail "update_goal's answer was kept as an output: $(cat "$WORK/commands-goal.json")"
  pass "update_goal's answer (the goal, which the projection says) is not kept as an output"

  # Plan mode (shift+tab): the model proposes a plan (`<proposed_plan>` in its answer), the user
  # chooses "Yes, implement this plan", and Codex sends "Implement the plan." and nothing more.
  # The plan is in the history alone: it must stay in the model's view while it is carried out.
  before=$(wc -l < "$WORK/api.jsonl")
  tmux new-session -d -s "$TUI" -x 160 -y 45 \
    "cd '$PROJ' && CODEX_HOME='$WORK/codex-home-tui' STAND_IN_KEY=sk-stand-in '$CODEX'"
  screen_has "Ask Codex" 30 || fail "Codex did not start again: $(tmux capture-pane -p -t "$TUI")"
  sleep 1
  # plan_for PROMPT [QUESTION]: switches to Plan mode (shift+tab, until the footer says so)
  # and asks PROMPT; answers QUESTION, if the model asks it (request_user_input), with its
  # first option; returns once Codex offers to implement the plan the model proposed.
  plan_for() {
    for _ in 1 2 3 4 5; do
      tmux send-keys -t "$TUI" BTab
      screen_has "Plan mode (shift+tab to cycle)" 1 && break
    done
    screen_has "Plan mode (shift+tab to cycle)" 1 \
      || fail "shift+tab did not switch to Plan mode: $(tmux capture-pane -p -t "$TUI")"
    tmux send-keys -t "$TUI" -l "$1"
    sleep 0.3
    tmux send-keys -t "$TUI" Enter
    if [ -n "${2:-}" ]; then
      screen_has "$2" 30 || fail "the model's question was not shown: $(tmux capture-pane -p -t "$TUI")"
      sleep 0.5
      tmux capture-pane -p -t "$TUI" > "$WORK/question-screen.txt"
      for _ in 1 2 3 4 5; do
        tmux send-keys -t "$TUI" Enter
        screen_has "Implement this plan?" 2 && break
      done
    fi
    screen_has "Implement this plan?" 30 \
      || fail "Codex did not offer to implement the plan for \"$1\": $(tmux capture-pane -p -t "$TUI")"
  }
  plan_for "Plan how to document util.py" "Which docstring style?"
  screen_has "› 1. Yes, implement this plan" 5 || fail "the first choice is not to implement: $(tmux capture-pane -p -t "$TUI")"
  tmux send-keys -t "$TUI" Enter
  screen_has "Plan carried out." 30 || fail "the plan's turn did not end: $(tmux capture-pane -p -t "$TUI")"
  # The user runs a command at the prompt (`!`): Codex shows its output, and sends it to the
  # model with the next prompt.
  tmux send-keys -t "$TUI" -l '!echo BANG RUN $((6 * 7))'
  sleep 0.3
  tmux send-keys -t "$TUI" Enter
  screen_has "BANG RUN 42" 10 || fail "the user's command did not run: $(tmux capture-pane -p -t "$TUI")"
  # Again, implemented in a fresh thread: Codex writes the plan to a file under its home and
  # opens the thread with "Read the approved plan at PATH and implement it."
  plan_for "Plan tests for util.py"
  for _ in 1 2 3 4 5; do
    tmux send-keys -t "$TUI" Down
    screen_has "› 2. Yes, clear context" 1 && break
  done
  tmux send-keys -t "$TUI" Enter
  screen_has "Second plan carried out." 30 || fail "the second plan's turn did not end: $(tmux capture-pane -p -t "$TUI")"
  # A prompt the user takes back (Esc Esc, Enter: "Conversation reverted to this point"),
  # which no hook hears of, to ask another.
  tmux send-keys -t "$TUI" -l "Make it bold"
  sleep 0.3
  tmux send-keys -t "$TUI" Enter
  screen_has "Bold done." 30 || fail "the prompt to take back did not finish: $(tmux capture-pane -p -t "$TUI")"
  tmux send-keys -t "$TUI" Escape
  sleep 0.5
  tmux send-keys -t "$TUI" Escape
  screen_has "rewind" 10 || fail "Esc Esc did not offer to rewind: $(tmux capture-pane -p -t "$TUI")"
  tmux send-keys -t "$TUI" Enter
  screen_has "Conversation reverted to this point" 10 || fail "the rewind did not happen: $(tmux capture-pane -p -t "$TUI")"
  # The prompt taken back comes back in the input box: cleared first.
  for _ in $(seq 20); do tmux send-keys -t "$TUI" BSpace; done
  sleep 0.3
  tmux send-keys -t "$TUI" -l "Make it red"
  sleep 0.3
  tmux send-keys -t "$TUI" Enter
  screen_has "Red done." 30 || fail "the prompt after the rewind did not finish: $(tmux capture-pane -p -t "$TUI")"
  tmux kill-session -t "$TUI"
  PYTHONPATH="$WFS_ROOT/scripts" python3 - "$WORK" "$before" << 'PY' || exit 1
import json
import sys

from live_check import calls, check

work, before = sys.argv[1], int(sys.argv[2])
inputs = [json.dumps(c["body"]["input"]) for c in calls(work, before) if c.get("answer", 0) > 0]
# From the call that answers "Implement the plan." on.
carried = [i.count("PLAN: DOCSTRING") for i in inputs if "Implement the plan." in i]
check(len(carried) >= 4 and set(carried) == {1},
      "the plan proposed in Plan mode stays in the model's view, once, in every call while it "
      "is carried out", f"the plan's marker in each call after \"Implement the plan.\": {carried}")
# The fresh thread's calls, from the one after the model read the plan's file on.
fresh = [i for i in inputs if "Read the approved plan at" in i]
read = [i.count("PLAN: TESTS") for i in fresh if "approved-plan.md" in i and "function_call_output" in i]
check(len(read) >= 4 and set(read) == {1},
      "a plan implemented in a fresh thread, which the model reads from the file Codex wrote, "
      "stays in the model's view, once, in every call after that read",
      f"the plan's marker in each call after the read: {read}")
# The user's answer to the model's question (request_user_input), from the call after it on,
# to the end of the first plan's work (the fresh thread is another conversation).
answer = 'The user answered: \\"Which docstring style?\\" = \\"One line (Recommended)\\"'
asked = next((n for n, i in enumerate(inputs) if '"request_user_input"' in i and "function_call_output" in i), len(inputs))
after = [i.count(answer) for i in inputs[asked:] if "Plan how to document util.py" in i]
check(len(after) >= 5 and set(after) == {1},
      "the user's answer to the model's question stays in the model's view, once, in every call "
      "after it, through the plan's work", f"the answer in each call after it: {after}")
# The command the user ran before the second plan's prompt, in each call of that thread from
# then on (the first holds it in its last turn, as it came).
ran = [i.count("BANG RUN 42") for i in inputs if "Plan tests for util.py" in i
       and "Plan how to document util.py" in i]
check(len(ran) >= 3 and set(ran) == {1},
      "a command the user ran at the prompt (!) and its output stay in the model's view, once, "
      "in every call after it", f"its output in each call: {ran}")
# After the rewind, the prompt taken back is in no call (the goal still says it).
rewound = [(i.count("Make it bold"), i.count("Make it red")) for i in inputs if "Make it red" in i]
check(len(rewound) == 3 and all(back == 0 for back, _ in rewound),
      "a prompt the user took back (Esc Esc) is in no later call", f"(taken back, asked instead) in each call after: {rewound}")
PY
  checks=$((checks + 5))
  "$BIN" ctl -C "$PROJ" commands.list '{}' | grep -q 'approved-plan.md' \
    && fail "the hook kept the approved plan's read as an output, which fades: $("$BIN" ctl -C "$PROJ" commands.list '{}')"
  pass "the hook keeps no output of that read (the proxy keeps the plan, which does not fade)"
  "$BIN" ctl -C "$PROJ" commands.list '{}' | grep -q '"tool": "request_user_input"' \
    && fail "the hook kept the user's answer as an output, which fades: $("$BIN" ctl -C "$PROJ" commands.list '{}')"
  "$BIN" ctl -C "$PROJ" goal.list '{}' | grep -qF 'Then the user asked:\nThe user answered: \"Which docstring style?\"' \
    || fail "the user's answer is not in the goal: $("$BIN" ctl -C "$PROJ" goal.list '{}')"
  pass "the hook adds the user's answer to the goal, after the prompt, and keeps no output of it"
fi

# One command instead of three: `worldfs run --proxy` mounts a second project, starts the proxy
# at the address Codex's config names (--listen), runs codex exec in the mount, and unmounts
# when it ends. Two commands: the third call has a step before its last turn to replace.
say "worldfs run --proxy: a second project mounted and proxied for one codex exec, unmounted after"
PROJ2=$WORK/run-project
mkdir -p "$PROJ2" "$WORK/codex-home-run"
cp "$PROJ/util.py" "$PROJ2/"
"$BIN" hook --install --codex -C "$PROJ2" > /dev/null
cat > "$WORK/run-script.json" << 'EOF'
[
  {"tool": "exec_command", "input": {"cmd": "cat util.py"}},
  {"tool": "exec_command", "input": {"cmd": "wc -l util.py"}},
  {"text": "Ran under worldfs run."}
]
EOF
stand_in "$WORK/run-api.out" --record "$WORK/run-api.jsonl" --keep-bodies \
  --script "$WORK/run-script.json"
wfs_defer "kill $STAND_IN_PID 2> /dev/null || true"
RUN_API_PORT=$STAND_IN_PORT
[ -n "$RUN_API_PORT" ] || fail "the second stand-in API did not start: $(cat "$WORK/run-api.out")"
RUN_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sed -e "s|^base_url = .*|base_url = \"http://127.0.0.1:$RUN_PORT/v1\"|" \
  -e "s|^\[projects\..*|[projects.\"$PROJ2\"]|" "$WORK/codex-home/config.toml" \
  > "$WORK/codex-home-run/config.toml"
rc=0
(cd / && CODEX_HOME=$WORK/codex-home-run STAND_IN_KEY=sk-stand-in OPENAI_API_KEY=sk-stand-in \
  timeout 240 "$BIN" -v run --proxy --listen "127.0.0.1:$RUN_PORT" \
  --upstream "http://127.0.0.1:$RUN_API_PORT" --no-state --log "$WORK/run.log" -C "$PROJ2" -- \
  "$CODEX" exec --dangerously-bypass-hook-trust --skip-git-repo-check -s workspace-write \
  "Show util.py") > "$WORK/run.out" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "worldfs run exited $rc: $(tail -20 "$WORK/run.out")"
grep -qF "Ran under worldfs run." "$WORK/run.out" || fail "codex under worldfs run did not finish: $(tail -20 "$WORK/run.out")"
if grep -q " $PROJ2 fuse" /proc/mounts; then fail "$PROJ2 is still mounted after worldfs run"; fi
grep -q "worldfs: unmounted $PROJ2" "$WORK/run.out" || fail "worldfs run did not say it unmounted: $(tail -20 "$WORK/run.out")"
RUN_CALLS=$(wc -l < "$WORK/run-api.jsonl")
RUN_SENT=$(grep -c "/v1/responses: sent .* instead of" "$WORK/run.log" || true)
[ "$RUN_SENT" -ge 1 ] || fail "no call under worldfs run went with the projection ($RUN_CALLS calls): $(tail -5 "$WORK/run.log")"
grep -qE "worldfs: [0-9]+ model calls? of the session through the proxy, $RUN_SENT with the projection" "$WORK/run.out" \
  || fail "worldfs run did not say the proxy's account at the end: $(tail -20 "$WORK/run.out")"
pass "worldfs run --proxy: codex ran in the mount ($RUN_SENT of $RUN_CALLS calls sent with the projection); the mount and the proxy went with it"

# Without --listen: Codex's own `openai` provider (its config here names another, which the
# command line's -c model_provider overrides), given the proxy's address on its command line
# by worldfs run (README, "With Codex"). Codex does not take the address from OPENAI_BASE_URL
# (0.171.0 went to api.openai.com). A third project, with no hooks installed and none trusted:
# worldfs run gives Codex its hooks and their trust on the command line too (no
# --dangerously-bypass-hook-trust), and without them no call would be rewritten.
say "worldfs run --proxy, a free port, no hooks installed: codex given the proxy's address, the hooks and their trust by worldfs run"
PROJ3=$WORK/run-project-3
mkdir -p "$PROJ3"
cp "$PROJ/util.py" "$PROJ3/"
stand_in "$WORK/run2-api.out" --record "$WORK/run2-api.jsonl" --keep-bodies \
  --script "$WORK/run-script.json"
wfs_defer "kill $STAND_IN_PID 2> /dev/null || true"
[ -n "$STAND_IN_PORT" ] || fail "the third stand-in API did not start: $(cat "$WORK/run2-api.out")"
rc=0
(cd / && CODEX_HOME=$WORK/codex-home-run OPENAI_API_KEY=sk-stand-in \
  timeout 240 "$BIN" -v run --proxy --upstream "http://127.0.0.1:$STAND_IN_PORT" --no-state \
  --log "$WORK/run2.log" -C "$PROJ3" -- "$CODEX" -c model_provider=openai exec \
  --skip-git-repo-check -s workspace-write "Show util.py") > "$WORK/run2.out" 2>&1 || rc=$?
[ "$rc" = 0 ] || fail "worldfs run (a free port) exited $rc: $(tail -20 "$WORK/run2.out")"
grep -qF "Codex's \`openai\` provider is pointed at the proxy" "$WORK/run2.out" || fail "worldfs run did not point codex at the proxy: $(tail -20 "$WORK/run2.out")"
grep -qF "Codex gets worldfs's hooks for this run" "$WORK/run2.out" || fail "worldfs run did not give codex the hooks: $(tail -20 "$WORK/run2.out")"
if [ -e "$PROJ3/.codex" ]; then fail "worldfs run wrote into $PROJ3/.codex"; fi
if grep -q "session-flags" "$WORK/codex-home-run/config.toml"; then fail "worldfs run's hook trust was written to config.toml"; fi
grep -qF "Ran under worldfs run." "$WORK/run2.out" || fail "codex under worldfs run (a free port) did not finish: $(tail -20 "$WORK/run2.out")"
if grep -q " $PROJ3 fuse" /proc/mounts; then fail "$PROJ3 is still mounted after worldfs run"; fi
RUN2_CALLS=$(wc -l < "$WORK/run2-api.jsonl")
RUN2_SENT=$(grep -c "/v1/responses: sent .* instead of" "$WORK/run2.log" || true)
[ "$RUN2_SENT" -ge 1 ] || fail "no call under worldfs run (a free port) went with the projection ($RUN2_CALLS calls): $(tail -5 "$WORK/run2.log")"
pass "worldfs run --proxy on a free port: codex's own provider, pointed at it by worldfs run, with the hooks it gave and trusted, reached it ($RUN2_SENT of $RUN2_CALLS calls sent with the projection)"

# An interactive Codex under `worldfs run`, in a fourth project with no hooks installed: the
# hooks and the trust it is given on its command line show no "Hooks need review" screen, and
# set the goal from the prompt typed.
if [ "${INTERACTIVE:-1}" = 1 ]; then
  say "worldfs run --proxy -- codex, interactive, no hooks installed: no review asked, the goal set"
  PROJ4=$WORK/run-project-4
  mkdir -p "$PROJ4" "$WORK/codex-home-run4"
  cp "$PROJ/util.py" "$PROJ4/"
  { sed -e "s|^\[projects\..*|[projects.\"$PROJ4\"]|" "$WORK/codex-home/config.toml"
    printf '\n[features]\ndaemon_auto_start = false\n'; } > "$WORK/codex-home-run4/config.toml"
  # The `openai` provider's UI asks to sign in without a key saved (the environment's is not
  # enough for it).
  printf 'sk-stand-in' | CODEX_HOME=$WORK/codex-home-run4 "$CODEX" login --with-api-key \
    > "$WORK/run4-login.out" 2>&1 || fail "codex login --with-api-key: $(cat "$WORK/run4-login.out")"
  stand_in "$WORK/run4-api.out" --record "$WORK/run4-api.jsonl" --keep-bodies \
    --script "$WORK/run-script.json"
  wfs_defer "kill $STAND_IN_PID 2> /dev/null || true"
  [ -n "$STAND_IN_PORT" ] || fail "the fourth stand-in API did not start: $(cat "$WORK/run4-api.out")"
  TUI=worldfs-codex-live-run-$$
  # worldfs run's stderr (and Codex's) to a file; Codex draws on the terminal.
  tmux new-session -d -s "$TUI" -x 160 -y 45 \
    "cd / && CODEX_HOME='$WORK/codex-home-run4' OPENAI_API_KEY=sk-stand-in '$BIN' -v run --proxy \
     --upstream 'http://127.0.0.1:$STAND_IN_PORT' --no-state --log '$WORK/run4.log' -C '$PROJ4' \
     -- '$CODEX' -c model_provider=openai -a never -s workspace-write 2> '$WORK/run4.err'; \
     echo \$? > '$WORK/run4.rc'"
  wfs_defer "tmux kill-session -t $TUI 2> /dev/null || true"
  # screen_has: the interactive part's above (the same INTERACTIVE runs both).
  screen_has "Ask Codex" 60 || fail "Codex did not start under worldfs run: $(tmux capture-pane -p -t "$TUI"; cat "$WORK/run4.err")"
  tmux capture-pane -p -t "$TUI" | grep -qF "Hooks need review" \
    && fail "Codex asked to review the hooks worldfs run gave and trusted"
  # The input box shows before it takes keys.
  sleep 1
  tmux send-keys -t "$TUI" -l "Show util.py"
  sleep 0.3
  tmux send-keys -t "$TUI" Enter
  screen_has "Ran under worldfs run." 60 || fail "the interactive turn did not end: $(tmux capture-pane -p -t "$TUI")"
  "$BIN" ctl -C "$PROJ4" goal.get '{}' | grep -q '"goal": "Show util.py"' \
    || fail "the hooks worldfs run gave did not set the interactive session's goal: $("$BIN" ctl -C "$PROJ4" goal.get '{}')"
  tmux send-keys -t "$TUI" -l "/quit"
  sleep 0.3
  tmux send-keys -t "$TUI" Enter
  for _ in $(seq 300); do [ -s "$WORK/run4.rc" ] && break; sleep 0.1; done
  [ "$(cat "$WORK/run4.rc" 2> /dev/null)" = 0 ] || fail "worldfs run (interactive) did not end with 0 after /quit: $(cat "$WORK/run4.rc" 2> /dev/null); $(tail -5 "$WORK/run4.err")"
  TUI=
  if grep -q " $PROJ4 fuse" /proc/mounts; then fail "$PROJ4 is still mounted after worldfs run"; fi
  RUN4_CALLS=$(wc -l < "$WORK/run4-api.jsonl")
  RUN4_SENT=$(grep -c "/v1/responses: sent .* instead of" "$WORK/run4.log" || true)
  [ "$RUN4_SENT" -ge 1 ] || fail "no interactive call under worldfs run went with the projection ($RUN4_CALLS calls): $(tail -5 "$WORK/run4.log")"
  pass "an interactive Codex under worldfs run, hooks given and trusted on its command line: no review asked, the goal set, $RUN4_SENT of $RUN4_CALLS calls sent with the projection"
fi

say "all $checks checks passed"
