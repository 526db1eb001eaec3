//! `onic trace`: register traces of the driver's programming.

/// Arguments of `onic trace`.
#[derive(clap::Args)]
pub struct TraceArgs {}

pub fn run(_args: &TraceArgs) -> Result<(), String> {
    Err("not built yet".into())
}
