//! Register maps, named as in the project's hardware reference (`docs/hardware.md`). Every offset
//! is defined once, here, and checked by tests against that page's tables.
//!
//! - [`qdma`]: BAR0, the QDMA IP configuration space (global CSRs, indirect contexts, doorbells).
//! - [`shell`]: BAR2, the shell (system configuration, per-function QDMA subsystem blocks).
//! - [`cmac`]: BAR2, the two CMAC subsystems and their packet adapters.
//!
//! A register is a [`Reg<F>`]: its byte offset in the window plus the type `F` of its contents,
//! either a field layout from [`crate::layout`] or a plain `u32` (counters, masks, table entries).
//! [`RegisterAccess`](crate::window::RegisterAccess) reads and writes through such handles, so a
//! value of one layout cannot be written to a register of another:
//!
//! ```
//! use onic_hal::layout::GlblDscCfg;
//! use onic_hal::regs::qdma;
//! use onic_hal::{RegisterAccess, RegisterWindow};
//!
//! fn configure(bar0: &impl RegisterWindow) {
//!     bar0.write(qdma::GLBL_DSC_CFG, GlblDscCfg::reference());
//! }
//! ```
//!
//! ```compile_fail
//! use onic_hal::layout::GlblDscCfg;
//! use onic_hal::regs::qdma;
//! use onic_hal::{RegisterAccess, RegisterWindow};
//!
//! fn configure(bar0: &impl RegisterWindow) {
//!     // C2H_PFCH_CFG holds a C2hPfchCfg: this does not compile.
//!     bar0.write(qdma::C2H_PFCH_CFG, GlblDscCfg::reference());
//! }
//! ```

use core::fmt;
use core::marker::PhantomData;

pub mod cmac;
pub mod qdma;
pub mod shell;

/// The contents of a 32-bit register: converts from and to the raw word.
///
/// Implemented for `u32` (registers without a field layout) and for every one-word layout of
/// [`crate::layout`]. Both conversions are total: any word decodes.
pub trait RegValue: Copy {
    /// The value a register holding `bits` has.
    fn from_bits(bits: u32) -> Self;
    /// The word written to the register.
    fn bits(self) -> u32;
}

impl RegValue for u32 {
    fn from_bits(bits: u32) -> Self {
        bits
    }
    fn bits(self) -> u32 {
        self
    }
}

/// A 32-bit register of one window: its byte offset and the type `F` of its contents.
///
/// Built only by the register maps of this module; read and written with
/// [`RegisterAccess`](crate::window::RegisterAccess). [`Reg::offset`] gives the raw offset for
/// traces and for the models that decode addresses.
pub struct Reg<F> {
    offset: u32,
    contents: PhantomData<fn() -> F>,
}

impl<F> Reg<F> {
    /// The register at byte `offset`.
    #[must_use]
    pub(crate) const fn at(offset: u32) -> Self {
        Self {
            offset,
            contents: PhantomData,
        }
    }

    /// Byte offset from the start of the window.
    #[must_use]
    pub const fn offset(self) -> u32 {
        self.offset
    }

    /// The register right after this one, of the same contents type: the high word of a 64-bit
    /// counter whose low word this is.
    #[must_use]
    pub const fn next(self) -> Self {
        Self::at(self.offset + 4)
    }
}

impl<F> Clone for Reg<F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F> Copy for Reg<F> {}

impl<F> PartialEq for Reg<F> {
    fn eq(&self, other: &Self) -> bool {
        self.offset == other.offset
    }
}

impl<F> Eq for Reg<F> {}

impl<F> fmt::Debug for Reg<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Reg({:#x})", self.offset)
    }
}

/// A register of a block that the window holds more than once (a CMAC subsystem, a packet
/// adapter): its offset relative to the block and its contents type. It cannot be accessed until
/// [`BlockReg::on`] places it at one block's base.
pub struct BlockReg<F>(Reg<F>);

impl<F> BlockReg<F> {
    /// The register at byte `offset` from the block's base.
    #[must_use]
    pub(crate) const fn at(offset: u32) -> Self {
        Self(Reg::at(offset))
    }

    /// Byte offset from the block's base.
    #[must_use]
    pub const fn offset(self) -> u32 {
        self.0.offset()
    }

    /// The register right after this one in the block (the high word of a 64-bit counter).
    #[must_use]
    pub const fn next(self) -> Self {
        Self(self.0.next())
    }

    /// This register of the block at window offset `base`.
    #[must_use]
    pub const fn on(self, base: u32) -> Reg<F> {
        Reg::at(base + self.0.offset())
    }
}

impl<F> Clone for BlockReg<F> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<F> Copy for BlockReg<F> {}

impl<F> PartialEq for BlockReg<F> {
    fn eq(&self, other: &Self) -> bool {
        self.0 == other.0
    }
}

impl<F> Eq for BlockReg<F> {}

impl<F> fmt::Debug for BlockReg<F> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BlockReg({:#x})", self.0.offset)
    }
}

#[cfg(test)]
mod tests {
    use core::cell::Cell;

    use super::{cmac, qdma, shell, Reg};
    use crate::layout::{C2hPfchCfg, GlblDscCfg, H2cPidxDb};
    use crate::window::{RegisterAccess, RegisterWindow};

    /// A window of one register that remembers the last access's offset.
    #[derive(Default)]
    struct OneRegister {
        value: Cell<u32>,
        last_offset: Cell<u32>,
    }

    // SAFETY: test window over plain cells; it never reaches a device.
    unsafe impl RegisterWindow for OneRegister {
        fn read32(&self, offset: u32) -> u32 {
            self.last_offset.set(offset);
            self.value.get()
        }
        fn write32(&self, offset: u32, value: u32) {
            self.last_offset.set(offset);
            self.value.set(value);
        }
    }

    #[test]
    fn handles_carry_the_documented_offsets() {
        // hardware.md §3.2, §5.1, §6, §2.3, §10.1.
        assert_eq!(qdma::GLBL_DSC_CFG.offset(), 0x250);
        assert_eq!(qdma::C2H_PFCH_CFG.offset(), 0xB08);
        assert_eq!(qdma::IND_CTXT_CMD.offset(), 0x844);
        assert_eq!(qdma::ind_ctxt_data(7).offset(), 0x820);
        assert_eq!(qdma::dmap_sel_cmpt_cidx(crate::QueueId::new(5)).offset(), 0x1805C);
        assert_eq!(shell::qconf(crate::FunctionId::new(1).unwrap()).offset(), 0x2000);
        assert_eq!(cmac::CORE_VERSION.on(cmac::cmac_base(1)).offset(), 0xC024);
        assert_eq!(cmac::CMAC_STATS[0].high().offset(), 0x504);
    }

    #[test]
    fn typed_access_reaches_the_handle_offset_with_the_layout_bits() {
        let w = OneRegister::default();
        w.write(qdma::GLBL_DSC_CFG, GlblDscCfg::reference());
        assert_eq!((w.last_offset.get(), w.value.get()), (0x250, 0x30));
        assert_eq!(w.read(qdma::GLBL_DSC_CFG).max_dsc_fetch(), 6);

        w.write(
            qdma::dmap_sel_h2c_dsc_pidx(crate::QueueId::new(3)),
            H2cPidxDb::new(7, false),
        );
        assert_eq!((w.last_offset.get(), w.value.get()), (0x18034, 7));

        w.modify(qdma::C2H_PFCH_CFG, |mut r: C2hPfchCfg| {
            r.set_fl_th(0x1FF);
            r
        });
        assert_eq!((w.last_offset.get(), w.value.get()), (0xB08, 0x1FF));

        let plain: Reg<u32> = shell::SHELL_STATUS;
        w.modify(plain, |v| v | 0x200);
        assert_eq!((w.last_offset.get(), w.value.get()), (0x010, 0x3FF));
    }
}
