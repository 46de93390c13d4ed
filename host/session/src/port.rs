//! The session as one extension instance reaches it: the runtime's [`ExtensionHost`] for the
//! extension at one index. The runtime has checked every value (names, JSON, sizes) before
//! these run; here they take effect in the session's registry, store, agent queues and UI
//! state, with pi's semantics.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::events::{DialogAnswer, SessionEvent, UiRequest};
use super::messages;
use super::state::{AgentRequest, RegisteredCommand, RegisteredTool, SessionShared, ToolSource};
use pichamber_access::{Grants, ProgramRequest};
use pichamber_runtime::wit::{CommandDefinition, ExecRequest, ExecResult, ToolDefinition};
use pichamber_runtime::{ExtensionHost, FlagSpec, HostWork, SessionFacts, WorkDone};

/// Session entries one extension may append (custom entries, custom messages, labels, names,
/// thinking-level changes), counted across restarts of its instance.
pub const MAX_ENTRIES: usize = 100_000;
/// Bytes of session entries one extension may append (they stay in host memory, outside its
/// `--memory-limit`, for the session's life).
pub const MAX_ENTRY_BYTES: usize = 64 << 20;
/// Messages that may wait in a session's queues for the next turn (steering, follow-up,
/// next-turn, triggered turns), and the size of one: they are host memory until delivered.
pub const MAX_QUEUED_MESSAGES: usize = 64;
pub const MAX_QUEUED_MESSAGE_BYTES: usize = 1 << 20;
/// Bytes of event-bus payloads waiting for delivery in a session.
pub const MAX_BUS_BYTES: usize = 16 << 20;
/// Event-bus messages waiting for delivery in a session.
pub const MAX_BUS_MESSAGES: usize = 10_000;
use super::store::MAX_TREE_ENTRIES;

/// Custom entry types the host records the writing extension's owner key on.
pub const OWNED_TYPE_PREFIX: &str = "pichamber.";

pub struct ExtensionPort {
    shared: Arc<SessionShared>,
    /// The extension's place in load order.
    index: usize,
    name: String,
    /// Recorded on its `pichamber.*` entries (see [`super::state::owner_key`]).
    owner: String,
    /// Session entries it appended, and their bytes.
    entries_appended: AtomicUsize,
    entry_bytes: AtomicUsize,
    /// A bus message was dropped and reported (reported once).
    bus_refusal_reported: std::sync::atomic::AtomicBool,
}

impl ExtensionPort {
    pub fn new(shared: Arc<SessionShared>, index: usize, name: &str, owner: String) -> Self {
        Self {
            shared,
            index,
            name: name.to_owned(),
            owner,
            entries_appended: AtomicUsize::new(0),
            entry_bytes: AtomicUsize::new(0),
            bus_refusal_reported: Default::default(),
        }
    }

    /// What names this extension where pi names its file (its commands' `sourceInfo.path`).
    fn source_path(&self) -> String {
        source_path_of(&self.shared.state.lock().unwrap(), self.index)
    }

    /// Queues `mcp_servers_change` with the servers as they are now, once the session started.
    fn announce_mcp_change(state: &mut super::SessionState) {
        if !state.announces_mcp_changes {
            return;
        }
        let servers = crate::mcp::listing(&state.mcp_servers, |i| source_path_of(state, i));
        state.raised.push_back((
            "mcp_servers_change".into(),
            json!({ "type": "mcp_servers_change", "servers": servers }),
        ));
    }

    /// Whether this extension may append another session entry holding about `bytes`.
    fn entry_budget(&self, bytes: usize) -> Result<(), String> {
        if self.entries_appended.load(Ordering::Relaxed) >= MAX_ENTRIES {
            return Err(format!(
                "this extension appended {MAX_ENTRIES} entries to the session; no more can be appended (per-extension limit)"
            ));
        }
        let used = self.entry_bytes.load(Ordering::Relaxed);
        if used.saturating_add(bytes) > MAX_ENTRY_BYTES {
            return Err(format!(
                "this extension's session entries would hold more than {} MiB; no more can be appended (per-extension limit)",
                MAX_ENTRY_BYTES >> 20
            ));
        }
        Ok(())
    }

    /// Counts an appended entry and tells the clients.
    fn appended(&self, entry: Value) {
        self.count_entry(&entry);
        self.shared.emit(SessionEvent::Entry { entry });
    }

    fn count_entry(&self, entry: &Value) {
        self.entries_appended.fetch_add(1, Ordering::Relaxed);
        let bytes = serde_json::to_string(entry).map_or(0, |t| t.len());
        self.entry_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Whether one more message may wait in the session's queues.
    fn queue_budget(state: &super::SessionState, message: &Value) -> Result<(), String> {
        let agent = &state.agent;
        let waiting = agent.steering.len()
            + agent.follow_up.len()
            + agent.next_turn.len()
            + agent.requests.len();
        if waiting >= MAX_QUEUED_MESSAGES {
            return Err(format!(
                "{waiting} messages already wait for the next turn; no more can be queued (per-session limit {MAX_QUEUED_MESSAGES})"
            ));
        }
        let bytes = serde_json::to_string(message).map_or(0, |t| t.len());
        if bytes > MAX_QUEUED_MESSAGE_BYTES {
            return Err(format!(
                "a message to queue for the next turn is {bytes} bytes; the limit is {MAX_QUEUED_MESSAGE_BYTES} (1 MiB)"
            ));
        }
        Ok(())
    }

    /// Whether the tool call `id` is running now and is this extension's tool (its partial
    /// results are this extension's to report, not another's).
    fn owns_running_call(&self, id: &str) -> bool {
        let state = self.shared.state.lock().unwrap();
        state
            .agent
            .running_tools
            .get(id)
            .and_then(|(name, _)| state.tool(name))
            .is_some_and(|tool| tool.source == ToolSource::Extension(self.index))
    }

    fn ui_event(&self, request: UiRequest) {
        self.shared.emit(SessionEvent::ExtensionUiRequest {
            id: uuid::Uuid::new_v4().to_string(),
            request,
        });
    }
}

impl ExtensionHost for ExtensionPort {
    fn facts(&self) -> SessionFacts {
        SessionFacts {
            cwd: self.shared.cwd.clone(),
            mode: self.shared.mode.clone(),
            has_ui: self.shared.has_ui,
            pi_version: self.shared.pi.number().to_owned(),
        }
    }

    fn call_context(&self) -> Value {
        self.shared.call_context()
    }

    fn log(&self, level: &'static str, message: String) {
        self.shared.emit(SessionEvent::Log {
            extension: self.name.clone(),
            level: level.into(),
            message,
        });
    }

    fn report_error(&self, event: String, error: String, stack: Option<String>) {
        self.shared.emit(SessionEvent::ExtensionError {
            extension: self.name.clone(),
            event,
            error,
            stack,
        });
    }

    fn register_tool(&self, tool: ToolDefinition, parameters: Value) -> bool {
        let mut registered = RegisteredTool::from_wit(self.index, &self.name, tool, parameters);
        // Exposure is pi 1.6.0's: a session that follows 0.73.1 declares every tool.
        if !self.shared.pi.is_1_6() {
            registered.exposure = Default::default();
            registered.default_active = None;
        }
        self.shared.state.lock().unwrap().register_tool(registered)
    }

    fn register_command(&self, command: CommandDefinition) {
        let registered = RegisteredCommand::from_wit(self.index, &self.name, command);
        self.shared
            .state
            .lock()
            .unwrap()
            .register_command(registered);
    }

    fn subscribe(&self, event: String) {
        let mut state = self.shared.state.lock().unwrap();
        let events = &mut state.registrations_mut(self.index).events;
        if !events.contains(&event) {
            events.push(event);
        }
    }

    fn subscribes(&self, event: &str) -> bool {
        let state = self.shared.state.lock().unwrap();
        state
            .registrations
            .get(self.index)
            .is_some_and(|r| r.events.iter().any(|e| e == event))
    }

    fn register_flag(&self, flag: FlagSpec) {
        let mut state = self.shared.state.lock().unwrap();
        if let Some(default) = &flag.default {
            state
                .flag_values
                .entry(flag.name.clone())
                .or_insert_with(|| default.clone());
        }
        // A name registered again replaces its earlier definition.
        let flags = &mut state.registrations_mut(self.index).flags;
        flags.retain(|f| f["name"] != json!(flag.name));
        flags.push(json!({
            "name": flag.name, "description": flag.description, "type": flag.kind, "default": flag.default,
        }));
    }

    fn register_shortcut(&self, shortcut: String, description: Option<String>) {
        let mut state = self.shared.state.lock().unwrap();
        let shortcuts = &mut state.registrations_mut(self.index).shortcuts;
        shortcuts.retain(|s| s["shortcut"] != json!(shortcut));
        shortcuts.push(json!({ "shortcut": shortcut, "description": description }));
    }

    fn register_message_renderer(&self, custom_type: String) {
        let mut state = self.shared.state.lock().unwrap();
        let renderers = &mut state.registrations_mut(self.index).message_renderers;
        if !renderers.contains(&custom_type) {
            renderers.push(custom_type);
        }
    }

    fn register_provider(&self, name: String, config: Value) {
        let mut state = self.shared.state.lock().unwrap();
        let providers = &mut state.registrations_mut(self.index).providers;
        providers.retain(|p| p["name"] != json!(name));
        providers.push(json!({ "name": name, "config": config }));
    }

    fn unregister_provider(&self, name: &str) {
        let mut state = self.shared.state.lock().unwrap();
        state
            .registrations_mut(self.index)
            .providers
            .retain(|p| p["name"] != json!(name));
    }

    fn register_virtual_model(&self, model: Value) -> Result<(), String> {
        let entry = crate::models::virtual_entry(&model)?;
        let (provider, id) = (&entry["provider"], &entry["id"]);
        let key = format!(
            "{}/{}",
            provider.as_str().unwrap_or_default(),
            id.as_str().unwrap_or_default()
        );
        if self.shared.catalog.find(&entry).is_some() {
            return Err(format!(
                "Virtual model {key} conflicts with a physical model."
            ));
        }
        let mut state = self.shared.state.lock().unwrap();
        let taken = state.registrations.iter().enumerate().any(|(i, r)| {
            i != self.index
                && r.virtual_models
                    .iter()
                    .any(|m| m["provider"] == *provider && m["id"] == *id)
        });
        if taken {
            return Err(format!(
                "Virtual model {key} is registered by another extension."
            ));
        }
        let models = &mut state.registrations_mut(self.index).virtual_models;
        models.retain(|m| m["provider"] != entry["provider"] || m["id"] != entry["id"]);
        models.push(entry);
        Ok(())
    }

    fn unregister_virtual_model(&self, provider: &str, id: &str) {
        let mut state = self.shared.state.lock().unwrap();
        state
            .registrations_mut(self.index)
            .virtual_models
            .retain(|m| m["provider"] != provider || m["id"] != id);
    }

    fn register_mcp_server(&self, name: String, config: Value) -> Result<(), String> {
        let invalid = |error: String| {
            format!(
                "Invalid MCP server registered by extension \"{}\": {error}",
                self.source_path()
            )
        };
        let config = pichamber_mcp::config::validate(&name, &config).map_err(invalid)?;
        let mut state = self.shared.state.lock().unwrap();
        if let Some(other) = state
            .mcp_servers
            .iter()
            .find(|s| s.name == name && s.extension != self.index)
        {
            return Err(format!(
                "MCP server \"{name}\" is already registered by extension \"{}\"",
                source_path_of(&state, other.extension)
            ));
        }
        let server = crate::mcp::McpServer {
            name: name.clone(),
            config,
            extension: self.index,
        };
        match state.mcp_servers.iter_mut().find(|s| s.name == name) {
            Some(existing) => *existing = server,
            None => state.mcp_servers.push(server),
        }
        Self::announce_mcp_change(&mut state);
        Ok(())
    }

    fn unregister_mcp_server(&self, name: &str) {
        let mut state = self.shared.state.lock().unwrap();
        let before = state.mcp_servers.len();
        state
            .mcp_servers
            .retain(|s| s.name != name || s.extension != self.index);
        if state.mcp_servers.len() != before {
            Self::announce_mcp_change(&mut state);
        }
    }

    fn mcp_servers(&self) -> Value {
        let state = self.shared.state.lock().unwrap();
        crate::mcp::listing(&state.mcp_servers, |i| source_path_of(&state, i))
    }

    fn models(&self) -> Value {
        crate::Session::registry_models(&self.shared)
    }

    fn credentials(
        &self,
        provider: &str,
        model_id: Option<&str>,
    ) -> (Option<String>, Vec<(String, String)>) {
        crate::Session::registry_credentials(&self.shared, provider, model_id)
    }

    fn flag(&self, name: &str) -> Option<Value> {
        self.shared
            .state
            .lock()
            .unwrap()
            .flag_values
            .get(name)
            .cloned()
    }

    fn forget_registrations(&self) -> Vec<String> {
        let mut state = self.shared.state.lock().unwrap();
        let index = self.index;
        let own: Vec<String> = state
            .tools
            .iter()
            .filter(|t| t.source == ToolSource::Extension(index))
            .map(|t| t.name.clone())
            .collect();
        let inactive = own
            .iter()
            .filter(|n| !state.active_tools.contains(n))
            .cloned()
            .collect();
        state.forget_extension(index);
        inactive
    }

    fn settle_active_tools(&self, inactive: &[String]) {
        let mut state = self.shared.state.lock().unwrap();
        let mut active = std::mem::take(&mut state.active_tools);
        active.retain(|n| !inactive.contains(n) && state.tool(n).is_some());
        state.active_tools = active;
    }

    fn send_message(&self, message: Value, options: Value) -> Result<(), String> {
        let custom_type = message
            .get("customType")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let custom = messages::custom_message(&message);
        let deliver_as = options.get("deliverAs").and_then(Value::as_str);
        let mut state = self.shared.state.lock().unwrap();
        let queued = deliver_as == Some("nextTurn")
            || state.agent.streaming
            || options.get("triggerTurn") == Some(&json!(true));
        if queued {
            Self::queue_budget(&state, &custom).map_err(|e| format!("sendMessage: {e}"))?;
        }
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
            self.entry_budget(custom.to_string().len())?;
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
            self.appended(entry);
            self.shared.emit(SessionEvent::Agent(
                json!({ "type": "message_start", "message": custom }),
            ));
            self.shared.emit(SessionEvent::Agent(
                json!({ "type": "message_end", "message": custom }),
            ));
        }
        Ok(())
    }

    fn send_user_message(&self, content: Value, options: Value) -> Result<(), String> {
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
        // pi 1.6.0: `expandPromptTemplates` makes the text a prompt as a user would type it.
        let commands = options.get("expandPromptTemplates") == Some(&json!(true));
        let mut state = self.shared.state.lock().unwrap();
        Self::queue_budget(&state, &json!([&text, &images]))
            .map_err(|e| format!("sendUserMessage: {e}"))?;
        state.agent.requests.push_back(AgentRequest::UserMessage {
            text,
            images,
            deliver_as,
            source: "extension",
            commands,
            respond: None,
        });
        Ok(())
    }

    fn append_entry(&self, custom_type: String, data: Value) -> Result<(), String> {
        // Router state is the host's record of what a router returned: an extension writing
        // it could steer another extension's virtual model.
        if custom_type == crate::models::VIRTUAL_STATE_ENTRY {
            return Err(format!(
                "appendEntry: \"{custom_type}\" is the host's record of virtual-model router state; return the state from route() instead"
            ));
        }
        // Counted per extension: one that fills its share leaves the others theirs.
        self.entry_budget(custom_type.len() + data.to_string().len())?;
        // The GUI protocol's entries (cards, panels, app surfaces) record which extension
        // wrote them, beside the data, so one extension's panel or app never replaces
        // another's.
        let owner = custom_type
            .starts_with(OWNED_TYPE_PREFIX)
            .then_some(self.owner.as_str());
        let mut state = self.shared.state.lock().unwrap();
        let entry = state
            .store
            .append_owned_custom_entry(&custom_type, Some(data).filter(|d| !d.is_null()), owner)
            .map_err(|e| format!("appendEntry: {e:#}"))?;
        drop(state);
        // pi 1.6.0 announces what appendEntry recorded (`entry_appended`).
        self.count_entry(&entry);
        self.shared.emit(SessionEvent::EntryAppended { entry });
        Ok(())
    }

    fn set_session_name(&self, name: String) -> Result<(), String> {
        self.entry_budget(name.len())
            .map_err(|e| format!("setSessionName: {e}"))?;
        let mut state = self.shared.state.lock().unwrap();
        let entry = state
            .store
            .append_session_info(&name)
            .map_err(|e| format!("setSessionName: {e:#}"))?;
        drop(state);
        self.appended(entry);
        self.shared.emit(SessionEvent::Agent(
            json!({ "type": "session_info_changed", "name": name }),
        ));
        Ok(())
    }

    fn session_name(&self) -> Option<String> {
        self.shared.state.lock().unwrap().store.get_session_name()
    }

    fn set_label(&self, entry_id: String, label: Option<String>) -> Result<(), String> {
        self.entry_budget(entry_id.len() + label.as_ref().map_or(0, String::len))
            .map_err(|e| format!("setLabel: {e}"))?;
        let mut state = self.shared.state.lock().unwrap();
        if state.store.get_entry(&entry_id).is_none() {
            return Err(format!("setLabel: no entry with id {entry_id:?}"));
        }
        let entry = state
            .store
            .append_label_change(&entry_id, label.as_deref())
            .map_err(|e| format!("setLabel: {e:#}"))?;
        drop(state);
        self.appended(entry);
        Ok(())
    }

    fn session_read(&self, method: &str, args: Value) -> Result<Value, String> {
        let arg = |i: usize| args.get(i).and_then(Value::as_str).map(str::to_owned);
        let mut state = self.shared.state.lock().unwrap();
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
                return Err(format!("ctx.{action} is not a session action"));
            }
            state.agent.requests.push_back(AgentRequest::SessionAction {
                action: action.to_owned(),
                args: args.get(0).cloned().unwrap_or(Value::Null),
            });
            return Ok(Value::Null);
        }
        // pi 1.6.0's boundary preview: the context as it would be with the proposed entries.
        if method == "boundaryContext" {
            let boundary = arg(0)
                .and_then(|name| crate::boundary::Boundary::parse(&name))
                .ok_or("boundaryContext: turn_end or agent_before_settle")?;
            let drafts = args.get(1).unwrap_or(&Value::Null);
            return crate::boundary::preview(&state, boundary, drafts);
        }
        if method == "getSystemPromptOptions" {
            return Ok(state
                .command_prompt_options
                .as_ref()
                .map_or_else(|| json!({}), |o| o.to_json_for(self.shared.pi)));
        }
        let store = &state.store;
        let list = |entries: Vec<&Value>| Value::Array(entries.into_iter().cloned().collect());
        Ok(match method {
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
            "getCwd" => json!(self.shared.cwd),
            // pi's tree nests as deep as the longest chain; building and serialising it
            // recurses, so a session an extension grew very long is refused, not a crash.
            "getTree" if store.get_entries().len() > MAX_TREE_ENTRIES => {
                return Err(format!(
                    "sessionManager.getTree: the session has more than {MAX_TREE_ENTRIES} entries; use getEntries() or getBranch()"
                ));
            }
            "getTree" => store.get_tree().to_json(),
            other => {
                return Err(format!(
                    "sessionManager.{other} is not available to extensions"
                ));
            }
        })
    }

    fn active_tools(&self) -> Vec<String> {
        self.shared.state.lock().unwrap().active_tool_names()
    }

    fn all_tools(&self) -> Value {
        let state = self.shared.state.lock().unwrap();
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
                    // A built-in extension's (`extension_name` is its `builtin:NAME`).
                    ToolSource::Host => json!({
                        "path": t.extension_name, "source": "builtin",
                        "scope": "temporary", "origin": "top-level",
                    }),
                };
                let mut tool = json!({
                    "name": t.name, "description": t.description, "parameters": t.parameters,
                });
                // pi 1.6.0 also lists a tool's guidelines, exposure, namespace and hints.
                if self.shared.pi.is_1_6() {
                    if !t.prompt_guidelines.is_empty() {
                        tool["promptGuidelines"] = json!(t.prompt_guidelines);
                    }
                    tool["exposure"] = json!(t.exposure.name());
                    if let Some(namespace) = &t.namespace {
                        tool["namespace"] = namespace.clone();
                    }
                    if let Some(annotations) = &t.annotations {
                        tool["annotations"] = annotations.clone();
                    }
                }
                tool["sourceInfo"] = source_info;
                tool
            })
            .collect();
        Value::Array(tools)
    }

    fn set_active_tools(&self, names: Vec<String>) {
        // pi ignores names it does not know (and 1.6.0 hidden tools).
        let keep_order = self.shared.pi.is_1_6();
        self.shared
            .state
            .lock()
            .unwrap()
            .set_active(&names, keep_order);
    }

    fn commands(&self) -> Value {
        self.shared.state.lock().unwrap().commands_json()
    }

    fn model(&self) -> Option<Value> {
        self.shared.state.lock().unwrap().model.clone()
    }

    fn set_model(&self, _model: Value) -> bool {
        // No model registry in this host yet: pi answers false for a model it cannot use.
        false
    }

    fn thinking_level(&self) -> String {
        self.shared.state.lock().unwrap().thinking_level.clone()
    }

    fn set_thinking_level(&self, level: String) -> Result<(), String> {
        const LEVELS: [&str; 6] = ["off", "minimal", "low", "medium", "high", "xhigh"];
        if !LEVELS.contains(&level.as_str()) {
            return Err(format!(
                "unknown thinking level {level:?}; one of {LEVELS:?}"
            ));
        }
        self.entry_budget(level.len())
            .map_err(|e| format!("setThinkingLevel: {e}"))?;
        let mut state = self.shared.state.lock().unwrap();
        let previous = std::mem::replace(&mut state.thinking_level, level.clone());
        if previous == level {
            return Ok(());
        }
        // As pi: recorded, clients told, extensions get thinking_level_select (after this call).
        let entry = state
            .store
            .append_thinking_level_change(&level)
            .map_err(|e| format!("setThinkingLevel: {e:#}"))?;
        self.count_entry(&entry);
        state.agent.requests.push_back(AgentRequest::Event {
            name: "thinking_level_select".into(),
            event: json!({ "type": "thinking_level_select", "level": level, "previousLevel": previous }),
        });
        drop(state);
        self.shared.emit(SessionEvent::Agent(
            json!({ "type": "thinking_level_changed", "level": level }),
        ));
        Ok(())
    }

    fn emit_bus_event(&self, channel: String, data: String) {
        let mut state = self.shared.state.lock().unwrap();
        let bytes = channel.len() + data.len();
        if state.bus.len() >= MAX_BUS_MESSAGES || state.bus_bytes + bytes > MAX_BUS_BYTES {
            drop(state);
            if !self.bus_refusal_reported.swap(true, Ordering::Relaxed) {
                self.report_error(
                    format!("limit:events:{channel}"),
                    format!(
                        "pi.events.emit: the session's event bus already holds {MAX_BUS_MESSAGES} messages or {} MiB waiting for delivery; this one and later ones over the limit are dropped",
                        MAX_BUS_BYTES >> 20
                    ),
                    None,
                );
            }
            return;
        }
        state.bus_bytes += bytes;
        state.bus.push_back((self.index, channel, data));
    }

    fn is_idle(&self) -> bool {
        !self.shared.state.lock().unwrap().agent.streaming
    }

    fn abort(&self) {
        self.shared.abort.send_replace(true);
    }

    fn has_pending_messages(&self) -> bool {
        let state = self.shared.state.lock().unwrap();
        !state.agent.steering.is_empty() || !state.agent.follow_up.is_empty()
    }

    fn request_shutdown(&self) {
        self.shared.state.lock().unwrap().shutdown_requested = true;
    }

    fn context_usage(&self) -> Option<Value> {
        self.shared
            .state
            .lock()
            .unwrap()
            .context_usage(self.shared.pi)
    }

    fn system_prompt(&self) -> String {
        self.shared
            .state
            .lock()
            .unwrap()
            .agent
            .system_prompt
            .clone()
    }

    fn compact(&self, instructions: Option<String>, callback: Option<u64>) {
        let reply_to = callback.map(|id| (self.index, id));
        let mut state = self.shared.state.lock().unwrap();
        state.agent.requests.push_back(AgentRequest::Compact {
            instructions,
            reply_to,
        });
    }

    fn update_ui(&self, request: &UiRequest) {
        let mut state = self.shared.state.lock().unwrap();
        match request {
            UiRequest::SetStatus {
                key,
                text: Some(text),
            } => {
                state.statuses.insert(key.clone(), text.clone());
            }
            UiRequest::SetStatus { key, text: None } => {
                state.statuses.remove(key);
            }
            UiRequest::SetWidget {
                key,
                lines: Some(lines),
                ..
            } => {
                state.widgets.insert(key.clone(), lines.clone());
            }
            UiRequest::SetWidget {
                key, lines: None, ..
            } => {
                state.widgets.remove(key);
            }
            UiRequest::SetTitle { title } => state.title = Some(title.clone()),
            _ => {}
        }
    }

    fn show_ui(&self, request: UiRequest) {
        self.ui_event(request);
    }

    fn editor_text(&self) -> String {
        // pi's RPC mode cannot read a remote editor synchronously and answers "".
        String::new()
    }

    fn clear_editor_text(&self) {
        // pi sends the request without a text.
        if self.shared.has_ui {
            self.ui_event(UiRequest::SetEditorText { text: None });
        }
    }

    fn theme(&self) -> Value {
        let mut theme = terminal_theme();
        // pi 1.6.0's default is its "system" theme, which RPC mode builds from the terminal's
        // palette indices (0.73.1 picked dark or light).
        if self.shared.pi == pichamber_pi::PiVersion::V1_6 {
            theme["name"] = json!("system");
        }
        theme
    }

    fn settings(&self) -> Value {
        self.shared.state.lock().unwrap().settings.clone()
    }

    fn builtin_tools(&self) -> Value {
        // What the guest's createReadTool & co. describe: the host's wording, for the pi
        // release the session follows.
        pichamber_tools::builtin_specs(self.shared.pi)
            .into_iter()
            .map(|s| {
                json!({
                    "name": s.name, "description": s.description,
                    "promptSnippet": s.prompt_snippet,
                    "promptGuidelines": s.prompt_guidelines,
                    "parameters": s.parameters,
                    "constrainedSampling": s.constrained_sampling,
                })
            })
            .collect()
    }

    fn tool_update(&self, tool_call_id: &str, partial: Value) {
        if self.owns_running_call(tool_call_id) {
            super::tool_calls::report_update(&self.shared, tool_call_id, partial);
        }
    }

    fn dialog(&self, request: UiRequest) -> BoxFuture<'static, DialogAnswer> {
        let id = uuid::Uuid::new_v4().to_string();
        let timeout = request.timeout_ms();
        let answer = self.shared.dialogs.answer(&id, &request);
        let prompt = self.shared.pi.is_1_6().then(|| {
            let mut state = self.shared.state.lock().unwrap();
            ui_prompt_opened(&mut state, &request);
        });
        self.shared.emit(SessionEvent::ExtensionUiRequest {
            id: id.clone(),
            request,
        });
        let shared = self.shared.clone();
        async move {
            let answer = match timeout {
                Some(ms) => tokio::time::timeout(Duration::from_millis(ms.into()), answer)
                    .await
                    .unwrap_or_else(|_| DialogAnswer::cancelled()),
                None => answer.await,
            };
            shared.emit(SessionEvent::ExtensionUiResponse {
                id,
                answer: answer.clone(),
            });
            if prompt.is_some() {
                ui_prompt_closed(&mut shared.state.lock().unwrap());
            }
            answer
        }
        .boxed()
    }

    fn wake(&self) {
        self.shared.activity.notify_one();
    }

    fn work(
        &self,
        grants: &Arc<Grants>,
        work: HostWork,
    ) -> BoxFuture<'static, Result<WorkDone, String>> {
        let grants = grants.clone();
        let cwd = self.shared.cwd.clone();
        match work {
            // fetch is carried out by the host under the network capability.
            HostWork::Fetch(request) => async move {
                let response = pichamber_access::net::fetch(&grants, request).await?;
                Ok(WorkDone::Fetch(response))
            }
            .boxed(),
            // pi 1.6.0's resizeImage: the host's image codec, off the async threads.
            HostWork::ResizeImage {
                bytes,
                mime,
                options,
            } => {
                let pi = self.shared.pi;
                async move {
                    let number =
                        |key: &str| options[key].as_f64().filter(|n| n.is_finite() && *n >= 1.0);
                    let defaults = pichamber_tools::ResizeLimits::default();
                    let side = |key: &str, default: u32| {
                        number(key).map_or(default, |n| n.min(16_384.0) as u32)
                    };
                    let limits = pichamber_tools::ResizeLimits {
                        max_width: side("maxWidth", defaults.max_width),
                        max_height: side("maxHeight", defaults.max_height),
                        max_bytes: number("maxBytes").map_or(defaults.max_bytes, |n| n as usize),
                        jpeg_quality: number("jpegQuality")
                            .map_or(defaults.jpeg_quality, |n| n.min(100.0) as u8),
                    };
                    let resized = tokio::task::spawn_blocking(move || {
                        pichamber_tools::resize_image(&bytes, &mime, &limits, pi)
                    })
                    .await
                    .map_err(|e| format!("resizeImage failed: {e}"))?;
                    Ok(WorkDone::ResizeImage(resized.map(|r| {
                        json!({
                            "data": r.data,
                            "mimeType": r.mime,
                            "originalWidth": r.original.0,
                            "originalHeight": r.original.1,
                            "width": r.size.0,
                            "height": r.size.1,
                            "wasResized": r.was_resized,
                        })
                    })))
                }
                .boxed()
            }
            HostWork::DnsLookup(name) => async move {
                let addresses = pichamber_access::net::lookup(&grants, &name).await?;
                Ok(WorkDone::DnsLookup(addresses))
            }
            .boxed(),
            // pi's built-in tools, run for the extension under its own grants.
            HostWork::BuiltinTool {
                tool,
                params,
                cwd: tool_cwd,
                update_id,
            } => {
                let update_id = update_id.filter(|id| self.owns_running_call(id));
                let shared = self.shared.clone();
                let pi = self.shared.pi;
                async move {
                    let on_update = move |partial: Value| {
                        if let Some(id) = &update_id {
                            super::tool_calls::report_update(&shared, id, partial);
                        }
                    };
                    let cwd = std::path::PathBuf::from(tool_cwd.as_deref().unwrap_or(&cwd));
                    let result = pichamber_tools::for_extension::run(
                        &grants, &tool, params, &cwd, pi, &on_update,
                    )
                    .await?;
                    Ok(WorkDone::BuiltinTool(result))
                }
                .boxed()
            }
            // ctx.executeTool (pi 1.6.0): the session runs the call while this extension's
            // tool waits for it.
            HostWork::NestedTool {
                tool,
                arguments,
                parent,
            } => {
                let outcome = self
                    .shared
                    .nested
                    .request(self.index, parent, tool, arguments);
                async move {
                    let outcome = outcome?.await.map_err(|_| {
                        "ctx.executeTool: the calling tool call ended first".to_owned()
                    })?;
                    Ok(WorkDone::NestedTool(outcome))
                }
                .boxed()
            }
            // ctx.modelRegistry.complete: the host calls the model with its own credentials.
            HostWork::Model {
                provider,
                model_id,
                context,
                options,
            } => {
                let catalog = self.shared.catalog.clone();
                let pi = self.shared.pi;
                async move {
                    let model = catalog.get(&provider, &model_id).ok_or_else(|| {
                        format!("Model {provider}/{model_id} is not one this session can call")
                    })?;
                    if !model.has_api_key() {
                        return Err(format!("No API key for {provider}/{model_id}"));
                    }
                    Ok(WorkDone::Model(
                        crate::models::complete(&model, &context, &options, pi).await,
                    ))
                }
                .boxed()
            }
            HostWork::Program(request) => async move {
                let output = grants.run_program(program_request(request), cwd).await?;
                Ok(WorkDone::Program(ExecResult {
                    stdout: output.stdout,
                    stderr: output.stderr,
                    code: output.code,
                    killed: output.killed,
                }))
            }
            .boxed(),
        }
    }
}

/// pi 1.6.0's `ui_prompt_start`, raised when the first of the dialogs open at a time opens
/// (pi counts nested prompts as one). pi calls the handlers while the dialog is up; pichamber
/// when the call that opened it returned (an extension is never re-entered).
fn ui_prompt_opened(state: &mut super::SessionState, request: &UiRequest) {
    state.ui_prompts_open += 1;
    if state.ui_prompts_open > 1 {
        return;
    }
    let (kind, title) = match request {
        UiRequest::Select { title, .. } => ("select", title),
        UiRequest::Confirm { title, .. } => ("confirm", title),
        UiRequest::Input { title, .. } => ("input", title),
        UiRequest::Editor { title, .. } => ("editor", title),
        // pichamber's form is an extension's own dialog, as pi's `custom` is.
        UiRequest::Form { title, .. } => ("custom", title),
        _ => return,
    };
    let mut event = json!({ "type": "ui_prompt_start", "reason": "ui_prompt", "kind": kind });
    if !title.is_empty() {
        event["title"] = json!(title);
    }
    state.ui_prompt = Some(event.clone());
    state.raised.push_back(("ui_prompt_start".into(), event));
}

/// `ui_prompt_end` of the prompt `ui_prompt_opened` announced, when the last one closes.
fn ui_prompt_closed(state: &mut super::SessionState) {
    state.ui_prompts_open = state.ui_prompts_open.saturating_sub(1);
    if state.ui_prompts_open > 0 {
        return;
    }
    if let Some(mut event) = state.ui_prompt.take() {
        event["type"] = json!("ui_prompt_end");
        state.raised.push_back(("ui_prompt_end".into(), event));
    }
}

pub(crate) fn source_path_of(state: &super::SessionState, extension: usize) -> String {
    state
        .extension_sources
        .get(extension)
        .and_then(|info| info["path"].as_str())
        .unwrap_or("<unknown>")
        .to_owned()
}

fn program_request(request: ExecRequest) -> ProgramRequest {
    ProgramRequest {
        command: request.command,
        args: request.args,
        cwd: request.cwd,
        timeout_ms: request.timeout_ms,
        env: Vec::new(),
    }
}

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
