//! A Jupyter notebook as the agent reads it: its cells, not its JSON.
//!
//! An `.ipynb` file is JSON whose outputs carry every plot as base64: a notebook with one small
//! figure is some 20,000 tokens of mostly image data, so it never fit a budget, and one with a few
//! figures passed the size cap and was left out whole. Claude Code's Read tool does not show that
//! JSON either: it shows each cell as `<cell id="ID">SOURCE</cell id="ID">` (with
//! `<cell_type>markdown</cell_type>` before the source of a cell that is not code), followed by
//! its outputs' text, and sends the figures as images (vendor-docs/claude-code.md, "Notebooks").
//! The world counts and shows the same text, so the agent sees what it is used to, and NotebookEdit's
//! `cell_id`s are in it. Figures are named with their size instead of shown.
//!
//! The rendering is a pure function of the file's bytes: the entry's hash stays the hash of those
//! bytes (a command that read the notebook is out of date when they change, even where the
//! rendering does not), and a file that is not a notebook's JSON (nbformat 3, a merge conflict
//! half-way) is shown as its bytes.

use std::fmt::Write as _;
use std::num::NonZeroUsize;
use std::path::Path;
use std::sync::Arc;

use lru::LruCache;
use parking_lot::Mutex;
use serde_json::{Map, Value};

/// Text of a cell's outputs kept whole; past it, its head and tail are kept. Claude Code's Read
/// drops a cell's outputs past 10,000 characters; the tail of a long log is where a failure is.
const OUTPUT_CHARS: usize = 10_000;
/// Characters kept at each end of outputs past [`OUTPUT_CHARS`].
const OUTPUT_END_CHARS: usize = 2_000;

/// Largest notebook file read to be rendered. Figures make notebooks big: the size cap applies to
/// the rendering, which is what a projection shows, and this bounds the JSON parsed for it.
pub const MAX_NOTEBOOK_BYTES: u64 = 64 << 20;

/// Renderings kept, by the hash of the file they are of.
const RENDERS_KEPT: usize = 16;

/// The last renderings, by the blake3 hash of the notebook's bytes. A projection reads every
/// file it shows from disk, and parsing the JSON of a notebook with figures is most of that
/// work: with 20 MB of figures, a projection after a change took 25 ms, and 10 ms with the
/// rendering kept (reading and hashing the file is what is left).
pub struct Renders {
    kept: Mutex<LruCache<[u8; 32], Option<Arc<str>>>>,
}

impl Default for Renders {
    fn default() -> Self {
        let cap = NonZeroUsize::new(RENDERS_KEPT).unwrap_or(NonZeroUsize::MIN);
        Renders {
            kept: Mutex::new(LruCache::new(cap)),
        }
    }
}

impl Renders {
    /// [`render`] of `bytes`, whose blake3 hash is `hash`.
    pub fn render(&self, hash: &[u8; 32], bytes: &[u8]) -> Option<Arc<str>> {
        if let Some(kept) = self.kept.lock().get(hash) {
            return kept.clone();
        }
        // Outside the lock: another projection may render another notebook meanwhile.
        let cells: Option<Arc<str>> = render(bytes).map(Arc::from);
        self.kept.lock().put(*hash, cells.clone());
        cells
    }
}

/// Whether `path` names a notebook (by its extension, as Jupyter and Claude Code tell).
pub fn is_notebook(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("ipynb"))
}

/// The notebook in `bytes` as text, `None` when they are not a notebook's JSON (nbformat 4).
pub fn render(bytes: &[u8]) -> Option<String> {
    let nb: Value = serde_json::from_slice(bytes).ok()?;
    let cells = nb.get("cells")?.as_array()?;
    let meta = nb.get("metadata");
    let language = meta
        .and_then(|m| m.pointer("/language_info/name"))
        .or_else(|| meta.and_then(|m| m.pointer("/kernelspec/language")))
        .and_then(Value::as_str)
        .unwrap_or("python");
    let mut blocks: Vec<String> = Vec::new();
    for (i, cell) in cells.iter().enumerate() {
        let cell = cell.as_object()?;
        let kind = cell
            .get("cell_type")
            .and_then(Value::as_str)
            .unwrap_or("code");
        let id = match cell.get("id").and_then(Value::as_str) {
            Some(id) => id.to_owned(),
            // What NotebookEdit takes for a cell of a notebook older than nbformat 4.5.
            None => format!("cell-{i}"),
        };
        blocks.push(cell_text(&id, kind, language, &joined(cell.get("source"))));
        if kind == "code" {
            let outputs = cell.get("outputs").and_then(Value::as_array);
            outputs_of(i, outputs.map_or(&[][..], Vec::as_slice), &mut blocks);
        }
    }
    let mut text = blocks.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    Some(text)
}

/// A cell as Read shows it: `<cell id="ID">`, its type when it is not code (its language when
/// it is code in another language than Python), its source, `</cell id="ID">`.
pub fn cell_text(id: &str, kind: &str, language: &str, source: &str) -> String {
    let mut text = format!("<cell id=\"{id}\">");
    if kind != "code" {
        let _ = write!(text, "<cell_type>{kind}</cell_type>");
    } else if language != "python" {
        let _ = write!(text, "<language>{language}</language>");
    }
    let _ = write!(text, "{source}</cell id=\"{id}\">");
    text
}

/// The blocks of cell `index`'s outputs: each one's text after a blank line, as Read shows them,
/// and a line for each figure.
fn outputs_of(index: usize, outputs: &[Value], blocks: &mut Vec<String>) {
    let mut texts: Vec<String> = Vec::new();
    for out in outputs.iter().filter_map(Value::as_object) {
        match out.get("output_type").and_then(Value::as_str) {
            Some("stream") => texts.push(joined(out.get("text"))),
            Some("execute_result" | "display_data") => {
                let Some(data) = out.get("data").and_then(Value::as_object) else {
                    continue;
                };
                data_blocks(data, &mut texts);
            }
            Some("error") => {
                let name = out.get("ename").and_then(Value::as_str).unwrap_or("Error");
                let value = out.get("evalue").and_then(Value::as_str).unwrap_or("");
                let trace: Vec<&str> = out
                    .get("traceback")
                    .and_then(Value::as_array)
                    .map(|t| t.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                let raw = format!("{name}: {value}\n{}", trace.join("\n"));
                // IPython colors its tracebacks; the escapes are noise to a model, and tokens.
                texts.push(strip_ansi_escapes::strip_str(&raw));
            }
            _ => {}
        }
    }
    let total: usize = texts.iter().map(|t| t.chars().count()).sum();
    if total > OUTPUT_CHARS {
        let all = texts.join("\n");
        let head: String = all.chars().take(OUTPUT_END_CHARS).collect();
        let tail_from = total.saturating_sub(OUTPUT_END_CHARS);
        let tail: String = all.chars().skip(tail_from).collect();
        let left_out = total - 2 * OUTPUT_END_CHARS;
        texts = vec![format!(
            "{head}\n[... {left_out} characters of output left out; \
             `jq '.cells[{index}].outputs' NOTEBOOK` shows them all ...]\n{tail}"
        )];
    }
    blocks.extend(texts.into_iter().map(|t| format!("\n{t}")));
}

/// What a rich output shows: its plain text, and a line for each figure (the data a model would
/// read as an image, which no text budget holds).
fn data_blocks(data: &Map<String, Value>, texts: &mut Vec<String>) {
    if data.contains_key("text/plain") {
        texts.push(joined(data.get("text/plain")));
    }
    for (mime, v) in data {
        // Measured in place: a figure's base64 is most of a notebook, not worth a copy.
        if mime.starts_with("image/") && mime != "image/svg+xml" {
            // Base64 without its line breaks: 3 bytes in 4 characters.
            let chars: usize = parts(Some(v))
                .iter()
                .map(|p| p.bytes().filter(|b| !b.is_ascii_whitespace()).count())
                .sum();
            texts.push(format!(
                "[{mime} output, {}: not shown]",
                size_text(chars * 3 / 4)
            ));
        } else if !data.contains_key("text/plain") && mime != "text/plain" {
            let len = parts(Some(v)).iter().map(|p| p.len()).sum();
            texts.push(format!("[{mime} output, {}: not shown]", size_text(len)));
        }
    }
}

/// A notebook string's pieces: one string, or an array of lines.
fn parts(v: Option<&Value>) -> Vec<&str> {
    match v {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(parts)) => parts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

/// A notebook string, its pieces put together.
fn joined(v: Option<&Value>) -> String {
    parts(v).concat()
}

fn size_text(bytes: usize) -> String {
    if bytes < 1024 {
        format!("{bytes} bytes")
    } else {
        format!("{:.1} KB", bytes as f64 / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn nb(cells: Value, metadata: Value) -> Vec<u8> {
        serde_json::to_vec_pretty(&json!({
            "cells": cells,
            "metadata": metadata,
            "nbformat": 4,
            "nbformat_minor": 5
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn render_ok(bytes: &[u8]) -> String {
        render(bytes).unwrap_or_else(|| panic!("not rendered: {}", String::from_utf8_lossy(bytes)))
    }

    #[test]
    fn cells_are_shown_as_reads_show_them() {
        let text = render_ok(&nb(
            json!([
                {"cell_type": "markdown", "id": "intro", "metadata": {},
                 "source": ["# Analysis\n", "Load the data."]},
                {"cell_type": "code", "id": "load", "metadata": {}, "execution_count": 1,
                 "source": "import pandas as pd\ndf = pd.read_csv('x.csv')",
                 "outputs": [{"output_type": "stream", "name": "stdout", "text": ["loaded\n"]}]},
            ]),
            json!({"language_info": {"name": "python"}}),
        ));
        assert_eq!(
            text,
            "<cell id=\"intro\"><cell_type>markdown</cell_type># Analysis\nLoad the data.\
             </cell id=\"intro\">\n\
             <cell id=\"load\">import pandas as pd\ndf = pd.read_csv('x.csv')</cell id=\"load\">\n\
             \nloaded\n\n"
        );
    }

    #[test]
    fn figures_are_named_not_shown() {
        let png = "iVBORw0KGgo".repeat(3000);
        let text = render_ok(&nb(
            json!([{"cell_type": "code", "id": "plot", "metadata": {}, "execution_count": 2,
                     "source": "df.plot()",
                     "outputs": [{"output_type": "display_data", "metadata": {},
                                  "data": {"image/png": png, "text/plain": ["<Figure size 640x480>"]}}]}]),
            json!({}),
        ));
        assert!(!text.contains("iVBOR"), "{text}");
        assert!(text.contains("<Figure size 640x480>"), "{text}");
        assert!(
            text.contains("[image/png output, 24.2 KB: not shown]"),
            "{text}"
        );
    }

    #[test]
    fn an_output_with_no_plain_text_names_its_kind() {
        let text = render_ok(&nb(
            json!([{"cell_type": "code", "id": "w", "metadata": {}, "source": "widget",
                     "outputs": [{"output_type": "display_data", "metadata": {},
                                  "data": {"text/html": "<div>x</div>"}}]}]),
            json!({}),
        ));
        assert!(
            text.contains("[text/html output, 12 bytes: not shown]"),
            "{text}"
        );
    }

    #[test]
    fn errors_are_shown_without_their_colors() {
        let text = render_ok(&nb(
            json!([{"cell_type": "code", "id": "e", "metadata": {}, "source": "1/0",
                     "outputs": [{"output_type": "error", "ename": "ZeroDivisionError",
                                  "evalue": "division by zero",
                                  "traceback": ["\u{1b}[0;31m---------\u{1b}[0m",
                                                "\u{1b}[0;31mZeroDivisionError\u{1b}[0m: division by zero"]}]}]),
            json!({}),
        ));
        assert!(
            text.contains("ZeroDivisionError: division by zero\n---------\nZeroDivisionError: division by zero"),
            "{text}"
        );
        assert!(!text.contains('\u{1b}'), "{text}");
    }

    #[test]
    fn long_outputs_keep_their_head_and_tail() {
        let log: String = (0..2000).map(|i| format!("epoch {i}\n")).collect();
        let text = render_ok(&nb(
            json!([{"cell_type": "code", "id": "fit", "metadata": {}, "source": "fit()",
                     "outputs": [{"output_type": "stream", "name": "stdout", "text": log}]}]),
            json!({}),
        ));
        assert!(text.contains("epoch 0\n"), "head kept");
        assert!(text.contains("epoch 1999\n"), "tail kept");
        assert!(!text.contains("epoch 1000\n"), "middle left out");
        assert!(text.contains("jq '.cells[0].outputs' NOTEBOOK"), "{text}");
        assert!(text.chars().count() < OUTPUT_CHARS, "{}", text.len());
    }

    #[test]
    fn cells_without_ids_are_named_as_notebook_edit_names_them() {
        let text = render_ok(&nb(
            json!([{"cell_type": "code", "metadata": {}, "source": "a = 1", "outputs": []},
                   {"cell_type": "raw", "metadata": {}, "source": "raw text"}]),
            json!({"kernelspec": {"language": "julia", "name": "julia-1.9"}}),
        ));
        assert_eq!(
            text,
            "<cell id=\"cell-0\"><language>julia</language>a = 1</cell id=\"cell-0\">\n\
             <cell id=\"cell-1\"><cell_type>raw</cell_type>raw text</cell id=\"cell-1\">\n"
        );
    }

    #[test]
    fn what_is_not_a_notebooks_json_is_not_rendered() {
        assert_eq!(render(b"{\"cells\": [ <<<<<<< HEAD"), None);
        assert_eq!(render(b"{\"worksheets\": []}"), None, "nbformat 3");
        assert_eq!(render(b"[1, 2]"), None);
        assert_eq!(
            render(b"{\"cells\": [1]}"),
            None,
            "a cell that is no object"
        );
        assert_eq!(render(b"{\"cells\": []}").as_deref(), Some(""));
    }

    #[test]
    fn a_rendering_is_kept_by_the_hash_of_the_bytes() {
        let renders = Renders::default();
        let bytes = nb(
            json!([{"cell_type": "code", "id": "a", "metadata": {}, "source": "x", "outputs": []}]),
            json!({}),
        );
        let first = renders.render(&[1; 32], &bytes);
        assert_eq!(first.as_deref(), render(&bytes).as_deref());
        // Kept by the hash: the same hash gives what was rendered, whatever the bytes.
        assert_eq!(renders.render(&[1; 32], b"not json"), first);
        assert_eq!(renders.render(&[2; 32], b"not json"), None);
        assert_eq!(
            renders.render(&[2; 32], &bytes),
            None,
            "a failure is kept too"
        );
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn text() -> impl Strategy<Value = String> {
            "[ -~\n\u{e9}\u{1b}]{0,40}"
        }

        /// Text as a notebook holds it: one string, or lines in an array.
        fn nb_text() -> impl Strategy<Value = Value> {
            (text(), any::<bool>()).prop_map(|(t, lines)| match lines {
                true => json!(t.split_inclusive('\n').collect::<Vec<_>>()),
                false => json!(t),
            })
        }

        fn output() -> impl Strategy<Value = Value> {
            prop_oneof![
                nb_text()
                    .prop_map(|t| json!({"output_type": "stream", "name": "stdout", "text": t})),
                // Long logs, past the outputs' limit.
                ("[a-z ]{1,60}\n", 0usize..600).prop_map(|(line, n)| json!({
                    "output_type": "stream", "name": "stdout", "text": line.repeat(n)})),
                (nb_text(), prop::option::of("[A-Za-z0-9+/]{0,400}")).prop_map(|(t, png)| {
                    let mut data = json!({"text/plain": t});
                    if let Some(png) = png {
                        data["image/png"] = json!(png);
                    }
                    json!({"output_type": "display_data", "metadata": {}, "data": data})
                }),
                (text(), text(), prop::collection::vec(text(), 0..3)).prop_map(|(n, v, tb)| {
                    json!({"output_type": "error", "ename": n, "evalue": v, "traceback": tb})
                }),
                Just(json!({"output_type": "from_the_future", "x": 1})),
                Just(json!(42)),
            ]
        }

        fn cell() -> impl Strategy<Value = Value> {
            (
                prop::sample::select(vec!["code", "markdown", "raw"]),
                prop::option::of("[a-z0-9-]{1,12}"),
                nb_text(),
                prop::collection::vec(output(), 0..4),
            )
                .prop_map(|(kind, id, source, outputs)| {
                    let mut c = json!({"cell_type": kind, "metadata": {}, "source": source,
                                       "outputs": outputs});
                    if let Some(id) = id {
                        c["id"] = json!(id);
                    }
                    c
                })
        }

        proptest! {
            /// Any notebook of nbformat 4's shapes renders: every cell named as NotebookEdit
            /// names it, each cell's outputs within their limit, no figure's data.
            #[test]
            fn any_notebook_renders_each_cell_within_bounds(
                cells in prop::collection::vec(cell(), 0..6),
            ) {
                let bytes = nb(json!(cells.clone()), json!({}));
                let text = render(&bytes).unwrap_or_else(|| panic!("not rendered"));
                let mut rest = text.as_str();
                for (i, c) in cells.iter().enumerate() {
                    let id = c["id"].as_str().map_or_else(|| format!("cell-{i}"), str::to_owned);
                    let open = format!("<cell id=\"{id}\">");
                    let close = format!("</cell id=\"{id}\">");
                    let at = rest.find(&open).unwrap_or_else(|| panic!("{open} in {text}"));
                    let end = rest[at..].find(&close).unwrap_or_else(|| panic!("{close}")) + at;
                    rest = &rest[end + close.len()..];
                    // Up to the next cell: this one's outputs.
                    let next = cells.get(i + 1).map(|n| n["id"].as_str()
                        .map_or_else(|| format!("cell-{}", i + 1), str::to_owned));
                    let outputs = match next {
                        Some(n) => rest.find(&format!("<cell id=\"{n}\">")).map_or(rest, |j| &rest[..j]),
                        None => rest,
                    };
                    prop_assert!(outputs.chars().count() <= OUTPUT_CHARS + 200, "{}", outputs.len());
                }
                let figures = cells.iter()
                    .filter_map(|c| c["outputs"].as_array())
                    .flatten()
                    .filter_map(|o| o["data"]["image/png"].as_str())
                    .filter(|png| png.len() >= 16);
                for png in figures {
                    prop_assert!(!text.contains(png), "a figure's data in {text}");
                }
            }

            /// Bytes that are not a notebook never make it panic.
            #[test]
            fn any_bytes_render_or_not(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
                let _ = render(&bytes);
            }
        }
    }

    #[test]
    fn notebooks_are_known_by_their_extension() {
        assert!(is_notebook(Path::new("a/b.ipynb")));
        assert!(is_notebook(Path::new("B.IPYNB")));
        assert!(!is_notebook(Path::new("ipynb")));
        assert!(!is_notebook(Path::new("a.ipynb.bak")));
    }
}
