#!/usr/bin/env bash
# pjdfstest.sh: run pjdfstest 0.2.2 (POSIX conformance) against a live worldfs mount.
#
#   scripts/pjdfstest.sh [--native] [--inplace] [--baseline-config] [-v] [PATTERN...]
#
#   (default)          mirror mode: `worldfs mount SRC MNT`, tests run in MNT
#   --inplace          `worldfs mount SRC` over SRC itself, tests run in SRC
#   --native           no mount: run on a plain directory (the baseline)
#   --baseline-config  the configuration of the issue's baseline (native ext4: 376 passed,
#                      0 failed, 22 skipped): no rename_ctime, no secondary file system.
#                      The default additionally enables rename_ctime and the EXDEV tests
#                      (native ext4: 385 passed, 0 failed, 13 skipped; the 13 are EROFS
#                      tests, which would need to remount the file system read-only).
#   PATTERN...         only tests whose name contains a pattern (pjdfstest's filter)
#
# Source and mount point live under $WFS_WORK_BASE (default /var/tmp, ext4 here).
# Needs root (the tests switch to the dummy users nobody and tests). Creates the user and
# group `tests` if missing. Exits non-zero on any failure; prints the failing tests with
# their messages. With WFS_RESULT_FILE set, writes "PASSED FAILED SKIPPED" there.
set -euo pipefail
WFS_PROG=pjdfstest.sh
# shellcheck source=scripts/lib-mount.sh
. "$(dirname "$0")/lib-mount.sh"

PJD_VERSION=0.2.2
MODE=mirror CONFIG=strict VERBOSE=() PATTERNS=()
while [ $# -gt 0 ]; do
  case "$1" in
    --native) MODE=native ;;
    --inplace) MODE=inplace ;;
    --baseline-config) CONFIG=baseline ;;
    -v) VERBOSE=(-v) ;;
    -h|--help) sed -n '2,20s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) wfs_die "unknown option $1 (try --help)" ;;
    *) PATTERNS+=("$1") ;;
  esac
  shift
done

[ "$(id -u)" = 0 ] || wfs_die "must run as root: pjdfstest switches to the users nobody and tests"
export PATH="$HOME/.cargo/bin:$PATH"

# --- the tool, pinned ---
if ! pjdfstest --version 2> /dev/null | grep -qx "pjdfstest $PJD_VERSION"; then
  wfs_log "installing pjdfstest $PJD_VERSION (cargo install --locked)"
  cargo install --locked --quiet "pjdfstest@$PJD_VERSION" || wfs_die "cargo install pjdfstest@$PJD_VERSION failed"
fi

# --- the dummy users: nobody (with its own primary group) and tests:tests ---
getent passwd nobody > /dev/null || wfs_die "no user nobody on this machine"
NOBODY_GROUP=$(getent group "$(id -g nobody)" | cut -d: -f1)
[ -n "$NOBODY_GROUP" ] || wfs_die "the primary group of nobody ($(id -g nobody)) has no name"
if ! getent group tests > /dev/null; then
  wfs_log "creating group tests (dummy group for pjdfstest)"
  groupadd tests
fi
if ! getent passwd tests > /dev/null; then
  wfs_log "creating user tests (dummy user for pjdfstest)"
  useradd -g tests -M -d / -s /usr/sbin/nologin -c "pjdfstest dummy user" tests
fi
[ "$(id -g tests)" = "$(getent group tests | cut -d: -f3)" ] || wfs_die "user tests is not in group tests"

# --- work dirs ---
if [ "$MODE" = native ]; then wfs_install_trap; else wfs_init; fi
BASE=${WFS_WORK_BASE:-/var/tmp}
WORK=$(mktemp -d "$BASE/worldfs-pjdfstest.XXXXXX")
SFS=""
wfs_defer "wfs_rm_tree $(printf %q "$WORK")"
chmod 755 "$WORK"
FSTYPE=$(stat -f -c %T "$WORK")
[ "$FSTYPE" = ext2/ext3 ] || wfs_log "note: $BASE is $FSTYPE, not ext4: the baseline counts may differ"

CFG=$WORK/pjdfstest.toml
{
  echo "[features]"
  echo "posix_fallocate = {}"
  echo "utime_now = {}"
  echo "utimensat = {}"
  [ "$CONFIG" = strict ] && echo "rename_ctime = {}"
  echo
  echo "[settings]"
  echo "naptime = 0.01"
  echo "allow_remount = false"
  echo
  echo "[dummy_auth]"
  echo "entries = [[\"nobody\", \"$NOBODY_GROUP\"], [\"tests\", \"tests\"]]"
} > "$CFG"
SFS_ARGS=()
if [ "$CONFIG" = strict ] && [ "$(stat -f -c %T /dev/shm 2> /dev/null)" = tmpfs ]; then
  SFS=$(mktemp -d /dev/shm/worldfs-pjdfstest-sfs.XXXXXX)
  chmod 755 "$SFS"
  wfs_defer "rm -rf $(printf %q "$SFS")"
  SFS_ARGS=(-s "$SFS")
fi

case "$MODE" in
  native) mkdir "$WORK/native"; chmod 755 "$WORK/native"; TESTDIR=$WORK/native ;;
  mirror)
    mkdir "$WORK/src" "$WORK/mnt"; chmod 755 "$WORK/src" "$WORK/mnt"
    wfs_mount "$WORK/src" "$WORK/mnt"; TESTDIR=$WORK/mnt ;;
  inplace)
    mkdir "$WORK/src"; chmod 755 "$WORK/src"
    wfs_mount "$WORK/src"; TESTDIR=$WORK/src ;;
esac

LOG=$WORK/pjdfstest.log
wfs_log "pjdfstest $PJD_VERSION ($CONFIG config) in $TESTDIR (mode $MODE)"
wfs_log "config: $(grep -v '^\s*$' "$CFG" | tr '\n' ' ')"
rc=0
(cd "$TESTDIR" && NO_COLOR=1 CLICOLOR=0 timeout -k 10 "${PJD_TIMEOUT:-1200}" \
   pjdfstest -c "$CFG" -p "$TESTDIR" "${SFS_ARGS[@]}" "${VERBOSE[@]}" "${PATTERNS[@]}") > "$LOG" 2>&1 || rc=$?
sed -r 's/\x1b\[[0-9;]*m//g' -i "$LOG"
[ "$rc" = 124 ] && wfs_log "ERROR: pjdfstest timed out after ${PJD_TIMEOUT:-1200}s"

# --- report ---
SUMMARY=$(grep -E '^Summary: ' "$LOG" | tail -1 || true)
if [ -z "$SUMMARY" ]; then
  wfs_log "ERROR: pjdfstest printed no summary (exit $rc); last lines of its output:"
  tail -n 30 "$LOG" | sed 's/^/    | /' >&2
  [ -z "${WFS_RESULT_FILE:-}" ] || echo "0 1 0" > "$WFS_RESULT_FILE"
  exit 1
fi
num() { sed -nE "s/.* ([0-9]+) $1.*/\1/p" <<< "$SUMMARY"; }
PASSED=$(num passed) FAILED=$(num failed) SKIPPED=$(num skipped)
if [ "$FAILED" != 0 ]; then
  echo "--- failing tests (name, then pjdfstest's message) ---"
  # a result line is "name   ok|FAILED|skipped|..."; the lines after a FAILED one are its panic
  # message (possibly several lines) up to the next result line
  awk '/^[A-Za-z0-9_]+::[^ ]* +(ok|FAILED|skipped|failed as expected|PASSED UNEXPECTEDLY)$/ || /^Summary: / {
         show = 0; if ($NF == "FAILED") { print $1; show = 1 }; next }
       show && NF { sub(/^\t/, ""); print "    " $0 }' "$LOG"
  echo "---"
fi
[ "${#VERBOSE[@]}" = 0 ] || cat "$LOG"
echo "pjdfstest ($MODE, $CONFIG config): $SUMMARY"

if [ "$MODE" != native ]; then
  wfs_unmount "$WFS_MNT" || { wfs_log "ERROR: the mount did not unmount cleanly"; rc=1; }
fi
[ "$FAILED" = 0 ] || rc=1
[ -z "${WFS_RESULT_FILE:-}" ] || echo "$PASSED $FAILED $SKIPPED" > "$WFS_RESULT_FILE"
if [ "$rc" != 0 ]; then
  wfs_log "FAILED: $FAILED failing test(s), exit status $rc"
  exit 1
fi
wfs_log "OK: $PASSED passed, 0 failed, $SKIPPED skipped"
