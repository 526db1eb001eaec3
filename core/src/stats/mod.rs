//! Statistics: what the driver counts and how it is reported.
//!
//! - [`counters`]: the software counters of the queues, the pair's XDP verdicts and the page
//!   pools, and their per-pair snapshot [`QueueCounters`]. The queues and pools update them; the
//!   types live here so that the reports depend on the counters alone, never on the queues.
//! - [`hw`]: the hardware counters of a port (CMAC counters latched by TICK, packet-adapter
//!   counters) and the link state (hardware.md §10.3-§10.6).
//! - [`mac`]: the standard groups Linux's ethtool names (`eth-mac`, `eth-phy`, `eth-ctrl`,
//!   `rmon`, pause frames) from the CMAC counters, and the pause settings.
//! - [`ethtool`]: the `ethtool -S` list (names and values) and the `stats64` view, built from the
//!   two above.

pub mod counters;
pub mod ethtool;
pub mod hw;
pub mod mac;

pub use counters::{
    PairStats, PoolAllocStats, PoolRecycleStats, PoolStats, QueueCounters, RxStats, TxStats, XskStats,
};
pub use hw::{link_up, read_hw_counters, HW_COUNTERS};
pub use mac::{MacStatGroups, PauseParams};
