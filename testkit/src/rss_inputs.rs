//! Inputs of the RSS hash benchmarks (`onic bench rss` and the criterion bench
//! `cargo bench -p onic-tests --bench rss`): pseudo-random 64-byte IPv4 frames and IPv4/IPv6
//! 4-tuples, [`INPUTS`] of each, the same for every run (fixed seed).

use std::net::{Ipv4Addr, Ipv6Addr};

/// Inputs per set (a power of two: benchmarks index with `i & (INPUTS - 1)`).
pub const INPUTS: usize = 4096;

/// An IPv4 4-tuple: source, destination, source port, destination port.
pub type V4 = (Ipv4Addr, Ipv4Addr, u16, u16);
/// An IPv6 4-tuple.
pub type V6 = (Ipv6Addr, Ipv6Addr, u16, u16);

/// xorshift64*: fast, reproducible, good enough to make every input different.
#[derive(Clone, Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The seed both benchmarks start from.
    pub const SEED: u64 = 0x9E37_79B9_7F4A_7C15;

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// `L` random bytes.
    pub fn bytes<const L: usize>(&mut self) -> [u8; L] {
        let mut b = [0u8; L];
        for x in &mut b {
            *x = (self.next_u64() >> 56) as u8;
        }
        b
    }
}

/// [`INPUTS`] 64-byte untagged IPv4 frames (IHL 5, not fragmented) of protocol `proto`, with
/// random MACs, addresses and ports.
pub fn frames(proto: u8, rng: &mut Rng) -> Vec<[u8; 64]> {
    (0..INPUTS)
        .map(|_| {
            let mut f = [0u8; 64];
            f[..12].copy_from_slice(&rng.bytes::<12>());
            f[12] = 0x08;
            f[14] = 0x45;
            f[17] = 50;
            f[22] = 64;
            f[23] = proto;
            f[26..38].copy_from_slice(&rng.bytes::<12>());
            f
        })
        .collect()
}

/// [`INPUTS`] random IPv4 and [`INPUTS`] random IPv6 4-tuples.
pub fn tuples(rng: &mut Rng) -> (Vec<V4>, Vec<V6>) {
    let v4 = (0..INPUTS)
        .map(|_| {
            let b = rng.bytes::<12>();
            (
                Ipv4Addr::new(b[0], b[1], b[2], b[3]),
                Ipv4Addr::new(b[4], b[5], b[6], b[7]),
                u16::from_be_bytes([b[8], b[9]]),
                u16::from_be_bytes([b[10], b[11]]),
            )
        })
        .collect();
    let v6 = (0..INPUTS)
        .map(|_| {
            let p = rng.bytes::<4>();
            (
                Ipv6Addr::from(rng.bytes::<16>()),
                Ipv6Addr::from(rng.bytes::<16>()),
                u16::from_be_bytes([p[0], p[1]]),
                u16::from_be_bytes([p[2], p[3]]),
            )
        })
        .collect();
    (v4, v6)
}
