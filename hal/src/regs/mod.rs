//! Register maps, named as in the project's hardware reference (`docs/hardware.md`). Every offset
//! is defined once, here, and checked by tests against that page's tables.
//!
//! - [`qdma`]: BAR0, the QDMA IP configuration space (global CSRs, indirect contexts, doorbells).
//! - [`shell`]: BAR2, the shell (system configuration, per-function QDMA subsystem blocks).
//! - [`cmac`]: BAR2, the two CMAC subsystems and their packet adapters.

pub mod cmac;
pub mod qdma;
pub mod shell;
