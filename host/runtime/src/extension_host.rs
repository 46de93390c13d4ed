//! What an extension instance needs from the session it runs in, stated here and implemented
//! by the embedder (as wasmtime-wasi's `WasiView` states what WASI needs of a store). The
//! runtime checks every value that crosses the WIT boundary (names, JSON, sizes) and keeps the
//! instance's volume budgets before it calls these; what a call *means* (a tool in the
//! session's registry, an entry in its file, a dialog on a client, a program run under the
//! grants) is the embedder's. One handle per loaded extension: it knows which one it serves.

use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::Value;

use super::ui::{DialogAnswer, UiRequest};
use super::wit::{CommandDefinition, ExecRequest, ExecResult, ToolDefinition};
use pichamber_access::Grants;
use pichamber_access::net::{FetchRequest, FetchResponse};

/// Facts about the session an instance is loaded into; fixed for the instance's life.
#[derive(Debug, Clone)]
pub struct SessionFacts {
    pub cwd: String,
    /// What `ctx.mode` reports.
    pub mode: String,
    /// Whether a client can show UI and answer dialogs.
    pub has_ui: bool,
    /// The pi release the session follows, as pi numbers it.
    pub pi_version: String,
}

/// Work an extension asks the host to carry out under the instance's grants.
#[derive(Debug)]
pub enum HostWork {
    /// `pi.exec`, `child_process`: a granted program.
    Program(ExecRequest),
    /// `fetch`, under the network capability.
    Fetch(FetchRequest),
    /// `dns.lookup`, under the network capability: the name to resolve.
    DnsLookup(String),
    /// pi 1.6.0's `resizeImage`: no capability (it reads and writes only these bytes).
    ResizeImage {
        bytes: Vec<u8>,
        mime: String,
        /// pi's `ImageResizeOptions` (a JSON object).
        options: Value,
    },
    /// One of pi's built-in tools run for the extension (`createReadTool(cwd).execute`...):
    /// partial results go to the tool call `update_id`, the one the extension is executing.
    BuiltinTool {
        tool: String,
        /// The tool's arguments, a JSON object.
        params: Value,
        cwd: Option<String>,
        update_id: Option<String>,
    },
    /// `ctx.modelRegistry.complete`: one call to a session model, made with the host's
    /// credentials.
    Model {
        provider: String,
        model_id: String,
        /// pi-ai's `Context`.
        context: Value,
        /// pi-ai's stream options.
        options: Value,
    },
    /// `ctx.executeTool` (pi 1.6.0): the session runs `tool` through its pipeline for the
    /// extension's running tool call `parent`.
    NestedTool {
        tool: String,
        arguments: Value,
        parent: String,
    },
}

/// What [`HostWork`] produced, one kind per kind of work.
#[derive(Debug)]
pub enum WorkDone {
    Program(ExecResult),
    Fetch(FetchResponse),
    /// The addresses a name resolved to.
    DnsLookup(Vec<String>),
    /// pi's `ResizedImage` (JSON), or `None`: it does not fit.
    ResizeImage(Option<Value>),
    /// The built-in tool's result (`{content, details}`).
    BuiltinTool(Value),
    /// The model's AssistantMessage.
    Model(Value),
    /// pi-agent-core's `AgentToolCallOutcome` of a nested call.
    NestedTool(Value),
}

/// A flag an extension registers (`pi.registerFlag`), its default already parsed.
#[derive(Debug, Clone)]
pub struct FlagSpec {
    pub name: String,
    pub description: Option<String>,
    /// `"boolean"` or `"string"`, as pi names the types.
    pub kind: &'static str,
    pub default: Option<Value>,
}

pub trait ExtensionHost: Send + Sync {
    fn facts(&self) -> SessionFacts;
    /// The `ctx` of a call the runtime makes on its own (`session_start` after a restart).
    fn call_context(&self) -> Value;

    fn log(&self, level: &'static str, message: String);
    /// An error of the extension (a handler threw, a limit bit); the session goes on.
    fn report_error(&self, event: String, error: String, stack: Option<String>);

    /// False when another extension holds the name (the first registration stays, as in pi).
    fn register_tool(&self, tool: ToolDefinition, parameters: Value) -> bool;
    fn register_command(&self, command: CommandDefinition);
    fn subscribe(&self, event: String);
    fn subscribes(&self, event: &str) -> bool;
    fn register_flag(&self, flag: FlagSpec);
    fn register_shortcut(&self, shortcut: String, description: Option<String>);
    fn register_message_renderer(&self, custom_type: String);
    /// `config` with any API key already redacted.
    fn register_provider(&self, name: String, config: Value);
    fn unregister_provider(&self, name: &str);
    /// `pi.registerVirtualModel` (checked for shape; `route` stays in the guest). Err when
    /// the name is taken by a model the session can call or another extension's virtual one.
    fn register_virtual_model(&self, model: Value) -> Result<(), String>;
    fn unregister_virtual_model(&self, provider: &str, id: &str);
    /// `pi.registerMcpServer`: Err (pi's message) for an invalid name or config, or a name
    /// another extension holds.
    fn register_mcp_server(&self, name: String, config: Value) -> Result<(), String>;
    fn unregister_mcp_server(&self, name: &str);
    /// `pi.getMcpServers()`.
    fn mcp_servers(&self) -> Value;
    fn flag(&self, name: &str) -> Option<Value>;
    /// Drops everything the extension registered (its instance is replaced); the names of
    /// its tools that were inactive.
    fn forget_registrations(&self) -> Vec<String>;
    /// After the fresh instance registered again: tools in `inactive` stay off, tools it no
    /// longer registers go.
    fn settle_active_tools(&self, inactive: &[String]);

    fn send_message(&self, message: Value, options: Value) -> Result<(), String>;
    fn send_user_message(&self, content: Value, options: Value) -> Result<(), String>;
    fn append_entry(&self, custom_type: String, data: Value) -> Result<(), String>;
    fn set_session_name(&self, name: String) -> Result<(), String>;
    fn session_name(&self) -> Option<String>;
    fn set_label(&self, entry_id: String, label: Option<String>) -> Result<(), String>;
    /// `ctx.sessionManager.*` reads and the session actions of a command context.
    fn session_read(&self, method: &str, args: Value) -> Result<Value, String>;
    /// pi's built-in tools as the session's pi release describes them (`createReadTool` & co.).
    fn builtin_tools(&self) -> Value;
    /// pi's effective settings (`pi.getSettings()`).
    fn settings(&self) -> Value;
    fn active_tools(&self) -> Vec<String>;
    fn all_tools(&self) -> Value;
    fn set_active_tools(&self, names: Vec<String>);
    fn commands(&self) -> Value;
    fn model(&self) -> Option<Value>;
    fn set_model(&self, model: Value) -> bool;
    /// `ctx.modelRegistry`'s catalog: `[{model, configured}]`, virtual models included.
    fn models(&self) -> Value;
    /// The API key (none when not configured, or no such model) and request headers of
    /// `provider`'s model `model_id` (its first one when none is named). The caller has
    /// checked the extension's grant.
    fn credentials(
        &self,
        provider: &str,
        model_id: Option<&str>,
    ) -> (Option<String>, Vec<(String, String)>);
    fn thinking_level(&self) -> String;
    fn set_thinking_level(&self, level: String) -> Result<(), String>;
    fn emit_bus_event(&self, channel: String, data: String);
    fn is_idle(&self) -> bool;
    fn abort(&self);
    fn has_pending_messages(&self) -> bool;
    fn request_shutdown(&self);
    fn context_usage(&self) -> Option<Value>;
    fn system_prompt(&self) -> String;
    fn compact(&self, instructions: Option<String>, callback: Option<u64>);

    /// Keeps what a UI update leaves on screen (statuses, widgets, the title).
    fn update_ui(&self, request: &UiRequest);
    /// Sends a UI update to the clients (only when the session has UI and the instance's
    /// UI budget let it through).
    fn show_ui(&self, request: UiRequest);
    fn editor_text(&self) -> String;
    /// `setEditorText(undefined)`.
    fn clear_editor_text(&self);
    /// What `ctx.ui.theme` colours with: `{name, colorMode}`.
    fn theme(&self) -> Value;
    /// A partial result of a tool call the extension is executing.
    fn tool_update(&self, tool_call_id: &str, partial: Value);

    /// Asks the user (only when the session has UI and the dialog budget let it through).
    fn dialog(&self, request: UiRequest) -> BoxFuture<'static, DialogAnswer>;
    /// Asks for the instance to be polled soon: work it left running (a program it spawned)
    /// has something for it while no call runs.
    fn wake(&self);
    /// Carries out `work` under `grants` (the instance's: they change when a user approves).
    fn work(
        &self,
        grants: &Arc<Grants>,
        work: HostWork,
    ) -> BoxFuture<'static, Result<WorkDone, String>>;
}
