//! Driver-only rigs for the benchmarks: the driver's RX and TX queues over [`HostDma`], with the
//! card replaced by a few lines that write what the QDMA would write (completion entries with
//! their color, the status records in the rings' last slots, frame data; the rings' layout and the
//! records' words from [`crate::device`]), so that the driver's own cost can be timed without the
//! model's.
//!
//! The split is always the same: the *device side* of a rig ([`RxRig::produce`],
//! [`TxRig::complete`]) does the card's work and is never timed; the *driver side*
//! ([`RxRig::poll_all`], [`TxRig::xmit`], [`TxRig::reclaim`]) is the driver core's public API and
//! is what a benchmark times. The device side follows the doorbells the driver writes (C2H PIDX,
//! CMPT CIDX, H2C PIDX, latched by a [`DoorbellLatch`]): it only completes descriptors the driver
//! posted and never overruns the completion ring, as the hardware would not.
//!
//! Queue contexts are programmed once, at start, through the recording bus (every operation
//! completes at once); the doorbells of the datapath go to the latch, which costs one store, like
//! a posted MMIO write.

use std::cell::Cell;
use std::sync::atomic::{fence, Ordering};

use onic_core::config::{DeviceConfig, RingSizeIdx, RxQueueConfig, TxQueueConfig};
use onic_core::queue::doorbell::Doorbells;
use onic_core::queue::pair::QueuePair;
use onic_core::queue::pool::{PagePool, PageProvider, PoolConfig, RecycleRing};
use onic_core::queue::rx::RxFrame;
use onic_core::queue::tx::{TxDone, TxFrame, TxQueue, TxSlot};
use onic_core::rss::RxHasher;
use onic_core::xdp::{DevMap, RawXdpProgram, TxTarget, XdpDispatch, XdpFrame};
use onic_core::{Device, PassAll, PassInfo, RxSink, XdpRxq};
use onic_hal::context::QueueSide;
use onic_hal::layout::desc::CmptEntry;
use onic_hal::recording::Recorder;
use onic_hal::regs::qdma;
use onic_hal::{
    Bar, DelayNs, Direction, DmaAddr, DmaMemory, DmaPage, Quiesced, Reg, RegValue, RegisterWindow,
};

use onic_embed::done::FrameDone;
use onic_embed::poll::poll_pair;
use onic_embed::set::assemble_pair;
use onic_embed::tuning::PairSpec;

use crate::device::{status_word, DeviceMemory, DeviceRing};
use crate::hostdma::HostDma;

/// A delay that returns at once (the recording bus completes everything immediately).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoDelay;

impl DelayNs for NoDelay {
    fn delay_ns(&mut self, _ns: u32) {}
}

/// Queues a [`DoorbellLatch`] has room for (one function's worth).
const LATCH_QUEUES: usize = onic_core::config::MAX_QUEUES_PER_FUNCTION as usize;

/// A BAR0 window that keeps the last value written to each queue doorbell (and drops everything
/// else): the device side of a rig reads the driver's producer and consumer indices from it.
#[derive(Debug)]
pub struct DoorbellLatch {
    regs: Vec<Cell<u32>>,
    writes: Cell<u64>,
}

impl Default for DoorbellLatch {
    fn default() -> Self {
        Self::new()
    }
}

impl DoorbellLatch {
    /// All doorbells read 0.
    #[must_use]
    pub fn new() -> Self {
        Self {
            regs: (0..LATCH_QUEUES * 4).map(|_| Cell::new(0)).collect(),
            writes: Cell::new(0),
        }
    }

    fn slot(offset: u32) -> Option<usize> {
        let rel = offset.checked_sub(qdma::DMAP_SEL_BASE)?;
        let i = (rel / 4) as usize;
        (rel % 4 == 0 && i < LATCH_QUEUES * 4).then_some(i)
    }

    /// The last value written to the doorbell `reg` (0 if none).
    #[must_use]
    pub fn latched<F: RegValue>(&self, reg: Reg<F>) -> F {
        F::from_bits(self.latched_at(reg.offset()))
    }

    fn latched_at(&self, offset: u32) -> u32 {
        Self::slot(offset).map_or(0, |i| self.regs[i].get())
    }

    /// Sets a doorbell's value without counting a write (copying what the bring-up wrote).
    pub fn preset<F: RegValue>(&self, reg: Reg<F>, value: F) {
        if let Some(i) = Self::slot(reg.offset()) {
            self.regs[i].set(value.bits());
        }
    }

    /// Doorbell writes so far.
    #[must_use]
    pub fn writes(&self) -> u64 {
        self.writes.get()
    }
}

// SAFETY: one store per write, in program order; nothing is reached (no device); reads return the
// latched value or 0, never touching memory outside the latch; the release fence orders earlier
// DMA-memory writes before the doorbell as the contract asks (the "device" runs on the same
// thread afterwards).
unsafe impl RegisterWindow for DoorbellLatch {
    fn read32(&self, offset: u32) -> u32 {
        self.latched_at(offset)
    }

    fn write32(&self, offset: u32, value: u32) {
        fence(Ordering::Release);
        if let Some(i) = Self::slot(offset) {
            self.regs[i].set(value);
        }
        self.writes.set(self.writes.get() + 1);
    }
}

/// The "page per packet" baseline behind the driver's [`PageProvider`] seam: every page is
/// allocated from the HAL and mapped when the RX path asks for one, and unmapped and freed when it
/// comes back. No cache, no recycling: what a driver without a page pool does.
#[derive(Debug)]
pub struct PagePerPacket<D: DmaMemory> {
    dma: D,
    dir: Direction,
    live: u64,
}

impl<D: DmaMemory> PagePerPacket<D> {
    /// Pages mapped in `dir`.
    pub const fn new(dma: D, dir: Direction) -> Self {
        Self { dma, dir, live: 0 }
    }

    /// Pages handed out and not yet given back.
    #[must_use]
    pub const fn live(&self) -> u64 {
        self.live
    }

    fn free(&mut self, page: DmaPage) {
        self.live -= 1;
        let mem = page.unmap(&self.dma, self.dir);
        self.dma.free_page(mem);
    }
}

impl<D: DmaMemory> PageProvider for PagePerPacket<D> {
    type Page = DmaPage;

    fn alloc_page(&mut self) -> Option<DmaPage> {
        let mem = self.dma.alloc_page().ok()?;
        match self.dma.map_page(mem, self.dir) {
            Ok(p) => {
                self.live += 1;
                Some(p)
            }
            Err((mem, _)) => {
                self.dma.free_page(mem);
                None
            }
        }
    }

    fn recycle_direct(&mut self, page: DmaPage, _dirty_len: usize) {
        self.free(page);
    }

    fn release_page(&mut self, page: DmaPage) {
        self.free(page);
    }

    fn sync_for_cpu(&self, page: &DmaPage, offset: usize, len: usize) {
        self.dma.sync_for_cpu(page, offset, len, self.dir);
    }

    fn sync_for_device(&self, page: &DmaPage, offset: usize, len: usize) {
        self.dma.sync_for_device(page, offset, len, self.dir);
    }
}

/// The page pool type of the rigs.
pub type HostPool<'a> = PagePool<'a, &'a HostDma>;

/// The C2H buffer size of the rigs' RX queues (the driver's default).
fn rig_buf_bytes() -> u32 {
    onic_core::RxQueueConfig::new(onic_core::QueueId::new(0))
        .buf
        .bytes()
}

/// A pool for RX queues of the default buffer size, mapping `FromDevice`.
#[must_use]
pub fn host_pool(dma: &HostDma) -> HostPool<'_> {
    PagePool::new(dma, PoolConfig::rx(Direction::FromDevice, rig_buf_bytes()), None)
}

/// A pool for the XDP rigs: pages mapped both ways (XDP_TX and redirect send them out), and a
/// recycle ring through which redirected pages come back from the target's TX completions.
#[must_use]
pub fn xdp_pool<'a>(dma: &'a HostDma, ring: &'a RecycleRing) -> HostPool<'a> {
    PagePool::new(
        dma,
        PoolConfig::rx(Direction::Bidirectional, rig_buf_bytes()),
        Some(ring),
    )
}

/// Settings of an [`RxRig`].
#[derive(Clone, Copy, Debug)]
pub struct RxRigConfig {
    /// RX queues (1..=64), polled round-robin by one context (at most 63 with `xdp`).
    pub queues: u16,
    /// Size of both the descriptor and the completion ring.
    pub ring: RingSizeIdx,
    /// Poll budget (NAPI's default is 64).
    pub budget: usize,
    /// Length of every frame, in bytes (without FCS).
    pub frame_len: u16,
    /// Whether the device side writes the frame's bytes into the page (needed when a sink reads
    /// them; the drop path does not).
    pub write_data: bool,
    /// Whether the queues' TX queues (XDP_TX) and a redirect target (one more TX queue of the
    /// function, standing for another port's) are started, for [`RxRig::poll_all_with`].
    pub xdp: bool,
    /// Frames the device side completes per queue in one round of a benchmark (as many as the
    /// ring allows when larger).
    pub round: usize,
}

impl RxRigConfig {
    /// One queue, 1024-entry rings, budget 64, 60-byte frames, no data written, no XDP, rounds as
    /// large as the ring allows.
    #[must_use]
    pub fn new() -> Self {
        Self {
            queues: 1,
            ring: RingSizeIdx::new(onic_core::config::RX_RING_SIZE_INDEX_DEFAULT)
                .unwrap_or_else(|_| unreachable!("the default ring size index is valid")),
            budget: 64,
            frame_len: 60,
            write_data: false,
            xdp: false,
            round: usize::MAX,
        }
    }
}

impl Default for RxRigConfig {
    fn default() -> Self {
        Self::new()
    }
}

/// The frames of the rigs' TX queues: redirected frames (XDP_TX frames are pool frames).
pub type RigFrame = XdpFrame<DmaPage>;

/// TX slot storage of one queue.
type RigTxSlots = Vec<TxSlot<DmaPage, RigFrame>>;

/// Storage the queues of a rig borrow: page slots per usable RX descriptor, TX slots per pair and
/// for the redirect target, and each pool's recycle ring.
#[derive(Debug)]
pub struct RxSlots {
    rx: Vec<Vec<Option<DmaPage>>>,
    tx: Vec<RigTxSlots>,
    target: RigTxSlots,
    rings: Vec<RecycleRing>,
}

impl RxSlots {
    /// Storage for `cfg`.
    #[must_use]
    pub fn new(cfg: &RxRigConfig) -> Self {
        let usable = usize::from(cfg.ring.usable());
        let tx_slots = || (0..usable).map(|_| TxSlot::new()).collect::<RigTxSlots>();
        Self {
            rx: (0..cfg.queues)
                .map(|_| (0..usable).map(|_| None).collect())
                .collect(),
            tx: (0..cfg.queues).map(|_| tx_slots()).collect(),
            target: tx_slots(),
            rings: (0..cfg.queues).map(|_| RecycleRing::new()).collect(),
        }
    }
}

/// What the device side of an RX queue remembers: where the rings are and how far it got.
///
/// The timed polls walk the rig's queues, which hold this: a change of its size or layout moves
/// the fields the polls read and changes the instructions callgrind counts for them
/// (docs/benchmarks.md), so the rings are kept as plain addresses and made into
/// [`DeviceRing`]s where they are written.
#[derive(Debug)]
struct RxDeviceSide {
    qid: u16,
    usable: u16,
    desc_base: u64,
    cmpt_base: u64,
    cmpt_stride: u64,
    /// Next C2H descriptor to fill.
    desc_cidx: u16,
    /// Next completion entry to write.
    cmpt_pidx: u16,
    color: bool,
    pkt_id: u16,
}

impl RxDeviceSide {
    fn distance(&self, from: u16, to: u16) -> u16 {
        (to + self.usable - from) % self.usable
    }

    /// The C2H descriptor ring.
    const fn desc(&self) -> DeviceRing {
        DeviceRing::c2h(DmaAddr::new(self.desc_base), self.usable)
    }

    /// The completion ring.
    const fn cmpt(&self) -> DeviceRing {
        DeviceRing::with_entry_bytes(DmaAddr::new(self.cmpt_base), self.cmpt_stride, self.usable)
    }
}

/// The queue pair of a rig queue: its RX queue, its TX queue (started for XDP only) and its page
/// provider.
pub type RigPair<'a, P> = QueuePair<&'a HostDma, P, RigFrame, RigRxStore<'a>, RigTxStore<'a>>;

/// The RX slot storage of a rig queue: borrowed from the rig's [`RxSlots`].
pub type RigRxStore<'a> = &'a mut [Option<DmaPage>];
/// The TX slot storage of a rig queue: borrowed from the rig's [`RxSlots`].
pub type RigTxStore<'a> = &'a mut [TxSlot<DmaPage, RigFrame>];

/// One queue of a rig.
pub struct RigRxQueue<'a, P: PageProvider<Page = DmaPage>> {
    /// The driver's queues and page provider.
    pub pair: RigPair<'a, P>,
    dev: RxDeviceSide,
    /// Caught up in the current [`RxRig::poll_all`].
    caught_up: bool,
}

/// A driver-only RX rig: `queues` RX queues of one function over [`HostDma`], their contexts
/// programmed through the recording bus, their doorbells latched; the device side writes
/// completions straight into the completion rings. With [`RxRigConfig::xdp`], each queue's TX
/// queue and a redirect target are started too.
pub struct RxRig<'a, P: PageProvider<Page = DmaPage>> {
    dma: &'a HostDma,
    latch: &'a DoorbellLatch,
    /// The queues.
    pub queues: Vec<RigRxQueue<'a, P>>,
    /// The redirect target: a TX queue of the function standing for another port's.
    pub target: TxQueue<&'a HostDma, DmaPage, RigFrame, RigTxStore<'a>>,
    /// The recycle ring of each queue's pool, by queue index (the redirect origin).
    rings: Vec<&'a RecycleRing>,
    cfg: RxRigConfig,
    frame: Vec<u8>,
    /// Pages the OS holds during one XDP poll (PASS).
    os: Vec<(DmaPage, usize)>,
}

impl<'a, P: PageProvider<Page = DmaPage>> RxRig<'a, P> {
    /// Builds and starts the queues; `make_pool` gives each queue its page provider (and may
    /// give it the queue's recycle ring).
    ///
    /// # Errors
    ///
    /// A description of what the driver refused.
    pub fn new(
        dma: &'a HostDma,
        latch: &'a DoorbellLatch,
        slots: &'a mut RxSlots,
        cfg: RxRigConfig,
        mut make_pool: impl FnMut(&'a HostDma, &'a RecycleRing) -> P,
    ) -> Result<Self, String> {
        let rec = Recorder::opennic();
        let functions = cfg.queues + u16::from(cfg.xdp);
        let dcfg = DeviceConfig::new(0, functions).map_err(|e| format!("{e:?}"))?;
        let (dev, _) = Device::init(rec.window(Bar::Qdma), rec.window(Bar::Shell), &mut NoDelay, dcfg)
            .map_err(|e| format!("device init: {e:?}"))?;
        let RxSlots {
            rx,
            tx,
            target,
            rings,
        } = slots;
        let rings: Vec<&'a RecycleRing> = rings.iter().collect();
        let mut queues = Vec::new();
        for (q, (rx_slots, tx_slots)) in (0..cfg.queues).zip(rx.iter_mut().zip(tx.iter_mut())) {
            let pool = make_pool(dma, rings[usize::from(q)]);
            let pair = start_rig_pair(dma, &dev, &cfg, q, (rx_slots, tx_slots), pool)?;
            // The bring-up's doorbells went to the recording bus: copy them to the latch.
            let c2h = qdma::dmap_sel_c2h_dsc_pidx(onic_hal::QueueId::new(q));
            latch.preset(c2h, RegValue::from_bits(rec.peek(Bar::Qdma, c2h.offset())));
            let cmpt = qdma::dmap_sel_cmpt_cidx(onic_hal::QueueId::new(q));
            latch.preset(cmpt, RegValue::from_bits(rec.peek(Bar::Qdma, cmpt.offset())));
            let dev_side = RxDeviceSide {
                qid: q,
                usable: cfg.ring.usable(),
                desc_base: pair.rx.desc_ring_dma_addr().get(),
                cmpt_base: pair.rx.cmpt_ring_dma_addr().get(),
                cmpt_stride: pair.rx.config().cmpt_entry.bytes() as u64,
                desc_cidx: 0,
                cmpt_pidx: 0,
                color: true,
                pkt_id: 0,
            };
            queues.push(RigRxQueue {
                pair,
                dev: dev_side,
                caught_up: false,
            });
        }
        let mut target = TxQueue::new(dma, rig_tx_config(&cfg, cfg.queues), target.as_mut_slice())
            .map_err(|e| format!("tx queue: {e:?}"))?;
        if cfg.xdp {
            target
                .start(&dev, &mut NoDelay)
                .map_err(|e| format!("tx start: {e:?}"))?;
        }
        Ok(Self {
            dma,
            latch,
            queues,
            target,
            rings,
            cfg,
            frame: test_frame(usize::from(cfg.frame_len)),
            os: Vec::with_capacity(cfg.budget),
        })
    }

    /// The configuration.
    #[must_use]
    pub const fn config(&self) -> &RxRigConfig {
        &self.cfg
    }

    /// Device side (not timed): completes up to `per_queue` frames on every queue, as many as the
    /// posted descriptors and the free completion entries allow, then writes each queue's status
    /// record. Returns the frames completed.
    ///
    /// # Panics
    ///
    /// If a ring address the driver handed out is not live memory (a driver bug).
    pub fn produce(&mut self, per_queue: usize) -> usize {
        let mut total = 0;
        for q in &mut self.queues {
            let d = &mut q.dev;
            let c2h_pidx = self
                .latch
                .latched(qdma::dmap_sel_c2h_dsc_pidx(onic_hal::QueueId::new(d.qid)))
                .pidx();
            let cmpt_cidx = self
                .latch
                .latched(qdma::dmap_sel_cmpt_cidx(onic_hal::QueueId::new(d.qid)))
                .cidx();
            let posted = d.distance(d.desc_cidx, c2h_pidx);
            let cmpt_free = d.usable - 1 - d.distance(cmpt_cidx, d.cmpt_pidx);
            let n = usize::from(posted.min(cmpt_free)).min(per_queue);
            for _ in 0..n {
                if self.cfg.write_data {
                    let dst = self
                        .dma
                        .device_read_u64(d.desc().entry(d.desc_cidx))
                        .expect("C2H descriptor in live memory");
                    assert!(
                        self.dma.device_write(DmaAddr::new(dst), &self.frame),
                        "C2H buffer in a mapped page"
                    );
                }
                d.pkt_id = d.pkt_id.wrapping_add(1);
                let mut e = CmptEntry::default();
                e.set_color(d.color);
                e.set_qid(d.qid);
                e.set_pkt_len(self.cfg.frame_len);
                e.set_pkt_id(d.pkt_id);
                self.dma
                    .write_word(d.cmpt().entry(d.cmpt_pidx), e.to_word())
                    .expect("completion ring in live memory");
                d.desc_cidx = (d.desc_cidx + 1) % d.usable;
                d.cmpt_pidx = (d.cmpt_pidx + 1) % d.usable;
                if d.cmpt_pidx == 0 {
                    d.color = !d.color;
                }
            }
            self.dma
                .write_word(d.cmpt().status(), status_word(d.cmpt_pidx, cmpt_cidx, d.color))
                .expect("status slot in live memory");
            // The C2H ring's own status record (wbk_en, hardware.md §7.4): how far the device
            // consumed.
            self.dma
                .write_word(d.desc().status(), status_word(c2h_pidx, d.desc_cidx, false))
                .expect("C2H status slot in live memory");
            total += n;
        }
        total
    }

    /// Driver side (what a benchmark times): polls every queue round-robin with the configured
    /// budget until each has caught up and re-armed (NAPI complete). Returns the completions
    /// consumed.
    ///
    /// # Panics
    ///
    /// If a queue enters its error state (the rig wrote something wrong).
    pub fn poll_all<S: RxSink<DmaPage>>(&mut self, sink: &mut S) -> usize {
        self.poll_all_then(sink, |_| {})
    }

    /// As [`RxRig::poll_all`], running `after` on the queue's provider after each poll (the OS
    /// giving back the pages of the frames it was handed, for example). Never inlined: its
    /// instructions are what `valgrind --tool=callgrind --toggle-collect` counts for the RX
    /// workloads (see `docs/benchmarks.md`).
    ///
    /// # Panics
    ///
    /// As [`RxRig::poll_all`].
    #[inline(never)]
    pub fn poll_all_then<S: RxSink<DmaPage>>(
        &mut self,
        sink: &mut S,
        mut after: impl FnMut(&mut P),
    ) -> usize {
        let db = Doorbells::new(self.latch);
        let budget = self.cfg.budget;
        let mut done = FrameDone::new(&self.rings, self.dma);
        let mut total = 0;
        let mut busy = self.queues.len();
        for q in &mut self.queues {
            q.caught_up = false;
        }
        while busy > 0 {
            for (i, q) in self.queues.iter_mut().enumerate().filter(|(_, q)| !q.caught_up) {
                // CAST: at most 64 queues.
                let rxq = XdpRxq {
                    queue_index: i as u16,
                    port: 0,
                };
                let out = poll_pair(&mut q.pair, (budget, &db), (&mut *sink, rxq), PassAll, &mut done).rx;
                after(&mut q.pair.pool);
                assert!(out.error.is_none(), "RX queue error: {:?}", out.error);
                total += out.done;
                if out.armed && !out.more {
                    q.caught_up = true;
                    busy -= 1;
                }
            }
        }
        total
    }

    /// Returns every page in the rings to the providers and the rings to the allocator (the
    /// queues' teardown without the register writes) and hands the providers back.
    pub fn finish(self) -> Vec<P> {
        let mut done = FrameDone::new(&self.rings, self.dma);
        let mut queues = self.queues;
        if let Some(q) = queues.first_mut() {
            // Only redirected frames are on the target: they go back through their rings.
            let proof = finished(QueueSide::Tx, self.target.device_qid());
            self.target.release(&mut q.pair.pool, &mut done, &proof);
        }
        queues
            .into_iter()
            .map(|q| {
                let pair = q.pair;
                let mut pool = pair.pool;
                let proof = finished(QueueSide::Tx, pair.tx.device_qid());
                pair.tx.release(&mut pool, &mut done, &proof);
                let proof = finished(QueueSide::Rx, pair.rx.device_qid());
                pair.rx.release(&mut pool, &proof);
                pool
            })
            .collect()
    }
}

/// The proof that a rig's queue is idle, for the rigs' `finish`: a rig's device side runs only
/// inside the rig's own calls, so once the rig finishes nothing reaches its rings or pages.
fn finished(side: QueueSide, device_qid: Option<onic_hal::AbsQueueId>) -> Quiesced {
    // SAFETY: called only by the rigs' `finish`, after which no device-side call of the rig runs
    // (see above).
    unsafe { Quiesced::assume(side, device_qid.unwrap_or(onic_hal::AbsQueueId::new(0))) }
}

/// The XDP side of a rig built with [`RxRigConfig::xdp`] and the rigs' XDP pools
/// ([`xdp_pool`]).
impl<'a> RxRig<'a, HostPool<'a>> {
    /// Driver side (what an XDP benchmark times): polls every queue pair with
    /// [`QueuePair::poll`] running `prog` (static dispatch; the RX hash computed by `hasher`
    /// for each frame when given) until each caught up and re-armed, then reclaims the redirect
    /// target's TX completions. PASS frames go to the OS, which gives their pages back after each
    /// poll (`return_from_os`, the owning context's path); REDIRECT frames go to the target,
    /// whose completions return their pages through the pools' recycle rings; TX frames go out
    /// on the pair's own TX queue, reclaimed by the pair's next poll. Returns the completions
    /// consumed. Never inlined: its instructions are what callgrind counts for the XDP workloads.
    ///
    /// # Panics
    ///
    /// If a queue enters its error state (the rig wrote something wrong).
    #[inline(never)]
    pub fn poll_all_with<Prog: RawXdpProgram>(
        &mut self,
        prog: &mut Prog,
        hasher: Option<&dyn RxHasher>,
    ) -> usize {
        let db = Doorbells::new(self.latch);
        let Self {
            queues,
            target,
            rings,
            dma,
            cfg,
            os,
            ..
        } = self;
        let mut done = FrameDone::new(rings, *dma);
        let mut total = 0;
        {
            let mut to_target = TxTarget::new(target, &db);
            let mut map: DevMap<'_, DmaPage, 1> = DevMap::new();
            let _ = map.insert(0, &mut to_target);
            for q in queues.iter_mut() {
                q.caught_up = false;
            }
            let mut busy = queues.len();
            while busy > 0 {
                for (i, q) in queues.iter_mut().enumerate().filter(|(_, q)| !q.caught_up) {
                    let mut to_os = |f: RxFrame<DmaPage>, _: PassInfo| -> Result<(), RxFrame<DmaPage>> {
                        os.push((f.page, usize::from(f.len)));
                        Ok(())
                    };
                    // CAST: at most 63 queues.
                    let rxq = XdpRxq {
                        queue_index: i as u16,
                        port: 0,
                    };
                    let dispatch = XdpDispatch {
                        prog: Some(&mut *prog),
                        redirect: &mut map,
                        origin: i as u32,
                        hasher,
                    };
                    let out = poll_pair(
                        &mut q.pair,
                        (cfg.budget, &db),
                        (&mut to_os, rxq),
                        dispatch,
                        &mut done,
                    );
                    for (page, len) in os.drain(..) {
                        q.pair.pool.return_from_os(page, len);
                    }
                    assert!(out.rx.error.is_none(), "RX queue error: {:?}", out.rx.error);
                    total += out.rx.done;
                    if out.rx.armed && !out.rx.more {
                        q.caught_up = true;
                        busy -= 1;
                    }
                }
            }
        }
        target.reclaim(&mut done);
        total
    }

    /// Device side (not timed): everything published on the pairs' TX queues and the redirect
    /// target has been sent (their status records say so).
    pub fn complete_tx(&mut self) {
        let usable = self.cfg.ring.usable();
        for (q, rq) in (0..).zip(&self.queues) {
            complete_h2c(self.dma, self.latch, q, rq.pair.tx.ring_dma_addr(), usable);
        }
        complete_h2c(
            self.dma,
            self.latch,
            self.cfg.queues,
            self.target.ring_dma_addr(),
            usable,
        );
    }
}

/// The TX configuration of queue `qid` of a rig (rings as large as the RX rings).
fn rig_tx_config(cfg: &RxRigConfig, qid: u16) -> TxQueueConfig {
    TxQueueConfig {
        ring: cfg.ring,
        ..TxQueueConfig::new(onic_core::QueueId::new(qid))
    }
}

/// Builds queue pair `q` of a rig and starts its RX queue (and its TX queue for XDP).
fn start_rig_pair<'a, P: PageProvider<Page = DmaPage>>(
    dma: &'a HostDma,
    dev: &Device<onic_hal::recording::RecordingWindow<'_>, onic_hal::recording::RecordingWindow<'_>>,
    cfg: &RxRigConfig,
    q: u16,
    (rx_slots, tx_slots): (RigRxStore<'a>, RigTxStore<'a>),
    pool: P,
) -> Result<RigPair<'a, P>, String> {
    let qid = onic_core::QueueId::new(q);
    let spec = PairSpec::new(qid, cfg.ring, RxQueueConfig::new(qid).buf);
    let mut pair =
        assemble_pair(dma, &spec, (rx_slots, tx_slots), pool).map_err(|e| format!("queue pair: {e:?}"))?;
    if cfg.xdp {
        pair.tx
            .start(dev, &mut NoDelay)
            .map_err(|e| format!("tx start: {e:?}"))?;
    }
    pair.rx
        .start(dev, &mut NoDelay, &mut pair.pool)
        .map_err(|e| format!("rx start: {e:?}"))?;
    Ok(pair)
}

/// Device side of a TX queue (not timed): everything published to the H2C ring of `qid` at
/// `ring` (`usable` entries) has been sent; writes the status record's consumer index.
///
/// # Panics
///
/// If the ring is not live memory (a driver bug).
fn complete_h2c(dma: &HostDma, latch: &DoorbellLatch, qid: u16, ring: DmaAddr, usable: u16) {
    let pidx = latch
        .latched(qdma::dmap_sel_h2c_dsc_pidx(onic_hal::QueueId::new(qid)))
        .pidx();
    dma.write_word(
        DeviceRing::h2c(ring, usable).status(),
        status_word(pidx, pidx, false),
    )
    .expect("H2C status slot in live memory");
}

/// A 60..1514-byte IPv4/UDP test frame with a recognisable payload (byte i of the frame is
/// `i as u8` after the headers).
#[must_use]
pub fn test_frame(len: usize) -> Vec<u8> {
    let len = len.max(60);
    let mut f: Vec<u8> = (0..len).map(|i| i as u8).collect();
    f[..6].copy_from_slice(&[0x00, 0x0A, 0x35, 0xAA, 0xBB, 0xCC]);
    f[6..12].copy_from_slice(&[0x00, 0x0A, 0x35, 0x01, 0x02, 0x03]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    f[14..34].copy_from_slice(&[0x45, 0, 0, 0, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[34..36].copy_from_slice(&1234u16.to_be_bytes());
    f[36..38].copy_from_slice(&4789u16.to_be_bytes());
    f[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

/// A transmit buffer of the "OS" of a [`TxRig`]: mapped once, reused.
#[derive(Debug)]
pub struct OsBuf {
    addr: DmaAddr,
    len: usize,
    /// Bytes of the page from `addr` on that belong to this buffer.
    room: usize,
}

impl TxFrame for OsBuf {
    fn dma_addr(&self) -> DmaAddr {
        self.addr
    }

    fn len(&self) -> usize {
        self.len
    }

    fn buffer_len(&self) -> usize {
        self.room
    }

    fn pad_to(&mut self, min_len: usize) -> bool {
        // The buffers are never shorter than ETH_ZLEN; nothing to zero.
        self.len = self.len.max(min_len);
        true
    }
}

/// Where completed OS buffers go: back on the OS's free list.
#[derive(Debug)]
pub struct FreeList(pub Vec<OsBuf>);

impl TxDone<OsBuf> for FreeList {
    fn os_done(&mut self, frame: OsBuf) {
        self.0.push(frame);
    }

    fn remote_done(&mut self, frame: OsBuf) {
        self.0.push(frame);
    }
}

/// Slot storage of a [`TxRig`].
#[derive(Debug)]
pub struct TxSlots(Vec<TxSlot<DmaPage, OsBuf>>);

impl TxSlots {
    /// Storage for a ring of `ring`'s size.
    #[must_use]
    pub fn new(ring: RingSizeIdx) -> Self {
        Self((0..ring.usable()).map(|_| TxSlot::new()).collect())
    }
}

/// A driver-only TX rig: one TX queue over [`HostDma`]; the OS transmits from pre-mapped buffers
/// and the device side writes the H2C status record as if it had sent everything published.
pub struct TxRig<'a> {
    dma: &'a HostDma,
    latch: &'a DoorbellLatch,
    /// The driver's queue.
    pub tx: TxQueue<&'a HostDma, DmaPage, OsBuf, &'a mut [TxSlot<DmaPage, OsBuf>]>,
    /// The provider for the queue's own-pool frames (unused: only OS frames are sent).
    pub pool: HostPool<'a>,
    /// The OS's free transmit buffers.
    pub free: FreeList,
    pages: Vec<DmaPage>,
    usable: u16,
}

impl<'a> TxRig<'a> {
    /// A started TX queue with ring size `ring` and `buffers` OS buffers of `frame_len` bytes.
    ///
    /// # Errors
    ///
    /// A description of what the driver refused.
    pub fn new(
        dma: &'a HostDma,
        latch: &'a DoorbellLatch,
        slots: &'a mut TxSlots,
        ring: RingSizeIdx,
        buffers: usize,
        frame_len: usize,
    ) -> Result<Self, String> {
        let rec = Recorder::opennic();
        let dcfg = DeviceConfig::new(0, 1).map_err(|e| format!("{e:?}"))?;
        let (dev, _) = Device::init(rec.window(Bar::Qdma), rec.window(Bar::Shell), &mut NoDelay, dcfg)
            .map_err(|e| format!("device init: {e:?}"))?;
        let txc = TxQueueConfig {
            ring,
            ..TxQueueConfig::new(onic_core::QueueId::new(0))
        };
        let mut tx =
            TxQueue::new(dma, txc, slots.0.as_mut_slice()).map_err(|e| format!("tx queue: {e:?}"))?;
        tx.start(&dev, &mut NoDelay)
            .map_err(|e| format!("tx start: {e:?}"))?;
        // OS buffers: up to 16 frames of at most 256 bytes share a page, longer ones get their
        // own; the driver never touches the bytes.
        let per_page = if frame_len <= 256 { 16 } else { 1 };
        let mut pages = Vec::new();
        let mut free = Vec::new();
        let frame = test_frame(frame_len);
        for i in 0..buffers {
            if i % per_page == 0 {
                let mem = dma.alloc_page().map_err(|e| format!("{e:?}"))?;
                let mut p = dma
                    .map_page(mem, Direction::ToDevice)
                    .map_err(|(_, e)| format!("{e:?}"))?;
                for k in 0..per_page {
                    let off = k * (4096 / per_page);
                    p.bytes_mut()[off..off + frame.len()].copy_from_slice(&frame);
                }
                pages.push(p);
            }
            let page = pages.last().map_or(DmaAddr::new(0), DmaPage::dma_addr);
            let off = (i % per_page) * (4096 / per_page);
            free.push(OsBuf {
                addr: DmaAddr::new(page.get() + off as u64),
                len: frame.len(),
                room: 4096 / per_page,
            });
        }
        Ok(Self {
            dma,
            latch,
            tx,
            pool: host_pool(dma),
            free: FreeList(free),
            pages,
            usable: ring.usable(),
        })
    }

    /// Driver side: the OS transmits up to `n` frames as xmit-more batches of `batch` (one doorbell
    /// per batch); stops early when the ring is full or the OS has no free buffer. Returns the
    /// frames queued.
    pub fn xmit(&mut self, n: usize, batch: usize) -> usize {
        let db = Doorbells::new(self.latch);
        let batch = batch.max(1);
        let mut sent = 0;
        let mut left_in_batch = batch;
        while sent < n {
            let Some(buf) = self.free.0.pop() else { break };
            left_in_batch -= 1;
            let more = left_in_batch != 0 && sent + 1 < n;
            if left_in_batch == 0 {
                left_in_batch = batch;
            }
            match self.tx.xmit_os(&db, buf, more) {
                Ok(()) => sent += 1,
                Err(e) => {
                    self.free.0.push(e.into_inner());
                    break;
                }
            }
        }
        self.tx.flush(&db);
        sent
    }

    /// Device side (not timed): everything published has been sent; writes the status record's
    /// consumer index.
    ///
    /// # Panics
    ///
    /// If the ring is not live memory (a driver bug).
    pub fn complete(&mut self) {
        complete_h2c(self.dma, self.latch, 0, self.tx.ring_dma_addr(), self.usable);
    }

    /// Driver side: returns completed buffers to the OS. Returns how many.
    pub fn reclaim(&mut self) -> u16 {
        self.tx.reclaim(&mut self.free).completed
    }

    /// Returns everything to the OS and frees the OS buffers.
    pub fn finish(mut self) {
        let proof = finished(QueueSide::Tx, self.tx.device_qid());
        self.tx.release(&mut self.pool, &mut self.free, &proof);
        for p in self.pages.drain(..) {
            let mem = p.unmap(&self.dma, Direction::ToDevice);
            self.dma.free_page(mem);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rx_rig_delivers_what_the_device_side_completes_across_wraps() {
        let dma = HostDma::new();
        let latch = DoorbellLatch::new();
        let cfg = RxRigConfig {
            queues: 2,
            ring: RingSizeIdx::new(1).unwrap(),
            write_data: true,
            frame_len: 100,
            ..RxRigConfig::new()
        };
        let mut slots = RxSlots::new(&cfg);
        let mut rig = RxRig::new(&dma, &latch, &mut slots, cfg, |d, _| host_pool(d)).unwrap();
        let want = test_frame(100);
        let mut got = 0;
        for _ in 0..10 {
            let n = rig.produce(usize::MAX);
            assert!(n > 0);
            let mut sink = |f: RxFrame<DmaPage>, _: PassInfo| -> Result<(), RxFrame<DmaPage>> {
                assert_eq!(f.data(), &want[..]);
                got += 1;
                Err(f)
            };
            assert_eq!(rig.poll_all(&mut sink), n);
        }
        // 10 rounds over 63-entry rings: both completion rings wrapped several times.
        assert!(got > 4 * 63);
        for q in &rig.queues {
            assert_eq!(
                q.pair.rx.stats().rx_packets + q.pair.rx.stats().rx_dropped(),
                q.pair.rx.stats().recycled
            );
            assert_eq!(
                q.pair
                    .pool
                    .page_counts(q.pair.rx.pages_in_ring(), 0, 0, 0)
                    .unwrap()
                    .total(),
                q.pair.pool.stats().live_pages()
            );
        }
        drop(rig.finish());
        assert_eq!(dma.stats().live_pages, 0);
    }

    #[test]
    fn rx_rig_runs_the_page_per_packet_baseline() {
        let dma = HostDma::new();
        let latch = DoorbellLatch::new();
        let cfg = RxRigConfig {
            ring: RingSizeIdx::new(2).unwrap(),
            ..RxRigConfig::new()
        };
        let mut slots = RxSlots::new(&cfg);
        let mut rig = RxRig::new(&dma, &latch, &mut slots, cfg, |d, _| {
            PagePerPacket::new(d, Direction::FromDevice)
        })
        .unwrap();
        let before = dma.stats().pages_allocated;
        let n = rig.produce(100);
        let mut sink = |f: RxFrame<DmaPage>, _: PassInfo| -> Result<(), RxFrame<DmaPage>> { Err(f) };
        assert_eq!(rig.poll_all(&mut sink), n);
        // One fresh page per frame (and one for the ring's last empty slot, filled by the refill,
        // and the RX queue's spare page).
        assert!((n as u64..=n as u64 + 2).contains(&(dma.stats().pages_allocated - before)));
        let pools = rig.finish();
        assert_eq!(pools[0].live(), 0);
        assert_eq!(dma.stats().live_pages, 0);
    }

    #[test]
    fn tx_rig_reclaims_what_it_sent() {
        let dma = HostDma::new();
        let latch = DoorbellLatch::new();
        let ring = RingSizeIdx::new(1).unwrap();
        let mut slots = TxSlots::new(ring);
        let mut rig = TxRig::new(&dma, &latch, &mut slots, ring, 100, 60).unwrap();
        for _ in 0..5 {
            let n = rig.xmit(50, 16);
            assert_eq!(n, 50);
            rig.complete();
            assert_eq!(usize::from(rig.reclaim()), n);
            assert_eq!(rig.free.0.len(), 100);
        }
        assert_eq!(rig.tx.stats().tx_packets, 250);
        // 50 frames in batches of 16: 4 doorbells per burst.
        assert_eq!(rig.tx.stats().doorbells, 20);
        rig.finish();
        assert_eq!(dma.stats().live_pages, 0);
    }
}
