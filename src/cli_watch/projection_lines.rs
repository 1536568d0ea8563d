//! The lines `worldfs watch` prints for a projection served: what it cost, and each part it
//! newly left out of the model's view since the same conversation's previous projection.

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::format::{clock, cost, short_id, thousands};

/// Most requesters whose last projection is remembered; past it the memory starts again.
const REQUESTERS_KEPT: usize = 256;
/// Most of a projection's left-out parts listed on their own lines.
const LEFT_OUT_LISTED: usize = 8;

/// Whose projections are compared, one with the one before: a conversation's, in one format,
/// policy and budget (a replay asks for several side by side).
type Requester = (String, String, String, String);
/// A left-out part: its kind (`entry`, `command`...) and its path or command line.
type Part = (String, String);

/// What each requester's last projection left out, so that the next one's lines can say what
/// it newly left out.
#[derive(Default)]
pub(super) struct ProjectionLines {
    left_out: HashMap<Requester, HashSet<Part>>,
}

impl ProjectionLines {
    /// The lines for a projection served: what it cost, then each part it newly left out (the
    /// first one of a requester seen here lists what it left out, from the policy's first).
    pub(super) fn projection(&mut self, e: &Value) -> Vec<String> {
        let text = |k: &str| match e.get(k) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(v) => v.to_string(),
        };
        let u = |k: &str| e.get(k).and_then(Value::as_u64).unwrap_or(0);
        let session = text("session");
        let who = if session.is_empty() {
            "projection".to_owned()
        } else {
            format!("projection[{}]", short_id(&session))
        };
        let total = u("evicted_total");
        let mut head = format!("{}, {total} left out", cost(e));
        if u("in_request") > 0 {
            head.push_str(&format!(", {} in the request itself", u("in_request")));
        }
        if u("withheld") > 0 {
            head.push_str(&format!(", {} withheld (secrets)", u("withheld")));
        }
        let mut out = vec![format!(
            "{}  {:<22} {:<5}  {:<9} {head}",
            clock(u("time_ms")),
            who,
            "-",
            "sent"
        )];
        let listed: Vec<(Part, &Value)> = e
            .get("evicted")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|d| {
                let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("").to_owned();
                ((s("part"), s("path")), d)
            })
            .collect();
        let key = (session, text("format"), text("policy"), text("budget"));
        if self.left_out.len() >= REQUESTERS_KEPT && !self.left_out.contains_key(&key) {
            self.left_out.clear();
        }
        let now: HashSet<Part> = listed.iter().map(|(p, _)| p.clone()).collect();
        let before = self.left_out.insert(key, now);
        let new: Vec<&(Part, &Value)> = listed
            .iter()
            .filter(|(p, _)| before.as_ref().is_none_or(|b| !b.contains(p)))
            .collect();
        let pad = " ".repeat(clock(0).len());
        for (_, d) in new.iter().take(LEFT_OUT_LISTED) {
            let (what, tokens, why) = left_out(d);
            out.push(format!(
                "{pad}  {:<22} {:<5}  {:<9} {what}  {} tokens ({why})",
                "",
                "",
                "left out",
                thousands(tokens)
            ));
        }
        if new.len() > LEFT_OUT_LISTED {
            out.push(format!(
                "{pad}  {:<22} {:<5}  {:<9} ... and {} more (`worldfs projection --full` lists them)",
                "",
                "",
                "",
                new.len() - LEFT_OUT_LISTED
            ));
        }
        out
    }
}

/// One part a projection left out (an item of its `evicted`): what it is (`src/big.rs`, the
/// output of a command), its tokens, and why (`no room`, `faded`).
pub(crate) fn left_out(d: &Value) -> (String, u64, &str) {
    let s = |k: &str| d.get(k).and_then(Value::as_str).unwrap_or("");
    let what = match s("part") {
        "entry" => s("path").to_owned(),
        "command" => format!("output of `{}`", s("path")),
        "last_step" => "the last step".to_owned(),
        other => format!("the {other}"),
    };
    let why = match s("reason") {
        "over_budget" | "over_budget_after_render" => "no room",
        "aged" => "faded",
        other => other,
    };
    let tokens = d.get("tokens").and_then(Value::as_u64).unwrap_or(0);
    (what, tokens, why)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_projection_says_what_it_newly_left_out() {
        let served = |evicted: Value, session: Value| {
            json!({"time_ms": 0, "session": session, "format": "anthropic", "policy": "worldfs",
                   "budget": 8000, "tokens": 7812, "entries": 3, "in_request": 1,
                   "evicted_total": evicted.as_array().map_or(0, Vec::len), "evicted": evicted,
                   "withheld": 0})
        };
        let big = json!({"part": "entry", "path": "src/big.rs", "reason": "over_budget",
                         "tokens": 12400});
        let out = json!({"part": "command", "path": "pytest", "reason": "aged", "tokens": 900});
        let mut p = ProjectionLines::default();
        let first = p.projection(&served(json!([big.clone()]), json!("5f2c1a9b-77")));
        assert_eq!(first.len(), 2, "{first:?}");
        let head = first[0].split_once("  ").map_or("", |(_, r)| r);
        assert_eq!(
            head,
            format!(
                "{:<22} {:<5}  {:<9} 7,812 of 8,000 tokens, 3 shown, 1 left out, 1 in \
                     the request itself",
                "projection[5f2c1a9b]", "-", "sent"
            )
        );
        assert_eq!(
            first[1].trim_start(),
            "left out  src/big.rs  12,400 tokens (no room)"
        );
        // Under the head's column of what was done.
        assert_eq!(
            first[1].find("left out"),
            first[0].find("sent"),
            "{first:?}"
        );
        // The next of the same requester: only what it newly left out.
        let next = p.projection(&served(json!([big.clone(), out]), json!("5f2c1a9b-77")));
        assert_eq!(next.len(), 2, "{next:?}");
        assert!(
            next[1].ends_with("left out  output of `pytest`  900 tokens (faded)"),
            "{next:?}"
        );
        // Another conversation's projections are compared with its own.
        let other = p.projection(&served(json!([big]), json!(null)));
        assert!(other[0].contains("projection "), "{other:?}");
        assert_eq!(other.len(), 2, "{other:?}");
    }
}
