#!/usr/bin/env bash
# bench-uring-ab.sh: FUSE-over-io_uring vs /dev/fuse in one run, on the bench tree.
#
#   scripts/bench-uring-ab.sh [RUNS]      (root; after `scripts/bench.sh fs` made the tree)
#
# Mounts bench-work/native twice at once, at bench-work/mnt-on (--io-uring on) and
# bench-work/mnt-off (--io-uring off), both --no-observe, with
# /sys/module/fuse/parameters/enable_uring set to Y for the run (restored on exit). Then, per
# workload, one untimed warm-up per directory and RUNS (default 5) timed rounds, each round
# native, ring, /dev/fuse back to back, so all three see the same machine load. Workloads: warm
# cat of every file (unpinned and with the client pinned to CPU 0), grep -r, rg -uuu, stat of
# every path. Prints one line per round with the times (s) and ratios mount/native.
# The binary: $WORLDFS_BIN, or ${CARGO_TARGET_DIR:-target}/release/worldfs.
set -euo pipefail
export LC_ALL=C
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
N=${1:-5}
T=${CARGO_TARGET_DIR:-$ROOT/target}
BIN=${WORLDFS_BIN:-$T/release/worldfs}
PARAM=/sys/module/fuse/parameters/enable_uring
[ -x "$BIN" ] || { echo "no worldfs binary at $BIN" >&2; exit 1; }
[ -d bench-work/native/tree ] || { echo "no bench-work/native/tree: run scripts/bench.sh fs first" >&2; exit 1; }
[ -w "$PARAM" ] || { echo "$PARAM is not writable (root and Linux 6.14+ needed)" >&2; exit 1; }
WAS=$(cat "$PARAM")
echo Y > "$PARAM"
mkdir -p bench-work/mnt-on bench-work/mnt-off
P1="" P2=""
cleanup() {
  umount -l bench-work/mnt-on bench-work/mnt-off 2> /dev/null || true
  [ -z "$P1" ] || wait "$P1" || true
  [ -z "$P2" ] || wait "$P2" || true
  echo "$WAS" > "$PARAM"
}
trap cleanup EXIT
"$BIN" mount bench-work/native bench-work/mnt-on --no-observe --io-uring on > bench-work/mnt-on.log 2>&1 & P1=$!
"$BIN" mount bench-work/native bench-work/mnt-off --no-observe --io-uring off > bench-work/mnt-off.log 2>&1 & P2=$!
for d in mnt-on mnt-off; do
  for _ in $(seq 50); do grep -q " $ROOT/bench-work/$d " /proc/self/mountinfo && break; sleep 0.2; done
  grep -q " $ROOT/bench-work/$d " /proc/self/mountinfo || { echo "bench-work/$d did not mount" >&2; exit 1; }
done
t() { local s; s=$(date +%s.%N); "$@"; echo "$(date +%s.%N) - $s" | bc; }
catall() { find "$1/tree" -type f -print0 | xargs -0 cat > /dev/null; }
# shellcheck disable=SC2016 # $1 expands in the inner shell
catall0() { taskset -c 0 bash -c 'find "$1/tree" -type f -print0 | xargs -0 cat > /dev/null' _ "$1"; }
grepr() { grep -r zzzzqqqq "$1/tree" > /dev/null || true; }
rgr() { rg -uuu zzzzqqqq "$1/tree" > /dev/null || true; }
statall() { find "$1/tree" -print0 | xargs -0 stat > /dev/null; }
echo "# $(date -u '+%F %T UTC') kernel $(uname -r), nproc $(nproc), load $(cut -d' ' -f1-3 /proc/loadavg)"
for w in catall catall0 grepr rgr statall; do
  command -v rg > /dev/null || [ "$w" != rgr ] || continue
  for d in native mnt-on mnt-off; do $w "bench-work/$d"; done
  for _ in $(seq "$N"); do
    a=$(t $w bench-work/native); b=$(t $w bench-work/mnt-on); c=$(t $w bench-work/mnt-off)
    echo "$w native=$a ring=$b devfuse=$c ratio_ring=$(echo "scale=2; $b/$a" | bc) ratio_devfuse=$(echo "scale=2; $c/$a" | bc) load=$(cut -d' ' -f1 /proc/loadavg)"
  done
done
