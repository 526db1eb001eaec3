//! `onic bench xsk`: the core's AF_XDP zero-copy path per frame beside the page-pool path of the
//! same run, in nanoseconds per 64-byte frame, and the ratio.
//!
//! Method: function 0 of the model card with one queue pair (1024-entry rings), built twice in
//! the same run: once over a `PagePool`, once over an `XskPool` (a 4096-chunk UMEM, its fill ring
//! kept full by the application between bursts). For each RX figure, bursts of 64 identical UDP
//! frames are injected and the model runs until their completions are written (not timed); the
//! pair's poll is timed until it has taken all 64 (`QueuePair::poll`: completions, the program,
//! the verdict's work, refill from the source, doorbells). Figures:
//!
//! - `drop`: a program returning XDP_DROP; the frame stays in its slot (page or chunk);
//! - `pool_pass` vs `zc_redirect`: delivery of every frame to its consumer: the page pool path
//!   hands each page to the OS (no program) and the OS gives it straight back; the zero-copy path
//!   redirects each frame into the application's RX ring (`XskRx`) and refills the slot from the
//!   fill ring; the application's recycling of RX descriptors into the fill ring is not timed;
//! - `zc_tx`: 64 frames of the application's TX ring onto the TX queue (`XskTx::send`: checks,
//!   padding, sync, descriptors, one doorbell) plus their reclaim into the completion ring, timed;
//!   the model sending them is not.
//!
//! Each figure is the best of 5 repetitions of `ONIC_BENCH_XSK_BURSTS` bursts (default 160).
//! Register writes and DMA syncs go to the model in-process, so these are the driver's CPU costs
//! on this machine, not a card's line rate.

use std::cell::Cell;
use std::time::{Duration, Instant};

use onic_core::config::{DeviceConfig, RingSizeIdx, RxQueueConfig};
use onic_core::queue::doorbell::Doorbells;
use onic_core::queue::pool::{PagePool, PageProvider};
use onic_core::queue::rx::RxFrame;
use onic_core::queue::tx::{TxDone, TxSlot};
use onic_core::queue::xsk::{
    Umem, UmemChunk, UmemConfig, UmemFrame, UmemTxFrame, XskDesc, XskPool, XskRing, XskRx, XskTx,
};
use onic_core::xdp::{NoRedirect, RawXdpProgram, RedirectTable, XdpAction, XdpBuff, XdpDispatch};
use onic_core::{Device, PassInfo, QueueId, QueuePair, RxSink, XdpRxq};
use onic_embed::poll::poll_pair;
use onic_embed::set::assemble_pair;
use onic_embed::tuning::PairSpec;
use onic_hal::{Direction, DmaMemory, DmaPage};
use onic_sim::{Card, CardConfig, QdmaWindow, SimDma, Wire};

const BURST: usize = 64;
const REPS: usize = 5;
const CHUNKS: usize = 4096;

type Slots<Pg, F> = (Vec<Option<Pg>>, Vec<TxSlot<Pg, F>>);
type Pair<'c, P, Pg, F> = QueuePair<SimDma<'c>, P, F, Vec<Option<Pg>>, Vec<TxSlot<Pg, F>>>;

/// Completions of a pair that sends no application frames.
struct NoFrames;

impl TxDone<UmemTxFrame<'static>> for NoFrames {
    fn os_done(&mut self, _: UmemTxFrame<'static>) {}
    fn remote_done(&mut self, _: UmemTxFrame<'static>) {}
}

/// A sink that keeps nothing (the drop figures pass nothing).
fn refuse<T>(f: RxFrame<T>, _: PassInfo) -> Result<(), RxFrame<T>> {
    Err(f)
}

fn drop_all(_: &mut XdpBuff<'_>) -> XdpAction {
    XdpAction::Drop
}

fn to_socket(x: &mut XdpBuff<'_>) -> XdpAction {
    x.redirect(0)
}

/// A UDP frame of 60 bytes in memory (64 on the wire).
fn frame() -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[23] = 17;
    f
}

fn slots<Pg, F>(n: u16) -> Slots<Pg, F> {
    (
        (0..n).map(|_| None).collect(),
        (0..n).map(|_| TxSlot::new()).collect(),
    )
}

fn spec() -> Result<PairSpec, String> {
    let ring = RingSizeIdx::new(8).map_err(|e| e.to_string())?;
    let q = QueueId::new(0);
    Ok(PairSpec::new(q, ring, RxQueueConfig::new(q).buf))
}

/// Injects a burst and lets the model write it (not timed).
fn inject(card: &Card, f: &[u8]) {
    for _ in 0..BURST {
        card.inject(0, f);
    }
    card.run_until_idle();
    card.advance_time(2_000);
    card.run_until_idle();
}

/// Time of the polls that take one burst.
fn timed_rx<P, F, S, R, C>(
    pair: &mut Pair<'_, P, P::Page, F>,
    db: &Doorbells<&QdmaWindow<'_>>,
    prog: Option<fn(&mut XdpBuff<'_>) -> XdpAction>,
    (sink, redirect, done): (&mut S, &mut R, &mut C),
) -> Duration
where
    P: PageProvider,
    F: onic_core::TxFrame,
    S: RxSink<P::Page>,
    R: RedirectTable<P::Page>,
    C: TxDone<F>,
{
    let mut prog = prog;
    let (mut got, mut idle) = (0, 0);
    let start = Instant::now();
    while got < BURST && idle < 4 {
        let dispatch = XdpDispatch {
            prog: prog.as_mut().map(|p| p as &mut dyn RawXdpProgram),
            redirect: &mut *redirect,
            origin: 0,
            hasher: None,
        };
        let n = poll_pair(
            pair,
            (BURST, db),
            (&mut *sink, XdpRxq::default()),
            dispatch,
            &mut *done,
        )
        .rx
        .done;
        got += n;
        idle = if n == 0 { idle + 1 } else { 0 };
    }
    start.elapsed()
}

/// Best ns per frame over `bursts` calls of `burst` (each returns its timed part).
fn best(bursts: usize, mut burst: impl FnMut() -> Duration) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..REPS {
        let total: Duration = (0..bursts).map(|_| burst()).sum();
        best = best.min(total.as_secs_f64() * 1e9 / (bursts * BURST) as f64);
    }
    best
}

/// The page-pool figures: drop, and pass to the OS (pages straight back).
fn pool_figures(
    card: &Card,
    dev: &Device<QdmaWindow<'_>, onic_sim::ShellWindow<'_>>,
    bursts: usize,
) -> Result<[f64; 2], String> {
    let spec = spec()?;
    let mut delay = card.delay();
    let pool: PagePool<'_, SimDma<'_>> = PagePool::new(card.dma(), spec.pool, None);
    let mut pair = assemble_pair(card.dma(), &spec, slots(spec.rx.desc_ring.entries()), pool)
        .map_err(|e| e.to_string())?;
    pair.start(dev, &mut delay).map_err(|e| e.to_string())?;
    let db = dev.doorbells();
    let f = frame();
    let mut refuse = refuse::<DmaPage>;
    let drop_ns = best(bursts, || {
        inject(card, &f);
        timed_rx(
            &mut pair,
            &db,
            Some(drop_all),
            (&mut refuse, &mut NoRedirect, &mut NoFrames),
        )
    });
    let pass = best(bursts, || {
        inject(card, &f);
        let mut os: Vec<(DmaPage, usize)> = Vec::with_capacity(BURST);
        let mut keep = |f: RxFrame<DmaPage>, _: PassInfo| -> Result<(), RxFrame<DmaPage>> {
            os.push((f.page, usize::from(f.len)));
            Ok(())
        };
        let t = timed_rx(&mut pair, &db, None, (&mut keep, &mut NoRedirect, &mut NoFrames));
        // The OS gives each page back at once (an skb freed right away): part of the path.
        let back = Instant::now();
        for (page, len) in os {
            pair.pool.return_from_os(page, len);
        }
        t + back.elapsed()
    });
    let (r, pool, _, _) = pair.teardown(dev, &mut delay, &mut NoFrames);
    r.map_err(|e| e.to_string())?;
    drop(pool);
    Ok([drop_ns, pass])
}

/// The application's side of the UMEM between bursts (not timed): RX descriptors back into the
/// fill ring, completions into the idle list, which refills the fill ring too.
fn recycle(rx: &XskRing<'_, XskDesc>, fill: &XskRing<'_, u64>, cq: &XskRing<'_, u64>, idle: &mut Vec<u64>) {
    while let Some(d) = rx.consume() {
        idle.push(d.addr - d.addr % 4096);
    }
    while let Some(a) = cq.consume() {
        idle.push(a);
    }
    while fill.free() > 0 {
        let Some(a) = idle.pop() else { break };
        let _ = fill.produce(a);
    }
}

/// The zero-copy figures: drop, redirect to the socket, TX from the TX ring.
fn xsk_figures(
    card: &Card,
    dev: &Device<QdmaWindow<'_>, onic_sim::ShellWindow<'_>>,
    bursts: usize,
) -> Result<[f64; 3], String> {
    let dma = card.dma();
    let mut pages: Vec<DmaPage> = (0..CHUNKS)
        .map(|_| {
            dma.alloc_page()
                .ok()
                .and_then(|m| dma.map_page(m, Direction::Bidirectional).ok())
        })
        .collect::<Option<_>>()
        .ok_or("no memory for the UMEM")?;
    let r = xsk_run(card, dev, bursts, &mut pages);
    for p in pages {
        onic_core::queue::pool::release_to_hal(&dma, Direction::Bidirectional, p);
    }
    r
}

/// [`xsk_figures`] over the UMEM's pages.
fn xsk_run(
    card: &Card,
    dev: &Device<QdmaWindow<'_>, onic_sim::ShellWindow<'_>>,
    bursts: usize,
    pages: &mut [DmaPage],
) -> Result<[f64; 3], String> {
    let dma = card.dma();
    let chunks: Vec<UmemChunk<'_>> = pages.iter_mut().map(UmemChunk::new).collect();
    let cfg = UmemConfig {
        headroom: 0,
        dir: Direction::Bidirectional,
    };
    let umem = Umem::new(&chunks, cfg).map_err(|e| format!("{e:?}"))?;
    let ring = |n: usize| (0..n).map(|_| Cell::new(0u64)).collect::<Vec<_>>();
    let desc = |n: usize| (0..n).map(|_| Cell::new(XskDesc::default())).collect::<Vec<_>>();
    let (fs, cs, rs, ts) = (ring(2048), ring(2048), desc(2048), desc(2048));
    let fill = XskRing::new(&fs).map_err(|e| format!("{e:?}"))?;
    let cq = XskRing::new(&cs).map_err(|e| format!("{e:?}"))?;
    let rxr = XskRing::new(&rs).map_err(|e| format!("{e:?}"))?;
    let txr = XskRing::new(&ts).map_err(|e| format!("{e:?}"))?;
    let mut idle: Vec<u64> = (0..CHUNKS as u64).map(|i| i * 4096).collect();
    // The TX frames: written once into chunks 0..BURST, whose addresses the TX ring names.
    let f = frame();
    let tx_chunks: Vec<u64> = idle.drain(..BURST).collect();
    for &a in &tx_chunks {
        umem.with_app_chunk(a, |b| b[..f.len()].copy_from_slice(&f));
    }
    recycle(&rxr, &fill, &cq, &mut idle);
    let spec = spec()?;
    let mut delay = card.delay();
    let pool = XskPool::new(dma, umem, &fill, spec.rx.buf.bytes()).map_err(|e| e.to_string())?;
    let mut pair =
        assemble_pair(dma, &spec, slots(spec.rx.desc_ring.entries()), pool).map_err(|e| e.to_string())?;
    let mut xtx = XskTx::new(dma, umem, &txr, &cq);
    pair.start(dev, &mut delay).map_err(|e| e.to_string())?;
    let db = dev.doorbells();
    let mut refuse = refuse::<UmemFrame<'_>>;
    let drop_ns = best(bursts, || {
        inject(card, &f);
        let t = timed_rx(
            &mut pair,
            &db,
            Some(drop_all),
            (&mut refuse, &mut NoRedirect, &mut xtx),
        );
        recycle(&rxr, &fill, &cq, &mut idle);
        t
    });
    let mut sock = XskRx::new(umem, &rxr);
    let redirect = best(bursts, || {
        inject(card, &f);
        let t = timed_rx(
            &mut pair,
            &db,
            Some(to_socket),
            (&mut refuse, &mut sock, &mut xtx),
        );
        recycle(&rxr, &fill, &cq, &mut idle);
        t
    });
    let tx = best(bursts, || {
        for &a in &tx_chunks {
            let _ = txr.produce(XskDesc {
                addr: a,
                len: 60,
                options: 0,
            });
        }
        let start = Instant::now();
        let sent = xtx.send(&mut pair.tx, &db, BURST as u32);
        let t = start.elapsed();
        card.run_until_idle();
        let _ = card.take_egress(0);
        let start = Instant::now();
        pair.tx.reclaim(&mut xtx);
        let t = t + start.elapsed();
        debug_assert_eq!(sent as usize, BURST);
        // The completions name the same chunks again: back to the TX list, not the idle one.
        while cq.consume().is_some() {}
        t
    });
    if sock.stats().delivered == 0 {
        return Err("the redirect path delivered nothing".into());
    }
    let (r, pool, _, _) = pair.teardown(dev, &mut delay, &mut xtx);
    r.map_err(|e| e.to_string())?;
    drop(pool);
    Ok([drop_ns, redirect, tx])
}

/// Runs the group; one `(name, value, unit)` per figure.
pub fn run() -> Result<Vec<(String, f64, &'static str)>, String> {
    let bursts = std::env::var("ONIC_BENCH_XSK_BURSTS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(160)
        .max(1);
    let mut cc = CardConfig::default();
    cc.wire = Wire::Open;
    let card = Card::new(cc);
    let mut delay = card.delay();
    let cfg = DeviceConfig::new(0, 1).map_err(|e| e.to_string())?;
    let (dev, _) = Device::init(card.qdma(0), card.shell(), &mut delay, cfg).map_err(|e| e.to_string())?;
    // Warm up once, then the figures.
    pool_figures(&card, &dev, 4)?;
    let [pool_drop, pool_pass] = pool_figures(&card, &dev, bursts)?;
    let [zc_drop, zc_redirect, zc_tx] = xsk_figures(&card, &dev, bursts)?;
    let (r, _, _) = dev.teardown(&mut delay);
    r.map_err(|e| e.to_string())?;
    if card.dma_stats().live_pages != 0 {
        return Err(format!(
            "{} pages leaked by the benchmark",
            card.dma_stats().live_pages
        ));
    }
    Ok(vec![
        ("xsk_rx_pool_drop_64B".into(), pool_drop, "ns/frame"),
        ("xsk_rx_zc_drop_64B".into(), zc_drop, "ns/frame"),
        ("xsk_rx_zc_drop_vs_pool".into(), zc_drop / pool_drop, "ratio"),
        ("xsk_rx_pool_pass_64B".into(), pool_pass, "ns/frame"),
        ("xsk_rx_zc_redirect_64B".into(), zc_redirect, "ns/frame"),
        (
            "xsk_rx_zc_redirect_vs_pool_pass".into(),
            zc_redirect / pool_pass,
            "ratio",
        ),
        ("xsk_tx_zc_64B".into(), zc_tx, "ns/frame"),
    ])
}
