//! The kernel's side of the datapath traits: [`Os`] over the helpers of `kernel/onic_dp.c`
//! (page_pool, skbs, XDP, u64_stats), [`PacketMap`] over the DMA API on a card.

use core::ffi::c_void;
use core::ptr::NonNull;

use onic_core::stats::{PoolAllocStats, PoolRecycleStats, PoolStats};
use onic_core::xdp::{XdpBuff, XdpRxHash};
use onic_hal::grace::GracePeriod;
use onic_hal::{Direction, DmaAddr, PAGE_SIZE};

use super::backend::{dir, ApiDma, KDma, KernelDma};
use super::ffi;
use crate::abi::XskChunk;
use crate::errno::{Errno, ENOMEM};
use crate::os::{FrameAt, Os, PacketMap, RawPoolPage, RawXskFrame, SkbHash};

/// `XDP_ABORTED`: what a run whose results break the buffer layout counts as.
const XDP_ABORTED: u32 = 0;
/// UMEM frames the glue describes in one call (at most what the host asks for).
const XSK_GLUE_BATCH: usize = 8;

/// Up to `max` frames from the glue, [`XSK_GLUE_BATCH`] a call: `batch(want)` asks the glue for
/// `want` and returns how many the glue gave and how many of those it handed on. A glue call that
/// gives fewer than asked ends the run (the pool or the ring has no more now). Returns the frames
/// handed on.
#[inline(always)]
fn in_glue_batches(max: usize, mut batch: impl FnMut(usize) -> (usize, usize)) -> usize {
    let (mut asked, mut handed) = (0, 0);
    while asked < max {
        let want = (max - asked).min(XSK_GLUE_BATCH);
        let (got, on) = batch(want);
        handed += on;
        asked += want;
        if got < want {
            break;
        }
    }
    handed
}

/// A kernel object handed through the glue (`struct sk_buff *`, `struct xdp_frame *`, a queue's
/// memory, ...): never null, laid out as a pointer (an `Option<KPtr>` is a nullable one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct KPtr(NonNull<c_void>);

impl KPtr {
    /// The object at `p`, or `None` for null.
    pub fn new(p: *mut c_void) -> Option<Self> {
        NonNull::new(p).map(Self)
    }

    /// The pointer, for the C side.
    pub const fn as_ptr(self) -> *mut c_void {
        self.0.as_ptr()
    }
}

// SAFETY: the objects are the kernel's, usable from any CPU; which context may use one when is
// the port's rule (a packet on a ring belongs to that ring's owner), and the handle moves between
// CPUs only as that ownership does.
unsafe impl Send for KPtr {}
// SAFETY: as above; the handle itself is an address, read-only.
unsafe impl Sync for KPtr {}

/// The OS services of one netdev (`struct onic_ndev *`).
#[derive(Clone, Copy)]
pub struct KOs {
    nd: KPtr,
}

impl KOs {
    /// The services of the netdev whose private area is `nd`.
    ///
    /// # Safety
    ///
    /// `nd` is a `struct onic_ndev *` that outlives every port built with this value.
    pub const unsafe fn new(nd: KPtr) -> Self {
        Self { nd }
    }
}

// SAFETY: the handles are kernel objects that any CPU may use under the serialization the port
// documents.
unsafe impl Send for KOs {}
// SAFETY: as above.
unsafe impl Sync for KOs {}

impl Os for KOs {
    type QMem = KPtr;
    type Skb = KPtr;
    type XdpFrame = KPtr;
    type Prog = KPtr;
    type Napi = KPtr;

    fn qmem_new(&self, qid: u16, pages: u32, page_pool: bool) -> Result<KPtr, Errno> {
        let mut err = 0;
        // SAFETY: live netdev (constructor contract); `err` is a valid out pointer.
        let m = unsafe { ffi::onic_qmem_new(self.nd.as_ptr(), qid, pages, page_pool, &mut err) };
        KPtr::new(m).ok_or(if err < 0 { -err } else { ENOMEM })
    }

    fn qmem_free(&self, mem: KPtr) {
        // SAFETY: `mem` came from onic_qmem_new and is freed once (the port's contract).
        unsafe { ffi::onic_qmem_free(mem.as_ptr()) };
    }

    fn pp_alloc(&self, mem: KPtr) -> Option<RawPoolPage> {
        let mut virt = core::ptr::null_mut();
        let mut dma = 0;
        // SAFETY: live queue memory; valid out pointers; called from the pool's owner context.
        let page = unsafe { ffi::onic_pp_alloc(mem.as_ptr(), &mut virt, &mut dma) };
        Some(RawPoolPage {
            handle: NonNull::new(page.cast())?,
            virt: NonNull::new(virt)?,
            len: PAGE_SIZE,
            dma: DmaAddr::new(dma),
        })
    }

    fn pp_put(&self, mem: KPtr, page: NonNull<u8>, dirty: usize, direct: bool) {
        let dirty = u32::try_from(dirty).unwrap_or(u32::MAX);
        // SAFETY: a page of this pool that the driver gives up.
        unsafe { ffi::onic_pp_put(mem.as_ptr(), page.as_ptr().cast(), dirty, direct) };
    }

    fn pp_stats(&self, mem: KPtr) -> PoolStats {
        let mut v = [0u64; 11];
        // SAFETY: live queue memory; `v` holds the 11 values the helper writes.
        unsafe { ffi::onic_pp_stats(mem.as_ptr(), v.as_mut_ptr()) };
        PoolStats {
            alloc: PoolAllocStats {
                fast: v[0],
                slow: v[1],
                slow_high_order: v[2],
                empty: v[3],
                refill: v[4],
                waive: v[5],
            },
            recycle: PoolRecycleStats {
                cached: v[6],
                cache_full: v[7],
                ring: v[8],
                ring_full: v[9],
                released_refcnt: v[10],
            },
            ..PoolStats::default()
        }
    }

    fn rx_build(
        &self,
        mem: KPtr,
        napi: KPtr,
        virt: NonNull<u8>,
        offset: u16,
        len: u16,
        meta: u8,
    ) -> Option<KPtr> {
        // SAFETY: the running poll's queue memory and NAPI; a pool page the driver holds, frame
        // inside it.
        KPtr::new(unsafe {
            ffi::onic_rx_build(mem.as_ptr(), napi.as_ptr(), virt.as_ptr(), offset, len, meta)
        })
    }

    fn rx_deliver(&self, napi: KPtr, skb: KPtr, qid: u16, hash: Option<SkbHash>) {
        let (value, kind) = hash.map_or((0, 0), |h| (h.value, h.kind));
        // SAFETY: a packet built by rx_build in this poll, handed over once.
        unsafe { ffi::onic_rx_deliver(napi.as_ptr(), skb.as_ptr(), qid, value, kind) };
    }

    fn skb_data(&self, skb: KPtr) -> (NonNull<u8>, usize) {
        let mut len = 0;
        // SAFETY: a live packet of the stack.
        let p = unsafe { ffi::onic_skb_data(skb.as_ptr(), &mut len) };
        (NonNull::new(p).unwrap_or(NonNull::dangling()), len)
    }

    fn skb_done(&self, skb: KPtr, napi_budget: Option<u32>) {
        let budget = napi_budget.map_or(-1, |b| i32::try_from(b).unwrap_or(i32::MAX));
        // SAFETY: a packet the ring owned, freed once.
        unsafe { ffi::onic_skb_done(skb.as_ptr(), budget) };
    }

    fn xdpf_data(&self, frame: KPtr) -> (NonNull<u8>, usize) {
        let mut len = 0;
        // SAFETY: a live xdp_frame.
        let p = unsafe { ffi::onic_xdpf_data(frame.as_ptr(), &mut len) };
        (NonNull::new(p).unwrap_or(NonNull::dangling()), len)
    }

    fn xdpf_return(&self, frame: KPtr) {
        // SAFETY: a frame the ring owned, returned once.
        unsafe { ffi::onic_xdpf_return(frame.as_ptr()) };
    }

    fn xdp_run(&self, prog: KPtr, mem: KPtr, buff: &mut XdpBuff<'_>, hash: Option<XdpRxHash>) -> u32 {
        let (meta, data, end) = buff.offsets();
        let (Ok(meta), Ok(data), Ok(end)) = (u32::try_from(meta), u32::try_from(data), u32::try_from(end))
        else {
            return XDP_ABORTED;
        };
        let mut off = [meta, data, end];
        let page = buff.page_mut();
        // The kernel's xdp_buff covers what the buffer does: a page, or a UMEM frame's view (its
        // chunk less the UMEM headroom), so that the program cannot grow a frame past it.
        let Ok(frame_sz) = u32::try_from(page.len()) else {
            return XDP_ABORTED;
        };
        let page = page.as_mut_ptr();
        let (h, t, has) = hash.map_or((0, 0, false), |h| (h.value, h.xdp_type, true));
        // SAFETY: the program and queue memory are live for this poll; `page` is the whole buffer
        // the view describes, `frame_sz` bytes (the kernel's xdp_buff covers exactly those);
        // `off` holds the three offsets.
        let act = unsafe {
            ffi::onic_xdp_run(
                prog.as_ptr(),
                mem.as_ptr(),
                page,
                frame_sz,
                off.as_mut_ptr(),
                h,
                t,
                has,
            )
        };
        let [m, d, e] = off.map(|v| v as usize);
        if buff.set_offsets(m, d, e).is_err() {
            return XDP_ABORTED;
        }
        act
    }

    fn xdp_prog_reads_meta(&self, prog: KPtr) -> bool {
        // SAFETY: a live program (the poll's, inside its RCU read-side section).
        unsafe { ffi::onic_xdp_prog_reads_meta(prog.as_ptr()) }
    }

    fn xdp_redirect(&self, prog: KPtr, mem: KPtr, page: &RawPoolPage, f: FrameAt) -> bool {
        // SAFETY: called right after the program's run on this CPU (the kernel's redirect
        // target is still set); the page is a pool page the driver holds, and the frame and its
        // metadata lie inside it (the core checked the offsets the program left).
        unsafe {
            ffi::onic_xdp_redirect(
                prog.as_ptr(),
                mem.as_ptr(),
                page.virt.as_ptr(),
                f.offset,
                f.len,
                f.meta,
            ) == 0
        }
    }

    fn xsk_room(&self, qid: u16) -> Option<u32> {
        // SAFETY: live netdev; the helper checks `qid`.
        let room = unsafe { ffi::onic_xsk_room(self.nd.as_ptr(), qid) };
        (room > 0).then_some(room)
    }

    // Not inlined: the glue's arrays are on the stack only during the call.
    #[inline(never)]
    fn xsk_alloc_batch(&self, qid: u16, max: usize, each: &mut dyn FnMut(RawXskFrame)) -> usize {
        in_glue_batches(max, |want| {
            let mut chunks = [XskChunk::empty(); XSK_GLUE_BATCH];
            let mut xdps = [core::ptr::null_mut::<c_void>(); XSK_GLUE_BATCH];
            // CAST: at most XSK_GLUE_BATCH.
            // SAFETY: live netdev, called from queue `qid`'s NAPI context (which owns the pool's
            // allocation side); `chunks` and `xdps` hold `want` entries or more.
            let n = unsafe {
                ffi::onic_xsk_alloc_batch(
                    self.nd.as_ptr(),
                    qid,
                    chunks.as_mut_ptr(),
                    xdps.as_mut_ptr(),
                    want as u32,
                )
            } as usize;
            let mut handed = 0;
            for (c, &xdp) in chunks.iter().zip(&xdps).take(n.min(want)) {
                let Some(xdp) = NonNull::new(xdp.cast::<u8>()) else {
                    continue;
                };
                match chunk_frame(xdp, c) {
                    Some(f) => {
                        each(f);
                        handed += 1;
                    }
                    // A chunk the glue could not describe: back to the pool.
                    None => self.xsk_free(xdp),
                }
            }
            (n, handed)
        })
    }

    fn xsk_free(&self, handle: NonNull<u8>) {
        // SAFETY: an xdp_buff of an XSK pool the driver holds, given back once.
        unsafe { ffi::onic_xsk_free(handle.as_ptr().cast()) };
    }

    fn xsk_redirect(&self, prog: KPtr, handle: NonNull<u8>, f: FrameAt) -> bool {
        // SAFETY: called right after the program's run on this CPU; `handle` is an xdp_buff of
        // the pool the driver holds, and the frame and its metadata lie inside its chunk (the
        // core checked the offsets the program left).
        unsafe {
            ffi::onic_xsk_redirect(
                self.nd.as_ptr(),
                prog.as_ptr(),
                handle.as_ptr().cast(),
                f.offset,
                f.len,
                f.meta,
            ) == 0
        }
    }

    fn rx_copy(&self, napi: KPtr, frame: &[u8], meta: u8) -> Option<KPtr> {
        let len = u32::try_from(frame.len()).ok()?;
        // SAFETY: the running poll's NAPI; `frame` is valid for `len` bytes during the call.
        KPtr::new(unsafe { ffi::onic_rx_copy(napi.as_ptr(), frame.as_ptr(), len, meta) })
    }

    // Not inlined: the glue's array is on the stack only during the call.
    #[inline(never)]
    fn xsk_tx_take(&self, qid: u16, max: usize, each: &mut dyn FnMut(RawXskFrame)) -> usize {
        in_glue_batches(max, |want| {
            let mut chunks = [XskChunk::empty(); XSK_GLUE_BATCH];
            // CAST: at most XSK_GLUE_BATCH.
            // SAFETY: live netdev, called from queue `qid`'s NAPI context (the TX ring's only
            // consumer); `chunks` holds `want` entries or more.
            let n = unsafe { ffi::onic_xsk_tx_take(self.nd.as_ptr(), qid, chunks.as_mut_ptr(), want as u32) }
                as usize;
            let mut handed = 0;
            for c in chunks.iter().take(n.min(want)) {
                match NonNull::new(c.virt).and_then(|v| chunk_frame(v, c)) {
                    Some(f) => {
                        each(f);
                        handed += 1;
                    }
                    // A descriptor the glue could not describe: completed unsent.
                    None => self.xsk_tx_done(qid),
                }
            }
            (n, handed)
        })
    }

    fn xsk_tx_done(&self, qid: u16) {
        // SAFETY: live netdev, called from queue `qid`'s NAPI context for a frame taken there.
        unsafe { ffi::onic_xsk_tx_done(self.nd.as_ptr(), qid) };
    }
}

/// A UMEM frame as the glue described it (`handle`: what gives it back).
fn chunk_frame(handle: NonNull<u8>, c: &XskChunk) -> Option<RawXskFrame> {
    Some(RawXskFrame {
        page: RawPoolPage {
            handle,
            virt: NonNull::new(c.virt)?,
            len: usize::try_from(c.len).ok()?,
            dma: DmaAddr::new(c.dma),
        },
        addr: c.addr,
        headroom: u16::try_from(c.headroom).ok()?,
    })
}

// SAFETY: `synchronize_net` returns after an RCU grace period, which waits out every section with
// bottom halves disabled; the module's read-side sections are its NAPI polls (softirq), the only
// places `onic_rs_poll` makes a `ReadSection`.
unsafe impl GracePeriod for KOs {
    fn synchronize(&self) {
        // SAFETY: called from process context (RTNL held: `Rss::set` runs in control calls only).
        unsafe { ffi::onic_synchronize_net() };
    }
}

// SAFETY: dma_map_single / dma_unmap_single / dma_sync_single_range_* of the DMA API for the
// bound device.
unsafe impl PacketMap for KernelDma {
    unsafe fn map_single(&self, cpu: NonNull<u8>, len: usize, d: Direction) -> Option<DmaAddr> {
        let mut dma = 0;
        // SAFETY: valid device; the bytes stay valid until unmapped (caller's contract).
        let r = unsafe { ffi::onic_dma_map_single(self.dev().as_ptr(), cpu.as_ptr(), len, dir(d), &mut dma) };
        (r == 0).then(|| DmaAddr::new(dma))
    }

    fn unmap_single(&self, dma: DmaAddr, len: usize, d: Direction) {
        // SAFETY: a mapping made by map_single with these values.
        unsafe { ffi::onic_dma_unmap_single(self.dev().as_ptr(), dma.get(), len, dir(d)) };
    }

    fn sync_single(&self, dma: DmaAddr, offset: usize, len: usize, d: Direction, for_cpu: bool) {
        if !self.syncs() {
            return;
        }
        // SAFETY: a part of a live mapping.
        unsafe { ffi::onic_dma_sync(self.dev().as_ptr(), dma.get(), offset, len, dir(d), for_cpu) };
    }

    /// The pool mapped the page once (`PP_FLAG_DMA_MAP`); that mapping is the device's.
    fn hold_page(&self, page: &RawPoolPage) -> Option<DmaAddr> {
        Some(page.dma)
    }

    fn release_page(&self, _dma: DmaAddr, _len: usize) {}
}

// SAFETY: the kernel DMA API's mappings (KernelDma), each attached to the model while it lives.
unsafe impl PacketMap for ApiDma {
    unsafe fn map_single(&self, cpu: NonNull<u8>, len: usize, d: Direction) -> Option<DmaAddr> {
        // SAFETY: forwarded contract.
        let dma = unsafe { self.api().map_single(cpu, len, d) }?;
        if self.attach_for(dma, len, d) {
            Some(dma)
        } else {
            self.api().unmap_single(dma, len, d);
            None
        }
    }

    fn unmap_single(&self, dma: DmaAddr, len: usize, d: Direction) {
        self.detach_for(dma, len, d);
        self.api().unmap_single(dma, len, d);
    }

    fn sync_single(&self, dma: DmaAddr, offset: usize, len: usize, d: Direction, for_cpu: bool) {
        self.api().sync_single(dma, offset, len, d, for_cpu);
    }

    /// The pool mapped the page (`PP_FLAG_DMA_MAP`, the kernel's address); the model is told
    /// about it while the driver holds the page.
    fn hold_page(&self, page: &RawPoolPage) -> Option<DmaAddr> {
        self.attach_for(page.dma, page.len, Direction::Bidirectional)
            .then_some(page.dma)
    }

    fn release_page(&self, dma: DmaAddr, len: usize) {
        self.detach_for(dma, len, Direction::Bidirectional);
    }
}

// SAFETY: dispatches to the variants, which uphold the contract.
unsafe impl PacketMap for KDma {
    unsafe fn map_single(&self, cpu: NonNull<u8>, len: usize, d: Direction) -> Option<DmaAddr> {
        match self {
            // SAFETY: forwarded contract.
            Self::Kernel(k) => unsafe { k.map_single(cpu, len, d) },
            // SAFETY: forwarded contract.
            Self::Sim(s) => unsafe { s.map_single(cpu, len, d) },
            // SAFETY: forwarded contract.
            Self::SimApi(a) => unsafe { a.map_single(cpu, len, d) },
        }
    }

    fn unmap_single(&self, dma: DmaAddr, len: usize, d: Direction) {
        match self {
            Self::Kernel(k) => k.unmap_single(dma, len, d),
            Self::Sim(s) => s.unmap_single(dma, len, d),
            Self::SimApi(a) => a.unmap_single(dma, len, d),
        }
    }

    fn sync_single(&self, dma: DmaAddr, offset: usize, len: usize, d: Direction, for_cpu: bool) {
        match self {
            Self::Kernel(k) => k.sync_single(dma, offset, len, d, for_cpu),
            Self::Sim(s) => s.sync_single(dma, offset, len, d, for_cpu),
            Self::SimApi(a) => a.sync_single(dma, offset, len, d, for_cpu),
        }
    }

    fn hold_page(&self, page: &RawPoolPage) -> Option<DmaAddr> {
        match self {
            Self::Kernel(k) => k.hold_page(page),
            Self::Sim(s) => s.hold_page(page),
            Self::SimApi(a) => a.hold_page(page),
        }
    }

    fn release_page(&self, dma: DmaAddr, len: usize) {
        match self {
            Self::Kernel(k) => k.release_page(dma, len),
            Self::Sim(s) => s.release_page(dma, len),
            Self::SimApi(a) => a.release_page(dma, len),
        }
    }
}
