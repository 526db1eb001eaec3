//! The `extern "C"` entry points the C glue calls (`os-linux/kernel/onic_glue.h` declares them).
//! Each states what the C side guarantees; the C side's comments say the same from its end.
//!
//! Ports are handed to C as `Box<KPort>` raw pointers, the model card as an `Arc` raw pointer.
//! Errors come back as negative errno values.

use alloc::boxed::Box;
use alloc::sync::Arc;
use core::ffi::c_void;
use core::ptr::NonNull;

use onic_core::queue::source::SourceKind;
use onic_core::RingSizeIdx;
use onic_hal::grace::ReadSection;
use onic_hal::mmio::Mmio;

use super::backend::{ApiDma, KDelay, KDma, KRegs, KernelDma};
use super::ffi;
use super::kos::{KOs, KPtr};
use super::lock::{KCardLock, KLock};
use onic_embed::port::{
    AllContexts, Control, Kind, Napi, Port, PortConfig, PortError, PortRegs, QueueTokens, Quiet, Token,
    TxLock, XmitLock, XskRefusal, CONTROL, RSS_INDIR_SIZE, RSS_KEY_SIZE,
};

use crate::abi::{
    DevInfo, LinkStats, MacGroups, PollResult, PortLayout, PortParams, QueueDump, QueueStats, RmonRange,
    TxClean, TxState, XmitResult, RMON_HIST, RMON_RANGES, XSK_WHY_CHUNK, XSK_WHY_NONE, XSK_WHY_NOT_BOUND,
};
use crate::errno::{self, Errno, EINVAL, ENOMEM};
use crate::ethtool::{self, ETH_GSTRING_LEN, ETH_SS_STATS, ETH_SS_TEST};
use crate::host::OsHost;
use crate::simcard::{sim_config, SimBar, SimCard, SimDelay, SimDma, SimRegs};

/// The kernel as the port's host.
type KHost = OsHost<KOs, KDma, KRegs, KDelay, KCardLock>;
type KPort = Port<KHost>;

// The port is shared by every context the C glue calls in from (RTNL, NAPI polls on any CPU, the
// TX and xmit lock holders): the compiler proves it may be, from its parts (context cells, the
// published hasher, a `Sync` device), with no `unsafe impl` of the port's own.
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<KPort>();
};
type KSim = SimCard<KLock>;

/// Ring-size index of simulation-mode rings: 64 entries keep the model's memory small.
const SIM_RING_INDEX: u8 = 1;

fn neg(e: Errno) -> i32 {
    -e
}

/// 0, or the port's error as a negative errno.
fn status(r: Result<(), PortError>) -> i32 {
    match r {
        Ok(()) => 0,
        Err(e) => neg(errno::from_port(&e)),
    }
}

/// # Safety
///
/// `port` is a pointer returned by `onic_rs_port_new_*` and not yet freed.
unsafe fn port<'a>(port: *const c_void) -> &'a KPort {
    // SAFETY: caller's contract: a live Box<KPort>.
    unsafe { &*port.cast::<KPort>() }
}

/// The port and the token of its control context.
///
/// # Safety
///
/// As [`port`]; RTNL is held (or the netdev is not registered yet) for as long as the token
/// lives, and no other token of the port's control context is alive.
unsafe fn control<'a>(p: *const c_void) -> (&'a KPort, Token<'a, Control>) {
    // SAFETY: caller's contract.
    let port = unsafe { port(p) };
    // SAFETY: RTNL serializes every control call of the port (caller's contract).
    (port, unsafe { Token::new(port.domain(), CONTROL) })
}

/// The proof that none of the port's datapath contexts runs.
///
/// # Safety
///
/// For as long as it lives: every NAPI instance of the port is disabled, every netdev TX queue
/// stopped (`netif_tx_disable`), and `ndo_xdp_xmit` cannot reach the port's rings.
unsafe fn quiet<'a>(port: &KPort) -> Quiet<'a> {
    let d = port.domain();
    // SAFETY: caller's contract, kind by kind.
    unsafe {
        Quiet {
            napi: AllContexts::new(d),
            stack: AllContexts::new(d),
            xmit: AllContexts::new(d),
        }
    }
}

/// The token of context `K` of queue index `qid`.
///
/// # Safety
///
/// For as long as it lives, the caller is that context (holds that queue's lock, or is its NAPI
/// poll) and no other token of it is alive.
unsafe fn queue_token<'a, K: Kind>(port: &KPort, qid: u16) -> Token<'a, K> {
    // SAFETY: caller's contract.
    unsafe { Token::new(port.domain(), qid) }
}

/// The tokens of all three contexts of queue index `qid`, for a control call that rebuilds the
/// queue.
///
/// # Safety
///
/// For as long as they live, none of the queue's contexts runs (NAPI `qid` disabled, its netdev
/// TX queue stopped, `ndo_xdp_xmit` kept off its redirect-in ring, or the queue never started)
/// and no other token of them is alive.
unsafe fn stopped_queue_tokens<'a>(port: &KPort, qid: u16) -> QueueTokens<'a> {
    // SAFETY: caller's contract, for each of the three contexts.
    unsafe {
        QueueTokens {
            napi: queue_token::<Napi>(port, qid),
            stack: queue_token::<TxLock>(port, qid),
            xmit: queue_token::<XmitLock>(port, qid),
        }
    }
}

/// Module load: routes the logging facade to printk.
#[no_mangle]
pub extern "C" fn onic_rs_init(debug: bool) {
    super::printk::init(debug);
}

/// Simulation mode: a model card (two functions, two ports, a cable), or null.
#[no_mangle]
pub extern "C" fn onic_rs_sim_new() -> *const c_void {
    let Some(lock) = KLock::new() else {
        return core::ptr::null();
    };
    Arc::into_raw(SimCard::new(lock, sim_config())).cast()
}

/// Drops the C side's reference to the card; reports DMA memory the driver did not give back.
///
/// # Safety
///
/// `sim` came from `onic_rs_sim_new`, every port built on it has been freed, and the engine no
/// longer runs.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_sim_free(sim: *const c_void) {
    // SAFETY: caller's contract: the pointer of an Arc from onic_rs_sim_new, given up here.
    let card = unsafe { Arc::from_raw(sim.cast::<KSim>()) };
    let (d, v) = card.with(|c| (c.dma_stats(), c.violations().len()));
    if d.live_regions != 0 || d.live_pages != 0 || d.live_foreign != 0 {
        onic_hal::error!(
            "onic: sim: driver leaked {} DMA regions, {} pages and {} packet mappings",
            d.live_regions,
            d.live_pages,
            d.live_foreign
        );
    }
    if v != 0 {
        onic_hal::error!("onic: sim: the model recorded {} driver violations", v);
    }
}

/// One engine round of the model card (the C timer calls it): the card works, its clock moves by
/// `elapsed_ns`, and each interrupt it raised becomes `onic_sim_irq(cookie, func, vector)`.
///
/// # Safety
///
/// `sim` is live (see `onic_rs_sim_free`); `cookie` is what `onic_sim_irq` expects.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_sim_tick(sim: *const c_void, elapsed_ns: u64, cookie: *mut c_void) {
    // SAFETY: caller's contract: a live Arc pointer; borrowed, not consumed.
    let card = unsafe { &*sim.cast::<KSim>() };
    for irq in card.tick(elapsed_ns) {
        // SAFETY: the C side maps (func, vector) to a NAPI instance if one is live.
        unsafe { ffi::onic_sim_irq(cookie, irq.func, irq.vector) };
    }
}

/// Takes the model's port `port` link up or down (the `sim_link` module parameter).
///
/// # Safety
///
/// `sim` is live.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_sim_set_link(sim: *const c_void, port: u8, up: bool) {
    // SAFETY: caller's contract: a live Arc pointer; borrowed.
    let card = unsafe { &*sim.cast::<KSim>() };
    card.with(|c| c.set_link(port, up));
}

/// Stops or resumes the model's H2C status writebacks (the `sim_tx_stall` module parameter): the
/// device sends frames but no longer reports them, as a hung engine would.
///
/// # Safety
///
/// `sim` is live.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_sim_stall_tx(sim: *const c_void, on: bool) {
    // SAFETY: caller's contract: a live Arc pointer; borrowed.
    let card = unsafe { &*sim.cast::<KSim>() };
    card.with(|c| c.faults().stall_h2c_writeback(on));
}

/// Freezes or thaws the color bit of the model's completion rings (the `sim_cmpt_freeze` module
/// parameter): after a wrap the driver finds entries the status says are there but whose color
/// never flips, as from a broken device; the RX queue must detect it and be restarted.
///
/// # Safety
///
/// `sim` is live.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_sim_freeze_cmpt(sim: *const c_void, on: bool) {
    // SAFETY: caller's contract: a live Arc pointer; borrowed.
    let card = unsafe { &*sim.cast::<KSim>() };
    card.with(|c| c.faults().freeze_cmpt_color(on));
}

/// Gives the next `frames` frames arriving at the model's ports a bad FCS (the `sim_bad_fcs`
/// module parameter): the receiving CMAC counts them (`stat_rx_bad_fcs`, the eth-mac group's
/// FrameCheckSequenceErrors) and drops them.
///
/// # Safety
///
/// `sim` is live.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_sim_bad_fcs(sim: *const c_void, frames: u32) {
    // SAFETY: caller's contract: a live Arc pointer; borrowed.
    let card = unsafe { &*sim.cast::<KSim>() };
    card.with(|c| c.faults().bad_fcs_next_frames(frames));
}

/// Gives the next `correctable` frames arriving at the model's ports symbol errors an RS-FEC
/// decoder corrects, the `uncorrectable` after them errors it cannot (the `sim_fec_errors`
/// module parameter): the receiving CMAC counts the codewords and, without correction, a bad FCS.
///
/// # Safety
///
/// `sim` is live.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_sim_fec_errors(sim: *const c_void, correctable: u32, uncorrectable: u32) {
    // SAFETY: caller's contract: a live Arc pointer; borrowed.
    let card = unsafe { &*sim.cast::<KSim>() };
    card.with(|c| c.faults().fec_errors_next_frames(correctable, uncorrectable));
}

fn finish(r: Result<KPort, Errno>, err: *mut i32) -> *mut c_void {
    match r {
        Ok(p) => match crate::heap::try_box(p) {
            Some(b) => Box::into_raw(b).cast(),
            None => finish(Err(ENOMEM), err),
        },
        Err(e) => {
            if !err.is_null() {
                // SAFETY: the C caller passes a valid out pointer or null.
                unsafe { *err = neg(e) };
            }
            core::ptr::null_mut()
        }
    }
}

fn config(p: &PortParams, tx_ring: u8, rx_ring: u8) -> Result<PortConfig, Errno> {
    let idx = |i| RingSizeIdx::new(i).map_err(|_| EINVAL);
    Ok(PortConfig {
        func: p.func,
        max_queues: p.max_queues,
        queues: p.queues,
        tx_ring: idx(tx_ring)?,
        rx_ring: idx(rx_ring)?,
        rs_fec: p.rs_fec,
    })
}

/// The card lock named by the parameters.
///
/// # Safety
///
/// `p.card_lock` is null or a mutex that outlives the port.
unsafe fn card_lock(p: &PortParams) -> Result<KCardLock, Errno> {
    // SAFETY: caller's contract.
    NonNull::new(p.card_lock)
        .map(|l| unsafe { KCardLock::new(l) })
        .ok_or(EINVAL)
}

/// The OS services of netdev `nd`.
///
/// # Safety
///
/// `nd` is null or a `struct onic_ndev *` that outlives the port.
unsafe fn kos(nd: *mut c_void) -> Result<KOs, Errno> {
    // SAFETY: caller's contract.
    KPtr::new(nd).map(|nd| unsafe { KOs::new(nd) }).ok_or(EINVAL)
}

/// Simulation mode: brings up PCI function `p.func` of the model card and returns its port (or
/// null with `*err` set). With `p.dma_dev`, the port allocates and maps through that device's DMA
/// API and the model reaches memory only through the addresses the API returned.
///
/// # Safety
///
/// `sim` is live; `nd` is the function's netdev private area, which outlives the port; `p` is
/// valid, its lock and device (if any) outlive the port; `err` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_port_new_sim(
    sim: *const c_void,
    nd: *mut c_void,
    p: *const PortParams,
    err: *mut i32,
) -> *mut c_void {
    // SAFETY: caller's contract.
    let Some(p) = (unsafe { p.as_ref() }) else {
        return finish(Err(EINVAL), err);
    };
    // SAFETY: a live Arc pointer (caller's contract); take a new reference for the port.
    let card = unsafe {
        Arc::increment_strong_count(sim.cast::<KSim>());
        Arc::from_raw(sim.cast::<KSim>())
    };
    let model = SimDma::new(&card);
    let dma = match NonNull::new(p.dma_dev) {
        // SAFETY: the device outlives the port (caller's contract).
        Some(dev) => KDma::SimApi(ApiDma::new(unsafe { KernelDma::new(dev) }, model)),
        None => KDma::Sim(model),
    };
    let r = config(p, SIM_RING_INDEX, SIM_RING_INDEX).and_then(|cfg| {
        let regs = PortRegs {
            qdma: KRegs::Sim(SimRegs::new(&card, SimBar::Qdma(p.func))),
            shell: KRegs::Sim(SimRegs::new(&card, SimBar::Shell)),
            // SAFETY: caller's contract.
            lock: unsafe { card_lock(p) }?,
        };
        // SAFETY: caller's contract.
        let os = unsafe { kos(nd) }?;
        Port::new(regs, KDelay::Sim(SimDelay::new(&card)), KHost::new(os, dma), cfg)
            .map_err(|e| errno::from_port(&e))
    });
    finish(r, err)
}

/// A real card: brings up PCI function `p.func` over its mapped BARs and returns its port (or
/// null with `*err` set).
///
/// # Safety
///
/// `dev` is the function's `struct device *` (bound, DMA masks set); `nd` its netdev's private
/// area; `bar0`/`bar2` are its ioremapped BAR0 and BAR2 of the given lengths; `p` is valid. All
/// (and the lock) stay valid until `onic_rs_port_free`.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_port_new_pci(
    dev: *mut c_void,
    nd: *mut c_void,
    bar0: *mut u8,
    bar0_len: usize,
    bar2: *mut u8,
    bar2_len: usize,
    p: *const PortParams,
    err: *mut i32,
) -> *mut c_void {
    // SAFETY: caller's contract.
    let (Some(dev), Some(b0), Some(b2), Some(p)) = (
        NonNull::new(dev),
        NonNull::new(bar0),
        NonNull::new(bar2),
        unsafe { p.as_ref() },
    ) else {
        return finish(Err(EINVAL), err);
    };
    let r = config(
        p,
        onic_core::config::TX_RING_SIZE_INDEX_DEFAULT,
        onic_core::config::RX_RING_SIZE_INDEX_DEFAULT,
    )
    .and_then(|cfg| {
        // SAFETY: the mappings stay valid until the port is freed (caller's contract), and the
        // device reaches only memory handed to it through this port's DMA backend.
        let (q, s) = unsafe { (Mmio::new(b0, bar0_len), Mmio::new(b2, bar2_len)) };
        let regs = PortRegs {
            qdma: KRegs::Mmio(q, dev),
            shell: KRegs::Mmio(s, dev),
            // SAFETY: caller's contract.
            lock: unsafe { card_lock(p) }?,
        };
        // SAFETY: `dev` outlives the port (caller's contract).
        let dma = unsafe { KernelDma::new(dev) };
        // SAFETY: caller's contract.
        let os = unsafe { kos(nd) }?;
        Port::new(regs, KDelay::Kernel, KHost::new(os, KDma::Kernel(dma)), cfg)
            .map_err(|e| errno::from_port(&e))
    });
    finish(r, err)
}

/// Tears the function down and frees the port.
///
/// # Safety
///
/// `port` is live; the netdev is unregistered (no other call on the port can come).
#[no_mangle]
pub unsafe extern "C" fn onic_rs_port_free(port: *mut c_void) {
    // SAFETY: caller's contract: the Box from onic_rs_port_new_*, given up here.
    let p = unsafe { Box::from_raw(port.cast::<KPort>()) };
    p.remove();
}

/// ndo_open's queue start.
///
/// # Safety
///
/// RTNL held; NAPI disabled; TX stopped; `ndo_xdp_xmit` fenced off (`xdp_xmit_ready` clear).
#[no_mangle]
pub unsafe extern "C" fn onic_rs_open(p: *const c_void) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    // SAFETY: NAPI disabled and TX stopped (caller's contract); `ndo_xdp_xmit` waits for
    // `xdp_xmit_ready`, which the glue sets only after this returns.
    let mut quiet = unsafe { quiet(port) };
    status(port.open(&mut ctl, &mut quiet))
}

/// ndo_stop's queue teardown.
///
/// # Safety
///
/// As `onic_rs_open`.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_stop(p: *const c_void) {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    // SAFETY: NAPI disabled and TX stopped (caller's contract); the glue cleared
    // `xdp_xmit_ready` and waited a grace period, so no `ndo_xdp_xmit` runs.
    let mut quiet = unsafe { quiet(port) };
    if let Err(e) = port.stop(&mut ctl, &mut quiet) {
        onic_hal::error!("onic: stop: {}", e);
    }
}

/// ndo_start_xmit: reclaims the stack TX ring (counts in `*done`, for BQL), then queues `skb`
/// without a doorbell. Returns 0 queued, 1 busy (ring full; the skb is still the caller's), 2
/// dropped (the caller frees it), 3 queued and published, and the queue must stop.
///
/// # Safety
///
/// TX queue `qid`'s lock held; `skb` is a live, linear packet of at least ETH_ZLEN bytes; `done`
/// is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_xmit(
    p: *const c_void,
    qid: u16,
    skb: *mut c_void,
    done: *mut TxClean,
) -> i32 {
    let mut d = TxClean::default();
    // SAFETY: live port (caller's contract).
    let port = unsafe { port(p) };
    // SAFETY: TX queue `qid`'s lock held (caller's contract).
    let mut lock = unsafe { queue_token::<TxLock>(port, qid) };
    let r = match KPtr::new(skb) {
        Some(skb) => port.xmit(&mut lock, skb, &mut d),
        None => XmitResult::Dropped,
    };
    // SAFETY: valid out pointer (caller's contract).
    unsafe { *done = d };
    r as i32
}

/// Rings the stack TX ring's doorbell (end of a transmit batch).
///
/// # Safety
///
/// TX queue `qid`'s lock held.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_tx_flush(p: *const c_void, qid: u16) {
    // SAFETY: live port (caller's contract).
    let port = unsafe { port(p) };
    // SAFETY: TX queue `qid`'s lock held (caller's contract).
    port.tx_flush(&mut unsafe { queue_token::<TxLock>(port, qid) });
}

/// Free descriptors of the stack TX ring.
///
/// # Safety
///
/// TX queue `qid`'s lock held.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_tx_free(p: *const c_void, qid: u16) -> u16 {
    // SAFETY: live port (caller's contract).
    let port = unsafe { port(p) };
    // SAFETY: TX queue `qid`'s lock held (caller's contract).
    port.tx_free(&mut unsafe { queue_token::<TxLock>(port, qid) })
}

/// Reclaims the stack TX ring from the queue's NAPI poll; the counts go to `*out`.
///
/// # Safety
///
/// TX queue `qid`'s lock held; called from that queue's NAPI poll; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_tx_clean(p: *const c_void, qid: u16, budget: i32, out: *mut TxClean) {
    // SAFETY: live port (caller's contract).
    let port = unsafe { port(p) };
    // SAFETY: TX queue `qid`'s lock held (caller's contract).
    let mut lock = unsafe { queue_token::<TxLock>(port, qid) };
    let c = port.tx_clean(&mut lock, u32::try_from(budget).unwrap_or(0));
    // SAFETY: valid out pointer.
    unsafe { *out = c };
}

/// Reclaims the redirect-in ring `qid`; what it did goes to `*out`.
///
/// # Safety
///
/// Queue `qid`'s xmit lock held; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_xmit_clean(p: *const c_void, qid: u16, out: *mut TxClean) {
    // SAFETY: live port (caller's contract).
    let port = unsafe { port(p) };
    // SAFETY: queue `qid`'s xmit lock held (caller's contract).
    let c = port.xmit_clean(&mut unsafe { queue_token::<XmitLock>(port, qid) });
    // SAFETY: valid out pointer.
    unsafe { *out = c };
}

/// The stack TX ring's state for a TX timeout report.
///
/// # Safety
///
/// TX queue `qid`'s lock held; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_tx_state(p: *const c_void, qid: u16, out: *mut TxState) {
    // SAFETY: live port (caller's contract).
    let port = unsafe { port(p) };
    // SAFETY: TX queue `qid`'s lock held (caller's contract).
    let st = port.tx_state(&mut unsafe { queue_token::<TxLock>(port, qid) });
    // SAFETY: valid out pointer.
    unsafe { *out = st };
}

/// Restarts queue index `qid`'s rings in place: 0 or a negative errno.
///
/// # Safety
///
/// RTNL held, process context; NAPI `qid` disabled, netdev TX queue `qid` stopped,
/// `ndo_xdp_xmit` kept off its redirect-in ring.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_restart_queue(p: *const c_void, qid: u16) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    // SAFETY: the queue's three contexts are stopped (caller's contract): NAPI `qid` disabled,
    // its TX queue stopped, its redirect-in ring fenced off (`quiet` set under the xmit lock).
    let mut tokens = unsafe { stopped_queue_tokens(port, qid) };
    status(port.restart_queue(&mut ctl, &mut tokens))
}

/// `XDP_SETUP_XSK_POOL`: queue index `qid` takes its RX buffers from the zero-copy XSK pool the
/// glue bound to it (`on`) or from its page pool again; a running queue is built again on the
/// new source. 0 or a negative errno, with `*why` (`XSK_WHY_*`) saying which refusal.
///
/// # Safety
///
/// RTNL held, process context; `why` valid for a write; queue `qid`'s contexts do not run: if
/// the interface is up and `qid` in use, NAPI `qid` disabled, netdev TX queue `qid` stopped and
/// `ndo_xdp_xmit` kept off its redirect-in ring (as for `onic_rs_restart_queue`).
#[no_mangle]
pub unsafe extern "C" fn onic_rs_xsk_source(p: *const c_void, qid: u16, on: bool, why: *mut u8) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    // SAFETY: the queue's three contexts are stopped or were never started (caller's contract).
    let mut tokens = unsafe { stopped_queue_tokens(port, qid) };
    let source = if on { SourceKind::Xsk } else { SourceKind::Pages };
    let r = port.set_queue_source(&mut ctl, &mut tokens, source);
    let code = match &r {
        Err(PortError::Xsk(XskRefusal::NotBound)) => XSK_WHY_NOT_BOUND,
        Err(PortError::Xsk(XskRefusal::ChunkTooSmall { .. })) => XSK_WHY_CHUNK,
        _ => XSK_WHY_NONE,
    };
    // SAFETY: valid out pointer (caller's contract).
    unsafe { *why = code };
    status(r)
}

/// Invalidates every queue context of the port's function, with no fallback (before a card that
/// was cut off from memory may reach it again): 0 or a negative errno.
///
/// # Safety
///
/// RTNL held, process context, the interface down.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_invalidate_all_queues(p: *const c_void) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    status(port.invalidate_all_queues(&mut ctl))
}

/// NAPI poll of queue index `qid`'s RX and XDP_TX rings with the attached program (null: none);
/// the result goes to `*out`. No driver lock may be held.
///
/// # Safety
///
/// Called from that queue's NAPI poll with a budget above 0; `napi` is its `struct napi_struct
/// *`; `prog` is null or a program that stays alive during the call; `out` is valid for a write.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_poll(
    p: *const c_void,
    qid: u16,
    budget: i32,
    napi: *mut c_void,
    prog: *mut c_void,
    out: *mut PollResult,
) {
    // SAFETY: live port (caller's contract).
    let port = unsafe { port(p) };
    // SAFETY: the NAPI poll of queue `qid` (caller's contract).
    let mut poll = unsafe { queue_token::<Napi>(port, qid) };
    // SAFETY: a NAPI poll runs in softirq context with bottom halves off until it returns: an RCU
    // read-side section, which `synchronize_net` (the port's grace period) waits out.
    let section = unsafe { ReadSection::new() };
    let r = match (KPtr::new(napi), u32::try_from(budget)) {
        (Some(napi), Ok(b)) if b > 0 => port.poll(&mut poll, &section, b, napi, KPtr::new(prog)),
        _ => PollResult::default(),
    };
    // SAFETY: valid out pointer (caller's contract).
    unsafe { *out = r };
}

/// ndo_xdp_xmit on the redirect-in ring `qid`: how many of the `n` frames were queued (the rest
/// are still the caller's), or a negative errno.
///
/// # Safety
///
/// Queue `qid`'s xmit lock held; `frames` holds `n` live `struct xdp_frame *`.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_xdp_xmit(
    p: *const c_void,
    qid: u16,
    frames: *mut *mut c_void,
    n: i32,
    flush: bool,
) -> i32 {
    let n = usize::try_from(n).unwrap_or(0);
    if frames.is_null() || n == 0 {
        return 0;
    }
    // SAFETY: `frames` holds `n` pointers (caller's contract); `Option<NonNull<_>>` has the
    // layout of a pointer, null being `None`.
    let raw = unsafe { core::slice::from_raw_parts(frames.cast::<Option<KPtr>>(), n) };
    // A null entry ends the batch.
    let valid = raw.iter().take_while(|f| f.is_some()).count();
    // SAFETY: the first `valid` entries are `Some`, and `Some(NonNull)` has the same layout as
    // `NonNull` (the niche is the null pointer).
    let list = unsafe { core::slice::from_raw_parts(frames.cast::<KPtr>(), valid) };
    // SAFETY: live port (caller's contract).
    let port = unsafe { port(p) };
    // SAFETY: queue `qid`'s xmit lock held (caller's contract).
    let mut lock = unsafe { queue_token::<XmitLock>(port, qid) };
    let sent = match port.xdp_xmit(&mut lock, list, flush) {
        Ok(k) => k,
        Err(e) => return neg(errno::from_port(&e)),
    };
    i32::try_from(sent).unwrap_or(i32::MAX)
}

/// ndo_get_stats64.
///
/// # Safety
///
/// Live port; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_stats64(p: *const c_void, out: *mut LinkStats) {
    // SAFETY: live port; valid out pointer.
    unsafe { *out = LinkStats::from(port(p).link_stats()) };
}

/// netdev_stat_ops get_queue_stats_rx/tx: queue index `qid`'s statistics. Returns 0, or
/// -EINVAL past the port's queues (`out` untouched then).
///
/// # Safety
///
/// Live port; `out` valid for a write. Any context.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_queue_stats(p: *const c_void, qid: u16, out: *mut QueueStats) -> i32 {
    // SAFETY: live port (caller's contract).
    match unsafe { port(p) }.queue_stats(qid) {
        Some(s) => {
            // SAFETY: valid out pointer (caller's contract).
            unsafe { *out = QueueStats::from(s) };
            0
        }
        None => neg(EINVAL),
    }
}

/// netdev_stat_ops get_base_stats: the statistics of the queue indices from `active` on (not
/// shown as queues).
///
/// # Safety
///
/// Live port; `out` valid for a write. Any context.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_base_stats(p: *const c_void, active: u16, out: *mut QueueStats) {
    // SAFETY: live port, valid out pointer (caller's contract).
    unsafe { *out = QueueStats::from(port(p).base_stats(active)) };
}

/// ethtool get_link.
///
/// # Safety
///
/// Live port.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_link_up(p: *const c_void) -> bool {
    // SAFETY: live port.
    unsafe { port(p).link_up() }
}

/// The error interrupt's report: the QDMA's error registers decoded on one line, written into
/// `buf` (`len` bytes, NUL-terminated, cut short if it does not fit). Returns whether any error
/// is reported.
///
/// # Safety
///
/// Live port; `buf` valid for `len` bytes of writes. Any context (registers are only read).
#[no_mangle]
pub unsafe extern "C" fn onic_rs_error_report(p: *const c_void, buf: *mut u8, len: usize) -> bool {
    // SAFETY: live port.
    let status = unsafe { port(p).error_report() };
    if len == 0 || buf.is_null() {
        return status.any();
    }
    // SAFETY: the caller's buffer, `len` bytes.
    let out = unsafe { core::slice::from_raw_parts_mut(buf, len) };
    let mut w = CutWriter { out, at: 0 };
    let _ = core::fmt::write(&mut w, format_args!("{status}"));
    let end = w.at.min(w.out.len().saturating_sub(1));
    if let Some(nul) = w.out.get_mut(end) {
        *nul = 0;
    }
    status.any()
}

/// Writes into a fixed buffer, keeping one byte for the NUL and dropping what does not fit.
struct CutWriter<'a> {
    out: &'a mut [u8],
    at: usize,
}

impl core::fmt::Write for CutWriter<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        let room = self.out.len().saturating_sub(1).saturating_sub(self.at);
        let n = s.len().min(room);
        if let (Some(to), Some(from)) = (self.out.get_mut(self.at..self.at + n), s.as_bytes().get(..n)) {
            to.copy_from_slice(from);
            self.at += n;
        }
        Ok(())
    }
}

/// ethtool get_sset_count.
///
/// # Safety
///
/// Live port.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_sset_count(p: *const c_void, sset: u32) -> i32 {
    // SAFETY: live port.
    match ethtool::sset_count(sset, unsafe { port(p) }.queue_count()) {
        Ok(n) => i32::try_from(n).unwrap_or(i32::MAX),
        Err(e) => neg(e),
    }
}

/// ethtool get_strings: `buf` holds `sset_count` strings of ETH_GSTRING_LEN bytes.
///
/// # Safety
///
/// Live port; `buf` valid for that many bytes.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_get_strings(p: *const c_void, sset: u32, buf: *mut u8) {
    // SAFETY: live port, RTNL held (ethtool's serialization).
    let (port, mut ctl) = unsafe { control(p) };
    if sset == ETH_SS_TEST {
        ethtool::self_test_names(|i, name| {
            // SAFETY: `buf` holds the set's SELF_TESTS.len() strings (caller's contract).
            let s = unsafe { &mut *buf.add(i * ETH_GSTRING_LEN).cast::<[u8; ETH_GSTRING_LEN]>() };
            *s = *name;
        });
        return;
    }
    if sset != ETH_SS_STATS {
        return;
    }
    let n = ethtool::stats_count(port.queue_count());
    let write = |i: usize, name: &[u8; ETH_GSTRING_LEN]| {
        if i < n {
            // SAFETY: `buf` holds stats_count strings of ETH_GSTRING_LEN bytes (caller's
            // contract).
            let s = unsafe { &mut *buf.add(i * ETH_GSTRING_LEN).cast::<[u8; ETH_GSTRING_LEN]>() };
            *s = *name;
        }
    };
    ethtool::stat_names(port, &mut ctl, write);
}

/// ethtool get_ethtool_stats: `data` holds `n` values.
///
/// # Safety
///
/// Live port; `data` valid for `n` u64 writes.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_get_stats(p: *const c_void, data: *mut u64, n: usize) {
    // SAFETY: caller's contract.
    let out = unsafe { core::slice::from_raw_parts_mut(data, n) };
    // SAFETY: live port, RTNL held (ethtool's serialization).
    let (port, mut ctl) = unsafe { control(p) };
    ethtool::stat_values(port, &mut ctl, out);
}

/// The RMON histogram ranges ethtool's `get_rmon_stats` hands the kernel (ended by a zero
/// entry), laid out as `struct ethtool_rmon_hist_range` (the glue checks that at compile time).
#[no_mangle]
pub static onic_rs_rmon_ranges: [RmonRange; RMON_HIST + 1] = RMON_RANGES;

/// ethtool get_eth_mac_stats, get_eth_phy_stats, get_eth_ctrl_stats, get_rmon_stats and
/// get_pause_stats: the standard groups of the port's MAC (one TICK of the CMAC). Returns 0 or a
/// negative errno (`out` untouched then).
///
/// # Safety
///
/// Live port; RTNL held (ethtool's serialization); `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_mac_groups(p: *const c_void, out: *mut MacGroups) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    match port.mac_stat_groups(&mut ctl) {
        Ok(g) => {
            // SAFETY: valid out pointer (caller's contract).
            unsafe { *out = MacGroups::from(g) };
            0
        }
        Err(e) => neg(errno::from_port(&e)),
    }
}

/// ethtool get_pauseparam: whether the CMAC acts on (`rx`) and may send (`tx`) global pause
/// frames. Returns 0 or a negative errno.
///
/// # Safety
///
/// Live port; RTNL held; `rx` and `tx` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_pause_params(p: *const c_void, rx: *mut bool, tx: *mut bool) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    match port.pause_params(&mut ctl) {
        Ok(pp) => {
            // SAFETY: valid out pointers (caller's contract).
            unsafe {
                *rx = pp.rx;
                *tx = pp.tx;
            }
            0
        }
        Err(e) => neg(errno::from_port(&e)),
    }
}

/// ethtool get_fecparam: the FEC mode asked for and the active one, as ethtool's mode bits.
/// Returns 0 or a negative errno.
///
/// # Safety
///
/// Live port; RTNL held; `configured` and `active` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_get_fec(p: *const c_void, configured: *mut u32, active: *mut u32) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    match port.fec(&mut ctl) {
        Ok(f) => {
            // SAFETY: valid out pointers (caller's contract).
            unsafe {
                *configured = f.configured.ethtool_bits();
                *active = f.active.ethtool_bits();
            }
            0
        }
        Err(e) => neg(errno::from_port(&e)),
    }
}

/// ethtool set_fecparam: ethtool's mode bits (exactly one of auto, off, rs). Returns 0 or a
/// negative errno (nothing changed).
///
/// # Safety
///
/// Live port; RTNL held.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_set_fec(p: *const c_void, bits: u32) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    status(port.set_fec(&mut ctl, bits))
}

/// ethtool get_fec_stats: the RS-FEC decoder's corrected and uncorrectable codewords (one TICK).
/// Returns 0 or a negative errno (nothing written).
///
/// # Safety
///
/// Live port; RTNL held; `corrected` and `uncorrectable` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_fec_stats(
    p: *const c_void,
    corrected: *mut u64,
    uncorrectable: *mut u64,
) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    match port.fec_stats(&mut ctl) {
        Ok(s) => {
            // SAFETY: valid out pointers (caller's contract).
            unsafe {
                *corrected = s.corrected_blocks;
                *uncorrectable = s.uncorrectable_blocks;
            }
            0
        }
        Err(e) => neg(errno::from_port(&e)),
    }
}

/// Whether the port's CMAC is in near-end loopback (registers only read: any context).
///
/// # Safety
///
/// Live port.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_loopback(p: *const c_void) -> bool {
    // SAFETY: live port.
    unsafe { port(p) }.loopback()
}

/// ndo_set_features (NETIF_F_LOOPBACK), the loopback self-test: the port's CMAC loopback on or
/// off. Returns 0 or a negative errno.
///
/// # Safety
///
/// Live port; RTNL held.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_set_loopback(p: *const c_void, on: bool) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    status(port.set_loopback(&mut ctl, on))
}

/// ndo_set_features (NETIF_F_RXHASH): whether received packets carry the shell's hash.
///
/// # Safety
///
/// Live port; RTNL held.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_set_rx_hash(p: *const c_void, on: bool) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    status(port.set_rx_hash(&mut ctl, on))
}

/// ethtool self_test, the register test: 0 when every register read as it must, else `-EIO`
/// (the register that failed is logged) or the port's error.
///
/// # Safety
///
/// Live port; RTNL held.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_register_test(p: *const c_void) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    match port.register_test(&mut ctl) {
        Ok(Ok(())) => 0,
        Ok(Err(e)) => {
            onic_hal::error!("onic: {}", e);
            neg(errno::EIO)
        }
        Err(e) => neg(errno::from_port(&e)),
    }
}

/// The loopback self-test's frame `seq` from and to `mac` (the core's format), written to `buf`.
/// Returns its length, 0 if `len` is too short.
///
/// # Safety
///
/// `mac` valid for 6 bytes, `buf` for `len` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_lb_frame(mac: *const u8, seq: u32, buf: *mut u8, len: usize) -> usize {
    // SAFETY: caller's contract.
    let (mac, out) = unsafe { (&*mac.cast::<[u8; 6]>(), core::slice::from_raw_parts_mut(buf, len)) };
    onic_core::device::line::loopback_frame(mac, seq, out).unwrap_or(0)
}

/// The sequence number of a received frame if it is, byte for byte, the loopback self-test's
/// frame of `mac`; -1 otherwise.
///
/// # Safety
///
/// `mac` valid for 6 bytes, `buf` for `len` bytes of reads.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_lb_seq(mac: *const u8, buf: *const u8, len: usize) -> i64 {
    // SAFETY: caller's contract.
    let (mac, frame) = unsafe { (&*mac.cast::<[u8; 6]>(), core::slice::from_raw_parts(buf, len)) };
    onic_core::device::line::loopback_seq(mac, frame).map_or(-1, i64::from)
}

/// devlink info_get: the identity registers of the port's device (registers only read: any
/// context).
///
/// # Safety
///
/// Live port; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_dev_info(p: *const c_void, out: *mut DevInfo) {
    // SAFETY: live port.
    let id = unsafe { port(p) }.identity();
    // SAFETY: valid out pointer (caller's contract).
    unsafe {
        *out = DevInfo {
            shell_build: id.shell_build,
            cmac_version: id.cmac_version,
        };
    }
}

/// devlink health dump: queue index `qid`'s contexts (READ commands under the card's lock) and
/// its published health counters. Returns 0 or a negative errno (`out` untouched then).
///
/// # Safety
///
/// Live port; RTNL held (the control token: the delay the context commands poll with); `out`
/// valid for a write.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_queue_dump(p: *const c_void, qid: u16, out: *mut QueueDump) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    let dump = port.queue_contexts(&mut ctl, qid).and_then(|c| {
        Ok(QueueDump::new(
            &c,
            &port.queue_counters(qid).ok_or(PortError::Invalid)?,
        ))
    });
    match dump {
        Ok(d) => {
            // SAFETY: valid out pointer (caller's contract).
            unsafe { *out = d };
            0
        }
        Err(e) => neg(errno::from_port(&e)),
    }
}

/// ethtool get_coalesce: the RX completion timer (whole µs) and count threshold of the fixed
/// setting, and whether adaptive moderation is on. Returns 0 or a negative errno.
///
/// # Safety
///
/// Live port; RTNL held; `usecs`, `frames` and `adaptive` valid for writes.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_get_coalesce(
    p: *const c_void,
    usecs: *mut u32,
    frames: *mut u32,
    adaptive: *mut bool,
) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    match port.coalesce(&mut ctl) {
        Ok((m, a)) => {
            // SAFETY: valid out pointers (caller's contract).
            unsafe {
                *usecs = m.usecs();
                *frames = m.frames();
                *adaptive = a;
            }
            0
        }
        Err(e) => neg(errno::from_port(&e)),
    }
}

/// ethtool set_coalesce: rx-usecs and rx-frames onto the QDMA's timer and count tables as the
/// fixed setting, adaptive moderation on or off (the queues take it at their next poll).
/// Returns 0 or a negative errno (nothing changed).
///
/// # Safety
///
/// Live port; RTNL held.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_set_coalesce(
    p: *const c_void,
    usecs: u32,
    frames: u32,
    adaptive: bool,
) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    status(port.set_coalesce(&mut ctl, usecs, frames, adaptive))
}

/// The DIM work item's decision: adaptive RX queue `qid` moves to `level` (DIM's profile
/// index), which its next poll's doorbell carries. Returns 0, or a negative errno when the
/// core refused (`-EINVAL`: no such queue or level, or adaptive moderation is off by now).
///
/// # Safety
///
/// Live port. Any context (one compare-exchange, no lock).
#[no_mangle]
pub unsafe extern "C" fn onic_rs_set_rx_level(p: *const c_void, qid: u16, level: u8) -> i32 {
    // SAFETY: live port (caller's contract).
    status(unsafe { port(p) }.set_rx_level(qid, level).map(|_| ()))
}

/// ndo_change_mtu validation and bookkeeping.
///
/// # Safety
///
/// Live port; RTNL held.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_change_mtu(p: *const c_void, mtu: u32) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    status(port.change_mtu(&mut ctl, mtu))
}

/// The MTU bounds of the port (`netdev->min_mtu`, `max_mtu`), set before the netdev is
/// registered.
///
/// # Safety
///
/// Live port; `min` and `max` valid for a write; RTNL held or the netdev not registered yet.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_mtu_range(p: *const c_void, min: *mut u32, max: *mut u32) {
    // SAFETY: live port, RTNL held or the netdev not registered yet (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    let (lo, hi) = port.mtu_range(&mut ctl).unwrap_or((0, 0));
    // SAFETY: valid out pointers (caller's contract).
    unsafe {
        *min = lo;
        *max = hi;
    }
}

/// ethtool get_rxfh: table (RSS_INDIR_SIZE entries) and key (RSS_KEY_SIZE bytes), each optional.
///
/// # Safety
///
/// Live port; each pointer null or valid for its size.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_rss_get(p: *const c_void, indir: *mut u32, key: *mut u8) {
    // SAFETY: null or valid for the table/key size (caller's contract).
    let (t, k) = unsafe {
        (
            indir.cast::<[u32; RSS_INDIR_SIZE]>().as_mut(),
            key.cast::<[u8; RSS_KEY_SIZE]>().as_mut(),
        )
    };
    // SAFETY: live port.
    unsafe { port(p) }.rss_get(t, k);
}

/// ethtool set_rxfh: validated as a whole before anything is written.
///
/// # Safety
///
/// As `onic_rs_rss_get`, RTNL held.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_rss_set(p: *const c_void, indir: *const u32, key: *const u8) -> i32 {
    // SAFETY: null or valid for the table/key size (caller's contract).
    let (t, k) = unsafe {
        (
            indir.cast::<[u32; RSS_INDIR_SIZE]>().as_ref(),
            key.cast::<[u8; RSS_KEY_SIZE]>().as_ref(),
        )
    };
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    status(port.rss_set(&mut ctl, t, k).map(|_| ()))
}

/// The default RSS table again (entry k = k % queues in use), following later queue-count
/// changes; the key stays. 0 or a negative errno.
///
/// # Safety
///
/// Live port; RTNL held.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_rss_reset(p: *const c_void) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    status(port.rss_reset(&mut ctl))
}

/// ethtool get_channels / get_ringparam.
///
/// # Safety
///
/// Live port; RTNL held; `out` valid for a write.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_get_layout(p: *const c_void, out: *mut PortLayout) {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    let layout = port.layout(&mut ctl).unwrap_or_default();
    // SAFETY: valid out pointer (caller's contract).
    unsafe { *out = layout };
}

/// Checks a new layout (queue pairs, usable ring entries) without applying it: 0 or a negative
/// errno.
///
/// # Safety
///
/// Live port; RTNL held.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_check_layout(
    p: *const c_void,
    queues: u32,
    tx_ring: u32,
    rx_ring: u32,
) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    status(port.check_layout(&mut ctl, queues, tx_ring, rx_ring))
}

/// Applies a layout checked by `onic_rs_check_layout`; the interface must be down.
///
/// # Safety
///
/// Live port; RTNL held; interface down.
#[no_mangle]
pub unsafe extern "C" fn onic_rs_set_layout(
    p: *const c_void,
    queues: u32,
    tx_ring: u32,
    rx_ring: u32,
) -> i32 {
    // SAFETY: live port, RTNL held (caller's contract).
    let (port, mut ctl) = unsafe { control(p) };
    status(port.reconfigure(&mut ctl, queues, tx_ring, rx_ring))
}

/// ethtool get_rxnfc ETHTOOL_GRXFH: the RXH_* fields the shell's hash covers for `flow_type`.
#[no_mangle]
pub extern "C" fn onic_rs_rx_flow_hash(flow_type: u32) -> u64 {
    crate::ethtool::rx_flow_hash_fields(flow_type)
}

/// ethtool set_rxnfc ETHTOOL_SRXFH: 0 when `fields` is exactly what the shell hashes for
/// `flow_type` (nothing to change), else a negative errno.
#[no_mangle]
pub extern "C" fn onic_rs_set_rx_flow_hash(flow_type: u32, fields: u64) -> i32 {
    match crate::ethtool::set_rx_flow_hash(flow_type, fields) {
        Ok(()) => 0,
        Err(e) => neg(e),
    }
}
