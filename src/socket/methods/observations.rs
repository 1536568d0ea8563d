//! The observations the world keeps in its ring, pulled (`changes.since`) or pushed as
//! notifications (`observations.subscribe`); both take the same filter, so a harness can switch
//! between polling and subscribing without changing what it sees.

use std::path::PathBuf;

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Connection, MAX_LIST, Shared, rel_path};
use crate::socket::protocol::{RpcError, code};
use crate::socket::subscriptions::{self, Filter};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ChangesSince {
    #[serde(default)]
    seq: u64,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    classes: Option<Vec<subscriptions::ClassFilter>>,
    #[serde(default)]
    prefix: Option<PathBuf>,
}

pub(super) fn changes_since(shared: &Shared, p: ChangesSince) -> Result<Value, RpcError> {
    let limit = p.limit.unwrap_or(1000);
    if limit > MAX_LIST {
        return Err(RpcError::invalid_params(format!(
            "changes.since: limit {limit} exceeds {MAX_LIST}; page with seq"
        )));
    }
    let filter = Filter {
        classes: p.classes,
        prefix: match &p.prefix {
            Some(pre) => Some(rel_path(shared, &pre.to_string_lossy())?),
            None => None,
        },
    };
    let recent = shared.world.recent();
    let got = recent.since_seq(p.seq, recent.capacity());
    let mut matched = got.records.iter().filter(|r| filter.matches(r));
    let page: Vec<Value> = matched
        .by_ref()
        .take(limit)
        .map(subscriptions::record_json)
        .collect();
    let truncated = matched.next().is_some();
    Ok(json!({
        "observations": page,
        "last_seq": got.last_seq,
        "oldest_seq": got.oldest_seq,
        "complete": got.complete,
        "truncated": truncated,
    }))
}

pub(super) fn observations_subscribe(
    shared: &Shared,
    conn: &dyn Connection,
    mut f: Filter,
) -> Result<Value, RpcError> {
    let w = &*shared.world;
    if let Some(p) = &f.prefix {
        f.prefix = Some(rel_path(shared, &p.to_string_lossy())?);
    }
    let tx = conn.notifications().map_err(RpcError::internal)?;
    match shared.subs.subscribe(conn.id(), f, tx) {
        Ok(id) => Ok(json!({
            "subscription": id,
            "notification": subscriptions::NOTIFICATION,
            "last_seq": w.recent().last_seq(),
        })),
        Err(n) => Err(RpcError::new(
            code::UNAVAILABLE,
            format!("this connection already has {n} subscriptions (the limit)"),
        )),
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Unsubscribe {
    subscription: u64,
}

pub(super) fn observations_unsubscribe(
    shared: &Shared,
    conn: &dyn Connection,
    p: Unsubscribe,
) -> Result<Value, RpcError> {
    if shared.subs.unsubscribe(conn.id(), p.subscription) {
        Ok(json!({ "unsubscribed": p.subscription }))
    } else {
        Err(RpcError::not_found(format!(
            "no subscription {} on this connection",
            p.subscription
        )))
    }
}
