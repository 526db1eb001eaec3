//! What a port's calls refuse with.

use core::fmt;

use onic_core::device::settings::EthtoolError;

/// Why a port call did not do what it was asked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum PortError {
    /// A setting or request the port cannot take (a queue count or index out of range, a table
    /// entry that does not fit).
    Invalid,
    /// A token of another port or another context (a bug of the host's entry points).
    WrongContext,
    /// The interface is up and the change needs it down.
    Busy,
    /// The ring the call needs is not running.
    Down,
    /// An allocation failed.
    NoMemory,
    /// The core refused, or the device did not do what it was told.
    Core(onic_core::Error),
    /// The core's checks of a user setting (ethtool's rules) refused it.
    Setting(EthtoolError),
    /// The host's own error code (an errno in the kernel).
    Host(i32),
    /// A queue index cannot run on the AF_XDP socket's UMEM.
    Xsk(XskRefusal),
}

/// Why a queue index cannot switch to UMEM frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum XskRefusal {
    /// The host has no XSK pool bound to the queue index.
    NotBound,
    /// A chunk, after the UMEM's headroom, holds fewer bytes than a receive buffer needs (the
    /// RX headroom and a C2H buffer that holds the largest frame, `config::xsk_room_for`).
    ChunkTooSmall {
        /// Bytes of a chunk after the UMEM's headroom.
        room: u32,
        /// Bytes a receive buffer needs.
        need: u32,
    },
}

impl From<onic_core::Error> for PortError {
    fn from(e: onic_core::Error) -> Self {
        Self::Core(e)
    }
}

impl From<EthtoolError> for PortError {
    fn from(e: EthtoolError) -> Self {
        Self::Setting(e)
    }
}

impl fmt::Display for PortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Invalid => f.write_str("invalid request"),
            Self::WrongContext => f.write_str("token of another context"),
            Self::Busy => f.write_str("interface is up"),
            Self::Down => f.write_str("ring not running"),
            Self::NoMemory => f.write_str("out of memory"),
            Self::Core(e) => write!(f, "{e}"),
            Self::Setting(e) => write!(f, "{e}"),
            Self::Host(code) => write!(f, "host error {code}"),
            Self::Xsk(XskRefusal::NotBound) => f.write_str("no AF_XDP socket bound to the queue"),
            Self::Xsk(XskRefusal::ChunkTooSmall { room, need }) => write!(
                f,
                "UMEM chunk too small: {room} bytes after the headroom, a receive buffer needs {need}"
            ),
        }
    }
}

/// A port call's result.
pub type PortResult<T> = Result<T, PortError>;
