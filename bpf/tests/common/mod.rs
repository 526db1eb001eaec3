//! What the engine's tests share: the prebuilt objects, frames, and one run of a program over a
//! frame in a page laid out as the driver lays it out.

#![allow(dead_code)]

pub mod elf_build;

use std::path::PathBuf;

use onic_bpf::{LoadOptions, SimHost, XdpEngine};
use onic_core::rss::ShellHasher;
use onic_core::xdp::{XdpBuff, XdpRxHash, XdpRxq};

/// `bpf/objects/<name>`.
pub fn object_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("objects")
        .join(name)
}

/// The bytes of a prebuilt object.
pub fn object(name: &str) -> Vec<u8> {
    std::fs::read(object_path(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// An engine for program `sec` of object `name`, with a [`SimHost`] of 4 CPUs where
/// interface 2 (port 1) is redirect target 0 and AF_XDP sockets are target 1.
pub fn engine(name: &str, sec: Option<&str>) -> XdpEngine<SimHost> {
    engine_checked(name, sec, true)
}

/// [`engine`], with the static check of what the kernel's verifier refuses on or off (off: the
/// programs that fault at run time on purpose, which the kernel refuses).
pub fn engine_checked(name: &str, sec: Option<&str>, checks: bool) -> XdpEngine<SimHost> {
    let opts = LoadOptions::default();
    let loaded = onic_bpf::Loader::new(opts)
        .kernel_checks(checks)
        .load(&object(name), sec)
        .unwrap_or_else(|e| panic!("{name}: {e}"));
    let mut host = SimHost::new(opts.cpus, 1);
    host.redirects.push((None, 2, 0));
    host.xsk_target = Some(1);
    XdpEngine::new(loaded, host, opts.budget)
}

/// The result of one run.
#[derive(Debug)]
pub struct Out {
    pub verdict: u32,
    pub frame: Vec<u8>,
    pub meta: Vec<u8>,
    pub target: Option<u32>,
}

/// Runs `e` on `frame` received on queue `q` of port `port`, with the shell's RX hash.
pub fn run_on(e: &mut XdpEngine<SimHost>, frame: &[u8], q: u16, port: u8) -> Out {
    let mut page = vec![0u8; 4096];
    page[256..256 + frame.len()].copy_from_slice(frame);
    let rxq = XdpRxq { queue_index: q, port };
    let hash = XdpRxHash::compute(&ShellHasher::default(), frame);
    let mut b = XdpBuff::new(&mut page, 256, frame.len(), rxq)
        .unwrap()
        .with_rx_hash(hash);
    let verdict = e.run(&mut b);
    Out {
        verdict,
        frame: b.data().to_vec(),
        meta: b.meta().to_vec(),
        target: b.redirect_target(),
    }
}

/// Runs on queue 0 of port 0.
pub fn run(e: &mut XdpEngine<SimHost>, frame: &[u8]) -> Out {
    run_on(e, frame, 0, 0)
}

/// An Ethernet + IPv4 frame of `len` bytes with protocol `proto` and the given ports.
pub fn ipv4(src: [u8; 4], dst: [u8; 4], proto: u8, sport: u16, dport: u16, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len.max(42)];
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    let l = (f.len() - 14) as u16;
    f[16..18].copy_from_slice(&l.to_be_bytes());
    f[22] = 64;
    f[23] = proto;
    f[26..30].copy_from_slice(&src);
    f[30..34].copy_from_slice(&dst);
    f[34..36].copy_from_slice(&sport.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f
}

/// An ARP request of 60 bytes.
pub fn arp() -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[..6].fill(0xff);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 3]);
    f[12..14].copy_from_slice(&[0x08, 0x06]);
    f[14..22].copy_from_slice(&[0, 1, 8, 0, 6, 4, 0, 1]);
    f
}
