//! One port = one PCI function = one netdev: the Rust state behind the C glue's `net_device`.
//!
//! The C glue owns the kernel objects (the `net_device`, its NAPI instances, IRQs, the attached
//! XDP program) and calls in here for every decision. The kernel's own serialization decides who
//! may call what at the same time; each method takes the token of the context it runs in
//! ([`crate::contexts`]):
//!
//! - *control* calls (`open`, `stop`, ethtool setters) take the control token (RTNL); those that
//!   start, stop or restart rings also take the proof that the datapath contexts are stopped
//!   ([`Quiet`], or one queue's [`QueueTokens`]);
//! - the *datapath* entry points of queue index `q` (`src/datapath.rs`) each take the token of
//!   the one owner of the rings they touch: the NAPI poll its RX and XDP_TX rings, transmit and
//!   the NAPI reclaim the stack's TX ring (netdev TX queue `q`'s lock), `ndo_xdp_xmit` and its
//!   reclaim the redirect-in ring (the queue's xmit lock); see `src/queues.rs`;
//! - readers (`link_stats`, `rss_get`, `link_up`, `error_report`) take no token and may run any
//!   time; they read registers and what the datapath published (`Os::stats_publish`), never the
//!   running rings.
//!
//! RX pages come from the OS page pool ([`crate::dp::OsPool`]), become packets in place
//! (`build_skb`, recycled by the stack into the pool), XDP runs on them where they lie, XDP_TX
//! sends them from the same page.

use alloc::boxed::Box;
use alloc::vec::Vec;

use onic_core::device::rss_control::{HashFunction, Rss};
use onic_core::device::settings::{ChannelsRequest, NetSettings, RingRequest, MIN_MTU};
use onic_core::queue::rx::DEFAULT_MAX_FRAME_LEN;
use onic_core::rss::{PublishedHasher, KEY_LEN, TABLE_LEN};
use onic_core::stats::ethtool::{EthtoolStats, Stats64};
use onic_core::stats::{QueueCounters, HW_COUNTERS};
use onic_core::{Device, DeviceConfig, FunctionId, QueueId, RingSizeIdx, RxQueueConfig};
use onic_hal::{DelayNs, DmaMemory, RegisterWindow, SharedLock};

pub use crate::abi::LinkStats;
use crate::abi::OnicLayout;
use crate::contexts::{Control, Domain, Owned, QueueTokens, Quiet, Token, CONTROL};
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
    /// The port's contexts: tokens of another port open none of its cells.
    domain: Domain,
    ctl: Owned<Ctl<L, K>, Control>,
    pub(crate) queues: Vec<Queue<K, D>>,
    /// The shell's hash under the key the shell holds, for the polls: published by the core's
    /// `Rss` whenever it writes a key, the OS's grace period (`synchronize_net`) waited out.
    pub(crate) hasher: Box<PublishedHasher>,
}

/// Control-plane state, opened by control calls only. The RSS state and the queue pairs in use
/// are `rss`'s; the ring sizes and the MTU are `net`'s.
struct Ctl<L, K: Os> {
    delay: L,
    net: NetSettings,
    rss: Rss,
    up: bool,
    /// The page pool of each running queue index, for its statistics.
    mems: Vec<Option<K::QMem>>,
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
        let hasher = crate::heap::try_box_default_hasher().ok_or(ENOMEM)?;
        let PortRegs { qdma, shell, lock } = regs;
        let (dev, mut rss) =
            Device::init_shared(qdma, shell, lock, &mut delay, dcfg).map_err(|e| errno::from_core(&e))?;
        let n = usize::from(cfg.max_queues);
        let domain = Domain::new();
        // CAST: below `max_queues`, a u16.
        let ready = crate::heap::try_vec_with(n, |q| Queue::new(domain, q as u16))
            .zip(crate::heap::try_vec_with(n, |_| None))
            .ok_or(ENOMEM)
            .and_then(|(queues, mems)| {
                Self::adopt(&dev, &mut rss, (&hasher, &os), cfg.queues)?;
                Ok((queues, mems))
            });
        let (queues, mems) = match ready {
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
        let ctl = Ctl {
            delay,
            net,
            rss,
            up: false,
            mems,
        };
        let port = Self {
            dev,
            dma,
            os,
            domain,
            ctl: Owned::new(ctl, domain, CONTROL),
            queues,
            hasher,
        };
        Ok(port)
    }

    /// Makes a freshly brought-up device's state the port's: `queues` pairs in use, and the
    /// hash key the shell holds now (the RTL's reset key unless an earlier driver changed it),
    /// published to the port's hasher.
    fn adopt(
        dev: &Device<R, R, C>,
        rss: &mut Rss,
        (hasher, os): (&PublishedHasher, &K),
        queues: u16,
    ) -> Result<(), Errno> {
        let combined = u32::from(queues);
        rss.set_channels(
            dev,
            ChannelsRequest {
                combined,
                ..ChannelsRequest::default()
            },
        )
        .map_err(|e| errno::from_ethtool(&e))?;
        let (_, key) = dev.rss_read_back();
        if key != *rss.config().key() {
            rss.set(
                dev,
                hasher,
                os,
                None,
                Some(key.as_bytes()),
                HashFunction::NoChange,
            )
            .map_err(|e| errno::from_core(&e))?;
        }
        Ok(())
    }

    /// The port's contexts (what the entry points make its tokens for).
    pub const fn domain(&self) -> Domain {
        self.domain
    }

    /// The control state, for the control context.
    fn ctl<'t>(&'t self, token: &'t mut Token<'_, Control>) -> Result<&'t mut Ctl<L, K>, Errno> {
        self.ctl.open(token).map_err(|e| {
            onic_hal::error!("onic: {}", e);
            EINVAL
        })
    }

    /// `ethtool -l` and `-g`: queue pairs (owned, in use) and ring sizes (largest, current).
    ///
    /// # Errors
    ///
    /// `EINVAL` for another port's token.
    pub fn layout(&self, ctl: &mut Token<'_, Control>) -> Result<OnicLayout, Errno> {
        let c = self.ctl(ctl)?;
        let ch = c.rss.channels(&self.dev);
        let rings = c.net.rings();
        Ok(OnicLayout {
            max_queues: u32::from(ch.max_combined),
            queues: u32::from(ch.combined),
            tx_ring: rings.tx,
            rx_ring: rings.rx,
            max_ring: rings.rx_max,
        })
    }

    /// The PCI function.
    pub fn func(&self) -> FunctionId {
        self.dev.function()
    }

    /// Starts every queue pair in use (hardware.md §13.2): the queue's page pool, TX ring, RX ring
    /// filled from the pool, contexts, interrupt armed. On failure everything started is torn
    /// down again. The datapath is stopped (`quiet`).
    ///
    /// # Errors
    ///
    /// `ENOMEM`, `EIO`; `EINVAL` for another port's tokens.
    pub fn open(&self, ctl: &mut Token<'_, Control>, quiet: &mut Quiet<'_>) -> Result<(), Errno> {
        let c = self.ctl(ctl)?;
        if c.up {
            return Ok(());
        }
        let ch = c.rss.channels(&self.dev);
        let (rx_ring, tx_ring) = c.net.ring_sizes();
        for (q, queue) in (0..ch.combined).zip(&self.queues) {
            let mut t = quiet.queue(q);
            let r = self
                .rings(&mut c.delay)
                .start_queue(queue, &mut t, ch.max_combined, tx_ring, rx_ring);
            match r {
                Ok(mem) => {
                    if let Some(m) = c.mems.get_mut(usize::from(q)) {
                        *m = Some(mem);
                    }
                }
                Err(e) => {
                    self.stop_queues(c, quiet);
                    return Err(e);
                }
            }
        }
        c.up = true;
        Ok(())
    }

    /// Invalidates every context of every queue of the function, with no fallback: what the glue
    /// does before it lets a card it cut off from memory (a teardown whose invalidation did not
    /// complete, hal `RegisterWindow::cut_off`) reach memory again. The port must be down.
    ///
    /// # Errors
    ///
    /// `EBUSY` when the port is up; `EIO` when the card still does not complete context
    /// commands (its DMA must stay off); `EINVAL` for another port's token.
    pub fn invalidate_all_queues(&self, ctl: &mut Token<'_, Control>) -> Result<(), Errno> {
        let c = self.ctl(ctl)?;
        if c.up {
            return Err(EBUSY);
        }
        self.dev
            .invalidate_all_queues(&mut c.delay)
            .map_err(|e| errno::from_core(&e))
    }

    fn rings<'p>(&'p self, delay: &'p mut L) -> Rings<'p, R, C, D, K, L> {
        Rings {
            dev: &self.dev,
            dma: &self.dma,
            os: &self.os,
            delay,
        }
    }

    /// `ethtool -x`: the indirection table and the hash key as the shell holds them (the core's
    /// read-back, hardware.md §9.2). Registers are only read: any context.
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
    /// use), then writes the table, then the key, and publishes a new key to the polls' hasher;
    /// nothing is written when anything is invalid.
    /// A table set here is the user's: it survives queue-count changes that keep its queues.
    ///
    /// # Errors
    ///
    /// `EINVAL` for an entry that names a queue not in use, or another port's token.
    pub fn rss_set(
        &self,
        ctl: &mut Token<'_, Control>,
        indir: Option<&[u32; RSS_INDIR_SIZE]>,
        key: Option<&[u8; RSS_KEY_SIZE]>,
    ) -> Result<(), Errno> {
        let c = self.ctl(ctl)?;
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
        c.rss
            .set(
                &self.dev,
                &self.hasher,
                &self.os,
                table.as_ref().map(|t| &t[..]),
                key.map(|k| &k[..]),
                HashFunction::NoChange,
            )
            .map(|_| ())
            .map_err(|e| errno::from_core(&e))
    }

    /// Back to the default RSS table (the key stays), for a table the kernel says the user did
    /// not set.
    ///
    /// # Errors
    ///
    /// As the core's `Rss::reset`; `EINVAL` for another port's token.
    pub fn rss_reset(&self, ctl: &mut Token<'_, Control>) -> Result<(), Errno> {
        let c = self.ctl(ctl)?;
        c.rss
            .reset(&self.dev)
            .map(|_| ())
            .map_err(|e| errno::from_core(&e))
    }

    /// Tears every queue down (hardware.md §13.4). The datapath is stopped (`quiet`).
    ///
    /// # Errors
    ///
    /// `EINVAL` for another port's token (nothing is torn down).
    pub fn stop(&self, ctl: &mut Token<'_, Control>, quiet: &mut Quiet<'_>) -> Result<(), Errno> {
        let c = self.ctl(ctl)?;
        self.stop_queues(c, quiet);
        c.up = false;
        Ok(())
    }

    fn stop_queues(&self, c: &mut Ctl<L, K>, quiet: &mut Quiet<'_>) {
        for (q, queue) in (0..).zip(&self.queues) {
            if let Err(e) = self.rings(&mut c.delay).stop_queue(queue, &mut quiet.queue(q)) {
                onic_hal::error!("onic: queue {} not stopped: errno {}", q, e);
            }
            if let Some(m) = c.mems.get_mut(usize::from(q)) {
                *m = None;
            }
        }
    }

    /// Restarts one queue index's rings in place (its contexts stopped: `queue`): the recovery
    /// from a ring in its error state or a TX timeout (each ring's buffers and pages back to
    /// their owners, contexts programmed again, counters kept). Process context.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a queue index that is not running or another port's tokens; `EIO` when the
    /// device did not take a context command (the rings keep their buffers; retry, or stop the
    /// interface).
    pub fn restart_queue(
        &self,
        ctl: &mut Token<'_, Control>,
        queue: &mut QueueTokens<'_>,
    ) -> Result<(), Errno> {
        let c = self.ctl(ctl)?;
        let q = queue.napi.index();
        if !c.up || q >= c.rss.channels(&self.dev).combined {
            return Err(EINVAL);
        }
        let cells = self.queues.get(usize::from(q)).ok_or(EINVAL)?;
        self.rings(&mut c.delay).restart_queue(cells, queue)
    }

    /// Link statistics (`ndo_get_stats64`): the core's `rtnl_link_stats64` view of the queues'
    /// published counters, and the packet adapter's RX drops as missed frames. Any context.
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
    fn snapshots(&self, ctl: &mut Token<'_, Control>) -> Result<Vec<QueueCounters>, Errno> {
        let c = self.ctl(ctl)?;
        crate::heap::try_vec_with(self.queues.len(), |qid| {
            let mut counters = self.read_queue(qid);
            if let Some(&Some(mem)) = c.mems.get(qid) {
                counters.pool = self.os.pp_stats(mem);
            }
            counters
        })
        .ok_or(ENOMEM)
    }

    /// `ethtool -S` names: `out` gets [`Port::stats_count`] strings of `ETH_GSTRING_LEN`.
    pub fn stat_names(
        &self,
        ctl: &mut Token<'_, Control>,
        mut out: impl FnMut(usize, &[u8; ETH_GSTRING_LEN]),
    ) {
        let Ok(v) = self.snapshots(ctl) else {
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
    pub fn ethtool_stats(&self, ctl: &mut Token<'_, Control>, out: &mut [u64]) {
        let Ok(v) = self.snapshots(ctl) else {
            return;
        };
        let hw = self.dev.hw_counters();
        EthtoolStats::new(hw, &v).fill(out);
    }

    /// Validates and keeps a new MTU (the core's bounds: a frame fits one C2H buffer and the
    /// shell's largest frame, hardware.md §14).
    ///
    /// # Errors
    ///
    /// `EINVAL` outside the core's bounds, or for another port's token.
    pub fn change_mtu(&self, ctl: &mut Token<'_, Control>, mtu: u32) -> Result<(), Errno> {
        let c = self.ctl(ctl)?;
        c.net.set_mtu(mtu).map_err(|e| errno::from_ethtool(&e))
    }

    /// The MTU bounds the core accepts (`netdev->min_mtu`, `max_mtu`).
    ///
    /// # Errors
    ///
    /// `EINVAL` for another port's token.
    pub fn mtu_range(&self, ctl: &mut Token<'_, Control>) -> Result<(u32, u32), Errno> {
        Ok((MIN_MTU, self.ctl(ctl)?.net.max_mtu()))
    }

    /// Checks a new layout (`ethtool -L combined queues`, `-G tx tx_ring rx rx_ring`, usable
    /// entries) against the core's rules without applying it.
    ///
    /// # Errors
    ///
    /// `EINVAL` for a queue count outside 1..=max, an RSS table (set by `ethtool -X`) naming a
    /// queue that would go away, or a ring size not in the QDMA's table: the same checks
    /// [`Port::reconfigure`] applies, so that a request it would refuse never stops the interface.
    pub fn check_layout(
        &self,
        ctl: &mut Token<'_, Control>,
        queues: u32,
        tx_ring: u32,
        rx_ring: u32,
    ) -> Result<(), Errno> {
        let c = self.ctl(ctl)?;
        let mut net = c.net;
        c.rss
            .check_set_channels(&self.dev, channels(queues))
            .map_err(|e| errno::from_ethtool(&e))?;
        net.set_rings(rings(tx_ring, rx_ring))
            .map_err(|e| errno::from_ethtool(&e))?;
        Ok(())
    }

    /// Applies a new layout (queue pairs in use, usable ring entries); the queues are rebuilt
    /// with it at the next `open`. The core checks it first, including that a table set by
    /// `ethtool -X` names no queue that would go away; nothing changes on a refusal.
    ///
    /// # Errors
    ///
    /// `EBUSY` if the interface is up, `EINVAL` as [`Port::check_layout`] or for an RSS table
    /// naming a queue that would go away.
    pub fn reconfigure(
        &self,
        ctl: &mut Token<'_, Control>,
        queues: u32,
        tx_ring: u32,
        rx_ring: u32,
    ) -> Result<(), Errno> {
        let c = self.ctl(ctl)?;
        if c.up {
            return Err(EBUSY);
        }
        let mut net = c.net;
        net.set_rings(rings(tx_ring, rx_ring))
            .map_err(|e| errno::from_ethtool(&e))?;
        c.rss
            .set_channels(&self.dev, channels(queues))
            .map_err(|e| errno::from_ethtool(&e))?;
        c.net = net;
        Ok(())
    }

    /// Takes the function down (hardware.md §13.5); queues still running are torn down first.
    /// Owning the port, the caller is every one of its contexts: the cells open without tokens.
    pub fn remove(self) {
        let Self {
            dev,
            dma,
            os,
            ctl,
            queues,
            ..
        } = self;
        let mut ctl = ctl.into_inner();
        for (q, queue) in (0..).zip(queues) {
            let Queue { napi, stack, xmit } = queue;
            let mut rings = Rings {
                dev: &dev,
                dma: &dma,
                os: &os,
                delay: &mut ctl.delay,
            };
            rings.stop_rings(
                &mut napi.into_inner(),
                &mut stack.into_inner(),
                &mut xmit.into_inner(),
                q,
            );
        }
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
