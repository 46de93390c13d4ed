//! One session: its isolated extension instances in load order, and the folds that run pi's
//! events across them with pi 0.73.1's semantics (core/extensions/runner.js): each extension
//! runs its own handler chain in the guest and hands back the updated event, which the next
//! extension receives.

pub mod dialogs;
pub mod events;
pub mod state;
pub mod store;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

pub use dialogs::{DialogResponder, NoDialogs, ScriptedAnswers, TerminalDialogs};
pub use events::{EventSink, SessionEvent, UiRequest};
pub use state::{SessionShared, SessionState};

use crate::artifact::Artifact;
use crate::runtime::{CallError, ExtensionInstance, InstanceOptions, Runtime};

/// How a session is set up.
pub struct SessionConfig {
    pub cwd: String,
    pub has_ui: bool,
    pub dialogs: Arc<dyn DialogResponder>,
    pub sink: EventSink,
    pub instance: InstanceOptions,
    /// `--flag name=value` values for extension flags.
    pub flags: Vec<(String, Value)>,
}

/// What a tool call produced.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutcome {
    pub tool_call_id: String,
    pub content: Value,
    pub details: Value,
    pub is_error: bool,
    pub terminate: bool,
}

pub struct Session {
    pub shared: Arc<SessionShared>,
    runtime: Arc<Runtime>,
    options: InstanceOptions,
    extensions: Vec<ExtensionInstance>,
    next_call: u64,
}

/// Upper bound on event-bus deliveries after one step (stops two extensions ping-ponging).
const MAX_BUS_DELIVERIES: usize = 1000;

impl Session {
    pub fn new(runtime: Arc<Runtime>, config: SessionConfig) -> Self {
        let mut state = SessionState::new();
        for (name, value) in config.flags {
            state.flag_values.insert(name, value);
        }
        let shared = Arc::new(SessionShared {
            id: uuid::Uuid::new_v4().to_string(),
            cwd: config.cwd,
            has_ui: config.has_ui,
            mode: "rpc".into(),
            sink: config.sink,
            dialogs: config.dialogs,
            state: Mutex::new(state),
        });
        Self {
            shared,
            runtime,
            options: config.instance,
            extensions: Vec::new(),
            next_call: 0,
        }
    }

    fn error(&self, extension: &str, event: &str, error: impl std::fmt::Display) {
        self.shared.emit(SessionEvent::ExtensionError {
            extension: extension.to_owned(),
            event: event.to_owned(),
            error: error.to_string(),
        });
    }

    /// Loads one extension. A failure is reported as an error entry and the session goes on
    /// without it; the error is returned too.
    pub async fn load(&mut self, artifact: &Artifact) -> Result<(), String> {
        let index = self.extensions.len();
        let prepared = match self.runtime.prepare(artifact) {
            Ok(p) => p,
            Err(e) => {
                let message = format!("cannot load: {e:#}");
                self.error(&artifact.manifest.name, "load", &message);
                return Err(message);
            }
        };
        match ExtensionInstance::start(
            &prepared,
            artifact,
            index,
            self.shared.clone(),
            &self.options,
        )
        .await
        {
            Ok(instance) => {
                self.extensions.push(instance);
                self.flush_bus().await;
                Ok(())
            }
            Err(e) => {
                // Registrations a failed factory made before throwing are dropped with it.
                let mut state = self.shared.state.lock().unwrap();
                state.tools.retain(|t| t.extension != index);
                state.commands.retain(|c| c.extension != index);
                if let Some(r) = state.registrations.get_mut(index) {
                    *r = Default::default();
                }
                drop(state);
                let message = format!("failed to load: {e}");
                self.error(&artifact.manifest.name, "load", &message);
                // Keep indices stable: a placeholder slot is not needed because later
                // extensions take the next index only when they load.
                Err(message)
            }
        }
    }

    pub fn extension_names(&self) -> Vec<String> {
        self.extensions.iter().map(|e| e.name.clone()).collect()
    }

    /// The ctx snapshot every call receives.
    fn ctx(&self) -> Value {
        let state = self.shared.state.lock().unwrap();
        json!({ "cwd": self.shared.cwd, "hasUI": self.shared.has_ui, "model": state.model })
    }

    fn subscribed(&self, index: usize, event: &str) -> bool {
        let state = self.shared.state.lock().unwrap();
        state
            .registrations
            .get(index)
            .is_some_and(|r| r.events.iter().any(|e| e == event))
    }

    /// Emits an event to every subscribed extension in load order and returns the combined
    /// result (`null` when there is none). A `tool_call` handler error is returned as `Err`:
    /// a failing gate must not let the call through.
    pub async fn emit(&mut self, name: &str, event: Value) -> Result<Value, String> {
        self.emit_with_event(name, event)
            .await
            .map(|(result, _)| result)
    }

    /// Like [`Session::emit`], also returning the event as the last handler left it (a
    /// `tool_call` handler may rewrite `event.input`, and the tool must run with that).
    pub async fn emit_with_event(
        &mut self,
        name: &str,
        event: Value,
    ) -> Result<(Value, Value), String> {
        let ctx = self.ctx();
        let original = event.clone();
        let mut event = event;
        let mut result = Value::Null;
        let mut modified = false;
        let mut injected_messages = Vec::new();
        let mut discovered = json!({ "skillPaths": [], "promptPaths": [], "themePaths": [] });
        for i in 0..self.extensions.len() {
            if !self.subscribed(i, name) {
                continue;
            }
            let extension_name = self.extensions[i].name.clone();
            let outcome = self.extensions[i].dispatch_event(name, &event, &ctx).await;
            let dispatched = match outcome {
                Ok(d) => d,
                Err(e) => {
                    self.error(&extension_name, name, &e);
                    if name == "tool_call" {
                        return Err(e.to_string());
                    }
                    continue;
                }
            };
            if let Ok(updated) = serde_json::from_str::<Value>(&dispatched.event) {
                event = updated;
            }
            let chain: Option<Value> = dispatched
                .chain_result
                .and_then(|r| serde_json::from_str(&r).ok());
            match name {
                "tool_call" => {
                    if let Some(c) = chain.filter(|c| !c.is_null()) {
                        let block = c["block"] == json!(true);
                        result = c;
                        if block {
                            break;
                        }
                    }
                }
                "tool_result" | "message_end" | "context" | "before_provider_request" => {
                    modified |= chain.is_some_and(|c| !c.is_null());
                }
                "before_agent_start" => {
                    if let Some(c) = chain {
                        if let Some(messages) = c["messages"].as_array() {
                            injected_messages.extend(messages.iter().cloned());
                        }
                        modified |= !c["systemPrompt"].is_null();
                    }
                }
                "input" => {
                    if let Some(c) = chain
                        && c["action"] == json!("handled")
                    {
                        self.flush_bus().await;
                        return Ok((c, event));
                    }
                }
                "user_bash" => {
                    if let Some(c) = chain.filter(|c| !c.is_null()) {
                        self.flush_bus().await;
                        return Ok((c, event));
                    }
                }
                "resources_discover" => {
                    if let Some(c) = chain {
                        for key in ["skillPaths", "promptPaths", "themePaths"] {
                            for path in c[key].as_array().into_iter().flatten() {
                                discovered[key]
                                    .as_array_mut()
                                    .unwrap()
                                    .push(json!({ "path": path, "extensionPath": extension_name }));
                            }
                        }
                    }
                }
                _ if name.starts_with("session_before_") => {
                    if let Some(c) = chain.filter(|c| !c.is_null()) {
                        let cancel = c["cancel"] == json!(true);
                        result = c;
                        if cancel {
                            break;
                        }
                    }
                }
                _ => {}
            }
        }
        self.flush_bus().await;
        let result = match name {
            "tool_result" if modified => {
                json!({ "content": event["content"], "details": event["details"], "isError": event["isError"] })
            }
            "message_end" if modified => json!({ "message": event["message"] }),
            "context" => json!({ "messages": event["messages"] }),
            "before_provider_request" => event["payload"].clone(),
            "before_agent_start" if modified || !injected_messages.is_empty() => json!({
                "messages": if injected_messages.is_empty() { Value::Null } else { Value::Array(injected_messages) },
                "systemPrompt": if modified { event["systemPrompt"].clone() } else { Value::Null },
            }),
            "input" => {
                if event["text"] != original["text"] || event["images"] != original["images"] {
                    json!({ "action": "transform", "text": event["text"], "images": event["images"] })
                } else {
                    json!({ "action": "continue" })
                }
            }
            "resources_discover" => discovered,
            _ => result,
        };
        Ok((result, event))
    }

    fn tool_owner(&self, tool: &str) -> Option<(usize, bool)> {
        let state = self.shared.state.lock().unwrap();
        state
            .tools
            .iter()
            .find(|t| t.name == tool)
            .map(|t| (t.extension, t.has_prepare_arguments))
    }

    /// Runs a tool the way pi's agent loop does: prepareArguments, the `tool_call` gate, the
    /// tool itself, then the `tool_result` middleware.
    pub async fn execute_tool(&mut self, tool: &str, args: Value) -> ToolOutcome {
        self.next_call += 1;
        let tool_call_id = format!("call_{}", self.next_call);
        let error = |text: String| ToolOutcome {
            tool_call_id: tool_call_id.clone(),
            content: json!([{ "type": "text", "text": text }]),
            details: json!({}),
            is_error: true,
            terminate: false,
        };
        let Some((owner, has_prepare)) = self.tool_owner(tool) else {
            let known: Vec<String> = self
                .shared
                .state
                .lock()
                .unwrap()
                .tools
                .iter()
                .map(|t| t.name.clone())
                .collect();
            let outcome = error(format!(
                "Tool {tool} not found (registered tools: {})",
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            ));
            self.report_tool(tool, &outcome);
            return outcome;
        };
        let mut args = args;
        if has_prepare {
            match self.extensions[owner].prepare_arguments(tool, &args).await {
                Ok(prepared) => args = serde_json::from_str(&prepared).unwrap_or(args),
                Err(e) => {
                    let outcome = error(e.to_string());
                    self.report_tool(tool, &outcome);
                    return outcome;
                }
            }
        }
        let gate = self
            .emit_with_event("tool_call", json!({ "type": "tool_call", "toolName": tool, "toolCallId": tool_call_id, "input": args }))
            .await;
        match gate {
            Err(e) => {
                let outcome = error(e);
                self.report_tool(tool, &outcome);
                return outcome;
            }
            Ok((r, _)) if r["block"] == json!(true) => {
                let reason = r["reason"]
                    .as_str()
                    .filter(|s| !s.is_empty())
                    .unwrap_or("Tool execution was blocked");
                let outcome = error(reason.to_owned());
                self.report_tool(tool, &outcome);
                return outcome;
            }
            // Handlers may have rewritten the input; the tool runs with what they left.
            Ok((_, event)) => {
                if let Some(input) = event.get("input") {
                    args = input.clone();
                }
            }
        }
        let ctx = self.ctx();
        let executed = self.extensions[owner]
            .execute_tool(tool, &tool_call_id, &args, &ctx)
            .await;
        self.flush_bus().await;
        let mut outcome = match executed {
            Ok(r) => ToolOutcome {
                tool_call_id: tool_call_id.clone(),
                content: serde_json::from_str(&r.content).unwrap_or(json!([])),
                details: r
                    .details
                    .and_then(|d| serde_json::from_str(&d).ok())
                    .unwrap_or(Value::Null),
                is_error: r.is_error,
                terminate: r.terminate,
            },
            Err(e) => {
                let name = self.extensions[owner].name.clone();
                self.error(&name, &format!("tool:{tool}"), &e);
                error(e.to_string())
            }
        };
        let patched = self
            .emit(
                "tool_result",
                json!({
                    "type": "tool_result", "toolName": tool, "toolCallId": tool_call_id, "input": args,
                    "content": outcome.content, "details": outcome.details, "isError": outcome.is_error,
                }),
            )
            .await;
        if let Some(p) = patched.ok().filter(|p| !p.is_null()) {
            if !p["content"].is_null() {
                outcome.content = p["content"].clone();
            }
            if !p["details"].is_null() {
                outcome.details = p["details"].clone();
            }
            if let Some(e) = p["isError"].as_bool() {
                outcome.is_error = e;
            }
        }
        self.report_tool(tool, &outcome);
        outcome
    }

    fn report_tool(&self, tool: &str, outcome: &ToolOutcome) {
        self.shared.emit(SessionEvent::ToolResult {
            tool_call_id: outcome.tool_call_id.clone(),
            tool_name: tool.to_owned(),
            content: outcome.content.clone(),
            details: outcome.details.clone(),
            is_error: outcome.is_error,
        });
    }

    /// Runs `/name args`. Unknown commands and handler failures are errors.
    pub async fn run_command(&mut self, line: &str) -> Result<(), String> {
        let line = line.trim();
        let text = line
            .strip_prefix('/')
            .ok_or_else(|| format!("'{line}' is not a command: commands start with '/'"))?;
        let (name, args) = match text.split_once(char::is_whitespace) {
            Some((n, a)) => (n, a.trim_start()),
            None => (text, ""),
        };
        let owner = {
            let state = self.shared.state.lock().unwrap();
            state
                .commands
                .iter()
                .find(|c| c.name == name)
                .map(|c| c.extension)
        };
        let Some(owner) = owner else {
            let known: Vec<String> = self
                .shared
                .state
                .lock()
                .unwrap()
                .commands
                .iter()
                .map(|c| format!("/{}", c.name))
                .collect();
            return Err(format!(
                "unknown command /{name} (registered: {})",
                if known.is_empty() {
                    "none".into()
                } else {
                    known.join(", ")
                }
            ));
        };
        let ctx = self.ctx();
        let result = self.extensions[owner].run_command(name, args, &ctx).await;
        self.flush_bus().await;
        result.map_err(|e| {
            let extension = self.extensions[owner].name.clone();
            let message = e.to_string();
            self.error(&extension, &format!("command:/{name}"), &message);
            message
        })
    }

    pub async fn complete_arguments(
        &mut self,
        command: &str,
        prefix: &str,
    ) -> Result<Option<Value>, String> {
        let owner = {
            let state = self.shared.state.lock().unwrap();
            state
                .commands
                .iter()
                .find(|c| c.name == command)
                .map(|c| c.extension)
        };
        let owner = owner.ok_or_else(|| format!("unknown command /{command}"))?;
        let items = self.extensions[owner]
            .complete_arguments(command, prefix)
            .await
            .map_err(|e| e.to_string())?;
        Ok(items.map(|items| {
            Value::Array(
                items
                    .into_iter()
                    .map(|i| json!({ "value": i.value, "label": i.label, "description": i.description }))
                    .collect(),
            )
        }))
    }

    /// Delivers queued event-bus messages to every extension but the sender.
    async fn flush_bus(&mut self) {
        for _ in 0..MAX_BUS_DELIVERIES {
            let next = self.shared.state.lock().unwrap().bus.pop_front();
            let Some((from, channel, data)) = next else {
                return;
            };
            for i in 0..self.extensions.len() {
                if i == from || self.extensions[i].is_broken() {
                    continue;
                }
                if let Err(e) = self.extensions[i].deliver_bus_event(&channel, &data).await {
                    let name = self.extensions[i].name.clone();
                    self.error(&name, &format!("events:{channel}"), &e);
                }
            }
        }
        self.shared.state.lock().unwrap().bus.clear();
    }

    /// Gives every extension a chance to run work it left behind (due timers, completed
    /// operations) and returns the time until the earliest next timer.
    pub async fn poll(&mut self) -> Option<std::time::Duration> {
        let mut next: Option<u64> = None;
        for i in 0..self.extensions.len() {
            if self.extensions[i].is_broken() {
                continue;
            }
            match self.extensions[i].poll().await {
                Ok(Some(ms)) => next = Some(next.map_or(ms, |n| n.min(ms))),
                Ok(None) => {}
                Err(e) => {
                    let name = self.extensions[i].name.clone();
                    self.error(&name, "timer", &e);
                }
            }
        }
        self.flush_bus().await;
        next.map(std::time::Duration::from_millis)
    }

    pub fn shutdown_requested(&self) -> bool {
        self.shared.state.lock().unwrap().shutdown_requested
    }

    /// Emits `session_shutdown` and lets every instance finish.
    pub async fn shutdown(&mut self) {
        let _ = self
            .emit("session_shutdown", json!({ "type": "session_shutdown" }))
            .await;
        for extension in &mut self.extensions {
            if !extension.is_broken()
                && let Err(e) = extension.shutdown().await
                && !matches!(e, CallError::Broken(_))
            {
                tracing::debug!("shutdown of {}: {e}", extension.name);
            }
        }
    }
}
