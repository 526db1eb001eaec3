//! `onic run` (traffic mode, the default): the main job. Brings up PF0 and PF1 of one model card (a cable between port 0 and
//! port 1), sends generated traffic through the driver's TX queues of one function, lets the model
//! carry it over the wire, receives it with the driver's RX queues of the other function, checks
//! every byte, and prints rates, a per-queue table, the driver's, the page pools' and the CMACs'
//! statistics, and the page accounting.
//!
//! # Time
//!
//! The model is step-driven: nothing happens unless it is told to, and its clock only moves when
//! the run moves it. The run therefore works in *ticks* of virtual time (`--tick-ns`, 1 µs by
//! default). In each tick the generator queues the frames the target rate makes due (a rate is
//! frames per **virtual** second), the model does all the pending work (it is infinitely fast in
//! virtual time), its clock advances by one tick (completion timers fire), and the driver polls
//! the RX queues whose interrupt fired until each has caught up and re-armed (NAPI, `--budget`
//! per poll); the transmit path reclaims its TX queues before queuing. Rates are reported both in virtual time (what the run asked the wire for) and in host
//! time (how fast this machine simulated card and driver together).
//!
//! # Frames
//!
//! Sizes are frame sizes on the wire including the 4-byte FCS, 64..=1518 (the driver sends
//! `size - 4` bytes; the shell's largest frame is 1514). `--flows N` generates N IPv4 5-tuples
//! (UDP, TCP or both); frame k belongs to flow k % N, goes out on TX queue flow % queues, and the
//! shell's RSS hash picks its RX queue. Each frame carries its sequence number and flow in the
//! payload, and a payload pattern derived from the sequence number that the receiving side checks
//! byte for byte.
//!
//! # What happens to received frames
//!
//! Both functions are driven through the door the kernel module uses, `onic_embed`'s `Port`, with
//! the model as its host (`onic_embed::model`): the generator's frames go out of each queue
//! index's stack TX ring, received frames reach the host's stack, redirects are carried out by the
//! host.
//!
//! Without a program, every frame is checked, counted and handed to the "OS", which gives the page
//! back to the pool after the poll. With `--xdp-obj FILE.o --traffic`, the receiving function's
//! queues run the object's program through the port's poll: passed frames are
//! checked and counted as before (a frame the program changed is counted as changed, not
//! corrupt), dropped and aborted ones are counted by the driver, XDP_TX sends frames back out of
//! the receiving port (across the cable to the sending function, which receives them without a
//! program), and redirects are carried out as in replay mode ([`crate::carry`]):
//! XDP_REDIRECT to the other port out of its redirect-in ring (across the cable back to the
//! receiving port, where the program meets them again: a program that redirects everything
//! makes them circle, and the run stops with an error once the program has run four times per
//! frame sent), to the ingress port (a hairpin) out of its own redirect-in ring (to the sending
//! function, like XDP_TX), an xskmap entry to a user sink, a cpumap entry to the OS on that CPU
//! (checked and counted as received, by CPU), a broadcast (`BPF_F_BROADCAST`) a copy out of
//! every devmap entry's port (copies beyond the first through the port's stack TX ring). The
//! accounting then reads: sent + broadcast copies = received (both functions) + XDP drops +
//! user sink + broadcasts to no port + driver drops + model drops.

use std::fmt::Write as _;
use std::io::Write as _;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use onic_core::config::{DeviceConfig, RingSizeIdx};
use onic_core::stats::read_hw_counters;
use onic_core::stats::{PairStats, PoolStats, QueueCounters};
use onic_core::stats::{RxStats, TxStats};
use onic_embed::model::{CardHost, ModelCensus, ModelHost};
use onic_embed::port::{
    Host as _, PollResult, PortConfig, SoloPort, TxLock, XmitLock, XmitResult, MAX_PORT_QUEUES,
};
use onic_hal::regs::cmac::{ADAPTER_STATS, CMAC_STATS};
use onic_sim::inet::checksum;
use onic_sim::{Card, CardConfig, Wire};

use crate::carry::Event;
use crate::rng::Rng;
use crate::xdp_obj::{ObjEngine, ObjOpts};

/// The model host of a traffic run; its program is the object's.
type Host<'c> = CardHost<'c, ObjEngine>;

/// Bytes of preamble, start delimiter and inter-frame gap around every frame on the wire.
const WIRE_OVERHEAD: f64 = 20.0;
/// Port speed the default rate is computed for.
const LINE_BPS: f64 = 100e9;
/// Largest frame on the wire (FCS included) the stock shell passes.
const MAX_WIRE: usize = 1518;
/// Smallest frame on the wire.
const MIN_WIRE: usize = 64;

/// Which way traffic flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Way {
    /// PF0 sends on port 0, PF1 receives on port 1.
    #[value(name = "0to1")]
    ZeroToOne,
    /// PF1 sends on port 1, PF0 receives on port 0.
    #[value(name = "1to0")]
    OneToZero,
    /// Both at once, each at the full rate.
    Both,
}

/// Protocol of the generated flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Proto {
    /// UDP only.
    Udp,
    /// TCP only.
    Tcp,
    /// Even flows UDP, odd flows TCP.
    Mixed,
}

/// Arguments of `onic run` in traffic mode (also `--queues` for replay mode).
#[derive(Args, Debug)]
pub struct TrafficArgs {
    /// Frame sizes on the wire (FCS included, 64..=1518), comma-separated; frames cycle through them.
    #[arg(long, value_delimiter = ',', default_value = "64,512,1518")]
    pub sizes: Vec<usize>,
    /// Random frame sizes `MIN..MAX` on the wire (inclusive), instead of --sizes.
    #[arg(long, value_name = "MIN..MAX")]
    pub size_range: Option<String>,
    /// Flows: distinct IPv4 5-tuples (1..=65535); frame k belongs to flow k % N.
    #[arg(long, default_value_t = 256)]
    pub flows: u32,
    /// Protocol of the flows.
    #[arg(long, value_enum, default_value_t = Proto::Mixed)]
    pub proto: Proto,
    /// Target rate per direction in frames per virtual second, 1..=1e10 [default: 100 GbE line
    /// rate for the mean frame size].
    #[arg(long)]
    pub rate_pps: Option<f64>,
    /// Frames to send per direction, 1..=1e10 [default: 200000, unless --seconds is given].
    #[arg(long, conflicts_with = "seconds")]
    pub packets: Option<u64>,
    /// Virtual seconds to send for, above 0 and at most 3600 (frames = rate x seconds).
    #[arg(long)]
    pub seconds: Option<f64>,
    /// Direction of the traffic.
    #[arg(long, value_enum, default_value_t = Way::ZeroToOne)]
    pub direction: Way,
    /// Queue indices of each function (1..=21: each has a stack TX ring, an XDP_TX ring and a
    /// redirect-in ring, three of the function's 64 H2C queues, as in the kernel module).
    #[arg(long, default_value_t = 4)]
    pub queues: u16,
    /// Entries of every descriptor and completion ring (a size of the QDMA ring-size table).
    #[arg(long, default_value_t = 1024)]
    pub ring: u16,
    /// Poll budget (completions per RX poll, 1..=16384).
    #[arg(long, default_value_t = 64)]
    pub budget: usize,
    /// Virtual nanoseconds per tick of the run loop (1..=1000000000); a run may take at most 1e9
    /// ticks of sending.
    #[arg(long, default_value_t = 1000)]
    pub tick_ns: u64,
    /// Seed of the flow generator and of --size-range.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Host milliseconds between progress lines on stderr (0: none).
    #[arg(long, default_value_t = 500)]
    pub progress_ms: u64,
}

/// How frame sizes are chosen.
#[derive(Clone, Debug)]
enum Sizes {
    /// Cycle through these (wire bytes).
    List(Vec<usize>),
    /// Uniformly random in this inclusive range (wire bytes).
    Range(usize, usize),
}

impl Sizes {
    fn mean(&self) -> f64 {
        match self {
            Self::List(v) => v.iter().sum::<usize>() as f64 / v.len() as f64,
            Self::Range(a, b) => (*a + *b) as f64 / 2.0,
        }
    }

    fn describe(&self) -> String {
        match self {
            Self::List(v) => v.iter().map(ToString::to_string).collect::<Vec<_>>().join(","),
            Self::Range(a, b) => format!("{a}..{b} (uniform)"),
        }
    }
}

fn parse_sizes(args: &TrafficArgs) -> Result<Sizes, String> {
    let check = |s: usize| {
        if (MIN_WIRE..=MAX_WIRE).contains(&s) {
            Ok(s)
        } else {
            Err(format!(
                "frame size {s} is outside {MIN_WIRE}..={MAX_WIRE} (wire bytes, FCS included)"
            ))
        }
    };
    if let Some(r) = &args.size_range {
        let (a, b) = r
            .split_once("..")
            .ok_or_else(|| format!("--size-range '{r}': expected MIN..MAX"))?;
        let a = check(a.trim().parse().map_err(|e| format!("--size-range: {e}"))?)?;
        let b = check(
            b.trim()
                .trim_start_matches('=')
                .parse()
                .map_err(|e| format!("--size-range: {e}"))?,
        )?;
        if a > b {
            return Err(format!("--size-range {a}..{b} is empty"));
        }
        return Ok(Sizes::Range(a, b));
    }
    if args.sizes.is_empty() {
        return Err("--sizes: at least one size".into());
    }
    Ok(Sizes::List(
        args.sizes.iter().map(|&s| check(s)).collect::<Result<_, _>>()?,
    ))
}

/// One generated 5-tuple.
#[derive(Clone, Copy, Debug)]
struct Flow {
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    tcp: bool,
}

fn make_flows(n: u32, proto: Proto, seed: u64) -> Vec<Flow> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|i| {
            let r = rng.next();
            Flow {
                src: [10, 0, (i >> 8) as u8, i as u8],
                dst: [10, 1, (r >> 8) as u8, r as u8],
                sport: 1024 + (r >> 16) as u16 % 60000,
                dport: [80, 443, 53, 4789, 8080, 5201][(r >> 40) as usize % 6],
                tcp: match proto {
                    Proto::Udp => false,
                    Proto::Tcp => true,
                    Proto::Mixed => i % 2 == 1,
                },
            }
        })
        .collect()
}

/// Bytes of the tag at the start of the payload: sequence number (u32) and flow (u16).
const TAG: usize = 6;

/// A byte ramp: the payload pattern of sequence number s starting at payload byte i is
/// `RAMP[(s & 0xFF) + i..]`.
fn ramp() -> Vec<u8> {
    (0..256 + MAX_WIRE).map(|i| i as u8).collect()
}

fn l4_offset(tcp: bool) -> usize {
    14 + 20 + if tcp { 20 } else { 8 }
}

/// Writes frame `seq` of `flow` (`len` bytes, FCS excluded) from port `from` into `out`.
fn build_frame(out: &mut [u8], flow: &Flow, flow_id: u16, seq: u32, from: u8, ramp: &[u8]) {
    let len = out.len();
    out[..6].copy_from_slice(&[0x00, 0x0A, 0x35, 0x00, 0x00, 0x10 + (from ^ 1)]);
    out[6..12].copy_from_slice(&[0x00, 0x0A, 0x35, 0x00, 0x00, 0x10 + from]);
    out[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = (len - 14) as u16;
    let ip = &mut out[14..34];
    ip.copy_from_slice(&[0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    ip[2..4].copy_from_slice(&ip_len.to_be_bytes());
    ip[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
    ip[9] = if flow.tcp { 6 } else { 17 };
    ip[12..16].copy_from_slice(&flow.src);
    ip[16..20].copy_from_slice(&flow.dst);
    let c = checksum(0, ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let l4 = &mut out[34..];
    l4[..2].copy_from_slice(&flow.sport.to_be_bytes());
    l4[2..4].copy_from_slice(&flow.dport.to_be_bytes());
    if flow.tcp {
        l4[4..8].copy_from_slice(&seq.to_be_bytes());
        l4[8..12].fill(0);
        l4[12] = 5 << 4;
        l4[13] = 0x10; // ACK
        l4[14..16].copy_from_slice(&0xFFFFu16.to_be_bytes());
        l4[16..20].fill(0);
    } else {
        l4[4..6].copy_from_slice(&(ip_len - 20).to_be_bytes());
        l4[6..8].fill(0);
    }
    let p = l4_offset(flow.tcp);
    out[p..p + 4].copy_from_slice(&seq.to_le_bytes());
    out[p + 4..p + TAG].copy_from_slice(&flow_id.to_le_bytes());
    let start = usize::from(seq as u8);
    let rest = len - p - TAG;
    out[p + TAG..].copy_from_slice(&ramp[start..start + rest]);
}

/// Checks a received frame against what the generator would have sent; `None` if it is not one
/// of ours or any byte differs.
fn check_frame(d: &[u8], flows: &[Flow], ramp: &[u8]) -> Option<()> {
    if d.len() < 60 || d.get(12..14)? != [0x08, 0x00] || d[14] != 0x45 {
        return None;
    }
    if usize::from(u16::from_be_bytes([d[16], d[17]])) + 14 != d.len() || checksum(0, &d[14..34]) != 0 {
        return None;
    }
    let tcp = match d[23] {
        6 => true,
        17 => false,
        _ => return None,
    };
    let p = l4_offset(tcp);
    let seq = u32::from_le_bytes(d.get(p..p + 4)?.try_into().ok()?);
    let flow_id = u16::from_le_bytes(d.get(p + 4..p + TAG)?.try_into().ok()?);
    let f = flows.get(usize::from(flow_id))?;
    let ports = [f.sport.to_be_bytes(), f.dport.to_be_bytes()].concat();
    if f.tcp != tcp || d[26..30] != f.src || d[30..34] != f.dst || d[34..38] != ports[..] {
        return None;
    }
    let start = usize::from(seq as u8);
    let rest = d.len() - p - TAG;
    (d[p + TAG..] == ramp[start..start + rest]).then_some(())
}

/// Per-queue counters of the receiving side, kept by the run's sink.
#[derive(Clone, Copy, Debug, Default)]
struct QueueRx {
    packets: u64,
    bytes: u64,
    corrupt: u64,
    /// Passed frames an XDP program changed (not counted as corrupt).
    changed: u64,
}

/// What the receiving side checks frames against.
struct Checker<'x> {
    flows: &'x [Flow],
    ramp: &'x [u8],
}

impl Checker<'_> {
    /// Checks and counts a frame the stack received; `changed`: a mismatch is the program's
    /// doing, not corruption.
    fn take(&self, count: &mut QueueRx, d: &[u8], changed: bool) {
        if check_frame(d, self.flows, self.ramp).is_some() {
            count.packets += 1;
            count.bytes += d.len() as u64;
        } else if changed {
            count.changed += 1;
        } else {
            count.corrupt += 1;
        }
    }
}

/// What the NAPI polls of one tick share.
struct RxCtx<'x> {
    check: Checker<'x>,
    budget: u32,
    /// The attached program's handle, if any.
    prog: Option<u16>,
    /// Functions whose queues run the program.
    receivers: &'x [bool],
    /// What became of the program's redirects.
    redirected: &'x mut Redirected,
}

/// Polls queue `q` of function `fi` once (running the program if the function is a receiver),
/// then does what the OS does after a poll: reads the frames its stack received and carries out
/// the program's redirects.
fn poll_queue(funcs: &mut [Func<'_>], fi: usize, q: u16, rx: &mut RxCtx<'_>) -> PollResult {
    let prog = rx.prog.filter(|_| rx.receivers[fi]);
    let f = &mut funcs[fi];
    let r = f.port.poll(q, rx.budget, (), prog);
    let changed = prog.is_some();
    let Func { host, rx: counts, .. } = f;
    host.drain_received(|frame| {
        if let Some(c) = counts.get_mut(usize::from(frame.qid)) {
            rx.check.take(c, frame.data(), changed);
        }
    });
    carry_out_redirects(funcs, fi, rx);
    r
}

/// What became of the program's redirects that did not leave through a redirect-in ring.
#[derive(Clone, Copy, Debug, Default)]
struct Redirected {
    /// Frames given to the user sink (xskmap).
    xsk: u64,
    /// Frames a cpumap passed to the OS, by CPU.
    cpus: [u64; crate::xdp_obj::CPUS as usize],
    /// Broadcast copies sent out of a stack TX ring (frames beyond the one redirected), and
    /// those lost (no packet buffer, or a full ring).
    copies: u64,
    copies_lost: u64,
    /// Broadcasts with no port to go to (the frame is gone).
    nowhere: u64,
}

impl Redirected {
    /// Frames a cpumap passed.
    fn cpumap_passes(&self) -> u64 {
        self.cpus.iter().sum()
    }
}

/// The program's redirects of function `fi`, carried out as replay mode carries them out
/// ([`crate::carry`]): out of a port's redirect-in ring of the same queue index (the other
/// port, or the ingress port for a hairpin), to the user sink (counted, nothing copied), to the
/// OS on a cpumap's CPU (checked and counted as received on the queue it arrived on), a copy
/// out of every port of a broadcast.
fn carry_out_redirects(funcs: &mut [Func<'_>], fi: usize, rx: &mut RxCtx<'_>) {
    let hosts: Vec<Host<'_>> = funcs.iter().map(|f| f.host.clone()).collect();
    let queues = funcs[fi].rx.len() as u16;
    // Frames a cpumap passed: queue index and their counts, added after the ports are free.
    let mut passed: Vec<(u16, QueueRx)> = Vec::new();
    let mut ports = crate::carry::Ports {
        hosts: &hosts,
        ports: funcs.iter_mut().map(|f| &mut f.port).collect(),
        queues,
    };
    let (check, r) = (&rx.check, &mut *rx.redirected);
    ports.carry_out(fi, &mut |e| match e {
        Event::Xsk { .. } => r.xsk += 1,
        Event::Cpu { cpu, queue, data, .. } => {
            r.cpus[cpu as usize] += 1;
            let mut c = QueueRx::default();
            check.take(&mut c, data, true);
            passed.push((queue, c));
        }
        Event::Copy(_, true) => r.copies += 1,
        Event::Copy(_, false) => r.copies_lost += 1,
        Event::Broadcast(_) | Event::Meta { .. } => {}
        Event::Nowhere => r.nowhere += 1,
    });
    for (q, c) in passed {
        if let Some(t) = funcs[fi].rx.get_mut(usize::from(q)) {
            t.packets += c.packets;
            t.bytes += c.bytes;
            t.changed += c.changed;
            t.corrupt += c.corrupt;
        }
    }
}

/// One round of NAPI: every scheduled queue polled until it caught up; returns whether anything
/// is still moving.
fn napi_round(funcs: &mut [Func<'_>], rx: &mut RxCtx<'_>) -> Result<bool, String> {
    let mut busy = false;
    for fi in 0..funcs.len() {
        for q in 0..funcs[fi].rx.len() as u16 {
            // The reclaims of the queue's TX rings (the module's NAPI poll does them; TX
            // completions raise no interrupt of their own here).
            let port = &mut funcs[fi].port;
            let stack = port.queue::<TxLock, _>(q, |p, t| p.tx_clean(t, 64));
            let xmit = port.queue::<XmitLock, _>(q, |p, t| p.xmit_clean(t));
            busy |= stack.in_flight > 0 || xmit.in_flight > 0;
            if !funcs[fi].napi[usize::from(q)] {
                continue;
            }
            let mut caught_up = false;
            let mut tx_pending = false;
            for _ in 0..1024 {
                let r = poll_queue(funcs, fi, q, rx);
                if r.error {
                    return Err(format!("PF{fi} queue {q}: a ring is in its error state"));
                }
                busy |= r.done > 0;
                tx_pending = r.tx_pending;
                if !r.more {
                    caught_up = true;
                    break;
                }
            }
            // NAPI complete: wait for the next interrupt, unless XDP_TX frames are still on the
            // queue's own ring (their reclaim is the poll's: poll again next tick, as the
            // module's glue does).
            funcs[fi].napi[usize::from(q)] = !caught_up || tx_pending;
            busy |= !caught_up || tx_pending;
        }
    }
    Ok(busy)
}

/// One PCI function: its port, the port's host, and the run's per-queue counters.
struct Func<'c> {
    port: SoloPort<Host<'c>>,
    host: Host<'c>,
    rx: Vec<QueueRx>,
    /// Frames refused by a full TX ring, per queue (the generator retries them).
    tx_busy: Vec<u64>,
    /// RX queues whose NAPI poll is scheduled (by an interrupt, or because the last poll did not
    /// catch up).
    napi: Vec<bool>,
}

impl Func<'_> {
    /// Every queue index's counters as the port published them (RX, TX rings, XDP verdicts,
    /// pools).
    fn snapshots(&mut self) -> Result<Vec<QueueCounters>, String> {
        self.port
            .control(|p, t| p.queue_snapshots(t))
            .map_err(|e| e.to_string())
    }
}

/// One direction of traffic.
struct Stream {
    from: usize,
    to: usize,
    /// Frames to send.
    quota: u64,
    /// Frames queued on a TX ring so far.
    sent: u64,
    bytes: u64,
    /// Virtual time at which the last frame was queued.
    done_ns: u64,
}

/// Everything the run measured, for printing.
struct Totals {
    host: Duration,
    virt_ns: u64,
}

/// Largest `--tick-ns`: one virtual second per tick.
const MAX_TICK_NS: u64 = 1_000_000_000;
/// `--rate-pps` range: at least one frame per virtual second, at most far beyond any port.
const RATE_PPS: (f64, f64) = (1.0, 1e10);
/// Largest `--seconds` of virtual time.
const MAX_SECONDS: f64 = 3600.0;
/// Largest `--packets`.
const MAX_PACKETS: u64 = 10_000_000_000;
/// Most ticks the sending period may take (each costs host time, whatever happens in it).
const MAX_TICKS: u64 = 1_000_000_000;
/// Ticks the run may take after the sending period to drain.
const DRAIN_TICKS: u64 = 1_000_000;

/// What a run will do, from its checked options.
#[derive(Debug)]
struct Plan {
    sizes: Sizes,
    ring: RingSizeIdx,
    rate: f64,
    quota: u64,
    /// Ticks of the sending period.
    ticks: u64,
}

/// Checks every numeric option up front and works out the run: frames, rate, ticks, and the
/// memory it needs against what the machine has.
fn plan(args: &TrafficArgs) -> Result<Plan, String> {
    use onic_cli::limits::in_range;
    let sizes = parse_sizes(args)?;
    in_range(
        "--queues",
        args.queues,
        1,
        MAX_PORT_QUEUES,
        "queue indices per function",
    )?;
    in_range("--flows", args.flows, 1, u32::from(u16::MAX), "distinct 5-tuples")?;
    let ring = RingSizeIdx::for_entries(args.ring).ok_or_else(|| {
        format!(
            "--ring {}: not a size of the QDMA ring-size table (64, 128, 192, 256, 384, 512, 768, 1024, 1536, 3072, 4096, 6144, 8192, 12288, 16384)",
            args.ring
        )
    })?;
    in_range(
        "--tick-ns",
        args.tick_ns,
        1,
        MAX_TICK_NS,
        "virtual nanoseconds per tick",
    )?;
    in_range("--budget", args.budget, 1, 16384, "completions per poll")?;
    let line_pps = LINE_BPS / (8.0 * (sizes.mean() + WIRE_OVERHEAD));
    let rate = args.rate_pps.unwrap_or(line_pps);
    if !(rate.is_finite() && (RATE_PPS.0..=RATE_PPS.1).contains(&rate)) {
        return Err(format!(
            "--rate-pps {rate}: outside {}..={:e} (frames per virtual second)",
            RATE_PPS.0, RATE_PPS.1
        ));
    }
    let quota = match (args.packets, args.seconds) {
        (Some(p), _) => in_range("--packets", p, 1, MAX_PACKETS, "frames per direction")?,
        (None, Some(s)) => {
            if !(s.is_finite() && s > 0.0 && s <= MAX_SECONDS) {
                return Err(format!(
                    "--seconds {s}: outside 0..={MAX_SECONDS} (virtual seconds, above 0)"
                ));
            }
            // CAST: at most 1e10 x 3600, far below u64::MAX.
            ((rate * s).round() as u64).max(1)
        }
        (None, None) => 200_000,
    };
    // CAST: quota <= 3.6e13 and rate >= 1, so the product stays far below u64::MAX.
    let send_ns = (quota as f64 / rate * 1e9).ceil();
    let ticks = (send_ns / args.tick_ns as f64).ceil();
    if ticks > MAX_TICKS as f64 {
        return Err(format!(
            "{quota} frames at {rate} frames per virtual second take {:.3e} ticks of --tick-ns {}; at most {MAX_TICKS}: raise --tick-ns or --rate-pps, or send fewer frames",
            ticks, args.tick_ns
        ));
    }
    check_memory(args, ring, rate)?;
    // CAST: ticks <= MAX_TICKS (checked above).
    Ok(Plan {
        sizes,
        ring,
        rate,
        quota,
        ticks: ticks as u64,
    })
}

/// Refuses a run whose pages would not fit the machine.
fn check_memory(args: &TrafficArgs, ring: RingSizeIdx, rate: f64) -> Result<(), String> {
    let (need, detail) = memory_need(args, ring, rate);
    let way = match args.direction {
        Way::ZeroToOne => "0to1",
        Way::OneToZero => "1to0",
        Way::Both => "both",
    };
    onic_cli::limits::check_memory(
        &format!("--queues {} --ring {} --direction {way}", args.queues, args.ring),
        need,
        &detail,
        onic_cli::limits::mem_available(),
    )
}

/// Host memory a run needs, and how that figure was made: every RX ring full of pages plus what
/// each pool may cache, on both functions, and the OS's TX buffers of each sending function
/// (frames due in a tick, at most a ring's worth per queue).
fn memory_need(args: &TrafficArgs, ring: RingSizeIdx, rate: f64) -> (u64, String) {
    use onic_cli::limits::{BASE_BYTES, HOST_BYTES_PER_PAGE, POOL_EXTRA_PAGES};
    let q = u64::from(args.queues);
    let usable = u64::from(ring.usable());
    let senders = if args.direction == Way::Both { 2 } else { 1 };
    let rx_pages = 2 * q * (usable + POOL_EXTRA_PAGES);
    // CAST: a checked rate of at most 1e10 frames per second, ticks of at most 1 s.
    let per_tick = (rate * args.tick_ns as f64 / 1e9).ceil() as u64;
    let tx_pages = senders * q * usable.min(per_tick / q + 64);
    let need = BASE_BYTES + (rx_pages + tx_pages) * HOST_BYTES_PER_PAGE;
    let detail = format!(
        "{rx_pages} RX and {tx_pages} TX pages of the model at {} KiB each",
        HOST_BYTES_PER_PAGE / 1024
    );
    (need, detail)
}

pub fn run(args: &TrafficArgs, obj: &ObjOpts) -> Result<(), String> {
    let plan = plan(args)?;
    let prog = match &obj.xdp_obj {
        Some(_) if args.direction == Way::Both => {
            return Err("--xdp-obj in traffic mode needs one direction (0to1 or 1to0): with both, frames a program sends back would meet it again".into())
        }
        Some(p) => Some(crate::xdp_obj::load(obj, p)?),
        None => None,
    };
    announce(args, &plan);
    let mut cc = CardConfig::default();
    cc.wire = Wire::Cable;
    cc.capture_egress = false;
    let card = Card::new(cc);
    let host: Host<'_> = ModelHost::new(&card);
    host.set_targets(&crate::xdp_obj::redirect_targets());
    let prog = prog.map(|p| host.attach(p));
    let funcs = bring_up(&host, args, plan.ring)?;
    let streams = streams(args.direction, plan.quota);
    // With a program, it runs on the queues of the functions that receive a stream.
    let receivers: Vec<bool> = (0..2)
        .map(|f| prog.is_some() && streams.iter().any(|s| s.to == f))
        .collect();
    let mut run = Run {
        args,
        card: &card,
        host,
        send_ticks: plan.ticks,
        gen: Generator {
            flows: make_flows(args.flows, args.proto, args.seed),
            ramp: ramp(),
            rng: Rng::from_state(args.seed | 1),
            sizes: plan.sizes,
            rate: plan.rate,
        },
        funcs,
        streams,
        prog,
        receivers,
        redirected: Redirected::default(),
    };
    let totals = run.drive()?;
    run.finish(&totals, obj)
}

/// The lines that say what the run will do.
fn announce(args: &TrafficArgs, plan: &Plan) {
    outln!(
        "onic run: PF0 + PF1 on one model card, cable port 0 <-> port 1; {} queue indices each, rings of {} entries, budget {}",
        args.queues,
        plan.ring.entries(),
        args.budget
    );
    outln!(
        "  traffic: {} frames per direction ({}), sizes {} (wire bytes), {} flows ({}), rate {:.3} Mpps per direction in virtual time{}, tick {} ns",
        plan.quota,
        match args.direction {
            Way::ZeroToOne => "port 0 -> port 1",
            Way::OneToZero => "port 1 -> port 0",
            Way::Both => "both ways",
        },
        plan.sizes.describe(),
        args.flows,
        match args.proto {
            Proto::Udp => "UDP",
            Proto::Tcp => "TCP",
            Proto::Mixed => "UDP and TCP",
        },
        plan.rate / 1e6,
        if args.rate_pps.is_none() { " (100 GbE line rate)" } else { "" },
        args.tick_ns
    );
    outln!("  received frames: checked byte for byte, then handed to the OS (XDP_PASS), which gives the page back after the poll");
}

/// Brings up PF0 and PF1 as ports over `host` with `--queues` queue indices each, and opens
/// them.
fn bring_up<'c>(host: &Host<'c>, args: &TrafficArgs, ring: RingSizeIdx) -> Result<Vec<Func<'c>>, String> {
    let mut funcs = Vec::new();
    for f in 0..2u8 {
        let cfg = PortConfig {
            func: f,
            max_queues: args.queues,
            queues: args.queues,
            tx_ring: ring,
            rx_ring: ring,
            rs_fec: DeviceConfig::new(f, args.queues)
                .map_err(|e| format!("{e:?}"))?
                .rs_fec,
        };
        let h = host.for_port(f);
        let mut port = SoloPort::new(h.regs(f), h.delay(), h.clone(), cfg)
            .map_err(|e| format!("PF{f} bring-up: {e}"))?;
        port.open().map_err(|e| format!("PF{f} queue start: {e}"))?;
        funcs.push(Func {
            port,
            host: h,
            rx: vec![QueueRx::default(); usize::from(args.queues)],
            tx_busy: vec![0; usize::from(args.queues)],
            // A first poll of every queue, as the OS does when it opens the device.
            napi: vec![true; usize::from(args.queues)],
        });
    }
    Ok(funcs)
}

/// The streams `--direction` asks for, `quota` frames each.
fn streams(way: Way, quota: u64) -> Vec<Stream> {
    match way {
        Way::ZeroToOne => vec![(0, 1)],
        Way::OneToZero => vec![(1, 0)],
        Way::Both => vec![(0, 1), (1, 0)],
    }
    .into_iter()
    .map(|(from, to)| Stream {
        from,
        to,
        quota,
        sent: 0,
        bytes: 0,
        done_ns: 0,
    })
    .collect()
}

/// What the sending side needs to make frames: the flows, the payload ramp, the sizes and the
/// rate.
struct Generator {
    flows: Vec<Flow>,
    ramp: Vec<u8>,
    /// Draws random sizes (`--size-range`).
    rng: Rng,
    sizes: Sizes,
    rate: f64,
}

impl Generator {
    /// The OS of `s`'s sending function transmits what the rate makes due by `now_ns` (each
    /// transmit reclaims its ring first, as the module's does); returns whether the stream still
    /// had frames to send when the tick began.
    fn send_due(&mut self, s: &mut Stream, func: &mut Func<'_>, now_ns: u64) -> Result<bool, String> {
        let due = ((self.rate * now_ns as f64 / 1e9) as u64).min(s.quota);
        let sending = s.sent < s.quota;
        let queues = func.rx.len();
        while s.sent < due {
            let k = s.sent;
            let flow_id = (k % self.flows.len() as u64) as u16;
            let q = usize::from(flow_id) % queues;
            let len = self.size(k) - onic_sim::FCS_LEN;
            let (flow, ramp) = (&self.flows[usize::from(flow_id)], &self.ramp);
            let skb = func
                .host
                .packet_with(len, |b| {
                    build_frame(b, flow, flow_id, k as u32, s.from as u8, ramp)
                })
                .ok_or("no OS TX buffer left for the generator")?;
            let mut done = Default::default();
            // CAST: q < queues <= 21.
            let r = func
                .port
                .queue::<TxLock, _>(q as u16, |p, t| p.xmit(t, skb, &mut done));
            match r {
                XmitResult::Ok | XmitResult::OkStop => {
                    s.sent += 1;
                    s.bytes += len as u64;
                    s.done_ns = now_ns;
                }
                XmitResult::Busy => {
                    func.host.skb_done(skb, None);
                    func.tx_busy[q] += 1;
                    break;
                }
                XmitResult::Dropped => {
                    func.host.skb_done(skb, None);
                    return Err("the driver refused a frame of the generator".into());
                }
            }
        }
        for q in 0..queues as u16 {
            func.port.queue::<TxLock, _>(q, |p, t| p.tx_flush(t));
        }
        Ok(sending)
    }

    /// The wire size of frame `k`.
    fn size(&mut self, k: u64) -> usize {
        match &self.sizes {
            Sizes::List(v) => v[(k % v.len() as u64) as usize],
            Sizes::Range(a, b) => a + (self.rng.next() % (b - a + 1) as u64) as usize,
        }
    }
}

/// A run in progress: the card, both functions, the streams and the receiving side's state.
struct Run<'x, 'c> {
    args: &'x TrafficArgs,
    card: &'c Card,
    /// The host of both ports (PF0's; PF1's shares its state).
    host: Host<'c>,
    /// Ticks of the sending period.
    send_ticks: u64,
    gen: Generator,
    funcs: Vec<Func<'c>>,
    streams: Vec<Stream>,
    /// The object's handle in the host, if one is attached.
    prog: Option<u16>,
    /// Functions whose queues run the program.
    receivers: Vec<bool>,
    /// What became of the program's redirects.
    redirected: Redirected,
}

impl Run<'_, '_> {
    /// Runs ticks until every stream has sent its quota and the datapath has been quiet for
    /// three ticks.
    fn drive(&mut self) -> Result<Totals, String> {
        let args = self.args;
        let start = Instant::now();
        let mut last_progress = start;
        let total_quota: u64 = self.streams.iter().map(|s| s.quota).sum();
        let mut tick: u64 = 0;
        let mut quiet_ticks = 0;
        loop {
            tick += 1;
            // At most MAX_TICKS + DRAIN_TICKS ticks of at most MAX_TICK_NS: no overflow.
            let now_ns = tick.saturating_mul(args.tick_ns);
            let (sending, busy) = self.tick(now_ns)?;
            if let Some(id) = self.prog {
                let (runs, check) = self
                    .host
                    .with_program(id, |p| (p.engine.stats().runs, p.check()))
                    .unwrap_or((0, Ok(())));
                if runs > 4 * total_quota + 4096 {
                    return Err("the XDP program has run four times per frame sent: frames circle through it (a redirect out of the port that feeds the receiving one?)".into());
                }
                check?;
            }
            if args.progress_ms > 0 && last_progress.elapsed() >= Duration::from_millis(args.progress_ms) {
                last_progress = Instant::now();
                self.progress(start, total_quota, now_ns);
            }
            if !sending && !busy {
                quiet_ticks += 1;
                if quiet_ticks >= 3 {
                    break;
                }
            } else {
                quiet_ticks = 0;
            }
            if tick > self.send_ticks + DRAIN_TICKS {
                return Err(format!(
                    "the run did not finish within {} ticks ({} of sending, {DRAIN_TICKS} to drain)",
                    self.send_ticks + DRAIN_TICKS,
                    self.send_ticks
                ));
            }
        }
        if args.progress_ms > 0 && start.elapsed() >= Duration::from_millis(args.progress_ms) {
            errln!();
        }
        Ok(Totals {
            host: start.elapsed(),
            virt_ns: self.streams.iter().map(|s| s.done_ns).max().unwrap_or(0),
        })
    }

    /// One tick: the senders transmit, the card works and its clock moves, interrupts schedule
    /// NAPI polls and the scheduled queues are polled. Returns (a stream was still sending,
    /// anything still moving).
    fn tick(&mut self, now_ns: u64) -> Result<(bool, bool), String> {
        // 1. The OS of each sending function transmits what the rate makes due by the end of this
        //    tick.
        let mut sending = false;
        for s in &mut self.streams {
            sending |= self.gen.send_due(s, &mut self.funcs[s.from], now_ns)?;
        }
        // 2. The card works, its clock moves by one tick (completion timers fire).
        self.card.run_until_idle();
        self.card.advance_time(self.args.tick_ns);
        self.card.run_until_idle();
        // 3. Interrupts schedule their queue's NAPI poll (MSI-X vector = queue index); a scheduled
        //    queue is polled until it has caught up and re-armed. The OS gives the pages back after
        //    each poll.
        for irq in self.card.take_interrupts() {
            if let Some(n) = self
                .funcs
                .get_mut(usize::from(irq.func))
                .and_then(|f| f.napi.get_mut(usize::from(irq.vector)))
            {
                *n = true;
            }
        }
        let mut rx = RxCtx {
            check: Checker {
                flows: &self.gen.flows,
                ramp: &self.gen.ramp,
            },
            budget: u32::try_from(self.args.budget).unwrap_or(u32::MAX),
            prog: self.prog,
            receivers: &self.receivers,
            redirected: &mut self.redirected,
        };
        let busy = napi_round(&mut self.funcs, &mut rx)?;
        Ok((sending, busy))
    }

    /// A progress line on stderr.
    fn progress(&self, start: Instant, total_quota: u64, now_ns: u64) {
        let sent: u64 = self.streams.iter().map(|s| s.sent).sum();
        let recv: u64 = self
            .funcs
            .iter()
            .flat_map(|f| f.rx.iter())
            .map(|r| r.packets)
            .sum();
        let host = start.elapsed().as_secs_f64();
        errout!(
            "\r  progress: {:5.1}% sent {sent}/{total_quota}, received {recv}, {:.3} Mpps host, virtual {:.3} ms   ",
            100.0 * sent as f64 / total_quota.max(1) as f64,
            recv as f64 / host / 1e6,
            now_ns as f64 / 1e6
        );
        let _ = std::io::stderr().flush();
    }

    /// Prints the report and the program's, tears everything down and gives the verdict.
    fn finish(mut self, totals: &Totals, obj: &ObjOpts) -> Result<(), String> {
        let xdp = self.prog.map(|_| self.redirected);
        let snaps = [self.funcs[0].snapshots()?, self.funcs[1].snapshots()?];
        let census = self.host.census();
        let report = report(
            self.card,
            &self.funcs,
            &snaps,
            (&self.streams, totals),
            (xdp, census),
        );
        out!("{}", report.text);
        if let Some(id) = self.prog {
            outln!();
            self.host
                .with_program(id, |e| crate::xdp_obj::report(e, obj.dump_maps.as_deref(), None))
                .unwrap_or(Ok(()))?;
        }
        let teardown = teardown(self.card, &self.host, self.funcs);
        out!("{}", teardown.text);
        let mut failures = report.failures;
        failures.extend(teardown.failures);
        if failures.is_empty() {
            outln!("result: OK (every frame accounted for, every byte checked, every page back)");
            Ok(())
        } else {
            outln!("result: FAILED");
            Err(failures.join("; "))
        }
    }
}

/// Printed text and the checks that failed.
struct Report {
    text: String,
    failures: Vec<String>,
}

/// One counter struct summed over a function's queue indices.
fn sum<T: Default + std::ops::AddAssign>(snaps: &[QueueCounters], get: impl Fn(&QueueCounters) -> T) -> T {
    snaps.iter().fold(T::default(), |mut t, c| {
        t += get(c);
        t
    })
}

fn hw(card: &Card, port: u8) -> Vec<(&'static str, u64)> {
    let v = read_hw_counters(&card.shell(), port);
    CMAC_STATS
        .iter()
        .chain(ADAPTER_STATS.iter())
        .zip(v)
        .map(|(c, v)| (c.name, v))
        .collect()
}

/// A named counter of a statistics struct.
type Field<T> = (&'static str, fn(&T) -> u64);

/// One line of a two-column table: a name, then the value of PF0 (port 0) and of PF1 (port 1).
fn row(s: &mut String, name: &str, a: u64, b: u64) {
    let _ = writeln!(s, "  {name:<38} {a:>14} {b:>14}");
}

/// A row per named field of `T`, for the two functions' values.
fn rows<T>(s: &mut String, fields: &[Field<T>], v: &[T]) {
    for (name, get) in fields {
        row(s, name, get(&v[0]), get(&v[1]));
    }
}

/// The driver's RX statistics the report shows.
const RX_ROWS: &[Field<RxStats>] = &[
    ("rx_packets", |r| r.rx_packets),
    ("rx_bytes", |r| r.rx_bytes),
    ("rx_dropped", RxStats::rx_dropped),
    ("rx_to_os", |r| r.to_os),
    ("rx_recycled", |r| r.recycled),
    ("rx_no_page", |r| r.rx_no_page),
    ("rx_refill_alloc_failures", |r| r.refill_alloc_failures),
    ("rx_cmpt_not_ready", |r| r.cmpt_not_ready),
    ("rx_c2h_doorbells", |r| r.c2h_doorbells),
    ("rx_cmpt_doorbells", |r| r.cmpt_doorbells),
    ("rx_rearms", |r| r.rearms),
    ("rx_rearm_rechecks", |r| r.rearm_rechecks),
];

/// The driver's TX statistics the report shows.
const TX_ROWS: &[Field<TxStats>] = &[
    ("tx_packets", |r| r.tx_packets),
    ("tx_bytes", |r| r.tx_bytes),
    ("tx_queued", |r| r.queued),
    ("tx_busy", |r| r.tx_busy),
    ("tx_stops", |r| r.stops),
    ("tx_wakes", |r| r.wakes),
    ("tx_doorbells", |r| r.doorbells),
];

/// The page pools' statistics the report shows.
const POOL_ROWS: &[Field<PoolStats>] = &[
    ("alloc.fast", |p| p.alloc.fast),
    ("alloc.slow", |p| p.alloc.slow),
    ("alloc.slow_high_order", |p| p.alloc.slow_high_order),
    ("alloc.empty", |p| p.alloc.empty),
    ("alloc.refill", |p| p.alloc.refill),
    ("alloc.waive", |p| p.alloc.waive),
    ("recycle.cached", |p| p.recycle.cached),
    ("recycle.cache_full", |p| p.recycle.cache_full),
    ("recycle.ring", |p| p.recycle.ring),
    ("recycle.ring_full", |p| p.recycle.ring_full),
    ("recycle.released_refcnt", |p| p.recycle.released_refcnt),
    ("pages_from_hal", |p| p.pages_from_hal),
    ("pages_to_hal", |p| p.pages_to_hal),
    ("os_returns", |p| p.os_returns),
];

/// Each function's queue snapshots (`ethtool -S`'s per-queue counters, pools included).
type Snaps = [Vec<QueueCounters>; 2];

/// The report of a run: rates, per-queue tables, the driver's, the pools' and the MACs'
/// statistics, and the frame and page accounting with the checks that failed.
fn report(
    card: &Card,
    funcs: &[Func<'_>],
    snaps: &Snaps,
    (streams, t): (&[Stream], &Totals),
    (xdp, census): (Option<Redirected>, ModelCensus),
) -> Report {
    let mut r = Report {
        text: String::new(),
        failures: Vec::new(),
    };
    throughput(&mut r.text, funcs, streams, t);
    for st in streams {
        per_queue(
            &mut r.text,
            (&funcs[st.to], &snaps[st.to]),
            (&funcs[st.from], &snaps[st.from]),
            st,
        );
    }
    let _ = writeln!(r.text, "\ndriver statistics {:>36} {:>14}", "PF0", "PF1");
    let rx: Vec<RxStats> = snaps.iter().map(|s| sum(s, |c| c.rx)).collect();
    let tx: Vec<TxStats> = snaps.iter().map(|s| sum(s, |c| c.tx)).collect();
    rows(&mut r.text, RX_ROWS, &rx);
    rows(&mut r.text, TX_ROWS, &tx);
    let _ = writeln!(
        r.text,
        "\npage_pool statistics (all queues) {:>20} {:>14}",
        "PF0", "PF1"
    );
    let pools: Vec<PoolStats> = snaps.iter().map(|s| sum(s, |c| c.pool)).collect();
    rows(&mut r.text, POOL_ROWS, &pools);
    // CMAC and adapter counters, read through the driver's statistics path.
    let _ = writeln!(
        r.text,
        "\nCMAC and adapter counters (read through the driver, non-zero) {:>6} {:>14}",
        "port 0", "port 1"
    );
    let hws = [hw(card, 0), hw(card, 1)];
    for ((name, a), (_, b)) in hws[0].iter().zip(&hws[1]) {
        if *a != 0 || *b != 0 {
            row(&mut r.text, name, *a, *b);
        }
    }
    let pair: Vec<PairStats> = snaps.iter().map(|s| sum(s, |c| c.pair)).collect();
    frame_accounting(&mut r, card, funcs, streams, (&rx, &tx, &pair), &hws, xdp);
    page_accounting(&mut r, card, &pools, census);
    r
}

/// Rates per direction, in virtual and in host time.
fn throughput(s: &mut String, funcs: &[Func<'_>], streams: &[Stream], t: &Totals) {
    let host_s = t.host.as_secs_f64();
    let virt_s = t.virt_ns as f64 / 1e9;
    let _ = writeln!(s, "\nthroughput");
    let _ = writeln!(
        s,
        "  {:<9} {:>10} {:>14} {:>10} {:>14} {:>11} {:>12} {:>12} {:>10}",
        "direction",
        "sent",
        "sent_bytes",
        "received",
        "recv_bytes",
        "virtual_ms",
        "virt_Mpps",
        "virt_Gbps",
        "host_Mpps"
    );
    for st in streams {
        let recv: u64 = funcs[st.to].rx.iter().map(|r| r.packets).sum();
        let rbytes: u64 = funcs[st.to].rx.iter().map(|r| r.bytes).sum();
        let wire_bits = 8.0 * (rbytes as f64 + recv as f64 * (onic_sim::FCS_LEN as f64 + WIRE_OVERHEAD));
        let _ = writeln!(
            s,
            "  {:<9} {:>10} {:>14} {:>10} {:>14} {:>11.3} {:>12.3} {:>12.3} {:>10.3}",
            format!("{}->{}", st.from, st.to),
            st.sent,
            st.bytes,
            recv,
            rbytes,
            st.done_ns as f64 / 1e6,
            recv as f64 / virt_s.max(1e-12) / 1e6,
            wire_bits / virt_s.max(1e-12) / 1e9,
            recv as f64 / host_s / 1e6
        );
    }
    let _ = writeln!(
        s,
        "  host time {:.3} s; virtual time {:.3} ms (virt_* = frames received / virtual time of the sending period; Gbps counts FCS, preamble and gap)",
        host_s,
        virt_s * 1e3
    );
}

/// The per-queue table of stream `st`'s receiving function `f` (and its sender `tx`), each with
/// its queue snapshots.
fn per_queue(
    s: &mut String,
    (f, f_snaps): (&Func<'_>, &[QueueCounters]),
    (tx, tx_snaps): (&Func<'_>, &[QueueCounters]),
    st: &Stream,
) {
    let total: u64 = f.rx.iter().map(|r| r.packets).sum();
    let _ = writeln!(
        s,
        "\nper-queue: PF{} RX (port {}) <- PF{} TX (port {})",
        st.to, st.to, st.from, st.from
    );
    let _ = writeln!(
        s,
        "  {:>5} {:>10} {:>12} {:>7} {:>8} {:>8} {:>8} {:>8} {:>8} {:>11} {:>8}",
        "queue",
        "rx_packets",
        "rx_bytes",
        "rss_%",
        "drop_err",
        "drop_len",
        "drop_mb",
        "drop_np",
        "corrupt",
        "tx_packets",
        "tx_busy"
    );
    for (q, (c, r)) in f_snaps.iter().zip(&f.rx).enumerate() {
        let rs = &c.rx;
        let _ = writeln!(
            s,
            "  {:>5} {:>10} {:>12} {:>7.2} {:>8} {:>8} {:>8} {:>8} {:>8} {:>11} {:>8}",
            q,
            r.packets,
            r.bytes,
            100.0 * r.packets as f64 / total.max(1) as f64,
            rs.rx_cmpt_errors,
            rs.rx_bad_length,
            rs.rx_multi_buffer,
            rs.rx_no_page,
            r.corrupt,
            tx_snaps.get(q).map_or(0, |c| c.tx.tx_packets),
            tx.tx_busy[q]
        );
    }
    let _ = writeln!(
        s,
        "  (drop_err: completion error bit, drop_len: bad length, drop_mb: multi-buffer frame, drop_np: no replacement page; rss_%: share of the port's frames; tx_busy: frames the generator had to hold back for a full TX ring)"
    );
}

/// Where every frame sent went: received, corrupt, taken by the program, dropped by the driver
/// or by the model; the TX queues completed every frame they were given.
fn frame_accounting(
    r: &mut Report,
    card: &Card,
    funcs: &[Func<'_>],
    streams: &[Stream],
    stats: (&[RxStats], &[TxStats], &[PairStats]),
    hws: &[Vec<(&'static str, u64)>; 2],
    xdp: Option<Redirected>,
) {
    let (rx, tx, pair) = stats;
    let model = card.stats();
    let mac_drops: u64 = (0..2)
        .map(|p| {
            card.cmac_counter(p, "stat_rx_total_pkts")
                .saturating_sub(card.cmac_counter(p, "stat_rx_total_good_pkts"))
        })
        .sum();
    let adapter = |port: usize, name: &str| -> u64 {
        hws[port].iter().find(|(n, _)| *n == name).map_or(0, |(_, v)| *v)
    };
    let tx_drops = adapter(0, "stat_adapt_tx_drop") + adapter(1, "stat_adapt_tx_drop");
    let model_drops = model.c2h_no_desc_dropped
        + model.cmpt_full_dropped
        + model.c2h_no_queue_dropped
        + model.wire_dropped
        + model.link_down_dropped
        + model.rx_disabled_dropped
        + model.tx_disabled_dropped
        + mac_drops
        + tx_drops;
    let sent: u64 = streams.iter().map(|s| s.sent).sum();
    let received: u64 = funcs.iter().flat_map(|f| f.rx.iter()).map(|r| r.packets).sum();
    let corrupt: u64 = funcs.iter().flat_map(|f| f.rx.iter()).map(|r| r.corrupt).sum();
    let driver_drops: u64 = rx.iter().map(RxStats::rx_dropped).sum();
    let (xdp_line, xdp_out, resent) = xdp_accounting(funcs, pair, xdp);
    let copies = xdp.map_or(0, |x| x.copies);
    let _ = write!(r.text, "{xdp_line}");
    let _ = writeln!(r.text, "\nframe accounting");
    let _ = writeln!(
        r.text,
        "  model drops: no descriptor {}, completion ring full {}, queue not valid {}, wire {}, link down {}, RX disabled {}, TX disabled {}, MAC {}, TX adapter {}",
        model.c2h_no_desc_dropped,
        model.cmpt_full_dropped,
        model.c2h_no_queue_dropped,
        model.wire_dropped,
        model.link_down_dropped,
        model.rx_disabled_dropped,
        model.tx_disabled_dropped,
        mac_drops,
        tx_drops
    );
    let accounted = received + corrupt + xdp_out + driver_drops + model_drops;
    // Broadcast copies are frames the run made on top of those the generator sent.
    let made = sent + copies;
    let _ = writeln!(
        r.text,
        "accounting: sent {sent}{} = received {received} + corrupt {corrupt}{} + driver drops {driver_drops} + model drops {model_drops}: {}",
        if copies > 0 { format!(" + broadcast copies {copies}") } else { String::new() },
        if xdp.is_some() { format!(" + changed/dropped/user sink/broadcast to no port {xdp_out}") } else { String::new() },
        if accounted == made { "OK" } else { "MISMATCH" }
    );
    if accounted != made {
        r.failures.push(format!(
            "{} frames unaccounted for (sent {made}, accounted {accounted})",
            made as i128 - accounted as i128
        ));
    }
    if corrupt > 0 {
        r.failures
            .push(format!("{corrupt} frames arrived with wrong bytes"));
    }
    let tx_done: u64 = tx.iter().map(|t| t.tx_packets).sum();
    if tx_done != sent + resent {
        r.failures.push(format!(
            "the TX queues completed {tx_done} of {} frames",
            sent + resent
        ));
    }
}

/// Where every page is: the model's live pages against the pages the pools took from it and the
/// OS's packet buffers; and nothing the host holds that it should not (frames unread or
/// redirected and not carried out, packets not completed).
fn page_accounting(r: &mut Report, card: &Card, pools: &[PoolStats], census: ModelCensus) {
    let _ = writeln!(r.text, "\npage accounting {:>38} {:>14}", "PF0", "PF1");
    row(
        &mut r.text,
        "pool pages live (taken from the HAL)",
        pools[0].live_pages(),
        pools[1].live_pages(),
    );
    let _ = writeln!(
        r.text,
        "  OS TX buffers (own pages, not pooled): {}; held by the host: {} received, {} redirected, {} packets in flight",
        census.buffers, census.received, census.frames, census.packets
    );
    let live = card.dma_stats().live_pages as u64;
    let pooled: u64 = pools.iter().map(PoolStats::live_pages).sum();
    let expect = pooled + census.buffers;
    let held = census.received + census.frames + census.packets;
    let _ = writeln!(
        r.text,
        "  model: {live} live pages = pool pages {pooled} + OS TX buffers {}: {}",
        census.buffers,
        if live == expect && held == 0 {
            "OK"
        } else {
            "MISMATCH"
        }
    );
    if live != expect || held != 0 {
        r.failures.push(format!(
            "page accounting: model {live} live pages, driver and host account for {expect}; the host still holds {held}"
        ));
    }
}

/// With a program: a line of XDP totals and one of what became of the redirects, the frames
/// the program took out of the stream (changed, dropped or aborted, given to the user sink,
/// broadcast to no port), and the frames sent back out (XDP_TX, redirects out of a port and
/// broadcast copies, which the TX queues also complete).
fn xdp_accounting(funcs: &[Func<'_>], pair: &[PairStats], xdp: Option<Redirected>) -> (String, u64, u64) {
    let Some(r) = xdp else {
        return (String::new(), 0, 0);
    };
    let x = pair.iter().fold(PairStats::default(), |mut t, p| {
        t += *p;
        t
    });
    let changed: u64 = funcs.iter().flat_map(|f| f.rx.iter()).map(|r| r.changed).sum();
    let out_of_ports = x.rx_xdp_redirect - r.xsk - r.cpumap_passes() - r.nowhere;
    let resent = (x.rx_xdp_tx - x.rx_xdp_tx_errors) + out_of_ports + r.copies;
    let per_cpu: Vec<String> = (0..).zip(r.cpus).map(|(c, n)| format!("CPU {c}: {n}")).collect();
    let line = format!(
        "  XDP: pass {} (changed by the program {changed}), drop {} (aborted {}, invalid {}), tx {} (errors {}), redirect {} (errors {}, to the user sink {})\n  XDP redirects: out of a port {out_of_ports}, to the OS by cpumap {} ({}), broadcast copies {} (lost {}), broadcast to no port {}\n",
        x.rx_xdp_pass, x.rx_xdp_drop, x.rx_xdp_aborted, x.rx_xdp_invalid, x.rx_xdp_tx, x.rx_xdp_tx_errors, x.rx_xdp_redirect, x.rx_xdp_redirect_errors, r.xsk,
        r.cpumap_passes(), per_cpu.join(", "), r.copies, r.copies_lost, r.nowhere
    );
    (line, changed + x.rx_xdp_drop + r.xsk + r.nowhere, resent)
}

/// Tears everything down (each port stopped, then removed) and checks that the model has no
/// page, mapping or ring left and saw no violation.
fn teardown(card: &Card, host: &Host<'_>, funcs: Vec<Func<'_>>) -> Report {
    let mut failures = Vec::new();
    for f in funcs {
        let mut port = f.port;
        if let Err(e) = port.stop() {
            failures.push(format!("queue teardown: {e}"));
        }
        port.remove();
    }
    host.free_spare();
    let d = card.dma_stats();
    let v = card.violations();
    let ok = d.live_pages == 0 && d.mapped_pages == 0 && d.live_regions == 0 && v.is_empty();
    let text = format!(
        "after teardown: {} live pages, {} mapped, {} rings, {} violations: {}\n",
        d.live_pages,
        d.mapped_pages,
        d.live_regions,
        v.len(),
        if ok { "OK" } else { "LEAK OR VIOLATION" }
    );
    if !ok {
        failures.push(format!(
            "after teardown: {} pages, {} mappings, {} rings left; violations: {:?}",
            d.live_pages,
            d.mapped_pages,
            d.live_regions,
            v.iter().take(3).map(ToString::to_string).collect::<Vec<_>>()
        ));
    }
    Report { text, failures }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_through_the_check() {
        let flows = make_flows(10, Proto::Mixed, 7);
        let ramp = ramp();
        for (i, len) in [60usize, 61, 200, 1514].into_iter().enumerate() {
            let mut f = vec![0u8; len];
            let id = (i % 10) as u16;
            build_frame(&mut f, &flows[usize::from(id)], id, 1000 + i as u32, 0, &ramp);
            assert_eq!(check_frame(&f, &flows, &ramp), Some(()));
            let last = f.len() - 1;
            f[last] ^= 1;
            assert_eq!(check_frame(&f, &flows, &ramp), None);
        }
    }

    fn args() -> TrafficArgs {
        TrafficArgs {
            sizes: vec![64, 512, 1518],
            size_range: None,
            flows: 256,
            proto: Proto::Mixed,
            rate_pps: None,
            packets: None,
            seconds: None,
            direction: Way::ZeroToOne,
            queues: 4,
            ring: 1024,
            budget: 64,
            tick_ns: 1000,
            seed: 1,
            progress_ms: 0,
        }
    }

    #[test]
    fn the_memory_of_a_run_is_estimated_and_checked() {
        // The case: 64 pairs, 16384-entry rings, both directions: about 17 GB.
        let a = TrafficArgs {
            queues: 64,
            ring: 16384,
            direction: Way::Both,
            ..args()
        };
        let ring = RingSizeIdx::for_entries(16384).unwrap();
        let (need, detail) = memory_need(&a, ring, 17e6);
        assert!(
            (17_000_000_000..18_000_000_000).contains(&need),
            "{need} {detail}"
        );
        let e = onic_cli::limits::check_memory("x", need, &detail, Some(8_000_000_000)).unwrap_err();
        assert!(e.contains("17.") && e.contains("8.0 GB available"), "{e}");
        // The default run needs well under 200 MB (measured: about 75 MB).
        let (small, _) = memory_need(&args(), RingSizeIdx::for_entries(1024).unwrap(), 17e6);
        assert!(small < 200_000_000, "{small}");
    }

    #[test]
    fn a_run_is_planned_within_its_bounds() {
        let p = plan(&args()).unwrap();
        assert_eq!(p.quota, 200_000);
        assert!(p.ticks > 0 && p.ticks < 20_000);
        let slow = TrafficArgs {
            rate_pps: Some(1.0),
            packets: Some(10),
            ..args()
        };
        assert_eq!(plan(&slow).unwrap().ticks, 10_000_000);
        let forever = TrafficArgs {
            rate_pps: Some(1.0),
            ..args()
        };
        assert!(plan(&forever).unwrap_err().contains("ticks"));
    }

    #[test]
    fn sizes_are_checked() {
        let mut a = TrafficArgs {
            sizes: vec![64, 1518],
            size_range: None,
            flows: 1,
            proto: Proto::Udp,
            rate_pps: None,
            packets: None,
            seconds: None,
            direction: Way::ZeroToOne,
            queues: 1,
            ring: 64,
            budget: 64,
            tick_ns: 1000,
            seed: 1,
            progress_ms: 0,
        };
        assert!(parse_sizes(&a).is_ok());
        a.sizes = vec![63];
        assert!(parse_sizes(&a).is_err());
        a.size_range = Some("100..=200".into());
        assert!(matches!(parse_sizes(&a), Ok(Sizes::Range(100, 200))));
        a.size_range = Some("200..100".into());
        assert!(parse_sizes(&a).is_err());
    }
}
