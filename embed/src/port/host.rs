//! What a [`Port`](super::Port) needs from the operating system it runs in: the [`Host`] trait.
//!
//! A host hands the port its register windows, DMA memory and delay (as associated types), and
//! the OS objects the datapath deals in: per-queue page pools, RX pages, the stack's packets,
//! frames other devices redirected here, XDP programs, statistics publication and allocation
//! that can fail. The kernel module implements it over the kernel's APIs (`page_pool`, `sk_buff`,
//! `xdp_frame`, `bpf_prog_run_xdp`, `u64_stats_sync`); tests implement it over plain memory.
//!
//! Every method is safe to call: where the OS hands out raw memory, the host's own types (its
//! [`Host::Page`], its handles) keep the unsafe on the host's side of the seam.

use alloc::boxed::Box;
use alloc::vec::Vec;

use onic_core::queue::pool::PoolPage;
use onic_core::queue::source::SourceKind;
use onic_core::rss::PublishedHasher;
use onic_core::stats::PoolStats;
use onic_core::xdp::{XdpBuff, XdpRxHash};
use onic_hal::grace::GracePeriod;
use onic_hal::{DelayNs, DmaAddr, DmaMemory, RegisterWindow, SharedLock};

use super::umem::{XskBuf, XskTxDesc};

/// Where the device reads a buffer the host mapped for it, and how many bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapped {
    /// The device address of the first byte.
    pub dma: DmaAddr,
    /// The bytes mapped.
    pub len: usize,
}

/// Where a frame lies in its page: `offset` and `len` of the frame, and `meta` bytes of XDP
/// metadata right in front of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameAt {
    /// Offset of the frame's first byte in the page.
    pub offset: u16,
    /// Frame length.
    pub len: u16,
    /// Bytes of metadata in front of the frame (0 to 32).
    pub meta: u8,
}

/// The RX hash as the OS packet gets it (Linux's `skb_set_hash`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SkbHash {
    /// The 32-bit hash.
    pub value: u32,
    /// Linux's `enum pkt_hash_types`: 2 = `PKT_HASH_TYPE_L3`, 3 = `PKT_HASH_TYPE_L4`.
    pub kind: u8,
}

/// The independently published counter blocks of one queue index: each has exactly one writer,
/// the context that owns the rings it counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum StatBlock {
    /// RX, the XDP verdicts and the XDP_TX ring: the queue's NAPI context.
    Napi = 0,
    /// The stack's TX ring: the holder of the stack's TX queue lock.
    Stack = 1,
    /// The ring of frames other devices redirect here: the holder of its xmit lock.
    Xmit = 2,
    /// What the queue index's earlier rings counted (rings stopped, or replaced by rings on
    /// another buffer source), added up: process context, the index's other contexts stopped.
    /// The live blocks start from zero with each new ring, so a NAPI poll publishes its live
    /// counters as they are, with no addition.
    History = 3,
}

impl StatBlock {
    /// Every block, in index order.
    pub const ALL: [Self; 4] = [Self::Napi, Self::Stack, Self::Xmit, Self::History];
}

/// Operating-system services of one port. Each method is called from the context the port's
/// entry point for it names (see [`crate::port`]); handles are plain values the OS gave out.
pub trait Host: Clone {
    /// The function's QDMA register window (BAR0).
    type Qdma: RegisterWindow;
    /// The shell's register window (BAR2).
    type Shell: RegisterWindow;
    /// The card's context-command lock, shared with the card's other functions.
    type CardLock: SharedLock;
    /// Coherent memory for the rings.
    type Dma: DmaMemory + Clone;
    /// The control path's delay.
    type Delay: DelayNs;
    /// An RX queue's OS memory: its page pool, and what XDP knows about the queue.
    type QMem: Copy + Send;
    /// A page of a queue's pool while the driver holds it: reachable by the device
    /// (bidirectionally) until it goes back to the pool, to the stack or to a redirect target.
    type Page: PoolPage + Send;
    /// A packet of the stack handed to transmit.
    type Skb: Copy + Send;
    /// A frame another device redirected to this one.
    type XdpFrame: Copy + Send;
    /// An attached XDP program.
    type Prog: Copy;
    /// The running NAPI poll.
    type Napi: Copy;
    /// The grace period a new RSS hasher waits out before the old one is reused: every poll
    /// runs inside one of its read-side sections.
    type Grace: GracePeriod;

    /// The ring memory.
    fn dma(&self) -> &Self::Dma;
    /// The grace period of the port's polls.
    fn grace(&self) -> &Self::Grace;

    /// `n` values made by `f`, on the heap, or `None` when the allocation fails (never a panic).
    fn try_vec<T>(&self, n: usize, f: impl FnMut(usize) -> T) -> Option<Vec<T>>;
    /// A hasher under the shell's reset key, on the heap, or `None`.
    fn try_box_hasher(&self) -> Option<Box<PublishedHasher>>;

    /// Creates queue `qid`'s memory for a pair whose RX buffers come from `source`, and
    /// registers the queue for XDP with it: for [`SourceKind::Pages`], a page pool (`pages`: the
    /// RX ring's size) as the memory model; for [`SourceKind::Xsk`], no pool (the frames are the
    /// XSK pool's, whose own registration the host made when it bound it).
    ///
    /// # Errors
    ///
    /// The OS's own code (an errno in the kernel).
    fn qmem_new(&self, qid: u16, pages: u32, source: SourceKind) -> Result<Self::QMem, i32>;
    /// Unregisters the queue and destroys its pool (pages still with the stack come back to the
    /// pool later; the OS frees it when the last one does).
    fn qmem_free(&self, mem: Self::QMem);
    /// One page of the pool, reachable by the device, or `None`.
    fn page_alloc(&self, mem: Self::QMem) -> Option<Self::Page>;
    /// Gives a page back to its pool; `dirty` bytes after the RX headroom are synced for the
    /// device when the pool maps pages; `direct`: from the pool's own NAPI context.
    fn page_put(&self, mem: Self::QMem, page: Self::Page, dirty: usize, direct: bool);
    /// Hands `len` bytes at `offset` of a held page to the CPU (`for_cpu`) or to the device.
    fn page_sync(&self, page: &Self::Page, offset: usize, len: usize, for_cpu: bool);
    /// The pool's statistics, zero where the OS keeps none.
    fn pool_stats(&self, mem: Self::QMem) -> PoolStats;

    /// Builds a packet around a received frame in place (marked for recycling into the page's
    /// pool) and hands it to the stack with its queue and hash. `Err` gives the page back when
    /// no packet could be built (it stays the driver's).
    ///
    /// # Errors
    ///
    /// The page, when no packet could be allocated.
    fn rx_deliver(
        &self,
        mem: Self::QMem,
        napi: Self::Napi,
        page: Self::Page,
        at: FrameAt,
        qid: u16,
        hash: Option<SkbHash>,
    ) -> Result<(), Self::Page>;

    /// Maps a packet of the stack for the device to read. `None` if the mapping fails.
    fn map_skb(&self, skb: Self::Skb) -> Option<Mapped>;
    /// Maps a redirected frame for the device to read. `None` if the mapping fails.
    fn map_xdp_frame(&self, frame: Self::XdpFrame) -> Option<Mapped>;
    /// Ends a mapping made by `map_skb` or `map_xdp_frame`.
    fn unmap(&self, mapped: Mapped);
    /// The device has sent a packet (or never will, at teardown): free it. `napi_budget`: the
    /// budget of the NAPI poll that completes it, if any.
    fn skb_done(&self, skb: Self::Skb, napi_budget: Option<u32>);
    /// Gives a redirected frame back to its owner (never the direct recycling variant: the
    /// frame's pool belongs to another NAPI context).
    fn xdp_frame_return(&self, frame: Self::XdpFrame);

    /// Whether `prog` can ask for a frame's RX-metadata hash. When it cannot, the polls run it
    /// without hashing each frame first (the packets it passes are hashed for the stack as
    /// ever). Called once a poll. By default it can.
    fn prog_reads_rx_hash(&self, prog: Self::Prog) -> bool {
        let _ = prog;
        true
    }

    /// Runs `prog` on `buff` (the queue's `mem` as its RX queue, `hash` for the RX-metadata hash
    /// callback) and writes the offsets the program left back into `buff`. Returns the raw
    /// verdict.
    fn xdp_run(
        &self,
        prog: Self::Prog,
        mem: Self::QMem,
        buff: &mut XdpBuff<'_>,
        hash: Option<XdpRxHash>,
    ) -> u32;
    /// Carries out the program's REDIRECT for the frame `at` in `page`, to `target` when the
    /// program named one through the dispatch (an OS that keeps the target itself, as Linux's
    /// `xdp_do_redirect` does, may ignore it). `Ok`: the OS took the page (it comes back to the
    /// pool by the OS's own path).
    ///
    /// # Errors
    ///
    /// The page, when the redirect failed (it stays the driver's).
    fn xdp_redirect(
        &self,
        prog: Self::Prog,
        mem: Self::QMem,
        page: Self::Page,
        at: FrameAt,
        target: Option<u32>,
    ) -> Result<(), Self::Page>;

    // AF_XDP zero copy. A queue index runs on UMEM frames once the port was told so
    // (`Port::set_queue_source`); the host keeps which XSK pool is bound to which queue index
    // (Linux: `xsk_get_pool_from_qid`). A host without AF_XDP keeps these defaults: no frame to
    // allocate, nothing to send, every redirect and copy refused; the port never switches one of
    // its queues then (`PortError::Unsupported`).

    /// The bytes of each frame of the XSK pool bound to queue index `qid` that the driver may
    /// use (the chunk size less the UMEM headroom), or `None` when no pool is bound. The port
    /// asks before it switches the queue to UMEM frames, and refuses a pool whose frames cannot
    /// hold the RX headroom and a C2H buffer that holds the largest frame (up to the chunk's
    /// end, `config::xsk_room_for`).
    fn xsk_bound(&self, qid: u16) -> Option<u32> {
        let _ = qid;
        None
    }
    /// One frame of the XSK pool bound to queue `qid`, from the pool's free list or its fill
    /// ring, synced for the device (Linux: `xsk_buff_alloc`); `None` when none is left, or an
    /// entry of the fill ring was not a frame the application may hand over (the host refuses
    /// and counts it).
    fn xsk_alloc(&self, qid: u16) -> Option<XskBuf<Self::Page>> {
        let _ = qid;
        None
    }
    /// Up to `out.len()` frames of that pool at once (Linux: `xsk_buff_alloc_batch`), each as
    /// [`Host::xsk_alloc`] gives one, written to the front of `out`; returns how many (fewer:
    /// none was left). The default takes them one at a time.
    fn xsk_alloc_batch(&self, qid: u16, out: &mut [Option<XskBuf<Self::Page>>]) -> usize {
        let mut n = 0;
        for slot in out.iter_mut() {
            let Some(buf) = self.xsk_alloc(qid) else {
                break;
            };
            *slot = Some(buf);
            n += 1;
        }
        n
    }
    /// Gives a frame back to the free list of queue `qid`'s XSK pool (Linux: `xsk_buff_free`):
    /// a dropped frame the RX ring does not keep, every frame of a queue torn down.
    fn xsk_free(&self, qid: u16, buf: XskBuf<Self::Page>) {
        let _ = (qid, buf);
    }
    /// The program's REDIRECT of a UMEM frame of queue `qid` (Linux: `xdp_do_redirect`, which
    /// puts it in the socket's RX ring without a copy when the xskmap names that socket).
    /// `Ok`: the frame is the application's now.
    ///
    /// # Errors
    ///
    /// The frame, when the redirect failed (it stays the driver's).
    fn xsk_redirect(
        &self,
        prog: Self::Prog,
        qid: u16,
        buf: XskBuf<Self::Page>,
        at: FrameAt,
        target: Option<u32>,
    ) -> Result<(), XskBuf<Self::Page>> {
        let _ = (prog, qid, at, target);
        Err(buf)
    }
    /// Hands the stack a copy of a frame of a zero-copy queue (XDP_PASS, or no program): the
    /// stack never keeps a chunk of the application's memory (Linux: `xsk_construct_skb`).
    /// `frame` is the metadata (`meta` bytes) followed by the frame. `false` when the host had
    /// no memory for the copy.
    fn rx_deliver_copy(
        &self,
        mem: Self::QMem,
        napi: Self::Napi,
        frame: &[u8],
        meta: u8,
        qid: u16,
        hash: Option<SkbHash>,
    ) -> bool {
        let _ = (mem, napi, frame, meta, qid, hash);
        false
    }
    /// Up to `out.len()` frames of the application's TX ring of queue `qid`, in ring order, each
    /// checked, synced and with room reserved for its completion, written to the front of `out`
    /// (Linux: `xsk_tx_peek_release_desc_batch`); returns how many, 0 when the ring is empty or
    /// the completion ring has no room.
    fn xsk_tx_take(&self, qid: u16, out: &mut [XskTxDesc]) -> usize {
        let _ = (qid, out);
        0
    }
    /// The device is done with a TX frame of queue `qid` (or never will send it): its address
    /// goes into the completion ring (Linux: `xsk_tx_completed`).
    fn xsk_tx_done(&self, qid: u16, desc: XskTxDesc) {
        let _ = (qid, desc);
    }
}
