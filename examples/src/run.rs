//! `onic run`: traffic through the device model, the driver and (optionally) an XDP program.
//!
//! Two modes share the command:
//!
//! - **traffic** (default, [`crate::traffic`]): generated flows sent from one port to the other
//!   through the driver's TX and RX queues, every byte checked, rates and accounting printed;
//! - **replay** (`--pcap FILE` and/or `--xdp PROGRAM`, [`crate::replay`]): a capture (or, without
//!   `--pcap`, a generated sample mix) replayed into a port, through the driver's RX path and the
//!   XDP program, with what the OS received, what left each port and what was dropped written as
//!   pcap files; with `--xdp-obj --test-run` ([`crate::test_run`]) the frames go straight to the
//!   program instead, as the kernel's `BPF_PROG_TEST_RUN` hands them;
//! - **xsk** (`--xsk rxdrop|txonly|l2fwd`, [`crate::xsk`]): AF_XDP zero copy on one queue, a UMEM
//!   and its rings in this process, every frame checked and every chunk accounted for.

use crate::{replay, traffic, xsk};

/// Arguments of `onic run`.
#[derive(clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    traffic: traffic::TrafficArgs,
    #[command(flatten)]
    replay: replay::ReplayOpts,
    #[command(flatten)]
    xsk: xsk::XskOpts,
}

pub fn run(args: &RunArgs) -> Result<(), String> {
    if let Some(mode) = args.xsk.xsk {
        if args.replay.wanted() {
            return Err(
                "--xsk runs its own program; --pcap, --xdp and --xdp-obj are for the other modes".into(),
            );
        }
        return xsk::run(&args.xsk, mode, args.traffic.queues, &args.traffic.sizes);
    }
    if args.replay.wanted() {
        // The traffic options have defaults, so only a direction other than the default can
        // be told apart from none; a replay would ignore it.
        let way = match args.traffic.direction {
            traffic::Way::ZeroToOne => None,
            traffic::Way::OneToZero => Some("1to0"),
            traffic::Way::Both => Some("both"),
        };
        if let Some(way) = way {
            return Err(format!(
                "--direction {way} is for traffic mode; a replay (--pcap, --xdp, --xdp-obj without --traffic) sends its frames into the one port --port names"
            ));
        }
        replay::run(&args.replay, args.traffic.queues, args.traffic.progress_ms)
    } else {
        traffic::run(&args.traffic, &args.replay.obj)
    }
}
