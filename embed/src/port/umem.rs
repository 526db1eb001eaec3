//! UMEM frames as the port and its host pass them: a frame of the RX ring's buffer source
//! ([`XskBuf`]) and a frame of the application's TX ring ([`XskTxDesc`]). Plain data of the
//! [`Host`](super::Host) interface; what the port does with them is in `xsk`.

use onic_core::config::xsk_room_for;
use onic_core::queue::pool::PoolPage;
use onic_hal::DmaAddr;

/// A frame of a UMEM while the driver holds it: the host's page for the chunk (its bytes start at
/// the chunk's first byte, its device address is the chunk's), the chunk's UMEM address, the
/// UMEM's headroom and the chunk's size. The frame's view (what the RX queue and XDP see) starts
/// `headroom` bytes into the chunk and ends at the chunk's end, however long the host's page is
/// (a host may keep a 2 KiB chunk in a page of its own).
#[derive(Debug)]
pub struct XskBuf<P> {
    /// The chunk.
    pub page: P,
    /// The UMEM address of the chunk's first byte.
    pub addr: u64,
    /// Bytes at the chunk's start the driver leaves alone.
    pub headroom: u16,
    /// Bytes of the chunk (AF_XDP: a power of two from 2048 to the page size).
    pub size: u32,
}

impl<P: PoolPage> XskBuf<P> {
    /// The UMEM address of the view's first byte: a frame at `offset` in the view is at
    /// `view_addr() + offset`.
    #[must_use]
    pub const fn view_addr(&self) -> u64 {
        self.addr + self.headroom as u64
    }

    /// Whether the chunk holds the headroom, the RX headroom and a C2H buffer of `buf_bytes`
    /// ([`xsk_room_for`]: the device may write up to the chunk's end).
    #[must_use]
    pub fn fits(&self, buf_bytes: u32) -> bool {
        let need = usize::from(self.headroom) + xsk_room_for(buf_bytes) as usize;
        self.chunk_len() >= need
    }

    /// Bytes of the chunk the page holds: the chunk's size, or less if the page is shorter.
    fn chunk_len(&self) -> usize {
        self.page.bytes().len().min(self.size as usize)
    }
}

impl<P: PoolPage> PoolPage for XskBuf<P> {
    #[inline]
    fn dma_addr(&self) -> DmaAddr {
        DmaAddr::new(self.page.dma_addr().get().wrapping_add(u64::from(self.headroom)))
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        let end = self.chunk_len();
        self.page
            .bytes()
            .get(usize::from(self.headroom)..end)
            .unwrap_or(&[])
    }

    #[inline]
    fn bytes_mut(&mut self) -> &mut [u8] {
        let (h, end) = (usize::from(self.headroom), self.chunk_len());
        self.page.bytes_mut().get_mut(h..end).unwrap_or(&mut [])
    }
}

/// A frame of the application's TX ring as the host hands it over: its descriptor (UMEM address
/// of the first byte, length) and where the device reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XskTxDesc {
    /// UMEM address of the frame's first byte (what goes into the completion ring).
    pub addr: u64,
    /// Frame length (at least 60: the host pads a shorter frame in its chunk).
    pub len: u32,
    /// Device address of the frame's first byte.
    pub dma: DmaAddr,
}
