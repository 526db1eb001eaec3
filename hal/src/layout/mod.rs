//! In-memory layouts and register-field layouts, bit for bit as in the hardware spec.
//!
//! - [`desc`]: H2C and C2H descriptors, completion entries and status (writeback) records (spec §7).
//! - [`ctxt`]: the indirect queue contexts and the IND_CTXT_CMD word (spec §4.2, §5).
//! - [`doorbell`]: the per-queue doorbell registers (spec §6).
//! - [`csr`]: fields of the global QDMA registers the driver computes (spec §3.2, §3.3, §11.3).
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

pub mod desc;
pub mod doorbell;

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

/// Declares the conversions of a register type whose storage is one `u32`: `from_bits`, `bits` and
/// the two `From` impls.
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

        impl From<$name> for u32 {
            fn from(value: $name) -> u32 {
                value.0
            }
        }
    };
}
pub(crate) use register_u32;
