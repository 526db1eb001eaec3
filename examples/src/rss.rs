//! `onic rss`: the shell's RSS hash, standard Toeplitz, and flow spread.

/// Arguments of `onic rss`.
#[derive(clap::Args)]
pub struct RssArgs {}

pub fn run(_args: &RssArgs) -> Result<(), String> {
    Err("not built yet".into())
}
