//! The `onic` command-line tool: the main job (`onic run`: traffic between the two ports of the
//! device model through the driver, or a capture through the driver and an XDP program), register
//! traces of the driver's programming, RSS hashing, and benchmarks.

// Output goes through `out` (pipe-safe); the std print macros panic on a closed pipe.
#![forbid(unsafe_code)]
#![deny(clippy::print_stdout, clippy::print_stderr)]

// The output macros (`outln!`, `errln!`, ...) for every module of the tool.
#[macro_use]
extern crate onic_cli;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod bench_rss;
mod bench_xdp;
mod bench_xsk;
mod carry;
mod kernel_verify;
mod plot;
mod replay;
mod rng;
mod route;
mod rss;
mod run;
mod test_run;
mod trace;
mod traffic;
mod xdp_obj;
mod xdp_progs;
mod xsk;

/// onic: the OpenNIC driver's command-line tool.
#[derive(Parser)]
#[command(name = "onic", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// The main job: bring up PF0 and PF1 on the model and send traffic from one port to the
    /// other through the driver (every frame checked; rates, per-queue and statistics tables), or
    /// with --pcap/--xdp replay a capture through the driver and an XDP program and write what the
    /// OS received, what left each port and what was dropped as pcap files.
    Run(Box<run::RunArgs>),
    /// Print the register accesses the driver makes for a scenario (recording bus).
    Trace(trace::TraceArgs),
    /// Compute the shell's RSS hash, standard Toeplitz, or show how flows spread over queues.
    Rss(rss::RssArgs),
    /// Run benchmarks and print one `name value unit` line per figure.
    Bench(bench::BenchArgs),
    /// Write a sample capture (DNS, other UDP, TCP, ARP at mixed sizes) for `onic run`.
    PcapSample(replay::SampleArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run(a) => run::run(&a),
        Command::Trace(a) => trace::run(&a),
        Command::Rss(a) => rss::run(&a),
        Command::Bench(a) => bench::run(&a),
        Command::PcapSample(a) => replay::sample(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            errln!("onic: {e}");
            ExitCode::FAILURE
        }
    }
}
