//! The allocator's holes filled before a snapshot is taken.
//!
//! An image's heap has free chunks left by what ran before the snapshot. An instance made from
//! it would reuse them first, and a small object there copies the whole 4 KiB page it lies
//! in (the pages are the image's, shared until written). Filled, they leave every instance's
//! allocations to fresh memory past the image, where its objects sit together.

unsafe extern "C" {
    fn malloc(size: usize) -> *mut u8;
    fn free(ptr: *mut u8);
}

/// Larger than the free chunks a QuickJS heap keeps: a chunk this large comes from the top of
/// the heap (the free memory at its end), so its address is where the top begins. The first
/// call may grow the memory by this much; the top then stays at least this large.
const TOP_PROBE: usize = 256 << 10;

/// Allocates, and never frees, every free chunk below the top of the heap, largest sizes
/// first; the top itself stays free (it is where instances allocate). Called after each step
/// that may be the last before a snapshot, it fills only what the step left.
pub fn fill_holes() {
    // SAFETY: libc's malloc and free, used as documented; the probe is freed at once.
    let top = unsafe {
        let probe = malloc(TOP_PROBE);
        if probe.is_null() {
            return;
        }
        free(probe);
        probe as usize
    };
    let mut size = 64usize << 10;
    while size >= 8 {
        loop {
            let chunk = unsafe { malloc(size) };
            if chunk.is_null() {
                break;
            }
            if chunk as usize >= top {
                // From the top: no hole of this size is left.
                unsafe { free(chunk) };
                break;
            }
        }
        size /= 2;
    }
}
