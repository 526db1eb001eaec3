//! `onic run --xdp-obj FILE.o`: a clang-built XDP object run by the `onic-bpf` engine in place of
//! a built-in program. The object's maps can be set before the run (`--map NAME:KEY=VALUE`) and
//! are printed, or written as JSON, after it (`--dump-maps`).
//!
//! What the program sees of the model: port `p` is interface `p + 1` (`ctx->ingress_ifindex`,
//! `bpf_redirect`, devmap values), and the model has no other interfaces. Redirecting to the other
//! port's interface sends the frame out of that port (redirect target [`OTHER_PORT`]), to the
//! ingress port's own interface back out of that port (a hairpin, target [`HAIRPIN`]); a
//! redirect to any other interface fails as in a driver that has no such device: the
//! frame is dropped, counted as a failed redirect and reported with the interface it named. An
//! AF_XDP socket in an xskmap is the run's user sink (target [`XSK_SINK`], written to
//! `xsk.pcap`); RX queue `q` runs on CPU `q % 4`, and a cpumap redirect to CPU `c` reaches the
//! OS as a pass on that CPU (target [`CPU_BASE`]` + c`); a broadcast sends a copy out of every
//! devmap entry's port ([`BROADCAST_BASE`] plus a mask of the ports); replay and traffic mode
//! carry them out alike ([`crate::carry`]);
//! `bpf_ktime_get_ns` is the capture's time; `bpf_trace_printk` lines and fault reports are
//! printed after the run. Every CPU's perf event stream is open, and the records a program writes
//! into ring buffers and perf event arrays are written to `bpf-records.txt` in `--out-dir` (a
//! replay) or counted (traffic mode).

use std::path::{Path, PathBuf};

use onic_bpf::{LoadOptions, Loader, SimHost, XdpEngine};
use onic_core::xdp::{RawXdpProgram, XdpBuff, XdpProgram};

use crate::xdp_progs::{Builtin, OTHER_PORT};

/// Redirect target number of the user sink (AF_XDP-like) in `onic run`'s redirect table.
pub const XSK_SINK: u32 = 1;
/// Redirect target number of a hairpin: out of the port the frame came in on.
pub const HAIRPIN: u32 = 2;
/// What the engine names as target when the host lacks the interface: no table has it.
const NO_TARGET: u32 = u32::MAX;

/// Redirect target number of cpumap entry CPU `c`: `CPU_BASE + c`.
pub const CPU_BASE: u32 = 8;
/// Redirect target number of a broadcast: `BROADCAST_BASE + m`, bit `p` of `m` set for a copy
/// out of port `p` (0: no copy at all, e.g. an empty devmap).
pub const BROADCAST_BASE: u32 = 16;

/// The redirect targets `onic run` carries out (replay and traffic mode, [`crate::carry`]).
#[must_use]
pub fn redirect_targets() -> Vec<u32> {
    let mut v = vec![OTHER_PORT, XSK_SINK, HAIRPIN];
    v.extend((0..CPUS).map(|c| CPU_BASE + c));
    v.extend((0..4).map(|m| BROADCAST_BASE + m));
    v
}

/// Where a redirect of `onic run` goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Out of the other port.
    OtherPort,
    /// Back out of the ingress port.
    Hairpin,
    /// The user sink (an xskmap entry).
    Xsk,
    /// Cpumap entry CPU `c`: the OS receives it on that CPU.
    Cpu(u32),
    /// A broadcast: a copy out of each port whose bit is set.
    Broadcast(u8),
    /// None the host knows (the driver refused the redirect).
    Unknown,
}

impl Target {
    /// What redirect target `t` is.
    #[must_use]
    pub fn of(t: Option<u32>) -> Self {
        match t {
            Some(OTHER_PORT) => Self::OtherPort,
            Some(HAIRPIN) => Self::Hairpin,
            Some(XSK_SINK) => Self::Xsk,
            Some(c) if (CPU_BASE..CPU_BASE + CPUS).contains(&c) => Self::Cpu(c - CPU_BASE),
            // CAST: the mask is below 4.
            Some(m) if (BROADCAST_BASE..BROADCAST_BASE + 4).contains(&m) => {
                Self::Broadcast((m - BROADCAST_BASE) as u8)
            }
            _ => Self::Unknown,
        }
    }
}
/// CPUs the per-CPU maps keep values for.
pub const CPUS: u32 = 4;
/// Interface index of port 0.
pub const IFINDEX_BASE: u32 = 1;

/// Options of `onic run` for object programs.
#[derive(clap::Args, Clone, Debug, Default)]
#[command(next_help_heading = "XDP objects (--xdp-obj)")]
pub struct ObjOpts {
    /// A clang-built XDP object (clang -O2 -g -target bpf -c prog.c -o prog.o) to run instead of a
    /// built-in program. Records it writes into ring buffers and perf event arrays go to
    /// bpf-records.txt in --out-dir (a replay; traffic mode counts them).
    #[arg(long, conflicts_with = "xdp")]
    pub xdp_obj: Option<PathBuf>,
    /// The program of the object to run: a section (xdp, xdp/foo) or function name [default:
    /// the object's only XDP program].
    #[arg(long, requires = "xdp_obj")]
    pub sec: Option<String>,
    /// Loads the chosen program as this type whatever its section is named (only `xdp`), as
    /// libbpf's bpf_program__set_type does; without it, programs load from sections named
    /// xdp, xdp/..., xdp.frags...
    #[arg(long, value_name = "TYPE", value_parser = ["xdp"], requires = "xdp_obj")]
    pub prog_type: Option<String>,
    /// Sets a map entry before the run: NAME:KEY=VALUE, key and value as numbers (decimal or 0x;
    /// little-endian in the map's key/value size) or hex:<bytes>; repeatable. Port p is
    /// interface p + 1 (e.g. --map tx_port:0=2 for a devmap entry to port 1); a devmap value
    /// naming another interface is refused, as the kernel refuses it; a cpumap key is one of
    /// the 4 CPUs, its value a queue size of 1 to 16384. In a program array
    /// the value is a function of the object (loaded as XDP, for bpf_tail_call), in a map of
    /// maps another map of the object (--map jmp_table:0=classifier_0, --map outer:0=inner).
    #[arg(long = "map", value_name = "NAME:KEY=VALUE", requires = "xdp_obj")]
    pub maps: Vec<String>,
    /// An IPv4 route for bpf_fib_lookup: 'PREFIX/LEN dev PORT [neigh MAC] [src MAC]' (frames to
    /// PREFIX/LEN leave through port PORT, 0 or 1, towards the next hop's address MAC, from the
    /// port's address src, default 00:0a:35:00:00:0P); repeatable, the longest prefix wins.
    /// Without neigh the neighbour is unresolved: lookups answer NO_NEIGH (7) with the
    /// interface filled in, as the kernel does. Without routes every lookup answers "not
    /// forwarded". As Linux 6.1: the params' ifindex must be interface 1 or 2 (else -ENODEV);
    /// BPF_FIB_LOOKUP_OUTPUT takes only routes out of that interface; DIRECT|TBID finds the
    /// routes in table 254 only; SKIP_NEIGH skips the neighbour; tot_len above 1500 answers
    /// FRAG_NEEDED (8).
    #[arg(long = "route", value_name = "ROUTE", requires = "xdp_obj")]
    pub routes: Vec<String>,
    /// Writes the maps' final contents as JSON to FILE (`-` or no FILE: standard output).
    #[arg(long, value_name = "FILE", num_args = 0..=1, default_missing_value = "-", requires = "xdp_obj")]
    pub dump_maps: Option<PathBuf>,
    /// With --xdp-obj, run traffic mode (the program on the receiving function's RX queues)
    /// instead of replaying the sample mix.
    #[arg(long, requires = "xdp_obj", conflicts_with = "pcap")]
    pub traffic: bool,
    /// Loads the program into the host kernel too (its libbpf, when bpf() is permitted) and
    /// prints the verifier's verdict and log beside the run; where bpf() is not permitted it
    /// says so. Without it, the engine still refuses at load what it can tell the verifier
    /// refuses (context fields, stack bounds, helper argument types), in the kernel's words.
    #[arg(long, requires = "xdp_obj")]
    pub kernel_verify: bool,
    /// Replays the frames straight into the program as the kernel's BPF_PROG_TEST_RUN does: no
    /// MAC or driver in front (runts and frames above 1514 bytes reach it), a zeroed page with
    /// 256 bytes of headroom and 320 of tailroom, a verdict and the output bytes per frame,
    /// nothing sent (redirects name their target). Refused like the kernel's test run: frames
    /// under 14 bytes (ETH_HLEN); refused here only: frames over 3520 bytes (the kernel puts the
    /// rest in fragment pages). Writes test-run.pcap and test-run.txt (one line per frame) to
    /// --out-dir.
    #[arg(long, requires = "xdp_obj", conflicts_with_all = ["traffic", "keep_headroom"])]
    pub test_run: bool,
    /// Leaves the headroom a program grows into (bpf_xdp_adjust_head, bpf_xdp_adjust_meta) as
    /// the model's page holds it, as a driver does; without it the headroom is zeroed before
    /// each run, as in the kernel's test run (BPF_PROG_TEST_RUN).
    #[arg(long, requires = "xdp_obj")]
    pub keep_headroom: bool,
    /// Most instructions one run of the program may execute before it is aborted
    /// (1..=100000000; a run of 1e8 instructions takes about a third of a second).
    #[arg(long, default_value_t = DEFAULT_INSN_BUDGET, requires = "xdp_obj")]
    pub insn_budget: u64,
    /// Most instructions all runs of the program together may execute (1..=1e13); the run stops
    /// with an error when they reach it (the default is about half a minute of interpretation).
    #[arg(long, default_value_t = DEFAULT_INSN_TOTAL, requires = "xdp_obj")]
    pub insn_total: u64,
}

/// The file in `--out-dir` that holds the records of ring buffers and perf event arrays.
pub const RECORDS_FILE: &str = "bpf-records.txt";

/// Largest object file `--xdp-obj` reads (clang's XDP objects are a few KiB to a few hundred
/// KiB; their maps are created from definitions, not stored in the file).
pub const MAX_OBJECT_BYTES: u64 = 16 << 20;

/// Default of `--insn-budget`.
pub const DEFAULT_INSN_BUDGET: u64 = 1_000_000;
/// Largest `--insn-budget`: one run may take about a third of a second (the interpreter runs
/// about 3e8 instructions a second in a release build).
pub const MAX_INSN_BUDGET: u64 = 100_000_000;
/// Default of `--insn-total`: about half a minute of interpretation.
pub const DEFAULT_INSN_TOTAL: u64 = 10_000_000_000;
/// Largest `--insn-total`: about nine hours of interpretation.
pub const MAX_INSN_TOTAL: u64 = 10_000_000_000_000;

/// An object's engine with the cap on the instructions of all its runs (`--insn-total`): once
/// the runs together reach it, the program is no longer run (the frame is aborted) and
/// [`ObjEngine::check`] reports it, so the run ends with a message instead of going on.
pub struct ObjEngine {
    /// The engine.
    pub engine: XdpEngine<SimHost>,
    /// The cap.
    pub insn_total: u64,
    /// Frames that met the cap (not run).
    pub refused: u64,
    /// Redirects to interfaces the model lacks: interface index, frames.
    pub missing: std::collections::BTreeMap<u32, u64>,
    /// Whether the headroom is zeroed before each run (not `--keep-headroom`).
    pub zero_headroom: bool,
}

impl ObjEngine {
    /// An error once the cap has been reached.
    ///
    /// # Errors
    ///
    /// What was run and which option to change.
    pub fn check(&self) -> Result<(), String> {
        if self.refused == 0 {
            return Ok(());
        }
        let s = self.engine.stats();
        Err(format!(
            "the XDP program executed {} instructions in {} runs and reached --insn-total {}; the run stops here (raise --insn-total, lower --insn-budget or replay fewer frames)",
            s.insns, s.runs, self.insn_total
        ))
    }
}

impl RawXdpProgram for ObjEngine {
    fn run_raw(&mut self, xdp: &mut XdpBuff<'_>) -> u32 {
        if self.engine.stats().insns >= self.insn_total {
            self.refused += 1;
            return onic_core::xdp::XdpAction::Aborted.raw();
        }
        if self.zero_headroom {
            xdp.clear_headroom();
        }
        self.engine.host().missing.set(None);
        let raw = self.engine.run(xdp);
        if raw != onic_core::xdp::XdpAction::Redirect.raw() {
            return raw;
        }
        match xdp.redirect_target() {
            Some(NO_TARGET) => {
                if let Some(ifindex) = self.engine.host().missing.take() {
                    *self.missing.entry(ifindex).or_default() += 1;
                }
            }
            Some(BROADCAST_BASE) => {
                let mask = self.broadcast_ports();
                xdp.redirect(BROADCAST_BASE + u32::from(mask));
            }
            _ => {}
        }
        raw
    }
}

impl ObjEngine {
    /// The ports of the last broadcast, as a mask (bit `p`: port `p`); interfaces the model
    /// lacks get no copy and are counted in [`ObjEngine::missing`].
    fn broadcast_ports(&mut self) -> u8 {
        let mut mask = 0;
        for &ifindex in &self.engine.host().last_broadcast {
            match ifindex.wrapping_sub(IFINDEX_BASE) {
                p @ 0..=1 => mask |= 1 << p,
                _ => *self.missing.entry(ifindex).or_default() += 1,
            }
        }
        mask
    }
}

/// The program `onic run` attaches: built in, or an object run by the engine.
pub enum Prog {
    /// A built-in program.
    Builtin(Builtin),
    /// An object.
    Object(Box<ObjEngine>, PathBuf),
}

impl RawXdpProgram for Prog {
    fn run_raw(&mut self, xdp: &mut XdpBuff<'_>) -> u32 {
        match self {
            Self::Builtin(b) => b.run(xdp).raw(),
            Self::Object(e, _) => e.run_raw(xdp),
        }
    }
}

impl Prog {
    /// Sets the time `bpf_ktime_get_ns` reports.
    pub fn set_time(&mut self, ns: u64) {
        if let Self::Object(e, _) = self {
            e.engine.host_mut().now_ns = ns;
        }
    }

    /// The name to print.
    pub fn describe(&self, builtin: &str) -> String {
        match self {
            Self::Builtin(_) => builtin.to_string(),
            Self::Object(e, path) => format!(
                "{} (section {}) of {}, onic-bpf interpreter",
                e.engine.program().name(),
                e.engine.program().info().section,
                path.display()
            ),
        }
    }
}

/// Loads the object of `o` with its `--map` settings.
///
/// # Errors
///
/// The loader's refusal, a bad `--map`.
pub fn load(o: &ObjOpts, path: &Path) -> Result<ObjEngine, String> {
    use onic_cli::limits::in_range;
    in_range(
        "--insn-budget",
        o.insn_budget,
        1,
        MAX_INSN_BUDGET,
        "instructions one run of the program may execute",
    )?;
    in_range(
        "--insn-total",
        o.insn_total,
        1,
        MAX_INSN_TOTAL,
        "instructions all runs of the program together may execute",
    )?;
    let routes = crate::route::parse_all(&o.routes, IFINDEX_BASE)?;
    let bytes = onic_cli::file::read_bounded(path, MAX_OBJECT_BYTES, "an XDP object")?;
    if o.kernel_verify {
        kernel_verdict(o, path, &bytes);
    }
    let opts = LoadOptions {
        cpus: CPUS,
        budget: o.insn_budget,
        ..LoadOptions::default()
    };
    let loader = Loader::new(opts).prog_type_xdp(o.prog_type.is_some());
    let loaded = loader
        .load(&bytes, o.sec.as_deref())
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut host = SimHost::new(CPUS, 0x5eed);
    host.ifindex_base = IFINDEX_BASE;
    // From port 0, interface 2 (port 1) is the other port, and the other way round; a port's
    // own interface is a hairpin.
    host.redirects = vec![
        (Some(0), IFINDEX_BASE + 1, OTHER_PORT),
        (Some(1), IFINDEX_BASE, OTHER_PORT),
        (Some(0), IFINDEX_BASE, HAIRPIN),
        (Some(1), IFINDEX_BASE + 1, HAIRPIN),
    ];
    host.xsk_target = Some(XSK_SINK);
    host.cpu_target_base = Some(CPU_BASE);
    host.broadcast_target = Some(BROADCAST_BASE);
    host.routes = routes;
    let mut e = XdpEngine::new(loaded, host, opts.budget);
    open_event_streams(&mut e)?;
    for m in &o.maps {
        set_map(&mut e, m, (&loader, &bytes))?;
    }
    if let Some(dump) = &o.dump_maps {
        check_dump(e.maps(), dump)?;
    }
    Ok(ObjEngine {
        engine: e,
        insn_total: o.insn_total,
        refused: 0,
        missing: std::collections::BTreeMap::new(),
        zero_headroom: !o.keep_headroom,
    })
}

/// `--kernel-verify`: the host kernel's verdict on the program `--sec` chooses, printed before
/// the engine loads it (so that it is there when the engine refuses it too).
fn kernel_verdict(o: &ObjOpts, path: &Path, bytes: &[u8]) {
    let progs = onic_bpf::list_programs(bytes).unwrap_or_default();
    let chosen: Vec<_> = progs
        .iter()
        .filter(|p| match o.sec.as_deref() {
            Some(s) => p.section == s || p.name == s,
            None => p.is_xdp,
        })
        .collect();
    let v = match chosen.as_slice() {
        [one] => crate::kernel_verify::verify(path, &one.name, o.prog_type.is_some(), CPUS),
        _ => crate::kernel_verify::Verdict::NotAsked("--sec names no single program".into()),
    };
    crate::kernel_verify::print(&v);
}

/// Opens every entry of the perf event arrays (one event stream per CPU), as a reader such as
/// `perf` or libbpf's perf buffer would: the records reach the host instead of -ENOENT.
fn open_event_streams(e: &mut XdpEngine<SimHost>) -> Result<(), String> {
    for m in e.maps_mut() {
        if m.def().map_type != onic_bpf::MapType::PerfEventArray {
            continue;
        }
        for i in 0..m.def().max_entries.min(CPUS) {
            m.host_set(&i.to_le_bytes(), &i.to_le_bytes())?;
        }
    }
    Ok(())
}

fn set_map(e: &mut XdpEngine<SimHost>, spec: &str, object: (&Loader<'_>, &[u8])) -> Result<(), String> {
    let bad = || format!("--map {spec}: expected NAME:KEY=VALUE");
    let (name, kv) = spec.split_once(':').ok_or_else(bad)?;
    let (k, v) = kv.split_once('=').ok_or_else(bad)?;
    let kind = e.map_mut(name).map(|m| m.def().map_type);
    if kind.is_some_and(|t| t.is_map_of_maps() || t == onic_bpf::MapType::ProgArray) {
        return set_by_name(e, spec, (name, k, v), object);
    }
    // The object's maps, named the way every list from an object is (the first few, the rest
    // counted): made before the map is borrowed for writing.
    let names = onic_bpf::msg::list(e.maps().iter().map(|m| onic_bpf::msg::clip(&m.def().name)));
    let map = e
        .map_mut(name)
        .ok_or_else(|| format!("--map {spec}: no map '{name}' (maps: {names})"))?;
    let d = map.def().clone();
    let key =
        onic_bpf::maps::parse_bytes(k, d.key_size as usize).map_err(|m| format!("--map {spec}: key {m}"))?;
    let value = onic_bpf::maps::parse_bytes(v, d.value_size as usize)
        .map_err(|m| format!("--map {spec}: value {m}"))?;
    if d.map_type.is_devmap() {
        existing_port(&value).map_err(|m| format!("--map {spec}: {m}"))?;
    }
    if d.map_type == onic_bpf::MapType::CpuMap {
        existing_cpu(&key, &value).map_err(|m| format!("--map {spec}: {m}"))?;
    }
    map.host_set(&key, &value)
        .map_err(|m| format!("--map {spec}: {m}"))
}

/// Checks a devmap value (its first four bytes are an interface index) against the model's
/// ports, as the kernel's devmap update looks the interface up and refuses one that does not
/// exist.
fn existing_port(value: &[u8]) -> Result<(), String> {
    let ifindex = value
        .get(..4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let ports = IFINDEX_BASE..IFINDEX_BASE + 2;
    if ports.contains(&ifindex) {
        return Ok(());
    }
    Err(format!(
        "interface {ifindex} does not exist in the model (port 0 is interface {}, port 1 interface {}); the kernel's devmap update refuses it too (EINVAL){}",
        ports.start,
        ports.start + 1,
        if ifindex == 0 {
            "; an entry that should stay empty is left out of --map"
        } else {
            ""
        }
    ))
}

/// Checks a cpumap entry (key: a CPU; value: the queue size, then a program) as the kernel's
/// cpumap update does: a CPU the host has, a queue size of 1 to 16384 (0 would empty the entry).
fn existing_cpu(key: &[u8], value: &[u8]) -> Result<(), String> {
    let word = |b: &[u8]| {
        b.get(..4)
            .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    };
    let (cpu, qsize) = (word(key), word(value));
    if cpu >= CPUS {
        return Err(format!(
            "CPU {cpu} does not exist in the model (CPUs 0 to {}); the kernel's cpumap update refuses it (ENODEV)",
            CPUS - 1
        ));
    }
    if qsize == 0 || qsize > 16384 {
        return Err(format!(
            "queue size {qsize}: a cpumap entry's queue holds 1 to 16384 frames (the kernel refuses more with EOVERFLOW, and 0 empties the entry: leave it out of --map)"
        ));
    }
    Ok(())
}

/// `--map` into a program array (the value a function of the object, loaded as XDP and added
/// to the engine) or a map of maps (the value another map of the object).
fn set_by_name(
    e: &mut XdpEngine<SimHost>,
    spec: &str,
    (name, k, v): (&str, &str, &str),
    (loader, bytes): (&Loader<'_>, &[u8]),
) -> Result<(), String> {
    let outer = e
        .maps()
        .iter()
        .position(|m| m.def().name == name)
        .ok_or("no such map")?;
    let d = e.maps()[outer].def().clone();
    let key =
        onic_bpf::maps::parse_bytes(k, d.key_size as usize).map_err(|m| format!("--map {spec}: key {m}"))?;
    if d.map_type.is_map_of_maps() {
        let names = onic_bpf::msg::list(e.maps().iter().map(|m| onic_bpf::msg::clip(&m.def().name)));
        let inner = e
            .maps()
            .iter()
            .position(|m| m.def().name == v)
            .ok_or_else(|| format!("--map {spec}: no map '{v}' to put in {name} (maps: {names})"))?;
        return onic_bpf::maps::set_inner(e.maps_mut(), outer, &key, inner)
            .map_err(|m| format!("--map {spec}: {m}"));
    }
    let other = loader
        .prog_type_xdp(true)
        .load(bytes, Some(v))
        .map_err(|m| format!("--map {spec}: {m}"))?;
    let n = e.add_program(other.program);
    e.maps_mut()[outer]
        .host_set(&key, &n.to_le_bytes())
        .map_err(|m| format!("--map {spec}: {m}"))
}

/// Prints what the engine counted, its log, and the maps; writes the JSON dump.
///
/// # Errors
///
/// The dump file cannot be written.
pub fn report(o: &ObjEngine, dump: Option<&Path>, records: Option<&Path>) -> Result<(), String> {
    let e = &o.engine;
    let s = e.stats();
    outln!(
        "onic-bpf: {} runs, {} instructions ({:.1} per run), verdicts aborted {} drop {} pass {} tx {} redirect {} other {}",
        s.runs,
        s.insns,
        s.insns as f64 / s.runs.max(1) as f64,
        s.verdicts[0],
        s.verdicts[1],
        s.verdicts[2],
        s.verdicts[3],
        s.verdicts[4],
        s.invalid
    );
    outln!(
        "     rx_xdp_fault: {}          <- runs the engine aborted (also in rx_xdp_aborted)",
        s.faults
    );
    for (ifindex, n) in &o.missing {
        outln!(
            "     redirects to interface {ifindex}: {n}          <- no such interface in the model (ports 0 and 1 are interfaces {IFINDEX_BASE} and {}); failed redirects, dropped",
            IFINDEX_BASE + 1
        );
    }
    let h = e.host();
    if !h.lines.is_empty() {
        outln!(
            "program log ({} lines{}):",
            h.lines.len(),
            if h.lines_dropped > 0 { ", more dropped" } else { "" }
        );
        for l in h.lines.iter().take(20) {
            outln!("  {l}");
        }
        if h.lines.len() > 20 {
            outln!("  ... {} more", h.lines.len() - 20);
        }
    }
    for m in e.maps() {
        let d = m.def();
        outln!(
            "map {}: {} ({} entries of {}, key {} B, value {} B)",
            d.name,
            d.map_type.name(),
            m.len(),
            d.max_entries,
            d.key_size,
            d.value_size
        );
    }
    match records {
        Some(path) => write_records(h, path)?,
        None if !h.records.is_empty() => outln!(
            "records written to ring buffers and perf event arrays: {}",
            h.records.len()
        ),
        None => {}
    }
    if let Some(path) = dump {
        dump_maps(e.maps(), path)?;
    }
    Ok(())
}

/// Writes the records of ring buffers and perf event arrays, one a line: the map, the entry
/// (the CPU of a perf event array, 0 for a ring buffer), the length and the bytes in hex.
fn write_records(h: &SimHost, path: &Path) -> Result<(), String> {
    use std::fmt::Write as _;
    let mut file = onic_cli::file::OutputFile::create(path)?;
    let mut line = String::new();
    for (map, index, rec) in &h.records {
        line.clear();
        let _ = write!(line, "{map} {index} {} ", rec.len());
        for b in rec {
            let _ = write!(line, "{b:02x}");
        }
        line.push('\n');
        file.write_bytes(line.as_bytes())?;
    }
    file.commit()?;
    outln!(
        "records of ring buffers and perf event arrays: {} written to {}",
        h.records.len(),
        path.display()
    );
    Ok(())
}

/// Most bytes `--dump-maps` writes: a dump that could be larger is refused before the run.
pub const MAX_DUMP_BYTES: u64 = 256 << 20;

/// Checks before the run that the maps' JSON fits [`MAX_DUMP_BYTES`] however full they get, and
/// that `path` (unless `-`) can be written.
fn check_dump(maps: &[onic_bpf::Map], path: &Path) -> Result<(), String> {
    let bound = onic_bpf::maps::json_size_bound(maps);
    if bound > MAX_DUMP_BYTES {
        let (name, entries) = maps
            .iter()
            .map(|m| (m.def().name.as_str(), m.def().max_entries))
            .max_by_key(|m| m.1)
            .unwrap_or(("?", 0));
        return Err(format!(
            "--dump-maps: the maps could take up to {} as JSON (map {name} alone has {entries} entries), more than the {} a dump may take; run without --dump-maps",
            onic_cli::limits::human(bound),
            onic_cli::limits::human(MAX_DUMP_BYTES)
        ));
    }
    if path != Path::new("-") {
        onic_cli::file::check_output(path, "--dump-maps")?;
    }
    Ok(())
}

/// `fmt::Write` onto standard output or an output file, keeping the file's error.
struct JsonOut<'f> {
    file: Option<&'f mut onic_cli::file::OutputFile>,
    error: Option<String>,
}

impl std::fmt::Write for JsonOut<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        match self.file.as_deref_mut() {
            None => {
                out!("{s}");
                Ok(())
            }
            Some(f) => f.write_bytes(s.as_bytes()).map_err(|e| {
                self.error = Some(e);
                std::fmt::Error
            }),
        }
    }
}

/// Streams the maps' JSON to standard output (`-`) or into `path` (complete or not at all).
fn dump_maps(maps: &[onic_bpf::Map], path: &Path) -> Result<(), String> {
    if path == Path::new("-") {
        let mut w = JsonOut {
            file: None,
            error: None,
        };
        let _ = onic_bpf::maps::write_json(maps, &mut w);
        return Ok(());
    }
    let mut file = onic_cli::file::OutputFile::create(path)?;
    let mut w = JsonOut {
        file: Some(&mut file),
        error: None,
    };
    if onic_bpf::maps::write_json(maps, &mut w).is_err() {
        return Err(w
            .error
            .unwrap_or_else(|| format!("{}: cannot write", path.display())));
    }
    file.commit()?;
    outln!("maps written as JSON to {}", path.display());
    Ok(())
}
