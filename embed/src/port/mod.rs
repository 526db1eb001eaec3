//! A port: one PCI function, one network interface, driven by a host through this one door.
//!
//! A [`Port`] owns everything the core needs around one function: the device and its RSS state
//! with the published hasher, the queue indices with their rings (built, started, restarted and
//! torn down here), the statistics the datapath publishes and the control settings. A host (the
//! kernel module, a test over the model) implements [`Host`] and calls the port's methods from
//! its entry points; it writes no driver logic of its own.
//!
//! Who may call what at the same time is the host's serialization, made types
//! ([`contexts`]): each method takes the token of the context it runs in.
//!
//! - *control* calls (`open`, `stop`, the settings) take the control token (Linux: RTNL); those
//!   that start, stop or restart rings also take the proof that the datapath contexts are
//!   stopped ([`Quiet`], or one queue's [`QueueTokens`]);
//! - the *datapath* calls of queue index `q` (`datapath.rs`) each take the token of the one owner
//!   of the rings they touch: the NAPI poll its RX and XDP_TX rings, transmit and the poll's
//!   reclaim the stack's TX ring (the stack's TX queue lock), the redirect-in transmit and its
//!   reclaim the redirect-in ring (the queue's xmit lock); see `queues.rs`;
//! - readers (`link_stats`, `rss_get`, `link_up`, `error_report`) take no token and may run any
//!   time; they read registers and what the datapath published (`counters.rs`), never
//!   the running rings.
//!
//! RX pages come from the host's page pool ([`sinks::HostPool`]), become the stack's packets in
//! place, XDP runs on them where they lie, XDP_TX sends them from the same page.

pub mod abi;
pub mod contexts;
pub mod counters;
mod datapath;
mod error;
mod host;
mod queues;
pub mod sinks;
mod solo;
mod umem;
pub mod xsk;

pub use crate::tuning::{QueueTuning, RxBufSizes, MAX_RX_BUF_SIZES};
pub use abi::{PollResult, PortLayout, TxClean, TxState, XmitResult};
pub use contexts::{
    AllContexts, Control, Domain, Kind, Napi, QueueTokens, Quiet, Token, TxLock, XmitLock, CONTROL,
};
pub use error::{PortError, PortResult, XskRefusal};
pub use host::{FrameAt, Host, Mapped, SkbHash, StatBlock};
pub use queues::{NapiPair, QueueView, RingHoldings, TxRing, TxRole, MAX_PORT_QUEUES};
pub use solo::SoloPort;
pub use umem::{XskBuf, XskTxDesc};
pub use xsk::XskHoldings;

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::sync::atomic::{AtomicBool, Ordering};

use onic_core::device::health::{DeviceIdentity, QueueContexts};
use onic_core::device::line::{FecMode, FecParams, FecStats, RegisterTestError};
use onic_core::device::rss_control::{HashFunction, Rss, RssConfig, RssParts};
use onic_core::device::settings::{ChannelsRequest, NetSettings, RingRequest, MIN_MTU};
use onic_core::queue::rx::DEFAULT_MAX_FRAME_LEN;
use onic_core::queue::source::SourceKind;
use onic_core::rss::{PublishedHasher, KEY_LEN, TABLE_LEN};
use onic_core::stats::ethtool::{QueueStats, Stats64};
use onic_core::stats::{MacStatGroups, PauseParams, QueueCounters, HW_COUNTERS};
use onic_core::{Device, DeviceConfig, FunctionId, QueueId, RingSizeIdx, RxModeration, RxQueueConfig};

use contexts::Owned;
use counters::QSTAT_WORDS;
use queues::{HostDevice, Queue, Rings};

/// Entries of the shell's RSS indirection table (`ethtool -x` indirection size).
pub const RSS_INDIR_SIZE: usize = TABLE_LEN;
/// Bytes of the shell's RSS hash key (`ethtool -x` key size).
pub const RSS_KEY_SIZE: usize = KEY_LEN;

/// Settings chosen at probe time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// PCI function (= port).
    pub func: u8,
    /// Queue indices the function may use (interrupt vectors), at most [`MAX_PORT_QUEUES`].
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

/// One function's port over host `H`.
pub struct Port<H: Host> {
    pub(crate) dev: HostDevice<H>,
    pub(crate) host: H,
    /// The port's contexts: tokens of another port open none of its cells.
    domain: Domain,
    ctl: Owned<Ctl<H>, Control>,
    pub(crate) queues: Vec<Queue<H>>,
    /// The shell's hash under the key the shell holds, for the polls: published by the core's
    /// `Rss` whenever it writes a key, the host's grace period waited out.
    pub(crate) hasher: Box<PublishedHasher>,
    /// Whether packets to the stack, and programs asking, get the shell's hash (Linux's
    /// `NETIF_F_RXHASH`): set by a control call, read by every poll (relaxed: a poll that still
    /// sees the old value hashes, or not, one poll longer).
    pub(crate) rx_hash: AtomicBool,
}

/// Control-plane state, opened by control calls only. The RSS state and the queue pairs in use
/// are `rss`'s; the ring sizes and the MTU are `net`'s.
struct Ctl<H: Host> {
    delay: H::Delay,
    net: NetSettings,
    rss: Rss,
    up: bool,
    /// What every queue is built with.
    tuning: QueueTuning,
    /// The page pool of each running queue index, for its statistics.
    mems: Vec<Option<H::QMem>>,
    /// The queue indices whose buffers are UMEM frames (bit `q`), `xsk::set_queue_source`.
    xsk: u64,
}

/// The register windows and lock a port's function is reached through.
pub struct PortRegs<Q, S, C> {
    /// BAR0 (QDMA).
    pub qdma: Q,
    /// BAR2 (shell).
    pub shell: S,
    /// The card's context-command lock.
    pub lock: C,
}

/// The register windows and lock of a port over host `H`.
pub type HostRegs<H> = PortRegs<<H as Host>::Qdma, <H as Host>::Shell, <H as Host>::CardLock>;

impl<H: Host> Port<H> {
    /// Brings the function up (hardware.md §13.1 steps 5-10 through `Device::init_shared`, with the
    /// function's TX-only queue ids after its pairs) and builds the port's state. Nothing runs
    /// yet; `open` starts the queues.
    ///
    /// # Errors
    ///
    /// `Invalid` for a bad configuration; the core's errors (a missing CMAC, a device that does
    /// not respond); `NoMemory`.
    pub fn new(regs: HostRegs<H>, delay: H::Delay, host: H, cfg: PortConfig) -> PortResult<Self> {
        Self::in_domain(regs, delay, host, cfg, Domain::new())
    }

    /// As [`Port::new`], with the contexts of `domain` (a [`SoloPort`]'s, whose one thread makes
    /// every proof of it).
    pub(crate) fn in_domain(
        regs: HostRegs<H>,
        mut delay: H::Delay,
        host: H,
        cfg: PortConfig,
        domain: Domain,
    ) -> PortResult<Self> {
        if cfg.queues == 0 || cfg.queues > cfg.max_queues || cfg.max_queues > MAX_PORT_QUEUES {
            return Err(PortError::Invalid);
        }
        let mut dcfg = DeviceConfig::new(cfg.func, cfg.max_queues)
            .and_then(|c| c.with_tx_only(2 * cfg.max_queues))
            .map_err(|_| PortError::Invalid)?;
        dcfg.rs_fec = cfg.rs_fec;
        let hasher = host.try_box_hasher().ok_or(PortError::NoMemory)?;
        let PortRegs { qdma, shell, lock } = regs;
        let (dev, mut rss) = Device::init_shared(qdma, shell, lock, &mut delay, dcfg)?;
        let n = usize::from(cfg.max_queues);
        // CAST: below `max_queues`, a u16.
        let ready = host
            .try_vec(n, |q| Queue::new(domain, q as u16))
            .zip(host.try_vec(n, |_| None))
            .ok_or(PortError::NoMemory)
            .and_then(|(queues, mems)| {
                Self::adopt(&dev, &mut rss, (&hasher, host.grace()), cfg.queues)?;
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
            tuning: QueueTuning::default(),
            mems,
            xsk: 0,
        };
        let port = Self {
            dev,
            host,
            domain,
            ctl: Owned::new(ctl, domain, CONTROL),
            queues,
            hasher,
            rx_hash: AtomicBool::new(true),
        };
        Ok(port)
    }

    /// Makes a freshly brought-up device's state the port's: `queues` pairs in use, and the
    /// hash key the shell holds now (the RTL's reset key unless an earlier driver changed it),
    /// published to the port's hasher.
    fn adopt(
        dev: &HostDevice<H>,
        rss: &mut Rss,
        (hasher, grace): (&PublishedHasher, &H::Grace),
        queues: u16,
    ) -> PortResult<()> {
        rss.set_channels(dev, channels(u32::from(queues)))?;
        let (_, key) = dev.rss_read_back();
        if key != *rss.config().key() {
            rss.set(
                dev,
                hasher,
                grace,
                None,
                Some(key.as_bytes()),
                HashFunction::NoChange,
            )?;
        }
        Ok(())
    }

    /// The port's contexts (what the entry points make its tokens for).
    pub const fn domain(&self) -> Domain {
        self.domain
    }

    /// The control state, for the control context.
    fn ctl<'t>(&'t self, token: &'t mut Token<'_, Control>) -> PortResult<&'t mut Ctl<H>> {
        self.ctl.open(token).map_err(|e| {
            onic_hal::error!("onic: {}", e);
            PortError::WrongContext
        })
    }

    /// `ethtool -l` and `-g`: queue pairs (owned, in use) and ring sizes (largest, current).
    ///
    /// # Errors
    ///
    /// `WrongContext` for another port's token.
    pub fn layout(&self, ctl: &mut Token<'_, Control>) -> PortResult<PortLayout> {
        let c = self.ctl(ctl)?;
        let ch = c.rss.channels(&self.dev);
        let rings = c.net.rings();
        Ok(PortLayout {
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
    /// `NoMemory`, the core's errors, the host's; `WrongContext` for another port's tokens.
    pub fn open(&self, ctl: &mut Token<'_, Control>, quiet: &mut Quiet<'_>) -> PortResult<()> {
        let c = self.ctl(ctl)?;
        if c.up {
            return Ok(());
        }
        let ch = c.rss.channels(&self.dev);
        let (rx_ring, tx_ring) = c.net.ring_sizes();
        for (q, queue) in (0..ch.combined).zip(&self.queues) {
            let mut t = quiet.queue(q);
            // A queue switched to a socket that is gone since runs on its page pool again.
            let source = match xsk::source_of(c.xsk, q) {
                SourceKind::Xsk if self.host.xsk_bound(q).is_none() => {
                    c.xsk &= !(1 << q);
                    SourceKind::Pages
                }
                s => s,
            };
            let r = self.rings(&mut c.delay).start_queue(
                queue,
                &mut t,
                &c.tuning,
                (ch.max_combined, source),
                (tx_ring, rx_ring),
            );
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
    /// `Busy` when the port is up; the core's error when the card still does not complete
    /// context commands (its DMA must stay off); `WrongContext` for another port's token.
    pub fn invalidate_all_queues(&self, ctl: &mut Token<'_, Control>) -> PortResult<()> {
        let c = self.ctl(ctl)?;
        if c.up {
            return Err(PortError::Busy);
        }
        Ok(self.dev.invalidate_all_queues(&mut c.delay)?)
    }

    /// Chooses what the queues are built with from the next `open` on ([`QueueTuning`]); the
    /// MTU bounds follow the new buffers (the smallest of any queue) and largest frame (the MTU becomes the largest they
    /// allow, the ring sizes stay).
    ///
    /// # Errors
    ///
    /// `Busy` when the port is up; `WrongContext` for another port's token.
    pub fn set_tuning(&self, ctl: &mut Token<'_, Control>, tuning: QueueTuning) -> PortResult<()> {
        let c = self.ctl(ctl)?;
        if c.up {
            return Err(PortError::Busy);
        }
        let (rx_ring, tx_ring) = c.net.ring_sizes();
        c.net = NetSettings::new(rx_ring, tx_ring, tuning.bufs.smallest(), tuning.max_frame_len);
        c.tuning = tuning;
        Ok(())
    }

    fn rings<'p>(&'p self, delay: &'p mut H::Delay) -> Rings<'p, H> {
        Rings {
            dev: &self.dev,
            host: &self.host,
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
    /// Returns the parts the call wrote to the shell.
    ///
    /// # Errors
    ///
    /// `Invalid` for an entry beyond any queue id, the core's RSS error for an entry that names
    /// a queue not in use; `WrongContext` for another port's token.
    pub fn rss_set(
        &self,
        ctl: &mut Token<'_, Control>,
        indir: Option<&[u32; RSS_INDIR_SIZE]>,
        key: Option<&[u8; RSS_KEY_SIZE]>,
    ) -> PortResult<RssParts> {
        let c = self.ctl(ctl)?;
        let table = match indir {
            Some(t) => {
                let mut out = [0u16; RSS_INDIR_SIZE];
                for (o, &e) in out.iter_mut().zip(t) {
                    *o = u16::try_from(e).map_err(|_| PortError::Invalid)?;
                }
                Some(out)
            }
            None => None,
        };
        Ok(c.rss.set(
            &self.dev,
            &self.hasher,
            self.host.grace(),
            table.as_ref().map(|t| &t[..]),
            key.map(|k| &k[..]),
            HashFunction::NoChange,
        )?)
    }

    /// The RSS state the driver holds (the table and key it wrote last; [`Port::rss_get`] reads
    /// the shell's).
    ///
    /// # Errors
    ///
    /// `WrongContext` for another port's token.
    pub fn rss_config(&self, ctl: &mut Token<'_, Control>) -> PortResult<RssConfig> {
        Ok(*self.ctl(ctl)?.rss.config())
    }

    /// Back to the default RSS table (the key stays), for a table the kernel says the user did
    /// not set.
    ///
    /// # Errors
    ///
    /// As the core's `Rss::reset`; `WrongContext` for another port's token.
    pub fn rss_reset(&self, ctl: &mut Token<'_, Control>) -> PortResult<()> {
        let c = self.ctl(ctl)?;
        c.rss.reset(&self.dev)?;
        Ok(())
    }

    /// Tears every queue down (hardware.md §13.4). The datapath is stopped (`quiet`).
    ///
    /// # Errors
    ///
    /// `WrongContext` for another port's token (nothing is torn down).
    pub fn stop(&self, ctl: &mut Token<'_, Control>, quiet: &mut Quiet<'_>) -> PortResult<()> {
        let c = self.ctl(ctl)?;
        self.stop_queues(c, quiet);
        c.up = false;
        Ok(())
    }

    fn stop_queues(&self, c: &mut Ctl<H>, quiet: &mut Quiet<'_>) {
        for (q, queue) in (0..).zip(&self.queues) {
            if let Err(e) = self.rings(&mut c.delay).stop_queue(queue, &mut quiet.queue(q)) {
                onic_hal::error!("onic: queue {} not stopped: {}", q, e);
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
    /// `Invalid` for a queue index that is not running, `WrongContext` for another port's
    /// tokens; the core's error when the device did not take a context command (the rings keep
    /// their buffers; retry, or stop the interface).
    pub fn restart_queue(&self, ctl: &mut Token<'_, Control>, queue: &mut QueueTokens<'_>) -> PortResult<()> {
        let c = self.ctl(ctl)?;
        let q = queue.napi.index();
        if !c.up || q >= c.rss.channels(&self.dev).combined {
            return Err(PortError::Invalid);
        }
        let cells = self.queues.get(usize::from(q)).ok_or(PortError::Invalid)?;
        self.rings(&mut c.delay).restart_queue(cells, queue)
    }

    /// Link statistics (Linux: `ndo_get_stats64`): the core's `rtnl_link_stats64` view of the
    /// queues' published counters, and the packet adapter's RX drops as missed frames. Any
    /// context.
    pub fn link_stats(&self) -> Stats64 {
        let mut s = Stats64::default();
        for qid in 0..self.queues.len() {
            s += Stats64::from_queues(core::slice::from_ref(&self.read_queue(qid)), 0);
        }
        s.rx_missed_errors = self.dev.adapter_rx_drops();
        s
    }

    /// Queue index `qid`'s statistics for the OS's per-queue view (Linux: `netdev_stat_ops`),
    /// or `None` past the port's queues. Any context.
    pub fn queue_stats(&self, qid: u16) -> Option<QueueStats> {
        self.queue_counters(qid).map(|c| QueueStats::from(&c))
    }

    /// The statistics of the queue indices from `active` on, which the OS does not show as
    /// queues (those beyond the channels in use, whose counters stay in [`Self::link_stats`]):
    /// with the first `active` queues' [`Self::queue_stats`] they add up to the link's packets
    /// and bytes. Any context.
    pub fn base_stats(&self, active: u16) -> QueueStats {
        let mut s = QueueStats::default();
        for qid in usize::from(active)..self.queues.len() {
            s += QueueStats::from(&self.read_queue(qid));
        }
        s
    }

    /// Queue index `qid`'s published counters: the sum of its blocks.
    fn read_queue(&self, qid: usize) -> QueueCounters {
        self.queues.get(qid).map(|q| q.blocks.sum()).unwrap_or_default()
    }

    /// Block `block` of queue index `qid` as published (zero for an index the port does not
    /// own): what one writer has counted, for diagnostics. Any context.
    pub fn counter_block(&self, qid: u16, block: StatBlock) -> [u64; QSTAT_WORDS] {
        self.queues
            .get(usize::from(qid))
            .map_or([0; QSTAT_WORDS], |q| q.blocks.get(block).load())
    }

    /// CMACs the bring-up found on the card (registers only read at bring-up: any context).
    pub const fn cmacs(&self) -> u8 {
        self.dev.cmacs()
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

    /// Queue indices the port owns (every one is listed in the statistics, so their number
    /// stays the same when the queues in use change).
    pub fn queue_count(&self) -> usize {
        self.queues.len()
    }

    /// The per-queue snapshots the extended statistics show (`ethtool -S`): published counters,
    /// and the statistics of the queue's page pool while it runs.
    ///
    /// # Errors
    ///
    /// `NoMemory`; `WrongContext` for another port's token.
    pub fn queue_snapshots(&self, ctl: &mut Token<'_, Control>) -> PortResult<Vec<QueueCounters>> {
        let c = self.ctl(ctl)?;
        self.host
            .try_vec(self.queues.len(), |qid| {
                let mut counters = self.read_queue(qid);
                if let Some(&Some(mem)) = c.mems.get(qid) {
                    counters.pool = self.host.pool_stats(mem);
                }
                counters
            })
            .ok_or(PortError::NoMemory)
    }

    /// Where the pages of every running queue index's pool are, as the port's rings hold them
    /// (the datapath stopped, `quiet`): the pool's own count and what the host holds complete
    /// the census (`model::ModelHost::check_census` for the model, feature `model`).
    ///
    /// # Errors
    ///
    /// `NoMemory`; `WrongContext` for another port's tokens.
    pub fn holdings(
        &self,
        ctl: &mut Token<'_, Control>,
        quiet: &mut Quiet<'_>,
    ) -> PortResult<Vec<(H::QMem, RingHoldings)>> {
        self.ctl(ctl)?;
        let mut out = Vec::new();
        for (q, queue) in (0..).zip(&self.queues) {
            let mut t = quiet.queue(q);
            let (napi, _, _) = queue.open(&mut t)?;
            // A queue on UMEM frames holds no page of its page pool (`Port::xsk_holdings`).
            if let (Some(pair), Some(mem)) = (&napi.pair, napi.mem) {
                if pair.pool.as_pages().is_some() {
                    out.try_reserve(1).map_err(|_| PortError::NoMemory)?;
                    out.push((mem, RingHoldings::of(pair)));
                }
            }
        }
        Ok(out)
    }

    /// The port's hardware counters (a TICK, then the reads; hardware.md §10.5).
    pub fn hw_counters(&self) -> [u64; HW_COUNTERS] {
        self.dev.hw_counters()
    }

    /// The standard statistic groups of the port's MAC (`ethtool -S --groups eth-mac eth-phy
    /// eth-ctrl rmon`, the pause-frame counts of `ethtool -I -a`): one TICK of the CMAC, then its
    /// counters mapped by the core ([`onic_core::stats::mac`]). A control call: the TICK latches
    /// the counters every reader of the port shares, so readers take turns.
    ///
    /// # Errors
    ///
    /// `WrongContext` for another port's token.
    pub fn mac_stat_groups(&self, ctl: &mut Token<'_, Control>) -> PortResult<MacStatGroups> {
        self.ctl(ctl)?;
        Ok(self.dev.mac_stat_groups())
    }

    /// The pause settings of the port's CMAC (`ethtool -a`).
    ///
    /// # Errors
    ///
    /// `WrongContext` for another port's token.
    pub fn pause_params(&self, ctl: &mut Token<'_, Control>) -> PortResult<PauseParams> {
        self.ctl(ctl)?;
        Ok(self.dev.pause_params())
    }

    /// The RX queues' interrupt moderation (`ethtool -c`): the fixed setting, and whether
    /// adaptive moderation is on.
    ///
    /// # Errors
    ///
    /// `WrongContext` for another port's token.
    pub fn coalesce(&self, ctl: &mut Token<'_, Control>) -> PortResult<(RxModeration, bool)> {
        self.ctl(ctl)?;
        Ok((self.dev.rx_moderation(), self.dev.rx_adaptive()))
    }

    /// `ethtool -C rx-usecs, rx-frames, adaptive-rx`: the table entries coming closest without
    /// exceeding either (the core's rule) become the fixed setting, and adaptive moderation
    /// goes on or off. Running queues take the change at their next poll's doorbell, queues
    /// started later in their completion context: nothing is stopped, no frame lost. While
    /// adaptive moderation is on, the fixed setting waits for it to go off.
    ///
    /// # Errors
    ///
    /// The core's refusal of a time or count its tables cannot give (nothing changes);
    /// `WrongContext` for another port's token.
    pub fn set_coalesce(
        &self,
        ctl: &mut Token<'_, Control>,
        usecs: u32,
        frames: u32,
        adaptive: bool,
    ) -> PortResult<()> {
        self.ctl(ctl)?;
        let m = onic_core::device::settings::rx_moderation_for(usecs, frames)?;
        self.dev.set_rx_moderation(m);
        self.dev.set_rx_adaptive(adaptive);
        Ok(())
    }

    /// The OS's adaptive moderation moves RX queue index `qid` to `level`
    /// ([`onic_core::moderation::RxModeration::adaptive`]); the queue's next poll's doorbell
    /// carries it. Any context: no token, one compare-exchange in the core, which refuses a
    /// queue that is not adaptive (any more).
    ///
    /// # Errors
    ///
    /// The core's refusal (a queue the port does not have, a level beyond the ladder, adaptive
    /// moderation off): nothing changes.
    pub fn set_rx_level(&self, qid: u16, level: u8) -> PortResult<RxModeration> {
        let m = self
            .dev
            .set_rx_queue_level(onic_core::QueueId::new(qid), level)
            .map_err(onic_core::device::settings::EthtoolError::from)?;
        Ok(m)
    }

    /// `ethtool --show-fec`: the FEC mode asked for and the one the port's CMAC runs.
    ///
    /// # Errors
    ///
    /// `WrongContext` for another port's token.
    pub fn fec(&self, ctl: &mut Token<'_, Control>) -> PortResult<FecParams> {
        self.ctl(ctl)?;
        Ok(self.dev.fec())
    }

    /// `ethtool --set-fec encoding auto|off|rs` (ethtool's mode bits, checked by the core):
    /// RS-FEC on or off on the port's CMAC, at once; the link stays down until the other end
    /// runs the same.
    ///
    /// # Errors
    ///
    /// The core's refusal of a request that is not exactly one of auto, off and rs (nothing
    /// changes); `WrongContext` for another port's token.
    pub fn set_fec(&self, ctl: &mut Token<'_, Control>, ethtool_bits: u32) -> PortResult<()> {
        self.ctl(ctl)?;
        let mode = FecMode::from_ethtool(ethtool_bits)?;
        self.dev.set_fec(mode);
        Ok(())
    }

    /// The RS-FEC codeword counters of the port's CMAC (one TICK; a control call like
    /// [`Port::mac_stat_groups`]).
    ///
    /// # Errors
    ///
    /// `WrongContext` for another port's token.
    pub fn fec_stats(&self, ctl: &mut Token<'_, Control>) -> PortResult<FecStats> {
        self.ctl(ctl)?;
        Ok(self.dev.fec_stats())
    }

    /// Whether the port's CMAC is in near-end loopback. Registers are only read: any context.
    pub fn loopback(&self) -> bool {
        self.dev.loopback()
    }

    /// Whether received packets carry the shell's hash (on from bring-up). Any context.
    pub fn rx_hash(&self) -> bool {
        self.rx_hash.load(Ordering::Relaxed)
    }

    /// `ethtool -K rxhash on|off`: whether the polls hash each frame for the stack (the packet's
    /// hash, `PKT_HASH_TYPE_L3`/`L4`) and for a program asking (the RX-metadata hash, which
    /// reports no hash while this is off). Each queue follows from its next poll.
    ///
    /// # Errors
    ///
    /// `WrongContext` for another port's token.
    pub fn set_rx_hash(&self, ctl: &mut Token<'_, Control>, on: bool) -> PortResult<()> {
        self.ctl(ctl)?;
        self.rx_hash.store(on, Ordering::Relaxed);
        Ok(())
    }

    /// `ethtool -K loopback on|off`: the port's CMAC loops its frames back into itself, or not.
    ///
    /// # Errors
    ///
    /// `WrongContext` for another port's token.
    pub fn set_loopback(&self, ctl: &mut Token<'_, Control>, on: bool) -> PortResult<()> {
        self.ctl(ctl)?;
        self.dev.set_loopback(on);
        Ok(())
    }

    /// The register test of `ethtool -t` (the core's [`Device::register_test`]): `Ok(Err(_))`
    /// names the register that read wrong.
    ///
    /// # Errors
    ///
    /// `WrongContext` for another port's token.
    pub fn register_test(&self, ctl: &mut Token<'_, Control>) -> PortResult<Result<(), RegisterTestError>> {
        self.ctl(ctl)?;
        Ok(self.dev.register_test())
    }

    /// The contexts of queue index `qid` as the QDMA holds them (a health dump; the core's
    /// [`Device::queue_contexts`]: READ commands only, under the card's lock).
    ///
    /// # Errors
    ///
    /// `Invalid` for a queue index the port does not have; the core's error when the context
    /// engine does not answer; `WrongContext` for another port's token.
    pub fn queue_contexts(&self, ctl: &mut Token<'_, Control>, qid: u16) -> PortResult<QueueContexts> {
        let c = self.ctl(ctl)?;
        if usize::from(qid) >= self.queues.len() {
            return Err(PortError::Invalid);
        }
        Ok(self.dev.queue_contexts(&mut c.delay, QueueId::new(qid))?)
    }

    /// Queue index `qid`'s published counters (what its owners last published; any context),
    /// `None` for an index the port does not have.
    pub fn queue_counters(&self, qid: u16) -> Option<QueueCounters> {
        (usize::from(qid) < self.queues.len()).then(|| self.read_queue(usize::from(qid)))
    }

    /// The identity registers of the port's device (`devlink dev info`; registers only read:
    /// any context).
    pub fn identity(&self) -> DeviceIdentity {
        self.dev.identity()
    }

    /// Validates and keeps a new MTU (the core's bounds: a frame fits one C2H buffer and the
    /// shell's largest frame, hardware.md §14).
    ///
    /// # Errors
    ///
    /// The core's refusal outside its bounds; `WrongContext` for another port's token.
    pub fn change_mtu(&self, ctl: &mut Token<'_, Control>, mtu: u32) -> PortResult<()> {
        let c = self.ctl(ctl)?;
        Ok(c.net.set_mtu(mtu)?)
    }

    /// The MTU bounds the core accepts (`netdev->min_mtu`, `max_mtu`).
    ///
    /// # Errors
    ///
    /// `WrongContext` for another port's token.
    pub fn mtu_range(&self, ctl: &mut Token<'_, Control>) -> PortResult<(u32, u32)> {
        Ok((MIN_MTU, self.ctl(ctl)?.net.max_mtu()))
    }

    /// Checks a new layout (`ethtool -L combined queues`, `-G tx tx_ring rx rx_ring`, usable
    /// entries) against the core's rules without applying it.
    ///
    /// # Errors
    ///
    /// The core's refusal of a queue count outside 1..=max, an RSS table (set by `ethtool -X`)
    /// naming a queue that would go away, or a ring size not in the QDMA's table: the same checks
    /// [`Port::reconfigure`] applies, so that a request it would refuse never stops the
    /// interface. `WrongContext` for another port's token.
    pub fn check_layout(
        &self,
        ctl: &mut Token<'_, Control>,
        queues: u32,
        tx_ring: u32,
        rx_ring: u32,
    ) -> PortResult<()> {
        let c = self.ctl(ctl)?;
        let mut net = c.net;
        c.rss.check_set_channels(&self.dev, channels(queues))?;
        net.set_rings(rings(tx_ring, rx_ring))?;
        Ok(())
    }

    /// Applies a new layout (queue pairs in use, usable ring entries); the queues are rebuilt
    /// with it at the next `open`. The core checks it first, including that a table set by
    /// `ethtool -X` names no queue that would go away; nothing changes on a refusal.
    ///
    /// # Errors
    ///
    /// `Busy` if the interface is up; as [`Port::check_layout`].
    pub fn reconfigure(
        &self,
        ctl: &mut Token<'_, Control>,
        queues: u32,
        tx_ring: u32,
        rx_ring: u32,
    ) -> PortResult<()> {
        let c = self.ctl(ctl)?;
        if c.up {
            return Err(PortError::Busy);
        }
        let mut net = c.net;
        net.set_rings(rings(tx_ring, rx_ring))?;
        c.rss.set_channels(&self.dev, channels(queues))?;
        c.net = net;
        Ok(())
    }

    /// Takes the function down (hardware.md §13.5); queues still running are torn down first.
    /// Owning the port, the caller is every one of its contexts: the cells open without tokens.
    /// A failed release of the function is logged ([`Port::shut_down`] returns it instead).
    pub fn remove(self) {
        if let Err(e) = self.shut_down() {
            onic_hal::warn!("onic: teardown of the function failed: {}", e);
        }
    }

    /// As [`Port::remove`], for a host that checks the outcome.
    ///
    /// # Errors
    ///
    /// The core's error when the function's release (the FMAP clear) did not complete.
    pub fn shut_down(mut self) -> PortResult<()> {
        // The queues stop where they lie: moving a queue (its pair, its rings) out of the port
        // first would put kilobytes of it on the caller's stack, the kernel's among them.
        let ctl = self.ctl.get_mut();
        for (q, queue) in (0..).zip(self.queues.iter_mut()) {
            let mut rings = Rings {
                dev: &self.dev,
                host: &self.host,
                delay: &mut ctl.delay,
            };
            let Queue {
                napi,
                stack,
                xmit,
                blocks,
            } = queue;
            rings.stop_rings((napi.get_mut(), stack.get_mut(), xmit.get_mut()), blocks, q);
        }
        self.queues.clear();
        let Self { dev, mut ctl, .. } = self;
        let (r, _, _) = dev.teardown(&mut ctl.get_mut().delay);
        Ok(r?)
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
