#!/usr/bin/env python3
"""Writes hostile.jsonl and hostile.base.tar.gz beside this script: a hand-written
worldfs-trace/1 run whose base archive and paths would lead a careless replay outside its
scratch copy or into a hang, and odd but plausible steps a real run can hold. The archive has
a link to /tmp, a link to /dev/null, a FIFO, a link inside the repository and a file that is
not UTF-8; near its end come `git checkout .`,
`git stash` and `git stash pop`. The output is the same bytes on every run
(tracegen.py)."""
import hashlib, os

from tracegen import write_base, write_trace

os.chdir(os.path.dirname(os.path.abspath(__file__)))

ROOT = "/repo"
ESCAPE = "worldfs-replay-escape-check"
a_py = "def a():\n    return 1\n"
latin = "caf\xe9 cr\xe8me\n".encode("latin-1")
files = {"src/a.py": a_py.encode(), "latin.txt": latin}
links = {"ext": "/tmp", "nullconf": "/dev/null", "l.py": "src/a.py"}

def sha1(b):
    return hashlib.sha1(b).hexdigest()

steps = []

def step(kind, tool="bash", **kw):
    s = {
        "record": "step", "step": len(steps), "turn": len(steps) + 1, "turn_first": True,
        "kind": kind, "tool": tool, "tool_use_id": None, "path": None, "path_in_repo": True,
        "range": None, "ranges": None, "partial": False, "content": None, "old_text": None,
        "new_text": None, "replace_all": None, "disk_sha1_before": None, "command": None,
        "cwd": ".", "via": "bash" if tool == "bash" else None, "input": None, "output": "",
        "is_error": False, "returncode": 0, "touches": [], "effects_unknown": False,
        "pre_setup": False, "assistant_text": f"turn {len(steps) + 1}", "tokens_in_reported": None,
    }
    s.update(kw)
    steps.append(s)

# 0: a heredoc through a link to /tmp: refused, nothing written there
step("write", path=f"ext/{ESCAPE}", content="x\n", command=f"cat > ext/{ESCAPE} <<'EOF'\nx\nEOF")
# 1: a link to /dev/null, read by a command: refused, not an abort
step("command", command="cat nullconf", output="",
     touches=[{"path": "nullconf", "op": "read", "range": None, "how": "bash-parse"}])
# 2: a FIFO: opening it would block for ever
step("command", command="cat pipe", output="", is_error=True, returncode=1,
     touches=[{"path": "pipe", "op": "read", "range": None, "how": "bash-parse"}])
# 3: a path with `..` that stays inside
step("read", path="./src/../src/a.py", content=a_py, command="cat ./src/../src/a.py", output=a_py)
# 4: an absolute path under the source's root
step("read", tool="Read", path=f"{ROOT}/src/a.py", range=[1, 1], content="def a():\n",
     input={"file_path": f"{ROOT}/src/a.py", "offset": 1, "limit": 1}, output="     1\u2192def a():")
# 5: `cat` of a file that does not exist: the agent saw the error
step("read", path="missing.py", command="cat missing.py", is_error=True, returncode=1,
     output="cat: missing.py: No such file or directory")
# 6: Claude Code's Edit with an empty old_string creates the file
step("edit", tool="Edit", path="new.py", old_text="", new_text="print(1)\n", replace_all=False,
     input={"file_path": f"{ROOT}/new.py", "old_string": "", "new_string": "print(1)\n"},
     output=f"The file {ROOT}/new.py has been created.")
# 7: a shell edit of a file that is not UTF-8, with no later view: rewritten with its own bytes
step("edit", path="latin.txt", command="sed -i 's/x/y/' latin.txt", output="",
     touches=[{"path": "latin.txt", "op": "write", "range": None, "how": "bash-parse"}])
# 8: a Write that says what the file was: the latin-1 bytes, untouched
step("write", tool="Write", path="latin.txt", content="fixed\n", disk_sha1_before=sha1(latin),
     input={"file_path": f"{ROOT}/latin.txt", "content": "fixed\n"}, output="ok")
# 9: a script the trace cannot follow makes gen.py; a read shows its lines 3-4
step("command", command="python make_gen.py", effects_unknown=True, output="")
step("read", path="gen.py", range=[3, 4], content="c\nd\n", command="sed -n 3,4p gen.py", output="c\nd\n")
# 11: `rm l.py` removes the link, not src/a.py
step("command", command="rm l.py", output="",
     touches=[{"path": "l.py", "op": "delete", "range": None, "how": "bash-parse"}])
step("edit", tool="Edit", path="src/a.py", old_text="return 1", new_text="return 2", replace_all=False,
     disk_sha1_before=sha1(a_py.encode()),
     input={"file_path": f"{ROOT}/src/a.py", "old_string": "return 1", "new_string": "return 2"},
     output="ok")

# 13: `git checkout .` puts back what differs from the base (src/a.py, latin.txt) and leaves
# the files the agent made (new.py, gen.py); the Edit and Write after it check
step("command", command="git checkout .", output="Updated 2 paths from the index", effects_unknown=True)
step("edit", tool="Edit", path="src/a.py", old_text="return 1", new_text="return 3", replace_all=False,
     disk_sha1_before=sha1(a_py.encode()),
     input={"file_path": f"{ROOT}/src/a.py", "old_string": "return 1", "new_string": "return 3"},
     output="ok")
step("write", tool="Write", path="latin.txt", content="again\n", disk_sha1_before=sha1(latin),
     input={"file_path": f"{ROOT}/latin.txt", "content": "again\n"}, output="ok")

# 16-19: `git stash` puts the base back for a test run, a Read sees it, `git stash pop`
# brings the agent's changes back, and the Edit after it finds them
step("command", command="git stash && python -m pytest -q", output="1 passed", effects_unknown=True)
step("read", tool="Read", path="src/a.py", content=a_py, input={"file_path": f"{ROOT}/src/a.py"},
     output="     1\u2192def a():\n     2\u2192    return 1")
step("command", command="git stash pop", output="Dropped refs/stash@{0}", effects_unknown=True)
a3 = a_py.replace("return 1", "return 3")
step("edit", tool="Edit", path="src/a.py", old_text="return 3", new_text="return 4", replace_all=False,
     disk_sha1_before=sha1(a3.encode()),
     input={"file_path": f"{ROOT}/src/a.py", "old_string": "return 3", "new_string": "return 4"},
     output="ok")

header = {
    "record": "header", "format": "worldfs-trace/1", "trace_id": "hostile", "instance_id": "hostile",
    "repo": "x/hostile", "base_commit": "0" * 40, "goal": "Survive the base archive.",
    "initial_prompt": "Tidy the repository.", "system_prompt": None,
    "source": {"system": "hand-written"}, "model": "none", "repo_root_in_source": ROOT,
    "setup_end_step": 0, "resolved": None, "final_patch": None, "stats": {},
}
write_trace("hostile", header, steps)
write_base("hostile", files, links, fifos=["pipe"])
print(len(steps), "steps")
