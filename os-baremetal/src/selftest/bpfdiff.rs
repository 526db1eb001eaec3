//! The BPF differential set on bare metal (feature `bpf-bundle`): `cargo xtask bpf-diff` runs
//! every XDP program of the set against the host kernel's `BPF_PROG_TEST_RUN`, writes the set
//! with the kernel's outcome of every frame ([`onic_bpf::bundle`]) and builds the image with it
//! embedded (`ONIC_BPF_BUNDLE`, the file's path at build time). Here every program the image can
//! run is loaded by the `onic-bpf` engine from its object as it stands, and runs on every frame
//! the kernel ran, each from the maps as loaded, laid out as the kernel's test run lays it out
//! ([`onic_bpf::bundle::test_run`]), after what the host harness does to the maps after the load
//! (tail call tables, inner maps: the program's [`onic_bpf::bundle::Setup`], done by
//! [`onic_bpf::bundle::set_up`] as on the host).
//!
//! A frame agrees when its verdict, metadata, bytes and ring buffer records are the kernel's,
//! or, where the engine on the host differs from the kernel (a difference the differential run
//! lists with its reason in `bpf/examples/kernel_diff/expected.txt`), the host engine's. Each program is reported as
//! agreeing, differing (with the first frame that does) or skipped with the reason (what it
//! needs that the image lacks: the kernel's BTF, more map memory than the image's heap leaves; a
//! side that does not load it at all; no frame the kernel's test run accepted). One check fails
//! on any difference.

use alloc::string::String;

use onic_bpf::bundle::{self, Bundle, BundleProgram, Outcome};
use onic_bpf::{LoadErrorKind, LoadOptions, Loader, SimHost, XdpEngine};

use super::Runner;

/// The bundle, embedded at build time.
static BUNDLE: &[u8] = include_bytes!(env!("ONIC_BPF_BUNDLE"));

/// How one program went.
enum Verdict {
    /// Every frame agreed: how many, on how many the kernel's own outcome was expected, and
    /// how many ring buffer records were compared.
    Agree {
        frames: usize,
        as_kernel: usize,
        records: usize,
    },
    /// A frame did not: which, and what was expected and seen.
    Differ(String),
    /// Not run here, and why.
    Skipped(String),
}

/// Runs the group.
pub fn run(r: &mut Runner) {
    r.group("the BPF differential set (cargo xtask bpf-diff) through the onic-bpf engine on bare metal");
    let set = match Bundle::decode(BUNDLE) {
        Ok(b) => b,
        Err(e) => {
            r.check("bpf-diff-bundle", false, format_args!("the embedded bundle: {e}"));
            return;
        }
    };
    r.check(
        "bpf-diff-bundle",
        !set.programs.is_empty(),
        format_args!(
            "{} programs of {} objects, {} frames",
            set.programs.len(),
            set.objects.len(),
            set.frames.len()
        ),
    );
    let (mut agree, mut differ, mut skipped, mut frames, mut records) = (0, 0, 0, 0, 0);
    for p in &set.programs {
        match program(&set, p) {
            Verdict::Agree {
                frames: n,
                as_kernel,
                records: k,
            } => {
                agree += 1;
                frames += n;
                records += k;
                crate::println!(
                    "    agree   {}: {} frames ({} as the kernel), {} ring buffer records",
                    p.id,
                    n,
                    as_kernel,
                    k
                );
            }
            Verdict::Differ(what) => {
                differ += 1;
                crate::println!("    DIFFER  {}: {}", p.id, what);
                defmt::error!("bpf-diff {=str} differs: {=str}", p.id.as_str(), what.as_str());
            }
            Verdict::Skipped(why) => {
                skipped += 1;
                crate::println!("    skipped {}: {}", p.id, why);
            }
        }
    }
    r.check(
        "bpf-diff-bare",
        differ == 0 && agree > 0,
        format_args!(
            "{agree} programs agree on all {frames} frames they ran ({records} ring buffer records), {differ} differ, {skipped} skipped"
        ),
    );
}

/// The map memory a program may take here: a third of what the heap has left, as each frame
/// runs on a copy of the loaded maps.
fn map_budget() -> usize {
    crate::heap::HEAP_BYTES.saturating_sub(crate::heap::stats().in_use) / 3
}

/// Loads and runs one program on every frame the kernel ran.
fn program(set: &Bundle, p: &BundleProgram) -> Verdict {
    if let Some(why) = &p.skip {
        return Verdict::Skipped(why.clone());
    }
    if p.frames.iter().all(Option::is_none) {
        return Verdict::Skipped(String::from(
            "the kernel's test run refused every frame (nothing to compare)",
        ));
    }
    let Some(object) = set.objects.get(p.object as usize) else {
        return Verdict::Differ(String::from("its object is not in the bundle"));
    };
    let opts = LoadOptions {
        max_map_bytes: LoadOptions::default().max_map_bytes.min(map_budget()),
        ..LoadOptions::default()
    };
    let loader = Loader::new(opts)
        .unsized_max_entries(p.entries)
        .prog_type_xdp(true);
    let mut loaded = match loader.load(object, Some(&p.func)) {
        Ok(l) => l,
        Err(e) => {
            return match e.kind() {
                LoadErrorKind::MapMemory { limit } => Verdict::Skipped(alloc::format!(
                    "needs more map memory than the {} KiB the image's heap leaves ({e})",
                    limit / 1024
                )),
                _ => Verdict::Differ(alloc::format!("the engine refuses it here: {e}")),
            }
        }
    };
    if let Err(e) = bundle::set_up(&loader, object, &mut loaded, &p.setup) {
        return Verdict::Differ(alloc::format!("the harness's setup fails here: {e}"));
    }
    let (mut as_kernel, mut ran, mut records) = (0, 0, 0);
    for ((name, frame), x) in set.frames.iter().zip(&p.frames) {
        let Some(x) = x else { continue };
        let mut e = XdpEngine::new(loaded.clone(), SimHost::new(opts.cpus, 1), opts.budget);
        let got = bundle::test_run(&mut e, frame);
        let want = x.engine.as_ref().unwrap_or(&x.kernel);
        if got != *want {
            return Verdict::Differ(alloc::format!(
                "frame {name}: expected {}, got {}",
                describe(want),
                describe(&got)
            ));
        }
        let seen = bundle::ring_records(&e);
        let want = x.engine_records.as_ref().unwrap_or(&x.records);
        if seen != *want {
            return Verdict::Differ(alloc::format!(
                "frame {name}: expected {} ring buffer records, got {} (the first {} the same)",
                want.len(),
                seen.len(),
                seen.iter().zip(want).take_while(|(a, b)| a == b).count()
            ));
        }
        ran += 1;
        records += seen.len();
        as_kernel += usize::from(x.engine.is_none() && x.engine_records.is_none());
    }
    Verdict::Agree {
        frames: ran,
        as_kernel,
        records,
    }
}

/// An outcome in a few words.
fn describe(o: &Outcome) -> String {
    match o {
        Outcome::Ran { verdict, meta, frame } => {
            alloc::format!(
                "verdict {verdict}, {} B of metadata, {} B of frame",
                meta.len(),
                frame.len()
            )
        }
        Outcome::Refused(why) => alloc::format!("refused ({why})"),
    }
}
