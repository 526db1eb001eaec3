//! DMA memory: device-visible addresses, coherent regions for rings, streaming pages for packets.
//!
//! Two kinds of memory cross the CPU/device boundary:
//!
//! - **Coherent regions** hold descriptor rings, completion rings and their status slots. Both sides
//!   access them at any time, so every access goes through volatile reads and writes
//!   ([`CoherentRegion`]). The QDMA needs them 4 KiB aligned, zeroed, and (for the completion ring
//!   context) below 4 GiB on the reference design (hardware.md §1.4, §5.6).
//! - **Streaming pages** hold packet data. A page is allocated once ([`DmaMemory::alloc_page`]),
//!   mapped once ([`DmaMemory::map_page`]), recycled many times with explicit ownership hand-offs
//!   ([`DmaMemory::sync_for_device`] before the device may touch it, [`DmaMemory::sync_for_cpu`]
//!   before the CPU reads what the device wrote), and finally unmapped and freed.
//!
//! # Giving memory back while the device may still use it
//!
//! Freeing a region or unmapping a page that the device still reaches lets it write into memory
//! that someone else now owns. The two raw seams, [`DmaMemory::free_coherent`] and
//! [`DmaMemory::unmap_page`], are therefore `unsafe`; the driver reaches them only through two
//! safe doors, each with its precondition stated where it stands:
//!
//! - A [`CoherentRegion`] whose address was handed to the device ([`CoherentRegion::lend`], which
//!   the queues use to program their contexts) is freed only by [`CoherentRegion::release`], which
//!   takes a [`Quiesced`] proof. Only [`invalidate_queue`](crate::context::invalidate_queue) makes
//!   one in safe code, after every INVALIDATE command of the queue completed. The proof names its
//!   queue but not the region: the owner of the region (the driver core's queue, which checks the
//!   proof names itself) passes the proof of the queue the region was lent to. A lent region that
//!   is simply dropped is leaked (logged): memory the device may keep writing is never reused.
//! - A page is unmapped through [`DmaPage::unmap`]. Holding a [`DmaPage`] by value outside a ring
//!   slot is the CPU's ownership of it: the same rule that makes [`DmaPage::bytes_mut`] safe, so
//!   this door rests on the driver's hand-off protocol, not on a type. A driver keeps a page the
//!   device may use in a ring slot, where it neither touches nor unmaps it, and takes it out only
//!   when a completion says the device is done with it or after the queue was quiesced (the driver
//!   core asks for the [`Quiesced`] proof before it gives a ring's pages back to their pool). A
//!   queue dropped without a teardown leaves its pages in their slots, where nothing unmaps them.

use core::fmt;
use core::mem::{ManuallyDrop, MaybeUninit};
use core::ptr::NonNull;

use crate::addr::DmaAddr;
use crate::context::Quiesced;

/// Size of one streaming page and the alignment of every coherent region.
pub const PAGE_SIZE: usize = 4096;

/// Direction of a streaming mapping or sync, in the DMA API's sense.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Direction {
    /// CPU writes, device reads (H2C, transmit).
    ToDevice,
    /// Device writes, CPU reads (C2H, receive).
    FromDevice,
    /// Both (receive buffers that XDP_TX may send back out).
    Bidirectional,
}

/// Where a coherent region may be placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum AddrLimit {
    /// Anywhere the device can reach.
    Any,
    /// Entirely below 4 GiB (32-bit coherent mask, as the QDMA rings use).
    Below4G,
}

/// Why a DMA operation failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum DmaError {
    /// No memory (or no address space under the requested limit) is left.
    OutOfMemory,
    /// The request itself is invalid (zero length, size overflow).
    InvalidRequest,
    /// Mapping the page for the device failed.
    MapFailed,
}

impl fmt::Display for DmaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::OutOfMemory => "out of DMA memory",
            Self::InvalidRequest => "invalid DMA request",
            Self::MapFailed => "DMA mapping failed",
        })
    }
}

impl core::error::Error for DmaError {}

/// A coherent allocation as handed out by a [`DmaMemory`] implementation. Owning this token is
/// owning the memory (not the device's use of it): it is neither `Clone` nor `Copy`, and only
/// [`DmaMemory::free_coherent`] consumes it. Wrap it in a [`CoherentRegion`] to access it.
#[derive(Debug)]
pub struct RawRegion {
    cpu: NonNull<u8>,
    dma: DmaAddr,
    len: usize,
}

// SAFETY: owning the token is owning the memory, which the constructor's contract makes valid
// from any thread; moving the token to another thread moves that ownership. (Not `Sync`: two
// threads with `&RawRegion` could write the same bytes through `cpu_ptr`.)
unsafe impl Send for RawRegion {}

impl RawRegion {
    /// Builds the token for a fresh allocation.
    ///
    /// # Safety
    ///
    /// `cpu` must point to `len` bytes, 4 KiB aligned and zeroed, that nothing else uses until the
    /// token is returned to the allocator, valid for volatile access from any thread; the device
    /// reaches the same bytes at `dma..dma + len`.
    #[must_use]
    pub const unsafe fn from_raw(cpu: NonNull<u8>, dma: DmaAddr, len: usize) -> Self {
        Self { cpu, dma, len }
    }

    /// CPU address of the first byte.
    #[must_use]
    pub const fn cpu_ptr(&self) -> NonNull<u8> {
        self.cpu
    }

    /// Device address of the first byte.
    #[must_use]
    pub const fn dma_addr(&self) -> DmaAddr {
        self.dma
    }

    /// Length in bytes.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the region is empty (never true for a region from an allocator).
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One CPU page of packet memory, not (or no longer) mapped for the device. Owning this token is
/// owning the page.
#[derive(Debug)]
pub struct PageMem {
    cpu: NonNull<u8>,
}

impl PageMem {
    /// Builds the token for a fresh page.
    ///
    /// # Safety
    ///
    /// `cpu` must point to [`PAGE_SIZE`] bytes, [`PAGE_SIZE`]-aligned, that nothing else uses until
    /// the token is returned to its allocator.
    #[must_use]
    pub const unsafe fn from_raw(cpu: NonNull<u8>) -> Self {
        Self { cpu }
    }

    /// CPU address of the page.
    #[must_use]
    pub const fn cpu_ptr(&self) -> NonNull<u8> {
        self.cpu
    }
}

/// A page mapped for the device: the CPU token plus the device address of its first byte.
///
/// The page's bytes are reachable from the CPU through [`DmaPage::bytes`] and
/// [`DmaPage::bytes_mut`]. The driver core keeps a page that the device may be writing in a ring
/// slot and never reads it before the completion says the device is done and
/// [`DmaMemory::sync_for_cpu`] has run; that hand-off is the protocol every DMA driver relies on.
#[derive(Debug)]
pub struct DmaPage {
    mem: PageMem,
    dma: DmaAddr,
}

// SAFETY: the token owns its page exclusively (see `PageMem::from_raw`), so moving it to another
// thread moves that ownership; it holds no thread-bound state.
unsafe impl Send for DmaPage {}

impl DmaPage {
    /// Builds a mapped page.
    ///
    /// # Safety
    ///
    /// `dma` must be the device address at which `mem`'s first byte is mapped, valid until the
    /// page is unmapped through the same allocator.
    #[must_use]
    pub const unsafe fn from_raw(mem: PageMem, dma: DmaAddr) -> Self {
        Self { mem, dma }
    }

    /// Device address of the page's first byte.
    #[must_use]
    pub const fn dma_addr(&self) -> DmaAddr {
        self.dma
    }

    /// The CPU-side token (for allocators).
    #[must_use]
    pub const fn mem(&self) -> &PageMem {
        &self.mem
    }

    /// Splits into the CPU page and the device address (for allocators unmapping it).
    #[must_use]
    pub fn into_parts(self) -> (PageMem, DmaAddr) {
        (self.mem, self.dma)
    }

    /// Unmaps the page through `dma`, the allocator that mapped it, with `dir`, the direction it
    /// was mapped with: the safe door to [`DmaMemory::unmap_page`].
    ///
    /// Owning the token outside a ring slot is the CPU's ownership of the page (module docs): a
    /// page the device may still use sits in a ring slot and is taken out only after a completion
    /// or a quiesced teardown, so the device no longer reaches a page that reaches this call.
    #[must_use]
    pub fn unmap<D: DmaMemory + ?Sized>(self, dma: &D, dir: Direction) -> PageMem {
        // SAFETY: the caller owns the page outside any ring slot, which by the protocol above
        // means no descriptor the device may still fetch points at it and no DMA is in flight.
        unsafe { dma.unmap_page(self, dir) }
    }

    /// The page's bytes.
    #[must_use]
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: the token owns PAGE_SIZE valid bytes (PageMem::from_raw); the shared borrow of
        // `self` prevents a simultaneous `bytes_mut`.
        unsafe { core::slice::from_raw_parts(self.mem.cpu.as_ptr(), PAGE_SIZE) }
    }

    /// The page's bytes, writable.
    #[must_use]
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`, and the exclusive borrow of `self` makes this the only reference.
        unsafe { core::slice::from_raw_parts_mut(self.mem.cpu.as_ptr(), PAGE_SIZE) }
    }
}

/// A fixed-capacity LIFO stack of [`DmaPage`]s that moves runs of pages to another stack as one
/// block copy: a page pool's cache and the bursts taken from it or given back to it.
///
/// `slots[..len]` hold pages, `slots[len..]` nothing. A page token is a plain value (two words,
/// no drop glue), so moving a run of them is copying their bytes and forgetting the source slots;
/// that is what [`PageStack::move_top_to`] does, with no per-page tag or branch. Every page put in
/// comes out exactly once (by [`pop`](Self::pop) or a move), and pages still held when the stack
/// is dropped are dropped with it, like any other owned [`DmaPage`] (an owner that must give its
/// pages back empties the stack first).
///
/// The slots start on a cache line (64 bytes). A burst taken from a pool's cache and given back
/// right after is copied twice through the same bytes; when both runs start on a line, the second
/// copy's loads line up with the first copy's stores. In the pool benchmark (bursts of 32) the
/// pair then costs about 0.43 ns per page, against 0.9 with 8-byte aligned slots (0.65 when the
/// cache's run starts off a line, e.g. with an odd number of pages cached).
#[repr(C, align(64))]
pub struct PageStack<const N: usize> {
    slots: [MaybeUninit<DmaPage>; N],
    len: usize,
}

impl<const N: usize> PageStack<N> {
    /// An empty stack; `const`, so it can live in a `static` or another `const fn`'s value.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            slots: [const { MaybeUninit::uninit() }; N],
            len: 0,
        }
    }

    /// Pages held.
    #[must_use]
    pub const fn len(&self) -> usize {
        self.len
    }

    /// Whether the stack holds no page.
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Room left: how many more pages fit.
    #[must_use]
    pub const fn room(&self) -> usize {
        N - self.len
    }

    /// Puts a page on top.
    ///
    /// # Errors
    ///
    /// The page comes back when the stack is full.
    #[inline]
    pub fn push(&mut self, page: DmaPage) -> Result<(), DmaPage> {
        match self.slots.get_mut(self.len) {
            Some(slot) => {
                slot.write(page);
                self.len += 1;
                Ok(())
            }
            None => Err(page),
        }
    }

    /// Takes the top page out.
    #[inline]
    pub fn pop(&mut self) -> Option<DmaPage> {
        let top = self.len.checked_sub(1)?;
        let slot = self.slots.get(top)?;
        self.len = top;
        // SAFETY: `top < len`, so the slot holds a page; `len` no longer counts it, so the value
        // read here is its only owner.
        Some(unsafe { slot.assume_init_read() })
    }

    /// The pages, bottom first.
    #[must_use]
    pub fn as_slice(&self) -> &[DmaPage] {
        let held = &self.slots[..self.len];
        // SAFETY: `slots[..len]` hold pages, and `MaybeUninit<DmaPage>` has `DmaPage`'s layout.
        unsafe { &*(core::ptr::from_ref(held) as *const [DmaPage]) }
    }

    /// Moves the top `max` pages (fewer if this stack holds fewer or `to` has less room) onto
    /// `to`, keeping their order; returns how many moved.
    #[inline]
    pub fn move_top_to<const M: usize>(&mut self, to: &mut PageStack<M>, max: usize) -> usize {
        let n = max.min(self.len).min(to.room());
        let from = self.len - n;
        // SAFETY: `len <= N` and `to.len <= M` always hold (only this type changes them, and never
        // past the capacity), so `from + n == len` and `to.len + n <= M` keep both pointers and
        // both runs inside their arrays. `slots[from..len]` hold pages and `to.slots[to.len..]`
        // are empty; the runs do not overlap, as they lie in two distinct stacks (two exclusive
        // borrows). The lengths change right after, so each page is owned by `to` alone.
        unsafe {
            core::ptr::copy_nonoverlapping(
                self.slots.as_ptr().add(from),
                to.slots.as_mut_ptr().add(to.len),
                n,
            );
        }
        self.len = from;
        to.len += n;
        n
    }
}

impl<const N: usize> Default for PageStack<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> Drop for PageStack<N> {
    fn drop(&mut self) {
        while self.pop().is_some() {}
    }
}

impl<const N: usize> fmt::Debug for PageStack<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PageStack")
            .field("len", &self.len)
            .field("capacity", &N)
            .finish()
    }
}

/// Device-visible memory for one device.
///
/// # Implementation safety
///
/// - [`alloc_coherent`](Self::alloc_coherent) returns regions that satisfy
///   [`RawRegion::from_raw`]'s contract, honour the [`AddrLimit`], and stay valid until freed.
/// - [`alloc_page`](Self::alloc_page) returns pages that satisfy [`PageMem::from_raw`];
///   [`map_page`](Self::map_page) returns the address at which the device reaches exactly that
///   page.
/// - The sync methods make the CPU's and the device's views of the given bytes agree in the given
///   direction (no-ops on coherent platforms).
/// - [`SYNC_IS_NOOP`](Self::SYNC_IS_NOOP) is `true` only if both sync methods do nothing at all
///   for every page, range and direction, so that skipping a call changes nothing.
pub unsafe trait DmaMemory {
    /// Whether [`sync_for_cpu`](Self::sync_for_cpu) and [`sync_for_device`](Self::sync_for_device)
    /// are no-ops: the CPU and the device always see the same bytes (cache-coherent DMA, no bounce
    /// buffers) and the implementation neither checks nor counts syncs.
    ///
    /// Callers that sync many pages at once (a page pool recycling a burst) test it once and skip
    /// the whole loop, as Linux's `page_pool` syncs only when its device needs it. A correct call
    /// of a sync method is never wrong, so the default is `false`: an implementation that bounces,
    /// flushes caches or checks syncs (the behavioral model) keeps it, and one that is coherent
    /// host memory says `true`.
    const SYNC_IS_NOOP: bool = false;

    /// Allocates `len` bytes of zeroed, 4 KiB-aligned coherent memory within `limit`.
    ///
    /// # Errors
    ///
    /// [`DmaError::InvalidRequest`] for a zero length, [`DmaError::OutOfMemory`] when nothing fits.
    fn alloc_coherent(&self, len: usize, limit: AddrLimit) -> Result<RawRegion, DmaError>;

    /// Returns a coherent region to the allocator.
    ///
    /// # Safety
    ///
    /// The device no longer reaches the region: no context, descriptor or register of the card
    /// points into it, and no DMA to it is in flight. (Drivers free through
    /// [`CoherentRegion::release`], which asks for that as a [`Quiesced`] proof.)
    unsafe fn free_coherent(&self, region: RawRegion);

    /// Allocates one page of packet memory.
    ///
    /// # Errors
    ///
    /// [`DmaError::OutOfMemory`] when no page is left.
    fn alloc_page(&self) -> Result<PageMem, DmaError>;

    /// Frees a page that is not mapped.
    fn free_page(&self, page: PageMem);

    /// Maps a page for the device, for the life of the mapping.
    ///
    /// # Errors
    ///
    /// [`DmaError::MapFailed`] when no mapping can be made; the page is handed back.
    fn map_page(&self, page: PageMem, dir: Direction) -> Result<DmaPage, (PageMem, DmaError)>;

    /// Unmaps a page.
    ///
    /// # Safety
    ///
    /// The device no longer reaches the page: no descriptor the device may still fetch points
    /// into it, and no DMA to it is in flight. (Drivers unmap through [`DmaPage::unmap`], whose
    /// token carries that by the ownership rule in the module docs.)
    unsafe fn unmap_page(&self, page: DmaPage, dir: Direction) -> PageMem;

    /// Hands `len` bytes at `offset` of the page to the CPU after the device wrote them.
    fn sync_for_cpu(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction);

    /// Hands `len` bytes at `offset` of the page to the device after the CPU wrote them.
    fn sync_for_device(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction);
}

// SAFETY: forwards every call (and the sync flag) unchanged to `T`, which upholds the contract.
unsafe impl<T: DmaMemory + ?Sized> DmaMemory for &T {
    const SYNC_IS_NOOP: bool = T::SYNC_IS_NOOP;

    fn alloc_coherent(&self, len: usize, limit: AddrLimit) -> Result<RawRegion, DmaError> {
        (**self).alloc_coherent(len, limit)
    }
    unsafe fn free_coherent(&self, region: RawRegion) {
        // SAFETY: the caller upholds the same contract for `T`.
        unsafe { (**self).free_coherent(region) };
    }
    fn alloc_page(&self) -> Result<PageMem, DmaError> {
        (**self).alloc_page()
    }
    fn free_page(&self, page: PageMem) {
        (**self).free_page(page);
    }
    fn map_page(&self, page: PageMem, dir: Direction) -> Result<DmaPage, (PageMem, DmaError)> {
        (**self).map_page(page, dir)
    }
    unsafe fn unmap_page(&self, page: DmaPage, dir: Direction) -> PageMem {
        // SAFETY: the caller upholds the same contract for `T`.
        unsafe { (**self).unmap_page(page, dir) }
    }
    fn sync_for_cpu(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction) {
        (**self).sync_for_cpu(page, offset, len, dir);
    }
    fn sync_for_device(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction) {
        (**self).sync_for_device(page, offset, len, dir);
    }
}

/// An owned coherent region. All accesses are volatile and bounds-checked: the device may change
/// the memory at any time, so nothing here hands out references into it.
///
/// A region the device was never told about is freed when dropped. Once its address went to the
/// device ([`lend`](Self::lend)), only [`release`](Self::release) with a [`Quiesced`] proof frees
/// it; dropped without one, it is leaked (and logged), since the device may still write it.
pub struct CoherentRegion<D: DmaMemory> {
    dma: D,
    /// The allocation; taken out only by `drop`, which frees or leaks it.
    raw: ManuallyDrop<RawRegion>,
    /// The device may use the region: its address went out through `lend` and no proof came
    /// back through `release`.
    lent: bool,
}

impl<D: DmaMemory> CoherentRegion<D> {
    /// Allocates a zeroed region of `len` bytes within `limit`.
    ///
    /// # Errors
    ///
    /// As [`DmaMemory::alloc_coherent`].
    pub fn new(dma: D, len: usize, limit: AddrLimit) -> Result<Self, DmaError> {
        let raw = dma.alloc_coherent(len, limit)?;
        Ok(Self {
            dma,
            raw: ManuallyDrop::new(raw),
            lent: false,
        })
    }

    fn raw(&self) -> &RawRegion {
        &self.raw
    }

    /// Device address of the first byte, to look at (logs, tests). To point the device at the
    /// region, use [`lend`](Self::lend).
    #[must_use]
    pub fn dma_addr(&self) -> DmaAddr {
        self.raw().dma
    }

    /// Device address of the first byte, for a context or descriptor that makes the device use the
    /// region. From now on the region is freed only by [`release`](Self::release); dropping it
    /// leaks it.
    #[must_use]
    pub fn lend(&mut self) -> DmaAddr {
        self.lent = true;
        self.raw().dma
    }

    /// Whether the region's address was handed to the device.
    #[must_use]
    pub const fn is_lent(&self) -> bool {
        self.lent
    }

    /// Frees the region, lent or not, once `proof` says the queue that used it was quiesced.
    pub fn release(mut self, proof: &Quiesced) {
        let _ = proof;
        // The proof says every context of the queue that used this region was invalidated, so
        // no context, descriptor or register points into it any longer: `drop` frees it.
        self.lent = false;
    }

    /// Length in bytes.
    #[must_use]
    pub fn len(&self) -> usize {
        self.raw().len
    }

    /// Whether the region is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn ptr_at<const N: usize>(&self, offset: usize) -> Option<*mut u8> {
        let raw = self.raw();
        if !(offset.is_multiple_of(N) && offset.checked_add(N).is_some_and(|end| end <= raw.len)) {
            access_outside(offset, N, raw.len);
            return None;
        }
        // SAFETY: `offset + N <= len`, so the pointer stays inside the allocation.
        Some(unsafe { raw.cpu.as_ptr().add(offset) })
    }

    /// Reads the little-endian `u32` at `offset` (4-byte aligned).
    ///
    /// # Panics
    ///
    /// If the access is misaligned or outside the region (a driver bug, never device input), in
    /// builds with debug assertions (tests, Miri, fuzzing). Without them (the kernel module, the
    /// bare-metal image) the bug is logged, the read gives all ones and a write writes nothing: a
    /// driver bug must not take the machine down.
    #[must_use]
    pub fn read_u32(&self, offset: usize) -> u32 {
        let Some(p) = self.ptr_at::<4>(offset) else {
            return u32::MAX;
        };
        // SAFETY: in bounds and aligned (checked in `ptr_at`; the region is 4 KiB aligned); the
        // memory is valid for volatile access for the life of the token.
        u32::from_le(unsafe { p.cast::<u32>().read_volatile() })
    }

    /// Writes `value` little-endian at `offset` (4-byte aligned).
    ///
    /// # Panics
    ///
    /// As [`read_u32`](Self::read_u32).
    pub fn write_u32(&self, offset: usize, value: u32) {
        let Some(p) = self.ptr_at::<4>(offset) else {
            return;
        };
        // SAFETY: as in `read_u32`.
        unsafe { p.cast::<u32>().write_volatile(value.to_le()) };
    }

    /// Reads the little-endian `u64` at `offset` (8-byte aligned).
    ///
    /// # Panics
    ///
    /// As [`read_u32`](Self::read_u32).
    #[must_use]
    pub fn read_u64(&self, offset: usize) -> u64 {
        let Some(p) = self.ptr_at::<8>(offset) else {
            return u64::MAX;
        };
        // SAFETY: as in `read_u32`, with 8-byte alignment checked.
        u64::from_le(unsafe { p.cast::<u64>().read_volatile() })
    }

    /// Writes `value` little-endian at `offset` (8-byte aligned).
    ///
    /// # Panics
    ///
    /// As [`read_u32`](Self::read_u32).
    pub fn write_u64(&self, offset: usize, value: u64) {
        let Some(p) = self.ptr_at::<8>(offset) else {
            return;
        };
        // SAFETY: as in `read_u64`.
        unsafe { p.cast::<u64>().write_volatile(value.to_le()) };
    }

    /// The start of `count` 8-byte entries `stride` bytes apart from `offset`, after one check
    /// that all of them are aligned and inside the region.
    fn run_at(&self, offset: usize, stride: usize, count: usize) -> Option<*mut u8> {
        let raw = self.raw();
        let end = count
            .checked_sub(1)
            .and_then(|last| stride.checked_mul(last))
            .and_then(|span| span.checked_add(offset))
            .and_then(|last_at| last_at.checked_add(8));
        if !(offset.is_multiple_of(8) && stride.is_multiple_of(8) && end.is_none_or(|end| end <= raw.len)) {
            run_outside(offset, count, stride, raw.len);
            return None;
        }
        Some(raw.cpu.as_ptr())
    }

    /// The `count` little-endian `u64`s at `offset`, `offset + stride`, ... (all 8-byte
    /// aligned), checked once to lie in the region: the batch form of
    /// [`read_u64`](Self::read_u64) for a ring's entries. Iterating reads each value when it is
    /// reached (a volatile read), so a caller that stops early reads nothing after it. The CPU is
    /// asked to start loading the run's cache lines at once (`prefetcht0` on x86-64): a caller
    /// that does much work per entry then finds the later ones at hand.
    ///
    /// # Panics
    ///
    /// If an entry would be misaligned or outside the region (a driver bug), with debug
    /// assertions; without them the run is logged and yields nothing (as [`read_u32`](Self::read_u32)).
    #[inline]
    pub fn u64s(&self, offset: usize, stride: usize, count: usize) -> U64s<'_> {
        let (base, count) = match self.run_at(offset, stride, count) {
            Some(base) => (base, count),
            None => (self.raw().cpu.as_ptr(), 0),
        };
        if let Some(last) = count.checked_sub(1) {
            // No overflow: `run_at` checked that the run ends inside the region.
            prefetch(base.wrapping_add(offset), last * stride + 8);
        }
        U64s {
            // `wrapping_add`: the pointer only becomes a place to read in `next`, where it is one
            // of the checked entries (for an empty run it may lie past the end, never read).
            next: base.wrapping_add(offset),
            stride,
            left: count,
            region: core::marker::PhantomData,
        }
    }

    /// Writes `values` little-endian at `offset`, `offset + stride`, ... (all 8-byte aligned),
    /// with one bounds check for the whole run: the batch form of [`write_u64`](Self::write_u64).
    ///
    /// # Panics
    ///
    /// As [`u64s`](Self::u64s).
    pub fn write_u64s(&self, offset: usize, stride: usize, values: &[u64]) {
        let mut it = values.iter();
        let _ = self.write_u64s_with(offset, stride, values.len(), |_| it.next().copied());
    }

    /// Writes up to `count` little-endian `u64`s at `offset`, `offset + stride`, ..., the `i`-th
    /// being what `next(i)` returns, until it returns `None`; returns how many were written. The
    /// values are made and written in one pass (no staging array), after one bounds check for
    /// all `count` entries.
    ///
    /// # Panics
    ///
    /// As [`u64s`](Self::u64s).
    #[inline]
    pub fn write_u64s_with(
        &self,
        offset: usize,
        stride: usize,
        count: usize,
        mut next: impl FnMut(usize) -> Option<u64>,
    ) -> usize {
        let Some(base) = self.run_at(offset, stride, count) else {
            return 0;
        };
        for i in 0..count {
            let Some(v) = next(i) else {
                return i;
            };
            // SAFETY: `run_at` checked that every entry `offset + i * stride` (i < count) is
            // 8-byte aligned and ends inside the region, so the pointer stays in the allocation;
            // the memory is valid for volatile access for the life of the token.
            unsafe {
                base.add(offset + i * stride)
                    .cast::<u64>()
                    .write_volatile(v.to_le())
            };
        }
        count
    }
}

/// Asks the CPU to bring the cache lines of `len` bytes from `start` into its caches: a hint
/// (x86-64 `prefetcht0`; nothing on other architectures and under Miri), which reads nothing
/// into the program and cannot fault, whatever the address.
#[inline]
fn prefetch(start: *const u8, len: usize) {
    // Miri runs no assembly; a hint changes nothing it checks.
    #[cfg(all(target_arch = "x86_64", not(miri)))]
    {
        let mut off = 0;
        while off < len {
            // SAFETY: a prefetch only hints at an address; it neither reads nor writes memory the
            // program sees, touches no register but its operand, and never faults. Written as
            // `asm!` rather than `_mm_prefetch`, which is an SSE function: the kernel module's
            // target has SSE off.
            unsafe {
                core::arch::asm!(
                    "prefetcht0 [{0}]",
                    in(reg) start.wrapping_add(off),
                    options(nostack, preserves_flags, readonly)
                );
            }
            off += 64;
        }
    }
    #[cfg(not(all(target_arch = "x86_64", not(miri))))]
    let _ = (start, len);
}

/// The entries of a run in a [`CoherentRegion`] ([`CoherentRegion::u64s`]), read one by one as
/// the iteration reaches them.
pub struct U64s<'a> {
    next: *mut u8,
    stride: usize,
    left: usize,
    region: core::marker::PhantomData<&'a [u8]>,
}

impl Iterator for U64s<'_> {
    type Item = u64;

    #[inline]
    fn next(&mut self) -> Option<u64> {
        self.left = self.left.checked_sub(1)?;
        // SAFETY: `CoherentRegion::u64s` checked that each of the run's `left` remaining entries
        // from `next` on is 8-byte aligned and inside the region, which the borrow keeps alive;
        // its memory is valid for volatile access.
        let v = u64::from_le(unsafe { self.next.cast::<u64>().read_volatile() });
        self.next = self.next.wrapping_add(self.stride);
        Some(v)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// A coherent access of `size` bytes at `offset` outside its region of `len` bytes or misaligned
/// (a driver bug): a panic with debug assertions (tests find the bug), a logged error without
/// them (a kernel or firmware keeps running; the access is not made). Out of line and cold, so
/// that the accesses' fast paths do not set up its message.
#[cold]
#[inline(never)]
#[track_caller]
fn access_outside(offset: usize, size: usize, len: usize) {
    if cfg!(debug_assertions) {
        panic!("coherent access of {size} bytes at {offset:#x} outside a region of {len:#x} bytes");
    }
    crate::error!(
        "onic: driver bug, not carried out: coherent access of {} bytes at {:#x} outside a region of {:#x} bytes",
        size,
        offset,
        len
    );
}

/// As [`access_outside`] for a run of `count` entries of 8 bytes, `stride` bytes apart.
#[cold]
#[inline(never)]
#[track_caller]
fn run_outside(offset: usize, count: usize, stride: usize, len: usize) {
    if cfg!(debug_assertions) {
        panic!(
            "coherent access of {count} entries of 8 bytes every {stride} bytes from {offset:#x} outside a \
             region of {len:#x} bytes"
        );
    }
    crate::error!(
        "onic: driver bug, not carried out: coherent access of {} entries of 8 bytes every {} bytes from {:#x} outside a region of {:#x} bytes",
        count,
        stride,
        offset,
        len
    );
}

impl<D: DmaMemory> Drop for CoherentRegion<D> {
    fn drop(&mut self) {
        if self.lent {
            crate::warn!(
                "onic: coherent region at {:#x} ({} bytes) dropped while lent to the device: leaked",
                self.raw.dma.get(),
                self.raw.len
            );
            return;
        }
        // SAFETY: `drop` runs once, and nothing reads `raw` after it.
        let raw = unsafe { ManuallyDrop::take(&mut self.raw) };
        // SAFETY: not lent: the region's address never left this type through `lend`, or
        // `release` came with the proof that the device no longer uses it.
        unsafe { self.dma.free_coherent(raw) };
    }
}

impl<D: DmaMemory> fmt::Debug for CoherentRegion<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoherentRegion")
            .field("dma", &self.dma_addr())
            .field("len", &self.len())
            .field("lent", &self.lent)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use core::cell::{Cell, RefCell};
    use std::alloc::{alloc_zeroed, dealloc, Layout};
    use std::vec::Vec;

    use super::*;

    /// Host memory standing in for a device's DMA memory: zeroed 4 KiB-aligned heap blocks, and
    /// device addresses handed out from a counter (the host has no IOMMU to ask). It remembers
    /// every block it gave out, so a test can check that everything came back.
    struct HostDma {
        live: RefCell<Vec<(usize, usize)>>,
        next_dma: Cell<u64>,
        mapped: Cell<usize>,
    }

    impl HostDma {
        fn new() -> Self {
            Self {
                live: RefCell::new(Vec::new()),
                next_dma: Cell::new(0x10_0000),
                mapped: Cell::new(0),
            }
        }

        fn block(len: usize) -> Layout {
            Layout::from_size_align(len, PAGE_SIZE).expect("valid layout")
        }

        fn take(&self, len: usize) -> Option<NonNull<u8>> {
            // SAFETY: the layout has a non-zero size (callers reject zero lengths).
            let p = NonNull::new(unsafe { alloc_zeroed(Self::block(len)) })?;
            self.live.borrow_mut().push((p.as_ptr() as usize, len));
            Some(p)
        }

        fn give_back(&self, p: NonNull<u8>) {
            let mut live = self.live.borrow_mut();
            let at = live
                .iter()
                .position(|&(a, _)| a == p.as_ptr() as usize)
                .expect("block from this allocator");
            let (_, len) = live.swap_remove(at);
            // SAFETY: `p` came from `alloc_zeroed` with this layout (recorded in `live`) and is
            // freed once, as the entry was just removed.
            unsafe { dealloc(p.as_ptr(), Self::block(len)) };
        }

        fn outstanding(&self) -> usize {
            self.live.borrow().len()
        }
    }

    // SAFETY: blocks are fresh, zeroed, 4 KiB aligned and owned by the token until handed back;
    // device addresses are unique per live block and respect the limit; the host is coherent, so
    // the syncs have nothing to do (and are empty, as the flag says).
    unsafe impl DmaMemory for HostDma {
        const SYNC_IS_NOOP: bool = true;

        fn alloc_coherent(&self, len: usize, limit: AddrLimit) -> Result<RawRegion, DmaError> {
            if len == 0 {
                return Err(DmaError::InvalidRequest);
            }
            let dma = DmaAddr::new(self.next_dma.get());
            if limit == AddrLimit::Below4G && !dma.fits_below_4g(len as u64) {
                return Err(DmaError::OutOfMemory);
            }
            let cpu = self.take(len).ok_or(DmaError::OutOfMemory)?;
            self.next_dma
                .set(dma.get() + len.next_multiple_of(PAGE_SIZE) as u64);
            // SAFETY: see the impl's comment.
            Ok(unsafe { RawRegion::from_raw(cpu, dma, len) })
        }

        unsafe fn free_coherent(&self, region: RawRegion) {
            self.give_back(region.cpu_ptr());
        }

        fn alloc_page(&self) -> Result<PageMem, DmaError> {
            let cpu = self.take(PAGE_SIZE).ok_or(DmaError::OutOfMemory)?;
            // SAFETY: see the impl's comment.
            Ok(unsafe { PageMem::from_raw(cpu) })
        }

        fn free_page(&self, page: PageMem) {
            self.give_back(page.cpu_ptr());
        }

        fn map_page(&self, page: PageMem, _dir: Direction) -> Result<DmaPage, (PageMem, DmaError)> {
            let dma = DmaAddr::new(self.next_dma.get());
            self.next_dma.set(dma.get() + PAGE_SIZE as u64);
            self.mapped.set(self.mapped.get() + 1);
            // SAFETY: the address is unique to this mapping until `unmap_page`.
            Ok(unsafe { DmaPage::from_raw(page, dma) })
        }

        unsafe fn unmap_page(&self, page: DmaPage, _dir: Direction) -> PageMem {
            self.mapped.set(self.mapped.get() - 1);
            page.into_parts().0
        }

        fn sync_for_cpu(&self, _page: &DmaPage, _offset: usize, _len: usize, _dir: Direction) {}

        fn sync_for_device(&self, _page: &DmaPage, _offset: usize, _len: usize, _dir: Direction) {}
    }

    /// The region's bytes as the device sees them (the host stand-in maps them one to one).
    fn device_bytes<D: DmaMemory>(region: &CoherentRegion<D>, offset: usize, len: usize) -> Vec<u8> {
        let raw = region.raw();
        assert!(offset + len <= raw.len());
        (0..len)
            // SAFETY: inside the live region (checked above); volatile, as the driver side is.
            .map(|i| unsafe { raw.cpu_ptr().as_ptr().add(offset + i).read_volatile() })
            .collect()
    }

    #[test]
    fn coherent_words_are_little_endian_in_device_memory() {
        let dma = HostDma::new();
        let region = CoherentRegion::new(&dma, 2 * PAGE_SIZE, AddrLimit::Below4G).unwrap();
        assert_eq!(region.len(), 2 * PAGE_SIZE);
        assert!(region.dma_addr().is_aligned(PAGE_SIZE as u64));
        assert_eq!(device_bytes(&region, 0, 64), [0; 64], "fresh regions are zeroed");

        region.write_u32(4, 0x1122_3344);
        region.write_u64(8, 0x0102_0304_0506_0708);
        let last = 2 * PAGE_SIZE - 8;
        region.write_u64(last, u64::MAX - 1);
        assert_eq!(device_bytes(&region, 4, 4), [0x44, 0x33, 0x22, 0x11]);
        assert_eq!(device_bytes(&region, 8, 8), [8, 7, 6, 5, 4, 3, 2, 1]);
        assert_eq!(region.read_u32(4), 0x1122_3344);
        assert_eq!(region.read_u64(8), 0x0102_0304_0506_0708);
        assert_eq!(region.read_u64(last), u64::MAX - 1);
        assert_eq!(region.read_u32(last), 0xFFFF_FFFE, "the low word comes first");
    }

    #[test]
    fn strided_runs_touch_exactly_their_entries() {
        let dma = HostDma::new();
        let region = CoherentRegion::new(&dma, PAGE_SIZE, AddrLimit::Any).unwrap();
        // Sixteen-byte ring entries: the first word of each of the 256 entries, up to the last.
        let values: Vec<u64> = (0..256u64).map(|i| i << 32 | i).collect();
        region.write_u64s(0, 16, &values);
        let back: Vec<u64> = region.u64s(0, 16, 256).collect();
        assert_eq!(back, values);
        assert_eq!(
            region.read_u64(8),
            0,
            "the second word of an entry stays untouched"
        );
        assert_eq!(region.read_u64(PAGE_SIZE - 16), 255 << 32 | 255);
        // An empty run checks nothing and touches nothing.
        assert_eq!(region.u64s(PAGE_SIZE, 8, 0).next(), None);
        region.write_u64s(PAGE_SIZE, 8, &[]);
    }

    #[test]
    fn partial_runs_stop_where_the_caller_says() {
        let dma = HostDma::new();
        let region = CoherentRegion::new(&dma, PAGE_SIZE, AddrLimit::Any).unwrap();
        // Values made on the fly: the third `None` ends the run after two entries.
        let written = region.write_u64s_with(64, 16, 8, |i| (i < 2).then(|| 0xA0 + i as u64));
        assert_eq!(written, 2);
        assert_eq!((region.read_u64(64), region.read_u64(80)), (0xA0, 0xA1));
        assert_eq!(
            region.read_u64(96),
            0,
            "nothing past the end of the run is written"
        );
        // A run read in part, then in full.
        region.write_u64s(0, 8, &[1, 3, 4, 5]);
        let mut run = region.u64s(0, 8, 4);
        assert_eq!(
            (run.next(), run.next(), run.size_hint()),
            (Some(1), Some(3), (2, Some(2)))
        );
        let all: Vec<u64> = region.u64s(0, 8, 4).collect();
        assert_eq!(all, [1, 3, 4, 5]);
    }

    #[test]
    #[should_panic(expected = "outside a")]
    fn a_partial_run_is_checked_for_its_whole_length() {
        let dma = HostDma::new();
        let region = CoherentRegion::new(&dma, PAGE_SIZE, AddrLimit::Any).unwrap();
        // Only the first entry would be written, but the run of two crosses the end.
        let _ = region.write_u64s_with(PAGE_SIZE - 8, 8, 2, |i| (i == 0).then_some(1));
    }

    #[test]
    #[should_panic(expected = "outside a region")]
    fn a_word_past_the_end_panics() {
        let dma = HostDma::new();
        let region = CoherentRegion::new(&dma, PAGE_SIZE, AddrLimit::Any).unwrap();
        let _ = region.read_u32(PAGE_SIZE);
    }

    #[test]
    #[should_panic(expected = "outside a region")]
    fn a_misaligned_word_panics() {
        let dma = HostDma::new();
        let region = CoherentRegion::new(&dma, PAGE_SIZE, AddrLimit::Any).unwrap();
        region.write_u64(4, 1);
    }

    #[test]
    #[should_panic(expected = "outside a")]
    fn a_run_whose_last_entry_crosses_the_end_panics() {
        let dma = HostDma::new();
        let region = CoherentRegion::new(&dma, PAGE_SIZE, AddrLimit::Any).unwrap();
        // Entries at 4072 and 4088: the second ends exactly at the end, which is fine.
        let _ = region.u64s(PAGE_SIZE - 24, 16, 2);
        // Entries at 4080 and 4096: the second lies past the end, though none is read yet.
        let _ = region.u64s(PAGE_SIZE - 16, 16, 2);
    }

    #[test]
    fn regions_go_back_to_the_allocator_when_dropped() {
        let dma = HostDma::new();
        let a = CoherentRegion::new(&dma, PAGE_SIZE, AddrLimit::Below4G).unwrap();
        let b = CoherentRegion::new(&dma, 3 * PAGE_SIZE, AddrLimit::Below4G).unwrap();
        assert_ne!(a.dma_addr(), b.dma_addr());
        assert_eq!(dma.outstanding(), 2);
        drop(a);
        assert_eq!(dma.outstanding(), 1);
        drop(b);
        assert_eq!(dma.outstanding(), 0);
        assert_eq!(
            CoherentRegion::new(&dma, 0, AddrLimit::Any).unwrap_err(),
            DmaError::InvalidRequest
        );
    }

    #[test]
    fn a_lent_region_is_freed_only_with_a_proof() {
        let dma = HostDma::new();
        let mut kept = CoherentRegion::new(&dma, PAGE_SIZE, AddrLimit::Below4G).unwrap();
        let mut lost = CoherentRegion::new(&dma, PAGE_SIZE, AddrLimit::Below4G).unwrap();
        assert!(!kept.is_lent());
        assert_eq!(kept.lend(), kept.dma_addr());
        let _ = lost.lend();
        assert!(kept.is_lent() && lost.is_lent());
        let lost_at = lost.raw().cpu_ptr();
        drop(lost);
        assert_eq!(
            dma.outstanding(),
            2,
            "a lent region is leaked, not freed, when dropped"
        );
        // SAFETY: no device exists in this test; nothing reaches the region.
        let proof = unsafe { Quiesced::assume(crate::context::QueueSide::Tx, crate::AbsQueueId::new(0)) };
        kept.release(&proof);
        assert_eq!(dma.outstanding(), 1, "the proof frees a lent region");
        // The leaked block belongs to nobody now; give it back so the test frees what it took.
        dma.give_back(lost_at);
        assert_eq!(dma.outstanding(), 0);
    }

    fn page(dma: &HostDma) -> DmaPage {
        dma.map_page(dma.alloc_page().unwrap(), Direction::FromDevice)
            .unwrap()
    }

    fn give_back_all<const N: usize>(dma: &HostDma, stack: &mut PageStack<N>) {
        while let Some(p) = stack.pop() {
            dma.free_page(p.unmap(dma, Direction::FromDevice));
        }
    }

    fn addrs<const N: usize>(stack: &PageStack<N>) -> Vec<u64> {
        stack.as_slice().iter().map(|p| p.dma_addr().get()).collect()
    }

    #[test]
    fn page_stack_is_lifo_and_refuses_a_page_when_full() {
        let dma = HostDma::new();
        let mut stack: PageStack<3> = PageStack::new();
        assert!(stack.is_empty() && stack.pop().is_none());
        for _ in 0..3 {
            stack.push(page(&dma)).unwrap();
        }
        assert_eq!((stack.len(), stack.room()), (3, 0));
        let extra = stack.push(page(&dma)).unwrap_err();
        let held = addrs(&stack);
        let top = stack.pop().unwrap();
        assert_eq!(top.dma_addr().get(), held[2]);
        stack.push(extra).unwrap();
        assert_eq!(stack.len(), 3);
        dma.free_page(top.unmap(&dma, Direction::FromDevice));
        give_back_all(&dma, &mut stack);
        assert_eq!((dma.outstanding(), dma.mapped.get()), (0, 0));
    }

    #[test]
    fn page_stack_moves_runs_in_order_without_losing_a_page() {
        let dma = HostDma::new();
        let mut big: PageStack<8> = PageStack::new();
        let mut small: PageStack<4> = PageStack::new();
        for _ in 0..6 {
            big.push(page(&dma)).unwrap();
        }
        let all = addrs(&big);
        // Limited by `max`: the top two, bottom one first.
        assert_eq!(big.move_top_to(&mut small, 2), 2);
        assert_eq!(addrs(&small), all[4..6]);
        assert_eq!(addrs(&big), all[..4]);
        // Limited by the room left in `small`.
        assert_eq!(big.move_top_to(&mut small, 8), 2);
        assert_eq!(addrs(&small), [&all[4..6], &all[2..4]].concat());
        // Nothing fits: nothing moves.
        assert_eq!(big.move_top_to(&mut small, 8), 0);
        assert_eq!(big.len() + small.len(), 6);
        // Limited by what the source holds, and back to a stack that already has pages.
        assert_eq!(small.move_top_to(&mut big, 0), 0);
        assert_eq!(small.move_top_to(&mut big, 100), 4);
        assert!(small.is_empty());
        assert_eq!(addrs(&big), [&all[..2], &all[4..6], &all[2..4]].concat());
        // From an empty stack.
        assert_eq!(small.move_top_to(&mut big, 3), 0);
        assert_eq!(big.len(), 6);
        give_back_all(&dma, &mut big);
        assert_eq!((dma.outstanding(), dma.mapped.get()), (0, 0));
    }

    #[test]
    fn a_page_stack_drops_the_pages_it_still_holds() {
        let dma = HostDma::new();
        let mut stack: PageStack<2> = PageStack::default();
        let p = page(&dma);
        let cpu = p.mem().cpu_ptr();
        stack.push(p).unwrap();
        // Dropping the stack drops the token it holds, once; the memory is the test's to free.
        drop(stack);
        dma.give_back(cpu);
        assert_eq!(dma.outstanding(), 0);
    }

    #[test]
    fn a_page_is_written_by_the_device_and_read_by_the_cpu_on_another_thread() {
        let dma = HostDma::new();
        let mut page = dma
            .map_page(dma.alloc_page().unwrap(), Direction::Bidirectional)
            .unwrap();
        assert!(page.bytes().iter().all(|&b| b == 0));
        // The "device" writes a frame at offset 256 through the page's address.
        let cpu = page.mem().cpu_ptr();
        for i in 0..64 {
            // SAFETY: offset 256 + i is inside the page this test owns, and no reference into
            // the page is alive during these writes.
            unsafe { cpu.as_ptr().add(256 + i).write_volatile(i as u8) };
        }
        dma.sync_for_cpu(&page, 256, 64, Direction::Bidirectional);
        // The page moves to another thread, which reads the frame and writes an answer.
        let mut page = std::thread::spawn(move || {
            assert!(page.bytes()[256..320]
                .iter()
                .enumerate()
                .all(|(i, &b)| b == i as u8));
            page.bytes_mut()[..4].copy_from_slice(&[0xDE, 0xAD, 0xBE, 0xEF]);
            page
        })
        .join()
        .unwrap();
        assert_eq!(page.bytes()[..4], [0xDE, 0xAD, 0xBE, 0xEF]);
        page.bytes_mut()[PAGE_SIZE - 1] = 7;
        assert_eq!(page.bytes()[PAGE_SIZE - 1], 7);
        dma.sync_for_device(&page, 0, 4, Direction::Bidirectional);
        let mem = page.unmap(&dma, Direction::Bidirectional);
        assert_eq!(dma.mapped.get(), 0);
        dma.free_page(mem);
        assert_eq!(dma.outstanding(), 0);
    }
}
