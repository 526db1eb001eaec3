//! Errors of the driver core.

use core::fmt;

use onic_hal::{FunctionId, QueueId};

/// A configuration value that the hardware or the buffer layout cannot accept. Returned before any
/// register is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ConfigError {
    /// The PCI function number is not one the shell serves (0..=3).
    FunctionOutOfRange {
        /// The function asked for.
        func: u8,
    },
    /// The queue count is zero or above what the function may own.
    QueueCount {
        /// Queues asked for.
        requested: u16,
        /// The function's maximum.
        max: u16,
    },
    /// A queue index is not below the function's queue count.
    QueueIndex {
        /// The index given.
        qid: QueueId,
        /// Queues the function has.
        queues: u16,
    },
    /// A ring-size index outside the 16-entry GLBL_RNG_SZ table.
    RingSizeIndex {
        /// The index given.
        index: u8,
    },
    /// A C2H buffer-size index outside the 16-entry C2H_BUF_SZ table.
    BufferSizeIndex {
        /// The index given.
        index: u8,
    },
    /// The C2H buffer selected does not fit in a page after the XDP headroom and the tailroom.
    BufferTooLarge {
        /// Bytes the device would write per descriptor.
        buffer: u32,
        /// Bytes available in the page.
        room: u32,
    },
    /// The completion entry size is not 8, 16, 32 or 64 bytes.
    CmptEntrySize {
        /// The size given.
        bytes: u16,
    },
    /// An MSI-X vector number the context field cannot hold or the function does not have.
    Vector {
        /// The vector given.
        vector: u16,
        /// Vectors available.
        available: u16,
    },
    /// A ring's DMA address is not 4 KiB aligned (the completion context keeps no low 12 address
    /// bits, hardware.md §5.6). Rings are allocated below 4 GiB by the queues themselves; this
    /// check does not look at that.
    RingAddress {
        /// The address given.
        addr: u64,
    },
    /// A ring whose bytes (status slot included) do not all have a device address: its end wraps
    /// past 2^64, the QDMA's 64-bit address space (the device's DMA mask). Where the rings are
    /// allocated (below 4 GiB, [`onic_hal::AddrLimit`]) is the allocator's policy, not checked here.
    RingRange {
        /// The ring's address.
        addr: u64,
        /// The ring's length in bytes.
        bytes: u64,
    },
    /// A producer index that is not below the ring's usable entries (indices wrap modulo the
    /// usable count, so `usable - 1` is the largest).
    RingIndex {
        /// The index given.
        index: u16,
        /// Usable entries.
        usable: u16,
    },
    /// The completion ring is smaller than the C2H descriptor ring: the device could be handed
    /// more descriptors than the completion ring can report (one completion per frame).
    CmptRingTooSmall {
        /// Usable completion-ring entries.
        cmpt: u16,
        /// Usable descriptor-ring entries.
        desc: u16,
    },
    /// The bookkeeping storage given to a queue has fewer slots than the ring has entries.
    SlotStorage {
        /// Slots needed (usable ring entries).
        needed: u16,
        /// Slots given.
        given: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::FunctionOutOfRange { func } => write!(f, "PCI function {func} is not served by the shell (0..=3)"),
            Self::QueueCount { requested, max } => {
                write!(f, "queue count {requested} is outside 1..={max}")
            }
            Self::QueueIndex { qid, queues } => write!(f, "queue {qid} is not below the queue count {queues}"),
            Self::RingSizeIndex { index } => write!(f, "ring-size index {index} is outside the table (0..=15)"),
            Self::BufferSizeIndex { index } => {
                write!(f, "buffer-size index {index} is outside the table (0..=15)")
            }
            Self::BufferTooLarge { buffer, room } => write!(
                f,
                "C2H buffer of {buffer} bytes does not fit the {room} bytes left in a page after headroom and tailroom"
            ),
            Self::CmptEntrySize { bytes } => {
                write!(f, "completion entry size {bytes} is not 8, 16, 32 or 64 bytes")
            }
            Self::Vector { vector, available } => {
                write!(f, "MSI-X vector {vector} is not below the {available} vectors available")
            }
            Self::RingAddress { addr } => {
                write!(f, "ring address {addr:#x} is not aligned to 4 KiB")
            }
            Self::RingRange { addr, bytes } => write!(
                f,
                "ring at {addr:#x} of {bytes} bytes ends past 2^64 (the address range wraps; the device addresses 64 bits)"
            ),
            Self::RingIndex { index, usable } => {
                write!(f, "ring index {index} is not below the ring's {usable} usable entries")
            }
            Self::CmptRingTooSmall { cmpt, desc } => write!(
                f,
                "completion ring of {cmpt} usable entries is smaller than the descriptor ring's {desc}"
            ),
            Self::SlotStorage { needed, given } => {
                write!(f, "queue needs {needed} bookkeeping slots, {given} given")
            }
        }
    }
}

impl core::error::Error for ConfigError {}

/// A queue found the device's view of a ring inconsistent with its own, or the device stopped
/// making progress while claiming work, and stopped using the ring. The queue touches nothing
/// more (no descriptor, no buffer, no doorbell) until it is restarted ([`crate::RxQueue::restart`],
/// [`crate::TxQueue::restart`], [`crate::QueuePair::restart`]) or torn down; both return every
/// page and buffer it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum QueueError {
    /// The completion status record names a producer index outside the completion ring.
    CmptPidxOutOfRange {
        /// The index the device wrote.
        pidx: u16,
        /// Usable entries of the ring.
        usable: u16,
    },
    /// A completion claims more C2H descriptors than the driver had handed to the device.
    C2hOverrun {
        /// Descriptors the completion needs.
        needed: u16,
        /// Descriptors posted.
        posted: u16,
    },
    /// The completion status record reported entries up to `pidx`, but the entry at `cidx`
    /// never got the expected color (a device whose color does not flip) in `polls` polls.
    CmptNotVisible {
        /// The entry waited for.
        cidx: u16,
        /// The producer index the status record reported.
        pidx: u16,
        /// Polls in a row that found it so.
        polls: u16,
    },
    /// The entry at `cidx` carries the expected color, but the completion status record never
    /// reported it in `polls` polls (a status record that does not move).
    CmptUnreported {
        /// The entry.
        cidx: u16,
        /// Polls in a row that found it so.
        polls: u16,
    },
    /// With every reported completion consumed, the device's C2H consumer index (its
    /// descriptor-ring status record) stayed at `device` while the completions accounted for
    /// descriptors up to `driver`, for `polls` polls: the RX ring is out of step (a completion
    /// length that does not match the descriptors the frame used, or a device dropping for lack
    /// of descriptors while the driver has many posted).
    C2hOutOfStep {
        /// The device's consumer index.
        device: u16,
        /// The driver's (the oldest posted descriptor).
        driver: u16,
        /// Polls in a row that found it so.
        polls: u16,
    },
    /// The TX queue was stopped with `in_flight` descriptors on the ring and the H2C status
    /// record's consumer index stayed at `cidx` for `reclaims` reclaims (a stalled writeback).
    H2cStalled {
        /// The consumer index the device reports.
        cidx: u16,
        /// Descriptors in flight.
        in_flight: u16,
        /// Reclaims in a row that found no progress.
        reclaims: u32,
    },
    /// A restart could not invalidate or program the queue's contexts; restart again or tear
    /// the queue down.
    Restart,
    /// The H2C status record names a consumer index that is not between the driver's
    /// next-to-clean index and the producer index it published (the device cannot have consumed
    /// a descriptor it was never told about).
    H2cCidx {
        /// The index the device wrote.
        cidx: u16,
        /// Next descriptor to clean.
        clean: u16,
        /// The producer index last written to the doorbell.
        published: u16,
    },
}

impl fmt::Display for QueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::CmptPidxOutOfRange { pidx, usable } => write!(
                f,
                "completion status pidx {pidx} is outside the ring of {usable} entries"
            ),
            Self::C2hOverrun { needed, posted } => write!(
                f,
                "a completion needs {needed} C2H descriptors, only {posted} were posted"
            ),
            Self::CmptNotVisible { cidx, pidx, polls } => write!(
                f,
                "completion entry {cidx} never got the expected color although the status record reports entries up to {pidx} ({polls} polls)"
            ),
            Self::CmptUnreported { cidx, polls } => write!(
                f,
                "completion entry {cidx} is new but the status record never reported it ({polls} polls)"
            ),
            Self::C2hOutOfStep { device, driver, polls } => write!(
                f,
                "RX ring out of step: the device's C2H consumer index is {device}, the completions account for descriptors up to {driver} ({polls} polls)"
            ),
            Self::H2cStalled {
                cidx,
                in_flight,
                reclaims,
            } => write!(
                f,
                "H2C writeback stalled at cidx {cidx} with {in_flight} descriptors in flight and the queue stopped ({reclaims} reclaims)"
            ),
            Self::Restart => write!(f, "the queue's contexts could not be reprogrammed by a restart"),
            Self::H2cCidx {
                cidx,
                clean,
                published,
            } => write!(
                f,
                "H2C status cidx {cidx} is not between next-to-clean {clean} and the published producer index {published}"
            ),
        }
    }
}

impl core::error::Error for QueueError {}

/// What went wrong in the driver core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum Error {
    /// Bad configuration; nothing was written.
    Config(ConfigError),
    /// An indirect context command stayed busy past the poll limit.
    ContextBusy {
        /// The command word written to IND_CTXT_CMD.
        command: u32,
    },
    /// A CMAC subsystem reset did not report done within the bound.
    CmacResetTimeout {
        /// The CMAC port.
        port: u8,
    },
    /// The function's own CMAC port was not detected (CORE_VERSION mismatch).
    NoCmac {
        /// The PCI function.
        func: FunctionId,
        /// The port it needs.
        port: u8,
        /// CMACs found.
        found: u8,
    },
    /// DMA memory could not be had.
    Dma(onic_hal::DmaError),
    /// An RSS request (ethtool `-X`) was refused; nothing changed.
    Rss(crate::rss::RssError),
    /// A queue is in its error state.
    Queue(QueueError),
}

impl From<ConfigError> for Error {
    fn from(e: ConfigError) -> Self {
        Self::Config(e)
    }
}

impl From<QueueError> for Error {
    fn from(e: QueueError) -> Self {
        Self::Queue(e)
    }
}

impl From<onic_hal::context::ContextBusy> for Error {
    fn from(e: onic_hal::context::ContextBusy) -> Self {
        Self::ContextBusy { command: e.command }
    }
}

impl From<onic_hal::DmaError> for Error {
    fn from(e: onic_hal::DmaError) -> Self {
        Self::Dma(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Config(e) => write!(f, "invalid configuration: {e}"),
            Self::ContextBusy { command } => {
                write!(f, "indirect context command {command:#010x} still busy after the poll limit")
            }
            Self::CmacResetTimeout { port } => write!(f, "CMAC {port} did not leave reset in time"),
            Self::NoCmac { func, port, found } => write!(
                f,
                "PCI function {func} needs CMAC {port}, but the shell reports {found} CMAC(s) with version 0x301"
            ),
            Self::Dma(e) => write!(f, "DMA: {e}"),
            Self::Rss(e) => write!(f, "RSS: {e}"),
            Self::Queue(e) => write!(f, "queue error: {e}"),
        }
    }
}

impl core::error::Error for Error {}

/// Result of the driver core.
pub type Result<T, E = Error> = core::result::Result<T, E>;
