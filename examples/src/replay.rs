//! `onic run --pcap`: replays a capture into a port of the device model, through the driver and
//! an XDP program, and writes what came out as captures:
//!
//! | file | what |
//! | --- | --- |
//! | `pass.pcap` | frames the OS received (XDP_PASS, or every frame without a program) |
//! | `tx-port0.pcap`, `tx-port1.pcap` | frames that left each port (XDP_TX, XDP_REDIRECT) |
//! | `drop.pcap` | frames the program dropped (XDP_DROP, ABORTED), as the program left them |
//! | `xsk.pcap` | with `--xdp-obj`: frames redirected to an AF_XDP socket (an xskmap entry) |
//! | `pass-meta.txt` | with `--xdp-obj`: the metadata the program left in front of frames the OS received (`bpf_xdp_adjust_meta`; XDP_PASS and cpumap redirects, whose socket buffers carry it in the kernel), one line per such frame: its number in `pass.pcap` (from 1), then the bytes in hex |
//! | `tx-port0-meta.txt`, `tx-port1-meta.txt` | with `--xdp-obj`: the same for frames sent out of each port (XDP_TX, redirects, broadcast copies), numbered in `tx-port*.pcap`; a first line (`#`) says that this metadata is not on the wire (the kernel sends a frame from `data` on). A frame is matched to its metadata by its bytes |
//! | `xsk-meta.txt` | with `--xdp-obj`: the same for frames to the AF_XDP socket, numbered in `xsk.pcap` (the kernel copies the metadata into the UMEM just before the frame) |
//! | `bpf-records.txt` | with `--xdp-obj`: records the program wrote into ring buffers and perf event arrays |
//!
//! Both ports are brought up (PCI function 0 drives port 0, function 1 port 1) through the door
//! the kernel module uses, `onic_embed`'s `Port`, with the model as its host
//! (`onic_embed::model`): each with `--queues` queue indices over which the shell's RSS spreads
//! the frames, four rings each (RX and XDP_TX, the stack's TX, redirect-in). The host does what
//! the kernel would: it reads what the stack received, carries out the program's redirects (out
//! of the other port's redirect-in ring, or a copy to the user sink) and keeps the frames the
//! program dropped. The wire is open, so a frame sent out of a port is captured, not looped back.
//! Output frames carry the timestamp of the last input frame replayed before they came out.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use onic_cli::pcap;
use onic_core::config::{DeviceConfig, RingSizeIdx};
use onic_core::stats::ethtool::EthtoolStats;
use onic_core::stats::QueueCounters;
use onic_core::xdp::{RawXdpProgram, XdpAction, XdpBuff};
use onic_embed::model::{CardHost, ModelCensus, ModelHost};
use onic_embed::port::{PortConfig, SoloPort, TxLock, XmitLock, MAX_PORT_QUEUES};
use onic_sim::{Card, CardConfig, Wire};

use crate::carry::Event;
use crate::xdp_obj::{ObjOpts, Prog};
use crate::xdp_progs::{Builtin, PROGRAMS};

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

/// Output captures, in memory until the end.
#[derive(Default)]
struct Outputs {
    pass: Vec<(Duration, Vec<u8>)>,
    /// Frames passed so far, and the metadata of those that had some: number in `pass.pcap`
    /// (from 1), bytes.
    passed: u64,
    pass_meta: Vec<(u64, Vec<u8>)>,
    egress: [Vec<(Duration, Vec<u8>)>; 2],
    /// Frames sent out of each port with metadata in front of them (XDP_TX, redirects,
    /// broadcast copies), not yet met in that port's capture: the frame, the metadata.
    egress_meta: [Vec<(Vec<u8>, Vec<u8>)>; 2],
    dropped: Vec<(Duration, Vec<u8>)>,
    xsk: Vec<(Duration, Vec<u8>)>,
    /// Frames given to the user sink so far, and the metadata of those that had some (number
    /// in `xsk.pcap`, bytes).
    xsk_frames: u64,
    xsk_meta: Vec<(u64, Vec<u8>)>,
    /// Frames cpumap redirects delivered to the OS, by CPU.
    cpus: [u64; crate::xdp_obj::CPUS as usize],
    /// Copies of broadcasts sent out of each port, and those lost (no page, or a full ring).
    copies: [u64; 2],
    copies_lost: u64,
}

impl Outputs {
    /// Records a frame the OS received, and its metadata if it has some (stamped `ts`).
    fn passed(&mut self, ts: Duration, data: &[u8], meta: &[u8]) {
        self.pass.push((ts, data.to_vec()));
        self.passed += 1;
        if !meta.is_empty() {
            self.pass_meta.push((self.passed, meta.to_vec()));
        }
    }

    /// Records what became of a redirected frame (stamped `ts`).
    fn record(&mut self, ts: Duration, e: Event<'_>) {
        match e {
            Event::Xsk { data, meta } => {
                self.xsk.push((ts, data.to_vec()));
                self.xsk_frames += 1;
                if !meta.is_empty() {
                    self.xsk_meta.push((self.xsk_frames, meta.to_vec()));
                }
            }
            Event::Cpu { cpu, data, meta, .. } => {
                self.passed(ts, data, meta);
                self.cpus[cpu as usize] += 1;
            }
            Event::Meta { port, data, meta } => {
                self.egress_meta[port].push((data.to_vec(), meta.to_vec()));
            }
            Event::Copy(p, true) | Event::Broadcast(p) => self.copies[p] += 1,
            Event::Copy(_, false) => self.copies_lost += 1,
            Event::Nowhere => {}
        }
    }
}

/// The attached program, keeping a copy of each frame it drops (DROP, ABORTED, an unknown
/// verdict) as it left it, and of each frame it sends back (XDP_TX) with metadata in front of
/// it: the port, the frame, the metadata.
pub(crate) struct Recorder {
    prog: Prog,
    dropped: Vec<Vec<u8>>,
    sent_meta: Vec<(u8, Vec<u8>, Vec<u8>)>,
}

impl RawXdpProgram for Recorder {
    fn run_raw(&mut self, x: &mut XdpBuff<'_>) -> u32 {
        let raw = self.prog.run_raw(x);
        match XdpAction::from_raw(raw) {
            Some(XdpAction::Pass | XdpAction::Redirect) => {}
            Some(XdpAction::Tx) => {
                if !x.meta().is_empty() {
                    self.sent_meta
                        .push((x.rxq().port, x.data().to_vec(), x.meta().to_vec()));
                }
            }
            _ => self.dropped.push(x.data().to_vec()),
        }
        raw
    }
}

/// The model host of a replay: ports over the model card, the program recording its drops.
type Host<'c> = CardHost<'c, Recorder>;

/// Both ports of the card as the replay drives them: through the door the kernel module uses
/// (`onic_embed`'s `Port`), each port's host over the model.
struct Rig<'c> {
    hosts: Vec<Host<'c>>,
    ports: Vec<SoloPort<Host<'c>>>,
    /// The attached program's handle (both ports run it).
    prog: Option<u16>,
    queues: u16,
}

impl<'c> Rig<'c> {
    /// Brings up both functions (ports) with `queues` queue indices each and opens them; the
    /// program, if any, is attached to both.
    fn bring_up(card: &'c Card, queues: u16, prog: Option<Prog>) -> Result<Self, String> {
        let ring = RingSizeIdx::new(RING_SIZE_IDX).map_err(|e| e.to_string())?;
        let host: Host<'c> = ModelHost::new(card);
        host.set_targets(&crate::xdp_obj::redirect_targets());
        let prog = prog.map(|prog| {
            host.attach(Recorder {
                prog,
                dropped: Vec::new(),
                sent_meta: Vec::new(),
            })
        });
        let mut hosts = Vec::new();
        let mut ports = Vec::new();
        for f in 0..2u8 {
            let cfg = PortConfig {
                func: f,
                max_queues: queues,
                queues,
                tx_ring: ring,
                rx_ring: ring,
                rs_fec: DeviceConfig::new(f, queues).map_err(|e| e.to_string())?.rs_fec,
            };
            let h = host.for_port(f);
            let mut port =
                SoloPort::new(h.regs(f), h.delay(), h.clone(), cfg).map_err(|e| format!("port {f}: {e}"))?;
            port.open().map_err(|e| format!("port {f}: {e}"))?;
            hosts.push(h);
            ports.push(port);
        }
        Ok(Self {
            hosts,
            ports,
            prog,
            queues,
        })
    }

    /// One NAPI round of queue `q` of port `f`: the poll, then the reclaims of its stack and
    /// redirect-in rings; returns whether it still has work.
    fn poll(&mut self, f: usize, q: u16) -> bool {
        let port = &mut self.ports[f];
        let r = port.poll(q, 64, (), self.prog);
        let stack = port.queue::<TxLock, _>(q, |p, t| p.tx_clean(t, 64));
        let xmit = port.queue::<XmitLock, _>(q, |p, t| p.xmit_clean(t));
        r.done > 0 || r.more || r.tx_pending || stack.in_flight > 0 || xmit.in_flight > 0
    }

    /// What the OS does after the polls: reads the frames its stack received, carries out the
    /// program's redirects ([`crate::carry`]) and takes the copies of dropped frames; all
    /// stamped `ts`. Returns whether anything was redirected out.
    fn carry_out(&mut self, ts: Duration, out: &mut Outputs) -> bool {
        let mut moved = false;
        for f in 0..self.ports.len() {
            self.hosts[f].drain_received(|r| out.passed(ts, r.data(), r.meta()));
            let mut ports = crate::carry::Ports {
                hosts: &self.hosts,
                ports: self.ports.iter_mut().collect(),
                queues: self.queues,
            };
            moved |= ports.carry_out(f, &mut |e| out.record(ts, e));
        }
        if let Some(id) = self.prog {
            self.hosts[0].with_program(id, |r| {
                out.dropped.extend(r.dropped.drain(..).map(|d| (ts, d)));
                for (port, data, meta) in r.sent_meta.drain(..) {
                    out.egress_meta[usize::from(port) & 1].push((data, meta));
                }
            });
        }
        moved
    }

    /// Runs `f` on the attached program, if any.
    fn with_prog<R>(&self, f: impl FnOnce(&mut Prog) -> R) -> Option<R> {
        self.hosts[0].with_program(self.prog?, |r| f(&mut r.prog))
    }

    /// Frames both ports received, whatever became of them.
    fn frames_seen(&self) -> u64 {
        self.ports.iter().map(|p| p.port().link_stats().rx_packets).sum()
    }

    /// Stops and removes both ports; returns the model's pages still live (0 unless something
    /// leaked).
    fn teardown(self, card: &Card) -> Result<usize, String> {
        for mut p in self.ports {
            p.stop().map_err(|e| e.to_string())?;
            p.remove();
        }
        self.hosts[0].free_spare();
        let c = self.hosts[0].census();
        if c != ModelCensus::default() {
            return Err(format!("the host still holds pages after teardown: {c:?}"));
        }
        Ok(card.dma_stats().live_pages)
    }
}

fn print_stats(port_no: usize, port: &mut SoloPort<Host<'_>>, all: bool) -> Result<(), String> {
    let counters: Vec<QueueCounters> = port
        .control(|p, t| p.queue_snapshots(t))
        .map_err(|e| e.to_string())?;
    let stats = EthtoolStats::new(port.port().hw_counters(), &counters);
    outln!("NIC statistics (port {port_no}, ethtool -S):");
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
    let s64 = port.port().link_stats();
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
    Ok(())
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

/// Checks the options of a replay through the model before anything runs (the frame count is
/// checked before the source is opened): the queue count, the output directory and every
/// output file in it, and the memory the queues need. The frames need no estimate: the input
/// is read, and the outputs written, one batch at a time.
fn check(args: &ReplayOpts, queues: u16) -> Result<(), String> {
    use onic_cli::limits::{self, in_range, BASE_BYTES, HOST_BYTES_PER_PAGE, POOL_EXTRA_PAGES};
    // Each queue index has four rings, three of them TX (hardware.md §1.3: 64 H2C queues a
    // function), as in the kernel module.
    in_range("--queues", queues, 1, MAX_PORT_QUEUES, "queue indices per port")?;
    limits::writable_dir(&args.out_dir, "--out-dir")?;
    for (name, _) in output_names(args.obj.xdp_obj.is_some()) {
        onic_cli::file::check_output(&args.out_dir.join(name), "--out-dir")?;
    }
    if args.obj.xdp_obj.is_some() {
        onic_cli::file::check_output(&args.out_dir.join(crate::xdp_obj::RECORDS_FILE), "--out-dir")?;
        for (name, ..) in META_FILES {
            onic_cli::file::check_output(&args.out_dir.join(name), "--out-dir")?;
        }
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
pub(crate) enum Source {
    Capture(pcap::FileReader),
    Sample { next: usize, frames: usize },
}

impl Source {
    /// The next frame and its time stamp; `None` at the end.
    pub(crate) fn next(&mut self) -> Result<Option<(Duration, Vec<u8>)>, String> {
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
    if args.pcap.is_none() {
        onic_cli::limits::in_range(
            "--frames",
            args.frames,
            1,
            MAX_SAMPLE_FRAMES,
            "frames of the sample mix",
        )?;
    }
    // The capture's file header is checked before the program is loaded or the card built.
    let mut source = match &args.pcap {
        Some(p) => Source::Capture(pcap::FileReader::open(p)?),
        None => Source::Sample {
            next: 0,
            frames: args.frames,
        },
    };
    let source_name = match &args.pcap {
        Some(p) => p.display().to_string(),
        None => "a generated sample mix (see `onic pcap-sample`)".to_string(),
    };
    if args.obj.test_run {
        return crate::test_run::run(args, source, &source_name);
    }
    check(args, queues)?;
    let prog = program(args)?;
    let mut writers = OutWriters::create(&args.out_dir, matches!(prog, Some(Prog::Object(..))))?;
    let mut cc = CardConfig::default();
    cc.wire = Wire::Open;
    cc.ports = 2;
    cc.functions = 2;
    let card = Card::new(cc);
    let describe = prog
        .as_ref()
        .map(|p| p.describe(args.xdp.as_deref().unwrap_or("")));
    let mut rig = Rig::bring_up(&card, queues, prog)?;
    let mut out = Outputs::default();
    let replayed = Replay {
        progress: Progress::new(progress_ms),
        card: &card,
        rig: &mut rig,
        out: &mut out,
        writers: &mut writers,
    }
    .frames(&mut source, args.port)?;
    let seen = rig.frames_seen();
    outln!(
        "replayed {replayed} frames from {source_name} into port {} ({queues} queue pairs per port, XDP program: {})",
        args.port,
        describe.unwrap_or_else(|| "none".to_string())
    );
    for (p, port) in rig.ports.iter_mut().enumerate() {
        print_stats(p, port, args.all_stats)?;
    }
    rig.with_prog(|p| print_program(p, args)).transpose()?;
    print_model_redirects(&out);
    writers.finish(&args.out_dir)?;
    outln!(
        "  (frames the shell or the driver dropped before the program: {})",
        replayed.saturating_sub(seen)
    );
    let live = rig.teardown(&card)?;
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
    /// With an object, the side files of the captures with the metadata the program left, in
    /// the order of [`META_FILES`].
    meta: Vec<MetaFile>,
}

/// The side files of the captures (with an object), each beside its capture: name, what its
/// lines are, and a first line (`#`) for those whose metadata does not go on with the frame.
const META_FILES: [(&str, &str, Option<&str>); 4] = [
    ("pass-meta.txt", "frames passed", None),
    (
        "tx-port0-meta.txt",
        "frames sent out of port 0",
        Some(NOT_ON_THE_WIRE),
    ),
    (
        "tx-port1-meta.txt",
        "frames sent out of port 1",
        Some(NOT_ON_THE_WIRE),
    ),
    ("xsk-meta.txt", "frames to the AF_XDP socket", None),
];

/// The first line of the side files of frames sent out of a port.
const NOT_ON_THE_WIRE: &str = "# metadata the program left in front of frames it sent (XDP_TX, a redirect, a broadcast copy); NOT on the wire: the kernel sends the frame from data on, without it";

/// A side file of a capture: one line per frame that had metadata, its number in the capture
/// (from 1), then the metadata in hex.
struct MetaFile {
    name: &'static str,
    what: &'static str,
    w: std::io::BufWriter<std::fs::File>,
    lines: u64,
}

impl MetaFile {
    fn create(
        dir: &Path,
        (name, what, first): (&'static str, &'static str, Option<&str>),
    ) -> Result<Self, String> {
        use std::io::Write as _;
        let path = dir.join(name);
        let f = std::fs::File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut w = std::io::BufWriter::new(f);
        if let Some(line) = first {
            writeln!(w, "{line}").map_err(|e| format!("{name}: {e}"))?;
        }
        Ok(Self {
            name,
            what,
            w,
            lines: 0,
        })
    }

    /// Writes the lines of `frames` (number in the capture, metadata).
    fn write(&mut self, frames: impl Iterator<Item = (u64, Vec<u8>)>) -> Result<(), String> {
        use std::io::Write as _;
        for (n, meta) in frames {
            let hex: String = meta.iter().map(|b| format!("{b:02x}")).collect();
            writeln!(self.w, "{n} {hex}").map_err(|e| format!("{}: {e}", self.name))?;
            self.lines += 1;
        }
        Ok(())
    }
}

impl OutWriters {
    fn create(dir: &Path, object: bool) -> Result<Self, String> {
        let mut files = Vec::new();
        for (name, what) in output_names(object) {
            files.push((name, what, pcap::Writer::create(&dir.join(name))?));
        }
        let meta = if object {
            META_FILES
                .into_iter()
                .map(|m| MetaFile::create(dir, m))
                .collect::<Result<_, _>>()?
        } else {
            Vec::new()
        };
        Ok(Self { files, meta })
    }

    /// Moves what came out so far from memory into the files. A frame that left a port is
    /// matched to the metadata it left with by its bytes (the wire does not carry the
    /// metadata, and frames of different rings may leave in another order than they were
    /// sent): the first frame waiting with the same bytes.
    fn take(&mut self, out: &mut Outputs) -> Result<(), String> {
        let [pass, tx0, tx1, drop, rest @ ..] = &mut self.files[..] else {
            return Err("output files missing".into());
        };
        for (ts, data) in out.pass.drain(..) {
            pass.2.record(ts, &data)?;
        }
        for (ts, data) in out.dropped.drain(..) {
            drop.2.record(ts, &data)?;
        }
        let mut sent_meta: [Vec<(u64, Vec<u8>)>; 2] = Default::default();
        for (p, w) in [&mut tx0.2, &mut tx1.2].into_iter().enumerate() {
            let waiting = &mut out.egress_meta[p];
            for (ts, data) in out.egress[p].drain(..) {
                w.record(ts, &data)?;
                if let Some(i) = waiting.iter().position(|(d, _)| *d == data) {
                    sent_meta[p].push((w.records, waiting.remove(i).1));
                }
            }
        }
        // Without an object nothing can reach the user sink.
        if let Some(xsk) = rest.first_mut() {
            for (ts, data) in out.xsk.drain(..) {
                xsk.2.record(ts, &data)?;
            }
        }
        out.xsk.clear();
        let [tx0_meta, tx1_meta] = sent_meta;
        let lists = [
            std::mem::take(&mut out.pass_meta),
            tx0_meta,
            tx1_meta,
            std::mem::take(&mut out.xsk_meta),
        ];
        for (file, frames) in self.meta.iter_mut().zip(lists) {
            file.write(frames.into_iter())?;
        }
        Ok(())
    }

    /// Completes every file and lists them.
    fn finish(self, dir: &Path) -> Result<(), String> {
        use std::io::Write as _;
        outln!("output in {}:", dir.display());
        for (name, what, w) in self.files {
            let n = w.records;
            w.finish()?;
            outln!("  {name:<14} {n:>8} frames {what}");
        }
        for mut m in self.meta {
            m.w.flush().map_err(|e| format!("{}: {e}", m.name))?;
            outln!(
                "  {:<14} {:>8} {} with metadata the program left",
                m.name,
                m.lines,
                m.what
            );
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
    fn tick(&mut self, insns: Option<u64>) {
        let Some(every) = self.every else { return };
        if self.last.elapsed() < every {
            return;
        }
        self.last = Instant::now();
        self.shown = true;
        let insns = insns.map_or_else(String::new, |n| format!(", {n} program instructions"));
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

/// A replay in progress: the card, both ports with the program, and what came out so far.
struct Replay<'r, 'c> {
    progress: Progress,
    card: &'c Card,
    rig: &'r mut Rig<'c>,
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

    /// Lets the model deliver, then polls every queue of both ports until nothing is pending;
    /// what comes out is stamped `ts`.
    fn drain(&mut self, ts: Duration) -> Result<(), String> {
        let card = self.card;
        let ns = u64::try_from(ts.as_nanos()).unwrap_or(u64::MAX);
        self.rig.with_prog(|p| p.set_time(ns));
        for _ in 0..100_000 {
            card.run_until_idle();
            card.advance_time(2_000);
            card.run_until_idle();
            for (p, e) in self.out.egress.iter_mut().enumerate() {
                e.extend(card.take_egress(p as u8).into_iter().map(|f| (ts, f)));
            }
            let mut busy = false;
            for f in 0..self.rig.ports.len() {
                for q in 0..self.rig.queues {
                    busy |= self.rig.poll(f, q);
                }
            }
            busy |= self.rig.carry_out(ts, self.out);
            let object = self.rig.with_prog(|p| match p {
                Prog::Object(e, _) => Some((e.check(), e.engine.stats().insns)),
                Prog::Builtin(_) => None,
            });
            let insns = match object.flatten() {
                Some((check, insns)) => {
                    check?;
                    Some(insns)
                }
                None => None,
            };
            self.progress.tick(insns);
            if !busy {
                return Ok(());
            }
        }
        Err("the datapath did not quiesce".into())
    }
}

/// What became of cpumap and broadcast redirects (nothing when there were none).
fn print_model_redirects(out: &Outputs) {
    if out.cpus.iter().any(|&n| n > 0) {
        let per: Vec<String> = out
            .cpus
            .iter()
            .enumerate()
            .map(|(c, n)| format!("CPU {c}: {n}"))
            .collect();
        outln!(
            "cpumap redirects received by the OS (in pass.pcap) on the CPU chosen, CPU c serving queue c: {}",
            per.join(", ")
        );
    }
    if out.copies.iter().any(|&n| n > 0) || out.copies_lost > 0 {
        outln!(
            "broadcast redirects: {} copies out of port 0, {} out of port 1, {} lost (no page or a full ring)",
            out.copies[0], out.copies[1], out.copies_lost
        );
    }
}

/// What the program itself reports: the flows the built-in counter counted, or an object's
/// statistics and maps.
fn print_program(prog: &Prog, args: &ReplayOpts) -> Result<(), String> {
    match prog {
        Prog::Builtin(Builtin::Count(flows)) => {
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
        Prog::Object(e, _) => crate::xdp_obj::report(
            e,
            args.obj.dump_maps.as_deref(),
            Some(&args.out_dir.join(crate::xdp_obj::RECORDS_FILE)),
        ),
        Prog::Builtin(_) => Ok(()),
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
