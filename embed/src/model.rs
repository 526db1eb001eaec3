//! The port's [`Host`] over the model card (`onic-sim`), for hosts with no OS of their own: the
//! `onic` tool, the tests, the bare-metal image. With [`SoloPort`](crate::port::SoloPort) they
//! drive the same [`Port`](crate::port::Port) the kernel module does.
//!
//! What the kernel provides, the model host provides in plain memory, one thread at a time:
//!
//! - **page pools**: one core [`PagePool`] per queue, numbered in the order the ports create
//!   them (the queue memory handle, [`QMem`], is that number; it is also how a page finds its
//!   way home from another port);
//! - **the stack**: frames passed to it wait until the caller reads them
//!   ([`ModelHost::drain_received`]), which gives their pages back, as a socket would; or the
//!   stack holds them for as long as the caller likes ([`ModelHost::look_received`],
//!   [`ModelHost::release_received`]), which is how a test runs a queue's pool dry;
//! - **packets**: [`ModelHost::packet`] copies a frame into a buffer the device reads (mapped
//!   to-device once); a completed packet's buffer is kept for the next one;
//! - **redirects**: a frame the program redirects waits in [`ModelHost::take_redirects`] with
//!   the target the program named; the caller hands it to a port's redirect-in ring
//!   (`Port::xdp_xmit`), reads it, or gives it back ([`ModelHost::return_frame`]); a target
//!   may take a limited number of frames ([`ModelHost::limit_target`]), as a full AF_XDP ring;
//! - **programs**: the caller attaches programs of type `P` and reaches them again by handle;
//! - **grace period**: none to wait for ([`TakingTurns`]: one thread, calls in turn).

use alloc::boxed::Box;
use alloc::collections::BTreeMap;
use alloc::rc::Rc;
use alloc::vec::Vec;
use core::cell::RefCell;

use onic_core::queue::pool::{release_to_hal, PagePool, PoolConfig};
use onic_core::queue::source::SourceKind;
use onic_core::rss::{PublishedHasher, RssKey};
use onic_core::stats::PoolStats;
use onic_core::xdp::{RawXdpProgram, XdpBuff, XdpRxHash};
use onic_hal::grace::TakingTurns;
use onic_hal::{DelayNs, RegisterWindow};
use onic_hal::{Direction, DmaAddr, DmaMemory, DmaPage, Unshared};
use onic_sim::{Card, QdmaWindow, ShellWindow, SimDelay, SimDma};

use crate::port::{XskBuf, XskTxDesc};

mod xsk;
pub mod xsk_app;
use crate::port::{FrameAt, Host, HostRegs, Mapped, RingHoldings, RxBufSizes, SkbHash};
pub use xsk::{UserRing, XskCensus, XskCensusError, XskConfig, XskError, XskSocket, XskStats, CHUNK_SIZES};

/// A queue's page pool: its number among every pool the model host made.
pub type QMem = u16;

/// How a model host reaches the card: its register windows, DMA memory and delay, wrapped as
/// the caller needs them (the bare-metal image masks interrupts around every call into the
/// model, which its timer handler also drives). A plain `&Card` reaches them directly.
pub trait ModelAccess: Clone {
    /// A function's QDMA window.
    type Qdma: RegisterWindow;
    /// The shell's window.
    type Shell: RegisterWindow;
    /// The card's DMA memory.
    type Dma: DmaMemory + Copy;
    /// The control path's delay.
    type Delay: DelayNs;
    /// Function `func`'s QDMA window.
    fn qdma(&self, func: u8) -> Self::Qdma;
    /// The shell's window.
    fn shell(&self) -> Self::Shell;
    /// The DMA memory.
    fn dma(&self) -> Self::Dma;
    /// A delay.
    fn delay(&self) -> Self::Delay;
}

impl<'c> ModelAccess for &'c Card {
    type Qdma = QdmaWindow<'c>;
    type Shell = ShellWindow<'c>;
    type Dma = SimDma<'c>;
    type Delay = SimDelay<'c>;

    fn qdma(&self, func: u8) -> QdmaWindow<'c> {
        Card::qdma(self, func)
    }

    fn shell(&self) -> ShellWindow<'c> {
        Card::shell(self)
    }

    fn dma(&self) -> SimDma<'c> {
        Card::dma(self)
    }

    fn delay(&self) -> SimDelay<'c> {
        Card::delay(self)
    }
}

/// Pool pages are mapped both ways: XDP_TX and redirects send a frame from the page it arrived
/// in.
const PAGE_DIR: Direction = Direction::Bidirectional;

/// A frame passed to the host's stack, with the page it lies in (the host's until the caller has
/// read it, [`ModelHost::drain_received`]).
#[derive(Debug)]
pub struct Received {
    /// The port that received it.
    pub port: u8,
    /// Its RX queue.
    pub qid: u16,
    /// The pool its page belongs to.
    pub mem: QMem,
    /// The page.
    pub page: DmaPage,
    /// Where the frame lies in the page.
    pub at: FrameAt,
    /// The hash the driver gave it.
    pub hash: Option<SkbHash>,
}

impl Received {
    /// The frame's bytes.
    #[must_use]
    pub fn data(&self) -> &[u8] {
        frame_bytes(&self.page, self.at)
    }

    /// The metadata a program left in front of the frame (`bpf_xdp_adjust_meta`; empty when
    /// none, or if `at` lies outside the page).
    #[must_use]
    pub fn meta(&self) -> &[u8] {
        meta_bytes(&self.page, self.at)
    }
}

/// The metadata in front of the frame `at` in `page` (empty if there is none, or if `at` lies
/// outside it).
fn meta_bytes(page: &DmaPage, at: FrameAt) -> &[u8] {
    let end = usize::from(at.offset);
    let start = end.saturating_sub(usize::from(at.meta));
    page.bytes().get(start..end).unwrap_or(&[])
}

/// The bytes of the frame `at` in `page` (empty if `at` lies outside it).
fn frame_bytes(page: &DmaPage, at: FrameAt) -> &[u8] {
    let start = usize::from(at.offset);
    page.bytes()
        .get(start..start + usize::from(at.len))
        .unwrap_or(&[])
}

/// A frame a program redirected, waiting for the caller.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Redirect {
    /// The port whose program redirected it.
    pub from: u8,
    /// The RX queue it arrived on.
    pub qid: u16,
    /// The target the program named (a devmap or xskmap entry), if any.
    pub target: Option<u32>,
    /// The frame, for `Port::xdp_xmit`, [`ModelHost::frame_data`] or
    /// [`ModelHost::return_frame`].
    pub frame: u32,
}

/// A redirected frame while the host holds it: its page stays its pool's.
struct HeldFrame {
    page: DmaPage,
    at: FrameAt,
    mem: QMem,
}

/// A packet buffer: one to-device page, mapped while it lives.
struct Packet {
    page: DmaPage,
    len: usize,
}

/// Slots that hand out numbers and take them back.
struct Slots<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Slots<T> {
    const fn new() -> Self {
        Self {
            items: Vec::new(),
            free: Vec::new(),
        }
    }

    fn insert(&mut self, v: T) -> u32 {
        if let Some(i) = self.free.pop() {
            if let Some(slot) = self.items.get_mut(i as usize) {
                *slot = Some(v);
                return i;
            }
        }
        self.items.push(Some(v));
        // CAST: more than 4 G slots would exhaust memory first.
        (self.items.len() - 1) as u32
    }

    fn get(&self, i: u32) -> Option<&T> {
        self.items.get(i as usize)?.as_ref()
    }

    fn take(&mut self, i: u32) -> Option<T> {
        let v = self.items.get_mut(i as usize)?.take()?;
        self.free.push(i);
        Some(v)
    }

    fn live(&self) -> usize {
        self.items.len() - self.free.len()
    }
}

/// What every port of one model host shares.
struct Net<P, D: DmaMemory> {
    /// Each pool, and the RX queue it serves.
    pools: Vec<Option<PagePool<'static, D>>>,
    pool_queue: Vec<u16>,
    /// The redirect targets a program may name (a devmap's entries); `None`: any.
    targets: Option<Vec<u32>>,
    /// Frames a target still takes, for the targets that have a limit.
    room: BTreeMap<u32, usize>,
    /// The pools' slow-path bulk and buffer size.
    pool_bulk: Option<usize>,
    pool_bufs: RxBufSizes,
    /// Page allocations of the pools still to refuse ([`ModelHost::refuse_page_allocs`]).
    refuse_allocs: u32,
    packets: Slots<Packet>,
    /// Packet buffers of completed packets, still mapped, for the next packets.
    spare: Vec<DmaPage>,
    frames: Slots<HeldFrame>,
    received: Vec<Received>,
    redirects: Vec<Redirect>,
    programs: Vec<P>,
    /// Packet buffers taken from the HAL (in flight or spare).
    buffers: u64,
    /// AF_XDP sockets by (port, queue index).
    xsk: BTreeMap<(u8, u16), XskSocket>,
}

/// Where the pages of a model host are, for a leak check.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelCensus {
    /// Pools still alive (queues running).
    pub pools: usize,
    /// Frames received and not yet released.
    pub received: usize,
    /// Redirected frames the host holds.
    pub frames: usize,
    /// Packets not yet completed.
    pub packets: usize,
    /// Packet buffers taken from the HAL and not freed (in flight or kept for the next packet).
    pub buffers: u64,
}

/// The port's host over the model card: one per port, sharing one `Net` among the ports of
/// a card (made with [`ModelHost::new`], then [`ModelHost::for_port`]). `P` is the type of the
/// XDP programs the caller attaches, `A` how it reaches the card.
pub struct ModelHost<P, A: ModelAccess> {
    access: A,
    dma: A::Dma,
    port: u8,
    net: Rc<RefCell<Net<P, A::Dma>>>,
    grace: TakingTurns,
}

/// The model host of a card reached directly.
pub type CardHost<'c, P> = ModelHost<P, &'c Card>;

impl<P, A: ModelAccess> Clone for ModelHost<P, A> {
    fn clone(&self) -> Self {
        Self {
            access: self.access.clone(),
            dma: self.dma,
            port: self.port,
            net: Rc::clone(&self.net),
            grace: TakingTurns,
        }
    }
}

impl<P: RawXdpProgram, A: ModelAccess> ModelHost<P, A> {
    /// The host of port 0 of the card `access` reaches (the ports' DMA memory is the card's).
    #[must_use]
    pub fn new(access: A) -> Self {
        let net = Net {
            pools: Vec::new(),
            pool_queue: Vec::new(),
            targets: None,
            room: BTreeMap::new(),
            pool_bulk: None,
            pool_bufs: RxBufSizes::default(),
            refuse_allocs: 0,
            packets: Slots::new(),
            spare: Vec::new(),
            frames: Slots::new(),
            received: Vec::new(),
            redirects: Vec::new(),
            programs: Vec::new(),
            buffers: 0,
            xsk: BTreeMap::new(),
        };
        Self {
            dma: access.dma(),
            access,
            port: 0,
            net: Rc::new(RefCell::new(net)),
            grace: TakingTurns,
        }
    }

    /// The host of `port`, sharing pools, frames and programs with `self`.
    #[must_use]
    pub fn for_port(&self, port: u8) -> Self {
        Self { port, ..self.clone() }
    }

    /// The register windows of function `func`, with no lock (one thread drives the card).
    #[must_use]
    pub fn regs(&self, func: u8) -> HostRegs<Self> {
        HostRegs::<Self> {
            qdma: self.access.qdma(func),
            shell: self.access.shell(),
            lock: Unshared::NEW,
        }
    }

    /// A delay for the port's control path.
    #[must_use]
    pub fn delay(&self) -> A::Delay {
        self.access.delay()
    }

    /// The redirect targets programs may name from now on (the entries of their devmaps and
    /// xskmaps); a redirect to any other fails as `xdp_do_redirect` does for a missing entry,
    /// and the driver counts it. Until called, every target is taken.
    pub fn set_targets(&self, targets: &[u32]) {
        self.net.borrow_mut().targets = Some(targets.to_vec());
    }

    /// From now on, target `target` takes `room` more frames; a redirect to it beyond them
    /// fails as one to a full AF_XDP ring does, and the driver counts it.
    pub fn limit_target(&self, target: u32, room: usize) {
        self.net.borrow_mut().room.insert(target, room);
    }

    /// The page pools made from now on take `bulk` pages from the HAL per slow-path call (the
    /// core's default when `None`) and serve the RX buffers of `bufs` (the ports'
    /// `QueueTuning::bufs`): queue `q`'s pool syncs a buffer of `bufs.for_queue(q)`.
    pub fn set_pool_config(&self, bulk: Option<usize>, bufs: RxBufSizes) {
        let mut net = self.net.borrow_mut();
        net.pool_bulk = bulk;
        net.pool_bufs = bufs;
    }

    /// Refuses the next `n` page allocations of this host's pools, as a page pool out of
    /// memory does: a queue filled meanwhile (by its start, a restart or a poll's refill)
    /// keeps those slots empty and counts `refill_alloc_failures`, and a later poll fills them.
    /// A fault of the host, so it works over any `ModelAccess` (the model card's own fault
    /// knobs reach only its DMA memory).
    pub fn refuse_page_allocs(&self, n: u32) {
        self.net.borrow_mut().refuse_allocs = n;
    }

    /// Attaches a program; the handle is what `Port::poll` takes.
    pub fn attach(&self, prog: P) -> u16 {
        let mut net = self.net.borrow_mut();
        net.programs.push(prog);
        // CAST: a caller attaches a handful of programs.
        (net.programs.len() - 1) as u16
    }

    /// Runs `f` on attached program `id` (its maps, its counters); `None` for an unknown id.
    pub fn with_program<R>(&self, id: u16, f: impl FnOnce(&mut P) -> R) -> Option<R> {
        self.net.borrow_mut().programs.get_mut(usize::from(id)).map(f)
    }

    /// A packet of the stack with `data`, for `Port::xmit`; `None` if no page is left or `data`
    /// does not fit one.
    pub fn packet(&self, data: &[u8]) -> Option<u32> {
        self.packet_with(data.len(), |b| b.copy_from_slice(data))
    }

    /// A packet of the stack of `len` bytes that `fill` writes in place, for `Port::xmit`;
    /// `None` if no page is left or `len` does not fit one. A packet the port refuses goes
    /// back with `Host::skb_done`.
    pub fn packet_with(&self, len: usize, fill: impl FnOnce(&mut [u8])) -> Option<u32> {
        let mut net = self.net.borrow_mut();
        let mut page = match net.spare.pop() {
            Some(p) => p,
            None => {
                let mem = self.dma.alloc_page().ok()?;
                let page = self
                    .dma
                    .map_page(mem, Direction::ToDevice)
                    .map_err(|(mem, _)| self.dma.free_page(mem))
                    .ok()?;
                net.buffers += 1;
                page
            }
        };
        let Some(room) = page.bytes_mut().get_mut(..len) else {
            net.spare.push(page);
            return None;
        };
        fill(room);
        self.dma.sync_for_device(&page, 0, len, Direction::ToDevice);
        Some(net.packets.insert(Packet { page, len }))
    }

    /// Shows `f` every frame this host's port passed to the stack since the last call, oldest
    /// first, and gives each page back to its pool after, as a socket reading them would;
    /// returns how many there were.
    pub fn drain_received(&self, f: impl FnMut(&Received)) -> usize {
        self.look_received(f);
        self.release_received(usize::MAX)
    }

    /// Shows `f` every frame this host's port passed to the stack that the stack still holds,
    /// oldest first; nothing is given back.
    pub fn look_received(&self, mut f: impl FnMut(&Received)) {
        let net = self.net.borrow();
        for r in net.received.iter().filter(|r| r.port == self.port) {
            f(r);
        }
    }

    /// The stack is done with the `n` oldest frames it holds from this host's port: their pages
    /// go back to their pools. Returns how many there were.
    pub fn release_received(&self, n: usize) -> usize {
        let mine: Vec<Received> = {
            let mut net = self.net.borrow_mut();
            let mut taken = 0;
            let (mine, others) = core::mem::take(&mut net.received).into_iter().partition(|r| {
                let take = r.port == self.port && taken < n;
                taken += usize::from(take);
                take
            });
            net.received = others;
            mine
        };
        let n = mine.len();
        for r in mine {
            self.release(r);
        }
        n
    }

    /// The stack is done with a received frame: its page goes back to its pool.
    fn release(&self, r: Received) {
        let dirty = written(r.at);
        let mut net = self.net.borrow_mut();
        match net.pools.get_mut(usize::from(r.mem)).and_then(Option::as_mut) {
            Some(pool) => pool.return_from_os(r.page, dirty),
            None => release_to_hal(&self.dma, PAGE_DIR, r.page),
        }
    }

    /// Frames this host's port redirected since the last call, oldest first.
    pub fn take_redirects(&self) -> Vec<Redirect> {
        let mut net = self.net.borrow_mut();
        let (mine, others) = core::mem::take(&mut net.redirects)
            .into_iter()
            .partition(|r| r.from == self.port);
        net.redirects = others;
        mine
    }

    /// A copy of a held redirected frame's bytes (empty for an unknown frame).
    #[must_use]
    pub fn frame_data(&self, frame: u32) -> Vec<u8> {
        self.held_copy(frame, frame_bytes)
    }

    /// A copy of the metadata a program left in front of a held redirected frame
    /// (`bpf_xdp_adjust_meta`; empty when none, or for an unknown frame).
    #[must_use]
    pub fn frame_meta(&self, frame: u32) -> Vec<u8> {
        self.held_copy(frame, meta_bytes)
    }

    /// A copy of the part `part` picks of held frame `frame`'s page (empty for an unknown frame).
    fn held_copy(&self, frame: u32, part: fn(&DmaPage, FrameAt) -> &[u8]) -> Vec<u8> {
        let net = self.net.borrow();
        net.frames
            .get(frame)
            .map(|f| part(&f.page, f.at).to_vec())
            .unwrap_or_default()
    }

    /// Gives a held redirected frame back: its page goes home to its pool.
    pub fn return_frame(&self, frame: u32) {
        let mut net = self.net.borrow_mut();
        let Some(f) = net.frames.take(frame) else {
            return;
        };
        let dirty = written(f.at);
        match net.pools.get_mut(usize::from(f.mem)).and_then(Option::as_mut) {
            Some(pool) => pool.recycle(f.page, dirty),
            None => release_to_hal(&self.dma, PAGE_DIR, f.page),
        }
    }

    /// Where the host's pages are.
    #[must_use]
    pub fn census(&self) -> ModelCensus {
        let net = self.net.borrow();
        ModelCensus {
            pools: net.pools.iter().flatten().count(),
            received: net.received.len(),
            frames: net.frames.live(),
            packets: net.packets.live(),
            buffers: net.buffers,
        }
    }

    /// Frees the kept packet buffers (after the ports are gone).
    pub fn free_spare(&self) {
        let mut net = self.net.borrow_mut();
        for page in core::mem::take(&mut net.spare) {
            release_to_hal(&self.dma, Direction::ToDevice, page);
            net.buffers -= 1;
        }
    }
}

/// The page census of one pool: where each page it took from the HAL is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PoolCensus {
    /// Pages the pool took from the HAL and did not give back.
    pub live: u64,
    /// In the pool's cache.
    pub in_pool: u64,
    /// In its queue's RX ring, on its XDP_TX ring or parked there (the port's count).
    pub in_rings: u64,
    /// Passed to the stack and not yet read (the host's count).
    pub received: u64,
    /// Redirected, held by the host or on a redirect-in ring (the host's count).
    pub redirected: u64,
}

impl PoolCensus {
    /// Whether every live page is somewhere.
    #[must_use]
    pub const fn adds_up(&self) -> bool {
        self.in_pool + self.in_rings + self.received + self.redirected == self.live
    }
}

/// A page census that does not add up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CensusError {
    /// The port runs a pool the host does not know.
    UnknownPool(QMem),
    /// The stack holds another number of a pool's pages than the RX path handed it minus what
    /// it gave back.
    Stack {
        /// The pool.
        mem: QMem,
        /// Frames the RX path passed to the stack.
        to_os: u64,
        /// Pages the stack gave back.
        returned: u64,
        /// Pages the stack holds.
        held: u64,
    },
    /// A pool's live pages are not all somewhere.
    Lost {
        /// The pool.
        mem: QMem,
        /// Where its pages were found.
        census: PoolCensus,
    },
}

impl core::fmt::Display for CensusError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::UnknownPool(m) => write!(f, "pool {m}: the port runs it, the host does not know it"),
            Self::Stack {
                mem,
                to_os,
                returned,
                held,
            } => write!(
                f,
                "pool {mem}: the RX path passed {to_os} frames, the stack gave back {returned}, but it holds {held}"
            ),
            Self::Lost { mem, census } => write!(f, "pool {mem}: pages do not add up: {census:?}"),
        }
    }
}

impl<P: RawXdpProgram, A: ModelAccess> ModelHost<P, A> {
    /// The census of every running pool, from the port's ring holdings (`Port::holdings`, of
    /// every port over this host's card) and the host's own counts.
    ///
    /// # Errors
    ///
    /// The first pool whose pages do not add up, or whose stack count differs from what the RX
    /// path handed over and the stack gave back: a lost or doubled page.
    pub fn check_census(&self, holdings: &[(QMem, RingHoldings)]) -> Result<Vec<PoolCensus>, CensusError> {
        let net = self.net.borrow();
        let mut out = Vec::new();
        for &(mem, h) in holdings {
            let Some(pool) = net.pools.get(usize::from(mem)).and_then(Option::as_ref) else {
                return Err(CensusError::UnknownPool(mem));
            };
            let stats = pool.stats();
            let received = net.received.iter().filter(|r| r.mem == mem).count() as u64;
            let with_os = h.to_os.checked_sub(stats.os_returns);
            if with_os != Some(received) {
                return Err(CensusError::Stack {
                    mem,
                    to_os: h.to_os,
                    returned: stats.os_returns,
                    held: received,
                });
            }
            let c = PoolCensus {
                live: stats.live_pages(),
                in_pool: pool.available() as u64,
                in_rings: h.in_rx_ring + h.in_tx_flight + h.tx_parked,
                received,
                redirected: net.frames.items.iter().flatten().filter(|f| f.mem == mem).count() as u64,
            };
            if !c.adds_up() {
                return Err(CensusError::Lost { mem, census: c });
            }
            out.push(c);
        }
        Ok(out)
    }
}

/// Bytes of a page after the RX headroom the CPU may have written, for a frame at `at`.
fn written(at: FrameAt) -> usize {
    (usize::from(at.offset) + usize::from(at.len)).saturating_sub(onic_core::config::RX_HEADROOM as usize)
}

impl<P: RawXdpProgram, A: ModelAccess> Host for ModelHost<P, A> {
    type Qdma = A::Qdma;
    type Shell = A::Shell;
    type CardLock = Unshared;
    type Dma = A::Dma;
    type Delay = A::Delay;
    type QMem = QMem;
    type Page = DmaPage;
    type Skb = u32;
    type XdpFrame = u32;
    type Prog = u16;
    type Napi = ();
    type Grace = TakingTurns;

    fn dma(&self) -> &A::Dma {
        &self.dma
    }

    fn grace(&self) -> &TakingTurns {
        &self.grace
    }

    fn try_vec<T>(&self, n: usize, f: impl FnMut(usize) -> T) -> Option<Vec<T>> {
        Some((0..n).map(f).collect())
    }

    fn try_box_hasher(&self) -> Option<Box<PublishedHasher>> {
        Some(Box::new(PublishedHasher::new(&RssKey::DEFAULT)))
    }

    /// A queue on an XSK pool gets no page pool, as in the kernel module (its memory's slot stays
    /// empty: a page asked of it is refused).
    fn qmem_new(&self, qid: u16, _pages: u32, source: SourceKind) -> Result<QMem, i32> {
        let mut net = self.net.borrow_mut();
        let mut cfg = PoolConfig::rx(PAGE_DIR, net.pool_bufs.for_queue(qid).bytes());
        if let Some(bulk) = net.pool_bulk {
            cfg.bulk = bulk;
        }
        let pool = (source == SourceKind::Pages).then(|| PagePool::new(self.dma, cfg, None));
        let mem = QMem::try_from(net.pools.len()).map_err(|_| -1)?;
        net.pools.push(pool);
        net.pool_queue.push(qid);
        Ok(mem)
    }

    /// The pool goes, with the pages in it; pages still out come home to the HAL.
    fn qmem_free(&self, mem: QMem) {
        let pool = self
            .net
            .borrow_mut()
            .pools
            .get_mut(usize::from(mem))
            .and_then(Option::take);
        drop(pool);
    }

    fn page_alloc(&self, mem: QMem) -> Option<DmaPage> {
        let mut net = self.net.borrow_mut();
        if net.refuse_allocs > 0 {
            net.refuse_allocs -= 1;
            return None;
        }
        net.pools.get_mut(usize::from(mem))?.as_mut()?.alloc()
    }

    fn page_put(&self, mem: QMem, page: DmaPage, dirty: usize, _direct: bool) {
        let mut net = self.net.borrow_mut();
        match net.pools.get_mut(usize::from(mem)).and_then(Option::as_mut) {
            Some(pool) => pool.recycle(page, dirty),
            None => release_to_hal(&self.dma, PAGE_DIR, page),
        }
    }

    fn page_sync(&self, page: &DmaPage, offset: usize, len: usize, for_cpu: bool) {
        if for_cpu {
            self.dma.sync_for_cpu(page, offset, len, PAGE_DIR);
        } else {
            self.dma.sync_for_device(page, offset, len, PAGE_DIR);
        }
    }

    fn pool_stats(&self, mem: QMem) -> PoolStats {
        self.net
            .borrow()
            .pools
            .get(usize::from(mem))
            .and_then(Option::as_ref)
            .map(PagePool::stats)
            .unwrap_or_default()
    }

    fn rx_deliver(
        &self,
        mem: QMem,
        _napi: (),
        page: DmaPage,
        at: FrameAt,
        qid: u16,
        hash: Option<SkbHash>,
    ) -> Result<(), DmaPage> {
        self.net.borrow_mut().received.push(Received {
            port: self.port,
            qid,
            mem,
            page,
            at,
            hash,
        });
        Ok(())
    }

    fn map_skb(&self, skb: u32) -> Option<Mapped> {
        let net = self.net.borrow();
        let p = net.packets.get(skb)?;
        Some(Mapped {
            dma: p.page.dma_addr(),
            len: p.len,
        })
    }

    fn map_xdp_frame(&self, frame: u32) -> Option<Mapped> {
        let net = self.net.borrow();
        let f = net.frames.get(frame)?;
        Some(Mapped {
            dma: DmaAddr::new(f.page.dma_addr().get() + u64::from(f.at.offset)),
            len: usize::from(f.at.len),
        })
    }

    /// Packet buffers stay mapped while they live, and redirected frames lie in pool pages
    /// mapped for as long as the pool holds them: nothing to end here.
    fn unmap(&self, _mapped: Mapped) {}

    fn skb_done(&self, skb: u32, _napi_budget: Option<u32>) {
        let mut net = self.net.borrow_mut();
        if let Some(p) = net.packets.take(skb) {
            net.spare.push(p.page);
        }
    }

    fn xdp_frame_return(&self, frame: u32) {
        self.return_frame(frame);
    }

    fn xdp_run(&self, prog: u16, _mem: QMem, buff: &mut XdpBuff<'_>, _hash: Option<XdpRxHash>) -> u32 {
        let mut net = self.net.borrow_mut();
        match net.programs.get_mut(usize::from(prog)) {
            Some(p) => p.run_raw(buff),
            // An unknown handle aborts, as a program that faults does.
            None => 0,
        }
    }

    fn xdp_redirect(
        &self,
        _prog: u16,
        mem: QMem,
        page: DmaPage,
        at: FrameAt,
        target: Option<u32>,
    ) -> Result<(), DmaPage> {
        let mut net = self.net.borrow_mut();
        let known = match (&net.targets, target) {
            (None, _) => true,
            (Some(list), Some(t)) => list.contains(&t),
            (Some(_), None) => false,
        };
        if !known {
            return Err(page);
        }
        let full = target.and_then(|t| net.room.get_mut(&t)).is_some_and(|room| {
            let left = *room;
            *room = left.saturating_sub(1);
            left == 0
        });
        if full {
            return Err(page);
        }
        let qid = net.pool_queue.get(usize::from(mem)).copied().unwrap_or(0);
        let frame = net.frames.insert(HeldFrame { page, at, mem });
        let from = self.port;
        net.redirects.push(Redirect {
            from,
            qid,
            target,
            frame,
        });
        Ok(())
    }

    fn xsk_bound(&self, qid: u16) -> Option<u32> {
        let net = self.net.borrow();
        let s = net.xsk.get(&(self.port, qid))?;
        // The socket's headroom leaves room in its chunk (`XskSocket::new`).
        Some(s.chunk_size() - u32::from(s.headroom()))
    }

    fn xsk_alloc(&self, qid: u16) -> Option<XskBuf<DmaPage>> {
        self.xsk_mut(qid, |s, dma| s.alloc(dma)).flatten()
    }

    fn xsk_free(&self, qid: u16, buf: XskBuf<DmaPage>) {
        self.xsk_put(qid, buf);
    }

    fn xsk_redirect(
        &self,
        _prog: u16,
        qid: u16,
        buf: XskBuf<DmaPage>,
        at: FrameAt,
        target: Option<u32>,
    ) -> Result<(), XskBuf<DmaPage>> {
        self.xsk_deliver(qid, buf, at, target)
    }

    fn rx_deliver_copy(
        &self,
        mem: QMem,
        _napi: (),
        frame: &[u8],
        meta: u8,
        qid: u16,
        hash: Option<SkbHash>,
    ) -> bool {
        self.deliver_copy((mem, qid), frame, meta, hash)
    }

    fn xsk_tx_take(&self, qid: u16, out: &mut [XskTxDesc]) -> usize {
        self.xsk_mut(qid, |s, dma| {
            out.iter_mut()
                .map_while(|o| s.tx_take(dma).map(|d| *o = d))
                .count()
        })
        .unwrap_or(0)
    }

    fn xsk_tx_done(&self, qid: u16, desc: XskTxDesc) {
        self.xsk_mut(qid, |s, _| s.tx_done(desc));
    }
}
