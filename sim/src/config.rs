//! Configuration of a model card, the things it reports (violations, interrupts, statistics) and
//! the fault knobs.

use alloc::collections::VecDeque;
use core::fmt;

use onic_hal::{AbsQueueId, Bar, DmaAddr};

/// What is connected to the two CMAC ports.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Wire {
    /// A cable between port 0 and port 1: a frame sent on one port arrives at the other (and is
    /// also captured as egress of the sending port).
    #[default]
    Cable,
    /// A loopback plug on every port: a frame sent on a port comes back into the same port.
    Loopback,
    /// Nothing connected: sent frames only go to the egress capture.
    Open,
}

/// How the shell's SHELL_RESET/SHELL_STATUS handshake behaves (hardware.md §2.2), so a driver's
/// bounded wait can be tested.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ResetBehavior {
    /// The reset is done before the next read of SHELL_STATUS.
    #[default]
    Immediate,
    /// The block reads "in reset" for this many SHELL_STATUS reads, then "done".
    AfterReads(u32),
    /// The reset never completes (a stuck block).
    Never,
}

/// DMA memory model settings.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct DmaConfig {
    /// Maximum number of live packet pages (`None` = unlimited).
    pub page_budget: Option<usize>,
    /// Bytes of device address space available for coherent regions below 4 GiB (the model hands
    /// them out from 0x1000_0000 up and never reuses an address).
    pub below_4g_bytes: u64,
    /// Byte written over every fresh packet page (`None` = zeroed pages), so a driver that reads a
    /// page the device never wrote sees an obvious pattern.
    pub page_poison: Option<u8>,
    /// Report a ring (descriptor or completion) whose base the driver programs at or above 4 GiB:
    /// the reference platform gives the QDMA a 32-bit coherent mask (hardware.md §1.4).
    pub rings_below_4g: bool,
}

impl Default for DmaConfig {
    fn default() -> Self {
        Self {
            page_budget: None,
            below_4g_bytes: 0xF000_0000 - 0x1000_0000,
            page_poison: Some(0x5A),
            rings_below_4g: true,
        }
    }
}

/// Configuration of a model card. Start from [`CardConfig::default`] (the stock 2-function,
/// 2-port shell with a cable between the ports) and change fields.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CardConfig {
    /// PCI functions (1..=4). PF *i* owns CMAC port *i*.
    pub functions: u8,
    /// CMAC ports present (1..=2). CORE_VERSION reads 0x301 for present ports only.
    pub ports: u8,
    /// What is plugged into the ports.
    pub wire: Wire,
    /// Largest FMAP qmax / QCONF numq a function may use (the netdev's 64).
    pub max_queues_per_function: u16,
    /// Queues of the QDMA instance (the shell's NUM_QUEUE, 512 by default; abs qids are 11 bits).
    pub total_queues: u16,
    /// Value read from C2H_PFCH_CACHE_DEPTH (hardware.md §3.2).
    pub pfch_cache_depth: u32,
    /// Value read from C2H_CMPL_COAL_BUF_DEPTH (hardware.md §3.2).
    pub cmpl_coal_buf_depth: u32,
    /// Largest frame the shell passes, without FCS (hardware.md §14: 1514 by default).
    pub max_frame_len: usize,
    /// DMA memory model settings.
    pub dma: DmaConfig,
    /// Seed of the model's random numbers (fault rates only).
    pub seed: u64,
    /// Panic on the first violation instead of recording it (for tests that want a backtrace).
    pub strict: bool,
    /// SHELL_RESET completion behaviour.
    pub shell_reset: ResetBehavior,
    /// Most H2C descriptors one queue consumes per [`crate::Card::step`].
    pub h2c_batch: u32,
    /// Keep a copy of every frame that leaves a port for [`crate::Card::take_egress`].
    pub capture_egress: bool,
}

impl Default for CardConfig {
    fn default() -> Self {
        Self {
            functions: 2,
            ports: 2,
            wire: Wire::Cable,
            max_queues_per_function: 64,
            total_queues: 512,
            pfch_cache_depth: 16,
            cmpl_coal_buf_depth: 32,
            max_frame_len: 1514,
            dma: DmaConfig::default(),
            seed: 0x0123_4567_89AB_CDEF,
            strict: false,
            shell_reset: ResetBehavior::Immediate,
            h2c_batch: 64,
            capture_egress: true,
        }
    }
}

/// A queue interrupt raised by the model: MSI-X `vector` of PCI function `func`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Interrupt {
    /// PCI function whose MSI-X table is used.
    pub func: u8,
    /// Vector index in that table.
    pub vector: u16,
}

/// Which device-side memory access went wrong.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeviceAccess {
    /// H2C descriptor fetch.
    H2cDescFetch,
    /// H2C packet data read.
    H2cDataRead,
    /// H2C ring status (writeback) record write.
    H2cStatusWrite,
    /// C2H descriptor fetch.
    C2hDescFetch,
    /// C2H packet data write.
    C2hDataWrite,
    /// C2H descriptor ring status record write.
    C2hStatusWrite,
    /// Completion entry write.
    CmptEntryWrite,
    /// Completion ring status record write.
    CmptStatusWrite,
    /// A write made through the [`crate::Faults::device_write`] knob (a device writing whatever
    /// it likes).
    FaultWrite,
}

impl DeviceAccess {
    /// Whether the access writes memory.
    #[must_use]
    pub const fn is_write(self) -> bool {
        !matches!(self, Self::H2cDescFetch | Self::H2cDataRead | Self::C2hDescFetch)
    }
}

/// Why a device-side memory access was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessProblem {
    /// No live region or mapping covers the first byte and it never did.
    Unmapped,
    /// The address belonged to a region or page mapping that has been freed or unmapped.
    Freed,
    /// The access starts inside a live region or mapping but runs past its end.
    OutOfRange,
    /// The device wrote a page mapped `ToDevice`, or read one mapped `FromDevice`.
    WrongDirection,
    /// The host bus refused the access (a card behind a [`crate::DeviceBus`]: an IOMMU that
    /// has no mapping for the address, or no memory behind it).
    BusFault,
    /// The requesting function's bus mastering is off, so its access never left the card (a
    /// card behind a [`crate::DeviceBus`]). Not a driver mistake: a driver switches it off on
    /// purpose to keep a device that ignores its commands away from memory. A host that counts
    /// driver mistakes counts these apart.
    MasterOff,
}

/// A CPU-side misuse of the DMA API.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HostDmaProblem {
    /// `free_coherent` with a region this model did not hand out (or already freed).
    UnknownRegion,
    /// `free_page` / `map_page` with a page this model did not hand out (or already freed).
    UnknownPage,
    /// `free_page` of a page that is still mapped.
    FreeWhileMapped,
    /// `map_page` of a page that is already mapped.
    DoubleMap,
    /// `unmap_page` / sync of a page that is not mapped at the address the token carries, or
    /// `unmap_foreign` / `sync_foreign` of an address that does not start a live foreign mapping.
    NotMapped,
    /// `unmap_page` / `unmap_foreign` with a different direction than the mapping.
    DirectionMismatch,
    /// A sync whose range runs past the page (or past a foreign mapping).
    SyncOutOfRange,
    /// A sync whose direction does not match the mapping's.
    SyncDirection,
    /// `unmap_foreign` with a different length than the mapping.
    LengthMismatch,
}

/// Something a driver did that the hardware would not accept, or that the model cannot carry out.
/// The model records it (or panics in strict mode) and does not perform the offending action.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Violation {
    /// The device was told to access memory it may not touch.
    DeviceAccess {
        /// What the device was doing.
        access: DeviceAccess,
        /// First byte.
        addr: DmaAddr,
        /// Length in bytes.
        len: usize,
        /// Why it was refused.
        problem: AccessProblem,
    },
    /// The driver misused the DMA API.
    HostDma {
        /// What went wrong.
        problem: HostDmaProblem,
        /// Device address involved (0 when none).
        addr: DmaAddr,
    },
    /// A register write the hardware would not accept (reserved bits, bad selector, doorbell out
    /// of range, unmapped address...).
    Register {
        /// Which BAR.
        bar: Bar,
        /// Offset written.
        offset: u32,
        /// Value written.
        value: u32,
        /// Explanation.
        reason: &'static str,
    },
    /// A queue is configured or used in a way the model refuses (abs qid, explanation).
    Queue {
        /// Absolute queue id.
        qid: AbsQueueId,
        /// Explanation.
        reason: &'static str,
    },
    /// An H2C descriptor whose metadata\[15:0\] differs from its length (hardware.md §7.1, §14).
    MetadataMismatch {
        /// Absolute queue id.
        qid: AbsQueueId,
        /// Descriptor index.
        index: u16,
        /// Metadata word.
        metadata: u32,
        /// Length field.
        len: u16,
    },
    /// An H2C packet whose abs qid no function's QCONF claims: the shell's H2C stream stalls and
    /// all TX stops until QCONF is fixed (hardware.md §2.3, §14).
    H2cStalled {
        /// Absolute queue id of the blocked packet.
        qid: AbsQueueId,
    },
    /// A completion arrived for a completion ring the driver had not freed room in: every entry
    /// up to the CIDX it last wrote is still unread. With the overflow check on (CMPT context
    /// `ovf_chk_dis` = 0, hardware.md §5.6) the QDMA flags the queue's completion context in error
    /// and stops the queue; the frame is lost.
    CmptOverflow {
        /// Absolute queue id.
        qid: AbsQueueId,
        /// The completion producer index.
        pidx: u16,
        /// The consumer index the driver last wrote.
        cidx: u16,
    },
    /// An RSS indirection entry is not below the function's QCONF numq (hardware.md §14), for a
    /// function that has queues (numq > 0).
    IndirectionOutOfRange {
        /// PCI function.
        func: u8,
        /// Entry index (hash & 0x7F).
        entry: u8,
        /// Entry value.
        value: u16,
        /// QCONF numq.
        numq: u16,
    },
    /// A frame arriving at function `func`'s port was steered (its indirection entry + its
    /// QCONF qbase, hardware.md §9) into a queue that another function's QCONF claims: that
    /// function receives the other port's traffic. It happens when a function's QCONF is cleared
    /// to 0 while its port still receives (qbase 0 then points at function 0's queues).
    SteeredAcross {
        /// The function whose port received the frame.
        func: u8,
        /// The absolute queue the frame was steered into.
        qid: AbsQueueId,
        /// The function whose QCONF range holds that queue.
        owner: u8,
    },
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DeviceAccess {
                access,
                addr,
                len,
                problem,
            } => write!(f, "device {access:?} of {len} bytes at {addr}: {problem:?}"),
            Self::HostDma { problem, addr } => write!(f, "DMA API misuse at {addr}: {problem:?}"),
            Self::Register {
                bar,
                offset,
                value,
                reason,
            } => write!(
                f,
                "BAR{} write {offset:#x} = {value:#010x}: {reason}",
                bar.index()
            ),
            Self::Queue { qid, reason } => write!(f, "queue {qid}: {reason}"),
            Self::MetadataMismatch {
                qid,
                index,
                metadata,
                len,
            } => write!(
                f,
                "queue {qid} descriptor {index}: metadata {metadata:#x} does not equal length {len}"
            ),
            Self::H2cStalled { qid } => write!(f, "H2C stalled: no function's QCONF claims abs qid {qid}"),
            Self::CmptOverflow { qid, pidx, cidx } => write!(
                f,
                "queue {qid}: completion ring overflow (pidx {pidx}, driver's cidx {cidx}); queue in error"
            ),
            Self::IndirectionOutOfRange {
                func,
                entry,
                value,
                numq,
            } => write!(
                f,
                "function {func} indirection entry {entry} = {value} is not below numq {numq}"
            ),
            Self::SteeredAcross { func, qid, owner } => write!(
                f,
                "a frame of function {func}'s port was steered into queue {qid} of function {owner}"
            ),
        }
    }
}

/// How the next completions are corrupted (fault knob).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Corruption {
    /// Set the error bit (bit 2).
    ErrBit,
    /// Report a length of 0.
    LengthZero,
    /// Report a length larger than the bytes posted for the packet.
    LengthTooLarge,
}

/// Counters the model keeps about itself (not hardware registers).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SimStats {
    /// Frames injected with [`crate::Card::inject`].
    pub injected: u64,
    /// Frames put on a wire with [`crate::Card::emit`].
    pub emitted: u64,
    /// Frames lost on the wire by the drop fault knob.
    pub wire_dropped: u64,
    /// Frames that arrived at a port whose link is down.
    pub link_down_dropped: u64,
    /// Frames that arrived at a CMAC that is not RX-enabled.
    pub rx_disabled_dropped: u64,
    /// Frames not sent because the CMAC is not TX-enabled.
    pub tx_disabled_dropped: u64,
    /// RX frames dropped because the target queue's contexts are not valid.
    pub c2h_no_queue_dropped: u64,
    /// RX frames dropped for lack of C2H descriptors.
    pub c2h_no_desc_dropped: u64,
    /// RX frames dropped because the completion ring was full (each also a
    /// [`Violation::CmptOverflow`] unless the overflow check is off).
    pub cmpt_full_dropped: u64,
    /// Completion entries written.
    pub completions: u64,
    /// H2C descriptors consumed.
    pub h2c_descriptors: u64,
    /// Frames handed to a CMAC for transmission.
    pub tx_frames: u64,
}

/// DMA memory bookkeeping, to check that a driver frees what it allocates.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct DmaStats {
    /// Coherent regions currently allocated.
    pub live_regions: usize,
    /// Packet pages currently allocated (mapped or not).
    pub live_pages: usize,
    /// Packet pages currently mapped.
    pub mapped_pages: usize,
    /// Foreign mappings (host memory the model did not allocate) currently live.
    pub live_foreign: usize,
    /// Coherent regions allocated so far.
    pub regions_allocated: u64,
    /// Packet pages allocated so far.
    pub pages_allocated: u64,
    /// Foreign mappings made so far.
    pub foreign_mapped: u64,
    /// Page allocations refused (budget or fault knob).
    pub page_alloc_failures: u64,
    /// `sync_for_cpu` calls.
    pub syncs_for_cpu: u64,
    /// `sync_for_device` calls.
    pub syncs_for_device: u64,
}

/// The fault knobs, set through [`crate::Card::faults`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FaultState {
    pub drop_next: u32,
    pub drop_rate_ppm: u32,
    pub bad_fcs_next: u32,
    /// Frames still to arrive with a correctable RS-FEC codeword error, then with an
    /// uncorrectable one.
    pub fec_correctable_next: u32,
    pub fec_uncorrectable_next: u32,
    pub corrupt_next: u32,
    pub corruption: Option<Corruption>,
    pub stall_h2c_wb: bool,
    pub cmpt_pidx_jump: bool,
    pub fail_page_allocs: u32,
    /// Lengths the next completion entries report instead of the frame's (oldest first).
    pub len_override: VecDeque<u16>,
    /// Completion rings keep their color when their producer index wraps.
    pub freeze_color: bool,
    /// Completion status records are not written.
    pub freeze_cmpt_status: bool,
    /// The context engine is wedged: IND_CTXT_CMD reads busy and commands are not carried out.
    pub hold_ctxt_cmds: bool,
}

/// A small deterministic xorshift64* generator for fault rates.
#[derive(Clone, Debug)]
pub(crate) struct XorShift(u64);

impl XorShift {
    pub(crate) fn new(seed: u64) -> Self {
        Self(if seed == 0 { 0x9E37_79B9_7F4A_7C15 } else { seed })
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// True with probability `ppm` / 1 000 000.
    pub(crate) fn chance_ppm(&mut self, ppm: u32) -> bool {
        ppm > 0 && (self.next_u64() % 1_000_000) < u64::from(ppm)
    }
}
