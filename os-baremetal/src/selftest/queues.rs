//! Queue contexts through `onic-core`: bare TX queues set up, read back and torn down; then the
//! queue pairs the datapath groups use, built over slot storage from the heap and started through
//! `Device`, their contexts read back and their RX rings checked full.

use onic_core::device::contexts::context_read;
use onic_core::queue::tx::TxFrame;
use onic_core::{AbsQueueId, Device, QueueControl, QueueId, RingSizeIdx, TxQueueConfig};
use onic_embed::tuning::PairSpec;
use onic_hal::layout::ctxt::{CmptCtxt, CtxtSel, PfchCtxt, SwCtxt};
use onic_hal::{AddrLimit, CoherentRegion, DmaMemory, RegisterWindow};

use super::datapath::{alloc_slots, buffer_bytes, build_pair, spec, PAIRS, RX_RING, TX_RING};
use super::{Bench, Runner, SimDevice};
use crate::time::TscDelay;

/// TX queues each PF programs and tears down.
const TX_QUEUES: u16 = 4;

pub fn run(r: &mut Runner, b: &mut Bench<'_, '_>) {
    r.group("queue contexts and queue pairs (onic-core on the model)");
    let dma = b.model.dma();
    for dev in b.devices.iter().flatten() {
        tx_queues(r, dev, dma);
    }
    if b.devices.iter().any(Option::is_none) {
        r.skipped("queue-pairs", "a function did not come up");
        return;
    }
    for f in 0..2 {
        let (Some(dev), Some(rss)) = (b.devices[f].as_ref(), b.rss[f].as_ref()) else {
            continue;
        };
        b.dp.steer[f].refresh(rss.config());
        let name = if f == 0 { "pairs-pf0" } else { "pairs-pf1" };
        let mut good = 0;
        let mut failure = None;
        for q in 0..PAIRS {
            match build_pair(dev, dma, q as u16, alloc_slots(), b.dp.homes[f * PAIRS + q]) {
                Ok(pair) => {
                    if spec(q as u16).is_ok_and(|s| pair_as_programmed(dev, &pair, &s)) {
                        good += 1;
                    }
                    // At most PAIRS pairs per function.
                    let _ = b.dp.pairs[f].push(pair);
                }
                Err(e) => {
                    failure.get_or_insert(e);
                }
            }
        }
        let usable = RingSizeIdx::new(RX_RING).map_or(0, |r| r.usable());
        match failure {
            None => r.check(
                name,
                good == PAIRS,
                format_args!(
                    "{good}/{PAIRS} QueuePairs started through Device (RX buffers {}/{}/{}/{} bytes, \
                     contexts read back as programmed, {} pages posted per RX ring, page census exact)",
                    buffer_bytes(0),
                    buffer_bytes(1),
                    buffer_bytes(2),
                    buffer_bytes(3),
                    usable - 1
                ),
            ),
            Some(e) => r.check(name, false, format_args!("a queue pair did not start: {e}")),
        };
    }
}

/// Reads a started pair's contexts back (SW H2C as the reference context; SW C2H, prefetch and
/// CMPT with the values `spec` gave) and checks that its RX ring is full and its pages
/// accounted. For the model's pairs and the PCI card's alike.
pub fn pair_as_programmed<Q, S, D, F, const C: usize>(
    dev: &Device<Q, S>,
    pair: &onic_embed::set::Pair<'_, D, F, C>,
    spec: &PairSpec,
) -> bool
where
    Q: RegisterWindow,
    S: RegisterWindow,
    D: DmaMemory,
    F: TxFrame,
{
    let func = dev.function();
    let q = spec.rx.qid;
    let Some(abs) = func.abs_queue(q) else {
        return false;
    };
    let read = |sel| read_context(dev, sel, abs, SwCtxt::from_words);
    let h2c = read(CtxtSel::SwH2c);
    let c2h = read(CtxtSel::SwC2h);
    let pf = read_context(dev, CtxtSel::Pfch, abs, PfchCtxt::from_words);
    let cm = read_context(dev, CtxtSel::Cmpt, abs, CmptCtxt::from_words);
    let want_h2c = SwCtxt::reference_h2c(func, pair.tx.ring_dma_addr(), spec.tx.ring.index(), q.get());
    let usable = spec.rx.desc_ring.usable();
    let census = pair.page_counts().is_some_and(|c| {
        c.total() == pair.pool.stats().live_pages() && c.in_rx_ring == u64::from(usable - 1)
    });
    h2c == Some(want_h2c)
        && c2h.is_some_and(|c| {
            c.qen() && c.func_id() == func.get() && c.rngsz_idx() == spec.rx.desc_ring.index()
        })
        && pf.is_some_and(|c| c.valid() && c.bufsz_idx() == spec.rx.buf.index())
        && cm.is_some_and(|c| {
            c.valid() && c.intr_en() && c.vec() == q.get() && c.base_addr() == pair.rx.cmpt_ring_dma_addr()
        })
        && pair.rx.posted() == usable - 1
        && census
}

/// Context `sel` of absolute queue `abs` as the device (the model's function or the PCI card's)
/// holds it, decoded by `decode` (a context layout's `from_words`); `None` if the read failed.
pub fn read_context<T, Q: RegisterWindow, S: RegisterWindow, const N: usize>(
    dev: &Device<Q, S>,
    sel: CtxtSel,
    abs: AbsQueueId,
    decode: fn([u32; N]) -> T,
) -> Option<T> {
    let words = context_read(dev.raw_registers().qdma, &mut TscDelay, sel, abs).ok()?;
    let mut c = [0; N];
    c.copy_from_slice(&words[..N]);
    Some(decode(c))
}

/// Whether the H2C software context of absolute queue `abs` still reads as enabled (`true` too
/// when it cannot be read).
pub fn h2c_enabled<Q: RegisterWindow, S: RegisterWindow>(dev: &Device<Q, S>, abs: AbsQueueId) -> bool {
    read_context(dev, CtxtSel::SwH2c, abs, SwCtxt::from_words).is_none_or(|c| c.qen())
}

fn tx_queues<'c>(r: &mut Runner, dev: &SimDevice<'c>, dma: super::SimDmaMem<'c>) {
    let func = dev.function();
    let ring_idx = RingSizeIdx::new(TX_RING).ok();
    let mut programmed = 0;
    let mut matched = 0;
    let mut invalidated = 0;
    let mut detail_err = None;
    for qid in 0..TX_QUEUES {
        let Some(ring_idx) = ring_idx else { break };
        let cfg = TxQueueConfig {
            ring: ring_idx,
            ..TxQueueConfig::new(QueueId::new(qid))
        };
        let len = usize::from(ring_idx.entries()) * onic_hal::layout::desc::H2C_DESC_BYTES;
        let ring = match CoherentRegion::new(dma, len, AddrLimit::Below4G) {
            Ok(r) => r,
            Err(e) => {
                detail_err.get_or_insert(onic_core::Error::Dma(e));
                continue;
            }
        };
        if let Err(e) = dev.init_tx_queue(&mut TscDelay, &cfg, ring.dma_addr()) {
            detail_err.get_or_insert(e);
            continue;
        }
        programmed += 1;
        let abs = func.abs_queue(QueueId::new(qid));
        let want = SwCtxt::reference_h2c(func, ring.dma_addr(), TX_RING, qid);
        if abs.and_then(|a| read_context(dev, CtxtSel::SwH2c, a, SwCtxt::from_words)) == Some(want) {
            matched += 1;
        }
        let torn_down = dev.teardown_tx_queue(&mut TscDelay, QueueId::new(qid)).is_ok();
        if torn_down && abs.is_some_and(|a| !h2c_enabled(dev, a)) {
            invalidated += 1;
        }
    }
    let name = if func.is_master() {
        "tx-queues-pf0"
    } else {
        "tx-queues-pf1"
    };
    let n = TX_QUEUES;
    match detail_err {
        None => r.check(
            name,
            programmed == n && matched == n && invalidated == n,
            format_args!(
                "{programmed}/{n} H2C queues programmed, {matched} read back as the reference context, \
                 {invalidated} disabled after teardown"
            ),
        ),
        Some(e) => r.check(name, false, format_args!("H2C queue setup failed: {e}")),
    };
}
