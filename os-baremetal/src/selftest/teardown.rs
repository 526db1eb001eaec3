//! Teardown and the final accounting: queues, devices, DMA memory, violations, heap.

use heapless::Vec;
use onic_core::qdma::context_read;
use onic_core::stats::{read_hw_counters, HW_COUNTERS};
use onic_hal::layout::ctxt::{CmptCtxt, CtxtSel};
use onic_sim::{DmaStats, SimStats};

use super::probe::QueueStats;
use super::{Bench, Runner};
use crate::irq;
use crate::time::TscDelay;

/// Violations printed in full.
const SHOW_VIOLATIONS: usize = 8;

/// What the report shows, captured before teardown.
pub struct Summary {
    /// (function, qid, vector, buffer bytes, counters) per RX queue.
    pub queues: Vec<(u8, u16, u16, u32, QueueStats), 16>,
    /// Hardware counters per port (ethtool order).
    pub counters: [[u64; HW_COUNTERS]; 2],
    /// The model's own counters.
    pub sim: SimStats,
    /// DMA bookkeeping after teardown.
    pub dma: DmaStats,
}

pub fn run(r: &mut Runner, b: &mut Bench<'_>) -> Summary {
    r.group("teardown and accounting");
    let shell = b.model.shell();
    let mut queues = Vec::new();
    for row in b.rx.rows() {
        let _ = queues.push(row);
    }
    let counters = [read_hw_counters(&shell, 0), read_hw_counters(&shell, 1)];
    let sim = b.model.with(|c| c.stats());
    irq::latch_statistics(false);

    let probes = b.rx.take_all();
    let total = probes.len();
    let mut clean = 0;
    for q in probes {
        let Some(dev) = b.devices.get(usize::from(q.func)).and_then(Option::as_ref) else {
            continue;
        };
        let abs = dev.function().qbase() + q.cfg.qid;
        if q.teardown(dev).is_ok() {
            let valid = context_read(dev.qdma(), &mut TscDelay, CtxtSel::Cmpt, abs).map(|w| {
                let mut c = [0; CmptCtxt::WORDS];
                c.copy_from_slice(&w[..CmptCtxt::WORDS]);
                CmptCtxt::from_words(c).valid()
            });
            if valid == Ok(false) {
                clean += 1;
            }
        }
    }
    r.check(
        "rx-teardown",
        total > 0 && clean == total,
        format_args!("{clean}/{total} RX queues invalidated through onic-core, rings and pages released"),
    );

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

    let dma = b.model.with(|c| c.dma_stats());
    r.check(
        "dma-accounting",
        dma.live_regions == 0 && dma.live_pages == 0 && dma.mapped_pages == 0,
        format_args!(
            "{} regions and {} pages allocated in all; {} regions, {} pages, {} mappings left",
            dma.regions_allocated, dma.pages_allocated, dma.live_regions, dma.live_pages, dma.mapped_pages
        ),
    );

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
    drop(violations);
    Summary {
        queues,
        counters,
        sim,
        dma,
    }
}

/// After the model is gone, the heap must be back where it was before the model was built.
pub fn heap_balance(r: &mut Runner, before: usize) {
    let s = crate::heap::stats();
    r.check(
        "heap-balance",
        s.in_use == before,
        format_args!(
            "{} bytes in use after the model was dropped ({} before it was built, peak {} KiB, {} allocations)",
            s.in_use,
            before,
            s.peak / 1024,
            s.allocations
        ),
    );
}
