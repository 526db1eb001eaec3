//! The library part of the `onic` tool: what the tool's subcommands share and what is tested on
//! its own (the fuzz targets in `fuzz/` read captures through it): the capture reader and writer,
//! output that survives a closed pipe, and the benchmark rigs (`onic bench`, and the criterion
//! benches of `onic-tests`).

pub mod limits;
pub mod out;
pub mod pcap;
pub mod rigs;
