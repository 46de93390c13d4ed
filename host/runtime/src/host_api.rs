//! The `host` interface: what an extension may ask of its session. Every value from the guest
//! is untrusted: sizes are capped, names checked, JSON parsed, volume budgets kept, and only
//! then is the call handed to the session through [`ExtensionHost`]. A value that breaks a
//! rule is refused with an error the extension sees as an ordinary JS exception.

use std::time::{Duration, Instant};

use futures::FutureExt;
use pichamber_access::ProgramRequest;
use serde_json::{Value, json};
use wasmtime::Result;

use super::boundary::{
    MAX_JSON_BYTES, MAX_NAME_BYTES, TOOL_EXPOSURES, check_name, parse_json, truncate,
};
use super::extension_host::{FlagSpec, HostWork, WorkDone};
use super::instance::{ExtensionState, WallDeadlineExceeded};
use super::latest::pichamber::extension::credentials as credentials_api;
use super::latest::pichamber::extension::host::Host;
use super::latest::pichamber::extension::programs as programs_api;
use super::latest::pichamber::extension::types;
use super::latest::pichamber::extension::workers as workers_api;
use super::limits::{Exceeded, Kind};
use super::operations::Waited;
use super::programs::Output;
use super::schema_cost::check_schema_cost;
use super::ui::{DialogAnswer, UiRequest};
use super::wit::{
    Completion, Dialog, DialogAnswer as WitAnswer, FlagType, LogLevel, NotifyKind, Operation,
    Outcome,
};

/// Longest console line kept.
pub const MAX_LOG_BYTES: usize = 16 << 10;
/// The largest image an extension may hand `resizeImage` (the read tool's images are files).
pub const MAX_IMAGE_BYTES: usize = 32 << 20;

impl types::Host for ExtensionState {}

fn opt_len(text: &Option<String>) -> usize {
    text.as_ref().map_or(0, String::len)
}

impl ExtensionState {
    /// Reports a volume limit the first time it bites in a call (and in a second).
    fn over_limit(&self, what: &str, exceeded: Exceeded, consequence: &str) -> String {
        let message = format!("{}; {consequence}", exceeded.message);
        if exceeded.report {
            self.host
                .report_error(format!("limit:{what}"), message.clone(), None);
        }
        message
    }

    /// A status or widget over the registration caps is not kept (`ui` has no error to
    /// return): reported once per instance.
    fn ui_refused(&mut self, message: &str) {
        if !std::mem::replace(&mut self.ui_refusal_reported, true) {
            self.host.report_error(
                "limit:ui".into(),
                format!("{message}; further ones are dropped"),
                None,
            );
        }
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
        self.host.log(level, message);
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
        self.host.report_error(
            truncate(&event, MAX_NAME_BYTES),
            truncate(&self.source_maps.remap(&message), MAX_LOG_BYTES),
            stack,
        );
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
            check_schema_cost(&parameters)
                .map_err(|e| format!("registerTool {}: {e}", tool.name))?;
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
                + opt_len(&tool.execution_mode)
                + opt_len(&tool.constrained_sampling)
                + opt_len(&tool.exposure)
                + opt_len(&tool.namespace)
                + opt_len(&tool.annotations);
            if let Some(text) = &tool.constrained_sampling {
                parse_json("constrainedSampling", text)?;
            }
            for (what, text) in [
                ("namespace", &tool.namespace),
                ("annotations", &tool.annotations),
            ] {
                if let Some(text) = text {
                    parse_json(what, text)?;
                }
            }
            if let Some(exposure) = &tool.exposure
                && !TOOL_EXPOSURES.contains(&exposure.as_str())
            {
                return Err(format!(
                    "registerTool {}: exposure must be one of {}, not {exposure:?}",
                    tool.name,
                    TOOL_EXPOSURES.join(", ")
                ));
            }
            self.registry
                .admit(Kind::Tool, &tool.name, bytes)
                .map_err(|e| format!("registerTool {}: {e}", tool.name))?;
            let name = tool.name.clone();
            if !self.host.register_tool(tool, parameters) {
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
            self.host.register_command(command);
            Ok(())
        })())
    }

    fn subscribe(&mut self, event: String) -> Result<Result<(), String>> {
        Ok((|| {
            check_name("event", &event)?;
            self.registry
                .admit(Kind::Event, &event, event.len())
                .map_err(|e| format!("pi.on({event}): {e}"))?;
            self.host.subscribe(event);
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
            let kind = match flag.flag_type {
                FlagType::Boolean => "boolean",
                FlagType::Text => "string",
            };
            self.host.register_flag(FlagSpec {
                name: flag.name,
                description: flag.description,
                kind,
                default,
            });
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
        self.host.register_shortcut(key, shortcut.description);
        Ok(Ok(()))
    }

    fn register_message_renderer(&mut self, custom_type: String) -> Result<Result<(), String>> {
        Ok((|| {
            check_name("message renderer", &custom_type)?;
            self.registry
                .admit(Kind::MessageRenderer, &custom_type, custom_type.len())
                .map_err(|e| format!("registerMessageRenderer {custom_type}: {e}"))?;
            self.host.register_message_renderer(custom_type);
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
            self.host.register_provider(name, config);
            Ok(())
        })())
    }

    fn unregister_provider(&mut self, name: String) -> Result<()> {
        self.registry.release(Kind::Provider, &name);
        self.host.unregister_provider(&name);
        Ok(())
    }

    fn register_virtual_model(&mut self, model: String) -> Result<Result<(), String>> {
        Ok((|| {
            let model = parse_json("virtual model", &model)?;
            let (Some(provider), Some(id)) = (model["provider"].as_str(), model["id"].as_str())
            else {
                return Err(
                    "registerVirtualModel: the model needs a provider and an id (strings)".into(),
                );
            };
            check_name("virtual model provider", provider)?;
            check_name("virtual model id", id)?;
            let key = format!("{provider}/{id}");
            self.registry
                .admit(Kind::VirtualModel, &key, model.to_string().len())
                .map_err(|e| format!("registerVirtualModel {key}: {e}"))?;
            self.host
                .register_virtual_model(model)
                .inspect_err(|_| self.registry.release(Kind::VirtualModel, &key))
        })())
    }

    fn unregister_virtual_model(&mut self, provider: String, id: String) -> Result<()> {
        self.registry
            .release(Kind::VirtualModel, &format!("{provider}/{id}"));
        self.host.unregister_virtual_model(&provider, &id);
        Ok(())
    }

    fn register_mcp_server(&mut self, name: String, config: String) -> Result<Result<(), String>> {
        Ok((|| {
            let bytes = name.len() + config.len();
            let config = parse_json("MCP server config", &config)?;
            self.registry
                .admit(Kind::McpServer, &name, bytes)
                .map_err(|e| format!("registerMcpServer {name}: {e}"))?;
            self.host
                .register_mcp_server(name.clone(), config)
                .inspect_err(|_| self.registry.release(Kind::McpServer, &name))
        })())
    }

    fn unregister_mcp_server(&mut self, name: String) -> Result<()> {
        self.registry.release(Kind::McpServer, &name);
        self.host.unregister_mcp_server(&name);
        Ok(())
    }

    fn get_mcp_servers(&mut self) -> Result<String> {
        Ok(self.host.mcp_servers().to_string())
    }

    fn get_flag(&mut self, name: String) -> Result<Option<String>> {
        Ok(self.host.flag(&name).map(|v| v.to_string()))
    }

    fn send_message(&mut self, message: String, options: String) -> Result<Result<(), String>> {
        Ok((|| {
            let message = parse_json("message", &message)?;
            let options = parse_json("message options", &options)?;
            // pi takes a message without a customType (it stays absent); one that is given
            // is a name like any other.
            if let Some(custom_type) = message.get("customType").and_then(Value::as_str) {
                check_name("customType", custom_type)?;
            }
            self.host.send_message(message, options)
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
            self.host.send_user_message(content, options)
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
            self.host.append_entry(custom_type, data)
        })())
    }

    fn set_session_name(&mut self, name: String) -> Result<Result<(), String>> {
        Ok(self.host.set_session_name(truncate(name.trim(), 256)))
    }

    fn get_session_name(&mut self) -> Result<Option<String>> {
        Ok(self.host.session_name())
    }

    fn set_label(&mut self, entry_id: String, label: Option<String>) -> Result<Result<(), String>> {
        let label = label.map(|l| truncate(&l, 256));
        Ok(self.host.set_label(entry_id, label))
    }

    fn session_read(&mut self, method: String, args: String) -> Result<Result<String, String>> {
        Ok((|| {
            let args = parse_json("arguments", &args)?;
            Ok(self.host.session_read(&method, args)?.to_string())
        })())
    }

    fn get_builtin_tools(&mut self) -> Result<String> {
        Ok(self.host.builtin_tools().to_string())
    }

    fn get_settings(&mut self) -> Result<String> {
        Ok(self.host.settings().to_string())
    }

    fn get_active_tools(&mut self) -> Result<Vec<String>> {
        Ok(self.host.active_tools())
    }

    fn get_all_tools(&mut self) -> Result<String> {
        Ok(self.host.all_tools().to_string())
    }

    fn set_active_tools(&mut self, names: Vec<String>) -> Result<Result<(), String>> {
        self.host.set_active_tools(names);
        Ok(Ok(()))
    }

    fn get_commands(&mut self) -> Result<String> {
        Ok(self.host.commands().to_string())
    }

    fn get_model(&mut self) -> Result<Option<String>> {
        Ok(self.host.model().map(|m| m.to_string()))
    }

    fn set_model(&mut self, model: String) -> Result<bool> {
        Ok(match parse_json("model", &model) {
            Ok(model) => self.host.set_model(model),
            Err(_) => false,
        })
    }

    fn get_models(&mut self) -> Result<String> {
        Ok(self.host.models().to_string())
    }

    fn get_thinking_level(&mut self) -> Result<String> {
        Ok(self.host.thinking_level())
    }

    fn set_thinking_level(&mut self, level: String) -> Result<Result<(), String>> {
        Ok(self.host.set_thinking_level(level))
    }

    fn emit_bus_event(&mut self, channel: String, data: String) -> Result<()> {
        if channel.len() > MAX_NAME_BYTES || data.len() > MAX_JSON_BYTES {
            return Ok(());
        }
        self.host.emit_bus_event(channel, data);
        Ok(())
    }

    fn is_idle(&mut self) -> Result<bool> {
        Ok(self.host.is_idle())
    }

    fn abort(&mut self) -> Result<()> {
        self.host.abort();
        Ok(())
    }

    fn has_pending_messages(&mut self) -> Result<bool> {
        Ok(self.host.has_pending_messages())
    }

    fn shutdown(&mut self) -> Result<()> {
        self.host.request_shutdown();
        Ok(())
    }

    fn get_context_usage(&mut self) -> Result<Option<String>> {
        Ok(self.host.context_usage().map(|u| u.to_string()))
    }

    fn get_system_prompt(&mut self) -> Result<String> {
        Ok(self.host.system_prompt())
    }

    fn compact(&mut self, options: String) -> Result<()> {
        // pi compacts in the background; here it runs once the current call returns.
        let options = parse_json("compact options", &options).unwrap_or(Value::Null);
        let instructions = options["customInstructions"].as_str().map(str::to_owned);
        self.host
            .compact(instructions, options["callback"].as_u64());
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
                let placement = w
                    .placement
                    .filter(|p| p == "aboveEditor" || p == "belowEditor");
                UiRequest::SetWidget {
                    key,
                    lines,
                    placement,
                }
            }
            types::UiUpdate::Title(title) => UiRequest::SetTitle {
                title: truncate(&title, 256),
            },
            types::UiUpdate::EditorText(text) => UiRequest::SetEditorText {
                text: Some(truncate(&text, 1 << 20)),
            },
        };
        self.host.update_ui(&request);
        if self.has_ui {
            // The state above is kept; what floods the client is the stream of updates.
            let bytes = serde_json::to_string(&request).map_or(0, |t| t.len());
            if let Err(exceeded) = self.ui.admit(bytes) {
                self.over_limit("ui", exceeded, "the rest is dropped");
                return Ok(());
            }
            self.host.show_ui(request);
        }
        Ok(())
    }

    fn get_editor_text(&mut self) -> Result<String> {
        Ok(self.host.editor_text())
    }

    fn clear_editor_text(&mut self) -> Result<()> {
        self.host.clear_editor_text();
        Ok(())
    }

    fn get_theme(&mut self) -> Result<String> {
        Ok(self.host.theme().to_string())
    }

    fn tool_update(&mut self, tool_call_id: String, partial: String) -> Result<()> {
        if let Ok(partial) = parse_json("tool update", &partial) {
            self.host.tool_update(&tool_call_id, partial);
        }
        Ok(())
    }

    fn start(&mut self, op: Operation) -> Result<Result<u32, String>> {
        let person = matches!(op, Operation::Dialog(_));
        let work = match op {
            Operation::Dialog(dialog) => {
                let request = match Self::dialog_request(dialog) {
                    Ok(r) => r,
                    Err(e) => return Ok(Err(e)),
                };
                if !self.has_ui {
                    // pi's print mode: no UI, dialogs resolve to their defaults.
                    futures::future::ready(Outcome::Dialog(WitAnswer::Cancelled)).boxed()
                } else if let Err(exceeded) = self.dialogs.admit(0) {
                    return Ok(Err(self.over_limit(
                        "dialog",
                        exceeded,
                        "the dialog is refused",
                    )));
                } else {
                    let answer = self.host.dialog(request);
                    async move {
                        Outcome::Dialog(match answer.await {
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
            Operation::Exec(mut request) => {
                // The operator's --run-timeout is the default and the most a program may run.
                let most = u32::try_from(self.run_timeout.as_millis()).unwrap_or(u32::MAX);
                request.timeout_ms = Some(request.timeout_ms.unwrap_or(most).min(most));
                let done = self.host.work(&self.grants, HostWork::Program(request));
                async move {
                    Outcome::Exec(done.await.and_then(|done| match done {
                        WorkDone::Program(result) => Ok(result),
                        other => Err(format!("unexpected outcome of a program: {other:?}")),
                    }))
                }
                .boxed()
            }
            Operation::Fetch(request) => {
                let request = match fetch_request(request) {
                    Ok(r) => r,
                    Err(e) => return Ok(Err(e)),
                };
                let done = self.host.work(&self.grants, HostWork::Fetch(request));
                async move {
                    Outcome::Fetch(done.await.and_then(|done| match done {
                        WorkDone::Fetch(r) => Ok(types::FetchResponse {
                            url: r.url,
                            status: r.status,
                            status_text: r.status_text,
                            headers: r.headers,
                            body: r.body,
                            redirected: r.redirected,
                        }),
                        other => Err(format!("unexpected outcome of a fetch: {other:?}")),
                    }))
                }
                .boxed()
            }
            Operation::DnsLookup(name) => {
                if name.is_empty() || name.len() > 253 {
                    return Ok(Err(format!(
                        "dns lookup: {name:?} is not a host name (1 to 253 characters)"
                    )));
                }
                let done = self.host.work(&self.grants, HostWork::DnsLookup(name));
                async move {
                    Outcome::DnsLookup(done.await.and_then(|done| match done {
                        WorkDone::DnsLookup(addresses) => Ok(addresses),
                        other => Err(format!("unexpected outcome of a dns lookup: {other:?}")),
                    }))
                }
                .boxed()
            }
            Operation::ResizeImage(request) => {
                if request.data.len() > MAX_IMAGE_BYTES {
                    return Ok(Err(format!(
                        "resizeImage: the image is {} bytes; the limit is {MAX_IMAGE_BYTES}",
                        request.data.len()
                    )));
                }
                let options = match parse_json("resizeImage options", &request.options) {
                    Ok(options @ Value::Object(_)) | Ok(options @ Value::Null) => options,
                    Ok(_) => return Ok(Err("resizeImage: options must be an object".into())),
                    Err(e) => return Ok(Err(e)),
                };
                let work = HostWork::ResizeImage {
                    bytes: request.data,
                    mime: request.mime_type,
                    options,
                };
                let done = self.host.work(&self.grants, work);
                async move {
                    Outcome::ResizeImage(done.await.and_then(|done| match done {
                        WorkDone::ResizeImage(resized) => Ok(resized.map(|r| r.to_string())),
                        other => Err(format!("unexpected outcome of resizeImage: {other:?}")),
                    }))
                }
                .boxed()
            }
            Operation::BuiltinTool(request) => {
                let work = match check_name("built-in tool", &request.tool)
                    .and_then(|()| parse_json("tool arguments", &request.params))
                {
                    Ok(params) => HostWork::BuiltinTool {
                        tool: request.tool,
                        params,
                        cwd: request.cwd,
                        update_id: request.update_call_id.filter(|id| !id.is_empty()),
                    },
                    Err(e) => return Ok(Err(e)),
                };
                let done = self.host.work(&self.grants, work);
                async move {
                    Outcome::BuiltinTool(done.await.and_then(|done| match done {
                        WorkDone::BuiltinTool(result) => Ok(result.to_string()),
                        other => Err(format!("unexpected outcome of a built-in tool: {other:?}")),
                    }))
                }
                .boxed()
            }
            Operation::Model(request) => {
                let work = match parse_json("model context", &request.context)
                    .and_then(|c| Ok((c, parse_json("model options", &request.options)?)))
                {
                    Ok((context, options)) => HostWork::Model {
                        provider: request.provider,
                        model_id: request.model_id,
                        context,
                        options,
                    },
                    Err(e) => return Ok(Err(e)),
                };
                let done = self.host.work(&self.grants, work);
                async move {
                    Outcome::Model(done.await.and_then(|done| match done {
                        WorkDone::Model(message) => Ok(message.to_string()),
                        other => Err(format!("unexpected outcome of a model call: {other:?}")),
                    }))
                }
                .boxed()
            }
            Operation::NestedTool(request) => {
                let work = match check_name("tool", &request.tool)
                    .and_then(|()| parse_json("tool arguments", &request.arguments))
                {
                    Ok(arguments) => HostWork::NestedTool {
                        tool: request.tool,
                        arguments,
                        parent: truncate(&request.parent, MAX_NAME_BYTES),
                    },
                    Err(e) => return Ok(Err(e)),
                };
                let done = self.host.work(&self.grants, work);
                async move {
                    Outcome::NestedTool(done.await.and_then(|done| match done {
                        WorkDone::NestedTool(outcome) => Ok(outcome.to_string()),
                        other => Err(format!("unexpected outcome of a tool call: {other:?}")),
                    }))
                }
                .boxed()
            }
        };
        Ok(self.operations.start(work, person))
    }

    fn cancel(&mut self, id: u32) -> Result<()> {
        self.operations.cancel(id);
        Ok(())
    }

    async fn wait(&mut self, timeout_ms: Option<u64>) -> Result<Option<Completion>> {
        if self.wall_used() > self.call_wall_timeout {
            return Err(WallDeadlineExceeded(self.call_wall_timeout).into());
        }
        // A running program or worker (in a worker: its parent) is pending work: what it
        // sends, or its end, wakes the guest (programs and workers share one notification).
        let live = self.programs.running() > 0 || self.workers.pending();
        let programs = live.then(|| self.programs.arrival());
        let woken = programs.as_deref();
        let pending = self.operations.pending() > 0 || woken.is_some();
        let asked = timeout_ms.map(Duration::from_millis);
        // A zero timeout only collects what is done: running on, not waiting (a loop of
        // setImmediate must still meet the per-call limit).
        let waited = asked != Some(Duration::ZERO) && (asked.is_some() || pending);
        let waited_for = if self.operations.person_pending() {
            // A dialog is pending: a person answers in their own time (each dialog ends at
            // its own timeout), which is not charged to the call's wall budget.
            let started = Instant::now();
            let waited_for = self.operations.wait(asked, woken).await;
            self.excluded += started.elapsed();
            waited_for
        } else {
            // Timers, programs and fetches wait as long as the wall budget allows.
            let left = self.wall_left();
            match asked {
                Some(asked) if asked <= left => self.operations.wait(Some(asked), woken).await,
                _ => match self.operations.wait(Some(left), woken).await {
                    Waited::TimedOut => {
                        return Err(WallDeadlineExceeded(self.call_wall_timeout).into());
                    }
                    other => other,
                },
            }
        };
        if waited {
            // Time spent waiting is not time spent running: restart the per-call clock.
            self.running_since = Instant::now();
        }
        Ok(match waited_for {
            Waited::Completed(completion) => Some(completion),
            Waited::TimedOut | Waited::Woken => None,
        })
    }
}

impl credentials_api::Host for ExtensionState {
    fn api_key(
        &mut self,
        provider: String,
        model_id: Option<String>,
    ) -> Result<Result<credentials_api::ProviderCredentials, String>> {
        if let Err(refused) = self.grants.check_model_key(&provider) {
            return Ok(Err(truncate(&refused, 1024)));
        }
        let (key, headers) = self.host.credentials(&provider, model_id.as_deref());
        Ok(Ok(credentials_api::ProviderCredentials { key, headers }))
    }
}

impl workers_api::Host for ExtensionState {
    fn start(
        &mut self,
        source: workers_api::WorkerSource,
        data: String,
    ) -> Result<Result<u32, String>> {
        if data.len() > MAX_JSON_BYTES {
            return Ok(Err(format!(
                "workerData is {} bytes of JSON; the limit is {MAX_JSON_BYTES}",
                data.len()
            )));
        }
        let source = match source {
            workers_api::WorkerSource::Module(id) => super::workers::Source::Module(id),
            workers_api::WorkerSource::Script(code) => {
                if code.len() > MAX_JSON_BYTES {
                    return Ok(Err(format!(
                        "the worker's script is {} bytes; the limit is {MAX_JSON_BYTES}",
                        code.len()
                    )));
                }
                super::workers::Source::Script(code)
            }
        };
        Ok(self.workers.start(source, data))
    }

    fn post(&mut self, worker: u32, message: String) -> Result<Result<(), String>> {
        if message.len() > MAX_JSON_BYTES {
            return Ok(Err(format!(
                "the message is {} bytes of JSON; the limit is {MAX_JSON_BYTES}",
                message.len()
            )));
        }
        Ok(self.workers.post(worker, message))
    }

    fn terminate(&mut self, worker: u32) -> Result<()> {
        self.workers.terminate(worker);
        Ok(())
    }

    fn take_events(&mut self) -> Result<Vec<workers_api::WorkerEventItem>> {
        use super::workers::Event;
        use workers_api::{WorkerEvent, WorkerEventItem};
        Ok(self
            .workers
            .take_events()
            .into_iter()
            .map(|(worker, event)| WorkerEventItem {
                worker,
                event: match event {
                    Event::Message(text) => WorkerEvent::Message(text),
                    Event::Error(text) => WorkerEvent::Error(truncate(&text, 16 << 10)),
                    Event::Exit(code) => WorkerEvent::Exit(code),
                },
            })
            .collect())
    }
}

impl programs_api::Host for ExtensionState {
    fn spawn(&mut self, request: programs_api::SpawnRequest) -> Result<Result<u32, String>> {
        if let Err(e) = self.programs.check_room() {
            return Ok(Err(e));
        }
        if request.args.len() > MAX_PROGRAM_ARGS
            || request.env.len() > MAX_PROGRAM_ARGS
            || request.command.len()
                + request.args.iter().map(String::len).sum::<usize>()
                + request
                    .env
                    .iter()
                    .map(|(k, v)| k.len() + v.len())
                    .sum::<usize>()
                > MAX_JSON_BYTES
        {
            return Ok(Err(format!(
                "spawn of '{}' refused: too many or too long arguments or variables",
                truncate(&request.command, MAX_NAME_BYTES)
            )));
        }
        let program = ProgramRequest {
            command: request.command,
            args: request.args,
            cwd: request.cwd,
            timeout_ms: None,
            env: request.env,
        };
        let started = self
            .grants
            .spawn_program(&program, &self.host.facts().cwd)
            .and_then(|child| self.programs.adopt(child));
        Ok(started)
    }

    fn write(&mut self, program: u32, data: Vec<u8>) -> Result<Result<(), String>> {
        Ok(self.programs.write(program, data))
    }

    fn close_stdin(&mut self, program: u32) -> Result<()> {
        self.programs.close_stdin(program);
        Ok(())
    }

    fn kill(&mut self, program: u32, signal: String) -> Result<bool> {
        Ok(self.programs.kill(program, &signal))
    }

    fn take_output(&mut self) -> Result<Vec<programs_api::OutputItem>> {
        use programs_api::{OutputItem, ProgramExit, ProgramOutput};
        Ok(self
            .programs
            .take_output()
            .into_iter()
            .map(|(program, output)| OutputItem {
                program,
                output: match output {
                    Output::Stdout(data) => ProgramOutput::Stdout(data),
                    Output::Stderr(data) => ProgramOutput::Stderr(data),
                    Output::Exit { code, signal } => {
                        ProgramOutput::Exit(ProgramExit { code, signal })
                    }
                    Output::Closed => ProgramOutput::Closed,
                },
            })
            .collect())
    }
}

/// Most arguments (and, separately, variables) one spawned program may be given.
const MAX_PROGRAM_ARGS: usize = 4096;

/// Most headers one fetch may send, and the most bytes of one.
const MAX_FETCH_HEADERS: usize = 256;
const MAX_HEADER_BYTES: usize = 16 << 10;

fn fetch_request(
    request: types::FetchRequest,
) -> Result<pichamber_access::net::FetchRequest, String> {
    if request.url.len() > MAX_HEADER_BYTES {
        return Err("fetch: the URL is longer than 16 KiB".into());
    }
    if request.headers.len() > MAX_FETCH_HEADERS {
        return Err(format!("fetch: more than {MAX_FETCH_HEADERS} headers"));
    }
    if let Some((name, _)) = request
        .headers
        .iter()
        .find(|(k, v)| k.len() + v.len() > MAX_HEADER_BYTES)
    {
        return Err(format!(
            "fetch: header {} is longer than 16 KiB",
            truncate(name, 64)
        ));
    }
    Ok(pichamber_access::net::FetchRequest {
        url: request.url,
        method: truncate(&request.method, 32),
        headers: request.headers,
        body: request.body,
        timeout: request
            .timeout_ms
            .map(|ms| Duration::from_millis(ms.into())),
    })
}
