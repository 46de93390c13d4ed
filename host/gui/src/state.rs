//! The live ephemeral state of one session, folded from its events: status texts, widgets,
//! the title, pending dialogs, live panels and app surfaces. Each event also becomes what
//! the clients are sent (`extension.ui`, `session.entry`, `agent`, `extension.error`), so
//! a client that follows the events and one that reads a snapshot see the same state.
//! It also keeps the transcript's notes: what the page shows between entries that is not an
//! entry of the session file (commands the user ran, the host's refusals, extensions' errors
//! and console warnings), so a reload shows them where they were.

use std::collections::VecDeque;

use serde_json::{Map, Value, json};

use super::card::{self, Descriptor};
use super::{APP_TYPE, PROTOCOL, UI_TYPE, VERSION, form, limits, random_token, truncate};
use pichamber_session::SessionEvent;
use pichamber_session::events::{RUNTIME, UiRequest};

/// One event for the clients: its name (`extension.ui`, ...) and its data (without the
/// session id, which the transport adds).
#[derive(Debug, Clone, PartialEq)]
pub struct GuiEvent {
    pub name: &'static str,
    pub data: Value,
}

impl GuiEvent {
    fn ui(kind: &str, mut fields: Value) -> Self {
        fields["kind"] = json!(kind);
        Self {
            name: "extension.ui",
            data: fields,
        }
    }
    /// `extension.*` events are the ones a reconnecting client gets again.
    pub fn is_extension(&self) -> bool {
        self.name.starts_with("extension.")
    }
}

#[derive(Debug, Default)]
pub struct UiState {
    status: Map<String, Value>,
    widgets: Map<String, Value>,
    title: Option<String>,
    dialogs: Vec<Value>,
    panels: Map<String, Value>,
    apps: Map<String, Value>,
    busy: bool,
    notes: VecDeque<Value>,
    /// The id of the newest entry: where a note made now goes in the transcript.
    leaf: Option<String>,
    /// The first line of the first prompt: the session's title in lists.
    first_prompt: Option<String>,
    /// The text block streaming in that was last rendered, and when.
    rendered_at: Option<(usize, u64)>,
}

/// A title's length, in characters.
const TITLE_CHARS: usize = 80;

/// The notes a session keeps (the oldest go first).
const NOTES: usize = 200;
/// A note's text, in characters.
const NOTE_TEXT: usize = 2000;

impl UiState {
    pub fn new() -> Self {
        Self::default()
    }

    /// The snapshot of docs/GUI-API.md.
    pub fn snapshot(&self) -> Value {
        json!({
            "status": self.status,
            "widgets": self.widgets,
            "title": self.title,
            "dialogs": self.dialogs,
            "panels": self.panels,
            "apps": self.apps,
            "busy": self.busy,
        })
    }

    pub fn busy(&self) -> bool {
        self.busy
    }

    /// The first line of the session's first prompt, cut to 80 characters.
    pub fn first_prompt(&self) -> Option<&str> {
        self.first_prompt.as_deref()
    }

    /// The transcript's notes, oldest first; each says after which entry it goes (`after`,
    /// null before the first).
    pub fn notes(&self) -> Vec<Value> {
        self.notes.iter().cloned().collect()
    }

    /// The user ran an extension's command (pi records no entry for it): a `command` note.
    pub fn echo_command(&mut self, text: &str, extension: &str) -> Vec<GuiEvent> {
        let note = self.note(json!({ "kind": "command", "text": text, "extension": extension }));
        vec![GuiEvent {
            name: "session.note",
            data: json!({ "note": note }),
        }]
    }

    fn note(&mut self, mut note: Value) -> Value {
        if let Some(text) = note["text"].as_str() {
            note["text"] = json!(truncate(text, NOTE_TEXT));
        }
        note["after"] = json!(self.leaf);
        if self.notes.len() == NOTES {
            self.notes.pop_front();
        }
        self.notes.push_back(note.clone());
        note
    }

    /// A pending dialog by id.
    pub fn dialog(&self, id: &str) -> Option<&Value> {
        self.dialogs.iter().find(|d| d["id"] == id)
    }

    /// The token of the app surface mounted as `app_id`.
    pub fn app_token(&self, app_id: &str) -> Option<&str> {
        self.app_mount(app_id).map(|(token, _)| token)
    }

    /// The token of the app surface mounted as `app_id` and the owner key of the extension
    /// that mounted it (none for an entry written before owners were recorded).
    pub fn app_mount(&self, app_id: &str) -> Option<(&str, Option<&str>)> {
        let app = self.apps.get(app_id)?;
        Some((app["token"].as_str()?, app["owner"].as_str()))
    }

    /// Rebuilds panels and apps from the entries of a resumed session's branch (status,
    /// widgets and dialogs belonged to the process that ended).
    pub fn restore(&mut self, entries: &[Value]) {
        for entry in entries {
            self.apply_entry(entry);
        }
    }

    /// Folds one session event in; returns what the clients are sent. `now_ms`: the time
    /// (ms since the epoch) a dialog's deadline counts from.
    pub fn apply(&mut self, event: &SessionEvent, now_ms: u64) -> Vec<GuiEvent> {
        match event {
            SessionEvent::ExtensionUiRequest { id, request } => {
                self.apply_request(id, request, now_ms)
            }
            SessionEvent::ExtensionUiResponse { id, .. } => {
                let before = self.dialogs.len();
                self.dialogs.retain(|d| d["id"] != *id);
                if self.dialogs.len() == before {
                    return Vec::new();
                }
                vec![GuiEvent::ui("dialog.closed", json!({ "dialogId": id }))]
            }
            SessionEvent::Entry { entry } | SessionEvent::EntryAppended { entry } => {
                self.apply_entry(entry)
            }
            SessionEvent::Agent(value) => {
                match value["type"].as_str() {
                    Some("agent_start") => self.busy = true,
                    Some("agent_end") => self.busy = false,
                    _ => {}
                }
                vec![GuiEvent {
                    name: "agent",
                    data: json!({ "event": self.agent_event(value, now_ms) }),
                }]
            }
            SessionEvent::ExtensionError {
                extension,
                event,
                error,
                ..
            } => {
                // RUNTIME is the host refusing a prompt (no model), not an extension's fault.
                let kind = if extension == RUNTIME {
                    "host"
                } else {
                    "error"
                };
                self.note(
                    json!({ "kind": kind, "text": error, "extension": extension, "event": event }),
                );
                vec![GuiEvent {
                    name: "extension.error",
                    data: json!({ "extension": extension, "event": event, "error": error }),
                }]
            }
            // An extension's warnings and errors on its console (and what pichamber tells it
            // it cannot do, such as ctx.ui.custom) are shown; its other output is not.
            SessionEvent::Log {
                extension,
                level,
                message,
            } if level == "warn" || level == "error" => {
                let note = self.note(json!({
                    "kind": "console", "text": message, "extension": extension, "level": level,
                }));
                vec![GuiEvent {
                    name: "session.note",
                    data: json!({ "note": note }),
                }]
            }
            SessionEvent::ToolResult { .. }
            | SessionEvent::EventResult { .. }
            | SessionEvent::Log { .. } => Vec::new(),
        }
    }

    /// Closes every pending dialog (the session ended); returns the events saying so.
    pub fn close_dialogs(&mut self) -> Vec<GuiEvent> {
        std::mem::take(&mut self.dialogs)
            .into_iter()
            .map(|d| GuiEvent::ui("dialog.closed", json!({ "dialogId": d["id"] })))
            .collect()
    }

    fn apply_request(&mut self, id: &str, request: &UiRequest, now_ms: u64) -> Vec<GuiEvent> {
        let event = match request {
            UiRequest::Notify {
                message,
                notify_type,
            } => {
                let mut data = json!({ "message": truncate(message, limits::MESSAGE) });
                if let Some(t) = notify_type {
                    data["notifyType"] = json!(t);
                }
                GuiEvent::ui("notify", data)
            }
            UiRequest::SetStatus { key, text } => {
                let key = truncate(key, limits::KEY);
                let mut data = json!({ "key": key });
                match text {
                    Some(text) => {
                        let text = truncate(text, limits::TITLE);
                        self.status.insert(key, json!(text));
                        data["text"] = json!(text);
                    }
                    None => {
                        self.status.remove(&key);
                    }
                }
                GuiEvent::ui("status", data)
            }
            UiRequest::SetWidget {
                key,
                lines,
                placement,
            } => {
                let key = truncate(key, limits::KEY);
                let mut data = json!({ "key": key });
                match lines {
                    Some(lines) => {
                        let lines: Vec<String> = lines
                            .iter()
                            .take(limits::TABLE_ROWS)
                            .map(|l| truncate(l, limits::MESSAGE))
                            .collect();
                        let placement = placement.clone().unwrap_or_else(|| "aboveEditor".into());
                        let widget = json!({ "lines": lines, "placement": placement });
                        self.widgets.insert(key, widget.clone());
                        data["lines"] = widget["lines"].clone();
                        data["placement"] = widget["placement"].clone();
                    }
                    None => {
                        self.widgets.remove(&key);
                    }
                }
                GuiEvent::ui("widget", data)
            }
            UiRequest::SetTitle { title } => {
                let title = truncate(title, limits::TITLE);
                self.title = Some(title.clone());
                GuiEvent::ui("title", json!({ "title": title }))
            }
            UiRequest::SetEditorText { text } => {
                let mut data = json!({});
                if let Some(text) = text {
                    data["text"] = json!(truncate(text, limits::MESSAGE));
                }
                GuiEvent::ui("editorText", data)
            }
            dialog => {
                let dialog = dialog_json(id, dialog, now_ms);
                self.dialogs.push(dialog.clone());
                GuiEvent::ui("dialog", json!({ "dialog": dialog }))
            }
        };
        vec![event]
    }

    fn apply_entry(&mut self, entry: &Value) -> Vec<GuiEvent> {
        if let Some(id) = entry["id"].as_str() {
            self.leaf = Some(id.to_owned());
        }
        if self.first_prompt.is_none()
            && entry["type"] == "message"
            && entry["message"]["role"] == "user"
        {
            let text = pichamber_session::messages::user_text(&entry["message"]);
            self.first_prompt = text
                .lines()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(|line| {
                    let title = truncate(line, TITLE_CHARS);
                    if title.len() < line.len() {
                        format!("{title}…")
                    } else {
                        title
                    }
                });
        }
        let (shown, effect) = transcript_entry_with_effect(entry);
        let mut events = vec![GuiEvent {
            name: "session.entry",
            data: json!({ "entry": shown }),
        }];
        match effect {
            Effect::None => {}
            Effect::Panel(card) => {
                let id = card["id"].as_str().unwrap_or_default().to_owned();
                self.panels.insert(id, card.clone());
                events.push(GuiEvent::ui("panel", json!({ "card": card })));
            }
            Effect::RemovePanel(id) => {
                if self.panels.remove(&id).is_some() {
                    events.push(GuiEvent::ui("panel", json!({ "id": id, "removed": true })));
                }
            }
            Effect::App(data) => match self.mount_app(&data, entry["owner"].as_str()) {
                Ok(Some(removed)) if removed["removed"] == json!(true) => {
                    events.push(GuiEvent::ui("app", removed))
                }
                Ok(Some(app)) => events.push(GuiEvent::ui("app", json!({ "app": app }))),
                Ok(None) => {}
                Err(error) => events.push(GuiEvent {
                    name: "extension.error",
                    data: json!({ "extension": APP_TYPE, "event": "appendEntry", "error": error }),
                }),
            },
        }
        events
    }

    /// Mounts (or replaces, or removes) an app surface; every mount gets a fresh token.
    fn mount_app(&mut self, data: &Value, owner: Option<&str>) -> Result<Option<Value>, String> {
        let Some(app_id) = data["appId"].as_str().filter(|s| !s.is_empty()) else {
            return Err("a pichamber.app entry needs an appId".into());
        };
        let app_id = owned_id(owner, &truncate(app_id, limits::KEY));
        if data["removed"] == json!(true) {
            return Ok(self
                .apps
                .remove(&app_id)
                .map(|_| json!({ "appId": app_id, "removed": true })));
        }
        if !known_version(data) {
            return Err(format!(
                "app {app_id:?}: unknown protocol or version; not mounted"
            ));
        }
        let html = data["html"].as_str().unwrap_or_default();
        if html.len() > limits::APP_HTML {
            return Err(format!(
                "app {app_id:?}: its HTML is {} bytes, more than the {} allowed; not mounted",
                html.len(),
                limits::APP_HTML
            ));
        }
        if !self.apps.contains_key(&app_id) {
            let own = self
                .apps
                .values()
                .filter(|a| a["owner"].as_str() == owner)
                .count();
            if own >= limits::APPS_PER_EXTENSION {
                return Err(format!(
                    "app {app_id:?}: an extension may have {} apps; not mounted",
                    limits::APPS_PER_EXTENSION
                ));
            }
            if self.apps.len() >= limits::APPS_PER_SESSION {
                return Err(format!(
                    "app {app_id:?}: a session may have {} apps; not mounted",
                    limits::APPS_PER_SESSION
                ));
            }
        }
        let title = data["title"].as_str().map(|t| truncate(t, limits::TITLE));
        let mut app =
            json!({ "appId": app_id, "title": title, "html": html, "token": random_token() });
        if let Some(owner) = owner {
            app["owner"] = json!(owner);
        }
        self.apps.insert(app_id, app.clone());
        Ok(Some(app))
    }
}

enum Effect {
    None,
    Panel(Value),
    RemovePanel(String),
    App(Value),
}

/// A panel's or app's id as clients know it: namespaced by the extension that wrote it (the
/// `owner` the host records on `pichamber.*` entries), so two extensions' `build` panels are
/// two panels and neither can replace the other's. Entries from before owners were recorded
/// keep their bare id.
fn owned_id(owner: Option<&str>, id: &str) -> String {
    match owner {
        Some(owner) => format!("{owner}/{id}"),
        None => id.to_owned(),
    }
}

fn known_version(data: &Value) -> bool {
    (data.get("protocol").is_none() || data["protocol"] == PROTOCOL)
        && (data.get("version").is_none() || data["version"].as_f64() == Some(VERSION as f64))
}

/// An entry as clients see it: `pichamber.ui` entries and messages carry their card, other
/// custom entries and messages a collapsed generic card, `pichamber.app` entries no HTML
/// (the app lives in the snapshot).
pub fn transcript_entry(entry: &Value) -> Value {
    transcript_entry_with_effect(entry).0
}

fn transcript_entry_with_effect(entry: &Value) -> (Value, Effect) {
    let kind = entry["type"].as_str().unwrap_or_default();
    if kind == "message" {
        let mut shown = entry.clone();
        render_text_blocks(&mut shown["message"], None);
        return (shown, Effect::None);
    }
    if kind != "custom" && kind != "custom_message" {
        return (entry.clone(), Effect::None);
    }
    let custom_type = entry["customType"].as_str().unwrap_or_default();
    let mut shown = entry.clone();
    let effect = match (kind, custom_type) {
        ("custom", UI_TYPE) => match card::normalize_descriptor(&entry["data"]) {
            Descriptor::Card(mut card) => {
                let panel = card.get("id").is_some();
                if let Some(id) = card["id"].as_str() {
                    card["id"] = json!(owned_id(entry["owner"].as_str(), id));
                }
                shown["card"] = card.clone();
                if panel {
                    Effect::Panel(card)
                } else {
                    Effect::None
                }
            }
            Descriptor::Remove(id) => {
                let id = owned_id(entry["owner"].as_str(), &id);
                shown["card"] = json!({ "id": id, "removed": true });
                Effect::RemovePanel(id)
            }
        },
        ("custom_message", UI_TYPE) => {
            // A card in the transcript only: a message never updates the live dock.
            if let Descriptor::Card(card) =
                card::normalize_descriptor(&card::message_descriptor(entry))
            {
                shown["card"] = card;
            }
            Effect::None
        }
        ("custom", APP_TYPE) => {
            let data = entry["data"].clone();
            if let Some(object) = shown["data"].as_object_mut() {
                object.remove("html");
            }
            Effect::App(data)
        }
        ("custom", _) => {
            shown["card"] = card::generic(
                None,
                Some(truncate(custom_type, limits::TITLE)),
                &entry["data"],
            );
            Effect::None
        }
        _ if entry["display"] != json!(false) => {
            // pi shows a displayed message's content to the user: so does the page.
            shown["card"] = card::markdown(
                Some(truncate(custom_type, limits::TITLE)),
                &pichamber_session::messages::content_text(&entry["content"]),
            );
            Effect::None
        }
        _ => {
            shown["card"] = card::generic(
                None,
                Some(truncate(custom_type, limits::TITLE)),
                &entry["content"],
            );
            Effect::None
        }
    };
    (shown, effect)
}

/// An agent event as clients get it: an assistant message's text blocks carry `html` (its
/// markdown rendered and sanitised). A `message_update` renders only the block it updates,
/// so a streamed answer costs one block's rendering per delta.
impl UiState {
    /// An agent event for the clients, the assistant's text rendered as markdown. While text
    /// streams, a long block is rendered again at most every RENDER_EVERY_MS (each render
    /// costs its whole length); an update in between carries the delta only.
    fn agent_event(&mut self, event: &Value, now_ms: u64) -> Value {
        let mut event = event.clone();
        match event["type"].as_str() {
            Some("message_start" | "message_end") => {
                self.rendered_at = None;
                render_text_blocks(&mut event["message"], None)
            }
            Some("message_update") => {
                let delta = &event["assistantMessageEvent"];
                let kind = delta["type"].as_str().unwrap_or_default();
                if let Some(index) = delta["contentIndex"].as_u64().map(|i| i as usize)
                    && matches!(kind, "text_start" | "text_delta" | "text_end")
                {
                    let long = event["message"]["content"][index]["text"]
                        .as_str()
                        .is_some_and(|t| t.len() > CHEAP_RENDER_BYTES);
                    let due = self.rendered_at.is_none_or(|(block, at)| {
                        block != index || now_ms.saturating_sub(at) >= RENDER_EVERY_MS
                    });
                    if kind != "text_delta" || !long || due {
                        render_text_blocks(&mut event["message"], Some(index));
                        self.rendered_at = Some((index, now_ms));
                    }
                }
                // The delta's `partial` repeats `message`; clients read `message`.
                if let Some(delta) = event["assistantMessageEvent"].as_object_mut() {
                    delta.remove("partial");
                }
            }
            _ => {}
        }
        event
    }
}

/// Text up to this size is rendered on every streamed update (cheaper than a frame's worth).
const CHEAP_RENDER_BYTES: usize = 4096;
/// How often a longer block streaming in is rendered again.
const RENDER_EVERY_MS: u64 = 100;

/// Adds `html` to the text blocks of an assistant message (only block `only`, when given).
fn render_text_blocks(message: &mut Value, only: Option<usize>) {
    if message["role"] != "assistant" {
        return;
    }
    let Some(blocks) = message["content"].as_array_mut() else {
        return;
    };
    for (i, block) in blocks.iter_mut().enumerate() {
        if only.is_some_and(|only| only != i) || block["type"] != "text" {
            continue;
        }
        if let Some(text) = block["text"].as_str() {
            let html = crate::markdown::render(&truncate(text, limits::MESSAGE * 4));
            block["html"] = json!(html);
        }
    }
}

/// A pending dialog as docs/GUI-API.md describes it.
pub fn dialog_json(id: &str, request: &UiRequest, now_ms: u64) -> Value {
    let mut d = json!({ "id": id });
    let timeout = request.timeout_ms();
    match request {
        UiRequest::Select { title, options, .. } => {
            d["method"] = json!("select");
            d["title"] = json!(truncate(title, limits::TITLE));
            d["options"] = json!(
                options
                    .iter()
                    .map(|o| truncate(o, limits::TITLE))
                    .collect::<Vec<_>>()
            );
        }
        UiRequest::Confirm { title, message, .. } => {
            d["method"] = json!("confirm");
            d["title"] = json!(truncate(title, limits::TITLE));
            d["message"] = json!(truncate(message, limits::MESSAGE));
        }
        UiRequest::Input {
            title, placeholder, ..
        } => {
            d["method"] = json!("input");
            d["title"] = json!(truncate(title, limits::TITLE));
            if let Some(p) = placeholder {
                d["placeholder"] = json!(truncate(p, limits::TITLE));
            }
        }
        UiRequest::Editor { title, prefill, .. } => {
            d["method"] = json!("editor");
            d["title"] = json!(truncate(title, limits::TITLE));
            if let Some(p) = prefill {
                d["prefill"] = json!(truncate(p, limits::MESSAGE));
            }
        }
        UiRequest::Form { title, fields, .. } => {
            d["method"] = json!("form");
            d["title"] = json!(truncate(title, limits::TITLE));
            d["fields"] = json!(form::normalize_fields(fields));
        }
        _ => {}
    }
    if let Some(ms) = timeout {
        d["timeout"] = json!(ms);
        d["deadline"] = json!(now_ms + u64::from(ms));
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use pichamber_session::events::DialogAnswer;

    fn entry(custom_type: &str, data: Value) -> SessionEvent {
        SessionEvent::Entry {
            entry: json!({ "type": "custom", "id": "e1", "customType": custom_type, "data": data }),
        }
    }

    fn kinds(events: &[GuiEvent]) -> Vec<String> {
        events
            .iter()
            .map(|e| match e.data["kind"].as_str() {
                Some(k) => format!("{}:{k}", e.name),
                None => e.name.to_owned(),
            })
            .collect()
    }

    #[test]
    fn a_card_entry_carries_its_card() {
        let mut s = UiState::new();
        let events = s.apply(
            &entry(
                UI_TYPE,
                json!({ "component": "kv", "props": { "rows": [] } }),
            ),
            0,
        );
        assert_eq!(kinds(&events), ["session.entry"]);
        assert_eq!(events[0].data["entry"]["card"]["component"], "kv");
        assert!(s.snapshot()["panels"].as_object().unwrap().is_empty());
    }

    #[test]
    fn panels_are_replaced_by_id_and_removed() {
        let mut s = UiState::new();
        let progress = |v: u32| {
            entry(
                UI_TYPE,
                json!({ "id": "build", "component": "progress", "props": { "value": v } }),
            )
        };
        let events = s.apply(&progress(10), 0);
        assert_eq!(kinds(&events), ["session.entry", "extension.ui:panel"]);
        s.apply(
            &entry(
                UI_TYPE,
                json!({ "id": "other", "component": "code", "props": {} }),
            ),
            0,
        );
        s.apply(&progress(60), 0);
        let snap = s.snapshot();
        assert_eq!(snap["panels"]["build"]["props"]["value"], 60);
        assert_eq!(snap["panels"].as_object().unwrap().len(), 2);
        let events = s.apply(
            &entry(UI_TYPE, json!({ "id": "build", "removed": true })),
            0,
        );
        assert_eq!(kinds(&events), ["session.entry", "extension.ui:panel"]);
        assert_eq!(
            events[1].data,
            json!({ "id": "build", "removed": true, "kind": "panel" })
        );
        assert!(s.snapshot()["panels"].get("build").is_none());
        // Removing what is not there says nothing.
        let events = s.apply(
            &entry(UI_TYPE, json!({ "id": "build", "removed": true })),
            0,
        );
        assert_eq!(kinds(&events), ["session.entry"]);
    }

    #[test]
    fn panels_and_apps_are_namespaced_by_their_owner() {
        let mut s = UiState::new();
        let owned = |owner: &str, custom_type: &str, data: Value| SessionEvent::Entry {
            entry: json!({ "type": "custom", "id": "e1", "customType": custom_type, "data": data, "owner": owner }),
        };
        let panel = |owner: &str, value: u32| {
            owned(
                owner,
                UI_TYPE,
                json!({ "id": "build", "component": "progress", "props": { "value": value } }),
            )
        };
        s.apply(&panel("a@1", 10), 0);
        let events = s.apply(&panel("b@2", 20), 0);
        assert_eq!(events[0].data["entry"]["card"]["id"], "b@2/build");
        let snap = s.snapshot();
        assert_eq!(snap["panels"]["a@1/build"]["props"]["value"], 10);
        assert_eq!(snap["panels"]["b@2/build"]["props"]["value"], 20);
        // b's removal of "build" is of its own.
        let events = s.apply(
            &owned("b@2", UI_TYPE, json!({ "id": "build", "removed": true })),
            0,
        );
        assert_eq!(events[1].data["id"], "b@2/build");
        assert_eq!(
            events[0].data["entry"]["card"],
            json!({ "id": "b@2/build", "removed": true })
        );
        assert_eq!(s.snapshot()["panels"].as_object().unwrap().len(), 1);
        // Apps: 8 per owner, whatever the others hold; the owner travels with the mount.
        let app =
            |owner: &str, id: String| owned(owner, APP_TYPE, json!({ "appId": id, "html": "" }));
        for i in 0..8 {
            s.apply(&app("a@1", format!("x{i}")), 0);
        }
        let refused = s.apply(&app("a@1", "x8".into()), 0);
        assert_eq!(kinds(&refused), ["session.entry", "extension.error"]);
        let events = s.apply(&app("b@2", "x0".into()), 0);
        assert_eq!(events[1].data["app"]["appId"], "b@2/x0");
        assert_eq!(s.app_mount("b@2/x0").unwrap().1, Some("b@2"));
        assert!(s.app_mount("x0").is_none());
    }

    #[test]
    fn a_custom_message_card_stays_in_the_transcript() {
        let mut s = UiState::new();
        let events = s.apply(
            &SessionEvent::Entry {
                entry: json!({ "type": "custom_message", "customType": UI_TYPE,
                    "content": json!({ "id": "p", "component": "kv", "props": {} }).to_string(), "display": true }),
            },
            0,
        );
        assert_eq!(kinds(&events), ["session.entry"]);
        assert_eq!(events[0].data["entry"]["card"]["id"], "p");
        assert!(s.snapshot()["panels"].as_object().unwrap().is_empty());
    }

    #[test]
    fn other_custom_entries_get_a_collapsed_generic_card() {
        let mut s = UiState::new();
        let events = s.apply(&entry("todo-state", json!({ "items": [1] })), 0);
        let card = &events[0].data["entry"]["card"];
        assert_eq!(card["component"], "generic");
        assert_eq!(card["collapsed"], true);
        assert_eq!(card["title"], "todo-state");
        assert_eq!(card["props"]["json"], json!({ "items": [1] }));
        let plain = s.apply(
            &SessionEvent::Entry {
                entry: json!({ "type": "message", "message": {} }),
            },
            0,
        );
        assert!(plain[0].data["entry"].get("card").is_none());
    }

    #[test]
    fn a_displayed_custom_message_shows_its_content_and_a_hidden_one_stays_collapsed() {
        let mut s = UiState::new();
        let message = |display: bool| SessionEvent::Entry {
            entry: json!({ "type": "custom_message", "customType": "note", "display": display,
                "content": [{ "type": "text", "text": "**Done**: 3 files" }] }),
        };
        let shown = &s.apply(&message(true), 0)[0].data["entry"]["card"];
        assert_eq!(shown["component"], "markdown");
        assert_eq!(shown["title"], "note");
        assert_eq!(shown["html"], "<p><strong>Done</strong>: 3 files</p>\n");
        let hidden = &s.apply(&message(false), 0)[0].data["entry"]["card"];
        assert_eq!(hidden["component"], "generic");
        assert_eq!(hidden["collapsed"], true);
    }

    #[test]
    fn assistant_text_carries_sanitised_markdown_in_entries_and_events() {
        let mut s = UiState::new();
        let message = json!({ "role": "assistant", "content": [
            { "type": "thinking", "thinking": "**hm**" },
            { "type": "text", "text": "## Plan\n<script>x()</script>" },
            { "type": "toolCall", "id": "c1", "name": "ls", "arguments": {} },
            { "type": "text", "text": "`done`" },
        ]});
        let entry = &s.apply(
            &SessionEvent::Entry {
                entry: json!({ "type": "message", "id": "m1", "message": message }),
            },
            0,
        )[0]
        .data["entry"]["message"]["content"];
        assert_eq!(
            entry[1]["html"],
            "<h2>Plan</h2>\n&lt;script&gt;x()&lt;/script&gt;"
        );
        assert_eq!(entry[3]["html"], "<p><code>done</code></p>\n");
        assert!(entry[0].get("html").is_none() && entry[2].get("html").is_none());
        // A user's message is shown as typed.
        let user = &s.apply(
            &SessionEvent::Entry {
                entry: json!({ "type": "message", "message": { "role": "user",
                    "content": [{ "type": "text", "text": "**x**" }] } }),
            },
            0,
        )[0]
        .data["entry"]["message"]["content"][0];
        assert!(user.get("html").is_none());
        // A streamed update renders the block it updates and drops the repeated partial.
        let update = &s.apply(
            &SessionEvent::Agent(json!({ "type": "message_update", "message": message,
                "assistantMessageEvent": { "type": "text_delta", "contentIndex": 3,
                    "delta": "`", "partial": message } })),
            0,
        )[0]
        .data["event"];
        assert_eq!(
            update["message"]["content"][3]["html"],
            "<p><code>done</code></p>\n"
        );
        assert!(update["message"]["content"][1].get("html").is_none());
        assert!(update["assistantMessageEvent"].get("partial").is_none());
        assert_eq!(update["assistantMessageEvent"]["delta"], "`");
    }

    #[test]
    fn a_long_streamed_block_is_rendered_at_most_every_100_ms_and_at_its_end() {
        let mut s = UiState::new();
        let long = "word ".repeat(1000);
        let update = |s: &mut UiState, kind: &str, now: u64| {
            let message =
                json!({ "role": "assistant", "content": [{ "type": "text", "text": long }] });
            s.apply(
                &SessionEvent::Agent(json!({ "type": "message_update", "message": message,
                    "assistantMessageEvent": { "type": kind, "contentIndex": 0, "delta": "w" } })),
                now,
            )[0]
            .data["event"]["message"]["content"][0]
                .get("html")
                .is_some()
        };
        assert!(
            update(&mut s, "text_delta", 1000),
            "the first update is rendered"
        );
        assert!(
            !update(&mut s, "text_delta", 1050),
            "50 ms later: the delta only"
        );
        assert!(
            update(&mut s, "text_delta", 1100),
            "100 ms later: rendered again"
        );
        assert!(
            update(&mut s, "text_end", 1101),
            "the block's end is always rendered"
        );
        // A short block is cheap: every update is rendered.
        let message =
            json!({ "role": "assistant", "content": [{ "type": "text", "text": "short" }] });
        for now in [2000, 2001, 2002] {
            let out = s.apply(
                &SessionEvent::Agent(json!({ "type": "message_update", "message": message,
                    "assistantMessageEvent": { "type": "text_delta", "contentIndex": 0, "delta": "t" } })),
                now,
            );
            assert!(out[0].data["event"]["message"]["content"][0]["html"].is_string());
        }
    }

    #[test]
    fn notes_keep_commands_refusals_errors_and_console_warnings_in_place() {
        let mut s = UiState::new();
        assert_eq!(
            kinds(&s.echo_command("/survey now", "survey")),
            ["session.note"]
        );
        s.apply(
            &SessionEvent::Entry {
                entry: json!({ "type": "message", "id": "u1", "message": { "role": "user",
                    "content": [{ "type": "text", "text": "hi" }] } }),
            },
            0,
        );
        let refused = s.apply(
            &SessionEvent::ExtensionError {
                extension: RUNTIME.into(),
                event: "prompt".into(),
                error: "No model configured".into(),
                stack: None,
            },
            0,
        );
        assert_eq!(kinds(&refused), ["extension.error"]);
        s.apply(
            &SessionEvent::ExtensionError {
                extension: "git-glance".into(),
                event: "command:glance".into(),
                error: "read . is not granted".into(),
                stack: None,
            },
            0,
        );
        let warned = s.apply(
            &SessionEvent::Log {
                extension: "todo".into(),
                level: "warn".into(),
                message: "ctx.ui.custom() asks for a terminal component".into(),
            },
            0,
        );
        assert_eq!(warned[0].name, "session.note");
        assert_eq!(warned[0].data["note"]["kind"], "console");
        // Plain console output is not shown.
        let logged = s.apply(
            &SessionEvent::Log {
                extension: "todo".into(),
                level: "info".into(),
                message: "progress".into(),
            },
            0,
        );
        assert!(logged.is_empty());
        let notes = s.notes();
        let summary: Vec<(String, Value)> = notes
            .iter()
            .map(|n| (n["kind"].as_str().unwrap().to_owned(), n["after"].clone()))
            .collect();
        assert_eq!(
            summary,
            [
                ("command".into(), Value::Null),
                ("host".into(), json!("u1")),
                ("error".into(), json!("u1")),
                ("console".into(), json!("u1")),
            ]
        );
        assert_eq!(notes[0]["text"], "/survey now");
        assert_eq!(notes[0]["extension"], "survey");
        assert_eq!(notes[2]["event"], "command:glance");
        assert_eq!(notes[3]["level"], "warn");
        // The snapshot does not carry them (they come with the transcript).
        assert!(s.snapshot().get("notes").is_none());
    }

    #[test]
    fn notes_are_capped_oldest_first_and_their_text_cut() {
        let mut s = UiState::new();
        for i in 0..(NOTES + 5) {
            s.echo_command(&format!("/c {i}"), "x");
        }
        s.echo_command(&"y".repeat(NOTE_TEXT + 10), "x");
        let notes = s.notes();
        assert_eq!(notes.len(), NOTES);
        assert_eq!(notes[0]["text"], "/c 6");
        assert_eq!(
            notes.last().unwrap()["text"]
                .as_str()
                .unwrap()
                .chars()
                .count(),
            NOTE_TEXT
        );
    }

    #[test]
    fn the_title_is_the_first_line_of_the_first_prompt() {
        let mut s = UiState::new();
        let user = |text: &str| SessionEvent::Entry {
            entry: json!({ "type": "message", "message": { "role": "user",
                "content": [{ "type": "text", "text": text }] } }),
        };
        assert_eq!(s.first_prompt(), None);
        s.apply(&user("\n  Fix the build  \nthen test"), 0);
        assert_eq!(s.first_prompt(), Some("Fix the build"));
        s.apply(&user("a later prompt"), 0);
        assert_eq!(s.first_prompt(), Some("Fix the build"));
        let mut s = UiState::new();
        s.apply(&user(&"é".repeat(100)), 0);
        assert_eq!(
            s.first_prompt(),
            Some(format!("{}…", "é".repeat(80)).as_str())
        );
    }

    #[test]
    fn apps_mount_with_fresh_tokens_and_limits() {
        let mut s = UiState::new();
        let app = |id: &str, html: &str| {
            entry(
                APP_TYPE,
                json!({ "protocol": PROTOCOL, "version": 1, "appId": id, "title": "Board", "html": html }),
            )
        };
        let events = s.apply(&app("board", "<button data-pichamber-command=\"next\">"), 0);
        assert_eq!(kinds(&events), ["session.entry", "extension.ui:app"]);
        // The transcript never carries the HTML.
        assert!(events[0].data["entry"]["data"].get("html").is_none());
        let first = s.app_token("board").unwrap().to_owned();
        s.apply(&app("board", "<p>v2</p>"), 0);
        let second = s.app_token("board").unwrap().to_owned();
        assert_ne!(first, second);
        assert_eq!(s.snapshot()["apps"]["board"]["html"], "<p>v2</p>");
        let big = "x".repeat(limits::APP_HTML + 1);
        let events = s.apply(&app("big", &big), 0);
        assert_eq!(kinds(&events), ["session.entry", "extension.error"]);
        assert!(s.app_token("big").is_none());
        for i in 1..8 {
            s.apply(&app(&format!("a{i}"), ""), 0);
        }
        let events = s.apply(&app("ninth", ""), 0);
        assert_eq!(kinds(&events), ["session.entry", "extension.error"]);
        assert_eq!(s.snapshot()["apps"].as_object().unwrap().len(), 8);
        let events = s.apply(
            &entry(APP_TYPE, json!({ "appId": "board", "removed": true })),
            0,
        );
        assert_eq!(
            events[1].data,
            json!({ "appId": "board", "removed": true, "kind": "app" })
        );
        assert!(s.app_token("board").is_none());
        let events = s.apply(&app("v2", "").clone(), 0);
        assert_eq!(kinds(&events), ["session.entry", "extension.ui:app"]);
        let unknown = entry(
            APP_TYPE,
            json!({ "version": 2, "appId": "future", "html": "" }),
        );
        assert_eq!(
            kinds(&s.apply(&unknown, 0)),
            ["session.entry", "extension.error"]
        );
    }

    #[test]
    fn status_widgets_and_title_are_kept() {
        let mut s = UiState::new();
        let req = |request: UiRequest| SessionEvent::ExtensionUiRequest {
            id: "r".into(),
            request,
        };
        s.apply(
            &req(UiRequest::SetStatus {
                key: "k".into(),
                text: Some("on".into()),
            }),
            0,
        );
        s.apply(
            &req(UiRequest::SetWidget {
                key: "w".into(),
                lines: Some(vec!["a".into()]),
                placement: Some("belowEditor".into()),
            }),
            0,
        );
        s.apply(&req(UiRequest::SetTitle { title: "T".into() }), 0);
        let snap = s.snapshot();
        assert_eq!(snap["status"], json!({ "k": "on" }));
        assert_eq!(
            snap["widgets"],
            json!({ "w": { "lines": ["a"], "placement": "belowEditor" } })
        );
        assert_eq!(snap["title"], "T");
        let events = s.apply(
            &req(UiRequest::SetStatus {
                key: "k".into(),
                text: None,
            }),
            0,
        );
        assert_eq!(events[0].data, json!({ "key": "k", "kind": "status" }));
        s.apply(
            &req(UiRequest::SetWidget {
                key: "w".into(),
                lines: None,
                placement: None,
            }),
            0,
        );
        assert_eq!(s.snapshot()["status"], json!({}));
        assert_eq!(s.snapshot()["widgets"], json!({}));
        let events = s.apply(
            &req(UiRequest::Notify {
                message: "hi".into(),
                notify_type: Some("warning".into()),
            }),
            0,
        );
        assert_eq!(
            events[0].data,
            json!({ "message": "hi", "notifyType": "warning", "kind": "notify" })
        );
    }

    #[test]
    fn dialogs_are_pending_until_answered_with_deadlines() {
        let mut s = UiState::new();
        let events = s.apply(
            &SessionEvent::ExtensionUiRequest {
                id: "d1".into(),
                request: UiRequest::Form {
                    title: "F".into(),
                    fields: json!([{ "id": "a", "type": "number" }]),
                    timeout: Some(5000),
                },
            },
            1_000,
        );
        assert_eq!(kinds(&events), ["extension.ui:dialog"]);
        let dialog = s.dialog("d1").unwrap();
        assert_eq!(dialog["method"], "form");
        assert_eq!(dialog["deadline"], 6_000);
        assert_eq!(dialog["fields"][0]["type"], "number");
        assert_eq!(s.snapshot()["dialogs"].as_array().unwrap().len(), 1);
        let events = s.apply(
            &SessionEvent::ExtensionUiResponse {
                id: "d1".into(),
                answer: DialogAnswer::cancelled(),
            },
            0,
        );
        assert_eq!(
            events[0].data,
            json!({ "dialogId": "d1", "kind": "dialog.closed" })
        );
        assert!(s.dialog("d1").is_none());
    }

    #[test]
    fn keys_titles_and_widget_lines_are_cut_to_the_limits() {
        let mut s = UiState::new();
        let req = |request: UiRequest| SessionEvent::ExtensionUiRequest {
            id: "r".into(),
            request,
        };
        s.apply(
            &req(UiRequest::SetStatus {
                key: "k".repeat(300),
                text: Some("t".repeat(1000)),
            }),
            0,
        );
        s.apply(
            &req(UiRequest::SetWidget {
                key: "w".into(),
                lines: Some(vec!["l".into(); 500]),
                placement: None,
            }),
            0,
        );
        s.apply(
            &req(UiRequest::SetTitle {
                title: "x".repeat(1000),
            }),
            0,
        );
        let snap = s.snapshot();
        let (key, text) = snap["status"].as_object().unwrap().iter().next().unwrap();
        assert_eq!(
            (key.len(), text.as_str().unwrap().len()),
            (limits::KEY, limits::TITLE)
        );
        assert_eq!(
            snap["widgets"]["w"]["lines"].as_array().unwrap().len(),
            limits::TABLE_ROWS
        );
        assert_eq!(snap["widgets"]["w"]["placement"], "aboveEditor");
        assert_eq!(snap["title"].as_str().unwrap().len(), limits::TITLE);
        let long_app = "a".repeat(300);
        s.apply(
            &entry(APP_TYPE, json!({ "appId": long_app, "html": "" })),
            0,
        );
        assert!(s.app_token(&"a".repeat(limits::KEY)).is_some());
    }

    #[test]
    fn busy_follows_the_agent() {
        let mut s = UiState::new();
        s.apply(&SessionEvent::Agent(json!({ "type": "agent_start" })), 0);
        assert!(s.snapshot()["busy"].as_bool().unwrap());
        s.apply(&SessionEvent::Agent(json!({ "type": "agent_end" })), 0);
        assert!(!s.busy());
    }

    #[test]
    fn restore_rebuilds_panels_and_apps() {
        let mut s = UiState::new();
        s.restore(&[
            json!({ "type": "custom", "customType": UI_TYPE, "data": { "id": "p", "component": "kv", "props": {} } }),
            json!({ "type": "custom", "customType": APP_TYPE, "data": { "appId": "a", "html": "<b>" } }),
        ]);
        assert!(s.snapshot()["panels"].get("p").is_some());
        assert!(s.app_token("a").is_some());
    }
}
