# shellcheck shell=bash
# lib-stand-in.sh: the stand-in model API (scripts/stand-in-api.py) the live checks talk to.
#
#   . "$WFS_ROOT/scripts/lib-stand-in.sh"
#   stand_in "$WORK/api.out" --record "$WORK/api.jsonl" --script "$WORK/script.json"
#   pids+=("$STAND_IN_PID")   # or the script's own way of killing it at the end
#   [ -n "$STAND_IN_PORT" ] || fail "the stand-in API did not start: $(cat "$WORK/api.out")"

# stand_in OUT ARGS...: starts the stand-in API in the background with ARGS, its output in OUT.
# Sets STAND_IN_PID, and STAND_IN_PORT to the port it listens on (empty if it did not say so
# within 5 s).
stand_in() {
  local out=$1
  shift
  python3 "$WFS_ROOT/scripts/stand-in-api.py" "$@" > "$out" 2>&1 &
  STAND_IN_PID=$!
  for _ in $(seq 50); do grep -q listening "$out" && break; sleep 0.1; done
  STAND_IN_PORT=$(sed -n 's/.*listening on \([0-9]*\).*/\1/p' "$out")
}
