//! What the receive queue hands out: a received frame in its page ([`RxFrame`]), the checked
//! length of one ([`RxLen`]), the handler a poll hands each frame to ([`FrameHandler`]) and what
//! the handler did with it ([`Handled`]). The queue pair, XDP and the tests meet the queue here.

use crate::config::RX_HEADROOM;
use crate::queue::pool::{PageProvider, PoolPage};

/// A received frame: the page it is in, where it starts and how long it is.
#[derive(Debug)]
pub struct RxFrame<Pg> {
    /// The page (owned: whoever holds the frame holds the page).
    pub page: Pg,
    /// Offset of the first byte in the page ([`RX_HEADROOM`] as received; a sink may move it).
    pub offset: u16,
    /// Length in bytes.
    pub len: u16,
}

impl<Pg: PoolPage> RxFrame<Pg> {
    /// The frame's bytes (empty if `offset`/`len` were moved outside the page).
    #[must_use]
    pub fn data(&self) -> &[u8] {
        let start = usize::from(self.offset);
        self.page
            .bytes()
            .get(start..start + usize::from(self.len))
            .unwrap_or(&[])
    }

    /// The frame's bytes, writable (empty if `offset`/`len` were moved outside the page).
    pub fn data_mut(&mut self) -> &mut [u8] {
        let start = usize::from(self.offset);
        let end = start + usize::from(self.len);
        self.page.bytes_mut().get_mut(start..end).unwrap_or(&mut [])
    }
}

/// What became of a frame handed to a [`FrameHandler`].
#[derive(Debug)]
pub(crate) enum Handled<Pg> {
    /// The handler is done with it (XDP_DROP, or the OS copied the data): recycle the page.
    Recycle(RxFrame<Pg>),
    /// The page went to the OS (XDP_PASS); it comes back through the pool.
    ToOs,
    /// The page was queued on a TX ring (XDP_TX, redirect) or taken by another redirect target;
    /// the TX queue (or that target, through the pool's recycle ring) returns it. An XDP_TX frame
    /// may bring a page of the pool back for the slot ([`crate::queue::tx::TxQueue::xmit_pool`]),
    /// synced for the device.
    #[cfg(feature = "xdp")]
    ToTx(Option<Pg>),
}

/// The length of a frame the RX queue hands to its [`FrameHandler`]: from 1 byte up to one
/// buffer, and a buffer is at most [`RX_BUFFER_ROOM`] bytes ([`crate::config::BufSizeIdx`]), so
/// the frame, at [`RX_HEADROOM`] in its page, ends before the page's tailroom. Only the RX queue
/// makes one, from a length it checked against its buffer size.
///
/// [`RX_BUFFER_ROOM`]: crate::config::RX_BUFFER_ROOM
#[derive(Clone, Copy, Debug)]
pub(crate) struct RxLen(pub(super) u16);

impl RxLen {
    /// A length for tests of the frame handlers, checked as the RX queue checks it.
    #[cfg(all(test, feature = "xdp"))]
    pub(crate) fn for_test(len: u16) -> Self {
        assert!(len >= 1 && u32::from(len) <= crate::config::RX_BUFFER_ROOM);
        Self(len)
    }

    /// The length in bytes.
    pub(crate) const fn get(self) -> u16 {
        self.0
    }
}

/// What a queue pair's poll hands each received frame to (the pair's dispatcher, or a test).
pub(crate) trait FrameHandler<P: PageProvider> {
    /// Takes one frame: `len` bytes at [`RX_HEADROOM`] in `page`. `pool` is the queue's page
    /// provider (for XDP_TX syncs).
    fn handle(&mut self, page: P::Page, len: RxLen, pool: &mut P) -> Handled<P::Page>;
}

impl<P: PageProvider, T: FnMut(RxFrame<P::Page>, &mut P) -> Handled<P::Page>> FrameHandler<P> for T {
    #[inline]
    fn handle(&mut self, page: P::Page, len: RxLen, pool: &mut P) -> Handled<P::Page> {
        // CAST: RX_HEADROOM (256) fits u16.
        let frame = RxFrame {
            page,
            offset: RX_HEADROOM as u16,
            len: len.get(),
        };
        self(frame, pool)
    }
}
