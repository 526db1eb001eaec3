//! Queue context programming through `onic-core`: TX queues set up, read back and torn down; the
//! RX queues the traffic group uses set up and read back.

use onic_core::qdma::context_read;
use onic_core::{BufSizeIdx, RingSizeIdx, RxQueueConfig, TxQueueConfig};
use onic_hal::layout::ctxt::{CmptCtxt, CtxtSel, PfchCtxt, SwCtxt};
use onic_hal::{AddrLimit, CoherentRegion};

use super::probe::RxProbe;
use super::{Bench, Runner, SimDevice, QUEUES};
use crate::time::TscDelay;

/// TX queues each PF programs and tears down.
const TX_QUEUES: u16 = 4;
/// Ring-size index of the TX rings here (64 entries) and of the RX rings (128 entries).
const TX_RING: u8 = 1;
const RX_RING: u8 = 2;
/// Buffer-size index per RX queue: 3520 (the driver's default), 2048, 512, 256, 3520, 1024, 512,
/// 256 bytes, so frames up to 1514 bytes take one to six buffers.
const RX_BUFFERS: [u8; QUEUES as usize] = [5, 4, 2, 1, 5, 3, 2, 1];

pub fn run(r: &mut Runner, b: &mut Bench<'_>) {
    r.group("queue contexts (onic-core init/teardown on the model)");
    let dma = b.model.dma();
    for dev in b.devices.iter().flatten() {
        tx_queues(r, dev, dma);
    }
    for dev in b.devices.iter().flatten() {
        rx_queues(r, b.model, dev, &mut b.rx);
    }
    if b.devices.iter().any(Option::is_none) {
        r.skipped("queue-contexts", "a function did not come up");
    }
}

fn tx_queues<'c>(r: &mut Runner, dev: &SimDevice<'c>, dma: super::SimDmaMem<'c>) {
    let func = dev.function().number();
    let ring_idx = RingSizeIdx::new(TX_RING).ok();
    let mut programmed = 0;
    let mut matched = 0;
    let mut invalidated = 0;
    let mut detail_err = None;
    for qid in 0..TX_QUEUES {
        let Some(ring_idx) = ring_idx else { break };
        let cfg = TxQueueConfig {
            ring: ring_idx,
            ..TxQueueConfig::new(qid)
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
        let abs = dev.function().qbase() + qid;
        let want = SwCtxt::reference_h2c(func, ring.dma_addr(), TX_RING, qid);
        if let Ok(words) = context_read(dev.qdma(), &mut TscDelay, CtxtSel::SwH2c, abs) {
            let mut got = [0; SwCtxt::WORDS];
            got.copy_from_slice(&words[..SwCtxt::WORDS]);
            if SwCtxt::from_words(got) == want {
                matched += 1;
            }
        }
        if dev.teardown_tx_queue(&mut TscDelay, qid).is_ok() {
            let qen = context_read(dev.qdma(), &mut TscDelay, CtxtSel::SwH2c, abs).map(|w| {
                let mut got = [0; SwCtxt::WORDS];
                got.copy_from_slice(&w[..SwCtxt::WORDS]);
                SwCtxt::from_words(got).qen()
            });
            if qen == Ok(false) {
                invalidated += 1;
            }
        }
    }
    let name = if func == 0 {
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

fn rx_queues<'c>(
    r: &mut Runner,
    model: &crate::model::Model<'c>,
    dev: &SimDevice<'c>,
    set: &mut super::traffic::RxSet<'c>,
) {
    let func = dev.function().number();
    let name = if func == 0 {
        "rx-queues-pf0"
    } else {
        "rx-queues-pf1"
    };
    let mut matched = 0;
    for (qid, &buf) in (0..QUEUES).zip(RX_BUFFERS.iter()) {
        let (Ok(buf), Ok(ring)) = (BufSizeIdx::new(buf), RingSizeIdx::new(RX_RING)) else {
            r.check(
                name,
                false,
                format_args!("invalid buffer or ring index in the table"),
            );
            return;
        };
        let cfg = RxQueueConfig {
            buf,
            desc_ring: ring,
            cmpt_ring: ring,
            ..RxQueueConfig::new(qid)
        };
        let probe = match RxProbe::new(dev, model.dma(), cfg) {
            Ok(p) => p,
            Err(e) => {
                r.check(name, false, format_args!("RX queue {qid}: {e}"));
                return;
            }
        };
        let abs = dev.function().qbase() + qid;
        let read = |sel| context_read(dev.qdma(), &mut TscDelay, sel, abs).ok();
        let sw = read(CtxtSel::SwC2h).map(|w| {
            let mut c = [0; SwCtxt::WORDS];
            c.copy_from_slice(&w[..SwCtxt::WORDS]);
            SwCtxt::from_words(c)
        });
        let pf = read(CtxtSel::Pfch).map(|w| {
            let mut c = [0; PfchCtxt::WORDS];
            c.copy_from_slice(&w[..PfchCtxt::WORDS]);
            PfchCtxt::from_words(c)
        });
        let cm = read(CtxtSel::Cmpt).map(|w| {
            let mut c = [0; CmptCtxt::WORDS];
            c.copy_from_slice(&w[..CmptCtxt::WORDS]);
            CmptCtxt::from_words(c)
        });
        let ok = sw.is_some_and(|c| c.qen() && c.func_id() == func && c.rngsz_idx() == RX_RING)
            && pf.is_some_and(|c| c.valid() && c.bufsz_idx() == buf.index())
            && cm.is_some_and(|c| {
                c.valid() && c.intr_en() && c.vec() == qid && c.base_addr() == probe.cmpt_addr()
            });
        if ok {
            matched += 1;
        }
        set.push(probe);
    }
    r.check(
        name,
        matched == QUEUES,
        format_args!(
            "{matched}/{QUEUES} RX queues (C2H, prefetch, CMPT contexts) read back as programmed, \
             buffers 256..3520 bytes, {} descriptors posted each",
            RingSizeIdx::new(RX_RING).map_or(0, |r| r.usable() - 1)
        ),
    );
}
