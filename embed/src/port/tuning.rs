//! The queue settings a host may choose for a port before its queues start: the RX buffer and
//! completion entry sizes, the shell's largest frame, the RX queues' checks of a device that
//! stalls or lies, and the stall limit of the stack's TX ring. The kernel module keeps the
//! defaults; a test rig over the model changes them to reach the paths they guard.

use onic_core::config::{BufSizeIdx, RingSizeIdx, RxQueueConfig};
use onic_core::queue::rx::{RxOptions, DEFAULT_MAX_FRAME_LEN, RX_STALL_POLLS_DEFAULT};
use onic_core::QueueId;
use onic_hal::layout::desc::CmptEntrySize;

/// Settings every queue of a port is built with ([`super::Port::set_tuning`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueTuning {
    /// C2H buffer size of the RX queues.
    pub buf: BufSizeIdx,
    /// Completion entry size of the RX queues.
    pub cmpt_entry: CmptEntrySize,
    /// Largest frame the shell passes (its build parameter, hardware.md §14): longer
    /// completions are bad lengths.
    pub max_frame_len: u32,
    /// Whether RX queues compare the device's C2H consumer index with theirs
    /// ([`RxOptions::check_c2h_status`]).
    pub check_c2h_status: bool,
    /// Polls without progress before an RX queue gives up ([`RxOptions::stall_polls`]).
    pub stall_polls: u16,
    /// Reclaims of the stack's stopped TX ring without progress before it enters its error
    /// state; 0 (the default): never, the OS's watchdog watches that ring (`ndo_tx_timeout`).
    pub stack_stall_reclaims: u32,
}

impl Default for QueueTuning {
    fn default() -> Self {
        Self {
            buf: RxQueueConfig::new(QueueId::new(0)).buf,
            cmpt_entry: CmptEntrySize::B8,
            max_frame_len: DEFAULT_MAX_FRAME_LEN,
            check_c2h_status: true,
            stall_polls: RX_STALL_POLLS_DEFAULT,
            stack_stall_reclaims: 0,
        }
    }
}

impl QueueTuning {
    /// The configuration of RX queue `q` with descriptor and completion rings of `ring`.
    pub(crate) fn rx_config(&self, q: u16, ring: RingSizeIdx) -> RxQueueConfig {
        RxQueueConfig {
            buf: self.buf,
            desc_ring: ring,
            cmpt_ring: ring,
            cmpt_entry: self.cmpt_entry,
            ..RxQueueConfig::new(QueueId::new(q))
        }
    }

    /// How an RX queue of configuration `rx` treats what it receives.
    pub(crate) fn rx_options(&self, rx: &RxQueueConfig) -> RxOptions {
        RxOptions {
            max_frame_len: self.max_frame_len,
            check_c2h_status: self.check_c2h_status,
            stall_polls: self.stall_polls,
            ..RxOptions::for_queue(rx)
        }
    }
}
