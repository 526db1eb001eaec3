//! The length rules of every TX entry point (`xmit_os`, `xmit_remote`, `xdp_xmit`, `xmit_pool`):
//! no descriptor may make the device read outside the buffer it was given. A frame that would is
//! refused with `TxError::BeyondBuffer` (or `BadLength`), counted in `tx_bad_length`, and handed
//! back; the model checks every device read against the mappings, so a descriptor that slipped
//! through would show up as a violation. Also the other refusals that hand the frame back
//! (`Full`, `Queue`).
//!
//! These are checks of the core's TX queue itself, so they run on a bare queue pair outside any
//! port: onic-embed's door maps only buffers its host made, which fit them by construction, and
//! reports a refusal as an `XmitResult`, without the core's error value.

use onic_core::error::QueueError;
use onic_core::queue::pool::RecycleRing;
use onic_core::queue::tx::{PoolFrame, TxError, TX_MAX_FRAME};
use onic_core::xdp::{xdp_xmit, XdpFrame};
use onic_core::{Device, DeviceConfig, QueueId, RingSizeIdx};
use onic_embed::done::FrameDone;
use onic_embed::frame::Frame;
use onic_embed::set::{build_pair, Pair, Slots};
use onic_embed::tuning::PairSpec;
use onic_hal::{Direction, DmaMemory, DmaPage, PAGE_SIZE};
use onic_sim::{Card, CardConfig, QdmaWindow, ShellWindow, SimDma, Wire};
use onic_testkit::device::{status_word, DeviceMemory, DeviceRing};

/// A frame on the bare pair's TX queue: an OS page, or a page of the pair's pool.
type HFrame<'c> = Frame<SimDma<'c>>;

/// Function 0 of a card with one started queue pair (64-entry rings) whose pool recycles
/// through `ring` (frames of this pool name it as origin 0).
struct Bare<'c> {
    card: &'c Card,
    dev: Device<QdmaWindow<'c>, ShellWindow<'c>>,
    pair: Pair<'c, SimDma<'c>, HFrame<'c>>,
    ring: &'c RecycleRing,
}

/// A card with an open wire, for [`Bare::new`].
fn card() -> Card {
    let mut c = CardConfig::default();
    c.wire = Wire::Open;
    Card::new(c)
}

impl<'c> Bare<'c> {
    fn new(card: &'c Card, ring: &'c RecycleRing) -> Self {
        let mut delay = card.delay();
        let cfg = DeviceConfig::new(0, 1).unwrap();
        let (dev, _) = Device::init(card.qdma(0), card.shell(), &mut delay, cfg).unwrap();
        let size = RingSizeIdx::new(1).unwrap();
        let buf = onic_core::RxQueueConfig::new(QueueId::new(0)).buf;
        let spec = PairSpec::new(QueueId::new(0), size, buf);
        let mut pair = build_pair(card.dma(), &spec, Slots::for_spec(&spec), Some(ring)).unwrap();
        pair.start(&dev, &mut delay).unwrap();
        Self {
            card,
            dev,
            pair,
            ring,
        }
    }

    /// Lets the model send, then reclaims: OS pages are freed, pool pages go home.
    fn complete(&mut self) {
        self.card.run_until_idle();
        let rings = [self.ring];
        let mut done = FrameDone::new(&rings, self.card.dma());
        self.pair.tx.reclaim(&mut done);
    }

    /// Tears the pair and the function down and checks that nothing is left.
    fn teardown(self) {
        let mut delay = self.card.delay();
        let rings = [self.ring];
        let mut done = FrameDone::new(&rings, self.card.dma());
        let (r, pool, _, _) = self.pair.teardown(&self.dev, &mut delay, &mut done);
        r.unwrap();
        drop(pool);
        let (r, _, _) = self.dev.teardown(&mut delay);
        r.unwrap();
        let s = self.card.dma_stats();
        assert_eq!((s.live_pages, s.mapped_pages, s.live_regions), (0, 0, 0), "leak");
        assert_eq!(self.card.violations(), []);
    }
}

/// A to-device page holding `fill` everywhere.
fn os_page(dma: SimDma<'_>, fill: u8) -> DmaPage {
    let mut page = dma
        .map_page(dma.alloc_page().unwrap(), Direction::ToDevice)
        .unwrap();
    page.bytes_mut().fill(fill);
    dma.sync_for_device(&page, 0, PAGE_SIZE, Direction::ToDevice);
    page
}

/// A frame to transmit and a check of the refusal it must meet.
type Case<'c> = (HFrame<'c>, fn(&TxError<HFrame<'c>>) -> bool);

fn free_os_page(dma: SimDma<'_>, page: DmaPage) {
    dma.free_page(page.unmap(&dma, Direction::ToDevice));
}

#[test]
fn os_and_remote_frames_past_their_buffer_are_refused_and_handed_back() {
    let card = card();
    let ring = RecycleRing::new();
    let mut b = Bare::new(&card, &ring);
    let dma = card.dma();
    let db = b.dev.doorbells();
    let tx = &mut b.pair.tx;
    // (frame, expected refusal): one byte past the page; a frame at the end of its page whose
    // padding to 60 bytes would leave it; longer than any descriptor; empty.
    let cases: Vec<Case<'_>> = vec![
        (
            HFrame::Os {
                page: os_page(dma, 1),
                len: PAGE_SIZE + 1,
                dma,
            },
            |e| matches!(e, TxError::BeyondBuffer(_)),
        ),
        (
            HFrame::Xdp(XdpFrame {
                page: os_page(dma, 2),
                offset: (PAGE_SIZE - 30) as u16,
                len: 31,
                origin: 0,
            }),
            |e| matches!(e, TxError::BeyondBuffer(_)),
        ),
        (
            HFrame::Xdp(XdpFrame {
                page: os_page(dma, 3),
                offset: (PAGE_SIZE - 40) as u16,
                len: 20,
                origin: 0,
            }),
            |e| matches!(e, TxError::BeyondBuffer(_)),
        ),
        (
            HFrame::Os {
                page: os_page(dma, 4),
                len: TX_MAX_FRAME + 1,
                dma,
            },
            |e| matches!(e, TxError::BadLength(_)),
        ),
        (
            HFrame::Os {
                page: os_page(dma, 5),
                len: 0,
                dma,
            },
            |e| matches!(e, TxError::BadLength(_)),
        ),
    ];
    let n = cases.len() as u64;
    for (i, (f, expected)) in cases.into_iter().enumerate() {
        let r = if i % 2 == 0 {
            tx.xmit_os(&db, f, false)
        } else {
            tx.xmit_remote(&db, f, false)
        };
        let e = r.expect_err("a frame past its buffer was queued");
        assert!(expected(&e), "case {i}: {e:?}");
        // The buffer comes back: the caller frees it.
        free_os_page(dma, e.into_inner().into_page());
    }
    assert_eq!(tx.stats().tx_bad_length, n);
    assert_eq!(tx.in_flight(), 0);
    assert_eq!(tx.stats().doorbells, 0);
    // A frame that ends exactly at the end of its page is fine: the device reads the whole page
    // (the shell then drops it as longer than its largest frame, which is not the driver's
    // business).
    let ok = HFrame::Os {
        page: os_page(dma, 6),
        len: PAGE_SIZE,
        dma,
    };
    tx.xmit_os(&db, ok, false).unwrap();
    tx.flush(&db);
    let live = card.dma_stats().live_pages;
    b.complete();
    assert_eq!(b.pair.tx.stats().tx_packets, 1);
    assert_eq!(card.dma_stats().live_pages, live - 1, "the OS page was freed");
    assert_eq!(card.violations(), []);
    b.teardown();
}

#[test]
fn xdp_xmit_refuses_a_frame_that_leaves_its_page_and_leaves_it_with_the_caller() {
    let card = card();
    let ring = RecycleRing::new();
    let mut b = Bare::new(&card, &ring);
    let dma = card.dma();
    // Frames in pages of the pair's pool, sent through its TX queue as another device would
    // (`ndo_xdp_xmit`): a good one, then one whose offset + length leaves the page, then one
    // whose offset is past the page.
    let mut pages: Vec<DmaPage> = (0..3).map(|_| b.pair.pool.alloc().unwrap()).collect();
    for p in &mut pages {
        p.bytes_mut().fill(0xAB);
        dma.sync_for_device(p, 0, PAGE_SIZE, Direction::Bidirectional);
    }
    let spans = [(256u16, 100u16), (4000, 200), (5000, 60)];
    let mut frames: Vec<Option<HFrame<'_>>> = pages
        .into_iter()
        .zip(spans)
        .map(|(page, (offset, len))| {
            Some(HFrame::Xdp(XdpFrame {
                page,
                offset,
                len,
                origin: 0,
            }))
        })
        .collect();
    let db = b.dev.doorbells();
    let tx = &mut b.pair.tx;
    let sent = xdp_xmit(tx, &db, &mut frames, true);
    assert_eq!(sent, 1);
    assert!(frames[0].is_none());
    // The bad frame and everything after it stay with the caller, untouched.
    let left: Vec<(u16, u16)> = frames[1..]
        .iter()
        .map(|f| match f {
            Some(HFrame::Xdp(x)) => (x.offset, x.len),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(left, [(4000, 200), (5000, 60)]);
    let s = tx.stats();
    assert_eq!((s.tx_xdp_xmit, s.tx_xdp_xmit_errors, s.tx_bad_length), (1, 2, 1));
    // The second frame alone: refused as well (past the page by its offset alone).
    let mut rest = [frames[2].take()];
    assert_eq!(xdp_xmit(tx, &db, &mut rest, true), 0);
    assert_eq!(tx.stats().tx_bad_length, 2);
    for f in frames.into_iter().chain(rest).flatten() {
        let HFrame::Xdp(x) = f else { unreachable!() };
        b.pair.pool.recycle(x.page, 0);
    }
    b.complete();
    assert_eq!(card.take_egress(0).len(), 1);
    assert_eq!(b.pair.tx.in_flight(), 0);
    assert_eq!(card.violations(), []);
    b.teardown();
}

#[test]
fn xmit_pool_refuses_a_frame_or_padding_past_the_page() {
    let card = card();
    let ring = RecycleRing::new();
    let mut b = Bare::new(&card, &ring);
    let db = b.dev.doorbells();
    let pair = &mut b.pair;
    for (offset, len) in [(4090u16, 10u16), (4000, 100), (u16::MAX, 60), (256, 0)] {
        let page = pair.pool.alloc().unwrap();
        let f = PoolFrame { page, offset, len };
        let e = pair.tx.xmit_pool(&db, &mut pair.pool, f, false).unwrap_err();
        if len == 0 {
            assert!(matches!(e, TxError::BadLength(_)), "{e:?}");
        } else {
            assert!(matches!(e, TxError::BeyondBuffer(_)), "{e:?}");
        }
        let f = e.into_inner();
        assert_eq!((f.offset, f.len), (offset, len), "the frame comes back unchanged");
        pair.pool.recycle(f.page, 0);
    }
    assert_eq!(pair.tx.stats().tx_bad_length, 4);
    assert_eq!(pair.tx.pool_pages_in_flight(), 0);
    // A short frame at the very end of the room that padding still fits: padded and sent.
    let mut page = pair.pool.alloc().unwrap();
    page.bytes_mut()[4036..4046].fill(7);
    let f = PoolFrame {
        page,
        offset: 4036,
        len: 10,
    };
    let back = pair.tx.xmit_pool(&db, &mut pair.pool, f, false).unwrap();
    assert!(back.is_none(), "nothing is parked on a fresh ring");
    pair.tx.flush(&db);
    b.complete();
    let mut want = vec![7u8; 10];
    want.resize(60, 0);
    assert_eq!(card.take_egress(0), [want]);
    assert_eq!(card.violations(), []);
    b.teardown();
}

#[test]
fn a_full_ring_and_a_ring_in_its_error_state_hand_the_frame_back_with_the_error() {
    let card = card();
    let ring = RecycleRing::new();
    let mut b = Bare::new(&card, &ring);
    let dma = card.dma();
    let db = b.dev.doorbells();
    card.faults().stall_h2c_writeback(true);
    for i in 0..62 {
        let f = HFrame::Os {
            page: os_page(dma, i),
            len: 64,
            dma,
        };
        b.pair.tx.xmit_os(&db, f, false).unwrap();
    }
    // The 63rd frame: refused as `Full`, with the frame in the error.
    let f = HFrame::Os {
        page: os_page(dma, 62),
        len: 64,
        dma,
    };
    let TxError::Full(HFrame::Os { page, .. }) = b.pair.tx.xmit_os(&db, f, false).unwrap_err() else {
        panic!("expected Full with the frame");
    };
    assert_eq!(page.bytes()[0], 62, "the refused frame itself");
    free_os_page(dma, page);
    assert_eq!(b.pair.tx.stats().tx_busy, 1);
    // The device writes back a consumer index beyond what was published: the ring enters its
    // error state, and refuses the next frame with that error.
    card.run_until_idle();
    let dev_ring = DeviceRing::h2c(b.pair.tx.ring_dma_addr(), 63);
    card.write_word(dev_ring.status(), status_word(0, 63, false))
        .unwrap();
    let rings = [&ring];
    b.pair.tx.reclaim(&mut FrameDone::new(&rings, dma));
    let e = b.pair.tx.error().expect("an error state");
    assert!(matches!(e, QueueError::H2cCidx { .. }), "{e:?}");
    let f = HFrame::Os {
        page: os_page(dma, 63),
        len: 64,
        dma,
    };
    let TxError::Queue(HFrame::Os { page, .. }, q) = b.pair.tx.xmit_os(&db, f, false).unwrap_err() else {
        panic!("expected a queue error with the frame");
    };
    assert_eq!(q, e);
    free_os_page(dma, page);
    card.faults().stall_h2c_writeback(false);
    b.teardown();
}

#[test]
fn the_default_buffer_length_is_the_frame_itself() {
    // An owner that maps exactly its frame (the Linux shim's `dma_map_single` of the packet)
    // does not override `buffer_len`: a short frame cannot be padded past its mapping.
    #[derive(Debug)]
    struct Exact {
        page: DmaPage,
        len: usize,
    }
    impl onic_core::queue::tx::TxFrame for Exact {
        fn dma_addr(&self) -> onic_hal::DmaAddr {
            self.page.dma_addr()
        }
        fn len(&self) -> usize {
            self.len
        }
        fn pad_to(&mut self, _: usize) -> bool {
            true
        }
    }
    struct Back(Vec<Exact>);
    impl onic_core::queue::tx::TxDone<Exact> for Back {
        fn os_done(&mut self, f: Exact) {
            self.0.push(f);
        }
        fn remote_done(&mut self, f: Exact) {
            self.0.push(f);
        }
    }
    let mut cc = onic_sim::CardConfig::default();
    cc.wire = onic_sim::Wire::Open;
    let card = onic_sim::Card::new(cc);
    let mut delay = card.delay();
    let cfg = onic_core::DeviceConfig::new(0, 1).unwrap();
    let (dev, _) = onic_core::Device::init(card.qdma(0), card.shell(), &mut delay, cfg).unwrap();
    let txc = onic_core::TxQueueConfig {
        ring: onic_core::RingSizeIdx::new(1).unwrap(),
        ..onic_core::TxQueueConfig::new(onic_core::QueueId::new(0))
    };
    let slots: Vec<onic_core::TxSlot<DmaPage, Exact>> = (0..63).map(|_| onic_core::TxSlot::new()).collect();
    let mut tx = onic_core::TxQueue::new(card.dma(), txc, slots).unwrap();
    tx.start(&dev, &mut delay).unwrap();
    let db = dev.doorbells();
    let dma = card.dma();
    let e = tx
        .xmit_os(
            &db,
            Exact {
                page: os_page(dma, 9),
                len: 42,
            },
            false,
        )
        .unwrap_err();
    assert!(matches!(e, TxError::BeyondBuffer(_)), "{e:?}");
    let back = e.into_inner();
    assert_eq!(back.len, 42);
    free_os_page(dma, back.page);
    tx.xmit_os(
        &db,
        Exact {
            page: os_page(dma, 9),
            len: 60,
        },
        false,
    )
    .unwrap();
    card.run_until_idle();
    let mut pool = onic_core::PagePool::<_, 8>::new(
        card.dma(),
        onic_core::PoolConfig::rx(Direction::Bidirectional, 3520),
        None,
    );
    let mut done = Back(Vec::new());
    tx.teardown(&dev, &mut delay, &mut pool, &mut done).0.unwrap();
    for f in done.0 {
        free_os_page(dma, f.page);
    }
    drop(pool);
    let (r, _, _) = dev.teardown(&mut delay);
    r.unwrap();
    assert_eq!(card.dma_stats().live_pages, 0);
    assert_eq!(card.violations(), []);
}
