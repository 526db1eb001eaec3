//! Load-time checks of a program's instructions: every opcode known, every register real, every
//! jump and call landing on an instruction of the program, every helper and kfunc provided, no
//! way to fall off the end. What cannot be known before running (addresses, the number of
//! instructions a run takes) is checked by the interpreter.

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use crate::insn::{self, alu, class, jmp, mem, pseudo, Insn, SRC_X};
use crate::program::Program;
use crate::LoadError;

/// The frame pointer, read-only.
const R10: u8 = 10;

/// Checks `p`: every instruction its entry can reach (through jumps, calls and callback
/// references); the error names the instruction, its function and what is wrong with it. Code no
/// path reaches (another program of the same section, a subprogram nothing calls) is not checked
/// and never runs: a refusal always belongs to this program.
///
/// # Errors
///
/// The first reachable instruction the engine cannot run.
pub fn validate(p: &Program) -> Result<(), LoadError> {
    reachable(p).map(|_| ())
}

/// The slots program `p` can reach from its entry (each checked), in a vector indexed by slot.
///
/// # Errors
///
/// As [`validate`].
pub fn reachable(p: &Program) -> Result<Vec<bool>, LoadError> {
    walk(p, &[], true)
}

/// [`reachable`], leaving the slots of `unchecked` (sorted; instructions whose relocation failed,
/// which the loader reports itself when they are reachable) unchecked; with `check` false,
/// nothing is checked and paths that leave the code are not followed (a first look, to report a
/// failed relocation before what it may have caused).
pub(crate) fn walk(p: &Program, unchecked: &[usize], check_all: bool) -> Result<Vec<bool>, LoadError> {
    let code = p.code();
    let name = p.name();
    if code.is_empty() {
        return Err(LoadError::new(format!("program {name} has no instructions")));
    }
    let second = lddw_seconds(code);
    if p.entry() >= code.len() || second[p.entry()] {
        return Err(LoadError::new(format!(
            "program {name}: entry point outside its code"
        )));
    }
    let mut seen = vec![false; code.len()];
    let mut todo = vec![p.entry()];
    seen[p.entry()] = true;
    while let Some(i) = todo.pop() {
        let at = |why: String| {
            let (f, o) = p.locate(i);
            LoadError::new(format!(
                "program {name}, instruction {i} ({}+{o}), opcode {:#04x}: {why}",
                f.unwrap_or("?"),
                code[i].op
            ))
        };
        let nexts = if !check_all {
            successors(code, i)
        } else if unchecked.binary_search(&i).is_ok() {
            let len = if code[i].op == insn::LDDW { 2 } else { 1 };
            [Some(i + len), None]
        } else {
            check(code, i, &second).map_err(at)?;
            successors(code, i)
        };
        for next in nexts.into_iter().flatten() {
            if !check_all && (next >= code.len() || second[next]) {
                continue;
            }
            if next >= code.len() || second[next] {
                return Err(at(
                    "the program can run past this instruction off its end, or into the middle of an lddw"
                        .into(),
                ));
            }
            if !core::mem::replace(&mut seen[next], true) {
                todo.push(next);
            }
        }
    }
    Ok(seen)
}

/// Which slots are the second half of an `lddw` (no jump may land there).
fn lddw_seconds(code: &[Insn]) -> Vec<bool> {
    let mut second = vec![false; code.len()];
    let mut i = 0;
    while i < code.len() {
        if code[i].op == insn::LDDW {
            if let Some(s) = second.get_mut(i + 1) {
                *s = true;
            }
            i += 2;
        } else {
            i += 1;
        }
    }
    second
}

/// Where control may go after checked instruction `i`: the next slot, a jump or call target, a
/// callback a `lddw` refers to.
fn successors(code: &[Insn], i: usize) -> [Option<usize>; 2] {
    let ins = code[i];
    let rel = |off: i64| usize::try_from(i as i64 + 1 + off).ok();
    let class = ins.op & 7;
    if ins.op == insn::LDDW {
        let callback = (ins.src == pseudo::FUNC)
            .then(|| rel(i64::from(ins.imm)))
            .flatten();
        return [Some(i + 2), callback];
    }
    if class != class::JMP && class != class::JMP32 {
        return [Some(i + 1), None];
    }
    match ins.op & 0xf0 {
        jmp::EXIT => [None, None],
        jmp::JA if class == class::JMP => [rel(i64::from(ins.off)), None],
        jmp::JA => [rel(i64::from(ins.imm)), None],
        jmp::CALL if ins.src == pseudo::CALL => [Some(i + 1), rel(i64::from(ins.imm))],
        jmp::CALL => [Some(i + 1), None],
        _ => [Some(i + 1), rel(i64::from(ins.off))],
    }
}

fn target_ok(code_len: usize, second: &[bool], i: usize, off: i64) -> Result<(), String> {
    let t = i as i64 + 1 + off;
    if t < 0 || t >= code_len as i64 {
        return Err(format!("jump to {t}, outside the program (0..{code_len})"));
    }
    if second[t as usize] {
        return Err(format!("jump to {t}, the middle of an lddw"));
    }
    Ok(())
}

fn check(code: &[Insn], i: usize, second: &[bool]) -> Result<(), String> {
    let ins = code[i];
    if ins.dst > R10 || ins.src > R10 {
        return Err(format!("register r{} does not exist", ins.dst.max(ins.src)));
    }
    let writes_dst = matches!(ins.op & 7, class::ALU | class::ALU64 | class::LDX | class::LD);
    if writes_dst && ins.dst == R10 {
        return Err("r10 (the frame pointer) is read-only".into());
    }
    match ins.op & 7 {
        class::LD => check_ld(code, i, second),
        class::LDX => match (ins.op & 0xe0, ins.op & 0x18) {
            (mem::MEM, _) | (mem::MEMSX, mem::B | mem::H | mem::W) => Ok(()),
            _ => Err("unknown load (packet loads LD_ABS/LD_IND are for socket filters, not XDP)".into()),
        },
        class::ST if ins.op & 0xe0 == mem::MEM => Ok(()),
        class::ST => Err("unknown store of an immediate".into()),
        class::STX => check_stx(ins),
        class::ALU | class::ALU64 => check_alu(ins),
        _ => check_jmp(code.len(), second, i, ins),
    }
}

fn check_ld(code: &[Insn], i: usize, second: &[bool]) -> Result<(), String> {
    let ins = code[i];
    if ins.op != insn::LDDW {
        return Err("only lddw is allowed in the LD class (LD_ABS/LD_IND are for socket filters)".into());
    }
    if ins.src == pseudo::FUNC {
        // A callback (bpf_loop): the address of a function of the program, pc-relative.
        target_ok(code.len(), second, i, i64::from(ins.imm))?;
    } else if ins.src != 0 {
        return Err(format!(
            "lddw with source {} (a map or function reference) that no relocation resolved",
            ins.src
        ));
    }
    match code.get(i + 1) {
        Some(n) if n.op == 0 && n.dst == 0 && n.src == 0 && n.off == 0 => Ok(()),
        _ => Err("lddw without a valid second half".into()),
    }
}

fn check_stx(ins: Insn) -> Result<(), String> {
    match ins.op & 0xe0 {
        mem::MEM => Ok(()),
        mem::ATOMIC => {
            if !matches!(ins.op & 0x18, mem::W | mem::DW) {
                return Err("atomic operations work on 4 or 8 bytes".into());
            }
            let op = ins.imm & !insn::atomic::FETCH;
            let known = matches!(
                op,
                insn::atomic::ADD | insn::atomic::OR | insn::atomic::AND | insn::atomic::XOR
            ) || ins.imm == insn::atomic::XCHG
                || ins.imm == insn::atomic::CMPXCHG;
            if known {
                Ok(())
            } else {
                Err(format!("atomic operation {:#x} is not supported", ins.imm))
            }
        }
        _ => Err("unknown store".into()),
    }
}

fn check_alu(ins: Insn) -> Result<(), String> {
    let wide = ins.op & 7 == class::ALU64;
    let x = ins.op & SRC_X != 0;
    let ok = match ins.op & 0xf0 {
        alu::ADD | alu::SUB | alu::MUL | alu::OR | alu::AND | alu::LSH | alu::RSH | alu::XOR | alu::ARSH => {
            ins.off == 0
        }
        alu::DIV | alu::MOD => ins.off == 0 || ins.off == 1,
        alu::NEG => !x && ins.off == 0,
        alu::MOV => ins.off == 0 || (x && matches!((wide, ins.off), (_, 8 | 16) | (true, 32))),
        alu::END => matches!(ins.imm, 16 | 32 | 64) && (!wide || !x),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err("unknown arithmetic instruction".into())
    }
}

fn check_jmp(len: usize, second: &[bool], i: usize, ins: Insn) -> Result<(), String> {
    let wide = ins.op & 7 == class::JMP;
    match ins.op & 0xf0 {
        jmp::JA if wide => target_ok(len, second, i, i64::from(ins.off)),
        // gotol (v4): the offset is in the immediate.
        jmp::JA => target_ok(len, second, i, i64::from(ins.imm)),
        jmp::EXIT if wide => Ok(()),
        jmp::CALL if wide => check_call(len, second, i, ins),
        jmp::JEQ
        | jmp::JGT
        | jmp::JGE
        | jmp::JSET
        | jmp::JNE
        | jmp::JSGT
        | jmp::JSGE
        | jmp::JLT
        | jmp::JLE
        | jmp::JSLT
        | jmp::JSLE => target_ok(len, second, i, i64::from(ins.off)),
        _ => Err("unknown jump".into()),
    }
}

fn check_call(len: usize, second: &[bool], i: usize, ins: Insn) -> Result<(), String> {
    match ins.src {
        0 if insn::helper::is_supported(ins.imm) => Ok(()),
        0 => {
            let names: alloc::vec::Vec<&str> = insn::helper::SUPPORTED.iter().map(|h| h.1).collect();
            Err(format!(
                "helper {} ({}) is not provided by onic-bpf (provided: {})",
                ins.imm,
                insn::helper::name(ins.imm).unwrap_or("unknown"),
                names.join(", ")
            ))
        }
        pseudo::CALL => target_ok(len, second, i, i64::from(ins.imm)),
        pseudo::KFUNC_CALL if insn::kfunc::SUPPORTED.iter().any(|k| k.0 == ins.imm) => Ok(()),
        s => Err(format!("call with source {s} (imm {}) is not supported", ins.imm)),
    }
}
