//! WIT 0.1.0 (wit/v0.1.0, frozen): the bindings of components built with it, and the adapter
//! that serves them with the newest version's implementation. What 0.1.0 carried on reserved
//! names is turned into the typed calls of today here, and only here: the program names
//! `pichamber:fetch` and `pichamber:tool:NAME`, the session reads `ui:theme`,
//! `tools:builtins` and `ui:clearEditorText`; ctx.compact's outcome as an event is `guest`'s.

use base64::Engine as _;
use serde_json::Value;
use wasmtime::Result;

use self::pichamber::extension::host::Host;
use self::pichamber::extension::types as old;
use super::instance::ExtensionState;
use super::latest::pichamber::extension::host::Host as Latest;
use super::wit as new;

wasmtime::component::bindgen!({
    path: "../../wit/v0.1.0",
    world: "extension",
    imports: {
        "pichamber:extension/host.wait": async | trappable,
        default: trappable,
    },
    exports: { default: async },
});

/// The program-name prefix under which a 0.1.0 guest runs a built-in tool (the JSON
/// arguments, then the id of the tool call whose onUpdate gets partial results).
const BUILTIN_TOOL_PROGRAM: &str = "pichamber:tool:";
/// The program name under which a 0.1.0 guest fetches (the request as JSON).
const FETCH_PROGRAM: &str = "pichamber:fetch";

impl old::Host for ExtensionState {}

impl Host for ExtensionState {
    fn log(&mut self, level: old::LogLevel, message: String) -> Result<()> {
        let level = match level {
            old::LogLevel::Debug => new::LogLevel::Debug,
            old::LogLevel::Info => new::LogLevel::Info,
            old::LogLevel::Warn => new::LogLevel::Warn,
            old::LogLevel::Error => new::LogLevel::Error,
        };
        Latest::log(self, level, message)
    }

    fn report_error(
        &mut self,
        event: String,
        message: String,
        stack: Option<String>,
    ) -> Result<()> {
        Latest::report_error(self, event, message, stack)
    }

    fn register_tool(&mut self, t: old::ToolDefinition) -> Result<Result<(), String>> {
        Latest::register_tool(
            self,
            new::ToolDefinition {
                name: t.name,
                label: t.label,
                description: t.description,
                parameters: t.parameters,
                prompt_snippet: t.prompt_snippet,
                prompt_guidelines: t.prompt_guidelines,
                has_prepare_arguments: t.has_prepare_arguments,
                execution_mode: t.execution_mode,
                has_render_call: t.has_render_call,
                has_render_result: t.has_render_result,
                constrained_sampling: None,
                exposure: None,
                default_active: None,
                namespace: None,
                annotations: None,
            },
        )
    }

    fn register_command(&mut self, c: old::CommandDefinition) -> Result<Result<(), String>> {
        Latest::register_command(
            self,
            new::CommandDefinition {
                name: c.name,
                description: c.description,
                has_argument_completions: c.has_argument_completions,
            },
        )
    }

    fn subscribe(&mut self, event: String) -> Result<Result<(), String>> {
        Latest::subscribe(self, event)
    }

    fn register_flag(&mut self, f: old::FlagDefinition) -> Result<Result<(), String>> {
        Latest::register_flag(
            self,
            new::FlagDefinition {
                name: f.name,
                description: f.description,
                flag_type: match f.flag_type {
                    old::FlagType::Boolean => new::FlagType::Boolean,
                    old::FlagType::Text => new::FlagType::Text,
                },
                default_value: f.default_value,
            },
        )
    }

    fn register_shortcut(&mut self, s: old::ShortcutDefinition) -> Result<Result<(), String>> {
        Latest::register_shortcut(
            self,
            new::ShortcutDefinition {
                shortcut: s.shortcut,
                description: s.description,
            },
        )
    }

    fn register_message_renderer(&mut self, custom_type: String) -> Result<Result<(), String>> {
        Latest::register_message_renderer(self, custom_type)
    }

    fn register_provider(&mut self, name: String, config: String) -> Result<Result<(), String>> {
        Latest::register_provider(self, name, config)
    }

    fn unregister_provider(&mut self, name: String) -> Result<()> {
        Latest::unregister_provider(self, name)
    }

    fn get_flag(&mut self, name: String) -> Result<Option<String>> {
        Latest::get_flag(self, name)
    }

    fn send_message(&mut self, message: String, options: String) -> Result<Result<(), String>> {
        Latest::send_message(self, message, options)
    }

    fn send_user_message(
        &mut self,
        content: String,
        options: String,
    ) -> Result<Result<(), String>> {
        Latest::send_user_message(self, content, options)
    }

    fn append_entry(
        &mut self,
        custom_type: String,
        data: Option<String>,
    ) -> Result<Result<(), String>> {
        Latest::append_entry(self, custom_type, data)
    }

    fn set_session_name(&mut self, name: String) -> Result<Result<(), String>> {
        Latest::set_session_name(self, name)
    }

    fn get_session_name(&mut self) -> Result<Option<String>> {
        Latest::get_session_name(self)
    }

    fn set_label(&mut self, entry_id: String, label: Option<String>) -> Result<Result<(), String>> {
        Latest::set_label(self, entry_id, label)
    }

    fn session_read(&mut self, method: String, args: String) -> Result<Result<String, String>> {
        match method.as_str() {
            "ui:theme" => Latest::get_theme(self).map(Ok),
            "tools:builtins" => Latest::get_builtin_tools(self).map(Ok),
            "ui:clearEditorText" => {
                Latest::clear_editor_text(self)?;
                Ok(Ok("null".into()))
            }
            _ => Latest::session_read(self, method, args),
        }
    }

    fn get_active_tools(&mut self) -> Result<Vec<String>> {
        Latest::get_active_tools(self)
    }

    fn get_all_tools(&mut self) -> Result<String> {
        Latest::get_all_tools(self)
    }

    fn set_active_tools(&mut self, names: Vec<String>) -> Result<Result<(), String>> {
        Latest::set_active_tools(self, names)
    }

    fn get_commands(&mut self) -> Result<String> {
        Latest::get_commands(self)
    }

    fn get_model(&mut self) -> Result<Option<String>> {
        Latest::get_model(self)
    }

    fn set_model(&mut self, model: String) -> Result<bool> {
        Latest::set_model(self, model)
    }

    fn get_thinking_level(&mut self) -> Result<String> {
        Latest::get_thinking_level(self)
    }

    fn set_thinking_level(&mut self, level: String) -> Result<Result<(), String>> {
        Latest::set_thinking_level(self, level)
    }

    fn emit_bus_event(&mut self, channel: String, data: String) -> Result<()> {
        Latest::emit_bus_event(self, channel, data)
    }

    fn is_idle(&mut self) -> Result<bool> {
        Latest::is_idle(self)
    }

    fn abort(&mut self) -> Result<()> {
        Latest::abort(self)
    }

    fn has_pending_messages(&mut self) -> Result<bool> {
        Latest::has_pending_messages(self)
    }

    fn shutdown(&mut self) -> Result<()> {
        Latest::shutdown(self)
    }

    fn get_context_usage(&mut self) -> Result<Option<String>> {
        Latest::get_context_usage(self)
    }

    fn get_system_prompt(&mut self) -> Result<String> {
        Latest::get_system_prompt(self)
    }

    fn compact(&mut self, options: String) -> Result<()> {
        Latest::compact(self, options)
    }

    fn ui(&mut self, update: old::UiUpdate) -> Result<()> {
        let update = match update {
            old::UiUpdate::Notify(n) => new::UiUpdate::Notify(new::Notification {
                message: n.message,
                kind: n.kind.map(|k| match k {
                    old::NotifyKind::Info => new::NotifyKind::Info,
                    old::NotifyKind::Warning => new::NotifyKind::Warning,
                    old::NotifyKind::Error => new::NotifyKind::Error,
                }),
            }),
            old::UiUpdate::Status(s) => new::UiUpdate::Status(new::StatusUpdate {
                key: s.key,
                text: s.text,
            }),
            old::UiUpdate::Widget(w) => new::UiUpdate::Widget(new::WidgetUpdate {
                key: w.key,
                lines: w.lines,
                placement: w.placement,
            }),
            old::UiUpdate::Title(t) => new::UiUpdate::Title(t),
            old::UiUpdate::EditorText(t) => new::UiUpdate::EditorText(t),
        };
        Latest::ui(self, update)
    }

    fn get_editor_text(&mut self) -> Result<String> {
        Latest::get_editor_text(self)
    }

    fn tool_update(&mut self, tool_call_id: String, partial: String) -> Result<()> {
        Latest::tool_update(self, tool_call_id, partial)
    }

    fn start(&mut self, op: old::Operation) -> Result<Result<u32, String>> {
        let op = match op {
            old::Operation::Dialog(d) => new::Operation::Dialog(dialog(d)),
            old::Operation::Exec(request) => match exec_operation(request) {
                Ok(op) => op,
                Err(e) => return Ok(Err(e)),
            },
        };
        Latest::start(self, op)
    }

    fn cancel(&mut self, id: u32) -> Result<()> {
        Latest::cancel(self, id)
    }

    async fn wait(&mut self, timeout_ms: Option<u64>) -> Result<Option<old::Completion>> {
        let completion = Latest::wait(self, timeout_ms).await?;
        Ok(completion.map(|c| old::Completion {
            id: c.id,
            outcome: outcome(c.outcome),
        }))
    }
}

fn dialog(d: old::Dialog) -> new::Dialog {
    match d {
        old::Dialog::Select(d) => new::Dialog::Select(new::SelectDialog {
            title: d.title,
            options: d.options,
            timeout_ms: d.timeout_ms,
        }),
        old::Dialog::Confirm(d) => new::Dialog::Confirm(new::ConfirmDialog {
            title: d.title,
            message: d.message,
            timeout_ms: d.timeout_ms,
        }),
        old::Dialog::Input(d) => new::Dialog::Input(new::InputDialog {
            title: d.title,
            placeholder: d.placeholder,
            timeout_ms: d.timeout_ms,
        }),
        old::Dialog::Editor(d) => new::Dialog::Editor(new::EditorDialog {
            title: d.title,
            prefill: d.prefill,
            timeout_ms: d.timeout_ms,
        }),
        old::Dialog::Form(d) => new::Dialog::Form(new::FormDialog {
            title: d.title,
            fields: d.fields,
            timeout_ms: d.timeout_ms,
        }),
    }
}

/// A 0.1.0 exec: a program, or what its reserved program names stood for.
fn exec_operation(request: old::ExecRequest) -> Result<new::Operation, String> {
    if request.command == FETCH_PROGRAM {
        let json = request.args.first().map(String::as_str).unwrap_or_default();
        let request: Value = serde_json::from_str(json).unwrap_or_default();
        return fetch_request(&request).map(new::Operation::Fetch);
    }
    if let Some(tool) = request.command.strip_prefix(BUILTIN_TOOL_PROGRAM) {
        return Ok(new::Operation::BuiltinTool(new::BuiltinToolRequest {
            tool: tool.to_owned(),
            params: request.args.first().cloned().unwrap_or_default(),
            cwd: request.cwd,
            update_call_id: request.args.get(1).cloned(),
        }));
    }
    Ok(new::Operation::Exec(new::ExecRequest {
        command: request.command,
        args: request.args,
        cwd: request.cwd,
        timeout_ms: request.timeout_ms,
    }))
}

/// 0.1.0's fetch request: `{ url, method, headers: [[k, v]], body: base64, timeoutMs }`.
fn fetch_request(request: &Value) -> Result<new::FetchRequest, String> {
    let body = match request["body"].as_str() {
        Some(b64) => Some(
            base64::engine::general_purpose::STANDARD
                .decode(b64)
                .map_err(|e| format!("fetch: request body: {e}"))?,
        ),
        None => None,
    };
    Ok(new::FetchRequest {
        url: request["url"].as_str().unwrap_or_default().to_owned(),
        method: request["method"].as_str().unwrap_or_default().to_owned(),
        headers: request["headers"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|h| Some((h[0].as_str()?.to_owned(), h[1].as_str()?.to_owned())))
            .collect(),
        body,
        timeout_ms: request["timeoutMs"]
            .as_u64()
            .map(|ms| u32::try_from(ms).unwrap_or(u32::MAX)),
    })
}

/// What a 0.1.0 guest reads back: fetch answers and built-in tool results as a program's
/// JSON stdout.
fn outcome(outcome: new::Outcome) -> old::Outcome {
    let stdout_only = |stdout: String| old::ExecResult {
        stdout,
        stderr: String::new(),
        code: 0,
        killed: false,
    };
    match outcome {
        new::Outcome::Dialog(answer) => old::Outcome::Dialog(match answer {
            new::DialogAnswer::Value(v) => old::DialogAnswer::Value(v),
            new::DialogAnswer::Confirmed(c) => old::DialogAnswer::Confirmed(c),
            new::DialogAnswer::Cancelled => old::DialogAnswer::Cancelled,
        }),
        new::Outcome::Exec(result) => old::Outcome::Exec(result.map(|r| old::ExecResult {
            stdout: r.stdout,
            stderr: r.stderr,
            code: r.code,
            killed: r.killed,
        })),
        new::Outcome::Fetch(result) => old::Outcome::Exec(result.map(|r| {
            let headers: Vec<[String; 2]> = r.headers.into_iter().map(|(k, v)| [k, v]).collect();
            stdout_only(
                serde_json::json!({
                    "url": r.url,
                    "status": r.status,
                    "statusText": r.status_text,
                    "headers": headers,
                    "body": base64::engine::general_purpose::STANDARD.encode(&r.body),
                    "redirected": r.redirected,
                })
                .to_string(),
            )
        })),
        new::Outcome::BuiltinTool(result) => old::Outcome::Exec(result.map(stdout_only)),
        // 0.1.0 has no way to ask for a model call.
        new::Outcome::Model(result) => old::Outcome::Exec(result.map(stdout_only)),
        // Nor for a nested tool call.
        new::Outcome::NestedTool(result) => old::Outcome::Exec(result.map(stdout_only)),
        // Nor to resize an image.
        new::Outcome::ResizeImage(result) => {
            old::Outcome::Exec(result.map(|r| stdout_only(r.unwrap_or_else(|| "null".into()))))
        }
        // Nor for a name lookup.
        new::Outcome::DnsLookup(result) => {
            old::Outcome::Exec(result.map(|a| stdout_only(serde_json::json!(a).to_string())))
        }
    }
}

// The guest's side: the newest version's values in, 0.1.0's out, and back.

pub fn module_source(m: &new::ModuleSource) -> old::ModuleSource {
    old::ModuleSource {
        id: m.id.clone(),
        source: m.source.clone(),
    }
}

pub fn load_context(c: &new::LoadContext) -> old::LoadContext {
    old::LoadContext {
        extension_name: c.extension_name.clone(),
        cwd: c.cwd.clone(),
        mode: c.mode.clone(),
        has_ui: c.has_ui,
        env: c.env.clone(),
        memory_limit: c.memory_limit,
    }
}

pub fn dispatch_result(r: old::DispatchResult) -> new::DispatchResult {
    new::DispatchResult {
        chain_result: r.chain_result,
        event: r.event,
    }
}

pub fn tool_result(r: old::ToolResult) -> new::ToolResult {
    new::ToolResult {
        content: r.content,
        details: r.details,
        is_error: r.is_error,
        terminate: r.terminate,
        structured_content: None,
        extra: None,
    }
}

pub fn completion_item(i: old::CompletionItem) -> new::CompletionItem {
    new::CompletionItem {
        value: i.value,
        label: i.label,
        description: i.description,
    }
}
