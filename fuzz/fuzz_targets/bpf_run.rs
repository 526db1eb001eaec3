//! Arbitrary instruction streams over arbitrary frames: whatever validation lets through runs
//! with a small budget; nothing may panic, and the page outside the buffer's layout stays as it
//! was. Input: one byte of frame length, the frame, then the instructions (8 bytes each); a second
//! mode (first byte odd) feeds the whole input to the ELF loader instead.
//!
//! `cargo +nightly fuzz run bpf_run` (from `fuzz/`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use onic_bpf::insn::Insn;
use onic_bpf::{LoadOptions, Map, MapDef, MapType, Program, SimHost, XdpEngine};
use onic_core::xdp::{XdpBuff, XdpRxq};

fn maps() -> Vec<Map> {
    let def = |t, k, v| MapDef {
        name: "m".into(),
        map_type: t,
        key_size: k,
        value_size: v,
        max_entries: 8,
        flags: 0,
        read_only: false,
    };
    [def(MapType::Array, 4, 16), def(MapType::Hash, 8, 8), def(MapType::DevMap, 4, 4)]
        .into_iter()
        .filter_map(|d| Map::new(d, 2).ok())
        .collect()
}

fn run_stream(data: &[u8]) {
    let Some((&len, rest)) = data.split_first() else { return };
    let len = usize::from(len).min(rest.len());
    let (frame, code) = rest.split_at(len);
    let mut insns = Insn::decode_all(code);
    insns.push(Insn { op: 0x95, ..Insn::default() });
    let p = Program::from_insns("fuzz", insns);
    if onic_bpf::validate::validate(&p).is_err() {
        return;
    }
    let mut e = XdpEngine::with_program(p, maps(), SimHost::new(2, 7), 4096);
    let mut page = vec![0xa5u8; 4096];
    page[256..256 + frame.len()].copy_from_slice(frame);
    let rxq = XdpRxq { queue_index: 1, port: 0 };
    if let Ok(mut b) = XdpBuff::new(&mut page, 256, frame.len(), rxq) {
        e.run(&mut b);
    }
    assert!(page[..40].iter().all(|&b| b == 0xa5));
    assert!(page[4096 - 320..].iter().all(|&b| b == 0xa5));
}

fn run_object(data: &[u8]) {
    let opts = LoadOptions { budget: 4096, max_map_bytes: 1 << 20, ..LoadOptions::default() };
    if let Ok(l) = onic_bpf::load(data, None, &opts) {
        let mut e = XdpEngine::new(l, SimHost::new(opts.cpus, 1), opts.budget);
        let mut page = vec![0u8; 4096];
        if let Ok(mut b) = XdpBuff::new(&mut page, 256, 64, XdpRxq::default()) {
            e.run(&mut b);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    match data.split_first() {
        Some((m, rest)) if m & 1 == 1 => run_object(rest),
        Some((_, rest)) => run_stream(rest),
        None => {}
    }
});
