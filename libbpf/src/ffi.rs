//! The C side: the libbpf entry points used, resolved once from `libbpf.so.1`, and the structures
//! they take. Each signature is the one `libbpf.h` and `bpf.h` of libbpf 1.x declare.

use std::ffi::{c_char, c_int, c_void, CString};

use crate::Error;

/// A libbpf object, program or map (`struct bpf_object *`, ...), opaque here.
pub(crate) type Ptr = *mut c_void;

/// `libbpf_print_fn_t`: the `va_list` travels as a pointer (the x86-64 calling convention passes
/// a `va_list` argument as the address of its one-element array).
pub(crate) type PrintFn = unsafe extern "C" fn(c_int, *const c_char, *mut c_void) -> c_int;

/// The entry points, resolved once.
pub(crate) struct Fns {
    pub open_file: unsafe extern "C" fn(*const c_char, *const c_void) -> Ptr,
    pub close: unsafe extern "C" fn(Ptr),
    pub load: unsafe extern "C" fn(Ptr) -> c_int,
    pub next_program: unsafe extern "C" fn(Ptr, Ptr) -> Ptr,
    pub prog_name: unsafe extern "C" fn(Ptr) -> *const c_char,
    pub prog_section: unsafe extern "C" fn(Ptr) -> *const c_char,
    pub prog_type: unsafe extern "C" fn(Ptr) -> u32,
    pub prog_set_type: unsafe extern "C" fn(Ptr, u32) -> c_int,
    pub prog_set_autoload: unsafe extern "C" fn(Ptr, bool) -> c_int,
    pub prog_set_log_buf: unsafe extern "C" fn(Ptr, *mut c_char, usize) -> c_int,
    pub prog_set_log_level: unsafe extern "C" fn(Ptr, u32) -> c_int,
    pub prog_fd: unsafe extern "C" fn(Ptr) -> c_int,
    pub next_map: unsafe extern "C" fn(Ptr, Ptr) -> Ptr,
    pub map_name: unsafe extern "C" fn(Ptr) -> *const c_char,
    pub map_set_pin_path: unsafe extern "C" fn(Ptr, *const c_char) -> c_int,
    pub map_max_entries: unsafe extern "C" fn(Ptr) -> u32,
    pub map_set_max_entries: unsafe extern "C" fn(Ptr, u32) -> c_int,
    pub map_fd: unsafe extern "C" fn(Ptr) -> c_int,
    pub map_inner: unsafe extern "C" fn(Ptr) -> Ptr,
    pub map_set_inner_fd: unsafe extern "C" fn(Ptr, c_int) -> c_int,
    pub map_set_autocreate: unsafe extern "C" fn(Ptr, bool) -> c_int,
    pub map_type: unsafe extern "C" fn(Ptr) -> u32,
    pub map_key_size: unsafe extern "C" fn(Ptr) -> u32,
    pub map_value_size: unsafe extern "C" fn(Ptr) -> u32,
    pub map_create: unsafe extern "C" fn(u32, *const c_char, u32, u32, u32, *const c_void) -> c_int,
    pub next_key: unsafe extern "C" fn(c_int, *const c_void, *mut c_void) -> c_int,
    pub lookup: unsafe extern "C" fn(c_int, *const c_void, *mut c_void) -> c_int,
    pub lookup_batch: unsafe extern "C" fn(
        c_int,
        *const c_void,
        *mut c_void,
        *mut c_void,
        *mut c_void,
        *mut u32,
        *const c_void,
    ) -> c_int,
    pub update: unsafe extern "C" fn(c_int, *const c_void, *const c_void, u64) -> c_int,
    pub delete: unsafe extern "C" fn(c_int, *const c_void) -> c_int,
    pub test_run: unsafe extern "C" fn(c_int, *mut TestRunOpts) -> c_int,
    pub possible_cpus: unsafe extern "C" fn() -> c_int,
    pub set_print: unsafe extern "C" fn(Option<PrintFn>) -> Option<PrintFn>,
}

/// `struct bpf_test_run_opts` of libbpf 1.x (`sz` first: libbpf checks the size it is given).
#[repr(C)]
#[derive(Default)]
pub(crate) struct TestRunOpts {
    pub sz: usize,
    pub data_in: usize,
    pub data_out: usize,
    pub data_size_in: u32,
    pub data_size_out: u32,
    pub ctx_in: usize,
    pub ctx_out: usize,
    pub ctx_size_in: u32,
    pub ctx_size_out: u32,
    pub retval: u32,
    pub repeat: c_int,
    pub duration: u32,
    pub flags: u32,
    pub cpu: u32,
    pub batch_size: u32,
}

/// `struct xdp_md`: the test run's context in and out.
#[repr(C)]
#[derive(Default, Clone, Copy)]
pub(crate) struct XdpMd {
    pub data: u32,
    pub data_end: u32,
    pub data_meta: u32,
    pub ingress_ifindex: u32,
    pub rx_queue_index: u32,
    pub egress_ifindex: u32,
}

/// Resolves `name` in `handle` as a function pointer of type `T`.
///
/// # Safety
///
/// `handle` came from `dlopen`, and `T` is the function pointer type of the symbol's C
/// declaration.
unsafe fn sym<T: Copy>(handle: Ptr, name: &'static str) -> Result<T, Error> {
    let c = CString::new(name).map_err(|_| Error::MissingSymbol(name))?;
    // SAFETY: `handle` came from dlopen (the caller's promise) and `c` is a NUL-terminated name.
    let p = unsafe { libc::dlsym(handle, c.as_ptr()) };
    if p.is_null() {
        return Err(Error::MissingSymbol(name));
    }
    // SAFETY: a non-null symbol address, read as the function pointer type the caller vouches for
    // (the same size as a data pointer on the platforms dlopen exists on).
    Ok(unsafe { std::mem::transmute_copy::<Ptr, T>(&p) })
}

/// Opens `libbpf.so.1` and resolves every entry point. The handle is never closed: the library
/// stays for the life of the process, as the resolved pointers need.
pub(crate) fn open() -> Result<Fns, Error> {
    // SAFETY: a NUL-terminated library name.
    let h = unsafe { libc::dlopen(c"libbpf.so.1".as_ptr(), libc::RTLD_NOW) };
    if h.is_null() {
        return Err(Error::NoLibrary);
    }
    // SAFETY: `h` came from dlopen; each type is the C declaration of the named libbpf 1.x
    // function.
    unsafe {
        Ok(Fns {
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
            prog_set_log_level: sym(h, "bpf_program__set_log_level")?,
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
        })
    }
}
