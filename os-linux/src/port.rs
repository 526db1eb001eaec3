//! One port = one PCI function = one netdev: the Rust state behind the C glue's `net_device`.
//!
//! The C glue owns the kernel objects (the `net_device`, its NAPI instances, IRQs, the attached
//! XDP program) and calls in here for every decision. The kernel's own serialization decides who
//! may call what at the same time, and the entry points below state it as their safety contract:
//!
//! - *control* calls (`open`, `stop`, ethtool setters, `Drop`) run under RTNL, with NAPI disabled
//!   and TX stopped whenever they touch the queues;
//! - the *datapath* of queue `q` (`xmit`, `poll`, `xdp_xmit`) runs with TX queue `q`'s lock held
//!   (`netif_tx_lock`; the glue takes it around the NAPI poll too, whose XDP_TX frames and TX
//!   reclaim share the ring with transmit), so one context at a time owns the queue pair;
//! - readers (`link_stats`, `ethtool_stats`, `link_up`) may run any time; they read what the
//!   datapath published (`Os::stats_publish`), never the running pair.
//!
//! The datapath is the core's [`QueuePair`] over the OS page pool ([`OsPool`]): RX pages come
//! from the pool, become packets in place (`build_skb`, recycled by the stack into the pool),
//! XDP runs on them where they lie, XDP_TX sends them from the same page.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::ptr::NonNull;
use core::sync::atomic::{AtomicUsize, Ordering};

use onic_core::ethtool::{adapter_rx_drops, EthtoolStats, QueueCounters, Stats64};
use onic_core::rss::{RssKey, ShellHasher};
use onic_core::stats::{link_up, read_hw_counters, HW_COUNTERS};
use onic_core::tx::{TxError, TxSlot};
use onic_core::xdp::{xdp_xmit, XdpContext, XdpRxq};
use onic_core::TxQueueConfig;
use onic_core::{Device, DeviceConfig, QueuePair, RingSizeIdx, RxOptions, RxQueue, RxQueueConfig, TxQueue};
use onic_hal::regs::shell::{self, HASH_KEY_WORDS, INDIR_ENTRY_MASK, INDIR_TABLE_ENTRIES};
use onic_hal::{DelayNs, DmaMemory, RegisterWindow};

use crate::dp::{self, Done, OsPage, OsPool, OsProg, Pass, Redirect, TxItem, QSTAT_WORDS};
use crate::errno::{self, Errno, EBUSY, EINVAL, ENETDOWN, ENOMEM};
use crate::ethtool::{self, ETH_GSTRING_LEN};
use crate::os::{Os, PacketMap};

/// Smallest MTU the port accepts (`ETH_MIN_MTU`).
pub const MIN_MTU: u32 = 68;
/// Largest MTU: the stock shell passes frames up to 1514 bytes (spec §14), i.e. 1500 + header.
pub const MAX_MTU: u32 = 1500;
/// Ethernet header length.
pub const ETH_HLEN: u32 = 14;

/// Entries of the shell's RSS indirection table (`ethtool -x` indirection size).
pub const RSS_INDIR_SIZE: usize = INDIR_TABLE_ENTRIES;
/// Bytes of the shell's RSS hash key (`ethtool -x` key size).
pub const RSS_KEY_SIZE: usize = HASH_KEY_WORDS * 4;

/// Ring sizes the port offers for `ethtool -G` (entries usable, i.e. table size - 1): the
/// ring-size table of the QDMA (spec §3.1) lists 64 .. 16384 slots.
const RING_MIN_USABLE: u16 = 63;

/// Frames of one `ndo_xdp_xmit` call mapped at a time (the kernel's bulk size is 16).
const XMIT_CHUNK: usize = 16;

/// Settings chosen at probe time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// PCI function (= port).
    pub func: u8,
    /// Queue pairs the function may use (MSI-X queue vectors).
    pub max_queues: u16,
    /// Queue pairs in use at start.
    pub queues: u16,
    /// TX ring size index (spec §3.1 table).
    pub tx_ring: RingSizeIdx,
    /// RX descriptor and completion ring size index.
    pub rx_ring: RingSizeIdx,
}

/// The core's queue pair as the port runs it.
type Pair<K, D> = QueuePair<'static, D, OsPool<K, D>, TxItem<K>>;

/// A running queue pair and the slot storage it borrows.
struct Live<K: Os, D: DmaMemory + PacketMap + Clone> {
    qp: Pair<K, D>,
    rx_slots: NonNull<[Option<OsPage>]>,
    tx_slots: NonNull<[TxSlot<OsPage, TxItem<K>>]>,
}

/// One queue pair's state.
struct Queue<K: Os, D: DmaMemory + PacketMap + Clone> {
    /// The running pair (datapath: the queue's TX lock; control: RTNL with the datapath quiet).
    live: UnsafeCell<Option<Live<K, D>>>,
    /// Counters of the pairs this queue ran before (written at stop, under RTNL).
    base: UnsafeCell<QueueCounters>,
    /// The page pool of the running pair, for its statistics (RTNL).
    mem: UnsafeCell<Option<K::QMem>>,
}

/// What a transmit did, for the C glue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum XmitResult {
    /// Queued; the packet is the ring's until its completion.
    Ok = 0,
    /// Ring full: stop the queue, return NETDEV_TX_BUSY (the packet is still the caller's).
    Busy = 1,
    /// Not queued (bad length, mapping failed, queue down): the caller frees and counts it.
    Dropped = 2,
    /// Queued, and the ring is now full: stop the queue until a reclaim frees slots.
    OkStop = 3,
}

/// What one NAPI poll did, for the C glue.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct PollResult {
    /// Frames consumed (NAPI work done).
    pub done: u32,
    /// Poll again without waiting for the interrupt (more completions are known).
    pub more: bool,
    /// The TX queue is still stopped (the ring is full): keep the netdev queue stopped.
    pub tx_stopped: bool,
    /// Frames were redirected: the glue calls `xdp_do_flush` after releasing the queue lock.
    pub redirected: bool,
}

/// The Rust side of one netdev.
pub struct Port<R: RegisterWindow, D: DmaMemory + PacketMap + Clone, L: DelayNs, K: Os> {
    dev: Device<R, R>,
    dma: D,
    os: K,
    ctl: UnsafeCell<Ctl<L>>,
    queues: Vec<Queue<K, D>>,
    /// The shell's hash under the key the shell holds, double-buffered: the datapath reads
    /// `hashers[active]`; `ethtool -X hkey` rebuilds the other one, switches, and waits for
    /// the datapath (`Os::synchronize`) before the old one may be rebuilt again.
    hashers: [UnsafeCell<Box<ShellHasher>>; 2],
    active: AtomicUsize,
}

/// Control-plane state, touched by control calls only.
struct Ctl<L> {
    delay: L,
    cfg: PortConfig,
    mtu: u32,
    up: bool,
    /// Set by `ethtool -X`: the table is the user's and survives queue-count changes.
    indir_user: bool,
}

// SAFETY: the cells are only reached under the serialization documented on each entry point
// (control under RTNL, one context per queue); the backends and OS handles are thread-safe.
unsafe impl<
        R: RegisterWindow + Sync,
        D: DmaMemory + PacketMap + Clone + Send + Sync,
        L: DelayNs + Send,
        K: Os + Sync,
    > Sync for Port<R, D, L, K>
{
}
// SAFETY: moving the port moves ownership of its rings, pages and handles.
unsafe impl<R: RegisterWindow + Send, D: DmaMemory + PacketMap + Clone + Send, L: DelayNs + Send, K: Os + Send>
    Send for Port<R, D, L, K>
{
}

/// A hasher for the RTL's reset key, built at compile time; copied to the heap, never to the
/// stack (13 KiB).
static DEFAULT_HASHER: ShellHasher = ShellHasher::new(&RssKey::DEFAULT);

fn boxed_hasher() -> Option<Box<ShellHasher>> {
    let layout = core::alloc::Layout::new::<ShellHasher>();
    // SAFETY: the layout is not zero-sized.
    let p = NonNull::new(unsafe { alloc::alloc::alloc(layout) }.cast::<ShellHasher>())?;
    // SAFETY: `ShellHasher` is plain data (integer tables and the key bytes, no pointers, no
    // Drop), so a bitwise copy of a valid value is a valid value; the destination is the fresh
    // allocation of its layout, which cannot overlap the static; the box then owns it with the
    // global allocator's layout it was allocated with.
    unsafe {
        core::ptr::copy_nonoverlapping(&raw const DEFAULT_HASHER, p.as_ptr(), 1);
        Some(Box::from_raw(p.as_ptr()))
    }
}

impl<R: RegisterWindow, D: DmaMemory + PacketMap + Clone, L: DelayNs, K: Os + Clone> Port<R, D, L, K> {
    /// Brings the function up (spec §13.1 steps 5-10 through `Device::init`) and builds the
    /// port's state. Nothing runs yet; `open` starts the queues.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a bad configuration, `ENODEV` when the function's CMAC is missing, `EIO` when
    /// the device does not respond, `ENOMEM`.
    pub fn new(qdma: R, shell: R, dma: D, mut delay: L, os: K, cfg: PortConfig) -> Result<Self, Errno> {
        if cfg.queues == 0 || cfg.queues > cfg.max_queues {
            return Err(EINVAL);
        }
        let dcfg = DeviceConfig::new(cfg.func, cfg.max_queues).map_err(|_| EINVAL)?;
        let (Some(h0), Some(h1)) = (boxed_hasher(), boxed_hasher()) else {
            return Err(ENOMEM);
        };
        let dev = Device::init(qdma, shell, &mut delay, dcfg).map_err(|e| errno::from_core(&e))?;
        let n = usize::from(cfg.max_queues);
        let mut queues = Vec::new();
        if queues.try_reserve_exact(n).is_err() {
            let _ = dev.teardown(&mut delay);
            return Err(ENOMEM);
        }
        for _ in 0..n {
            queues.push(Queue {
                live: UnsafeCell::new(None),
                base: UnsafeCell::new(QueueCounters::default()),
                mem: UnsafeCell::new(None),
            });
        }
        let port = Self {
            dev,
            dma,
            os,
            ctl: UnsafeCell::new(Ctl {
                delay,
                cfg,
                mtu: MAX_MTU,
                up: false,
                indir_user: false,
            }),
            queues,
            hashers: [UnsafeCell::new(h0), UnsafeCell::new(h1)],
            active: AtomicUsize::new(0),
        };
        // The hash key the shell holds now (the RTL's reset key unless someone changed it).
        let mut key = [0u8; RSS_KEY_SIZE];
        port.rss_get(None, Some(&mut key));
        // SAFETY: nothing else can reach the port yet.
        unsafe { (*port.hashers[0].get()).rekey(&RssKey::new(key)) };
        Ok(port)
    }

    /// The control state.
    ///
    /// # Safety
    ///
    /// Only from a control call (RTNL held), and no other reference from this method is alive.
    #[allow(clippy::mut_from_ref)]
    unsafe fn ctl(&self) -> &mut Ctl<L> {
        // SAFETY: the caller holds the control serialization (RTNL), so this is the only
        // reference to the control state.
        unsafe { &mut *self.ctl.get() }
    }

    /// The configuration.
    ///
    /// # Safety
    ///
    /// Control call.
    pub unsafe fn config(&self) -> PortConfig {
        // SAFETY: forwarded contract.
        unsafe { self.ctl().cfg }
    }

    /// The PCI function.
    pub fn func(&self) -> u8 {
        self.dev.function().number()
    }

    /// Starts every queue pair in use (spec §13.2): the queue's page pool, TX ring, RX ring
    /// filled from the pool, contexts, interrupt armed. On failure everything started is torn
    /// down again.
    ///
    /// # Safety
    ///
    /// Control call: RTNL held, NAPI of every queue disabled, no transmit running.
    ///
    /// # Errors
    ///
    /// `ENOMEM`, `EIO`.
    pub unsafe fn open(&self) -> Result<(), Errno> {
        // SAFETY: control call (caller's contract).
        let ctl = unsafe { self.ctl() };
        if ctl.up {
            return Ok(());
        }
        for qid in 0..ctl.cfg.queues {
            if let Err(e) = self.start_queue(ctl, qid) {
                // SAFETY: control call with the datapath quiet (caller's contract).
                unsafe { self.stop_queues(ctl) };
                return Err(e);
            }
        }
        if !ctl.indir_user {
            self.write_default_indir(ctl.cfg.queues);
        }
        ctl.up = true;
        Ok(())
    }

    fn start_queue(&self, ctl: &mut Ctl<L>, qid: u16) -> Result<(), Errno> {
        let q = &self.queues[usize::from(qid)];
        let mut txc = TxQueueConfig::new(qid);
        txc.ring = ctl.cfg.tx_ring;
        let mut rxc = RxQueueConfig::new(qid);
        rxc.desc_ring = ctl.cfg.rx_ring;
        rxc.cmpt_ring = ctl.cfg.rx_ring;
        let mut rx_slots = Vec::new();
        let mut tx_slots = Vec::new();
        let n_rx = usize::from(rxc.desc_ring.entries());
        let n_tx = usize::from(txc.ring.entries());
        if rx_slots.try_reserve_exact(n_rx).is_err() || tx_slots.try_reserve_exact(n_tx).is_err() {
            return Err(ENOMEM);
        }
        rx_slots.resize_with(n_rx, || None);
        tx_slots.resize_with(n_tx, TxSlot::new);
        let mem = self.os.qmem_new(qid, u32::from(rxc.desc_ring.entries()))?;
        let (rx_ref, rx_ptr) = dp::leak_slice(rx_slots);
        let (tx_ref, tx_ptr) = dp::leak_slice(tx_slots);
        let free_all = |mem| {
            self.os.qmem_free(mem);
            // SAFETY: the references from leak_slice are gone (the queues that borrowed them
            // were never built or have been dropped).
            unsafe {
                dp::unleak(rx_ptr);
                dp::unleak(tx_ptr);
            }
        };
        let rx = RxQueue::new(self.dma.clone(), rxc, RxOptions::for_queue(&rxc), rx_ref);
        let tx = TxQueue::new(self.dma.clone(), txc, tx_ref);
        let (rx, tx) = match (rx, tx) {
            (Ok(rx), Ok(tx)) => (rx, tx),
            (rx, tx) => {
                drop((rx, tx));
                free_all(mem);
                return Err(ENOMEM);
            }
        };
        let pool = OsPool::new(self.os.clone(), mem, self.dma.clone());
        let mut qp = QueuePair::new(rx, tx, pool);
        if let Err(e) = qp.start(&self.dev, &mut ctl.delay) {
            let mut done = Done {
                os: &self.os,
                map: &self.dma,
                napi_budget: None,
            };
            let (_, pool) = qp.teardown(&self.dev, &mut ctl.delay, &mut done);
            drop(pool);
            free_all(mem);
            return Err(errno::from_core(&e));
        }
        // SAFETY: control call with the datapath quiet: the cells are ours.
        unsafe {
            *q.live.get() = Some(Live {
                qp,
                rx_slots: rx_ptr,
                tx_slots: tx_ptr,
            });
            *q.mem.get() = Some(mem);
        }
        Ok(())
    }

    /// Spreads the indirection table over the first `queues` queues (entry k = k mod queues, as
    /// the reference driver's probe does for all its queues, spec §9.2).
    fn write_default_indir(&self, queues: u16) {
        let f = self.func();
        for k in 0..RSS_INDIR_SIZE {
            self.dev
                .shell()
                .write32(shell::indir_table(f, k), k as u32 % u32::from(queues.max(1)));
        }
    }

    /// `ethtool -x`: the indirection table and the hash key as the shell holds them (table reads
    /// first, then key reads, spec §9.2; the table's upper half is masked off).
    pub fn rss_get(&self, indir: Option<&mut [u32; RSS_INDIR_SIZE]>, key: Option<&mut [u8; RSS_KEY_SIZE]>) {
        let f = self.func();
        let sh = self.dev.shell();
        if let Some(t) = indir {
            for (k, e) in t.iter_mut().enumerate() {
                *e = sh.read32(shell::indir_table(f, k)) & INDIR_ENTRY_MASK;
            }
        }
        if let Some(key) = key {
            for (k, chunk) in key.chunks_exact_mut(4).enumerate() {
                chunk.copy_from_slice(&sh.read32(shell::hash_key(f, k)).to_le_bytes());
            }
        }
    }

    /// `ethtool -X`: validates everything first (every entry below the queues in use), then writes
    /// the whole table, then the key (byte 4k in bits 7..0 of word k, spec §9.2). Nothing is
    /// written when anything is invalid.
    ///
    /// # Safety
    ///
    /// Control call.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an entry that names a queue not in use.
    pub unsafe fn rss_set(
        &self,
        indir: Option<&[u32; RSS_INDIR_SIZE]>,
        key: Option<&[u8; RSS_KEY_SIZE]>,
    ) -> Result<(), Errno> {
        // SAFETY: forwarded contract.
        let ctl = unsafe { self.ctl() };
        if let Some(t) = indir {
            if t.iter().any(|&e| e >= u32::from(ctl.cfg.queues)) {
                return Err(EINVAL);
            }
        }
        let f = self.func();
        let sh = self.dev.shell();
        if let Some(t) = indir {
            for (k, &e) in t.iter().enumerate() {
                sh.write32(shell::indir_table(f, k), e);
            }
            ctl.indir_user = true;
        }
        if let Some(key) = key {
            for (k, chunk) in key.chunks_exact(4).enumerate() {
                sh.write32(
                    shell::hash_key(f, k),
                    u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]),
                );
            }
            self.set_hash_key(&RssKey::new(*key));
        }
        Ok(())
    }

    /// `ethtool -X default`: back to the even spread over the queues in use.
    ///
    /// # Safety
    ///
    /// Control call.
    pub unsafe fn rss_reset(&self) {
        // SAFETY: forwarded contract.
        let ctl = unsafe { self.ctl() };
        ctl.indir_user = false;
        self.write_default_indir(ctl.cfg.queues);
    }

    /// Makes the datapath's software hash follow a new key: the inactive hasher is rebuilt, made
    /// active, and the running polls are waited for, so the next change may rebuild the other.
    /// Control calls only (RTNL serializes them).
    fn set_hash_key(&self, key: &RssKey) {
        let next = (self.active.load(Ordering::Relaxed) + 1) & 1;
        // SAFETY: the inactive hasher is read by no poll: every poll that could have loaded its
        // index before the last switch was waited for by that switch's `synchronize`.
        unsafe { (*self.hashers[next].get()).rekey(key) };
        // Release: the rebuilt tables are visible to a poll that loads the new index.
        self.active.store(next, Ordering::Release);
        self.os.synchronize();
    }

    /// Tears every queue down (spec §13.4).
    ///
    /// # Safety
    ///
    /// As [`Port::open`].
    pub unsafe fn stop(&self) {
        // SAFETY: control call (caller's contract).
        let ctl = unsafe { self.ctl() };
        // SAFETY: forwarded contract.
        unsafe { self.stop_queues(ctl) };
        ctl.up = false;
    }

    /// # Safety
    ///
    /// As [`Port::open`].
    unsafe fn stop_queues(&self, ctl: &mut Ctl<L>) {
        for (qid, q) in self.queues.iter().enumerate() {
            // SAFETY: no datapath call runs (caller's contract), so the cells are ours.
            let (live, base, mem) = unsafe { (&mut *q.live.get(), &mut *q.base.get(), &mut *q.mem.get()) };
            let Some(Live {
                qp,
                rx_slots,
                tx_slots,
            }) = live.take()
            else {
                continue;
            };
            let mut done = Done {
                os: &self.os,
                map: &self.dma,
                napi_budget: None,
            };
            // The pair's counters join the queue's history, so the netdev's totals survive
            // down/up (frames the teardown drains were never sent and are not counted).
            let now = pair_counters(&qp);
            let (r, pool) = qp.teardown(&self.dev, &mut ctl.delay, &mut done);
            if let Err(e) = r {
                onic_hal::warn!("onic: queue {} teardown: {}", qid, e);
            }
            *base += now;
            let words = dp::to_words(base);
            // CAST: at most 64 queues.
            self.os.stats_publish(qid as u16, &words);
            let m = pool.mem();
            drop(pool);
            *mem = None;
            self.os.qmem_free(m);
            // SAFETY: the queue pair that borrowed the slots is gone.
            unsafe {
                dp::unleak(rx_slots);
                dp::unleak(tx_slots);
            }
        }
    }

    /// Whether the interface is up.
    ///
    /// # Safety
    ///
    /// Control call.
    pub unsafe fn is_up(&self) -> bool {
        // SAFETY: forwarded contract.
        unsafe { self.ctl().up }
    }

    /// The running pair of queue `qid`.
    ///
    /// # Safety
    ///
    /// The caller owns the queue's datapath (its TX lock) and no other reference from this
    /// method for the same queue is alive.
    #[allow(clippy::mut_from_ref)]
    unsafe fn live(&self, qid: u16) -> Option<&mut Live<K, D>> {
        let q = self.queues.get(usize::from(qid))?;
        // SAFETY: caller's contract: the one context that owns this queue's datapath.
        unsafe { (*q.live.get()).as_mut() }
    }

    fn publish(&self, qid: u16, qp: &Pair<K, D>) {
        let Some(q) = self.queues.get(usize::from(qid)) else {
            return;
        };
        // SAFETY: `base` changes only at stop, under RTNL with the datapath quiet; the datapath
        // (our caller) only reads it.
        let base = unsafe { &*q.base.get() };
        let mut c = *base;
        c += pair_counters(qp);
        self.os.stats_publish(qid, &dp::to_words(&c));
    }

    /// Sends one packet of the stack on TX queue `qid`. `more` is the kernel's xmit_more hint:
    /// the doorbell waits for the last packet of a batch. On `Ok`/`OkStop` the packet belongs to
    /// the ring until its completion frees it; otherwise it is still the caller's.
    ///
    /// # Safety
    ///
    /// The caller holds TX queue `qid`'s lock; the packet is linear and at least `ETH_ZLEN` long.
    pub unsafe fn xmit(&self, qid: u16, skb: K::Skb, more: bool) -> XmitResult {
        // SAFETY: the TX lock of this queue makes us its only user (caller's contract).
        let Some(live) = (unsafe { self.live(qid) }) else {
            return XmitResult::Dropped;
        };
        let Some(item) = TxItem::map_skb(&self.os, &self.dma, skb) else {
            return XmitResult::Dropped;
        };
        let qp = &mut live.qp;
        let r = match qp.tx.xmit_os(&self.dev.doorbells(), item, more) {
            Ok(()) if qp.tx.is_stopped() => XmitResult::OkStop,
            Ok(()) => XmitResult::Ok,
            Err(e) => {
                let busy = matches!(e, TxError::Full(_));
                e.into_inner().unmap(&self.dma);
                if busy {
                    XmitResult::Busy
                } else {
                    XmitResult::Dropped
                }
            }
        };
        if !more || r != XmitResult::Ok {
            self.publish(qid, qp);
        }
        r
    }

    /// One NAPI poll of queue pair `qid`: TX reclaim, then up to `budget` received frames
    /// through `prog` (if attached) or straight to the stack, XDP_TX on the pair's own ring.
    ///
    /// # Safety
    ///
    /// Called from queue `qid`'s NAPI poll with its TX lock held; `napi` is that poll's context.
    pub unsafe fn poll(&self, qid: u16, budget: u32, napi: K::Napi, prog: Option<K::Prog>) -> PollResult {
        // SAFETY: the NAPI context plus the TX lock make us the queue's only user.
        let Some(live) = (unsafe { self.live(qid) }) else {
            return PollResult::default();
        };
        let qp = &mut live.qp;
        let mem = qp.pool.mem();
        // Acquire: pairs with the release in `set_hash_key`; the hasher read is complete.
        let active = self.active.load(Ordering::Acquire) & 1;
        // SAFETY: the active hasher is not written while a poll may read it (`set_hash_key`
        // rebuilds only the inactive one, and waits for running polls after each switch).
        let hasher: &ShellHasher = unsafe { &*self.hashers[active].get() };
        let mut pass = Pass {
            os: &self.os,
            map: &self.dma,
            napi,
            qid,
            hasher,
        };
        let mut redirect = Redirect {
            os: &self.os,
            map: &self.dma,
            prog,
            mem,
            redirected: false,
        };
        let mut program = prog.map(|prog| OsProg {
            os: &self.os,
            prog,
            mem,
        });
        let mut xdp = XdpContext {
            prog: program.as_mut(),
            pass: &mut pass,
            redirect: &mut redirect,
            rxq: XdpRxq {
                queue_index: qid,
                port: self.dev.function().port(),
            },
            origin: qid,
            hasher: Some(hasher),
        };
        let mut done = Done {
            os: &self.os,
            map: &self.dma,
            napi_budget: Some(budget),
        };
        // Budget 0 is netpoll (TX reclaim only), which may run outside the NAPI context: the
        // pool's direct recycling is for the queue's own NAPI poll only.
        qp.pool.in_napi = budget > 0;
        let budget = usize::try_from(budget).unwrap_or(usize::MAX);
        let out = qp.poll_xdp(budget, &self.dev.doorbells(), &mut xdp, &mut done);
        qp.pool.in_napi = false;
        let redirected = redirect.redirected;
        self.publish(qid, qp);
        PollResult {
            done: u32::try_from(out.rx.done).unwrap_or(u32::MAX),
            more: out.rx.more,
            tx_stopped: qp.tx.is_stopped(),
            redirected,
        }
    }

    /// `ndo_xdp_xmit`: queues frames other devices redirected here on TX queue `qid`, in order,
    /// stopping at the first that does not fit. Returns how many were queued (the rest are still
    /// the caller's), or `-ENETDOWN` when the queue is not running.
    ///
    /// # Safety
    ///
    /// The caller holds TX queue `qid`'s lock.
    pub unsafe fn xdp_xmit(&self, qid: u16, frames: &[K::XdpFrame], flush: bool) -> Result<usize, Errno> {
        // SAFETY: the TX lock of this queue makes us its only user (caller's contract).
        let Some(live) = (unsafe { self.live(qid) }) else {
            return Err(ENETDOWN);
        };
        let qp = &mut live.qp;
        let db = self.dev.doorbells();
        let mut sent = 0;
        'chunks: for chunk in frames.chunks(XMIT_CHUNK) {
            let mut items: [Option<TxItem<K>>; XMIT_CHUNK] = Default::default();
            let mut mapped = 0;
            for (slot, &f) in items.iter_mut().zip(chunk) {
                match TxItem::map_xdp(&self.os, &self.dma, f) {
                    Some(item) => *slot = Some(item),
                    None => break,
                }
                mapped += 1;
            }
            let n = xdp_xmit(&mut qp.tx, &db, &mut items[..mapped], false);
            sent += n;
            for item in items.iter_mut().skip(n).filter_map(Option::take) {
                item.unmap(&self.dma);
            }
            if n < chunk.len() {
                break 'chunks;
            }
        }
        if flush {
            qp.tx.flush(&db);
        }
        self.publish(qid, qp);
        Ok(sent)
    }

    /// Link statistics (`ndo_get_stats64`): the core's `rtnl_link_stats64` view of the queues'
    /// published counters, and the packet adapter's RX drops as missed frames.
    pub fn link_stats(&self) -> LinkStats {
        let mut s = Stats64::default();
        for qid in 0..self.queues.len() {
            s += Stats64::from_queues(core::slice::from_ref(&self.read_queue(qid)), 0);
        }
        s.rx_missed_errors = adapter_rx_drops(self.dev.shell(), self.dev.function().port());
        LinkStats::from(s)
    }

    fn read_queue(&self, qid: usize) -> QueueCounters {
        let mut w = [0u64; QSTAT_WORDS];
        // CAST: at most 64 queues.
        self.os.stats_read(qid as u16, &mut w);
        dp::from_words(&w)
    }

    /// Whether the port's CMAC reports link up and aligned (spec §10.3).
    pub fn link_up(&self) -> bool {
        link_up(self.dev.shell(), self.dev.function().port())
    }

    /// Number of entries of `ethtool -S` (every queue the function owns is listed, so the count
    /// stays the same when `ethtool -L` changes the queues in use).
    pub fn stats_count(&self) -> usize {
        ethtool::stats_count(self.queues.len())
    }

    /// `get_sset_count`.
    ///
    /// # Errors
    ///
    /// `EOPNOTSUPP` for string sets other than statistics.
    pub fn sset_count(&self, sset: u32) -> Result<usize, Errno> {
        ethtool::sset_count(sset, self.queues.len())
    }

    /// The per-queue snapshots `ethtool -S` shows: published counters, and the statistics of the
    /// queue's page pool while it runs.
    ///
    /// # Safety
    ///
    /// Control call (RTNL: the pools do not come and go meanwhile).
    unsafe fn snapshots(&self) -> Result<Vec<QueueCounters>, Errno> {
        let mut v = Vec::new();
        v.try_reserve_exact(self.queues.len()).map_err(|_| ENOMEM)?;
        for (qid, q) in self.queues.iter().enumerate() {
            let mut c = self.read_queue(qid);
            // SAFETY: RTNL (caller's contract) serializes with open/stop, which set it.
            if let Some(mem) = unsafe { *q.mem.get() } {
                c.pool = self.os.pp_stats(mem);
            }
            v.push(c);
        }
        Ok(v)
    }

    /// `ethtool -S` names: `buf` holds [`Port::stats_count`] strings of `ETH_GSTRING_LEN`.
    ///
    /// # Safety
    ///
    /// Control call.
    pub unsafe fn stat_names(&self, mut out: impl FnMut(usize, &[u8; ETH_GSTRING_LEN])) {
        // SAFETY: forwarded contract.
        let Ok(v) = (unsafe { self.snapshots() }) else {
            return;
        };
        let view = EthtoolStats::new([0; HW_COUNTERS], &v);
        let mut b = [0u8; ETH_GSTRING_LEN];
        for (i, (name, _)) in view.iter().enumerate() {
            ethtool::write_name(name, &mut b);
            out(i, &b);
        }
    }

    /// `ethtool -S` values: hardware counters of the port (TICK + reads), the XDP totals, the
    /// per-queue counters and the page pools.
    ///
    /// # Safety
    ///
    /// Control call.
    pub unsafe fn ethtool_stats(&self, out: &mut [u64]) {
        // SAFETY: forwarded contract.
        let Ok(v) = (unsafe { self.snapshots() }) else {
            return;
        };
        let hw = read_hw_counters(self.dev.shell(), self.dev.function().port());
        EthtoolStats::new(hw, &v).fill(out);
    }

    /// Validates a new MTU. A frame always fits one RX page (3520 bytes after headroom and
    /// tailroom), with or without XDP; the bound is the shell's, which passes at most 1514-byte
    /// frames (spec §14).
    ///
    /// # Safety
    ///
    /// Control call.
    ///
    /// # Errors
    ///
    /// `EINVAL` outside [`MIN_MTU`]..=[`MAX_MTU`].
    pub unsafe fn change_mtu(&self, mtu: u32) -> Result<(), Errno> {
        if !(MIN_MTU..=MAX_MTU).contains(&mtu) {
            return Err(EINVAL);
        }
        // SAFETY: forwarded contract.
        unsafe { self.ctl().mtu = mtu };
        Ok(())
    }

    /// `ethtool -G` validation: ring sizes must be entries of the QDMA ring-size table (usable
    /// count = table value - 1). Returns the (TX, RX) size indices. Does not apply them.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a size that is not in the table.
    pub fn ring_indices(tx_usable: u32, rx_usable: u32) -> Result<(RingSizeIdx, RingSizeIdx), Errno> {
        let idx = |usable: u32| {
            let entries = u16::try_from(usable.checked_add(1).ok_or(EINVAL)?).map_err(|_| EINVAL)?;
            if entries <= RING_MIN_USABLE {
                return Err(EINVAL);
            }
            RingSizeIdx::for_entries(entries).ok_or(EINVAL)
        };
        Ok((idx(tx_usable)?, idx(rx_usable)?))
    }

    /// Changes settings that need the queues rebuilt (ring sizes, queue count). Must be called
    /// with the interface down.
    ///
    /// # Safety
    ///
    /// Control call, interface down.
    ///
    /// # Errors
    ///
    /// `EBUSY` if the interface is up, `EINVAL` for a queue count outside 1..=max.
    pub unsafe fn reconfigure(
        &self,
        queues: u16,
        tx_ring: RingSizeIdx,
        rx_ring: RingSizeIdx,
    ) -> Result<(), Errno> {
        // SAFETY: forwarded contract.
        let ctl = unsafe { self.ctl() };
        if ctl.up {
            return Err(EBUSY);
        }
        if queues == 0 || queues > ctl.cfg.max_queues {
            return Err(EINVAL);
        }
        if ctl.indir_user && queues < ctl.cfg.queues {
            // A user table may name the queues that would go away.
            let mut t = [0u32; RSS_INDIR_SIZE];
            self.rss_get(Some(&mut t), None);
            if t.iter().any(|&e| e >= u32::from(queues)) {
                return Err(EINVAL);
            }
        }
        ctl.cfg.queues = queues;
        ctl.cfg.tx_ring = tx_ring;
        ctl.cfg.rx_ring = rx_ring;
        Ok(())
    }

    /// Takes the function down (spec §13.5); queues still running are torn down first.
    pub fn remove(self) {
        // SAFETY: `self` is owned, so no other call on this port can run.
        unsafe { self.stop() };
        let Self { dev, ctl, .. } = self;
        let mut ctl = ctl.into_inner();
        let (r, _, _) = dev.teardown(&mut ctl.delay);
        if let Err(e) = r {
            onic_hal::warn!("onic: teardown of the function failed: {}", e);
        }
    }
}

/// A running pair's counters.
fn pair_counters<K: Os, D: DmaMemory + PacketMap + Clone>(qp: &Pair<K, D>) -> QueueCounters {
    QueueCounters {
        rx: *qp.rx.stats(),
        tx: *qp.tx.stats(),
        pair: *qp.stats(),
        pool: Default::default(),
    }
}

/// The netdev's link statistics (`rtnl_link_stats64` fields the driver fills, from the core's
/// [`Stats64`]); the C glue's `struct onic_link_stats` has the same layout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct LinkStats {
    /// Frames received (whatever the XDP verdict).
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Good frames the driver could not keep (no page, too long, refused by the stack); XDP
    /// drops are the program's decision and are counted in `ethtool -S` only.
    pub rx_dropped: u64,
    /// Completions with errors or impossible lengths.
    pub rx_errors: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Frames not sent (0 here: the glue counts the packets it drops in the kernel's per-CPU
    /// core counter, which `dev_get_stats` adds).
    pub tx_dropped: u64,
    /// Frames refused for their length.
    pub tx_errors: u64,
    /// Frames the packet adapter dropped before the driver saw them (`stat_adapt_rx_drop`).
    pub rx_missed_errors: u64,
}

impl From<Stats64> for LinkStats {
    fn from(s: Stats64) -> Self {
        Self {
            rx_packets: s.rx_packets,
            rx_bytes: s.rx_bytes,
            rx_dropped: s.rx_dropped,
            rx_errors: s.rx_errors,
            tx_packets: s.tx_packets,
            tx_bytes: s.tx_bytes,
            tx_dropped: s.tx_dropped,
            tx_errors: s.tx_errors,
            rx_missed_errors: s.rx_missed_errors,
        }
    }
}
