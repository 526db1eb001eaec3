//! A datapath harness: a model card, one or two PCI functions each driven as a port through
//! onic-embed's door ([`SoloPort`] over the model host, [`CardHost`]), the setup's XDP policy
//! as an attached program, an "OS" whose stack holds passed frames until the test gives them
//! back and transmits frames of its own, and the census checks the datapath tests run after
//! every step.
//!
//! ```
//! use onic_tests::datapath::{Harness, Setup};
//!
//! let setup = Setup::new().queues(4).ring_size_idx(1);
//! let card = setup.card();
//! let mut h = Harness::new(&card, &setup);
//! h.inject(0, 7, 100); // port 0, flow 7, 100 bytes
//! h.drain(); // settle and poll until quiet, checking the page census on the way
//! h.check_delivery();
//! h.check_pages();
//! h.teardown(); // every page and ring back, no violation
//! ```
//!
//! Each port's queue index `q` has the port's four rings: RX and XDP_TX (the NAPI pair, with
//! the queue's page pool), the stack's TX ring (what [`Harness::transmit`] uses) and the
//! redirect-in ring (what frames redirected to the queue go out on). The tests look at them
//! through [`Harness::queue`] and [`Harness::queues`], read-only.

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use onic_core::config::{BufSizeIdx, DeviceConfig, RingSizeIdx};
use onic_core::queue::pair::PairPoll;
use onic_core::xdp::{RawXdpProgram, XdpAction, XdpBuff, XdpProgram};
use onic_embed::model::{CardHost, ModelCensus, PoolCensus, Received};
use onic_embed::port::{
    FrameAt, Host, PortConfig, PortError, QueueTuning, QueueView, RingHoldings, RxBufSizes, SkbHash,
    SoloPort, TxClean, TxLock, XmitLock, XmitResult,
};
use onic_hal::layout::desc::CmptEntrySize;
use onic_hal::regs::cmac::{ADAPTER_STATS, CMAC_STATS};
use onic_sim::{Card, CardConfig, Wire};

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
    /// Send it back out on the same queue (XDP_TX).
    Tx,
    /// Send it out on the next queue of the same function (XDP_REDIRECT).
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
    /// Whether RX queues compare the device's C2H consumer index with theirs.
    pub c2h_status_check: bool,
    /// Polls without progress before an RX queue gives up.
    pub stall_polls: u16,
    /// Reclaims of the stack's stopped TX ring without progress before it gives up (0: never,
    /// the port's default).
    pub stack_stall_reclaims: u32,
}

impl Default for Setup {
    fn default() -> Self {
        Self::new()
    }
}

impl Setup {
    /// One function, one queue index, 64-entry rings, the default buffer, drop everything.
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
            stack_stall_reclaims: 0,
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

    /// Reclaims of the stack's stopped TX ring without progress before it gives up.
    #[must_use]
    pub fn stack_stall_reclaims(mut self, n: u32) -> Self {
        self.stack_stall_reclaims = n;
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

    /// What the ports build their queues with.
    ///
    /// # Panics
    ///
    /// For a buffer-size index the driver refuses (a test bug).
    #[must_use]
    pub fn tuning(&self) -> QueueTuning {
        QueueTuning {
            bufs: RxBufSizes::all(BufSizeIdx::new(self.buf_idx).expect("buffer size")),
            cmpt_entry: self.cmpt_entry,
            max_frame_len: self.max_frame_len as u32,
            check_c2h_status: self.c2h_status_check,
            stall_polls: self.stall_polls,
            stack_stall_reclaims: self.stack_stall_reclaims,
        }
    }
}

/// A user redirect target in the style of an AF_XDP ring in copy mode: copies up to `cap`
/// frames; the host refuses further ones (the RX path recycles and counts).
#[derive(Debug, Default)]
pub struct CopySink {
    /// Frames copied, in order.
    pub frames: Vec<Vec<u8>>,
    /// Most frames it takes; further ones are refused.
    pub cap: usize,
    /// Flushes seen (one per poll that redirected frames to it).
    pub flushes: usize,
}

/// Redirect target numbers of the harness's programs (the entries of their devmap).
pub mod targets {
    /// The same queue index on the other function, i.e. out of the other port.
    pub const OTHER_PORT: u32 = 0;
    /// The next queue index of the same function.
    pub const NEXT_QUEUE: u32 = 1;
    /// The harness's [`super::CopySink`].
    pub const USER_SINK: u32 = 2;
    /// Kept by the harness for the test ([`super::Harness::take_held`]), as frames of another
    /// device waiting for `ndo_xdp_xmit`.
    pub const HOLD: u32 = 3;
}

/// What the attached programs saw: the id of every frame, and of every frame sent back out
/// with XDP_TX.
#[derive(Debug, Default)]
struct ProgLog {
    seen: Vec<u64>,
    sent: Vec<u64>,
}

/// A program attached to the model host: the test's program, wrapped to record what it sees
/// (for [`Harness::check_delivery`] and [`Harness::sent_back`]).
pub struct HProg {
    inner: Box<dyn RawXdpProgram>,
    log: Rc<RefCell<ProgLog>>,
}

impl RawXdpProgram for HProg {
    fn run_raw(&mut self, xdp: &mut XdpBuff<'_>) -> u32 {
        let id = frame_id(xdp.data());
        let raw = self.inner.run_raw(xdp);
        let mut log = self.log.borrow_mut();
        log.seen.push(id);
        if raw == XdpAction::Tx.raw() {
            log.sent.push(id);
        }
        raw
    }
}

/// The program of [`Harness::poll`]: the setup's policy as XDP verdicts; REDIRECT goes to the
/// next queue of the same function ([`targets::NEXT_QUEUE`]).
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

/// An attached program ([`Harness::attach`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prog(u16);

/// The model host of the harness.
pub type HHost<'c> = CardHost<'c, HProg>;
/// A port of the harness.
pub type HPort<'c> = SoloPort<HHost<'c>>;
/// A look at one queue index's rings.
pub type HView<'v, 'c> = QueueView<'v, HHost<'c>>;

/// Reads the id of a harness frame (0 for a frame too short to carry one).
#[must_use]
pub fn frame_id(data: &[u8]) -> u64 {
    data.get(ID_OFFSET..ID_OFFSET + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

/// What the stack was told about the last frame passed to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PassedFrame {
    /// Where it lies in its page, with its metadata.
    pub at: FrameAt,
    /// The hash the driver gave it.
    pub hash: Option<SkbHash>,
}

/// The harness.
pub struct Harness<'c> {
    /// The model.
    pub card: &'c Card,
    /// The setup it was built from.
    pub setup: Setup,
    /// One port per function.
    ports: Vec<HPort<'c>>,
    /// Each port's host (sharing pools, frames and programs).
    hosts: Vec<HHost<'c>>,
    log: Rc<RefCell<ProgLog>>,
    policy: Prog,
    /// Frames the stack holds from each port that are already recorded.
    seen_os: Vec<usize>,
    /// Ids handed to a program or, with none attached, to the OS, in order.
    pub delivered: Vec<u64>,
    /// Ids sent back out by XDP_TX or redirect (queued on a TX ring).
    pub sent_back: Vec<u64>,
    /// Ids injected, per port.
    pub injected: Vec<Vec<u64>>,
    /// OS frames refused by a full TX ring.
    pub os_tx_refused: u64,
    /// OS frames queued.
    pub os_tx_queued: u64,
    /// The user redirect target (capacity 0 until a test sets one).
    pub user_sink: CopySink,
    /// The last frame passed to the OS.
    pub last_pass: Option<PassedFrame>,
    /// Frames redirected to [`targets::HOLD`]: (port whose program redirected it, frame).
    held: Vec<(u8, u32)>,
    next_id: u64,
}

impl<'c> Harness<'c> {
    /// Brings up the functions as ports over one model host, with the setup's tuning, and
    /// starts every queue; attaches the setup's policy as a program.
    ///
    /// # Panics
    ///
    /// If the driver refuses the setup (a test bug).
    #[must_use]
    pub fn new(card: &'c Card, setup: &Setup) -> Self {
        let host = HHost::new(card);
        host.set_pool_config(Some(setup.bulk), setup.tuning().bufs);
        let mut known = vec![targets::USER_SINK, targets::HOLD];
        if setup.functions > 1 {
            known.push(targets::OTHER_PORT);
        }
        if setup.queues > 1 {
            known.push(targets::NEXT_QUEUE);
        }
        host.set_targets(&known);
        let ring = RingSizeIdx::new(setup.ring_size_idx).expect("ring size");
        let mut ports = Vec::new();
        let mut hosts = Vec::new();
        for f in 0..setup.functions {
            let h = host.for_port(f);
            let cfg = PortConfig {
                func: f,
                max_queues: setup.queues,
                queues: setup.queues,
                tx_ring: ring,
                rx_ring: ring,
                rs_fec: DeviceConfig::new(f, setup.queues).expect("device config").rs_fec,
            };
            let mut port = SoloPort::new(h.regs(f), h.delay(), h.clone(), cfg).expect("port bring-up");
            port.set_tuning(setup.tuning()).expect("queue tuning");
            port.open().expect("queue start");
            ports.push(port);
            hosts.push(h);
        }
        let log = Rc::new(RefCell::new(ProgLog::default()));
        let policy = Prog(host.attach(HProg {
            inner: Box::new(PolicyProgram(setup.policy)),
            log: Rc::clone(&log),
        }));
        let n = usize::from(card.config().ports);
        Self {
            card,
            setup: setup.clone(),
            ports,
            hosts,
            log,
            policy,
            seen_os: vec![0; usize::from(setup.functions)],
            delivered: Vec::new(),
            sent_back: Vec::new(),
            injected: vec![Vec::new(); n],
            os_tx_refused: 0,
            os_tx_queued: 0,
            user_sink: CopySink::default(),
            last_pass: None,
            held: Vec::new(),
            next_id: 1,
        }
    }

    /// Attaches `prog` to the model host (recorded as every harness program is); the handle is
    /// what [`Harness::poll_with`] and [`Harness::drain_xdp`] take.
    pub fn attach(&mut self, prog: impl RawXdpProgram + 'static) -> Prog {
        Prog(self.hosts[0].attach(HProg {
            inner: Box::new(prog),
            log: Rc::clone(&self.log),
        }))
    }

    /// The port of function `func`.
    pub fn port(&mut self, func: usize) -> &mut HPort<'c> {
        &mut self.ports[func]
    }

    /// The model host of function `func`'s port.
    #[must_use]
    pub fn host(&self, func: usize) -> &HHost<'c> {
        &self.hosts[func]
    }

    /// A look at queue index `q` of function `func`.
    ///
    /// # Panics
    ///
    /// If the queue does not run.
    pub fn queue(&mut self, func: usize, q: usize) -> HView<'_, 'c> {
        self.ports[func].inspect(q as u16).expect("a running queue")
    }

    /// A look at every running queue index of every function.
    pub fn queues(&mut self) -> Vec<HView<'_, 'c>> {
        self.ports.iter_mut().flat_map(SoloPort::inspect_all).collect()
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

    /// Polls queue `q` of function `func` once, running the setup's policy as the XDP program
    /// (see [`Harness::poll_with`]).
    pub fn poll(&mut self, func: usize, q: usize, budget: usize) -> PairPoll {
        let prog = self.policy;
        self.poll_with(func, q, budget, Some(prog))
    }

    /// What the OS's NAPI poll of queue `q` of function `func` does, once: reclaims the
    /// stack's TX ring and the redirect-in ring, then polls the queue through `prog` (none:
    /// every frame goes to the OS), then flushes the redirects ([`targets`]). Returns the core's
    /// account of the RX poll and its XDP_TX reclaim.
    ///
    /// # Panics
    ///
    /// If the queue does not run.
    pub fn poll_with(&mut self, func: usize, q: usize, budget: usize, prog: Option<Prog>) -> PairPoll {
        let qi = q as u16;
        let b = u32::try_from(budget).unwrap_or(u32::MAX);
        let room = self.user_sink.cap.saturating_sub(self.user_sink.frames.len());
        self.hosts[func].limit_target(targets::USER_SINK, room);
        let port = &mut self.ports[func];
        port.queue::<TxLock, _>(qi, |p, t| p.tx_clean(t, b));
        port.queue::<XmitLock, _>(qi, |p, t| p.xmit_clean(t));
        let (result, out) = port.poll_outcome(qi, b, (), prog.map(|p| p.0));
        let out = out.expect("a running queue");
        self.record_os(func, prog.is_none());
        let mut log = self.log.borrow_mut();
        self.delivered.append(&mut log.seen);
        self.sent_back.append(&mut log.sent);
        drop(log);
        if result.redirected {
            self.flush_redirects(func, q);
        }
        out
    }

    /// Records the frames the stack got from `func`'s port since the last look (their ids too
    /// when no program saw them).
    fn record_os(&mut self, func: usize, ids: bool) {
        let seen = self.seen_os[func];
        let mut n = 0;
        let (delivered, last) = (&mut self.delivered, &mut self.last_pass);
        self.hosts[func].look_received(|r| {
            n += 1;
            if n > seen {
                if ids {
                    delivered.push(frame_id(r.data()));
                }
                *last = Some(PassedFrame {
                    at: r.at,
                    hash: r.hash,
                });
            }
        });
        self.seen_os[func] = n;
    }

    /// Carries out the redirects of a poll of queue `q` of function `func`, as `xdp_do_flush`
    /// does: each target's frames as one `ndo_xdp_xmit` batch; what a ring does not take goes
    /// back to its pool (counted by the ring).
    fn flush_redirects(&mut self, func: usize, q: usize) {
        let nq = usize::from(self.setup.queues);
        let mut to: Vec<((usize, usize), Vec<u32>)> = Vec::new();
        let mut copied = false;
        let host = self.hosts[func].clone();
        for r in host.take_redirects() {
            let dest = match r.target {
                Some(targets::OTHER_PORT) => (1 - func.min(1), q),
                Some(targets::NEXT_QUEUE) => (func, (q + 1) % nq),
                Some(targets::USER_SINK) => {
                    self.user_sink.frames.push(host.frame_data(r.frame));
                    host.return_frame(r.frame);
                    copied = true;
                    continue;
                }
                Some(targets::HOLD) => {
                    self.held.push((r.from, r.frame));
                    continue;
                }
                _ => {
                    host.return_frame(r.frame);
                    continue;
                }
            };
            match to.iter_mut().find(|(d, _)| *d == dest) {
                Some((_, frames)) => frames.push(r.frame),
                None => to.push((dest, vec![r.frame])),
            }
        }
        self.user_sink.flushes += usize::from(copied);
        for ((f, tq), frames) in to {
            let sent = self.xdp_xmit(f, tq, &frames, true);
            for &frame in &frames[sent..] {
                host.return_frame(frame);
            }
        }
    }

    /// `ndo_xdp_xmit` of held redirected `frames` on queue `q` of function `func`: returns how
    /// many the redirect-in ring took (recorded as sent back); the rest are still the caller's.
    ///
    /// # Panics
    ///
    /// If the ring does not run.
    pub fn xdp_xmit(&mut self, func: usize, q: usize, frames: &[u32], flush: bool) -> usize {
        let ids: Vec<u64> = frames
            .iter()
            .map(|&f| frame_id(&self.hosts[func].frame_data(f)))
            .collect();
        let sent = self.ports[func]
            .queue::<XmitLock, _>(q as u16, |p, t| p.xdp_xmit(t, frames, flush))
            .expect("a running redirect-in ring");
        self.sent_back.extend_from_slice(&ids[..sent]);
        sent
    }

    /// The frames programs redirected to [`targets::HOLD`] so far (the caller's now: it hands
    /// them to [`Harness::xdp_xmit`] or gives them back with [`Harness::return_frame`]).
    pub fn take_held(&mut self) -> Vec<u32> {
        self.held.drain(..).map(|(_, f)| f).collect()
    }

    /// Gives a held redirected frame back to its pool.
    pub fn return_frame(&self, frame: u32) {
        self.hosts[0].return_frame(frame);
    }

    /// Settles and polls every queue with `prog` until nothing is pending, checking the page
    /// census on the way.
    ///
    /// # Panics
    ///
    /// If the datapath does not quiesce.
    pub fn drain_xdp(&mut self, prog: Prog) {
        for _ in 0..10_000 {
            self.settle();
            let mut busy = false;
            for f in 0..self.ports.len() {
                for q in 0..usize::from(self.setup.queues) {
                    let out = self.poll_with(f, q, 64, Some(prog));
                    busy |= !out.rx.armed || out.rx.more || out.rx.done > 0 || out.tx.completed > 0;
                    let v = self.queue(f, q);
                    busy |= v.pair.tx.in_flight() > 0 || v.stack.in_flight() > 0 || v.xmit.in_flight() > 0;
                }
            }
            self.check_pages();
            if !busy {
                return;
            }
        }
        panic!("datapath did not quiesce");
    }

    /// Settles and polls every queue (budget 64) with the setup's policy until nothing is
    /// pending anywhere.
    ///
    /// # Panics
    ///
    /// If the datapath does not quiesce.
    pub fn drain(&mut self) {
        let prog = self.policy;
        self.drain_xdp(prog);
    }

    /// Reclaims the stack's TX ring of queue `q` of function `func` (the OS's NAPI poll does
    /// that, holding the TX queue's lock).
    pub fn reclaim(&mut self, func: usize, q: usize) -> TxClean {
        self.ports[func].queue::<TxLock, _>(q as u16, |p, t| p.tx_clean(t, 64))
    }

    /// The OS transmits `frames` on queue `q` of function `func` as one batch (published at
    /// its end); frames refused by a full ring are freed and counted. Returns the ids queued.
    ///
    /// # Panics
    ///
    /// If the port drops a frame instead of refusing it as busy.
    pub fn transmit(&mut self, func: usize, q: usize, frames: &[(u64, Vec<u8>)]) -> Vec<u64> {
        let queued = self.transmit_unflushed(func, q, frames);
        self.ports[func].queue::<TxLock, _>(q as u16, |p, t| p.tx_flush(t));
        queued
    }

    /// As [`Harness::transmit`], without the flush at the end of the batch (xmit-more): what the
    /// ring did not publish on its own stays unpublished.
    ///
    /// # Panics
    ///
    /// As [`Harness::transmit`].
    pub fn transmit_unflushed(&mut self, func: usize, q: usize, frames: &[(u64, Vec<u8>)]) -> Vec<u64> {
        let host = self.hosts[func].clone();
        let mut queued = Vec::new();
        for (id, data) in frames {
            let skb = host.packet(data).expect("a packet buffer");
            let mut clean = TxClean::default();
            match self.ports[func].queue::<TxLock, _>(q as u16, |p, t| p.xmit(t, skb, &mut clean)) {
                XmitResult::Ok | XmitResult::OkStop => {
                    self.os_tx_queued += 1;
                    queued.push(*id);
                }
                XmitResult::Busy => {
                    self.os_tx_refused += 1;
                    host.skb_done(skb, None);
                }
                XmitResult::Dropped => panic!("frame {id} dropped by transmit"),
            }
        }
        queued
    }

    /// OS TX packets handed to the port and not yet completed (or refused).
    #[must_use]
    pub fn os_tx_live(&self) -> usize {
        self.hosts[0].census().packets
    }

    /// Frames the stack holds, over every port.
    #[must_use]
    pub fn os_held(&self) -> usize {
        self.hosts[0].census().received
    }

    /// Shows `f` every frame the stack holds from function `func`'s port, oldest first.
    pub fn with_os_frames(&self, func: usize, f: impl FnMut(&Received)) {
        self.hosts[func].look_received(f);
    }

    /// The OS gives back up to `n` of the frames its stack holds, oldest first, port by port.
    pub fn return_os_pages(&mut self, n: usize) {
        let mut left = n;
        for (h, seen) in self.hosts.iter().zip(&mut self.seen_os) {
            let k = h.release_received(left);
            *seen = seen.saturating_sub(k);
            left -= k;
        }
    }

    /// Restarts queue `q` of function `func` (all its rings), as an OS does from process
    /// context once it sees a ring in its error state; OS TX packets handed back are freed,
    /// redirected frames go home.
    ///
    /// # Errors
    ///
    /// As the port's `restart_queue`.
    pub fn restart(&mut self, func: usize, q: usize) -> Result<(), PortError> {
        self.ports[func].restart_queue(q as u16)
    }

    /// Where every running pool's pages are, checked: the port's rings, the pool, the stack and
    /// the redirected frames hold every live page, and the stack holds exactly what the RX path
    /// handed it minus what it gave back.
    ///
    /// # Panics
    ///
    /// When the census does not add up (a lost or doubled page).
    pub fn pool_census(&mut self) -> Vec<PoolCensus> {
        let mut holdings = Vec::new();
        for p in &mut self.ports {
            holdings.extend(p.holdings().expect("ring holdings"));
        }
        self.hosts[0]
            .check_census(&holdings)
            .unwrap_or_else(|e| panic!("page census: {e}"))
    }

    /// What the rings of every running queue hold, summed.
    pub fn holdings(&mut self) -> RingHoldings {
        let mut sum = RingHoldings::default();
        for p in &mut self.ports {
            for (_, h) in p.holdings().expect("ring holdings") {
                sum.in_rx_ring += h.in_rx_ring;
                sum.in_tx_flight += h.in_tx_flight;
                sum.tx_parked += h.tx_parked;
                sum.to_os += h.to_os;
            }
        }
        sum
    }

    /// Pages the pools took from the HAL and did not give back.
    pub fn live_pool_pages(&mut self) -> u64 {
        self.pool_census().iter().map(|c| c.live).sum()
    }

    /// The page-accounting invariant of [`Harness::check_census`], and no ring in its error
    /// state.
    ///
    /// # Panics
    ///
    /// When either does not hold.
    pub fn check_pages(&mut self) {
        self.check_census();
        for v in self.queues() {
            assert!(
                v.pair.rx.error().is_none()
                    && v.pair.tx.error().is_none()
                    && v.stack.error().is_none()
                    && v.xmit.error().is_none(),
                "queue {} in its error state",
                v.index
            );
        }
    }

    /// The page-accounting invariant, for queues in any state (a queue in its error state keeps
    /// its pages until it is restarted or torn down): every live pool page is in a pool, a
    /// ring, TX flight, with the stack or redirected; and the model's live pages are the pools'
    /// plus the OS's packet buffers.
    ///
    /// # Panics
    ///
    /// When it does not hold.
    pub fn check_census(&mut self) {
        let live: u64 = self.pool_census().iter().map(|c| c.live).sum();
        let buffers = self.hosts[0].census().buffers;
        assert_eq!(
            self.card.dma_stats().live_pages as u64,
            live + buffers,
            "model live pages vs pool pages + OS packet buffers"
        );
    }

    /// Checks that every injected id was delivered exactly once or dropped with a reason.
    ///
    /// # Panics
    ///
    /// When it is not so.
    pub fn check_delivery(&mut self) {
        let mut seen = BTreeSet::new();
        for id in &self.delivered {
            assert!(seen.insert(*id), "frame {id} delivered twice");
        }
        let injected: BTreeSet<u64> = self.injected.iter().flatten().copied().collect();
        assert!(seen.is_subset(&injected), "delivered a frame never injected");
        let driver_drops: u64 = self.queues().iter().map(|v| v.pair.rx.stats().rx_dropped()).sum();
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

    /// Reads one hardware counter of function `func`'s port through the port's statistics path
    /// (TICK, then the registers), by its ethtool name.
    ///
    /// # Panics
    ///
    /// For an unknown name.
    #[must_use]
    pub fn hw_counter(&self, func: usize, name: &str) -> u64 {
        let all = self.ports[func].port().hw_counters();
        let i = CMAC_STATS
            .iter()
            .chain(ADAPTER_STATS.iter())
            .position(|c| c.name == name)
            .expect("counter name");
        all[i]
    }

    /// The driver's counters agree with the adapter and CMAC counters (read through the port's
    /// statistics path) and with the model's live counters, per port.
    ///
    /// # Panics
    ///
    /// When they do not.
    pub fn check_stats(&mut self) {
        for f in 0..self.ports.len() {
            let port = f as u8;
            let (rx_seen, tx) = self.ports[f]
                .inspect_all()
                .iter()
                .map(|v| {
                    let rx = v.pair.rx.stats();
                    let tx =
                        v.pair.tx.stats().tx_packets + v.stack.stats().tx_packets + v.xmit.stats().tx_packets;
                    (rx.rx_packets + rx.rx_dropped(), tx)
                })
                .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
            let recv = self.hw_counter(f, "stat_adapt_rx_recv");
            let drop = self.hw_counter(f, "stat_adapt_rx_drop");
            assert_eq!(rx_seen, recv - drop, "port {port}: driver RX vs adapter");
            let good = self.hw_counter(f, "stat_rx_total_good_pkts");
            assert_eq!(good, recv, "port {port}: CMAC vs adapter");
            assert_eq!(self.card.cmac_counter(port, "stat_rx_total_good_pkts"), good);
            assert_eq!(
                self.hw_counter(f, "stat_tx_total_good_pkts"),
                tx,
                "port {port}: CMAC vs driver TX"
            );
            assert_eq!(self.hw_counter(f, "stat_adapt_tx_sent"), tx);
        }
    }

    /// Tears everything down and checks that no page or ring is left: the stack gives every
    /// frame back, held redirected frames go home, every port stops its queues (all of them
    /// before any port goes, so that redirected pages find their pools) and goes.
    ///
    /// # Panics
    ///
    /// On a leak or a driver error.
    pub fn teardown(mut self) {
        self.return_os_pages(usize::MAX);
        for f in self.take_held() {
            self.return_frame(f);
        }
        for p in &mut self.ports {
            p.stop().expect("queue teardown");
        }
        let host = self.hosts[0].clone();
        for p in self.ports.drain(..) {
            p.remove();
        }
        host.free_spare();
        assert_eq!(
            host.census(),
            ModelCensus::default(),
            "model host holds something"
        );
        let s = self.card.dma_stats();
        assert_eq!((s.live_pages, s.mapped_pages, s.live_regions), (0, 0, 0), "leak");
        assert_eq!(self.card.violations(), []);
    }
}
