//! Output of the `onic` tool. `println!` panics when stdout is a pipe whose reader has gone
//! (`onic run | head`); these write the same text, end the program quietly (status 0) on a
//! closed pipe, and end it with a message on any other write error. Messages to stderr never
//! panic either.

use std::fmt;
use std::io::{self, Write};

/// Writes to stdout; see the module docs for what happens on a write error.
pub fn stdout(args: fmt::Arguments<'_>) {
    let r = io::stdout().lock().write_fmt(args);
    if let Err(e) = r {
        if e.kind() == io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        stderr(format_args!("onic: cannot write to stdout: {e}\n"));
        std::process::exit(1);
    }
}

/// Writes to stderr, ignoring errors (there is nowhere left to report them).
pub fn stderr(args: fmt::Arguments<'_>) {
    let _ = io::stderr().lock().write_fmt(args);
}

/// `print!` through [`stdout`].
#[macro_export]
macro_rules! out {
    ($($arg:tt)*) => { $crate::out::stdout(format_args!($($arg)*)) };
}

/// `println!` through [`stdout`].
#[macro_export]
macro_rules! outln {
    () => { $crate::out::stdout(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::out::stdout(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `eprint!` through [`stderr`].
#[macro_export]
macro_rules! errout {
    ($($arg:tt)*) => { $crate::out::stderr(format_args!($($arg)*)) };
}

/// `eprintln!` through [`stderr`].
#[macro_export]
macro_rules! errln {
    () => { $crate::out::stderr(format_args!("\n")) };
    ($($arg:tt)*) => { $crate::out::stderr(format_args!("{}\n", format_args!($($arg)*))) };
}
