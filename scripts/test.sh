#!/usr/bin/env bash
# test.sh (`make test`): every test suite, in order, even when an earlier one fails:
#   1. cargo test --all-targets --no-fail-fast  (unit and integration tests; every binary runs)
#   2. scripts/pjdfstest.sh          (pjdfstest 0.2.2 against a live mount)
#   3. scripts/fsx.sh                (fsx 0.3.2: 1 process, then 2 at once; 100k ops each; then
#                                     30k each with the daemon and fsx as `nobody`: FSX_USER_OPS)
#   4. uring: the mount suites (equivalence, staleness, crash) and one fsx process again with
#      FUSE-over-io_uring forced on (WORLDFS_IO_URING=on; fsx: FSX_URING_OPS=30000); as root it sets
#      /sys/module/fuse/parameters/enable_uring to Y for the suite and restores it after. A
#      kernel without the parameter fails the suite, loudly.
# Before the suites, as root: fuse3 is installed if fusermount3 is missing, and /dev/fuse is
# made mode 0666 for the run (restored after), as distributions ship it: the unprivileged mount
# tests run the daemon as `nobody`.
# Prints a summary per suite and, as its last line, the totals of individual tests
# ("N passed, N failed": cargo tests + pjdfstest cases + fsx processes).
# Exit status: non-zero if any suite failed.
#   SUITES="cargo pjdfstest fsx"  run only these
#   CARGO_TEST_ARGS="..."         extra arguments for cargo test (after --all-targets)
#   CARGO_TEST_TIMEOUT=900        seconds the test binaries may run (after building)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
export PATH="$HOME/.cargo/bin:$PATH"
SUITES=${SUITES:-cargo pjdfstest fsx uring}
RES=$(mktemp -d)
FUSE_MODE_WAS=
cleanup() {
  rm -rf "$RES"
  if [ -n "$FUSE_MODE_WAS" ]; then
    chmod "$FUSE_MODE_WAS" /dev/fuse || echo "test.sh: could not restore /dev/fuse to mode $FUSE_MODE_WAS" >&2
  fi
}
trap cleanup EXIT

# tests/mount_unprivileged.rs runs the daemon as `nobody`, which mounts through fusermount3
# (package fuse3) and opens /dev/fuse itself: distributions make it mode 0666, containers often
# 0600. As root, install the one and open the other for this run (restored on exit).
if [ "$(id -u)" = 0 ]; then
  if ! command -v fusermount3 > /dev/null && command -v apt-get > /dev/null; then
    echo "test.sh: installing fuse3 (fusermount3, for the unprivileged mount tests)"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -q fuse3 > /dev/null || { apt-get update -q > /dev/null && apt-get install -y -q fuse3 > /dev/null; } \
      || echo "test.sh: could not install fuse3; the unprivileged mount tests will fail" >&2
  fi
  mode=$(stat -c %a /dev/fuse 2> /dev/null || true)
  if [ -n "$mode" ] && [ "$mode" != 666 ]; then
    chmod 0666 /dev/fuse && FUSE_MODE_WAS=$mode && echo "test.sh: /dev/fuse mode $mode -> 666 for this run"
  fi
fi

TOTAL_P=0 TOTAL_F=0 SUMMARY=() STATUS=0
record() {  # NAME RC PASSED FAILED DETAIL SECONDS
  local verdict=ok
  if [ "$2" != 0 ] || [ "$4" != 0 ]; then verdict=FAILED; STATUS=1; fi
  # a suite that failed without counting any failed test still counts as one failure
  local f=$4; [ "$verdict" = ok ] || [ "$f" != 0 ] || f=1
  TOTAL_P=$((TOTAL_P + $3)) TOTAL_F=$((TOTAL_F + f))
  SUMMARY+=("$(printf '%-10s %-6s %6s passed %4s failed  %5ss  %s' "$1" "$verdict" "$3" "$f" "$6" "$5")")
}
banner() { printf '\n======== %s ========\n' "$*"; }

for suite in $SUITES; do
  t0=$SECONDS
  case "$suite" in
    cargo)
      banner "cargo test --all-targets --no-fail-fast ${CARGO_TEST_ARGS:-}"
      rc=0
      # build first (no time limit), then run under a time limit: a hung test must not hang CI
      # shellcheck disable=SC2086  # CARGO_TEST_ARGS is a word list
      cargo test --all-targets --no-fail-fast --no-run ${CARGO_TEST_ARGS:-} 2>&1 | tee "$RES/cargo.log" || rc=$?
      if [ "$rc" = 0 ]; then
        # shellcheck disable=SC2086
        timeout -k 30 "${CARGO_TEST_TIMEOUT:-900}" cargo test --all-targets --no-fail-fast ${CARGO_TEST_ARGS:-} 2>&1 | tee "$RES/cargo.log" || rc=$?
        [ "$rc" != 124 ] || echo "test.sh: cargo test timed out after ${CARGO_TEST_TIMEOUT:-900}s (a hung test?)"
      fi
      # count the per-test lines (not the per-binary totals: a binary that hangs or crashes
      # never prints its total)
      p=$(grep -cE '^test .* \.\.\. ok$' "$RES/cargo.log" || true)
      f=$(grep -cE '^test .* \.\.\. FAILED$' "$RES/cargo.log" || true)
      n=$(grep -c '^test result: ' "$RES/cargo.log" || true)
      record cargo "$rc" "$p" "$f" "$n test binaries finished" $((SECONDS - t0)) ;;
    pjdfstest)
      banner "scripts/pjdfstest.sh"
      rc=0; WFS_RESULT_FILE=$RES/pjd scripts/pjdfstest.sh || rc=$?
      read -r p f s < "$RES/pjd" 2> /dev/null || { p=0 f=0 s=0; }
      record pjdfstest "$rc" "$p" "$f" "$s skipped" $((SECONDS - t0)) ;;
    fsx)
      banner "scripts/fsx.sh"
      rc=0; WFS_RESULT_FILE=$RES/fsx scripts/fsx.sh || rc=$?
      read -r p f _ < "$RES/fsx" 2> /dev/null || { p=0 f=0; }
      # again as a user other than root: fusermount3, and every byte through the daemon
      WFS_RESULT_FILE=$RES/fsx-user FSX_OPS="${FSX_USER_OPS:-30000}" scripts/fsx.sh --user nobody || rc=$?
      read -r up uf _ < "$RES/fsx-user" 2> /dev/null || { up=0 uf=1; }
      p=$((p + up)) f=$((f + uf))
      record fsx "$rc" "$p" "$f" "fsx processes (3 as root, 3 as nobody)" $((SECONDS - t0)) ;;
    uring)
      banner "mount suites and fsx with FUSE-over-io_uring (WORLDFS_IO_URING=on)"
      param=/sys/module/fuse/parameters/enable_uring
      rc=0 p=0 f=0
      if ! was=$(cat "$param" 2> /dev/null); then
        echo "test.sh: $param is missing: this kernel has no FUSE-over-io_uring" >&2
        rc=1
      else
        [ "$was" = Y ] || echo Y > "$param" || rc=1
        if [ "$rc" = 0 ]; then
          # shellcheck disable=SC2086
          WORLDFS_IO_URING=on timeout -k 30 "${CARGO_TEST_TIMEOUT:-900}" cargo test --no-fail-fast ${CARGO_TEST_ARGS:-} \
            --test mount_equivalence --test mount_staleness --test mount_crash 2>&1 | tee "$RES/uring.log" || rc=$?
          p=$(grep -cE '^test .* \.\.\. ok$' "$RES/uring.log" || true)
          f=$(grep -cE '^test .* \.\.\. FAILED$' "$RES/uring.log" || true)
          WORLDFS_IO_URING=on WFS_RESULT_FILE=$RES/fsx-uring FSX_OPS="${FSX_URING_OPS:-30000}" scripts/fsx.sh || rc=$?
          read -r fp ff _ < "$RES/fsx-uring" 2> /dev/null || { fp=0 ff=1; }
          p=$((p + fp)) f=$((f + ff))
        fi
        [ "$was" = Y ] || echo "$was" > "$param" || echo "test.sh: could not restore $param to $was" >&2
      fi
      record uring "$rc" "$p" "$f" "mount tests + fsx, ring forced on" $((SECONDS - t0)) ;;
    *) echo "test.sh: unknown suite $suite" >&2; exit 2 ;;
  esac
done

banner "summary"
printf '%s\n' "${SUMMARY[@]}"
[ "$STATUS" = 0 ] && echo "all suites passed" || echo "SOME SUITES FAILED"
echo "$TOTAL_P passed, $TOTAL_F failed"
exit "$STATUS"
