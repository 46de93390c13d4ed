//! One extension instance: its store (WASI context, limits, pending operations, the session it
//! belongs to) and the guest exports, each call bounded by a deadline. A trap breaks only this
//! instance; the caller reports it and the session goes on. The instance starts afresh on its
//! next use (the factory runs again in a new store and registers again), and after
//! [`MAX_FAILURES`] traps it stays disabled for the rest of the session.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use wasmtime::component::ResourceTable;
use wasmtime::{Store, StoreLimits, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::boundary::MAX_JSON_BYTES;
use super::extension_host::ExtensionHost;
use super::hibernation::{self, Frozen, Transfer};
use super::limits::{Meter, Registry};
use super::operations::Operations;
use super::programs::Programs;
use super::wasi::Determinism;
use super::wit::{CommandState, CompletionItem, LoadContext, ModuleSource};
use super::workers::{self, Inbox, ParentLink, Workers};
use super::{Guest, GuestPre, StartImage};
use pichamber_access::Grants;
use pichamber_artifact::Artifact;
use pichamber_artifact::source_map::SourceMaps;

/// Traps (deadline, memory, stack, a crash) after which an instance is not restarted again.
pub const MAX_FAILURES: u32 = 3;

/// Limits of one instance.
#[derive(Debug, Clone)]
pub struct InstanceOptions {
    /// Wall time a single call may spend running guest code (time awaiting dialogs, programs
    /// and timers does not count).
    pub call_timeout: Duration,
    /// Wall time a single call may take in all, running guest code or awaiting timers,
    /// programs and fetches; time while a dialog waits on a person does not count.
    pub call_wall_timeout: Duration,
    /// The default and the longest time a program run for the extension may take.
    pub run_timeout: Duration,
    /// Linear memory of the instance.
    pub memory_limit: usize,
    pub grants: Arc<Grants>,
    /// A fixed clock start and random seed (`pichamber check`); `None`: the real ones.
    pub determinism: Option<Determinism>,
}

impl Default for InstanceOptions {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(10),
            call_wall_timeout: Duration::from_secs(300),
            run_timeout: pichamber_access::EXEC_DEFAULT_TIMEOUT,
            memory_limit: 256 << 20,
            grants: Arc::new(Grants::default()),
            determinism: None,
        }
    }
}

pub struct ExtensionState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
    pub(super) name: String,
    /// The session this instance serves.
    pub(super) host: Arc<dyn ExtensionHost>,
    /// Whether the session has UI (dialogs are asked, UI updates sent).
    pub(super) has_ui: bool,
    pub(super) grants: Arc<Grants>,
    pub(super) operations: Operations,
    /// Programs it runs with live stdio (`child_process.spawn`).
    pub(super) programs: Programs,
    /// Its worker threads, or in a worker, the link to its parent.
    pub(super) workers: Workers,
    /// When the guest last started running (a call began, or `wait` returned).
    pub(super) running_since: Instant,
    call_timeout: Duration,
    /// When the current call began.
    call_started: Instant,
    /// Time of the current call spent awaiting a person's answer to a dialog (not charged to
    /// the wall budget: each dialog has its own timeout).
    pub(super) excluded: Duration,
    pub(super) call_wall_timeout: Duration,
    /// The most a program run for the extension may take (`--run-timeout`).
    pub(super) run_timeout: Duration,
    /// Maps positions in error texts back to the extension's sources.
    pub(super) source_maps: Arc<SourceMaps>,
    /// Volume budgets of console output, UI updates and dialogs.
    pub(super) logs: Meter,
    pub(super) ui: Meter,
    pub(super) dialogs: Meter,
    /// What this instance's registrations hold in host memory.
    pub(super) registry: Registry,
    /// A status or widget was refused and reported.
    pub(super) ui_refusal_reported: bool,
    /// Its memory on the way out or in while it hibernates or wakes.
    pub(super) transfer: Transfer,
}

impl ExtensionState {
    /// Wall time of the current call charged to its budget.
    pub(super) fn wall_used(&self) -> Duration {
        self.call_started.elapsed().saturating_sub(self.excluded)
    }

    /// What is left of the current call's wall budget.
    pub(super) fn wall_left(&self) -> Duration {
        self.call_wall_timeout.saturating_sub(self.wall_used())
    }

    /// Nothing of the host's waits on the guest: no operation, program or worker.
    fn is_idle(&self) -> bool {
        self.operations.pending() == 0 && self.programs.running() == 0 && !self.workers.pending()
    }
}

impl WasiView for ExtensionState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// The deadline trap's payload, so a trap can be told apart from other failures.
#[derive(Debug)]
pub struct DeadlineExceeded(pub Duration);

impl std::fmt::Display for DeadlineExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ran for more than {:.1}s without yielding (per-call limit; raise it with --call-timeout=SECONDS)",
            self.0.as_secs_f64()
        )
    }
}

impl std::error::Error for DeadlineExceeded {}

/// The wall-clock budget's trap payload.
#[derive(Debug)]
pub struct WallDeadlineExceeded(pub Duration);

impl std::fmt::Display for WallDeadlineExceeded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "did not finish within {:.1}s (per-call wall-clock limit, time awaiting a dialog's answer not counted; raise it with --call-wall-timeout=SECONDS)",
            self.0.as_secs_f64()
        )
    }
}

impl std::error::Error for WallDeadlineExceeded {}

#[derive(Debug, Clone)]
pub enum CallError {
    /// The extension reported an error (a thrown exception, a rejected promise); the instance
    /// is still usable.
    Guest(String),
    /// The instance trapped (deadline, memory, a crash); it restarts on its next use, or is
    /// disabled after [`MAX_FAILURES`].
    Trap(String),
    /// A call on an instance that is disabled or could not be restarted (the full message).
    Broken(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Guest(m) => write!(f, "{m}"),
            CallError::Trap(m) => write!(f, "the extension was stopped: {m}"),
            CallError::Broken(m) => write!(f, "{m}"),
        }
    }
}

pub struct ExtensionInstance {
    body: Body,
    pub name: String,
    /// Why the instance stopped (it has not been restarted since).
    broken: Option<String>,
    /// Traps so far in this session.
    failures: u32,
    /// The factory ran once: a trap from now on is followed by a restart.
    started: bool,
    /// What a restart needs.
    pre: GuestPre,
    artifact: Arc<Artifact>,
    host: Arc<dyn ExtensionHost>,
    options: InstanceOptions,
}

/// An instance runs, or hibernates ([`hibernation`]).
#[allow(clippy::large_enum_variant)] // one per instance, and most run: boxing `Running` buys nothing
enum Body {
    Running {
        store: Store<ExtensionState>,
        guest: Guest,
        instance: wasmtime::component::Instance,
    },
    Hibernating {
        state: Box<ExtensionState>,
        frozen: Frozen,
    },
    /// Only while it goes from one to the other.
    Moving,
}

/// A guest call on a usable instance (restarting it first when it trapped earlier).
macro_rules! guest_call {
    ($self:ident, |$guest:ident, $store:ident| $call:expr) => {{
        $self.begin_call().await?;
        guest_call_now!($self, |$guest, $store| $call)
    }};
}

/// A guest call on the current store, whatever its state (for loading and restarting).
macro_rules! guest_call_now {
    ($self:ident, |$guest:ident, $store:ident| $call:expr) => {{
        $self.arm_call();
        let Body::Running {
            store: $store,
            guest: $guest,
            ..
        } = &mut $self.body
        else {
            unreachable!("a call reached a hibernating instance");
        };
        let result = $call.await;
        $self.end_call(result)
    }};
}

/// An extension instantiated whose factory has not run ([`ExtensionInstance::make`]): no
/// guest code has run in it, so it may be made before it is needed and started later.
pub struct Unstarted(ExtensionInstance);

impl Unstarted {
    /// Runs the factory.
    pub async fn start(self) -> Result<ExtensionInstance, CallError> {
        let mut instance = self.0;
        instance.load().await?;
        instance.started = true;
        Ok(instance)
    }
}

impl ExtensionInstance {
    /// Instantiates the extension and runs its factory.
    pub async fn start(
        pre: &GuestPre,
        artifact: &Artifact,
        host: Arc<dyn ExtensionHost>,
        options: &InstanceOptions,
    ) -> Result<Self, CallError> {
        Self::make(pre, artifact, host, options)
            .await?
            .start()
            .await
    }

    /// Instantiates the extension, the factory not run: [`Self::start`]'s first half, for a
    /// session that makes its next instance while it waits.
    pub async fn make(
        pre: &GuestPre,
        artifact: &Artifact,
        host: Arc<dyn ExtensionHost>,
        options: &InstanceOptions,
    ) -> Result<Unstarted, CallError> {
        let mut body = Self::instantiate(pre, artifact, &host, options).await?;
        if hibernation::process_hibernates()
            && let Some(exports) = pre.hibernation()
            && pre.baseline().get().is_none()
            && let Body::Running {
                store, instance, ..
            } = &mut body
        {
            // Fresh, before it loads: the baseline its image's instances will compare with.
            match read_baseline(store, instance, &exports, options.memory_limit).await {
                Ok(baseline) => {
                    let _ = pre.baseline().set(Arc::new(baseline));
                }
                Err(e) => tracing::warn!("{}: {e}", artifact.manifest.name),
            }
        }
        Ok(Unstarted(Self {
            body,
            name: artifact.manifest.name.clone(),
            broken: None,
            failures: 0,
            started: false,
            pre: pre.clone(),
            artifact: Arc::new(artifact.clone()),
            host,
            options: options.clone(),
        }))
    }

    /// A new store with its limits, and the component instantiated in it.
    async fn instantiate(
        pre: &GuestPre,
        artifact: &Artifact,
        host: &Arc<dyn ExtensionHost>,
        options: &InstanceOptions,
    ) -> Result<Body, CallError> {
        Self::instantiate_as(pre, artifact, host, options, None).await
    }

    /// [`Self::instantiate`], for a worker when `worker` gives its inbox and parent.
    async fn instantiate_as(
        pre: &GuestPre,
        artifact: &Artifact,
        host: &Arc<dyn ExtensionHost>,
        options: &InstanceOptions,
        worker: Option<(Arc<Inbox>, ParentLink)>,
    ) -> Result<Body, CallError> {
        let wasi = super::wasi::wasi_ctx(&options.grants, options.determinism.as_ref())
            .map_err(|e| CallError::Trap(format!("{e:#}")))?;
        let wake: Arc<dyn Fn() + Send + Sync> = {
            let host = host.clone();
            Arc::new(move || host.wake())
        };
        // One notification for programs and workers, so that one `wait` wakes for either.
        let (workers, arrived) = match worker {
            Some((inbox, parent)) => {
                let arrived = inbox.arrival();
                (Workers::in_worker(inbox, parent), arrived)
            }
            None => {
                let arrived = Arc::new(tokio::sync::Notify::new());
                let wake = wake.clone();
                let inbox = Inbox::new(arrived.clone(), Box::new(move || wake()));
                let spawn = worker_spawner(pre, artifact, host, options);
                (Workers::new(inbox, spawn), arrived)
            }
        };
        let state = ExtensionState {
            wasi,
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(options.memory_limit)
                .table_elements(1 << 20)
                .instances(16)
                .trap_on_grow_failure(true)
                .build(),
            name: artifact.manifest.name.clone(),
            has_ui: host.facts().has_ui,
            host: host.clone(),
            grants: options.grants.clone(),
            operations: Operations::default(),
            programs: Programs::with_arrival(arrived, Box::new(move || wake())),
            workers,
            running_since: Instant::now(),
            call_timeout: options.call_timeout,
            call_started: Instant::now(),
            excluded: Duration::ZERO,
            call_wall_timeout: options.call_wall_timeout,
            run_timeout: options.run_timeout,
            source_maps: artifact.source_maps(),
            logs: Meter::logs(),
            ui: Meter::ui(),
            dialogs: Meter::dialogs(),
            registry: Registry::default(),
            ui_refusal_reported: false,
            transfer: Transfer::None,
        };
        let mut store = new_store(pre, state);
        let (guest, instance) = pre
            .instantiate(&mut store)
            .await
            .map_err(|e| CallError::Trap(crate::explain_instantiation(e)))?;
        Ok(Body::Running {
            store,
            guest,
            instance,
        })
    }

    /// This instance's state: its store's, or kept while it hibernates.
    fn state(&self) -> &ExtensionState {
        match &self.body {
            Body::Running { store, .. } => store.data(),
            Body::Hibernating { state, .. } => state,
            Body::Moving => unreachable!("an instance is read while it moves"),
        }
    }

    fn state_mut(&mut self) -> &mut ExtensionState {
        match &mut self.body {
            Body::Running { store, .. } => store.data_mut(),
            Body::Hibernating { state, .. } => state,
            Body::Moving => unreachable!("an instance is changed while it moves"),
        }
    }

    /// Runs the factory: the extension's modules load and it registers what it offers.
    async fn load(&mut self) -> Result<(), CallError> {
        let (modules, context) = load_inputs(&self.pre, &self.artifact, &self.host, &self.options);
        let entry = self.artifact.manifest.load_entry();
        let loaded = guest_call_now!(self, |g, s| g.call_load(s, &modules, &entry, &context))?;
        loaded.map_err(|e| self.guest_error(e))
    }

    /// A fresh instance in place of the one that trapped: a new store from the prepared
    /// component, the factory run again, and its registrations in place of the old ones (what
    /// the old instance registered later, in handlers, is gone with its state). It then gets
    /// `session_start` with reason "reload", as after pi's `/reload`, to restore its state.
    async fn restart(&mut self) -> Result<(), CallError> {
        let reason = self.broken.clone().unwrap_or_default();
        let notice = format!(
            "the extension was restarted after failure {} of {MAX_FAILURES} ({reason}); its state starts afresh",
            self.failures
        );
        self.reinstantiate(Some(notice)).await
    }

    /// The build this instance runs (the manifest's source hash).
    pub fn source_hash(&self) -> &str {
        &self.artifact.manifest.source_hash
    }

    /// The same extension with other grants (its user approved what it asked for): a fresh
    /// instance as a restart makes one (session_start with reason "reload"), no failure
    /// counted. Grants are fixed for an instance's life: its preopened folders are.
    pub async fn regrant(&mut self, grants: Arc<Grants>) -> Result<(), CallError> {
        self.options.grants = grants;
        self.reinstantiate(None).await
    }

    /// A fresh store from the prepared component, the factory run again, registrations
    /// replaced, `notice` reported as an error entry, then session_start "reload".
    async fn reinstantiate(&mut self, notice: Option<String>) -> Result<(), CallError> {
        // Statuses and widgets stay on screen: the fresh instance inherits their accounting.
        let inherited = self.state().registry.ui_state_only();
        let inactive = self.forget_registrations();
        let before = self.failures;
        self.body =
            match Self::instantiate(&self.pre, &self.artifact, &self.host, &self.options).await {
                Ok(fresh) => fresh,
                Err(e) => return Err(self.restart_failed(e, &inactive, before)),
            };
        self.broken = None;
        self.state_mut().registry = inherited;
        if let Err(e) = self.load().await {
            return Err(self.restart_failed(e, &inactive, before));
        }
        // Tools the operator or the extension had switched off stay off; tools it no longer
        // registers go.
        self.settle_active_tools(&inactive);
        if let Some(error) = notice {
            self.host.report_error("restart".into(), error, None);
        }
        if self.host.subscribes("session_start") {
            let event =
                serde_json::json!({ "type": "session_start", "reason": "reload" }).to_string();
            let ctx = self.host.call_context().to_string();
            let outcome = guest_call_now!(self, |g, s| g.call_dispatch_event(
                s,
                "session_start",
                &event,
                &ctx
            ))?;
            if let Err(e) = outcome {
                let error = self.state().source_maps.remap(&e);
                let (error, stack) = split_stack(&error);
                self.host.report_error("session_start".into(), error, stack);
            }
        }
        Ok(())
    }

    /// A restart that did not work counts as a failure; the instance stays stopped.
    fn restart_failed(&mut self, error: CallError, inactive: &[String], before: u32) -> CallError {
        self.forget_registrations();
        let message = match error {
            // A trap in the factory: counted, and the policy said, by end_call.
            CallError::Trap(m) if self.failures > before => m,
            CallError::Trap(m) | CallError::Guest(m) | CallError::Broken(m) => {
                self.failures += 1;
                self.broken = Some(m.clone());
                format!("{m}{}", self.policy())
            }
        };
        self.settle_active_tools(inactive);
        CallError::Broken(format!("the extension could not be restarted: {message}"))
    }

    /// Drops everything this instance registered from the session (tools, commands, event
    /// subscriptions, flags, ...); returns the names of its tools that were inactive.
    fn forget_registrations(&self) -> Vec<String> {
        self.host.forget_registrations()
    }

    fn settle_active_tools(&self, inactive: &[String]) {
        self.host.settle_active_tools(inactive);
    }

    /// What happens after a trap, for the trap's message.
    fn policy(&self) -> String {
        if self.failures >= MAX_FAILURES {
            format!("; it is disabled after {MAX_FAILURES} failures")
        } else {
            format!(
                "; it restarts on its next use (failure {} of {MAX_FAILURES})",
                self.failures
            )
        }
    }

    fn guest_error(&self, message: String) -> CallError {
        CallError::Guest(self.state().source_maps.remap(&message))
    }

    /// Stops the instance as a trap does (for what the host will not let it go on with: a
    /// command that keeps asking for session actions): it restarts on its next use, and the
    /// stop counts towards disabling it.
    pub fn stop(&mut self, reason: &str) -> CallError {
        self.state_mut().operations.cancel_all();
        self.broken = Some(reason.to_owned());
        self.failures += 1;
        CallError::Trap(format!("{reason}{}", self.policy()))
    }

    /// Stopped by a trap and not restarted since (timers and bus events skip it; its next
    /// use restarts it unless it is disabled).
    pub fn is_broken(&self) -> bool {
        self.broken.is_some()
    }

    /// What the extension may reach.
    pub fn grants(&self) -> &Grants {
        &self.options.grants
    }

    /// Runs the extension's handlers for one event. `event_back`: whether the caller needs
    /// the event as the handlers left it (`Dispatched::event`); when it does not, the guest is
    /// told so (wit/v0.2.0, `dispatch-event`) and need not serialise it.
    pub async fn dispatch_event(
        &mut self,
        name: &str,
        event: &Value,
        ctx: &Value,
        event_back: bool,
    ) -> Result<Dispatched, CallError> {
        let event = event.to_string();
        let ctx = if event_back {
            ctx.to_string()
        } else {
            serde_json::to_string(&WithoutEventBack {
                return_event: false,
                ctx,
            })
            .unwrap_or_else(|_| ctx.to_string())
        };
        let result = guest_call!(self, |g, s| g.call_dispatch_event(s, name, &event, &ctx))?
            .map_err(|e| self.guest_error(e))?;
        Ok(Dispatched {
            event: event_back
                .then(|| guest_json("the event it returned", &result.event))
                .transpose()?,
            chain_result: result
                .chain_result
                .map(|r| guest_json("the handler result", &r))
                .transpose()?,
        })
    }

    pub async fn prepare_arguments(
        &mut self,
        tool: &str,
        args: &Value,
    ) -> Result<Value, CallError> {
        let args = args.to_string();
        let prepared = guest_call!(self, |g, s| g.call_prepare_arguments(s, tool, &args))?
            .map_err(|e| self.guest_error(e))?;
        guest_json("prepareArguments' result", &prepared)
    }

    pub async fn execute_tool(
        &mut self,
        tool: &str,
        call_id: &str,
        params: &Value,
        ctx: &Value,
    ) -> Result<ToolOutput, CallError> {
        let (params, ctx) = (params.to_string(), ctx.to_string());
        let result = guest_call!(self, |g, s| g
            .call_execute_tool(s, tool, call_id, &params, &ctx))?;
        let optional =
            |what: &str, text: Option<String>| text.map(|t| guest_json(what, &t)).transpose();
        let content = guest_json("the tool's content", &result.content)?;
        if !content.is_array() {
            return Err(CallError::Guest(
                "the tool's content is not an array of content blocks".into(),
            ));
        }
        Ok(ToolOutput {
            content,
            details: optional("the tool's details", result.details)?,
            is_error: result.is_error,
            terminate: result.terminate,
            structured_content: optional(
                "the tool's structuredContent",
                result.structured_content,
            )?,
            extra: match optional("the tool result's other fields", result.extra)? {
                None => None,
                Some(Value::Object(fields)) => Some(fields),
                Some(_) => {
                    return Err(CallError::Guest(
                        "the tool result's other fields are not an object".into(),
                    ));
                }
            },
        })
    }

    /// Runs a command until it ends or waits for a session action; see [`CommandStep`].
    pub async fn run_command(
        &mut self,
        name: &str,
        args: &str,
        ctx: &Value,
    ) -> Result<CommandStep, CallError> {
        let ctx = ctx.to_string();
        let state = guest_call!(self, |g, s| g.call_run_command(s, name, args, &ctx))?
            .map_err(|e| self.guest_error(e))?;
        command_step(state)
    }

    /// Goes on with the command that waits, given its session action's outcome.
    pub async fn resume_command(
        &mut self,
        outcome: Result<Value, String>,
    ) -> Result<CommandStep, CallError> {
        let outcome = outcome.map(|v| v.to_string());
        let state = guest_call!(self, |g, s| g.call_resume_command(s, outcome))?
            .map_err(|e| self.guest_error(e))?;
        command_step(state)
    }

    pub async fn complete_arguments(
        &mut self,
        name: &str,
        prefix: &str,
    ) -> Result<Option<Vec<CompletionItem>>, CallError> {
        guest_call!(self, |g, s| g.call_complete_arguments(s, name, prefix))?
            .map_err(|e| self.guest_error(e))
    }

    pub async fn deliver_bus_event(&mut self, channel: &str, data: &str) -> Result<(), CallError> {
        guest_call!(self, |g, s| g.call_deliver_bus_event(
            s,
            channel,
            &data.to_owned()
        ))?
        .map_err(|e| self.guest_error(e))
    }

    /// Asks the extension's virtual model `provider`/`id` where `request` (pi's
    /// `ModelRouteRequest`) goes: its `ModelRoute`.
    pub async fn route_model(
        &mut self,
        provider: &str,
        id: &str,
        request: &Value,
        ctx: &Value,
    ) -> Result<Value, CallError> {
        let (request, ctx) = (request.to_string(), ctx.to_string());
        let route = guest_call!(self, |g, s| g
            .call_route_model(s, provider, id, &request, &ctx))?
        .map_err(|e| self.guest_error(e))?;
        guest_json("the model route", &route)
    }

    /// Runs due timers and completed operations; the delay until the next timer, if any.
    pub async fn poll(&mut self) -> Result<Option<u64>, CallError> {
        // It hibernated with nothing pending, and nothing can have come since.
        if self.is_hibernating() {
            return Ok(None);
        }
        guest_call!(self, |g, s| g.call_poll(s))
    }

    /// Hands ctx.compact's outcome (its result, or why it failed) to the callbacks the
    /// extension keeps under `callback`.
    pub async fn compaction_outcome(
        &mut self,
        callback: u64,
        outcome: Result<Value, String>,
        ctx: &Value,
    ) -> Result<(), CallError> {
        let outcome = outcome.map(|v| v.to_string());
        let ctx = ctx.to_string();
        guest_call!(self, |g, s| g
            .call_compaction_outcome(s, callback, outcome, &ctx))?
        .map_err(|e| self.guest_error(e))
    }

    pub async fn shutdown(&mut self) -> Result<(), CallError> {
        // The guest's shutdown flushes nothing: a hibernating instance is not woken for it.
        if self.is_hibernating() {
            return Ok(());
        }
        guest_call!(self, |g, s| g.call_shutdown(s))
    }

    /// Awake and of a shim that can hibernate: worth trying
    /// [`Self::hibernate`] on when it has been idle a while.
    pub fn may_hibernate(&self) -> bool {
        matches!(self.body, Body::Running { .. }) && self.pre.hibernation().is_some()
    }

    pub fn is_hibernating(&self) -> bool {
        matches!(self.body, Body::Hibernating { .. })
    }

    /// Hibernates the instance if it is idle (nothing pending on either side) and its shim
    /// can: its memory is kept as what differs from a fresh instance's, and the wasmtime
    /// instance (and its slot) released until its next use wakes it. Whether it hibernates.
    pub async fn hibernate(&mut self) -> Result<bool, CallError> {
        let Some(exports) = self.pre.hibernation() else {
            return Ok(false);
        };
        let idle = match &self.body {
            Body::Hibernating { .. } => return Ok(true),
            Body::Running { store, .. } => store.data().is_idle(),
            Body::Moving => false,
        };
        if !idle || !self.started || self.broken.is_some() {
            return Ok(false);
        }
        let baseline = match Self::baseline(
            self.pre.clone(),
            self.artifact.clone(),
            self.host.clone(),
            self.options.clone(),
            exports,
        )
        .await
        {
            Ok(baseline) => baseline,
            // Nothing of this instance's (every slot in use, say): it stays awake, as it was.
            Err(e) => {
                tracing::warn!("{} stays awake: {e}", self.name);
                return Ok(false);
            }
        };
        let Body::Running {
            store, instance, ..
        } = &mut self.body
        else {
            unreachable!("checked above");
        };
        store.data_mut().transfer = Transfer::freezing(baseline, self.options.memory_limit);
        arm(store);
        let outcome = call_export::<(), u32>(store, instance, &exports.freeze, ()).await;
        let transfer = std::mem::take(&mut store.data_mut().transfer);
        // A WASI handle the guest still holds (an open file; `freeze` let go of its folders')
        // would name nothing in the fresh instance that thaws: it stays awake.
        let holds_handles = !store.data().table.is_empty();
        let pages = match self.end_call(outcome)? {
            Ok(_) if holds_handles => return Ok(false),
            Ok(pages) => pages,
            // Something is pending after all (the guest's side): it stays awake.
            Err(_) => return Ok(false),
        };
        let frozen = transfer.frozen(pages).expect("the transfer was a freeze");
        tracing::debug!(
            "{} hibernates: {} bytes kept of {pages} pages of memory",
            self.name,
            frozen.bytes()
        );
        let Body::Running { store, .. } = std::mem::replace(&mut self.body, Body::Moving) else {
            unreachable!("checked above");
        };
        self.body = Body::Hibernating {
            state: Box::new(store.into_data()),
            frozen,
        };
        hibernation::release_soon();
        Ok(true)
    }

    /// A fresh instance's memory for this instance's image, read once for all its sessions.
    /// (Owned arguments: the future holds no reference to an instance, which is not `Sync`.)
    async fn baseline(
        pre: GuestPre,
        artifact: Arc<Artifact>,
        host: Arc<dyn ExtensionHost>,
        options: InstanceOptions,
        exports: hibernation::Exports,
    ) -> Result<Arc<hibernation::Baseline>, CallError> {
        pre.baseline()
            .get_or_try_init(|| async {
                let Body::Running {
                    mut store,
                    instance,
                    ..
                } = Self::instantiate(&pre, &artifact, &host, &options).await?
                else {
                    unreachable!("an instance starts running");
                };
                read_baseline(&mut store, &instance, &exports, options.memory_limit)
                    .await
                    .map(Arc::new)
            })
            .await
            .cloned()
    }

    /// Wakes a hibernating instance: a fresh instance of its image, its memory written back.
    /// When no instance can be had (every slot in use), it stays hibernating and the call
    /// fails; when writing back fails, it is stopped as by a trap (restarted afresh next).
    async fn wake(&mut self) -> Result<(), CallError> {
        if !self.is_hibernating() {
            return Ok(());
        }
        let Body::Hibernating { mut state, frozen } =
            std::mem::replace(&mut self.body, Body::Moving)
        else {
            unreachable!("checked above");
        };
        let exports = self.pre.hibernation().expect("it hibernated");
        let pages = frozen.pages;
        state.transfer = Transfer::thawing(frozen);
        let mut store = new_store(&self.pre, *state);
        let (guest, instance) = match self.pre.instantiate(&mut store).await {
            Ok(fresh) => fresh,
            Err(e) => {
                let mut state = store.into_data();
                let frozen = std::mem::take(&mut state.transfer)
                    .unthawed(pages)
                    .expect("the transfer was a thaw");
                self.body = Body::Hibernating {
                    state: Box::new(state),
                    frozen,
                };
                return Err(CallError::Trap(crate::explain_instantiation(e)));
            }
        };
        let outcome =
            call_export::<(u32,), ()>(&mut store, &instance, &exports.thaw, (pages,)).await;
        store.data_mut().transfer = Transfer::None;
        self.body = Body::Running {
            store,
            guest,
            instance,
        };
        match self.end_call(outcome) {
            Ok(Ok(())) => {}
            // Stopped as a trap stops it (end_call did that for a trap): restarted next.
            Ok(Err(why)) => {
                let _ = self.stop(&format!("it could not be woken from hibernation: {why}"));
            }
            Err(_) => {}
        }
        Ok(())
    }

    /// Before a call: a hibernating instance is woken, a stopped one restarted, a disabled
    /// one refuses.
    async fn begin_call(&mut self) -> Result<(), CallError> {
        self.wake().await?;
        if let Some(reason) = &self.broken {
            if self.failures >= MAX_FAILURES {
                return Err(CallError::Broken(format!(
                    "the extension is disabled after {MAX_FAILURES} failures (the last: {reason})"
                )));
            }
            self.restart().await?;
        }
        Ok(())
    }

    /// Starts the clocks and budgets of a call.
    fn arm_call(&mut self) {
        let Body::Running { store, .. } = &mut self.body else {
            unreachable!("a call reached a hibernating instance");
        };
        arm(store);
    }

    fn end_call<R>(&mut self, result: wasmtime::Result<R>) -> Result<R, CallError> {
        match result {
            Ok(value) => Ok(value),
            Err(error) => {
                let message = describe_trap(&error);
                self.state_mut().operations.cancel_all();
                self.broken = Some(message.clone());
                if !self.started {
                    // The first load failed: the session goes on without the extension.
                    return Err(CallError::Trap(message));
                }
                self.failures += 1;
                Err(CallError::Trap(format!("{message}{}", self.policy())))
            }
        }
    }
}

/// What `load` is given: the extension's modules (none when its image holds them compiled)
/// and the facts of its session.
/// A store for `state`, its limits and deadlines in force, its call's clocks started now (a
/// hibernated state's are from its last call: instantiating in a slow moment would
/// otherwise be charged the time it hibernated, and trap).
fn new_store(pre: &GuestPre, state: ExtensionState) -> Store<ExtensionState> {
    let mut store = Store::new(pre.engine(), state);
    store.limiter(|s| &mut s.limits);
    store.epoch_deadline_callback(|ctx| {
        let state = ctx.data();
        if state.running_since.elapsed() > state.call_timeout {
            Err(DeadlineExceeded(state.call_timeout).into())
        } else if state.wall_used() > state.call_wall_timeout {
            Err(WallDeadlineExceeded(state.call_wall_timeout).into())
        } else {
            Ok(UpdateDeadline::Yield(1))
        }
    });
    arm(&mut store);
    store
}

/// Starts the clocks and budgets of a call on `store`.
fn arm(store: &mut Store<ExtensionState>) {
    let state = store.data_mut();
    let now = Instant::now();
    state.running_since = now;
    state.call_started = now;
    state.excluded = Duration::ZERO;
    state.logs.begin_call();
    state.ui.begin_call();
    state.dialogs.begin_call();
    store.set_epoch_deadline(1);
}

/// A fresh instance's memory, as hibernation compares with it.
async fn read_baseline(
    store: &mut Store<ExtensionState>,
    instance: &wasmtime::component::Instance,
    exports: &hibernation::Exports,
    memory_limit: usize,
) -> Result<hibernation::Baseline, CallError> {
    store.data_mut().transfer = Transfer::reading(memory_limit);
    arm(store);
    let outcome = call_export::<(), u32>(store, instance, &exports.freeze, ()).await;
    let transfer = std::mem::take(&mut store.data_mut().transfer);
    let failed =
        |why: String| CallError::Trap(format!("cannot read a fresh instance's memory: {why}"));
    match outcome {
        Ok(Ok(_)) => Ok(transfer.baseline().expect("the transfer was a reading")),
        Ok(Err(why)) => Err(failed(why)),
        Err(e) => Err(failed(describe_trap(&e))),
    }
}

/// Calls one of the shim's hibernation exports on a running instance.
async fn call_export<P, R>(
    store: &mut Store<ExtensionState>,
    instance: &wasmtime::component::Instance,
    export: &wasmtime::component::ComponentExportIndex,
    params: P,
) -> wasmtime::Result<Result<R, String>>
where
    P: wasmtime::component::ComponentNamedList + wasmtime::component::Lower + Send + Sync,
    R: wasmtime::component::Lift + Send + Sync + 'static,
{
    let func = instance.get_typed_func::<P, (Result<R, String>,)>(&mut *store, export)?;
    let (outcome,) = func.call_async(&mut *store, params).await?;
    Ok(outcome)
}

fn load_inputs(
    pre: &GuestPre,
    artifact: &Artifact,
    host: &Arc<dyn ExtensionHost>,
    options: &InstanceOptions,
) -> (Vec<ModuleSource>, LoadContext) {
    let modules = match pre.image() {
        StartImage::Extension => Vec::new(),
        StartImage::Shim | StartImage::AsBuilt => artifact
            .modules
            .iter()
            .map(|m| ModuleSource {
                id: m.id.clone(),
                source: m.source.clone(),
            })
            .collect(),
    };
    let facts = host.facts();
    let context = LoadContext {
        extension_name: artifact.manifest.name.clone(),
        cwd: facts.cwd,
        mode: facts.mode,
        has_ui: facts.has_ui,
        env: options.grants.env_pairs(),
        memory_limit: options.memory_limit as u64,
        pi_version: facts.pi_version,
    };
    (modules, context)
}

/// The longest a worker may live: it runs as long as it has work, not within one call's
/// wall budget (its CPU time between waits is still bounded as a call's is).
const WORKER_LIFETIME: Duration = Duration::from_secs(7 * 24 * 3600);

/// How the extension's instance starts workers: each a fresh instance of the same component
/// with the same grants and limits, on a task of its own.
fn worker_spawner(
    pre: &GuestPre,
    artifact: &Artifact,
    host: &Arc<dyn ExtensionHost>,
    options: &InstanceOptions,
) -> workers::Spawn {
    let (pre, artifact, host, options) = (
        pre.clone(),
        Arc::new(artifact.clone()),
        host.clone(),
        options.clone(),
    );
    Arc::new(move |source, data, inbox, link| {
        let (pre, artifact, host, options) =
            (pre.clone(), artifact.clone(), host.clone(), options.clone());
        Box::pin(async move {
            let parent = link.parent.clone();
            let id = link.id;
            let ended =
                run_worker(&pre, &artifact, &host, &options, source, data, inbox, link).await;
            if let Err(error) = ended {
                let _ = parent.deliver(id, workers::Event::Error(error));
                let _ = parent.deliver(id, workers::Event::Exit(1));
            } else {
                let _ = parent.deliver(id, workers::Event::Exit(0));
            }
        })
    })
}

/// Runs one worker to its end: its module (or script) evaluated with no factory, its event
/// loop turning until nothing is left or its parent terminates it.
#[allow(clippy::too_many_arguments)]
async fn run_worker(
    pre: &GuestPre,
    artifact: &Artifact,
    host: &Arc<dyn ExtensionHost>,
    options: &InstanceOptions,
    source: workers::Source,
    data: String,
    inbox: Arc<Inbox>,
    link: ParentLink,
) -> Result<(), String> {
    let thread_id = link.id;
    let Body::Running {
        mut store,
        guest: bindings,
        ..
    } = ExtensionInstance::instantiate_as(pre, artifact, host, options, Some((inbox, link)))
        .await
        .map_err(|e| e.to_string())?
    else {
        unreachable!("an instance starts running");
    };
    let (modules, context) = load_inputs(pre, artifact, host, options);
    let source = match source {
        workers::Source::Module(id) => serde_json::json!({ "module": id }),
        workers::Source::Script(code) => serde_json::json!({ "script": code }),
    };
    // workerData stays the JSON text it was posted as: node:worker_threads decodes it.
    let entry =
        serde_json::json!({ "worker": source, "data": data, "threadId": thread_id }).to_string();
    {
        let state = store.data_mut();
        let now = Instant::now();
        state.running_since = now;
        state.call_started = now;
        state.call_wall_timeout = WORKER_LIFETIME;
    }
    store.set_epoch_deadline(1);
    let source_maps = store.data().source_maps.clone();
    match bindings
        .call_load(&mut store, &modules, &entry, &context)
        .await
    {
        Ok(Ok(())) => Ok(()),
        Ok(Err(message)) => Err(source_maps.remap(&message)),
        Err(trap) => Err(describe_trap(&trap)),
    }
}

/// A JSON text the extension handed back, parsed once, here: capped like the values it sends
/// through imports, and malformed or nested too deep (serde's limit) is its error.
/// How far a command ran (the guest's `command-state`, its action's options parsed).
#[derive(Debug, Clone, PartialEq)]
pub enum CommandStep {
    Done,
    /// The command waits for the session action `action` (pi's `ctx.navigateTree`) with these
    /// options; the session carries it out, then calls [`ExtensionInstance::resume_command`].
    Waiting {
        action: String,
        args: Value,
    },
}

/// Longer than any of pi's session actions' names.
const MAX_ACTION_NAME: usize = 64;

fn command_step(state: CommandState) -> Result<CommandStep, CallError> {
    Ok(match state {
        CommandState::Done => CommandStep::Done,
        CommandState::Waiting(action) if action.name.len() <= MAX_ACTION_NAME => {
            CommandStep::Waiting {
                args: guest_json("the session action's options", &action.args)?,
                action: action.name,
            }
        }
        CommandState::Waiting(action) => {
            return Err(CallError::Guest(format!(
                "a session action's name is {} bytes; the limit is {MAX_ACTION_NAME}",
                action.name.len()
            )));
        }
    })
}

fn guest_json(what: &str, text: &str) -> Result<Value, CallError> {
    if text.len() > MAX_JSON_BYTES {
        return Err(CallError::Guest(format!(
            "{what} is {} bytes; the limit is {MAX_JSON_BYTES}",
            text.len()
        )));
    }
    serde_json::from_str(text)
        .map_err(|e| CallError::Guest(format!("{what} is not valid JSON: {e}")))
}

/// A dispatch's ctx when the caller does not need the event back: ctx's own fields and
/// `returnEvent: false`.
#[derive(serde::Serialize)]
struct WithoutEventBack<'a> {
    #[serde(rename = "returnEvent")]
    return_event: bool,
    #[serde(flatten)]
    ctx: &'a Value,
}

/// What an event's handlers made of it.
#[derive(Debug)]
pub struct Dispatched {
    /// The event as the handlers left it, when it was asked for.
    pub event: Option<Value>,
    /// What the chain returned, if anything.
    pub chain_result: Option<Value>,
}

/// A tool's result as its `execute` gave it (or its error, as one).
#[derive(Debug)]
pub struct ToolOutput {
    pub content: Value,
    pub details: Option<Value>,
    pub is_error: bool,
    pub terminate: bool,
    pub structured_content: Option<Value>,
    /// The other fields of the returned object (a JSON object), which pi's
    /// `tool_execution_end` keeps in its result.
    pub extra: Option<serde_json::Map<String, Value>>,
}

fn describe_trap(error: &wasmtime::Error) -> String {
    if let Some(deadline) = error.downcast_ref::<DeadlineExceeded>() {
        return deadline.to_string();
    }
    if let Some(deadline) = error.downcast_ref::<WallDeadlineExceeded>() {
        return deadline.to_string();
    }
    // The causes, without wasmtime's wasm backtrace (function indices mean nothing to a user).
    let causes: Vec<String> = error.chain().map(|c| c.to_string()).collect();
    if causes.iter().any(|c| c.contains("growing memory")) {
        return "exceeded its memory limit (raise it with --memory-limit=MIB)".into();
    }
    if let Some(trap) = error.downcast_ref::<wasmtime::Trap>() {
        return match trap {
            wasmtime::Trap::StackOverflow => "stack overflow (unbounded recursion?)".into(),
            // QuickJS does no stack checks on WASI: deep recursion runs off the stack, which
            // sits at the bottom of linear memory, and lands here.
            wasmtime::Trap::MemoryOutOfBounds => {
                "ran out of stack or touched memory outside its sandbox (unbounded recursion?)"
                    .into()
            }
            wasmtime::Trap::UnreachableCodeReached => {
                "the guest aborted (out of memory or an internal error)".into()
            }
            other => format!("trap: {other}"),
        };
    }
    causes
        .iter()
        .rev()
        .find(|c| !c.starts_with("error while executing at wasm backtrace"))
        .cloned()
        .unwrap_or_else(|| format!("{error:#}"))
}

/// Splits a guest error text ("message" then stack frames, each line "    at ...") into the
/// message and the stack.
pub fn split_stack(text: &str) -> (String, Option<String>) {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        if offset > 0
            && line.trim_start().starts_with("at ")
            && line.starts_with(char::is_whitespace)
        {
            let stack = text[offset..].trim_end();
            return (text[..offset].trim_end().to_owned(), Some(stack.to_owned()));
        }
        offset += line.len();
    }
    (text.to_owned(), None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stack_is_split_from_the_message() {
        let (message, stack) = split_stack("boom\nsecond line\n    at f (/ext/a.ts:3)\n    at g\n");
        assert_eq!(message, "boom\nsecond line");
        assert_eq!(stack.as_deref(), Some("    at f (/ext/a.ts:3)\n    at g"));
        assert_eq!(
            split_stack("at the start\nno frames"),
            ("at the start\nno frames".into(), None)
        );
        assert_eq!(
            split_stack("    at first line"),
            ("    at first line".into(), None)
        );
    }
}
