//! The kernel side: the host's own libbpf (`libbpf.so.1`, Debian's `libbpf1`), opened with
//! `dlopen` at run time so that nothing links against it (a machine without libbpf still builds
//! and tests the workspace; this example then says why it cannot run). libbpf is the loader the
//! programs under test were written for: it creates their maps (BTF-defined, legacy, global
//! data), resolves CO-RE relocations against the running kernel's BTF, links subprograms and
//! fills in `ld_imm64` map references. The verdict of the kernel's verifier is the reference for
//! "loads"; `BPF_PROG_TEST_RUN` is the reference for what a program does.
//!
//! Only the handful of entry points below are used, each with the signature `libbpf.h` and
//! `bpf.h` of libbpf 1.x declare.

use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Mutex;

type Ptr = *mut c_void;

/// The entry points, resolved once.
struct Fns {
    open_file: unsafe extern "C" fn(*const c_char, *const c_void) -> Ptr,
    close: unsafe extern "C" fn(Ptr),
    load: unsafe extern "C" fn(Ptr) -> c_int,
    next_program: unsafe extern "C" fn(Ptr, Ptr) -> Ptr,
    prog_name: unsafe extern "C" fn(Ptr) -> *const c_char,
    prog_section: unsafe extern "C" fn(Ptr) -> *const c_char,
    prog_type: unsafe extern "C" fn(Ptr) -> u32,
    prog_set_type: unsafe extern "C" fn(Ptr, u32) -> c_int,
    prog_set_autoload: unsafe extern "C" fn(Ptr, bool) -> c_int,
    prog_set_log_buf: unsafe extern "C" fn(Ptr, *mut c_char, usize) -> c_int,
    prog_fd: unsafe extern "C" fn(Ptr) -> c_int,
    next_map: unsafe extern "C" fn(Ptr, Ptr) -> Ptr,
    map_name: unsafe extern "C" fn(Ptr) -> *const c_char,
    map_set_pin_path: unsafe extern "C" fn(Ptr, *const c_char) -> c_int,
    map_max_entries: unsafe extern "C" fn(Ptr) -> u32,
    map_set_max_entries: unsafe extern "C" fn(Ptr, u32) -> c_int,
    map_fd: unsafe extern "C" fn(Ptr) -> c_int,
    map_inner: unsafe extern "C" fn(Ptr) -> Ptr,
    map_set_inner_fd: unsafe extern "C" fn(Ptr, c_int) -> c_int,
    map_set_autocreate: unsafe extern "C" fn(Ptr, bool) -> c_int,
    map_type: unsafe extern "C" fn(Ptr) -> u32,
    map_key_size: unsafe extern "C" fn(Ptr) -> u32,
    map_value_size: unsafe extern "C" fn(Ptr) -> u32,
    map_create: unsafe extern "C" fn(u32, *const c_char, u32, u32, u32, *const c_void) -> c_int,
    next_key: unsafe extern "C" fn(c_int, *const c_void, *mut c_void) -> c_int,
    lookup: unsafe extern "C" fn(c_int, *const c_void, *mut c_void) -> c_int,
    lookup_batch: unsafe extern "C" fn(
        c_int,
        *const c_void,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        *mut u32,
        *const c_void,
    ) -> c_int,
    update: unsafe extern "C" fn(c_int, *const c_void, *const c_void, u64) -> c_int,
    delete: unsafe extern "C" fn(c_int, *const c_void) -> c_int,
    test_run: unsafe extern "C" fn(c_int, *mut TestRunOpts) -> c_int,
    possible_cpus: unsafe extern "C" fn() -> c_int,
    set_print: unsafe extern "C" fn(Option<PrintFn>) -> Option<PrintFn>,
}

/// `libbpf_print_fn_t`: the `va_list` travels as a pointer (the x86-64 calling convention passes
/// a `va_list` argument as the address of its one-element array).
type PrintFn = unsafe extern "C" fn(c_int, *const c_char, *mut c_void) -> c_int;

/// `struct bpf_test_run_opts` of libbpf 1.x (`sz` first: libbpf checks the size it is given).
#[repr(C)]
#[derive(Default)]
struct TestRunOpts {
    sz: usize,
    data_in: usize,
    data_out: usize,
    data_size_in: u32,
    data_size_out: u32,
    ctx_in: usize,
    ctx_out: usize,
    ctx_size_in: u32,
    ctx_size_out: u32,
    retval: u32,
    repeat: c_int,
    duration: u32,
    flags: u32,
    cpu: u32,
    batch_size: u32,
}

/// `struct xdp_md`: the test run's context in and out.
#[repr(C)]
#[derive(Default, Clone, Copy)]
struct XdpMd {
    data: u32,
    data_end: u32,
    data_meta: u32,
    ingress_ifindex: u32,
    rx_queue_index: u32,
    egress_ifindex: u32,
}

/// What libbpf printed since the last [`take_log`] (its own reasons for refusing an object: a
/// CO-RE relocation it cannot resolve, a map the kernel would not create, ...).
static LOG: Mutex<String> = Mutex::new(String::new());

extern "C" {
    fn vsnprintf(s: *mut c_char, n: usize, fmt: *const c_char, ap: *mut c_void) -> c_int;
}

/// The print callback: formats libbpf's message into [`LOG`] (kept to the last 64 KiB).
unsafe extern "C" fn print(_level: c_int, fmt: *const c_char, ap: *mut c_void) -> c_int {
    let mut buf = [0u8; 1024];
    // SAFETY: libbpf hands over a format string and its argument list; vsnprintf writes at most
    // `buf.len()` bytes including the terminating NUL.
    let n = unsafe { vsnprintf(buf.as_mut_ptr().cast(), buf.len(), fmt, ap) };
    let end = usize::try_from(n).unwrap_or(0).min(buf.len() - 1);
    if let Ok(mut log) = LOG.lock() {
        log.push_str(&String::from_utf8_lossy(&buf[..end]));
        if log.len() > 64 << 10 {
            let cut = log.len() - (32 << 10);
            let cut = (cut..log.len()).find(|&i| log.is_char_boundary(i)).unwrap_or(0);
            log.drain(..cut);
        }
    }
    0
}

/// The `max_entries` both sides give a map declared without one: 64 per CPU.
pub fn unsized_entries(cpus: usize) -> u32 {
    u32::try_from(64 * cpus).unwrap_or(u32::MAX)
}

/// Takes what libbpf printed so far.
pub fn take_log() -> String {
    LOG.lock()
        .map(|mut l| std::mem::take(&mut *l))
        .unwrap_or_default()
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// `BPF_PROG_TYPE_XDP`.
pub const PROG_TYPE_XDP: u32 = 6;
/// `BPF_PROG_TYPE_UNSPEC`: libbpf did not recognise the section name.
pub const PROG_TYPE_UNSPEC: u32 = 0;

/// The opened library.
pub struct Lib {
    f: Fns,
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
    // SAFETY: a non-null symbol address, read as the function pointer type the caller vouches for
    // (the same size as a data pointer on the platforms dlopen exists on).
    Ok(unsafe { std::mem::transmute_copy::<Ptr, T>(&p) })
}

impl Lib {
    /// Opens `libbpf.so.1`.
    pub fn open() -> Result<Self, String> {
        let name = c"libbpf.so.1";
        // SAFETY: a NUL-terminated library name; the handle is never closed (the library stays
        // for the life of the process, as the resolved pointers need).
        let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW) };
        if h.is_null() {
            return Err("cannot dlopen libbpf.so.1 (install libbpf1)".into());
        }
        // SAFETY: each type is the C declaration of the named libbpf 1.x function.
        let f = unsafe {
            Fns {
                open_file: sym(h, "bpf_object__open_file")?,
                close: sym(h, "bpf_object__close")?,
                load: sym(h, "bpf_object__load")?,
                next_program: sym(h, "bpf_object__next_program")?,
                prog_name: sym(h, "bpf_program__name")?,
                prog_section: sym(h, "bpf_program__section_name")?,
                prog_type: sym(h, "bpf_program__type")?,
                prog_set_type: sym(h, "bpf_program__set_type")?,
                prog_set_autoload: sym(h, "bpf_program__set_autoload")?,
                prog_set_log_buf: sym(h, "bpf_program__set_log_buf")?,
                prog_fd: sym(h, "bpf_program__fd")?,
                next_map: sym(h, "bpf_object__next_map")?,
                map_name: sym(h, "bpf_map__name")?,
                map_set_pin_path: sym(h, "bpf_map__set_pin_path")?,
                map_max_entries: sym(h, "bpf_map__max_entries")?,
                map_set_max_entries: sym(h, "bpf_map__set_max_entries")?,
                map_fd: sym(h, "bpf_map__fd")?,
                map_inner: sym(h, "bpf_map__inner_map")?,
                map_set_inner_fd: sym(h, "bpf_map__set_inner_map_fd")?,
                map_set_autocreate: sym(h, "bpf_map__set_autocreate")?,
                map_type: sym(h, "bpf_map__type")?,
                map_key_size: sym(h, "bpf_map__key_size")?,
                map_value_size: sym(h, "bpf_map__value_size")?,
                map_create: sym(h, "bpf_map_create")?,
                next_key: sym(h, "bpf_map_get_next_key")?,
                lookup: sym(h, "bpf_map_lookup_elem")?,
                lookup_batch: sym(h, "bpf_map_lookup_batch")?,
                update: sym(h, "bpf_map_update_elem")?,
                delete: sym(h, "bpf_map_delete_elem")?,
                test_run: sym(h, "bpf_prog_test_run_opts")?,
                possible_cpus: sym(h, "libbpf_num_possible_cpus")?,
                set_print: sym(h, "libbpf_set_print")?,
            }
        };
        let cb: Option<PrintFn> = if cfg!(target_arch = "x86_64") {
            Some(print)
        } else {
            None
        };
        // SAFETY: `print` has the callback's C signature (see PrintFn); None silences libbpf.
        unsafe { (f.set_print)(cb) };
        Ok(Self { f })
    }

    /// Whether this process may use bpf(): creates and closes a one-entry array map.
    pub fn probe(&self) -> Result<(), String> {
        // SAFETY: plain values; a null name and null options are allowed.
        let fd = unsafe { (self.f.map_create)(2, std::ptr::null(), 4, 4, 1, std::ptr::null()) };
        if fd < 0 {
            return Err(format!(
                "bpf(BPF_MAP_CREATE) is not permitted here: {}",
                std::io::Error::from_raw_os_error(-fd)
            ));
        }
        // SAFETY: a descriptor this function owns.
        unsafe { libc::close(fd) };
        Ok(())
    }

    /// CPUs the kernel keeps a per-CPU value for.
    pub fn possible_cpus(&self) -> usize {
        // SAFETY: no arguments.
        usize::try_from(unsafe { (self.f.possible_cpus)() })
            .unwrap_or(1)
            .max(1)
    }

    fn open_object(&self, path: &str) -> Result<Object<'_>, String> {
        let c = CString::new(path).map_err(|e| e.to_string())?;
        // SAFETY: a NUL-terminated path; null options are the defaults.
        let obj = unsafe { (self.f.open_file)(c.as_ptr(), std::ptr::null()) };
        if obj.is_null() {
            return Err(format!(
                "libbpf cannot open the object ({}): {}",
                std::io::Error::from_raw_os_error(errno()),
                last_lines(&take_log(), 2)
            ));
        }
        Ok(Object { lib: self, obj })
    }

    /// The programs of object `path`: (function, section, libbpf's program type).
    pub fn programs(&self, path: &str) -> Result<Vec<(String, String, u32)>, String> {
        let o = self.open_object(path)?;
        Ok(o.progs()
            .into_iter()
            .map(|p| {
                // SAFETY: `p` is a program of the open object `o`.
                unsafe {
                    (
                        cstr((self.f.prog_name)(p)),
                        cstr((self.f.prog_section)(p)),
                        (self.f.prog_type)(p),
                    )
                }
            })
            .collect())
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

/// The last `n` non-empty lines of `text`, joined with " | ".
pub fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join(" | ")
}

/// An open `bpf_object` (closed on drop: programs unloaded, maps freed).
struct Object<'l> {
    lib: &'l Lib,
    obj: Ptr,
}

impl Object<'_> {
    fn progs(&self) -> Vec<Ptr> {
        let mut out = Vec::new();
        let mut p = std::ptr::null_mut();
        loop {
            // SAFETY: `obj` is open; `p` is null or its previous program.
            p = unsafe { (self.lib.f.next_program)(self.obj, p) };
            if p.is_null() {
                return out;
            }
            out.push(p);
        }
    }
}

impl Drop for Object<'_> {
    fn drop(&mut self) {
        // SAFETY: the object is open and dropped once.
        unsafe { (self.lib.f.close)(self.obj) };
    }
}

/// A map of a loaded object.
#[derive(Clone, Debug)]
pub struct KMap {
    /// Name as libbpf gives it (global data: object-name prefix + section name).
    pub name: String,
    /// `enum bpf_map_type`.
    pub map_type: u32,
    /// Key bytes.
    pub key_size: u32,
    /// Value bytes.
    pub value_size: u32,
    fd: c_int,
}

/// One program loaded into the kernel with its object's maps.
pub struct Loaded<'l> {
    obj: Object<'l>,
    fd: c_int,
    /// The object's maps.
    pub maps: Vec<KMap>,
    /// Inner maps made for maps of maps that declare none ([`INNER`]).
    inner_fds: Vec<c_int>,
}

impl Drop for Loaded<'_> {
    fn drop(&mut self) {
        for &fd in &self.inner_fds {
            // SAFETY: a descriptor this value owns, closed once.
            unsafe { libc::close(fd) };
        }
    }
}

/// The inner map a map of maps gets when its definition names none (its own loader makes one,
/// as the selftests' `test_maps.c` does for `test_map_in_map.c`): an array of 4-byte keys and
/// values with this many entries, in entry 0. The engine's side does the same.
pub const INNER: u32 = 2;

/// The entry of a program array a program named `classifier_<i>` goes in: the selftests' tail
/// call tests (`prog_tests/tailcalls.c`) fill `jmp_table` that way from user space, and the
/// harness does the same on both sides, loading those programs beside the one under test.
pub fn tail_slot(func: &str) -> Option<u32> {
    func.strip_prefix("classifier_")?.parse().ok()
}

/// The result of one `BPF_PROG_TEST_RUN`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestRun {
    /// The program's return value.
    pub retval: u32,
    /// Metadata bytes in front of the frame.
    pub meta: Vec<u8>,
    /// The frame after the program.
    pub frame: Vec<u8>,
}

impl Lib {
    /// Loads function `func` of object `path` (libbpf loads the object's other programs too unless
    /// told not to: here only `func` is loaded, so a neighbour the kernel refuses does not decide
    /// this program's fate). A section libbpf does not know is loaded as XDP, as a libbpf user
    /// would with `bpf_program__set_type`. The error is the verifier's or libbpf's last words.
    pub fn load(&self, path: &str, func: &str) -> Result<Loaded<'_>, String> {
        let obj = self.open_object(path)?;
        let mut log = vec![0u8; 4 << 20];
        let mut found = false;
        let names: Vec<String> = obj
            .progs()
            .into_iter()
            // SAFETY: programs of the open object.
            .map(|p| unsafe { cstr((self.f.prog_name)(p)) })
            .collect();
        // With tail call targets, every program loaded is loaded as XDP (the selftests' are tc
        // programs that read nothing of their context).
        let tails = names.iter().any(|n| tail_slot(n).is_some());
        for (p, name) in obj.progs().into_iter().zip(&names) {
            // SAFETY: `p` is a program of the open object; the log buffer outlives the load.
            unsafe {
                let mine = name == func;
                let load = mine || tail_slot(name).is_some();
                (self.f.prog_set_autoload)(p, load);
                if load && (tails || (self.f.prog_type)(p) == PROG_TYPE_UNSPEC) {
                    (self.f.prog_set_type)(p, PROG_TYPE_XDP);
                }
                if mine {
                    found = true;
                    (self.f.prog_set_log_buf)(p, log.as_mut_ptr().cast(), log.len());
                }
            }
        }
        if !found {
            return Err(format!("libbpf sees no program {func}"));
        }
        // Maps declared for pinning by name would be shared with the previous load (and need a
        // BPF file system): every load here gets maps of its own. Maps declared without a size
        // are sized by their programs' loaders before the load (xdp-tools and the samples give
        // them a multiple of the CPU count); here they get 64 entries per CPU, more than any of
        // those loaders asks for on this machine.
        let sized = unsized_entries(self.possible_cpus());
        let mut inner = Vec::new();
        for m in maps_raw(self, &obj) {
            // SAFETY: a map of the open, not yet loaded object; a null path clears pinning.
            unsafe {
                (self.f.map_set_pin_path)(m, std::ptr::null());
                if (self.f.map_max_entries)(m) == 0 {
                    (self.f.map_set_max_entries)(m, sized);
                }
            }
            inner.extend(self.give_inner_map(m));
        }
        let inner_fds: Vec<c_int> = inner.iter().map(|i| i.1).collect();
        take_log();
        // SAFETY: the object is open; its programs' log buffers are alive.
        let r = unsafe { (self.f.load)(obj.obj) };
        if r != 0 {
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            let verifier = String::from_utf8_lossy(&log[..end]).into_owned();
            let printed = take_log();
            if std::env::var_os("BPFDIFF_VERBOSE").is_some() {
                eprintln!("--- {path} {func}: libbpf said\n{printed}\n--- verifier log\n{verifier}");
            }
            let why = if verifier.trim().is_empty() {
                last_lines(&printed, 2)
            } else {
                last_lines(&verifier, 2)
            };
            return Err(format!("errno {}: {why}", -r));
        }
        let prog = obj
            .progs()
            .into_iter()
            // SAFETY: programs of the open object.
            .find(|&p| unsafe { cstr((self.f.prog_name)(p)) } == func)
            .ok_or("the program vanished")?;
        // SAFETY: a loaded program of the open object.
        let fd = unsafe { (self.f.prog_fd)(prog) };
        let maps = self.maps_of(&obj);
        self.fill_jump_tables(&obj, &maps);
        for (m, inner_fd) in inner {
            let key = 0u32;
            // SAFETY: a map of the loaded object; a 4-byte key and a descriptor as value.
            unsafe {
                (self.f.update)(
                    (self.f.map_fd)(m),
                    std::ptr::from_ref(&key).cast(),
                    std::ptr::from_ref(&inner_fd).cast(),
                    0,
                )
            };
        }
        Ok(Loaded {
            obj,
            fd,
            maps,
            inner_fds,
        })
    }

    /// Puts every loaded `classifier_<i>` into entry `i` of every program array ([`tail_slot`]).
    fn fill_jump_tables(&self, obj: &Object<'_>, maps: &[KMap]) {
        for p in obj.progs() {
            // SAFETY: programs of the loaded object (fd -1 for one not loaded).
            let (name, fd) = unsafe { (cstr((self.f.prog_name)(p)), (self.f.prog_fd)(p)) };
            let Some(i) = tail_slot(&name).filter(|_| fd >= 0) else {
                continue;
            };
            for m in maps.iter().filter(|m| m.map_type == 3) {
                // SAFETY: a 4-byte key and a program descriptor as value; an index beyond the
                // map is refused by the kernel, nothing else happens.
                unsafe {
                    (self.f.update)(
                        m.fd,
                        std::ptr::from_ref(&i).cast(),
                        std::ptr::from_ref(&fd).cast(),
                        0,
                    )
                };
            }
        }
    }

    /// For a map of maps of 4-byte keys that declares no inner map: a new [`INNER`] map set as
    /// its inner map (to be put in entry 0 after the load). One whose declared inner map is a
    /// perf event array without `max_entries` is not created: libbpf 1.1 creates that inner
    /// map with 0 entries, which the kernel refuses, and fails the whole object (later libbpf
    /// sizes it from the CPU count). The program under test still loads if it does not use it.
    fn give_inner_map(&self, m: Ptr) -> Option<(Ptr, c_int)> {
        // SAFETY: a map of the open object; its inner map template (fields read only).
        let (ty, ks, inner) = unsafe {
            (
                (self.f.map_type)(m),
                (self.f.map_key_size)(m),
                (self.f.map_inner)(m),
            )
        };
        if !inner.is_null() {
            // SAFETY: as above; autocreate is set before the load.
            unsafe {
                if (self.f.map_type)(inner) == 4 && (self.f.map_max_entries)(inner) == 0 {
                    (self.f.map_set_autocreate)(m, false);
                }
            }
            return None;
        }
        if !matches!(ty, 12 | 13) || ks != 4 {
            return None;
        }
        // SAFETY: plain values; a null name and null options are allowed.
        let fd = unsafe { (self.f.map_create)(2, std::ptr::null(), 4, 4, INNER, std::ptr::null()) };
        // SAFETY: a map of the open, not yet loaded object and a map descriptor.
        (fd >= 0 && unsafe { (self.f.map_set_inner_fd)(m, fd) } == 0).then_some((m, fd))
    }

    fn maps_of(&self, obj: &Object<'_>) -> Vec<KMap> {
        maps_raw(self, obj)
            .into_iter()
            // SAFETY: maps of the loaded object.
            .map(|m| unsafe {
                KMap {
                    name: cstr((self.f.map_name)(m)),
                    map_type: (self.f.map_type)(m),
                    key_size: (self.f.map_key_size)(m),
                    value_size: (self.f.map_value_size)(m),
                    fd: (self.f.map_fd)(m),
                }
            })
            .collect()
    }
}

/// The maps of an open object.
fn maps_raw(lib: &Lib, obj: &Object<'_>) -> Vec<Ptr> {
    let mut out = Vec::new();
    let mut m = std::ptr::null_mut();
    loop {
        // SAFETY: the object is open; `m` is null or its previous map.
        m = unsafe { (lib.f.next_map)(obj.obj, m) };
        if m.is_null() {
            return out;
        }
        out.push(m);
    }
}

impl Loaded<'_> {
    fn f(&self) -> &Fns {
        &self.obj.lib.f
    }

    /// Runs the program once on `frame` (received on the loopback device's queue 0, the test
    /// run's default), or the errno the kernel refuses the run with.
    pub fn test_run(&self, frame: &[u8]) -> Result<TestRun, i32> {
        let len = u32::try_from(frame.len()).map_err(|_| libc::E2BIG)?;
        let ctx_in = XdpMd {
            data_end: len,
            ..XdpMd::default()
        };
        let mut ctx_out = XdpMd::default();
        let mut out = vec![0u8; 8192];
        let mut o = TestRunOpts {
            sz: std::mem::size_of::<TestRunOpts>(),
            data_in: frame.as_ptr() as usize,
            data_out: out.as_mut_ptr() as usize,
            data_size_in: len,
            data_size_out: out.len() as u32,
            ctx_in: std::ptr::from_ref(&ctx_in) as usize,
            ctx_out: std::ptr::from_mut(&mut ctx_out) as usize,
            ctx_size_in: std::mem::size_of::<XdpMd>() as u32,
            ctx_size_out: std::mem::size_of::<XdpMd>() as u32,
            repeat: 1,
            ..TestRunOpts::default()
        };
        // SAFETY: every pointer in `o` is valid for the size next to it for the whole call.
        let r = unsafe { (self.f().test_run)(self.fd, &mut o) };
        if r != 0 {
            return Err(-r);
        }
        out.truncate(o.data_size_out as usize);
        let meta = (ctx_out.data as usize).min(out.len());
        let frame = out.split_off(meta);
        Ok(TestRun {
            retval: o.retval,
            meta: out,
            frame,
        })
    }

    /// Every entry of `m`, sorted by key: (key, value; per-CPU maps: CPU 0's copy). Read in
    /// batches (one syscall for thousands of entries), one key at a time where batches fail.
    pub fn entries(&self, m: &KMap, cpus: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut out = self
            .entries_batched(m, cpus)
            .unwrap_or_else(|| self.entries_one_by_one(m, cpus));
        out.sort();
        out
    }

    /// Bytes of one entry's value as the kernel hands it out: per-CPU maps give every possible
    /// CPU's copy, each rounded up to 8 bytes.
    fn value_stride(m: &KMap, cpus: usize) -> usize {
        let vs = m.value_size as usize;
        if matches!(m.map_type, 5 | 6 | 10) {
            vs.div_ceil(8) * 8 * cpus
        } else {
            vs
        }
    }

    fn entries_batched(&self, m: &KMap, cpus: usize) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
        const BATCH: usize = 4096;
        let (ks, vs) = (m.key_size as usize, m.value_size as usize);
        let stride = Self::value_stride(m, cpus);
        let mut keys = vec![0u8; ks * BATCH];
        let mut values = vec![0u8; stride * BATCH];
        let mut token_in = vec![0u8; ks.max(8)];
        let mut token_out = vec![0u8; ks.max(8)];
        let mut out = Vec::new();
        let mut first = true;
        loop {
            let mut n = BATCH as u32;
            let tin = if first {
                std::ptr::null()
            } else {
                token_in.as_ptr().cast()
            };
            // SAFETY: the tokens have room for a key (at least 8 bytes), keys and values for
            // BATCH entries of the map's sizes; null options are the defaults.
            let r = unsafe {
                (self.f().lookup_batch)(
                    m.fd,
                    tin,
                    token_out.as_mut_ptr().cast(),
                    keys.as_mut_ptr().cast(),
                    values.as_mut_ptr().cast(),
                    &mut n,
                    std::ptr::null(),
                )
            };
            if r != 0 && r != -libc::ENOENT {
                return None;
            }
            for i in 0..(n as usize).min(BATCH) {
                out.push((keys[i * ks..][..ks].to_vec(), values[i * stride..][..vs].to_vec()));
            }
            if r == -libc::ENOENT {
                return Some(out);
            }
            std::mem::swap(&mut token_in, &mut token_out);
            first = false;
        }
    }

    fn entries_one_by_one(&self, m: &KMap, cpus: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        let ks = m.key_size as usize;
        let vs = m.value_size as usize;
        let mut value = vec![0u8; Self::value_stride(m, cpus)];
        let mut out = Vec::new();
        let mut key: Option<Vec<u8>> = None;
        loop {
            let mut next = vec![0u8; ks];
            let prev = key.as_ref().map_or(std::ptr::null(), |k| k.as_ptr().cast());
            // SAFETY: `prev` is null or `ks` bytes, `next` has room for `ks` bytes.
            if unsafe { (self.f().next_key)(m.fd, prev, next.as_mut_ptr().cast()) } != 0 {
                break;
            }
            // SAFETY: `value` has room for every CPU's copy.
            let r = unsafe { (self.f().lookup)(m.fd, next.as_ptr().cast(), value.as_mut_ptr().cast()) };
            if r == 0 {
                out.push((next.clone(), value[..vs].to_vec()));
            }
            key = Some(next);
        }
        out
    }

    /// Puts `m` back from `now` (what [`Loaded::entries`] read after the last run) to `initial`
    /// (what it read after the load), writing only what differs: hash entries not in `initial`
    /// are deleted, changed or missing ones written (per-CPU maps: CPU 0's copy, the others
    /// zero, as a run pinned to CPU 0 leaves them). Both lists are sorted by key.
    pub fn restore(&self, m: &KMap, initial: &[(Vec<u8>, Vec<u8>)], now: &[(Vec<u8>, Vec<u8>)], cpus: usize) {
        if initial == now {
            return;
        }
        let is_hash = matches!(m.map_type, 1 | 5 | 9 | 10);
        fn find<'a>(list: &'a [(Vec<u8>, Vec<u8>)], k: &[u8]) -> Option<&'a Vec<u8>> {
            list.binary_search_by(|e| e.0.as_slice().cmp(k))
                .ok()
                .map(|i| &list[i].1)
        }
        if is_hash {
            for (k, _) in now.iter().filter(|(k, _)| find(initial, k).is_none()) {
                // SAFETY: a key of the map's key size.
                unsafe { (self.f().delete)(m.fd, k.as_ptr().cast()) };
            }
        }
        let vs = m.value_size as usize;
        let mut value = vec![0u8; Self::value_stride(m, cpus)];
        for (k, v) in initial {
            if find(now, k) == Some(v) {
                continue;
            }
            value.fill(0);
            value[..vs].copy_from_slice(v);
            // SAFETY: key and value of the map's sizes (all CPUs' copies for per-CPU maps).
            unsafe { (self.f().update)(m.fd, k.as_ptr().cast(), value.as_ptr().cast(), 0) };
        }
    }
}
