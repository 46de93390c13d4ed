//! The `host` interface: what an extension may ask of its session. Every value from the guest
//! is untrusted: sizes are capped, names checked, JSON parsed before use. A value that breaks a
//! rule is refused with an error the extension sees as an ordinary JS exception.

use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::{Value, json};
use wasmtime::Result;

use super::instance::ExtensionState;
use super::pichamber::extension::host::Host;
use super::pichamber::extension::types;
use super::wit::{
    Completion, Dialog, DialogAnswer as WitAnswer, FlagType, LogLevel, NotifyKind, Operation,
    Outcome,
};
use crate::session::events::{DialogAnswer, SessionEvent, UiRequest};
use crate::session::state::{RegisteredCommand, RegisteredTool};

/// Largest JSON value accepted from a guest in one call.
pub const MAX_JSON_BYTES: usize = 4 << 20;
/// Longest console line kept.
pub const MAX_LOG_BYTES: usize = 16 << 10;
/// Longest name (tool, command, flag, entry type, status key).
pub const MAX_NAME_BYTES: usize = 128;
/// Most entries one instance may hold in the session in memory.
pub const MAX_ENTRIES: usize = 100_000;

impl types::Host for ExtensionState {}

fn check_name(kind: &str, name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "{kind} name must be 1..={MAX_NAME_BYTES} bytes, got {}",
            name.len()
        ));
    }
    if name.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(format!(
            "{kind} name {name:?} must not contain spaces or control characters"
        ));
    }
    Ok(())
}

fn parse_json(what: &str, text: &str) -> Result<Value, String> {
    if text.len() > MAX_JSON_BYTES {
        return Err(format!(
            "{what} is {} bytes; the limit is {MAX_JSON_BYTES}",
            text.len()
        ));
    }
    serde_json::from_str(text).map_err(|e| format!("{what} is not valid JSON: {e}"))
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [truncated {} bytes]", &text[..end], text.len() - end)
}

impl ExtensionState {
    fn ui_event(&self, request: UiRequest) {
        self.session.emit(SessionEvent::ExtensionUiRequest {
            id: uuid::Uuid::new_v4().to_string(),
            request,
        });
    }

    fn dialog_request(dialog: Dialog) -> Result<UiRequest, String> {
        Ok(match dialog {
            Dialog::Select(d) => {
                if d.options.len() > 1000 {
                    return Err("select: more than 1000 options".into());
                }
                UiRequest::Select {
                    title: truncate(&d.title, 4096),
                    options: d.options,
                    timeout: d.timeout_ms,
                }
            }
            Dialog::Confirm(d) => UiRequest::Confirm {
                title: truncate(&d.title, 4096),
                message: truncate(&d.message, 64 << 10),
                timeout: d.timeout_ms,
            },
            Dialog::Input(d) => UiRequest::Input {
                title: truncate(&d.title, 4096),
                placeholder: d.placeholder,
                timeout: d.timeout_ms,
            },
            Dialog::Editor(d) => UiRequest::Editor {
                title: truncate(&d.title, 4096),
                prefill: d.prefill,
                timeout: d.timeout_ms,
            },
            Dialog::Form(d) => UiRequest::Form {
                title: truncate(&d.title, 4096),
                fields: parse_json("form fields", &d.fields)?,
                timeout: d.timeout_ms,
            },
        })
    }
}

impl Host for ExtensionState {
    fn log(&mut self, level: LogLevel, message: String) -> Result<()> {
        let level = match level {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Warn => "warn",
            LogLevel::Error => "error",
        };
        let message = truncate(&self.source_maps.remap(&message), MAX_LOG_BYTES);
        tracing::debug!(extension = %self.name, level, "{message}");
        self.session.emit(SessionEvent::Log {
            extension: self.name.clone(),
            level: level.into(),
            message,
        });
        Ok(())
    }

    fn report_error(
        &mut self,
        event: String,
        message: String,
        stack: Option<String>,
    ) -> Result<()> {
        let error = match stack {
            Some(stack) if !stack.trim().is_empty() => format!("{message}\n{}", stack.trim_end()),
            _ => message,
        };
        self.session.emit(SessionEvent::ExtensionError {
            extension: self.name.clone(),
            event: truncate(&event, MAX_NAME_BYTES),
            error: truncate(&self.source_maps.remap(&error), MAX_LOG_BYTES),
        });
        Ok(())
    }

    fn register_tool(&mut self, tool: types::ToolDefinition) -> Result<Result<(), String>> {
        Ok((|| {
            check_name("tool", &tool.name)?;
            let parameters = parse_json("tool parameters", &tool.parameters)?;
            if !parameters.is_object() {
                return Err(format!(
                    "tool {}: parameters must be a JSON Schema object",
                    tool.name
                ));
            }
            let registered = RegisteredTool::from_wit(self.index, &self.name, tool, parameters);
            let mut state = self.session.state.lock().unwrap();
            state.tools.retain(|t| t.name != registered.name);
            state.tools.push(registered);
            Ok(())
        })())
    }

    fn register_command(
        &mut self,
        command: types::CommandDefinition,
    ) -> Result<Result<(), String>> {
        Ok((|| {
            check_name("command", &command.name)?;
            let registered = RegisteredCommand::from_wit(self.index, &self.name, command);
            let mut state = self.session.state.lock().unwrap();
            state.commands.retain(|c| c.name != registered.name);
            state.commands.push(registered);
            Ok(())
        })())
    }

    fn subscribe(&mut self, event: String) -> Result<Result<(), String>> {
        Ok(check_name("event", &event).map(|()| {
            let mut state = self.session.state.lock().unwrap();
            let events = &mut state.registrations_mut(self.index).events;
            if !events.contains(&event) {
                events.push(event);
            }
        }))
    }

    fn register_flag(&mut self, flag: types::FlagDefinition) -> Result<Result<(), String>> {
        Ok((|| {
            check_name("flag", &flag.name)?;
            let default = match &flag.default_value {
                Some(text) => Some(parse_json("flag default", text)?),
                None => None,
            };
            let mut state = self.session.state.lock().unwrap();
            if let Some(default) = &default {
                state
                    .flag_values
                    .entry(flag.name.clone())
                    .or_insert_with(|| default.clone());
            }
            let kind = match flag.flag_type {
                FlagType::Boolean => "boolean",
                FlagType::Text => "string",
            };
            state.registrations_mut(self.index).flags.push(json!({
                "name": flag.name, "description": flag.description, "type": kind, "default": default,
            }));
            Ok(())
        })())
    }

    fn register_shortcut(
        &mut self,
        shortcut: types::ShortcutDefinition,
    ) -> Result<Result<(), String>> {
        // Recorded for inspection; shortcuts are TUI-only and never fire in pichamber.
        let mut state = self.session.state.lock().unwrap();
        state
            .registrations_mut(self.index)
            .shortcuts
            .push(json!({ "shortcut": truncate(&shortcut.shortcut, 64), "description": shortcut.description }));
        Ok(Ok(()))
    }

    fn register_message_renderer(&mut self, custom_type: String) -> Result<Result<(), String>> {
        Ok(check_name("message renderer", &custom_type).map(|()| {
            self.session
                .state
                .lock()
                .unwrap()
                .registrations_mut(self.index)
                .message_renderers
                .push(custom_type);
        }))
    }

    fn register_provider(&mut self, name: String, config: String) -> Result<Result<(), String>> {
        Ok((|| {
            check_name("provider", &name)?;
            let mut config = parse_json("provider config", &config)?;
            // Keys never leave the extension's registration record.
            if let Some(map) = config.as_object_mut()
                && map.contains_key("apiKey")
            {
                map.insert("apiKey".into(), json!("<redacted>"));
            }
            let mut state = self.session.state.lock().unwrap();
            let providers = &mut state.registrations_mut(self.index).providers;
            providers.retain(|p| p["name"] != json!(name));
            providers.push(json!({ "name": name, "config": config }));
            Ok(())
        })())
    }

    fn unregister_provider(&mut self, name: String) -> Result<()> {
        let mut state = self.session.state.lock().unwrap();
        state
            .registrations_mut(self.index)
            .providers
            .retain(|p| p["name"] != json!(name));
        Ok(())
    }

    fn get_flag(&mut self, name: String) -> Result<Option<String>> {
        let state = self.session.state.lock().unwrap();
        Ok(state.flag_values.get(&name).map(Value::to_string))
    }

    fn send_message(&mut self, message: String, options: String) -> Result<Result<(), String>> {
        Ok((|| {
            let message = parse_json("message", &message)?;
            let options = parse_json("message options", &options)?;
            let custom_type = message
                .get("customType")
                .and_then(Value::as_str)
                .unwrap_or_default();
            check_name("customType", custom_type)?;
            let entry = self.session.state.lock().unwrap().append(
                "custom_message",
                json!({
                    "customType": custom_type,
                    "content": message.get("content").cloned().unwrap_or(json!("")),
                    "display": message.get("display").cloned().unwrap_or(json!(true)),
                    "details": message.get("details").cloned().unwrap_or(Value::Null),
                }),
            );
            self.session
                .emit(SessionEvent::Message { message, options });
            self.session.emit(SessionEvent::Entry { entry });
            Ok(())
        })())
    }

    fn send_user_message(
        &mut self,
        content: String,
        options: String,
    ) -> Result<Result<(), String>> {
        Ok((|| {
            let content = parse_json("user message", &content)?;
            if !(content.is_string() || content.is_array()) {
                return Err(
                    "sendUserMessage: content must be a string or an array of content blocks"
                        .into(),
                );
            }
            let options = parse_json("message options", &options)?;
            self.session.emit(SessionEvent::Message {
                message: json!({ "role": "user", "content": content }),
                options,
            });
            Ok(())
        })())
    }

    fn append_entry(
        &mut self,
        custom_type: String,
        data: Option<String>,
    ) -> Result<Result<(), String>> {
        Ok((|| {
            check_name("customType", &custom_type)?;
            let data = match data {
                Some(text) => parse_json("entry data", &text)?,
                None => Value::Null,
            };
            let mut state = self.session.state.lock().unwrap();
            if state.entries.len() >= MAX_ENTRIES {
                return Err(format!(
                    "the session holds {MAX_ENTRIES} entries; no more can be appended"
                ));
            }
            let mut fields = json!({ "customType": custom_type });
            if !data.is_null() {
                fields["data"] = data;
            }
            let entry = state.append("custom", fields);
            drop(state);
            self.session.emit(SessionEvent::Entry { entry });
            Ok(())
        })())
    }

    fn set_session_name(&mut self, name: String) -> Result<Result<(), String>> {
        let name = truncate(name.trim(), 256);
        let mut state = self.session.state.lock().unwrap();
        state.name = Some(name.clone());
        let entry = state.append("session_info", json!({ "name": name }));
        drop(state);
        self.session.emit(SessionEvent::Entry { entry });
        Ok(Ok(()))
    }

    fn get_session_name(&mut self) -> Result<Option<String>> {
        Ok(self.session.state.lock().unwrap().name.clone())
    }

    fn set_label(&mut self, entry_id: String, label: Option<String>) -> Result<Result<(), String>> {
        let mut state = self.session.state.lock().unwrap();
        if !state.entries.iter().any(|e| e["id"] == json!(entry_id)) {
            return Ok(Err(format!("setLabel: no entry with id {entry_id:?}")));
        }
        match &label {
            Some(l) => state.labels.insert(entry_id.clone(), truncate(l, 256)),
            None => state.labels.remove(&entry_id),
        };
        let entry = state.append("label", json!({ "targetId": entry_id, "label": label }));
        drop(state);
        self.session.emit(SessionEvent::Entry { entry });
        Ok(Ok(()))
    }

    fn session_read(&mut self, method: String, args: String) -> Result<Result<String, String>> {
        let args = match parse_json("arguments", &args) {
            Ok(a) => a,
            Err(e) => return Ok(Err(e)),
        };
        let arg = |i: usize| args.get(i).and_then(Value::as_str).map(str::to_owned);
        let state = self.session.state.lock().unwrap();
        let find = |id: &str| state.entries.iter().find(|e| e["id"] == json!(id)).cloned();
        let value = match method.as_str() {
            "getEntries" | "buildContextEntries" => Value::Array(state.entries.clone()),
            "getBranch" => {
                // Walk parentId links from the given entry (or the leaf) back to the root.
                let mut branch = Vec::new();
                let mut cursor = arg(0).or_else(|| state.leaf.clone());
                while let Some(id) = cursor {
                    let Some(entry) = find(&id) else { break };
                    cursor = entry["parentId"].as_str().map(str::to_owned);
                    branch.push(entry);
                }
                branch.reverse();
                Value::Array(branch)
            }
            "getLeafId" => json!(state.leaf),
            "getLeafEntry" => state.leaf.as_deref().and_then(find).unwrap_or(Value::Null),
            "getEntry" => arg(0).as_deref().and_then(find).unwrap_or(Value::Null),
            "getLabel" => arg(0)
                .and_then(|id| state.labels.get(&id).cloned())
                .map(Value::String)
                .unwrap_or(Value::Null),
            "getChildren" => {
                let parent = arg(0);
                Value::Array(
                    state
                        .entries
                        .iter()
                        .filter(|e| e["parentId"].as_str().map(str::to_owned) == parent)
                        .cloned()
                        .collect(),
                )
            }
            "getSessionFile" => Value::Null,
            "getSessionId" => json!(self.session.id),
            "getSessionDir" => Value::Null,
            "getSessionName" => json!(state.name),
            "getHeader" => {
                json!({ "type": "session", "version": 3, "id": self.session.id, "cwd": self.session.cwd })
            }
            "getTree" => Value::Array(state.entries.clone()),
            other => {
                return Ok(Err(format!(
                    "sessionManager.{other} is not available to extensions"
                )));
            }
        };
        Ok(Ok(value.to_string()))
    }

    fn get_active_tools(&mut self) -> Result<Vec<String>> {
        Ok(self.session.state.lock().unwrap().active_tool_names())
    }

    fn get_all_tools(&mut self) -> Result<String> {
        let state = self.session.state.lock().unwrap();
        let tools: Vec<Value> = state
            .tools
            .iter()
            .map(|t| {
                json!({
                    "name": t.name, "description": t.description, "parameters": t.parameters,
                    "sourceInfo": { "path": format!("extension:{}", t.extension_name), "source": "extension" },
                })
            })
            .collect();
        Ok(Value::Array(tools).to_string())
    }

    fn set_active_tools(&mut self, names: Vec<String>) -> Result<Result<(), String>> {
        let mut state = self.session.state.lock().unwrap();
        let known: Vec<String> = names
            .into_iter()
            .filter(|n| state.tools.iter().any(|t| &t.name == n))
            .collect();
        state.active_tools = Some(known);
        Ok(Ok(()))
    }

    fn get_commands(&mut self) -> Result<String> {
        let state = self.session.state.lock().unwrap();
        let commands: Vec<Value> = state
            .commands
            .iter()
            .map(|c| {
                json!({
                    "name": c.name, "description": c.description, "source": "extension",
                    "sourceInfo": { "path": format!("extension:{}", c.extension_name), "source": "extension" },
                })
            })
            .collect();
        Ok(Value::Array(commands).to_string())
    }

    fn get_model(&mut self) -> Result<Option<String>> {
        Ok(self
            .session
            .state
            .lock()
            .unwrap()
            .model
            .as_ref()
            .map(Value::to_string))
    }

    fn set_model(&mut self, _model: String) -> Result<bool> {
        // No model registry in this host yet: pi answers false for a model it cannot use.
        Ok(false)
    }

    fn get_thinking_level(&mut self) -> Result<String> {
        Ok(self.session.state.lock().unwrap().thinking_level.clone())
    }

    fn set_thinking_level(&mut self, level: String) -> Result<Result<(), String>> {
        const LEVELS: [&str; 6] = ["off", "minimal", "low", "medium", "high", "xhigh"];
        if !LEVELS.contains(&level.as_str()) {
            return Ok(Err(format!(
                "unknown thinking level {level:?}; one of {LEVELS:?}"
            )));
        }
        self.session.state.lock().unwrap().thinking_level = level;
        Ok(Ok(()))
    }

    fn emit_bus_event(&mut self, channel: String, data: String) -> Result<()> {
        if channel.len() > MAX_NAME_BYTES || data.len() > MAX_JSON_BYTES {
            return Ok(());
        }
        let mut state = self.session.state.lock().unwrap();
        if state.bus.len() < 10_000 {
            state.bus.push_back((self.index, channel, data));
        }
        Ok(())
    }

    fn is_idle(&mut self) -> Result<bool> {
        Ok(true)
    }

    fn abort(&mut self) -> Result<()> {
        Ok(())
    }

    fn has_pending_messages(&mut self) -> Result<bool> {
        Ok(false)
    }

    fn shutdown(&mut self) -> Result<()> {
        self.session.state.lock().unwrap().shutdown_requested = true;
        Ok(())
    }

    fn get_context_usage(&mut self) -> Result<Option<String>> {
        Ok(None)
    }

    fn get_system_prompt(&mut self) -> Result<String> {
        Ok(String::new())
    }

    fn compact(&mut self, _options: String) -> Result<()> {
        Ok(())
    }

    fn ui(&mut self, update: types::UiUpdate) -> Result<()> {
        let request = match update {
            types::UiUpdate::Notify(n) => UiRequest::Notify {
                message: truncate(&n.message, 64 << 10),
                notify_type: n.kind.map(|k| {
                    match k {
                        NotifyKind::Info => "info",
                        NotifyKind::Warning => "warning",
                        NotifyKind::Error => "error",
                    }
                    .to_owned()
                }),
            },
            types::UiUpdate::Status(s) => {
                let key = truncate(&s.key, MAX_NAME_BYTES);
                let text = s.text.map(|t| truncate(&t, 1024));
                let mut state = self.session.state.lock().unwrap();
                match &text {
                    Some(t) => state.statuses.insert(key.clone(), t.clone()),
                    None => state.statuses.remove(&key),
                };
                UiRequest::SetStatus { key, text }
            }
            types::UiUpdate::Widget(w) => {
                let key = truncate(&w.key, MAX_NAME_BYTES);
                let lines = w.lines.map(|l| {
                    l.into_iter()
                        .take(200)
                        .map(|x| truncate(&x, 1024))
                        .collect::<Vec<_>>()
                });
                let mut state = self.session.state.lock().unwrap();
                match &lines {
                    Some(l) => state.widgets.insert(key.clone(), l.clone()),
                    None => state.widgets.remove(&key),
                };
                let placement = w
                    .placement
                    .filter(|p| p == "aboveEditor" || p == "belowEditor");
                UiRequest::SetWidget {
                    key,
                    lines,
                    placement,
                }
            }
            types::UiUpdate::Title(title) => {
                let title = truncate(&title, 256);
                self.session.state.lock().unwrap().title = Some(title.clone());
                UiRequest::SetTitle { title }
            }
            types::UiUpdate::EditorText(text) => UiRequest::SetEditorText {
                text: truncate(&text, 1 << 20),
            },
        };
        if self.session.has_ui {
            self.ui_event(request);
        }
        Ok(())
    }

    fn get_editor_text(&mut self) -> Result<String> {
        // pi's RPC mode cannot read a remote editor synchronously and answers "".
        Ok(String::new())
    }

    fn tool_update(&mut self, tool_call_id: String, partial: String) -> Result<()> {
        if let Ok(partial) = parse_json("tool update", &partial) {
            self.session.emit(SessionEvent::ToolExecutionUpdate {
                tool_call_id,
                partial_result: partial,
            });
        }
        Ok(())
    }

    fn start(&mut self, op: Operation) -> Result<Result<u32, String>> {
        let work = match op {
            Operation::Dialog(dialog) => {
                let request = match Self::dialog_request(dialog) {
                    Ok(r) => r,
                    Err(e) => return Ok(Err(e)),
                };
                if !self.session.has_ui {
                    // pi's print mode: no UI, dialogs resolve to their defaults.
                    futures::future::ready(Outcome::Dialog(WitAnswer::Cancelled)).boxed()
                } else {
                    let id = uuid::Uuid::new_v4().to_string();
                    let timeout = request.timeout_ms();
                    let answer = self.session.dialogs.answer(&id, &request);
                    self.session.emit(SessionEvent::ExtensionUiRequest {
                        id: id.clone(),
                        request,
                    });
                    let session = self.session.clone();
                    async move {
                        let answer = match timeout {
                            Some(ms) => {
                                tokio::time::timeout(Duration::from_millis(ms.into()), answer)
                                    .await
                                    .unwrap_or_else(|_| DialogAnswer::cancelled())
                            }
                            None => answer.await,
                        };
                        session.emit(SessionEvent::ExtensionUiResponse {
                            id,
                            answer: answer.clone(),
                        });
                        Outcome::Dialog(match answer {
                            DialogAnswer::Value { value } => WitAnswer::Value(value),
                            DialogAnswer::Confirmed { confirmed } => {
                                WitAnswer::Confirmed(confirmed)
                            }
                            DialogAnswer::Cancelled { .. } => WitAnswer::Cancelled,
                        })
                    }
                    .boxed()
                }
            }
            Operation::Exec(request) => {
                let grants = self.grants.clone();
                let cwd = self.session.cwd.clone();
                async move { Outcome::Exec(grants.run_program(request, cwd).await) }.boxed()
            }
        };
        Ok(self.operations.start(work))
    }

    fn cancel(&mut self, id: u32) -> Result<()> {
        self.operations.cancel(id);
        Ok(())
    }

    async fn wait(&mut self, timeout_ms: Option<u64>) -> Result<Option<Completion>> {
        let waited = timeout_ms.is_some() || self.operations.pending() > 0;
        let completion = self
            .operations
            .wait(timeout_ms.map(Duration::from_millis))
            .await;
        if waited {
            // Time spent waiting is not time spent running: restart the per-call clock.
            self.running_since = Instant::now();
        }
        Ok(completion)
    }
}
