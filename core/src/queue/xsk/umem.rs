//! The UMEM: the application's packet memory, cut into chunks, each of which is at any moment the
//! application's, in a driver pool's free list, or held by the driver as a frame handle
//! ([`UmemFrame`], or a TX frame); see the module docs of [`super`].

use core::cell::Cell;

use onic_hal::{Direction, DmaAddr, DmaPage, PAGE_SIZE};

use crate::config::RX_HEADROOM;
use crate::queue::pool::PoolPage;

/// Bytes of one UMEM chunk: one HAL page. The DMA syncs of the HAL act on a whole [`DmaPage`]
/// (`&DmaPage`), so a frame handle that syncs its bytes must own its page; two chunks per page
/// (AF_XDP's 2 KiB chunks) would need a sync on part of a page shared by two owners, which the
/// HAL does not offer.
pub const UMEM_CHUNK_SIZE: usize = PAGE_SIZE;

/// Where a chunk is.
#[derive(Default)]
enum State<'u> {
    /// A frame handle exists: the chunk is in an RX ring slot, on a TX ring, parked in a TX slot,
    /// in a redirect target's hands, with the OS, or with the code that took it.
    #[default]
    Held,
    /// The application's: free for it to use, or named by an entry of one of its rings.
    App(&'u mut DmaPage),
    /// In a driver pool's free list (`next`: the next chunk of that list, or [`NO_CHUNK`]).
    Pooled { page: &'u mut DmaPage, next: u32 },
}

/// The end of a free list.
pub(crate) const NO_CHUNK: u32 = u32::MAX;

/// One chunk of a UMEM, in the caller's storage: made from the page that holds it, the
/// application's to start with.
pub struct UmemChunk<'u>(Cell<State<'u>>);

impl<'u> UmemChunk<'u> {
    /// A chunk over `page` (mapped through the HAL, in the direction given to [`Umem::new`]),
    /// the application's.
    pub fn new(page: &'u mut DmaPage) -> Self {
        Self(Cell::new(State::App(page)))
    }
}

impl core::fmt::Debug for UmemChunk<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let s = self.0.take();
        let name = match &s {
            State::Held => "held",
            State::App(_) => "app",
            State::Pooled { .. } => "pooled",
        };
        self.0.set(s);
        f.write_str(name)
    }
}

/// Where a chunk is, as [`Umem::state`] reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum ChunkState {
    /// The application's (free, or named by one of its rings).
    App,
    /// In a driver pool's free list.
    Pooled,
    /// Held by the driver as a frame handle.
    Held,
}

/// Chunks of a UMEM by place ([`Umem::counts`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UmemCounts {
    /// The application's.
    pub app: u32,
    /// In driver pools' free lists.
    pub pooled: u32,
    /// Held by the driver.
    pub held: u32,
}

/// Why a UMEM could not be made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum UmemError {
    /// No chunk, or more than 2^32 - 1.
    ChunkCount {
        /// Chunks given.
        chunks: usize,
    },
    /// The headroom leaves no room for the RX headroom in a chunk.
    Headroom {
        /// The headroom asked for.
        headroom: u16,
    },
    /// A chunk's page has bytes without a device address (its range wraps past 2^64), or the
    /// chunk is not the application's.
    Chunk {
        /// The chunk's index.
        index: u32,
    },
}

/// Settings of a [`Umem`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UmemConfig {
    /// Bytes at the start of every chunk that the driver leaves alone (AF_XDP's frame headroom):
    /// a frame's view starts this far into its chunk, and received data another
    /// [`RX_HEADROOM`] behind that.
    pub headroom: u16,
    /// The direction every chunk's page is mapped in: [`Direction::Bidirectional`] for RX and
    /// TX (and XDP_TX) out of the same UMEM.
    pub dir: Direction,
}

/// A UMEM: the chunks (one [`DmaPage`] each, [`UMEM_CHUNK_SIZE`] bytes) in the caller's storage,
/// addressed as AF_XDP does, by UMEM address: chunk `i` covers `i * UMEM_CHUNK_SIZE ..
/// (i + 1) * UMEM_CHUNK_SIZE`. A chunk's device address is its page's; the pages need not be
/// contiguous (the kernel maps a UMEM page by page too).
///
/// A copy of the handle is cheap (a slice and two settings); every copy names the same chunks.
/// The chunk states are [`Cell`]s: a UMEM lives in one thread.
#[derive(Clone, Copy)]
pub struct Umem<'u> {
    chunks: &'u [UmemChunk<'u>],
    cfg: UmemConfig,
}

impl<'u> Umem<'u> {
    /// A UMEM over `chunks`, every one of which must be the application's.
    ///
    /// # Errors
    ///
    /// [`UmemError`]: no chunk or too many, a headroom that leaves less than [`RX_HEADROOM`]
    /// bytes and a byte of buffer in a chunk, a chunk whose page is not addressable whole.
    pub fn new(chunks: &'u [UmemChunk<'u>], cfg: UmemConfig) -> Result<Self, UmemError> {
        if chunks.is_empty() || chunks.len() >= NO_CHUNK as usize {
            return Err(UmemError::ChunkCount { chunks: chunks.len() });
        }
        if usize::from(cfg.headroom) + RX_HEADROOM as usize >= UMEM_CHUNK_SIZE {
            return Err(UmemError::Headroom {
                headroom: cfg.headroom,
            });
        }
        for (i, c) in chunks.iter().enumerate() {
            let s = c.0.take();
            let ok = matches!(&s, State::App(p) if p.dma_addr().checked_add(PAGE_SIZE as u64 - 1).is_some());
            c.0.set(s);
            if !ok {
                // CAST: fewer than NO_CHUNK chunks (checked above).
                return Err(UmemError::Chunk { index: i as u32 });
            }
        }
        Ok(Self { chunks, cfg })
    }

    /// The settings.
    #[must_use]
    pub const fn config(&self) -> &UmemConfig {
        &self.cfg
    }

    /// Chunks in the UMEM.
    #[must_use]
    pub const fn chunks(&self) -> u32 {
        // CAST: fewer than NO_CHUNK chunks (`new`).
        self.chunks.len() as u32
    }

    /// The chunk a UMEM address falls in, if any.
    #[must_use]
    pub fn chunk_of(&self, addr: u64) -> Option<u32> {
        let i = addr / UMEM_CHUNK_SIZE as u64;
        (i < u64::from(self.chunks())).then_some(i as u32)
    }

    /// The UMEM address of chunk `index`'s first byte.
    #[must_use]
    pub const fn chunk_addr(index: u32) -> u64 {
        index as u64 * UMEM_CHUNK_SIZE as u64
    }

    /// Where chunk `index` is (`None` past the end).
    #[must_use]
    pub fn state(&self, index: u32) -> Option<ChunkState> {
        let c = self.chunks.get(index as usize)?;
        let s = c.0.take();
        let st = match &s {
            State::Held => ChunkState::Held,
            State::App(_) => ChunkState::App,
            State::Pooled { .. } => ChunkState::Pooled,
        };
        c.0.set(s);
        Some(st)
    }

    /// Every chunk counted by place (a walk over the UMEM: for a census, not a datapath).
    #[must_use]
    pub fn counts(&self) -> UmemCounts {
        let mut n = UmemCounts::default();
        for i in 0..self.chunks() {
            match self.state(i) {
                Some(ChunkState::App) => n.app += 1,
                Some(ChunkState::Pooled) => n.pooled += 1,
                Some(ChunkState::Held) | None => n.held += 1,
            }
        }
        n
    }

    /// Runs `f` on the bytes of the application's chunk that `addr` falls in (the whole chunk,
    /// [`UMEM_CHUNK_SIZE`] bytes; `addr`'s offset in it is `addr % UMEM_CHUNK_SIZE`): how the
    /// application reads what it received and writes what it sends. `None` if the chunk is not
    /// the application's now.
    pub fn with_app_chunk<R>(&self, addr: u64, f: impl FnOnce(&mut [u8]) -> R) -> Option<R> {
        let c = self.chunks.get(self.chunk_of(addr)? as usize)?;
        match c.0.take() {
            State::App(page) => {
                let r = f(page.bytes_mut());
                c.0.set(State::App(page));
                Some(r)
            }
            other => {
                c.0.set(other);
                None
            }
        }
    }

    /// Takes the application's chunk `index` for the driver (`None` if it is not the
    /// application's: a chunk it handed over twice, or one it never had).
    pub(crate) fn take_app(&self, index: u32) -> Option<&'u mut DmaPage> {
        let c = self.chunks.get(index as usize)?;
        match c.0.take() {
            State::App(page) => Some(page),
            other => {
                c.0.set(other);
                None
            }
        }
    }

    /// Gives chunk `index` (held by the driver) to the application.
    pub(crate) fn give_app(&self, index: u32, page: &'u mut DmaPage) {
        if let Some(c) = self.chunks.get(index as usize) {
            c.0.set(State::App(page));
        }
    }

    /// Puts chunk `index` (held by the driver) at the head of a free list whose head was `next`.
    pub(crate) fn pool(&self, index: u32, page: &'u mut DmaPage, next: u32) {
        if let Some(c) = self.chunks.get(index as usize) {
            c.0.set(State::Pooled { page, next });
        }
    }

    /// Takes chunk `index` out of a free list: its page and the next chunk of the list.
    pub(crate) fn unpool(&self, index: u32) -> Option<(&'u mut DmaPage, u32)> {
        let c = self.chunks.get(index as usize)?;
        match c.0.take() {
            State::Pooled { page, next } => Some((page, next)),
            other => {
                c.0.set(other);
                None
            }
        }
    }

    /// The frame handle for chunk `index`, whose page the driver holds.
    pub(crate) const fn frame(&self, index: u32, page: &'u mut DmaPage) -> UmemFrame<'u> {
        UmemFrame {
            page,
            index,
            headroom: self.cfg.headroom,
        }
    }
}

impl core::fmt::Debug for Umem<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Umem")
            .field("chunks", &self.chunks.len())
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

/// A UMEM chunk the driver holds, as the RX queue and XDP see a page: owning it is owning the
/// chunk. Its view starts [`UmemConfig::headroom`] bytes into the chunk (so the received frame
/// lands [`RX_HEADROOM`] bytes after that, where AF_XDP puts it) and runs to the chunk's end.
#[derive(Debug)]
pub struct UmemFrame<'u> {
    page: &'u mut DmaPage,
    index: u32,
    headroom: u16,
}

impl<'u> UmemFrame<'u> {
    /// The chunk's index in its UMEM.
    #[must_use]
    pub const fn index(&self) -> u32 {
        self.index
    }

    /// The UMEM address of the view's first byte (chunk start + headroom): a frame at `offset`
    /// in the view is at `view_addr() + offset`.
    #[must_use]
    pub const fn view_addr(&self) -> u64 {
        Umem::chunk_addr(self.index) + self.headroom as u64
    }

    /// Offset of the view in the chunk's page.
    pub(crate) const fn headroom(&self) -> usize {
        self.headroom as usize
    }

    /// The chunk's page, for the DMA syncs.
    pub(crate) fn page(&self) -> &DmaPage {
        self.page
    }

    /// Splits the handle into the chunk's index and page (for the chunk's way back).
    pub(crate) fn into_parts(self) -> (u32, &'u mut DmaPage) {
        (self.index, self.page)
    }
}

impl PoolPage for UmemFrame<'_> {
    #[inline]
    fn dma_addr(&self) -> DmaAddr {
        // No overflow: the whole page is addressable (`Umem::new`) and the headroom is inside it.
        DmaAddr::new(self.page.dma_addr().get() + u64::from(self.headroom))
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        self.page.bytes().get(self.headroom()..).unwrap_or(&[])
    }

    #[inline]
    fn bytes_mut(&mut self) -> &mut [u8] {
        let h = self.headroom();
        self.page.bytes_mut().get_mut(h..).unwrap_or(&mut [])
    }
}
