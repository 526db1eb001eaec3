//! # onic-core
//!
//! The OpenNIC driver core: `#![no_std]`, no allocation, no `unsafe`. It talks to the hardware only
//! through the traits of `onic-hal`.

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
pub mod ethtool;
pub mod pool;
pub mod qdma;
pub mod queue_pair;
pub mod ring;
pub mod rss;
pub mod rx;
pub mod stats;
pub mod tx;
#[cfg(feature = "xdp")]
pub mod xdp;

pub use config::{BufSizeIdx, DeviceConfig, Function, RingSizeIdx, RxQueueConfig, TxQueueConfig};
pub use device::Device;
pub use error::{ConfigError, Error, QueueError, Result};
pub use pool::{PageCounts, PagePool, PageProvider, PoolConfig, PoolPage, PoolStats, RecycleRing};
pub use queue_pair::{FrameSink, PairStats, QueuePair, Verdict};
pub use rx::{PollOutcome, RxFrame, RxOptions, RxOutcome, RxQueue, RxSink, RxStats};
pub use tx::{PoolFrame, TxBuf, TxDone, TxError, TxFrame, TxQueue, TxSlot, TxStats};
