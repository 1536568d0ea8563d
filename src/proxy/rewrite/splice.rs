//! The projection put in the place of the history, and the result checked before it is sent.
//!
//! What the plan kept goes around the projection where the API and Claude Code need it (the
//! module doc of [`super`] lists the order). The API refuses a whole request for one rule
//! broken (a call without its result, a fifth breakpoint, one kept an hour after one kept five
//! minutes): a body that would be refused is not sent, and the request goes upstream as it came.

use serde_json::Value;

use super::Plan;
use super::content::role;
use crate::projection::validate;

/// A message's content as an array of blocks (the API takes a string as one text block).
fn into_blocks(content: Option<Value>) -> Vec<Value> {
    match content {
        Some(Value::Array(a)) => a,
        Some(Value::String(s)) => vec![serde_json::json!({"type": "text", "text": s})],
        _ => Vec::new(),
    }
}

/// Appends `m` to `out`, merging it into the last message when both have the same role (the
/// API would merge them; merged here, the result is checked as the API will read it).
fn push_message(out: &mut Vec<Value>, m: Value) {
    if let Some(last) = out.last_mut()
        && matches!(role(last), Some("user" | "assistant"))
        && role(last) == role(&m)
        && let Some(last) = last.as_object_mut()
    {
        let mut merged = into_blocks(last.remove("content"));
        merged.extend(into_blocks(m.get("content").cloned()));
        last.insert("content".into(), Value::Array(merged));
        return;
    }
    out.push(m);
}

/// Why a rewritten body was not sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub Vec<String>);

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the rewritten request breaks the API's rules: {}",
            self.0.join("; ")
        )
    }
}

impl std::error::Error for Invalid {}

/// `body` with its history replaced by `projection` (the projection's `messages`), cut as
/// `plan` says. The result is checked against the rules the API enforces before it is returned.
pub fn splice(body: &Value, plan: &Plan, projection: &[Value]) -> Result<Value, Invalid> {
    let (Some(fields), Some(messages)) = (
        body.as_object(),
        body.get("messages").and_then(Value::as_array),
    ) else {
        return Err(Invalid(vec!["no messages".into()]));
    };
    let mut new: Vec<Value> = Vec::with_capacity(
        projection.len() + plan.opening_instructions.len() + plan.instructions.len() + 3,
    );
    let mut head = plan.head.clone();
    let opening = projection.first().and_then(|m| {
        let (m, breakpoint) = without_goal(m, plan);
        // The goal block ended the stable part; the opening messages, as stable, end it now.
        if let (Some(cc), Some(last)) = (breakpoint, head.last_mut()) {
            mark_last_block(last, cc);
        }
        m
    });
    // As they came, each one: Claude Code derives its billing check from the first.
    new.extend(head);
    for m in plan.tool_loads.iter().cloned() {
        push_message(&mut new, m);
    }
    // Where the later prompts are said (the projection's opening), and as stable as they are.
    if !plan.kept_blocks.is_empty() {
        let kept = serde_json::json!({ "role": "user", "content": plan.kept_blocks });
        push_message(&mut new, kept);
    }
    for m in opening
        .into_iter()
        .chain(projection.iter().skip(1).cloned())
    {
        push_message(&mut new, m);
    }
    // Where they stood: after the user's messages that open the request, before the first
    // answer (so between a user message and an assistant one, as Claude Code sends them).
    let first_call = new
        .iter()
        .skip(1)
        .position(|m| role(m) == Some("assistant"))
        .map_or(new.len(), |i| i + 1);
    new.splice(
        first_call..first_call,
        plan.opening_instructions.iter().cloned(),
    );
    for m in plan.instructions.iter().chain(&messages[plan.tail_start..]) {
        push_message(&mut new, m.clone());
    }
    // Every field but the history as it came; the history itself is not copied only to be
    // replaced.
    let mut out: serde_json::Map<String, Value> = fields
        .iter()
        .filter(|(k, _)| k.as_str() != "messages")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    out.insert("messages".into(), Value::Array(new));
    let out = Value::Object(out);
    check(&out)?;
    Ok(out)
}

/// The projection's opening message without what the head already says: its goal block
/// becomes the prompts after the first, or goes; a message left empty goes too. Also the
/// breakpoint of a goal block that went.
fn without_goal(m: &Value, plan: &Plan) -> (Option<Value>, Option<Value>) {
    let mut m = m.clone();
    if plan.compacted {
        return (Some(m), None);
    }
    let Some(Value::Array(blocks)) = m.get_mut("content") else {
        return (Some(m), None);
    };
    let goal = plan.goal.trim();
    let mut dropped = None;
    if let Some(i) = blocks.iter().position(|b| {
        b.get("type").and_then(Value::as_str) == Some("text")
            && b.get("text").and_then(Value::as_str).map(str::trim) == Some(goal)
    }) {
        match &plan.later_prompts {
            Some(later) => blocks[i]["text"] = Value::String(later.clone()),
            None => dropped = blocks.remove(i).get("cache_control").cloned(),
        }
    }
    let m = (!blocks.is_empty()).then_some(m);
    (m, dropped)
}

/// Puts `cache_control` on the last block of message `m` (a string content becomes one text
/// block, the same text).
fn mark_last_block(m: &mut Value, cache_control: Value) {
    let Some(o) = m.as_object_mut() else { return };
    let mut blocks = into_blocks(o.remove("content"));
    if let Some(last) = blocks.last_mut().and_then(Value::as_object_mut) {
        last.insert("cache_control".into(), cache_control);
    }
    o.insert("content".into(), Value::Array(blocks));
}

/// The API's rules on the messages (`projection::validate`). Two things are Claude Code's and
/// not ours to judge: its server tools (web search) have no input schema, and its
/// `role: "system"` messages, which current models take inside `messages`, are set aside
/// before the check.
fn check(body: &Value) -> Result<(), Invalid> {
    let mut seen = body.clone();
    if let Some(Value::Array(m)) = seen.get_mut("messages") {
        m.retain(|m| role(m) != Some("system"));
    }
    match validate::anthropic(&seen) {
        Ok(()) => Ok(()),
        Err(v) => {
            let real: Vec<String> = v
                .iter()
                .filter(|v| !v.at.starts_with("/tools/"))
                .map(ToString::to_string)
                .collect();
            if real.is_empty() {
                Ok(())
            } else {
                Err(Invalid(real))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::plan;
    use super::super::tests::{PROMPT, request};
    use super::*;
    use serde_json::json;

    #[test]
    fn a_spliced_body_that_breaks_a_rule_is_refused() {
        let body = request(3);
        let plan = plan(&body, Some(PROMPT), false).expect("eligible");
        // A projection whose call has no result.
        let broken = vec![
            json!({"role": "user", "content": PROMPT}),
            json!({"role": "assistant", "content": [{"type": "tool_use", "id": "wfs_1", "name": "Read", "input": {}}]}),
        ];
        let err = splice(&body, &plan, &broken).expect_err("invalid");
        assert!(err.to_string().contains("MissingResult"), "{err}");
    }
}
