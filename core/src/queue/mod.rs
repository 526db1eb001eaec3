//! The queues: the datapath of one queue pair, from ring index arithmetic up to the pair that one
//! context polls.
//!
//! - [`ring`]: ring index arithmetic and the completion color (hardware.md §7, §8);
//! - [`doorbell`]: the QDMA doorbells a queue rings (hardware.md §6);
//! - [`pool`]: the pages behind the RX descriptors and XDP_TX frames ([`pool::PageProvider`],
//!   [`pool::PagePool`]);
//! - [`rx`], [`tx`]: the receive and transmit queues;
//! - [`xsk`]: frames of an application's UMEM as RX buffers and TX frames (AF_XDP zero copy),
//!   behind the same seams ([`xsk::XskPool`], [`xsk::UmemTxFrame`], [`xsk::XskTx`]);
//! - [`source`]: a pair's buffer source fixed when it is built, the page pool or an XSK pool
//!   ([`source::BufSource`]), for hosts that switch a queue between them;
//! - [`pair`]: one RX queue, one TX queue and their page pool, owned by one context;
//! - [`dispatch`]: what a pair's poll is given ([`dispatch::RxContext`]) and what decides the
//!   fate of each frame ([`dispatch::RxDispatch`]);
//! - [`control`]: [`control::QueueControl`], the little the queues need from the device:
//!   programming and invalidating their contexts. [`crate::Device`] implements it; the queues
//!   know no more of it.
//!
//! Nothing here imports the device: the device stands above the queues.

pub mod control;
pub mod dispatch;
pub mod doorbell;
pub mod pair;
pub mod pool;
pub mod ring;
pub mod rx;
pub mod source;
pub mod tx;
pub mod xsk;
