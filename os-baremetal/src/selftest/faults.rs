//! The model's fault knobs against the driver's datapath: what each costs, which counter says so,
//! and that nothing is lost, leaked or touched out of bounds.

use heapless::Vec as HVec;
use onic_core::queue::tx::TxError;
use onic_core::stats::read_hw_counters;
use onic_core::QueueError;
use onic_sim::{Card, Corruption};

use super::datapath::rx_stats;
use super::datapath::{
    self, flow_for_queue, flow_to_pf1_queue, inject_tracked, os_frame, run_for, run_until, Frame, PAIRS,
    WAIT_NS,
};
use super::portbench::{self, PortBench};
use super::traffic::counter;
use super::verdicts::census_holds;
use super::xdp::{Code, Program};
use super::{Bench, Runner};

/// Page allocations the model refuses in the page-allocation test: the only HAL allocation
/// failures the bare pairs' pools see in the run.
pub const PAGE_ALLOC_REFUSALS: u32 = 2;
/// Frames of the stuck-writeback test (more than a TX ring holds).
const STALL_FRAMES: u32 = 100;
/// Frames of the XDP_TX-on-a-full-ring test.
const XDP_FULL_FRAMES: u32 = 70;

pub fn run(r: &mut Runner, b: &mut Bench<'_, '_>) {
    r.group("faults (the model's knobs against the datapath)");
    if !datapath::ready(r, b, "faults") {
        return;
    }
    page_alloc(r, b);
    completion(r, b, Corruption::ErrBit, "fault-completion-error");
    completion(r, b, Corruption::LengthZero, "fault-completion-length");
    h2c_stall(r, b);
    xdp_tx_full(r, b);
    wire(r, b);
}

/// The received frames of PF1 queue `q` plus its drops.
fn seen(b: &Bench<'_, '_>, q: usize) -> u64 {
    b.dp.pairs[1]
        .get(q)
        .map_or(0, |p| p.rx.stats().rx_packets + p.rx.stats().rx_dropped())
}

/// Replacement pages that cannot be had: the OS keeps every page (a slow consumer), so the pool's
/// cache and ring run dry and each replacement comes from the HAL, where the model refuses the
/// next two allocations. With a spare at hand, the first refusal is for the page that replaces a
/// frame handed to the OS, and the spare takes that slot; the second is for the next frame's new
/// spare, and that frame is dropped. Without one, both refusals are for spares and two frames are
/// dropped. A dropped frame's page stays in its slot; the ring keeps every buffer and traffic
/// goes on.
fn page_alloc(r: &mut Runner, b: &mut Bench<'_, '_>) {
    let q = 0;
    let Some(flow) = flow_to_pf1_queue(r, b, q, "fault-page-alloc") else {
        return;
    };
    b.dp.set_programs([Program::Drop, Program::Pass]);
    run_until(b, WAIT_NS, |b| b.dp.os.held() == 0);
    b.dp.os.hold = true;
    b.dp.tally.reset();
    let (available, ring_pages, before, spare) = match b.dp.pairs[1].get(q) {
        Some(p) => (
            p.pool.available() as u32,
            p.rx.pages_in_ring(),
            *p.rx.stats(),
            p.rx.has_spare(),
        ),
        None => return,
    };
    let drops = if spare { 1 } else { 2 };
    let pool_before = b.dp.pairs[1][q].pool.stats();
    let failures_before = b.model.with(|c| c.dma_stats().page_alloc_failures);
    b.model
        .with(|c| c.faults().fail_next_page_allocs(PAGE_ALLOC_REFUSALS));
    let n = available + 8;
    let seen_before = seen(b, q);
    let mut sent = 0;
    while sent < n {
        let chunk = (n - sent).min(32);
        for _ in 0..chunk {
            inject_tracked(b, 1, flow, 200);
        }
        sent += chunk;
        let target = seen_before + u64::from(sent);
        run_until(b, WAIT_NS, |b| seen(b, q) >= target);
    }
    b.model.with(|c| c.faults().clear());
    let p = &b.dp.pairs[1][q];
    let s = *p.rx.stats();
    let pool = p.pool.stats();
    let census = census_holds(b);
    let ring_kept = p.rx.pages_in_ring() == ring_pages;
    let held = b.dp.os.held();
    let failures = b.model.with(|c| c.dma_stats().page_alloc_failures) - failures_before;
    b.dp.os.hold = false;
    run_until(b, WAIT_NS, |b| b.dp.os.held() == 0);
    let no_page = s.rx_no_page - before.rx_no_page;
    let delivered = s.rx_packets - before.rx_packets;
    r.check(
        "fault-page-alloc",
        no_page == drops
            && failures == u64::from(PAGE_ALLOC_REFUSALS)
            && pool.hal_alloc_failures - pool_before.hal_alloc_failures == u64::from(PAGE_ALLOC_REFUSALS)
            && delivered == u64::from(n) - drops
            && held as u64 == delivered
            && ring_kept
            && census
            && b.dp.tally.corrupt == 0,
        format_args!(
            "fail_next_page_allocs({PAGE_ALLOC_REFUSALS}) once the pool ({available} pages) ran dry, spare at hand {spare}: \
             {no_page} frames dropped as rx_no_page (expected {drops}), {delivered}/{n} delivered, the \
             ring kept its {ring_pages} pages, census exact"
        ),
    );
}

/// A corrupted completion is a counted drop; the next frame arrives intact.
fn completion(r: &mut Runner, b: &mut Bench<'_, '_>, how: Corruption, name: &'static str) {
    let q = 1;
    let Some(flow) = flow_to_pf1_queue(r, b, q, name) else {
        return;
    };
    b.dp.set_programs([Program::Drop, Program::Drop]);
    b.dp.tally.reset();
    let before = rx_stats(b)[1][q];
    b.model.with(|c| c.faults().corrupt_next_completions(1, how));
    inject_tracked(b, 1, flow, 100);
    inject_tracked(b, 1, flow, 100);
    let target = before.rx_packets + before.rx_dropped() + 2;
    let done = run_until(b, WAIT_NS, |b| b.dp.tally.received == 1 && seen(b, q) >= target);
    b.model.with(|c| c.faults().clear());
    let after = rx_stats(b)[1][q];
    let (errors, lengths) = (
        after.rx_cmpt_errors - before.rx_cmpt_errors,
        after.rx_bad_length - before.rx_bad_length,
    );
    let counted = match how {
        Corruption::ErrBit => errors == 1 && lengths == 0,
        _ => lengths == 1 && errors == 0,
    };
    r.check(
        name,
        done && counted && b.dp.tally.corrupt == 0 && census_holds(b),
        format_args!(
            "corrupt_next_completions(1, {how:?}): PF1 queue {q} counted rx_cmpt_errors +{errors}, \
             rx_bad_length +{lengths}; the next frame arrived intact"
        ),
    );
}

/// The H2C status writeback is withheld: the device still sends, but the driver cannot know, so
/// the TX ring fills, the queue stops and the OS keeps the rest of its frames. Once the
/// writeback comes, a reclaim wakes the queue, the OS sends the rest, and every frame arrives.
fn h2c_stall(r: &mut Runner, b: &mut Bench<'_, '_>) {
    let q = 1;
    b.dp.set_programs([Program::Drop, Program::Drop]);
    b.dp.tally.reset();
    let tx_before = match b.dp.pairs[0].get(q) {
        Some(p) => *p.tx.stats(),
        None => return,
    };
    let done_before = b.dp.books[0][q].tx_os_done;
    let wire_before = b.dp.wire.out[0];
    b.model.with(|c| c.faults().stall_h2c_writeback(true));
    let (queued, backlog) = fill_stalled(b, q);
    datapath::flush(b, 0, q);
    // The device sends what was queued, but no writeback tells the driver: the frames arrive,
    // and the housekeeping rounds that follow reclaim nothing.
    let rounds = b.dp.hk_rounds + 3;
    run_until(b, WAIT_NS, |b| {
        b.dp.tally.received == 62 && b.dp.hk_rounds >= rounds
    });
    let (stopped, in_flight) = b.dp.pairs[0]
        .get(q)
        .map_or((false, 0), |p| (p.tx.is_stopped(), p.tx.in_flight()));
    let sent_while_stuck = b.dp.wire.out[0] - wire_before;
    let arrived_while_stuck = b.dp.tally.received;
    let held_back = backlog.len();
    b.model.with(|c| c.faults().stall_h2c_writeback(false));
    let woke = run_until(b, WAIT_NS, |b| {
        b.dp.pairs[0].get(q).is_some_and(|p| !p.tx.is_stopped())
    });
    let resent = resend(b, q, backlog);
    datapath::flush(b, 0, q);
    let settled = datapath::settle(b);
    let tx = b.dp.pairs[0].get(q).map_or(tx_before, |p| *p.tx.stats());
    let completed = b.dp.books[0][q].tx_os_done - done_before;
    let t = &b.dp.tally;
    r.check(
        "fault-h2c-writeback-stall",
        queued == 62
            && stopped
            && in_flight == 62
            && sent_while_stuck == 62
            && arrived_while_stuck == 62
            && held_back == (STALL_FRAMES - 62) as usize
            && woke
            && resent == held_back
            && settled
            && t.received == STALL_FRAMES
            && t.corrupt == 0
            && completed == u64::from(STALL_FRAMES)
            && tx.stops > tx_before.stops
            && tx.wakes > tx_before.wakes
            && b.dp.os_tx_live == 0,
        format_args!(
            "stall_h2c_writeback: {queued} queued, then the ring was full and the queue stopped ({in_flight} \
             in flight; {sent_while_stuck} sent and {arrived_while_stuck} received meanwhile); released, a \
             reclaim woke it, the OS sent its {held_back} held frames: {}/{STALL_FRAMES} arrived, {completed} \
             completed, stops +{} wakes +{}",
            t.received,
            tx.stops - tx_before.stops,
            tx.wakes - tx_before.wakes
        ),
    );
}

/// What the OS holds back for a stopped queue (its qdisc).
type Backlog<'c> = HVec<Frame<'c>, { STALL_FRAMES as usize }>;

/// The OS queues [`STALL_FRAMES`] frames on PF0's TX queue `q` until it stops; it keeps what the
/// queue refused. Returns how many were queued, and the frames kept.
fn fill_stalled<'c>(b: &mut Bench<'c, '_>, q: usize) -> (u32, Backlog<'c>) {
    let mut backlog: Backlog<'c> = HVec::new();
    let mut queued = 0;
    for i in 0..STALL_FRAMES {
        let mut buf = [0u8; super::frames::MAX_BUILD];
        let len = 60 + (i as usize * 29) % 450;
        let Some(n) = b.dp.tally.add(i * 11, len, 1, &b.dp.steer[1], &mut buf) else {
            break;
        };
        let Some(frame) = os_frame(b.model.dma(), &buf[..n]) else {
            break;
        };
        b.dp.os_tx_live += 1;
        let refused = match (b.devices[0].as_ref(), b.dp.pairs[0].get_mut(q)) {
            (Some(dev), Some(p)) if backlog.is_empty() => p.tx.xmit_os(&dev.doorbells(), frame, true).err(),
            _ => Some(TxError::Full(frame)),
        };
        match refused {
            None => queued += 1,
            // The OS keeps what the stopped queue refused (its qdisc).
            Some(e) => {
                let _ = backlog.push(e.into_inner());
            }
        }
    }
    (queued, backlog)
}

/// The OS sends the frames it kept, waiting whenever the queue stops again; returns how many the
/// queue took (the rest are freed).
fn resend<'c>(b: &mut Bench<'c, '_>, q: usize, backlog: Backlog<'c>) -> usize {
    let mut resent = 0;
    let total_backlog = backlog.len();
    for (i, frame) in backlog.into_iter().enumerate() {
        let more = i + 1 < total_backlog;
        // A queue that stops again is waited for (the tick's reclaim wakes it).
        if b.dp.pairs[0].get(q).is_some_and(|p| p.tx.is_stopped()) {
            datapath::flush(b, 0, q);
            run_until(b, WAIT_NS, |b| {
                b.dp.pairs[0].get(q).is_some_and(|p| !p.tx.is_stopped())
            });
        }
        let res = match (b.devices[0].as_ref(), b.dp.pairs[0].get_mut(q)) {
            (Some(dev), Some(p)) => {
                p.tx.xmit_os(&dev.doorbells(), frame, more)
                    .map_err(TxError::into_inner)
            }
            _ => Err(frame),
        };
        match res {
            Ok(()) => resent += 1,
            Err(frame) => datapath::free_os_frame(b, frame),
        }
    }
    resent
}

/// XDP_TX onto a TX ring the device does not report progress on: once the ring is full, the
/// frames are counted as rx_xdp_tx_errors and their pages recycled, not leaked.
fn xdp_tx_full(r: &mut Runner, b: &mut Bench<'_, '_>) {
    let q = 2;
    let Some(flow) = flow_to_pf1_queue(r, b, q, "xdp-tx-ring-full") else {
        return;
    };
    b.dp.set_programs([Program::Drop, Program::Reflect]);
    b.dp.tally.reset();
    let Some(before) = b.dp.pairs[1].get(q).map(|p| *p.stats()) else {
        return;
    };
    let wire_before = b.dp.wire.swapped[1];
    b.model.with(|c| c.faults().stall_h2c_writeback(true));
    for _ in 0..XDP_FULL_FRAMES {
        inject_tracked(b, 1, flow, 90);
    }
    run_until(b, WAIT_NS, |b| b.dp.tally.received == XDP_FULL_FRAMES);
    let in_flight = b.dp.pairs[1].get(q).map_or(0, |p| p.tx.pool_pages_in_flight());
    let census_stuck = census_holds(b);
    b.model.with(|c| c.faults().stall_h2c_writeback(false));
    let settled = run_until(b, WAIT_NS, |b| {
        b.dp.tally.returned == 62 && b.dp.tx_in_flight() == 0
    });
    let Some(after) = b.dp.pairs[1].get(q).map(|p| *p.stats()) else {
        return;
    };
    let (tx, errors) = (
        after.rx_xdp_tx - before.rx_xdp_tx,
        after.rx_xdp_tx_errors - before.rx_xdp_tx_errors,
    );
    let left = b.dp.wire.swapped[1] - wire_before;
    r.check(
        "xdp-tx-ring-full",
        tx == u64::from(XDP_FULL_FRAMES)
            && errors == u64::from(XDP_FULL_FRAMES) - 62
            && in_flight == 62
            && census_stuck
            && settled
            && left == 62
            && b.dp.tally.corrupt == 0
            && census_holds(b),
        format_args!(
            "{XDP_FULL_FRAMES} frames reflected on a stuck ring: rx_xdp_tx +{tx}, rx_xdp_tx_errors +{errors} \
             (pages recycled), {in_flight} pages in TX flight in the census; released, {left} left port 1"
        ),
    );
}

/// Frames lost on the wire never arrive; a bad FCS is counted by the MAC and goes no further.
fn wire(r: &mut Runner, b: &mut Bench<'_, '_>) {
    b.dp.set_programs([Program::Drop, Program::Drop]);
    let lost = through_fault(
        b,
        (1, 2),
        (5, 128),
        2,
        |c| c.faults().drop_next_frames(3),
        |b| b.model.with(|c| c.stats().wire_dropped),
    );
    r.check(
        "fault-wire-drop",
        b.dp.tally.received == 2 && lost == 3,
        format_args!(
            "drop_next_frames(3) of 5: {} received, {lost} lost on the wire",
            b.dp.tally.received
        ),
    );
    let fcs = through_fault(
        b,
        (0, 1),
        (2, 300),
        1,
        |c| c.faults().bad_fcs_next_frames(1),
        |b| counter(&read_hw_counters(&b.model.shell(), 0), "stat_rx_bad_fcs"),
    );
    r.check(
        "fault-bad-fcs",
        b.dp.tally.received == 1 && fcs == 1,
        format_args!(
            "bad_fcs_next_frames(1) of 2: {} received, stat_rx_bad_fcs +{fcs}",
            b.dp.tally.received
        ),
    );
}

/// With the fault `arm` sets, `frames.0` tracked frames of `frames.1` bytes come in on port
/// `to.0` (a flow its function steers to queue `to.1`); the loop runs until `arrive` of them
/// arrived and 5 ms more, then the fault is cleared. Returns how far `count` moved meanwhile.
fn through_fault(
    b: &mut Bench<'_, '_>,
    to: (u8, usize),
    frames: (u32, usize),
    arrive: u32,
    arm: impl FnOnce(&Card),
    count: impl Fn(&Bench<'_, '_>) -> u64,
) -> u64 {
    let (port, q) = to;
    let before = count(b);
    b.model.with(arm);
    b.dp.tally.reset();
    let flow = flow_for_queue(&b.dp.steer[usize::from(port)], q, 0).unwrap_or(0);
    for _ in 0..frames.0 {
        inject_tracked(b, port, flow, frames.1);
    }
    run_until(b, WAIT_NS, |b| b.dp.tally.received == arrive);
    run_for(b, 5_000_000);
    let moved = count(b) - before;
    b.model.with(|c| c.faults().clear());
    moved
}

/// The fault checks that run on the ports ([`super::portbench`]): a completion status whose
/// producer index jumps stops one queue, which is then restarted through the port.
pub fn run_on_ports(r: &mut Runner, b: Option<&mut PortBench<'_, '_>>) {
    r.group("faults on the ports (a queue stopped by its completion status, restarted)");
    let Some(b) = b else {
        r.skipped("faults-on-ports", "the ports did not come up");
        return;
    };
    let drop = b.attach(Code::Native(Program::Drop));
    b.progs = [Some(drop), Some(drop)];
    // Last-but-one: it leaves one RX queue stopped, which `restart` then brings back.
    pidx_jump(r, b);
    restart(r, b);
}

/// A flow port 1's current steering sends to its queue `q`.
fn flow_to(b: &PortBench<'_, '_>, q: usize) -> Option<u32> {
    flow_for_queue(&b.shared.borrow().steer[1], q, 0)
}

/// Port 1's queue index `q`'s RX queue as the core keeps it: its error and counters.
fn rx_state(b: &mut PortBench<'_, '_>, q: u16) -> Option<(Option<QueueError>, onic_core::RxStats, u16)> {
    b.ports[1]
        .inspect(q)
        .map(|v| (v.pair.rx.error(), *v.pair.rx.stats(), v.pair.rx.posted()))
}

/// A completion status record whose producer index lies beyond the ring: the queue reports its
/// error state, touches nothing more (no completion read, no doorbell), the other queues go on, and
/// the census still holds.
fn pidx_jump(r: &mut Runner, b: &mut PortBench<'_, '_>) {
    let q = 3;
    let (Some(flow), Some(other)) = (flow_to(b, q), flow_to(b, 0)) else {
        r.check(
            "fault-status-pidx-jump",
            false,
            format_args!("no flow reaches PF1 queue {q}"),
        );
        return;
    };
    b.shared.borrow_mut().tally.reset();
    b.model.with(|c| c.faults().cmpt_status_pidx_jump());
    portbench::inject_tracked(b, 1, flow, 80);
    let stopped = portbench::run_until(b, WAIT_NS, |b| b.books[1][q].error.is_some());
    let error = b.books[1][q].error;
    let Some((_, before, _)) = rx_state(b, q as u16) else {
        return;
    };
    let polls = b.books[1][q].polls;
    let usable = onic_core::RingSizeIdx::new(datapath::RX_RING).map_or(0, |r| r.usable());
    // More frames: to the stopped queue (the device may still write them into posted buffers, the
    // driver reads nothing) and to a healthy one.
    for _ in 0..3 {
        portbench::inject_tracked(b, 1, flow, 80);
        portbench::inject_tracked(b, 1, other, 80);
    }
    let healthy = portbench::run_until(b, WAIT_NS, |b| b.shared.borrow().tally.per_queue[1][0] == 3);
    portbench::run_until(b, 5_000_000, |_| false);
    let still = rx_state(b, q as u16).is_some_and(|(e, s, _)| e == error && s == before);
    let violations = b.model.with(|c| c.violations().len());
    let expected = Some(QueueError::CmptPidxOutOfRange {
        pidx: usable + 7,
        usable,
    });
    r.check(
        "fault-status-pidx-jump",
        stopped
            && error == expected
            && still
            && b.books[1][q].polls == polls
            && healthy
            && violations == 0
            && portbench::census_holds(b),
        format_args!(
            "cmpt_status_pidx_jump: PF1 queue {q} reported \"{}\" and stopped (no completion read or \
             doorbell since); queue 0 kept delivering; no model violation; census exact",
            Shown(error)
        ),
    );
}

/// The stopped queue of [`pidx_jump`] is restarted in place through the port
/// (`SoloPort::restart_queue`) while the model host refuses the first page its pool asks for
/// (`ModelHost::refuse_page_allocs(1)`): the RX ring starts empty (`refill_alloc_failures`), no
/// interrupt can come for it, and the tick's housekeeping schedules the poll that refills it.
/// Then traffic flows again.
fn restart(r: &mut Runner, b: &mut PortBench<'_, '_>) {
    let name = "fault-refill";
    let q = PAIRS - 1;
    let usable = onic_core::RingSizeIdx::new(datapath::RX_RING).map_or(0, |r| r.usable());
    // Nothing of the old rings may be out: no frame in TX flight.
    portbench::run_until(b, WAIT_NS, |b| b.tx_in_flight() == 0);
    b.host.for_port(1).refuse_page_allocs(1);
    let restarted = portbench::restart_queue(b, 1, q);
    b.host.for_port(1).refuse_page_allocs(0);
    if let Err(e) = restarted {
        r.check(
            name,
            false,
            format_args!("PF1 queue {q} could not be restarted: {e}"),
        );
        return;
    }
    let (posted0, failures) =
        rx_state(b, q as u16).map_or((u16::MAX, 0), |(_, s, p)| (p, s.refill_alloc_failures));
    let polls_before = b.books[1][q].refill_polls;
    let refilled = portbench::run_until(b, WAIT_NS, |b| {
        rx_state(b, q as u16).is_some_and(|(_, _, posted)| posted == usable - 1)
    });
    let refill_polls = b.books[1][q].refill_polls - polls_before;
    b.shared.borrow_mut().tally.reset();
    let mut sent = 0;
    if let Some(flow) = flow_to(b, q) {
        for _ in 0..16 {
            sent += u32::from(portbench::inject_tracked(b, 1, flow, 120));
        }
    }
    let delivered =
        portbench::run_until(b, WAIT_NS, |b| b.shared.borrow().tally.per_queue[1][q] == sent) && sent == 16;
    let corrupt = b.shared.borrow().tally.corrupt;
    r.check(
        name,
        posted0 == 0
            && failures == 1
            && refilled
            && refill_polls > 0
            && delivered
            && corrupt == 0
            && portbench::census_holds(b),
        format_args!(
            "PF1 queue {q} restarted through the port with refuse_page_allocs(1): {posted0} buffers \
             posted, refill_alloc_failures {failures}; {refill_polls} housekeeping poll(s) refilled the ring \
             to {} buffers; 16/16 frames delivered after",
            usable - 1
        ),
    );
}

/// A queue error for a check line.
struct Shown(Option<QueueError>);

impl core::fmt::Display for Shown {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            Some(e) => write!(f, "{e}"),
            None => f.write_str("no error"),
        }
    }
}
