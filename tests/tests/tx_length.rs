//! The length rules of every TX entry point (`xmit_os`, `xmit_remote`, `xdp_xmit`, `xmit_pool`):
//! no descriptor may make the device read outside the buffer it was given. A frame that would is
//! refused with `TxError::BeyondBuffer` (or `BadLength`), counted in `tx_bad_length`, and handed
//! back; the model checks every device read against the mappings, so a descriptor that slipped
//! through would show up as a violation.

use onic_core::queue::tx::{PoolFrame, TxError, TX_MAX_FRAME};
use onic_core::xdp::{xdp_xmit, XdpFrame};
use onic_hal::{Direction, DmaMemory, DmaPage, PAGE_SIZE};
use onic_sim::SimDma;
use onic_tests::datapath::{HFrame, Harness, Setup};

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
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let rings = setup.recycle_rings();
    let mut h = Harness::new(&card, &setup, &rings);
    let dma = card.dma();
    let func = &mut h.funcs[0];
    let db = func.dev.doorbells();
    let tx = &mut func.pairs[0].tx;
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
    h.os_tx_live += 1;
    h.settle();
    h.reclaim(0, 0);
    assert_eq!(h.funcs[0].pairs[0].tx.stats().tx_packets, 1);
    assert_eq!(h.os_tx_live, 0);
    assert_eq!(card.violations(), []);
    h.check_pages();
    h.teardown();
}

#[test]
fn xdp_xmit_refuses_a_frame_that_leaves_its_page_and_leaves_it_with_the_caller() {
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let rings = setup.recycle_rings();
    let mut h = Harness::new(&card, &setup, &rings);
    let dma = card.dma();
    // Frames in pages of pair 0's pool, sent through pair 0's TX queue as another device would
    // (`ndo_xdp_xmit`): a good one, then one whose offset + length leaves the page, then one
    // whose offset is past the page.
    let mut pages: Vec<DmaPage> = (0..3)
        .map(|_| h.funcs[0].pairs[0].pool.alloc().unwrap())
        .collect();
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
    let func = &mut h.funcs[0];
    let db = func.dev.doorbells();
    let tx = &mut func.pairs[0].tx;
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
        h.funcs[0].pairs[0].pool.recycle(x.page, 0);
    }
    h.settle();
    assert_eq!(card.take_egress(0).len(), 1);
    h.drain();
    assert_eq!(card.violations(), []);
    h.teardown();
}

#[test]
fn xmit_pool_refuses_a_frame_or_padding_past_the_page() {
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let rings = setup.recycle_rings();
    let mut h = Harness::new(&card, &setup, &rings);
    let func = &mut h.funcs[0];
    let db = func.dev.doorbells();
    let pair = &mut func.pairs[0];
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
    h.settle();
    let mut want = vec![7u8; 10];
    want.resize(60, 0);
    assert_eq!(card.take_egress(0), [want]);
    h.drain();
    assert_eq!(card.violations(), []);
    h.teardown();
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
