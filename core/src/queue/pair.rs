//! A queue pair: one RX queue, one TX queue and the page pool they share, owned by one context
//! (one NAPI instance, one core of a bare-metal loop).
//!
//! Polling a pair touches only that pair: its own TX reclaim, then its own RX queue. The reference
//! driver reclaims every TX queue of the device on every RX poll, which costs O(queues) per poll
//! and makes all polling contexts contend on all TX rings; here each TX queue is reclaimed by the
//! context that owns it (on its own poll and when transmitting).
//!
//! XDP_TX goes out on the pair's own TX queue, so the page stays within the context that owns its
//! pool: when the device is done, it waits in its TX slot and goes back to the RX ring with the
//! next XDP_TX frame posted there ([`TxQueue::xmit_pool`]), without a trip through the pool.
//!
//! The pair owns everything it uses: the pool, and through the queues their slot storage (the
//! type parameters `RSt` and `TSt`: arrays on bare metal, boxed slices on a host or in the
//! kernel; a borrowed slice works too). With owned storage nothing is borrowed, so a pair can live
//! in any structure of its owner, and [`QueuePair::teardown`] hands the pool and both storages
//! back.
//!
//! A started pair is stopped with [`QueuePair::teardown`]; dropped without it, its queues leave
//! their rings and pages to the device (leaked, never reused), as the queues' own docs describe.

use onic_hal::{DelayNs, DmaMemory, DmaPage, RegisterWindow};

use crate::error::{QueueError, Result};
use crate::queue::control::QueueControl;
use crate::queue::doorbell::Doorbells;
use crate::queue::pool::{PageCounts, PagePool, PageProvider};
use crate::queue::rx::{Handled, PollOutcome, RxFrame, RxQueue};
use crate::queue::tx::{Reclaimed, TxDone, TxFrame, TxQueue, TxSlot};
use crate::rss::{FrameHash, RssHashType, RxHasher};
use crate::stats::counters::PairStats;

/// The RX hash of a frame as the XDP `rx_hash` metadata reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct XdpRxHash {
    /// The shell's 32-bit hash (the value that chose the RX queue).
    pub value: u32,
    /// What it covers.
    pub kind: RssHashType,
    /// Linux's `enum xdp_rss_hash_type` for it.
    pub xdp_type: u32,
}

impl XdpRxHash {
    /// The hash of a frame as the shell computed it on reception (from the bytes as received).
    #[must_use]
    #[inline]
    pub fn compute<H: RxHasher + ?Sized>(hasher: &H, frame: &[u8]) -> Self {
        let FrameHash { hash, protocol } = hasher.frame_hash(frame);
        Self {
            value: hash.value,
            kind: hash.kind,
            xdp_type: hash.kind.xdp_rss_type_for(protocol),
        }
    }
}

/// Where a frame came from: the RX queue and the port (Linux's `xdp_rxq_info`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct XdpRxq {
    /// Function-relative RX queue index.
    pub queue_index: u16,
    /// Ingress port (CMAC) number.
    pub port: u8,
}

/// What the OS learns with a passed frame besides the frame itself.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PassInfo {
    /// Bytes of metadata the program left just before the frame (Linux: `skb_metadata_set`).
    pub meta_len: u8,
    /// The queue and port the frame came in on.
    pub rxq: XdpRxq,
    /// The RX hash, when the context computes hashes and a program ran.
    pub hash: Option<XdpRxHash>,
}

/// Where the frames a poll passes up go (every frame without a program, XDP_PASS frames with
/// one): the OS (build an skb around the page, hand it to the stack), a test, or the `onic run`
/// tool writing a capture.
pub trait RxSink<Pg> {
    /// Takes a frame; the OS owns the page from here on and gives it back through the pool.
    ///
    /// # Errors
    ///
    /// The frame comes back when the sink does not keep the page (the OS has no memory for a
    /// packet, or the sink copied what it needed); it is recycled and counted as
    /// `rx_pass_refused`.
    fn pass(&mut self, frame: RxFrame<Pg>, info: PassInfo) -> core::result::Result<(), RxFrame<Pg>>;
}

impl<Pg, T: FnMut(RxFrame<Pg>, PassInfo) -> core::result::Result<(), RxFrame<Pg>>> RxSink<Pg> for T {
    #[inline]
    fn pass(&mut self, frame: RxFrame<Pg>, info: PassInfo) -> core::result::Result<(), RxFrame<Pg>> {
        self(frame, info)
    }
}

/// Hands a frame to the sink: the no-program branch of a poll, and XDP_PASS.
#[inline]
pub(crate) fn pass_up<Pg, S: RxSink<Pg>>(
    sink: &mut S,
    stats: &mut PairStats,
    frame: RxFrame<Pg>,
    info: PassInfo,
) -> Handled<Pg> {
    match sink.pass(frame, info) {
        Ok(()) => Handled::ToOs,
        Err(f) => {
            stats.rx_pass_refused += 1;
            Handled::Recycle(f)
        }
    }
}

/// What a pair poll did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct PairPoll {
    /// The TX reclaim.
    pub tx: Reclaimed,
    /// The RX poll.
    pub rx: PollOutcome,
}

/// One RX queue, one TX queue, one page provider. `RSt` and `TSt` are the slot storage the
/// queues own (see [`RxQueue::new`] and [`TxQueue::new`]).
pub struct QueuePair<D: DmaMemory, P: PageProvider, F, RSt, TSt> {
    /// The receive queue.
    pub rx: RxQueue<D, P::Page, RSt>,
    /// The transmit queue.
    pub tx: TxQueue<D, P::Page, F, TSt>,
    /// The page provider both queues use.
    pub pool: P,
    stats: PairStats,
}

impl<D, P, F, RSt, TSt> QueuePair<D, P, F, RSt, TSt>
where
    D: DmaMemory,
    P: PageProvider,
    F: TxFrame,
    RSt: AsMut<[Option<P::Page>]>,
    TSt: AsMut<[TxSlot<P::Page, F>]>,
{
    /// Bundles the queues and their pool.
    pub fn new(rx: RxQueue<D, P::Page, RSt>, tx: TxQueue<D, P::Page, F, TSt>, pool: P) -> Self {
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
    pub fn start<Ctl: QueueControl, Dl: DelayNs>(&mut self, dev: &Ctl, delay: &mut Dl) -> Result<()> {
        self.tx.start(dev, delay)?;
        self.rx.start(dev, delay, &mut self.pool)
    }

    /// The RX half of a poll without a program: up to `budget` frames, each handed to `sink` as
    /// received; the only per-frame decision is whether the sink kept the page.
    pub(crate) fn rx_to_sink<W: RegisterWindow, S: RxSink<P::Page>>(
        &mut self,
        budget: usize,
        db: &Doorbells<W>,
        sink: &mut S,
        rxq: XdpRxq,
    ) -> PollOutcome {
        let info = PassInfo {
            rxq,
            ..PassInfo::default()
        };
        let stats = &mut self.stats;
        let mut handler = |f: RxFrame<P::Page>, _: &mut P| pass_up(sink, stats, f, info);
        self.rx.poll(budget, db, &mut self.pool, &mut handler)
    }

    /// The queues, the pool and the counters, borrowed separately (for the XDP poll).
    #[cfg(feature = "xdp")]
    #[allow(clippy::type_complexity)]
    pub(crate) fn parts_mut(
        &mut self,
    ) -> (
        &mut RxQueue<D, P::Page, RSt>,
        &mut TxQueue<D, P::Page, F, TSt>,
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
    /// takes no frames ([`crate::queue::tx::TxError::Queue`]) and reclaims nothing.
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
    pub fn restart<Ctl: QueueControl, Dl: DelayNs, C: TxDone<F>>(
        &mut self,
        dev: &Ctl,
        delay: &mut Dl,
        done: &mut C,
    ) -> Result<()> {
        let t = self.tx.restart(dev, delay, &mut self.pool, done);
        let r = self.rx.restart(dev, delay, &mut self.pool);
        t.and(r)
    }

    /// Tears both queues down and returns every page to the pool (TX first: its pool pages go
    /// back before the RX ring's); hands back the pool and the queues' slot storage (RX, TX).
    ///
    /// # Errors
    ///
    /// The first error of [`TxQueue::teardown`] and [`RxQueue::teardown`]; both always run. A
    /// queue whose teardown failed keeps its pages and buffers in its slots (the device may still
    /// use them), leaks its rings and gives no storage back (`None`).
    pub fn teardown<Ctl: QueueControl, Dl: DelayNs, C: TxDone<F>>(
        self,
        dev: &Ctl,
        delay: &mut Dl,
        done: &mut C,
    ) -> (Result<()>, P, Option<RSt>, Option<TSt>) {
        let Self { rx, tx, mut pool, .. } = self;
        let (t, tx_slots) = tx.teardown(dev, delay, &mut pool, done);
        let (r, rx_slots) = rx.teardown(dev, delay, &mut pool);
        (t.and(r), pool, rx_slots, tx_slots)
    }
}

impl<D, D2, F, RSt, TSt, const C: usize> QueuePair<D, PagePool<'_, D2, C>, F, RSt, TSt>
where
    D: DmaMemory,
    D2: DmaMemory,
    F: TxFrame,
    RSt: AsMut<[Option<DmaPage>]>,
    TSt: AsMut<[TxSlot<DmaPage, F>]>,
{
    /// A snapshot of every counter of the pair (queues, XDP verdicts, pool) for
    /// [`crate::stats::ethtool::EthtoolStats`] and [`crate::stats::ethtool::Stats64`].
    #[must_use]
    pub fn counters(&self) -> crate::stats::counters::QueueCounters {
        crate::stats::counters::QueueCounters {
            rx: *self.rx.stats(),
            tx: *self.tx.stats(),
            pair: self.stats,
            pool: self.pool.stats(),
            xsk: crate::stats::counters::XskStats::default(),
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
            self.tx.pool_pages_parked(),
            self.rx.stats().to_os,
        )
    }
}

#[cfg(test)]
mod tests {
    use std::vec::Vec;

    use onic_hal::{Direction, DmaAddr, DmaPage};
    use onic_sim::{Card, CardConfig, SimDma, Wire};

    use super::*;
    use crate::config::{RingSizeIdx, RxQueueConfig, TxQueueConfig};
    use crate::queue::dispatch::RxContext;
    use crate::queue::pool::{PagePool, PoolConfig};
    use crate::queue::rx::RxOptions;
    use crate::queue::tx::TxSlot;
    use crate::testutil;

    /// The pairs here send no OS frames: only pool pages (XDP_TX) go out.
    #[derive(Debug)]
    struct NoOsFrame;

    impl TxFrame for NoOsFrame {
        fn dma_addr(&self) -> DmaAddr {
            DmaAddr::new(0)
        }
        fn len(&self) -> usize {
            0
        }
        fn pad_to(&mut self, _: usize) -> bool {
            false
        }
    }

    struct NoDone;

    impl TxDone<NoOsFrame> for NoDone {
        fn os_done(&mut self, _: NoOsFrame) {}
        fn remote_done(&mut self, _: NoOsFrame) {}
    }

    type Pool<'c> = PagePool<'static, SimDma<'c>, 16>;
    /// The RX storage as on bare metal (no allocation), the TX storage from the heap.
    type Pair<'c> = QueuePair<
        SimDma<'c>,
        Pool<'c>,
        NoOsFrame,
        heapless::Vec<Option<DmaPage>, 63>,
        Vec<TxSlot<DmaPage, NoOsFrame>>,
    >;

    fn open_card() -> Card {
        let mut c = CardConfig::default();
        c.wire = Wire::Open;
        Card::new(c)
    }

    fn rx_cfg() -> RxQueueConfig {
        RxQueueConfig {
            desc_ring: RingSizeIdx::new(1).unwrap(),
            cmpt_ring: RingSizeIdx::new(1).unwrap(),
            ..RxQueueConfig::new(onic_hal::QueueId::new(0))
        }
    }

    fn pair(card: &Card, dir: Direction) -> Pair<'_> {
        let cfg = rx_cfg();
        let rx_slots = (0..63).map(|_| None).collect();
        let tx_slots = (0..63).map(|_| TxSlot::new()).collect();
        let rx = RxQueue::new(card.dma(), cfg, RxOptions::for_queue(&cfg), rx_slots).unwrap();
        let tx_cfg = TxQueueConfig {
            ring: RingSizeIdx::new(1).unwrap(),
            ..TxQueueConfig::new(onic_hal::QueueId::new(0))
        };
        let tx = TxQueue::new(card.dma(), tx_cfg, tx_slots).unwrap();
        let pool = PagePool::new(card.dma(), PoolConfig::rx(dir, cfg.buf.bytes()), None);
        QueuePair::new(rx, tx, pool)
    }

    fn frame(len: usize, seed: u8) -> Vec<u8> {
        (0..len).map(|i| seed.wrapping_add(i as u8)).collect()
    }

    fn settle(card: &Card) {
        card.run_until_idle();
        card.advance_time(2_000);
        card.run_until_idle();
    }

    /// Polls once with no program: `sink` takes every frame. With `via_xdp`, through the XDP
    /// dispatch with no program attached instead of [`crate::PassAll`].
    fn poll_plain<S: RxSink<DmaPage>>(
        p: &mut Pair<'_>,
        dev: &testutil::SimDevice<'_>,
        sink: &mut S,
        via_xdp: bool,
    ) -> PairPoll {
        let rxq = XdpRxq::default();
        #[cfg(feature = "xdp")]
        if via_xdp {
            let dispatch = crate::xdp::XdpDispatch {
                prog: None::<&mut dyn crate::xdp::RawXdpProgram>,
                redirect: &mut crate::xdp::NoRedirect,
                origin: 0,
                hasher: None,
            };
            let mut ctx = RxContext { sink, rxq, dispatch };
            return p.poll(64, &dev.doorbells(), &mut ctx, &mut NoDone);
        }
        assert!(!via_xdp, "built without the xdp feature");
        let mut ctx = RxContext {
            sink,
            rxq,
            dispatch: crate::PassAll,
        };
        p.poll(64, &dev.doorbells(), &mut ctx, &mut NoDone)
    }

    #[test]
    fn without_a_program_every_frame_goes_to_the_sink() {
        every_frame_to_the_sink(false);
    }

    /// The XDP dispatch with no program attached is the plain poll.
    #[cfg(feature = "xdp")]
    #[test]
    fn xdp_dispatch_without_a_program_passes_every_frame() {
        every_frame_to_the_sink(true);
    }

    /// One poll with no program (`via_xdp` as in [`poll_plain`]) of six frames, the sink
    /// keeping every other one.
    fn every_frame_to_the_sink(via_xdp: bool) {
        let card = open_card();
        let dev = testutil::device(&card, 1);
        let mut delay = card.delay();
        let mut p = pair(&card, Direction::FromDevice);
        p.start(&dev, &mut delay).unwrap();
        let frames: Vec<Vec<u8>> = (0..6).map(|i| frame(60 + i, i as u8)).collect();
        for f in &frames {
            card.inject(0, f);
        }
        settle(&card);
        // The sink keeps every other frame's page and gives the rest back.
        let mut got = Vec::new();
        let mut kept = Vec::new();
        let mut sink = |f: RxFrame<DmaPage>, _: PassInfo| -> core::result::Result<(), RxFrame<DmaPage>> {
            got.push(f.data().to_vec());
            if got.len() % 2 == 1 {
                kept.push((f.page, usize::from(f.len)));
                Ok(())
            } else {
                Err(f)
            }
        };
        let out = poll_plain(&mut p, &dev, &mut sink, via_xdp);
        assert_eq!(out.rx.done, 6);
        assert_eq!(got, frames);
        let s = *p.stats();
        assert_eq!(s.rx_pass_refused, 3);
        assert_eq!(
            PairStats {
                rx_pass_refused: 0,
                ..s
            },
            PairStats::default(),
            "no XDP counter moves without a program"
        );
        assert_eq!((p.rx.stats().to_os, p.rx.stats().recycled), (3, 3));
        for (page, len) in kept {
            p.pool.return_from_os(page, len);
        }
        let (r, pool, rx_slots, tx_slots) = p.teardown(&dev, &mut delay, &mut NoDone);
        r.unwrap();
        let (rx_slots, tx_slots) = (rx_slots.unwrap(), tx_slots.unwrap());
        drop(pool);
        assert_eq!(card.dma_stats().live_pages, 0);
        assert!(
            rx_slots.iter().all(Option::is_none),
            "the RX storage comes back empty"
        );
        assert_eq!(tx_slots.len(), 63, "the TX storage comes back whole");
        assert_eq!(card.violations(), []);
    }

    /// XDP_TX needs pages the device may read: with a pool mapped from-device only, the frame is
    /// recycled and counted; with a bidirectional one it goes out.
    #[cfg(feature = "xdp")]
    #[test]
    fn xdp_tx_checks_that_the_device_may_read_the_page() {
        use crate::xdp::{NoRedirect, XdpAction, XdpBuff, XdpDispatch};

        for (dir, sent) in [(Direction::FromDevice, false), (Direction::Bidirectional, true)] {
            let card = open_card();
            let dev = testutil::device(&card, 1);
            let mut delay = card.delay();
            let mut p = pair(&card, dir);
            p.start(&dev, &mut delay).unwrap();
            let f = frame(64, 7);
            card.inject(0, &f);
            settle(&card);
            let mut tx_all = |_: &mut XdpBuff<'_>| XdpAction::Tx;
            let mut refuse =
                |f: RxFrame<DmaPage>, _: PassInfo| -> core::result::Result<(), RxFrame<DmaPage>> { Err(f) };
            let mut ctx = RxContext {
                sink: &mut refuse,
                rxq: XdpRxq::default(),
                dispatch: XdpDispatch {
                    prog: Some(&mut tx_all),
                    redirect: &mut NoRedirect,
                    origin: 0,
                    hasher: None,
                },
            };
            let out = p.poll(64, &dev.doorbells(), &mut ctx, &mut NoDone);
            assert_eq!(out.rx.done, 1);
            let s = *p.stats();
            assert_eq!(s.rx_xdp_tx, 1);
            assert_eq!(
                (s.rx_xdp_tx_errors, s.rx_xdp_drop),
                if sent { (0, 0) } else { (1, 1) }
            );
            card.run_until_idle();
            let egress = card.take_egress(0);
            assert_eq!(egress, if sent { std::vec![f] } else { Vec::new() });
            // The TX completion ends the page's flight (it stays parked in its TX slot).
            p.poll(64, &dev.doorbells(), &mut ctx, &mut NoDone);
            assert_eq!(p.tx.pool_pages_in_flight(), 0);
            let (r, pool, _, _) = p.teardown(&dev, &mut delay, &mut NoDone);
            r.unwrap();
            drop(pool);
            assert_eq!(card.dma_stats().live_pages, 0);
            assert_eq!(card.violations(), []);
        }
    }
}
