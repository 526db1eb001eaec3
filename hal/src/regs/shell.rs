//! Shell register space (BAR2): system configuration and the per-function QDMA subsystem blocks
//! (hardware.md §2). The CMAC subsystems and packet adapters are in [`super::cmac`].

use super::Reg;
use crate::id::{AbsQueueId, FunctionId};

/// BUILD_STATUS: build timestamp (RO).
pub const BUILD_STATUS: Reg<u32> = Reg::at(0x000);
/// SYSTEM_RESET: any write resets every shell and user block (WO).
pub const SYSTEM_RESET: Reg<u32> = Reg::at(0x004);
/// SYSTEM_STATUS: bit 0 = system reset done (RO).
pub const SYSTEM_STATUS: Reg<u32> = Reg::at(0x008);
/// SHELL_RESET: write 1 to a bit to reset that shell block; the bit self-clears (WO).
pub const SHELL_RESET: Reg<u32> = Reg::at(0x00C);
/// SHELL_STATUS: per-block "reset done"; a bit reads 0 while its block is in reset (RO).
pub const SHELL_STATUS: Reg<u32> = Reg::at(0x010);
/// USER_RESET: the same scheme for user-box blocks (WO).
pub const USER_RESET: Reg<u32> = Reg::at(0x014);
/// USER_STATUS: the same scheme for user-box blocks (RO).
pub const USER_STATUS: Reg<u32> = Reg::at(0x018);

/// SHELL_RESET / SHELL_STATUS bits as wired at the shell top level (hardware.md §2.2).
pub mod reset_bits {
    /// QDMA subsystem #0.
    pub const QDMA0: u32 = 1 << 0;
    /// QDMA subsystem #1 (dual-QDMA builds).
    pub const QDMA1: u32 = 1 << 1;
    /// CMAC subsystem 0.
    pub const CMAC0: u32 = 1 << 4;
    /// Packet adapter 0.
    pub const ADAPTER0: u32 = 1 << 5;
    /// CMAC subsystem 1.
    pub const CMAC1: u32 = 1 << 8;
    /// Packet adapter 1.
    pub const ADAPTER1: u32 = 1 << 9;

    /// The SHELL_RESET / SHELL_STATUS bit of CMAC subsystem `port` (0 or 1).
    #[must_use]
    pub const fn cmac(port: u8) -> u32 {
        if port == 0 {
            CMAC0
        } else {
            CMAC1
        }
    }
}

/// Base of function 0's QDMA subsystem block; function `f`'s block is at `+ 0x1000 * f`.
pub const QDMA_FUNC_BASE: u32 = 0x1000;
/// Stride between two functions' QDMA subsystem blocks.
pub const QDMA_FUNC_STRIDE: u32 = 0x1000;
/// QDMA subsystem-level block (documented counters, not implemented: reads 0xDEADBEEF).
pub const QDMA_SUBSYS_OFFSET: u32 = 0x5000;

/// Offset of QCONF within a function block: \[31:16\] qbase, \[15:0\] numq.
pub const QCONF_OFFSET: u32 = 0x000;
/// Offset of the indirection table within a function block.
pub const INDIR_TABLE_OFFSET: u32 = 0x400;
/// Offset of the hash key within a function block.
pub const HASH_KEY_OFFSET: u32 = 0x600;
/// Number of RSS indirection table entries.
pub const INDIR_TABLE_ENTRIES: usize = 128;
/// Number of 32-bit hash key registers (40 bytes).
pub const HASH_KEY_WORDS: usize = 10;
/// Bits of an indirection entry that hold the queue index; the upper half reads stale
/// (hardware.md §2.3).
pub const INDIR_ENTRY_MASK: u32 = 0xFFFF;

/// Base of function `func`'s QDMA subsystem block.
#[must_use]
pub const fn qdma_func_base(func: FunctionId) -> u32 {
    QDMA_FUNC_BASE + QDMA_FUNC_STRIDE * func.get() as u32
}

/// QCONF of function `func`.
#[must_use]
pub const fn qconf(func: FunctionId) -> Reg<u32> {
    Reg::at(qdma_func_base(func) + QCONF_OFFSET)
}

/// Indirection table entry `k` (0..128) of function `func`.
#[must_use]
pub const fn indir_table(func: FunctionId, k: usize) -> Reg<u32> {
    Reg::at(qdma_func_base(func) + INDIR_TABLE_OFFSET + 4 * k as u32)
}

/// Hash key register `k` (0..10) of function `func`.
#[must_use]
pub const fn hash_key(func: FunctionId, k: usize) -> Reg<u32> {
    Reg::at(qdma_func_base(func) + HASH_KEY_OFFSET + 4 * k as u32)
}

/// QCONF value: `qbase << 16 | numq`.
#[must_use]
pub const fn qconf_value(qbase: AbsQueueId, numq: u16) -> u32 {
    (qbase.get() as u32) << 16 | numq as u32
}

/// The hash key the RTL holds after reset, as register words 0..9 (hardware.md §9.3).
pub const DEFAULT_HASH_KEY_WORDS: [u32; HASH_KEY_WORDS] = [
    0xD6E31417, 0x376CC87E, 0x011BA7A6, 0xDC1B91BB, 0x7872E224, 0xBFD0404B, 0x260374B8, 0xD9270F6F,
    0x18DC4386, 0x7C9C37DE,
];

/// Start of the shell's register space within BAR2 as the driver maps it.
pub const SHELL_START: u32 = 0x0;
/// End of the mapped shell register space (4 MiB, CMS window included).
pub const SHELL_END: u32 = 0x40_0000;
