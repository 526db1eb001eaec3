//! Load-time checks of a program's instructions: every opcode known, every register real, every
//! jump and call landing on an instruction of the program, every helper and kfunc provided, no
//! way to fall off the end. What cannot be known before running (addresses, the number of
//! instructions a run takes) is checked by the interpreter.

use alloc::format;
use alloc::string::String;
use alloc::vec;

use crate::insn::{self, alu, class, jmp, mem, pseudo, Insn, SRC_X};
use crate::program::Program;
use crate::LoadError;

/// The frame pointer, read-only.
const R10: u8 = 10;

/// Checks `p`; the error names the instruction and what is wrong with it.
///
/// # Errors
///
/// The first instruction the engine cannot run.
pub fn validate(p: &Program) -> Result<(), LoadError> {
    let code = p.code();
    let name = p.name();
    if code.is_empty() {
        return Err(LoadError::new(format!("program {name} has no instructions")));
    }
    let mut second = vec![false; code.len()];
    for (i, ins) in code.iter().enumerate() {
        if ins.op == insn::LDDW && !second[i] {
            if let Some(s) = second.get_mut(i + 1) {
                *s = true;
            }
        }
    }
    if p.entry() >= code.len() || second[p.entry()] {
        return Err(LoadError::new(format!(
            "program {name}: entry point outside its code"
        )));
    }
    let mut i = 0;
    while i < code.len() {
        let at = |why: String| {
            let (f, o) = p.locate(i);
            LoadError::new(format!(
                "program {name}, instruction {i} ({}+{o}), opcode {:#04x}: {why}",
                f.unwrap_or("?"),
                code[i].op
            ))
        };
        check(code, i, &second).map_err(at)?;
        i += if code[i].op == insn::LDDW { 2 } else { 1 };
    }
    let last = code[code.len() - 1];
    if second[code.len() - 1] || !(last.op == insn::EXIT || last.op == class::JMP | jmp::JA) {
        return Err(LoadError::new(format!(
            "program {name}: the last instruction is neither exit nor a jump, so a run could fall off the end"
        )));
    }
    Ok(())
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
        class::LD => check_ld(code, i),
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

fn check_ld(code: &[Insn], i: usize) -> Result<(), String> {
    let ins = code[i];
    if ins.op != insn::LDDW {
        return Err("only lddw is allowed in the LD class (LD_ABS/LD_IND are for socket filters)".into());
    }
    if ins.src != 0 {
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
