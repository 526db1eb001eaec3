//! `onic bench rss`: nanoseconds per RSS hash, table-driven beside the bit-serial reference, and
//! the shell hash through `onic-accel` on every backend the CPU runs (GFNI bit-matrix products,
//! carry-less multiplication, table), a frame at a time and 32 at a time, and of 13 input bytes
//! already extracted (`rss_shell_input_*`), one and 32 at a time.
//!
//! Method (the same as the DPDK peer's `peer_bench.h`, so figures compare side by side):
//! 1. calibrate: double the iteration count until one run takes at least 20 ms;
//! 2. scale the count so that one repetition takes about 200 ms;
//! 3. run 5 repetitions and keep the fastest (least disturbed by other work on the machine).
//!
//! On a busy shared machine, many short repetitions find the undisturbed speed more reliably:
//! `ONIC_BENCH_REP_MS` (default 200) and `ONIC_BENCH_REPS` (default 5) change steps 2 and 3, like
//! the peer's `PEER_REP_MS` and `PEER_REPS`.
//!
//! Inputs are 4096 pseudo-random frames or tuples visited in order, input addresses passed through
//! `black_box`. Results are folded with a wrapping add into a value the optimiser cannot drop: an
//! XOR fold would let the compiler chain every table lookup of every hash into one accumulator
//! (XOR is associative), a loop-carried dependency that no RX path has. Consecutive hashes are
//! independent, so these are throughput figures (as DPDK's are), not latencies.

use std::hint::black_box;
use std::time::{Duration, Instant};

use onic_accel::{AccelHasher, Backend};
use onic_core::rss::shell_hash::TUPLE_LEN;
use onic_core::rss::toeplitz::{ipv4_ports_input, ipv6_ports_input};
use onic_core::rss::{shell_hash_reference, toeplitz_reference, RssKey, RxHash, ShellHasher, Toeplitz};
use onic_testkit::rss_inputs::{frames, tuples, Rng, INPUTS};

const MASK: usize = INPUTS - 1;
const BATCH: usize = 32;
const REP_MS: f64 = 200.0;
const REPS: usize = 5;
const UNIT: &str = "ns/hash";

/// Fastest nanoseconds per operation of `kernel(iters)`, which performs `iters * ops_per_iter`
/// operations and returns something derived from all of them.
fn measure(ops_per_iter: usize, mut kernel: impl FnMut(u64) -> u64) -> f64 {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse::<f64>().ok());
    let rep = Duration::from_secs_f64(env("ONIC_BENCH_REP_MS").unwrap_or(REP_MS).max(0.1) / 1e3);
    let reps = env("ONIC_BENCH_REPS").map_or(REPS, |r| r.max(1.0) as usize);
    let mut iters = 16u64;
    let mut elapsed;
    loop {
        let t = Instant::now();
        black_box(kernel(iters));
        elapsed = t.elapsed();
        if elapsed >= Duration::from_millis(20) || iters >= 1 << 40 {
            break;
        }
        iters *= 2;
    }
    let scaled = (iters as f64 * rep.as_secs_f64() / elapsed.as_secs_f64().max(1e-9)) as u64;
    let iters = scaled.max(1);
    let mut best = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        black_box(kernel(iters));
        let ns = t.elapsed().as_nanos() as f64 / (iters as f64 * ops_per_iter as f64);
        best = best.min(ns);
    }
    best
}

/// A hash and its type as one number, so that the type has to be computed too (the RX path uses
/// both).
fn fold(rx: RxHash) -> u32 {
    rx.value.wrapping_add(rx.kind as u32)
}

/// `iters` values of `one(i)` folded with a wrapping add into a result the optimiser has to
/// compute (see the module docs).
fn sum_of(iters: u64, mut one: impl FnMut(usize) -> u32) -> u64 {
    let mut acc = 0u32;
    for i in 0..iters as usize {
        acc = acc.wrapping_add(one(i));
    }
    u64::from(acc)
}

/// Figures as `(name, value, unit)`.
type Figures = Vec<(String, f64, &'static str)>;

/// Runs every RSS figure; returns `(name, value, unit)` in a fixed order.
pub fn run() -> Figures {
    let mut out = Vec::new();
    let mut rng = Rng(Rng::SEED);
    shell_figures(&mut out, &mut rng);
    toeplitz_figures(&mut out, &mut rng);
    out
}

/// The shell's hash with the default (RTL reset) key: per frame, a batch of 32 at a time, the
/// bit-serial reference, and `onic-accel` on every backend this CPU runs (the one it chooses by
/// itself is named in a comment line).
fn shell_figures(out: &mut Figures, rng: &mut Rng) {
    let key = RssKey::DEFAULT;
    let h = ShellHasher::new(&key);
    outln!(
        "# onic-accel chooses the {} backend on this CPU",
        AccelHasher::new(&key).backend().name()
    );
    let backends: Vec<(&str, AccelHasher)> = Backend::ALL
        .into_iter()
        .filter_map(|b| Some((b.name(), AccelHasher::with_backend(&key, b)?)))
        .collect();
    for (name, proto) in [("ipv4_tcp", 6u8), ("ipv4_udp", 17)] {
        let fr = frames(proto, rng);
        let ptrs: Vec<&[u8]> = fr.iter().map(|f| &f[..]).collect();
        let table = measure(1, |iters| {
            let fr = black_box(&fr);
            sum_of(iters, |i| fold(h.hash_frame(&fr[i & MASK])))
        });
        let batch = measure(BATCH, |iters| {
            let ptrs = black_box(&ptrs);
            let mut res = [RxHash::default(); BATCH];
            sum_of(iters, |i| {
                let at = (i * BATCH) & MASK;
                h.hash_frames(&ptrs[at..at + BATCH], &mut res);
                black_box(&mut res);
                fold(res[0])
            })
        });
        let reference = measure(1, |iters| {
            let fr = black_box(&fr);
            sum_of(iters, |i| shell_hash_reference(&key, &fr[i & MASK]))
        });
        let accel = |hasher: &AccelHasher| {
            measure(1, |iters| {
                let fr = black_box(&fr);
                sum_of(iters, |i| fold(hasher.hash_frame(&fr[i & MASK])))
            })
        };
        let accel_batch = |hasher: &AccelHasher| {
            measure(BATCH, |iters| {
                let ptrs = black_box(&ptrs);
                let mut res = [RxHash::default(); BATCH];
                sum_of(iters, |i| {
                    let at = (i * BATCH) & MASK;
                    hasher.hash_frames(&ptrs[at..at + BATCH], &mut res);
                    black_box(&mut res);
                    fold(res[0])
                })
            })
        };
        for (backend, h) in &backends {
            out.push((format!("rss_shell_{name}_accel_{backend}"), accel(h), UNIT));
            out.push((
                format!("rss_shell_{name}_accel_{backend}_batch32"),
                accel_batch(h),
                UNIT,
            ));
        }
        out.push((format!("rss_shell_{name}_table"), table, UNIT));
        out.push((format!("rss_shell_{name}_table_batch32"), batch, UNIT));
        out.push((format!("rss_shell_{name}_reference"), reference, UNIT));
    }
    input_figures(out, rng, &backends);
}

/// The shell's hash of 13 input bytes already extracted (`AccelHasher::hash_input`, no frame
/// parsing, no hash type) on every backend, one at a time and 32 at a time: the work DPDK's
/// `rte_thash_gfni` figures do on their 12-byte tuples. As `bench_rss.c` does for those, the
/// inputs are [`INPUTS`] random byte arrays visited in order.
fn input_figures(out: &mut Figures, rng: &mut Rng, backends: &[(&str, AccelHasher)]) {
    let inputs: Vec<[u8; TUPLE_LEN]> = (0..INPUTS).map(|_| rng.bytes()).collect();
    for (backend, h) in backends {
        let one = measure(1, |iters| {
            let v = black_box(&inputs);
            sum_of(iters, |i| h.hash_input(&v[i & MASK]))
        });
        let batch = measure(BATCH, |iters| {
            let v = black_box(&inputs);
            let mut res = [0u32; BATCH];
            sum_of(iters, |i| {
                let at = (i * BATCH) & MASK;
                h.hash_inputs(&v[at..at + BATCH], &mut res);
                black_box(&mut res);
                res[0]
            })
        });
        out.push((format!("rss_shell_input_accel_{backend}"), one, UNIT));
        out.push((format!("rss_shell_input_accel_{backend}_batch32"), batch, UNIT));
    }
}

/// Standard Toeplitz with the Microsoft key (as the DPDK peer): IPv4 addresses alone, then
/// IPv4 and IPv6 4-tuples.
fn toeplitz_figures(out: &mut Figures, rng: &mut Rng) {
    let mk = RssKey::MICROSOFT;
    let t = Toeplitz::new(mk.as_bytes()).expect("the Microsoft key is 40 bytes");
    let (v4, v6) = tuples(rng);
    let v4_l3 = measure(1, |iters| {
        let v = black_box(&v4);
        sum_of(iters, |i| {
            let (s, d, _, _) = v[i & MASK];
            t.hash_ipv4(s, d)
        })
    });
    out.push(("rss_toeplitz_ipv4_l3_table".into(), v4_l3, UNIT));
    let key = mk.as_bytes();
    tuple_figures(
        out,
        "ipv4_l4",
        &v4,
        key,
        |s, d, sp, dp| t.hash_ipv4_ports(s, d, sp, dp),
        ipv4_ports_input,
    );
    tuple_figures(
        out,
        "ipv6_l4",
        &v6,
        key,
        |s, d, sp, dp| t.hash_ipv6_ports(s, d, sp, dp),
        ipv6_ports_input,
    );
}

/// The Toeplitz figures of one set of 4-tuples: `hash` one at a time, 32 at a time, and the
/// bit-serial reference over the input `input` lays out.
fn tuple_figures<A: Copy, I: AsRef<[u8]>>(
    out: &mut Figures,
    name: &str,
    set: &[(A, A, u16, u16)],
    key: &[u8],
    hash: impl Fn(A, A, u16, u16) -> u32,
    input: impl Fn(A, A, u16, u16) -> I,
) {
    let table = measure(1, |iters| {
        let v = black_box(set);
        sum_of(iters, |i| {
            let (s, d, sp, dp) = v[i & MASK];
            hash(s, d, sp, dp)
        })
    });
    let batch = measure(BATCH, |iters| {
        let v = black_box(set);
        let mut res = [0u32; BATCH];
        sum_of(iters, |i| {
            let at = (i * BATCH) & MASK;
            for (r, &(s, d, sp, dp)) in res.iter_mut().zip(&v[at..at + BATCH]) {
                *r = hash(s, d, sp, dp);
            }
            black_box(&mut res);
            res[0]
        })
    });
    let reference = measure(1, |iters| {
        let v = black_box(set);
        sum_of(iters, |i| {
            let (s, d, sp, dp) = v[i & MASK];
            toeplitz_reference(key, input(s, d, sp, dp).as_ref())
        })
    });
    out.push((format!("rss_toeplitz_{name}_table"), table, UNIT));
    out.push((format!("rss_toeplitz_{name}_table_batch32"), batch, UNIT));
    out.push((format!("rss_toeplitz_{name}_reference"), reference, UNIT));
}
