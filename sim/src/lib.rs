//! # onic-sim
//!
//! A behavioral model of the OpenNIC card (shell + QDMA + CMAC ports + a wire between the ports),
//! `no_std` + `alloc`, implementing the `onic-hal` traits. It depends on `onic-hal` only, never on
//! the driver core, so the model cannot borrow driver logic.

#![no_std]
#![deny(missing_docs)]

extern crate alloc;
