//! The text console on COM1: `println!`-style macros for the self-test report.
//!
//! Output is unbuffered. A whole `print!` runs with interrupts disabled, so a line is never cut
//! by a handler that prints (the exception handler does).

use core::fmt::{self, Write};

use crate::platform::without_interrupts;
use crate::serial::COM1;

/// `core::fmt` sink writing to COM1, turning `\n` into `\r\n` for terminals in raw mode.
pub struct Console;

impl Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for b in s.bytes() {
            if b == b'\n' {
                COM1.write_byte(b'\r');
            }
            COM1.write_byte(b);
        }
        Ok(())
    }
}

/// Writes formatted text to the console (used by the macros).
pub fn write_fmt(args: fmt::Arguments<'_>) {
    without_interrupts(|| {
        // Console::write_str never fails.
        let _ = Console.write_fmt(args);
    });
}

/// Prints to the console.
#[macro_export]
macro_rules! print {
    ($($arg:tt)*) => { $crate::console::write_fmt(format_args!($($arg)*)) };
}

/// Prints a line to the console.
#[macro_export]
macro_rules! println {
    () => { $crate::print!("\n") };
    ($($arg:tt)*) => { $crate::console::write_fmt(format_args!("{}\n", format_args!($($arg)*))) };
}
