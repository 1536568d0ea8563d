#!/usr/bin/env bash
# ab-spawn.sh: two worldfs builds side by side on a one-process-per-file workload, the case
# where per-process work on the FUSE thread shows (a shell loop running `cat` on one small file
# after another, as an agent's one-shot commands do).
#
#   scripts/ab-spawn.sh OLD_BIN NEW_BIN [ROUNDS] [FILES]
#
# Each binary mounts its own copy of FILES small files (mirror mounts, default options). Each
# round times the loop once on each mount, the order alternating between rounds. Printed: the
# median seconds per side, the median of the per-round NEW/OLD ratios with its range, and per
# side the world's entries and how many of them no program is named for (an access by a
# process that was gone before the mount named it counts as the agent's).
set -euo pipefail
OLD=$1 NEW=$2 ROUNDS=${3:-21} FILES=${4:-300}
W=$(mktemp -d /tmp/ab-spawn.XXXXXX)
pids=()
cleanup() {
  for s in old new; do
    mountpoint -q "$W/$s/mnt" && "$OLD" unmount "$W/$s/mnt" > /dev/null 2>&1 || true
  done
  for p in "${pids[@]}"; do wait "$p" 2> /dev/null || true; done
  rm -rf "$W"
}
trap cleanup EXIT
for s in old new; do
  mkdir -p "$W/$s/src" "$W/$s/mnt"
  for i in $(seq 1 "$FILES"); do printf 'line %s\n' "$i" > "$W/$s/src/f$i.txt"; done
done
"$OLD" mount "$W/old/src" "$W/old/mnt" 2> "$W/old.log" & pids+=($!)
"$NEW" mount "$W/new/src" "$W/new/mnt" 2> "$W/new.log" & pids+=($!)
for s in old new; do
  for _ in $(seq 100); do mountpoint -q "$W/$s/mnt" && break; sleep 0.1; done
  mountpoint -q "$W/$s/mnt" || { echo "ab-spawn: $s did not mount" >&2; cat "$W/$s.log" >&2; exit 1; }
done
one() {  # SIDE -> seconds for the loop
  local d=$W/$1/mnt t0 t1
  t0=$(date +%s.%N)
  for i in $(seq 1 "$FILES"); do cat "$d/f$i.txt" > /dev/null; done
  t1=$(date +%s.%N)
  echo "$t1 - $t0" | bc -l
}
one old > /dev/null; one new > /dev/null  # warm: dentries, page cache, /proc
: > "$W/times"
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) = 1 ]; then o=$(one old); n=$(one new); else n=$(one new); o=$(one old); fi
  echo "$o $n" >> "$W/times"
done
python3 - "$W/times" "$FILES" << 'EOF'
import statistics as st, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1])]
n = int(sys.argv[2])
o = st.median(r[0] for r in rows); w = st.median(r[1] for r in rows)
ratios = sorted(r[1] / r[0] for r in rows)
print(f"rounds {len(rows)}, {n} cat processes per side per round")
print(f"old  median {o:.3f} s  ({o / n * 1e6:.0f} us per process)")
print(f"new  median {w:.3f} s  ({w / n * 1e6:.0f} us per process)")
print(f"new/old per round: median {st.median(ratios):.3f} [{ratios[0]:.3f}-{ratios[-1]:.3f}]")
EOF
for s in old new; do
  bin=$OLD; [ "$s" = new ] && bin=$NEW
  (cd "$W/$s/mnt" && "$bin" ctl entries.list '{"limit":10000}') > "$W/$s.json"
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); e=d["entries"]; print(sys.argv[2], "entries", d["total"], "unnamed", sum(1 for x in e if not x.get("programs")))' "$W/$s.json" "$s"
done
