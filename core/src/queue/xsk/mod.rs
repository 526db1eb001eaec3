//! Zero-copy buffers from an application's packet memory (AF_XDP's UMEM), behind the same seams as
//! the page pool: the RX queue takes [`UmemFrame`]s from an [`XskPool`] (a
//! [`PageProvider`](crate::queue::pool::PageProvider)), a TX queue carries [`UmemTxFrame`]s (a
//! [`TxFrame`](crate::queue::tx::TxFrame)) completed through an [`XskTx`] (a
//! [`TxDone`](crate::queue::tx::TxDone)). Neither queue has code of its own for them.
//!
//! # The pieces
//!
//! - [`Umem`]: the chunks, one HAL page ([`onic_hal::DmaPage`], mapped by the caller) each, in
//!   the caller's storage ([`UmemChunk`]); addressed by UMEM address (`chunk * 4096 + offset`).
//! - [`XskRing`]: the four rings between application and driver, in the caller's storage, laid out
//!   as AF_XDP lays them out (power-of-two sizes, free-running 32-bit producer and consumer
//!   indices): fill and completion carry UMEM addresses, RX and TX carry [`XskDesc`]s.
//! - [`XskPool`]: the RX queue's buffers: a free list of frames the driver already holds, then
//!   the fill ring.
//! - [`XskRx`] (feature `xdp`): the RX ring as a redirect target: an XDP_REDIRECT puts the frame
//!   there without a copy.
//! - [`XskPass`]: the sink for frames passed to the OS, which copies them (see below).
//! - [`XskTx`]: the TX ring's frames onto a TX queue, and their completion.
//!
//! # Who owns a chunk
//!
//! Every chunk is, at any moment, in exactly one of three states, kept in the UMEM itself
//! ([`ChunkState`]):
//!
//! - the **application's**: free for it to use or named by one of its rings (an entry in the fill
//!   or TX ring it produced and the driver has not consumed yet, or in the RX or completion ring
//!   the driver produced and it has not consumed yet);
//! - **pooled**: on an [`XskPool`]'s free list;
//! - **held**: one frame handle ([`UmemFrame`] or [`UmemTxFrame`]) owns the chunk's page, and
//!   with it the chunk, wherever the handle is: in an RX ring slot, on a TX ring or parked in a
//!   TX slot after XDP_TX, in a redirect target, with the OS or the caller.
//!
//! The driver takes a chunk from the application only through the fill ring ([`XskPool`]) and the
//! TX ring ([`XskTx::take`]), and only if the chunk is the application's at that moment: an
//! address handed over twice, or one outside the UMEM, is refused and counted, so a chunk is never
//! held twice. It gives chunks back only through the RX ring ([`XskRx`]), the completion ring
//! ([`XskTx::complete`]) and at teardown ([`XskPool::drain`]). A handle is not `Clone`; the page
//! inside it is a `&mut`, so the borrow checker sees to the rest.
//!
//! # The paths
//!
//! - **RX refill**: [`XskPool`] as the RX queue's provider; a dropped or copied frame stays in its
//!   slot ([`PageProvider::reuse`](crate::queue::pool::PageProvider::reuse)), a frame that leaves
//!   is replaced from the free list or the fill ring.
//! - **XDP_DROP, ABORTED**: as with pages: the frame stays in its slot.
//! - **XDP_TX**: unchanged: the frame goes out on the pair's own TX queue as a pool frame, parks
//!   in its TX slot and returns to the RX ring with the next XDP_TX frame of that slot; the free
//!   list gets it back at teardown.
//! - **XDP_REDIRECT** to the application ([`XskRx`]): zero copy; the chunk becomes the
//!   application's. To another queue's TX ring ([`crate::xdp::TxTarget`]) the frame travels as
//!   it would in a page; its owner's pool must get it back (the same context, or a
//!   [`crate::queue::pool::RecycleRing`] of `UmemFrame`s that the owner drains into its pool).
//! - **XDP_PASS** and the poll without a program: a copy ([`XskPass`]). This path cannot work
//!   without one: the OS builds its packets around its own pages, and a chunk of the
//!   application's memory must not end up in an OS buffer whose lifetime the OS decides.
//!   [`XskPass`] gives the frame back to the RX path, which reuses it in its slot.
//! - **TX**: [`XskTx::send`] or [`XskTx::take`] and [`TxQueue::xmit_os`]; a short frame is
//!   zero-padded to 60 bytes inside its chunk when taken.
//! - **Restart and teardown**: the queues hand their frames to the pool ([`XskPool`]'s free list)
//!   and to [`XskTx`] (the completion ring), as they hand pages to a page pool and OS frames to
//!   the OS; [`XskPool::drain`] then hands the free list to the application.
//!
//! # Limits of this version
//!
//! A chunk is one HAL page (4 KiB; see [`UMEM_CHUNK_SIZE`]): the HAL syncs whole pages, so two
//! owners cannot share one. A chunk must hold the UMEM headroom, the RX headroom (256 bytes) and
//! the C2H buffer ([`XskPool::new`] checks it, [`crate::config::xsk_room_for`]); the device may
//! write up to the chunk's end, no tailroom is kept (an XDP program cannot grow a frame past its
//! chunk, [`crate::xdp::XdpBuff`]): with the default 3520-byte buffer the UMEM headroom is at
//! most 320 bytes, a smaller buffer size makes room for more. Rings and chunk states are single-threaded (`Cell`):
//! the application runs in the driver's context (bare metal, the core's tests and benchmarks).
//! Hosts of `onic-embed`'s port (the model host now, the kernel module later over the kernel's
//! `xsk_buff_pool`) keep their UMEM behind the port's host methods instead, and the port's pairs
//! reach it through [`crate::queue::source::BufSource`], the same seam.
//!
//! [`TxQueue::xmit_os`]: crate::queue::tx::TxQueue::xmit_os

mod pool;
mod ring;
mod rx;
#[cfg(test)]
mod tests;
mod tx;
mod umem;

pub use pool::{XskPool, XskPoolStats};
pub use ring::{RingSizeError, XskDesc, XskRing};
pub use rx::{PassCopy, XskPass};
#[cfg(feature = "xdp")]
pub use rx::{XskRx, XskRxStats};
pub use tx::{UmemTxFrame, XskTx, XskTxStats};
pub use umem::{ChunkState, Umem, UmemChunk, UmemConfig, UmemCounts, UmemError, UmemFrame, UMEM_CHUNK_SIZE};
