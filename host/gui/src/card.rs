//! `pichamber.ui` descriptors normalised into cards: every field checked and cut to the
//! seed's limits; anything unknown (a component, a protocol version, a payload that is not
//! an object) degrades to a `generic` card that shows the JSON, never an error.

use serde_json::{Map, Value, json};

use super::{PROTOCOL, VERSION, is_command_name, limits, truncate};

/// A normalised card (see docs/GUI-API.md): `{id?, title?, component, props, actions, html?}`.
pub type Card = Value;

pub const COMPONENTS: [&str; 7] = [
    "markdown", "kv", "list", "table", "progress", "badges", "code",
];
pub const TONES: [&str; 5] = ["info", "success", "warning", "error", "neutral"];
pub const VARIANTS: [&str; 4] = ["primary", "secondary", "danger", "ghost"];

/// What a `pichamber.ui` payload asks for.
#[derive(Debug, Clone, PartialEq)]
pub enum Descriptor {
    /// A card to show (with its stable id, if it has one).
    Card(Card),
    /// `{ id, removed: true }`: take the live panel `id` off the dock.
    Remove(String),
}

/// Normalises one `pichamber.ui` payload.
pub fn normalize_descriptor(data: &Value) -> Descriptor {
    let Some(object) = data.as_object() else {
        return Descriptor::Card(generic(None, None, data));
    };
    let id = key(object.get("id"));
    if object.get("removed") == Some(&Value::Bool(true))
        && let Some(id) = &id
    {
        return Descriptor::Remove(id.clone());
    }
    let title = object
        .get("title")
        .and_then(Value::as_str)
        .map(|t| truncate(t, limits::TITLE));
    let known_protocol = match object.get("protocol") {
        None => true,
        Some(p) => p.as_str() == Some(PROTOCOL),
    };
    let known_version = match object.get("version") {
        None => true,
        Some(v) => v.as_u64() == Some(VERSION) || v.as_f64() == Some(VERSION as f64),
    };
    let component = object.get("component").and_then(Value::as_str);
    let component = match component {
        Some(c) if known_protocol && known_version && COMPONENTS.contains(&c) => c,
        _ => return Descriptor::Card(generic(id, title, data)),
    };
    let empty = Map::new();
    let props = object
        .get("props")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    let mut card = Map::new();
    if let Some(id) = id {
        card.insert("id".into(), json!(id));
    }
    if let Some(title) = title {
        card.insert("title".into(), json!(title));
    }
    card.insert("component".into(), json!(component));
    let props = match component {
        "markdown" => {
            let body = long_text(props.get("body"));
            card.insert("html".into(), json!(crate::markdown::render(&body)));
            json!({ "body": body })
        }
        "kv" => json!({ "rows": rows(props.get("rows"), limits::TABLE_ROWS) }),
        "list" => json!({ "items": rows(props.get("items"), limits::TABLE_ROWS) }),
        "table" => {
            let columns: Vec<Value> = array(props.get("columns"))
                .iter()
                .take(limits::TABLE_COLUMNS)
                .map(|c| json!(truncate(&text(c), limits::TITLE)))
                .collect();
            let rows: Vec<Value> = array(props.get("rows"))
                .iter()
                .take(limits::TABLE_ROWS)
                .map(|row| {
                    Value::Array(
                        array(Some(row))
                            .iter()
                            .take(limits::TABLE_COLUMNS)
                            .map(|cell| json!(truncate(&text(cell), limits::MESSAGE)))
                            .collect(),
                    )
                })
                .collect();
            json!({ "columns": columns, "rows": rows })
        }
        "progress" => {
            let max = props
                .get("max")
                .and_then(Value::as_f64)
                .filter(|m| m.is_finite() && *m > 0.0)
                .unwrap_or(100.0);
            let value = props
                .get("value")
                .and_then(Value::as_f64)
                .filter(|v| v.is_finite())
                .unwrap_or(0.0)
                .clamp(0.0, max);
            let mut out = json!({ "value": number(value), "max": number(max) });
            if let Some(label) = props.get("label") {
                out["label"] = json!(truncate(&text(label), limits::TITLE));
            }
            out
        }
        "badges" => {
            let items: Vec<Value> = array(props.get("items"))
                .iter()
                .take(limits::BADGE_ITEMS)
                .map(|item| match item {
                    Value::Object(o) => {
                        let mut badge = json!({ "label": truncate(&text(o.get("label").unwrap_or(&Value::Null)), limits::TITLE) });
                        if let Some(tone) = tone(o.get("tone")) {
                            badge["tone"] = json!(tone);
                        }
                        badge
                    }
                    other => json!({ "label": truncate(&text(other), limits::TITLE) }),
                })
                .collect();
            json!({ "items": items })
        }
        "code" => {
            let mut out = json!({ "code": long_text(props.get("code")) });
            if let Some(language) = props.get("language").and_then(Value::as_str) {
                out["language"] = json!(truncate(language, limits::KEY));
            }
            out
        }
        _ => unreachable!("COMPONENTS is exhaustive"),
    };
    card.insert("props".into(), props);
    card.insert(
        "actions".into(),
        Value::Array(actions(object.get("actions"))),
    );
    Descriptor::Card(Value::Object(card))
}

/// The card shown for anything that is not a descriptor this host understands: the JSON,
/// collapsed (cut when it is longer than a message may be).
pub fn generic(id: Option<String>, title: Option<String>, data: &Value) -> Card {
    let text = data.to_string();
    let json = if text.chars().count() > limits::MESSAGE {
        json!(truncate(&text, limits::MESSAGE))
    } else {
        data.clone()
    };
    let mut card = Map::new();
    if let Some(id) = id {
        card.insert("id".into(), json!(id));
    }
    if let Some(title) = title {
        card.insert("title".into(), json!(title));
    }
    card.insert("component".into(), json!("generic"));
    card.insert("props".into(), json!({ "json": json }));
    card.insert("actions".into(), json!([]));
    card.insert("collapsed".into(), json!(true));
    Value::Object(card)
}

/// A markdown card (no id, no actions) showing `body`.
pub fn markdown(title: Option<String>, body: &str) -> Card {
    let body = truncate(body, limits::MESSAGE);
    let mut card = json!({
        "component": "markdown",
        "html": crate::markdown::render(&body),
        "props": { "body": body },
        "actions": [],
    });
    if let Some(title) = title {
        card["title"] = json!(title);
    }
    card
}

fn key(value: Option<&Value>) -> Option<String> {
    value
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(|s| truncate(s, limits::KEY))
}

fn array(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// A value shown as text: strings as they are, numbers and booleans written out, null empty.
fn text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn long_text(value: Option<&Value>) -> String {
    truncate(&text(value.unwrap_or(&Value::Null)), limits::MESSAGE)
}

fn tone(value: Option<&Value>) -> Option<&str> {
    value.and_then(Value::as_str).filter(|t| TONES.contains(t))
}

fn number(n: f64) -> Value {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        json!(n as i64)
    } else {
        json!(n)
    }
}

/// kv rows and list items: `{label, value?, tone?}` (a plain string is a label).
fn rows(value: Option<&Value>, max: usize) -> Vec<Value> {
    array(value)
        .iter()
        .take(max)
        .map(|row| match row {
            Value::Object(o) => {
                let mut out = json!({ "label": truncate(&text(o.get("label").unwrap_or(&Value::Null)), limits::TITLE) });
                if let Some(v) = o.get("value").filter(|v| !v.is_null()) {
                    out["value"] = json!(truncate(&text(v), limits::MESSAGE));
                }
                if let Some(tone) = tone(o.get("tone")) {
                    out["tone"] = json!(tone);
                }
                out
            }
            other => json!({ "label": truncate(&text(other), limits::TITLE) }),
        })
        .collect()
}

/// Up to 8 actions; one without a label or with a command name outside the pattern is
/// dropped (it could not be invoked).
fn actions(value: Option<&Value>) -> Vec<Value> {
    array(value)
        .iter()
        .filter_map(|a| {
            let a = a.as_object()?;
            let label = a.get("label").and_then(Value::as_str)?;
            let command = a.get("command").and_then(Value::as_str)?;
            let command = command.strip_prefix('/').unwrap_or(command);
            if !is_command_name(command) {
                return None;
            }
            let mut out = json!({ "label": truncate(label, limits::TITLE), "command": command });
            if let Some(args) = a.get("args").filter(|v| !v.is_null()) {
                out["args"] = json!(truncate(&text(args), limits::MESSAGE));
            }
            if let Some(variant) = a
                .get("variant")
                .and_then(Value::as_str)
                .filter(|v| VARIANTS.contains(v))
            {
                out["variant"] = json!(variant);
            }
            if let Some(icon) = a.get("icon").and_then(Value::as_str) {
                out["icon"] = json!(truncate(icon, limits::KEY));
            }
            for flag in ["disabled", "loading"] {
                if a.get(flag) == Some(&Value::Bool(true)) {
                    out[flag] = json!(true);
                }
            }
            match a.get("confirm") {
                Some(Value::Bool(true)) => out["confirm"] = json!(true),
                Some(Value::String(s)) if !s.is_empty() => {
                    out["confirm"] = json!(truncate(s, limits::TITLE))
                }
                _ => {}
            }
            match a.get("promptForArgs") {
                Some(Value::Bool(true)) => out["promptForArgs"] = json!({}),
                Some(Value::Object(p)) => {
                    let mut prompt = json!({});
                    for field in ["label", "placeholder"] {
                        if let Some(s) = p.get(field).and_then(Value::as_str) {
                            prompt[field] = json!(truncate(s, limits::TITLE));
                        }
                    }
                    out["promptForArgs"] = prompt;
                }
                _ => {}
            }
            Some(out)
        })
        .take(limits::ACTIONS)
        .collect()
}

/// The descriptor a `pichamber.ui` custom message carries: its `details` when that is an
/// object, else its content (an object, or a JSON text of one).
pub fn message_descriptor(entry: &Value) -> Value {
    if entry["details"].is_object() {
        return entry["details"].clone();
    }
    match &entry["content"] {
        Value::String(s) => serde_json::from_str::<Value>(s)
            .ok()
            .filter(Value::is_object)
            .unwrap_or_else(|| entry["content"].clone()),
        Value::Array(blocks) => {
            // A text block holding the descriptor's JSON.
            let text: String = blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .filter_map(|b| b["text"].as_str())
                .collect();
            serde_json::from_str::<Value>(&text)
                .ok()
                .filter(Value::is_object)
                .unwrap_or_else(|| entry["content"].clone())
        }
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card(data: Value) -> Value {
        match normalize_descriptor(&data) {
            Descriptor::Card(c) => c,
            other => panic!("not a card: {other:?}"),
        }
    }

    #[test]
    fn each_component_is_kept_with_its_props() {
        let c = card(json!({
            "protocol": PROTOCOL, "version": 1, "id": "subagents", "title": "Sub-agents",
            "component": "table",
            "props": { "columns": ["Agent", "Status"], "rows": [["research", "running"]] },
            "actions": [{ "label": "Cancel", "command": "subagents-cancel", "args": "research" }],
        }));
        assert_eq!(c["id"], "subagents");
        assert_eq!(c["component"], "table");
        assert_eq!(c["props"]["rows"], json!([["research", "running"]]));
        assert_eq!(
            c["actions"],
            json!([{ "label": "Cancel", "command": "subagents-cancel", "args": "research" }])
        );
        let kv = card(
            json!({ "component": "kv", "props": { "rows": [{ "label": "Files", "value": 12, "tone": "info" }] } }),
        );
        assert_eq!(
            kv["props"]["rows"],
            json!([{ "label": "Files", "value": "12", "tone": "info" }])
        );
        let list = card(
            json!({ "component": "list", "props": { "items": [{ "label": "src/", "value": "42 files" }, "plain"] } }),
        );
        assert_eq!(list["props"]["items"][1], json!({ "label": "plain" }));
        let code = card(
            json!({ "component": "code", "props": { "language": "ts", "code": "const x = 1;" } }),
        );
        assert_eq!(
            code["props"],
            json!({ "code": "const x = 1;", "language": "ts" })
        );
        assert!(
            card(json!({ "component": "markdown", "props": { "body": "x" } }))["html"].is_string()
        );
    }

    #[test]
    fn progress_is_clamped_and_defaults_its_max() {
        let c = card(
            json!({ "component": "progress", "props": { "label": "Indexing", "value": 140, "max": 100 } }),
        );
        assert_eq!(
            c["props"],
            json!({ "value": 100, "max": 100, "label": "Indexing" })
        );
        let c = card(json!({ "component": "progress", "props": { "value": -3, "max": 0 } }));
        assert_eq!(c["props"], json!({ "value": 0, "max": 100 }));
        let c = card(json!({ "component": "progress", "props": { "value": 2.5, "max": 10 } }));
        assert_eq!(c["props"]["value"], json!(2.5));
    }

    #[test]
    fn tones_are_checked() {
        let c = card(json!({ "component": "badges", "props": { "items": [
            { "label": "passing", "tone": "success" }, "3 skipped", { "label": "x", "tone": "purple" }
        ] } }));
        assert_eq!(
            c["props"]["items"],
            json!([{ "label": "passing", "tone": "success" }, { "label": "3 skipped" }, { "label": "x" }])
        );
        for tone in TONES {
            let c = card(
                json!({ "component": "kv", "props": { "rows": [{ "label": "a", "tone": tone }] } }),
            );
            assert_eq!(c["props"]["rows"][0]["tone"], tone);
        }
    }

    #[test]
    fn limits_are_applied() {
        let long_id = "i".repeat(300);
        let c = card(json!({
            "id": long_id, "title": "t".repeat(1000), "component": "badges",
            "props": { "items": (0..100).map(|i| json!(format!("b{i}"))).collect::<Vec<_>>() },
            "actions": (0..20).map(|i| json!({ "label": format!("a{i}"), "command": "go" })).collect::<Vec<_>>(),
        }));
        assert_eq!(c["id"].as_str().unwrap().len(), 128);
        assert_eq!(c["title"].as_str().unwrap().len(), 256);
        assert_eq!(c["props"]["items"].as_array().unwrap().len(), 24);
        assert_eq!(c["actions"].as_array().unwrap().len(), 8);
        let c = card(json!({ "component": "table", "props": {
            "columns": ["a"], "rows": (0..500).map(|i| json!([i])).collect::<Vec<_>>() } }));
        assert_eq!(c["props"]["rows"].as_array().unwrap().len(), 200);
        assert_eq!(c["props"]["rows"][7], json!(["7"]));
        let c = card(json!({ "component": "markdown", "props": { "body": "x".repeat(60_000) } }));
        assert_eq!(c["props"]["body"].as_str().unwrap().len(), 50_000);
        let c = card(json!({ "component": "code", "props": { "code": "y".repeat(60_000) } }));
        assert_eq!(c["props"]["code"].as_str().unwrap().len(), 50_000);
    }

    #[test]
    fn actions_keep_their_options_and_drop_bad_commands() {
        let c = card(json!({ "component": "kv", "props": {}, "actions": [
            { "label": "Go", "command": "/deploy", "args": "prod", "variant": "danger", "icon": "rocket",
              "disabled": true, "loading": true, "confirm": true, "promptForArgs": { "label": "Env", "placeholder": "prod", "x": 1 } },
            { "label": "Bad", "command": "../etc/passwd" },
            { "label": "Spaces", "command": "a b" },
            { "command": "nolabel" },
            { "label": "Odd variant", "command": "ok", "variant": "rainbow", "confirm": "Really?" },
        ] }));
        assert_eq!(
            c["actions"],
            json!([
                { "label": "Go", "command": "deploy", "args": "prod", "variant": "danger", "icon": "rocket",
                  "disabled": true, "loading": true, "confirm": true, "promptForArgs": { "label": "Env", "placeholder": "prod" } },
                { "label": "Odd variant", "command": "ok", "confirm": "Really?" },
            ])
        );
    }

    #[test]
    fn unknown_components_and_versions_degrade_to_generic() {
        for data in [
            json!({ "component": "chart", "props": {} }),
            json!({ "protocol": PROTOCOL, "version": 2, "component": "kv", "props": {} }),
            json!({ "protocol": "other", "component": "kv" }),
            json!({ "title": "no component" }),
            json!("just text"),
            json!([1, 2]),
        ] {
            let c = card(data.clone());
            assert_eq!(c["component"], "generic", "{data}");
            assert_eq!(c["props"]["json"], data);
            assert_eq!(c["collapsed"], true);
        }
        let c = card(json!({ "id": "p", "version": 9, "title": "T", "component": "kv" }));
        assert_eq!(
            (c["id"].as_str(), c["title"].as_str()),
            (Some("p"), Some("T"))
        );
        let huge = json!({ "component": "nope", "blob": "z".repeat(80_000) });
        assert!(card(huge)["props"]["json"].as_str().unwrap().len() <= 50_000);
    }

    #[test]
    fn removal_needs_an_id() {
        assert_eq!(
            normalize_descriptor(&json!({ "id": "p", "removed": true })),
            Descriptor::Remove("p".into())
        );
        assert!(matches!(
            normalize_descriptor(&json!({ "removed": true })),
            Descriptor::Card(_)
        ));
    }

    #[test]
    fn a_custom_message_descriptor_is_found() {
        let d = json!({ "component": "kv" });
        assert_eq!(
            message_descriptor(&json!({ "content": "x", "details": d })),
            d
        );
        assert_eq!(message_descriptor(&json!({ "content": d.to_string() })), d);
        assert_eq!(
            message_descriptor(&json!({ "content": [{ "type": "text", "text": d.to_string() }] })),
            d
        );
        assert_eq!(
            message_descriptor(&json!({ "content": "plain" })),
            json!("plain")
        );
    }
}
