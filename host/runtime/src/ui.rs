//! What an extension asks of the user interface, in pi's RPC shapes (`extension_ui_request`
//! and `extension_ui_response`, docs/rpc.md), so a pi RPC client understands them unchanged.
//! The runtime builds these from what crosses the WIT boundary; the embedder shows them.

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
