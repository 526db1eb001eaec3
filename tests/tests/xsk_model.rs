//! Model-based property test of the UMEM buffer provider: a queue pair whose RX buffers come from
//! an `XskPool` and whose TX queue carries the application's UMEM frames runs against the model
//! card, with an XDP program choosing DROP, PASS, TX, REDIRECT (into the application's RX ring) or
//! ABORTED by the frame's first byte, while a simulated application fills, sends, reads its RX
//! ring and its completion ring at random. After every step the chunk census must hold: every
//! chunk the application's, pooled or held, the held ones exactly those the queues report, and
//! the application's named once (idle, or in one of its four rings). Queue restarts come at random;
//! at the end the pair is torn down and every chunk must be the application's, each once.
//!
//! `PROPTEST_CASES` sets the number of cases (default 24).

use std::cell::Cell;
use std::collections::HashSet;

use onic_core::config::{xsk_room_for, BufSizeIdx};
use onic_core::queue::xsk::{
    ChunkState, Umem, UmemChunk, UmemConfig, UmemFrame, UmemTxFrame, XskDesc, XskPass, XskPool, XskRing,
    XskRx, XskTx, UMEM_CHUNK_SIZE,
};
use onic_core::xdp::{XdpAction, XdpBuff, XdpDispatch};
use onic_core::{
    Device, DeviceConfig, PassInfo, QueuePair, RingSizeIdx, RxOptions, RxQueue, RxQueueConfig, TxQueue,
    TxQueueConfig, TxSlot, XdpRxq,
};
use onic_embed::poll::poll_pair;
use onic_hal::{Direction, DmaMemory, DmaPage, QueueId};
use onic_sim::{Card, CardConfig, SimDma, Wire};
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// Frames of (verdict byte, length) at the port, and the model run until idle.
    Inject(Vec<(u8, usize)>),
    Settle,
    Poll(usize),
    /// The application puts up to `n` idle chunks in the fill ring.
    Fill(usize),
    /// It reads up to `n` frames of its RX ring.
    ReadRx(usize),
    /// It takes up to `n` completions.
    ReadCq(usize),
    /// It writes frames of these lengths at this offset and puts them in its TX ring.
    Send {
        offset: u16,
        lens: Vec<usize>,
    },
    /// The driver sends up to `n` frames of the TX ring.
    Xmit(u32),
    Restart,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => prop::collection::vec((0u8..5, 60usize..=1514), 1..40).prop_map(Op::Inject),
        2 => Just(Op::Settle),
        3 => (1usize..100).prop_map(Op::Poll),
        2 => (0usize..80).prop_map(Op::Fill),
        2 => (0usize..40).prop_map(Op::ReadRx),
        2 => (0usize..40).prop_map(Op::ReadCq),
        2 => (0u16..300, prop::collection::vec(5usize..=1514, 1..20)).prop_map(|(offset, lens)| Op::Send { offset, lens }),
        2 => (1u32..40).prop_map(Op::Xmit),
        1 => Just(Op::Restart),
    ]
}

#[derive(Clone, Debug)]
struct Case {
    ring_idx: u8,
    chunks: usize,
    /// log2 of the fill, completion, RX and TX ring sizes.
    rings: [u32; 4],
    headroom: u16,
    ops: Vec<Op>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        1u8..=3,
        8usize..400,
        [5u32..=9, 2u32..=7, 2u32..=7, 2u32..=7],
        prop_oneof![Just(0u16), Just(256), Just(320), Just(2048)],
        prop::collection::vec(op(), 1..80),
    )
        .prop_map(|(ring_idx, chunks, rings, headroom, ops)| Case {
            ring_idx,
            chunks,
            rings,
            headroom,
            ops,
        })
}

type Pair<'u, 'r, 'c> = QueuePair<
    SimDma<'c>,
    XskPool<'u, 'r, SimDma<'c>>,
    UmemTxFrame<'u>,
    Vec<Option<UmemFrame<'u>>>,
    Vec<TxSlot<UmemFrame<'u>, UmemTxFrame<'u>>>,
>;

/// The application's rings.
struct Rings<'r> {
    fill: XskRing<'r, u64>,
    cq: XskRing<'r, u64>,
    rx: XskRing<'r, XskDesc>,
    tx: XskRing<'r, XskDesc>,
}

/// The application: its idle chunks, and what it sent and expects (frame bytes by tag).
struct App {
    idle: Vec<u64>,
    injected: Vec<Vec<u8>>,
    sent_tx: Vec<Vec<u8>>,
}

/// A frame whose bytes 1..5 carry `tag`, byte 0 the verdict.
fn tagged(kind: u8, tag: u32, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len)
        .map(|i| (i as u32).wrapping_mul(7).wrapping_add(tag) as u8)
        .collect();
    f[0] = kind;
    f[1..5].copy_from_slice(&tag.to_le_bytes());
    f
}

fn chunk_base(addr: u64) -> u64 {
    addr - addr % UMEM_CHUNK_SIZE as u64
}

fn program(x: &mut XdpBuff<'_>) -> XdpAction {
    match x.data()[0] {
        0 => XdpAction::Drop,
        1 => XdpAction::Pass,
        2 => XdpAction::Tx,
        3 => x.redirect(0),
        _ => XdpAction::Aborted,
    }
}

/// The census: the pool's free list, the queues' frames and the application's chunks, against
/// the chunk states of the UMEM.
fn census(
    umem: &Umem<'_>,
    p: &Pair<'_, '_, '_>,
    xsk_tx: &XskTx<'_, '_, SimDma<'_>>,
    rings: &Rings<'_>,
    app: &App,
) {
    let n = umem.counts();
    assert_eq!(
        u64::from(n.pooled),
        u64::from(p.pool.free_len()),
        "pooled = the free list"
    );
    let held = p.rx.pages_in_ring() + p.tx.pool_pages_in_flight() + p.tx.pool_pages_parked();
    assert_eq!(
        u64::from(n.held),
        held + u64::from(xsk_tx.outstanding()),
        "held = what the queues hold"
    );
    let stashed = u32::from(xsk_tx.has_stashed());
    assert_eq!(p.tx.in_flight_by_owner().os + stashed, xsk_tx.outstanding());
    let named = app
        .idle
        .iter()
        .copied()
        .chain(rings.fill.entries())
        .chain(rings.cq.entries())
        .chain(rings.rx.entries().map(|d| d.addr))
        .chain(rings.tx.entries().map(|d| d.addr))
        .map(chunk_base);
    let mut seen = HashSet::new();
    for a in named {
        assert!(
            seen.insert(a),
            "chunk {a:#x} named twice on the application's side"
        );
        let i = umem.chunk_of(a).unwrap();
        assert_eq!(
            umem.state(i),
            Some(ChunkState::App),
            "chunk {i} named by the application"
        );
    }
    assert_eq!(
        seen.len(),
        n.app as usize,
        "every chunk of the application named once"
    );
}

fn run(c: &Case) {
    let mut cfg = CardConfig::default();
    cfg.wire = Wire::Open;
    let card = Card::new(cfg);
    let dma = card.dma();
    let mut pages: Vec<DmaPage> = (0..c.chunks)
        .map(|_| {
            dma.map_page(dma.alloc_page().unwrap(), Direction::Bidirectional)
                .unwrap()
        })
        .collect();
    run_with(c, &card, &mut pages);
    for p in pages {
        dma.free_page(p.unmap(&dma, Direction::Bidirectional));
    }
    assert_eq!(card.dma_stats().live_pages, 0);
    assert_eq!(card.violations(), []);
}

fn cells<T: Copy + Default>(log2: u32) -> Vec<Cell<T>> {
    (0..1usize << log2).map(|_| Cell::new(T::default())).collect()
}

/// A buffer size that fits a chunk behind `headroom` (the largest the table has; up to the
/// chunk's end: 3520 bytes up to 320 bytes of headroom, 1792 with 2048).
fn buf_for(headroom: u16) -> BufSizeIdx {
    let room = UMEM_CHUNK_SIZE as u32 - u32::from(headroom);
    (0..16)
        .filter_map(|i| BufSizeIdx::new(i).ok())
        .filter(|b| xsk_room_for(b.bytes()) <= room)
        .max_by_key(|b| b.bytes())
        .unwrap()
}

fn pair<'u, 'r, 'c>(c: &Case, card: &'c Card, pool: XskPool<'u, 'r, SimDma<'c>>) -> Pair<'u, 'r, 'c> {
    let ring = RingSizeIdx::new(c.ring_idx).unwrap();
    let rx_cfg = RxQueueConfig {
        desc_ring: ring,
        cmpt_ring: ring,
        buf: buf_for(c.headroom),
        ..RxQueueConfig::new(QueueId::new(0))
    };
    let tx_cfg = TxQueueConfig {
        ring,
        ..TxQueueConfig::new(QueueId::new(0))
    };
    let n = usize::from(ring.usable());
    let rx = RxQueue::new(
        card.dma(),
        rx_cfg,
        RxOptions::for_queue(&rx_cfg),
        (0..n).map(|_| None).collect(),
    )
    .unwrap();
    let tx = TxQueue::new(card.dma(), tx_cfg, (0..n).map(|_| TxSlot::new()).collect()).unwrap();
    QueuePair::new(rx, tx, pool)
}

fn run_with(c: &Case, card: &Card, pages: &mut [DmaPage]) {
    let chunks: Vec<UmemChunk<'_>> = pages.iter_mut().map(UmemChunk::new).collect();
    let ucfg = UmemConfig {
        headroom: c.headroom,
        dir: Direction::Bidirectional,
    };
    let umem = Umem::new(&chunks, ucfg).unwrap();
    let (fs, cs, rs, ts) = (
        cells(c.rings[0]),
        cells(c.rings[1]),
        cells(c.rings[2]),
        cells(c.rings[3]),
    );
    let rings = Rings {
        fill: XskRing::new(&fs).unwrap(),
        cq: XskRing::new(&cs).unwrap(),
        rx: XskRing::new(&rs).unwrap(),
        tx: XskRing::new(&ts).unwrap(),
    };
    let mut app = App {
        idle: (0..umem.chunks()).map(Umem::chunk_addr).collect(),
        injected: Vec::new(),
        sent_tx: Vec::new(),
    };
    let (dev, _) = Device::init(
        card.qdma(0),
        card.shell(),
        &mut card.delay(),
        DeviceConfig::new(0, 1).unwrap(),
    )
    .unwrap();
    let mut delay = card.delay();
    let buf = buf_for(c.headroom).bytes();
    let pool = XskPool::new(card.dma(), umem, &rings.fill, buf).unwrap();
    let mut p = pair(c, card, pool);
    let mut xsk_tx = XskTx::new(card.dma(), umem, &rings.tx, &rings.cq);
    let mut xsk_rx = XskRx::new(umem, &rings.rx);
    let mut copies = 0u64;
    let mut sink = XskPass::new(|_: &[u8], _: PassInfo| {
        copies += 1;
        true
    });
    fill(&rings, &mut app, 64);
    p.start(&dev, &mut delay).unwrap();
    census(&umem, &p, &xsk_tx, &rings, &app);
    let mut egress = HashSet::new();
    for op in &c.ops {
        let db = dev.doorbells();
        match op {
            Op::Inject(frames) => {
                for &(kind, len) in frames {
                    let f = tagged(kind, app.injected.len() as u32, len);
                    card.inject(0, &f);
                    app.injected.push(f);
                }
                card.run_until_idle();
            }
            Op::Settle => {
                card.run_until_idle();
                card.advance_time(2_000);
                card.run_until_idle();
            }
            Op::Poll(budget) => {
                let dispatch = XdpDispatch {
                    prog: Some(&mut program),
                    redirect: &mut xsk_rx,
                    origin: 0,
                    hasher: None,
                };
                poll_pair(
                    &mut p,
                    (*budget, &db),
                    (&mut sink, XdpRxq::default()),
                    dispatch,
                    &mut xsk_tx,
                );
            }
            Op::Fill(n) => fill(&rings, &mut app, *n),
            Op::ReadRx(n) => read_rx(&umem, &rings, &mut app, *n),
            Op::ReadCq(n) => {
                for a in std::iter::from_fn(|| rings.cq.consume()).take(*n) {
                    app.idle.push(chunk_base(a));
                }
            }
            Op::Send { offset, lens } => send(&umem, &rings, &mut app, *offset, lens),
            Op::Xmit(n) => {
                xsk_tx.send(&mut p.tx, &db, *n);
            }
            Op::Restart => {
                let _ = p.restart(&dev, &mut delay, &mut xsk_tx);
            }
        }
        take_egress(card, &app, &mut egress);
        census(&umem, &p, &xsk_tx, &rings, &app);
    }
    finish(&umem, p, &mut xsk_tx, &rings, &mut app, &dev, &mut delay);
    let _ = copies;
}

/// Tears the pair down and checks that every chunk is the application's, each once (idle, or
/// still in the fill or TX ring it produced into).
fn finish<'u, 'c>(
    umem: &Umem<'u>,
    p: Pair<'u, '_, 'c>,
    xsk_tx: &mut XskTx<'u, '_, SimDma<'c>>,
    rings: &Rings<'_>,
    app: &mut App,
    dev: &Device<onic_sim::QdmaWindow<'c>, onic_sim::ShellWindow<'c>>,
    delay: &mut onic_sim::SimDelay<'c>,
) {
    let (r, mut pool, _, _) = p.teardown(dev, delay, xsk_tx);
    r.unwrap();
    xsk_tx.drop_stash();
    pool.drain(|a| app.idle.push(a));
    assert_eq!(
        pool.stats().fill_invalid + xsk_tx.stats().invalid,
        0,
        "the application never hands a chunk over twice"
    );
    drop(pool);
    read_rx(umem, rings, app, usize::MAX);
    app.idle
        .extend(std::iter::from_fn(|| rings.cq.consume()).map(chunk_base));
    let n = umem.counts();
    assert_eq!(
        (n.pooled, n.held),
        (0, 0),
        "every chunk back with the application"
    );
    let all: HashSet<u64> = app
        .idle
        .iter()
        .copied()
        .chain(rings.fill.entries())
        .chain(rings.tx.entries().map(|d| chunk_base(d.addr)))
        .collect();
    assert_eq!(all.len(), umem.chunks() as usize);
    assert_eq!(
        app.idle.len() + rings.fill.len() as usize + rings.tx.len() as usize,
        all.len()
    );
}

fn fill(rings: &Rings<'_>, app: &mut App, n: usize) {
    for _ in 0..n {
        let Some(a) = app.idle.pop() else { break };
        if let Err(a) = rings.fill.produce(a) {
            app.idle.push(a);
            break;
        }
    }
}

/// Reads up to `n` frames of the RX ring: each must be a redirected frame as injected (padded to
/// 60 bytes if shorter, which none is here).
fn read_rx(umem: &Umem<'_>, rings: &Rings<'_>, app: &mut App, n: usize) {
    for d in std::iter::from_fn(|| rings.rx.consume()).take(n) {
        let off = (d.addr % UMEM_CHUNK_SIZE as u64) as usize;
        let got = umem
            .with_app_chunk(d.addr, |b| b[off..off + d.len as usize].to_vec())
            .expect("an RX ring frame is the application's");
        let tag = u32::from_le_bytes(got[1..5].try_into().unwrap());
        assert_eq!(got[0], 3, "only redirected frames reach the RX ring");
        assert_eq!(
            Some(&got),
            app.injected.get(tag as usize),
            "frame {tag} arrives as sent"
        );
        app.idle.push(chunk_base(d.addr));
    }
}

/// Writes frames into idle chunks and puts them in the TX ring.
fn send(umem: &Umem<'_>, rings: &Rings<'_>, app: &mut App, offset: u16, lens: &[usize]) {
    for &len in lens {
        if rings.tx.free() == 0 {
            break;
        }
        let Some(base) = app.idle.pop() else { break };
        let off = usize::from(offset).min(UMEM_CHUNK_SIZE - len.max(60));
        let f = tagged(9, 0x8000_0000 | app.sent_tx.len() as u32, len);
        umem.with_app_chunk(base, |b| b[off..off + len].copy_from_slice(&f))
            .unwrap();
        rings
            .tx
            .produce(XskDesc {
                addr: base + off as u64,
                len: len as u32,
                options: 0,
            })
            .unwrap();
        app.sent_tx.push(f);
    }
}

/// Every frame out of the port is one the test sent (XDP_TX or the TX ring), at most once.
fn take_egress(card: &Card, app: &App, seen: &mut HashSet<u32>) {
    card.run_until_idle();
    for mut f in card.take_egress(0) {
        let tag = u32::from_le_bytes(f[1..5].try_into().unwrap());
        let want = if f[0] == 9 {
            app.sent_tx.get((tag & !0x8000_0000) as usize)
        } else {
            app.injected.get(tag as usize)
        };
        let want = want.unwrap_or_else(|| panic!("unknown frame out: tag {tag:#x}"));
        assert!(
            want.len() >= 60 || f[want.len()..].iter().all(|&b| b == 0),
            "padding is zeros"
        );
        f.truncate(want.len());
        assert_eq!(&f, want, "frame {tag:#x} out as sent");
        assert!(seen.insert(tag), "frame {tag:#x} out twice");
    }
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn umem_frames_are_never_lost_or_held_twice(c in case()) {
        run(&c);
    }
}

/// The census is not vacuous: a chunk the application names while the driver holds it is caught.
#[test]
#[should_panic(expected = "named by the application")]
fn the_census_catches_a_chunk_on_both_sides() {
    let c = Case {
        ring_idx: 1,
        chunks: 80,
        rings: [7, 6, 6, 6],
        headroom: 0,
        ops: vec![],
    };
    let card = Card::new(CardConfig::default());
    let dma = card.dma();
    let mut pages: Vec<DmaPage> = (0..c.chunks)
        .map(|_| {
            dma.map_page(dma.alloc_page().unwrap(), Direction::Bidirectional)
                .unwrap()
        })
        .collect();
    let chunks: Vec<UmemChunk<'_>> = pages.iter_mut().map(UmemChunk::new).collect();
    let umem = Umem::new(
        &chunks,
        UmemConfig {
            headroom: 0,
            dir: Direction::Bidirectional,
        },
    )
    .unwrap();
    let (fs, cs, rs, ts) = (cells(7), cells(6), cells(6), cells(6));
    let rings = Rings {
        fill: XskRing::new(&fs).unwrap(),
        cq: XskRing::new(&cs).unwrap(),
        rx: XskRing::new(&rs).unwrap(),
        tx: XskRing::new(&ts).unwrap(),
    };
    let mut app = App {
        idle: (0..80).map(Umem::chunk_addr).collect(),
        injected: vec![],
        sent_tx: vec![],
    };
    let (dev, _) = Device::init(
        card.qdma(0),
        card.shell(),
        &mut card.delay(),
        DeviceConfig::new(0, 1).unwrap(),
    )
    .unwrap();
    let mut p = pair(
        &c,
        &card,
        XskPool::new(card.dma(), umem, &rings.fill, 3520).unwrap(),
    );
    let xsk_tx = XskTx::new(card.dma(), umem, &rings.tx, &rings.cq);
    fill(&rings, &mut app, 70);
    p.start(&dev, &mut card.delay()).unwrap();
    census(&umem, &p, &xsk_tx, &rings, &app);
    // The application "remembers" a chunk the ring now holds.
    app.idle.push(Umem::chunk_addr(79));
    census(&umem, &p, &xsk_tx, &rings, &app);
}
