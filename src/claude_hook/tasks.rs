//! Claude Code's task list, told to the structured state (`state.patch` of `tasks`).
//!
//! The agent plans with `TodoWrite` (one call rewrites the whole list) or, from Claude Code
//! 2.1.142 on, with `TaskCreate`, `TaskUpdate` and `TaskList` (one task per call, by id). Either
//! way the plan lives in the conversation: a `worldfs proxy` request that replaces the history
//! with the projection would lose it, so the projection carries it in its state instead.
//! Shapes are as vendor-docs/claude-code.md (section 4) records them; a call of any other shape
//! changes nothing.

use serde_json::{Value, json};

/// The `state.patch` params that a successful call of `tool` makes to the task list, if any.
pub(crate) fn patch(tool: &str, input: &Value, response: &Value) -> Option<Value> {
    match tool {
        "TodoWrite" => {
            // Its items have no ids: their places are, as the list is rewritten whole.
            let todos = input.get("todos")?.as_array()?;
            let tasks: Vec<Value> = todos
                .iter()
                .filter_map(|t| {
                    let subject = t.get("content")?.as_str()?;
                    Some((subject, status(t.get("status")).unwrap_or("pending")))
                })
                .enumerate()
                .map(|(i, (subject, status))| {
                    json!({"id": (i + 1).to_string(), "subject": subject, "status": status})
                })
                .collect();
            Some(json!({ "tasks": tasks }))
        }
        "TaskCreate" => {
            let task = response.get("task")?;
            let id = id(task.get("id"))?;
            let subject = task
                .get("subject")
                .or_else(|| input.get("subject"))?
                .as_str()?;
            Some(json!({"tasks": {"upsert": [{"id": id, "subject": subject}]}}))
        }
        "TaskUpdate" => {
            let id = id(input.get("taskId"))?;
            if input.get("status").and_then(Value::as_str) == Some("deleted") {
                return Some(json!({"tasks": {"remove": [id]}}));
            }
            let mut edit = json!({ "id": id });
            if let Some(s) = status(input.get("status")) {
                edit["status"] = s.into();
            }
            if let Some(s) = input.get("subject").and_then(Value::as_str) {
                edit["subject"] = s.into();
            }
            // An owner, a description or dependencies: nothing the list shows.
            (edit.as_object()?.len() > 1).then(|| json!({"tasks": {"upsert": [edit]}}))
        }
        "TaskList" => {
            // The whole list as Claude Code keeps it: what the world has is set right by it.
            let list = response.get("tasks")?.as_array()?;
            let tasks: Option<Vec<Value>> = list
                .iter()
                .map(|t| {
                    let subject = t.get("subject")?.as_str()?;
                    Some(json!({"id": id(t.get("id"))?, "subject": subject,
                                "status": status(t.get("status")).unwrap_or("pending")}))
                })
                .collect();
            Some(json!({ "tasks": tasks? }))
        }
        _ => None,
    }
}

/// Whether the list `tool` edits is shared with subagents: the Task tools' list is kept on disk
/// for every agent of the session, while a TodoWrite list is its caller's own.
pub(super) fn shared(tool: &str) -> bool {
    matches!(tool, "TaskCreate" | "TaskUpdate" | "TaskList")
}

/// A status the state knows; another (a newer Claude Code's) is shown as not done.
fn status(v: Option<&Value>) -> Option<&'static str> {
    match v?.as_str()? {
        "pending" => Some("pending"),
        "in_progress" => Some("in_progress"),
        "completed" => Some("completed"),
        _ => None,
    }
}

/// A task id as the state keeps it: Claude Code's ids are strings of digits, numbers are taken.
fn id(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_todo_list_replaces_the_tasks_numbered_by_place() {
        let input = json!({"todos": [
            {"content": "Reproduce the bug", "status": "completed", "activeForm": "Reproducing"},
            {"content": "Fix the parser", "status": "in_progress", "activeForm": "Fixing"},
            {"content": "Run the tests", "status": "someday", "activeForm": "Running"},
            {"status": "pending"},
        ]});
        assert_eq!(
            patch("TodoWrite", &input, &Value::Null),
            Some(json!({"tasks": [
                {"id": "1", "subject": "Reproduce the bug", "status": "completed"},
                {"id": "2", "subject": "Fix the parser", "status": "in_progress"},
                {"id": "3", "subject": "Run the tests", "status": "pending"},
            ]}))
        );
        // An empty list clears it (the agent finished, or started over).
        assert_eq!(
            patch("TodoWrite", &json!({"todos": []}), &Value::Null),
            Some(json!({"tasks": []}))
        );
        assert_eq!(patch("TodoWrite", &json!({}), &Value::Null), None);
    }

    #[test]
    fn task_tools_edit_one_task_by_id() {
        assert_eq!(
            patch(
                "TaskCreate",
                &json!({"subject": "Fix the parser", "description": "..."}),
                &json!({"task": {"id": "3", "subject": "Fix the parser"}})
            ),
            Some(json!({"tasks": {"upsert": [{"id": "3", "subject": "Fix the parser"}]}}))
        );
        assert_eq!(
            patch(
                "TaskCreate",
                &json!({"subject": "x"}),
                &json!({"error": "no"})
            ),
            None
        );
        assert_eq!(
            patch(
                "TaskUpdate",
                &json!({"taskId": "3", "status": "in_progress"}),
                &Value::Null
            ),
            Some(json!({"tasks": {"upsert": [{"id": "3", "status": "in_progress"}]}}))
        );
        assert_eq!(
            patch(
                "TaskUpdate",
                &json!({"taskId": 3, "subject": "Fix the lexer"}),
                &Value::Null
            ),
            Some(json!({"tasks": {"upsert": [{"id": "3", "subject": "Fix the lexer"}]}}))
        );
        assert_eq!(
            patch(
                "TaskUpdate",
                &json!({"taskId": "3", "status": "deleted"}),
                &Value::Null
            ),
            Some(json!({"tasks": {"remove": ["3"]}}))
        );
        assert_eq!(
            patch(
                "TaskUpdate",
                &json!({"taskId": "3", "owner": "me", "addBlockedBy": ["1"]}),
                &Value::Null
            ),
            None
        );
        assert_eq!(
            patch(
                "TaskList",
                &json!({}),
                &json!({"tasks": [
                    {"id": "1", "subject": "a", "status": "completed", "blockedBy": []},
                    {"id": "2", "subject": "b", "status": "pending", "owner": ""},
                ]})
            ),
            Some(json!({"tasks": [
                {"id": "1", "subject": "a", "status": "completed"},
                {"id": "2", "subject": "b", "status": "pending"},
            ]}))
        );
        // A list it cannot read whole changes nothing rather than losing tasks.
        assert_eq!(
            patch(
                "TaskList",
                &json!({}),
                &json!({"tasks": [{"id": "1", "subject": "a"}, {"subject": "b"}]})
            ),
            None
        );
        assert_eq!(patch("TaskGet", &json!({"taskId": "1"}), &json!({})), None);
    }
}
