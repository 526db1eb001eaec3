//! The clang-built XDP objects of `os-linux/xdp` (prebuilt in `bpf/objects/`, embedded in the image
//! at build time), loaded by the `onic-bpf` engine and attached to port 1 as programs like any
//! other: on a fresh card, both functions are `onic_embed` ports ([`super::portbench`]), port 0
//! sends from its stack TX rings and each object runs in port 1's polls, so its verdicts drive
//! the port's XDP dispatch as the kernel module's do. For every object the engine's verdict
//! counts are printed and sent over defmt, and must agree with the core's `rx_xdp_*` counters
//! the port publishes; where the traffic makes the answer known (pass, drop, swap, the ICMP
//! responder, the flow counter, the RX-hash kfunc, the feature program's totals), the answer is
//! checked too.
//!
//! `xdp_redirect_map` is left out: it redirects every frame to the other port, and on the model's
//! cable that port's frames come straight back to port 1, so frames would circle (the host tests
//! run it with an open wire).

use alloc::boxed::Box;
use alloc::vec::Vec;

use onic_bpf::{EngineStats, LoadOptions, XdpEngine};
use onic_core::stats::PairStats;
use onic_sim::Card;

use super::datapath::PAIRS;
use super::frames::{self, Kind};
use super::portbench::{self, PortBench};
use super::verdicts::FRAMES;
use super::xdp::{BareHost, Code, Engine, Program, OBJECTS};
use super::Runner;

/// Loads every object, in order, until one fails (reported and left out with those after it).
fn load_all() -> Vec<Engine> {
    let opts = LoadOptions {
        cpus: 1,
        max_map_bytes: 4 << 20,
        budget: 100_000,
    };
    let mut engines = Vec::new();
    for (name, bytes) in OBJECTS {
        match onic_bpf::load(bytes, None, &opts) {
            Ok(l) => engines.push(XdpEngine::new(l, BareHost::new(), opts.budget)),
            Err(e) => {
                crate::println!("    {}: {}", name, e.message());
                defmt::error!("bpf {=str}: {=str}", name, e.message());
                break;
            }
        }
    }
    engines
}

/// Frames of the phase with `seed` whose flow is of kind `k`.
fn of_kind(seed: u32, k: Kind) -> u64 {
    (0..FRAMES).filter(|i| frames::flow(seed + i).kind == k).count() as u64
}

/// A little-endian u64 at `at` of a map value.
fn word(v: &[u8], at: usize) -> u64 {
    v.get(at..at + 8)
        .and_then(|s| s.try_into().ok())
        .map_or(u64::MAX, u64::from_le_bytes)
}

/// The value of key 0 of map `name` of `e` (its first CPU's copy).
fn value0(e: &Engine, name: &str) -> Vec<u8> {
    e.maps()
        .iter()
        .find(|m| m.def().name == name)
        .and_then(|m| m.host_get(&0u32.to_le_bytes()))
        .and_then(|v| v.first().map(|s| s.to_vec()))
        .unwrap_or_default()
}

/// What only object `name`'s own results can say, given its engine `eng`, the engine's counts
/// `e` for the phase and the frames that came back to port 0.
fn specific(name: &str, eng: &Engine, seed: u32, e: &EngineStats, returned: u32) -> bool {
    let n = u64::from(FRAMES);
    let [aborted, drop, pass, tx, _] = e.verdicts;
    match name {
        "xdp_pass" => pass == n,
        "xdp_drop" => drop == n,
        "xdp_swap" => tx == n && returned == FRAMES,
        // The self-test's ICMP frames are echo requests.
        "xdp_tx" => tx == of_kind(seed, Kind::Icmp) && pass + tx == n,
        "xdp_count" => {
            let total: u64 = eng.maps()[0].entries().iter().map(|(_, v)| word(v[0], 0)).sum();
            total == eng.stats().runs && pass == n
        }
        "xdp_hash" => {
            let calls = |k: u32| {
                let m = &eng.maps()[0];
                m.host_get(&k.to_le_bytes()).map_or(u64::MAX, |v| word(v[0], 0))
            };
            calls(0) == of_kind(seed, Kind::Udp) && calls(1) == 0 && pass == n
        }
        "xdp_features" => word(&value0(eng, "totals"), 0) == n && pass == n,
        _ => aborted == 0,
    }
}

/// The XDP counters of port 1, summed over its queue indices as the port publishes them.
fn port1_xdp(b: &PortBench<'_, '_>) -> PairStats {
    let mut s = PairStats::default();
    for q in 0..PAIRS as u16 {
        if let Some(c) = b.ports[1].port().queue_counters(q) {
            s += c.pair;
        }
    }
    s
}

/// The engine counts of program `id` (an object).
fn engine_stats(b: &PortBench<'_, '_>, id: u16) -> EngineStats {
    b.host
        .with_program(id, |p| p.engine().map(XdpEngine::stats))
        .flatten()
        .unwrap_or_default()
}

/// What `after` counted beyond `before`.
fn delta(before: &EngineStats, after: &EngineStats) -> EngineStats {
    EngineStats {
        runs: after.runs - before.runs,
        faults: after.faults - before.faults,
        insns: after.insns - before.insns,
        verdicts: core::array::from_fn(|k| after.verdicts[k] - before.verdicts[k]),
        invalid: after.invalid - before.invalid,
    }
}

/// Whether port 1's XDP counters moved between `p0` and `p1` as the engine's verdicts `e` say.
fn agrees(p0: &PairStats, p1: &PairStats, e: &EngineStats) -> bool {
    p1.rx_xdp_pass - p0.rx_xdp_pass == e.verdicts[2]
        && p1.rx_xdp_drop - p0.rx_xdp_drop == e.verdicts[0] + e.verdicts[1] + e.invalid
        && p1.rx_xdp_tx - p0.rx_xdp_tx == e.verdicts[3]
        && p1.rx_xdp_redirect + p1.rx_xdp_redirect_errors - p0.rx_xdp_redirect - p0.rx_xdp_redirect_errors
            == e.verdicts[4]
}

/// Prints an object's engine counts for the phase.
fn print(name: &str, e: &EngineStats) {
    defmt::info!(
        "bpf {=str}: runs {=u64} insns {=u64} aborted {=u64} drop {=u64} pass {=u64} tx {=u64} redirect {=u64} faults {=u64}",
        name, e.runs, e.insns, e.verdicts[0], e.verdicts[1], e.verdicts[2], e.verdicts[3], e.verdicts[4], e.faults
    );
    crate::println!(
        "    {}: runs {} insns {} aborted {} drop {} pass {} tx {} redirect {} faults {}",
        name,
        e.runs,
        e.insns,
        e.verdicts[0],
        e.verdicts[1],
        e.verdicts[2],
        e.verdicts[3],
        e.verdicts[4],
        e.faults
    );
}

/// Port 0 (passing what comes back) sends [`FRAMES`] small frames to port 1, where program `id`
/// (object `name`) runs; returns whether the phase settled and the object did all it should.
fn object_phase(b: &mut PortBench<'_, '_>, name: &str, id: u16, seed: u32) -> bool {
    let n = u64::from(FRAMES);
    // Swapped frames come back over the cable to port 0, which passes them.
    let returned = match name {
        "xdp_swap" => FRAMES,
        "xdp_tx" => of_kind(seed, Kind::Icmp) as u32,
        _ => 0,
    };
    let (p0, e0) = (port1_xdp(b), engine_stats(b, id));
    b.progs[1] = Some(id);
    b.shared.borrow_mut().tally.reset();
    let ok = portbench::spread(b, 0, FRAMES, returned, |i| {
        (seed + i, 60 + (i as usize * 53) % 440)
    });
    let (p1, e1) = (port1_xdp(b), engine_stats(b, id));
    let e = delta(&e0, &e1);
    print(name, &e);
    let back = b.shared.borrow().tally.returned_to[0];
    let own = b
        .host
        .with_program(id, |p| {
            p.engine().is_some_and(|eng| specific(name, eng, seed, &e, back))
        })
        .unwrap_or(false);
    ok && e.runs == n && e.faults == 0 && agrees(&p0, &p1, &e) && own
}

/// Runs the group on the ports of `b` (`None`: they did not come up), the last group on them:
/// it takes them down and checks that `card` is left with nothing.
pub fn run(r: &mut Runner, b: Option<PortBench<'_, '_>>, card: &Card) {
    r.group("XDP objects (os-linux/xdp built by clang, run by onic-bpf in the port's polls)");
    let Some(mut b) = b else {
        r.skipped("bpf-load", "the ports did not come up");
        r.skipped("bpf-verdicts", "the ports did not come up");
        return;
    };
    let engines = load_all();
    let loaded = engines.len();
    r.check(
        "bpf-load",
        loaded == OBJECTS.len(),
        format_args!(
            "{loaded} of {} embedded objects loaded (maps created, relocations applied, code validated)",
            OBJECTS.len()
        ),
    );
    let errors_before = b.poll_errors;
    let raised_before: u32 = b.raised.iter().flatten().sum();
    b.progs[0] = Some(b.attach(Code::Native(Program::Pass)));
    let mut all = true;
    for (i, ((name, _), eng)) in OBJECTS.iter().zip(engines).enumerate() {
        let id = b.attach(Code::Object(Box::new(eng)));
        all &= object_phase(&mut b, name, id, 7000 + 100 * i as u32);
    }
    let (errors, raised) = (
        b.poll_errors - errors_before,
        b.raised.iter().flatten().sum::<u32>() - raised_before,
    );
    let stopped = b.teardown();
    let (clean, d, v) = portbench::card_clean(card);
    r.check(
        "bpf-verdicts",
        loaded == OBJECTS.len() && all && errors == 0 && raised > 0 && stopped && clean,
        format_args!(
            "{loaded} objects on PF1, {FRAMES} frames each: every frame ran, no fault, the engine's verdicts equal the core's rx_xdp_* counts, and each object's own result holds ({raised} queue interrupts, {errors} queue errors); \
             after teardown {} pages, {} rings live, {v} model violations",
            d.live_pages, d.live_regions
        ),
    );
}
