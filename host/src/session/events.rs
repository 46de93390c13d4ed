//! What a session reports to its clients. UI requests use pi's RPC shapes
//! (`extension_ui_request`, docs/rpc.md) so a pi RPC client understands them unchanged.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

/// A UI call of an extension, as pi's RPC mode sends it (`method` plus its fields).
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(tag = "method")]
pub enum UiRequest {
    #[serde(rename = "select")]
    Select {
        title: String,
        options: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timeout: Option<u32>,
    },
    #[serde(rename = "confirm")]
    Confirm {
        title: String,
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        timeout: Option<u32>,
    },
    #[serde(rename = "input")]
    Input {
        title: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        placeholder: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timeout: Option<u32>,
    },
    #[serde(rename = "editor")]
    Editor {
        title: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        prefill: Option<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        timeout: Option<u32>,
    },
    /// PiChamber's structured form (`ctx.ui.form`).
    #[serde(rename = "form")]
    Form {
        title: String,
        fields: Value,
        #[serde(skip_serializing_if = "Option::is_none")]
        timeout: Option<u32>,
    },
    #[serde(rename = "notify")]
    Notify {
        message: String,
        #[serde(rename = "notifyType", skip_serializing_if = "Option::is_none")]
        notify_type: Option<String>,
    },
    #[serde(rename = "setStatus")]
    SetStatus {
        #[serde(rename = "statusKey")]
        key: String,
        #[serde(rename = "statusText", skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    #[serde(rename = "setWidget")]
    SetWidget {
        #[serde(rename = "widgetKey")]
        key: String,
        #[serde(rename = "widgetLines", skip_serializing_if = "Option::is_none")]
        lines: Option<Vec<String>>,
        #[serde(rename = "widgetPlacement", skip_serializing_if = "Option::is_none")]
        placement: Option<String>,
    },
    #[serde(rename = "setTitle")]
    SetTitle { title: String },
    /// `text` is absent when the extension passed no text (pi sends the field out then).
    #[serde(rename = "set_editor_text")]
    SetEditorText {
        #[serde(skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
}

impl UiRequest {
    pub fn is_dialog(&self) -> bool {
        matches!(
            self,
            Self::Select { .. }
                | Self::Confirm { .. }
                | Self::Input { .. }
                | Self::Editor { .. }
                | Self::Form { .. }
        )
    }
    pub fn timeout_ms(&self) -> Option<u32> {
        match self {
            Self::Select { timeout, .. }
            | Self::Confirm { timeout, .. }
            | Self::Input { timeout, .. }
            | Self::Editor { timeout, .. }
            | Self::Form { timeout, .. } => *timeout,
            _ => None,
        }
    }
}

/// The answer to a dialog, in pi's `extension_ui_response` shape.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[serde(untagged)]
pub enum DialogAnswer {
    Value { value: String },
    Confirmed { confirmed: bool },
    Cancelled { cancelled: bool },
}

impl DialogAnswer {
    pub fn cancelled() -> Self {
        Self::Cancelled { cancelled: true }
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum SessionEvent {
    ExtensionUiRequest {
        id: String,
        #[serde(flatten)]
        request: UiRequest,
    },
    /// How a dialog was answered (by the user, a scripted answer, or a timeout).
    ExtensionUiResponse {
        id: String,
        #[serde(flatten)]
        answer: DialogAnswer,
    },
    /// An entry appended to the session (`pi.appendEntry`, session name, labels).
    Entry { entry: Value },
    ToolResult {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        #[serde(rename = "toolName")]
        tool_name: String,
        content: Value,
        details: Value,
        #[serde(rename = "isError")]
        is_error: bool,
    },
    /// The result of dispatching an event (`--event`).
    EventResult { event: String, result: Value },
    /// An extension failed; the session goes on (pi's `extension_error`).
    ExtensionError {
        #[serde(rename = "extensionPath")]
        extension: String,
        event: String,
        error: String,
        /// Where it was thrown (source-mapped frames); pi's RPC event has no stack.
        #[serde(skip_serializing_if = "Option::is_none")]
        stack: Option<String>,
    },
    Log {
        extension: String,
        level: String,
        message: String,
    },
    /// An agent event exactly as pi emits it to its clients (agent_start, turn_start,
    /// message_start/update/end, tool_execution_*, turn_end, agent_end, queue_update): the
    /// value carries its own `type`.
    #[serde(untagged)]
    Agent(Value),
}

/// Where a session's events go (stdout NDJSON, a terminal, the HTTP event stream, tests).
pub type EventSink = Arc<dyn Fn(&SessionEvent) + Send + Sync>;

/// Splits a guest error text ("message" then stack frames, each line "    at ...") into the
/// message and the stack.
pub fn split_stack(text: &str) -> (String, Option<String>) {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if offset > 0
            && line.trim_start().starts_with("at ")
            && line.starts_with(char::is_whitespace)
        {
            let stack = text[offset..].trim_end();
            return (text[..offset].trim_end().to_owned(), Some(stack.to_owned()));
        }
        offset += line.len();
    }
    (text.to_owned(), None)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_stack_is_split_from_the_message() {
        let (message, stack) = split_stack("boom\nsecond line\n    at f (/ext/a.ts:3)\n    at g\n");
        assert_eq!(message, "boom\nsecond line");
        assert_eq!(stack.as_deref(), Some("    at f (/ext/a.ts:3)\n    at g"));
        assert_eq!(
            split_stack("at the start\nno frames"),
            ("at the start\nno frames".into(), None)
        );
        assert_eq!(
            split_stack("    at first line"),
            ("    at first line".into(), None)
        );
    }

    use super::*;

    #[test]
    fn agent_events_serialise_as_pi_emits_them() {
        let event = SessionEvent::Agent(serde_json::json!({ "type": "turn_start" }));
        assert_eq!(
            serde_json::to_string(&event).unwrap(),
            r#"{"type":"turn_start"}"#
        );
        let event = SessionEvent::Log {
            extension: "x".into(),
            level: "info".into(),
            message: "m".into(),
        };
        assert!(
            serde_json::to_string(&event)
                .unwrap()
                .starts_with(r#"{"type":"log""#)
        );
    }
}
