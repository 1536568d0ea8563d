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
//!
//! They are also sent with every request, so they say what the model needs and no more: the read
//! tool's one description carries what its parameters mean, and a harness tool, whose calls are
//! only ever replayed, has no description at all (both APIs make it optional). That took 36
//! tokens (o200k_base) off the read tool and 19 off each harness tool, on every request: 74 per
//! request of the replayed runs that use two harness tools.

use serde_json::{Value, json};

use super::request::{Format, ProjectionRequest};

const READ_DESCRIPTION: &str = "Reads a file. Each line of the result starts with its 1-based \
line number. `offset` is the first line to read and `limit` how many; without them, the whole \
file.";

/// One tool definition, independent of the format.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolDef {
    pub name: String,
    pub description: Option<&'static str>,
    /// JSON Schema (draft 2020-12) of the input object.
    pub schema: Value,
}

/// The read tool of `req`.
pub fn read_tool(req: &ProjectionRequest) -> ToolDef {
    let mut props = serde_json::Map::new();
    props.insert(req.path_param.clone(), json!({"type": "string"}));
    props.insert("offset".into(), json!({"type": "integer", "minimum": 1}));
    props.insert("limit".into(), json!({"type": "integer", "minimum": 1}));
    ToolDef {
        name: req.tool_name.clone(),
        description: Some(READ_DESCRIPTION),
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
        description: None,
        schema: json!({"type": "object"}),
    }
}

/// `defs` in the shape `format` expects (`[]` for the text and json formats).
pub fn render(defs: &[ToolDef], format: Format) -> Value {
    let list = defs.iter().filter_map(|d| {
        let mut def = match format {
            Format::Anthropic => json!({"name": d.name, "input_schema": d.schema}),
            Format::OpenaiChat => json!({"name": d.name, "parameters": d.schema}),
            Format::OpenaiResponses => {
                json!({"type": "function", "name": d.name, "parameters": d.schema})
            }
            Format::Text | Format::Json => return None,
        };
        if let (Some(text), Some(obj)) = (d.description, def.as_object_mut()) {
            obj.insert("description".into(), Value::from(text));
        }
        Some(match format {
            Format::OpenaiChat => json!({"type": "function", "function": def}),
            _ => def,
        })
    });
    Value::Array(list.collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_read_tool_carries_a_description_in_every_format() {
        let defs = [read_tool(&ProjectionRequest::default()), step_tool("bash")];
        let a = render(&defs, Format::Anthropic);
        assert_eq!(a[0]["name"], "Read");
        assert_eq!(a[0]["description"], READ_DESCRIPTION);
        assert_eq!(a[0]["input_schema"]["required"], json!(["file_path"]));
        assert_eq!(
            a[1],
            json!({"name": "bash", "input_schema": {"type": "object"}})
        );
        let c = render(&defs, Format::OpenaiChat);
        assert_eq!(c[0]["type"], "function");
        assert_eq!(c[0]["function"]["description"], READ_DESCRIPTION);
        assert_eq!(
            c[1],
            json!({"type": "function", "function": {"name": "bash", "parameters": {"type": "object"}}})
        );
        let r = render(&defs, Format::OpenaiResponses);
        assert_eq!(r[0]["description"], READ_DESCRIPTION);
        assert_eq!(
            r[1],
            json!({"type": "function", "name": "bash", "parameters": {"type": "object"}})
        );
        assert_eq!(render(&defs, Format::Text), json!([]));
    }
}
