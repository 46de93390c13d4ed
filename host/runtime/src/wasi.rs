//! The WASI context of one instance: the granted trees and nothing else, and a clock and
//! randomness that can be made deterministic (`pichamber check`).

use std::time::Duration;

use anyhow::{Context, Result};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder};

use pichamber_access::Grants;

/// A guest whose clock starts at a fixed instant and whose randomness comes from a seed, so
/// the same run gives the same dates and the same "random" values on any machine (the prelude
/// seeds `Math.random` from the guest's random source).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Determinism {
    /// What `Date.now()` reads when the instance starts, in ms since the Unix epoch; it then
    /// advances in real time, so timers keep working.
    pub start_unix_ms: u64,
    pub seed: u64,
}

/// A wall clock that starts at a given instant.
struct StartedClock {
    start: Duration,
    began: std::time::Instant,
}

impl wasmtime_wasi::HostWallClock for StartedClock {
    fn resolution(&self) -> Duration {
        Duration::from_nanos(1)
    }
    fn now(&self) -> Duration {
        self.start + self.began.elapsed()
    }
}

/// The WASI context of one instance: the granted trees, nothing else (no stdin, no
/// inherited environment; guest stdout/stderr are discarded, console goes through the host).
pub fn wasi_ctx(grants: &Grants, determinism: Option<&Determinism>) -> Result<WasiCtx> {
    let mut builder = WasiCtxBuilder::new();
    if let Some(d) = determinism {
        use rand::SeedableRng;
        builder
            .wall_clock(StartedClock {
                start: Duration::from_millis(d.start_unix_ms),
                began: std::time::Instant::now(),
            })
            .secure_random(rand::rngs::StdRng::seed_from_u64(d.seed))
            .insecure_random(rand::rngs::StdRng::seed_from_u64(d.seed ^ 0x5eed))
            .insecure_random_seed(u128::from(d.seed));
    }
    for dir in &grants.write {
        let path = dir
            .canonicalize()
            .with_context(|| format!("--allow-write={}: cannot open", dir.display()))?;
        builder.preopened_dir(&path, path.to_string_lossy(), FsPerms::ReadWrite)?;
    }
    for dir in &grants.read {
        let path = dir
            .canonicalize()
            .with_context(|| format!("--allow-read={}: cannot open", dir.display()))?;
        if grants
            .write
            .iter()
            .any(|w| w.canonicalize().ok().as_ref() == Some(&path))
        {
            continue;
        }
        builder.preopened_dir(&path, path.to_string_lossy(), FsPerms::ReadOnly)?;
    }
    Ok(builder.build())
}
