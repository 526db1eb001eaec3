//! # onic-linux
//!
//! The Rust half of the `onic.ko` kernel module: the kernel as a host of `onic-embed`'s port
//! (the one door into the driver core), behind the C glue in `os-linux/kernel/`, which owns the
//! kernel objects and calls in here for every decision (see `os-linux/README.md`).
//!
//! - [`abi`]: the structs and constants shared with the C glue, the one definition its header
//!   is generated from (with the port's call results, `onic_embed::port::abi`).
//! - [`host`]: the port's `Host` over the kernel, from the two halves in [`os`].
//! - [`os`]: the kernel's services as two traits (page pools, packets, XDP, statistics; DMA
//!   mapping) the module implements over the kernel and host tests over plain memory.
//! - [`ethtool`]: string sets, `ethtool -S` names and values, flow-hash fields.
//! - [`simcard`]: simulation mode's backend, the model card behind a lock.
//! - [`heap`]: allocation that fails with `None` instead of panicking.
//! - [`errno`]: the port's errors as the kernel's error numbers.
//! - [`text`]: fixed buffers `write!` fills, with no allocation and no panic path.
//! - `kernel` (feature `kernel` on a bare target only): heap, panic handler, printk logger, the
//!   hardware backend over the kernel's MMIO/DMA API and the `extern "C"` entry points, which
//!   make the calling-context tokens and call the port.
//!
//! The same crate builds for the host (an ordinary library, tested with `cargo test`) and, with
//! the `kernel` feature, for `x86_64-unknown-none` as the module's static library.

#![no_std]
#![deny(missing_docs)]

extern crate alloc;

pub mod abi;
pub mod errno;
pub mod ethtool;
pub mod heap;
pub mod host;
pub mod os;
pub mod simcard;
pub mod text;

#[cfg(all(feature = "kernel", target_os = "none"))]
mod kernel;

pub use onic_core;
pub use onic_embed;
