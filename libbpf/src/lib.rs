//! `onic-libbpf`: the host kernel side of the project's BPF tools — the host's own libbpf
//! (`libbpf.so.1`, Debian's `libbpf1`), opened with `dlopen` at run time so that nothing links
//! against it (a machine without libbpf still builds and tests the workspace; the tools then say
//! why they cannot ask the kernel).
//!
//! libbpf is the loader the programs were written for: it creates their maps (BTF-defined,
//! legacy, global data), resolves CO-RE relocations against the running kernel's BTF, links
//! subprograms and fills in `ld_imm64` map references; the kernel's verifier then decides. Two
//! tools use it, through this crate only:
//!
//! - `onic run --xdp-obj FILE --kernel-verify` (the `onic` tool's `kernel_verify`): the
//!   verifier's verdict and log on the chosen program ([`Lib::load`] with [`VerifierLog::Stats`]).
//! - `cargo xtask bpf-diff` (`bpf/examples/kernel_diff`): the engine against the kernel — every
//!   XDP program loaded with its tail call targets and inner maps ([`LoadOptions`]), run with
//!   `BPF_PROG_TEST_RUN` ([`Loaded::test_run`]), its maps read ([`Loaded::entries`]) and put
//!   back between runs ([`Loaded::restore`]), the records of its ring buffers taken through their
//!   `mmap` ([`Loaded::ring_records`]).
//!
//! What is here: the table of libbpf entry points, the capture of libbpf's messages
//! ([`Printed`]), the probe of whether `bpf()` is permitted ([`Lib::probe`]), objects closed on
//! drop, the choice of the program to load and its type, the verifier log buffer, test runs and
//! map access. `unsafe` is used for the calls into C only, each block with the reason it holds.

mod ffi;
mod load;
mod maps;
mod print;
mod ring;

use std::ffi::{c_char, CStr, CString};
use std::fmt;
use std::path::{Path, PathBuf};

pub use load::{LoadOptions, Loaded, Refusal, VerifierLog};
pub use maps::{KMap, TestRun};
pub use print::{PrintLevel, Printed};

use ffi::{Fns, Ptr};

/// `BPF_PROG_TYPE_XDP`.
pub const PROG_TYPE_XDP: u32 = 6;
/// `BPF_PROG_TYPE_UNSPEC`: libbpf did not recognise the section name.
pub const PROG_TYPE_UNSPEC: u32 = 0;

/// Why the kernel could not be asked, or what it answered.
#[derive(Debug)]
pub enum Error {
    /// `libbpf.so.1` cannot be opened.
    NoLibrary,
    /// The library lacks an entry point (it is older than libbpf 1.0).
    MissingSymbol(&'static str),
    /// `bpf()` is not permitted to this process (no root, a container without `CAP_BPF`,
    /// `kernel.unprivileged_bpf_disabled`).
    NotPermitted(std::io::Error),
    /// The object's path cannot be handed to libbpf (not UTF-8, or a NUL in it).
    BadPath(PathBuf),
    /// libbpf cannot open the object: the error and what libbpf printed (its last two warnings
    /// are the message's reason).
    Open(std::io::Error, Printed),
    /// The object has no program of that name.
    NoProgram(String),
    /// The load was refused (by libbpf or the verifier).
    Refused(Refusal),
    /// The process cannot be pinned to a CPU.
    Affinity(std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NoLibrary => write!(f, "libbpf.so.1 cannot be opened (install libbpf1)"),
            Self::MissingSymbol(name) => {
                write!(f, "libbpf.so.1 has no {name} (libbpf 1.0 or later is needed)")
            }
            Self::NotPermitted(e) => write!(f, "bpf() is not permitted here ({e})"),
            Self::BadPath(p) => write!(f, "the object's path {} is not UTF-8 or holds a NUL", p.display()),
            Self::Open(e, said) => {
                write!(f, "libbpf cannot open the object ({e})")?;
                let why = last_lines(&said.text(PrintLevel::Warn), 2).one_line();
                if why.is_empty() {
                    Ok(())
                } else {
                    write!(f, ": {why}")
                }
            }
            Self::NoProgram(func) => write!(f, "libbpf sees no program {func}"),
            Self::Refused(r) => write!(f, "{r}"),
            Self::Affinity(e) => write!(f, "sched_setaffinity: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// A program of an object, as libbpf sees it before the load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// Its function's name.
    pub name: String,
    /// Its ELF section.
    pub section: String,
    /// The program type libbpf gives its section (`enum bpf_prog_type`; [`PROG_TYPE_UNSPEC`] for
    /// a section it does not know).
    pub prog_type: u32,
}

/// The opened library.
pub struct Lib {
    f: Fns,
}

impl Lib {
    /// Opens `libbpf.so.1` and catches what it prints from now on.
    ///
    /// # Errors
    ///
    /// [`Error::NoLibrary`] or [`Error::MissingSymbol`].
    pub fn open() -> Result<Self, Error> {
        let f = ffi::open()?;
        // SAFETY: the callback has the C signature of `libbpf_print_fn_t` (see `ffi::PrintFn`);
        // None silences libbpf.
        unsafe { (f.set_print)(print::callback()) };
        Ok(Self { f })
    }

    /// Whether this process may use bpf(): creates and closes a one-entry array map.
    ///
    /// # Errors
    ///
    /// [`Error::NotPermitted`] with the kernel's errno.
    pub fn probe(&self) -> Result<(), Error> {
        // SAFETY: plain values; a null name and null options are allowed.
        let fd = unsafe { (self.f.map_create)(2, std::ptr::null(), 4, 4, 1, std::ptr::null()) };
        owned_fd(fd).map(drop).map_err(Error::NotPermitted)
    }

    /// CPUs the kernel keeps a per-CPU value for (at least 1).
    #[must_use]
    pub fn possible_cpus(&self) -> usize {
        // SAFETY: no arguments.
        usize::try_from(unsafe { (self.f.possible_cpus)() })
            .unwrap_or(1)
            .max(1)
    }

    /// The programs of the object at `path`.
    ///
    /// # Errors
    ///
    /// [`Error::BadPath`] or [`Error::Open`].
    pub fn programs(&self, path: &Path) -> Result<Vec<Program>, Error> {
        let o = self.open_object(path)?;
        Ok(o.programs()
            .into_iter()
            .map(|p| {
                // SAFETY: `p` is a program of the open object `o`.
                unsafe {
                    Program {
                        name: cstr((self.f.prog_name)(p)),
                        section: cstr((self.f.prog_section)(p)),
                        prog_type: (self.f.prog_type)(p),
                    }
                }
            })
            .collect())
    }

    /// Opens the object at `path` (what libbpf printed before is dropped).
    fn open_object(&self, path: &Path) -> Result<Object<'_>, Error> {
        let c = path
            .to_str()
            .and_then(|p| CString::new(p).ok())
            .ok_or_else(|| Error::BadPath(path.to_path_buf()))?;
        print::take();
        // SAFETY: a NUL-terminated path; null options are the defaults.
        let obj = unsafe { (self.f.open_file)(c.as_ptr(), std::ptr::null()) };
        if obj.is_null() {
            return Err(Error::Open(std::io::Error::last_os_error(), print::take()));
        }
        Ok(Object { lib: self, obj })
    }
}

/// A descriptor the kernel returned as `fd` (a negative errno on failure), owned.
fn owned_fd(fd: std::ffi::c_int) -> Result<std::os::fd::OwnedFd, std::io::Error> {
    if fd < 0 {
        return Err(std::io::Error::from_raw_os_error(-fd));
    }
    // SAFETY: a descriptor the kernel just handed to this process and nothing else owns.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}

/// An open `bpf_object` (closed on drop: programs unloaded, maps freed).
struct Object<'l> {
    lib: &'l Lib,
    obj: Ptr,
}

impl Object<'_> {
    /// The programs (libbpf's handles) in the object's order.
    fn programs(&self) -> Vec<Ptr> {
        // SAFETY: `obj` is open; `p` is null or its previous program.
        self.walk(|p| unsafe { (self.lib.f.next_program)(self.obj, p) })
    }

    /// The maps (libbpf's handles) in the object's order.
    fn maps(&self) -> Vec<Ptr> {
        // SAFETY: `obj` is open; `m` is null or its previous map.
        self.walk(|m| unsafe { (self.lib.f.next_map)(self.obj, m) })
    }

    fn walk(&self, next: impl Fn(Ptr) -> Ptr) -> Vec<Ptr> {
        let mut out = Vec::new();
        let mut p = next(std::ptr::null_mut());
        while !p.is_null() {
            out.push(p);
            p = next(p);
        }
        out
    }

    /// The name of program `p` of this object.
    fn program_name(&self, p: Ptr) -> String {
        // SAFETY: `p` is a program of the open object; its name is a string libbpf owns.
        unsafe { cstr((self.lib.f.prog_name)(p)) }
    }
}

impl Drop for Object<'_> {
    fn drop(&mut self) {
        // SAFETY: the object is open and dropped once.
        unsafe { (self.lib.f.close)(self.obj) };
    }
}

/// The text of a C string libbpf owns (empty for null).
///
/// # Safety
///
/// `p` is null or a NUL-terminated string.
unsafe fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the caller's promise.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The `max_entries` a map declared without one is given by the differential test, on both
/// sides: 64 per CPU (more than the programs' own loaders ask for).
#[must_use]
pub fn unsized_entries(cpus: usize) -> u32 {
    u32::try_from(cpus.saturating_mul(64)).unwrap_or(u32::MAX)
}

/// The inner map a map of maps gets when its definition names none and
/// [`LoadOptions::inner_maps`] is set (its own loader makes one, as the selftests' `test_maps.c`
/// does for `test_map_in_map.c`): an array of 4-byte keys and values with this many entries, in
/// entry 0.
pub const INNER: u32 = 2;

/// The entry of a program array a program named `classifier_<i>` goes in when
/// [`LoadOptions::tail_calls`] is set: the selftests' tail call tests (`prog_tests/tailcalls.c`)
/// fill `jmp_table` that way from user space.
#[must_use]
pub fn tail_slot(func: &str) -> Option<u32> {
    func.strip_prefix("classifier_")?.parse().ok()
}

/// The last non-empty lines of a text (a verifier log, libbpf's messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastLines<'a> {
    /// Non-empty lines before them, left out.
    pub before: usize,
    /// The lines, trailing white space removed.
    pub lines: Vec<&'a str>,
}

impl LastLines<'_> {
    /// The lines on one line, each trimmed, joined with ` | `.
    #[must_use]
    pub fn one_line(&self) -> String {
        let trimmed: Vec<&str> = self.lines.iter().map(|l| l.trim()).collect();
        trimmed.join(" | ")
    }
}

/// The last `n` non-empty lines of `text`.
#[must_use]
pub fn last_lines(text: &str, n: usize) -> LastLines<'_> {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.trim().is_empty())
        .collect();
    let before = lines.len().saturating_sub(n);
    LastLines {
        before,
        lines: lines[before..].to_vec(),
    }
}

/// Pins this process to CPU 0, so that the kernel's test runs (and with them per-CPU map copies
/// and `bpf_get_smp_processor_id`) are on CPU 0.
///
/// # Errors
///
/// [`Error::Affinity`].
pub fn pin_to_cpu0() -> Result<(), Error> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and sched_setaffinity get a valid
    // pointer to it and its size.
    let r = unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set)
    };
    if r == 0 {
        Ok(())
    } else {
        Err(Error::Affinity(std::io::Error::last_os_error()))
    }
}

#[cfg(test)]
mod tests;
