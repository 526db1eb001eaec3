//! # onic-linux
//!
//! The Rust half of the `onic.ko` kernel module: the driver core from `onic-core` behind a thin
//! shim over the kernel's netdev, NAPI, ethtool and XDP interfaces. The module build (Kbuild, C
//! glue) arrives with the kernel-module work; until then this crate only proves that the core links
//! into a `no_std` library built for the kernel's target.

#![no_std]
#![deny(missing_docs)]

pub use onic_core;
