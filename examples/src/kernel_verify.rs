//! `onic run --xdp-obj FILE --kernel-verify`: the host kernel's verdict on the same program, beside
//! the engine's. The object is opened with the host's libbpf (`libbpf.so.1`, opened at run time
//! with `dlopen`, so that nothing links against it) and only the chosen program is loaded into
//! the running kernel: libbpf creates the maps, resolves CO-RE relocations, and the verifier
//! decides. The program is unloaded again at once; nothing is attached.
//!
//! Where that cannot be done (no libbpf, or `bpf()` not permitted: no root, a container without
//! `CAP_BPF`, `kernel.unprivileged_bpf_disabled`), it says so, and the engine's own static check
//! of what the verifier refuses (`onic_bpf::verify`, always on) is what stands.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Mutex;

type Ptr = *mut c_void;

/// `BPF_PROG_TYPE_XDP`.
const PROG_TYPE_XDP: u32 = 6;
/// `BPF_PROG_TYPE_UNSPEC`: libbpf did not recognise the section name.
const PROG_TYPE_UNSPEC: u32 = 0;
/// `BPF_LOG_STATS`: the verifier's errors and its statistics, not the trace of every path.
const LOG_STATS: u32 = 4;
/// Bytes of verifier log kept.
const LOG_BYTES: usize = 1 << 20;
/// Lines of the log printed.
const LOG_LINES: usize = 20;

/// The libbpf entry points used, with the signatures of libbpf 1.x.
struct Fns {
    open_file: unsafe extern "C" fn(*const c_char, *const c_void) -> Ptr,
    close: unsafe extern "C" fn(Ptr),
    load: unsafe extern "C" fn(Ptr) -> c_int,
    next_program: unsafe extern "C" fn(Ptr, Ptr) -> Ptr,
    prog_name: unsafe extern "C" fn(Ptr) -> *const c_char,
    prog_type: unsafe extern "C" fn(Ptr) -> u32,
    prog_set_type: unsafe extern "C" fn(Ptr, u32) -> c_int,
    prog_set_autoload: unsafe extern "C" fn(Ptr, bool) -> c_int,
    prog_set_log_buf: unsafe extern "C" fn(Ptr, *mut c_char, usize) -> c_int,
    prog_set_log_level: unsafe extern "C" fn(Ptr, u32) -> c_int,
    next_map: unsafe extern "C" fn(Ptr, Ptr) -> Ptr,
    map_set_pin_path: unsafe extern "C" fn(Ptr, *const c_char) -> c_int,
    map_max_entries: unsafe extern "C" fn(Ptr) -> u32,
    map_set_max_entries: unsafe extern "C" fn(Ptr, u32) -> c_int,
    map_create: unsafe extern "C" fn(u32, *const c_char, u32, u32, u32, *const c_void) -> c_int,
    set_print: unsafe extern "C" fn(Option<PrintFn>) -> Option<PrintFn>,
}

/// `libbpf_print_fn_t` (a `va_list` travels as a pointer on x86-64).
type PrintFn = unsafe extern "C" fn(c_int, *const c_char, *mut c_void) -> c_int;

/// libbpf's own messages (why it refused before the verifier ran: a map it could not create, a
/// relocation it could not resolve), the last 16 KiB.
static LIBBPF_SAID: Mutex<String> = Mutex::new(String::new());

extern "C" {
    fn vsnprintf(s: *mut c_char, n: usize, fmt: *const c_char, ap: *mut c_void) -> c_int;
}

/// Keeps the warnings libbpf prints in [`LIBBPF_SAID`].
unsafe extern "C" fn keep(level: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int {
    // Warnings only (LIBBPF_WARN): its information and debug lines describe every section.
    if level != 0 {
        return 0;
    }
    let mut buf = [0u8; 512];
    // SAFETY: libbpf hands over a format and its arguments; vsnprintf writes at most
    // `buf.len()` bytes including the NUL.
    let n = unsafe { vsnprintf(buf.as_mut_ptr().cast(), buf.len(), fmt, ap) };
    let end = usize::try_from(n).unwrap_or(0).min(buf.len() - 1);
    if let Ok(mut s) = LIBBPF_SAID.lock() {
        s.push_str(&String::from_utf8_lossy(&buf[..end]));
        if s.len() > 16 << 10 {
            let cut = (s.len() - (8 << 10)..s.len())
                .find(|&i| s.is_char_boundary(i))
                .unwrap_or(0);
            s.drain(..cut);
        }
    }
    0
}

/// The kernel's verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The verifier accepted the program; its statistics line.
    Accepted(String),
    /// Refused: the errno and the log's last lines.
    Refused(String),
    /// Not asked, and why.
    NotAsked(String),
}

/// Resolves `name` in `handle` as a function pointer of type `T`.
///
/// # Safety
///
/// `T` must be the function pointer type of the symbol's C declaration.
unsafe fn sym<T: Copy>(handle: Ptr, name: &str) -> Result<T, String> {
    let c = CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: `handle` came from dlopen and `c` is a NUL-terminated name.
    let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
    if p.is_null() {
        return Err(format!(
            "libbpf.so.1 has no {name} (libbpf 1.0 or later is needed)"
        ));
    }
    // SAFETY: a non-null symbol address read as the function pointer type the caller vouches
    // for (the same size as a data pointer where dlopen exists).
    Ok(unsafe { std::mem::transmute_copy::<Ptr, T>(&p) })
}

fn open_libbpf() -> Result<Fns, String> {
    // SAFETY: a NUL-terminated library name; the handle stays open for the process's life, as
    // the resolved pointers need.
    let h = unsafe { libc::dlopen(c"libbpf.so.1".as_ptr(), libc::RTLD_NOW) };
    if h.is_null() {
        return Err("libbpf.so.1 cannot be opened (install libbpf1)".into());
    }
    // SAFETY: each type is the C declaration of the named libbpf 1.x function.
    unsafe {
        Ok(Fns {
            open_file: sym(h, "bpf_object__open_file")?,
            close: sym(h, "bpf_object__close")?,
            load: sym(h, "bpf_object__load")?,
            next_program: sym(h, "bpf_object__next_program")?,
            prog_name: sym(h, "bpf_program__name")?,
            prog_type: sym(h, "bpf_program__type")?,
            prog_set_type: sym(h, "bpf_program__set_type")?,
            prog_set_autoload: sym(h, "bpf_program__set_autoload")?,
            prog_set_log_buf: sym(h, "bpf_program__set_log_buf")?,
            prog_set_log_level: sym(h, "bpf_program__set_log_level")?,
            next_map: sym(h, "bpf_object__next_map")?,
            map_set_pin_path: sym(h, "bpf_map__set_pin_path")?,
            map_max_entries: sym(h, "bpf_map__max_entries")?,
            map_set_max_entries: sym(h, "bpf_map__set_max_entries")?,
            map_create: sym(h, "bpf_map_create")?,
            set_print: sym(h, "libbpf_set_print")?,
        })
    }
}

/// Whether this process may use bpf(): creates and closes a one-entry array map.
fn probe(f: &Fns) -> Result<(), String> {
    // SAFETY: plain values; a null name and null options are allowed.
    let fd = unsafe { (f.map_create)(2, std::ptr::null(), 4, 4, 1, std::ptr::null()) };
    if fd < 0 {
        return Err(format!(
            "bpf() is not permitted here ({})",
            std::io::Error::from_raw_os_error(-fd)
        ));
    }
    // SAFETY: a descriptor this function owns.
    unsafe { libc::close(fd) };
    Ok(())
}

/// An object opened by libbpf, closed on drop (its programs and maps released).
struct Object<'f> {
    f: &'f Fns,
    obj: Ptr,
}

impl Drop for Object<'_> {
    fn drop(&mut self) {
        // SAFETY: the object is open and closed once.
        unsafe { (self.f.close)(self.obj) };
    }
}

impl Object<'_> {
    /// The programs (`maps` false) or maps of the object.
    fn items(&self, maps: bool) -> Vec<Ptr> {
        let mut out = Vec::new();
        let mut p = std::ptr::null_mut();
        loop {
            // SAFETY: the object is open; `p` is null or its previous item.
            p = unsafe {
                if maps {
                    (self.f.next_map)(self.obj, p)
                } else {
                    (self.f.next_program)(self.obj, p)
                }
            };
            if p.is_null() {
                return out;
            }
            out.push(p);
        }
    }
}

/// Asks the host kernel about function `func` of object `path`: loaded as XDP when `as_xdp` or
/// when libbpf does not know its section, maps declared without `max_entries` given
/// `unsized_entries` (as the engine gives them), pinning cleared.
#[must_use]
pub fn verify(path: &std::path::Path, func: &str, as_xdp: bool, unsized_entries: u32) -> Verdict {
    let f = match open_libbpf() {
        Ok(f) => f,
        Err(e) => return Verdict::NotAsked(e),
    };
    if let Err(e) = probe(&f) {
        return Verdict::NotAsked(e);
    }
    // SAFETY: `keep` has the callback's C signature; on other targets libbpf stays silent.
    unsafe { (f.set_print)(cfg!(target_arch = "x86_64").then_some(keep as PrintFn)) };
    let Some(c) = path.to_str().and_then(|p| CString::new(p).ok()) else {
        return Verdict::NotAsked("the object's path is not UTF-8".into());
    };
    // SAFETY: a NUL-terminated path; null options are the defaults.
    let obj = unsafe { (f.open_file)(c.as_ptr(), std::ptr::null()) };
    if obj.is_null() {
        return Verdict::Refused(format!(
            "libbpf cannot open the object ({})",
            std::io::Error::last_os_error()
        ));
    }
    let o = Object { f: &f, obj };
    let mut log = vec![0u8; LOG_BYTES];
    if !choose(&o, func, as_xdp, &mut log) {
        return Verdict::NotAsked(format!("libbpf sees no program {func}"));
    }
    for m in o.items(true) {
        // SAFETY: a map of the open, not yet loaded object; a null path clears pinning.
        unsafe {
            (f.map_set_pin_path)(m, std::ptr::null());
            if (f.map_max_entries)(m) == 0 {
                (f.map_set_max_entries)(m, unsized_entries);
            }
        }
    }
    // SAFETY: the object is open; the chosen program's log buffer outlives the call.
    let r = unsafe { (f.load)(o.obj) };
    let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
    let mut text = String::from_utf8_lossy(&log[..end]).into_owned();
    if text.trim().is_empty() {
        // Refused before the verifier ran: libbpf's reasons instead.
        text = LIBBPF_SAID.lock().map(|s| s.clone()).unwrap_or_default();
    }
    if r == 0 {
        let stats = text
            .lines()
            .rev()
            .find(|l| l.starts_with("processed"))
            .unwrap_or("");
        return Verdict::Accepted(stats.trim().to_string());
    }
    Verdict::Refused(format!(
        "errno {} ({})\n{}",
        -r,
        std::io::Error::from_raw_os_error(-r),
        last_lines(&text, LOG_LINES)
    ))
}

/// Marks only `func` for loading (as XDP where asked or unknown), with `log` as its log.
fn choose(o: &Object<'_>, func: &str, as_xdp: bool, log: &mut [u8]) -> bool {
    let mut found = false;
    for p in o.items(false) {
        // SAFETY: a program of the open object; its name is a NUL-terminated string libbpf owns;
        // the log buffer outlives the load.
        unsafe {
            let name = CStr::from_ptr((o.f.prog_name)(p)).to_string_lossy();
            let mine = name == func;
            (o.f.prog_set_autoload)(p, mine);
            if !mine {
                continue;
            }
            found = true;
            if as_xdp || (o.f.prog_type)(p) == PROG_TYPE_UNSPEC {
                (o.f.prog_set_type)(p, PROG_TYPE_XDP);
            }
            (o.f.prog_set_log_buf)(p, log.as_mut_ptr().cast(), log.len());
            (o.f.prog_set_log_level)(p, LOG_STATS);
        }
    }
    found
}

/// The last `n` non-empty lines of `text`, each indented, with a count of those left out.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(|l| !l.is_empty())
        .collect();
    let skip = lines.len().saturating_sub(n);
    let mut out = String::new();
    if skip > 0 {
        out.push_str(&format!("  ... {skip} lines before\n"));
    }
    for l in &lines[skip..] {
        out.push_str("  ");
        out.push_str(l);
        out.push('\n');
    }
    out.trim_end().to_string()
}

/// Prints the verdict, in the words `onic run` uses.
pub fn print(v: &Verdict) {
    match v {
        Verdict::Accepted(stats) => outln!("kernel verifier (host kernel, through libbpf): accepted; {stats}"),
        Verdict::Refused(why) => outln!("kernel verifier (host kernel, through libbpf): REFUSED: {why}"),
        Verdict::NotAsked(why) => outln!(
            "kernel verifier: not asked: {why}; the engine's static check of what the verifier refuses stands in"
        ),
    }
}
