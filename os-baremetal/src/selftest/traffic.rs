//! Traffic across the wire through the ports ([`super::portbench`]): one port's stack TX rings
//! transmit, the model's cable carries the frames to the other port, the shell steers them
//! (shell hash + indirection table), the QDMA writes them into the other function's RX rings and
//! raises the queue's MSI-X vector, the image takes it on that vector's IDT entry, and the main
//! loop polls the queue index through its port (NAPI). Then the same the other way round.

use core::sync::atomic::Ordering;

use onic_core::stats::read_hw_counters;
use onic_hal::regs::cmac::{ADAPTER_STATS, CMAC_STATS};

use super::datapath::{self, buffer_bytes, PAIRS, WAIT_NS};
use super::frames::{self, MAX_BUILD, OVERSIZE, SIZES};
use super::portbench::{self, run_until, rx_stats, settle, Book, PortBench};
use super::xdp::{Code, Program};
use super::Runner;
use crate::irq::{self, FUNCTIONS, MSIX_VECTORS};

/// Frames each PF sends in the spread phase.
const FRAMES: u32 = 264;
/// Distinct flows.
const FLOWS: u32 = 64;
/// Frames of one flow in the NAPI burst.
const BURST: u32 = 40;

/// What one direction of the spread phase left.
#[derive(Default)]
struct Direction {
    sent: u32,
    deliverable: u32,
    received: u32,
    misrouted: u32,
    corrupt: u32,
    strays: u32,
    oversize_expected: u32,
    oversize_counted: u64,
    oversize_mismatch: u32,
    tx_done: u64,
    tx_packets: u64,
    doorbells: u64,
    sender_polls: u64,
    sender_hk_completed: u64,
    settled: bool,
}

fn direction(b: &mut PortBench<'_, '_>, from: usize) -> Direction {
    let to = 1 - from;
    b.shared.borrow_mut().tally.reset();
    let rx_before = rx_stats(b);
    let books_before = b.books;
    let tx_before = tx_stats(b, from);
    let settled = portbench::spread(b, from, FRAMES, 0, |i| {
        let flow = (i * 7 + from as u32 * 13) % FLOWS;
        let len = SIZES[(i as usize * 5 + from) % SIZES.len()];
        (flow, len)
    });
    let rx_after = rx_stats(b);
    let tx_after = tx_stats(b, from);
    let s = b.shared.borrow();
    let t = &s.tally;
    let mut d = Direction {
        sent: t.sent(),
        deliverable: t.deliverable(),
        received: t.received,
        misrouted: t.misrouted,
        corrupt: t.corrupt,
        strays: t.duplicate + t.unknown + t.returned,
        settled,
        ..Direction::default()
    };
    for q in 0..PAIRS {
        let expected = t.oversize_for(to as u8, q);
        let counted = rx_after[to][q].rx_multi_buffer - rx_before[to][q].rx_multi_buffer;
        let other_drops = rx_after[to][q].rx_dropped() - rx_before[to][q].rx_dropped() - counted;
        d.oversize_expected += expected;
        d.oversize_counted += counted;
        if u64::from(expected) != counted || other_drops != 0 {
            d.oversize_mismatch += 1;
        }
        let book: &Book = &b.books[from][q];
        let before = &books_before[from][q];
        d.tx_done += book.tx_done - before.tx_done;
        d.sender_polls += book.polls - before.polls;
        d.sender_hk_completed += book.hk_completed - before.hk_completed;
        d.tx_packets += tx_after[q].tx_packets - tx_before[q].tx_packets;
        d.doorbells += tx_after[q].doorbells - tx_before[q].doorbells;
    }
    d
}

/// The TX counters of every queue index of port `from` (its stack TX rings: nothing else of the
/// port transmits in this group).
fn tx_stats(b: &PortBench<'_, '_>, from: usize) -> [onic_core::TxStats; PAIRS] {
    core::array::from_fn(|q| {
        u16::try_from(q)
            .ok()
            .and_then(|q| b.ports[from].port().queue_counters(q))
            .map(|c| c.tx)
            .unwrap_or_default()
    })
}

/// What the interrupt and clock checks compare against: taken before any traffic of this group.
struct Before {
    irqs: [[u32; MSIX_VECTORS]; FUNCTIONS],
    raised: [[u32; MSIX_VECTORS]; FUNCTIONS],
    ticks: u64,
    violations: usize,
}

/// Runs the group on the ports of `b` (`None`: they did not come up).
pub fn run(r: &mut Runner, b: Option<&mut PortBench<'_, '_>>) {
    r.group("traffic across the wire (onic-embed ports, MSI-X vectors, NAPI)");
    let Some(b) = b else {
        r.skipped("wire-traffic", "the ports did not come up");
        return;
    };
    let before = Before {
        irqs: snapshot_irqs(),
        raised: b.raised,
        ticks: irq::TICKS.load(Ordering::Relaxed),
        violations: b.model.with(|c| c.violations().len()),
    };
    b.progs = [
        Some(b.attach(Code::Native(Program::Drop))),
        Some(b.attach(Code::Native(Program::Pass))),
    ];
    spread_both_ways(r, b, before.violations);
    napi_budget(r, b);
    interrupts_and_clock(r, b, &before);
    oversize(r, b);
    hw_counters(r, b);
}

/// The spread phase, PF0 to PF1 then back: delivery, steering, integrity, frames beyond their
/// buffer, TX completions and the RSS spread over every queue.
fn spread_both_ways(r: &mut Runner, b: &mut PortBench<'_, '_>, violations_before: usize) {
    let mut spread_queues = [[0u32; PAIRS]; FUNCTIONS];
    let mut dirs = [Direction::default(), Direction::default()];
    for from in 0..FUNCTIONS {
        dirs[from] = direction(b, from);
        spread_queues[1 - from] = b.shared.borrow().tally.per_queue[1 - from];
    }
    for (from, d) in dirs.iter().enumerate() {
        let name = if from == 0 {
            "wire-pf0-to-pf1"
        } else {
            "wire-pf1-to-pf0"
        };
        r.check(
            name,
            d.settled && d.received == d.deliverable && d.strays == 0 && d.sent == FRAMES,
            format_args!(
                "PF{from} sent {} frames ({FLOWS} flows, {} sizes 60..1514) on {PAIRS} TX queues; PF{} \
                 received {}/{} that fit their queue's buffer",
                d.sent,
                SIZES.len(),
                1 - from,
                d.received,
                d.deliverable
            ),
        );
    }
    let total = |f: fn(&Direction) -> u64| dirs.iter().map(f).sum::<u64>();
    let received = total(|d| u64::from(d.received));
    let misrouted = total(|d| u64::from(d.misrouted));
    r.check(
        "rx-steering",
        received > 0 && misrouted == 0,
        format_args!(
            "{received} frames, each on table.queue_for(ShellHasher::hash_frame(frame)) of its PF; \
             {misrouted} elsewhere"
        ),
    );
    let corrupt = total(|d| u64::from(d.corrupt));
    r.check(
        "rx-integrity",
        received > 0 && corrupt == 0,
        format_args!("every byte of the {received} frames as sent ({corrupt} differ)"),
    );
    let expected = total(|d| u64::from(d.oversize_expected));
    let counted = total(|d| d.oversize_counted);
    let mismatch = total(|d| u64::from(d.oversize_mismatch));
    let violations = b.model.with(|c| c.violations().len()) - violations_before;
    r.check(
        "rx-beyond-buffer",
        expected > 0 && counted == expected && mismatch == 0 && violations == 0,
        format_args!(
            "{counted} frames longer than their queue's buffer ({}/{} bytes) dropped as rx_multi_buffer \
             ({expected} predicted, {mismatch} queues off); the model saw no device write outside a mapped page",
            buffer_bytes(2),
            buffer_bytes(3)
        ),
    );
    let sent = total(|d| u64::from(d.sent));
    let done = total(|d| d.tx_done);
    let packets = total(|d| d.tx_packets);
    let doorbells = total(|d| d.doorbells);
    let left = b.host.census().packets;
    r.check(
        "tx-completions",
        done == sent && packets == sent && left == 0 && doorbells < sent,
        format_args!(
            "{done}/{sent} OS frames completed through TxDone, tx_packets {packets}, {doorbells} H2C \
             doorbells (xmit-more batches), {left} OS buffers left"
        ),
    );
    let polls = total(|d| d.sender_polls);
    let hk = total(|d| d.sender_hk_completed);
    r.check(
        "tx-reclaim-housekeeping",
        polls == 0 && hk == sent,
        format_args!(
            "the sending pairs were never polled ({polls} polls); the tick's housekeeping reclaimed all \
             {hk} of their buffers"
        ),
    );
    let idle = spread_queues.iter().flatten().filter(|&&n| n == 0).count();
    r.check(
        "rss-spread",
        idle == 0,
        format_args!(
            "all {} RX queues got traffic ({idle} idle): PF0 {:?}, PF1 {:?}",
            FUNCTIONS * PAIRS,
            spread_queues[0],
            spread_queues[1]
        ),
    );
}

/// Every queue interrupt on its own vector, the timer ticking under traffic, and the model's
/// clock moved by the timer alone.
fn interrupts_and_clock(r: &mut Runner, b: &PortBench<'_, '_>, before: &Before) {
    // Per-queue vectors: each interrupt the model raised arrived on its own IDT vector.
    let irqs_after = snapshot_irqs();
    let mut handled_total = 0;
    let mut mismatched = 0;
    let mut silent = 0;
    for (f, v) in (0..FUNCTIONS).flat_map(|f| (0..PAIRS).map(move |v| (f, v))) {
        let handled = irqs_after[f][v] - before.irqs[f][v];
        handled_total += handled;
        if handled != b.raised[f][v] - before.raised[f][v] {
            mismatched += 1;
        }
        if handled == 0 {
            silent += 1;
        }
    }
    let unexpected = irq::UNEXPECTED.load(Ordering::Relaxed);
    r.check(
        "msix-vectors",
        mismatched == 0 && silent == 0 && b.unrouted == 0 && unexpected == 0,
        format_args!(
            "{handled_total} queue interrupts on {} vectors, each on its own IDT entry ({mismatched} \
             vectors mismatched, {silent} silent, {} unrouted)",
            FUNCTIONS * PAIRS,
            b.unrouted
        ),
    );
    let ticks = irq::TICKS.load(Ordering::Relaxed) - before.ticks;
    r.check(
        "timer-during-traffic",
        ticks > 0,
        format_args!("{ticks} timer ticks while traffic ran (completion timers and TX reclaim run on them)"),
    );
    // The model's clock moves only with the tick (the core waits with the TSC delay, which does
    // not touch the model), so it must equal the ticks' total.
    let (model_ns, ticks_ns) = crate::platform::without_interrupts(|| {
        (
            b.model.with(|c| c.now_ns()),
            irq::MODEL_TIME_NS.load(Ordering::Relaxed) - b.clock_base,
        )
    });
    r.check(
        "tick-model-clock",
        model_ns == ticks_ns && model_ns > 0,
        format_args!(
            "the model's clock is at {} us, all of it advanced by the timer handler ({} us)",
            model_ns / 1000,
            ticks_ns / 1000
        ),
    );
}

/// Oversize frames stop at the MAC.
fn oversize(r: &mut Runner, b: &mut PortBench<'_, '_>) {
    let shell = b.model.shell();
    let counters_before = [read_hw_counters(&shell, 0), read_hw_counters(&shell, 1)];
    let rx_before = rx_stats(b);
    for port in 0..2u8 {
        for len in OVERSIZE {
            let mut buf = [0u8; MAX_BUILD];
            let frame = frames::build(&frames::flow(1), len, u32::MAX, &mut buf);
            b.model.with(|c| c.inject(port, frame));
        }
    }
    run_until(b, 20_000_000, |_| false);
    let rx_after = rx_stats(b);
    let counters = [read_hw_counters(&shell, 0), read_hw_counters(&shell, 1)];
    let delta =
        |port: usize, name: &str| counter(&counters[port], name) - counter(&counters_before[port], name);
    let n = OVERSIZE.len() as u64;
    let ok = (0..2).all(|p| {
        delta(p, "stat_rx_oversize") == n
            && delta(p, "stat_rx_toolong") == n
            && delta(p, "stat_adapt_rx_error") == n
    });
    let reached = rx_after
        .iter()
        .flatten()
        .zip(rx_before.iter().flatten())
        .any(|(a, b)| a.rx_packets + a.rx_dropped() != b.rx_packets + b.rx_dropped());
    r.check(
        "rx-oversize",
        ok && !reached,
        format_args!(
            "frames of {:?} bytes on both ports: counted as oversize and adapter errors, none reached a ring",
            OVERSIZE
        ),
    );
}

/// The hardware counters agree with the driver's, per port.
fn hw_counters(r: &mut Runner, b: &mut PortBench<'_, '_>) {
    let shell = b.model.shell();
    run_until(b, WAIT_NS, |b| b.tx_in_flight() == 0);
    let counters = [read_hw_counters(&shell, 0), read_hw_counters(&shell, 1)];
    let mut lines_ok = true;
    let mut rx_seen = [0u64; FUNCTIONS];
    let mut tx_done = [0u64; FUNCTIONS];
    for (f, port) in b.ports.iter().enumerate() {
        for q in 0..PAIRS as u16 {
            if let Some(c) = port.port().queue_counters(q) {
                rx_seen[f] += c.rx.rx_packets + c.rx.rx_dropped();
                tx_done[f] += c.tx.tx_packets;
            }
        }
    }
    for port in 0..FUNCTIONS {
        let c = |name| counter(&counters[port], name);
        lines_ok &= c("stat_rx_total_good_pkts") == c("stat_adapt_rx_recv")
            && rx_seen[port] == c("stat_adapt_rx_recv") - c("stat_adapt_rx_drop")
            && c("stat_tx_total_good_pkts") == tx_done[port]
            && c("stat_adapt_tx_sent") == tx_done[port];
    }
    r.check(
        "hw-counters",
        lines_ok,
        format_args!(
            "per port, CMAC rx good = adapter rx recv = driver RX (delivered + dropped) {}/{}, CMAC tx good \
             = adapter tx sent = driver tx_packets {}/{}",
            rx_seen[0], rx_seen[1], tx_done[0], tx_done[1]
        ),
    );
}

/// A burst of one flow into one queue is polled in budget-sized rounds, from one interrupt.
fn napi_budget(r: &mut Runner, b: &mut PortBench<'_, '_>) {
    let target = 1;
    b.shared.borrow_mut().tally.reset();
    let flow = datapath::flow_for_queue(&b.shared.borrow().steer[1], target, 0);
    let Some(flow) = flow else {
        r.check(
            "napi-budget",
            false,
            format_args!("no flow reaches PF1 queue {target}"),
        );
        return;
    };
    let before = b.books[1][target];
    let irqs_before = irq::QUEUE_IRQS[1][target].load(Ordering::Relaxed);
    let mut ok = true;
    for _ in 0..BURST {
        ok &= portbench::send_tracked(b, 0, 0, flow, 100);
    }
    portbench::flush(b, 0);
    ok &= settle(b, 0);
    let after = b.books[1][target];
    let irqs = irq::QUEUE_IRQS[1][target].load(Ordering::Relaxed) - irqs_before;
    let exhausted = after.exhausted - before.exhausted;
    let polls = after.polls - before.polls;
    let got = b.shared.borrow().tally.per_queue[1][target];
    r.check(
        "napi-budget",
        ok && got == BURST && exhausted >= u64::from(BURST) / datapath::BUDGET as u64 - 1 && irqs <= 2,
        format_args!(
            "{BURST} frames of one flow to PF1 queue {target}: {polls} polls, {exhausted} used the whole \
             budget of {}, {irqs} interrupt(s)",
            datapath::BUDGET
        ),
    );
}

/// The value of counter `name` in a `read_hw_counters` array.
#[must_use]
pub fn counter(values: &[u64], name: &str) -> u64 {
    CMAC_STATS
        .iter()
        .chain(ADAPTER_STATS.iter())
        .position(|c| c.name == name)
        .and_then(|i| values.get(i).copied())
        .unwrap_or(u64::MAX)
}

fn snapshot_irqs() -> [[u32; MSIX_VECTORS]; FUNCTIONS] {
    let mut s = [[0; MSIX_VECTORS]; FUNCTIONS];
    for (f, row) in s.iter_mut().enumerate() {
        for (v, slot) in row.iter_mut().enumerate() {
            *slot = irq::QUEUE_IRQS[f][v].load(Ordering::Relaxed);
        }
    }
    s
}
