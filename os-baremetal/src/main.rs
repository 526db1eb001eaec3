//! # onic-baremetal
//!
//! A bare-metal image for `x86_64-unknown-none` that QEMU boots with `-kernel`: the driver core
//! (`onic-core`) brings up the device model (`onic-sim`) on real boot code, real page tables,
//! real interrupts and a real timer, runs a self-test, prints a report on COM1, logs defmt frames
//! on COM2 and leaves through isa-debug-exit with a verdict (33 = pass). When QEMU has the
//! OpenNIC card as PCI functions, the self-test also finds it in PCI configuration space and
//! drives it over its BARs with DMA at physical addresses (`pci`, `dmamem`,
//! `selftest::card`). See `README.md` and `cargo xtask qemu [--card pci]`.
//!
//! On a hosted target this binary only says how to build the image.

#![cfg_attr(target_os = "none", no_std, no_main)]

#[cfg(target_os = "none")]
mod console;
#[cfg(target_os = "none")]
mod dmamem;
#[cfg(target_os = "none")]
mod exit;
#[cfg(target_os = "none")]
mod heap;
#[cfg(target_os = "none")]
mod irq;
#[cfg(target_os = "none")]
mod logger;
#[cfg(target_os = "none")]
mod model;
#[cfg(target_os = "none")]
mod panic;
#[cfg(target_os = "none")]
mod pci;
#[cfg(all(target_os = "none", target_arch = "x86_64"))]
#[path = "platform/x86_64/mod.rs"]
mod platform;
#[cfg(target_os = "none")]
mod selftest;
#[cfg(target_os = "none")]
mod serial;
#[cfg(target_os = "none")]
mod time;

#[cfg(target_os = "none")]
extern crate alloc;

/// Entry from the boot code (`platform/x86_64/boot.s`) in 64-bit mode on the boot stack, with
/// interrupts disabled: `magic` and `info` are EAX and EBX as the loader left them.
#[cfg(target_os = "none")]
#[unsafe(no_mangle)]
extern "C" fn kmain(magic: u32, info: u32) -> ! {
    use platform::{boot, enable_interrupts, idt, pic, pit};

    time::mark_boot();
    serial::COM1.init();
    serial::COM2.init();
    boot::paint_stack();
    // SAFETY: `magic` and `info` are the registers the loader passed (saved by boot.s).
    let protocol = unsafe { boot::BootProtocol::identify(magic, info) };
    println!();
    println!(
        "onic-baremetal {}: booted via {:?}",
        env!("CARGO_PKG_VERSION"),
        protocol
    );

    heap::init();
    idt::load();
    pic::init(1 << 0);
    let calibration = time::calibrate();
    pit::start_periodic(time::TICK_DIVISOR);
    enable_interrupts();
    defmt::info!(
        "onic-baremetal up: TSC {=u64} Hz, tick {=u64} Hz",
        calibration.tsc_hz,
        time::TICK_HZ
    );

    let code = selftest::run(&selftest::Boot {
        protocol,
        calibration,
    });
    exit::exit(code)
}

#[cfg(not(target_os = "none"))]
fn main() {
    println!(
        "onic-baremetal is an image for x86_64-unknown-none, booted by QEMU: run `cargo xtask qemu` \
         (see os-baremetal/README.md)."
    );
}
