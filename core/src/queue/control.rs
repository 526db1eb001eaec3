//! [`QueueControl`]: what a queue asks of the function it belongs to when it starts, stops or
//! restarts: its hardware contexts programmed or invalidated (hardware.md §5.8).

use onic_hal::{AbsQueueId, DelayNs, DmaAddr, QueueId, Quiesced};

use crate::config::{RxQueueConfig, TxQueueConfig};
use crate::error::Result;

/// Programs and invalidates the QDMA contexts of one function's queues: the one service the RX
/// and TX queues need from [`crate::Device`], which implements it. The queues take it as a
/// generic parameter, so a call is resolved at compile time.
///
/// Context: process context of the queue's owner; every method may wait on context commands
/// (through `delay`).
pub trait QueueControl {
    /// The absolute queue id (the card's queue numbering, hardware.md §4) by which the device knows
    /// the function's queue `qid`: what a [`Quiesced`] proof for the queue names. `None` for a
    /// queue the function does not have.
    fn device_queue(&self, qid: QueueId) -> Option<AbsQueueId>;

    /// Programs an RX queue's contexts (hardware.md §5.8: SW C2H, HW, credit, prefetch, CMPT), then
    /// hands `c2h_pidx` descriptors to the device (indices run `0..usable` and wrap, so at most
    /// `usable - 1` can be outstanding) and arms the completion interrupt with CMPT
    /// CIDX = 0 (hardware.md §13.2). On failure the queue's teardown list runs.
    ///
    /// # Errors
    ///
    /// [`crate::ConfigError`] for a queue, vector, ring address or initial index the function
    /// cannot use (nothing written); [`crate::Error::ContextBusy`].
    fn init_rx_queue<D: DelayNs>(
        &self,
        delay: &mut D,
        q: &RxQueueConfig,
        desc_ring: DmaAddr,
        cmpt_ring: DmaAddr,
        c2h_pidx: u16,
    ) -> Result<()>;

    /// Invalidates an RX queue's contexts: SW C2H, HW, credit, prefetch, CMPT (hardware.md §5.8).
    /// The [`Quiesced`] proof it returns names the queue and is what lets its rings and pages go
    /// back to their owners.
    ///
    /// # Errors
    ///
    /// As [`QueueControl::teardown_tx_queue`].
    fn teardown_rx_queue<D: DelayNs>(&self, delay: &mut D, qid: QueueId) -> Result<Quiesced>;

    /// Programs a TX (H2C) queue's contexts (hardware.md §5.8): SW clear, SW write, HW clear,
    /// credit clear. On failure the queue's teardown list runs.
    ///
    /// # Errors
    ///
    /// [`crate::ConfigError`] for a queue, vector or ring the function cannot use (nothing
    /// written); [`crate::Error::ContextBusy`].
    fn init_tx_queue<D: DelayNs>(&self, delay: &mut D, q: &TxQueueConfig, ring: DmaAddr) -> Result<()>;

    /// Invalidates a TX queue's contexts: SW, HW, credit (hardware.md §5.8). The [`Quiesced`]
    /// proof it returns names the queue and is what lets its ring and buffers go back to their
    /// owners.
    ///
    /// # Errors
    ///
    /// [`crate::ConfigError::QueueIndex`]; [`crate::Error::ContextBusy`] (no command is written
    /// after the one in progress, and the device may still use the queue; unless the register
    /// window cut it off from memory, `onic_hal::RegisterWindow::cut_off`, which gives the proof).
    fn teardown_tx_queue<D: DelayNs>(&self, delay: &mut D, qid: QueueId) -> Result<Quiesced>;
}
