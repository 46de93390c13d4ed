//! What a session reports to its clients. UI requests use pi's RPC shapes
//! (`extension_ui_request`, docs/rpc.md) so a pi RPC client understands them unchanged.

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

pub use pichamber_runtime::split_stack;
pub use pichamber_runtime::ui::{DialogAnswer, UiRequest};

/// The name under which the host reports its own errors (a prompt refused for want of a
/// model, a session file it could not write): `ExtensionError`'s extension, no extension's.
pub const RUNTIME: &str = "<runtime>";

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
    /// An entry pi 1.6.0 announces to clients as `entry_appended` (what appendEntry, a
    /// virtual-model router or a turn boundary recorded); otherwise the same as `Entry`, and
    /// so reported as one in pichamber's own event stream.
    #[serde(rename = "entry")]
    EntryAppended { entry: Value },
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

#[cfg(test)]
mod tests {
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
