//! A minimal host [`DmaMemory`] for benchmarks: heap memory, no IOMMU, no bookkeeping on the
//! per-page path, and a device side for the benchmark rigs that stand in for the card.
//!
//! What it costs, since benchmark figures depend on it:
//!
//! - `alloc_page` / `free_page` are the C library's aligned allocation and free of 4096 bytes
//!   (through `std::alloc`), **not zeroed**: like Linux's `dev_alloc_pages`, a fresh RX page holds
//!   whatever was there, and nothing reads a byte the device did not write;
//! - `map_page` / `unmap_page` translate without an IOMMU (the device address is the CPU address
//!   plus a fixed offset), as on a host that runs with `iommu=off` or passthrough;
//! - the syncs are no-ops, as the DMA API's are on a cache-coherent x86 host without bounce
//!   buffers.
//!
//! Coherent regions get device addresses below 4 GiB from a counter and are looked up in a map
//! (they are allocated once per ring). The device side ([`HostDma::device_write`] and friends) is
//! what a benchmark rig uses to play the card: it writes completions, status records and frame data
//! at device addresses, as the QDMA would.
//!
//! In debug builds (the tests) every device access to a page is checked against the set of mapped
//! pages; in release builds (the benchmarks) the page path keeps no per-page state, so that a
//! page-per-packet baseline pays what a host without an IOMMU pays.

use std::alloc::{alloc, alloc_zeroed, dealloc, Layout};
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
#[cfg(debug_assertions)]
use std::collections::HashSet;
use std::ptr::NonNull;

use onic_hal::dma::RawRegion;
use onic_hal::{AddrLimit, Direction, DmaAddr, DmaError, DmaMemory, DmaPage, PageMem, PAGE_SIZE};

/// Device addresses of pages are their CPU address plus this offset, far above anything a
/// coherent region gets (below 4 GiB) and above any user-space address (below 2^47).
pub const PAGE_IOVA_OFFSET: u64 = 1 << 56;

/// First device address of coherent regions.
const REGION_IOVA_BASE: u64 = 0x1000_0000;

fn page_layout() -> Layout {
    // PAGE_SIZE is a power of two and small: this cannot fail.
    Layout::from_size_align(PAGE_SIZE, PAGE_SIZE).unwrap_or(Layout::new::<u8>())
}

/// Counters of a [`HostDma`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostDmaStats {
    /// Pages allocated and not freed.
    pub live_pages: u64,
    /// Pages allocated so far.
    pub pages_allocated: u64,
    /// Coherent regions allocated and not freed.
    pub live_regions: u64,
}

/// Heap-backed DMA memory without an IOMMU (see the module docs).
#[derive(Debug)]
pub struct HostDma {
    /// Coherent regions by device address: (CPU pointer, length).
    regions: RefCell<BTreeMap<u64, (NonNull<u8>, usize)>>,
    next_iova: Cell<u64>,
    live_pages: Cell<u64>,
    pages_allocated: Cell<u64>,
    #[cfg(debug_assertions)]
    mapped: RefCell<HashSet<u64>>,
}

impl Default for HostDma {
    fn default() -> Self {
        Self::new()
    }
}

impl HostDma {
    /// Empty DMA memory.
    #[must_use]
    pub fn new() -> Self {
        Self {
            regions: RefCell::new(BTreeMap::new()),
            next_iova: Cell::new(REGION_IOVA_BASE),
            live_pages: Cell::new(0),
            pages_allocated: Cell::new(0),
            #[cfg(debug_assertions)]
            mapped: RefCell::new(HashSet::new()),
        }
    }

    /// The counters.
    #[must_use]
    pub fn stats(&self) -> HostDmaStats {
        HostDmaStats {
            live_pages: self.live_pages.get(),
            pages_allocated: self.pages_allocated.get(),
            live_regions: self.regions.borrow().len() as u64,
        }
    }

    /// CPU address of `len` bytes at device address `iova`, if they lie inside one live region or
    /// one mapped page.
    fn translate(&self, iova: u64, len: usize) -> Option<*mut u8> {
        if iova >= PAGE_IOVA_OFFSET {
            let cpu = iova - PAGE_IOVA_OFFSET;
            let in_page = (cpu as usize % PAGE_SIZE).checked_add(len)? <= PAGE_SIZE;
            #[cfg(debug_assertions)]
            let in_page = in_page && self.mapped.borrow().contains(&(cpu & !(PAGE_SIZE as u64 - 1)));
            return in_page.then(|| std::ptr::with_exposed_provenance_mut(cpu as usize));
        }
        let regions = self.regions.borrow();
        let (&start, &(ptr, rlen)) = regions.range(..=iova).next_back()?;
        let off = usize::try_from(iova - start).ok()?;
        (off.checked_add(len)? <= rlen).then(|| ptr.as_ptr().wrapping_add(off))
    }

    /// The device writes `data` at `iova`. Returns `false` (and writes nothing) if the range is not
    /// inside a live region or a mapped page.
    pub fn device_write(&self, iova: DmaAddr, data: &[u8]) -> bool {
        let Some(dst) = self.translate(iova.get(), data.len()) else {
            return false;
        };
        // SAFETY: `translate` found `data.len()` bytes at `dst` inside a live allocation of this
        // memory (a region, or a page whose device address the driver handed to the device and
        // whose token the driver keeps until the device is done: the DMA contract). `data` is a
        // distinct Rust buffer. The rig and the driver run on one thread, one after the other, so
        // no Rust reference into these bytes is in use while they are written.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst, data.len()) };
        true
    }

    /// The device writes a little-endian `u64` at `iova` (8-byte aligned); as
    /// [`HostDma::device_write`].
    pub fn device_write_u64(&self, iova: DmaAddr, value: u64) -> bool {
        if !iova.get().is_multiple_of(8) {
            return false;
        }
        let Some(dst) = self.translate(iova.get(), 8) else {
            return false;
        };
        // SAFETY: as in `device_write`; the address is 8-byte aligned (regions and pages are 4 KiB
        // aligned and `iova` is a multiple of 8). Volatile, as the CPU side reads it volatile.
        unsafe { dst.cast::<u64>().write_volatile(value.to_le()) };
        true
    }

    /// The device reads a little-endian `u64` at `iova` (8-byte aligned); `None` outside live
    /// memory.
    #[must_use]
    pub fn device_read_u64(&self, iova: DmaAddr) -> Option<u64> {
        if !iova.get().is_multiple_of(8) {
            return None;
        }
        let src = self.translate(iova.get(), 8)?;
        // SAFETY: as in `device_write_u64`, reading instead of writing.
        Some(u64::from_le(unsafe { src.cast::<u64>().read_volatile() }))
    }
}

// SAFETY: regions come from `alloc_zeroed` with 4 KiB alignment and are handed out once, with a
// device address that no other allocation shares (a counter below 4 GiB, never reused); pages
// come from `alloc` with 4 KiB alignment and are reached by the device at their CPU address plus
// PAGE_IOVA_OFFSET, exactly the page. The syncs are no-ops (empty, as the flag says): host memory
// is coherent and nothing is bounced.
unsafe impl DmaMemory for HostDma {
    const SYNC_IS_NOOP: bool = true;

    fn alloc_coherent(&self, len: usize, _limit: AddrLimit) -> Result<RawRegion, DmaError> {
        if len == 0 {
            return Err(DmaError::InvalidRequest);
        }
        let rounded = len
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(DmaError::InvalidRequest)?;
        let layout = Layout::from_size_align(rounded, PAGE_SIZE).map_err(|_| DmaError::InvalidRequest)?;
        let iova = self.next_iova.get();
        if iova + rounded as u64 > 1 << 32 {
            return Err(DmaError::OutOfMemory);
        }
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc_zeroed(layout) }).ok_or(DmaError::OutOfMemory)?;
        self.next_iova.set(iova + rounded as u64);
        self.regions.borrow_mut().insert(iova, (ptr, rounded));
        // SAFETY: `rounded >= len` fresh zeroed bytes, 4 KiB aligned, owned by the token until
        // `free_coherent`; the device reaches them at `iova` (the region map).
        Ok(unsafe { RawRegion::from_raw(ptr, DmaAddr::new(iova), len) })
    }

    unsafe fn free_coherent(&self, region: RawRegion) {
        let removed = self.regions.borrow_mut().remove(&region.dma_addr().get());
        if let Some((ptr, len)) = removed {
            if ptr == region.cpu_ptr() {
                if let Ok(layout) = Layout::from_size_align(len, PAGE_SIZE) {
                    // SAFETY: allocated in `alloc_coherent` with this layout, freed once (the
                    // entry is gone from the map).
                    unsafe { dealloc(ptr.as_ptr(), layout) };
                }
            }
        }
    }

    fn alloc_page(&self) -> Result<PageMem, DmaError> {
        // SAFETY: the layout has a non-zero size.
        let ptr = NonNull::new(unsafe { alloc(page_layout()) }).ok_or(DmaError::OutOfMemory)?;
        // The device side turns device addresses back into pointers.
        let _ = ptr.as_ptr().expose_provenance();
        self.live_pages.set(self.live_pages.get() + 1);
        self.pages_allocated.set(self.pages_allocated.get() + 1);
        // SAFETY: PAGE_SIZE bytes, PAGE_SIZE aligned, owned by the token until `free_page`.
        Ok(unsafe { PageMem::from_raw(ptr) })
    }

    fn free_page(&self, page: PageMem) {
        self.live_pages.set(self.live_pages.get() - 1);
        // SAFETY: the token came from `alloc_page` with this layout and is consumed here.
        unsafe { dealloc(page.cpu_ptr().as_ptr(), page_layout()) };
    }

    fn map_page(&self, page: PageMem, _dir: Direction) -> Result<DmaPage, (PageMem, DmaError)> {
        let cpu = page.cpu_ptr().as_ptr() as u64;
        #[cfg(debug_assertions)]
        self.mapped.borrow_mut().insert(cpu);
        // SAFETY: the device reaches the page at its CPU address plus the offset (`translate`).
        Ok(unsafe { DmaPage::from_raw(page, DmaAddr::new(cpu + PAGE_IOVA_OFFSET)) })
    }

    unsafe fn unmap_page(&self, page: DmaPage, _dir: Direction) -> PageMem {
        let (mem, _) = page.into_parts();
        #[cfg(debug_assertions)]
        self.mapped.borrow_mut().remove(&(mem.cpu_ptr().as_ptr() as u64));
        mem
    }

    fn sync_for_cpu(&self, _page: &DmaPage, _offset: usize, _len: usize, _dir: Direction) {}

    fn sync_for_device(&self, _page: &DmaPage, _offset: usize, _len: usize, _dir: Direction) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regions_and_pages_round_trip_through_the_device_side() {
        let dma = HostDma::new();
        let r = dma.alloc_coherent(100, AddrLimit::Below4G).unwrap();
        assert!(r.dma_addr().fits_below_4g(4096));
        assert!(dma.device_write_u64(DmaAddr::new(r.dma_addr().get() + 8), 0x1122));
        assert_eq!(
            dma.device_read_u64(DmaAddr::new(r.dma_addr().get() + 8)),
            Some(0x1122)
        );
        assert!(!dma.device_write(DmaAddr::new(r.dma_addr().get() + 4090), &[0; 8]));
        let mut page = dma
            .map_page(dma.alloc_page().unwrap(), Direction::FromDevice)
            .unwrap();
        assert!(dma.device_write(DmaAddr::new(page.dma_addr().get() + 256), b"frame"));
        assert_eq!(&page.bytes_mut()[256..261], b"frame");
        assert!(!dma.device_write(DmaAddr::new(page.dma_addr().get() + 4094), b"xyz"));
        assert_eq!(dma.stats().live_pages, 1);
        let mem = page.unmap(&dma, Direction::FromDevice);
        dma.free_page(mem);
        // SAFETY: the test's device side makes no more accesses to the region.
        unsafe { dma.free_coherent(r) };
        assert_eq!(
            dma.stats(),
            HostDmaStats {
                live_pages: 0,
                pages_allocated: 1,
                live_regions: 0
            }
        );
    }
}
