//! QDMA IP configuration space (BAR0), hardware.md §3, §5, §6, §11.
//!
//! All registers are 32-bit; offsets are bytes from the start of BAR0. Each register is a
//! [`Reg`] of its field layout from [`crate::layout`], or of `u32` where it has none.

use super::Reg;
use crate::id::{FunctionId, QueueId};
use crate::layout::{
    C2hPfchCfg, C2hPidxDb, C2hWbCoalCfg, CmptCidxDb, GlblDscCfg, GlblErrInt, H2cPidxDb, H2cReqThrot,
    IndCtxtCmd,
};

/// Number of entries in each of the global configuration tables (hardware.md §3.1).
pub const GLOBAL_TABLE_LEN: usize = 16;

/// CONFIG_BLOCK_ID: \[31:16\] block identifier (identification only).
pub const CONFIG_BLOCK_ID: Reg<u32> = Reg::at(0x000);
/// RAM_SBE_MASK: single-bit ECC error mask (hardware.md §3.3).
pub const RAM_SBE_MASK: Reg<u32> = Reg::at(0x0F0);
/// RAM_SBE_STS: single-bit ECC error status.
pub const RAM_SBE_STS: Reg<u32> = Reg::at(0x0F4);
/// RAM_DBE_MASK: double-bit ECC error mask.
pub const RAM_DBE_MASK: Reg<u32> = Reg::at(0x0F8);
/// RAM_DBE_STS: double-bit ECC error status.
pub const RAM_DBE_STS: Reg<u32> = Reg::at(0x0FC);
/// GLBL2_ID (identification only).
pub const GLBL2_ID: Reg<u32> = Reg::at(0x100);
/// GLBL2_CHANNEL_QDMA_CAP: \[11:0\] maximum number of queues.
pub const GLBL2_CHANNEL_QDMA_CAP: Reg<u32> = Reg::at(0x120);
/// GLBL2_MISC_CAP (identification only).
pub const GLBL2_MISC_CAP: Reg<u32> = Reg::at(0x134);

/// GLBL_RNG_SZ\[i\]: descriptor/completion ring sizes in entries, status slot included.
#[must_use]
pub const fn glbl_rng_sz(i: usize) -> Reg<u32> {
    Reg::at(0x204 + 4 * i as u32)
}

/// GLBL_ERR_STAT: global error status.
pub const GLBL_ERR_STAT: Reg<u32> = Reg::at(0x248);
/// GLBL_ERR_MASK: global error group enables (read-modify-write; hardware.md §11.3).
pub const GLBL_ERR_MASK: Reg<u32> = Reg::at(0x24C);
/// GLBL_DSC_CFG: writeback interval and descriptor fetch limit.
pub const GLBL_DSC_CFG: Reg<GlblDscCfg> = Reg::at(0x250);
/// GLBL_DSC_ERR_STS: descriptor error status.
pub const GLBL_DSC_ERR_STS: Reg<u32> = Reg::at(0x254);
/// GLBL_DSC_ERR_MSK: descriptor error mask.
pub const GLBL_DSC_ERR_MSK: Reg<u32> = Reg::at(0x258);
/// GLBL_TRQ_ERR_STS: target-request error status.
pub const GLBL_TRQ_ERR_STS: Reg<u32> = Reg::at(0x264);
/// GLBL_TRQ_ERR_MSK: target-request error mask.
pub const GLBL_TRQ_ERR_MSK: Reg<u32> = Reg::at(0x268);
/// GLBL_INTERRUPT_CFG: legacy INTx configuration (never written).
pub const GLBL_INTERRUPT_CFG: Reg<u32> = Reg::at(0x2C4);

/// Legacy direct FMAP register of function `func` (\[10:0\] qbase, \[22:11\] qmax); not used, the
/// indirect FMAP context is what counts (hardware.md §4.2).
#[must_use]
pub const fn glbl2_fmap(func: FunctionId) -> Reg<u32> {
    Reg::at(0x400 + 4 * func.get() as u32)
}

/// IND_CTXT_DATA\[i\], i = 0..7: context words W0..W7.
#[must_use]
pub const fn ind_ctxt_data(i: usize) -> Reg<u32> {
    Reg::at(0x804 + 4 * i as u32)
}
/// IND_CTXT_MASK\[i\], i = 0..7: per-bit write enables for W0..W7.
#[must_use]
pub const fn ind_ctxt_mask(i: usize) -> Reg<u32> {
    Reg::at(0x824 + 4 * i as u32)
}
/// IND_CTXT_CMD: \[0\] busy, \[4:1\] sel, \[6:5\] op, \[17:7\] qid.
pub const IND_CTXT_CMD: Reg<IndCtxtCmd> = Reg::at(0x844);
/// Number of IND_CTXT_DATA / IND_CTXT_MASK registers.
pub const IND_CTXT_WORDS: usize = 8;

/// C2H_TIMER_CNT\[i\]: completion timer values in timer ticks.
#[must_use]
pub const fn c2h_timer_cnt(i: usize) -> Reg<u32> {
    Reg::at(0xA00 + 4 * i as u32)
}
/// C2H_CNT_TH\[i\]: completion count thresholds.
#[must_use]
pub const fn c2h_cnt_th(i: usize) -> Reg<u32> {
    Reg::at(0xA40 + 4 * i as u32)
}
/// C2H_BUF_SZ\[i\]: C2H buffer sizes in bytes.
#[must_use]
pub const fn c2h_buf_sz(i: usize) -> Reg<u32> {
    Reg::at(0xAB0 + 4 * i as u32)
}
/// C2H_ERR_STAT: streaming C2H error status.
pub const C2H_ERR_STAT: Reg<u32> = Reg::at(0xAF0);
/// C2H_ERR_MASK: streaming C2H error mask.
pub const C2H_ERR_MASK: Reg<u32> = Reg::at(0xAF4);
/// C2H_FATAL_ERR_STAT: C2H fatal error status.
pub const C2H_FATAL_ERR_STAT: Reg<u32> = Reg::at(0xAF8);
/// C2H_FATAL_ERR_MASK: C2H fatal error mask.
pub const C2H_FATAL_ERR_MASK: Reg<u32> = Reg::at(0xAFC);
/// GLBL_ERR_INT: \[7:0\] func, \[22:12\] vector, \[24\] arm.
pub const GLBL_ERR_INT: Reg<GlblErrInt> = Reg::at(0xB04);
/// C2H_PFCH_CFG: prefetch configuration.
pub const C2H_PFCH_CFG: Reg<C2hPfchCfg> = Reg::at(0xB08);
/// C2H_INT_TIMER_TICK: timer tick length in user-clock cycles.
pub const C2H_INT_TIMER_TICK: Reg<u32> = Reg::at(0xB0C);
/// C2H_FIRST_ERR_QID: queue of the first C2H error.
pub const C2H_FIRST_ERR_QID: Reg<u32> = Reg::at(0xB30);
/// C2H_WB_COAL_CFG: completion writeback coalescing configuration.
pub const C2H_WB_COAL_CFG: Reg<C2hWbCoalCfg> = Reg::at(0xB50);
/// C2H_PFCH_CACHE_DEPTH: prefetch cache depth (read-only, hardware specific).
pub const C2H_PFCH_CACHE_DEPTH: Reg<u32> = Reg::at(0xBE0);
/// C2H_CMPL_COAL_BUF_DEPTH: completion coalesce buffer depth (read-only, hardware specific).
pub const C2H_CMPL_COAL_BUF_DEPTH: Reg<u32> = Reg::at(0xBE4);
/// H2C_ERR_STAT: streaming H2C error status.
pub const H2C_ERR_STAT: Reg<u32> = Reg::at(0xE00);
/// H2C_ERR_MASK: streaming H2C error mask.
pub const H2C_ERR_MASK: Reg<u32> = Reg::at(0xE04);
/// H2C_FIRST_ERR_QID: queue of the first H2C error.
pub const H2C_FIRST_ERR_QID: Reg<u32> = Reg::at(0xE08);
/// H2C_REQ_THROT: H2C request and data throttling.
pub const H2C_REQ_THROT: Reg<H2cReqThrot> = Reg::at(0xE24);

/// Start of the PF queue doorbell space; one 16-byte block per function-relative queue.
pub const DMAP_SEL_BASE: u32 = 0x18000;
/// Stride between two queues' doorbell blocks.
pub const DMAP_SEL_STRIDE: u32 = 16;

/// INTR_CIDX doorbell of function-relative queue `qid` (not used: no interrupt aggregation).
#[must_use]
pub const fn dmap_sel_int_cidx(qid: QueueId) -> Reg<u32> {
    Reg::at(DMAP_SEL_BASE + DMAP_SEL_STRIDE * qid.get() as u32)
}
/// H2C_DESC_PIDX doorbell of function-relative queue `qid`.
#[must_use]
pub const fn dmap_sel_h2c_dsc_pidx(qid: QueueId) -> Reg<H2cPidxDb> {
    Reg::at(DMAP_SEL_BASE + 0x4 + DMAP_SEL_STRIDE * qid.get() as u32)
}
/// C2H_DESC_PIDX doorbell of function-relative queue `qid`.
#[must_use]
pub const fn dmap_sel_c2h_dsc_pidx(qid: QueueId) -> Reg<C2hPidxDb> {
    Reg::at(DMAP_SEL_BASE + 0x8 + DMAP_SEL_STRIDE * qid.get() as u32)
}
/// CMPT_CIDX doorbell of function-relative queue `qid`.
#[must_use]
pub const fn dmap_sel_cmpt_cidx(qid: QueueId) -> Reg<CmptCidxDb> {
    Reg::at(DMAP_SEL_BASE + 0xC + DMAP_SEL_STRIDE * qid.get() as u32)
}

/// Values of the global tables as the reference driver programs them (hardware.md §3.1).
pub mod tables {
    use super::GLOBAL_TABLE_LEN;

    /// GLBL_RNG_SZ: ring sizes in entries, status slot included. Entry 0 is 4096.
    pub const RING_SIZES: [u32; GLOBAL_TABLE_LEN] = [
        4096, 64, 128, 192, 256, 384, 512, 768, 1024, 1536, 3072, 4096, 6144, 8192, 12288, 16384,
    ];
    /// C2H_BUF_SZ: C2H buffer sizes in bytes.
    pub const C2H_BUF_SIZES: [u32; GLOBAL_TABLE_LEN] = [
        4096, 256, 512, 1024, 2048, 3968, 4096, 4096, 4096, 4096, 4096, 4096, 4096, 8192, 9018, 16384,
    ];
    /// C2H_TIMER_CNT: completion timer values in ticks.
    pub const C2H_TIMER_COUNTS: [u32; GLOBAL_TABLE_LEN] =
        [10, 2, 4, 5, 8, 10, 15, 20, 25, 30, 50, 75, 100, 125, 150, 200];
    /// C2H_CNT_TH: completion count thresholds.
    pub const C2H_COUNT_THRESHOLDS: [u32; GLOBAL_TABLE_LEN] =
        [64, 2, 4, 8, 16, 24, 32, 48, 80, 96, 112, 128, 144, 160, 176, 192];
    /// C2H_INT_TIMER_TICK: 25 user-clock cycles = 100 ns at 250 MHz.
    pub const C2H_INT_TIMER_TICK_VALUE: u32 = 25;
    /// Length of one completion-timer tick in ns: [`C2H_INT_TIMER_TICK_VALUE`] cycles of the
    /// 250 MHz user clock (hardware.md §3.2).
    pub const C2H_TIMER_TICK_NS: u32 = C2H_INT_TIMER_TICK_VALUE * 4;
}

/// Error-mask programming of hardware.md §11.3 (values from §3.3), in the order the driver writes
/// them: (leaf mask register, value, GLBL_ERR_MASK group bit).
pub mod errors {
    use super::{
        Reg, C2H_ERR_MASK, C2H_ERR_STAT, C2H_FATAL_ERR_MASK, C2H_FATAL_ERR_STAT, GLBL_DSC_ERR_MSK,
        GLBL_DSC_ERR_STS, GLBL_TRQ_ERR_MSK, GLBL_TRQ_ERR_STS, H2C_ERR_MASK, H2C_ERR_STAT, RAM_DBE_MASK,
        RAM_DBE_STS, RAM_SBE_MASK, RAM_SBE_STS,
    };

    /// GLBL_ERR_MASK bit 0: RAM single-bit errors.
    pub const GROUP_RAM_SBE: u32 = 1 << 0;
    /// GLBL_ERR_MASK bit 1: RAM double-bit errors.
    pub const GROUP_RAM_DBE: u32 = 1 << 1;
    /// GLBL_ERR_MASK bit 2: descriptor errors.
    pub const GROUP_DSC: u32 = 1 << 2;
    /// GLBL_ERR_MASK bit 3: target-request errors.
    pub const GROUP_TRQ: u32 = 1 << 3;
    /// GLBL_ERR_MASK bit 8: streaming C2H errors (also C2H fatal errors).
    pub const GROUP_ST_C2H: u32 = 1 << 8;
    /// GLBL_ERR_MASK bit 11: streaming H2C errors, as the reference driver (and the QDMA 4.0 soft
    /// IP's older access layer) use it; newer access layers use bit 16 (hardware.md §15 item 2).
    pub const GROUP_ST_H2C_V4: u32 = 1 << 11;
    /// GLBL_ERR_MASK bit 16: streaming H2C errors in the newer access layers.
    pub const GROUP_ST_H2C_V5: u32 = 1 << 16;

    /// One leaf error group.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct LeafGroup {
        /// Leaf mask register.
        pub mask_reg: Reg<u32>,
        /// Value written to the leaf mask register.
        pub mask_value: u32,
        /// GLBL_ERR_MASK bit enabling the group.
        pub group_bit: u32,
    }

    /// The seven groups in programming order, with the reference driver's H2C bit.
    pub const LEAF_GROUPS: [LeafGroup; 7] = [
        LeafGroup {
            mask_reg: GLBL_DSC_ERR_MSK,
            mask_value: 0x01F9023F,
            group_bit: GROUP_DSC,
        },
        LeafGroup {
            mask_reg: GLBL_TRQ_ERR_MSK,
            mask_value: 0x0000000F,
            group_bit: GROUP_TRQ,
        },
        LeafGroup {
            mask_reg: C2H_ERR_MASK,
            mask_value: 0x0000FEDB,
            group_bit: GROUP_ST_C2H,
        },
        LeafGroup {
            mask_reg: C2H_FATAL_ERR_MASK,
            mask_value: 0x0007DF1B,
            group_bit: GROUP_ST_C2H,
        },
        LeafGroup {
            mask_reg: H2C_ERR_MASK,
            mask_value: 0x0000001F,
            group_bit: GROUP_ST_H2C_V4,
        },
        LeafGroup {
            mask_reg: RAM_SBE_MASK,
            mask_value: 0xFFFFFF11,
            group_bit: GROUP_RAM_SBE,
        },
        LeafGroup {
            mask_reg: RAM_DBE_MASK,
            mask_value: 0xFFFFFF11,
            group_bit: GROUP_RAM_DBE,
        },
    ];

    /// What each GLBL_ERR_STAT group bit stands for (hardware.md §3.3), for error reports.
    pub const GROUP_NAMES: [(u32, &str); 7] = [
        (GROUP_RAM_SBE, "RAM single-bit ECC"),
        (GROUP_RAM_DBE, "RAM double-bit ECC"),
        (GROUP_DSC, "descriptor"),
        (GROUP_TRQ, "target request"),
        (GROUP_ST_C2H, "streaming C2H"),
        (GROUP_ST_H2C_V4, "streaming H2C"),
        (GROUP_ST_H2C_V5, "streaming H2C"),
    ];

    /// One leaf status register (read-only, hardware.md §3.3) and the group bits of
    /// GLBL_ERR_STAT that summarize it.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct LeafStatus {
        /// The register's name.
        pub name: &'static str,
        /// The register.
        pub reg: Reg<u32>,
        /// GLBL_ERR_STAT bits of its group.
        pub group_bits: u32,
        /// The bits the QDMA defines in it (those the driver unmasks, hardware.md §3.3).
        pub bits: &'static [ErrBit],
    }

    /// One bit of a leaf status register: its field name in the QDMA IP's register reference
    /// (PG302, the IP's register access layer) and what it reports.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct ErrBit {
        /// Bit number.
        pub bit: u8,
        /// Field name.
        pub name: &'static str,
        /// What the QDMA saw.
        pub meaning: &'static str,
    }

    const fn b(bit: u8, name: &'static str, meaning: &'static str) -> ErrBit {
        ErrBit { bit, name, meaning }
    }

    /// GLBL_DSC_ERR_STS: the descriptor engine (mask 0x01F9023F).
    pub const DSC_ERR_BITS: [ErrBit; 14] = [
        b(0, "POISON", "a descriptor fetch completed poisoned"),
        b(1, "UR_CA", "a descriptor fetch was refused (UR or CA)"),
        b(
            2,
            "PARAM",
            "a descriptor fetch completion did not match its request",
        ),
        b(
            3,
            "ADDR",
            "a descriptor fetch completion for an unexpected address",
        ),
        b(4, "TAG", "a descriptor fetch completion with an unexpected tag"),
        b(5, "FLR", "a function-level reset hit descriptor processing"),
        b(9, "TIMEOUT", "a descriptor fetch timed out"),
        b(16, "DAT_POISON", "descriptor data arrived poisoned"),
        b(
            19,
            "FLR_CANCEL",
            "a descriptor fetch was cancelled by a function-level reset",
        ),
        b(20, "DMA", "the DMA engine failed a descriptor"),
        b(21, "DSC", "a producer index update the engine could not accept"),
        b(
            22,
            "RQ_CANCEL",
            "a descriptor fetch was cancelled: its queue was disabled",
        ),
        b(23, "DBE", "uncorrectable ECC error in a descriptor engine RAM"),
        b(24, "SBE", "corrected ECC error in a descriptor engine RAM"),
    ];

    /// GLBL_TRQ_ERR_STS: register accesses of the host (mask 0x0000000F).
    pub const TRQ_ERR_BITS: [ErrBit; 4] = [
        b(0, "UNMAPPED", "a register access to unmapped space"),
        b(
            1,
            "QID_RANGE",
            "a register access named a queue outside the function's range",
        ),
        b(
            2,
            "VF_ACCESS",
            "a virtual function accessed a register it may not",
        ),
        b(3, "TCP_TIMEOUT", "a register access timed out"),
    ];

    /// C2H_ERR_STAT: the streaming C2H engine (mask 0x0000FEDB).
    pub const C2H_ERR_BITS: [ErrBit; 13] = [
        b(0, "MTY_MISMATCH", "a packet's empty-byte count was inconsistent"),
        b(1, "LEN_MISMATCH", "a packet's length disagreed with its data"),
        b(3, "QID_MISMATCH", "a packet's queue id did not match its queue"),
        b(
            4,
            "DESC_RSP_ERR",
            "a C2H descriptor arrived with its error bit set",
        ),
        b(
            6,
            "ENG_WPL_DATA_PAR_ERR",
            "parity error in the engine's write payload",
        ),
        b(7, "MSI_INT_FAIL", "an MSI-X interrupt write failed"),
        b(9, "ERR_DESC_CNT", "descriptor count error"),
        b(
            10,
            "PORTID_CTXT_MISMATCH",
            "a packet's port id differs from its prefetch context's",
        ),
        b(
            11,
            "PORTID_BYP_IN_MISMATCH",
            "a packet's port id differs from the bypass input's",
        ),
        b(12, "CMPT_INV_Q_ERR", "a completion for an invalid queue"),
        b(13, "CMPT_QFULL_ERR", "a completion ring was full"),
        b(14, "CMPT_CIDX_ERR", "the driver wrote a bad completion CIDX"),
        b(15, "CMPT_PRTY_ERR", "parity error in a completion"),
    ];

    /// C2H_FATAL_ERR_STAT: C2H errors the engine cannot go on from (mask 0x0007DF1B).
    pub const C2H_FATAL_ERR_BITS: [ErrBit; 14] = [
        b(0, "MTY_MISMATCH", "a packet's empty-byte count was inconsistent"),
        b(1, "LEN_MISMATCH", "a packet's length disagreed with its data"),
        b(3, "QID_MISMATCH", "a packet's queue id did not match its queue"),
        b(
            4,
            "TIMER_FIFO_RAM_RDBE",
            "uncorrectable ECC error in the timer FIFO RAM",
        ),
        b(8, "PFCH_II_RAM_RDBE", "uncorrectable ECC error in a prefetch RAM"),
        b(
            9,
            "CMPT_CTXT_RAM_RDBE",
            "uncorrectable ECC error in the completion context RAM",
        ),
        b(
            10,
            "PFCH_CTXT_RAM_RDBE",
            "uncorrectable ECC error in the prefetch context RAM",
        ),
        b(
            11,
            "DESC_REQ_FIFO_RAM_RDBE",
            "uncorrectable ECC error in the descriptor request RAM",
        ),
        b(
            12,
            "INT_CTXT_RAM_RDBE",
            "uncorrectable ECC error in the interrupt context RAM",
        ),
        b(
            14,
            "CMPT_COAL_DATA_RAM_RDBE",
            "uncorrectable ECC error in the completion coalescing RAM",
        ),
        b(
            15,
            "TUSER_FIFO_RAM_RDBE",
            "uncorrectable ECC error in the TUSER FIFO RAM",
        ),
        b(
            16,
            "QID_FIFO_RAM_RDBE",
            "uncorrectable ECC error in the queue-id FIFO RAM",
        ),
        b(
            17,
            "PAYLOAD_FIFO_RAM_RDBE",
            "uncorrectable ECC error in the payload FIFO RAM",
        ),
        b(18, "WPL_DATA_PAR", "parity error in write payload data"),
    ];

    /// H2C_ERR_STAT: the streaming H2C engine (mask 0x0000001F).
    pub const H2C_ERR_BITS: [ErrBit; 5] = [
        b(0, "ZERO_LEN_DESC", "an H2C descriptor of length 0"),
        b(
            1,
            "CSI_MOP",
            "a descriptor without end of packet where one was needed",
        ),
        b(2, "NO_DMA_DSC", "a request came with no DMA descriptor"),
        b(3, "SBE", "corrected ECC error in H2C stream data"),
        b(4, "DBE", "uncorrectable ECC error in H2C stream data"),
    ];

    /// RAM_SBE_STS and RAM_DBE_STS: which RAM had the ECC error (mask 0xFFFFFF11).
    pub const RAM_ERR_BITS: [ErrBit; 25] = [
        b(0, "MI_H2C0_DAT", "H2C memory-mapped data buffer"),
        b(4, "MI_C2H0_DAT", "C2H memory-mapped data buffer"),
        b(9, "H2C_RD_BRG_DAT", "bridge master read data"),
        b(10, "H2C_WR_BRG_DAT", "bridge master write data"),
        b(11, "C2H_RD_BRG_DAT", "bridge slave read data buffer"),
        b(12, "C2H_WR_BRG_DAT", "bridge slave write data buffer"),
        b(13, "FUNC_MAP", "function map"),
        b(14, "DSC_HW_CTXT", "descriptor engine hardware context"),
        b(15, "DSC_CRD_RCV", "descriptor engine credit context"),
        b(16, "DSC_SW_CTXT", "descriptor engine software context"),
        b(17, "DSC_CPLI", "descriptor fetch completion information"),
        b(18, "DSC_CPLD", "descriptor fetch completion data"),
        b(19, "PASID_CTXT_RAM", "PASID configuration"),
        b(20, "TIMER_FIFO_RAM", "timer FIFO"),
        b(21, "PAYLOAD_FIFO_RAM", "C2H stream payload"),
        b(22, "QID_FIFO_RAM", "C2H stream queue-id FIFO"),
        b(23, "TUSER_FIFO_RAM", "C2H stream TUSER"),
        b(24, "WB_COAL_DATA_RAM", "completion coalescing data"),
        b(25, "INT_QID2VEC_RAM", "interrupt QID2VEC"),
        b(26, "INT_CTXT_RAM", "interrupt context"),
        b(27, "DESC_REQ_FIFO_RAM", "C2H stream descriptor request"),
        b(28, "PFCH_CTXT_RAM", "prefetch context"),
        b(29, "WB_CTXT_RAM", "completion context"),
        b(30, "PFCH_LL_RAM", "prefetch list"),
        b(31, "H2C_PEND_FIFO", "H2C pending FIFO"),
    ];

    /// The leaf status registers, in the order of [`LEAF_GROUPS`].
    pub const LEAF_STATUS: [LeafStatus; 7] = [
        LeafStatus {
            name: "GLBL_DSC_ERR_STS",
            reg: GLBL_DSC_ERR_STS,
            group_bits: GROUP_DSC,
            bits: &DSC_ERR_BITS,
        },
        LeafStatus {
            name: "GLBL_TRQ_ERR_STS",
            reg: GLBL_TRQ_ERR_STS,
            group_bits: GROUP_TRQ,
            bits: &TRQ_ERR_BITS,
        },
        LeafStatus {
            name: "C2H_ERR_STAT",
            reg: C2H_ERR_STAT,
            group_bits: GROUP_ST_C2H,
            bits: &C2H_ERR_BITS,
        },
        LeafStatus {
            name: "C2H_FATAL_ERR_STAT",
            reg: C2H_FATAL_ERR_STAT,
            group_bits: GROUP_ST_C2H,
            bits: &C2H_FATAL_ERR_BITS,
        },
        LeafStatus {
            name: "H2C_ERR_STAT",
            reg: H2C_ERR_STAT,
            group_bits: GROUP_ST_H2C_V4 | GROUP_ST_H2C_V5,
            bits: &H2C_ERR_BITS,
        },
        LeafStatus {
            name: "RAM_SBE_STS",
            reg: RAM_SBE_STS,
            group_bits: GROUP_RAM_SBE,
            bits: &RAM_ERR_BITS,
        },
        LeafStatus {
            name: "RAM_DBE_STS",
            reg: RAM_DBE_STS,
            group_bits: GROUP_RAM_DBE,
            bits: &RAM_ERR_BITS,
        },
    ];
}

#[cfg(test)]
mod tests {
    use super::errors::{LEAF_GROUPS, LEAF_STATUS};

    /// Each leaf's defined bits are what the driver unmasks in it (hardware.md §3.3), bit 8 of
    /// the RAM masks aside (unmasked, but the QDMA names no RAM there).
    #[test]
    fn leaf_bits_are_the_unmasked_bits() {
        for (leaf, group) in LEAF_STATUS.iter().zip(LEAF_GROUPS.iter()) {
            let defined = leaf.bits.iter().fold(0u32, |m, b| m | 1 << b.bit);
            let expected = if leaf.name.starts_with("RAM_") {
                group.mask_value & !(1 << 8)
            } else {
                group.mask_value
            };
            assert_eq!(defined, expected, "{}", leaf.name);
            assert!(leaf.bits.windows(2).all(|w| w[0].bit < w[1].bit), "{}", leaf.name);
            assert!(leaf
                .bits
                .iter()
                .all(|b| !b.name.is_empty() && b.meaning.len() < 64));
        }
    }
}
