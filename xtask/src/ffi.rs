//! The C side of the structs and constants the kernel module's C glue shares with its Rust side,
//! generated for every module build from their one definition, `os-linux/src/abi.rs` with the
//! port's call results it re-exports from `embed/src/port/abi.rs`:
//!
//! - `onic_ffi.h`: the declarations, by cbindgen (`os-linux/cbindgen.toml`);
//! - `onic_ffi_layout.h`: `static_assert`s of every struct's size, alignment and field offsets
//!   as rustc computed them (`cargo run -p onic-linux --example c_layout`), so a declaration that
//!   does not match the Rust layout fails the C compile.
//!
//! Both are written next to the glue in the per-kernel build directory and never committed: a
//! fresh checkout has no stale copy to trust, and no check is needed that one is current.

use std::fs;
use std::path::Path;
use std::process::Command;

use crate::{cargo, root, run};

/// The cbindgen release the headers are generated with (installed with `cargo install --locked`
/// when absent or different, like the host packages the module build installs).
pub const CBINDGEN_VERSION: &str = "0.29.4";

/// Whether `cbindgen --version` names the pinned release.
fn cbindgen_is_pinned() -> bool {
    Command::new("cbindgen")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .is_some_and(|o| {
            String::from_utf8_lossy(&o.stdout).split_whitespace().nth(1) == Some(CBINDGEN_VERSION)
        })
}

/// Installs the pinned cbindgen when `cbindgen` is missing or another release.
pub fn ensure_cbindgen() -> Result<(), String> {
    if cbindgen_is_pinned() {
        return Ok(());
    }
    let mut c = cargo();
    c.args(["install", "cbindgen", "--locked", "--version", CBINDGEN_VERSION]);
    run(&format!("cargo install cbindgen {CBINDGEN_VERSION}"), c)?;
    if cbindgen_is_pinned() {
        Ok(())
    } else {
        Err(format!(
            "cbindgen {CBINDGEN_VERSION} was installed but `cbindgen` on PATH is another one \
             (is ~/.cargo/bin on PATH?)"
        ))
    }
}

/// Writes `onic_ffi.h` and `onic_ffi_layout.h` into `dir` (a module build directory).
pub fn generate_headers(dir: &Path) -> Result<(), String> {
    // The layout checks come from the host build of onic-linux: its C ABI layout is the
    // module target's (x86_64-unknown-none) only on an x86_64 host.
    if !cfg!(target_arch = "x86_64") {
        return Err("the kernel module is built on x86_64 hosts only".into());
    }
    ensure_cbindgen()?;
    let os_linux = root().join("os-linux");
    // cbindgen reads one file: the two definitions, joined (it takes items, not paths, so the
    // re-export in abi.rs and the definitions after it read as one module).
    let mut joined = String::new();
    for part in ["os-linux/src/abi.rs", "embed/src/port/abi.rs"] {
        let path = root().join(part);
        let text = fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        // A module's own docs (`//!`) may only open a file: the second file's are left out.
        let first = joined.is_empty();
        for line in text.lines().filter(|l| first || !l.starts_with("//!")) {
            joined.push_str(line);
            joined.push('\n');
        }
    }
    let input = dir.join("onic_ffi_input.rs");
    fs::write(&input, joined).map_err(|e| format!("{}: {e}", input.display()))?;
    let mut c = Command::new("cbindgen");
    c.arg("--quiet")
        .arg("--config")
        .arg(os_linux.join("cbindgen.toml"))
        .arg("--output")
        .arg(dir.join("onic_ffi.h"))
        .arg(&input);
    run(
        "cbindgen: onic_ffi.h from os-linux/src/abi.rs and embed/src/port/abi.rs",
        c,
    )?;

    let mut c = cargo();
    c.args(["run", "--quiet", "-p", "onic-linux", "--example", "c_layout"]);
    let out = c
        .output()
        .map_err(|e| format!("cannot run cargo run --example c_layout: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo run -p onic-linux --example c_layout failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let layout = dir.join("onic_ffi_layout.h");
    fs::write(&layout, &out.stdout).map_err(|e| format!("{}: {e}", layout.display()))?;
    println!(
        "generated {} and {}",
        dir.join("onic_ffi.h").display(),
        layout.display()
    );
    Ok(())
}
