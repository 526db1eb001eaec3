//! The XDP buffer view: one received frame in its page, with the headroom in front, the metadata
//! area just before the data, and the tailroom behind it, plus what the program may ask about the
//! frame (RX queue, ingress port, RX hash).
//!
//! Offsets are counted from the page's first byte (Linux's `data_hard_start`):
//!
//! ```text
//! 0 ........ XDP_FRAME_RESERVED ... data_meta ... data ............ data_end ..... hard_end ... frame_size
//! |  reserved (xdp_frame)    | headroom | metadata | frame bytes       | tailroom       | shared info |
//! ```
//!
//! `hard_end` = `frame_size - RX_TAILROOM`: the room an OS keeps at the end of the page to build a
//! packet around it (Linux: `skb_shared_info`). A received frame in a UMEM chunk may already
//! reach past that point (the device writes up to the chunk's end, `config::xsk_room_for`); its
//! `hard_end` is then its own end, so the frame may be trimmed and grown back but never past where
//! the device wrote it, inside its chunk. Every adjustment keeps these invariants, with the
//! bounds Linux's helpers use; a request that would break one fails with an [`XdpError`] and
//! changes nothing.

use crate::config::{RX_BUFFER_ROOM, RX_HEADROOM, RX_TAILROOM};
pub use crate::queue::pair::{XdpRxHash, XdpRxq};
use crate::queue::rx::RxLen;

/// Bytes at the start of the headroom that no adjustment may reach: Linux converts a buffer into a
/// `struct xdp_frame` stored there (40 bytes on 64-bit kernels) for XDP_TX and redirect.
pub(crate) const XDP_FRAME_RESERVED: usize = 40;

/// Bytes at the end of the page that the frame may not grow into (`skb_shared_info` room).
pub(crate) const XDP_TAILROOM_RESERVED: usize = RX_TAILROOM as usize;

/// Shortest frame an adjustment may leave: an Ethernet header (`ETH_HLEN`).
pub const ETH_HLEN: usize = 14;

/// Length of an Ethernet address (`ETH_ALEN`).
pub const ETH_ALEN: usize = 6;

/// Swaps the destination and source Ethernet addresses at the start of `frame`, what a program
/// that sends frames back where they came from does before XDP_TX. A frame shorter than the two
/// addresses is left as it is.
///
/// The twelve bytes are read as one 8-byte and one 4-byte word and written back the same way:
/// two stores, where a byte at a time takes twelve (a store-bound loop on the XDP_TX path).
#[inline]
pub fn swap_macs(frame: &mut [u8]) {
    if let Some(head) = frame.first_chunk_mut::<{ 2 * ETH_ALEN }>() {
        let mut low = [0u8; 8];
        let mut high = [0u8; 4];
        low.copy_from_slice(&head[..8]);
        high.copy_from_slice(&head[8..]);
        // The twelve bytes as one number, byte i at bits 8i: the destination is the low 48
        // bits, the source the 48 above them.
        let both = u128::from(u64::from_le_bytes(low)) | (u128::from(u32::from_le_bytes(high)) << 64);
        let mask = (1u128 << (8 * ETH_ALEN)) - 1;
        let swapped = (both >> (8 * ETH_ALEN)) | ((both & mask) << (8 * ETH_ALEN));
        // CAST: the low 64 and the next 32 bits of a 96-bit value, split on purpose.
        head[..8].copy_from_slice(&(swapped as u64).to_le_bytes());
        // CAST: as above.
        head[8..].copy_from_slice(&((swapped >> 64) as u32).to_le_bytes());
    }
}

/// Largest metadata area (Linux: 32 bytes).
pub const XDP_META_MAX: usize = 32;

/// Alignment of the metadata length (Linux: a multiple of 4 bytes).
pub const XDP_META_ALIGN: usize = 4;

/// Why a buffer adjustment was refused. Nothing was changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum XdpError {
    /// The new start or end lies outside what the layout allows (Linux: `-EINVAL`).
    OutOfBounds,
    /// The metadata would be longer than [`XDP_META_MAX`] or not a multiple of
    /// [`XDP_META_ALIGN`] (Linux: `-EACCES`).
    MetaLength,
    /// No RX hash is available for this frame (Linux: `-ENODATA`).
    NoData,
}

impl core::fmt::Display for XdpError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Self::OutOfBounds => "adjustment outside the buffer layout",
            Self::MetaLength => "metadata length above 32 bytes or not a multiple of 4",
            Self::NoData => "no RX hash for this frame",
        })
    }
}

/// An XDP buffer: a view of one received frame in its page, for the duration of a program run.
#[derive(Debug)]
pub struct XdpBuff<'a> {
    page: &'a mut [u8],
    data_meta: usize,
    data: usize,
    data_end: usize,
    /// Highest end the frame had: the CPU may have written up to here (for DMA syncs).
    high_water: usize,
    rxq: XdpRxq,
    hash: Option<XdpRxHash>,
    redirect: Option<u32>,
}

impl<'a> XdpBuff<'a> {
    /// A view of `len` bytes at `offset` in `page` (the whole page; its length is the frame size),
    /// with no metadata.
    ///
    /// # Errors
    ///
    /// [`XdpError::OutOfBounds`] unless `XDP_FRAME_RESERVED <= offset`,
    /// `offset + len <= page.len() - XDP_TAILROOM_RESERVED`.
    pub fn new(page: &'a mut [u8], offset: usize, len: usize, rxq: XdpRxq) -> Result<Self, XdpError> {
        let hard_end = page
            .len()
            .checked_sub(XDP_TAILROOM_RESERVED)
            .ok_or(XdpError::OutOfBounds)?;
        let end = offset.checked_add(len).ok_or(XdpError::OutOfBounds)?;
        if offset < XDP_FRAME_RESERVED || end > hard_end {
            return Err(XdpError::OutOfBounds);
        }
        Ok(Self {
            page,
            data_meta: offset,
            data: offset,
            data_end: end,
            high_water: end,
            rxq,
            hash: None,
            redirect: None,
        })
    }

    /// A view of a frame as the RX queue received it: `len` bytes at [`RX_HEADROOM`] in `page`.
    /// The RX queue bounded `len` by a buffer ([`RxLen`]), so of the checks of [`XdpBuff::new`]
    /// only the page's size is left to make here.
    ///
    /// # Errors
    ///
    /// [`XdpError::OutOfBounds`] for a page too short to hold a full buffer behind the headroom
    /// and before [`XDP_TAILROOM_RESERVED`], or at least this frame behind the headroom.
    ///
    /// A frame that reaches past `page.len() - XDP_TAILROOM_RESERVED` (a UMEM frame's view, which
    /// keeps no tailroom) cannot grow: its end is its `hard_end`.
    pub(crate) fn received(page: &'a mut [u8], len: RxLen, rxq: XdpRxq) -> Result<Self, XdpError> {
        const _: () = assert!(RX_HEADROOM as usize >= XDP_FRAME_RESERVED);
        const NEEDED: usize = (RX_HEADROOM + RX_BUFFER_ROOM) as usize + XDP_TAILROOM_RESERVED;
        let start = RX_HEADROOM as usize;
        let end = start + usize::from(len.get());
        // A page that holds a whole buffer holds every frame; a shorter one (a UMEM frame's view
        // behind a headroom) must hold this frame. The first test is the only one for a page of
        // constant length (a `DmaPage`), and is decided at compile time.
        if page.len() < NEEDED && page.len() < end {
            return Err(XdpError::OutOfBounds);
        }
        Ok(Self {
            page,
            data_meta: start,
            data: start,
            data_end: end,
            high_water: end,
            rxq,
            hash: None,
            redirect: None,
        })
    }

    /// Attaches the RX hash the program may read with [`XdpBuff::rx_hash`].
    #[must_use]
    pub const fn with_rx_hash(mut self, hash: XdpRxHash) -> Self {
        self.hash = Some(hash);
        self
    }

    /// The frame bytes (`data .. data_end`).
    #[must_use]
    pub fn data(&self) -> &[u8] {
        self.page.get(self.data..self.data_end).unwrap_or(&[])
    }

    /// The frame bytes, writable.
    pub fn data_mut(&mut self) -> &mut [u8] {
        self.page.get_mut(self.data..self.data_end).unwrap_or(&mut [])
    }

    /// The metadata area (`data_meta .. data`), empty unless [`XdpBuff::adjust_meta`] grew it.
    #[must_use]
    pub fn meta(&self) -> &[u8] {
        self.page.get(self.data_meta..self.data).unwrap_or(&[])
    }

    /// The metadata area, writable.
    pub fn meta_mut(&mut self) -> &mut [u8] {
        self.page.get_mut(self.data_meta..self.data).unwrap_or(&mut [])
    }

    /// Frame length (`data_end - data`).
    #[must_use]
    pub const fn len(&self) -> usize {
        self.data_end - self.data
    }

    /// Whether the frame is empty (never, after a successful construction: see [`ETH_HLEN`]
    /// for the adjustments; a frame may be received shorter).
    #[must_use]
    pub const fn is_empty(&self) -> bool {
        self.data_end == self.data
    }

    /// Metadata length (`data - data_meta`).
    #[must_use]
    pub const fn meta_len(&self) -> usize {
        self.data - self.data_meta
    }

    /// Bytes between the reserved area and the metadata: how far [`XdpBuff::adjust_head`] can
    /// grow the frame at the front.
    #[must_use]
    pub const fn headroom(&self) -> usize {
        self.data_meta - XDP_FRAME_RESERVED
    }

    /// Zeroes the headroom (the bytes [`XdpBuff::adjust_head`] and [`XdpBuff::adjust_meta`] can
    /// grow into), as the kernel's `BPF_PROG_TEST_RUN` buffer holds zeros there; a driver's page
    /// holds whatever was there before.
    pub fn clear_headroom(&mut self) {
        if let Some(h) = self.page.get_mut(XDP_FRAME_RESERVED..self.data_meta) {
            h.fill(0);
        }
    }

    /// Bytes after the frame that [`XdpBuff::adjust_tail`] can grow into.
    #[must_use]
    pub const fn tailroom(&self) -> usize {
        self.hard_end() - self.data_end
    }

    /// The highest end the frame may have: the page less the tailroom, or the received frame's
    /// end when that is later (a UMEM frame that reaches into the last bytes of its chunk). No
    /// field keeps it: the high-water mark starts at the received end and only moves up to this
    /// bound, so the larger of the two is the bound itself.
    const fn hard_end(&self) -> usize {
        let base = self.page.len().saturating_sub(XDP_TAILROOM_RESERVED);
        if self.high_water > base {
            self.high_water
        } else {
            base
        }
    }

    /// Offsets of metadata start, data start and data end from the page start.
    #[must_use]
    pub const fn offsets(&self) -> (usize, usize, usize) {
        (self.data_meta, self.data, self.data_end)
    }

    /// The RX queue and port the frame arrived on.
    #[must_use]
    pub const fn rxq(&self) -> XdpRxq {
        self.rxq
    }

    /// RX queue index (`ctx->rx_queue_index`).
    #[must_use]
    pub const fn rx_queue_index(&self) -> u16 {
        self.rxq.queue_index
    }

    /// Ingress port (`ctx->ingress_ifindex` stands for a device; here, the CMAC port).
    #[must_use]
    pub const fn ingress_port(&self) -> u8 {
        self.rxq.port
    }

    /// The shell's RX hash of the frame and its type (Linux `bpf_xdp_metadata_rx_hash`).
    ///
    /// # Errors
    ///
    /// [`XdpError::NoData`] when the queue's XDP context computes no hashes.
    pub const fn rx_hash(&self) -> Result<XdpRxHash, XdpError> {
        match self.hash {
            Some(h) => Ok(h),
            None => Err(XdpError::NoData),
        }
    }

    /// Moves the frame start by `delta` bytes (negative: grow into the headroom, e.g. to push an
    /// encapsulation header; positive: shrink, e.g. to pop one). Metadata moves with the data.
    ///
    /// # Errors
    ///
    /// [`XdpError::OutOfBounds`] if the metadata would reach into the reserved area or fewer than
    /// [`ETH_HLEN`] bytes would remain.
    pub fn adjust_head(&mut self, delta: isize) -> Result<(), XdpError> {
        let meta_len = self.meta_len();
        let data = self.data.checked_add_signed(delta).ok_or(XdpError::OutOfBounds)?;
        let lowest = XDP_FRAME_RESERVED + meta_len;
        if data < lowest || data.saturating_add(ETH_HLEN) > self.data_end {
            return Err(XdpError::OutOfBounds);
        }
        let meta = data - meta_len;
        if meta_len > 0 {
            self.page.copy_within(self.data_meta..self.data, meta);
        }
        self.data_meta = meta;
        self.data = data;
        Ok(())
    }

    /// Moves the frame end by `delta` bytes (positive: grow into the tailroom, the new bytes are
    /// zeroed; negative: trim, e.g. a trailer).
    ///
    /// # Errors
    ///
    /// [`XdpError::OutOfBounds`] if the end would pass the tailroom or fewer than [`ETH_HLEN`]
    /// bytes would remain.
    pub fn adjust_tail(&mut self, delta: isize) -> Result<(), XdpError> {
        let end = self
            .data_end
            .checked_add_signed(delta)
            .ok_or(XdpError::OutOfBounds)?;
        if end > self.hard_end() || end < self.data.saturating_add(ETH_HLEN) {
            return Err(XdpError::OutOfBounds);
        }
        if end > self.data_end {
            if let Some(new) = self.page.get_mut(self.data_end..end) {
                new.fill(0);
            }
        }
        self.data_end = end;
        self.high_water = self.high_water.max(end);
        Ok(())
    }

    /// Moves the metadata start by `delta` bytes (negative: grow the metadata area in front of
    /// the data).
    ///
    /// # Errors
    ///
    /// [`XdpError::OutOfBounds`] if it would reach into the reserved area or past the data start;
    /// [`XdpError::MetaLength`] if the length would exceed [`XDP_META_MAX`] or not be a multiple
    /// of [`XDP_META_ALIGN`].
    pub fn adjust_meta(&mut self, delta: isize) -> Result<(), XdpError> {
        let meta = self
            .data_meta
            .checked_add_signed(delta)
            .ok_or(XdpError::OutOfBounds)?;
        if meta < XDP_FRAME_RESERVED || meta > self.data {
            return Err(XdpError::OutOfBounds);
        }
        let len = self.data - meta;
        if len > XDP_META_MAX || !len.is_multiple_of(XDP_META_ALIGN) {
            return Err(XdpError::MetaLength);
        }
        self.data_meta = meta;
        Ok(())
    }

    /// Chooses entry `target` of the redirect table and returns [`super::XdpAction::Redirect`],
    /// as `bpf_redirect_map` does: `return xdp.redirect(1);`.
    pub fn redirect(&mut self, target: u32) -> super::XdpAction {
        self.redirect = Some(target);
        super::XdpAction::Redirect
    }

    /// The redirect target chosen by [`XdpBuff::redirect`], if any.
    #[must_use]
    pub const fn redirect_target(&self) -> Option<u32> {
        self.redirect
    }

    /// The whole page, writable, for a program runner that works on raw pointers (a C trampoline
    /// building a kernel `xdp_buff`). The CPU may then have written anywhere up to the tailroom;
    /// DMA syncs account for that.
    pub fn page_mut(&mut self) -> &mut [u8] {
        self.high_water = self.hard_end();
        self.page
    }

    /// Sets all three offsets at once, as a raw runner reports them back after the program.
    ///
    /// # Errors
    ///
    /// [`XdpError::OutOfBounds`] or [`XdpError::MetaLength`] for offsets that break the layout
    /// (the same rules as the `adjust_*` methods); nothing changes then.
    pub fn set_offsets(&mut self, data_meta: usize, data: usize, data_end: usize) -> Result<(), XdpError> {
        if data_meta < XDP_FRAME_RESERVED
            || data_meta > data
            || data_end > self.hard_end()
            || data.saturating_add(ETH_HLEN) > data_end
        {
            return Err(XdpError::OutOfBounds);
        }
        let meta_len = data - data_meta;
        if meta_len > XDP_META_MAX || !meta_len.is_multiple_of(XDP_META_ALIGN) {
            return Err(XdpError::MetaLength);
        }
        self.data_meta = data_meta;
        self.data = data;
        self.data_end = data_end;
        self.high_water = self.high_water.max(data_end);
        Ok(())
    }

    /// Highest frame end the buffer had (bytes the CPU may have written, for DMA syncs).
    #[must_use]
    pub(crate) const fn high_water(&self) -> usize {
        self.high_water
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rss::RssHashType;

    fn page() -> [u8; 4096] {
        let mut p = [0xAAu8; 4096];
        for (i, b) in p[256..356].iter_mut().enumerate() {
            *b = i as u8;
        }
        p
    }

    fn rxq() -> XdpRxq {
        XdpRxq {
            queue_index: 3,
            port: 1,
        }
    }

    #[test]
    fn swap_macs_exchanges_the_two_addresses_and_nothing_else() {
        // Every length from empty to past the addresses: the addresses swapped from 12 bytes
        // on, shorter frames and every byte after the addresses unchanged.
        for len in 0..20usize {
            let frame: [u8; 20] = core::array::from_fn(|i| (i as u8).wrapping_mul(37) ^ 0x5A);
            let mut got = frame;
            swap_macs(&mut got[..len]);
            let mut want = frame;
            if len >= 2 * ETH_ALEN {
                want[..ETH_ALEN].copy_from_slice(&frame[ETH_ALEN..2 * ETH_ALEN]);
                want[ETH_ALEN..2 * ETH_ALEN].copy_from_slice(&frame[..ETH_ALEN]);
            }
            assert_eq!(got, want, "{len} bytes");
            swap_macs(&mut got[..len]);
            assert_eq!(got, frame, "{len} bytes: twice is the identity");
        }
    }

    #[test]
    fn construction_is_checked() {
        let mut p = page();
        assert_eq!(
            XdpBuff::new(&mut p, 39, 100, rxq()).unwrap_err(),
            XdpError::OutOfBounds
        );
        assert_eq!(
            XdpBuff::new(&mut p, 256, 3521, rxq()).unwrap_err(),
            XdpError::OutOfBounds
        );
        assert_eq!(
            XdpBuff::new(&mut p, 256, usize::MAX, rxq()).unwrap_err(),
            XdpError::OutOfBounds
        );
        let mut small = [0u8; 100];
        assert_eq!(
            XdpBuff::new(&mut small, 40, 10, rxq()).unwrap_err(),
            XdpError::OutOfBounds
        );
        let b = XdpBuff::new(&mut p, 256, 3520, rxq()).unwrap();
        assert_eq!((b.headroom(), b.tailroom(), b.page.len()), (216, 0, 4096));
        assert_eq!((b.rx_queue_index(), b.ingress_port()), (3, 1));
        assert_eq!(b.rx_hash(), Err(XdpError::NoData));
    }

    #[test]
    fn received_frames_sit_at_the_headroom_and_need_room_before_the_tailroom() {
        let mut p = page();
        let b = XdpBuff::received(&mut p, RxLen::for_test(3520), rxq()).unwrap();
        assert_eq!(b.offsets(), (256, 256, 3776));
        assert_eq!((b.tailroom(), b.high_water()), (0, 3776));
        // A view shorter than a page (a UMEM frame behind a headroom) holds every frame that ends
        // inside it; one that reaches past its tailroom has none to grow into.
        let mut short = [0u8; 4095];
        let b = XdpBuff::received(&mut short, RxLen::for_test(3519), rxq()).unwrap();
        assert_eq!((b.offsets(), b.tailroom()), ((256, 256, 3775), 0));
        let b = XdpBuff::received(&mut short, RxLen::for_test(3520), rxq()).unwrap();
        assert_eq!((b.offsets(), b.tailroom()), ((256, 256, 3776), 0));
        let mut tiny = [0u8; 256 + 59];
        assert_eq!(
            XdpBuff::received(&mut tiny, RxLen::for_test(60), rxq()).unwrap_err(),
            XdpError::OutOfBounds
        );
        let mut two_k = [0u8; 2048];
        assert_eq!(
            XdpBuff::received(&mut two_k, RxLen::for_test(1793), rxq()).unwrap_err(),
            XdpError::OutOfBounds
        );
    }

    /// A 2 KiB UMEM chunk without UMEM headroom: a 1514-byte frame ends 42 bytes into the last
    /// 320 bytes of the chunk. It may shrink and grow back, never past where the device wrote it,
    /// by the adjustments and by a raw runner's offsets alike; a short frame of the same chunk
    /// keeps the tailroom.
    #[test]
    fn a_frame_in_the_last_bytes_of_its_chunk_cannot_grow_past_it() {
        let mut chunk = [0u8; 2048];
        let mut b = XdpBuff::received(&mut chunk, RxLen::for_test(1514), rxq()).unwrap();
        assert_eq!((b.offsets().2, b.tailroom()), (1770, 0));
        assert_eq!(b.adjust_tail(1), Err(XdpError::OutOfBounds));
        b.adjust_tail(-100).unwrap();
        assert_eq!(b.tailroom(), 100);
        assert_eq!(b.adjust_tail(101), Err(XdpError::OutOfBounds));
        b.adjust_tail(100).unwrap();
        assert_eq!((b.len(), b.tailroom()), (1514, 0));
        assert_eq!(b.set_offsets(256, 256, 1771), Err(XdpError::OutOfBounds));
        b.set_offsets(248, 256, 1770).unwrap();
        assert_eq!(b.page_mut().len(), 2048);
        assert_eq!(b.high_water(), 1770);
        let mut b = XdpBuff::received(&mut chunk, RxLen::for_test(1400), rxq()).unwrap();
        assert_eq!(b.tailroom(), 2048 - 320 - 1656);
        assert_eq!(b.adjust_tail(73), Err(XdpError::OutOfBounds));
        b.adjust_tail(72).unwrap();
        assert_eq!(b.offsets().2, 1728);
    }

    /// Over views of every length class and frames of every length that fit: the frame's end
    /// plus its tailroom never passes the view, and growing one byte past the tailroom fails.
    #[test]
    fn no_received_frame_grows_past_its_view() {
        let mut view = [0u8; 4096];
        for view_len in (256..=4096).step_by(61) {
            for len in (1..=3520u16).step_by(37) {
                let Ok(mut b) = XdpBuff::received(&mut view[..view_len], RxLen::for_test(len), rxq()) else {
                    assert!(256 + usize::from(len) > view_len, "{view_len} {len}");
                    continue;
                };
                let end = b.offsets().2 + b.tailroom();
                assert!(end <= view_len, "{view_len} {len}");
                assert!(end >= view_len.saturating_sub(320), "{view_len} {len}");
                let grow = b.tailroom() as isize + 1;
                assert_eq!(b.adjust_tail(grow), Err(XdpError::OutOfBounds));
            }
        }
    }

    #[test]
    fn clearing_the_headroom_zeroes_it_and_leaves_the_rest() {
        let mut p = page();
        let mut b = XdpBuff::new(&mut p, 256, 100, rxq()).unwrap();
        b.adjust_meta(-8).unwrap();
        b.meta_mut().fill(7);
        b.clear_headroom();
        assert_eq!(b.meta(), [7; 8]);
        assert_eq!(b.data()[..4], [0, 1, 2, 3]);
        assert!(b.page[XDP_FRAME_RESERVED..248].iter().all(|&x| x == 0));
        assert!(b.page[..XDP_FRAME_RESERVED].iter().all(|&x| x == 0xAA));
        // The metadata moves with the data and leaves its old bytes behind, as in the kernel.
        b.adjust_head(-16).unwrap();
        assert_eq!(b.meta(), [7; 8]);
        assert_eq!(b.data()[..8], [0; 8]);
        assert_eq!(b.data()[8..16], [7; 8]);
    }

    #[test]
    fn head_moves_within_the_headroom_and_keeps_an_ethernet_header() {
        let mut p = page();
        let mut b = XdpBuff::new(&mut p, 256, 100, rxq()).unwrap();
        b.adjust_head(-216).unwrap();
        assert_eq!(b.offsets(), (40, 40, 356));
        assert_eq!(b.adjust_head(-1), Err(XdpError::OutOfBounds));
        b.adjust_head(216 + 86).unwrap();
        assert_eq!(b.len(), 14);
        assert_eq!(b.data()[0], 86);
        assert_eq!(b.adjust_head(1), Err(XdpError::OutOfBounds));
        assert_eq!(b.adjust_head(isize::MIN), Err(XdpError::OutOfBounds));
        assert_eq!(b.adjust_head(isize::MAX), Err(XdpError::OutOfBounds));
        assert_eq!(b.offsets(), (342, 342, 356));
    }

    #[test]
    fn head_carries_the_metadata_along() {
        let mut p = page();
        let mut b = XdpBuff::new(&mut p, 256, 100, rxq()).unwrap();
        b.adjust_meta(-8).unwrap();
        b.meta_mut().copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        b.adjust_head(-20).unwrap();
        assert_eq!(b.meta(), [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(b.offsets(), (228, 236, 356));
        // The metadata counts against the headroom.
        assert_eq!(b.headroom(), 188);
        assert_eq!(b.adjust_head(-189), Err(XdpError::OutOfBounds));
        b.adjust_head(-188).unwrap();
        assert_eq!(b.offsets(), (40, 48, 356));
    }

    #[test]
    fn tail_grows_zeroed_up_to_the_tailroom() {
        let mut p = page();
        let mut b = XdpBuff::new(&mut p, 256, 100, rxq()).unwrap();
        b.adjust_tail(20).unwrap();
        assert_eq!(&b.data()[100..], [0; 20]);
        assert_eq!(b.tailroom(), 4096 - 320 - 376);
        let room = b.tailroom() as isize;
        assert_eq!(b.adjust_tail(room + 1), Err(XdpError::OutOfBounds));
        b.adjust_tail(room).unwrap();
        assert_eq!(b.tailroom(), 0);
        b.adjust_tail(-(b.len() as isize) + 14).unwrap();
        assert_eq!(b.len(), 14);
        assert_eq!(b.adjust_tail(-1), Err(XdpError::OutOfBounds));
        // The high-water mark remembers how far the CPU may have written.
        assert_eq!(b.high_water(), 4096 - 320);
    }

    #[test]
    fn metadata_length_and_alignment_are_checked() {
        let mut p = page();
        let mut b = XdpBuff::new(&mut p, 256, 100, rxq()).unwrap();
        assert_eq!(b.adjust_meta(-3), Err(XdpError::MetaLength));
        assert_eq!(b.adjust_meta(-36), Err(XdpError::MetaLength));
        assert_eq!(b.adjust_meta(4), Err(XdpError::OutOfBounds));
        b.adjust_meta(-32).unwrap();
        assert_eq!(b.meta_len(), 32);
        b.adjust_meta(28).unwrap();
        assert_eq!(b.meta_len(), 4);
        // Near the reserved area.
        let mut p = page();
        let mut b = XdpBuff::new(&mut p, 44, 100, rxq()).unwrap();
        assert_eq!(b.adjust_meta(-8), Err(XdpError::OutOfBounds));
        b.adjust_meta(-4).unwrap();
        assert_eq!(b.offsets(), (40, 44, 144));
    }

    #[test]
    fn set_offsets_follows_the_same_rules() {
        let mut p = page();
        let mut b = XdpBuff::new(&mut p, 256, 100, rxq()).unwrap();
        assert_eq!(b.set_offsets(30, 256, 356), Err(XdpError::OutOfBounds));
        assert_eq!(b.set_offsets(250, 256, 356), Err(XdpError::MetaLength));
        assert_eq!(b.set_offsets(256, 256, 260), Err(XdpError::OutOfBounds));
        assert_eq!(b.set_offsets(256, 256, 3777), Err(XdpError::OutOfBounds));
        assert_eq!(b.offsets(), (256, 256, 356));
        b.set_offsets(248, 256, 3776).unwrap();
        assert_eq!((b.meta_len(), b.len()), (8, 3520));
    }

    #[test]
    fn rx_hash_reports_the_shell_value_and_type() {
        let hasher = crate::rss::ShellHasher::default();
        let mut frame = [0u8; 64];
        frame[12] = 0x08; // IPv4
        frame[14] = 0x45;
        frame[23] = 17; // UDP
        frame[26..30].copy_from_slice(&[10, 0, 0, 1]);
        frame[30..34].copy_from_slice(&[10, 0, 0, 2]);
        frame[34..38].copy_from_slice(&[0x30, 0x39, 0x00, 0x35]);
        let h = XdpRxHash::compute(&hasher, &frame);
        assert_eq!(h.value, hasher.hash_frame(&frame).value);
        assert_eq!(h.kind, RssHashType::L4Ipv4);
        assert_eq!(h.xdp_type, crate::rss::xdp::TYPE_L4_IPV4_UDP);
        let mut p = page();
        let b = XdpBuff::new(&mut p, 256, 64, rxq()).unwrap().with_rx_hash(h);
        assert_eq!(b.rx_hash(), Ok(h));
    }
}
