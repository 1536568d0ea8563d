//! What the daemon says about itself rather than about the world: `initialize` (what it serves
//! and accepts, so a client need not guess) and `stats` (how it has been doing, for
//! `worldfs status` and the benchmarks).

use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value, json};

use super::{MAX_BUDGET, METHODS, PROTOCOL_VERSION, Shared, millis};
use crate::socket::protocol::{self, RpcError};
use crate::socket::render::Format;
use crate::socket::subscriptions;

pub(super) fn initialize(shared: &Shared) -> Result<Value, RpcError> {
    let w = &shared.world;
    Ok(json!({
        "server": { "name": "worldfs", "version": env!("CARGO_PKG_VERSION") },
        "protocol_version": PROTOCOL_VERSION,
        "methods": METHODS,
        "capabilities": {
            "formats": Format::ALL.iter().map(|f| f.name()).collect::<Vec<_>>(),
            "tokenizer": "o200k_base",
            "default_budget": w.config().budget.tokens,
            "max_budget": MAX_BUDGET,
            "default_policy": w.config().budget.policy,
            "max_line_bytes": protocol::MAX_LINE,
            "max_batch": protocol::MAX_BATCH,
            "batches": true,
            "subscriptions": { "notification": subscriptions::NOTIFICATION },
            "recent_observations": w.recent().capacity(),
        },
        "root": {
            "source": shared.info.source,
            "mount_point": shared.info.mount_point,
            "socket": shared.info.socket,
        },
        "last_seq": w.recent().last_seq(),
        "turn": w.turn(),
    }))
}

pub(super) fn stats(shared: &Shared) -> Value {
    let w = &*shared.world;
    let world = w.stats();
    let latency: Map<String, Value> = METHODS
        .iter()
        .copied()
        .chain(std::iter::once("all"))
        .zip(&shared.latency)
        .filter_map(|(m, h)| {
            let q = h.quantiles();
            (q.count > 0).then(|| (m.to_string(), json!(q)))
        })
        .collect();
    let fuse = shared.op_stats.as_ref().map(|s| {
        s.snapshot()
            .into_iter()
            .map(|(k, v)| (k.to_string(), Value::from(v)))
            .collect::<Map<_, _>>()
    });
    let c = &shared.conns;
    let renders = shared.renders.counts();
    let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
    json!({
        "tokens": shared.tokens.report(),
        "last_projection": shared.last_served.report(),
        "proxy": shared.proxy.report(),
        "entries": world.entries,
        "known_tokens": world.known_tokens,
        "drops": {
            "observations": world.dropped,
            "subscription_observations": shared.subs.dropped_total(),
            "journal": world.journal.map(|j| j.dropped),
            "commands_invalidated": shared.validity.dropped(),
            "commands_for_room": w.harness().commands_dropped_for_room.load(Ordering::Relaxed),
        },
        "observations": {
            "last_seq": w.recent().last_seq(),
            "ring_capacity": w.recent().capacity(),
        },
        "commands_cached": w.harness().commands.read().len(),
        "commands_kept_as_results": w
            .harness()
            .commands
            .read()
            .iter()
            .filter(|c| c.tool.is_some())
            .count(),
        "commands_begun": shared.begun.len(),
        "renders": {
            "enabled": shared.sees_changes_behind(),
            "rendered": renders.rendered,
            "reused": renders.reused,
        },
        "latency": latency,
        "connections": {
            "open": get(&c.open),
            "total": get(&c.total),
            "refused_peer": get(&c.refused_peer),
            "refused_busy": get(&c.refused_busy),
            "requests": get(&c.requests),
            "errors": get(&c.errors),
            "lines_too_long": get(&c.lines_too_long),
        },
        "subscriptions": {
            "active": shared.subs.count(),
            "delivered": shared.subs.delivered_total(),
            "dropped": shared.subs.dropped_total(),
        },
        "fuse_ops": fuse,
        "data_path": shared.op_stats.as_ref().and_then(|s| s.data_path.lock().clone()),
        "transport": shared.op_stats.as_ref().and_then(|s| s.transport.lock().clone()),
        "watcher": shared.op_stats.as_ref().and_then(|s| s.watcher.lock().clone()),
        "world": world,
        "root": {
            "source": shared.info.source,
            "mount_point": shared.info.mount_point,
            "socket": shared.info.socket,
        },
        "uptime_ms": u64::try_from(shared.started.elapsed().as_millis()).unwrap_or(u64::MAX),
        "started_ms": millis(shared.started_wall),
        "pid": std::process::id(),
    })
}
