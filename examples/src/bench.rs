//! `onic bench`: benchmarks printing one `name value unit` line per figure.

/// Arguments of `onic bench`.
#[derive(clap::Args)]
pub struct BenchArgs {}

pub fn run(_args: &BenchArgs) -> Result<(), String> {
    Err("not built yet".into())
}
