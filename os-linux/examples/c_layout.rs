//! Prints `onic_ffi_layout.h`: C11 `static_assert`s that pin the C glue's view of every struct
//! shared with the Rust side to rustc's layout (`onic_linux::abi::C_LAYOUTS`). `cargo xtask kmod`
//! runs it for each module build; the host is x86_64 like the module's target
//! (`x86_64-unknown-none`), whose C ABI layout it shares.

use std::io::Write as _;

fn main() {
    let mut text = String::from(
        "/* SPDX-License-Identifier: GPL-2.0 */\n\
         /* Generated from os-linux/src/abi.rs by `cargo xtask kmod`; do not edit. */\n\
         #ifndef ONIC_FFI_LAYOUT_H\n#define ONIC_FFI_LAYOUT_H\n\n\
         #include <linux/build_bug.h>\n#include <linux/stddef.h>\n\n",
    );
    onic_linux::abi::write_c_asserts(&mut text).expect("formatting into a String");
    text.push_str("\n#endif\n");
    std::io::stdout()
        .write_all(text.as_bytes())
        .expect("writing to stdout");
}
