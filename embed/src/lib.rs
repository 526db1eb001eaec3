//! The one door into the driver core for a host that runs a port: [`port::Port`] owns one
//! function's device, RSS state with its published hasher, queue indices and their rings, and
//! statistics; a host implements [`port::Host`] (pages, DMA, delivery to its stack, programs,
//! grace periods, allocation) and calls the port from its entry points with the tokens of its
//! calling contexts ([`port::contexts`]). The Linux kernel module is such a host.
//!
//! Beside the port, what hosts over the model write around the core, written once: the owner of
//! a frame on a TX ring that is not an XDP_TX page of the pair's own pool ([`frame::Frame`]),
//! where such frames go when the device is done with them ([`done::FrameDone`]), a pass sink
//! that keeps the pages it is handed and counts them ([`sink::OsQueue`]), and a builder for a
//! device's queue pairs with their pools and slot storage ([`set::QueueSet`]), and one poll of a
//! pair for the rigs and tests that drive pairs below the port ([`poll::poll_pair`]).
//!
//! The crate is `no_std` with `alloc`, and free of `unsafe`: where a host hands out raw memory,
//! its own types keep the unsafe on its side of the seam.
//!
//! ```
//! use onic_embed::done::FrameDone;
//! use onic_embed::frame::Frame;
//! use onic_core::queue::pool::RecycleRing;
//! use onic_core::queue::tx::TxDone;
//! use onic_hal::{Direction, DmaMemory};
//! use onic_sim::{Card, CardConfig};
//!
//! let card = Card::new(CardConfig::default());
//! let dma = card.dma();
//! let page = dma.map_page(dma.alloc_page().unwrap(), Direction::ToDevice).unwrap();
//! let ring = RecycleRing::new();
//! let rings = [&ring];
//! let mut done = FrameDone::new(&rings, dma);
//! done.os_done(Frame::Os { page, len: 60, dma });
//! assert_eq!((done.counts.os_done, done.counts.os_freed), (1, 1));
//! assert_eq!(card.dma_stats().live_pages, 0);
//! ```

#![no_std]
#![deny(unsafe_code)]

extern crate alloc;

pub mod done;
pub mod frame;
#[cfg(feature = "model")]
pub mod model;
pub mod poll;
pub mod port;
pub mod set;
pub mod sink;
pub mod tuning;
