//! What a harness asks for: the format, the budget and how synthesized calls should look.
//!
//! Every field has a default so a socket client can send `{"format": "anthropic"}` and get a
//! projection that works with Claude Code's own `Read` tool.

use std::path::PathBuf;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::ProjectionError;
use super::ids;

/// The shape of the projection body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Format {
    /// `{system, messages, tools}` for `POST /v1/messages`.
    Anthropic,
    /// `{messages, tools}` for `POST /v1/chat/completions`.
    OpenaiChat,
    /// `{instructions, input, tools}` for `POST /v1/responses`.
    OpenaiResponses,
    /// Plain markdown, for prompt injection (hooks, custom prompts).
    Text,
    /// Raw entries with their current content, for custom harnesses.
    Json,
}

impl Format {
    pub const ALL: [Format; 5] = [
        Format::Anthropic,
        Format::OpenaiChat,
        Format::OpenaiResponses,
        Format::Text,
        Format::Json,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Format::Anthropic => "anthropic",
            Format::OpenaiChat => "openai_chat",
            Format::OpenaiResponses => "openai_responses",
            Format::Text => "text",
            Format::Json => "json",
        }
    }

    /// Formats that are a messages array with synthesized tool calls.
    pub fn is_messages(self) -> bool {
        matches!(
            self,
            Format::Anthropic | Format::OpenaiChat | Format::OpenaiResponses
        )
    }
}

impl FromStr for Format {
    type Err = ProjectionError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| ProjectionError::InvalidRequest {
                field: "format",
                reason: format!(
                    "unknown format {s:?}; expected one of anthropic, openai_chat, \
                     openai_responses, text, json"
                ),
            })
    }
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// How file lines are numbered in synthesized read results. Claude Code changed its `Read`
/// output between versions; the Edit tool strips the gutter by its separator, so a projection
/// must use the separator the live client uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineNumbers {
    /// `12\tline` (Claude Code 2.1.2xx).
    #[default]
    Tab,
    /// `    12→line` (older Claude Code: right-aligned to 6, then U+2192).
    Arrow,
    /// The raw lines, no gutter.
    None,
}

impl LineNumbers {
    /// The gutter a Read result's text starts with: `12\tline` (no padding) or `    12→line`.
    /// `None` for text that starts otherwise (a Bash result, a listing, an error), so a
    /// client can take the style from the results its agent really got.
    pub fn of_read_result(text: &str) -> Option<Self> {
        let line = text.lines().next()?;
        let rest = line.trim_start_matches(' ');
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        if digits == 0 {
            return None;
        }
        match rest[digits..].chars().next() {
            Some('\t') if rest.len() == line.len() => Some(Self::Tab),
            Some('\u{2192}') => Some(Self::Arrow),
            _ => None,
        }
    }
}

/// How long the prompt cache keeps what a projection's `cache_control` breakpoints mark
/// (anthropic). The API requires breakpoints with the longer time before those with the shorter
/// one (tools, then system, then messages), so a harness that marks its own last turn for an
/// hour (Claude Code does on a subscription) must ask for `1h` here too.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum CacheTtl {
    /// `{"type": "ephemeral"}`: the API's default of five minutes.
    #[default]
    #[serde(rename = "5m")]
    FiveMinutes,
    /// `{"type": "ephemeral", "ttl": "1h"}`: written at 2x instead of 1.25x, kept an hour.
    #[serde(rename = "1h")]
    OneHour,
}

impl CacheTtl {
    /// The `cache_control` value of a breakpoint. Five minutes is left implicit, as the API's
    /// default, so bodies stay as they were before the option existed.
    pub fn cache_control(self) -> serde_json::Value {
        match self {
            CacheTtl::FiveMinutes => serde_json::json!({"type": "ephemeral"}),
            CacheTtl::OneHour => serde_json::json!({"type": "ephemeral", "ttl": "1h"}),
        }
    }

    /// The time a `cache_control` value asks for; `None` for one this API version does not
    /// define (left for the API to judge).
    pub fn of(cache_control: &serde_json::Value) -> Option<Self> {
        match cache_control.get("ttl") {
            None => Some(CacheTtl::FiveMinutes),
            Some(t) => serde_json::from_value(t.clone()).ok(),
        }
    }
}

/// What the last step's result carries of lines the stream above already shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepOutput {
    /// Runs of 4 or more lines shown above become one line naming them (see
    /// `docs/projection.md`): they would otherwise be sent twice, once uncached.
    #[default]
    ShownOnce,
    /// The result as the harness recorded it.
    Verbatim,
}

/// A request for a projection. Deserializable from the socket's JSON parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ProjectionRequest {
    pub format: Format,
    /// Token budget (o200k_base); `None` uses the world's configured `budget.tokens`.
    pub budget_tokens: Option<u64>,
    /// Policy name (`worldfs`, `seed`, `lru`); `None` uses the world's configured policy.
    pub policy: Option<String>,
    /// Name of the read tool the synthesized calls use (Claude Code: `Read`).
    pub tool_name: String,
    /// Name of its path parameter (Claude Code: `file_path`).
    pub path_param: String,
    /// `cache_control` breakpoints to place (anthropic only), 0 to 4.
    pub max_breakpoints: u8,
    /// How long the cache keeps what they mark (anthropic only).
    pub cache_ttl: CacheTtl,
    /// Root shown to the model (e.g. the mount path) so paths are absolute, as Claude Code's
    /// `Read` requires; `None` shows paths relative to the root.
    pub absolute_paths: Option<PathBuf>,
    pub line_numbers: LineNumbers,
    /// Show deleted entries as a one-line "does not exist" result (default) or omit them.
    pub include_deleted: bool,
    /// Whether the last step's result repeats lines the stream shows (the json format always
    /// has it verbatim).
    pub step_output: StepOutput,
    /// Show the last step (the default). A client that sends the real last turn itself (`worldfs
    /// proxy`, which keeps Claude Code's own last tool call verbatim, thinking signature and all)
    /// asks without it, or the call would be there twice.
    pub last_step: bool,
    /// At most this many evicted entries listed in the result (`None`: all of them). The
    /// result's `evicted_total` counts them all: a world of 20,000 files listed every one of
    /// them in every projection, 1.5 MB of JSON for a body of 20 KB.
    pub evicted_limit: Option<usize>,
    /// The conversation whose goal and structured state are shown (Claude Code's session id);
    /// `None`: the current one.
    pub session: Option<String>,
    /// Files the client's own request already shows whole (root-relative), with the
    /// [`shown_hash`] of what it shows: one whose content on disk still has that hash is left
    /// out, since the request holds it as it is (`worldfs proxy`: the files Claude Code attaches
    /// to a prompt, or again after a compaction).
    pub request_shows: Vec<(PathBuf, String)>,
    /// Outputs the client's own request holds as they were recorded, by the [`shown_hash`] of
    /// their text: a kept output whose text has one of these hashes is not shown again
    /// (`worldfs proxy`: a background agent's report, in Claude Code's notice that it ended).
    pub request_outputs: Vec<String>,
    /// Tool calls the client's own request shows with their results (its real last turn, by
    /// the harness's call ids): the last step is not shown when it is one of them. Not in the
    /// [`requester_key`](Self::requester_key): it changes at every call, and only the last
    /// step, at the end, depends on it.
    pub shown_calls: Vec<String>,
}

/// The hash (blake3, hex) by which a copy of a file is matched with the file: of its content
/// without the line breaks at its end, since a numbered listing of its lines cannot tell them.
pub fn shown_hash(content: &[u8]) -> String {
    let end = content
        .iter()
        .rposition(|b| !matches!(b, b'\n' | b'\r'))
        .map_or(0, |i| i + 1);
    blake3::hash(&content[..end]).to_hex().to_string()
}

impl Default for ProjectionRequest {
    fn default() -> Self {
        Self {
            format: Format::Anthropic,
            budget_tokens: None,
            policy: None,
            tool_name: "Read".into(),
            path_param: "file_path".into(),
            max_breakpoints: 2,
            cache_ttl: CacheTtl::FiveMinutes,
            absolute_paths: None,
            line_numbers: LineNumbers::Tab,
            include_deleted: true,
            step_output: StepOutput::ShownOnce,
            last_step: true,
            evicted_limit: None,
            session: None,
            request_shows: Vec::new(),
            request_outputs: Vec::new(),
            shown_calls: Vec::new(),
        }
    }
}

/// Anthropic counts every `cache_control` in the request, tools and system included.
pub const MAX_BREAKPOINTS: u8 = 4;

impl ProjectionRequest {
    pub fn new(format: Format, budget_tokens: u64) -> Self {
        Self {
            format,
            budget_tokens: Some(budget_tokens),
            ..Self::default()
        }
    }

    /// The requester this request speaks for: the world keeps each requester's last selection,
    /// where its projection placed each piece, and what its thrash guard learnt. Everything
    /// that changes what is chosen or the bytes of a piece is part of it, so two clients with
    /// the same budget but other options (a `worldfs projection` beside `worldfs proxy`) never
    /// move each other's pieces or cache breakpoints. The number of breakpoints and their time
    /// to live are not: they only mark pieces, and the proxy's change from call to call (it gets
    /// what Claude Code's own leave, and matches their time); nor is the length of the evicted
    /// list. Each conversation named is a requester of its own: two sessions on one mount
    /// each have their own prompt cache.
    pub fn requester_key(&self, policy: &str, budget: u64) -> String {
        let root = self
            .absolute_paths
            .as_deref()
            .map_or_else(String::new, |r| r.to_string_lossy().into_owned());
        // Left out when none is named, so the keys saved before sessions existed still match.
        let session = self
            .session
            .as_deref()
            .map_or_else(String::new, |s| format!("/session={s}"));
        format!(
            "{policy}/{budget}/{format}/{tool}:{param}/{numbers:?}/{step:?}/last_step={last}\
             /deleted={deleted}/root={root}{session}",
            format = self.format.name(),
            tool = self.tool_name,
            param = self.path_param,
            numbers = self.line_numbers,
            step = self.step_output,
            last = self.last_step,
            deleted = self.include_deleted,
        )
    }

    /// Rejects requests whose output could not be valid, before any work is done.
    pub fn check(&self) -> Result<(), ProjectionError> {
        let bad = |field, reason: String| Err(ProjectionError::InvalidRequest { field, reason });
        if !ids::valid_tool_name(&self.tool_name) {
            return bad(
                "tool_name",
                format!(
                    "{:?} does not match ^[a-zA-Z0-9_-]{{1,64}}$",
                    self.tool_name
                ),
            );
        }
        // The path parameter becomes a JSON key in a schema next to `offset` and `limit`.
        if self.path_param.is_empty() || self.path_param.len() > 64 {
            return bad("path_param", "must be 1 to 64 characters".into());
        }
        if matches!(self.path_param.as_str(), "offset" | "limit") {
            return bad(
                "path_param",
                format!(
                    "{:?} collides with the read tool's own parameters",
                    self.path_param
                ),
            );
        }
        if self.max_breakpoints > MAX_BREAKPOINTS {
            return bad(
                "max_breakpoints",
                format!(
                    "{} is more than the API allows ({MAX_BREAKPOINTS})",
                    self.max_breakpoints
                ),
            );
        }
        if let Some(root) = &self.absolute_paths
            && !root.is_absolute()
        {
            return bad(
                "absolute_paths",
                format!("{} is not an absolute path", root.display()),
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_requester_is_every_option_that_changes_the_pieces_and_only_those() {
        let base = ProjectionRequest::new(Format::Anthropic, 8000);
        let key = |r: &ProjectionRequest| r.requester_key("worldfs", 8000);
        // What only marks pieces, or only shortens the report, is the same requester.
        let mut same = base.clone();
        same.max_breakpoints = 4;
        same.cache_ttl = CacheTtl::OneHour;
        same.evicted_limit = Some(3);
        assert_eq!(key(&same), key(&base));
        // Everything else is another one.
        let variants: Vec<fn(&mut ProjectionRequest)> = vec![
            |r| r.format = Format::OpenaiChat,
            |r| r.tool_name = "View".into(),
            |r| r.path_param = "path".into(),
            |r| r.absolute_paths = Some(PathBuf::from("/work")),
            |r| r.line_numbers = LineNumbers::Arrow,
            |r| r.include_deleted = false,
            |r| r.step_output = StepOutput::Verbatim,
            |r| r.last_step = false,
            |r| r.session = Some("9f2c".into()),
        ];
        // A request naming no conversation has the key it had before conversations were
        // named, so the layouts saved by earlier versions still match.
        assert!(!key(&base).contains("session"), "{}", key(&base));
        let mut seen = vec![key(&base)];
        for change in variants {
            let mut r = base.clone();
            change(&mut r);
            let k = key(&r);
            assert!(!seen.contains(&k), "{k}");
            seen.push(k);
        }
        assert_ne!(base.requester_key("seed", 8000), key(&base));
        assert_ne!(base.requester_key("worldfs", 16000), key(&base));
    }
}
