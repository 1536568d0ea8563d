#!/usr/bin/env bash
# bench.sh (`make bench`, `make bench-fs`, `make bench-latency`, `make bench-rss`, `make bench-socket`, `make bench-hook`,
# `make bench-proxy`)
#
#   scripts/bench.sh [all|fs|fs-user|latency|rss|socket|overhead|hook|proxy|sessions|catchup|restart|watcher|transport]...
#
#   fs       ../shared/tools/fsbench native vs a worldfs mirror mount, on
#              bench-work/native/tree   `cargo vendor` of worldfs's dependencies (10k+ files),
#                                       made a git repository with one commit
#              bench-work/native/build  a copy of this crate with its dependencies fetched
#            mounted with `worldfs mount bench-work/native bench-work/mnt`.
#   fs-user  the same tree (a copy owned by BENCH_USER=nobody, in bench-work/user), with the
#            mount and fsbench run as that user: fusermount3, daemon I/O, no file handles; no
#            build or seqread-cold workload (they need root). Not in `all`.
#   latency  external-change visibility: examples/change_latency.rs, 100 trials per mode
#            (overwrite in place, rename over), on a mirror mount of bench-work/latency/src
#   rss      daemon VmRSS/VmHWM on a synthetic 100k-file git tree (bench-work/rss/tree) after
#            mounting, after `find`, after `git status`, through a mirror mount; then after
#            `cat` of 2,000 distinct files (agent reads: 16 files per cat process, below the
#            fan-out threshold) once the socket reports them as live entries, and after one
#            projection.get (issue 3: at most 100 MB)
#   socket   projection.get latency over the socket (issue 4: p50 <= 2 ms, p99 <= 10 ms):
#            a synthetic source-like 20k-file git tree (bench-work/socket/native/tree, mirror
#            mount at bench-work/socket/mnt, --socket bench-work/socket/wfs.sock), 500 files
#            read with `cat` through the mount (checked with entries.list), then
#            examples/socket_load.rs: 16 clients call projection.get (anthropic, budget 8000)
#            back to back for SOCKET_SECS, first on an idle mount, then while fsbench's tree
#            workloads run in a loop on the mount; for comparison, one client alone and
#            goal.get (the socket round trip alone), SOCKET_SECS/3 each, in both conditions.
#            Latency is until the whole response line has arrived; each client then parses
#            the response, timed apart (parse mean; call p50/p99 include it)
#   hook     what `worldfs hook` adds to each Claude Code tool call: HOOK_EVENTS PostToolUse
#            events (a Read of 20 lines) piped one by one into `worldfs hook` against a mirror
#            mount of bench-work/hook/src, against `worldfs --version` (starting the binary
#            alone), alternately, and the PreToolUse and PostToolUse of as many Bash calls (a
#            `cat` through the mount in between), and as many TodoWrite calls (a plan of five
#            items, told to the structured state). Then a long session: HOOK_COMMANDS (2000)
#            distinct Bash calls printing 10 KB each, and projection.get latency and the
#            daemon's RSS after them. Not in `all`.
#   proxy    what `worldfs proxy` adds to each Claude Code model call, and what reaches the API:
#            PROXY_TURNS Read calls on a mirror mount of 40 generated modules (every fifth
#            also edits a file read before), each followed by the whole request posted through
#            the proxy and straight to a stand-in API (scripts/stand-in-api.py), alternately
#            (scripts/bench-proxy.py). Not in `all`.
#   proxy-codex  the same for Codex's calls (the Responses API): PROXY_TURNS `exec_command`
#            calls of `cat`, told by Codex-shaped hook events, posted to /v1/responses. Not in
#            `all`.
#   sessions two Claude Code sessions on one mount (scripts/bench-sessions.py): each reads its
#            own SESSIONS_FILES (6) generated modules in turn, SESSIONS_STEPS (24) times; then what each session's projection shows of its
#            own modules and of the other's, and its tokens. SESSIONS_OLD_BIN runs an earlier
#            build on the same scenario first (SESSIONS_OLD_LABEL names it). Not in `all`.
#   catchup  how long the world takes to take in bulk changes: CATCHUP_FILES files created
#            through a mirror mount of bench-work/catchup/src (a shell loop, as the agent),
#            timed until every new entry is hashed, with the ingest thread's CPU time; an
#            `rm -rf` through the mount of a tree of CATCHUP_FILES/20 directories with three
#            files each; then CATCHUP_SAVES atomic saves through the mount (write save.tmp, rename
#            it onto save.txt; timed until a file written after them is a live entry: the
#            world takes observations in order), then one `rm -rf` of all the files behind
#            the mount (timed until no entry is live). Not in `all`.
#   overhead observation on vs off (issue 3: within 5%): two copies of
#            bench-work/native/tree (bench-work/ovh/srcA, srcB), mirror-mounted at
#            bench-work/ovh/a and bench-work/ovh/b; fsbench runs twice on them, first with
#            B observing (A --no-observe), then with A observing, and the overhead per
#            workload is sqrt(r1/r2) of the two median pair ratios, which cancels whatever
#            favours one side (position in fsbench's pairs, disk layout). Not in `all`.
#   watcher  fanotify against inotify (`--watcher`), alternating, WATCH_ROUNDS=5 times, on a
#            mirror mount of a tree of WATCH_DIRS=20000 directories (bench-work/watcher/src):
#            the time to set the watch (once with the page cache dropped first, as after a
#            reboot; then warm) and the inotify watches held; the daemon's CPU time
#            while WATCH_FILES=5000 files are created and removed outside SOURCE on the same
#            file system; change visibility (change_latency, first round). Not in `all`.
#   transport FUSE-over-io_uring against /dev/fuse (`--io-uring auto` and `off`, the
#            parameter set to Y for the run as in every part), alternating,
#            TRANSPORT_ROUNDS=5 times: a warm `grep -rIl` of the fsbench tree through a
#            mirror mount of bench-work/native (fsbench's `grep` command), and
#            TRANSPORT_FILES=3000 small files created by a shell loop (fsbench's `smallfiles`)
#            through a mirror mount of a tmpfs (so ext4's allocator is out of it); the same
#            natively. Not in `all`.
#
# Each part appends a dated section (machine, commit, exact commands, results) to
# BENCHMARKS.md. Environment:
#   BENCH_RUNS=5          fsbench timed runs per side (-n)
#   FSBENCH_ARGS="..."    extra fsbench options (e.g. "-w find,stat -W 0")
#   LATENCY_TRIALS=100    trials per latency mode
#   RSS_FILES=100000      files in the rss tree
#   RSS_OBSERVED=2000     files the rss part reads as the agent
#   SOCKET_FILES=20000    files in the socket tree
#   SOCKET_OBSERVED=500   files the socket part reads as the agent
#   SOCKET_CLIENTS=16     concurrent socket clients
#   SOCKET_SECS=30        seconds of each 16-client projection.get phase (the one-client and
#                         goal.get phases: a third of it)
#   SOCKET_LOAD=fsbench   load on the mount: `fsbench` (fsbench -n 1 -W 0 -w SOCKET_WORKLOADS
#                         bench-work/socket/native bench-work/socket/mnt, in a loop; it
#                         alternates the native and the mount side) or `loop` (find, grep -r
#                         and cat of every file, through the mount only, in a loop)
#   SOCKET_WORKLOADS=find,stat,lsR,grep,rg,catall,gitstatus
#   SOCKET_NO_PARSE=1     clients do not parse responses (socket_load --no-parse: they only
#                         check the line answers their id with a result, as a harness that
#                         forwards the bytes would)
#   CATCHUP_FILES=20000   files the catchup part creates through the mount
#   CATCHUP_SAVES=3000    atomic saves the catchup part makes through the mount
#   OVH_RUNS=7            fsbench timed runs per side in the overhead part
#   OVH_WORKLOADS=grep,rg,catall,stat,find,lsR,gitstatus,smallfiles,rmtree
#   BENCH_NO_RECORD=1     print only, do not touch BENCHMARKS.md
#   WORLDFS_MOUNT_ARGS    extra arguments for `worldfs mount` (e.g. "--io daemon")
#   BENCH_IO_URING=1      as root, set /sys/module/fuse/parameters/enable_uring to Y for the
#                         run (0: N, to measure /dev/fuse) and restore its value on exit;
#                         worldfs itself never changes it (README, "Speed")
set -euo pipefail
export LC_ALL=C
WFS_PROG=bench.sh
# shellcheck source=scripts/lib-mount.sh
. "$(dirname "$0")/lib-mount.sh"

PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(all)
for p in "${PARTS[@]}"; do
  case "$p" in
    all) PARTS=(fs latency rss socket); break ;;
    fs|fs-user|latency|rss|socket|overhead|hook|proxy|proxy-codex|sessions|catchup|restart|watcher|transport) ;;
    -h|--help) sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) wfs_die "unknown part $p (all, fs, fs-user, latency, rss, socket, overhead, hook, proxy, proxy-codex, sessions, catchup, restart, watcher, transport)" ;;
  esac
done

wfs_init
# on any exit, stop the socket part's background load before the trap takes the mounts down
# (errexit off first: `(exit "$s")` hands the status on, and under `set -e` a failed run ended
# the trap right there, before the cleanup, leaving its mounts behind)
bench_exit() { local s=$?; set +e; [ -z "${LOAD_PID:-}" ] || stop_load; (exit "$s"); wfs_cleanup; }
trap bench_exit EXIT
wfs_find_bin

# FUSE-over-io_uring is off by default in the kernel; benchmarks measure the configuration we
# recommend, so turn it on for the run, and put the machine back as it was afterwards.
URING_PARAM=/sys/module/fuse/parameters/enable_uring
URING_WANT=$([ "${BENCH_IO_URING:-1}" = 0 ] && echo N || echo Y)
if [ -w "$URING_PARAM" ]; then
  URING_WAS=$(cat "$URING_PARAM")
  if [ "$URING_WAS" != "$URING_WANT" ]; then
    echo "$URING_WANT" > "$URING_PARAM" || wfs_die "cannot write $URING_PARAM"
    wfs_defer "echo $URING_WAS > $URING_PARAM"
    wfs_log "set $URING_PARAM to $URING_WANT for this run (was $URING_WAS; restored on exit)"
  fi
elif [ -e "$URING_PARAM" ]; then
  wfs_log "note: $URING_PARAM is $(cat "$URING_PARAM") and not writable here; measuring as is"
fi
uring_state() { cat "$URING_PARAM" 2> /dev/null || echo "absent (kernel without FUSE-over-io_uring)"; }
cd "$WFS_ROOT"
BW=$WFS_ROOT/bench-work
MD=$WFS_ROOT/BENCHMARKS.md
SHARED=${SHARED_DIR:-$WFS_ROOT/../shared}
FSBENCH=${FSBENCH:-$SHARED/tools/fsbench}
RUNS=${BENCH_RUNS:-5}
read -r -a MOUNT_ARGS <<< "${WORLDFS_MOUNT_ARGS:-}"
mkdir -p "$BW"
export PATH="$HOME/.cargo/bin:$PATH"

# ---------- machine and revision ----------
commit() {  # BENCHMARKS.md aside: the parts append to it (and a section is being written)
  local c
  c=$(git -C "$WFS_ROOT" rev-parse --short HEAD 2> /dev/null) || { echo "(no commit yet)"; return; }
  if [ -n "$(git -C "$WFS_ROOT" status --porcelain --untracked-files=no -- . ':!BENCHMARKS.md' 2> /dev/null)" ]; then
    c="$c+uncommitted changes"
  fi
  echo "$c"
}
machine() {
  local cpu mem fs
  cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
  mem=$(awk '/^MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
  fs=$(findmnt -no FSTYPE,SOURCE -T "$BW" 2> /dev/null | tr -s ' ' || stat -f -c %T "$BW")
  echo "nproc $(nproc), ${cpu:-unknown cpu}, $mem RAM, kernel $(uname -r), bench-work on ${fs}, ulimit -n $(ulimit -n)"
}
MOUNT_DESC="worldfs mount SOURCE MOUNTPOINT${MOUNT_ARGS[*]:+ ${MOUNT_ARGS[*]}} (mirror mode), release build"
md_header() {  # TITLE
  {
    echo
    echo "## $1: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    echo "- machine: $(machine); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg) (the numbers assume an otherwise idle machine)"
    echo "- worldfs: commit $(commit); \`$MOUNT_DESC\`; enable_uring: $(uring_state) (transport: io_uring when Y, /dev/fuse when N)"
  } | record
}
# A command line as BENCHMARKS.md shows it: paths relative to the repository and ../shared.
shown_cmd() {
  local s="$*"
  s=${s//$WFS_ROOT\//}
  printf '%s' "${s//$SHARED\//..\/shared\/}"
}
record() { if [ "${BENCH_NO_RECORD:-0}" = 1 ]; then cat > /dev/null; else cat >> "$MD"; fi; }
ensure_md() {
  [ "${BENCH_NO_RECORD:-0}" = 1 ] || [ -f "$MD" ] || printf '# worldfs benchmarks\n\nAppended by make bench (scripts/bench.sh).\n' > "$MD"
}
ensure_md

# ---------- fs: fsbench ----------
ensure_tree() {  # NATIVE/tree: cargo vendor of our dependencies, one git commit
  local tree=$1/tree want have
  want=$(sha256sum Cargo.lock | cut -c1-16)
  have=$(cat "$1/.tree-ready" 2> /dev/null || true)
  if [ "$want" = "$have" ] && [ -d "$tree/.git" ]; then return 0; fi
  wfs_log "creating $tree: cargo vendor of worldfs's dependencies, as a git repository"
  rm -rf "$tree" "$1/.tree-ready"
  mkdir -p "$tree"
  cargo vendor --locked --versioned-dirs --quiet "$tree/vendor" > /dev/null || wfs_die "cargo vendor failed"
  cp Cargo.toml Cargo.lock "$tree/"
  printf '# bench tree\n\nThe vendored dependencies of worldfs (cargo vendor), for fsbench.\n' > "$tree/README.md"
  git -C "$tree" init -q
  git -C "$tree" add -A
  # Packed here, before anything is timed: left to itself, the commit starts `git gc --auto`
  # in the background, which was still packing while fsbench's first workloads ran (it counted
  # 34,773 files in a tree that holds 16,566 once packed, and the machine was busy).
  git -C "$tree" -c user.name=bench -c user.email=bench@localhost -c commit.gpgsign=false \
    -c gc.auto=0 commit -q -m "vendored dependencies of worldfs"
  git -C "$tree" gc -q
  echo "$want" > "$1/.tree-ready"
}
ensure_build() {  # NATIVE/build: a copy of this crate, dependencies fetched
  local b=$1/build d
  rm -rf "$b"; mkdir -p "$b"
  cp Cargo.toml Cargo.lock "$b/"
  # vendor/: the patched fuser ([patch.crates-io] in Cargo.toml)
  for d in src build.rs examples tests benches vendor; do [ -e "$d" ] && cp -a "$d" "$b/"; done
  # stand-alone: never part of an enclosing workspace
  grep -q '^\[workspace\]' "$b/Cargo.toml" || printf '\n[workspace]\n' >> "$b/Cargo.toml"
  cargo fetch --locked --quiet --manifest-path "$b/Cargo.toml" || wfs_die "cargo fetch failed"
}
ensure_rg() {
  command -v rg > /dev/null && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get > /dev/null; then
    wfs_log "installing ripgrep (for fsbench's rg workload)"
    { apt-get install -y -q ripgrep || { apt-get update -q && apt-get install -y -q ripgrep; }; } > /dev/null 2>&1 || true
  fi
  command -v rg > /dev/null || wfs_log "note: rg not available; fsbench will skip its rg workload"
}

# target and best peer (passthrough_hp 3.18; the issue's "best peer" column), mount/native
target_of() {
  case "$1" in
    seqwrite) echo "1.2 1.30" ;; seqwrite-fsync) echo "1.3 1.42" ;;
    seqread-warm) echo "1.05 1.04" ;; seqread-fusecold) echo "1.05 0.95" ;;
    smallfiles) echo "- 1.7" ;; rmtree) echo "3 7.1" ;;
    find) echo "1.5 2.2" ;; stat) echo "1.3 1.4" ;; lsR) echo "1.5 8.6" ;;
    grep) echo "3 9.2" ;; rg) echo "3 8.7" ;; catall) echo "2.5 5.4" ;;
    gitstatus) echo "1.3 1.6" ;; build) echo "1.15 1.2" ;;
    *) echo "- -" ;;
  esac
}

bench_fs() {
  [ -x "$FSBENCH" ] || wfs_die "fsbench not found at $FSBENCH (set SHARED_DIR or FSBENCH)"
  local native=$BW/native mnt=$BW/mnt files
  mkdir -p "$native" "$mnt"
  ensure_tree "$native"
  ensure_build "$native"
  ensure_rg
  files=$(git -C "$native/tree" ls-files | wc -l)
  [ "$files" -ge 10000 ] || wfs_log "WARNING: the bench tree has only $files files (< 10000)"
  wfs_mount "$native" "$mnt" -- "${MOUNT_ARGS[@]}"
  fsbench_report "fsbench, native vs worldfs" "$BW/fsbench.out" "$native" "$mnt" \
    "tree: bench-work/native/tree, $files files in git (cargo vendor of worldfs's dependencies, one commit); build: a copy of worldfs, dependencies fetched" \
    "$FSBENCH" -n "$RUNS" -l "worldfs $(commit)" -r "$BW/fsbench-raw.tsv"
}

# fsbench_report TITLE OUT NATIVE MNT NOTE CMD...: runs CMD (fsbench and its options) with
# FSBENCH_ARGS, NATIVE and MNT (mounted) appended, unmounts MNT, and records the section: per
# workload the ratio against its target and the best peer.
fsbench_report() {
  local title=$1 out=$2 native=$3 mnt=$4 note=$5 t0=$SECONDS rc=0 shown extra=()
  shift 5
  read -r -a extra <<< "${FSBENCH_ARGS:-}"
  set -- "$@" "${extra[@]}" "$native" "$mnt"
  wfs_log "running: $*"
  "$@" 2>&1 | tee "$out" || rc=$?
  wfs_unmount "$mnt" || wfs_log "WARNING: the mount did not unmount cleanly"
  [ "$rc" = 0 ] || wfs_log "WARNING: fsbench exited with status $rc"

  md_header "$title"
  shown=$(shown_cmd "$@")
  {
    echo "- $note"
    echo "- command (in the repository root, $((SECONDS - t0)) s): \`$shown\`"
    echo "- ratio = mount/native median time; target and best peer (libfuse 3.18 passthrough_hp) from issue 2 and ../shared/notes/fuse.md"
    echo
    echo "| workload | native s | mount s | ratio | pair ratios median [min-max] | target | best peer | meets target |"
    echo "|---|---|---|---|---|---|---|---|"
    awk '/^workload / { on = 1; next } on && NF >= 4 && $1 !~ /^#/ { print }' "$out" | while read -r w n m r rest; do
      read -r tgt peer <<< "$(target_of "$w")"
      local ok=-
      if [ "$tgt" != - ] && [[ "$r" =~ ^[0-9.]+$ ]]; then
        ok=$(awk -v r="$r" -v t="$tgt" 'BEGIN { print (r <= t ? "yes" : "**no**") }')
      fi
      [ "$tgt" = - ] || tgt="<= $tgt"
      echo "| $w | $n | $m | $r | $rest | $tgt | $peer | $ok |"
    done
    echo
    echo "<details><summary>fsbench output</summary>"
    echo
    echo '```'
    cat "$out"
    echo '```'
    echo "</details>"
  } | record
}

# ---------- fs-user: the same, with the daemon and fsbench run by a user other than root ----------
# What most people get: fusermount3 mounts, every read and write goes through the daemon (no
# kernel passthrough), and without file handles the inode store reaches files by descriptors
# while a share of the open-file limit lasts, and by name beyond.
bench_fs_user() {
  [ -x "$FSBENCH" ] || wfs_die "fsbench not found at $FSBENCH (set SHARED_DIR or FSBENCH)"
  local user=${BENCH_USER:-nobody} gid base=$BW/user files mode
  [ "$(id -u)" = 0 ] || wfs_die "fs-user needs root: it runs the mount and fsbench as $user"
  id "$user" > /dev/null 2>&1 || wfs_die "no user $user (BENCH_USER)"
  command -v fusermount3 > /dev/null || wfs_die "fusermount3 is missing (apt-get install fuse3)"
  gid=$(id -g "$user")
  ensure_tree "$BW/native"
  ensure_rg
  # the user's own copy of the tree, made again when the tree is
  if [ "$(cat "$base/.copied" 2> /dev/null)" != "$(cat "$BW/native/.tree-ready")" ]; then
    wfs_log "copying the bench tree for $user to $base/native/tree"
    rm -rf "$base"
    mkdir -p "$base/native" "$base/mnt" "$base/home"
    cp -a "$BW/native/tree" "$base/native/tree"
    cp "$BW/native/.tree-ready" "$base/.copied"
    chown -R "$user:$gid" "$base"
  fi
  mode=$(stat -c %a /dev/fuse)
  if [ "$mode" != 666 ]; then
    chmod 0666 /dev/fuse
    wfs_defer "chmod $mode /dev/fuse"
    wfs_log "/dev/fuse mode $mode -> 666 for this run, as distributions ship it (restored on exit)"
  fi
  # the user's daemon keeps its world apart, never in WFS_STATE_HOME's
  export XDG_STATE_HOME=$base/state
  rm -rf "$XDG_STATE_HOME"
  mkdir "$XDG_STATE_HOME"
  chown "$user:$gid" "$XDG_STATE_HOME"
  files=$(git -c safe.directory='*' -C "$base/native/tree" ls-files | wc -l)
  local as=(setpriv --reuid="$user" --regid="$gid" --clear-groups -- env HOME="$base/home")
  WFS_AS=("${as[@]}")
  wfs_mount "$base/native" "$base/mnt" -- "${MOUNT_ARGS[@]}"
  WFS_AS=()
  # build: cargo and its registry live in root's home; seqread-cold drops caches (root only)
  fsbench_report "fsbench as $user (fusermount3, daemon I/O), native vs worldfs" "$base/fsbench.out" \
    "$base/native" "$base/mnt" \
    "tree: bench-work/user/native/tree, $user's copy of bench-work/native/tree ($files files in git); the mount and fsbench run as $user, so the mount is made by fusermount3 and reads and writes go through the daemon; the targets are issue 2's, which are for root" \
    "${as[@]}" "$FSBENCH" --no-drop -x build -n "$RUNS" -l "worldfs $(commit), as $user"
}

# ---------- latency ----------
bench_latency() {
  local trials=${LATENCY_TRIALS:-100} lat=$BW/latency bin out
  wfs_log "building examples/change_latency.rs"
  cargo build --release --quiet --example change_latency || wfs_die "cannot build the change_latency example"
  bin=${CARGO_TARGET_DIR:-$WFS_ROOT/target}/release/examples/change_latency
  rm -rf "$lat"; mkdir -p "$lat/src" "$lat/mnt"
  wfs_mount "$lat/src" "$lat/mnt" -- "${MOUNT_ARGS[@]}"
  out=$lat/out
  : > "$out"
  local mode
  for mode in overwrite rename append; do
    wfs_log "change latency, mode $mode, $trials trials"
    "$bin" "$lat/src" "$lat/mnt" --trials "$trials" --mode "$mode" | tee -a "$out" || wfs_log "WARNING: change_latency failed ($mode)"
  done
  wfs_unmount "$lat/mnt" || wfs_log "WARNING: the mount did not unmount cleanly"
  md_header "external-change visibility latency"
  {
    echo "- command: \`target/release/examples/change_latency bench-work/latency/src bench-work/latency/mnt --trials $trials --mode MODE\`"
    echo "- each trial writes a new value to a file in SOURCE (behind the mount), then polls the file through the mount (every 0.25 ms) until the new content is read; 20 ms between trials; the target is <= 100 ms"
    echo
    echo "| mode | trials | seen | timeouts (5 s) | median ms | p90 ms | max ms | within 100 ms |"
    echo "|---|---|---|---|---|---|---|---|"
    sed -nE 's/^change_latency: mode=([a-z]+) trials=([0-9]+) seen=([0-9]+) timeouts=([0-9]+) timeout_ms=[0-9]+ min_ms=[^ ]+ median_ms=([^ ]+) p90_ms=([^ ]+) max_ms=([^ ]+) within_100ms=([0-9]+)/| \1 | \2 | \3 | \4 | \5 | \6 | \7 | \8 |/p' "$out"
  } | record
}

# ---------- hook ----------
bench_hook() {
  local n=${HOOK_EVENTS:-200} dir=$BW/hook out
  rm -rf "$dir"; mkdir -p "$dir/src" "$dir/mnt"
  seq 1 200 > "$dir/src/f.txt"
  wfs_mount "$dir/src" "$dir/mnt" -- "${MOUNT_ARGS[@]}"
  cat "$dir/mnt/f.txt" > /dev/null
  out=$(python3 - "$WORLDFS_BIN" "$dir/mnt" "$n" "$WFS_PID" "${HOOK_COMMANDS:-2000}" << 'PY'
import json, statistics, subprocess, sys, time
bin, mnt, n, daemon, many = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
path = mnt + "/f.txt"
def event(i):
    return json.dumps({"hook_event_name": "PostToolUse", "cwd": mnt, "tool_name": "Read",
        "tool_use_id": "toolu_bench_%d" % i,
        "tool_input": {"file_path": path, "offset": 10, "limit": 20},
        "tool_response": {"type": "text", "file": {"filePath": path,
            "content": "\n".join(str(x) for x in range(10, 30)), "numLines": 20,
            "startLine": 10, "totalLines": 200}}}).encode()
def bash_event(name, i):
    ev = {"hook_event_name": name, "cwd": mnt, "tool_name": "Bash",
          "tool_use_id": "toolu_bench_bash_%d" % i,
          "tool_input": {"command": "cat f.txt | wc -l", "description": "count"}}
    if name == "PostToolUse":
        ev["tool_response"] = {"stdout": "200", "stderr": "", "interrupted": False,
                               "isImage": False}
    return json.dumps(ev).encode()
def todo_event(i):
    # A plan of five items, one more done each time.
    todos = [{"content": "step %d of the plan" % k, "activeForm": "doing step %d" % k,
              "status": "completed" if k < i % 5 else "in_progress" if k == i % 5 else "pending"}
             for k in range(5)]
    return json.dumps({"hook_event_name": "PostToolUse", "cwd": mnt, "tool_name": "TodoWrite",
        "tool_use_id": "toolu_bench_todo_%d" % i, "tool_input": {"todos": todos},
        "tool_response": {"oldTodos": [], "newTodos": todos}}).encode()
def timed(args, **kw):
    t = time.perf_counter()
    subprocess.run(args, check=True, **kw)
    return (time.perf_counter() - t) * 1000
hook, start, pre, post, todo = [], [], [], [], []
for i in range(n):
    hook.append(timed([bin, "hook"], input=event(i)))
    start.append(timed([bin, "--version"], capture_output=True))
    # A Bash call: begun, run through the mount (not timed), its output cached.
    pre.append(timed([bin, "hook"], input=bash_event("PreToolUse", i)))
    subprocess.run(["cat", path], capture_output=True, check=True)
    post.append(timed([bin, "hook"], input=bash_event("PostToolUse", i)))
    todo.append(timed([bin, "hook"], input=todo_event(i)))
stats = json.loads(subprocess.run([bin, "ctl", "stats"], cwd=mnt, capture_output=True,
                                  check=True).stdout)
turn = stats["world"]["turn"]
def row(name, a):
    a = sorted(a)
    return "| %s | %d | %.1f | %.1f | %.1f |" % (name, len(a), statistics.median(a),
                                                a[max(0, int(0.9 * len(a)) - 1)], a[-1])
print(row("`worldfs hook` (PostToolUse, a Read)", hook))
print(row("`worldfs hook` (PreToolUse, a Bash call)", pre))
print(row("`worldfs hook` (PostToolUse, a Bash call: step and output)", post))
print(row("`worldfs hook` (PostToolUse, a TodoWrite: step and task list)", todo))
print(row("`worldfs --version` (starting the binary)", start))
print("turns recorded: %d of %d" % (turn, 3 * n))
print("Bash outputs cached: %d (one command, recorded %d times)" % (stats["commands_cached"], n))
# A long session: `many` distinct Bash commands, each printing 10 KB, through the hook as
# Claude Code runs it; then what a projection costs and what the daemon holds.
import random, socket
random.seed(1)
words = ["".join(random.choice("abcdefghij") for _ in range(6)) for _ in range(500)]
for i in range(many):
    subprocess.run([bin, "hook"], input=bash_event("PreToolUse", n + i), check=True)
    subprocess.run(["cat", path], capture_output=True, check=True)
    ev = json.loads(bash_event("PostToolUse", n + i))
    ev["tool_input"]["command"] = "cat f.txt # run %d" % i
    ev["tool_response"]["stdout"] = " ".join(random.choice(words) for _ in range(1430))
    subprocess.run([bin, "hook"], input=json.dumps(ev).encode(), check=True)
sock = socket.socket(socket.AF_UNIX)
sock.connect(json.loads(subprocess.run([bin, "ctl", "stats"], cwd=mnt, capture_output=True,
                                       check=True).stdout)["root"]["socket"])
f = sock.makefile("rw")
def call(method, params):
    f.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}) + "\n")
    f.flush()
    return json.loads(f.readline())["result"]
ms = []
for j in range(21):
    t = time.perf_counter()
    call("projection.get", {"format": "anthropic", "budget": 8000 + j})  # a new render each
    ms.append((time.perf_counter() - t) * 1000)
stats = call("stats", {})
rss = [l.split()[1] for l in open("/proc/%s/status" % daemon) if l.startswith("VmRSS")][0]
print("long session: %d distinct Bash outputs of 10 KB recorded; %d kept, %d dropped for room; "
      "projection.get (anthropic, 8000 tokens, a new render each): first %.0f ms, median of "
      "the next 20 %.1f ms; daemon VmRSS %d MiB" % (many, stats["commands_cached"],
      stats["drops"]["commands_for_room"], ms[0], statistics.median(ms[1:]), int(rss) // 1024))
PY
) || wfs_die "the hook benchmark failed"
  wfs_unmount "$dir/mnt" || wfs_log "WARNING: the mount did not unmount cleanly"
  echo "$out"
  md_header "worldfs hook, time per event"
  {
    echo "- command: \`scripts/bench.sh hook\` (\`make bench-hook\`), HOOK_EVENTS=$n; each event piped into a new \`worldfs hook\` process, as Claude Code runs it, against a mirror mount"
    echo
    echo "| run | events | median ms | p90 ms | max ms |"
    echo "|---|---|---|---|---|"
    echo "$out" | grep '^|'
    echo
    echo "$out" | grep -E '^(turns|Bash|long session)' | sed 's/^/- /'
  } | record
}

# ---------- sessions ----------
# Two sessions on one mount, each reading its own modules; what each one's projection shows.
# SESSIONS_OLD_BIN: an earlier build, run on the same scenario first, for a side-by-side row.
bench_sessions() {
  local steps=${SESSIONS_STEPS:-24} budget=${SESSIONS_BUDGET:-8000} files=${SESSIONS_FILES:-6}
  local dir=$BW/sessions out="" bin label
  local bins=("$WORLDFS_BIN") labels=("$(commit)")
  if [ -n "${SESSIONS_OLD_BIN:-}" ]; then
    bins=("$SESSIONS_OLD_BIN" "$WORLDFS_BIN")
    labels=("${SESSIONS_OLD_LABEL:-SESSIONS_OLD_BIN}" "$(commit)")
  fi
  for i in "${!bins[@]}"; do
    bin=${bins[$i]} label=${labels[$i]}
    rm -rf "$dir"; mkdir -p "$dir/src" "$dir/mnt"
    gen_modules "$dir/src"
    WORLDFS_BIN=$bin wfs_mount "$dir/src" "$dir/mnt" -- "${MOUNT_ARGS[@]}"
    out+=$(python3 "$WFS_ROOT/scripts/bench-sessions.py" "$bin" "$dir/mnt" "$label" "$steps" "$budget" "$files") \
      || wfs_die "the sessions benchmark failed ($bin)"
    out+=$'\n'
    wfs_unmount "$dir/mnt" || wfs_log "WARNING: the mount did not unmount cleanly"
  done
  echo "$out"
  md_header "two sessions on one mount, what each session's projection shows"
  {
    echo "- command: \`scripts/bench.sh sessions\` (\`make bench-sessions\`), SESSIONS_STEPS=$steps, SESSIONS_BUDGET=$budget, SESSIONS_FILES=$files${SESSIONS_OLD_BIN:+, SESSIONS_OLD_BIN=$(shown_cmd "$SESSIONS_OLD_BIN")}; on a mirror mount of 40 generated modules (about 870 tokens each), session s1 reads modules 1-$files and session s2 modules 21-$((20 + files)) with Claude Code's Read tool, one module each in turn, $steps times (\`worldfs hook\` told of each call, as Claude Code runs it); then each session's projection as \`worldfs proxy\` asks for it (anthropic, its session, no last step)"
    echo
    echo "| build | session | tokens | its own modules shown | the other session's modules shown |"
    echo "|---|---|---|---|---|"
    echo "$out" | grep '^| '
  } | record
}

# ---------- catchup ----------
bench_catchup() {
  local n=${CATCHUP_FILES:-20000} saves=${CATCHUP_SAVES:-3000} dir=$BW/catchup out
  rm -rf "$dir"; mkdir -p "$dir/src/d" "$dir/mnt"
  wfs_mount "$dir/src" "$dir/mnt" -- "${MOUNT_ARGS[@]}"
  local pid ingest0 t0 t1
  pid=$(cd "$dir/mnt" && "$WORLDFS_BIN" ctl stats | python3 -c 'import json, sys; print(json.load(sys.stdin)["pid"])')
  # the ingest thread's CPU time so far, in clock ticks (utime + stime)
  ingest0=$(for t in /proc/"$pid"/task/*; do
    if [ "$(cat "$t/comm")" = worldfs-ingest ]; then awk '{sub(/.*\) /, ""); print $12 + $13}' "$t/stat"; fi
  done)
  wfs_log "creating $n files through the mount"
  t0=$(date +%s.%N)
  (cd "$dir/mnt" && for ((i = 0; i < n; i++)); do printf x > "d/f$i"; done)
  t1=$(date +%s.%N)
  out=$(python3 - "$WORLDFS_BIN" "$dir" "$n" "$saves" "$pid" "$ingest0" "$t0" "$t1" << 'PY'
import json, os, shutil, subprocess, sys, time
bin, dir, n, saves = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
pid, ingest0, t0, t1 = int(sys.argv[5]), int(sys.argv[6]), float(sys.argv[7]), float(sys.argv[8])
mnt = dir + "/mnt"
def ctl(method, params=None):
    args = [bin, "ctl", method] + ([json.dumps(params)] if params else [])
    return json.loads(subprocess.run(args, cwd=mnt, capture_output=True, check=True).stdout)
def ingest_ticks():
    """CPU time of the daemon's ingest thread so far, in clock ticks."""
    total = 0
    for t in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/comm" % (pid, t)) as f:
            if f.read().strip() != "worldfs-ingest":
                continue
        with open("/proc/%d/task/%s/stat" % (pid, t)) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total
def live(prefix):
    return ctl("entries.list", {"prefix": prefix, "state": "live", "limit": 1})["total"]
def until(cond, what, limit=600):
    t = time.perf_counter()
    while not cond():
        if time.perf_counter() - t > limit:
            sys.exit("the world did not catch up with %s within %d s" % (what, limit))
        time.sleep(0.02)
def save_repeatedly(root):
    """An editor's atomic saves of save.txt in root; returns when the loop started."""
    t = time.perf_counter()
    for i in range(saves):
        with open(root + "/save.tmp", "w") as f:
            f.write("version %d\n" % i)
        os.rename(root + "/save.tmp", root + "/save.txt")
    return t
# The new files are hashed and counted when the ingest thread is idle: until no entry is stale.
until(lambda: ctl("stats")["world"]["stale_entries"] == 0, "hashing the new files")
cpu = (ingest_ticks() - ingest0) / os.sysconf("SC_CLK_TCK")
print("| %d files created through the mount (ingest thread CPU until all are hashed: %.2f s) | %.2f | %.2f |" % (n, cpu, t1 - t0, time.time() - t1))
# A tree removed through the mount (an `rm -rf` of a directory the agent made): one removal per
# directory, each of a subtree.
dirs = max(n // 20, 1)
subprocess.run(["bash", "-c", "for ((i = 0; i < %d; i++)); do mkdir -p t/a$((i %% 10))/b$i; "
                "for j in 1 2 3; do printf y > t/a$((i %% 10))/b$i/f$j; done; done" % dirs],
               cwd=mnt, check=True)
until(lambda: live("t") >= dirs * 3 and ctl("stats")["world"]["stale_entries"] == 0, "the tree")
before = ingest_ticks()
t = time.perf_counter()
shutil.rmtree(mnt + "/t")
loop = time.perf_counter() - t
until(lambda: live("t") == 0, "the tree's removal")
cpu = (ingest_ticks() - before) / os.sysconf("SC_CLK_TCK")
print("| `rm -rf` through the mount of a tree of %d directories and %d files (ingest thread CPU: %.2f s) | %.2f | %.2f |" % (dirs, dirs * 3, cpu, loop, time.perf_counter() - t))
until(lambda: live("d") >= n, "the creates")
print("| entries before | %d |" % live("d"))
t = save_repeatedly(mnt)
loop = time.perf_counter() - t
# A shell's write is the agent's, so it makes an entry, after every rename before it.
subprocess.run(["sh", "-c", "printf x > sentinel"], cwd=mnt, check=True)
until(lambda: live("sentinel") == 1, "the saves")
print("| %d atomic saves through the mount | %.2f | %.2f |" % (saves, loop, time.perf_counter() - t))
# The same saves made behind the mount (an editor or a formatter writing to SOURCE itself).
# The watcher reports in order, so once the world has the removal of a file the agent saw,
# made after the saves, it has every save.
subprocess.run(["sh", "-c", "printf x > marker"], cwd=mnt, check=True)
until(lambda: live("marker") == 1, "the marker")
t = save_repeatedly(dir + "/src")
loop = time.perf_counter() - t
os.remove(dir + "/src/marker")
until(lambda: live("marker") == 0, "the saves behind the mount")
print("| %d atomic saves behind the mount | %.2f | %.2f |" % (saves, loop, time.perf_counter() - t))
t = time.perf_counter()
shutil.rmtree(dir + "/src/d")
loop = time.perf_counter() - t
until(lambda: live("d") == 0, "the removal")
print("| `rm -rf` of the %d files behind the mount | %.2f | %.2f |" % (n, loop, time.perf_counter() - t))
PY
) || wfs_die "the catchup benchmark failed"
  wfs_unmount "$dir/mnt" || wfs_log "WARNING: the mount did not unmount cleanly"
  echo "$out"
  md_header "world catch-up after bulk name changes"
  {
    echo "- command: \`scripts/bench.sh catchup\` (\`make bench-catchup\`), CATCHUP_FILES=$n CATCHUP_SAVES=$saves; $(echo "$out" | sed -n 's/^| entries before | \([0-9]*\) |$/\1/p') live entries before the changes"
    echo
    echo "| change | the change itself, s | until the world has it, s |"
    echo "|---|---|---|"
    echo "$out" | grep '^|' | grep -v 'entries before'
  } | record
}

# ---------- restart ----------
# What keeping the world across restarts costs: a periodic save of a world of N entries, the
# unmount (which saves once more), and mounts that restore it, each against one with
# --no-state, alternately; then how long the restored entries take to be counted again.
bench_restart() {
  local n=${RESTART_FILES:-20000} rounds=${RESTART_ROUNDS:-3} dir=$BW/restart out t0 t1 r mode line
  rm -rf "$dir"; mkdir -p "$dir/src/d" "$dir/mnt"
  wfs_mount "$dir/src" "$dir/mnt" -- "${MOUNT_ARGS[@]}"
  wfs_log "creating $n files through the mount"
  (cd "$dir/mnt" && for ((i = 0; i < n; i++)); do printf x > "d/f$i"; done)
  t1=$(date +%s)
  out=$(python3 - "$WORLDFS_BIN" "$dir/mnt" "$n" "$t1" << 'PY'
import json, subprocess, sys, time
bin, mnt, n, t1 = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
def stats():
    return json.loads(subprocess.run([bin, "ctl", "stats"], cwd=mnt, capture_output=True, check=True).stdout)
deadline = time.time() + 120
while True:
    s = stats()
    k = s["world"]["kept"] or {}
    saved = (k.get("last_saved") or {}).get("secs_since_epoch", 0)
    if s["world"]["stale_entries"] == 0 and saved > t1:
        break
    if time.time() > deadline:
        sys.exit("no save after the creates within 120 s: %s" % k)
    time.sleep(0.2)
print("SAVE %d entries: %d ms, %.1f MB" % (s["world"]["entries"]["live"], k["last_save_ms"], k["last_save_bytes"] / 1e6))
PY
) || wfs_die "the restart benchmark failed"
  t0=$(date +%s.%N)
  wfs_unmount "$dir/mnt" || wfs_die "the mount did not unmount cleanly"
  t1=$(date +%s.%N)
  out+=$'\n'"UNMOUNT $(python3 -c "print('%.2f' % ($t1 - $t0))")"
  for ((r = 1; r <= rounds; r++)); do
    for mode in --no-state restore; do
      t0=$(date +%s.%N)
      if [ "$mode" = restore ]; then
        wfs_mount "$dir/src" "$dir/mnt" -- "${MOUNT_ARGS[@]}"
      else
        wfs_mount "$dir/src" "$dir/mnt" -- --no-state "${MOUNT_ARGS[@]}"
      fi
      t1=$(date +%s.%N)
      line=$(sed -n 's/.*(saved .*; read in \([0-9]*\) ms).*/\1/p' "$WFS_LOG")
      if [ "$mode" = restore ]; then
        [ -n "$line" ] || wfs_die "the mount did not say it restored the world: $(cat "$WFS_LOG")"
        # until every restored entry is counted again
        line+=" $(python3 - "$WORLDFS_BIN" "$dir/mnt" "$t1" << 'PY'
import json, subprocess, sys, time
bin, mnt, t1 = sys.argv[1], sys.argv[2], float(sys.argv[3])
while json.loads(subprocess.run([bin, "ctl", "stats"], cwd=mnt, capture_output=True, check=True).stdout)["world"]["stale_entries"] > 0:
    time.sleep(0.02)
print("%.2f" % (time.time() - t1))
PY
)"
      fi
      out+=$'\n'"MOUNT $mode $(python3 -c "print('%.3f' % ($t1 - $t0))") $line"
      wfs_unmount "$dir/mnt" || wfs_die "the mount did not unmount cleanly"
    done
  done
  echo "$out"
  md_header "keeping the world across restarts"
  {
    echo "- command: \`scripts/bench.sh restart\` (\`make bench-restart\`), RESTART_FILES=$n RESTART_ROUNDS=$rounds: $n files created through a mirror mount (the agent's, so all entries), the periodic save after them, the unmount (its final save included), then mounts alternately with \`--no-state\` and restoring; a mount is timed from the start of \`worldfs mount\` until mountinfo shows it (the script polls every 50 ms, so only the difference between the two kinds means much)"
    echo
    echo "$out" | sed -n 's/^SAVE \(.*\)/- periodic save of \1/p'
    echo "$out" | sed -n 's/^UNMOUNT \(.*\)/- unmount, final save included: \1 s/p'
    echo
    echo "| mount | s | world read and restored, ms | every entry counted again after the mount, s |"
    echo "|---|---|---|---|"
    echo "$out" | sed -n 's/^MOUNT \([^ ]*\) \([^ ]*\) *\([^ ]*\) *\([^ ]*\)$/| \1 | \2 | \3 | \4 |/p'
  } | record
}

# ---------- watcher ----------
# The two ways of watching SOURCE side by side: fanotify (one mark on its file system) and
# inotify (a watch per directory). For each, alternating, WATCH_ROUNDS times: the time the
# watch takes to set at the mount (the daemon's own log line) and the inotify watches it holds,
# on a tree of WATCH_DIRS directories; the daemon's CPU time while another process creates and
# removes WATCH_FILES files elsewhere on the same file system (the mark sees those too), against
# the same loop with nothing mounted; and how soon a change behind the mount shows through it.
proc_cpu_ms() {  # PID -> utime + stime of the process, in ms
  awk -v hz="$(getconf CLK_TCK)" '{ print int(($14 + $15) * 1000 / hz) }' "/proc/$1/stat"
}
inotify_watches() {  # PID -> inotify watches held
  cat /proc/"$1"/fdinfo/* 2> /dev/null | grep -c '^inotify wd:' || true
}
ms_of() {  # COMMAND... -> milliseconds it took (its output dropped)
  local t0 t1
  t0=$(date +%s%N)
  "$@" > /dev/null
  t1=$(date +%s%N)
  echo $(((t1 - t0) / 1000000))
}
churn_files() {  # DIR N: create then remove N small files in DIR
  local d=$1 n=$2 i
  for ((i = 0; i < n; i++)); do echo "$i" > "$d/f$i"; done
  rm -rf "$d"
}
churn() {  # DIR N -> ms to create then remove N small files in DIR
  mkdir -p "$1"
  ms_of churn_files "$1" "$2"
}
bench_watcher() {
  local dirs=${WATCH_DIRS:-20000} rounds=${WATCH_ROUNDS:-5} files=${WATCH_FILES:-5000}
  local dir=$BW/watcher trials=${LATENCY_TRIALS:-50} out="" r w ms setup watches lat bin mode cpu0 cpu1
  cargo build --release --quiet --example change_latency || wfs_die "cannot build the change_latency example"
  bin=${CARGO_TARGET_DIR:-$WFS_ROOT/target}/release/examples/change_latency
  if [ ! -d "$dir/src/t$((dirs - 1))" ]; then
    rm -rf "$dir"; mkdir -p "$dir/src" "$dir/mnt"
    wfs_log "making a tree of $dirs directories"
    seq 0 $((dirs - 1)) | sed "s|^|$dir/src/t|" | xargs mkdir -p
  fi
  # inotify reads every directory to watch it: on a cold cache (after a reboot, or once the
  # tree has left the page cache) each is a disk read. Once per watcher, caches dropped first.
  local WFS_TIMEOUT=600
  for w in fanotify inotify; do
    sync
    echo 3 > /proc/sys/vm/drop_caches
    wfs_mount "$dir/src" "$dir/mnt" -- --no-state -v --watcher "$w" "${MOUNT_ARGS[@]}"
    setup=$(sed -n 's/.*watching SOURCE with [^(]*(\(.*\))$/\1/p' "$WFS_LOG" | head -1)
    out+=$'\n'"COLD $w $setup"
    wfs_unmount "$dir/mnt" || wfs_die "the mount did not unmount cleanly"
  done
  for ((r = 1; r <= rounds; r++)); do
    ms=$(churn "$dir/elsewhere" "$files")
    out+=$'\n'"CHURN none $ms 0"
    for w in fanotify inotify; do
      wfs_mount "$dir/src" "$dir/mnt" -- --no-state -v --watcher "$w" "${MOUNT_ARGS[@]}"
      setup=$(sed -n 's/.*watching SOURCE with [^(]*(\(.*\))$/\1/p' "$WFS_LOG" | head -1)
      watches=$(inotify_watches "$WFS_PID")
      out+=$'\n'"SETUP $w $setup $watches"
      cpu0=$(proc_cpu_ms "$WFS_PID")
      ms=$(churn "$dir/elsewhere" "$files")
      sleep 0.5
      cpu1=$(proc_cpu_ms "$WFS_PID")
      out+=$'\n'"CHURN $w $ms $((cpu1 - cpu0))"
      if [ "$r" = 1 ]; then
        for mode in overwrite rename; do
          lat=$("$bin" "$dir/src" "$dir/mnt" --trials "$trials" --mode "$mode" \
            | sed -n 's/.*median_ms=\([^ ]*\) p90_ms=\([^ ]*\) max_ms=\([^ ]*\).*/\1 \2 \3/p')
          out+=$'\n'"LATENCY $w $mode $lat"
        done
      fi
      wfs_unmount "$dir/mnt" || wfs_die "the mount did not unmount cleanly"
    done
  done
  echo "$out"
  md_header "watching SOURCE: fanotify against inotify"
  {
    echo "- command: \`scripts/bench.sh watcher\` (\`make bench-watcher\`), WATCH_DIRS=$dirs WATCH_ROUNDS=$rounds WATCH_FILES=$files LATENCY_TRIALS=$trials: a mirror mount of a tree of $dirs directories with \`--watcher fanotify\` and with \`--watcher inotify\`, alternating; medians over the rounds"
    echo "- setting the watch: the daemon's own log line (\`watching SOURCE with ... (TIME)\`), before the mount appears; inotify watches: counted in the daemon's fdinfo; cold: once per watcher, first, after \`sync; echo 3 > /proc/sys/vm/drop_caches\` (the tree's directories no longer in memory, as after a reboot), warm: the rounds after"
    echo "- churn elsewhere: another process creates and removes $files small files in a directory outside SOURCE on the same file system while the mount is up; the loop's time, and the daemon's CPU time (utime + stime) over it and the 0.5 s after; \`none\` is the same loop with nothing mounted"
    echo "- change latency (first round): \`change_latency SRC MNT --trials $trials --mode MODE\` on the same tree"
    echo
    echo "| watcher | setting the watch, cold | setting the watch, warm (median) | inotify watches held | churn elsewhere, loop ms (median) | daemon CPU ms during it (median) |"
    echo "|---|---|---|---|---|---|"
    OUT=$out python3 - << 'PY'
import os, statistics
lines = [l.split() for l in os.environ["OUT"].splitlines() if l.strip()]
def ms(t):
    for unit, f in (("ms", 1.0), ("µs", 1e-3), ("ns", 1e-6), ("s", 1e3)):
        if t.endswith(unit):
            return float(t[: -len(unit)]) * f
    return float("nan")
for w in ("fanotify", "inotify", "none"):
    setup = [l for l in lines if l[0] == "SETUP" and l[1] == w]
    cold = [l for l in lines if l[0] == "COLD" and l[1] == w]
    ct = "%.1f ms" % ms(cold[0][2]) if cold else "-"
    churn = [l for l in lines if l[0] == "CHURN" and l[1] == w]
    st = "%.1f ms" % statistics.median(ms(l[2]) for l in setup) if setup else "-"
    wt = "%d" % statistics.median(int(l[3]) for l in setup) if setup else "-"
    loop = statistics.median(int(l[2]) for l in churn)
    cpu = "%d" % statistics.median(int(l[3]) for l in churn) if w != "none" else "-"
    print("| %s | %s | %s | %s | %d | %s |" % (w, ct, st, wt, loop, cpu))
PY
    echo
    echo "| watcher | change | median ms | p90 ms | max ms |"
    echo "|---|---|---|---|---|"
    echo "$out" | sed -n 's/^LATENCY \([a-z]*\) \([a-z]*\) \([^ ]*\) \([^ ]*\) \([^ ]*\)$/| \1 | \2 | \3 | \4 | \5 |/p'
  } | record
}

# ---------- transport ----------
secs_of() {  # COMMAND... -> seconds it took (3 decimals)
  ms_of "$@" | awk '{printf "%.3f", $1 / 1000}'
}
grep_tree() { grep -rIl --exclude-dir=.git 'fn main' "$1" > /dev/null || [ $? = 1 ]; }
small_creates() {  # DIR N BLOB: fsbench's smallfiles loop, N files holding BLOB in DIR
  local d=$1 n=$2 blob=$3 i
  for ((i = 0; i < n; i++)); do printf '%s' "$blob" > "$d/f$i"; done
}
fresh_dir() { rm -rf "$1"; mkdir -p "$1"; }
bench_transport() {
  local rounds=${TRANSPORT_ROUNDS:-5} files=${TRANSPORT_FILES:-3000} dir=$BW/transport
  local out="" r t ring grep_s small_s blob
  blob=$(head -c 1024 /dev/zero | tr '\0' x)
  [ "$(uring_state)" = Y ] || wfs_die "$URING_PARAM is not Y: FUSE-over-io_uring cannot be measured here"
  ensure_tree "$BW/native"
  rm -rf "$dir"; mkdir -p "$dir/tree-mnt" "$dir/tmp" "$dir/small-mnt"
  mount -t tmpfs -o size=512m worldfs-bench "$dir/tmp" || wfs_die "cannot mount a tmpfs"
  wfs_defer "umount -l $dir/tmp"
  mkdir -p "$dir/tmp/src"
  for ((r = 1; r <= rounds; r++)); do
    grep_tree "$BW/native/tree"
    grep_s=$(secs_of grep_tree "$BW/native/tree")
    fresh_dir "$dir/tmp/native"
    small_s=$(secs_of small_creates "$dir/tmp/native" "$files" "$blob")
    out+=$'\n'"native $grep_s $small_s"
    for t in ring dev; do
      ring=auto; [ "$t" = dev ] && ring=off
      wfs_mount "$BW/native" "$dir/tree-mnt" -- --no-state -v --io-uring "$ring" "${MOUNT_ARGS[@]}"
      if [ "$t" = ring ]; then
        grep -q 'transport: FUSE-over-io_uring' "$WFS_LOG" || wfs_die "the mount did not use FUSE-over-io_uring: $(grep transport "$WFS_LOG")"
      fi
      # Warm: the first run looks every name up and reads every small file into the page
      # cache; fsbench's timed runs come after its warm-up too.
      grep_tree "$dir/tree-mnt/tree"
      grep_tree "$dir/tree-mnt/tree"
      grep_s=$(secs_of grep_tree "$dir/tree-mnt/tree")
      wfs_unmount "$dir/tree-mnt" || wfs_die "the mount did not unmount cleanly"
      wfs_mount "$dir/tmp/src" "$dir/small-mnt" -- --no-state --io-uring "$ring" "${MOUNT_ARGS[@]}"
      # Emptied before the clock starts: the other transport's files from this round are there.
      fresh_dir "$dir/small-mnt/small"
      small_s=$(secs_of small_creates "$dir/small-mnt/small" "$files" "$blob")
      wfs_unmount "$dir/small-mnt" || wfs_die "the mount did not unmount cleanly"
      out+=$'\n'"$t $grep_s $small_s"
    done
  done
  echo "$out"
  md_header "FUSE-over-io_uring against /dev/fuse"
  {
    echo "- command: \`scripts/bench.sh transport\` (\`make bench-transport\`), TRANSPORT_ROUNDS=$rounds TRANSPORT_FILES=$files: mirror mounts with \`--io-uring auto\` (the ring; checked in the daemon's log) and \`--io-uring off\` (/dev/fuse), alternating, after the same commands natively, each round"
    echo "- grep: \`grep -rIl --exclude-dir=.git 'fn main'\` of bench-work/native/tree (fsbench's \`grep\`), timed after two untimed runs on the same mount; small creates: $files files of 1 KiB written by a shell loop (fsbench's \`smallfiles\`) into an empty directory of a tmpfs mirror-mounted for it"
    echo
    echo "| transport | grep -r, s (median) | ratio to native | small creates, s (median) | ratio to native | all rounds (grep / creates) |"
    echo "|---|---|---|---|---|---|"
    OUT=$out python3 - << 'PY'
import os, statistics
rows = [l.split() for l in os.environ["OUT"].splitlines() if l.strip()]
med = {}
for name in ("native", "ring", "dev"):
    g = [float(r[1]) for r in rows if r[0] == name]
    c = [float(r[2]) for r in rows if r[0] == name]
    med[name] = (statistics.median(g), statistics.median(c), g, c)
label = {"native": "native", "ring": "FUSE-over-io_uring", "dev": "/dev/fuse"}
for name in ("native", "ring", "dev"):
    g, c, gs, cs = med[name]
    print("| %s | %.3f | %.2f | %.3f | %.2f | %s / %s |" % (
        label[name], g, g / med["native"][0], c, c / med["native"][1],
        " ".join("%.3f" % x for x in gs), " ".join("%.3f" % x for x in cs)))
PY
  } | record
}

# ---------- proxy ----------
# DIR/report/mod_1.py ... mod_40.py: 40 modules of 12 small functions each.
gen_modules() {
  local i
  mkdir -p "$1/report"
  for i in $(seq 1 40); do
    python3 -c "import sys
i = int(sys.argv[1])
for f in range(12):
    print('def region_%d_step_%d(rows, totals):' % (i, f))
    print('    \"\"\"Adds the rows of region %d to the totals, step %d.\"\"\"' % (i, f))
    print('    for row in rows:')
    print('        totals[row.region] = totals.get(row.region, 0) + row.amount * %d' % f)
    print('    return totals')
    print()" "$i" > "$1/report/mod_$i.py"
  done
}

bench_proxy() {  # [claude|codex]: whose model calls
  local client=${1:-claude} n=${PROXY_TURNS:-100} dir=$BW/proxy out api_pid proxy_pid port url sock
  rm -rf "$dir"; mkdir -p "$dir/src" "$dir/mnt"
  gen_modules "$dir/src"
  wfs_mount "$dir/src" "$dir/mnt" -- "${MOUNT_ARGS[@]}"
  sock=$(sed -n 's/^worldfs: socket //p' "$WFS_LOG" | head -n 1)
  python3 "$WFS_ROOT/scripts/stand-in-api.py" --record "$dir/api.jsonl" > "$dir/api.out" 2>&1 &
  api_pid=$!
  timeout 10 sh -c "until grep -q 'listening on' '$dir/api.out'; do sleep 0.05; done" \
    || { kill "$api_pid"; wfs_die "the stand-in API did not start"; }
  port=$(sed -n 's/.*listening on //p' "$dir/api.out")
  (cd / && exec "$WORLDFS_BIN" proxy --socket "$sock" --listen 127.0.0.1:0 \
    --upstream "http://127.0.0.1:$port") 2> "$dir/proxy.err" &
  proxy_pid=$!
  timeout 10 sh -c "until grep -q 'proxy on http://' '$dir/proxy.err'; do sleep 0.05; done" \
    || { kill "$api_pid" "$proxy_pid"; wfs_die "worldfs proxy did not start: $(cat "$dir/proxy.err")"; }
  url=$(sed -n 's|^worldfs: proxy on \(http://[^ ]*\).*|\1|p' "$dir/proxy.err")
  out=$(python3 "$WFS_ROOT/scripts/bench-proxy.py" "$WORLDFS_BIN" "$dir/mnt" "$url" \
    "http://127.0.0.1:$port" "$dir/api.jsonl" "$n" "$client") || { kill "$api_pid" "$proxy_pid"; wfs_die "the proxy benchmark failed"; }
  kill "$api_pid" "$proxy_pid" 2> /dev/null || true
  wait "$api_pid" "$proxy_pid" 2> /dev/null || true
  wfs_unmount "$dir/mnt" || wfs_log "WARNING: the mount did not unmount cleanly"
  echo "$out"
  if [ "$client" = codex ]; then
    md_header "worldfs proxy for Codex, time per model call and bytes sent"
  else
    md_header "worldfs proxy, time per model call and bytes sent"
  fi
  {
    if [ "$client" = codex ]; then
      echo "- command: \`scripts/bench.sh proxy-codex\` (\`make bench-proxy-codex\`), PROXY_TURNS=$n; a Codex session (the Responses API) of $n \`exec_command\` calls of \`cat\` (every fifth turn also an edit of a file read before), each told by Codex-shaped PreToolUse and PostToolUse hook events, on a mirror mount of 40 generated modules; after each call the whole request is posted to \`/v1/responses\` through \`worldfs proxy\` (default budget) and straight to a stand-in API (\`scripts/stand-in-api.py\`), alternately; times are to the end of the streamed answer"
    else
      echo "- command: \`scripts/bench.sh proxy\` (\`make bench-proxy\`), PROXY_TURNS=$n; a session of $n Read calls (every fifth also an edit) on a mirror mount of 40 generated modules; after each call the whole request is posted through \`worldfs proxy\` (default budget) and straight to a stand-in API (\`scripts/stand-in-api.py\`), alternately; times are to the end of the streamed answer"
    fi
    echo
    echo "| request | calls | median ms | p90 ms | max ms |"
    echo "|---|---|---|---|---|"
    echo "$out" | grep '^| '
    echo
    echo "| after turn | request as the client sent it (bytes) | what reached the API (bytes) | ratio |"
    echo "|---|---|---|---|"
    echo "$out" | sed -n 's/^SIZE //p'
    echo
    echo "$out" | sed -n 's/^REWRITTEN /- /p'
    echo
    echo "Tokens (o200k_base) of the messages, as the proxy reported them to the mount (\`worldfs status\`, \`stats.proxy\`); system prompt and tools are sent either way and not counted:"
    echo
    echo "| calls reported | messages as sent by the client | messages sent upstream | ratio | last call |"
    echo "|---|---|---|---|---|"
    echo "$out" | sed -n 's/^TOKENS //p'
    if [ "$client" != codex ]; then
      echo
      echo "After a compaction (the summary opens the conversation, the five files read last attached whole as Claude Code puts them back), one call through the proxy; tokens (o200k_base) of the messages:"
      echo
      echo "| files attached | messages as sent by the client | sent upstream, copies not the files (shown again) | sent upstream, copies current (left out) | saved | bytes sent (shown again -> left out) |"
      echo "|---|---|---|---|---|---|"
      echo "$out" | sed -n 's/^ATTACHED //p'
    fi
  } | record
}

# ---------- rss ----------
ensure_rss_tree() {  # DIR N: synthetic git tree of N files
  local tree=$1 n=$2
  if [ "$(cat "$tree.ready" 2> /dev/null || true)" = "$n" ] && [ -d "$tree/.git" ]; then return 0; fi
  wfs_log "creating a synthetic $n-file git tree in $tree (once)"
  rm -rf "$tree" "$tree.ready"; mkdir -p "$tree"
  python3 - "$tree" "$n" << 'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
per_dir, per_top = 100, 10          # 100 files per leaf dir, 10 leaf dirs per top dir
for i in range(n):
    d = os.path.join(root, f"pkg{i // (per_dir * per_top):04d}", f"mod{(i // per_dir) % per_top:02d}")
    if i % per_dir == 0:
        os.makedirs(d, exist_ok=True)
    ext = ("rs", "py", "ts", "md")[i % 4]
    with open(os.path.join(d, f"file{i % per_dir:03d}.{ext}"), "w") as f:
        f.write(f"// file {i}\nfn item_{i}() -> u64 {{ {i} }}\n" + "x" * (i % 200) + "\n")
EOF
  git -C "$tree" init -q
  git -C "$tree" add -A
  git -C "$tree" -c user.name=bench -c user.email=bench@localhost -c commit.gpgsign=false commit -q -m "synthetic tree"
  echo "$n" > "$tree.ready"
}
proc_mem() {  # PID -> "rss_mib hwm_mib fds threads anon_mib file_mib"
  local r h t a fi fds
  read -r r h t a fi < <(awk '/^VmRSS/ { r = $2 } /^VmHWM/ { h = $2 } /^Threads/ { t = $2 }
       /^RssAnon/ { a = $2 } /^RssFile/ { f = $2 }
       END { printf "%.1f %.1f %s %.1f %.1f\n", r / 1024, h / 1024, t, a / 1024, f / 1024 }' "/proc/$1/status")
  fds=$(find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2> /dev/null | wc -l)
  echo "$r $h $fds $t $a $fi"
}
# ---------- the world over the socket (rss, socket) ----------
# pick_files TREE WANT OUT: WANT files tracked in TREE's git index, spread evenly over it
pick_files() {
  git -C "$1" ls-files | awk -v want="$2" '{ a[NR] = $0 }
    END { step = NR / want; if (step < 1) step = 1
          for (i = 0; i < want && int(i * step) < NR; i++) print a[int(i * step) + 1] }' > "$3"
}
# agent_read ROOT LIST: `cat` every file of LIST (paths relative to ROOT, a mount), 16 files per
# cat process. cat is a reader program (src/world/attribution.rs): its opens are agent reads and
# create entries, as long as one process opens at most fanout_threshold (32) distinct paths in
# fanout_window_ms (2 s); `xargs cat` over a whole list would be classified as a scan.
agent_read() {
  awk -v r="$1" '{ print r "/" $0 }' "$2" | xargs -d '\n' -n 16 cat > /dev/null
}
# live_entries SOCKET: the world's live entries (entries.list total)
live_entries() {
  "$WORLDFS_BIN" ctl --socket "$1" entries.list '{"state":"live","limit":1}' |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["total"])'
}
# wait_world SOCKET WANT: until WANT entries are live and none waits to be hashed and counted
# (ingest is asynchronous, and its thread counts tokens when idle, building the tokenizer on first
# use), at most 10 s; prints the live entries as entries.list reports them
wait_world() {
  local i c=0 s=1
  for ((i = 0; i < 100; i++)); do
    read -r c s < <("$WORLDFS_BIN" ctl --socket "$1" stats | python3 -c 'import json, sys
w = json.load(sys.stdin)["world"]; print(w["entries"]["live"], w["stale_entries"])') || { c=0; s=1; }
    [ "$c" -ge "$2" ] && [ "$s" = 0 ] && break
    sleep 0.1
  done
  [ "$s" = 0 ] || wfs_log "WARNING: $s entries still wait to be hashed and counted"
  live_entries "$1"
}
projection_once() {  # SOCKET: one projection.get (anthropic, 8k); prints its token estimate
  "$WORLDFS_BIN" ctl --socket "$1" projection.get '{"format":"anthropic","budget":8000}' |
    python3 -c 'import json, sys; print("tokens", json.load(sys.stdin).get("tokens"))'
}

# ---------- rss ----------
bench_rss() {
  local n=${RSS_FILES:-100000} obs=${RSS_OBSERVED:-2000} dir=$BW/rss rows=() t0 res want entries
  local sock=$BW/rss/wfs.sock
  ensure_rss_tree "$dir/tree" "$n"
  mkdir -p "$dir/mnt"
  wfs_mount "$dir/tree" "$dir/mnt" -- --socket "$sock" "${MOUNT_ARGS[@]}"
  local pid=$WFS_PID
  step() {  # LABEL COMMAND...
    local label=$1 secs; shift
    t0=$EPOCHREALTIME
    res=$("$@" 2>&1 | tail -n 1) || wfs_log "WARNING: $label failed: $res"
    secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
    read -r r h f t an fi <<< "$(proc_mem "$pid")"
    entries=$(live_entries "$sock") || entries="?"
    rows+=("| $label | $secs | $r | $h | $an | $fi | $f | $t | $entries |")
    wfs_log "$label: ${secs}s, VmRSS ${r} MiB (anon $an, file $fi), VmHWM ${h} MiB, fds $f, threads $t, live entries $entries"
  }
  count() { "$@" | wc -l; }
  step "after mount" true
  step "find -type f (cold)" count find "$dir/mnt" -type f
  step "find -type f (again)" count find "$dir/mnt" -type f
  step "git status" count git -C "$dir/mnt" status --porcelain
  step "git status (again)" count git -C "$dir/mnt" status --porcelain
  # shellcheck disable=SC2016  # $1 expands in the inner shell
  step "stat every file" count bash -c 'find "$1" -type f -not -path "*/.git/*" -print0 | xargs -0 stat -c %i' _ "$dir/mnt"
  pick_files "$dir/tree" "$obs" "$dir/observed.txt"
  want=$(wc -l < "$dir/observed.txt")
  step "cat $want distinct files, 16 per cat (agent reads)" agent_read "$dir/mnt" "$dir/observed.txt"
  step "world caught up (entries live, hashed, counted)" wait_world "$sock" "$want"
  [ "$entries" = "$want" ] || wfs_log "WARNING: $entries live entries after reading $want files"
  step "projection.get (anthropic, 8k budget)" projection_once "$sock"
  wfs_unmount "$dir/mnt" || wfs_log "WARNING: the mount did not unmount cleanly"
  local verdict
  verdict=$(awk -v r="$r" -v h="$h" 'BEGIN { lim = 100e6 / 1048576
    printf "VmRSS %.1f MiB (%.1f MB), VmHWM %.1f MiB (%.1f MB): %s", r, r * 1.048576, h, h * 1.048576,
      (h <= lim ? "meets the target" : "**over the target**") }')
  md_header "daemon memory on a $n-file tree"
  {
    echo "- tree: bench-work/rss/tree, $n synthetic files (1000 dirs of 100, 40-240 bytes each) in one git commit; mount: bench-work/rss/mnt, \`--socket bench-work/rss/wfs.sock\`"
    echo "- command: \`RSS_FILES=$n RSS_OBSERVED=$obs scripts/bench.sh rss\`; steps run in this order; the agent reads are $want files spread evenly over \`git ls-files\`, read with \`xargs -d '\\n' -n 16 cat\` through the mount"
    echo "- measured from /proc/PID/status of the daemon after each step; anon / file = RssAnon / RssFile (heap and stacks / pages of the binary and libraries); fds = open descriptors of the daemon; live entries = \`worldfs ctl entries.list '{\"state\":\"live\"}'\` total, after the step"
    echo
    echo "| after step | step s | VmRSS MiB | VmHWM MiB | anon MiB | file MiB | fds | threads | live entries |"
    echo "|---|---|---|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
    echo
    echo "Target (issue 3: 100k-file tree, 2,000 files observed, at most 100 MB = 95.4 MiB): $verdict after the last step, with $entries live entries."
  } | record
}

# ---------- overhead: observation on vs off, side by side ----------
bench_overhead() {
  [ -x "$FSBENCH" ] || wfs_die "fsbench not found at $FSBENCH (set SHARED_DIR or FSBENCH)"
  local native=$BW/native ovh=$BW/ovh runs=${OVH_RUNS:-7} s want load0 t0 rc=0
  local wl=${OVH_WORKLOADS:-grep,rg,catall,stat,find,lsR,gitstatus,smallfiles,rmtree}
  mkdir -p "$native" "$ovh/a" "$ovh/b"
  ensure_tree "$native"
  ensure_rg
  # Two copies, so neither mount sees pages or inodes the other one warmed.
  want=$(cat "$native/.tree-ready")
  for s in srcA srcB; do
    if [ "$(cat "$ovh/$s.ready" 2> /dev/null || true)" != "$want" ]; then
      wfs_log "copying bench-work/native/tree to bench-work/ovh/$s"
      rm -rf "${ovh:?}/$s" "$ovh/$s.ready"; mkdir -p "$ovh/$s"
      cp -a "$native/tree" "$ovh/$s/"
      echo "$want" > "$ovh/$s.ready"
    fi
    # Refreshes each copy's index (stat data of every file), so git status takes the same
    # path on both: a copy whose index was refreshed once (any git status with locks) answered
    # in 35 ms where the other re-checked files for 1 s.
    git -C "$ovh/$s/tree" status --porcelain > /dev/null 2>&1 || true
  done
  # fsbench times its first side before its second in every pair, and the two sides differ in
  # more than observation: position (smallfiles: ext4 skips recently deleted inodes when it
  # allocates, so the side that creates right after the other deleted pays; native against
  # native it measured 0.45 to 2.9) and copy (stat of srcB ran at 0.55x srcA's whatever
  # observed). So fsbench runs twice on the same sides and copies, and only which mount
  # observes is swapped: r1 = on/off = k*x, r2 = off/on = k/x for any bias k of the second
  # side, and x = sqrt(r1 / r2) is the overhead without it.
  local cmd label pass dropped=() mnt_a mnt_b sock
  label="worldfs $(commit)"
  cmd=("$FSBENCH" -n "$runs" -w "$wl" -l "$label observe A/B" "$ovh/a" "$ovh/b")
  load0=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$SECONDS
  for pass in 1 2; do
    if [ "$pass" = 1 ]; then
      wfs_mount "$ovh/srcA" "$ovh/a" -- --no-observe "${MOUNT_ARGS[@]}"
      mnt_a=$WFS_MNT
      wfs_mount "$ovh/srcB" "$ovh/b" -- --socket "$ovh/b.sock" "${MOUNT_ARGS[@]}"
      mnt_b=$WFS_MNT sock=$ovh/b.sock
    else
      wfs_mount "$ovh/srcA" "$ovh/a" -- --socket "$ovh/a.sock" "${MOUNT_ARGS[@]}"
      mnt_a=$WFS_MNT sock=$ovh/a.sock
      wfs_mount "$ovh/srcB" "$ovh/b" -- --no-observe "${MOUNT_ARGS[@]}"
      mnt_b=$WFS_MNT
    fi
    wfs_log "pass $pass of 2 ($([ "$pass" = 1 ] && echo "B" || echo "A") observes): ${cmd[*]} (load average $(cut -d' ' -f1-3 /proc/loadavg))"
    "${cmd[@]}" 2>&1 | tee "$ovh/fsbench$pass.out" || rc=$?
    dropped+=("$("$WORLDFS_BIN" ctl --socket "$sock" stats 2> /dev/null |
      python3 -c 'import json, sys; w = json.load(sys.stdin)["world"]; print(w.get("dropped"), "of", w.get("observations"))' || echo unknown)")
    wfs_log "pass $pass: the observing daemon dropped ${dropped[-1]} observations"
    wfs_unmount "$mnt_b" || wfs_log "WARNING: $mnt_b did not unmount cleanly"
    wfs_unmount "$mnt_a" || wfs_log "WARNING: $mnt_a did not unmount cleanly"
  done
  [ "$rc" = 0 ] || wfs_log "WARNING: fsbench exited with status $rc"
  local table
  table=$(python3 - "$ovh/fsbench1.out" "$ovh/fsbench2.out" <<'PY'
import math, sys

def pairs(path):
    out = {}
    for line in open(path):
        f = line.split()
        if len(f) >= 5 and not line.startswith(("#", "workload")):
            try:
                out[f[0]] = float(f[4])
            except ValueError:
                pass
    return out

r1, r2 = pairs(sys.argv[1]), pairs(sys.argv[2])
print("| workload | r1 = on/off (B observes) | r2 = off/on (A observes) | overhead sqrt(r1/r2) | <= 1.05 |")
print("|---|---|---|---|---|")
for w in r1:
    if w in r2 and r1[w] > 0 and r2[w] > 0:
        x = math.sqrt(r1[w] / r2[w])
        print(f"| {w} | {r1[w]:.3f} | {r2[w]:.3f} | **{x:.3f}** | {'yes' if x <= 1.05 else 'no'} |")
PY
  ) || table="(could not combine the two runs; raw output below)"
  echo "$table"
  md_header "Observation overhead, observer swapped"
  local shown
  shown=$(shown_cmd "${cmd[@]}")
  {
    echo "- two mirror mounts of two copies of bench-work/native/tree, bench-work/ovh/srcA at bench-work/ovh/a and srcB at bench-work/ovh/b; pass 1: A \`--no-observe\`, B observing; pass 2: A observing, B \`--no-observe\`; load average before: $load0; observations dropped by the observing daemon: ${dropped[*]}"
    echo "- command, run once per pass (\`scripts/bench.sh overhead\`, $((SECONDS - t0)) s in all): \`$shown\`"
    echo "- r1, r2: fsbench's median pair ratio (b / a) of each pass; sqrt(r1/r2) cancels whatever favours one side (position in the pair, disk layout of the copy); target (issue 3): <= 1.05"
    echo
    echo "$table"
    echo
    echo '```'
    cat "$ovh/fsbench1.out"
    echo
    cat "$ovh/fsbench2.out"
    echo '```'
  } | record
}

# ---------- socket ----------
ensure_src_tree() {  # DIR N: synthetic source-like git tree of N files (1-8 KB of code each)
  local tree=$1 n=$2
  if [ "$(cat "$tree.ready" 2> /dev/null || true)" = "src-v1 $n" ] && [ -d "$tree/.git" ]; then return 0; fi
  wfs_log "creating a synthetic source-like $n-file git tree in $tree (once)"
  rm -rf "$tree" "$tree.ready"; mkdir -p "$tree"
  python3 - "$tree" "$n" << 'EOF'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rnd = random.Random(4)
words = ("world cache entry path token budget read write open close stat mount socket client "
         "server policy render buffer index parse event queue batch range node tree hash state "
         "config error result value item list map key count limit start stop span line").split()
def ident(): return "_".join(rnd.sample(words, rnd.randint(1, 3)))
def rust(i):
    out = [f"//! Module {i}: {' '.join(rnd.sample(words, 8))}.", "", "use std::collections::HashMap;", ""]
    for k in range(rnd.randint(3, 25)):
        name, arg = ident(), ident()
        out += [f"/// {' '.join(rnd.sample(words, 10))}.", f"pub fn {name}_{k}({arg}: &[u64]) -> u64 {{",
                f"    let mut {name} = HashMap::new();"]
        for j in range(rnd.randint(2, 10)):
            out.append(f"    {name}.insert({j}, {arg}.iter().map(|x| x * {rnd.randint(2, 99)}).sum::<u64>());")
        out += [f"    {name}.values().copied().max().unwrap_or({k})", "}", ""]
    if i % 50 == 0:
        out += ["fn main() {", f'    println!("{{}}", item_0(&[{i}]));', "}"]
    return out
def python(i):
    out = [f'"""Module {i}: {" ".join(rnd.sample(words, 8))}."""', "", "import os", ""]
    for k in range(rnd.randint(3, 25)):
        name, arg = ident(), ident()
        out += [f"def {name}_{k}({arg}):", f'    """{" ".join(rnd.sample(words, 10))}."""', f"    {name} = {{}}"]
        for j in range(rnd.randint(2, 10)):
            out.append(f"    {name}[{j}] = sum(x * {rnd.randint(2, 99)} for x in {arg})")
        out += [f"    return max({name}.values(), default={k})", ""]
    return out
def ts(i):
    out = [f"// Module {i}: {' '.join(rnd.sample(words, 8))}.", "", "import { readFileSync } from 'fs';", ""]
    for k in range(rnd.randint(3, 25)):
        name, arg = ident(), ident()
        out += [f"export function {name}_{k}({arg}: number[]): number {{", f"  const {name} = new Map<number, number>();"]
        for j in range(rnd.randint(2, 10)):
            out.append(f"  {name}.set({j}, {arg}.reduce((a, x) => a + x * {rnd.randint(2, 99)}, 0));")
        out += [f"  return Math.max({k}, ...{name}.values());", "}", ""]
    return out
def md(i):
    out = [f"# Notes {i}", ""]
    for k in range(rnd.randint(3, 25)):
        out += [f"## {ident()}", "", " ".join(rnd.choice(words) for _ in range(rnd.randint(20, 60))) + ".", ""]
    return out
kinds = (("rs", rust), ("py", python), ("ts", ts), ("rs", rust), ("md", md))
for i in range(n):
    d = os.path.join(root, f"pkg{i // 1000:03d}", f"mod{(i // 100) % 10}", f"sub{(i // 10) % 10}")
    if i % 10 == 0:
        os.makedirs(d, exist_ok=True)
    ext, gen = kinds[i % len(kinds)]
    with open(os.path.join(d, f"{ident()}_{i}.{ext}"), "w") as f:
        f.write("\n".join(gen(i)) + "\n")
EOF
  git -C "$tree" init -q
  git -C "$tree" add -A
  git -C "$tree" -c user.name=bench -c user.email=bench@localhost -c commit.gpgsign=false commit -q -m "synthetic source tree"
  echo "src-v1 $n" > "$tree.ready"
}

LOAD_PID=""
# start_load KIND NATIVE MNT DIR: runs the load in the background (its own process group, under
# `timeout`, so it can never outlive the run by long); one line per finished round in DIR/load.rounds
start_load() {
  local kind=$1 native=$2 mnt=$3 dir=$4 limit=$((${SOCKET_SECS:-30} * 3 + 120))
  : > "$dir/load.rounds"
  case "$kind" in
    fsbench)
      [ -x "$FSBENCH" ] || wfs_die "fsbench not found at $FSBENCH (set SHARED_DIR or FSBENCH, or SOCKET_LOAD=loop)"
      # shellcheck disable=SC2016  # expands in the inner shell
      timeout -k 5 "$limit" bash -c 'n=0; while :; do
          "$1" -n 1 -W 0 -w "$2" "$3" "$4" > "$5.out" 2>&1 || { echo "fsbench failed" >> "$5"; exit 1; }
          echo done >> "$5"; done' _ \
        "$FSBENCH" "${SOCKET_WORKLOADS:-find,stat,lsR,grep,rg,catall,gitstatus}" "$native" "$mnt" "$dir/load.rounds" &
      ;;
    loop)
      # shellcheck disable=SC2016  # expands in the inner shell
      timeout -k 5 "$limit" bash -c 't=$1/tree; while :; do
          find "$t" -type f > /dev/null
          grep -rIl --exclude-dir=.git "fn main" "$t" > /dev/null
          find "$t" -type f -not -path "*/.git/*" -print0 | xargs -0 cat > /dev/null
          echo done >> "$2"; done' _ "$mnt" "$dir/load.rounds" &
      ;;
    *) wfs_die "SOCKET_LOAD=$kind: fsbench or loop" ;;
  esac
  LOAD_PID=$!
}
stop_load() {
  [ -n "$LOAD_PID" ] || return 0
  kill -TERM -- "-$LOAD_PID" 2> /dev/null || kill -TERM "$LOAD_PID" 2> /dev/null || true
  wait "$LOAD_PID" 2> /dev/null || true
  LOAD_PID=""
}

bench_socket() {
  local n=${SOCKET_FILES:-20000} obs=${SOCKET_OBSERVED:-500} secs=${SOCKET_SECS:-30}
  local clients=${SOCKET_CLIENTS:-16} kind=${SOCKET_LOAD:-fsbench}
  local dir=$BW/socket bin want entries lines=() la0 base_secs
  local native=$dir/native mnt=$dir/mnt sock=$dir/wfs.sock out=$dir/socket_load.out
  base_secs=$(( secs / 3 > 0 ? secs / 3 : 1 ))
  wfs_log "building examples/socket_load.rs"
  cargo build --release --quiet --example socket_load || wfs_die "cannot build the socket_load example"
  bin=${CARGO_TARGET_DIR:-$WFS_ROOT/target}/release/examples/socket_load
  case "$bin" in /*) ;; *) bin=$WFS_ROOT/$bin ;; esac
  [ "$kind" != fsbench ] || ensure_rg
  ensure_src_tree "$native/tree" "$n"
  mkdir -p "$mnt"
  la0=$(cut -d' ' -f1-3 /proc/loadavg)
  wfs_mount "$native" "$mnt" -- --socket "$sock" "${MOUNT_ARGS[@]}"
  pick_files "$native/tree" "$obs" "$dir/observed.txt"
  want=$(wc -l < "$dir/observed.txt")
  wfs_log "reading $want files through the mount with cat (agent reads)"
  agent_read "$mnt/tree" "$dir/observed.txt"
  entries=$(wait_world "$sock" "$want")
  wfs_log "live entries: $entries (of $want read)"
  [ "$entries" -ge $((want * 9 / 10)) ] || wfs_die "only $entries live entries after reading $want files"
  : > "$out"
  phase() {  # LABEL LOAD METHOD SECS [CLIENTS]
    local line la c=${5:-$clients}
    wfs_log "phase $1: $3, $c clients, $4 s, load: $2"
    local np=()
    [ "${SOCKET_NO_PARSE:-0}" != 1 ] || np=(--no-parse)
    line=$("$bin" --socket "$sock" --clients "$c" --secs "$4" --method "$3" --label "$1" "${np[@]}") ||
      wfs_log "WARNING: socket_load reported errors ($1)"
    la=$(cut -d' ' -f1-3 /proc/loadavg)
    echo "$line" | tee -a "$out"
    lines+=("$2|$la|$line")
  }
  phase idle none projection.get "$base_secs" 1
  phase idle none projection.get "$secs"
  phase idle none goal.get "$base_secs"
  local desc
  if [ "$kind" = fsbench ]; then
    desc="\`fsbench -n 1 -W 0 -w ${SOCKET_WORKLOADS:-find,stat,lsR,grep,rg,catall,gitstatus} bench-work/socket/native bench-work/socket/mnt\` in a loop"
  else
    desc="find, grep -rIl and find | xargs cat of bench-work/socket/mnt/tree in a loop"
  fi
  start_load "$kind" "$native" "$mnt" "$dir"
  sleep 2
  phase loaded "$kind" projection.get "$base_secs" 1
  phase loaded "$kind" projection.get "$secs"
  phase loaded "$kind" goal.get "$base_secs"
  local rounds
  rounds=$(grep -c '^done' "$dir/load.rounds" || true)
  stop_load
  if grep -q failed "$dir/load.rounds"; then
    wfs_log "WARNING: the load failed: $(tail -5 "$dir/load.rounds.out" 2> /dev/null)"
    rounds="$rounds (then it FAILED)"
  fi
  local after stats_json
  after=$(live_entries "$sock") || after="?"
  stats_json=$("$WORLDFS_BIN" ctl --socket "$sock" stats | python3 -c 'import json, sys
s = json.load(sys.stdin)
q = s.get("latency", {}).get("projection.get", {})
r = s.get("renders") or {}
print("dropped observations: %s; the daemon'"'"'s own projection.get histogram over all phases: %s calls, p50 %s us, p99 %s us, max %s us; renders: %s made, %s reused"
      % (s["drops"]["observations"], q.get("count"), q.get("p50_us"), q.get("p99_us"), q.get("max_us"), r.get("rendered", "?"), r.get("reused", "?")))') || stats_json="(stats failed)"
  wfs_unmount "$mnt" || wfs_log "WARNING: the mount did not unmount cleanly"

  md_header "socket latency under load: $clients clients, $want observed files, $n-file tree"
  {
    echo "- tree: bench-work/socket/native/tree, $n synthetic source-like files (.rs/.py/.ts/.md, 1-8 KB, 10 per dir, 3 levels) in one git commit; mirror mount at bench-work/socket/mnt with \`--socket bench-work/socket/wfs.sock\`"
    echo "- command: \`SOCKET_FILES=$n SOCKET_OBSERVED=$obs SOCKET_SECS=$secs SOCKET_CLIENTS=$clients SOCKET_LOAD=$kind SOCKET_NO_PARSE=${SOCKET_NO_PARSE:-0} scripts/bench.sh socket\`; load average before mounting: $la0"
    echo "- observed: $want files spread over \`git ls-files\`, read with \`xargs -d '\\n' -n 16 cat\` through the mount; live entries (entries.list): $entries before the phases, $after after them"
    echo "- each phase: \`target/release/examples/socket_load --socket bench-work/socket/wfs.sock --clients C --secs S --method M\` (projection.get params: anthropic, budget 8000), phases in this order; latency per call (p50..mean) measured in the client from writing the request until the whole response line has arrived; each client then parses the response (untimed there, but on the same CPUs): parse mean = its mean time per call, call p50/p99 = request to parsed response (what this table reported as p50/p99 before 2026-11-23); server mean = the daemon's own mean time in the method during the phase (its \`stats\` histogram, before and after); parse = one thread parsing one response, after the phase; load average after each phase includes the benchmark's own clients"
    echo "- load: $desc; rounds finished during the loaded phases: ${rounds:-0}; $stats_json"
    echo
    echo "| phase | load on the mount | method | clients | s | calls | errors | calls/s | p50 ms | p95 ms | p99 ms | max ms | mean ms | server mean ms | parse ms | parse mean ms | call p50 ms | call p99 ms | tokens | load avg after |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    local l load la rest
    for l in "${lines[@]}"; do
      load=${l%%|*}; rest=${l#*|}; la=${rest%%|*}; rest=${rest#*|}
      echo "$rest" | awk -v load="$load" -v la="$la" '{
        for (i = 2; i <= NF; i++) { k = $i; sub(/=.*/, "", k); v = $i; sub(/^[^=]*=/, "", v); f[k] = v }
        printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
          f["label"], load, f["method"], f["clients"], f["secs"], f["count"], f["errors"], f["rate_per_s"],
          f["p50_ms"], f["p95_ms"], f["p99_ms"], f["max_ms"], f["mean_ms"], f["server_mean_ms"],
          f["parse_ms"], f["parse_mean_ms"], f["call_p50_ms"], f["call_p99_ms"], f["tokens"], la }'
    done
    echo
    echo "Target (issue 4): projection.get p50 <= 2 ms, p99 <= 10 ms with the mount under load."
  } | record
}

for p in "${PARTS[@]}"; do
  case "$p" in
    fs) bench_fs ;;
    fs-user) bench_fs_user ;;
    latency) bench_latency ;;
    rss) bench_rss ;;
    socket) bench_socket ;;
    overhead) bench_overhead ;;
    hook) bench_hook ;;
    proxy) bench_proxy ;;
    proxy-codex) bench_proxy codex ;;
    sessions) bench_sessions ;;
    catchup) bench_catchup ;;
    restart) bench_restart ;;
    watcher) bench_watcher ;;
    transport) bench_transport ;;
  esac
done
[ "${BENCH_NO_RECORD:-0}" = 1 ] || wfs_log "results appended to $MD"
