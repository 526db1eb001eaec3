//! The library part of the `onic` tool: what the tool's subcommands share and what is tested on
//! its own (the fuzz targets in `fuzz/` read captures through it): the capture reader and writer,
//! output that survives a closed pipe, and the benchmark rigs (`onic bench`, and the criterion
//! benches of `onic-tests`).

// Output goes through `out` (pipe-safe); the std print macros panic on a closed pipe.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod file;
pub mod limits;
pub mod out;
pub mod pcap;
pub mod rigs;
