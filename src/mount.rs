//! `worldfs mount` and `worldfs unmount`: checks, the FUSE session, signals, clean teardown.

use std::ffi::CString;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use fuser::{Config, MountOption, Session, SessionACL};
use tracing::{info, warn};

use crate::fs::self_changes::SelfChanges;
use crate::fs::{
    FsOptions, InodeStore, IoMode, IoUringMode, KernelCache, Passthrough, io_uring_available, sys,
    watcher::{WatchWith, Watcher},
};
use crate::mountinfo;
use crate::observation::ObservationSink;
use crate::runtime::Daemon;
use crate::world::snapshot::{self, Saver};
use crate::world::{Config as WorldConfig, World};

/// Everything `worldfs mount` needs, already parsed.
#[derive(Debug, Clone)]
pub struct MountConfig {
    pub source: PathBuf,
    pub mountpoint: Option<PathBuf>,
    pub io_mode: IoMode,
    /// Transport: FUSE-over-io_uring or /dev/fuse.
    pub io_uring: IoUringMode,
    pub observe: bool,
    pub threads: usize,
    pub cache_timeout: Duration,
    /// `None` with `--no-watch`.
    pub watch: Option<WatchWith>,
    /// Answer FUSE_STATX with the birth time (`--birth-times`).
    pub birth_times: bool,
    /// `worldfs.toml` for the world cache; defaults apply without one.
    pub config: Option<PathBuf>,
    /// Append-only JSONL journal of observations.
    pub journal: Option<PathBuf>,
    /// Socket path; the default is derived from the mount point.
    pub socket: Option<PathBuf>,
    /// Where the world is kept across restarts.
    pub state: StateFile,
    /// Start empty even if a world was kept.
    pub fresh: bool,
}

/// Where a mount keeps its world across restarts (`world::snapshot`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateFile {
    /// `$XDG_STATE_HOME/worldfs/NAME.json`; a file there that cannot be used is set aside and
    /// the mount starts empty.
    Default,
    /// A file the user named: one that cannot be used stops the mount.
    At(PathBuf),
    Off,
}

/// Where and what to mount, after validation.
struct Plan {
    source: PathBuf,
    target: PathBuf,
}

fn validate(cfg: &MountConfig) -> anyhow::Result<Plan> {
    let source = std::fs::canonicalize(&cfg.source)
        .with_context(|| format!("SOURCE {} does not exist", cfg.source.display()))?;
    if !source.is_dir() {
        bail!("SOURCE {} is not a directory", source.display());
    }
    let target = match &cfg.mountpoint {
        None => source.clone(),
        Some(m) => {
            let m = std::fs::canonicalize(m)
                .with_context(|| format!("MOUNTPOINT {} does not exist", m.display()))?;
            if !m.is_dir() {
                bail!("MOUNTPOINT {} is not a directory", m.display());
            }
            if m != source && m.starts_with(&source) {
                bail!(
                    "MOUNTPOINT {} is inside SOURCE {}: the mount would contain itself",
                    m.display(),
                    source.display()
                );
            }
            m
        }
    };
    for path in [&source, &target] {
        if let Some(m) = mountinfo::worldfs_mount_covering(path).context("reading mountinfo")? {
            bail!(
                "{} is already under a worldfs mount at {} (unmount it with `worldfs unmount {}`)",
                path.display(),
                m.mount_point.display(),
                m.mount_point.display()
            );
        }
    }
    // A daemon of this mount point whose mount was unmounted is stopping (by an unmount other
    // than `worldfs unmount`'s, which waits): it still holds the socket and the kept world,
    // which this mount would otherwise find taken.
    match crate::runtime::daemon(&target) {
        Some(Daemon::Stopping(pid)) if !crate::runtime::wait_exit(pid, DAEMON_STOP_WAIT) => {
            crate::say!(
                "worldfs: warning: the daemon of an earlier mount at {} (pid {pid}) has not \
                 exited after {} s",
                target.display(),
                DAEMON_STOP_WAIT.as_secs()
            );
        }
        Some(Daemon::Serving(pid)) => bail!(
            "the daemon of an earlier mount at {} (pid {pid}) still serves it, detached: \
             something still uses files or directories in it (a shell, an editor); mount again \
             once they are closed",
            target.display()
        ),
        _ => {}
    }
    if let Err(e) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
    {
        if e.kind() == std::io::ErrorKind::PermissionDenied {
            bail!(
                "cannot open /dev/fuse ({e}): a user other than root needs read and write access \
                 to it (most distributions make it mode 0666) and fusermount3 (package fuse3)"
            );
        }
        bail!("cannot open /dev/fuse ({e}): FUSE is not available on this machine");
    }
    Ok(Plan { source, target })
}

fn open_dir(path: &Path) -> anyhow::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_bytes()).context("path contains a NUL byte")?;
    let fd = unsafe {
        libc::open(
            c.as_ptr(),
            // Not O_PATH: open_by_handle_at needs a real descriptor as its mount fd.
            libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("opening {}", path.display()));
    }
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Mounts and serves until unmounted or signalled. Returns once nothing is mounted any more.
pub fn run(cfg: MountConfig) -> anyhow::Result<()> {
    let plan = validate(&cfg)?;
    // Decided before mounting: once INIT negotiates the ring, the kernel holds every request
    // until the ring is up, so only ask for it when it can work.
    // Why the ring is not asked for, for `worldfs status`: it took a fifth to a third off a
    // `grep -r` and 40% off small creates through the mount here (`make bench-transport`), and
    // the kernel offers it only once root turned it on.
    let mut no_ring = None;
    let io_uring = match (cfg.io_uring, io_uring_available()) {
        (IoUringMode::Off, _) => {
            no_ring = Some("--io-uring off".to_owned());
            IoUringMode::Off
        }
        (IoUringMode::On, Err(why)) => {
            bail!("--io-uring on: FUSE-over-io_uring unavailable: {why}")
        }
        (IoUringMode::Auto, Err(why)) => {
            info!("FUSE-over-io_uring not used: {why}");
            no_ring = Some(why);
            IoUringMode::Off
        }
        (mode, Ok(())) => mode,
    };
    sys::raise_nofile_limit();

    // Opened before mounting: in place, SOURCE's path will lead into the mount itself.
    let root = open_dir(&plan.source)?;
    let store = Arc::new(InodeStore::new(root).context("reading SOURCE")?);

    let watcher = match cfg.watch {
        Some(with) => {
            let t = Instant::now();
            match Watcher::start(&store, with) {
                Ok(w) => {
                    info!("watching SOURCE with {} ({:?})", w.describe(), t.elapsed());
                    Some(w)
                }
                // Asked for by name: mounting without it would not be what was asked.
                Err(e) if with == WatchWith::Fanotify => return Err(e),
                Err(e) => {
                    warn!("{e:#}");
                    None
                }
            }
        }
        None => None,
    };
    // Long kernel cache timeouts are only safe while the watcher invalidates.
    let kernel_cache = KernelCache::new(cfg.cache_timeout, watcher.is_some());
    let opts = FsOptions {
        io_mode: cfg.io_mode,
        io_uring,
        birth_times: cfg.birth_times,
        kernel_cache: kernel_cache.clone(),
    };

    let (sink, world) = if cfg.observe {
        let world_cfg = match &cfg.config {
            Some(path) => WorldConfig::load(path)?,
            None => WorldConfig::default(),
        };
        let mut builder = World::builder(store.root_fd().try_clone_to_owned()?)
            .config(world_cfg)
            .reads_by_range(cfg.io_mode == IoMode::Daemon);
        if let Some(j) = &cfg.journal {
            builder = builder.journal(j);
        }
        let world = builder.build().context("starting the world cache")?;
        let state = match state_path(&cfg, &plan)? {
            Ok(path) => match snapshot::Claim::take(&path) {
                Ok(claim) => Ok((path, claim)),
                Err(e) if cfg.state == StateFile::Default => Err(e.to_string()),
                Err(e) => return Err(anyhow::Error::new(e).context("--state")),
            },
            Err(why) => Err(why),
        };
        let state = match state {
            Ok(kept) => Some(kept),
            Err(why) => {
                if cfg.state != StateFile::Off {
                    crate::say!("worldfs: warning: the world is not kept across restarts: {why}");
                }
                world.not_kept(&why);
                None
            }
        };
        let seq = match &state {
            Some((path, _)) => restore(&cfg, &plan, &world, path)?,
            None => 0,
        };
        let (sink, rx) = ObservationSink::bounded_after(64 * 1024, seq);
        let counter = sink.clone();
        world.set_drop_counter(move || counter.dropped());
        let ingest = world
            .spawn_ingest(rx)
            .context("spawning the world ingest thread")?;
        let saver = match state {
            Some((path, claim)) => Some(
                Saver::start(
                    Arc::clone(&world),
                    path,
                    plan.source.clone(),
                    snapshot::SAVE_EVERY,
                    claim,
                )
                .context("spawning the thread that saves the world")?,
            ),
            None => None,
        };
        (sink, Some((world, ingest, saver)))
    } else {
        (ObservationSink::disabled(), None)
    };

    let self_changes = Arc::new(SelfChanges::default());
    if watcher.as_ref().is_some_and(|w| w.kind.names_processes()) {
        self_changes.by_process(store.root_dev());
    }
    let fs = Passthrough::new(store.clone(), opts, sink.clone(), self_changes.clone());
    let op_stats = fs.stats();
    *op_stats.watcher.lock() = watcher.as_ref().map(Watcher::describe);

    // Started before mounting, so a live daemon already serving this mount's socket (or an
    // unusable socket directory) aborts with nothing mounted. Kept until the mount is gone.
    // Without observation (--no-observe) there is no world, so nothing to serve.
    let server = match &world {
        Some((world, ..)) => Some(start_socket(
            &cfg,
            &plan,
            world,
            (&op_stats, &sink),
            kernel_cache.keeps_pages(),
        )?),
        None => None,
    };
    let mut config = Config::default();
    config.mount_options = vec![
        MountOption::FSName(plan.source.to_string_lossy().into_owned()),
        MountOption::Subtype("worldfs".into()),
        MountOption::DefaultPermissions,
    ];
    // As root, let every user reach the mount (the agent may run as another user); the kernel
    // still checks permissions (default_permissions).
    config.acl = if unsafe { libc::geteuid() } == 0 {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(cfg.threads.max(1));
    config.clone_fd = true;

    let (session, mut unmounter) = if unsafe { libc::geteuid() } == 0 {
        let dev = kernel_mount(&plan.source, &plan.target)?;
        let session = Session::from_fd(fs, dev, config.acl, config)
            .with_context(|| format!("starting the FUSE session on {}", plan.target.display()));
        match session {
            Ok(s) => (s, Unmounter::Direct(plan.target.clone())),
            Err(e) => {
                let _ = detach(&plan.target);
                return Err(e);
            }
        }
    } else {
        // Unprivileged: fusermount3 performs the mount (and names the type fuse.worldfs).
        let mut s = Session::new(fs, &plan.target, &config)
            .with_context(|| format!("mounting at {}", plan.target.display()))?;
        let u = s.unmount_callable();
        (s, Unmounter::Fuser(u))
    };
    let transport = match (session.io_uring(), no_ring) {
        (true, _) => "FUSE-over-io_uring (one queue per CPU)".to_owned(),
        (false, Some(why)) => format!("/dev/fuse (FUSE-over-io_uring not used: {why})"),
        (false, None) => "/dev/fuse".to_owned(),
    };
    info!(io_uring = session.io_uring(), "transport: {transport}");
    *op_stats.transport.lock() = Some(transport);
    let notifier = session.notifier();
    if let Some(w) = watcher {
        w.run(
            store.clone(),
            notifier,
            sink.clone(),
            self_changes,
            kernel_cache,
            op_stats.clone(),
        )
        .context("spawning the watcher thread")?;
    }

    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGUSR1,
    ])
    .context("installing signal handlers")?;
    let target = plan.target.clone();
    std::thread::Builder::new()
        .name("worldfs-signals".into())
        .spawn(move || {
            for sig in signals.forever() {
                if sig == signal_hook::consts::SIGUSR1 {
                    // A cheap way to see which round trips a workload costs.
                    crate::say!("worldfs: requests {:?}", op_stats.snapshot());
                    continue;
                }
                info!("signal {sig}: unmounting {}", target.display());
                if let Err(e) = unmounter.unmount() {
                    warn!("unmount failed: {e}");
                }
                break;
            }
        })
        .context("spawning the signal thread")?;

    let mut watchdog = crate::watchdog::spawn(&plan.target, server.as_ref().map(|s| s.path()))
        .map_err(|e| warn!("cannot start the watchdog process: {e}"))
        .ok();
    let _pid_file = crate::runtime::PidFile::create(
        &plan.target,
        crate::mountinfo::worldfs_dev_at(&plan.target),
    )
    .map_err(|e| warn!("cannot record the daemon pid: {e}"))
    .ok();
    if plan.source == plan.target {
        crate::say!(
            "worldfs: mounted {} in place (shells already inside it: `cd .` to enter the mount)",
            plan.source.display()
        );
    } else {
        crate::say!(
            "worldfs: mounted {} at {}",
            plan.source.display(),
            plan.target.display()
        );
    }
    if unsafe { libc::geteuid() } != 0 {
        // Both differ from what a root mount does, and neither shows anywhere else.
        crate::say!(
            "worldfs: mounted by a user other than root: only your own processes can enter it, \
             and reads and writes pass through the daemon (kernel passthrough needs root)"
        );
    }
    // Printed only once mounted, so a failed mount stays a one-line error.
    if let Some(server) = &server {
        // One write (as every `say!`): a script reading the log must not find the line
        // without its path.
        crate::say!("worldfs: socket {}", server.path().display());
    }
    let result = session.run();
    // After an external `umount` or a crash of the loop, make sure nothing stays mounted.
    unmounter_final(&plan.target);
    slow_stop_pause();
    if let Some((world, ingest, saver)) = world {
        // Finishes what is queued and flushes the journal; the watcher still holds a sender,
        // so the channel itself never closes.
        world.stop_ingest();
        if ingest.join().is_err() {
            warn!("the world ingest thread panicked");
        }
        if let Some(saver) = saver {
            match saver.finish() {
                Ok(_) => info!("world saved"),
                Err(e) => crate::say!("worldfs: warning: {e}"),
            }
        }
    }
    // Stop serving and remove the socket file once the mount is gone.
    drop(server);
    if let Some(w) = &mut watchdog {
        // Unmounted cleanly: nothing for it to do.
        let _ = w.kill();
        let _ = w.wait();
    }
    result.context("serving the mount")?;
    crate::say!("worldfs: unmounted {}", plan.target.display());
    Ok(())
}

/// `n` and its noun, singular for one.
fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Debug builds only: a daemon whose mount is gone waits `WORLDFS_DEBUG_SLOW_STOP_MS`
/// milliseconds before its last save, as one saving a big world does: a mount of the same
/// mount point made meanwhile finds the socket and the kept world still held.
fn slow_stop_pause() {
    static PAUSE: std::sync::OnceLock<Option<Duration>> = std::sync::OnceLock::new();
    crate::debug_pause::pause(&PAUSE, "WORLDFS_DEBUG_SLOW_STOP_MS");
}

/// Where this mount keeps its world, or why it keeps none. Never inside what is mounted: each
/// save would go through the mount, be observed, and call for the next save.
fn state_path(cfg: &MountConfig, plan: &Plan) -> anyhow::Result<Result<PathBuf, String>> {
    let inside = |p: &Path| {
        let p = resolved(p);
        p.starts_with(&plan.source) || p.starts_with(&plan.target)
    };
    Ok(match &cfg.state {
        StateFile::Off => Err("mounted with --no-state".into()),
        StateFile::At(p) => {
            let p = std::path::absolute(p).with_context(|| format!("--state {}", p.display()))?;
            if inside(&p) {
                bail!(
                    "--state {} is inside the mounted directory; keep the world elsewhere",
                    p.display()
                );
            }
            Ok(p)
        }
        StateFile::Default => match snapshot::default_path(&plan.source) {
            None => Err("neither XDG_STATE_HOME nor HOME is set (--state FILE keeps it)".into()),
            Some(p) if inside(&p) => Err(format!(
                "the default place to keep it, {}, is inside the mounted directory (--state FILE \
                 elsewhere keeps it)",
                p.display()
            )),
            Some(p) => Ok(p),
        },
    })
}

/// Starts `world` from the world kept at `path`, unless `--fresh`; returns the sequence number
/// to go on after. A default file that cannot be used is set aside (`.bad`; `.earlier` when it
/// is the world of a directory removed and made again since), so the next
/// save does not destroy what someone may want to look at; a file the user named stops the
/// mount instead.
fn restore(cfg: &MountConfig, plan: &Plan, world: &World, path: &Path) -> anyhow::Result<u64> {
    let forgotten = snapshot::forget_old(path);
    if forgotten > 0 {
        info!("removed {forgotten} saved worlds not used for 30 days");
    }
    if cfg.fresh {
        return Ok(0);
    }
    let start = Instant::now();
    let snap = match snapshot::load(path, &plan.source, world.source_id()) {
        Ok(Some(s)) => s,
        Ok(None) => return Ok(0),
        Err(e) if cfg.state == StateFile::Default => {
            let aside = snapshot::beside(path, e.aside_suffix());
            match std::fs::rename(path, &aside) {
                Ok(()) => {
                    world.set_aside(&aside, &e.to_string());
                    crate::say!(
                        "worldfs: warning: {e}; starting with an empty world (the file is now {})",
                        aside.display()
                    )
                }
                Err(r) => crate::say!(
                    "worldfs: warning: {e}; starting with an empty world (cannot set the file aside: {r})"
                ),
            }
            return Ok(0);
        }
        Err(e) => return Err(anyhow::Error::new(e).context("--state (or --fresh to start empty)")),
    };
    let r = world.restore(snap, crate::socket::commands::still_valid);
    let age = r
        .saved_at
        .and_then(|t| std::time::SystemTime::now().duration_since(t).ok())
        .map_or_else(
            || "in the future".to_string(),
            |d| format!("{} ago", human_age(d)),
        );
    crate::say!(
        "worldfs: world restored from {} (saved {age}; read in {} ms): {}, turn {}{}{}, {}{}{}",
        path.display(),
        start.elapsed().as_millis(),
        counted(r.entries, "entry", "entries"),
        r.turn,
        match r.goals {
            0 => String::new(),
            1 => ", the goal".to_owned(),
            n => format!(", the goals of {n} conversations"),
        },
        if r.tasks > 0 {
            format!(", {} tasks", r.tasks)
        } else {
            String::new()
        },
        counted(r.commands, "command output", "command outputs"),
        if r.commands_dropped > 0 {
            format!(
                " ({} dropped: their input files changed meanwhile, or they searched whole directories)",
                r.commands_dropped
            )
        } else {
            String::new()
        },
        match r.layouts {
            0 => String::new(),
            1 => ", what 1 client was sent last".to_string(),
            n => format!(", what {n} clients were sent last"),
        },
    );
    Ok(r.seq)
}

/// `d` for people: the largest unit that is not zero.
fn human_age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s} s"),
        60..3600 => format!("{} min", s / 60),
        3600..86400 => format!("{} h", s / 3600),
        _ => format!("{} days", s / 86400),
    }
}

/// Starts the socket server for `world`; `run` prints its path once mounted. `watched`: a
/// watcher sees the changes made behind the mount.
fn start_socket(
    cfg: &MountConfig,
    plan: &Plan,
    world: &Arc<World>,
    (op_stats, sink): (&Arc<crate::fs::op_stats::OpStats>, &ObservationSink),
    watched: bool,
) -> anyhow::Result<crate::socket::Server> {
    use crate::socket::{Server, ServerOptions, default_socket_path};
    let (path, private_dir) = match &cfg.socket {
        Some(p) => (p.clone(), false),
        None => (
            default_socket_path(&plan.target).context("choosing the socket path")?,
            true,
        ),
    };
    let mut opts = ServerOptions::new(&path);
    opts.private_dir = private_dir;
    opts.source = Some(plan.source.clone());
    opts.mount_point = Some(plan.target.clone());
    opts.op_stats = Some(Arc::clone(op_stats));
    opts.renderer = Arc::new(crate::socket::Projections {
        mount_point: Some(plan.target.clone()),
    });
    let counter = sink.clone();
    // Requests answered just before the socket call must have emitted: see `answering`.
    opts.emitted = Some(Arc::new(move || {
        counter.emitted_settled(std::time::Duration::from_millis(100))
    }));
    // Every change to SOURCE reaches the world only while the watcher runs: not with
    // `--no-watch`, nor when it could not start.
    opts.cache_renders = watched;
    Server::start(Arc::clone(world), opts).context("starting the socket")
}

/// How the signal thread ends the mount.
enum Unmounter {
    /// Mounted by worldfs itself with mount(2).
    Direct(PathBuf),
    /// Mounted by fuser through fusermount3.
    Fuser(fuser::SessionUnmounter),
}

impl Unmounter {
    fn unmount(&mut self) -> std::io::Result<()> {
        match self {
            Unmounter::Direct(target) => detach(target),
            Unmounter::Fuser(u) => u.unmount(),
        }
    }
}

fn cpath(p: &Path) -> std::io::Result<CString> {
    CString::new(p.as_os_str().as_bytes())
        .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))
}

/// Unmounts `target`; if files are still open through it, detaches it instead (the kernel then
/// ends the session when the last one closes, and the daemon serves them until then), and says
/// which processes hold it.
fn detach(target: &Path) -> std::io::Result<()> {
    match unmount_once(target, Unmount::Plain)? {
        Unmounted::Busy => {
            // Named before the detach: after it, their paths no longer lead to the mount.
            let held = held_by(target, mountinfo::worldfs_dev_at(target));
            match unmount_once(target, Unmount::Detach)? {
                Unmounted::Done => {
                    crate::say!(
                        "worldfs: {} was busy{held}; detached: it ends when they let go of it",
                        target.display()
                    );
                    Ok(())
                }
                Unmounted::Busy => Err(std::io::Error::from_raw_os_error(libc::EBUSY)),
            }
        }
        Unmounted::Done => Ok(()),
    }
}

/// ` (held by codex (pid 13601, working directory), ...)`: the processes that keep the mount at
/// `target`, of device `dev`, busy, for a message; empty when none can be told.
fn held_by(target: &Path, dev: Option<u64>) -> String {
    let held = dev
        .map(|d| crate::holders::of(target, d))
        .unwrap_or_default();
    if held.is_empty() {
        String::new()
    } else {
        format!(" (held by {})", crate::holders::describe(&held))
    }
}

/// How [`unmount_once`] unmounts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unmount {
    Plain,
    /// `MNT_DETACH`: gone from the tree now, ended when its last user closes.
    Detach,
    /// `MNT_FORCE`: aborts the FUSE connection first (root only; for a dead daemon).
    Force,
}

enum Unmounted {
    Done,
    Busy,
}

/// One unmount of `target`. Only root may call umount2 on a FUSE mount; a user's mount is
/// removed by the setuid helper that made it (`fusermount3 -u`), as libfuse does.
fn unmount_once(target: &Path, how: Unmount) -> std::io::Result<Unmounted> {
    let c = cpath(target)?;
    let flags = match how {
        Unmount::Plain => 0,
        Unmount::Detach => libc::MNT_DETACH,
        Unmount::Force => libc::MNT_FORCE,
    };
    if unsafe { libc::umount2(c.as_ptr(), flags) } == 0 {
        return Ok(Unmounted::Done);
    }
    let e = std::io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::EBUSY) => Ok(Unmounted::Busy),
        Some(libc::EPERM) if unsafe { libc::geteuid() } != 0 && how != Unmount::Force => {
            fusermount_unmount(target, how == Unmount::Detach)
        }
        _ => Err(e),
    }
}

/// The helper fuser mounts with: `$FUSERMOUNT_PATH`, else `fusermount3`.
fn fusermount_bin() -> std::ffi::OsString {
    std::env::var_os("FUSERMOUNT_PATH").unwrap_or_else(|| "fusermount3".into())
}

fn fusermount_unmount(target: &Path, lazy: bool) -> std::io::Result<Unmounted> {
    let bin = fusermount_bin();
    let out = std::process::Command::new(&bin)
        .arg(if lazy { "-uz" } else { "-u" })
        .arg("--")
        .arg(target)
        // Its errors are matched below as text, which must not be translated.
        .env("LC_ALL", "C")
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!(
                    "only root may unmount directly, and {} cannot run: {e}",
                    bin.to_string_lossy()
                ),
            )
        })?;
    if out.status.success() {
        return Ok(Unmounted::Done);
    }
    let msg = String::from_utf8_lossy(&out.stderr).trim().to_string();
    // fusermount3 reports umount2's error as text only.
    if msg.contains("Device or resource busy") {
        return Ok(Unmounted::Busy);
    }
    Err(std::io::Error::other(format!(
        "{} -u: {}",
        bin.to_string_lossy(),
        if msg.is_empty() {
            out.status.to_string()
        } else {
            msg
        }
    )))
}

/// Removes our mount at `target` if it is somehow still there when serving ended.
fn unmounter_final(target: &Path) {
    if let Ok(mounts) = mountinfo::worldfs_mounts()
        && mounts.iter().any(|m| m.mount_point == target)
    {
        let _ = detach(target);
    }
}

/// Opens /dev/fuse and mounts it at `target` as type `fuse.worldfs` (fuser's own mount(2) path
/// names every file system plain `fuse`, which hides what is mounted from users and tools).
fn kernel_mount(source: &Path, target: &Path) -> anyhow::Result<OwnedFd> {
    let dev = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .context("opening /dev/fuse")?;
    let dev: OwnedFd = dev.into();
    let st = std::fs::metadata(target).with_context(|| format!("stat {}", target.display()))?;
    let rootmode = std::os::unix::fs::MetadataExt::mode(&st) & libc::S_IFMT;
    let opts = format!(
        "fd={},rootmode={:o},user_id={},group_id={},default_permissions,allow_other",
        std::os::fd::AsRawFd::as_raw_fd(&dev),
        rootmode,
        unsafe { libc::getuid() },
        unsafe { libc::getgid() },
    );
    let fsname = cpath(source).context("SOURCE path")?;
    let ctarget = cpath(target).context("mount point path")?;
    let copts = CString::new(opts).context("mount options")?;
    let r = unsafe {
        libc::mount(
            fsname.as_ptr(),
            ctarget.as_ptr(),
            c"fuse.worldfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            copts.as_ptr().cast(),
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("mounting at {}", target.display()));
    }
    Ok(dev)
}

/// How long `worldfs unmount`, and a mount of the same mount point, wait for a daemon whose
/// mount is gone to exit: its last save of the world takes tens of milliseconds for 20,000
/// entries (`make bench-restart`).
const DAEMON_STOP_WAIT: Duration = Duration::from_secs(10);

/// `worldfs unmount PATH`: for a live daemon this ends it cleanly, and returns once it has
/// exited; for a dead one it removes the leftover mount (which otherwise answers every access
/// with ENOTCONN).
pub fn unmount(path: &Path) -> anyhow::Result<()> {
    // canonicalize would stat the dead mount (ENOTCONN); make the path absolute lexically.
    let abs = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .context("reading the current directory")?
            .join(path)
    };
    let mounts = mountinfo::worldfs_mounts().context("reading mountinfo")?;
    let abs = normalize(&abs);
    let Some(m) = mounts.iter().rev().find(|m| m.mount_point == abs) else {
        bail!("{} is not a worldfs mount point", abs.display());
    };
    let target = m.mount_point.clone();
    let context = || format!("unmounting {}", target.display());
    let daemon = crate::runtime::live_daemon(&target);
    if let Unmounted::Done = unmount_once(&target, Unmount::Plain).with_context(context)? {
        // The daemon still saves the world and lets go of its socket once the mount is gone:
        // returning before that would let a `worldfs mount` right after find both taken.
        match daemon {
            Some(pid) if !crate::runtime::wait_exit(pid, DAEMON_STOP_WAIT) => crate::say!(
                "worldfs: unmounted {}; its daemon (pid {pid}) is still stopping after {} s",
                target.display(),
                DAEMON_STOP_WAIT.as_secs()
            ),
            _ => crate::say!("worldfs: unmounted {}", target.display()),
        }
        return Ok(());
    }
    if crate::runtime::live_daemon(&target).is_none() {
        // The daemon is gone: requests stuck on the connection (and any thread of the dead
        // daemon waiting on them) only end when it is aborted. MNT_FORCE aborts a FUSE
        // connection before unmounting; a user who is not root aborts it through fusectl.
        let aborted = if unsafe { libc::geteuid() } == 0 {
            matches!(unmount_once(&target, Unmount::Force), Ok(Unmounted::Done))
        } else {
            crate::watchdog::abort_connection(m.dev).is_ok()
                && matches!(unmount_once(&target, Unmount::Plain), Ok(Unmounted::Done))
        };
        if aborted {
            crate::say!(
                "worldfs: aborted and unmounted {} (its daemon was gone)",
                target.display()
            );
            return Ok(());
        }
    }
    // Asked only of a live daemon: with a dead one, looking into the mount could hang.
    let held = if crate::runtime::live_daemon(&target).is_some() {
        held_by(&target, Some(m.dev))
    } else {
        String::new()
    };
    if let Unmounted::Busy = unmount_once(&target, Unmount::Detach).with_context(context)? {
        bail!("{}: still busy after a lazy unmount", context());
    }
    crate::say!(
        "worldfs: {} was busy{held}; detached (it disappears when the last open file closes)",
        target.display()
    );
    Ok(())
}

/// Removes `.` and `..` components without touching the file system.
/// `p` with its longest existing ancestor resolved (symlinks, `..`): what it will be once
/// created, to compare with canonical paths.
fn resolved(p: &Path) -> PathBuf {
    let p = normalize(p);
    for base in p.ancestors() {
        if let Ok(real) = std::fs::canonicalize(base) {
            return match p.strip_prefix(base) {
                Ok(rest) if !rest.as_os_str().is_empty() => real.join(rest),
                _ => real,
            };
        }
    }
    p
}

/// `p` with `.` and `..` taken out by name (no symlink is followed).
pub(crate) fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
