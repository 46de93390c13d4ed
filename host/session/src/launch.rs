//! What `pichamber run`, `rpc`, `inspect` and `check` share: loading an extension (source or
//! `.wasm`), opening a session from a plain description of it, running one step (a tool call,
//! a slash command, an event, a prompt) and inspecting what an extension registers.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::resources::{Metadata, ResourcePath};
use crate::store::SessionStore;
use crate::{
    AgentSettings, DialogResponder, EventSink, NoDialogs, PromptOptions, Session, SessionConfig,
    SessionEvent,
};
use pichamber_artifact::Artifact;
use pichamber_artifact::bundle;
use pichamber_model::ModelClient;
use pichamber_pi::PiVersion;
use pichamber_runtime::{InstanceOptions, Runtime, StartImage};

/// Builds sources into an artifact, or reads a built `.wasm`.
pub fn load_artifact(path: &Path) -> Result<Artifact> {
    if path.extension().is_some_and(|e| e == "wasm") {
        if !path.is_file() {
            bail!("{}: no such file", path.display());
        }
        return Artifact::from_file(path)
            .with_context(|| format!("{} is not a pichamber extension", path.display()));
    }
    let bundle = bundle::bundle(path).map_err(|e| anyhow::anyhow!("{e}"))?;
    for warning in &bundle.warnings {
        tracing::warn!("{warning}");
    }
    Ok(Artifact::from_bundle(&bundle))
}

/// Everything a session is opened with, already resolved (no command-line parsing, no
/// discovery): `run` and `rpc` fill it from their flags, `check` from a scenario file.
pub struct SessionSpec {
    pub cwd: PathBuf,
    pub artifacts: Vec<Artifact>,
    pub prompts: Vec<ResourcePath>,
    pub skills: Vec<ResourcePath>,
    pub has_ui: bool,
    pub dialogs: Arc<dyn DialogResponder>,
    pub sink: EventSink,
    pub instance: InstanceOptions,
    pub flags: Vec<(String, Value)>,
    pub model: Option<Arc<ModelClient>>,
    /// What the session may switch to and extensions may call (pi's models.json).
    pub catalog: pichamber_model::catalog::Catalog,
    pub agent: AgentSettings,
    pub thinking: String,
    pub store: Option<SessionStore>,
    /// The tools the model may use (`--tools`); `None`: the default set.
    pub active_tools: Option<Vec<String>>,
    /// The pi release to follow (`--pi-version`); `None`: the one the extensions were
    /// written for ([`PiVersion::for_session`]).
    pub pi: Option<PiVersion>,
    /// What `ctx.mode` says ("rpc", "print", "json").
    pub mode: &'static str,
    /// How each of `artifacts` was found, in order (pi's `sourceInfo` of its commands); one
    /// missing is taken as given on the command line.
    pub found: Vec<Metadata>,
    /// pi's effective settings, for `pi.getSettings()` (`settings::merge` of its layers).
    pub settings: Value,
    /// What `ctx.isProjectTrusted()` says.
    pub project_trusted: bool,
    /// pi 1.6.0's built-in extensions that come along (a pi client's session; see `builtins`).
    pub builtin_extensions: Vec<&'static str>,
}

/// The pi release a session of these extensions follows, unless one is chosen.
pub fn pi_version_for(artifacts: &[Artifact], chosen: Option<PiVersion>) -> PiVersion {
    chosen
        .unwrap_or_else(|| PiVersion::for_session(artifacts.iter().map(|a| a.manifest.pi_version)))
}

/// Opens the session and loads its extensions in order. `None` when every extension failed
/// to load (each failure went to the sink as an extension error).
pub async fn open_session(spec: SessionSpec) -> Result<Option<Session>> {
    let mut session = Session::new(
        Runtime::global()?,
        SessionConfig {
            cwd: spec.cwd.to_string_lossy().into_owned(),
            has_ui: spec.has_ui,
            dialogs: spec.dialogs,
            sink: spec.sink,
            instance: spec.instance,
            flags: spec.flags,
            model: spec.model,
            catalog: spec.catalog,
            agent: spec.agent,
            store: spec.store,
            pi: pi_version_for(&spec.artifacts, spec.pi),
            mode: spec.mode,
            project_trusted: spec.project_trusted,
            builtin_extensions: spec.builtin_extensions,
        },
    );
    session.set_resources(spec.prompts, spec.skills);
    session.set_settings(spec.settings);
    session
        .set_thinking_level(&spec.thinking)
        .map_err(anyhow::Error::msg)?;
    // An extension that fails to load is reported; the others still load and run (as in pi).
    let mut loaded = 0;
    for (i, artifact) in spec.artifacts.iter().enumerate() {
        let found = spec.found.get(i).cloned().unwrap_or_else(Metadata::given);
        if session.load_found(artifact, found).await.is_ok() {
            loaded += 1;
        }
    }
    if loaded == 0 && !spec.artifacts.is_empty() {
        return Ok(None);
    }
    if let Some(names) = &spec.active_tools {
        session
            .set_active_tools(names)
            .map_err(anyhow::Error::msg)?;
    }
    Ok(Some(session))
}

/// One thing done to a session.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// Call a tool directly with these arguments.
    Tool(String, Value),
    /// Run a slash command line ("/name args").
    Command(String),
    /// Emit an event (its body carries its `type`).
    Event(String, Value),
    /// Send a prompt to the agent and run it to completion.
    Prompt(String),
}

/// What one step produced, besides the events it sent to the sink.
#[derive(Debug, Clone, Default)]
pub struct StepOutcome {
    /// The step failed: a tool result with isError, a failed command or event, a prompt error.
    pub failed: bool,
    /// The result of a `Tool` step.
    pub tool: Option<crate::ToolOutcome>,
    /// An error the session returned for the step (not sent to the sink).
    pub error: Option<String>,
}

/// Runs one step as `pichamber run` does: work left over from earlier runs first, then the
/// step, then the turns it asked for (sendUserMessage, sendMessage with triggerTurn). The
/// result of an event and an unknown command are reported through `sink`.
pub async fn run_step(session: &mut Session, step: Step, sink: &EventSink) -> StepOutcome {
    let mut outcome = StepOutcome::default();
    match step {
        Step::Tool(name, value) => {
            let result = session.execute_tool(&name, value).await;
            outcome.failed = result.is_error;
            outcome.tool = Some(result);
        }
        Step::Command(line) => {
            if let Err(e) = session.run_command(&line).await {
                if e.starts_with("unknown command") || e.contains("is not a command") {
                    sink(&SessionEvent::ExtensionError {
                        extension: "pichamber".into(),
                        event: "command".into(),
                        error: e.clone(),
                        stack: None,
                    });
                }
                outcome.failed = true;
                outcome.error = Some(e);
            }
        }
        Step::Event(name, body) => match session.emit(&name, body).await {
            Ok(result) => sink(&SessionEvent::EventResult {
                event: name,
                result,
            }),
            Err(e) => {
                outcome.failed = true;
                outcome.error = Some(e);
            }
        },
        Step::Prompt(text) => {
            if let Err(e) = session.prompt(&text, PromptOptions::default()).await {
                outcome.failed = true;
                outcome.error = Some(e);
            }
        }
    }
    session.run_requests().await;
    outcome
}

/// pi's built-in tool names: an extension tool of one of these names replaces the built-in.
pub const BUILTIN_TOOLS: [&str; 7] = ["read", "bash", "edit", "write", "grep", "find", "ls"];

/// What an extension's event hooks let it see and do to tools that are not its own (pi's event
/// model, kept by pichamber): one line per hook that reaches them.
pub fn other_tools_reach(events: &[String]) -> Vec<String> {
    let mut reach = Vec::new();
    let hooks = |names: &[&str]| names.iter().any(|n| events.iter().any(|e| e == n));
    if hooks(&["tool_call"]) {
        reach.push(
            "tool_call: sees every tool call's input and may block it; may rewrite the input of \
             built-in tools (they act in the workspace) and of other extensions' tools only \
             within its own grants (a rewrite that would lend a grant blocks the call)"
                .to_owned(),
        );
    }
    if hooks(&["tool_result"]) {
        reach.push(
            "tool_result: sees every tool's input and result, and may replace the result".into(),
        );
    }
    if hooks(&[
        "tool_execution_start",
        "tool_execution_update",
        "tool_execution_end",
    ]) {
        reach.push("tool_execution_*: sees every tool call's input, progress and result".into());
    }
    if hooks(&["context", "message_end", "turn_end", "agent_end"]) {
        reach.push(
            "context / message / turn hooks: see the conversation, tool results included".into(),
        );
    }
    reach
}

/// Loads an extension alone in a session with no grants, no UI and no model, and reports what
/// it asks for and registers: `(loaded, report)` where the report has `manifest`, `loaded`,
/// `errors`, `tools`, `commands`, `events`, `flags`, `shortcuts`, `messageRenderers`,
/// `providers` and `overridesBuiltinTools`.
pub async fn inspect_extension(artifact: &Artifact) -> Result<(bool, Value)> {
    let errors = Arc::new(Mutex::new(Vec::<String>::new()));
    let errors_in_sink = errors.clone();
    let sink: EventSink = Arc::new(move |event: &SessionEvent| {
        if let SessionEvent::ExtensionError { error, .. } = event {
            errors_in_sink.lock().unwrap().push(error.clone());
        }
    });
    let runtime = Runtime::global()?;
    let mut session = Session::new(
        runtime.clone(),
        SessionConfig {
            cwd: "/".into(),
            has_ui: false,
            dialogs: Arc::new(NoDialogs),
            sink,
            instance: InstanceOptions::default(),
            flags: vec![],
            model: None,
            catalog: Default::default(),
            agent: AgentSettings::default(),
            store: None,
            pi: pi_version_for(std::slice::from_ref(artifact), None),
            mode: "rpc",
            project_trusted: true,
            builtin_extensions: Vec::new(),
        },
    );
    let loaded = session.load(artifact).await.is_ok();
    // Inspected with no grants: no variable granted.
    let image_for = pichamber_runtime::ImageFor {
        granted_env: Vec::new(),
        pi_version: session.shared.pi.number().to_owned(),
    };
    let image = runtime.start_image(artifact, &image_for).ok();
    let state = session.shared.state.lock().unwrap();
    let registrations = state.registrations.first().cloned().unwrap_or_default();
    let tools = serde_json::to_value(&state.tools)?;
    let overrides: Vec<Value> = tools
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["name"].as_str())
        .filter(|name| BUILTIN_TOOLS.contains(name))
        .map(|name| json!(name))
        .collect();
    let report = json!({
        "manifest": artifact.manifest,
        "preInitialized": image.is_some_and(|i| i != StartImage::AsBuilt),
        "extensionSnapshot": image == Some(StartImage::Extension),
        "files": artifact.bundled_files(),
        "packageFiles": artifact.package_files(),
        "loaded": loaded,
        "errors": *errors.lock().unwrap(),
        "tools": tools,
        "commands": state.commands,
        "events": registrations.events,
        "flags": registrations.flags,
        "shortcuts": registrations.shortcuts,
        "messageRenderers": registrations.message_renderers,
        "providers": registrations.providers,
        "overridesBuiltinTools": overrides,
        "otherTools": other_tools_reach(&registrations.events),
    });
    drop(state);
    drop(session);
    Ok((loaded, report))
}
