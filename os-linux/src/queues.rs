//! The rings behind one queue index of a port, and their start and teardown.
//!
//! Each queue index `q` (one MSI-X vector, one NAPI instance) owns four rings, each with exactly
//! one owning context (the locking rules of `os-linux/README.md`):
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
//! largest queue count ([`crate::port::PortConfig::max_queues`]), so the ids do not move when
//! `ethtool -L` changes how many queue indices are in use.

use alloc::vec::Vec;

use onic_core::config::MAX_QUEUES_PER_FUNCTION;
use onic_core::queue::tx::TxSlot;
use onic_core::stats::QueueCounters;
use onic_core::{
    Device, NoPage, NoPages, QueueId, QueuePair, RingSizeIdx, RxOptions, RxQueue, RxQueueConfig, TxQueue,
    TxQueueConfig, TxStats,
};
use onic_hal::{DelayNs, DmaMemory, RegisterWindow, SharedLock};

use crate::contexts::{Domain, Napi, Owned, QueueTokens, TxLock, WrongContext, XmitLock};
use crate::dp::{self, Done, OsPage, OsPool, TxItem};
use crate::errno::{self, Errno, EINVAL, ENOMEM};
use crate::os::{Os, PacketMap, StatBlock};

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

/// The slot storage of a ring: on the kernel heap, allocated when the ring starts and owned by
/// its queue, freed when the queue is torn down.
type Slots<T> = Vec<T>;

/// The NAPI context's rings: RX and XDP_TX with the page pool they share.
pub(crate) type NapiPair<K, D> =
    QueuePair<D, OsPool<K, D>, TxItem<K>, Slots<Option<OsPage>>, Slots<TxSlot<OsPage, TxItem<K>>>>;
/// A TX ring that carries OS buffers only (the stack's packets, redirected-in frames).
pub(crate) type TxRing<K, D> = TxQueue<D, NoPage, TxItem<K>, Slots<TxSlot<NoPage, TxItem<K>>>>;

/// What queue index `q`'s NAPI context owns: its pair (RX, XDP_TX, their pool) while it runs,
/// and the counters of the pairs and rings the index ran before (written by a [`Quiet`] control
/// call at stop, published with the poll's own counters).
pub(crate) struct NapiState<K: Os, D: DmaMemory + PacketMap + Clone> {
    pub(crate) pair: Option<NapiPair<K, D>>,
    pub(crate) base: QueueCounters,
}

/// One queue index's rings, each in the cell of the context that owns it (module docs).
pub(crate) struct Queue<K: Os, D: DmaMemory + PacketMap + Clone> {
    pub(crate) napi: Owned<NapiState<K, D>, Napi>,
    pub(crate) stack: Owned<Option<TxRing<K, D>>, TxLock>,
    pub(crate) xmit: Owned<Option<TxRing<K, D>>, XmitLock>,
}

impl<K: Os, D: DmaMemory + PacketMap + Clone> Queue<K, D> {
    /// Queue index `q` of the port whose contexts are `domain`'s, with no ring running.
    pub(crate) fn new(domain: Domain, q: u16) -> Self {
        let napi = NapiState {
            pair: None,
            base: QueueCounters::default(),
        };
        Self {
            napi: Owned::new(napi, domain, q),
            stack: Owned::new(None, domain, q),
            xmit: Owned::new(None, domain, q),
        }
    }

    /// The three cells, opened with the tokens of the queue's contexts.
    ///
    /// # Errors
    ///
    /// `EINVAL` for tokens of another queue or port.
    #[allow(clippy::type_complexity)]
    pub(crate) fn open<'t>(
        &'t self,
        t: &'t mut QueueTokens<'_>,
    ) -> Result<
        (
            &'t mut NapiState<K, D>,
            &'t mut Option<TxRing<K, D>>,
            &'t mut Option<TxRing<K, D>>,
        ),
        Errno,
    > {
        let refused = |e: WrongContext| {
            onic_hal::error!("onic: {}", e);
            EINVAL
        };
        Ok((
            self.napi.open(&mut t.napi).map_err(refused)?,
            self.stack.open(&mut t.stack).map_err(refused)?,
            self.xmit.open(&mut t.xmit).map_err(refused)?,
        ))
    }
}

/// Storage for `n` slots on the heap, or `ENOMEM`.
fn slots<T>(n: u16, mut fill: impl FnMut() -> T) -> Result<Slots<T>, Errno> {
    crate::heap::try_vec_with(usize::from(n), |_| fill()).ok_or(ENOMEM)
}

/// A NAPI pair's counters, XDP_TX ring included.
pub(crate) fn napi_counters<K: Os, D: DmaMemory + PacketMap + Clone>(qp: &NapiPair<K, D>) -> QueueCounters {
    QueueCounters {
        rx: *qp.rx.stats(),
        tx: *qp.tx.stats(),
        pair: *qp.stats(),
        pool: Default::default(),
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
fn teardown_done<'a, K: Os, D: PacketMap>(os: &'a K, map: &'a D) -> Done<'a, K, D> {
    Done {
        os,
        map,
        napi_budget: None,
    }
}

/// What starting and stopping rings needs: the device, the memory, the OS and a delay.
pub(crate) struct Rings<'p, R: RegisterWindow, C: SharedLock, D, K, L> {
    pub(crate) dev: &'p Device<R, R, C>,
    pub(crate) dma: &'p D,
    pub(crate) os: &'p K,
    pub(crate) delay: &'p mut L,
}

impl<R: RegisterWindow, C: SharedLock, D: DmaMemory + PacketMap + Clone, K: Os + Clone, L: DelayNs>
    Rings<'_, R, C, D, K, L>
{
    /// Builds and starts a TX-only ring on H2C queue `qid`, whose contexts name `vector`.
    pub(crate) fn start_tx(
        &mut self,
        qid: QueueId,
        vector: u16,
        ring: RingSizeIdx,
    ) -> Result<TxRing<K, D>, Errno> {
        let cfg = TxQueueConfig { qid, ring, vector };
        let storage = slots(ring.entries(), TxSlot::new)?;
        let mut tx = TxQueue::new(self.dma.clone(), cfg, storage).map_err(|_| ENOMEM)?;
        if let Err(e) = tx.start(self.dev, self.delay) {
            let _ = tx.teardown(
                self.dev,
                self.delay,
                &mut NoPages,
                &mut teardown_done(self.os, self.dma),
            );
            return Err(errno::from_core(&e));
        }
        Ok(tx)
    }

    /// Tears the TX-only ring in `cell` down (every buffer back to its owner, its slot storage
    /// freed) and empties the cell; returns the ring's counters, or `None` if the cell was empty.
    pub(crate) fn stop_tx(&mut self, cell: &mut Option<TxRing<K, D>>, q: u16) -> Option<TxStats> {
        let tx = cell.take()?;
        let stats = *tx.stats();
        let mut done = teardown_done(self.os, self.dma);
        if let (Err(e), _) = tx.teardown(self.dev, self.delay, &mut NoPages, &mut done) {
            onic_hal::warn!("onic: TX ring of queue {} teardown: {}", q, e);
        }
        Some(stats)
    }

    /// Builds and starts queue index `q`'s NAPI pair: its page pool, RX ring (filled from the
    /// pool) and XDP_TX ring on H2C queue `xdp_qid`.
    pub(crate) fn start_napi(
        &mut self,
        q: u16,
        xdp_qid: QueueId,
        tx_ring: RingSizeIdx,
        rx_ring: RingSizeIdx,
    ) -> Result<(NapiPair<K, D>, K::QMem), Errno> {
        let mut rxc = RxQueueConfig::new(QueueId::new(q));
        rxc.desc_ring = rx_ring;
        rxc.cmpt_ring = rx_ring;
        let txc = TxQueueConfig {
            qid: xdp_qid,
            ring: tx_ring,
            vector: q,
        };
        let rx_slots = slots(rx_ring.entries(), || None)?;
        let tx_slots = slots(tx_ring.entries(), TxSlot::new)?;
        let mem = self.os.qmem_new(q, u32::from(rx_ring.entries()))?;
        let rx = RxQueue::new(self.dma.clone(), rxc, RxOptions::for_queue(&rxc), rx_slots);
        let tx = TxQueue::new(self.dma.clone(), txc, tx_slots);
        let (rx, tx) = match (rx, tx) {
            (Ok(rx), Ok(tx)) => (rx, tx),
            (rx, tx) => {
                drop((rx, tx));
                self.os.qmem_free(mem);
                return Err(ENOMEM);
            }
        };
        let pool = OsPool::new(self.os.clone(), mem, self.dma.clone());
        let mut qp = QueuePair::new(rx, tx, pool);
        if let Err(e) = qp.start(self.dev, self.delay) {
            let mut done = teardown_done(self.os, self.dma);
            let (_, pool, _, _) = qp.teardown(self.dev, self.delay, &mut done);
            drop(pool);
            self.os.qmem_free(mem);
            return Err(errno::from_core(&e));
        }
        Ok((qp, mem))
    }

    /// Tears the NAPI pair in `cell` down (every page back to the pool, the pool destroyed, the
    /// slot storage freed) and empties the cell; returns the pair's counters, or `None` if the
    /// cell was empty.
    pub(crate) fn stop_napi(&mut self, cell: &mut Option<NapiPair<K, D>>, q: u16) -> Option<QueueCounters> {
        let qp = cell.take()?;
        let now = napi_counters(&qp);
        let mut done = teardown_done(self.os, self.dma);
        let (r, pool, _, _) = qp.teardown(self.dev, self.delay, &mut done);
        if let Err(e) = r {
            onic_hal::warn!("onic: queue {} teardown: {}", q, e);
        }
        let mem = pool.mem();
        drop(pool);
        self.os.qmem_free(mem);
        Some(now)
    }

    /// Starts every ring of queue index `q` (TX-only rings first, then the NAPI pair) into its
    /// cells, opened with the tokens of the queue's stopped contexts; returns the pair's queue
    /// memory. On failure, what was started is torn down again.
    ///
    /// # Errors
    ///
    /// `EINVAL` for tokens of another queue; `ENOMEM`, `EIO`.
    pub(crate) fn start_queue(
        &mut self,
        queue: &Queue<K, D>,
        tokens: &mut QueueTokens<'_>,
        max: u16,
        tx_ring: RingSizeIdx,
        rx_ring: RingSizeIdx,
    ) -> Result<K::QMem, Errno> {
        let q = tokens.napi.index();
        let (napi, stack_cell, xmit_cell) = queue.open(tokens)?;
        let mut stack = self.start_tx(TxRole::Stack.qid(max, q), q, tx_ring)?;
        // The stack's ring has the kernel's watchdog (ndo_tx_timeout) for a stalled device; the
        // core's own stall limit is for the rings nobody else watches.
        stack.set_stall_limit(0);
        let xmit = match self.start_tx(TxRole::Xmit.qid(max, q), q, tx_ring) {
            Ok(x) => x,
            Err(e) => {
                self.stop_tx(&mut Some(stack), q);
                return Err(e);
            }
        };
        let (pair, mem) = match self.start_napi(q, TxRole::XdpTx.qid(max, q), tx_ring, rx_ring) {
            Ok(n) => n,
            Err(e) => {
                self.stop_tx(&mut Some(stack), q);
                self.stop_tx(&mut Some(xmit), q);
                return Err(e);
            }
        };
        *stack_cell = Some(stack);
        *xmit_cell = Some(xmit);
        napi.pair = Some(pair);
        Ok(mem)
    }

    /// Restarts every ring of queue index `q` in place (the core's restarts: each ring's buffers
    /// and pages back to their owners, contexts programmed again, counters kept): the recovery
    /// from a ring in its error state or a TX timeout. Process context.
    ///
    /// # Errors
    ///
    /// `EINVAL` for tokens of another queue; the first failure (`EIO`: the device did not take a
    /// context command); every ring is tried.
    pub(crate) fn restart_queue(
        &mut self,
        queue: &Queue<K, D>,
        tokens: &mut QueueTokens<'_>,
    ) -> Result<(), Errno> {
        let q = tokens.napi.index();
        let (napi, stack, xmit) = queue.open(tokens)?;
        let mut done = teardown_done(self.os, self.dma);
        let mut first = Ok(());
        let mut note = |r: onic_core::Result<()>| {
            if let (Err(e), Ok(())) = (&r, &first) {
                first = Err(errno::from_core(e));
            }
        };
        for tx in [stack, xmit].into_iter().flatten() {
            note(tx.restart(self.dev, self.delay, &mut NoPages, &mut done));
        }
        if let Some(n) = &mut napi.pair {
            note(n.restart(self.dev, self.delay, &mut done));
        }
        if let Err(e) = first {
            onic_hal::error!("onic: restart of queue {} failed: errno {}", q, e);
        }
        first
    }

    /// Tears queue index `q`'s rings down, the cells opened with the tokens of its stopped
    /// contexts ([`Rings::stop_rings`]).
    ///
    /// # Errors
    ///
    /// `EINVAL` for tokens of another queue (nothing is torn down).
    pub(crate) fn stop_queue(
        &mut self,
        queue: &Queue<K, D>,
        tokens: &mut QueueTokens<'_>,
    ) -> Result<(), Errno> {
        let q = tokens.napi.index();
        let (napi, stack, xmit) = queue.open(tokens)?;
        self.stop_rings(napi, stack, xmit, q);
        Ok(())
    }

    /// Tears queue index `q`'s rings down; their counters join the index's history, which is
    /// published as the NAPI block (the other blocks start again from zero), so the netdev's
    /// totals survive down/up.
    pub(crate) fn stop_rings(
        &mut self,
        napi: &mut NapiState<K, D>,
        stack: &mut Option<TxRing<K, D>>,
        xmit: &mut Option<TxRing<K, D>>,
        q: u16,
    ) {
        if let Some(s) = self.stop_tx(stack, q) {
            napi.base += tx_counters(&s);
        }
        if let Some(x) = self.stop_tx(xmit, q) {
            napi.base += tx_counters(&x);
        }
        if let Some(n) = self.stop_napi(&mut napi.pair, q) {
            napi.base += n;
        }
        self.os
            .stats_publish(q, StatBlock::Napi, &dp::to_words(&napi.base));
        let zero = dp::to_words(&QueueCounters::default());
        self.os.stats_publish(q, StatBlock::Stack, &zero);
        self.os.stats_publish(q, StatBlock::Xmit, &zero);
    }
}
