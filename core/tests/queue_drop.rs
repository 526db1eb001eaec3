//! A started queue dropped without its teardown leaves its rings and pages to the device (leaked,
//! never freed or reused); a teardown gives everything back.

use onic_core::{
    Device, DeviceConfig, NoPage, NoPages, PagePool, PoolConfig, QueueControl, RingSizeIdx, RxOptions,
    RxQueue, RxQueueConfig, TxDone, TxFrame, TxQueue, TxQueueConfig, TxSlot,
};
use onic_hal::{Direction, DmaAddr, DmaPage};
use onic_sim::{Card, CardConfig, QdmaWindow, ShellWindow, SimDma};

type Pool<'c> = PagePool<'static, SimDma<'c>, 16>;

fn device(card: &Card) -> Device<QdmaWindow<'_>, ShellWindow<'_>> {
    let cfg = DeviceConfig::new(0, 1).unwrap();
    Device::init(card.qdma(0), card.shell(), &mut card.delay(), cfg)
        .unwrap()
        .0
}

/// RX queue 0 with 64-entry rings (63 usable).
fn rx_cfg() -> RxQueueConfig {
    RxQueueConfig {
        desc_ring: RingSizeIdx::new(1).unwrap(),
        cmpt_ring: RingSizeIdx::new(1).unwrap(),
        ..RxQueueConfig::new(onic_core::QueueId::new(0))
    }
}

fn rx_pool(card: &Card) -> Pool<'_> {
    let cfg = PoolConfig {
        bulk: 64,
        ..PoolConfig::rx(Direction::FromDevice, rx_cfg().buf.bytes())
    };
    PagePool::new(card.dma(), cfg, None)
}

/// A transmit frame that is never sent: the TX tests only start and stop the queue.
#[derive(Debug)]
struct NoFrame;

impl TxFrame for NoFrame {
    fn dma_addr(&self) -> DmaAddr {
        DmaAddr::new(0)
    }
    fn len(&self) -> usize {
        0
    }
    fn buffer_len(&self) -> usize {
        0
    }
    fn pad_to(&mut self, _min_len: usize) -> bool {
        false
    }
}

/// Nothing is ever on the TX ring, so nothing comes back.
struct NoneBack;

impl TxDone<NoFrame> for NoneBack {
    fn os_done(&mut self, _: NoFrame) {
        unreachable!("no frame was queued");
    }
    fn remote_done(&mut self, _: NoFrame) {
        unreachable!("no frame was queued");
    }
}

/// Frees what the test leaked on purpose, once every token is gone.
fn reclaim_leaked(card: &Card) {
    // SAFETY: every token for the card's memory (queues, pools, slot pages) was dropped before.
    unsafe { card.reclaim_all_dma() };
}

#[test]
fn a_started_rx_queue_dropped_without_teardown_keeps_its_rings_and_pages() {
    let card = Card::new(CardConfig::default());
    let dev = device(&card);
    let mut delay = card.delay();
    let mut pool = rx_pool(&card);
    let mut slots: Vec<Option<DmaPage>> = (0..63).map(|_| None).collect();
    let cfg = rx_cfg();
    let mut rx = RxQueue::new(card.dma(), cfg, RxOptions::for_queue(&cfg), &mut slots).unwrap();
    rx.start(&dev, &mut delay, &mut pool).unwrap();
    let posted = rx.posted();
    let regions = card.dma_stats().live_regions;
    assert_eq!(regions, 2, "descriptor and completion rings");
    drop(rx);
    assert_eq!(
        card.dma_stats().live_regions,
        regions,
        "the rings the device still points at are not freed"
    );
    assert_eq!(
        slots.iter().flatten().count(),
        usize::from(posted),
        "the posted pages stay in their slots"
    );
    // The device still owns the ring: a frame lands in a posted page and a completion entry,
    // which are live memory, so the model sees nothing wrong.
    card.inject(0, &[0x5A; 64]);
    card.run_until_idle();
    assert_eq!(card.violations(), []);
    drop(slots);
    drop(pool);
    reclaim_leaked(&card);
}

#[test]
fn an_rx_teardown_gives_back_the_rings_and_every_page() {
    let card = Card::new(CardConfig::default());
    let dev = device(&card);
    let mut delay = card.delay();
    let mut pool = rx_pool(&card);
    let mut slots: Vec<Option<DmaPage>> = (0..63).map(|_| None).collect();
    let cfg = rx_cfg();
    let mut rx = RxQueue::new(card.dma(), cfg, RxOptions::for_queue(&cfg), &mut slots).unwrap();
    rx.start(&dev, &mut delay, &mut pool).unwrap();
    rx.teardown(&dev, &mut delay, &mut pool).0.unwrap();
    assert_eq!(card.dma_stats().live_regions, 0);
    assert!(slots.iter().all(Option::is_none));
    drop(pool);
    assert_eq!(card.dma_stats().live_pages, 0);
    assert_eq!(card.violations(), []);
}

#[test]
fn a_tx_queue_frees_its_ring_only_when_torn_down_or_never_started() {
    let card = Card::new(CardConfig::default());
    let dev = device(&card);
    let mut delay = card.delay();
    let cfg = TxQueueConfig {
        ring: RingSizeIdx::new(1).unwrap(),
        ..TxQueueConfig::new(onic_core::QueueId::new(0))
    };
    let mut slots: Vec<TxSlot<NoPage, NoFrame>> = (0..63).map(|_| TxSlot::new()).collect();

    // Never started: the device never learnt the ring's address, so dropping frees it.
    let idle = TxQueue::new(card.dma(), cfg, &mut slots).unwrap();
    assert_eq!(card.dma_stats().live_regions, 1);
    drop(idle);
    assert_eq!(card.dma_stats().live_regions, 0);

    // Started and torn down: the proof of the invalidated contexts frees the ring.
    let mut tx = TxQueue::new(card.dma(), cfg, &mut slots).unwrap();
    tx.start(&dev, &mut delay).unwrap();
    tx.teardown(&dev, &mut delay, &mut NoPages, &mut NoneBack)
        .0
        .unwrap();
    assert_eq!(card.dma_stats().live_regions, 0);

    // Started and dropped: the ring stays allocated.
    let mut tx = TxQueue::new(card.dma(), cfg, &mut slots).unwrap();
    tx.start(&dev, &mut delay).unwrap();
    drop(tx);
    assert_eq!(card.dma_stats().live_regions, 1);
    assert_eq!(card.violations(), []);
    drop(slots);
    reclaim_leaked(&card);
}

#[test]
fn a_queue_takes_only_its_own_proof() {
    let card = Card::new(CardConfig::default());
    let dev = device(&card);
    let mut delay = card.delay();
    let mut pool = rx_pool(&card);
    let mut slots: Vec<Option<DmaPage>> = (0..63).map(|_| None).collect();
    let cfg = rx_cfg();
    let mut rx = RxQueue::new(card.dma(), cfg, RxOptions::for_queue(&cfg), &mut slots).unwrap();
    rx.start(&dev, &mut delay, &mut pool).unwrap();
    let posted = rx.posted();
    // The TX side of the same queue id is invalidated: that proves nothing about the RX rings.
    let tx_proof = dev
        .teardown_tx_queue(&mut delay, onic_core::QueueId::new(0))
        .unwrap();
    rx.release(&mut pool, &tx_proof);
    assert_eq!(card.dma_stats().live_regions, 2, "the RX rings are not freed");
    assert_eq!(
        slots.iter().flatten().count(),
        usize::from(posted),
        "nor its pages returned"
    );
    drop(slots);
    drop(pool);
    reclaim_leaked(&card);
}
