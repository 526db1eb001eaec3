//! Page recycling for the receive path: the [`PageProvider`] seam and [`PagePool`], a fixed-size,
//! allocation-free page pool for bare metal and the host.
//!
//! # The seam
//!
//! The RX and TX queues only ever talk to a [`PageProvider`]: take a page, give one back for
//! reuse, give one back for good, and the two DMA syncs. The pages themselves are reached through
//! [`PoolPage`] (device address and bytes). That is the whole contract, so:
//!
//! - bare metal and the host use [`PagePool`] over any [`DmaMemory`], with [`DmaPage`] pages;
//! - the Linux shim implements [`PageProvider`] over the kernel's `page_pool` (its page type wraps
//!   a `struct page` with the pool's DMA address; `alloc_page` is `page_pool_dev_alloc_pages`,
//!   `recycle_direct` is `page_pool_put_page(.., dma_sync_size, allow_direct = true)`,
//!   `release_page` is `page_pool_put_page` on a page that is no longer wanted, and the syncs are
//!   `page_pool_dma_sync_for_cpu` / `dma_sync_single_range_for_device`). Pages passed to the
//!   stack are marked for recycling there, so skb recycling goes through the kernel, not through
//!   this crate.
//!
//! # The pool
//!
//! Pages are DMA-mapped once, when the pool takes them from the HAL, and stay mapped while they
//! circulate. Allocation takes the fast path from a small LIFO cache owned by the queue's context
//! (no atomics); when the cache is empty it refills from the [`RecycleRing`] (pages given back by
//! other contexts), and only then falls back to the slow path: a bulk allocation of fresh pages
//! from the HAL. Pages come back either directly into the cache (from the owning context, which
//! is the common case: RX drops, pages the OS gave back in that context) or through the bounded
//! ring (from any other context: the OS freeing a packet, another device's TX completion). When
//! the cache is full a direct recycle spills into the ring; when the ring is full too the page is
//! released to the HAL. XDP_TX pages mostly skip the pool: the TX queue hands them back to the RX
//! ring itself ([`crate::queue::tx::TxQueue::xmit_pool`]).
//!
//! Statistics carry the names of Linux's `page_pool` (`alloc.fast`, `recycle.cached`, ...), so
//! dashboards built for the kernel driver read the same here.
//!
//! # Page accounting
//!
//! Every page the pool ever took from the HAL and has not released is, at any moment, in exactly
//! one place: in the pool (cache or ring), in an RX ring slot, in flight on a TX ring (or parked
//! in a TX slot for the next XDP_TX frame), or with the OS. [`PageCounts`] is that census; the
//! queues report their parts, the pool the rest.
//!
//! A page in the pool is the CPU's: the queues give a page back only after a completion said the
//! device is done with it, or after their contexts were invalidated (the [`onic_hal::Quiesced`]
//! proof). That is what lets the pool unmap and free pages ([`onic_hal::DmaPage::unmap`]). The
//! pages of a started queue that was dropped without its teardown (or whose teardown failed) stay
//! in its ring slots and never come back: they are leaked, as the device may still write them.

use core::sync::atomic::{AtomicU32, Ordering};

use onic_hal::{Direction, DmaAddr, DmaMemory, DmaPage, PageStack, PAGE_SIZE};

use crate::stats::counters::PoolStats;

/// A page as the queues see it: where the device reaches it, and its bytes.
pub trait PoolPage {
    /// Device address of the page's first byte.
    fn dma_addr(&self) -> DmaAddr;
    /// The whole page, for reading a received frame.
    fn bytes(&self) -> &[u8];
    /// The whole page, writable (padding a frame before XDP_TX, building a reply in place).
    fn bytes_mut(&mut self) -> &mut [u8];
}

impl PoolPage for DmaPage {
    fn dma_addr(&self) -> DmaAddr {
        DmaPage::dma_addr(self)
    }

    fn bytes(&self) -> &[u8] {
        DmaPage::bytes(self)
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        DmaPage::bytes_mut(self)
    }
}

/// Where the RX and TX queues get their pages from and give them back to: the seam between the
/// datapath and a page allocator (this crate's [`PagePool`], or the kernel's `page_pool` in the
/// Linux shim).
///
/// All methods are called from the context that owns the queue pair the provider belongs to.
pub trait PageProvider {
    /// A page handle. Owning it is owning the page.
    type Page: PoolPage;

    /// A page, DMA-mapped, ready to be handed to the device. `None` when no page can be had; the
    /// caller copes (an RX refill stops and retries on the next poll).
    fn alloc_page(&mut self) -> Option<Self::Page>;

    /// Takes a page back for reuse. `dirty_len` is how many bytes after the sync offset the CPU
    /// may have written (or the device written and the CPU read); only those are synced back for
    /// the device.
    fn recycle_direct(&mut self, page: Self::Page, dirty_len: usize);

    /// Takes a page back for reuse and hands a page out again at once: what the RX path does
    /// when a frame was dropped or copied and its ring slot needs a page (the same call as
    /// [`PageProvider::recycle_direct`] followed by [`PageProvider::alloc_page`]). A recycling
    /// provider may return the same page, synced for the device as `recycle_direct` would sync
    /// it, without the round trip through its cache; `None` as for `alloc_page`.
    fn reuse(&mut self, page: Self::Page, dirty_len: usize) -> Option<Self::Page> {
        self.recycle_direct(page, dirty_len);
        self.alloc_page()
    }

    /// Takes a page back that must not be reused (Linux: a page still referenced elsewhere); it is
    /// unmapped and returned to the allocator.
    fn release_page(&mut self, page: Self::Page);

    /// Hands `len` bytes at `offset` to the CPU after the device wrote them.
    fn sync_for_cpu(&self, page: &Self::Page, offset: usize, len: usize);

    /// Hands `len` bytes at `offset` to the device after the CPU wrote them (XDP_TX).
    fn sync_for_device(&self, page: &Self::Page, offset: usize, len: usize);

    /// Whether the device may read the pages (they are mapped bidirectionally), so that a
    /// received frame can be sent out from its page (XDP_TX, redirect). A provider mapping pages
    /// for receive only says `false`, and such verdicts then fail (counted, page recycled).
    fn device_readable(&self) -> bool {
        true
    }

    /// Whether the RX ring may run short of buffers rather than drop a received frame: a frame
    /// that leaves its slot when no buffer can take its place goes on, and its slot stays empty
    /// for a later refill. A page pool says `false`: a frame is handed on only with a page at
    /// hand for its slot (dropped in the slot otherwise, `rx_no_page`), so memory pressure
    /// never empties the ring. An XSK pool says `true`: its buffers are chunks the application
    /// hands in through its fill ring, which runs empty in normal operation (before the
    /// application refills it), and a frame the device has already written into a chunk is
    /// the application's to receive; the ring runs short instead, the refill takes chunks again
    /// once the fill ring has some, and only a ring with nothing posted makes the device drop.
    fn may_run_short(&self) -> bool {
        false
    }

    /// Whether the provider takes buffers from its source in batches, and wants an RX refill's
    /// [`PageProvider::refill_begin`] and [`PageProvider::refill_end`]. A page pool says
    /// `false` (its cache is its batch), so a refill skips counting the slots it will fill.
    fn batches(&self) -> bool {
        false
    }

    /// An RX refill is about to call [`PageProvider::alloc_page`] up to `empty` times, once for
    /// each empty slot of the run it posts. A provider that [`PageProvider::batches`] takes that
    /// many buffers from its source now, in one go (an XSK pool: `xsk_buff_alloc_batch`).
    fn refill_begin(&mut self, empty: usize) {
        let _ = empty;
    }

    /// The refill of [`PageProvider::refill_begin`] is over: the buffers taken for it and not
    /// handed out go back to the source, so that none is held between refills.
    fn refill_end(&mut self) {}
}

/// The page type of a TX queue that never carries pool pages: a queue of the OS stack's packets,
/// or of frames other devices redirected here. No value of it exists, so such a queue cannot be
/// handed a page, and the code that would return one is unreachable by construction.
#[derive(Debug)]
pub enum NoPage {}

impl PoolPage for NoPage {
    fn dma_addr(&self) -> DmaAddr {
        match *self {}
    }

    fn bytes(&self) -> &[u8] {
        match *self {}
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        match *self {}
    }
}

/// The page provider of a TX queue that carries no pool pages ([`NoPage`]): it has none to give,
/// and none can come back to it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoPages;

impl PageProvider for NoPages {
    type Page = NoPage;

    fn alloc_page(&mut self) -> Option<NoPage> {
        None
    }

    fn recycle_direct(&mut self, page: NoPage, _dirty_len: usize) {
        match page {}
    }

    fn release_page(&mut self, page: NoPage) {
        match page {}
    }

    fn sync_for_cpu(&self, page: &NoPage, _offset: usize, _len: usize) {
        match *page {}
    }

    fn sync_for_device(&self, page: &NoPage, _offset: usize, _len: usize) {
        match *page {}
    }

    fn device_readable(&self) -> bool {
        false
    }
}

/// Capacity of a [`RecycleRing`] (the lock-free queue behind it indexes with 8 bits).
pub const RECYCLE_RING_CAPACITY: usize = 128;

/// Default capacity of a [`PagePool`]'s cache (Linux's `PP_ALLOC_CACHE_SIZE`).
pub const POOL_CACHE_DEFAULT: usize = 128;

/// Pages the slow path takes from the HAL at once (Linux refills its cache with 64).
pub(crate) const POOL_BULK_DEFAULT: usize = 64;

/// A page travelling through a [`RecycleRing`], with the length to sync for the device when the
/// owner takes it out.
#[derive(Debug)]
struct Recycled<P> {
    page: P,
    dirty: u16,
}

/// The bounded ring through which other contexts give pages back to a pool: the OS freeing a
/// packet built on a pool page, another queue or device completing a redirected frame.
///
/// It lives outside the pool (in a `static`, or next to the queue pair) so that the pool's owner
/// holds `&mut PagePool` while any number of other contexts hold `&RecycleRing`. One ring serves
/// one pool: two pools on the same ring would each count all of its traffic in their statistics
/// and their page census.
///
/// Backed by `heapless`' lock-free MPMC queue. That queue can refuse an operation while another
/// context is preempted in the middle of one; a refused push is treated as "ring full" (the page
/// comes back to the caller, which releases it with [`release_to_hal`]) and a refused pop as
/// "ring empty" (the pool takes the slow path). Neither loses a page.
pub struct RecycleRing<P = DmaPage> {
    queue: heapless::mpmc::Queue<Recycled<P>, RECYCLE_RING_CAPACITY>,
    /// Pages in the ring. Exact whenever no push or pop is in progress.
    len: AtomicU32,
    /// Pages pushed (Linux `recycle.ring`).
    pushed: AtomicU32,
    /// Pages refused because the ring was full (Linux `recycle.ring_full`); each was released.
    full: AtomicU32,
    /// Pages the OS gave back through the ring (for [`PageCounts::with_os`]).
    os_returns: AtomicU32,
}

impl<P> RecycleRing<P> {
    /// An empty ring; `const`, so it can live in a `static`.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            // The queue is deprecated upstream because a preempted operation can make others
            // fail for a while; every failure here is handled (see the type's docs).
            #[allow(deprecated)]
            queue: heapless::mpmc::Queue::new(),
            len: AtomicU32::new(0),
            pushed: AtomicU32::new(0),
            full: AtomicU32::new(0),
            os_returns: AtomicU32::new(0),
        }
    }

    /// Gives a page back to the owning pool from another context. `dirty_len` as in
    /// [`PageProvider::recycle_direct`].
    ///
    /// # Errors
    ///
    /// The ring is full: the page comes back and must be released ([`release_to_hal`]); it is
    /// counted as `recycle.ring_full`.
    pub fn recycle(&self, page: P, dirty_len: usize) -> Result<(), P> {
        let dirty = u16::try_from(dirty_len.min(PAGE_SIZE)).unwrap_or(u16::MAX);
        match self.queue.enqueue(Recycled { page, dirty }) {
            Ok(()) => {
                self.len.fetch_add(1, Ordering::Relaxed);
                self.pushed.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            Err(r) => {
                self.full.fetch_add(1, Ordering::Relaxed);
                Err(r.page)
            }
        }
    }

    /// The OS is done with a page the RX path handed it. As [`RecycleRing::recycle`], and the
    /// page leaves the "with the OS" count whether or not the ring takes it.
    ///
    /// # Errors
    ///
    /// As [`RecycleRing::recycle`].
    pub fn return_from_os(&self, page: P, dirty_len: usize) -> Result<(), P> {
        self.os_returns.fetch_add(1, Ordering::Relaxed);
        self.recycle(page, dirty_len)
    }

    fn pop(&self) -> Option<Recycled<P>> {
        let r = self.queue.dequeue()?;
        self.len.fetch_sub(1, Ordering::Relaxed);
        Some(r)
    }

    /// Pages currently in the ring (exact when no other context is pushing or popping).
    #[must_use]
    pub fn len(&self) -> usize {
        let n = self.len.load(Ordering::Relaxed) as usize;
        // A pop can briefly run ahead of the push's count update; never report nonsense.
        if n > RECYCLE_RING_CAPACITY {
            0
        } else {
            n
        }
    }

    /// Whether the ring is (momentarily) empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The ring's counters now (32-bit, wrapping; see [`RingTotals`]).
    fn counts(&self) -> RingCounts {
        RingCounts {
            pushed: self.pushed.load(Ordering::Relaxed),
            full: self.full.load(Ordering::Relaxed),
            os_returns: self.os_returns.load(Ordering::Relaxed),
        }
    }

    /// A ring whose counters start just below their wrap, for the tests of [`RingTotals`].
    #[cfg(test)]
    fn near_wrap(below: u32) -> Self {
        let r = Self::new();
        let start = u32::MAX - below;
        r.pushed.store(start, Ordering::Relaxed);
        r.full.store(start, Ordering::Relaxed);
        r.os_returns.store(start, Ordering::Relaxed);
        r
    }
}

/// A [`RecycleRing`]'s counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RingCounts {
    pushed: u32,
    full: u32,
    os_returns: u32,
}

/// The 64-bit totals of a [`RecycleRing`]'s counters, kept by the owning pool.
///
/// The ring's counters are 32-bit atomics (every target with atomics has those; some have no
/// 64-bit ones) and wrap after 2^32 pages, a minute at full rate. The owner folds what each one
/// moved since its last look into 64-bit totals whenever it takes pages out of the ring (and the
/// statistics add what moved since). That is exact as long as no counter moves 2^32 between two
/// folds, and none can: a push needs room, which only the owner's pops (each a fold) make, and
/// every refused push releases one of the pool's pages, so the owner runs dry and refills (a fold)
/// long before.
#[derive(Clone, Copy, Debug, Default)]
struct RingTotals {
    /// The counters at the last fold.
    seen: RingCounts,
    pushed: u64,
    full: u64,
    os_returns: u64,
}

impl RingTotals {
    /// The totals as of `now` (the ring's counters read after the last fold).
    fn at(&self, now: RingCounts) -> Self {
        let moved = |now: u32, seen: u32| u64::from(now.wrapping_sub(seen));
        Self {
            seen: now,
            pushed: self.pushed + moved(now.pushed, self.seen.pushed),
            full: self.full + moved(now.full, self.seen.full),
            os_returns: self.os_returns + moved(now.os_returns, self.seen.os_returns),
        }
    }
}

impl<P> Default for RecycleRing<P> {
    fn default() -> Self {
        Self::new()
    }
}

impl<P> core::fmt::Debug for RecycleRing<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RecycleRing")
            .field("len", &self.len())
            .field("pushed", &self.pushed.load(Ordering::Relaxed))
            .field("full", &self.full.load(Ordering::Relaxed))
            .finish()
    }
}

/// Unmaps a pool page and frees it, for a context that got a page back from a full
/// [`RecycleRing`]. `dir` must be the pool's mapping direction.
///
/// A page in the pool is the CPU's by the pool's invariant: the queues give a page back only
/// after a completion said the device is done with it, or after a quiesced teardown
/// ([`Quiesced`](onic_hal::Quiesced)); a page still posted on a ring never reaches the pool.
pub fn release_to_hal<D: DmaMemory>(dma: &D, dir: Direction, page: DmaPage) {
    let mem = page.unmap(dma, dir);
    dma.free_page(mem);
}

/// A fresh page from the HAL, mapped in `dir` (what [`release_to_hal`] gives back); `None` when
/// the HAL has no page or cannot map it (then it keeps none).
pub fn take_from_hal<D: DmaMemory>(dma: &D, dir: Direction) -> Option<DmaPage> {
    let mem = dma.alloc_page().ok()?;
    match dma.map_page(mem, dir) {
        Ok(p) => Some(p),
        Err((mem, _)) => {
            dma.free_page(mem);
            None
        }
    }
}

/// Pages recycled and handed out again in one step ([`PageProvider::reuse`]); counted once and
/// reported as both a cached recycle and a fast allocation, which is what the step amounts to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Reused(u64);

/// Where every live page is (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PageCounts {
    /// In a pool's cache or recycle ring.
    pub in_pool: u64,
    /// In an RX ring slot (posted to the device, or staged for the next refill).
    pub in_rx_ring: u64,
    /// Referenced by a TX descriptor not yet completed.
    pub in_tx_flight: u64,
    /// Sent, and parked in a TX slot for the RX ring, to leave with the next XDP_TX frame posted
    /// in that slot ([`crate::queue::tx::TxQueue::pool_pages_parked`]).
    pub tx_parked: u64,
    /// Handed to the OS by the RX path and not yet given back.
    pub with_os: u64,
}

impl PageCounts {
    /// All pages counted.
    #[must_use]
    pub const fn total(&self) -> u64 {
        self.in_pool + self.in_rx_ring + self.in_tx_flight + self.tx_parked + self.with_os
    }
}

impl core::ops::Add for PageCounts {
    type Output = Self;

    fn add(self, o: Self) -> Self {
        Self {
            in_pool: self.in_pool + o.in_pool,
            in_rx_ring: self.in_rx_ring + o.in_rx_ring,
            in_tx_flight: self.in_tx_flight + o.in_tx_flight,
            tx_parked: self.tx_parked + o.tx_parked,
            with_os: self.with_os + o.with_os,
        }
    }
}

/// Settings of a [`PagePool`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PoolConfig {
    /// Mapping direction of every page: [`Direction::FromDevice`] for plain receive,
    /// [`Direction::Bidirectional`] when pages may be sent back out (XDP_TX).
    pub dir: Direction,
    /// Start of the part of a page the device writes (the RX headroom).
    pub sync_offset: usize,
    /// Most bytes after `sync_offset` the device writes (the C2H buffer size); syncs for the
    /// device never cover more.
    pub sync_max: usize,
    /// Pages the slow path takes from the HAL at once (clamped to 1..=cache capacity).
    pub bulk: usize,
}

impl PoolConfig {
    /// A pool for RX queues with `buf_bytes` buffers behind [`crate::config::RX_HEADROOM`].
    #[must_use]
    pub const fn rx(dir: Direction, buf_bytes: u32) -> Self {
        Self {
            dir,
            sync_offset: crate::config::RX_HEADROOM as usize,
            sync_max: buf_bytes as usize,
            bulk: POOL_BULK_DEFAULT,
        }
    }
}

/// A burst of pages taken from a [`PagePool`] or given back to it in one call
/// ([`PagePool::alloc_bulk`], [`PagePool::recycle_bulk`]), for a caller that handles pages 32 at
/// a time (an RX refill, a TX reclaim, a benchmark). Holds up to `N` pages, in order; pages move
/// between a burst and the pool's cache as one block copy ([`PageStack::move_top_to`]), with no
/// per-page bookkeeping beyond the DMA sync a recycled page needs (none on coherent memory).
pub type PageBurst<const N: usize> = PageStack<N>;

/// A page pool: pages mapped once, a context-local cache, a cross-context recycle ring, bulk
/// refill from the HAL. No allocation; `CACHE` pages of cache are inline.
///
/// Dropping the pool releases every page it holds (cache and ring) to the HAL; pages out in
/// rings, TX flight or with the OS are the holders' to return first (queue teardown does it).
pub struct PagePool<'r, D: DmaMemory, const CACHE: usize = POOL_CACHE_DEFAULT> {
    dma: D,
    cfg: PoolConfig,
    /// The context-local LIFO cache.
    cache: PageStack<CACHE>,
    ring: Option<&'r RecycleRing<DmaPage>>,
    /// The ring's counters folded into 64 bits.
    ring_totals: RingTotals,
    stats: PoolStats,
    reused: Reused,
}

impl<'r, D: DmaMemory, const CACHE: usize> PagePool<'r, D, CACHE> {
    /// An empty pool over `dma`. `ring` is where other contexts give pages back; without one,
    /// pages can only come back directly.
    pub fn new(dma: D, cfg: PoolConfig, ring: Option<&'r RecycleRing<DmaPage>>) -> Self {
        let bulk = cfg.bulk.clamp(1, if CACHE == 0 { 1 } else { CACHE });
        Self {
            dma,
            cfg: PoolConfig { bulk, ..cfg },
            cache: PageStack::new(),
            ring,
            ring_totals: RingTotals {
                seen: ring.map(RecycleRing::counts).unwrap_or_default(),
                ..RingTotals::default()
            },
            stats: PoolStats::default(),
            reused: Reused(0),
        }
    }

    /// The configuration.
    #[must_use]
    pub const fn config(&self) -> &PoolConfig {
        &self.cfg
    }

    /// The DMA memory the pool maps its pages in.
    pub const fn dma(&self) -> &D {
        &self.dma
    }

    /// Takes a page: cache, then recycle ring, then a bulk allocation from the HAL.
    ///
    /// The cache hit is small enough to inline into the RX loop; everything else is out of line.
    #[inline]
    pub fn alloc(&mut self) -> Option<DmaPage> {
        if let Some(p) = self.cache.pop() {
            self.stats.alloc.fast += 1;
            return Some(p);
        }
        self.alloc_refill()
    }

    /// [`PagePool::alloc`] with an empty cache: the recycle ring, then the slow path.
    #[cold]
    #[inline(never)]
    fn alloc_refill(&mut self) -> Option<DmaPage> {
        if self.refill_from_ring() {
            self.stats.alloc.refill += 1;
            if let Some(p) = self.cache.pop() {
                // Linux counts the allocation that triggered the refill as fast too.
                self.stats.alloc.fast += 1;
                return Some(p);
            }
        }
        self.stats.alloc.empty += 1;
        self.alloc_slow()
    }

    /// Moves up to half a cache of pages from the recycle ring into the cache, syncing each for
    /// the device over the length its last user dirtied.
    fn refill_from_ring(&mut self) -> bool {
        let Some(ring) = self.ring else {
            return false;
        };
        let want = (CACHE / 2).max(1);
        let mut got = false;
        while self.cache.len() < want {
            let Some(r) = ring.pop() else { break };
            self.sync_dirty(&r.page, usize::from(r.dirty));
            if let Err(page) = self.cache.push(r.page) {
                // Cannot happen (checked the length above); never drop a page anyway.
                self.release_to_hal(page);
            }
            got = true;
        }
        self.ring_totals = self.ring_totals.at(ring.counts());
        got
    }

    /// The slow path: `bulk` fresh pages from the HAL, mapped, into the cache; returns one.
    fn alloc_slow(&mut self) -> Option<DmaPage> {
        self.stats.alloc.slow += 1;
        let mut first = None;
        for _ in 0..self.cfg.bulk {
            let Some(page) = take_from_hal(&self.dma, self.cfg.dir) else {
                break;
            };
            self.stats.pages_from_hal += 1;
            if first.is_none() {
                first = Some(page);
            } else if let Err(page) = self.cache.push(page) {
                self.release_to_hal(page);
                break;
            }
        }
        if first.is_none() {
            self.stats.hal_alloc_failures += 1;
        }
        first
    }

    /// How many bytes after the sync offset a page with `dirty` written bytes needs synced for
    /// the device: none when the HAL's syncs do nothing ([`DmaMemory::SYNC_IS_NOOP`]).
    #[inline]
    const fn sync_len(&self, dirty: usize) -> usize {
        if D::SYNC_IS_NOOP {
            0
        } else if dirty < self.cfg.sync_max {
            dirty
        } else {
            self.cfg.sync_max
        }
    }

    #[inline]
    fn sync_dirty(&self, page: &DmaPage, dirty: usize) {
        let len = self.sync_len(dirty);
        if len > 0 {
            self.dma
                .sync_for_device(page, self.cfg.sync_offset, len, self.cfg.dir);
        }
    }

    fn release_to_hal(&mut self, page: DmaPage) {
        release_to_hal(&self.dma, self.cfg.dir, page);
        self.stats.pages_to_hal += 1;
    }

    /// Takes a page back from the owning context for reuse (see
    /// [`PageProvider::recycle_direct`]): into the cache, else into the ring, else to the HAL.
    ///
    /// Syncing and caching are inlined; a full cache is handled out of line.
    #[inline]
    pub fn recycle(&mut self, page: DmaPage, dirty_len: usize) {
        self.sync_dirty(&page, dirty_len);
        match self.cache.push(page) {
            Ok(()) => self.stats.recycle.cached += 1,
            Err(page) => self.recycle_spill(page),
        }
    }

    /// [`PagePool::recycle`] with a full cache: into the ring, else to the HAL. The page is
    /// already synced.
    #[cold]
    #[inline(never)]
    fn recycle_spill(&mut self, page: DmaPage) {
        self.stats.recycle.cache_full += 1;
        match self.ring {
            // Already synced: the ring carries a dirty length of 0.
            Some(ring) => {
                if let Err(page) = ring.recycle(page, 0) {
                    // The ring counted it as ring_full, which `stats` reports as released; do
                    // not count it twice.
                    release_to_hal(&self.dma, self.cfg.dir, page);
                }
            }
            None => {
                self.stats.recycle.ring_full += 1;
                self.release_to_hal(page);
            }
        }
    }

    /// Takes pages until `burst` is full: from the cache as one block move; when the cache runs
    /// dry, one page as [`PagePool::alloc`] takes it (which refills the cache from the recycle
    /// ring or the HAL), then the cache again. Returns the pages added; fewer than the room only
    /// when no page could be had.
    pub fn alloc_bulk<const N: usize>(&mut self, burst: &mut PageBurst<N>) -> usize {
        let before = burst.len();
        loop {
            let n = self.cache.move_top_to(burst, N);
            self.stats.alloc.fast += n as u64;
            if burst.room() == 0 {
                break;
            }
            let Some(p) = self.alloc_refill() else { break };
            if let Err(p) = burst.push(p) {
                // Cannot happen (checked the room); never drop a page.
                self.recycle(p, 0);
                break;
            }
        }
        burst.len() - before
    }

    /// Gives every page of `burst` back for reuse, each synced for the device over `dirty_len`
    /// bytes as [`PagePool::recycle`] syncs it (no loop at all when the HAL's syncs are no-ops):
    /// into the cache as one block move, the pages that do not fit one at a time as
    /// [`PagePool::recycle`] handles a full cache. Leaves `burst` empty.
    pub fn recycle_bulk<const N: usize>(&mut self, burst: &mut PageBurst<N>, dirty_len: usize) {
        let len = self.sync_len(dirty_len);
        if len > 0 {
            for p in burst.as_slice() {
                self.dma
                    .sync_for_device(p, self.cfg.sync_offset, len, self.cfg.dir);
            }
        }
        let n = burst.move_top_to(&mut self.cache, N);
        self.stats.recycle.cached += n as u64;
        while let Some(p) = burst.pop() {
            // Already synced.
            self.recycle_spill(p);
        }
    }

    /// The OS (running in the owning context) is done with a page the RX path handed it.
    pub fn return_from_os(&mut self, page: DmaPage, dirty_len: usize) {
        self.stats.os_returns += 1;
        self.recycle(page, dirty_len);
    }

    /// Releases a page that must not be reused (counted as `recycle.released_refcnt`).
    pub fn release(&mut self, page: DmaPage) {
        self.stats.recycle.released_refcnt += 1;
        self.release_to_hal(page);
    }

    /// Pages in the pool right now (cache and ring).
    #[must_use]
    pub fn available(&self) -> usize {
        self.cache.len() + self.ring.map_or(0, RecycleRing::len)
    }

    /// The statistics, with the recycle ring's counters folded in.
    #[must_use]
    pub fn stats(&self) -> PoolStats {
        let mut s = self.stats;
        s.alloc.fast += self.reused.0;
        s.recycle.cached += self.reused.0;
        if let Some(ring) = self.ring {
            let t = self.ring_totals.at(ring.counts());
            s.recycle.ring += t.pushed;
            s.recycle.ring_full += t.full;
            // A page refused by a full ring was released by whoever held it.
            s.pages_to_hal += t.full;
            s.os_returns += t.os_returns;
        }
        s
    }

    /// The census of this pool's pages, given what the queues report holding
    /// ([`crate::queue::rx::RxQueue::pages_in_ring`], [`crate::queue::tx::TxQueue::pool_pages_in_flight`],
    /// [`crate::queue::tx::TxQueue::pool_pages_parked`]) and
    /// how many pages the RX path handed to the OS (sum of [`crate::stats::counters::RxStats::to_os`]).
    /// `None` if the parts do not add up (a page was lost or counted twice).
    #[must_use]
    pub fn page_counts(
        &self,
        in_rx_ring: u64,
        in_tx_flight: u64,
        tx_parked: u64,
        to_os: u64,
    ) -> Option<PageCounts> {
        let s = self.stats();
        let with_os = to_os.checked_sub(s.os_returns)?;
        let counts = PageCounts {
            in_pool: self.available() as u64,
            in_rx_ring,
            in_tx_flight,
            tx_parked,
            with_os,
        };
        (counts.total() == s.live_pages()).then_some(counts)
    }

    /// Releases every page in the cache and the ring to the HAL.
    pub fn drain(&mut self) {
        while let Some(p) = self.cache.pop() {
            self.release_to_hal(p);
        }
        if let Some(ring) = self.ring {
            while let Some(r) = ring.pop() {
                self.release_to_hal(r.page);
            }
            self.ring_totals = self.ring_totals.at(ring.counts());
        }
    }
}

impl<D: DmaMemory, const CACHE: usize> PageProvider for PagePool<'_, D, CACHE> {
    type Page = DmaPage;

    #[inline]
    fn alloc_page(&mut self) -> Option<DmaPage> {
        self.alloc()
    }

    #[inline]
    fn recycle_direct(&mut self, page: DmaPage, dirty_len: usize) {
        self.recycle(page, dirty_len);
    }

    /// The page itself, synced for the device over `dirty_len` bytes: recycling it into the
    /// cache and taking it straight back out would give the same page.
    #[inline]
    fn reuse(&mut self, page: DmaPage, dirty_len: usize) -> Option<DmaPage> {
        self.sync_dirty(&page, dirty_len);
        self.reused.0 += 1;
        Some(page)
    }

    fn release_page(&mut self, page: DmaPage) {
        self.release(page);
    }

    #[inline]
    fn sync_for_cpu(&self, page: &DmaPage, offset: usize, len: usize) {
        self.dma.sync_for_cpu(page, offset, len, self.cfg.dir);
    }

    #[inline]
    fn sync_for_device(&self, page: &DmaPage, offset: usize, len: usize) {
        self.dma.sync_for_device(page, offset, len, self.cfg.dir);
    }

    fn device_readable(&self) -> bool {
        self.cfg.dir != Direction::FromDevice
    }
}

impl<D: DmaMemory, const CACHE: usize> Drop for PagePool<'_, D, CACHE> {
    fn drop(&mut self) {
        self.drain();
    }
}

impl<D: DmaMemory, const CACHE: usize> core::fmt::Debug for PagePool<'_, D, CACHE> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("PagePool")
            .field("cfg", &self.cfg)
            .field("cached", &self.cache.len())
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::vec::Vec;

    use onic_sim::{Card, CardConfig};

    use super::*;

    fn cfg() -> PoolConfig {
        PoolConfig {
            bulk: 4,
            ..PoolConfig::rx(Direction::FromDevice, 3520)
        }
    }

    #[test]
    fn fast_slow_and_release_paths() {
        let card = Card::new(CardConfig::default());
        let mut pool: PagePool<'_, _, 4> = PagePool::new(card.dma(), cfg(), None);
        let a = pool.alloc().unwrap();
        // One slow call brought 4 pages: one returned, three cached.
        assert_eq!(pool.stats().alloc.slow, 1);
        assert_eq!(pool.stats().pages_from_hal, 4);
        assert_eq!(pool.available(), 3);
        let b = pool.alloc().unwrap();
        assert_eq!(pool.stats().alloc.fast, 1);
        pool.recycle(a, 100);
        pool.recycle(b, 0);
        assert_eq!(pool.stats().recycle.cached, 2);
        // 100 dirty bytes were synced, the clean page was not.
        assert_eq!(card.dma_stats().syncs_for_device, 1);
        assert_eq!(pool.available(), 4);
        // The fifth allocation takes the slow path again: one page returned, three cached.
        let pages: Vec<_> = (0..5).map(|_| pool.alloc().unwrap()).collect();
        assert_eq!(pool.stats().pages_from_hal, 8);
        assert_eq!(pool.available(), 3);
        // Recycling five pages into a cache with room for one: four find it full and, without a
        // ring, go back to the HAL.
        for p in pages {
            pool.recycle(p, 0);
        }
        assert_eq!(pool.stats().recycle.cache_full, 4);
        assert_eq!(pool.stats().recycle.ring_full, 4);
        assert_eq!(pool.stats().live_pages(), 4);
        assert_eq!(card.dma_stats().live_pages, 4);
        let p = pool.alloc().unwrap();
        pool.release(p);
        assert_eq!(pool.stats().recycle.released_refcnt, 1);
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }

    #[test]
    fn ring_recycling_from_another_context() {
        let card = Card::new(CardConfig::default());
        let ring = RecycleRing::new();
        let mut pool: PagePool<'_, _, 4> = PagePool::new(card.dma(), cfg(), Some(&ring));
        let pages: Vec<_> = (0..3).map(|_| pool.alloc().unwrap()).collect();
        // The cache has the fourth page; drain the cache so allocation has to look at the ring.
        let extra = pool.alloc().unwrap();
        for p in pages {
            ring.return_from_os(p, 64).unwrap();
        }
        assert_eq!(ring.len(), 3);
        assert_eq!(pool.available(), 3);
        let again = pool.alloc().unwrap();
        // The refill moved half a cache (2 pages) out of the ring.
        assert_eq!(pool.stats().alloc.refill, 1);
        assert_eq!(pool.stats().os_returns, 3);
        assert_eq!(pool.stats().recycle.ring, 3);
        assert_eq!(ring.len(), 1);
        // Each page that came out of the ring was synced over its 64 dirty bytes.
        assert_eq!(card.dma_stats().syncs_for_device, 2);
        // The two pages the test holds are in no census place: the parts do not add up.
        assert_eq!(pool.page_counts(0, 0, 0, 3), None);
        pool.recycle(again, 0);
        pool.recycle(extra, 0);
        let counts = pool.page_counts(0, 0, 0, 3).unwrap();
        assert_eq!(
            counts,
            PageCounts {
                in_pool: 4,
                ..PageCounts::default()
            }
        );
        assert_eq!(pool.page_counts(1, 0, 0, 3), None);
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
    }

    #[test]
    fn ring_counters_stay_exact_across_their_32_bit_wrap() {
        let card = Card::new(CardConfig::default());
        let dma = card.dma();
        let ring: RecycleRing = RecycleRing::near_wrap(2);
        let mut pool: PagePool<'_, _, 4> = PagePool::new(dma, PoolConfig { bulk: 4, ..cfg() }, Some(&ring));
        // Rounds of three pages handed to the OS and given back through the ring, the next
        // round's allocations refilling from it: the ring's counters wrap in the first round.
        for round in 1..=10u64 {
            let pages: Vec<_> = (0..3).map(|_| pool.alloc().unwrap()).collect();
            for p in pages {
                ring.return_from_os(p, 0).unwrap();
            }
            let s = pool.stats();
            assert_eq!((s.os_returns, s.recycle.ring), (3 * round, 3 * round));
        }
        // A full ring refuses pages, its refusal counter wrapping too.
        let pages: Vec<_> = (0..RECYCLE_RING_CAPACITY + 5)
            .map(|_| pool.alloc().unwrap())
            .collect();
        let mut refused = 0u64;
        for p in pages {
            if let Err(p) = ring.recycle(p, 0) {
                release_to_hal(&dma, Direction::FromDevice, p);
                refused += 1;
            }
        }
        assert!(refused > 2, "the refusals cross the wrap");
        let s = pool.stats();
        assert_eq!(s.recycle.ring_full, refused);
        assert_eq!(s.recycle.ring, 30 + (RECYCLE_RING_CAPACITY as u64 + 5 - refused));
        // Every page is accounted for: none with the OS (30 handed out, 30 given back).
        let counts = pool.page_counts(0, 0, 0, 30).unwrap();
        assert_eq!(counts.with_os, 0);
        assert_eq!(counts.in_pool, s.live_pages());
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }

    #[test]
    fn full_ring_hands_the_page_back() {
        let card = Card::new(CardConfig::default());
        let dma = card.dma();
        let ring: RecycleRing = RecycleRing::new();
        let mut pool: PagePool<'_, _, 2> = PagePool::new(dma, PoolConfig { bulk: 1, ..cfg() }, Some(&ring));
        let mut pages = Vec::new();
        for _ in 0..RECYCLE_RING_CAPACITY + 1 {
            pages.push(pool.alloc().unwrap());
        }
        let last = pages.pop().unwrap();
        for p in pages {
            ring.recycle(p, 0).unwrap();
        }
        let back = ring.recycle(last, 0).unwrap_err();
        release_to_hal(&dma, Direction::FromDevice, back);
        let s = pool.stats();
        assert_eq!(s.recycle.ring_full, 1);
        assert_eq!(s.live_pages(), RECYCLE_RING_CAPACITY as u64);
        assert_eq!(
            pool.page_counts(0, 0, 0, 0).unwrap().in_pool,
            RECYCLE_RING_CAPACITY as u64
        );
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }

    #[test]
    fn bulk_alloc_and_recycle_move_whole_bursts() {
        let card = Card::new(CardConfig::default());
        let mut pool: PagePool<'_, _, 8> = PagePool::new(card.dma(), PoolConfig { bulk: 8, ..cfg() }, None);
        let mut burst: PageBurst<5> = PageBurst::new();
        // An empty cache: one slow call brings 8 pages, 5 go into the burst.
        assert_eq!(pool.alloc_bulk(&mut burst), 5);
        assert_eq!(burst.len(), 5);
        assert_eq!(pool.stats().pages_from_hal, 8);
        assert_eq!(pool.available(), 3);
        // Full: nothing more is taken.
        assert_eq!(pool.alloc_bulk(&mut burst), 0);
        let addrs: Vec<_> = burst.as_slice().iter().map(DmaPage::dma_addr).collect();
        pool.recycle_bulk(&mut burst, 100);
        assert!(burst.is_empty());
        assert_eq!(pool.available(), 8);
        // Each page was synced over its 100 dirty bytes.
        assert_eq!(card.dma_stats().syncs_for_device, 5);
        assert_eq!(pool.stats().recycle.cached, 5);
        // Taken again: the same pages come back out.
        assert_eq!(pool.alloc_bulk(&mut burst), 5);
        let mut again: Vec<_> = burst.as_slice().iter().map(DmaPage::dma_addr).collect();
        let mut want = addrs.clone();
        again.sort_unstable_by_key(|a| a.get());
        want.sort_unstable_by_key(|a| a.get());
        assert_eq!(again, want);
        // A second burst: 3 pages from the cache, then a slow call of 8 (one page returned, 7
        // cached), then one more from the cache.
        let mut other: PageBurst<5> = PageBurst::new();
        assert_eq!(pool.alloc_bulk(&mut other), 5);
        assert_eq!(pool.stats().pages_from_hal, 16);
        assert_eq!(pool.available(), 6);
        // Both back into a cache of 8: what does not fit spills (no ring: back to the HAL).
        pool.recycle_bulk(&mut burst, 0);
        assert_eq!(pool.stats().recycle.cache_full, 3);
        pool.recycle_bulk(&mut other, 0);
        assert_eq!(pool.stats().recycle.cache_full, 8);
        assert_eq!(pool.available(), 8);
        assert_eq!(pool.stats().live_pages(), 8);
        assert_eq!(pool.page_counts(0, 0, 0, 0).unwrap().in_pool, 8);
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }

    #[test]
    fn bulk_alloc_stops_when_no_page_can_be_had() {
        let card = Card::new(CardConfig::default());
        let mut pool: PagePool<'_, _, 4> = PagePool::new(card.dma(), cfg(), None);
        let mut burst: PageBurst<6> = PageBurst::new();
        card.faults().fail_next_page_allocs(1);
        assert_eq!(pool.alloc_bulk(&mut burst), 0);
        assert_eq!(pool.stats().hal_alloc_failures, 1);
        // Two slow calls of 4 pages: 6 in the burst, 2 cached.
        assert_eq!(pool.alloc_bulk(&mut burst), 6);
        assert_eq!(pool.available(), 2);
        pool.recycle_bulk(&mut burst, 0);
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
    }

    /// Checks that the census adds up with every page back in the pool, and that it holds `n`.
    fn all_in_pool<D: DmaMemory, const C: usize>(pool: &PagePool<'_, D, C>, n: u64) {
        let counts = pool
            .page_counts(0, 0, 0, 0)
            .expect("no page lost or counted twice");
        assert_eq!(counts.in_pool, n);
        assert_eq!(pool.stats().live_pages(), n);
    }

    #[test]
    fn partial_bursts_fill_up_and_go_back_whole() {
        let card = Card::new(CardConfig::default());
        let mut pool: PagePool<'_, _, 8> = PagePool::new(card.dma(), PoolConfig { bulk: 8, ..cfg() }, None);
        let mut burst: PageBurst<6> = PageBurst::new();
        // Two pages taken one at a time, then the burst topped up from the cache.
        for _ in 0..2 {
            let p = pool.alloc().unwrap();
            burst.push(p).unwrap();
        }
        assert_eq!(pool.available(), 6);
        assert_eq!(pool.alloc_bulk(&mut burst), 4);
        assert_eq!((burst.len(), pool.available()), (6, 2));
        assert_eq!(pool.page_counts(0, 0, 0, 0), None, "six pages are with the test");
        // Half the burst handed back one at a time, the rest in one call.
        for _ in 0..3 {
            let p = burst.pop().unwrap();
            pool.recycle(p, 0);
        }
        pool.recycle_bulk(&mut burst, 0);
        assert!(burst.is_empty());
        all_in_pool(&pool, 8);
        // An empty burst goes back as a no-op; a burst larger than the cache takes all of it,
        // then refills from the HAL.
        pool.recycle_bulk(&mut burst, 0);
        let mut big: PageBurst<12> = PageBurst::new();
        assert_eq!(pool.alloc_bulk(&mut big), 12);
        assert_eq!(pool.stats().pages_from_hal, 16);
        assert_eq!(pool.available(), 4);
        pool.recycle_bulk(&mut big, 0);
        // Four fit, eight were released (no ring).
        assert_eq!(pool.stats().recycle.cache_full, 8);
        all_in_pool(&pool, 8);
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }

    #[test]
    fn bulk_recycling_into_a_full_cache_spills_into_the_ring() {
        let card = Card::new(CardConfig::default());
        let ring = RecycleRing::new();
        let mut pool: PagePool<'_, _, 4> = PagePool::new(card.dma(), cfg(), Some(&ring));
        let mut a: PageBurst<4> = PageBurst::new();
        let mut b: PageBurst<4> = PageBurst::new();
        assert_eq!(pool.alloc_bulk(&mut a), 4);
        assert_eq!(pool.alloc_bulk(&mut b), 4);
        assert_eq!(pool.stats().pages_from_hal, 8);
        pool.recycle_bulk(&mut a, 100);
        // The cache is full: the second burst goes to the ring, already synced.
        pool.recycle_bulk(&mut b, 100);
        assert_eq!(pool.stats().recycle.cache_full, 4);
        assert_eq!(pool.stats().recycle.ring, 4);
        assert_eq!(ring.len(), 4);
        assert_eq!(card.dma_stats().syncs_for_device, 8);
        all_in_pool(&pool, 8);
        // Taking twelve: four from the cache, four from the ring (half a cache per refill), then
        // one slow call of four from the HAL.
        let mut c: PageBurst<12> = PageBurst::new();
        assert_eq!(pool.alloc_bulk(&mut c), 12);
        assert!(ring.is_empty());
        assert_eq!(pool.stats().alloc.refill, 2);
        assert_eq!(pool.stats().pages_from_hal, 12);
        assert_eq!(
            card.dma_stats().syncs_for_device,
            8,
            "ring pages carried no dirty bytes"
        );
        pool.recycle_bulk(&mut c, 0);
        // Four into the cache, eight into the ring (it has room for 128).
        assert_eq!(ring.len(), 8);
        all_in_pool(&pool, 12);
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }

    #[test]
    fn allocation_failure_is_counted() {
        let card = Card::new(CardConfig::default());
        let mut pool: PagePool<'_, _, 4> = PagePool::new(card.dma(), cfg(), None);
        card.faults().fail_next_page_allocs(1);
        assert!(pool.alloc().is_none());
        assert_eq!(pool.stats().hal_alloc_failures, 1);
        assert_eq!(pool.stats().alloc.empty, 1);
        assert!(pool.alloc().is_some_and(|p| {
            pool.recycle(p, 0);
            true
        }));
    }
}
