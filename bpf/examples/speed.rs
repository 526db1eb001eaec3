//! Interpreter speed on one frame, without the driver: `cargo run --release -p onic-bpf --example
//! speed -- bpf/objects/xdp_count.o [section]` prints ns per run and per instruction.

use std::time::Instant;

use onic_bpf::{LoadOptions, SimHost, XdpEngine};
use onic_core::xdp::{XdpBuff, XdpRxq};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.first() else {
        eprintln!("usage: speed OBJECT [SECTION]");
        std::process::exit(2);
    };
    let bytes = std::fs::read(path).expect("object");
    let opts = LoadOptions::default();
    let loaded = onic_bpf::load(&bytes, args.get(1).map(String::as_str), &opts).expect("load");
    let mut e = XdpEngine::new(loaded, SimHost::new(opts.cpus, 1), opts.budget);
    let mut page = vec![0u8; 4096];
    let frame: [u8; 60] = {
        let mut f = [0u8; 60];
        f[12] = 0x08;
        f[14] = 0x45;
        f[23] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f
    };
    let runs = 200_000u32;
    let start = Instant::now();
    for i in 0..runs {
        page[256..316].copy_from_slice(&frame);
        page[290] = i as u8;
        let mut b = XdpBuff::new(&mut page, 256, 60, XdpRxq::default()).expect("buff");
        std::hint::black_box(e.run(&mut b));
    }
    let ns = start.elapsed().as_nanos() as f64 / f64::from(runs);
    let s = e.stats();
    let per_run = s.insns as f64 / s.runs as f64;
    println!(
        "{path}: {ns:.1} ns per run, {per_run:.1} instructions per run, {:.2} ns per instruction, {} faults",
        ns / per_run,
        s.faults
    );
}
