//! The library part of the `onic` tool: what the tool's subcommands share and what is tested on
//! its own (the fuzz targets in `fuzz/` read captures through it).

pub mod pcap;
