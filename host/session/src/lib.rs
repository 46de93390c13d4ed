//! A session: its isolated extension instances in load order, and the folds that run pi's events
//! across them with pi 0.73.1's semantics (core/extensions/runner.js): each extension runs its own
//! handler chain in the guest and hands back the updated event, which the next extension
//! receives. It owns the store (pi's JSONL session format), the agent loop, lifecycle (new,
//! fork, switch, tree), compaction, resources (skills, prompts), and [`launch`]: opening a
//! session from a plain description and running steps, shared by `run`, `rpc`, `check` and
//! `serve`; [`discovery`] finds a pi user's extensions as pi does, [`export_html`] writes a
//! session as one page.
//!
//! It implements the runtime's `ExtensionHost` ([`port`]); it knows no transport: HTTP, RPC and
//! the terminal are its clients, through [`EventSink`] and [`DialogResponder`].

mod agent_loop;
mod boundary;
mod branch_summary;
pub mod builtins;
mod compact;
mod compaction;
mod dialogs;
pub mod discovery;
pub mod events;
pub mod export_html;
pub mod launch;
mod lifecycle;
mod mcp;
mod mcp_extension;
pub mod messages;
pub mod models;
mod nested;
mod pi_schema;
mod port;
pub mod resources;
pub mod retry;
pub mod settings;
pub mod state;
pub mod store;
mod system_message;
mod system_prompt;
pub mod terminal;
pub mod tool_calls;
mod tool_search;
pub mod trust;

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

pub use agent_loop::{PromptOptions, QueueMode};
pub use dialogs::{DialogResponder, NoDialogs, ScriptedAnswers, TerminalDialogs};
pub use events::{EventSink, SessionEvent, UiRequest};
pub use lifecycle::{ForkOutcome, ForkPosition, TreeOutcome};
pub use models::Selection;
pub use pichamber_pi::PiVersion;
pub use state::{SessionShared, SessionState};
pub use system_prompt::SystemPromptOptions;
pub use tool_calls::ToolExecution;

use pichamber_artifact::{Artifact, Origin};
use pichamber_model::ModelClient;
use pichamber_runtime::{CallError, CommandStep, ExtensionInstance, InstanceOptions, Runtime};
use pichamber_tools::{self as tools, Workspace};
use state::{CommandOwner, RegisteredTool, ToolSource};

/// How a session is set up.
pub struct SessionConfig {
    pub cwd: String,
    pub has_ui: bool,
    pub dialogs: Arc<dyn DialogResponder>,
    pub sink: EventSink,
    pub instance: InstanceOptions,
    /// `--flag name=value` values for extension flags.
    pub flags: Vec<(String, Value)>,
    /// The model prompts go to; `None`: prompts get a notice, commands and tools still work.
    pub model: Option<Arc<ModelClient>>,
    /// The models the session may switch to and extensions may look up and call
    /// (`ctx.modelRegistry`); `model` is added when the catalog lacks it.
    pub catalog: pichamber_model::catalog::Catalog,
    pub agent: AgentSettings,
    /// Where entries go: a session file (new or resumed) or memory.
    pub store: Option<store::SessionStore>,
    /// The pi release the session follows (`PiVersion::for_session` of its extensions).
    pub pi: PiVersion,
    /// What `ctx.mode` says: pi's "rpc", or its one-shot "print" and "json".
    pub mode: &'static str,
    /// What `ctx.isProjectTrusted()` says (pi 1.6.0): whether the working folder's own
    /// resources were trusted to load (see `trust`).
    pub project_trusted: bool,
    /// pi 1.6.0's built-in extensions the session loads (names; [`builtins::enabled`]): a pi
    /// client's session that follows 1.6.0 has them, others none.
    pub builtin_extensions: Vec<&'static str>,
}

/// How the agent behaves (pi's settings of the same names).
#[derive(Debug, Clone, Default)]
pub struct AgentSettings {
    pub tool_execution: ToolExecution,
    pub steering_mode: QueueMode,
    pub follow_up_mode: QueueMode,
    /// pi's read, bash, edit, write, grep, find, ls, confined to the workspace (`cwd`).
    pub builtin_tools: bool,
    pub system_prompt: Option<String>,
    pub append_system_prompt: Option<String>,
    pub compaction: compaction::CompactionSettings,
    pub retry: retry::RetrySettings,
}

/// What a tool call produced (`pichamber run --tool`).
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
    /// In load order; one whose tool is running is lent to that call (see `nested`).
    extensions: Vec<nested::Slot>,
    /// Instances stopped by a new session or a reload, dropped when the session is next idle
    /// ([`Session::set_slots_to_spare`]).
    stopped: Vec<nested::Slot>,
    /// The extensions' next instances, made while the session waited.
    made_ahead: Vec<MadeAhead>,
    slots_to_spare: bool,
    /// The instances were replaced (a new session, a reload) since the next ones were last
    /// made: the next idle makes them.
    make_ahead_due: bool,
    /// Nested calls (`ctx.executeTool`) the running tools make, and their records.
    nested_calls: tokio::sync::mpsc::UnboundedReceiver<nested::NestedCall>,
    nested_records: std::collections::HashMap<String, nested::Record>,
    nested_next: std::collections::HashMap<String, u32>,
    /// Where each loaded extension's sources are (same order as `extensions`).
    origins: Vec<Option<Origin>>,
    next_call: u64,
    /// What prompts go to: a model, or a virtual model routed per request (see `models`).
    model: Option<Selection>,
    /// The answer whose request an automatic retry repeats (a router is told of it).
    failed_request: Option<Value>,
    /// Set while `flush_bus` dispatches the events the host raised.
    dispatching_raised: bool,
    settings: AgentSettings,
    /// Where the built-in tools work (None when they are off or the folder cannot be opened).
    workspace: Option<Arc<Workspace>>,
    /// pi's turnIndex: counts turn_end events within one agent run.
    turn_index: u64,
    /// What was loaded, in order, to load again on reload and session switches, with how
    /// each was found (its commands' `sourceInfo`).
    artifacts: Vec<(Artifact, resources::Metadata)>,
    /// Grants for particular extensions (by source hash) instead of the session's
    /// (`pichamber serve`'s capability policy per extension).
    extension_grants: std::collections::HashMap<String, Arc<pichamber_access::Grants>>,
    /// pi 1.6.0's built-in extensions the session loads ([`SessionConfig::builtin_extensions`]).
    builtins: Vec<&'static str>,
    /// The built-in MCP extension, between a session's start and its shutdown.
    mcp: Option<mcp_extension::McpExtension>,
    /// How long the session waits idle before its extensions hibernate ([`Session::idle`]).
    hibernate_after: Option<std::time::Duration>,
}

/// Events whose fold reads what each extension's handlers left of the event: the combined
/// result is built from it, or (`tool_call`) a rewritten input is checked.
const FOLD_READS_EVENT: &[&str] = &[
    "tool_call",
    "tool_result",
    "message_end",
    "context",
    "context_with_system",
    "before_provider_request",
    "before_agent_start",
    "input",
];

/// Upper bound on event-bus deliveries after one step (stops two extensions ping-ponging).
const MAX_BUS_DELIVERIES: usize = 1000;
/// Session actions one command may wait for (each a whole tree navigation); past them each
/// fails, and a command still asking after a few refusals is stopped (its instance restarts).
const MAX_COMMAND_ACTIONS: usize = 256;
const MAX_REFUSED_ACTIONS: usize = 8;

/// What ended an owner loop's wait ([`Session::idle`]).
pub enum Idle<T> {
    /// The next item of the queue.
    Work(T),
    /// The queue's senders are all gone.
    Closed,
    /// A timer fell due or an extension was active: poll again.
    Poll,
}

/// An extension's next instance, made while the session waited: it stands in for a fresh one
/// only at the same place in load order, for the same build and grants.
struct MadeAhead {
    index: usize,
    source_hash: String,
    grants: Arc<pichamber_access::Grants>,
    instance: pichamber_runtime::Unstarted,
}

impl MadeAhead {
    fn fits(&self, artifact: &Artifact, options: &InstanceOptions) -> bool {
        self.source_hash == artifact.manifest.source_hash
            && Arc::ptr_eq(&self.grants, &options.grants)
    }
}

impl Session {
    pub fn new(runtime: Arc<Runtime>, config: SessionConfig) -> Self {
        let mut config = config;
        config.agent.compaction.pi = config.pi;
        let store = config
            .store
            .unwrap_or_else(|| store::SessionStore::in_memory(&config.cwd));
        let id = store.get_session_id().to_owned();
        // A resumed session continues where it left off: its context, its thinking level.
        let context = store.build_session_context();
        let mut state = SessionState::new(store);
        state.agent.messages = context.messages;
        state.thinking_level = context.thinking_level;
        for (name, value) in config.flags {
            state.flag_values.insert(name, value);
        }
        let mut workspace = None;
        if config.agent.builtin_tools {
            match Workspace::open(std::path::Path::new(&config.cwd)) {
                Ok(w) => workspace = Some(Arc::new(w)),
                Err(e) => tracing::warn!("built-in tools are off: cannot open {}: {e}", config.cwd),
            }
        }
        if workspace.is_some() {
            for spec in tools::builtin_specs(config.pi) {
                state.tools.push(RegisteredTool {
                    source: ToolSource::Builtin,
                    extension_name: String::new(),
                    name: spec.name.to_owned(),
                    label: spec.label.to_owned(),
                    description: spec.description,
                    validator: Default::default(),
                    parameters: spec.parameters,
                    prompt_snippet: spec.prompt_snippet,
                    prompt_guidelines: spec.prompt_guidelines,
                    has_prepare_arguments: false,
                    execution_mode: None,
                    constrained_sampling: spec.constrained_sampling,
                    exposure: Default::default(),
                    default_active: None,
                    namespace: None,
                    annotations: None,
                });
            }
            state.active_tools = tools::DEFAULT_ACTIVE
                .iter()
                .map(|s| s.to_string())
                .collect();
        }
        if !config.pi.is_1_6() {
            config.builtin_extensions.clear();
        }
        state.register_builtins(&config.builtin_extensions);
        if config.builtin_extensions.contains(&builtins::TOOL_SEARCH) {
            state.tools.push(tool_search::definition());
        }
        state.agent.steering_mode = config.agent.steering_mode;
        state.agent.follow_up_mode = config.agent.follow_up_mode;
        state.agent.auto_compaction = config.agent.compaction.enabled;
        state.agent.retry = config.agent.retry;
        if let Some(model) = &config.model {
            state.model = Some(model.info());
            state.agent.context_window = model.info()["contextWindow"].as_u64();
        }
        let (nested, nested_calls) = nested::NestedCalls::new();
        let shared = Arc::new(SessionShared {
            id,
            cwd: config.cwd,
            has_ui: config.has_ui,
            pi: config.pi,
            mode: config.mode.into(),
            project_trusted: config.project_trusted,
            sink: config.sink,
            dialogs: config.dialogs,
            catalog: config.catalog.with(config.model.as_ref()),
            state: Mutex::new(state),
            abort: tokio::sync::watch::channel(false).0,
            bash_abort: tokio::sync::watch::channel(false).0,
            retry_abort: tokio::sync::watch::channel(false).0,
            nested,
            activity: tokio::sync::Notify::new(),
            hibernating: Default::default(),
        });
        Self {
            shared,
            runtime,
            options: config.instance,
            extensions: Vec::new(),
            stopped: Vec::new(),
            made_ahead: Vec::new(),
            slots_to_spare: false,
            make_ahead_due: false,
            nested_calls,
            nested_records: Default::default(),
            nested_next: Default::default(),
            origins: Vec::new(),
            next_call: 0,
            model: config.model.map(Selection::Model),
            failed_request: None,
            dispatching_raised: false,
            hibernate_after: None,
            settings: config.agent,
            workspace,
            turn_index: 0,
            artifacts: Vec::new(),
            extension_grants: Default::default(),
            builtins: config.builtin_extensions,
            mcp: None,
        }
    }

    /// Gives the extension built from `source_hash` these grants instead of the session's
    /// (for extensions loaded after this call).
    pub fn set_extension_grants(
        &mut self,
        source_hash: &str,
        grants: Arc<pichamber_access::Grants>,
    ) {
        self.extension_grants.insert(source_hash.to_owned(), grants);
    }

    /// Gives the extension built from `source_hash` other grants now: its instance is started
    /// afresh with them (a user approved what it asked for). A failure is reported as an
    /// error entry, as a restart's is, and returned.
    pub async fn regrant(
        &mut self,
        source_hash: &str,
        grants: Arc<pichamber_access::Grants>,
    ) -> Result<(), String> {
        self.extension_grants
            .insert(source_hash.to_owned(), grants.clone());
        self.made_ahead.retain(|m| m.source_hash != source_hash);
        let mut result = Ok(());
        for instance in self
            .extensions
            .iter_mut()
            .filter(|e| e.source_hash() == source_hash)
        {
            if let Err(e) = instance.regrant(grants.clone()).await {
                let message = e.to_string();
                self.shared.emit(SessionEvent::ExtensionError {
                    extension: instance.name.clone(),
                    event: "approval".into(),
                    error: message.clone(),
                    stack: None,
                });
                result = Err(message);
            }
        }
        self.flush_bus().await;
        result
    }

    /// What the base system prompt is built from: the active tools' snippets and guidelines
    /// (pi 1.6.0 keeps every registered tool's, and the prompt lists the selected ones).
    pub fn system_prompt_options(&self) -> SystemPromptOptions {
        let state = self.shared.state.lock().unwrap();
        let active: Vec<&RegisteredTool> = state
            .active_tools
            .iter()
            .filter_map(|n| state.tool(n))
            .collect();
        let described: Vec<&RegisteredTool> = if self.shared.pi.is_1_6() {
            state.tools.iter().collect()
        } else {
            active.clone()
        };
        SystemPromptOptions {
            custom_prompt: self.settings.system_prompt.clone(),
            append: self.settings.append_system_prompt.clone(),
            cwd: self.shared.cwd.clone(),
            selected_tools: active.iter().map(|t| t.name.clone()).collect(),
            tool_snippets: described
                .iter()
                .filter_map(|t| {
                    let snippet = t.prompt_snippet.as_deref()?.trim();
                    (!snippet.is_empty()).then(|| (t.name.clone(), snippet.to_owned()))
                })
                .collect(),
            guidelines: active
                .iter()
                .flat_map(|t| t.prompt_guidelines.iter().cloned())
                .collect(),
            context_files: Vec::new(),
            skills: state.resources.skills.clone(),
            tool_guidelines: described
                .iter()
                .filter(|t| !t.prompt_guidelines.is_empty())
                .map(|t| (t.name.clone(), t.prompt_guidelines.clone()))
                .collect(),
            extra_guidelines: Vec::new(),
            sections: Vec::new(),
        }
    }

    pub fn set_thinking_level(&self, level: &str) -> Result<(), String> {
        const LEVELS: [&str; 6] = ["off", "minimal", "low", "medium", "high", "xhigh"];
        if !LEVELS.contains(&level) {
            return Err(format!(
                "unknown thinking level {level:?}: use one of {}",
                LEVELS.join(", ")
            ));
        }
        let mut state = self.shared.state.lock().unwrap();
        state.thinking_level = match &state.model {
            // pi 1.6.0 clamps to the levels the model offers.
            Some(model) if self.shared.pi.is_1_6() => models::clamp_thinking_level(model, level),
            // pi 0.73.1: a model that does not reason has only "off".
            Some(model) if model["reasoning"] != json!(true) => "off".to_owned(),
            _ => level.to_owned(),
        };
        Ok(())
    }

    /// Sets the tools the model may use; every name must be a known tool.
    pub fn set_active_tools(&self, names: &[String]) -> Result<(), String> {
        let mut state = self.shared.state.lock().unwrap();
        let unknown: Vec<&String> = names.iter().filter(|n| state.tool(n).is_none()).collect();
        if !unknown.is_empty() {
            let known: Vec<&str> = state.tools.iter().map(|t| t.name.as_str()).collect();
            return Err(format!(
                "unknown tool(s) {}: known tools are {}",
                unknown
                    .iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
                known.join(", ")
            ));
        }
        let keep_order = self.shared.pi.is_1_6();
        state.set_active(names, keep_order);
        Ok(())
    }

    /// The prompt as text: pi 0.73.1's string, or pi 1.6.0's sections rendered as the model
    /// gets them.
    pub fn base_system_prompt(&self) -> String {
        self.system_prompt_from(&self.system_prompt_options())
    }

    /// The prompt text `options` make, in the session's pi version.
    fn system_prompt_from(&self, options: &SystemPromptOptions) -> String {
        if self.shared.pi.is_1_6() {
            let sections = system_prompt::sections(options);
            system_prompt::render(sections.iter().map(|(_, t)| t.as_str()))
        } else {
            system_prompt::build(options)
        }
    }

    /// pi 1.6.0: the system message that brings the transcript's prompt (as `options` make
    /// it) and tool loadout up to date, or `None` when the model already has them (and always
    /// under pi 0.73.1).
    fn system_message_patch(&self, options: &SystemPromptOptions) -> Option<Value> {
        if !self.shared.pi.is_1_6() {
            return None;
        }
        let sections = system_prompt::sections(options);
        let state = self.shared.state.lock().unwrap();
        let tools: Vec<Value> = state
            .active_tools
            .iter()
            .filter_map(|name| state.tool(name))
            .map(|t| {
                system_message::declaration(
                    &t.name,
                    &t.description,
                    &t.parameters,
                    t.constrained_sampling.as_ref(),
                )
            })
            .collect();
        let current = system_message::replay(&state.agent.messages);
        system_message::patch(&current, &sections, &tools, messages::now_ms())
    }

    fn error(&self, extension: &str, event: &str, error: impl std::fmt::Display) {
        let (error, stack) = events::split_stack(&error.to_string());
        self.shared.emit(SessionEvent::ExtensionError {
            extension: extension.to_owned(),
            event: event.to_owned(),
            error,
            stack,
        });
    }

    /// Loads one extension. A failure is reported as an error entry and the session goes on
    /// without it; the error is returned too.
    pub async fn load(&mut self, artifact: &Artifact) -> Result<(), String> {
        self.load_found(artifact, resources::Metadata::given())
            .await
    }

    /// Loads an extension found as `found` says (pi's `sourceInfo` of what it registers).
    pub async fn load_found(
        &mut self,
        artifact: &Artifact,
        found: resources::Metadata,
    ) -> Result<(), String> {
        self.load_shared(artifact.clone(), found).await
    }

    async fn load_shared(
        &mut self,
        artifact: Artifact,
        found: resources::Metadata,
    ) -> Result<(), String> {
        let result = self.load_instance(&artifact, &found).await;
        self.artifacts.push((artifact, found));
        result
    }

    async fn load_instance(
        &mut self,
        artifact: &Artifact,
        found: &resources::Metadata,
    ) -> Result<(), String> {
        let index = self.extensions.len();
        let options = self.options_for(artifact);
        let made = match self.made_ahead.iter().position(|m| m.index == index) {
            Some(i) => Some(self.made_ahead.swap_remove(i))
                .filter(|m| m.fits(artifact, &options))
                .map(|m| m.instance),
            None => None,
        };
        let prepared = match made {
            Some(_) => None,
            None => match self.runtime.prepare(artifact, &self.image_for(&options)) {
                Ok(p) => Some(p),
                Err(e) => {
                    let message = format!("cannot load: {e:#}");
                    self.error(&artifact.manifest.name, "load", &message);
                    return Err(message);
                }
            },
        };
        let owner = state::owner_key(&artifact.manifest.name, &artifact.manifest.source_hash);
        {
            let mut state = self.shared.state.lock().unwrap();
            state.owners.truncate(index);
            state.owners.push(owner.clone());
            // pi's sourceInfo, with the extension's name where pi has its file's path.
            let path = format!("extension:{}", artifact.manifest.name);
            let mut info = found.source_info(std::path::Path::new(&path));
            info.as_object_mut().unwrap().remove("baseDir");
            state.extension_sources.truncate(index);
            state.extension_sources.push(info);
        }
        let started = match (made, prepared) {
            (Some(made), _) => made.start().await,
            (None, Some(prepared)) => {
                let port = self.port_for(index, artifact);
                ExtensionInstance::start(&prepared, artifact, port, &options).await
            }
            (None, None) => unreachable!("an instance is made ahead or prepared"),
        };
        match started {
            Ok(instance) => {
                self.extensions.push(nested::Slot::new(instance));
                self.origins.push(artifact.origin.clone());
                // pi activates every tool an extension registered while loading, also one
                // that replaces a built-in pi leaves inactive (find, grep, ls).
                {
                    let mut state = self.shared.state.lock().unwrap();
                    let own: Vec<String> = state
                        .tools
                        .iter()
                        .filter(|t| t.source == ToolSource::Extension(index))
                        .filter(|t| t.activated_on_registration())
                        .map(|t| t.name.clone())
                        .collect();
                    for name in own {
                        if !state.active_tools.contains(&name) {
                            state.active_tools.push(name);
                        }
                    }
                }
                self.flush_bus().await;
                Ok(())
            }
            Err(e) => {
                // Registrations a failed factory made before throwing are dropped with it.
                self.shared.state.lock().unwrap().forget_extension(index);
                let message = format!("failed to load: {e}");
                self.error(&artifact.manifest.name, "load", &message);
                // Keep indices stable: a placeholder slot is not needed because later
                // extensions take the next index only when they load.
                Err(message)
            }
        }
    }

    /// The instance options of `artifact`: the session's, with its own grants if it has any.
    fn options_for(&self, artifact: &Artifact) -> InstanceOptions {
        match self.extension_grants.get(&artifact.manifest.source_hash) {
            Some(grants) => InstanceOptions {
                grants: grants.clone(),
                ..self.options.clone()
            },
            None => self.options.clone(),
        }
    }

    /// What an extension's image depends on besides its build.
    fn image_for(&self, options: &InstanceOptions) -> pichamber_runtime::ImageFor {
        pichamber_runtime::ImageFor {
            granted_env: options
                .grants
                .env_pairs()
                .into_iter()
                .map(|(name, _)| name)
                .collect(),
            pi_version: self.shared.pi.number().to_owned(),
        }
    }

    /// The host side of the instance at `index` in load order.
    fn port_for(&self, index: usize, artifact: &Artifact) -> Arc<port::ExtensionPort> {
        Arc::new(port::ExtensionPort::new(
            self.shared.clone(),
            index,
            &artifact.manifest.name,
            state::owner_key(&artifact.manifest.name, &artifact.manifest.source_hash),
        ))
    }

    /// Makes each running extension's next instance, once after each replacement of the
    /// session's instances, when it has slots to spare ([`Session::set_slots_to_spare`]).
    async fn make_ahead(&mut self) {
        if !self.slots_to_spare || !std::mem::take(&mut self.make_ahead_due) {
            return;
        }
        for index in 0..self.extensions.len() {
            if self.extensions[index].is_lent() || self.made_ahead.iter().any(|m| m.index == index)
            {
                continue;
            }
            let hash = self.extensions[index].source_hash();
            let Some((artifact, _)) = self
                .artifacts
                .iter()
                .find(|(a, _)| a.manifest.source_hash == hash)
            else {
                continue;
            };
            let artifact = artifact.clone();
            let options = self.options_for(&artifact);
            let Ok(prepared) = self.runtime.prepare(&artifact, &self.image_for(&options)) else {
                continue;
            };
            let port = self.port_for(index, &artifact);
            // One that cannot be made now is made as usual when it is needed (and reports why).
            if let Ok(instance) =
                ExtensionInstance::make(&prepared, &artifact, port, &options).await
            {
                self.made_ahead.push(MadeAhead {
                    index,
                    source_hash: artifact.manifest.source_hash.clone(),
                    grants: options.grants.clone(),
                    instance,
                });
            }
        }
    }

    /// Why extension `rewriter`'s rewrite of a `tool_call` input may not stand: the tool is
    /// another extension's, whose grants reach further than the rewriter's own (the rewrite
    /// would lend them: the rewriter picks what the tool reads and sees its result). pi lets
    /// any handler rewrite any input; a rewrite within the rewriter's own reach still stands,
    /// and built-in tools act with the session's authority (the workspace), not a grant.
    fn lent_grant(&self, rewriter: usize, event: &Value) -> Option<String> {
        let tool = event["toolName"].as_str()?;
        let owner = match self.shared.state.lock().unwrap().tool(tool)?.source {
            ToolSource::Extension(owner) if owner != rewriter => owner,
            _ => return None,
        };
        let owner = self.extensions.get(owner)?;
        let cwd = std::path::Path::new(&self.shared.cwd);
        let missing = owner
            .grants()
            .beyond(self.extensions[rewriter].grants(), cwd)?;
        Some(format!(
            "{} rewrote the input of {tool}, a tool of {}, which may reach what {} may not \
             ({missing}); the call is blocked: a rewrite may not lend another extension's grants",
            self.extensions[rewriter].name, owner.name, self.extensions[rewriter].name
        ))
    }

    pub fn extension_names(&self) -> Vec<String> {
        self.extensions.iter().map(|e| e.name.clone()).collect()
    }

    /// The ctx snapshot every call receives.
    fn ctx(&self) -> Value {
        self.shared.call_context()
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
        self.emit_inner(name, event, false)
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
        self.emit_inner(name, event, true).await
    }

    /// [`Session::emit_with_event`]; the event an extension's handlers left is read back only
    /// when something needs it: the caller (`want_event`), the combined result (built from it
    /// for some events) or a later extension's handlers, which see what earlier ones changed,
    /// as in pi. Otherwise the returned event is the one emitted.
    async fn emit_inner(
        &mut self,
        name: &str,
        event: Value,
        want_event: bool,
    ) -> Result<(Value, Value), String> {
        let want_event = want_event || FOLD_READS_EVENT.contains(&name);
        // The last extension whose handlers will see the event: those before it send it back.
        let last_subscriber = (0..self.extensions.len())
            .rev()
            .find(|&j| self.subscribed(j, name) && !self.extensions[j].is_lent());
        let ctx = self.ctx();
        // What "input" compares its result with; other events need no copy of theirs (a
        // `context` event carries the whole transcript).
        let original_input =
            (name == "input").then(|| (event["text"].clone(), event["images"].clone()));
        let mut event = event;
        let mut result = Value::Null;
        let mut modified = false;
        let mut injected_messages = Vec::new();
        let mut discovered = json!({ "skillPaths": [], "promptPaths": [], "themePaths": [] });
        for i in 0..self.extensions.len() {
            // One lent to its running tool misses what happens meanwhile (see `nested`).
            if !self.subscribed(i, name) || self.extensions[i].is_lent() {
                continue;
            }
            // An instance stopped by a trap is not restarted only to be shut down.
            if name == "session_shutdown" && self.extensions[i].is_broken() {
                continue;
            }
            let extension_name = self.extensions[i].name.clone();
            let input_before = (name == "tool_call").then(|| event["input"].clone());
            let event_back = want_event || last_subscriber.is_some_and(|last| i < last);
            let outcome = self.extensions[i]
                .dispatch_event(name, &event, &ctx, event_back)
                .await;
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
            if let Some(changed) = dispatched.event {
                event = changed;
            }
            let chain = dispatched.chain_result;
            match name {
                "tool_call" => {
                    if input_before.as_ref() != Some(&event["input"])
                        && let Some(refusal) = self.lent_grant(i, &event)
                    {
                        self.error(&extension_name, name, &refusal);
                        return Err(refusal);
                    }
                    if let Some(c) = chain.filter(|c| !c.is_null()) {
                        let block = c["block"] == json!(true);
                        result = c;
                        if block {
                            break;
                        }
                    }
                }
                "tool_result"
                | "message_end"
                | "context"
                | "context_with_system"
                | "before_provider_request" => {
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
                                    .push(json!({ "path": path, "extensionPath": extension_name, "extension": i }));
                            }
                        }
                    }
                }
                // The first extension that decides decides (see `trust`).
                "project_trust" => {
                    if let Some(c) = chain.filter(|c| !c.is_null()) {
                        result = c;
                        break;
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
            "context" | "context_with_system" => json!({ "messages": event["messages"] }),
            "before_provider_request" => event["payload"].clone(),
            "before_agent_start" if modified || !injected_messages.is_empty() => json!({
                "messages": if injected_messages.is_empty() { Value::Null } else { Value::Array(injected_messages) },
                "systemPrompt": if modified { event["systemPrompt"].clone() } else { Value::Null },
            }),
            "input" => {
                let (text, images) = original_input.unwrap_or_default();
                if event["text"] != text || event["images"] != images {
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
            state.command(name).map(|c| (c.owner, c.name.clone()))
        };
        let owner = match owner {
            Some((CommandOwner::Builtin(b), registered_name)) => {
                self.run_builtin_command(b, &registered_name, args).await;
                return Ok(());
            }
            Some((CommandOwner::Extension(owner), registered_name)) => {
                Some((owner, registered_name))
            }
            None => None,
        };
        let Some((owner, registered_name)) = owner else {
            let known: Vec<String> = self
                .shared
                .state
                .lock()
                .unwrap()
                .commands
                .iter()
                .map(|c| format!("/{}", c.invocation_name))
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
        // pi 1.6.0's command context reads the base system-prompt options.
        if self.shared.pi.is_1_6() {
            let options = self.system_prompt_options();
            self.shared.state.lock().unwrap().command_prompt_options = Some(options);
        }
        let mut step = self.extensions[owner]
            .run_command(&registered_name, args, &ctx)
            .await;
        // Each session action the command waits for (ctx.navigateTree) is carried out while it
        // waits, as in pi. Past the limit the actions fail instead, and a command that keeps
        // asking is given up on.
        for asked in 0.. {
            let Ok(CommandStep::Waiting { action, args }) = &step else {
                break;
            };
            if asked == MAX_COMMAND_ACTIONS + MAX_REFUSED_ACTIONS {
                step = Err(self.extensions[owner].stop(&format!(
                    "the command kept asking for session actions past {MAX_COMMAND_ACTIONS}"
                )));
                break;
            }
            self.flush_bus().await;
            let outcome = if asked < MAX_COMMAND_ACTIONS {
                self.awaited_action(owner, action, args).await
            } else {
                Err(format!(
                    "ctx.{action}: a command may carry out at most {MAX_COMMAND_ACTIONS} session actions"
                ))
            };
            step = self.extensions[owner].resume_command(outcome).await;
        }
        let result = step.map(drop);
        self.flush_bus().await;
        result.map_err(|e| {
            let extension = self.extensions[owner].name.clone();
            let message = e.to_string();
            self.error(&extension, &format!("command:/{name}"), &message);
            message
        })
    }

    /// A built-in extension's command, as it runs outside pi's terminal UI.
    async fn run_builtin_command(&mut self, builtin: usize, name: &str, args: &str) {
        let Some(command) = builtins::BUILTINS[builtin]
            .commands
            .iter()
            .find(|c| c.name == name)
        else {
            return;
        };
        match command.run {
            builtins::Run::Headless(show) if self.shared.has_ui => {
                self.shared.emit(SessionEvent::ExtensionUiRequest {
                    id: uuid::Uuid::new_v4().to_string(),
                    request: show(args),
                });
            }
            builtins::Run::Headless(_) => {}
            builtins::Run::Mcp => {
                if let Some(mcp) = &self.mcp {
                    mcp.command(args).await;
                }
            }
        }
    }

    pub async fn complete_arguments(
        &mut self,
        command: &str,
        prefix: &str,
    ) -> Result<Option<Value>, String> {
        let owner = {
            let state = self.shared.state.lock().unwrap();
            state.command(command).map(|c| (c.owner, c.name.clone()))
        };
        let (owner, registered_name) = match owner {
            Some((CommandOwner::Extension(owner), name)) => (owner, name),
            // pi's built-in commands complete nothing outside its terminal UI.
            Some((CommandOwner::Builtin(_), _)) => return Ok(None),
            None => return Err(format!("unknown command /{command}")),
        };
        let items = self.extensions[owner]
            .complete_arguments(&registered_name, prefix)
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

    /// Delivers queued event-bus messages to every extension but the sender, then the events
    /// the host raised meanwhile.
    async fn flush_bus(&mut self) {
        for _ in 0..MAX_BUS_DELIVERIES {
            let next = {
                let mut state = self.shared.state.lock().unwrap();
                let next = state.bus.pop_front();
                if let Some((_, channel, data)) = &next {
                    state.bus_bytes = state.bus_bytes.saturating_sub(channel.len() + data.len());
                }
                next
            };
            let Some((from, channel, data)) = next else {
                break;
            };
            for i in 0..self.extensions.len() {
                if i == from || self.extensions[i].is_lent() || self.extensions[i].is_broken() {
                    continue;
                }
                if let Err(e) = self.extensions[i].deliver_bus_event(&channel, &data).await {
                    let name = self.extensions[i].name.clone();
                    self.error(&name, &format!("events:{channel}"), &e);
                }
            }
        }
        {
            let mut state = self.shared.state.lock().unwrap();
            state.bus.clear();
            state.bus_bytes = 0;
        }
        // Events the host raised while the extensions ran, dispatched here at the outermost
        // flush only: a handler that raises another (registering a server on
        // mcp_servers_change) queues it for this loop instead of nesting, and the loop is
        // bounded as bus deliveries are.
        if self.dispatching_raised {
            return;
        }
        self.dispatching_raised = true;
        for _ in 0..MAX_BUS_DELIVERIES {
            let next = self.shared.state.lock().unwrap().raised.pop_front();
            let Some((name, event)) = next else { break };
            let _ = Box::pin(self.emit(&name, event)).await;
            if name == "mcp_servers_change" {
                Box::pin(self.sync_mcp()).await;
            }
        }
        self.shared.state.lock().unwrap().raised.clear();
        self.dispatching_raised = false;
    }

    /// Gives every extension a chance to run work it left behind (due timers, completed
    /// operations) and returns the time until the earliest next timer.
    pub async fn poll(&mut self) -> Option<std::time::Duration> {
        let mut next: Option<u64> = None;
        for i in 0..self.extensions.len() {
            if self.extensions[i].is_lent() || self.extensions[i].is_broken() {
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

    /// Extensions hibernate when the session has waited `after` with nothing to run
    /// ([`Session::idle`]); `None` (the default) keeps them awake.
    pub fn set_hibernation(&mut self, after: Option<std::time::Duration>) {
        self.hibernate_after = after;
    }

    /// The process has instance slots to spare (`rpc`: one session in a pool of 1,024), so
    /// replacing the session's instances (a new session, a reload) does its slot work while
    /// the session waits, not while its client does: the stopped instances are dropped when
    /// the session is next idle, after its answer (dropping one resets the memory it wrote,
    /// tens of microseconds), and once the session has been replaced, each extension's next
    /// instance is made then too ([`ExtensionInstance::make`]), so that the next one starts by
    /// running the factory. Not where the operator bounds the slots (`serve`): the new
    /// instances may need the old ones' slots, and a spare per session would halve the
    /// sessions a pool holds.
    pub fn set_slots_to_spare(&mut self, on: bool) {
        self.slots_to_spare = on;
    }

    /// Hibernates every extension instance that is idle and can
    /// ([`ExtensionInstance::hibernate`]); how many are hibernating after.
    pub async fn hibernate(&mut self) -> usize {
        let mut hibernating = 0;
        for i in 0..self.extensions.len() {
            if self.extensions[i].is_lent() || self.extensions[i].is_broken() {
                continue;
            }
            match self.extensions[i].hibernate().await {
                Ok(true) => hibernating += 1,
                Ok(false) => {}
                Err(e) => {
                    let name = self.extensions[i].name.clone();
                    self.error(&name, "hibernate", &e);
                }
            }
        }
        self.note_hibernation();
        hibernating
    }

    /// Says in the shared state whether the session hibernates (its summary shows it).
    fn note_hibernation(&self) {
        let usable = self
            .extensions
            .iter()
            .filter(|e| !e.is_lent() && !e.is_broken());
        let (asleep, awake) = usable.fold((0, 0), |(asleep, awake), e| {
            if e.is_hibernating() {
                (asleep + 1, awake)
            } else {
                (asleep, awake + 1)
            }
        });
        self.shared.hibernating.store(
            asleep > 0 && awake == 0,
            std::sync::atomic::Ordering::Relaxed,
        );
    }

    /// The owner loop's wait between commands: drops the stopped instances and makes the next
    /// ones ([`Session::set_slots_to_spare`]), polls the extensions, then waits for the next
    /// item of `queue`, an extension timer falling due or an extension's activity (a program's
    /// output), whichever comes first. With hibernation on, a wait with no timer that lasts
    /// its time, or that another instance's want of a slot cuts short, hibernates the
    /// extensions that can, and goes on waiting.
    pub async fn idle<T>(
        &mut self,
        queue: &mut tokio::sync::mpsc::UnboundedReceiver<T>,
    ) -> Idle<T> {
        self.stopped.clear();
        self.make_ahead().await;
        let next_timer = self.poll().await;
        self.note_hibernation();
        let hibernate_in = self.hibernate_after.filter(|_| {
            next_timer.is_none()
                && self
                    .extensions
                    .iter()
                    .any(|e| !e.is_lent() && !e.is_broken() && e.may_hibernate())
        });
        let shared = self.shared.clone();
        let next = async {
            match next_timer.or(hibernate_in) {
                Some(delay) => {
                    tokio::time::timeout(
                        delay.max(std::time::Duration::from_millis(1)),
                        queue.recv(),
                    )
                    .await
                }
                None => Ok(queue.recv().await),
            }
        };
        let (idle, waited_out) = tokio::select! {
            item = next => match item {
                Ok(Some(item)) => (Idle::Work(item), false),
                Ok(None) => (Idle::Closed, false),
                Err(_) => (Idle::Poll, true),
            },
            () = shared.activity.notified() => (Idle::Poll, false),
            // Another instance wants a slot and every one is taken: no need to wait longer.
            () = pichamber_runtime::room_wanted(), if hibernate_in.is_some() => (Idle::Poll, true),
        };
        if waited_out && next_timer.is_none() && hibernate_in.is_some() {
            self.hibernate().await;
        }
        idle
    }

    pub fn shutdown_requested(&self) -> bool {
        self.shared.state.lock().unwrap().shutdown_requested
    }

    /// Emits `session_shutdown` (reason "quit") and lets every instance finish.
    pub async fn shutdown(&mut self) {
        let _ = self
            .emit(
                "session_shutdown",
                json!({ "type": "session_shutdown", "reason": "quit" }),
            )
            .await;
        self.stop_mcp().await;
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
