//! Parts of a file joined again where the request writes the stream anew anyway.
//!
//! A file read in several places is shown as one call per part, and a part shown before stays
//! a call of its own (`entry_calls::split_at`): it keeps its place in the prompt cache while
//! the lines read next to it are appended as another call. That separation only pays while
//! the part is in the prefix the cache still holds. Once something before it changed (a
//! compaction dropped an earlier piece, an earlier file was edited), the request writes it to
//! the cache again wherever it sits, and parts that touch can be the one call that reads them
//! all: the same lines, without the envelope of every call but the first (two ids, the input
//! with its path, two message frames: about 25 tokens each). The joined call is exactly the
//! call a read of those lines renders, so the next projection shows it, and keeps it in place.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;

use crate::world::World;

use super::ProjectionError;
use super::entry_calls::{entry_cost, range_call};
use super::parts::{Call, EntryPart, Input, Piece, Shown};
use super::placement;
use super::request::{Format, ProjectionRequest};

/// Joins the touching parts of a file that sit after the stream's unchanged prefix (`prefix`
/// pieces, [`placement::unchanged_prefix`]), and places the joined calls anew. Costs only go
/// down, so a fitted input stays within its budget. Whether anything was joined.
pub fn rejoin(
    world: &World,
    req: &ProjectionRequest,
    input: &mut Input,
    prefix: usize,
) -> Result<bool, ProjectionError> {
    // The json format has no calls to save: its parts are segments of one entry object.
    if req.format == Format::Json {
        return Ok(false);
    }
    // Parts in the unchanged prefix keep their place: the cache serves them.
    let mut settled: HashMap<PathBuf, HashSet<u64>> = HashMap::new();
    for p in input.pieces().iter().take(prefix) {
        if let Piece::Call(e, i) = p
            && let Some((first, _)) = e.calls.get(*i).and_then(|c| c.lines)
        {
            settled.entry(e.path.clone()).or_default().insert(first);
        }
    }
    let mut joined_any = false;
    for e in &mut input.entries {
        if e.shown != Shown::Content || e.whole || e.calls.len() < 2 {
            continue;
        }
        let none = HashSet::new();
        if join_touching(req, e, settled.get(&e.path).unwrap_or(&none)) {
            e.cost = entry_cost(req, e)?;
            joined_any = true;
        }
    }
    if joined_any {
        placement::assign(world, &input.layout.clone(), input);
    }
    Ok(joined_any)
}

/// Joins runs of calls of `e` whose lines follow each other and that do not start at a
/// `settled` line. Whether anything was joined.
fn join_touching(req: &ProjectionRequest, e: &mut EntryPart, settled: &HashSet<u64>) -> bool {
    let is_settled = |c: &Call| c.lines.is_some_and(|(first, _)| settled.contains(&first));
    let calls = std::mem::take(&mut e.calls);
    let mut out: Vec<Call> = Vec::with_capacity(calls.len());
    let mut joined = false;
    for c in calls {
        if let Some(prev) = out.last_mut()
            && let (Some((first, n1)), Some((next, n2))) = (prev.lines, c.lines)
            && first + n1 == next
            && !is_settled(prev)
            && !is_settled(&c)
        {
            let result = format!("{}\n{}", prev.result, c.result);
            *prev = range_call(req, e, first, n1 + n2, result);
            joined = true;
        } else {
            out.push(c);
        }
    }
    e.calls = out;
    joined
}
