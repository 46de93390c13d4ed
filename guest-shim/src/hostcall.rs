//! `__host(name, args)`: the one native function the prelude calls to reach the WIT imports.
//! The arguments arrive as an array of values, read as `JSON.stringify` would write them
//! ([`crate::json_value`]); the answer is JSON text (null for JSON's null), or a thrown JS
//! Error carrying the host's message (a denied capability reads as an ordinary error).

use std::cell::RefCell;
use std::collections::VecDeque;

use base64::Engine as _;
use javy::quickjs::{Ctx, Exception, qjs};
use serde_json::{Value, json};

use crate::bindings::pichamber::extension::host;
use crate::bindings::pichamber::extension::types::{
    BuiltinToolRequest, CommandDefinition, Completion, ConfirmDialog, Dialog, EditorDialog,
    ExecRequest, FetchRequest, FlagDefinition, FlagType, FormDialog, InputDialog, LogLevel,
    ModelRequest, NestedToolRequest, Notification, NotifyKind, Operation, ResizeImageRequest,
    SelectDialog, ShortcutDefinition, StatusUpdate, ToolDefinition, UiUpdate, WidgetUpdate,
};
use crate::fs;
use crate::json_value::{self, NotRead};

pub fn install(ctx: &Ctx<'_>) -> javy::quickjs::Result<()> {
    crate::engine::install_c_function(ctx, "__host", Some(host_call), 2)
}

/// `__host` as a C function: an rquickjs closure converts its arguments and its answer
/// through a layer of its own, a quarter of a small call's cost in the guest. A `null` answer
/// comes back as null, not as text to parse.
unsafe extern "C" fn host_call(
    raw: *mut qjs::JSContext,
    _this: qjs::JSValue,
    argc: std::ffi::c_int,
    argv: *mut qjs::JSValue,
) -> qjs::JSValue {
    let Some(context) = std::ptr::NonNull::new(raw) else {
        return qjs::JS_EXCEPTION;
    };
    if argc < 2 {
        let message =
            format!("__host takes a call's name and its arguments, got {argc} argument(s)");
        // SAFETY: QuickJS calls with a live context.
        let ctx = unsafe { Ctx::from_raw(context) };
        let _ = Exception::throw_type(&ctx, &message);
        return qjs::JS_EXCEPTION;
    }
    // SAFETY: QuickJS passes a live context and `argc` live arguments; each argument taken
    // here is a new reference, which its `Value` frees.
    let (ctx, name, args) = unsafe {
        let ctx = Ctx::from_raw(context);
        let argument = |i: usize| {
            javy::quickjs::Value::from_raw(ctx.clone(), qjs::JS_DupValue(raw, *argv.add(i)))
        };
        (ctx.clone(), argument(0), argument(1))
    };
    let Some(name) = name.as_string().and_then(|s| s.to_string().ok()) else {
        let message = format!(
            "__host: the call's name must be a string, not a {}",
            name.type_name()
        );
        let _ = Exception::throw_type(&ctx, &message);
        return qjs::JS_EXCEPTION;
    };
    match answer(&ctx, &name, args) {
        Ok(Value::Null) => qjs::JS_NULL,
        Ok(value) => {
            let text = value.to_string();
            // SAFETY: a live context; QuickJS copies the bytes.
            unsafe { qjs::JS_NewStringLen(raw, text.as_ptr().cast(), text.len() as _) }
        }
        Err(javy::quickjs::Error::Exception) => qjs::JS_EXCEPTION,
        Err(other) => {
            let _ = Exception::throw_internal(&ctx, &other.to_string());
            qjs::JS_EXCEPTION
        }
    }
}

/// What the host answers `name` with the arguments `args` (an array, read as JSON).
fn answer<'js>(
    ctx: &Ctx<'js>,
    name: &str,
    args: javy::quickjs::Value<'js>,
) -> javy::quickjs::Result<Value> {
    crate::ahead::refuse(ctx, format_args!("the host ({name})"))?;
    let args = match json_value::read(&args) {
        Ok(args) => args,
        Err(NotRead::Thrown(e)) => return Err(e),
        Err(NotRead::TooDeep) => {
            return Err(Exception::throw_type(
                ctx,
                &format!(
                    "{name}: recursion limit exceeded: a value nests deeper than {} levels",
                    json_value::MAX_DEPTH
                ),
            ));
        }
        Err(NotRead::NotPlain) => match ctx.json_stringify(args)? {
            Some(text) => Some(
                serde_json::from_str(&text.to_string()?)
                    .map_err(|e| Exception::throw_type(ctx, &format!("{name}: {e}")))?,
            ),
            None => None,
        },
    };
    let args = match args {
        Some(Value::Array(a)) => a,
        Some(other) => vec![other],
        None => Vec::new(),
    };
    if name == "memoryUsage" {
        return Ok(memory_usage(ctx));
    }
    call(name, Args(args)).map_err(|message| Exception::throw_message(ctx, &message))
}

/// Positional JSON arguments with forgiving accessors: a missing or mistyped argument reads as
/// empty, and the host validates what it receives anyway.
pub struct Args(Vec<Value>);

impl Args {
    pub fn value(&self, i: usize) -> &Value {
        self.0.get(i).unwrap_or(&Value::Null)
    }
    pub fn str(&self, i: usize) -> String {
        match self.value(i) {
            Value::String(s) => s.clone(),
            Value::Null => String::new(),
            other => other.to_string(),
        }
    }
    pub fn opt_str(&self, i: usize) -> Option<String> {
        match self.value(i) {
            Value::Null => None,
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    }
    pub fn bool(&self, i: usize) -> bool {
        self.value(i).as_bool().unwrap_or(false)
    }
    pub fn json(&self, i: usize) -> String {
        self.value(i).to_string()
    }
    fn field(&self, key: &str) -> &Value {
        self.value(0).get(key).unwrap_or(&Value::Null)
    }
    fn field_str(&self, key: &str) -> Option<String> {
        self.field(key).as_str().map(str::to_owned)
    }
    fn field_timeout(&self, key: &str) -> Option<u32> {
        self.field(key)
            .as_f64()
            .filter(|t| *t > 0.0)
            .map(|t| t.min(u32::MAX as f64) as u32)
    }
    fn strings(value: &Value) -> Vec<String> {
        value
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|v| {
                        v.as_str()
                            .map(str::to_owned)
                            .unwrap_or_else(|| v.to_string())
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn unit(r: Result<(), String>) -> Result<Value, String> {
    r.map(|()| Value::Null)
}

/// What the engine's live objects use, its limit, and the instance's linear memory
/// (`process.memoryUsage`, `node:v8`'s heap statistics). QuickJS's own count of what it
/// allocated is not kept under this allocator, so the engine's walk of its objects it is.
fn memory_usage(ctx: &Ctx<'_>) -> Value {
    // SAFETY: the runtime is this context's and alive while the context is; the struct is
    // plain integers that JS_ComputeMemoryUsage fills.
    let usage = unsafe {
        let rt = qjs::JS_GetRuntime(ctx.as_raw().as_ptr());
        let mut usage = std::mem::MaybeUninit::<qjs::JSMemoryUsage>::zeroed();
        qjs::JS_ComputeMemoryUsage(rt, usage.as_mut_ptr());
        usage.assume_init()
    };
    #[cfg(target_arch = "wasm32")]
    let linear = core::arch::wasm32::memory_size(0) * 65536;
    #[cfg(not(target_arch = "wasm32"))]
    let linear = 0usize;
    json!({
        "used": usage.memory_used_size,
        "limit": usage.malloc_limit.max(0),
        "linear": linear,
    })
}

fn call(name: &str, a: Args) -> Result<Value, String> {
    if let Some(op) = name.strip_prefix("fs.") {
        return fs::call(op, &a);
    }
    if let Some(op) = name.strip_prefix("sqlite.") {
        return crate::sqlite::call(op, &a);
    }
    if name == "zlib" {
        return crate::zlib::call(&a);
    }
    match name {
        "log" => {
            let level = match a.str(0).as_str() {
                "debug" => LogLevel::Debug,
                "warn" => LogLevel::Warn,
                "error" => LogLevel::Error,
                _ => LogLevel::Info,
            };
            host::log(level, &a.str(1));
            Ok(Value::Null)
        }
        "reportError" => {
            host::report_error(&a.str(0), &a.str(1), a.opt_str(2).as_deref());
            Ok(Value::Null)
        }
        "registerTool" => unit(host::register_tool(&ToolDefinition {
            name: a.field_str("name").unwrap_or_default(),
            label: a.field_str("label").unwrap_or_default(),
            description: a.field_str("description").unwrap_or_default(),
            parameters: a.field("parameters").to_string(),
            prompt_snippet: a.field_str("promptSnippet"),
            prompt_guidelines: Args::strings(a.field("promptGuidelines")),
            has_prepare_arguments: a.field("hasPrepareArguments").as_bool().unwrap_or(false),
            execution_mode: a.field_str("executionMode"),
            has_render_call: a.field("hasRenderCall").as_bool().unwrap_or(false),
            has_render_result: a.field("hasRenderResult").as_bool().unwrap_or(false),
            // `false` and anything not an object ask for nothing, as in pi.
            constrained_sampling: match a.field("constrainedSampling") {
                Value::Object(_) => Some(a.field("constrainedSampling").to_string()),
                _ => None,
            },
            exposure: a.field_str("exposure"),
            default_active: a.field("defaultActive").as_bool(),
            namespace: a
                .field("namespace")
                .is_object()
                .then(|| a.field("namespace").to_string()),
            annotations: a
                .field("annotations")
                .is_object()
                .then(|| a.field("annotations").to_string()),
        })),
        "registerCommand" => unit(host::register_command(&CommandDefinition {
            name: a.field_str("name").unwrap_or_default(),
            description: a.field_str("description"),
            has_argument_completions: a.field("hasArgumentCompletions").as_bool().unwrap_or(false),
        })),
        "subscribe" => unit(host::subscribe(&a.str(0))),
        "registerFlag" => unit(host::register_flag(&FlagDefinition {
            name: a.field_str("name").unwrap_or_default(),
            description: a.field_str("description"),
            flag_type: if a.field_str("type").as_deref() == Some("boolean") {
                FlagType::Boolean
            } else {
                FlagType::Text
            },
            default_value: match a.field("default") {
                Value::Null => None,
                v => Some(v.to_string()),
            },
        })),
        "registerShortcut" => unit(host::register_shortcut(&ShortcutDefinition {
            shortcut: a.field_str("shortcut").unwrap_or_default(),
            description: a.field_str("description"),
        })),
        "registerMessageRenderer" => unit(host::register_message_renderer(&a.str(0))),
        "registerProvider" => unit(host::register_provider(&a.str(0), &a.json(1))),
        "unregisterProvider" => {
            host::unregister_provider(&a.str(0));
            Ok(Value::Null)
        }
        "registerVirtualModel" => unit(host::register_virtual_model(&a.json(0))),
        "unregisterVirtualModel" => {
            host::unregister_virtual_model(&a.str(0), &a.str(1));
            Ok(Value::Null)
        }
        "getModels" => Ok(parse(&host::get_models())),
        "getApiKey" => {
            use crate::bindings::pichamber::extension::credentials;
            credentials::api_key(&a.str(0), a.opt_str(1).as_deref()).map(|c| {
                let headers: serde_json::Map<String, Value> = c
                    .headers
                    .into_iter()
                    .map(|(name, value)| (name, Value::String(value)))
                    .collect();
                json!({ "apiKey": c.key, "headers": headers })
            })
        }
        "registerMcpServer" => unit(host::register_mcp_server(&a.str(0), &a.json(1))),
        "unregisterMcpServer" => {
            host::unregister_mcp_server(&a.str(0));
            Ok(Value::Null)
        }
        "getMcpServers" => Ok(parse(&host::get_mcp_servers())),
        "getFlag" => Ok(parse_opt(host::get_flag(&a.str(0)))),
        "sendMessage" => unit(host::send_message(&a.json(0), &a.json(1))),
        "sendUserMessage" => unit(host::send_user_message(&a.json(0), &a.json(1))),
        "appendEntry" => {
            let data = match a.value(1) {
                Value::Null => None,
                v => Some(v.to_string()),
            };
            unit(host::append_entry(&a.str(0), data.as_deref()))
        }
        "setSessionName" => unit(host::set_session_name(&a.str(0))),
        "getSessionName" => Ok(host::get_session_name()
            .map(Value::String)
            .unwrap_or(Value::Null)),
        "setLabel" => unit(host::set_label(&a.str(0), a.opt_str(1).as_deref())),
        "sessionRead" => host::session_read(&a.str(0), &a.json(1)).map(|s| parse(&s)),
        "getActiveTools" => Ok(json!(host::get_active_tools())),
        "getAllTools" => Ok(parse(&host::get_all_tools())),
        "setActiveTools" => unit(host::set_active_tools(&Args::strings(a.value(0)))),
        "getCommands" => Ok(parse(&host::get_commands())),
        "getModel" => Ok(parse_opt(host::get_model())),
        "setModel" => Ok(Value::Bool(host::set_model(&a.json(0)))),
        "getThinkingLevel" => Ok(Value::String(host::get_thinking_level())),
        "setThinkingLevel" => unit(host::set_thinking_level(&a.str(0))),
        "emitBusEvent" => {
            host::emit_bus_event(&a.str(0), &a.json(1));
            Ok(Value::Null)
        }
        "isIdle" => Ok(Value::Bool(host::is_idle())),
        "abort" => {
            host::abort();
            Ok(Value::Null)
        }
        "hasPendingMessages" => Ok(Value::Bool(host::has_pending_messages())),
        "shutdown" => {
            host::shutdown();
            Ok(Value::Null)
        }
        "getContextUsage" => Ok(parse_opt(host::get_context_usage())),
        "getSystemPrompt" => Ok(Value::String(host::get_system_prompt())),
        "compact" => {
            host::compact(&a.json(0));
            Ok(Value::Null)
        }
        "ui" => {
            host::ui(&ui_update(&a)?);
            Ok(Value::Null)
        }
        "getEditorText" => Ok(Value::String(host::get_editor_text())),
        "clearEditorText" => {
            host::clear_editor_text();
            Ok(Value::Null)
        }
        "theme" => Ok(parse(&host::get_theme())),
        "builtinTools" => Ok(parse(&host::get_builtin_tools())),
        "getSettings" => Ok(parse(&host::get_settings())),
        "toolUpdate" => {
            host::tool_update(&a.str(0), &a.json(1));
            Ok(Value::Null)
        }
        "start" => host::start(&operation(&a)?).map(|id| json!(id)),
        "cancel" => {
            host::cancel(a.value(0).as_u64().unwrap_or(0) as u32);
            Ok(Value::Null)
        }
        "waitFor" => wait_for(a.value(0).as_u64().unwrap_or(0) as u32),
        "randomBytes" => {
            let n = a.value(0).as_u64().unwrap_or(0).min(65536) as usize;
            let mut buf = vec![0u8; n];
            getrandom::fill(&mut buf).map_err(|e| e.to_string())?;
            Ok(json!(buf))
        }
        other => Err(format!("unknown host call '{other}'")),
    }
}

thread_local! {
    /// Completions that arrived while the guest waited synchronously for another operation;
    /// the event loop delivers them before asking the host for more.
    static EARLY: RefCell<VecDeque<Completion>> = const { RefCell::new(VecDeque::new()) };
}

/// Whether completions wait here for the event loop (taken while the guest waited for another).
pub fn holds_completions() -> bool {
    EARLY.with(|early| !early.borrow().is_empty())
}

/// The next completed operation: one kept back by [`wait_for`] first, else the host's.
pub fn next_completion(timeout_ms: Option<u64>) -> Option<Completion> {
    EARLY
        .with(|early| early.borrow_mut().pop_front())
        .or_else(|| host::wait(timeout_ms))
}

/// Blocks until operation `id` completes (Node's synchronous child processes), keeping other
/// completions for the event loop.
fn wait_for(id: u32) -> Result<Value, String> {
    let early = EARLY.with(|early| {
        let mut early = early.borrow_mut();
        let at = early.iter().position(|c| c.id == id)?;
        early.remove(at)
    });
    if let Some(done) = early {
        return Ok(parse(&crate::engine::outcome_json(done.outcome)));
    }
    loop {
        match host::wait(None) {
            Some(done) if done.id == id => {
                return Ok(parse(&crate::engine::outcome_json(done.outcome)));
            }
            Some(other) => EARLY.with(|early| early.borrow_mut().push_back(other)),
            // A spawned program or a worker sent something: it waits for the event loop.
            None if crate::programs::live() > 0 || crate::workers::live() > 0 => {}
            None => return Err(format!("operation {id} is not pending")),
        }
    }
}

fn parse(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

fn parse_opt(text: Option<String>) -> Value {
    text.map(|t| parse(&t)).unwrap_or(Value::Null)
}

fn ui_update(a: &Args) -> Result<UiUpdate, String> {
    Ok(match a.field_str("kind").as_deref() {
        Some("notify") => UiUpdate::Notify(Notification {
            message: a.field_str("message").unwrap_or_default(),
            kind: match a.field_str("type").as_deref() {
                Some("warning") => Some(NotifyKind::Warning),
                Some("error") => Some(NotifyKind::Error),
                Some("info") => Some(NotifyKind::Info),
                _ => None,
            },
        }),
        Some("status") => UiUpdate::Status(StatusUpdate {
            key: a.field_str("key").unwrap_or_default(),
            text: a.field_str("text"),
        }),
        Some("widget") => UiUpdate::Widget(WidgetUpdate {
            key: a.field_str("key").unwrap_or_default(),
            lines: match a.field("lines") {
                Value::Array(_) => Some(Args::strings(a.field("lines"))),
                _ => None,
            },
            placement: a.field_str("placement"),
        }),
        Some("title") => UiUpdate::Title(a.field_str("title").unwrap_or_default()),
        Some("editorText") => UiUpdate::EditorText(a.field_str("text").unwrap_or_default()),
        other => return Err(format!("unknown ui update {other:?}")),
    })
}

fn operation(a: &Args) -> Result<Operation, String> {
    let timeout_ms = a.field_timeout("timeout");
    let title = a.field_str("title").unwrap_or_default();
    Ok(match a.field_str("op").as_deref() {
        Some("select") => Operation::Dialog(Dialog::Select(SelectDialog {
            title,
            options: Args::strings(a.field("options")),
            timeout_ms,
        })),
        Some("confirm") => Operation::Dialog(Dialog::Confirm(ConfirmDialog {
            title,
            message: a.field_str("message").unwrap_or_default(),
            timeout_ms,
        })),
        Some("input") => Operation::Dialog(Dialog::Input(InputDialog {
            title,
            placeholder: a.field_str("placeholder"),
            timeout_ms,
        })),
        Some("editor") => Operation::Dialog(Dialog::Editor(EditorDialog {
            title,
            prefill: a.field_str("prefill"),
            timeout_ms,
        })),
        Some("form") => Operation::Dialog(Dialog::Form(FormDialog {
            title,
            fields: a.field("fields").to_string(),
            timeout_ms,
        })),
        Some("exec") => Operation::Exec(ExecRequest {
            command: a.field_str("command").unwrap_or_default(),
            args: Args::strings(a.field("args")),
            cwd: a.field_str("cwd"),
            timeout_ms,
        }),
        Some("fetch") => Operation::Fetch(FetchRequest {
            url: a.field_str("url").unwrap_or_default(),
            method: a.field_str("method").unwrap_or_default(),
            headers: a
                .field("headers")
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|h| Some((h[0].as_str()?.to_owned(), h[1].as_str()?.to_owned())))
                .collect(),
            body: match a.field_str("body") {
                Some(b64) => Some(
                    base64::engine::general_purpose::STANDARD
                        .decode(b64)
                        .map_err(|e| format!("fetch: request body: {e}"))?,
                ),
                None => None,
            },
            timeout_ms,
        }),
        Some("resizeImage") => Operation::ResizeImage(ResizeImageRequest {
            data: base64::engine::general_purpose::STANDARD
                .decode(a.field_str("data").unwrap_or_default())
                .map_err(|e| format!("resizeImage: image bytes: {e}"))?,
            mime_type: a.field_str("mimeType").unwrap_or_default(),
            options: a.field("options").to_string(),
        }),
        Some("dnsLookup") => Operation::DnsLookup(a.field_str("hostname").unwrap_or_default()),
        Some("builtinTool") => Operation::BuiltinTool(BuiltinToolRequest {
            tool: a.field_str("tool").unwrap_or_default(),
            params: a.field("params").to_string(),
            cwd: a.field_str("cwd"),
            update_call_id: a.field_str("updateCallId").filter(|id| !id.is_empty()),
        }),
        Some("nestedTool") => Operation::NestedTool(NestedToolRequest {
            tool: a.field_str("tool").unwrap_or_default(),
            arguments: a.field("arguments").to_string(),
            parent: a.field_str("parent").unwrap_or_default(),
        }),
        Some("model") => Operation::Model(ModelRequest {
            provider: a.field_str("provider").unwrap_or_default(),
            model_id: a.field_str("modelId").unwrap_or_default(),
            context: a.field("context").to_string(),
            options: a.field("options").to_string(),
        }),
        other => return Err(format!("unknown operation {other:?}")),
    })
}
