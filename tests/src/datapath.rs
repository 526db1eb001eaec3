//! A datapath harness: a model card, one or two PCI functions brought up by the driver, queue pairs
//! with their pools, an "OS" that holds passed pages and transmits its own frames, and the census
//! checks the datapath tests run after every step.
//!
//! ```
//! use onic_tests::datapath::{Harness, Setup};
//!
//! let setup = Setup::new().queues(4).ring_size_idx(1);
//! let card = setup.card();
//! let rings = setup.recycle_rings();
//! let mut h = Harness::new(&card, &setup, &rings);
//! h.inject(0, 7, 100); // port 0, flow 7, 100 bytes
//! h.drain(); // settle and poll until quiet, checking the page census on the way
//! h.check_delivery();
//! h.check_pages();
//! h.teardown(); // every page and ring back, no violation
//! ```
//!
//! The queues own their slot storage (boxed slices). The pools borrow their recycle rings, which
//! the caller owns next to the card ([`Setup::recycle_rings`]) for as long as the harness lives.

use std::cell::RefCell;
use std::collections::BTreeSet;

use onic_core::config::{BufSizeIdx, DeviceConfig, RingSizeIdx};
use onic_core::queue::pair::PairPoll;
use onic_core::queue::pool::{release_to_hal, PageCounts, PagePool, RecycleRing};
use onic_core::queue::rx::{RxFrame, RxOptions};
use onic_core::queue::tx::TxError;
use onic_core::xdp::{
    DevMap, RawXdpProgram, RedirectTarget, Redirected, TxTarget, XdpAction, XdpBuff, XdpDispatch, XdpFrame,
    XdpProgram,
};
use onic_core::{Device, PassInfo, RxContext, XdpRxq};
use onic_embed::done::FrameDone;
use onic_embed::frame::Frame;
use onic_embed::set::{build_pair, census, Pair, PairSpec, QueueSet, Slots};
use onic_embed::sink::OsQueue;
use onic_hal::layout::desc::CmptEntrySize;
use onic_hal::regs::cmac::{ADAPTER_STATS, CMAC_STATS};
use onic_hal::{Direction, DmaMemory, DmaPage};
use onic_sim::{Card, CardConfig, QdmaWindow, ShellWindow, SimDma, Wire};

/// Offset of the frame id in a harness frame (after Ethernet, IPv4 and the 4 port bytes).
pub const ID_OFFSET: usize = 14 + 20 + 4;
/// Shortest harness frame (ETH_ZLEN).
pub const MIN_FRAME: usize = 60;

/// What the policy of [`Harness::poll`] decides for a frame (as an XDP verdict).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Copy the id and drop (XDP_DROP).
    Drop,
    /// Keep the page with the OS (XDP_PASS).
    Pass,
    /// Send it back out on the same pair (XDP_TX).
    Tx,
    /// Send it out on the next pair of the same function (XDP_REDIRECT).
    Redirect,
}

/// How the harness decides an [`Action`] from a frame id.
pub type Policy = fn(u64) -> Action;

/// Every frame is dropped after its id is recorded.
pub fn drop_all(_: u64) -> Action {
    Action::Drop
}

/// Every frame goes to the OS.
pub fn pass_all(_: u64) -> Action {
    Action::Pass
}

/// A mix of every action, decided by the id.
pub fn mixed(id: u64) -> Action {
    match id % 8 {
        0..=3 => Action::Drop,
        4 | 5 => Action::Pass,
        6 => Action::Tx,
        _ => Action::Redirect,
    }
}

/// Harness settings (a builder).
#[derive(Clone, Debug)]
pub struct Setup {
    /// Queue pairs per function.
    pub queues: u16,
    /// Ring-size index of every ring.
    pub ring_size_idx: u8,
    /// C2H buffer-size index.
    pub buf_idx: u8,
    /// Completion entry size.
    pub cmpt_entry: CmptEntrySize,
    /// Largest frame the shell passes (model) and the driver expects.
    pub max_frame_len: usize,
    /// PCI functions brought up (1 or 2); function f owns port f.
    pub functions: u8,
    /// What is plugged into the ports.
    pub wire: Wire,
    /// Pool slow-path bulk.
    pub bulk: usize,
    /// Sink policy.
    pub policy: Policy,
    /// Whether RX queues compare the device's C2H consumer index with theirs
    /// ([`RxOptions::check_c2h_status`]).
    pub c2h_status_check: bool,
    /// Polls without progress before an RX queue gives up ([`RxOptions::stall_polls`]).
    pub stall_polls: u16,
}

impl Default for Setup {
    fn default() -> Self {
        Self::new()
    }
}

impl Setup {
    /// One function, one queue pair, 64-entry rings, the default buffer, drop everything.
    #[must_use]
    pub fn new() -> Self {
        Self {
            queues: 1,
            ring_size_idx: 1,
            buf_idx: onic_core::config::RX_BUF_SIZE_INDEX_DEFAULT,
            cmpt_entry: CmptEntrySize::B8,
            max_frame_len: 1514,
            functions: 1,
            wire: Wire::Open,
            bulk: 64,
            policy: drop_all,
            c2h_status_check: true,
            stall_polls: onic_core::queue::rx::RX_STALL_POLLS_DEFAULT,
        }
    }

    /// Queue pairs per function.
    #[must_use]
    pub fn queues(mut self, n: u16) -> Self {
        self.queues = n;
        self
    }

    /// Ring-size index of every ring.
    #[must_use]
    pub fn ring_size_idx(mut self, i: u8) -> Self {
        self.ring_size_idx = i;
        self
    }

    /// C2H buffer-size index.
    #[must_use]
    pub fn buf_idx(mut self, i: u8) -> Self {
        self.buf_idx = i;
        self
    }

    /// Completion entry size.
    #[must_use]
    pub fn cmpt_entry(mut self, e: CmptEntrySize) -> Self {
        self.cmpt_entry = e;
        self
    }

    /// Largest frame.
    #[must_use]
    pub fn max_frame_len(mut self, n: usize) -> Self {
        self.max_frame_len = n;
        self
    }

    /// Functions brought up.
    #[must_use]
    pub fn functions(mut self, n: u8) -> Self {
        self.functions = n;
        self
    }

    /// The wire.
    #[must_use]
    pub fn wire(mut self, w: Wire) -> Self {
        self.wire = w;
        self
    }

    /// Pool slow-path bulk.
    #[must_use]
    pub fn bulk(mut self, n: usize) -> Self {
        self.bulk = n;
        self
    }

    /// Sink policy.
    #[must_use]
    pub fn policy(mut self, p: Policy) -> Self {
        self.policy = p;
        self
    }

    /// Polls without progress before an RX queue gives up.
    #[must_use]
    pub fn stall_polls(mut self, n: u16) -> Self {
        self.stall_polls = n;
        self
    }

    /// Whether RX queues check the device's C2H consumer index.
    #[must_use]
    pub fn c2h_status_check(mut self, on: bool) -> Self {
        self.c2h_status_check = on;
        self
    }

    /// The model card for this setup.
    #[must_use]
    pub fn card(&self) -> Card {
        let mut c = CardConfig::default();
        c.wire = self.wire;
        c.max_frame_len = self.max_frame_len;
        Card::new(c)
    }

    /// Fresh recycle rings for a harness of this setup: one per queue pair of every function.
    #[must_use]
    pub fn recycle_rings(&self) -> Vec<RecycleRing> {
        let pairs = usize::from(self.functions) * usize::from(self.queues);
        (0..pairs).map(|_| RecycleRing::new()).collect()
    }
}

/// A frame the harness hands to a TX queue: an OS buffer, or a page of another pair's pool.
pub type HFrame<'c> = Frame<SimDma<'c>>;

/// The pool type of the harness.
pub type HPool<'c> = PagePool<'c, SimDma<'c>>;
/// The queue-pair type of the harness.
pub type HPair<'c> = Pair<'c, SimDma<'c>, HFrame<'c>>;
/// The device type of the harness.
pub type HDevice<'c> = Device<QdmaWindow<'c>, ShellWindow<'c>>;

/// One brought-up PCI function and its queue pairs.
pub struct Func<'c> {
    /// The device.
    pub dev: HDevice<'c>,
    /// Its queue pairs.
    pub pairs: Vec<HPair<'c>>,
}

/// Runs `f` with the harness's TX completion (OS buffers are freed, pages of other pools go back
/// through their recycle rings) and books the OS buffers it freed.
fn completing<'c, R>(
    rings: &[&RecycleRing],
    os_tx_live: &mut usize,
    dma: SimDma<'c>,
    f: impl FnOnce(&mut FrameDone<'_, SimDma<'c>>) -> R,
) -> R {
    let mut done = FrameDone::new(rings, dma);
    let r = f(&mut done);
    *os_tx_live -= done.counts.os_freed as usize;
    r
}

/// A user redirect target in the style of an AF_XDP ring in copy mode: copies up to `cap`
/// frames, then refuses (the RX path recycles and counts).
#[derive(Debug, Default)]
pub struct CopySink {
    /// Frames copied, in order.
    pub frames: Vec<Vec<u8>>,
    /// Most frames it takes; further ones are refused.
    pub cap: usize,
    /// Flushes seen.
    pub flushes: usize,
}

impl RedirectTarget<DmaPage> for CopySink {
    fn enqueue(&mut self, frame: XdpFrame<DmaPage>) -> Result<Redirected<DmaPage>, XdpFrame<DmaPage>> {
        if self.frames.len() >= self.cap {
            return Err(frame);
        }
        let s = usize::from(frame.offset);
        self.frames
            .push(frame.page.bytes()[s..s + usize::from(frame.len)].to_vec());
        Ok(Redirected::Copied(frame))
    }

    fn flush(&mut self) {
        self.flushes += 1;
    }
}

/// Redirect target numbers of [`Harness::poll_with`].
pub mod targets {
    /// The same queue index on the other function, i.e. out of the other port.
    pub const OTHER_PORT: u32 = 0;
    /// The next queue pair of the same function.
    pub const NEXT_QUEUE: u32 = 1;
    /// The harness's [`super::CopySink`].
    pub const USER_SINK: u32 = 2;
}

/// Wraps a program to record the id of every frame it sees (for [`Harness::check_delivery`])
/// and of every frame it sends back out with XDP_TX (for [`Harness::sent_back`]).
struct Recorder<'p, 'd> {
    inner: &'p mut dyn RawXdpProgram,
    ids: &'d mut Vec<u64>,
    sent: &'d RefCell<Vec<u64>>,
}

impl RawXdpProgram for Recorder<'_, '_> {
    fn run_raw(&mut self, xdp: &mut XdpBuff<'_>) -> u32 {
        let id = frame_id(xdp.data());
        self.ids.push(id);
        let raw = self.inner.run_raw(xdp);
        if raw == XdpAction::Tx.raw() {
            self.sent.borrow_mut().push(id);
        }
        raw
    }
}

/// The program of [`Harness::poll`]: the setup's policy as XDP verdicts; REDIRECT goes to the
/// next queue pair of the same function ([`targets::NEXT_QUEUE`]).
struct PolicyProgram(Policy);

impl XdpProgram for PolicyProgram {
    fn run(&mut self, xdp: &mut XdpBuff<'_>) -> XdpAction {
        match (self.0)(frame_id(xdp.data())) {
            Action::Drop => XdpAction::Drop,
            Action::Pass => XdpAction::Pass,
            Action::Tx => XdpAction::Tx,
            Action::Redirect => xdp.redirect(targets::NEXT_QUEUE),
        }
    }
}

/// A redirect target that records the id of every frame it takes (for
/// [`Harness::sent_back`]).
struct Recorded<'t, 's> {
    inner: &'t mut dyn RedirectTarget<DmaPage>,
    ids: &'s RefCell<Vec<u64>>,
}

impl RedirectTarget<DmaPage> for Recorded<'_, '_> {
    fn enqueue(&mut self, frame: XdpFrame<DmaPage>) -> Result<Redirected<DmaPage>, XdpFrame<DmaPage>> {
        let start = usize::from(frame.offset);
        let id = frame_id(
            frame
                .page
                .bytes()
                .get(start..start + usize::from(frame.len))
                .unwrap_or(&[]),
        );
        let out = self.inner.enqueue(frame);
        if out.is_ok() {
            self.ids.borrow_mut().push(id);
        }
        out
    }

    fn flush(&mut self) {
        self.inner.flush();
    }
}

/// Reads the id of a harness frame (0 for a frame too short to carry one).
#[must_use]
pub fn frame_id(data: &[u8]) -> u64 {
    data.get(ID_OFFSET..ID_OFFSET + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// Builds and starts queue pair `q` of `dev` as `setup` says: rings of `setup.ring_size_idx`, a pool
/// mapping pages `Bidirectional` (XDP_TX may send them back out) with `ring` as its recycle ring,
/// and slot storage on the heap that the queues own.
///
/// # Panics
///
/// If the driver refuses the setup.
pub fn start_pair<'c>(
    card: &'c Card,
    dev: &HDevice<'c>,
    q: u16,
    setup: &Setup,
    ring: &'c RecycleRing,
) -> HPair<'c> {
    let mut delay = card.delay();
    let size = RingSizeIdx::new(setup.ring_size_idx).expect("ring size");
    let buf = BufSizeIdx::new(setup.buf_idx).expect("buffer size");
    let mut spec = PairSpec::new(onic_core::QueueId::new(q), size, buf, Direction::Bidirectional);
    spec.rx.cmpt_entry = setup.cmpt_entry;
    spec.pool.bulk = setup.bulk;
    spec.opts = RxOptions {
        max_frame_len: setup.max_frame_len as u32,
        check_c2h_status: setup.c2h_status_check,
        stall_polls: setup.stall_polls,
        ..RxOptions::for_queue(&spec.rx)
    };
    let mut pair = build_pair(card.dma(), &spec, Slots::for_spec(&spec), Some(ring)).expect("queue pair");
    pair.start(dev, &mut delay).expect("start pair");
    pair
}

/// The harness.
pub struct Harness<'c> {
    /// The model.
    pub card: &'c Card,
    /// The setup it was built from.
    pub setup: Setup,
    /// Brought-up functions.
    pub funcs: Vec<Func<'c>>,
    /// Each pool's recycle ring, by global pair index.
    pub rings: Vec<&'c RecycleRing>,
    /// Pages with the OS: (global pair index of the pool, page).
    pub os_pages: Vec<(usize, DmaPage)>,
    /// OS TX buffers allocated and not yet freed.
    pub os_tx_live: usize,
    /// Ids handed to a sink, in order.
    pub delivered: Vec<u64>,
    /// Ids sent back out by XDP_TX or redirect (queued on a TX ring).
    pub sent_back: Vec<u64>,
    /// Ids injected, per port.
    pub injected: Vec<Vec<u64>>,
    /// OS frames refused by a full TX ring.
    pub os_tx_refused: u64,
    /// OS frames queued.
    pub os_tx_queued: u64,
    /// The user redirect target of [`Harness::poll_with`] (capacity 0 until a test sets one).
    pub user_sink: CopySink,
    /// Metadata of the last frame passed by [`Harness::poll_with`].
    pub last_pass_info: Option<PassInfo>,
    next_id: u64,
}

impl<'c> Harness<'c> {
    /// Brings up the functions and starts every queue pair; pair `q` of function `f` recycles
    /// through `rings[f * queues + q]` (made by [`Setup::recycle_rings`]).
    ///
    /// # Panics
    ///
    /// If the driver refuses the setup or `rings` is not one per pair (a test bug).
    #[must_use]
    pub fn new(card: &'c Card, setup: &Setup, rings: &'c [RecycleRing]) -> Self {
        let mut delay = card.delay();
        let mut funcs = Vec::new();
        let all = usize::from(setup.functions) * usize::from(setup.queues);
        assert_eq!(rings.len(), all, "one recycle ring per queue pair");
        let rings: Vec<&'c RecycleRing> = rings.iter().collect();
        for f in 0..setup.functions {
            let cfg = DeviceConfig::new(f, setup.queues).expect("device config");
            let (dev, _) = Device::init(card.qdma(f), card.shell(), &mut delay, cfg).expect("device init");
            let mut pairs = Vec::new();
            for q in 0..setup.queues {
                let rr = rings[usize::from(f) * usize::from(setup.queues) + usize::from(q)];
                pairs.push(start_pair(card, &dev, q, setup, rr));
            }
            funcs.push(Func { dev, pairs });
        }
        let ports = usize::from(card.config().ports);
        Self {
            card,
            setup: setup.clone(),
            funcs,
            rings,
            os_pages: Vec::new(),
            os_tx_live: 0,
            delivered: Vec::new(),
            sent_back: Vec::new(),
            injected: vec![Vec::new(); ports],
            os_tx_refused: 0,
            os_tx_queued: 0,
            user_sink: CopySink::default(),
            last_pass_info: None,
            next_id: 1,
        }
    }

    /// A fresh IPv4/UDP frame of `len` bytes (at least [`MIN_FRAME`]) whose ports spread it over
    /// the RSS queues; returns (id, bytes).
    pub fn frame(&mut self, flow: u16, len: usize) -> (u64, Vec<u8>) {
        let id = self.next_id;
        self.next_id += 1;
        let len = len.max(MIN_FRAME);
        let mut f = vec![0u8; len];
        f[..6].copy_from_slice(&[0x00, 0x0A, 0x35, 0xAA, 0xBB, 0xCC]);
        f[6..12].copy_from_slice(&[0x00, 0x0A, 0x35, 0x01, 0x02, 0x03]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..34];
        ip.copy_from_slice(&[0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
        f[34..36].copy_from_slice(&flow.to_be_bytes());
        f[36..38].copy_from_slice(&4789u16.to_be_bytes());
        f[ID_OFFSET..ID_OFFSET + 8].copy_from_slice(&id.to_le_bytes());
        for (i, b) in f.iter_mut().enumerate().skip(ID_OFFSET + 8) {
            *b = (id as u8).wrapping_add(i as u8);
        }
        (id, f)
    }

    /// Injects a frame at `port` and records its id.
    pub fn inject(&mut self, port: u8, flow: u16, len: usize) -> u64 {
        let (id, f) = self.frame(flow, len);
        self.card.inject(port, &f);
        self.injected[usize::from(port)].push(id);
        id
    }

    /// Lets the model work, and its completion timers fire.
    pub fn settle(&self) {
        self.card.run_until_idle();
        self.card.advance_time(2_000);
        self.card.run_until_idle();
    }

    fn global(&self, func: usize, q: usize) -> usize {
        func * usize::from(self.setup.queues) + q
    }

    /// Polls pair `q` of function `func` once, running the setup's policy as the XDP program
    /// (see [`Harness::poll_with`]).
    pub fn poll(&mut self, func: usize, q: usize, budget: usize) -> PairPoll {
        let mut prog = PolicyProgram(self.setup.policy);
        self.poll_with(func, q, budget, Some(&mut prog))
    }

    /// Polls pair `q` of function `func` once, running `prog` (none: every
    /// frame goes to the OS). PASS pages go to the OS list; the redirect table has the targets of
    /// [`targets`]: the other port's queue `q`, the next queue of this function, the
    /// [`CopySink`]. The RX hash is computed with the default key.
    pub fn poll_with(
        &mut self,
        func: usize,
        q: usize,
        budget: usize,
        prog: Option<&mut dyn RawXdpProgram>,
    ) -> PairPoll {
        let nq = usize::from(self.setup.queues);
        let me = self.global(func, q);
        let other_port = (self.funcs.len() > 1).then(|| self.global(1 - func.min(1), q));
        let next_queue = (nq > 1).then(|| self.global(func, (q + 1) % nq));
        let (devs, pair_lists): (Vec<&HDevice<'c>>, Vec<&mut Vec<HPair<'c>>>) =
            self.funcs.iter_mut().map(|f| (&f.dev, &mut f.pairs)).unzip();
        let dbs: Vec<_> = devs.iter().map(|d| d.doorbells()).collect();
        let mut flat: Vec<Option<&mut HPair<'c>>> = pair_lists
            .into_iter()
            .flat_map(|l| l.iter_mut().map(Some))
            .collect();
        let pair = flat[me].take().expect("polled pair");
        let mut port_target = other_port
            .and_then(|i| flat[i].take())
            .map(|p| TxTarget::new(&mut p.tx, &dbs[1 - func.min(1)]));
        let mut queue_target = next_queue
            .and_then(|i| flat[i].take())
            .map(|p| TxTarget::new(&mut p.tx, &dbs[func]));
        let sent = RefCell::new(std::mem::take(&mut self.sent_back));
        let mut port_target = port_target.as_mut().map(|t| Recorded { inner: t, ids: &sent });
        let mut queue_target = queue_target.as_mut().map(|t| Recorded { inner: t, ids: &sent });
        let mut map: DevMap<'_, DmaPage, 3> = DevMap::new();
        if let Some(t) = port_target.as_mut() {
            let _ = map.insert(targets::OTHER_PORT, t);
        }
        if let Some(t) = queue_target.as_mut() {
            let _ = map.insert(targets::NEXT_QUEUE, t);
        }
        let _ = map.insert(targets::USER_SINK, &mut self.user_sink);
        // The program's wrapper records every frame; without a program, the OS sink does.
        let (mut pass_ids, mut prog_ids) = if prog.is_some() {
            (None, Some(&mut self.delivered))
        } else {
            (Some(&mut self.delivered), None)
        };
        let last_info = &mut self.last_pass_info;
        let mut pass = OsQueue::observed(&mut self.os_pages, me, |f: &RxFrame<DmaPage>, info| {
            if let Some(ids) = pass_ids.as_mut() {
                ids.push(frame_id(f.data()));
            }
            *last_info = Some(info);
        });
        let mut recorder = prog.zip(prog_ids.take()).map(|(inner, ids)| Recorder {
            inner,
            ids,
            sent: &sent,
        });
        let hasher = onic_core::rss::ShellHasher::default();
        let mut ctx = RxContext {
            sink: &mut pass,
            rxq: XdpRxq {
                queue_index: q as u16,
                port: func as u8,
            },
            dispatch: XdpDispatch {
                prog: recorder.as_mut().map(|r| r as &mut dyn RawXdpProgram),
                redirect: &mut map,
                origin: me as u32,
                hasher: Some(&hasher),
            },
        };
        let out = completing(&self.rings, &mut self.os_tx_live, self.card.dma(), |done| {
            pair.poll(budget, &dbs[func], &mut ctx, done)
        });
        self.sent_back = sent.into_inner();
        out
    }

    /// Settles and polls every pair through the XDP path with `prog` until nothing is pending,
    /// checking the page census on the way.
    ///
    /// # Panics
    ///
    /// If the datapath does not quiesce.
    pub fn drain_xdp(&mut self, prog: &mut dyn RawXdpProgram) {
        for _ in 0..10_000 {
            self.settle();
            let mut busy = false;
            for f in 0..self.funcs.len() {
                for q in 0..self.funcs[f].pairs.len() {
                    let out = self.poll_with(f, q, 64, Some(&mut *prog));
                    busy |= !out.rx.armed || out.rx.more || out.rx.done > 0 || out.tx.completed > 0;
                    busy |= self.funcs[f].pairs[q].tx.in_flight() > 0;
                }
            }
            self.check_pages();
            if !busy {
                return;
            }
        }
        panic!("datapath did not quiesce");
    }

    /// Reclaims the TX queue of pair `q` of function `func` (the OS's transmit path does that).
    pub fn reclaim(&mut self, func: usize, q: usize) {
        let pair = &mut self.funcs[func].pairs[q];
        completing(&self.rings, &mut self.os_tx_live, self.card.dma(), |done| {
            pair.tx.reclaim(done)
        });
    }

    /// The OS transmits `frames` on pair `q` of function `func` as one xmit-more batch; frames
    /// refused by a full ring are freed and counted. Returns the ids queued.
    pub fn transmit(&mut self, func: usize, q: usize, frames: &[(u64, Vec<u8>)]) -> Vec<u64> {
        let dma = self.card.dma();
        self.reclaim(func, q);
        let Func { dev, pairs } = &mut self.funcs[func];
        let db = dev.doorbells();
        let tx = &mut pairs[q].tx;
        let mut queued = Vec::new();
        for (i, (id, data)) in frames.iter().enumerate() {
            let mut page = dma
                .map_page(dma.alloc_page().expect("page"), Direction::ToDevice)
                .expect("map");
            page.bytes_mut()[..data.len()].copy_from_slice(data);
            dma.sync_for_device(&page, 0, data.len(), Direction::ToDevice);
            self.os_tx_live += 1;
            let f = HFrame::Os {
                page,
                len: data.len(),
                dma,
            };
            match tx.xmit_os(&db, f, i + 1 < frames.len()) {
                Ok(()) => {
                    self.os_tx_queued += 1;
                    queued.push(*id);
                }
                Err(e) => {
                    assert!(matches!(e, TxError::Full(_)), "unexpected TX error");
                    self.os_tx_refused += 1;
                    completing(&self.rings, &mut self.os_tx_live, dma, |done| {
                        done.finish(e.into_inner())
                    });
                }
            }
        }
        // xmit-more: the batch ended, so everything queued is published.
        assert!(!tx.has_unpublished());
        queued
    }

    /// The OS gives back `n` of the pages it holds: alternately straight into the owning pool
    /// (same context) and through the pool's recycle ring (another context).
    pub fn return_os_pages(&mut self, n: usize) {
        let q = usize::from(self.setup.queues);
        for k in 0..n.min(self.os_pages.len()) {
            let (origin, page) = self.os_pages.remove(0);
            if k % 2 == 0 {
                self.funcs[origin / q].pairs[origin % q]
                    .pool
                    .return_from_os(page, 128);
            } else if let Err(page) = self.rings[origin].return_from_os(page, 128) {
                release_to_hal(&self.card.dma(), Direction::Bidirectional, page);
            }
        }
    }

    /// Every pair.
    pub fn pairs(&self) -> impl Iterator<Item = &HPair<'c>> {
        self.funcs.iter().flat_map(|f| f.pairs.iter())
    }

    /// The page census over all pools, from the driver's counts.
    ///
    /// # Panics
    ///
    /// If a pool's OS-return count exceeds the pages its RX path handed out.
    #[must_use]
    pub fn page_counts(&self) -> PageCounts {
        census(self.pairs())
    }

    /// Pages the pools took from the HAL and did not give back.
    #[must_use]
    pub fn live_pool_pages(&self) -> u64 {
        self.pairs().map(|p| p.pool.stats().live_pages()).sum()
    }

    /// The page-accounting invariant: every live pool page is in a pool, a ring, TX flight or with
    /// the OS, the OS holds exactly what the driver thinks, and the model's live pages agree.
    ///
    /// # Panics
    ///
    /// When it does not hold.
    pub fn check_pages(&self) {
        self.check_census();
        for p in self.pairs() {
            assert!(p.rx.error().is_none() && p.tx.error().is_none());
        }
    }

    /// The page-accounting invariant of [`Harness::check_pages`], for queues in any state (a
    /// queue in its error state keeps its pages until it is restarted or torn down).
    ///
    /// # Panics
    ///
    /// When it does not hold.
    pub fn check_census(&self) {
        let c = self.page_counts();
        let live = self.live_pool_pages();
        assert_eq!(c.total(), live, "page census {c:?} vs {live} live pool pages");
        assert_eq!(c.with_os, self.os_pages.len() as u64, "pages with the OS");
        assert_eq!(
            self.card.dma_stats().live_pages as u64,
            live + self.os_tx_live as u64,
            "model live pages vs pool pages + OS TX buffers"
        );
    }

    /// Restarts pair `q` of function `func` (both queues), as an OS does from process context
    /// once it sees the pair in its error state; OS TX buffers handed back are freed, redirected
    /// pages go home.
    ///
    /// # Errors
    ///
    /// As [`onic_core::QueuePair::restart`].
    pub fn restart(&mut self, func: usize, q: usize) -> onic_core::Result<()> {
        let mut delay = self.card.delay();
        let Func { dev, pairs } = &mut self.funcs[func];
        completing(&self.rings, &mut self.os_tx_live, self.card.dma(), |done| {
            pairs[q].restart(dev, &mut delay, done)
        })
    }

    /// Settles and polls every pair (budget 64) until nothing is pending anywhere.
    ///
    /// # Panics
    ///
    /// If the datapath does not quiesce.
    pub fn drain(&mut self) {
        // What `poll` runs: the setup's policy program.
        let mut prog = PolicyProgram(self.setup.policy);
        self.drain_xdp(&mut prog);
    }

    /// Checks that every injected id was delivered exactly once or dropped with a reason.
    ///
    /// # Panics
    ///
    /// When it is not so.
    pub fn check_delivery(&self) {
        let mut seen = BTreeSet::new();
        for id in &self.delivered {
            assert!(seen.insert(*id), "frame {id} delivered twice");
        }
        let injected: BTreeSet<u64> = self.injected.iter().flatten().copied().collect();
        assert!(seen.is_subset(&injected), "delivered a frame never injected");
        let driver_drops: u64 = self.pairs().map(|p| p.rx.stats().rx_dropped()).sum();
        let model = self.card.stats();
        // Frames the MAC refused (too long for the shell, bad FCS...): counted by the CMAC.
        let mac_drops: u64 = (0..self.card.config().ports)
            .map(|p| {
                self.card.cmac_counter(p, "stat_rx_total_pkts")
                    - self.card.cmac_counter(p, "stat_rx_total_good_pkts")
            })
            .sum();
        let model_drops = model.c2h_no_desc_dropped
            + model.cmpt_full_dropped
            + model.c2h_no_queue_dropped
            + model.wire_dropped
            + mac_drops;
        assert_eq!(
            injected.len() as u64,
            seen.len() as u64 + driver_drops + model_drops,
            "injected = delivered + driver drops + model drops ({model:?}, MAC {mac_drops})"
        );
    }

    /// Reads one hardware counter of `port` through the driver's statistics path (TICK, then the
    /// registers), by its ethtool name.
    ///
    /// # Panics
    ///
    /// For an unknown name.
    #[must_use]
    pub fn hw_counter(&self, port: u8, name: &str) -> u64 {
        let all = onic_core::stats::read_hw_counters(&self.card.shell(), port);
        let i = CMAC_STATS
            .iter()
            .chain(ADAPTER_STATS.iter())
            .position(|c| c.name == name)
            .expect("counter name");
        all[i]
    }

    /// The driver's counters agree with the adapter and CMAC counters (read through the driver's
    /// statistics path) and with the model's live counters, per port.
    ///
    /// # Panics
    ///
    /// When they do not.
    pub fn check_stats(&self) {
        for (f, func) in self.funcs.iter().enumerate() {
            let port = f as u8;
            let rx_seen: u64 = func
                .pairs
                .iter()
                .map(|p| p.rx.stats().rx_packets + p.rx.stats().rx_dropped())
                .sum();
            let recv = self.hw_counter(port, "stat_adapt_rx_recv");
            let drop = self.hw_counter(port, "stat_adapt_rx_drop");
            assert_eq!(rx_seen, recv - drop, "port {port}: driver RX vs adapter");
            let good = self.hw_counter(port, "stat_rx_total_good_pkts");
            assert_eq!(good, recv, "port {port}: CMAC vs adapter");
            assert_eq!(self.card.cmac_counter(port, "stat_rx_total_good_pkts"), good);
            let tx: u64 = func.pairs.iter().map(|p| p.tx.stats().tx_packets).sum();
            assert_eq!(
                self.hw_counter(port, "stat_tx_total_good_pkts"),
                tx,
                "port {port}: CMAC vs driver TX"
            );
            assert_eq!(self.hw_counter(port, "stat_adapt_tx_sent"), tx);
        }
    }

    /// Tears everything down and checks that no page or ring is left. All TX queues go first, so
    /// that redirected pages find their pools (and rings) still there.
    ///
    /// # Panics
    ///
    /// On a leak or a driver error.
    pub fn teardown(mut self) {
        self.return_os_pages(usize::MAX);
        let mut delay = self.card.delay();
        let rings = self.rings.clone();
        let mut os_tx_live = self.os_tx_live;
        let funcs: Vec<Func<'c>> = self.funcs.drain(..).collect();
        let (devs, sets): (Vec<_>, Vec<_>) = funcs
            .into_iter()
            .map(|f| (f.dev, QueueSet { pairs: f.pairs }))
            .unzip();
        completing(&rings, &mut os_tx_live, self.card.dma(), |done| {
            QueueSet::teardown_all(devs.iter().zip(sets).collect(), &mut delay, done)
        })
        .expect("queue teardown");
        for dev in devs {
            let (r, _, _) = dev.teardown(&mut delay);
            r.expect("device teardown");
        }
        assert_eq!(os_tx_live, 0);
        let s = self.card.dma_stats();
        assert_eq!((s.live_pages, s.mapped_pages, s.live_regions), (0, 0, 0), "leak");
        assert_eq!(self.card.violations(), []);
    }
}
