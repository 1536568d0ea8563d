//! The images and documents of the history replaced: those the user attached to prompts, and
//! those tool calls returned.
//!
//! The world leaves binary files out, so the projection cannot show them from disk, and a
//! screenshot the user pasted is on no disk at all: gone with the history, they would leave the
//! model's view while the agent still works from them. They are the costliest blocks kept (an
//! image, up to about 1,600 tokens), so a file's are kept once, and of the last few files only.
//! The Responses side keeps what Codex's calls returned the same way ([`last_views`]).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use super::content::{blocks_of, kind, without_breakpoints};

/// The image and document blocks of the user's messages in `history`, once each, without
/// breakpoints.
pub(super) fn prompt_media(history: &[Value]) -> Vec<Value> {
    let mut seen = HashSet::new();
    blocks_of(history, "user")
        .filter(|b| matches!(kind(b), Some("image" | "document")))
        .map(without_breakpoints)
        .filter(|b| seen.insert(b.to_string()))
        .collect()
}

/// The images and documents that tool calls of `history` returned (Claude Code's Read of a
/// screenshot or a PDF), without breakpoints, each file's after a text block naming it. The
/// world leaves binary files out, so the projection cannot show them from disk, and with the
/// history they would leave the model's view one call after it saw them. Only the last read
/// of each file (by the call's `file_path`) is kept, and of the last [`READ_MEDIA_KEPT`]
/// files: an agent reads an image again once it has changed it. A file the last turn (`tail`,
/// sent as it came) reads again is left to it.
pub(super) fn read_media(history: &[Value], tail: &[Value]) -> Vec<Value> {
    fn paths(messages: &[Value]) -> HashMap<&str, &str> {
        blocks_of(messages, "assistant")
            .filter(|b| kind(b) == Some("tool_use"))
            .filter_map(|b| {
                let id = b.get("id")?.as_str()?;
                let input = b.get("input")?;
                let path = ["file_path", "notebook_path", "path", "url"]
                    .iter()
                    .find_map(|k| input.get(*k).and_then(Value::as_str))?;
                Some((id, path))
            })
            .collect()
    }
    /// Each tool result's id and its images and documents, for those that have some.
    fn media(messages: &[Value]) -> impl Iterator<Item = (&str, Vec<Value>)> {
        blocks_of(messages, "user")
            .filter(|b| kind(b) == Some("tool_result"))
            .filter_map(|result| {
                let media: Vec<Value> = result
                    .get("content")
                    .and_then(Value::as_array)?
                    .iter()
                    .filter(|b| matches!(kind(b), Some("image" | "document")))
                    .map(without_breakpoints)
                    .collect();
                let id = result.get("tool_use_id").and_then(Value::as_str)?;
                (!media.is_empty()).then_some((id, media))
            })
    }
    let path_of = paths(history);
    // Sent as the last turn has them: only a call there that returned media again (a
    // NotebookEdit names the notebook whose figures a Read returned, and returns none).
    let tail_paths = paths(tail);
    let read_again: HashSet<&str> = media(tail)
        .filter_map(|(id, _)| tail_paths.get(id).copied())
        .collect();
    let views = media(history).map(|(id, media)| {
        let name = path_of.get(id).copied().unwrap_or(id).to_owned();
        (name, media)
    });
    last_views(views, &read_again, "text")
}

/// At most this many files' images or documents, returned by tool calls, are kept (the ones
/// read last): an image costs up to about 1,600 tokens.
const READ_MEDIA_KEPT: usize = 4;

/// The text that names what a tool call returned of a file, kept as it was then.
pub(in crate::proxy) fn earlier_media_label(name: &str) -> String {
    format!(
        "{name}, as a tool call returned it earlier (the files shown below are as they are now; \
         this one is as it was then):"
    )
}

/// What tool calls returned of files no projection shows (`(file, blocks)`, oldest first),
/// as kept ([`read_media`]; the Responses side's `viewed_media`): the last of each file, of
/// the last [`READ_MEDIA_KEPT`] files, none of those in `again` (the last turn returns them
/// anew), each after a text block (of type `text_type`) naming it as it was then.
pub(in crate::proxy) fn last_views(
    views: impl Iterator<Item = (String, Vec<Value>)>,
    again: &HashSet<&str>,
    text_type: &str,
) -> Vec<Value> {
    let mut files: Vec<(String, Vec<Value>)> = Vec::new();
    for (name, blocks) in views {
        files.retain(|(n, _)| *n != name);
        files.push((name, blocks));
    }
    files.retain(|(name, _)| !again.contains(name.as_str()));
    let skip = files.len().saturating_sub(READ_MEDIA_KEPT);
    files
        .into_iter()
        .skip(skip)
        .flat_map(|(name, blocks)| {
            let label = serde_json::json!({"type": text_type, "text": earlier_media_label(&name)});
            std::iter::once(label).chain(blocks)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::tests::{PROMPT, projection, request};
    use super::super::{plan, splice};
    use super::*;
    use serde_json::json;

    /// An image or a PDF a Read returned is in no file the projection can show: the last copy
    /// of each file is kept, named, where the later prompts' media are.
    #[test]
    fn images_tool_calls_returned_are_kept_the_last_of_each_file() {
        let mut body = request(5);
        let png = |data: &str| json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}});
        let pdf = json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}});
        for (call, path, block) in [
            (0, "/p/shot.png", png("c2hvdDE=")),
            (1, "/p/spec.pdf", pdf.clone()),
            (2, "/p/shot.png", png("c2hvdDI=")),
            (4, "/p/tail.png", png("dGFpbA==")),
        ] {
            let m = &mut body["messages"];
            m[1 + 2 * call]["content"][1] = json!({"type": "tool_use", "id": format!("toolu_{call}"),
                "name": "Read", "input": {"file_path": path}});
            m[2 + 2 * call]["content"][0]["content"] = json!([block]);
        }
        let first = plan(&body, Some(PROMPT), false).expect("eligible");
        let labels: Vec<&str> = first
            .kept_blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect();
        assert_eq!(labels.len(), 2, "{:?}", first.kept_blocks);
        assert!(labels[0].starts_with("/p/spec.pdf") && labels[1].starts_with("/p/shot.png"));
        let out = splice(&body, &first, &projection()).expect("valid");
        let text = out["messages"].to_string();
        // The first read of shot.png is gone, the second kept once; the last turn's as it came.
        for (data, n) in [
            ("c2hvdDE=", 0),
            ("c2hvdDI=", 1),
            ("JVBERi0=", 1),
            ("dGFpbA==", 1),
        ] {
            assert_eq!(text.matches(data).count(), n, "{data}: {text}");
        }
        // Read again in the last turn, which goes as it came: that copy alone.
        body["messages"][9]["content"][1]["input"]["file_path"] = json!("/p/shot.png");
        body["messages"][10]["content"][0]["content"] = json!([png("c2hvdDM=")]);
        let again = plan(&body, Some(PROMPT), false).expect("eligible");
        let out = splice(&body, &again, &projection()).expect("valid");
        let text = out["messages"].to_string();
        for (data, n) in [("c2hvdDI=", 0), ("c2hvdDM=", 1), ("JVBERi0=", 1)] {
            assert_eq!(text.matches(data).count(), n, "{data}: {text}");
        }
        // Named in the last turn by a call that returned no media (a NotebookEdit of the
        // notebook whose figure a Read returned): the kept copy stays.
        body["messages"][9]["content"][1] = json!({"type": "tool_use", "id": "toolu_4",
            "name": "NotebookEdit", "input": {"notebook_path": "/p/shot.png", "new_source": "x"}});
        body["messages"][10]["content"][0]["content"] = json!("Updated cell");
        body["tools"]
            .as_array_mut()
            .expect("tools")
            .push(json!({"name": "NotebookEdit", "input_schema": {"type": "object"}}));
        let edited = plan(&body, Some(PROMPT), false).expect("eligible");
        let out = splice(&body, &edited, &projection()).expect("valid");
        let text = out["messages"].to_string();
        for (data, n) in [("c2hvdDI=", 1), ("c2hvdDM=", 0), ("JVBERi0=", 1)] {
            assert_eq!(text.matches(data).count(), n, "{data}: {text}");
        }
        // No more than READ_MEDIA_KEPT files.
        let mut body = request(7);
        for call in 0..6 {
            let m = &mut body["messages"];
            m[1 + 2 * call]["content"][1] = json!({"type": "tool_use", "id": format!("toolu_{call}"),
                "name": "Read", "input": {"file_path": format!("/p/{call}.png")}});
            m[2 + 2 * call]["content"][0]["content"] = json!([png(&format!("aW1n{call}"))]);
        }
        let many = plan(&body, Some(PROMPT), false).expect("eligible");
        let kept: Vec<String> = many
            .kept_blocks
            .iter()
            .filter_map(|b| b["source"]["data"].as_str().map(str::to_owned))
            .collect();
        assert_eq!(kept, ["aW1n2", "aW1n3", "aW1n4", "aW1n5"]);
    }

    /// A screenshot the user pasted into a later prompt is part of the request the history
    /// held: it is kept, once, where the later prompts are said.
    #[test]
    fn images_of_later_prompts_are_kept_once() {
        let mut body = request(5);
        let image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}});
        let pdf = json!({"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}});
        for (at, extra) in [
            (4, vec![image.clone(), pdf.clone()]),
            (6, vec![image.clone()]),
        ] {
            let blocks = body["messages"][at]["content"]
                .as_array_mut()
                .expect("blocks");
            blocks.extend(extra);
            blocks.push(json!({"type": "text", "text": "[Image #1] this is what I see"}));
        }
        // One in the last turn too: it goes with the turn, as it came.
        let tail_image = json!({"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "R0lGODlh"}});
        body["messages"][10]["content"]
            .as_array_mut()
            .expect("blocks")
            .push(tail_image.clone());
        let plan = plan(&body, Some(PROMPT), false).expect("eligible");
        assert_eq!(plan.kept_blocks, [image.clone(), pdf.clone()]);
        let out = splice(&body, &plan, &projection()).expect("valid");
        let text = out["messages"].to_string();
        for (block, n) in [(&image, 1), (&pdf, 1), (&tail_image, 1)] {
            assert_eq!(
                text.matches(&block.to_string()).count(),
                n,
                "{block}: {text}"
            );
        }
        let m = out["messages"].as_array().expect("messages");
        let at = m
            .iter()
            .position(|m| m["content"].to_string().contains("iVBORw0KGgo="))
            .expect("kept");
        assert_eq!(m[at]["role"], "user");
        assert!(at < m.len() - 2, "before the last turn");
        // Merged into the first message, after its blocks, as the later prompts are.
        let head = without_breakpoints(&body["messages"][0]);
        let n = head["content"].as_array().map_or(0, Vec::len);
        assert_eq!(
            m[0]["content"].as_array().map(|b| &b[..n]),
            head["content"].as_array().map(Vec::as_slice),
            "the first message's own blocks as they came, first"
        );
    }
}
