//! # onic-sim
//!
//! A behavioral model of the OpenNIC card (shell + QDMA + CMAC ports + a wire between the ports),
//! `no_std` + `alloc`, implementing the `onic-hal` traits. It depends on `onic-hal` only, never on
//! the driver core, so the model cannot borrow driver logic: descriptors, contexts, doorbells,
//! completion entries and the shell's RSS hash are decoded here from the hardware reference
//! (`docs/hardware.md`, cited as "hardware.md §N").
//!
//! ```
//! use onic_hal::RegisterAccess;
//! use onic_hal::regs::cmac;
//! use onic_sim::{Card, CardConfig};
//!
//! let card = Card::new(CardConfig::default());
//! let shell = card.shell();
//! assert_eq!(shell.read(cmac::CORE_VERSION.on(cmac::cmac_base(0))), cmac::CORE_VERSION_EXPECTED);
//! card.inject(0, &[0u8; 60]); // arrives at port 0; dropped: the CMAC is not RX-enabled yet
//! card.run_until_idle();
//! assert_eq!(card.stats().rx_disabled_dropped, 1);
//! ```
//!
//! - [`Card`]: the model; [`Card::qdma`] and [`Card::shell`] are the BAR0/BAR2
//!   [`RegisterWindow`](onic_hal::RegisterWindow)s, [`Card::dma`] the
//!   [`DmaMemory`](onic_hal::DmaMemory), [`Card::delay`] a [`DelayNs`](onic_hal::DelayNs) over the
//!   virtual clock, [`Card::faults`] the fault knobs.
//! - Traffic: [`Card::inject`], [`Card::step`], [`Card::run_until_idle`], [`Card::advance_time`],
//!   [`Card::take_egress`], [`Card::take_interrupts`].
//! - Checking: [`Card::violations`] lists every driver mistake the model caught (device access to
//!   unmapped or freed memory, bad register values, metadata/length mismatches, a stalled H2C
//!   stream...); [`CardConfig::strict`] turns them into panics. [`Card::dma_stats`] shows leaks.
//!
//! See `sim/README.md` for a walk-through.

#![no_std]
#![deny(missing_docs)]

extern crate alloc;

mod card;
mod cmac;
mod config;
pub mod dma;
mod fields;
pub mod inet;
mod mem;
mod qdma;
pub mod rss;
mod shell;

pub use card::{Card, Faults, QdmaWindow, ShellWindow, SimDelay, SimDma};
pub use cmac::{FCS_LEN, MIN_WIRE_LEN};
pub use config::{
    AccessProblem, CardConfig, Corruption, DeviceAccess, DmaConfig, DmaStats, HostDmaProblem, Interrupt,
    ResetBehavior, SimStats, Violation, Wire,
};
pub use dma::{BusError, DeviceBus};
