//! One port = one PCI function = one netdev: the Rust state behind the C glue's `net_device`.
//!
//! The C glue owns the kernel objects (the `net_device`, its NAPI instances, IRQs, the attached
//! XDP program) and calls in here for every decision. The kernel's own serialization decides who
//! may call what at the same time, and the entry points below state it as their safety contract:
//!
//! - *control* calls (`open`, `stop`, ethtool setters, `Drop`) run under RTNL, with NAPI disabled
//!   and TX stopped whenever they touch the queues;
//! - the *datapath* entry points of queue index `q` (`src/datapath.rs`) each touch the rings of
//!   one owner only: the NAPI poll its RX and XDP_TX rings (no lock), transmit and the NAPI
//!   reclaim the stack's TX ring (netdev TX queue `q`'s lock), `ndo_xdp_xmit` and its reclaim
//!   the redirect-in ring (the queue's xmit lock); see `src/queues.rs`;
//! - readers (`link_stats`, `ethtool_stats`, `link_up`) may run any time; they read what the
//!   datapath published (`Os::stats_publish`), never the running rings.
//!
//! RX pages come from the OS page pool ([`crate::dp::OsPool`]), become packets in place
//! (`build_skb`, recycled by the stack into the pool), XDP runs on them where they lie, XDP_TX
//! sends them from the same page.

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::cell::UnsafeCell;
use core::sync::atomic::{AtomicUsize, Ordering};

use onic_core::device::rss_control::HashFunction;
use onic_core::device::settings::{ChannelsRequest, NetSettings, RingRequest, MIN_MTU};
use onic_core::queue::rx::DEFAULT_MAX_FRAME_LEN;
use onic_core::rss::{RssKey, ShellHasher, KEY_LEN, TABLE_LEN};
use onic_core::stats::ethtool::{EthtoolStats, Stats64};
use onic_core::stats::{QueueCounters, HW_COUNTERS};
use onic_core::{Device, DeviceConfig, FunctionId, QueueId, RingSizeIdx, RxQueueConfig};
use onic_hal::{DelayNs, DmaMemory, RegisterWindow, SharedLock};

pub use crate::abi::LinkStats;
use crate::abi::OnicLayout;
use crate::dp::{self, QSTAT_WORDS};
use crate::errno::{self, Errno, EBUSY, EINVAL, ENOMEM};
use crate::ethtool::{self, ETH_GSTRING_LEN};
use crate::os::{Os, PacketMap, StatBlock};
use crate::queues::{Queue, Rings, MAX_PORT_QUEUES};

/// Entries of the shell's RSS indirection table (`ethtool -x` indirection size).
pub const RSS_INDIR_SIZE: usize = TABLE_LEN;
/// Bytes of the shell's RSS hash key (`ethtool -x` key size).
pub const RSS_KEY_SIZE: usize = KEY_LEN;

/// Settings chosen at probe time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// PCI function (= port).
    pub func: u8,
    /// Queue indices the function may use (MSI-X queue vectors), at most
    /// [`crate::queues::MAX_PORT_QUEUES`].
    pub max_queues: u16,
    /// Queue pairs in use at start.
    pub queues: u16,
    /// TX ring size index (hardware.md §3.1 table).
    pub tx_ring: RingSizeIdx,
    /// RX descriptor and completion ring size index.
    pub rx_ring: RingSizeIdx,
    /// Enable RS-FEC on the CMACs (the master PF enables them, hardware.md §10.2).
    pub rs_fec: bool,
}

/// The Rust side of one netdev. `C` is the card's context-command lock, shared with the other
/// functions of the card.
pub struct Port<R: RegisterWindow, D: DmaMemory + PacketMap + Clone, L: DelayNs, K: Os, C: SharedLock> {
    pub(crate) dev: Device<R, R, C>,
    pub(crate) dma: D,
    pub(crate) os: K,
    ctl: UnsafeCell<Ctl<L>>,
    pub(crate) queues: Vec<Queue<K, D>>,
    /// The shell's hash under the key the shell holds, double-buffered: the datapath reads
    /// `hashers[active]`; `ethtool -X hkey` rebuilds the other one, switches, and waits for
    /// the datapath (`Os::synchronize`) before the old one may be rebuilt again.
    pub(crate) hashers: [UnsafeCell<Box<ShellHasher>>; 2],
    pub(crate) active: AtomicUsize,
}

/// Control-plane state, touched by control calls only. The queue pairs in use and the RSS
/// state are the device's ([`Device::channels`], [`Device::rss`]); the ring sizes and the MTU are
/// `net`'s.
struct Ctl<L> {
    delay: L,
    net: NetSettings,
    up: bool,
}

// SAFETY: the cells are only reached under the serialization documented on each entry point
// (control under RTNL, one context per queue); the backends and OS handles are thread-safe. The
// device's RSS state (a `Cell`, which makes `Device` not `Sync`) is touched by its control
// methods only, which run under RTNL; the datapath calls only methods that leave it alone
// (doorbells, function).
unsafe impl<
        R: RegisterWindow + Sync,
        D: DmaMemory + PacketMap + Clone + Send + Sync,
        L: DelayNs + Send,
        K: Os + Sync,
        C: SharedLock + Sync,
    > Sync for Port<R, D, L, K, C>
{
}
// SAFETY: moving the port moves ownership of its rings, pages and handles.
unsafe impl<
        R: RegisterWindow + Send,
        D: DmaMemory + PacketMap + Clone + Send,
        L: DelayNs + Send,
        K: Os + Send,
        C: SharedLock + Send,
    > Send for Port<R, D, L, K, C>
{
}

/// A hasher for the RTL's reset key, built at compile time; copied to the heap, never to the
/// stack (13 KiB).
static DEFAULT_HASHER: ShellHasher = ShellHasher::new(&RssKey::DEFAULT);

fn boxed_hasher() -> Option<Box<ShellHasher>> {
    // SAFETY: `ShellHasher` is plain data (integer tables and the key bytes, no pointers, no
    // Drop).
    unsafe { crate::heap::try_box_copy(&DEFAULT_HASHER) }
}

/// The register windows and lock a port's function is reached through.
pub struct PortRegs<R, C> {
    /// BAR0 (QDMA).
    pub qdma: R,
    /// BAR2 (shell).
    pub shell: R,
    /// The card's context-command lock.
    pub lock: C,
}

impl<R, D, L, K, C> Port<R, D, L, K, C>
where
    R: RegisterWindow,
    D: DmaMemory + PacketMap + Clone,
    L: DelayNs,
    K: Os + Clone,
    C: SharedLock,
{
    /// Brings the function up (hardware.md §13.1 steps 5-10 through `Device::init_shared`, with the
    /// function's TX-only queue ids after its pairs) and builds the port's state. Nothing runs
    /// yet; `open` starts the queues.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a bad configuration, `ENODEV` when the function's CMAC is missing, `EIO` when
    /// the device does not respond, `ENOMEM`.
    pub fn new(regs: PortRegs<R, C>, dma: D, mut delay: L, os: K, cfg: PortConfig) -> Result<Self, Errno> {
        if cfg.queues == 0 || cfg.queues > cfg.max_queues || cfg.max_queues > MAX_PORT_QUEUES {
            return Err(EINVAL);
        }
        let mut dcfg = DeviceConfig::new(cfg.func, cfg.max_queues)
            .and_then(|c| c.with_tx_only(2 * cfg.max_queues))
            .map_err(|_| EINVAL)?;
        dcfg.rs_fec = cfg.rs_fec;
        let (Some(h0), Some(h1)) = (boxed_hasher(), boxed_hasher()) else {
            return Err(ENOMEM);
        };
        let PortRegs { qdma, shell, lock } = regs;
        let dev =
            Device::init_shared(qdma, shell, lock, &mut delay, dcfg).map_err(|e| errno::from_core(&e))?;
        let n = usize::from(cfg.max_queues);
        let ready = crate::heap::try_vec_with(n, |_| Queue::new())
            .ok_or(ENOMEM)
            .and_then(|queues| Ok((queues, Self::adopt(&dev, cfg.queues)?)));
        let (queues, key) = match ready {
            Ok(r) => r,
            Err(e) => {
                let _ = dev.teardown(&mut delay);
                return Err(e);
            }
        };
        let net = NetSettings::new(
            cfg.rx_ring,
            cfg.tx_ring,
            RxQueueConfig::new(QueueId::new(0)).buf,
            DEFAULT_MAX_FRAME_LEN,
        );
        let port = Self {
            dev,
            dma,
            os,
            ctl: UnsafeCell::new(Ctl {
                delay,
                net,
                up: false,
            }),
            queues,
            hashers: [UnsafeCell::new(h0), UnsafeCell::new(h1)],
            active: AtomicUsize::new(0),
        };
        // SAFETY: nothing else can reach the port yet.
        unsafe { (*port.hashers[0].get()).rekey(&key) };
        Ok(port)
    }

    /// Makes a freshly brought-up device's state the port's: `queues` pairs in use, and the
    /// hash key the shell holds now (the RTL's reset key unless an earlier driver changed it),
    /// which is returned.
    fn adopt(dev: &Device<R, R, C>, queues: u16) -> Result<RssKey, Errno> {
        let combined = u32::from(queues);
        dev.set_channels(ChannelsRequest {
            combined,
            ..ChannelsRequest::default()
        })
        .map_err(|e| errno::from_ethtool(&e))?;
        let (_, key) = dev.rss_read_back();
        if key != *dev.rss().key() {
            dev.rss_set(None, Some(key.as_bytes()), HashFunction::NoChange)
                .map_err(|e| errno::from_core(&e))?;
        }
        Ok(key)
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

    /// `ethtool -l` and `-g`: queue pairs (owned, in use) and ring sizes (largest, current).
    ///
    /// # Safety
    ///
    /// Control call.
    pub unsafe fn layout(&self) -> OnicLayout {
        let ch = self.dev.channels();
        // SAFETY: forwarded contract.
        let rings = unsafe { self.ctl() }.net.rings();
        OnicLayout {
            max_queues: u32::from(ch.max_combined),
            queues: u32::from(ch.combined),
            tx_ring: rings.tx,
            rx_ring: rings.rx,
            max_ring: rings.rx_max,
        }
    }

    /// The PCI function.
    pub fn func(&self) -> FunctionId {
        self.dev.function()
    }

    /// Starts every queue pair in use (hardware.md §13.2): the queue's page pool, TX ring, RX ring
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
        let ch = self.dev.channels();
        let (rx_ring, tx_ring) = ctl.net.ring_sizes();
        for (q, queue) in (0..ch.combined).zip(&self.queues) {
            // SAFETY: control call with the datapath quiet (caller's contract).
            let r = unsafe {
                self.rings(ctl)
                    .start_queue(queue, q, ch.max_combined, tx_ring, rx_ring)
            };
            if let Err(e) = r {
                // SAFETY: as above.
                unsafe { self.stop_queues(ctl) };
                return Err(e);
            }
        }
        ctl.up = true;
        Ok(())
    }

    /// Invalidates every context of every queue of the function, with no fallback: what the glue
    /// does before it lets a card it cut off from memory (a teardown whose invalidation did not
    /// complete, hal `RegisterWindow::cut_off`) reach memory again. The port must be down.
    ///
    /// # Safety
    ///
    /// Control call.
    ///
    /// # Errors
    ///
    /// `EBUSY` when the port is up; `EIO` when the card still does not complete context
    /// commands (its DMA must stay off).
    pub unsafe fn invalidate_all_queues(&self) -> Result<(), Errno> {
        // SAFETY: control call (caller's contract).
        let ctl = unsafe { self.ctl() };
        if ctl.up {
            return Err(EBUSY);
        }
        self.dev
            .invalidate_all_queues(&mut ctl.delay)
            .map_err(|e| errno::from_core(&e))
    }

    fn rings<'p>(&'p self, ctl: &'p mut Ctl<L>) -> Rings<'p, R, C, D, K, L> {
        Rings {
            dev: &self.dev,
            dma: &self.dma,
            os: &self.os,
            delay: &mut ctl.delay,
        }
    }

    /// `ethtool -x`: the indirection table and the hash key as the shell holds them (the core's
    /// read-back, hardware.md §9.2).
    pub fn rss_get(&self, indir: Option<&mut [u32; RSS_INDIR_SIZE]>, key: Option<&mut [u8; RSS_KEY_SIZE]>) {
        let (table, k) = self.dev.rss_read_back();
        if let Some(t) = indir {
            for (out, &e) in t.iter_mut().zip(table.entries()) {
                *out = u32::from(e);
            }
        }
        if let Some(key) = key {
            *key = *k.as_bytes();
        }
    }

    /// `ethtool -X`: the core validates everything first (every entry below the queue pairs in
    /// use), then writes the table, then the key; nothing is written when anything is invalid.
    /// A table set here is the user's: it survives queue-count changes that keep its queues.
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
        let table = match indir {
            Some(t) => {
                let mut out = [0u16; RSS_INDIR_SIZE];
                for (o, &e) in out.iter_mut().zip(t) {
                    *o = u16::try_from(e).map_err(|_| EINVAL)?;
                }
                Some(out)
            }
            None => None,
        };
        self.dev
            .rss_set(
                table.as_ref().map(|t| &t[..]),
                key.map(|k| &k[..]),
                HashFunction::NoChange,
            )
            .map_err(|e| errno::from_core(&e))?;
        if let Some(key) = key {
            self.set_hash_key(&RssKey::new(*key));
        }
        Ok(())
    }

    /// Back to the default RSS table (the key stays), for a table the kernel says the user did
    /// not set.
    ///
    /// # Safety
    ///
    /// Control call.
    ///
    /// # Errors
    ///
    /// As the core's `rss_reset`.
    pub unsafe fn rss_reset(&self) -> Result<(), Errno> {
        self.dev.rss_reset().map(|_| ()).map_err(|e| errno::from_core(&e))
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

    /// Tears every queue down (hardware.md §13.4).
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
        for (q, queue) in (0..).zip(&self.queues) {
            // SAFETY: no datapath call runs (caller's contract), so the cells are ours.
            unsafe { self.rings(ctl).stop_queue(queue, q) };
        }
    }

    /// Restarts queue index `q`'s rings in place: the recovery from a ring in its error state or
    /// a TX timeout (each ring's buffers and pages back to their owners, contexts programmed
    /// again, counters kept).
    ///
    /// # Safety
    ///
    /// Control call (RTNL, process context), with queue `q` quiesced: its NAPI disabled, its
    /// netdev TX queue stopped, `ndo_xdp_xmit` kept off its redirect-in ring.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a queue index that is not running; `EIO` when the device did not take a
    /// context command (the rings keep their buffers; retry, or stop the interface).
    pub unsafe fn restart_queue(&self, q: u16) -> Result<(), Errno> {
        // SAFETY: control call (caller's contract).
        let ctl = unsafe { self.ctl() };
        if !ctl.up || q >= self.dev.channels().combined {
            return Err(EINVAL);
        }
        let queue = self.queues.get(usize::from(q)).ok_or(EINVAL)?;
        // SAFETY: caller's contract: the queue is quiesced.
        unsafe { self.rings(ctl).restart_queue(queue, q) }
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

    /// Link statistics (`ndo_get_stats64`): the core's `rtnl_link_stats64` view of the queues'
    /// published counters, and the packet adapter's RX drops as missed frames.
    pub fn link_stats(&self) -> LinkStats {
        let mut s = Stats64::default();
        for qid in 0..self.queues.len() {
            s += Stats64::from_queues(core::slice::from_ref(&self.read_queue(qid)), 0);
        }
        s.rx_missed_errors = self.dev.adapter_rx_drops();
        LinkStats::from(s)
    }

    /// Queue index `qid`'s published counters: the sum of its blocks.
    fn read_queue(&self, qid: usize) -> QueueCounters {
        let mut c = QueueCounters::default();
        for block in StatBlock::ALL {
            let mut w = [0u64; QSTAT_WORDS];
            // CAST: at most 64 queues.
            self.os.stats_read(qid as u16, block, &mut w);
            c += dp::from_words(&w);
        }
        c
    }

    /// Whether the port's CMAC reports link up and aligned (hardware.md §10.3).
    pub fn link_up(&self) -> bool {
        self.dev.link_up()
    }

    /// The QDMA's error registers, decoded on one line, for the error interrupt (registers are
    /// only read: any context).
    pub fn error_report(&self) -> onic_core::device::error_status::ErrorStatus {
        self.dev.error_status()
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
        crate::heap::try_vec_with(self.queues.len(), |qid| {
            let mut c = self.read_queue(qid);
            if let Some(q) = self.queues.get(qid) {
                // SAFETY: RTNL (caller's contract) serializes with open/stop, which set it.
                if let Some(mem) = unsafe { *q.mem.get() } {
                    c.pool = self.os.pp_stats(mem);
                }
            }
            c
        })
        .ok_or(ENOMEM)
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
        let hw = self.dev.hw_counters();
        EthtoolStats::new(hw, &v).fill(out);
    }

    /// Validates and keeps a new MTU (the core's bounds: a frame fits one C2H buffer and the
    /// shell's largest frame, hardware.md §14).
    ///
    /// # Safety
    ///
    /// Control call.
    ///
    /// # Errors
    ///
    /// `EINVAL` outside the core's bounds.
    pub unsafe fn change_mtu(&self, mtu: u32) -> Result<(), Errno> {
        // SAFETY: forwarded contract.
        let ctl = unsafe { self.ctl() };
        ctl.net.set_mtu(mtu).map_err(|e| errno::from_ethtool(&e))
    }

    /// The MTU bounds the core accepts (`netdev->min_mtu`, `max_mtu`).
    ///
    /// # Safety
    ///
    /// Control call.
    pub unsafe fn mtu_range(&self) -> (u32, u32) {
        // SAFETY: forwarded contract.
        let net = unsafe { &self.ctl().net };
        (MIN_MTU, net.max_mtu())
    }

    /// Checks a new layout (`ethtool -L combined queues`, `-G tx tx_ring rx rx_ring`, usable
    /// entries) against the core's rules without applying it.
    ///
    /// # Safety
    ///
    /// Control call.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a queue count outside 1..=max, an RSS table (set by `ethtool -X`) naming a
    /// queue that would go away, or a ring size not in the QDMA's table: the same checks
    /// [`Port::reconfigure`] applies, so that a request it would refuse never stops the interface.
    pub unsafe fn check_layout(&self, queues: u32, tx_ring: u32, rx_ring: u32) -> Result<(), Errno> {
        // SAFETY: forwarded contract.
        let mut net = unsafe { self.ctl() }.net;
        self.dev
            .check_set_channels(channels(queues))
            .map_err(|e| errno::from_ethtool(&e))?;
        net.set_rings(rings(tx_ring, rx_ring))
            .map_err(|e| errno::from_ethtool(&e))?;
        Ok(())
    }

    /// Applies a new layout (queue pairs in use, usable ring entries); the queues are rebuilt
    /// with it at the next `open`. The core checks it first, including that a table set by
    /// `ethtool -X` names no queue that would go away; nothing changes on a refusal.
    ///
    /// # Safety
    ///
    /// Control call, interface down.
    ///
    /// # Errors
    ///
    /// `EBUSY` if the interface is up, `EINVAL` as [`Port::check_layout`] or for an RSS table
    /// naming a queue that would go away.
    pub unsafe fn reconfigure(&self, queues: u32, tx_ring: u32, rx_ring: u32) -> Result<(), Errno> {
        // SAFETY: forwarded contract.
        let ctl = unsafe { self.ctl() };
        if ctl.up {
            return Err(EBUSY);
        }
        let mut net = ctl.net;
        net.set_rings(rings(tx_ring, rx_ring))
            .map_err(|e| errno::from_ethtool(&e))?;
        self.dev
            .set_channels(channels(queues))
            .map_err(|e| errno::from_ethtool(&e))?;
        ctl.net = net;
        Ok(())
    }

    /// Takes the function down (hardware.md §13.5); queues still running are torn down first.
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

/// An `ethtool -L combined queues` request.
fn channels(queues: u32) -> ChannelsRequest {
    ChannelsRequest {
        combined: queues,
        ..ChannelsRequest::default()
    }
}

/// An `ethtool -G` request for the RX and TX rings.
fn rings(tx: u32, rx: u32) -> RingRequest {
    RingRequest {
        rx,
        tx,
        ..RingRequest::default()
    }
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
