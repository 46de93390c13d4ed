//! Hibernation, the guest's side (the host's: host/runtime/src/hibernation.rs; the protocol:
//! wit/shim.wit). An idle instance's state is its memory (its only mutable global, the stack
//! pointer, is back at its start between calls): `freeze` hands the memory to the host, and
//! `thaw` writes what the host kept back into a fresh instance of the same image.
//!
//! Neither may touch what it moves. `freeze` sends the memory as it lies (an import's list
//! argument is read in place), and `thaw` takes the host's pieces in [`BUFFER`], a region
//! of its own that neither sends nor writes, through [`cabi_realloc`]: the heap, whose
//! allocator's state is among what is written back, is left alone.

use std::cell::{Cell, UnsafeCell};
use std::mem::ManuallyDrop;

use crate::bindings;

const PAGE: usize = 64 << 10;
/// The most bytes `thaw` takes from the host at once (the host splits its records to fit).
const BUFFER_BYTES: usize = 16 << 10;
/// The most bytes `freeze` hands over in one call.
const FREEZE_PIECE: usize = 1 << 20;

#[repr(C, align(16))]
struct Buffer {
    /// First, at the struct's alignment.
    bytes: UnsafeCell<[u8; BUFFER_BYTES]>,
    /// Set while `thaw` runs: [`cabi_realloc`] then hands out this buffer.
    active: Cell<bool>,
}

// SAFETY: the guest has one thread.
unsafe impl Sync for Buffer {}

static BUFFER: Buffer = Buffer {
    bytes: UnsafeCell::new([0; BUFFER_BYTES]),
    active: Cell::new(false),
};

unsafe extern "C" {
    // Placed by the linker around the stack (whether it lies first or after the data).
    static __stack_low: u8;
    static __stack_high: u8;
    /// wasi-libc: forgets the preopened folders (dropping their handles), which it fetches
    /// again when next asked for a path.
    fn __wasilibc_reset_preopens();
}

/// The ranges of memory that are not state: the unused first KiB, the stack (dead between
/// calls) and [`BUFFER`].
fn not_state() -> [(usize, usize); 3] {
    // Only the symbols' addresses are taken.
    let stack = (
        std::ptr::addr_of!(__stack_low) as usize,
        std::ptr::addr_of!(__stack_high) as usize,
    );
    let buffer = std::ptr::addr_of!(BUFFER) as usize;
    [
        (0, 1024),
        stack,
        (buffer, buffer + std::mem::size_of::<Buffer>()),
    ]
}

fn memory_bytes() -> usize {
    core::arch::wasm32::memory_size(0) * PAGE
}

/// Hands the memory to the host, but for [`not_state`]; its size in pages. Refused while
/// anything is pending.
pub fn freeze() -> Result<u32, String> {
    if !crate::engine::is_idle() {
        return Err("it has work pending (a job, timer, operation, program or worker)".into());
    }
    // A handle names nothing in the fresh instance that thaws: the C library's handles on the
    // granted folders go, and come again on its next use of a path. (Any other handle kept,
    // an open file, keeps the instance awake: the host checks after this.)
    // SAFETY: no path is being used (the guest is between calls).
    unsafe { __wasilibc_reset_preopens() };
    let end = memory_bytes();
    let mut skip = not_state();
    skip.sort_unstable();
    let mut at = 0;
    for (from, to) in skip.into_iter().chain([(end, end)]) {
        while at < from.min(end) {
            let len = (from.min(end) - at).min(FREEZE_PIECE);
            // SAFETY: [at, at + len) lies within the memory, all of it readable; nothing
            // writes it while the host copies it.
            let bytes = unsafe { std::slice::from_raw_parts(at as *const u8, len) };
            bindings::frozen_piece(at as u32, bytes);
            at += len;
        }
        at = at.max(to);
    }
    Ok((end / PAGE) as u32)
}

/// Writes the host's records into this fresh instance, after growing it to `memory_pages`.
pub fn thaw(memory_pages: u32) -> Result<(), String> {
    let have = core::arch::wasm32::memory_size(0);
    let want = memory_pages as usize;
    if want > have && core::arch::wasm32::memory_grow(0, want - have) == usize::MAX {
        return Err(format!("cannot grow the memory to {want} pages"));
    }
    BUFFER.active.set(true);
    let outcome = write_pieces();
    BUFFER.active.set(false);
    outcome
}

fn write_pieces() -> Result<(), String> {
    let end = memory_bytes();
    let skip = not_state();
    loop {
        // Lowered into BUFFER (see cabi_realloc), which is not the allocator's to free.
        let piece = ManuallyDrop::new(bindings::thawed_piece());
        if piece.is_empty() {
            return Ok(());
        }
        let mut rest: &[u8] = &piece;
        while !rest.is_empty() {
            let word = |at: usize| {
                rest.get(at..at + 4)
                    .map(|b| u32::from_le_bytes(b.try_into().expect("four bytes")) as usize)
            };
            let (Some(address), Some(len)) = (word(0), word(4)) else {
                return Err("a thawed piece ends inside a record's head".into());
            };
            let Some(bytes) = rest.get(8..8 + len) else {
                return Err("a thawed piece ends inside a record".into());
            };
            let to = address + len;
            if to > end
                || skip
                    .iter()
                    .any(|&(from, until)| address < until && from < to)
            {
                return Err(format!(
                    "a thawed record [{address:#x}, {to:#x}) lies outside the state"
                ));
            }
            // SAFETY: the range lies within the memory and outside the stack and BUFFER,
            // which hold everything this function uses.
            unsafe {
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), address as *mut u8, len);
            }
            rest = &rest[8 + len..];
        }
    }
}

/// The canonical ABI's allocator for what the host hands the guest: the C library's, but
/// while `thaw` runs, [`BUFFER`] (each piece replaces the last; the host sends at most
/// `BUFFER_BYTES` at once).
///
/// # Safety
///
/// Called by the component's glue with the canonical ABI's arguments.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn cabi_realloc(
    old: *mut u8,
    old_len: usize,
    align: usize,
    new_len: usize,
) -> *mut u8 {
    use std::alloc::{Layout, alloc, handle_alloc_error, realloc};
    if BUFFER.active.get() {
        if new_len > BUFFER_BYTES || align > 16 {
            core::arch::wasm32::unreachable();
        }
        return BUFFER.bytes.get().cast();
    }
    let Ok(layout) = Layout::from_size_align(new_len.max(old_len), align) else {
        core::arch::wasm32::unreachable();
    };
    let ptr = if old_len == 0 {
        if new_len == 0 {
            return align as *mut u8;
        }
        // SAFETY: a non-zero size.
        unsafe { alloc(Layout::from_size_align_unchecked(new_len, align)) }
    } else {
        // SAFETY: `old` was allocated by this function with `old_len` and `align`.
        unsafe {
            realloc(
                old,
                Layout::from_size_align_unchecked(old_len, align),
                new_len,
            )
        }
    };
    if ptr.is_null() {
        handle_alloc_error(layout);
    }
    ptr
}
