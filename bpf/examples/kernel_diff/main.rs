//! The differential test of the engine against the host kernel (`cargo xtask bpf-diff` builds the
//! objects and runs this; see docs/bpf-differential.md).
//!
//! ```text
//! kernel_diff --manifest FILE --expect FILE [--update] [--bundle FILE]
//! kernel_diff --probe
//! ```
//!
//! The manifest (written by the xtask) lists one object per line: `id<TAB>path<TAB>status` (the
//! path relative to the manifest's directory), where the status is `ok` or why the source did not compile. For every XDP program of every object,
//! the program is loaded into the host kernel (libbpf, the verifier) and into the engine; where
//! both load, it runs on every frame of [`frames::all`] on both sides (the kernel through
//! `BPF_PROG_TEST_RUN`), each frame from the maps as loaded, and the verdict, the bytes after the
//! run (metadata and frame) and the maps' contents are compared. Every difference is checked
//! against the expectations file: one not listed there fails the run, and so does a listed one
//! that did not occur (a fix shows up as much as a regression). `--update` rewrites the
//! expectations file with what was seen, keeping the reasons of entries that stay.
//!
//! `--bundle FILE` also writes the set with the kernel's outcomes ([`onic_bpf::bundle`]) for the
//! bare-metal image, which runs it without a kernel (`cargo xtask bpf-diff`).
//!
//! Where bpf() is not permitted, the run says so and succeeds without comparing anything.
//!
//! The kernel side is `onic-libbpf` (the host's libbpf, opened at run time); nothing here is
//! `unsafe`.

#![forbid(unsafe_code)]

#[path = "../../tests/common/mod.rs"]
mod common;
mod engine;
mod expect;
mod frames;
mod report;

use std::process::ExitCode;

use engine::Onic;
use onic_bpf::bundle;
use onic_libbpf::{KMap, Lib, LoadOptions, Loaded, VerifierLog};

/// What one side did with one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The program ran: its verdict, the metadata and frame after it, a log line (onic: its last).
    Ran {
        /// The return value.
        verdict: u32,
        /// Metadata in front of the frame.
        meta: Vec<u8>,
        /// The frame.
        frame: Vec<u8>,
        /// A log line (the engine's last: a fault names what and where).
        note: String,
    },
    /// The run was refused (the kernel's errno or the engine's reason).
    Refused(String),
}

/// One kind of difference of one program: what differs, on how many frames, the first example.
#[derive(Debug, Clone)]
pub struct Diff {
    /// `object-id:function`.
    pub program: String,
    /// `onic-refuses`, `kernel-refuses`, `verdict`, `bytes`, `maps`, `records`.
    pub kind: &'static str,
    /// Frames it happened on (0 for load differences).
    pub frames: usize,
    /// What was seen (first frame).
    pub detail: String,
}

/// What happened to one program.
#[derive(Debug, Default)]
pub struct ProgResult {
    /// `object-id:function`.
    pub id: String,
    /// The kernel's refusal, if it refused.
    pub kernel: Option<String>,
    /// The engine's refusal, if it refused.
    pub onic: Option<String>,
    /// Frames the kernel refused to test-run: (errno text, frame names).
    pub run_refused: Option<(String, Vec<String>)>,
    /// Frames compared.
    pub compared: usize,
    /// Frames the kernel's run changed (bytes or metadata), so the byte comparison had
    /// something to compare beyond a copy.
    pub rewritten: usize,
    /// Frames after which the kernel's maps differed from their state after the load.
    pub maps_changed: usize,
    /// Map comparisons made (a kernel map with an engine map of the same name, per frame).
    pub map_checks: usize,
    /// Ring buffer records the kernel's runs wrote (each compared with the engine's).
    pub ring_records: usize,
    /// Frames whose verdicts, bytes, maps, ring buffer records differed.
    pub verdict: usize,
    /// See `verdict`.
    pub bytes: usize,
    /// See `verdict`.
    pub maps: usize,
    /// See `verdict`.
    pub records: usize,
}

/// Map types whose contents are compared (hash, array and their per-CPU and LRU kinds).
fn comparable(m: &KMap) -> bool {
    matches!(m.map_type, 1 | 2 | 5 | 6 | 9 | 10)
}

/// `BPF_MAP_TYPE_RINGBUF`: maps whose records are compared.
const RINGBUF: u32 = 27;

/// Where the kernel's and the engine's ring buffer records first differ.
fn records_differ(kernel: &bundle::Records, onic: &bundle::Records) -> Option<String> {
    if kernel == onic {
        return None;
    }
    let at = kernel
        .iter()
        .zip(onic)
        .position(|(a, b)| a != b)
        .unwrap_or(kernel.len().min(onic.len()));
    let show = |r: &bundle::Records| {
        r.get(at).map_or_else(
            || "none".into(),
            |(m, rec)| format!("{m}: {}", report::record(Some(rec))),
        )
    };
    Some(format!(
        "ring records: kernel {}, onic {}; record {at}: kernel {}, onic {}",
        kernel.len(),
        onic.len(),
        show(kernel),
        show(onic)
    ))
}

/// The records the kernel's run left in ring buffers `rings`, as [`bundle::Records`] orders
/// them (a ring that cannot be read gives one record saying why).
fn kernel_records(k: &Loaded<'_>, rings: &[&KMap]) -> bundle::Records {
    let mut rings = rings.to_vec();
    rings.sort_by(|a, b| a.name.cmp(&b.name));
    let mut out = Vec::new();
    for m in rings {
        let recs = k
            .ring_records(m)
            .unwrap_or_else(|e| vec![format!("cannot read the ring: {e}").into_bytes()]);
        out.extend(recs.into_iter().map(|r| (m.name.clone(), r)));
    }
    out
}

/// The engine's name for kernel map `k`: libbpf prefixes global-data maps with part of the
/// object's name (`test_xd.rodata`); the engine calls them by their section (`.rodata`).
fn onic_name(k: &str) -> &str {
    match k.find('.') {
        Some(i) => &k[i..],
        None => k,
    }
}

fn describe(o: &Outcome) -> String {
    match o {
        Outcome::Ran { verdict, note, .. } if note.is_empty() => format!("verdict {verdict}"),
        Outcome::Ran { verdict, note, .. } => format!("verdict {verdict} ({note})"),
        Outcome::Refused(why) => format!("refused: {why}"),
    }
}

/// A map's entries, sorted by key: (key, value; per-CPU maps: CPU 0's copy).
pub type Entries = Vec<(Vec<u8>, Vec<u8>)>;

/// Maps after a run: (name, entries).
pub type MapState = Vec<(String, Entries)>;

/// Compares the maps after one frame; `None` if they agree, else the first difference.
fn maps_differ(kernel: &MapState, onic: &MapState) -> Option<String> {
    for (name, kv) in kernel {
        let Some((_, ov)) = onic.iter().find(|(n, _)| n == onic_name(name)) else {
            continue;
        };
        if kv != ov {
            let k = kv.iter().find(|e| !ov.contains(e));
            let o = ov.iter().find(|e| !kv.contains(e));
            return Some(format!(
                "map {name}: kernel has {}, onic {}",
                report::entry(k),
                report::entry(o)
            ));
        }
    }
    None
}

/// Frame-by-frame comparison of a program both sides loaded.
struct Compare<'a, 'l> {
    k: &'a Loaded<'l>,
    o: &'a Onic<'a>,
    cpus: usize,
    /// The kernel's maps as the last run left them.
    now: Vec<Entries>,
    /// The ring buffers, whose records are taken after every run.
    rings: Vec<&'a KMap>,
    res: ProgResult,
    diffs: [Diff; 4],
    /// What each frame should give, for the bundle.
    record: Vec<Option<bundle::Expected>>,
}

impl Compare<'_, '_> {
    fn frame(&mut self, name: &str, f: &[u8], maps: &[&KMap], initial: &[Entries]) {
        for ((m, init), now) in maps.iter().zip(initial).zip(&self.now) {
            self.k.restore(m, init, now, self.cpus);
        }
        let kr = match self.k.test_run(f) {
            Ok(r) => r,
            Err(e) => {
                let why = e.to_string();
                let r = self.res.run_refused.get_or_insert((why, Vec::new()));
                r.1.push(name.to_string());
                self.record.push(None);
                return;
            }
        };
        let kernel_maps: MapState = maps
            .iter()
            .map(|m| (m.name.clone(), self.k.entries(m, self.cpus)))
            .collect();
        self.now = kernel_maps.iter().map(|(_, e)| e.clone()).collect();
        self.res.maps_changed += usize::from(self.now.as_slice() != initial);
        self.res.rewritten += usize::from(!kr.meta.is_empty() || kr.frame != f);
        let kout = Outcome::Ran {
            verdict: kr.retval,
            meta: kr.meta,
            frame: kr.frame,
            note: String::new(),
        };
        let kernel_records = kernel_records(self.k, &self.rings);
        self.res.ring_records += kernel_records.len();
        let (oout, onic_maps, onic_records) = self.o.run(f);
        self.res.compared += 1;
        self.record
            .push(Some(expected((&kout, &oout), (&kernel_records, &onic_records))));
        let (kv, ov) = (verdict_of(&kout), verdict_of(&oout));
        if kv != ov {
            self.note(
                0,
                name,
                format!("kernel {}, onic {}", describe(&kout), describe(&oout)),
            );
        }
        if let (
            Outcome::Ran {
                meta: km, frame: kf, ..
            },
            Outcome::Ran {
                meta: om, frame: of, ..
            },
        ) = (&kout, &oout)
        {
            if km != om || kf != of {
                self.note(1, name, report::bytes_diff(km, kf, om, of));
            }
        }
        self.res.map_checks += kernel_maps
            .iter()
            .filter(|(n, _)| onic_maps.iter().any(|(o, _)| o == onic_name(n)))
            .count();
        if let Some(d) = maps_differ(&kernel_maps, &onic_maps) {
            self.note(2, name, d);
        }
        if let Some(d) = records_differ(&kernel_records, &onic_records) {
            self.note(3, name, d);
        }
    }

    fn note(&mut self, i: usize, frame: &str, detail: String) {
        let d = &mut self.diffs[i];
        if d.frames == 0 {
            d.detail = format!("frame {frame}: {detail}");
        }
        d.frames += 1;
    }
}

/// An outcome as the bundle keeps it (without the log line).
fn plain(o: &Outcome) -> bundle::Outcome {
    match o {
        Outcome::Ran {
            verdict, meta, frame, ..
        } => bundle::Outcome::Ran {
            verdict: *verdict,
            meta: meta.clone(),
            frame: frame.clone(),
        },
        Outcome::Refused(why) => bundle::Outcome::Refused(why.clone()),
    }
}

/// What a frame should give: the kernel's outcome and ring records, and the engine's where they
/// differ.
fn expected(
    (kernel, onic): (&Outcome, &Outcome),
    (k_records, o_records): (&bundle::Records, &bundle::Records),
) -> bundle::Expected {
    let (kernel, onic) = (plain(kernel), plain(onic));
    bundle::Expected {
        engine: (onic != kernel).then_some(onic),
        kernel,
        engine_records: (o_records != k_records).then(|| o_records.clone()),
        records: k_records.clone(),
    }
}

fn verdict_of(o: &Outcome) -> Option<u32> {
    match o {
        Outcome::Ran { verdict, .. } => Some(*verdict),
        Outcome::Refused(_) => None,
    }
}

/// Loads program `func` of object `path` into the kernel with its tail call targets and inner
/// maps; a refusal is the verifier's or libbpf's last words (with `BPFDIFF_VERBOSE` set, all of
/// them on stderr).
fn load_kernel<'l>(lib: &'l Lib, path: &str, func: &str) -> Result<Loaded<'l>, String> {
    let opts = LoadOptions {
        func,
        as_xdp: false,
        tail_calls: true,
        inner_maps: true,
        unsized_entries: onic_libbpf::unsized_entries(lib.possible_cpus()),
        log: VerifierLog::OnFailure,
    };
    lib.load(path.as_ref(), &opts).map_err(|e| {
        if let (onic_libbpf::Error::Refused(r), Some(_)) = (&e, std::env::var_os("BPFDIFF_VERBOSE")) {
            let said = r.said.text(onic_libbpf::PrintLevel::Debug);
            eprintln!(
                "--- {path} {func}: libbpf said\n{said}\n--- verifier log\n{}",
                r.verifier_log
            );
        }
        e.to_string()
    })
}

/// Runs program `func` of object `path` (object `object` of the bundle) on both sides; returns
/// what happened and the program as the bundle keeps it.
fn run_program(
    lib: &Lib,
    (id, path, object): (&str, &str, u32),
    bytes: &[u8],
    func: &str,
    diffs: &mut Vec<Diff>,
) -> (ProgResult, bundle::BundleProgram) {
    let program = format!("{id}:{func}");
    let kernel = load_kernel(lib, path, func);
    let entries = onic_libbpf::unsized_entries(lib.possible_cpus());
    let onic = Onic::load(bytes, func, entries);
    let mut bundled = bundle::BundleProgram {
        id: program.clone(),
        func: func.to_string(),
        object,
        entries,
        skip: None,
        setup: onic.as_ref().map(|o| o.setup.clone()).unwrap_or_default(),
        frames: Vec::new(),
    };
    bundled.skip = match (&kernel, &onic) {
        (Err(why), _) => Some(format!("the kernel does not load it: {why}")),
        (_, Err(why)) => Some(format!("the engine does not load it on the host: {why}")),
        (Ok(_), Ok(_)) => Onic::needs_more_than_the_object(bytes, func, entries),
    };
    let res = ProgResult {
        id: program.clone(),
        kernel: kernel.as_ref().err().cloned(),
        onic: onic.as_ref().err().cloned(),
        ..ProgResult::default()
    };
    let load_diff = |kind: &'static str, detail: &str| Diff {
        program: program.clone(),
        kind,
        frames: 0,
        detail: detail.to_string(),
    };
    let (k, o) = match (kernel, onic) {
        (Ok(k), Ok(o)) => (k, o),
        (Ok(_), Err(why)) => {
            diffs.push(load_diff("onic-refuses", &why));
            return (res, bundled);
        }
        (Err(why), Ok(_)) => {
            diffs.push(load_diff("kernel-refuses", &why));
            return (res, bundled);
        }
        (Err(_), Err(_)) => return (res, bundled),
    };
    let maps: Vec<&KMap> = k.maps.iter().filter(|m| comparable(m)).collect();
    let cpus = lib.possible_cpus();
    let initial: Vec<_> = maps.iter().map(|m| k.entries(m, cpus)).collect();
    let mut c = Compare {
        k: &k,
        o: &o,
        cpus,
        now: initial.clone(),
        rings: k.maps.iter().filter(|m| m.map_type == RINGBUF).collect(),
        res,
        diffs: ["verdict", "bytes", "maps", "records"].map(|kind| load_diff(kind, "")),
        record: Vec::new(),
    };
    for (name, f) in frames::all() {
        c.frame(&name, &f, &maps, &initial);
    }
    let [v, b, m, r] = &c.diffs;
    (c.res.verdict, c.res.bytes, c.res.maps, c.res.records) = (v.frames, b.frames, m.frames, r.frames);
    diffs.extend(c.diffs.into_iter().filter(|d| d.frames > 0));
    bundled.frames = c.record;
    (c.res, bundled)
}

/// The XDP programs of an object: those libbpf types as XDP and those the engine's section
/// names call XDP (a section neither knows is not an XDP program for either).
fn xdp_programs(lib: &Lib, path: &str, bytes: &[u8]) -> (Vec<String>, usize) {
    let mut out = Vec::new();
    let mut other = 0;
    let onic: Vec<_> = onic_bpf::list_programs(bytes).unwrap_or_default();
    let kernel = lib.programs(path.as_ref()).unwrap_or_default();
    // The selftests' tail call objects: tc programs that read nothing of their context, loaded
    // as XDP on both sides (libbpf's bpf_program__set_type, the engine's --prog-type xdp).
    let tails = kernel.iter().any(|p| onic_libbpf::tail_slot(&p.name).is_some());
    for k in &kernel {
        let onic_xdp = onic.iter().any(|p| p.name == k.name && p.is_xdp);
        if k.prog_type == onic_libbpf::PROG_TYPE_XDP || onic_xdp || tails {
            out.push(k.name.clone());
        } else {
            other += 1;
        }
    }
    for p in onic.iter().filter(|p| p.is_xdp) {
        if !out.contains(&p.name) {
            out.push(p.name.clone());
        }
    }
    (out, other)
}

struct Args {
    manifest: String,
    expect: String,
    update: bool,
    probe: bool,
    bundle: Option<String>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        manifest: String::new(),
        expect: String::new(),
        update: false,
        probe: false,
        bundle: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(x) = it.next() {
        match x.as_str() {
            "--manifest" => a.manifest = it.next().ok_or("--manifest FILE")?,
            "--expect" => a.expect = it.next().ok_or("--expect FILE")?,
            "--update" => a.update = true,
            "--probe" => a.probe = true,
            "--bundle" => a.bundle = Some(it.next().ok_or("--bundle FILE")?),
            _ => return Err(format!("unknown argument {x}")),
        }
    }
    if !a.probe && (a.manifest.is_empty() || a.expect.is_empty()) {
        return Err(
            "usage: kernel_diff --manifest FILE --expect FILE [--update] [--bundle FILE] | --probe".into(),
        );
    }
    Ok(a)
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kernel_diff: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let args = parse_args()?;
    let lib = Lib::open().map_err(|e| e.to_string())?;
    if let Err(why) = lib.probe() {
        println!("bpf-diff: SKIPPED, nothing compared: {why}");
        return Ok(ExitCode::SUCCESS);
    }
    if args.probe {
        println!("bpf-diff: bpf() is permitted");
        return Ok(ExitCode::SUCCESS);
    }
    // The kernel's test runs (and with them per-CPU map copies and bpf_get_smp_processor_id)
    // on CPU 0, as the engine's are.
    onic_libbpf::pin_to_cpu0().map_err(|e| e.to_string())?;
    let manifest = std::fs::read_to_string(&args.manifest).map_err(|e| format!("{}: {e}", args.manifest))?;
    // Object paths in the manifest are relative to its directory.
    let base = std::path::Path::new(&args.manifest)
        .parent()
        .unwrap_or(std::path::Path::new("."))
        .to_path_buf();
    let mut tally = report::Tally::default();
    let mut diffs = Vec::new();
    let mut set = bundle::Bundle {
        frames: frames::all(),
        ..bundle::Bundle::default()
    };
    for line in manifest
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let mut parts = line.splitn(3, '\t');
        let (id, path, status) = (
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
        );
        tally.sources += 1;
        if status != "ok" {
            tally.compile_failed.push(format!("{id}: {status}"));
            continue;
        }
        let path = base.join(path);
        let path = path.to_str().ok_or("a path that is not UTF-8")?;
        let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        let (progs, other) = xdp_programs(&lib, path, &bytes);
        tally.other += other;
        // CAST: a few dozen objects.
        let object = set.objects.len() as u32;
        for func in progs {
            let t = std::time::Instant::now();
            let (r, p) = run_program(&lib, (id, path, object), &bytes, &func, &mut diffs);
            report::program_line(&r, t.elapsed());
            tally.add(r);
            set.programs.push(p);
        }
        set.objects.push(bytes);
    }
    tally.print();
    if let Some(out) = &args.bundle {
        std::fs::write(out, set.encode()).map_err(|e| format!("{out}: {e}"))?;
        println!("bpf-diff: bundle for the bare-metal image written to {out}");
    }
    expect::check(&args.expect, &diffs, args.update)
}
