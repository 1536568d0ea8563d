# shellcheck shell=bash
# lib-mount.sh: helpers to run a worldfs mount from a script and never leave it behind.
#
#   . "$(dirname "$0")/lib-mount.sh"
#   wfs_init                      # checks /dev/fuse, builds/locates the binary, installs the exit trap
#   wfs_mount SRC [MNT] [-- ARGS] # starts `worldfs mount` in the background, waits for mountinfo
#   ...                           # use the mount
#   wfs_unmount "$WFS_MNT"         # SIGTERM, expects a clean exit 0 (non-zero return otherwise)
#
# On any exit (success, failure, Ctrl-C) the trap unmounts every mount this script started
# (SIGTERM to the daemon, then `umount -l` as a fallback) and then runs the commands
# registered with `wfs_defer`, newest first.
#
# Environment:
#   WORLDFS_BIN   binary to use (default: ${CARGO_TARGET_DIR:-<repo>/target}/release/worldfs,
#                 built with `cargo build --release` unless WFS_NO_BUILD=1)
#   WFS_VERBOSE=1 pass -v to the daemon
#   WFS_TIMEOUT   seconds to wait for a mount to appear / a daemon to exit (default 10)
#   WFS_FSTYPE    the fstype to wait for in /proc/self/mountinfo (default fuse.worldfs)
#   WFS_STATE_HOME  where mounts keep their worlds across restarts (XDG_STATE_HOME for the
#                 daemon). By default a temporary directory removed at exit, so no run starts
#                 from a world an earlier run saved (a benchmark would hash it all again).

WFS_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WFS_TIMEOUT=${WFS_TIMEOUT:-10}
WFS_PIDS=()      # daemon pids, parallel to WFS_MNTS
WFS_MNTS=()      # mount points (absolute)
WFS_LOGS=()      # daemon logs
WFS_DEFERRED=()  # cleanup commands, run newest first after unmounting
WFS_AS=()        # a prefix for the daemon's command (setpriv ...: run it as another user)
WFS_PID=""       # pid of the most recent mount's daemon
WFS_MNT=""       # mount point of the most recent mount
WFS_LOG=""       # log of the most recent mount

wfs_log() { printf '%s: %s\n' "${WFS_PROG:-$(basename "$0")}" "$*" >&2; }
wfs_die() { wfs_log "ERROR: $*"; exit 1; }

# /dev/fuse must exist and open read-write; the kernel must know the fuse file system.
# Never skips: a machine without FUSE fails the run, with the reason.
wfs_require_fuse() {
  [ -e /dev/fuse ] || wfs_die "/dev/fuse does not exist (load the fuse module or run with --device /dev/fuse)"
  [ -c /dev/fuse ] || wfs_die "/dev/fuse is not a character device"
  if ! { exec 9<>/dev/fuse; } 2>/dev/null; then
    wfs_die "/dev/fuse cannot be opened read-write by $(id -un) (uid $(id -u)): permission denied or no such device"
  fi
  exec 9>&-
  grep -qw fuse /proc/filesystems || wfs_die "the kernel does not list 'fuse' in /proc/filesystems"
  if [ "$(id -u)" != 0 ] && ! command -v fusermount3 > /dev/null; then
    wfs_die "not root and no fusermount3: cannot mount"
  fi
}

# Locate (and by default build) the worldfs binary; sets WORLDFS_BIN.
wfs_find_bin() {
  if [ -n "${WORLDFS_BIN:-}" ]; then
    [ -x "$WORLDFS_BIN" ] || wfs_die "WORLDFS_BIN=$WORLDFS_BIN is not an executable"
    return 0
  fi
  local target=${CARGO_TARGET_DIR:-$WFS_ROOT/target}
  case "$target" in /*) ;; *) target=$WFS_ROOT/$target ;; esac
  if [ "${WFS_NO_BUILD:-0}" != 1 ]; then
    wfs_log "building worldfs (cargo build --release)"
    (cd "$WFS_ROOT" && cargo build --release --quiet --bin worldfs) || wfs_die "cargo build --release failed"
  fi
  WORLDFS_BIN=$target/release/worldfs
  [ -x "$WORLDFS_BIN" ] || wfs_die "no binary at $WORLDFS_BIN (run cargo build --release)"
  export WORLDFS_BIN
}

# mountinfo escapes space, tab, newline and backslash in paths as octal.
wfs_mi_escape() { local p=$1; p=${p//\\/\\134}; p=${p// /\\040}; p=${p//$'\t'/\\011}; p=${p//$'\n'/\\012}; printf '%s' "$p"; }

# Print the fstype of the topmost mount at PATH (empty if PATH is not a mount point).
wfs_fstype_at() {
  local esc; esc=$(wfs_mi_escape "$1")
  awk -v m="$esc" '$5 == m { for (i = 7; i <= NF; i++) if ($i == "-") { t = $(i + 1); break } } END { print t }' \
    /proc/self/mountinfo
}
WFS_FSTYPE=${WFS_FSTYPE:-fuse.worldfs}
wfs_is_worldfs_mount() { [ "$(wfs_fstype_at "$1")" = "$WFS_FSTYPE" ]; }

# Print every fuse mount at or below DIR.
wfs_mounts_under() {
  local esc; esc=$(wfs_mi_escape "$1")
  awk -v d="$esc" '{ for (i = 7; i <= NF; i++) if ($i == "-") { t = $(i + 1); break } }
    t ~ /^fuse/ && ($5 == d || index($5, d "/") == 1) { print $5 }' /proc/self/mountinfo
}

# Register a cleanup command (a string, run with eval after all mounts are gone).
wfs_defer() { WFS_DEFERRED+=("$1"); }

# wfs_mount SOURCE [MOUNTPOINT] [-- EXTRA_ARGS...]
# Starts the daemon in the background (stdout+stderr to a log), waits until mountinfo shows
# fuse.worldfs at the mount point. Sets WFS_PID, WFS_MNT, WFS_LOG. Dies loudly on failure.
wfs_mount() {
  local src=$1 mnt="" args=() log pid i
  shift
  if [ $# -gt 0 ] && [ "$1" != -- ]; then mnt=$1; shift; fi
  if [ $# -gt 0 ] && [ "$1" = -- ]; then shift; args=("$@"); fi
  [ -n "${WORLDFS_BIN:-}" ] || wfs_find_bin
  [ "${WFS_VERBOSE:-0}" = 1 ] && args+=(-v)
  src=$(realpath -e "$src") || wfs_die "source $src does not exist"
  local target=$src
  if [ -n "$mnt" ]; then target=$(realpath -e "$mnt") || wfs_die "mount point $mnt does not exist"; fi
  log=$(mktemp "${TMPDIR:-/tmp}/worldfs-daemon.XXXXXX.log")
  if [ -n "$mnt" ]; then
    wfs_log "mounting $src at $target: $WORLDFS_BIN mount $src $target ${args[*]}"
    "${WFS_AS[@]}" "$WORLDFS_BIN" mount "$src" "$target" "${args[@]}" > "$log" 2>&1 &
  else
    wfs_log "mounting $src in place: $WORLDFS_BIN mount $src ${args[*]}"
    "${WFS_AS[@]}" "$WORLDFS_BIN" mount "$src" "${args[@]}" > "$log" 2>&1 &
  fi
  pid=$!
  WFS_PIDS+=("$pid") WFS_MNTS+=("$target") WFS_LOGS+=("$log")
  # shellcheck disable=SC2034  # read by the scripts that source this file
  WFS_PID=$pid WFS_MNT=$target WFS_LOG=$log
  for ((i = 0; i < WFS_TIMEOUT * 20; i++)); do
    if wfs_is_worldfs_mount "$target"; then
      wfs_log "mounted (daemon pid $pid, log $log)"
      return 0
    fi
    if ! kill -0 "$pid" 2> /dev/null; then
      local rc=0; wait "$pid" || rc=$?
      wfs_log "ERROR: worldfs exited (status $rc) before the mount appeared; its log:"
      sed 's/^/    | /' "$log" >&2
      exit 1
    fi
    sleep 0.05
  done
  local seen; seen=$(wfs_fstype_at "$target")
  wfs_log "ERROR: no $WFS_FSTYPE mount at $target after ${WFS_TIMEOUT}s${seen:+ (mountinfo shows fstype $seen there)}; daemon log:"
  sed 's/^/    | /' "$log" >&2
  exit 1
}

# Index of the latest mount at a mount point in WFS_MNTS, or nothing. The latest: a script
# that mounts at the same place again (bench.sh overhead) must stop the daemon it started last,
# not find the first, long-stopped one and return as if done.
wfs_index_of() {
  local i found=""
  for i in "${!WFS_MNTS[@]}"; do [ "${WFS_MNTS[$i]}" = "$1" ] && found=$i; done
  [ -n "$found" ] && { echo "$found"; return 0; }
  return 1
}

# wfs_unmount MOUNTPOINT: SIGTERM the daemon, wait for it; fall back to umount -l / SIGKILL.
# Returns 0 only for a clean unmount: daemon exited 0 and the mount is gone.
wfs_unmount() {
  local mnt=$1 i pid log rc=0 clean=0 idx
  idx=$(wfs_index_of "$mnt") || { wfs_log "not a mount of this script: $mnt"; return 1; }
  pid=${WFS_PIDS[$idx]} log=${WFS_LOGS[$idx]}
  [ -n "$pid" ] || return 0
  if kill -0 "$pid" 2> /dev/null; then
    kill -TERM "$pid" 2> /dev/null || true
    for ((i = 0; i < WFS_TIMEOUT * 20; i++)); do
      kill -0 "$pid" 2> /dev/null || break
      sleep 0.05
    done
    if kill -0 "$pid" 2> /dev/null; then
      wfs_log "ERROR: daemon $pid did not exit ${WFS_TIMEOUT}s after SIGTERM; lazy unmount + SIGKILL"
      umount -l "$mnt" 2> /dev/null || true
      kill -KILL "$pid" 2> /dev/null || true
      clean=1
    fi
  fi
  wait "$pid" 2> /dev/null || rc=$?
  if [ "$rc" != 0 ] && [ "$clean" = 0 ]; then
    wfs_log "ERROR: daemon $pid exited with status $rc after SIGTERM (expected 0); last log lines:"
    tail -n 20 "$log" | sed 's/^/    | /' >&2
    clean=1
  fi
  if wfs_is_worldfs_mount "$mnt"; then
    wfs_log "ERROR: $mnt still mounted after the daemon exited; umount -l"
    umount -l "$mnt" 2> /dev/null || "$WORLDFS_BIN" unmount "$mnt" || true
    clean=1
  fi
  WFS_PIDS[idx]=""
  [ "$clean" = 0 ] && { wfs_log "unmounted $mnt cleanly"; rm -f "$log"; }
  return "$clean"
}

# Exit trap: unmount everything still mounted (newest first), then run deferred commands.
wfs_cleanup() {
  local status=$? i cmd
  trap - EXIT INT TERM
  for ((i = ${#WFS_MNTS[@]} - 1; i >= 0; i--)); do
    [ -n "${WFS_PIDS[$i]}" ] || continue
    wfs_unmount "${WFS_MNTS[$i]}" || true
  done
  for ((i = ${#WFS_DEFERRED[@]} - 1; i >= 0; i--)); do
    cmd=${WFS_DEFERRED[$i]}
    eval "$cmd" || wfs_log "cleanup command failed: $cmd"
  done
  exit "$status"
}

# rm -rf DIR, but never through a mount that is still there.
wfs_rm_tree() {
  local d=$1 left
  [ -e "$d" ] || return 0
  left=$(wfs_mounts_under "$(realpath "$d")")
  if [ -n "$left" ]; then
    wfs_log "ERROR: not removing $d: still mounted: $left"
    return 1
  fi
  rm -rf "$d"
}

wfs_install_trap() {
  trap wfs_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

# Checks /dev/fuse and installs the exit trap.
wfs_init() {
  wfs_require_fuse
  wfs_install_trap
  if [ -n "${WFS_STATE_HOME:-}" ]; then
    export XDG_STATE_HOME=$WFS_STATE_HOME
  else
    XDG_STATE_HOME=$(mktemp -d "${TMPDIR:-/tmp}/worldfs-state.XXXXXX") || wfs_die "mktemp failed"
    export XDG_STATE_HOME
    wfs_defer "rm -rf '$XDG_STATE_HOME'"
  fi
}
