//! The eBPF instruction encoding: 8-byte slots (opcode, registers, offset, immediate), the opcode
//! fields, and the numbers of the helpers and map types the engine knows.
//!
//! Layout of one slot, little-endian: byte 0 opcode; byte 1 destination register (low nibble) and
//! source register (high nibble); bytes 2-3 signed offset; bytes 4-7 signed immediate. A 64-bit
//! immediate load (`lddw`) takes two slots; the second holds the upper 32 bits in its immediate.

/// Bytes per instruction slot.
pub const INSN_SIZE: usize = 8;

/// Instruction classes (low 3 bits of the opcode).
pub mod class {
    /// Non-standard loads (`lddw`; the legacy packet loads are refused).
    pub const LD: u8 = 0x00;
    /// Loads from memory into a register.
    pub const LDX: u8 = 0x01;
    /// Stores of an immediate.
    pub const ST: u8 = 0x02;
    /// Stores of a register, and atomic operations.
    pub const STX: u8 = 0x03;
    /// 32-bit arithmetic.
    pub const ALU: u8 = 0x04;
    /// Jumps with 64-bit comparisons, calls, exit.
    pub const JMP: u8 = 0x05;
    /// Jumps with 32-bit comparisons.
    pub const JMP32: u8 = 0x06;
    /// 64-bit arithmetic.
    pub const ALU64: u8 = 0x07;
}

/// Operand source bit of arithmetic and jump opcodes: immediate (K) or register (X).
pub const SRC_X: u8 = 0x08;

/// Arithmetic operations (high 4 bits of the opcode).
pub mod alu {
    #![allow(missing_docs)]
    pub const ADD: u8 = 0x00;
    pub const SUB: u8 = 0x10;
    pub const MUL: u8 = 0x20;
    pub const DIV: u8 = 0x30;
    pub const OR: u8 = 0x40;
    pub const AND: u8 = 0x50;
    pub const LSH: u8 = 0x60;
    pub const RSH: u8 = 0x70;
    pub const NEG: u8 = 0x80;
    pub const MOD: u8 = 0x90;
    pub const XOR: u8 = 0xa0;
    pub const MOV: u8 = 0xb0;
    pub const ARSH: u8 = 0xc0;
    /// Byte order conversion (ALU: to little/big endian; ALU64: unconditional swap, v4).
    pub const END: u8 = 0xd0;
}

/// Jump operations (high 4 bits of the opcode).
pub mod jmp {
    #![allow(missing_docs)]
    pub const JA: u8 = 0x00;
    pub const JEQ: u8 = 0x10;
    pub const JGT: u8 = 0x20;
    pub const JGE: u8 = 0x30;
    pub const JSET: u8 = 0x40;
    pub const JNE: u8 = 0x50;
    pub const JSGT: u8 = 0x60;
    pub const JSGE: u8 = 0x70;
    pub const CALL: u8 = 0x80;
    pub const EXIT: u8 = 0x90;
    pub const JLT: u8 = 0xa0;
    pub const JLE: u8 = 0xb0;
    pub const JSLT: u8 = 0xc0;
    pub const JSLE: u8 = 0xd0;
}

/// Memory access modes (high 3 bits of load/store opcodes) and sizes (bits 3-4).
pub mod mem {
    #![allow(missing_docs)]
    pub const IMM: u8 = 0x00;
    pub const ABS: u8 = 0x20;
    pub const IND: u8 = 0x40;
    pub const MEM: u8 = 0x60;
    /// Sign-extending load (v4).
    pub const MEMSX: u8 = 0x80;
    pub const ATOMIC: u8 = 0xc0;
    pub const W: u8 = 0x00;
    pub const H: u8 = 0x08;
    pub const B: u8 = 0x10;
    pub const DW: u8 = 0x18;
}

/// Atomic operations (the immediate of a `STX | ATOMIC` instruction).
pub mod atomic {
    #![allow(missing_docs)]
    pub const ADD: i32 = 0x00;
    pub const OR: i32 = 0x40;
    pub const AND: i32 = 0x50;
    pub const XOR: i32 = 0xa0;
    /// Flag: the old value is returned in the source register.
    pub const FETCH: i32 = 0x01;
    pub const XCHG: i32 = 0xe0 | FETCH;
    pub const CMPXCHG: i32 = 0xf0 | FETCH;
}

/// `lddw` (64-bit immediate load) opcode.
pub const LDDW: u8 = class::LD | mem::IMM | mem::DW;
/// `call` opcode.
pub const CALL: u8 = class::JMP | jmp::CALL;
/// `exit` opcode.
pub const EXIT: u8 = class::JMP | jmp::EXIT;

/// Source-register values that give `call` and `lddw` a special meaning (libbpf/kernel "pseudo"
/// values).
pub mod pseudo {
    /// `call`: to a function of the program (bpf-to-bpf), pc-relative.
    pub const CALL: u8 = 1;
    /// `call`: to a kernel function (kfunc).
    pub const KFUNC_CALL: u8 = 2;
    /// `lddw`: a map handle.
    pub const MAP_FD: u8 = 1;
    /// `lddw`: the address of a map value (global data).
    pub const MAP_VALUE: u8 = 2;
    /// `lddw`: the address of a function of the program (a `bpf_loop` callback), pc-relative.
    pub const FUNC: u8 = 4;
}

/// Size in bytes of a load/store size field.
#[must_use]
pub const fn size_bytes(op: u8) -> usize {
    match op & 0x18 {
        mem::W => 4,
        mem::H => 2,
        mem::B => 1,
        _ => 8,
    }
}

/// One decoded instruction slot.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Insn {
    /// Opcode.
    pub op: u8,
    /// Destination register (0..=15 as encoded; 0..=10 are valid).
    pub dst: u8,
    /// Source register.
    pub src: u8,
    /// Signed offset.
    pub off: i16,
    /// Signed immediate.
    pub imm: i32,
}

impl Insn {
    /// The instruction with these fields (for programs assembled by hand).
    #[must_use]
    pub const fn new(op: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        Self {
            op,
            dst,
            src,
            off,
            imm,
        }
    }

    /// `exit`.
    pub const EXIT: Self = Self::new(EXIT, 0, 0, 0, 0);

    /// Decodes one slot.
    #[must_use]
    pub const fn decode(b: [u8; INSN_SIZE]) -> Self {
        Self {
            op: b[0],
            dst: b[1] & 0x0f,
            src: b[1] >> 4,
            off: i16::from_le_bytes([b[2], b[3]]),
            imm: i32::from_le_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    /// Encodes it again.
    #[must_use]
    pub const fn encode(self) -> [u8; INSN_SIZE] {
        let o = self.off.to_le_bytes();
        let i = self.imm.to_le_bytes();
        [
            self.op,
            (self.dst & 0x0f) | (self.src << 4),
            o[0],
            o[1],
            i[0],
            i[1],
            i[2],
            i[3],
        ]
    }

    /// Decodes a byte string of whole slots (a trailing partial slot is ignored).
    #[must_use]
    pub fn decode_all(bytes: &[u8]) -> alloc::vec::Vec<Self> {
        bytes
            .chunks_exact(INSN_SIZE)
            .map(|c| {
                let mut b = [0u8; INSN_SIZE];
                b.copy_from_slice(c);
                Self::decode(b)
            })
            .collect()
    }
}

/// Helper functions by number (`enum bpf_func_id`), those the engine provides.
pub mod helper {
    #![allow(missing_docs)]
    pub const MAP_LOOKUP_ELEM: i32 = 1;
    pub const MAP_UPDATE_ELEM: i32 = 2;
    pub const MAP_DELETE_ELEM: i32 = 3;
    pub const KTIME_GET_NS: i32 = 5;
    pub const TRACE_PRINTK: i32 = 6;
    pub const GET_PRANDOM_U32: i32 = 7;
    pub const GET_SMP_PROCESSOR_ID: i32 = 8;
    pub const REDIRECT: i32 = 23;
    pub const CSUM_DIFF: i32 = 28;
    pub const XDP_ADJUST_HEAD: i32 = 44;
    pub const REDIRECT_MAP: i32 = 51;
    pub const XDP_ADJUST_META: i32 = 54;
    pub const XDP_ADJUST_TAIL: i32 = 65;
    pub const PERF_EVENT_OUTPUT: i32 = 25;
    pub const FIB_LOOKUP: i32 = 69;
    pub const SPIN_LOCK: i32 = 93;
    pub const SPIN_UNLOCK: i32 = 94;
    pub const KTIME_GET_BOOT_NS: i32 = 125;
    pub const KTIME_GET_COARSE_NS: i32 = 160;
    pub const CHECK_MTU: i32 = 163;
    pub const LOOP: i32 = 181;
    pub const XDP_GET_BUFF_LEN: i32 = 188;
    pub const XDP_LOAD_BYTES: i32 = 189;
    pub const XDP_STORE_BYTES: i32 = 190;
    pub const RINGBUF_OUTPUT: i32 = 130;
    pub const RINGBUF_RESERVE: i32 = 131;
    pub const RINGBUF_SUBMIT: i32 = 132;
    pub const RINGBUF_DISCARD: i32 = 133;
    pub const RINGBUF_QUERY: i32 = 134;
    pub const TAIL_CALL: i32 = 12;

    /// Every helper the engine provides, with its name.
    pub const SUPPORTED: &[(i32, &str)] = &[
        (MAP_LOOKUP_ELEM, "bpf_map_lookup_elem"),
        (MAP_UPDATE_ELEM, "bpf_map_update_elem"),
        (MAP_DELETE_ELEM, "bpf_map_delete_elem"),
        (KTIME_GET_NS, "bpf_ktime_get_ns"),
        (TRACE_PRINTK, "bpf_trace_printk"),
        (GET_PRANDOM_U32, "bpf_get_prandom_u32"),
        (GET_SMP_PROCESSOR_ID, "bpf_get_smp_processor_id"),
        (REDIRECT, "bpf_redirect"),
        (CSUM_DIFF, "bpf_csum_diff"),
        (XDP_ADJUST_HEAD, "bpf_xdp_adjust_head"),
        (REDIRECT_MAP, "bpf_redirect_map"),
        (XDP_ADJUST_META, "bpf_xdp_adjust_meta"),
        (XDP_ADJUST_TAIL, "bpf_xdp_adjust_tail"),
        (PERF_EVENT_OUTPUT, "bpf_perf_event_output"),
        (FIB_LOOKUP, "bpf_fib_lookup"),
        (SPIN_LOCK, "bpf_spin_lock"),
        (SPIN_UNLOCK, "bpf_spin_unlock"),
        (KTIME_GET_BOOT_NS, "bpf_ktime_get_boot_ns"),
        (KTIME_GET_COARSE_NS, "bpf_ktime_get_coarse_ns"),
        (CHECK_MTU, "bpf_check_mtu"),
        (LOOP, "bpf_loop"),
        (XDP_GET_BUFF_LEN, "bpf_xdp_get_buff_len"),
        (XDP_LOAD_BYTES, "bpf_xdp_load_bytes"),
        (XDP_STORE_BYTES, "bpf_xdp_store_bytes"),
        (RINGBUF_OUTPUT, "bpf_ringbuf_output"),
        (RINGBUF_RESERVE, "bpf_ringbuf_reserve"),
        (RINGBUF_SUBMIT, "bpf_ringbuf_submit"),
        (RINGBUF_DISCARD, "bpf_ringbuf_discard"),
        (RINGBUF_QUERY, "bpf_ringbuf_query"),
        (TAIL_CALL, "bpf_tail_call"),
    ];

    /// A few helpers XDP programs use that the engine does not provide, named in load errors.
    const OTHERS: &[(i32, &str)] = &[
        (4, "bpf_probe_read"),
        (34, "bpf_get_hash_recalc"),
        (42, "bpf_get_numa_node_id"),
        (84, "bpf_sk_lookup_tcp"),
        (85, "bpf_sk_lookup_udp"),
        (86, "bpf_sk_release"),
        (99, "bpf_skc_lookup_tcp"),
        (100, "bpf_tcp_check_syncookie"),
        (110, "bpf_tcp_gen_syncookie"),
        (112, "bpf_probe_read_kernel"),
        (114, "bpf_probe_read_kernel_str"),
        (121, "bpf_xdp_output"),
        (164, "bpf_for_each_map_elem"),
        (165, "bpf_snprintf"),
        (208, "bpf_ktime_get_tai_ns"),
    ];

    /// The name of helper `id`, if known.
    #[must_use]
    pub fn name(id: i32) -> Option<&'static str> {
        SUPPORTED
            .iter()
            .chain(OTHERS.iter())
            .find(|(n, _)| *n == id)
            .map(|(_, s)| *s)
    }

    /// Whether the engine provides helper `id`.
    #[must_use]
    pub fn is_supported(id: i32) -> bool {
        SUPPORTED.iter().any(|(n, _)| *n == id)
    }
}

/// Kernel functions (kfuncs) the engine provides, by the engine's own numbering (a call's
/// immediate after loading).
pub mod kfunc {
    /// `bpf_xdp_metadata_rx_hash(ctx, &hash, &type)`: the shell's RX hash of the frame.
    pub const XDP_METADATA_RX_HASH: i32 = 1;

    /// Every kfunc, with its name.
    pub const SUPPORTED: &[(i32, &str)] = &[(XDP_METADATA_RX_HASH, "bpf_xdp_metadata_rx_hash")];

    /// The engine's number for kfunc `name`.
    #[must_use]
    pub fn by_name(name: &str) -> Option<i32> {
        SUPPORTED.iter().find(|(_, n)| *n == name).map(|(i, _)| *i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_round_trip() {
        let i = Insn {
            op: 0x61,
            dst: 3,
            src: 1,
            off: -4,
            imm: -559_038_737,
        };
        assert_eq!(Insn::decode(i.encode()), i);
        // r3 = *(u32 *)(r1 + 4), as clang encodes it.
        let raw = [0x61, 0x13, 0x04, 0x00, 0, 0, 0, 0];
        let d = Insn::decode(raw);
        assert_eq!((d.op, d.dst, d.src, d.off, d.imm), (0x61, 3, 1, 4, 0));
        assert_eq!(size_bytes(d.op), 4);
        assert_eq!(atomic::AND, 0x50);
    }

    #[test]
    fn helper_names() {
        assert_eq!(helper::name(51), Some("bpf_redirect_map"));
        assert_eq!(helper::name(12), Some("bpf_tail_call"));
        assert!(helper::is_supported(12));
        assert!(helper::is_supported(65));
        assert_eq!(kfunc::by_name("bpf_xdp_metadata_rx_hash"), Some(1));
    }
}
