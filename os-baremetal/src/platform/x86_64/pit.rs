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

/// Counts TSC cycles while channel 2 counts `count` input clocks down, polling its output.
/// Returns `None` if the output never rises within `max_tsc` cycles (no channel 2 gate).
#[must_use]
pub fn measure_tsc(count: u16, max_tsc: u64) -> Option<u64> {
    let b = inb(PORT_B);
    // Gate low and speaker off while programming; mode 0 drops the output at once.
    outb(PORT_B, b & !0x03);
    outb(COMMAND, CH2_ONE_SHOT);
    outb(CHANNEL2, count as u8);
    outb(CHANNEL2, (count >> 8) as u8);
    // Gate high: counting starts.
    outb(PORT_B, (b & !0x02) | 0x01);
    let start = rdtsc();
    let result = loop {
        let now = rdtsc();
        if inb(PORT_B) & 0x20 != 0 {
            break Some(now - start);
        }
        if now - start > max_tsc {
            break None;
        }
    };
    outb(PORT_B, b);
    result
}
