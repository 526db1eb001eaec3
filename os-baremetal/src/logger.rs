//! The defmt global logger: rzCOBS frames on COM2, decoded on the host by `defmt-print -e <elf>`.
//!
//! A frame must not be interleaved with another, so `acquire` disables interrupts (remembering
//! whether they were on) and `release` restores them: a handler that logs waits until the
//! current frame is complete. A nested acquire (a log call from a context that interrupted a frame,
//! which the interrupt-off rule rules out, or from a panic inside the logger) is refused loudly on
//! the console instead of corrupting the stream.

use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicBool, Ordering};

use crate::platform::{disable_interrupts, enable_interrupts, interrupts_enabled};
use crate::serial::COM2;

#[defmt::global_logger]
struct Logger;

/// A frame is being written.
static BUSY: AtomicBool = AtomicBool::new(false);
/// Interrupts were enabled when the current frame started.
static RESTORE_INTERRUPTS: AtomicBool = AtomicBool::new(false);

struct EncoderCell(UnsafeCell<defmt::Encoder>);

// SAFETY: the encoder is only touched between `acquire` and `release`, which `BUSY` makes
// exclusive, on the image's only CPU.
unsafe impl Sync for EncoderCell {}

static ENCODER: EncoderCell = EncoderCell(UnsafeCell::new(defmt::Encoder::new()));

fn emit(bytes: &[u8]) {
    COM2.write_bytes(bytes);
}

/// Whether a frame is being written (the panic handler then skips defmt).
#[must_use]
pub fn busy() -> bool {
    BUSY.load(Ordering::Relaxed)
}

// SAFETY: `acquire` makes the logger exclusive (interrupts off on the only CPU, plus the BUSY
// flag against re-entry); `write`/`flush`/`release` run only between it and `release`, as defmt
// guarantees.
unsafe impl defmt::Logger for Logger {
    fn acquire() {
        let enabled = interrupts_enabled();
        disable_interrupts();
        if BUSY.swap(true, Ordering::Acquire) {
            crate::println!("defmt: nested log frame dropped the stream's consistency; stopping");
            crate::exit::exit(crate::exit::ExitCode::Panic);
        }
        RESTORE_INTERRUPTS.store(enabled, Ordering::Relaxed);
        // SAFETY: exclusive access per BUSY (see the impl's safety comment).
        unsafe { (*ENCODER.0.get()).start_frame(emit) };
    }

    unsafe fn flush() {}

    unsafe fn release() {
        // SAFETY: called after `acquire`, so the encoder is ours.
        unsafe { (*ENCODER.0.get()).end_frame(emit) };
        let restore = RESTORE_INTERRUPTS.load(Ordering::Relaxed);
        BUSY.store(false, Ordering::Release);
        if restore {
            enable_interrupts();
        }
    }

    unsafe fn write(bytes: &[u8]) {
        // SAFETY: called between `acquire` and `release`.
        unsafe { (*ENCODER.0.get()).write(bytes, emit) };
    }
}

defmt::timestamp!("{=u64:us}", crate::time::micros_since_boot());
