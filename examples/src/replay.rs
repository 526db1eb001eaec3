//! `onic run --pcap`: replays a capture into a port of the device model, through the driver and
//! an XDP program, and writes what came out as captures:
//!
//! | file | what |
//! | --- | --- |
//! | `pass.pcap` | frames the OS received (XDP_PASS, or every frame without a program) |
//! | `tx-port0.pcap`, `tx-port1.pcap` | frames that left each port (XDP_TX, XDP_REDIRECT) |
//! | `drop.pcap` | frames the program dropped (XDP_DROP, ABORTED), as the program left them |
//! | `xsk.pcap` | with `--xdp-obj`: frames redirected to an AF_XDP socket (an xskmap entry) |
//!
//! Both ports are brought up (PCI function 0 drives port 0, function 1 port 1), each with
//! `--queues` queue pairs over which the shell's RSS spreads the frames; the wire is open, so a
//! frame sent out of a port is captured, not looped back. Output frames carry the timestamp of the
//! last input frame replayed before they came out.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use onic_cli::pcap;
use onic_core::config::{DeviceConfig, RingSizeIdx, RxQueueConfig};
use onic_core::queue::pool::RecycleRing;
use onic_core::queue::rx::RxFrame;
use onic_core::rss::ShellHasher;
use onic_core::stats::ethtool::{EthtoolStats, Stats64};
use onic_core::stats::QueueCounters;
use onic_core::xdp::{
    DevMap, RawXdpProgram, RedirectTarget, Redirected, TxTarget, XdpAction, XdpBuff, XdpDispatch, XdpFrame,
};
use onic_core::{Device, PassInfo, QueueId, RxContext, XdpRxq};
use onic_embed::done::FrameDone;
use onic_embed::set::{PairSpec, QueueSet};
use onic_hal::{Direction, DmaPage};
use onic_sim::{Card, CardConfig, QdmaWindow, ShellWindow, SimDma, Wire};

use crate::xdp_obj::{ObjOpts, Prog, XSK_SINK};
use crate::xdp_progs::{this_and_other, Builtin, OTHER_PORT, PROGRAMS};

/// Frames injected before the driver polls.
const BATCH: usize = 256;
/// Ring-size index of every ring (1024 entries).
const RING_SIZE_IDX: u8 = 8;

fn program_help() -> String {
    let list: Vec<String> = PROGRAMS.iter().map(|(n, d)| format!("{n} ({d})")).collect();
    format!(
        "XDP program to run: {}. Without one, every frame goes to the OS",
        list.join("; ")
    )
}

/// Options of `onic run` in replay mode (`--pcap` or `--xdp`); the queue count comes from the
/// common `--queues`.
#[derive(clap::Args)]
#[command(next_help_heading = "Replay mode (--pcap or --xdp)")]
pub struct ReplayOpts {
    /// Capture to replay (pcap with Ethernet link type). Without it, `--xdp` replays a generated
    /// sample mix (the frames of `onic pcap-sample`).
    #[arg(long)]
    pub pcap: Option<PathBuf>,
    /// Frames of the generated sample mix when no `--pcap` is given (1..=100000000).
    #[arg(long, default_value_t = 2000)]
    pub frames: usize,
    /// Port the capture comes in on.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=1))]
    pub port: u8,
    #[arg(long, help = program_help())]
    pub xdp: Option<String>,
    /// Directory for the output captures (created if missing; checked writable before the
    /// replay).
    #[arg(long, default_value = "onic-run-out")]
    pub out_dir: PathBuf,
    /// UDP destination port dropped by `--xdp drop-udp`.
    #[arg(long, default_value_t = 53)]
    pub udp_port: u16,
    /// Print every `ethtool -S` entry, zeros included.
    #[arg(long)]
    pub all_stats: bool,
    #[command(flatten)]
    pub obj: ObjOpts,
}

impl ReplayOpts {
    /// Whether the options ask for replay mode.
    pub fn wanted(&self) -> bool {
        self.pcap.is_some() || self.xdp.is_some() || (self.obj.xdp_obj.is_some() && !self.obj.traffic)
    }
}

pub(crate) type Pair<'c> = onic_embed::set::Pair<'c, SimDma<'c>, XdpFrame<DmaPage>>;

/// One PCI function (one port) and its queue pairs.
pub(crate) struct PortRig<'c> {
    pub(crate) dev: Device<QdmaWindow<'c>, ShellWindow<'c>>,
    pub(crate) pairs: Vec<Pair<'c>>,
}

/// Records frames the program dropped, then hands its verdict on.
struct DropRecorder<'p> {
    prog: &'p mut Prog,
    dropped: &'p mut Vec<Vec<u8>>,
}

impl RawXdpProgram for DropRecorder<'_> {
    fn run_raw(&mut self, x: &mut XdpBuff<'_>) -> u32 {
        let raw = self.prog.run_raw(x);
        if !matches!(
            XdpAction::from_raw(raw),
            Some(XdpAction::Pass | XdpAction::Tx | XdpAction::Redirect)
        ) {
            self.dropped.push(x.data().to_vec());
        }
        raw
    }
}

/// Output captures, in memory until the end.
#[derive(Default)]
struct Outputs {
    pass: Vec<(Duration, Vec<u8>)>,
    egress: [Vec<(Duration, Vec<u8>)>; 2],
    dropped: Vec<(Duration, Vec<u8>)>,
    xsk: Vec<(Duration, Vec<u8>)>,
}

/// The run's user sink (an AF_XDP socket in copy mode): keeps a copy of every frame.
struct XskSink<'o> {
    frames: &'o mut Vec<(Duration, Vec<u8>)>,
    ts: Duration,
}

impl RedirectTarget<DmaPage> for XskSink<'_> {
    fn enqueue(&mut self, f: XdpFrame<DmaPage>) -> Result<Redirected<DmaPage>, XdpFrame<DmaPage>> {
        let start = usize::from(f.offset);
        let bytes = f
            .page
            .bytes()
            .get(start..start + usize::from(f.len))
            .unwrap_or(&[]);
        self.frames.push((self.ts, bytes.to_vec()));
        Ok(Redirected::Copied(f))
    }

    fn flush(&mut self) {}
}

/// Brings up both functions (ports) with `queues` pairs each, frames up to `max_frame_len`;
/// pair `q` of port `f` recycles through `rings[f * queues + q]` (see [`recycle_rings`]).
pub(crate) fn bring_up<'c>(
    card: &'c Card,
    queues: u16,
    max_frame_len: u32,
    rings: &[&'c RecycleRing],
) -> Result<Vec<PortRig<'c>>, String> {
    let mut delay = card.delay();
    let ring = RingSizeIdx::new(RING_SIZE_IDX).map_err(|e| e.to_string())?;
    let mut ports = Vec::new();
    for f in 0..2u8 {
        let cfg = DeviceConfig::new(f, queues).map_err(|e| e.to_string())?;
        let (dev, _) =
            Device::init(card.qdma(f), card.shell(), &mut delay, cfg).map_err(|e| e.to_string())?;
        let mut specs = Vec::new();
        for q in 0..queues {
            let mut spec = PairSpec::new(
                QueueId::new(q),
                ring,
                RxQueueConfig::new(QueueId::new(q)).buf,
                Direction::Bidirectional,
            );
            spec.opts.max_frame_len = max_frame_len;
            specs.push(spec);
        }
        let mine = usize::from(f) * specs.len();
        let mut set = QueueSet::build(&card.dma(), &specs, &rings[mine..mine + specs.len()])
            .map_err(|e| e.to_string())?;
        set.start(&dev, &mut delay).map_err(|e| e.to_string())?;
        let pairs = set.pairs;
        ports.push(PortRig { dev, pairs });
    }
    Ok(ports)
}

/// Fresh recycle rings for a two-port bring-up ([`bring_up`], the traffic run's): one per pair
/// of both ports; the caller owns them for as long as the pools live.
pub(crate) fn recycle_rings(queues: u16) -> Vec<RecycleRing> {
    (0..2 * usize::from(queues)).map(|_| RecycleRing::new()).collect()
}

/// What a poll needs besides the pair: the pools' recycle rings, the shell's hash, the time
/// stamp of what comes out, and the DMA memory.
struct PollEnv<'a, 'c> {
    rings: &'a [&'c RecycleRing],
    hasher: &'a ShellHasher,
    ts: Duration,
    dma: SimDma<'c>,
}

/// Polls pair `q` of port `f` once through the XDP path; returns whether it still has work.
fn poll_pair(
    ports: &mut [PortRig<'_>],
    f: usize,
    q: usize,
    prog: Option<&mut DropRecorder<'_>>,
    out: &mut Outputs,
    env: &PollEnv<'_, '_>,
) -> bool {
    let PollEnv {
        rings,
        hasher,
        ts,
        dma,
    } = *env;
    let Outputs {
        pass: passed, xsk, ..
    } = out;
    let mut sink = XskSink { frames: xsk, ts };
    let (me, other) = this_and_other(ports, f);
    let PortRig { dev, pairs } = me;
    let db = dev.doorbells();
    let other_db = other.dev.doorbells();
    let nq_other = other.pairs.len();
    let mut target = TxTarget::new(&mut other.pairs[q % nq_other].tx, &other_db);
    let mut map: DevMap<'_, DmaPage, 2> = DevMap::new();
    let _ = map.insert(OTHER_PORT, &mut target);
    let _ = map.insert(XSK_SINK, &mut sink);
    let mut os_pages: Vec<(DmaPage, usize)> = Vec::new();
    let mut pass = |fr: RxFrame<DmaPage>, _: PassInfo| -> Result<(), RxFrame<DmaPage>> {
        passed.push((ts, fr.data().to_vec()));
        os_pages.push((fr.page, usize::from(fr.offset) + usize::from(fr.len)));
        Ok(())
    };
    let origin = f * pairs.len() + q;
    let mut ctx = RxContext {
        sink: &mut pass,
        rxq: XdpRxq {
            queue_index: q as u16,
            port: f as u8,
        },
        dispatch: XdpDispatch {
            prog: prog.map(|p| p as &mut dyn RawXdpProgram),
            redirect: &mut map,
            origin: origin as u32,
            hasher: Some(hasher),
        },
    };
    let mut done = FrameDone::new(rings, dma);
    let pair = &mut pairs[q];
    let r = pair.poll(64, &db, &mut ctx, &mut done);
    // The "OS" is done with the passed frames once they are copied: their pages go home.
    for (page, end) in os_pages {
        pair.pool.return_from_os(page, end.saturating_sub(256));
    }
    !r.rx.armed || r.rx.more || r.rx.done > 0 || r.tx.completed > 0 || pair.tx.in_flight() > 0
}

/// Tears every queue and both functions down; returns the pages still live in the model
/// (0 unless something leaked).
pub(crate) fn teardown(
    card: &Card,
    ports: Vec<PortRig<'_>>,
    rings: &[&RecycleRing],
) -> Result<usize, String> {
    let mut delay = card.delay();
    let (devs, sets): (Vec<_>, Vec<_>) = ports
        .into_iter()
        .map(|p| (p.dev, QueueSet { pairs: p.pairs }))
        .unzip();
    let mut done = FrameDone::new(rings, card.dma());
    // TX queues first: redirected pages find their pools still there.
    QueueSet::teardown_all(devs.iter().zip(sets).collect(), &mut delay, &mut done)
        .map_err(|e| e.to_string())?;
    for dev in devs {
        let (r, _, _) = dev.teardown(&mut delay);
        r.map_err(|e| e.to_string())?;
    }
    Ok(card.dma_stats().live_pages)
}

fn print_stats(port: usize, rig: &PortRig<'_>, all: bool) {
    let counters: Vec<QueueCounters> = rig.pairs.iter().map(Pair::counters).collect();
    let stats = EthtoolStats::new(rig.dev.hw_counters(), &counters);
    outln!("NIC statistics (port {port}, ethtool -S):");
    let mut hidden = 0;
    for (name, value) in stats.iter() {
        if all || value != 0 {
            outln!("     {name}: {value}");
        } else {
            hidden += 1;
        }
    }
    if hidden > 0 {
        outln!("     ({hidden} more entries are 0; --all-stats shows them)");
    }
    let s64 = Stats64::from_queues(&counters, rig.dev.adapter_rx_drops());
    outln!(
        "  stats64: rx_packets {} rx_bytes {} tx_packets {} tx_bytes {} rx_dropped {} rx_errors {} rx_missed_errors {}",
        s64.rx_packets, s64.rx_bytes, s64.tx_packets, s64.tx_bytes, s64.rx_dropped, s64.rx_errors, s64.rx_missed_errors
    );
    let total: u64 = counters.iter().map(|c| c.rx.rx_packets).sum();
    outln!("  queue  rx_packets    rx_bytes   to_os  xdp_drop  xdp_tx  xdp_redirect  tx_packets  rss_share");
    for (q, c) in counters.iter().enumerate() {
        let share = if total == 0 {
            0.0
        } else {
            100.0 * c.rx.rx_packets as f64 / total as f64
        };
        outln!(
            "  {q:>5}  {:>10}  {:>10}  {:>6}  {:>8}  {:>6}  {:>12}  {:>10}  {share:>8.1}%",
            c.rx.rx_packets,
            c.rx.rx_bytes,
            c.rx.to_os,
            c.pair.rx_xdp_drop,
            c.pair.rx_xdp_tx,
            c.pair.rx_xdp_redirect,
            c.tx.tx_packets,
        );
    }
}

/// Most frames of the generated sample mix (`--frames`, `onic pcap-sample --frames`).
const MAX_SAMPLE_FRAMES: usize = 100_000_000;

/// The output captures of a replay: file name and what it holds; `xsk.pcap` only with an object.
fn output_names(object: bool) -> Vec<(&'static str, &'static str)> {
    let mut v = vec![
        ("pass.pcap", "received by the OS"),
        ("tx-port0.pcap", "sent out of port 0"),
        ("tx-port1.pcap", "sent out of port 1"),
        ("drop.pcap", "dropped by the program"),
    ];
    if object {
        v.push(("xsk.pcap", "redirected to the AF_XDP socket (xskmap)"));
    }
    v
}

/// Checks the options of a replay before anything runs: queue and frame counts, the output
/// directory and every output file in it, and the memory the queues need. The frames need no
/// estimate: the input is read, and the outputs written, one batch at a time.
fn check(args: &ReplayOpts, queues: u16) -> Result<(), String> {
    use onic_cli::limits::{self, in_range, BASE_BYTES, HOST_BYTES_PER_PAGE, POOL_EXTRA_PAGES};
    let max_q = onic_core::config::MAX_QUEUES_PER_FUNCTION;
    in_range("--queues", queues, 1, max_q, "queue pairs per port")?;
    if args.pcap.is_none() {
        in_range(
            "--frames",
            args.frames,
            1,
            MAX_SAMPLE_FRAMES,
            "frames of the sample mix",
        )?;
    }
    limits::writable_dir(&args.out_dir, "--out-dir")?;
    for (name, _) in output_names(args.obj.xdp_obj.is_some()) {
        onic_cli::file::check_output(&args.out_dir.join(name), "--out-dir")?;
    }
    let usable = RingSizeIdx::new(RING_SIZE_IDX).map_or(1023, RingSizeIdx::usable);
    let pages = 2 * u64::from(queues) * (u64::from(usable) + POOL_EXTRA_PAGES);
    let need = BASE_BYTES + pages * HOST_BYTES_PER_PAGE;
    limits::check_memory(
        &format!("--queues {queues}"),
        need,
        &format!(
            "{pages} pages of the model at {} KiB each",
            HOST_BYTES_PER_PAGE / 1024
        ),
        limits::mem_available(),
    )
}

/// Where the replayed frames come from: a capture read record by record, or the sample mix
/// generated frame by frame.
enum Source {
    Capture(pcap::FileReader),
    Sample { next: usize, frames: usize },
}

impl Source {
    /// The next frame and its time stamp; `None` at the end.
    fn next(&mut self) -> Result<Option<(Duration, Vec<u8>)>, String> {
        match self {
            Self::Capture(r) => Ok(r.next_record()?.map(|r| (r.ts, r.data))),
            Self::Sample { next, frames } => {
                if *next >= *frames {
                    return Ok(None);
                }
                let i = *next;
                *next += 1;
                Ok(Some((Duration::from_micros(i as u64), sample_frame(i))))
            }
        }
    }
}

pub fn run(args: &ReplayOpts, queues: u16, progress_ms: u64) -> Result<(), String> {
    check(args, queues)?;
    // The capture's file header is checked before the program is loaded or the card built.
    let mut source = match &args.pcap {
        Some(p) => Source::Capture(pcap::FileReader::open(p)?),
        None => Source::Sample {
            next: 0,
            frames: args.frames,
        },
    };
    let mut prog = program(args)?;
    let mut writers = OutWriters::create(&args.out_dir, matches!(prog, Some(Prog::Object(..))))?;
    let source_name = match &args.pcap {
        Some(p) => p.display().to_string(),
        None => "a generated sample mix (see `onic pcap-sample`)".to_string(),
    };
    let mut cc = CardConfig::default();
    cc.wire = Wire::Open;
    cc.ports = 2;
    cc.functions = 2;
    let card = Card::new(cc);
    let owned = recycle_rings(queues);
    let rings: Vec<&RecycleRing> = owned.iter().collect();
    let mut ports = bring_up(&card, queues, onic_core::queue::rx::DEFAULT_MAX_FRAME_LEN, &rings)?;
    let mut out = Outputs::default();
    let replayed = Replay {
        progress: Progress::new(progress_ms),
        card: &card,
        ports: &mut ports,
        prog: &mut prog,
        rings: &rings,
        hasher: ShellHasher::default(),
        out: &mut out,
        writers: &mut writers,
    }
    .frames(&mut source, args.port)?;
    let seen: u64 = ports
        .iter()
        .flat_map(|p| p.pairs.iter())
        .map(|p| p.rx.stats().rx_packets)
        .sum();
    outln!(
        "replayed {replayed} frames from {source_name} into port {} ({queues} queue pairs per port, XDP program: {})",
        args.port,
        prog.as_ref().map_or_else(
            || "none".to_string(),
            |p| p.describe(args.xdp.as_deref().unwrap_or(""))
        )
    );
    for (p, rig) in ports.iter().enumerate() {
        print_stats(p, rig, args.all_stats);
    }
    print_program(prog.as_ref(), args)?;
    writers.finish(&args.out_dir)?;
    outln!(
        "  (frames the shell or the driver dropped before the program: {})",
        replayed.saturating_sub(seen)
    );
    let live = teardown(&card, ports, &rings)?;
    if live != 0 {
        return Err(format!("{live} pages still live after teardown"));
    }
    outln!("page accounting: every page returned after teardown");
    Ok(())
}

/// The output captures being written, in the order of [`output_names`]: pass, tx-port0,
/// tx-port1, drop, and xsk with an object.
struct OutWriters {
    files: Vec<(&'static str, &'static str, pcap::Writer)>,
}

impl OutWriters {
    fn create(dir: &Path, object: bool) -> Result<Self, String> {
        let mut files = Vec::new();
        for (name, what) in output_names(object) {
            files.push((name, what, pcap::Writer::create(&dir.join(name))?));
        }
        Ok(Self { files })
    }

    /// Moves what came out so far from memory into the files.
    fn take(&mut self, out: &mut Outputs) -> Result<(), String> {
        let [pass, tx0, tx1, drop, rest @ ..] = &mut self.files[..] else {
            return Err("output files missing".into());
        };
        let [egress0, egress1] = &mut out.egress;
        let lists = [
            (&mut pass.2, &mut out.pass),
            (&mut tx0.2, egress0),
            (&mut tx1.2, egress1),
            (&mut drop.2, &mut out.dropped),
        ];
        for (w, frames) in lists {
            for (ts, data) in frames.drain(..) {
                w.record(ts, &data)?;
            }
        }
        // Without an object nothing can reach the user sink.
        if let Some(xsk) = rest.first_mut() {
            for (ts, data) in out.xsk.drain(..) {
                xsk.2.record(ts, &data)?;
            }
        }
        out.xsk.clear();
        Ok(())
    }

    /// Completes every file and lists them.
    fn finish(self, dir: &Path) -> Result<(), String> {
        outln!("output in {}:", dir.display());
        for (name, what, w) in self.files {
            let n = w.records;
            w.finish()?;
            outln!("  {name:<14} {n:>8} frames {what}");
        }
        Ok(())
    }
}

/// The program the options name: an object (`--xdp-obj`), a built-in (`--xdp`), or none.
fn program(args: &ReplayOpts) -> Result<Option<Prog>, String> {
    Ok(match (&args.obj.xdp_obj, args.xdp.as_deref()) {
        (Some(path), _) => Some(Prog::Object(
            Box::new(crate::xdp_obj::load(&args.obj, path)?),
            path.clone(),
        )),
        (None, Some(n)) => Some(Prog::Builtin(Builtin::by_name(n, args.udp_port)?)),
        (None, None) => None,
    })
}

/// Progress lines on stderr for a long replay, one every `every` of host time (`--progress-ms`):
/// rewritten in place on a terminal, one line each otherwise.
struct Progress {
    every: Option<Duration>,
    start: Instant,
    last: Instant,
    terminal: bool,
    shown: bool,
    /// Frames injected so far, of `total` (unknown for a capture).
    injected: u64,
    total: Option<usize>,
}

impl Progress {
    fn new(progress_ms: u64) -> Self {
        let now = Instant::now();
        Self {
            every: (progress_ms > 0).then(|| Duration::from_millis(progress_ms)),
            start: now,
            last: now,
            terminal: std::io::stderr().is_terminal(),
            shown: false,
            injected: 0,
            total: None,
        }
    }

    /// Called between polling rounds: a line when `every` has passed since the last.
    fn tick(&mut self, prog: Option<&Prog>) {
        let Some(every) = self.every else { return };
        if self.last.elapsed() < every {
            return;
        }
        self.last = Instant::now();
        self.shown = true;
        let insns = match prog {
            Some(Prog::Object(e, _)) => format!(", {} program instructions", e.engine.stats().insns),
            _ => String::new(),
        };
        let line = format!(
            "  progress: {}{} frames injected in {:.1} s{insns}",
            self.injected,
            self.total.map_or_else(String::new, |t| format!(" of {t}")),
            self.start.elapsed().as_secs_f64()
        );
        if self.terminal {
            errout!("\r{line}   ");
        } else {
            errln!("{line}");
        }
    }

    fn end(&self) {
        if self.shown && self.terminal {
            errln!();
        }
    }
}

/// A replay in progress: the card, both ports, the program and what came out so far.
struct Replay<'r, 'c> {
    progress: Progress,
    card: &'c Card,
    ports: &'r mut [PortRig<'c>],
    prog: &'r mut Option<Prog>,
    rings: &'r [&'c RecycleRing],
    hasher: ShellHasher,
    out: &'r mut Outputs,
    writers: &'r mut OutWriters,
}

impl Replay<'_, '_> {
    /// Injects `frames` into `port`, [`BATCH`] at a time, each batch drained through the driver
    /// before the next; a progress line on a terminal for long captures.
    fn frames(&mut self, source: &mut Source, port: u8) -> Result<u64, String> {
        let mut ts = Duration::ZERO;
        let mut total = 0u64;
        self.progress.total = match source {
            Source::Sample { frames, .. } => Some(*frames),
            Source::Capture(_) => None,
        };
        loop {
            let mut batch = 0;
            while batch < BATCH {
                let Some((t, data)) = source.next()? else {
                    break;
                };
                self.card.inject(port, &data);
                ts = t;
                batch += 1;
            }
            if batch == 0 {
                break;
            }
            total += batch as u64;
            self.progress.injected = total;
            self.drain(ts)?;
            self.writers.take(self.out)?;
        }
        self.progress.end();
        Ok(total)
    }

    /// Lets the model deliver, then polls every pair until nothing is pending; what comes out
    /// is stamped `ts`.
    fn drain(&mut self, ts: Duration) -> Result<(), String> {
        let card = self.card;
        if let Some(p) = self.prog.as_mut() {
            p.set_time(u64::try_from(ts.as_nanos()).unwrap_or(u64::MAX));
        }
        for _ in 0..100_000 {
            card.run_until_idle();
            card.advance_time(2_000);
            card.run_until_idle();
            for (p, e) in self.out.egress.iter_mut().enumerate() {
                e.extend(card.take_egress(p as u8).into_iter().map(|f| (ts, f)));
            }
            let mut busy = false;
            for f in 0..self.ports.len() {
                for q in 0..self.ports[f].pairs.len() {
                    let mut dropped = Vec::new();
                    let mut rec = self.prog.as_mut().map(|p| DropRecorder {
                        prog: p,
                        dropped: &mut dropped,
                    });
                    let env = PollEnv {
                        rings: self.rings,
                        hasher: &self.hasher,
                        ts,
                        dma: card.dma(),
                    };
                    busy |= poll_pair(self.ports, f, q, rec.as_mut(), self.out, &env);
                    self.out.dropped.extend(dropped.into_iter().map(|d| (ts, d)));
                }
            }
            if let Some(Prog::Object(e, _)) = self.prog.as_ref() {
                e.check()?;
            }
            self.progress.tick(self.prog.as_ref());
            if !busy {
                return Ok(());
            }
        }
        Err("the datapath did not quiesce".into())
    }
}

/// What the program itself reports: the flows the built-in counter counted, or an object's
/// statistics and maps.
fn print_program(prog: Option<&Prog>, args: &ReplayOpts) -> Result<(), String> {
    match prog {
        Some(Prog::Builtin(Builtin::Count(flows))) => {
            outln!("flows counted by the program (frames, bytes):");
            for (flow, (n, bytes)) in flows {
                match flow {
                    Some((s, d, proto, sp, dp)) => {
                        outln!("  {s}:{sp} -> {d}:{dp} proto {proto}: {n} frames, {bytes} bytes")
                    }
                    None => outln!("  not IPv4: {n} frames, {bytes} bytes"),
                }
            }
            Ok(())
        }
        Some(Prog::Object(e, _)) => crate::xdp_obj::report(&e.engine, args.obj.dump_maps.as_deref()),
        _ => Ok(()),
    }
}

/// Arguments of `onic pcap-sample`.
#[derive(clap::Args)]
pub struct SampleArgs {
    /// File to write.
    out: PathBuf,
    /// Frames to write.
    #[arg(long, default_value_t = 1000)]
    frames: usize,
    /// Which mix: `default` (DNS, other UDP, TCP, ARP) or `xdp` (the default mix plus ICMP echo
    /// requests and replies, IPv4 headers with options, runt IPv4 frames: something for each
    /// program of os-linux/xdp).
    #[arg(long, default_value = "default", value_parser = ["default", "xdp"])]
    mix: String,
}

/// An Ethernet + IPv4 frame with the given protocol and 4 bytes of ports, padded to `len`.
fn ipv4_frame(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16, len: usize) -> Vec<u8> {
    let len = len.max(60);
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0x00, 0x00, 0x00, 0x00, 0x01]);
    f[6..12].copy_from_slice(&[0x02, 0x00, 0x00, 0x00, 0x00, 0x02]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip_len = u16::try_from(len - 14).unwrap_or(u16::MAX);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&ip_len.to_be_bytes());
    f[22] = 64;
    f[23] = proto;
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&dst);
    let mut sum = 0u32;
    for w in f[14..34].chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    if proto == 17 {
        let udp_len = u16::try_from(len - 34).unwrap_or(u16::MAX);
        f[38..40].copy_from_slice(&udp_len.to_be_bytes());
    } else if proto == 6 {
        f[46] = 0x50; // data offset 5
        f[47] = 0x10; // ACK
    }
    f
}

/// Frame `i` of a deterministic mix of traffic: DNS queries (UDP 53) from several clients, other UDP
/// flows, TCP flows, ARP, at sizes from 60 to 1514 bytes.
fn sample_frame(i: usize) -> Vec<u8> {
    let client = [10, 0, (i % 7) as u8, 1 + (i % 13) as u8];
    let size = [60, 64, 128, 250, 500, 1000, 1514][i % 7];
    match i % 5 {
        0 | 1 => ipv4_frame(
            client,
            [10, 0, 0, 53],
            17,
            40000 + (i % 11) as u16,
            53,
            60 + (i % 40),
        ),
        2 => ipv4_frame(client, [192, 168, 1, 10], 17, 5000 + (i % 3) as u16, 4789, size),
        3 => ipv4_frame(client, [192, 168, 1, 20], 6, 33000 + (i % 17) as u16, 443, size),
        _ => {
            let mut arp = vec![0u8; 60];
            arp[..6].fill(0xFF);
            arp[6..12].copy_from_slice(&[0x02, 0x00, 0x00, 0x00, 0x00, 0x03]);
            arp[12..14].copy_from_slice(&[0x08, 0x06]);
            arp[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
            arp[28..32].copy_from_slice(&client);
            arp[38..42].copy_from_slice(&[10, 0, 0, 254]);
            arp
        }
    }
}

/// An ICMP echo request (type 8) or reply (type 0) with a correct checksum and `payload` bytes.
fn icmp_frame(src: [u8; 4], dst: [u8; 4], kind: u8, seq: u16, payload: usize) -> Vec<u8> {
    let mut f = ipv4_frame(src, dst, 1, 0, 0, 42 + payload);
    f[34..42].copy_from_slice(&[kind, 0, 0, 0, 0x4f, 0x4e, (seq >> 8) as u8, seq as u8]);
    for (i, b) in f[42..].iter_mut().enumerate() {
        *b = (i as u16 ^ seq) as u8;
    }
    let mut sum: u32 = f[34..]
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    f[36..38].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f
}

/// Frame `i` of the `xdp` mix: half of the frames from the default mix, the others ICMP echo
/// requests and replies, DNS behind a 24-byte IPv4 header, and IPv4 headers claiming 60 bytes
/// in a 60-byte frame (no room for ports).
fn xdp_sample_frame(i: usize) -> Vec<u8> {
    let client = [192, 0, 2, 1 + (i % 5) as u8];
    match i % 6 {
        1 => icmp_frame(client, [192, 0, 2, 100], 8, i as u16, 16 + (i % 3) * 40),
        3 => icmp_frame(client, [192, 0, 2, 100], 0, i as u16, 24),
        4 => {
            // 24-byte IPv4 header (one option word): the ports move 4 bytes on.
            let mut f = ipv4_frame(client, [10, 0, 0, 53], 17, 0, 0, 70);
            f[14] = 0x46;
            f[38..40].copy_from_slice(&(40000 + i as u16).to_be_bytes());
            f[40..42].copy_from_slice(&53u16.to_be_bytes());
            f
        }
        5 if i % 4 == 1 => {
            // The header length points at the frame's end: no room for ports.
            let mut f = ipv4_frame(client, [10, 0, 0, 53], 17, 7, 53, 60);
            f[14] = 0x4f;
            f
        }
        _ => sample_frame(i),
    }
}

pub fn sample(args: &SampleArgs) -> Result<(), String> {
    onic_cli::limits::in_range("--frames", args.frames, 1, MAX_SAMPLE_FRAMES, "frames to write")?;
    onic_cli::file::check_output(&args.out, "pcap-sample")?;
    let frame: fn(usize) -> Vec<u8> = if args.mix == "xdp" {
        xdp_sample_frame
    } else {
        sample_frame
    };
    // One frame at a time into a file that appears only once complete.
    let mut w = pcap::Writer::create(&args.out)?;
    for i in 0..args.frames {
        w.record(
            Duration::from_micros(1_700_000_000_000_000 + 10 * i as u64),
            &frame(i),
        )?;
    }
    w.finish()?;
    outln!("wrote {} frames to {}", args.frames, args.out.display());
    Ok(())
}
