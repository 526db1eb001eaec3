//! The model's fault knobs against the driver's datapath: what each costs, which counter says so,
//! and that nothing is lost, leaked or touched out of bounds.

use alloc::vec::Vec;

use onic_core::stats::read_hw_counters;
use onic_core::QueueError;
use onic_embed::port::XmitResult;
use onic_sim::{Card, Corruption};

use super::datapath::{self, flow_for_queue, flow_to_pf1_queue, inject_tracked, run_until, PAIRS, WAIT_NS};
use super::portbench::{self, rx_stats, PortBench};
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
    r.group("faults on bare pairs (the pools' HAL allocation failures)");
    if !datapath::ready(r, b, "faults") {
        return;
    }
    page_alloc(r, b);
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
fn completion(r: &mut Runner, b: &mut PortBench<'_, '_>, how: Corruption, name: &'static str) {
    let q = 1;
    let Some(flow) = flow_to(b, q) else {
        r.check(name, false, format_args!("no flow reaches PF1 queue {q}"));
        return;
    };
    b.shared.borrow_mut().tally.reset();
    let before = rx_stats(b)[1][q];
    b.model.with(|c| c.faults().corrupt_next_completions(1, how));
    portbench::inject_tracked(b, 1, flow, 100);
    portbench::inject_tracked(b, 1, flow, 100);
    let target = before.rx_packets + before.rx_dropped() + 2;
    let done = portbench::run_until(b, WAIT_NS, |b| {
        let s = rx_stats(b)[1][q];
        b.shared.borrow().tally.received == 1 && s.rx_packets + s.rx_dropped() >= target
    });
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
    let corrupt = b.shared.borrow().tally.corrupt;
    r.check(
        name,
        done && counted && corrupt == 0 && portbench::census_holds(b),
        format_args!(
            "corrupt_next_completions(1, {how:?}): PF1 queue {q} counted rx_cmpt_errors +{errors}, \
             rx_bad_length +{lengths}; the next frame arrived intact"
        ),
    );
}

/// Port 0's stack TX ring `q` as the core keeps it: stopped, frames in flight.
fn stack_state(b: &mut PortBench<'_, '_>, q: u16) -> Option<(bool, u16)> {
    b.ports[0]
        .inspect(q)
        .map(|v| (v.stack.is_stopped(), v.stack.in_flight()))
}

/// The TX counters of port 0's queue index `q` (its stack TX ring: nothing else of the index
/// transmits here).
fn tx_of(b: &PortBench<'_, '_>, q: u16) -> onic_core::TxStats {
    b.ports[0]
        .port()
        .queue_counters(q)
        .map(|c| c.tx)
        .unwrap_or_default()
}

/// The H2C status writeback is withheld: the device still sends, but the driver cannot know, so
/// the stack's TX ring fills, the queue stops and the stack keeps the rest of its frames. Once
/// the writeback comes, a reclaim wakes the queue, the stack sends the rest, and every frame
/// arrives.
fn h2c_stall(r: &mut Runner, b: &mut PortBench<'_, '_>) {
    let q = 1;
    b.shared.borrow_mut().tally.reset();
    let tx_before = tx_of(b, q);
    let done_before = b.books[0][usize::from(q)].tx_done;
    let wire_before = b.wire.out[0];
    b.model.with(|c| c.faults().stall_h2c_writeback(true));
    let (queued, backlog) = fill_stalled(b, q);
    portbench::flush(b, 0);
    // The device sends what was queued, but no writeback tells the driver: the frames arrive,
    // and the housekeeping rounds that follow reclaim nothing.
    let rounds = b.hk_rounds + 3;
    portbench::run_until(b, WAIT_NS, |b| {
        b.shared.borrow().tally.received == 62 && b.hk_rounds >= rounds
    });
    let (stopped, in_flight) = stack_state(b, q).unwrap_or((false, 0));
    let sent_while_stuck = b.wire.out[0] - wire_before;
    let arrived_while_stuck = b.shared.borrow().tally.received;
    let held_back = backlog.len();
    b.model.with(|c| c.faults().stall_h2c_writeback(false));
    let woke = portbench::run_until(b, WAIT_NS, |b| stack_state(b, q).is_some_and(|(s, _)| !s));
    let resent = resend(b, q, backlog);
    portbench::flush(b, 0);
    let settled = portbench::settle(b, 0);
    let tx = tx_of(b, q);
    let completed = b.books[0][usize::from(q)].tx_done - done_before;
    let left = b.host.census().packets;
    let s = b.shared.borrow();
    let t = &s.tally;
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
            && left == 0,
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

/// The stack queues [`STALL_FRAMES`] frames on port 0's TX ring `q` until it stops; it keeps
/// what the ring did not take (its qdisc). Returns how many were queued, and the packets kept.
fn fill_stalled(b: &mut PortBench<'_, '_>, q: u16) -> (u32, Vec<u32>) {
    let mut backlog = Vec::new();
    let mut queued = 0;
    for i in 0..STALL_FRAMES {
        let mut buf = [0u8; super::frames::MAX_BUILD];
        let len = 60 + (i as usize * 29) % 450;
        let n = {
            let mut s = b.shared.borrow_mut();
            let portbench::Shared { tally, steer } = &mut *s;
            tally.add(i * 11, len, 1, &steer[1], &mut buf)
        };
        let Some(skb) = n.and_then(|n| b.host.packet(&buf[..n])) else {
            break;
        };
        if !backlog.is_empty() {
            backlog.push(skb);
            continue;
        }
        match portbench::xmit(b, 0, q, skb) {
            XmitResult::Ok | XmitResult::OkStop => queued += 1,
            // The stack keeps what the stopped ring refused.
            XmitResult::Busy | XmitResult::Dropped => backlog.push(skb),
        }
    }
    (queued, backlog)
}

/// The stack sends the packets it kept, waiting whenever the ring stops again; returns how many
/// the ring took (the rest are freed).
fn resend(b: &mut PortBench<'_, '_>, q: u16, backlog: Vec<u32>) -> usize {
    let mut resent = 0;
    for skb in backlog {
        // A ring that stops again is waited for (the tick's reclaim wakes it).
        if stack_state(b, q).is_some_and(|(s, _)| s) {
            portbench::flush(b, 0);
            portbench::run_until(b, WAIT_NS, |b| stack_state(b, q).is_some_and(|(s, _)| !s));
        }
        match portbench::xmit(b, 0, q, skb) {
            XmitResult::Ok | XmitResult::OkStop => resent += 1,
            XmitResult::Busy | XmitResult::Dropped => onic_embed::port::Host::skb_done(&b.host, skb, None),
        }
    }
    resent
}

/// XDP_TX onto a TX ring the device does not report progress on: once the ring is full, the
/// frames are counted as rx_xdp_tx_errors and their pages recycled, not leaked.
fn xdp_tx_full(r: &mut Runner, b: &mut PortBench<'_, '_>, reflect: u16) {
    let q = 2;
    let Some(flow) = flow_to(b, q) else {
        r.check(
            "xdp-tx-ring-full",
            false,
            format_args!("no flow reaches PF1 queue {q}"),
        );
        return;
    };
    let drop = b.progs[0];
    b.progs[1] = Some(reflect);
    b.shared.borrow_mut().tally.reset();
    let pair = |b: &PortBench<'_, '_>| b.ports[1].port().queue_counters(q as u16).map(|c| c.pair);
    let Some(before) = pair(b) else {
        return;
    };
    let wire_before = b.wire.swapped[1];
    b.model.with(|c| c.faults().stall_h2c_writeback(true));
    for _ in 0..XDP_FULL_FRAMES {
        portbench::inject_tracked(b, 1, flow, 90);
    }
    portbench::run_until(b, WAIT_NS, |b| {
        b.shared.borrow().tally.received == XDP_FULL_FRAMES
    });
    let in_flight = b.ports[1]
        .inspect(q as u16)
        .map_or(0, |v| v.pair.tx.pool_pages_in_flight());
    let census_stuck = portbench::census_holds(b);
    b.model.with(|c| c.faults().stall_h2c_writeback(false));
    let settled = portbench::run_until(b, WAIT_NS, |b| {
        b.shared.borrow().tally.returned == 62 && b.tx_in_flight() == 0
    });
    b.progs[1] = drop;
    let Some(after) = pair(b) else {
        return;
    };
    let (tx, errors) = (
        after.rx_xdp_tx - before.rx_xdp_tx,
        after.rx_xdp_tx_errors - before.rx_xdp_tx_errors,
    );
    let left = b.wire.swapped[1] - wire_before;
    let corrupt = b.shared.borrow().tally.corrupt;
    r.check(
        "xdp-tx-ring-full",
        tx == u64::from(XDP_FULL_FRAMES)
            && errors == u64::from(XDP_FULL_FRAMES) - 62
            && in_flight == 62
            && census_stuck
            && settled
            && left == 62
            && corrupt == 0
            && portbench::census_holds(b),
        format_args!(
            "{XDP_FULL_FRAMES} frames reflected on a stuck ring: rx_xdp_tx +{tx}, rx_xdp_tx_errors +{errors} \
             (pages recycled), {in_flight} pages in TX flight in the census; released, {left} left port 1"
        ),
    );
}

/// Frames lost on the wire never arrive; a bad FCS is counted by the MAC and goes no further.
fn wire(r: &mut Runner, b: &mut PortBench<'_, '_>) {
    let lost = through_fault(
        b,
        (1, 2),
        (5, 128),
        2,
        |c| c.faults().drop_next_frames(3),
        |b| b.model.with(|c| c.stats().wire_dropped),
    );
    let received = b.shared.borrow().tally.received;
    r.check(
        "fault-wire-drop",
        received == 2 && lost == 3,
        format_args!("drop_next_frames(3) of 5: {received} received, {lost} lost on the wire"),
    );
    let fcs = through_fault(
        b,
        (0, 1),
        (2, 300),
        1,
        |c| c.faults().bad_fcs_next_frames(1),
        |b| counter(&read_hw_counters(&b.model.shell(), 0), "stat_rx_bad_fcs"),
    );
    let received = b.shared.borrow().tally.received;
    r.check(
        "fault-bad-fcs",
        received == 1 && fcs == 1,
        format_args!("bad_fcs_next_frames(1) of 2: {received} received, stat_rx_bad_fcs +{fcs}"),
    );
}

/// With the fault `arm` sets, `frames.0` tracked frames of `frames.1` bytes come in on port
/// `to.0` (a flow its function steers to queue `to.1`); the loop runs until `arrive` of them
/// arrived and 5 ms more, then the fault is cleared. Returns how far `count` moved meanwhile.
fn through_fault(
    b: &mut PortBench<'_, '_>,
    to: (u8, usize),
    frames: (u32, usize),
    arrive: u32,
    arm: impl FnOnce(&Card),
    count: impl Fn(&PortBench<'_, '_>) -> u64,
) -> u64 {
    let (port, q) = to;
    let before = count(b);
    b.model.with(arm);
    b.shared.borrow_mut().tally.reset();
    let flow = flow_for_queue(&b.shared.borrow().steer[usize::from(port)], q, 0).unwrap_or(0);
    for _ in 0..frames.0 {
        portbench::inject_tracked(b, port, flow, frames.1);
    }
    portbench::run_until(b, WAIT_NS, |b| b.shared.borrow().tally.received == arrive);
    portbench::run_until(b, 5_000_000, |_| false);
    let moved = count(b) - before;
    b.model.with(|c| c.faults().clear());
    moved
}

/// The fault checks that run on the ports ([`super::portbench`]): a completion status whose
/// producer index jumps stops one queue, which is then restarted through the port.
pub fn run_on_ports(r: &mut Runner, b: Option<&mut PortBench<'_, '_>>) {
    r.group("faults on the ports (the model's knobs against the datapath)");
    let Some(b) = b else {
        r.skipped("faults-on-ports", "the ports did not come up");
        return;
    };
    let drop = b.attach(Code::Native(Program::Drop));
    let reflect = b.attach(Code::Native(Program::Reflect));
    b.progs = [Some(drop), Some(drop)];
    completion(r, b, Corruption::ErrBit, "fault-completion-error");
    completion(r, b, Corruption::LengthZero, "fault-completion-length");
    h2c_stall(r, b);
    xdp_tx_full(r, b, reflect);
    wire(r, b);
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
