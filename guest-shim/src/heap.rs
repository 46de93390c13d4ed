//! The allocator's holes filled before a snapshot is taken.
//!
//! An image's heap has free chunks left by what ran before the snapshot. An instance made from
//! it would reuse them first, and a small object there copies the whole 4 KiB page it lies
//! in (the pages are the image's, shared until written). Filled, they leave every instance's
//! allocations to fresh memory past the image, where its objects sit together.

unsafe extern "C" {
    fn sbrk(increment: isize) -> *mut u8;
    fn malloc(size: usize) -> *mut u8;
    fn free(ptr: *mut u8);
}

/// Allocates, and never frees, every free chunk below the heap's current end, largest sizes
/// first. Returns how many bytes that took.
pub fn fill_holes() -> usize {
    // SAFETY: sbrk(0) only reads the break; malloc and free are libc's, used as documented.
    let end = unsafe { sbrk(0) } as usize;
    let mut filled = 0;
    // At most a wasm page past the end: growing the memory further would count against the
    // instance's limit for nothing.
    let mut size = 64usize << 10;
    while size >= 8 {
        loop {
            let chunk = unsafe { malloc(size) };
            if chunk.is_null() {
                break;
            }
            if chunk as usize + size > end {
                // Past the old end: the heap grew for it, so no hole of this size is left.
                unsafe { free(chunk) };
                break;
            }
            filled += size;
        }
        size /= 2;
    }
    filled
}
