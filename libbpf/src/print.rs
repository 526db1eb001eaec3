//! What libbpf prints (its own reasons for refusing an object: a CO-RE relocation it cannot
//! resolve, a map the kernel would not create, ...), caught through `libbpf_set_print` and kept
//! with each message's level, the most recent 64 KiB.

use std::collections::VecDeque;
use std::ffi::{c_char, c_int, c_void};
use std::sync::Mutex;

/// The level libbpf gives a message (`enum libbpf_print_level`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum PrintLevel {
    /// `LIBBPF_WARN`: what went wrong.
    Warn,
    /// `LIBBPF_INFO`.
    Info,
    /// `LIBBPF_DEBUG`: every section, map and relocation on the way.
    Debug,
}

impl PrintLevel {
    fn from_c(level: c_int) -> Self {
        match level {
            0 => Self::Warn,
            1 => Self::Info,
            _ => Self::Debug,
        }
    }
}

/// Messages libbpf printed, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Printed {
    messages: VecDeque<(PrintLevel, String)>,
    bytes: usize,
}

/// Bytes of messages kept; older ones are dropped first.
const KEEP: usize = 64 << 10;

impl Printed {
    fn push(&mut self, level: PrintLevel, text: String) {
        self.bytes += text.len();
        self.messages.push_back((level, text));
        while self.bytes > KEEP {
            match self.messages.pop_front() {
                Some((_, t)) => self.bytes -= t.len(),
                None => break,
            }
        }
    }

    /// The messages of level `up_to` or more severe, as libbpf printed them (each message ends
    /// its own line).
    #[must_use]
    pub fn text(&self, up_to: PrintLevel) -> String {
        self.messages
            .iter()
            .filter(|(l, _)| *l <= up_to)
            .map(|(_, t)| t.as_str())
            .collect()
    }

    /// Whether nothing was printed.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }
}

/// What libbpf printed since the last [`take`].
static LOG: Mutex<Printed> = Mutex::new(Printed {
    messages: VecDeque::new(),
    bytes: 0,
});

extern "C" {
    fn vsnprintf(s: *mut c_char, n: usize, fmt: *const c_char, ap: *mut c_void) -> c_int;
}

/// The print callback: formats libbpf's message into [`LOG`].
///
/// # Safety
///
/// Called by libbpf only, with a format string and its argument list.
unsafe extern "C" fn keep(level: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int {
    let mut buf = [0u8; 1024];
    // SAFETY: libbpf hands over a format string and its argument list; vsnprintf writes at most
    // `buf.len()` bytes including the terminating NUL.
    let n = unsafe { vsnprintf(buf.as_mut_ptr().cast(), buf.len(), fmt, ap) };
    let end = usize::try_from(n).unwrap_or(0).min(buf.len() - 1);
    if let Ok(mut log) = LOG.lock() {
        log.push(
            PrintLevel::from_c(level),
            String::from_utf8_lossy(&buf[..end]).into_owned(),
        );
    }
    0
}

/// The callback to hand `libbpf_set_print`: [`keep`] where the `va_list` convention above holds
/// (x86-64), else none (libbpf stays silent).
pub(crate) fn callback() -> Option<crate::ffi::PrintFn> {
    cfg!(target_arch = "x86_64").then_some(keep as crate::ffi::PrintFn)
}

/// Takes what libbpf printed so far, leaving nothing.
pub(crate) fn take() -> Printed {
    LOG.lock()
        .map(|mut l| std::mem::take(&mut *l))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_keeps_the_levels_asked_for_in_order() {
        let mut p = Printed::default();
        p.push(PrintLevel::Debug, "libbpf: map 'm': created\n".into());
        p.push(PrintLevel::Warn, "libbpf: failed to load\n".into());
        p.push(PrintLevel::Info, "libbpf: info\n".into());
        assert_eq!(p.text(PrintLevel::Warn), "libbpf: failed to load\n");
        assert_eq!(
            p.text(PrintLevel::Debug),
            "libbpf: map 'm': created\nlibbpf: failed to load\nlibbpf: info\n"
        );
        assert!(!p.is_empty());
    }

    #[test]
    fn only_the_most_recent_bytes_are_kept() {
        let mut p = Printed::default();
        for i in 0..2 * KEEP / 100 {
            p.push(PrintLevel::Warn, format!("{i:099}\n"));
        }
        assert!(p.bytes <= KEEP && p.bytes > KEEP - 100);
        let text = p.text(PrintLevel::Debug);
        assert_eq!(text.len(), p.bytes);
        assert!(text.ends_with(&format!("{:099}\n", 2 * KEEP / 100 - 1)));
    }
}
