#!/usr/bin/env python3
"""A stand-in for the Anthropic Messages API, for `make run` and `make bench-proxy`.

It answers `POST /v1/messages` with a short streamed (server-sent events) or plain answer,
`POST /v1/messages/count_tokens` with a rough count, anything else with a 404 in the API's
error shape, and appends one JSON line per request it received to --record: the path, the
body's size in bytes, its messages' roles, and (with --keep-bodies) the body itself.

    python3 scripts/stand-in-api.py --record FILE [--port 0] [--keep-bodies]

It prints `stand-in-api: listening on PORT` once it accepts connections.
"""
import argparse
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def events():
    """The events of a one-word answer, as the API streams them."""
    msg = {"id": "msg_standin", "type": "message", "role": "assistant", "model": "stand-in",
           "content": [], "stop_reason": None,
           "usage": {"input_tokens": 1, "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": msg}
    yield "content_block_start", {"type": "content_block_start", "index": 0,
                                  "content_block": {"type": "text", "text": ""}}
    yield "ping", {"type": "ping"}
    yield "content_block_delta", {"type": "content_block_delta", "index": 0,
                                  "delta": {"type": "text_delta", "text": "Done."}}
    yield "content_block_stop", {"type": "content_block_stop", "index": 0}
    yield "message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                            "usage": {"output_tokens": 1}}
    yield "message_stop", {"type": "message_stop"}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Each event is its own small write: without this, Nagle's algorithm holds one back until
    # the client acknowledges the last, which a client delaying its ACKs does for 40 ms.
    disable_nagle_algorithm = True
    record = None
    keep_bodies = False
    lock = threading.Lock()

    def log_message(self, *args):  # quiet: the record file is the log
        pass

    def reply(self, status, body, content_type="application/json"):
        data = body.encode()
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        raw = self.rfile.read(length)
        path = self.path.split("?")[0]
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        messages = body.get("messages", []) if isinstance(body, dict) else []
        entry = {"path": self.path, "bytes": len(raw),
                 "roles": [m.get("role") for m in messages if isinstance(m, dict)]}
        if self.keep_bodies:
            entry["body"] = body
        with self.lock, open(self.record, "a") as f:
            f.write(json.dumps(entry) + "\n")
        if path == "/v1/messages/count_tokens":
            self.reply(200, json.dumps({"input_tokens": len(raw) // 4}))
        elif path == "/v1/messages" and isinstance(body, dict) and body.get("stream"):
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for name, data in events():
                chunk = ("event: %s\ndata: %s\n\n" % (name, json.dumps(data))).encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        elif path == "/v1/messages":
            self.reply(200, json.dumps({"id": "msg_standin", "type": "message",
                                        "role": "assistant", "model": "stand-in",
                                        "content": [{"type": "text", "text": "Done."}],
                                        "stop_reason": "end_turn",
                                        "usage": {"input_tokens": 1, "output_tokens": 1}}))
        else:
            self.reply(404, json.dumps({"type": "error", "error": {
                "type": "not_found_error", "message": "stand-in: no such path " + path}}))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--record", required=True, help="append one JSON line per request here")
    ap.add_argument("--keep-bodies", action="store_true", help="record each body too")
    a = ap.parse_args()
    Handler.record = a.record
    Handler.keep_bodies = a.keep_bodies
    srv = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    print("stand-in-api: listening on %d" % srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
