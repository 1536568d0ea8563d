use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use tracing_subscriber::EnvFilter;

use worldfs::cli::{Cli, Command};
use worldfs::mount;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let default = match cli.verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_env("WORLDFS_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    // Colour codes only for a terminal: a daemon's stderr is usually a log file.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .init();

    let result = match cli.command {
        Command::Mount {
            source,
            mountpoint,
            options,
        } => {
            if !(options.cache_timeout.is_finite() && options.cache_timeout >= 0.0) {
                eprintln!("worldfs: error: --cache-timeout must be a non-negative number");
                return ExitCode::from(2);
            }
            mount::run(mount::MountConfig {
                source,
                mountpoint,
                io_mode: options.io,
                io_uring: options.io_uring,
                observe: !options.no_observe,
                threads: options.threads as usize,
                cache_timeout: Duration::from_secs_f64(options.cache_timeout),
                watch: (!options.no_watch).then_some(options.watcher),
                birth_times: options.birth_times,
                config: options.config,
                journal: options.journal,
                socket: options.socket,
                state: match (options.no_state, options.state) {
                    (true, _) => mount::StateFile::Off,
                    (false, Some(p)) => mount::StateFile::At(p),
                    (false, None) => mount::StateFile::Default,
                },
                fresh: options.fresh,
            })
        }
        Command::Run {
            dir,
            options,
            proxy,
            upstream,
            listen,
            log,
            no_hooks,
            command,
        } => match worldfs::run::run(worldfs::run::RunConfig {
            dir,
            options,
            proxy: proxy.then_some(worldfs::run::ProxyOptions { upstream, listen }),
            log,
            hooks: !no_hooks,
            command,
            verbose: cli.verbose,
        }) {
            // The command's own exit code.
            Ok(code) => return code,
            Err(e) => Err(e),
        },
        Command::Replay {
            traces,
            out,
            budgets,
            dump_projections,
            misses,
        } => std::env::current_exe()
            .map_err(anyhow::Error::from)
            .and_then(|exe| {
                worldfs::replay::run(&worldfs::replay::Options {
                    traces,
                    out,
                    budgets,
                    exe,
                    dump_projections,
                    misses,
                })
            })
            .and_then(|outcome| {
                worldfs::cli_client::write_stdout(&outcome.summary)
                    .map_err(|e| anyhow::anyhow!("writing the summary to stdout: {e}"))?;
                match outcome.failed.len() {
                    0 => Ok(()),
                    n => Err(anyhow::anyhow!(
                        "{n} of the traces could not be replayed (listed above and in summary.md)"
                    )),
                }
            }),
        Command::Hook {
            target,
            install,
            uninstall,
            settings,
            codex,
        } => {
            if install || uninstall {
                let agent = if codex {
                    worldfs::claude_hook::install::Agent::Codex
                } else {
                    worldfs::claude_hook::install::Agent::ClaudeCode
                };
                return worldfs::claude_hook::install::run(&target, settings, uninstall, agent);
            }
            if settings.is_some() || codex {
                eprintln!("worldfs: --settings and --codex go with --install or --uninstall");
                return ExitCode::from(2);
            }
            worldfs::claude_hook::run(&target, std::io::stdin().lock());
            return ExitCode::SUCCESS;
        }
        Command::Proxy {
            target,
            listen,
            upstream,
            budget,
            observe,
            hooks_elsewhere,
        } => worldfs::proxy::run(worldfs::proxy::ProxyConfig {
            listen,
            upstream,
            budget,
            observe,
            hooks_elsewhere,
            socket: target,
        }),
        Command::Unmount { path } => mount::unmount(&path),
        Command::Watchdog {
            pid,
            dev,
            target,
            socket,
            abort_fd,
        } => worldfs::watchdog::run(pid, dev, &target, socket.as_deref(), abort_fd),
        // Socket clients (issue 4): their exit codes say whether the daemon answered.
        Command::Ctl { .. }
        | Command::Projection { .. }
        | Command::Status { .. }
        | Command::Goal { .. }
        | Command::Watch { .. } => return worldfs::cli_client::run(cli.command),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            worldfs::say!("worldfs: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
