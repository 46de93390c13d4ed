//! The provider-independent clean-up pi-ai applies to a conversation before converting it for
//! a provider (`transformMessages`): images become placeholders for text-only models,
//! another model's thinking becomes text and its tool-call ids may be normalised, failed or
//! aborted assistant turns are dropped, and tool calls left without a result get a synthetic
//! error result so the provider sees every call answered.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use super::now_ms;

/// The model a conversation is being sent to.
pub(crate) struct Target<'a> {
    pub api: &'a str,
    pub provider: &'a str,
    pub model_id: &'a str,
    pub supports_images: bool,
}

const USER_IMAGE_PLACEHOLDER: &str = "(image omitted: model does not support images)";
const TOOL_IMAGE_PLACEHOLDER: &str = "(tool image omitted: model does not support images)";

fn replace_images(content: &Value, placeholder: &str) -> Value {
    let Some(blocks) = content.as_array() else {
        return content.clone();
    };
    let mut out = Vec::new();
    let mut previous_was_placeholder = false;
    for block in blocks {
        if block["type"] == "image" {
            if !previous_was_placeholder {
                out.push(json!({"type": "text", "text": placeholder}));
            }
            previous_was_placeholder = true;
            continue;
        }
        out.push(block.clone());
        previous_was_placeholder = block["text"].as_str() == Some(placeholder);
    }
    Value::Array(out)
}

fn with_content(msg: &Value, content: Value) -> Value {
    let mut m = msg.clone();
    m["content"] = content;
    m
}

fn truthy_str(v: &Value) -> bool {
    v.as_str().is_some_and(|s| !s.is_empty())
}

pub(crate) fn transform_messages(
    messages: &[Value],
    target: &Target,
    normalize_id: &dyn Fn(&str) -> String,
) -> Vec<Value> {
    let mut id_map: HashMap<String, String> = HashMap::new();
    let mut transformed = Vec::with_capacity(messages.len());
    for msg in messages {
        let msg = if target.supports_images {
            msg.clone()
        } else if msg["role"] == "user" && msg["content"].is_array() {
            with_content(msg, replace_images(&msg["content"], USER_IMAGE_PLACEHOLDER))
        } else if msg["role"] == "toolResult" {
            with_content(msg, replace_images(&msg["content"], TOOL_IMAGE_PLACEHOLDER))
        } else {
            msg.clone()
        };
        match msg["role"].as_str() {
            Some("toolResult") => {
                let id = msg["toolCallId"].as_str().unwrap_or_default();
                match id_map.get(id) {
                    Some(normalized) if normalized != id => {
                        let mut m = msg.clone();
                        m["toolCallId"] = json!(normalized);
                        transformed.push(m);
                    }
                    _ => transformed.push(msg),
                }
            }
            Some("assistant") => {
                let same_model = msg["provider"] == target.provider
                    && msg["api"] == target.api
                    && msg["model"] == target.model_id;
                let blocks = msg["content"].as_array().cloned().unwrap_or_default();
                let mut content = Vec::new();
                for block in blocks {
                    match block["type"].as_str() {
                        Some("thinking") => {
                            if block["redacted"].as_bool() == Some(true) {
                                if same_model {
                                    content.push(block);
                                }
                                continue;
                            }
                            if same_model && truthy_str(&block["thinkingSignature"]) {
                                content.push(block);
                                continue;
                            }
                            let thinking = block["thinking"].as_str().unwrap_or_default();
                            if thinking.trim().is_empty() {
                                continue;
                            }
                            if same_model {
                                content.push(block);
                            } else {
                                content.push(json!({"type": "text", "text": thinking}));
                            }
                        }
                        Some("text") if !same_model => {
                            content.push(json!({"type": "text", "text": block["text"]}));
                        }
                        Some("toolCall") if !same_model => {
                            let mut call = block.clone();
                            if let Some(obj) = call.as_object_mut() {
                                obj.shift_remove("thoughtSignature");
                            }
                            let id = block["id"].as_str().unwrap_or_default();
                            let normalized = normalize_id(id);
                            if normalized != id {
                                id_map.insert(id.to_string(), normalized.clone());
                                call["id"] = json!(normalized);
                            }
                            content.push(call);
                        }
                        _ => content.push(block),
                    }
                }
                transformed.push(with_content(&msg, Value::Array(content)));
            }
            _ => transformed.push(msg),
        }
    }

    let mut result = Vec::with_capacity(transformed.len());
    let mut pending: Vec<Value> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let flush =
        |result: &mut Vec<Value>, pending: &mut Vec<Value>, answered: &mut HashSet<String>| {
            for call in pending.drain(..) {
                let id = call["id"].as_str().unwrap_or_default();
                if !answered.contains(id) {
                    result.push(json!({
                        "role": "toolResult",
                        "toolCallId": call["id"],
                        "toolName": call["name"],
                        "content": [{"type": "text", "text": "No result provided"}],
                        "isError": true,
                        "timestamp": now_ms(),
                    }));
                }
            }
            answered.clear();
        };
    for msg in transformed {
        match msg["role"].as_str() {
            Some("assistant") => {
                flush(&mut result, &mut pending, &mut answered);
                if msg["stopReason"] == "error" || msg["stopReason"] == "aborted" {
                    continue;
                }
                let calls: Vec<Value> = msg["content"]
                    .as_array()
                    .map(|c| {
                        c.iter()
                            .filter(|b| b["type"] == "toolCall")
                            .cloned()
                            .collect()
                    })
                    .unwrap_or_default();
                if !calls.is_empty() {
                    pending = calls;
                    answered.clear();
                }
                result.push(msg);
            }
            Some("toolResult") => {
                answered.insert(msg["toolCallId"].as_str().unwrap_or_default().to_string());
                result.push(msg);
            }
            Some("user") => {
                flush(&mut result, &mut pending, &mut answered);
                result.push(msg);
            }
            _ => result.push(msg),
        }
    }
    flush(&mut result, &mut pending, &mut answered);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(images: bool) -> Target<'static> {
        Target {
            api: "openai-completions",
            provider: "p",
            model_id: "m",
            supports_images: images,
        }
    }

    #[test]
    fn orphaned_tool_calls_get_a_synthetic_result_and_failed_turns_are_dropped() {
        let messages = vec![
            json!({"role": "user", "content": "go"}),
            json!({"role": "assistant", "api": "openai-completions", "provider": "p", "model": "m",
                   "stopReason": "toolUse",
                   "content": [{"type": "toolCall", "id": "a", "name": "read", "arguments": {}},
                               {"type": "toolCall", "id": "b", "name": "ls", "arguments": {}}]}),
            json!({"role": "toolResult", "toolCallId": "a", "toolName": "read",
                   "content": [{"type": "text", "text": "x"}], "isError": false}),
            json!({"role": "assistant", "api": "openai-completions", "provider": "p", "model": "m",
                   "stopReason": "error", "content": [{"type": "text", "text": "half"}]}),
            json!({"role": "user", "content": "again"}),
        ];
        let out = transform_messages(&messages, &target(true), &|id| id.to_string());
        let roles: Vec<&str> = out.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(
            roles,
            ["user", "assistant", "toolResult", "toolResult", "user"]
        );
        assert_eq!(out[3]["toolCallId"], "b");
        assert_eq!(out[3]["isError"], true);
        assert_eq!(out[3]["content"][0]["text"], "No result provided");
    }

    #[test]
    fn other_models_thinking_becomes_text_and_ids_are_normalised() {
        let messages = vec![
            json!({"role": "assistant", "api": "anthropic-messages", "provider": "anthropic",
                   "model": "claude", "stopReason": "toolUse",
                   "content": [{"type": "thinking", "thinking": "hmm", "thinkingSignature": "sig"},
                               {"type": "toolCall", "id": "x|y", "name": "read", "arguments": {},
                                "thoughtSignature": "t"}]}),
            json!({"role": "toolResult", "toolCallId": "x|y", "toolName": "read",
                   "content": [{"type": "image", "data": "AA", "mimeType": "image/png"},
                               {"type": "image", "data": "AA", "mimeType": "image/png"}],
                   "isError": false}),
        ];
        let out = transform_messages(&messages, &target(false), &|id| {
            id.split('|').next().unwrap().to_string()
        });
        assert_eq!(out[0]["content"][0], json!({"type": "text", "text": "hmm"}));
        assert_eq!(
            out[0]["content"][1],
            json!({"type": "toolCall", "id": "x", "name": "read", "arguments": {}})
        );
        assert_eq!(out[1]["toolCallId"], "x");
        assert_eq!(
            out[1]["content"],
            json!([{"type": "text", "text": TOOL_IMAGE_PLACEHOLDER}])
        );
    }
}
