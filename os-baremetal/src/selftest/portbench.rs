//! The datapath of the groups that drive `onic_embed` ports, the way the kernel module's door is
//! driven: on a fresh model card, both functions as `SoloPort`s over the model host
//! (`onic_embed::model::ModelHost`, reaching the model through the image's guarded windows), one
//! per function, each with [`PAIRS`] queue indices whose RX buffers are the cycle
//! [`datapath::rx_buffers`] gives.
//!
//! - **Interrupts.** As for the bare pairs: the model's queue interrupts are raised on their own
//!   IDT vectors (`irq::queue_vector`), the handler marks the queue index, and [`service`] polls
//!   a marked index through its port (`SoloPort::poll_outcome`, a NAPI budget of
//!   [`datapath::BUDGET`]), which runs the program attached for that port; an index whose poll
//!   asks for more stays scheduled, one whose poll reports its queue's error is polled no more
//!   until [`restart_queue`].
//! - **Housekeeping.** On the tick: the stack's TX rings and the redirect-in rings reclaimed
//!   (nothing else completes them), a poll for an index whose XDP_TX frames wait for their
//!   reclaim or whose RX ring is short of buffers.
//! - **The stack.** Frames go out through a port's stack TX rings ([`send_tracked`]); what the
//!   ports pass to their stack is read and given back after every poll.
//!
//! The tap (the phase's [`Tally`] and each function's [`Steering`], [`Shared`]) sees every
//! frame: inside the attached program ([`Tapped`]), or on the stack when a port has
//! none.

use alloc::rc::Rc;
use core::cell::RefCell;

use onic_core::xdp::{RawXdpProgram, XdpBuff};
use onic_core::{DeviceConfig, QueueError, RingSizeIdx, RxStats};
use onic_embed::model::ModelHost;
use onic_embed::port::{PortConfig, QueueTuning, SoloPort, TxClean, TxLock, XmitLock, XmitResult};
use onic_sim::Card;

use super::datapath::{self, Steering, Tally, WireLog, BUDGET, CHUNK, PAIRS, POOL_BULK, RX_RING, TX_RING};
use super::frames::MAX_BUILD;
use super::xdp::{Code, Engine};
use crate::irq::{self, FUNCTIONS, MSIX_VECTORS};
use crate::model::Model;

/// The model host of the ports.
pub type Host<'m, 'c> = ModelHost<Tapped, &'m Model<'c>>;
/// One port.
pub type Port<'m, 'c> = SoloPort<Host<'m, 'c>>;

/// Packets one reclaim of a stack TX ring may complete.
const RECLAIM_BUDGET: u32 = 64;

/// What the loop counts per queue index, beyond the port's own statistics.
#[derive(Clone, Copy, Debug, Default)]
pub struct Book {
    /// Polls.
    pub polls: u64,
    /// Polls that used the whole budget.
    pub exhausted: u64,
    /// Packets the housekeeping's reclaims of the index's stack TX ring completed.
    pub hk_completed: u64,
    /// Packets of the stack completed by any reclaim (a housekeeping one, or the one a
    /// transmit starts with).
    pub tx_done: u64,
    /// Polls the housekeeping scheduled to refill an RX ring short of buffers.
    pub refill_polls: u64,
    /// The error a poll reported (the core's account), if any: the index is no longer polled
    /// until its queue is restarted ([`restart_queue`]).
    pub error: Option<QueueError>,
}

/// What the tap and the tests share: the expectations of the phase running and each function's
/// RSS state as the tests predict it.
pub struct Shared {
    /// Expectations of the phase running.
    pub tally: Tally,
    /// Each function's steering.
    pub steer: [Steering; FUNCTIONS],
}

impl Shared {
    /// The tap: one frame received by queue `qid` of `func`.
    pub fn tap(&mut self, func: u8, qid: u16, data: &[u8]) {
        if let Some(steer) = self.steer.get(usize::from(func)) {
            self.tally.on_frame(func, qid, steer, data);
        }
    }
}

/// A program attached to the ports' model host: its code, with the port bench's tap (the
/// tally of the phase and the functions' steering) in front.
pub struct Tapped {
    /// What runs.
    pub code: Code,
    shared: Rc<RefCell<Shared>>,
}

impl Tapped {
    /// `code` behind the tap of `shared`.
    pub fn new(code: Code, shared: Rc<RefCell<Shared>>) -> Self {
        Self { code, shared }
    }

    /// The engine, for an object.
    #[must_use]
    pub fn engine(&self) -> Option<&Engine> {
        match &self.code {
            Code::Object(e) => Some(e),
            Code::Native(_) => None,
        }
    }
}

impl RawXdpProgram for Tapped {
    fn run_raw(&mut self, xdp: &mut XdpBuff<'_>) -> u32 {
        let rxq = xdp.rxq();
        // The bench holds no borrow of the shared state while it polls; a second borrow could
        // only come from a program run inside another one's tap, which never happens.
        if let Ok(mut s) = self.shared.try_borrow_mut() {
            s.tap(rxq.port, rxq.queue_index, xdp.data());
        }
        self.code.run(xdp)
    }
}

/// The ports on one card and the main loop's state.
pub struct PortBench<'m, 'c> {
    /// The model.
    pub model: &'m Model<'c>,
    /// The model host (port 0's view; `for_port` gives the other's).
    pub host: Host<'m, 'c>,
    /// Port 0 and port 1.
    pub ports: [Port<'m, 'c>; FUNCTIONS],
    /// The program each port's polls run (a handle of `host`), if any.
    pub progs: [Option<u16>; FUNCTIONS],
    /// The tap's state.
    pub shared: Rc<RefCell<Shared>>,
    /// Queue indices whose last poll left XDP_TX frames for a later reclaim.
    tx_pending: [[bool; PAIRS]; FUNCTIONS],
    /// Frames on each index's stack and redirect-in rings, as last reclaimed (plus sent since).
    in_flight: [[u32; PAIRS]; FUNCTIONS],
    /// Polls that reported their queue in its error state.
    pub poll_errors: u32,
    /// Queue interrupts raised, per function and MSI-X vector.
    pub raised: [[u32; MSIX_VECTORS]; FUNCTIONS],
    /// Interrupts for vectors the image does not route.
    pub unrouted: u32,
    /// The loop's counters per function and queue index.
    pub books: [[Book; PAIRS]; FUNCTIONS],
    /// `irq::MODEL_TIME_NS` when the card was registered for the timer (its clock then at 0).
    pub clock_base: u64,
    /// Egress capture.
    pub wire: WireLog,
    /// Housekeeping rounds run.
    pub hk_rounds: u64,
    /// A program swap due under traffic: (port, frames received first, program handle). The
    /// first poll of that port to start once the tally received that many frames runs the new
    /// program.
    pub pending_swap: Option<(usize, u32, u16)>,
    /// The last swap done that way: (frames received then, the handle it replaced).
    pub swapped: Option<(u32, Option<u16>)>,
}

/// Why a port bench could not be brought up.
#[derive(Clone, Copy, Debug)]
pub enum BenchError {
    /// A ring or buffer size, or a function's configuration, the core does not take.
    Config,
    /// What the port reported.
    Port(onic_embed::port::PortError),
}

impl core::fmt::Display for BenchError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::Config => f.write_str("a ring, buffer or function configuration was refused"),
            Self::Port(e) => write!(f, "{e}"),
        }
    }
}

/// Port `func` over `host`: [`PAIRS`] queue indices, the image's ring sizes and buffer cycle,
/// opened.
fn open_port<'m, 'c>(host: &Host<'m, 'c>, func: u8) -> Result<Port<'m, 'c>, BenchError> {
    let queues = PAIRS as u16;
    let cfg = PortConfig {
        func,
        max_queues: queues,
        queues,
        tx_ring: RingSizeIdx::new(TX_RING).map_err(|_| BenchError::Config)?,
        rx_ring: RingSizeIdx::new(RX_RING).map_err(|_| BenchError::Config)?,
        rs_fec: DeviceConfig::new(func, queues)
            .map_err(|_| BenchError::Config)?
            .rs_fec,
    };
    let bufs = datapath::rx_buffers().map_err(|_| BenchError::Config)?;
    let h = host.for_port(func);
    h.set_pool_config(Some(POOL_BULK), bufs);
    let mut port = SoloPort::new(h.regs(func), h.delay(), h, cfg).map_err(BenchError::Port)?;
    let opened = port
        .set_tuning(QueueTuning {
            bufs,
            ..QueueTuning::default()
        })
        .and_then(|()| port.open());
    match opened {
        Ok(()) => Ok(port),
        Err(e) => {
            port.remove();
            Err(BenchError::Port(e))
        }
    }
}

impl<'m, 'c> PortBench<'m, 'c> {
    /// Both functions of `model`'s card brought up and opened as ports, no program attached,
    /// the tap's steering read back from them; `clock_base` is `irq::MODEL_TIME_NS` when `model`
    /// was registered for the timer.
    ///
    /// # Errors
    ///
    /// [`BenchError`]; a port brought up before the failure is removed.
    pub fn new(model: &'m Model<'c>, clock_base: u64) -> Result<Self, BenchError> {
        let host: Host<'m, 'c> = ModelHost::new(model);
        let p0 = open_port(&host, 0)?;
        let p1 = match open_port(&host, 1) {
            Ok(p) => p,
            Err(e) => {
                p0.remove();
                return Err(e);
            }
        };
        let steer = [Steering::read_back(p0.port()), Steering::read_back(p1.port())];
        Ok(Self {
            model,
            host,
            ports: [p0, p1],
            progs: [None, None],
            shared: Rc::new(RefCell::new(Shared {
                tally: Tally::new(),
                steer,
            })),
            tx_pending: [[false; PAIRS]; FUNCTIONS],
            in_flight: [[0; PAIRS]; FUNCTIONS],
            poll_errors: 0,
            raised: [[0; MSIX_VECTORS]; FUNCTIONS],
            unrouted: 0,
            books: [[Book::default(); PAIRS]; FUNCTIONS],
            clock_base,
            wire: WireLog::default(),
            hk_rounds: 0,
            pending_swap: None,
            swapped: None,
        })
    }

    /// Attaches `code` (behind the tap) to the host; the handle is what [`PortBench::progs`]
    /// takes.
    pub fn attach(&self, code: Code) -> u16 {
        self.host.attach(Tapped::new(code, self.shared.clone()))
    }

    /// Frames on the stack and redirect-in rings of both ports, as the loop knows them, plus
    /// the queue indices whose XDP_TX frames wait for their reclaim.
    #[must_use]
    pub fn tx_in_flight(&self) -> u32 {
        let pending = self.tx_pending.iter().flatten().filter(|&&p| p).count() as u32;
        self.in_flight.iter().flatten().sum::<u32>() + pending
    }

    /// Stops and removes both ports and frees the host's spare pages; returns whether both
    /// stopped.
    pub fn teardown(self) -> bool {
        let mut stopped = true;
        for mut p in self.ports {
            stopped &= p.stop().is_ok();
            p.remove();
        }
        self.host.free_spare();
        stopped
    }
}

/// One round of the main loop: the tick's housekeeping if due, one step of the model, its
/// interrupts raised on their vectors, and a poll of every queue index their handlers marked.
/// Returns whether anything happened.
pub fn service(b: &mut PortBench<'_, '_>) -> bool {
    if irq::take_housekeeping() > 0 {
        housekeeping(b);
    }
    let (progress, interrupted) = datapath::model_step(b.model, &mut b.wire, &mut b.raised, &mut b.unrouted);
    let polled = datapath::poll_marked(|f, q| poll(b, f, q));
    progress || polled || interrupted
}

/// Polls queue index `q` of port `f` once (NAPI) through the port, then reads and gives back
/// what the port passed to its stack (the tap's place when no program runs). Returns whether
/// it polled.
fn poll(b: &mut PortBench<'_, '_>, f: usize, q: usize) -> bool {
    let (Some(port), Some(book), Ok(qid)) = (
        b.ports.get_mut(f),
        b.books.get_mut(f).and_then(|r| r.get_mut(q)),
        u16::try_from(q),
    ) else {
        return false;
    };
    if book.error.is_some() {
        return false;
    }
    if let Some((pf, after, prog)) = b.pending_swap {
        let received = b.shared.borrow().tally.received;
        if pf == f && received >= after {
            b.swapped = Some((received, b.progs[f].replace(prog)));
            b.pending_swap = None;
        }
    }
    let prog = b.progs[f];
    let (r, outcome) = port.poll_outcome(qid, BUDGET as u32, (), prog);
    b.tx_pending[f][q] = r.tx_pending;
    book.polls += 1;
    if r.done as usize >= BUDGET {
        book.exhausted += 1;
    }
    if r.error {
        b.poll_errors += 1;
        // The RX queue's error, else the XDP_TX ring's: the port reports either one.
        book.error = outcome.and_then(|o| o.rx.error).or_else(|| {
            port.inspect(qid)
                .and_then(|v| v.pair.rx.error().or(v.pair.tx.error()))
        });
    } else if r.more {
        irq::reschedule_napi(f, q);
    }
    let shared = &b.shared;
    // CAST: f < FUNCTIONS.
    b.host.for_port(f as u8).drain_received(|rx| {
        if prog.is_none() {
            shared.borrow_mut().tap(rx.port, rx.qid, rx.data());
        }
    });
    true
}

/// The tick's deferred work (see the module docs).
fn housekeeping(b: &mut PortBench<'_, '_>) {
    b.hk_rounds += 1;
    for (f, port) in b.ports.iter_mut().enumerate() {
        for q in 0..PAIRS {
            // CAST: q < PAIRS.
            let qid = q as u16;
            let stack = port.queue::<TxLock, _>(qid, |p, t| p.tx_clean(t, RECLAIM_BUDGET));
            let xmit = port.queue::<XmitLock, _>(qid, |p, t| p.xmit_clean(t));
            let book = &mut b.books[f][q];
            book.hk_completed += u64::from(stack.packets);
            book.tx_done += u64::from(stack.packets);
            b.in_flight[f][q] = stack.in_flight + xmit.in_flight;
            let short = port
                .inspect(qid)
                .is_some_and(|v| v.pair.rx.posted() < v.pair.rx.options().refill_batch);
            if book.error.is_some() {
                continue;
            }
            if short {
                book.refill_polls += 1;
            }
            if b.tx_pending[f][q] || short {
                irq::reschedule_napi(f, q);
            }
        }
    }
}

/// Runs the main loop until `done` holds or `timeout_ns` passes, halting while idle. Returns
/// whether `done` held.
pub fn run_until(
    b: &mut PortBench<'_, '_>,
    timeout_ns: u64,
    done: impl FnMut(&mut PortBench<'_, '_>) -> bool,
) -> bool {
    datapath::main_loop(b, timeout_ns, service, done)
}

/// Runs the main loop until every frame of the phase that fits its buffer arrived, `returned`
/// came back and nothing is on a TX ring; returns whether that happened in time.
pub fn settle(b: &mut PortBench<'_, '_>, returned: u32) -> bool {
    run_until(b, datapath::WAIT_NS, |b| {
        let s = b.shared.borrow();
        s.tally.outstanding() == 0
            && s.tally.returned >= returned
            && b.tx_in_flight() == 0
            && !irq::napi_pending()
    })
}

/// Builds the next frame of the phase (flow `flow`, `len` bytes) and sends it from the stack TX
/// ring `q` of port `from` (no doorbell: [`spread`] flushes the batch); records what the other
/// port should see. Returns whether the ring took it.
pub fn send_tracked(b: &mut PortBench<'_, '_>, from: usize, q: usize, flow: u32, len: usize) -> bool {
    let to = 1 - from;
    let mut buf = [0u8; MAX_BUILD];
    let n = {
        let mut s = b.shared.borrow_mut();
        let Shared { tally, steer } = &mut *s;
        // CAST: to < FUNCTIONS.
        tally.add(flow, len, to as u8, &steer[to], &mut buf)
    };
    let (Some(n), Ok(qid)) = (n, u16::try_from(q)) else {
        return false;
    };
    let Some(skb) = b.host.packet(&buf[..n]) else {
        return false;
    };
    match xmit(b, from, qid, skb) {
        XmitResult::Ok | XmitResult::OkStop => true,
        XmitResult::Busy | XmitResult::Dropped => {
            onic_embed::port::Host::skb_done(&b.host, skb, None);
            false
        }
    }
}

/// Port `from` sends packet `skb` of the host on its stack TX ring `q` (no doorbell), after the
/// reclaim the port starts with; on `Busy` or `Dropped` the packet is still the caller's.
pub fn xmit(b: &mut PortBench<'_, '_>, from: usize, q: u16, skb: u32) -> XmitResult {
    let i = usize::from(q);
    let (Some(port), Some(book), Some(flight)) = (
        b.ports.get_mut(from),
        b.books.get_mut(from).and_then(|r| r.get_mut(i)),
        b.in_flight.get_mut(from).and_then(|r| r.get_mut(i)),
    ) else {
        return XmitResult::Dropped;
    };
    let mut done = TxClean::default();
    let res = port.queue::<TxLock, _>(q, |p, t| p.xmit(t, skb, &mut done));
    book.tx_done += u64::from(done.packets);
    if matches!(res, XmitResult::Ok | XmitResult::OkStop) {
        *flight += 1;
    }
    res
}

/// Port `from` sends `n` frames of the phase (frame `k`: flow and length `shape(k)`) over its
/// stack TX rings in turn, [`CHUNK`] at a time (as the bare pairs' `datapath::spread`), each chunk flushed and settled until `returned`
/// frames came back. Returns whether every frame was taken and every chunk settled.
pub fn spread(
    b: &mut PortBench<'_, '_>,
    from: usize,
    n: u32,
    returned: u32,
    shape: impl Fn(u32) -> (u32, usize),
) -> bool {
    let mut ok = true;
    let mut i = 0;
    while i < n {
        let end = (i + CHUNK).min(n);
        for k in i..end {
            let (flow, len) = shape(k);
            ok &= send_tracked(b, from, k as usize % PAIRS, flow, len);
        }
        flush(b, from);
        let back = if end == n { returned } else { 0 };
        ok &= settle(b, back);
        i = end;
    }
    ok
}

/// Injects the next frame of the phase at `port` from outside (the far end of the wire) and
/// records what port `port` should see. Returns whether the phase could track it.
pub fn inject_tracked(b: &mut PortBench<'_, '_>, port: u8, flow: u32, len: usize) -> bool {
    let mut buf = [0u8; MAX_BUILD];
    let n = {
        let mut s = b.shared.borrow_mut();
        let Shared { tally, steer } = &mut *s;
        match steer.get(usize::from(port)) {
            Some(st) => tally.add(flow, len, port, st, &mut buf),
            None => None,
        }
    };
    let Some(n) = n else {
        return false;
    };
    b.model.with(|c| c.inject(port, &buf[..n]));
    true
}

/// Whether the page census of both ports holds: every page of every pool in its cache, a ring
/// or the stack (`Port::holdings` against `ModelHost::check_census`).
pub fn census_holds(b: &mut PortBench<'_, '_>) -> bool {
    let mut holdings = alloc::vec::Vec::new();
    for p in &mut b.ports {
        match p.holdings() {
            Ok(h) => holdings.extend(h),
            Err(_) => return false,
        }
    }
    b.host.check_census(&holdings).is_ok()
}

/// Restarts queue index `q` of port `f` in place (`SoloPort::restart_queue`) and puts it back
/// in service. Returns what the port reported.
///
/// # Errors
///
/// As `SoloPort::restart_queue`; the index stays out of service.
pub fn restart_queue(b: &mut PortBench<'_, '_>, f: usize, q: usize) -> onic_embed::port::PortResult<()> {
    let (Some(port), Some(book), Ok(qid)) = (
        b.ports.get_mut(f),
        b.books.get_mut(f).and_then(|r| r.get_mut(q)),
        u16::try_from(q),
    ) else {
        return Err(onic_embed::port::PortError::Invalid);
    };
    port.restart_queue(qid)?;
    book.error = None;
    Ok(())
}

/// Rings the doorbell of every stack TX ring of port `from` (the end of an xmit-more batch).
pub fn flush(b: &mut PortBench<'_, '_>, from: usize) {
    if let Some(port) = b.ports.get_mut(from) {
        for q in 0..PAIRS as u16 {
            port.queue::<TxLock, _>(q, |p, t| p.tx_flush(t));
        }
    }
}

/// The RX counters of every queue index of both ports, as the ports publish them.
#[must_use]
pub fn rx_stats(b: &PortBench<'_, '_>) -> [[RxStats; PAIRS]; FUNCTIONS] {
    core::array::from_fn(|f| {
        core::array::from_fn(|q| {
            u16::try_from(q)
                .ok()
                .and_then(|q| b.ports[f].port().queue_counters(q))
                .map(|c| c.rx)
                .unwrap_or_default()
        })
    })
}

/// Whether `card` is back to nothing: no page or ring live, no model violation.
pub fn card_clean(card: &Card) -> (bool, onic_sim::DmaStats, usize) {
    let d = card.dma_stats();
    let v = card.violations().len();
    (d.live_pages == 0 && d.live_regions == 0 && v == 0, d, v)
}
