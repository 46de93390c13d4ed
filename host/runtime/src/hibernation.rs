//! Hibernation: an idle instance kept as what its memory holds that a fresh instance of its
//! image does not, its wasmtime instance and slot released; woken by writing that back into a
//! fresh instance on its next use ([`crate::ExtensionInstance::hibernate`]). QuickJS writes
//! reference counts into most objects it touches, so an idle session's memory differs from
//! the image on dozens of pages, but by a few bytes on each: what is kept is those bytes.
//!
//! The guest hands its memory over and writes it back itself (guest-shim/src/hibernation.rs;
//! the protocol is the shim's WIT world): a component's memory is not the host's to reach.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::Result;
use wasmtime::bail;
use wasmtime::component::{ComponentExportIndex, Linker, WasmList};

use crate::instance::ExtensionState;

/// The exports a shim that can hibernate has.
pub(crate) const FREEZE_EXPORT: &str = "freeze";
pub(crate) const THAW_EXPORT: &str = "thaw";

/// Compared, and kept, in pieces of this size: a difference is never longer.
const PAGE: usize = 4096;
/// The most `thawed-piece` answers at once (the guest's buffer).
const THAW_PIECE: usize = 16 << 10;
/// Differing runs closer than this are kept as one record (a record's head is 8 bytes).
const JOIN_GAP: usize = 16;

/// Where a component's hibernation exports are, found once for all its instances.
#[derive(Clone, Copy)]
pub(crate) struct Exports {
    pub freeze: ComponentExportIndex,
    pub thaw: ComponentExportIndex,
}

/// A fresh instance's memory, as its `freeze` hands it over (the ranges it skips are zero).
pub struct Baseline(Vec<u8>);

/// What a hibernating instance's memory holds that its image does not.
pub struct Frozen {
    /// The memory's size when it was frozen.
    pub pages: u32,
    /// Records: a little-endian u32 address, a u32 length, that many bytes.
    records: Vec<u8>,
}

impl Frozen {
    /// What the records take.
    pub fn bytes(&self) -> usize {
        self.records.len()
    }
}

/// Where an instance's memory is going while it freezes or thaws.
#[derive(Default)]
pub(crate) enum Transfer {
    #[default]
    None,
    /// A fresh instance's memory, read as the baseline.
    Reading {
        baseline: Vec<u8>,
        /// The instance's memory limit: no piece lies beyond it.
        limit: usize,
    },
    /// An idle instance's, compared with the baseline.
    Freezing {
        baseline: Arc<Baseline>,
        records: Vec<u8>,
        /// Where the last piece ended: pieces come in order, each once.
        next: usize,
        limit: usize,
    },
    /// Written back from `records`, `at` bytes of them sent.
    Thawing { records: Vec<u8>, at: usize },
}

impl Transfer {
    /// The records made by freezing.
    pub fn frozen(self, pages: u32) -> Option<Frozen> {
        match self {
            Transfer::Freezing { mut records, .. } => {
                // Kept for as long as it hibernates: no spare capacity.
                records.shrink_to_fit();
                Some(Frozen { pages, records })
            }
            _ => None,
        }
    }

    pub fn reading(limit: usize) -> Self {
        Transfer::Reading {
            baseline: Vec::new(),
            limit,
        }
    }

    pub fn freezing(baseline: Arc<Baseline>, limit: usize) -> Self {
        Transfer::Freezing {
            baseline,
            records: Vec::new(),
            next: 0,
            limit,
        }
    }

    pub fn baseline(self) -> Option<Baseline> {
        match self {
            Transfer::Reading { baseline, .. } => Some(Baseline(baseline)),
            _ => None,
        }
    }

    /// The records a thaw that never began was to send.
    pub fn unthawed(self, pages: u32) -> Option<Frozen> {
        match self {
            Transfer::Thawing { records, .. } => Some(Frozen { pages, records }),
            _ => None,
        }
    }

    pub fn thawing(frozen: Frozen) -> Self {
        Transfer::Thawing {
            records: frozen.records,
            at: 0,
        }
    }

    /// A piece of the guest's memory at `address`. Pieces come in order and within the
    /// memory limit, so a guest (a shim that is not pichamber's) can make the host hold no
    /// more than its own memory could.
    fn take(&mut self, address: usize, bytes: &[u8]) -> wasmtime::Result<()> {
        let end = address + bytes.len();
        let (next, limit) = match self {
            Transfer::Reading { baseline, limit } => (baseline.len(), *limit),
            Transfer::Freezing { next, limit, .. } => (*next, *limit),
            _ => bail!("frozen-piece was called outside a freeze"),
        };
        if address < next || end > limit {
            bail!(
                "frozen-piece: [{address:#x}, {end:#x}) is out of order or past the memory limit"
            );
        }
        match self {
            Transfer::Reading { baseline, .. } => {
                baseline.resize(end, 0);
                baseline[address..end].copy_from_slice(bytes);
            }
            Transfer::Freezing {
                baseline,
                records,
                next,
                ..
            } => {
                *next = end;
                for (i, page) in bytes.chunks(PAGE).enumerate() {
                    let at = address + i * PAGE;
                    let before = baseline.0.get(at..).unwrap_or_default();
                    let before = &before[..before.len().min(page.len())];
                    record_differences(at, page, before, records);
                }
            }
            _ => unreachable!("matched above"),
        }
        Ok(())
    }

    /// The next whole records that fit the guest's buffer; none when all were sent.
    fn give(&mut self) -> wasmtime::Result<Vec<u8>> {
        let Transfer::Thawing { records, at } = self else {
            bail!("thawed-piece was called outside a thaw");
        };
        let start = *at;
        let mut end = start;
        while end < records.len() {
            let len = u32::from_le_bytes(records[end + 4..end + 8].try_into()?) as usize;
            if end + 8 + len - start > THAW_PIECE {
                break;
            }
            end += 8 + len;
        }
        *at = end;
        Ok(records[start..end].to_vec())
    }
}

/// Appends a record for each run where `now` differs from `before` (read as zero where it is
/// shorter), runs closer than [`JOIN_GAP`] joined.
fn record_differences(address: usize, now: &[u8], before: &[u8], records: &mut Vec<u8>) {
    let was = |i: usize| before.get(i).copied().unwrap_or(0);
    if now.len() == before.len() && now == before {
        return;
    }
    let mut i = 0;
    while i < now.len() {
        if now[i] == was(i) {
            i += 1;
            continue;
        }
        let start = i;
        let mut end = i + 1;
        let mut j = end;
        while j < now.len() && j - end < JOIN_GAP {
            if now[j] != was(j) {
                end = j + 1;
            }
            j += 1;
        }
        records.extend_from_slice(&((address + start) as u32).to_le_bytes());
        records.extend_from_slice(&((end - start) as u32).to_le_bytes());
        records.extend_from_slice(&now[start..end]);
        i = end;
    }
}

/// Set when this process's slots are for sessions that hibernate
/// ([`crate::InstanceSlots::PooledHibernating`]): a full pool then asks for room, and an
/// image's first instance is read as its baseline before it loads (when the pool is full,
/// none could be had for it).
static HIBERNATES: AtomicBool = AtomicBool::new(false);
static ROOM_WANTED: tokio::sync::Notify = tokio::sync::Notify::const_new();
/// How often, and how long apart, an instantiation that found no slot tries again.
const ROOM_TRIES: u32 = 10;
const ROOM_WAIT: Duration = Duration::from_millis(20);

pub(crate) fn set_process_hibernates() {
    HIBERNATES.store(true, Ordering::Relaxed);
}

pub(crate) fn process_hibernates() -> bool {
    HIBERNATES.load(Ordering::Relaxed)
}

/// Notified when an instance wants a slot and every one is taken: the sessions waiting idle
/// then hibernate at once, not when their time is up ([`crate::InstanceSlots`]).
pub fn room_wanted() -> tokio::sync::futures::Notified<'static> {
    ROOM_WANTED.notified()
}

/// After an instantiation found every slot taken (its `tries`-th time): asks the idle
/// sessions for room and waits a little; whether to try again.
pub(crate) async fn room_made(tries: u32) -> bool {
    if !process_hibernates() || tries >= ROOM_TRIES {
        return false;
    }
    ROOM_WANTED.notify_waiters();
    tokio::time::sleep(ROOM_WAIT).await;
    true
}

/// Hands what hibernating instances freed back to the system, a second after the first of a
/// burst of hibernations (sessions opened together fall idle together): the allocator
/// otherwise keeps the freed chunks between live ones.
pub(crate) fn release_soon() {
    static SCHEDULED: AtomicBool = AtomicBool::new(false);
    if SCHEDULED.swap(true, Ordering::AcqRel) {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        SCHEDULED.store(false, Ordering::Release);
        return;
    };
    runtime.spawn(async {
        tokio::time::sleep(Duration::from_secs(1)).await;
        SCHEDULED.store(false, Ordering::Release);
        let _ = tokio::task::spawn_blocking(crate::release_freed_memory).await;
    });
}

/// The host's side of the shim's hibernation imports: no-ops for a guest without them.
pub(crate) fn add_to_linker(linker: &mut Linker<ExtensionState>) -> Result<()> {
    let mut root = linker.root();
    root.func_wrap(
        "frozen-piece",
        |mut store: wasmtime::StoreContextMut<'_, ExtensionState>,
         (address, bytes): (u32, WasmList<u8>)| {
            // Out of the store while the piece is read in place from the guest's memory.
            let mut transfer = std::mem::take(&mut store.data_mut().transfer);
            let taken = transfer.take(address as usize, bytes.as_le_slice(&store));
            store.data_mut().transfer = transfer;
            taken
        },
    )
    .map_err(anyhow::Error::from)?;
    root.func_wrap(
        "thawed-piece",
        |mut store: wasmtime::StoreContextMut<'_, ExtensionState>, (): ()| {
            let piece = store.data_mut().transfer.give()?;
            Ok((piece,))
        },
    )
    .map_err(anyhow::Error::from)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hibernation keeps memory only: the guest's state must be nothing else between calls.
    /// Its one mutable global may be the stack pointer, back at its start after every call.
    #[test]
    fn the_guest_keeps_no_state_in_globals_but_its_stack_pointer() {
        use wasmparser::{Parser, Payload};
        let shim = include_bytes!("../../assets/guest-shim.wasm");
        let mut mutable = Vec::new();
        let mut module = 0;
        for payload in Parser::new(0).parse_all(shim) {
            match payload.unwrap() {
                Payload::ModuleSection { .. } => module += 1,
                Payload::GlobalSection(globals) => {
                    for global in globals {
                        if global.unwrap().ty.mutable {
                            mutable.push(module);
                        }
                    }
                }
                _ => {}
            }
        }
        assert_eq!(mutable.len(), 1, "mutable globals in modules {mutable:?}");
    }

    fn records_of(address: usize, now: &[u8], before: &[u8]) -> Vec<(usize, Vec<u8>)> {
        let mut records = Vec::new();
        record_differences(address, now, before, &mut records);
        let mut out = Vec::new();
        let mut at = 0;
        while at < records.len() {
            let word = |i: usize| u32::from_le_bytes(records[i..i + 4].try_into().unwrap());
            let (addr, len) = (word(at) as usize, word(at + 4) as usize);
            out.push((addr, records[at + 8..at + 8 + len].to_vec()));
            at += 8 + len;
        }
        out
    }

    #[test]
    fn only_the_bytes_that_differ_are_kept_and_near_runs_join() {
        let before = vec![7u8; 100];
        let mut now = before.clone();
        now[3] = 1;
        now[5] = 2; // within the gap: one record from 3 to 5
        now[60] = 9; // far: a record of its own
        assert_eq!(
            records_of(1000, &now, &before),
            vec![(1003, vec![1, 7, 2]), (1060, vec![9])]
        );
        assert!(records_of(0, &before, &before).is_empty());
    }

    #[test]
    fn memory_beyond_the_baseline_is_compared_with_zero() {
        let now = [0u8, 0, 5, 0];
        assert_eq!(records_of(64, &now, &[]), vec![(66, vec![5])]);
        assert_eq!(records_of(64, &now, &[0, 0]), vec![(66, vec![5])]);
    }

    #[test]
    fn thawed_pieces_hold_whole_records_and_fit_the_guest_buffer() {
        let mut records = Vec::new();
        for i in 0..10 {
            record_differences(i * PAGE, &[1u8; PAGE], &[0u8; PAGE], &mut records);
        }
        let mut transfer = Transfer::Thawing {
            records: records.clone(),
            at: 0,
        };
        let mut joined = Vec::new();
        loop {
            let piece = transfer.give().unwrap();
            if piece.is_empty() {
                break;
            }
            assert!(piece.len() <= THAW_PIECE);
            joined.extend(piece);
        }
        assert_eq!(joined, records);
    }
}
