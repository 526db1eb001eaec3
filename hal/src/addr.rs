//! The address by which the device reaches memory: the one type every layout, context and DMA
//! allocator shares.

use core::fmt;

/// An address as the device sees it (an IOVA or bus address, not necessarily physical).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[repr(transparent)]
pub struct DmaAddr(u64);

impl DmaAddr {
    /// Wraps a raw device address.
    #[must_use]
    pub const fn new(addr: u64) -> Self {
        Self(addr)
    }

    /// The raw device address.
    #[must_use]
    pub const fn get(self) -> u64 {
        self.0
    }

    /// Low 32 bits.
    #[must_use]
    pub const fn low32(self) -> u32 {
        self.0 as u32
    }

    /// High 32 bits.
    #[must_use]
    pub const fn high32(self) -> u32 {
        (self.0 >> 32) as u32
    }

    /// `self + offset`, or `None` on overflow.
    #[must_use]
    pub const fn checked_add(self, offset: u64) -> Option<Self> {
        match self.0.checked_add(offset) {
            Some(a) => Some(Self(a)),
            None => None,
        }
    }

    /// Whether a region of `len` bytes starting here lies entirely below 4 GiB.
    #[must_use]
    pub const fn fits_below_4g(self, len: u64) -> bool {
        match self.0.checked_add(len) {
            Some(end) => end <= 1 << 32,
            None => false,
        }
    }

    /// Whether the address is aligned to `align` (a power of two).
    #[must_use]
    pub const fn is_aligned(self, align: u64) -> bool {
        self.0 & (align - 1) == 0
    }
}

impl fmt::Debug for DmaAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DmaAddr({:#x})", self.0)
    }
}

impl fmt::Display for DmaAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0)
    }
}
