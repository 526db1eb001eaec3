//! The kernel's services in two halves, as two traits: [`PacketMap`] (making memory the OS owns
//! reachable by the device: the DMA API on a card, the model's attach in simulation mode) and
//! [`Os`] (page pools, packets, XDP programs, statistics publication). [`crate::host::OsHost`]
//! joins one of each into the port's [`onic_embed::port::Host`].
//!
//! The kernel module implements both over the kernel's APIs (`src/kernel/`): `page_pool`,
//! `sk_buff`, `xdp_frame`, `bpf_prog_run_xdp`, `xdp_do_redirect`, `u64_stats_sync`. Host tests
//! implement [`Os`] over plain memory, so the port runs in `cargo test` against the model card
//! through the same host code as in the module.

use core::ptr::NonNull;

use onic_core::stats::PoolStats;
use onic_core::xdp::{XdpBuff, XdpRxHash};
pub use onic_embed::port::{FrameAt, SkbHash};
use onic_hal::grace::GracePeriod;
use onic_hal::{Direction, DmaAddr};

use crate::errno::Errno;

/// Maps memory the OS owns (page-pool pages, packet data) for the device.
///
/// # Safety
///
/// `map_single` returns an address at which the device reaches exactly the `len` bytes at `cpu`
/// (in direction `dir`) until `unmap_single` with the same address, length and direction; the
/// syncs are the DMA API's for a part of such a mapping.
pub unsafe trait PacketMap: 'static {
    /// Maps `len` bytes at `cpu`. `None` when the mapping fails.
    ///
    /// # Safety
    ///
    /// The bytes stay valid until they are unmapped.
    unsafe fn map_single(&self, cpu: NonNull<u8>, len: usize, dir: Direction) -> Option<DmaAddr>;
    /// Ends a mapping made by `map_single`.
    fn unmap_single(&self, dma: DmaAddr, len: usize, dir: Direction);
    /// Hands `len` bytes at `offset` of a mapping to the CPU (`for_cpu`) or to the device.
    fn sync_single(&self, dma: DmaAddr, offset: usize, len: usize, dir: Direction, for_cpu: bool);
    /// The driver takes a page from the OS page pool: returns the address at which the device
    /// reaches it while the driver holds it (bidirectionally), or `None` when it cannot be
    /// reached. With the kernel DMA API the pool mapped the page once (`PP_FLAG_DMA_MAP`) and
    /// that mapping (`page.dma`) is the answer; the model makes the page reachable for as long as
    /// the driver holds it.
    fn hold_page(&self, page: &RawPoolPage) -> Option<DmaAddr>;
    /// The page (or UMEM frame) of `len` bytes held at `dma` leaves the driver (back to the pool,
    /// to the stack, to a redirect target, to the application): the device must no longer reach
    /// it through the driver.
    fn release_page(&self, dma: DmaAddr, len: usize);
}

/// A page of an OS page pool as the pool hands it out, or a UMEM frame as its XSK pool does.
#[derive(Debug)]
pub struct RawPoolPage {
    /// The OS's handle of the page (`struct page *`; a UMEM frame's `struct xdp_buff *`, a TX
    /// frame's first byte).
    pub handle: NonNull<u8>,
    /// CPU address of the first byte (`page_address`; the UMEM chunk's).
    pub virt: NonNull<u8>,
    /// Bytes at `virt`: `PAGE_SIZE` for a page.
    pub len: usize,
    /// Where the device reaches it while the driver holds it (see [`PacketMap::hold_page`]; with the
    /// kernel DMA API, the mapping the pool made once).
    pub dma: DmaAddr,
}

/// A frame of an XSK pool (AF_XDP zero copy) as the OS hands it out: `page` covers the chunk
/// (RX) or the frame (TX), `addr` is the UMEM address of its first byte, `headroom` the UMEM
/// headroom at the chunk's start (0 for TX).
#[derive(Debug)]
pub struct RawXskFrame {
    /// The bytes, and where the device reaches them through the pool's DMA mapping.
    pub page: RawPoolPage,
    /// UMEM address of the first byte.
    pub addr: u64,
    /// UMEM headroom the driver leaves alone.
    pub headroom: u16,
}

/// Operating-system services of one port's datapath. All methods are called under the
/// serialization the port's calls document; handles are plain values the OS gave out.
pub trait Os: GracePeriod + 'static {
    /// An RX queue's OS memory: its page pool, and what XDP knows about the queue
    /// (`xdp_rxq_info` registered with the page pool as its memory model).
    type QMem: Copy + Send;
    /// A packet of the stack handed to transmit (`struct sk_buff *`).
    type Skb: Copy + Send;
    /// A frame another device redirected to this one (`struct xdp_frame *`).
    type XdpFrame: Copy + Send;
    /// An attached XDP program (`struct bpf_prog *`).
    type Prog: Copy;
    /// The NAPI context of the running poll (`struct napi_struct *`).
    type Napi: Copy;

    /// Creates queue `qid`'s page pool (`pages`: the RX ring's size) and registers the queue for
    /// XDP with it as the memory model.
    ///
    /// # Errors
    ///
    /// `ENOMEM` and what the OS reports.
    fn qmem_new(&self, qid: u16, pages: u32, page_pool: bool) -> Result<Self::QMem, Errno>;
    /// Unregisters the queue and destroys its pool (pages still with the stack come back to the
    /// pool later; the OS frees it when the last one does).
    fn qmem_free(&self, mem: Self::QMem);
    /// One page of the pool, or `None`.
    fn pp_alloc(&self, mem: Self::QMem) -> Option<RawPoolPage>;
    /// Gives a page back to its pool; `dirty` bytes after the RX headroom are synced for the
    /// device when the pool maps pages; `direct`: from the pool's own NAPI context.
    fn pp_put(&self, mem: Self::QMem, page: NonNull<u8>, dirty: usize, direct: bool);
    /// The pool's statistics (Linux `page_pool_get_stats`), zero where the OS keeps none.
    fn pp_stats(&self, mem: Self::QMem) -> PoolStats;

    /// Builds a packet around a received frame in place (`build_skb` over the whole page, data at
    /// `offset`, `len` bytes, `meta` bytes of XDP metadata before it), marked for recycling into
    /// the page's pool. `None` when no packet could be allocated (the page stays the driver's).
    fn rx_build(
        &self,
        mem: Self::QMem,
        napi: Self::Napi,
        virt: NonNull<u8>,
        offset: u16,
        len: u16,
        meta: u8,
    ) -> Option<Self::Skb>;
    /// Hands a built packet to the stack (GRO) with its queue and hash.
    fn rx_deliver(&self, napi: Self::Napi, skb: Self::Skb, qid: u16, hash: Option<SkbHash>);

    /// The linear data of a packet to transmit.
    fn skb_data(&self, skb: Self::Skb) -> (NonNull<u8>, usize);
    /// The device has sent a packet (or never will, at teardown): free it. `napi`: the budget of
    /// the NAPI poll that completes it, if any.
    fn skb_done(&self, skb: Self::Skb, napi_budget: Option<u32>);
    /// The data of a redirected frame.
    fn xdpf_data(&self, frame: Self::XdpFrame) -> (NonNull<u8>, usize);
    /// Gives a redirected frame back to its owner (`xdp_return_frame`, never the direct
    /// recycling variant: the frame's pool belongs to another NAPI context).
    fn xdpf_return(&self, frame: Self::XdpFrame);

    /// Whether `prog` can call the RX-metadata kfuncs (Linux: only a device-bound program, 6.3+).
    /// By default it can.
    fn xdp_prog_reads_meta(&self, prog: Self::Prog) -> bool {
        let _ = prog;
        true
    }

    /// Runs `prog` on `buff` (a kernel `xdp_buff` over the same page and offsets, with the queue's
    /// `xdp_rxq_info`, and `hash` for the RX-metadata hash callback) and writes the offsets the
    /// program left back into `buff`. Returns the raw verdict.
    fn xdp_run(
        &self,
        prog: Self::Prog,
        mem: Self::QMem,
        buff: &mut XdpBuff<'_>,
        hash: Option<XdpRxHash>,
    ) -> u32;
    /// Carries out the program's REDIRECT for the frame at `offset`/`len` of the page, with the
    /// `meta` bytes of XDP metadata the program left in front of it (`xdp_do_redirect`, the
    /// metadata valid). `true`: the OS took the page (it comes back to the pool through
    /// `xdp_return_frame`).
    fn xdp_redirect(&self, prog: Self::Prog, mem: Self::QMem, page: &RawPoolPage, frame: FrameAt) -> bool;

    // AF_XDP zero copy, called from queue `qid`'s NAPI context (`xsk_room` also under RTNL).
    // An OS without it keeps the defaults: no pool is ever bound.

    /// Bytes of each frame of the XSK pool bound to queue `qid` in zero-copy mode that the
    /// driver may use (chunk less UMEM headroom), `None` without one.
    fn xsk_room(&self, qid: u16) -> Option<u32> {
        let _ = qid;
        None
    }
    /// Up to `max` frames of that pool (`xsk_buff_alloc_batch`), handed to `each`; returns how
    /// many. Fewer than `max`: its free list and fill ring ran out. A frame it cannot describe
    /// goes back to the pool, not counted.
    fn xsk_alloc_batch(&self, qid: u16, max: usize, each: &mut dyn FnMut(RawXskFrame)) -> usize {
        let _ = (qid, max, each);
        0
    }
    /// Gives a frame `xsk_alloc_batch` handed out back to its pool (`xsk_buff_free`).
    fn xsk_free(&self, handle: NonNull<u8>) {
        let _ = handle;
    }
    /// The program's REDIRECT of a frame of the pool, `frame` counted from the chunk's first
    /// byte after the UMEM headroom (`xdp_do_redirect`). `true`: the frame is no longer the
    /// driver's.
    fn xsk_redirect(&self, prog: Self::Prog, handle: NonNull<u8>, frame: FrameAt) -> bool {
        let _ = (prog, handle, frame);
        false
    }
    /// A packet holding a copy of `frame` (`meta` bytes of XDP metadata, then the packet), for
    /// [`Os::rx_deliver`]; `None` when none could be allocated.
    fn rx_copy(&self, napi: Self::Napi, frame: &[u8], meta: u8) -> Option<Self::Skb> {
        let _ = (napi, frame, meta);
        None
    }
    /// Up to `max` frames of the socket's TX ring of queue `qid`, in ring order, each with its
    /// completion reserved and its bytes synced for the device
    /// (`xsk_tx_peek_release_desc_batch`), handed to `each`; returns how many. A descriptor it
    /// cannot describe is completed unsent, not counted.
    fn xsk_tx_take(&self, qid: u16, max: usize, each: &mut dyn FnMut(RawXskFrame)) -> usize {
        let _ = (qid, max, each);
        0
    }
    /// Completes the oldest TX frame taken from queue `qid` (`xsk_tx_completed`).
    fn xsk_tx_done(&self, qid: u16) {
        let _ = qid;
    }
}
