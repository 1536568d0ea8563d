//! What the harness sets and reads back whole: the goal, the structured state and the framing.
//! The patches exist so a harness can change one field without resending the rest; each
//! applies to a copy, so an error half way leaves what was set as it was.

use serde::Deserialize;
use serde_json::{Value, json};

use super::{Empty, Shared, session};
use crate::socket::protocol::RpcError;
use crate::world::harness::{Framing, StructuredState, Task, TaskEdit};

/// Which conversation a method speaks of: `session` names one (Claude Code's `session_id`);
/// without it, the current one (the last changed).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Session {
    #[serde(default)]
    session: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GoalSet {
    goal: Option<String>,
    #[serde(default)]
    session: Option<String>,
}

/// A goal cleared ends the conversation, and with it what was compacted of it and a resume
/// not yet matched.
pub(super) fn goal_set(shared: &Shared, p: GoalSet) -> Result<Value, RpcError> {
    let id = session("goal.set", &p.session)?;
    let h = shared.world.harness();
    h.conversations.update(id, |c| c.set_goal(p.goal));
    Ok(goal_answer(shared, id))
}

/// A conversation was resumed; the next call of a main conversation tells which.
pub(super) fn goal_resumed(shared: &Shared, p: Session) -> Result<Value, RpcError> {
    let id = session("goal.resumed", &p.session)?;
    let h = shared.world.harness();
    h.conversations.update(id, |c| c.resumed = true);
    Ok(goal_answer(shared, id))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct GoalAdopt {
    goal: String,
    compacted: bool,
    #[serde(default)]
    session: Option<String>,
}

/// The conversation resumed, as read from its first call: its goal and whether it was
/// compacted, set together; the resume is then matched.
pub(super) fn goal_adopt(shared: &Shared, p: GoalAdopt) -> Result<Value, RpcError> {
    let id = session("goal.adopt", &p.session)?;
    if p.goal.trim().is_empty() {
        return Err(RpcError::invalid_params("goal.adopt: an empty goal"));
    }
    let h = shared.world.harness();
    h.conversations.update(id, |c| {
        c.goal = Some(p.goal);
        c.compacted = p.compacted;
        c.resumed = false;
    });
    Ok(goal_answer(shared, id))
}

pub(super) fn goal_get(shared: &Shared, p: Session) -> Result<Value, RpcError> {
    let id = session("goal.get", &p.session)?;
    Ok(goal_answer(shared, id))
}

/// Every conversation, the current one last: its session, goal, marks and how many tasks.
pub(super) fn goal_list(shared: &Shared, _: Empty) -> Result<Value, RpcError> {
    let all = shared.world.harness().conversations.all();
    let list: Vec<Value> = all
        .iter()
        .map(|(id, c)| {
            json!({
                "session": (!id.is_empty()).then_some(id),
                "goal": c.goal,
                "compacted": c.compacted,
                "resumed": c.resumed,
                "tasks": c.state.tasks.len(),
                "steps": c.touched.steps(),
                "files": c.touched.len(),
            })
        })
        .collect();
    Ok(json!({ "conversations": list }))
}

/// The conversation now opens with a summary of itself instead of its first prompt.
pub(super) fn goal_compacted(shared: &Shared, p: Session) -> Result<Value, RpcError> {
    let id = session("goal.compacted", &p.session)?;
    let h = shared.world.harness();
    // A conversation without a goal has no first prompt to lose.
    h.conversations
        .update(id, |c| c.compacted = c.goal.is_some());
    Ok(goal_answer(shared, id))
}

/// The goal of the conversation `id` names (`None`: the current one), and which session that
/// conversation is of: null for a session not known (whose goal is null), and for a
/// conversation no session was named for.
fn goal_answer(shared: &Shared, id: Option<&str>) -> Value {
    let cs = &shared.world.harness().conversations;
    let (goal, compacted, resumed) = cs.read(id, |c| (c.goal.clone(), c.compacted, c.resumed));
    let session = match id {
        Some(s) => cs.knows(s).then(|| s.to_owned()),
        None => cs.current().filter(|s| !s.is_empty()),
    };
    json!({
        "goal": goal,
        "compacted": compacted,
        "resumed": resumed,
        "session": session,
        "conversations": cs.len(),
    })
}

/// Takes `session` out of `params` (an object), checked.
fn take_session(method: &str, params: &mut Value) -> Result<Option<String>, RpcError> {
    let Some(m) = params.as_object_mut() else {
        return Err(RpcError::invalid_params(format!(
            "{method}: expected an object"
        )));
    };
    let s = match m.remove("session") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(_) => {
            return Err(RpcError::invalid_params(format!(
                "{method}: session must be a string"
            )));
        }
    };
    Ok(session(method, &s)?.map(str::to_owned))
}

pub(super) fn state_set(shared: &Shared, mut params: Value) -> Result<Value, RpcError> {
    let id = take_session("state.set", &mut params)?;
    let mut s: StructuredState = serde_json::from_value(params)
        .map_err(|e| RpcError::invalid_params(format!("state.set: {e}")))?;
    let tasks = std::mem::take(&mut s.tasks);
    s.set_tasks(tasks)
        .map_err(|e| RpcError::invalid_params(format!("state.set: tasks: {e}")))?;
    let h = shared.world.harness();
    h.conversations
        .update(id.as_deref(), |c| c.state = s.clone());
    Ok(json!({ "state": s }))
}

pub(super) fn state_get(shared: &Shared, p: Session) -> Result<Value, RpcError> {
    let id = session("state.get", &p.session)?;
    let h = shared.world.harness();
    let state = h.conversations.read(id, |c| c.state.clone());
    Ok(json!({ "state": state }))
}

pub(super) fn framing_set(shared: &Shared, f: Framing) -> Result<Value, RpcError> {
    let w = &*shared.world;
    *w.harness().framing.write() = f;
    Ok(json!({ "framing": *w.harness().framing.read() }))
}

pub(super) fn framing_get(shared: &Shared, _: Empty) -> Result<Value, RpcError> {
    let w = &*shared.world;
    Ok(json!({ "framing": *w.harness().framing.read() }))
}

/// A list field of `state.patch`: an array replaces, `{add, remove}` edits.
fn patch_list(field: &str, v: Value, list: &mut Vec<String>) -> Result<(), RpcError> {
    let strings = |v: Value, what: &str| -> Result<Vec<String>, RpcError> {
        serde_json::from_value::<Vec<String>>(v)
            .map_err(|e| RpcError::invalid_params(format!("state.patch: {field}{what}: {e}")))
    };
    match v {
        Value::Null => list.clear(),
        a @ Value::Array(_) => *list = strings(a, "")?,
        Value::Object(mut m) => {
            let add = m.remove("add");
            let remove = m.remove("remove");
            if let Some(k) = m.keys().next() {
                return Err(RpcError::invalid_params(format!(
                    "state.patch: {field}: unknown key {k:?} (use \"add\" and \"remove\")"
                )));
            }
            if let Some(r) = remove {
                let r = strings(r, ".remove")?;
                list.retain(|x| !r.contains(x));
            }
            if let Some(a) = add {
                for x in strings(a, ".add")? {
                    if !list.contains(&x) {
                        list.push(x);
                    }
                }
            }
        }
        _ => {
            return Err(RpcError::invalid_params(format!(
                "state.patch: {field}: expected an array of strings (replaces the list), \
                 {{\"add\": [...], \"remove\": [...]}} or null (clears it)"
            )));
        }
    }
    Ok(())
}

/// `tasks` of `state.patch`: an array replaces the list, `{upsert, remove}` edits it by id,
/// null clears it.
fn patch_tasks(v: Value, s: &mut StructuredState) -> Result<(), RpcError> {
    let bad = |e: String| RpcError::invalid_params(format!("state.patch: tasks: {e}"));
    match v {
        Value::Null => s.tasks.clear(),
        a @ Value::Array(_) => {
            let tasks: Vec<Task> = serde_json::from_value(a).map_err(|e| bad(e.to_string()))?;
            s.set_tasks(tasks).map_err(bad)?;
        }
        Value::Object(mut m) => {
            let upsert = m.remove("upsert");
            let remove = m.remove("remove");
            if let Some(k) = m.keys().next() {
                return Err(bad(format!(
                    "unknown key {k:?} (use \"upsert\" and \"remove\")"
                )));
            }
            let upsert: Vec<TaskEdit> = match upsert {
                Some(u) => serde_json::from_value(u).map_err(|e| bad(format!("upsert: {e}")))?,
                None => Vec::new(),
            };
            let remove: Vec<String> = match remove {
                Some(r) => serde_json::from_value(r).map_err(|e| bad(format!("remove: {e}")))?,
                None => Vec::new(),
            };
            s.edit_tasks(upsert, &remove).map_err(bad)?;
        }
        _ => {
            return Err(bad(
                "expected an array of {id, subject, status} (replaces the list), \
                 {\"upsert\": [...], \"remove\": [ids]} or null (clears it)"
                    .into(),
            ));
        }
    }
    Ok(())
}

pub(super) fn state_patch(shared: &Shared, mut params: Value) -> Result<Value, RpcError> {
    let id = take_session("state.patch", &mut params)?;
    let Value::Object(m) = params else {
        return Err(RpcError::invalid_params("state.patch: expected an object"));
    };
    // Applied to a copy, under the conversations' lock throughout: an error half way leaves the
    // state untouched, and two patches at once (Claude Code runs tool calls in parallel, each
    // with its own hook) both land, not the second over a copy taken before the first.
    let h = shared.world.harness();
    h.conversations
        .try_update(id.as_deref(), |c| patch_state(m, &mut c.state))
}

fn patch_state(
    m: serde_json::Map<String, Value>,
    s: &mut StructuredState,
) -> Result<Value, RpcError> {
    for (k, v) in m {
        match k.as_str() {
            "intent" => match v {
                Value::Null => s.intent = None,
                Value::String(t) => s.intent = Some(t),
                _ => {
                    return Err(RpcError::invalid_params(
                        "state.patch: intent must be a string or null",
                    ));
                }
            },
            "decisions" => patch_list(&k, v, &mut s.decisions)?,
            "constraints" => patch_list(&k, v, &mut s.constraints)?,
            "open_loops" => patch_list(&k, v, &mut s.open_loops)?,
            "ruled_out" => patch_list(&k, v, &mut s.ruled_out)?,
            "tasks" => patch_tasks(v, s)?,
            other => {
                return Err(RpcError::invalid_params(format!(
                    "state.patch: unknown field {other:?} (intent, decisions, constraints, \
                     open_loops, ruled_out, tasks, session)"
                )));
            }
        }
    }
    Ok(json!({ "state": s }))
}

pub(super) fn framing_patch(shared: &Shared, params: Value) -> Result<Value, RpcError> {
    let Value::Object(m) = params else {
        return Err(RpcError::invalid_params(
            "framing.patch: expected an object",
        ));
    };
    // Held throughout, as in `state_patch`.
    let mut framing = shared.world.harness().framing.write();
    let mut f = framing.clone();
    for (k, v) in m {
        let slot = match k.as_str() {
            "workspace" => &mut f.workspace,
            "shell" => &mut f.shell,
            "date" => &mut f.date,
            "timezone" => &mut f.timezone,
            "model" => &mut f.model,
            "settings" => {
                let Value::Object(s) = v else {
                    return Err(RpcError::invalid_params(
                        "framing.patch: settings must be an object (a null value removes a key)",
                    ));
                };
                for (sk, sv) in s {
                    if sv.is_null() {
                        f.settings.remove(&sk);
                    } else {
                        f.settings.insert(sk, sv);
                    }
                }
                continue;
            }
            other => {
                return Err(RpcError::invalid_params(format!(
                    "framing.patch: unknown field {other:?} (workspace, shell, date, timezone, \
                     model, settings)"
                )));
            }
        };
        *slot = match v {
            Value::Null => None,
            Value::String(s) => Some(s),
            _ => {
                return Err(RpcError::invalid_params(format!(
                    "framing.patch: {k} must be a string or null"
                )));
            }
        };
    }
    *framing = f.clone();
    Ok(json!({ "framing": f }))
}
