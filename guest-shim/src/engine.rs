//! The QuickJS runtime of this instance, its module loader, and the event loop that drives a
//! JavaScript promise to completion through the host's `start` / `wait` imports.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_void};

use javy::quickjs::{
    Ctx, Function, Object, Persistent, Value, function::Args, promise::PromiseState, qjs,
};
use javy::{Config, Runtime};

use crate::bindings::pichamber::extension::types::{
    DialogAnswer, LoadContext, ModuleSource, Outcome,
};
use crate::{hostcall, modules};

thread_local! {
    static RUNTIME: RefCell<Option<Runtime>> = const { RefCell::new(None) };
    /// Compiled modules by id, for `__pichamber_require`.
    static MODULE_DEFS: RefCell<HashMap<String, usize>> = RefCell::new(HashMap::new());
}

/// QuickJS's own heap limit as a share of the instance's memory limit: running out of heap is
/// then a catchable JS error, and the instance limit (the host's StoreLimits) still bounds
/// allocator overhead and fragmentation.
fn js_memory_limit(instance_limit: u64) -> usize {
    ((instance_limit / 4 * 3) as usize).max(8 << 20)
}
/// Collect garbage every few MiB of allocation: instances live as long as a session.
const JS_GC_THRESHOLD: usize = 8 << 20;
const JS_STACK_LIMIT: usize = 512 << 10;

/// QuickJS's heap limit before `load` says the instance's (pre-initialisation runs under it).
const JS_START_MEMORY_LIMIT: usize = 64 << 20;

thread_local! {
    /// `load` ran: an instance serves one extension.
    static LOADED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Virtual modules extensions commonly import whose top level reads nothing of a session (no
/// global, clock, random or host call): evaluated in the snapshot, so an instance that imports
/// them neither compiles nor runs them, and their objects stay shared pages. A module added
/// here must stay that pure; the others compile when first imported.
const SNAPSHOT_MODULES: &[&str] = &["pichamber:typebox", "pichamber:pi-tui", "pichamber:theme"];

/// Everything that does not depend on the extension or its session: QuickJS with its module
/// loader and host bindings, the prelude evaluated (it reads the load context only when `load`
/// hands it over) and [`SNAPSHOT_MODULES`]. The host runs this once and keeps the memory as
/// the instances' initial image (host/runtime/src/snapshot.rs). It calls no host import but
/// the clock, and holds no WASI resource afterwards.
pub fn pre_initialize() -> Result<(), String> {
    if RUNTIME.with(|r| r.borrow().is_some()) {
        return Err("pre-initialize was called twice on one instance".into());
    }
    let runtime = start_runtime()?;
    runtime.context().with(|ctx| -> Result<(), String> {
        for id in SNAPSHOT_MODULES {
            let module =
                javy::quickjs::Module::import(&ctx, *id).map_err(|e| js_error_text(&ctx, e))?;
            settle_raw(&ctx, module.into_value()).map_err(|e| format!("{id}: {e}"))?;
        }
        Ok(())
    })?;
    RUNTIME.with(|r| *r.borrow_mut() = Some(runtime));
    Ok(())
}

/// For one extension's snapshot, after [`pre_initialize`]: its modules compiled, not evaluated
/// (their top level may read the session's environment, clock or grants, so it runs in
/// `load`, with the factory), and its package files in place. QuickJS finds a compiled module
/// by name before it asks the loader, so an instance made from this snapshot neither receives
/// nor parses them again. A module that does not compile is left as source: importing it
/// fails as it would have.
pub fn pre_compile(sources: Vec<ModuleSource>) -> Result<(), String> {
    if LOADED.with(|l| l.get()) {
        return Err("pre-compile was called after load".into());
    }
    modules::set_extension_modules(sources);
    RUNTIME.with(|r| {
        let guard = r.borrow();
        let runtime = guard
            .as_ref()
            .ok_or_else(|| "pre-compile was called before pre-initialize".to_string())?;
        runtime.context().with(|ctx| {
            let ctx = ctx.as_raw().as_ptr();
            for id in modules::extension_module_ids() {
                let Some(source) = modules::take_source(&id) else {
                    continue;
                };
                // SAFETY: `ctx` is this runtime's live context.
                let compiled = unsafe { compile_module(ctx, &id, &source) };
                if compiled.is_null() {
                    unsafe { qjs::JS_FreeValue(ctx, qjs::JS_GetException(ctx)) };
                    modules::restore_source(id, source);
                }
            }
        });
        Ok(())
    })
}

/// For one extension's snapshot, after [`pre_compile`]: evaluates the module `id` and what it
/// imports, so that instances made from the snapshot find it evaluated (a module's top level
/// runs once for every instance: the factory still runs per instance). Refused when that
/// touched anything of a session (see [`crate::ahead`] and the prelude's `touchedAhead`) but
/// what all the sessions it is for share (`sessions`; the globals only when `watch_globals`):
/// the evaluation is then spoiled, and the host makes the snapshot again without that module.
pub fn pre_evaluate(
    id: &str,
    sessions: &crate::bindings::AheadContext,
    watch_globals: bool,
) -> Result<(), crate::bindings::AheadRefusal> {
    let refusal = |reason: String| crate::bindings::AheadRefusal {
        reason,
        implicated: Vec::new(),
    };
    if LOADED.with(|l| l.get()) {
        return Err(refusal("pre-evaluate was called after load".into()));
    }
    RUNTIME.with(|r| {
        let guard = r.borrow();
        let runtime = guard
            .as_ref()
            .ok_or_else(|| refusal("pre-evaluate was called before pre-initialize".into()))?;
        runtime.context().with(|ctx| {
            let api: Object = ctx
                .globals()
                .get("__pichamber")
                .map_err(|e| refusal(js_error_text(&ctx, e)))?;
            let call = |name: &str, args: Vec<String>| {
                let mut call_args = Args::new(ctx.clone(), args.len());
                for arg in args {
                    call_args.push_arg(arg)?;
                }
                api.get::<_, Function>(name)?.call_arg::<Value>(call_args)
            };
            let sessions = serde_json::json!({
                "grantedEnv": sessions.granted_env,
                "piVersion": sessions.pi_version,
                "extensionName": sessions.extension_name,
                "watchGlobals": watch_globals,
            })
            .to_string();
            call("aheadBegin", vec![sessions]).map_err(|e| refusal(js_error_text(&ctx, e)))?;
            crate::ahead::begin();
            let evaluated = javy::quickjs::Module::import(&ctx, id.to_owned())
                .map_err(|e| js_error_text(&ctx, e))
                .and_then(|promise| settle_raw(&ctx, promise.into_value()));
            let natives = crate::ahead::end();
            let report: String = call("aheadEnd", Vec::new())
                .map_err(|e| refusal(js_error_text(&ctx, e)))?
                .as_string()
                .and_then(|s| s.to_string().ok())
                .unwrap_or_default();
            let report: serde_json::Value = serde_json::from_str(&report).unwrap_or_default();
            let strings = |key: &str| -> Vec<String> {
                report[key]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|v| v.as_str().map(str::to_owned))
                            .collect()
                    })
                    .unwrap_or_default()
            };
            let mut touched = strings("touched");
            for what in natives {
                if !touched.contains(&what) {
                    touched.push(what);
                }
            }
            if !touched.is_empty() {
                return Err(crate::bindings::AheadRefusal {
                    reason: format!("it touched {}", touched.join(", ")),
                    implicated: strings("implicated"),
                });
            }
            // Kept for `load`, which then finds the factory without importing it.
            let namespace = evaluated.map_err(refusal)?;
            api.get::<_, Function>("aheadKeep")
                .and_then(|keep| keep.call::<_, ()>((id, namespace)))
                .map_err(|e| refusal(js_error_text(&ctx, e)))
        })
    })
}

/// A QuickJS runtime whose imports resolve through `load_module`, with `__host` and
/// `__pichamber_require` installed and the prelude evaluated.
fn start_runtime() -> Result<Runtime, String> {
    let mut config = Config::default();
    config
        .text_encoding(true)
        .gc_threshold(JS_GC_THRESHOLD)
        .memory_limit(JS_START_MEMORY_LIMIT)
        .max_stack_size(JS_STACK_LIMIT);
    let runtime = Runtime::new(config).map_err(|e| format!("cannot start QuickJS: {e}"))?;
    runtime.context().with(|ctx| -> Result<(), String> {
        // Imports were rewritten to canonical ids at build time, so QuickJS's default name
        // normalisation is right and only loading needs to be ours.
        unsafe {
            let rt = qjs::JS_GetRuntime(ctx.as_raw().as_ptr());
            qjs::JS_SetModuleLoaderFunc(rt, None, Some(load_module), std::ptr::null_mut());
        }
        hostcall::install(&ctx).map_err(|e| js_error_text(&ctx, e))?;
        crate::programs::install(&ctx).map_err(|e| js_error_text(&ctx, e))?;
        crate::workers::install(&ctx).map_err(|e| js_error_text(&ctx, e))?;
        crate::vm::install(&ctx).map_err(|e| js_error_text(&ctx, e))?;
        install_require(&ctx).map_err(|e| js_error_text(&ctx, e))?;
        install_internals(&ctx).map_err(|e| js_error_text(&ctx, e))?;
        let prelude = javy::quickjs::Module::import(&ctx, modules::PRELUDE_ID)
            .map_err(|e| js_error_text(&ctx, e))?;
        settle_raw(&ctx, prelude.into_value())?;
        Ok(())
    })?;
    Ok(runtime)
}

pub fn load(sources: Vec<ModuleSource>, entry: &str, context: LoadContext) -> Result<(), String> {
    if LOADED.with(|l| l.replace(true)) {
        return Err("load was called twice on one instance".into());
    }
    // Without pre-initialisation (a shim run as built) QuickJS and the prelude start here.
    if RUNTIME.with(|r| r.borrow().is_none()) {
        let runtime = start_runtime()?;
        RUNTIME.with(|r| *r.borrow_mut() = Some(runtime));
    }
    modules::set_extension_modules(sources);
    RUNTIME.with(|r| {
        if let Some(runtime) = r.borrow().as_ref() {
            runtime.context().with(|ctx| unsafe {
                let rt = qjs::JS_GetRuntime(ctx.as_raw().as_ptr());
                qjs::JS_SetMemoryLimit(rt, js_memory_limit(context.memory_limit) as _);
            });
        }
    });
    let env_json = serde_json::to_string(&EnvObject(&context.env)).map_err(|e| e.to_string())?;
    crate::random::seed()?;
    // The prelude's applyLoadContext takes the texts as they are: parsing them as one JSON
    // object cost every load ~49K instructions, more than a registration (callgrind).
    let has_ui = if context.has_ui { "true" } else { "false" };
    let values = [
        entry,
        &context.extension_name,
        &context.cwd,
        &context.mode,
        has_ui,
        &context.pi_version,
        &env_json,
    ];
    call_prelude("load", &values).map(|_| ())
}

/// Granted variables as one object, `process.env`'s.
struct EnvObject<'a>(&'a [(String, String)]);

impl serde::Serialize for EnvObject<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.0.iter().map(|(k, v)| (k, v)))
    }
}

/// What a call came to: the parts of its reply, or, for a call that may wait, the session
/// action it waits for (its name and JSON options).
pub enum Step {
    Done(Vec<Option<String>>),
    Waiting { action: String, args: String },
}

/// Calls `globalThis.__pichamber[name](...args)`, which returns a promise of an array
/// `[null, ...parts]` (each part the JSON text of a value, or null) or `[message]`, and runs the
/// event loop until it settles. The parts come back as JavaScript made them, unparsed.
pub fn call_prelude(name: &str, args: &[&str]) -> Result<Vec<Option<String>>, String> {
    match call_prelude_step(name, args, false)? {
        Step::Done(parts) => Ok(parts),
        Step::Waiting { .. } => Err(format!("internal: {name} cannot wait")),
    }
}

/// [`call_prelude`] that, when `may_wait`, also stops at a session action the extension asked
/// for (a command's `ctx.navigateTree`); the host carries it out and calls the prelude again,
/// whose reply is then that of the same promise.
pub fn call_prelude_step(name: &str, args: &[&str], may_wait: bool) -> Result<Step, String> {
    RUNTIME.with(|r| {
        let guard = r.borrow();
        let runtime = guard
            .as_ref()
            .ok_or_else(|| "the extension is not loaded".to_string())?;
        runtime.context().with(|ctx| {
            let function = prelude_export(&ctx, name)?;
            let mut call_args = Args::new(ctx.clone(), args.len());
            for arg in args {
                call_args
                    .push_arg(*arg)
                    .map_err(|e| js_error_text(&ctx, e))?;
            }
            let promise: Value = function
                .call_arg(call_args)
                .map_err(|e| js_error_text(&ctx, e))?;
            let reply = match settle(&ctx, promise, may_wait)? {
                Settled::Value(reply) => reply,
                Settled::Waiting { action, args } => return Ok(Step::Waiting { action, args }),
            };
            // `null`: done, with nothing to hand back (a dispatch's most common answer).
            if reply.is_null() {
                return Ok(Step::Done(Vec::new()));
            }
            let mut parts: Vec<Option<String>> = reply
                .into_array()
                .and_then(|a| a.iter().collect::<javy::quickjs::Result<_>>().ok())
                .ok_or_else(|| format!("internal: {name} returned no reply"))?;
            if parts.is_empty() {
                return Err(format!("internal: {name} returned an empty reply"));
            }
            match parts.remove(0) {
                None => Ok(Step::Done(parts)),
                Some(error) => Err(error),
            }
        })
    })
}

thread_local! {
    /// The prelude's exports as first looked up: a call then makes no atoms and reads no
    /// properties to find its function (a dispatch's cost shows it).
    static EXPORTS: RefCell<HashMap<String, Persistent<Function<'static>>>> =
        RefCell::new(HashMap::new());
}

fn prelude_export<'js>(ctx: &Ctx<'js>, name: &str) -> Result<Function<'js>, String> {
    if let Some(saved) = EXPORTS.with(|e| e.borrow().get(name).cloned()) {
        return saved.restore(ctx).map_err(|e| js_error_text(ctx, e));
    }
    let api: Object = ctx
        .globals()
        .get("__pichamber")
        .map_err(|e| js_error_text(ctx, e))?;
    let function: Function = api.get(name).map_err(|e| js_error_text(ctx, e))?;
    let saved = Persistent::save(ctx, function.clone());
    EXPORTS.with(|e| e.borrow_mut().insert(name.to_owned(), saved));
    Ok(function)
}

thread_local! {
    /// The context text of the last dispatch the prelude read without failing.
    static DISPATCH_CTX: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Whether `ctx` is the text the prelude read at the last dispatch, compared a word at a time
/// (wasi-libc's memcmp, which `==` would call, goes byte by byte; the text is compared on
/// every dispatch).
pub fn same_dispatch_ctx(ctx: &str) -> bool {
    DISPATCH_CTX.with(|last| {
        let last = last.borrow();
        let Some(last) = last.as_deref() else {
            return false;
        };
        let (a, b) = (last.as_bytes(), ctx.as_bytes());
        let (a_words, b_words) = (a.chunks_exact(8), b.chunks_exact(8));
        let word = |w: &[u8]| u64::from_ne_bytes(w.try_into().expect("8 bytes"));
        a.len() == b.len()
            && a_words
                .remainder()
                .iter()
                .zip(b_words.remainder())
                .all(|(x, y)| x == y)
            && a_words.zip(b_words).all(|(x, y)| word(x) == word(y))
    })
}

/// Records what the prelude read at a dispatch: its context text, or none when the call
/// failed (it may have failed before reading it).
pub fn dispatched_ctx(ctx: Option<String>) {
    DISPATCH_CTX.with(|last| *last.borrow_mut() = ctx);
}

/// [`call_prelude`] of a function with one part: its JSON text (`null` for none).
pub fn call_prelude_json(name: &str, args: &[&str]) -> Result<String, String> {
    let mut parts = call_prelude(name, args)?;
    Ok(parts
        .first_mut()
        .and_then(Option::take)
        .unwrap_or_else(|| "null".into()))
}

/// Nothing the prelude could run: no job, timer, operation, program or worker (and no
/// completion kept for the loop). A completion of an operation the prelude no longer holds
/// would find nothing to resolve; the host keeps it until a later poll.
fn is_idle_in(runtime: &Runtime) -> bool {
    PENDING.with(|p| p.get()) == 0
        && !runtime.has_pending_jobs()
        && crate::programs::live() == 0
        && crate::workers::live() == 0
        && !crate::hostcall::holds_completions()
}

/// [`is_idle_in`] this instance's runtime (an instance not loaded yet is idle).
pub fn is_idle() -> bool {
    RUNTIME.with(|r| r.borrow().as_ref().is_none_or(is_idle_in))
}

/// Background work between calls: due timers and completed operations, without blocking.
pub fn poll() -> Option<u64> {
    RUNTIME.with(|r| {
        let guard = r.borrow();
        let runtime = guard.as_ref()?;
        if is_idle_in(runtime) {
            return None;
        }
        runtime.context().with(|ctx| {
            let event_loop: Object = ctx.globals().get("__pichamber_loop").ok()?;
            // Bounded: an interval of 0 ms must not keep this call busy forever.
            for _ in 0..1000 {
                while ctx.execute_pending_job() {}
                let mut progressed = false;
                if let Some(done) = crate::hostcall::next_completion(Some(0)) {
                    let outcome = outcome_json(done.outcome);
                    let _ = event_loop
                        .get::<_, Function>("complete")
                        .and_then(|f| f.call::<_, ()>((done.id, outcome)));
                    progressed = true;
                }
                let state: Vec<f64> = event_loop
                    .get::<_, Function>("state")
                    .and_then(|f| f.call(()))
                    .ok()?;
                if state[0] == 0.0 {
                    let _ = event_loop
                        .get::<_, Function>("fireTimers")
                        .and_then(|f| f.call::<_, ()>(()));
                    progressed = true;
                }
                progressed |= crate::programs::deliver(&ctx);
                progressed |= crate::workers::deliver(&ctx);
                if !progressed {
                    while ctx.execute_pending_job() {}
                    break;
                }
            }
            let state: Vec<f64> = event_loop
                .get::<_, Function>("state")
                .and_then(|f| f.call(()))
                .ok()?;
            (state[0] >= 0.0).then(|| state[0].ceil() as u64)
        })
    })
}

/// Runs microtasks, timers and host operations until `value` (a promise or a plain value)
/// settles, and returns what it resolved to.
fn settle_raw<'js>(ctx: &Ctx<'js>, value: Value<'js>) -> Result<Value<'js>, String> {
    match settle(ctx, value, false)? {
        Settled::Value(value) => Ok(value),
        Settled::Waiting { action, .. } => Err(format!("internal: {action} waited here")),
    }
}

enum Settled<'js> {
    Value(Value<'js>),
    Waiting { action: String, args: String },
}

/// [`settle_raw`], stopping first (when `may_wait`) at a session action the extension asked
/// for: as in pi, it starts before the command goes on, and the command's promise may wait
/// for it.
fn settle<'js>(ctx: &Ctx<'js>, value: Value<'js>, may_wait: bool) -> Result<Settled<'js>, String> {
    let Some(promise) = value.as_promise().cloned() else {
        // What the call left queued runs before it returns, as it would have awaited.
        while ctx.execute_pending_job() {}
        return Ok(Settled::Value(value));
    };
    let api = || -> Result<Object<'js>, String> {
        ctx.globals()
            .get("__pichamber_loop")
            .map_err(|e| js_error_text(ctx, e))
    };
    loop {
        while ctx.execute_pending_job() {}
        if may_wait {
            let action: Option<Vec<String>> = api()?
                .get::<_, Function>("waitingAction")
                .and_then(|f| f.call(()))
                .map_err(|e| js_error_text(ctx, e))?;
            if let Some([action, args]) = action.and_then(|a| <[String; 2]>::try_from(a).ok()) {
                return Ok(Settled::Waiting { action, args });
            }
        }
        match promise.state() {
            PromiseState::Resolved => {
                return promise
                    .result::<Value>()
                    .unwrap_or_else(|| Ok(Value::new_undefined(ctx.clone())))
                    .map(Settled::Value)
                    .map_err(|e| js_error_text(ctx, e));
            }
            PromiseState::Rejected => {
                let reason = promise
                    .result::<Value>()
                    .map(|r| r.err())
                    .unwrap_or_default()
                    .map(|e| js_error_text(ctx, e))
                    .unwrap_or_else(|| "promise rejected".into());
                return Err(reason);
            }
            PromiseState::Pending => {}
        }
        // The prelude loop may not exist yet while the prelude itself loads.
        let Ok(event_loop) = api() else {
            return Err("a module awaited something during start-up that never settles".into());
        };
        let state: Vec<f64> = event_loop
            .get::<_, Function>("state")
            .and_then(|f| f.call(()))
            .map_err(|e| js_error_text(ctx, e))?;
        let (next_timer, pending_ops) = (state[0], state[1]);
        if next_timer < 0.0
            && pending_ops == 0.0
            && crate::programs::live() == 0
            && crate::workers::live() == 0
        {
            // A worker with nothing left to do ends here: the prelude settles its run.
            let settled: bool = event_loop
                .get::<_, Function>("idle")
                .and_then(|f| f.call(()))
                .unwrap_or(false);
            if settled {
                continue;
            }
            return Err(
                "the extension awaits a promise that nothing will ever settle (no timer or \
                 pending operation is left)"
                    .into(),
            );
        }
        let timeout = (next_timer >= 0.0).then(|| next_timer.ceil() as u64);
        match crate::hostcall::next_completion(timeout) {
            Some(done) => {
                let outcome = outcome_json(done.outcome);
                event_loop
                    .get::<_, Function>("complete")
                    .and_then(|f| f.call::<_, ()>((done.id, outcome)))
                    .map_err(|e| js_error_text(ctx, e))?;
            }
            None => {
                // A timer is due, or a program or worker sent something.
                event_loop
                    .get::<_, Function>("fireTimers")
                    .and_then(|f| f.call::<_, ()>(()))
                    .map_err(|e| js_error_text(ctx, e))?;
                crate::programs::deliver(ctx);
                crate::workers::deliver(ctx);
            }
        }
    }
}

pub(crate) fn outcome_json(outcome: Outcome) -> String {
    use serde_json::json;
    match outcome {
        Outcome::Dialog(DialogAnswer::Value(v)) => json!({ "value": v }),
        Outcome::Dialog(DialogAnswer::Confirmed(c)) => json!({ "confirmed": c }),
        Outcome::Dialog(DialogAnswer::Cancelled) => json!({ "cancelled": true }),
        Outcome::Exec(Ok(r)) => json!({ "ok": {
            "stdout": r.stdout, "stderr": r.stderr, "code": r.code, "killed": r.killed,
        }}),
        Outcome::Exec(Err(e)) => json!({ "error": e }),
        Outcome::Fetch(Ok(r)) => {
            use base64::Engine as _;
            let headers: Vec<[String; 2]> = r.headers.into_iter().map(|(k, v)| [k, v]).collect();
            json!({ "ok": {
                "url": r.url, "status": r.status, "statusText": r.status_text,
                "headers": headers, "redirected": r.redirected,
                "body": base64::engine::general_purpose::STANDARD.encode(&r.body),
            }})
        }
        Outcome::DnsLookup(Ok(addresses)) => json!({ "ok": addresses }),
        Outcome::ResizeImage(Ok(resized)) => json!({
            "ok": resized.and_then(|r| serde_json::from_str::<serde_json::Value>(&r).ok())
        }),
        Outcome::Fetch(Err(e))
        | Outcome::DnsLookup(Err(e))
        | Outcome::ResizeImage(Err(e))
        | Outcome::BuiltinTool(Err(e))
        | Outcome::Model(Err(e))
        | Outcome::NestedTool(Err(e)) => json!({ "error": e }),
        Outcome::BuiltinTool(Ok(result))
        | Outcome::Model(Ok(result))
        | Outcome::NestedTool(Ok(result)) => {
            json!({ "ok": serde_json::from_str::<serde_json::Value>(&result).unwrap_or_default() })
        }
    }
    .to_string()
}

/// The text of a JavaScript exception (message and stack) or an rquickjs error.
pub fn js_error_text(ctx: &Ctx<'_>, error: javy::quickjs::Error) -> String {
    if !error.is_exception() {
        return error.to_string();
    }
    let caught = ctx.catch();
    exception_text(&caught)
}

fn exception_text(value: &Value<'_>) -> String {
    if let Some(object) = value.as_object() {
        let message: Option<String> = object.get("message").ok();
        let name: Option<String> = object.get("name").ok();
        let stack: Option<String> = object.get("stack").ok();
        if let Some(message) = message {
            let head = match name {
                Some(name) if !name.is_empty() && name != "Error" => format!("{name}: {message}"),
                _ => message,
            };
            return match stack {
                Some(stack) if !stack.trim().is_empty() => format!("{head}\n{}", stack.trim_end()),
                _ => head,
            };
        }
    }
    if let Some(s) = value.as_string() {
        return s.to_string().unwrap_or_default();
    }
    format!("{value:?}")
}

/// QuickJS module loader: serves the prelude, the virtual modules and the extension's own
/// modules by canonical id; nothing is read from any filesystem.
unsafe extern "C" fn load_module(
    ctx: *mut qjs::JSContext,
    name: *const c_char,
    _opaque: *mut c_void,
) -> *mut qjs::JSModuleDef {
    let module_name = unsafe { CStr::from_ptr(name) }
        .to_string_lossy()
        .into_owned();
    let Some(source) = modules::take_source(&module_name) else {
        unsafe {
            qjs::JS_ThrowReferenceError(
                ctx,
                c"Cannot find module '%s' (it was not bundled into this extension)".as_ptr(),
                name,
            );
        }
        return std::ptr::null_mut();
    };
    unsafe { compile_module(ctx, &module_name, &source) }
}

/// Compiles (does not evaluate) a module under its canonical id; null with an exception
/// pending when it does not compile.
///
/// # Safety
/// `ctx` must be a live context of this instance's runtime.
unsafe fn compile_module(
    ctx: *mut qjs::JSContext,
    module_name: &str,
    source: &str,
) -> *mut qjs::JSModuleDef {
    let name = CString::new(module_name).unwrap_or_default();
    let Ok(source) = CString::new(source) else {
        unsafe {
            qjs::JS_ThrowSyntaxError(
                ctx,
                c"module '%s' contains a NUL byte".as_ptr(),
                name.as_ptr(),
            );
        }
        return std::ptr::null_mut();
    };
    let flags = (qjs::JS_EVAL_TYPE_MODULE | qjs::JS_EVAL_FLAG_COMPILE_ONLY) as i32;
    unsafe {
        let value = qjs::JS_Eval(
            ctx,
            source.as_ptr(),
            source.as_bytes().len() as _,
            name.as_ptr(),
            flags,
        );
        if qjs::JS_VALUE_GET_TAG(value) == qjs::JS_TAG_EXCEPTION {
            return std::ptr::null_mut();
        }
        let module = qjs::JS_VALUE_GET_PTR(value).cast::<qjs::JSModuleDef>();
        qjs::JS_FreeValue(ctx, value);
        set_import_meta(ctx, module, module_name);
        MODULE_DEFS.with(|m| {
            m.borrow_mut()
                .insert(module_name.to_owned(), module as usize)
        });
        module
    }
}

/// The shim's functions the prelude takes from globalThis (and deletes) as it starts:
/// `__pichamber_now` ([`take_now`]), `__pichamber_is_promise` ([`is_promise`]),
/// `__pichamber_fingerprint` ([`fingerprint`]), `__pichamber_pending` ([`set_pending`]),
/// `__pichamber_reusable` ([`crate::reuse`]) and `__pichamber_random` ([`crate::random`]).
fn install_internals(ctx: &Ctx<'_>) -> javy::quickjs::Result<()> {
    crate::reuse::install(ctx)?;
    crate::random::install(ctx)?;
    let globals = ctx.globals();
    install_c_function(ctx, "__pichamber_now", Some(take_now), 2)?;
    install_c_function(ctx, "__pichamber_is_promise", Some(is_promise), 1)?;
    globals.set(
        "__pichamber_fingerprint",
        Function::new(ctx.clone(), fingerprint)?,
    )?;
    globals.set(
        "__pichamber_pending",
        Function::new(ctx.clone(), set_pending)?,
    )
}

thread_local! {
    /// How many timers and host operations the prelude's event loop holds.
    static PENDING: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// `__pichamber_pending(count)`: the prelude's event loop reports what it holds, so that a
/// poll with nothing to do does not call into it.
fn set_pending(count: f64) {
    PENDING.with(|pending| pending.set(count as u32));
}

/// `__pichamber_fingerprint(object)`: a number that changes when any of the object's own
/// properties does (its key, attributes, value or accessors, compared as the engine holds
/// them), NaN when they cannot be read. The watch on the built-ins while modules are
/// evaluated ahead compares them property by property only when this changed. A value is
/// compared by identity: the caller keeps the values it last saw alive, so that no new one
/// can take the place of one of them.
fn fingerprint<'js>(ctx: Ctx<'js>, object: Value<'js>) -> f64 {
    use std::hash::Hasher;
    let raw = ctx.as_raw().as_ptr();
    let object = object.as_raw();
    let mut hasher = std::hash::DefaultHasher::new();
    let mut names: *mut qjs::JSPropertyEnum = std::ptr::null_mut();
    let mut count = 0u32;
    let mask = (qjs::JS_GPN_STRING_MASK | qjs::JS_GPN_SYMBOL_MASK) as i32;
    // SAFETY: a live context and a value of it; what QuickJS hands out is freed here.
    unsafe {
        if qjs::JS_GetOwnPropertyNames(raw, &mut names, &mut count, object, mask) < 0 {
            qjs::JS_FreeValue(raw, qjs::JS_GetException(raw));
            return f64::NAN;
        }
        let mut readable = true;
        for i in 0..count as usize {
            let atom = (*names.add(i)).atom;
            hasher.write_u32(atom);
            let mut property = std::mem::MaybeUninit::<qjs::JSPropertyDescriptor>::zeroed();
            match qjs::JS_GetOwnProperty(raw, property.as_mut_ptr(), object, atom) {
                found if found < 0 => {
                    qjs::JS_FreeValue(raw, qjs::JS_GetException(raw));
                    readable = false;
                }
                0 => hasher.write_u8(0),
                _ => {
                    let property = property.assume_init();
                    hasher.write_i32(property.flags);
                    for value in [property.value, property.getter, property.setter] {
                        hasher.write_u64(value);
                        qjs::JS_FreeValue(raw, value);
                    }
                }
            }
        }
        qjs::JS_FreePropertyEnum(raw, names, count);
        if !readable {
            return f64::NAN;
        }
    }
    // 53 bits: a number JavaScript holds exactly.
    (hasher.finish() >> 11) as f64
}

/// `__pichamber_now(value, notNow)`: what `await value` would resume with, when it would
/// resume with no other job running first: `value` itself, or the result of a promise that
/// has already been fulfilled. Otherwise (a pending or rejected promise, another thenable, or
/// jobs already queued) `notNow`. The prelude's `drive` runs handler chains through it, once
/// per handler: a C function, not an rquickjs closure, for its cost shows in a dispatch's.
unsafe extern "C" fn take_now(
    ctx: *mut qjs::JSContext,
    _this: qjs::JSValue,
    argc: std::ffi::c_int,
    argv: *mut qjs::JSValue,
) -> qjs::JSValue {
    if argc < 2 {
        return qjs::JS_UNDEFINED;
    }
    // SAFETY: QuickJS passes `argc` live arguments of a live context; what is returned is a
    // new reference, and what is read here is freed here.
    unsafe {
        let (value, not_now) = (*argv, *argv.add(1));
        if qjs::JS_IsJobPending(qjs::JS_GetRuntime(ctx)) {
            return qjs::JS_DupValue(ctx, not_now);
        }
        if qjs::JS_IsPromise(value) {
            return if qjs::JS_PromiseState(ctx, value)
                == qjs::JSPromiseStateEnum_JS_PROMISE_FULFILLED
            {
                qjs::JS_PromiseResult(ctx, value)
            } else {
                qjs::JS_DupValue(ctx, not_now)
            };
        }
        // `await` calls another thenable's `then` (and a throwing getter rejects it).
        if qjs::JS_VALUE_GET_TAG(value) == qjs::JS_TAG_OBJECT {
            let then = qjs::JS_GetPropertyStr(ctx, value, c"then".as_ptr());
            let thenable = if qjs::JS_IsException(then) {
                qjs::JS_FreeValue(ctx, qjs::JS_GetException(ctx));
                true
            } else {
                qjs::JS_IsFunction(ctx, then)
            };
            qjs::JS_FreeValue(ctx, then);
            if thenable {
                return qjs::JS_DupValue(ctx, not_now);
            }
        }
        qjs::JS_DupValue(ctx, value)
    }
}

/// `__pichamber_is_promise(value)`: whether `value` is one of the engine's promises, as
/// `instanceof Promise` tells of the prelude's own values at a tenth of its cost (it looks
/// up `Symbol.hasInstance` and walks the prototype chain): asked in every dispatch and load.
unsafe extern "C" fn is_promise(
    _ctx: *mut qjs::JSContext,
    _this: qjs::JSValue,
    argc: std::ffi::c_int,
    argv: *mut qjs::JSValue,
) -> qjs::JSValue {
    // SAFETY: QuickJS passes `argc` live arguments.
    if argc >= 1 && unsafe { qjs::JS_IsPromise(*argv) } {
        qjs::JS_TRUE
    } else {
        qjs::JS_FALSE
    }
}

/// Sets a global to a C function: the cheapest call from JavaScript (rquickjs's closures
/// convert every argument and the result through its own layer).
pub(crate) fn install_c_function(
    ctx: &Ctx<'_>,
    name: &str,
    function: qjs::JSCFunction,
    length: i32,
) -> javy::quickjs::Result<()> {
    let c_name = CString::new(name).expect("a global's name has no NUL");
    // SAFETY: a live context; QuickJS copies the name.
    let value = unsafe {
        let raw = qjs::JS_NewCFunction2(
            ctx.as_raw().as_ptr(),
            function,
            c_name.as_ptr(),
            length,
            qjs::JSCFunctionEnum_JS_CFUNC_generic,
            0,
        );
        Value::from_raw(ctx.clone(), raw)
    };
    ctx.globals().set(name, value)
}

/// `__pichamber_require(id)`: a module's namespace, loaded and evaluated synchronously. The
/// prelude uses it for Node's globals (Buffer, URL...), so a run pays for compiling those
/// modules only when an extension touches them.
fn install_require(ctx: &Ctx<'_>) -> javy::quickjs::Result<()> {
    let require = Function::new(ctx.clone(), require_module)?;
    ctx.globals().set("__pichamber_require", require)
}

fn require_module<'js>(ctx: Ctx<'js>, id: String) -> javy::quickjs::Result<Value<'js>> {
    // Loading links and evaluates the module (and its imports) before it returns; only the
    // promise's bookkeeping is left to the job queue.
    javy::quickjs::Module::import(&ctx, id.clone())?;
    let Some(module) = MODULE_DEFS.with(|m| m.borrow().get(&id).copied()) else {
        return Err(javy::quickjs::Exception::throw_reference(
            &ctx,
            &format!("Cannot find module '{id}'"),
        ));
    };
    // SAFETY: `module` was returned by JS_Eval for this context and modules live as long as
    // the context; the namespace is a new reference handed over to rquickjs.
    unsafe {
        let namespace =
            qjs::JS_GetModuleNamespace(ctx.as_raw().as_ptr(), module as *mut qjs::JSModuleDef);
        if qjs::JS_VALUE_GET_TAG(namespace) == qjs::JS_TAG_EXCEPTION {
            return Err(javy::quickjs::Error::Exception);
        }
        Ok(Value::from_raw(ctx, namespace))
    }
}

/// `import.meta.url` / `filename` / `dirname` as Node sets them, in the sandbox's own terms
/// (`file:///ext/src/index.ts`): extensions compute paths relative to themselves.
unsafe fn set_import_meta(ctx: *mut qjs::JSContext, module: *mut qjs::JSModuleDef, name: &str) {
    let dirname = match name.rfind('/') {
        Some(0) => "/",
        Some(i) => &name[..i],
        None => ".",
    };
    let url = if name.starts_with('/') {
        format!("file://{name}")
    } else {
        name.to_owned()
    };
    unsafe {
        let meta = qjs::JS_GetImportMeta(ctx, module);
        if qjs::JS_VALUE_GET_TAG(meta) == qjs::JS_TAG_EXCEPTION {
            return;
        }
        for (key, value) in [
            (c"url", url.as_str()),
            (c"filename", name),
            (c"dirname", dirname),
        ] {
            let text = qjs::JS_NewStringLen(ctx, value.as_ptr().cast(), value.len() as _);
            qjs::JS_SetPropertyStr(ctx, meta, key.as_ptr(), text);
        }
        qjs::JS_FreeValue(ctx, meta);
    }
}
