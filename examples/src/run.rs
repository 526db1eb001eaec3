//! `onic run`: traffic through the device model, the driver and (optionally) an XDP program.
//!
//! Two modes share the command:
//!
//! - **traffic** (default, [`crate::traffic`]): generated flows sent from one port to the other
//!   through the driver's TX and RX queues, every byte checked, rates and accounting printed;
//! - **replay** (`--pcap FILE` and/or `--xdp PROGRAM`, [`crate::replay`]): a capture (or, without
//!   `--pcap`, a generated sample mix) replayed into a port, through the driver's RX path and the
//!   XDP program, with what the OS received, what left each port and what was dropped written as
//!   pcap files.

use crate::{replay, traffic};

/// Arguments of `onic run`.
#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    traffic: traffic::TrafficArgs,
    #[command(flatten)]
    replay: replay::ReplayOpts,
}

pub fn run(args: &RunArgs) -> Result<(), String> {
    if args.replay.wanted() {
        replay::run(&args.replay, args.traffic.queues)
    } else {
        traffic::run(&args.traffic, &args.replay.obj)
    }
}
