//! Kernel error numbers the shim returns to the C glue (negated there, as the kernel expects).

use onic_core::device::settings::EthtoolError;
use onic_embed::port::PortError;

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

/// The errno for a driver-core error: a refused value (configuration, RSS request) is
/// `EINVAL`, a missing port `ENODEV`, anything the device did or did not do `EIO`.
#[must_use]
pub fn from_core(e: &onic_core::Error) -> Errno {
    match e {
        onic_core::Error::Config(_) | onic_core::Error::Rss(_) => EINVAL,
        onic_core::Error::NoCmac { .. } => ENODEV,
        _ => EIO,
    }
}

/// The errno an `ethtool_ops` callback returns for a request the core refused: a value out of
/// range is `EINVAL`, a kind of request the device cannot honour at all `EOPNOTSUPP`.
#[must_use]
pub const fn from_ethtool(e: &EthtoolError) -> Errno {
    match e {
        EthtoolError::ChannelsNotCombined
        | EthtoolError::RingKind
        | EthtoolError::FlowHashFixed { .. }
        | EthtoolError::FecUnsupported { .. } => EOPNOTSUPP,
        _ => EINVAL,
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

/// A port's error as the kernel's error number.
#[must_use]
pub fn from_port(e: &PortError) -> Errno {
    match e {
        PortError::Invalid | PortError::WrongContext => EINVAL,
        PortError::Busy => EBUSY,
        PortError::Down => ENETDOWN,
        PortError::NoMemory => ENOMEM,
        PortError::Core(c) => from_core(c),
        PortError::Setting(s) => from_ethtool(s),
        // The OS's own code, passed through (a positive errno).
        PortError::Host(code) => *code,
        // As other drivers refuse an XSK pool they cannot use (XDP_SETUP_XSK_POOL).
        PortError::Xsk(_) => EINVAL,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethtool_refusals_are_einval_or_eopnotsupp() {
        let fixed = EthtoolError::FlowHashFixed {
            flow_type: 1,
            requested: 0,
        };
        assert_eq!(from_ethtool(&fixed), EOPNOTSUPP);
        assert_eq!(from_ethtool(&EthtoolError::ChannelsNotCombined), EOPNOTSUPP);
        assert_eq!(from_ethtool(&EthtoolError::RingSize { requested: 100 }), EINVAL);
        assert_eq!(from_ethtool(&EthtoolError::FlowType(0x77)), EINVAL);
        let rss = onic_core::Error::Rss(onic_core::rss::RssError::NoQueues);
        assert_eq!(from_core(&rss), EINVAL);
    }
}
