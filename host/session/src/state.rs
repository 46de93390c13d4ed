//! The state one session shares with its extension instances: the session store (entries in
//! pi's file format), registrations, flag values, UI state, the agent's context and queues,
//! and the event-bus queue.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::{Value, json};

use super::dialogs::DialogResponder;
use super::events::{EventSink, SessionEvent};
use super::store::SessionStore;
use pichamber_pi::PiVersion;
use pichamber_runtime::wit::{CommandDefinition, ToolDefinition};

/// Facts and services shared by the session and all of its extension instances.
pub struct SessionShared {
    pub id: String,
    pub cwd: String,
    pub has_ui: bool,
    /// The pi release whose behaviour the session follows (see `pichamber_pi`).
    pub pi: PiVersion,
    /// What `ctx.mode` reports: pichamber implements pi's RPC-mode semantics.
    pub mode: String,
    /// What `ctx.isProjectTrusted()` reports.
    pub project_trusted: bool,
    pub sink: EventSink,
    pub dialogs: Arc<dyn DialogResponder>,
    /// The models of `ctx.modelRegistry` (virtual ones are the extensions' registrations).
    pub catalog: pichamber_model::catalog::Catalog,
    pub state: Mutex<SessionState>,
    /// Set by `ctx.abort()` (or a client) to stop the running turn: the model stream ends as
    /// "aborted" and no further turn starts.
    pub abort: tokio::sync::watch::Sender<bool>,
    /// Stops the user's running shell command (RPC `abort_bash`).
    pub bash_abort: tokio::sync::watch::Sender<bool>,
    /// Cancels the wait before an automatic retry (RPC `abort_retry`, `abort`).
    pub retry_abort: tokio::sync::watch::Sender<bool>,
    /// Nested tool calls (`ctx.executeTool`) on their way from ports to the session.
    pub nested: crate::nested::NestedCalls,
    /// Notified when an extension has something to run between calls (a program it spawned
    /// wrote or ended): whoever owns the session polls it ([`crate::Session::poll`]).
    pub activity: tokio::sync::Notify,
    /// Its extensions hibernate: at least one does and none is awake (set by its owner
    /// between requests; [`crate::Session::hibernate`]).
    pub hibernating: std::sync::atomic::AtomicBool,
}

impl SessionShared {
    /// The ctx snapshot every call of an extension receives.
    pub fn call_context(&self) -> Value {
        let state = self.state.lock().unwrap();
        json!({
            "cwd": self.cwd, "hasUI": self.has_ui, "model": state.model,
            "projectTrusted": self.project_trusted,
        })
    }

    pub fn emit(&self, event: SessionEvent) {
        (self.sink)(&event);
    }
}

/// The part of a command name before its first `:`: names with different roots can never
/// produce the same invocation name.
fn command_root(name: &str) -> &str {
    name.split(':').next().unwrap_or(name)
}

/// Where a tool's code lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolSource {
    /// One of pi's built-in tools, run by the host inside the workspace.
    Builtin,
    /// Registered by the extension at this index (load order); runs in its instance.
    Extension(usize),
    /// Registered by one of pi 1.6.0's built-in extensions the host serves: an MCP
    /// server's tool or `tool_search` (`mcp_extension`).
    Host,
}

#[derive(Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisteredTool {
    #[serde(skip)]
    pub source: ToolSource,
    pub extension_name: String,
    pub name: String,
    pub label: String,
    pub description: String,
    pub parameters: Value,
    pub prompt_snippet: Option<String>,
    pub prompt_guidelines: Vec<String>,
    pub has_prepare_arguments: bool,
    pub execution_mode: Option<String>,
    /// pi 1.6.0's `constrainedSampling`, declared with the tool in the system message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub constrained_sampling: Option<Value>,
    /// pi 1.6.0's tool exposure (see [`RegisteredTool::activated_on_registration`]):
    /// `direct` unless a 1.6 extension said otherwise.
    #[serde(skip)]
    pub exposure: Exposure,
    /// pi 1.6.0's `defaultActive`, `namespace` and `annotations` (listed by getAllTools).
    #[serde(skip)]
    pub default_active: Option<bool>,
    #[serde(skip)]
    pub namespace: Option<Value>,
    #[serde(skip)]
    pub annotations: Option<Value>,
    /// The parameter schema, compiled on the tool's first call and kept (a run that never
    /// calls a tool compiles nothing).
    #[serde(skip)]
    pub validator: LazyValidator,
}

impl std::fmt::Debug for RegisteredTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RegisteredTool")
            .field("name", &self.name)
            .field("source", &self.source)
            .finish_non_exhaustive()
    }
}

impl RegisteredTool {
    pub fn from_wit(
        extension: usize,
        extension_name: &str,
        def: ToolDefinition,
        parameters: Value,
    ) -> Self {
        Self {
            source: ToolSource::Extension(extension),
            extension_name: extension_name.to_owned(),
            name: def.name,
            label: def.label,
            description: def.description,
            validator: LazyValidator::default(),
            parameters,
            prompt_snippet: def.prompt_snippet,
            prompt_guidelines: def.prompt_guidelines,
            has_prepare_arguments: def.has_prepare_arguments,
            execution_mode: def.execution_mode,
            // The runtime checked it is JSON.
            constrained_sampling: def
                .constrained_sampling
                .and_then(|text| serde_json::from_str(&text).ok()),
            // The runtime checked the exposure's name and that the rest is JSON.
            exposure: def
                .exposure
                .as_deref()
                .map_or(Exposure::Direct, Exposure::parse),
            default_active: def.default_active,
            namespace: def.namespace.and_then(|t| serde_json::from_str(&t).ok()),
            annotations: def.annotations.and_then(|t| serde_json::from_str(&t).ok()),
        }
    }

    /// A tool the host serves for one of pi 1.6.0's built-in extensions (`extension` is its
    /// `builtin:NAME`), with nothing more than pi's tool definition needs.
    pub fn hosted(
        extension: &str,
        name: String,
        label: String,
        description: String,
        parameters: Value,
        exposure: Exposure,
    ) -> Self {
        Self {
            source: ToolSource::Host,
            extension_name: extension.into(),
            name,
            label,
            description,
            parameters,
            prompt_snippet: None,
            prompt_guidelines: Vec::new(),
            has_prepare_arguments: false,
            execution_mode: None,
            constrained_sampling: None,
            exposure,
            default_active: None,
            namespace: None,
            annotations: None,
            validator: LazyValidator::default(),
        }
    }

    /// pi 1.6.0: registering a tool activates it (declares it to the model) when it is
    /// `direct` or `model-only` and not `defaultActive: false`.
    pub fn activated_on_registration(&self) -> bool {
        matches!(self.exposure, Exposure::Direct | Exposure::ModelOnly)
            && self.default_active != Some(false)
    }
}

/// pi 1.6.0's `ToolExposure`: how the model reaches a tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Exposure {
    /// Declared to the model while active.
    #[default]
    Direct,
    /// Declared while active; never called by other tools.
    ModelOnly,
    /// Called by other tools; declared only when activated explicitly.
    Codemode,
    /// Like codemode, found by tool search.
    Deferred,
    /// Registered but unreachable: activating it has no effect.
    Hidden,
}

impl Exposure {
    pub fn parse(name: &str) -> Self {
        match name {
            "model-only" => Exposure::ModelOnly,
            "codemode" => Exposure::Codemode,
            "deferred" => Exposure::Deferred,
            "hidden" => Exposure::Hidden,
            _ => Exposure::Direct,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Exposure::Direct => "direct",
            Exposure::ModelOnly => "model-only",
            Exposure::Codemode => "codemode",
            Exposure::Deferred => "deferred",
            Exposure::Hidden => "hidden",
        }
    }
}

/// A tool's compiled parameter schema, made on first use and shared by the tool's copies.
/// `None` inside when the schema does not compile: pi does not reject such tools, it just
/// cannot validate their arguments.
#[derive(Clone, Default)]
pub struct LazyValidator(Arc<std::sync::OnceLock<Option<jsonschema::Validator>>>);

impl LazyValidator {
    pub fn get(&self, schema: &Value) -> Option<&jsonschema::Validator> {
        self.0
            .get_or_init(|| jsonschema::validator_for(schema).ok())
            .as_ref()
    }
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RegisteredCommand {
    #[serde(skip)]
    pub owner: CommandOwner,
    pub extension_name: String,
    /// The name the extension registered (what its own instance knows it by).
    pub name: String,
    /// What users type: the name, or `name:N` when several extensions registered it (pi's
    /// invocation names).
    pub invocation_name: String,
    pub description: Option<String>,
    pub has_argument_completions: bool,
}

/// Who serves a command. pi loads its built-in extensions after every other, so they sort
/// last (invocation names, listings).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CommandOwner {
    /// An extension, by load order.
    Extension(usize),
    /// One of pi's built-in extensions, by its place in [`crate::builtins::BUILTINS`].
    Builtin(usize),
}

/// What names an extension where the host must tell extensions apart across restarts (the
/// owner of a panel or app surface): its name and 64 bits of its source hash, so another
/// extension cannot claim it by choosing the same name.
pub fn owner_key(name: &str, source_hash: &str) -> String {
    let hex = source_hash.strip_prefix("sha256:").unwrap_or(source_hash);
    format!("{name}@{}", &hex[..hex.len().min(16)])
}

impl RegisteredCommand {
    pub fn from_wit(extension: usize, extension_name: &str, def: CommandDefinition) -> Self {
        Self {
            owner: CommandOwner::Extension(extension),
            extension_name: extension_name.to_owned(),
            invocation_name: def.name.clone(),
            name: def.name,
            description: def.description,
            has_argument_completions: def.has_argument_completions,
        }
    }
}

/// Everything else an extension registered (recorded; TUI-only ones stay inert).
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OtherRegistrations {
    pub events: Vec<String>,
    pub flags: Vec<Value>,
    pub shortcuts: Vec<Value>,
    pub message_renderers: Vec<String>,
    pub providers: Vec<Value>,
    /// Catalog entries of `pi.registerVirtualModel` (see `crate::models`).
    pub virtual_models: Vec<Value>,
}

pub struct SessionState {
    /// The session's entries, in pi's file format (in memory, or a file with --session).
    pub store: SessionStore,
    pub flag_values: BTreeMap<String, Value>,
    pub thinking_level: String,
    pub model: Option<Value>,
    pub tools: Vec<RegisteredTool>,
    /// The tools the model sees, in order. pi's default: read, bash, edit, write, plus every
    /// extension tool as it registers; `setActiveTools` replaces the list.
    pub active_tools: Vec<String>,
    pub commands: Vec<RegisteredCommand>,
    /// Per extension (load order).
    pub registrations: Vec<OtherRegistrations>,
    /// Per extension (load order): its owner key (see [`owner_key`]).
    pub owners: Vec<String>,
    /// Per extension (load order): pi's `sourceInfo` of what it registers.
    pub extension_sources: Vec<Value>,
    /// pi's effective settings (`pi.getSettings()`): the user's settings.json, then a trusted
    /// project's, merged (see [`crate::settings`]).
    pub settings: Value,
    pub statuses: BTreeMap<String, String>,
    pub widgets: BTreeMap<String, Vec<String>>,
    pub title: Option<String>,
    pub editor_text: String,
    /// Event-bus messages waiting for delivery to the other extensions: (from, channel, data).
    pub bus: VecDeque<(usize, String, String)>,
    /// pi 1.6.0's MCP servers the extensions registered, in registration order.
    pub mcp_servers: Vec<crate::mcp::McpServer>,
    /// Whether the session started: changes to the MCP servers are announced from then on
    /// (pi binds its change listener after the extensions loaded).
    pub announces_mcp_changes: bool,
    /// Events the host raised during an extension's call, dispatched when the call returned:
    /// an extension cannot be called back while it runs.
    pub raised: VecDeque<(String, Value)>,
    /// Dialogs open now, and the `ui_prompt_start` event of the first (pi 1.6.0).
    pub ui_prompts_open: usize,
    pub ui_prompt: Option<Value>,
    /// Bytes of channel names and payloads in `bus`.
    pub bus_bytes: usize,
    /// An extension called ctx.shutdown().
    pub shutdown_requested: bool,
    /// pi 1.6.0: the base system-prompt options as the running (or last) command started,
    /// for its context's `getSystemPromptOptions()` (asked for, not sent with every command).
    pub command_prompt_options: Option<super::system_prompt::SystemPromptOptions>,
    pub agent: AgentState,
    /// Prompt templates and skills.
    pub resources: super::resources::Resources,
}

/// The agent's side of the session: its context messages, whether a run is streaming, and the
/// queues pi keeps for messages that arrive meanwhile.
#[derive(Default)]
pub struct AgentState {
    /// The context the model sees next (pi's `agent.state.messages`).
    pub messages: Vec<Value>,
    pub streaming: bool,
    pub system_prompt: String,
    /// pi 1.6.0: the prompt options `before_agent_start` left for the running prompt.
    pub run_prompt_options: Option<super::system_prompt::SystemPromptOptions>,
    /// Delivered after the current turn's tool calls, before the next model call.
    pub steering: VecDeque<Value>,
    /// Delivered when the agent would otherwise stop.
    pub follow_up: VecDeque<Value>,
    /// Texts of queued user messages, as pi lists them in `queue_update` (removed when the
    /// message starts).
    pub queued_steering: Vec<String>,
    pub queued_follow_up: Vec<String>,
    /// Injected with the next user prompt (`deliverAs: "nextTurn"`).
    pub next_turn: Vec<Value>,
    /// Work extensions asked for that needs the session itself (a new prompt, a triggered
    /// turn); run by the session between steps because an extension cannot re-enter it.
    pub requests: VecDeque<AgentRequest>,
    /// Partial results of running tools (`onUpdate`), for `tool_execution_update`.
    pub tool_updates: Vec<(String, Value)>,
    /// Tool calls executing now: id → (tool name, arguments as the model sent them).
    pub running_tools: BTreeMap<String, (String, Value)>,
    pub steering_mode: super::agent_loop::QueueMode,
    pub follow_up_mode: super::agent_loop::QueueMode,
    pub auto_compaction: bool,
    pub compacting: bool,
    /// Automatic retry of transient model errors (RPC `set_auto_retry` toggles `enabled`).
    pub retry: super::retry::RetrySettings,
    /// The retry attempt of the current series (0: none).
    pub retry_attempt: u64,
    /// Waiting before a retry.
    pub retrying: bool,
    /// The last assistant message's usage, for `ctx.getContextUsage()`.
    pub last_usage: Option<Value>,
    pub context_window: Option<u64>,
}

/// What became of an accepted prompt (pi 1.6.0's `data.disposition` of an RPC prompt's
/// response).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disposition {
    /// A run started for it.
    Started,
    /// Queued into a run (steering or a follow-up).
    Queued,
    /// An extension command or an `input` handler consumed it; no run started.
    Handled,
}

impl Disposition {
    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::Started => "started",
            Disposition::Queued => "queued",
            Disposition::Handled => "handled",
        }
    }
}

/// Called once with the outcome of a queued prompt (an RPC client's response).
pub type Responder = Box<dyn FnOnce(Result<Disposition, String>) + Send>;

pub enum AgentRequest {
    /// A prompt that arrived while the session was busy or from outside it:
    /// `pi.sendUserMessage` (source "extension") or an RPC client's prompt (source "rpc").
    /// It runs through `input` like any prompt.
    UserMessage {
        text: String,
        images: Vec<Value>,
        deliver_as: Option<String>,
        source: &'static str,
        /// Whether `/name` runs an extension command and skills and templates expand: a
        /// client's prompt, or an extension's sendUserMessage with `expandPromptTemplates`.
        commands: bool,
        respond: Option<Responder>,
    },
    /// `pi.sendMessage(.., { triggerTurn: true })` while idle: a turn on a custom message.
    CustomTurn(Value),
    /// `ctx.compact({ customInstructions, onComplete, onError })`.
    Compact {
        instructions: Option<String>,
        /// Whose callbacks hear the outcome: (extension index, the guest's callback id).
        reply_to: Option<(usize, u64)>,
    },
    /// A command context's newSession / fork / switchSession / navigateTree / reload, run
    /// when the command returns.
    SessionAction { action: String, args: Value },
    /// An event for the extensions that a host call caused (pi emits it without waiting).
    Event { name: String, event: Value },
}

impl SessionState {
    pub fn new(store: SessionStore) -> Self {
        Self {
            store,
            flag_values: BTreeMap::new(),
            thinking_level: "off".into(),
            model: None,
            tools: Vec::new(),
            active_tools: Vec::new(),
            commands: Vec::new(),
            registrations: Vec::new(),
            owners: Vec::new(),
            extension_sources: Vec::new(),
            settings: Value::Object(Default::default()),
            statuses: BTreeMap::new(),
            widgets: BTreeMap::new(),
            title: None,
            editor_text: String::new(),
            bus: VecDeque::new(),
            bus_bytes: 0,
            mcp_servers: Vec::new(),
            announces_mcp_changes: false,
            raised: VecDeque::new(),
            ui_prompts_open: 0,
            ui_prompt: None,
            shutdown_requested: false,
            command_prompt_options: None,
            agent: AgentState::default(),
            resources: Default::default(),
        }
    }

    pub fn registrations_mut(&mut self, extension: usize) -> &mut OtherRegistrations {
        if self.registrations.len() <= extension {
            self.registrations
                .resize_with(extension + 1, Default::default);
        }
        &mut self.registrations[extension]
    }

    /// Drops what one extension registered (tools, commands, subscriptions, flags, ...): it
    /// failed to load, or it restarts and registers again. Names several extensions shared
    /// are numbered again.
    pub fn forget_extension(&mut self, extension: usize) {
        self.tools
            .retain(|t| t.source != ToolSource::Extension(extension));
        let mut roots: Vec<String> = self
            .commands
            .iter()
            .filter(|c| c.owner == CommandOwner::Extension(extension))
            .map(|c| command_root(&c.name).to_owned())
            .collect();
        roots.sort();
        roots.dedup();
        self.commands
            .retain(|c| c.owner != CommandOwner::Extension(extension));
        for root in roots {
            self.resolve_invocation_names(&root);
        }
        if let Some(r) = self.registrations.get_mut(extension) {
            *r = Default::default();
        }
        self.mcp_servers.retain(|s| s.extension != extension);
    }

    pub fn active_tool_names(&self) -> Vec<String> {
        self.active_tools.clone()
    }

    /// Adds or replaces a tool; a new name becomes active, as in pi. An extension's tool
    /// replaces a built-in of the same name and its own earlier registration, but not another
    /// extension's: as in pi, the first extension to register a name keeps it (so a later
    /// one cannot take over calls meant for it). Returns false when the tool was not taken.
    pub fn register_tool(&mut self, tool: RegisteredTool) -> bool {
        let name = tool.name.clone();
        if let Some(existing) = self.tools.iter().find(|t| t.name == name)
            && let (ToolSource::Extension(owner), ToolSource::Extension(new)) =
                (existing.source, tool.source)
            && owner != new
        {
            return false;
        }
        let existed = self.tools.iter().any(|t| t.name == name);
        let activate = tool.activated_on_registration();
        self.tools.retain(|t| t.name != name);
        self.tools.push(tool);
        if !existed && activate && !self.active_tools.contains(&name) {
            self.active_tools.push(name);
        }
        true
    }

    /// Makes `names` the active tools: unknown and hidden ones are left out. pi 1.6.0 keeps
    /// the tools that stay active in their order and appends the new ones (`keep_order`);
    /// 0.73.1 takes the order given.
    pub fn set_active(&mut self, names: &[String], keep_order: bool) {
        let usable = |state: &Self, name: &String| {
            state
                .tool(name)
                .is_some_and(|t| t.exposure != Exposure::Hidden)
        };
        let mut active: Vec<String> = Vec::with_capacity(names.len());
        if keep_order {
            active.extend(
                self.active_tools
                    .iter()
                    .filter(|n| names.contains(n))
                    .cloned(),
            );
        }
        for name in names {
            if usable(self, name) && !active.contains(name) {
                active.push(name.clone());
            }
        }
        active.retain(|n| usable(self, n));
        self.active_tools = active;
    }

    /// The commands of pi 1.6.0's built-in extensions named, which stay through extension
    /// reloads.
    pub fn register_builtins(&mut self, names: &[&str]) {
        for (b, builtin) in crate::builtins::BUILTINS.iter().enumerate() {
            if !names.contains(&builtin.name) {
                continue;
            }
            for command in builtin.commands {
                self.register_command(RegisteredCommand {
                    owner: CommandOwner::Builtin(b),
                    extension_name: builtin.name.into(),
                    name: command.name.into(),
                    invocation_name: command.name.into(),
                    description: Some(command.description.into()),
                    has_argument_completions: false,
                });
            }
        }
    }

    /// Adds or replaces (same extension, same name) a command, then gives every command pi's
    /// invocation name: a name several extensions registered becomes `name:1`, `name:2`, ...
    /// in load order.
    pub fn register_command(&mut self, command: RegisteredCommand) {
        let root = command_root(&command.name).to_owned();
        match self
            .commands
            .iter_mut()
            .find(|c| c.owner == command.owner && c.name == command.name)
        {
            // Registered again: replaced where it was (pi's Map keeps the first position).
            Some(existing) => *existing = command,
            None => self.commands.push(command),
        }
        self.resolve_invocation_names(&root);
    }

    /// pi's invocation names (runner.js `resolveRegisteredCommands`), in load order: a name
    /// registered once is used as it is, one registered by several extensions becomes
    /// `name:1`, `name:2`, ...; a name already taken by an earlier command moves on to the
    /// next free suffix (a literal `x:1` registered after another extension's renamed `x`
    /// becomes `x:1:2`), so no extension takes a name another's renaming produced. Only names
    /// sharing the part before the first `:` can meet, so only that family is renamed
    /// (linear in the commands: thousands of registrations stay cheap).
    fn resolve_invocation_names(&mut self, root: &str) {
        let mut family: Vec<usize> = (0..self.commands.len())
            .filter(|&i| command_root(&self.commands[i].name) == root)
            .collect();
        family.sort_by_key(|&i| self.commands[i].owner);
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for &i in &family {
            *counts.entry(self.commands[i].name.as_str()).or_default() += 1;
        }
        let mut seen: HashMap<String, usize> = HashMap::new();
        let mut taken: HashSet<String> = HashSet::new();
        let mut names = Vec::with_capacity(family.len());
        for &i in &family {
            let name = &self.commands[i].name;
            let occurrence = seen.entry(name.clone()).or_default();
            *occurrence += 1;
            let mut invocation = if counts[name.as_str()] > 1 {
                format!("{name}:{occurrence}")
            } else {
                name.clone()
            };
            let mut suffix = *occurrence;
            while taken.contains(&invocation) {
                suffix += 1;
                invocation = format!("{name}:{suffix}");
            }
            taken.insert(invocation.clone());
            names.push((i, invocation));
        }
        for (i, invocation) in names {
            self.commands[i].invocation_name = invocation;
        }
    }

    /// The owner key of the extension that registered the command users invoke as `invocation`.
    pub fn command_owner(&self, invocation: &str) -> Option<&str> {
        match self.command(invocation)?.owner {
            CommandOwner::Extension(i) => self.owners.get(i).map(String::as_str),
            CommandOwner::Builtin(_) => None,
        }
    }

    pub fn command(&self, invocation: &str) -> Option<&RegisteredCommand> {
        self.commands
            .iter()
            .find(|c| c.invocation_name == invocation)
    }

    /// pi's `ctx.getContextUsage()`: the last assistant's reported usage plus an estimate of
    /// what came after it, against the model's context window.
    pub fn context_usage(&self, pi: PiVersion) -> Option<Value> {
        let window = self.agent.context_window.filter(|w| *w > 0)?;
        // After a compaction the last reported usage measured the old, larger context: the
        // size is unknown until a model answers again (pi says null, not a guess).
        let branch = self.store.get_branch(None);
        if let Some(at) = branch.iter().rposition(|e| e["type"] == "compaction") {
            let answered = branch[at + 1..].iter().any(|e| {
                let m = &e["message"];
                e["type"] == "message"
                    && m["role"] == "assistant"
                    && m["stopReason"] != "aborted"
                    && m["stopReason"] != "error"
                    && super::compaction::estimate_context_tokens(std::slice::from_ref(m), pi)
                        .usage_tokens
                        > 0
            });
            if !answered {
                return Some(json!({ "tokens": null, "contextWindow": window, "percent": null }));
            }
        }
        let tokens = super::compaction::estimate_context_tokens(&self.agent.messages, pi).tokens;
        Some(json!({
            "tokens": tokens,
            "contextWindow": window,
            "percent": tokens as f64 / window as f64 * 100.0,
        }))
    }

    /// Whether any extension subscribed to `event`.
    pub fn has_handlers(&self, event: &str) -> bool {
        self.registrations
            .iter()
            .any(|r| r.events.iter().any(|e| e == event))
    }

    /// The commands as pi lists them (`get_commands`, `pi.getCommands()`): the extensions'
    /// registered commands, then prompt templates, then skills.
    pub fn commands_json(&self) -> Value {
        let (extensions, builtins): (Vec<_>, Vec<_>) = self
            .commands
            .iter()
            .partition(|c| matches!(c.owner, CommandOwner::Extension(_)));
        Value::Array(
            extensions
                .into_iter()
                .chain(builtins)
                .map(|c| {
                    let source_info = match c.owner {
                        CommandOwner::Extension(i) => self.extension_sources.get(i).cloned(),
                        CommandOwner::Builtin(b) => Some(crate::builtins::source_info(&crate::builtins::BUILTINS[b])),
                    }
                    .unwrap_or_else(|| {
                        json!({ "path": format!("extension:{}", c.extension_name), "source": "cli", "scope": "temporary", "origin": "top-level" })
                    });
                    json!({
                        "name": c.invocation_name, "description": c.description, "source": "extension",
                        "sourceInfo": source_info,
                    })
                })
                .chain(self.resources.commands_json())
                .collect(),
        )
    }

    pub fn tool(&self, name: &str) -> Option<&RegisteredTool> {
        self.tools.iter().find(|t| t.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn command(extension: usize, name: &str) -> RegisteredCommand {
        RegisteredCommand {
            owner: CommandOwner::Extension(extension),
            extension_name: format!("ext{extension}"),
            name: name.into(),
            invocation_name: name.into(),
            description: None,
            has_argument_completions: false,
        }
    }

    fn invocations(state: &SessionState) -> Vec<(usize, String, String)> {
        let mut all: Vec<_> = state
            .commands
            .iter()
            .map(|c| {
                let CommandOwner::Extension(e) = c.owner else {
                    unreachable!("no built-ins here")
                };
                (e, c.name.clone(), c.invocation_name.clone())
            })
            .collect();
        all.sort();
        all
    }

    #[test]
    fn invocation_names_follow_pis_rule_and_no_literal_takes_a_renamed_one() {
        let mut state = SessionState::new(SessionStore::in_memory("/w"));
        state.register_command(command(0, "x"));
        state.register_command(command(1, "x"));
        // A later extension's literal `x:1` cannot take extension 0's `x:1`.
        state.register_command(command(2, "x:1"));
        state.register_command(command(2, "deploy"));
        let expected = |rows: &[(usize, &str, &str)]| -> Vec<(usize, String, String)> {
            rows.iter()
                .map(|(e, n, i)| (*e, n.to_string(), i.to_string()))
                .collect()
        };
        assert_eq!(
            invocations(&state),
            expected(&[
                (0, "x", "x:1"),
                (1, "x", "x:2"),
                (2, "deploy", "deploy"),
                (2, "x:1", "x:1:2"),
            ])
        );
        assert_eq!(
            state.command("x:1").unwrap().owner,
            CommandOwner::Extension(0)
        );
        // An earlier extension's literal keeps its name; the renamed ones move on, as in pi.
        let mut state = SessionState::new(SessionStore::in_memory("/w"));
        state.register_command(command(0, "x:1"));
        state.register_command(command(1, "x"));
        state.register_command(command(2, "x"));
        assert_eq!(
            invocations(&state),
            expected(&[(0, "x:1", "x:1"), (1, "x", "x:2"), (2, "x", "x:3")])
        );
        // Forgetting an extension renames the rest.
        state.forget_extension(0);
        assert_eq!(
            invocations(&state),
            expected(&[(1, "x", "x:1"), (2, "x", "x:2")])
        );
    }
}
