//! Time: the TSC calibrated against the PIT, a busy-wait delay for the driver core, and the
//! periodic tick.

use core::sync::atomic::{AtomicU64, Ordering};

use onic_hal::DelayNs;

use crate::platform::{pit, rdtsc};

/// Timer interrupts per second.
pub const TICK_HZ: u64 = 1000;
/// PIT input clocks per tick.
pub const TICK_DIVISOR: u16 = ((pit::INPUT_HZ + TICK_HZ / 2) / TICK_HZ) as u16;
/// Length of one tick in nanoseconds (999 847 ns: the divisor is rounded).
pub const TICK_NS: u64 = TICK_DIVISOR as u64 * 1_000_000_000 / pit::INPUT_HZ;

/// PIT clocks of one calibration window (10 ms).
const CALIBRATION_COUNT: u16 = 11_932;
/// Calibration windows; the median is kept.
pub const CALIBRATION_ROUNDS: usize = 3;
/// Give up on channel 2 after this many TSC cycles (about 1 s at 10 GHz).
const CALIBRATION_GIVE_UP: u64 = 10_000_000_000;
/// TSC frequency assumed when calibration fails, so delays still end.
const FALLBACK_HZ: u64 = 1_000_000_000;

/// TSC at boot.
static BOOT_TSC: AtomicU64 = AtomicU64::new(0);
/// TSC frequency in Hz (0 until calibrated).
static TSC_HZ: AtomicU64 = AtomicU64::new(0);
/// Nanoseconds per TSC cycle as a 32.32 fixed-point number.
static NS_PER_CYCLE_Q32: AtomicU64 = AtomicU64::new(0);

/// Remembers the TSC at boot.
pub fn mark_boot() {
    BOOT_TSC.store(rdtsc(), Ordering::Relaxed);
}

/// How the TSC was calibrated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Calibration {
    /// TSC frequency in Hz.
    pub tsc_hz: u64,
    /// The frequency each window measured (Hz), `None` where channel 2 did not answer.
    pub windows: [Option<u64>; CALIBRATION_ROUNDS],
    /// The largest uncertainty of a window, in parts per million.
    pub worst_ppm: u64,
}

/// Measures the TSC frequency against PIT channel 2 (interrupts may be on or off).
pub fn calibrate() -> Calibration {
    let mut windows = [None; CALIBRATION_ROUNDS];
    let mut worst_ppm = 0;
    for w in &mut windows {
        *w = pit::measure_tsc(CALIBRATION_COUNT, CALIBRATION_GIVE_UP).and_then(
            |(cycles, clocks, uncertainty)| {
                worst_ppm = worst_ppm.max(uncertainty * 1_000_000 / cycles.max(1));
                (clocks > 0).then(|| cycles * pit::INPUT_HZ / clocks)
            },
        );
    }
    let mut sorted = windows;
    sorted.sort_unstable();
    let tsc_hz = match sorted[CALIBRATION_ROUNDS / 2] {
        Some(hz) if hz > 0 => hz,
        _ => FALLBACK_HZ,
    };
    TSC_HZ.store(tsc_hz, Ordering::Relaxed);
    NS_PER_CYCLE_Q32.store((1_000_000_000u64 << 32) / tsc_hz, Ordering::Relaxed);
    Calibration {
        tsc_hz,
        windows,
        worst_ppm,
    }
}

/// TSC cycles to nanoseconds (0 before calibration).
#[must_use]
pub fn cycles_to_ns(cycles: u64) -> u64 {
    let q = NS_PER_CYCLE_Q32.load(Ordering::Relaxed);
    ((u128::from(cycles) * u128::from(q)) >> 32) as u64
}

/// Nanoseconds to TSC cycles (rounded up; 0 before calibration).
#[must_use]
pub fn ns_to_cycles(ns: u64) -> u64 {
    let hz = TSC_HZ.load(Ordering::Relaxed);
    (u128::from(ns) * u128::from(hz)).div_ceil(1_000_000_000) as u64
}

/// Nanoseconds since boot, by the TSC.
#[must_use]
pub fn nanos_since_boot() -> u64 {
    cycles_to_ns(rdtsc().wrapping_sub(BOOT_TSC.load(Ordering::Relaxed)))
}

/// Microseconds since boot (the defmt timestamp).
#[must_use]
pub fn micros_since_boot() -> u64 {
    nanos_since_boot() / 1000
}

/// A busy-wait delay on the calibrated TSC: what the driver core waits with (context command
/// polls, CMAC reset polls). Works with interrupts on or off.
#[derive(Clone, Copy, Debug, Default)]
pub struct TscDelay;

impl DelayNs for TscDelay {
    fn delay_ns(&mut self, ns: u32) {
        let cycles = ns_to_cycles(u64::from(ns));
        let start = rdtsc();
        while rdtsc().wrapping_sub(start) < cycles {
            core::hint::spin_loop();
        }
    }
}
