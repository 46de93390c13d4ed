//! Pre-initialised guests: a guest shim that exports `pre-initialize` is run up to the point
//! where QuickJS, its host bindings and every module the shim carries are compiled, and that
//! memory becomes the component's initial image (wasmtime-wizer). An instance then starts from
//! it, a copy-on-write mapping, instead of building it again in every session. That image
//! depends on no extension and no session, and is made once per shim.
//!
//! An extension's own image goes one step further: `pre-compile` also compiles its modules
//! and puts its package files in place, so that a session neither copies nor parses them
//! again, and their compiled code is pages shared by every instance. Then `pre-evaluate`
//! evaluates them, one by one, so that their top level runs once rather than in every
//! instance. A module's top level that touches anything of a session (the host, the load
//! context, the environment, the clock, timers, `Math.random`, the globals) is refused; the
//! image is then made again without that module, which runs per instance as before, and so
//! on until an evaluation touches nothing ([`MAX_ROUNDS`]). It costs a compilation of the
//! whole component per extension, so a process makes it only for an extension it
//! instantiates more than once (a second session), in the background; the sessions before it
//! start from the shim's image. Its load context and factory still run per instance (`load`).
//!
//! Both are kept in the compile cache beside compiled code. The component comes from an
//! artifact, which is untrusted: its initialisation runs in a store as bounded as an
//! instance's (memory, time), with WASI but no grant, and every pichamber import traps.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, Instance, Lift, Linker, ResourceTable, WasmList};
use wasmtime::{Engine, Store, StoreLimits, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wizer::{ComponentInstanceState, Wizer};

use crate::compile_cache::{cached, keep_compiled};
use crate::wit::ModuleSource;

/// The shim's export that builds the shared state (guest-shim/wit/shim.wit).
pub const INIT_EXPORT: &str = "pre-initialize";
/// The shim's export that compiles an extension's modules into it.
pub const COMPILE_EXPORT: &str = "pre-compile";
/// The shim's export that evaluates one of them into it.
pub const EVALUATE_EXPORT: &str = "pre-evaluate";
/// How many times an extension's image is made again without the modules the last attempt
/// refused, before it is made with none evaluated. Each attempt evaluates again from the
/// shim's state, and a module refused in one is never tried again, so this bounds the cost of
/// a package whose modules touch their sessions one behind the other. The snapshot is then
/// taken of one more attempt, of the modules the last one let through.
const MAX_ROUNDS: usize = 6;
/// What all attempts together may take before the image is made with none evaluated.
const EVALUATION_BUDGET: Duration = Duration::from_secs(60);
/// Bounds of the initialisation run.
const INIT_MEMORY_LIMIT: usize = 256 << 20;
const INIT_TIME_LIMIT: Duration = Duration::from_secs(30);

/// Which snapshots instances start from, by `PICHAMBER_PREINIT`: unset, the shim's and, for an
/// extension instantiated twice, its own; `shim`, only the shim's; `off`, none (every guest
/// as built, initialising in each instance: the benchmarks' baseline); `extension`, the
/// extension's own made at its first instance, before it starts (what tests use to see it);
/// `compiled`, the same with its modules compiled but none evaluated (what the benchmarks
/// compare evaluation with).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Off,
    Shim,
    Extension,
    ExtensionNow,
    CompiledNow,
}

impl Mode {
    pub fn extension_images(self) -> bool {
        matches!(
            self,
            Mode::Extension | Mode::ExtensionNow | Mode::CompiledNow
        )
    }

    /// At which instance of an extension its own image is made.
    pub fn extension_image_after(self) -> u32 {
        match self {
            Mode::ExtensionNow | Mode::CompiledNow => 1,
            _ => 2,
        }
    }

    /// Whether an extension's own image holds its modules evaluated.
    pub fn evaluates(self) -> bool {
        self != Mode::CompiledNow
    }
}

/// The mode `PICHAMBER_PREINIT` chooses, read once per process.
pub fn mode() -> Mode {
    static MODE: std::sync::OnceLock<Mode> = std::sync::OnceLock::new();
    *MODE.get_or_init(|| match std::env::var("PICHAMBER_PREINIT").as_deref() {
        Err(_) | Ok("") => Mode::Extension,
        Ok("off") => Mode::Off,
        Ok("shim") => Mode::Shim,
        Ok("extension") => Mode::ExtensionNow,
        Ok("compiled") => Mode::CompiledNow,
        Ok(other) => {
            tracing::warn!(
                "PICHAMBER_PREINIT={other:?} is not one of off, shim, extension or compiled; \
                 instances start from the snapshots as they do without it"
            );
            Mode::Extension
        }
    })
}

/// Which pre-initialisation exports a component has (a shim built before one did not).
#[derive(Clone, Copy, Debug, Default)]
pub struct Offers {
    pub pre_initialize: bool,
    pub pre_compile: bool,
    pub pre_evaluate: bool,
}

impl Offers {
    pub fn of(component: &[u8]) -> Self {
        use wasmparser::{ComponentExternalKind, Parser, Payload};
        let mut offers = Offers::default();
        let mut depth = 0usize;
        for payload in Parser::new(0).parse_all(component) {
            match payload {
                Ok(Payload::ModuleSection { .. } | Payload::ComponentSection { .. }) => depth += 1,
                Ok(Payload::End(_)) => depth = depth.saturating_sub(1),
                Ok(Payload::ComponentExportSection(exports)) if depth == 0 => {
                    for export in exports.into_iter().flatten() {
                        if export.kind != ComponentExternalKind::Func {
                            continue;
                        }
                        match export.name.name {
                            INIT_EXPORT => offers.pre_initialize = true,
                            COMPILE_EXPORT => offers.pre_compile = true,
                            EVALUATE_EXPORT => offers.pre_evaluate = true,
                            _ => {}
                        }
                    }
                }
                Err(_) => return Offers::default(),
                _ => {}
            }
        }
        offers
    }
}

/// An extension's modules for its own image: all of them compiled, and those named in
/// `evaluate` evaluated, in that order (the entries first, as `load` would), for the sessions
/// `sessions` describes.
pub struct ExtensionModules {
    pub sources: Vec<ModuleSource>,
    pub evaluate: Vec<String>,
    pub sessions: AheadContext,
}

/// What the sessions an image is made for share (guest-shim/wit/shim.wit).
#[derive(Clone, Debug, wasmtime::component::ComponentType, wasmtime::component::Lower)]
#[component(record)]
pub struct AheadContext {
    #[component(name = "granted-env")]
    pub granted_env: Vec<String>,
    #[component(name = "pi-version")]
    pub pi_version: String,
    #[component(name = "extension-name")]
    pub extension_name: String,
}

/// A snapshot made: the component's bytes, and for an extension's image, which modules it
/// holds evaluated and which were refused, with why.
pub struct Made {
    pub image: Vec<u8>,
    pub evaluated: usize,
    pub refused: Vec<(String, String)>,
}

/// The component with its initialisation already run: its memory and globals as they were
/// when `pre-initialize` returned, or with `modules`, when their evaluation then returned.
pub fn pre_initialize(
    component: &[u8],
    modules: Option<ExtensionModules>,
    cache_dir: Option<&Path>,
) -> Result<Made> {
    // An engine of its own, allocating on demand: the run takes none of the instance slots a
    // process's sessions count on (an extension's image is made while they run).
    let engine = Engine::new(&crate::engine_config(cache_dir))?;
    crate::start_epoch_ticker(engine.clone());
    let component = component.to_vec();
    let cache_dir = cache_dir.map(Path::to_path_buf);
    // wasmtime-wasi's async host functions want a tokio runtime; the caller may be inside one
    // (a session being opened), so the run gets a thread and a runtime of its own.
    std::thread::Builder::new()
        .name("pichamber-snapshot".into())
        .spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(run(&engine, &component, modules, cache_dir.as_deref()))
        })?
        .join()
        .map_err(|panic| {
            let text = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            anyhow::anyhow!("the snapshot of the guest failed: {text}")
        })?
}

struct InitState {
    wasi: WasiCtx,
    table: ResourceTable,
    limits: StoreLimits,
    started: Instant,
    /// Reads of the clock, which a module evaluated ahead may not make.
    clock_reads: Arc<AtomicU64>,
}

impl WasiView for InitState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

async fn run(
    engine: &Engine,
    wasm: &[u8],
    modules: Option<ExtensionModules>,
    cache_dir: Option<&Path>,
) -> Result<Made> {
    let mut wizer = Wizer::new();
    // The export stays (wizer's component rewrite cannot drop it without leaving its core
    // function unexported); called again, the shim refuses: it is already initialised.
    wizer.init_func(INIT_EXPORT).keep_init_func(true);
    let (cx, instrumented) = wizer
        .instrument_component(wasm)
        .map_err(anyhow::Error::from)
        .context("cannot prepare the guest for its snapshot")?;
    // The same shim instrumented the same way for every extension's image: compiled once.
    let key: [u8; 32] = Sha256::digest(&instrumented).into();
    let component = match cached(engine, cache_dir, &key) {
        Some(component) => component,
        None => {
            let compiled = Component::new(engine, &instrumented)
                .map_err(anyhow::Error::from)
                .context("cannot compile the guest for its snapshot")?;
            keep_compiled(compiled, cache_dir, engine, &key)
        }
    };
    let linker = init_linker(engine, &component)?;

    let started = Instant::now();
    let (sources, mut evaluate, sessions) = match modules {
        Some(m) => (Some(m.sources), m.evaluate, Some(m.sessions)),
        None => (None, Vec::new(), None),
    };
    let mut refused: Vec<(String, String)> = Vec::new();
    // Whether `evaluate` went through an attempt clean with the globals watched: then it is
    // evaluated once more unwatched, for the snapshot (the watching leaves garbage in it).
    let mut verified = false;
    let mut round = 0;
    loop {
        let watch = !verified;
        round += usize::from(watch);
        let attempt = Instant::now();
        let (mut store, instance) =
            initialised(engine, &linker, &component, sources.clone()).await?;
        let last = round >= MAX_ROUNDS || started.elapsed() > EVALUATION_BUDGET;
        let outcome = match &sessions {
            Some(sessions) => {
                evaluate_ahead(&mut store, instance, &evaluate, sessions, watch).await
            }
            None => Ok(Vec::new()),
        };
        let spoiled = match outcome {
            Ok(r) if r.is_empty() => None,
            Ok(r) => Some(r),
            // A trap (the time limit, a host import the prelude let through): nothing of this
            // attempt tells which module to leave out.
            Err(e) => Some(vec![(String::new(), format!("{e:#}"))]),
        };
        tracing::debug!(
            "snapshot attempt {round}{}: {} modules in {:.2}s, {} refused",
            if watch { "" } else { " (for the image)" },
            evaluate.len(),
            attempt.elapsed().as_secs_f64(),
            spoiled.as_ref().map_or(0, Vec::len)
        );
        if spoiled.is_none() && watch && !evaluate.is_empty() {
            verified = true;
            continue;
        }
        let Some(newly) = spoiled else {
            check_no_resources(&store)?;
            let image = wizer
                .snapshot_component(
                    &cx,
                    &mut Snapshotting {
                        store: &mut store,
                        instance,
                    },
                )
                .await
                .map_err(anyhow::Error::from)?;
            return Ok(Made {
                image,
                evaluated: evaluate.len(),
                refused,
            });
        };
        // Refused unwatched what went through watched: evaluation is not what it was; none.
        let trapped = newly.iter().any(|(id, _)| id.is_empty()) || !watch;
        if last || trapped {
            for id in evaluate.drain(..) {
                let reason = newly
                    .iter()
                    .find(|(refused, _)| refused.is_empty() || *refused == id)
                    .map(|(_, why)| why.clone())
                    .unwrap_or_else(|| "its evaluation was given up".into());
                refused.push((id, reason));
            }
        } else {
            evaluate.retain(|id| !newly.iter().any(|(refused, _)| refused == id));
            refused.extend(newly);
        }
    }
}

/// A linker with WASI, and pichamber's host interface trapping: initialisation must not need
/// the host, and whatever it asked for would not exist in the instances made from it.
fn init_linker(engine: &Engine, component: &Component) -> Result<Linker<InitState>> {
    let mut linker: Linker<InitState> = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(anyhow::Error::from)?;
    // (wasmtime's define_unknown_imports_as_traps would also shadow WASI's resources under
    // the guest's newer version names.)
    for (name, item) in component.component_type().imports(engine) {
        // The shim's own imports (hibernation's) are functions at the root.
        if let wasmtime::component::types::ComponentItem::ComponentFunc(_) = item.ty {
            let what = name.to_owned();
            linker
                .root()
                .func_new(name, move |_, _, _, _| {
                    wasmtime::bail!("{what} was called while pre-initialising")
                })
                .map_err(anyhow::Error::from)?;
            continue;
        }
        let wasmtime::component::types::ComponentItem::ComponentInstance(instance) = item.ty else {
            continue;
        };
        if name.starts_with("wasi:") {
            continue;
        }
        let mut defined = linker.instance(name).map_err(anyhow::Error::from)?;
        for (func, item) in instance.exports(engine) {
            if let wasmtime::component::types::ComponentItem::ComponentFunc(_) = item.ty {
                let what = format!("{name}#{func}");
                defined
                    .func_new(func, move |_, _, _, _| {
                        wasmtime::bail!("{what} was called while pre-initialising")
                    })
                    .map_err(anyhow::Error::from)?;
            }
        }
    }
    Ok(linker)
}

/// A fresh instance of the guest, pre-initialised and, with `modules`, those compiled in.
async fn initialised(
    engine: &Engine,
    linker: &Linker<InitState>,
    component: &Component,
    modules: Option<Vec<ModuleSource>>,
) -> Result<(Store<InitState>, Instance)> {
    let clock_reads = Arc::new(AtomicU64::new(0));
    let clock = FixedClock(clock_reads.clone());
    let state = InitState {
        // No grant, no environment; a fixed clock and seed make the snapshot reproducible.
        wasi: WasiCtxBuilder::new()
            .wall_clock(clock.clone())
            .monotonic_clock(clock)
            .secure_random(fixed_rng())
            .insecure_random(fixed_rng())
            .insecure_random_seed(0)
            .build(),
        table: ResourceTable::new(),
        limits: StoreLimitsBuilder::new()
            .memory_size(INIT_MEMORY_LIMIT)
            .instances(16)
            .trap_on_grow_failure(true)
            .build(),
        started: Instant::now(),
        clock_reads,
    };
    let mut store = Store::new(engine, state);
    store.limiter(|s| &mut s.limits);
    store.epoch_deadline_callback(|ctx| {
        if ctx.data().started.elapsed() > INIT_TIME_LIMIT {
            wasmtime::bail!("pre-initialisation ran for more than {INIT_TIME_LIMIT:?}")
        }
        Ok(UpdateDeadline::Yield(1))
    });
    store.set_epoch_deadline(1);

    let instance = linker
        .instantiate_async(&mut store, component)
        .await
        .map_err(anyhow::Error::from)
        .context("cannot instantiate the guest for its snapshot")?;
    let init = instance
        .get_typed_func::<(), (Result<(), String>,)>(&mut store, INIT_EXPORT)
        .map_err(anyhow::Error::from)?;
    let (outcome,) = init
        .call_async(&mut store, ())
        .await
        .map_err(anyhow::Error::from)
        .context("the guest trapped while pre-initialising")?;
    if let Err(message) = outcome {
        bail!("the guest could not pre-initialise: {message}");
    }
    if let Some(modules) = modules {
        let compile = instance
            .get_typed_func::<(Vec<ModuleSource>,), (Result<(), String>,)>(
                &mut store,
                COMPILE_EXPORT,
            )
            .map_err(anyhow::Error::from)?;
        let (outcome,) = compile
            .call_async(&mut store, (modules,))
            .await
            .map_err(anyhow::Error::from)
            .context("the guest trapped while compiling the extension's modules")?;
        if let Err(message) = outcome {
            bail!("the guest could not compile the extension's modules: {message}");
        }
    }
    Ok((store, instance))
}

/// The shim's refusal of a module evaluated ahead (guest-shim/wit/shim.wit).
#[derive(wasmtime::component::ComponentType, wasmtime::component::Lift)]
#[component(record)]
struct AheadRefusal {
    reason: String,
    implicated: Vec<String>,
}

/// Evaluates `ids` one by one; the modules refused (each with why), none when all went
/// through untouched. A module whose evaluation read the clock is refused here, where the
/// clock is.
async fn evaluate_ahead(
    store: &mut Store<InitState>,
    instance: Instance,
    ids: &[String],
    sessions: &AheadContext,
    watch_globals: bool,
) -> Result<Vec<(String, String)>> {
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let evaluate = instance
        .get_typed_func::<(&str, &AheadContext, bool), (Result<(), AheadRefusal>,)>(
            &mut *store,
            EVALUATE_EXPORT,
        )
        .map_err(anyhow::Error::from)?;
    let mut refused: Vec<(String, String)> = Vec::new();
    for id in ids {
        let reads = store.data().clock_reads.load(Ordering::Relaxed);
        let (outcome,) = evaluate
            .call_async(&mut *store, (id.as_str(), sessions, watch_globals))
            .await
            .map_err(anyhow::Error::from)
            .with_context(|| format!("the guest trapped evaluating {id}"))?;
        let read_clock = store.data().clock_reads.load(Ordering::Relaxed) != reads;
        let mut refuse = |id: &str, why: &str| {
            if ids.iter().any(|i| i == id) && !refused.iter().any(|(r, _)| r == id) {
                refused.push((id.to_owned(), why.to_owned()));
            }
        };
        match outcome {
            Err(refusal) => {
                refuse(id, &refusal.reason);
                for other in &refusal.implicated {
                    refuse(
                        other,
                        &format!("{} (while {id} was evaluated)", refusal.reason),
                    );
                }
            }
            Ok(()) if read_clock => refuse(id, "it read the clock"),
            Ok(()) => {}
        }
    }
    Ok(refused)
}

/// A handle the guest kept (a stream, a file) would name nothing in an instance made from the
/// snapshot, or worse, something else.
fn check_no_resources(store: &Store<InitState>) -> Result<()> {
    if !store.data().table.is_empty() {
        bail!(
            "the guest kept WASI resources open after pre-initialising; it cannot be snapshotted"
        );
    }
    Ok(())
}

/// 2026-01-01T00:00:00Z for the wall clock, zero for the monotonic one: QuickJS reads the
/// time as it starts (and `load` reseeds what it derived from it). Reads are counted.
#[derive(Clone)]
struct FixedClock(Arc<AtomicU64>);

impl wasmtime_wasi::HostWallClock for FixedClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
    fn now(&self) -> Duration {
        self.0.fetch_add(1, Ordering::Relaxed);
        Duration::from_secs(1_767_225_600)
    }
}

impl wasmtime_wasi::HostMonotonicClock for FixedClock {
    fn resolution(&self) -> u64 {
        1
    }
    fn now(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed);
        0
    }
}

fn fixed_rng() -> rand::rngs::StdRng {
    use rand::SeedableRng;
    rand::rngs::StdRng::seed_from_u64(0x5eed)
}

/// What wizer reads of the initialised instance (its memories and globals, through the
/// accessors it added when instrumenting), read through the component's exports.
struct Snapshotting<'a> {
    store: &'a mut Store<InitState>,
    instance: Instance,
}

impl Snapshotting<'_> {
    async fn call<R: Lift + Send + Sync + 'static>(&mut self, instance: &str, func: &str) -> R {
        let (_, exported) = self
            .instance
            .get_export(&mut *self.store, None, instance)
            .unwrap_or_else(|| panic!("the instrumented guest lacks {instance}"));
        let (_, func_index) = self
            .instance
            .get_export(&mut *self.store, Some(&exported), func)
            .unwrap_or_else(|| panic!("the instrumented guest lacks {instance}#{func}"));
        let typed = self
            .instance
            .get_typed_func::<(), (R,)>(&mut *self.store, func_index)
            .unwrap_or_else(|e| panic!("{instance}#{func}: {e}"));
        typed
            .call_async(&mut *self.store, ())
            .await
            .unwrap_or_else(|e| panic!("{instance}#{func}: {e}"))
            .0
    }
}

impl ComponentInstanceState for Snapshotting<'_> {
    async fn call_func_ret_list_u8(
        &mut self,
        instance: &str,
        func: &str,
        contents: impl FnOnce(&[u8]) + Send,
    ) {
        let list: WasmList<u8> = self.call(instance, func).await;
        contents(list.as_le_slice(&*self.store));
    }

    async fn call_func_ret_s32(&mut self, instance: &str, func: &str) -> i32 {
        self.call(instance, func).await
    }

    async fn call_func_ret_s64(&mut self, instance: &str, func: &str) -> i64 {
        self.call(instance, func).await
    }

    async fn call_func_ret_f32(&mut self, instance: &str, func: &str) -> u32 {
        self.call::<f32>(instance, func).await.to_bits()
    }

    async fn call_func_ret_f64(&mut self, instance: &str, func: &str) -> u64 {
        self.call::<f64>(instance, func).await.to_bits()
    }
}
