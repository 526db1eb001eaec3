//! The results of a port's datapath and layout calls, laid out for C (`#[repr(C)]`): a host
//! whose glue is written in C (the kernel module) passes them across as they are. The kernel
//! module's header generator reads this file together with `os-linux/src/abi.rs`, and that
//! file's layout table pins each of these structs for the C compiler.

/// What a transmit did, for the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum XmitResult {
    /// Queued (no doorbell yet: the host flushes at the end of the batch); the packet is the
    /// ring's until its completion.
    Ok = 0,
    /// Ring full: stop the queue (Linux: NETDEV_TX_BUSY) (the packet is still the caller's).
    Busy = 1,
    /// Not queued (bad length, mapping failed, queue down): the caller frees and counts it.
    Dropped = 2,
    /// Queued and published, and the ring is now full: stop the queue until a reclaim frees
    /// slots.
    OkStop = 3,
}

/// What a reclaim of the stack's TX ring did, for BQL and the queue state.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct TxClean {
    /// Bytes of the packets completed (as posted: what BQL was told at transmit).
    pub bytes: u64,
    /// Packets completed.
    pub packets: u32,
    /// Packets still on the ring (a reclaim must follow within bounded time).
    pub in_flight: u32,
    /// Descriptors free now.
    pub free: u32,
    /// Free descriptors at which a stopped queue may be woken (the core's
    /// [`onic_core::queue::tx::TxThresholds::for_ring`]).
    pub wake_at: u32,
    /// The ring is in its error state (a device index it cannot trust, or stalled): the queue
    /// needs [`Port::restart_queue`](super::Port::restart_queue).
    pub error: bool,
}

/// What one NAPI poll did, for the host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PollResult {
    /// Frames consumed (NAPI work done).
    pub done: u32,
    /// Poll again without waiting for the interrupt (more completions are known).
    pub more: bool,
    /// Frames were redirected: the host flushes them (Linux: `xdp_do_flush`).
    pub redirected: bool,
    /// XDP_TX frames are still on the ring: their reclaim needs a later poll.
    pub tx_pending: bool,
    /// The RX or XDP_TX ring is in its error state: the poll asks for nothing more and the
    /// queue needs [`Port::restart_queue`](super::Port::restart_queue).
    pub error: bool,
    /// The queue's interrupt moderation is adaptive: the host samples this poll (Linux:
    /// `net_dim`) and moves the queue with [`Port::set_rx_level`](super::Port::set_rx_level).
    pub adaptive: bool,
    /// The queue's adaptive level (0 when `adaptive` is false).
    pub level: u8,
    /// The queue's frames received so far (its `rx{q}_packets`), for the adaptive sample.
    pub rx_packets: u64,
    /// Their bytes (`rx{q}_bytes`).
    pub rx_bytes: u64,
}

/// A TX ring's state, for a TX timeout report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct TxState {
    /// Oldest descriptor whose packet the driver holds.
    pub next_to_clean: u16,
    /// The producer index.
    pub next_to_use: u16,
    /// The consumer index the device last wrote back.
    pub device_cidx: u16,
    /// Packets on the ring.
    pub in_flight: u16,
    /// Descriptors free.
    pub free: u16,
    /// The ring is running.
    pub running: bool,
    /// The ring stopped on an inconsistent device index.
    pub error: bool,
}

/// Current and maximum queue pairs and ring sizes (usable entries), for ethtool -l / -g.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortLayout {
    /// Queue pairs the function may use.
    pub max_queues: u32,
    /// Queue pairs in use.
    pub queues: u32,
    /// TX ring entries usable.
    pub tx_ring: u32,
    /// RX ring entries usable.
    pub rx_ring: u32,
    /// Largest ring the QDMA's table offers (usable entries).
    pub max_ring: u32,
}
