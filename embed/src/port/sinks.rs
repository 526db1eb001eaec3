//! The datapath pieces that join the core's queue pair to the host: pages from the host's page
//! pool ([`HostPool`]) or UMEM frames from the XSK pool bound to the queue ([`HostXsk`]), the
//! two providers of the core's [`PageProvider`] seam ([`Bufs`]), packets and redirected frames on a TX
//! ring ([`TxItem`]), and the sinks of a poll ([`Pass`], [`Redirect`], [`Done`], [`HostProg`]).
//!
//! Page custody, as the core counts it: a page is in the host's pool, in an RX ring slot, on the
//! TX ring (XDP_TX), or with the OS (a packet built around it, a redirected frame). The pool gets
//! every page back: recycled directly by the queue's NAPI context, or by the stack when it frees
//! a packet marked for recycling, or by the redirect target when it returns the frame.

use alloc::vec::Vec;

use onic_core::config::RX_HEADROOM;
use onic_core::queue::pool::{PageProvider, PoolPage};
use onic_core::queue::rx::RxFrame;
use onic_core::queue::source::{BufSource, SourceBuf};
use onic_core::queue::tx::{TxDone, TxFrame};
use onic_core::rss::{RssHashType, ShellHasher};
use onic_core::stats::XskStats;
use onic_core::xdp::{RawXdpProgram, RedirectTable, Redirected, XdpBuff, XdpFrame, XdpRxHash};
use onic_core::{PassInfo, RxSink};
use onic_hal::DmaAddr;

use super::host::{FrameAt, Host, Mapped, SkbHash};
use super::umem::{XskBuf, XskTxDesc};

/// The core's [`PageProvider`] over one queue's host page pool.
pub struct HostPool<H: Host> {
    host: H,
    mem: H::QMem,
    /// Calls come from the pool's NAPI context (direct recycling allowed).
    pub(crate) in_napi: bool,
}

impl<H: Host> HostPool<H> {
    /// A provider over `mem`'s pool.
    pub const fn new(host: H, mem: H::QMem) -> Self {
        Self {
            host,
            mem,
            in_napi: false,
        }
    }

    /// The queue memory (pool and XDP registration).
    pub const fn mem(&self) -> H::QMem {
        self.mem
    }
}

impl<H: Host> PageProvider for HostPool<H> {
    type Page = H::Page;

    fn alloc_page(&mut self) -> Option<H::Page> {
        self.host.page_alloc(self.mem)
    }

    fn recycle_direct(&mut self, page: H::Page, dirty_len: usize) {
        self.host.page_put(self.mem, page, dirty_len, self.in_napi);
    }

    fn release_page(&mut self, page: H::Page) {
        self.host.page_put(self.mem, page, 0, self.in_napi);
    }

    fn sync_for_cpu(&self, page: &H::Page, offset: usize, len: usize) {
        self.host.page_sync(page, offset, len, true);
    }

    fn sync_for_device(&self, page: &H::Page, offset: usize, len: usize) {
        self.host.page_sync(page, offset, len, false);
    }
}

/// A buffer of the OS on a TX ring, mapped for the device while it is there.
pub enum TxItem<H: Host> {
    /// A packet of the stack.
    Skb {
        /// The packet.
        skb: H::Skb,
        /// Where the device reads it.
        at: Mapped,
    },
    /// A frame redirected here by another device.
    Xdp {
        /// The frame.
        frame: H::XdpFrame,
        /// Where the device reads it.
        at: Mapped,
    },
    /// A frame of the application's TX ring of queue `qid` (AF_XDP zero copy), on that queue's
    /// XDP_TX ring; its UMEM stays mapped while it is bound.
    Xsk {
        /// The queue whose XSK pool the frame belongs to.
        qid: u16,
        /// The frame.
        desc: XskTxDesc,
    },
}

impl<H: Host> TxItem<H> {
    /// Maps a packet of the stack. `None` if the mapping fails.
    pub fn map_skb(host: &H, skb: H::Skb) -> Option<Self> {
        host.map_skb(skb).map(|at| Self::Skb { skb, at })
    }

    /// Maps a redirected frame. `None` if the mapping fails.
    pub fn map_xdp(host: &H, frame: H::XdpFrame) -> Option<Self> {
        host.map_xdp_frame(frame).map(|at| Self::Xdp { frame, at })
    }

    const fn mapped(&self) -> Mapped {
        match *self {
            Self::Skb { at, .. } | Self::Xdp { at, .. } => at,
            Self::Xsk { desc, .. } => Mapped {
                dma: desc.dma,
                len: desc.len as usize,
            },
        }
    }

    /// Ends the mapping (the buffer goes back to its owner next); a UMEM frame's mapping is the
    /// UMEM's, which outlives it.
    pub fn unmap(&self, host: &H) {
        if !matches!(self, Self::Xsk { .. }) {
            host.unmap(self.mapped());
        }
    }
}

impl<H: Host> TxFrame for TxItem<H> {
    fn dma_addr(&self) -> DmaAddr {
        self.mapped().dma
    }

    fn len(&self) -> usize {
        self.mapped().len
    }

    /// The host pads short packets before they are mapped (Linux: `skb_put_padto`), and
    /// redirected frames come padded by their source; anything still short is refused.
    fn pad_to(&mut self, min_len: usize) -> bool {
        self.len() >= min_len
    }
}

/// Where completed TX buffers go: unmapped, then freed or returned to their owner.
pub struct Done<'a, H: Host> {
    /// The host.
    pub host: &'a H,
    /// The NAPI budget when completing from a poll.
    pub napi_budget: Option<u32>,
}

impl<H: Host> TxDone<TxItem<H>> for Done<'_, H> {
    fn os_done(&mut self, item: TxItem<H>) {
        self.finish(item);
    }

    fn remote_done(&mut self, item: TxItem<H>) {
        self.finish(item);
    }
}

impl<H: Host> Done<'_, H> {
    fn finish(&self, item: TxItem<H>) {
        item.unmap(self.host);
        match item {
            TxItem::Skb { skb, .. } => self.host.skb_done(skb, self.napi_budget),
            // A frame of another device's pool: never recycled directly, even from a NAPI poll
            // (that pool's lockless cache belongs to its own NAPI context, maybe on another CPU).
            TxItem::Xdp { frame, .. } => self.host.xdp_frame_return(frame),
            TxItem::Xsk { qid, desc } => self.host.xsk_tx_done(qid, desc),
        }
    }
}

/// The packet hash of a frame from the shell's hash.
#[must_use]
pub fn skb_hash(h: XdpRxHash) -> Option<SkbHash> {
    match h.kind {
        RssHashType::L4Ipv4 => Some(SkbHash {
            value: h.value,
            kind: 3,
        }),
        RssHashType::L3Ipv4 => Some(SkbHash {
            value: h.value,
            kind: 2,
        }),
        RssHashType::None => None,
    }
}

/// XDP_PASS (and every frame when no program is attached): a packet built around the page,
/// handed to the stack with the shell's hash.
pub struct Pass<'a, H: Host> {
    /// The host.
    pub host: &'a H,
    /// The running poll.
    pub napi: H::Napi,
    /// The queue memory (the page's pool).
    pub mem: H::QMem,
    /// The queue.
    pub qid: u16,
    /// The shell's hash with the key the shell holds; `None`: packets carry no hash
    /// (`ethtool -K rxhash off`).
    pub hasher: Option<&'a ShellHasher>,
}

impl<H: Host> RxSink<Buf<H>> for Pass<'_, H> {
    fn pass(&mut self, frame: RxFrame<Buf<H>>, info: PassInfo) -> Result<(), RxFrame<Buf<H>>> {
        let hash = match (info.hash, self.hasher) {
            (Some(h), _) => skb_hash(h),
            (None, Some(hasher)) => skb_hash(XdpRxHash::compute(hasher, frame.data())),
            (None, None) => None,
        };
        let RxFrame { page, offset, len } = frame;
        let page = match page {
            SourceBuf::Page(page) => page,
            SourceBuf::Xsk(buf) => {
                // A chunk of the application's memory never goes to the stack: a copy does, and
                // the frame stays in its RX slot.
                let buf = SourceBuf::Xsk(buf);
                let meta = usize::from(info.meta_len);
                let start = usize::from(offset).saturating_sub(meta);
                let end = usize::from(offset) + usize::from(len);
                let bytes = buf.bytes().get(start..end).unwrap_or(&[]);
                // CAST: at most `meta_len`, a u8.
                let meta = (usize::from(offset) - start) as u8;
                self.host
                    .rx_deliver_copy(self.mem, self.napi, bytes, meta, self.qid, hash);
                return Err(RxFrame {
                    page: buf,
                    offset,
                    len,
                });
            }
        };
        let at = FrameAt {
            offset,
            len,
            meta: info.meta_len,
        };
        self.host
            .rx_deliver(self.mem, self.napi, page, at, self.qid, hash)
            .map_err(|page| RxFrame {
                page: SourceBuf::Page(page),
                offset,
                len,
            })
    }
}

/// XDP_REDIRECT through the host (the map or interface the program chose).
pub struct Redirect<'a, H: Host> {
    /// The host.
    pub host: &'a H,
    /// The program that chose the target (none attached: nothing can be redirected).
    pub prog: Option<H::Prog>,
    /// The queue memory.
    pub mem: H::QMem,
    /// The queue.
    pub qid: u16,
    /// Whether anything was redirected since the last flush: the host flushes once the poll has
    /// returned (a redirect to this very port may transmit on the same queue).
    pub redirected: bool,
    /// UMEM frames redirected (the application's now, no copy made) and their bytes, for the
    /// XSK pool's counters.
    pub xsk_redirected: (u64, u64),
}

impl<H: Host> RedirectTable<Buf<H>> for Redirect<'_, H> {
    fn redirect(
        &mut self,
        target: Option<u32>,
        frame: XdpFrame<Buf<H>>,
        meta_len: u8,
    ) -> Result<Redirected<Buf<H>>, XdpFrame<Buf<H>>> {
        let Some(prog) = self.prog else {
            return Err(frame);
        };
        let XdpFrame {
            page,
            offset,
            len,
            origin,
        } = frame;
        let at = FrameAt {
            offset,
            len,
            meta: meta_len,
        };
        let r = match page {
            SourceBuf::Page(p) => self
                .host
                .xdp_redirect(prog, self.mem, p, at, target)
                .map_err(SourceBuf::Page),
            SourceBuf::Xsk(b) => {
                let r = self.host.xsk_redirect(prog, self.qid, b, at, target);
                if r.is_ok() {
                    self.xsk_redirected.0 += 1;
                    self.xsk_redirected.1 += u64::from(len);
                }
                r.map_err(SourceBuf::Xsk)
            }
        };
        match r {
            Ok(()) => {
                self.redirected = true;
                Ok(Redirected::Queued)
            }
            Err(page) => Err(XdpFrame {
                page,
                offset,
                len,
                origin,
            }),
        }
    }

    fn flush(&mut self) {}
}

/// An attached program, run through the host.
pub struct HostProg<'a, H: Host> {
    /// The host.
    pub host: &'a H,
    /// The program.
    pub prog: H::Prog,
    /// The queue memory (its RX queue information).
    pub mem: H::QMem,
}

impl<H: Host> RawXdpProgram for HostProg<'_, H> {
    fn run_raw(&mut self, xdp: &mut XdpBuff<'_>) -> u32 {
        let hash = xdp.rx_hash().ok();
        self.host.xdp_run(self.prog, self.mem, xdp, hash)
    }
}

/// UMEM frames an RX refill takes from the host in one call ([`Host::xsk_alloc_batch`]).
pub const XSK_ALLOC_BATCH: usize = 32;

/// The core's provider over the XSK pool the host bound to one queue index.
pub struct HostXsk<H: Host> {
    host: H,
    qid: u16,
    buf_bytes: u32,
    /// Frames taken for the running refill and not yet posted: `batch[next..filled]`.
    batch: Vec<Option<XskBuf<H::Page>>>,
    next: usize,
    filled: usize,
    /// Empty slots of the running refill not yet given a frame (0: no refill runs).
    wanted: usize,
    /// Frames whose chunk was too small for the queue's buffers: given back, never posted.
    pub(crate) too_small: u64,
    /// What went through the pool (its owner, the queue's NAPI context, counts).
    pub(crate) stats: XskStats,
}

impl<H: Host> HostXsk<H> {
    /// The provider of queue `qid`, whose C2H buffers are `buf_bytes` long; `None` when the
    /// host has no memory for its batch.
    pub fn new(host: H, qid: u16, buf_bytes: u32) -> Option<Self> {
        let batch = host.try_vec(XSK_ALLOC_BATCH, |_| None)?;
        Some(Self {
            host,
            qid,
            buf_bytes,
            batch,
            next: 0,
            filled: 0,
            wanted: 0,
            too_small: 0,
            stats: XskStats {
                rx_packets: 0,
                rx_bytes: 0,
                rx_fill_empty: 0,
                tx_packets: 0,
                tx_bytes: 0,
            },
        })
    }

    /// The queue index.
    pub const fn qid(&self) -> u16 {
        self.qid
    }

    /// The next frame: in a refill, from its batch (taken from the host when used up, as many
    /// as the refill still wants); outside one, a single frame from the host.
    fn next_frame(&mut self) -> Option<XskBuf<H::Page>> {
        if self.wanted == 0 {
            return self.host.xsk_alloc(self.qid);
        }
        if self.next == self.filled {
            let want = self.wanted.min(self.batch.len());
            let slots = self.batch.get_mut(..want)?;
            self.filled = self.host.xsk_alloc_batch(self.qid, slots).min(want);
            self.next = 0;
        }
        let buf = self.batch.get_mut(self.next).and_then(Option::take)?;
        self.next += 1;
        self.wanted -= 1;
        Some(buf)
    }
}

impl<H: Host> PageProvider for HostXsk<H> {
    type Page = XskBuf<H::Page>;

    fn alloc_page(&mut self) -> Option<XskBuf<H::Page>> {
        let Some(buf) = self.next_frame() else {
            self.stats.rx_fill_empty += 1;
            return None;
        };
        if buf.fits(self.buf_bytes) {
            return Some(buf);
        }
        // The device would write past the chunk: never posted.
        self.too_small += 1;
        self.host.xsk_free(self.qid, buf);
        None
    }

    fn recycle_direct(&mut self, page: XskBuf<H::Page>, _dirty_len: usize) {
        self.host.xsk_free(self.qid, page);
    }

    fn reuse(&mut self, page: XskBuf<H::Page>, dirty_len: usize) -> Option<XskBuf<H::Page>> {
        let len = dirty_len.min(self.buf_bytes as usize);
        if len > 0 {
            self.sync_for_device(&page, RX_HEADROOM as usize, len);
        }
        Some(page)
    }

    fn release_page(&mut self, page: XskBuf<H::Page>) {
        self.host.xsk_free(self.qid, page);
    }

    fn sync_for_cpu(&self, page: &XskBuf<H::Page>, offset: usize, len: usize) {
        self.host
            .page_sync(&page.page, usize::from(page.headroom) + offset, len, true);
    }

    fn sync_for_device(&self, page: &XskBuf<H::Page>, offset: usize, len: usize) {
        self.host
            .page_sync(&page.page, usize::from(page.headroom) + offset, len, false);
    }

    fn may_run_short(&self) -> bool {
        true
    }

    fn batches(&self) -> bool {
        true
    }

    fn refill_begin(&mut self, empty: usize) {
        self.wanted = empty;
    }

    fn refill_end(&mut self) {
        // A refill that stopped early (a frame too small, a page the device cannot reach)
        // leaves frames of its batch: back to the pool's free list.
        let (next, filled) = (self.next, self.filled);
        for slot in self.batch.iter_mut().take(filled).skip(next) {
            if let Some(buf) = slot.take() {
                self.host.xsk_free(self.qid, buf);
            }
        }
        (self.next, self.filled, self.wanted) = (0, 0, 0);
    }
}

/// The provider of a queue index's NAPI pair: its page pool or its XSK pool.
pub type Bufs<H> = BufSource<HostPool<H>, HostXsk<H>>;
/// A buffer of a queue index's NAPI pair.
pub type Buf<H> = SourceBuf<<H as Host>::Page, XskBuf<<H as Host>::Page>>;
