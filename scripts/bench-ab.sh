#!/usr/bin/env bash
# bench-ab.sh: two builds of worldfs under fsbench, alternated in one run, on the bench tree.
#
#   scripts/bench-ab.sh OLD_BIN NEW_BIN [ROUNDS] [WORKLOADS]   (root; after `make bench-fs`
#                                                              made bench-work/native)
#
# Whether a change to the mount costs anything: each round mounts bench-work/native at
# bench-work/mnt with OLD_BIN, runs `fsbench -n 5 -W 1 -w WORKLOADS`, unmounts, then the same
# with NEW_BIN, so both builds see the same machine, disk state and load. ROUNDS defaults to 2,
# WORKLOADS to the ones that create, remove, look up and open (smallfiles, rmtree, stat, find,
# lsR, catall). enable_uring is left as it is (the header says which transport ran). Prints one
# line per round, build and workload: the median ratio mount/native and the median of the pair
# ratios. Build OLD_BIN from another commit with `git worktree add` and its own CARGO_TARGET_DIR.
set -euo pipefail
export LC_ALL=C
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
[ $# -ge 2 ] || { sed -n 2,13p "$0" >&2; exit 2; }
OLD=$1 NEW=$2 ROUNDS=${3:-2} WORKLOADS=${4:-smallfiles,rmtree,stat,find,lsR,catall}
FSBENCH=${FSBENCH:-$ROOT/../shared/tools/fsbench}
for b in "$OLD" "$NEW"; do [ -x "$b" ] || { echo "no worldfs binary at $b" >&2; exit 1; }; done
[ -x "$FSBENCH" ] || { echo "no fsbench at $FSBENCH (set FSBENCH)" >&2; exit 1; }
[ -d bench-work/native/tree ] || { echo "no bench-work/native/tree: run make bench-fs first" >&2; exit 1; }
MNT=$ROOT/bench-work/mnt
mkdir -p "$MNT"
PID=""
cleanup() {
  if [ -n "$PID" ]; then
    umount "$MNT" 2> /dev/null || umount -l "$MNT" 2> /dev/null || true
    wait "$PID" 2> /dev/null || true
    PID=""
  fi
}
trap cleanup EXIT
echo "# bench-ab $(date -u +%FT%TZ) kernel=$(uname -r) enable_uring=$(cat /sys/module/fuse/parameters/enable_uring 2> /dev/null || echo absent)"
echo "# old=$OLD new=$NEW rounds=$ROUNDS workloads=$WORKLOADS"
echo "round build workload ratio pair_ratio_median"
for r in $(seq "$ROUNDS"); do
  for build in old new; do
    bin=$OLD
    [ "$build" = new ] && bin=$NEW
    "$bin" mount bench-work/native "$MNT" > "bench-work/ab-$build.log" 2>&1 &
    PID=$!
    for _ in $(seq 50); do grep -q " $MNT " /proc/self/mountinfo && break; sleep 0.1; done
    grep -q " $MNT " /proc/self/mountinfo || { echo "$build did not mount:" >&2; cat "bench-work/ab-$build.log" >&2; exit 1; }
    "$FSBENCH" -n 5 -W 1 -w "$WORKLOADS" -l "$build" bench-work/native "$MNT" |
      awk -v r="$r" -v b="$build" '/^workload/ { on = 1; next } on && NF >= 5 { print r, b, $1, $4, $5 }'
    "$bin" unmount "$MNT" > /dev/null
    wait "$PID" || true
    PID=""
  done
done
