//! The C2H descriptor ring's memory and the page of each slot ([`DescRing`]): a received frame
//! is delivered from its slot, and a page put in its place, with the counts of what became of the
//! frames ([`Tally`]); the descriptor word a page gets ([`desc_word`]) and the release of a page
//! the device cannot address. Posting the slots to the device is `refill.rs`.

use onic_hal::layout::desc::{C2hDesc, C2H_DESC_BYTES};
use onic_hal::{CoherentRegion, DmaAddr, DmaMemory, PAGE_SIZE};

use super::frame::{FrameHandler, Handled, RxLen};
use crate::config::RX_HEADROOM;
use crate::queue::pool::{PageProvider, PoolPage};
use crate::stats::counters::RxStats;

/// Counts of the frames one poll delivered, kept in registers during the poll and added to the
/// [`RxStats`] when it returns (nothing can read the statistics in between). Every delivered
/// frame takes exactly one of the three ways counted, so their sum is the packet count: one
/// counter fewer per frame.
#[derive(Clone, Copy, Default)]
pub(super) struct Tally {
    bytes: u64,
    /// Frames dropped for want of a page to replace theirs.
    no_page: u64,
    recycled: u64,
    to_os: u64,
    to_tx: u64,
}

impl RxStats {
    pub(super) fn add(&mut self, t: Tally) {
        self.rx_packets += t.recycled + t.to_os + t.to_tx;
        self.rx_bytes += t.bytes;
        self.rx_no_page += t.no_page;
        self.recycled += t.recycled;
        self.to_os += t.to_os;
        self.to_tx += t.to_tx;
    }
}

/// The C2H descriptor ring: its memory and the page of each slot, with the spare and the counts
/// that go with them. Apart from the rest of [`RxQueue`] so that a frame can be delivered
/// ([`DescRing::deliver`]) while the completion ring's entries are being read.
///
/// [`RxQueue`]: super::RxQueue
pub(super) struct DescRing<D: DmaMemory, Pg, St> {
    pub(super) region: CoherentRegion<D>,
    /// One page per descriptor slot: the shadow of the descriptor ring (the queue's own storage,
    /// handed back by [`RxQueue::teardown`]).
    ///
    /// [`RxQueue::teardown`]: super::RxQueue::teardown
    pub(super) slots: St,
    /// Unposted slots, counted from `tail`, whose descriptor in ring memory may not point at
    /// their page (or which hold none): a refill walks these. Every unposted slot after them
    /// holds a page its descriptor already points at (see [`RxQueue::fill`]), so a refill posts
    /// those by moving the tail alone. [`UNREADY_ALL`] (or any count above the unposted
    /// slots) walks them all.
    ///
    /// [`RxQueue::fill`]: super::RxQueue::fill
    pub(super) unready: u16,
    /// A page ready to replace the next received page that leaves its slot.
    pub(super) spare: Option<Pg>,
    /// Pages held: in slots, plus the spare.
    pub(super) pages: u32,
}

/// [`DescRing::unready`] when no unposted slot may be trusted: the next refill walks them all.
pub(super) const UNREADY_ALL: u16 = u16::MAX;

impl<D: DmaMemory, Pg: PoolPage, St: AsMut<[Option<Pg>]>> DescRing<D, Pg, St> {
    /// Hands the good single-buffer frame of slot `first` (`len` bytes) to `sink`. A page to take
    /// its place must be at hand first (the spare); without one the frame is dropped and its page
    /// stays, unless the provider lets the ring run short ([`PageProvider::may_run_short`]):
    /// then the frame goes on, and a slot it leaves stays empty until a refill. A frame the
    /// sink gives back leaves its page in the slot (through [`PageProvider::reuse`], which
    /// syncs what was written). A page that goes elsewhere is replaced by a page from the pool,
    /// taken there and then, and by the spare only when the pool has none: so the spare stays
    /// put while pages flow, and is not stored and loaded back for every frame that leaves
    /// (written as two 8-byte stores and read a few dozen instructions later with one 16-byte
    /// load, which the CPU cannot forward from stores still in flight: a stall per frame,
    /// XDP_PASS 0.6x). Always inlined: it is the body of the RX loop.
    #[inline(always)]
    pub(super) fn deliver<P: PageProvider<Page = Pg>, S: FrameHandler<P>>(
        &mut self,
        first: usize,
        len: u32,
        pool: &mut P,
        sink: &mut S,
        tally: &mut Tally,
    ) {
        if self.spare.is_none() && !self.take_spare(pool) && !pool.may_run_short() {
            tally.no_page += 1;
            return;
        }
        // Unreachable without a page (a posted slot always holds one, and `first` is a slot of
        // the ring); the next refill walks the slots and fills it.
        let Some(slot) = self.slots.as_mut().get_mut(first) else {
            self.unready = UNREADY_ALL;
            return;
        };
        let Some(page) = slot.take() else {
            self.unready = UNREADY_ALL;
            return;
        };
        // Only the bytes the device wrote are handed to the CPU.
        pool.sync_for_cpu(&page, RX_HEADROOM as usize, len as usize);
        tally.bytes += u64::from(len);
        // CAST: `len` (a u16 field) fits u16. Both callers checked it against one buffer:
        // 1..=single_limit, or 1..=buf_bytes; either is at most RX_BUFFER_ROOM.
        let rx_len = RxLen(len as u16);
        *slot = match sink.handle(page, rx_len, pool) {
            Handled::Recycle(f) => {
                tally.recycled += 1;
                let end = crate::config::written_after_headroom(f.offset, f.len);
                pool.reuse(f.page, end.max(len as usize))
            }
            Handled::ToOs => {
                tally.to_os += 1;
                None
            }
            #[cfg(feature = "xdp")]
            Handled::ToTx(back) => {
                tally.to_tx += 1;
                back
            }
        };
        if slot.is_none() {
            // The page left (to the OS, a TX ring that gave none back, or a provider with
            // nothing to give back): a page from the pool takes its slot, or the spare when the
            // pool has none. When the spare went, the next frame first asks the pool for a new
            // one, so a frame is dropped only when no replacement page can be had for it.
            // A provider that lets the ring run short may have had neither: the slot stays
            // empty, and the descriptor check below sends the next refill over every slot.
            match pool.alloc_page() {
                Some(p) => *slot = Some(p),
                None => {
                    *slot = self.spare.take();
                    self.pages -= 1;
                }
            }
        }
        // The slot's descriptor points at the page it holds now, ready for the next refill
        // (RxQueue::fill); a page the device cannot address whole makes that refill walk, and
        // the walk releases it (DescRing::stage).
        match slot.as_ref().and_then(desc_word) {
            Some(word) => self.region.write_u64(C2H_DESC_BYTES * first, word),
            None => self.unready = UNREADY_ALL,
        }
    }

    /// Gets the spare page from `pool`; `false` if it has none.
    #[inline]
    fn take_spare<P: PageProvider<Page = Pg>>(&mut self, pool: &mut P) -> bool {
        self.spare = pool.alloc_page();
        if self.spare.is_some() {
            self.pages += 1;
        }
        self.spare.is_some()
    }
}

/// The C2H descriptor of a slot holding `page`: the buffer starts [`RX_HEADROOM`] bytes in
/// (hardware.md §12.1). `None` when some byte of the page has no device address: its range
/// `[addr, addr + PAGE_SIZE)` wraps past 2^64, the device's 64-bit address space. The device
/// writes up to a buffer's length from the descriptor's address, and an XDP_TX frame may be
/// sent from anywhere in the page, so the whole page must be addressable, not only its first
/// buffer byte. One checked addition covers it: the buffer's start lies below the page's end.
#[inline]
pub(super) fn desc_word<Pg: PoolPage>(page: &Pg) -> Option<u64> {
    let start = page.dma_addr();
    start.checked_add(PAGE_SIZE as u64 - 1)?;
    // No overflow: RX_HEADROOM is below PAGE_SIZE.
    let addr = DmaAddr::new(start.get() + u64::from(RX_HEADROOM));
    Some(C2hDesc::new(addr).to_word())
}

/// Releases the page of `slot`, which [`desc_word`] refused, to `pool` for good (the pool must
/// not hand it out again); returns how many pages were released (0 for an empty slot).
#[cold]
#[inline(never)]
pub(super) fn release_unaddressable<P: PageProvider>(slot: &mut Option<P::Page>, pool: &mut P) -> u32 {
    match slot.take() {
        Some(page) => {
            pool.release_page(page);
            1
        }
        None => 0,
    }
}
