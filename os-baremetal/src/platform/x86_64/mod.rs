//! The x86_64 side of the image: boot code, port I/O, the CPU's interrupt flag, the TSC, the
//! interrupt descriptor table, the legacy PIC and the PIT.

pub mod boot;
pub mod idt;
pub mod pic;
pub mod pit;

use core::arch::asm;

/// Writes a byte to an I/O port.
pub fn outb(port: u16, value: u8) {
    // SAFETY: port I/O has no memory effects; the ports this image writes (UARTs, PIC, PIT,
    // isa-debug-exit) belong to devices it owns, and a write to an absent device is ignored.
    unsafe { asm!("out dx, al", in("dx") port, in("al") value, options(nomem, nostack, preserves_flags)) };
}

/// Reads a byte from an I/O port.
#[must_use]
pub fn inb(port: u16) -> u8 {
    let value: u8;
    // SAFETY: as for `outb`; reading the ports used here has no side effect beyond the device's
    // own state (e.g. a UART's line status).
    unsafe { asm!("in al, dx", out("al") value, in("dx") port, options(nomem, nostack, preserves_flags)) };
    value
}

/// Writes a 32-bit word to an I/O port.
pub fn outl(port: u16, value: u32) {
    // SAFETY: as for `outb`. The other 32-bit ports written are PCI configuration address and
    // data (0xCF8, 0xCFC, `crate::pci`): a configuration write moves no memory either; the one
    // that lets a device master the bus is made only for the OpenNIC card, which then reaches
    // only the DMA memory its driver hands it (see `crate::pci::Function::enable`).
    unsafe { asm!("out dx, eax", in("dx") port, in("eax") value, options(nomem, nostack, preserves_flags)) };
}

/// Reads a 32-bit word from an I/O port.
#[must_use]
pub fn inl(port: u16) -> u32 {
    let value: u32;
    // SAFETY: as for `inb`; the only 32-bit port read is PCI configuration data (0xCFC), whose
    // read has no effect beyond returning the register the address port selected.
    unsafe { asm!("in eax, dx", out("eax") value, in("dx") port, options(nomem, nostack, preserves_flags)) };
    value
}

/// A short pause for the slow legacy devices (a write to the unused POST port 0x80).
pub fn io_wait() {
    outb(0x80, 0);
}

/// The time stamp counter.
#[must_use]
pub fn rdtsc() -> u64 {
    let (lo, hi): (u32, u32);
    // SAFETY: RDTSC only reads the counter (CR4.TSD is clear: nothing here sets it).
    unsafe { asm!("rdtsc", out("eax") lo, out("edx") hi, options(nomem, nostack, preserves_flags)) };
    u64::from(hi) << 32 | u64::from(lo)
}

/// RFLAGS.IF: whether maskable interrupts are enabled.
#[must_use]
pub fn interrupts_enabled() -> bool {
    let flags: u64;
    // SAFETY: pushes RFLAGS and pops it into a register: touches only the stack slot it uses.
    unsafe { asm!("pushfq", "pop {}", out(reg) flags, options(nomem, preserves_flags)) };
    flags & (1 << 9) != 0
}

/// Enables maskable interrupts.
pub fn enable_interrupts() {
    // SAFETY: the IDT is loaded before any caller enables interrupts (see `main`), so every vector
    // that can arrive has a handler. Not `nomem`: handlers may change memory the compiler must
    // reload afterwards.
    unsafe { asm!("sti", options(nostack)) };
}

/// Disables maskable interrupts.
pub fn disable_interrupts() {
    // SAFETY: clearing IF only delays interrupts; it is a compiler barrier (no `nomem`) so memory
    // accesses are not moved out of the critical section it starts.
    unsafe { asm!("cli", options(nostack)) };
}

/// Runs `f` with maskable interrupts disabled, restoring the previous state afterwards. This is
/// the image's only lock: there is one CPU, and the interrupt handlers never run while it holds.
pub fn without_interrupts<R>(f: impl FnOnce() -> R) -> R {
    let was_enabled = interrupts_enabled();
    if was_enabled {
        disable_interrupts();
    }
    let r = f();
    if was_enabled {
        enable_interrupts();
    }
    r
}

/// Enables interrupts and halts until the next one, atomically: `sti` takes effect after the
/// following instruction, so an interrupt that became pending while they were disabled wakes the
/// `hlt` instead of being taken just before it. Call with interrupts disabled, after checking
/// that there is nothing to do.
pub fn enable_interrupts_and_halt() {
    // SAFETY: as for `enable_interrupts`; `hlt` in ring 0 just waits for an interrupt.
    unsafe { asm!("sti", "hlt", options(nostack)) };
}

/// Stops the CPU for good (interrupts off, halt in a loop).
pub fn halt_forever() -> ! {
    loop {
        // SAFETY: halting with interrupts disabled only stops this CPU; NMIs return to the loop.
        unsafe { asm!("cli", "hlt", options(nomem, nostack)) };
    }
}
