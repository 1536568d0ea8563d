//! The user's answers to the agent's questions, told to the goal.
//!
//! An agent asks the user with a tool of its harness: Claude Code's `AskUserQuestion`, Codex's
//! `request_user_input` (Plan mode's questions). The answers are the user's words, as a prompt
//! is: the agent acts on them for the rest of the session ("Postgres, not SQLite"). Kept as an
//! earlier result they would fade with their age, and behind `worldfs proxy` they would be gone
//! with the history; so each answer is added to the goal, after the prompts said before it,
//! where every projection says it for as long as the conversation lasts.
//! Shapes are as vendor-docs/claude-code.md (section 9) and vendor-docs/codex.md (section 2)
//! record them;
//! an event of any other shape adds nothing.

use serde_json::Value;

/// What the goal says of the answers an `event`'s call got, if it asked the user and the user
/// answered: `The user answered: "QUESTION" = "ANSWER"`, each question in the order asked.
pub(crate) fn said(event: &Value) -> Option<String> {
    let input = event.get("tool_input")?;
    let response = event.get("tool_response")?;
    let pairs = match event.get("tool_name")?.as_str()? {
        "AskUserQuestion" => claude_code(response)?,
        "request_user_input" => codex(input, response)?,
        _ => return None,
    };
    (!pairs.is_empty()).then(|| text(&pairs))
}

/// The answers as the model is told them; the step's result says the same of an
/// `AskUserQuestion` call.
pub(crate) fn text(pairs: &[(String, String)]) -> String {
    let lines: Vec<String> = pairs
        .iter()
        .map(|(q, a)| format!("{q:?} = {a:?}"))
        .collect();
    format!("{SAID}{}", lines.join(", "))
}

/// What opens the answers' text ([`text`]).
const SAID: &str = "The user answered: ";

/// The first question of answers the goal says ([`text`]), if it can be read back: `worldfs
/// proxy` keeps the answers while the conversation holds the question. `None` for any other
/// prompt.
pub(crate) fn first_question(said: &str) -> Option<Option<String>> {
    let rest = said.strip_prefix(SAID)?;
    let quoted = rest
        .strip_prefix('"')
        .and_then(|r| r.split("\" = \"").next());
    Some(quoted.and_then(|q| serde_json::from_str(&format!("\"{q}\"")).ok()))
}

/// Claude Code (2.1.332): the response is the input with `answers` added, the question's text
/// to the label picked (or the words typed). A question left unanswered is not in it.
pub(crate) fn claude_code(response: &Value) -> Option<Vec<(String, String)>> {
    let answers = response.get("answers")?.as_object()?;
    if answers.is_empty() || !answers.values().all(Value::is_string) {
        return None;
    }
    // In the order the questions were asked, when the response still holds them.
    let asked: Vec<&str> = response
        .get("questions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|q| q.get("question")?.as_str())
        .collect();
    let mut pairs: Vec<(String, String)> = asked
        .iter()
        .filter_map(|q| Some((q.to_string(), answers.get(*q)?.as_str()?.to_owned())))
        .collect();
    for (q, a) in answers {
        if !asked.contains(&q.as_str()) {
            pairs.push((q.clone(), a.as_str().unwrap_or_default().to_owned()));
        }
    }
    Some(pairs)
}

/// Codex (0.171.0): the model gets `{"answers": {ID: {"answers": [...]}}}`, by the question's
/// `id` in the input, which says the question's text. The hook's response is that JSON, as
/// text or as an object. Several answers to one question (options picked, a note typed) are
/// said together; a question the user skipped (no answers) is not said.
fn codex(input: &Value, response: &Value) -> Option<Vec<(String, String)>> {
    let parsed;
    let response = match response {
        Value::String(s) => {
            parsed = serde_json::from_str::<Value>(s).ok()?;
            &parsed
        }
        other => other,
    };
    let answers = response.get("answers")?.as_object()?;
    let questions = input.get("questions")?.as_array()?;
    let pairs = questions
        .iter()
        .filter_map(|q| {
            let id = q.get("id")?.as_str()?;
            let asked = q.get("question").and_then(Value::as_str).unwrap_or(id);
            let given: Vec<&str> = answers
                .get(id)?
                .get("answers")?
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .filter(|a| !a.trim().is_empty())
                .collect();
            (!given.is_empty()).then(|| (asked.to_owned(), given.join("; ")))
        })
        .collect();
    Some(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn event(tool: &str, input: Value, response: Value) -> Value {
        json!({"hook_event_name": "PostToolUse", "tool_name": tool, "tool_input": input,
               "tool_response": response})
    }

    #[test]
    fn claude_codes_answers_are_said_in_the_order_asked() {
        let asked = json!({"questions": [
            {"question": "Which database?", "header": "DB", "options": []},
            {"question": "Keep the old API?", "header": "API", "options": []}]});
        let mut answered = asked.clone();
        answered["answers"] = json!({"Keep the old API?": "No", "Which database?": "Postgres"});
        answered["annotations"] = json!({});
        assert_eq!(
            said(&event("AskUserQuestion", asked, answered)).as_deref(),
            Some(
                r#"The user answered: "Which database?" = "Postgres", "Keep the old API?" = "No""#
            )
        );
    }

    #[test]
    fn codexs_answers_are_said_by_the_questions_text() {
        let input = json!({"questions": [
            {"id": "style", "header": "Style", "question": "Which label style?", "options": []},
            {"id": "scope", "header": "Scope", "question": "Only util.py?", "options": []}]});
        let out = json!({"answers": {
            "style": {"answers": ["Bold (Recommended)", "user_note: and red"]},
            "scope": {"answers": []}}});
        let want =
            r#"The user answered: "Which label style?" = "Bold (Recommended); user_note: and red""#;
        // As text (what the model was sent) or as the object.
        for response in [Value::String(out.to_string()), out] {
            let e = event("request_user_input", input.clone(), response);
            assert_eq!(said(&e).as_deref(), Some(want));
        }
    }

    #[test]
    fn the_first_question_is_read_back_from_the_text() {
        let said = text(&[
            ("Which \"style\"?".into(), "Bold".into()),
            ("Size?".into(), "Big".into()),
        ]);
        assert_eq!(first_question(&said), Some(Some("Which \"style\"?".into())));
        assert_eq!(first_question("The user answered: garbled"), Some(None));
        assert_eq!(first_question("now the tests too"), None);
    }

    #[test]
    fn no_answer_says_nothing() {
        let asked = json!({"questions": [{"question": "Which?", "header": "Q", "options": []}]});
        for e in [
            // Declined: an error text, no answers.
            event(
                "AskUserQuestion",
                asked.clone(),
                json!("User declined to answer"),
            ),
            event("AskUserQuestion", asked.clone(), json!({"answers": {}})),
            event(
                "request_user_input",
                json!({"questions": [{"id": "q", "question": "Which?"}]}),
                json!(r#"{"answers": {"q": {"answers": []}}}"#),
            ),
            event("request_user_input", json!({}), json!("not json")),
            // Another tool of the same shape is not a question to the user.
            event("Agent", asked.clone(), json!({"answers": {"Which?": "A"}})),
        ] {
            assert_eq!(said(&e), None, "{e}");
        }
    }
}
