//! The port's datapath calls. Each takes the token of the one context that owns the rings it
//! touches for a queue index (the rules of [`crate::port`]); none of them
//! calls out into code that could call the driver back while a ring of the port is borrowed,
//! except the RX poll, which holds no lock and borrows only its own NAPI rings when it hands
//! frames to the stack or to a redirect.

use onic_core::moderation::QueueModeration;
use onic_core::queue::pair::PairPoll;
use onic_core::queue::tx::{TxError, TxThresholds};
use onic_core::rss::{RxHasher, ShellHasher};
use onic_core::xdp::{xdp_xmit, XdpDispatch, XdpRxq};
use onic_core::QueueId;
use onic_core::{RxStats, TxStats};
use onic_hal::grace::ReadSection;

use crate::poll::poll_pair;

use super::abi::{PollResult, TxClean, TxState, XmitResult};
use super::contexts::{Napi, Token, TxLock, XmitLock};
use super::counters::{CounterBlock, QSTAT_WORDS};
use super::error::{PortError, PortResult};
use super::host::{Host, StatBlock};
use super::queues::{publish_napi_poll, publish_tx, HostDevice, NapiState, PollReach, TxRing};
use super::sinks::{Done, HostProg, Pass, Redirect, TxItem};
use super::xsk::xsk_send;
use super::Port;

/// Frames of one `ndo_xdp_xmit` call mapped at a time (the kernel's bulk size is 16).
const XMIT_CHUNK: usize = 16;

impl<H: Host> Port<H> {
    /// The stack's TX ring of the token's queue index, if it runs.
    fn stack<'t>(&'t self, t: &'t mut Token<'_, TxLock>) -> Option<&'t mut TxRing<H>> {
        self.queues
            .get(usize::from(t.index()))?
            .stack
            .open(t)
            .ok()?
            .as_mut()
    }

    /// The redirect-in ring of the token's queue index, if it runs.
    fn xmit_ring<'t>(&'t self, t: &'t mut Token<'_, XmitLock>) -> Option<&'t mut TxRing<H>> {
        self.queues
            .get(usize::from(t.index()))?
            .xmit
            .open(t)
            .ok()?
            .as_mut()
    }

    /// Publishes a TX-only ring's counters as block `block` of queue index `qid`.
    fn publish_tx(&self, qid: u16, block: StatBlock, stats: &TxStats) {
        if let Some(q) = self.queues.get(usize::from(qid)) {
            publish_tx(q.blocks.get(block), stats);
        }
    }

    /// Sends one packet of the stack on TX ring `qid`, after reclaiming what the device has
    /// completed there (`done` receives the counts, for BQL). No doorbell: the glue calls
    /// [`Port::tx_flush`] at the end of the batch (xmit_more, BQL), except that a ring that
    /// filled up is published at once. On `Ok`/`OkStop` the packet belongs to the ring until its
    /// completion frees it; otherwise it is still the caller's.
    ///
    /// The caller holds the stack's TX queue lock (`lock`); the packet is linear and at least
    /// `ETH_ZLEN` long.
    pub fn xmit(&self, lock: &mut Token<'_, TxLock>, skb: H::Skb, done: &mut TxClean) -> XmitResult {
        let qid = lock.index();
        let Some(tx) = self.stack(lock) else {
            return XmitResult::Dropped;
        };
        *done = self.reclaim_stack(tx, None);
        let Some(item) = TxItem::map_skb(&self.host, skb) else {
            return XmitResult::Dropped;
        };
        let r = match tx.xmit_os(&self.dev.doorbells(), item, true) {
            Ok(()) if tx.is_stopped() => XmitResult::OkStop,
            Ok(()) => XmitResult::Ok,
            Err(e) => {
                let busy = matches!(e, TxError::Full(_));
                e.into_inner().unmap(&self.host);
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
            self.publish_tx(qid, StatBlock::Stack, tx.stats());
        }
        r
    }

    /// Rings the stack TX ring's doorbell for everything queued (end of a transmit batch).
    pub fn tx_flush(&self, lock: &mut Token<'_, TxLock>) {
        let qid = lock.index();
        if let Some(tx) = self.stack(lock) {
            tx.flush(&self.dev.doorbells());
            self.publish_tx(qid, StatBlock::Stack, tx.stats());
        }
    }

    /// Free descriptors of the stack TX ring (the re-check after stopping the queue).
    pub fn tx_free(&self, lock: &mut Token<'_, TxLock>) -> u16 {
        self.stack(lock).map_or(0, |tx| tx.free())
    }

    /// Reclaims a TX-only ring (the stack's or the redirect-in one) and says what it did.
    fn reclaim_stack(&self, tx: &mut TxRing<H>, napi_budget: Option<u32>) -> TxClean {
        let before = *tx.stats();
        let mut done = Done {
            host: &self.host,
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

    /// Reclaims the stack TX ring from the queue's NAPI poll, which holds the netdev TX queue's
    /// lock (`budget` as NAPI gave it: packets are freed with `napi_consume_skb`).
    pub fn tx_clean(&self, lock: &mut Token<'_, TxLock>, budget: u32) -> TxClean {
        let qid = lock.index();
        let Some(tx) = self.stack(lock) else {
            return TxClean::default();
        };
        let c = self.reclaim_stack(tx, Some(budget));
        if c.packets > 0 {
            self.publish_tx(qid, StatBlock::Stack, tx.stats());
        }
        c
    }

    /// Reclaims the redirect-in ring of the xmit lock's queue (frames still on it in
    /// `in_flight`, its error state in `error`).
    pub fn xmit_clean(&self, lock: &mut Token<'_, XmitLock>) -> TxClean {
        let qid = lock.index();
        let Some(tx) = self.xmit_ring(lock) else {
            return TxClean::default();
        };
        let c = self.reclaim_stack(tx, None);
        if c.packets > 0 {
            self.publish_tx(qid, StatBlock::Xmit, tx.stats());
        }
        c
    }

    /// `ndo_xdp_xmit` on the redirect-in ring of the xmit lock's queue: reclaims it, then queues
    /// the frames in order, stopping at the first that does not fit. Returns how many were
    /// queued (the rest are still the caller's).
    ///
    /// # Errors
    ///
    /// `Down` when the ring is not running.
    pub fn xdp_xmit(
        &self,
        lock: &mut Token<'_, XmitLock>,
        frames: &[H::XdpFrame],
        flush: bool,
    ) -> PortResult<usize> {
        let qid = lock.index();
        let Some(tx) = self.xmit_ring(lock) else {
            return Err(PortError::Down);
        };
        let mut done = Done {
            host: &self.host,
            napi_budget: None,
        };
        tx.reclaim(&mut done);
        let db = self.dev.doorbells();
        let mut sent = 0;
        for chunk in frames.chunks(XMIT_CHUNK) {
            let mut items: [Option<TxItem<H>>; XMIT_CHUNK] = Default::default();
            let mut mapped = 0;
            for (slot, &f) in items.iter_mut().zip(chunk) {
                match TxItem::map_xdp(&self.host, f) {
                    Some(item) => *slot = Some(item),
                    None => break,
                }
                mapped += 1;
            }
            let n = xdp_xmit(tx, &db, items.get_mut(..mapped).unwrap_or_default(), false);
            sent += n;
            for item in items.iter_mut().skip(n).filter_map(Option::take) {
                item.unmap(&self.host);
            }
            if n < chunk.len() {
                break;
            }
        }
        if flush {
            tx.flush(&db);
        }
        self.publish_tx(qid, StatBlock::Xmit, tx.stats());
        Ok(sent)
    }

    /// One NAPI poll of queue index `qid`'s own rings: the XDP_TX ring's reclaim, then up to
    /// `budget` received frames through `prog` (if attached) or straight to the stack, XDP_TX on
    /// the own ring. No lock is held: frames reach the stack (which may transmit on this port
    /// from here) and redirect targets (which may be this port's `ndo_xdp_xmit`) while only
    /// this context's rings are borrowed.
    ///
    /// `poll` is the queue's NAPI context (budget > 0), inside a read-side section of the OS's
    /// grace period (`section`: bottom halves off); `napi` is its kernel object.
    pub fn poll(
        &self,
        poll: &mut Token<'_, Napi>,
        section: &ReadSection<'_>,
        budget: u32,
        napi: H::Napi,
        prog: Option<H::Prog>,
    ) -> PollResult {
        let qid = poll.index();
        let Some(queue) = self.queues.get(usize::from(qid)) else {
            return PollResult::default();
        };
        let Ok(state) = queue.napi.open(poll) else {
            return PollResult::default();
        };
        let call = NapiCall { budget, napi, prog };
        let to = queue.blocks.get(StatBlock::Napi);
        let hasher = self.rx_hash().then(|| self.hasher.read(section));
        poll_queue(&self.dev, &self.host, (state, to), (qid, hasher), call).0
    }

    /// The same poll as [`Port::poll`] through exclusive access to the port (a host whose one
    /// thread runs every context, [`super::SoloPort`]): no token or read-side section is needed,
    /// since nothing else can reach the port meanwhile. Also returns the core's own account of
    /// the poll (`None` when the queue does not run).
    pub(crate) fn poll_exclusive(&mut self, qid: u16, call: NapiCall<H>) -> (PollResult, Option<PairPoll>) {
        let Self {
            dev,
            host,
            queues,
            hasher,
            rx_hash,
            ..
        } = self;
        let Some(queue) = queues.get_mut(usize::from(qid)) else {
            return (PollResult::default(), None);
        };
        let state = (queue.napi.get_mut(), queue.blocks.get(StatBlock::Napi));
        let hasher = rx_hash.get_mut().then(|| hasher.current());
        poll_queue(dev, host, state, (qid, hasher), call)
    }

    /// The stack TX ring's state, for a TX timeout report (Linux's watchdog holds every TX
    /// queue lock).
    pub fn tx_state(&self, lock: &mut Token<'_, TxLock>) -> TxState {
        let Some(tx) = self.stack(lock) else {
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

/// What a NAPI poll is given besides its queue: the budget, the host's poll object and the
/// attached program, if any.
pub(crate) struct NapiCall<H: Host> {
    pub(crate) budget: u32,
    pub(crate) napi: H::Napi,
    pub(crate) prog: Option<H::Prog>,
}

/// The one poll of a queue index's NAPI rings, however the caller reached them: the XDP_TX
/// ring's reclaim, then up to `budget` received frames through the program (if attached) or
/// straight to the host's stack, XDP_TX on the own ring; then what it changed of the NAPI block is
/// published. Returns what the host is told and the core's account of the poll (`None`: the
/// queue does not run).
#[inline(always)]
fn poll_queue<H: Host>(
    dev: &HostDevice<H>,
    host: &H,
    (state, to): (&mut NapiState<H>, &CounterBlock),
    (qid, hasher): (u16, Option<&ShellHasher>),
    call: NapiCall<H>,
) -> (PollResult, Option<PairPoll>) {
    let NapiCall { budget, napi, prog } = call;
    let NapiState {
        pair: Some(qp),
        mem: Some(mem),
        base,
    } = state
    else {
        return (PollResult::default(), None);
    };
    let mem = *mem;
    let mut pass = Pass {
        host,
        napi,
        mem,
        qid,
        hasher,
    };
    let mut redirect = Redirect {
        host,
        prog,
        mem,
        qid,
        redirected: false,
        xsk_redirected: (0, 0),
    };
    let mut program = prog.map(|prog| HostProg { host, prog, mem });
    let rxq = XdpRxq {
        queue_index: qid,
        port: dev.function().port(),
    };
    // Frames are hashed ahead of the program only for one that can ask for the hash (the host
    // is asked only while the port hashes at all); the packets it passes are hashed for the
    // stack either way (`Pass`).
    let dispatch = XdpDispatch {
        prog: program.as_mut(),
        redirect: &mut redirect,
        origin: u32::from(qid),
        hasher: hasher
            .filter(|_| prog.is_some_and(|p| host.prog_reads_rx_hash(p)))
            .map(|h| h as &dyn RxHasher),
    };
    let mut done = Done {
        host,
        napi_budget: Some(budget),
    };
    let reach = PollReach::before(qp, prog.is_some());
    set_in_napi(qp, true);
    // The queue's own moderation rides on the poll's CMPT CIDX doorbell (its running trigger
    // changes there and nowhere else, onic_core::moderation).
    let (db, moderation) = dev.rx_poll_doorbells(QueueId::new(qid));
    let out = poll_pair(
        qp,
        (usize::try_from(budget).unwrap_or(usize::MAX), &db),
        (&mut pass, rxq),
        dispatch,
        &mut done,
    );
    set_in_napi(qp, false);
    // AF_XDP zero copy: the application's TX ring goes out on the XDP_TX ring in the same poll.
    if qp.pool.as_xsk().is_some() {
        let (packets, bytes) = xsk_send(host, qp, &db, (qid, budget));
        if let Some(x) = qp.pool.as_xsk_mut() {
            x.stats.rx_packets += redirect.xsk_redirected.0;
            x.stats.rx_bytes += redirect.xsk_redirected.1;
            x.stats.tx_packets += packets;
            x.stats.tx_bytes += bytes;
        }
    }
    let redirected = redirect.redirected;
    // The live counters as they are: the index's earlier rings are in the history block.
    publish_napi_poll(to, qp, reach);
    // The queue's received totals for adaptive moderation's samples, history included (they
    // must not fall when the rings are replaced; the RX words come first in the history).
    const RX_PACKETS: usize = RxStats::word("rx_packets");
    const RX_BYTES: usize = RxStats::word("rx_bytes");
    const _: () = assert!(RX_PACKETS < QSTAT_WORDS && RX_BYTES < QSTAT_WORDS);
    let rx = qp.rx.stats();
    let level = match moderation {
        Some(QueueModeration::Adaptive(level)) => Some(level),
        _ => None,
    };
    let result = PollResult {
        done: u32::try_from(out.rx.done).unwrap_or(u32::MAX),
        more: out.rx.more,
        redirected,
        tx_pending: qp.tx.in_flight() > 0,
        error: qp.error().is_some(),
        adaptive: level.is_some(),
        level: level.unwrap_or(0),
        rx_packets: rx.rx_packets.wrapping_add(base[RX_PACKETS]),
        rx_bytes: rx.rx_bytes.wrapping_add(base[RX_BYTES]),
    };
    (result, Some(out))
}

/// Whether the pair's page pool (if it runs on one) is called from its NAPI context.
fn set_in_napi<H: Host>(qp: &mut super::queues::NapiPair<H>, on: bool) {
    if let Some(p) = qp.pool.as_pages_mut() {
        p.in_napi = on;
    }
}
