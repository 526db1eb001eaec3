//! Kernel error numbers the shim returns to the C glue (negated there, as the kernel expects).

/// A positive Linux error number.
pub type Errno = i32;

/// I/O error (the device did not complete a command).
pub const EIO: Errno = 5;
/// Out of memory.
pub const ENOMEM: Errno = 12;
/// Resource busy (the interface must be down, or a ring is full).
pub const EBUSY: Errno = 16;
/// No such device (the port is missing).
pub const ENODEV: Errno = 19;
/// Invalid argument.
pub const EINVAL: Errno = 22;
/// Result out of range.
pub const ERANGE: Errno = 34;
/// Operation not supported.
pub const EOPNOTSUPP: Errno = 95;
/// Network is down.
pub const ENETDOWN: Errno = 100;

/// The errno for a driver-core error.
#[must_use]
pub fn from_core(e: &onic_core::Error) -> Errno {
    match e {
        onic_core::Error::Config(_) => EINVAL,
        onic_core::Error::NoCmac { .. } => ENODEV,
        _ => EIO,
    }
}

/// The errno for a DMA error.
#[must_use]
pub const fn from_dma(e: onic_hal::DmaError) -> Errno {
    match e {
        onic_hal::DmaError::InvalidRequest => EINVAL,
        onic_hal::DmaError::OutOfMemory | onic_hal::DmaError::MapFailed => ENOMEM,
    }
}
