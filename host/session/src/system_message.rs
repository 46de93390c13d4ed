//! pi 1.6.0's system messages: the prompt and the tool loadout live in the transcript.
//!
//! The first prompt of a session puts one system message before the user's, with every prompt
//! section and a declaration of every active tool; later ones patch what changed (`sections`
//! by name, `null` removing one; `toolsAdded` / `toolsRemoved`). Replaying them in order gives
//! the current prompt and tools, so a resumed session knows what the model already has
//! (pi-ai utils/transcript.js, pi-coding-agent core/system-prompt.js).

use serde_json::{Map, Value, json};

/// What the transcript's system messages add up to.
#[derive(Debug, Default, PartialEq)]
pub struct Replayed {
    /// Sections in the order they were first declared.
    pub sections: Map<String, Value>,
    /// Tool declarations in the order they were added.
    pub tools: Vec<Value>,
}

/// Replays every system message of `messages`.
pub fn replay(messages: &[Value]) -> Replayed {
    let mut out = Replayed::default();
    for message in messages.iter().filter(|m| m["role"] == "system") {
        if let Some(patch) = message["sections"].as_object() {
            for (name, text) in patch {
                if text.is_null() {
                    out.sections.remove(name);
                } else {
                    out.sections.insert(name.clone(), text.clone());
                }
            }
        }
        for removed in message["toolsRemoved"].as_array().into_iter().flatten() {
            out.tools.retain(|t| t["name"] != removed["name"]);
        }
        for added in message["toolsAdded"].as_array().into_iter().flatten() {
            out.tools.retain(|t| t["name"] != added["name"]);
            out.tools.push(added.clone());
        }
    }
    out
}

fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join(""),
        _ => String::new(),
    }
}

/// Every system message of `messages` replayed into one (pi-ai's `getCurrentSystemMessage`):
/// their text joined, sections patched by name, tools resolved; `None` without any.
pub fn current(messages: &[Value]) -> Option<Value> {
    let systems: Vec<&Value> = messages.iter().filter(|m| m["role"] == "system").collect();
    let first = systems.first()?;
    let Replayed { sections, tools } = replay(messages);
    let text: Vec<String> = systems
        .iter()
        .map(|m| content_text(&m["content"]))
        .filter(|t| !t.is_empty())
        .collect();
    let mut message = json!({ "role": "system", "content": text.join("\n\n") });
    if !sections.is_empty() {
        message["sections"] = Value::Object(sections);
    }
    if !tools.is_empty() {
        message["toolsAdded"] = Value::Array(tools);
    }
    message["timestamp"] = first.get("timestamp").cloned().unwrap_or(json!(0));
    Some(message)
}

/// The prompt the transcript's system messages make (pi-ai's `getCurrentSystemPrompt`).
pub fn prompt_text(messages: &[Value]) -> String {
    let Some(message) = current(messages) else {
        return String::new();
    };
    let mut parts = vec![content_text(&message["content"])];
    for text in message["sections"].as_object().into_iter().flatten() {
        parts.extend(text.1.as_str().map(str::to_owned));
    }
    crate::system_prompt::render(parts.iter().map(String::as_str))
}

/// A tool as a system message declares it: `{name, description, parameters,
/// constrainedSampling?}`.
pub fn declaration(
    name: &str,
    description: &str,
    parameters: &Value,
    constrained: Option<&Value>,
) -> Value {
    let mut d = json!({ "name": name, "description": description, "parameters": parameters });
    if let Some(c) = constrained {
        d["constrainedSampling"] = c.clone();
    }
    d
}

/// The system message that takes the transcript from `current` to the desired sections and
/// tools, or `None` when nothing changed. A tool whose declaration changed is removed and added
/// again, as pi's `getToolStateChanges` reports it.
pub fn patch(
    current: &Replayed,
    sections: &[(String, String)],
    tools: &[Value],
    timestamp: u64,
) -> Option<Value> {
    let mut changed = Map::new();
    for (name, text) in sections {
        if current.sections.get(name).and_then(Value::as_str) != Some(text.as_str()) {
            changed.insert(name.clone(), json!(text));
        }
    }
    for name in current.sections.keys() {
        if !sections.iter().any(|(n, _)| n == name) {
            changed.insert(name.clone(), Value::Null);
        }
    }
    let removed: Vec<Value> = current
        .tools
        .iter()
        .filter(|t| !tools.contains(t))
        .map(|t| json!({ "name": t["name"] }))
        .collect();
    let added: Vec<Value> = tools
        .iter()
        .filter(|t| !current.tools.contains(t))
        .cloned()
        .collect();
    if changed.is_empty() && removed.is_empty() && added.is_empty() {
        return None;
    }
    // pi's key order: role, content, sections, timestamp, toolsAdded, toolsRemoved.
    let mut message = json!({ "role": "system", "content": "" });
    if !changed.is_empty() {
        message["sections"] = Value::Object(changed);
    }
    message["timestamp"] = json!(timestamp);
    if !added.is_empty() {
        message["toolsAdded"] = Value::Array(added);
    }
    if !removed.is_empty() {
        message["toolsRemoved"] = Value::Array(removed);
    }
    Some(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sections(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, t)| (n.to_string(), t.to_string()))
            .collect()
    }

    #[test]
    fn the_first_message_declares_everything_and_later_ones_patch_what_changed() {
        let read = declaration("read", "Read", &json!({}), None);
        let ls = declaration("ls", "List", &json!({}), None);
        let first = patch(
            &Replayed::default(),
            &sections(&[("preamble", "P"), ("cwd", "<cwd>\n/w\n</cwd>")]),
            std::slice::from_ref(&read),
            1,
        )
        .unwrap();
        assert_eq!(
            first,
            json!({"role": "system", "content": "", "sections": {"preamble": "P", "cwd": "<cwd>\n/w\n</cwd>"},
                   "timestamp": 1, "toolsAdded": [read]})
        );
        let transcript = vec![first, json!({"role": "user", "content": "hi"})];
        let now = replay(&transcript);
        assert!(
            patch(
                &now,
                &sections(&[("preamble", "P"), ("cwd", "<cwd>\n/w\n</cwd>")]),
                std::slice::from_ref(&read),
                2
            )
            .is_none()
        );
        let second = patch(
            &now,
            &sections(&[("preamble", "Q")]),
            std::slice::from_ref(&ls),
            3,
        )
        .unwrap();
        assert_eq!(
            second,
            json!({"role": "system", "content": "", "sections": {"preamble": "Q", "cwd": null},
                   "timestamp": 3, "toolsAdded": [ls.clone()], "toolsRemoved": [{"name": "read"}]})
        );
        let mut transcript = transcript;
        transcript.push(second);
        let now = replay(&transcript);
        assert_eq!(
            now.sections,
            json!({"preamble": "Q"}).as_object().unwrap().clone()
        );
        assert_eq!(now.tools, vec![ls]);
    }

    #[test]
    fn a_changed_declaration_is_removed_and_added_again() {
        let old = declaration("t", "old", &json!({}), None);
        let new = declaration("t", "new", &json!({}), None);
        let now = Replayed {
            sections: Map::new(),
            tools: vec![old],
        };
        let m = patch(&now, &[], std::slice::from_ref(&new), 1).unwrap();
        assert_eq!(m["toolsAdded"], json!([new]));
        assert_eq!(m["toolsRemoved"], json!([{"name": "t"}]));
    }
}
