//! pi's agent messages (pi-coding-agent core/messages.js): the shapes the agent keeps in its
//! context and persists, and their conversion to the messages a model understands.
//! Messages stay JSON: extensions see and may replace them, and the session file stores them
//! verbatim.

use serde_json::{Value, json};

const COMPACTION_SUMMARY_PREFIX: &str = "The conversation history before this point was compacted into the following summary:\n\n<summary>\n";
const COMPACTION_SUMMARY_SUFFIX: &str = "\n</summary>";
const BRANCH_SUMMARY_PREFIX: &str =
    "The following is a summary of a branch that this conversation came back from:\n\n<summary>\n";
const BRANCH_SUMMARY_SUFFIX: &str = "</summary>";

/// Milliseconds since the epoch, the unit of pi's message timestamps.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// A user message as pi builds it from a prompt: a text block, then any images.
pub fn user_message(text: &str, images: &[Value]) -> Value {
    let mut content = vec![json!({ "type": "text", "text": text })];
    content.extend(images.iter().cloned());
    json!({ "role": "user", "content": content, "timestamp": now_ms() })
}

/// A custom message (`pi.sendMessage`, `before_agent_start` injections) in agent form.
/// Fields the extension left out stay out, as pi leaves them undefined.
pub fn custom_message(message: &Value) -> Value {
    let mut out = json!({ "role": "custom" });
    // Absent when the extension gave none, as in pi.
    if let Some(custom_type) = message.get("customType").filter(|t| !t.is_null()) {
        out["customType"] = custom_type.clone();
    }
    out["content"] = message.get("content").cloned().unwrap_or(json!(""));
    for key in ["display", "details"] {
        if let Some(v) = message.get(key).filter(|v| !v.is_null()) {
            out[key] = v.clone();
        }
    }
    out["timestamp"] = json!(now_ms());
    out
}

/// The text of a message's content: a string, or its text blocks joined.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter(|b| b["type"] == "text")
            .filter_map(|b| b["text"].as_str())
            .collect(),
        _ => String::new(),
    }
}

/// The text of a user message (pi matches queued steer/follow-up messages by it).
pub fn user_text(message: &Value) -> String {
    content_text(&message["content"])
}

fn text_block_user(text: String, timestamp: &Value) -> Value {
    json!({ "role": "user", "content": [{ "type": "text", "text": text }], "timestamp": timestamp })
}

fn bash_execution_text(m: &Value) -> String {
    let mut text = format!("Ran `{}`\n", m["command"].as_str().unwrap_or_default());
    match m["output"].as_str().filter(|o| !o.is_empty()) {
        Some(output) => text.push_str(&format!("```\n{output}\n```")),
        None => text.push_str("(no output)"),
    }
    if m["cancelled"] == json!(true) {
        text.push_str("\n\n(command cancelled)");
    } else if let Some(code) = m["exitCode"].as_i64().filter(|c| *c != 0) {
        text.push_str(&format!("\n\nCommand exited with code {code}"));
    }
    if m["truncated"] == json!(true)
        && let Some(path) = m["fullOutputPath"].as_str()
    {
        text.push_str(&format!("\n\n[Output truncated. Full output: {path}]"));
    }
    text
}

/// pi's `convertToLlm`: custom, bash-execution and summary messages become user messages;
/// user, assistant and tool results pass through; anything else is dropped.
pub fn convert_to_llm(messages: &[Value]) -> Vec<Value> {
    messages
        .iter()
        .filter_map(|m| {
            let ts = &m["timestamp"];
            match m["role"].as_str()? {
                "user" | "assistant" | "toolResult" => Some(m.clone()),
                "custom" => {
                    let content = match &m["content"] {
                        Value::String(s) => json!([{ "type": "text", "text": s }]),
                        other => other.clone(),
                    };
                    Some(json!({ "role": "user", "content": content, "timestamp": ts }))
                }
                "bashExecution" if m["excludeFromContext"] == json!(true) => None,
                "bashExecution" => Some(text_block_user(bash_execution_text(m), ts)),
                "branchSummary" => Some(text_block_user(
                    format!(
                        "{BRANCH_SUMMARY_PREFIX}{}{BRANCH_SUMMARY_SUFFIX}",
                        m["summary"].as_str().unwrap_or_default()
                    ),
                    ts,
                )),
                "compactionSummary" => Some(text_block_user(
                    format!(
                        "{COMPACTION_SUMMARY_PREFIX}{}{COMPACTION_SUMMARY_SUFFIX}",
                        m["summary"].as_str().unwrap_or_default()
                    ),
                    ts,
                )),
                _ => None,
            }
        })
        .collect()
}

/// The tool calls of an assistant message, in source order.
pub fn tool_calls(assistant: &Value) -> Vec<Value> {
    assistant["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["type"] == "toolCall")
        .cloned()
        .collect()
}

/// A usage record with nothing used (pi-ai's empty usage).
pub fn empty_usage() -> Value {
    json!({
        "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "totalTokens": 0,
        "cost": { "input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0 },
    })
}

/// pi's error tool result: the message as text, empty details.
pub fn error_result(message: &str) -> Value {
    json!({ "content": [{ "type": "text", "text": message }], "details": {} })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn custom_and_summary_messages_become_user_messages() {
        let messages = vec![
            json!({ "role": "custom", "customType": "x", "content": "note", "display": true, "timestamp": 1 }),
            json!({ "role": "compactionSummary", "summary": "S", "tokensBefore": 10, "timestamp": 2 }),
            json!({ "role": "branchSummary", "summary": "B", "fromId": "a", "timestamp": 3 }),
            json!({ "role": "bashExecution", "command": "ls", "output": "", "exitCode": 2, "timestamp": 4 }),
            json!({ "role": "bashExecution", "command": "ls", "excludeFromContext": true }),
            json!({ "role": "mystery" }),
        ];
        let llm = convert_to_llm(&messages);
        assert_eq!(llm.len(), 4);
        assert_eq!(
            llm[0]["content"],
            json!([{ "type": "text", "text": "note" }])
        );
        assert_eq!(
            llm[1]["content"][0]["text"],
            "The conversation history before this point was compacted into the following summary:\n\n<summary>\nS\n</summary>"
        );
        assert!(
            llm[2]["content"][0]["text"]
                .as_str()
                .unwrap()
                .ends_with("B</summary>")
        );
        assert_eq!(
            llm[3]["content"][0]["text"],
            "Ran `ls`\n(no output)\n\nCommand exited with code 2"
        );
        assert!(llm.iter().all(|m| m["role"] == "user"));
    }

    #[test]
    fn user_text_joins_text_blocks() {
        let m = json!({ "role": "user", "content": [{ "type": "text", "text": "a" }, { "type": "image" }, { "type": "text", "text": "b" }] });
        assert_eq!(user_text(&m), "ab");
    }
}
