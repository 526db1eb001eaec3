//! The interrupt descriptor table: one small assembly stub per vector, a common entry that saves
//! the general-purpose registers and calls [`crate::irq::dispatch`], and a table of `int N`
//! snippets to raise any vector in software.
//!
//! Stable Rust has no `extern "x86-interrupt"` functions, so the entry is written here: the stub
//! for vector `v` pushes a zero error code unless the CPU pushed one, pushes `v`, and jumps to the
//! common entry. Every stub is 16 bytes long, so the stub of vector `v` sits at
//! `isr_stubs + 16 * v` and needs no table of addresses.

use core::arch::{asm, global_asm};
use core::cell::UnsafeCell;

/// Code segment selector of the 64-bit code descriptor (`boot.s`).
const KERNEL_CS: u16 = 0x08;
/// Gate type 0xE (64-bit interrupt gate: IF is cleared on entry), present, DPL 0.
const INTERRUPT_GATE: u8 = 0x8E;
/// Spacing of the stubs and of the `int N` snippets.
const STUB_BYTES: usize = 16;
const RAISE_BYTES: usize = 4;

global_asm!(
    ".section .text.isr, \"ax\"",
    ".balign 16",
    ".global isr_stubs",
    "isr_stubs:",
    ".set isr_vec, 0",
    ".rept 256",
    ".balign 16",
    // Vectors 8, 10-14, 17, 21, 29 and 30 come with an error code from the CPU.
    ".if (isr_vec == 8) || ((isr_vec >= 10) && (isr_vec <= 14)) || (isr_vec == 17) || (isr_vec == 21) || (isr_vec == 29) || (isr_vec == 30)",
    ".else",
    ".byte 0x6A, 0",       // push imm8 0: a dummy error code keeps one frame layout
    ".endif",
    ".byte 0x6A, isr_vec", // push imm8 (sign-extended; the handler masks it to 8 bits)
    "jmp isr_common",
    ".set isr_vec, isr_vec + 1",
    ".endr",
    "",
    // The CPU pushed SS, RSP, RFLAGS, CS, RIP on a 16-byte aligned stack; with the error code and
    // the vector that is 56 bytes, and 15 saved registers make 176: aligned again for the call.
    "isr_common:",
    "push r15", "push r14", "push r13", "push r12", "push r11", "push r10", "push r9", "push r8",
    "push rbp", "push rdi", "push rsi", "push rdx", "push rcx", "push rbx", "push rax",
    "mov rdi, rsp",
    "cld",
    "call {dispatch}",
    "pop rax", "pop rbx", "pop rcx", "pop rdx", "pop rsi", "pop rdi", "pop rbp",
    "pop r8", "pop r9", "pop r10", "pop r11", "pop r12", "pop r13", "pop r14", "pop r15",
    "add rsp, 16",
    "iretq",
    "",
    // raise_table + 4 * v: `int v; ret`, so software can raise a vector chosen at run time.
    ".balign 16",
    ".global raise_table",
    "raise_table:",
    ".set isr_vec, 0",
    ".rept 256",
    ".balign 4",
    ".byte 0xCD, isr_vec",
    "ret",
    ".set isr_vec, isr_vec + 1",
    ".endr",
    ".text",
    dispatch = sym isr_entry,
);

unsafe extern "C" {
    static isr_stubs: u8;
    static raise_table: u8;
}

/// The state saved on the stack by a stub and the common entry, lowest address first.
#[repr(C)]
#[derive(Debug)]
pub struct TrapFrame {
    pub rax: u64,
    pub rbx: u64,
    pub rcx: u64,
    pub rdx: u64,
    pub rsi: u64,
    pub rdi: u64,
    pub rbp: u64,
    pub r8: u64,
    pub r9: u64,
    pub r10: u64,
    pub r11: u64,
    pub r12: u64,
    pub r13: u64,
    pub r14: u64,
    pub r15: u64,
    /// The vector as the stub pushed it (sign-extended byte; see [`TrapFrame::vector`]).
    pub raw_vector: u64,
    /// The CPU's error code, or 0.
    pub error_code: u64,
    pub rip: u64,
    pub cs: u64,
    pub rflags: u64,
    pub rsp: u64,
    pub ss: u64,
}

impl TrapFrame {
    /// The interrupt vector.
    #[must_use]
    pub fn vector(&self) -> u8 {
        (self.raw_vector & 0xFF) as u8
    }
}

extern "C" fn isr_entry(frame: &mut TrapFrame) {
    crate::irq::dispatch(frame);
}

/// One 16-byte gate descriptor.
#[derive(Clone, Copy)]
#[repr(C)]
struct Gate {
    offset_low: u16,
    selector: u16,
    ist: u8,
    attributes: u8,
    offset_mid: u16,
    offset_high: u32,
    reserved: u32,
}

impl Gate {
    const MISSING: Self = Self {
        offset_low: 0,
        selector: 0,
        ist: 0,
        attributes: 0,
        offset_mid: 0,
        offset_high: 0,
        reserved: 0,
    };

    fn interrupt(handler: u64) -> Self {
        Self {
            offset_low: handler as u16,
            selector: KERNEL_CS,
            ist: 0,
            attributes: INTERRUPT_GATE,
            offset_mid: (handler >> 16) as u16,
            offset_high: (handler >> 32) as u32,
            reserved: 0,
        }
    }
}

#[repr(C, align(16))]
struct Table(UnsafeCell<[Gate; 256]>);

// SAFETY: the table is written once by `load`, before interrupts are enabled, on the only CPU;
// afterwards only the CPU reads it.
unsafe impl Sync for Table {}

static IDT: Table = Table(UnsafeCell::new([Gate::MISSING; 256]));

/// The operand of `lidt`: limit and linear base address.
#[repr(C, packed)]
struct Pointer {
    limit: u16,
    base: u64,
}

/// Fills every gate with its stub and loads the table. Call once, with interrupts disabled.
pub fn load() {
    let stubs = core::ptr::addr_of!(isr_stubs) as u64;
    // SAFETY: called once at boot with interrupts disabled, before any `lidt`: nothing else
    // reads or writes the table while this exclusive reference lives.
    let gates = unsafe { &mut *IDT.0.get() };
    for (v, gate) in gates.iter_mut().enumerate() {
        *gate = Gate::interrupt(stubs + (STUB_BYTES * v) as u64);
    }
    let pointer = Pointer {
        limit: (core::mem::size_of::<[Gate; 256]>() - 1) as u16,
        base: IDT.0.get() as u64,
    };
    // SAFETY: `pointer` describes the static, fully initialised table; every gate points at a
    // stub that saves state and returns with `iretq`.
    unsafe { asm!("lidt [{}]", in(reg) &raw const pointer, options(readonly, nostack, preserves_flags)) };
}

/// Raises interrupt `vector` in software (`int vector`), as a device's MSI-X message would: the
/// handler runs before this returns, whether or not interrupts are enabled.
pub fn raise(vector: u8) {
    let snippet = core::ptr::addr_of!(raise_table) as usize + RAISE_BYTES * usize::from(vector);
    // SAFETY: `snippet` is the `int vector; ret` pair for this vector in `raise_table`, code that
    // follows the C calling convention (it clobbers nothing but what the handler restores).
    let f: extern "C" fn() = unsafe { core::mem::transmute(snippet) };
    f();
}
