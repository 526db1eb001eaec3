//! Register windows: the driver's only path to device registers.
//!
//! An OpenNIC function exposes two memory BARs that the driver uses: BAR0 holds the QDMA IP's
//! configuration space (global CSRs, indirect context registers, queue doorbells) and BAR2 is an
//! AXI-Lite window into the shell (system configuration, per-function QDMA subsystem blocks, CMACs,
//! packet adapters). Each is reached through one [`RegisterWindow`]; the driver accesses the
//! registers of [`crate::regs`] through [`RegisterAccess`], which every window has.

use crate::regs::{Reg, RegValue};

/// Which PCI BAR a window maps. The numbers are the BAR indices, used in register traces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum Bar {
    /// BAR0: the QDMA IP configuration space.
    Qdma = 0,
    /// BAR2: the shell's register space.
    Shell = 2,
}

impl Bar {
    /// The PCI BAR index.
    #[must_use]
    pub const fn index(self) -> u8 {
        self as u8
    }
}

/// What a read of an unimplemented shell address returns (hardware.md §2.1).
pub const UNMAPPED_READ: u32 = 0xDEAD_BEEF;

/// A window of 32-bit little-endian registers addressed by byte offset from the start of one BAR.
///
/// Methods take `&self`: a window is a handle to device state, not to Rust memory, and the OS
/// shims hold one per device without global state.
///
/// # Implementation safety
///
/// The driver core relies on these promises for memory safety (a register write can make the
/// device read or write DMA memory):
///
/// - every call performs exactly one 32-bit access at `offset`, in program order with respect to
///   the other calls on the same window, and is never merged, split, elided or repeated;
/// - an access whose `offset` is not 4-byte aligned or lies outside the window does not reach
///   anything: a read returns [`UNMAPPED_READ`] and a write is dropped;
/// - `write32` orders all earlier writes to DMA memory made by this CPU before the register write
///   becomes visible to the device, and `read32` orders the register read before this CPU's later
///   reads of DMA memory, as Linux's `writel` and `readl` do (for real MMIO, the instructions of
///   [`crate::barrier`]).
pub unsafe trait RegisterWindow {
    /// Reads the 32-bit register at byte `offset`.
    fn read32(&self, offset: u32) -> u32;
    /// Writes `value` to the 32-bit register at byte `offset`.
    fn write32(&self, offset: u32, value: u32);
    /// Makes sure the device reaches no memory any more, where the window's OS can: `true` when
    /// it has left the bus (a PCI function whose configuration space no longer answers) or when
    /// its access to memory is now switched off (a PCI function's bus mastering cleared, the
    /// transactions it already issued flushed; the OS enables it again when the function is
    /// brought up). Called when the device did not complete a queue's invalidation
    /// ([`crate::context::invalidate_queue`]): a device that ignores context commands might
    /// still write into the queue's pages. The default, for windows that can do neither, is
    /// `false`.
    ///
    /// Implementation safety: `true` only when the device can reach no memory any more; the
    /// driver then releases queue memory whose invalidation the device did not complete.
    fn cut_off(&self) -> bool {
        false
    }
}

// SAFETY: forwards every call unchanged to `T`, which upholds the contract.
unsafe impl<T: RegisterWindow + ?Sized> RegisterWindow for &T {
    fn read32(&self, offset: u32) -> u32 {
        (**self).read32(offset)
    }
    fn write32(&self, offset: u32, value: u32) {
        (**self).write32(offset, value);
    }
    fn cut_off(&self) -> bool {
        (**self).cut_off()
    }
}

/// Typed access to the registers of [`crate::regs`]: every [`RegisterWindow`] has it.
///
/// `read` and `write` take a [`Reg<F>`] and a value of its contents type `F`, so a layout can only
/// be written to the register it describes. Each call is exactly one `read32` or `write32`.
pub trait RegisterAccess: RegisterWindow {
    /// Reads `reg`.
    fn read<F: RegValue>(&self, reg: Reg<F>) -> F {
        F::from_bits(self.read32(reg.offset()))
    }

    /// Writes `value` to `reg`.
    fn write<F: RegValue>(&self, reg: Reg<F>, value: F) {
        self.write32(reg.offset(), value.bits());
    }

    /// Reads `reg`, then writes back what `change` makes of the value read.
    fn modify<F: RegValue>(&self, reg: Reg<F>, change: impl FnOnce(F) -> F) {
        let value = self.read(reg);
        self.write(reg, change(value));
    }
}

impl<W: RegisterWindow + ?Sized> RegisterAccess for W {}
