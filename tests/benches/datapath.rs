//! Criterion benches of the datapath, kernel for kernel the workloads of `onic bench`
//! (`onic_testkit::bench`): the driver-only RX drop and to-OS paths, the TX path, the page pool,
//! queue and ring-size scaling, and the page-per-packet baseline against the pool at the
//! comparison's frame sizes, and the driver-only XDP verdict paths (`onic_testkit::bench_xdp`)
//! beside the RX drop path of the same rig. Driver-only benches time only the driver's calls (the
//! device side runs between timed regions, see `onic_testkit::rig`).
//!
//! Run: `cargo bench -p onic-tests --bench datapath` (a group: append its name, e.g. `-- pool`).

#![allow(missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use onic_core::queue::pool::{PageBurst, PageProvider};
use onic_core::queue::rx::RxFrame;
use onic_core::PassInfo;
use onic_hal::{Direction, DmaPage};
use onic_testkit::bench::{
    ring_sizes, rx_drop_driver_only, timer_overhead, tx_round, Method, COMPARE_SIZES, SCALING_QUEUES,
};
use onic_testkit::bench_xdp::{xdp_driver_only, xdp_rig_config, XDP_PATHS, XDP_ROUND};
use onic_testkit::hostdma::HostDma;
use onic_testkit::rig::{
    host_pool, DoorbellLatch, PagePerPacket, RxRig, RxRigConfig, RxSlots, TxRig, TxSlots,
};

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
}

/// Times `iters` rounds of produce (untimed) + poll_all (timed); returns the summed poll time.
fn rx_iters<P: PageProvider<Page = DmaPage>>(
    rig: &mut RxRig<'_, P>,
    iters: u64,
    overhead: Duration,
    sink: &mut impl onic_core::RxSink<DmaPage>,
) -> Duration {
    let mut timed = Duration::ZERO;
    for _ in 0..iters {
        let n = rig.produce(usize::MAX);
        let t = Instant::now();
        let got = rig.poll_all(sink);
        timed += t.elapsed().saturating_sub(overhead);
        assert_eq!(got, n);
    }
    timed
}

/// Packets one round of `cfg` completes (the same every round once the ring is in steady state:
/// the driver hands back descriptors in batches, so a round can be a batch short).
fn round_packets(cfg: &RxRigConfig) -> u64 {
    u64::from(cfg.queues) * u64::from(cfg.ring.usable() - 1)
}

fn drop_bench(c: &mut Criterion, group: &str, id: BenchmarkId, cfg: RxRigConfig) {
    let dma = HostDma::new();
    let latch = DoorbellLatch::new();
    let mut slots = RxSlots::new(&cfg);
    let mut rig = RxRig::new(&dma, &latch, &mut slots, cfg, |d, _| host_pool(d)).expect("rig");
    let overhead = timer_overhead();
    let mut g = c.benchmark_group(group);
    g.throughput(Throughput::Elements(round_packets(&cfg)));
    g.bench_function(id, |b| {
        b.iter_custom(|iters| {
            rx_iters(&mut rig, iters, overhead, &mut |f: RxFrame<DmaPage>,
                                                      _: PassInfo|
             -> Result<
                (),
                RxFrame<DmaPage>,
            > { Err(f) })
        });
    });
    g.finish();
    drop(rig.finish());
}

fn bench_rx(c: &mut Criterion) {
    drop_bench(
        c,
        "rx",
        BenchmarkId::new("drop_driver_only", "1q_1024"),
        RxRigConfig::new(),
    );
}

fn bench_tx(c: &mut Criterion) {
    let dma = HostDma::new();
    let latch = DoorbellLatch::new();
    let ring =
        onic_core::config::RingSizeIdx::new(onic_core::config::TX_RING_SIZE_INDEX_DEFAULT).expect("ring");
    let mut slots = TxSlots::new(ring);
    let n = usize::from(ring.usable()) - 1;
    let mut rig = TxRig::new(&dma, &latch, &mut slots, ring, n, 60).expect("rig");
    let overhead = timer_overhead();
    let mut g = c.benchmark_group("tx");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("driver_only_batch32", |b| {
        b.iter_custom(|iters| {
            let mut timed = Duration::ZERO;
            for _ in 0..iters {
                timed += tx_round(&mut rig, n, overhead).0;
            }
            timed
        });
    });
    g.finish();
    rig.finish();
}

fn bench_pool(c: &mut Criterion) {
    let dma = HostDma::new();
    let mut pool = host_pool(&dma);
    let warm: Vec<DmaPage> = (0..64).filter_map(|_| pool.alloc()).collect();
    for p in warm {
        pool.recycle(p, 0);
    }
    let mut g = c.benchmark_group("pool");
    g.throughput(Throughput::Elements(1));
    g.bench_function("alloc_recycle_single", |b| {
        b.iter(|| {
            if let Some(p) = black_box(pool.alloc()) {
                pool.recycle(p, 64);
            }
        });
    });
    g.throughput(Throughput::Elements(32));
    g.bench_function("alloc_recycle_burst32", |b| {
        let mut burst: PageBurst<32> = PageBurst::new();
        b.iter(|| {
            pool.alloc_bulk(&mut burst);
            black_box(&mut burst);
            pool.recycle_bulk(&mut burst, 64);
        });
    });
    let mut base = PagePerPacket::new(&dma, Direction::FromDevice);
    g.throughput(Throughput::Elements(1));
    g.bench_function("baseline_alloc_map_unmap_free", |b| {
        b.iter(|| {
            if let Some(p) = black_box(base.alloc_page()) {
                base.recycle_direct(p, 64);
            }
        });
    });
    g.finish();
}

fn bench_scaling(c: &mut Criterion) {
    for q in SCALING_QUEUES {
        drop_bench(
            c,
            "scaling_queues",
            BenchmarkId::from_parameter(q),
            RxRigConfig {
                queues: q,
                ..RxRigConfig::new()
            },
        );
    }
    for (n, ring) in ring_sizes() {
        drop_bench(
            c,
            "scaling_ring",
            BenchmarkId::from_parameter(n),
            RxRigConfig {
                ring,
                ..RxRigConfig::new()
            },
        );
    }
}

fn copy_bench<P: PageProvider<Page = DmaPage>>(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: BenchmarkId,
    rig: &mut RxRig<'_, P>,
) {
    let overhead = timer_overhead();
    let mut buf = vec![0u8; 4096];
    g.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let mut sink = |f: RxFrame<DmaPage>, _: PassInfo| -> Result<(), RxFrame<DmaPage>> {
                let d = f.data();
                buf[..d.len()].copy_from_slice(d);
                black_box(&mut buf);
                Err(f)
            };
            rx_iters(rig, iters, overhead, &mut sink)
        });
    });
}

fn bench_compare(c: &mut Criterion) {
    let mut g = c.benchmark_group("compare");
    for size in COMPARE_SIZES {
        let cfg = RxRigConfig {
            frame_len: (size - onic_sim::FCS_LEN) as u16,
            write_data: true,
            ..RxRigConfig::new()
        };
        g.throughput(Throughput::Elements(round_packets(&cfg)));
        let dma = HostDma::new();
        {
            let latch = DoorbellLatch::new();
            let mut slots = RxSlots::new(&cfg);
            let mut rig = RxRig::new(&dma, &latch, &mut slots, cfg, |d, _| {
                PagePerPacket::new(d, Direction::FromDevice)
            })
            .expect("rig");
            copy_bench(&mut g, BenchmarkId::new("page_per_packet", size), &mut rig);
            drop(rig.finish());
        }
        {
            let latch = DoorbellLatch::new();
            let mut slots = RxSlots::new(&cfg);
            let mut rig = RxRig::new(&dma, &latch, &mut slots, cfg, |d, _| host_pool(d)).expect("rig");
            copy_bench(&mut g, BenchmarkId::new("pool", size), &mut rig);
            drop(rig.finish());
        }
    }
    g.finish();
}

/// The XDP verdict paths at 64 and 1518 bytes, each figure from the same workload as `onic bench
/// xdp` (criterion's iteration count is the number of rounds).
fn bench_xdp(c: &mut Criterion) {
    let mut g = c.benchmark_group("xdp");
    g.throughput(Throughput::Elements(XDP_ROUND as u64));
    for size in [64, 1518] {
        g.bench_function(BenchmarkId::new("rx_drop_no_xdp", size), |b| {
            b.iter_custom(|iters| rx_drop_driver_only(&rounds(iters), xdp_rig_config(size, false)).total())
        });
        for (name, path) in XDP_PATHS {
            g.bench_function(BenchmarkId::new(name, size), |b| {
                b.iter_custom(|iters| xdp_driver_only(&rounds(iters), path, size).total())
            });
        }
    }
    g.finish();
}

/// A method running exactly `iters` rounds once.
fn rounds(iters: u64) -> Method {
    Method {
        rounds: Some(iters),
        ..Method::default()
    }
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_rx, bench_tx, bench_pool, bench_scaling, bench_compare, bench_xdp
}
criterion_main!(benches);
