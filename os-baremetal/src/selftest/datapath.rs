//! The driver datapath as the image runs it: per PF, [`PAIRS`] queue pairs of `onic-core`
//! (`QueuePair`: RX queue, TX queue, page pool), driven the way a small OS would drive them.
//!
//! - **Storage.** The core allocates nothing. Each pair's RX and TX slot storage is a boxed slice
//!   from the heap ([`alloc_slots`], sized from the ring sizes), owned by its queues and freed
//!   with them. The pools' recycle rings are statics ([`RINGS`]), so that any context can give a
//!   page back through a plain shared reference.
//! - **Interrupts.** The model's queue interrupts are raised on their own IDT vectors
//!   (`irq::queue_vector`); the handler only marks the pair. [`service`] polls marked pairs with
//!   `QueuePair::poll(BUDGET, ..)` (NAPI: poll again while `more`, stop once `armed`), running
//!   the PF's attached XDP program (see [`super::xdp`]).
//! - **Housekeeping.** The timer tick advances the model clock and asks the main loop for a
//!   housekeeping round: TX reclaim for pairs that were not polled since the last round (a pair
//!   that only transmits is never polled), a poll for a pair whose RX ring the pool could not
//!   fill (the poll refills it; no interrupt would ever come for an empty ring), and the OS
//!   giving back the pages XDP_PASS handed it.
//! - **The OS.** [`send`] is the OS transmit path: a frame in its own to-device page, queued with
//!   `TxQueue::xmit_os`, waiting on flow control (a stopped queue wakes when a reclaim frees room).
//!   [`Done`] is the `TxDone` (`onic-embed`'s `FrameDone`) that frees completed OS buffers and
//!   returns redirected pages to their pool's recycle ring; both are counted per pair.
//!
//! What the pairs do with received frames is decided in [`super::xdp`]; what the tests expect of
//! each frame is tracked by [`Tally`].

use alloc::boxed::Box;

use heapless::Vec as HVec;
use onic_core::device::rss_control::{IndirectionTable, RssConfig};
use onic_core::queue::doorbell::Doorbells;
use onic_core::queue::pair::PairPoll;
use onic_core::queue::pool::{release_to_hal, RecycleRing};
use onic_core::queue::rx::RxFrame;
use onic_core::queue::tx::TxDone;
use onic_core::rss::{PublishedHasher, RssKey, RxHasher, ShellHasher};
use onic_core::xdp::{swap_macs, DevMap, RawXdpProgram, TxTarget, XdpDispatch, XdpRxq, XdpSlot};
use onic_core::{BufSizeIdx, ConfigError, PassInfo, QueueError, RingSizeIdx, RxSink};
use onic_embed::done::FrameDone;
use onic_embed::poll::poll_pair;
use onic_embed::port::{RxBufSizes, MAX_RX_BUF_SIZES, RSS_INDIR_SIZE, RSS_KEY_SIZE};
use onic_embed::tuning::PairSpec;
use onic_hal::grace::ReadSection;
use onic_hal::{Direction, DmaMemory, DmaPage, PAGE_SIZE};
use onic_sim::QdmaWindow;

use super::frames::{self, MAX_BUILD};
use super::xdp::{Dispatch, Program};
use super::{Bench, Runner, SimDevice, SimDmaMem};
use crate::irq::{self, FUNCTIONS, MSIX_VECTORS};
use crate::model::{Guarded, Model};
use crate::platform::idt;
use crate::time::{self, TscDelay};

/// Queue pairs per PF.
pub const PAIRS: usize = 4;
/// Queue pairs in all.
pub const TOTAL_PAIRS: usize = FUNCTIONS * PAIRS;
/// NAPI budget: completions one poll may consume.
pub const BUDGET: usize = 8;
/// Ring-size index of the RX descriptor and completion rings (128 entries, 127 usable).
pub const RX_RING: u8 = 2;
/// Ring-size index of the TX rings (64 entries, 63 usable, at most 62 frames in flight).
pub const TX_RING: u8 = 1;
/// C2H buffer-size index per pair: 3520, 2048, 1024 and 512 bytes. Frames up to 1514 bytes fit
/// one buffer of the first two; on the others the longer frames span several buffers, which the
/// core drops and counts (`rx_multi_buffer`). What a port takes as its `QueueTuning::bufs`
/// ([`rx_buffers`]).
pub const RX_BUFFERS: [u8; PAIRS] = [5, 4, 3, 2];

// Every pair's size has its place in one `RxBufSizes` cycle.
const _: () = assert!(PAIRS <= MAX_RX_BUF_SIZES);

/// The buffer size of each RX queue, [`RX_BUFFERS`] as a cycle by queue index.
///
/// # Errors
///
/// An index the core does not take.
pub fn rx_buffers() -> Result<RxBufSizes, ConfigError> {
    let mut sizes = [BufSizeIdx::new(RX_BUFFERS[0])?; PAIRS];
    for (s, &i) in sizes.iter_mut().zip(&RX_BUFFERS) {
        *s = BufSizeIdx::new(i)?;
    }
    // CAST: both are small constants (the assertion above keeps PAIRS within the cycle).
    RxBufSizes::cycle(&sizes).ok_or(ConfigError::QueueCount {
        requested: PAIRS as u16,
        max: MAX_RX_BUF_SIZES as u16,
    })
}
/// Pages a pool keeps in its own cache.
pub const POOL_CACHE: usize = 64;
/// Pages a pool's slow path takes from the HAL at once.
pub const POOL_BULK: usize = 32;
/// Pages the OS can hold at once (XDP_PASS); beyond that it gives the oldest back at once.
pub const OS_HOLD: usize = 256;
/// Frames one phase of a test can track.
pub const MAX_TRACKED: usize = 768;
/// How long a helper waits for the datapath before it gives up.
pub const WAIT_NS: u64 = 5_000_000_000;

/// The recycle ring of each pair's pool, by global pair index (`func * PAIRS + queue`). A ring's
/// counters (pages pushed, refused, returned by the OS) live as long as the ring and are folded
/// into the statistics of the pool that uses it.
pub static RINGS: [RecycleRing; TOTAL_PAIRS] = [const { RecycleRing::new() }; TOTAL_PAIRS];

/// The recycle ring a page goes home through.
pub type Home = &'static RecycleRing;

/// TX slot storage of a pair (owned by its TX queue).
pub type TxSlots<'c> = onic_embed::set::TxSlots<Frame<'c>>;
/// A queue pair.
pub type Pair<'c, 's> = onic_embed::set::Pair<'s, SimDmaMem<'c>, Frame<'c>, POOL_CACHE>;

/// The doorbells of a PF as the image holds them.
pub type Db<'x, 'c> = Doorbells<&'x Guarded<QdmaWindow<'c>>>;

/// The buffer size of pair `q`'s RX queue in bytes (0 for no such pair).
#[must_use]
pub fn buffer_bytes(q: usize) -> u32 {
    match (u16::try_from(q), rx_buffers()) {
        (Ok(q), Ok(b)) if usize::from(q) < PAIRS => b.for_queue(q).bytes(),
        _ => 0,
    }
}

/// A frame on a TX ring that is not an XDP_TX page of the pair's own pool: an OS frame in its
/// own to-device page, or a frame another pair redirected here (`origin` is the owner's global
/// pair index).
pub type Frame<'c> = onic_embed::frame::Frame<SimDmaMem<'c>>;

/// Gives a finished TX buffer back to its owner: an OS page is unmapped and freed, a redirected
/// page goes back to its pool through the pool's recycle ring (`homes[origin]`).
fn free_frame(f: Frame<'_>, os_tx_live: &mut u32, homes: &[Home; TOTAL_PAIRS], dma: SimDmaMem<'_>) {
    let mut done = FrameDone::new(homes, dma);
    done.finish(f);
    book_os_frees(os_tx_live, done.counts.os_freed);
}

/// Takes `freed` OS buffers off the count of live ones.
fn book_os_frees(os_tx_live: &mut u32, freed: u64) {
    *os_tx_live = os_tx_live.saturating_sub(u32::try_from(freed).unwrap_or(u32::MAX));
}

/// Where a pair's completed TX buffers go ([`FrameDone`]), booked on the pair's [`Book`].
pub struct Done<'x, 'c> {
    inner: FrameDone<'x, SimDmaMem<'c>>,
    os_done: &'x mut u64,
    remote_done: &'x mut u64,
    os_tx_live: &'x mut u32,
}

impl<'x, 'c> Done<'x, 'c> {
    /// Counts completed OS and redirected frames into the given counters; redirected pages go
    /// home through `homes`.
    pub fn new(
        os_done: &'x mut u64,
        remote_done: &'x mut u64,
        os_tx_live: &'x mut u32,
        homes: &'x [Home; TOTAL_PAIRS],
        dma: SimDmaMem<'c>,
    ) -> Self {
        Self {
            inner: FrameDone::new(homes, dma),
            os_done,
            remote_done,
            os_tx_live,
        }
    }

    fn finish(&mut self, f: Frame<'_>) {
        let before = self.inner.counts.os_freed;
        self.inner.finish(f);
        book_os_frees(self.os_tx_live, self.inner.counts.os_freed - before);
    }
}

impl<'c> TxDone<Frame<'c>> for Done<'_, '_> {
    fn os_done(&mut self, f: Frame<'c>) {
        *self.os_done += 1;
        self.finish(f);
    }

    fn remote_done(&mut self, f: Frame<'c>) {
        *self.remote_done += 1;
        self.finish(f);
    }
}

/// What the image counts per pair, beyond the core's own statistics.
#[derive(Clone, Copy, Debug, Default)]
pub struct Book {
    /// Polls.
    pub polls: u64,
    /// Polls that used the whole budget.
    pub exhausted: u64,
    /// Polls that asked to be polled again (`more`).
    pub repolls: u64,
    /// Housekeeping reclaims of the TX queue (the pair was idle since the last round).
    pub hk_reclaims: u64,
    /// Buffers those reclaims completed.
    pub hk_completed: u64,
    /// OS frames the TX queue completed.
    pub tx_os_done: u64,
    /// Redirected frames of other pairs the TX queue completed.
    pub tx_remote_done: u64,
    /// The error a poll reported, if any (the pair is no longer polled).
    pub error: Option<QueueError>,
    /// Polls the housekeeping scheduled to refill a ring the pool could not fill.
    pub refill_polls: u64,
    /// Polled since the last housekeeping round.
    polled: bool,
}

impl Book {
    /// Counts a poll of pair `q` of PF `f` by what it reported: a poll that reports an error
    /// takes the pair out of service; one that has more to do schedules itself again.
    fn record_poll(&mut self, out: &PairPoll, f: usize, q: usize) {
        self.polls += 1;
        self.polled = true;
        if out.rx.done >= BUDGET {
            self.exhausted += 1;
        }
        if let Some(e) = out.rx.error {
            self.error = Some(e);
        } else if out.rx.more {
            self.repolls += 1;
            irq::reschedule_napi(f, q);
        }
    }
}

/// The pages and buffers the "OS" holds.
pub struct Os {
    /// Pages XDP_PASS handed over: (global index of the pair whose pool owns it, that pool's
    /// recycle ring, frame length, page).
    held: HVec<(u8, Home, u16, DmaPage), OS_HOLD>,
    /// Keep the pages (a slow consumer) instead of giving them back every housekeeping round.
    pub hold: bool,
    /// Pages given back straight into the owning pool.
    pub returned_direct: u64,
    /// Pages given back through the owning pool's recycle ring.
    pub returned_ring: u64,
    /// Pages given back early because the OS was full.
    pub overflow: u64,
}

impl Os {
    const fn new() -> Self {
        Self {
            held: HVec::new(),
            hold: false,
            returned_direct: 0,
            returned_ring: 0,
            overflow: 0,
        }
    }

    /// Pages held now.
    #[must_use]
    pub fn held(&self) -> usize {
        self.held.len()
    }

    /// Takes a page XDP_PASS handed over. A full OS gives its oldest page back through that
    /// page's recycle ring (another context's way back) to make room.
    pub fn take(&mut self, origin: u8, home: Home, len: u16, page: DmaPage, dma: SimDmaMem<'_>) {
        if self.held.is_full() && !self.held.is_empty() {
            let (_, h, l, p) = self.held.remove(0);
            self.overflow += 1;
            give_back_through_ring(h, l, p, dma);
            self.returned_ring += 1;
        }
        if let Err((_, h, l, p)) = self.held.push((origin, home, len, page)) {
            give_back_through_ring(h, l, p, dma);
            self.returned_ring += 1;
        }
    }

    /// Gives every held page back: alternately straight into the owning pool (the OS runs in the
    /// pool's context) and through the pool's recycle ring (as from another context).
    pub fn give_back(&mut self, pairs: &mut [HVec<Pair<'_, '_>, PAIRS>; FUNCTIONS], dma: SimDmaMem<'_>) {
        let mut k = 0;
        while let Some((origin, home, len, page)) = self.held.pop() {
            let o = usize::from(origin);
            let pool = pairs
                .get_mut(o / PAIRS)
                .and_then(|ps| ps.get_mut(o % PAIRS))
                .map(|p| &mut p.pool);
            match pool {
                Some(pool) if k % 2 == 0 => {
                    pool.return_from_os(page, usize::from(len));
                    self.returned_direct += 1;
                }
                _ => {
                    give_back_through_ring(home, len, page, dma);
                    self.returned_ring += 1;
                }
            }
            k += 1;
        }
    }
}

fn give_back_through_ring(home: Home, len: u16, page: DmaPage, dma: SimDmaMem<'_>) {
    if let Err(page) = home.return_from_os(page, usize::from(len)) {
        release_to_hal(&dma, Direction::Bidirectional, page);
    }
}

/// A PF's RSS state as the driver holds it, with the software shell hash for that key: the queue
/// every frame must arrive on.
pub struct Steering {
    /// The indirection table.
    pub table: IndirectionTable,
    /// The shell hash under the function's key.
    pub hasher: ShellHasher,
}

impl Steering {
    /// The state a function starts with (table entry `k` = `k % PAIRS`, the RTL's reset key), until
    /// [`Steering::refresh`] reads a brought-up device's.
    #[must_use]
    pub fn initial() -> Self {
        Self {
            table: IndirectionTable::round_robin(PAIRS as u16),
            hasher: ShellHasher::new(&onic_core::rss::RssKey::DEFAULT),
        }
    }

    /// Follows a change of a function's RSS state as the driver holds it.
    pub fn refresh(&mut self, rss: &RssConfig) {
        self.table = *rss.table();
        self.hasher.rekey(rss.key());
    }

    /// The RSS state `port`'s shell holds (`ethtool -x`), as the tests predict with it (the
    /// initial table if the shell's does not read as one).
    #[must_use]
    pub fn read_back<H: onic_embed::port::Host>(port: &onic_embed::port::Port<H>) -> Self {
        let mut indir = [0u32; RSS_INDIR_SIZE];
        let mut key = [0u8; RSS_KEY_SIZE];
        port.rss_get(Some(&mut indir), Some(&mut key));
        let entries = indir.map(|e| u16::try_from(e).unwrap_or(u16::MAX));
        let mut steer = Self::initial();
        if let Ok(table) = IndirectionTable::from_slice(&entries) {
            steer.table = table;
        }
        steer.hasher = ShellHasher::new(&RssKey::new(key));
        steer
    }

    /// The queue the shell sends `frame` to.
    #[must_use]
    pub fn queue(&self, frame: &[u8]) -> u16 {
        self.table.queue_for(self.hasher.hash_frame(frame).value).get()
    }
}

/// What the tests expect of one frame they sent.
#[derive(Clone, Copy, Debug)]
struct Expect {
    flow: u32,
    len: u16,
    /// The function that receives it first.
    to: u8,
    /// Its queue there, by the steering at send time.
    queue: u16,
    /// Whether it fits that queue's buffer (else: a counted multi-buffer drop).
    fits: bool,
    seen: bool,
    seen_back: bool,
}

/// What the receive side saw of the frames a phase sent. Every frame reaches the tap before the
/// XDP program runs; a frame seen with its MAC addresses swapped is one an XDP program sent back
/// out (XDP_TX or redirect) that came in again over the cable.
pub struct Tally {
    expected: HVec<Expect, MAX_TRACKED>,
    /// Frames received on their first arrival.
    pub received: u32,
    /// Frames received again after an XDP program sent them back out.
    pub returned: u32,
    /// Frames on another queue (or function) than the shell hash and table give.
    pub misrouted: u32,
    /// Frames whose bytes differ from what was sent.
    pub corrupt: u32,
    /// Frames the phase did not send.
    pub unknown: u32,
    /// Frames seen twice.
    pub duplicate: u32,
    /// First arrivals per function and queue.
    pub per_queue: [[u32; PAIRS]; FUNCTIONS],
    /// Returned frames per function.
    pub returned_to: [u32; FUNCTIONS],
}

impl Tally {
    /// No frames yet.
    pub const fn new() -> Self {
        Self {
            expected: HVec::new(),
            received: 0,
            returned: 0,
            misrouted: 0,
            corrupt: 0,
            unknown: 0,
            duplicate: 0,
            per_queue: [[0; PAIRS]; FUNCTIONS],
            returned_to: [0; FUNCTIONS],
        }
    }

    /// Starts a new phase.
    pub fn reset(&mut self) {
        *self = Self::new();
    }

    /// Frames sent in this phase.
    #[must_use]
    pub fn sent(&self) -> u32 {
        self.expected.len() as u32
    }

    /// Frames sent that fit their queue's buffer and have not arrived yet.
    #[must_use]
    pub fn outstanding(&self) -> u32 {
        self.expected.iter().filter(|x| x.fits && !x.seen).count() as u32
    }

    /// Frames sent that fit their queue's buffer.
    #[must_use]
    pub fn deliverable(&self) -> u32 {
        self.expected.iter().filter(|x| x.fits).count() as u32
    }

    /// Frames expected to be dropped as larger than the buffer of queue `q` of `func`.
    #[must_use]
    pub fn oversize_for(&self, func: u8, q: usize) -> u32 {
        self.expected
            .iter()
            .filter(|x| !x.fits && x.to == func && usize::from(x.queue) == q)
            .count() as u32
    }

    /// Records the next frame of the phase (flow `flow`, `len` bytes, first received by `to`
    /// under `steer`), builds it into `buf` and returns its length; `None` when the phase is full.
    pub fn add(
        &mut self,
        flow: u32,
        len: usize,
        to: u8,
        steer: &Steering,
        buf: &mut [u8; MAX_BUILD],
    ) -> Option<usize> {
        if self.expected.is_full() {
            return None;
        }
        let id = self.expected.len() as u32;
        let frame = frames::build(&frames::flow(flow), len, id, buf);
        let queue = steer.queue(frame);
        let x = Expect {
            flow,
            len: frame.len() as u16,
            to,
            queue,
            fits: frame.len() as u32 <= buffer_bytes(usize::from(queue)),
            seen: false,
            seen_back: false,
        };
        let n = frame.len();
        self.expected.push(x).ok()?;
        Some(n)
    }

    /// The tap: one frame received by queue `qid` of `func`, whose steering is `steer`.
    pub fn on_frame(&mut self, func: u8, qid: u16, steer: &Steering, data: &[u8]) {
        let back = frames::is_swapped(data);
        let Some(id) = frames::id_of(data) else {
            self.unknown += 1;
            return;
        };
        let Some(x) = self.expected.get_mut(id as usize) else {
            self.unknown += 1;
            return;
        };
        let flag = if back { &mut x.seen_back } else { &mut x.seen };
        if *flag {
            self.duplicate += 1;
            return;
        }
        *flag = true;
        let x = *x;
        if back {
            self.returned += 1;
            if let Some(c) = self.returned_to.get_mut(usize::from(func)) {
                *c += 1;
            }
        } else {
            self.received += 1;
            if let Some(c) = self
                .per_queue
                .get_mut(usize::from(func))
                .and_then(|r| r.get_mut(usize::from(qid)))
            {
                *c += 1;
            }
            if x.to != func || x.queue != qid {
                self.misrouted += 1;
            }
        }
        if steer.queue(data) != qid {
            self.misrouted += 1;
        }
        let mut want = [0u8; MAX_BUILD];
        let n = frames::build(&frames::flow(x.flow), usize::from(x.len), id, &mut want).len();
        if back {
            swap_macs(&mut want[..n]);
        }
        if want[..n] != *data {
            self.corrupt += 1;
        }
    }
}

/// Frames that left each port (the model's egress capture), and how many of them an XDP program
/// had sent back out (MAC addresses swapped).
#[derive(Clone, Copy, Debug, Default)]
pub struct WireLog {
    /// Frames out, per port.
    pub out: [u64; FUNCTIONS],
    /// Of those, frames with swapped MAC addresses.
    pub swapped: [u64; FUNCTIONS],
}

/// The datapath state the groups share.
pub struct Datapath<'c, 's> {
    /// Each PF's queue pairs (index = queue id = MSI-X vector).
    pub pairs: [HVec<Pair<'c, 's>, PAIRS>; FUNCTIONS],
    /// The image's own counters per pair.
    pub books: [[Book; PAIRS]; FUNCTIONS],
    /// The XDP program slot of each PF (one program for all its RX queues).
    pub slots: [XdpSlot<Program>; FUNCTIONS],
    /// The OS side.
    pub os: Os,
    /// Expectations of the phase running.
    pub tally: Tally,
    /// Each PF's RSS state as the tests expect it (their prediction of every frame's queue).
    pub steer: [Steering; FUNCTIONS],
    /// Each PF's hash under the key its shell holds, as the polls read it: published by the PF's
    /// `Rss` (its only writer) whenever the RSS group sets a key.
    pub hashers: Box<[PublishedHasher; FUNCTIONS]>,
    /// Egress capture.
    pub wire: WireLog,
    /// OS TX buffers allocated and not yet completed.
    pub os_tx_live: u32,
    /// Interrupts the model raised, per function and MSI-X vector.
    pub raised: [[u32; MSIX_VECTORS]; FUNCTIONS],
    /// Interrupts for vectors the image does not route.
    pub unrouted: u32,
    /// Housekeeping rounds run.
    pub hk_rounds: u64,
    /// The recycle ring of each pair's pool, by global pair index.
    pub homes: [Home; TOTAL_PAIRS],
    /// The DMA memory of the pages.
    pub dma: SimDmaMem<'c>,
}

impl<'c, 's> Datapath<'c, 's> {
    /// No pairs yet; `steer` is the PFs' RSS state after bring-up.
    pub fn new(dma: SimDmaMem<'c>, steer: [Steering; FUNCTIONS]) -> Self {
        Self {
            pairs: [HVec::new(), HVec::new()],
            books: [[Book::default(); PAIRS]; FUNCTIONS],
            slots: [Program::Drop, Program::Pass].map(|p| {
                let mut slot = XdpSlot::new();
                slot.attach(p);
                slot
            }),
            os: Os::new(),
            tally: Tally::new(),
            steer,
            hashers: Box::new([const { PublishedHasher::new(&RssKey::DEFAULT) }; FUNCTIONS]),
            wire: WireLog::default(),
            os_tx_live: 0,
            raised: [[0; MSIX_VECTORS]; FUNCTIONS],
            unrouted: 0,
            hk_rounds: 0,
            homes: core::array::from_fn(|i| &RINGS[i]),
            dma,
        }
    }

    /// Attaches `programs` to the PFs' slots (replacing what was attached).
    pub fn set_programs(&mut self, programs: [Program; FUNCTIONS]) {
        for (slot, p) in self.slots.iter_mut().zip(programs) {
            slot.attach(p);
        }
    }

    /// A `TxDone` counting into pair `q` of PF `f`'s book.
    pub fn done(&mut self, f: usize, q: usize) -> Done<'_, 'c> {
        let book = &mut self.books[f][q];
        Done::new(
            &mut book.tx_os_done,
            &mut book.tx_remote_done,
            &mut self.os_tx_live,
            &self.homes,
            self.dma,
        )
    }

    /// Whether both PFs have all their pairs.
    #[must_use]
    pub fn ready(&self) -> bool {
        self.pairs.iter().all(|p| p.len() == PAIRS)
    }

    /// Every pair with its function and queue.
    pub fn each(&self) -> impl Iterator<Item = (u8, usize, &Pair<'c, 's>)> + '_ {
        self.pairs
            .iter()
            .enumerate()
            .flat_map(|(f, ps)| ps.iter().enumerate().map(move |(q, p)| (f as u8, q, p)))
    }

    /// TX buffers in flight on any pair.
    #[must_use]
    pub fn tx_in_flight(&self) -> u32 {
        self.each().map(|(_, _, p)| u32::from(p.tx.in_flight())).sum()
    }
}

/// The slot storage of one pair: RX and TX, each as long as its ring's usable entries.
pub type Slots<'c> = onic_embed::set::Slots<Frame<'c>>;

/// Fresh slot storage from the heap (every pair's rings have the same sizes).
#[must_use]
pub fn alloc_slots<'c>() -> Slots<'c> {
    spec(0).map_or_else(
        |_| Slots {
            rx: Box::new([]),
            tx: Box::new([]),
        },
        |s| Slots::for_spec(&s),
    )
}

/// Pair `q`'s configuration: RX rings of [`RX_RING`] with the buffers [`rx_buffers`] gives it, a TX
/// ring of [`TX_RING`], a pool mapping its pages bidirectional that takes [`POOL_BULK`] pages
/// from the HAL at once.
///
/// # Errors
///
/// A ring or buffer size index the core does not know.
pub fn spec(q: u16) -> onic_core::Result<PairSpec> {
    let rx_ring = RingSizeIdx::new(RX_RING)?;
    let buf = rx_buffers()?.for_queue(q);
    let mut spec = PairSpec::new(onic_core::QueueId::new(q), rx_ring, buf);
    spec.tx.ring = RingSizeIdx::new(TX_RING)?;
    spec.pool.bulk = POOL_BULK;
    Ok(spec)
}

/// Builds pair `q` of `dev` over `slots` (which its queues then own) and its recycle ring, and
/// starts it through the device (TX context, then RX context with the ring filled from the pool).
///
/// # Errors
///
/// What `RxQueue::new`, `TxQueue::new` or `QueuePair::start` report; the queues built so far
/// are released.
pub fn build_pair<'c, 's>(
    dev: &SimDevice<'c>,
    dma: SimDmaMem<'c>,
    q: u16,
    slots: Slots<'c>,
    ring: &'s RecycleRing,
) -> onic_core::Result<Pair<'c, 's>> {
    let mut pair = onic_embed::set::build_pair(dma, &spec(q)?, slots, Some(ring))?;
    match pair.start(dev, &mut TscDelay) {
        Ok(()) => Ok(pair),
        Err(e) => {
            let (mut os_done, mut remote_done, mut os_tx_live) = (0, 0, 0);
            let homes = core::array::from_fn(|i| &RINGS[i]);
            let mut done = Done::new(&mut os_done, &mut remote_done, &mut os_tx_live, &homes, dma);
            let _ = pair.teardown(dev, &mut TscDelay, &mut done);
            Err(e)
        }
    }
}

/// One round of the main loop: the tick's housekeeping if due, one step of the model, its
/// interrupts raised on their vectors, and a poll of every pair their handlers marked. Returns
/// whether anything happened.
pub fn service(b: &mut Bench<'_, '_>) -> bool {
    if irq::take_housekeeping() > 0 {
        housekeeping(b);
    }
    let dp = &mut b.dp;
    let (progress, interrupted) = model_step(b.model, &mut dp.wire, &mut dp.raised, &mut dp.unrouted);
    let polled = poll_marked(|f, q| poll(b, f, q));
    progress || polled || interrupted
}

/// One step of the model: the frames it sent out of its ports counted on `wire`, the queue
/// interrupts it raised counted in `raised` (per function and MSI-X vector) and raised on their
/// IDT vectors (`unrouted` counts those with no vector). Returns whether the model made
/// progress and whether it raised any interrupt. Both main loops (bare pairs, ports) take it.
pub fn model_step(
    model: &Model<'_>,
    wire: &mut WireLog,
    raised: &mut [[u32; MSIX_VECTORS]; FUNCTIONS],
    unrouted: &mut u32,
) -> (bool, bool) {
    let (progress, interrupts, egress) = model.with(|c| {
        (
            c.step(),
            c.take_interrupts(),
            [c.take_egress(0), c.take_egress(1)],
        )
    });
    for (port, frames) in egress.iter().enumerate() {
        for f in frames {
            wire.out[port] += 1;
            if frames::is_swapped(f) {
                wire.swapped[port] += 1;
            }
        }
    }
    for i in &interrupts {
        match irq::queue_vector(i.func, i.vector) {
            Some(v) => {
                if let Some(c) = raised
                    .get_mut(usize::from(i.func))
                    .and_then(|r| r.get_mut(usize::from(i.vector)))
                {
                    *c += 1;
                }
                idt::raise(v);
            }
            None => *unrouted += 1,
        }
    }
    (progress, !interrupts.is_empty())
}

/// Polls, with `poll(function, vector)`, every queue whose interrupt handler marked it since
/// the last call (NAPI scheduled by the interrupt). Returns whether any poll ran.
pub fn poll_marked(mut poll: impl FnMut(usize, usize) -> bool) -> bool {
    let mut polled = false;
    for f in 0..FUNCTIONS {
        let mut bits = irq::take_napi(f);
        while bits != 0 {
            let q = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            polled |= poll(f, q);
        }
    }
    polled
}

/// Polls pair `q` of PF `f` once (NAPI) with `QueuePair::poll`, running the PF's attached
/// program (behind the tally's tap) on each frame; redirects go to the other PF's TX queues
/// through a `DevMap` of `TxTarget`s. The pair stays scheduled while the poll reports `more`.
/// Returns whether it polled.
fn poll(b: &mut Bench<'_, '_>, f: usize, q: usize) -> bool {
    let (Some(dev), Some(peer)) = (
        b.devices.get(f).and_then(Option::as_ref),
        b.devices.get(1 - f).and_then(Option::as_ref),
    ) else {
        return false;
    };
    let db = dev.doorbells();
    let peer_db = peer.doorbells();
    let dp = &mut b.dp;
    let dma = dp.dma;
    let homes = dp.homes;
    let [p0, p1] = &mut dp.pairs;
    let (mine, other) = if f == 0 { (p0, p1) } else { (p1, p0) };
    let (Some(pair), Some(book)) = (mine.get_mut(q), dp.books[f].get_mut(q)) else {
        return false;
    };
    if book.error.is_some() {
        return false;
    }
    let Book {
        tx_os_done,
        tx_remote_done,
        ..
    } = &mut *book;
    let steer = &dp.steer[f];
    let tally = &mut dp.tally;
    let (func, qid) = (f as u8, q as u16);
    let mut tap = |data: &[u8]| tally.on_frame(func, qid, steer, data);
    let origin = f * PAIRS + q;
    let home = homes[origin];
    let os = &mut dp.os;
    // The redirect table: entry i is the other PF's TX queue i.
    let mut targets: HVec<TxTarget<'_, SimDmaMem<'_>, DmaPage, Frame<'_>, TxSlots<'_>, _>, PAIRS> = other
        .iter_mut()
        .map(|p| TxTarget::new(&mut p.tx, &peer_db))
        .collect();
    let mut table: DevMap<'_, DmaPage, PAIRS> = DevMap::new();
    for (i, t) in targets.iter_mut().enumerate() {
        // CAST: i < PAIRS, and the table has PAIRS entries.
        let _ = table.insert(i as u32, t);
    }
    let mut done = Done::new(tx_os_done, tx_remote_done, &mut dp.os_tx_live, &homes, dma);
    let rxq = XdpRxq {
        queue_index: qid,
        port: func,
    };
    // CAST: origin < TOTAL_PAIRS.
    let (origin8, origin32) = (origin as u8, origin as u32);
    // SAFETY: the image is single-threaded and RSS changes run from the main loop between polls,
    // so no writer of the hasher runs until this poll has returned (the `TakingTurns` contract).
    let section = unsafe { ReadSection::new() };
    let shell_hash = dp.hashers[f].read(&section);
    let out = match dp.slots[f].program_mut() {
        Some(prog) => {
            // The shell's hash, for a program's RX-hash kfunc.
            let hash = Some(shell_hash);
            let mut prog = Dispatch {
                prog: *prog,
                tap: &mut tap,
            };
            let mut pass = |fr: RxFrame<DmaPage>, _: PassInfo| -> Result<(), RxFrame<DmaPage>> {
                to_os(os, origin8, home, fr, dma)
            };
            xdp_poll(
                pair,
                &db,
                Some(&mut prog),
                &mut pass,
                &mut table,
                rxq,
                origin32,
                &mut done,
                hash,
            )
        }
        None => {
            // No program: the core hands each frame straight to the OS; the tap looks at it there.
            let mut pass = |fr: RxFrame<DmaPage>, _: PassInfo| -> Result<(), RxFrame<DmaPage>> {
                let start = usize::from(fr.offset);
                if let Some(data) = fr.page.bytes().get(start..start + usize::from(fr.len)) {
                    tap(data);
                }
                to_os(os, origin8, home, fr, dma)
            };
            xdp_poll::<Dispatch<'_, fn(&[u8])>, _>(
                pair, &db, None, &mut pass, &mut table, rxq, origin32, &mut done, None,
            )
        }
    };
    book.record_poll(&out, f, q);
    true
}

/// An XDP_PASS page handed to the OS, with the length of its bytes the CPU may have written.
fn to_os(
    os: &mut Os,
    origin: u8,
    home: Home,
    fr: RxFrame<DmaPage>,
    dma: SimDmaMem<'_>,
) -> Result<(), RxFrame<DmaPage>> {
    let dirty = (usize::from(fr.offset) + usize::from(fr.len))
        .saturating_sub(onic_core::config::RX_HEADROOM as usize);
    os.take(
        origin,
        home,
        u16::try_from(dirty).unwrap_or(u16::MAX),
        fr.page,
        dma,
    );
    Ok(())
}

/// One `QueuePair::poll` of `pair` with the given program (if any), sink and redirect table.
#[allow(clippy::too_many_arguments)]
fn xdp_poll<Prog: RawXdpProgram + ?Sized, S: RxSink<DmaPage>>(
    pair: &mut Pair<'_, '_>,
    db: &Db<'_, '_>,
    prog: Option<&mut Prog>,
    sink: &mut S,
    table: &mut DevMap<'_, DmaPage, PAIRS>,
    rxq: XdpRxq,
    origin: u32,
    done: &mut Done<'_, '_>,
    hasher: Option<&ShellHasher>,
) -> PairPoll {
    let dispatch = XdpDispatch {
        prog,
        redirect: table,
        origin,
        hasher: hasher.map(|h| h as &dyn RxHasher),
    };
    poll_pair(pair, (BUDGET, db), (sink, rxq), dispatch, done)
}

/// The tick's deferred work (see the module docs).
fn housekeeping(b: &mut Bench<'_, '_>) {
    let dp = &mut b.dp;
    dp.hk_rounds += 1;
    for (f, pairs) in dp.pairs.iter_mut().enumerate() {
        for (q, pair) in pairs.iter_mut().enumerate() {
            let book = &mut dp.books[f][q];
            let idle = !core::mem::take(&mut book.polled);
            if idle && pair.tx.in_flight() > 0 {
                let mut done = Done::new(
                    &mut book.tx_os_done,
                    &mut book.tx_remote_done,
                    &mut dp.os_tx_live,
                    &dp.homes,
                    dp.dma,
                );
                let r = pair.tx.reclaim(&mut done);
                book.hk_reclaims += 1;
                book.hk_completed += u64::from(r.completed);
            }
            if book.error.is_none() && pair.rx.posted() < pair.rx.options().refill_batch {
                book.refill_polls += 1;
                irq::reschedule_napi(f, q);
            }
        }
    }
    if !dp.os.hold {
        dp.os.give_back(&mut dp.pairs, dp.dma);
    }
}

/// Runs the main loop until `done` holds or `timeout_ns` passes, halting while idle. Returns
/// whether `done` held.
pub fn run_until(b: &mut Bench<'_, '_>, timeout_ns: u64, done: impl Fn(&Bench<'_, '_>) -> bool) -> bool {
    main_loop(b, timeout_ns, service, |b| done(b))
}

/// Runs `round` (one round of a main loop: whether anything happened) on `b` until `done`
/// holds or `timeout_ns` passes, halting until the next interrupt while a round found nothing
/// to do and no queue waits for a poll. Returns whether `done` held. The bare pairs' loop and
/// the port bench's (`super::portbench`) both run this way.
pub fn main_loop<B: ?Sized>(
    b: &mut B,
    timeout_ns: u64,
    mut round: impl FnMut(&mut B) -> bool,
    mut done: impl FnMut(&mut B) -> bool,
) -> bool {
    let deadline = time::nanos_since_boot() + timeout_ns;
    loop {
        let busy = round(b);
        if done(b) {
            return true;
        }
        if time::nanos_since_boot() > deadline {
            return false;
        }
        if !busy {
            crate::platform::disable_interrupts();
            if irq::napi_pending() {
                crate::platform::enable_interrupts();
            } else {
                crate::platform::enable_interrupts_and_halt();
            }
        }
    }
}

/// Runs the main loop until every frame of the phase that fits its buffer arrived and every TX
/// buffer is back; returns whether that happened in time.
pub fn settle(b: &mut Bench<'_, '_>) -> bool {
    run_until(b, WAIT_NS, |b| {
        b.dp.tally.outstanding() == 0 && b.dp.tx_in_flight() == 0 && !irq::napi_pending()
    })
}

/// Why [`send`] did not queue a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendError {
    /// No such pair or function.
    NoQueue,
    /// The queue stayed stopped (no reclaim woke it in time).
    Stopped,
    /// No page for the OS buffer.
    NoPage,
    /// The core refused the frame (it was freed).
    Refused,
}

/// An OS TX buffer holding `data`: its own page of `dma`, mapped to-device and synced.
pub fn os_frame<D: DmaMemory>(dma: D, data: &[u8]) -> Option<onic_embed::frame::Frame<D>> {
    let len = u16::try_from(data.len())
        .ok()
        .filter(|&l| usize::from(l) <= PAGE_SIZE)?;
    let mem = dma.alloc_page().ok()?;
    let mut page = match dma.map_page(mem, Direction::ToDevice) {
        Ok(p) => p,
        Err((mem, _)) => {
            dma.free_page(mem);
            return None;
        }
    };
    page.bytes_mut()[..data.len()].copy_from_slice(data);
    dma.sync_for_device(&page, 0, data.len(), Direction::ToDevice);
    Some(onic_embed::frame::Frame::Os {
        page,
        len: usize::from(len),
        dma,
    })
}

/// The OS transmits `data` on pair `q` of PF `f` with `TxQueue::xmit_os` (`more`: more frames of
/// the batch follow). A stopped queue is waited for: the main loop runs until a reclaim wakes it.
///
/// # Errors
///
/// [`SendError`]; a refused frame's buffer is freed.
pub fn send(b: &mut Bench<'_, '_>, f: usize, q: usize, data: &[u8], more: bool) -> Result<(), SendError> {
    let stopped = |b: &Bench<'_, '_>| {
        b.dp.pairs
            .get(f)
            .and_then(|p| p.get(q))
            .map(|p| p.tx.is_stopped())
    };
    match stopped(b) {
        None => return Err(SendError::NoQueue),
        Some(true) => {
            if !run_until(b, WAIT_NS, |b| stopped(b) == Some(false)) {
                return Err(SendError::Stopped);
            }
        }
        Some(false) => {}
    }
    let frame = os_frame(b.dp.dma, data).ok_or(SendError::NoPage)?;
    b.dp.os_tx_live += 1;
    let Some(dev) = b.devices.get(f).and_then(Option::as_ref) else {
        free_frame(frame, &mut b.dp.os_tx_live, &b.dp.homes, b.dp.dma);
        return Err(SendError::NoQueue);
    };
    let db = dev.doorbells();
    let Some(pair) = b.dp.pairs.get_mut(f).and_then(|p| p.get_mut(q)) else {
        free_frame(frame, &mut b.dp.os_tx_live, &b.dp.homes, b.dp.dma);
        return Err(SendError::NoQueue);
    };
    match pair.tx.xmit_os(&db, frame, more) {
        Ok(()) => Ok(()),
        Err(e) => {
            free_frame(e.into_inner(), &mut b.dp.os_tx_live, &b.dp.homes, b.dp.dma);
            Err(SendError::Refused)
        }
    }
}

/// Publishes whatever pair `q` of PF `f` has queued (the end of an xmit-more batch).
pub fn flush(b: &mut Bench<'_, '_>, f: usize, q: usize) {
    let (Some(dev), Some(pair)) = (
        b.devices.get(f).and_then(Option::as_ref),
        b.dp.pairs.get_mut(f).and_then(|p| p.get_mut(q)),
    ) else {
        return;
    };
    pair.tx.flush(&dev.doorbells());
}

/// Frames sent before the loop waits for them (at most a quarter of an RX ring per queue).
pub const CHUNK: u32 = 32;

/// Sends `n` tracked frames from PF `from` (round-robin over its TX queues), `CHUNK` at a time
/// as xmit-more batches, waiting for each chunk to arrive; `shape(i)` gives frame i's flow and
/// length. Returns whether every chunk settled.
pub fn spread(b: &mut Bench<'_, '_>, from: usize, n: u32, shape: impl Fn(u32) -> (u32, usize)) -> bool {
    let mut ok = true;
    let mut i = 0;
    while i < n {
        let end = (i + CHUNK).min(n);
        for k in i..end {
            let (flow, len) = shape(k);
            let q = k as usize % PAIRS;
            ok &= send_tracked(b, from, q, flow, len, true).is_ok();
        }
        for q in 0..PAIRS {
            flush(b, from, q);
        }
        ok &= settle(b);
        i = end;
    }
    ok
}

/// Builds the next frame of the phase (flow `flow`, `len` bytes), sends it from pair `q` of PF
/// `from` and records what the other PF should see.
///
/// # Errors
///
/// As [`send`]; [`SendError::NoQueue`] when the phase cannot track more frames.
pub fn send_tracked(
    b: &mut Bench<'_, '_>,
    from: usize,
    q: usize,
    flow: u32,
    len: usize,
    more: bool,
) -> Result<(), SendError> {
    let to = 1 - from;
    let mut buf = [0u8; MAX_BUILD];
    let n =
        b.dp.tally
            .add(flow, len, to as u8, &b.dp.steer[to], &mut buf)
            .ok_or(SendError::NoQueue)?;
    send(b, from, q, &buf[..n], more)
}

/// Injects the next frame of the phase at `port` from outside (the far end of the wire) and
/// records what PF `port` should see.
pub fn inject_tracked(b: &mut Bench<'_, '_>, port: u8, flow: u32, len: usize) -> bool {
    let mut buf = [0u8; MAX_BUILD];
    let Some(n) =
        b.dp.tally
            .add(flow, len, port, &b.dp.steer[usize::from(port)], &mut buf)
    else {
        return false;
    };
    b.model.with(|c| c.inject(port, &buf[..n]));
    true
}

/// A flow (not a non-IP one) that PF `func`'s current steering sends to queue `q`.
#[must_use]
pub fn flow_for_queue(steer: &Steering, q: usize, skip: u32) -> Option<u32> {
    let mut buf = [0u8; MAX_BUILD];
    (skip..skip + 4000).find(|&i| {
        let f = frames::flow(i);
        f.kind != frames::Kind::NonIp && usize::from(steer.queue(frames::build(&f, 60, 0, &mut buf))) == q
    })
}

/// A flow PF1's current steering sends to its queue `q`; without one, check `name` fails.
pub fn flow_to_pf1_queue(r: &mut Runner, b: &Bench<'_, '_>, q: usize, name: &'static str) -> Option<u32> {
    let flow = flow_for_queue(&b.dp.steer[1], q, 0);
    if flow.is_none() {
        r.check(name, false, format_args!("no flow reaches PF1 queue {q}"));
    }
    flow
}

/// Whether both functions are up with all their pairs, for a group that needs them; if not, its
/// check `name` is reported as not run.
pub fn ready(r: &mut Runner, b: &Bench<'_, '_>, name: &'static str) -> bool {
    let ready = b.dp.ready() && b.devices.iter().all(Option::is_some);
    if !ready {
        r.skipped(name, "queue pairs or functions missing");
    }
    ready
}
