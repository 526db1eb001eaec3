//! The report printed at the end of a run, and the verdict.

use core::sync::atomic::Ordering;

use onic_hal::regs::cmac::{ADAPTER_STATS, CMAC_STATS};

use super::teardown::Summary;
use super::{Bench, Runner};
use crate::exit::ExitCode;
use crate::irq;
use crate::platform::boot;

pub fn print(_b: &Bench<'_>, s: &Summary) {
    crate::println!();
    crate::println!("== report");
    crate::println!("hardware counters (non-zero, read through onic-core):");
    let names = CMAC_STATS.iter().chain(ADAPTER_STATS.iter()).map(|c| c.name);
    for (i, name) in names.enumerate() {
        let (p0, p1) = (s.counters[0][i], s.counters[1][i]);
        if p0 != 0 || p1 != 0 {
            crate::println!("  {:<32} port0 {:>10}  port1 {:>10}", name, p0, p1);
        }
    }
    let m = &s.sim;
    crate::println!(
        "model: injected {} wire-dropped {} c2h-no-desc {} cmpt-full {} no-queue {} completions {}",
        m.injected,
        m.wire_dropped,
        m.c2h_no_desc_dropped,
        m.cmpt_full_dropped,
        m.c2h_no_queue_dropped,
        m.completions
    );

    crate::println!();
    crate::println!("per-queue (RX):");
    crate::println!(
        "  {:>2} {:>3} {:>4} {:>6} {:>6} {:>6} {:>6} {:>8} {:>9} {:>7} {:>6}",
        "pf",
        "q",
        "vec",
        "buf",
        "irqs",
        "polls",
        "budget",
        "packets",
        "bytes",
        "multi",
        "errors"
    );
    for &(func, qid, vector, buf, st) in &s.queues {
        let irqs = irq::QUEUE_IRQS
            .get(usize::from(func))
            .and_then(|row| row.get(usize::from(vector)))
            .map_or(0, |c| c.load(Ordering::Relaxed));
        let cpu_vec = irq::queue_vector(func, vector).unwrap_or(0);
        crate::println!(
            "  {:>2} {:>3} {:>#4x} {:>6} {:>6} {:>6} {:>6} {:>8} {:>9} {:>7} {:>6}",
            func,
            qid,
            cpu_vec,
            buf,
            irqs,
            st.polls,
            st.budget_exhausted,
            st.packets,
            st.bytes,
            st.multi_buffer,
            st.errors
        );
        defmt::info!(
            "queue pf{=u8} q{=u16} vec {=u8:#x}: irqs {=u32} polls {=u64} packets {=u64} bytes {=u64}",
            func,
            qid,
            cpu_vec,
            irqs,
            st.polls,
            st.packets,
            st.bytes
        );
    }

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
    crate::println!("  (the page pool's own statistics join here with onic-core's pool)");
    let h = crate::heap::stats();
    crate::println!(
        "heap: {} KiB, peak {} KiB in use, {} allocations, {} refused",
        crate::heap::HEAP_BYTES / 1024,
        h.peak / 1024,
        h.allocations,
        h.failures
    );
    crate::println!(
        "interrupts: {} timer ticks, {} statistics latches, {} housekeeping rounds, model clock +{} us \
         from ticks, {} IDT self-check, {} spurious, {} unexpected",
        irq::TICKS.load(Ordering::Relaxed),
        irq::STATS_LATCHES.load(Ordering::Relaxed),
        irq::HOUSEKEEPING_RUN.load(Ordering::Relaxed),
        irq::MODEL_TIME_NS.load(Ordering::Relaxed) / 1000,
        irq::TEST_VECTOR_HITS.load(Ordering::Relaxed),
        irq::SPURIOUS.load(Ordering::Relaxed),
        irq::UNEXPECTED.load(Ordering::Relaxed)
    );
    let (bottom, top) = boot::stack_range();
    crate::println!(
        "stack: {} KiB of {} KiB used at the deepest",
        boot::stack_peak() / 1024,
        (top - bottom) / 1024
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
