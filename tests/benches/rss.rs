//! RSS hash throughput: the shell hash per IPv4 TCP/UDP frame and Toeplitz per IPv4 / IPv6
//! 4-tuple, table-driven beside the bit-serial reference, one at a time and in batches of 32, and
//! the shell hash by `onic-accel`'s carry-less multiplication where the CPU has it.
//!
//! Inputs are the 4096 pseudo-random frames or tuples of `onic_testkit::rss_inputs` (the same as
//! `onic bench rss`), visited in order, so nothing is hoisted out of the loop; consecutive hashes
//! are independent, so these are throughput figures, like the DPDK peer's.
//! Run: `cargo bench -p onic-tests --bench rss`.

#![allow(missing_docs)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use onic_accel::{AccelHasher, Backend};
use onic_core::rss::toeplitz::{ipv4_ports_input, ipv6_ports_input};
use onic_core::rss::{shell_hash_reference, toeplitz_reference, RssKey, RxHash, ShellHasher, Toeplitz};
use onic_testkit::rss_inputs::{frames, tuples, Rng, INPUTS};

const MASK: usize = INPUTS - 1;
const BATCH: usize = 32;

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

/// One group of four figures: the table-driven hash and the reference of input `i`, one at a
/// time, and batches of 32 inputs starting at `i` (each batch closure keeps its results alive).
fn group(
    c: &mut Criterion,
    name: &str,
    table: impl Fn(usize) -> u32,
    reference: impl Fn(usize) -> u32,
    table_batch: impl Fn(usize),
    reference_batch: impl Fn(usize),
) {
    let mut g = c.benchmark_group(name);
    g.throughput(Throughput::Elements(1));
    g.bench_function("table", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & MASK;
            table(black_box(i))
        });
    });
    g.bench_function("reference", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) & MASK;
            reference(black_box(i))
        });
    });
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function(BenchmarkId::new("table", "batch32"), |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + BATCH) & MASK;
            table_batch(black_box(i));
        });
    });
    g.bench_function(BenchmarkId::new("reference", "batch32"), |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + BATCH) & MASK;
            reference_batch(black_box(i));
        });
    });
    g.finish();
}

/// Batch of 32 through a per-input hash.
fn each(i: usize, hash: impl Fn(usize) -> u32) {
    let mut out = [0u32; BATCH];
    for (k, o) in out.iter_mut().enumerate() {
        *o = hash(i + k);
    }
    black_box(&out);
}

fn bench_shell(c: &mut Criterion) {
    let key = RssKey::DEFAULT;
    let h = ShellHasher::new(&key);
    let mut rng = Rng(Rng::SEED);
    for (name, proto) in [("ipv4_tcp", 6u8), ("ipv4_udp", 17)] {
        let fr = frames(proto, &mut rng);
        let ptrs: Vec<&[u8]> = fr.iter().map(|f| &f[..]).collect();
        let table = |i: usize| h.hash_frame(&fr[i]).value;
        let reference = |i: usize| shell_hash_reference(&key, &fr[i]);
        group(
            c,
            &format!("shell_hash/{name}"),
            table,
            reference,
            |i| {
                // The batch API: one call for 32 frames.
                let mut out = [RxHash::default(); BATCH];
                h.hash_frames(&ptrs[i..i + BATCH], &mut out);
                black_box(&out);
            },
            |i| each(i, reference),
        );
        // onic-accel's carry-less multiplication, where this CPU has it.
        if let Some(clmul) = AccelHasher::with_backend(&key, Backend::Clmul) {
            let mut g = c.benchmark_group(format!("shell_hash/{name}"));
            g.throughput(Throughput::Elements(1));
            g.bench_function("accel_clmul", |b| {
                let mut i = 0;
                b.iter(|| {
                    i = (i + 1) & MASK;
                    clmul.hash_frame(&fr[black_box(i)]).value
                });
            });
            g.finish();
        }
    }
}

fn bench_toeplitz(c: &mut Criterion) {
    let key = RssKey::MICROSOFT;
    let t = Toeplitz::new(key.as_bytes()).expect("40-byte key");
    let (v4, v6) = tuples(&mut Rng(Rng::SEED));
    let v4_table = |i: usize| {
        let (s, d, sp, dp) = v4[i];
        t.hash_ipv4_ports(s, d, sp, dp)
    };
    let v4_reference = |i: usize| {
        let (s, d, sp, dp) = v4[i];
        toeplitz_reference(key.as_bytes(), &ipv4_ports_input(s, d, sp, dp))
    };
    group(
        c,
        "toeplitz/ipv4_l4",
        v4_table,
        v4_reference,
        |i| each(i, v4_table),
        |i| each(i, v4_reference),
    );
    let v6_table = |i: usize| {
        let (s, d, sp, dp) = v6[i];
        t.hash_ipv6_ports(s, d, sp, dp)
    };
    let v6_reference = |i: usize| {
        let (s, d, sp, dp) = v6[i];
        toeplitz_reference(key.as_bytes(), &ipv6_ports_input(s, d, sp, dp))
    };
    group(
        c,
        "toeplitz/ipv6_l4",
        v6_table,
        v6_reference,
        |i| each(i, v6_table),
        |i| each(i, v6_reference),
    );
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_shell, bench_toeplitz
}
criterion_main!(benches);
