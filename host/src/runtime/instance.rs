//! One extension instance: its store (WASI context, limits, pending operations, the session it
//! belongs to) and the guest exports, each call bounded by a deadline. A trap breaks only this
//! instance; the caller reports it and the session goes on.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use wasmtime::component::ResourceTable;
use wasmtime::{Store, StoreLimits, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

use super::host_api::MAX_JSON_BYTES;
use super::operations::Operations;
use super::wit::{CompletionItem, DispatchResult, LoadContext, ModuleSource, ToolResult};
use super::{Extension, ExtensionPre};
use crate::artifact::Artifact;
use crate::capabilities::Grants;
use crate::session::SessionShared;
use crate::source_map::SourceMaps;

/// Limits of one instance.
#[derive(Debug, Clone)]
pub struct InstanceOptions {
    /// Wall time a single call may spend running guest code (time awaiting dialogs, programs
    /// and timers does not count).
    pub call_timeout: Duration,
    /// Linear memory of the instance.
    pub memory_limit: usize,
    pub grants: Arc<Grants>,
}

impl Default for InstanceOptions {
    fn default() -> Self {
        Self {
            call_timeout: Duration::from_secs(10),
            memory_limit: 256 << 20,
            grants: Arc::new(Grants::default()),
        }
    }
}

pub struct ExtensionState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
    pub(super) index: usize,
    pub(super) name: String,
    pub(super) session: Arc<SessionShared>,
    pub(super) grants: Arc<Grants>,
    pub(super) operations: Operations,
    /// When the guest last started running (a call began, or `wait` returned).
    pub(super) running_since: Instant,
    call_timeout: Duration,
    /// Maps positions in error texts back to the extension's sources.
    pub(super) source_maps: Arc<SourceMaps>,
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

#[derive(Debug, Clone)]
pub enum CallError {
    /// The extension reported an error (a thrown exception, a rejected promise); the instance
    /// is still usable.
    Guest(String),
    /// The instance trapped (deadline, memory, a crash); it is unusable from now on.
    Trap(String),
    /// A call on an instance that trapped earlier.
    Broken(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Guest(m) => write!(f, "{m}"),
            CallError::Trap(m) => write!(f, "the extension was stopped: {m}"),
            CallError::Broken(m) => {
                write!(f, "the extension is disabled after an earlier failure: {m}")
            }
        }
    }
}

pub struct ExtensionInstance {
    store: Store<ExtensionState>,
    bindings: Extension,
    pub index: usize,
    pub name: String,
    broken: Option<String>,
}

macro_rules! guest_call {
    ($self:ident, |$guest:ident, $store:ident| $call:expr) => {{
        $self.begin_call()?;
        let $guest = $self.bindings.pichamber_extension_guest();
        let $store = &mut $self.store;
        let result = $call.await;
        $self.end_call(result)
    }};
}

impl ExtensionInstance {
    /// Instantiates the extension and runs its factory.
    pub async fn start(
        pre: &ExtensionPre<ExtensionState>,
        artifact: &Artifact,
        index: usize,
        session: Arc<SessionShared>,
        options: &InstanceOptions,
    ) -> Result<Self, CallError> {
        let wasi = options
            .grants
            .wasi_ctx()
            .map_err(|e| CallError::Trap(format!("{e:#}")))?;
        let state = ExtensionState {
            wasi,
            table: ResourceTable::new(),
            limits: StoreLimitsBuilder::new()
                .memory_size(options.memory_limit)
                .table_elements(1 << 20)
                .instances(16)
                .trap_on_grow_failure(true)
                .build(),
            index,
            name: artifact.manifest.name.clone(),
            session: session.clone(),
            grants: options.grants.clone(),
            operations: Operations::default(),
            running_since: Instant::now(),
            call_timeout: options.call_timeout,
            source_maps: Arc::new(artifact.source_maps()),
        };
        let mut store = Store::new(pre.instance_pre().engine(), state);
        store.limiter(|s| &mut s.limits);
        store.epoch_deadline_callback(|ctx| {
            let state = ctx.data();
            if state.running_since.elapsed() > state.call_timeout {
                Err(DeadlineExceeded(state.call_timeout).into())
            } else {
                Ok(UpdateDeadline::Yield(1))
            }
        });
        store.set_epoch_deadline(1);
        let bindings = pre
            .instantiate_async(&mut store)
            .await
            .map_err(|e| CallError::Trap(format!("cannot instantiate: {e:#}")))?;
        let mut instance = Self {
            store,
            bindings,
            index,
            name: artifact.manifest.name.clone(),
            broken: None,
        };

        let modules: Vec<ModuleSource> = artifact
            .modules
            .iter()
            .map(|m| ModuleSource {
                id: m.id.clone(),
                source: m.source.clone(),
            })
            .collect();
        let context = LoadContext {
            extension_name: artifact.manifest.name.clone(),
            cwd: session.cwd.clone(),
            mode: session.mode.clone(),
            has_ui: session.has_ui,
            env: options.grants.env_pairs(),
            memory_limit: options.memory_limit as u64,
        };
        let entry = artifact.manifest.entry.clone();
        let loaded = guest_call!(instance, |g, s| g.call_load(s, &modules, &entry, &context))?;
        loaded.map_err(|e| instance.guest_error(e))?;
        Ok(instance)
    }

    fn guest_error(&self, message: String) -> CallError {
        CallError::Guest(self.store.data().source_maps.remap(&message))
    }

    pub fn is_broken(&self) -> bool {
        self.broken.is_some()
    }

    pub async fn dispatch_event(
        &mut self,
        name: &str,
        event: &Value,
        ctx: &Value,
    ) -> Result<DispatchResult, CallError> {
        let (event, ctx) = (event.to_string(), ctx.to_string());
        let result = guest_call!(self, |g, s| g.call_dispatch_event(s, name, &event, &ctx))?
            .map_err(|e| self.guest_error(e))?;
        check_size("the event it returned", &result.event)?;
        check_size(
            "the handler result",
            result.chain_result.as_deref().unwrap_or_default(),
        )?;
        Ok(result)
    }

    pub async fn prepare_arguments(
        &mut self,
        tool: &str,
        args: &Value,
    ) -> Result<String, CallError> {
        let args = args.to_string();
        let prepared = guest_call!(self, |g, s| g.call_prepare_arguments(s, tool, &args))?
            .map_err(|e| self.guest_error(e))?;
        check_size("prepareArguments' result", &prepared)?;
        Ok(prepared)
    }

    pub async fn execute_tool(
        &mut self,
        tool: &str,
        call_id: &str,
        params: &Value,
        ctx: &Value,
    ) -> Result<ToolResult, CallError> {
        let (params, ctx) = (params.to_string(), ctx.to_string());
        let result = guest_call!(self, |g, s| g
            .call_execute_tool(s, tool, call_id, &params, &ctx))?;
        check_size("the tool's content", &result.content)?;
        check_size(
            "the tool's details",
            result.details.as_deref().unwrap_or_default(),
        )?;
        Ok(result)
    }

    pub async fn run_command(
        &mut self,
        name: &str,
        args: &str,
        ctx: &Value,
    ) -> Result<(), CallError> {
        let ctx = ctx.to_string();
        guest_call!(self, |g, s| g.call_run_command(s, name, args, &ctx))?
            .map_err(|e| self.guest_error(e))
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

    /// Runs due timers and completed operations; the delay until the next timer, if any.
    pub async fn poll(&mut self) -> Result<Option<u64>, CallError> {
        guest_call!(self, |g, s| g.call_poll(s))
    }

    pub async fn shutdown(&mut self) -> Result<(), CallError> {
        guest_call!(self, |g, s| g.call_shutdown(s))
    }

    fn begin_call(&mut self) -> Result<(), CallError> {
        if let Some(reason) = &self.broken {
            return Err(CallError::Broken(reason.clone()));
        }
        self.store.data_mut().running_since = Instant::now();
        self.store.set_epoch_deadline(1);
        Ok(())
    }

    fn end_call<R>(&mut self, result: wasmtime::Result<R>) -> Result<R, CallError> {
        match result {
            Ok(value) => Ok(value),
            Err(error) => {
                let message = describe_trap(&error);
                self.store.data_mut().operations.cancel_all();
                self.broken = Some(message.clone());
                Err(CallError::Trap(message))
            }
        }
    }
}

/// Values an extension hands back are capped like the ones it sends through imports.
fn check_size(what: &str, text: &str) -> Result<(), CallError> {
    if text.len() > MAX_JSON_BYTES {
        return Err(CallError::Guest(format!(
            "{what} is {} bytes; the limit is {MAX_JSON_BYTES}",
            text.len()
        )));
    }
    Ok(())
}

fn describe_trap(error: &wasmtime::Error) -> String {
    if let Some(deadline) = error.downcast_ref::<DeadlineExceeded>() {
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
