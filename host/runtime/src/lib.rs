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
mod extension_host;
mod guest;
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

pub use extension_host::{ExtensionHost, FlagSpec, HostWork, SessionFacts, WorkDone};
pub use instance::{
    CallError, CommandStep, Dispatched, ExtensionInstance, InstanceOptions, MAX_FAILURES,
    ToolOutput, split_stack,
};
pub use operations::Operations;
pub use wasi::Determinism;

use pichamber_artifact::{Artifact, hex};

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
}

impl InstanceSlots {
    /// Memory kept mapped in a free slot, so that the next instance does not fault it in.
    const KEEP_RESIDENT: usize = 1 << 20;

    fn engine(self, mut config: Config) -> Result<Engine> {
        let InstanceSlots::Pooled(slots) = self else {
            return Ok(Engine::new(&config)?);
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
            .table_elements(1 << 16)
            .linear_memory_keep_resident(Self::KEEP_RESIDENT)
            .pagemap_scan(Enabled::Auto);
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

/// Says which limit an instantiation that found no free slot ran into.
pub(crate) fn explain_instantiation(e: anyhow::Error) -> String {
    if e.chain().any(|c| c.is::<PoolConcurrencyLimitError>()) {
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
    /// Prepared components by content hash: every extension built by one pichamber shares
    /// the same guest shim, so one compilation serves them all.
    prepared: Mutex<HashMap<[u8; 32], GuestPre>>,
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
        let mut config = Config::new();
        config.wasm_component_model(true);
        config.epoch_interruption(true);
        // Deep JS recursion must become a catchable error or a trap, never a host crash.
        config.max_wasm_stack(8 << 20);
        config.async_stack_size(10 << 20);
        let engine = slots.engine(config)?;
        start_epoch_ticker(engine.clone());

        let mut linker = Linker::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
        latest::Extension::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
        since_v0_1_0::Extension::add_to_linker::<_, HasSelf<_>>(&mut linker, |state| state)?;
        Ok(Self {
            engine,
            linker,
            cache_dir,
            prepared: Mutex::new(HashMap::new()),
        })
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The prepared component of an artifact, for the WIT version it was built with: from
    /// memory, from the on-disk cache (by the component's hash, without reading the component),
    /// or compiled, pre-initialised first when the shim offers it ([`snapshot`]).
    pub fn prepare(&self, artifact: &Artifact) -> Result<GuestPre> {
        let claimed = artifact.component_hash()?;
        if let Some(pre) = self.prepared.lock().unwrap().get(&claimed) {
            return Ok(pre.clone());
        }
        let (component, hash, pre_initialized) = if !snapshot::enabled() {
            self.cached_or_compiled(&claimed, artifact, false)?
        } else if let Some(component) = self.cached(&snapshot_key(&claimed)) {
            (component, claimed, true)
        } else {
            let bytes = artifact.component_bytes()?;
            let pre_initializable = snapshot::is_pre_initializable(&bytes);
            self.cached_or_compiled(&claimed, artifact, pre_initializable)?
        };
        let pre = self
            .linker
            .instantiate_pre(&component)
            .map_err(anyhow::Error::from)
            .context("the component does not match pichamber's WIT interface")?;
        let pre = GuestPre::new(&artifact.manifest.wit_version, pre, pre_initialized)?;
        self.prepared.lock().unwrap().insert(hash, pre.clone());
        Ok(pre)
    }

    /// The compiled code cached under `key`, if any.
    fn cached(&self, key: &[u8; 32]) -> Option<Component> {
        let path = self.cache_dir.as_ref()?.join(self.cache_name(key));
        if !path.is_file() {
            return None;
        }
        // SAFETY: files in our private cache are written by `Component::serialize` of an
        // engine with this configuration (the name includes the compatibility hash). Whatever
        // the artifact claims, the cached code is code we compiled from bytes with that hash.
        match unsafe { Component::deserialize_file(&self.engine, &path) } {
            Ok(component) => Some(component),
            Err(e) => {
                tracing::warn!("ignoring unusable cache entry {}: {e}", path.display());
                None
            }
        }
    }

    /// The component as built, from the cache or compiled; with `pre_initialize`, its
    /// snapshot compiled instead (the component as built when the snapshot fails).
    fn cached_or_compiled(
        &self,
        claimed: &[u8; 32],
        artifact: &Artifact,
        pre_initialize: bool,
    ) -> Result<(Component, [u8; 32], bool)> {
        if !pre_initialize && let Some(component) = self.cached(claimed) {
            return Ok((component, *claimed, false));
        }
        let bytes = artifact.component_bytes()?;
        let hash: [u8; 32] = Sha256::digest(&bytes).into();
        let image = pre_initialize
            .then(|| snapshot::pre_initialize(&self.engine, &bytes))
            .and_then(|made| {
                made.inspect_err(|e| tracing::warn!("{e:#}; instances start without it"))
                    .ok()
            });
        let pre_initialized = image.is_some();
        let (code, key) = match image {
            Some(image) => (Cow::Owned(image), snapshot_key(&hash)),
            None => (Cow::Borrowed(&bytes[..]), hash),
        };
        let component = Component::new(&self.engine, &code)?;
        if let Some(dir) = &self.cache_dir {
            let path = dir.join(self.cache_name(&key));
            let written = component
                .serialize()
                .map_err(anyhow::Error::from)
                .and_then(|b| Ok(write_cache(&path, &b)?));
            if let Err(e) = written {
                tracing::debug!("cannot write the compile cache {}: {e}", path.display());
            }
        }
        Ok((component, hash, pre_initialized))
    }

    /// Cache file name: the component hash and the engine's compatibility hash.
    fn cache_name(&self, component_hash: &[u8; 32]) -> String {
        let mut hasher = Sha256::new();
        hasher.update(component_hash);
        let mut compat = std::hash::DefaultHasher::new();
        std::hash::Hash::hash(&self.engine.precompile_compatibility_hash(), &mut compat);
        hasher.update(std::hash::Hasher::finish(&compat).to_le_bytes());
        format!("{}.cwasm", &hex(&hasher.finalize())[..32])
    }
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

fn write_cache(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(path.parent().unwrap())?;
    // Write-then-rename so a concurrent reader never sees half a file.
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(tmp, path)
}

/// `$PICHAMBER_CACHE_DIR`, else `$XDG_CACHE_HOME/pichamber`, else `~/.cache/pichamber`;
/// `PICHAMBER_CACHE_DIR=off` disables the cache.
pub fn default_cache_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("PICHAMBER_CACHE_DIR") {
        if dir == "off" {
            return None;
        }
        return Some(PathBuf::from(dir));
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("pichamber"))
}

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
    bindings: Bindings,
    pre_initialized: bool,
}

#[derive(Clone)]
enum Bindings {
    V0_1(since_v0_1_0::ExtensionPre<instance::ExtensionState>),
    Latest(latest::ExtensionPre<instance::ExtensionState>),
}

impl GuestPre {
    fn new(
        wit_version: &str,
        pre: InstancePre<instance::ExtensionState>,
        pre_initialized: bool,
    ) -> Result<Self> {
        let context =
            || format!("the component does not export pichamber's WIT {wit_version} interface");
        let bindings = match wit_version {
            "0.1.0" => Bindings::V0_1(
                since_v0_1_0::ExtensionPre::new(pre)
                    .map_err(anyhow::Error::from)
                    .with_context(context)?,
            ),
            // 0.2.0 is still taking additions, so an artifact from an earlier build of it may
            // lack one: rebuilding it from its sources is the cure.
            v if v == pichamber_artifact::WIT_VERSION => Bindings::Latest(
                latest::ExtensionPre::new(pre)
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
        Ok(Self {
            bindings,
            pre_initialized,
        })
    }

    /// Whether instances start from the guest's pre-initialised snapshot ([`snapshot`]).
    pub fn pre_initialized(&self) -> bool {
        self.pre_initialized
    }

    pub(crate) fn engine(&self) -> &Engine {
        match &self.bindings {
            Bindings::V0_1(pre) => pre.instance_pre().engine(),
            Bindings::Latest(pre) => pre.instance_pre().engine(),
        }
    }

    pub(crate) async fn instantiate(
        &self,
        store: &mut wasmtime::Store<instance::ExtensionState>,
    ) -> Result<Guest> {
        Ok(match &self.bindings {
            Bindings::V0_1(pre) => Guest::V0_1(pre.instantiate_async(store).await?),
            Bindings::Latest(pre) => Guest::Latest(pre.instantiate_async(store).await?),
        })
    }
}
