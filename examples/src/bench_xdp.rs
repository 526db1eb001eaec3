//! `onic bench xdp`: the RX path's cost per frame with no program attached and with a program that
//! passes everything, at 64, 250, 500, 1000 and 1518 bytes; and each verdict's path
//! (drop, pass, tx, redirect) at 64 bytes. Figures are Mpps per core.
//!
//! Method: both ports of the model are brought up with one queue pair each (1024-entry rings).
//! For each figure, bursts of 64 identical UDP frames (one NAPI budget) are injected and the model
//! is run until their completions are written (not timed). Then the driver's poll of the receiving
//! pair is timed until it has taken all 64: completion reading, buffer-layout checks, the sink or
//! the program, the verdict's work, page replacement from the pool, refill doorbells, for XDP_TX
//! the TX reclaim and descriptor writes, and for PASS the OS handing each page straight back to
//! the pool (an skb freed at once). Register writes and DMA syncs go to the model (in-process
//! calls; a sync copies the bytes through the model's bounce buffer, so larger frames cost more
//! where a frame is synced), so the figures are the driver's CPU cost on this machine, not a card's
//! line rate. Frames sent out are taken off the model and redirected pages reclaimed between
//! bursts (not timed). Each figure is the best of 5 repetitions of `ONIC_BENCH_XDP_BURSTS` bursts
//! (default 160, i.e. 10240 frames), to filter out other work on the shared machine.
//!
//! Both columns run the same receive code, `QueuePair::poll`: "no program" with no program
//! attached (every page handed to the OS); "pass program" attaches a native program returning
//! XDP_PASS (static dispatch, no RX hash). Sizes are on the wire, including the 4-byte FCS the
//! shell strips (a 64-byte frame is 60 bytes in memory).
//!
//! The object path: the same verdicts from the clang-built objects of `os-linux/xdp` (prebuilt in
//! `bpf/objects/`: xdp_drop, xdp_pass, xdp_swap, xdp_redirect_map with `tx_port[0]` = port 1,
//! xdp_count) run by the `onic-bpf` interpreter, beside the built-in Rust program that does the
//! same (drop, pass, tx, redirect, count), in nanoseconds per frame, 64-byte frames. The
//! difference is what interpreting the object costs per frame (there is no JIT).

use std::time::{Duration, Instant};

use onic_core::queue::rx::RxFrame;
use onic_core::rss::ShellHasher;
use onic_core::xdp::{DevMap, TxTarget, XdpAction, XdpBuff, XdpDispatch, XdpFrame};
use onic_core::{PassInfo, XdpRxq};
use onic_hal::DmaPage;
use onic_sim::{Card, CardConfig, Wire};

use onic_bpf::{LoadOptions, SimHost, XdpEngine};
use onic_core::xdp::{RawXdpProgram, XdpProgram};

use onic_core::config::{DeviceConfig, RingSizeIdx, RxQueueConfig};
use onic_core::queue::pool::RecycleRing;
use onic_core::{Device, QueueId};
use onic_embed::done::FrameDone;
use onic_embed::poll::poll_pair;
use onic_embed::set::QueueSet;
use onic_embed::tuning::PairSpec;
use onic_sim::{QdmaWindow, ShellWindow, SimDma};

use crate::xdp_progs::{drop_all, pass, redirect_other_port, swap_macs_and_tx, Builtin, OTHER_PORT};

const SIZES: [usize; 5] = [64, 250, 500, 1000, 1518];
const BURST: usize = 64;
const REPS: usize = 5;
const UNIT: &str = "Mpps";

/// How the receiving pair is polled.
#[derive(Clone, Copy)]
enum Path {
    /// `QueuePair::poll` without a program.
    XdpNoProgram,
    /// `QueuePair::poll` with this program.
    Program(fn(&mut XdpBuff<'_>) -> XdpAction, bool),
    /// `QueuePair::poll` with `Bench::progs[i]` (a built-in program with state, or an object).
    Held(usize),
}

/// A program the benchmark keeps between bursts.
enum HeldProg {
    Native(Builtin),
    Object(Box<XdpEngine<SimHost>>),
}

impl RawXdpProgram for HeldProg {
    fn run_raw(&mut self, x: &mut XdpBuff<'_>) -> u32 {
        match self {
            Self::Native(b) => b.run(x).raw(),
            Self::Object(e) => e.run(x),
        }
    }
}

/// Loads `bpf/objects/<name>` for the benchmark (port 1 is interface 2, redirect target 0).
fn object(name: &str, sec: Option<&str>, maps: &[(&str, u32, u32)]) -> Result<HeldProg, String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bpf/objects")
        .join(name);
    let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let opts = LoadOptions::default();
    let loaded = onic_bpf::load(&bytes, sec, &opts).map_err(|e| format!("{name}: {e}"))?;
    let mut host = SimHost::new(opts.cpus, 1);
    host.redirects.push((Some(0), 2, OTHER_PORT));
    let mut e = XdpEngine::new(loaded, host, opts.budget);
    for (m, k, v) in maps {
        e.map_mut(m)
            .ok_or_else(|| format!("{name}: no map {m}"))?
            .host_set(&k.to_le_bytes(), &v.to_le_bytes())?;
    }
    Ok(HeldProg::Object(Box::new(e)))
}

/// A UDP frame of `wire_len` bytes on the wire (FCS included).
fn frame(wire_len: usize) -> Vec<u8> {
    let len = wire_len - 4;
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&1234u16.to_be_bytes());
    f[36..38].copy_from_slice(&5678u16.to_be_bytes());
    f
}

struct Bench<'c> {
    card: &'c Card,
    ports: Vec<PortRig<'c>>,
    rings: Vec<&'c onic_core::queue::pool::RecycleRing>,
    hasher: ShellHasher,
    progs: Vec<HeldProg>,
}

impl Bench<'_> {
    /// Time of one poll loop taking `BURST` frames on port 0's pair.
    fn timed_burst(&mut self, path: Path) -> Duration {
        let (a, b) = self.ports.split_at_mut(1);
        let PortRig { dev, pairs } = &mut a[0];
        let other = &mut b[0];
        let db = dev.doorbells();
        let other_db = other.dev.doorbells();
        let mut target = TxTarget::new(&mut other.pairs[0].tx, &other_db);
        let mut map: DevMap<'_, DmaPage, 1> = DevMap::new();
        let _ = map.insert(OTHER_PORT, &mut target);
        let mut os: Vec<(DmaPage, usize)> = Vec::with_capacity(BURST);
        let mut done = FrameDone::new(&self.rings, self.card.dma());
        let pair = &mut pairs[0];
        let mut got = 0;
        let mut idle = 0;
        let start = Instant::now();
        while got < BURST && idle < 4 {
            let mut to_os = |f: RxFrame<DmaPage>, _: PassInfo| -> Result<(), RxFrame<DmaPage>> {
                os.push((f.page, usize::from(f.len)));
                Ok(())
            };
            let mut native = match path {
                Path::Program(p, _) => Some(p),
                _ => None,
            };
            let held = match path {
                Path::Held(i) => self.progs.get_mut(i),
                _ => None,
            };
            let prog: Option<&mut dyn RawXdpProgram> = match held {
                Some(h) => Some(h),
                None => native.as_mut().map(|p| p as &mut dyn RawXdpProgram),
            };
            // Objects get the RX hash, as a driver offering the kfunc computes it.
            let hash = matches!(path, Path::Program(_, true) | Path::Held(_));
            let dispatch = XdpDispatch {
                prog,
                redirect: &mut map,
                origin: 0,
                hasher: hash.then_some(&self.hasher),
            };
            let n = poll_pair(
                pair,
                (64, &db),
                (&mut to_os, XdpRxq::default()),
                dispatch,
                &mut done,
            )
            .rx
            .done;
            got += n;
            idle = if n == 0 { idle + 1 } else { 0 };
        }
        // The OS gives the passed pages back at once (an skb freed right away): part of the
        // pass path's cost.
        for (page, len) in os {
            pair.pool.return_from_os(page, len);
        }
        start.elapsed()
    }

    /// Untimed: lets the model send what was queued and gives completed pages back.
    fn settle_tx(&mut self) {
        self.card.run_until_idle();
        for p in 0..2 {
            let _ = self.card.take_egress(p);
        }
        let mut done = FrameDone::new(&self.rings, self.card.dma());
        let other = &mut self.ports[1].pairs[0];
        other.tx.reclaim(&mut done);
    }

    /// Best nanoseconds per frame for `path` at `wire_len`.
    fn ns_per_frame(&mut self, path: Path, wire_len: usize, bursts: usize) -> f64 {
        let f = frame(wire_len);
        let mut best = f64::INFINITY;
        for _ in 0..REPS {
            let mut total = Duration::ZERO;
            for _ in 0..bursts {
                for _ in 0..BURST {
                    self.card.inject(0, &f);
                }
                self.card.run_until_idle();
                self.card.advance_time(2_000);
                self.card.run_until_idle();
                total += self.timed_burst(path);
                self.settle_tx();
            }
            best = best.min(total.as_secs_f64() * 1e9 / (bursts * BURST) as f64);
        }
        best
    }
}

/// ns per frame at 64 B: each built-in program beside the object doing the same.
fn native_vs_object(b: &mut Bench<'_>, bursts: usize) -> Result<Vec<(String, f64, &'static str)>, String> {
    let pairs: [(&str, HeldProg, HeldProg); 5] = [
        (
            "drop",
            HeldProg::Native(Builtin::Drop),
            object("xdp_drop.o", None, &[])?,
        ),
        (
            "pass",
            HeldProg::Native(Builtin::Pass),
            object("xdp_pass.o", None, &[])?,
        ),
        (
            "tx",
            HeldProg::Native(Builtin::Tx),
            object("xdp_swap.o", None, &[])?,
        ),
        (
            "redirect",
            HeldProg::Native(Builtin::Redirect),
            object(
                "xdp_redirect_map.o",
                Some("xdp_redirect_map"),
                &[("tx_port", 0, 2)],
            )?,
        ),
        (
            "count",
            HeldProg::Native(Builtin::Count(Default::default())),
            object("xdp_count.o", None, &[])?,
        ),
    ];
    let mut out = Vec::new();
    for (name, native, obj) in pairs {
        b.progs = vec![native, obj];
        let n = b.ns_per_frame(Path::Held(0), 64, bursts);
        let o = b.ns_per_frame(Path::Held(1), 64, bursts);
        if let Some(HeldProg::Object(e)) = b.progs.get(1) {
            if e.stats().faults > 0 || e.stats().runs == 0 {
                return Err(format!("the {name} object faulted or never ran"));
            }
        }
        out.push((format!("xdp_native_{name}_64B"), n, "ns/frame"));
        out.push((format!("xdp_object_{name}_64B"), o, "ns/frame"));
        out.push((format!("xdp_object_{name}_64B_extra"), o - n, "ns/frame"));
    }
    Ok(out)
}

/// Runs the group; one `(name, value, unit)` per figure.
pub fn run() -> Result<Vec<(String, f64, &'static str)>, String> {
    let bursts = std::env::var("ONIC_BENCH_XDP_BURSTS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok())
        .unwrap_or(160)
        .max(1);
    let mut cc = CardConfig::default();
    cc.wire = Wire::Open;
    let card = Card::new(cc);
    let owned = recycle_rings(1);
    let rings: Vec<_> = owned.iter().collect();
    let ports = bring_up(&card, 1, onic_core::queue::rx::DEFAULT_MAX_FRAME_LEN, &rings)?;
    let mut b = Bench {
        card: &card,
        ports,
        rings,
        hasher: ShellHasher::default(),
        progs: Vec::new(),
    };
    let mpps = |ns: f64| 1e3 / ns;
    let mut out = Vec::new();
    // Warm the pools and caches once.
    b.ns_per_frame(Path::XdpNoProgram, 64, 4);
    for size in SIZES {
        for (name, path) in [
            ("xdp_no_prog", Path::XdpNoProgram),
            ("xdp_pass_prog", Path::Program(pass, false)),
        ] {
            let ns = b.ns_per_frame(path, size, bursts);
            out.push((format!("xdp_rx_{name}_{size}B"), mpps(ns), UNIT));
        }
    }
    for (name, path) in [
        ("drop", Path::Program(drop_all, false)),
        ("pass", Path::Program(pass, false)),
        ("tx", Path::Program(swap_macs_and_tx, false)),
        ("redirect", Path::Program(redirect_other_port, false)),
        ("pass_with_rx_hash", Path::Program(pass, true)),
    ] {
        let ns = b.ns_per_frame(path, 64, bursts);
        out.push((format!("xdp_verdict_{name}_64B"), mpps(ns), UNIT));
    }
    out.extend(native_vs_object(&mut b, bursts)?);
    let counters: u64 = b.ports[0].pairs[0].stats().rx_xdp_redirect;
    if counters == 0 {
        return Err("the redirect path redirected nothing".into());
    }
    let live = teardown(&card, b.ports, &b.rings)?;
    if live != 0 {
        return Err(format!("{live} pages leaked by the benchmark"));
    }
    Ok(out)
}

// The benchmark's own bring-up: the pairs alone, without a port around them, so that the
// timed poll is the core's and nothing else.

/// Ring-size index of every ring (1024 entries).
const RING_SIZE_IDX: u8 = 8;

pub(crate) type Pair<'c> = onic_embed::set::Pair<'c, SimDma<'c>, XdpFrame<DmaPage>>;

/// One PCI function (one port) and its queue pairs.
pub(crate) struct PortRig<'c> {
    pub(crate) dev: Device<QdmaWindow<'c>, ShellWindow<'c>>,
    pub(crate) pairs: Vec<Pair<'c>>,
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
            let mut spec = PairSpec::new(QueueId::new(q), ring, RxQueueConfig::new(QueueId::new(q)).buf);
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
