//! `pichamber rpc`: pi's RPC protocol (docs/rpc.md) on stdin/stdout, so a program that
//! drives `pi --mode rpc` can drive pichamber unchanged; and pi's one-shot print and JSON
//! modes ([`once`]).
//!
//! Framing is strict JSONL: records end at LF only (a trailing CR is dropped); U+2028 and
//! U+2029 inside strings are content. Each command gets one `response` (`id` echoed);
//! events are pi's agent events, `extension_ui_request`s and `extension_error`s.
//!
//! Two halves run side by side: the reader answers what only needs the shared state (state
//! queries, steer / follow_up, abort, dialog answers) at once, even while a prompt runs;
//! commands that change the session (prompt, new_session, fork, compact, bash ...) go to the
//! worker, which owns the session. A prompt that arrives while a run streams is queued into
//! that run, as pi queues it.
//!
//! A transport over the session crate: nothing depends on it but the `pichamber` binary.

mod commands;
mod dialogs;
pub mod once;
mod wire;

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::mpsc;

pub use dialogs::RpcDialogs;

/// A line on stderr. What an extension (or a model) says is untrusted: its control characters
/// are made visible (`pichamber_session::terminal`), so no escape sequence in it reaches the
/// operator's terminal.
pub(crate) fn note(text: &str) {
    eprintln!("{}", pichamber_session::terminal::escape(text));
}

use pichamber_session::{EventSink, Idle, PiVersion, Session, SessionEvent};

/// Where protocol lines go; one line is written whole.
pub struct Output {
    out: Mutex<Box<dyn Write + Send>>,
}

impl Output {
    pub fn stdout() -> Self {
        Self::new(Box::new(std::io::stdout()))
    }

    pub fn new(out: Box<dyn Write + Send>) -> Self {
        Self {
            out: Mutex::new(out),
        }
    }

    pub fn line(&self, value: &Value) {
        let mut text = serde_json::to_string(value).unwrap_or_default();
        text.push('\n');
        self.text(&text);
    }

    /// Text as it is (print mode's answer).
    pub fn text(&self, text: &str) {
        let mut out = self.out.lock().unwrap();
        let _ = out.write_all(text.as_bytes());
        let _ = out.flush();
    }
}

/// pi's response record: `{id?, type: "response", command, success, data? | error}`.
pub fn response(id: &Value, command: &str, outcome: Result<Option<Value>, String>) -> Value {
    let mut out = serde_json::Map::new();
    if !id.is_null() {
        out.insert("id".into(), id.clone());
    }
    out.insert("type".into(), json!("response"));
    if !command.is_empty() {
        out.insert("command".into(), json!(command));
    }
    match outcome {
        Ok(data) => {
            out.insert("success".into(), json!(true));
            if let Some(data) = data {
                out.insert("data".into(), data);
            }
        }
        Err(error) => {
            out.insert("success".into(), json!(false));
            out.insert("error".into(), json!(error));
        }
    }
    Value::Object(out)
}

/// The session's events as `pi`'s RPC mode writes them. Extensions' console output goes to
/// stderr (stdout belongs to the protocol); pichamber's own entry and dialog-answer events are
/// not part of pi's protocol and are left out.
pub fn event_sink(output: Arc<Output>, pi: PiVersion) -> EventSink {
    Arc::new(move |event: &SessionEvent| match event {
        SessionEvent::Agent(value) if pi.is_1_6() => output.line(&wire::for_1_6(value)),
        SessionEvent::Agent(value) => output.line(value),
        // pi 1.6.0 tells clients of what an extension's appendEntry recorded.
        SessionEvent::EntryAppended { entry } if pi.is_1_6() => {
            output.line(&json!({ "type": "entry_appended", "entry": entry }))
        }
        SessionEvent::ExtensionUiRequest { .. } => {
            output.line(&serde_json::to_value(event).unwrap_or_default())
        }
        SessionEvent::ExtensionError {
            extension,
            event,
            error,
            stack,
        } => {
            // pi's extension_error carries the message only; the stack goes to stderr.
            if let Some(stack) = stack {
                note(&format!("[{extension}] {event}: {error}\n{stack}"));
            }
            // pi reports a failing command under the command's name, not its extension's.
            let (extension, event) = match event.strip_prefix("command:/") {
                Some(name) => (format!("command:{name}"), "command"),
                None => (extension.clone(), event.as_str()),
            };
            output.line(&json!({
                "type": "extension_error", "extensionPath": extension, "event": event, "error": error,
            }))
        }
        SessionEvent::Log {
            extension,
            level,
            message,
        } => note(&format!("[{extension}] {level}: {message}")),
        _ => {}
    })
}

/// Work for the side that owns the session.
enum Work {
    /// A command that changes the session: (id, command).
    Command(Value, Value),
    /// Queued prompts are waiting.
    Wake,
}

/// Serves the protocol until the input ends (or an extension asks to shut down), then
/// shuts the session down. Work already accepted is finished first.
pub async fn serve(
    session: Session,
    dialogs: Arc<RpcDialogs>,
    output: Arc<Output>,
    input: impl AsyncRead + Unpin,
) {
    let shared = session.shared.clone();
    let (work, mut queue) = mpsc::unbounded_channel::<Work>();
    let reader = {
        let output = output.clone();
        async move {
            let mut lines = BufReader::new(input);
            let mut buffer = Vec::new();
            loop {
                buffer.clear();
                match lines.read_until(b'\n', &mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
                if buffer.last() == Some(&b'\n') {
                    buffer.pop();
                }
                if buffer.last() == Some(&b'\r') {
                    buffer.pop();
                }
                let line = String::from_utf8_lossy(&buffer);
                if line.trim().is_empty() {
                    continue;
                }
                commands::handle_line(&line, &shared, &dialogs, &output, &work);
            }
            drop(work);
        }
    };
    let worker = {
        let output = output.clone();
        async move {
            let mut session = session;
            loop {
                // Extension timers due while idle run too, and what their programs sent.
                let item = match session.idle(&mut queue).await {
                    Idle::Work(item) => Some(item),
                    Idle::Closed => None,
                    Idle::Poll => continue,
                };
                match item {
                    Some(Work::Command(id, command)) => {
                        let kind = command["type"].as_str().unwrap_or_default().to_owned();
                        let outcome = commands::run_session_command(&mut session, &command).await;
                        output.line(&response(&id, &kind, outcome));
                    }
                    Some(Work::Wake) => {}
                    None => break,
                }
                session.run_requests().await;
                if session.shutdown_requested() {
                    break;
                }
            }
            session.shutdown().await;
        }
    };
    // The input ending stops reading, not the work already accepted; the worker ending (an
    // extension called ctx.shutdown()) ends everything.
    tokio::pin!(reader, worker);
    tokio::select! {
        _ = &mut worker => {}
        _ = &mut reader => worker.await,
    }
}
