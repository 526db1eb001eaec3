//! Interrupt handling: the vector map, the handlers, and the counters the self-test reports.
//!
//! | vectors | source | handler |
//! |---|---|---|
//! | 0x00-0x1F | CPU exceptions | report on the console and exit (status 39) |
//! | 0x20 | PIT via the PIC (IRQ 0) | the tick: housekeeping |
//! | 0x27, 0x2F | PIC spurious lines | counted |
//! | 0x30 | software (`int 0x30`) | counted: the IDT self-check |
//! | 0x40-0x5F | the model's queue interrupts, one vector per (function, MSI-X index) | NAPI schedule |
//!
//! A queue interrupt works as MSI-X would on real hardware: the device names an MSI-X vector of
//! its function, the "MSI-X table" ([`queue_vector`]) turns that into a CPU vector, and the CPU
//! runs that vector's handler. The model reports its interrupts through
//! `Card::take_interrupts`; the main loop raises each one with `int N`
//! ([`crate::platform::idt::raise`]). The handler does what a NAPI driver's hard-IRQ handler does:
//! it only marks the queue pair for polling; the main loop (`selftest::datapath::service`) polls
//! marked pairs with `QueuePair::poll` and a budget.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use onic_core::stats::{read_hw_counters, HW_COUNTERS};

use crate::platform::idt::TrapFrame;
use crate::platform::pic;

/// The timer's vector.
pub const TIMER_VECTOR: u8 = pic::MASTER_BASE;
/// The IDT self-check vector.
pub const TEST_VECTOR: u8 = 0x30;
/// First queue vector.
pub const QUEUE_VECTOR_BASE: u8 = 0x40;
/// PCI functions whose queue interrupts are routed.
pub const FUNCTIONS: usize = 2;
/// MSI-X vectors per function that are routed (queue vectors 0..16).
pub const MSIX_VECTORS: usize = 16;
/// Ticks between two statistics latches (50 ms at 1 kHz).
pub const STATS_LATCH_TICKS: u64 = 50;
/// CMAC ports whose statistics the tick latches.
pub const PORTS: usize = 2;

/// The CPU vector for MSI-X vector `msix` of function `func`, if it is routed.
#[must_use]
pub fn queue_vector(func: u8, msix: u16) -> Option<u8> {
    let (f, m) = (usize::from(func), usize::from(msix));
    (f < FUNCTIONS && m < MSIX_VECTORS).then(|| QUEUE_VECTOR_BASE + (f * MSIX_VECTORS + m) as u8)
}

fn queue_of_vector(vector: u8) -> Option<(usize, usize)> {
    let i = usize::from(vector.checked_sub(QUEUE_VECTOR_BASE)?);
    (i < FUNCTIONS * MSIX_VECTORS).then_some((i / MSIX_VECTORS, i % MSIX_VECTORS))
}

/// Timer interrupts taken.
pub static TICKS: AtomicU64 = AtomicU64::new(0);
/// Interrupts on the IDT self-check vector.
pub static TEST_VECTOR_HITS: AtomicU32 = AtomicU32::new(0);
/// Error code seen by the last IDT self-check interrupt (must be the stub's dummy 0).
pub static TEST_VECTOR_ERROR_CODE: AtomicU64 = AtomicU64::new(u64::MAX);
/// Spurious PIC interrupts.
pub static SPURIOUS: AtomicU32 = AtomicU32::new(0);
/// Interrupts on vectors nothing should raise.
pub static UNEXPECTED: AtomicU32 = AtomicU32::new(0);
/// Queue interrupts taken, per function and MSI-X vector.
pub static QUEUE_IRQS: [[AtomicU32; MSIX_VECTORS]; FUNCTIONS] =
    [const { [const { AtomicU32::new(0) }; MSIX_VECTORS] }; FUNCTIONS];
/// NAPI schedule: bit `v` of entry `f` = MSI-X vector `v` of function `f` wants a poll.
pub static NAPI_PENDING: [AtomicU64; FUNCTIONS] = [const { AtomicU64::new(0) }; FUNCTIONS];
/// Model time the ticks have added, in nanoseconds.
pub static MODEL_TIME_NS: AtomicU64 = AtomicU64::new(0);
/// Statistics latches done by the tick.
pub static STATS_LATCHES: AtomicU32 = AtomicU32::new(0);
/// Whether the tick latches statistics (set once the ports are up).
static LATCH_STATS: AtomicBool = AtomicBool::new(false);
/// Housekeeping rounds owed to the main loop (work too large for the handler: TX reclaim of idle
/// pairs, refill polls, the OS giving pages back).
pub static HOUSEKEEPING_DUE: AtomicU32 = AtomicU32::new(0);
/// Housekeeping rounds the main loop has run.
pub static HOUSEKEEPING_RUN: AtomicU32 = AtomicU32::new(0);

/// Takes the housekeeping rounds the tick asked for (the main loop runs them).
pub fn take_housekeeping() -> u32 {
    let due = HOUSEKEEPING_DUE.swap(0, Ordering::Relaxed);
    HOUSEKEEPING_RUN.fetch_add(due.min(1), Ordering::Relaxed);
    due
}

/// A value shared between the main loop and the interrupt handlers, accessed with interrupts off.
pub struct IrqCell<T>(UnsafeCell<T>);

// SAFETY: `with` gives access only with interrupts disabled on the only CPU, and handlers run
// with interrupts disabled, so two accesses never overlap (handlers do not nest `with` calls).
unsafe impl<T: Send> Sync for IrqCell<T> {}

impl<T> IrqCell<T> {
    /// Wraps a value.
    pub const fn new(v: T) -> Self {
        Self(UnsafeCell::new(v))
    }

    /// Runs `f` on the value with interrupts disabled. `f` must not call `with` on the same cell.
    pub fn with<R>(&self, f: impl FnOnce(&mut T) -> R) -> R {
        crate::platform::without_interrupts(|| {
            // SAFETY: see the Sync impl: interrupts are off and calls are not nested.
            f(unsafe { &mut *self.0.get() })
        })
    }
}

/// The CMAC and adapter counters of each port as the tick last latched them.
pub static HW_SNAPSHOT: IrqCell<[[u64; HW_COUNTERS]; PORTS]> = IrqCell::new([[0; HW_COUNTERS]; PORTS]);

/// Starts (or stops) the tick's statistics latch.
pub fn latch_statistics(on: bool) {
    LATCH_STATS.store(on, Ordering::Relaxed);
}

/// Takes the NAPI bits of function `func` (the main loop polls them).
pub fn take_napi(func: usize) -> u64 {
    NAPI_PENDING[func].swap(0, Ordering::Relaxed)
}

/// Marks MSI-X vector `msix` of `func` for polling again (its budget ran out).
pub fn reschedule_napi(func: usize, msix: usize) {
    NAPI_PENDING[func].fetch_or(1 << msix, Ordering::Relaxed);
}

/// Whether any queue waits for a poll.
#[must_use]
pub fn napi_pending() -> bool {
    NAPI_PENDING.iter().any(|p| p.load(Ordering::Relaxed) != 0)
}

/// Called by the common interrupt entry for every vector.
pub fn dispatch(frame: &mut TrapFrame) {
    let vector = frame.vector();
    match vector {
        0..=0x1F => exception(frame),
        TIMER_VECTOR => {
            tick();
            pic::end_of_interrupt(0);
        }
        v if v == pic::MASTER_BASE + 7 => {
            if pic::line7_in_service(false) {
                pic::end_of_interrupt(7);
            } else {
                SPURIOUS.fetch_add(1, Ordering::Relaxed);
            }
        }
        v if v == pic::SLAVE_BASE + 7 => {
            if pic::line7_in_service(true) {
                pic::end_of_interrupt(15);
            } else {
                // The master saw the cascade line and expects its acknowledgement.
                pic::end_of_interrupt(0);
                SPURIOUS.fetch_add(1, Ordering::Relaxed);
            }
        }
        TEST_VECTOR => {
            TEST_VECTOR_ERROR_CODE.store(frame.error_code, Ordering::Relaxed);
            TEST_VECTOR_HITS.fetch_add(1, Ordering::Relaxed);
        }
        v => match queue_of_vector(v) {
            Some((func, msix)) => {
                QUEUE_IRQS[func][msix].fetch_add(1, Ordering::Relaxed);
                NAPI_PENDING[func].fetch_or(1 << msix, Ordering::Relaxed);
            }
            None => {
                UNEXPECTED.fetch_add(1, Ordering::Relaxed);
            }
        },
    }
}

/// The periodic tick: the model's clock follows real time (its completion timers fire from
/// here), statistics are latched every [`STATS_LATCH_TICKS`], and the main loop is told that a
/// housekeeping round is due.
fn tick() {
    let n = TICKS.fetch_add(1, Ordering::Relaxed) + 1;
    HOUSEKEEPING_DUE.fetch_add(1, Ordering::Relaxed);
    crate::model::with_card_in_handler(|card| {
        card.advance_time(crate::time::TICK_NS);
        MODEL_TIME_NS.fetch_add(crate::time::TICK_NS, Ordering::Relaxed);
        if LATCH_STATS.load(Ordering::Relaxed) && n.is_multiple_of(STATS_LATCH_TICKS) {
            let shell = card.shell();
            HW_SNAPSHOT.with(|snap| {
                for (port, slot) in snap.iter_mut().enumerate() {
                    *slot = read_hw_counters(&shell, port as u8);
                }
            });
            STATS_LATCHES.fetch_add(1, Ordering::Relaxed);
        }
    });
}

const EXCEPTION_NAMES: [&str; 32] = [
    "divide error",
    "debug",
    "NMI",
    "breakpoint",
    "overflow",
    "bound range exceeded",
    "invalid opcode",
    "device not available",
    "double fault",
    "coprocessor segment overrun",
    "invalid TSS",
    "segment not present",
    "stack-segment fault",
    "general protection fault",
    "page fault",
    "reserved (15)",
    "x87 floating-point error",
    "alignment check",
    "machine check",
    "SIMD floating-point error",
    "virtualization exception",
    "control protection exception",
    "reserved (22)",
    "reserved (23)",
    "reserved (24)",
    "reserved (25)",
    "reserved (26)",
    "reserved (27)",
    "hypervisor injection",
    "VMM communication",
    "security exception",
    "reserved (31)",
];

fn exception(frame: &TrapFrame) -> ! {
    let v = frame.vector();
    let cr2: u64;
    // SAFETY: reading CR2 (the page-fault address) in ring 0 has no side effects.
    unsafe { core::arch::asm!("mov {}, cr2", out(reg) cr2, options(nomem, nostack, preserves_flags)) };
    crate::println!();
    crate::println!(
        "CPU EXCEPTION {:#04x} ({}) error code {:#x} at rip {:#x} rsp {:#x} cr2 {:#x}",
        v,
        EXCEPTION_NAMES[usize::from(v)],
        frame.error_code,
        frame.rip,
        frame.rsp,
        cr2
    );
    if !crate::logger::busy() {
        defmt::error!(
            "CPU exception {=u8:#x} error code {=u64:#x} at rip {=u64:#x}",
            v,
            frame.error_code,
            frame.rip
        );
    }
    crate::exit::exit(crate::exit::ExitCode::CpuException)
}
