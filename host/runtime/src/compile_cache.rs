//! The compile cache on disk: compiled components (the shim's, its snapshots, extensions'
//! images) as `Component::serialize` wrote them, one file per key, named with the engine's
//! compatibility hash so another wasmtime never reads them. Each new pichamber, and each
//! change to an extension, adds entries of 9 to 35 MB: past a budget the least recently used
//! go, so the folder does not grow for ever.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

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
        Ok(component) => {
            mark_used(&path);
            Some(component)
        }
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
    crate::function_cache::FunctionCache::of(dir).save();
    let kept = match written {
        Ok(()) => {
            prune(dir, cache_budget(), &path);
            cached(engine, Some(dir), key).unwrap_or(component)
        }
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

/// What the compile cache may hold before the least recently used entries go:
/// `$PICHAMBER_CACHE_MAX_MB` MiB, else [`DEFAULT_CACHE_BUDGET`].
pub fn cache_budget() -> u64 {
    let Ok(text) = std::env::var("PICHAMBER_CACHE_MAX_MB") else {
        return DEFAULT_CACHE_BUDGET;
    };
    match text.trim().parse::<u64>() {
        Ok(mb) => mb.saturating_mul(1 << 20),
        Err(_) => {
            tracing::warn!(
                "PICHAMBER_CACHE_MAX_MB={text:?} is not a whole number of MiB; the cache keeps its default budget of {} MiB",
                DEFAULT_CACHE_BUDGET >> 20
            );
            DEFAULT_CACHE_BUDGET
        }
    }
}

/// 1 GiB: some thirty images of a large package, a hundred of a small one.
pub const DEFAULT_CACHE_BUDGET: u64 = 1 << 30;

/// An entry's modification time says when it was last used: a hit older than this renews it
/// (one write per entry per hour at most, not one per start).
const RENEW_AFTER: Duration = Duration::from_secs(3600);

/// A half-written entry this old belongs to a writer that died.
const ABANDONED_AFTER: Duration = Duration::from_secs(3600);

/// Marks a cache hit as a use, so pruning keeps what is in use.
fn mark_used(path: &Path) {
    let stale = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age > RENEW_AFTER);
    if stale
        && let Err(e) = std::fs::File::options()
            .write(true)
            .open(path)
            .and_then(|f| f.set_modified(SystemTime::now()))
    {
        tracing::debug!("cannot renew the cache entry {}: {e}", path.display());
    }
}

/// Removes the least recently used compiled entries until the cache holds at most `budget`
/// bytes (never `keep`, the entry just written), and half-written files of writers that
/// died. Only the cache's own files are touched (`*.cwasm`, `*.tmpPID`), nothing else in the
/// folder. A running process that maps a removed entry keeps its pages.
pub fn prune(dir: &Path, budget: u64, keep: &Path) {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<(SystemTime, u64, PathBuf)> = Vec::new();
    for entry in listing.flatten() {
        let path = entry.path();
        let Ok(meta) = entry.metadata() else { continue };
        if !meta.is_file() {
            continue;
        }
        let modified = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
        match cache_file(&path) {
            Some(CacheFile::Written) if modified.elapsed().is_ok_and(|a| a > ABANDONED_AFTER) => {
                remove(&path);
            }
            Some(CacheFile::Entry) if path != keep => entries.push((modified, meta.len(), path)),
            _ => {}
        }
    }
    let kept = std::fs::metadata(keep).map_or(0, |m| m.len());
    let mut total: u64 = kept + entries.iter().map(|(_, len, _)| len).sum::<u64>();
    entries.sort();
    for (_, len, path) in entries {
        if total <= budget {
            break;
        }
        if remove(&path) {
            total -= len;
        }
    }
}

enum CacheFile {
    /// `HASH.cwasm`, as [`cache_name`] names it.
    Entry,
    /// `HASH.tmpPID`, being written by process PID (see [`write_cache`]).
    Written,
}

/// Which of the cache's own files `path` is, by its name: nothing else in the folder is
/// ever removed.
fn cache_file(path: &Path) -> Option<CacheFile> {
    let name = path.file_name()?.to_str()?;
    let (stem, extension) = name.split_once('.')?;
    if stem.len() != 32 || !stem.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    match extension.strip_prefix("tmp") {
        Some(pid) if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) => {
            Some(CacheFile::Written)
        }
        _ if extension == "cwasm" => Some(CacheFile::Entry),
        _ => None,
    }
}

fn remove(path: &Path) -> bool {
    match std::fs::remove_file(path) {
        Ok(()) => {
            tracing::debug!("compile cache: removed {}", path.display());
            true
        }
        // Another process pruned it first: gone all the same.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => true,
        Err(e) => {
            tracing::debug!("compile cache: cannot remove {}: {e}", path.display());
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A file of `len` bytes last modified `age` ago.
    fn file(dir: &Path, name: &str, len: usize, age: Duration) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, vec![0u8; len]).unwrap();
        let file = std::fs::File::options().write(true).open(&path).unwrap();
        file.set_modified(SystemTime::now() - age).unwrap();
        path
    }

    const HOUR: Duration = Duration::from_secs(3600);

    /// A name as [`cache_name`] makes them, with `extension`.
    fn named(n: u8, extension: &str) -> String {
        format!("{}.{extension}", format!("{n:x}").repeat(32))
    }

    #[test]
    fn the_least_recently_used_entries_go_until_the_cache_fits() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let oldest = file(d, &named(1, "cwasm"), 400, 30 * HOUR);
        let old = file(d, &named(2, "cwasm"), 400, 20 * HOUR);
        let recent = file(d, &named(3, "cwasm"), 400, HOUR);
        let written = file(d, &named(4, "cwasm"), 400, Duration::ZERO);
        // Not the cache's: left alone whatever their age.
        std::fs::create_dir(d.join("tools")).unwrap();
        let other = file(d, "notes.txt", 4000, 100 * HOUR);
        let lookalike = file(d, "mine.cwasm", 4000, 100 * HOUR);
        // A writer that died an hour and more ago, and one writing now.
        let abandoned = file(d, &named(5, "tmp4242"), 400, 2 * HOUR);
        let writing = file(d, &named(6, "tmp4343"), 400, Duration::ZERO);

        prune(d, 1000, &written);
        assert!(!oldest.exists() && !old.exists());
        assert!(recent.exists() && written.exists());
        assert!(other.exists() && lookalike.exists() && d.join("tools").is_dir());
        assert!(!abandoned.exists() && writing.exists());

        // The entry just written stays even when it alone is over the budget.
        prune(d, 100, &written);
        assert!(!recent.exists() && written.exists());
    }

    #[test]
    fn a_hit_renews_an_entry_once_it_is_an_hour_old() {
        let dir = tempfile::tempdir().unwrap();
        let stale = file(dir.path(), "a.cwasm", 10, 2 * HOUR);
        let fresh = file(dir.path(), "b.cwasm", 10, Duration::from_secs(60));
        let before = std::fs::metadata(&fresh).unwrap().modified().unwrap();
        mark_used(&stale);
        mark_used(&fresh);
        let age = |p: &Path| {
            std::fs::metadata(p)
                .unwrap()
                .modified()
                .unwrap()
                .elapsed()
                .unwrap()
        };
        assert!(age(&stale) < Duration::from_secs(60));
        assert_eq!(
            std::fs::metadata(&fresh).unwrap().modified().unwrap(),
            before
        );
    }
}
