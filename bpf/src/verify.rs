//! A static check of what the kernel's verifier refuses and the engine can tell before a run:
//! the bounds the interpreter enforces at run time (context fields, the stack) and the types of
//! helper arguments, followed along every path the program's entry can reach.
//!
//! Each register holds one of a few kinds, as far as the check can tell (`Kind`): the context
//! at a known offset, the stack at a known offset from its frame's top, a map, a number (its
//! value where a move or a sum of known values gives it), the packet's end, a packet pointer
//! (`ctx->data` or `ctx->data_meta` moved by known numbers, with the bytes a comparison against
//! the end proved there: `Pkt`, the kernel's id 0 packet pointers), a packet pointer moved by an
//! unknown number (not followed further), or something it does not follow (a load from memory, a
//! map value pointer). Where two paths meet, a register keeps its kind only if both agree (a
//! packet pointer keeps the larger of the two proven ranges).
//!
//! A refusal needs certainty: a register the check does not follow never refuses anything, so a
//! program the kernel loads is never refused here (what the check cannot see, the interpreter
//! still checks when it runs). Packet ranges follow the same rule: wherever the kernel could
//! prove more than the check can see (a comparison through a register it does not follow, a
//! packet pointer after a call of a bpf-to-bpf function), the range becomes unbounded rather than
//! refusing. The messages are the kernel's own.

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
    /// A number of known value (the kernel knows it too: a move, sums of known values).
    Const(i64),
    /// The context, this many bytes past its start.
    Ctx(i64),
    /// The stack, this many bytes from the top of the frame it was taken in.
    Stack(i64),
    /// Map number n (its handle).
    Map(usize),
    /// A pointer into the packet moved by a number the check does not know (`true`: from
    /// `data_meta`); its offset is not followed.
    Packet(bool),
    /// `ctx->data` or `ctx->data_meta` moved by known numbers, with its proven range.
    Pkt(Pkt),
    /// `ctx->data_end`.
    PktEnd,
}

/// A packet pointer the check follows exactly: the kernel's `PTR_TO_PACKET` (or `_META`) of id 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Pkt {
    /// From `data_meta` (bounded by `data`) rather than `data` (bounded by `data_end`).
    meta: bool,
    /// Bytes past `data` (or `data_meta`).
    off: i64,
    /// Bytes from `data` known to lie before the end (`UNBOUNDED`: the kernel may know more
    /// than the check can see, so nothing is refused; negative: the pointer lies at or past
    /// the end, `AT_END`, `BEYOND_END`).
    range: i64,
}

/// A range the check does not bound.
const UNBOUNDED: i64 = i64::MAX;
/// The range of a pointer known to lie past the packet's end, or at least at it (the kernel's
/// `BEYOND_PKT_END`, `AT_PKT_END`): nothing may be read through it.
const BEYOND_END: i64 = -2;
const AT_END: i64 = -1;
/// The largest packet offset the kernel gives a range for (`MAX_PACKET_OFF`).
const MAX_PACKET_OFF: i64 = 0xffff;
/// The largest constant offset the kernel lets a pointer carry (`BPF_MAX_VAR_OFF`).
const MAX_VAR_OFF: i64 = 1 << 29;

impl Kind {
    /// The kernel's name of the register type, for messages.
    const fn name(self) -> &'static str {
        match self {
            Self::Unknown => "?",
            Self::Scalar | Self::Const(_) => "scalar",
            Self::Ctx(_) => "ctx",
            Self::Stack(_) => "fp",
            Self::Map(_) => "map_ptr",
            Self::Packet(true) | Self::Pkt(Pkt { meta: true, .. }) => "pkt_meta",
            Self::Packet(false) | Self::Pkt(_) => "pkt",
            Self::PktEnd => "pkt_end",
        }
    }

    const fn is_scalar(self) -> bool {
        matches!(self, Self::Scalar | Self::Const(_))
    }

    /// Whether this is a pointer into the packet (from `data_meta`: `Some(true)`).
    const fn packet(self) -> Option<bool> {
        match self {
            Self::Packet(m) | Self::Pkt(Pkt { meta: m, .. }) => Some(m),
            _ => None,
        }
    }

    /// What two paths that meet agree on.
    fn join(self, other: Self) -> Self {
        match (self, other) {
            _ if self == other => self,
            (Self::Pkt(p), Self::Pkt(q)) if p.meta == q.meta && p.off == q.off => Self::Pkt(Pkt {
                range: p.range.max(q.range),
                ..p
            }),
            _ if self.packet().is_some() && self.packet() == other.packet() => {
                Self::Packet(self.packet() == Some(true))
            }
            _ if self.is_scalar() && other.is_scalar() => Self::Scalar,
            _ => Self::Unknown,
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
                *a = a.join(b);
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
            // A 32-bit move of a constant is known (zero-extended); other 32-bit results not.
            class::ALU if ins.op == class::ALU | alu::MOV => {
                r[d] = Kind::Const(i64::from(ins.imm as u32));
            }
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
                // The callee's comparisons reach the caller's packet pointers in the kernel
                // (and the kernel explores each of its returns on its own): not followed.
                set_ranges(&mut r, None, UNBOUNDED);
                [Some((i + 1, r)), rel(i64::from(ins.imm)).map(|t| (t, callee))]
            }
            jmp::CALL => {
                let r0 = if ins.src == 0 {
                    self.helper(ins.imm, &r)?
                } else {
                    Kind::Unknown
                };
                after_call(&mut r, r0);
                if ins.src == 0 && moves_packet(ins.imm) {
                    // The kernel's clear_all_pkt_pointers: every packet pointer is a number now.
                    for k in &mut r {
                        if k.packet().is_some() || *k == Kind::PktEnd {
                            *k = Kind::Scalar;
                        }
                    }
                }
                [Some((i + 1, r)), None]
            }
            _ => {
                let [fall, taken] = compare(ins, r);
                let target = rel(i64::from(ins.off));
                [
                    fall.map(|f| (i + 1, f)),
                    taken.and_then(|t| target.map(|at| (at, t))),
                ]
            }
        })
    }

    /// A load through `base`: the context's fields and the stack's bounds are checked.
    fn load(&self, ins: Insn, base: Kind) -> Result<Kind, String> {
        let size = crate::insn::size_bytes(ins.op) as i64;
        let off = i64::from(ins.off);
        match base {
            Kind::Ctx(k) => {
                self.ctx_access(usize::from(ins.src), k, off, size)?;
                // data and data_meta point into the packet, with nothing proven yet.
                let start = |meta| {
                    Kind::Pkt(Pkt {
                        meta,
                        off: 0,
                        range: 0,
                    })
                };
                Ok(match off {
                    0 => start(false),
                    8 => start(true),
                    4 => Kind::PktEnd,
                    _ => Kind::Scalar,
                })
            }
            Kind::Pkt(p) => {
                pkt_access(usize::from(ins.src), p, off, size)?;
                Ok(Kind::Scalar)
            }
            // What the packet holds is a number.
            Kind::Packet(_) => Ok(Kind::Scalar),
            Kind::Stack(k) => {
                stack_access("read from", usize::from(ins.src), k + off, size)?;
                Ok(if size < 8 { Kind::Scalar } else { Kind::Unknown })
            }
            Kind::Scalar | Kind::Const(_) | Kind::PktEnd => Err(not_memory(usize::from(ins.src), base)),
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
            Kind::Scalar | Kind::Const(_) | Kind::PktEnd => Err(not_memory(usize::from(ins.dst), base)),
            Kind::Pkt(p) => pkt_access(usize::from(ins.dst), p, off, size),
            // A map's fields may be read through its handle (recent kernels, with BTF); a packet
            // pointer moved by an unknown number is checked when the program runs.
            Kind::Unknown | Kind::Map(_) | Kind::Packet(_) => Ok(()),
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
        if mem_arg.is_some_and(|n| r[n].packet().is_some()) {
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

/// 64-bit arithmetic on kinds: constants move context, stack and packet pointers (a known
/// number in a register moves a packet pointer as a constant does, as in the kernel); anything
/// else on a pointer is not followed.
fn alu64(ins: Insn, dst: Kind, src: Kind) -> Kind {
    let x = ins.op & SRC_X != 0;
    let imm = i64::from(ins.imm);
    let op = ins.op & 0xf0;
    // The operand, where the check knows it.
    let known = match src {
        _ if !x => Some(imm),
        Kind::Const(c) => Some(c),
        _ => None,
    };
    let number = !x || src.is_scalar();
    match (op, dst) {
        (alu::MOV, _) if x && ins.off == 0 => src,
        (alu::MOV, _) if x => Kind::Unknown,
        (alu::MOV, _) => Kind::Const(imm),
        (alu::ADD, Kind::Ctx(k)) if !x => Kind::Ctx(k + imm),
        (alu::SUB, Kind::Ctx(k)) if !x => Kind::Ctx(k - imm),
        (alu::ADD, Kind::Stack(k)) if !x => Kind::Stack(k + imm),
        (alu::SUB, Kind::Stack(k)) if !x => Kind::Stack(k - imm),
        (alu::ADD | alu::SUB, Kind::Pkt(p)) if number => {
            let moved = known
                .and_then(|c| if op == alu::ADD { Some(c) } else { c.checked_neg() })
                .and_then(|c| p.off.checked_add(c))
                .filter(|o| o.abs() < MAX_VAR_OFF);
            // An unknown number gives the kernel a new pointer id with no range: not followed.
            moved.map_or(Kind::Packet(p.meta), |off| Kind::Pkt(Pkt { off, ..p }))
        }
        (alu::ADD | alu::SUB, Kind::Packet(m)) if number => Kind::Packet(m),
        (alu::ADD, Kind::Const(c)) if number => known
            .and_then(|k| c.checked_add(k))
            .map_or(Kind::Scalar, Kind::Const),
        (alu::SUB, Kind::Const(c)) if number => known
            .and_then(|k| c.checked_sub(k))
            .map_or(Kind::Scalar, Kind::Const),
        (_, Kind::Scalar | Kind::Const(_)) if number => Kind::Scalar,
        _ => Kind::Unknown,
    }
}

/// Whether helper `id` may move the packet (the kernel's `bpf_helper_changes_pkt_data`, for
/// the XDP helpers).
const fn moves_packet(id: i32) -> bool {
    matches!(id, h::XDP_ADJUST_HEAD | h::XDP_ADJUST_META | h::XDP_ADJUST_TAIL)
}

/// An access of `size` bytes at `off` through packet pointer `p` in register `reg`: within the
/// range a comparison proved (the kernel's `check_packet_access`).
fn pkt_access(reg: usize, p: Pkt, off: i64, size: i64) -> Result<(), String> {
    let at = p.off.saturating_add(off);
    if p.range == UNBOUNDED || (at >= 0 && at.saturating_add(size) <= p.range) {
        return Ok(());
    }
    if p.range < 0 {
        return Err(format!("R{reg} offset is outside of the packet"));
    }
    Err(format!(
        "invalid access to packet, off={at} size={size}, R{reg}(id=0,off={at},r={}) | R{reg} offset is outside of the packet",
        p.range
    ))
}

/// Raises to `range` the range of every followed packet pointer (from `data_meta` if `meta` is
/// `Some(true)`, from `data` if `Some(false)`, both if `None`): what the kernel's
/// `find_good_pkt_pointers` does for the pointers of one id.
fn set_ranges(r: &mut Regs, meta: Option<bool>, range: i64) {
    for k in r.iter_mut() {
        if let Kind::Pkt(p) = k {
            if meta.is_none_or(|m| m == p.meta) {
                p.range = p.range.max(range);
            }
        }
    }
}

/// Whether `end` bounds packet pointer `p` in a comparison the kernel matches
/// (`try_match_pkt_pointers`): `data_end` for a pointer from `data`, `data` itself (not moved)
/// for one from `data_meta`. A register the check does not follow may be either.
fn bounds(p: Pkt, end: Kind) -> bool {
    match end {
        Kind::Unknown => true,
        Kind::PktEnd => !p.meta,
        Kind::Pkt(d) => p.meta && !d.meta && d.off == 0,
        _ => false,
    }
}

/// What a conditional jump proves about the packet: the registers on the fall-through and on
/// the taken branch (`None`: the kernel knows that branch is not taken). Only 64-bit unsigned
/// comparisons of two registers are matched, as in the kernel (`try_match_pkt_pointers`):
/// `p OP end` or `end OP p` for a packet pointer `p` and its end.
fn compare(ins: Insn, r: Regs) -> [Option<Regs>; 2] {
    let op = ins.op & 0xf0;
    let regs = (usize::from(ins.dst).min(10), usize::from(ins.src).min(10));
    let (d, s) = (r[regs.0], r[regs.1]);
    // The packet pointer on the left: `end > p` is `p < end`, and so on.
    let flipped = match op {
        jmp::JGT => jmp::JLT,
        jmp::JLT => jmp::JGT,
        jmp::JGE => jmp::JLE,
        _ => jmp::JGE,
    };
    let (p, reg, end, op) = match (d, s) {
        _ if ins.op & 7 != class::JMP
            || ins.op & SRC_X == 0
            || !matches!(op, jmp::JGT | jmp::JGE | jmp::JLT | jmp::JLE) =>
        {
            return [Some(r), Some(r)];
        }
        (Kind::Pkt(p), e) if bounds(p, e) => (p, regs.0, e, op),
        (e, Kind::Pkt(p)) if bounds(p, e) => (p, regs.1, e, flipped),
        _ => return unfollowed(r, d, s),
    };
    let exact_end = end == Kind::PktEnd;
    if exact_end && p.range < 0 {
        // A pointer known to lie at or past the end (the kernel's is_pkt_ptr_branch_taken).
        let taken = match op {
            jmp::JGT | jmp::JLE if p.range == BEYOND_END => Some(op == jmp::JGT),
            jmp::JLT | jmp::JGE => Some(op == jmp::JGE),
            _ => None,
        };
        match taken {
            Some(true) => return [None, Some(r)],
            Some(false) => return [Some(r), None],
            None => {}
        }
    }
    // `p > end` and `p >= end` are safe when not taken; `p < end` and `p <= end` when taken. A
    // strict `p < end` (or not `p >= end`) proves one byte more.
    let (mut fall, mut taken) = (r, r);
    let open = matches!(op, jmp::JGE | jmp::JLT);
    let (safe, past) = if matches!(op, jmp::JGT | jmp::JGE) {
        (&mut fall, &mut taken)
    } else {
        (&mut taken, &mut fall)
    };
    if p.off >= 0 && !(p.off == 0 && open) && p.off <= MAX_PACKET_OFF {
        set_ranges(safe, Some(p.meta), p.off + i64::from(open));
    }
    if exact_end {
        // The kernel's mark_pkt_end: on the other branch this register lies at or past the end.
        let range = if open { AT_END } else { BEYOND_END };
        past[reg] = Kind::Pkt(Pkt { range, ..p });
    }
    if end == Kind::Unknown && !p.meta && p.off == 0 {
        // The register may be a pointer from data_meta, bounded by this one in the kernel.
        set_ranges(&mut fall, Some(true), UNBOUNDED);
        set_ranges(&mut taken, Some(true), UNBOUNDED);
    }
    [Some(fall), Some(taken)]
}

/// A comparison the kernel does not match as the check sees it: a register the check does not
/// follow may be a packet pointer (or its end) the kernel matches, so nothing about the packet
/// is refused after it.
fn unfollowed(r: Regs, d: Kind, s: Kind) -> [Option<Regs>; 2] {
    let loose = |k: Kind| matches!(k, Kind::Unknown | Kind::Packet(_));
    let packetish = |k: Kind| k.packet().is_some() || matches!(k, Kind::Unknown | Kind::PktEnd);
    let mut r = r;
    if (loose(d) || loose(s)) && packetish(d) && packetish(s) {
        set_ranges(&mut r, None, UNBOUNDED);
    }
    [Some(r), Some(r)]
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

/// A load or store through a number (a NULL the program did not check) or the packet's end.
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
