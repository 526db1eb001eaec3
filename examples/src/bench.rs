//! `onic bench`: benchmarks printing one `name value unit` line per figure.

/// Benchmark groups, in the order `onic bench` runs them when none is named.
const GROUPS: &[&str] = &["rss", "xdp"];

/// Arguments of `onic bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Groups to run (all when none is given): rss, xdp.
    groups: Vec<String>,
}

pub fn run(args: &BenchArgs) -> Result<(), String> {
    if let Some(bad) = args.groups.iter().find(|g| !GROUPS.contains(&g.as_str())) {
        return Err(format!(
            "unknown benchmark group '{bad}' (known: {})",
            GROUPS.join(", ")
        ));
    }
    let wanted = |g: &str| args.groups.is_empty() || args.groups.iter().any(|a| a == g);
    if wanted("rss") {
        for (name, value, unit) in crate::bench_rss::run() {
            println!("{name} {value:.3} {unit}");
        }
    }
    if wanted("xdp") {
        for (name, value, unit) in crate::bench_xdp::run()? {
            println!("{name} {value:.3} {unit}");
        }
    }
    Ok(())
}
