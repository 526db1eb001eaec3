//! The final accounting and teardown: the page census, the pools' statistics, the queue pairs
//! (every TX queue first, so that redirected pages find their pools), the pools drained, the
//! devices, the model's DMA bookkeeping and violations, the heap.

use heapless::Vec as HVec;
use onic_core::queue::pair::QueuePair;
use onic_core::stats::PairStats;
use onic_core::stats::PoolStats;
use onic_core::stats::{read_hw_counters, HW_COUNTERS};
use onic_core::{QueueError, QueueId, RxStats, TxStats};
use onic_hal::layout::ctxt::{CmptCtxt, CtxtSel};
use onic_sim::{DmaStats, SimStats};

use super::datapath::{buffer_bytes, run_until, Book, TOTAL_PAIRS, WAIT_NS};
use super::queues::{h2c_enabled, read_context};
use super::{Bench, Runner};
use crate::irq::{self, FUNCTIONS};
use crate::time::TscDelay;

/// Violations printed in full.
const SHOW_VIOLATIONS: usize = 8;

/// One pair as the report shows it.
#[derive(Clone, Copy, Debug)]
pub struct Row {
    /// PF.
    pub func: u8,
    /// Queue (and MSI-X vector).
    pub q: u16,
    /// RX buffer bytes.
    pub buf: u32,
    /// RX queue counters.
    pub rx: RxStats,
    /// TX queue counters.
    pub tx: TxStats,
    /// Pair counters (XDP_TX, redirect).
    pub pair: PairStats,
    /// Pool counters.
    pub pool: PoolStats,
    /// The image's counters.
    pub book: Book,
    /// The queue's error state.
    pub error: Option<QueueError>,
}

/// What the report shows, captured before teardown.
pub struct Summary {
    /// One row per pair.
    pub rows: HVec<Row, TOTAL_PAIRS>,
    /// Hardware counters per port (ethtool order).
    pub counters: [[u64; HW_COUNTERS]; 2],
    /// The model's own counters.
    pub sim: SimStats,
    /// DMA bookkeeping after teardown.
    pub dma: DmaStats,
}

pub fn run(r: &mut Runner, b: &mut Bench<'_, '_>) -> Summary {
    r.group("page accounting and teardown");
    b.dp.os.hold = false;
    let quiet = run_until(b, WAIT_NS, |b| {
        b.dp.tx_in_flight() == 0 && b.dp.os.held() == 0 && !irq::napi_pending()
    });
    census(r, b, quiet);
    let rows = rows(b);
    let shell = b.model.shell();
    let counters = [read_hw_counters(&shell, 0), read_hw_counters(&shell, 1)];
    let sim = b.model.with(|c| c.stats());
    irq::latch_statistics(false);
    teardown_pairs(r, b);
    teardown_devices(r, b);
    let dma = b.model.with(|c| c.dma_stats());
    r.check(
        "dma-accounting",
        dma.live_regions == 0 && dma.live_pages == 0 && dma.mapped_pages == 0,
        format_args!(
            "{} regions and {} pages allocated in all; {} regions, {} pages, {} mappings left",
            dma.regions_allocated, dma.pages_allocated, dma.live_regions, dma.live_pages, dma.mapped_pages
        ),
    );
    violations(r, b);
    Summary {
        rows,
        counters,
        sim,
        dma,
    }
}

/// Census: every pool page is somewhere the driver knows of, and the model agrees; the pools'
/// statistics show every path taken.
fn census(r: &mut Runner, b: &Bench<'_, '_>, quiet: bool) {
    let mut off = 0;
    let mut pool_live = 0;
    let mut total = PoolStats::default();
    let mut to_os = 0;
    for (_, _, p) in b.dp.each() {
        let s = p.pool.stats();
        pool_live += s.live_pages();
        to_os += p.rx.stats().to_os;
        total += s;
        if p.page_counts().is_none_or(|c| c.total() != s.live_pages()) {
            off += 1;
        }
    }
    let model_live = b.model.with(|c| c.dma_stats().live_pages) as u64;
    r.check(
        "page-census",
        quiet && off == 0 && model_live == pool_live + u64::from(b.dp.os_tx_live),
        format_args!(
            "every pair's page_counts() adds up to its pool's live pages ({off} off); {pool_live} pool pages + \
             {} OS TX buffers = the model's {model_live} live pages",
            b.dp.os_tx_live
        ),
    );
    r.check(
        "pool-stats",
        total.alloc.fast > 0
            && total.alloc.slow > 0
            && total.alloc.refill > 0
            && total.recycle.cached > 0
            && total.recycle.ring > 0
            && total.hal_alloc_failures == u64::from(super::faults::PAGE_ALLOC_REFUSALS)
            && total.os_returns == to_os,
        format_args!(
            "all pools: alloc.fast {} alloc.slow {} alloc.refill {}, recycle.cached {} recycle.ring {}, {} HAL \
             failures, os_returns {} = pages passed to the OS {to_os}",
            total.alloc.fast,
            total.alloc.slow,
            total.alloc.refill,
            total.recycle.cached,
            total.recycle.ring,
            total.hal_alloc_failures,
            total.os_returns
        ),
    );
}

/// One row per pair for the report, captured before teardown.
fn rows(b: &Bench<'_, '_>) -> HVec<Row, TOTAL_PAIRS> {
    let mut rows = HVec::new();
    for (f, q, p) in b.dp.each() {
        let _ = rows.push(Row {
            func: f,
            q: q as u16,
            buf: buffer_bytes(q),
            rx: *p.rx.stats(),
            tx: *p.tx.stats(),
            pair: *p.stats(),
            pool: p.pool.stats(),
            book: b.dp.books[usize::from(f)][q],
            error: p.rx.error(),
        });
    }
    rows
}

/// Every TX queue first (a redirected page goes back to its pool's ring, and the pool must still
/// be there to drain it), then the RX queues, then the pools.
fn teardown_pairs(r: &mut Runner, b: &mut Bench<'_, '_>) {
    let mut parts = HVec::<_, TOTAL_PAIRS>::new();
    for f in 0..FUNCTIONS {
        for (q, pair) in core::mem::take(&mut b.dp.pairs[f]).into_iter().enumerate() {
            let QueuePair { rx, tx, pool, .. } = pair;
            let _ = parts.push((f, q, rx, Some(tx), pool));
        }
    }
    let mut tx_clean = 0;
    let mut rx_clean = 0;
    let mut drained = 0;
    let count = parts.len();
    for (f, q, _, tx, pool) in parts.iter_mut() {
        let (Some(dev), Some(tx)) = (b.devices[*f].as_ref(), tx.take()) else {
            continue;
        };
        let mut done = b.dp.done(*f, *q);
        let abs = dev.function().abs_queue(QueueId::new(*q as u16));
        if tx.teardown(dev, &mut TscDelay, pool, &mut done).0.is_ok()
            && abs.is_some_and(|a| !h2c_enabled(dev, a))
        {
            tx_clean += 1;
        }
    }
    for (f, q, rx, _, mut pool) in parts {
        let Some(dev) = b.devices[f].as_ref() else {
            continue;
        };
        let abs = dev.function().abs_queue(QueueId::new(q as u16));
        if rx.teardown(dev, &mut TscDelay, &mut pool).0.is_ok()
            && abs
                .and_then(|a| read_context(dev, CtxtSel::Cmpt, a, CmptCtxt::from_words))
                .is_some_and(|c| !c.valid())
        {
            rx_clean += 1;
        }
        pool.drain();
        if pool.stats().live_pages() == 0 {
            drained += 1;
        }
    }
    r.check(
        "pairs-teardown",
        count == TOTAL_PAIRS && tx_clean == count && rx_clean == count && b.dp.os_tx_live == 0,
        format_args!(
            "{count} queue pairs: {tx_clean} TX and {rx_clean} RX queues invalidated through onic-core, every \
             buffer back with its owner"
        ),
    );
    r.check(
        "pool-drain",
        drained == count && rings_empty(),
        format_args!("{drained}/{count} pools drained to zero live pages, their recycle rings empty"),
    );
}

/// The functions, PF1 first, then the master PF0.
fn teardown_devices(r: &mut Runner, b: &mut Bench<'_, '_>) {
    let mut down = 0;
    let mut up = 0;
    for slot in b.devices.iter_mut().rev() {
        if let Some(dev) = slot.take() {
            up += 1;
            let (result, _, _) = dev.teardown(&mut TscDelay);
            if result.is_ok() {
                down += 1;
            }
        }
    }
    r.check(
        "device-teardown",
        up == 2 && down == 2,
        format_args!("{down}/{up} functions torn down (PF1, then the master PF0)"),
    );
}

/// The driver mistakes the model caught over the whole run, the first few in full.
fn violations(r: &mut Runner, b: &Bench<'_, '_>) {
    let violations = b.model.with(|c| c.violations());
    for v in violations.iter().take(SHOW_VIOLATIONS) {
        crate::println!("    violation: {}", v);
    }
    r.check(
        "model-violations",
        violations.is_empty(),
        format_args!(
            "the model caught {} driver mistake(s) over the whole run",
            violations.len()
        ),
    );
}

/// Whether every pool's recycle ring is empty.
fn rings_empty() -> bool {
    super::datapath::RINGS
        .iter()
        .all(onic_core::RecycleRing::is_empty)
}

/// After the models are gone (the bare pairs' card and the port bench's), the heap must be back
/// where it was before the first was built.
pub fn heap_balance(r: &mut Runner, before: usize) {
    let s = crate::heap::stats();
    r.check(
        "heap-balance",
        s.in_use == before,
        format_args!(
            "{} bytes in use after the models, the slot storage and the ports were dropped ({} before, peak {} \
             KiB, {} allocations)",
            s.in_use,
            before,
            s.peak / 1024,
            s.allocations
        ),
    );
}
