//! The port's [`Host`] over the kernel: an [`Os`] (page pools, packets, XDP, statistics) joined to
//! a [`PacketMap`] that is also the rings' DMA memory (the DMA API on a card, the model's memory
//! in simulation mode). The module's port is `Port<OsHost<KOs, KDma, ...>>`; the host tests run
//! the same code with an `Os` over plain memory.
//!
//! The unsafe here is at the OS's raw memory: a pool page's bytes read through the address the
//! OS gave for it ([`OsPage`]), and packet data mapped for the device for as long as the port
//! holds the packet.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::marker::PhantomData;

use onic_core::queue::pool::PoolPage;
use onic_core::queue::source::SourceKind;
use onic_core::rss::PublishedHasher;
use onic_core::stats::PoolStats;
use onic_core::xdp::{XdpBuff, XdpRxHash};
use onic_embed::port::{FrameAt, Host, Mapped, SkbHash, XskBuf, XskTxDesc};
use onic_hal::{DelayNs, Direction, DmaAddr, DmaMemory, RegisterWindow, SharedLock};

use crate::os::{Os, PacketMap, RawPoolPage};

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
        // SAFETY: `virt` is the page's (or UMEM frame's) address, `len` bytes that belong to
        // whoever holds this value (the pool does not touch what it handed out).
        unsafe { core::slice::from_raw_parts(self.raw.virt.as_ptr(), self.raw.len) }
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        // SAFETY: as in `bytes`; `&mut self` makes this the only reference.
        unsafe { core::slice::from_raw_parts_mut(self.raw.virt.as_ptr(), self.raw.len) }
    }
}

/// Pool pages are mapped both ways: XDP_TX and redirects send a frame from the page it arrived
/// in.
const PAGE_DIR: Direction = Direction::Bidirectional;

/// The register window, delay and card lock types a host names, held by none of its values.
type Parts<R, L, C> = PhantomData<fn() -> (R, L, C)>;

/// The kernel (or a stand-in) as a port's host: `os` for the OS objects, `map` for DMA. `R`, `L`
/// and `C` are the register window, delay and card lock the port is built with.
pub struct OsHost<K, D, R, L, C> {
    os: K,
    map: D,
    parts: Parts<R, L, C>,
}

impl<K, D, R, L, C> OsHost<K, D, R, L, C> {
    /// The host over `os` and `map`.
    pub const fn new(os: K, map: D) -> Self {
        Self {
            os,
            map,
            parts: PhantomData,
        }
    }

    /// The OS half.
    pub const fn os(&self) -> &K {
        &self.os
    }
}

impl<K: Clone, D: Clone, R, L, C> Clone for OsHost<K, D, R, L, C> {
    fn clone(&self) -> Self {
        Self::new(self.os.clone(), self.map.clone())
    }
}

impl<K, D, R, L, C> Host for OsHost<K, D, R, L, C>
where
    K: Os + Clone,
    D: DmaMemory + PacketMap + Clone,
    R: RegisterWindow + 'static,
    L: DelayNs + 'static,
    C: SharedLock + 'static,
{
    type Qdma = R;
    type Shell = R;
    type CardLock = C;
    type Dma = D;
    type Delay = L;
    type QMem = K::QMem;
    type Page = OsPage;
    type Skb = K::Skb;
    type XdpFrame = K::XdpFrame;
    type Prog = K::Prog;
    type Napi = K::Napi;
    type Grace = K;

    fn dma(&self) -> &D {
        &self.map
    }

    fn grace(&self) -> &K {
        &self.os
    }

    fn try_vec<T>(&self, n: usize, f: impl FnMut(usize) -> T) -> Option<Vec<T>> {
        crate::heap::try_vec_with(n, f)
    }

    fn try_box_hasher(&self) -> Option<Box<PublishedHasher>> {
        crate::heap::try_box_default_hasher()
    }

    fn qmem_new(&self, qid: u16, pages: u32, source: SourceKind) -> Result<K::QMem, i32> {
        self.os.qmem_new(qid, pages, source == SourceKind::Pages)
    }

    fn qmem_free(&self, mem: K::QMem) {
        self.os.qmem_free(mem);
    }

    fn page_alloc(&self, mem: K::QMem) -> Option<OsPage> {
        let mut raw = self.os.pp_alloc(mem)?;
        // The page is the driver's until `page_put`, a pass or a redirect releases it.
        match self.map.hold_page(&raw) {
            Some(dma) => raw.dma = dma,
            None => {
                // Not the direct path: a refusal is rare, and the plain put is valid anywhere.
                self.os.pp_put(mem, raw.handle, 0, false);
                return None;
            }
        }
        Some(OsPage { raw })
    }

    fn page_put(&self, mem: K::QMem, page: OsPage, dirty: usize, direct: bool) {
        self.map.release_page(page.raw.dma, page.raw.len);
        self.os.pp_put(mem, page.raw.handle, dirty, direct);
    }

    fn page_sync(&self, page: &OsPage, offset: usize, len: usize, for_cpu: bool) {
        self.map.sync_single(page.raw.dma, offset, len, PAGE_DIR, for_cpu);
    }

    fn pool_stats(&self, mem: K::QMem) -> PoolStats {
        self.os.pp_stats(mem)
    }

    fn rx_deliver(
        &self,
        mem: K::QMem,
        napi: K::Napi,
        page: OsPage,
        at: FrameAt,
        qid: u16,
        hash: Option<SkbHash>,
    ) -> Result<(), OsPage> {
        let Some(skb) = self
            .os
            .rx_build(mem, napi, page.raw.virt, at.offset, at.len, at.meta)
        else {
            return Err(page);
        };
        // The packet owns the page now.
        self.map.release_page(page.raw.dma, page.raw.len);
        self.os.rx_deliver(napi, skb, qid, hash);
        Ok(())
    }

    fn map_skb(&self, skb: K::Skb) -> Option<Mapped> {
        let (data, len) = self.os.skb_data(skb);
        // SAFETY: the packet (and its data) stays alive until `skb_done`, which the port calls
        // only after `unmap`.
        let dma = unsafe { self.map.map_single(data, len, Direction::ToDevice) }?;
        Some(Mapped { dma, len })
    }

    fn map_xdp_frame(&self, frame: K::XdpFrame) -> Option<Mapped> {
        let (data, len) = self.os.xdpf_data(frame);
        // SAFETY: the frame stays alive until `xdp_frame_return`, which the port calls only
        // after `unmap`.
        let dma = unsafe { self.map.map_single(data, len, Direction::ToDevice) }?;
        Some(Mapped { dma, len })
    }

    fn unmap(&self, mapped: Mapped) {
        self.map.unmap_single(mapped.dma, mapped.len, Direction::ToDevice);
    }

    fn skb_done(&self, skb: K::Skb, napi_budget: Option<u32>) {
        self.os.skb_done(skb, napi_budget);
    }

    fn xdp_frame_return(&self, frame: K::XdpFrame) {
        self.os.xdpf_return(frame);
    }

    fn prog_reads_rx_hash(&self, prog: K::Prog) -> bool {
        self.os.xdp_prog_reads_meta(prog)
    }

    fn xdp_run(&self, prog: K::Prog, mem: K::QMem, buff: &mut XdpBuff<'_>, hash: Option<XdpRxHash>) -> u32 {
        self.os.xdp_run(prog, mem, buff, hash)
    }

    /// The kernel keeps the program's target itself (`xdp_do_redirect`).
    fn xdp_redirect(
        &self,
        prog: K::Prog,
        mem: K::QMem,
        page: OsPage,
        at: FrameAt,
        _target: Option<u32>,
    ) -> Result<(), OsPage> {
        if !self.os.xdp_redirect(prog, mem, &page.raw, at) {
            return Err(page);
        }
        // The OS owns the page now (the target maps it on its own).
        self.map.release_page(page.raw.dma, page.raw.len);
        Ok(())
    }

    fn xsk_bound(&self, qid: u16) -> Option<u32> {
        self.os.xsk_room(qid)
    }

    fn xsk_alloc(&self, qid: u16) -> Option<XskBuf<OsPage>> {
        let mut one = [None];
        self.xsk_alloc_batch(qid, &mut one);
        let [buf] = one;
        buf
    }

    fn xsk_alloc_batch(&self, qid: u16, out: &mut [Option<XskBuf<OsPage>>]) -> usize {
        let mut slots = out.iter_mut();
        let mut k = 0;
        let max = slots.len();
        self.os.xsk_alloc_batch(qid, max, &mut |mut f| {
            // The frame is the driver's until `xsk_free`, a redirect or a teardown gives it back.
            let Some(dma) = self.map.hold_page(&f.page) else {
                self.os.xsk_free(f.page.handle);
                return;
            };
            f.page.dma = dma;
            // The OS's frame covers the chunk: its length is the chunk's size.
            let size = u32::try_from(f.page.len).unwrap_or(u32::MAX);
            let buf = XskBuf {
                page: OsPage { raw: f.page },
                addr: f.addr,
                headroom: f.headroom,
                size,
            };
            match slots.next() {
                Some(slot) => {
                    *slot = Some(buf);
                    k += 1;
                }
                // Not reached: the OS hands over at most `max` frames.
                None => self.xsk_free(qid, buf),
            }
        });
        k
    }

    fn xsk_free(&self, _qid: u16, buf: XskBuf<OsPage>) {
        self.map.release_page(buf.page.raw.dma, buf.page.raw.len);
        self.os.xsk_free(buf.page.raw.handle);
    }

    /// The kernel keeps the program's target itself (`xdp_do_redirect`).
    fn xsk_redirect(
        &self,
        prog: K::Prog,
        _qid: u16,
        buf: XskBuf<OsPage>,
        at: FrameAt,
        _target: Option<u32>,
    ) -> Result<(), XskBuf<OsPage>> {
        let (dma, len) = (buf.page.raw.dma, buf.page.raw.len);
        if !self.os.xsk_redirect(prog, buf.page.raw.handle, at) {
            return Err(buf);
        }
        // The application (or, for another target, the pool after a copy) has the frame now.
        self.map.release_page(dma, len);
        Ok(())
    }

    fn rx_deliver_copy(
        &self,
        _mem: K::QMem,
        napi: K::Napi,
        frame: &[u8],
        meta: u8,
        qid: u16,
        hash: Option<SkbHash>,
    ) -> bool {
        let Some(skb) = self.os.rx_copy(napi, frame, meta) else {
            return false;
        };
        self.os.rx_deliver(napi, skb, qid, hash);
        true
    }

    fn xsk_tx_take(&self, qid: u16, out: &mut [XskTxDesc]) -> usize {
        let mut slots = out.iter_mut();
        let mut k = 0;
        let max = slots.len();
        self.os.xsk_tx_take(qid, max, &mut |f| {
            // Not reachable by the device: completed unsent (its completion was reserved).
            let Some(dma) = self.map.hold_page(&f.page) else {
                self.os.xsk_tx_done(qid);
                return;
            };
            let Some(slot) = slots.next() else {
                // Not reached: the OS hands over at most `max` frames.
                self.map.release_page(dma, f.page.len);
                self.os.xsk_tx_done(qid);
                return;
            };
            *slot = XskTxDesc {
                addr: f.addr,
                len: u32::try_from(f.page.len).unwrap_or(u32::MAX),
                dma,
            };
            k += 1;
        });
        k
    }

    fn xsk_tx_done(&self, qid: u16, desc: XskTxDesc) {
        self.map.release_page(desc.dma, desc.len as usize);
        self.os.xsk_tx_done(qid);
    }
}
