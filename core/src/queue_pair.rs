//! A queue pair: one RX queue, one TX queue and the page pool they share, owned by one context
//! (one NAPI instance, one core of a bare-metal loop).
//!
//! Polling a pair touches only that pair: its own TX reclaim, then its own RX queue. The reference
//! driver reclaims every TX queue of the device on every RX poll, which costs O(queues) per poll
//! and makes all polling contexts contend on all TX rings; here each TX queue is reclaimed by the
//! context that owns it (on its own poll and when transmitting).
//!
//! XDP_TX goes out on the pair's own TX queue, so the page stays within the context that owns its
//! pool: when the device is done, it is recycled straight into the pool's cache.

use onic_hal::{DelayNs, DmaMemory, RegisterWindow, SharedLock};

use crate::device::Device;
use crate::error::{QueueError, Result};
use crate::pool::{PageCounts, PagePool, PageProvider};
use crate::qdma::Doorbells;
use crate::rx::{PollOutcome, RxFrame, RxOutcome, RxQueue, RxSink};
use crate::tx::{PoolFrame, Reclaimed, TxDone, TxFrame, TxQueue};

/// What a frame sink decided for a received frame (the XDP verdicts that concern buffers).
#[derive(Debug)]
pub enum Verdict<Pg> {
    /// Drop it: the page is recycled.
    Drop(RxFrame<Pg>),
    /// The sink passed the page on to the OS (it keeps it).
    Pass,
    /// Send it back out on the pair's TX queue (XDP_TX).
    Tx(RxFrame<Pg>),
    /// The sink queued the page on another TX queue or device (XDP_REDIRECT); that queue's
    /// completion gives it back to this pool (through its [`crate::pool::RecycleRing`]).
    Redirected,
}

/// Where a queue pair's received frames go.
pub trait FrameSink<Pg> {
    /// Decides what becomes of one frame.
    fn frame(&mut self, frame: RxFrame<Pg>) -> Verdict<Pg>;
}

impl<Pg, T: FnMut(RxFrame<Pg>) -> Verdict<Pg>> FrameSink<Pg> for T {
    fn frame(&mut self, frame: RxFrame<Pg>) -> Verdict<Pg> {
        self(frame)
    }
}

/// Counters of a pair beyond those of its queues.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PairStats {
    /// Frames the sink sent back out (XDP_TX), queued or not.
    pub rx_xdp_tx: u64,
    /// Frames the sink redirected to another TX queue.
    pub rx_xdp_redirect: u64,
    /// XDP_TX frames that could not be queued (ring full, bad length); their pages were recycled
    /// and they count as drops. Deviation: the reference driver leaks the page here
    /// (hardware.md §15 item 13).
    pub rx_xdp_tx_errors: u64,
    /// Frames the program passed to the OS ([`QueuePair::poll_xdp`]).
    pub rx_xdp_pass: u64,
    /// Frames the XDP path recycled instead of delivering: DROP, ABORTED, unknown verdicts,
    /// failed TX and failed redirects ([`QueuePair::poll_xdp`]).
    pub rx_xdp_drop: u64,
    /// ABORTED verdicts (also in `rx_xdp_drop`).
    pub rx_xdp_aborted: u64,
    /// Raw verdicts that are no XDP action, handled like ABORTED (also in `rx_xdp_drop`): the
    /// exception counter.
    pub rx_xdp_invalid: u64,
    /// Redirects the target refused or that had no target (also in `rx_xdp_drop`).
    pub rx_xdp_redirect_errors: u64,
    /// Frames the OS sink refused on PASS; their pages were recycled.
    pub rx_pass_refused: u64,
}

crate::counters_add_assign!(PairStats {
    rx_xdp_tx,
    rx_xdp_redirect,
    rx_xdp_tx_errors,
    rx_xdp_pass,
    rx_xdp_drop,
    rx_xdp_aborted,
    rx_xdp_invalid,
    rx_xdp_redirect_errors,
    rx_pass_refused,
});

/// What a pair poll did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PairPoll {
    /// The TX reclaim.
    pub tx: Reclaimed,
    /// The RX poll.
    pub rx: PollOutcome,
}

/// One RX queue, one TX queue, one page provider.
pub struct QueuePair<'a, D: DmaMemory, P: PageProvider, F> {
    /// The receive queue.
    pub rx: RxQueue<'a, D, P::Page>,
    /// The transmit queue.
    pub tx: TxQueue<'a, D, P::Page, F>,
    /// The page provider both queues use.
    pub pool: P,
    stats: PairStats,
}

impl<'a, D: DmaMemory, P: PageProvider, F: TxFrame> QueuePair<'a, D, P, F> {
    /// Bundles the queues and their pool.
    pub fn new(rx: RxQueue<'a, D, P::Page>, tx: TxQueue<'a, D, P::Page, F>, pool: P) -> Self {
        Self {
            rx,
            tx,
            pool,
            stats: PairStats::default(),
        }
    }

    /// Programs both queues' contexts (TX first, then RX with its ring filled), as the reference
    /// driver's open does per queue (hardware.md §13.2).
    ///
    /// # Errors
    ///
    /// As [`TxQueue::start`] and [`RxQueue::start`].
    pub fn start<Q: RegisterWindow, S: RegisterWindow, Lk: SharedLock, Dl: DelayNs>(
        &mut self,
        dev: &Device<Q, S, Lk>,
        delay: &mut Dl,
    ) -> Result<()> {
        self.tx.start(dev, delay)?;
        self.rx.start(dev, delay, &mut self.pool)
    }

    /// One poll of the pair: reclaim the TX queue, consume up to `budget` completions, and ring
    /// the TX doorbell once for the XDP_TX frames of this poll.
    pub fn poll<W: RegisterWindow, S: FrameSink<P::Page>, C: TxDone<F>>(
        &mut self,
        budget: usize,
        db: &Doorbells<W>,
        sink: &mut S,
        done: &mut C,
    ) -> PairPoll {
        let tx = self.tx.reclaim(&mut self.pool, done);
        let mut adapter = XdpTxAdapter {
            tx: &mut self.tx,
            db,
            sink,
            stats: &mut self.stats,
        };
        let rx = self.rx.poll(budget, db, &mut self.pool, &mut adapter);
        self.tx.flush(db);
        PairPoll { tx, rx }
    }

    /// The queues, the pool and the counters, borrowed separately (for the XDP poll).
    #[cfg(feature = "xdp")]
    #[allow(clippy::type_complexity)]
    pub(crate) fn parts_mut(
        &mut self,
    ) -> (
        &mut RxQueue<'a, D, P::Page>,
        &mut TxQueue<'a, D, P::Page, F>,
        &mut P,
        &mut PairStats,
    ) {
        (&mut self.rx, &mut self.tx, &mut self.pool, &mut self.stats)
    }

    /// The pair's own counters.
    #[must_use]
    pub const fn stats(&self) -> &PairStats {
        &self.stats
    }

    /// The error state of the pair's queues (RX first), if either is in one: the pair needs
    /// [`QueuePair::restart`]. A poll of a pair whose RX queue is in its error state reports it
    /// in [`PollOutcome::error`] and neither `more` nor `armed`; a TX queue in its error state
    /// takes no frames ([`crate::tx::TxError::Queue`]) and reclaims nothing.
    #[must_use]
    pub const fn error(&self) -> Option<QueueError> {
        match self.rx.error() {
            Some(e) => Some(e),
            None => self.tx.error(),
        }
    }

    /// Restarts both queues (TX first, so that its pool pages are back before the RX ring is
    /// refilled): see [`TxQueue::restart`] and [`RxQueue::restart`] for what happens to every
    /// buffer and page, and for the context it must be called from (process context, the pair's
    /// polling stopped and its TX queue not in use).
    ///
    /// # Errors
    ///
    /// The first error of the two restarts; both always run.
    pub fn restart<Q: RegisterWindow, S: RegisterWindow, Lk: SharedLock, Dl: DelayNs, C: TxDone<F>>(
        &mut self,
        dev: &Device<Q, S, Lk>,
        delay: &mut Dl,
        done: &mut C,
    ) -> Result<()> {
        let t = self.tx.restart(dev, delay, &mut self.pool, done);
        let r = self.rx.restart(dev, delay, &mut self.pool);
        t.and(r)
    }

    /// Tears both queues down and returns every page to the pool (TX first: its pool pages go
    /// back before the RX ring's).
    ///
    /// # Errors
    ///
    /// The first error of [`TxQueue::teardown`] and [`RxQueue::teardown`]; both always run.
    pub fn teardown<Q: RegisterWindow, S: RegisterWindow, Lk: SharedLock, Dl: DelayNs, C: TxDone<F>>(
        self,
        dev: &Device<Q, S, Lk>,
        delay: &mut Dl,
        done: &mut C,
    ) -> (Result<()>, P) {
        let Self { rx, tx, mut pool, .. } = self;
        let t = tx.teardown(dev, delay, &mut pool, done);
        let r = rx.teardown(dev, delay, &mut pool);
        (t.and(r), pool)
    }
}

impl<D: DmaMemory, D2: DmaMemory, F: TxFrame, const C: usize> QueuePair<'_, D, PagePool<'_, D2, C>, F> {
    /// A snapshot of every counter of the pair (queues, XDP verdicts, pool) for
    /// [`crate::ethtool::EthtoolStats`] and [`crate::ethtool::Stats64`].
    #[must_use]
    pub fn counters(&self) -> crate::ethtool::QueueCounters {
        crate::ethtool::QueueCounters {
            rx: *self.rx.stats(),
            tx: *self.tx.stats(),
            pair: self.stats,
            pool: self.pool.stats(),
        }
    }

    /// The census of the pool's pages as far as this pair can see: pages of this pool that are in
    /// flight on *other* TX queues (redirected frames) make the parts not add up (`None`); sum
    /// the parts over all pairs then.
    #[must_use]
    pub fn page_counts(&self) -> Option<PageCounts> {
        self.pool.page_counts(
            self.rx.pages_in_ring(),
            self.tx.pool_pages_in_flight(),
            self.rx.stats().to_os,
        )
    }
}

/// Turns a [`FrameSink`]'s verdicts into RX outcomes, queuing XDP_TX frames on the pair's TX queue.
struct XdpTxAdapter<'q, 'a, D: DmaMemory, Pg, F, W, S> {
    tx: &'q mut TxQueue<'a, D, Pg, F>,
    db: &'q Doorbells<W>,
    sink: &'q mut S,
    stats: &'q mut PairStats,
}

impl<D: DmaMemory, P: PageProvider, F: TxFrame, W: RegisterWindow, S: FrameSink<P::Page>> RxSink<P>
    for XdpTxAdapter<'_, '_, D, P::Page, F, W, S>
{
    fn receive(&mut self, frame: RxFrame<P::Page>, pool: &mut P) -> RxOutcome<P::Page> {
        match self.sink.frame(frame) {
            Verdict::Drop(f) => RxOutcome::Recycle(f),
            Verdict::Pass => RxOutcome::ToOs,
            Verdict::Redirected => {
                self.stats.rx_xdp_redirect += 1;
                RxOutcome::ToTx
            }
            Verdict::Tx(f) => {
                self.stats.rx_xdp_tx += 1;
                let pf = PoolFrame {
                    page: f.page,
                    offset: f.offset,
                    len: f.len,
                };
                // `more`: the pair rings the doorbell once after the poll.
                match self.tx.xmit_pool(self.db, pool, pf, true) {
                    Ok(()) => RxOutcome::ToTx,
                    Err(e) => {
                        self.stats.rx_xdp_tx_errors += 1;
                        let pf = e.into_inner();
                        RxOutcome::Recycle(RxFrame {
                            page: pf.page,
                            offset: pf.offset,
                            len: pf.len,
                        })
                    }
                }
            }
        }
    }
}
