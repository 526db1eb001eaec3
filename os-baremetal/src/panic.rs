//! The panic handler: location and message on the console (and through defmt when the logger is
//! free), then exit with status 37.

use core::panic::PanicInfo;

use crate::exit::{exit, ExitCode};

#[panic_handler]
fn panic(info: &PanicInfo<'_>) -> ! {
    crate::platform::disable_interrupts();
    let (file, line, column) = info
        .location()
        .map_or(("<unknown>", 0, 0), |l| (l.file(), l.line(), l.column()));
    crate::println!();
    crate::println!("PANIC at {}:{}:{}: {}", file, line, column, info.message());
    if !crate::logger::busy() {
        defmt::error!(
            "panic at {=str}:{=u32}:{=u32}: {}",
            file,
            line,
            column,
            defmt::Display2Format(&info.message())
        );
    }
    exit(ExitCode::Panic)
}
