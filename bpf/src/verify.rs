//! A static check of what the kernel's verifier refuses and the engine can tell before a run:
//! the bounds the interpreter enforces at run time (context fields, the stack) and the types of
//! helper arguments, followed along every path the program's entry can reach.
//!
//! Each register holds one of a few kinds, as far as the check can tell (`Kind`): the context
//! at a known offset, the stack at a known offset from its frame's top, a map, a number, the
//! packet (`ctx->data` or `ctx->data_meta`, moved by numbers), or something it does not follow
//! (a load from memory, a map value pointer). Where two
//! paths meet, a register keeps its kind only if both agree. A refusal needs certainty: a
//! register the check does not follow never refuses anything, so a program the kernel loads is
//! never refused here (what the check cannot see, the interpreter still checks when it runs).
//! The messages are the kernel's own.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::insn::{alu, class, helper as h, jmp, pseudo, Insn, LDDW, SRC_X};
use crate::maps::{Map, MapType};
use crate::mem::{self, Region};
use crate::program::Program;
use crate::LoadError;

/// What a register holds, as far as the check knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Not followed: anything.
    Unknown,
    /// A number.
    Scalar,
    /// The context, this many bytes past its start.
    Ctx(i64),
    /// The stack, this many bytes from the top of the frame it was taken in.
    Stack(i64),
    /// Map number n (its handle).
    Map(usize),
    /// A pointer into the packet (its offset is not followed).
    Packet,
}

impl Kind {
    /// The kernel's name of the register type, for messages.
    const fn name(self) -> &'static str {
        match self {
            Self::Unknown => "?",
            Self::Scalar => "scalar",
            Self::Ctx(_) => "ctx",
            Self::Stack(_) => "fp",
            Self::Map(_) => "map_ptr",
            Self::Packet => "pkt",
        }
    }
}

type Regs = [Kind; 11];

/// Bytes of `struct xdp_md`.
const XDP_MD: i64 = 24;
/// `egress_ifindex`: only devmap programs may read it.
const EGRESS_IFINDEX: i64 = 20;
/// Bytes of one stack frame.
const FRAME: i64 = mem::FRAME_SIZE as i64;

/// Checks `p` as the kernel's verifier would for an XDP program (`devmap`: one attached to a
/// devmap entry, `xdp/devmap` sections, which may read `egress_ifindex`) with the object's
/// `maps`.
///
/// # Errors
///
/// The first instruction the kernel would refuse, with the kernel's words.
pub fn check(p: &Program, maps: &[Map], devmap: bool) -> Result<(), LoadError> {
    let code = p.code();
    let mut states: Vec<Option<Regs>> = vec![None; code.len()];
    let mut todo = Vec::new();
    let mut entry = [Kind::Unknown; 11];
    entry[1] = Kind::Ctx(0);
    entry[10] = Kind::Stack(0);
    merge(&mut states, &mut todo, p.entry(), entry);
    let cx = Cx { code, maps, devmap };
    while let Some(i) = todo.pop() {
        let Some(regs) = states.get(i).copied().flatten() else {
            continue;
        };
        let next = cx.step(i, regs).map_err(|why| {
            let (f, o) = p.locate(i);
            LoadError::new(format!(
                "program {}, instruction {i} ({}+{o}): the kernel's verifier refuses it: {why}",
                p.name(),
                f.unwrap_or("?")
            ))
        })?;
        for (slot, state) in next.into_iter().flatten() {
            merge(&mut states, &mut todo, slot, state);
        }
    }
    Ok(())
}

/// Joins `state` into what slot `at` holds; queues the slot if that changed it.
fn merge(states: &mut [Option<Regs>], todo: &mut Vec<usize>, at: usize, state: Regs) {
    let Some(old) = states.get_mut(at) else {
        return;
    };
    let joined = match *old {
        None => state,
        Some(o) => {
            let mut j = o;
            for (a, b) in j.iter_mut().zip(state) {
                if *a != b {
                    *a = Kind::Unknown;
                }
            }
            j
        }
    };
    if *old != Some(joined) {
        *old = Some(joined);
        todo.push(at);
    }
}

/// What one step needs besides the registers.
struct Cx<'a> {
    code: &'a [Insn],
    maps: &'a [Map],
    devmap: bool,
}

/// The states one instruction hands on: (slot, registers), at most two.
type Next = [Option<(usize, Regs)>; 2];

impl Cx<'_> {
    fn step(&self, i: usize, mut r: Regs) -> Result<Next, String> {
        let ins = self.code[i];
        let (d, s) = (usize::from(ins.dst).min(10), usize::from(ins.src).min(10));
        let rel = |off: i64| usize::try_from(i as i64 + 1 + off).ok();
        match ins.op & 7 {
            class::ALU64 => r[d] = alu64(ins, r[d], r[s]),
            class::ALU => r[d] = Kind::Scalar,
            class::LDX => r[d] = self.load(ins, r[s])?,
            class::ST | class::STX => self.store(ins, r[d])?,
            class::JMP | class::JMP32 => return self.jump(i, ins, r),
            _ if ins.op == LDDW => {
                r[d] = self.lddw(i);
                let callback = (ins.src == pseudo::FUNC)
                    .then(|| rel(i64::from(ins.imm)))
                    .flatten();
                return Ok([
                    Some((i + 2, r)),
                    callback.map(|c| (c, fresh_frame([Kind::Unknown; 5]))),
                ]);
            }
            // Nothing else passes validation.
            _ => {}
        }
        Ok([Some((i + 1, r)), None])
    }

    fn jump(&self, i: usize, ins: Insn, mut r: Regs) -> Result<Next, String> {
        let rel = |off: i64| usize::try_from(i as i64 + 1 + off).ok();
        let wide = ins.op & 7 == class::JMP;
        Ok(match ins.op & 0xf0 {
            jmp::EXIT => [None, None],
            jmp::JA if wide => [rel(i64::from(ins.off)).map(|t| (t, r)), None],
            jmp::JA => [rel(i64::from(ins.imm)).map(|t| (t, r)), None],
            jmp::CALL if ins.src == pseudo::CALL => {
                let callee = fresh_frame([r[1], r[2], r[3], r[4], r[5]]);
                after_call(&mut r, Kind::Unknown);
                [Some((i + 1, r)), rel(i64::from(ins.imm)).map(|t| (t, callee))]
            }
            jmp::CALL => {
                let r0 = if ins.src == 0 {
                    self.helper(ins.imm, &r)?
                } else {
                    Kind::Unknown
                };
                after_call(&mut r, r0);
                [Some((i + 1, r)), None]
            }
            _ => [Some((i + 1, r)), rel(i64::from(ins.off)).map(|t| (t, r))],
        })
    }

    /// A load through `base`: the context's fields and the stack's bounds are checked.
    fn load(&self, ins: Insn, base: Kind) -> Result<Kind, String> {
        let size = crate::insn::size_bytes(ins.op) as i64;
        let off = i64::from(ins.off);
        match base {
            Kind::Ctx(k) => {
                self.ctx_access(usize::from(ins.src), k, off, size)?;
                // data and data_meta point into the packet; data_end is not followed.
                Ok(match off {
                    0 | 8 => Kind::Packet,
                    4 => Kind::Unknown,
                    _ => Kind::Scalar,
                })
            }
            Kind::Stack(k) => {
                stack_access("read from", usize::from(ins.src), k + off, size)?;
                Ok(if size < 8 { Kind::Scalar } else { Kind::Unknown })
            }
            Kind::Scalar => Err(not_memory(usize::from(ins.src), base)),
            // A base not followed may be the context, whose 4-byte fields give packet pointers.
            _ if size < 4 => Ok(Kind::Scalar),
            _ => Ok(Kind::Unknown),
        }
    }

    /// A store through `base`: the context is read-only, the stack bounded.
    fn store(&self, ins: Insn, base: Kind) -> Result<(), String> {
        let size = crate::insn::size_bytes(ins.op) as i64;
        let off = i64::from(ins.off);
        match base {
            Kind::Ctx(k) if k != 0 => Err(modified_ctx(usize::from(ins.dst), k)),
            Kind::Ctx(_) => Err(format!("invalid bpf_context access off={off} size={size}")),
            Kind::Stack(k) => stack_access("write to", usize::from(ins.dst), k + off, size),
            Kind::Scalar => Err(not_memory(usize::from(ins.dst), base)),
            // A map's fields may be read through its handle (recent kernels, with BTF); the
            // packet's bounds are checked when the program runs.
            Kind::Unknown | Kind::Map(_) | Kind::Packet => Ok(()),
        }
    }

    fn ctx_access(&self, reg: usize, k: i64, off: i64, size: i64) -> Result<(), String> {
        if k != 0 {
            return Err(modified_ctx(reg, k));
        }
        let valid = (0..XDP_MD).contains(&off)
            && off % size == 0
            && size == 4
            && (off != EGRESS_IFINDEX || self.devmap);
        if valid {
            Ok(())
        } else {
            Err(format!("invalid bpf_context access off={off} size={size}"))
        }
    }

    fn lddw(&self, i: usize) -> Kind {
        let ins = self.code[i];
        if ins.src == pseudo::FUNC {
            return Kind::Unknown;
        }
        let hi = self.code.get(i + 1).map_or(0, |n| n.imm as u32);
        let v = u64::from(ins.imm as u32) | (u64::from(hi) << 32);
        match mem::region(v) {
            Region::MapHandle(m) => Kind::Map(m),
            Region::None => Kind::Scalar,
            _ => Kind::Unknown,
        }
    }

    /// Checks helper `id`'s arguments; the kind of its result.
    fn helper(&self, id: i32, r: &Regs) -> Result<Kind, String> {
        let takes_ctx = matches!(
            id,
            h::XDP_ADJUST_HEAD
                | h::XDP_ADJUST_TAIL
                | h::XDP_ADJUST_META
                | h::PERF_EVENT_OUTPUT
                | h::FIB_LOOKUP
                | h::CHECK_MTU
                | h::XDP_GET_BUFF_LEN
                | h::XDP_LOAD_BYTES
                | h::XDP_STORE_BYTES
                | h::TAIL_CALL
        );
        if takes_ctx {
            match r[1] {
                Kind::Ctx(0) | Kind::Unknown => {}
                Kind::Ctx(k) => return Err(modified_ctx(1, k)),
                k => return Err(format!("R1 type={} expected=ctx", k.name())),
            }
        }
        let map_arg = match id {
            h::MAP_LOOKUP_ELEM | h::MAP_UPDATE_ELEM | h::MAP_DELETE_ELEM | h::REDIRECT_MAP => Some(1),
            h::RINGBUF_OUTPUT | h::RINGBUF_RESERVE | h::RINGBUF_QUERY => Some(1),
            h::PERF_EVENT_OUTPUT | h::TAIL_CALL => Some(2),
            _ => None,
        };
        // Helpers the kernel gives no packet access (`pkt_access` unset) refuse a packet pointer
        // for memory; each listed is checked against the kernel (`bpf/tests/c/kernel_refuses.c`).
        // The map helpers and `bpf_csum_diff` may read the packet.
        let mem_arg = match id {
            h::TRACE_PRINTK => Some(1),
            h::RINGBUF_OUTPUT | h::FIB_LOOKUP => Some(2),
            h::XDP_LOAD_BYTES | h::XDP_STORE_BYTES | h::CHECK_MTU => Some(3),
            h::PERF_EVENT_OUTPUT => Some(4),
            _ => None,
        };
        if mem_arg.is_some_and(|n| r[n] == Kind::Packet) {
            return Err("helper access to the packet is not allowed".into());
        }
        if let Some(n) = map_arg {
            match r[n] {
                Kind::Map(m) => self.map_fits(id, m)?,
                Kind::Unknown => {}
                k => return Err(format!("R{n} type={} expected=map_ptr", k.name())),
            }
        }
        Ok(match id {
            h::MAP_LOOKUP_ELEM | h::RINGBUF_RESERVE => Kind::Unknown,
            _ => Kind::Scalar,
        })
    }

    /// Whether map `m` may be passed to helper `id` (the kernel's
    /// `check_map_func_compatibility`, for the helpers and maps the engine has).
    fn map_fits(&self, id: i32, m: usize) -> Result<(), String> {
        let Some(t) = self.maps.get(m).map(|m| m.def().map_type) else {
            return Ok(());
        };
        let by_map = match t {
            MapType::ProgArray => id == h::TAIL_CALL,
            MapType::PerfEventArray => id == h::PERF_EVENT_OUTPUT,
            MapType::RingBuf => matches!(id, h::RINGBUF_OUTPUT | h::RINGBUF_RESERVE | h::RINGBUF_QUERY),
            MapType::ArrayOfMaps | MapType::HashOfMaps => id == h::MAP_LOOKUP_ELEM,
            MapType::DevMap | MapType::DevMapHash | MapType::XskMap => {
                matches!(id, h::REDIRECT_MAP | h::MAP_LOOKUP_ELEM)
            }
            MapType::CpuMap => id == h::REDIRECT_MAP,
            _ => true,
        };
        let by_func = match id {
            h::TAIL_CALL => t == MapType::ProgArray,
            h::PERF_EVENT_OUTPUT => t == MapType::PerfEventArray,
            h::RINGBUF_OUTPUT | h::RINGBUF_RESERVE | h::RINGBUF_QUERY => t == MapType::RingBuf,
            h::REDIRECT_MAP => t.is_redirect(),
            _ => true,
        };
        if by_map && by_func {
            return Ok(());
        }
        if id == h::TAIL_CALL {
            // The words of recent kernels (6.1 said "cannot pass map_type ...").
            return Err("expected prog array map for tail call".into());
        }
        Err(format!(
            "cannot pass map_type {} into func {}#{id}",
            raw_type(t),
            h::name(id).unwrap_or("?")
        ))
    }
}

/// 64-bit arithmetic on kinds: constants move context and stack pointers; anything else on a
/// pointer is not followed.
fn alu64(ins: Insn, dst: Kind, src: Kind) -> Kind {
    let x = ins.op & SRC_X != 0;
    let imm = i64::from(ins.imm);
    match (ins.op & 0xf0, dst) {
        (alu::MOV, _) if x && ins.off == 0 => src,
        (alu::MOV, _) if x => Kind::Unknown,
        (alu::MOV, _) => Kind::Scalar,
        (alu::ADD, Kind::Ctx(k)) if !x => Kind::Ctx(k + imm),
        (alu::SUB, Kind::Ctx(k)) if !x => Kind::Ctx(k - imm),
        (alu::ADD, Kind::Stack(k)) if !x => Kind::Stack(k + imm),
        (alu::SUB, Kind::Stack(k)) if !x => Kind::Stack(k - imm),
        (alu::ADD | alu::SUB, Kind::Packet) if !x || src == Kind::Scalar => Kind::Packet,
        (_, Kind::Scalar) if !x || src == Kind::Scalar => Kind::Scalar,
        _ => Kind::Unknown,
    }
}

/// The registers a function or callback starts with: its arguments, its own frame.
fn fresh_frame(args: [Kind; 5]) -> Regs {
    let mut r = [Kind::Unknown; 11];
    r[1..6].copy_from_slice(&args);
    r[10] = Kind::Stack(0);
    r
}

/// A call's effect on the caller: r0 is the result, r1-r5 are gone.
fn after_call(r: &mut Regs, r0: Kind) {
    r[0] = r0;
    r[1..6].fill(Kind::Unknown);
}

/// A load or store through a number (a NULL the program did not check).
fn not_memory(reg: usize, k: Kind) -> String {
    format!("R{reg} invalid mem access '{}'", k.name())
}

fn modified_ctx(reg: usize, k: i64) -> String {
    format!("dereference of modified ctx ptr R{reg} off={k} disallowed")
}

/// An access of `size` bytes at `off` from the top of a frame.
fn stack_access(what: &str, reg: usize, off: i64, size: i64) -> Result<(), String> {
    if off >= -FRAME && off + size <= 0 {
        Ok(())
    } else {
        Err(format!("invalid {what} stack R{reg} off={off} size={size}"))
    }
}

/// The kernel's number of a map type.
fn raw_type(t: MapType) -> u32 {
    (0..32).find(|&n| MapType::from_raw(n) == Some(t)).unwrap_or(0)
}
