//! The benchmark workloads behind `onic bench` (and, kernel for kernel, the criterion benches in
//! `tests/benches/datapath.rs`): each group returns one [`Figure`] per measured quantity.
//!
//! # Method
//!
//! A workload is a *kernel* that runs a number of rounds and returns the time it spent in the
//! part being measured and how many operations (packets, pages) that part did. [`measure`]
//! doubles the rounds until a call takes at least a tenth of a repetition (the faster of two
//! calls of each size, so that one stalled call does not end the calibration), scales them so that
//! one call takes about one repetition of wall time ([`Method::rep`]), runs [`Method::reps`]
//! calls and reports the fastest (best-of, least disturbed by the other work on the machine) and
//! the median, in nanoseconds per operation.
//!
//! What is timed:
//!
//! - *driver-only* RX: [`RxRig::poll_all`] (the driver's polls until every queue caught up and
//!   re-armed, with the sink's work); the device side ([`RxRig::produce`]: completion entries,
//!   status record, frame data) runs between the timed regions. Each timed region also contains
//!   one `Instant::now()`, whose cost ([`timer_overhead`], the fastest of 1000 empty regions) is
//!   subtracted per region;
//! - *driver-only* TX: [`TxRig::xmit`] and [`TxRig::reclaim`]; the device side
//!   ([`TxRig::complete`]) is not timed;
//! - *driver + model*: everything, the model's work included (inject, step, timers, polls);
//! - pool: the allocation and recycling calls themselves.

use std::cell::RefCell;
use std::hint::black_box;
use std::time::{Duration, Instant};

use onic_core::config::BufSizeIdx;
use onic_core::config::{DeviceConfig, RingSizeIdx};
use onic_core::queue::pool::{PageBurst, PageProvider, RecycleRing};
use onic_core::queue::rx::RxFrame;
use onic_core::{Device, PassAll, PassInfo, RxSink, XdpRxq};
use onic_hal::regs::qdma::tables::RING_SIZES;
use onic_hal::{Direction, DmaMemory, DmaPage, PAGE_SIZE};
use onic_sim::{Card, CardConfig, SimDma, Wire};

use crate::hostdma::HostDma;
use crate::rig::{
    host_pool, test_frame, xdp_pool, DoorbellLatch, PagePerPacket, RxRig, RxRigConfig, RxSlots, TxRig,
    TxSlots,
};
use onic_embed::done::FrameDone;
use onic_embed::frame::Frame;
use onic_embed::poll::poll_pair;
use onic_embed::set::{build_pair, Pair, Slots};
use onic_embed::tuning::PairSpec;

/// The benchmark groups, in the order `onic bench` runs them.
pub const GROUPS: &[&str] = &["rx", "tx", "pool", "scaling", "compare"];

/// Frame sizes of the comparison table, on the wire (FCS included), as the seed's table.
pub const COMPARE_SIZES: [usize; 5] = [64, 250, 500, 1000, 1518];

/// Queue counts of the scaling table.
pub const SCALING_QUEUES: [u16; 3] = [1, 8, 64];

/// How long and how often to measure.
#[derive(Clone, Debug)]
pub struct Method {
    /// Wall time of one repetition.
    pub rep: Duration,
    /// Repetitions; the fastest and the median are reported.
    pub reps: usize,
    /// Run each workload exactly this many rounds, once, with no calibration and no repetition:
    /// for counting instructions (`valgrind --tool=callgrind`), where the work must not depend
    /// on how fast the machine happens to be.
    pub rounds: Option<u64>,
    /// Run only the workloads whose figure names contain this (all when `None`).
    pub only: Option<String>,
}

impl Default for Method {
    fn default() -> Self {
        Self {
            rep: Duration::from_millis(20),
            reps: 5,
            rounds: None,
            only: None,
        }
    }
}

impl Method {
    /// Whether the workload behind figure `name` is to run ([`Method::only`]).
    #[must_use]
    pub fn wants(&self, name: &str) -> bool {
        self.only.as_deref().is_none_or(|o| name.contains(o))
    }
}

/// Nanoseconds per operation over the repetitions.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// The fastest repetition.
    pub best: f64,
    /// The median repetition.
    pub median: f64,
    /// The slowest repetition.
    pub worst: f64,
    /// Repetitions that ran undisturbed (see [`measure`]).
    pub clean: usize,
    /// Repetitions run in all.
    pub attempts: usize,
    /// Operations (packets, pages, hashes) of the fastest repetition.
    pub ops: u64,
}

impl Sample {
    /// The timed wall time of the fastest repetition ([`Sample::best`] times [`Sample::ops`]):
    /// what a criterion `iter_custom` returns.
    #[must_use]
    pub fn total(&self) -> Duration {
        Duration::from_secs_f64(self.best * self.ops as f64 / 1e9)
    }
}

/// One figure: `name value unit`, with the median and spread of the repetitions.
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// Name (`group_what_detail`).
    pub name: String,
    /// Value (from the fastest repetition).
    pub value: f64,
    /// Unit.
    pub unit: &'static str,
    /// The same figure from the median repetition.
    pub median: f64,
    /// (slowest - fastest) / median, in percent.
    pub spread_pct: f64,
    /// Undisturbed repetitions / repetitions run.
    pub clean: (usize, usize),
    /// Operations timed in the fastest repetition (packets, pages, hashes).
    pub ops: u64,
}

impl Figure {
    /// Nanoseconds per operation.
    #[must_use]
    pub fn ns(name: impl Into<String>, unit: &'static str, s: Sample) -> Self {
        Self {
            name: name.into(),
            value: s.best,
            unit,
            median: s.median,
            spread_pct: 100.0 * (s.worst - s.best) / s.median,
            clean: (s.clean, s.attempts),
            ops: s.ops,
        }
    }

    /// Millions of operations per second (from nanoseconds per operation).
    #[must_use]
    pub fn mops(name: impl Into<String>, unit: &'static str, s: Sample) -> Self {
        Self {
            name: name.into(),
            value: 1e3 / s.best,
            unit,
            median: 1e3 / s.median,
            spread_pct: 100.0 * (s.worst - s.best) / s.median,
            clean: (s.clean, s.attempts),
            ops: s.ops,
        }
    }
}

/// The cost of the `Instant::now()` inside a timed region: the fastest of 1000 empty regions.
#[must_use]
pub fn timer_overhead() -> Duration {
    (0..1000)
        .map(|_| {
            let t = Instant::now();
            t.elapsed()
        })
        .min()
        .unwrap_or_default()
}

/// Nanoseconds this thread has spent waiting for a CPU (runnable but not running), from
/// `/proc/thread-self/schedstat`; `None` where the kernel does not provide it.
#[must_use]
pub fn sched_wait_ns() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    s.split_whitespace().nth(1)?.parse().ok()
}

/// A repetition counts as undisturbed when the thread waited for a CPU during less than this
/// share of it.
pub const CLEAN_WAIT_SHARE: f64 = 0.01;

/// Runs `kernel(rounds) -> (timed, operations)` as the module docs describe and returns nanoseconds
/// per operation.
///
/// On a shared machine another process may take the CPU in the middle of a repetition, which
/// inflates its wall time. Each repetition therefore checks how long the thread waited for a CPU
/// meanwhile ([`sched_wait_ns`]); one that waited more than [`CLEAN_WAIT_SHARE`] of its time is
/// repeated, up to eight times [`Method::reps`] attempts in all. If too few clean repetitions come
/// out, the least disturbed ones fill in and [`Sample::clean`] says how many were clean.
pub fn measure(m: &Method, mut kernel: impl FnMut(u64) -> (Duration, u64)) -> Sample {
    if let Some(rounds) = m.rounds {
        let (timed, ops) = kernel(rounds.max(1));
        let ns = timed.as_nanos() as f64 / ops.max(1) as f64;
        return Sample {
            best: ns,
            median: ns,
            worst: ns,
            clean: 1,
            attempts: 1,
            ops,
        };
    }
    // The calibration takes the faster of two calls at each size: one call stalled by something
    // else (the host descheduling the guest, a page fault) would otherwise end it early and
    // leave repetitions of a few hundred operations.
    let mut rounds = 1u64;
    let mut timed_call = |rounds: u64| {
        let t = Instant::now();
        black_box(kernel(rounds));
        t.elapsed()
    };
    let wall = loop {
        let wall = timed_call(rounds).min(timed_call(rounds));
        if wall >= m.rep / 10 || rounds >= 1 << 40 {
            break wall;
        }
        rounds *= 2;
    };
    let rounds = ((rounds as f64) * m.rep.as_secs_f64() / wall.as_secs_f64().max(1e-9)).max(1.0) as u64;
    let reps = m.reps.max(1);
    // (ns per op, operations), and for disturbed ones the share of the repetition spent waiting
    // for a CPU
    let mut clean: Vec<(f64, u64)> = Vec::new();
    let mut disturbed: Vec<((f64, u64), f64)> = Vec::new();
    let mut attempts = 0;
    while clean.len() < reps && attempts < 8 * reps {
        attempts += 1;
        let w0 = sched_wait_ns();
        let t = Instant::now();
        let (timed, ops) = kernel(rounds);
        let wall = t.elapsed().as_nanos() as f64;
        let waited = match (w0, sched_wait_ns()) {
            (Some(a), Some(b)) => b.saturating_sub(a) as f64 / wall.max(1.0),
            _ => 0.0,
        };
        let ns = timed.as_nanos() as f64 / ops.max(1) as f64;
        if waited <= CLEAN_WAIT_SHARE {
            clean.push((ns, ops));
        } else {
            disturbed.push(((ns, ops), waited));
        }
    }
    let n_clean = clean.len();
    disturbed.sort_by(|a, b| a.1.total_cmp(&b.1));
    let mut v = clean;
    v.extend(disturbed.iter().take(reps.saturating_sub(n_clean)).map(|d| d.0));
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    Sample {
        best: v[0].0,
        median: v[v.len() / 2].0,
        worst: v[v.len() - 1].0,
        clean: n_clean,
        attempts,
        ops: v[0].1,
    }
}

/// Rounds of an RX rig: the device side produces ([`RxRigConfig::round`] frames per queue), the
/// polls are timed.
fn rx_rounds<P: PageProvider<Page = DmaPage>, S: RxSink<DmaPage>>(
    rig: &mut RxRig<'_, P>,
    sink: &mut S,
    rounds: u64,
    overhead: Duration,
) -> (Duration, u64) {
    let mut timed = Duration::ZERO;
    let mut pkts = 0u64;
    for _ in 0..rounds {
        let n = rig.produce(rig.config().round);
        let t = Instant::now();
        let got = rig.poll_all(sink);
        timed += t.elapsed().saturating_sub(overhead);
        assert_eq!(got, n, "the driver consumed what the device completed");
        pkts += got as u64;
    }
    (timed, pkts)
}

/// The dropping sink: every frame is given back unread, and its page is recycled.
#[allow(clippy::unnecessary_wraps)] // the signature of a sink
fn drop_sink(f: RxFrame<DmaPage>, _: PassInfo) -> Result<(), RxFrame<DmaPage>> {
    Err(f)
}

/// Nanoseconds per packet of the driver-only RX drop path for `cfg` with the page pool (the
/// XDP rigs' pool when `cfg.xdp`).
///
/// # Panics
///
/// If the rig cannot be built (a bug).
pub fn rx_drop_driver_only(m: &Method, cfg: RxRigConfig) -> Sample {
    let dma = HostDma::new();
    let latch = DoorbellLatch::new();
    let mut slots = RxSlots::new(&cfg);
    let mut rig = RxRig::new(&dma, &latch, &mut slots, cfg, |d, r| {
        if cfg.xdp {
            xdp_pool(d, r)
        } else {
            host_pool(d)
        }
    })
    .expect("rx rig");
    let overhead = timer_overhead();
    let mut sink = drop_sink;
    let s = measure(m, |rounds| rx_rounds(&mut rig, &mut sink, rounds, overhead));
    drop(rig.finish());
    s
}

/// Nanoseconds per packet of the driver-only RX to-OS path: the sink reads the frame's EtherType
/// and IP protocol and hands the page to the OS, which gives every page back to the pool after
/// each poll (`return_from_os`, the owning context's path).
///
/// # Panics
///
/// If the rig cannot be built (a bug).
pub fn rx_to_os_driver_only(m: &Method) -> Sample {
    let cfg = RxRigConfig {
        write_data: true,
        ..RxRigConfig::new()
    };
    let dma = HostDma::new();
    let latch = DoorbellLatch::new();
    let mut slots = RxSlots::new(&cfg);
    let mut rig = RxRig::new(&dma, &latch, &mut slots, cfg, |d, _| host_pool(d)).expect("rx rig");
    let overhead = timer_overhead();
    let os: RefCell<Vec<(DmaPage, usize)>> = RefCell::new(Vec::with_capacity(256));
    let mut seen = 0u64;
    let s = measure(m, |rounds| {
        let mut timed = Duration::ZERO;
        let mut pkts = 0;
        for _ in 0..rounds {
            let n = rig.produce(usize::MAX);
            let t = Instant::now();
            let got = rig.poll_all_then(
                &mut |f: RxFrame<DmaPage>, _: PassInfo| -> Result<(), RxFrame<DmaPage>> {
                    let d = f.data();
                    if d.get(12..14) == Some(&[0x08, 0x00]) && d.get(23) == Some(&17) {
                        seen += 1;
                    }
                    os.borrow_mut().push((f.page, usize::from(f.len)));
                    Ok(())
                },
                |pool| {
                    for (p, len) in os.borrow_mut().drain(..) {
                        pool.return_from_os(p, len);
                    }
                },
            );
            timed += t.elapsed().saturating_sub(overhead);
            assert_eq!(got, n);
            pkts += got as u64;
        }
        (timed, pkts)
    });
    assert!(seen > 0);
    for q in &rig.queues {
        let c = q
            .pair
            .pool
            .page_counts(q.pair.rx.pages_in_ring(), 0, 0, q.pair.rx.stats().to_os);
        assert_eq!(c.map(|c| c.with_os), Some(0), "every page came back from the OS");
    }
    drop(rig.finish());
    s
}

/// A model card with one function and `queues` queue pairs of 1024-entry rings; nothing on the
/// wire, no egress capture.
fn model_card() -> Card {
    let mut c = CardConfig::default();
    c.wire = Wire::Open;
    c.capture_egress = false;
    Card::new(c)
}

/// The pair's pool recycles through `ring`, which the caller owns.
fn model_pair<'c>(
    card: &'c Card,
    ring: &'c RecycleRing,
) -> (
    Device<onic_sim::QdmaWindow<'c>, onic_sim::ShellWindow<'c>>,
    Pair<'c, SimDma<'c>, Frame<SimDma<'c>>>,
) {
    let (dev, _) = Device::init(
        card.qdma(0),
        card.shell(),
        &mut card.delay(),
        DeviceConfig::new(0, 1).expect("config"),
    )
    .expect("device init");
    let size = RingSizeIdx::new(onic_core::config::RX_RING_SIZE_INDEX_DEFAULT).expect("ring size");
    let buf = BufSizeIdx::new(onic_core::config::RX_BUF_SIZE_INDEX_DEFAULT).expect("buffer size");
    let spec = PairSpec::new(onic_core::QueueId::new(0), size, buf);
    let mut pair = build_pair(card.dma(), &spec, Slots::for_spec(&spec), Some(ring)).expect("queue pair");
    pair.start(&dev, &mut card.delay()).expect("start pair");
    (dev, pair)
}

/// Nanoseconds per packet of the RX drop path with the model: inject 512 frames of 60 bytes,
/// let the model receive them and fire its completion timer, poll until caught up (budget 64,
/// through [`onic_core::QueuePair::poll`]). Everything is timed.
///
/// # Panics
///
/// If the driver or the model misbehave (a bug).
pub fn rx_drop_driver_model(m: &Method) -> Sample {
    let card = model_card();
    let ring = RecycleRing::new();
    let (dev, mut pair) = model_pair(&card, &ring);
    let db = dev.doorbells();
    let frame = test_frame(60);
    let mut kept = Vec::new();
    let mut free = FrameDone::new(&[], card.dma()).keep_os_pages(&mut kept);
    let s = measure(m, |rounds| {
        let t = Instant::now();
        let mut pkts = 0u64;
        for _ in 0..rounds {
            for _ in 0..512 {
                card.inject(0, &frame);
            }
            card.run_until_idle();
            card.advance_time(2_000);
            card.run_until_idle();
            loop {
                let out = poll_pair(
                    &mut pair,
                    (64, &db),
                    (&mut drop_sink, XdpRxq::default()),
                    PassAll,
                    &mut free,
                );
                pkts += out.rx.done as u64;
                if out.rx.armed && !out.rx.more {
                    break;
                }
            }
        }
        (t.elapsed(), pkts)
    });
    assert_eq!(
        card.stats().c2h_no_desc_dropped + card.stats().cmpt_full_dropped,
        0
    );
    assert_eq!(card.violations(), []);
    s
}

/// One round of the driver-only TX workload: the OS queues `n` frames in xmit-more batches of 32,
/// the device side completes them, the OS reclaims them. Returns the time of the driver's two
/// parts (less `overhead` per timed region) and the frames sent.
///
/// # Panics
///
/// If the reclaim does not give back every frame sent (a bug).
pub fn tx_round(rig: &mut TxRig<'_>, n: usize, overhead: Duration) -> (Duration, usize) {
    let t = Instant::now();
    let sent = rig.xmit(n, 32);
    let mut timed = t.elapsed().saturating_sub(overhead);
    rig.complete();
    let t = Instant::now();
    let back = rig.reclaim();
    timed += t.elapsed().saturating_sub(overhead);
    assert_eq!(usize::from(back), sent);
    (timed, sent)
}

/// Nanoseconds per packet of the driver-only TX path: the OS queues 60-byte frames from
/// pre-mapped buffers in xmit-more batches of 32 until the ring is full, then reclaims them once
/// the device side has written the status record.
///
/// # Panics
///
/// If the rig cannot be built (a bug).
pub fn tx_driver_only(m: &Method) -> Sample {
    let dma = HostDma::new();
    let latch = DoorbellLatch::new();
    let ring = RingSizeIdx::new(onic_core::config::TX_RING_SIZE_INDEX_DEFAULT).expect("ring");
    let mut slots = TxSlots::new(ring);
    let n = usize::from(ring.usable()) - 1;
    let mut rig = TxRig::new(&dma, &latch, &mut slots, ring, n, 60).expect("tx rig");
    let overhead = timer_overhead();
    let s = measure(m, |rounds| {
        let mut timed = Duration::ZERO;
        let mut pkts = 0u64;
        for _ in 0..rounds {
            let (t, sent) = tx_round(&mut rig, n, overhead);
            timed += t;
            pkts += sent as u64;
        }
        (timed, pkts)
    });
    rig.finish();
    s
}

/// Nanoseconds per packet of the TX path with the model: the OS queues 512 frames of 60 bytes in
/// xmit-more batches of 32, the model sends them, the driver reclaims. Everything is timed.
///
/// # Panics
///
/// If the driver or the model misbehave (a bug).
pub fn tx_driver_model(m: &Method) -> Sample {
    let card = model_card();
    let ring = RecycleRing::new();
    let (dev, mut pair) = model_pair(&card, &ring);
    let db = dev.doorbells();
    let dma: SimDma<'_> = card.dma();
    let frame = test_frame(60);
    let mut free: Vec<DmaPage> = (0..512)
        .map(|_| {
            let mut page = dma
                .map_page(dma.alloc_page().expect("page"), Direction::ToDevice)
                .expect("map");
            page.bytes_mut()[..frame.len()].copy_from_slice(&frame);
            page
        })
        .collect();
    let s = measure(m, |rounds| {
        let t = Instant::now();
        let mut pkts = 0u64;
        for _ in 0..rounds {
            let mut i = 0;
            while let Some(page) = free.pop() {
                i += 1;
                let more = i % 32 != 0 && !free.is_empty();
                let f = Frame::Os {
                    page,
                    len: frame.len(),
                    dma,
                };
                if let Err(e) = pair.tx.xmit_os(&db, f, more) {
                    free.push(e.into_inner().into_page());
                    break;
                }
            }
            pair.tx.flush(&db);
            card.run_until_idle();
            let mut done = FrameDone::new(&[], dma).keep_os_pages(&mut free);
            pkts += u64::from(pair.tx.reclaim(&mut done).completed);
        }
        (t.elapsed(), pkts)
    });
    assert_eq!(card.violations(), []);
    s
}

/// Pages of the pool benchmarks' inner loop per round.
const POOL_ROUND: u64 = 1024;

/// Nanoseconds per page: one [`onic_core::PagePool::alloc`] and one recycle (64 dirty bytes) at a
/// time, from and into the cache.
#[must_use]
pub fn pool_single(m: &Method) -> Sample {
    let dma = HostDma::new();
    let mut pool = host_pool(&dma);
    warm(&mut pool);
    measure(m, |rounds| {
        let t = Instant::now();
        for _ in 0..rounds * POOL_ROUND {
            let p = black_box(pool.alloc());
            if let Some(p) = p {
                pool.recycle(p, 64);
            }
        }
        (t.elapsed(), rounds * POOL_ROUND)
    })
}

/// Nanoseconds per page: a burst of 32 pages taken with [`onic_core::PagePool::alloc_bulk`], then
/// given back with [`onic_core::PagePool::recycle_bulk`] (64 dirty bytes each).
#[must_use]
pub fn pool_burst32(m: &Method) -> Sample {
    let dma = HostDma::new();
    let mut pool = host_pool(&dma);
    warm(&mut pool);
    let mut burst: PageBurst<32> = PageBurst::new();
    measure(m, |rounds| {
        let t = Instant::now();
        for _ in 0..rounds * (POOL_ROUND / 32) {
            pool.alloc_bulk(&mut burst);
            black_box(&mut burst);
            pool.recycle_bulk(&mut burst, 64);
        }
        (t.elapsed(), rounds * POOL_ROUND)
    })
}

/// Nanoseconds per page: 32 allocations, then the 32 pages given back through the pool's
/// [`RecycleRing`] (another context's path: the OS freeing packets on another core); the next
/// allocations refill the cache from the ring.
#[must_use]
pub fn pool_ring_burst32(m: &Method) -> Sample {
    let dma = HostDma::new();
    let ring: RecycleRing = RecycleRing::new();
    let cfg = *host_pool(&dma).config();
    let mut pool: onic_core::PagePool<'_, &HostDma> = onic_core::PagePool::new(&dma, cfg, Some(&ring));
    warm(&mut pool);
    let mut held: [Option<DmaPage>; 32] = Default::default();
    let s = measure(m, |rounds| {
        let t = Instant::now();
        for _ in 0..rounds * (POOL_ROUND / 32) {
            for h in &mut held {
                *h = pool.alloc();
            }
            black_box(&mut held);
            for h in &mut held {
                if let Some(p) = h.take() {
                    if let Err(p) = ring.recycle(p, 64) {
                        pool.recycle(p, 64);
                    }
                }
            }
        }
        (t.elapsed(), rounds * POOL_ROUND)
    });
    drop(pool);
    s
}

/// Fills a pool's cache (one slow-path call brings a bulk of pages).
fn warm<const C: usize>(pool: &mut onic_core::PagePool<'_, &HostDma, C>) {
    let pages: Vec<DmaPage> = (0..64).filter_map(|_| pool.alloc()).collect();
    for p in pages {
        pool.recycle(p, 0);
    }
}

/// Nanoseconds per page of the page-per-packet baseline's own work: a page from the HAL, mapped,
/// then unmapped and freed (no device, no driver).
#[must_use]
pub fn baseline_page(m: &Method) -> Sample {
    let dma = HostDma::new();
    let mut prov = PagePerPacket::new(&dma, Direction::FromDevice);
    measure(m, |rounds| {
        let t = Instant::now();
        for _ in 0..rounds * POOL_ROUND {
            if let Some(p) = black_box(prov.alloc_page()) {
                prov.recycle_direct(p, 64);
            }
        }
        (t.elapsed(), rounds * POOL_ROUND)
    })
}

/// The copying sink of the comparison: the frame is copied out (as a socket read copies it to
/// the application), then the page is done with.
fn copy_rounds<P: PageProvider<Page = DmaPage>>(m: &Method, rig: &mut RxRig<'_, P>) -> Sample {
    let overhead = timer_overhead();
    let mut buf = vec![0u8; PAGE_SIZE];
    let mut sink = |f: RxFrame<DmaPage>, _: PassInfo| -> Result<(), RxFrame<DmaPage>> {
        let d = f.data();
        buf[..d.len()].copy_from_slice(d);
        black_box(&mut buf);
        Err(f)
    };
    measure(m, |rounds| rx_rounds(rig, &mut sink, rounds, overhead))
}

/// One row of the comparison: `size` bytes on the wire (FCS included).
#[derive(Clone, Copy, Debug)]
pub struct CompareRow {
    /// Frame size on the wire.
    pub size: usize,
    /// Page per packet.
    pub baseline: Sample,
    /// Page pool.
    pub pool: Sample,
}

/// The seed's comparison at one frame size: the RX path (driver-only, 1 queue, 1024-entry rings,
/// budget 64) with the device side writing the frame into the page and a sink that copies it out,
/// once with a page per packet ([`PagePerPacket`]: HAL allocation and mapping per frame, unmap and
/// free after) and once with the page pool.
///
/// # Panics
///
/// If a rig cannot be built (a bug).
pub fn compare_size(m: &Method, size: usize) -> CompareRow {
    let cfg = RxRigConfig {
        frame_len: (size - onic_sim::FCS_LEN) as u16,
        write_data: true,
        ..RxRigConfig::new()
    };
    let dma = HostDma::new();
    let latch = DoorbellLatch::new();
    let baseline = {
        let mut slots = RxSlots::new(&cfg);
        let mut rig = RxRig::new(&dma, &latch, &mut slots, cfg, |d, _| {
            PagePerPacket::new(d, Direction::FromDevice)
        })
        .expect("rx rig");
        let s = copy_rounds(m, &mut rig);
        drop(rig.finish());
        s
    };
    let latch = DoorbellLatch::new();
    let pool = {
        let mut slots = RxSlots::new(&cfg);
        let mut rig = RxRig::new(&dma, &latch, &mut slots, cfg, |d, _| host_pool(d)).expect("rx rig");
        let s = copy_rounds(m, &mut rig);
        drop(rig.finish());
        s
    };
    assert_eq!(dma.stats().live_pages, 0);
    CompareRow { size, baseline, pool }
}

/// Pushes a packet-rate figure `name` (Mpps) and its cost `name_per_packet` (ns/packet).
fn rate_and_cost(out: &mut Vec<Figure>, name: &str, s: Sample) {
    out.push(Figure::mops(name, "Mpps", s));
    out.push(Figure::ns(format!("{name}_per_packet"), "ns/packet", s));
}

/// Runs `work` and pushes its figures when [`Method::wants`] figure `name`.
fn rate_if(m: &Method, out: &mut Vec<Figure>, name: &str, work: impl FnOnce(&Method) -> Sample) {
    if m.wants(name) {
        rate_and_cost(out, name, work(m));
    }
}

/// Group `rx`.
#[must_use]
pub fn rx(m: &Method) -> Vec<Figure> {
    let mut out = Vec::new();
    rate_if(m, &mut out, "rx_drop_driver_only", |m| {
        rx_drop_driver_only(m, RxRigConfig::new())
    });
    rate_if(m, &mut out, "rx_to_os_driver_only", rx_to_os_driver_only);
    rate_if(m, &mut out, "rx_drop_driver_model", rx_drop_driver_model);
    out
}

/// Group `tx`.
#[must_use]
pub fn tx(m: &Method) -> Vec<Figure> {
    let mut out = Vec::new();
    rate_if(m, &mut out, "tx_driver_only", tx_driver_only);
    rate_if(m, &mut out, "tx_driver_model", tx_driver_model);
    out
}

/// A workload giving one sample.
type Workload = fn(&Method) -> Sample;

/// Group `pool`.
#[must_use]
pub fn pool(m: &Method) -> Vec<Figure> {
    let work: [(&str, Workload); 4] = [
        ("pool_alloc_recycle_single", pool_single),
        ("pool_alloc_recycle_burst32", pool_burst32),
        ("pool_alloc_ring_recycle_burst32", pool_ring_burst32),
        ("baseline_page_alloc_map_unmap_free", baseline_page),
    ];
    work.iter()
        .filter(|(name, _)| m.wants(name))
        .map(|(name, f)| Figure::ns(*name, "ns/page", f(m)))
        .collect()
}

/// The distinct ring sizes of the QDMA ring-size table, smallest first, with their indices.
#[must_use]
pub fn ring_sizes() -> Vec<(u32, RingSizeIdx)> {
    let mut v: Vec<(u32, RingSizeIdx)> = RING_SIZES
        .iter()
        .enumerate()
        .filter_map(|(i, &n)| Some((n, RingSizeIdx::new(u8::try_from(i).ok()?).ok()?)))
        .collect();
    v.sort_by_key(|&(n, _)| n);
    v.dedup_by_key(|&mut (n, _)| n);
    v
}

/// Group `scaling`: the driver-only drop path per packet for 1, 8 and 64 queues (1024-entry
/// rings, polled round-robin by one context) and for every ring size of the QDMA table (1 queue).
#[must_use]
pub fn scaling(m: &Method) -> Vec<Figure> {
    let mut out = Vec::new();
    for q in SCALING_QUEUES {
        if !m.wants(&format!("scaling_queues_{q}")) {
            continue;
        }
        let s = rx_drop_driver_only(
            m,
            RxRigConfig {
                queues: q,
                ..RxRigConfig::new()
            },
        );
        out.push(Figure::ns(format!("scaling_queues_{q}"), "ns/packet", s));
    }
    for (n, ring) in ring_sizes() {
        if !m.wants(&format!("scaling_ring_{n}")) {
            continue;
        }
        let s = rx_drop_driver_only(
            m,
            RxRigConfig {
                ring,
                ..RxRigConfig::new()
            },
        );
        out.push(Figure::ns(format!("scaling_ring_{n}"), "ns/packet", s));
    }
    out
}

/// Group `compare`: [`compare_size`] for every size of [`COMPARE_SIZES`], as figures.
#[must_use]
pub fn compare(m: &Method) -> (Vec<Figure>, Vec<CompareRow>) {
    let rows: Vec<CompareRow> = COMPARE_SIZES
        .iter()
        .filter(|&&s| m.wants(&format!("compare_pool_{s}")))
        .map(|&s| compare_size(m, s))
        .collect();
    let mut out = Vec::new();
    for r in &rows {
        out.push(Figure::mops(
            format!("compare_baseline_{}", r.size),
            "Mpps",
            r.baseline,
        ));
        out.push(Figure::ns(
            format!("compare_baseline_{}_per_packet", r.size),
            "ns/packet",
            r.baseline,
        ));
        out.push(Figure::mops(format!("compare_pool_{}", r.size), "Mpps", r.pool));
        out.push(Figure::ns(
            format!("compare_pool_{}_per_packet", r.size),
            "ns/packet",
            r.pool,
        ));
    }
    (out, rows)
}

/// The comparison as a Markdown table (best-of figures).
#[must_use]
pub fn compare_table(rows: &[CompareRow]) -> String {
    let mut s = String::from(
        "| frame (wire bytes) | page per packet Mpps | page per packet ns/packet | pool Mpps | pool ns/packet | pool speed-up |\n\
         | ---: | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for r in rows {
        s.push_str(&format!(
            "| {} | {:.1} | {:.2} | {:.1} | {:.2} | {:.2}x |\n",
            r.size,
            1e3 / r.baseline.best,
            r.baseline.best,
            1e3 / r.pool.best,
            r.pool.best,
            r.baseline.best / r.pool.best
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every workload runs and returns something sensible (a tiny method: this checks the code,
    /// not the speed).
    #[test]
    fn workloads_run() {
        let m = Method {
            rep: Duration::from_millis(1),
            reps: 1,
            ..Method::default()
        };
        for s in [
            rx_drop_driver_only(&m, RxRigConfig::new()),
            rx_to_os_driver_only(&m),
            rx_drop_driver_model(&m),
            tx_driver_only(&m),
            tx_driver_model(&m),
            pool_single(&m),
            pool_burst32(&m),
            pool_ring_burst32(&m),
            baseline_page(&m),
        ] {
            assert!(s.best > 0.0 && s.best <= s.median && s.median <= s.worst, "{s:?}");
        }
        let row = compare_size(&m, 250);
        assert!(row.pool.best > 0.0 && row.baseline.best > 0.0);
        assert!(compare_table(&[row]).contains("| 250 |"));
        assert_eq!(ring_sizes().len(), 15);
        assert_eq!(ring_sizes()[0].0, 64);
    }
}
