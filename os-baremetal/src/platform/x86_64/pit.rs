//! The 8254 programmable interval timer: channel 0 as the periodic tick (IRQ 0), channel 2 as a
//! one-shot stopwatch to calibrate the TSC before interrupts are on.

use super::{inb, outb, rdtsc};

/// Input clock of the PIT in Hz.
pub const INPUT_HZ: u64 = 1_193_182;
const CHANNEL0: u16 = 0x40;
const CHANNEL2: u16 = 0x42;
const COMMAND: u16 = 0x43;
/// Port B of the keyboard controller / NMI status: bit 0 gates channel 2, bit 1 drives the
/// speaker, bit 5 reads channel 2's output.
const PORT_B: u16 = 0x61;
/// Channel 0, low byte then high byte, mode 2 (rate generator), binary.
const CH0_RATE_GENERATOR: u8 = 0x34;
/// Channel 2, low byte then high byte, mode 0 (interrupt on terminal count), binary.
const CH2_ONE_SHOT: u8 = 0xB0;

/// Starts channel 0 as a rate generator with `divisor` input clocks per tick.
pub fn start_periodic(divisor: u16) {
    outb(COMMAND, CH0_RATE_GENERATOR);
    outb(CHANNEL0, divisor as u8);
    outb(CHANNEL0, (divisor >> 8) as u8);
}

/// Channel 2 count latch command.
const CH2_LATCH: u8 = 0x80;
/// Samples taken for each end of a window; the tightest is kept.
const SAMPLES: usize = 8;

/// Channel 2's current count (latched, then low and high byte).
fn read_channel2() -> u16 {
    outb(COMMAND, CH2_LATCH);
    let lo = inb(CHANNEL2);
    let hi = inb(CHANNEL2);
    u16::from_le_bytes([lo, hi])
}

/// A PIT count and the TSC around its read: (count, TSC in the middle, TSC cycles the read took).
fn sample() -> (u16, u64, u64) {
    let t1 = rdtsc();
    let count = read_channel2();
    let t2 = rdtsc();
    (count, t1 + (t2 - t1) / 2, t2 - t1)
}

/// The sample with the tightest TSC bracket out of a few.
fn tight_sample() -> (u16, u64, u64) {
    let mut best = sample();
    for _ in 1..SAMPLES {
        let s = sample();
        if s.2 < best.2 {
            best = s;
        }
    }
    best
}

/// One calibration window of `counts` PIT clocks: (TSC cycles, PIT clocks, uncertainty in TSC
/// cycles). Each end is a PIT count read bracketed by two TSC reads, so a host that deschedules
/// the vCPU in the middle of the window does not matter, and one that does so during a read shows
/// up as uncertainty. `None` if channel 2 does not count (within `max_tsc` cycles).
#[must_use]
pub fn measure_tsc(counts: u16, max_tsc: u64) -> Option<(u64, u64, u64)> {
    let b = inb(PORT_B);
    // Speaker off, gate on; channel 2 counts down from 0xFFFF (55 ms).
    outb(PORT_B, (b & !0x02) | 0x01);
    outb(COMMAND, CH2_ONE_SHOT);
    outb(CHANNEL2, 0xFF);
    outb(CHANNEL2, 0xFF);
    let (c0, t0, u0) = tight_sample();
    let result = loop {
        let (c, t, _) = sample();
        if c0.wrapping_sub(c) >= counts && c < c0 {
            let (c1, t1, u1) = tight_sample();
            break Some((t1 - t0, u64::from(c0 - c1), u0 + u1));
        }
        if t - t0 > max_tsc {
            break None;
        }
    };
    outb(PORT_B, b);
    result
}

/// Runs `f` and measures how long it took by PIT channel 2: (PIT clocks, uncertainty in TSC
/// cycles). `f` must take less than 55 ms (the channel's full count); `None` if it did not.
pub fn stopwatch(f: impl FnOnce()) -> Option<(u64, u64)> {
    let b = inb(PORT_B);
    outb(PORT_B, (b & !0x02) | 0x01);
    outb(COMMAND, CH2_ONE_SHOT);
    outb(CHANNEL2, 0xFF);
    outb(CHANNEL2, 0xFF);
    let (c0, _, u0) = tight_sample();
    f();
    let (c1, _, u1) = tight_sample();
    outb(PORT_B, b);
    (c1 < c0).then(|| (u64::from(c0 - c1), u0 + u1))
}
