//! The wasmtime side: one `Engine` per process, components compiled once and cached on disk by
//! content hash, an `InstancePre` per extension, one instance per session, and the host half of
//! the `pichamber:extension` WIT interface. Every value an extension sends is checked here
//! (names, JSON, sizes, volume budgets, deadlines); a trap stops only its instance.
//!
//! It does not know sessions exist: what an instance needs from the session it runs in (report
//! an error, register a tool, append an entry, ask a dialog, run a program) is the
//! [`ExtensionHost`] trait, which the session implements, as wasmtime-wasi's `WasiView` states
//! what WASI needs of a store.

pub mod boundary;
mod compile_cache;
mod extension_host;
mod function_cache;
mod guest;
mod hibernation;
mod host_api;
mod instance;
mod limits;
mod operations;
mod programs;
pub mod schema_cost;
mod since_v0_1_0;
pub mod snapshot;
pub mod ui;
mod wasi;
mod workers;

use std::borrow::Cow;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::component::InstancePre;
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{
    Config, Enabled, Engine, InstanceAllocationStrategy, PoolConcurrencyLimitError,
    PoolingAllocationConfig,
};

pub use compile_cache::default_cache_dir;
use compile_cache::{cached, keep_compiled};
pub use extension_host::{ExtensionHost, FlagSpec, HostWork, SessionFacts, WorkDone};
pub use hibernation::room_wanted;
pub use instance::{
    CallError, CommandStep, Dispatched, ExtensionInstance, InstanceOptions, MAX_FAILURES,
    ToolOutput, Unstarted, split_stack,
};
pub use operations::Operations;
pub use wasi::Determinism;

use pichamber_artifact::Artifact;

/// The newest WIT (wit/v0.2.0): what the host implements (`host_api`) and calls (`guest`).
/// Each older version has an adapter module (`since_v0_1_0`) that forwards to it.
mod latest {
    wasmtime::component::bindgen!({
        path: "../../wit/v0.2.0",
        world: "extension",
        imports: {
            "pichamber:extension/host.wait": async | trappable,
            default: trappable,
        },
        exports: { default: async },
    });
}

pub use self::latest::pichamber::extension::types as wit;
pub use guest::Guest;

/// How often the epoch advances; per-call deadlines are measured in these ticks.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

static SLOTS: OnceLock<InstanceSlots> = OnceLock::new();

/// Where instances get their memory, tables and stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstanceSlots {
    /// Mapped for each instance and unmapped after it: nothing reserved up front, for
    /// commands that start one session and end.
    OnDemand,
    /// A pool of this many slots reserved at start and reused (`rpc`, `serve`): a slot keeps
    /// the guest's snapshot mapped, and a new instance in it finds the pages the last one
    /// wrote already reset to the snapshot (only those pages, found by the kernel's
    /// PAGEMAP_SCAN where it has it), instead of mapping memory and faulting every page in
    /// again; tests/bench/session_rpc.py measures the difference.
    Pooled(u32),
    /// A pool for sessions that hibernate (`serve`'s `hibernate_after`). Its freed slots keep
    /// nothing resident: a slot is then mostly freed by a session that hibernates, and what
    /// it kept would stay the server's memory until another instance happened to take it.
    /// An instance that finds every slot taken asks the idle sessions to hibernate now
    /// ([`hibernation::room_wanted`]) and tries again, so the slots bound the sessions awake,
    /// not those open.
    PooledHibernating(u32),
}

impl InstanceSlots {
    /// Memory kept mapped in a free slot, its written pages copied back from the snapshot,
    /// so that the next instance does not fault them in again: enough for the snapshot and
    /// what an instance grows beyond it. With 1 MiB, every page a session wrote past it was
    /// unmapped and faulted in again by the next (in `rpc`, 7 faults more per `new_session` and
    /// 760-830 ms of CPU for 3,000 of them instead of 645-705 ms, `perf stat`).
    const KEEP_RESIDENT: usize = 4 << 20;
    /// Elements of the largest table an instance may have.
    const TABLE_ELEMENTS: usize = 1 << 16;
    /// The same for tables (their written pages zeroed): all of the largest, pointers each.
    const TABLE_KEEP_RESIDENT: usize = Self::TABLE_ELEMENTS * 8;

    fn engine(self, mut config: Config) -> Result<Engine> {
        let (slots, keep_resident, table_keep_resident) = match self {
            InstanceSlots::OnDemand => return Ok(Engine::new(&config)?),
            InstanceSlots::Pooled(slots) => (slots, Self::KEEP_RESIDENT, Self::TABLE_KEEP_RESIDENT),
            InstanceSlots::PooledHibernating(slots) => {
                // A freed stack's pages are handed back too (else they stay resident).
                config.async_stack_zeroing(true);
                hibernation::set_process_hibernates();
                (slots, 0, 0)
            }
        };
        // The guest shim is one component of a few core instances, one memory and a few
        // tables; each worker is an instance of its own.
        let mut pool = PoolingAllocationConfig::default();
        pool.total_component_instances(slots)
            .total_core_instances(slots * 8)
            .total_memories(slots)
            .total_tables(slots * 4)
            .total_stacks(slots)
            .max_core_instances_per_component(16)
            .max_memories_per_component(2)
            .max_tables_per_component(8)
            .max_memory_size(4 << 30)
            .table_elements(Self::TABLE_ELEMENTS)
            .linear_memory_keep_resident(keep_resident)
            .table_keep_resident(table_keep_resident)
            .pagemap_scan(if swap_is_active() {
                Enabled::No
            } else {
                Enabled::Auto
            });
        let on_demand = config.clone();
        config.allocation_strategy(InstanceAllocationStrategy::Pooling(pool));
        // The pool reserves address space (4 GiB per memory) that a process limit
        // (`ulimit -v`) may refuse; instances then map their own, as one-shot commands do.
        match Engine::new(&config) {
            Ok(engine) => Ok(engine),
            Err(e) => {
                tracing::warn!(
                    "cannot reserve {slots} instance slots ({e:#}); each instance maps its own memory"
                );
                Ok(Engine::new(&on_demand)?)
            }
        }
    }
}

/// Whether the kernel may swap memory out, which makes wasmtime 48.0.8's PAGEMAP_SCAN reset
/// unsafe: it copies back only the written pages that are present, so a written page that
/// was swapped out stays as the last instance left it, and the next session of the same
/// extension in that slot reads it (a leak between sessions, users in `serve`). wasmtime
/// 48.0.11 also resets swapped pages, but the registry here lacks its companion crates. With
/// swap, slots are reset without the scan: their first `KEEP_RESIDENT` bytes copied back
/// whole, the rest unmapped. Checked once, when the engine is made: swap turned on later
/// is seen at the next start.
fn swap_is_active() -> bool {
    let active =
        std::fs::read_to_string("/proc/swaps").map_or(true, |swaps| lists_a_swap_area(&swaps));
    if active {
        tracing::info!(
            "swap is on (or /proc/swaps unreadable): freed instance slots are copied back whole, \
             not only their written pages, so no session reads a swapped-out page of another"
        );
    }
    active
}

/// `/proc/swaps` lists an area beneath its header.
fn lists_a_swap_area(swaps: &str) -> bool {
    swaps.lines().skip(1).any(|line| !line.trim().is_empty())
}

/// An instantiation found every slot of the pool taken.
fn is_pool_full(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.is::<PoolConcurrencyLimitError>())
}

/// Says which limit an instantiation that found no free slot ran into.
pub(crate) fn explain_instantiation(e: anyhow::Error) -> String {
    if is_pool_full(&e) {
        return format!(
            "cannot instantiate: every instance slot of this process is in use ({e}); \
             close a session first (`serve` holds as many as `max_instances` in its config)"
        );
    }
    format!("cannot instantiate: {e:#}")
}

/// The process-wide wasmtime engine and linker.
pub struct Runtime {
    engine: Engine,
    linker: Linker<instance::ExtensionState>,
    cache_dir: Option<PathBuf>,
    /// Prepared components by the hash of what they start from: the guest shim's image, which
    /// every extension built by one pichamber shares (one compilation serves them all), or an
    /// extension's own image ([`snapshot`]).
    prepared: Arc<Mutex<HashMap<[u8; 32], GuestPre>>>,
    /// Extensions' own images: how far each has come.
    extension_images: Arc<Mutex<HashMap<[u8; 32], ExtensionImage>>>,
}

/// Where an extension's own image is: prepared ones are in `Runtime::prepared`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ExtensionImage {
    /// Instantiated this many times from the shim's image.
    Used(u32),
    Building,
    /// Its shim cannot make one, or making it failed (said once, in the log).
    Unavailable,
}

/// What an instance's memory starts as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartImage {
    /// The component as built: QuickJS starts in every instance.
    AsBuilt,
    /// The shim's snapshot: QuickJS, the prelude and shared modules ready.
    Shim,
    /// The extension's own snapshot: that and its modules compiled.
    Extension,
}

impl Runtime {
    /// Chooses how the shared runtime allocates instances; only before its first use.
    pub fn use_instance_slots(slots: InstanceSlots) -> Result<()> {
        SLOTS
            .set(slots)
            .map_err(|_| anyhow::anyhow!("the runtime's instance slots are chosen once"))
    }

    /// The shared runtime (created on first use; compiled code is shared by every session).
    pub fn global() -> Result<Arc<Runtime>> {
        static RUNTIME: OnceLock<Arc<Runtime>> = OnceLock::new();
        if let Some(r) = RUNTIME.get() {
            return Ok(r.clone());
        }
        let slots = SLOTS.get().copied().unwrap_or(InstanceSlots::OnDemand);
        let runtime = Arc::new(Runtime::new(default_cache_dir(), slots)?);
        Ok(RUNTIME.get_or_init(|| runtime).clone())
    }

    pub fn new(cache_dir: Option<PathBuf>, slots: InstanceSlots) -> Result<Self> {
        let engine = slots.engine(engine_config(cache_dir.as_deref()))?;
        start_epoch_ticker(engine.clone());

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        latest::Extension::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
        since_v0_1_0::Extension::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
        hibernation::add_to_linker(&mut linker)?;
        Ok(Self {
            engine,
            linker,
            cache_dir,
            prepared: Arc::default(),
            extension_images: Arc::default(),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The prepared component of an artifact, for the WIT version it was built with, starting
    /// from the best image at hand ([`snapshot`]): the extension's own when it is ready (in
    /// memory or the on-disk cache), else the shim's (from memory, the cache, or compiled,
    /// pre-initialised first when the shim offers it). An extension instantiated a second
    /// time in this process gets its own image made in the background, for the sessions after
    /// that are like this one (`session`).
    pub fn prepare(&self, artifact: &Artifact, session: &ImageFor) -> Result<GuestPre> {
        self.prepare_as(artifact, session, true)
    }

    /// What an instance of the artifact would start from now, without counting a use.
    pub fn start_image(&self, artifact: &Artifact, session: &ImageFor) -> Result<StartImage> {
        self.prepare_as(artifact, session, false)
            .map(|pre| pre.image())
    }

    fn prepare_as(
        &self,
        artifact: &Artifact,
        session: &ImageFor,
        counted: bool,
    ) -> Result<GuestPre> {
        let claimed = artifact.component_hash()?;
        let mode = snapshot::mode();
        if mode.extension_images()
            && let Some(pre) = self.extension_image(artifact, &claimed, session, mode, counted)?
        {
            return Ok(pre);
        }
        if let Some(pre) = self.prepared.lock().unwrap().get(&claimed) {
            return Ok(pre.clone());
        }
        let (component, hash, image) = if mode == snapshot::Mode::Off {
            self.cached_or_compiled(&claimed, artifact, false)?
        } else if let Some(component) = self.cached(&snapshot_key(&claimed)) {
            (component, claimed, StartImage::Shim)
        } else {
            let bytes = artifact.component_bytes()?;
            let offers = snapshot::Offers::of(&bytes);
            self.cached_or_compiled(&claimed, artifact, offers.pre_initialize)?
        };
        let pre = guest_pre(&self.linker, artifact, &component, image)?;
        self.prepared.lock().unwrap().insert(hash, pre.clone());
        Ok(pre)
    }

    /// The extension's own image when it is ready; otherwise, when `counted`, counts the use,
    /// and starts making it at the second (in the background, or here when `mode` says so).
    fn extension_image(
        &self,
        artifact: &Artifact,
        component_hash: &[u8; 32],
        session: &ImageFor,
        mode: snapshot::Mode,
        counted: bool,
    ) -> Result<Option<GuestPre>> {
        let manifest = &artifact.manifest;
        let entries: Vec<&str> = std::iter::once(manifest.entry.as_str())
            .chain(manifest.extensions.iter().map(String::as_str))
            .collect();
        let mut granted_env = session.granted_env.clone();
        granted_env.sort();
        granted_env.dedup();
        let sessions = snapshot::AheadContext {
            granted_env,
            pi_version: session.pi_version.clone(),
            extension_name: manifest.name.clone(),
        };
        let key = extension_snapshot_key(
            component_hash,
            &artifact.modules.digest(),
            &entries,
            &sessions,
            mode.evaluates(),
        );
        if let Some(pre) = self.prepared.lock().unwrap().get(&key) {
            return Ok(Some(pre.clone()));
        }
        if !counted {
            return Ok(None);
        }
        // Decided under the lock, done outside it: every session's start takes this lock, and
        // reading a cached image maps and checks tens of megabytes.
        let uses = {
            let mut images = self.extension_images.lock().unwrap();
            let state = images.entry(key).or_insert(ExtensionImage::Used(0));
            match *state {
                ExtensionImage::Used(n) => {
                    *state = ExtensionImage::Used(n + 1);
                    n
                }
                ExtensionImage::Building | ExtensionImage::Unavailable => return Ok(None),
            }
        };
        if uses == 0
            && let Some(component) = self.cached(&key)
        {
            let pre = guest_pre(&self.linker, artifact, &component, StartImage::Extension)?;
            self.prepared.lock().unwrap().insert(key, pre.clone());
            return Ok(Some(pre));
        }
        if uses + 1 < mode.extension_image_after() {
            return Ok(None);
        }
        // One session starts making it, unless the cache had it after all.
        match self.extension_images.lock().unwrap().get_mut(&key) {
            Some(state @ ExtensionImage::Used(_)) => *state = ExtensionImage::Building,
            _ => return Ok(None),
        }
        if let Some(pre) = self.prepared.lock().unwrap().get(&key) {
            return Ok(Some(pre.clone()));
        }
        let maker = ImageMaker {
            engine: self.engine.clone(),
            linker: self.linker.clone(),
            cache_dir: self.cache_dir.clone(),
            prepared: self.prepared.clone(),
            images: self.extension_images.clone(),
            key,
            component_hash: *component_hash,
            artifact: artifact.clone(),
            sessions,
            evaluates: mode.evaluates(),
        };
        if mode == snapshot::Mode::ExtensionNow {
            return Ok(maker.make());
        }
        std::thread::Builder::new()
            .name("pichamber-image".into())
            .spawn(move || {
                maker.make();
            })?;
        Ok(None)
    }

    /// The compiled code cached under `key`, if any.
    fn cached(&self, key: &[u8; 32]) -> Option<Component> {
        cached(&self.engine, self.cache_dir.as_deref(), key)
    }

    /// The component as built, from the cache or compiled; with `pre_initialize`, its
    /// snapshot compiled instead (the component as built when the snapshot fails).
    fn cached_or_compiled(
        &self,
        claimed: &[u8; 32],
        artifact: &Artifact,
        pre_initialize: bool,
    ) -> Result<(Component, [u8; 32], StartImage)> {
        if !pre_initialize && let Some(component) = self.cached(claimed) {
            return Ok((component, *claimed, StartImage::AsBuilt));
        }
        let bytes = artifact.component_bytes()?;
        let hash: [u8; 32] = Sha256::digest(&bytes).into();
        let image = pre_initialize
            .then(|| snapshot::pre_initialize(&bytes, None, self.cache_dir.as_deref()))
            .and_then(|made| {
                made.inspect_err(|e| tracing::warn!("{e:#}; instances start without it"))
                    .ok()
            })
            .map(|made| made.image);
        let (code, key, start) = match image {
            Some(image) => (Cow::Owned(image), snapshot_key(&hash), StartImage::Shim),
            None => (Cow::Borrowed(&bytes[..]), hash, StartImage::AsBuilt),
        };
        let compiled = Component::new(&self.engine, &code)?;
        let component = keep_compiled(compiled, self.cache_dir.as_deref(), &self.engine, &key);
        Ok((component, hash, start))
    }
}

/// Makes an extension's own image: the shim pre-initialised with the extension's modules
/// compiled in, compiled, cached on disk and prepared for the sessions that follow.
struct ImageMaker {
    engine: Engine,
    linker: Linker<instance::ExtensionState>,
    cache_dir: Option<PathBuf>,
    prepared: Arc<Mutex<HashMap<[u8; 32], GuestPre>>>,
    images: Arc<Mutex<HashMap<[u8; 32], ExtensionImage>>>,
    key: [u8; 32],
    /// The component's hash as the artifact claims it, which `key` was made of.
    component_hash: [u8; 32],
    artifact: Artifact,
    /// What the sessions it is for share, which its modules' top level may read.
    sessions: snapshot::AheadContext,
    /// Whether it holds the modules evaluated (or only compiled).
    evaluates: bool,
}

impl ImageMaker {
    fn make(self) -> Option<GuestPre> {
        let name = &self.artifact.manifest.name;
        let made = self.try_make();
        release_freed_memory();
        match made {
            Ok(Some(pre)) => {
                tracing::info!("{name}: new instances start from the extension's own snapshot");
                self.prepared.lock().unwrap().insert(self.key, pre.clone());
                Some(pre)
            }
            outcome => {
                if let Err(e) = outcome {
                    tracing::warn!(
                        "{name}: cannot make the extension's own snapshot ({e:#}); instances \
                         start from the guest's"
                    );
                }
                self.images
                    .lock()
                    .unwrap()
                    .insert(self.key, ExtensionImage::Unavailable);
                None
            }
        }
    }

    /// `None` when the shim offers no such image (one built before it could).
    fn try_make(&self) -> Result<Option<GuestPre>> {
        let bytes = self.artifact.component_bytes()?;
        // The image is kept under the claimed hash, where any artifact with these modules
        // and that claim finds it: it must be made of the component so named, or one
        // artifact's lie would be another's code.
        if Sha256::digest(&bytes)[..] != self.component_hash[..] {
            anyhow::bail!("the component is not the one its manifest's componentHash names");
        }
        let offers = snapshot::Offers::of(&bytes);
        if !(offers.pre_initialize && offers.pre_compile) {
            return Ok(None);
        }
        let sources = self
            .artifact
            .modules
            .iter()
            .map(|m| wit::ModuleSource {
                id: m.id.clone(),
                source: m.source.clone(),
            })
            .collect();
        let evaluate = if offers.pre_evaluate && self.evaluates {
            evaluation_order(&self.artifact)
        } else {
            Vec::new()
        };
        let candidates = evaluate.len();
        let made = snapshot::pre_initialize(
            &bytes,
            Some(snapshot::ExtensionModules {
                sources,
                evaluate,
                sessions: self.sessions.clone(),
            }),
            self.cache_dir.as_deref(),
        )?;
        let name = &self.artifact.manifest.name;
        tracing::info!(
            "{name}: {} of {candidates} modules evaluated into the extension's snapshot; the rest \
             run in each instance",
            made.evaluated
        );
        for (id, why) in &made.refused {
            tracing::debug!("{name}: {id} runs in each instance: {why}");
        }
        let compiled = Component::new(&self.engine, &made.image)?;
        let component = keep_compiled(compiled, self.cache_dir.as_deref(), &self.engine, &self.key);
        guest_pre(
            &self.linker,
            &self.artifact,
            &component,
            StartImage::Extension,
        )
        .map(Some)
    }
}

/// What the sessions an extension's image is made for share: those that start from it. Its
/// modules' top level may read these; what differs between sessions (values of variables,
/// the cwd, the clock) it may not.
#[derive(Clone, Debug, Default)]
pub struct ImageFor {
    /// Names of the environment variables the sessions are granted.
    pub granted_env: Vec<String>,
    /// The pi release they follow, as pi numbers it.
    pub pi_version: String,
}

/// The modules an extension's image evaluates, in order: its entries as `load` imports them,
/// then the rest (those a session would import later, or never) as the artifact lists them.
/// Package files are not modules, and a CommonJS body only defines the function that runs it.
fn evaluation_order(artifact: &Artifact) -> Vec<String> {
    let manifest = &artifact.manifest;
    let mut order: Vec<String> = std::iter::once(&manifest.entry)
        .chain(&manifest.extensions)
        .cloned()
        .collect();
    order.dedup();
    for module in artifact.modules.iter() {
        let id = &module.id;
        if id.starts_with(pichamber_artifact::package_files::FILE_ID_PREFIX) || order.contains(id) {
            continue;
        }
        order.push(id.clone());
    }
    order
}

/// Hands the memory a compilation freed back to the system: the allocator keeps it otherwise
/// (about 65 MiB after an extension's image, measured in `serve`), for a process that may run
/// for months. Also after instances hibernate ([`hibernation::release_soon`]).
fn release_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free memory of the allocator to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A compiled component ready to instantiate for an artifact's WIT version.
fn guest_pre(
    linker: &Linker<instance::ExtensionState>,
    artifact: &Artifact,
    component: &Component,
    image: StartImage,
) -> Result<GuestPre> {
    let pre = linker
        .instantiate_pre(component)
        .map_err(anyhow::Error::from)
        .context("the component does not match pichamber's WIT interface")?;
    GuestPre::new(&artifact.manifest.wit_version, pre, image)
}

/// The cache key of an extension's own snapshot: the shim's and the modules' (as read here,
/// not as the artifact claims them) hashes, the entries and what its sessions share.
fn extension_snapshot_key(
    component_hash: &[u8; 32],
    modules_digest: &[u8; 32],
    entries: &[&str],
    sessions: &snapshot::AheadContext,
    evaluated: bool,
) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(b"pichamber extension snapshot 3\0");
    hasher.update(component_hash);
    hasher.update(modules_digest);
    // The modules evaluated, and so the image, follow from the entries' order.
    for entry in entries {
        hasher.update(entry.as_bytes());
        hasher.update(b"\0");
    }
    // And from what its sessions share: the variables granted (names, never values), the pi
    // release and the extension's name.
    hasher.update(b"\x01");
    for name in &sessions.granted_env {
        hasher.update(name.as_bytes());
        hasher.update(b"\0");
    }
    hasher.update(b"\x01");
    hasher.update(sessions.pi_version.as_bytes());
    hasher.update(b"\0");
    hasher.update(sessions.extension_name.as_bytes());
    hasher.update([u8::from(evaluated)]);
    hasher.finalize().into()
}

/// The cache key of a component's pre-initialised snapshot. The snapshot's content follows
/// from the component's (its initialisation is deterministic), so the component's hash names
/// it; the version changes when what pre-initialisation keeps does.
fn snapshot_key(component_hash: &[u8; 32]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(b"pichamber pre-initialised snapshot 1\0");
    hasher.update(component_hash);
    hasher.finalize().into()
}

/// The engine's settings, but for how instances are allocated; with a cache folder,
/// compilations reuse the functions earlier ones compiled ([`function_cache`]).
fn engine_config(cache_dir: Option<&Path>) -> Config {
    let mut config = Config::new();
    if let Some(dir) = cache_dir
        && let Err(e) =
            config.enable_incremental_compilation(function_cache::FunctionCache::of(dir))
    {
        tracing::debug!("compilations cannot reuse functions: {e:#}");
    }
    config.wasm_component_model(true);
    config.epoch_interruption(true);
    // Deep JS recursion must become a catchable error or a trap, never a host crash.
    config.max_wasm_stack(8 << 20);
    config.async_stack_size(10 << 20);
    // For profiling the guest with `perf`: the compiled functions' names in /tmp/perf-PID.map.
    if std::env::var_os("PICHAMBER_PERF_MAP").is_some() {
        config.profiler(wasmtime::ProfilingStrategy::PerfMap);
    }
    config
}

/// Advances `engine`'s epoch every [`EPOCH_TICK`] until the engine is dropped.
fn start_epoch_ticker(engine: Engine) {
    let weak = engine.weak();
    std::thread::Builder::new()
        .name("pichamber-epoch".into())
        .spawn(move || {
            while let Some(engine) = weak.upgrade() {
                drop(engine);
                std::thread::sleep(EPOCH_TICK);
                match weak.upgrade() {
                    Some(e) => e.increment_epoch(),
                    None => break,
                }
            }
        })
        .expect("spawn the epoch ticker");
}

/// A component ready to instantiate, with the bindings of the WIT version it was built with.
#[derive(Clone)]
pub struct GuestPre {
    pre: InstancePre<instance::ExtensionState>,
    bindings: Bindings,
    image: StartImage,
    /// Where its shim's hibernation exports are, when it has them.
    hibernation: Option<hibernation::Exports>,
    /// A fresh instance's memory, read when the first of its instances hibernates.
    baseline: Arc<tokio::sync::OnceCell<Arc<hibernation::Baseline>>>,
}

/// Where the exports of the WIT version's world are, found once.
#[derive(Clone)]
enum Bindings {
    V0_1(since_v0_1_0::ExtensionIndices),
    Latest(latest::ExtensionIndices),
}

impl GuestPre {
    fn new(
        wit_version: &str,
        pre: InstancePre<instance::ExtensionState>,
        image: StartImage,
    ) -> Result<Self> {
        let context =
            || format!("the component does not export pichamber's WIT {wit_version} interface");
        let bindings = match wit_version {
            "0.1.0" => Bindings::V0_1(
                since_v0_1_0::ExtensionIndices::new(&pre)
                    .map_err(anyhow::Error::from)
                    .with_context(context)?,
            ),
            // 0.2.0 is still taking additions, so an artifact from an earlier build of it may
            // lack one: rebuilding it from its sources is the cure.
            v if v == pichamber_artifact::WIT_VERSION => Bindings::Latest(
                latest::ExtensionIndices::new(&pre)
                    .map_err(anyhow::Error::from)
                    .with_context(|| {
                        format!(
                            "{}; an artifact built by an earlier pichamber at WIT {v} needs \
                             rebuilding from its sources (pichamber build SOURCE)",
                            context()
                        )
                    })?,
            ),
            // The artifact reader refuses versions not in pichamber_artifact::WIT_VERSIONS.
            other => anyhow::bail!("no bindings for WIT {other}"),
        };
        let export = |name| pre.component().get_export_index(None, name);
        let hibernation = match (
            export(hibernation::FREEZE_EXPORT),
            export(hibernation::THAW_EXPORT),
        ) {
            (Some(freeze), Some(thaw)) => Some(hibernation::Exports { freeze, thaw }),
            _ => None,
        };
        Ok(Self {
            pre,
            bindings,
            image,
            hibernation,
            baseline: Arc::default(),
        })
    }

    pub(crate) fn hibernation(&self) -> Option<hibernation::Exports> {
        self.hibernation
    }

    pub(crate) fn baseline(&self) -> &tokio::sync::OnceCell<Arc<hibernation::Baseline>> {
        &self.baseline
    }

    /// What instances' memory starts as ([`snapshot`]).
    pub fn image(&self) -> StartImage {
        self.image
    }

    pub(crate) fn engine(&self) -> &Engine {
        self.pre.engine()
    }

    /// An instance in `store`: its bindings, and the instance for exports beyond them.
    pub(crate) async fn instantiate(
        &self,
        store: &mut wasmtime::Store<instance::ExtensionState>,
    ) -> Result<(Guest, wasmtime::component::Instance)> {
        let mut tries = 0;
        let instance = loop {
            match self.pre.instantiate_async(&mut *store).await {
                Ok(instance) => break instance,
                Err(e) => {
                    let e = anyhow::Error::from(e);
                    if !is_pool_full(&e) || !hibernation::room_made(tries).await {
                        return Err(e);
                    }
                    tries += 1;
                }
            }
        };
        let guest = match &self.bindings {
            Bindings::V0_1(indices) => Guest::V0_1(indices.load(&mut *store, &instance)?),
            Bindings::Latest(indices) => Guest::Latest(indices.load(&mut *store, &instance)?),
        };
        Ok((guest, instance))
    }
}

#[cfg(test)]
mod tests {
    use super::lists_a_swap_area;

    #[test]
    fn an_active_swap_area_is_seen_under_the_header() {
        let header = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n";
        assert!(!lists_a_swap_area(header));
        assert!(!lists_a_swap_area(""));
        assert!(lists_a_swap_area(&format!(
            "{header}/dev/zram0                              partition\t8388604\t\t0\t\t100\n"
        )));
        assert!(lists_a_swap_area(&format!(
            "{header}/swapfile                               file\t\t2097148\t\t512\t\t-2\n"
        )));
    }
}
