#!/usr/bin/env python3
"""Two Claude Code sessions on one mount: what each session's projection holds.

Usage: bench-sessions.py WORLDFS_BIN MOUNT LABEL [STEPS] [BUDGET] [FILES]

MOUNT is a mirror mount of generated modules `report/mod_1.py` ... `report/mod_40.py` (see
`bench_sessions` in bench.sh). Session s1 works on the first FILES modules and session s2 on
as many from module 21 on: STEPS times, each session reads the next of its modules with
Claude Code's Read tool
(a `cat` through the mount, then the PostToolUse event piped into `worldfs hook`, as Claude
Code runs it), the two sessions taking turns. Then each session's projection is asked for as
`worldfs proxy` asks (anthropic, BUDGET tokens, its session, without the last step), and the
modules it shows are counted: its own, and the other session's. Prints one markdown table row
per session.
"""

import json
import re
import subprocess
import sys


def main():
    bin, mnt, label = sys.argv[1], sys.argv[2], sys.argv[3]
    steps = int(sys.argv[4]) if len(sys.argv) > 4 else 24
    budget = int(sys.argv[5]) if len(sys.argv) > 5 else 8000
    files = int(sys.argv[6]) if len(sys.argv) > 6 else 6
    own = {"s1": list(range(1, 1 + files)), "s2": list(range(21, 21 + files))}

    def hook(event):
        subprocess.run([bin, "hook"], input=json.dumps(event).encode(), check=True)

    for session, prompt in [("s1", "Speed up the region totals"), ("s2", "Explain the report")]:
        hook({"hook_event_name": "SessionStart", "source": "startup", "session_id": session,
              "cwd": mnt})
        hook({"hook_event_name": "UserPromptSubmit", "prompt": prompt, "session_id": session,
              "cwd": mnt})
    for step in range(steps):
        for session in ("s1", "s2"):
            n = own[session][step % len(own[session])]
            path = "%s/report/mod_%d.py" % (mnt, n)
            content = subprocess.run(["cat", path], capture_output=True, check=True,
                                     text=True).stdout
            lines = content.count("\n")
            hook({"hook_event_name": "PostToolUse", "session_id": session, "cwd": mnt,
                  "tool_name": "Read", "tool_use_id": "toolu_%s_%d" % (session, step),
                  "tool_input": {"file_path": path},
                  "tool_response": {"type": "text", "file": {
                      "filePath": path, "content": content, "numLines": lines,
                      "startLine": 1, "totalLines": lines}}})
    for session, other in (("s1", "s2"), ("s2", "s1")):
        params = {"format": "anthropic", "budget": budget, "session": session,
                  "last_step": False, "tool_name": "Read", "path_param": "file_path",
                  "absolute_paths": True}
        got = json.loads(subprocess.run([bin, "ctl", "projection.get", json.dumps(params)],
                                        cwd=mnt, capture_output=True, check=True).stdout)
        body = json.dumps(got["body"])
        shown = {int(m) for m in re.findall(r"report/mod_(\d+)\.py", body)}
        mine = len(shown & set(own[session]))
        theirs = len(shown & set(own[other]))
        print("| %s | %s | %d | %d of %d | %d of %d |" % (
            label, session, got["tokens"], mine, len(own[session]), theirs, len(own[other])))


if __name__ == "__main__":
    main()
