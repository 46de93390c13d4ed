//! pi's one-shot modes: `pi --print` writes the final assistant text, `pi --mode json` the
//! session header and then every session event as a JSONL record (docs/json.md of pi 1.6.0);
//! both run the prompts one after another and exit. There is no UI (`ctx.hasUI` is false,
//! `ctx.mode` is "print" or "json"), and extension errors go to stderr as pi prints them.

use std::sync::Arc;

use serde_json::{Value, json};

use pichamber_session::{EventSink, PiVersion, PromptOptions, Session, SessionEvent};

use crate::{Output, note, wire};

/// What reaches stdout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OneShot {
    /// `--print`: the final assistant text.
    Text,
    /// `--mode json`: the header, then the events.
    Json,
}

impl OneShot {
    /// `ctx.mode` in this mode.
    pub fn ctx_mode(self) -> &'static str {
        match self {
            OneShot::Text => "print",
            OneShot::Json => "json",
        }
    }
}

/// The session's events in a one-shot mode: JSON mode writes the events RPC mode writes
/// (pi's `toJsonEvent` is RPC's wire form), without UI requests, which need a UI.
pub fn event_sink(mode: OneShot, output: Arc<Output>, pi: PiVersion) -> EventSink {
    Arc::new(move |event: &SessionEvent| match event {
        SessionEvent::Agent(value) if mode == OneShot::Json => output.line(&if pi.is_1_6() {
            wire::for_1_6(value)
        } else {
            value.clone()
        }),
        SessionEvent::EntryAppended { entry } if mode == OneShot::Json && pi.is_1_6() => {
            output.line(&json!({ "type": "entry_appended", "entry": entry }))
        }
        SessionEvent::ExtensionError {
            extension, error, ..
        } => note(&format!("Extension error ({extension}): {error}")),
        SessionEvent::Log {
            extension,
            level,
            message,
        } => note(&format!("[{extension}] {level}: {message}")),
        _ => {}
    })
}

/// Runs `prompts` in order (commands and templates expanded, as typed ones are) and returns
/// the exit code pi would: 1 when the last answer failed, was aborted or was cut off.
pub async fn run(
    mut session: Session,
    mode: OneShot,
    prompts: Vec<(String, Vec<serde_json::Value>)>,
    output: Arc<Output>,
) -> u8 {
    if mode == OneShot::Json {
        let header = session
            .shared
            .state
            .lock()
            .unwrap()
            .store
            .get_header()
            .clone();
        output.line(&header);
    }
    session.start().await;
    let mut code = 0;
    for (prompt, images) in prompts {
        let options = PromptOptions {
            images,
            ..PromptOptions::default()
        };
        if let Err(e) = session.prompt(&prompt, options).await {
            note(&e);
            code = 1;
            break;
        }
        if session.shutdown_requested() {
            break;
        }
    }
    if code == 0 && mode == OneShot::Text {
        let last = session
            .shared
            .state
            .lock()
            .unwrap()
            .agent
            .messages
            .last()
            .cloned();
        code = print_answer(last.as_ref(), &output);
    }
    session.shutdown().await;
    code
}

/// The last message, when it is the assistant's: its text on stdout, or why there is none on
/// stderr (pi's print mode).
fn print_answer(last: Option<&Value>, output: &Output) -> u8 {
    let Some(message) = last.filter(|m| m["role"] == "assistant") else {
        return 0;
    };
    if let Some(reason @ ("error" | "aborted")) = message["stopReason"].as_str() {
        let text = message["errorMessage"]
            .as_str()
            .filter(|t| !t.is_empty())
            .map_or_else(|| format!("Request {reason}"), str::to_owned);
        note(&text);
        return 1;
    }
    for block in message["content"].as_array().into_iter().flatten() {
        if block["type"] == "text" {
            output.text(&format!("{}\n", block["text"].as_str().unwrap_or_default()));
        }
    }
    if message["stopReason"] == "length" {
        eprintln!("Response was truncated: the model reached its output token limit.");
        return 1;
    }
    0
}
