//! The static heap. The device model (`onic-sim`) and the self-test's queue storage allocate
//! from it, and after the model is gone the PCI card's DMA memory (`crate::dmamem`); the driver
//! core is allocation-free and the image's other code uses fixed-size storage, so the self-test
//! can check that dropping the model, and ending the card group, gives it all back.
//!
//! The allocator is `talc`, used without its lock: every call runs with interrupts disabled,
//! which on the image's single CPU is the lock (the timer handler reaches the model too).

use core::alloc::{GlobalAlloc, Layout};
use core::cell::UnsafeCell;
use core::ptr::{self, NonNull};

use talc::{ErrOnOom, Span, Talc};

use crate::platform::without_interrupts;

/// Size of the heap.
pub const HEAP_BYTES: usize = 32 << 20;

#[repr(C, align(4096))]
struct Area(UnsafeCell<[u8; HEAP_BYTES]>);

// SAFETY: the area is only handed to the allocator (once, in `init`), which owns it afterwards.
unsafe impl Sync for Area {}

static AREA: Area = Area(UnsafeCell::new([0; HEAP_BYTES]));

/// Heap usage figures.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapStats {
    /// Bytes currently allocated (as requested by the callers).
    pub in_use: usize,
    /// Highest `in_use` seen.
    pub peak: usize,
    /// Allocations made.
    pub allocations: u64,
    /// Allocations refused.
    pub failures: u64,
}

struct State {
    talc: Talc<ErrOnOom>,
    stats: HeapStats,
    ready: bool,
}

/// The global allocator: talc behind an interrupt-disabling critical section.
pub struct ModelHeap(UnsafeCell<State>);

// SAFETY: the state is only accessed inside `with_state`, which disables interrupts on the only
// CPU, so accesses never overlap.
unsafe impl Sync for ModelHeap {}

#[global_allocator]
static HEAP: ModelHeap = ModelHeap(UnsafeCell::new(State {
    talc: Talc::new(ErrOnOom),
    stats: HeapStats {
        in_use: 0,
        peak: 0,
        allocations: 0,
        failures: 0,
    },
    ready: false,
}));

impl ModelHeap {
    fn with_state<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        without_interrupts(|| {
            // SAFETY: interrupts are off and the allocator never calls back into itself, so this
            // is the only reference to the state while `f` runs.
            f(unsafe { &mut *self.0.get() })
        })
    }
}

/// Gives the static area to the allocator. Call once, before anything allocates.
pub fn init() {
    HEAP.with_state(|s| {
        if s.ready {
            return;
        }
        let span = Span::from_base_size(AREA.0.get().cast::<u8>(), HEAP_BYTES);
        // SAFETY: the area is static, unused by anything else, and claimed exactly once (`ready`).
        s.ready = unsafe { s.talc.claim(span) }.is_ok();
    });
}

/// Current usage figures.
#[must_use]
pub fn stats() -> HeapStats {
    HEAP.with_state(|s| s.stats)
}

// SAFETY: allocation and release go to talc, which returns blocks of at least the requested
// size and alignment from the claimed area, never handing out a block twice; the critical section
// serialises all calls.
unsafe impl GlobalAlloc for ModelHeap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.with_state(|s| {
            // SAFETY: `layout` has a non-zero size (GlobalAlloc's contract).
            match unsafe { s.talc.malloc(layout) } {
                Ok(p) => {
                    s.stats.in_use += layout.size();
                    s.stats.peak = s.stats.peak.max(s.stats.in_use);
                    s.stats.allocations += 1;
                    p.as_ptr()
                }
                Err(()) => {
                    s.stats.failures += 1;
                    ptr::null_mut()
                }
            }
        })
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        self.with_state(|s| {
            if let Some(p) = NonNull::new(ptr) {
                // SAFETY: `ptr` came from `alloc` with this `layout` (GlobalAlloc's contract).
                unsafe { s.talc.free(p, layout) };
                s.stats.in_use -= layout.size();
            }
        });
    }
}
