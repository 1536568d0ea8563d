//! The world's entries as the protocol shows them: listed, read through the world, pinned and
//! forgotten. A failed read says why (a path outside the root, a symlink, a withheld file)
//! rather than passing on an errno.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde_json::{Value, json};

use super::{FORGET_BARRIER, MAX_LIST, Shared, caught_up, lossy, millis, rel_path};
use crate::socket::protocol::{RpcError, code};
use crate::world::source::SourceError;
use crate::world::{Entry, EntryState, Extent, LastSelection, ReadError};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct PathParam {
    path: String,
}

fn no_entry(path: &Path) -> RpcError {
    RpcError::not_found(format!(
        "the world has no entry for {:?} (entries.list shows what it has)",
        lossy(path)
    ))
}

fn state_name(s: EntryState) -> &'static str {
    match s {
        EntryState::Live => "live",
        EntryState::Deleted => "deleted",
        EntryState::Withheld => "withheld",
        EntryState::Ignored(_) => "ignored",
    }
}

/// An entry's metadata as the protocol shows it; `last` is the world's most recent selection,
/// which says whether it is in the projection and how often that requester dropped it.
pub fn entry_json(path: &Path, e: &Entry, last: Option<&LastSelection>) -> Value {
    let extent = match &e.extent {
        Extent::None => json!("none"),
        Extent::Whole => json!("whole"),
        Extent::Ranges(set) => json!({
            "ranges": set.as_slice().iter().map(|r| json!([r.start, r.end])).collect::<Vec<_>>()
        }),
    };
    let ignored = match e.state {
        EntryState::Ignored(r) => serde_json::to_value(r).unwrap_or(Value::Null),
        _ => Value::Null,
    };
    json!({
        "path": lossy(path),
        "kind": e.kind,
        "state": state_name(e.state),
        "ignored_reason": ignored,
        "tokens": e.tokens,
        "size": e.size,
        "hash": e.hash.map(|h| blake3::Hash::from_bytes(h).to_hex().to_string()),
        "stale": e.needs_rehash,
        "pinned": e.pinned,
        "agent_wrote": e.agent_wrote,
        "in_projection": last.is_some_and(|l| l.kept(path)),
        "extent": extent,
        "reads": e.reads,
        "weak_reads": e.weak_reads,
        "evictions": last.map_or(0, |l| l.evictions(path)),
        "programs": e.programs.iter().collect::<Vec<_>>(),
        "first_seq": e.first_observed.seq,
        "last_seq": e.last_observed.seq,
        "last_changed_seq": e.last_changed.map(|s| s.seq),
        "last_agent_turn": e.last_agent_turn,
        "last_observed_ms": millis(e.last_observed.time),
    })
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct EntriesList {
    #[serde(default)]
    prefix: Option<String>,
    #[serde(default)]
    state: Option<StateFilter>,
    #[serde(default)]
    offset: usize,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum StateFilter {
    Live,
    Deleted,
    Withheld,
    Ignored,
}

pub(super) fn entries_list(shared: &Shared, p: EntriesList) -> Result<Value, RpcError> {
    let limit = p.limit.unwrap_or(1000);
    if limit > MAX_LIST {
        return Err(RpcError::invalid_params(format!(
            "entries.list: limit {limit} exceeds {MAX_LIST}; page with offset"
        )));
    }
    let prefix = match &p.prefix {
        Some(s) => Some(rel_path(shared, s)?),
        None => None,
    };
    let all = shared.world.entries();
    let matching: Vec<&(PathBuf, Entry)> = all
        .iter()
        .filter(|(path, _)| prefix.as_ref().is_none_or(|pre| path.starts_with(pre)))
        .filter(|(_, e)| {
            p.state.is_none_or(|s| {
                state_name(e.state)
                    == match s {
                        StateFilter::Live => "live",
                        StateFilter::Deleted => "deleted",
                        StateFilter::Withheld => "withheld",
                        StateFilter::Ignored => "ignored",
                    }
            })
        })
        .collect();
    let total = matching.len();
    let tokens: u64 = matching
        .iter()
        .filter(|(_, e)| e.state == EntryState::Live)
        .filter_map(|(_, e)| e.tokens)
        .map(u64::from)
        .sum();
    let last = shared.world.last_selection();
    let page: Vec<Value> = matching
        .iter()
        .skip(p.offset)
        .take(limit)
        .map(|(path, e)| entry_json(path, e, last.as_ref()))
        .collect();
    Ok(json!({ "total": total, "offset": p.offset, "live_tokens": tokens, "entries": page }))
}

fn read_error(path: &Path, e: ReadError) -> RpcError {
    let shown = lossy(path);
    match e {
        ReadError::Source(SourceError::BadPath { .. }) => {
            RpcError::refused(format!("path {shown:?} is not a plain path below the root"))
        }
        ReadError::Source(SourceError::Open { source, .. }) => match source.raw_os_error() {
            Some(libc::ENOENT) => RpcError::not_found(format!("{shown:?} does not exist")),
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => RpcError::refused(format!(
                "{shown:?} is or goes through a symlink; worldfs never follows symlinks"
            )),
            _ => RpcError::refused(format!("cannot open {shown:?}: {source}")),
        },
        ReadError::Source(SourceError::NotRegular { .. }) => RpcError::refused(format!(
            "{shown:?} is neither a regular file nor a directory"
        )),
        e @ (ReadError::Withheld { .. } | ReadError::Ignored { .. }) => {
            RpcError::refused(e.to_string())
        }
        e @ (ReadError::Source(SourceError::Read { .. }) | ReadError::Tokenizer(_)) => {
            RpcError::internal(e)
        }
    }
}

pub(super) fn entries_read(shared: &Shared, p: PathParam) -> Result<Value, RpcError> {
    let path = rel_path(shared, &p.path)?;
    let w = &*shared.world;
    let c = w.read_current(&path).map_err(|e| read_error(&path, e))?;
    let last = w.last_selection();
    let entry = w.entry(&path).map(|e| entry_json(&path, &e, last.as_ref()));
    Ok(json!({
        "path": lossy(&path),
        "kind": c.kind,
        "content": String::from_utf8_lossy(&c.bytes),
        "notebook": c.notebook,
        "tokens": c.tokens,
        "size": c.size,
        "hash": blake3::Hash::from_bytes(c.hash).to_hex().to_string(),
        "entry": entry,
    }))
}

pub(super) fn entries_pin(shared: &Shared, p: PathParam, pinned: bool) -> Result<Value, RpcError> {
    let w = &*shared.world;
    let path = rel_path(shared, &p.path)?;
    if !w.set_pinned(&path, pinned) {
        return Err(no_entry(&path));
    }
    Ok(json!({ "path": lossy(&path), "pinned": pinned }))
}

pub(super) fn entries_forget(shared: &Shared, p: PathParam) -> Result<Value, RpcError> {
    let path = forgettable(shared, &p)?;
    Ok(json!({ "path": lossy(&path), "forgotten": shared.world.forget(&path) }))
}

/// `entries.refused`: the agent's tool opened `path` and showed nothing of it
/// ([`crate::world::World::forget_refused`]).
pub(super) fn entries_refused(shared: &Shared, p: PathParam) -> Result<Value, RpcError> {
    let path = forgettable(shared, &p)?;
    Ok(json!({ "path": lossy(&path), "forgotten": shared.world.forget_refused(&path) }))
}

/// `p`'s path, once the world has applied what the mount saw before this call: else what it
/// forgets would come back with it.
fn forgettable(shared: &Shared, p: &PathParam) -> Result<PathBuf, RpcError> {
    let path = rel_path(shared, &p.path)?;
    if !caught_up(shared, FORGET_BARRIER) {
        return Err(RpcError::new(
            code::UNAVAILABLE,
            format!(
                "nothing was forgotten: after {:?} the world has still not applied what the mount \
                 saw before this call, which would bring {:?} back; try again",
                FORGET_BARRIER,
                lossy(&path)
            ),
        ));
    }
    Ok(path)
}
