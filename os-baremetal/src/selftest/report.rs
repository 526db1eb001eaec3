//! The report printed at the end of a run, and the verdict.

use core::sync::atomic::Ordering;

use onic_core::stats::PoolStats;
use onic_hal::regs::cmac::{ADAPTER_STATS, CMAC_STATS};

use super::teardown::Summary;
use super::{Bench, Runner};
use crate::exit::ExitCode;
use crate::irq;
use crate::platform::boot;

pub fn print(b: &Bench<'_, '_>, s: &Summary) {
    crate::println!();
    crate::println!("== report");
    crate::println!("hardware counters (non-zero, read through onic-core):");
    let names = CMAC_STATS.iter().chain(ADAPTER_STATS.iter()).map(|c| c.name);
    for (i, name) in names.enumerate() {
        let (p0, p1) = (s.counters[0][i], s.counters[1][i]);
        if p0 != 0 || p1 != 0 {
            crate::println!("  {:<32} port0 {:>10}  port1 {:>10}", name, p0, p1);
            defmt::info!("{=str}: port0 {=u64} port1 {=u64}", name, p0, p1);
        }
    }
    let m = &s.sim;
    crate::println!(
        "model: injected {} wire-dropped {} c2h-no-desc {} cmpt-full {} no-queue {} completions {} tx frames {}",
        m.injected,
        m.wire_dropped,
        m.c2h_no_desc_dropped,
        m.cmpt_full_dropped,
        m.c2h_no_queue_dropped,
        m.completions,
        m.tx_frames
    );
    crate::println!(
        "wire (egress capture): port0 {} frames out ({} sent back by XDP), port1 {} ({})",
        b.dp.wire.out[0],
        b.dp.wire.swapped[0],
        b.dp.wire.out[1],
        b.dp.wire.swapped[1]
    );

    rx_table(s);
    tx_table(s);
    pool_table(s);

    let d = &s.dma;
    crate::println!();
    crate::println!(
        "pages (model DMA): {} allocated, {} live, {} mapped; regions {} allocated, {} live; \
         syncs {} for cpu, {} for device; {} allocation(s) refused",
        d.pages_allocated,
        d.live_pages,
        d.mapped_pages,
        d.regions_allocated,
        d.live_regions,
        d.syncs_for_cpu,
        d.syncs_for_device,
        d.page_alloc_failures
    );
    crate::println!(
        "OS: pages given back {} straight into the pools, {} through the recycle rings ({} early: OS full)",
        b.dp.os.returned_direct,
        b.dp.os.returned_ring,
        b.dp.os.overflow
    );
    let h = crate::heap::stats();
    crate::println!(
        "heap: {} KiB, peak {} KiB in use, {} allocations, {} refused",
        crate::heap::HEAP_BYTES / 1024,
        h.peak / 1024,
        h.allocations,
        h.failures
    );
    interrupts(b);
    let (bottom, top) = boot::stack_range();
    crate::println!(
        "stack: {} KiB of {} KiB used at the deepest",
        boot::stack_peak() / 1024,
        (top - bottom) / 1024
    );
}

/// Per-queue RX: polling, packets, drops by reason, XDP verdicts.
fn rx_table(s: &Summary) {
    crate::println!();
    crate::println!(
        "per-queue RX (drops: err = completion error bit, len = bad length, multi = beyond the buffer, \
         nopage = no replacement page; xdp: pass/drop/tx/redirect, txerr = XDP_TX refused):"
    );
    crate::println!(
        "  {:>2} {:>2} {:>4} {:>5} {:>5} {:>5} {:>4} {:>6} {:>8} | {:>3} {:>3} {:>5} {:>6} | {:>5} {:>5} {:>4} {:>5} \
         {:>5} | state",
        "pf", "q", "vec", "buf", "irqs", "polls", "exh", "pkts", "bytes", "err", "len", "multi", "nopage",
        "pass", "drop", "tx", "redir", "txerr"
    );
    for row in &s.rows {
        let irqs = irq::QUEUE_IRQS
            .get(usize::from(row.func))
            .and_then(|r| r.get(usize::from(row.q)))
            .map_or(0, |c| c.load(Ordering::Relaxed));
        let vec = irq::queue_vector(row.func, row.q).unwrap_or(0);
        let rx = &row.rx;
        crate::println!(
            "  {:>2} {:>2} {:>#4x} {:>5} {:>5} {:>5} {:>4} {:>6} {:>8} | {:>3} {:>3} {:>5} {:>6} | {:>5} {:>5} \
             {:>4} {:>5} {:>5} | {}",
            row.func,
            row.q,
            vec,
            row.buf,
            irqs,
            row.book.polls,
            row.book.exhausted,
            rx.rx_packets,
            rx.rx_bytes,
            rx.rx_cmpt_errors,
            rx.rx_bad_length,
            rx.rx_multi_buffer,
            rx.rx_no_page,
            row.pair.rx_xdp_pass,
            row.pair.rx_xdp_drop,
            row.pair.rx_xdp_tx,
            row.pair.rx_xdp_redirect,
            row.pair.rx_xdp_tx_errors,
            if row.error.is_some() {
                "error"
            } else {
                "ok"
            }
        );
        defmt::info!(
            "pf{=u8} q{=u16} vec {=u8:#x}: irqs {=u32} polls {=u64}; {}; {}",
            row.func,
            row.q,
            vec,
            irqs,
            row.book.polls,
            row.rx,
            row.pair
        );
        if let Some(e) = row.error {
            crate::println!("     pf{} q{} stopped: {}", row.func, row.q, e);
        }
    }
}

/// Per-queue TX: what was queued and completed, flow control, and who reclaimed.
fn tx_table(s: &Summary) {
    crate::println!();
    crate::println!("per-queue TX (os/remote = completions handed to TxDone; hk = housekeeping reclaims):");
    crate::println!(
        "  {:>2} {:>2} {:>6} {:>6} {:>8} {:>5} {:>4} {:>4} {:>5} {:>5} {:>6} {:>6} {:>4}",
        "pf",
        "q",
        "queued",
        "pkts",
        "bytes",
        "dbell",
        "busy",
        "stop",
        "wake",
        "pad",
        "os",
        "remote",
        "hk"
    );
    for row in &s.rows {
        let t = &row.tx;
        crate::println!(
            "  {:>2} {:>2} {:>6} {:>6} {:>8} {:>5} {:>4} {:>4} {:>5} {:>5} {:>6} {:>6} {:>4}",
            row.func,
            row.q,
            t.queued,
            t.tx_packets,
            t.tx_bytes,
            t.doorbells,
            t.tx_busy,
            t.stops,
            t.wakes,
            t.padded,
            row.book.tx_os_done,
            row.book.tx_remote_done,
            row.book.hk_reclaims
        );
        defmt::info!("pf{=u8} q{=u16}: {}", row.func, row.q, row.tx);
    }
}

/// The page pools, with the statistics names of Linux's page_pool.
fn pool_table(s: &Summary) {
    crate::println!();
    crate::println!("page pools (Linux page_pool statistics names):");
    let mut total = PoolStats::default();
    for row in &s.rows {
        pool_line(&format_args!("pf{} q{}", row.func, row.q), &row.pool);
        defmt::info!("pool pf{=u8} q{=u16}: {}", row.func, row.q, row.pool);
        total += row.pool;
    }
    pool_line(&format_args!("total"), &total);
}

fn pool_line(who: &dyn core::fmt::Display, p: &PoolStats) {
    crate::println!(
        "  {:<6} alloc.fast {} alloc.slow {} alloc.slow_high_order {} alloc.empty {} alloc.refill {} \
         alloc.waive {} recycle.cached {} recycle.cache_full {} recycle.ring {} recycle.ring_full {} \
         recycle.released_refcnt {} | from HAL {} to HAL {} HAL failures {} OS returns {}",
        who,
        p.alloc.fast,
        p.alloc.slow,
        p.alloc.slow_high_order,
        p.alloc.empty,
        p.alloc.refill,
        p.alloc.waive,
        p.recycle.cached,
        p.recycle.cache_full,
        p.recycle.ring,
        p.recycle.ring_full,
        p.recycle.released_refcnt,
        p.pages_from_hal,
        p.pages_to_hal,
        p.hal_alloc_failures,
        p.os_returns
    );
}

/// Interrupt counts per vector, the tick and its work.
fn interrupts(b: &Bench<'_, '_>) {
    crate::print!("interrupts per vector:");
    for (f, row) in irq::QUEUE_IRQS.iter().enumerate() {
        for (v, c) in row.iter().enumerate() {
            let n = c.load(Ordering::Relaxed);
            if n > 0 {
                let vec = irq::queue_vector(f as u8, v as u16).unwrap_or(0);
                crate::print!(" {:#x}={}", vec, n);
                defmt::info!(
                    "vector {=u8:#x} (pf{=usize} msix {=usize}): {=u32} interrupts",
                    vec,
                    f,
                    v,
                    n
                );
            }
        }
    }
    crate::println!(
        " (raised by the model: {:?} / {:?})",
        &b.dp.raised[0][..4],
        &b.dp.raised[1][..4]
    );
    let ticks = irq::TICKS.load(Ordering::Relaxed);
    crate::println!(
        "  timer {:#x}: {} ticks, {} statistics latches, {} housekeeping rounds, model clock +{} us from \
         ticks; {} IDT self-check, {} spurious, {} unexpected",
        irq::TIMER_VECTOR,
        ticks,
        irq::STATS_LATCHES.load(Ordering::Relaxed),
        b.dp.hk_rounds,
        irq::MODEL_TIME_NS.load(Ordering::Relaxed) / 1000,
        irq::TEST_VECTOR_HITS.load(Ordering::Relaxed),
        irq::SPURIOUS.load(Ordering::Relaxed),
        irq::UNEXPECTED.load(Ordering::Relaxed)
    );
    defmt::info!(
        "timer: {=u64} ticks, {=u64} housekeeping rounds",
        ticks,
        b.dp.hk_rounds
    );
}

/// Prints the verdict and turns it into the exit code.
pub fn verdict(r: &Runner, elapsed_ns: u64) -> ExitCode {
    let failed = r.failures().count();
    crate::println!();
    if r.all_passed() {
        crate::println!(
            "SELFTEST PASS: {} checks passed in {} ms (exit code {:#x}, QEMU status {})",
            r.total(),
            elapsed_ns / 1_000_000,
            ExitCode::Pass as u32,
            ExitCode::Pass.qemu_status()
        );
        defmt::info!("SELFTEST PASS: {=usize} checks", r.total());
        ExitCode::Pass
    } else {
        crate::print!("SELFTEST FAIL: {} of {} checks failed:", failed, r.total());
        for o in r.failures() {
            crate::print!(" {}", o.name);
        }
        crate::println!(
            " (exit code {:#x}, QEMU status {})",
            ExitCode::ChecksFailed as u32,
            ExitCode::ChecksFailed.qemu_status()
        );
        defmt::error!(
            "SELFTEST FAIL: {=usize} of {=usize} checks failed",
            failed,
            r.total()
        );
        ExitCode::ChecksFailed
    }
}
