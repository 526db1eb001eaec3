//! One port = one PCI function = one netdev: the Rust state behind the C glue's `net_device`.
//!
//! The C glue owns the kernel objects (the `net_device`, its NAPI instances, IRQs) and calls in
//! here for every decision. The kernel's own serialization decides who may call what at the
//! same time, and the entry points below state it as their safety contract:
//!
//! - *control* calls (`open`, `stop`, ethtool setters, `Drop`) run under RTNL, with NAPI disabled
//!   and TX stopped whenever they touch the queues;
//! - `xmit` for TX queue `q` runs under that queue's `netif_tx_lock` (one caller per queue);
//! - `poll` / `rearm` for queue `q` run in that queue's NAPI context (one caller per queue);
//! - readers (`link_stats`, `ethtool_stats`, `link_up`) may run any time.

use alloc::vec::Vec;
use core::cell::UnsafeCell;

use onic_core::stats::{link_up, read_hw_counters};
use onic_core::{Device, DeviceConfig, RingSizeIdx, RxQueueConfig, TxQueueConfig};
use onic_hal::regs::shell::{self, HASH_KEY_WORDS, INDIR_ENTRY_MASK, INDIR_TABLE_ENTRIES};
use onic_hal::{DelayNs, DmaMemory, RegisterWindow};

use crate::counters::{link_stats, xdp_totals, LinkStats, RxCounters, TxCounters};
use crate::errno::{self, Errno, EBUSY, EINVAL};
use crate::ethtool;
use crate::standin::{RxRing, RxSink, TxRefused, TxRing};

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

/// Per-queue datapath state. STAND-IN: the rings of `standin.rs`; the core's queue pair (with
/// the page pool and XDP) takes this place.
struct Queue<D: DmaMemory> {
    tx: UnsafeCell<Option<TxRing<D>>>,
    rx: UnsafeCell<Option<RxRing<D>>>,
}

/// What a transmit did, for the C glue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(i32)]
pub enum XmitResult {
    /// Queued; the skb may be freed (the stand-in copied it).
    Ok = 0,
    /// Ring full: stop the queue, return NETDEV_TX_BUSY.
    Busy = 1,
    /// Dropped: free the skb, count it.
    Dropped = 2,
    /// Queued, and the ring is now full: stop the queue until a reclaim frees slots.
    OkStop = 3,
}

/// The Rust side of one netdev.
pub struct Port<R: RegisterWindow, D: DmaMemory, L: DelayNs> {
    dev: Device<R, R>,
    dma: D,
    ctl: UnsafeCell<Ctl<L>>,
    queues: Vec<Queue<D>>,
    rx_counters: Vec<RxCounters>,
    tx_counters: Vec<TxCounters>,
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
// (control under RTNL, one context per queue); the backends are thread-safe handles.
unsafe impl<R: RegisterWindow + Sync, D: DmaMemory + Send + Sync, L: DelayNs + Send> Sync for Port<R, D, L> {}
// SAFETY: moving the port moves ownership of its rings and handles.
unsafe impl<R: RegisterWindow + Send, D: DmaMemory + Send, L: DelayNs + Send> Send for Port<R, D, L> {}

impl<R: RegisterWindow, D: DmaMemory + Clone, L: DelayNs> Port<R, D, L> {
    /// Brings the function up (spec §13.1 steps 5-10 through `Device::init`) and builds the
    /// port's state. Nothing runs yet; `open` starts the queues.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a bad configuration, `ENODEV` when the function's CMAC is missing, `EIO` when
    /// the device does not respond, `ENOMEM`.
    pub fn new(qdma: R, shell: R, dma: D, mut delay: L, cfg: PortConfig) -> Result<Self, Errno> {
        if cfg.queues == 0 || cfg.queues > cfg.max_queues {
            return Err(EINVAL);
        }
        let dcfg = DeviceConfig::new(cfg.func, cfg.max_queues).map_err(|_| EINVAL)?;
        let dev = Device::init(qdma, shell, &mut delay, dcfg).map_err(|e| errno::from_core(&e))?;
        let n = usize::from(cfg.max_queues);
        let mut queues = Vec::new();
        let mut rx_counters = Vec::new();
        let mut tx_counters = Vec::new();
        if queues.try_reserve_exact(n).is_err()
            || rx_counters.try_reserve_exact(n).is_err()
            || tx_counters.try_reserve_exact(n).is_err()
        {
            let _ = dev.teardown(&mut delay);
            return Err(errno::ENOMEM);
        }
        for _ in 0..n {
            queues.push(Queue {
                tx: UnsafeCell::new(None),
                rx: UnsafeCell::new(None),
            });
            rx_counters.push(RxCounters::default());
            tx_counters.push(TxCounters::default());
        }
        Ok(Self {
            dev,
            dma,
            ctl: UnsafeCell::new(Ctl {
                delay,
                cfg,
                mtu: MAX_MTU,
                up: false,
                indir_user: false,
            }),
            queues,
            rx_counters,
            tx_counters,
        })
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

    /// The configuration. Safe to read any time from a control call.
    ///
    /// # Safety
    ///
    /// As [`Port::open`].
    pub unsafe fn config(&self) -> PortConfig {
        // SAFETY: forwarded contract.
        unsafe { self.ctl().cfg }
    }

    /// The PCI function.
    pub fn func(&self) -> u8 {
        self.dev.function().number()
    }

    /// Starts every queue in use (spec §13.2): TX rings, RX rings with their buffers, contexts,
    /// interrupts armed. On failure everything started is torn down again.
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
            let q = &self.queues[usize::from(qid)];
            let mut txc = TxQueueConfig::new(qid);
            txc.ring = ctl.cfg.tx_ring;
            let mut rxc = RxQueueConfig::new(qid);
            rxc.desc_ring = ctl.cfg.rx_ring;
            rxc.cmpt_ring = ctl.cfg.rx_ring;
            let r = TxRing::start(&self.dev, &mut ctl.delay, &self.dma, txc).and_then(|tx| {
                // SAFETY: no datapath call runs (caller's contract), so the cells are ours.
                unsafe { *q.tx.get() = Some(tx) };
                RxRing::start(&self.dev, &mut ctl.delay, &self.dma, rxc)
            });
            match r {
                // SAFETY: as above.
                Ok(rx) => unsafe { *q.rx.get() = Some(rx) },
                Err(e) => {
                    // SAFETY: control call with the datapath quiet (caller's contract).
                    unsafe { self.stop_queues(ctl) };
                    return Err(e);
                }
            }
        }
        if !ctl.indir_user {
            self.write_default_indir(ctl.cfg.queues);
        }
        ctl.up = true;
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
        for q in &self.queues {
            // SAFETY: no datapath call runs (caller's contract).
            if let Some(tx) = unsafe { (*q.tx.get()).take() } {
                tx.teardown(&self.dev, &mut ctl.delay, &self.dma);
            }
            // SAFETY: as above.
            if let Some(rx) = unsafe { (*q.rx.get()).take() } {
                rx.teardown(&self.dev, &mut ctl.delay, &self.dma);
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

    /// Sends one frame on TX queue `qid`. `more` is the kernel's xmit_more hint: the doorbell
    /// waits for the last frame of a batch.
    ///
    /// # Safety
    ///
    /// The caller holds TX queue `qid`'s transmit lock (one caller per queue at a time) and the
    /// port is up (queues are not being started or stopped).
    pub unsafe fn xmit(&self, qid: u16, frame: &[u8], more: bool) -> XmitResult {
        let Some(q) = self.queues.get(usize::from(qid)) else {
            return XmitResult::Dropped;
        };
        let counters = &self.tx_counters[usize::from(qid)];
        // SAFETY: the TX lock of this queue makes us its only user (caller's contract).
        let Some(tx) = (unsafe { &mut *q.tx.get() }) else {
            counters.dropped.add(1);
            return XmitResult::Dropped;
        };
        match tx.xmit(&self.dma, &self.dev.doorbells(), frame, more, counters) {
            Ok(()) if tx.free_slots() == 0 => XmitResult::OkStop,
            Ok(()) => XmitResult::Ok,
            Err(TxRefused::Busy) => XmitResult::Busy,
            Err(TxRefused::Dropped) => XmitResult::Dropped,
        }
    }

    /// Free TX slots of queue `qid` after a reclaim (to decide whether to wake the queue).
    ///
    /// # Safety
    ///
    /// As [`Port::xmit`].
    pub unsafe fn tx_reclaim(&self, qid: u16) -> u16 {
        let Some(q) = self.queues.get(usize::from(qid)) else {
            return 0;
        };
        // SAFETY: caller's contract, as in `xmit`.
        match unsafe { &mut *q.tx.get() } {
            Some(tx) => {
                tx.reclaim();
                tx.free_slots()
            }
            None => 0,
        }
    }

    /// One NAPI poll of RX queue `qid`: at most `budget` frames to `sink`. Returns the work done.
    ///
    /// # Safety
    ///
    /// Called from queue `qid`'s NAPI context only, while the port is up.
    pub unsafe fn poll<S: RxSink>(&self, qid: u16, budget: usize, sink: &mut S) -> usize {
        let Some(q) = self.queues.get(usize::from(qid)) else {
            return 0;
        };
        // SAFETY: NAPI runs one poll per queue at a time (caller's contract).
        let Some(rx) = (unsafe { &mut *q.rx.get() }) else {
            return 0;
        };
        rx.poll(
            &self.dma,
            &self.dev.doorbells(),
            budget,
            sink,
            &self.rx_counters[usize::from(qid)],
        )
        .done
    }

    /// Re-arms queue `qid`'s interrupt after NAPI completed.
    ///
    /// # Safety
    ///
    /// As [`Port::poll`].
    pub unsafe fn rearm(&self, qid: u16) {
        if let Some(q) = self.queues.get(usize::from(qid)) {
            // SAFETY: caller's contract, as in `poll`.
            if let Some(rx) = unsafe { &*q.rx.get() } {
                rx.rearm(&self.dev.doorbells());
            }
        }
    }

    /// Link statistics summed over the queues.
    pub fn link_stats(&self) -> LinkStats {
        link_stats(&self.rx_counters, &self.tx_counters)
    }

    /// Whether the port's CMAC reports link up and aligned (spec §10.3).
    pub fn link_up(&self) -> bool {
        link_up(self.dev.shell(), self.dev.function().port())
    }

    /// Number of entries of `ethtool -S` (all queues the function owns are listed, so the count
    /// stays the same when `ethtool -L` changes the queues in use).
    pub fn stats_count(&self) -> usize {
        ethtool::stats_count(self.queues.len(), self.queues.len())
    }

    /// `get_sset_count`.
    ///
    /// # Errors
    ///
    /// `EOPNOTSUPP` for string sets other than statistics.
    pub fn sset_count(&self, sset: u32) -> Result<usize, Errno> {
        ethtool::sset_count(sset, self.queues.len(), self.queues.len())
    }

    /// Name of statistic `index`.
    pub fn stat_name(&self, index: usize, out: &mut [u8; ethtool::ETH_GSTRING_LEN]) -> bool {
        ethtool::stat_name(index, self.queues.len(), self.queues.len(), out)
    }

    /// `ethtool -S` values: hardware counters of the port (TICK + reads), the XDP totals and the
    /// per-queue counters.
    pub fn ethtool_stats(&self, out: &mut [u64]) {
        let hw = read_hw_counters(self.dev.shell(), self.dev.function().port());
        let xdp = xdp_totals(&self.rx_counters, &self.tx_counters);
        ethtool::fill_stats(
            out,
            &hw,
            &xdp,
            self.rx_counters.iter().map(RxCounters::values),
            self.tx_counters.iter().map(TxCounters::values),
        );
    }

    /// Validates a new MTU. The stand-in rings take any frame of a page, but the shell passes
    /// at most 1514 bytes (spec §14), so the bound is the shell's.
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
