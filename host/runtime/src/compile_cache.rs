//! The compile cache on disk: compiled components (the shim's, its snapshots, extensions'
//! images) as `Component::serialize` wrote them, one file per key, named with the engine's
//! compatibility hash so another wasmtime never reads them.

use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use crate::release_freed_memory;
use pichamber_artifact::hex;

/// The compiled code cached under `key`, if any.
pub(crate) fn cached(
    engine: &Engine,
    cache_dir: Option<&Path>,
    key: &[u8; 32],
) -> Option<Component> {
    let path = cache_dir?.join(cache_name(engine, key));
    if !path.is_file() {
        return None;
    }
    // SAFETY: files in our private cache are written by `Component::serialize` of an
    // engine with this configuration (the name includes the compatibility hash). Whatever
    // the artifact claims, the cached code is code we compiled from bytes with that hash.
    match unsafe { Component::deserialize_file(engine, &path) } {
        Ok(component) => Some(component),
        Err(e) => {
            tracing::warn!("ignoring unusable cache entry {}: {e}", path.display());
            None
        }
    }
}

/// Writes freshly compiled code to the cache and returns it as read back from there: mapped
/// from the file, its pages are the page cache's, shared and reclaimable, where the compiled
/// copy is the process's own anonymous memory (about 55 MiB for the guest shim, measured in
/// `serve`). Without a cache, or when writing fails, the compiled copy.
pub(crate) fn keep_compiled(
    component: Component,
    cache_dir: Option<&Path>,
    engine: &Engine,
    key: &[u8; 32],
) -> Component {
    let Some(dir) = cache_dir else {
        return component;
    };
    let path = dir.join(cache_name(engine, key));
    let written = component
        .serialize()
        .map_err(anyhow::Error::from)
        .and_then(|b| Ok(write_cache(&path, &b)?));
    let kept = match written {
        Ok(()) => cached(engine, Some(dir), key).unwrap_or(component),
        Err(e) => {
            tracing::debug!("cannot write the compile cache {}: {e}", path.display());
            component
        }
    };
    release_freed_memory();
    kept
}

/// Cache file name: the key and the engine's compatibility hash.
fn cache_name(engine: &Engine, key: &[u8; 32]) -> String {
    let mut hasher = Sha256::new();
    hasher.update(key);
    let mut compat = std::hash::DefaultHasher::new();
    std::hash::Hash::hash(&engine.precompile_compatibility_hash(), &mut compat);
    hasher.update(std::hash::Hasher::finish(&compat).to_le_bytes());
    format!("{}.cwasm", &hex(&hasher.finalize())[..32])
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
