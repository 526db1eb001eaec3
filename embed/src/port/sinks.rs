//! The datapath pieces that join the core's queue pair to the host: pages from the host's page
//! pool ([`HostPool`], the core's [`PageProvider`] seam), packets and redirected frames on a TX
//! ring ([`TxItem`]), and the sinks of a poll ([`Pass`], [`Redirect`], [`Done`], [`HostProg`]).
//!
//! Page custody, as the core counts it: a page is in the host's pool, in an RX ring slot, on the
//! TX ring (XDP_TX), or with the OS (a packet built around it, a redirected frame). The pool gets
//! every page back: recycled directly by the queue's NAPI context, or by the stack when it frees
//! a packet marked for recycling, or by the redirect target when it returns the frame.

use onic_core::queue::pool::PageProvider;
use onic_core::queue::rx::RxFrame;
use onic_core::queue::tx::{TxDone, TxFrame};
use onic_core::rss::{RssHashType, ShellHasher};
use onic_core::xdp::{RawXdpProgram, RedirectTable, Redirected, XdpBuff, XdpFrame, XdpRxHash};
use onic_core::{PassInfo, RxSink};
use onic_hal::DmaAddr;

use super::host::{FrameAt, Host, Mapped, SkbHash};

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
        }
    }

    /// Ends the mapping (the buffer goes back to its owner next).
    pub fn unmap(&self, host: &H) {
        host.unmap(self.mapped());
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
    /// The shell's hash with the key the shell holds.
    pub hasher: &'a ShellHasher,
}

impl<H: Host> RxSink<H::Page> for Pass<'_, H> {
    fn pass(&mut self, frame: RxFrame<H::Page>, info: PassInfo) -> Result<(), RxFrame<H::Page>> {
        let hash = info
            .hash
            .unwrap_or_else(|| XdpRxHash::compute(self.hasher, frame.data()));
        let RxFrame { page, offset, len } = frame;
        let at = FrameAt {
            offset,
            len,
            meta: info.meta_len,
        };
        self.host
            .rx_deliver(self.mem, self.napi, page, at, self.qid, skb_hash(hash))
            .map_err(|page| RxFrame { page, offset, len })
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
    /// Whether anything was redirected since the last flush: the host flushes once the poll has
    /// returned (a redirect to this very port may transmit on the same queue).
    pub redirected: bool,
}

impl<H: Host> RedirectTable<H::Page> for Redirect<'_, H> {
    fn redirect(
        &mut self,
        target: Option<u32>,
        frame: XdpFrame<H::Page>,
        meta_len: u8,
    ) -> Result<Redirected<H::Page>, XdpFrame<H::Page>> {
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
        match self.host.xdp_redirect(prog, self.mem, page, at, target) {
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
