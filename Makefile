# worldfs: build, demo, tests, lint, benchmarks. Every target is a thin wrapper; the work is
# in scripts/ (each script has --help or a header comment).
#
#   make build          cargo build --release (target/release/worldfs)
#   make install        install worldfs (stripped; built if missing) as $(DESTDIR)$(PREFIX)/bin/worldfs (PREFIX=/usr/local)
#   make uninstall      remove it
#   make run            mount the example workspace (examples/workspace) in place and show it
#   make test           cargo test --all-targets + pjdfstest + fsx + the mount suites over io_uring;
#                       last line "N passed, N failed"
#   make lint           cargo fmt --check + cargo clippy --all-targets -D warnings
#   make bench          all four benchmarks below, appended to BENCHMARKS.md
#   make bench-fs       fsbench native vs mount on a 10k-file git tree (BENCH_RUNS=5)
#   make bench-fs-user  the same with the mount and fsbench run as nobody (fusermount3, daemon I/O)
#   make bench-latency  external-change visibility latency (100 trials)
#   make bench-rss      daemon RSS on a 100k-file tree after find, git status and 2,000 agent reads
#   make bench-socket   projection.get latency, 16 socket clients, 500 observed files of a 20k-file
#                       tree, idle and under fsbench load on the mount (SOCKET_SECS=30)
#   make bench-overhead observation on vs off, two mounts side by side, fsbench run twice with the sides swapped (<= 5%)
#   make bench-restart  keeping the world across restarts: save, unmount, mounts that restore
#                       a world of 20,000 entries against mounts with --no-state
#   make bench-watcher fanotify against inotify: time to set the watch on 20,000 directories,
#                       daemon CPU while files churn elsewhere on the file system, change latency
#   make bench-transport FUSE-over-io_uring against /dev/fuse: a warm grep -r of the fsbench tree
#                       and 3,000 small creates on a tmpfs, through the mount and natively
#   make bench-render   projection render time after a change, in a world of 20,000 live entries
#                       (in-process; RENDER_FILES=N, RENDER_RENDERS=R)
#   make bench-replay   replay every trace in ../shared/traces/dev (docs/replay.md); summary -> BENCHMARKS.md
#   make check-claude-code  a real Claude Code (npm, CLAUDE_CODE_VERSION) driven through a scripted
#                       bug fix on a mount, with the hook and the proxy, against a stand-in API;
#                       checks what the mount, the hook and the proxy made of it (needs npm)
#   make check-codex    a real Codex CLI (npm, CODEX_VERSION) driven through a scripted fix on a
#                       mount with its hooks, against a stand-in API; checks what the mount and
#                       the hook made of it (needs npm)
#   make pjdfstest      only pjdfstest (PJD_ARGS="--native" for the baseline)
#   make fsx            only fsx (FSX_ARGS="--native -N 10000" and so on)
#   make clean          cargo clean and remove bench-work/

SHELL := /bin/bash
CARGO ?= cargo
PREFIX ?= /usr/local

.PHONY: build install uninstall run test lint bench bench-fs bench-fs-user bench-latency bench-rss bench-socket bench-overhead bench-hook bench-proxy bench-proxy-codex bench-sessions bench-catchup bench-restart bench-watcher bench-transport bench-render bench-replay check-claude-code check-codex pjdfstest fsx clean

build:
	$(CARGO) build --release

# A new file renamed over the old one: a running daemon keeps its program, and an agent's
# hook started meanwhile finds one whole. Built only when missing: `sudo make install` after
# `make build` needs no cargo in root's PATH.
install:
	@test -x target/release/worldfs || $(MAKE) build
	install -d $(DESTDIR)$(PREFIX)/bin
	install -s -m 0755 target/release/worldfs $(DESTDIR)$(PREFIX)/bin/.worldfs.new
	mv -f $(DESTDIR)$(PREFIX)/bin/.worldfs.new $(DESTDIR)$(PREFIX)/bin/worldfs

uninstall:
	rm -f $(DESTDIR)$(PREFIX)/bin/worldfs

run: build
	WFS_NO_BUILD=1 scripts/run-example.sh

test:
	scripts/test.sh

# both checks run even if the first fails; the target fails if either did
lint:
	@rc=0; set -x; \
	$(CARGO) fmt --all -- --check || rc=1; \
	$(CARGO) clippy --all-targets -- -D warnings || rc=1; \
	exit $$rc

bench: build
	scripts/bench.sh all

bench-fs: build
	scripts/bench.sh fs

bench-fs-user: build
	scripts/bench.sh fs-user

bench-latency: build
	scripts/bench.sh latency

bench-rss: build
	scripts/bench.sh rss

bench-socket: build
	scripts/bench.sh socket

bench-overhead: build
	scripts/bench.sh overhead

bench-hook: build
	scripts/bench.sh hook

bench-proxy: build
	scripts/bench.sh proxy

bench-proxy-codex: build
	scripts/bench.sh proxy-codex

bench-sessions: build
	scripts/bench.sh sessions

bench-catchup: build
	scripts/bench.sh catchup

bench-restart: build
	scripts/bench.sh restart

bench-watcher: build
	scripts/bench.sh watcher

bench-transport: build
	scripts/bench.sh transport

RENDER_FILES ?= 20000
RENDER_RENDERS ?= 30

# prints only; record results in BENCHMARKS.md by hand, with the command
bench-render:
	$(CARGO) run --release --example render_bench -- --files $(RENDER_FILES) --renders $(RENDER_RENDERS)

REPLAY_TRACES ?= ../shared/traces/dev
REPLAY_OUT ?= bench-work/replay

# replays every trace through a real mount; per-trace CSV/JSON, summary.md and tokens.svg in
# $(REPLAY_OUT); the summary table is appended to BENCHMARKS.md with the command that made it
bench-replay: build
	@set -eo pipefail; mkdir -p $(REPLAY_OUT); cmd="target/release/worldfs replay $(REPLAY_TRACES)/*.jsonl --out $(REPLAY_OUT)"; \
	target/release/worldfs replay $(REPLAY_TRACES)/*.jsonl --out $(REPLAY_OUT) > $(REPLAY_OUT).md.tmp; \
	{ printf '\n## Replay benchmark (%s, %s)\n\nCommand: `%s` (`make bench-replay`, commit %s). Plot: `$(REPLAY_OUT)/tokens.svg`.\n\n' \
	    "$$(date -u +%Y-%m-%d)" "$$(uname -srm)" "$$cmd" "$$(git rev-parse --short HEAD 2>/dev/null || echo none)"; \
	  cat $(REPLAY_OUT).md.tmp; } >> BENCHMARKS.md; \
	cat $(REPLAY_OUT).md.tmp; rm -f $(REPLAY_OUT).md.tmp

check-claude-code: build
	scripts/claude-live.sh

check-codex: build
	scripts/codex-live.sh

pjdfstest:
	scripts/pjdfstest.sh $(PJD_ARGS)

fsx:
	scripts/fsx.sh $(FSX_ARGS)

clean:
	@if grep -q " $(CURDIR)/bench-work" /proc/self/mountinfo; then \
	  echo "make clean: something is still mounted under bench-work/; not removing it" >&2; exit 1; fi
	$(CARGO) clean
	rm -rf bench-work
