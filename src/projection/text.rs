//! The `text` format: plain markdown for prompt injection (hook `additionalContext`, custom
//! prompts). Same content and order as the message formats, without tool calls: framing, goal,
//! one section per entry or command output (oldest change first), state, the last step.
//!
//! Every piece is produced by one function here, used both to count its tokens and to render
//! it, so the count always describes the bytes sent.

use serde_json::Value;

use super::parts::{EntryPart, Input, Piece, Shown};
use crate::world::EntryKind;

/// A code fence longer than any run of backticks in `body`, so content cannot close it.
fn fence_for(body: &str) -> String {
    let mut longest = 0;
    let mut run = 0;
    for c in body.chars() {
        if c == '`' {
            run += 1;
            longest = longest.max(run);
        } else {
            run = 0;
        }
    }
    "`".repeat(longest.max(2) + 1)
}

/// A path as a heading shows it: one line, whatever the name holds. A newline in a file name
/// would otherwise end the heading and let the rest of the name pass for content.
fn heading_path(display: &str) -> std::borrow::Cow<'_, str> {
    if !display.chars().any(char::is_control) {
        return display.into();
    }
    display
        .chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect::<String>()
        .into()
}

pub fn goal_piece(goal: &str) -> String {
    format!("# Goal\n\n{goal}")
}

pub fn framing_piece(framing: &str) -> String {
    format!("# Session\n\n{framing}")
}

pub fn state_piece(state: &str) -> String {
    format!("# State\n\n{state}")
}

pub fn command_piece(text: &str) -> String {
    format!("# Command output\n\n{text}")
}

pub fn step_piece(name: &str, input_json: &str, result: &str, is_error: bool) -> String {
    let fence = fence_for(result);
    let label = if is_error { "Error" } else { "Result" };
    format!(
        "# Last step\n\nCalled `{name}` with {input_json}\n{label}:\n{fence}\n{result}\n{fence}"
    )
}

/// What goes before and after call `i`'s result in the entry's section.
pub fn entry_frame(part: &EntryPart, i: usize) -> (String, String) {
    let Some(call) = part.calls.get(i) else {
        return (String::new(), String::new());
    };
    let what = match (part.shown, call.lines, part.kind) {
        (Shown::Deleted, _, _) => " (deleted)".to_owned(),
        (Shown::Withheld, _, _) => " (withheld)".to_owned(),
        (Shown::Content, _, EntryKind::Dir) => " (directory listing)".to_owned(),
        (Shown::Content, _, _) if part.notebook => " (notebook cells)".to_owned(),
        (Shown::Content, Some((first, n)), _) => {
            format!(" (lines {first}-{} of {})", first + n - 1, part.total_lines)
        }
        (Shown::Content, None, _) => String::new(),
    };
    let path = heading_path(&part.display);
    if part.shown != Shown::Content {
        return (format!("## {path}{what}\n"), String::new());
    }
    let fence = fence_for(&call.result);
    (format!("## {path}{what}\n{fence}\n"), format!("\n{fence}"))
}

/// The whole markdown document.
pub fn render(input: &Input) -> Value {
    let mut pieces: Vec<String> = Vec::new();
    if let Some(f) = &input.framing {
        pieces.push(framing_piece(&f.text));
    }
    if !input.goal.text.is_empty() {
        pieces.push(goal_piece(&input.goal.text));
    }
    for piece in input.pieces() {
        match piece {
            Piece::Call(e, i) => {
                let (head, tail) = entry_frame(e, i);
                pieces.push(format!("{head}{}{tail}", e.calls[i].result));
            }
            Piece::Command(c) => pieces.push(command_piece(&c.text)),
        }
    }
    if let Some(s) = &input.state {
        pieces.push(state_piece(&s.text));
    }
    if let Some(s) = &input.step {
        let input_json = Value::Object(s.input.clone()).to_string();
        pieces.push(step_piece(&s.name, &input_json, &s.result, s.is_error));
    }
    Value::String(pieces.join("\n\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fences_outlast_content() {
        assert_eq!(fence_for("plain"), "```");
        assert_eq!(fence_for("a ``` b"), "````");
        assert_eq!(fence_for("`````"), "``````");
    }

    #[test]
    fn a_heading_is_one_line_whatever_the_file_name_holds() {
        assert_eq!(heading_path("src/main.rs"), "src/main.rs");
        assert_eq!(heading_path("évolué/naïve.py"), "évolué/naïve.py");
        assert_eq!(
            heading_path("evil\n```\nname\t.txt"),
            "evil\\n```\\nname\\t.txt"
        );
        assert!(!heading_path("a\r\u{1b}[31mb").contains(['\r', '\u{1b}']));
    }
}
