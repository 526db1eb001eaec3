//! Device control of one PCI function: bring-up and teardown (hardware.md §3, §4, §10, §11, §13)
//! and the per-queue context programming (hardware.md §5.8, as [`QueueControl`]), here; the raw QDMA
//! context read for tools in `contexts` (feature `raw-registers`); the indirection table and key,
//! and [`Rss`], their one owner, in [`rss_control`]; the settings ethtool changes (channels, rings,
//! MTU, flow hash) in [`settings`].
//!
//! A brought-up function comes in two halves: the [`Device`], shared by every context that drives
//! the function (`&self` only), and its [`Rss`], owned by the control path (`&mut self` to
//! change). See [`Device`] for who may call what.
//!
//! The order of register accesses follows the reference driver exactly, except for the documented
//! deviations in `docs/deviations.md` (each is marked "Deviation" below).

use core::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use onic_hal::layout::csr::{C2hPfchCfg, C2hWbCoalCfg, GlblDscCfg, GlblErrInt, H2cReqThrot};
use onic_hal::layout::ctxt::{CmptCtxt, CtxtSel, FmapCtxt, PfchCtxt, SwCtxt};
use onic_hal::layout::ctxt::{CtxtOp, IndCtxtCmd};
use onic_hal::regs::qdma::{self, errors, tables};
use onic_hal::regs::{cmac, shell};

use onic_hal::context::{
    context_command, cut_off_proof, invalidate_contexts, invalidate_queue, ContextBusy, QueueSide,
};
use onic_hal::{
    AbsQueueId, DelayNs, DmaAddr, FunctionId, QueueId, Quiesced, RegisterAccess, RegisterWindow, SharedGuard,
    SharedLock, Unshared,
};

use crate::config::{DeviceConfig, RingSizeIdx, RxQueueConfig, TxQueueConfig, C2H_BUF_SIZES};
use crate::error::{ConfigError, Error, Result};
use crate::moderation::{ModerationError, QueueModeration, RxModeration, RxModerations};
use crate::queue::control::QueueControl;
use crate::queue::doorbell::Doorbells;
use crate::rss::RssKey;
use crate::stats::hw::{self, HW_COUNTERS};
use onic_hal::layout::desc::{C2H_DESC_BYTES, H2C_DESC_BYTES};

#[cfg(feature = "raw-registers")]
pub mod contexts;
pub mod error_status;
pub mod health;
pub mod line;
pub mod rss_control;
pub mod settings;

pub use rss_control::Rss;
use rss_control::{IndirectionTable, RssConfig};

/// [`Device::stuck`] when no context command is stuck. A command word leaves bits 31:18 zero
/// ([`IndCtxtCmd`]), so all ones names none.
const NONE_STUCK: u32 = u32::MAX;

/// The data words of a context command that carries none.
const NO_DATA: [u32; qdma::IND_CTXT_WORDS] = [0; qdma::IND_CTXT_WORDS];

/// GLBL_ERR_MASK bits written for the streaming-H2C error group. Deviation: the reference driver
/// writes bit 11 only, which is the H2C bit of the older hard IP's map; the QDMA 4.0 soft IP's map
/// has streaming H2C errors at bit 16 (hardware.md §15 item 2). Both are set, so H2C errors are
/// reported whichever map the instance follows, and the reference driver's bit stays enabled.
pub(crate) const H2C_ERR_GROUP_BITS: u32 = errors::GROUP_ST_H2C_V4 | errors::GROUP_ST_H2C_V5;

/// Interval between two SHELL_STATUS reads while a CMAC is in reset, in microseconds (1 ms).
pub(crate) const CMAC_RESET_POLL_INTERVAL_US: u32 = 1000;

/// A brought-up PCI function: FMAP, QCONF and indirection table programmed, global CSRs (master
/// PF) set, CMACs detected (and enabled on the master PF), error interrupt armed (master PF).
///
/// `L` is the card's lock around indirect context commands ([`SharedLock`]): [`Unshared`] where
/// one context drives the whole card, the OS's per-card lock where several functions are driven
/// at once (the Linux module).
///
/// # The two halves
///
/// Bring-up hands out the device together with its [`Rss`] ([`Device::init`]):
///
/// - The `Device` is the shared half. Every method takes `&self`, and the only state it changes
///   after bring-up is the stuck-command marker (an atomic), so it is `Sync` whenever its register
///   windows and its lock are: the datapath's owners ring doorbells through it
///   ([`Device::doorbells`]) while the control path programs queue contexts ([`QueueControl`]).
///   Context commands serialize themselves on the card lock `L` and poll with the caller's delay,
///   so they belong to contexts that may wait (process context in Linux). The register readers
///   (hardware counters, link, error status, [`Device::rss_read_back`]) take no lock and never
///   wait; the counter read writes the port's TICK first, so two of them at once latch twice.
/// - The [`Rss`] is the control half: the table, key and queues in use that the shell holds. Its
///   changes (`ethtool -X`, `-L`) take it by `&mut` and read the device's registers and queue
///   count, so the one context that owns it (RTNL in Linux) is the only one that changes RSS.
///
/// With [`Unshared`] as the lock, the caller promises that one context drives the card (commands
/// of two contexts would interleave); such a device is not `Sync`, so it cannot be shared between
/// threads, only moved.
#[derive(Debug)]
pub struct Device<Q, S, L = Unshared> {
    qdma: Q,
    shell: S,
    lock: L,
    cfg: DeviceConfig,
    cmacs: u8,
    /// The context command that timed out ([`NONE_STUCK`] if none), while IND_CTXT_CMD has not
    /// read idle since: no new command is written over one still in progress, and each call fails
    /// at once instead of waiting out the poll limit again (a wedged engine would hold RTNL for
    /// minutes).
    ///
    /// Every access is `Relaxed`: the word carries only itself (no other memory is published
    /// through it), the register it stands for is read again before it is cleared, and the
    /// commands around it are ordered by the card lock `L`, whose lock and unlock acquire and
    /// release. A clear only replaces the command it read (compare-exchange), so a timeout
    /// recorded meanwhile by another context is not lost.
    stuck: AtomicU32,
    /// The RX queues' interrupt moderation: the function's fixed setting, adaptive on or off,
    /// each queue's current table entries (written by the control path and the OS's adaptive
    /// algorithm, read by each queue's doorbells; [`crate::moderation`]).
    moderation: RxModerations,
    /// The last FEC mode asked for (`line::FecMode`'s bits, 0 before any request): written by
    /// the control path, read by `ethtool --show-fec`. `Relaxed`: it carries only itself.
    fec_request: AtomicU8,
}

// The shared half stays shareable: no `Cell` (or other `!Sync` field) may come back into
// `Device`, and the control half can move to the context that owns it.
const _: fn() = || {
    fn is_sync<T: Sync>() {}
    fn is_send<T: Send>() {}
    fn device_is_sync<Q: Sync, S: Sync, L: Sync>() {
        is_sync::<Device<Q, S, L>>();
    }
    device_is_sync::<(), (), ()>();
    is_sync::<Rss>();
    is_send::<Rss>();
};

/// The register windows behind a [`Device`], for tools and tests that look at (or poke) the
/// hardware below the driver: the `onic trace` tool, register-sequence tests. Enabled by the
/// `raw-registers` feature; drivers change the device only through [`Device`]'s methods.
#[cfg(feature = "raw-registers")]
#[derive(Debug)]
pub struct RawRegisters<'d, Q, S> {
    /// The QDMA BAR (BAR0).
    pub qdma: &'d Q,
    /// The shell BAR (BAR2).
    pub shell: &'d S,
}

impl<Q, S, L> Device<Q, S, L> {
    /// The configuration.
    #[must_use]
    pub const fn config(&self) -> &DeviceConfig {
        &self.cfg
    }

    /// The PCI function.
    #[must_use]
    pub const fn function(&self) -> FunctionId {
        self.cfg.func
    }

    /// CMACs detected (consecutive ports from 0 reporting version 0x301).
    #[must_use]
    pub const fn cmacs(&self) -> u8 {
        self.cmacs
    }

    /// The shell BAR, for the RSS state's programming ([`Rss`]).
    pub(crate) const fn shell(&self) -> &S {
        &self.shell
    }
}

impl<Q: RegisterWindow, S: RegisterWindow> Device<Q, S, Unshared> {
    /// Brings up one PCI function (hardware.md §13.1 steps 5-10) of a card that no other context
    /// drives at the same time; see [`Device::init_shared`].
    ///
    /// # Errors
    ///
    /// As [`Device::init_shared`].
    pub fn init<D: DelayNs>(qdma: Q, shell: S, delay: &mut D, cfg: DeviceConfig) -> Result<(Self, Rss)> {
        Self::init_shared(qdma, shell, Unshared::NEW, delay, cfg)
    }
}

impl<Q: RegisterWindow, S: RegisterWindow, L: SharedLock> Device<Q, S, L> {
    /// Brings up one PCI function (hardware.md §13.1 steps 5-10). `lock` is the card's
    /// context-command lock, shared with the other functions of the card; it is taken around each
    /// command.
    ///
    /// Returns the device and the function's [`Rss`], the one owner of the RSS state bring-up
    /// programmed (the default table over every queue pair, the key the shell holds from reset):
    /// keep it where RSS and channel changes are made, or drop it if they never are.
    ///
    /// # Errors
    ///
    /// [`Error::ContextBusy`] if the QDMA does not complete a context command,
    /// [`Error::CmacResetTimeout`] if a CMAC stays in reset, [`Error::NoCmac`] if the function's
    /// own port is missing. On error, what was programmed is undone (QCONF and FMAP cleared, the
    /// error interrupt disarmed).
    pub fn init_shared<D: DelayNs>(
        qdma: Q,
        shell: S,
        lock: L,
        delay: &mut D,
        cfg: DeviceConfig,
    ) -> Result<(Self, Rss)> {
        let mut rss = RssConfig::new(cfg.queues).map_err(Error::Rss)?;
        let mut dev = Self {
            qdma,
            shell,
            lock,
            cfg,
            cmacs: 0,
            stuck: AtomicU32::new(NONE_STUCK),
            moderation: RxModerations::new(),
            fec_request: AtomicU8::new(0),
        };
        match dev.bring_up(delay, &mut rss) {
            Ok(()) => {
                let rss = Rss::programmed(dev.cfg.func, rss);
                Ok((dev, rss))
            }
            Err(e) => {
                // Best effort: the first error is the one reported.
                let _ = dev.release(delay);
                Err(e)
            }
        }
    }

    /// Steps 5-10 of bring-up; `rss` is the probe-time RSS state, programmed here.
    fn bring_up<D: DelayNs>(&mut self, delay: &mut D, rss: &mut RssConfig) -> Result<()> {
        let f = self.cfg.func;
        // Step 5: FMAP clear, then write {qbase, qmax}; the command's qid field is the function.
        self.command(delay, IndCtxtCmd::fmap(CtxtOp::Clear, f), &NO_DATA)?;
        // Deviation: qmax and numq cover the function's TX-only queues too (DeviceConfig::span).
        let fmap = FmapCtxt::new(f.qbase(), self.cfg.span());
        self.command(delay, IndCtxtCmd::fmap(CtxtOp::Write, f), &fmap.data_regs())?;
        // Step 6: the shell's QCONF must be set before any H2C doorbell (hardware.md §14).
        self.shell
            .write(shell::qconf(f), shell::qconf_value(f.qbase(), self.cfg.span()));
        // Step 7: default indirection table, entry k = k mod queues; the key keeps the RTL's reset
        // value (hardware.md §9.2), so only the table is pending here.
        rss.program(&self.shell, f);
        rss.mark_programmed();
        // Step 8: global CSRs, master PF only.
        if f.is_master() {
            self.init_global_csrs();
        }
        // Step 9: CMAC detection, interleaved with enabling on the master PF.
        self.cmacs = self.detect_cmacs(delay)?;
        if f.port() >= self.cmacs {
            onic_hal::error!(
                "onic: function {} needs CMAC {}, found {}",
                f,
                f.port(),
                self.cmacs
            );
            return Err(Error::NoCmac {
                func: f,
                port: f.port(),
                found: self.cmacs,
            });
        }
        // Step 10: the error interrupt (master PF), on vector queues + 1.
        if f.is_master() {
            self.init_error_interrupt(self.cfg.queues + 1);
        }
        onic_hal::info!(
            "onic: function {} up with {} queue pairs, {} CMAC(s)",
            f,
            self.cfg.queues,
            self.cmacs
        );
        Ok(())
    }

    /// Global CSR programming of hardware.md §3 (69 writes, 2 reads, in the reference driver's
    /// order). Deviation: the C2H buffer-size table carries [`C2H_BUF_SIZES`].
    fn init_global_csrs(&self) {
        let q = &self.qdma;
        for (i, &v) in tables::RING_SIZES.iter().enumerate() {
            q.write(qdma::glbl_rng_sz(i), v);
        }
        for (i, &v) in C2H_BUF_SIZES.iter().enumerate() {
            q.write(qdma::c2h_buf_sz(i), v);
        }
        q.write(qdma::C2H_INT_TIMER_TICK, tables::C2H_INT_TIMER_TICK_VALUE);
        for (i, &v) in tables::C2H_TIMER_COUNTS.iter().enumerate() {
            q.write(qdma::c2h_timer_cnt(i), v);
        }
        for (i, &v) in tables::C2H_COUNT_THRESHOLDS.iter().enumerate() {
            q.write(qdma::c2h_cnt_th(i), v);
        }
        q.write(qdma::GLBL_DSC_CFG, GlblDscCfg::reference());
        let depth = q.read(qdma::C2H_PFCH_CACHE_DEPTH);
        q.write(qdma::C2H_PFCH_CFG, C2hPfchCfg::reference(depth));
        let coal = q.read(qdma::C2H_CMPL_COAL_BUF_DEPTH);
        q.write(qdma::C2H_WB_COAL_CFG, C2hWbCoalCfg::reference(coal));
        q.write(qdma::H2C_REQ_THROT, H2cReqThrot::reference());
    }

    /// Counts consecutive CMACs reporting version 0x301 from port 0; the master PF enables each
    /// right after its version read (hardware.md §10.1).
    fn detect_cmacs<D: DelayNs>(&self, delay: &mut D) -> Result<u8> {
        let mut found = 0;
        for port in 0..cmac::MAX_PORTS {
            if self.shell.read(cmac::CORE_VERSION.on(cmac::cmac_base(port))) != cmac::CORE_VERSION_EXPECTED {
                break;
            }
            if self.cfg.func.is_master() {
                self.enable_cmac(delay, port)?;
            }
            found += 1;
        }
        Ok(found)
    }

    /// The CMAC enable sequence of hardware.md §10.2. Deviation: the reset wait is bounded by
    /// [`DeviceConfig::cmac_reset_polls`] reads (the reference driver waits forever).
    fn enable_cmac<D: DelayNs>(&self, delay: &mut D, port: u8) -> Result<()> {
        let bit = shell::reset_bits::cmac(port);
        self.shell.write(shell::SHELL_RESET, bit);
        let mut done = false;
        for attempt in 0..self.cfg.cmac_reset_polls {
            if self.shell.read(shell::SHELL_STATUS) & bit != 0 {
                done = true;
                break;
            }
            if attempt + 1 < self.cfg.cmac_reset_polls {
                delay.delay_us(CMAC_RESET_POLL_INTERVAL_US);
            }
        }
        if !done {
            onic_hal::error!(
                "onic: CMAC {} still in reset after {} polls",
                port,
                self.cfg.cmac_reset_polls
            );
            return Err(Error::CmacResetTimeout { port });
        }
        let base = cmac::cmac_base(port);
        if self.cfg.rs_fec {
            for w in cmac::ENABLE_RSFEC {
                self.shell.write(w.reg.on(base), w.value);
            }
        }
        for w in cmac::ENABLE_MAC {
            self.shell.write(w.reg.on(base), w.value);
        }
        Ok(())
    }

    /// Error interrupt programming of hardware.md §11.3: disarmed GLBL_ERR_INT, the seven leaf
    /// groups (leaf mask write, GLBL_ERR_MASK read, GLBL_ERR_MASK write), then armed GLBL_ERR_INT.
    fn init_error_interrupt(&self, vector: u16) {
        let f = self.cfg.func;
        let q = &self.qdma;
        q.write(qdma::GLBL_ERR_INT, GlblErrInt::new(f, vector, false));
        for g in errors::LEAF_GROUPS {
            q.write(g.mask_reg, g.mask_value);
            let bits = if g.group_bit == errors::GROUP_ST_H2C_V4 {
                H2C_ERR_GROUP_BITS
            } else {
                g.group_bit
            };
            q.modify(qdma::GLBL_ERR_MASK, |cur| cur | bits);
        }
        q.write(qdma::GLBL_ERR_INT, GlblErrInt::new(f, vector, true));
    }

    /// The register accesses of remove (hardware.md §13.5): master PF disarms the error interrupt,
    /// QCONF = qbase with numq 0 (the reference writes 0), FMAP CLEAR.
    fn release<D: DelayNs>(&self, delay: &mut D) -> Result<()> {
        let f = self.cfg.func;
        if f.is_master() {
            self.qdma.write(qdma::GLBL_ERR_INT, GlblErrInt::default());
        }
        // QCONF keeps the function's qbase with numq 0 (hardware.md §13.5 writes 0; deviation 22 of
        // docs/deviations.md): the CMAC stays enabled, and frames still arriving at the port are
        // steered to indirection entry + qbase, which must stay this function's (now invalid)
        // queues, not function 0's.
        self.shell
            .write(shell::qconf(f), shell::qconf_value(f.qbase(), 0));
        self.command(delay, IndCtxtCmd::fmap(CtxtOp::Clear, f), &NO_DATA)
    }

    /// Tears the function down (hardware.md §13.5) and hands the register windows back. Queues must
    /// have been torn down first.
    ///
    /// # Errors
    ///
    /// [`Error::ContextBusy`] if the FMAP clear does not complete; the windows are returned in
    /// both cases.
    pub fn teardown<D: DelayNs>(self, delay: &mut D) -> (Result<()>, Q, S) {
        let r = self.release(delay);
        (r, self.qdma, self.shell)
    }

    /// The register windows, below the driver (feature `raw-registers`): for the trace tool and
    /// register-level tests only.
    #[cfg(feature = "raw-registers")]
    pub const fn raw_registers(&self) -> RawRegisters<'_, Q, S> {
        RawRegisters {
            qdma: &self.qdma,
            shell: &self.shell,
        }
    }

    /// The queue doorbells of this function, for the TX side and the control path: their CMPT
    /// CIDX writes carry the function's fixed moderation. An RX poll acknowledges through
    /// [`Self::rx_doorbells`], which carry its queue's own.
    pub fn doorbells(&self) -> Doorbells<&Q> {
        Doorbells::new(&self.qdma).with_moderation(self.rx_moderation())
    }

    /// The doorbells of RX queue `qid`'s poll: its CMPT CIDX writes carry the queue's current
    /// moderation, which is how a running queue takes a new setting (hardware.md §6,
    /// [`crate::moderation`]). A queue id beyond the function's gets the fixed setting.
    pub fn rx_doorbells(&self, qid: QueueId) -> Doorbells<&Q> {
        self.rx_poll_doorbells(qid).0
    }

    /// [`Self::rx_doorbells`], and the queue's moderation they carry (`None` beyond the
    /// function's queues): one read of the queue's setting for a poll that reports its level
    /// too (adaptive moderation's samples).
    pub fn rx_poll_doorbells(&self, qid: QueueId) -> (Doorbells<&Q>, Option<QueueModeration>) {
        let q = self.moderation.queue(qid);
        let m = q.map_or_else(|| self.rx_moderation(), QueueModeration::entries);
        (Doorbells::new(&self.qdma).with_moderation(m), q)
    }

    /// The RX queues' fixed interrupt moderation (`ethtool -c rx-usecs, rx-frames`), also
    /// while adaptive moderation is on.
    pub fn rx_moderation(&self) -> RxModeration {
        self.moderation.fixed()
    }

    /// Sets the RX queues' fixed interrupt moderation (`ethtool -C`): queues started from now
    /// on get it in their completion context, running ones at their next CMPT CIDX doorbell
    /// (the end of their next poll), with nothing stopped or restarted. While adaptive
    /// moderation is on, it waits for [`Self::set_rx_adaptive`]`(false)`.
    pub fn set_rx_moderation(&self, m: RxModeration) {
        self.moderation.set_fixed(m);
    }

    /// Whether adaptive RX moderation is on (`ethtool -c adaptive-rx`).
    pub fn rx_adaptive(&self) -> bool {
        self.moderation.is_adaptive()
    }

    /// Turns adaptive RX moderation on (each queue at
    /// [`crate::moderation::ADAPTIVE_START`], then wherever the OS moves it with
    /// [`Self::set_rx_queue_level`]) or off (each queue back on the fixed setting). Running
    /// queues take it at their next doorbell, as for [`Self::set_rx_moderation`].
    pub fn set_rx_adaptive(&self, on: bool) {
        self.moderation.set_adaptive(on);
    }

    /// RX queue `qid`'s current moderation.
    ///
    /// # Errors
    ///
    /// [`ModerationError::Queue`] for a queue the function does not have.
    pub fn rx_queue_moderation(
        &self,
        qid: QueueId,
    ) -> core::result::Result<QueueModeration, ModerationError> {
        self.check_moderated_queue(qid)?;
        self.moderation.queue(qid).ok_or(ModerationError::Queue {
            qid: qid.get(),
            queues: self.cfg.queues,
        })
    }

    /// Moves adaptive RX queue `qid` to adaptive `level` (the OS's adaptive algorithm, any
    /// context): the queue's next doorbell carries the level's table entries, returned.
    ///
    /// # Errors
    ///
    /// [`ModerationError::Queue`] for a queue the function does not have,
    /// [`ModerationError::Level`] beyond the ladder, [`ModerationError::NotAdaptive`] once
    /// adaptive moderation is off (nothing changes).
    pub fn set_rx_queue_level(
        &self,
        qid: QueueId,
        level: u8,
    ) -> core::result::Result<RxModeration, ModerationError> {
        self.check_moderated_queue(qid)?;
        self.moderation.set_level(qid, level)
    }

    fn check_moderated_queue(&self, qid: QueueId) -> core::result::Result<(), ModerationError> {
        match self.cfg.check_queue(qid) {
            Ok(_) => Ok(()),
            Err(_) => Err(ModerationError::Queue {
                qid: qid.get(),
                queues: self.cfg.queues,
            }),
        }
    }

    /// The hardware counters of the function's port, in the order of
    /// [`crate::stats::hw::read_hw_counters`] (TICK, then each counter in full).
    pub fn hw_counters(&self) -> [u64; HW_COUNTERS] {
        hw::read_hw_counters(&self.shell, self.cfg.func.port())
    }

    /// The standard statistic groups of the function's port (`eth-mac`, `eth-phy`, `eth-ctrl`,
    /// `rmon`, pause frames): one TICK, then the CMAC counters ([`crate::stats::mac`]).
    pub fn mac_stat_groups(&self) -> crate::stats::MacStatGroups {
        crate::stats::MacStatGroups::read(&self.shell, self.cfg.func.port())
    }

    /// The pause settings of the function's port's CMAC (`ethtool -a`).
    pub fn pause_params(&self) -> crate::stats::PauseParams {
        crate::stats::PauseParams::read(&self.shell, self.cfg.func.port())
    }

    /// The packet adapter's RX drop counter of the function's port (frames dropped before the
    /// driver saw them).
    pub fn adapter_rx_drops(&self) -> u64 {
        hw::adapter_rx_drops(&self.shell, self.cfg.func.port())
    }

    /// Whether the function's CMAC reports RX up and aligned (hardware.md §10.3; ethtool's "Link
    /// detected" when the carrier is on).
    pub fn link_up(&self) -> bool {
        hw::link_up(&self.shell, self.cfg.func.port())
    }

    /// The QDMA's error registers, read for the error interrupt's report (nothing is written).
    pub fn error_status(&self) -> error_status::ErrorStatus {
        error_status::ErrorStatus::read(&self.qdma)
    }

    /// `ethtool -x`: the table (entries masked to their 16 valid bits) and key as the shell holds
    /// them.
    #[must_use]
    pub fn rss_read_back(&self) -> (IndirectionTable, RssKey) {
        rss_control::read_back(&self.shell, self.cfg.func)
    }

    /// One indirect context command without data (CLEAR, INVALIDATE) on absolute queue `abs`.
    fn context<D: DelayNs>(&self, delay: &mut D, op: CtxtOp, sel: CtxtSel, abs: AbsQueueId) -> Result<()> {
        self.command(delay, IndCtxtCmd::queue(sel, op, abs), &NO_DATA)
    }

    /// One context WRITE on absolute queue `abs`.
    fn context_write<D: DelayNs>(
        &self,
        delay: &mut D,
        sel: CtxtSel,
        abs: AbsQueueId,
        data: &[u32; qdma::IND_CTXT_WORDS],
    ) -> Result<()> {
        self.command(delay, IndCtxtCmd::queue(sel, CtxtOp::Write, abs), data)
    }

    /// One indirect context command (for a WRITE: data and mask registers, command, busy poll)
    /// under the card's lock: another function's command cannot slip in between the data words
    /// and the command.
    fn command<D: DelayNs>(
        &self,
        delay: &mut D,
        command: IndCtxtCmd,
        data: &[u32; qdma::IND_CTXT_WORDS],
    ) -> Result<()> {
        self.engine(|| {
            let _held = SharedGuard::new(&self.lock);
            context_command(&self.qdma, delay, command, data)
        })
    }

    /// The command in progress since one timed out, if IND_CTXT_CMD still reads busy (all ones,
    /// a card gone from the bus, reads busy too); forgotten once it reads idle.
    fn still_stuck(&self) -> Option<u32> {
        let command = self.stuck.load(Ordering::Relaxed);
        if command == NONE_STUCK {
            return None;
        }
        if self.qdma.read(qdma::IND_CTXT_CMD).busy() {
            return Some(command);
        }
        // Forget it unless another context recorded a newer timeout meanwhile; if it did, that
        // one is left in place, and the caller goes on (the engine read idle just now).
        let _ = self
            .stuck
            .compare_exchange(command, NONE_STUCK, Ordering::Relaxed, Ordering::Relaxed);
        None
    }

    /// Remembers a command that timed out.
    fn mark_stuck(&self, e: ContextBusy) -> Error {
        self.stuck.store(e.command, Ordering::Relaxed);
        e.into()
    }

    /// Runs context commands `f` unless a command that timed out is still in progress; a new
    /// timeout is remembered.
    fn engine<T>(&self, f: impl FnOnce() -> core::result::Result<T, ContextBusy>) -> Result<T> {
        if let Some(command) = self.still_stuck() {
            return Err(Error::ContextBusy { command });
        }
        f().map_err(|e| self.mark_stuck(e))
    }

    /// Invalidates queue `abs` on `side` (the proof), or, with the engine stuck, gives the
    /// proof only if the window cuts the device off from memory.
    fn invalidate<D: DelayNs>(&self, delay: &mut D, side: QueueSide, abs: AbsQueueId) -> Result<Quiesced> {
        if let Some(command) = self.still_stuck() {
            return cut_off_proof(&self.qdma, side, abs).ok_or(Error::ContextBusy { command });
        }
        invalidate_queue(&self.qdma, &self.lock, delay, side, abs).map_err(|e| self.mark_stuck(e))
    }

    /// Invalidates every context of every queue the function owns (its span, both sides), with
    /// no fallback: `Ok` only when the card completed every command, so that it holds no stale
    /// context of the function. What a driver does before it lets a card it cut off from memory
    /// ([`onic_hal::RegisterWindow::cut_off`]) reach memory again: the queues whose
    /// invalidation failed then still had live contexts naming memory that went back to its
    /// owners.
    ///
    /// Context: process context, no queue of the function running.
    ///
    /// # Errors
    ///
    /// [`Error::ContextBusy`] for the first command that did not complete (none is issued after
    /// it).
    pub fn invalidate_all_queues<D: DelayNs>(&self, delay: &mut D) -> Result<()> {
        for q in 0..self.cfg.span() {
            let abs = self.cfg.check_tx_queue(QueueId::new(q))?;
            for side in [QueueSide::Tx, QueueSide::Rx] {
                self.engine(|| invalidate_contexts(&self.qdma, &self.lock, delay, side, abs))?;
            }
        }
        Ok(())
    }
}

/// The queues' contexts, programmed under the card's context-command serialization.
impl<Q: RegisterWindow, S: RegisterWindow, L: SharedLock> QueueControl for Device<Q, S, L> {
    fn device_queue(&self, qid: QueueId) -> Option<AbsQueueId> {
        // Every queue of the function has a TX side; the RX queues are the first of them.
        self.cfg.check_tx_queue(qid).ok()
    }

    fn init_tx_queue<D: DelayNs>(&self, delay: &mut D, q: &TxQueueConfig, ring: DmaAddr) -> Result<()> {
        let abs = self.cfg.check_tx_queue(q.qid)?;
        self.cfg.check_vector(q.vector)?;
        check_ring_addr(ring, ring_bytes(q.ring, H2C_DESC_BYTES))?;
        let sw = SwCtxt::reference_h2c(self.cfg.func, ring, q.ring.index(), q.vector);
        let r = (|| {
            self.context(delay, CtxtOp::Clear, CtxtSel::SwH2c, abs)?;
            self.context_write(delay, CtxtSel::SwH2c, abs, &sw.data_regs())?;
            self.context(delay, CtxtOp::Clear, CtxtSel::HwH2c, abs)?;
            self.context(delay, CtxtOp::Clear, CtxtSel::CrH2c, abs)
        })();
        if r.is_err() {
            let _ = self.teardown_tx_queue(delay, q.qid);
        }
        r
    }

    fn teardown_tx_queue<D: DelayNs>(&self, delay: &mut D, qid: QueueId) -> Result<Quiesced> {
        let abs = self.cfg.check_tx_queue(qid)?;
        self.invalidate(delay, QueueSide::Tx, abs)
    }

    fn init_rx_queue<D: DelayNs>(
        &self,
        delay: &mut D,
        q: &RxQueueConfig,
        desc_ring: DmaAddr,
        cmpt_ring: DmaAddr,
        c2h_pidx: u16,
    ) -> Result<()> {
        let abs = self.cfg.check_queue(q.qid)?;
        self.cfg.check_vector(q.vector)?;
        check_ring_addr(desc_ring, ring_bytes(q.desc_ring, C2H_DESC_BYTES))?;
        check_ring_addr(cmpt_ring, ring_bytes(q.cmpt_ring, q.cmpt_entry.bytes()))?;
        if c2h_pidx >= q.desc_ring.usable() {
            return Err(ConfigError::RingIndex {
                index: c2h_pidx,
                usable: q.desc_ring.usable(),
            }
            .into());
        }
        let f = self.cfg.func;
        let sw = SwCtxt::reference_c2h(f, desc_ring, q.desc_ring.index());
        let pfch = PfchCtxt::reference(q.buf.index());
        let mut cmpt = CmptCtxt::reference(f, cmpt_ring, q.cmpt_ring.index(), q.cmpt_entry, q.vector);
        // The queue's current moderation, in its context and its first doorbell alike.
        let db = self.rx_doorbells(q.qid);
        let m = db.moderation();
        cmpt.set_timer_idx(m.timer_idx());
        cmpt.set_counter_idx(m.counter_idx());
        let r = (|| {
            self.context(delay, CtxtOp::Clear, CtxtSel::SwC2h, abs)?;
            self.context_write(delay, CtxtSel::SwC2h, abs, &sw.data_regs())?;
            self.context(delay, CtxtOp::Clear, CtxtSel::HwC2h, abs)?;
            self.context(delay, CtxtOp::Clear, CtxtSel::CrC2h, abs)?;
            self.context(delay, CtxtOp::Clear, CtxtSel::Pfch, abs)?;
            self.context_write(delay, CtxtSel::Pfch, abs, &pfch.data_regs())?;
            self.context(delay, CtxtOp::Clear, CtxtSel::Cmpt, abs)?;
            self.context_write(delay, CtxtSel::Cmpt, abs, &cmpt.data_regs())
        })();
        if r.is_err() {
            let _ = self.teardown_rx_queue(delay, q.qid);
            return r;
        }
        db.c2h_pidx(q.qid, c2h_pidx);
        db.cmpt_cidx(q.qid, 0, true);
        Ok(())
    }

    fn teardown_rx_queue<D: DelayNs>(&self, delay: &mut D, qid: QueueId) -> Result<Quiesced> {
        let abs = self.cfg.check_queue(qid)?;
        self.invalidate(delay, QueueSide::Rx, abs)
    }
}

/// Rings (descriptor and completion) must be 4 KiB aligned: the completion context does not even
/// store the low 12 address bits (hardware.md §5.6, §8.1). All `bytes` of the ring (its entries
/// and the status slot the device writes back into) must have device addresses: a range whose
/// end wraps past 2^64 (the QDMA's 64-bit DMA mask) is refused before any context names it.
fn check_ring_addr(addr: DmaAddr, bytes: u64) -> Result<(), ConfigError> {
    if !addr.is_aligned(onic_hal::PAGE_SIZE as u64) {
        return Err(ConfigError::RingAddress { addr: addr.get() });
    }
    // The last byte's address must exist (`bytes` is never 0: every ring has its status slot).
    match addr.checked_add(bytes.saturating_sub(1)) {
        Some(_) => Ok(()),
        None => Err(ConfigError::RingRange {
            addr: addr.get(),
            bytes,
        }),
    }
}

/// Bytes of a ring of `size` entries (status slot included) of `entry` bytes each.
fn ring_bytes(size: RingSizeIdx, entry: usize) -> u64 {
    u64::from(size.entries()) * entry as u64
}

#[cfg(test)]
mod ring_range_tests {
    use super::*;
    use crate::testutil::{card, device};
    use crate::QueueId;

    /// Rings whose bytes wrap past 2^64 are refused before any context is written; a ring whose
    /// last byte is the last address is accepted (the spec's examples put rings above 4 GiB).
    #[test]
    fn ring_ranges_that_wrap_are_refused() {
        let c = card();
        let dev = device(&c, 4);
        let d = &mut c.delay();
        let tx = TxQueueConfig::new(QueueId::new(0));
        let tx_bytes = ring_bytes(tx.ring, H2C_DESC_BYTES);
        let last = u64::MAX - tx_bytes + 1;
        for addr in [0xFFFF_FFFF_FFFF_F000u64, last + 4096] {
            assert_eq!(
                dev.init_tx_queue(d, &tx, DmaAddr::new(addr)),
                Err(ConfigError::RingRange {
                    addr,
                    bytes: tx_bytes
                }
                .into()),
                "{addr:#x}"
            );
        }
        let wrap = ConfigError::RingRange {
            addr: 0xFFFF_FFFF_FFFF_F000,
            bytes: tx_bytes,
        };
        assert!(std::format!("{wrap}").contains("past 2^64"), "{wrap}");
        let rx = RxQueueConfig::new(QueueId::new(1));
        let cmpt_bytes = ring_bytes(rx.cmpt_ring, rx.cmpt_entry.bytes());
        let desc_bytes = ring_bytes(rx.desc_ring, C2H_DESC_BYTES);
        let cmpt_at = 0u64.wrapping_sub(cmpt_bytes) + 4096;
        assert_eq!(
            dev.init_rx_queue(d, &rx, DmaAddr::new(0x1000_0000), DmaAddr::new(cmpt_at), 0),
            Err(ConfigError::RingRange {
                addr: cmpt_at,
                bytes: cmpt_bytes
            }
            .into())
        );
        let desc_at = 0u64.wrapping_sub(desc_bytes) + 4096;
        assert_eq!(
            dev.init_rx_queue(d, &rx, DmaAddr::new(desc_at), DmaAddr::new(0x1000_0000), 0),
            Err(ConfigError::RingRange {
                addr: desc_at,
                bytes: desc_bytes
            }
            .into())
        );
        // The last ring that fits.
        assert_eq!(dev.init_tx_queue(d, &tx, DmaAddr::new(last)), Ok(()));
    }
}
