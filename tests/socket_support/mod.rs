//! Shared fixtures for the socket tests: a world over a temporary tree (no FUSE), a server on a
//! socket in its own temporary directory, observations fed with `world.ingest`, and a raw
//! line-level client.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use worldfs::observation::{ExternalChange, Observation, Op};
use worldfs::socket::{Server, ServerOptions};
use worldfs::world::{ProcInfo, StaticProcesses, World};

pub const CLAUDE: u32 = 100;
pub const BASH: u32 = 101;
pub const CAT: u32 = 200;
pub const INDEXER: u32 = 900;

pub fn must<T, E: std::fmt::Display>(r: Result<T, E>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn procs() -> Arc<StaticProcesses> {
    let chain: &[(u32, &str)] = &[(BASH, "bash"), (CLAUDE, "claude")];
    Arc::new(StaticProcesses::new([
        ProcInfo::synthetic(CLAUDE, "claude", &["claude"], &[(1, "zsh")]),
        ProcInfo::synthetic(BASH, "bash", &["bash", "-c", "..."], &[(CLAUDE, "claude")]),
        ProcInfo::synthetic(CAT, "cat", &["cat"], chain),
        ProcInfo::synthetic(INDEXER, "rg", &["rg", "--files"], &[(1, "systemd")]),
    ]))
}

pub struct Fixture {
    pub src: tempfile::TempDir,
    /// Holds the socket; separate so the path stays short and the tree clean.
    pub sockdir: tempfile::TempDir,
    pub world: Arc<World>,
    pub server: Option<Server>,
    pub sock: PathBuf,
    seq: AtomicU64,
}

pub fn write_tree(root: &Path) {
    let w = |rel: &str, content: &str| {
        let p = root.join(rel);
        if let Some(d) = p.parent() {
            must(std::fs::create_dir_all(d));
        }
        must(std::fs::write(p, content));
    };
    w("README.md", "# demo\n\nA small project.\n");
    w("src/main.rs", "fn main() {\n    println!(\"hello\");\n}\n");
    w(
        "src/lib.rs",
        "pub fn add(a: i32, b: i32) -> i32 {\n    a + b\n}\n",
    );
    w("src/util.rs", "pub fn helper() -> u32 {\n    42\n}\n");
    w(".env", "API_KEY=hunter2\n");
    for i in 0..20 {
        w(
            &format!("pkg/m{i:02}.py"),
            &format!("X = {i}\n# {}\n", "filler ".repeat(i * 10)),
        );
    }
}

impl Fixture {
    pub fn new() -> Self {
        Self::with(|_| {})
    }

    /// A fixture whose server options `tweak` may change.
    pub fn with(tweak: impl FnOnce(&mut ServerOptions)) -> Self {
        Self::with_config(worldfs::world::Config::default(), tweak)
    }

    /// A fixture whose world uses `config`.
    #[allow(dead_code)] // not every test binary that includes this module uses it
    pub fn with_config(
        config: worldfs::world::Config,
        tweak: impl FnOnce(&mut ServerOptions),
    ) -> Self {
        let src = must(tempfile::tempdir());
        write_tree(src.path());
        let sockdir = must(tempfile::Builder::new().prefix("wfs").tempdir_in("/tmp"));
        let world = must(
            must(World::builder_at(src.path()))
                .config(config)
                .process_source(procs())
                .build(),
        );
        let sock = sockdir.path().join("s.sock");
        let mut opts = ServerOptions::new(&sock);
        opts.source = Some(src.path().to_path_buf());
        opts.mount_point = Some(src.path().to_path_buf());
        // As a mount with its watcher serves it. Tests that change files behind the world's back
        // say so through observations, as the watcher would.
        opts.cache_renders = true;
        tweak(&mut opts);
        let server = must(Server::start(Arc::clone(&world), opts));
        Fixture {
            src,
            sockdir,
            world,
            server: Some(server),
            sock,
            seq: AtomicU64::new(0),
        }
    }

    pub fn root(&self) -> &Path {
        self.src.path()
    }

    fn obs(&self, pid: u32, path: &str, op: Op) -> Observation {
        Observation {
            seq: self.seq.fetch_add(1, Ordering::Relaxed) + 1,
            time: SystemTime::now(),
            op,
            path: PathBuf::from(path),
            pid,
            caller: None,
        }
    }

    pub fn last_seq(&self) -> u64 {
        self.seq.load(Ordering::Relaxed)
    }

    /// The agent (through `cat`) reads `path`.
    pub fn read(&self, path: &str) {
        self.read_as(CAT, path);
    }

    pub fn read_as(&self, pid: u32, path: &str) {
        let op = Op::Open {
            read: true,
            write: false,
            truncate: false,
            created: false,
        };
        self.world.ingest([self.obs(pid, path, op)]);
    }

    pub fn list_dir(&self, path: &str) {
        self.world.ingest([self.obs(CLAUDE, path, Op::ReadDir)]);
    }

    /// The agent rewrites `path` with `content` (through the mount, so observed).
    pub fn write(&self, path: &str, content: &str) {
        self.agent_writes(path, content, false);
    }

    /// The agent creates `path` with `content` (through the mount, so observed).
    pub fn create(&self, path: &str, content: &str) {
        self.agent_writes(path, content, true);
    }

    fn agent_writes(&self, path: &str, content: &str, created: bool) {
        must(std::fs::write(self.root().join(path), content));
        let open = Op::Open {
            read: false,
            write: true,
            truncate: !created,
            created,
        };
        let a = self.obs(CLAUDE, path, open);
        let b = self.obs(CLAUDE, path, Op::Close { wrote: true });
        self.world.ingest([a, b]);
    }

    /// The watcher cannot watch `path` (inotify's limit): changes below it may go unseen.
    #[allow(dead_code)] // not every test binary that includes this module uses it
    pub fn lose_sight_of(&self, path: &str) {
        let op = Op::External {
            change: ExternalChange::Unwatched,
        };
        self.world.ingest([self.obs(0, path, op)]);
    }

    /// Someone creates `path` behind the mount (the watcher reports it).
    #[allow(dead_code)] // not every test binary that includes this module uses it
    pub fn external_create(&self, path: &str) {
        let op = Op::External {
            change: ExternalChange::Created,
        };
        self.world.ingest([self.obs(0, path, op)]);
    }

    /// Someone changes `path` behind the mount (the watcher reports it).
    pub fn external_write(&self, path: &str, content: &str) {
        must(std::fs::write(self.root().join(path), content));
        let op = Op::External {
            change: ExternalChange::Modified,
        };
        self.world.ingest([self.obs(0, path, op)]);
    }

    pub fn connect(&self) -> Conn {
        Conn::open(&self.sock)
    }

    pub fn stop(&mut self) {
        self.server.take();
    }
}

/// A raw client: writes lines, reads lines.
pub struct Conn {
    pub reader: BufReader<UnixStream>,
    pub writer: UnixStream,
    next: u64,
}

impl Conn {
    pub fn open(path: &Path) -> Conn {
        let s = must(UnixStream::connect(path));
        must(s.set_read_timeout(Some(Duration::from_secs(20))));
        let writer = must(s.try_clone());
        Conn {
            reader: BufReader::new(s),
            writer,
            next: 1000,
        }
    }

    pub fn send_raw(&mut self, bytes: &[u8]) {
        must(self.writer.write_all(bytes));
    }

    pub fn read_value(&mut self) -> Value {
        let mut line = String::new();
        let n = must(self.reader.read_line(&mut line));
        assert!(n > 0, "connection closed");
        must(serde_json::from_str(&line))
    }

    /// Reads until the response with `id` (skipping notifications).
    pub fn response_for(&mut self, id: &Value) -> Value {
        loop {
            let v = self.read_value();
            if v.get("id") == Some(id) {
                return v;
            }
            assert!(v.get("method").is_some(), "unexpected response {v}");
        }
    }

    /// Calls `method`; returns the whole response object.
    pub fn call_raw(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = json!(self.next);
        let req = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let mut line = must(serde_json::to_vec(&req));
        line.push(b'\n');
        self.send_raw(&line);
        self.response_for(&id)
    }

    /// Calls `method` and returns its result, panicking on an error.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        let r = self.call_raw(method, params);
        match r.get("result") {
            Some(v) => v.clone(),
            None => panic!("{method} failed: {r}"),
        }
    }

    /// Calls `method` expecting an error; returns (code, message).
    pub fn call_err(&mut self, method: &str, params: Value) -> (i64, String) {
        let r = self.call_raw(method, params);
        error_of(&r)
    }
}

pub fn error_of(r: &Value) -> (i64, String) {
    let e = r
        .get("error")
        .unwrap_or_else(|| panic!("expected an error, got {r}"));
    (
        e["code"].as_i64().unwrap_or(0),
        e["message"].as_str().unwrap_or("").to_string(),
    )
}
