//! Definitions of the tools the synthesized calls use.
//!
//! A request with tool calls in its history must define those tools (Anthropic rejects it
//! otherwise). The read tool mirrors Claude Code's `Read` (`{file_path, offset?, limit?}`), with
//! a configurable name and path parameter. The last real step may use any tool of the harness;
//! we do not know its schema, so it gets a permissive object schema (a proxy would send the
//! client's own definitions instead).
//!
//! Definitions are rendered from fixed text with sorted keys, so they are byte-identical every
//! turn: any change to `tools` invalidates the whole prompt cache.

use serde_json::{Value, json};

use super::request::{Format, ProjectionRequest};

const READ_DESCRIPTION: &str = "Reads a file from the local filesystem. The result shows each \
line prefixed by its 1-based line number. `offset` is the line to start at, `limit` the number \
of lines to read; without them the whole file is read.";

const STEP_DESCRIPTION: &str = "A tool of the agent's harness; its calls are replayed as they \
happened.";

/// One tool definition, independent of the format.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub description: &'static str,
    /// JSON Schema (draft 2020-12) of the input object.
    pub schema: Value,
}

/// The read tool of `req`.
pub fn read_tool(req: &ProjectionRequest) -> ToolDef {
    let mut props = serde_json::Map::new();
    props.insert(
        req.path_param.clone(),
        json!({"type": "string", "description": "Path of the file to read"}),
    );
    props.insert(
        "offset".into(),
        json!({"type": "integer", "minimum": 1, "description": "Line number to start reading from"}),
    );
    props.insert(
        "limit".into(),
        json!({"type": "integer", "minimum": 1, "description": "Number of lines to read"}),
    );
    ToolDef {
        name: req.tool_name.clone(),
        description: READ_DESCRIPTION,
        schema: json!({
            "type": "object",
            "properties": Value::Object(props),
            "required": [req.path_param.clone()],
        }),
    }
}

/// A permissive definition for a harness tool named `name` (already a valid tool name).
pub fn step_tool(name: &str) -> ToolDef {
    ToolDef {
        name: name.to_owned(),
        description: STEP_DESCRIPTION,
        schema: json!({"type": "object"}),
    }
}

/// `defs` in the shape `format` expects (`[]` for the text and json formats).
pub fn render(defs: &[ToolDef], format: Format) -> Value {
    let list = defs.iter().filter_map(|d| match format {
        Format::Anthropic => Some(json!({
            "name": d.name, "description": d.description, "input_schema": d.schema,
        })),
        Format::OpenaiChat => Some(json!({
            "type": "function",
            "function": {"name": d.name, "description": d.description, "parameters": d.schema},
        })),
        Format::OpenaiResponses => Some(json!({
            "type": "function", "name": d.name, "description": d.description,
            "parameters": d.schema,
        })),
        Format::Text | Format::Json => None,
    });
    Value::Array(list.collect())
}
