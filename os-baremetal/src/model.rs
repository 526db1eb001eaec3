//! The image's HAL backend: the device model from `onic-sim` standing in for the card.
//!
//! The model (`onic_sim::Card`) is single-threaded: it keeps its state in a `RefCell`. In the image
//! two contexts reach it, the main loop and the timer handler (which advances the model's clock and
//! latches statistics). Every main-loop access therefore runs with interrupts disabled:
//!
//! - [`Guarded`] wraps the model's BAR windows and DMA memory and forwards every call inside a
//!   critical section. These are the `RegisterWindow` and `DmaMemory` the driver core gets.
//! - [`Model::with`] gives the rest of the self-test the card itself, also inside one.
//!
//! The timer handler runs with interrupts disabled by the CPU, so it can never interrupt a model
//! call in progress. (Were that rule broken, the `RefCell` would panic rather than alias.)

use core::ptr;
use core::sync::atomic::{AtomicPtr, Ordering};

use onic_embed::model::ModelAccess;
use onic_hal::dma::RawRegion;
use onic_hal::{AddrLimit, Direction, DmaError, DmaMemory, DmaPage, PageMem, RegisterWindow};
use onic_sim::{Card, QdmaWindow, ShellWindow, SimDma};

use crate::platform::without_interrupts;
use crate::time::TscDelay;

/// The card the interrupt handlers may use, or null.
static ISR_CARD: AtomicPtr<Card> = AtomicPtr::new(ptr::null_mut());

/// Runs `f` on the registered card, if any. For the interrupt handlers, which run with interrupts
/// disabled and so can never interrupt a main-loop model call (see the module docs).
pub fn with_card_in_handler<R>(f: impl FnOnce(&Card) -> R) -> Option<R> {
    let p = ISR_CARD.load(Ordering::Acquire);
    if p.is_null() {
        return None;
    }
    // SAFETY: a non-null pointer was stored by `Model::new` from a card borrowed for the Model's
    // whole life, and `Model::drop` clears it with interrupts off before that borrow ends; the
    // reference does not escape `f`, and handlers (the only callers) run with interrupts off, so
    // the registration cannot end while `f` runs.
    Some(f(unsafe { &*p }))
}

/// The model card as the main loop uses it, registered for the interrupt handlers while alive.
pub struct Model<'c> {
    card: &'c Card,
}

impl<'c> Model<'c> {
    /// Registers `card` for the handlers.
    pub fn new(card: &'c Card) -> Self {
        ISR_CARD.store(ptr::from_ref(card).cast_mut(), Ordering::Release);
        Self { card }
    }

    /// Runs `f` on the card with interrupts disabled.
    pub fn with<R>(&self, f: impl FnOnce(&'c Card) -> R) -> R {
        without_interrupts(|| f(self.card))
    }

    /// BAR0 of `func`, guarded.
    #[must_use]
    pub fn qdma(&self, func: u8) -> Guarded<QdmaWindow<'c>> {
        Guarded(self.card.qdma(func))
    }

    /// BAR2, guarded.
    #[must_use]
    pub fn shell(&self) -> Guarded<ShellWindow<'c>> {
        Guarded(self.card.shell())
    }

    /// DMA memory, guarded.
    #[must_use]
    pub fn dma(&self) -> Guarded<SimDma<'c>> {
        Guarded(self.card.dma())
    }
}

impl Drop for Model<'_> {
    fn drop(&mut self) {
        without_interrupts(|| ISR_CARD.store(ptr::null_mut(), Ordering::Release));
    }
}

/// The card itself as the shared AF_XDP scenario reaches it (the peer's end of the wire, the
/// model's clock): with interrupts held off, as every other access.
impl onic_embed::model::xsk_app::CardAccess for &Model<'_> {
    fn with_card<R>(&self, f: impl FnOnce(&Card) -> R) -> R {
        self.with(f)
    }
}

/// The model as the port's model host reaches it (`onic_embed::model`): every window and DMA
/// call guarded, the control path's delay on the TSC (the timer moves the model's clock).
impl<'c> ModelAccess for &Model<'c> {
    type Qdma = Guarded<QdmaWindow<'c>>;
    type Shell = Guarded<ShellWindow<'c>>;
    type Dma = Guarded<SimDma<'c>>;
    type Delay = TscDelay;

    fn qdma(&self, func: u8) -> Self::Qdma {
        Model::qdma(self, func)
    }

    fn shell(&self) -> Self::Shell {
        Model::shell(self)
    }

    fn dma(&self) -> Self::Dma {
        Model::dma(self)
    }

    fn delay(&self) -> TscDelay {
        TscDelay
    }
}

/// A model handle whose every call runs with interrupts disabled.
#[derive(Clone, Copy, Debug)]
pub struct Guarded<T>(T);

// SAFETY: forwards each call unchanged, once, in order, to the model's window, which upholds the
// contract; the critical section adds no accesses.
unsafe impl<T: RegisterWindow> RegisterWindow for Guarded<T> {
    fn read32(&self, offset: u32) -> u32 {
        without_interrupts(|| self.0.read32(offset))
    }

    fn write32(&self, offset: u32, value: u32) {
        without_interrupts(|| self.0.write32(offset, value));
    }
}

// SAFETY: forwards each call (and the sync flag) unchanged to the model's DMA memory, which
// upholds the contract.
unsafe impl<T: DmaMemory> DmaMemory for Guarded<T> {
    const SYNC_IS_NOOP: bool = T::SYNC_IS_NOOP;

    fn alloc_coherent(&self, len: usize, limit: AddrLimit) -> Result<RawRegion, DmaError> {
        without_interrupts(|| self.0.alloc_coherent(len, limit))
    }

    unsafe fn free_coherent(&self, region: RawRegion) {
        // SAFETY: the caller guarantees the device no longer reaches the region.
        without_interrupts(|| unsafe { self.0.free_coherent(region) });
    }

    fn alloc_page(&self) -> Result<PageMem, DmaError> {
        without_interrupts(|| self.0.alloc_page())
    }

    fn free_page(&self, page: PageMem) {
        without_interrupts(|| self.0.free_page(page));
    }

    fn map_page(&self, page: PageMem, dir: Direction) -> Result<DmaPage, (PageMem, DmaError)> {
        without_interrupts(|| self.0.map_page(page, dir))
    }

    unsafe fn unmap_page(&self, page: DmaPage, dir: Direction) -> PageMem {
        // SAFETY: the caller guarantees the device no longer reaches the page.
        without_interrupts(|| unsafe { self.0.unmap_page(page, dir) })
    }

    fn sync_for_cpu(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction) {
        without_interrupts(|| self.0.sync_for_cpu(page, offset, len, dir));
    }

    fn sync_for_device(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction) {
        without_interrupts(|| self.0.sync_for_device(page, offset, len, dir));
    }
}
