//! # onic-bpf
//!
//! An eBPF engine for XDP programs built with `clang -O2 -target bpf`: it loads the object, creates
//! its maps, and runs the chosen program on the frames of the driver core's XDP path
//! ([`onic_core::xdp`]) through the same [`RawXdpProgram`] seam the Linux module uses for kernel
//! programs, so the verdicts drive the core's dispatch unchanged. `no_std` + `alloc`: the host
//! tools and the bare-metal image run the same code.
//!
//! ```text
//! let loaded = onic_bpf::load(&elf_bytes, Some("xdp"), &LoadOptions::default())?;
//! let mut prog = XdpEngine::new(loaded, host);   // a RawXdpProgram
//! // the `prog` of an XdpDispatch, polled as any program; prog.maps() afterwards
//! ```
//!
//! ## Pieces
//!
//! - [`load`] ([`elf`], [`btf`]): sections, programs (several per object, chosen by section or
//!   function name), BTF-defined maps (`.maps`), legacy maps (`maps`), global data (`.rodata`,
//!   `.data`, `.bss` as one-entry arrays), `lddw` and `call` relocations, bpf-to-bpf calls into
//!   `.text`, callback references, the RX-hash kfunc, CO-RE relocations ([`co_re`]) against the
//!   kernel's BTF or the engine's own. [`Loader`] sizes maps declared without `max_entries` and
//!   loads a program from any section as XDP. Anything else (other helpers, map types,
//!   relocations, `__ksym`/`__kconfig` externs) is refused at load with a message saying what
//!   and where, and only if the chosen program can reach it.
//! - [`validate`]: every instruction the program's entry can reach, checked before the first run.
//! - [`vm`]: the interpreter for what clang emits today: ALU32/ALU64, JMP/JMP32, `-mcpu=v1..v3`
//!   plus the v4 additions (sign-extending loads and moves, signed division, byte swaps, `gotol`),
//!   atomics (add/or/and/xor with and without fetch, xchg, cmpxchg), bpf-to-bpf calls up to 8
//!   frames of 512 bytes.
//! - [`verify`]: what the kernel's verifier refuses and the engine can tell before a run (context
//!   offsets and sizes, writes to the context, stack bounds, loads and stores through numbers,
//!   helper argument types, maps passed to helpers that do not take them, the packet passed to
//!   helpers that may not read it, packet accesses beyond what a comparison with the packet's
//!   end proved, packet pointers used after a helper moved the packet), refused at load in the
//!   kernel's words
//!   ([`Loader::kernel_checks`], on by default).
//! - [`mem`]: the address space. Every load and store is checked at run time against its region
//!   (packet `data_meta..data_end`, stack, one map value, the context's fields), and a budget
//!   bounds the instructions of one run. A fault ends the run with XDP_ABORTED, counts in
//!   [`EngineStats::faults`] (shown as `rx_xdp_fault`) and logs a line through [`Host::log`];
//!   nothing a program does can panic the engine or touch memory it was not given. What the
//!   kernel's verifier refuses beyond [`verify`] (say, a map value read without a NULL check,
//!   a packet read through a pointer moved by an unknown number) loads here and faults only if
//!   the bad path runs;
//!   `onic run --kernel-verify` asks the host kernel itself where bpf() is permitted.
//! - [`maps`]: array, percpu_array, hash, percpu_hash, lru_hash, lru_percpu_hash, lpm_trie,
//!   ringbuf, prog_array, array_of_maps, hash_of_maps, perf_event_array, devmap, devmap_hash, cpumap, xskmap, with the kernel's update flags and
//!   errors; storage allocated at load.
//! - helpers: `map_lookup_elem`, `map_update_elem`, `map_delete_elem`, `redirect`,
//!   `redirect_map` (devmaps onto the host's redirect targets, xskmaps onto its user sink),
//!   `xdp_adjust_head`/`tail`/`meta` (the core's [`XdpBuff`] with Linux's bounds), `ktime_get_ns`,
//!   `get_prandom_u32`, `get_smp_processor_id`, `csum_diff`, `trace_printk` (to [`Host::log`]),
//!   `redirect_map` with `BPF_F_BROADCAST` ([`Host::redirect_broadcast`]) and into cpumaps
//!   ([`Host::redirect_cpu`]), `xdp_load_bytes`/`store_bytes`/`get_buff_len`, `check_mtu`
//!   ([`Host::mtu`]), `fib_lookup` ([`Host::fib_lookup`]), `perf_event_output`
//!   ([`Host::output`]), `ringbuf_reserve`/`submit`/`discard`/`output`/`query` ([`ring`],
//!   records to [`Host::output`]), `tail_call` (programs added with
//!   [`XdpEngine::add_program`], at most 33 a run), `loop`, `spin_lock`/`unlock`, `ktime_get_boot_ns`/`coarse_ns`;
//!   the kfunc `bpf_xdp_metadata_rx_hash` answers from the shell's hash the core computed.
//!
//! ## What was taken and what was written
//!
//! Taken: the `object` crate (no_std, no alloc needed) reads the ELF container: section headers,
//! symbols, relocation entries. It is the ELF reader the Rust toolchain itself uses, and it returns
//! errors rather than panicking on malformed files.
//!
//! Written here: everything BPF-specific. `aya-obj` was considered for the object model, but it
//! prepares objects for the kernel's `bpf()` syscall (file descriptors in relocations, CO-RE against
//! kernel BTF) and brings more than a loader for an engine needs; the BTF subset for map
//! definitions is small. `rbpf` was considered for the interpreter, but its memory model hands the
//! program host pointers and checks them against a list of regions inside `unsafe` code; a tagged
//! address space ([`mem`]) needs no `unsafe` at all, and gives the maps, stack, context and packet
//! each its own bounds. There is no JIT: an interpreter keeps the crate free of `unsafe`, and
//! `onic bench xdp` shows what the interpretation costs.

#![no_std]
#![forbid(unsafe_code)]
#![deny(missing_docs)]

extern crate alloc;
#[cfg(test)]
extern crate std;

pub mod btf;
pub mod bundle;
pub mod co_re;
pub mod elf;
mod hashtab;
mod helpers;
pub mod insn;
mod lpm;
pub mod maps;
pub mod mem;
pub mod msg;
pub mod printk;
pub mod program;
pub mod ring;
pub mod validate;
pub mod verify;
pub mod vm;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::fmt;

use onic_core::xdp::{RawXdpProgram, XdpAction, XdpBuff, XdpRxq};

pub use elf::{list_programs, load, Loaded, Loader};
pub use maps::{Map, MapDef, MapType};
pub use program::{Program, ProgramInfo};
pub use vm::{Fault, FaultKind, Vm};

/// Why an object or program cannot be loaded. The message names what and where; the kind says
/// what a caller may act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadError {
    kind: LoadErrorKind,
    msg: String,
}

/// What kind of refusal a [`LoadError`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LoadErrorKind {
    /// The object's maps need more memory than [`LoadOptions::max_map_bytes`] allows (`limit`):
    /// a limit of the host, not of the program (a host with more memory may load it).
    MapMemory {
        /// The limit that was passed.
        limit: usize,
    },
    /// The object or program itself is refused (malformed, unsupported, or what the kernel's
    /// verifier refuses).
    Refused,
}

impl LoadError {
    /// A refusal ([`LoadErrorKind::Refused`]) with this message.
    pub fn new(msg: impl Into<String>) -> Self {
        Self {
            kind: LoadErrorKind::Refused,
            msg: msg.into(),
        }
    }

    /// Maps that need more memory than `limit` bytes ([`LoadErrorKind::MapMemory`]).
    pub fn map_memory(msg: impl Into<String>, limit: usize) -> Self {
        Self {
            kind: LoadErrorKind::MapMemory { limit },
            msg: msg.into(),
        }
    }

    /// What kind of refusal it is.
    #[must_use]
    pub const fn kind(&self) -> LoadErrorKind {
        self.kind
    }

    /// The message.
    #[must_use]
    pub fn message(&self) -> &str {
        &self.msg
    }
}

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

/// Limits and sizes chosen at load.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    /// CPUs the per-CPU maps keep a value for.
    pub cpus: u32,
    /// Most bytes all maps of an object may take.
    pub max_map_bytes: usize,
    /// Most instructions one run may execute.
    pub budget: u64,
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            cpus: 4,
            max_map_bytes: 64 << 20,
            budget: 1_000_000,
        }
    }
}

/// What the engine asks of the system it runs in.
pub trait Host {
    /// `ctx->ingress_ifindex` for a frame of `rxq` (default: port + 1).
    fn ingress_ifindex(&self, rxq: XdpRxq) -> u32 {
        u32::from(rxq.port) + 1
    }

    /// The redirect target (the index the core's redirect table knows) of interface `ifindex`,
    /// for `bpf_redirect` and devmap entries; `None`: no such interface here.
    fn redirect_ifindex(&self, rxq: XdpRxq, ifindex: u32) -> Option<u32>;

    /// The redirect target of the AF_XDP socket an xskmap holds for `queue`.
    fn redirect_xsk(&self, rxq: XdpRxq, queue: u32) -> Option<u32>;

    /// The redirect target of CPU `cpu` of a cpumap (`bpf_redirect_map` into a cpumap entry):
    /// in the kernel the frame continues on that CPU as if the program had passed it, so a
    /// model delivers it as XDP_PASS on the queue that CPU serves. `None` (the default): the
    /// host cannot, the redirect fails in the driver and is counted there.
    fn redirect_cpu(&mut self, rxq: XdpRxq, cpu: u32) -> Option<u32> {
        let _ = (rxq, cpu);
        None
    }

    /// The redirect target for a broadcast (`bpf_redirect_map` with `BPF_F_BROADCAST`): one copy
    /// of the frame to each interface of `ifindexes` (every devmap entry, without the ingress
    /// interface under `BPF_F_EXCLUDE_INGRESS`; possibly empty, possibly repeating one). `None`
    /// (the default): the host cannot copy frames; the redirect fails in the driver and is
    /// counted there. The verdict is XDP_REDIRECT either way, as in the kernel.
    fn redirect_broadcast(&mut self, rxq: XdpRxq, ifindexes: &[u32]) -> Option<u32> {
        let _ = (rxq, ifindexes);
        None
    }

    /// A record a program wrote with `bpf_perf_event_output` into entry `index` of event array
    /// `map` (the record: the program's data, then the frame's first bytes if it asked for them),
    /// or submitted to ring buffer `map` (`index` 0). Default: dropped.
    fn output(&mut self, map: &str, index: u32, record: &[u8]) {
        let _ = (map, index, record);
    }

    /// `bpf_fib_lookup` for XDP: fills `params` (the program's `struct bpf_fib_lookup`, 64
    /// bytes, family AF_INET or AF_INET6; `flags` are among those Linux 6.1 knows) and returns
    /// a `BPF_FIB_LKUP_RET_*` code or a negative errno. Default: no route,
    /// `BPF_FIB_LKUP_RET_NOT_FWDED` (4), as the kernel answers when its FIB has none.
    fn fib_lookup(&mut self, rxq: XdpRxq, params: &mut [u8; 64], flags: u32) -> i32 {
        let _ = (rxq, params, flags);
        4
    }

    /// The MTU of interface `ifindex` (0: the ingress interface) for `bpf_check_mtu`; `None`: no
    /// such interface. Default: 1500 for the ingress interface and every interface
    /// [`Host::redirect_ifindex`] knows.
    fn mtu(&self, rxq: XdpRxq, ifindex: u32) -> Option<u32> {
        let known = ifindex == 0
            || ifindex == self.ingress_ifindex(rxq)
            || self.redirect_ifindex(rxq, ifindex).is_some();
        known.then_some(1500)
    }

    /// The CPU a frame of `rxq` is processed on (for per-CPU maps and
    /// `bpf_get_smp_processor_id`); must be below [`LoadOptions::cpus`] to get its own copy.
    fn cpu(&self, rxq: XdpRxq) -> u32 {
        u32::from(rxq.queue_index)
    }

    /// Nanoseconds of a monotonic clock (`bpf_ktime_get_ns`).
    fn ktime_ns(&mut self) -> u64;

    /// A pseudo-random number (`bpf_get_prandom_u32`).
    fn random_u32(&mut self) -> u32;

    /// One log line: `bpf_trace_printk` output and fault reports.
    fn log(&mut self, line: &str);
}

/// Counters of an engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Runs.
    pub runs: u64,
    /// Runs that faulted (verdict XDP_ABORTED): the driver's `rx_xdp_fault`.
    pub faults: u64,
    /// Instructions executed in all.
    pub insns: u64,
    /// Verdicts returned, by raw value (aborted, drop, pass, tx, redirect); faults count as
    /// aborted.
    pub verdicts: [u64; 5],
    /// Returns that are no verdict (the core counts them as `rx_xdp_invalid`).
    pub invalid: u64,
}

/// Most fault lines logged one by one; after that, one line per power of two.
const FAULT_LOG_LINES: u64 = 16;

/// A loaded program, its maps and its host: an XDP program for the core.
pub struct XdpEngine<H> {
    /// The program entered, then those its tail calls may reach (program arrays hold their
    /// numbers here).
    programs: Vec<Program>,
    maps: Vec<Map>,
    vm: Vm,
    host: H,
    stats: EngineStats,
}

impl<H: Host> XdpEngine<H> {
    /// An engine for `loaded`, with an instruction budget of `budget` per run.
    #[must_use]
    pub fn new(loaded: Loaded, host: H, budget: u64) -> Self {
        let mut e = Self::with_program(loaded.program, loaded.maps, host, budget);
        e.programs.extend(loaded.tail_programs);
        e
    }

    /// An engine for a program and maps assembled by hand (tests, the fuzzer).
    #[must_use]
    pub fn with_program(program: Program, maps: Vec<Map>, host: H, budget: u64) -> Self {
        let scratch = maps
            .iter()
            .map(|m| (m.def().key_size as usize).saturating_add(m.def().value_size as usize))
            .max()
            .unwrap_or(0);
        Self {
            programs: alloc::vec![program],
            maps,
            vm: Vm::new(budget, scratch),
            host,
            stats: EngineStats::default(),
        }
    }

    /// The program.
    #[must_use]
    pub fn program(&self) -> &Program {
        &self.programs[0]
    }

    /// Adds a program tail calls may reach (another program of the object, from
    /// [`Loader::load`]: it refers to the maps by the same numbers); returns its number, the
    /// value a program array's entry holds to name it.
    pub fn add_program(&mut self, p: Program) -> u32 {
        self.programs.push(p);
        (self.programs.len() - 1) as u32
    }

    /// The programs: the one entered (number 0), then those added.
    #[must_use]
    pub fn programs(&self) -> &[Program] {
        &self.programs
    }

    /// The maps.
    #[must_use]
    pub fn maps(&self) -> &[Map] {
        &self.maps
    }

    /// The maps, for the host to set entries (`--map`).
    pub fn maps_mut(&mut self) -> &mut [Map] {
        &mut self.maps
    }

    /// Map `name`.
    pub fn map_mut(&mut self, name: &str) -> Option<&mut Map> {
        self.maps.iter_mut().find(|m| m.def().name == name)
    }

    /// The host.
    pub fn host_mut(&mut self) -> &mut H {
        &mut self.host
    }

    /// The host.
    #[must_use]
    pub const fn host(&self) -> &H {
        &self.host
    }

    /// The counters.
    #[must_use]
    pub const fn stats(&self) -> EngineStats {
        self.stats
    }

    /// Runs the program on one buffer and returns its raw verdict (XDP_ABORTED after a fault).
    pub fn run(&mut self, xdp: &mut XdpBuff<'_>) -> u32 {
        let (r, executed) = self.vm.run(&self.programs, &mut self.maps, &mut self.host, xdp);
        // Records a run reserved and left (the kernel's verifier refuses such a program) are
        // discarded, so that the next run starts with the ring as the host left it.
        for ring in self.maps.iter_mut().filter_map(Map::ring_mut) {
            ring.release_all();
        }
        self.stats.runs += 1;
        self.stats.insns += executed;
        let raw = match r {
            // The verdict is the low 32 bits of r0 (the kernel's `u32` return).
            Ok(r0) => r0 as u32,
            Err(fault) => {
                self.stats.faults += 1;
                let n = self.stats.faults;
                if n <= FAULT_LOG_LINES || n.is_power_of_two() {
                    let line = self.describe(&fault, n);
                    self.host.log(&line);
                }
                XdpAction::Aborted.raw()
            }
        };
        match self.stats.verdicts.get_mut(raw as usize) {
            Some(c) => *c += 1,
            None => self.stats.invalid += 1,
        }
        raw
    }

    fn describe(&self, fault: &Fault, n: u64) -> String {
        let p = self.programs.get(fault.prog).unwrap_or(&self.programs[0]);
        let (func, off) = p.locate(fault.pc);
        format!(
            "onic-bpf: {} faulted at instruction {} ({}+{off}): {}; XDP_ABORTED (fault {n})",
            p.name(),
            fault.pc,
            func.unwrap_or("?"),
            fault.kind
        )
    }
}

impl<H: Host> RawXdpProgram for XdpEngine<H> {
    fn run_raw(&mut self, xdp: &mut XdpBuff<'_>) -> u32 {
        self.run(xdp)
    }
}

impl<H> fmt::Debug for XdpEngine<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("XdpEngine")
            .field("program", &self.programs[0].name())
            .field("maps", &self.maps.len())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

/// An IPv4 route of [`SimHost::routes`]: (destination, prefix length, egress interface, source
/// MAC, next hop MAC: `None` while the neighbour is unresolved).
pub type Route = ([u8; 4], u8, u32, [u8; 6], Option<[u8; 6]>);

/// A host for tools and tests: ports have interface indexes `ifindex_base + port`, redirect
/// targets come from a table, time is set by the caller (e.g. the model's virtual clock), random
/// numbers come from a seeded xorshift, log lines are kept (up to [`SimHost::MAX_LINES`]).
#[derive(Clone, Debug)]
pub struct SimHost {
    /// Interface index of port 0.
    pub ifindex_base: u32,
    /// (ingress port or `None` for any, interface index, redirect target).
    pub redirects: Vec<(Option<u8>, u32, u32)>,
    /// Redirect target of AF_XDP sockets (xskmap entries), if the host has a user sink.
    pub xsk_target: Option<u32>,
    /// CPUs: queue `q` runs on CPU `q % cpus`.
    pub cpus: u32,
    /// Redirect target of cpumap entries: CPU `c` is target `cpu_target_base + c` (`None`: the
    /// host has none, such redirects fail).
    pub cpu_target_base: Option<u32>,
    /// Redirect target of broadcasts (`None`: the host has none, such redirects fail).
    pub broadcast_target: Option<u32>,
    /// The interfaces of the last broadcast redirect, as the engine listed them.
    pub last_broadcast: Vec<u32>,
    /// MTU of every interface (`bpf_check_mtu`).
    pub mtu: u32,
    /// Records written with `bpf_perf_event_output` or submitted to a ring buffer: (map, entry,
    /// bytes); at most
    /// [`SimHost::MAX_LINES`], the rest counted in `lines_dropped`.
    pub records: Vec<(String, u32, Vec<u8>)>,
    /// IPv4 routes for `bpf_fib_lookup` (the main table), the longest prefix wins: (destination,
    /// prefix length, egress interface, source MAC, next hop MAC or `None`). Empty: every lookup
    /// answers "no route". See [`SimHost::fib_lookup`](Host::fib_lookup) for what is looked at.
    pub routes: Vec<Route>,
    /// What `bpf_ktime_get_ns` returns.
    pub now_ns: u64,
    rng: u64,
    /// Log lines.
    pub lines: Vec<String>,
    /// Lines dropped after the first [`SimHost::MAX_LINES`].
    pub lines_dropped: u64,
    /// The last interface a redirect named that the host does not know (`bpf_redirect` or a
    /// devmap entry), for a tool that names its failed redirects: it clears this before a run
    /// and reads it after one whose redirect failed.
    pub missing: core::cell::Cell<Option<u32>>,
}

impl SimHost {
    /// Most log lines kept.
    pub const MAX_LINES: usize = 10_000;

    /// A host with port 0 at interface index 1, no redirect targets, `cpus` CPUs.
    #[must_use]
    pub fn new(cpus: u32, seed: u64) -> Self {
        Self {
            ifindex_base: 1,
            redirects: Vec::new(),
            xsk_target: None,
            cpus: cpus.max(1),
            cpu_target_base: None,
            broadcast_target: None,
            last_broadcast: Vec::new(),
            mtu: 1500,
            records: Vec::new(),
            routes: Vec::new(),
            now_ns: 0,
            rng: seed | 1,
            lines: Vec::new(),
            lines_dropped: 0,
            missing: core::cell::Cell::new(None),
        }
    }

    /// Whether interface `ifindex` exists, seen from `rxq`'s port: the ingress interface and
    /// those of the redirect table.
    fn exists(&self, rxq: XdpRxq, ifindex: u32) -> bool {
        ifindex == self.ingress_ifindex(rxq) || self.lookup(rxq, ifindex).is_some()
    }

    /// The redirect table's target for `ifindex` from `rxq`'s port.
    fn lookup(&self, rxq: XdpRxq, ifindex: u32) -> Option<u32> {
        self.redirects
            .iter()
            .find(|r| r.0.is_none_or(|p| p == rxq.port) && r.1 == ifindex)
            .map(|r| r.2)
    }
}

impl Host for SimHost {
    fn ingress_ifindex(&self, rxq: XdpRxq) -> u32 {
        self.ifindex_base + u32::from(rxq.port)
    }

    fn redirect_ifindex(&self, rxq: XdpRxq, ifindex: u32) -> Option<u32> {
        let t = self.lookup(rxq, ifindex);
        if t.is_none() {
            self.missing.set(Some(ifindex));
        }
        t
    }

    fn redirect_xsk(&self, _: XdpRxq, _: u32) -> Option<u32> {
        self.xsk_target
    }

    fn cpu(&self, rxq: XdpRxq) -> u32 {
        u32::from(rxq.queue_index) % self.cpus
    }

    fn redirect_cpu(&mut self, _: XdpRxq, cpu: u32) -> Option<u32> {
        self.cpu_target_base.map(|b| b.wrapping_add(cpu))
    }

    fn redirect_broadcast(&mut self, _: XdpRxq, ifindexes: &[u32]) -> Option<u32> {
        self.last_broadcast.clear();
        self.last_broadcast.extend_from_slice(ifindexes);
        self.broadcast_target
    }

    fn mtu(&self, rxq: XdpRxq, ifindex: u32) -> Option<u32> {
        (ifindex == 0 || self.exists(rxq, ifindex)).then_some(self.mtu)
    }

    fn output(&mut self, map: &str, index: u32, record: &[u8]) {
        if self.records.len() < Self::MAX_LINES {
            self.records.push((map.into(), index, record.to_vec()));
        } else {
            self.lines_dropped += 1;
        }
    }

    /// As Linux 6.1's `bpf_ipv4_fib_lookup`, over [`SimHost::routes`] and interfaces that all
    /// forward: `params.ifindex` must name an interface that exists (-ENODEV); the input
    /// interface otherwise changes nothing (no policy rules), but with `BPF_FIB_LOOKUP_OUTPUT`
    /// only routes out of it count; `BPF_FIB_LOOKUP_DIRECT | BPF_FIB_LOOKUP_TBID` looks in table
    /// `tbid` (the routes are the main table's, 254; any other answers NOT_FWDED); a `tot_len`
    /// above the MTU answers FRAG_NEEDED with the MTU; a route whose neighbour is unresolved
    /// answers NO_NEIGH with the interface filled in, unless `BPF_FIB_LOOKUP_SKIP_NEIGH`;
    /// `BPF_FIB_LOOKUP_SRC` gives source address 0 (the ports have no IPv4 address). IPv6
    /// lookups find no route.
    fn fib_lookup(&mut self, rxq: XdpRxq, p: &mut [u8; 64], flags: u32) -> i32 {
        const AF_INET: u8 = 2;
        // BPF_FIB_LOOKUP_* flags.
        const DIRECT: u32 = 1;
        const OUTPUT: u32 = 2;
        const SKIP_NEIGH: u32 = 4;
        const TBID: u32 = 8;
        const SRC: u32 = 16;
        // BPF_FIB_LKUP_RET_* codes.
        const NOT_FWDED: i32 = 4;
        const NO_NEIGH: i32 = 7;
        const FRAG_NEEDED: i32 = 8;
        const RT_TABLE_MAIN: u32 = 254;
        let word = |p: &[u8; 64], at: usize| u32::from_le_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]]);
        let ifindex = word(p, 8);
        if !self.exists(rxq, ifindex) {
            // CAST: a small errno.
            return -(maps::errno::ENODEV as i32);
        }
        if p[0] != AF_INET {
            return NOT_FWDED;
        }
        if flags & (DIRECT | TBID) == DIRECT | TBID {
            let table = word(p, 48);
            p[48..52].fill(0);
            if table != RT_TABLE_MAIN {
                return NOT_FWDED;
            }
        }
        let dst = u32::from_be_bytes([p[32], p[33], p[34], p[35]]);
        let matches = |r: &&Route| {
            let mask = u32::MAX.checked_shl(32 - u32::from(r.1.min(32))).unwrap_or(0);
            dst & mask == u32::from_be_bytes(r.0) & mask && (flags & OUTPUT == 0 || r.2 == ifindex)
        };
        let Some(&(_, _, out, src, neigh)) = self.routes.iter().filter(matches).max_by_key(|r| r.1) else {
            return NOT_FWDED;
        };
        // CAST: the model's MTU fits 16 bits.
        let mtu = self.mtu.min(0xffff) as u16;
        if u16::from_le_bytes([p[6], p[7]]) > mtu {
            p[6..8].copy_from_slice(&mtu.to_le_bytes());
            return FRAG_NEEDED;
        }
        // The route's metric (0) and interface.
        p[12..16].fill(0);
        p[8..12].copy_from_slice(&out.to_le_bytes());
        if flags & SRC != 0 {
            p[16..20].fill(0);
        }
        if flags & SKIP_NEIGH == 0 {
            let Some(neigh) = neigh else {
                return NO_NEIGH;
            };
            p[52..58].copy_from_slice(&src);
            p[58..64].copy_from_slice(&neigh);
        }
        // No VLAN; the MTU.
        p[48..52].fill(0);
        p[6..8].copy_from_slice(&mtu.to_le_bytes());
        0
    }

    fn ktime_ns(&mut self) -> u64 {
        self.now_ns
    }

    fn random_u32(&mut self) -> u32 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        (self.rng >> 16) as u32
    }

    fn log(&mut self, line: &str) {
        if self.lines.len() < Self::MAX_LINES {
            self.lines.push(line.into());
        } else {
            self.lines_dropped += 1;
        }
    }
}
