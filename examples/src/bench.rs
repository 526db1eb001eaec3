//! `onic bench`: benchmarks printing one `name value unit` line per figure (the fastest of the
//! repetitions), each followed by a `# name median ... spread ...` comment line. The workloads and
//! the method are documented in `onic_testkit::bench` and `docs/benchmarks.md`.

use std::time::Duration;

use onic_testkit::bench::{self, Figure, Method};

/// Benchmark groups, in the order `onic bench` runs them when none is named.
const GROUPS: &[&str] = &["rx", "tx", "pool", "scaling", "compare", "rss", "xdp", "xsk"];

/// Arguments of `onic bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Groups to run (all when none is given): rx, tx, pool, scaling, compare, rss, xdp, xsk.
    groups: Vec<String>,
    /// Wall time of one repetition, in milliseconds (datapath groups; 1..=60000).
    #[arg(long, default_value_t = 20)]
    rep_ms: u64,
    /// Repetitions per figure (1..=1000); the fastest is printed, the median in a comment
    /// (datapath groups).
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Run every datapath workload exactly this many rounds (1..=1000000000), once (no
    /// calibration, no repetitions): the work is then the same on every machine, for instruction
    /// counts under `valgrind --tool=callgrind`.
    #[arg(long)]
    rounds: Option<u64>,
    /// Run only the figures whose names contain this (datapath groups), e.g.
    /// `--only rx_drop_driver_only`.
    #[arg(long)]
    only: Option<String>,
    /// Write SVG charts of the measured tables into this directory (see `docs/benchmarks.md`).
    #[arg(long, value_name = "DIR")]
    plot: Option<std::path::PathBuf>,
    /// With --plot: also chart the `figure ours peer ratio` lines of this file (written by
    /// `cargo xtask bench-peers`).
    #[arg(long, value_name = "FILE", requires = "plot")]
    peers: Option<std::path::PathBuf>,
}

fn print(figs: &[Figure], all: &mut crate::plot::Figures) {
    for f in figs {
        all.insert(f.name.clone(), f.value);
        outln!("{} {:.3} {}", f.name, f.value, f.unit);
        outln!(
            "# {} median {:.3} {} spread {:.1}% undisturbed {}/{} ops {}",
            f.name,
            f.median,
            f.unit,
            f.spread_pct,
            f.clean.0,
            f.clean.1,
            f.ops
        );
    }
}

pub fn run(args: &BenchArgs) -> Result<(), String> {
    if let Some(bad) = args.groups.iter().find(|g| !GROUPS.contains(&g.as_str())) {
        return Err(format!(
            "unknown benchmark group '{bad}' (known: {})",
            GROUPS.join(", ")
        ));
    }
    use onic_cli::limits::in_range;
    in_range(
        "--rep-ms",
        args.rep_ms,
        1,
        60_000,
        "milliseconds of wall time per repetition",
    )?;
    in_range("--reps", args.reps, 1, 1000, "repetitions per figure")?;
    if let Some(r) = args.rounds {
        in_range("--rounds", r, 1, 1_000_000_000, "rounds of each workload")?;
    }
    // Where the results go is checked before the benchmarks run, not after.
    let peers = match &args.peers {
        Some(p) => Some(crate::plot::read_peers(p)?),
        None => None,
    };
    if let Some(dir) = &args.plot {
        crate::plot::check_dir(dir)?;
    }
    let m = Method {
        rep: Duration::from_millis(args.rep_ms),
        reps: args.reps,
        rounds: args.rounds,
        only: args.only.clone(),
    };
    let wanted = |g: &str| args.groups.is_empty() || args.groups.iter().any(|a| a == g);
    let mut all = crate::plot::Figures::new();
    outln!(
        "# method: best of {} undisturbed repetitions of ~{} ms wall time each; driver-only figures time only the driver's calls",
        m.reps, args.rep_ms
    );
    if wanted("rx") {
        print(&bench::rx(&m), &mut all);
    }
    if wanted("tx") {
        print(&bench::tx(&m), &mut all);
    }
    if wanted("pool") {
        print(&bench::pool(&m), &mut all);
    }
    if wanted("scaling") {
        print(&bench::scaling(&m), &mut all);
    }
    if wanted("compare") {
        let (figs, rows) = bench::compare(&m);
        print(&figs, &mut all);
        for line in bench::compare_table(&rows).lines() {
            outln!("# {line}");
        }
    }
    if wanted("rss") {
        for (name, value, unit) in crate::bench_rss::run() {
            outln!("{name} {value:.3} {unit}");
            all.insert(name, value);
        }
    }
    if wanted("xdp") {
        print(&onic_testkit::bench_xdp::xdp(&m), &mut all);
        // The figures with the model in the loop and the object path: not with a selection or a
        // fixed number of rounds (they run their own loops).
        if m.only.is_none() && m.rounds.is_none() {
            for (name, value, unit) in crate::bench_xdp::run()? {
                outln!("{name} {value:.3} {unit}");
            }
        }
    }
    // The core's zero-copy path beside the page pool's (model in the loop, its own loops).
    if wanted("xsk") && m.only.is_none() && m.rounds.is_none() {
        for (name, value, unit) in crate::bench_xsk::run()? {
            outln!("{name} {value:.3} {unit}");
        }
    }
    if let Some(dir) = &args.plot {
        for f in crate::plot::write_all(dir, &all, peers.as_deref())? {
            outln!("# plot: {}", dir.join(f).display());
        }
    }
    Ok(())
}
