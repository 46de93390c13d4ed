//! Sessions through the library: a sink that records what the session reports (console lines
//! that are JSON as that JSON) and a configuration with nothing granted, no model and no store.

use std::sync::{Arc, Mutex};

use pichamber_artifact::{Artifact, bundle};
use pichamber_runtime::InstanceOptions;
use pichamber_session::{AgentSettings, EventSink, NoDialogs, SessionConfig, SessionEvent};
use serde_json::{Value, json};

/// `source` written to `dir/file` and built.
pub fn artifact(dir: &std::path::Path, file: &str, source: &str) -> Artifact {
    let path = dir.join(file);
    std::fs::write(&path, source).unwrap();
    let bundle = bundle::bundle(&path).unwrap_or_else(|e| panic!("{e}"));
    Artifact::from_bundle(&bundle)
}

/// A sink, and what it has received.
pub fn recording_sink() -> (EventSink, Arc<Mutex<Vec<Value>>>) {
    let events = Arc::new(Mutex::new(Vec::new()));
    let seen = events.clone();
    let sink: EventSink = Arc::new(move |e: &SessionEvent| {
        let value = match e {
            SessionEvent::Log { message, .. } => {
                serde_json::from_str(message).unwrap_or(json!({ "log": message }))
            }
            other => serde_json::to_value(other).unwrap(),
        };
        seen.lock().unwrap().push(value);
    });
    (sink, events)
}

/// A session in `cwd` reporting to `sink`, following the default pi release in RPC mode.
pub fn config(cwd: &std::path::Path, sink: EventSink) -> SessionConfig {
    SessionConfig {
        cwd: cwd.to_string_lossy().into_owned(),
        has_ui: false,
        dialogs: Arc::new(NoDialogs),
        sink,
        instance: InstanceOptions::default(),
        flags: vec![],
        model: None,
        catalog: Default::default(),
        agent: AgentSettings::default(),
        store: None,
        pi: pichamber_session::PiVersion::default(),
        mode: "rpc",
        project_trusted: true,
        builtin_extensions: Vec::new(),
    }
}
