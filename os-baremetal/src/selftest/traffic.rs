//! Traffic through the model's receive path: frames of many sizes and flows arrive at both ports;
//! the shell steers them (hash + indirection table), the QDMA writes them into the RX rings and
//! raises the queue's MSI-X vector, the image takes it on that vector's IDT entry, and the main
//! loop polls the marked queue with a budget (NAPI) and re-arms it.

use core::sync::atomic::Ordering;

use heapless::Vec;
use onic_core::stats::read_hw_counters;
use onic_hal::layout::desc::CmptEntry;
use onic_hal::regs::cmac::{ADAPTER_STATS, CMAC_STATS};
use onic_hal::regs::shell::{self, HASH_KEY_WORDS, INDIR_ENTRY_MASK, INDIR_TABLE_ENTRIES};
use onic_hal::RegisterWindow;
use onic_sim::rss::shell_hash;

use super::frames::{self, Flow, MAX_BUILD, OVERSIZE, SIZES};
use super::probe::{QueueStats, RxProbe};
use super::{Bench, Runner, PFS, QUEUES};
use crate::irq::{self, FUNCTIONS, MSIX_VECTORS};
use crate::platform::idt;
use crate::time;

/// NAPI budget: completions one poll may take.
pub const BUDGET: usize = 8;
/// Frames per port in the spread phase.
const FRAMES_PER_PORT: u32 = 264;
/// Frames injected per port before the loop drains them.
const BATCH: u32 = 24;
/// Distinct flows.
const FLOWS: u32 = 64;
/// Frames of one flow in the NAPI burst.
const BURST: u32 = 40;
/// How long the loop waits for expected frames.
const WAIT_NS: u64 = 10_000_000_000;
/// Most frames tracked at once.
const MAX_TRACKED: usize = 1024;

/// The RX queues of both functions.
pub struct RxSet<'c> {
    queues: Vec<RxProbe<'c>, { FUNCTIONS * QUEUES as usize }>,
}

impl<'c> RxSet<'c> {
    pub fn new() -> Self {
        Self { queues: Vec::new() }
    }

    pub fn push(&mut self, q: RxProbe<'c>) {
        // At most FUNCTIONS x QUEUES queues are created.
        let _ = self.queues.push(q);
    }

    pub fn take_all(&mut self) -> Vec<RxProbe<'c>, { FUNCTIONS * QUEUES as usize }> {
        core::mem::take(&mut self.queues)
    }

    pub fn len(&self) -> usize {
        self.queues.len()
    }

    fn find(&mut self, func: u8, vector: u16) -> Option<&mut RxProbe<'c>> {
        self.queues
            .iter_mut()
            .find(|q| q.func == func && q.cfg.vector == vector)
    }

    /// (function, qid, vector, buffer bytes, counters) of every queue.
    pub fn rows(&self) -> impl Iterator<Item = (u8, u16, u16, u32, QueueStats)> + '_ {
        self.queues
            .iter()
            .map(|q| (q.func, q.cfg.qid, q.cfg.vector, q.cfg.buf.bytes(), q.stats))
    }
}

/// What a frame should do.
#[derive(Clone, Copy)]
struct Expect {
    flow: u32,
    len: u16,
    func: u8,
    qid: u16,
    received: bool,
}

/// What the receive side saw.
#[derive(Default)]
pub struct Tally {
    expected: Vec<Expect, MAX_TRACKED>,
    pub received: u32,
    pub misrouted: u32,
    pub corrupt: u32,
    pub unknown: u32,
    pub duplicate: u32,
    pub bad_completions: u32,
    pub raised: [[u32; MSIX_VECTORS]; FUNCTIONS],
    pub unrouted: u32,
}

impl Tally {
    fn expect(&mut self, e: Expect) -> Option<u32> {
        let id = self.expected.len() as u32;
        self.expected.push(e).ok().map(|()| id)
    }

    pub fn outstanding(&self) -> u32 {
        self.expected.len() as u32 - self.received
    }

    fn on_frame(&mut self, func: u8, qid: u16, frame: &[u8], e: CmptEntry) {
        if frame.is_empty() {
            self.bad_completions += 1;
            return;
        }
        let Some(id) = frames::id_of(frame) else {
            self.unknown += 1;
            return;
        };
        let Some(x) = self.expected.get_mut(id as usize) else {
            self.unknown += 1;
            return;
        };
        if x.received {
            self.duplicate += 1;
            return;
        }
        x.received = true;
        let x = *x;
        self.received += 1;
        let abs = super::device_qbase(func) + qid;
        if x.func != func || x.qid != qid || e.qid() != abs & 0x7FF {
            self.misrouted += 1;
        }
        let mut want = [0u8; MAX_BUILD];
        let expected = frames::build(&frames::flow(x.flow), usize::from(x.len), id, &mut want);
        if expected != frame || usize::from(e.pkt_len()) != frame.len() {
            self.corrupt += 1;
        }
    }
}

/// The hash key and indirection table a function's shell block holds, read back through BAR2.
pub struct Steering {
    key: [u32; HASH_KEY_WORDS],
    table: [u16; INDIR_TABLE_ENTRIES],
}

impl Steering {
    pub fn read(shell: &impl RegisterWindow, func: u8) -> Self {
        let mut key = [0; HASH_KEY_WORDS];
        for (k, w) in key.iter_mut().enumerate() {
            *w = shell.read32(shell::hash_key(func, k));
        }
        let mut table = [0; INDIR_TABLE_ENTRIES];
        for (k, e) in table.iter_mut().enumerate() {
            *e = (shell.read32(shell::indir_table(func, k)) & INDIR_ENTRY_MASK) as u16;
        }
        Self { key, table }
    }

    /// The queue the shell sends `frame` to, by the software model of its hash.
    pub fn queue(&self, frame: &[u8]) -> u16 {
        self.table[(shell_hash(&self.key, frame) & 0x7F) as usize]
    }
}

/// One round of the main loop: the model works once, its interrupts are raised on their vectors,
/// and every queue marked by its handler is polled with the budget. Returns whether anything
/// happened.
pub fn service(b: &mut Bench<'_>, tally: &mut Tally) -> bool {
    // The tick's deferred work. Nothing is owed yet besides counting the round: TX reclaim joins
    // here with the core's TX rings.
    let _rounds = irq::take_housekeeping();
    let (progress, interrupts) = b.model.with(|c| (c.step(), c.take_interrupts()));
    for i in &interrupts {
        match irq::queue_vector(i.func, i.vector) {
            Some(v) => {
                tally.raised[usize::from(i.func)][usize::from(i.vector)] += 1;
                idt::raise(v);
            }
            None => tally.unrouted += 1,
        }
    }
    let mut polled = false;
    for (f, &func) in PFS.iter().enumerate() {
        let mut bits = irq::take_napi(f);
        while bits != 0 {
            let msix = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            let (Some(dev), Some(q)) = (b.devices[f].as_ref(), b.rx.find(func, msix as u16)) else {
                continue;
            };
            let qid = q.cfg.qid;
            let n = q.poll(dev, BUDGET, &mut |frame, e| tally.on_frame(func, qid, frame, e));
            if n == BUDGET {
                irq::reschedule_napi(f, msix);
            }
            polled = true;
        }
    }
    progress || polled || !interrupts.is_empty()
}

/// Runs the main loop until `done` holds or `timeout_ns` passes, halting while idle.
pub fn run_until(
    b: &mut Bench<'_>,
    tally: &mut Tally,
    timeout_ns: u64,
    done: impl Fn(&Tally) -> bool,
) -> bool {
    let deadline = time::nanos_since_boot() + timeout_ns;
    loop {
        let busy = service(b, tally);
        if done(tally) {
            return true;
        }
        if time::nanos_since_boot() > deadline {
            return false;
        }
        if !busy {
            crate::platform::disable_interrupts();
            if irq::napi_pending() {
                crate::platform::enable_interrupts();
            } else {
                crate::platform::enable_interrupts_and_halt();
            }
        }
    }
}

pub fn inject(
    b: &Bench<'_>,
    tally: &mut Tally,
    steer: &[Steering; 2],
    port: u8,
    flow: u32,
    len: usize,
) -> bool {
    let f = frames::flow(flow);
    let func = port; // PF i owns port i
    let mut buf = [0u8; MAX_BUILD];
    let Some(id) = tally.expect(Expect {
        flow,
        len: len as u16,
        func,
        qid: 0,
        received: false,
    }) else {
        return false;
    };
    let frame = frames::build(&f, len, id, &mut buf);
    let qid = steer[usize::from(port)].queue(frame);
    if let Some(x) = tally.expected.last_mut() {
        x.qid = qid;
    }
    b.model.with(|c| c.inject(port, frame));
    true
}

pub fn flow_for_queue(steer: &Steering, qid: u16) -> Option<(u32, Flow)> {
    let mut buf = [0u8; MAX_BUILD];
    (0..1000).find_map(|i| {
        let f = frames::flow(i);
        (steer.queue(frames::build(&f, 60, 0, &mut buf)) == qid && f.kind != frames::Kind::NonIp)
            .then_some((i, f))
    })
}

pub fn run(r: &mut Runner, b: &mut Bench<'_>) {
    r.group("traffic through the model (RX steering, MSI-X vectors, NAPI)");
    if b.rx.len() != FUNCTIONS * usize::from(QUEUES) || b.devices.iter().any(Option::is_none) {
        r.skipped("rx-traffic", "queues or functions missing");
        return;
    }
    let shell = b.model.shell();
    let steer = [Steering::read(&shell, 0), Steering::read(&shell, 1)];
    let irqs_before = snapshot_irqs();
    let ticks_before = irq::TICKS.load(Ordering::Relaxed);
    let mut tally = Tally::default();

    // Spread: many flows and sizes into both ports, in batches.
    let mut sent = 0;
    let mut all_in = true;
    while sent < FRAMES_PER_PORT {
        for i in sent..(sent + BATCH).min(FRAMES_PER_PORT) {
            for port in 0..2u8 {
                let flow = (i * 7 + u32::from(port) * 13) % FLOWS;
                let len = SIZES[(i as usize * 5 + usize::from(port)) % SIZES.len()];
                all_in &= inject(b, &mut tally, &steer, port, flow, len);
            }
        }
        sent = (sent + BATCH).min(FRAMES_PER_PORT);
        all_in &= run_until(b, &mut tally, WAIT_NS, |t| t.outstanding() == 0);
    }
    let spread_frames = tally.expected.len() as u32;
    r.check(
        "rx-delivery",
        all_in && tally.received == spread_frames && tally.duplicate == 0 && tally.unknown == 0,
        format_args!(
            "{}/{} frames ({} flows, {} sizes 60..1514 bytes) came out of the RX rings",
            tally.received,
            spread_frames,
            FLOWS,
            SIZES.len()
        ),
    );
    r.check(
        "rx-steering",
        tally.received > 0 && tally.misrouted == 0,
        format_args!(
            "{} frames on the queue the shell hash + indirection table give, {} elsewhere",
            tally.received - tally.misrouted,
            tally.misrouted
        ),
    );
    let multi: u64 = b.rx.rows().map(|row| row.4.multi_buffer).sum();
    r.check(
        "rx-integrity",
        tally.corrupt == 0 && tally.bad_completions == 0 && multi > 0,
        format_args!(
            "every byte as sent ({} corrupt, {} bad completions); {} frames spanned 2-6 buffers",
            tally.corrupt, tally.bad_completions, multi
        ),
    );
    let idle_queues = b.rx.rows().filter(|row| row.4.packets == 0).count();
    r.check(
        "rss-spread",
        idle_queues == 0,
        format_args!("all 16 queues got traffic ({idle_queues} idle)"),
    );

    // NAPI: a burst of one flow into one queue is polled in budget-sized rounds.
    let target = 4;
    let before = b.rx.find(0, target).map(|q| q.stats).unwrap_or_default();
    let burst_irqs_before = irq::QUEUE_IRQS[0][usize::from(target)].load(Ordering::Relaxed);
    let burst_ok = match flow_for_queue(&steer[0], target) {
        Some((flow, _)) => {
            let expected = tally.expected.len() as u32 + BURST;
            for _ in 0..BURST {
                inject(b, &mut tally, &steer, 0, flow, 100);
            }
            run_until(b, &mut tally, WAIT_NS, |t| t.received == expected)
        }
        None => false,
    };
    let after = b.rx.find(0, target).map(|q| q.stats).unwrap_or_default();
    let burst_irqs = irq::QUEUE_IRQS[0][usize::from(target)].load(Ordering::Relaxed) - burst_irqs_before;
    let exhausted = after.budget_exhausted - before.budget_exhausted;
    r.check(
        "napi-budget",
        burst_ok
            && after.packets - before.packets == u64::from(BURST)
            && exhausted >= u64::from(BURST) / BUDGET as u64 - 1
            && burst_irqs <= 2,
        format_args!(
            "{BURST} frames to PF0 queue {target}: {} polls, {exhausted} used the whole budget of {BUDGET}, \
             {burst_irqs} interrupt(s)",
            after.polls - before.polls
        ),
    );

    // Per-queue vectors: each interrupt the model raised arrived on its own IDT vector.
    let irqs_after = snapshot_irqs();
    let mut handled_total = 0;
    let mut mismatched = 0;
    let mut silent = 0;
    for f in 0..FUNCTIONS {
        for v in 0..usize::from(QUEUES) {
            let handled = irqs_after[f][v] - irqs_before[f][v];
            handled_total += handled;
            if handled != tally.raised[f][v] {
                mismatched += 1;
            }
            if handled == 0 {
                silent += 1;
            }
        }
    }
    let unexpected = irq::UNEXPECTED.load(Ordering::Relaxed);
    r.check(
        "msix-vectors",
        mismatched == 0 && silent == 0 && tally.unrouted == 0 && unexpected == 0,
        format_args!(
            "{handled_total} queue interrupts over 16 vectors {:#x}..{:#x}, each on its own IDT entry \
             ({mismatched} vectors mismatched, {silent} silent, {} unrouted)",
            irq::QUEUE_VECTOR_BASE,
            irq::QUEUE_VECTOR_BASE as usize + FUNCTIONS * MSIX_VECTORS - 1,
            tally.unrouted
        ),
    );
    let ticks = irq::TICKS.load(Ordering::Relaxed) - ticks_before;
    r.check(
        "timer-during-traffic",
        ticks > 0,
        format_args!("{ticks} timer ticks while traffic ran (the model's completion timers run on them)"),
    );

    // The model's clock moves only with the tick (the core waits with the TSC delay, which does
    // not touch the model), so it must equal the ticks' total.
    let (model_ns, ticks_ns) = crate::platform::without_interrupts(|| {
        (
            b.model.with(|c| c.now_ns()),
            irq::MODEL_TIME_NS.load(Ordering::Relaxed),
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

    // Oversize frames stop at the MAC.
    let counters_before = [read_hw_counters(&shell, 0), read_hw_counters(&shell, 1)];
    let delivered_before = tally.received;
    for port in 0..2u8 {
        for len in OVERSIZE {
            let mut buf = [0u8; MAX_BUILD];
            let frame = frames::build(&frames::flow(1), len, u32::MAX, &mut buf);
            b.model.with(|c| c.inject(port, frame));
        }
    }
    run_until(b, &mut tally, 20_000_000, |_| false);
    let counters = [read_hw_counters(&shell, 0), read_hw_counters(&shell, 1)];
    let delta =
        |port: usize, name: &str| counter(&counters[port], name) - counter(&counters_before[port], name);
    let n = OVERSIZE.len() as u64;
    let ok = (0..2).all(|p| {
        delta(p, "stat_rx_oversize") == n
            && delta(p, "stat_rx_toolong") == n
            && delta(p, "stat_adapt_rx_error") == n
    });
    r.check(
        "rx-oversize",
        ok && tally.received == delivered_before,
        format_args!(
            "frames of {:?} bytes: counted as oversize and adapter errors on both ports, none delivered",
            OVERSIZE
        ),
    );

    // The hardware counters agree with what came out of the rings.
    let good = |p: usize| counter(&counters[p], "stat_rx_total_good_pkts");
    let recv = |p: usize| counter(&counters[p], "stat_adapt_rx_recv");
    let drop = |p: usize| counter(&counters[p], "stat_adapt_rx_drop");
    let per_port = |port: u8| {
        tally
            .expected
            .iter()
            .filter(|x| x.func == port && x.received)
            .count() as u64
    };
    let (want0, want1) = (per_port(0), per_port(1));
    r.check(
        "hw-counters",
        good(0) == want0
            && good(1) == want1
            && recv(0) == want0
            && recv(1) == want1
            && drop(0) + drop(1) == 0,
        format_args!(
            "CMAC rx good {}/{}, adapter rx recv {}/{}, rx drop {}: match the {}/{} frames received",
            good(0),
            good(1),
            recv(0),
            recv(1),
            drop(0) + drop(1),
            want0,
            want1
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
