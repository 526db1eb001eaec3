//! The UMEM pieces on their own, then a queue pair over an [`XskPool`] on the model card.

use std::cell::Cell;
use std::vec::Vec;

use onic_hal::{Direction, DmaMemory, DmaPage, PAGE_SIZE};
use onic_sim::{Card, CardConfig, SimDma, Wire};

use super::*;
use crate::config::{RingSizeIdx, RxQueueConfig, TxQueueConfig};
use crate::error::ConfigError;
use crate::queue::pool::{PageProvider, PoolPage};
use crate::queue::rx::{RxOptions, RxQueue};
use crate::queue::tx::{TxQueue, TxSlot};
use crate::testutil;

const BI: Direction = Direction::Bidirectional;

fn pages(dma: &SimDma<'_>, n: usize) -> Vec<DmaPage> {
    (0..n)
        .map(|_| dma.map_page(dma.alloc_page().unwrap(), BI).unwrap())
        .collect()
}

fn free_pages(dma: &SimDma<'_>, pages: Vec<DmaPage>) {
    for p in pages {
        dma.free_page(p.unmap(dma, BI));
    }
}

fn cells<T: Copy + Default>(n: usize) -> Vec<Cell<T>> {
    (0..n).map(|_| Cell::new(T::default())).collect()
}

/// An application's ring memory for a pair test: a fill ring of 128 entries, completion, RX and
/// TX rings of 64.
#[cfg(feature = "xdp")]
struct AppCells {
    fill: Vec<Cell<u64>>,
    comp: Vec<Cell<u64>>,
    rx: Vec<Cell<XskDesc>>,
    tx: Vec<Cell<XskDesc>>,
}

/// An application's fill, completion, RX and TX rings.
#[cfg(feature = "xdp")]
type AppRings<'c> = (
    XskRing<'c, u64>,
    XskRing<'c, u64>,
    XskRing<'c, XskDesc>,
    XskRing<'c, XskDesc>,
);

#[cfg(feature = "xdp")]
impl AppCells {
    fn new() -> Self {
        Self {
            fill: cells(128),
            comp: cells(64),
            rx: cells(64),
            tx: cells(64),
        }
    }

    /// The fill, completion, RX and TX rings over the cells.
    fn rings(&self) -> AppRings<'_> {
        (
            XskRing::new(&self.fill).unwrap(),
            XskRing::new(&self.comp).unwrap(),
            XskRing::new(&self.rx).unwrap(),
            XskRing::new(&self.tx).unwrap(),
        )
    }
}

fn cfg(headroom: u16) -> UmemConfig {
    UmemConfig { headroom, dir: BI }
}

#[test]
fn the_pool_takes_from_the_fill_ring_once_per_chunk_and_drains_back() {
    let card = Card::new(CardConfig::default());
    let dma = card.dma();
    let mut pages = pages(&dma, 8);
    {
        let chunks: Vec<UmemChunk<'_>> = pages.iter_mut().map(UmemChunk::new).collect();
        let umem = Umem::new(&chunks, cfg(0)).unwrap();
        let fs = cells::<u64>(8);
        let fill = XskRing::new(&fs).unwrap();
        let mut pool = XskPool::new(dma, umem, &fill, 3520).unwrap();
        // An offset in the chunk is ignored; the same chunk twice, and one past the UMEM, are
        // refused.
        for addr in [
            Umem::chunk_addr(2) + 100,
            Umem::chunk_addr(2),
            Umem::chunk_addr(8),
            Umem::chunk_addr(5),
        ] {
            fill.produce(addr).unwrap();
        }
        let a = pool.alloc_page().unwrap();
        assert_eq!((a.index(), umem.state(2)), (2, Some(ChunkState::Held)));
        let b = pool.alloc_page().unwrap();
        assert_eq!(b.index(), 5);
        assert_eq!(pool.stats().fill_invalid, 2);
        assert!(pool.alloc_page().is_none());
        assert_eq!(pool.stats().alloc_empty, 1);
        assert_eq!(a.bytes().len(), PAGE_SIZE);
        assert_eq!(a.dma_addr().get() % PAGE_SIZE as u64, 0);
        // The frame taken from the fill ring was synced for the device over its buffer.
        assert_eq!(card.dma_stats().syncs_for_device, 2);
        pool.recycle_direct(a, 100);
        assert_eq!((umem.state(2), pool.free_len()), (Some(ChunkState::Pooled), 1));
        // The free list comes first.
        let c = pool.alloc_page().unwrap();
        assert_eq!(c.index(), 2);
        let c = pool.reuse(c, 0).unwrap();
        pool.recycle_direct(c, 0);
        pool.recycle_direct(b, 0);
        assert_eq!(
            umem.counts(),
            UmemCounts {
                app: 6,
                pooled: 2,
                held: 0
            }
        );
        let mut back = Vec::new();
        assert_eq!(pool.drain(|a| back.push(a)), 2);
        back.sort_unstable();
        assert_eq!(back, [Umem::chunk_addr(2), Umem::chunk_addr(5)]);
        assert_eq!(umem.counts().app, 8);
        // A chunk the application has again can be handed over again.
        fill.produce(Umem::chunk_addr(2)).unwrap();
        let d = pool.alloc_page().unwrap();
        pool.recycle_direct(d, 0);
        drop(pool);
        assert_eq!(umem.counts().app, 8, "dropping the pool drains it");
    }
    free_pages(&dma, pages);
    assert_eq!(card.dma_stats().live_pages, 0);
    assert_eq!(card.violations(), []);
}

#[test]
fn a_headroom_moves_the_view_and_must_leave_room_for_the_buffer() {
    let card = Card::new(CardConfig::default());
    let dma = card.dma();
    let mut pages = pages(&dma, 2);
    {
        let chunks: Vec<UmemChunk<'_>> = pages.iter_mut().map(UmemChunk::new).collect();
        assert_eq!(
            Umem::new(&chunks, cfg(3840)).err(),
            Some(UmemError::Headroom { headroom: 3840 })
        );
        assert_eq!(
            Umem::new(&chunks[..0], cfg(0)).err(),
            Some(UmemError::ChunkCount { chunks: 0 })
        );
        let fs = cells::<u64>(2);
        let fill = XskRing::new(&fs).unwrap();
        // No tailroom is kept in a UMEM frame: 321 bytes of headroom leave 3775 bytes, one short
        // of the RX headroom and a 3520-byte buffer; 320 leave exactly enough.
        let wide = Umem::new(&chunks, cfg(321)).unwrap();
        assert_eq!(
            XskPool::new(dma, wide, &fill, 3520).err(),
            Some(ConfigError::BufferTooLarge {
                buffer: 3520,
                room: 3519
            })
        );
        let umem = Umem::new(&chunks, cfg(320)).unwrap();
        let mut pool = XskPool::new(dma, umem, &fill, 3520).unwrap();
        fill.produce(Umem::chunk_addr(1)).unwrap();
        let mut f = pool.alloc_page().unwrap();
        assert_eq!(f.bytes().len(), 256 + 3520, "the buffer reaches the chunk's end");
        assert_eq!(f.dma_addr().get() % PAGE_SIZE as u64, 320);
        assert_eq!(f.view_addr(), Umem::chunk_addr(1) + 320);
        f.bytes_mut()[0] = 0xab;
        pool.recycle_direct(f, 0);
        pool.drain(|_| {});
        let seen = umem.with_app_chunk(Umem::chunk_addr(1) + 7, |b| b[320]);
        assert_eq!(seen, Some(0xab), "the view starts behind the headroom");
    }
    free_pages(&dma, pages);
    assert_eq!(card.violations(), []);
}

type Pool<'u, 'r, 'c> = XskPool<'u, 'r, SimDma<'c>>;
type Pair<'u, 'r, 'c> = crate::QueuePair<
    SimDma<'c>,
    Pool<'u, 'r, 'c>,
    UmemTxFrame<'u>,
    Vec<Option<UmemFrame<'u>>>,
    Vec<TxSlot<UmemFrame<'u>, UmemTxFrame<'u>>>,
>;

fn open_card() -> Card {
    let mut c = CardConfig::default();
    c.wire = Wire::Open;
    Card::new(c)
}

/// A pair with 64-entry rings (63 usable) over `pool`.
fn pair<'u, 'r, 'c>(card: &'c Card, pool: Pool<'u, 'r, 'c>) -> Pair<'u, 'r, 'c> {
    let rx_cfg = RxQueueConfig {
        desc_ring: RingSizeIdx::new(1).unwrap(),
        cmpt_ring: RingSizeIdx::new(1).unwrap(),
        ..RxQueueConfig::new(onic_hal::QueueId::new(0))
    };
    let tx_cfg = TxQueueConfig {
        ring: RingSizeIdx::new(1).unwrap(),
        ..TxQueueConfig::new(onic_hal::QueueId::new(0))
    };
    let rx_slots = (0..63).map(|_| None).collect();
    let tx_slots = (0..63).map(|_| TxSlot::new()).collect();
    let rx = RxQueue::new(card.dma(), rx_cfg, RxOptions::for_queue(&rx_cfg), rx_slots).unwrap();
    let tx = TxQueue::new(card.dma(), tx_cfg, tx_slots).unwrap();
    crate::QueuePair::new(rx, tx, pool)
}

#[cfg(feature = "xdp")]
fn settle(card: &Card) {
    card.run_until_idle();
    card.advance_time(2_000);
    card.run_until_idle();
}

fn frame(kind: u8, seq: u8, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len)
        .map(|i| seq.wrapping_mul(31).wrapping_add(i as u8))
        .collect();
    f[0] = kind;
    f[1] = seq;
    f
}

/// The frames of an RX ring, read by the application from its chunks (each at the RX headroom).
#[cfg(feature = "xdp")]
fn read_rx_ring(umem: &Umem<'_>, rxr: &XskRing<'_, XskDesc>) -> Vec<Vec<u8>> {
    core::iter::from_fn(|| rxr.consume())
        .map(|d| {
            let off = (d.addr % PAGE_SIZE as u64) as usize;
            assert_eq!(off, 256, "the frame at the RX headroom");
            umem.with_app_chunk(d.addr, |b| b[off..off + d.len as usize].to_vec())
                .unwrap()
        })
        .collect()
}

/// Every verdict on UMEM frames: DROP keeps the frame in its slot, PASS is copied, TX goes out
/// from the chunk, REDIRECT lands in the application's RX ring without a copy; at teardown every
/// chunk is the application's again.
#[cfg(feature = "xdp")]
#[test]
fn every_verdict_on_umem_frames_and_every_chunk_back_at_teardown() {
    use crate::queue::pair::{PassInfo, XdpRxq};
    use crate::xdp::{XdpAction, XdpBuff, XdpDispatch};
    use crate::RxContext;

    let card = open_card();
    let dev = testutil::device(&card, 1);
    let mut delay = card.delay();
    let dma = card.dma();
    let mut pages = pages(&dma, 96);
    {
        let chunks: Vec<UmemChunk<'_>> = pages.iter_mut().map(UmemChunk::new).collect();
        let umem = Umem::new(&chunks, cfg(0)).unwrap();
        let cells = AppCells::new();
        let (fill, cq, rxr, txr) = cells.rings();
        for i in 0..96 {
            fill.produce(Umem::chunk_addr(i)).unwrap();
        }
        let mut p = pair(&card, XskPool::new(dma, umem, &fill, 3520).unwrap());
        p.start(&dev, &mut delay).unwrap();
        assert_eq!(p.rx.pages_in_ring(), 62, "all but one slot posted");
        let mut xsk_tx = XskTx::new(dma, umem, &txr, &cq);
        let mut xsk_rx = XskRx::new(umem, &rxr);
        let mut copies = Vec::new();
        let mut sink = XskPass::new(|f: &[u8], _: PassInfo| {
            copies.push(f.to_vec());
            true
        });
        let mut prog = |x: &mut XdpBuff<'_>| match x.data()[0] {
            0 => XdpAction::Drop,
            1 => XdpAction::Pass,
            2 => XdpAction::Tx,
            _ => x.redirect(0),
        };
        let sent: Vec<Vec<u8>> = (0..12u8).map(|i| frame(i % 4, i, 60 + usize::from(i))).collect();
        for f in &sent {
            card.inject(0, f);
        }
        settle(&card);
        let mut ctx = RxContext {
            sink: &mut sink,
            rxq: XdpRxq::default(),
            dispatch: XdpDispatch {
                prog: Some(&mut prog),
                redirect: &mut xsk_rx,
                origin: 0,
                hasher: None,
            },
        };
        let out = p.poll(64, &dev.doorbells(), &mut ctx, &mut xsk_tx);

        assert_eq!(out.rx.done, 12);
        let s = *p.stats();
        assert_eq!(
            (s.rx_xdp_drop, s.rx_xdp_pass, s.rx_xdp_tx, s.rx_xdp_redirect),
            (3, 3, 3, 3)
        );
        // PASS: copied, the frame stays with the RX ring.
        assert_eq!(sink.copied, 3);

        assert_eq!(copies, [sent[1].clone(), sent[5].clone(), sent[9].clone()]);
        // REDIRECT: the application reads its frames where the device wrote them.
        let got = read_rx_ring(&umem, &rxr);
        assert_eq!(got, [sent[3].clone(), sent[7].clone(), sent[11].clone()]);
        // TX: out of the port from the chunk.
        card.run_until_idle();
        assert_eq!(
            card.take_egress(0),
            [sent[2].clone(), sent[6].clone(), sent[10].clone()]
        );
        // Three chunks went to the application, the rest is in the ring, the TX slots and the
        // fill ring; the redirected chunks were replaced from the fill ring.
        let n = umem.counts();
        assert_eq!(
            n.held as u64,
            p.rx.pages_in_ring() + p.tx.pool_pages_in_flight() + p.tx.pool_pages_parked()
        );
        assert_eq!(n.app, 96 - n.held - n.pooled);
        // Each of the 63 slots, the spare, and a replacement for each frame redirected or sent.
        // (The refill in the poll gave the 63rd slot its first frame.)
        assert_eq!(p.pool.stats().fill_taken, 63 + 1 + 3 + 3);
        assert_eq!(n.held, 67);
        let (r, mut pool, _, _) = p.teardown(&dev, &mut delay, &mut xsk_tx);
        r.unwrap();
        assert_eq!(
            pool.free_len(),
            67,
            "the ring's frames, the spare, the parked XDP_TX frames"
        );
        pool.drain(|_| {});
        assert_eq!(umem.counts().app, 96);
    }
    free_pages(&dma, pages);
    assert_eq!(card.dma_stats().live_pages, 0);
    assert_eq!(card.violations(), []);
}

/// Zero-copy TX: frames from the TX ring go out from their chunks (a short one padded in its
/// chunk), invalid entries are refused, a completion ring with room for two lets two frames out
/// at a time, and each completion hands the chunk back with its address.
#[test]
fn tx_ring_frames_go_out_and_complete_into_the_completion_ring() {
    let card = open_card();
    let dev = testutil::device(&card, 1);
    let mut delay = card.delay();
    let dma = card.dma();
    let mut pages = pages(&dma, 8);
    {
        let chunks: Vec<UmemChunk<'_>> = pages.iter_mut().map(UmemChunk::new).collect();
        let umem = Umem::new(&chunks, cfg(0)).unwrap();
        let (fs, cs, ts) = (cells::<u64>(8), cells::<u64>(2), cells::<XskDesc>(8));
        let fill = XskRing::new(&fs).unwrap();
        let (cq, txr) = (XskRing::new(&cs).unwrap(), XskRing::new(&ts).unwrap());
        let mut p = pair(&card, XskPool::new(dma, umem, &fill, 3520).unwrap());
        p.start(&dev, &mut delay).unwrap();
        let mut xsk_tx = XskTx::new(dma, umem, &txr, &cq);
        let frames = [frame(9, 1, 100), frame(9, 2, 20), frame(9, 3, 1514)];
        let mut descs = Vec::new();
        for (i, f) in frames.iter().enumerate() {
            let addr = Umem::chunk_addr(i as u32) + 64;
            umem.with_app_chunk(addr, |b| b[64..64 + f.len()].copy_from_slice(f))
                .unwrap();
            descs.push(XskDesc {
                addr,
                len: f.len() as u32,
                options: 0,
            });
        }
        // Refused: past the UMEM, empty, running past its chunk, the same chunk twice.
        let bad = [
            XskDesc {
                addr: Umem::chunk_addr(8),
                len: 60,
                options: 0,
            },
            XskDesc {
                addr: Umem::chunk_addr(5),
                len: 0,
                options: 0,
            },
            XskDesc {
                addr: Umem::chunk_addr(5) + 4000,
                len: 200,
                options: 0,
            },
        ];
        for d in [descs[0], bad[0], bad[1], descs[0], bad[2], descs[1], descs[2]] {
            txr.produce(d).unwrap();
        }
        let db = dev.doorbells();
        // The completion ring has room for two: two frames out (the duplicate of the first is
        // refused on the way).
        assert_eq!(xsk_tx.send(&mut p.tx, &db, 64), 2);
        assert_eq!(xsk_tx.stats().invalid, 4);
        assert_eq!(xsk_tx.stats().completion_full, 1);
        assert_eq!(xsk_tx.outstanding(), 2);
        assert_eq!(umem.state(0), Some(ChunkState::Held));
        card.run_until_idle();
        let mut padded = frames[1].clone();
        padded.resize(60, 0);
        assert_eq!(card.take_egress(0), [frames[0].clone(), padded]);
        p.tx.reclaim(&mut xsk_tx);
        assert_eq!(cq.entries().collect::<Vec<_>>(), [descs[0].addr, descs[1].addr]);
        assert_eq!(umem.state(0), Some(ChunkState::App));
        // The application takes its completions; the last frame goes out.
        while cq.consume().is_some() {}
        assert_eq!(xsk_tx.send(&mut p.tx, &db, 64), 1);
        card.run_until_idle();
        assert_eq!(card.take_egress(0), [frames[2].clone()]);
        p.tx.reclaim(&mut xsk_tx);
        assert_eq!(cq.consume(), Some(descs[2].addr));
        assert_eq!(xsk_tx.stats().completed, 3);
        let (r, pool, _, _) = p.teardown(&dev, &mut delay, &mut xsk_tx);
        r.unwrap();
        drop(pool);
        assert_eq!(umem.counts().app, 8);
    }
    free_pages(&dma, pages);
    assert_eq!(card.violations(), []);
}

/// A fill ring that runs dry in the middle of a poll costs no frame the device already wrote:
/// each one reaches the application's RX ring and the ring runs short instead (a page pool
/// would drop them in their slots, `rx_no_page`). Once the application hands chunks back, a
/// poll refills the ring, and at teardown every chunk is the application's again.
#[cfg(feature = "xdp")]
#[test]
fn a_dry_fill_ring_shortens_the_ring_and_loses_no_frame() {
    use crate::queue::pair::{PassInfo, XdpRxq};
    use crate::xdp::{XdpBuff, XdpDispatch};
    use crate::RxContext;

    let card = open_card();
    let dev = testutil::device(&card, 1);
    let mut delay = card.delay();
    let dma = card.dma();
    let mut pages = pages(&dma, 96);
    {
        let chunks: Vec<UmemChunk<'_>> = pages.iter_mut().map(UmemChunk::new).collect();
        let umem = Umem::new(&chunks, cfg(0)).unwrap();
        let cells = AppCells::new();
        let (fill, cq, rxr, txr) = cells.rings();
        // The 62 slots the start posts and one chunk more: the fill ring is dry after the
        // first frame takes its spare.
        for i in 0..63 {
            fill.produce(Umem::chunk_addr(i)).unwrap();
        }
        let mut p = pair(&card, XskPool::new(dma, umem, &fill, 3520).unwrap());
        p.start(&dev, &mut delay).unwrap();
        assert_eq!(p.rx.pages_in_ring(), 62);
        let mut xsk_tx = XskTx::new(dma, umem, &txr, &cq);
        let mut xsk_rx = XskRx::new(umem, &rxr);
        let mut sink = XskPass::new(|_: &[u8], _: PassInfo| true);
        let mut prog = |x: &mut XdpBuff<'_>| x.redirect(0);
        // Polls until the queue has nothing more; the frames it took.
        macro_rules! poll_all {
            () => {{
                let mut ctx = RxContext {
                    sink: &mut sink,
                    rxq: XdpRxq::default(),
                    dispatch: XdpDispatch {
                        prog: Some(&mut prog),
                        redirect: &mut xsk_rx,
                        origin: 0,
                        hasher: None,
                    },
                };
                let mut done = 0;
                loop {
                    let out = p.poll(64, &dev.doorbells(), &mut ctx, &mut xsk_tx);
                    done += out.rx.done;
                    if !out.rx.more {
                        break done;
                    }
                }
            }};
        }
        // The application reads its RX ring and hands each chunk back to the fill ring.
        let app_round = |rxr: &XskRing<'_, XskDesc>| {
            let descs: Vec<XskDesc> = core::iter::from_fn(|| rxr.consume()).collect();
            let frames: Vec<Vec<u8>> = descs
                .iter()
                .map(|d| {
                    let off = (d.addr % PAGE_SIZE as u64) as usize;
                    umem.with_app_chunk(d.addr, |b| b[off..off + d.len as usize].to_vec())
                        .unwrap()
                })
                .collect();
            for d in &descs {
                fill.produce(d.addr - d.addr % PAGE_SIZE as u64).unwrap();
            }
            frames
        };

        let first: Vec<Vec<u8>> = (0..30u8).map(|i| frame(3, i, 64 + usize::from(i))).collect();
        for f in &first {
            card.inject(0, f);
        }
        settle(&card);
        assert_eq!(poll_all!(), 30);
        assert_eq!(p.rx.stats().rx_no_page, 0, "no frame dropped for want of a chunk");
        assert!(p.rx.stats().refill_alloc_failures > 0, "the fill ring ran dry");
        // The first frame's slot took the spare; the other 29 slots wait empty.
        assert_eq!(p.rx.pages_in_ring(), 62 - 29);
        assert_eq!(app_round(&rxr), first);

        // Chunks back in the fill ring: the next poll fills the ring again, and the next frames
        // all arrive.
        assert_eq!(poll_all!(), 0);
        assert_eq!(p.rx.pages_in_ring(), 62);
        let second: Vec<Vec<u8>> = (30..70u8).map(|i| frame(3, i, 64 + usize::from(i))).collect();
        for f in &second[..20] {
            card.inject(0, f);
        }
        settle(&card);
        assert_eq!(poll_all!(), 20);
        assert_eq!(app_round(&rxr), second[..20]);
        assert_eq!(card.stats().c2h_no_desc_dropped, 0);
        assert_eq!(p.rx.stats().rx_no_page, 0);

        let (r, mut pool, _, _) = p.teardown(&dev, &mut delay, &mut xsk_tx);
        r.unwrap();
        pool.drain(|_| {});
        // Every chunk is the application's: in its fill ring or never handed in.
        let n = umem.counts();
        assert_eq!((n.held, n.pooled), (0, 0));
        assert_eq!(n.app, 96);
    }
    free_pages(&dma, pages);
    assert_eq!(card.dma_stats().live_pages, 0);
    assert_eq!(card.violations(), []);
}
