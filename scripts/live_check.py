"""What the Python parts of `scripts/codex-live.sh` share: the stand-in API's record of the
calls it got, and a check that says what it found when it misses.

    PYTHONPATH="$WFS_ROOT/scripts" python3 - "$WORK" ... << 'PY'
    from live_check import calls, check
"""

import json
import sys

PREFIX = "codex-live"


def calls(work, since=0):
    """The requests the stand-in API recorded in WORK/api.jsonl, from the `since`-th on."""
    with open(f"{work}/api.jsonl") as f:
        return [json.loads(line) for line in f][since:]


def check(ok, what, detail):
    """Says `what` holds, or ends the run saying what was found instead (`detail`)."""
    if not ok:
        print(f"{PREFIX}: FAILED: {what}: {detail}", file=sys.stderr)
        sys.exit(1)
    print(f"{PREFIX}: ok: {what}")
