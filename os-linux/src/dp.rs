//! The datapath pieces that join the core's queue pair to the OS: pages from the OS page pool
//! ([`OsPool`], the core's [`PageProvider`] seam), packets and redirected frames on the TX ring
//! ([`TxItem`]), and the sinks of an XDP poll ([`Pass`], [`Redirect`], [`Done`], [`OsProg`]).
//!
//! Page custody, as the core counts it: a page is in the OS pool, in an RX ring slot, on the TX
//! ring (XDP_TX), or with the OS (a packet built around it, a redirected frame). The page pool
//! gets every page back: recycled directly by the queue's NAPI context, or by the stack when it
//! frees a packet marked for recycling, or by the redirect target through `xdp_return_frame`.

use onic_core::queue::pool::{PageProvider, PoolPage};
use onic_core::queue::rx::RxFrame;
use onic_core::queue::tx::{TxDone, TxFrame};
use onic_core::rss::{RssHashType, ShellHasher};
use onic_core::stats::{PairStats, QueueCounters, RxStats, TxStats};
use onic_core::xdp::{RawXdpProgram, RedirectTable, Redirected, XdpBuff, XdpFrame, XdpRxHash};
use onic_core::{PassInfo, RxSink};
use onic_hal::{Direction, DmaAddr, PAGE_SIZE};

use crate::os::{Os, PacketMap, RawPoolPage, RedirectedFrame, SkbHash};

/// A page of the OS page pool while the driver holds it.
#[derive(Debug)]
pub struct OsPage {
    raw: RawPoolPage,
}

impl OsPage {
    /// The OS's view of the page.
    #[must_use]
    pub const fn raw(&self) -> &RawPoolPage {
        &self.raw
    }
}

// SAFETY: owning an `OsPage` is owning the page (the pool handed it out and gets it back only
// through this type), so moving it to another thread moves that ownership.
unsafe impl Send for OsPage {}

impl PoolPage for OsPage {
    fn dma_addr(&self) -> DmaAddr {
        self.raw.dma
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `virt` is the page's address, PAGE_SIZE bytes that belong to whoever holds this
        // token (the pool does not touch a page it handed out).
        unsafe { core::slice::from_raw_parts(self.raw.virt.as_ptr(), PAGE_SIZE) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes this the only reference.
        unsafe { core::slice::from_raw_parts_mut(self.raw.virt.as_ptr(), PAGE_SIZE) }
    }
}

/// Pages are mapped both ways: XDP_TX and redirects send a frame from the page it arrived in.
const PAGE_DIR: Direction = Direction::Bidirectional;

/// The core's [`PageProvider`] over an OS page pool.
pub struct OsPool<K: Os, M: PacketMap> {
    os: K,
    mem: K::QMem,
    map: M,
    /// Calls come from the pool's NAPI context (direct recycling allowed).
    pub(crate) in_napi: bool,
}

impl<K: Os, M: PacketMap> OsPool<K, M> {
    /// A provider over `mem`'s pool.
    pub const fn new(os: K, mem: K::QMem, map: M) -> Self {
        Self {
            os,
            mem,
            map,
            in_napi: false,
        }
    }

    /// The queue memory (pool and XDP registration).
    pub const fn mem(&self) -> K::QMem {
        self.mem
    }

    /// The mapping of packet memory.
    pub const fn map(&self) -> &M {
        &self.map
    }

    fn put(&self, page: OsPage, dirty: usize) {
        self.map.release_page(page.raw.dma);
        self.os.pp_put(self.mem, page.raw.handle, dirty, self.in_napi);
    }
}

impl<K: Os, M: PacketMap> PageProvider for OsPool<K, M> {
    type Page = OsPage;

    fn alloc_page(&mut self) -> Option<OsPage> {
        let mut raw = self.os.pp_alloc(self.mem)?;
        // The page is the driver's until `put`, a pass or a redirect releases it.
        match self.map.hold_page(&raw) {
            Some(dma) => raw.dma = dma,
            None => {
                self.os.pp_put(self.mem, raw.handle, 0, self.in_napi);
                return None;
            }
        }
        Some(OsPage { raw })
    }

    fn recycle_direct(&mut self, page: OsPage, dirty_len: usize) {
        self.put(page, dirty_len);
    }

    fn release_page(&mut self, page: OsPage) {
        self.put(page, 0);
    }

    fn sync_for_cpu(&self, page: &OsPage, offset: usize, len: usize) {
        self.map.sync_single(page.raw.dma, offset, len, PAGE_DIR, true);
    }

    fn sync_for_device(&self, page: &OsPage, offset: usize, len: usize) {
        self.map.sync_single(page.raw.dma, offset, len, PAGE_DIR, false);
    }
}

/// A buffer of the OS on the TX ring, mapped for the device while it is there.
pub enum TxItem<K: Os> {
    /// A packet of the stack (`ndo_start_xmit`).
    Skb {
        /// The packet.
        skb: K::Skb,
        /// Where the device reads its data.
        dma: DmaAddr,
        /// Its length.
        len: usize,
    },
    /// A frame redirected here by another device (`ndo_xdp_xmit`).
    Xdp {
        /// The frame.
        frame: K::XdpFrame,
        /// Where the device reads its data.
        dma: DmaAddr,
        /// Its length.
        len: usize,
    },
}

impl<K: Os> TxItem<K> {
    /// Maps a packet of the stack. `None` if the mapping fails.
    pub fn map_skb<M: PacketMap>(os: &K, map: &M, skb: K::Skb) -> Option<Self> {
        let (data, len) = os.skb_data(skb);
        // SAFETY: the packet (and its data) stays alive until `skb_done`, which unmaps first.
        let dma = unsafe { map.map_single(data, len, Direction::ToDevice) }?;
        Some(Self::Skb { skb, dma, len })
    }

    /// Maps a redirected frame. `None` if the mapping fails.
    pub fn map_xdp<M: PacketMap>(os: &K, map: &M, frame: K::XdpFrame) -> Option<Self> {
        let (data, len) = os.xdpf_data(frame);
        // SAFETY: the frame stays alive until `xdpf_return`, which unmaps first.
        let dma = unsafe { map.map_single(data, len, Direction::ToDevice) }?;
        Some(Self::Xdp { frame, dma, len })
    }

    /// Ends the mapping (the buffer goes back to its owner next).
    pub fn unmap<M: PacketMap>(&self, map: &M) {
        let (Self::Skb { dma, len, .. } | Self::Xdp { dma, len, .. }) = *self;
        map.unmap_single(dma, len, Direction::ToDevice);
    }
}

impl<K: Os> TxFrame for TxItem<K> {
    fn dma_addr(&self) -> DmaAddr {
        match *self {
            Self::Skb { dma, .. } | Self::Xdp { dma, .. } => dma,
        }
    }

    fn len(&self) -> usize {
        match *self {
            Self::Skb { len, .. } | Self::Xdp { len, .. } => len,
        }
    }

    /// The glue pads short packets before they are mapped (`skb_put_padto`), and redirected
    /// frames come padded by their source; anything still short is refused.
    fn pad_to(&mut self, min_len: usize) -> bool {
        self.len() >= min_len
    }
}

/// Where completed TX buffers go: unmapped, then freed or returned to their owner.
pub struct Done<'a, K: Os, M: PacketMap> {
    /// The OS.
    pub os: &'a K,
    /// The mapping to end.
    pub map: &'a M,
    /// The NAPI budget when completing from a poll.
    pub napi_budget: Option<u32>,
}

impl<K: Os, M: PacketMap> TxDone<TxItem<K>> for Done<'_, K, M> {
    fn os_done(&mut self, item: TxItem<K>) {
        self.finish(item);
    }

    fn remote_done(&mut self, item: TxItem<K>) {
        self.finish(item);
    }
}

impl<K: Os, M: PacketMap> Done<'_, K, M> {
    fn finish(&self, item: TxItem<K>) {
        item.unmap(self.map);
        match item {
            TxItem::Skb { skb, .. } => self.os.skb_done(skb, self.napi_budget),
            // A frame of another device's pool: never recycled directly, even from a NAPI poll
            // (that pool's lockless cache belongs to its own NAPI context, maybe on another CPU).
            TxItem::Xdp { frame, .. } => self.os.xdpf_return(frame),
        }
    }
}

/// The skb hash of a frame from the shell's hash.
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
pub struct Pass<'a, K: Os, M: PacketMap> {
    /// The OS.
    pub os: &'a K,
    /// The page mapping.
    pub map: &'a M,
    /// The running poll.
    pub napi: K::Napi,
    /// The queue memory (the page's pool).
    pub mem: K::QMem,
    /// The queue.
    pub qid: u16,
    /// The shell's hash with the key the shell holds.
    pub hasher: &'a ShellHasher,
}

impl<K: Os, M: PacketMap> RxSink<OsPage> for Pass<'_, K, M> {
    fn pass(&mut self, frame: RxFrame<OsPage>, info: PassInfo) -> Result<(), RxFrame<OsPage>> {
        let hash = info
            .hash
            .unwrap_or_else(|| XdpRxHash::compute(self.hasher, frame.data()));
        let virt = frame.page.raw.virt;
        let meta = info.meta_len;
        let Some(skb) = self
            .os
            .rx_build(self.mem, self.napi, virt, frame.offset, frame.len, meta)
        else {
            return Err(frame);
        };
        // The packet owns the page now.
        self.map.release_page(frame.page.raw.dma);
        self.os.rx_deliver(self.napi, skb, self.qid, skb_hash(hash));
        Ok(())
    }
}

/// XDP_REDIRECT through the OS (`xdp_do_redirect`: the map or interface the program chose).
pub struct Redirect<'a, K: Os, M: PacketMap> {
    /// The OS.
    pub os: &'a K,
    /// The page mapping.
    pub map: &'a M,
    /// The program that chose the target (none attached: nothing can be redirected).
    pub prog: Option<K::Prog>,
    /// The queue memory.
    pub mem: K::QMem,
    /// Whether anything was redirected since the last flush: the glue calls `xdp_do_flush` once
    /// the poll has returned and the queue's lock is released (a redirect to this very port may
    /// transmit on the same queue).
    pub redirected: bool,
}

impl<K: Os, M: PacketMap> RedirectTable<OsPage> for Redirect<'_, K, M> {
    fn redirect(
        &mut self,
        _target: Option<u32>,
        frame: XdpFrame<OsPage>,
        meta_len: u8,
    ) -> Result<Redirected<OsPage>, XdpFrame<OsPage>> {
        let Some(prog) = self.prog else {
            return Err(frame);
        };
        let at = RedirectedFrame {
            offset: frame.offset,
            len: frame.len,
            meta: meta_len,
        };
        if !self.os.xdp_redirect(prog, self.mem, &frame.page.raw, at) {
            return Err(frame);
        }
        // The OS owns the page now (the target maps it on its own).
        self.map.release_page(frame.page.raw.dma);

        self.redirected = true;
        Ok(Redirected::Queued)
    }

    fn flush(&mut self) {}
}

/// An attached program, run through the OS.
pub struct OsProg<'a, K: Os> {
    /// The OS.
    pub os: &'a K,
    /// The program.
    pub prog: K::Prog,
    /// The queue memory (its `xdp_rxq_info`).
    pub mem: K::QMem,
}

impl<K: Os> RawXdpProgram for OsProg<'_, K> {
    fn run_raw(&mut self, xdp: &mut XdpBuff<'_>) -> u32 {
        let hash = xdp.rx_hash().ok();
        self.os.xdp_run(self.prog, self.mem, xdp, hash)
    }
}

pub use crate::abi::QSTAT_WORDS;

macro_rules! words {
    ($($s:ident . $f:ident),* $(,)?) => {
        /// The counters as the flat words the OS publishes.
        #[must_use]
        pub fn to_words(c: &QueueCounters) -> [u64; QSTAT_WORDS] {
            [$(c.$s.$f),*]
        }

        /// The counters from published words.
        #[must_use]
        pub fn from_words(w: &[u64; QSTAT_WORDS]) -> QueueCounters {
            let mut c = QueueCounters {
                rx: RxStats::default(),
                tx: TxStats::default(),
                pair: PairStats::default(),
                pool: Default::default(),
            };
            let mut i = 0;
            $(
                c.$s.$f = w[i];
                i += 1;
            )*
            debug_assert_eq!(i, QSTAT_WORDS);
            c
        }
    };
}

words!(
    rx.rx_packets,
    rx.rx_bytes,
    rx.recycled,
    rx.to_os,
    rx.to_tx,
    rx.rx_cmpt_errors,
    rx.rx_bad_length,
    rx.rx_multi_buffer,
    rx.rx_no_page,
    rx.refill_alloc_failures,
    rx.cmpt_not_ready,
    rx.c2h_doorbells,
    rx.cmpt_doorbells,
    rx.rearms,
    rx.rearm_rechecks,
    tx.tx_packets,
    tx.tx_bytes,
    tx.queued,
    tx.tx_busy,
    tx.tx_bad_length,
    tx.padded,
    tx.stops,
    tx.wakes,
    tx.doorbells,
    tx.tx_xdp_xmit,
    tx.tx_xdp_xmit_errors,
    pair.rx_xdp_tx,
    pair.rx_xdp_redirect,
    pair.rx_xdp_tx_errors,
    pair.rx_xdp_pass,
    pair.rx_xdp_drop,
    pair.rx_xdp_aborted,
    pair.rx_xdp_invalid,
    pair.rx_xdp_redirect_errors,
    pair.rx_pass_refused,
);
