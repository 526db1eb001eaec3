//! RSS hash throughput: the shell hash per IPv4 TCP/UDP frame and Toeplitz per IPv4 / IPv6
//! 4-tuple, table-driven beside the bit-serial reference, one at a time and in batches of 32.
//!
//! Inputs are 4096 pseudo-random frames or tuples visited in order, so nothing is hoisted out of
//! the loop; consecutive hashes are independent, so these are throughput figures, like the DPDK
//! peer's. Run: `cargo bench -p onic-core --bench rss`.

#![allow(missing_docs)]

use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use onic_core::rss::toeplitz::{ipv4_ports_input, ipv6_ports_input};
use onic_core::rss::{shell_hash_reference, toeplitz_reference, RssKey, RxHash, ShellHasher, Toeplitz};

const N: usize = 4096;
const MASK: usize = N - 1;
const BATCH: usize = 32;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn bytes<const L: usize>(&mut self) -> [u8; L] {
        let mut b = [0u8; L];
        for x in &mut b {
            *x = (self.next() >> 56) as u8;
        }
        b
    }
}

/// 64-byte untagged IPv4 frames (IHL 5) of protocol `proto` with random addresses and ports.
fn frames(proto: u8, rng: &mut Rng) -> Vec<[u8; 64]> {
    (0..N)
        .map(|_| {
            let mut f = [0u8; 64];
            f[..12].copy_from_slice(&rng.bytes::<12>());
            f[12] = 0x08;
            f[14] = 0x45;
            f[16] = 0;
            f[17] = 50;
            f[22] = 64;
            f[23] = proto;
            f[26..38].copy_from_slice(&rng.bytes::<12>());
            f
        })
        .collect()
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

fn bench_shell(c: &mut Criterion) {
    let key = RssKey::DEFAULT;
    let h = ShellHasher::new(&key);
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    for (name, proto) in [("ipv4_tcp", 6u8), ("ipv4_udp", 17)] {
        let fr = frames(proto, &mut rng);
        let ptrs: Vec<&[u8]> = fr.iter().map(|f| &f[..]).collect();
        let mut g = c.benchmark_group(format!("shell_hash/{name}"));
        g.throughput(Throughput::Elements(1));
        g.bench_function("table", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & MASK;
                h.hash_frame(black_box(&fr[i]))
            });
        });
        g.bench_function("reference", |b| {
            let mut i = 0;
            b.iter(|| {
                i = (i + 1) & MASK;
                shell_hash_reference(&key, black_box(&fr[i]))
            });
        });
        g.throughput(Throughput::Elements(BATCH as u64));
        g.bench_function(BenchmarkId::new("table", "batch32"), |b| {
            let mut i = 0;
            let mut out = [RxHash::default(); BATCH];
            b.iter(|| {
                i = (i + BATCH) & MASK;
                h.hash_frames(black_box(&ptrs[i..i + BATCH]), &mut out);
                black_box(&out);
            });
        });
        g.bench_function(BenchmarkId::new("reference", "batch32"), |b| {
            let mut i = 0;
            let mut out = [0u32; BATCH];
            b.iter(|| {
                i = (i + BATCH) & MASK;
                for (o, f) in out.iter_mut().zip(black_box(&ptrs[i..i + BATCH])) {
                    *o = shell_hash_reference(&key, f);
                }
                black_box(&out);
            });
        });
        g.finish();
    }
}

fn bench_toeplitz(c: &mut Criterion) {
    let key = RssKey::MICROSOFT;
    let t = Toeplitz::new(key.as_bytes()).expect("40-byte key");
    let mut rng = Rng(0x1234_5678_9ABC_DEF1);
    let v4: Vec<(Ipv4Addr, Ipv4Addr, u16, u16)> = (0..N)
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
    let v6: Vec<(Ipv6Addr, Ipv6Addr, u16, u16)> = (0..N)
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

    let mut g = c.benchmark_group("toeplitz/ipv4_l4");
    g.throughput(Throughput::Elements(1));
    g.bench_function("table", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & MASK;
            let (s, d, sp, dp) = black_box(v4[i]);
            t.hash_ipv4_ports(s, d, sp, dp)
        });
    });
    g.bench_function("reference", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & MASK;
            let (s, d, sp, dp) = black_box(v4[i]);
            toeplitz_reference(key.as_bytes(), &ipv4_ports_input(s, d, sp, dp))
        });
    });
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function(BenchmarkId::new("table", "batch32"), |b| {
        let mut i = 0;
        let mut out = [0u32; BATCH];
        b.iter(|| {
            i = (i + BATCH) & MASK;
            for (o, &(s, d, sp, dp)) in out.iter_mut().zip(black_box(&v4[i..i + BATCH])) {
                *o = t.hash_ipv4_ports(s, d, sp, dp);
            }
            black_box(&out);
        });
    });
    g.bench_function(BenchmarkId::new("reference", "batch32"), |b| {
        let mut i = 0;
        let mut out = [0u32; BATCH];
        b.iter(|| {
            i = (i + BATCH) & MASK;
            for (o, &(s, d, sp, dp)) in out.iter_mut().zip(black_box(&v4[i..i + BATCH])) {
                *o = toeplitz_reference(key.as_bytes(), &ipv4_ports_input(s, d, sp, dp));
            }
            black_box(&out);
        });
    });
    g.finish();

    let mut g = c.benchmark_group("toeplitz/ipv6_l4");
    g.throughput(Throughput::Elements(1));
    g.bench_function("table", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & MASK;
            let (s, d, sp, dp) = black_box(v6[i]);
            t.hash_ipv6_ports(s, d, sp, dp)
        });
    });
    g.bench_function("reference", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & MASK;
            let (s, d, sp, dp) = black_box(v6[i]);
            toeplitz_reference(key.as_bytes(), &ipv6_ports_input(s, d, sp, dp))
        });
    });
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function(BenchmarkId::new("table", "batch32"), |b| {
        let mut i = 0;
        let mut out = [0u32; BATCH];
        b.iter(|| {
            i = (i + BATCH) & MASK;
            for (o, &(s, d, sp, dp)) in out.iter_mut().zip(black_box(&v6[i..i + BATCH])) {
                *o = t.hash_ipv6_ports(s, d, sp, dp);
            }
            black_box(&out);
        });
    });
    g.bench_function(BenchmarkId::new("reference", "batch32"), |b| {
        let mut i = 0;
        let mut out = [0u32; BATCH];
        b.iter(|| {
            i = (i + BATCH) & MASK;
            for (o, &(s, d, sp, dp)) in out.iter_mut().zip(black_box(&v6[i..i + BATCH])) {
                *o = toeplitz_reference(key.as_bytes(), &ipv6_ports_input(s, d, sp, dp));
            }
            black_box(&out);
        });
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_shell, bench_toeplitz
}
criterion_main!(benches);
