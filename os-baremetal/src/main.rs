//! Bare-metal test image for `x86_64-unknown-none`. The boot code, console, interrupts and the
//! self-test arrive with the bare-metal work; on a hosted target this binary only says how to
//! build the image.

#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo<'_>) -> ! {
    loop {
        core::hint::spin_loop();
    }
}

#[cfg(not(target_os = "none"))]
fn main() {
    println!("onic-baremetal is an image for x86_64-unknown-none; see `cargo xtask qemu`.");
}
