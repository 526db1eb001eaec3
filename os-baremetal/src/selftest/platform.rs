//! Platform checks: what the rest of the self-test stands on.

use core::alloc::Layout;
use core::sync::atomic::Ordering;

use onic_hal::DelayNs;

use super::{Boot, Runner};
use crate::irq;
use crate::platform::boot::{self, BootProtocol};
use crate::platform::{idt, rdtsc, without_interrupts};
use crate::time::{self, TscDelay, TICK_NS};

/// Plausible TSC frequencies.
const TSC_HZ_RANGE: core::ops::RangeInclusive<u64> = 100_000_000..=20_000_000_000;
/// Ticks to wait for when timing the tick.
const TICKS_TO_TIME: u64 = 20;
/// Length of the delay measured against the tick.
const DELAY_MS: u32 = 20;

pub fn run(r: &mut Runner, b: &Boot) {
    r.group("platform");
    let (image_start, image_end) = boot::image_range();
    match b.protocol {
        BootProtocol::Multiboot { mem_upper_kib } => {
            r.check(
                "boot-protocol",
                true,
                format_args!("multiboot v1 (a.out kludge), image {image_start:#x}..{image_end:#x}"),
            );
            let mem_end = mem_upper_kib.map_or(0, |k| (1usize << 20) + k as usize * 1024);
            r.check(
                "boot-memory",
                mem_end >= image_end,
                format_args!(
                    "the loader reports memory up to {mem_end:#x}; the image ends at {image_end:#x}"
                ),
            );
        }
        BootProtocol::Pvh { version } => {
            r.check(
                "boot-protocol",
                true,
                format_args!("PVH (hvm_start_info v{version}), image {image_start:#x}..{image_end:#x}"),
            );
        }
        BootProtocol::Unknown { magic } => {
            r.check(
                "boot-protocol",
                false,
                format_args!("entered with EAX {magic:#x}: neither multiboot nor PVH"),
            );
        }
    }

    heap(r);
    calibration(r, b);
    idt(r);
    tick(r);
    delay(r);
}

fn heap(r: &mut Runner) {
    let before = crate::heap::stats();
    let layout = Layout::from_size_align(4096, 4096).ok();
    let ok = layout.is_some_and(|l| {
        // SAFETY: the layout has a non-zero size; the block is freed right away with it.
        let p = unsafe { alloc::alloc::alloc(l) };
        let aligned = !p.is_null() && (p as usize).is_multiple_of(4096);
        if !p.is_null() {
            // SAFETY: `p` was just allocated with `l`.
            unsafe { alloc::alloc::dealloc(p, l) };
        }
        aligned
    });
    let after = crate::heap::stats();
    r.check(
        "heap",
        ok && after.in_use == before.in_use,
        format_args!(
            "{} MiB static heap serves page-aligned blocks and takes them back",
            crate::heap::HEAP_BYTES >> 20
        ),
    );
}

fn calibration(r: &mut Runner, b: &Boot) {
    let c = &b.calibration;
    let median = c.tsc_hz;
    let agree = c
        .windows
        .iter()
        .flatten()
        .filter(|&&w| w.abs_diff(median) * 100 <= median)
        .count();
    r.check(
        "tsc-calibration",
        TSC_HZ_RANGE.contains(&c.tsc_hz) && agree * 2 > c.windows.len(),
        format_args!(
            "{}.{:03} MHz: median of {} bracketed PIT channel-2 windows of 10 ms, {} within 1% of it \
             (worst read uncertainty {} ppm)",
            c.tsc_hz / 1_000_000,
            c.tsc_hz / 1000 % 1000,
            c.windows.len(),
            agree,
            c.worst_ppm
        ),
    );
}

fn idt(r: &mut Runner) {
    let before = irq::TEST_VECTOR_HITS.load(Ordering::Relaxed);
    idt::raise(irq::TEST_VECTOR);
    without_interrupts(|| idt::raise(irq::TEST_VECTOR));
    let hits = irq::TEST_VECTOR_HITS.load(Ordering::Relaxed) - before;
    let code = irq::TEST_VECTOR_ERROR_CODE.load(Ordering::Relaxed);
    r.check(
        "idt-dispatch",
        hits == 2 && code == 0,
        format_args!(
            "int {:#x} reached its handler {} of 2 times (error code {}), with interrupts on and off",
            irq::TEST_VECTOR,
            hits,
            code
        ),
    );
}

/// Waits (halting) until `n` more ticks have been taken, or `give_up_ns` passed.
pub fn wait_ticks(n: u64, give_up_ns: u64) -> bool {
    let target = irq::TICKS.load(Ordering::Relaxed) + n;
    let deadline = time::nanos_since_boot() + give_up_ns;
    loop {
        if irq::TICKS.load(Ordering::Relaxed) >= target {
            return true;
        }
        if time::nanos_since_boot() > deadline {
            return false;
        }
        crate::platform::disable_interrupts();
        crate::platform::enable_interrupts_and_halt();
    }
}

fn tick(r: &mut Runner) {
    // Count the ticks in a TSC-timed window. QEMU merges timer interrupts the guest did not take
    // in time (its vCPU thread descheduled on a busy host), so fewer ticks than nominal only mean
    // a busy host; more than nominal, or none, mean a wrong timer.
    let window_ns = TICKS_TO_TIME * TICK_NS;
    let _ = wait_ticks(1, 1_000_000_000);
    let before = irq::TICKS.load(Ordering::Relaxed);
    let t0 = rdtsc();
    while time::cycles_to_ns(rdtsc() - t0) < window_ns {
        crate::platform::disable_interrupts();
        crate::platform::enable_interrupts_and_halt();
    }
    let ticks = irq::TICKS.load(Ordering::Relaxed) - before;
    r.check(
        "timer-tick",
        (TICKS_TO_TIME / 4..=TICKS_TO_TIME + 2).contains(&ticks),
        format_args!(
            "{ticks} PIT ticks in {} us by the TSC (nominal {TICKS_TO_TIME}; fewer only on a busy host)",
            window_ns / 1000
        ),
    );
}

fn delay(r: &mut Runner) {
    // The delay is timed by PIT channel 2 (reads bracketed by the TSC), not by tick interrupts.
    let mut d = TscDelay;
    let want_ns = u64::from(DELAY_MS) * 1_000_000;
    let measured = crate::platform::pit::stopwatch(|| d.delay_ms(DELAY_MS));
    let (clocks, uncertainty) = measured.unwrap_or((0, 0));
    let took_ns = clocks * 1_000_000_000 / crate::platform::pit::INPUT_HZ;
    let slack_ns = time::cycles_to_ns(uncertainty) + 100_000;
    r.check(
        "tsc-delay",
        measured.is_some() && took_ns + slack_ns >= want_ns && took_ns <= want_ns * 3 / 2,
        format_args!(
            "DelayNs::delay_ms({DELAY_MS}) took {} us by PIT channel 2 (never less than asked)",
            took_ns / 1000
        ),
    );
}
