//! The two legacy 8259 interrupt controllers: remapped above the CPU exceptions, everything masked
//! except the lines the image uses.

use super::{inb, io_wait, outb};

const MASTER_CMD: u16 = 0x20;
const MASTER_DATA: u16 = 0x21;
const SLAVE_CMD: u16 = 0xA0;
const SLAVE_DATA: u16 = 0xA1;
/// ICW1: edge triggered, cascade, ICW4 follows.
const ICW1_INIT_ICW4: u8 = 0x11;
/// ICW4: 8086 mode.
const ICW4_8086: u8 = 0x01;
/// Non-specific end of interrupt.
const EOI: u8 = 0x20;
/// OCW3: the next read of the command port returns the in-service register.
const READ_ISR: u8 = 0x0B;

/// Vector of IRQ 0 (the master's first line).
pub const MASTER_BASE: u8 = 0x20;
/// Vector of IRQ 8 (the slave's first line).
pub const SLAVE_BASE: u8 = 0x28;

/// Remaps IRQ 0-7 to [`MASTER_BASE`].., IRQ 8-15 to [`SLAVE_BASE`].. and masks every line except
/// those set in `enabled` (bit n = IRQ n). Call with interrupts disabled.
pub fn init(enabled: u16) {
    outb(MASTER_CMD, ICW1_INIT_ICW4);
    io_wait();
    outb(SLAVE_CMD, ICW1_INIT_ICW4);
    io_wait();
    outb(MASTER_DATA, MASTER_BASE);
    io_wait();
    outb(SLAVE_DATA, SLAVE_BASE);
    io_wait();
    outb(MASTER_DATA, 1 << 2); // the slave hangs off IRQ 2
    io_wait();
    outb(SLAVE_DATA, 2); // its cascade identity
    io_wait();
    outb(MASTER_DATA, ICW4_8086);
    io_wait();
    outb(SLAVE_DATA, ICW4_8086);
    io_wait();
    let cascade = if enabled & 0xFF00 != 0 { 1 << 2 } else { 0 };
    outb(MASTER_DATA, !((enabled as u8) | cascade));
    outb(SLAVE_DATA, !((enabled >> 8) as u8));
}

/// Masks every line (before handing the machine back, or when the image stops).
pub fn mask_all() {
    outb(MASTER_DATA, 0xFF);
    outb(SLAVE_DATA, 0xFF);
}

/// Acknowledges IRQ `irq`.
pub fn end_of_interrupt(irq: u8) {
    if irq >= 8 {
        outb(SLAVE_CMD, EOI);
    }
    outb(MASTER_CMD, EOI);
}

/// Whether IRQ 7 (or 15, with `slave`) is really in service; a spurious one is not and must not
/// be acknowledged on its own controller.
#[must_use]
pub fn line7_in_service(slave: bool) -> bool {
    let cmd = if slave { SLAVE_CMD } else { MASTER_CMD };
    outb(cmd, READ_ISR);
    inb(cmd) & 0x80 != 0
}
