//! Checks the register maps in `onic_hal::regs` against the tables of the hardware reference
//! (`docs/hardware.md`, whose section numbers the `§N` comments below cite). Every expected value
//! below is typed in from those tables, section by section, independently of the code under test;
//! nothing is derived from the `regs` module.

use onic_hal::layout::{CtxtOp, IndCtxtCmd};
use onic_hal::regs::{cmac, qdma, shell};
use onic_hal::{AbsQueueId, BlockReg, FunctionId, QueueId, Reg};

fn pf(n: u8) -> FunctionId {
    FunctionId::new(n).unwrap()
}

// ------------------------------------------------------------------------------------------------
// §1.2: BAR2 mapping.

#[test]
fn s1_2_shell_window() {
    assert_eq!(shell::SHELL_START, 0x0);
    assert_eq!(shell::SHELL_END, 0x400000);
    assert_eq!(shell::SHELL_END - shell::SHELL_START, 4 << 20);
}

// ------------------------------------------------------------------------------------------------
// §2.1: top-level map (only the blocks the register modules address).

#[test]
fn s2_1_block_bases() {
    assert_eq!(cmac::cmac_base(0), 0x8000);
    assert_eq!(cmac::cmac_base(1), 0xC000);
    assert_eq!(cmac::adapter_base(0), 0xB000);
    assert_eq!(cmac::adapter_base(1), 0xF000);
    assert_eq!(cmac::MAX_PORTS, 2);
    assert_eq!(shell::QDMA_SUBSYS_OFFSET, 0x5000);
    for func in 0..onic_hal::id::MAX_FUNCTIONS {
        let base = shell::qdma_func_base(pf(func));
        assert!(
            (0x1000..0x5000).contains(&base),
            "function {func} block at {base:#x}"
        );
    }
    assert_eq!(onic_hal::id::MAX_FUNCTIONS, 4);
}

// ------------------------------------------------------------------------------------------------
// §2.2: system configuration block.

#[test]
fn s2_2_system_configuration() {
    let table = [
        (shell::BUILD_STATUS.offset(), 0x000),
        (shell::SYSTEM_RESET.offset(), 0x004),
        (shell::SYSTEM_STATUS.offset(), 0x008),
        (shell::SHELL_RESET.offset(), 0x00C),
        (shell::SHELL_STATUS.offset(), 0x010),
        (shell::USER_RESET.offset(), 0x014),
        (shell::USER_STATUS.offset(), 0x018),
    ];
    for (got, want) in table {
        assert_eq!(got, want);
    }
    // SHELL_RESET / SHELL_STATUS bits as wired at the top level.
    assert_eq!(shell::reset_bits::QDMA0, 1 << 0);
    assert_eq!(shell::reset_bits::QDMA1, 1 << 1);
    assert_eq!(shell::reset_bits::CMAC0, 1 << 4);
    assert_eq!(shell::reset_bits::ADAPTER0, 1 << 5);
    assert_eq!(shell::reset_bits::CMAC1, 1 << 8);
    assert_eq!(shell::reset_bits::ADAPTER1, 1 << 9);
    // The driver writes 0x10 (CMAC0) or 0x100 (CMAC1) only.
    assert_eq!(shell::reset_bits::cmac(0), 0x10);
    assert_eq!(shell::reset_bits::cmac(1), 0x100);
}

// ------------------------------------------------------------------------------------------------
// §2.3, §4.3, §9.1: per-function QDMA subsystem block, QCONF and RSS.

#[test]
fn s2_3_per_function_block() {
    assert_eq!(shell::qconf(pf(0)).offset(), 0x1000);
    assert_eq!(shell::qconf(pf(1)).offset(), 0x2000);
    assert_eq!(shell::qconf(pf(2)).offset(), 0x3000);
    assert_eq!(shell::qconf(pf(3)).offset(), 0x4000);
    assert_eq!(shell::QCONF_OFFSET, 0x000);
    assert_eq!(shell::INDIR_TABLE_OFFSET, 0x400);
    assert_eq!(shell::HASH_KEY_OFFSET, 0x600);
    assert_eq!(shell::INDIR_ENTRY_MASK, 0xFFFF);
    // Indirection table: 0x1400-0x15FC / 0x2400-0x25FC, 128 entries.
    assert_eq!(shell::INDIR_TABLE_ENTRIES, 128);
    assert_eq!(shell::indir_table(pf(0), 0).offset(), 0x1400);
    assert_eq!(shell::indir_table(pf(0), 127).offset(), 0x15FC);
    assert_eq!(shell::indir_table(pf(1), 0).offset(), 0x2400);
    assert_eq!(shell::indir_table(pf(1), 127).offset(), 0x25FC);
    for k in 0..128 {
        assert_eq!(shell::indir_table(pf(0), k).offset(), 0x1400 + 4 * k as u32);
        assert_eq!(shell::indir_table(pf(1), k).offset(), 0x2400 + 4 * k as u32);
    }
    // Hash key: 0x1600-0x1624 / 0x2600-0x2624, 10 words = 40 bytes.
    assert_eq!(shell::HASH_KEY_WORDS, 10);
    assert_eq!(shell::hash_key(pf(0), 0).offset(), 0x1600);
    assert_eq!(shell::hash_key(pf(0), 9).offset(), 0x1624);
    assert_eq!(shell::hash_key(pf(1), 0).offset(), 0x2600);
    assert_eq!(shell::hash_key(pf(1), 9).offset(), 0x2624);
    for k in 0..10 {
        assert_eq!(shell::hash_key(pf(0), k).offset(), 0x1600 + 4 * k as u32);
        assert_eq!(shell::hash_key(pf(1), k).offset(), 0x2600 + 4 * k as u32);
    }
}

#[test]
fn s4_3_qconf_values() {
    // PF0 with 8 queues: 0x00000008; PF1 (qbase 64): 0x00400008; teardown 0.
    assert_eq!(shell::qconf_value(AbsQueueId::new(0), 8), 0x00000008);
    assert_eq!(shell::qconf_value(AbsQueueId::new(64), 8), 0x00400008);
    assert_eq!(shell::qconf_value(AbsQueueId::new(0), 0), 0);
    assert_eq!(shell::qconf_value(AbsQueueId::new(0xFFFF), 0xFFFF), 0xFFFFFFFF);
}

#[test]
fn s9_3_default_hash_key() {
    assert_eq!(
        shell::DEFAULT_HASH_KEY_WORDS,
        [
            0xD6E31417, 0x376CC87E, 0x011BA7A6, 0xDC1B91BB, 0x7872E224, 0xBFD0404B, 0x260374B8, 0xD9270F6F,
            0x18DC4386, 0x7C9C37DE,
        ]
    );
    // The same key as ethtool bytes, byte 4k in bits 7..0 of word k (§9.2 byte order).
    let bytes: [u8; 40] = [
        0x17, 0x14, 0xe3, 0xd6, 0x7e, 0xc8, 0x6c, 0x37, 0xa6, 0xa7, 0x1b, 0x01, 0xbb, 0x91, 0x1b, 0xdc, 0x24,
        0xe2, 0x72, 0x78, 0x4b, 0x40, 0xd0, 0xbf, 0xb8, 0x74, 0x03, 0x26, 0x6f, 0x0f, 0x27, 0xd9, 0x86, 0x43,
        0xdc, 0x18, 0xde, 0x37, 0x9c, 0x7c,
    ];
    for (k, chunk) in bytes.chunks_exact(4).enumerate() {
        let word = u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]);
        assert_eq!(shell::DEFAULT_HASH_KEY_WORDS[k], word, "key word {k}");
    }
}

// ------------------------------------------------------------------------------------------------
// §3.1: the four tables of 16 registers and their values.

#[test]
fn s3_1_global_tables() {
    assert_eq!(qdma::GLOBAL_TABLE_LEN, 16);
    type Table = fn(usize) -> Reg<u32>;
    let ranges: [(Table, u32, u32); 4] = [
        (qdma::glbl_rng_sz, 0x204, 0x240),
        (qdma::c2h_buf_sz, 0xAB0, 0xAEC),
        (qdma::c2h_timer_cnt, 0xA00, 0xA3C),
        (qdma::c2h_cnt_th, 0xA40, 0xA7C),
    ];
    for (reg, first, last) in ranges {
        assert_eq!(reg(0).offset(), first);
        assert_eq!(reg(15).offset(), last);
        for i in 0..16 {
            assert_eq!(reg(i).offset(), first + 4 * i as u32);
        }
    }
    assert_eq!(
        qdma::tables::RING_SIZES,
        [4096, 64, 128, 192, 256, 384, 512, 768, 1024, 1536, 3072, 4096, 6144, 8192, 12288, 16384]
    );
    assert_eq!(
        qdma::tables::C2H_BUF_SIZES,
        [4096, 256, 512, 1024, 2048, 3968, 4096, 4096, 4096, 4096, 4096, 4096, 4096, 8192, 9018, 16384]
    );
    assert_eq!(
        qdma::tables::C2H_TIMER_COUNTS,
        [10, 2, 4, 5, 8, 10, 15, 20, 25, 30, 50, 75, 100, 125, 150, 200]
    );
    assert_eq!(
        qdma::tables::C2H_COUNT_THRESHOLDS,
        [64, 2, 4, 8, 16, 24, 32, 48, 80, 96, 112, 128, 144, 160, 176, 192]
    );
    // The driver relies on index 0 = 4096 (TX ring) and index 8 = 1024 (RX rings); buffer index 8
    // is 4096 bytes.
    assert_eq!(qdma::tables::RING_SIZES[0], 4096);
    assert_eq!(qdma::tables::RING_SIZES[8], 1024);
    assert_eq!(qdma::tables::C2H_BUF_SIZES[8], 4096);
}

// ------------------------------------------------------------------------------------------------
// §3.2: single registers.

#[test]
fn s3_2_single_registers() {
    let table = [
        (qdma::C2H_INT_TIMER_TICK.offset(), 0xB0C),
        (qdma::GLBL_DSC_CFG.offset(), 0x250),
        (qdma::C2H_PFCH_CFG.offset(), 0xB08),
        (qdma::C2H_WB_COAL_CFG.offset(), 0xB50),
        (qdma::H2C_REQ_THROT.offset(), 0xE24),
        (qdma::C2H_PFCH_CACHE_DEPTH.offset(), 0xBE0),
        (qdma::C2H_CMPL_COAL_BUF_DEPTH.offset(), 0xBE4),
        (qdma::GLBL_INTERRUPT_CFG.offset(), 0x2C4),
    ];
    for (got, want) in table {
        assert_eq!(got, want);
    }
    assert_eq!(qdma::tables::C2H_INT_TIMER_TICK_VALUE, 25);
}

// ------------------------------------------------------------------------------------------------
// §3.3 and §11.3: error registers and their programming.

#[test]
fn s3_3_error_registers() {
    let table = [
        (qdma::GLBL_ERR_INT.offset(), 0xB04),
        (qdma::GLBL_ERR_MASK.offset(), 0x24C),
        (qdma::GLBL_DSC_ERR_MSK.offset(), 0x258),
        (qdma::GLBL_TRQ_ERR_MSK.offset(), 0x268),
        (qdma::C2H_ERR_MASK.offset(), 0xAF4),
        (qdma::C2H_FATAL_ERR_MASK.offset(), 0xAFC),
        (qdma::H2C_ERR_MASK.offset(), 0xE04),
        (qdma::RAM_SBE_MASK.offset(), 0x0F0),
        (qdma::RAM_DBE_MASK.offset(), 0x0F8),
        // Status counterparts.
        (qdma::GLBL_ERR_STAT.offset(), 0x248),
        (qdma::GLBL_DSC_ERR_STS.offset(), 0x254),
        (qdma::GLBL_TRQ_ERR_STS.offset(), 0x264),
        (qdma::C2H_ERR_STAT.offset(), 0xAF0),
        (qdma::C2H_FATAL_ERR_STAT.offset(), 0xAF8),
        (qdma::H2C_ERR_STAT.offset(), 0xE00),
        (qdma::RAM_SBE_STS.offset(), 0x0F4),
        (qdma::RAM_DBE_STS.offset(), 0x0FC),
        (qdma::C2H_FIRST_ERR_QID.offset(), 0xB30),
        (qdma::H2C_FIRST_ERR_QID.offset(), 0xE08),
        // Identification registers.
        (qdma::CONFIG_BLOCK_ID.offset(), 0x000),
        (qdma::GLBL2_ID.offset(), 0x100),
        (qdma::GLBL2_CHANNEL_QDMA_CAP.offset(), 0x120),
        (qdma::GLBL2_MISC_CAP.offset(), 0x134),
    ];
    for (got, want) in table {
        assert_eq!(got, want);
    }
}

#[test]
fn s11_3_error_mask_programming() {
    use qdma::errors::*;
    // (leaf mask register, value, GLBL_ERR_MASK bit), in the §11.3 order.
    let expected = [
        (0x258, 0x01F9023F, 1 << 2),
        (0x268, 0x0000000F, 1 << 3),
        (0xAF4, 0x0000FEDB, 1 << 8),
        (0xAFC, 0x0007DF1B, 1 << 8),
        (0xE04, 0x0000001F, 1 << 11),
        (0x0F0, 0xFFFFFF11, 1 << 0),
        (0x0F8, 0xFFFFFF11, 1 << 1),
    ];
    assert_eq!(LEAF_GROUPS.len(), expected.len());
    for (g, (reg, value, bit)) in LEAF_GROUPS.iter().zip(expected) {
        assert_eq!(
            (g.mask_reg.offset(), g.mask_value, g.group_bit),
            (reg, value, bit)
        );
    }
    // Starting from 0, GLBL_ERR_MASK is written 0x004, 0x00C, 0x10C, 0x10C, 0x90C, 0x90D, 0x90F.
    let mut mask = 0;
    let written: Vec<u32> = LEAF_GROUPS
        .iter()
        .map(|g| {
            mask |= g.group_bit;
            mask
        })
        .collect();
    assert_eq!(written, [0x004, 0x00C, 0x10C, 0x10C, 0x90C, 0x90D, 0x90F]);
    assert_eq!(mask, 0x90F);
    assert_eq!(GROUP_RAM_SBE, 1 << 0);
    assert_eq!(GROUP_RAM_DBE, 1 << 1);
    assert_eq!(GROUP_DSC, 1 << 2);
    assert_eq!(GROUP_TRQ, 1 << 3);
    assert_eq!(GROUP_ST_C2H, 1 << 8);
    assert_eq!(GROUP_ST_H2C_V4, 1 << 11);
    assert_eq!(GROUP_ST_H2C_V5, 1 << 16); // §15 item 2
}

// ------------------------------------------------------------------------------------------------
// §4.2: legacy direct FMAP register (defined, unused).

#[test]
fn s4_2_legacy_fmap_register() {
    assert_eq!(qdma::glbl2_fmap(pf(0)).offset(), 0x400);
}

// ------------------------------------------------------------------------------------------------
// §5.1, §13.5: indirect context registers.

#[test]
fn s5_1_indirect_context_registers() {
    assert_eq!(qdma::IND_CTXT_WORDS, 8);
    assert_eq!(qdma::ind_ctxt_data(0).offset(), 0x804);
    assert_eq!(qdma::ind_ctxt_data(7).offset(), 0x820);
    assert_eq!(qdma::ind_ctxt_mask(0).offset(), 0x824);
    assert_eq!(qdma::ind_ctxt_mask(7).offset(), 0x840);
    assert_eq!(qdma::IND_CTXT_CMD.offset(), 0x844);
    // The interleaved WRITE order: 0x804, 0x824, 0x808, 0x828, ..., 0x820, 0x840.
    let order: Vec<u32> = (0..8)
        .flat_map(|i| [qdma::ind_ctxt_data(i).offset(), qdma::ind_ctxt_mask(i).offset()])
        .collect();
    let expected: Vec<u32> = (0..8u32).flat_map(|i| [0x804 + 4 * i, 0x824 + 4 * i]).collect();
    assert_eq!(order, expected);
    assert_eq!(order.first(), Some(&0x804));
    assert_eq!(order.last(), Some(&0x840));
    // §13.5: the FMAP CLEAR at remove is BAR0+0x844 = 0x18 + func x 128.
    for func in 0..4u8 {
        assert_eq!(
            IndCtxtCmd::fmap(CtxtOp::Clear, pf(func)).bits(),
            0x18 + u32::from(func) * 128
        );
    }
}

// ------------------------------------------------------------------------------------------------
// §6, §5.8: queue doorbells (function-relative qid, 16-byte stride).

#[test]
fn s6_doorbells() {
    assert_eq!(qdma::DMAP_SEL_BASE, 0x18000);
    assert_eq!(qdma::DMAP_SEL_STRIDE, 16);
    for q in [0u16, 1, 3, 5, 7, 63, 511, 2047] {
        let q16 = 16 * u32::from(q);
        assert_eq!(qdma::dmap_sel_int_cidx(QueueId::new(q)).offset(), 0x18000 + q16);
        assert_eq!(
            qdma::dmap_sel_h2c_dsc_pidx(QueueId::new(q)).offset(),
            0x18004 + q16
        );
        assert_eq!(
            qdma::dmap_sel_c2h_dsc_pidx(QueueId::new(q)).offset(),
            0x18008 + q16
        );
        assert_eq!(qdma::dmap_sel_cmpt_cidx(QueueId::new(q)).offset(), 0x1800C + q16);
    }
    // Queue 5 (of any PF): 0x18054 / 0x18058 / 0x1805C; queue 3: 0x18034 / 0x18038 / 0x1803C.
    assert_eq!(qdma::dmap_sel_h2c_dsc_pidx(QueueId::new(5)).offset(), 0x18054);
    assert_eq!(qdma::dmap_sel_c2h_dsc_pidx(QueueId::new(5)).offset(), 0x18058);
    assert_eq!(qdma::dmap_sel_cmpt_cidx(QueueId::new(5)).offset(), 0x1805C);
    assert_eq!(qdma::dmap_sel_h2c_dsc_pidx(QueueId::new(3)).offset(), 0x18034);
    assert_eq!(qdma::dmap_sel_c2h_dsc_pidx(QueueId::new(3)).offset(), 0x18038);
    assert_eq!(qdma::dmap_sel_cmpt_cidx(QueueId::new(3)).offset(), 0x1803C);
    assert_eq!(qdma::dmap_sel_int_cidx(QueueId::new(0)).offset(), 0x18000);
}

// ------------------------------------------------------------------------------------------------
// §10.1-§10.4, §10.7: CMAC registers.

#[test]
fn s10_cmac_registers() {
    let table = [
        (cmac::GT_RESET.offset(), 0x000),
        (cmac::RESET.offset(), 0x004),
        (cmac::SWITCH_CORE_MODE.offset(), 0x008),
        (cmac::CONF_TX_1.offset(), 0x00C),
        (cmac::CONF_RX_1.offset(), 0x014),
        (cmac::CORE_MODE.offset(), 0x020),
        (cmac::CORE_VERSION.offset(), 0x024),
        (cmac::CONF_TX_BIP_OVERRIDE.offset(), 0x02C),
        (cmac::CONF_TX_FC_CTRL_1.offset(), 0x030),
        (cmac::CONF_RX_FC_CTRL_1.offset(), 0x084),
        (cmac::CONF_RX_FC_CTRL_2.offset(), 0x088),
        (cmac::GT_LOOPBACK.offset(), 0x090),
        (cmac::USER_0.offset(), 0x0CC),
        (cmac::STAT_TX_STATUS.offset(), 0x200),
        (cmac::STAT_RX_STATUS.offset(), 0x204),
        (cmac::STAT_STATUS_1.offset(), 0x208),
        (cmac::TICK.offset(), 0x2B0),
        (cmac::STAT_CYCLE_COUNT.offset(), 0x2B8),
        (cmac::RSFEC_CONF_IND_CORRECTION.offset(), 0x1000),
        (cmac::RSFEC_STATUS.offset(), 0x1004),
        (cmac::RSFEC_CONF_ENABLE.offset(), 0x107C),
        (cmac::STAT_RX_RSFEC_CORRECTED_CW.low.offset(), 0x1008),
        (cmac::STAT_RX_RSFEC_UNCORRECTED_CW.low.offset(), 0x1010),
    ];
    for (got, want) in table {
        assert_eq!(got, want);
    }
    assert_eq!(
        cmac::CONF_TX_FC_RFRH.map(BlockReg::offset),
        [0x034, 0x038, 0x03C, 0x040, 0x044]
    );
    assert_eq!(
        cmac::CONF_TX_FC_QNTA.map(BlockReg::offset),
        [0x048, 0x04C, 0x050, 0x054, 0x058]
    );
    // §10.1: CORE_VERSION at 0x8024 / 0xC024 reads 0x301.
    assert_eq!(cmac::CORE_VERSION.on(cmac::cmac_base(0)).offset(), 0x8024);
    assert_eq!(cmac::CORE_VERSION.on(cmac::cmac_base(1)).offset(), 0xC024);
    assert_eq!(cmac::CORE_VERSION_EXPECTED, 0x00000301);
    // §10.3: link up = STAT_RX_STATUS == 0x3.
    assert_eq!(cmac::STAT_RX_STATUS_UP, 0x3);
    assert_eq!(cmac::STAT_RX_STATUS.on(cmac::cmac_base(0)).offset(), 0x8204);
    // §10.4: TICK = 1 at BAR2+0x82B0 / 0xC2B0.
    assert_eq!(cmac::TICK_LATCH, 1);
    assert_eq!(cmac::TICK.on(cmac::cmac_base(0)).offset(), 0x82B0);
    assert_eq!(cmac::TICK.on(cmac::cmac_base(1)).offset(), 0xC2B0);
}

// ------------------------------------------------------------------------------------------------
// §10.2: the CMAC enable sequence.

/// Steps 3-14 of §10.2 as (offset relative to the CMAC base, value), in order.
const ENABLE_STEPS: [(u32, u32); 18] = [
    (0x107C, 0x3),       // 3 RSFEC_CONF_ENABLE (only with RS-FEC)
    (0x1000, 0x7),       // 4 RSFEC_CONF_IND_CORRECTION (only with RS-FEC)
    (0x014, 0x1),        // 5 CONF_RX_1
    (0x00C, 0x10),       // 6 CONF_TX_1: send RFI, TX still disabled
    (0x00C, 0x1),        // 7 CONF_TX_1: TX enable
    (0x084, 0x00003DFF), // 8 CONF_RX_FC_CTRL_1
    (0x088, 0x0001C631), // 9 CONF_RX_FC_CTRL_2
    (0x048, 0xFFFFFFFF), // 10 CONF_TX_FC_QNTA_1
    (0x04C, 0xFFFFFFFF), // 10 CONF_TX_FC_QNTA_2
    (0x050, 0xFFFFFFFF), // 10 CONF_TX_FC_QNTA_3
    (0x054, 0xFFFFFFFF), // 10 CONF_TX_FC_QNTA_4
    (0x058, 0x0000FFFF), // 11 CONF_TX_FC_QNTA_5
    (0x034, 0xFFFFFFFF), // 12 CONF_TX_FC_RFRH_1
    (0x038, 0xFFFFFFFF), // 12 CONF_TX_FC_RFRH_2
    (0x03C, 0xFFFFFFFF), // 12 CONF_TX_FC_RFRH_3
    (0x040, 0xFFFFFFFF), // 12 CONF_TX_FC_RFRH_4
    (0x044, 0x0000FFFF), // 13 CONF_TX_FC_RFRH_5
    (0x030, 0x000001FF), // 14 CONF_TX_FC_CTRL_1
];

fn enable_writes(with_rsfec: bool) -> Vec<(u32, u32)> {
    let rsfec = cmac::ENABLE_RSFEC.iter().filter(|_| with_rsfec);
    rsfec
        .chain(cmac::ENABLE_MAC.iter())
        .map(|w| (w.reg.offset(), w.value))
        .collect()
}

#[test]
fn s10_2_enable_sequence() {
    assert_eq!(enable_writes(true), ENABLE_STEPS);
    assert_eq!(enable_writes(false), ENABLE_STEPS[2..]);
    // Per CMAC: 19 writes with RS-FEC, 17 without, counting the SHELL_RESET write of step 1.
    assert_eq!(1 + enable_writes(true).len(), 19);
    assert_eq!(1 + enable_writes(false).len(), 17);
}

#[test]
fn s10_2_absolute_offsets() {
    // "CMAC0: BAR2+0x907C, 0x9000, 0x8014, 0x800C, 0x800C, 0x8084, ... 0x8030;
    //  CMAC1: BAR2+0xD07C, 0xD000, 0xC014, ... 0xC030."
    let abs = |port: u8| -> Vec<u32> {
        enable_writes(true)
            .iter()
            .map(|&(off, _)| cmac::cmac_base(port) + off)
            .collect()
    };
    let cmac0 = abs(0);
    assert_eq!(cmac0[..6], [0x907C, 0x9000, 0x8014, 0x800C, 0x800C, 0x8084]);
    assert_eq!(cmac0.last(), Some(&0x8030));
    let cmac1 = abs(1);
    assert_eq!(cmac1[..3], [0xD07C, 0xD000, 0xC014]);
    assert_eq!(cmac1.last(), Some(&0xC030));
    // Steps 1-2 use the shared system-configuration registers (absolute).
    assert_eq!(shell::SHELL_RESET.offset(), 0x00C);
    assert_eq!(shell::SHELL_STATUS.offset(), 0x010);
}

// ------------------------------------------------------------------------------------------------
// §10.5: the ethtool -S list, with absolute offsets for both ports.

/// (index, name, offset from the CMAC base, CMAC0 absolute, CMAC1 absolute).
const CMAC_STATS_SPEC: [(usize, &str, u32, u32, u32); 59] = [
    (0, "stat_tx_total_pkts", 0x0500, 0x08500, 0x0C500),
    (1, "stat_tx_total_good_pkts", 0x0508, 0x08508, 0x0C508),
    (2, "stat_tx_total_bytes", 0x0510, 0x08510, 0x0C510),
    (3, "stat_tx_total_good_bytes", 0x0518, 0x08518, 0x0C518),
    (4, "stat_tx_pkt_64_bytes", 0x0520, 0x08520, 0x0C520),
    (5, "stat_tx_pkt_65_127_bytes", 0x0528, 0x08528, 0x0C528),
    (6, "stat_tx_pkt_128_255_bytes", 0x0530, 0x08530, 0x0C530),
    (7, "stat_tx_pkt_256_511_bytes", 0x0538, 0x08538, 0x0C538),
    (8, "stat_tx_pkt_512_1023_bytes", 0x0540, 0x08540, 0x0C540),
    (9, "stat_tx_pkt_1024_1518_bytes", 0x0548, 0x08548, 0x0C548),
    (10, "stat_tx_pkt_1519_1522_bytes", 0x0550, 0x08550, 0x0C550),
    (11, "stat_tx_pkt_1523_1548_bytes", 0x0558, 0x08558, 0x0C558),
    (12, "stat_tx_pkt_1549_2047_bytes", 0x0560, 0x08560, 0x0C560),
    (13, "stat_tx_pkt_2048_4095_bytes", 0x0568, 0x08568, 0x0C568),
    (14, "stat_tx_pkt_4096_8191_bytes", 0x0570, 0x08570, 0x0C570),
    (15, "stat_tx_pkt_8192_9215_bytes", 0x0578, 0x08578, 0x0C578),
    (16, "stat_tx_pkt_large", 0x0580, 0x08580, 0x0C580),
    (17, "stat_tx_pkt_small", 0x0588, 0x08588, 0x0C588),
    (18, "stat_tx_bad_fcs", 0x05B8, 0x085B8, 0x0C5B8),
    (19, "stat_tx_unicast", 0x05D0, 0x085D0, 0x0C5D0),
    (20, "stat_tx_multicast", 0x05D8, 0x085D8, 0x0C5D8),
    (21, "stat_tx_broadcast", 0x05E0, 0x085E0, 0x0C5E0),
    (22, "stat_tx_vlan", 0x05E8, 0x085E8, 0x0C5E8),
    (23, "stat_tx_pause", 0x05F0, 0x085F0, 0x0C5F0),
    (24, "stat_tx_user_pause", 0x05F8, 0x085F8, 0x0C5F8),
    (25, "stat_rx_total_pkts", 0x0608, 0x08608, 0x0C608),
    (26, "stat_rx_total_good_pkts", 0x0610, 0x08610, 0x0C610),
    (27, "stat_rx_total_bytes", 0x0618, 0x08618, 0x0C618),
    (28, "stat_rx_total_good_bytes", 0x0620, 0x08620, 0x0C620),
    (29, "stat_rx_pkt_64_bytes", 0x0628, 0x08628, 0x0C628),
    (30, "stat_rx_pkt_65_127_bytes", 0x0630, 0x08630, 0x0C630),
    (31, "stat_rx_pkt_128_255_bytes", 0x0638, 0x08638, 0x0C638),
    (32, "stat_rx_pkt_256_511_bytes", 0x0640, 0x08640, 0x0C640),
    (33, "stat_rx_pkt_512_1023_bytes", 0x0648, 0x08648, 0x0C648),
    (34, "stat_rx_pkt_1024_1518_bytes", 0x0650, 0x08650, 0x0C650),
    (35, "stat_rx_pkt_1519_1522_bytes", 0x0658, 0x08658, 0x0C658),
    (36, "stat_rx_pkt_1523_1548_bytes", 0x0660, 0x08660, 0x0C660),
    (37, "stat_rx_pkt_1549_2047_bytes", 0x0668, 0x08668, 0x0C668),
    (38, "stat_rx_pkt_2048_4095_bytes", 0x0670, 0x08670, 0x0C670),
    (39, "stat_rx_pkt_4096_8191_bytes", 0x0678, 0x08678, 0x0C678),
    (40, "stat_rx_pkt_8192_9215_bytes", 0x0680, 0x08680, 0x0C680),
    (41, "stat_rx_pkt_large", 0x0688, 0x08688, 0x0C688),
    (42, "stat_rx_pkt_small", 0x0690, 0x08690, 0x0C690),
    (43, "stat_rx_undersize", 0x0698, 0x08698, 0x0C698),
    (44, "stat_rx_fragment", 0x06A0, 0x086A0, 0x0C6A0),
    (45, "stat_rx_oversize", 0x06A8, 0x086A8, 0x0C6A8),
    (46, "stat_rx_toolong", 0x06B0, 0x086B0, 0x0C6B0),
    (47, "stat_rx_jabber", 0x06B8, 0x086B8, 0x0C6B8),
    (48, "stat_rx_bad_fcs", 0x06C0, 0x086C0, 0x0C6C0),
    (49, "stat_rx_pkt_bad_fcs", 0x06C8, 0x086C8, 0x0C6C8),
    (50, "stat_rx_stomped_fcs", 0x06D0, 0x086D0, 0x0C6D0),
    (51, "stat_rx_unicast", 0x06D8, 0x086D8, 0x0C6D8),
    (52, "stat_rx_multicast", 0x06E0, 0x086E0, 0x0C6E0),
    (53, "stat_rx_broadcast", 0x06E8, 0x086E8, 0x0C6E8),
    (54, "stat_rx_vlan", 0x06F0, 0x086F0, 0x0C6F0),
    (55, "stat_rx_pause", 0x06F8, 0x086F8, 0x0C6F8),
    (56, "stat_rx_user_pause", 0x0700, 0x08700, 0x0C700),
    (57, "stat_rx_inrangeerr", 0x0708, 0x08708, 0x0C708),
    (58, "stat_rx_truncated", 0x0710, 0x08710, 0x0C710),
];

/// (index, name, offset from the adapter base, adapter 0 absolute, adapter 1 absolute).
const ADAPTER_STATS_SPEC: [(usize, &str, u32, u32, u32); 5] = [
    (59, "stat_adapt_tx_sent", 0x000, 0x0B000, 0x0F000),
    (60, "stat_adapt_tx_drop", 0x010, 0x0B010, 0x0F010),
    (61, "stat_adapt_rx_recv", 0x020, 0x0B020, 0x0F020),
    (62, "stat_adapt_rx_drop", 0x030, 0x0B030, 0x0F030),
    (63, "stat_adapt_rx_error", 0x040, 0x0B040, 0x0F040),
];

#[test]
fn s10_5_cmac_statistics() {
    assert_eq!(cmac::CMAC_STATS.len(), 59);
    for (i, (c, (index, name, offset, abs0, abs1))) in
        cmac::CMAC_STATS.iter().zip(CMAC_STATS_SPEC).enumerate()
    {
        assert_eq!(i, index);
        assert_eq!(c.name, name, "entry {i}");
        assert_eq!(c.low.offset(), offset, "entry {i} ({name})");
        assert_eq!(
            c.low.on(cmac::cmac_base(0)).offset(),
            abs0,
            "entry {i} ({name}) on CMAC0"
        );
        assert_eq!(
            c.low.on(cmac::cmac_base(1)).offset(),
            abs1,
            "entry {i} ({name}) on CMAC1"
        );
        assert_eq!(c.bits, 48, "entry {i} ({name}): CMAC counters are 48 bits");
    }
}

#[test]
fn s10_5_adapter_statistics() {
    assert_eq!(cmac::ADAPTER_STATS.len(), 5);
    for (i, (c, (index, name, offset, abs0, abs1))) in
        cmac::ADAPTER_STATS.iter().zip(ADAPTER_STATS_SPEC).enumerate()
    {
        assert_eq!(59 + i, index);
        assert_eq!(c.name, name, "entry {index}");
        assert_eq!(c.low.offset(), offset, "entry {index} ({name})");
        assert_eq!(
            c.low.on(cmac::adapter_base(0)).offset(),
            abs0,
            "entry {index} ({name}) on adapter 0"
        );
        assert_eq!(
            c.low.on(cmac::adapter_base(1)).offset(),
            abs1,
            "entry {index} ({name}) on adapter 1"
        );
        assert_eq!(c.bits, 64, "entry {index} ({name}): adapter counters are 64 bits");
    }
}

#[test]
fn s10_5_software_counters_and_total() {
    assert_eq!(
        cmac::XDP_STAT_NAMES,
        [
            "rx_xdp_redirect",
            "rx_xdp_pass",
            "rx_xdp_drop",
            "rx_xdp_tx",
            "rx_xdp_tx_errors",
            "tx_xdp_xmit",
            "tx_xdp_xmit_errors",
        ]
    );
    // 71 entries in all; 64 register reads per `ethtool -S`.
    let hw = cmac::CMAC_STATS.len() + cmac::ADAPTER_STATS.len();
    assert_eq!(hw, 64);
    assert_eq!(hw + cmac::XDP_STAT_NAMES.len(), 71);
    // Names are unique across the whole list.
    let mut names: Vec<&str> = cmac::CMAC_STATS
        .iter()
        .chain(cmac::ADAPTER_STATS.iter())
        .map(|c| c.name)
        .chain(cmac::XDP_STAT_NAMES)
        .collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), 71);
}

// ------------------------------------------------------------------------------------------------
// §10.6: the packet adapter block.

#[test]
fn s10_6_adapter_block() {
    use cmac::adapter::*;
    let table = [
        (TX_SENT_PKTS, 0x000),
        (TX_SENT_BYTES, 0x008),
        (TX_DROP_PKTS, 0x010),
        (TX_DROP_BYTES, 0x018),
        (RX_RECV_PKTS, 0x020),
        (RX_RECV_BYTES, 0x028),
        (RX_DROP_PKTS, 0x030),
        (RX_DROP_BYTES, 0x038),
        (RX_ERR_PKTS, 0x040),
        (RX_ERR_BYTES, 0x048),
    ];
    for (got, want) in table {
        assert_eq!(got.offset(), want);
    }
    // Ten 64-bit counters, low word then high word: the last high word is at 0x04C.
    assert_eq!(BLOCK_LEN, 0x050);
    // The reported adapter counters are the packet counters of this block.
    let reported: Vec<BlockReg<u32>> = cmac::ADAPTER_STATS.iter().map(|c| c.low).collect();
    assert_eq!(
        reported,
        [
            TX_SENT_PKTS,
            TX_DROP_PKTS,
            RX_RECV_PKTS,
            RX_DROP_PKTS,
            RX_ERR_PKTS
        ]
    );
}
