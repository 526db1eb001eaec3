//! The `onic` command-line tool.

fn main() {}
