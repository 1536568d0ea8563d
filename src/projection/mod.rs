//! Projections: the present state of the agent's world, rendered for a harness within a token
//! budget.
//!
//! [`render`] gathers the goal, framing, structured state, the world's entries chosen by its
//! policy (content read from SOURCE now), still-valid command outputs and the last real step,
//! then renders them as an Anthropic or OpenAI request body, markdown, or raw JSON. Message
//! formats show each file as a synthesized read call and its result, oldest change first, so a
//! world that did not change renders a byte-identical prefix and hits the provider's prompt
//! cache. The rules every body must follow (see `docs/projection.md`) hold by construction and
//! are checked by [`validate`].

mod anthropic;
mod budget;
mod entry_calls;
mod gather;
mod goal;
mod harness_parts;
pub mod ids;
mod json;
mod openai_chat;
mod openai_responses;
mod parts;
mod placement;
mod rejoin;
mod request;
mod shown_once;
mod text;
mod tools;
pub mod validate;

use serde::Serialize;
use serde_json::Value;

use crate::world::World;
use crate::world::policy::NAMES as POLICY_NAMES;
use crate::world::tokens::TokenizerError;

pub use goal::NO_GOAL_TEXT;
pub use ids::{MAX_ID_LEN, valid_id, valid_tool_name};
pub use parts::MINIMAL_USER_TEXT;
pub use request::{
    CacheTtl, Format, LineNumbers, MAX_BREAKPOINTS, ProjectionRequest, StepOutput, shown_hash,
};
pub use text::goal_piece;

/// Name of the tokenizer every count uses.
pub const TOKENIZER: &str = "o200k_base";

#[derive(Debug, thiserror::Error)]
pub enum ProjectionError {
    #[error("invalid projection request: {field}: {reason}")]
    InvalidRequest { field: &'static str, reason: String },
    #[error("unknown policy {name:?}; known policies: {known}")]
    UnknownPolicy { name: String, known: String },
    #[error(
        "a budget of {budget} tokens is too small for a valid {format} projection \
         (the smallest one takes {minimum} tokens)"
    )]
    BudgetTooSmall {
        budget: u64,
        minimum: u64,
        format: Format,
    },
    #[error("cannot count tokens: {0}")]
    Tokenizer(#[from] TokenizerError),
}

/// Which part of a projection was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    Entry,
    Command,
    State,
    Framing,
    LastStep,
    Goal,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DropReason {
    /// The policy found no room for it.
    OverBudget,
    /// The policy aged it out: seed, its cost times its age exceeded the budget; worldfs, its
    /// value faded below what a compaction brings back.
    Aged,
    /// The rendered projection was over budget (the policy's estimate was low): dropped, in
    /// order, unpinned oldest entries, command outputs, state, framing, last step, goal.
    OverBudgetAfterRender,
    /// Only part of it is shown: a goal over half the budget keeps its beginning and end
    /// (`tokens` is what was left out).
    Shortened,
}

/// Something left out of the projection, with what it would have cost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dropped {
    pub part: Part,
    /// The path as shown to the model (entries) or the command line (commands).
    pub path: Option<String>,
    pub reason: DropReason,
    pub tokens: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CommandDropReason {
    /// A file the command read changed since: its output is stale.
    InputChanged,
    /// A file it read is gone or unreadable: its output cannot be vouched for.
    InputUnreadable,
    /// It read a secret: its output may quote it.
    InputWithheld,
}

/// A command output not projected because of its inputs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DroppedCommand {
    pub command: String,
    pub cwd: String,
    /// The first input that failed the check (relative to the root).
    pub path: String,
    pub reason: CommandDropReason,
}

/// A kept entry that could not be read now (turned binary or too large, unreadable).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Skipped {
    pub path: String,
    pub reason: String,
}

/// A rendered projection and its accounting.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Projection {
    pub format: Format,
    /// anthropic `{system?, messages, tools}`; openai_chat `{messages, tools}`;
    /// openai_responses `{instructions?, input, tools}`; text a string; json an object.
    pub body: Value,
    /// Upper-bound estimate of the tokens in `body` (`tokenizer`), always `<= budget`.
    pub tokens: u64,
    pub tokenizer: &'static str,
    pub budget: u64,
    pub policy: &'static str,
    /// The world's turn when rendered.
    pub turn: u64,
    /// Entries shown.
    pub entries: usize,
    /// What was left out, in the policy's order; at most the request's `evicted_limit`.
    pub evicted: Vec<Dropped>,
    /// How many were left out in all.
    pub evicted_total: usize,
    /// Secrets known to be present, shown (if at all) as a notice without content.
    pub withheld: Vec<String>,
    pub stale_dropped_commands: Vec<DroppedCommand>,
    pub skipped: Vec<Skipped>,
    /// Files left out because the client's own request shows them whole, as they are now
    /// ([`ProjectionRequest::request_shows`]).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub in_request: Vec<String>,
}

/// Renders the projection `req` asks for, from `world` as it is now.
///
/// Side effect: the policy's selection is recorded on the entries (eviction counts feed the
/// thrash guard), as [`World::select`] does.
pub fn render(world: &World, req: &ProjectionRequest) -> Result<Projection, ProjectionError> {
    req.check()?;
    let budget = req.budget_tokens.unwrap_or(world.config().budget.tokens);
    let name = req
        .policy
        .clone()
        .unwrap_or_else(|| world.config().budget.policy.clone());
    let policy = world
        .policy(&name)
        .ok_or_else(|| ProjectionError::UnknownPolicy {
            name: name.clone(),
            known: POLICY_NAMES.join(", "),
        })?;
    let mut input = gather::gather(world, req, policy.as_ref(), budget)?;
    budget::fit(&mut input, budget, req.format)?;
    let prefix = placement::unchanged_prefix(world, &input);
    input.unchanged_prefix = if rejoin::rejoin(world, req, &mut input, prefix)? {
        // The joined calls moved to the end: what now follows the prefix may match further.
        placement::unchanged_prefix(world, &input)
    } else {
        prefix
    };
    placement::record(world, &input.layout, &input);
    let tokens = budget::total(&input, req.format);
    let body = match req.format {
        Format::Anthropic => anthropic::render(&input),
        Format::OpenaiChat => openai_chat::render(&input),
        Format::OpenaiResponses => openai_responses::render(&input),
        Format::Text => text::render(&input),
        Format::Json => json::render(&input),
    };
    let evicted_total = input.report.evicted.len();
    let mut evicted = input.report.evicted;
    if let Some(limit) = req.evicted_limit {
        evicted.truncate(limit);
    }
    Ok(Projection {
        format: req.format,
        body,
        tokens,
        tokenizer: TOKENIZER,
        budget,
        policy: input.policy,
        turn: input.turn,
        entries: input.entries.len(),
        evicted,
        evicted_total,
        withheld: input.report.withheld,
        stale_dropped_commands: input.report.stale_dropped_commands,
        skipped: input.report.skipped,
        in_request: input.report.in_request,
    })
}

/// Checks `p.body` against the rules of its format (`text` and `json` have none beyond being a
/// string / an object).
pub fn validate_projection(p: &Projection) -> Result<(), Vec<validate::Violation>> {
    validate::body(p.format, &p.body)
}

#[cfg(test)]
mod tests;
