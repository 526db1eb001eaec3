//! The transmit (H2C) queue (hardware.md §6, §7.1, §7.4, §8.2).
//!
//! One H2C stream descriptor per frame. The driver owns `next_to_use` (the producer index it
//! publishes with the H2C PIDX doorbell) and `next_to_clean` (the oldest descriptor whose buffer
//! it still holds); the device reports how far it got in the status record in the ring's last
//! slot. That record is the only thing read back from ring memory, and its index is validated
//! against the driver's own indices before any slot is touched.
//!
//! Buffers have owners: an XDP_TX page ([`PoolFrame`]) goes back to the RX side it came from, an
//! OS frame back to the OS, a frame of another device back to that device. OS and remote frames
//! go back through the path given to [`TxQueue::reclaim`]. An XDP_TX page the device is done with
//! stays parked in its slot until the next XDP_TX frame posted in that slot takes its place and
//! it goes, synced for the device, to the RX slot that frame's page leaves
//! ([`TxQueue::xmit_pool`]): in a steady XDP_TX flow, pages go from the TX ring to the RX ring
//! without a trip through the pool. A slot keeps its XDP_TX frame and an OS or remote frame
//! apart, so an OS or remote frame posted in a slot leaves the page parked there as it is, and a
//! slot parks one page at most; the pool gets them back at teardown ([`TxQueue::drain`]).
//!
//! A reclaim does not touch XDP_TX frames at all: a sent one is parked as it is. While no OS or
//! remote frame is in flight, a reclaim is a handful of index and counter updates, whatever the
//! number of frames it completes: the bytes come from a running byte count each slot records.
//! Otherwise it walks the completed slots and hands their OS and remote frames back.
//!
//! The queue keeps the buffers in slot storage the caller gives it (one [`TxSlot`] per usable ring
//! entry) and owns from then on, so the core needs no allocation: the storage is a type parameter
//! (anything that is `AsMut<[TxSlot]>`: an array on bare metal, a boxed slice on a host or in the
//! kernel), and [`TxQueue::teardown`] hands it back.
//!
//! # Stopping
//!
//! Once started, the ring and the buffers on it are the device's until its contexts are
//! invalidated. [`TxQueue::teardown`] does that and, with the [`Quiesced`] proof the invalidation
//! yields, hands every buffer back to its owner, the ring to the allocator and the slot storage to
//! the caller ([`TxQueue::release`] for an edge that has the proof by other means). Without the
//! proof nothing is given back: a started queue dropped without its teardown, or one whose
//! teardown failed, leaks its ring (logged by [`onic_hal::CoherentRegion`]) and leaves the buffers
//! in their slots, never completed. A queue never started frees its ring when dropped.

use core::marker::PhantomData;
use core::sync::atomic::{fence, Ordering};

use onic_hal::context::QueueSide;
use onic_hal::layout::desc::{H2cDesc, H2C_DESC_BYTES, WB_STATUS_BYTES};
use onic_hal::{
    AbsQueueId, AddrLimit, CoherentRegion, DelayNs, DmaAddr, DmaMemory, Quiesced, RegisterWindow,
};

use crate::config::TxQueueConfig;
use crate::error::{ConfigError, QueueError, Result};
use crate::queue::control::QueueControl;
use crate::queue::doorbell::Doorbells;
use crate::queue::pool::{PageProvider, PoolPage};
use crate::queue::ring::Ring;
use crate::stats::counters::TxStats;

/// Shortest frame handed to the MAC; shorter frames are zero-padded to it (ETH_ZLEN,
/// hardware.md §7.1; the MAC appends the FCS).
pub const ETH_ZLEN: usize = 60;

/// Largest frame one H2C descriptor can carry (the 16-bit length field).
pub const TX_MAX_FRAME: usize = u16::MAX as usize;

/// Reclaims in a row that may find a stopped queue without progress before it gives up
/// ([`TxQueue::set_stall_limit`]). A stopped queue is reclaimed by its owner's polls (it cannot
/// take frames), which may spin; the bound is high because a link the peer pauses legitimately
/// holds the ring for a while. An OS with a transmit watchdog of its own (Linux:
/// `ndo_tx_timeout`) may switch this off and call [`TxQueue::restart`] when the watchdog fires.
pub const TX_STALL_RECLAIMS_DEFAULT: u32 = 100_000;

/// A frame owned by someone else than the RX pool (an OS packet, a frame of another device),
/// already mapped for the device by its owner.
pub trait TxFrame {
    /// Device address of the frame's first byte.
    fn dma_addr(&self) -> DmaAddr;
    /// Frame length in bytes.
    fn len(&self) -> usize;
    /// Bytes of the owner's buffer the device may read from [`TxFrame::dma_addr`] on: what is
    /// mapped from the frame's first byte to the end of the buffer. The queue never posts a
    /// descriptor longer than this (a frame, or its padding to [`ETH_ZLEN`], that would run past
    /// it is refused with [`TxError::BeyondBuffer`]).
    ///
    /// The default is the frame's own length, which is right for an owner that maps exactly the
    /// frame's bytes (a `dma_map_single` of the packet data) and never grows the frame in
    /// [`TxFrame::pad_to`]. An owner whose frame sits in a larger buffer (a page) says how large.
    fn buffer_len(&self) -> usize {
        self.len()
    }
    /// Whether the frame is empty.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Zero-extends the frame to `min_len` bytes and makes the new bytes visible to the device.
    /// Returns `false` if the buffer has no room for that (the frame is then refused).
    fn pad_to(&mut self, min_len: usize) -> bool;
}

/// An XDP_TX frame: a page of the RX pool, with the frame at `offset`, `len` bytes long.
#[derive(Debug)]
pub struct PoolFrame<Pg> {
    /// The page.
    pub page: Pg,
    /// Offset of the frame's first byte in the page.
    pub offset: u16,
    /// Frame length.
    pub len: u16,
}

impl<Pg> PoolFrame<Pg> {
    /// Bytes of the page after the RX headroom the CPU may have written: what a recycle syncs
    /// for the device ([`crate::config::written_after_headroom`]).
    fn dirty_len(&self) -> usize {
        crate::config::written_after_headroom(self.offset, self.len)
    }
}

/// A frame of someone else than the RX pool on the TX ring, and where it goes when the device is
/// done with it.
#[derive(Debug)]
enum Foreign<F> {
    /// A frame of the OS; handed to [`TxDone::os_done`].
    Os(F),
    /// A frame of another device or queue (redirect target, `ndo_xdp_xmit`); handed to
    /// [`TxDone::remote_done`], which gives it back to its owner (e.g. through that pool's
    /// [`crate::queue::pool::RecycleRing`]).
    Remote(F),
}

impl<F> Foreign<F> {
    /// Hands the frame to its owner.
    fn done<C: TxDone<F>>(self, done: &mut C) {
        match self {
            Self::Os(f) => done.os_done(f),
            Self::Remote(f) => done.remote_done(f),
        }
    }
}

/// Where completed OS and remote frames go.
pub trait TxDone<F> {
    /// The device has sent (or, at teardown, will never send) an OS frame.
    fn os_done(&mut self, frame: F);
    /// The device has sent (or will never send) a frame of another device.
    fn remote_done(&mut self, frame: F);
}

/// One entry of a TX queue's bookkeeping storage.
///
/// The slot's descriptor carries its OS or remote frame when it has one, else its XDP_TX frame.
/// Outside the in-flight window the slot holds no OS or remote frame (the reclaim hands every one
/// back), and its XDP_TX frame, if any, is sent and parked (see the module docs).
#[derive(Debug)]
pub struct TxSlot<Pg, F> {
    /// An XDP_TX frame posted here: in flight, or sent and parked until the next XDP_TX frame
    /// posted in this slot takes its place ([`TxQueue::xmit_pool`]). An OS or remote frame
    /// posted here leaves it where it is, so a slot parks one page at most.
    pool: Option<PoolFrame<Pg>>,
    /// An OS or remote frame posted here, until the reclaim hands it back.
    foreign: Option<Foreign<F>>,
    /// The queue's running count of bytes posted, up to and including this slot's frame (the
    /// descriptor's length, which the driver never reads back): a reclaim's bytes are the
    /// difference between two slots' counts.
    end: u64,
}

impl<Pg, F> TxSlot<Pg, F> {
    /// An empty slot (usable in `const` array initialisers for static storage).
    pub(crate) const EMPTY: Self = Self {
        pool: None,
        foreign: None,
        end: 0,
    };

    /// An empty slot.
    #[must_use]
    pub const fn new() -> Self {
        Self::EMPTY
    }
}

impl<Pg, F> Default for TxSlot<Pg, F> {
    fn default() -> Self {
        Self::new()
    }
}

/// Why a frame was not queued. The buffer always comes back: nothing is leaked.
#[derive(Debug, PartialEq, Eq)]
pub enum TxError<B> {
    /// No free descriptor. Any frames queued before in this batch have been published.
    Full(B),
    /// Length 0, longer than [`TX_MAX_FRAME`], or too short and not paddable.
    BadLength(B),
    /// The descriptor would make the device read past the end of the buffer the frame's owner
    /// gave (the frame, its padding, or its offset in the page runs past it, or its device
    /// address range wraps).
    BeyondBuffer(B),
    /// The queue is in its error state.
    Queue(B, QueueError),
}

impl<B> TxError<B> {
    /// The buffer that was not queued.
    pub fn into_inner(self) -> B {
        match self {
            Self::Full(b) | Self::BadLength(b) | Self::BeyondBuffer(b) | Self::Queue(b, _) => b,
        }
    }
}

/// Buffers in flight on a TX ring, by owner.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TxInFlight {
    /// XDP_TX pages of the own pool.
    pub pool: u32,
    /// OS frames.
    pub os: u32,
    /// Frames of other devices or queues.
    pub remote: u32,
}

/// What a reclaim did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Reclaimed {
    /// Buffers returned to their owners.
    pub completed: u16,
    /// The queue was stopped and has room again: the OS may restart it.
    pub woke: bool,
}

/// Flow-control thresholds of a TX queue, in free descriptors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct TxThresholds {
    /// The queue stops when fewer descriptors than this are free after queuing a frame (a frame
    /// needs one descriptor, so 1 means "stop when full").
    pub stop_below: u16,
    /// A stopped queue wakes once a reclaim leaves at least this many descriptors free.
    pub wake_at: u16,
}

impl TxThresholds {
    /// Stop when full, wake when a quarter of the ring (at most 64 descriptors) is free again:
    /// enough room that the OS does not stop it again at once, small enough to restart quickly.
    #[must_use]
    pub const fn for_ring(usable: u16) -> Self {
        let quarter = usable / 4;
        let wake = if quarter > 64 { 64 } else { quarter };
        Self {
            stop_below: 1,
            wake_at: if wake < 1 { 1 } else { wake },
        }
    }
}

/// [`TxQueue`]'s stop threshold while the queue is stopped: more than any ring's free
/// descriptors, so every post finds the queue stopped.
const STOPPED: u16 = u16::MAX;

/// A transmit queue: its H2C ring in coherent memory and the bookkeeping of what is in flight.
pub struct TxQueue<D: DmaMemory, Pg, F, St> {
    cfg: TxQueueConfig,
    ring: CoherentRegion<D>,
    idx: Ring,
    /// One entry per usable descriptor: the queue's own storage, handed back by
    /// [`TxQueue::teardown`].
    slots: St,
    /// What `slots` holds.
    slot: PhantomData<TxSlot<Pg, F>>,
    next_to_use: u16,
    next_to_clean: u16,
    /// Free descriptors: what the indices say (`idx.free(next_to_clean, next_to_use)`), kept as
    /// a count so that a post tests one field; every move of an index moves it.
    free: u16,
    /// The producer index last written to the doorbell.
    published: u16,
    /// A post stops the queue when it leaves fewer free descriptors than this: the stop
    /// threshold while the queue runs, [`STOPPED`] while it is stopped. One field holds
    /// both, so that a post makes one comparison.
    stop_at: u16,
    thresholds: TxThresholds,
    /// OS frames in flight. The pool pages in flight are the rest of the in-flight descriptors
    /// (every descriptor carries one buffer), so they need no count of their own.
    os_in_flight: u32,
    /// Frames of other devices or queues in flight.
    remote_in_flight: u32,
    /// Pages of the own pool the queue holds: in flight, or parked in a slot. A page going from
    /// the ring to its slot, or a parked page leaving as another comes in, changes nothing here.
    pool_held: u32,
    /// Bytes posted since the queue started (wrapping): the running count of [`TxSlot::end`].
    bytes_posted: u64,
    /// [`TxSlot::end`] of the last slot reclaimed (or `bytes_posted` when none is in flight).
    bytes_cleaned: u64,
    error: Option<QueueError>,
    /// Reclaims in a row that found the queue stopped and the device not moving.
    stalled: u32,
    stall_limit: u32,
    /// The absolute queue id the device was told about the ring under (set by `start`).
    device_qid: Option<AbsQueueId>,
    stats: TxStats,
}

impl<D: DmaMemory, Pg, F, St> TxQueue<D, Pg, F, St> {
    /// Whether flow control has stopped the queue (the OS should not offer frames until a
    /// reclaim reports [`Reclaimed::woke`]).
    #[must_use]
    pub const fn is_stopped(&self) -> bool {
        self.stop_at == STOPPED
    }
}

impl<D: DmaMemory, Pg: PoolPage, F: TxFrame, St: AsMut<[TxSlot<Pg, F>]>> TxQueue<D, Pg, F, St> {
    /// Allocates the ring (zeroed, below 4 GiB, hardware.md §1.4) and takes `slots` (empty) as
    /// the queue's own bookkeeping storage: an array, a boxed slice, a `Vec`, a `heapless::Vec`
    /// or a borrowed slice. The device learns about the queue in [`TxQueue::start`].
    ///
    /// # Errors
    ///
    /// [`ConfigError::SlotStorage`] if `slots` is shorter than the ring's usable entries;
    /// [`crate::Error::Dma`] if the ring cannot be allocated. The storage is dropped with the
    /// error.
    pub fn new(dma: D, cfg: TxQueueConfig, mut slots: St) -> Result<Self> {
        let usable = cfg.ring.usable();
        let Some(idx) = Ring::new(usable) else {
            return Err(ConfigError::RingSizeIndex {
                index: cfg.ring.index(),
            }
            .into());
        };
        let given = slots.as_mut().len();
        if given < usize::from(usable) {
            return Err(ConfigError::SlotStorage {
                needed: usable,
                given,
            }
            .into());
        }
        let bytes = H2C_DESC_BYTES * usize::from(cfg.ring.entries());
        let ring = CoherentRegion::new(dma, bytes, AddrLimit::Below4G)?;
        Ok(Self {
            cfg,
            ring,
            idx,
            slots,
            slot: PhantomData,
            next_to_use: 0,
            next_to_clean: 0,
            free: usable - 1,
            published: 0,
            stop_at: TxThresholds::for_ring(usable).stop_below,
            thresholds: TxThresholds::for_ring(usable),
            os_in_flight: 0,
            remote_in_flight: 0,
            pool_held: 0,
            bytes_posted: 0,
            bytes_cleaned: 0,
            error: None,
            stalled: 0,
            stall_limit: TX_STALL_RECLAIMS_DEFAULT,
            device_qid: None,
            stats: TxStats::default(),
        })
    }

    /// Sets how many reclaims in a row may find the queue stopped, with buffers in flight and the
    /// device's consumer index not moving, before the queue enters its error state
    /// ([`QueueError::H2cStalled`]); 0 never gives up. Default [`TX_STALL_RECLAIMS_DEFAULT`].
    pub fn set_stall_limit(&mut self, reclaims: u32) {
        self.stall_limit = reclaims;
    }

    /// Programs the queue's contexts (hardware.md §5.8). No doorbell: the ring is empty.
    ///
    /// # Errors
    ///
    /// As [`QueueControl::init_tx_queue`].
    pub fn start<Ctl: QueueControl, Dl: DelayNs>(&mut self, dev: &Ctl, delay: &mut Dl) -> Result<()> {
        let ring = self.ring.lend();
        self.device_qid = dev.device_queue(self.cfg.qid);
        dev.init_tx_queue(delay, &self.cfg, ring)
    }

    /// The absolute queue id (the card's numbering) the device knows the queue by, once started:
    /// what an edge that makes its own [`Quiesced`] proof must name.
    #[must_use]
    pub const fn device_qid(&self) -> Option<AbsQueueId> {
        self.device_qid
    }

    /// Whether `proof` covers this queue: the invalidation of its own contexts, or any proof for
    /// a queue never started (the device never learnt where its ring is).
    fn proven_by(&self, proof: &Quiesced) -> bool {
        let ok = self.device_qid.is_none_or(|q| proof.names(QueueSide::Tx, q));
        if !ok {
            onic_hal::error!(
                "onic: TX queue {} given the proof of another queue: nothing given back",
                self.cfg.qid
            );
        }
        ok
    }

    /// The configuration.
    #[must_use]
    pub const fn config(&self) -> &TxQueueConfig {
        &self.cfg
    }

    /// Device address of the descriptor ring.
    #[must_use]
    pub fn ring_dma_addr(&self) -> DmaAddr {
        self.ring.dma_addr()
    }

    /// Free descriptors.
    #[must_use]
    pub const fn free(&self) -> u16 {
        self.free
    }

    /// Descriptors in flight (queued, not yet reclaimed).
    #[must_use]
    pub const fn in_flight(&self) -> u16 {
        self.idx.len() - 1 - self.free
    }

    /// In-flight buffers by owner.
    #[must_use]
    pub const fn in_flight_by_owner(&self) -> TxInFlight {
        TxInFlight {
            pool: self.pool_in_flight(),
            os: self.os_in_flight,
            remote: self.remote_in_flight,
        }
    }

    /// Pool pages in flight: the in-flight descriptors that carry neither an OS nor a remote frame.
    const fn pool_in_flight(&self) -> u32 {
        self.in_flight() as u32 - self.os_in_flight - self.remote_in_flight
    }

    /// XDP_TX pages of the own pool in flight.
    #[must_use]
    pub const fn pool_pages_in_flight(&self) -> u64 {
        self.pool_in_flight() as u64
    }

    /// Pages of the own pool parked in slots, sent and waiting for the next XDP_TX frame posted
    /// in their slot (for [`crate::queue::pool::PageCounts::tx_parked`]).
    #[must_use]
    pub const fn pool_pages_parked(&self) -> u64 {
        (self.pool_held - self.pool_in_flight()) as u64
    }

    /// Stops the queue (flow control); `true` if it was running.
    fn set_stopped(&mut self) -> bool {
        let was_running = !self.is_stopped();
        self.stop_at = STOPPED;
        was_running
    }

    /// Lets the queue run again (flow control).
    fn set_running(&mut self) {
        self.stop_at = self.thresholds.stop_below;
    }

    /// The error the queue stopped on, if any.
    #[must_use]
    pub const fn error(&self) -> Option<QueueError> {
        self.error
    }

    /// The driver's indices: next-to-clean (oldest descriptor whose buffer it holds) and
    /// next-to-use (the producer index).
    #[must_use]
    pub const fn indices(&self) -> (u16, u16) {
        (self.next_to_clean, self.next_to_use)
    }

    /// The consumer index in the device's status record, as it reads now (for diagnostics, e.g.
    /// a TX timeout report; [`TxQueue::reclaim`] validates it before acting on it).
    #[must_use]
    pub fn device_cidx(&self) -> u16 {
        let word = self.ring.read_u64(H2C_DESC_BYTES * usize::from(self.idx.len()));
        onic_hal::layout::desc::WbStatus::from_word(word).cidx()
    }

    /// The counters.
    #[must_use]
    pub const fn stats(&self) -> &TxStats {
        &self.stats
    }

    /// The counters, writable (for `xdp_xmit`).
    #[cfg(feature = "xdp")]
    pub(crate) fn stats_mut(&mut self) -> &mut TxStats {
        &mut self.stats
    }

    /// Whether descriptors were queued that the device has not been told about.
    #[must_use]
    pub const fn has_unpublished(&self) -> bool {
        self.published != self.next_to_use
    }

    /// Queues an OS frame. With `more`, the doorbell is left for a later frame of the same batch
    /// (xmit-more); the last frame of a batch must come with `more = false`, or be followed by
    /// [`TxQueue::flush`]. A full ring or a stop also rings the doorbell, so nothing queued is ever
    /// left unpublished when control goes back to the caller with the queue stopped.
    ///
    /// # Errors
    ///
    /// [`TxError`], with the frame.
    pub fn xmit_os<W: RegisterWindow>(
        &mut self,
        db: &Doorbells<W>,
        frame: F,
        more: bool,
    ) -> Result<(), TxError<F>> {
        self.xmit_frame(db, frame, more, false)
    }

    /// Queues a frame of another device or queue; as [`TxQueue::xmit_os`].
    ///
    /// # Errors
    ///
    /// [`TxError`], with the frame.
    pub fn xmit_remote<W: RegisterWindow>(
        &mut self,
        db: &Doorbells<W>,
        frame: F,
        more: bool,
    ) -> Result<(), TxError<F>> {
        self.xmit_frame(db, frame, more, true)
    }

    fn xmit_frame<W: RegisterWindow>(
        &mut self,
        db: &Doorbells<W>,
        mut frame: F,
        more: bool,
        remote: bool,
    ) -> Result<(), TxError<F>> {
        if let Err(e) = self.check_room(db) {
            return Err(e.with(frame));
        }
        let len = match self.frame_len(&mut frame) {
            Ok(len) => len,
            Err(e) => {
                self.stats.tx_bad_length += 1;
                return Err(e.with(frame));
            }
        };
        let addr = frame.dma_addr();
        let frame = if remote {
            self.remote_in_flight += 1;
            Foreign::Remote(frame)
        } else {
            self.os_in_flight += 1;
            Foreign::Os(frame)
        };
        match self.post_foreign(db, addr, len, frame, more) {
            Ok(()) => Ok(()),
            Err(Foreign::Remote(f)) => {
                self.remote_in_flight -= 1;
                Err(TxError::Full(f))
            }
            Err(Foreign::Os(f)) => {
                self.os_in_flight -= 1;
                Err(TxError::Full(f))
            }
        }
    }

    /// The length of the descriptor for an OS or remote frame, by [`tx_desc`] with the frame at
    /// the start of the owner's buffer; a short frame is padded by its owner.
    fn frame_len(&mut self, frame: &mut F) -> Result<u16, LenRefusal> {
        let room = frame.buffer_len();
        let len = frame.len();
        let (_, want) = tx_desc(frame.dma_addr(), 0, len, room)?;
        if len < ETH_ZLEN {
            if !frame.pad_to(ETH_ZLEN) {
                return Err(LenRefusal::BadLength);
            }
            self.stats.padded += 1;
        }
        Ok(want)
    }

    /// Queues an XDP_TX frame on a page of `pool` (the pool of the RX queue paired with this
    /// queue): pads it to [`ETH_ZLEN`] inside the page if needed and syncs it for the device.
    /// Doorbell as in [`TxQueue::xmit_os`]: a poll queues its XDP_TX frames with `more` and rings
    /// once at the end ([`TxQueue::flush`]).
    ///
    /// Returns the page an earlier XDP_TX frame of the same slot left parked there, if any: a
    /// page of `pool`, done with by the device and synced for it, for the RX slot this frame's
    /// page left (so the RX path need not take one from the pool). The caller owns it from here
    /// on: it must give it to the RX ring or back to `pool`.
    ///
    /// Always inlined: it is the XDP_TX branch of the RX loop. The checks of the common case are
    /// here; a full or broken queue, a refused frame and padding are handled out of line.
    ///
    /// # Errors
    ///
    /// [`TxError`], with the frame (the caller recycles the page).
    #[inline(always)]
    pub fn xmit_pool<W: RegisterWindow, P: PageProvider<Page = Pg>>(
        &mut self,
        db: &Doorbells<W>,
        pool: &mut P,
        mut frame: PoolFrame<Pg>,
        more: bool,
    ) -> Result<Option<Pg>, TxError<PoolFrame<Pg>>> {
        // Two tests rather than one `||`: the `||` compiled to a flag and a second branch, two
        // instructions per XDP_TX frame more (callgrind).
        if self.free == 0 {
            return Err(self.refuse_no_room(db, frame));
        }
        if self.error.is_some() {
            return Err(self.refuse_no_room(db, frame));
        }
        let room = frame.page.bytes().len();
        let (addr, want) = match tx_desc(frame.page.dma_addr(), frame.offset, usize::from(frame.len), room) {
            Ok(desc) => desc,
            Err(e) => return Err(self.refuse_pool_frame(e, frame)),
        };
        if frame.len < want {
            frame = pad_in_page(frame, want);
            self.stats.padded += 1;
        }
        // The CPU may have rewritten the frame (XDP): make those bytes the device's.
        pool.sync_for_device(&frame.page, usize::from(frame.offset), usize::from(want));
        let parked = self.post_pool(db, addr, want, frame, more);
        Ok(match parked {
            // The page the slot held leaves as this one comes in, synced for the device as a
            // recycle would sync it; a provider with nothing to give back keeps it.
            Some(f) => {
                let dirty = f.dirty_len();
                pool.reuse(f.page, dirty)
            }
            None => {
                self.pool_held += 1;
                None
            }
        })
    }

    /// An XDP_TX frame [`tx_desc`] refused: counted, and the reason.
    #[cold]
    #[inline(never)]
    fn refuse_pool_frame(&mut self, e: LenRefusal, frame: PoolFrame<Pg>) -> TxError<PoolFrame<Pg>> {
        self.stats.tx_bad_length += 1;
        e.with(frame)
    }

    /// [`TxQueue::xmit_pool`] on a full or broken queue: refused as [`TxQueue::check_room`]
    /// refuses it.
    #[cold]
    #[inline(never)]
    fn refuse_no_room<W: RegisterWindow>(
        &mut self,
        db: &Doorbells<W>,
        frame: PoolFrame<Pg>,
    ) -> TxError<PoolFrame<Pg>> {
        match self.check_room(db) {
            Err(e) => e.with(frame),
            // Not reached: the caller saw no room or an error, and nothing changed since.
            Ok(_) => TxError::Full(frame),
        }
    }

    /// Refuses a frame when the queue is broken or full. A full ring first publishes what this
    /// batch already queued: the caller gets control back and may not call again soon.
    #[inline]
    fn check_room<W: RegisterWindow>(&mut self, db: &Doorbells<W>) -> Result<(), TxError<()>> {
        if let Some(e) = self.error {
            return Err(TxError::Queue((), e));
        }
        if self.free == 0 {
            self.flush(db);
            self.stats.tx_busy += 1;
            if self.set_stopped() {
                self.stats.stops += 1;
            }
            return Err(TxError::Full(()));
        }
        Ok(())
    }

    /// Posts an XDP_TX frame in the next free slot (as [`TxQueue::post`]); returns the sent
    /// XDP_TX frame parked in the slot, if any.
    #[inline(always)]
    fn post_pool<W: RegisterWindow>(
        &mut self,
        db: &Doorbells<W>,
        addr: DmaAddr,
        len: u16,
        frame: PoolFrame<Pg>,
        more: bool,
    ) -> Option<PoolFrame<Pg>> {
        let i = self.next_to_use;
        let Some(slot) = self.next_slot(len) else {
            // Not reached (the producer index is always a slot of the ring): the frame is not
            // posted and goes back as if it had been sent.
            return Some(frame);
        };
        let back = slot.pool.replace(frame);
        self.post(db, i, addr, len, more);
        back
    }

    /// Posts an OS or remote frame in the next free slot (as [`TxQueue::post`]). An XDP_TX frame
    /// parked there stays, for a later XDP_TX frame.
    fn post_foreign<W: RegisterWindow>(
        &mut self,
        db: &Doorbells<W>,
        addr: DmaAddr,
        len: u16,
        frame: Foreign<F>,
        more: bool,
    ) -> Result<(), Foreign<F>> {
        let i = self.next_to_use;
        // Not reached without a slot (the producer index is always a slot of the ring): the
        // frame goes back to the caller unposted.
        let Some(slot) = self.next_slot(len) else {
            return Err(frame);
        };
        let before = slot.foreign.replace(frame);
        // Not reached: the reclaim hands every OS and remote frame back from the slots it
        // completes, and only completed slots are posted again.
        debug_assert!(before.is_none(), "an OS or remote frame left in a free TX slot");
        drop(before);
        self.post(db, i, addr, len, more);
        Ok(())
    }

    /// The next free slot, for a frame of `len` bytes: the running byte count moves on by
    /// `len` and the slot records it ([`TxSlot::end`]).
    #[inline(always)]
    fn next_slot(&mut self, len: u16) -> Option<&mut TxSlot<Pg, F>> {
        let slot = self.slots.as_mut().get_mut(usize::from(self.next_to_use))?;
        self.bytes_posted = self.bytes_posted.wrapping_add(u64::from(len));
        slot.end = self.bytes_posted;
        Some(slot)
    }

    /// Writes the descriptor of slot `i` (the next free one, its buffer already in place through
    /// [`TxQueue::next_slot`]) into ring memory, moves the producer index on, and rings the
    /// doorbell unless more frames of the batch follow and the ring has room; the caller checked
    /// that it has one free descriptor at least.
    #[inline(always)]
    fn post<W: RegisterWindow>(&mut self, db: &Doorbells<W>, i: u16, addr: DmaAddr, len: u16, more: bool) {
        let words = H2cDesc::new(addr, len).to_words();
        self.ring.write_u64s(H2C_DESC_BYTES * usize::from(i), 8, &words);
        self.next_to_use = self.idx.next(i);
        self.free -= 1;
        self.stats.queued += 1;
        if self.free < self.stop_at {
            self.stop(db);
        } else if !more {
            self.flush(db);
        }
    }

    /// A post left fewer free descriptors than the stop threshold, or came while the queue was
    /// stopped: the queue stops (counted once per stop) and publishes what it queued, so that
    /// nothing waits for a doorbell while the OS holds back.
    #[cold]
    #[inline(never)]
    fn stop<W: RegisterWindow>(&mut self, db: &Doorbells<W>) {
        if self.set_stopped() {
            self.stats.stops += 1;
        }
        self.flush(db);
    }

    /// Publishes every queued descriptor with one H2C PIDX doorbell (nothing if there is none).
    /// The doorbell write orders the descriptor writes before it (the [`RegisterWindow`]
    /// contract's release barrier), so the device never fetches a half-written descriptor.
    pub fn flush<W: RegisterWindow>(&mut self, db: &Doorbells<W>) {
        if self.published != self.next_to_use && self.error.is_none() {
            db.h2c_pidx(self.cfg.qid, self.next_to_use);
            self.published = self.next_to_use;
            self.stats.doorbells += 1;
        }
    }

    /// Returns the buffers the device is done with to their owners, as far as the H2C status
    /// record says (hardware.md §7.4, §8.2). A consumer index in the record that is not between
    /// next-to-clean and the published producer index puts the queue in its error state.
    ///
    /// An idle ring (every poll's case without XDP_TX traffic) returns at once, inline.
    #[inline]
    pub fn reclaim<C: TxDone<F>>(&mut self, done: &mut C) -> Reclaimed {
        if self.error.is_some() || self.next_to_clean == self.next_to_use {
            return Reclaimed::default();
        }
        self.reclaim_busy(done)
    }

    /// [`Self::reclaim`] of a ring with buffers in flight and no error.
    fn reclaim_busy<C: TxDone<F>>(&mut self, done: &mut C) -> Reclaimed {
        let status_off = H2C_DESC_BYTES * usize::from(self.idx.len());
        let word = self.ring.read_u64(status_off);
        const _: () = assert!(WB_STATUS_BYTES == 8);
        let cidx = onic_hal::layout::desc::WbStatus::from_word(word).cidx();
        // Everything done with a buffer below happens after the device said it is done reading
        // it: order the status read before the slot accesses.
        fence(Ordering::Acquire);
        if !self.idx.within(self.next_to_clean, self.published, cidx) {
            self.fail(QueueError::H2cCidx {
                cidx,
                clean: self.next_to_clean,
                published: self.published,
            });
            return Reclaimed::default();
        }
        if cidx == self.next_to_clean {
            self.no_progress(cidx);
            return Reclaimed::default();
        }
        self.stalled = 0;
        let n = self.idx.distance(self.next_to_clean, cidx);
        // The bytes of the completed frames: the running count at the last of them, less the
        // count at the last slot reclaimed before.
        let last = self.idx.add(cidx, self.idx.len() - 1);
        let end = self.slots.as_mut()[usize::from(last)].end;
        self.stats.tx_bytes += end.wrapping_sub(self.bytes_cleaned);
        self.bytes_cleaned = end;
        let packets = if self.os_in_flight == 0 && self.remote_in_flight == 0 {
            // Only XDP_TX frames in flight: they stay parked in their slots, nothing to walk.
            self.next_to_clean = cidx;
            self.free += n;
            u64::from(n)
        } else {
            self.give_back(n, done)
        };
        self.stats.tx_packets += packets;
        debug_assert_eq!(self.free, self.idx.free(self.next_to_clean, self.next_to_use));
        let woke = self.is_stopped() && self.free() >= self.thresholds.wake_at;
        if woke {
            self.set_running();
            self.stats.wakes += 1;
        }
        Reclaimed { completed: n, woke }
    }

    /// A reclaim found buffers in flight and the device's consumer index where it was. While the
    /// queue is stopped (the OS waits for room, its polls reclaim) that counts towards the stall
    /// limit; the queue enters its error state when it is reached.
    fn no_progress(&mut self, cidx: u16) {
        if !self.is_stopped() {
            self.stalled = 0;
            return;
        }
        self.stats.stall_reclaims += 1;
        self.stalled = self.stalled.saturating_add(1);
        if self.stall_limit != 0 && self.stalled >= self.stall_limit {
            self.fail(QueueError::H2cStalled {
                cidx,
                in_flight: self.in_flight(),
                reclaims: self.stalled,
            });
        }
    }

    /// Enters the error state: counted, logged; the queue touches nothing more until restarted.
    fn fail(&mut self, e: QueueError) {
        self.stats.queue_errors += 1;
        onic_hal::error!("onic: TX queue {} stopped: {}", self.cfg.qid, e);
        self.error = Some(e);
    }

    /// Hands the OS and remote frames of the `n` slots from next-to-clean back to their owners
    /// and moves next-to-clean past them; returns the frames that were in the slots. The XDP_TX
    /// frames stay in their slots, parked (see the module docs). The walk runs over the slot
    /// storage with the index and the in-flight tallies in locals.
    fn give_back<C: TxDone<F>>(&mut self, n: u16, done: &mut C) -> u64 {
        let (mut os, mut remote) = (self.os_in_flight, self.remote_in_flight);
        let mut clean = self.next_to_clean;
        let slots = self.slots.as_mut();
        for _ in 0..n {
            let slot = &mut slots[usize::from(clean)];
            clean = self.idx.next(clean);
            match slot.foreign.take() {
                Some(f @ Foreign::Os(_)) => {
                    os -= 1;
                    f.done(done);
                }
                Some(f @ Foreign::Remote(_)) => {
                    remote -= 1;
                    f.done(done);
                }
                None => {}
            }
        }
        self.next_to_clean = clean;
        self.free += n;
        self.os_in_flight = os;
        self.remote_in_flight = remote;
        u64::from(n)
    }

    /// Gives the XDP_TX pages in the slots, in flight or parked, back to `pool`, synced for the
    /// device over what the CPU may have written, and, should one be left, an OS or remote frame
    /// to `done`. Only once the device no longer reads the ring ([`TxQueue::drain`]).
    fn unpark_all<P: PageProvider<Page = Pg>, C: TxDone<F>>(&mut self, pool: &mut P, done: &mut C) {
        for slot in self.slots.as_mut() {
            if let Some(f) = slot.pool.take() {
                let dirty = f.dirty_len();
                pool.recycle_direct(f.page, dirty);
                self.pool_held -= 1;
            }
            if let Some(f) = slot.foreign.take() {
                f.done(done);
            }
        }
    }

    /// Returns every buffer still on the ring to its owner without waiting for the device, and
    /// the pages parked in its slots to the pool. `proof` says the queue's contexts are
    /// invalidated (or, made by hand at an edge, that the device is gone): the device no longer
    /// reads the buffers. A proof for another queue changes nothing (logged).
    pub fn drain<P: PageProvider<Page = Pg>, C: TxDone<F>>(
        &mut self,
        pool: &mut P,
        done: &mut C,
        proof: &Quiesced,
    ) {
        if !self.proven_by(proof) {
            return;
        }
        // Not sent: returned to the owners without counting.
        let _ = self.give_back(self.in_flight(), done);
        self.unpark_all(pool, done);
        self.bytes_cleaned = self.bytes_posted;
        self.published = self.next_to_use;
        self.set_running();
    }

    /// Restarts the queue, from any state (the way out of the error state): a last reclaim (unless
    /// the queue is in its error state), the contexts invalidated so the device no longer reads the
    /// ring, every buffer still on it handed back to its owner (counted as `tx_aborted`: the device
    /// never said it sent them), the ring cleared, the indices from 0, flow control reset (the
    /// queue is no longer stopped: the OS may wake its queue), and the contexts programmed again
    /// as by [`TxQueue::start`].
    ///
    /// Context: process context of the queue's owner, with nothing else using the queue (Linux:
    /// NAPI disabled for the pair and the netdev TX queue stopped and locked out, e.g. from a work
    /// item scheduled by `ndo_tx_timeout`, which itself runs in softirq context and must not wait
    /// here). It waits on context commands (through `delay`).
    ///
    /// # Errors
    ///
    /// As [`QueueControl::teardown_tx_queue`]: the device may still read the buffers, so they stay on
    /// the ring and the queue is left in [`QueueError::Restart`]; call again or tear it down. As
    /// [`TxQueue::start`]: the buffers were returned, the contexts are not programmed
    /// ([`QueueError::Restart`] too).
    pub fn restart<Ctl: QueueControl, Dl: DelayNs, P: PageProvider<Page = Pg>, C: TxDone<F>>(
        &mut self,
        dev: &Ctl,
        delay: &mut Dl,
        pool: &mut P,
        done: &mut C,
    ) -> Result<()> {
        self.reclaim(done);
        let proof = match dev.teardown_tx_queue(delay, self.cfg.qid) {
            Ok(proof) => proof,
            Err(e) => {
                self.fail(QueueError::Restart);
                return Err(e);
            }
        };
        self.stats.tx_aborted += u64::from(self.in_flight());
        self.drain(pool, done, &proof);
        for off in (0..self.ring.len()).step_by(8) {
            self.ring.write_u64(off, 0);
        }
        self.next_to_use = 0;
        self.next_to_clean = 0;
        self.free = self.idx.len() - 1;
        self.published = 0;
        self.set_running();
        self.error = None;
        self.stalled = 0;
        self.stats.restarts += 1;
        onic_hal::info!("onic: TX queue {} restarted", self.cfg.qid);
        let r = self.start(dev, delay);
        if r.is_err() {
            self.fail(QueueError::Restart);
        }
        r
    }

    /// Tears the queue down (hardware.md §13.4): a last reclaim, the contexts invalidated, every
    /// remaining buffer returned to its owner, the ring freed, and the slot storage handed back
    /// (every slot empty) for the caller to reuse or drop.
    ///
    /// # Errors
    ///
    /// As [`QueueControl::teardown_tx_queue`]. The device may then still read the ring and the
    /// buffers, so nothing is given back: the buffers stay in their slots (never completed), the
    /// slot storage stays with them (`None`) and the ring is leaked (logged), as for a started
    /// queue dropped without a teardown.
    pub fn teardown<Ctl: QueueControl, Dl: DelayNs, P: PageProvider<Page = Pg>, C: TxDone<F>>(
        mut self,
        dev: &Ctl,
        delay: &mut Dl,
        pool: &mut P,
        done: &mut C,
    ) -> (Result<()>, Option<St>) {
        self.reclaim(done);
        match dev.teardown_tx_queue(delay, self.cfg.qid) {
            Ok(proof) => (Ok(()), self.release(pool, done, &proof)),
            Err(e) => {
                onic_hal::error!(
                    "onic: TX queue {} not quiesced: its ring and {} buffers are left to the device",
                    self.cfg.qid,
                    self.in_flight()
                );
                (Err(e), None)
            }
        }
    }

    /// Gives everything back once `proof` says the device no longer uses the queue: every buffer
    /// still on the ring to its owner, the ring to the allocator, and the slot storage (every slot
    /// empty) to the caller. [`TxQueue::teardown`] makes the proof; an edge that knows the device
    /// is gone may make one by hand ([`Quiesced::assume`]). A proof for another queue gives
    /// nothing back (`None`): the queue is dropped as if it had no proof.
    pub fn release<P: PageProvider<Page = Pg>, C: TxDone<F>>(
        mut self,
        pool: &mut P,
        done: &mut C,
        proof: &Quiesced,
    ) -> Option<St> {
        if !self.proven_by(proof) {
            return None;
        }
        self.drain(pool, done, proof);
        self.ring.release(proof);
        Some(self.slots)
    }
}

/// Why [`tx_desc`] refused a frame: the [`TxError`] it becomes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LenRefusal {
    /// [`TxError::BadLength`].
    BadLength,
    /// [`TxError::BeyondBuffer`].
    BeyondBuffer,
}

impl LenRefusal {
    fn with<B>(self, b: B) -> TxError<B> {
        match self {
            Self::BadLength => TxError::BadLength(b),
            Self::BeyondBuffer => TxError::BeyondBuffer(b),
        }
    }
}

/// The TX length rules, the same for every frame: the descriptor (device address and length) of a
/// frame of `len` bytes at `offset` in a buffer of `room` bytes the device reads from `addr` on.
/// The frame must hold 1 to [`TX_MAX_FRAME`] bytes ([`TxError::BadLength`]); the descriptor covers
/// it padded to [`ETH_ZLEN`] and must end inside the buffer and inside the device address space
/// ([`TxError::BeyondBuffer`]). Padding itself is the caller's (it depends on who owns the buffer).
#[inline(always)]
fn tx_desc(addr: DmaAddr, offset: u16, len: usize, room: usize) -> Result<(DmaAddr, u16), LenRefusal> {
    if len == 0 || len > TX_MAX_FRAME {
        return Err(LenRefusal::BadLength);
    }
    let want = len.max(ETH_ZLEN);
    // No overflow: both terms are at most u16::MAX.
    if usize::from(offset) + want > room {
        return Err(LenRefusal::BeyondBuffer);
    }
    // The frame's last byte must have a device address: one checked addition covers it, and the
    // first byte's address (smaller) then cannot overflow either. No overflow in the sum: both
    // terms are at most u16::MAX.
    let last = usize::from(offset) + want - 1;
    match addr.checked_add(last as u64) {
        // CAST: `want` is at most TX_MAX_FRAME = u16::MAX (checked above).
        // No overflow: the first byte's address is at most the last one's.
        Some(_) => Ok((DmaAddr::new(addr.get() + u64::from(offset)), want as u16)),
        None => Err(LenRefusal::BeyondBuffer),
    }
}

/// Zero-fills a short XDP_TX frame up to `want` bytes inside its page (checked by [`tx_desc`]).
///
/// Takes and gives back the frame by value: with a `&mut` the frame's address was taken, so the
/// compiler kept every XDP_TX frame in a stack slot, stored field by field and copied into the TX
/// slot with wider loads. A load that spans several earlier stores cannot be forwarded from them
/// and waits for them to reach the cache: XDP_TX was 1.20x faster by value (30 side-by-side
/// pairs) for 2 instructions per frame more.
#[cold]
#[inline(never)]
fn pad_in_page<Pg: PoolPage>(mut frame: PoolFrame<Pg>, want: u16) -> PoolFrame<Pg> {
    let off = usize::from(frame.offset);
    if let Some(pad) = frame
        .page
        .bytes_mut()
        .get_mut(off + usize::from(frame.len)..off + usize::from(want))
    {
        pad.fill(0);
    }
    frame.len = want;
    frame
}

impl TxError<()> {
    fn with<B>(self, b: B) -> TxError<B> {
        match self {
            Self::Full(()) => TxError::Full(b),
            Self::BadLength(()) => TxError::BadLength(b),
            Self::BeyondBuffer(()) => TxError::BeyondBuffer(b),
            Self::Queue((), e) => TxError::Queue(b, e),
        }
    }
}

impl<D: DmaMemory, Pg, F, St> core::fmt::Debug for TxQueue<D, Pg, F, St> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TxQueue")
            .field("qid", &self.cfg.qid)
            .field("next_to_use", &self.next_to_use)
            .field("next_to_clean", &self.next_to_clean)
            .field("stopped", &self.is_stopped())
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::boxed::Box;
    use std::vec::Vec;

    use onic_hal::{Direction, DmaPage, PAGE_SIZE};
    use onic_sim::{Card, CardConfig, SimDelay, SimDma, Wire};

    use super::*;
    use crate::config::RingSizeIdx;
    use crate::queue::pool::{PagePool, PoolConfig};
    use crate::testutil::{self, Placed, SimDevice};

    type Placing<'c> = testutil::Placing<Pool<'c>>;

    #[test]
    fn descriptor_addresses_stop_at_the_top_of_the_address_space() {
        let top = u64::MAX;
        let at = |a: u64| DmaAddr::new(a);
        // The frame's last byte (padding included) may be the last address, not past it.
        assert_eq!(tx_desc(at(top - 59), 0, 60, 4096), Ok((at(top - 59), 60)));
        assert_eq!(tx_desc(at(top - 58), 0, 60, 4096), Err(LenRefusal::BeyondBuffer));
        assert_eq!(tx_desc(at(top - 100), 41, 60, 4096), Ok((at(top - 59), 60)));
        assert_eq!(
            tx_desc(at(top - 100), 42, 60, 4096),
            Err(LenRefusal::BeyondBuffer)
        );
        // A short frame is checked at its padded length.
        assert_eq!(tx_desc(at(top - 59), 0, 10, 4096), Ok((at(top - 59), 60)));
        assert_eq!(tx_desc(at(top - 58), 0, 10, 4096), Err(LenRefusal::BeyondBuffer));
        // An offset past the whole address space, and the room before the address.
        assert_eq!(
            tx_desc(at(top), u16::MAX, 60, usize::MAX),
            Err(LenRefusal::BeyondBuffer)
        );
        assert_eq!(tx_desc(at(0), 4036, 60, 4096), Ok((at(4036), 60)));
        assert_eq!(tx_desc(at(0), 4037, 60, 4096), Err(LenRefusal::BeyondBuffer));
        assert_eq!(tx_desc(at(0), 0, 0, 4096), Err(LenRefusal::BadLength));
        assert_eq!(
            tx_desc(at(0), 0, TX_MAX_FRAME + 1, usize::MAX),
            Err(LenRefusal::BadLength)
        );
    }

    /// An OS frame for the tests: a page mapped to-device with the frame at offset 0, at the
    /// page's device address unless `at` claims another.
    #[derive(Debug)]
    struct OsFrame<'c> {
        page: DmaPage,
        len: usize,
        dma: SimDma<'c>,
        at: Option<DmaAddr>,
    }

    impl<'c> OsFrame<'c> {
        fn new(dma: SimDma<'c>, data: &[u8]) -> Self {
            let mut page = dma
                .map_page(dma.alloc_page().unwrap(), Direction::ToDevice)
                .unwrap();
            page.bytes_mut()[..data.len()].copy_from_slice(data);
            dma.sync_for_device(&page, 0, data.len(), Direction::ToDevice);
            Self {
                page,
                len: data.len(),
                dma,
                at: None,
            }
        }

        fn free(self) {
            self.dma
                .free_page(self.page.unmap(&self.dma, Direction::ToDevice));
        }
    }

    impl TxFrame for OsFrame<'_> {
        fn dma_addr(&self) -> DmaAddr {
            self.at.unwrap_or(self.page.dma_addr())
        }
        fn len(&self) -> usize {
            self.len
        }
        fn buffer_len(&self) -> usize {
            PAGE_SIZE
        }
        fn pad_to(&mut self, min_len: usize) -> bool {
            if min_len > PAGE_SIZE {
                return false;
            }
            self.page.bytes_mut()[self.len..min_len].fill(0);
            self.dma
                .sync_for_device(&self.page, self.len, min_len - self.len, Direction::ToDevice);
            self.len = min_len;
            true
        }
    }

    #[derive(Default)]
    struct Done<'c> {
        os: Vec<OsFrame<'c>>,
        remote: Vec<OsFrame<'c>>,
    }

    impl<'c> TxDone<OsFrame<'c>> for Done<'c> {
        fn os_done(&mut self, f: OsFrame<'c>) {
            self.os.push(f);
        }
        fn remote_done(&mut self, f: OsFrame<'c>) {
            self.remote.push(f);
        }
    }

    impl Done<'_> {
        fn free(&mut self) {
            for f in self.os.drain(..).chain(self.remote.drain(..)) {
                f.free();
            }
        }
    }

    fn open_card() -> Card {
        let mut c = CardConfig::default();
        c.wire = Wire::Open;
        Card::new(c)
    }

    fn small_cfg() -> TxQueueConfig {
        TxQueueConfig {
            ring: RingSizeIdx::new(1).unwrap(),
            ..TxQueueConfig::new(onic_hal::QueueId::new(0))
        }
    }

    type Pool<'c> = PagePool<'static, SimDma<'c>, 8>;

    fn pool(card: &Card) -> Pool<'_> {
        PagePool::new(card.dma(), PoolConfig::rx(Direction::Bidirectional, 3520), None)
    }

    type TestTx<'c> = TxQueue<SimDma<'c>, DmaPage, OsFrame<'c>, Box<[TxSlot<DmaPage, OsFrame<'c>>]>>;

    /// A device on `card` (one queue), its delay, a pool, and a queue on the small ring (63 slots),
    /// started.
    fn started(card: &Card) -> (SimDevice<'_>, SimDelay<'_>, Pool<'_>, TestTx<'_>) {
        let dev = testutil::device(card, 1);
        let mut delay = card.delay();
        let slots: Box<[TxSlot<DmaPage, OsFrame<'_>>]> = (0..63).map(|_| TxSlot::new()).collect();
        let mut tx = TxQueue::new(card.dma(), small_cfg(), slots).unwrap();
        tx.start(&dev, &mut delay).unwrap();
        (dev, delay, pool(card), tx)
    }

    fn frame(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
    }

    /// Every TX entry point refuses a frame whose bytes (padding included) would run past 2^64,
    /// the end of the device's address space: counted, handed back, nothing posted. (Which
    /// frames fit is `tx_desc`'s, tested on its own above; this is that every entry asks it.)
    #[test]
    fn frames_whose_bytes_wrap_past_the_address_space_are_refused_at_every_entry() {
        let card = open_card();
        let dev = testutil::device(&card, 1);
        let mut delay = card.delay();
        let slots: Box<[TxSlot<Placed, OsFrame<'_>>]> = (0..63).map(|_| TxSlot::new()).collect();
        let mut tx = TxQueue::new(card.dma(), small_cfg(), slots).unwrap();
        tx.start(&dev, &mut delay).unwrap();
        let db = dev.doorbells();
        // A 42-byte frame padded to 60 whose 60th byte would be at 2^64.
        for remote in [false, true] {
            let mut f = OsFrame::new(card.dma(), &frame(42, 1));
            f.at = Some(DmaAddr::new(u64::MAX - 58));
            let r = if remote {
                tx.xmit_remote(&db, f, false)
            } else {
                tx.xmit_os(&db, f, false)
            };
            let e = r.expect_err("a frame past 2^64 was queued");
            assert!(matches!(e, TxError::BeyondBuffer(_)), "{e:?}");
            let back = e.into_inner();
            assert_eq!(back.len, 42, "handed back unpadded");
            back.free();
        }
        // An XDP_TX frame at the end of a page one byte above the last page that fits.
        let mut pool = Placing::new(pool(&card));
        pool.lies.push((0, 0u64.wrapping_sub(PAGE_SIZE as u64) + 1));
        let pf = PoolFrame {
            page: pool.alloc_page().unwrap(),
            offset: (PAGE_SIZE - 60) as u16,
            len: 60,
        };
        let e = tx.xmit_pool(&db, &mut pool, pf, false).unwrap_err();
        assert!(matches!(e, TxError::BeyondBuffer(_)), "{e:?}");
        pool.recycle_direct(e.into_inner().page, 0);
        assert_eq!(tx.stats().tx_bad_length, 3);
        assert_eq!(
            (tx.in_flight(), tx.stats().queued, tx.stats().doorbells),
            (0, 0, 0)
        );
        let mut done = Done::default();
        tx.teardown(&dev, &mut delay, &mut pool, &mut done).0.unwrap();
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }

    #[test]
    fn one_doorbell_per_batch_and_reclaim() {
        let card = open_card();
        let (dev, mut delay, mut pool, mut tx) = started(&card);
        let db = dev.doorbells();
        let frames: Vec<Vec<u8>> = (0..5).map(|i| frame(60 + 10 * i, i as u8)).collect();
        for (i, f) in frames.iter().enumerate() {
            tx.xmit_os(&db, OsFrame::new(card.dma(), f), i + 1 < frames.len())
                .unwrap();
            if i + 1 < frames.len() {
                // xmit-more: the device has not been told yet.
                assert!(!card.step());
            }
        }
        assert_eq!(tx.stats().doorbells, 1);
        assert_eq!(tx.in_flight(), 5);
        card.run_until_idle();
        assert_eq!(card.take_egress(0), frames);
        let mut done = Done::default();
        let r = tx.reclaim(&mut done);
        assert_eq!(
            r,
            Reclaimed {
                completed: 5,
                woke: false
            }
        );
        assert_eq!(done.os.len(), 5);
        assert_eq!(tx.stats().tx_packets, 5);
        assert_eq!(
            tx.stats().tx_bytes,
            frames.iter().map(|f| f.len() as u64).sum::<u64>()
        );
        assert_eq!(tx.in_flight(), 0);
        done.free();
        let (r, slots) = tx.teardown(&dev, &mut delay, &mut pool, &mut done);
        r.unwrap();
        let slots = slots.expect("the storage comes back");
        assert!(
            slots.iter().all(|s| s.pool.is_none() && s.foreign.is_none()),
            "the storage comes back empty"
        );
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }

    #[test]
    fn full_ring_refuses_stops_and_wakes() {
        let card = open_card();
        let (dev, mut delay, mut pool, mut tx) = started(&card);
        let db = dev.doorbells();
        // 62 frames fill the 63-entry ring (one entry stays free); all queued with `more`.
        for i in 0..62 {
            tx.xmit_os(&db, OsFrame::new(card.dma(), &frame(64, i)), true)
                .unwrap();
        }
        assert!(tx.is_stopped());
        assert_eq!(tx.free(), 0);
        // The stop published the batch although `more` was set.
        assert!(!tx.has_unpublished());
        let extra = OsFrame::new(card.dma(), &frame(64, 99));
        let back = match tx.xmit_os(&db, extra, false) {
            Err(TxError::Full(f)) => f,
            other => panic!("expected Full, got {other:?}"),
        };
        assert_eq!(tx.stats().tx_busy, 1);
        card.run_until_idle();
        let mut done = Done::default();
        let r = tx.reclaim(&mut done);
        assert_eq!(
            r,
            Reclaimed {
                completed: 62,
                woke: true
            }
        );
        assert!(!tx.is_stopped());
        tx.xmit_os(&db, back, false).unwrap();
        card.run_until_idle();
        assert_eq!(card.take_egress(0).len(), 63);
        tx.teardown(&dev, &mut delay, &mut pool, &mut done).0.unwrap();
        assert_eq!(done.os.len(), 63);
        done.free();
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }

    #[test]
    fn short_frames_are_padded_and_pool_pages_parked() {
        let card = open_card();
        let (dev, mut delay, mut pool, mut tx) = started(&card);
        let db = dev.doorbells();
        tx.xmit_os(&db, OsFrame::new(card.dma(), &frame(42, 1)), true)
            .unwrap();
        // An XDP_TX frame in a pool page (poisoned by the model: the padding must be zeroed).
        let mut page = pool.alloc().unwrap();
        page.bytes_mut()[300..340].copy_from_slice(&frame(40, 7));
        let pf = PoolFrame {
            page,
            offset: 300,
            len: 40,
        };
        let back = tx.xmit_pool(&db, &mut pool, pf, false).unwrap();
        assert!(back.is_none(), "nothing is parked on a fresh ring");
        assert_eq!(tx.pool_pages_in_flight(), 1);
        assert_eq!(tx.stats().padded, 2);
        card.run_until_idle();
        let mut want1 = frame(42, 1);
        want1.resize(60, 0);
        let mut want2 = frame(40, 7);
        want2.resize(60, 0);
        assert_eq!(card.take_egress(0), [want1, want2]);
        let cached = pool.available();
        let mut done = Done::default();
        tx.reclaim(&mut done);
        // The pool page stays in its slot for the next XDP_TX frame posted there, not in the pool.
        assert_eq!(pool.available(), cached);
        assert_eq!((tx.pool_pages_in_flight(), tx.pool_pages_parked()), (0, 1));
        done.free();
        tx.teardown(&dev, &mut delay, &mut pool, &mut done).0.unwrap();
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }

    /// Posts `n` OS frames and reclaims them once the device sent them.
    fn send_os_frames<'c, W: RegisterWindow>(card: &'c Card, db: &Doorbells<W>, tx: &mut TestTx<'c>, n: u8) {
        for i in 0..n {
            tx.xmit_os(db, OsFrame::new(card.dma(), &frame(64, i)), i + 1 < n)
                .unwrap();
        }
        card.run_until_idle();
        let mut done = Done::default();
        assert_eq!(tx.reclaim(&mut done).completed, u16::from(n));
        done.free();
    }

    #[test]
    fn a_parked_page_goes_to_the_next_pool_frame_of_its_slot() {
        let card = open_card();
        let (dev, mut delay, mut pool, mut tx) = started(&card);
        let db = dev.doorbells();
        let pool_frame = |pool: &mut Pool<'_>, seed: u8| {
            let mut page = pool.alloc().unwrap();
            page.bytes_mut()[256..320].copy_from_slice(&frame(64, seed));
            PoolFrame {
                page,
                offset: 256,
                len: 64,
            }
        };
        // Slot 0: an XDP_TX frame, sent and reclaimed; its page stays parked there.
        let first = pool_frame(&mut pool, 1);
        let first_addr = first.page.dma_addr();
        assert!(tx.xmit_pool(&db, &mut pool, first, false).unwrap().is_none());
        card.run_until_idle();
        let mut done = Done::default();
        tx.reclaim(&mut done);
        assert_eq!((tx.pool_pages_in_flight(), tx.pool_pages_parked()), (0, 1));
        // OS frames through every other slot (and then slot 0 too) leave it where it is.
        send_os_frames(&card, &db, &mut tx, 31);
        send_os_frames(&card, &db, &mut tx, 31);
        assert_eq!(tx.indices(), (0, 0));
        send_os_frames(&card, &db, &mut tx, 31);
        send_os_frames(&card, &db, &mut tx, 32);
        assert_eq!(tx.indices(), (0, 0));
        assert_eq!(tx.pool_pages_parked(), 1);
        // The next XDP_TX frame of slot 0 takes the parked page out for the RX ring.
        let second = pool_frame(&mut pool, 2);
        let back = tx.xmit_pool(&db, &mut pool, second, false).unwrap();
        let back = back.expect("the page parked in slot 0");
        assert_eq!(back.dma_addr(), first_addr);
        assert_eq!((tx.pool_pages_in_flight(), tx.pool_pages_parked()), (1, 0));
        pool.recycle(back, 0);
        card.run_until_idle();
        assert_eq!(card.take_egress(0).last(), Some(&frame(64, 2)));
        tx.reclaim(&mut done);
        assert_eq!((tx.pool_pages_in_flight(), tx.pool_pages_parked()), (0, 1));
        // The teardown gives the parked page back to the pool.
        let cached = pool.available();
        tx.teardown(&dev, &mut delay, &mut pool, &mut done).0.unwrap();
        assert_eq!(pool.available(), cached + 1);
        assert!(done.os.is_empty());
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }

    #[test]
    fn bad_status_cidx_stops_the_queue_and_teardown_returns_everything() {
        let card = open_card();
        let (dev, mut delay, mut pool, mut tx) = started(&card);
        let db = dev.doorbells();
        card.faults().stall_h2c_writeback(true);
        for i in 0..3 {
            tx.xmit_os(&db, OsFrame::new(card.dma(), &frame(64, i)), false)
                .unwrap();
        }
        card.run_until_idle();
        // A device that scribbles a consumer index beyond what was posted (10 > next_to_use 3).
        let mut st = onic_hal::layout::desc::WbStatus::default();
        st.set_cidx(10);
        tx.ring.write_u64(H2C_DESC_BYTES * 63, st.to_word());
        let mut done = Done::default();
        assert_eq!(tx.reclaim(&mut done), Reclaimed::default());
        let err = QueueError::H2cCidx {
            cidx: 10,
            clean: 0,
            published: 3,
        };
        assert_eq!(tx.error(), Some(err));
        assert!(done.os.is_empty());
        match tx.xmit_os(&db, OsFrame::new(card.dma(), &frame(64, 5)), false) {
            Err(TxError::Queue(f, e)) => {
                assert_eq!(e, err);
                f.free();
            }
            _ => panic!("expected a queue error"),
        }
        tx.teardown(&dev, &mut delay, &mut pool, &mut done).0.unwrap();
        assert_eq!(done.os.len(), 3);
        done.free();
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }

    #[test]
    fn restart_hands_every_buffer_back_and_the_queue_sends_again() {
        let card = open_card();
        let (dev, mut delay, mut pool, mut tx) = started(&card);
        let db = dev.doorbells();
        tx.set_stall_limit(3);
        card.faults().stall_h2c_writeback(true);
        let mut n = 0u8;
        while !tx.is_stopped() {
            tx.xmit_os(&db, OsFrame::new(card.dma(), &frame(64, n)), true)
                .unwrap();
            n += 1;
        }
        assert_eq!(n, 62);
        card.run_until_idle();
        let mut done = Done::default();
        for _ in 0..3 {
            tx.reclaim(&mut done);
        }
        assert_eq!(
            tx.error(),
            Some(QueueError::H2cStalled {
                cidx: 0,
                in_flight: 62,
                reclaims: 3
            })
        );
        assert_eq!(tx.stats().stall_reclaims, 3);
        card.faults().stall_h2c_writeback(false);
        tx.restart(&dev, &mut delay, &mut pool, &mut done).unwrap();
        assert_eq!(done.os.len(), 62);
        assert_eq!(
            (tx.error(), tx.in_flight(), tx.is_stopped(), tx.stats().tx_aborted),
            (None, 0, false, 62)
        );
        done.free();
        let _ = card.take_egress(0);
        tx.xmit_os(&db, OsFrame::new(card.dma(), &frame(64, 9)), false)
            .unwrap();
        card.run_until_idle();
        assert_eq!(card.take_egress(0), [frame(64, 9)]);
        assert_eq!(tx.reclaim(&mut done).completed, 1);
        tx.teardown(&dev, &mut delay, &mut pool, &mut done).0.unwrap();
        done.free();
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert_eq!(card.violations(), []);
    }
}
