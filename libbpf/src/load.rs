//! Loading one program of an object into the kernel: the choice of what libbpf loads, its type,
//! the maps' preparation, the verifier's log, and after the load the program arrays and inner
//! maps filled.

use std::ffi::c_int;
use std::fmt;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;

use crate::ffi::Ptr;
use crate::maps::KMap;
use crate::{
    last_lines, owned_fd, print, tail_slot, Error, Lib, Object, PrintLevel, Printed, INNER, PROG_TYPE_UNSPEC,
    PROG_TYPE_XDP,
};

/// Bytes of verifier log kept.
const LOG_BYTES: usize = 4 << 20;

/// `BPF_MAP_TYPE_ARRAY`.
const MAP_ARRAY: u32 = 2;
/// `BPF_MAP_TYPE_PROG_ARRAY`.
const MAP_PROG_ARRAY: u32 = 3;
/// `BPF_MAP_TYPE_PERF_EVENT_ARRAY`.
const MAP_PERF_EVENT_ARRAY: u32 = 4;
/// `BPF_MAP_TYPE_ARRAY_OF_MAPS` and `BPF_MAP_TYPE_HASH_OF_MAPS`.
const MAPS_OF_MAPS: [u32; 2] = [12, 13];

/// What the verifier writes to the program's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerifierLog {
    /// Nothing while it loads; on a refusal libbpf loads again with log level 1 (the verifier's
    /// reasons).
    OnFailure,
    /// `BPF_LOG_STATS`: the verifier's errors and its statistics (`processed N insns ...`), not
    /// the trace of every path.
    Stats,
}

/// How [`Lib::load`] loads a program.
#[derive(Debug, Clone, Copy)]
pub struct LoadOptions<'a> {
    /// The function to load (the object's other programs are not loaded, so that a neighbour
    /// the kernel refuses does not decide this program's fate).
    pub func: &'a str,
    /// Load it as XDP whatever its section says (libbpf's `bpf_program__set_type`); a section
    /// libbpf does not know is loaded as XDP anyway.
    pub as_xdp: bool,
    /// Load the object's `classifier_<i>` programs too, every program as XDP, and put each into
    /// entry `i` of every program array ([`crate::tail_slot`]).
    pub tail_calls: bool,
    /// Give a map of maps of 4-byte keys that declares no inner map an [`INNER`] array as its
    /// inner map, in entry 0; and leave uncreated one whose declared inner map is a perf event
    /// array without `max_entries` (libbpf 1.1 creates that inner map with 0 entries, which the
    /// kernel refuses, and fails the whole object; later libbpf sizes it from the CPU count).
    pub inner_maps: bool,
    /// `max_entries` of maps declared without one (their own loaders size them).
    pub unsized_entries: u32,
    /// The verifier's log.
    pub log: VerifierLog,
}

/// A refused load: the errno, the verifier's log and libbpf's messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The errno `bpf_object__load` returned.
    pub errno: i32,
    /// The verifier's log of the program (empty when libbpf refused before the verifier ran).
    pub verifier_log: String,
    /// What libbpf printed from the object's opening to the refusal.
    pub said: Printed,
}

impl Refusal {
    /// The verifier's log, or, when it is empty, libbpf's messages of level `up_to` or more
    /// severe (its reasons for refusing before the verifier ran).
    #[must_use]
    pub fn reasons(&self, up_to: PrintLevel) -> String {
        if self.verifier_log.trim().is_empty() {
            self.said.text(up_to)
        } else {
            self.verifier_log.clone()
        }
    }
}

impl fmt::Display for Refusal {
    /// `errno N: ` and the last two lines of [`Refusal::reasons`] (all of libbpf's levels).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = self.reasons(PrintLevel::Debug);
        write!(f, "errno {}: {}", self.errno, last_lines(&why, 2).one_line())
    }
}

/// One program loaded into the kernel with its object's maps (all released on drop).
pub struct Loaded<'l> {
    pub(crate) obj: Object<'l>,
    pub(crate) fd: c_int,
    /// The object's maps.
    pub maps: Vec<KMap>,
    /// The verifier's log of the program.
    pub verifier_log: String,
    /// Inner maps made for maps of maps that declare none.
    _inner: Vec<OwnedFd>,
}

impl Lib {
    /// Loads program `opts.func` of the object at `path` as `opts` says, with its maps cleared of
    /// pinning (every load gets maps of its own, and needs no BPF file system).
    ///
    /// # Errors
    ///
    /// [`Error::BadPath`], [`Error::Open`], [`Error::NoProgram`], or [`Error::Refused`] with the
    /// verifier's or libbpf's words.
    pub fn load(&self, path: &Path, opts: &LoadOptions<'_>) -> Result<Loaded<'_>, Error> {
        let obj = self.open_object(path)?;
        let mut log = vec![0u8; LOG_BYTES];
        let prog = self
            .choose(&obj, opts, &mut log)
            .ok_or_else(|| Error::NoProgram(opts.func.to_string()))?;
        let inner = self.prepare_maps(&obj, opts);
        // SAFETY: the object is open; the chosen program's log buffer outlives the call.
        let r = unsafe { (self.f.load)(obj.obj) };
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let verifier_log = String::from_utf8_lossy(&log[..end]).into_owned();
        if r != 0 {
            return Err(Error::Refused(Refusal {
                errno: -r,
                verifier_log,
                said: print::take(),
            }));
        }
        // SAFETY: a loaded program of the open object.
        let fd = unsafe { (self.f.prog_fd)(prog) };
        let maps = self.maps_of(&obj);
        if opts.tail_calls {
            self.fill_jump_tables(&obj, &maps);
        }
        for (m, inner_fd) in &inner {
            let (key, value) = (0u32, inner_fd.as_raw_fd());
            // SAFETY: a map of the loaded object; a 4-byte key and a descriptor as value.
            unsafe {
                (self.f.update)(
                    (self.f.map_fd)(*m),
                    std::ptr::from_ref(&key).cast(),
                    std::ptr::from_ref(&value).cast(),
                    0,
                )
            };
        }
        Ok(Loaded {
            obj,
            fd,
            maps,
            verifier_log,
            _inner: inner.into_iter().map(|i| i.1).collect(),
        })
    }

    /// Marks what `opts` loads, sets the types, gives `opts.func` the log buffer `log`; the
    /// program `opts.func`, if the object has it.
    fn choose(&self, obj: &Object<'_>, opts: &LoadOptions<'_>, log: &mut [u8]) -> Option<Ptr> {
        let progs: Vec<(Ptr, String)> = obj
            .programs()
            .into_iter()
            .map(|p| (p, obj.program_name(p)))
            .collect();
        // With tail call targets, every program loaded is loaded as XDP (the selftests' are tc
        // programs that read nothing of their context).
        let tails = opts.tail_calls && progs.iter().any(|(_, n)| tail_slot(n).is_some());
        let mut chosen = None;
        for (p, name) in &progs {
            let mine = name == opts.func;
            let load = mine || (opts.tail_calls && tail_slot(name).is_some());
            // SAFETY: `p` is a program of the open, not yet loaded object; the log buffer
            // outlives the load (the caller's).
            unsafe {
                (self.f.prog_set_autoload)(*p, load);
                if load && (opts.as_xdp || tails || (self.f.prog_type)(*p) == PROG_TYPE_UNSPEC) {
                    (self.f.prog_set_type)(*p, PROG_TYPE_XDP);
                }
                if mine {
                    chosen = Some(*p);
                    (self.f.prog_set_log_buf)(*p, log.as_mut_ptr().cast(), log.len());
                    if opts.log == VerifierLog::Stats {
                        (self.f.prog_set_log_level)(*p, 4);
                    }
                }
            }
        }
        chosen
    }

    /// Clears pinning, sizes maps declared without `max_entries`, and with `opts.inner_maps`
    /// gives inner maps: the maps of maps given one, with their inner map's descriptor.
    fn prepare_maps(&self, obj: &Object<'_>, opts: &LoadOptions<'_>) -> Vec<(Ptr, OwnedFd)> {
        let mut inner = Vec::new();
        for m in obj.maps() {
            // SAFETY: a map of the open, not yet loaded object; a null path clears pinning.
            unsafe {
                (self.f.map_set_pin_path)(m, std::ptr::null());
                if (self.f.map_max_entries)(m) == 0 {
                    (self.f.map_set_max_entries)(m, opts.unsized_entries);
                }
            }
            if opts.inner_maps {
                inner.extend(self.give_inner_map(m));
            }
        }
        inner
    }

    /// See [`LoadOptions::inner_maps`].
    fn give_inner_map(&self, m: Ptr) -> Option<(Ptr, OwnedFd)> {
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
                if (self.f.map_type)(inner) == MAP_PERF_EVENT_ARRAY && (self.f.map_max_entries)(inner) == 0 {
                    (self.f.map_set_autocreate)(m, false);
                }
            }
            return None;
        }
        if !MAPS_OF_MAPS.contains(&ty) || ks != 4 {
            return None;
        }
        // SAFETY: plain values; a null name and null options are allowed.
        let fd = unsafe { (self.f.map_create)(MAP_ARRAY, std::ptr::null(), 4, 4, INNER, std::ptr::null()) };
        let fd = owned_fd(fd).ok()?;
        // SAFETY: a map of the open, not yet loaded object and a map descriptor.
        (unsafe { (self.f.map_set_inner_fd)(m, fd.as_raw_fd()) } == 0).then_some((m, fd))
    }

    /// Puts every loaded `classifier_<i>` into entry `i` of every program array.
    fn fill_jump_tables(&self, obj: &Object<'_>, maps: &[KMap]) {
        for p in obj.programs() {
            // SAFETY: a program of the loaded object (fd -1 for one not loaded).
            let fd = unsafe { (self.f.prog_fd)(p) };
            let Some(i) = tail_slot(&obj.program_name(p)).filter(|_| fd >= 0) else {
                continue;
            };
            for m in maps.iter().filter(|m| m.map_type == MAP_PROG_ARRAY) {
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

    /// The maps of a loaded object.
    fn maps_of(&self, obj: &Object<'_>) -> Vec<KMap> {
        obj.maps()
            .into_iter()
            // SAFETY: maps of the loaded object; the name is a string libbpf owns.
            .map(|m| unsafe {
                KMap {
                    name: crate::cstr((self.f.map_name)(m)),
                    map_type: (self.f.map_type)(m),
                    key_size: (self.f.map_key_size)(m),
                    value_size: (self.f.map_value_size)(m),
                    max_entries: (self.f.map_max_entries)(m),
                    fd: (self.f.map_fd)(m),
                }
            })
            .collect()
    }
}
