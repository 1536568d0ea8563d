#!/usr/bin/env python3
"""The `proxy` part of scripts/bench.sh (`make bench-proxy`): what `worldfs proxy` adds to each
model call, and what it sends instead of a growing history.

    bench-proxy.py WORLDFS_BIN MOUNT PROXY_URL API_URL API_RECORD TURNS [claude|codex]

A session of TURNS tool calls on the mounted tree, as Claude Code makes them: each turn reads a
file through the mount (`cat`, which the mount records), tells the mount with a PostToolUse
hook event, and appends the Read and its numbered result to the history; every fifth turn also
edits a file it read before (its copy in the history goes stale). After each turn the whole
request (system prompt, tools, history) is posted twice, through the proxy and straight to the
stand-in API, in alternating order, and each answer (a short event stream) is read to its end.
Prints markdown table rows: the time per call both ways and the bytes that reached the API.

With `codex`, the session is Codex's (vendor-docs/codex.md): each turn is an `exec_command` of
`cat FILE` told by PreToolUse and PostToolUse events of Codex's shape (the output alone, as a
string), its reasoning and its output (Codex's header, then what `cat` printed) appended to the
`input` of a Responses API request, posted to `/v1/responses`. No compaction follows.
"""
import json
import statistics
import subprocess
import sys
import time
import urllib.request

bin_, mnt, proxy, api, record, turns = sys.argv[1:7]
client = sys.argv[7] if len(sys.argv) > 7 else "claude"
turns = int(turns)
PROMPT = "Make the report module print totals per region"
files = sorted(subprocess.run(["find", mnt, "-name", "*.py"], capture_output=True, text=True,
                              check=True).stdout.split())


def hook(event):
    event["cwd"] = mnt
    event["session_id"] = "bench"
    subprocess.run([bin_, "hook"], input=json.dumps(event).encode(), check=True)


def numbered(text):
    return "\n".join("%d\t%s" % (i + 1, l) for i, l in enumerate(text.splitlines()))


def post(base, body):
    if client == "codex":
        req = urllib.request.Request(base + "/v1/responses", data=body,
                                     headers={"content-type": "application/json",
                                              "authorization": "Bearer bench",
                                              "session-id": "bench"})
    else:
        req = urllib.request.Request(base + "/v1/messages?beta=true", data=body,
                                     headers={"content-type": "application/json",
                                              "x-api-key": "bench",
                                              "anthropic-version": "2023-06-01"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=60) as r:
        r.read()
    return (time.perf_counter() - t) * 1000


def last_recorded_bytes():
    with open(record) as f:
        return json.loads(f.read().splitlines()[-1])["bytes"]


hook({"hook_event_name": "SessionStart", "source": "startup"})
hook({"hook_event_name": "UserPromptSubmit", "prompt": PROMPT})
schema = {"type": "object", "properties": {"file_path": {"type": "string"}}}
messages = [{"role": "user", "content": [
    {"type": "text", "text": "<system-reminder>\nCLAUDE.md: run the tests.\n</system-reminder>"},
    {"type": "text", "text": PROMPT}]}]
codex_input = [
    {"type": "message", "role": "developer",
     "content": [{"type": "input_text", "text": "You are a coding agent running in the Codex CLI."}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text":
        "<environment_context>\n  <cwd>%s</cwd>\n</environment_context>" % mnt}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": PROMPT}]}]
codex_tools = [{"type": "function", "name": "exec_command", "parameters": {
    "type": "object", "properties": {"cmd": {"type": "string"}}}}]


def codex_turn(t, path):
    """A Codex turn: `cat path` begun and told by its hooks, its items added to the input."""
    cid = "call_bench_%d" % t
    command = "cat %s" % path
    pre = {"hook_event_name": "PreToolUse", "turn_id": "bench", "tool_name": "Bash",
           "tool_use_id": cid, "tool_input": {"command": command}}
    hook(pre)
    text = subprocess.run(["cat", path], capture_output=True, text=True, check=True).stdout
    hook(dict(pre, hook_event_name="PostToolUse", tool_response=text))
    codex_input.extend([
        {"type": "reasoning", "id": "rs_bench_%d" % t, "summary": [],
         "encrypted_content": "gAAAAB" + "x" * 400},
        {"type": "function_call", "id": "fc_bench_%d" % t, "name": "exec_command",
         "arguments": json.dumps({"cmd": command}), "call_id": cid},
        {"type": "function_call_output", "call_id": cid, "output":
            "Chunk ID: b%d\nWall time: 0.0010 seconds\nProcess exited with code 0\n"
            "Original token count: %d\nOutput:\n%s" % (t, len(text) // 4, text)}])
    return json.dumps({"model": "gpt-5-codex", "instructions": "", "input": codex_input,
                       "tools": codex_tools, "tool_choice": "auto", "stream": True,
                       "store": False, "include": ["reasoning.encrypted_content"],
                       "prompt_cache_key": "bench"}).encode()


def claude_turn(t, path):
    """A Claude Code turn: a Read of `path` told by its hook, added to the messages."""
    text = subprocess.run(["cat", path], capture_output=True, text=True, check=True).stdout
    tid = "toolu_bench_%d" % t
    result = numbered(text)
    hook({"hook_event_name": "PostToolUse", "tool_name": "Read", "tool_use_id": tid,
          "tool_input": {"file_path": path},
          "tool_response": {"type": "text", "file": {"filePath": path, "content": text,
                            "numLines": text.count("\n"), "startLine": 1,
                            "totalLines": text.count("\n")}}})
    messages.append({"role": "assistant", "content": [
        {"type": "text", "text": "Reading %s next." % path.rsplit("/", 1)[-1]},
        {"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": path}}]})
    messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": tid, "content": result,
         "cache_control": {"type": "ephemeral"}}]})
    # Claude Code keeps one breakpoint on the newest message: the one before goes.
    if len(messages) > 3:
        messages[-3]["content"][0].pop("cache_control", None)
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 4096, "stream": True,
                       "system": [{"type": "text", "text": "You are Claude Code.",
                                   "cache_control": {"type": "ephemeral"}}],
                       "tools": [{"name": "Read", "input_schema": schema}],
                       "messages": messages}).encode()


via, direct, sizes = [], [], []
for t in range(1, turns + 1):
    path = files[(t * 7) % len(files)]
    if t % 5 == 0:
        edited = files[((t - 1) * 7) % len(files)]
        with open(edited, "a") as f:
            f.write("# edited at turn %d\n" % t)
    body = codex_turn(t, path) if client == "codex" else claude_turn(t, path)
    order = [(proxy, via), (api, direct)]
    if t % 2:
        order.reverse()
    for base, times in order:
        times.append(post(base, body))
        if base == proxy:
            sent = last_recorded_bytes()
    sizes.append((t, len(body), sent))


def ms_row(name, a):
    s = sorted(a)
    return "| %s | %d | %.1f | %.1f | %.1f |" % (name, len(s), statistics.median(s),
                                                s[max(0, int(0.9 * len(s)) - 1)], s[-1])


print(ms_row("through `worldfs proxy`", via))
print(ms_row("straight to the stand-in API", direct))
added = [a - b for a, b in zip(via, direct)]
print(ms_row("added by the proxy (paired)", added))
late = added[len(added) * 3 // 4:]
print(ms_row("added, last quarter of the turns", late))
rewritten = sum(1 for _, history, sent in sizes if sent != history)
# The proxy counts each call's tokens after it has gone and reports them to the mount.
for _ in range(300):
    stats = json.loads(subprocess.run([bin_, "ctl", "stats"], cwd=mnt, capture_output=True,
                                      check=True).stdout)["proxy"]
    if stats["calls"] >= rewritten:
        break
    time.sleep(0.1)
print("TOKENS | %d | %d | %d | %.1f%% | %d -> %d |" % (
    stats["calls"], stats["history_tokens_total"], stats["sent_tokens_total"],
    100.0 * stats["sent_tokens_total"] / max(1, stats["history_tokens_total"]),
    stats["last_history_tokens"], stats["last_sent_tokens"]))
print("REWRITTEN %d of %d requests reached the API rewritten (the first has no history to replace)"
      % (rewritten, len(sizes)))
for t, history, sent in sizes:
    if t in (10, 25, 50, 100, 200, 400) or t == turns:
        print("SIZE | %d | %d | %d | %.1f%% |" % (t, history, sent, 100.0 * sent / history))


if client == "codex":
    sys.exit(0)


# After a compaction: the summary opens the conversation, with the five files read last
# attached whole as Claude Code puts them back. Posted twice through the proxy: with the copies
# as the files are (the projection leaves those files out), and with each copy one byte off
# (no longer the file: the projection shows it too, as it did before it knew of copies).
def proxy_stats(calls):
    for _ in range(300):
        s = json.loads(subprocess.run([bin_, "ctl", "stats"], cwd=mnt, capture_output=True,
                                      check=True).stdout)["proxy"]
        if s["calls"] >= calls:
            return s
        time.sleep(0.1)
    sys.exit("the proxy did not report its call")


hook({"hook_event_name": "SessionStart", "source": "compact"})
last = []
for t in range(turns, 0, -1):
    p = files[(t * 7) % len(files)]
    if p not in last:
        last.append(p)
    if len(last) == 5:
        break
copies = [(p, subprocess.run(["cat", p], capture_output=True, text=True, check=True).stdout)
          for p in last]
tools = [{"name": "Read", "input_schema": schema},
         {"name": "Agent", "input_schema": {"type": "object"}}]


def compacted(mark):
    head = [{"type": "text", "text": "This session is being continued from a previous "
             "conversation that ran out of context. The summary below covers the earlier "
             "portion of the conversation.\n\nSummary:\n1. Primary Request and Intent: " + PROMPT}]
    for p, text in copies:
        head.append({"type": "text", "text": "<system-reminder>\nCalled the Read tool with the "
                     "following input: %s\nResult of calling the Read tool:\n%s\n"
                     "</system-reminder>" % (json.dumps({"file_path": p}), numbered(text) + mark)})
    messages = [{"role": "user", "content": head}]
    # Two calls since: with fewer there is no history for the projection to replace.
    for i in (1, 0):
        tid = "toolu_bench_after_%d" % i
        messages.append({"role": "assistant", "content": [
            {"type": "tool_use", "id": tid, "name": "Read", "input": {"file_path": last[i]}}]})
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": tid, "content": numbered(copies[i][1])}]})
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 4096, "stream": True,
                       "system": [{"type": "text", "text": "You are Claude Code."}],
                       "tools": tools, "messages": messages}).encode()


calls = proxy_stats(0)["calls"]
row = []
for mark in ("", "#"):
    post(proxy, compacted(mark))
    calls += 1
    s = proxy_stats(calls)
    row.append((s["last_history_tokens"], s["last_sent_tokens"], last_recorded_bytes()))
(h, cur, cur_b), (_, stale, stale_b) = row
print("ATTACHED | %d | %d | %d | %d | %d (%.1f%%) | %d -> %d |" % (
    len(copies), h, stale, cur, stale - cur, 100.0 * (stale - cur) / max(1, stale),
    stale_b, cur_b))
