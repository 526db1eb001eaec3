//! The port's datapath entry points. Each names the one context that may call it for a given
//! queue index (its owner in the locking rules of `os-linux/README.md`); none of them calls out
//! into code that could call the driver back while a ring of the port is borrowed, except the RX
//! poll, which holds no lock and borrows only its own NAPI rings when it hands frames to the
//! stack or to a redirect.

use core::sync::atomic::Ordering;

use onic_core::queue::tx::{TxError, TxThresholds};
use onic_core::rss::ShellHasher;
use onic_core::stats::QueueCounters;
use onic_core::xdp::{xdp_xmit, XdpDispatch, XdpRxq};
use onic_core::RxContext;
use onic_hal::{DelayNs, DmaMemory, RegisterWindow, SharedLock};

pub use crate::abi::{PollResult, TxClean, TxState, XmitResult};
use crate::dp::{self, Done, OsProg, Pass, Redirect, TxItem};
use crate::errno::{Errno, ENETDOWN};
use crate::os::{Os, PacketMap, StatBlock};
use crate::port::Port;
use crate::queues::{napi_counters, tx_counters, NapiPair, TxRing};

/// Frames of one `ndo_xdp_xmit` call mapped at a time (the kernel's bulk size is 16).
const XMIT_CHUNK: usize = 16;

impl<R, D, L, K, C> Port<R, D, L, K, C>
where
    R: RegisterWindow,
    D: DmaMemory + PacketMap + Clone,
    L: DelayNs,
    K: Os + Clone,
    C: SharedLock,
{
    /// The NAPI rings of queue index `qid`.
    ///
    /// # Safety
    ///
    /// The caller is queue `qid`'s NAPI context and holds no other reference from this method.
    #[allow(clippy::mut_from_ref)]
    unsafe fn napi(&self, qid: u16) -> Option<&mut NapiPair<K, D>> {
        let q = self.queues.get(usize::from(qid))?;
        // SAFETY: caller's contract: the one context that owns these rings.
        unsafe { (*q.napi.get()).as_mut() }
    }

    /// The stack's TX ring of queue index `qid`.
    ///
    /// # Safety
    ///
    /// The caller holds netdev TX queue `qid`'s lock and no other reference from this method.
    #[allow(clippy::mut_from_ref)]
    unsafe fn stack(&self, qid: u16) -> Option<&mut TxRing<K, D>> {
        let q = self.queues.get(usize::from(qid))?;
        // SAFETY: caller's contract.
        unsafe { (*q.stack.get()).as_mut() }
    }

    /// The redirect-in ring of queue index `qid`.
    ///
    /// # Safety
    ///
    /// The caller holds queue `qid`'s xmit lock and no other reference from this method.
    #[allow(clippy::mut_from_ref)]
    unsafe fn xmit_ring(&self, qid: u16) -> Option<&mut TxRing<K, D>> {
        let q = self.queues.get(usize::from(qid))?;
        // SAFETY: caller's contract.
        unsafe { (*q.xmit.get()).as_mut() }
    }

    fn publish(&self, qid: u16, block: StatBlock, c: &QueueCounters) {
        self.os.stats_publish(qid, block, &dp::to_words(c));
    }

    /// Sends one packet of the stack on TX ring `qid`, after reclaiming what the device has
    /// completed there (`done` receives the counts, for BQL). No doorbell: the glue calls
    /// [`Port::tx_flush`] at the end of the batch (xmit_more, BQL), except that a ring that
    /// filled up is published at once. On `Ok`/`OkStop` the packet belongs to the ring until its
    /// completion frees it; otherwise it is still the caller's.
    ///
    /// # Safety
    ///
    /// The caller holds netdev TX queue `qid`'s lock; the packet is linear and at least
    /// `ETH_ZLEN` long.
    pub unsafe fn xmit(&self, qid: u16, skb: K::Skb, done: &mut TxClean) -> XmitResult {
        // SAFETY: the TX lock of this queue makes us its only user (caller's contract).
        let Some(tx) = (unsafe { self.stack(qid) }) else {
            return XmitResult::Dropped;
        };
        *done = self.reclaim_stack(tx, None);
        let Some(item) = TxItem::map_skb(&self.os, &self.dma, skb) else {
            return XmitResult::Dropped;
        };
        let r = match tx.xmit_os(&self.dev.doorbells(), item, true) {
            Ok(()) if tx.is_stopped() => XmitResult::OkStop,
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
        done.in_flight = u32::from(tx.in_flight());
        done.free = u32::from(tx.free());
        if r != XmitResult::Ok {
            self.publish(qid, StatBlock::Stack, &tx_counters(tx.stats()));
        }
        r
    }

    /// Rings the stack TX ring's doorbell for everything queued (end of a transmit batch).
    ///
    /// # Safety
    ///
    /// As [`Port::xmit`].
    pub unsafe fn tx_flush(&self, qid: u16) {
        // SAFETY: caller's contract.
        if let Some(tx) = unsafe { self.stack(qid) } {
            tx.flush(&self.dev.doorbells());
            self.publish(qid, StatBlock::Stack, &tx_counters(tx.stats()));
        }
    }

    /// Free descriptors of the stack TX ring (the re-check after stopping the queue).
    ///
    /// # Safety
    ///
    /// As [`Port::xmit`].
    pub unsafe fn tx_free(&self, qid: u16) -> u16 {
        // SAFETY: caller's contract.
        unsafe { self.stack(qid) }.map_or(0, |tx| tx.free())
    }

    /// Reclaims a TX-only ring (the stack's or the redirect-in one) and says what it did.
    fn reclaim_stack(&self, tx: &mut TxRing<K, D>, napi_budget: Option<u32>) -> TxClean {
        let before = *tx.stats();
        let mut done = Done {
            os: &self.os,
            map: &self.dma,
            napi_budget,
        };
        tx.reclaim(&mut done);
        let after = tx.stats();
        TxClean {
            bytes: after.tx_bytes.wrapping_sub(before.tx_bytes),
            packets: u32::try_from(after.tx_packets.wrapping_sub(before.tx_packets)).unwrap_or(u32::MAX),
            in_flight: u32::from(tx.in_flight()),
            free: u32::from(tx.free()),
            wake_at: u32::from(TxThresholds::for_ring(tx.config().ring.usable()).wake_at),
            error: tx.error().is_some(),
        }
    }

    /// Reclaims the stack TX ring `qid` from the queue's NAPI poll (`budget` as NAPI gave it:
    /// packets are freed with `napi_consume_skb`).
    ///
    /// # Safety
    ///
    /// The caller holds netdev TX queue `qid`'s lock.
    pub unsafe fn tx_clean(&self, qid: u16, budget: u32) -> TxClean {
        // SAFETY: caller's contract.
        let Some(tx) = (unsafe { self.stack(qid) }) else {
            return TxClean::default();
        };
        let c = self.reclaim_stack(tx, Some(budget));
        if c.packets > 0 {
            self.publish(qid, StatBlock::Stack, &tx_counters(tx.stats()));
        }
        c
    }

    /// Reclaims the redirect-in ring `qid` (frames still on it in `in_flight`, its error state
    /// in `error`).
    ///
    /// # Safety
    ///
    /// The caller holds queue `qid`'s xmit lock.
    pub unsafe fn xmit_clean(&self, qid: u16) -> TxClean {
        // SAFETY: caller's contract.
        let Some(tx) = (unsafe { self.xmit_ring(qid) }) else {
            return TxClean::default();
        };
        let c = self.reclaim_stack(tx, None);
        if c.packets > 0 {
            self.publish(qid, StatBlock::Xmit, &tx_counters(tx.stats()));
        }
        c
    }

    /// `ndo_xdp_xmit` on the redirect-in ring `qid`: reclaims it, then queues the frames in order,
    /// stopping at the first that does not fit. Returns how many were queued (the rest are still
    /// the caller's), or `ENETDOWN` when the ring is not running.
    ///
    /// # Safety
    ///
    /// The caller holds queue `qid`'s xmit lock.
    pub unsafe fn xdp_xmit(&self, qid: u16, frames: &[K::XdpFrame], flush: bool) -> Result<usize, Errno> {
        // SAFETY: caller's contract.
        let Some(tx) = (unsafe { self.xmit_ring(qid) }) else {
            return Err(ENETDOWN);
        };
        let mut done = Done {
            os: &self.os,
            map: &self.dma,
            napi_budget: None,
        };
        tx.reclaim(&mut done);
        let db = self.dev.doorbells();
        let mut sent = 0;
        for chunk in frames.chunks(XMIT_CHUNK) {
            let mut items: [Option<TxItem<K>>; XMIT_CHUNK] = Default::default();
            let mut mapped = 0;
            for (slot, &f) in items.iter_mut().zip(chunk) {
                match TxItem::map_xdp(&self.os, &self.dma, f) {
                    Some(item) => *slot = Some(item),
                    None => break,
                }
                mapped += 1;
            }
            let n = xdp_xmit(tx, &db, items.get_mut(..mapped).unwrap_or_default(), false);
            sent += n;
            for item in items.iter_mut().skip(n).filter_map(Option::take) {
                item.unmap(&self.dma);
            }
            if n < chunk.len() {
                break;
            }
        }
        if flush {
            tx.flush(&db);
        }
        self.publish(qid, StatBlock::Xmit, &tx_counters(tx.stats()));
        Ok(sent)
    }

    /// One NAPI poll of queue index `qid`'s own rings: the XDP_TX ring's reclaim, then up to
    /// `budget` received frames through `prog` (if attached) or straight to the stack, XDP_TX on
    /// the own ring. No lock is held: frames reach the stack (which may transmit on this port
    /// from here) and redirect targets (which may be this port's `ndo_xdp_xmit`) while only
    /// this context's rings are borrowed.
    ///
    /// # Safety
    ///
    /// Called from queue `qid`'s NAPI poll (budget > 0); `napi` is that poll's context.
    pub unsafe fn poll(&self, qid: u16, budget: u32, napi: K::Napi, prog: Option<K::Prog>) -> PollResult {
        // SAFETY: the NAPI context of this queue is the rings' only user.
        let Some(qp) = (unsafe { self.napi(qid) }) else {
            return PollResult::default();
        };
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
            mem,
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
        let mut ctx = RxContext {
            sink: &mut pass,
            rxq: XdpRxq {
                queue_index: qid,
                port: self.dev.function().port(),
            },
            dispatch: XdpDispatch {
                prog: program.as_mut(),
                redirect: &mut redirect,
                origin: u32::from(qid),
                hasher: Some(hasher),
            },
        };
        let mut done = Done {
            os: &self.os,
            map: &self.dma,
            napi_budget: Some(budget),
        };
        qp.pool.in_napi = true;
        let out = qp.poll(
            usize::try_from(budget).unwrap_or(usize::MAX),
            &self.dev.doorbells(),
            &mut ctx,
            &mut done,
        );
        qp.pool.in_napi = false;
        let redirected = redirect.redirected;
        self.publish_napi(qid, &napi_counters(qp));
        PollResult {
            done: u32::try_from(out.rx.done).unwrap_or(u32::MAX),
            more: out.rx.more,
            redirected,
            tx_pending: qp.tx.in_flight() > 0,
            error: qp.error().is_some(),
        }
    }

    /// Publishes the NAPI block: the index's history plus the running pair.
    fn publish_napi(&self, qid: u16, now: &QueueCounters) {
        let Some(q) = self.queues.get(usize::from(qid)) else {
            return;
        };
        // SAFETY: `base` changes only at stop, under RTNL with NAPI disabled; the NAPI poll (our
        // caller) only reads it.
        let mut c = unsafe { *q.base.get() };
        c += *now;
        self.publish(qid, StatBlock::Napi, &c);
    }

    /// The stack TX ring's state, for a TX timeout report.
    ///
    /// # Safety
    ///
    /// As [`Port::xmit`] (the kernel's watchdog holds every TX queue lock).
    pub unsafe fn tx_state(&self, qid: u16) -> TxState {
        // SAFETY: caller's contract.
        let Some(tx) = (unsafe { self.stack(qid) }) else {
            return TxState::default();
        };
        let (next_to_clean, next_to_use) = tx.indices();
        TxState {
            next_to_clean,
            next_to_use,
            device_cidx: tx.device_cidx(),
            in_flight: tx.in_flight(),
            free: tx.free(),
            running: true,
            error: tx.error().is_some(),
        }
    }
}
