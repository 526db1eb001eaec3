//! The interpreter: runs a validated program over one XDP buffer, with every memory access
//! checked against its region ([`crate::mem`]) and a budget of instructions per run.
//!
//! Arithmetic follows the eBPF instruction set: 32-bit operations zero the upper half; division
//! by zero gives 0 and modulo by zero leaves the dividend; shift counts are masked to the width;
//! the signed forms (v4) wrap on the one overflowing case. A bpf-to-bpf call saves r6-r9 and the
//! frame pointer and gives the callee the next 512-byte stack frame.

use core::fmt;

use onic_core::xdp::XdpBuff;

use crate::insn::{alu, class, jmp, mem as m, pseudo, Insn, SRC_X};
use crate::maps::Map;
use crate::mem::{self, Region};
use crate::program::Program;
use crate::Host;

/// Why a run stopped before `exit`. The run's verdict becomes XDP_ABORTED.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultKind {
    /// A load or store outside what its region allows.
    OutOfBounds {
        /// The address.
        addr: u64,
        /// Bytes.
        size: usize,
        /// The region's name.
        region: &'static str,
    },
    /// A store into read-only memory (the context, `.rodata`, a devmap value).
    ReadOnly {
        /// The address.
        addr: u64,
    },
    /// A load or store at a value that is no address (e.g. a NULL the program did not check).
    NotAnAddress {
        /// The value.
        addr: u64,
    },
    /// The instruction budget ran out (a loop that does not end).
    Budget {
        /// The budget.
        limit: u64,
    },
    /// More than [`mem::MAX_FRAMES`] nested calls.
    CallDepth,
    /// A jump or return to no instruction.
    BadPc,
    /// A helper was given an argument it cannot use.
    HelperArg {
        /// The helper.
        helper: &'static str,
        /// What is wrong.
        why: &'static str,
    },
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::OutOfBounds { addr, size, region } => {
                write!(
                    f,
                    "{size}-byte access at {} outside the {region}",
                    mem::Shown(*addr)
                )
            }
            Self::ReadOnly { addr } => write!(f, "store to read-only memory at {}", mem::Shown(*addr)),
            Self::NotAnAddress { addr } => {
                write!(f, "access through {}, which is no pointer", mem::Shown(*addr))
            }
            Self::Budget { limit } => write!(f, "instruction budget of {limit} exhausted"),
            Self::CallDepth => write!(f, "more than {} nested calls", mem::MAX_FRAMES),
            Self::BadPc => f.write_str("jump outside the program"),
            Self::HelperArg { helper, why } => write!(f, "{helper}: {why}"),
        }
    }
}

/// A fault and where it happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// The program it happened in: 0 the one entered, others reached by tail calls (their
    /// number in the engine's list).
    pub prog: usize,
    /// Instruction slot.
    pub pc: usize,
    /// What happened.
    pub kind: FaultKind,
}

/// The return slot of a frame a helper's callback runs in (no instruction has it).
const CALLBACK_RETURN: usize = usize::MAX;

/// Most tail calls one run may make (the kernel's `MAX_TAIL_CALL_CNT`).
pub const MAX_TAIL_CALLS: u32 = 33;

/// A caller's registers kept across a bpf-to-bpf call.
#[derive(Clone, Copy, Debug, Default)]
struct Frame {
    /// The program the caller runs (a tail call may have replaced the callee's).
    prog: usize,
    ret: usize,
    saved: [u64; 4],
    fp: u64,
}

/// Memory the interpreter keeps between runs (allocated once).
#[derive(Debug)]
pub struct Vm {
    stack: alloc::vec::Vec<u8>,
    /// Lowest stack byte written since the stack was last cleared.
    stack_low: usize,
    /// Room for helper arguments copied out of program memory (keys, values, strings).
    pub(crate) scratch: alloc::vec::Vec<u8>,
    /// The interfaces of a broadcast redirect (kept to reuse its allocation).
    pub(crate) targets: alloc::vec::Vec<u32>,
    budget: u64,
}

impl Vm {
    /// A machine with a budget of `budget` instructions per run and `scratch` bytes for helper
    /// arguments (the largest key plus the largest value of the object's maps).
    #[must_use]
    pub fn new(budget: u64, scratch: usize) -> Self {
        Self {
            stack: alloc::vec![0; mem::STACK_SIZE],
            stack_low: mem::STACK_SIZE,
            scratch: alloc::vec![0; scratch.max(64)],
            targets: alloc::vec::Vec::new(),
            budget: budget.max(1),
        }
    }

    /// Runs `progs[0]` on `buff` (the others are what its tail calls may reach, by their number
    /// in `progs`); returns r0 at exit and the instructions executed.
    ///
    /// # Errors
    ///
    /// The fault that stopped the run.
    pub fn run<H: Host>(
        &mut self,
        progs: &[Program],
        maps: &mut [Map],
        host: &mut H,
        buff: &mut XdpBuff<'_>,
    ) -> (Result<u64, Fault>, u64) {
        // What the last run wrote on the stack is cleared: every run starts from zeroes.
        if let Some(s) = self.stack.get_mut(self.stack_low..) {
            s.fill(0);
        }
        self.stack_low = mem::STACK_SIZE;
        let rxq = buff.rxq();
        let Some(prog) = progs.first() else {
            let f = Fault {
                prog: 0,
                pc: 0,
                kind: FaultKind::BadPc,
            };
            return (Err(f), 0);
        };
        let mut run = Run {
            regs: [0; 16],
            pc: prog.entry(),
            progs,
            cur: 0,
            tail_calls: 0,
            frames: [Frame::default(); mem::MAX_FRAMES],
            depth: 0,
            executed: 0,
            budget: self.budget,
            cpu: host.cpu(rxq) as usize,
            ifindex: host.ingress_ifindex(rxq),
            code: prog.code(),
            vm: self,
            maps,
            host,
            buff,
        };
        run.regs[1] = mem::addr(mem::CTX, 0);
        run.regs[10] = mem::addr(mem::STACK, mem::STACK_SIZE as u32);
        let r = run.go();
        (r, run.executed)
    }
}

/// One run in progress.
pub(crate) struct Run<'r, 'b, H> {
    pub(crate) regs: [u64; 16],
    pub(crate) pc: usize,
    /// Every program tail calls may reach; `cur` is the one running.
    pub(crate) progs: &'r [Program],
    pub(crate) cur: usize,
    pub(crate) tail_calls: u32,
    frames: [Frame; mem::MAX_FRAMES],
    depth: usize,
    executed: u64,
    budget: u64,
    pub(crate) cpu: usize,
    pub(crate) ifindex: u32,
    pub(crate) code: &'r [Insn],
    pub(crate) vm: &'r mut Vm,
    pub(crate) maps: &'r mut [Map],
    pub(crate) host: &'r mut H,
    pub(crate) buff: &'r mut XdpBuff<'b>,
}

/// 64-bit arithmetic; `off` selects the signed (v4) forms of DIV/MOD and MOVSX.
#[must_use]
pub fn alu64(op: u8, dst: u64, src: u64, off: i16, imm: i32) -> u64 {
    match op & 0xf0 {
        alu::ADD => dst.wrapping_add(src),
        alu::SUB => dst.wrapping_sub(src),
        alu::MUL => dst.wrapping_mul(src),
        alu::DIV if src == 0 => 0,
        alu::DIV if off == 1 => (dst as i64).wrapping_div(src as i64) as u64,
        alu::DIV => dst / src,
        alu::MOD if src == 0 => dst,
        alu::MOD if off == 1 => (dst as i64).wrapping_rem(src as i64) as u64,
        alu::MOD => dst % src,
        alu::OR => dst | src,
        alu::AND => dst & src,
        alu::XOR => dst ^ src,
        alu::LSH => dst << (src & 63),
        alu::RSH => dst >> (src & 63),
        alu::ARSH => ((dst as i64) >> (src & 63)) as u64,
        alu::NEG => (dst as i64).wrapping_neg() as u64,
        alu::MOV => match off {
            8 => src as i8 as i64 as u64,
            16 => src as i16 as i64 as u64,
            32 => src as i32 as i64 as u64,
            _ => src,
        },
        // BSWAP (v4): unconditional byte swap of the low `imm` bits.
        alu::END => bswap(dst, imm),
        _ => dst,
    }
}

fn bswap(v: u64, bits: i32) -> u64 {
    match bits {
        16 => u64::from((v as u16).swap_bytes()),
        32 => u64::from((v as u32).swap_bytes()),
        _ => v.swap_bytes(),
    }
}

/// 32-bit arithmetic (the result is zero-extended); END converts to little (`to_be` false) or
/// big endian, as a little-endian machine does.
#[must_use]
pub fn alu32(op: u8, dst: u64, src: u64, off: i16, imm: i32) -> u64 {
    let (d, s) = (dst as u32, src as u32);
    let r = match op & 0xf0 {
        alu::ADD => d.wrapping_add(s),
        alu::SUB => d.wrapping_sub(s),
        alu::MUL => d.wrapping_mul(s),
        alu::DIV if s == 0 => 0,
        alu::DIV if off == 1 => (d as i32).wrapping_div(s as i32) as u32,
        alu::DIV => d / s,
        alu::MOD if s == 0 => d,
        alu::MOD if off == 1 => (d as i32).wrapping_rem(s as i32) as u32,
        alu::MOD => d % s,
        alu::OR => d | s,
        alu::AND => d & s,
        alu::XOR => d ^ s,
        alu::LSH => d << (s & 31),
        alu::RSH => d >> (s & 31),
        alu::ARSH => ((d as i32) >> (s & 31)) as u32,
        alu::NEG => (d as i32).wrapping_neg() as u32,
        alu::MOV => match off {
            8 => s as i8 as i32 as u32,
            16 => s as i16 as i32 as u32,
            _ => s,
        },
        alu::END => {
            let to_be = op & SRC_X != 0;
            return match (imm, to_be) {
                (16, false) => dst & 0xffff,
                (32, false) => dst & 0xffff_ffff,
                (_, false) => dst,
                (b, true) => bswap(dst, b),
            };
        }
        _ => d,
    };
    u64::from(r)
}

/// Whether a conditional jump is taken; `wide` compares 64 bits, otherwise the low 32.
#[must_use]
pub fn taken(op: u8, a: u64, b: u64, wide: bool) -> bool {
    let (a, b, sa, sb) = if wide {
        (a, b, a as i64, b as i64)
    } else {
        let (a, b) = (u64::from(a as u32), u64::from(b as u32));
        (a, b, i64::from(a as u32 as i32), i64::from(b as u32 as i32))
    };
    match op & 0xf0 {
        jmp::JEQ => a == b,
        jmp::JNE => a != b,
        jmp::JGT => a > b,
        jmp::JGE => a >= b,
        jmp::JLT => a < b,
        jmp::JLE => a <= b,
        jmp::JSET => a & b != 0,
        jmp::JSGT => sa > sb,
        jmp::JSGE => sa >= sb,
        jmp::JSLT => sa < sb,
        jmp::JSLE => sa <= sb,
        _ => false,
    }
}

impl<H: Host> Run<'_, '_, H> {
    fn go(&mut self) -> Result<u64, Fault> {
        // The program counter and the count live in locals on the fast path; `self.pc` is
        // brought up to date around what reads it (jumps, calls, faults).
        let mut pc = self.pc;
        let r = loop {
            let Some(&ins) = self.code.get(pc) else {
                break Err(Fault {
                    prog: 0,
                    pc,
                    kind: FaultKind::BadPc,
                });
            };
            if self.executed == self.budget {
                break Err(Fault {
                    prog: 0,
                    pc,
                    kind: FaultKind::Budget { limit: self.budget },
                });
            }
            self.executed += 1;
            let (d, s) = (usize::from(ins.dst), usize::from(ins.src));
            match ins.op & 7 {
                class::ALU64 => {
                    let src = if ins.op & SRC_X != 0 {
                        self.regs[s]
                    } else {
                        ins.imm as i64 as u64
                    };
                    self.regs[d] = alu64(ins.op, self.regs[d], src, ins.off, ins.imm);
                    pc += 1;
                }
                class::ALU => {
                    let src = if ins.op & SRC_X != 0 {
                        self.regs[s]
                    } else {
                        ins.imm as i64 as u64
                    };
                    self.regs[d] = alu32(ins.op, self.regs[d], src, ins.off, ins.imm);
                    pc += 1;
                }
                class::JMP | class::JMP32 => {
                    self.pc = pc + 1;
                    match self.jump(ins) {
                        Ok(Some(r0)) => break Ok(r0),
                        Ok(None) => pc = self.pc,
                        Err(k) => break Err(Fault { prog: 0, pc, kind: k }),
                    }
                }
                class::LDX => {
                    let addr = self.regs[s].wrapping_add(ins.off as i64 as u64);
                    let size = crate::insn::size_bytes(ins.op);
                    match self.load(addr, size) {
                        Ok(v) if ins.op & 0xe0 == m::MEMSX => self.regs[d] = sign_extend(v, size),
                        Ok(v) => self.regs[d] = v,
                        Err(k) => break Err(Fault { prog: 0, pc, kind: k }),
                    }
                    pc += 1;
                }
                class::ST | class::STX => {
                    if let Err(k) = self.store_insn(ins) {
                        break Err(Fault { prog: 0, pc, kind: k });
                    }
                    pc += 1;
                }
                _ => {
                    // lddw (the only LD instruction validation lets through).
                    let hi = self.code.get(pc + 1).map_or(0, |n| n.imm as u32);
                    self.regs[d] = if ins.src == pseudo::FUNC {
                        // Validated: the slot lies in the program.
                        mem::addr(mem::FUNC, (pc as i64 + 1 + i64::from(ins.imm)) as u32)
                    } else {
                        u64::from(ins.imm as u32) | (u64::from(hi) << 32)
                    };
                    pc += 2;
                }
            }
        };
        self.pc = pc;
        r.map_err(|f| Fault { prog: self.cur, ..f })
    }

    /// A jump, call or exit; `Some(r0)` when the program returns.
    fn jump(&mut self, ins: Insn) -> Result<Option<u64>, FaultKind> {
        let wide = ins.op & 7 == class::JMP;
        match ins.op & 0xf0 {
            jmp::JA => {
                let off = if wide {
                    i64::from(ins.off)
                } else {
                    i64::from(ins.imm)
                };
                self.pc = self.target(off)?;
            }
            jmp::CALL => match ins.src {
                pseudo::CALL => self.call_local(ins.imm)?,
                pseudo::KFUNC_CALL => self.regs[0] = self.kfunc(ins.imm)?,
                // A tail call that succeeds replaces the running program; one that fails goes
                // on with the next instruction.
                _ if ins.imm == crate::insn::helper::TAIL_CALL => self.tail_call()?,
                _ => self.regs[0] = self.helper(ins.imm)?,
            },
            jmp::EXIT => {
                if self.depth == 0 {
                    return Ok(Some(self.regs[0]));
                }
                self.depth -= 1;
                let f = self.frames[self.depth];
                self.regs[6..10].copy_from_slice(&f.saved);
                self.regs[10] = f.fp;
                self.cur = f.prog;
                self.code = self.progs.get(f.prog).map_or(&[], |p| p.code());
                if f.ret == CALLBACK_RETURN {
                    // The end of a callback a helper called: back to the helper.
                    return Ok(Some(self.regs[0]));
                }
                self.pc = f.ret;
            }
            _ => {
                let b = if ins.op & SRC_X != 0 {
                    self.regs[usize::from(ins.src)]
                } else {
                    ins.imm as i64 as u64
                };
                if taken(ins.op, self.regs[usize::from(ins.dst)], b, wide) {
                    self.pc = self.target(i64::from(ins.off))?;
                }
            }
        }
        Ok(None)
    }

    fn target(&self, off: i64) -> Result<usize, FaultKind> {
        let t = self.pc as i64 + off;
        if t < 0 || t as usize >= self.code.len() {
            return Err(FaultKind::BadPc);
        }
        Ok(t as usize)
    }

    /// Calls the function at `slot` with `args` in r1 and r2 (a helper's callback, such as
    /// `bpf_loop`'s) in the next stack frame and runs it to its return: its r0. The caller's
    /// registers are as they were before (a helper call clobbers only r0-r5).
    pub(crate) fn call_callback(&mut self, slot: usize, args: [u64; 2]) -> Result<u64, FaultKind> {
        if self.depth + 1 >= mem::MAX_FRAMES {
            return Err(FaultKind::CallDepth);
        }
        let (regs, pc) = (self.regs, self.pc);
        self.frames[self.depth] = Frame {
            prog: self.cur,
            ret: CALLBACK_RETURN,
            saved: [regs[6], regs[7], regs[8], regs[9]],
            fp: regs[10],
        };
        self.depth += 1;
        self.regs[10] = mem::addr(
            mem::STACK,
            (mem::STACK_SIZE - self.depth * mem::FRAME_SIZE) as u32,
        );
        self.regs[1] = args[0];
        self.regs[2] = args[1];
        self.pc = slot;
        let r = self.go();
        self.regs = regs;
        self.pc = pc;
        r.map_err(|f| f.kind)
    }

    fn call_local(&mut self, imm: i32) -> Result<(), FaultKind> {
        if self.depth + 1 >= mem::MAX_FRAMES {
            return Err(FaultKind::CallDepth);
        }
        let target = self.target(i64::from(imm))?;
        let mut saved = [0; 4];
        saved.copy_from_slice(&self.regs[6..10]);
        self.frames[self.depth] = Frame {
            prog: self.cur,
            ret: self.pc,
            saved,
            fp: self.regs[10],
        };
        self.depth += 1;
        self.regs[10] = mem::addr(
            mem::STACK,
            (mem::STACK_SIZE - self.depth * mem::FRAME_SIZE) as u32,
        );
        self.pc = target;
        Ok(())
    }

    fn store_insn(&mut self, ins: Insn) -> Result<(), FaultKind> {
        let addr = self.regs[usize::from(ins.dst)].wrapping_add(ins.off as i64 as u64);
        let size = crate::insn::size_bytes(ins.op);
        let src = self.regs[usize::from(ins.src)];
        if ins.op & 7 == class::ST {
            return self.store(addr, size, ins.imm as i64 as u64);
        }
        if ins.op & 0xe0 != m::ATOMIC {
            return self.store(addr, size, src);
        }
        let old = self.load(addr, size)?;
        let narrow = |v: u64| if size == 4 { v & 0xffff_ffff } else { v };
        use crate::insn::atomic as a;
        match ins.imm {
            a::XCHG => {
                self.store(addr, size, src)?;
                self.regs[usize::from(ins.src)] = old;
            }
            a::CMPXCHG => {
                if old == narrow(self.regs[0]) {
                    self.store(addr, size, src)?;
                }
                self.regs[0] = old;
            }
            imm => {
                let new = match imm & !a::FETCH {
                    a::ADD => old.wrapping_add(src),
                    a::OR => old | src,
                    a::AND => old & src,
                    _ => old ^ src,
                };
                self.store(addr, size, new)?;
                if imm & a::FETCH != 0 {
                    self.regs[usize::from(ins.src)] = old;
                }
            }
        }
        Ok(())
    }

    fn ctx_load(&self, off: u32, size: usize) -> Result<u64, FaultKind> {
        let (meta, data, end) = self.buff.offsets();
        let pkt = |o: usize| mem::addr(mem::PACKET, o as u32);
        let bad = FaultKind::OutOfBounds {
            addr: mem::addr(mem::CTX, off),
            size,
            region: "context (struct xdp_md: six 4-byte fields)",
        };
        if size != 4 {
            return Err(bad);
        }
        Ok(match off {
            0 => pkt(data),
            4 => pkt(end),
            8 => pkt(meta),
            12 => u64::from(self.ifindex),
            16 => u64::from(self.buff.rx_queue_index()),
            // egress_ifindex: only devmap programs have one.
            20 => 0,
            _ => return Err(bad),
        })
    }

    /// Loads `size` bytes (1, 2, 4, 8) at `addr`, zero-extended.
    pub(crate) fn load(&mut self, addr: u64, size: usize) -> Result<u64, FaultKind> {
        // Fast paths read the value straight out of its slice; anything unusual (a packet access
        // straddling the metadata, a bad address) takes the general path and its error.
        let fast = match mem::region(addr) {
            Region::Ctx(off) => return self.ctx_load(off, size),
            Region::Stack(o) => get(&self.vm.stack, o as usize, size),
            Region::Packet(o) => {
                let (_, data, _) = self.buff.offsets();
                (o as usize)
                    .checked_sub(data)
                    .and_then(|i| get(self.buff.data(), i, size))
            }
            Region::MapValue(mi, o) => self
                .maps
                .get(mi)
                .and_then(|m| value_span(m, o, size).and_then(|r| get(m.storage(), r.start, size))),
            _ => None,
        };
        if let Some(v) = fast {
            return Ok(v);
        }
        let mut b = [0u8; 8];
        self.read(addr, &mut b[..size])?;
        Ok(u64::from_le_bytes(b))
    }

    /// Stores the low `size` bytes of `v` at `addr`.
    pub(crate) fn store(&mut self, addr: u64, size: usize, v: u64) -> Result<(), FaultKind> {
        let done = match mem::region(addr) {
            Region::Stack(o) => {
                let ok = put(&mut self.vm.stack, o as usize, size, v);
                if ok {
                    self.vm.stack_low = self.vm.stack_low.min(o as usize);
                }
                ok
            }
            Region::Packet(o) => {
                let (_, data, _) = self.buff.offsets();
                (o as usize)
                    .checked_sub(data)
                    .is_some_and(|i| put(self.buff.data_mut(), i, size, v))
            }
            _ => false,
        };
        if done {
            return Ok(());
        }
        let b = v.to_le_bytes();
        self.write(addr, &b[..size])
    }

    /// Copies program memory at `addr` into `out`.
    pub(crate) fn read(&mut self, addr: u64, out: &mut [u8]) -> Result<(), FaultKind> {
        let n = out.len();
        match mem::region(addr) {
            Region::Stack(o) => {
                let src = span(&self.vm.stack, o, n).ok_or(oob(addr, n, "stack"))?;
                out.copy_from_slice(src);
            }
            Region::Packet(o) => {
                let (meta, data, end) = self.buff.offsets();
                let o = o as usize;
                if o < meta || o.saturating_add(n) > end {
                    return Err(oob(addr, n, "packet (data_meta .. data_end)"));
                }
                for (i, b) in out.iter_mut().enumerate() {
                    let p = o + i;
                    *b = if p >= data {
                        self.buff.data()[p - data]
                    } else {
                        self.buff.meta()[p - meta]
                    };
                }
            }
            Region::MapValue(mi, o) => {
                let map = self.maps.get(mi).ok_or(FaultKind::NotAnAddress { addr })?;
                let src = value_span(map, o, n).ok_or(oob(addr, n, "map value"))?;
                out.copy_from_slice(&map.storage()[src]);
            }
            Region::Ctx(_) => return Err(oob(addr, n, "context (only its fields may be loaded)")),
            Region::MapHandle(_) | Region::Func(_) | Region::None => {
                return Err(FaultKind::NotAnAddress { addr })
            }
        }
        Ok(())
    }

    /// Copies `data` into program memory at `addr`.
    pub(crate) fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), FaultKind> {
        let n = data.len();
        match mem::region(addr) {
            Region::Stack(o) => {
                let dst = span_mut(&mut self.vm.stack, o, n).ok_or(oob(addr, n, "stack"))?;
                dst.copy_from_slice(data);
                self.vm.stack_low = self.vm.stack_low.min(o as usize);
            }
            Region::Packet(o) => {
                let (meta, d0, end) = self.buff.offsets();
                let o = o as usize;
                if o < meta || o.saturating_add(n) > end {
                    return Err(oob(addr, n, "packet (data_meta .. data_end)"));
                }
                for (i, &b) in data.iter().enumerate() {
                    let p = o + i;
                    if p >= d0 {
                        self.buff.data_mut()[p - d0] = b;
                    } else {
                        self.buff.meta_mut()[p - meta] = b;
                    }
                }
            }
            Region::MapValue(mi, o) => {
                let map = self.maps.get_mut(mi).ok_or(FaultKind::NotAnAddress { addr })?;
                if map.def().read_only || map.def().map_type.is_host_filled() {
                    return Err(FaultKind::ReadOnly { addr });
                }
                let dst = value_span(map, o, n).ok_or(oob(addr, n, "map value"))?;
                map.storage_mut()[dst].copy_from_slice(data);
            }
            Region::Ctx(_) => return Err(FaultKind::ReadOnly { addr }),
            Region::MapHandle(_) | Region::Func(_) | Region::None => {
                return Err(FaultKind::NotAnAddress { addr })
            }
        }
        Ok(())
    }
}

/// `size` bytes at `o` of `b`, little-endian.
#[inline]
fn get(b: &[u8], o: usize, size: usize) -> Option<u64> {
    let s = b.get(o..o.checked_add(size)?)?;
    Some(match *s {
        [a] => u64::from(a),
        [a, b] => u64::from(u16::from_le_bytes([a, b])),
        [a, b, c, d] => u64::from(u32::from_le_bytes([a, b, c, d])),
        [a, b, c, d, e, f, g, h] => u64::from_le_bytes([a, b, c, d, e, f, g, h]),
        _ => return None,
    })
}

/// Stores the low `size` bytes of `v` at `o` of `b`; false if it does not fit.
#[inline]
fn put(b: &mut [u8], o: usize, size: usize, v: u64) -> bool {
    let Some(s) = o.checked_add(size).and_then(|e| b.get_mut(o..e)) else {
        return false;
    };
    match size {
        1 => s[0] = v as u8,
        2 => s.copy_from_slice(&(v as u16).to_le_bytes()),
        4 => s.copy_from_slice(&(v as u32).to_le_bytes()),
        _ => s.copy_from_slice(&v.to_le_bytes()),
    }
    true
}

fn oob(addr: u64, size: usize, region: &'static str) -> FaultKind {
    FaultKind::OutOfBounds { addr, size, region }
}

fn span(b: &[u8], o: u32, n: usize) -> Option<&[u8]> {
    let o = o as usize;
    b.get(o..o.checked_add(n)?)
}

fn span_mut(b: &mut [u8], o: u32, n: usize) -> Option<&mut [u8]> {
    let o = o as usize;
    b.get_mut(o..o.checked_add(n)?)
}

/// The byte range of an access inside one value of `map`'s storage.
fn value_span(map: &Map, o: u32, n: usize) -> Option<core::ops::Range<usize>> {
    if let Some(r) = map.ring() {
        // A ring buffer's data area: only the data of a record reserved and not yet committed.
        return r.covers(o, n).then(|| o as usize..o as usize + n);
    }
    let vs = map.def().value_size as usize;
    let o = o as usize;
    let end = o.checked_add(n)?;
    if end > map.storage().len() || (o % vs) + n > vs {
        return None;
    }
    Some(o..end)
}

fn sign_extend(v: u64, size: usize) -> u64 {
    match size {
        1 => v as i8 as i64 as u64,
        2 => v as i16 as i64 as u64,
        4 => v as i32 as i64 as u64,
        _ => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn division_and_shift_edge_cases() {
        assert_eq!(alu64(alu::DIV, 7, 0, 0, 0), 0);
        assert_eq!(alu64(alu::MOD, 7, 0, 0, 0), 7);
        assert_eq!(alu32(alu::MOD, u64::MAX, 0, 0, 0), 0xffff_ffff);
        assert_eq!(
            alu64(alu::DIV, i64::MIN as u64, -1i64 as u64, 1, 0),
            i64::MIN as u64
        );
        assert_eq!(alu64(alu::MOD, i64::MIN as u64, -1i64 as u64, 1, 0), 0);
        assert_eq!(alu64(alu::DIV, -7i64 as u64, 2, 1, 0), -3i64 as u64);
        assert_eq!(alu32(alu::DIV, 0x8000_0000, 0xffff_ffff, 1, 0), 0x8000_0000);
        assert_eq!(alu64(alu::LSH, 1, 65, 0, 0), 2);
        assert_eq!(alu32(alu::LSH, 1, 33, 0, 0), 2);
        assert_eq!(alu64(alu::ARSH, 0x8000_0000_0000_0000, 63, 0, 0), u64::MAX);
        assert_eq!(alu32(alu::ARSH, 0x8000_0000, 31, 0, 0), 0xffff_ffff);
        assert_eq!(alu32(alu::ADD, 0xffff_ffff, 1, 0, 0), 0);
        assert_eq!(alu32(alu::NEG, 1, 0, 0, 0), 0xffff_ffff);
    }

    #[test]
    fn moves_and_byte_order() {
        assert_eq!(alu64(alu::MOV, 0, 0x80, 8, 0), u64::MAX - 0x7f);
        assert_eq!(alu64(alu::MOV, 0, 0x8000_0000, 32, 0), 0xffff_ffff_8000_0000);
        assert_eq!(alu32(alu::MOV, 0, 0xff80, 16, 0), 0xffff_ff80);
        assert_eq!(alu32(alu::END, 0x1122_3344_5566_7788, 0, 0, 16), 0x7788);
        assert_eq!(alu32(alu::END | SRC_X, 0x1122_3344_5566_7788, 0, 0, 16), 0x8877);
        assert_eq!(
            alu32(alu::END | SRC_X, 0x1122_3344_5566_7788, 0, 0, 32),
            0x8877_6655
        );
        assert_eq!(
            alu32(alu::END | SRC_X, 0x1122_3344_5566_7788, 0, 0, 64),
            0x8877_6655_4433_2211
        );
        assert_eq!(alu64(alu::END, 0x1122, 0, 0, 16), 0x2211);
    }

    #[test]
    fn comparisons() {
        assert!(taken(jmp::JSGT, 1, u64::MAX, true));
        assert!(!taken(jmp::JGT, 1, u64::MAX, true));
        // 32-bit compares look at the low halves only.
        assert!(taken(jmp::JEQ, 0x1_0000_0005, 5, false));
        assert!(taken(jmp::JSLT, 0xffff_ffff, 0, false));
        assert!(!taken(jmp::JSLT, 0xffff_ffff, 0, true));
        assert!(taken(jmp::JSET, 6, 2, true));
    }
}
