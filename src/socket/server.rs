//! The socket server: binding, the accept loop, one thread per connection (capped), the peer
//! credential check, bounded request lines and write timeouts.
//!
//! Why threads and not an event loop: requests are short and CPU-bound (a projection is a few
//! milliseconds of selection and rendering), connections are few (one per harness, a handful of
//! CLI calls), and a thread per connection makes "a slow client never blocks the others" hold
//! without any shared queue: a client that stops reading only stalls its own thread, and only
//! until the write timeout closes it.

use std::collections::HashMap;
use std::io::{self, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::Sender;
use parking_lot::Mutex;
use serde_json::Value;
use tracing::{debug, info, warn};

use super::methods::{self, Connection, DaemonInfo, EmittedFn, Shared};
use super::paths::{self, PathError};
use super::protocol::{self, Line, LineReader, RpcError, code};
use super::render::{Projections, Renderer};
use super::stop::StopSignal;
use crate::fs::op_stats::OpStats;
use crate::world::World;

/// How the server runs.
#[derive(Clone)]
pub struct ServerOptions {
    pub path: PathBuf,
    /// Create the socket's directory private (0700) and refuse one that is not ours. Right for
    /// the default runtime directories; a custom `--socket` lives wherever the user put it.
    pub private_dir: bool,
    pub max_connections: usize,
    /// A client that does not read its responses for this long is disconnected.
    pub write_timeout: Duration,
    pub max_line: usize,
    /// Notifications queued per connection before further observations are dropped.
    pub notification_queue: usize,
    pub source: Option<PathBuf>,
    pub mount_point: Option<PathBuf>,
    pub op_stats: Option<Arc<OpStats>>,
    pub emitted: Option<EmittedFn>,
    pub renderer: Arc<dyn Renderer>,
    /// Reuse a rendered projection while the world's generation, the turn and the harness state
    /// are unchanged. Only sound when every change to SOURCE reaches the world (the watcher
    /// runs); off by default.
    pub cache_renders: bool,
}

impl ServerOptions {
    /// Defaults: 256 connections, 10 s write timeout, 1 MiB lines, the real projection renderers.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            private_dir: false,
            max_connections: 256,
            write_timeout: Duration::from_secs(10),
            max_line: protocol::MAX_LINE,
            notification_queue: 64,
            source: None,
            mount_point: None,
            op_stats: None,
            emitted: None,
            renderer: Arc::new(Projections::default()),
            cache_renders: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error(transparent)]
    Path(#[from] PathError),
    #[error("binding the socket {path:?}: {source}")]
    Bind {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("starting the socket's {what} thread: {source}")]
    Spawn {
        what: &'static str,
        #[source]
        source: io::Error,
    },
}

/// A running server. Dropping it stops accepting, closes every connection and removes the
/// socket file (if it is still the one we bound).
pub struct Server {
    shared: Arc<Shared>,
    path: PathBuf,
    /// The socket file as bound, to remove it only while it is still this one.
    made: paths::SocketIdentity,
    stop: Arc<StopSignal>,
    live: Arc<LiveConns>,
    accept: Option<JoinHandle<()>>,
    fanout: Option<JoinHandle<()>>,
}

/// Open connections, so shutdown can close them.
#[derive(Default)]
struct LiveConns {
    streams: Mutex<HashMap<u64, UnixStream>>,
    next_id: AtomicU64,
}

impl Server {
    pub fn start(world: Arc<World>, opts: ServerOptions) -> Result<Server, ServerError> {
        let path = opts.path.clone();
        if opts.private_dir
            && let Some(dir) = path.parent()
        {
            paths::prepare_dir(dir)?;
        }
        paths::claim(&path)?;
        let bind_err = |source| ServerError::Bind {
            path: path.clone(),
            source,
        };
        let listener = UnixListener::bind(&path).map_err(bind_err)?;
        // The directory already keeps others out; 0600 says the same on the socket itself.
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
            .map_err(bind_err)?;
        let made = paths::identity_of(&std::fs::symlink_metadata(&path).map_err(bind_err)?);
        // Non-blocking, so the accept loop can poll with a timeout and notice shutdown.
        listener.set_nonblocking(true).map_err(bind_err)?;

        let info = DaemonInfo {
            socket: path.clone(),
            source: opts.source.clone(),
            mount_point: opts.mount_point.clone(),
        };
        let shared = Arc::new(Shared::new(
            Arc::clone(&world),
            Arc::clone(&opts.renderer),
            info,
            opts.op_stats.clone(),
            opts.emitted.clone(),
            opts.cache_renders,
        ));
        let fanout = shared
            .subs
            .spawn_fanout(world)
            .map_err(|source| ServerError::Spawn {
                what: "fan-out",
                source,
            })?;
        let stop = Arc::new(StopSignal::new());
        let live = Arc::new(LiveConns::default());
        let accept = {
            let shared = Arc::clone(&shared);
            let stop = Arc::clone(&stop);
            let live = Arc::clone(&live);
            std::thread::Builder::new()
                .name("worldfs-sock-accept".into())
                .spawn(move || accept_loop(&listener, &shared, &opts, &stop, &live))
        };
        let accept = match accept {
            Ok(h) => h,
            Err(source) => {
                shared.subs.stop();
                let _ = fanout.join();
                let _ = std::fs::remove_file(&path);
                return Err(ServerError::Spawn {
                    what: "accept",
                    source,
                });
            }
        };
        info!("socket listening at {}", path.display());
        Ok(Server {
            shared,
            path,
            made,
            stop,
            live,
            accept: Some(accept),
            fanout: Some(fanout),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The server-wide state (for tests and for embedding).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Stops the server (same as dropping it).
    pub fn shutdown(self) {}
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.stop();
        if let Some(h) = self.accept.take() {
            let _ = h.join();
        }
        self.shared.subs.stop();
        self.shared.world.recent().wake();
        if let Some(h) = self.fanout.take() {
            let _ = h.join();
        }
        for (_, s) in self.live.streams.lock().drain() {
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        // Only remove the file if it is still ours: a new daemon may have replaced it.
        if paths::identity(&self.path) == Some(self.made) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// The uid of the process at the other end of `s` (SO_PEERCRED).
pub fn peer_uid(s: &UnixStream) -> io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of the sizes given; the fd is open.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Whether a peer with uid `peer` may talk to a daemon running as `me`: the same user, or root
/// (which could read the daemon's memory anyway).
pub fn peer_allowed(peer: u32, me: u32) -> bool {
    peer == me || peer == 0
}

fn euid() -> u32 {
    // SAFETY: geteuid cannot fail and has no preconditions.
    unsafe { libc::geteuid() }
}

/// Sends one error line to a connection we are about to close, without waiting long for it.
fn refuse(mut s: UnixStream, err: RpcError) {
    let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
    let _ = s.write_all(&protocol::to_line(&protocol::response(
        &Value::Null,
        &Err(err),
    )));
    let _ = s.shutdown(std::net::Shutdown::Both);
}

fn accept_loop(
    l: &UnixListener,
    shared: &Arc<Shared>,
    opts: &ServerOptions,
    stop: &StopSignal,
    live: &Arc<LiveConns>,
) {
    let me = euid();
    while !stop.is_stopped() {
        if !stop.wait_readable(l, Duration::from_millis(100)) {
            continue;
        }
        let stream = match l.accept() {
            Ok((s, _)) => s,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                continue;
            }
            Err(e) => {
                // EMFILE and friends: back off instead of spinning; existing clients go on.
                warn!("accepting a socket connection: {e}");
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        if let Err(e) = stream.set_nonblocking(false) {
            debug!("dropping a connection: {e}");
            continue;
        }
        match peer_uid(&stream) {
            Ok(uid) if peer_allowed(uid, me) => {}
            Ok(uid) => {
                shared.conns.refused_peer.fetch_add(1, Ordering::Relaxed);
                warn!("refused a socket connection from uid {uid}");
                refuse(
                    stream,
                    RpcError::new(
                        code::UNAVAILABLE,
                        format!("connection refused: uid {uid} is not the daemon's user ({me})"),
                    ),
                );
                continue;
            }
            Err(e) => {
                shared.conns.refused_peer.fetch_add(1, Ordering::Relaxed);
                refuse(
                    stream,
                    RpcError::new(
                        code::UNAVAILABLE,
                        format!("connection refused: cannot check peer credentials: {e}"),
                    ),
                );
                continue;
            }
        }
        let open = shared.conns.open.load(Ordering::Acquire);
        if open >= opts.max_connections as u64 {
            shared.conns.refused_busy.fetch_add(1, Ordering::Relaxed);
            refuse(
                stream,
                RpcError::new(
                    code::UNAVAILABLE,
                    format!("too many connections ({open}, the limit); close idle ones and retry"),
                ),
            );
            continue;
        }
        if let Err(e) = start_connection(stream, shared, opts, live) {
            warn!("cannot serve a socket connection: {e}");
        }
    }
}

/// The writing half of a connection, shared by the request thread and the notifier thread so
/// that lines never interleave.
struct Writer {
    stream: Mutex<UnixStream>,
    broken: AtomicBool,
}

impl Writer {
    fn write_line(&self, line: &[u8]) -> io::Result<()> {
        if self.broken.load(Ordering::Acquire) {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let mut s = self.stream.lock();
        let r = s.write_all(line);
        if r.is_err() {
            // Timed out or gone: close both directions so the request thread stops reading.
            self.broken.store(true, Ordering::Release);
            let _ = s.shutdown(std::net::Shutdown::Both);
        }
        r
    }
}

struct Conn {
    id: u64,
    writer: Arc<Writer>,
    queue_len: usize,
    notifications: OnceLock<Sender<Vec<u8>>>,
}

impl Connection for Conn {
    fn id(&self) -> u64 {
        self.id
    }

    fn notifications(&self) -> Result<Sender<Vec<u8>>, String> {
        if let Some(tx) = self.notifications.get() {
            return Ok(tx.clone());
        }
        let (tx, rx) = crossbeam_channel::bounded::<Vec<u8>>(self.queue_len);
        let writer = Arc::clone(&self.writer);
        std::thread::Builder::new()
            .name("worldfs-sock-notify".into())
            .spawn(move || {
                for line in rx.iter() {
                    if writer.write_line(&line).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| format!("cannot start the notification thread: {e}"))?;
        // Only the connection's own thread calls this, so the cell is still empty.
        Ok(self.notifications.get_or_init(|| tx).clone())
    }
}

fn start_connection(
    stream: UnixStream,
    shared: &Arc<Shared>,
    opts: &ServerOptions,
    live: &Arc<LiveConns>,
) -> io::Result<()> {
    stream.set_write_timeout(Some(opts.write_timeout))?;
    let reader = stream.try_clone()?;
    let closer = stream.try_clone()?;
    let id = live.next_id.fetch_add(1, Ordering::Relaxed) + 1;
    let conn = Conn {
        id,
        writer: Arc::new(Writer {
            stream: Mutex::new(stream),
            broken: AtomicBool::new(false),
        }),
        queue_len: opts.notification_queue.max(1),
        notifications: OnceLock::new(),
    };
    live.streams.lock().insert(id, closer);
    shared.conns.open.fetch_add(1, Ordering::AcqRel);
    shared.conns.total.fetch_add(1, Ordering::Relaxed);
    let shared2 = Arc::clone(shared);
    let live2 = Arc::clone(live);
    let max_line = opts.max_line;
    let spawned = std::thread::Builder::new()
        .name("worldfs-sock-conn".into())
        .spawn(move || {
            serve(&shared2, &conn, reader, max_line);
            shared2.subs.drop_connection(conn.id);
            live2.streams.lock().remove(&conn.id);
            shared2.conns.open.fetch_sub(1, Ordering::AcqRel);
        });
    if let Err(e) = spawned {
        live.streams.lock().remove(&id);
        shared.conns.open.fetch_sub(1, Ordering::AcqRel);
        return Err(e);
    }
    Ok(())
}

/// Reads requests and answers them until the client closes or the connection breaks.
fn serve(shared: &Shared, conn: &Conn, reader: UnixStream, max_line: usize) {
    let mut lines = LineReader::new(BufReader::with_capacity(64 * 1024, reader), max_line);
    loop {
        let out = match lines.next_line() {
            Ok(Line::Data(line)) => methods::handle_line(shared, conn, &line),
            Ok(Line::TooLong { len }) => {
                shared.conns.lines_too_long.fetch_add(1, Ordering::Relaxed);
                shared.conns.errors.fetch_add(1, Ordering::Relaxed);
                Some(protocol::to_line(&protocol::response(
                    &Value::Null,
                    &Err(RpcError::line_too_long(len)),
                )))
            }
            Ok(Line::Eof) => break,
            Err(e) => {
                debug!("socket connection {} read error: {e}", conn.id);
                break;
            }
        };
        if let Some(out) = out
            && conn.writer.write_line(&out).is_err()
        {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_allowed_are_self_and_root() {
        assert!(peer_allowed(1000, 1000));
        assert!(peer_allowed(0, 1000));
        assert!(!peer_allowed(1001, 1000));
        assert!(!peer_allowed(1000, 0), "a root daemon refuses other users");
    }

    #[test]
    fn peer_uid_of_a_socketpair_is_ours() {
        let (a, _b) = UnixStream::pair().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(peer_uid(&a).ok(), Some(euid()));
    }
}
