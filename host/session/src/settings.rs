//! pi's settings.json layers (the user's, then a trusted project's) as one, merged as pi
//! merges them: objects key by key and recursively, anything else replaced by the later
//! layer; `defaultTools` lists of only `+name` / `-name` entries modify the inherited list.

use serde_json::{Map, Value};

use crate::Session;

impl Session {
    /// The effective settings `pi.getSettings()` answers with (see [`merge`]).
    pub fn set_settings(&mut self, settings: Value) {
        self.shared.state.lock().unwrap().settings = settings;
    }
}

/// The effective settings of `layers`, earliest first (a layer that is not an object, as a
/// missing or unreadable file, counts as empty).
pub fn merge(layers: &[Value]) -> Value {
    let mut merged = Value::Object(Map::new());
    for layer in layers.iter().filter(|l| l.is_object()) {
        let tools = default_tools(merged.get("defaultTools"), layer.get("defaultTools"));
        merge_into(&mut merged, layer);
        if let Some(tools) = tools {
            merged["defaultTools"] = tools;
        }
    }
    merged
}

fn merge_into(base: &mut Value, over: &Value) {
    match (base, over) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                match base.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        merge_into(existing, value)
                    }
                    _ => {
                        base.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (base, over) => *base = over.clone(),
    }
}

fn is_modifier(entry: &Value) -> bool {
    entry
        .as_str()
        .is_some_and(|e| e.starts_with('+') || e.starts_with('-'))
}

/// An inherited list extended by a list of modifiers; `None` when the plain merge holds.
fn default_tools(base: Option<&Value>, over: Option<&Value>) -> Option<Value> {
    let (Value::Array(base), Value::Array(over)) = (base?, over?) else {
        return None;
    };
    over.iter()
        .all(is_modifier)
        .then(|| Value::Array(base.iter().chain(over).cloned().collect()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn later_layers_win_objects_merge_and_tool_modifiers_extend() {
        let user = json!({"theme": "dark", "retry": {"enabled": true, "maxRetries": 3},
            "defaultTools": ["read", "bash"], "packages": ["a"]});
        let project = json!({"retry": {"maxRetries": 5}, "defaultTools": ["+grep", "-bash"],
            "packages": ["b"]});
        assert_eq!(
            merge(&[user.clone(), Value::Null, project]),
            json!({"theme": "dark", "retry": {"enabled": true, "maxRetries": 5},
                "defaultTools": ["read", "bash", "+grep", "-bash"], "packages": ["b"]})
        );
        // A plain list replaces the inherited one.
        assert_eq!(
            merge(&[user, json!({"defaultTools": ["ls"]})])["defaultTools"],
            json!(["ls"])
        );
        assert_eq!(merge(&[]), json!({}));
    }
}
