//! The library part of the `onic` tool: what the tool's subcommands share and what is tested on
//! its own (the fuzz targets in `fuzz/` read captures through it): the capture reader and writer,
//! and output that survives a closed pipe.

pub mod limits;
pub mod out;
pub mod pcap;
