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

use core::fmt;
use core::ptr::NonNull;

/// Size of one streaming page and the alignment of every coherent region.
pub const PAGE_SIZE: usize = 4096;

/// An address as the device sees it (an IOVA or bus address, not necessarily physical).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(transparent)]
pub struct DmaAddr(u64);

impl DmaAddr {
    /// Wraps a raw device address.
    #[must_use]
    pub const fn new(addr: u64) -> Self {
        Self(addr)
    }

    /// The raw device address.
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// Low 32 bits.
    #[must_use]
    pub const fn low32(self) -> u32 {
        self.0 as u32
    }

    /// High 32 bits.
    #[must_use]
    pub const fn high32(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// `self + offset`, or `None` on overflow.
    #[must_use]
    pub const fn checked_add(self, offset: u64) -> Option<Self> {
        match self.0.checked_add(offset) {
            Some(a) => Some(Self(a)),
            None => None,
        }
    }

    /// Whether a region of `len` bytes starting here lies entirely below 4 GiB.
    #[must_use]
    pub const fn fits_below_4g(self, len: u64) -> bool {
        match self.0.checked_add(len) {
            Some(end) => end <= 1 << 32,
            None => false,
        }
    }

    /// Whether the address is aligned to `align` (a power of two).
    #[must_use]
    pub const fn is_aligned(self, align: u64) -> bool {
        self.0 & (align - 1) == 0
    }
}

impl fmt::Debug for DmaAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DmaAddr({:#x})", self.0)
    }
}

impl fmt::Display for DmaAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}

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
/// owning the memory: it is neither `Clone` nor `Copy`, and only [`DmaMemory::free_coherent`]
/// consumes it. Wrap it in a [`CoherentRegion`] to access it.
#[derive(Debug)]
pub struct RawRegion {
    cpu: NonNull<u8>,
    dma: DmaAddr,
    len: usize,
}

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
pub unsafe trait DmaMemory {
    /// Allocates `len` bytes of zeroed, 4 KiB-aligned coherent memory within `limit`.
    ///
    /// # Errors
    ///
    /// [`DmaError::InvalidRequest`] for a zero length, [`DmaError::OutOfMemory`] when nothing fits.
    fn alloc_coherent(&self, len: usize, limit: AddrLimit) -> Result<RawRegion, DmaError>;

    /// Returns a coherent region. The device must no longer use it.
    fn free_coherent(&self, region: RawRegion);

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

    /// Unmaps a page. The device must no longer use it.
    fn unmap_page(&self, page: DmaPage, dir: Direction) -> PageMem;

    /// Hands `len` bytes at `offset` of the page to the CPU after the device wrote them.
    fn sync_for_cpu(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction);

    /// Hands `len` bytes at `offset` of the page to the device after the CPU wrote them.
    fn sync_for_device(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction);
}

// SAFETY: forwards every call unchanged to `T`, which upholds the contract.
unsafe impl<T: DmaMemory + ?Sized> DmaMemory for &T {
    fn alloc_coherent(&self, len: usize, limit: AddrLimit) -> Result<RawRegion, DmaError> {
        (**self).alloc_coherent(len, limit)
    }
    fn free_coherent(&self, region: RawRegion) {
        (**self).free_coherent(region);
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
    fn unmap_page(&self, page: DmaPage, dir: Direction) -> PageMem {
        (**self).unmap_page(page, dir)
    }
    fn sync_for_cpu(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction) {
        (**self).sync_for_cpu(page, offset, len, dir);
    }
    fn sync_for_device(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction) {
        (**self).sync_for_device(page, offset, len, dir);
    }
}

/// An owned coherent region, freed when dropped. All accesses are volatile and bounds-checked:
/// the device may change the memory at any time, so nothing here hands out references into it.
pub struct CoherentRegion<D: DmaMemory> {
    dma: D,
    raw: Option<RawRegion>,
}

impl<D: DmaMemory> CoherentRegion<D> {
    /// Allocates a zeroed region of `len` bytes within `limit`.
    ///
    /// # Errors
    ///
    /// As [`DmaMemory::alloc_coherent`].
    pub fn new(dma: D, len: usize, limit: AddrLimit) -> Result<Self, DmaError> {
        let raw = dma.alloc_coherent(len, limit)?;
        Ok(Self { dma, raw: Some(raw) })
    }

    fn raw(&self) -> &RawRegion {
        // Only `drop` takes the token out.
        match &self.raw {
            Some(r) => r,
            None => unreachable!("region used after drop"),
        }
    }

    /// Device address of the first byte.
    #[must_use]
    pub fn dma_addr(&self) -> DmaAddr {
        self.raw().dma
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

    fn ptr_at<const N: usize>(&self, offset: usize) -> *mut u8 {
        let raw = self.raw();
        assert!(
            offset.is_multiple_of(N) && offset.checked_add(N).is_some_and(|end| end <= raw.len),
            "coherent access of {N} bytes at {offset:#x} outside a region of {:#x} bytes",
            raw.len
        );
        // SAFETY: `offset + N <= len`, so the pointer stays inside the allocation.
        unsafe { raw.cpu.as_ptr().add(offset) }
    }

    /// Reads the little-endian `u32` at `offset` (4-byte aligned).
    ///
    /// # Panics
    ///
    /// If the access is misaligned or outside the region (a driver bug, never device input).
    #[must_use]
    pub fn read_u32(&self, offset: usize) -> u32 {
        let p = self.ptr_at::<4>(offset);
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
        let p = self.ptr_at::<4>(offset);
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
        let p = self.ptr_at::<8>(offset);
        // SAFETY: as in `read_u32`, with 8-byte alignment checked.
        u64::from_le(unsafe { p.cast::<u64>().read_volatile() })
    }

    /// Writes `value` little-endian at `offset` (8-byte aligned).
    ///
    /// # Panics
    ///
    /// As [`read_u32`](Self::read_u32).
    pub fn write_u64(&self, offset: usize, value: u64) {
        let p = self.ptr_at::<8>(offset);
        // SAFETY: as in `read_u64`.
        unsafe { p.cast::<u64>().write_volatile(value.to_le()) };
    }

    /// The start of `count` 8-byte entries `stride` bytes apart from `offset`, after one check
    /// that all of them are aligned and inside the region.
    fn run_at(&self, offset: usize, stride: usize, count: usize) -> *mut u8 {
        let raw = self.raw();
        let end = count
            .checked_sub(1)
            .and_then(|last| stride.checked_mul(last))
            .and_then(|span| span.checked_add(offset))
            .and_then(|last_at| last_at.checked_add(8));
        assert!(
            offset.is_multiple_of(8) && stride.is_multiple_of(8) && end.is_none_or(|end| end <= raw.len),
            "coherent access of {count} entries of 8 bytes every {stride} bytes from {offset:#x} outside a \
             region of {:#x} bytes",
            raw.len
        );
        raw.cpu.as_ptr()
    }

    /// Reads `out.len()` little-endian `u64`s at `offset`, `offset + stride`, ... (all 8-byte
    /// aligned), with one bounds check for the whole run: the batch form of
    /// [`read_u64`](Self::read_u64) for a ring's entries.
    ///
    /// # Panics
    ///
    /// If an access would be misaligned or outside the region (a driver bug).
    pub fn read_u64s(&self, offset: usize, stride: usize, out: &mut [u64]) {
        let base = self.run_at(offset, stride, out.len());
        for (i, o) in out.iter_mut().enumerate() {
            // SAFETY: `run_at` checked that every entry `offset + i * stride` (i < out.len()) is
            // 8-byte aligned and ends inside the region, so the pointer stays in the allocation;
            // the memory is valid for volatile access for the life of the token.
            *o = u64::from_le(unsafe { base.add(offset + i * stride).cast::<u64>().read_volatile() });
        }
    }

    /// Writes `values` little-endian at `offset`, `offset + stride`, ... (all 8-byte aligned),
    /// with one bounds check for the whole run: the batch form of [`write_u64`](Self::write_u64).
    ///
    /// # Panics
    ///
    /// As [`read_u64s`](Self::read_u64s).
    pub fn write_u64s(&self, offset: usize, stride: usize, values: &[u64]) {
        let base = self.run_at(offset, stride, values.len());
        for (i, v) in values.iter().enumerate() {
            // SAFETY: as in `read_u64s`.
            unsafe {
                base.add(offset + i * stride)
                    .cast::<u64>()
                    .write_volatile(v.to_le())
            };
        }
    }
}

impl<D: DmaMemory> Drop for CoherentRegion<D> {
    fn drop(&mut self) {
        if let Some(raw) = self.raw.take() {
            self.dma.free_coherent(raw);
        }
    }
}

impl<D: DmaMemory> fmt::Debug for CoherentRegion<D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CoherentRegion")
            .field("dma", &self.dma_addr())
            .field("len", &self.len())
            .finish()
    }
}
