//! Pre-initialised guests: a guest shim that exports `pre-initialize` is run up to the point
//! where QuickJS, its host bindings and every module the shim carries are compiled, and that
//! memory becomes the component's initial image (wasmtime-wizer). An instance then starts from
//! it, a copy-on-write mapping, instead of building it again in every session. That image
//! depends on no extension and no session, and is made once per shim.
//!
//! An extension's own image goes one step further: `pre-compile` also compiles its modules
//! (not evaluating them: a module's top level may read the session's environment, clock or
//! grants) and puts its package files in place, so that a session neither copies nor parses
//! them again, and their compiled code is pages shared by every instance. It costs a
//! compilation of the whole component per extension, so a process makes it only for an
//! extension it instantiates more than once (a second session), in the background; the
//! sessions before it start from the shim's image. Its load context and factory still run per
//! instance (`load`).
//!
//! Both are kept in the compile cache beside compiled code. The component comes from an
//! artifact, which is untrusted: its initialisation runs in a store as bounded as an
//! instance's (memory, time), with WASI but no grant, and every pichamber import traps.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use wasmtime::component::{Component, Instance, Lift, Linker, ResourceTable, WasmList};
use wasmtime::{Engine, Store, StoreLimits, StoreLimitsBuilder, UpdateDeadline};
use wasmtime_wasi::{WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wizer::{ComponentInstanceState, Wizer};

use crate::wit::ModuleSource;

/// The shim's export that builds the shared state (guest-shim/wit/shim.wit).
pub const INIT_EXPORT: &str = "pre-initialize";
/// The shim's export that compiles an extension's modules into it.
pub const COMPILE_EXPORT: &str = "pre-compile";
/// Bounds of the initialisation run.
const INIT_MEMORY_LIMIT: usize = 256 << 20;
const INIT_TIME_LIMIT: Duration = Duration::from_secs(30);

/// Which snapshots instances start from, by `PICHAMBER_PREINIT`: unset, the shim's and, for an
/// extension instantiated twice, its own; `shim`, only the shim's; `off`, none (every guest
/// as built, initialising in each instance: the benchmarks' baseline); `extension`, the
/// extension's own made at its first instance, before it starts (what tests use to see it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Off,
    Shim,
    Extension,
    ExtensionNow,
}

impl Mode {
    pub fn extension_images(self) -> bool {
        matches!(self, Mode::Extension | Mode::ExtensionNow)
    }

    /// At which instance of an extension its own image is made.
    pub fn extension_image_after(self) -> u32 {
        match self {
            Mode::ExtensionNow => 1,
            _ => 2,
        }
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
        Ok(other) => {
            tracing::warn!(
                "PICHAMBER_PREINIT={other:?} is not one of off, shim or extension; \
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

/// The component with its initialisation already run: its memory and globals as they were
/// when `pre-initialize` returned, or with `modules`, when `pre-compile` then returned.
pub fn pre_initialize(component: &[u8], modules: Option<Vec<ModuleSource>>) -> Result<Vec<u8>> {
    // An engine of its own, allocating on demand: the run takes none of the instance slots a
    // process's sessions count on (an extension's image is made while they run).
    let engine = Engine::new(&crate::engine_config())?;
    crate::start_epoch_ticker(engine.clone());
    let component = component.to_vec();
    // wasmtime-wasi's async host functions want a tokio runtime; the caller may be inside one
    // (a session being opened), so the run gets a thread and a runtime of its own.
    std::thread::Builder::new()
        .name("pichamber-snapshot".into())
        .spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(run(&engine, &component, modules))
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
}

impl WasiView for InitState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

async fn run(engine: &Engine, wasm: &[u8], modules: Option<Vec<ModuleSource>>) -> Result<Vec<u8>> {
    let mut wizer = Wizer::new();
    // The export stays (wizer's component rewrite cannot drop it without leaving its core
    // function unexported); called again, the shim refuses: it is already initialised.
    wizer.init_func(INIT_EXPORT).keep_init_func(true);
    let (cx, instrumented) = wizer
        .instrument_component(wasm)
        .map_err(anyhow::Error::from)
        .context("cannot prepare the guest for its snapshot")?;
    let component = Component::new(engine, &instrumented)
        .map_err(anyhow::Error::from)
        .context("cannot compile the guest for its snapshot")?;

    let mut linker: Linker<InitState> = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(anyhow::Error::from)?;
    // pichamber's host interface traps: initialisation must not need the host, and whatever
    // it asked for would not exist in the instances made from it. (wasmtime's
    // define_unknown_imports_as_traps would also shadow WASI's resources under the guest's
    // newer version names.)
    for (name, item) in component.component_type().imports(engine) {
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

    let state = InitState {
        // No grant, no environment; a fixed clock and seed make the snapshot reproducible.
        wasi: WasiCtxBuilder::new()
            .wall_clock(FixedClock)
            .monotonic_clock(FixedClock)
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
        .instantiate_async(&mut store, &component)
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
    // A handle the guest kept (a stream, a file) would name nothing in an instance made from
    // the snapshot, or worse, something else.
    if !store.data().table.is_empty() {
        bail!(
            "the guest kept WASI resources open after pre-initialising; it cannot be snapshotted"
        );
    }

    let snapshot = wizer
        .snapshot_component(
            &cx,
            &mut Snapshotting {
                store: &mut store,
                instance,
            },
        )
        .await
        .map_err(anyhow::Error::from)?;
    Ok(snapshot)
}

/// 2026-01-01T00:00:00Z for the wall clock, zero for the monotonic one: QuickJS reads the
/// time as it starts (and `load` reseeds what it derived from it).
struct FixedClock;

impl wasmtime_wasi::HostWallClock for FixedClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
    fn now(&self) -> Duration {
        Duration::from_secs(1_767_225_600)
    }
}

impl wasmtime_wasi::HostMonotonicClock for FixedClock {
    fn resolution(&self) -> u64 {
        1
    }
    fn now(&self) -> u64 {
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
