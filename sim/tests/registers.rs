//! BAR0/BAR2 decoding: contexts, read-backs, shell reset knob, RSS registers, link status,
//! CMAC statistics and the TICK latch.

mod common;

use common::*;
use onic_hal::regs::cmac::{self, adapter, CMAC_STATS};
use onic_hal::regs::{qdma, shell};
use onic_hal::window::UNMAPPED_READ;
use onic_hal::{DelayNs, RegValue, RegisterAccess, RegisterWindow};
use onic_sim::{ResetBehavior, Violation, Wire};

#[test]
fn global_csrs_and_depth_registers() {
    let card = card_with(|c| {
        c.pfch_cache_depth = 64;
        c.cmpl_coal_buf_depth = 48;
    });
    let bar0 = card.qdma(0);
    assert_eq!(bar0.read(qdma::C2H_PFCH_CACHE_DEPTH), 64);
    assert_eq!(bar0.read(qdma::C2H_CMPL_COAL_BUF_DEPTH), 48);
    init_globals(&card);
    assert_eq!(bar0.read(qdma::glbl_rng_sz(8)), 1024);
    // Global CSRs are shared between functions.
    assert_eq!(card.qdma(1).read(qdma::c2h_buf_sz(14)), 9018);
    // Read-modify-write of GLBL_ERR_MASK works like a plain register.
    bar0.modify(qdma::GLBL_ERR_MASK, |v| v | 0x4);
    assert_eq!(bar0.read(qdma::GLBL_ERR_MASK), 0x4);
    assert_eq!(bar0.read32(3), UNMAPPED_READ);
    assert_eq!(card.qdma(3).read32(0), UNMAPPED_READ);
    assert_eq!(card.violations(), []);
}

#[test]
fn context_commands_clear_write_read_invalidate() {
    // The spec's example ring is above 4 GiB; do not report it here.
    let card = card_with(|c| c.dma.rings_below_4g = false);
    init_globals(&card);
    // hardware.md §5.2 worked example (C2H on PF1, abs qid 64).
    let words = [0x00020000, 0x00108003, 0, 2, 0];
    ctxt_write(&card, SEL_SW_C2H, 64, &words);
    assert_eq!(
        ctxt_read(&card, SEL_SW_C2H, 64),
        [0x00020000, 0x00108003, 0, 2, 0, 0, 0, 0]
    );
    // WRITE applies DATA under MASK.
    let bar0 = card.qdma(0);
    for i in 0..8 {
        bar0.write(qdma::ind_ctxt_data(i), 0xFFFF_FFFF);
        bar0.write(qdma::ind_ctxt_mask(i), if i == 4 { 0x7FF } else { 0 });
    }
    ctxt_cmd(&card, SEL_SW_C2H, OP_WRITE, 64);
    assert_eq!(ctxt_read(&card, SEL_SW_C2H, 64)[4], 0x7FF);
    // INVALIDATE clears qen, CLEAR zeroes.
    ctxt_cmd(&card, SEL_SW_C2H, OP_INVALIDATE, 64);
    assert_eq!(ctxt_read(&card, SEL_SW_C2H, 64)[1], 0x00108002);
    ctxt_cmd(&card, SEL_SW_C2H, OP_CLEAR, 64);
    assert_eq!(ctxt_read(&card, SEL_SW_C2H, 64), [0; 8]);
    // Bad commands are violations, not panics.
    bar0.write(qdma::IND_CTXT_CMD, RegValue::from_bits(15 << 1));
    bar0.write(qdma::IND_CTXT_CMD, RegValue::from_bits(1 << 20));
    bar0.write(
        qdma::IND_CTXT_CMD,
        RegValue::from_bits((12 << 1) | (1 << 5) | (3 << 7)),
    );
    assert_eq!(card.take_violations().len(), 3);
}

#[test]
fn context_commands_of_two_functions_must_not_interleave() {
    let card = card();
    init_globals(&card);
    let (pf0, pf1) = (card.qdma(0), card.qdma(1));
    // Zero words: a valid (empty) context, so only the interleaving can be wrong.
    let write_words = |bar: &onic_sim::QdmaWindow<'_>| {
        for i in 0..8 {
            bar.write(qdma::ind_ctxt_data(i), 0);
            bar.write(qdma::ind_ctxt_mask(i), u32::MAX);
        }
    };
    // One function's whole sequence, then the other's: fine.
    write_words(&pf0);
    pf0.write(
        qdma::IND_CTXT_CMD,
        RegValue::from_bits((SEL_SW_H2C << 1) | (OP_WRITE << 5) | (3 << 7)),
    );
    write_words(&pf1);
    pf1.write(
        qdma::IND_CTXT_CMD,
        RegValue::from_bits((SEL_SW_H2C << 1) | (OP_WRITE << 5) | (67 << 7)),
    );
    assert_eq!(card.take_violations(), []);
    // PF1 writes one data word between PF0's words and PF0's command: PF0's context would get
    // PF1's word.
    write_words(&pf0);
    pf1.write(qdma::ind_ctxt_data(2), 0);
    pf0.write(
        qdma::IND_CTXT_CMD,
        RegValue::from_bits((SEL_SW_H2C << 1) | (OP_WRITE << 5) | (3 << 7)),
    );
    let v = card.take_violations();
    assert!(
        matches!(v.as_slice(), [Violation::Register { reason, .. }] if reason.contains("interleaved")),
        "{v:?}"
    );
}

#[test]
fn rings_above_4g_are_reported() {
    let card = card();
    ctxt_write(&card, SEL_SW_H2C, 0, &[0, 0x0011000D, 0x23456000, 1, 1]);
    assert!(matches!(
        card.take_violations().as_slice(),
        [Violation::Queue { qid, reason }] if qid.get() == 0 && reason.contains("4 GiB")
    ));
}

#[test]
fn shell_registers_and_unmapped_reads() {
    let card = card_with(|c| c.functions = 2);
    let bar2 = card.shell();
    // Indirection entries: [15:0] stored, upper half stale.
    bar2.write(
        shell::indir_table(onic_hal::FunctionId::new(0).unwrap(), 5),
        0x1234_0003,
    );
    let v = bar2.read(shell::indir_table(onic_hal::FunctionId::new(0).unwrap(), 5));
    assert_eq!(v & shell::INDIR_ENTRY_MASK, 3);
    assert_ne!(v >> 16, 0x1234);
    assert_ne!(
        bar2.read(shell::indir_table(onic_hal::FunctionId::new(0).unwrap(), 6)) >> 16,
        0
    );
    // Hash key: reset value, then read back.
    for k in 0..shell::HASH_KEY_WORDS {
        assert_eq!(
            bar2.read(shell::hash_key(onic_hal::FunctionId::new(1).unwrap(), k)),
            shell::DEFAULT_HASH_KEY_WORDS[k]
        );
    }
    bar2.write(
        shell::hash_key(onic_hal::FunctionId::new(1).unwrap(), 0),
        0xDA565A6D,
    );
    assert_eq!(
        bar2.read(shell::hash_key(onic_hal::FunctionId::new(1).unwrap(), 0)),
        0xDA565A6D
    );
    bar2.write(
        shell::qconf(onic_hal::FunctionId::new(1).unwrap()),
        shell::qconf_value(onic_hal::AbsQueueId::new(64), 8),
    );
    assert_eq!(
        bar2.read(shell::qconf(onic_hal::FunctionId::new(1).unwrap())),
        0x00400008
    );
    // Unimplemented: per-function counters, subsystem block, functions 2-3, CMS, QSFP.
    for off in [
        0x1800,
        shell::QDMA_SUBSYS_OFFSET,
        shell::qconf(onic_hal::FunctionId::new(2).unwrap()).offset(),
        0x30_0000,
        0xA000,
    ] {
        assert_eq!(bar2.read32(off), UNMAPPED_READ, "{off:#x}");
    }
    assert_eq!(card.violations(), []);
}

#[test]
fn cmac_detection_follows_present_ports() {
    let card = card_with(|c| c.ports = 1);
    let bar2 = card.shell();
    assert_eq!(bar2.read(cmac::CORE_VERSION.on(cmac::cmac_base(0))), 0x301);
    assert_eq!(
        bar2.read(cmac::CORE_VERSION.on(cmac::cmac_base(1))),
        UNMAPPED_READ
    );
}

#[test]
fn shell_reset_knob() {
    let card = card();
    let bar2 = card.shell();
    let cmac0 = shell::reset_bits::CMAC0;
    bar2.write(shell::SHELL_RESET, cmac0);
    assert_ne!(bar2.read(shell::SHELL_STATUS) & cmac0, 0);

    card.set_shell_reset(ResetBehavior::AfterReads(3));
    bar2.write(shell::SHELL_RESET, cmac0);
    let reads: Vec<bool> = (0..5)
        .map(|_| bar2.read(shell::SHELL_STATUS) & cmac0 != 0)
        .collect();
    assert_eq!(reads, [false, false, false, true, true]);

    card.set_shell_reset(ResetBehavior::Never);
    bar2.write(shell::SHELL_RESET, shell::reset_bits::CMAC1);
    for _ in 0..100 {
        let s = bar2.read(shell::SHELL_STATUS);
        assert_eq!(s & shell::reset_bits::CMAC1, 0);
        assert_ne!(s & cmac0, 0);
    }
}

#[test]
fn cmac_reset_clears_enables_and_counters() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    card.inject(0, &frame(UNICAST, 0x0800, 100, 0));
    card.run_until_idle();
    assert_eq!(card.cmac_counter(0, "stat_rx_total_pkts"), 1);
    card.shell().write(shell::SHELL_RESET, shell::reset_bits::CMAC0);
    assert_eq!(card.cmac_counter(0, "stat_rx_total_pkts"), 0);
    card.inject(0, &frame(UNICAST, 0x0800, 100, 0));
    card.run_until_idle();
    assert_eq!(card.stats().rx_disabled_dropped, 1);
    // The adapter has its own reset bit.
    assert_eq!(adapter_counter(&card, 0, adapter::RX_RECV_PKTS), 1);
    card.shell()
        .write(shell::SHELL_RESET, shell::reset_bits::ADAPTER0);
    assert_eq!(adapter_counter(&card, 0, adapter::RX_RECV_PKTS), 0);
}

#[test]
fn link_status_is_latched_low() {
    let card = card();
    let bar2 = card.shell();
    let reg = cmac::STAT_RX_STATUS.on(cmac::cmac_base(1));
    assert_eq!(bar2.read(reg), cmac::STAT_RX_STATUS_UP);
    card.set_link(1, false);
    assert_eq!(bar2.read(reg), 0);
    assert_eq!(bar2.read(reg), 0);
    card.set_link(1, true);
    assert_eq!(bar2.read(reg), cmac::STAT_RX_STATUS_UP);
    // A flap between two reads: the first read returns the latched "went down", the second the
    // current state (why the driver reads twice, hardware.md §10.3).
    card.set_link(1, false);
    card.set_link(1, true);
    assert_eq!(bar2.read(reg), 0);
    assert_eq!(bar2.read(reg), cmac::STAT_RX_STATUS_UP);
}

#[test]
fn link_down_carries_nothing() {
    let card = ready_card();
    card.set_link(1, false);
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    tx.post(&frame(UNICAST, 0x0800, 60, 0));
    tx.doorbell();
    card.run_until_idle();
    // Sent and captured on port 0; port 1 is down, so it never arrives there.
    assert_eq!(card.take_egress(0).len(), 1);
    assert_eq!(card.stats().link_down_dropped, 1);
    tx.free();
}

#[test]
fn tx_disabled_cmac_does_not_send() {
    let card = card_with(|c| c.wire = Wire::Open);
    init_globals(&card);
    setup_function(&card, 0, 8);
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    tx.post(&frame(UNICAST, 0x0800, 60, 0));
    tx.doorbell();
    card.run_until_idle();
    assert!(card.take_egress(0).is_empty());
    assert_eq!(adapter_counter(&card, 0, adapter::TX_DROP_PKTS), 1);
    assert_eq!(card.stats().tx_disabled_dropped, 1);
    tx.free();
}

#[test]
fn gt_loopback_returns_tx_inside_the_port() {
    let card = ready_card();
    card.shell().write(cmac::GT_LOOPBACK.on(cmac::cmac_base(0)), 1);
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    tx.post(&frame(UNICAST, 0x0800, 60, 0));
    tx.doorbell();
    card.run_until_idle();
    assert!(card.take_egress(0).is_empty());
    assert_eq!(card.cmac_counter(0, "stat_rx_total_pkts"), 1);
    assert_eq!(card.cmac_counter(1, "stat_rx_total_pkts"), 0);
    tx.free();
}

#[test]
fn gt_loopback_hears_only_itself_and_keeps_its_link() {
    let card = ready_card();
    let bar2 = card.shell();
    let status = cmac::STAT_RX_STATUS.on(cmac::cmac_base(0));
    bar2.write(
        cmac::GT_LOOPBACK.on(cmac::cmac_base(0)),
        cmac::GT_LOOPBACK_NEAR_END,
    );
    // The cable is unplugged: the loopback still gives port 0 a signal.
    card.set_link(0, false);
    let _ = bar2.read(status);
    assert_eq!(bar2.read(status), cmac::STAT_RX_STATUS_UP);
    card.set_link(0, true);
    // What port 1 sends over the cable does not reach a port in loopback.
    let mut tx1 = TxQueue::new(&card, 1, 0, SMALL_RING);
    tx1.post(&frame(UNICAST, 0x0800, 60, 0));
    tx1.doorbell();
    card.run_until_idle();
    assert_eq!(card.cmac_counter(0, "stat_rx_total_pkts"), 0);
    // Loopback off: the cable again.
    bar2.write(cmac::GT_LOOPBACK.on(cmac::cmac_base(0)), 0);
    tx1.post(&frame(UNICAST, 0x0800, 60, 1));
    tx1.doorbell();
    card.run_until_idle();
    assert_eq!(card.cmac_counter(0, "stat_rx_total_pkts"), 1);
    tx1.free();
}

fn link(card: &onic_sim::Card, port: u8) -> bool {
    let reg = cmac::STAT_RX_STATUS.on(cmac::cmac_base(port));
    let _ = card.shell().read(reg);
    card.shell().read(reg) == cmac::STAT_RX_STATUS_UP
}

#[test]
fn ends_with_different_fec_settings_never_link() {
    let card = ready_card();
    let bar2 = card.shell();
    assert!(link(&card, 0) && link(&card, 1), "both ends run RS-FEC");
    // RS-FEC off on port 0 only: neither receiver can decode what the other end sends.
    bar2.write(
        cmac::DISABLE_RSFEC.reg.on(cmac::cmac_base(0)),
        cmac::DISABLE_RSFEC.value,
    );
    assert!(!link(&card, 0) && !link(&card, 1));
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    tx.post(&frame(UNICAST, 0x0800, 60, 0));
    tx.doorbell();
    card.run_until_idle();
    assert_eq!(card.cmac_counter(1, "stat_rx_total_pkts"), 0);
    assert_eq!(card.stats().link_down_dropped, 1);
    // Off on both ends: the link is back, frames cross.
    bar2.write(
        cmac::DISABLE_RSFEC.reg.on(cmac::cmac_base(1)),
        cmac::DISABLE_RSFEC.value,
    );
    assert!(link(&card, 0) && link(&card, 1));
    tx.post(&frame(UNICAST, 0x0800, 60, 1));
    tx.doorbell();
    card.run_until_idle();
    assert_eq!(card.cmac_counter(1, "stat_rx_total_pkts"), 1);
    // A port in loopback with RX and TX disagreeing cannot hear itself either.
    bar2.write(
        cmac::GT_LOOPBACK.on(cmac::cmac_base(0)),
        cmac::GT_LOOPBACK_NEAR_END,
    );
    assert!(link(&card, 0));
    bar2.write(
        cmac::RSFEC_CONF_ENABLE.on(cmac::cmac_base(0)),
        cmac::RSFEC_ENABLE_RX,
    );
    assert!(!link(&card, 0));
    tx.free();
}

fn latched(card: &onic_sim::Card, port: u8, c: cmac::Counter) -> u64 {
    let base = cmac::cmac_base(port);
    let bar2 = card.shell();
    bar2.write(cmac::TICK.on(base), cmac::TICK_LATCH);
    u64::from(bar2.read(c.low.on(base))) | u64::from(bar2.read(c.high().on(base))) << 32
}

/// Sends `n` frames from port 0 to port 1 and returns how many port 1's MAC took as good.
fn cross(card: &onic_sim::Card, n: u8) -> u64 {
    let before = card.cmac_counter(1, "stat_rx_total_good_pkts");
    let mut tx = TxQueue::new(card, 0, 0, SMALL_RING);
    for i in 0..n {
        tx.post(&frame(UNICAST, 0x0800, 60, i));
    }
    tx.doorbell();
    card.run_until_idle();
    tx.free();
    card.cmac_counter(1, "stat_rx_total_good_pkts") - before
}

#[test]
fn rs_fec_corrects_what_it_can_and_counts_codewords() {
    let card = ready_card();
    let corrected = cmac::STAT_RX_RSFEC_CORRECTED_CW;
    let uncorrected = cmac::STAT_RX_RSFEC_UNCORRECTED_CW;
    // RS-FEC on (the enable sequence): 3 corrected, 2 not.
    card.faults().fec_errors_next_frames(3, 2);
    assert_eq!(cross(&card, 8), 6, "the two uncorrectable frames are lost");
    assert_eq!(
        (latched(&card, 1, corrected), latched(&card, 1, uncorrected)),
        (3, 2)
    );
    assert_eq!(card.cmac_counter(1, "stat_rx_pkt_bad_fcs"), 2);
    // Nothing is visible before a TICK, like every CMAC counter.
    card.faults().fec_errors_next_frames(1, 0);
    cross(&card, 1);
    let base = cmac::cmac_base(1);
    assert_eq!(card.shell().read(corrected.low.on(base)), 3);
    assert_eq!(latched(&card, 1, corrected), 4);
    // Correction off: nothing is corrected or counted, the frame keeps its errors.
    card.shell().write(
        cmac::RSFEC_CONF_IND_CORRECTION.on(base),
        cmac::RSFEC_INDICATION | cmac::RSFEC_IEEE_INDICATION,
    );
    card.faults().fec_errors_next_frames(1, 0);
    assert_eq!(cross(&card, 1), 0);
    assert_eq!(latched(&card, 1, corrected), 4);
    // RS-FEC off on both ends: every line error reaches the MAC, no codeword is counted.
    for port in 0..2 {
        card.shell().write(
            cmac::DISABLE_RSFEC.reg.on(cmac::cmac_base(port)),
            cmac::DISABLE_RSFEC.value,
        );
    }
    card.faults().fec_errors_next_frames(2, 1);
    assert_eq!(cross(&card, 4), 1);
    assert_eq!(
        (latched(&card, 1, corrected), latched(&card, 1, uncorrected)),
        (4, 2)
    );
    assert_eq!(card.cmac_counter(1, "stat_rx_pkt_bad_fcs"), 6);
    // The counters are statistics: a write is a violation.
    card.shell().write(corrected.low.on(base), 0);
    assert_eq!(card.violations().len(), 1);
}

fn stat(card: &onic_sim::Card, port: u8, name: &str) -> u64 {
    let c = CMAC_STATS.iter().find(|c| c.name == name).unwrap();
    let base = cmac::cmac_base(port);
    let bar2 = card.shell();
    u64::from(bar2.read(c.low.on(base))) | u64::from(bar2.read(c.high().on(base))) << 32
}

#[test]
fn tick_latches_cmac_statistics() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    tx.post(&frame(UNICAST, 0x0800, 60, 0)); // 64 on the wire
    tx.post(&frame(BROADCAST, 0x0806, 124, 0)); // 128
    tx.post(&frame(MULTICAST, 0x8100, 1514, 0)); // 1518, VLAN
    tx.post(&frame([0x01, 0x80, 0xC2, 0, 0, 1], 0x8808, 60, 0)); // not yet a pause: fix opcode below
    tx.doorbell();
    // Make the last frame a real PAUSE (opcode 0x0001).
    let mut pause = frame([0x01, 0x80, 0xC2, 0, 0, 1], 0x8808, 60, 0);
    pause[14] = 0;
    pause[15] = 1;
    tx.pages[3].bytes_mut()[..60].copy_from_slice(&pause);
    card.run_until_idle();

    // Nothing is visible before TICK.
    assert_eq!(stat(&card, 0, "stat_tx_total_pkts"), 0);
    card.shell()
        .write(cmac::TICK.on(cmac::cmac_base(0)), cmac::TICK_LATCH);
    assert_eq!(stat(&card, 0, "stat_tx_total_pkts"), 4);
    assert_eq!(stat(&card, 0, "stat_tx_total_good_pkts"), 4);
    assert_eq!(stat(&card, 0, "stat_tx_total_bytes"), 64 + 128 + 1518 + 64);
    assert_eq!(stat(&card, 0, "stat_tx_pkt_64_bytes"), 2);
    assert_eq!(stat(&card, 0, "stat_tx_pkt_128_255_bytes"), 1);
    assert_eq!(stat(&card, 0, "stat_tx_pkt_1024_1518_bytes"), 1);
    assert_eq!(stat(&card, 0, "stat_tx_unicast"), 1);
    assert_eq!(stat(&card, 0, "stat_tx_broadcast"), 1);
    assert_eq!(stat(&card, 0, "stat_tx_multicast"), 2);
    assert_eq!(stat(&card, 0, "stat_tx_vlan"), 1);
    assert_eq!(stat(&card, 0, "stat_tx_pause"), 1);
    // More traffic does not move the latched values until the next TICK.
    tx.post(&frame(UNICAST, 0x0800, 60, 0));
    tx.doorbell();
    card.run_until_idle();
    assert_eq!(stat(&card, 0, "stat_tx_total_pkts"), 4);
    card.shell()
        .write(cmac::TICK.on(cmac::cmac_base(0)), cmac::TICK_LATCH);
    assert_eq!(stat(&card, 0, "stat_tx_total_pkts"), 5);
    // The other port was not latched.
    assert_eq!(stat(&card, 1, "stat_tx_total_pkts"), 0);
    tx.free();
}

#[test]
fn rx_statistics_size_classes_and_errors() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    card.inject(0, &frame(UNICAST, 0x0800, 40, 0)); // runt: 44 on the wire
    card.inject(0, &frame(UNICAST, 0x0800, 2000, 0)); // longer than 1514
    card.inject(0, &frame(UNICAST, 0x0800, 200, 0));
    card.inject(0, &frame(UNICAST, 0x0020, 100, 0)); // length field 32 != 86
    let mut pfc = frame([0x01, 0x80, 0xC2, 0, 0, 1], 0x8808, 60, 0);
    pfc[14] = 1;
    pfc[15] = 1;
    card.inject(0, &pfc);
    card.run_until_idle();
    card.shell().write(cmac::TICK.on(cmac::cmac_base(0)), 1);
    assert_eq!(stat(&card, 0, "stat_rx_total_pkts"), 5);
    assert_eq!(stat(&card, 0, "stat_rx_total_good_pkts"), 3);
    assert_eq!(stat(&card, 0, "stat_rx_pkt_small"), 1);
    assert_eq!(stat(&card, 0, "stat_rx_undersize"), 1);
    assert_eq!(stat(&card, 0, "stat_rx_pkt_1549_2047_bytes"), 1);
    assert_eq!(stat(&card, 0, "stat_rx_oversize"), 1);
    assert_eq!(stat(&card, 0, "stat_rx_toolong"), 1);
    assert_eq!(stat(&card, 0, "stat_rx_pkt_128_255_bytes"), 1);
    assert_eq!(stat(&card, 0, "stat_rx_inrangeerr"), 1);
    assert_eq!(stat(&card, 0, "stat_rx_user_pause"), 1);
    // Two errored frames go to the adapter's error counter; the PFC frame stays in the MAC.
    assert_eq!(adapter_counter(&card, 0, adapter::RX_ERR_PKTS), 2);
    assert_eq!(adapter_counter(&card, 0, adapter::RX_RECV_PKTS), 2);
}

#[test]
fn adapter_counters_are_64_bit_low_high() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    tx.post(&frame(UNICAST, 0x0800, 1000, 0));
    tx.doorbell();
    card.run_until_idle();
    assert_eq!(adapter_counter(&card, 0, adapter::TX_SENT_BYTES), 1000);
    assert_eq!(adapter_counter(&card, 0, adapter::TX_SENT_BYTES.next()), 0);
    assert_eq!(card.shell().read32(cmac::adapter_base(0) + 0x50), UNMAPPED_READ);
    tx.free();
}

#[test]
fn sim_delay_advances_the_clock_and_runs_the_card() {
    let card = ready_card();
    steer_function_0_to(&card, 0);
    let rx = RxQueue::new(&card, 0, 0);
    card.inject(0, &frame(UNICAST, 0x0800, 64, 0));
    let mut delay = card.delay();
    delay.delay_us(1);
    assert_eq!(card.now_ns(), 1000);
    assert_eq!(card.take_interrupts().len(), 1);
    assert_eq!(rx.cmpt_status().0, 1);
    rx.free();
}
