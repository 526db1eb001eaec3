//! The rings behind one queue index of a port, and their start and teardown.
//!
//! Each queue index `q` (one interrupt vector, one NAPI instance) owns four rings, each with
//! exactly one owning context (the rules of [`crate::port`]):
//!
//! | ring | H2C / C2H queue id | owner |
//! | --- | --- | --- |
//! | RX (C2H + CMPT) and its page pool | `q` | NAPI `q` |
//! | XDP_TX | `max + q` | NAPI `q` |
//! | the stack's TX | `q` | whoever holds netdev TX queue `q`'s lock |
//! | redirect-in (`ndo_xdp_xmit`) | `2 max + q` | whoever holds the queue's xmit lock |
//!
//! The first two form the core's [`QueuePair`]: XDP_TX frames go out of the pair's own ring, so
//! the RX poll takes no lock at all and never shares a ring with the stack. `max` is the port's
//! largest queue count ([`super::PortConfig::max_queues`]), so the ids do not move when
//! `ethtool -L` changes how many queue indices are in use.

use alloc::vec::Vec;

use onic_core::config::MAX_QUEUES_PER_FUNCTION;
use onic_core::queue::tx::TxSlot;
use onic_core::stats::QueueCounters;
use onic_core::{Device, NoPage, NoPages, QueueId, QueuePair, RingSizeIdx, TxQueue, TxQueueConfig, TxStats};

use super::contexts::{Domain, Napi, Owned, QueueTokens, TxLock, WrongContext, XmitLock};
use super::counters::{add_words, to_words, CounterBlock, QueueBlocks, QSTAT_WORDS, TX_WORDS_AT};
use super::error::{PortError, PortResult, XskRefusal};
use super::host::{Host, StatBlock};
use super::sinks::{Buf, Bufs, Done, HostPool, HostXsk, TxItem};
use crate::set::assemble_pair;
use crate::tuning::{QueueTuning, RxBufSizes};
use onic_core::queue::source::{BufSource, SourceBuf, SourceKind};

/// The TX rings of a queue index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxRole {
    /// The stack's transmit (`ndo_start_xmit`).
    Stack = 0,
    /// XDP_TX of the queue's NAPI poll.
    XdpTx = 1,
    /// Frames other devices (or this one) redirected here (`ndo_xdp_xmit`).
    Xmit = 2,
}

/// H2C queue ids per queue index.
const TX_ROLES: u16 = 3;

/// Queue indices a port may own: each uses three of the function's 64 H2C queue ids
/// (hardware.md §1.3).
pub const MAX_PORT_QUEUES: u16 = MAX_QUEUES_PER_FUNCTION / TX_ROLES;

impl TxRole {
    /// The function-relative H2C queue id of this role's ring for queue index `q` of a port
    /// owning `max` queue indices.
    #[must_use]
    pub const fn qid(self, max: u16, q: u16) -> QueueId {
        QueueId::new(self as u16 * max + q)
    }
}

/// The slot storage of a ring: on the host's heap, allocated when the ring starts and owned by
/// its queue, freed when the queue is torn down.
type Slots<T> = Vec<T>;

/// The NAPI context's rings: RX and XDP_TX with the buffer source they share (the queue's page
/// pool, or the XSK pool bound to it).
pub type NapiPair<H> =
    QueuePair<<H as Host>::Dma, Bufs<H>, TxItem<H>, Slots<Option<Buf<H>>>, Slots<TxSlot<Buf<H>, TxItem<H>>>>;
/// A TX ring that carries OS buffers only (the stack's packets, redirected-in frames).
pub type TxRing<H> = TxQueue<<H as Host>::Dma, NoPage, TxItem<H>, Vec<TxSlot<NoPage, TxItem<H>>>>;

/// A running queue index's rings, to look at (a host's checks: counters, error states, what
/// each ring holds); nothing can be changed through it.
pub struct QueueView<'a, H: Host> {
    /// The queue index.
    pub index: u16,
    /// RX and XDP_TX with their pool.
    pub pair: &'a NapiPair<H>,
    /// The stack's TX ring.
    pub stack: &'a TxRing<H>,
    /// The redirect-in ring.
    pub xmit: &'a TxRing<H>,
}

/// What queue index `q`'s NAPI context owns: its pair (RX, XDP_TX, their pool) while it runs,
/// and the counters of the pairs and rings the index ran before (written by a [`Quiet`] control
/// call at stop, published as the history block, [`StatBlock::History`]; the poll reads two of
/// its words for adaptive moderation).
pub(crate) struct NapiState<H: Host> {
    pub(crate) pair: Option<NapiPair<H>>,
    /// The queue memory of the running pair (its page pool and XDP registration).
    pub(crate) mem: Option<H::QMem>,
    /// The counters of the pairs and rings that ran before, as the history block's words.
    pub(crate) base: [u64; QSTAT_WORDS],
}

/// One queue index's rings, each in the cell of the context that owns it (module docs), and
/// their published counters.
pub(crate) struct Queue<H: Host> {
    pub(crate) napi: Owned<NapiState<H>, Napi>,
    pub(crate) stack: Owned<Option<TxRing<H>>, TxLock>,
    pub(crate) xmit: Owned<Option<TxRing<H>>, XmitLock>,
    /// One block per writer ([`StatBlock`]); read from any context.
    pub(crate) blocks: QueueBlocks,
}

impl<H: Host> Queue<H> {
    /// Queue index `q` of the port whose contexts are `domain`'s, with no ring running.
    pub(crate) fn new(domain: Domain, q: u16) -> Self {
        let napi = NapiState {
            pair: None,
            mem: None,
            base: [0; QSTAT_WORDS],
        };
        Self {
            napi: Owned::new(napi, domain, q),
            stack: Owned::new(None, domain, q),
            xmit: Owned::new(None, domain, q),
            blocks: QueueBlocks::new(),
        }
    }

    /// The three cells, opened with the tokens of the queue's contexts.
    ///
    /// # Errors
    ///
    /// `WrongContext` for tokens of another queue or port (logged: a bug of the host's entry
    /// points).
    #[allow(clippy::type_complexity)]
    pub(crate) fn open<'t>(
        &'t self,
        t: &'t mut QueueTokens<'_>,
    ) -> Result<
        (
            &'t mut NapiState<H>,
            &'t mut Option<TxRing<H>>,
            &'t mut Option<TxRing<H>>,
        ),
        PortError,
    > {
        let refused = |e: WrongContext| {
            onic_hal::error!("onic: {}", e);
            PortError::WrongContext
        };
        Ok((
            self.napi.open(&mut t.napi).map_err(refused)?,
            self.stack.open(&mut t.stack).map_err(refused)?,
            self.xmit.open(&mut t.xmit).map_err(refused)?,
        ))
    }
}

/// Storage for `n` slots on the host's heap.
fn slots<H: Host, T>(host: &H, n: u16, mut fill: impl FnMut() -> T) -> PortResult<Slots<T>> {
    host.try_vec(usize::from(n), |_| fill())
        .ok_or(PortError::NoMemory)
}

/// Publishes `qp`'s live counters (what [`napi_counters`] holds, without building it) as NAPI
/// block `to`, every group: what the control path does when it changes the rings.
#[inline]
pub(crate) fn publish_napi<H: Host>(to: &CounterBlock, qp: &NapiPair<H>) {
    let xsk = qp.pool.as_xsk().map(|x| x.stats).unwrap_or_default();
    to.store_live(qp.rx.stats(), Some(qp.tx.stats()), Some(qp.stats()), Some(&xsk));
}

/// What a NAPI poll may have changed of its pair's counters besides the RX counters, from what
/// the pair was before the poll and what the poll ran with.
#[derive(Clone, Copy)]
pub(crate) struct PollReach {
    /// The pair's XDP_TX ring had frames in flight when the poll began (its reclaim may count).
    pub(crate) tx_busy: bool,
    /// The pair's count of frames the stack refused, when the poll began.
    pub(crate) refused: u64,
    /// A program ran.
    pub(crate) prog: bool,
}

impl PollReach {
    /// The pair as a poll with (`prog`) or without a program finds it.
    #[inline]
    pub(crate) fn before<H: Host>(qp: &NapiPair<H>, prog: bool) -> Self {
        Self {
            tx_busy: qp.tx.in_flight() > 0,
            refused: qp.stats().rx_pass_refused,
            prog,
        }
    }
}

/// Publishes what a NAPI poll may have changed of `qp`'s counters as NAPI block `to`, every
/// other word being already published: the RX counters always; the XDP_TX ring's only when a
/// program ran (XDP_TX), the queue is on an XSK pool (its TX goes out on that ring) or the ring
/// had frames in flight (the reclaim); the pair's only when a program ran or the stack refused a
/// frame; the XSK counters only on an XSK pool. Without a program, traffic to the stack costs
/// the RX words' stores alone. The control path publishes every group ([`publish_napi`])
/// whenever it changes the rings, so a skipped group holds the pair's value.
#[inline]
pub(crate) fn publish_napi_poll<H: Host>(to: &CounterBlock, qp: &NapiPair<H>, reach: PollReach) {
    let xsk = qp.pool.as_xsk().map(|x| &x.stats);
    let tx = (reach.prog || reach.tx_busy || xsk.is_some()).then(|| qp.tx.stats());
    let pair = (reach.prog || qp.stats().rx_pass_refused != reach.refused).then(|| qp.stats());
    to.store_live(qp.rx.stats(), tx, pair, xsk);
}

/// A NAPI pair's counters, XDP_TX ring included.
pub(crate) fn napi_counters<H: Host>(qp: &NapiPair<H>) -> QueueCounters {
    QueueCounters {
        rx: *qp.rx.stats(),
        tx: *qp.tx.stats(),
        pair: *qp.stats(),
        pool: Default::default(),
        xsk: qp.pool.as_xsk().map(|x| x.stats).unwrap_or_default(),
    }
}

/// Where a queue index's pool pages are as its rings hold them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RingHoldings {
    /// In an RX ring slot.
    pub in_rx_ring: u64,
    /// On the XDP_TX ring, not yet completed.
    pub in_tx_flight: u64,
    /// Sent, and parked in an XDP_TX slot.
    pub tx_parked: u64,
    /// Frames the RX path handed to the host's stack (whatever became of them since).
    pub to_os: u64,
}

impl RingHoldings {
    /// What `pair` holds.
    pub(crate) fn of<H: Host>(pair: &NapiPair<H>) -> Self {
        Self {
            in_rx_ring: pair.rx.pages_in_ring(),
            in_tx_flight: pair.tx.pool_pages_in_flight(),
            tx_parked: pair.tx.pool_pages_parked(),
            to_os: pair.rx.stats().to_os,
        }
    }
}

/// A TX-only ring's counters.
pub(crate) fn tx_counters(stats: &TxStats) -> QueueCounters {
    QueueCounters {
        tx: *stats,
        ..QueueCounters::default()
    }
}

/// Where buffers go when a ring is torn down (outside any NAPI poll).
/// Drops a torn-down pair's provider after giving back the buffers of the other kind it
/// parked (a host's bug, never expected): a page to queue `q`'s page pool `mem`, a UMEM frame
/// to `q`'s XSK pool.
fn return_strays<H: Host>(host: &H, (q, mem): (u16, H::QMem), mut pool: Bufs<H>) {
    let (foreign, lost) = (pool.foreign(), pool.lost());
    if foreign > 0 {
        onic_hal::warn!(
            "onic: queue {}: {} buffers of the other source given back, {} dropped",
            q,
            foreign,
            lost
        );
    }
    while let Some(buf) = pool.take_foreign() {
        match buf {
            SourceBuf::Page(page) => host.page_put(mem, page, 0, false),
            SourceBuf::Xsk(buf) => host.xsk_free(q, buf),
        }
    }
}

const fn teardown_done<H: Host>(host: &H) -> Done<'_, H> {
    Done {
        host,
        napi_budget: None,
    }
}

/// The device of a port over host `H`.
pub(crate) type HostDevice<H> = Device<<H as Host>::Qdma, <H as Host>::Shell, <H as Host>::CardLock>;

/// What starting and stopping rings needs: the device, the host and a delay.
pub(crate) struct Rings<'p, H: Host> {
    pub(crate) dev: &'p HostDevice<H>,
    pub(crate) host: &'p H,
    pub(crate) delay: &'p mut H::Delay,
}

impl<H: Host> Rings<'_, H> {
    /// Builds and starts a TX-only ring on H2C queue `qid`, whose contexts name `vector`.
    pub(crate) fn start_tx(&mut self, qid: QueueId, vector: u16, ring: RingSizeIdx) -> PortResult<TxRing<H>> {
        let cfg = TxQueueConfig { qid, ring, vector };
        let storage = slots(self.host, ring.entries(), TxSlot::new)?;
        let mut tx = TxQueue::new(self.host.dma().clone(), cfg, storage)?;
        if let Err(e) = tx.start(self.dev, self.delay) {
            let _ = tx.teardown(self.dev, self.delay, &mut NoPages, &mut teardown_done(self.host));
            return Err(e.into());
        }
        Ok(tx)
    }

    /// Tears the TX-only ring in `cell` down (every buffer back to its owner, its slot storage
    /// freed) and empties the cell; returns the ring's counters, or `None` if the cell was empty.
    pub(crate) fn stop_tx(&mut self, cell: &mut Option<TxRing<H>>, q: u16) -> Option<TxStats> {
        let tx = cell.take()?;
        let stats = *tx.stats();
        let mut done = teardown_done(self.host);
        if let (Err(e), _) = tx.teardown(self.dev, self.delay, &mut NoPages, &mut done) {
            onic_hal::warn!("onic: TX ring of queue {} teardown: {}", q, e);
        }
        Some(stats)
    }

    /// Builds and starts queue index `q`'s NAPI pair into `napi` (which holds none): its queue
    /// memory, RX ring (filled from `source`: the page pool, or the XSK pool the host bound to
    /// `q`) and XDP_TX ring on H2C queue `xdp_qid`; returns the queue memory. On failure `napi`
    /// holds no pair and every buffer is back.
    pub(crate) fn start_napi(
        &mut self,
        napi: &mut NapiState<H>,
        (q, xdp_qid): (u16, QueueId),
        source: SourceKind,
        tuning: &QueueTuning,
        rings: (RingSizeIdx, RingSizeIdx),
    ) -> PortResult<H::QMem> {
        let mem = self.build_napi(napi, (q, xdp_qid), source, tuning, rings)?;
        napi.mem = Some(mem);
        let started = match napi.pair.as_mut() {
            Some(qp) => qp.start(self.dev, self.delay),
            None => Ok(()),
        };
        if let Err(e) = started {
            // Torn down as any pair: every buffer back, the queue memory freed.
            self.stop_napi(napi, q);
            return Err(e.into());
        }
        Ok(mem)
    }

    /// [`Rings::start_napi`]'s pair, built where it stays, in `napi`: a frame of its own, so
    /// that what it builds with is off the stack before the rings start (the kernel's stack is
    /// 16 KiB, and starting a ring goes deep).
    #[inline(never)]
    fn build_napi(
        &mut self,
        napi: &mut NapiState<H>,
        (q, xdp_qid): (u16, QueueId),
        source: SourceKind,
        tuning: &QueueTuning,
        (tx_ring, rx_ring): (RingSizeIdx, RingSizeIdx),
    ) -> PortResult<H::QMem> {
        let spec = match source {
            SourceKind::Pages => tuning.pair_spec(q, xdp_qid, (tx_ring, rx_ring)),
            // UMEM frames: the buffer a chunk holds (checked when the queue was switched; a
            // pool bound since with smaller chunks is refused here).
            SourceKind::Xsk => {
                let room = self
                    .host
                    .xsk_bound(q)
                    .ok_or(PortError::Xsk(XskRefusal::NotBound))?;
                let buf = tuning
                    .xsk_buf(q, room)
                    .map_err(|need| PortError::Xsk(XskRefusal::ChunkTooSmall { room, need }))?;
                QueueTuning {
                    bufs: RxBufSizes::all(buf),
                    ..*tuning
                }
                .pair_spec(q, xdp_qid, (tx_ring, rx_ring))
            }
        };
        let rx_slots = slots(self.host, rx_ring.entries(), || None)?;
        let tx_slots = slots(self.host, tx_ring.entries(), TxSlot::new)?;
        let mem = self
            .host
            .qmem_new(q, u32::from(rx_ring.entries()), source)
            .map_err(PortError::Host)?;
        let pool = match source {
            SourceKind::Pages => BufSource::pages(HostPool::new(self.host.clone(), mem)),
            SourceKind::Xsk => match HostXsk::new(self.host.clone(), q, spec.rx.buf.bytes()) {
                Some(x) => BufSource::xsk(x),
                None => {
                    self.host.qmem_free(mem);
                    return Err(PortError::NoMemory);
                }
            },
        };
        match assemble_pair(self.host.dma().clone(), &spec, (rx_slots, tx_slots), pool) {
            Ok(qp) => {
                napi.pair = Some(qp);
                Ok(mem)
            }
            Err(_) => {
                self.host.qmem_free(mem);
                Err(PortError::NoMemory)
            }
        }
    }

    #[inline(never)]
    pub(crate) fn stop_napi(&mut self, state: &mut NapiState<H>, q: u16) -> Option<QueueCounters> {
        let qp = state.pair.take()?;
        let now = napi_counters(&qp);
        let mut done = teardown_done(self.host);
        let (r, pool, _, _) = qp.teardown(self.dev, self.delay, &mut done);
        if let Err(e) = r {
            onic_hal::warn!("onic: queue {} teardown: {}", q, e);
        }
        match state.mem.take() {
            Some(mem) => {
                return_strays(self.host, (q, mem), pool);
                self.host.qmem_free(mem);
            }
            None => drop(pool),
        }
        Some(now)
    }

    /// Starts every ring of queue index `q` (TX-only rings first, then the NAPI pair, all as
    /// `tuning` says) into its cells, opened with the tokens of the queue's stopped contexts;
    /// returns the pair's queue memory. On failure, what was started is torn down again.
    ///
    /// # Errors
    ///
    /// `WrongContext` for tokens of another queue; `NoMemory`, the core's errors.
    pub(crate) fn start_queue(
        &mut self,
        queue: &Queue<H>,
        tokens: &mut QueueTokens<'_>,
        tuning: &QueueTuning,
        (max, source): (u16, SourceKind),
        (tx_ring, rx_ring): (RingSizeIdx, RingSizeIdx),
    ) -> PortResult<H::QMem> {
        let q = tokens.napi.index();
        let (napi, stack_cell, xmit_cell) = queue.open(tokens)?;
        let mut stack = self.start_tx(TxRole::Stack.qid(max, q), q, tx_ring)?;
        // The stack's ring has the kernel's watchdog (ndo_tx_timeout) for a stalled device; the
        // core's own stall limit is for the rings nobody else watches (unless the host asks).
        stack.set_stall_limit(tuning.stack_stall_reclaims);
        let xmit = match self.start_tx(TxRole::Xmit.qid(max, q), q, tx_ring) {
            Ok(x) => x,
            Err(e) => {
                self.stop_tx(&mut Some(stack), q);
                return Err(e);
            }
        };
        let xdp_qid = TxRole::XdpTx.qid(max, q);
        let mem = match self.start_napi(napi, (q, xdp_qid), source, tuning, (tx_ring, rx_ring)) {
            Ok(mem) => mem,
            Err(e) => {
                self.stop_tx(&mut Some(stack), q);
                self.stop_tx(&mut Some(xmit), q);
                return Err(e);
            }
        };
        *stack_cell = Some(stack);
        *xmit_cell = Some(xmit);
        Ok(mem)
    }

    /// Builds queue index `q`'s NAPI pair (RX and XDP_TX) again on `source`, its other rings
    /// running on: the old pair is torn down first (its pages back to the page pool, its UMEM
    /// frames to the XSK pool, its application TX frames to the completion ring), its counters
    /// join the index's history. If the new pair does not start, the old source is tried again,
    /// so that the queue keeps receiving. Process context, the queue's NAPI context stopped.
    ///
    /// # Errors
    ///
    /// `WrongContext` for tokens of another queue; `NoMemory`, the host's or the core's error
    /// when the pair on `source` did not start (the queue runs on its old source again, or has
    /// no NAPI pair when that failed too: stop and open the port to recover).
    pub(crate) fn switch_napi(
        &mut self,
        queue: &Queue<H>,
        tokens: &mut QueueTokens<'_>,
        tuning: &QueueTuning,
        (max, source): (u16, SourceKind),
        (tx_ring, rx_ring): (RingSizeIdx, RingSizeIdx),
    ) -> PortResult<H::QMem> {
        let q = tokens.napi.index();
        let (napi, _, _) = queue.open(tokens)?;
        let old = napi.pair.as_ref().map_or(SourceKind::Pages, |p| p.pool.kind());
        if let Some(n) = self.stop_napi(napi, q) {
            add_words(&mut napi.base, &to_words(&n));
        }
        let xdp_qid = TxRole::XdpTx.qid(max, q);
        let rings = (tx_ring, rx_ring);
        let r = self.start_napi(napi, (q, xdp_qid), source, tuning, rings);
        if let Err(e) = &r {
            onic_hal::warn!("onic: queue {} on its new buffer source: {}", q, e);
            // Back on the old source, if it starts; the error stays the new source's.
            let _ = self.start_napi(napi, (q, xdp_qid), old, tuning, rings);
        }
        publish_history(&queue.blocks, napi);
        r
    }

    /// Restarts every ring of queue index `q` in place (the core's restarts: each ring's buffers
    /// and pages back to their owners, contexts programmed again, counters kept): the recovery
    /// from a ring in its error state or a TX timeout. Process context.
    ///
    /// # Errors
    ///
    /// `WrongContext` for tokens of another queue; the first failure (the device did not take a
    /// context command); every ring is tried.
    pub(crate) fn restart_queue(&mut self, queue: &Queue<H>, tokens: &mut QueueTokens<'_>) -> PortResult<()> {
        let q = tokens.napi.index();
        let (napi, stack, xmit) = queue.open(tokens)?;
        let mut done = teardown_done(self.host);
        let mut first = Ok(());
        let mut note = |r: onic_core::Result<()>| {
            if let (Err(e), Ok(())) = (r, &first) {
                first = Err(PortError::Core(e));
            }
        };
        for tx in [&mut *stack, &mut *xmit].into_iter().flatten() {
            note(tx.restart(self.dev, self.delay, &mut NoPages, &mut done));
        }
        if let Some(n) = &mut napi.pair {
            note(n.restart(self.dev, self.delay, &mut done));
        }
        // What the restart counted (restarts, abandoned completions, aborted buffers) is
        // published now, as each ring's owner would: the user sees it without waiting for the
        // next poll or transmit.
        if let Some(qp) = &napi.pair {
            publish_napi(queue.blocks.get(StatBlock::Napi), qp);
        }
        for (ring, block) in [(&*stack, StatBlock::Stack), (&*xmit, StatBlock::Xmit)] {
            if let Some(tx) = ring {
                publish_tx(queue.blocks.get(block), tx.stats());
            }
        }
        if let Err(e) = first {
            onic_hal::error!("onic: restart of queue {} failed: {}", q, e);
        }
        first
    }

    /// Tears queue index `q`'s rings down, the cells opened with the tokens of its stopped
    /// contexts ([`Rings::stop_rings`]).
    ///
    /// # Errors
    ///
    /// `WrongContext` for tokens of another queue (nothing is torn down).
    pub(crate) fn stop_queue(&mut self, queue: &Queue<H>, tokens: &mut QueueTokens<'_>) -> PortResult<()> {
        let q = tokens.napi.index();
        let (napi, stack, xmit) = queue.open(tokens)?;
        self.stop_rings((napi, stack, xmit), &queue.blocks, q);
        Ok(())
    }

    /// Tears queue index `q`'s rings down; their counters join the index's history, which is
    /// published as the history block (the other blocks start again from zero), so the netdev's
    /// totals survive down/up.
    pub(crate) fn stop_rings(
        &mut self,
        (napi, stack, xmit): (&mut NapiState<H>, &mut Option<TxRing<H>>, &mut Option<TxRing<H>>),
        blocks: &QueueBlocks,
        q: u16,
    ) {
        let mut ran = QueueCounters::default();
        if let Some(s) = self.stop_tx(stack, q) {
            ran += tx_counters(&s);
        }
        if let Some(x) = self.stop_tx(xmit, q) {
            ran += tx_counters(&x);
        }
        if let Some(n) = self.stop_napi(napi, q) {
            ran += n;
        }
        add_words(&mut napi.base, &to_words(&ran));
        publish_history(blocks, napi);
        let zero = TxStats::default();
        publish_tx(blocks.get(StatBlock::Stack), &zero);
        publish_tx(blocks.get(StatBlock::Xmit), &zero);
    }
}

/// Publishes the index's history block, then its NAPI block as the pair now running counts it
/// (zero for a new pair or for none). Between the two writes a reader may count a stopped pair
/// twice for an instant; the blocks agree again once both are written.
fn publish_history<H: Host>(blocks: &QueueBlocks, napi: &NapiState<H>) {
    blocks.get(StatBlock::History).store(0, &napi.base);
    let live = blocks.get(StatBlock::Napi);
    match &napi.pair {
        Some(qp) => publish_napi(live, qp),
        None => live.store(0, &[0; QSTAT_WORDS]),
    }
}

/// Publishes a TX-only ring's counters (the stack's or the redirect-in ring's block): only the
/// block's TX words, which are all such a block ever holds.
#[inline]
pub(crate) fn publish_tx(to: &CounterBlock, stats: &TxStats) {
    to.store(TX_WORDS_AT, &stats.to_words());
}
