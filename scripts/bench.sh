#!/usr/bin/env bash
# bench.sh (`make bench`, `make bench-fs`, `make bench-latency`, `make bench-rss`)
#
#   scripts/bench.sh [all|fs|latency|rss]...
#
#   fs       ../shared/tools/fsbench native vs a worldfs mirror mount, on
#              bench-work/native/tree   `cargo vendor` of worldfs's dependencies (10k+ files),
#                                       made a git repository with one commit
#              bench-work/native/build  a copy of this crate with its dependencies fetched
#            mounted with `worldfs mount bench-work/native bench-work/mnt`.
#   latency  external-change visibility: examples/change_latency.rs, 100 trials per mode
#            (overwrite in place, rename over), on a mirror mount of bench-work/latency/src
#   rss      daemon VmRSS/VmHWM on a synthetic 100k-file git tree (bench-work/rss/tree) after
#            mounting, after `find`, after `git status`, through a mirror mount
#
# Each part appends a dated section (machine, commit, exact commands, results) to
# BENCHMARKS.md. Environment:
#   BENCH_RUNS=5          fsbench timed runs per side (-n)
#   FSBENCH_ARGS="..."    extra fsbench options (e.g. "-w find,stat -W 0")
#   LATENCY_TRIALS=100    trials per latency mode
#   RSS_FILES=100000      files in the rss tree
#   BENCH_NO_RECORD=1     print only, do not touch BENCHMARKS.md
#   WORLDFS_MOUNT_ARGS    extra arguments for `worldfs mount` (e.g. "--io daemon")
set -euo pipefail
export LC_ALL=C
WFS_PROG=bench.sh
# shellcheck source=scripts/lib-mount.sh
. "$(dirname "$0")/lib-mount.sh"

PARTS=("$@")
[ ${#PARTS[@]} -gt 0 ] || PARTS=(all)
for p in "${PARTS[@]}"; do
  case "$p" in
    all) PARTS=(fs latency rss); break ;;
    fs|latency|rss) ;;
    -h|--help) sed -n '2,27s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) wfs_die "unknown part $p (all, fs, latency, rss)" ;;
  esac
done

wfs_init
wfs_find_bin
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
commit() {
  local c
  c=$(git -C "$WFS_ROOT" rev-parse --short HEAD 2> /dev/null) || { echo "(no commit yet)"; return; }
  if [ -n "$(git -C "$WFS_ROOT" status --porcelain --untracked-files=no 2> /dev/null)" ]; then c="$c+uncommitted changes"; fi
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
    echo "- worldfs: commit $(commit); \`$MOUNT_DESC\`"
  } >> "$MD"
}
record() { [ "${BENCH_NO_RECORD:-0}" = 1 ] || cat >> "$MD"; }
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
  git -C "$tree" -c user.name=bench -c user.email=bench@localhost -c commit.gpgsign=false \
    commit -q -m "vendored dependencies of worldfs"
  echo "$want" > "$1/.tree-ready"
}
ensure_build() {  # NATIVE/build: a copy of this crate, dependencies fetched
  local b=$1/build d
  rm -rf "$b"; mkdir -p "$b"
  cp Cargo.toml Cargo.lock "$b/"
  for d in src build.rs examples tests benches; do [ -e "$d" ] && cp -a "$d" "$b/"; done
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
  local native=$BW/native mnt=$BW/mnt out=$BW/fsbench.out files
  mkdir -p "$native" "$mnt"
  ensure_tree "$native"
  ensure_build "$native"
  ensure_rg
  files=$(git -C "$native/tree" ls-files | wc -l)
  [ "$files" -ge 10000 ] || wfs_log "WARNING: the bench tree has only $files files (< 10000)"
  wfs_mount "$native" "$mnt" -- "${MOUNT_ARGS[@]}"
  local cmd=("$FSBENCH" -n "$RUNS" -l "worldfs $(commit)" -r "$BW/fsbench-raw.tsv")
  local extra=()
  read -r -a extra <<< "${FSBENCH_ARGS:-}"
  cmd+=("${extra[@]}" "$native" "$mnt")
  wfs_log "running: ${cmd[*]}"
  local t0=$SECONDS rc=0
  "${cmd[@]}" 2>&1 | tee "$out" || rc=$?
  wfs_unmount "$mnt" || wfs_log "WARNING: the mount did not unmount cleanly"
  [ "$rc" = 0 ] || wfs_log "WARNING: fsbench exited with status $rc"

  md_header "fsbench, native vs worldfs"
  local shown=${cmd[*]}
  shown=${shown//$WFS_ROOT\//}
  shown=${shown//$SHARED\//..\/shared\/}
  {
    echo "- tree: bench-work/native/tree, $files files in git (cargo vendor of worldfs's dependencies, one commit); build: a copy of worldfs, dependencies fetched"
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
proc_mem() {  # PID -> "rss_mib hwm_mib fds threads"
  local r h t fds
  read -r r h t < <(awk '/^VmRSS/ { r = $2 } /^VmHWM/ { h = $2 } /^Threads/ { t = $2 }
       END { printf "%.1f %.1f %s\n", r / 1024, h / 1024, t }' "/proc/$1/status")
  fds=$(find "/proc/$1/fd" -mindepth 1 -maxdepth 1 2> /dev/null | wc -l)
  echo "$r $h $fds $t"
}
bench_rss() {
  local n=${RSS_FILES:-100000} dir=$BW/rss rows=() t0 res
  ensure_rss_tree "$dir/tree" "$n"
  mkdir -p "$dir/mnt"
  wfs_mount "$dir/tree" "$dir/mnt" -- "${MOUNT_ARGS[@]}"
  local pid=$WFS_PID
  step() {  # LABEL COMMAND...
    local label=$1 secs; shift
    t0=$EPOCHREALTIME
    res=$("$@" 2>&1 | tail -n 1) || wfs_log "WARNING: $label failed: $res"
    secs=$(awk -v a="$t0" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.2f", b - a }')
    read -r r h f t <<< "$(proc_mem "$pid")"
    rows+=("| $label | $secs | $r | $h | $f | $t |")
    wfs_log "$label: ${secs}s, VmRSS ${r} MiB, VmHWM ${h} MiB, fds $f, threads $t"
  }
  count() { "$@" | wc -l; }
  step "after mount" true
  step "find -type f (cold)" count find "$dir/mnt" -type f
  step "find -type f (again)" count find "$dir/mnt" -type f
  step "git status" count git -C "$dir/mnt" status --porcelain
  step "git status (again)" count git -C "$dir/mnt" status --porcelain
  # shellcheck disable=SC2016  # $1 expands in the inner shell
  step "stat every file" count bash -c 'find "$1" -type f -not -path "*/.git/*" -print0 | xargs -0 stat -c %i' _ "$dir/mnt"
  wfs_unmount "$dir/mnt" || wfs_log "WARNING: the mount did not unmount cleanly"
  md_header "daemon memory on a $n-file tree"
  {
    echo "- tree: bench-work/rss/tree, $n synthetic files (1000 dirs of 100, 40-240 bytes each) in one git commit; mount: bench-work/rss/mnt"
    echo "- measured from /proc/PID/status of the daemon after each step (steps run in this order); fds = open descriptors of the daemon"
    echo
    echo "| after step | step s | VmRSS MiB | VmHWM MiB | fds | threads |"
    echo "|---|---|---|---|---|---|"
    printf '%s\n' "${rows[@]}"
  } | record
}

for p in "${PARTS[@]}"; do
  case "$p" in
    fs) bench_fs ;;
    latency) bench_latency ;;
    rss) bench_rss ;;
  esac
done
[ "${BENCH_NO_RECORD:-0}" = 1 ] || wfs_log "results appended to $MD"
