//! The benchmark rigs and workloads: driver-only RX and TX rigs over host memory
//! ([`hostdma`], [`rig`]), the figures `onic bench` prints ([`bench`], [`bench_xdp`]) and the
//! RSS inputs ([`rss_inputs`]). The criterion benches of `onic-tests` time the same workloads.

pub mod bench;
pub mod bench_xdp;
pub mod hostdma;
pub mod rig;
pub mod rss_inputs;
