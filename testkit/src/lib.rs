//! The kit that tests, benchmarks, fuzz targets and the `onic` tool share to drive the driver core
//! without a card, next to the card model (`onic-sim`) they use when they want one.
//!
//! What is here, by what it is:
//!
//! - **host DMA**: [`hostdma`], heap memory without an IOMMU for the benchmarks (see below for
//!   why tests use the model's memory instead);
//! - **device side**: [`device`], where a ring's entries and status record lie, the record's word,
//!   and the memory a device-side write goes to: [`hostdma::HostDma`], or the model's memory
//!   through its fault knob for tests and fuzz targets that make the device lie;
//! - **rigs**: [`rig`], the driver's RX and TX queues over `HostDma` with the card replaced by a
//!   device side that writes only what the QDMA would write (completion entries, status records,
//!   frame data), so that the driver's own cost can be timed without the model's;
//! - **workloads**: [`bench`](mod@bench) (the method of `onic bench` and its figures: RX, TX,
//!   page pool, scaling, page per packet against the pool), [`bench_xdp`] (the driver-only XDP
//!   verdict paths) and [`rss_inputs`] (the inputs of the RSS hash benchmarks). `onic bench`
//!   prints them; the criterion benches of `onic-tests` time the same workloads.
//!
//! # One host DMA for tests
//!
//! Two [`onic_hal::DmaMemory`] implementations stand in for the host's memory, each with its own
//! job:
//!
//! - **Tests use the model's memory**, `onic_sim::SimDma` (`card.dma()`). It checks what a test
//!   wants checked: every device access is translated and refused when it reaches an unmapped or
//!   freed page, runs past its region or page, or writes into a `ToDevice` page; host-side misuse
//!   (an unknown page, a free while mapped, an unmap or sync with another direction or out of
//!   range) is reported; fresh pages are poisoned and device addresses are never reused, so that
//!   a stale address shows up as freed; syncs are counted; page allocations can be made to fail;
//!   and after a teardown its census finds every page or region left behind. The datapath tests
//!   and harness of `onic-tests`, the fuzz targets, the model's tests and the core's tests all run
//!   on it.
//! - **Benchmarks use [`hostdma::HostDma`]**, which is deliberately cheap: no per-page state in
//!   release builds, translation by a fixed offset, and syncs that are no-ops and declared so
//!   (`DmaMemory::SYNC_IS_NOOP`), as on a cache-coherent host without an IOMMU. The model's
//!   memory takes the card's state and searches its maps on every call, and asks for the syncs,
//!   which the driver-only figures would then count as driver cost. `HostDma` is not a second
//!   test memory: nothing outside this crate's own tests of the rigs runs on it, and the check it
//!   makes in debug builds (a device write lands in a mapped page) is there for those tests.
//!
//! A test of the driver therefore builds a model card and uses its memory; the rigs here are for
//! timing the driver.

pub mod bench;
pub mod bench_xdp;
pub mod device;
pub mod hostdma;
pub mod rig;
pub mod rss_inputs;
