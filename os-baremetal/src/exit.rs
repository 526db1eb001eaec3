//! Ending a run: QEMU's isa-debug-exit device at I/O port 0xF4.
//!
//! Writing `v` there makes QEMU exit with status `(v << 1) | 1`, so status 0 is impossible and the
//! image defines its own convention (also in README.md):
//!
//! | code written | QEMU status | meaning |
//! |---|---|---|
//! | 0x10 | 33 | every self-test check passed |
//! | 0x11 | 35 | at least one check failed |
//! | 0x12 | 37 | panic |
//! | 0x13 | 39 | unexpected CPU exception |
//! | 0x14 | 41 | no long mode (written by the 32-bit boot code) |
//!
//! Only 33 is a pass. Any other status, a QEMU status of 0 (triple fault with `-no-reboot`), or a
//! timeout is a failure.

use crate::platform::{halt_forever, outl, pic};

/// The isa-debug-exit port (`-device isa-debug-exit,iobase=0xf4,iosize=0x04`).
const DEBUG_EXIT_PORT: u16 = 0xF4;

/// What the image reports to QEMU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum ExitCode {
    /// All checks passed (QEMU status 33).
    Pass = 0x10,
    /// A check failed (QEMU status 35).
    ChecksFailed = 0x11,
    /// A panic (QEMU status 37).
    Panic = 0x12,
    /// An unexpected CPU exception (QEMU status 39).
    CpuException = 0x13,
}

impl ExitCode {
    /// The exit status QEMU will report.
    #[must_use]
    pub const fn qemu_status(self) -> u32 {
        (self as u32) << 1 | 1
    }
}

/// Ends the run with `code`. Without the isa-debug-exit device the CPU halts instead.
pub fn exit(code: ExitCode) -> ! {
    crate::platform::disable_interrupts();
    pic::mask_all();
    outl(DEBUG_EXIT_PORT, code as u32);
    crate::println!("onic-baremetal: no isa-debug-exit device at 0xf4; halting");
    halt_forever()
}
