#!/usr/bin/env python3
"""Writes claude_code.jsonl and claude_code.base.tar.gz beside this script: a hand-written
worldfs-trace/1 run in the shapes of Claude Code's tools. It has what the mini-swe-agent traces
in ../shared lack: parallel calls in one turn, file tools that answer an error (an Edit or a
Write before a Read, an old_string found three times, a file too long to Read whole, text not
in the file), absolute paths under the source's repository root, a clone before the base, a
Write outside the repository, Glob, Grep, Task and TodoWrite calls, and a notebook read as
its cells. The output is the
same bytes on every run (fixed mtimes, no gzip timestamp). It also has a CRLF file read
and edited in LF form, as Claude Code's tools show and match it."""
import hashlib, json, os

from tracegen import write_base, write_trace

os.chdir(os.path.dirname(os.path.abspath(__file__)))

ROOT = "/repo"
calc = "".join(
    [
        "\"\"\"A tiny calculator.\"\"\"\n\n",
        "def add(a, b):\n    return a - b\n\n\n",
        "def sub(a, b):\n    return a - b\n\n\n",
        "def mul(a, b):\n    total = 0\n    for _ in range(b):\n        total = total + a\n    return total\n",
    ]
)
util = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
test = "from src.calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n"
readme = "# calc\n\nAdds, subtracts, multiplies.\n"
big = "".join(f"CONSTANT_{i} = {i}  # a generated table row\n" for i in range(1, 401))
win = "[calc]\r\nprecision = 2\r\nmode = fast\r\n"
base = {
    "src/win.ini": win,
    "src/calc.py": calc,
    "src/util.py": util,
    "tests/test_calc.py": test,
    "README.md": readme,
    "src/big.py": big,
    "notebooks/usage.ipynb": json.dumps({
        "cells": [
            {"cell_type": "markdown", "id": "intro", "metadata": {}, "source": ["# Usage\n", "Plots of add."]},
            {"cell_type": "code", "id": "plot", "metadata": {}, "execution_count": 1, "source": ["plot(add)"],
             "outputs": [{"output_type": "display_data", "metadata": {},
                          "data": {"image/png": "iVBORw0KGgo" * 900, "text/plain": ["<Figure size 640x480>"]}}]},
        ],
        "metadata": {"language_info": {"name": "python"}}, "nbformat": 4, "nbformat_minor": 5,
    }, indent=1) + "\n",
}

def sha1(s):
    return hashlib.sha1(s.encode()).hexdigest()

def gutter(text, first=1):
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return "\n".join(f"{i:>6}\u2192{l}" for i, l in enumerate(lines, first))

steps = []
turn = 0

def step(kind, tool, first=True, **kw):
    global turn
    if first:
        turn += 1
    s = {
        "record": "step", "step": len(steps), "turn": turn, "turn_first": first,
        "kind": kind, "tool": tool, "tool_use_id": f"toolu_{len(steps):02d}",
        "path": None, "path_in_repo": None, "path_raw": None, "range": None,
        "ranges": None, "partial": False, "total_lines": None, "content": None,
        "old_text": None, "new_text": None, "replace_all": None,
        "disk_sha1_before": None, "command": None, "cwd": ".", "via": None,
        "input": None, "output": "", "is_error": False, "returncode": None,
        "touches": [], "effects_unknown": False, "pre_setup": False,
        "assistant_text": None, "tokens_in_reported": None,
    }
    s.update(kw)
    if first:
        s["assistant_text"] = s["assistant_text"] or f"turn {turn}"
        pass
    steps.append(s)

def path(p):
    return {"path": p, "path_in_repo": True, "path_raw": f"{ROOT}/{p}"}

ERR_UNREAD = "<tool_use_error>File has not been read yet. Read it first before writing to it.</tool_use_error>"

# 0: the agent clones the repository itself; the base starts after it
step("command", "Bash", command=f"git clone https://example.invalid/calc {ROOT} && cd {ROOT} && git checkout 0123456",
     input={"command": f"git clone https://example.invalid/calc {ROOT}"}, output="Cloning into '/repo'...",
     returncode=0, pre_setup=True)
# 1, 2: parallel Glob and Grep
step("search", "Glob", input={"pattern": "**/*.py"},
     output="\n".join(f"{ROOT}/{p}" for p in ["src/calc.py", "src/util.py", "src/big.py", "tests/test_calc.py"]),
     touches=[{"path": "src", "op": "search", "range": None, "how": "tool"}])
step("search", "Grep", first=False, input={"pattern": "def add", "path": f"{ROOT}/src", "output_mode": "content", "-n": True},
     output=f"{ROOT}/src/calc.py:3:def add(a, b):",
     touches=[{"path": "src/calc.py", "op": "search", "range": None, "how": "tool"}])
# 3: an Edit before any Read: Claude Code refuses it, the file is unchanged
fix_old, fix_new = "def add(a, b):\n    return a - b\n", "def add(a, b):\n    return a + b\n"
step("edit", "Edit", **path("src/calc.py"), old_text=fix_old, new_text=fix_new, replace_all=False,
     input={"file_path": f"{ROOT}/src/calc.py", "old_string": fix_old, "new_string": fix_new},
     output=ERR_UNREAD, is_error=True)
# 4: Read it whole
step("read", "Read", **path("src/calc.py"), content=calc, total_lines=calc.count("\n"),
     input={"file_path": f"{ROOT}/src/calc.py"}, output=gutter(calc),
     touches=[{"path": "src/calc.py", "op": "read", "range": None, "how": "tool"}])
# 5: the same Edit again, now accepted
calc1 = calc.replace(fix_old, fix_new, 1)
step("edit", "Edit", **path("src/calc.py"), old_text=fix_old, new_text=fix_new, replace_all=False,
     disk_sha1_before=sha1(calc), input={"file_path": f"{ROOT}/src/calc.py", "old_string": fix_old, "new_string": fix_new},
     output=f"The file {ROOT}/src/calc.py has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n" + gutter("def add(a, b):\n    return a + b\n", 3))
# 6: an Edit whose text matches twice without replace_all: refused
dup_old, dup_new = "(a, b):\n", "(a: int, b: int):\n"
step("edit", "Edit", **path("src/calc.py"), old_text=dup_old, new_text=dup_new, replace_all=False,
     input={"file_path": f"{ROOT}/src/calc.py", "old_string": dup_old, "new_string": dup_new},
     output="<tool_use_error>Found 3 matches of the string to replace, but replace_all is false. To replace all occurrences, set replace_all to true. To replace only one occurrence, please provide more context to uniquely identify the instance.\nString: (a, b):\n</tool_use_error>",
     is_error=True)
# 7: with replace_all
calc2 = calc1.replace(dup_old, dup_new)
step("edit", "Edit", **path("src/calc.py"), old_text=dup_old, new_text=dup_new, replace_all=True,
     disk_sha1_before=sha1(calc1), input={"file_path": f"{ROOT}/src/calc.py", "old_string": dup_old, "new_string": dup_new, "replace_all": True},
     output=f"The file {ROOT}/src/calc.py has been updated. All occurrences of '(a, b):\n' were successfully replaced with '(a: int, b: int):\n'.")
# 8: a MultiEdit: two replacements in order, the second in the text the first left
multi = [
    {"old_string": '"""A tiny calculator."""', "new_string": '"""A small calculator."""'},
    {"old_string": "total = total + a", "new_string": "total += a"},
]
calc3 = calc2
for e in multi:
    calc3 = calc3.replace(e["old_string"], e["new_string"], 1)
step("edit", "MultiEdit", **path("src/calc.py"), disk_sha1_before=sha1(calc2),
     input={"file_path": f"{ROOT}/src/calc.py", "edits": multi},
     output=f"Applied 2 edits to {ROOT}/src/calc.py:\n1. Replaced \"\"\"\"A tiny calculator.\"\"\"\" with \"\"\"\"A small calculator.\"\"\"\"\n2. Replaced \"total = total + a\" with \"total += a\"")
# 9, 10: parallel: a whole Read refused as too long, and a Read of its first 20 lines
step("read", "Read", **path("src/big.py"), input={"file_path": f"{ROOT}/src/big.py"},
     output="File content (31250 tokens) exceeds maximum allowed tokens (25000). Please use offset and limit parameters to read specific portions of the file, or use the GrepTool to search for specific content.",
     is_error=True, touches=[{"path": "src/big.py", "op": "read", "range": None, "how": "tool"}])
head = "".join(big.splitlines(keepends=True)[:20])
step("read", "Read", first=False, **path("src/big.py"), range=[1, 20], content=head, total_lines=400,
     input={"file_path": f"{ROOT}/src/big.py", "offset": 1, "limit": 20}, output=gutter(head),
     touches=[{"path": "src/big.py", "op": "read", "range": [1, 20], "how": "tool"}])
# 11: a Write over a file not read yet: refused
test2 = test + "\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"
test2 = test2.replace("import add", "import add, mul")
step("write", "Write", **path("tests/test_calc.py"), content=test2,
     input={"file_path": f"{ROOT}/tests/test_calc.py", "content": test2}, output=ERR_UNREAD, is_error=True)
# 12: Read it, 13: Write again, accepted
step("read", "Read", **path("tests/test_calc.py"), content=test, total_lines=test.count("\n"),
     input={"file_path": f"{ROOT}/tests/test_calc.py"}, output=gutter(test),
     touches=[{"path": "tests/test_calc.py", "op": "read", "range": None, "how": "tool"}])
step("write", "Write", **path("tests/test_calc.py"), content=test2, disk_sha1_before=sha1(test),
     input={"file_path": f"{ROOT}/tests/test_calc.py", "content": test2},
     output=f"The file {ROOT}/tests/test_calc.py has been updated. Here's the result of running `cat -n` on a snippet of the edited file:\n" + gutter(test2))
# 14: a scratch script outside the repository
repro = "from src.calc import add\nprint(add(2, 2))\n"
step("write", "Write", path="/tmp/repro.py", path_in_repo=False, path_raw="/tmp/repro.py", content=repro,
     input={"file_path": "/tmp/repro.py", "content": repro}, output="File created successfully at: /tmp/repro.py")
# 15: the tests fail: an error result, but a command's effects stand
step("command", "Bash", command=f"cd {ROOT} && python -m pytest tests -q", input={"command": f"cd {ROOT} && python -m pytest tests -q"},
     output="F.\nFAILED tests/test_calc.py::test_mul - TypeError\n1 failed, 1 passed", is_error=True, returncode=1,
     touches=[{"path": "tests/test_calc.py", "op": "read", "range": None, "how": "bash-parse"},
              {"path": "src/calc.py", "op": "read", "range": None, "how": "bash-parse"}])
# 16, 17: a subagent and a todo list
step("other", "Task", input={"description": "Check callers", "prompt": "Find callers of mul", "subagent_type": "general-purpose"},
     output="mul is only called from tests/test_calc.py.")
step("other", "TodoWrite", first=False, input={"todos": [{"content": "fix mul typing", "status": "in_progress", "activeForm": "Fixing mul"}]},
     output="Todos have been modified successfully.")
# 18: an Edit whose text is not in the file: refused
step("edit", "Edit", **path("src/util.py"), old_text="return min(x)", new_text="return x",
     input={"file_path": f"{ROOT}/src/util.py", "old_string": "return min(x)", "new_string": "return x"},
     output="<tool_use_error>String to replace not found in file.\nString: return min(x)</tool_use_error>", is_error=True)
# 19: Read src/util.py, 20: an Edit after the MultiEdit (below the CRLF file's steps), and the answer
step("read", "Read", **path("src/util.py"), content=util, total_lines=2,
     input={"file_path": f"{ROOT}/src/util.py"}, output=gutter(util),
     touches=[{"path": "src/util.py", "op": "read", "range": None, "how": "tool"}])
# 21-23: a CRLF file: Read shows it as LF lines, and Edit matches and writes in that form,
# putting CRLF back
win_lf = win.replace("\r\n", "\n")
step("read", "Read", **path("src/win.ini"), content=win_lf, total_lines=3,
     input={"file_path": f"{ROOT}/src/win.ini"}, output=gutter(win_lf),
     touches=[{"path": "src/win.ini", "op": "read", "range": None, "how": "tool"}])
win2 = win.replace("precision = 2\r\n", "precision = 4\r\nrounding = half-even\r\n")
step("edit", "Edit", **path("src/win.ini"), old_text="precision = 2\n", new_text="precision = 4\nrounding = half-even\n",
     replace_all=False, disk_sha1_before=sha1(win),
     input={"file_path": f"{ROOT}/src/win.ini", "old_string": "precision = 2\n", "new_string": "precision = 4\nrounding = half-even\n"},
     output=f"The file {ROOT}/src/win.ini has been updated.")
step("edit", "Edit", **path("src/win.ini"), old_text="mode = fast", new_text="mode = exact",
     replace_all=False, disk_sha1_before=sha1(win2),
     input={"file_path": f"{ROOT}/src/win.ini", "old_string": "mode = fast", "new_string": "mode = exact"},
     output=f"The file {ROOT}/src/win.ini has been updated.")
sub_old = "def sub(a: int, b: int):\n"
sub_new = sub_old + '    """a minus b"""\n'
step("edit", "Edit", **path("src/calc.py"), old_text=sub_old, new_text=sub_new, replace_all=False,
     disk_sha1_before=sha1(calc3), input={"file_path": f"{ROOT}/src/calc.py", "old_string": sub_old, "new_string": sub_new},
     output=f"The file {ROOT}/src/calc.py has been updated.")
# 25, 27: a notebook, read twice, the README between: Read shows its cells (the figure goes as
# an image, which a trace's text leaves out), not its JSON
cells_seen = ('<cell id="intro"><cell_type>markdown</cell_type># Usage\nPlots of add.</cell id="intro">\n'
              '<cell id="plot">plot(add)</cell id="plot">\n\n<Figure size 640x480>')
for again in (False, True):
    if again:
        step("read", "Read", **path("README.md"), content=readme, total_lines=readme.count("\n"),
             input={"file_path": f"{ROOT}/README.md"}, output=gutter(readme),
             touches=[{"path": "README.md", "op": "read", "range": None, "how": "tool"}])
    step("read", "Read", **path("notebooks/usage.ipynb"), content=cells_seen,
         input={"file_path": f"{ROOT}/notebooks/usage.ipynb"}, output=cells_seen,
         touches=[{"path": "notebooks/usage.ipynb", "op": "read", "range": None, "how": "tool"}])
step("message", None, assistant_text="Fixed add; mul's test fails on typing, left for review.", tool_use_id=None, output=None)

final = calc2
header = {
    "record": "header", "format": "worldfs-trace/1", "trace_id": "claude_code", "instance_id": "claude_code",
    "repo": "x/calc", "base_commit": "0123456" + "0" * 33, "goal": "add() subtracts; make it add.",
    "initial_prompt": "add() in src/calc.py subtracts. Fix it and add a test for mul.",
    "system_prompt": None,
    "source": {"system": "claude-code", "system_version": "2.1.0 (hand-written)", "dataset": "tests", "license": "MIT"},
    "model": "none", "repo_root_in_source": ROOT, "repo_root_method": "hand-written",
    "setup_end_step": 1, "resolved": None, "final_patch": None, "stats": {},
}
write_trace("claude_code", header, steps)
write_base("claude_code", base, listed=["setup.py", "src/__init__.py"])
print(len(steps), "steps,", turn, "turns")
