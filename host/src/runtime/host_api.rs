//! The `host` interface: what an extension may ask of its session. Every value from the guest
//! is untrusted: sizes are capped, names checked, JSON parsed before use. A value that breaks a
//! rule is refused with an error the extension sees as an ordinary JS exception.

use std::time::{Duration, Instant};

use futures::FutureExt;
use serde_json::{Value, json};
use wasmtime::Result;

use super::boundary::{MAX_JSON_BYTES, MAX_NAME_BYTES, check_name, parse_json, truncate};
use super::instance::{ExtensionState, WallDeadlineExceeded};
use super::limits::{Exceeded, Kind, MAX_ENTRIES};
use super::pichamber::extension::host::Host;
use super::pichamber::extension::types;
use super::wit::{
    Completion, Dialog, DialogAnswer as WitAnswer, FlagType, LogLevel, NotifyKind, Operation,
    Outcome,
};
use crate::session::events::{DialogAnswer, SessionEvent, UiRequest};
use crate::session::messages;
use crate::session::state::{AgentRequest, RegisteredCommand, RegisteredTool, ToolSource};

/// Largest session `getTree` serves (its JSON nests one level per entry of a chain).
pub const MAX_TREE_ENTRIES: usize = 2000;
/// Longest console line kept.
pub const MAX_LOG_BYTES: usize = 16 << 10;

impl types::Host for ExtensionState {}

fn opt_len(text: &Option<String>) -> usize {
    text.as_ref().map_or(0, String::len)
}

impl ExtensionState {
    /// Reports a volume limit the first time it bites in a call (and in a second).
    fn over_limit(&self, what: &str, exceeded: Exceeded, consequence: &str) -> String {
        let message = format!("{}; {consequence}", exceeded.message);
        if exceeded.report {
            self.session.emit(SessionEvent::ExtensionError {
                extension: self.name.clone(),
                event: format!("limit:{what}"),
                error: message.clone(),
                stack: None,
            });
        }
        message
    }

    /// A status or widget over the registration caps is not kept (`ui` has no error to
    /// return): reported once per instance.
    fn ui_refused(&mut self, message: &str) {
        if !std::mem::replace(&mut self.ui_refusal_reported, true) {
            self.session.emit(SessionEvent::ExtensionError {
                extension: self.name.clone(),
                event: "limit:ui".into(),
                error: format!("{message}; further ones are dropped"),
                stack: None,
            });
        }
    }

    /// Whether this extension may append another session entry.
    fn entry_budget(&self) -> Result<(), String> {
        if self.entries_appended >= MAX_ENTRIES {
            return Err(format!(
                "this extension appended {MAX_ENTRIES} entries to the session; no more can be appended (per-extension limit)"
            ));
        }
        Ok(())
    }

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
        if let Err(exceeded) = self.logs.admit(message.len()) {
            self.over_limit("console", exceeded, "the rest is dropped");
            return Ok(());
        }
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
        let stack = stack
            .filter(|s| !s.trim().is_empty())
            .map(|s| truncate(&self.source_maps.remap(s.trim_end()), MAX_LOG_BYTES));
        self.session.emit(SessionEvent::ExtensionError {
            extension: self.name.clone(),
            event: truncate(&event, MAX_NAME_BYTES),
            error: truncate(&self.source_maps.remap(&message), MAX_LOG_BYTES),
            stack,
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
            let bytes = tool.name.len()
                + tool.label.len()
                + tool.description.len()
                + tool.parameters.len()
                + opt_len(&tool.prompt_snippet)
                + tool
                    .prompt_guidelines
                    .iter()
                    .map(String::len)
                    .sum::<usize>()
                + opt_len(&tool.execution_mode);
            self.registry
                .admit(Kind::Tool, &tool.name, bytes)
                .map_err(|e| format!("registerTool {}: {e}", tool.name))?;
            let registered = RegisteredTool::from_wit(self.index, &self.name, tool, parameters);
            let name = registered.name.clone();
            if !self.session.state.lock().unwrap().register_tool(registered) {
                self.registry.release(Kind::Tool, &name);
                // pi keeps the first extension's tool and says nothing; say it in the log.
                tracing::warn!(
                    "{}: tool {name} is already registered by another extension; the first registration stays",
                    self.name
                );
            }
            Ok(())
        })())
    }

    fn register_command(
        &mut self,
        command: types::CommandDefinition,
    ) -> Result<Result<(), String>> {
        Ok((|| {
            check_name("command", &command.name)?;
            self.registry
                .admit(
                    Kind::Command,
                    &command.name,
                    command.name.len() + opt_len(&command.description),
                )
                .map_err(|e| format!("registerCommand {}: {e}", command.name))?;
            let registered = RegisteredCommand::from_wit(self.index, &self.name, command);
            self.session
                .state
                .lock()
                .unwrap()
                .register_command(registered);
            Ok(())
        })())
    }

    fn subscribe(&mut self, event: String) -> Result<Result<(), String>> {
        Ok((|| {
            check_name("event", &event)?;
            self.registry
                .admit(Kind::Event, &event, event.len())
                .map_err(|e| format!("pi.on({event}): {e}"))?;
            let mut state = self.session.state.lock().unwrap();
            let events = &mut state.registrations_mut(self.index).events;
            if !events.contains(&event) {
                events.push(event);
            }
            Ok(())
        })())
    }

    fn register_flag(&mut self, flag: types::FlagDefinition) -> Result<Result<(), String>> {
        Ok((|| {
            check_name("flag", &flag.name)?;
            self.registry
                .admit(
                    Kind::Flag,
                    &flag.name,
                    flag.name.len() + opt_len(&flag.description) + opt_len(&flag.default_value),
                )
                .map_err(|e| format!("registerFlag {}: {e}", flag.name))?;
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
            // A name registered again replaces its earlier definition.
            let flags = &mut state.registrations_mut(self.index).flags;
            flags.retain(|f| f["name"] != json!(flag.name));
            flags.push(json!({
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
        let key = truncate(&shortcut.shortcut, 64);
        let bytes = key.len() + opt_len(&shortcut.description);
        if let Err(e) = self.registry.admit(Kind::Shortcut, &key, bytes) {
            return Ok(Err(format!("registerShortcut {key}: {e}")));
        }
        let mut state = self.session.state.lock().unwrap();
        let shortcuts = &mut state.registrations_mut(self.index).shortcuts;
        shortcuts.retain(|s| s["shortcut"] != json!(key));
        shortcuts.push(json!({ "shortcut": key, "description": shortcut.description }));
        Ok(Ok(()))
    }

    fn register_message_renderer(&mut self, custom_type: String) -> Result<Result<(), String>> {
        Ok((|| {
            check_name("message renderer", &custom_type)?;
            self.registry
                .admit(Kind::MessageRenderer, &custom_type, custom_type.len())
                .map_err(|e| format!("registerMessageRenderer {custom_type}: {e}"))?;
            let mut state = self.session.state.lock().unwrap();
            let renderers = &mut state.registrations_mut(self.index).message_renderers;
            if !renderers.contains(&custom_type) {
                renderers.push(custom_type);
            }
            Ok(())
        })())
    }

    fn register_provider(&mut self, name: String, config: String) -> Result<Result<(), String>> {
        Ok((|| {
            check_name("provider", &name)?;
            let bytes = name.len() + config.len();
            let mut config = parse_json("provider config", &config)?;
            self.registry
                .admit(Kind::Provider, &name, bytes)
                .map_err(|e| format!("registerProvider {name}: {e}"))?;
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
        self.registry.release(Kind::Provider, &name);
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
            let custom = messages::custom_message(&message);
            let deliver_as = options.get("deliverAs").and_then(Value::as_str);
            let mut state = self.session.state.lock().unwrap();
            let agent = &mut state.agent;
            // pi's sendCustomMessage: queue while a run streams, start a turn when asked to,
            // otherwise just record the message in the context and the session.
            if deliver_as == Some("nextTurn") {
                agent.next_turn.push(custom);
            } else if agent.streaming {
                if deliver_as == Some("followUp") {
                    agent.follow_up.push_back(custom);
                } else {
                    agent.steering.push_back(custom);
                }
            } else if options.get("triggerTurn") == Some(&json!(true)) {
                agent.requests.push_back(AgentRequest::CustomTurn(custom));
            } else {
                self.entry_budget()?;
                agent.messages.push(custom.clone());
                let entry = state
                    .store
                    .append_custom_message_entry(
                        custom_type,
                        custom["content"].clone(),
                        custom["display"] != json!(false),
                        Some(custom["details"].clone()).filter(|d| !d.is_null()),
                    )
                    .map_err(|e| format!("sendMessage: {e:#}"))?;
                drop(state);
                self.entries_appended += 1;
                self.session.emit(SessionEvent::Entry { entry });
                self.session.emit(SessionEvent::Agent(
                    json!({ "type": "message_start", "message": custom }),
                ));
                self.session.emit(SessionEvent::Agent(
                    json!({ "type": "message_end", "message": custom }),
                ));
            }
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
            let options = parse_json("message options", &options)?;
            // pi normalises the content to text (text blocks joined by newlines) plus images.
            let (text, images) = match content {
                Value::String(text) => (text, Vec::new()),
                Value::Array(blocks) => {
                    let (texts, images): (Vec<Value>, Vec<Value>) =
                        blocks.into_iter().partition(|b| b["type"] == "text");
                    let text: Vec<&str> = texts.iter().filter_map(|b| b["text"].as_str()).collect();
                    (text.join("\n"), images)
                }
                _ => {
                    return Err(
                        "sendUserMessage: content must be a string or an array of content blocks"
                            .into(),
                    );
                }
            };
            let deliver_as = options
                .get("deliverAs")
                .and_then(Value::as_str)
                .map(str::to_owned);
            self.session.state.lock().unwrap().agent.requests.push_back(
                AgentRequest::UserMessage {
                    text,
                    images,
                    deliver_as,
                    source: "extension",
                    respond: None,
                },
            );
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
            // Counted per extension: one that fills its share leaves the others theirs.
            self.entry_budget()?;
            let mut state = self.session.state.lock().unwrap();
            let entry = state
                .store
                .append_custom_entry(&custom_type, Some(data).filter(|d| !d.is_null()))
                .map_err(|e| format!("appendEntry: {e:#}"))?;
            drop(state);
            self.entries_appended += 1;
            self.session.emit(SessionEvent::Entry { entry });
            Ok(())
        })())
    }

    fn set_session_name(&mut self, name: String) -> Result<Result<(), String>> {
        let name = truncate(name.trim(), 256);
        if let Err(e) = self.entry_budget() {
            return Ok(Err(format!("setSessionName: {e}")));
        }
        let mut state = self.session.state.lock().unwrap();
        let entry = match state.store.append_session_info(&name) {
            Ok(e) => e,
            Err(e) => return Ok(Err(format!("setSessionName: {e:#}"))),
        };
        drop(state);
        self.entries_appended += 1;
        self.session.emit(SessionEvent::Entry { entry });
        self.session.emit(SessionEvent::Agent(
            json!({ "type": "session_info_changed", "name": name }),
        ));
        Ok(Ok(()))
    }

    fn get_session_name(&mut self) -> Result<Option<String>> {
        Ok(self.session.state.lock().unwrap().store.get_session_name())
    }

    fn set_label(&mut self, entry_id: String, label: Option<String>) -> Result<Result<(), String>> {
        if let Err(e) = self.entry_budget() {
            return Ok(Err(format!("setLabel: {e}")));
        }
        let mut state = self.session.state.lock().unwrap();
        if state.store.get_entry(&entry_id).is_none() {
            return Ok(Err(format!("setLabel: no entry with id {entry_id:?}")));
        }
        let label = label.map(|l| truncate(&l, 256));
        let entry = match state.store.append_label_change(&entry_id, label.as_deref()) {
            Ok(e) => e,
            Err(e) => return Ok(Err(format!("setLabel: {e:#}"))),
        };
        drop(state);
        self.entries_appended += 1;
        self.session.emit(SessionEvent::Entry { entry });
        Ok(Ok(()))
    }

    fn session_read(&mut self, method: String, args: String) -> Result<Result<String, String>> {
        let args = match parse_json("arguments", &args) {
            Ok(a) => a,
            Err(e) => return Ok(Err(e)),
        };
        let arg = |i: usize| args.get(i).and_then(Value::as_str).map(str::to_owned);
        // UI reads and updates that the ui-update variant cannot express.
        match method.as_str() {
            "ui:theme" => return Ok(Ok(terminal_theme().to_string())),
            // `setEditorText(undefined)`: pi sends the request without a text.
            "ui:clearEditorText" => {
                if self.session.has_ui {
                    self.ui_event(UiRequest::SetEditorText { text: None });
                }
                return Ok(Ok("null".into()));
            }
            _ => {}
        }
        let mut state = self.session.state.lock().unwrap();
        // Session control from a command context: queued, run when the command returns.
        if let Some(action) = method.strip_prefix("action:") {
            const ACTIONS: [&str; 5] = [
                "newSession",
                "fork",
                "switchSession",
                "navigateTree",
                "reload",
            ];
            if !ACTIONS.contains(&action) {
                return Ok(Err(format!("ctx.{action} is not a session action")));
            }
            state.agent.requests.push_back(AgentRequest::SessionAction {
                action: action.to_owned(),
                args: args.get(0).cloned().unwrap_or(Value::Null),
            });
            return Ok(Ok("null".into()));
        }
        let store = &state.store;
        let list = |entries: Vec<&Value>| Value::Array(entries.into_iter().cloned().collect());
        let value = match method.as_str() {
            "getEntries" => Value::Array(store.get_entries().to_vec()),
            "buildContextEntries" | "buildSessionContext" => {
                store.build_session_context().to_json()
            }
            "getBranch" => list(store.get_branch(arg(0).as_deref())),
            "getLeafId" => json!(store.get_leaf_id()),
            "getLeafEntry" => store.get_leaf_entry().cloned().unwrap_or(Value::Null),
            "getEntry" => arg(0)
                .and_then(|id| store.get_entry(&id).cloned())
                .unwrap_or(Value::Null),
            "getLabel" => json!(arg(0).and_then(|id| store.get_label(&id).map(str::to_owned))),
            "getChildren" => list(store.get_children(arg(0).as_deref().unwrap_or_default())),
            // A host path is the operator's business: extensions see no file location.
            "getSessionFile" | "getSessionDir" => Value::Null,
            "getSessionId" => json!(store.get_session_id()),
            "getSessionName" => json!(store.get_session_name()),
            // The parent's location is a host path: extensions see its file name only.
            "getHeader" => {
                let mut header = store.get_header().clone();
                if let Some(parent) = header["parentSession"].as_str() {
                    let name = std::path::Path::new(parent)
                        .file_name()
                        .map(|n| n.to_string_lossy().into_owned());
                    header["parentSession"] = json!(name);
                }
                header
            }
            "getCwd" => json!(self.session.cwd),
            // pi's tree nests as deep as the longest chain; building and serialising it
            // recurses, so a session an extension grew very long is refused, not a crash.
            "getTree" if store.get_entries().len() > MAX_TREE_ENTRIES => {
                return Ok(Err(format!(
                    "sessionManager.getTree: the session has more than {MAX_TREE_ENTRIES} entries; use getEntries() or getBranch()"
                )));
            }
            "getTree" => store.get_tree().to_json(),
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
                let source_info = match t.source {
                    ToolSource::Builtin => {
                        json!({ "path": format!("<builtin:{}>", t.name), "source": "builtin" })
                    }
                    ToolSource::Extension(_) => {
                        json!({ "path": format!("extension:{}", t.extension_name), "source": "extension" })
                    }
                };
                json!({
                    "name": t.name, "description": t.description, "parameters": t.parameters,
                    "sourceInfo": source_info,
                })
            })
            .collect();
        Ok(Value::Array(tools).to_string())
    }

    fn set_active_tools(&mut self, names: Vec<String>) -> Result<Result<(), String>> {
        let mut state = self.session.state.lock().unwrap();
        // pi ignores names it does not know.
        let mut known: Vec<String> = Vec::new();
        for name in names {
            if state.tool(&name).is_some() && !known.contains(&name) {
                known.push(name);
            }
        }
        state.active_tools = known;
        Ok(Ok(()))
    }

    fn get_commands(&mut self) -> Result<String> {
        Ok(self
            .session
            .state
            .lock()
            .unwrap()
            .commands_json()
            .to_string())
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
        if let Err(e) = self.entry_budget() {
            return Ok(Err(format!("setThinkingLevel: {e}")));
        }
        let mut state = self.session.state.lock().unwrap();
        let previous = std::mem::replace(&mut state.thinking_level, level.clone());
        if previous == level {
            return Ok(Ok(()));
        }
        // As pi: recorded, clients told, extensions get thinking_level_select (after this call).
        if let Err(e) = state.store.append_thinking_level_change(&level) {
            return Ok(Err(format!("setThinkingLevel: {e:#}")));
        }
        self.entries_appended += 1;
        state.agent.requests.push_back(AgentRequest::Event {
            name: "thinking_level_select".into(),
            event: json!({ "type": "thinking_level_select", "level": level, "previousLevel": previous }),
        });
        drop(state);
        self.session.emit(SessionEvent::Agent(
            json!({ "type": "thinking_level_changed", "level": level }),
        ));
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
        Ok(!self.session.state.lock().unwrap().agent.streaming)
    }

    fn abort(&mut self) -> Result<()> {
        self.session.abort.send_replace(true);
        Ok(())
    }

    fn has_pending_messages(&mut self) -> Result<bool> {
        let state = self.session.state.lock().unwrap();
        Ok(!state.agent.steering.is_empty() || !state.agent.follow_up.is_empty())
    }

    fn shutdown(&mut self) -> Result<()> {
        self.session.state.lock().unwrap().shutdown_requested = true;
        Ok(())
    }

    fn get_context_usage(&mut self) -> Result<Option<String>> {
        let state = self.session.state.lock().unwrap();
        Ok(state.context_usage().map(|u| u.to_string()))
    }

    fn get_system_prompt(&mut self) -> Result<String> {
        Ok(self
            .session
            .state
            .lock()
            .unwrap()
            .agent
            .system_prompt
            .clone())
    }

    fn compact(&mut self, options: String) -> Result<()> {
        // pi compacts in the background; here it runs once the current call returns.
        let options = parse_json("compact options", &options).unwrap_or(Value::Null);
        let instructions = options["customInstructions"].as_str().map(str::to_owned);
        let reply_to = options["callback"].as_u64().map(|id| (self.index, id));
        let mut state = self.session.state.lock().unwrap();
        state.agent.requests.push_back(AgentRequest::Compact {
            instructions,
            reply_to,
        });
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
                match &text {
                    Some(t) => {
                        if let Err(e) = self.registry.admit(Kind::Status, &key, key.len() + t.len())
                        {
                            self.ui_refused(&format!("setStatus {key}: {e}"));
                            return Ok(());
                        }
                    }
                    None => self.registry.release(Kind::Status, &key),
                }
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
                match &lines {
                    Some(l) => {
                        let bytes = key.len() + l.iter().map(String::len).sum::<usize>();
                        if let Err(e) = self.registry.admit(Kind::Widget, &key, bytes) {
                            self.ui_refused(&format!("setWidget {key}: {e}"));
                            return Ok(());
                        }
                    }
                    None => self.registry.release(Kind::Widget, &key),
                }
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
                text: Some(truncate(&text, 1 << 20)),
            },
        };
        if self.session.has_ui {
            // The state above is kept; what floods the client is the stream of updates.
            let bytes = serde_json::to_string(&request).map_or(0, |t| t.len());
            if let Err(exceeded) = self.ui.admit(bytes) {
                self.over_limit("ui", exceeded, "the rest is dropped");
                return Ok(());
            }
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
            crate::session::tool_calls::report_update(&self.session, &tool_call_id, partial);
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
                } else if let Err(exceeded) = self.dialogs.admit(0) {
                    return Ok(Err(self.over_limit(
                        "dialog",
                        exceeded,
                        "the dialog is refused",
                    )));
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
                // fetch is carried out by the host under the network capability.
                if request.command == FETCH_PROGRAM {
                    let request_json = request.args.first().cloned().unwrap_or_default();
                    let work = async move {
                        let request: Value =
                            serde_json::from_str(&request_json).unwrap_or_default();
                        let outcome = crate::net::fetch(&grants, &request).await.map(|response| {
                            types::ExecResult {
                                stdout: response.to_string(),
                                stderr: String::new(),
                                code: 0,
                                killed: false,
                            }
                        });
                        Outcome::Exec(outcome)
                    };
                    return Ok(self.operations.start(work.boxed()));
                }
                // pi's built-in tools are offered to extensions as host-provided programs.
                match request.command.strip_prefix(BUILTIN_TOOL_PROGRAM) {
                    Some(tool) => {
                        let tool = tool.to_owned();
                        // Partial results go to the tool call the extension named (the one
                        // it is executing), as its onUpdate would report them.
                        let session = self.session.clone();
                        let update_id = request.args.get(1).filter(|id| !id.is_empty()).cloned();
                        async move {
                            let on_update = move |partial: Value| {
                                if let Some(id) = &update_id {
                                    crate::session::tool_calls::report_update(
                                        &session, id, partial,
                                    );
                                }
                            };
                            let result = grants
                                .run_builtin_tool(&tool, &request, &cwd, &on_update)
                                .await;
                            Outcome::Exec(result)
                        }
                        .boxed()
                    }
                    None => {
                        async move { Outcome::Exec(grants.run_program(request, cwd).await) }.boxed()
                    }
                }
            }
        };
        Ok(self.operations.start(work))
    }

    fn cancel(&mut self, id: u32) -> Result<()> {
        self.operations.cancel(id);
        Ok(())
    }

    async fn wait(&mut self, timeout_ms: Option<u64>) -> Result<Option<Completion>> {
        if self.wall_used() > self.call_wall_timeout {
            return Err(WallDeadlineExceeded(self.call_wall_timeout).into());
        }
        let pending = self.operations.pending() > 0;
        let waited = timeout_ms.is_some() || pending;
        let asked = timeout_ms.map(Duration::from_millis);
        let completion = if pending {
            // A dialog or a program is pending: each ends at its own timeout (or when a person
            // answers), so time spent on them is not charged to the call's wall budget.
            let started = Instant::now();
            let completion = self.operations.wait(asked).await;
            self.excluded += started.elapsed();
            completion
        } else {
            // Only timers are left: they may wait as long as the wall budget allows.
            let left = self.wall_left();
            match asked {
                Some(asked) if asked > left => {
                    self.operations.wait(Some(left)).await;
                    return Err(WallDeadlineExceeded(self.call_wall_timeout).into());
                }
                _ => self.operations.wait(asked).await,
            }
        };
        if waited {
            // Time spent waiting is not time spent running: restart the per-call clock.
            self.running_since = Instant::now();
        }
        Ok(completion)
    }
}

/// The program-name prefix under which the guest runs a built-in tool (`pichamber:tool:read`
/// with the JSON arguments as the one argument): no real program has a name like it.
const BUILTIN_TOOL_PROGRAM: &str = "pichamber:tool:";
/// The program name under which the guest's `fetch` asks the host (the request as JSON).
const FETCH_PROGRAM: &str = "pichamber:fetch";

/// The theme pi would pick in this terminal: `dark` unless COLORFGBG says the background is
/// light, and truecolor unless the terminal is known to lack it (pi's detection, from the
/// host's environment, which the extension itself cannot read).
fn terminal_theme() -> Value {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let name = match var("COLORFGBG").split(';').nth(1).map(str::parse::<u32>) {
        Some(Ok(bg)) if bg >= 8 => "light",
        _ => "dark",
    };
    let term = var("TERM");
    let colorterm = var("COLORTERM");
    let truecolor = colorterm == "truecolor"
        || colorterm == "24bit"
        || !var("WT_SESSION").is_empty()
        || !(term.is_empty()
            || term == "dumb"
            || term == "linux"
            || var("TERM_PROGRAM") == "Apple_Terminal"
            || term == "screen"
            || term.starts_with("screen-")
            || term.starts_with("screen."));
    json!({ "name": name, "colorMode": if truecolor { "truecolor" } else { "256color" } })
}
