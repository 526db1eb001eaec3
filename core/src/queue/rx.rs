//! The receive queue: a C2H descriptor ring, its completion (CMPT) ring, and the pages behind the
//! descriptors (hardware.md §6, §7.2-§7.4, §8.3-§8.5, §12.1).
//!
//! # Ownership of the rings
//!
//! The driver writes C2H descriptors and never reads them back: it keeps a shadow (the page in
//! each slot). The device writes completion entries and the completion status record; the driver
//! reads those, and only those, and checks them against what it knows before acting on them:
//!
//! - the status record's producer index must name an entry of the ring (else the queue enters its
//!   error state and touches nothing more);
//! - an entry between the driver's consumer index and that producer index must carry the expected
//!   color, or it is treated as not yet visible (the device may write the status record before the
//!   entry becomes visible when PCIe relaxed ordering is on, hardware.md §1.4);
//! - the entry's error bit, a length of 0, a length above the largest frame or above what the
//!   posted buffers can hold make a counted drop;
//! - a completion needing more descriptors than were posted puts the queue in its error state.
//!
//! # A device that stops making sense
//!
//! Some lies cannot be seen in one value, only in a queue that stops moving while the device
//! claims there is work: completions the status record reports whose entry never gets the
//! expected color, entries of the expected color the status record never reports, or a device
//! whose C2H consumer index (its descriptor-ring status record, hardware.md §7.4) disagrees with
//! the descriptors the completions accounted for once everything reported has been consumed (the
//! ring is out of step: a completion length that did not match the descriptors the frame used,
//! or a device dropping for lack of descriptors while the driver has many posted). A poll that
//! ends in such a state without consuming anything asks to be polled again (the device may be
//! about to make its writes visible); after [`RxOptions::stall_polls`] such polls in a row the
//! queue enters its error state, counts and logs it, and reports neither `more` nor `armed`.
//!
//! A queue in its error state touches nothing until [`RxQueue::restart`] (or teardown):
//! contexts invalidated, every page back in the pool, rings cleared, indices and color from the
//! start, ring refilled, contexts programmed again.
//!
//! # Stopping
//!
//! Once started, the rings and the posted pages are the device's until its contexts are
//! invalidated. [`RxQueue::teardown`] does that and, with the [`Quiesced`] proof the invalidation
//! yields, gives every page back to the pool and both rings to the allocator ([`RxQueue::release`]
//! for an edge that has the proof by other means). Without the proof nothing is given back: a
//! started queue dropped without its teardown, or one whose teardown failed, leaks its rings
//! (logged by [`onic_hal::CoherentRegion`]) and leaves its pages in their slots (the caller's
//! storage), never returned to the pool. A queue never started frees its rings when dropped.
//!
//! # Buffers
//!
//! Each slot holds one page; its descriptor points [`RX_HEADROOM`] bytes in, and the device writes
//! at most the C2H buffer size there, which [`crate::config::BufSizeIdx`] keeps inside the page
//! (deviation 1 of `docs/deviations.md`). A frame longer than one buffer spans several descriptors;
//! this version drops such frames with a counter (they only occur with jumbo-frame shell builds).
//! A page is posted only if all its bytes have device addresses (its range does not wrap past
//! 2^64); a provider's page that does not is released for good and counted
//! ([`RxStats::refill_bad_pages`]), and the slot is filled by a later refill.
//!
//! The queue owns the storage of its slots (one `Option` of a page per usable descriptor) as a
//! type parameter, anything that is `AsMut<[Option<Pg>]>`: an array on bare metal, a boxed
//! slice on a host or in the kernel. The caller allocates it (the core does not allocate), and
//! [`RxQueue::teardown`] hands it back, every slot empty.
//!
//! # Refill
//!
//! A received page leaves its slot only when a replacement page is there to take its place (the
//! queue keeps one spare page for that); when the pool has none, the frame is dropped and counted
//! and its own page stays in the slot, so the ring never loses a buffer. A page whose frame was
//! dropped or copied stays in its slot ([`PageProvider::reuse`]) and the spare waits for the next
//! frame, so the drop path makes no round trip through the pool. An XDP_TX frame's page is
//! replaced by the page an earlier XDP_TX frame left in the TX slot it is posted in, when there
//! is one ([`crate::queue::tx::TxQueue::xmit_pool`]), so the spare waits then too. A slot's
//! descriptor is written as its new page goes in, so a refill posts such slots by moving its
//! producer index alone, with no walk over them. Slots are handed back to the device in batches
//! (one C2H PIDX doorbell per batch). Unlike the reference driver, which fills 1023 descriptors
//! but hands only 256 of them to the device, every page in the ring is posted: the pages are
//! allocated anyway, and a device with the whole ring available absorbs longer bursts before it
//! drops for lack of descriptors.

use core::sync::atomic::{fence, Ordering};

use onic_hal::context::QueueSide;
use onic_hal::layout::desc::{C2hDesc, CmptEntry, WbStatus, C2H_DESC_BYTES};
use onic_hal::{
    AbsQueueId, AddrLimit, CoherentRegion, DelayNs, DmaAddr, DmaMemory, Quiesced, RegisterWindow, PAGE_SIZE,
};

use crate::config::{RxQueueConfig, RX_BUFFER_ROOM, RX_HEADROOM};
use crate::error::{ConfigError, QueueError, Result};
use crate::queue::control::QueueControl;
use crate::queue::doorbell::Doorbells;
use crate::queue::pool::{PageProvider, PoolPage};
use crate::queue::ring::{Color, Ring};
use crate::stats::counters::RxStats;

/// Largest frame the stock shell passes (hardware.md §14: 1514 bytes without FCS).
pub const DEFAULT_MAX_FRAME_LEN: u32 = 1514;

/// Most descriptors handed back per refill batch: one NAPI budget, so that a full poll of a
/// large ring writes one CIDX and one C2H PIDX doorbell. (32 measured 4 instructions per frame
/// more on every RX path, each batch's doorbells, run checks and refill spread over half as many
/// frames.)
pub const REFILL_BATCH_MAX: u16 = 64;

/// Polls in a row that may end without progress while the device claims work before the queue
/// gives up ([`RxOptions::stall_polls`]). A poll that finds nothing it can consume costs a few
/// hundred nanoseconds at least (status and entry reads, a doorbell), so this spans far more
/// than the time a working device needs to make a reported write visible, and bounds a polling
/// loop over a broken one.
pub const RX_STALL_POLLS_DEFAULT: u16 = 1000;

/// A received frame: the page it is in, where it starts and how long it is.
#[derive(Debug)]
pub struct RxFrame<Pg> {
    /// The page (owned: whoever holds the frame holds the page).
    pub page: Pg,
    /// Offset of the first byte in the page ([`RX_HEADROOM`] as received; a sink may move it).
    pub offset: u16,
    /// Length in bytes.
    pub len: u16,
}

impl<Pg: PoolPage> RxFrame<Pg> {
    /// The frame's bytes (empty if `offset`/`len` were moved outside the page).
    #[must_use]
    pub fn data(&self) -> &[u8] {
        let start = usize::from(self.offset);
        self.page
            .bytes()
            .get(start..start + usize::from(self.len))
            .unwrap_or(&[])
    }

    /// The frame's bytes, writable (empty if `offset`/`len` were moved outside the page).
    pub fn data_mut(&mut self) -> &mut [u8] {
        let start = usize::from(self.offset);
        let end = start + usize::from(self.len);
        self.page.bytes_mut().get_mut(start..end).unwrap_or(&mut [])
    }
}

/// What became of a frame handed to a [`FrameHandler`].
#[derive(Debug)]
pub(crate) enum Handled<Pg> {
    /// The handler is done with it (XDP_DROP, or the OS copied the data): recycle the page.
    Recycle(RxFrame<Pg>),
    /// The page went to the OS (XDP_PASS); it comes back through the pool.
    ToOs,
    /// The page was queued on a TX ring (XDP_TX, redirect) or taken by another redirect target;
    /// the TX queue (or that target, through the pool's recycle ring) returns it. An XDP_TX frame
    /// may bring a page of the pool back for the slot ([`crate::queue::tx::TxQueue::xmit_pool`]),
    /// synced for the device.
    #[cfg(feature = "xdp")]
    ToTx(Option<Pg>),
}

/// The length of a frame the RX queue hands to its [`FrameHandler`]: from 1 byte up to one
/// buffer, and a buffer is at most [`RX_BUFFER_ROOM`] bytes ([`crate::config::BufSizeIdx`]), so
/// the frame, at [`RX_HEADROOM`] in its page, ends before the page's tailroom. Only the RX queue
/// makes one, from a length it checked against its buffer size.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RxLen(u16);

impl RxLen {
    /// A length for tests of the frame handlers, checked as the RX queue checks it.
    #[cfg(all(test, feature = "xdp"))]
    pub(crate) fn for_test(len: u16) -> Self {
        assert!(len >= 1 && u32::from(len) <= RX_BUFFER_ROOM);
        Self(len)
    }

    /// The length in bytes.
    pub(crate) const fn get(self) -> u16 {
        self.0
    }
}

/// What a queue pair's poll hands each received frame to (the pair's dispatcher, or a test).
pub(crate) trait FrameHandler<P: PageProvider> {
    /// Takes one frame: `len` bytes at [`RX_HEADROOM`] in `page`. `pool` is the queue's page
    /// provider (for XDP_TX syncs).
    fn handle(&mut self, page: P::Page, len: RxLen, pool: &mut P) -> Handled<P::Page>;
}

impl<P: PageProvider, T: FnMut(RxFrame<P::Page>, &mut P) -> Handled<P::Page>> FrameHandler<P> for T {
    #[inline]
    fn handle(&mut self, page: P::Page, len: RxLen, pool: &mut P) -> Handled<P::Page> {
        // CAST: RX_HEADROOM (256) fits u16.
        let frame = RxFrame {
            page,
            offset: RX_HEADROOM as u16,
            len: len.get(),
        };
        self(frame, pool)
    }
}

/// Tuning of an RX queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RxOptions {
    /// Largest frame the shell can deliver (its build parameter; hardware.md §14). Longer
    /// completions are bad lengths. While it fits one buffer, every completion consumes exactly one
    /// descriptor, whatever length a faulty device reports.
    pub max_frame_len: u32,
    /// Descriptors handed back per C2H PIDX doorbell.
    pub refill_batch: u16,
    /// Polls in a row that may end without progress while the device claims work before the
    /// queue enters its error state (0: never).
    pub stall_polls: u16,
    /// Compare the device's C2H consumer index (the descriptor ring's status record, written by
    /// the device with `wbk_en`, hardware.md §5.2, §7.4) with the driver's once a poll has consumed
    /// everything reported. Off for a device that does not write that record.
    pub check_c2h_status: bool,
}

impl RxOptions {
    /// Defaults for a queue: the stock shell's largest frame, and refill batches of an eighth of
    /// the ring (at most [`REFILL_BATCH_MAX`]).
    #[must_use]
    pub const fn for_queue(cfg: &RxQueueConfig) -> Self {
        let eighth = cfg.desc_ring.usable() / 8;
        let batch = if eighth > REFILL_BATCH_MAX {
            REFILL_BATCH_MAX
        } else {
            eighth
        };
        Self {
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            refill_batch: if batch < 1 { 1 } else { batch },
            stall_polls: RX_STALL_POLLS_DEFAULT,
            check_c2h_status: true,
        }
    }
}

/// What a poll did, and what the caller (NAPI, a bare-metal loop) should do next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PollOutcome {
    /// Completions consumed (frames delivered or dropped); never more than the budget.
    pub done: usize,
    /// The poll caught up and re-armed the queue interrupt (NAPI: complete).
    pub armed: bool,
    /// Poll again soon: the budget ran out, entries were not yet visible, completions arrived
    /// while re-arming, or the device claims work the poll could not find yet. Never set when
    /// `error` is: a queue in its error state does not ask to be polled.
    pub more: bool,
    /// The queue is in its error state (it needs [`RxQueue::restart`]).
    pub error: Option<QueueError>,
}

/// Why a poll that consumed nothing thinks the device claims work.
#[derive(Clone, Copy)]
enum Claim {
    /// The status record reports completions up to `pidx`; the entry at `cidx` lacks the
    /// expected color.
    NotVisible { cidx: u16, pidx: u16 },
    /// The entry at `cidx` has the expected color, the status record does not report it.
    Unreported { cidx: u16 },
    /// Everything reported is consumed, but the device's C2H consumer index is `device`, not the
    /// driver's `driver`.
    OutOfStep { device: u16, driver: u16 },
}

impl Claim {
    const fn error(self, polls: u16) -> QueueError {
        match self {
            Self::NotVisible { cidx, pidx } => QueueError::CmptNotVisible { cidx, pidx, polls },
            Self::Unreported { cidx } => QueueError::CmptUnreported { cidx, polls },
            Self::OutOfStep { device, driver } => QueueError::C2hOutOfStep {
                device,
                driver,
                polls,
            },
        }
    }
}

/// What [`RxQueue::complete_batch`] did.
struct Batch {
    /// Completion entries consumed.
    taken: u16,
    /// It stopped at an entry without the expected color (not written yet).
    not_visible: bool,
    /// The error that put the queue in its error state, if one did.
    failed: Option<QueueError>,
}

/// Counts of the frames one poll delivered, kept in registers during the poll and added to the
/// [`RxStats`] when it returns (nothing can read the statistics in between). Every delivered
/// frame takes exactly one of the three ways counted, so their sum is the packet count: one
/// counter fewer per frame.
#[derive(Clone, Copy, Default)]
struct Tally {
    bytes: u64,
    /// Frames dropped for want of a page to replace theirs.
    no_page: u64,
    recycled: u64,
    to_os: u64,
    to_tx: u64,
}

impl RxStats {
    fn add(&mut self, t: Tally) {
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
struct DescRing<D: DmaMemory, Pg, St> {
    region: CoherentRegion<D>,
    /// One page per descriptor slot: the shadow of the descriptor ring (the queue's own storage,
    /// handed back by [`RxQueue::teardown`]).
    slots: St,
    /// Unposted slots, counted from `tail`, whose descriptor in ring memory may not point at
    /// their page (or which hold none): a refill walks these. Every unposted slot after them
    /// holds a page its descriptor already points at (see [`RxQueue::fill`]), so a refill posts
    /// those by moving the tail alone. [`UNREADY_ALL`] (or any count above the unposted
    /// slots) walks them all.
    unready: u16,
    /// A page ready to replace the next received page that leaves its slot.
    spare: Option<Pg>,
    /// Pages held: in slots, plus the spare.
    pages: u32,
}

/// [`DescRing::unready`] when no unposted slot may be trusted: the next refill walks them all.
const UNREADY_ALL: u16 = u16::MAX;

impl<D: DmaMemory, Pg: PoolPage, St: AsMut<[Option<Pg>]>> DescRing<D, Pg, St> {
    /// Hands the good single-buffer frame of slot `first` (`len` bytes) to `sink`. A page to take
    /// its place must be at hand first (the spare); without one the frame is dropped and its page
    /// stays. A frame the sink gives back leaves its page in the slot (through
    /// [`PageProvider::reuse`], which syncs what was written). A page that goes elsewhere is
    /// replaced by a page from the pool, taken there and then, and by the spare only when the
    /// pool has none: so the spare stays put while pages flow, and is not stored and loaded back
    /// for every frame that leaves (written as two 8-byte stores and read a few dozen
    /// instructions later with one 16-byte load, which the CPU cannot forward from stores still
    /// in flight: a stall per frame, XDP_PASS 0.6x). Always inlined: it is the body of the RX
    /// loop.
    #[inline(always)]
    fn deliver<P: PageProvider<Page = Pg>, S: FrameHandler<P>>(
        &mut self,
        first: usize,
        len: u32,
        pool: &mut P,
        sink: &mut S,
        tally: &mut Tally,
    ) {
        if self.spare.is_none() && !self.take_spare(pool) {
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

/// A receive queue.
pub struct RxQueue<D: DmaMemory, Pg, St> {
    cfg: RxQueueConfig,
    opts: RxOptions,
    /// The descriptor ring and the pages behind it.
    desc: DescRing<D, Pg, St>,
    cmpt: CoherentRegion<D>,
    /// Index space of the C2H descriptor ring.
    didx: Ring,
    /// Index space of the completion ring.
    cring: Ring,
    cmpt_stride: usize,
    buf_bytes: u32,
    /// Completion lengths below this (after subtracting 1) are good single-buffer frames:
    /// `min(max_frame_len, buf_bytes)`.
    single_limit: u32,
    /// Oldest posted descriptor (the next one the device fills).
    head: u16,
    /// Next descriptor to post (the C2H producer index).
    tail: u16,
    /// Descriptors posted (between head and tail).
    posted: u16,
    /// Next completion entry to read.
    cmpt_cidx: u16,
    /// The completion consumer index last written to the device (CMPT CIDX doorbell).
    cmpt_acked: u16,
    color: Color,
    started: bool,
    /// The absolute queue id the device was told about the rings under (set by `start`).
    device_qid: Option<AbsQueueId>,
    error: Option<QueueError>,
    /// Polls in a row that ended without progress while the device claimed work.
    stalled: u16,
    stats: RxStats,
}

impl<D: DmaMemory + Clone, Pg: PoolPage, St: AsMut<[Option<Pg>]>> RxQueue<D, Pg, St> {
    /// Allocates the descriptor and completion rings (zeroed, below 4 GiB) and takes `slots`
    /// (one per usable descriptor-ring entry, empty) as the queue's own storage for the pages:
    /// an array, a boxed slice, a `Vec`, a `heapless::Vec` or a borrowed slice.
    ///
    /// # Errors
    ///
    /// [`ConfigError::SlotStorage`] when `slots` is too short; [`ConfigError::RingSizeIndex`] for
    /// a ring too small to use; [`crate::Error::Dma`]. The storage is dropped with the error.
    pub fn new(dma: D, cfg: RxQueueConfig, opts: RxOptions, mut slots: St) -> Result<Self> {
        let (Some(didx), Some(cring)) = (
            Ring::new(cfg.desc_ring.usable()),
            Ring::new(cfg.cmpt_ring.usable()),
        ) else {
            return Err(ConfigError::RingSizeIndex {
                index: cfg.desc_ring.index().min(cfg.cmpt_ring.index()),
            }
            .into());
        };
        if cring.len() < didx.len() {
            return Err(ConfigError::CmptRingTooSmall {
                cmpt: cring.len(),
                desc: didx.len(),
            }
            .into());
        }
        let given = slots.as_mut().len();
        if given < usize::from(didx.len()) {
            return Err(ConfigError::SlotStorage {
                needed: didx.len(),
                given,
            }
            .into());
        }
        let cmpt_stride = cfg.cmpt_entry.bytes();
        let desc = CoherentRegion::new(
            dma.clone(),
            C2H_DESC_BYTES * usize::from(cfg.desc_ring.entries()),
            AddrLimit::Below4G,
        )?;
        let cmpt = CoherentRegion::new(
            dma,
            cmpt_stride * usize::from(cfg.cmpt_ring.entries()),
            AddrLimit::Below4G,
        )?;
        let opts = RxOptions {
            refill_batch: opts.refill_batch.clamp(1, didx.len() - 1),
            ..opts
        };
        Ok(Self {
            buf_bytes: cfg.buf.bytes(),
            // At most RX_BUFFER_ROOM already (a buffer is, `BufSizeIdx`); the bound is what makes
            // the lengths of delivered frames an `RxLen`.
            single_limit: opts.max_frame_len.min(cfg.buf.bytes()).min(RX_BUFFER_ROOM),
            cfg,
            opts,
            desc: DescRing {
                region: desc,
                slots,
                unready: UNREADY_ALL,
                spare: None,
                pages: 0,
            },
            cmpt,
            didx,
            cring,
            cmpt_stride,
            head: 0,
            tail: 0,
            posted: 0,
            cmpt_cidx: 0,
            cmpt_acked: 0,
            color: Color::INITIAL,
            started: false,
            device_qid: None,
            error: None,
            stalled: 0,
            stats: RxStats::default(),
        })
    }
}

impl<D: DmaMemory, Pg: PoolPage, St: AsMut<[Option<Pg>]>> RxQueue<D, Pg, St> {
    /// Fills the ring from `pool` and programs the queue's contexts; the C2H PIDX the device starts
    /// with is the number of descriptors posted, and the completion interrupt is armed
    /// (hardware.md §5.8, §13.2). A pool that runs dry leaves the ring partly filled (later polls
    /// refill it).
    ///
    /// # Errors
    ///
    /// As [`QueueControl::init_rx_queue`]. The pages stay in the ring; [`RxQueue::teardown`] or
    /// [`RxQueue::drain`] returns them.
    pub fn start<Ctl: QueueControl, Dl: DelayNs, P: PageProvider<Page = Pg>>(
        &mut self,
        dev: &Ctl,
        delay: &mut Dl,
        pool: &mut P,
    ) -> Result<()> {
        self.fill(pool);
        let (desc, cmpt) = (self.desc.region.lend(), self.cmpt.lend());
        self.device_qid = dev.device_queue(self.cfg.qid);
        dev.init_rx_queue(delay, &self.cfg, desc, cmpt, self.tail)?;
        self.started = true;
        Ok(())
    }

    /// Posts pages into every free slot (up to all but one, so that "full" differs from "empty"),
    /// without a doorbell. Returns the descriptors posted in total.
    ///
    /// The unposted slots are the ring from `tail` to `head`, oldest first: a slot joins them at
    /// the back when its completion is consumed, and leaves at the front when posted. A consumed
    /// slot always keeps a page (its own, or the one that took its place), and
    /// [`RxQueue::deliver`] writes the descriptor of a page that takes a slot's place as it puts
    /// it there; the device never writes the descriptor ring (hardware.md §7.4), so a page that
    /// stays keeps its descriptor. So only the `unready` slots at the front (empty after a start
    /// or a drain, or left by a refill that ran out of pages) need a page and a descriptor
    /// written; the slots behind them are posted as they are.
    fn fill<P: PageProvider<Page = Pg>>(&mut self, pool: &mut P) -> u16 {
        let target = self.didx.len() - 1;
        self.desc.unready = self.desc.unready.min(self.didx.len() - self.posted);
        while self.posted < target && self.desc.unready > 0 {
            // A run of slots up to the end of the ring, written with one bounds check.
            let tail = self.tail;
            let run = (target - self.posted)
                .min(self.desc.unready)
                .min(self.didx.len() - tail)
                .min(REFILL_BATCH_MAX);
            let n = self.stage(tail, usize::from(run), pool);
            // CAST: n <= run, a u16.
            let n16 = n as u16;
            self.tail = self.didx.add(tail, n16);
            self.posted += n16;
            self.desc.unready -= n16;
            if n16 < run {
                return self.posted;
            }
        }
        let ready = target - self.posted;
        self.tail = self.didx.add(self.tail, ready);
        self.posted = target;
        self.posted
    }

    /// Writes the descriptors of `run` slots from `tail` (which do not cross the end of the ring)
    /// into ring memory, each slot given a page from `pool` if it has none; returns how many are
    /// written (all but those from the first slot left without a page). The descriptors are made
    /// and written in one pass, with one bounds check for the run.
    ///
    /// A slot's page whose bytes do not all have a device address (whether it was just taken
    /// from `pool` or put in the slot by [`DescRing::deliver`]) is never posted: it is released
    /// to `pool` for good, counted, and the run stops there with the slot empty, to be filled by
    /// a later refill as after an allocation failure.
    #[inline]
    fn stage<P: PageProvider<Page = Pg>>(&mut self, tail: u16, run: usize, pool: &mut P) -> usize {
        let start = usize::from(tail);
        let Some(slots) = self.desc.slots.as_mut().get_mut(start..start + run) else {
            return 0;
        };
        // The counters stay in locals during the loop, so that nothing in it writes through
        // `self` next to the slots it walks.
        let mut added = 0u32;
        let mut failed = false;
        let mut refused = 0u32;
        let mut slots = slots.iter_mut();
        let written = self
            .desc
            .region
            .write_u64s_with(C2H_DESC_BYTES * start, C2H_DESC_BYTES, run, |_| {
                let slot = slots.next()?;
                if slot.is_none() {
                    let Some(p) = pool.alloc_page() else {
                        failed = true;
                        return None;
                    };
                    *slot = Some(p);
                    added += 1;
                }
                let word = slot.as_ref().and_then(desc_word);
                if word.is_none() {
                    refused += release_unaddressable(slot, pool);
                }
                word
            });
        if failed {
            self.stats.refill_alloc_failures += 1;
        }
        self.stats.refill_bad_pages += u64::from(refused);
        // No underflow: a page refused was in the slot, so counted before or added just now.
        self.desc.pages = self.desc.pages + added - refused;
        written
    }

    /// Posts what can be posted and, if anything was, hands it to the device with one doorbell.
    /// The doorbell write orders the descriptor writes before it (the [`RegisterWindow`] release
    /// contract).
    fn refill<W: RegisterWindow, P: PageProvider<Page = Pg>>(&mut self, db: &Doorbells<W>, pool: &mut P) {
        let before = self.tail;
        self.fill(pool);
        if self.tail != before && self.started {
            db.c2h_pidx(self.cfg.qid, self.tail);
            self.stats.c2h_doorbells += 1;
        }
    }

    /// Descriptors free to post.
    const fn deficit(&self) -> u16 {
        self.didx.len() - 1 - self.posted
    }

    /// Consumes up to `budget` completions: each frame goes to `sink` (or is dropped and
    /// counted), its slot gets a replacement page, descriptors are handed back in batches, and
    /// when the poll catches up the completion interrupt is re-armed.
    ///
    /// The status record is read once per poll (it bounds the loop); each entry must also carry
    /// the expected color. After re-arming, the record is read again: the CMPT CIDX doorbell makes
    /// the device rewrite it, and if it shows new completions the caller is told to poll again at
    /// once instead of waiting for the interrupt (which the device raises anyway, so nothing is
    /// lost if the second read is stale).
    pub(crate) fn poll<W: RegisterWindow, P: PageProvider<Page = Pg>, S: FrameHandler<P>>(
        &mut self,
        budget: usize,
        db: &Doorbells<W>,
        pool: &mut P,
        sink: &mut S,
    ) -> PollOutcome {
        if let Some(e) = self.error {
            return PollOutcome {
                error: Some(e),
                ..PollOutcome::default()
            };
        }
        if budget == 0 {
            return PollOutcome {
                more: true,
                ..PollOutcome::default()
            };
        }
        let Some(pidx) = self.status_pidx() else {
            return self.outcome(0, false, false);
        };
        let mut done = 0;
        let mut not_ready = false;
        // The consumer index and the expected color stay in registers during the loop (nothing
        // in it reads them from `self`) and are stored back when it ends.
        let mut cidx = self.cmpt_cidx;
        let mut color = self.color;
        let mut tally = Tally::default();
        while done < budget && cidx != pidx {
            let n = self.batch_len(cidx, pidx, budget - done);
            let Batch {
                taken,
                not_visible,
                failed,
            } = self.complete_batch(cidx, n, color, pool, sink, &mut tally);
            // A batch never crosses the end of the ring: reaching it wraps to 0 and flips the
            // color.
            cidx = self.cring.add(cidx, taken);
            if cidx == 0 && taken > 0 {
                color = color.flip();
            }
            done += usize::from(taken);
            if let Some(e) = failed {
                self.cmpt_cidx = cidx;
                self.color = color;
                self.stats.add(tally);
                self.fail(e);
                return self.outcome(done, false, false);
            }
            if not_visible {
                self.stats.cmpt_not_ready += 1;
                not_ready = true;
                break;
            }
            if self.deficit() >= self.opts.refill_batch {
                // Every descriptor handed back may come back as a completion before the next
                // CIDX update: free the consumed completion entries first, so the completion
                // ring (as large as the descriptor ring) can always take them.
                self.ack(db, cidx, false);
                self.refill(db, pool);
            }
        }
        self.cmpt_cidx = cidx;
        self.color = color;
        self.stats.add(tally);
        self.end_poll(db, pool, budget, done, pidx, not_ready)
    }

    /// The end of a poll that consumed `done` entries up to the status record's `pidx` (`not_ready`:
    /// it stopped at an entry whose color was not there yet): completion entries acknowledged,
    /// re-armed if it caught up, descriptors refilled, and a device that claims completions it
    /// does not deliver watched.
    fn end_poll<W: RegisterWindow, P: PageProvider<Page = Pg>>(
        &mut self,
        db: &Doorbells<W>,
        pool: &mut P,
        budget: usize,
        done: usize,
        pidx: u16,
        not_ready: bool,
    ) -> PollOutcome {
        if done > 0 {
            self.stalled = 0;
        }
        let armed = self.cmpt_cidx == pidx && !not_ready && done < budget;
        if armed || self.cmpt_cidx != self.cmpt_acked {
            // Caught up: give the consumed entries back and re-arm. Otherwise give them back
            // without arming: the device can reuse them, and with status writeback on it
            // refreshes the status record for the next poll (the reference driver writes nothing
            // here and can be left with a stale record, hardware.md §15 item 10).
            self.ack(db, self.cmpt_cidx, armed);
        }
        if self.deficit() >= self.opts.refill_batch || self.posted < self.opts.refill_batch {
            self.refill(db, pool);
        }
        if armed {
            self.stats.rearms += 1;
            let more = self.status_pidx_quiet().is_some_and(|p| p != self.cmpt_cidx);
            if more {
                self.stats.rearm_rechecks += 1;
                return self.outcome(done, true, true);
            }
            // Caught up with everything the device reported: does it claim anything else?
            let Some(claim) = self.idle_claim() else {
                self.stalled = 0;
                return self.outcome(done, true, false);
            };
            if done == 0 && self.stall(claim) {
                return self.outcome(done, false, false);
            }
            return self.outcome(done, true, true);
        }
        if not_ready && done == 0 {
            let claim = Claim::NotVisible {
                cidx: self.cmpt_cidx,
                pidx,
            };
            if self.stall(claim) {
                return self.outcome(0, false, false);
            }
        }
        self.outcome(done, false, true)
    }

    /// Writes the CMPT CIDX doorbell: completion entries before `cidx` are free again; with
    /// `arm`, the next completion raises the interrupt.
    fn ack<W: RegisterWindow>(&mut self, db: &Doorbells<W>, cidx: u16, arm: bool) {
        db.cmpt_cidx(self.cfg.qid, cidx, arm);
        self.cmpt_acked = cidx;
        self.stats.cmpt_doorbells += 1;
    }

    fn outcome(&self, done: usize, armed: bool, more: bool) -> PollOutcome {
        PollOutcome {
            done,
            armed: armed && self.error.is_none(),
            more: more && self.error.is_none(),
            error: self.error,
        }
    }

    /// Enters the error state: counted, logged; the queue touches nothing more until restarted.
    fn fail(&mut self, e: QueueError) {
        self.stats.queue_errors += 1;
        onic_hal::error!("onic: RX queue {} stopped: {}", self.cfg.qid, e);
        self.error = Some(e);
    }

    /// Counts a poll that made no progress while the device claims work; enters the error state
    /// (and returns `true`) once [`RxOptions::stall_polls`] such polls came in a row.
    fn stall(&mut self, claim: Claim) -> bool {
        self.stats.stall_polls += 1;
        self.stalled = self.stalled.saturating_add(1);
        if self.opts.stall_polls == 0 || self.stalled < self.opts.stall_polls {
            return false;
        }
        self.fail(claim.error(self.stalled));
        true
    }

    /// After a poll consumed everything the status record reported: whether the device claims
    /// more anyway. An entry of the expected color at the consumer index is a completion the
    /// record does not report; a C2H consumer index (from the descriptor ring's status record)
    /// other than the driver's means the device consumed descriptors no consumed completion
    /// accounts for, or the completions claimed descriptors the device never used.
    fn idle_claim(&self) -> Option<Claim> {
        let off = self.cmpt_stride * usize::from(self.cmpt_cidx);
        let entry = CmptEntry::from_word(self.cmpt.read_u64(off));
        if Color::from_bit(entry.color()) == self.color {
            return Some(Claim::Unreported { cidx: self.cmpt_cidx });
        }
        if !self.opts.check_c2h_status || !self.started {
            return None;
        }
        let rec = WbStatus::from_word(
            self.desc
                .region
                .read_u64(C2H_DESC_BYTES * usize::from(self.didx.len())),
        );
        let device = rec.cidx();
        (device != self.head).then_some(Claim::OutOfStep {
            device,
            driver: self.head,
        })
    }

    /// The completion status record's producer index, validated; an index outside the ring
    /// puts the queue in its error state.
    fn status_pidx(&mut self) -> Option<u16> {
        let pidx = self.read_status().pidx();
        if self.cring.contains(pidx) {
            Some(pidx)
        } else {
            self.fail(QueueError::CmptPidxOutOfRange {
                pidx,
                usable: self.cring.len(),
            });
            None
        }
    }

    /// As [`Self::status_pidx`] for the re-check after arming: a bad index is left for the next
    /// poll to report.
    fn status_pidx_quiet(&self) -> Option<u16> {
        let pidx = self.read_status().pidx();
        self.cring.contains(pidx).then_some(pidx)
    }

    fn read_status(&self) -> WbStatus {
        let off = self.cmpt_stride * usize::from(self.cring.len());
        WbStatus::from_word(self.cmpt.read_u64(off))
    }

    /// Entries of the next batch from `cidx`: up to the producer index `pidx`, `budget`, the end
    /// of the ring (where the color flips), [`REFILL_BATCH_MAX`], the next refill (the
    /// descriptors still to consume before the deficit reaches the refill batch; at least one),
    /// and the end of the descriptor ring (so that a batch moves its head on without a wrap
    /// test per frame; at least one).
    #[inline]
    fn batch_len(&self, cidx: u16, pidx: u16, budget: usize) -> usize {
        let to_refill = self.opts.refill_batch.saturating_sub(self.deficit()).max(1);
        let to_desc_end = self.didx.len().saturating_sub(self.head).max(1);
        let n = self
            .cring
            .distance(cidx, pidx)
            .min(self.cring.len() - cidx)
            .min(to_refill)
            .min(to_desc_end)
            .min(REFILL_BATCH_MAX);
        usize::from(n).min(budget)
    }

    /// Reads and handles up to `n` completion entries from `cidx` (which do not cross the end of
    /// the ring), each as it is reached: its color checked (an entry without the expected one is
    /// not written yet, and ends the batch unread), then validation, descriptor accounting,
    /// delivery or drop. It also stops after the first entry that is not a good single-buffer
    /// frame: the general path may have taken several descriptors, and the caller checks for a
    /// refill before going on.
    ///
    /// The common case is tested first, with the same checks folded into one comparison: no
    /// error bit, a posted descriptor, and a length from 1 up to both the largest frame and one
    /// buffer ([`RxQueue::single_limit`]). Such a frame takes exactly one descriptor and passes
    /// every check of the general path, which handles everything else. The descriptor ring's
    /// head (as a `usize`, so that it indexes without a widening per frame) and posted count
    /// stay in locals while the common case runs (nothing in it reads them from `self`) and are
    /// stored back before the general path, which reads them. The batch ends at the descriptor
    /// ring's end at the latest, so the head moves on by one without a wrap test; `end_run`
    /// wraps it once. The entries are read in place (no copy): the delivery borrows only the
    /// descriptor ring ([`DescRing`]), not the completion ring being read.
    #[inline(always)]
    fn complete_batch<P: PageProvider<Page = Pg>, S: FrameHandler<P>>(
        &mut self,
        cidx: u16,
        n: usize,
        color: Color,
        pool: &mut P,
        sink: &mut S,
        tally: &mut Tally,
    ) -> Batch {
        // The color bit of a word, and the word's bits under it when it carries `color`: one mask
        // and one compare per entry.
        let mut only_color = CmptEntry::from_word(0);
        only_color.set_color(true);
        let mask = only_color.to_word();
        let want = if color.bit() { mask } else { 0 };
        let mut head = usize::from(self.head);
        let mut posted = self.posted;
        let limit = self.single_limit;
        let stride = self.cmpt_stride;
        let mut taken = 0u16;
        // Three exits, each storing the indices back through `end_run`: a single exit (a labelled
        // block yielding where the run stopped) measured 5 to 10 instructions more per frame, the
        // stop reason becoming a flag stored on every entry.
        for word in self.cmpt.u64s(stride * usize::from(cidx), stride, n) {
            if word & mask != want {
                return self.end_run(head, posted, taken, true);
            }
            // The entry is the device's; everything it describes (the frame data) is read after
            // it.
            fence(Ordering::Acquire);
            taken += 1;
            let entry = CmptEntry::from_word(word);
            let len = u32::from(entry.pkt_len());
            if !entry.err() && posted > 0 && len.wrapping_sub(1) < limit {
                let first = head;
                // No wrap: the batch ends at the descriptor ring's end at the latest
                // (`batch_len`); `end_run` wraps an index that reached it.
                head = first + 1;
                posted -= 1;
                self.desc.deliver(first, len, pool, sink, tally);
                continue;
            }
            let mut batch = self.end_run(head, posted, taken, false);
            batch.failed = self.complete_general(entry, pool, sink, tally).err();
            return batch;
        }
        self.end_run(head, posted, taken, false)
    }

    /// Stores the indices a run of [`RxQueue::complete_batch`] kept in registers and says what
    /// the run did.
    #[inline(always)]
    fn end_run(&mut self, head: usize, posted: u16, taken: u16, not_visible: bool) -> Batch {
        // CAST: `head` is at most the ring's length, a u16. Written here rather than as a `Ring`
        // helper that also guards larger values: that form cost the loops 1 to 2 instructions
        // per frame more (XDP_DROP 64.0 -> 65.1, PASS 110.1 -> 112.1, callgrind).
        self.head = if head == usize::from(self.didx.len()) {
            0
        } else {
            head as u16
        };
        self.posted = posted;
        Batch {
            taken,
            not_visible,
            failed: None,
        }
    }

    /// [`RxQueue::complete_batch`] for anything but a good single-buffer frame.
    #[inline(never)]
    fn complete_general<P: PageProvider<Page = Pg>, S: FrameHandler<P>>(
        &mut self,
        entry: CmptEntry,
        pool: &mut P,
        sink: &mut S,
        tally: &mut Tally,
    ) -> Result<(), QueueError> {
        let len = u32::from(entry.pkt_len());
        let room = u32::from(self.posted) * self.buf_bytes;
        let len_ok = len != 0 && len <= self.opts.max_frame_len && len <= room;
        // A valid length tells how many buffers the frame took; for an invalid one the best guess
        // is one (exact whenever the largest frame fits one buffer).
        let needed = if !len_ok || len <= self.buf_bytes {
            1
        } else {
            u16::try_from(len.div_ceil(self.buf_bytes)).unwrap_or(u16::MAX)
        };
        if needed > self.posted {
            return Err(QueueError::C2hOverrun {
                needed,
                posted: self.posted,
            });
        }
        let first = self.head;
        self.head = self.didx.add(self.head, needed);
        self.posted -= needed;
        // Dropped frames leave their pages in place: the slots are now unposted and go back to
        // the device with the next refill. The CPU never touched those pages, so no sync is due.
        if entry.err() {
            self.stats.rx_cmpt_errors += 1;
            return Ok(());
        }
        if !len_ok {
            self.stats.rx_bad_length += 1;
            return Ok(());
        }
        if needed > 1 {
            self.stats.rx_multi_buffer += 1;
            return Ok(());
        }
        self.desc.deliver(usize::from(first), len, pool, sink, tally);
        Ok(())
    }

    /// Returns every page in the ring to `pool`. `proof` says the queue's contexts are invalidated
    /// (or, made by hand at an edge, that the device is gone): the device no longer writes the
    /// pages.
    /// A proof for another queue changes nothing (logged).
    pub fn drain<P: PageProvider<Page = Pg>>(&mut self, pool: &mut P, proof: &Quiesced) {
        if !self.proven_by(proof) {
            return;
        }
        if let Some(p) = self.desc.spare.take() {
            pool.recycle_direct(p, 0);
        }
        for slot in self
            .desc
            .slots
            .as_mut()
            .iter_mut()
            .take(usize::from(self.didx.len()))
        {
            if let Some(p) = slot.take() {
                pool.recycle_direct(p, 0);
            }
        }
        self.desc.pages = 0;
        self.posted = 0;
        self.desc.unready = UNREADY_ALL;
        self.head = self.tail;
        self.started = false;
    }

    /// Tears the queue down (hardware.md §13.4): contexts invalidated, then every page returned to
    /// `pool`, the rings freed, and the slot storage handed back (every slot empty) for the caller
    /// to reuse or drop.
    ///
    /// # Errors
    ///
    /// As [`QueueControl::teardown_rx_queue`]. The device may then still write the rings and the
    /// posted pages, so nothing is given back: the pages stay in their slots, the slot storage
    /// stays with them (`None`) and the rings are leaked (logged), as for a started queue dropped
    /// without a teardown.
    pub fn teardown<Ctl: QueueControl, Dl: DelayNs, P: PageProvider<Page = Pg>>(
        self,
        dev: &Ctl,
        delay: &mut Dl,
        pool: &mut P,
    ) -> (Result<()>, Option<St>) {
        match dev.teardown_rx_queue(delay, self.cfg.qid) {
            Ok(proof) => (Ok(()), self.release(pool, &proof)),
            Err(e) => {
                onic_hal::error!(
                    "onic: RX queue {} not quiesced: its rings and {} pages are left to the device",
                    self.cfg.qid,
                    self.desc.pages
                );
                (Err(e), None)
            }
        }
    }

    /// Gives everything back once `proof` says the device no longer uses the queue: every page to
    /// `pool`, both rings to the allocator, and the slot storage (every slot empty) to the caller.
    /// [`RxQueue::teardown`] makes the proof; an edge that knows the device is gone may make one
    /// by hand ([`Quiesced::assume`]). A proof for another queue gives nothing back (`None`): the
    /// queue is dropped as if it had no proof.
    pub fn release<P: PageProvider<Page = Pg>>(mut self, pool: &mut P, proof: &Quiesced) -> Option<St> {
        if !self.proven_by(proof) {
            return None;
        }
        self.drain(pool, proof);
        self.desc.region.release(proof);
        self.cmpt.release(proof);
        Some(self.desc.slots)
    }

    /// Whether `proof` covers this queue: the invalidation of its own contexts, or any proof for
    /// a queue never started (the device never learnt where its rings are).
    fn proven_by(&self, proof: &Quiesced) -> bool {
        let ok = self.device_qid.is_none_or(|q| proof.names(QueueSide::Rx, q));
        if !ok {
            onic_hal::error!(
                "onic: RX queue {} given the proof of another queue: nothing given back",
                self.cfg.qid
            );
        }
        ok
    }

    /// The absolute queue id (the card's numbering) the device knows the queue by, once started:
    /// what an edge that makes its own [`Quiesced`] proof must name.
    #[must_use]
    pub const fn device_qid(&self) -> Option<AbsQueueId> {
        self.device_qid
    }

    /// Restarts the queue, from any state (the way out of the error state): its contexts are
    /// invalidated so the device no longer uses the rings, every page in the ring goes back to
    /// `pool`, completions the device wrote and the queue never consumed are counted as
    /// `rx_abandoned`, both rings are cleared, the indices and the expected color start over, and
    /// the queue is filled and programmed again as by [`RxQueue::start`].
    ///
    /// Context: process context of the queue's owner, with its polling stopped (Linux: NAPI
    /// disabled for the pair; the card-wide context-command serialization applies as for
    /// `start`). It waits on context commands (through `delay`).
    ///
    /// # Errors
    ///
    /// As [`QueueControl::teardown_rx_queue`]: the device may still use the ring, so the pages stay in
    /// it and the queue is left in [`QueueError::Restart`]; call again or tear it down. As
    /// [`RxQueue::start`]: the pages were returned and the ring refilled, but the contexts are
    /// not programmed ([`QueueError::Restart`] too).
    pub fn restart<Ctl: QueueControl, Dl: DelayNs, P: PageProvider<Page = Pg>>(
        &mut self,
        dev: &Ctl,
        delay: &mut Dl,
        pool: &mut P,
    ) -> Result<()> {
        let proof = match dev.teardown_rx_queue(delay, self.cfg.qid) {
            Ok(proof) => proof,
            Err(e) => {
                self.fail(QueueError::Restart);
                return Err(e);
            }
        };
        self.stats.rx_abandoned += u64::from(self.unconsumed());
        self.drain(pool, &proof);
        zero(&self.desc.region);
        zero(&self.cmpt);
        self.head = 0;
        self.tail = 0;
        self.cmpt_cidx = 0;
        self.cmpt_acked = 0;
        self.color = Color::INITIAL;
        self.error = None;
        self.stalled = 0;
        self.stats.restarts += 1;
        onic_hal::info!("onic: RX queue {} restarted", self.cfg.qid);
        let r = self.start(dev, delay, pool);
        if r.is_err() {
            self.fail(QueueError::Restart);
        }
        r
    }

    /// Completions the device wrote that the queue has not consumed: as many as the status
    /// record reports (when its index is valid), or as many entries in a row carry the expected
    /// color, whichever is more.
    fn unconsumed(&self) -> u16 {
        let reported = self
            .status_pidx_quiet()
            .map_or(0, |p| self.cring.distance(self.cmpt_cidx, p));
        let mut visible = 0;
        let (mut i, mut color) = (self.cmpt_cidx, self.color);
        while visible < self.cring.len() {
            let entry = CmptEntry::from_word(self.cmpt.read_u64(self.cmpt_stride * usize::from(i)));
            if Color::from_bit(entry.color()) != color {
                break;
            }
            visible += 1;
            i = self.cring.next(i);
            if i == 0 {
                color = color.flip();
            }
        }
        reported.max(visible)
    }

    /// The configuration.
    #[must_use]
    pub const fn config(&self) -> &RxQueueConfig {
        &self.cfg
    }

    /// The tuning in effect.
    #[must_use]
    pub const fn options(&self) -> &RxOptions {
        &self.opts
    }

    /// Bytes the device writes per descriptor.
    #[must_use]
    pub const fn buffer_bytes(&self) -> u32 {
        self.buf_bytes
    }

    /// Device address of the C2H descriptor ring.
    #[must_use]
    pub fn desc_ring_dma_addr(&self) -> DmaAddr {
        self.desc.region.dma_addr()
    }

    /// Device address of the completion ring.
    #[must_use]
    pub fn cmpt_ring_dma_addr(&self) -> DmaAddr {
        self.cmpt.dma_addr()
    }

    /// Pages held in ring slots (posted, or waiting for the next refill), and the spare page that
    /// replaces the next received page leaving its slot.
    #[must_use]
    pub const fn pages_in_ring(&self) -> u64 {
        self.desc.pages as u64
    }

    /// Whether the queue holds a spare page: the replacement for the next received page that
    /// leaves its slot when the pool has none to give at that moment (counted in
    /// [`RxQueue::pages_in_ring`]).
    #[must_use]
    pub const fn has_spare(&self) -> bool {
        self.desc.spare.is_some()
    }

    /// Descriptors currently posted to the device.
    #[must_use]
    pub const fn posted(&self) -> u16 {
        self.posted
    }

    /// The error the queue stopped on, if any.
    #[must_use]
    pub const fn error(&self) -> Option<QueueError> {
        self.error
    }

    /// The counters.
    #[must_use]
    pub const fn stats(&self) -> &RxStats {
        &self.stats
    }
}

/// The C2H descriptor of a slot holding `page`: the buffer starts [`RX_HEADROOM`] bytes in
/// (hardware.md §12.1). `None` when some byte of the page has no device address: its range
/// `[addr, addr + PAGE_SIZE)` wraps past 2^64, the device's 64-bit address space. The device
/// writes up to a buffer's length from the descriptor's address, and an XDP_TX frame may be
/// sent from anywhere in the page, so the whole page must be addressable, not only its first
/// buffer byte. One checked addition covers it: the buffer's start lies below the page's end.
#[inline]
fn desc_word<Pg: PoolPage>(page: &Pg) -> Option<u64> {
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
fn release_unaddressable<P: PageProvider>(slot: &mut Option<P::Page>, pool: &mut P) -> u32 {
    match slot.take() {
        Some(page) => {
            pool.release_page(page);
            1
        }
        None => 0,
    }
}

/// Clears a ring (descriptors, entries and the status record).
fn zero<D: DmaMemory>(ring: &CoherentRegion<D>) {
    for off in (0..ring.len()).step_by(8) {
        ring.write_u64(off, 0);
    }
}

impl<D: DmaMemory, Pg, St> core::fmt::Debug for RxQueue<D, Pg, St> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RxQueue")
            .field("qid", &self.cfg.qid)
            .field("head", &self.head)
            .field("tail", &self.tail)
            .field("posted", &self.posted)
            .field("cmpt_cidx", &self.cmpt_cidx)
            .field("color", &self.color)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::vec::Vec;

    use onic_hal::{Direction, DmaPage};
    use onic_sim::{Card, Corruption, SimDelay};

    use super::*;
    use crate::config::RingSizeIdx;
    use crate::queue::pool::{PagePool, PoolConfig};
    use crate::testutil::{self, Placed, SimDevice};

    /// RX queue 0 of PF0 with 64-entry rings (63 usable): small enough for Miri.
    fn small_cfg() -> RxQueueConfig {
        RxQueueConfig {
            desc_ring: RingSizeIdx::new(1).unwrap(),
            cmpt_ring: RingSizeIdx::new(1).unwrap(),
            ..RxQueueConfig::new(onic_hal::QueueId::new(0))
        }
    }

    fn frame(len: usize, seed: u8) -> Vec<u8> {
        let mut f: Vec<u8> = (0..len).map(|i| seed.wrapping_add(i as u8)).collect();
        f[..6].copy_from_slice(&[0x00, 0x0A, 0x35, 0x11, 0x22, 0x33]);
        f
    }

    /// Lets the model deliver what was injected and fire the completion timer.
    fn settle(card: &Card) {
        card.run_until_idle();
        card.advance_time(2_000);
        card.run_until_idle();
    }

    type Pool<'c> = PagePool<'static, onic_sim::SimDma<'c>, 16>;

    fn pool(card: &Card, bulk: usize) -> Pool<'_> {
        let cfg = PoolConfig {
            bulk,
            ..PoolConfig::rx(Direction::FromDevice, small_cfg().buf.bytes())
        };
        PagePool::new(card.dma(), cfg, None)
    }

    type TestRx<'c> = RxQueue<onic_sim::SimDma<'c>, DmaPage, [Option<DmaPage>; 63]>;

    /// A device on `card` (one queue), its delay, a pool taking `bulk` pages per slow call, and RX
    /// queue 0 on the small rings with `opts`, not started.
    fn queue(
        card: &Card,
        bulk: usize,
        opts: Option<RxOptions>,
    ) -> (SimDevice<'_>, SimDelay<'_>, Pool<'_>, TestRx<'_>) {
        queue_on(card, bulk, small_cfg(), opts)
    }

    /// As [`queue`], on the rings of `cfg` (a descriptor ring of 63 usable entries).
    fn queue_on(
        card: &Card,
        bulk: usize,
        cfg: RxQueueConfig,
        opts: Option<RxOptions>,
    ) -> (SimDevice<'_>, SimDelay<'_>, Pool<'_>, TestRx<'_>) {
        let opts = opts.unwrap_or(RxOptions::for_queue(&cfg));
        let rx = RxQueue::new(card.dma(), cfg, opts, [const { None }; 63]).unwrap();
        (testutil::device(card, 1), card.delay(), pool(card, bulk), rx)
    }

    /// As [`queue`], with the default options, and started (every page it can get posted).
    fn started(card: &Card, bulk: usize) -> (SimDevice<'_>, SimDelay<'_>, Pool<'_>, TestRx<'_>) {
        let (dev, mut delay, mut pool, mut rx) = queue(card, bulk, None);
        rx.start(&dev, &mut delay, &mut pool).unwrap();
        (dev, delay, pool, rx)
    }

    /// Tears `rx` down, then checks that every page went back to the model and that the model saw
    /// no violation.
    fn finish<'c>(
        card: &'c Card,
        dev: &SimDevice<'c>,
        delay: &mut SimDelay<'c>,
        mut pool: Pool<'c>,
        rx: TestRx<'c>,
    ) {
        rx.teardown(dev, delay, &mut pool).0.unwrap();
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }

    fn copy_sink(
        out: &mut Vec<Vec<u8>>,
    ) -> impl FnMut(RxFrame<DmaPage>, &mut Pool<'_>) -> Handled<DmaPage> + '_ {
        |f, _| {
            out.push(f.data().to_vec());
            Handled::Recycle(f)
        }
    }

    #[test]
    fn receive_sync_and_rearm() {
        let card = testutil::card();
        let (dev, mut delay, mut pool, mut rx) = started(&card, 64);
        let db = dev.doorbells();
        // Every page is posted, all but one slot (62 of 63).
        assert_eq!(rx.posted(), 62);
        assert_eq!(rx.pages_in_ring(), 62);
        let sent: Vec<Vec<u8>> = (0..3).map(|i| frame(60 + 100 * i, i as u8)).collect();
        for f in &sent {
            card.inject(0, f);
        }
        settle(&card);
        let syncs = card.dma_stats().syncs_for_cpu;
        let mut got = Vec::new();
        let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
        assert_eq!(got, sent);
        assert_eq!(
            out,
            PollOutcome {
                done: 3,
                armed: true,
                more: false,
                error: None
            }
        );
        assert_eq!(card.dma_stats().syncs_for_cpu, syncs + 3);
        assert_eq!(rx.stats().rx_packets, 3);
        assert_eq!(rx.stats().rx_bytes, 60 + 160 + 260);
        // Each received page went back into its slot: the ring still holds 62 pages, 59 of them
        // posted (3 free descriptors are below the refill batch of 7, so not yet handed back),
        // and the queue holds the spare page it took before the first delivery.
        assert_eq!(rx.pages_in_ring(), 63);
        assert!(rx.has_spare());
        assert_eq!(rx.posted(), 59);
        let counts = pool.page_counts(rx.pages_in_ring(), 0, 0, 0).unwrap();
        assert_eq!(counts.total(), card.dma_stats().live_pages as u64);
        // Nothing new: the poll re-arms and reports no more work.
        let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
        assert_eq!((out.done, out.armed, out.more), (0, true, false));
        let (r, slots) = rx.teardown(&dev, &mut delay, &mut pool);
        r.unwrap();
        let slots = slots.expect("the storage comes back");
        assert!(slots.iter().all(Option::is_none), "the storage comes back empty");
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }

    #[test]
    fn budget_and_color_across_wraps() {
        let card = testutil::card();
        let (dev, mut delay, mut pool, mut rx) = started(&card, 64);
        let db = dev.doorbells();
        let mut got = Vec::new();
        let mut sent = Vec::new();
        // 150 frames in bursts of 40 (more than a refill batch, less than the ring), polled with a
        // budget of 16: the completion ring (63 entries) wraps twice, the color flips twice. Under
        // Miri, 70 frames (one wrap) keep the run short.
        let total = if cfg!(miri) { 70 } else { 150 };
        for burst in 0..4u8 {
            for i in 0..40u8 {
                if sent.len() == total {
                    break;
                }
                let f = frame(60 + usize::from(i), burst.wrapping_mul(40).wrapping_add(i));
                card.inject(0, &f);
                sent.push(f);
            }
            settle(&card);
            loop {
                let out = rx.poll(16, &db, &mut pool, &mut copy_sink(&mut got));
                assert!(out.done <= 16);
                if out.armed && !out.more {
                    break;
                }
                settle(&card);
            }
        }
        assert_eq!(got, sent);
        assert_eq!(
            rx.color,
            if cfg!(miri) {
                Color::INITIAL.flip()
            } else {
                Color::INITIAL
            }
        );
        assert_eq!(rx.stats().rx_dropped(), 0);
        assert_eq!(card.stats().c2h_no_desc_dropped, 0);
        finish(&card, &dev, &mut delay, pool, rx);
    }

    #[test]
    fn batches_end_where_the_descriptor_ring_wraps() {
        // A completion ring (127 entries) larger than the descriptor ring (63): a batch of
        // entries would run past the descriptor ring's end, so it stops there and the head wraps
        // between batches. Every frame arrives in order, no descriptor is left pointing at
        // another page, and the head stays an entry of the ring.
        let card = testutil::card();
        let cfg = RxQueueConfig {
            desc_ring: RingSizeIdx::new(1).unwrap(),
            cmpt_ring: RingSizeIdx::new(2).unwrap(),
            ..RxQueueConfig::new(onic_hal::QueueId::new(0))
        };
        // Refills of 10, which do not divide 63: batches bounded by the next refill alone would
        // cross the descriptor ring's end.
        let opts = RxOptions {
            refill_batch: 10,
            ..RxOptions::for_queue(&cfg)
        };
        let (dev, mut delay, mut pool, mut rx) = queue_on(&card, 64, cfg, Some(opts));
        rx.start(&dev, &mut delay, &mut pool).unwrap();
        let db = dev.doorbells();
        let mut got = Vec::new();
        let mut sent = Vec::new();
        let total = if cfg!(miri) { 80 } else { 200 };
        let mut seed = 0u8;
        while sent.len() < total {
            for _ in 0..50 {
                let f = frame(60 + usize::from(seed % 70), seed);
                seed = seed.wrapping_add(1);
                card.inject(0, &f);
                sent.push(f);
            }
            settle(&card);
            loop {
                let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
                assert!(rx.didx.contains(rx.head), "head {} outside the ring", rx.head);
                assert_descriptors_match(&rx);
                if out.armed && !out.more {
                    break;
                }
                settle(&card);
            }
        }
        assert_eq!(got, sent);
        assert_eq!(rx.stats().rx_dropped(), 0);
        assert_eq!(card.stats().c2h_no_desc_dropped, 0);
        finish(&card, &dev, &mut delay, pool, rx);
    }

    #[test]
    fn overload_never_overflows_the_completion_ring() {
        let card = testutil::card();
        let (dev, mut delay, mut pool, mut rx) = started(&card, 64);
        let db = dev.doorbells();
        // The device fills every posted descriptor: the completion ring holds 62 unread entries.
        let mut injected = 0u64;
        for i in 0..70u8 {
            card.inject(0, &frame(64, i));
            injected += 1;
        }
        settle(&card);
        // Overload: the device works while the poll runs (after each frame it takes what the
        // descriptors handed back so far allow), so descriptors refilled mid-poll come straight
        // back as completions before the poll ends.
        let total = if cfg!(miri) { 150 } else { 600 };
        let mut received = 0u64;
        // Bounded: a queue the device stopped would never deliver the total.
        for _ in 0..total {
            if received >= total {
                break;
            }
            let mut sink = |f: RxFrame<DmaPage>, _: &mut Pool<'_>| {
                received += 1;
                card.inject(0, &frame(64, injected as u8));
                injected += 1;
                card.run_until_idle();
                Handled::Recycle(f)
            };
            rx.poll(64, &db, &mut pool, &mut sink);
            settle(&card);
        }
        // Drain what is left.
        for _ in 0..4 {
            rx.poll(
                64,
                &db,
                &mut pool,
                &mut |f: RxFrame<DmaPage>, _: &mut Pool<'_>| {
                    received += 1;
                    Handled::Recycle(f)
                },
            );
        }
        let model = card.stats();
        assert_eq!(card.violations(), [], "no completion-ring overflow");
        assert!(received >= total);
        assert_eq!(model.cmpt_full_dropped, 0);
        assert!(model.c2h_no_desc_dropped > 0, "the device was overloaded");
        // Every frame is accounted for: received, or dropped by the device for lack of
        // descriptors (counted by the adapter as rx drops); none went missing in between.
        assert_eq!(injected, received + model.c2h_no_desc_dropped);
        assert_eq!(rx.stats().rx_packets, received);
        assert_eq!(rx.stats().rx_dropped(), 0);
        rx.teardown(&dev, &mut delay, &mut pool).0.unwrap();
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
    }

    #[test]
    fn bad_completions_are_counted_drops() {
        let card = testutil::card();
        let (dev, mut delay, mut pool, mut rx) = started(&card, 64);
        let db = dev.doorbells();
        let live = card.dma_stats().live_pages;
        for how in [
            Corruption::ErrBit,
            Corruption::LengthZero,
            Corruption::LengthTooLarge,
        ] {
            card.faults().corrupt_next_completions(1, how);
            card.inject(0, &frame(100, 1));
            card.run_until_idle();
        }
        let good = frame(64, 9);
        card.inject(0, &good);
        settle(&card);
        let mut got = Vec::new();
        let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
        assert_eq!(out.done, 4);
        assert_eq!(got, [good]);
        let s = rx.stats();
        assert_eq!((s.rx_cmpt_errors, s.rx_bad_length, s.rx_packets), (1, 2, 1));
        // The dropped frames' pages stayed in the ring; nothing was allocated for them.
        assert_eq!(card.dma_stats().live_pages, live);
        assert_eq!(
            pool.page_counts(rx.pages_in_ring(), 0, 0, 0).unwrap().total(),
            live as u64
        );
        finish(&card, &dev, &mut delay, pool, rx);
    }

    #[test]
    fn status_pidx_beyond_the_ring_stops_the_queue() {
        let card = testutil::card();
        let (dev, mut delay, mut pool, mut rx) = started(&card, 64);
        let db = dev.doorbells();
        card.faults().cmpt_status_pidx_jump();
        card.inject(0, &frame(80, 0));
        settle(&card);
        let mut got = Vec::new();
        let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
        let err = Some(QueueError::CmptPidxOutOfRange { pidx: 70, usable: 63 });
        assert_eq!(
            out,
            PollOutcome {
                error: err,
                ..PollOutcome::default()
            }
        );
        assert!(got.is_empty());
        // It stays stopped: no access to the rings, no doorbell.
        card.inject(0, &frame(80, 0));
        settle(&card);
        assert_eq!(rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got)).error, err);
        assert_eq!(rx.stats().cmpt_doorbells, 0);
        finish(&card, &dev, &mut delay, pool, rx);
    }

    #[test]
    fn no_replacement_page_drops_the_frame_and_keeps_the_ring() {
        let card = testutil::card();
        // One page per slow call: the cache stays empty while every page is in use, so a
        // replacement has to come from the HAL.
        let (dev, mut delay, mut pool, mut rx) = started(&card, 1);
        let db = dev.doorbells();
        let mut os: Vec<DmaPage> = Vec::new();
        card.inject(0, &frame(90, 1));
        card.inject(0, &frame(91, 2));
        settle(&card);
        card.faults().fail_next_page_allocs(1);
        let mut sink = |f: RxFrame<DmaPage>, _: &mut Pool<'_>| {
            os.push(f.page);
            Handled::ToOs
        };
        let out = rx.poll(64, &db, &mut pool, &mut sink);
        assert_eq!(out.done, 2);
        assert_eq!(rx.stats().rx_no_page, 1);
        assert_eq!(rx.stats().to_os, 1);
        assert_eq!(os.len(), 1);
        assert_eq!(os[0].bytes()[256..256 + 91], frame(91, 2)[..]);
        // 62 posted pages + 1 that went to the OS: a page from the pool took its slot, and the
        // spare the second frame needed before it was handed over stays for the next frame whose
        // page leaves: 62 pages in slots and the spare.
        assert_eq!(rx.pages_in_ring(), 63);
        let counts = pool
            .page_counts(rx.pages_in_ring(), 0, 0, rx.stats().to_os)
            .unwrap();
        assert_eq!(counts.with_os, 1);
        for p in os {
            pool.return_from_os(p, 91);
        }
        finish(&card, &dev, &mut delay, pool, rx);
    }

    #[test]
    fn completion_without_posted_descriptors_stops_the_queue() {
        let card = testutil::card();
        let (dev, mut delay, mut pool, mut rx) = queue(&card, 64, None);
        let db = dev.doorbells();
        // The pool cannot get a page: the ring starts with nothing posted.
        card.faults().fail_next_page_allocs(1);
        rx.start(&dev, &mut delay, &mut pool).unwrap();
        assert_eq!(rx.posted(), 0);
        // A device that reports a completion anyway (written here by hand: entry 0 with the
        // first lap's color, 100 bytes; status pidx 1).
        let mut e = CmptEntry::default();
        e.set_color(true);
        e.set_pkt_len(100);
        rx.cmpt.write_u64(0, e.to_word());
        let mut st = WbStatus::default();
        st.set_pidx(1);
        rx.cmpt.write_u64(8 * 63, st.to_word());
        card.faults().fail_next_page_allocs(1);
        let mut got = Vec::new();
        let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
        assert_eq!(out.error, Some(QueueError::C2hOverrun { needed: 1, posted: 0 }));
        assert!(got.is_empty());
        rx.teardown(&dev, &mut delay, &mut pool).0.unwrap();
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
    }

    #[test]
    fn completions_arriving_during_the_poll_are_caught_by_the_recheck() {
        let card = testutil::card();
        let (dev, mut delay, mut pool, mut rx) = started(&card, 64);
        let db = dev.doorbells();
        card.inject(0, &frame(100, 1));
        settle(&card);
        // While the first frame is being handled, two more arrive and are completed; the status
        // record read at the start of the poll does not show them (no trigger fired: not armed).
        let mut n = 0;
        let mut sink = |f: RxFrame<DmaPage>, _: &mut Pool<'_>| {
            if n == 0 {
                card.inject(0, &frame(101, 2));
                card.inject(0, &frame(102, 3));
                card.run_until_idle();
            }
            n += 1;
            Handled::Recycle(f)
        };
        let out = rx.poll(64, &db, &mut pool, &mut sink);
        // The poll caught up with what it knew and armed; the armed doorbell made the device
        // rewrite the status record, and the re-check saw the two new completions.
        assert_eq!((out.done, out.armed, out.more), (1, true, true));
        assert_eq!(rx.stats().rearm_rechecks, 1);
        let out = rx.poll(64, &db, &mut pool, &mut sink);
        assert_eq!((out.done, out.armed, out.more), (2, true, false));
        finish(&card, &dev, &mut delay, pool, rx);
    }

    #[test]
    fn sixteen_byte_completions_and_multi_buffer_drop() {
        let card = onic_sim::Card::new({
            let mut c = onic_sim::CardConfig::default();
            c.max_frame_len = 9000;
            c
        });
        let dev = testutil::device(&card, 1);
        let mut delay = card.delay();
        let db = dev.doorbells();
        let cfg = RxQueueConfig {
            cmpt_entry: onic_hal::layout::desc::CmptEntrySize::B16,
            buf: crate::config::BufSizeIdx::new(3).unwrap(), // 1024 bytes
            ..small_cfg()
        };
        let mut pool: Pool<'_> = PagePool::new(
            card.dma(),
            PoolConfig::rx(Direction::FromDevice, cfg.buf.bytes()),
            None,
        );
        let slots: [Option<DmaPage>; 63] = [const { None }; 63];
        let opts = RxOptions {
            max_frame_len: 9000,
            ..RxOptions::for_queue(&cfg)
        };
        let mut rx = RxQueue::new(card.dma(), cfg, opts, slots).unwrap();
        rx.start(&dev, &mut delay, &mut pool).unwrap();
        let small = frame(1000, 3);
        card.inject(0, &frame(2500, 1)); // three buffers
        card.inject(0, &small);
        settle(&card);
        let mut got = Vec::new();
        let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
        assert_eq!(out.done, 2);
        assert_eq!(got, [small]);
        assert_eq!(rx.stats().rx_multi_buffer, 1);
        assert_eq!(rx.posted(), 62 - 4);
        finish(&card, &dev, &mut delay, pool, rx);
    }

    #[test]
    fn restart_returns_every_page_and_counts_what_was_left() {
        let card = testutil::card();
        let opts = RxOptions {
            stall_polls: 4,
            ..RxOptions::for_queue(&small_cfg())
        };
        let (dev, mut delay, mut pool, mut rx) = queue(&card, 64, Some(opts));
        let db = dev.doorbells();
        rx.start(&dev, &mut delay, &mut pool).unwrap();
        // The status record stops moving; two frames land in the ring unreported.
        card.faults().freeze_cmpt_status(true);
        card.inject(0, &frame(80, 1));
        card.inject(0, &frame(81, 2));
        settle(&card);
        let mut got = Vec::new();
        for i in 1..=4u16 {
            let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
            if i < 4 {
                assert_eq!((out.done, out.armed, out.more, out.error), (0, true, true, None));
            } else {
                let e = QueueError::CmptUnreported { cidx: 0, polls: 4 };
                assert_eq!(
                    out,
                    PollOutcome {
                        error: Some(e),
                        ..PollOutcome::default()
                    }
                );
            }
        }
        assert!(got.is_empty());
        card.faults().freeze_cmpt_status(false);
        let live = card.dma_stats().live_pages;
        rx.restart(&dev, &mut delay, &mut pool).unwrap();
        // The same pages went back to the pool and into the ring again: nothing new, nothing lost.
        assert_eq!(card.dma_stats().live_pages, live);
        assert_eq!((rx.posted(), rx.pages_in_ring()), (62, 62));
        let s = rx.stats();
        assert_eq!((s.rx_abandoned, s.restarts, s.queue_errors), (2, 1, 1));
        assert_eq!(
            pool.page_counts(rx.pages_in_ring(), 0, 0, 0).unwrap().total(),
            live as u64
        );
        let f = frame(90, 3);
        card.inject(0, &f);
        settle(&card);
        let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
        assert_eq!((out.done, out.armed, out.more, out.error), (1, true, false, None));
        assert_eq!(got, [f]);
        finish(&card, &dev, &mut delay, pool, rx);
    }

    /// Checks what a refill posts without walking the slots ([`RxQueue::unready`]): each posted
    /// slot, and each unposted slot after the ones the next refill walks, holds a page its
    /// descriptor in ring memory points at.
    fn assert_descriptors_match(rx: &TestRx<'_>) {
        let len = rx.didx.len();
        let region = len - rx.posted;
        let walked = rx.desc.unready.min(region);
        for k in 0..len {
            let i = rx.didx.add(rx.head, k);
            let trusted = k < rx.posted || k - rx.posted >= walked;
            if !trusted {
                continue;
            }
            let page = rx.desc.slots[usize::from(i)]
                .as_ref()
                .unwrap_or_else(|| panic!("slot {i} ({k} from head) trusted without a page"));
            let word = rx.desc.region.read_u64(C2H_DESC_BYTES * usize::from(i));
            assert_eq!(
                Some(word),
                desc_word(page),
                "slot {i} ({k} from head): descriptor of another page"
            );
        }
    }

    #[test]
    fn descriptors_follow_the_pages_through_reuse_replacement_starvation_and_restart() {
        let card = testutil::card();
        // One page per slow call, so that failed allocations starve the refill.
        let (dev, mut delay, mut pool, mut rx) = started(&card, 1);
        let db = dev.doorbells();
        assert_descriptors_match(&rx);
        let mut sent = Vec::new();
        let mut got: Vec<Vec<u8>> = Vec::new();
        let mut os: Vec<DmaPage> = Vec::new();
        let mut n = 0usize;
        // 12 rounds of 20 frames wrap the 63-entry ring almost four times.
        for round in 0..12u8 {
            for i in 0..20u8 {
                let f = frame(64 + usize::from(i), round.wrapping_mul(31).wrapping_add(i));
                card.inject(0, &f);
                sent.push(f);
            }
            settle(&card);
            if round % 4 == 2 {
                // The spare and the refill go without pages for a while.
                card.faults().fail_next_page_allocs(3);
            }
            {
                // Every third frame goes to the OS (the spare takes its slot), the others are
                // recycled (the page stays).
                let mut sink = |f: RxFrame<DmaPage>, _: &mut Pool<'_>| {
                    got.push(f.data().to_vec());
                    n += 1;
                    if n.is_multiple_of(3) {
                        os.push(f.page);
                        Handled::ToOs
                    } else {
                        Handled::Recycle(f)
                    }
                };
                while rx.poll(64, &db, &mut pool, &mut sink).more {}
            }
            assert_descriptors_match(&rx);
            for p in os.drain(..) {
                pool.return_from_os(p, 128);
            }
            if round == 6 {
                rx.restart(&dev, &mut delay, &mut pool).unwrap();
                assert_descriptors_match(&rx);
            }
        }
        // Every frame the queue delivered is one that was sent, in order and intact: the device
        // wrote each into the page of the slot the queue took it from.
        let s = rx.stats();
        assert!(
            s.rx_no_page > 0 && s.refill_alloc_failures > 0,
            "the pool ran dry"
        );
        // The rest were dropped for lack of a spare page, or by the device for lack of posted
        // descriptors while the refill starved.
        let no_desc = card.stats().c2h_no_desc_dropped;
        assert_eq!(got.len() as u64 + s.rx_no_page + no_desc, sent.len() as u64);
        let mut rest = sent.iter();
        for g in &got {
            assert!(
                rest.any(|f| f == g),
                "a delivered frame that was not sent, or out of order"
            );
        }
        finish(&card, &dev, &mut delay, pool, rx);
    }

    type PlacedRx<'c> = RxQueue<onic_sim::SimDma<'c>, Placed, [Option<Placed>; 63]>;
    type Placing<'c> = testutil::Placing<Pool<'c>>;

    /// Every posted slot's descriptor points RX_HEADROOM bytes into the page the slot holds, at
    /// the address the page claims; the census holds.
    fn assert_posted_pages_match(rx: &PlacedRx<'_>, p: &Placing<'_>, with_os: u64) {
        for k in 0..rx.posted {
            let i = usize::from(rx.didx.add(rx.head, k));
            let page = rx.desc.slots[i].as_ref().expect("a posted slot holds a page");
            let word = rx.desc.region.read_u64(C2H_DESC_BYTES * i);
            let want = C2hDesc::new(DmaAddr::new(page.addr.get() + u64::from(RX_HEADROOM)));
            assert_eq!(word, want.to_word(), "slot {i}");
        }
        assert!(p.pool.page_counts(rx.pages_in_ring(), 0, 0, with_os).is_some());
    }

    /// A refill never posts a page whose bytes run past 2^64: the last page that fits is
    /// posted, one a byte higher is released for good and counted, and the next refill fills
    /// its slot with another page.
    #[test]
    fn a_page_that_wraps_past_the_address_space_is_never_posted() {
        let card = testutil::card();
        let (dev, mut delay) = (testutil::device(&card, 1), card.delay());
        let db = dev.doorbells();
        let last = 0u64.wrapping_sub(PAGE_SIZE as u64);
        let mut p = Placing::new(pool(&card, 64));
        p.lies = std::vec![(1, last), (2, last + 1), (3, u64::MAX)];
        let cfg = small_cfg();
        let mut rx: PlacedRx<'_> =
            RxQueue::new(card.dma(), cfg, RxOptions::for_queue(&cfg), [const { None }; 63]).unwrap();
        rx.start(&dev, &mut delay, &mut p).unwrap();
        // Slots 0 and 1 posted (slot 1 at the last page that fits); the third page refused.
        assert_eq!((rx.posted(), rx.stats().refill_bad_pages), (2, 1));
        assert_eq!(p.released, [last + 1]);
        assert_posted_pages_match(&rx, &p, 0);
        let mut sink = |f: RxFrame<Placed>, _: &mut Placing<'_>| Handled::Recycle(f);
        rx.poll(64, &db, &mut p, &mut sink);
        assert_eq!((rx.posted(), rx.stats().refill_bad_pages), (2, 2));
        rx.poll(64, &db, &mut p, &mut sink);
        assert_eq!((rx.posted(), rx.stats().refill_bad_pages), (62, 2));
        assert_eq!(p.released, [last + 1, u64::MAX]);
        assert_eq!(rx.stats().refill_alloc_failures, 0);
        assert_posted_pages_match(&rx, &p, 0);
        rx.teardown(&dev, &mut delay, &mut p).0.unwrap();
        drop(p);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }

    /// A page that takes a received page's place (from the pool, as the frame went to the OS)
    /// and wraps past 2^64 is not posted either: it waits in its slot at the back of the
    /// unposted ones, and the refill that reaches the slot releases it.
    #[test]
    fn a_replacement_page_that_wraps_is_released_by_the_refill() {
        let card = testutil::card();
        let (dev, mut delay) = (testutil::device(&card, 1), card.delay());
        let db = dev.doorbells();
        let mut p = Placing::new(pool(&card, 64));
        let cfg = small_cfg();
        let opts = RxOptions {
            refill_batch: 1,
            ..RxOptions::for_queue(&cfg)
        };
        let mut rx: PlacedRx<'_> = RxQueue::new(card.dma(), cfg, opts, [const { None }; 63]).unwrap();
        rx.start(&dev, &mut delay, &mut p).unwrap();
        assert_eq!((p.allocs, rx.posted()), (62, 62));
        // The spare is allocation 62, the first frame's replacement 63.
        let bad = u64::MAX - 100;
        p.lies.push((63, bad));
        let mut os = Vec::new();
        let mut to_os = |f: RxFrame<Placed>, _: &mut Placing<'_>| {
            os.push(f.page);
            Handled::ToOs
        };
        card.inject(0, &frame(80, 1));
        settle(&card);
        assert_eq!(rx.poll(64, &db, &mut p, &mut to_os).done, 1);
        // The refill posted the empty slot ahead of it; the bad page is not posted.
        assert_eq!((rx.posted(), rx.stats().refill_bad_pages), (62, 0));
        assert_posted_pages_match(&rx, &p, 1);
        let mut recycle = |f: RxFrame<Placed>, _: &mut Placing<'_>| Handled::Recycle(f);
        card.inject(0, &frame(80, 2));
        settle(&card);
        // This poll's refills reach the bad page's slot: released, and the slot filled again.
        assert_eq!(rx.poll(64, &db, &mut p, &mut recycle).done, 1);
        assert_eq!((rx.posted(), rx.stats().refill_bad_pages), (62, 1));
        assert_eq!(p.released, [bad]);
        assert_posted_pages_match(&rx, &p, 1);
        for page in os.drain(..) {
            p.pool.return_from_os(page.page, 128);
        }
        rx.teardown(&dev, &mut delay, &mut p).0.unwrap();
        drop(p);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }
}
