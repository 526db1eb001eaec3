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
//! [`RX_HEADROOM`]: crate::config::RX_HEADROOM
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
//!
//! # The files
//!
//! - this one: the queue ([`RxQueue`]), its options and constants, construction, start, drain,
//!   teardown, release and restart, the error state, and the accessors;
//! - `frame.rs`: the frame handed out, its length, the handler it goes to and what became of it;
//! - `desc.rs`: the descriptor ring's slots and the delivery of a frame from one;
//! - `refill.rs`: posting slots to the device;
//! - `claims.rs`: the status record and what the device claims, checked;
//! - `poll.rs`: the poll loop.

mod claims;
mod desc;
mod frame;
mod poll;
mod refill;
#[cfg(test)]
mod tests;

use onic_hal::context::QueueSide;
use onic_hal::layout::desc::C2H_DESC_BYTES;
use onic_hal::{AbsQueueId, AddrLimit, CoherentRegion, DelayNs, DmaAddr, DmaMemory, Quiesced};

use crate::config::{RxQueueConfig, RX_BUFFER_ROOM};
use crate::error::{ConfigError, QueueError, Result};
use crate::queue::control::QueueControl;
use crate::queue::pool::{PageProvider, PoolPage};
use crate::queue::ring::{Color, Ring};
use crate::stats::counters::RxStats;
use desc::{DescRing, UNREADY_ALL};
pub use frame::RxFrame;
pub(crate) use frame::{FrameHandler, Handled};
// Outside the queue, only XDP names the length type.
#[cfg(feature = "xdp")]
pub(crate) use frame::RxLen;

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

    /// Enters the error state: counted, logged; the queue touches nothing more until restarted.
    fn fail(&mut self, e: QueueError) {
        self.stats.queue_errors += 1;
        onic_hal::error!("onic: RX queue {} stopped: {}", self.cfg.qid, e);
        self.error = Some(e);
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
