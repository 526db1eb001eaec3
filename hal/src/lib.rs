//! # onic-hal
//!
//! The hardware abstraction the OpenNIC driver core is written against, plus the hardware facts
//! (register maps, in-memory layouts) that every part of the project shares.
//!
//! - [`window`]: [`RegisterWindow`], one per PCI BAR (QDMA BAR0, shell BAR2), and
//!   [`RegisterAccess`], typed reads and writes of the [`Reg`] handles of [`regs`].
//! - [`dma`]: [`DmaAddr`], coherent regions for rings, streaming pages for packets.
//! - [`context`]: indirect context commands, and [`Quiesced`], the proof that a queue's contexts
//!   were invalidated (what lets its rings and pages go back to the allocator).
//! - [`DelayNs`]: busy-wait delays, from `embedded-hal` 1.0.
//! - [`lock`]: [`SharedLock`], the OS's lock for registers all functions of a card share.
//! - [`exec`]: execution contexts as types: tokens of the OS's contexts and the state cells
//!   only the owning context opens.
//! - [`grace`]: [`grace::Published`], state datapaths read without a lock while a control call
//!   replaces it, and [`grace::GracePeriod`], the OS's way of waiting out those readers.
//! - [`fmt`]: the logging facade (`defmt`, `log` or nothing).
//! - [`id`]: [`FunctionId`], [`QueueId`] (function-relative) and [`AbsQueueId`] (QDMA queue
//!   space), the indices registers and contexts take.
//! - [`pci`]: the card's PCI identity, BARs and MSI-X vector counts.
//! - [`regs`]: register maps of the QDMA CSR space, the shell, the CMACs and packet adapters.
//! - [`layout`]: descriptors, completion entries, status records and indirect contexts.
//! - [`barrier`]: the per-architecture barriers that give MMIO Linux's `writel`/`readl` ordering.
//! - backends: [`mmio::Mmio`] for real hardware, `recording::Recorder` (feature `alloc`) for
//!   register traces; the behavioral model of the card lives in the `onic-sim` crate.
//!
//! Every fact comes from the project's hardware reference, `docs/hardware.md` at the repository
//! root, whose sections are cited as "hardware.md §N".

#![no_std]
#![deny(missing_docs)]

#[cfg(feature = "alloc")]
extern crate alloc;

pub mod fmt;

pub mod id;

pub mod addr;
pub mod barrier;
pub mod context;
pub mod dma;
pub mod exec;
pub mod grace;
pub mod layout;
pub mod lock;
pub mod mmio;
pub mod pci;
#[cfg(feature = "alloc")]
pub mod recording;
pub mod regs;
pub mod window;

pub use addr::DmaAddr;
pub use context::Quiesced;
pub use dma::{
    AddrLimit, CoherentRegion, Direction, DmaError, DmaMemory, DmaPage, PageMem, PageStack, U64s, PAGE_SIZE,
};
pub use embedded_hal::delay::DelayNs;
pub use id::{AbsQueueId, FunctionId, QueueId, MAX_QUEUES_PER_FUNCTION};
pub use lock::{SharedGuard, SharedLock, Unshared};
pub use regs::{BlockReg, Reg, RegValue};
pub use window::{Bar, RegisterAccess, RegisterWindow};

#[doc(hidden)]
pub mod __private {
    #[cfg(feature = "defmt")]
    pub use defmt;
    #[cfg(feature = "log")]
    pub use log;
}
