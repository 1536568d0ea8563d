#!/usr/bin/env bash
# fsx.sh: run fsx 0.3.2 (random file I/O with verification) against a live worldfs mount.
#
#   scripts/fsx.sh [--native] [--inplace] [--user NAME] [-N OPS] [-S SEED]
#
#   (default)    mirror mode: `worldfs mount SRC MNT`, fsx files in MNT
#   --inplace    `worldfs mount SRC` over SRC itself
#   --native     no mount: a plain directory (the baseline)
#   --user NAME  the daemon and fsx run as NAME (as root only): the mount is made by fusermount3
#                and every read and write goes through the daemon, as for anyone not root
#   -N OPS       operations per fsx process (default $FSX_OPS or 100000)
#   -S SEED      seed of the first run (default $FSX_SEED or 1; the parallel runs use SEED+1,
#                SEED+2); "random" picks a random seed (printed, so a failure can be replayed)
#
# Two phases: one fsx process with OPS operations, then two fsx processes at once on two
# different files, OPS operations each. Every operation type fsx 0.3.2 has is enabled:
# read, write, mapread, mapwrite, msync(MS_INVALIDATE), truncate, close/open, fsync,
# fdatasync, posix_fallocate, punch_hole, sendfile, posix_fadvise, copy_file_range.
# (fsx 0.3.2 has no zero-range, insert-range or collapse-range operations.)
# Prints the number of each operation executed per process. Exits non-zero on any failure
# and keeps fsx's artifacts (.fsxgood, .fsxlog, full log) in a directory it names.
# With WFS_RESULT_FILE set, writes "PASSED FAILED 0" (fsx processes) there.
set -euo pipefail
export LC_ALL=C
WFS_PROG=fsx.sh
# shellcheck source=scripts/lib-mount.sh
. "$(dirname "$0")/lib-mount.sh"

FSX_VERSION=0.3.2
MODE=mirror OPS=${FSX_OPS:-100000} SEED=${FSX_SEED:-1} AS_USER=
while [ $# -gt 0 ]; do
  case "$1" in
    --native) MODE=native ;;
    --inplace) MODE=inplace ;;
    --user) AS_USER=$2; shift ;;
    -N) OPS=$2; shift ;;
    -S) SEED=$2; shift ;;
    -h|--help) sed -n '2,23s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) wfs_die "unknown argument $1 (try --help)" ;;
  esac
  shift
done
[ "$SEED" != random ] || SEED=$((RANDOM << 15 | RANDOM))
[[ "$OPS" =~ ^[0-9]+$ && "$SEED" =~ ^[0-9]+$ ]] || wfs_die "-N and -S take numbers"
export PATH="$HOME/.cargo/bin:$PATH"

if ! fsx --version 2> /dev/null | grep -qx "fsx $FSX_VERSION"; then
  wfs_log "installing fsx $FSX_VERSION (cargo install --locked)"
  cargo install --locked --quiet "fsx@$FSX_VERSION" || wfs_die "cargo install fsx@$FSX_VERSION failed"
fi

if [ "$MODE" = native ]; then wfs_install_trap; else wfs_init; fi
BASE=${WFS_WORK_BASE:-/var/tmp}
WORK=$(mktemp -d "$BASE/worldfs-fsx.XXXXXX")
wfs_defer "wfs_rm_tree $(printf %q "$WORK")"
mkdir "$WORK/src" "$WORK/logs" "$WORK/mnt"
FSX=$(command -v fsx)
AS=()  # the prefix that runs a command as --user
if [ -n "$AS_USER" ]; then
  [ "$(id -u)" = 0 ] || wfs_die "--user needs root"
  id "$AS_USER" > /dev/null 2>&1 || wfs_die "no user $AS_USER"
  AS=(setpriv --reuid="$AS_USER" --regid="$(id -g "$AS_USER")" --clear-groups --)
  # fsx lives in root's cargo home, which other users cannot enter
  cp "$FSX" "$WORK/fsx"; FSX=$WORK/fsx
  # the user's daemon keeps its world in the work directory, never in WFS_STATE_HOME's
  export XDG_STATE_HOME=$WORK/state
  mkdir "$XDG_STATE_HOME"
  chown -R "$AS_USER:$(id -g "$AS_USER")" "$WORK"
  WFS_AS=("${AS[@]}")
fi
case "$MODE" in
  native) DIR=$WORK/src ;;
  mirror) wfs_mount "$WORK/src" "$WORK/mnt"; DIR=$WORK/mnt ;;
  inplace) wfs_mount "$WORK/src"; DIR=$WORK/src ;;
esac

CFG=$WORK/fsx.toml
cat > "$CFG" << 'EOF'
# every operation type of fsx 0.3.2, weighted like its sample config, rarer ops raised
flen = 262144
nomsyncafterwrite = false
nosizechecks = false
blockmode = false
[opsize]
max = 65536
min = 0
align = 1
[weights]
close_open = 1
read = 10
write = 10
mapread = 10
mapwrite = 10
invalidate = 1
truncate = 2
fsync = 1
fdatasync = 1
posix_fallocate = 2
punch_hole = 2
sendfile = 2
posix_fadvise = 1
copy_file_range = 2
EOF

# run_fsx NAME SEED: one fsx process on DIR/NAME; log in WORK/logs/NAME.log
run_fsx() {
  local name=$1 seed=$2 art=$WORK/logs/$1.artifacts
  mkdir -p "$art"
  timeout -k 10 "${FSX_TIMEOUT:-1800}" \
    "${AS[@]}" "$FSX" -f "$CFG" -N "$OPS" -S "$seed" -P "$art" -vv "$DIR/$name" > "$WORK/logs/$name.log" 2>&1
}

# op counts from a -vv log: executed ops by name, and skipped (zero-size or past-EOF) ones
count_ops() {
  awk '$1 ~ /^\[(INFO|WARN)/ && $3 ~ /^[0-9]+$/ { op = $4; sub(/\(.*/, "", op); c[op]++; n++ }
       $1 ~ /^\[DEBUG/ && $4 == "skipping" { c["~skipped"]++ }
       END { for (k in c) print k, c[k]; print "~~total", n + 0 }' "$1"
}

FAILED_RUNS=() PASSED=0 FAILED=0
check_run() {  # NAME STATUS
  if [ "$2" = 0 ] && grep -q '^All operations completed A-OK!' "$WORK/logs/$1.log"; then
    PASSED=$((PASSED + 1))
  else
    FAILED=$((FAILED + 1)); FAILED_RUNS+=("$1")
    [ "$2" != 124 ] || wfs_log "ERROR: fsx $1 timed out after ${FSX_TIMEOUT:-1800}s"
  fi
}

START=$SECONDS
wfs_log "fsx $FSX_VERSION in $DIR (mode $MODE${AS_USER:+, as $AS_USER}): 1 process x $OPS ops (seed $SEED)"
rc=0; run_fsx single "$SEED" || rc=$?
check_run single "$rc"
T1=$((SECONDS - START))
wfs_log "fsx: 2 processes at once on different files x $OPS ops (seeds $((SEED + 1)), $((SEED + 2)))"
run_fsx par-a $((SEED + 1)) & pa=$!
run_fsx par-b $((SEED + 2)) & pb=$!
ra=0; wait "$pa" || ra=$?
rb=0; wait "$pb" || rb=$?
check_run par-a "$ra"; check_run par-b "$rb"
T2=$((SECONDS - START - T1))

echo "fsx $FSX_VERSION, mode $MODE${AS_USER:+, as $AS_USER}, $OPS ops per process; single run ${T1}s, parallel pair ${T2}s"
for r in single par-a par-b; do count_ops "$WORK/logs/$r.log" | sort > "$WORK/logs/$r.counts"; done
printf '%-20s %10s %10s %10s\n' operation single par-a par-b
join -a1 -a2 -e0 -o 0,1.2,2.2 "$WORK/logs/single.counts" "$WORK/logs/par-a.counts" |
  join -a1 -a2 -e0 -o 0,1.2,1.3,2.2 - "$WORK/logs/par-b.counts" |
  awk '{ sub(/^~~total$/, "= executed", $1); sub(/^~skipped$/, "(skipped, size 0)", $1)
         printf "%-20s %10s %10s %10s\n", $1, $2, $3, $4 }'

if [ "$MODE" != native ]; then
  wfs_unmount "$WFS_MNT" || { wfs_log "ERROR: the mount did not unmount cleanly"; FAILED=$((FAILED + 1)); FAILED_RUNS+=(unmount); }
fi
[ -z "${WFS_RESULT_FILE:-}" ] || echo "$PASSED $FAILED 0" > "$WFS_RESULT_FILE"
if [ "$FAILED" != 0 ]; then
  KEEP=$(mktemp -d "$BASE/worldfs-fsx-failure.XXXXXX")
  cp -a "$WORK/logs/." "$KEEP/"
  cp "$CFG" "$KEEP/fsx.toml"
  for r in "${FAILED_RUNS[@]}"; do
    [ -f "$WORK/logs/$r.log" ] || continue
    echo "--- fsx $r FAILED; last lines of its log ---"
    awk '/LOG DUMP/ { exit } !/^\[(DEBUG|INFO)/' "$WORK/logs/$r.log" | head -n 20
    echo "    (last operations:)"
    grep -E '^\[(INFO|WARN|ERROR) +fsx\] +[0-9]+ ' "$WORK/logs/$r.log" | tail -n 5
    grep -m1 'Using seed' "$WORK/logs/$r.log" || true
  done
  wfs_log "FAILED: ${FAILED_RUNS[*]}; logs and artifacts kept in $KEEP"
  wfs_log "replay one run: fsx -f $KEEP/fsx.toml -N $OPS -S SEED -P $KEEP -vv FILE-ON-A-MOUNT"
  echo "fsx: $PASSED passed, $FAILED failed"
  exit 1
fi
echo "fsx: $PASSED passed, 0 failed (all operations completed A-OK)"
