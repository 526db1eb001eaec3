//! The HAL backends of the module: on a real card, `Mmio` over the ioremapped BARs and the
//! kernel's DMA API; in simulation mode, the model card behind a kernel spinlock. A port is
//! built over these enums, so both modes run the same `Port` code; only the variant differs.

use core::ffi::c_void;
use core::ptr::NonNull;

use onic_hal::dma::RawRegion;
use onic_hal::mmio::Mmio;
use onic_hal::{
    AddrLimit, DelayNs, Direction, DmaAddr, DmaError, DmaMemory, DmaPage, PageMem, RegisterWindow, PAGE_SIZE,
};

use super::ffi;
use super::lock::KLock;
use crate::simcard::{SimDelay, SimDma, SimRegs};

/// A register window of either kind.
pub enum KRegs {
    /// An ioremapped BAR of a real card, and the card's `struct device` (asked whether the card
    /// is still on the bus).
    Mmio(Mmio<'static>, NonNull<c_void>),
    /// A BAR of the model card.
    Sim(SimRegs<KLock>),
}

// SAFETY: both variants uphold the contract; this only dispatches.
unsafe impl RegisterWindow for KRegs {
    fn read32(&self, offset: u32) -> u32 {
        match self {
            Self::Mmio(m, _) => m.read32(offset),
            Self::Sim(s) => s.read32(offset),
        }
    }
    fn write32(&self, offset: u32, value: u32) {
        match self {
            Self::Mmio(m, _) => m.write32(offset, value),
            Self::Sim(s) => s.write32(offset, value),
        }
    }
    fn cut_off(&self) -> bool {
        match self {
            // SAFETY: the device outlives the port that holds this window (onic_rs_port_new_pci's
            // contract). The helper says true only for a function that reaches no memory: one
            // whose configuration space no longer answers (it has left the bus), or whose bus
            // mastering it has just cleared, with a configuration read after the write, whose
            // completion the function's earlier memory writes cannot pass (PCIe ordering).
            Self::Mmio(_, dev) => unsafe { ffi::onic_dma_cut_off(dev.as_ptr()) },
            // The in-kernel model's DMA has no switch (its memory checks stay on).
            Self::Sim(_) => false,
        }
    }
}

// SAFETY: an MMIO window is a pointer into device memory that any CPU may access; the model
// window serializes through its lock.
unsafe impl Send for KRegs {}
// SAFETY: as above.
unsafe impl Sync for KRegs {}

/// The DMA API's direction value.
pub fn dir(d: Direction) -> core::ffi::c_int {
    match d {
        Direction::ToDevice => ffi::DMA_TO_DEVICE,
        Direction::FromDevice => ffi::DMA_FROM_DEVICE,
        Direction::Bidirectional => ffi::DMA_BIDIRECTIONAL,
    }
}

/// The kernel DMA API for one PCI device (`struct device *`). The device's coherent mask is 32
/// bits (set at probe, hardware.md §1.4), so every coherent allocation lies below 4 GiB.
#[derive(Clone, Copy)]
pub struct KernelDma {
    dev: NonNull<c_void>,
    /// Every sync of a streaming mapping of the device does nothing (asked once, at
    /// construction: the answer depends on the masks and the DMA ops only): syncs are left out.
    sync_is_noop: bool,
}

impl KernelDma {
    /// The DMA API of `dev`.
    ///
    /// # Safety
    ///
    /// `dev` is a `struct device *` that stays valid (bound to this driver, DMA masks set) for
    /// as long as any copy of this handle or any memory from it lives.
    pub unsafe fn new(dev: NonNull<c_void>) -> Self {
        // SAFETY: a valid device with its masks set (the caller's contract); reads only.
        let sync_is_noop = unsafe { ffi::onic_dma_sync_is_noop(dev.as_ptr()) };
        Self { dev, sync_is_noop }
    }

    /// Whether a sync of this device's streaming mappings has work to do.
    pub const fn syncs(&self) -> bool {
        !self.sync_is_noop
    }

    /// The `struct device *`.
    pub const fn dev(&self) -> NonNull<c_void> {
        self.dev
    }
}

// SAFETY: regions come from dma_alloc_coherent (page aligned, zeroed, the device reaches them at
// the returned address, below 4 GiB under the 32-bit coherent mask, checked again below); pages
// are whole zeroed order-0 pages mapped with dma_map_page, unmapped with the same direction;
// syncs are the DMA API's.
unsafe impl DmaMemory for KernelDma {
    fn alloc_coherent(&self, len: usize, limit: AddrLimit) -> Result<RawRegion, DmaError> {
        if len == 0 {
            return Err(DmaError::InvalidRequest);
        }
        let len = len.next_multiple_of(PAGE_SIZE);
        let mut dma = 0u64;
        // SAFETY: valid device (constructor contract); `dma` is a valid out pointer.
        let cpu = unsafe { ffi::onic_dma_alloc_coherent(self.dev.as_ptr(), len, &mut dma) };
        let cpu = NonNull::new(cpu).ok_or(DmaError::OutOfMemory)?;
        let addr = DmaAddr::new(dma);
        if limit == AddrLimit::Below4G && !addr.fits_below_4g(len as u64) {
            // SAFETY: just allocated with these values.
            unsafe { ffi::onic_dma_free_coherent(self.dev.as_ptr(), len, cpu.as_ptr(), dma) };
            return Err(DmaError::OutOfMemory);
        }
        // SAFETY: dma_alloc_coherent returns zeroed, page-aligned memory of `len` bytes that the
        // device reaches at `dma`, ours until freed.
        Ok(unsafe { RawRegion::from_raw(cpu, addr, len) })
    }

    unsafe fn free_coherent(&self, region: RawRegion) {
        // SAFETY: the token came from alloc_coherent above with these values; the caller
        // guarantees the device no longer reaches the region.
        unsafe {
            ffi::onic_dma_free_coherent(
                self.dev.as_ptr(),
                region.len(),
                region.cpu_ptr().as_ptr(),
                region.dma_addr().get(),
            );
        }
    }

    fn alloc_page(&self) -> Result<PageMem, DmaError> {
        // SAFETY: no preconditions.
        let p = NonNull::new(unsafe { ffi::onic_page_alloc() }).ok_or(DmaError::OutOfMemory)?;
        // SAFETY: a fresh page-aligned page, ours until freed.
        Ok(unsafe { PageMem::from_raw(p) })
    }

    fn free_page(&self, page: PageMem) {
        // SAFETY: the page came from onic_page_alloc.
        unsafe { ffi::onic_page_free(page.cpu_ptr().as_ptr()) };
    }

    fn map_page(&self, page: PageMem, d: Direction) -> Result<DmaPage, (PageMem, DmaError)> {
        let mut dma = 0u64;
        // SAFETY: valid device and page; `dma` is a valid out pointer.
        let r =
            unsafe { ffi::onic_dma_map_page(self.dev.as_ptr(), page.cpu_ptr().as_ptr(), dir(d), &mut dma) };
        if r != 0 {
            return Err((page, DmaError::MapFailed));
        }
        // SAFETY: the device reaches the page at `dma` until unmapped.
        Ok(unsafe { DmaPage::from_raw(page, DmaAddr::new(dma)) })
    }

    unsafe fn unmap_page(&self, page: DmaPage, d: Direction) -> PageMem {
        let (mem, addr) = page.into_parts();
        // SAFETY: mapped by map_page with the same direction (DmaMemory contract of the caller),
        // and the caller guarantees the device no longer reaches the page.
        unsafe { ffi::onic_dma_unmap_page(self.dev.as_ptr(), addr.get(), dir(d)) };
        mem
    }

    fn sync_for_cpu(&self, page: &DmaPage, offset: usize, len: usize, d: Direction) {
        if !self.syncs() || offset.checked_add(len).is_none_or(|end| end > PAGE_SIZE) {
            return;
        }
        // SAFETY: a range inside a mapped page.
        unsafe {
            ffi::onic_dma_sync(
                self.dev.as_ptr(),
                page.dma_addr().get(),
                offset,
                len,
                dir(d),
                true,
            )
        };
    }

    fn sync_for_device(&self, page: &DmaPage, offset: usize, len: usize, d: Direction) {
        if !self.syncs() || offset.checked_add(len).is_none_or(|end| end > PAGE_SIZE) {
            return;
        }
        // SAFETY: a range inside a mapped page.
        unsafe {
            ffi::onic_dma_sync(
                self.dev.as_ptr(),
                page.dma_addr().get(),
                offset,
                len,
                dir(d),
                false,
            )
        };
    }
}

/// The model card behind the kernel's DMA API (simulation mode with `sim_dma_api=1`): every
/// ring, page and packet is allocated, mapped and synced through the DMA API of a platform
/// device exactly as on a card, and the model reaches it only through the DMA address the API
/// returned, translated the way the direct mapping does (`phys_to_virt(dma_to_phys())`, which is
/// the swiotlb bounce slot when the kernel bounces). Each mapping is attached to the model while
/// it lives, so the model checks every device access against it.
#[derive(Clone)]
pub struct ApiDma {
    api: KernelDma,
    model: SimDma<KLock>,
}

impl ApiDma {
    /// The DMA API of `api`'s device in front of `model`.
    pub fn new(api: KernelDma, model: SimDma<KLock>) -> Self {
        Self { api, model }
    }

    /// Attaches `len` bytes at device address `dma` to the model; `false` when the address is not
    /// memory the kernel maps or the model refuses it.
    pub fn attach_for(&self, dma: DmaAddr, len: usize, dir: Direction) -> bool {
        // SAFETY: valid device (KernelDma's contract); a pure address translation.
        let cpu = unsafe { ffi::onic_dma_to_virt(self.api.dev().as_ptr(), dma.get()) };
        let Some(cpu) = NonNull::new(cpu) else {
            return false;
        };
        // SAFETY: `cpu` is what `dma` reaches through the direct mapping; the mapping (or
        // allocation) it belongs to stays live until `detach`, which runs before it ends.
        unsafe { self.model.attach(dma, cpu, len, dir) }
    }

    /// Ends an attachment made by [`ApiDma::attach_for`].
    pub fn detach_for(&self, dma: DmaAddr, len: usize, dir: Direction) {
        self.model.detach(dma, len, dir);
    }

    /// The kernel side of the pair.
    pub const fn api(&self) -> &KernelDma {
        &self.api
    }
}

// SAFETY: every allocation and mapping is the kernel DMA API's (KernelDma upholds the contract);
// the model is only told about them (attached after they exist, detached before they end).
unsafe impl DmaMemory for ApiDma {
    fn alloc_coherent(&self, len: usize, limit: AddrLimit) -> Result<RawRegion, DmaError> {
        let region = self.api.alloc_coherent(len, limit)?;
        if !self.attach_for(region.dma_addr(), region.len(), Direction::Bidirectional) {
            // SAFETY: just allocated; its address went nowhere, the device cannot reach it.
            unsafe { self.api.free_coherent(region) };
            return Err(DmaError::MapFailed);
        }
        Ok(region)
    }
    unsafe fn free_coherent(&self, region: RawRegion) {
        self.detach_for(region.dma_addr(), region.len(), Direction::Bidirectional);
        // SAFETY: the caller guarantees the device no longer reaches the region.
        unsafe { self.api.free_coherent(region) };
    }
    fn alloc_page(&self) -> Result<PageMem, DmaError> {
        self.api.alloc_page()
    }
    fn free_page(&self, page: PageMem) {
        self.api.free_page(page);
    }
    fn map_page(&self, page: PageMem, d: Direction) -> Result<DmaPage, (PageMem, DmaError)> {
        let p = self.api.map_page(page, d)?;
        if !self.attach_for(p.dma_addr(), PAGE_SIZE, d) {
            // SAFETY: just mapped; its address went nowhere, the device cannot reach it.
            return Err((unsafe { self.api.unmap_page(p, d) }, DmaError::MapFailed));
        }
        Ok(p)
    }
    unsafe fn unmap_page(&self, page: DmaPage, d: Direction) -> PageMem {
        self.detach_for(page.dma_addr(), PAGE_SIZE, d);
        // SAFETY: the caller guarantees the device no longer reaches the page.
        unsafe { self.api.unmap_page(page, d) }
    }
    fn sync_for_cpu(&self, page: &DmaPage, offset: usize, len: usize, d: Direction) {
        self.api.sync_for_cpu(page, offset, len, d);
    }
    fn sync_for_device(&self, page: &DmaPage, offset: usize, len: usize, d: Direction) {
        self.api.sync_for_device(page, offset, len, d);
    }
}

/// DMA memory of either kind.
#[derive(Clone)]
pub enum KDma {
    /// The kernel DMA API of a real card.
    Kernel(KernelDma),
    /// The model's memory.
    Sim(SimDma<KLock>),
    /// The model behind the kernel DMA API of a platform device.
    SimApi(ApiDma),
}

// SAFETY: both variants uphold the contract; this only dispatches.
unsafe impl DmaMemory for KDma {
    fn alloc_coherent(&self, len: usize, limit: AddrLimit) -> Result<RawRegion, DmaError> {
        match self {
            Self::Kernel(k) => k.alloc_coherent(len, limit),
            Self::Sim(s) => s.alloc_coherent(len, limit),
            Self::SimApi(a) => a.alloc_coherent(len, limit),
        }
    }
    unsafe fn free_coherent(&self, region: RawRegion) {
        // SAFETY: the caller's guarantee holds for whichever variant this is.
        unsafe {
            match self {
                Self::Kernel(k) => k.free_coherent(region),
                Self::Sim(s) => s.free_coherent(region),
                Self::SimApi(a) => a.free_coherent(region),
            }
        }
    }
    fn alloc_page(&self) -> Result<PageMem, DmaError> {
        match self {
            Self::Kernel(k) => k.alloc_page(),
            Self::Sim(s) => s.alloc_page(),
            Self::SimApi(a) => a.alloc_page(),
        }
    }
    fn free_page(&self, page: PageMem) {
        match self {
            Self::Kernel(k) => k.free_page(page),
            Self::Sim(s) => s.free_page(page),
            Self::SimApi(a) => a.free_page(page),
        }
    }
    fn map_page(&self, page: PageMem, d: Direction) -> Result<DmaPage, (PageMem, DmaError)> {
        match self {
            Self::Kernel(k) => k.map_page(page, d),
            Self::Sim(s) => s.map_page(page, d),
            Self::SimApi(a) => a.map_page(page, d),
        }
    }
    unsafe fn unmap_page(&self, page: DmaPage, d: Direction) -> PageMem {
        // SAFETY: the caller's guarantee holds for whichever variant this is.
        unsafe {
            match self {
                Self::Kernel(k) => k.unmap_page(page, d),
                Self::Sim(s) => s.unmap_page(page, d),
                Self::SimApi(a) => a.unmap_page(page, d),
            }
        }
    }
    fn sync_for_cpu(&self, page: &DmaPage, offset: usize, len: usize, d: Direction) {
        match self {
            Self::Kernel(k) => k.sync_for_cpu(page, offset, len, d),
            Self::Sim(s) => s.sync_for_cpu(page, offset, len, d),
            Self::SimApi(a) => a.sync_for_cpu(page, offset, len, d),
        }
    }
    fn sync_for_device(&self, page: &DmaPage, offset: usize, len: usize, d: Direction) {
        match self {
            Self::Kernel(k) => k.sync_for_device(page, offset, len, d),
            Self::Sim(s) => s.sync_for_device(page, offset, len, d),
            Self::SimApi(a) => a.sync_for_device(page, offset, len, d),
        }
    }
}

// SAFETY: the kernel DMA API may be used from any CPU for a bound device; the model serializes
// through its lock.
unsafe impl Send for KDma {}
// SAFETY: as above.
unsafe impl Sync for KDma {}

/// Delays: real time on a card (sleeping where allowed), the model's clock in simulation.
pub enum KDelay {
    /// udelay/usleep through the C glue.
    Kernel,
    /// The model's virtual clock.
    Sim(SimDelay<KLock>),
}

impl DelayNs for KDelay {
    fn delay_ns(&mut self, ns: u32) {
        match self {
            Self::Kernel => {
                if ns >= 1000 {
                    // SAFETY: no preconditions.
                    unsafe { ffi::onic_udelay(ns.div_ceil(1000)) };
                } else {
                    // SAFETY: no preconditions.
                    unsafe { ffi::onic_ndelay(ns) };
                }
            }
            Self::Sim(s) => s.delay_ns(ns),
        }
    }

    fn delay_us(&mut self, us: u32) {
        match self {
            // SAFETY: no preconditions.
            Self::Kernel => unsafe { ffi::onic_udelay(us) },
            Self::Sim(s) => s.delay_us(us),
        }
    }
}

// SAFETY: a delay handle has no thread-bound state.
unsafe impl Send for KDelay {}
