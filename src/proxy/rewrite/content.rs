//! Reading a request's messages: their roles, their blocks and the texts in them.
//!
//! The API takes a message's `content` as a string or as an array of blocks, and Claude Code
//! sends both. Every reader of a history in the proxy (the plan, what it keeps, `attached`,
//! `responses`) reads it through these, so that none of them takes one shape for the other.

use serde_json::Value;

pub(super) fn role(m: &Value) -> Option<&str> {
    m.get("role").and_then(Value::as_str)
}

/// Whether a text of `content` (a string, or one of its text blocks) satisfies `pred`.
pub(super) fn any_text(content: Option<&Value>, pred: impl Fn(&str) -> bool) -> bool {
    texts(content).into_iter().any(pred)
}

/// The texts of the text blocks among `blocks`, in order.
pub(in crate::proxy) fn block_texts(blocks: &[Value]) -> impl Iterator<Item = &str> {
    blocks
        .iter()
        .filter(|b| kind(b) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
}

/// The texts of a message's `content`: the string, or its text blocks in order.
pub(in crate::proxy) fn texts(content: Option<&Value>) -> Vec<&str> {
    match content {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(blocks)) => block_texts(blocks).collect(),
        _ => Vec::new(),
    }
}

/// Every string `v` holds, at any depth.
pub(in crate::proxy) fn all_strings<'a>(v: Option<&'a Value>, out: &mut Vec<&'a str>) {
    match v {
        Some(Value::String(s)) => out.push(s),
        Some(Value::Array(a)) => a.iter().for_each(|x| all_strings(Some(x), out)),
        Some(Value::Object(o)) => o.values().for_each(|x| all_strings(Some(x), out)),
        _ => {}
    }
}

pub(in crate::proxy) fn kind(b: &Value) -> Option<&str> {
    b.get("type").and_then(Value::as_str)
}

/// The blocks of `messages` with role `r`.
pub(in crate::proxy) fn blocks_of<'a>(
    messages: &'a [Value],
    r: &'a str,
) -> impl Iterator<Item = &'a Value> {
    messages
        .iter()
        .filter(move |m| role(m) == Some(r))
        .filter_map(|m| m.get("content")?.as_array())
        .flatten()
}

/// The text of a tool result's content (a string, or text blocks); a Responses call output's
/// `output` is of the same shape.
pub(in crate::proxy) fn result_text(content: Option<&Value>) -> String {
    match content {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| b.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// A message without `cache_control` on it or on its blocks.
pub(super) fn without_breakpoints(m: &Value) -> Value {
    let mut m = m.clone();
    if let Some(o) = m.as_object_mut() {
        o.remove("cache_control");
        if let Some(Value::Array(blocks)) = o.get_mut("content") {
            for b in blocks.iter_mut().filter_map(Value::as_object_mut) {
                b.remove("cache_control");
            }
        }
    }
    m
}
