//! Cranelift's per-function cache, kept on disk beside the compile cache. Every image pichamber
//! compiles is the same guest shim's code with other memory (the shim's snapshot, each
//! extension's own): with the functions compiled for one kept, compiling the next finds
//! nearly all of them here and only translates and hashes them, instead of optimising and
//! emitting each again.
//!
//! Read when a compilation asks (most processes compile nothing), written back after one
//! added to it and let go of then. One file for all, replaced whole (write-then-rename), so a
//! reader never sees half of one; two processes compiling at once keep the last one's. Past
//! its budget it keeps only what the process writing it used: the functions of another
//! pichamber's shim (Cranelift's keys include its version) go when they are no longer used.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use wasmtime::CacheStore;

/// The file's first bytes; another layout gets another name.
const MAGIC: &[u8] = b"pichamber function cache 1\n";
const FILE_NAME: &str = "functions-1.bin";
/// What the file may hold before unused functions go: one guest shim's take about 16 MiB.
const BUDGET: usize = 64 << 20;
/// Cranelift's keys are hashes of this length.
const KEY_LEN: usize = 32;

#[derive(Debug)]
pub(crate) struct FunctionCache {
    path: PathBuf,
    budget: usize,
    entries: RwLock<Option<Entries>>,
}

#[derive(Debug, Default)]
struct Entries {
    map: HashMap<[u8; KEY_LEN], Compiled>,
    bytes: usize,
    /// Added since the file was read or written.
    added: usize,
    hits: AtomicUsize,
    misses: AtomicUsize,
}

#[derive(Debug)]
struct Compiled {
    code: Vec<u8>,
    /// Found or added by this process.
    used: AtomicBool,
}

impl FunctionCache {
    /// The cache of `dir`, one per folder per process (a process's engines share it).
    pub(crate) fn of(dir: &Path) -> Arc<FunctionCache> {
        static CACHES: OnceLock<Mutex<HashMap<PathBuf, Arc<FunctionCache>>>> = OnceLock::new();
        CACHES
            .get_or_init(Mutex::default)
            .lock()
            .unwrap()
            .entry(dir.to_path_buf())
            .or_insert_with(|| Arc::new(FunctionCache::new(dir, BUDGET)))
            .clone()
    }

    fn new(dir: &Path, budget: usize) -> FunctionCache {
        FunctionCache {
            path: dir.join(FILE_NAME),
            budget,
            entries: RwLock::new(None),
        }
    }

    /// Writes the cache back when a compilation added to it, and lets go of it: a process
    /// that compiles now and then (`serve` making images) holds none of it in between. A
    /// cache that cannot be written costs the next compilation its time, nothing else.
    pub(crate) fn save(&self) {
        let taken = self.entries.write().unwrap().take();
        let Some(mut entries) = taken.filter(|e| e.added > 0) else {
            return;
        };
        if entries.bytes > self.budget {
            entries.map.retain(|_, c| c.used.load(Ordering::Relaxed));
            entries.bytes = entries.map.values().map(|c| KEY_LEN + c.code.len()).sum();
        }
        tracing::debug!(
            "function cache: {} of {} reused, {} added, {} in all ({} KiB)",
            entries.hits.load(Ordering::Relaxed),
            entries.hits.load(Ordering::Relaxed) + entries.misses.load(Ordering::Relaxed),
            entries.added,
            entries.map.len(),
            entries.bytes >> 10
        );
        if let Err(e) = write(&self.path, &entries.map) {
            tracing::debug!("cannot write {}: {e}", self.path.display());
        }
    }

    /// Lookups that found their function and that did not, since the file was read.
    #[cfg(test)]
    fn lookups(&self) -> (usize, usize) {
        let guard = self.entries.read().unwrap();
        guard.as_ref().map_or((0, 0), |e| {
            (
                e.hits.load(Ordering::Relaxed),
                e.misses.load(Ordering::Relaxed),
            )
        })
    }

    fn load(&self) {
        if self.entries.read().unwrap().is_some() {
            return;
        }
        let mut guard = self.entries.write().unwrap();
        if guard.is_none() {
            *guard = Some(read(&self.path).unwrap_or_default());
        }
    }
}

impl CacheStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        self.load();
        let guard = self.entries.read().unwrap();
        let entries = guard.as_ref()?;
        let Some(found) = entries.map.get(key) else {
            entries.misses.fetch_add(1, Ordering::Relaxed);
            return None;
        };
        entries.hits.fetch_add(1, Ordering::Relaxed);
        found.used.store(true, Ordering::Relaxed);
        Some(Cow::Owned(found.code.clone()))
    }

    fn insert(&self, key: &[u8], value: Vec<u8>) -> bool {
        let Ok(key) = <[u8; KEY_LEN]>::try_from(key) else {
            return false;
        };
        self.load();
        let mut guard = self.entries.write().unwrap();
        let Some(entries) = guard.as_mut() else {
            return false;
        };
        entries.bytes += KEY_LEN + value.len();
        let compiled = Compiled {
            code: value,
            used: AtomicBool::new(true),
        };
        if let Some(old) = entries.map.insert(key, compiled) {
            entries.bytes -= KEY_LEN + old.code.len();
        }
        entries.added += 1;
        true
    }
}

/// The file's entries; nothing (a fresh cache) when it is missing, of another layout or cut
/// short. Cranelift checks what it reads back against the function it compiles.
fn read(path: &Path) -> Option<Entries> {
    let bytes = std::fs::read(path).ok()?;
    let mut rest = bytes.strip_prefix(MAGIC)?;
    let mut entries = Entries::default();
    while !rest.is_empty() {
        let key: [u8; KEY_LEN] = rest.get(..KEY_LEN)?.try_into().ok()?;
        let len = u32::from_le_bytes(rest.get(KEY_LEN..KEY_LEN + 4)?.try_into().ok()?) as usize;
        let value = rest.get(KEY_LEN + 4..KEY_LEN + 4 + len)?;
        entries.bytes += KEY_LEN + len;
        let compiled = Compiled {
            code: value.to_vec(),
            used: AtomicBool::new(false),
        };
        entries.map.insert(key, compiled);
        rest = &rest[KEY_LEN + 4 + len..];
    }
    Some(entries)
}

fn write(path: &Path, map: &HashMap<[u8; KEY_LEN], Compiled>) -> std::io::Result<()> {
    std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut out = BufWriter::new(std::fs::File::create(&tmp)?);
    out.write_all(MAGIC)?;
    for (key, compiled) in map {
        out.write_all(key)?;
        out.write_all(&(compiled.code.len() as u32).to_le_bytes())?;
        out.write_all(&compiled.code)?;
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()?;
    std::fs::rename(tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_survive_the_process_and_a_damaged_file_is_a_fresh_cache() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FunctionCache::of(dir.path());
        assert!(cache.get(&[1; KEY_LEN]).is_none());
        assert!(cache.insert(&[1; KEY_LEN], b"one".to_vec()));
        assert!(cache.insert(&[2; KEY_LEN], b"two".to_vec()));
        assert!(!cache.insert(b"short", b"refused".to_vec()));
        cache.save();

        let path = dir.path().join(FILE_NAME);
        let entries = read(&path).unwrap();
        assert_eq!(entries.map.len(), 2);
        assert_eq!(entries.map[&[2; KEY_LEN]].code, b"two");

        let mut cut = std::fs::read(&path).unwrap();
        cut.truncate(cut.len() - 1);
        std::fs::write(&path, &cut).unwrap();
        assert!(read(&path).is_none());
        std::fs::write(&path, b"something else").unwrap();
        assert!(read(&path).is_none());
    }

    #[test]
    fn past_its_budget_the_file_keeps_what_the_last_process_used() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE_NAME);
        let first = FunctionCache::new(dir.path(), 100);
        first.insert(&[1; KEY_LEN], vec![1; 40]);
        first.insert(&[2; KEY_LEN], vec![2; 40]);
        first.save();
        assert_eq!(read(&path).unwrap().map.len(), 2);

        // The next process uses one of them and adds a third: over the budget, the unused
        // one goes.
        let next = FunctionCache::new(dir.path(), 100);
        assert!(next.get(&[2; KEY_LEN]).is_some());
        next.insert(&[3; KEY_LEN], vec![3; 40]);
        next.save();
        let mut kept: Vec<u8> = read(&path).unwrap().map.keys().map(|k| k[0]).collect();
        kept.sort();
        assert_eq!(kept, [2, 3]);
    }

    #[test]
    fn a_second_compilation_of_the_same_code_reuses_its_functions() {
        let dir = tempfile::tempdir().unwrap();
        // Two functions that do some arithmetic, and a data segment: modules that differ in
        // memory only, as the images of one shim do.
        let module = |data: &[u8]| {
            use wasm_encoder::*;
            let mut m = Module::new();
            let mut types = TypeSection::new();
            types.ty().function([ValType::I32], [ValType::I32]);
            m.section(&types);
            let mut functions = FunctionSection::new();
            functions.function(0).function(0);
            m.section(&functions);
            let mut memories = MemorySection::new();
            memories.memory(MemoryType {
                minimum: 1,
                maximum: None,
                memory64: false,
                shared: false,
                page_size_log2: None,
            });
            m.section(&memories);
            let mut exports = ExportSection::new();
            exports
                .export("f", ExportKind::Func, 0)
                .export("g", ExportKind::Func, 1);
            m.section(&exports);
            let mut code = CodeSection::new();
            let mut f = Function::new([]);
            f.instructions()
                .local_get(0)
                .i32_load(MemArg {
                    offset: 0,
                    align: 2,
                    memory_index: 0,
                })
                .local_get(0)
                .i32_add()
                .end();
            code.function(&f);
            let mut g = Function::new([]);
            g.instructions().local_get(0).i32_const(7).i32_mul().end();
            code.function(&g);
            m.section(&code);
            let mut segments = DataSection::new();
            segments.active(0, &ConstExpr::i32_const(0), data.iter().copied());
            m.section(&segments);
            m.finish()
        };
        let engine = || {
            let mut config = wasmtime::Config::new();
            config
                .enable_incremental_compilation(FunctionCache::of(dir.path()))
                .unwrap();
            wasmtime::Engine::new(&config).unwrap()
        };
        wasmtime::Module::new(&engine(), module(b"first")).unwrap();
        let (hits, misses) = FunctionCache::of(dir.path()).lookups();
        assert!(
            misses >= 2,
            "the two functions at least were compiled: {misses}"
        );
        // Saving lets go of the entries: the next compilation reads them back from the file,
        // as another process would.
        FunctionCache::of(dir.path()).save();
        assert_eq!(FunctionCache::of(dir.path()).lookups(), (0, 0));
        wasmtime::Module::new(&engine(), module(b"other memory")).unwrap();
        // As many lookups, each found but at most one: run beside the other tests, one of the
        // eight functions compiled now and then has another key than the first compilation
        // gave it (seen in 4 of 16 runs), misses, and is compiled again: that costs its time.
        let (found, missed) = FunctionCache::of(dir.path()).lookups();
        assert_eq!(found + missed, hits + misses);
        assert!(missed <= 1, "{missed} of {} compiled again", found + missed);
    }
}
