//! In-memory layouts and register-field layouts, bit for bit as in the hardware spec.
//!
//! - [`desc`]: H2C and C2H descriptors, completion entries and status (writeback) records
//!   (hardware.md §7).
//! - [`ctxt`]: the indirect queue contexts and the IND_CTXT_CMD word (hardware.md §4.2, §5).
//! - [`doorbell`]: the per-queue doorbell registers (hardware.md §6).
//! - [`csr`]: fields of the global QDMA registers the driver computes (hardware.md §3.2, §3.3,
//!   §11.3).
//!
//! Every type is a plain value (`Copy`, no references into device memory): the ring code reads a
//! word from DMA memory or a register, decodes it here, and encodes values here before writing them.
//! Fields are declared with the `bitfield` crate; a getter carries the field's name as the spec spells
//! it and the setter is `set_<field>`. Setters keep only the low bits that fit the field, so no setter
//! or getter panics, whatever the input; in particular decoding words written by the device is total.
//! Fields whose codes are not all defined (for example a trigger mode) decode to
//! `Result<_, UnknownCode>`.
//!
//! `Debug` prints the raw storage (`.0`) and then every field; use `{:x?}` to see them in hex.

use core::fmt;

pub mod csr;
pub mod ctxt;
pub mod desc;
pub mod doorbell;

pub use csr::{C2hPfchCfg, C2hWbCoalCfg, GlblDscCfg, GlblErrInt, H2cReqThrot};
pub use ctxt::{
    CmptCtxt, CreditCtxt, CtxtOp, CtxtSel, FmapCtxt, HwCtxt, IndCtxtCmd, IntrCtxt, PfchCtxt, SwCtxt,
};
pub use desc::{C2hDesc, CmptEntry, CmptEntrySize, DescSize, H2cDesc, WbStatus};
pub use doorbell::{C2hPidxDb, CmptCidxDb, H2cPidxDb, TrigMode};

/// A hardware code that the spec does not define for the field it was read from (or that was
/// passed to a `TryFrom<u8>` conversion). Carries the raw value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct UnknownCode(pub u8);

impl fmt::Display for UnknownCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "undefined hardware code {}", self.0)
    }
}

impl core::error::Error for UnknownCode {}

/// Declares a fieldless enum of hardware codes with `code()`, `TryFrom<u8>` (unknown codes are an
/// [`UnknownCode`] error, never a panic) and `From<Self> for u8`. The first variant is the default,
/// so it must be the one with code 0: an all-zero register then decodes to the default.
macro_rules! code_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $(#[$first_meta:meta])* $first:ident = $first_code:literal,
            $($(#[$vmeta:meta])* $variant:ident = $code:literal,)*
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
        #[cfg_attr(feature = "defmt", derive(defmt::Format))]
        #[repr(u8)]
        pub enum $name {
            $(#[$first_meta])*
            #[default]
            $first = $first_code,
            $($(#[$vmeta])* $variant = $code,)*
        }

        impl $name {
            /// The code as the hardware stores it.
            #[must_use]
            pub const fn code(self) -> u8 {
                self as u8
            }
        }

        impl TryFrom<u8> for $name {
            type Error = $crate::layout::UnknownCode;

            fn try_from(code: u8) -> Result<Self, Self::Error> {
                match code {
                    $first_code => Ok(Self::$first),
                    $($code => Ok(Self::$variant),)*
                    _ => Err($crate::layout::UnknownCode(code)),
                }
            }
        }

        impl From<$name> for u8 {
            fn from(value: $name) -> u8 {
                value.code()
            }
        }
    };
}
pub(crate) use code_enum;

/// Declares the conversions of a register type whose storage is one `u32`: `from_bits`, `bits`,
/// the two `From` impls and [`RegValue`](crate::regs::RegValue).
macro_rules! register_u32 {
    ($name:ident) => {
        impl $name {
            /// The register value with exactly these bits.
            #[must_use]
            pub const fn from_bits(bits: u32) -> Self {
                Self(bits)
            }

            /// The 32-bit register value.
            #[must_use]
            pub const fn bits(self) -> u32 {
                self.0
            }
        }

        impl From<u32> for $name {
            fn from(bits: u32) -> Self {
                Self(bits)
            }
        }

        impl $crate::regs::RegValue for $name {
            fn from_bits(bits: u32) -> Self {
                Self(bits)
            }
            fn bits(self) -> u32 {
                self.0
            }
        }

        impl From<$name> for u32 {
            fn from(value: $name) -> u32 {
                value.0
            }
        }
    };
}
pub(crate) use register_u32;

/// Bit access across an array of 32-bit words, for layouts longer than one machine word.
///
/// Bits are numbered across the whole array: bit `32 * i + b` is bit `b` of word `i`, which is how
/// the spec's "Wi \[h:l\]" notation maps onto one range. A field that the spec splits over two words
/// (for example the prefetch context's `sw_crdt`, W0\[31:29\] then W1\[12:0\]) is one contiguous
/// range in this numbering. Bits outside the array read as 0 and are dropped on write, so no access
/// panics; the layouts never declare such bits anyway.
pub(crate) mod words {
    const WORD_BITS: usize = 32;

    fn low_mask(bits: usize) -> u32 {
        if bits >= WORD_BITS {
            u32::MAX
        } else {
            (1u32 << bits) - 1
        }
    }

    /// Reads bits `msb..=lsb` (at most the low 64 of them are returned).
    pub(crate) fn read(words: &[u32], msb: usize, lsb: usize) -> u64 {
        let mut value = 0u64;
        let mut pos = lsb;
        while pos <= msb {
            let shift = pos % WORD_BITS;
            let take = (WORD_BITS - shift).min(msb - pos + 1);
            let word = words.get(pos / WORD_BITS).copied().unwrap_or(0);
            let chunk = (word >> shift) & low_mask(take);
            let at = pos - lsb;
            if at < 64 {
                value |= u64::from(chunk) << at;
            }
            pos += take;
        }
        value
    }

    /// Writes the low bits of `value` into bits `msb..=lsb`, leaving every other bit unchanged.
    pub(crate) fn write(words: &mut [u32], msb: usize, lsb: usize, value: u64) {
        let mut pos = lsb;
        while pos <= msb {
            let shift = pos % WORD_BITS;
            let take = (WORD_BITS - shift).min(msb - pos + 1);
            let at = pos - lsb;
            let chunk = if at < 64 { (value >> at) as u32 } else { 0 };
            let mask = low_mask(take) << shift;
            if let Some(word) = words.get_mut(pos / WORD_BITS) {
                *word = (*word & !mask) | ((chunk << shift) & mask);
            }
            pos += take;
        }
    }

    /// Implements `bitfield`'s `BitRange` / `BitRangeMut` for a tuple struct over `[u32; N]`, with
    /// the array-wide bit numbering above. Values wider than the requested type are truncated.
    macro_rules! word_array_bitrange {
        ($name:ident) => {
            $crate::layout::words::word_array_bitrange!(@one $name, u8, u16, u32, u64);
        };
        (@one $name:ident, $($t:ty),+) => {
            $(
                impl ::bitfield::BitRange<$t> for $name {
                    fn bit_range(&self, msb: usize, lsb: usize) -> $t {
                        $crate::layout::words::read(&self.0, msb, lsb) as $t
                    }
                }

                impl ::bitfield::BitRangeMut<$t> for $name {
                    fn set_bit_range(&mut self, msb: usize, lsb: usize, value: $t) {
                        $crate::layout::words::write(&mut self.0, msb, lsb, u64::from(value));
                    }
                }
            )+
        };
    }
    pub(crate) use word_array_bitrange;

    #[cfg(test)]
    mod tests {
        use super::{read, write};

        #[test]
        fn reads_and_writes_across_word_boundaries() {
            let mut w = [0u32; 3];
            write(&mut w, 44, 29, 0xFFFF);
            assert_eq!(w, [0xE000_0000, 0x0000_1FFF, 0]);
            assert_eq!(read(&w, 44, 29), 0xFFFF);
            write(&mut w, 44, 29, 0x0009); // sw_crdt = 9: low three bits 001, upper bits 1
            assert_eq!(w, [0x2000_0000, 0x0000_0001, 0]);
            assert_eq!(read(&w, 44, 29), 9);

            let mut w = [0u32; 4];
            write(&mut w, 127, 64, 0x0123_4567_89AB_CDEF);
            assert_eq!(w, [0, 0, 0x89AB_CDEF, 0x0123_4567]);
            assert_eq!(read(&w, 127, 64), 0x0123_4567_89AB_CDEF);
        }

        #[test]
        fn write_keeps_neighbours_and_truncates() {
            let mut w = [u32::MAX; 2];
            write(&mut w, 35, 28, 0);
            assert_eq!(w, [0x0FFF_FFFF, 0xFFFF_FFF0]);
            write(&mut w, 35, 28, 0x1FF); // 9 bits into an 8-bit field: the top bit is dropped
            assert_eq!(w, [u32::MAX, u32::MAX]);
        }

        #[test]
        fn bits_outside_the_array_are_inert() {
            let mut w = [0u32; 1];
            write(&mut w, 40, 30, u64::MAX);
            assert_eq!(w, [0xC000_0000]);
            assert_eq!(read(&w, 40, 30), 0b11);
            assert_eq!(read(&w, 200, 100), 0);
            assert_eq!(read(&w, 3, 4), 0); // inverted range: empty
        }
    }
}
