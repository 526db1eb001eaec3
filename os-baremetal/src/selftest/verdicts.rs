//! XDP programs (see [`super::xdp`]): PF0 sends, PF1's program decides, and the counters of the
//! core (`RxStats`, `PairStats`'s `rx_xdp_*`, the pools' statistics) and of the image (TX
//! completions, the wire) must say what happened.
//!
//! On the ports ([`run_on_ports`], [`super::portbench`]): XDP_DROP, XDP_TX, then port 1's
//! program swapped and detached between polls while frames arrive. On the bare pairs
//! ([`run`], `QueuePair::poll`): the two verdicts whose checks show pieces of the core a port
//! does not use, XDP_PASS with half the OS's pages going home through their pool's
//! `RecycleRing`, and XDP_REDIRECT through a `DevMap` of `TxTarget`s on the other function's TX
//! queues.

use onic_core::stats::PairStats;
use onic_core::stats::PoolStats;
use onic_core::RxStats;

use super::datapath::{self, run_until, Book, WAIT_NS};
use super::portbench::{self, PortBench};
use super::xdp::{Code, Program};
use super::{Bench, Runner};
use crate::irq::FUNCTIONS;

/// Frames per verdict.
pub(super) const FRAMES: u32 = 48;
/// Frames the swap check lets arrive before it swaps PF1's program.
const SWAP_AFTER: u32 = 16;

/// Sums of one PF's counters.
#[derive(Clone, Copy, Default)]
struct Sums {
    rx: RxStats,
    pair: PairStats,
    pool: PoolStats,
    tx_remote_done: u64,
}

fn sums(b: &Bench<'_, '_>, func: usize) -> Sums {
    let mut s = Sums::default();
    for (f, q, p) in b.dp.each() {
        if usize::from(f) != func {
            continue;
        }
        s.rx += *p.rx.stats();
        s.pair += *p.stats();
        s.pool += p.pool.stats();
        let book: &Book = &b.dp.books[func][q];
        s.tx_remote_done += book.tx_remote_done;
    }
    s
}

/// PF0 sends [`FRAMES`] small frames (they fit every buffer) with a fresh tally, the flows
/// numbered from `seed`. Returns whether every chunk settled.
fn send_round(b: &mut Bench<'_, '_>, seed: u32) -> bool {
    b.dp.tally.reset();
    datapath::spread(b, 0, FRAMES, |i| (seed + i, 60 + (i as usize * 53) % 440))
}

/// PF0 sends [`FRAMES`] small frames (they fit every buffer) under `programs`; the loop runs
/// until they arrived, `returned` came back and nothing is in flight. Returns whether it did.
fn phase(b: &mut Bench<'_, '_>, programs: [Program; FUNCTIONS], seed: u32, returned: u32) -> bool {
    b.dp.set_programs(programs);
    send_round(b, seed)
        && run_until(b, WAIT_NS, |b| {
            b.dp.tally.returned >= returned && b.dp.tally.outstanding() == 0 && b.dp.tx_in_flight() == 0
        })
}

/// Every pair's page census adds up (each pool's pages are in its cache or ring, an RX slot, TX
/// flight or with the OS, and nowhere else).
pub fn census_holds(b: &Bench<'_, '_>) -> bool {
    b.dp.each().all(|(_, _, p)| {
        p.page_counts()
            .is_some_and(|c| c.total() == p.pool.stats().live_pages())
    })
}

pub fn run(r: &mut Runner, b: &mut Bench<'_, '_>) {
    r.group("XDP on bare pairs (QueuePair::poll: pass with returns through the recycle rings, redirect through a devmap)");
    if !datapath::ready(r, b, "xdp") {
        return;
    }
    xdp_pass(r, b);
    xdp_redirect(r, b);
    b.dp.set_programs([Program::Drop, Program::Pass]);
}

/// XDP_PASS: the OS holds the pages (the census counts them as with the OS), then gives them
/// back, half straight into the pools and half through their recycle rings.
fn xdp_pass(r: &mut Runner, b: &mut Bench<'_, '_>) {
    let n = u64::from(FRAMES);
    let before = sums(b, 1);
    run_until(b, WAIT_NS, |b| b.dp.os.held() == 0);
    let (direct0, ring0) = (b.dp.os.returned_direct, b.dp.os.returned_ring);
    b.dp.os.hold = true;
    let ok = phase(b, [Program::Drop, Program::Pass], 1000, 0);
    let held = b.dp.os.held();
    let with_os: u64 =
        b.dp.each()
            .filter_map(|(_, _, p)| p.page_counts())
            .map(|c| c.with_os)
            .sum();
    let census = census_holds(b);
    b.dp.os.hold = false;
    run_until(b, WAIT_NS, |b| b.dp.os.held() == 0);
    let after = sums(b, 1);
    let (direct, ring) = (b.dp.os.returned_direct - direct0, b.dp.os.returned_ring - ring0);
    r.check(
        "xdp-pass",
        ok && b.dp.tally.corrupt == 0
            && after.pair.rx_xdp_pass - before.pair.rx_xdp_pass == n
            && after.rx.to_os - before.rx.to_os == n
            && held as u64 == n
            && with_os == n
            && census
            && after.pool.os_returns - before.pool.os_returns == n
            && direct > 0
            && ring > 0,
        format_args!(
            "{n} frames to the OS (rx_xdp_pass +{}, RxStats to_os +{}), {with_os} pages counted with the OS while held, all \
             returned ({direct} into the pools, {ring} through their recycle rings; pool os_returns +{})",
            after.pair.rx_xdp_pass - before.pair.rx_xdp_pass,
            after.rx.to_os - before.rx.to_os,
            after.pool.os_returns - before.pool.os_returns
        ),
    );
}

/// Redirect: PF1's program names the devmap entry of its queue index, a TxTarget on PF0's TX
/// queue of that index; the frame leaves port 0, comes back over the cable to PF1 (passed this
/// time), and PF0's TX completion returns the page to its PF1 pool through return_to_origin.
fn xdp_redirect(r: &mut Runner, b: &mut Bench<'_, '_>) {
    let n = u64::from(FRAMES);
    let before = sums(b, 1);
    let before0 = sums(b, 0);
    let wire0 = b.dp.wire;
    let ok = phase(b, [Program::Drop, Program::Redirect], 4000, FRAMES);
    run_until(b, WAIT_NS, |b| b.dp.os.held() == 0);
    let after = sums(b, 1);
    let after0 = sums(b, 0);
    let left = b.dp.wire.swapped[0] - wire0.swapped[0];
    let t = &b.dp.tally;
    let ring_in = after.pool.recycle.ring - before.pool.recycle.ring;
    r.check(
        "xdp-redirect",
        ok && after.pair.rx_xdp_redirect - before.pair.rx_xdp_redirect == n
            && after.pair.rx_xdp_redirect_errors == before.pair.rx_xdp_redirect_errors
            && after.pair.rx_xdp_aborted == before.pair.rx_xdp_aborted
            && after0.tx_remote_done - before0.tx_remote_done == n
            && left == n
            && t.returned_to[1] == FRAMES
            && t.corrupt == 0
            && t.misrouted == 0
            && ring_in >= n
            && census_holds(b),
        format_args!(
            "{n} frames redirected through the devmap to PF0's TX queues: rx_xdp_redirect +{}, PF0 remote completions +{}, {left} \
             left port 0 and came back to PF1 intact; {ring_in} pages came home through the recycle rings",
            after.pair.rx_xdp_redirect - before.pair.rx_xdp_redirect,
            after0.tx_remote_done - before0.tx_remote_done
        ),
    );
}

/// Sums of one port's counters: what the port publishes and its pools' statistics
/// (`Port::queue_snapshots`), and the pool pages its XDP_TX rings hold (`SoloPort::inspect`).
#[derive(Clone, Copy, Default)]
struct PortSums {
    rx: RxStats,
    pair: PairStats,
    pool: PoolStats,
    tx_packets: u64,
    pool_in_flight: u64,
    tx_parked: u64,
}

fn port_sums(b: &mut PortBench<'_, '_>, func: usize) -> PortSums {
    let mut s = PortSums::default();
    let Some(port) = b.ports.get_mut(func) else {
        return s;
    };
    for c in port.control(|p, c| p.queue_snapshots(c)).unwrap_or_default() {
        s.rx += c.rx;
        s.pair += c.pair;
        s.pool += c.pool;
        s.tx_packets += c.tx.tx_packets;
    }
    for v in port.inspect_all() {
        s.pool_in_flight += v.pair.tx.pool_pages_in_flight();
        s.tx_parked += v.pair.tx.pool_pages_parked();
    }
    s
}

/// Pages that went back into the pools' caches (or found them full).
fn port_cached(s: &PortSums) -> u64 {
    s.pool.recycle.cached + s.pool.recycle.cache_full
}

/// Port 0 sends [`FRAMES`] small frames (they fit every buffer) with a fresh tally, the flows
/// numbered from `seed`, under the programs attached; the loop runs until they arrived,
/// `returned` came back and nothing is in flight. Returns whether it did.
fn port_phase(b: &mut PortBench<'_, '_>, seed: u32, returned: u32) -> bool {
    b.shared.borrow_mut().tally.reset();
    portbench::spread(b, 0, FRAMES, returned, |i| {
        (seed + i, 60 + (i as usize * 53) % 440)
    })
}

/// The verdict checks that run on the ports ([`super::portbench`]): port 0 sends, port 1's
/// program decides in the port's poll.
pub fn run_on_ports(r: &mut Runner, b: Option<&mut PortBench<'_, '_>>) {
    r.group("XDP on the ports (the port's poll: drop, TX, swap, detach)");
    let Some(b) = b else {
        r.skipped("xdp", "the ports did not come up");
        return;
    };
    let progs = Progs {
        pass: b.attach(Code::Native(Program::Pass)),
        drop: b.attach(Code::Native(Program::Drop)),
        reflect: b.attach(Code::Native(Program::Reflect)),
    };
    xdp_drop(r, b, &progs);
    xdp_tx(r, b, &progs);
    swap(r, b, &progs);
    detach(r, b, &progs);
}

/// The handles of the programs this group attaches.
struct Progs {
    pass: u16,
    drop: u16,
    reflect: u16,
}

/// XDP_DROP: each page goes straight back to its pool's cache.
fn xdp_drop(r: &mut Runner, b: &mut PortBench<'_, '_>, p: &Progs) {
    let n = u64::from(FRAMES);
    b.progs = [Some(p.drop), Some(p.drop)];
    let before = port_sums(b, 1);
    let ok = port_phase(b, 2000, 0);
    let after = port_sums(b, 1);
    r.check(
        "xdp-drop",
        ok && after.pair.rx_xdp_drop - before.pair.rx_xdp_drop == n
            && after.rx.recycled - before.rx.recycled == n
            && after.rx.rx_packets - before.rx.rx_packets == n
            && port_cached(&after) - port_cached(&before) >= n,
        format_args!(
            "{n} frames dropped: rx_xdp_drop +{}, RxStats recycled +{}, pool recycle.cached +{}, alloc.fast +{}, {} pages \
             taken from the HAL meanwhile",
            after.pair.rx_xdp_drop - before.pair.rx_xdp_drop,
            after.rx.recycled - before.rx.recycled,
            after.pool.recycle.cached - before.pool.recycle.cached,
            after.pool.alloc.fast - before.pool.alloc.fast,
            after.pool.pages_from_hal - before.pool.pages_from_hal
        ),
    );
}

/// XDP_TX: port 1 sends each frame back out with its MAC addresses swapped; the cable brings it
/// to port 0, which passes it.
fn xdp_tx(r: &mut Runner, b: &mut PortBench<'_, '_>, p: &Progs) {
    let n = u64::from(FRAMES);
    b.progs = [Some(p.pass), Some(p.reflect)];
    let before = port_sums(b, 1);
    let wire0 = b.wire;
    let ok = port_phase(b, 3000, FRAMES);
    let after = port_sums(b, 1);
    let left = b.wire.swapped[1] - wire0.swapped[1];
    let s = b.shared.borrow();
    let t = &s.tally;
    r.check(
        "xdp-tx",
        ok && after.pair.rx_xdp_tx - before.pair.rx_xdp_tx == n
            && after.pair.rx_xdp_tx_errors == before.pair.rx_xdp_tx_errors
            && after.rx.to_tx - before.rx.to_tx == n
            && after.tx_packets - before.tx_packets == n
            && after.pool_in_flight == 0
            && left == n
            && t.returned_to[0] == FRAMES
            && t.corrupt == 0
            && t.misrouted == 0
            && port_cached(&after) + after.tx_parked >= port_cached(&before) + before.tx_parked + n,
        format_args!(
            "{n} frames reflected: rx_xdp_tx +{}, rx_xdp_tx_errors +{}, PF1 tx_packets +{}; {left} left port 1 \
             with swapped MACs and PF0 received {} of them intact; each page parked in its TX slot or, taken out \
             by a later frame, recycled (parked +{}, pool recycle.cached +{})",
            after.pair.rx_xdp_tx - before.pair.rx_xdp_tx,
            after.pair.rx_xdp_tx_errors - before.pair.rx_xdp_tx_errors,
            after.tx_packets - before.tx_packets,
            t.returned_to[0],
            after.tx_parked.wrapping_sub(before.tx_parked),
            port_cached(&after) - port_cached(&before)
        ),
    );
}

/// Port 1 runs XDP_PASS while port 0 sends; once [`SWAP_AFTER`] frames arrived, the next poll of
/// port 1 starts with XDP_DROP instead (the program a poll runs is chosen as it starts), with
/// the rest of the frames still in the rings. Every frame meets exactly one of the two
/// programs, none is lost, and no page is.
fn swap(r: &mut Runner, b: &mut PortBench<'_, '_>, p: &Progs) {
    let n = u64::from(FRAMES);
    b.progs = [Some(p.drop), Some(p.pass)];
    b.shared.borrow_mut().tally.reset();
    let before = port_sums(b, 1);
    b.swapped = None;
    b.pending_swap = Some((1, SWAP_AFTER, p.drop));
    let ok = portbench::spread(b, 0, FRAMES, 0, |i| (5000 + i, 60 + (i as usize * 37) % 400));
    let missed = b.pending_swap.take().is_some();
    let swaps = u32::from(b.swapped.is_some()) + u32::from(missed);
    let (at_swap, old) = b.swapped.unwrap_or((0, None));
    let after = port_sums(b, 1);
    let (pass, drop) = (
        after.pair.rx_xdp_pass - before.pair.rx_xdp_pass,
        after.pair.rx_xdp_drop - before.pair.rx_xdp_drop,
    );
    let census = portbench::census_holds(b);
    let s = b.shared.borrow();
    let t = &s.tally;
    r.check(
        "xdp-swap",
        ok && old == Some(p.pass)
            && swaps == 1
            && !missed
            && pass + drop == n
            && pass == u64::from(at_swap)
            && pass > 0
            && drop > 0
            && after.rx.rx_packets - before.rx.rx_packets == n
            && t.corrupt == 0
            && t.misrouted == 0
            && census,
        format_args!(
            "XDP_PASS swapped for XDP_DROP after {at_swap} of {n} frames, between polls: rx_xdp_pass +{pass}, \
             rx_xdp_drop +{drop}, every frame seen once, page census exact"
        ),
    );
}

/// With port 1's program detached (its polls run none), the port hands every frame to the
/// stack as it is: no program runs and no XDP counter moves. A program attached again takes
/// over at once.
fn detach(r: &mut Runner, b: &mut PortBench<'_, '_>, p: &Progs) {
    let n = u64::from(FRAMES);
    b.progs = [Some(p.drop), Some(p.drop)];
    let before = port_sums(b, 1);
    let detached = b.progs[1].take();
    let ok = port_phase(b, 6000, 0);
    let after = port_sums(b, 1);
    let xdp =
        |s: &PortSums| s.pair.rx_xdp_pass + s.pair.rx_xdp_drop + s.pair.rx_xdp_tx + s.pair.rx_xdp_redirect;
    let attached_again = b.progs[1].replace(p.drop).is_none();
    let before2 = port_sums(b, 1);
    let ok2 = port_phase(b, 7000, 0);
    let after2 = port_sums(b, 1);
    let corrupt = b.shared.borrow().tally.corrupt;
    r.check(
        "xdp-detach",
        ok && ok2
            && detached == Some(p.drop)
            && attached_again
            && xdp(&after) == xdp(&before)
            && after.rx.to_os - before.rx.to_os == n
            && after2.pair.rx_xdp_drop - before2.pair.rx_xdp_drop == n
            && corrupt == 0
            && portbench::census_holds(b),
        format_args!(
            "detached: {n} frames to the OS untouched (RxStats to_os +{}, XDP counters +{}); attached again: \
             rx_xdp_drop +{}",
            after.rx.to_os - before.rx.to_os,
            xdp(&after) - xdp(&before),
            after2.pair.rx_xdp_drop - before2.pair.rx_xdp_drop
        ),
    );
}
