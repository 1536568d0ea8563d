//! The rules a projection body must obey (`shared/notes/context-apis.md`), as checks.
//!
//! The renderers satisfy them by construction; these checks prove it on random worlds and
//! golden files, and other tools (the replay benchmark, the socket tests, a proxy) can run them
//! on any body, including ones they assembled themselves. Each function returns every
//! violation found, not just the first.

use std::collections::{HashMap, HashSet};

use serde::Serialize;
use serde_json::Value;

use super::ids::{valid_id, valid_tool_name};
use super::request::{CacheTtl, Format, MAX_BREAKPOINTS};

/// Which rule a body breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// The body does not have the format's shape (missing arrays, wrong types).
    Shape,
    /// A role the format does not allow in that place.
    Role,
    /// The conversation must start with a user message.
    FirstUser,
    /// The request must end with a user message (anthropic) or user/tool message (openai).
    EndsWithUser,
    /// A tool call has no result right after it.
    MissingResult,
    /// Results must come first in the message that answers a tool call.
    ResultsNotFirst,
    /// A result answers no call of the previous assistant message.
    UnexpectedResult,
    /// Ids: `^[a-zA-Z0-9_-]+$`, at most 40 characters.
    BadId,
    /// Ids must be unique within the request.
    DuplicateId,
    /// Tool names: `^[a-zA-Z0-9_-]{1,64}$`.
    BadToolName,
    /// Every tool called must be defined in `tools`.
    UndefinedTool,
    /// Tool inputs are JSON objects (arguments: a JSON string of an object).
    BadInput,
    /// No empty or whitespace-only text blocks.
    EmptyText,
    /// No empty message.
    EmptyMessage,
    /// At most 4 `cache_control` breakpoints.
    TooManyBreakpoints,
    /// A breakpoint kept an hour after one kept five minutes, in the order the API reads them
    /// (tools, system, messages): it answers 400.
    CacheTtlOrder,
    /// Thinking blocks only at the start of the last assistant message, signed.
    Thinking,
    /// Synthesized Responses items carry no `id`.
    ItemId,
}

/// One broken rule, with where (a JSON-pointer-like path) and what.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub rule: Rule,
    pub at: String,
    pub message: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {:?}: {}", self.at, self.rule, self.message)
    }
}

#[derive(Default)]
struct Report(Vec<Violation>);

impl Report {
    fn add(&mut self, rule: Rule, at: impl Into<String>, message: impl Into<String>) {
        self.0.push(Violation {
            rule,
            at: at.into(),
            message: message.into(),
        });
    }

    fn finish(self) -> Result<(), Vec<Violation>> {
        if self.0.is_empty() {
            Ok(())
        } else {
            Err(self.0)
        }
    }

    fn id(&mut self, id: Option<&str>, at: &str, seen: &mut HashSet<String>) {
        match id {
            Some(id) if valid_id(id) => {
                if !seen.insert(id.to_owned()) {
                    self.add(Rule::DuplicateId, at, format!("id {id:?} used twice"));
                }
            }
            other => self.add(
                Rule::BadId,
                at,
                format!("{other:?} is not ^[a-zA-Z0-9_-]+$ with at most 40 characters"),
            ),
        }
    }

    fn tool_name(&mut self, name: Option<&str>, at: &str, defined: &HashSet<String>) {
        match name {
            Some(n) if valid_tool_name(n) => {
                if !defined.contains(n) {
                    self.add(
                        Rule::UndefinedTool,
                        at,
                        format!("tool {n:?} is not in tools"),
                    );
                }
            }
            other => self.add(Rule::BadToolName, at, format!("tool name {other:?}")),
        }
    }
}

fn is_blank(s: &str) -> bool {
    s.trim().is_empty()
}

/// Checks `body` for `format`.
pub fn body(format: Format, body: &Value) -> Result<(), Vec<Violation>> {
    match format {
        Format::Anthropic => anthropic(body),
        Format::OpenaiChat => openai_chat(body),
        Format::OpenaiResponses => openai_responses(body),
        Format::Text => match body {
            Value::String(_) => Ok(()),
            _ => Err(vec![Violation {
                rule: Rule::Shape,
                at: "".into(),
                message: "text body must be a string".into(),
            }]),
        },
        Format::Json => match body {
            Value::Object(_) => Ok(()),
            _ => Err(vec![Violation {
                rule: Rule::Shape,
                at: "".into(),
                message: "json body must be an object".into(),
            }]),
        },
    }
}

/// Tool definitions: names valid and unique, schemas object schemas. Returns the names.
fn tool_defs(r: &mut Report, tools: Option<&Value>, format: Format) -> HashSet<String> {
    let mut names = HashSet::new();
    let Some(tools) = tools else {
        return names;
    };
    let Some(list) = tools.as_array() else {
        r.add(Rule::Shape, "/tools", "tools must be an array");
        return names;
    };
    for (i, t) in list.iter().enumerate() {
        let at = format!("/tools/{i}");
        let (name, schema) = match format {
            Format::Anthropic => (t.get("name"), t.get("input_schema")),
            Format::OpenaiChat => {
                let f = t.get("function");
                (
                    f.and_then(|f| f.get("name")),
                    f.and_then(|f| f.get("parameters")),
                )
            }
            _ => (t.get("name"), t.get("parameters")),
        };
        match name.and_then(Value::as_str) {
            Some(n) if valid_tool_name(n) => {
                if !names.insert(n.to_owned()) {
                    r.add(Rule::BadToolName, &at, format!("tool {n:?} defined twice"));
                }
            }
            other => r.add(Rule::BadToolName, &at, format!("tool name {other:?}")),
        }
        if schema.and_then(|s| s.get("type")).and_then(Value::as_str) != Some("object") {
            r.add(
                Rule::Shape,
                &at,
                "the input schema must be an object schema",
            );
        }
        if format != Format::Anthropic && t.get("type").and_then(Value::as_str) != Some("function")
        {
            r.add(Rule::Shape, &at, "tool type must be \"function\"");
        }
    }
    names
}

/// `cache_control` markers anywhere under `v`, as the API counts them against its limit of 4
/// (also used by `worldfs proxy` on the parts of a request it keeps).
pub fn count_cache_control(v: &Value) -> usize {
    match v {
        Value::Object(m) => {
            usize::from(m.contains_key("cache_control"))
                + m.iter()
                    .filter(|(k, _)| k.as_str() != "cache_control")
                    .map(|(_, v)| count_cache_control(v))
                    .sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_cache_control).sum(),
        _ => 0,
    }
}

/// Each `cache_control` under `v` with where it is, in the order the API reads them: an
/// object's own mark after what it holds (it marks the end of the block).
fn marks<'a>(v: &'a Value, at: String, out: &mut Vec<(String, &'a Value)>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m.iter().filter(|(k, _)| k.as_str() != "cache_control") {
                marks(x, format!("{at}/{k}"), out);
            }
            if let Some(cc) = m.get("cache_control") {
                out.push((format!("{at}/cache_control"), cc));
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                marks(x, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
}

/// The time each breakpoint under `v` asks for, in the order the API reads them (`None`: a
/// time this API version does not define). Also used by `worldfs proxy`, whose breakpoints must
/// fit between Claude Code's.
pub fn breakpoint_ttls(v: &Value) -> Vec<Option<CacheTtl>> {
    let mut all = Vec::new();
    marks(v, String::new(), &mut all);
    all.into_iter().map(|(_, cc)| CacheTtl::of(cc)).collect()
}

/// No breakpoint kept an hour after one kept five minutes. A top-level `cache_control`
/// (automatic caching) marks the last block, so it is read last.
fn cache_ttl_order(r: &mut Report, body: &Value) {
    let mut all = Vec::new();
    for key in ["tools", "system", "messages"] {
        if let Some(v) = body.get(key) {
            marks(v, format!("/{key}"), &mut all);
        }
    }
    if let Some(cc) = body.get("cache_control") {
        all.push(("/cache_control".into(), cc));
    }
    let mut short: Option<String> = None;
    for (at, cc) in all {
        match (CacheTtl::of(cc), &short) {
            (Some(CacheTtl::FiveMinutes), None) => short = Some(at),
            (Some(CacheTtl::OneHour), Some(first)) => r.add(
                Rule::CacheTtlOrder,
                at,
                format!("a 1h breakpoint after the 5m one at {first}"),
            ),
            _ => {}
        }
    }
}

/// One message after merging consecutive messages of the same role, as the API does.
struct Merged<'a> {
    role: &'a str,
    /// (original message index, block index, block)
    blocks: Vec<(usize, usize, &'a Value)>,
}

fn kind(b: &Value) -> &str {
    b.get("type").and_then(Value::as_str).unwrap_or("")
}

/// Anthropic Messages request body.
pub fn anthropic(body: &Value) -> Result<(), Vec<Violation>> {
    let mut r = Report::default();
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        r.add(Rule::Shape, "/messages", "messages must be an array");
        return r.finish();
    };
    let tools = tool_defs(&mut r, body.get("tools"), Format::Anthropic);
    match body.get("system") {
        None => {}
        Some(Value::String(s)) if !is_blank(s) => {}
        Some(Value::Array(blocks)) => {
            for (i, b) in blocks.iter().enumerate() {
                let ok = kind(b) == "text"
                    && b.get("text")
                        .and_then(Value::as_str)
                        .is_some_and(|t| !is_blank(t));
                if !ok {
                    r.add(
                        Rule::EmptyText,
                        format!("/system/{i}"),
                        "system blocks are non-empty text",
                    );
                }
            }
        }
        Some(_) => r.add(Rule::EmptyText, "/system", "system must be non-empty text"),
    }
    let breakpoints = count_cache_control(body);
    if breakpoints > usize::from(MAX_BREAKPOINTS) {
        r.add(
            Rule::TooManyBreakpoints,
            "",
            format!("{breakpoints} cache_control breakpoints (at most {MAX_BREAKPOINTS})"),
        );
    }
    cache_ttl_order(&mut r, body);
    if messages.is_empty() {
        r.add(Rule::EmptyMessage, "/messages", "no messages");
        return r.finish();
    }

    let mut merged: Vec<Merged<'_>> = Vec::new();
    let mut ids = HashSet::new();
    let mut any_tool_block = false;
    for (mi, m) in messages.iter().enumerate() {
        let at = format!("/messages/{mi}");
        let role = match m.get("role").and_then(Value::as_str) {
            Some(role @ ("user" | "assistant")) => role,
            other => {
                r.add(
                    Rule::Role,
                    &at,
                    format!("role {other:?} (only user and assistant)"),
                );
                continue;
            }
        };
        let blocks: Vec<&Value> = match m.get("content") {
            Some(Value::String(s)) => {
                if is_blank(s) {
                    r.add(Rule::EmptyMessage, &at, "empty string content");
                }
                Vec::new()
            }
            Some(Value::Array(a)) => {
                if a.is_empty() {
                    r.add(Rule::EmptyMessage, &at, "empty content array");
                }
                a.iter().collect()
            }
            _ => {
                r.add(Rule::Shape, &at, "content must be a string or an array");
                Vec::new()
            }
        };
        for (bi, b) in blocks.iter().enumerate() {
            let bat = format!("{at}/content/{bi}");
            match (kind(b), role) {
                ("text", _) if b.get("text").and_then(Value::as_str).is_none_or(is_blank) => {
                    r.add(Rule::EmptyText, &bat, "empty or whitespace-only text block");
                }
                ("text", _) => {}
                ("tool_use", "assistant") => {
                    any_tool_block = true;
                    r.id(b.get("id").and_then(Value::as_str), &bat, &mut ids);
                    r.tool_name(b.get("name").and_then(Value::as_str), &bat, &tools);
                    if !b.get("input").is_some_and(Value::is_object) {
                        r.add(Rule::BadInput, &bat, "tool_use input must be an object");
                    }
                }
                ("tool_result", "user") => {
                    any_tool_block = true;
                    if b.get("tool_use_id").and_then(Value::as_str).is_none() {
                        r.add(Rule::BadId, &bat, "tool_result without tool_use_id");
                    }
                    match b.get("content") {
                        None | Some(Value::String(_)) => {}
                        Some(Value::Array(parts)) => {
                            for (pi, p) in parts.iter().enumerate() {
                                if kind(p) == "text"
                                    && p.get("text").and_then(Value::as_str).is_none_or(is_blank)
                                {
                                    r.add(
                                        Rule::EmptyText,
                                        format!("{bat}/content/{pi}"),
                                        "empty text",
                                    );
                                }
                            }
                        }
                        Some(_) => r.add(Rule::Shape, &bat, "tool_result content"),
                    }
                }
                ("thinking" | "redacted_thinking", "assistant") => {}
                ("", _) => r.add(Rule::Shape, &bat, "content block without a type"),
                (k @ ("tool_use" | "tool_result" | "thinking" | "redacted_thinking"), _) => {
                    r.add(Rule::Role, &bat, format!("{k} block in a {role} message"))
                }
                _ => {}
            }
        }
        match merged.last_mut() {
            Some(last) if last.role == role => {
                last.blocks
                    .extend(blocks.iter().enumerate().map(|(bi, b)| (mi, bi, *b)));
            }
            _ => merged.push(Merged {
                role,
                blocks: blocks
                    .iter()
                    .enumerate()
                    .map(|(bi, b)| (mi, bi, *b))
                    .collect(),
            }),
        }
    }
    if any_tool_block && tools.is_empty() {
        r.add(
            Rule::UndefinedTool,
            "/tools",
            "tool blocks present but no tools defined",
        );
    }
    if merged.first().is_some_and(|m| m.role != "user") {
        r.add(
            Rule::FirstUser,
            "/messages/0",
            "the first message must be a user message",
        );
    }
    if merged.last().is_some_and(|m| m.role != "user") {
        r.add(
            Rule::EndsWithUser,
            format!("/messages/{}", messages.len() - 1),
            "must end with a user message",
        );
    }
    let last_assistant = merged.iter().rposition(|m| m.role == "assistant");
    let mut prev_uses: Vec<String> = Vec::new();
    for (k, m) in merged.iter().enumerate() {
        let at_of = |mi: usize, bi: usize| format!("/messages/{mi}/content/{bi}");
        if m.role == "assistant" {
            prev_uses = m
                .blocks
                .iter()
                .filter(|(_, _, b)| kind(b) == "tool_use")
                .filter_map(|(_, _, b)| b.get("id").and_then(Value::as_str).map(str::to_owned))
                .collect();
            // Thinking: only at the start of the last assistant message, with its signature.
            let mut leading = true;
            for (mi, bi, b) in &m.blocks {
                let t = kind(b);
                let is_thinking = matches!(t, "thinking" | "redacted_thinking");
                if is_thinking {
                    let signed = match t {
                        "thinking" => b.get("signature").and_then(Value::as_str).is_some(),
                        _ => b.get("data").and_then(Value::as_str).is_some(),
                    };
                    if !leading || Some(k) != last_assistant || !signed {
                        r.add(
                            Rule::Thinking,
                            at_of(*mi, *bi),
                            "thinking blocks belong, signed, at the start of the last assistant message",
                        );
                    }
                } else {
                    leading = false;
                }
            }
            if let Some((mi, bi, b)) = m.blocks.last()
                && matches!(kind(b), "thinking" | "redacted_thinking")
            {
                r.add(
                    Rule::Thinking,
                    at_of(*mi, *bi),
                    "an assistant message cannot end with thinking",
                );
            }
            if !prev_uses.is_empty() && merged.get(k + 1).is_none() {
                r.add(
                    Rule::MissingResult,
                    at_of(m.blocks[0].0, 0),
                    format!("tool_use ids {prev_uses:?} have no tool_result after them"),
                );
            }
            continue;
        }
        // A user message: its leading tool_results must answer exactly the previous uses.
        let leading: Vec<&str> = m
            .blocks
            .iter()
            .take_while(|(_, _, b)| kind(b) == "tool_result")
            .filter_map(|(_, _, b)| b.get("tool_use_id").and_then(Value::as_str))
            .collect();
        for (mi, bi, b) in m.blocks.iter().skip(leading.len()) {
            if kind(b) == "tool_result" {
                r.add(
                    Rule::ResultsNotFirst,
                    at_of(*mi, *bi),
                    "tool_result after other content",
                );
            }
        }
        let answered: HashSet<&str> = leading.iter().copied().collect();
        for id in &prev_uses {
            if !answered.contains(id.as_str()) {
                r.add(
                    Rule::MissingResult,
                    at_of(m.blocks.first().map_or(0, |b| b.0), 0),
                    format!("tool_use {id:?} is not answered at the start of the next message"),
                );
            }
        }
        let expected: HashSet<&str> = prev_uses.iter().map(String::as_str).collect();
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for (mi, bi, b) in &m.blocks {
            if kind(b) != "tool_result" {
                continue;
            }
            let id = b.get("tool_use_id").and_then(Value::as_str).unwrap_or("");
            *counts.entry(id).or_default() += 1;
            if !expected.contains(id) || counts[id] > 1 {
                r.add(
                    Rule::UnexpectedResult,
                    at_of(*mi, *bi),
                    format!("tool_result {id:?} answers no tool_use of the previous message"),
                );
            }
        }
        prev_uses.clear();
    }
    r.finish()
}

fn arguments_object(args: Option<&Value>) -> bool {
    args.and_then(Value::as_str)
        .and_then(|s| serde_json::from_str::<Value>(s).ok())
        .is_some_and(|v| v.is_object())
}

fn content_nonempty(c: Option<&Value>) -> bool {
    match c {
        Some(Value::String(s)) => !is_blank(s),
        Some(Value::Array(parts)) => {
            !parts.is_empty()
                && parts.iter().all(|p| {
                    p.get("text")
                        .and_then(Value::as_str)
                        .is_none_or(|t| !is_blank(t))
                })
        }
        _ => false,
    }
}

/// OpenAI Chat Completions request body.
pub fn openai_chat(body: &Value) -> Result<(), Vec<Violation>> {
    let mut r = Report::default();
    let Some(messages) = body.get("messages").and_then(Value::as_array) else {
        r.add(Rule::Shape, "/messages", "messages must be an array");
        return r.finish();
    };
    let tools = tool_defs(&mut r, body.get("tools"), Format::OpenaiChat);
    let mut ids = HashSet::new();
    let mut pending: Vec<String> = Vec::new();
    let mut any_call = false;
    let mut first_conv_role: Option<&str> = None;
    let mut last_role: Option<&str> = None;
    for (i, m) in messages.iter().enumerate() {
        let at = format!("/messages/{i}");
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        if role != "tool" && !pending.is_empty() {
            r.add(
                Rule::MissingResult,
                &at,
                format!("tool_call ids {pending:?} have no tool message before this one"),
            );
            pending.clear();
        }
        if !matches!(role, "system" | "developer") && first_conv_role.is_none() {
            first_conv_role = Some(role);
        }
        last_role = Some(role);
        match role {
            "system" | "developer" | "user" => {
                if !content_nonempty(m.get("content")) {
                    r.add(Rule::EmptyMessage, &at, "empty content");
                }
            }
            "assistant" => {
                let calls = m.get("tool_calls").and_then(Value::as_array);
                match calls {
                    Some(calls) if !calls.is_empty() => {
                        any_call = true;
                        match m.get("content") {
                            None | Some(Value::Null) => {}
                            c if content_nonempty(c) => {}
                            _ => r.add(Rule::EmptyText, &at, "empty assistant content"),
                        }
                        for (j, c) in calls.iter().enumerate() {
                            let cat = format!("{at}/tool_calls/{j}");
                            let id = c.get("id").and_then(Value::as_str);
                            r.id(id, &cat, &mut ids);
                            if c.get("type").and_then(Value::as_str) != Some("function") {
                                r.add(Rule::Shape, &cat, "tool call type must be function");
                            }
                            let f = c.get("function");
                            r.tool_name(
                                f.and_then(|f| f.get("name")).and_then(Value::as_str),
                                &cat,
                                &tools,
                            );
                            if !arguments_object(f.and_then(|f| f.get("arguments"))) {
                                r.add(
                                    Rule::BadInput,
                                    &cat,
                                    "arguments must be a JSON string of an object",
                                );
                            }
                            pending.push(id.unwrap_or("").to_owned());
                        }
                    }
                    _ => {
                        if !content_nonempty(m.get("content")) {
                            r.add(
                                Rule::EmptyMessage,
                                &at,
                                "assistant message with neither content nor tool calls",
                            );
                        }
                    }
                }
            }
            "tool" => {
                let id = m.get("tool_call_id").and_then(Value::as_str).unwrap_or("");
                if pending.first().map(String::as_str) == Some(id) {
                    pending.remove(0);
                } else {
                    r.add(
                        Rule::UnexpectedResult,
                        &at,
                        format!(
                            "tool message {id:?} does not answer the next pending call {:?}",
                            pending.first()
                        ),
                    );
                }
                if !matches!(
                    m.get("content"),
                    Some(Value::String(_)) | Some(Value::Array(_))
                ) {
                    r.add(Rule::Shape, &at, "tool content must be a string");
                }
            }
            other => r.add(Rule::Role, &at, format!("role {other:?}")),
        }
    }
    if !pending.is_empty() {
        r.add(
            Rule::MissingResult,
            "/messages",
            format!("tool_call ids {pending:?} unanswered"),
        );
    }
    if any_call && tools.is_empty() {
        r.add(
            Rule::UndefinedTool,
            "/tools",
            "tool calls present but no tools defined",
        );
    }
    if first_conv_role.is_some_and(|role| role != "user") {
        r.add(
            Rule::FirstUser,
            "/messages",
            "the conversation must start with a user message",
        );
    }
    match last_role {
        Some("user" | "tool") => {}
        _ => r.add(
            Rule::EndsWithUser,
            "/messages",
            "must end with a user or tool message",
        ),
    }
    r.finish()
}

/// OpenAI Responses request body.
pub fn openai_responses(body: &Value) -> Result<(), Vec<Violation>> {
    let mut r = Report::default();
    let Some(items) = body.get("input").and_then(Value::as_array) else {
        r.add(Rule::Shape, "/input", "input must be an array");
        return r.finish();
    };
    let tools = tool_defs(&mut r, body.get("tools"), Format::OpenaiResponses);
    if let Some(i) = body.get("instructions")
        && i.as_str().is_none_or(is_blank)
    {
        r.add(
            Rule::EmptyText,
            "/instructions",
            "instructions must be non-empty text",
        );
    }
    let mut ids = HashSet::new();
    let mut any_call = false;
    let mut first_msg_role: Option<&str> = None;
    let mut last_kind: Option<&str> = None;
    let mut k = 0;
    while k < items.len() {
        let it = &items[k];
        let at = format!("/input/{k}");
        let t = it.get("type").and_then(Value::as_str).unwrap_or("message");
        match t {
            "message" => {
                let role = it.get("role").and_then(Value::as_str).unwrap_or("");
                if !matches!(role, "user" | "assistant" | "system" | "developer") {
                    r.add(Rule::Role, &at, format!("role {role:?}"));
                }
                if !matches!(role, "system" | "developer") && first_msg_role.is_none() {
                    first_msg_role = Some(role);
                }
                if !content_nonempty(it.get("content")) {
                    r.add(Rule::EmptyMessage, &at, "empty message content");
                }
                last_kind = Some(if role == "user" { "user" } else { "other" });
            }
            "function_call" => {
                any_call = true;
                if first_msg_role.is_none() {
                    first_msg_role = Some("assistant");
                }
                if it.get("id").is_some() {
                    r.add(Rule::ItemId, &at, "synthesized items must not carry an id");
                }
                let id = it.get("call_id").and_then(Value::as_str);
                r.id(id, &at, &mut ids);
                r.tool_name(it.get("name").and_then(Value::as_str), &at, &tools);
                if !arguments_object(it.get("arguments")) {
                    r.add(
                        Rule::BadInput,
                        &at,
                        "arguments must be a JSON string of an object",
                    );
                }
                let next = items.get(k + 1);
                let answered = next.is_some_and(|n| {
                    n.get("type").and_then(Value::as_str) == Some("function_call_output")
                        && n.get("call_id").and_then(Value::as_str) == id
                });
                if !answered {
                    r.add(
                        Rule::MissingResult,
                        &at,
                        format!("call {id:?} is not followed by its output"),
                    );
                    last_kind = Some("other");
                } else {
                    let out = &items[k + 1];
                    let oat = format!("/input/{}", k + 1);
                    if out.get("id").is_some() {
                        r.add(Rule::ItemId, &oat, "synthesized items must not carry an id");
                    }
                    if !matches!(
                        out.get("output"),
                        Some(Value::String(_)) | Some(Value::Array(_))
                    ) {
                        r.add(Rule::Shape, &oat, "output must be a string");
                    }
                    last_kind = Some("output");
                    k += 1;
                }
            }
            "function_call_output" => {
                r.add(
                    Rule::UnexpectedResult,
                    &at,
                    "output without its call right before it",
                );
                last_kind = Some("output");
            }
            other => {
                r.add(Rule::Shape, &at, format!("item type {other:?}"));
                last_kind = Some("other");
            }
        }
        k += 1;
    }
    if any_call && tools.is_empty() {
        r.add(
            Rule::UndefinedTool,
            "/tools",
            "function calls present but no tools defined",
        );
    }
    if first_msg_role.is_some_and(|role| role != "user") {
        r.add(
            Rule::FirstUser,
            "/input",
            "the input must start with a user message",
        );
    }
    if !matches!(last_kind, Some("user" | "output")) {
        r.add(
            Rule::EndsWithUser,
            "/input",
            "must end with a user message or a call output",
        );
    }
    r.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rules(res: Result<(), Vec<Violation>>) -> Vec<Rule> {
        res.err()
            .unwrap_or_default()
            .into_iter()
            .map(|v| v.rule)
            .collect()
    }

    fn read_tool() -> Value {
        json!([{"name": "Read", "input_schema": {"type": "object"}}])
    }

    #[test]
    fn anthropic_valid_minimal() {
        let b =
            json!({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]});
        assert_eq!(anthropic(&b), Ok(()));
    }

    #[test]
    fn anthropic_catches_each_rule() {
        let use_ = |id: &str| json!({"type": "tool_use", "id": id, "name": "Read", "input": {}});
        let res = |id: &str| json!({"type": "tool_result", "tool_use_id": id, "content": "x"});
        let txt = |t: &str| json!({"type": "text", "text": t});
        let cases: Vec<(Value, Rule)> = vec![
            (
                json!({"messages": [{"role": "assistant", "content": [txt("a")]}]}),
                Rule::FirstUser,
            ),
            (
                json!({"messages": [{"role": "user", "content": [txt("a")]},
                                 {"role": "assistant", "content": [txt("b")]}]}),
                Rule::EndsWithUser,
            ),
            (
                json!({"tools": read_tool(), "messages": [{"role": "user", "content": [txt("a")]},
                {"role": "assistant", "content": [use_("a1")]},
                {"role": "user", "content": [txt("no result")]}]}),
                Rule::MissingResult,
            ),
            (
                json!({"tools": read_tool(), "messages": [{"role": "user", "content": [txt("a")]},
                {"role": "assistant", "content": [use_("a1")]},
                {"role": "user", "content": [txt("first"), res("a1")]}]}),
                Rule::ResultsNotFirst,
            ),
            (
                json!({"tools": read_tool(), "messages": [{"role": "user", "content": [res("zz")]}]}),
                Rule::UnexpectedResult,
            ),
            (
                json!({"tools": read_tool(), "messages": [{"role": "user", "content": [txt("a")]},
                {"role": "assistant", "content": [use_("bad id")]},
                {"role": "user", "content": [res("bad id")]}]}),
                Rule::BadId,
            ),
            (
                json!({"tools": read_tool(), "messages": [{"role": "user", "content": [txt("a")]},
                {"role": "assistant", "content": [use_("a1"), use_("a1")]},
                {"role": "user", "content": [res("a1"), res("a1")]}]}),
                Rule::DuplicateId,
            ),
            (
                json!({"messages": [{"role": "user", "content": [txt("a")]},
                {"role": "assistant", "content": [use_("a1")]},
                {"role": "user", "content": [res("a1")]}]}),
                Rule::UndefinedTool,
            ),
            (
                json!({"messages": [{"role": "user", "content": [txt("  ")]}]}),
                Rule::EmptyText,
            ),
            (
                json!({"messages": [{"role": "user", "content": []}]}),
                Rule::EmptyMessage,
            ),
            (
                json!({"messages": [{"role": "system", "content": "x"}]}),
                Rule::Role,
            ),
            (
                json!({"messages": [{"role": "user", "content": [
                {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "b", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "c", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "d", "cache_control": {"type": "ephemeral"}},
                {"type": "text", "text": "e", "cache_control": {"type": "ephemeral"}}]}]}),
                Rule::TooManyBreakpoints,
            ),
            (
                json!({"messages": [{"role": "user", "content": [txt("a")]},
                {"role": "assistant", "content": [txt("b"), {"type": "thinking", "thinking": "x", "signature": "s"}]},
                {"role": "user", "content": [txt("c")]}]}),
                Rule::Thinking,
            ),
        ];
        for (body, rule) in cases {
            let got = rules(anthropic(&body));
            assert!(
                got.contains(&rule),
                "{rule:?} not found in {got:?} for {body}"
            );
        }
    }

    #[test]
    fn an_hour_long_breakpoint_after_a_five_minute_one_is_refused() {
        let hour = json!({"type": "ephemeral", "ttl": "1h"});
        let five = json!({"type": "ephemeral"});
        let body = |system: &Value, message: &Value| {
            json!({
                "system": [{"type": "text", "text": "s", "cache_control": system}],
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": "a", "cache_control": message},
                    {"type": "tool_result", "tool_use_id": "t", "content": [{"type": "text", "text": "r"}], "cache_control": message}
                ]}]
            })
        };
        // Longer first, or all alike: what the API takes.
        for (s, m) in [(&hour, &hour), (&hour, &five), (&five, &five)] {
            assert!(
                !rules(anthropic(&body(s, m))).contains(&Rule::CacheTtlOrder),
                "{s} then {m}"
            );
        }
        // An hour after five minutes, in system then messages, and within the messages.
        let v = anthropic(&body(&five, &hour)).expect_err("refused");
        let at: Vec<&str> = v
            .iter()
            .filter(|v| v.rule == Rule::CacheTtlOrder)
            .map(|v| v.at.as_str())
            .collect();
        assert_eq!(
            at,
            [
                "/messages/0/content/0/cache_control",
                "/messages/0/content/1/cache_control"
            ]
        );
        let mut within = body(&hour, &hour);
        within["messages"][0]["content"][0]["cache_control"] = five.clone();
        assert!(rules(anthropic(&within)).contains(&Rule::CacheTtlOrder));
        // Automatic caching marks the last block: read last.
        let mut auto = body(&five, &five);
        auto["cache_control"] = hour.clone();
        assert!(rules(anthropic(&auto)).contains(&Rule::CacheTtlOrder));
        // Tools are read before the system prompt.
        let mut tools = body(&hour, &hour);
        tools["tools"] =
            json!([{"name": "Read", "input_schema": {"type": "object"}, "cache_control": five}]);
        assert!(rules(anthropic(&tools)).contains(&Rule::CacheTtlOrder));
    }

    #[test]
    fn anthropic_merges_same_role_messages() {
        let b = json!({"tools": read_tool(), "messages": [
            {"role": "user", "content": [{"type": "text", "text": "a"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "x1", "name": "Read", "input": {}}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": "x2", "name": "Read", "input": {}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x1"}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "x2"}, {"type": "text", "text": "t"}]}]});
        assert_eq!(anthropic(&b), Ok(()));
    }

    #[test]
    fn openai_chat_rules() {
        let tools = json!([{"type": "function", "function": {"name": "Read", "parameters": {"type": "object"}}}]);
        let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "Read", "arguments": "{}"}});
        let ok = json!({"tools": tools, "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [call("a"), call("b")]},
            {"role": "tool", "tool_call_id": "a", "content": "1"},
            {"role": "tool", "tool_call_id": "b", "content": ""}]});
        assert_eq!(openai_chat(&ok), Ok(()));
        let swapped = json!({"tools": tools, "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [call("a"), call("b")]},
            {"role": "tool", "tool_call_id": "b", "content": "1"},
            {"role": "tool", "tool_call_id": "a", "content": ""}]});
        assert!(rules(openai_chat(&swapped)).contains(&Rule::UnexpectedResult));
        let long = "x".repeat(41);
        let too_long = json!({"tools": tools, "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [call(&long)]},
            {"role": "tool", "tool_call_id": long, "content": "1"}]});
        assert!(rules(openai_chat(&too_long)).contains(&Rule::BadId));
        let missing = json!({"tools": tools, "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": null, "tool_calls": [call("a")]},
            {"role": "user", "content": "next"}]});
        assert!(rules(openai_chat(&missing)).contains(&Rule::MissingResult));
    }

    #[test]
    fn openai_responses_rules() {
        let tools = json!([{"type": "function", "name": "Read", "parameters": {"type": "object"}}]);
        let ok = json!({"tools": tools, "input": [
            {"type": "message", "role": "user", "content": "go"},
            {"type": "function_call", "call_id": "a", "name": "Read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "a", "output": "x"}]});
        assert_eq!(openai_responses(&ok), Ok(()));
        let with_id = json!({"tools": tools, "input": [
            {"type": "message", "role": "user", "content": "go"},
            {"type": "function_call", "id": "fc_1", "call_id": "a", "name": "Read", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "a", "output": "x"}]});
        assert!(rules(openai_responses(&with_id)).contains(&Rule::ItemId));
        let orphan = json!({"tools": tools, "input": [
            {"type": "message", "role": "user", "content": "go"},
            {"type": "function_call_output", "call_id": "a", "output": "x"}]});
        assert!(rules(openai_responses(&orphan)).contains(&Rule::UnexpectedResult));
        let unpaired = json!({"tools": tools, "input": [
            {"type": "message", "role": "user", "content": "go"},
            {"type": "function_call", "call_id": "a", "name": "Read", "arguments": "{}"},
            {"type": "message", "role": "user", "content": "more"}]});
        assert!(rules(openai_responses(&unpaired)).contains(&Rule::MissingResult));
    }
}
