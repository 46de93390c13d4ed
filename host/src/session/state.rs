//! The state one session keeps for its extensions: entries (pi's session-entry shapes),
//! registrations, flag values, UI state, and the event-bus queue. Issue-3's session store
//! persists the entries; here they live in memory.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::{Value, json};

use super::dialogs::DialogResponder;
use super::events::{EventSink, SessionEvent};
use crate::runtime::wit::{CommandDefinition, ToolDefinition};

/// Facts and services shared by the session and all of its extension instances.
pub struct SessionShared {
    pub id: String,
    pub cwd: String,
    pub has_ui: bool,
    /// What `ctx.mode` reports: pichamber implements pi's RPC-mode semantics.
    pub mode: String,
    pub sink: EventSink,
    pub dialogs: Arc<dyn DialogResponder>,
    pub state: Mutex<SessionState>,
}

impl SessionShared {
    pub fn emit(&self, event: SessionEvent) {
        (self.sink)(&event);
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisteredTool {
    /// Index of the extension (load order) that registered it.
    #[serde(skip)]
    pub extension: usize,
    pub extension_name: String,
    pub name: String,
    pub label: String,
    pub description: String,
    pub parameters: Value,
    pub prompt_snippet: Option<String>,
    pub prompt_guidelines: Vec<String>,
    pub has_prepare_arguments: bool,
    pub execution_mode: Option<String>,
}

impl RegisteredTool {
    pub fn from_wit(
        extension: usize,
        extension_name: &str,
        def: ToolDefinition,
        parameters: Value,
    ) -> Self {
        Self {
            extension,
            extension_name: extension_name.to_owned(),
            name: def.name,
            label: def.label,
            description: def.description,
            parameters,
            prompt_snippet: def.prompt_snippet,
            prompt_guidelines: def.prompt_guidelines,
            has_prepare_arguments: def.has_prepare_arguments,
            execution_mode: def.execution_mode,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisteredCommand {
    #[serde(skip)]
    pub extension: usize,
    pub extension_name: String,
    pub name: String,
    pub description: Option<String>,
    pub has_argument_completions: bool,
}

impl RegisteredCommand {
    pub fn from_wit(extension: usize, extension_name: &str, def: CommandDefinition) -> Self {
        Self {
            extension,
            extension_name: extension_name.to_owned(),
            name: def.name,
            description: def.description,
            has_argument_completions: def.has_argument_completions,
        }
    }
}

/// Everything else an extension registered (recorded; TUI-only ones stay inert).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OtherRegistrations {
    pub events: Vec<String>,
    pub flags: Vec<Value>,
    pub shortcuts: Vec<Value>,
    pub message_renderers: Vec<String>,
    pub providers: Vec<Value>,
}

#[derive(Default)]
pub struct SessionState {
    pub name: Option<String>,
    pub entries: Vec<Value>,
    pub leaf: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub flag_values: BTreeMap<String, Value>,
    pub thinking_level: String,
    pub model: Option<Value>,
    pub tools: Vec<RegisteredTool>,
    /// `None` until an extension calls setActiveTools: all tools are active.
    pub active_tools: Option<Vec<String>>,
    pub commands: Vec<RegisteredCommand>,
    /// Per extension (load order).
    pub registrations: Vec<OtherRegistrations>,
    pub statuses: BTreeMap<String, String>,
    pub widgets: BTreeMap<String, Vec<String>>,
    pub title: Option<String>,
    pub editor_text: String,
    /// Event-bus messages waiting for delivery to the other extensions: (from, channel, data).
    pub bus: VecDeque<(usize, String, String)>,
    /// An extension called ctx.shutdown().
    pub shutdown_requested: bool,
}

impl SessionState {
    pub fn new() -> Self {
        Self {
            thinking_level: "off".into(),
            ..Self::default()
        }
    }

    /// Appends an entry in pi's session-entry shape and returns it.
    pub fn append(&mut self, kind: &str, fields: Value) -> Value {
        let id = new_entry_id();
        let mut entry = json!({
            "type": kind,
            "id": id,
            "parentId": self.leaf,
            "timestamp": humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        });
        if let (Value::Object(map), Value::Object(extra)) = (&mut entry, fields) {
            map.extend(extra);
        }
        self.leaf = Some(id);
        self.entries.push(entry.clone());
        entry
    }

    pub fn registrations_mut(&mut self, extension: usize) -> &mut OtherRegistrations {
        if self.registrations.len() <= extension {
            self.registrations
                .resize_with(extension + 1, Default::default);
        }
        &mut self.registrations[extension]
    }

    pub fn active_tool_names(&self) -> Vec<String> {
        match &self.active_tools {
            Some(names) => names.clone(),
            None => self.tools.iter().map(|t| t.name.clone()).collect(),
        }
    }
}

/// pi's entry ids: 8 hex digits.
pub fn new_entry_id() -> String {
    uuid::Uuid::new_v4().simple().to_string()[..8].to_owned()
}
