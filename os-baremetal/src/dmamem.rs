//! DMA memory for a real bus-master device: pages and coherent regions from the heap, each
//! reached by the device at its physical address.
//!
//! The image runs with virtual = physical addresses below 4 GiB (`platform/x86_64/boot.s`), the
//! heap is a static array inside the image (far below 4 GiB), and there is no IOMMU: so a heap
//! block's pointer *is* the bus address the device must be given. x86 keeps DMA coherent with
//! the CPU's caches, so the syncs have nothing to do. The memory is counted, so that a test can
//! check that every region, page and mapping came back.

use core::alloc::Layout;
use core::cell::Cell;
use core::ptr::NonNull;

use alloc::alloc::{alloc, alloc_zeroed, dealloc};
use onic_hal::dma::RawRegion;
use onic_hal::{AddrLimit, Direction, DmaAddr, DmaError, DmaMemory, DmaPage, PageMem, PAGE_SIZE};

/// What an [`IdentityDma`] has handed out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdentityStats {
    /// Coherent regions allocated so far.
    pub regions_allocated: u64,
    /// Pages allocated so far.
    pub pages_allocated: u64,
    /// Coherent regions not freed yet.
    pub live_regions: u64,
    /// Pages not freed yet.
    pub live_pages: u64,
    /// Pages mapped for the device and not unmapped yet.
    pub mapped_pages: u64,
}

/// Heap memory the device reaches at its physical address (see the module docs).
#[derive(Debug, Default)]
pub struct IdentityDma {
    stats: Cell<IdentityStats>,
}

impl IdentityDma {
    /// Nothing handed out yet.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The counters.
    #[must_use]
    pub fn stats(&self) -> IdentityStats {
        self.stats.get()
    }

    fn count(&self, f: impl FnOnce(&mut IdentityStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    /// A block's layout: whole pages, page-aligned.
    fn layout(len: usize) -> Result<Layout, DmaError> {
        let rounded = len
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(DmaError::InvalidRequest)?;
        Layout::from_size_align(rounded, PAGE_SIZE).map_err(|_| DmaError::InvalidRequest)
    }

    /// The bus address of `len` bytes at `cpu`, if the device can reach all of them (below
    /// 4 GiB, where the identity map and the heap are).
    fn bus_address(cpu: NonNull<u8>, len: usize) -> Option<DmaAddr> {
        let addr = DmaAddr::new(cpu.as_ptr() as u64);
        addr.fits_below_4g(len as u64).then_some(addr)
    }
}

// SAFETY: regions come from `alloc_zeroed` and pages from `alloc`, both page-aligned and whole
// pages, owned by their token until handed back here, and freed with the layout they were
// allocated with. A block's bus address is its address, which is its physical address (identity
// map below 4 GiB, no IOMMU: module docs), so the device reaches exactly its bytes; blocks the
// device could not reach are refused. The limit holds trivially (every address is below 4 GiB).
// The syncs are empty, as the flag says: x86 DMA is cache-coherent and nothing is bounced.
unsafe impl DmaMemory for IdentityDma {
    const SYNC_IS_NOOP: bool = true;

    fn alloc_coherent(&self, len: usize, _limit: AddrLimit) -> Result<RawRegion, DmaError> {
        if len == 0 {
            return Err(DmaError::InvalidRequest);
        }
        let layout = Self::layout(len)?;
        // SAFETY: the layout has a non-zero size.
        let cpu = NonNull::new(unsafe { alloc_zeroed(layout) }).ok_or(DmaError::OutOfMemory)?;
        let Some(dma) = Self::bus_address(cpu, layout.size()) else {
            // SAFETY: just allocated with this layout, never handed out.
            unsafe { dealloc(cpu.as_ptr(), layout) };
            return Err(DmaError::OutOfMemory);
        };
        self.count(|s| {
            s.regions_allocated += 1;
            s.live_regions += 1;
        });
        // SAFETY: see the impl's comment.
        Ok(unsafe { RawRegion::from_raw(cpu, dma, len) })
    }

    unsafe fn free_coherent(&self, region: RawRegion) {
        if let Ok(layout) = Self::layout(region.len()) {
            self.count(|s| s.live_regions -= 1);
            // SAFETY: the token came from `alloc_coherent`, which allocated `len` rounded up to
            // whole pages, page-aligned (this layout); it is consumed here, so freed once.
            unsafe { dealloc(region.cpu_ptr().as_ptr(), layout) };
        }
    }

    fn alloc_page(&self) -> Result<PageMem, DmaError> {
        let layout = Self::layout(PAGE_SIZE)?;
        // SAFETY: the layout has a non-zero size.
        let cpu = NonNull::new(unsafe { alloc(layout) }).ok_or(DmaError::OutOfMemory)?;
        self.count(|s| {
            s.pages_allocated += 1;
            s.live_pages += 1;
        });
        // SAFETY: PAGE_SIZE bytes, page-aligned, owned by the token until `free_page`.
        Ok(unsafe { PageMem::from_raw(cpu) })
    }

    fn free_page(&self, page: PageMem) {
        if let Ok(layout) = Self::layout(PAGE_SIZE) {
            self.count(|s| s.live_pages -= 1);
            // SAFETY: the token came from `alloc_page` with this layout and is consumed here.
            unsafe { dealloc(page.cpu_ptr().as_ptr(), layout) };
        }
    }

    fn map_page(&self, page: PageMem, _dir: Direction) -> Result<DmaPage, (PageMem, DmaError)> {
        let Some(dma) = Self::bus_address(page.cpu_ptr(), PAGE_SIZE) else {
            return Err((page, DmaError::MapFailed));
        };
        self.count(|s| s.mapped_pages += 1);
        // SAFETY: the device reaches the page at its physical address (see the impl's comment).
        Ok(unsafe { DmaPage::from_raw(page, dma) })
    }

    unsafe fn unmap_page(&self, page: DmaPage, _dir: Direction) -> PageMem {
        self.count(|s| s.mapped_pages -= 1);
        page.into_parts().0
    }

    fn sync_for_cpu(&self, _page: &DmaPage, _offset: usize, _len: usize, _dir: Direction) {}

    fn sync_for_device(&self, _page: &DmaPage, _offset: usize, _len: usize, _dir: Direction) {}
}
