//! The global allocator over kmalloc: the model card of simulation mode and the shim's per-port
//! tables need `alloc`. kmalloc returns 8-byte aligned memory; page-aligned whole pages (what the
//! model's DMA blocks ask for) come from `alloc_pages_exact`; any other larger alignment is
//! served by over-allocating and keeping the original pointer just before the aligned block.

use core::alloc::{GlobalAlloc, Layout};

use super::ffi;

/// What kmalloc guarantees (ARCH_KMALLOC_MINALIGN on x86-64).
const KMALLOC_MIN_ALIGN: usize = 8;
const PAGE_SIZE: usize = onic_hal::PAGE_SIZE;

struct KernelHeap;

#[global_allocator]
static HEAP: KernelHeap = KernelHeap;

/// How a layout is served; `alloc` and `dealloc` agree because they see the same layout.
enum Scheme {
    Kmalloc,
    Pages,
    OverAligned,
}

fn scheme(l: &Layout) -> Scheme {
    if l.align() <= KMALLOC_MIN_ALIGN {
        Scheme::Kmalloc
    } else if l.align() <= PAGE_SIZE && l.size().is_multiple_of(PAGE_SIZE) {
        Scheme::Pages
    } else {
        Scheme::OverAligned
    }
}

// SAFETY: every block comes from kmalloc or alloc_pages_exact with at least the layout's size and
// alignment (see the schemes), and goes back through the matching free function, chosen from the
// same layout the caller must pass to `dealloc`.
unsafe impl GlobalAlloc for KernelHeap {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        match scheme(&l) {
            // SAFETY: plain kernel allocation of the requested size.
            Scheme::Kmalloc => unsafe { ffi::onic_kmalloc(l.size()) },
            // SAFETY: whole pages, page aligned, which covers any alignment up to a page.
            Scheme::Pages => unsafe { ffi::onic_alloc_pages_exact(l.size()) },
            Scheme::OverAligned => {
                let Some(total) = l.size().checked_add(l.align()) else {
                    return core::ptr::null_mut();
                };
                // SAFETY: plain kernel allocation.
                let raw = unsafe { ffi::onic_kmalloc(total) };
                if raw.is_null() {
                    return raw;
                }
                // `raw` is 8-aligned and `align` >= 16, so rounding `raw + 1` up to `align` lands at
                // least 8 bytes after `raw` (room for the back pointer) and at most `align` bytes
                // after it (room for `size` bytes before the end of the block).
                let offset = (raw as usize + 1).next_multiple_of(l.align()) - raw as usize;
                // SAFETY: 8 <= offset <= align, so both the aligned block and the back pointer lie
                // inside the `size + align` bytes just allocated; the back pointer slot is 8-aligned.
                unsafe {
                    let aligned = raw.add(offset);
                    aligned.cast::<*mut u8>().sub(1).write(raw);
                    aligned
                }
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, l: Layout) {
        match scheme(&l) {
            // SAFETY: `ptr` came from kmalloc for this layout (caller's contract + same scheme).
            Scheme::Kmalloc => unsafe { ffi::onic_kfree(ptr) },
            // SAFETY: `ptr` came from alloc_pages_exact with this size.
            Scheme::Pages => unsafe { ffi::onic_free_pages_exact(ptr, l.size()) },
            // SAFETY: `alloc` stored the kmalloc pointer just before the aligned block.
            Scheme::OverAligned => unsafe { ffi::onic_kfree(ptr.cast::<*mut u8>().sub(1).read()) },
        }
    }
}
