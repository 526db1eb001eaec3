//! The library part of the `onic` tool: what the tool's subcommands share and what is tested on
//! its own (the fuzz targets in `fuzz/` read captures through it): the capture reader and writer,
//! the limits checked up front and output that survives a closed pipe. The benchmark rigs and
//! workloads `onic bench` runs are in `onic-testkit`.

// Output goes through `out` (pipe-safe); the std print macros panic on a closed pipe.
#![forbid(unsafe_code)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod file;
pub mod limits;
pub mod out;
pub mod pcap;
