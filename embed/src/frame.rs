//! The standard owner of a frame on a TX ring that is not an XDP_TX page of the pair's own pool.

use onic_core::queue::tx::TxFrame;
use onic_core::xdp::{FromXdpFrame, XdpFrame};
use onic_hal::{Direction, DmaAddr, DmaMemory, DmaPage, PAGE_SIZE};

/// A frame the OS transmits, or one another pair redirected here.
#[derive(Debug)]
pub enum Frame<M> {
    /// An OS frame in its own page, mapped to-device, starting at offset 0.
    Os {
        /// The page.
        page: DmaPage,
        /// Frame length in bytes.
        len: usize,
        /// The memory the page was mapped in (it is unmapped and freed there).
        dma: M,
    },
    /// A frame in a page of another pair's pool (mapped bidirectional), which goes back to that
    /// pool's recycle ring (`origin`) when the device is done with it.
    Xdp(XdpFrame<DmaPage>),
}

impl<M> FromXdpFrame<DmaPage> for Frame<M> {
    fn from_xdp(frame: XdpFrame<DmaPage>) -> Self {
        Self::Xdp(frame)
    }

    fn into_xdp(self) -> Result<XdpFrame<DmaPage>, Self> {
        match self {
            Self::Xdp(f) => Ok(f),
            os @ Self::Os { .. } => Err(os),
        }
    }
}

impl<M: DmaMemory> TxFrame for Frame<M> {
    fn dma_addr(&self) -> DmaAddr {
        match self {
            Self::Os { page, .. } => page.dma_addr(),
            Self::Xdp(f) => f.dma_addr(),
        }
    }

    fn len(&self) -> usize {
        match self {
            Self::Os { len, .. } => *len,
            Self::Xdp(f) => TxFrame::len(f),
        }
    }

    fn buffer_len(&self) -> usize {
        match self {
            Self::Os { .. } => PAGE_SIZE,
            Self::Xdp(f) => f.buffer_len(),
        }
    }

    /// An OS frame is zero-extended in its page and the new bytes are synced for the device; a
    /// redirected frame was padded before it left its pool.
    fn pad_to(&mut self, min_len: usize) -> bool {
        match self {
            Self::Os { page, len, dma } => {
                let old = *len;
                if min_len <= old {
                    return true;
                }
                if min_len > PAGE_SIZE {
                    return false;
                }
                page.bytes_mut()[old..min_len].fill(0);
                dma.sync_for_device(page, old, min_len - old, Direction::ToDevice);
                *len = min_len;
                true
            }
            Self::Xdp(f) => f.pad_to(min_len),
        }
    }
}

impl<M> Frame<M> {
    /// The page, whichever the owner.
    #[must_use]
    pub fn into_page(self) -> DmaPage {
        match self {
            Self::Os { page, .. } => page,
            Self::Xdp(f) => f.page,
        }
    }
}
