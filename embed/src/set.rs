//! A device's queue pairs: each built from its configurations (pool with its recycle ring, RX and
//! TX queues over slot storage on the heap), started, counted and torn down together.

use alloc::boxed::Box;
use alloc::vec::Vec;

use onic_core::queue::pool::{PageCounts, PagePool, PageProvider, RecycleRing, POOL_CACHE_DEFAULT};
use onic_core::queue::rx::RxQueue;
use onic_core::queue::tx::{TxDone, TxFrame, TxQueue, TxSlot};
use onic_core::{QueueControl, QueuePair, Result};
use onic_hal::{DelayNs, DmaMemory, DmaPage};

use crate::tuning::PairSpec;

/// RX slot storage of a pair (owned by its RX queue).
pub type RxSlots = Box<[Option<DmaPage>]>;
/// TX slot storage of a pair (owned by its TX queue).
pub type TxSlots<F> = Box<[TxSlot<DmaPage, F>]>;
/// A queue pair as this crate builds it: a [`PagePool`] that borrows its recycle ring for `'r`,
/// slot storage on the heap.
pub type Pair<'r, D, F, const C: usize = POOL_CACHE_DEFAULT> =
    QueuePair<D, PagePool<'r, D, C>, F, RxSlots, TxSlots<F>>;

/// The slot storage of one pair, each as long as its ring's usable entries.
pub struct Slots<F> {
    /// RX: one page slot per descriptor.
    pub rx: RxSlots,
    /// TX: one bookkeeping slot per descriptor.
    pub tx: TxSlots<F>,
}

impl<F> Slots<F> {
    /// Fresh storage for the rings of `spec`.
    #[must_use]
    pub fn for_spec(spec: &PairSpec) -> Self {
        let rx = usize::from(spec.rx.desc_ring.usable());
        let tx = usize::from(spec.tx.ring.usable());
        Self {
            rx: (0..rx).map(|_| None).collect(),
            tx: (0..tx).map(|_| TxSlot::new()).collect(),
        }
    }
}

/// Puts a pair together (does not start it): its RX and TX queues as `spec` says, over the slot
/// storage given, with `pool` as its page source (`spec.pool` is for the callers that make a
/// [`PagePool`]). The one place a pair is built: the port's NAPI pairs, the sets' and the bench
/// rigs' all come from here.
///
/// # Errors
///
/// What `RxQueue::new` or `TxQueue::new` report (the storage and the pool are dropped).
pub fn assemble_pair<D, P, F, RSt, TSt>(
    dma: D,
    spec: &PairSpec,
    (rx_slots, tx_slots): (RSt, TSt),
    pool: P,
) -> Result<QueuePair<D, P, F, RSt, TSt>>
where
    D: DmaMemory + Clone,
    P: PageProvider,
    F: TxFrame,
    RSt: AsMut<[Option<P::Page>]>,
    TSt: AsMut<[TxSlot<P::Page, F>]>,
{
    let rx = RxQueue::new(dma.clone(), spec.rx, spec.opts, rx_slots)?;
    let tx = TxQueue::new(dma, spec.tx, tx_slots)?;
    Ok(QueuePair::new(rx, tx, pool))
}

/// Builds (does not start) a pair as `spec` says, over `slots`, with a [`PagePool`] that
/// recycles through `ring`.
///
/// # Errors
///
/// What `RxQueue::new` or `TxQueue::new` report.
pub fn build_pair<'r, D, F, const C: usize>(
    dma: D,
    spec: &PairSpec,
    slots: Slots<F>,
    ring: Option<&'r RecycleRing>,
) -> Result<Pair<'r, D, F, C>>
where
    D: DmaMemory + Clone,
    F: TxFrame,
{
    let pool = PagePool::new(dma.clone(), spec.pool, ring);
    assemble_pair(dma, spec, (slots.rx, slots.tx), pool)
}

/// The queue pairs of one device.
pub struct QueueSet<'r, D: DmaMemory, F, const C: usize = POOL_CACHE_DEFAULT> {
    /// The pairs, by queue index.
    pub pairs: Vec<Pair<'r, D, F, C>>,
}

impl<'r, D, F, const C: usize> QueueSet<'r, D, F, C>
where
    D: DmaMemory + Clone,
    F: TxFrame,
{
    /// Builds one pair per spec, pair `i` recycling through `rings[i]`.
    ///
    /// # Errors
    ///
    /// The first error of [`build_pair`]; the pairs built so far are released.
    pub fn build(dma: &D, specs: &[PairSpec], rings: &[&'r RecycleRing]) -> Result<Self> {
        let pairs = specs
            .iter()
            .enumerate()
            .map(|(i, s)| build_pair(dma.clone(), s, Slots::for_spec(s), rings.get(i).copied()))
            .collect::<Result<Vec<_>>>()?;
        Ok(Self { pairs })
    }

    /// Starts every pair through `dev`.
    ///
    /// # Errors
    ///
    /// The first error of `QueuePair::start`.
    pub fn start<Ctl: QueueControl, Dl: DelayNs>(&mut self, dev: &Ctl, delay: &mut Dl) -> Result<()> {
        self.pairs.iter_mut().try_for_each(|p| p.start(dev, delay))
    }

    /// The census of the pages of every pool of the set: in a pool, an RX ring, TX flight (pool
    /// and redirected pages alike, so a set whose pairs only redirect among themselves adds up)
    /// or with the OS.
    ///
    /// # Panics
    ///
    /// If a pool's OS-return count exceeds the pages its RX path handed out (a driver bug).
    #[must_use]
    pub fn page_counts(&self) -> PageCounts {
        census(self.pairs.iter())
    }

    /// Pages the pools took from the HAL and did not give back.
    #[must_use]
    pub fn live_pool_pages(&self) -> u64 {
        self.pairs.iter().map(|p| p.pool.stats().live_pages()).sum()
    }

    /// Tears down the pairs of several sets, each with its device: every TX queue first (so that
    /// redirected pages find their pools, and rings, still there), then every RX queue; the
    /// pools are dropped last, giving their pages back to the HAL.
    ///
    /// # Errors
    ///
    /// The first error of the teardowns; all of them always run.
    pub fn teardown_all<Ctl: QueueControl, Dl: DelayNs, Dn: TxDone<F>>(
        sets: Vec<(&Ctl, Self)>,
        delay: &mut Dl,
        done: &mut Dn,
    ) -> Result<()> {
        let mut result = Ok(());
        let mut rest = Vec::new();
        for (dev, set) in sets {
            for pair in set.pairs {
                let QueuePair { rx, tx, mut pool, .. } = pair;
                let (r, _) = tx.teardown(dev, delay, &mut pool, done);
                result = result.and(r);
                rest.push((dev, rx, pool));
            }
        }
        for (dev, rx, mut pool) in rest {
            let (r, _) = rx.teardown(dev, delay, &mut pool);
            result = result.and(r);
        }
        result
    }
}

/// The census of the pages of the pools of `pairs` (see [`QueueSet::page_counts`]).
///
/// # Panics
///
/// If a pool's OS-return count exceeds the pages its RX path handed out (a driver bug).
pub fn census<'a, 'r: 'a, D, F, const C: usize>(
    pairs: impl Iterator<Item = &'a Pair<'r, D, F, C>>,
) -> PageCounts
where
    D: DmaMemory + 'a,
    F: TxFrame + 'a,
{
    pairs.fold(PageCounts::default(), |c, p| {
        let inf = p.tx.in_flight_by_owner();
        c + PageCounts {
            in_pool: p.pool.available() as u64,
            in_rx_ring: p.rx.pages_in_ring(),
            in_tx_flight: u64::from(inf.pool) + u64::from(inf.remote),
            tx_parked: p.tx.pool_pages_parked(),
            with_os: p
                .rx
                .stats()
                .to_os
                .checked_sub(p.pool.stats().os_returns)
                .expect("more OS returns than pages handed to the OS"),
        }
    })
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use onic_core::config::{BufSizeIdx, DeviceConfig, RingSizeIdx};
    use onic_core::xdp::XdpFrame;
    use onic_core::{Device, QueueId};
    use onic_sim::{Card, CardConfig, SimDma};

    use super::*;
    use crate::done::FrameDone;
    use crate::frame::Frame;

    type F<'c> = Frame<SimDma<'c>>;

    #[test]
    fn a_set_starts_counts_its_pages_and_gives_every_one_back() {
        let card = Card::new(CardConfig::default());
        let mut delay = card.delay();
        let (dev, _) = Device::init(
            card.qdma(0),
            card.shell(),
            &mut delay,
            DeviceConfig::new(0, 2).unwrap(),
        )
        .unwrap();
        let ring = RingSizeIdx::new(1).unwrap();
        let buf = BufSizeIdx::new(5).unwrap();
        let specs: Vec<PairSpec> = (0..2)
            .map(|q| PairSpec::new(QueueId::new(q), ring, buf))
            .collect();
        let rings = [RecycleRing::new(), RecycleRing::new()];
        let refs: Vec<&RecycleRing> = rings.iter().collect();
        let mut set: QueueSet<'_, SimDma<'_>, F<'_>> = QueueSet::build(&card.dma(), &specs, &refs).unwrap();
        set.start(&dev, &mut delay).unwrap();
        let c = set.page_counts();
        assert!(c.in_rx_ring > 0);
        assert_eq!(
            c.in_rx_ring,
            set.pairs.iter().map(|p| p.rx.pages_in_ring()).sum::<u64>()
        );
        assert_eq!(c.total(), set.live_pool_pages());
        // A page of pair 1's pool, redirected to pair 0's TX queue: in flight, still counted.
        let page = set.pairs[1].pool.alloc().unwrap();
        let frame = XdpFrame {
            page,
            offset: 256,
            len: 60,
            origin: 1,
        };
        let db = dev.doorbells();
        set.pairs[0].tx.xmit_remote(&db, F::Xdp(frame), false).unwrap();
        assert_eq!(set.page_counts().total(), set.live_pool_pages());
        let mut done = FrameDone::new(&refs, card.dma());
        QueueSet::teardown_all(alloc::vec![(&dev, set)], &mut delay, &mut done).unwrap();
        assert_eq!(done.counts.remote_done + done.counts.returned, 2);
        let (r, _, _) = dev.teardown(&mut delay);
        r.unwrap();
        drop(rings);
        let s = card.dma_stats();
        assert_eq!((s.live_pages, s.mapped_pages), (0, 0));
        assert_eq!(card.violations(), []);
    }
}
