//! # onic-linux
//!
//! The Rust half of the `onic.ko` kernel module: the driver core from `onic-core` behind a thin
//! shim over the kernel's netdev, NAPI and ethtool interfaces. The C glue in `os-linux/kernel/`
//! owns the kernel objects and calls in here for every decision (see `os-linux/README.md`).
//!
//! - [`abi`]: the structs and constants shared with the C glue, the one definition its header
//!   is generated from.
//! - [`contexts`]: the kernel's calling contexts (RTNL, NAPI, the TX and xmit locks) as tokens,
//!   and the cells only the owning context opens.
//! - [`port`]: one PCI function's netdev state (bring-up, open/stop, RSS, ethtool, statistics).
//! - [`datapath`]: the port's datapath entry points (transmit, NAPI poll, `ndo_xdp_xmit`, the
//!   reclaims), each for the one context that owns the rings it touches.
//! - [`queues`]: the four rings of a queue index (RX, XDP_TX, the stack's TX, redirect-in),
//!   their H2C queue ids, start and teardown.
//! - [`dp`]: the core's queues joined to the OS: page-pool pages, packets and redirected frames
//!   on a TX ring, the XDP poll's sinks, published counters.
//! - [`os`]: what the datapath needs from the OS (page pools, packets, XDP, statistics), as
//!   traits the module implements over the kernel and host tests over plain memory.
//! - [`simcard`]: simulation mode's backend, the model card behind a lock.
//! - [`heap`]: allocation that fails with `None` instead of panicking.
//! - [`text`]: fixed buffers `write!` fills, with no allocation and no panic path.
//! - [`ethtool`]: string sets, `ethtool -S` names, flow-hash fields.
//! - `kernel` (feature `kernel` on a bare target only): heap, panic handler, printk logger, the
//!   hardware backend over the kernel's MMIO/DMA API and the `extern "C"` entry points.
//!
//! The same crate builds for the host (an ordinary library, tested with `cargo test`) and, with
//! the `kernel` feature, for `x86_64-unknown-none` as the module's static library.

#![no_std]
#![deny(missing_docs)]

extern crate alloc;

pub mod abi;
pub mod contexts;
pub mod datapath;
pub mod dp;
pub mod errno;
pub mod ethtool;
pub mod heap;
pub mod os;
pub mod port;
pub mod queues;
pub mod simcard;
pub mod text;

#[cfg(all(feature = "kernel", target_os = "none"))]
mod kernel;

pub use onic_core;
