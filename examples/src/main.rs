//! The `onic` command-line tool: register traces of the driver's programming, RSS hashing,
//! traffic through the device model, and benchmarks.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod bench;
mod bench_rss;
mod bench_xdp;
mod rss;
mod run;
mod trace;
mod xdp_progs;

/// onic: the OpenNIC driver's command-line tool.
#[derive(Parser)]
#[command(name = "onic", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the register accesses the driver makes for a scenario (recording bus).
    Trace(trace::TraceArgs),
    /// Compute the shell's RSS hash, standard Toeplitz, or show how flows spread over queues.
    Rss(rss::RssArgs),
    /// Run benchmarks and print one `name value unit` line per figure.
    Bench(bench::BenchArgs),
    /// Replay a pcap capture through the model, the driver and an XDP program; write what the OS
    /// received, what left each port and what was dropped as pcap files.
    Run(run::RunArgs),
    /// Write a sample capture (DNS, other UDP, TCP, ARP at mixed sizes) for `onic run`.
    PcapSample(run::SampleArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Trace(a) => trace::run(&a),
        Command::Rss(a) => rss::run(&a),
        Command::Bench(a) => bench::run(&a),
        Command::Run(a) => run::run(&a),
        Command::PcapSample(a) => run::sample(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("onic: {e}");
            ExitCode::FAILURE
        }
    }
}
