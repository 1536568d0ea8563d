#!/usr/bin/env python3
"""A stand-in for the Anthropic Messages API (and the OpenAI Responses API, for Codex), for
`make run`, `make bench-proxy`, `make check-claude-code` and `make check-codex`.

It answers `POST /v1/messages` with a short streamed (server-sent events) or plain answer,
`POST /v1/messages/count_tokens` with a rough count, anything else with a 404 in the API's
error shape, and appends one JSON line per request it received to --record: the path, the
body's size in bytes, its messages' roles, and (with --keep-bodies) the body and the headers.

With --script FILE (a JSON list), the requests of an agent's main conversation (those that
define a `Read` tool) get its answers in turn, so a real Claude Code can be driven through a
session: `{"tool": NAME, "input": {...}}` calls a tool, `{"calls": [{"tool": ...}, ...]}` calls
several at once, `{"text": "..."}` ends the turn. An answer's `"input_tokens": N` is the usage
it reports (a full context makes Claude Code compact on its own). Past the end, the last answer
is given again. Other requests (titles, summaries) get the short answer. "$PLAN_FILE" in an
answer becomes the plan file the request names (Claude Code's plan mode: its name has random
words).
With --subagent-script FILE and --subagent-prompt TEXT, the requests of a subagent (their
first message holds TEXT, the task the main conversation gave it) get that list's answers in
turn instead.
`POST /v1/responses` (Codex) is answered the same way, streamed as the Responses API streams:
the requests that define an `exec_command` tool get the script's answers, a tool call being a
`function_call` item (`{"tool": "exec_command", "input": {"cmd": "..."}}`), or a freeform
tool's `custom_tool_call` with `{"tool": "apply_patch", "custom": "*** Begin Patch ..."}`. An
input value "$LAST_SESSION" becomes the number of the last "session ID N" the request holds
(Codex's answer for a command still running, which `write_stdin` then polls), and "$AGENT" the
last `agent_id` (a subagent `spawn_agent` started), and "$PLAN_FILE" the plan file a thread
begun with an approved plan names; `"namespace": NAME` goes with the call (Codex's
`multi_agent_v1` tools). A request whose user messages hold --subagent-prompt is a subagent's,
and gets --subagent-script's answers, as for Claude Code.
With --summary TEXT, a request of the main conversation whose last user message asks for a
`<summary>` block (Claude Code compacting its conversation) is answered with TEXT as that block,
and takes no answer of the script. A `/v1/responses` request whose input ends with a
`compaction_trigger` item (Codex compacting on OpenAI's servers, with the `openai` provider) is
answered with one `compaction` item, whose `encrypted_content` is a stand-in's, and takes no
answer of the script either.

    python3 scripts/stand-in-api.py --record FILE [--port 0] [--keep-bodies] [--script FILE]
                                    [--subagent-script FILE --subagent-prompt TEXT]
                                    [--summary TEXT]

It prints `stand-in-api: listening on PORT` once it accepts connections.
"""
import argparse
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


DONE = {"text": "Done."}


def blocks(answer, n):
    """The content blocks of a scripted answer, and the turn's stop reason."""
    calls = answer.get("calls") or ([answer] if "tool" in answer else [])
    if calls:
        return ([{"type": "tool_use", "id": "toolu_standin_%02d_%d" % (n, i), "name": c["tool"],
                  "input": c.get("input", {})} for i, c in enumerate(calls)], "tool_use")
    return [{"type": "text", "text": answer.get("text", "Done.")}], "end_turn"


def events(answer, n):
    """The events of an answer, as the API streams them."""
    content, stop = blocks(answer, n)
    msg = {"id": "msg_standin_%d" % n, "type": "message", "role": "assistant",
           "model": "stand-in", "content": [], "stop_reason": None,
           "usage": {"input_tokens": answer.get("input_tokens", 1), "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": msg}
    for i, b in enumerate(content):
        if b["type"] == "tool_use":
            start = dict(b, input={})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": b["text"]}
        yield "content_block_start", {"type": "content_block_start", "index": i,
                                      "content_block": start}
        if i == 0:
            yield "ping", {"type": "ping"}
        yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": stop},
                            "usage": {"output_tokens": 1}}
    yield "message_stop", {"type": "message_stop"}


def response_events(answer, n):
    """The events of an answer to `/v1/responses`, as the Responses API streams them."""
    calls = answer.get("calls") or ([answer] if "tool" in answer else [])
    if "items" in answer:
        items = answer["items"]
    elif calls:
        items = [{"type": "custom_tool_call", "id": "ctc_standin_%02d_%d" % (n, i),
                  "call_id": "call_standin_%02d_%d" % (n, i), "name": c["tool"],
                  "input": c["custom"], "status": "completed"} if "custom" in c else
                 dict({"type": "function_call", "id": "fc_standin_%02d_%d" % (n, i),
                       "call_id": "call_standin_%02d_%d" % (n, i), "name": c["tool"],
                       "arguments": json.dumps(c.get("input", {})), "status": "completed"},
                      **({"namespace": c["namespace"]} if "namespace" in c else {}))
                 for i, c in enumerate(calls)]
    else:
        items = [{"type": "message", "id": "msg_standin_%d" % n, "role": "assistant",
                  "status": "completed", "content": [
                      {"type": "output_text", "text": answer.get("text", "Done."),
                       "annotations": []}]}]
    response = {"id": "resp_standin_%d" % n, "object": "response", "model": "stand-in",
                "status": "in_progress", "output": []}
    yield "response.created", {"type": "response.created", "response": response}
    for i, item in enumerate(items):
        yield "response.output_item.added", {"type": "response.output_item.added",
                                             "output_index": i, "item": item}
        yield "response.output_item.done", {"type": "response.output_item.done",
                                            "output_index": i, "item": item}
    tokens = answer.get("input_tokens", 1)
    done = dict(response, status="completed", output=items, usage={
        "input_tokens": tokens, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 1, "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": tokens + 1})
    yield "response.completed", {"type": "response.completed", "response": done}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Each event is its own small write: without this, Nagle's algorithm holds one back until
    # the client acknowledges the last, which a client delaying its ACKs does for 40 ms.
    disable_nagle_algorithm = True
    record = None
    keep_bodies = False
    script = None
    subagent_script = None
    subagent_prompt = None
    summary = None
    answered = 0
    subagent_answered = 0
    lock = threading.Lock()

    def answer_for(self, body):
        """The answer to a `/v1/messages` request and its number in its script (0: none): a
        subagent's next, a compaction's summary, the main conversation's next, else the short
        one."""
        if not isinstance(body, dict):
            return DONE, 0
        tools = body.get("tools", [])
        main = any(isinstance(t, dict) and t.get("name") == "Read" for t in tools)
        first = json.dumps(body.get("messages", [])[:1])
        if main and self.subagent_script and self.subagent_prompt in first:
            with self.lock:
                n = Handler.subagent_answered
                Handler.subagent_answered += 1
            self.subagent = True
            return self.subagent_script[min(n, len(self.subagent_script) - 1)], n + 1
        if not self.script or not main:
            return DONE, 0
        users = [m for m in body.get("messages", []) if isinstance(m, dict) and m.get("role") == "user"]
        if self.summary and "<summary>" in json.dumps(users[-1:]):
            text = "<analysis>\nThe conversation so far.\n</analysis>\n\n<summary>\n%s\n</summary>"
            self.compaction = True
            return {"text": text % self.summary}, 0
        with self.lock:
            n = Handler.answered
            Handler.answered += 1
        answer = self.script[min(n, len(self.script) - 1)]
        # Plan mode names the plan file the model is to write (its name has random words).
        plan_files = re.findall(r"(?:create your plan at|plan mode at:|plan file \() ?(/[^\s)\\]+\.md)",
                                json.dumps(body))
        if plan_files and "$PLAN_FILE" in json.dumps(answer):
            answer = json.loads(json.dumps(answer).replace("$PLAN_FILE", plan_files[-1]))
        return answer, n + 1

    def responses_answer_for(self, body):
        """The answer to a `/v1/responses` request (Codex's) and its number in its script."""
        tools = body.get("tools", []) if isinstance(body, dict) else []
        main = any(isinstance(t, dict) and t.get("name") == "exec_command" for t in tools)
        if not self.script or not main:
            return DONE, 0
        last = (body.get("input") or [None])[-1]
        if isinstance(last, dict) and last.get("type") == "compaction_trigger":
            self.compaction = True
            return {"items": [{"type": "compaction", "id": "cmp_standin",
                               "encrypted_content": "stand-in compaction"}]}, 0
        users = [i for i in body.get("input", []) if isinstance(i, dict) and i.get("role") == "user"]
        if self.subagent_script and self.subagent_prompt in json.dumps(users):
            with self.lock:
                n = Handler.subagent_answered
                Handler.subagent_answered += 1
            self.subagent = True
            return self.subagent_script[min(n, len(self.subagent_script) - 1)], n + 1
        with self.lock:
            n = Handler.answered
            Handler.answered += 1
        answer = self.script[min(n, len(self.script) - 1)]
        said, text = json.dumps(answer), json.dumps(body)
        running = re.findall(r"session ID (\d+)", text)
        if running:
            said = said.replace('"$LAST_SESSION"', running[-1])
        agents = re.findall(r'agent_id\\*":\s*\\*"([0-9a-f-]+)', text)
        if agents:
            said = said.replace("$AGENT", agents[-1])
        plans = re.findall(r"Read the approved plan at (/\S+) and implement it", text)
        if plans:
            said = said.replace("$PLAN_FILE", plans[-1])
        return json.loads(said), n + 1

    def log_message(self, *args):  # quiet: the record file is the log
        pass

    def reply(self, status, body, content_type="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def stream(self, named_events):
        """Sends `named_events` as server-sent events, each as it comes."""
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        for name, data in named_events:
            chunk = ("event: %s\ndata: %s\n\n" % (name, json.dumps(data))).encode()
            self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")

    def do_POST(self):
        # One handler serves every request of a kept-alive connection.
        self.compaction = False
        self.subagent = False
        length = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(length)
        path = self.path.split("?")[0]
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        key = "input" if path == "/v1/responses" else "messages"
        messages = body.get(key, []) if isinstance(body, dict) else []
        entry = {"path": self.path, "bytes": len(raw),
                 "roles": [m.get("role", m.get("type")) for m in messages if isinstance(m, dict)]}
        if self.keep_bodies:
            entry["body"] = body
            entry["headers"] = dict(self.headers)
        if path == "/v1/messages":
            answer, n = self.answer_for(body)
        elif path == "/v1/responses":
            answer, n = self.responses_answer_for(body)
        else:
            answer, n = DONE, 0
        entry["answer"] = n
        if self.compaction:
            entry["compaction"] = True
        if self.subagent:
            entry["subagent"] = True
        with self.lock, open(self.record, "a") as f:
            f.write(json.dumps(entry) + "\n")
        if path == "/v1/messages/count_tokens":
            self.reply(200, json.dumps({"input_tokens": len(raw) // 4}))
        elif path == "/v1/messages" and isinstance(body, dict) and body.get("stream"):
            self.stream(events(answer, n))
        elif path == "/v1/responses":
            self.stream(response_events(answer, n))
        elif path == "/v1/messages":
            content, stop = blocks(answer, n)
            self.reply(200, json.dumps({"id": "msg_standin_%d" % n, "type": "message",
                                        "role": "assistant", "model": "stand-in",
                                        "content": content, "stop_reason": stop,
                                        "usage": {"input_tokens": answer.get("input_tokens", 1),
                                                  "output_tokens": 1}}))
        else:
            self.reply(404, json.dumps({"type": "error", "error": {
                "type": "not_found_error", "message": "stand-in: no such path " + path}}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--record", required=True, help="append one JSON line per request here")
    ap.add_argument("--keep-bodies", action="store_true", help="record each body too")
    ap.add_argument("--script", help="a JSON list of answers for the main conversation")
    ap.add_argument("--subagent-script", help="a JSON list of answers for a subagent")
    ap.add_argument("--subagent-prompt", help="the subagent's task, which tells its requests")
    ap.add_argument("--summary", help="the summary to answer a compaction with")
    a = ap.parse_args()
    Handler.record = a.record
    Handler.keep_bodies = a.keep_bodies
    Handler.summary = a.summary
    def answers(path, option):
        """The list of answers in the JSON file at `path`, or None without one."""
        if not path:
            return None
        try:
            with open(path) as f:
                listed = json.load(f)
        except (OSError, ValueError) as e:
            ap.error("%s %s: %s" % (option, path, e))
        if not isinstance(listed, list) or not listed:
            ap.error("%s: a non-empty JSON list of answers is needed" % option)
        return listed

    Handler.script = answers(a.script, "--script")
    if bool(a.subagent_script) != bool(a.subagent_prompt):
        ap.error("--subagent-script and --subagent-prompt go together")
    Handler.subagent_prompt = a.subagent_prompt
    Handler.subagent_script = answers(a.subagent_script, "--subagent-script")
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    print("stand-in-api: listening on %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
