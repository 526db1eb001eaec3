//! [`XskPool`]: the RX queue's buffers taken from a UMEM's fill ring, behind the same
//! [`PageProvider`] seam as the page pool.

use onic_hal::{Direction, DmaMemory};

use super::ring::XskRing;
use super::umem::{Umem, UmemFrame, NO_CHUNK, UMEM_CHUNK_SIZE};
use crate::config::{xsk_room_for, RX_HEADROOM};
use crate::error::ConfigError;
use crate::queue::pool::PageProvider;

/// Counters of an [`XskPool`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct XskPoolStats {
    /// Frames taken from the fill ring.
    pub fill_taken: u64,
    /// Fill ring entries refused: outside the UMEM, or naming a chunk that is not the
    /// application's (handed over twice). The entry is consumed; the chunk stays where it is.
    pub fill_invalid: u64,
    /// Allocations served from the free list.
    pub alloc_free: u64,
    /// Allocations that found neither a free frame nor a fill ring entry.
    pub alloc_empty: u64,
    /// Frames given back into the free list.
    pub recycled: u64,
    /// Frames given back and handed out again at once ([`PageProvider::reuse`]).
    pub reused: u64,
    /// Frames released for good ([`PageProvider::release_page`]): back to the application.
    pub released: u64,
    /// Frames of the free list handed back to the application by [`XskPool::drain`].
    pub drained: u64,
}

/// The buffer provider of an RX queue whose buffers are frames of a [`Umem`]: allocation takes
/// from the pool's free list, then from the application's fill ring; recycling puts a frame on
/// the free list (the fill ring is the application's to produce into, never the driver's).
///
/// The free list is threaded through the UMEM's chunk states, so it needs no storage of its own
/// and holds any number of frames.
///
/// A frame taken from the fill ring is synced for the device over the buffer the device writes
/// (the application may have written the chunk); a recycled one over what was dirtied, as the
/// page pool does. Dropping the pool hands its free list back to the application
/// ([`XskPool::drain`]).
pub struct XskPool<'u, 'r, D: DmaMemory> {
    dma: D,
    umem: Umem<'u>,
    fill: &'r XskRing<'r, u64>,
    free_head: u32,
    free_len: u32,
    /// Bytes of the buffer the device writes (the RX queue's C2H buffer size).
    sync_max: usize,
    stats: XskPoolStats,
}

impl<'u, 'r, D: DmaMemory> XskPool<'u, 'r, D> {
    /// A pool over `umem`, fed by `fill`, for an RX queue whose C2H buffers are `buf_bytes`
    /// long ([`crate::queue::rx::RxQueue::buffer_bytes`]).
    ///
    /// # Errors
    ///
    /// [`ConfigError::BufferTooLarge`] when a chunk cannot hold the UMEM headroom, the RX headroom
    /// and a buffer ([`xsk_room_for`]: a frame the device writes must stay inside its chunk; no
    /// tailroom is kept, the XDP view never grows a frame past its chunk).
    pub fn new(
        dma: D,
        umem: Umem<'u>,
        fill: &'r XskRing<'r, u64>,
        buf_bytes: u32,
    ) -> Result<Self, ConfigError> {
        let frame = UMEM_CHUNK_SIZE.saturating_sub(usize::from(umem.config().headroom));
        if xsk_room_for(buf_bytes) as usize > frame {
            return Err(ConfigError::BufferTooLarge {
                buffer: buf_bytes,
                // CAST: at most a page.
                room: frame.saturating_sub(RX_HEADROOM as usize) as u32,
            });
        }
        Ok(Self {
            dma,
            umem,
            fill,
            free_head: NO_CHUNK,
            free_len: 0,
            sync_max: buf_bytes as usize,
            stats: XskPoolStats::default(),
        })
    }

    /// The UMEM.
    #[must_use]
    pub const fn umem(&self) -> &Umem<'u> {
        &self.umem
    }

    /// Frames on the free list.
    #[must_use]
    pub const fn free_len(&self) -> u32 {
        self.free_len
    }

    /// The counters.
    #[must_use]
    pub const fn stats(&self) -> &XskPoolStats {
        &self.stats
    }

    fn dir(&self) -> Direction {
        self.umem.config().dir
    }

    /// Takes the first usable entry of the fill ring, refusing (and counting) the others.
    fn take_fill(&mut self) -> Option<UmemFrame<'u>> {
        while let Some(addr) = self.fill.consume() {
            let taken = self
                .umem
                .chunk_of(addr)
                .and_then(|i| Some((i, self.umem.take_app(i)?)));
            let Some((i, page)) = taken else {
                self.stats.fill_invalid += 1;
                continue;
            };
            self.stats.fill_taken += 1;
            let f = self.umem.frame(i, page);
            // The application may have written the chunk: the device's buffer is the device's.
            self.sync_dirty(&f, self.sync_max);
            return Some(f);
        }
        self.stats.alloc_empty += 1;
        None
    }

    fn pop_free(&mut self) -> Option<UmemFrame<'u>> {
        if self.free_head == NO_CHUNK {
            return None;
        }
        let i = self.free_head;
        let Some((page, next)) = self.umem.unpool(i) else {
            // Not reached: only this pool threads its list through its chunks.
            self.free_head = NO_CHUNK;
            self.free_len = 0;
            return None;
        };
        self.free_head = next;
        self.free_len -= 1;
        self.stats.alloc_free += 1;
        Some(self.umem.frame(i, page))
    }

    fn push_free(&mut self, f: UmemFrame<'u>) {
        let (i, page) = f.into_parts();
        self.umem.pool(i, page, self.free_head);
        self.free_head = i;
        self.free_len += 1;
    }

    /// Syncs for the device the first `dirty` bytes (at most a buffer) of the frame's buffer.
    fn sync_dirty(&self, f: &UmemFrame<'u>, dirty: usize) {
        let len = dirty.min(self.sync_max);
        if len > 0 && !D::SYNC_IS_NOOP {
            let off = f.headroom() + RX_HEADROOM as usize;
            self.dma.sync_for_device(f.page(), off, len, self.dir());
        }
    }

    /// Hands every frame of the free list back to the application, calling `back` with the
    /// UMEM address of each chunk; returns how many. What the application does with them (put
    /// them in the fill ring again, keep them) is its business.
    pub fn drain(&mut self, mut back: impl FnMut(u64)) -> u32 {
        let mut n = 0;
        while let Some(f) = self.pop_free() {
            let (i, page) = f.into_parts();
            self.umem.give_app(i, page);
            back(Umem::chunk_addr(i));
            n += 1;
        }
        self.stats.alloc_free -= u64::from(n);
        self.stats.drained += u64::from(n);
        n
    }
}

impl<'u, D: DmaMemory> PageProvider for XskPool<'u, '_, D> {
    type Page = UmemFrame<'u>;

    fn alloc_page(&mut self) -> Option<UmemFrame<'u>> {
        match self.pop_free() {
            Some(f) => Some(f),
            None => self.take_fill(),
        }
    }

    fn recycle_direct(&mut self, page: UmemFrame<'u>, dirty_len: usize) {
        self.sync_dirty(&page, dirty_len);
        self.stats.recycled += 1;
        self.push_free(page);
    }

    fn reuse(&mut self, page: UmemFrame<'u>, dirty_len: usize) -> Option<UmemFrame<'u>> {
        self.sync_dirty(&page, dirty_len);
        self.stats.reused += 1;
        Some(page)
    }

    /// The chunk goes back to the application, outside any ring (the RX queue releases only a
    /// frame the device cannot address, which [`Umem::new`] rules out).
    fn release_page(&mut self, page: UmemFrame<'u>) {
        let (i, p) = page.into_parts();
        self.umem.give_app(i, p);
        self.stats.released += 1;
    }

    fn sync_for_cpu(&self, page: &UmemFrame<'u>, offset: usize, len: usize) {
        self.dma
            .sync_for_cpu(page.page(), page.headroom() + offset, len, self.dir());
    }

    fn sync_for_device(&self, page: &UmemFrame<'u>, offset: usize, len: usize) {
        self.dma
            .sync_for_device(page.page(), page.headroom() + offset, len, self.dir());
    }

    fn device_readable(&self) -> bool {
        self.dir() != Direction::FromDevice
    }

    fn may_run_short(&self) -> bool {
        true
    }
}

impl<D: DmaMemory> Drop for XskPool<'_, '_, D> {
    fn drop(&mut self) {
        self.drain(|_| {});
    }
}

impl<D: DmaMemory> core::fmt::Debug for XskPool<'_, '_, D> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("XskPool")
            .field("umem", &self.umem)
            .field("fill", &self.fill)
            .field("free", &self.free_len)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}
