//! Simulation mode's HAL backend: an `onic_sim::Card` behind a lock, shared by the netdevs of its
//! functions and by the engine that makes it run.
//!
//! The model is single-threaded (it keeps its state in a `RefCell`), while the kernel calls the
//! driver from several CPUs at once (NAPI polls, transmits, ethtool, the engine timer). Every
//! access to the card therefore goes through [`SimCard::with`], which holds the card's lock for
//! the duration of one model call. In the module the lock is a kernel spinlock taken with bottom
//! halves disabled ([`RawLock`] is implemented over it in `kernel::lock`); host tests use
//! [`SpinLock`].
//!
//! Only the HAL backend differs between simulation and hardware: the register windows, the DMA
//! memory and the delay below are what `Port` is instantiated with in simulation, against
//! `Mmio` and the kernel DMA API on a real card.

use alloc::sync::Arc;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicBool, Ordering};

use onic_hal::dma::RawRegion;
use onic_hal::{
    AddrLimit, DelayNs, Direction, DmaAddr, DmaError, DmaMemory, DmaPage, PageMem, RegisterWindow, SharedLock,
};
use onic_sim::{Card, CardConfig, Interrupt, Wire};

use crate::os::{PacketMap, RawPoolPage};

/// A mutual-exclusion lock without data (the data sits next to it in [`SimCard`]).
///
/// # Safety
///
/// Between a `lock` and the next `unlock` on the same object, no other `lock` returns (on any
/// thread). `lock` has acquire and `unlock` release semantics.
pub unsafe trait RawLock: Send + Sync {
    /// Takes the lock, spinning while someone else holds it.
    fn lock(&self);
    /// Releases the lock taken by the caller's `lock`.
    fn unlock(&self);
}

/// A plain spin lock, for host tests and tools.
#[derive(Debug, Default)]
pub struct SpinLock(AtomicBool);

// SAFETY: a compare-exchange from false to true with acquire ordering succeeds for one caller at
// a time; the store of false with release ordering ends the critical section.
unsafe impl RawLock for SpinLock {
    fn lock(&self) {
        while self
            .0
            .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            core::hint::spin_loop();
        }
    }
    fn unlock(&self) {
        self.0.store(false, Ordering::Release);
    }
}

/// The card's context-command lock for host tests and tools, a handle all functions share (the
/// module uses a kernel mutex, `kernel::lock::KCardLock`).
#[derive(Clone, Debug, Default)]
pub struct SharedSpinLock(Arc<SpinLock>);

// SAFETY: every clone locks the same `SpinLock`, which excludes all other holders with acquire and
// release semantics.
unsafe impl SharedLock for SharedSpinLock {
    fn lock(&self) {
        self.0.lock();
    }
    fn unlock(&self) {
        self.0.unlock();
    }
}

/// The model card of simulation mode: two PCI functions, two ports, a cable between them.
pub struct SimCard<L: RawLock> {
    lock: L,
    card: UnsafeCell<Card>,
}

// SAFETY: the card is only reached through `with`, which holds the lock, so at most one thread
// touches the model's state at a time. The model keeps no thread-bound state: its raw pointers
// refer to heap blocks it owns, freed only through its own methods, or to memory the driver
// mapped for it (`map_foreign`: page-pool pages, packet data), which the driver keeps valid on
// any thread until it unmaps it.
unsafe impl<L: RawLock> Sync for SimCard<L> {}
// SAFETY: as above; moving the card moves the ownership of its heap blocks with it.
unsafe impl<L: RawLock> Send for SimCard<L> {}

/// The model configuration used by simulation mode.
#[must_use]
pub fn sim_config() -> CardConfig {
    let mut cfg = CardConfig::default();
    cfg.wire = Wire::Cable;
    // Nobody reads the egress capture in the module; keeping every frame would grow forever.
    cfg.capture_egress = false;
    cfg
}

impl<L: RawLock> SimCard<L> {
    /// A card in its power-on state, protected by `lock`.
    pub fn new(lock: L, cfg: CardConfig) -> Arc<Self> {
        Arc::new(Self {
            lock,
            card: UnsafeCell::new(Card::new(cfg)),
        })
    }

    /// Runs `f` on the card with the lock held.
    pub fn with<R>(&self, f: impl FnOnce(&Card) -> R) -> R {
        self.lock.lock();
        // SAFETY: the lock is held, so no other thread has a reference to the card (every access
        // goes through this method); the reference does not escape `f`.
        let r = f(unsafe { &*self.card.get() });
        self.lock.unlock();
        r
    }

    /// One round of the engine: the card does what was posted (doorbells, frames on the wire),
    /// its clock moves on by `elapsed_ns` (completion timers fire), it works again, and the
    /// interrupts it raised are returned for delivery (the module schedules the queue's NAPI).
    pub fn tick(&self, elapsed_ns: u64) -> Vec<Interrupt> {
        self.with(|c| {
            c.run_until_idle();
            c.advance_time(elapsed_ns);
            c.run_until_idle();
            c.take_interrupts()
        })
    }

    /// Frees every DMA allocation the model still tracks. Called when the card goes away, after
    /// every port released its memory: anything left is a driver leak, reported by the caller.
    ///
    /// # Safety
    ///
    /// No DMA token of this card is used afterwards.
    pub unsafe fn reclaim_all_dma(&self) {
        // SAFETY: forwarded contract.
        self.with(|c| unsafe { c.reclaim_all_dma() });
    }
}

impl<L: RawLock> Drop for SimCard<L> {
    fn drop(&mut self) {
        // Dropping the card would leak what the driver still holds; by now nothing may hold
        // anything (every `Arc` clone is gone), so give it all back.
        // SAFETY: no handle to this card exists any more, so no token can be used afterwards.
        unsafe { self.card.get_mut().reclaim_all_dma() };
    }
}

/// Which BAR a [`SimRegs`] window shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimBar {
    /// BAR0 of a PCI function.
    Qdma(u8),
    /// BAR2.
    Shell,
}

/// A BAR of the model card.
pub struct SimRegs<L: RawLock> {
    card: Arc<SimCard<L>>,
    bar: SimBar,
}

impl<L: RawLock> SimRegs<L> {
    /// The window `bar` of `card`.
    pub fn new(card: &Arc<SimCard<L>>, bar: SimBar) -> Self {
        Self {
            card: Arc::clone(card),
            bar,
        }
    }
}

// The trait methods of the model's windows, DMA memory and delay are never inlined: they are
// where the module's real register and DMA paths stop and simulation mode's begin, which the
// build's panic-path check (xtask/src/panicpaths.rs) does not follow (the model's own checks may
// panic; it is a test device).
//
// SAFETY: each call is one model register access under the card's lock, in call order; the
// model's own windows uphold the contract (unmapped reads, dropped writes), and taking the lock
// orders this CPU's earlier DMA-memory writes before the model sees the register write.
unsafe impl<L: RawLock> RegisterWindow for SimRegs<L> {
    #[inline(never)]
    fn read32(&self, offset: u32) -> u32 {
        self.card.with(|c| match self.bar {
            SimBar::Qdma(f) => c.qdma(f).read32(offset),
            SimBar::Shell => c.shell().read32(offset),
        })
    }

    #[inline(never)]
    fn write32(&self, offset: u32, value: u32) {
        self.card.with(|c| match self.bar {
            SimBar::Qdma(f) => c.qdma(f).write32(offset, value),
            SimBar::Shell => c.shell().write32(offset, value),
        });
    }
}

/// The model's DMA memory.
pub struct SimDma<L: RawLock> {
    card: Arc<SimCard<L>>,
}

impl<L: RawLock> SimDma<L> {
    /// The DMA memory of `card`.
    pub fn new(card: &Arc<SimCard<L>>) -> Self {
        Self {
            card: Arc::clone(card),
        }
    }
}

impl<L: RawLock> SimDma<L> {
    /// Makes `len` bytes at `cpu` reachable by the model at `dma`, an address the OS's DMA API
    /// gave out (see `onic_sim::SimDma::attach_foreign`). `false` (and a recorded violation) when
    /// the range overlaps a live one.
    ///
    /// # Safety
    ///
    /// The bytes stay valid until [`SimDma::detach`]; `cpu` is what `dma` reaches.
    pub unsafe fn attach(&self, dma: DmaAddr, cpu: NonNull<u8>, len: usize, dir: Direction) -> bool {
        // SAFETY: forwarded contract.
        self.card
            .with(|c| unsafe { c.dma().attach_foreign(dma, cpu, len, dir) })
            .is_ok()
    }

    /// Ends an attachment.
    pub fn detach(&self, dma: DmaAddr, len: usize, dir: Direction) {
        self.card.with(|c| c.dma().unmap_foreign(dma, len, dir));
    }
}

impl<L: RawLock> Clone for SimDma<L> {
    fn clone(&self) -> Self {
        Self::new(&self.card)
    }
}

// SAFETY: every call is forwarded unchanged to the model's `DmaMemory`, which upholds the
// contract; the lock only serializes the calls.
unsafe impl<L: RawLock> DmaMemory for SimDma<L> {
    #[inline(never)]
    fn alloc_coherent(&self, len: usize, limit: AddrLimit) -> Result<RawRegion, DmaError> {
        self.card.with(|c| c.dma().alloc_coherent(len, limit))
    }
    #[inline(never)]
    unsafe fn free_coherent(&self, region: RawRegion) {
        // SAFETY: the caller guarantees the device no longer reaches the region.
        self.card.with(|c| unsafe { c.dma().free_coherent(region) });
    }
    #[inline(never)]
    fn alloc_page(&self) -> Result<PageMem, DmaError> {
        self.card.with(|c| c.dma().alloc_page())
    }
    #[inline(never)]
    fn free_page(&self, page: PageMem) {
        self.card.with(|c| c.dma().free_page(page));
    }
    #[inline(never)]
    fn map_page(&self, page: PageMem, dir: Direction) -> Result<DmaPage, (PageMem, DmaError)> {
        self.card.with(|c| c.dma().map_page(page, dir))
    }
    #[inline(never)]
    unsafe fn unmap_page(&self, page: DmaPage, dir: Direction) -> PageMem {
        // SAFETY: the caller guarantees the device no longer reaches the page.
        self.card.with(|c| unsafe { c.dma().unmap_page(page, dir) })
    }
    #[inline(never)]
    fn sync_for_cpu(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction) {
        self.card.with(|c| c.dma().sync_for_cpu(page, offset, len, dir));
    }
    #[inline(never)]
    fn sync_for_device(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction) {
        self.card
            .with(|c| c.dma().sync_for_device(page, offset, len, dir));
    }
}

// SAFETY: the model's foreign mappings give the device exactly the mapped bytes (bounds and
// direction checked on every device access, addresses never reused), ended by `unmap_foreign`;
// misuse is recorded as a violation, never undefined behaviour.
unsafe impl<L: RawLock + 'static> PacketMap for SimDma<L> {
    #[inline(never)]
    unsafe fn map_single(&self, cpu: NonNull<u8>, len: usize, dir: Direction) -> Option<DmaAddr> {
        // SAFETY: forwarded contract: the bytes stay valid until unmapped.
        self.card
            .with(|c| unsafe { c.dma().map_foreign(cpu, len, dir) })
            .ok()
    }

    #[inline(never)]
    fn unmap_single(&self, dma: DmaAddr, len: usize, dir: Direction) {
        self.card.with(|c| c.dma().unmap_foreign(dma, len, dir));
    }

    #[inline(never)]
    fn sync_single(&self, dma: DmaAddr, offset: usize, len: usize, dir: Direction, for_cpu: bool) {
        self.card
            .with(|c| c.dma().sync_foreign(dma, offset, len, dir, for_cpu));
    }

    /// The model's addresses are not the kernel's: the page pool cannot map for it, so each
    /// page is mapped with the model while the driver holds it.
    #[inline(never)]
    fn hold_page(&self, page: &RawPoolPage) -> Option<DmaAddr> {
        // SAFETY: the page stays valid while the driver holds it, and `release_page` unmaps it
        // before it goes back to the pool or on to the OS.
        unsafe { self.map_single(page.virt, page.len, Direction::Bidirectional) }
    }

    #[inline(never)]
    fn release_page(&self, dma: DmaAddr, len: usize) {
        self.unmap_single(dma, len, Direction::Bidirectional);
    }
}

/// Waiting on the model: the card works and its clock moves on by the delay.
pub struct SimDelay<L: RawLock> {
    card: Arc<SimCard<L>>,
}

impl<L: RawLock> SimDelay<L> {
    /// A delay over `card`'s clock.
    pub fn new(card: &Arc<SimCard<L>>) -> Self {
        Self {
            card: Arc::clone(card),
        }
    }
}

impl<L: RawLock> DelayNs for SimDelay<L> {
    #[inline(never)]
    fn delay_ns(&mut self, ns: u32) {
        self.card.with(|c| c.delay().delay_ns(ns));
    }
}
