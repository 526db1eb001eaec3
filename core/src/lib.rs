//! # onic-core
//!
//! The OpenNIC driver core: `#![no_std]`, no allocation, no `unsafe`. It talks to the hardware only
//! through the traits of `onic-hal`.
//!
//! # Layout
//!
//! Each module imports only those below it:
//!
//! - `xdp`: XDP on the receive path (programs, verdicts, redirects), over the queues;
//! - [`device`]: control of one PCI function: bring-up, QDMA contexts, the RSS table and key,
//!   the ethtool settings; it implements [`QueueControl`] for the queues;
//! - [`queue`]: the datapath: rings, RX and TX queues, the queue pair, page pools, doorbells,
//!   and the frames of an application's UMEM behind the same seams (`queue::xsk`, AF_XDP zero copy);
//! - [`stats`]: the counters the queues update, the hardware counters, the `ethtool -S` list;
//! - [`rss`]: hashing only (the shell's RX hash, Toeplitz);
//! - [`config`] and [`error`]: the vocabulary every layer shares, at the root.

#![no_std]
#![deny(unsafe_code)]
#![deny(missing_docs)]
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

#[cfg(test)]
extern crate std;

#[cfg(test)]
mod testutil;

pub mod config;
pub mod device;
pub mod error;
pub mod moderation;
pub mod queue;
pub mod rss;
pub mod stats;
#[cfg(feature = "xdp")]
pub mod xdp;

pub use config::{BufSizeIdx, DeviceConfig, RingSizeIdx, RxQueueConfig, TxQueueConfig};
pub use device::Device;
pub use error::{ConfigError, Error, QueueError, Result};
pub use moderation::RxModeration;
pub use onic_hal::{AbsQueueId, FunctionId, QueueId};
pub use queue::control::QueueControl;
pub use queue::dispatch::{PassAll, RxContext, RxDispatch};
pub use queue::pair::{PassInfo, QueuePair, RxSink, XdpRxHash, XdpRxq};
pub use queue::pool::{
    NoPage, NoPages, PageBurst, PageCounts, PagePool, PageProvider, PoolConfig, PoolPage, RecycleRing,
};
pub use queue::rx::{PollOutcome, RxFrame, RxOptions, RxQueue};
pub use queue::tx::{PoolFrame, TxDone, TxError, TxFrame, TxQueue, TxSlot};
pub use stats::{PairStats, PoolStats, QueueCounters, RxStats, TxStats};
