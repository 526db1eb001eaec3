//! The clang-built XDP objects of `os-linux/xdp` (prebuilt in `bpf/objects/`, embedded in the image
//! at build time), loaded by the `onic-bpf` engine and attached to PF1 as programs like any other:
//! each runs through the core's `QueuePair::poll`, so its verdicts drive the same dispatch as the native
//! programs of [`super::verdicts`]. For every object the engine's verdict counts are printed and
//! sent over defmt, and must agree with the core's `rx_xdp_*` counters; where the traffic makes
//! the answer known (pass, drop, swap, the ICMP responder, the flow counter, the RX-hash kfunc,
//! the feature program's totals), the answer is checked too.
//!
//! `xdp_redirect_map` is left out: it redirects every frame to the other port, and on the model's
//! cable that port's frames come straight back to PF1, so frames would circle (the host tests run
//! it with an open wire).

use alloc::vec::Vec;

use onic_bpf::{EngineStats, LoadOptions, XdpEngine};

use super::datapath;
use super::frames::{self, Kind};
use super::verdicts::{phase, sums, FRAMES};
use super::xdp::{BareHost, Program, OBJECTS};
use super::{Bench, Runner};

/// Loads every object; returns how many loaded (the others are reported and left out).
fn load_all(b: &mut Bench<'_, '_>) -> usize {
    let opts = LoadOptions {
        cpus: 1,
        max_map_bytes: 4 << 20,
        budget: 100_000,
    };
    b.dp.engines.clear();
    for (name, bytes) in OBJECTS {
        match onic_bpf::load(bytes, None, &opts) {
            Ok(l) => b.dp.engines.push(XdpEngine::new(l, BareHost::new(), opts.budget)),
            Err(e) => {
                crate::println!("    {}: {}", name, e.message());
                defmt::error!("bpf {=str}: {=str}", name, e.message());
                return b.dp.engines.len();
            }
        }
    }
    b.dp.engines.len()
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

/// The value of key 0 of map `name` of engine `i` (its first CPU's copy).
fn value0(b: &Bench<'_, '_>, i: usize, name: &str) -> Vec<u8> {
    b.dp.engines[i]
        .maps()
        .iter()
        .find(|m| m.def().name == name)
        .and_then(|m| m.host_get(&0u32.to_le_bytes()))
        .and_then(|v| v.first().map(|s| s.to_vec()))
        .unwrap_or_default()
}

/// What only the object's own results can say, given the engine's counts `e` for the phase.
fn specific(b: &Bench<'_, '_>, i: usize, seed: u32, e: &EngineStats) -> bool {
    let n = u64::from(FRAMES);
    let [aborted, drop, pass, tx, _] = e.verdicts;
    match OBJECTS[i].0 {
        "xdp_pass" => pass == n,
        "xdp_drop" => drop == n,
        "xdp_swap" => tx == n && b.dp.tally.returned_to[0] == FRAMES,
        // The self-test's ICMP frames are echo requests.
        "xdp_tx" => tx == of_kind(seed, Kind::Icmp) && pass + tx == n,
        "xdp_count" => {
            let total: u64 = b.dp.engines[i].maps()[0]
                .entries()
                .iter()
                .map(|(_, v)| word(v[0], 0))
                .sum();
            total == b.dp.engines[i].stats().runs && pass == n
        }
        "xdp_hash" => {
            let calls = |k: u32| {
                let m = &b.dp.engines[i].maps()[0];
                m.host_get(&k.to_le_bytes()).map_or(u64::MAX, |v| word(v[0], 0))
            };
            calls(0) == of_kind(seed, Kind::Udp) && calls(1) == 0 && pass == n
        }
        "xdp_features" => word(&value0(b, i, "totals"), 0) == n && pass == n,
        _ => aborted == 0,
    }
}

pub fn run(r: &mut Runner, b: &mut Bench<'_, '_>) {
    r.group("XDP objects (os-linux/xdp built by clang, run by onic-bpf through QueuePair::poll)");
    if !datapath::ready(r, b, "bpf") {
        return;
    }
    let loaded = load_all(b);
    r.check(
        "bpf-load",
        loaded == OBJECTS.len(),
        format_args!(
            "{loaded} of {} embedded objects loaded (maps created, relocations applied, code validated)",
            OBJECTS.len()
        ),
    );
    let n = u64::from(FRAMES);
    let mut all = true;
    for (i, &(name, _)) in OBJECTS.iter().enumerate().take(loaded) {
        // Swapped frames come back over the cable to PF0, which passes them.
        let seed = 7000 + 100 * i as u32;
        let returned = match name {
            "xdp_swap" => FRAMES,
            "xdp_tx" => of_kind(seed, Kind::Icmp) as u32,
            _ => 0,
        };
        let (before, e0) = (sums(b, 1), b.dp.engines[i].stats());
        // CAST: i < OBJECTS.len() < 256.
        let ok = phase(b, [Program::Pass, Program::Object(i as u8)], seed, returned);
        let (after, e1) = (sums(b, 1), b.dp.engines[i].stats());
        let d = |k: usize| e1.verdicts[k] - e0.verdicts[k];
        let e = EngineStats {
            runs: e1.runs - e0.runs,
            faults: e1.faults - e0.faults,
            insns: e1.insns - e0.insns,
            verdicts: core::array::from_fn(d),
            invalid: e1.invalid - e0.invalid,
        };
        let (p0, p1) = (before.pair, after.pair);
        let agree = p1.rx_xdp_pass - p0.rx_xdp_pass == e.verdicts[2]
            && p1.rx_xdp_drop - p0.rx_xdp_drop == e.verdicts[0] + e.verdicts[1] + e.invalid
            && p1.rx_xdp_tx - p0.rx_xdp_tx == e.verdicts[3]
            && p1.rx_xdp_redirect + p1.rx_xdp_redirect_errors
                - p0.rx_xdp_redirect
                - p0.rx_xdp_redirect_errors
                == e.verdicts[4];
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
        all &= ok && e.runs == n && e.faults == 0 && agree && specific(b, i, seed, &e);
    }
    r.check(
        "bpf-verdicts",
        loaded == OBJECTS.len() && all,
        format_args!(
            "{loaded} objects on PF1, {n} frames each: every frame ran, no fault, the engine's verdicts equal the core's rx_xdp_* counts, and each object's own result holds"
        ),
    );
    b.dp.set_programs([Program::Drop, Program::Pass]);
    b.dp.engines.clear();
}
