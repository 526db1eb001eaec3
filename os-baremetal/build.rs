//! Link the bare-metal image with its own linker script (plus defmt's, which places the interned
//! log strings in a non-loaded `.defmt` section). Host builds get nothing: there the package is a
//! plain program.

use std::env;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=image.ld");
    println!("cargo:rerun-if-env-changed=ONIC_BPF_BUNDLE");
    if let Ok(bundle) = env::var("ONIC_BPF_BUNDLE") {
        println!("cargo:rerun-if-changed={bundle}");
    }
    if env::var("CARGO_CFG_TARGET_OS").as_deref() != Ok("none") {
        return;
    }
    let arch = env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_default();
    if arch != "x86_64" {
        println!("cargo:warning=onic-baremetal: no boot code for {arch}; only x86_64 is supported");
        return;
    }
    let dir = env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    println!("cargo:rustc-link-arg-bins=-T{dir}/image.ld");
    println!("cargo:rustc-link-arg-bins=-Tdefmt.x");
}
