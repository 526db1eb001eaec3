//! The logging facade's backend in the kernel: `log` records are formatted into a stack buffer
//! and printed with printk at the matching level.

use core::fmt::Write;

use log::{Level, LevelFilter, Log, Metadata, Record};

use super::ffi;
use crate::text::FixedBuf;

struct Printk;

static LOGGER: Printk = Printk;

impl Log for Printk {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        m.level() <= log::max_level()
    }

    fn log(&self, r: &Record<'_>) {
        if !self.enabled(r.metadata()) {
            return;
        }
        let mut buf = FixedBuf::<256>::new();
        let _ = write!(buf, "{}", r.args());
        let level = match r.level() {
            Level::Error => 3,
            Level::Warn => 4,
            Level::Info => 6,
            Level::Debug | Level::Trace => 7,
        };
        let msg = buf.as_bytes();
        // SAFETY: valid byte range; printk copies it.
        unsafe { ffi::onic_printk(level, msg.as_ptr(), msg.len()) };
    }

    fn flush(&self) {}
}

/// Routes the facade to printk (`debug` also lets debug and trace records through).
pub fn init(debug: bool) {
    // Fails only if a logger is already set (a second init of the same module image).
    let _ = log::set_logger(&LOGGER);
    log::set_max_level(if debug {
        LevelFilter::Trace
    } else {
        LevelFilter::Info
    });
}
