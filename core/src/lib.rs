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

/// `+=` for a struct of counters: every field added (wrapping: counters never panic). The struct
/// is destructured, so a field added later without being listed here does not compile. Fields
/// that are counter structs themselves are added with their own `+=`.
macro_rules! counters_add_assign {
    ($t:ident { $($f:ident),* $(,)? } $(nested { $($n:ident),* $(,)? })?) => {
        impl core::ops::AddAssign for $t {
            fn add_assign(&mut self, o: Self) {
                let $t { $($f,)* $($($n,)*)? } = o;
                $( self.$f = self.$f.wrapping_add($f); )*
                $($( self.$n += $n; )*)?
            }
        }
    };
}
pub(crate) use counters_add_assign;

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
pub use pool::{
    NoPage, NoPages, PageBurst, PageCounts, PagePool, PageProvider, PoolConfig, PoolPage, PoolStats,
    RecycleRing,
};
#[cfg(not(feature = "xdp"))]
pub use queue_pair::RxContext;
pub use queue_pair::{PassInfo, QueuePair, RxSink, XdpRxHash, XdpRxq};
pub use rx::{PollOutcome, RxFrame, RxOptions, RxQueue};
pub use stats::{PairStats, QueueCounters, RxStats, TxStats};
pub use tx::{PoolFrame, TxBuf, TxDone, TxError, TxFrame, TxQueue, TxSlot};
#[cfg(feature = "xdp")]
pub use xdp::RxContext;
