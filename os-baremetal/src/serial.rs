//! 16550 UARTs: COM1 carries the text console, COM2 the binary defmt stream.

use crate::platform::{inb, outb};

/// A 16550-compatible UART at an I/O base.
#[derive(Clone, Copy, Debug)]
pub struct Uart {
    base: u16,
}

/// The console port (QEMU's first `-serial`).
pub const COM1: Uart = Uart { base: 0x3F8 };
/// The defmt port (QEMU's second `-serial`).
pub const COM2: Uart = Uart { base: 0x2F8 };

// Register offsets from the base.
const DATA: u16 = 0;
const INTERRUPT_ENABLE: u16 = 1;
const FIFO_CONTROL: u16 = 2;
const LINE_CONTROL: u16 = 3;
const MODEM_CONTROL: u16 = 4;
const LINE_STATUS: u16 = 5;
/// LINE_CONTROL: divisor latch access.
const DLAB: u8 = 0x80;
/// LINE_CONTROL: 8 data bits, no parity, 1 stop bit.
const EIGHT_N_ONE: u8 = 0x03;
/// FIFO_CONTROL: enable and clear both FIFOs, 14-byte trigger.
const FIFO_ON: u8 = 0xC7;
/// MODEM_CONTROL: DTR and RTS.
const DTR_RTS: u8 = 0x03;
/// LINE_STATUS: the transmit holding register is empty.
const THR_EMPTY: u8 = 0x20;

impl Uart {
    /// 115200 baud (divisor 1), 8N1, FIFOs on, no UART interrupts.
    pub fn init(self) {
        outb(self.base + INTERRUPT_ENABLE, 0);
        outb(self.base + LINE_CONTROL, DLAB);
        outb(self.base + DATA, 1);
        outb(self.base + INTERRUPT_ENABLE, 0);
        outb(self.base + LINE_CONTROL, EIGHT_N_ONE);
        outb(self.base + FIFO_CONTROL, FIFO_ON);
        outb(self.base + MODEM_CONTROL, DTR_RTS);
    }

    /// Sends one byte, waiting for room in the transmitter.
    pub fn write_byte(self, byte: u8) {
        while inb(self.base + LINE_STATUS) & THR_EMPTY == 0 {
            core::hint::spin_loop();
        }
        outb(self.base + DATA, byte);
    }

    /// Sends bytes as they are.
    pub fn write_bytes(self, bytes: &[u8]) {
        for &b in bytes {
            self.write_byte(b);
        }
    }
}
