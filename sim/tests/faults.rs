//! Every fault knob, and the violations a driver bug produces.

mod common;

use common::*;
use onic_hal::regs::cmac::adapter;
use onic_hal::regs::shell;
use onic_hal::{DmaError, DmaMemory, RegisterAccess, RegisterWindow};
use onic_sim::{Corruption, Violation, Wire};

fn steer_all_to(card: &onic_sim::Card, func: u8, q: u32) {
    for k in 0..shell::INDIR_TABLE_ENTRIES {
        card.shell()
            .write(shell::indir_table(onic_hal::FunctionId::new(func).unwrap(), k), q);
    }
}

fn rx_every(card: &onic_sim::Card) -> RxQueue<'_> {
    steer_all_to(card, 0, 0);
    RxQueue::with(
        card,
        0,
        0,
        RxOpts {
            trig_mode: 1,
            ..RxOpts::default()
        },
    )
}

#[test]
fn drop_next_frames() {
    let card = ready_card();
    let mut rx = rx_every(&card);
    card.faults().drop_next_frames(2);
    for i in 0..3 {
        card.inject(0, &frame(UNICAST, 0x0800, 64, i));
    }
    card.run_until_idle();
    let (_, data) = rx.poll(4096).unwrap();
    assert_eq!(data, frame(UNICAST, 0x0800, 64, 2));
    assert!(rx.poll(4096).is_none());
    assert_eq!(card.stats().wire_dropped, 2);
    rx.free();
}

#[test]
fn drop_rate_is_seeded_and_deterministic() {
    // Fewer frames under Miri, which interprets every step.
    const FRAMES: u64 = if cfg!(miri) { 40 } else { 200 };
    let run = |seed| {
        let card = ready_card_with(|c| c.seed = seed);
        card.faults().set_drop_rate_ppm(500_000);
        for _ in 0..FRAMES {
            card.inject(0, &frame(UNICAST, 0x0800, 64, 0));
        }
        card.run_until_idle();
        card.stats().wire_dropped
    };
    let a = run(7);
    assert_eq!(a, run(7));
    assert!((FRAMES / 4..FRAMES * 3 / 4).contains(&a), "{a}");
    let card = ready_card();
    card.faults().set_drop_rate_ppm(1_000_000);
    card.inject(0, &frame(UNICAST, 0x0800, 64, 0));
    card.run_until_idle();
    assert_eq!(card.stats().wire_dropped, 1);
}

#[test]
fn corrupt_completions() {
    let card = ready_card();
    let rx = rx_every(&card);
    let f = frame(UNICAST, 0x0800, 100, 0);
    card.faults().corrupt_next_completions(1, Corruption::ErrBit);
    card.inject(0, &f);
    card.run_until_idle();
    card.faults().corrupt_next_completions(1, Corruption::LengthZero);
    card.inject(0, &f);
    card.run_until_idle();
    card.faults()
        .corrupt_next_completions(1, Corruption::LengthTooLarge);
    card.inject(0, &f);
    card.inject(0, &f);
    card.run_until_idle();
    let e: Vec<Cmpt> = (0..4).map(|i| rx.entry(i)).collect();
    assert!(e[0].err && e[0].len == 100);
    assert!(!e[1].err && e[1].len == 0);
    assert!(e[2].len > 4096);
    assert!(!e[3].err && e[3].len == 100);
    rx.free();
}

#[test]
fn stalled_h2c_writeback_catches_up_when_released() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    card.faults().stall_h2c_writeback(true);
    for i in 0..5 {
        tx.post(&frame(UNICAST, 0x0800, 60, i));
    }
    tx.doorbell();
    card.run_until_idle();
    assert_eq!(card.take_egress(0).len(), 5);
    assert_eq!(tx.status(), (0, 0));
    card.faults().stall_h2c_writeback(false);
    card.run_until_idle();
    assert_eq!(tx.status(), (5, 5));
    tx.free();
}

#[test]
fn cmpt_status_pidx_jumps_once() {
    let card = ready_card();
    let rx = rx_every(&card);
    card.faults().cmpt_status_pidx_jump();
    card.inject(0, &frame(UNICAST, 0x0800, 64, 0));
    card.run_until_idle();
    assert!(rx.cmpt_status().0 >= rx.usable());
    rx.cmpt_doorbell(true);
    card.inject(0, &frame(UNICAST, 0x0800, 64, 0));
    card.run_until_idle();
    assert_eq!(rx.cmpt_status().0, 2);
    rx.free();
}

#[test]
fn fail_page_allocations_and_budget() {
    let card = card_with(|c| c.dma.page_budget = Some(2));
    let dma = card.dma();
    card.faults().fail_next_page_allocs(1);
    assert_eq!(dma.alloc_page().err(), Some(DmaError::OutOfMemory));
    let a = dma.alloc_page().unwrap();
    let b = dma.alloc_page().unwrap();
    assert_eq!(dma.alloc_page().err(), Some(DmaError::OutOfMemory));
    assert_eq!(card.dma_stats().page_alloc_failures, 2);
    dma.free_page(a);
    dma.free_page(b);
    assert_eq!(card.dma_stats().live_pages, 0);
}

#[test]
fn bad_fcs_frames_are_counted_and_not_delivered() {
    let card = ready_card();
    let mut rx = rx_every(&card);
    card.faults().bad_fcs_next_frames(1);
    card.inject(0, &frame(UNICAST, 0x0800, 100, 0));
    card.run_until_idle();
    assert!(rx.poll(4096).is_none());
    assert_eq!(adapter_counter(&card, 0, adapter::RX_ERR_PKTS), 1);
    assert_eq!(card.cmac_counter(0, "stat_rx_bad_fcs"), 1);
    assert_eq!(card.cmac_counter(0, "stat_rx_pkt_bad_fcs"), 1);
    assert_eq!(card.cmac_counter(0, "stat_rx_total_good_pkts"), 0);
    rx.free();
}

#[test]
fn metadata_must_equal_length() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    tx.post_with_metadata(&frame(UNICAST, 0x0800, 60, 0), 0x1_0000 | 61);
    tx.post(&frame(UNICAST, 0x0800, 60, 1));
    tx.doorbell();
    card.run_until_idle();
    assert_eq!(card.take_egress(0), vec![frame(UNICAST, 0x0800, 60, 1)]);
    assert_eq!(adapter_counter(&card, 0, adapter::TX_DROP_PKTS), 1);
    assert_eq!(
        card.violations(),
        [Violation::MetadataMismatch {
            qid: onic_hal::AbsQueueId::new(0),
            index: 0,
            metadata: 0x1_0000 | 61,
            len: 60
        }]
    );
    tx.free();
}

#[test]
fn unclaimed_h2c_queue_stalls_all_tx_until_qconf_fixed() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    // Shrink PF0's QCONF to 2 queues: queue 3 is no longer claimed by any function.
    card.shell()
        .write(shell::qconf(onic_hal::FunctionId::new(0).unwrap()), 2);
    let mut bad = TxQueue::new(&card, 0, 3, SMALL_RING);
    let mut good = TxQueue::new(&card, 1, 0, SMALL_RING);
    bad.post(&frame(UNICAST, 0x0800, 60, 0));
    bad.doorbell();
    good.post(&frame(UNICAST, 0x0800, 60, 1));
    good.doorbell();
    card.run_until_idle();
    assert_eq!(card.h2c_stalled(), Some(onic_hal::AbsQueueId::new(3)));
    assert!(card.take_egress(0).is_empty() && card.take_egress(1).is_empty());
    assert_eq!(
        card.take_violations(),
        [Violation::H2cStalled {
            qid: onic_hal::AbsQueueId::new(3)
        }]
    );
    card.shell()
        .write(shell::qconf(onic_hal::FunctionId::new(0).unwrap()), 8);
    card.run_until_idle();
    assert_eq!(card.h2c_stalled(), None);
    assert_eq!(card.take_egress(0).len(), 1);
    assert_eq!(card.take_egress(1).len(), 1);
    bad.free();
    good.free();
}

#[test]
fn device_write_to_freed_page_is_reported_not_performed() {
    let card = ready_card();
    let mut rx = rx_every(&card);
    // Free the page behind descriptor 0 but leave the descriptor in the ring (a driver bug).
    let page = rx.pages[0].take().unwrap();
    let addr = page.dma_addr();
    let dma = card.dma();
    dma.free_page(page.unmap(&dma, onic_hal::Direction::FromDevice));
    card.inject(0, &frame(UNICAST, 0x0800, 64, 0));
    card.run_until_idle();
    assert_eq!(
        card.take_violations(),
        [Violation::DeviceAccess {
            access: onic_sim::DeviceAccess::C2hDataWrite,
            addr,
            len: 64,
            problem: onic_sim::AccessProblem::Freed,
        }]
    );
    // The completion is still written (the IP does not know), the data went nowhere.
    assert_eq!(rx.entry(0).len, 64);
    rx.free();
    assert_eq!(card.dma_stats().live_pages, 0);
}

#[test]
fn device_access_past_a_mapping_or_to_unknown_memory() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    let page_addr = tx.post(&frame(UNICAST, 0x0800, 60, 0));
    // A second descriptor that runs past the end of the page, and one to an address never mapped.
    tx.post_raw(page_addr + 4090, 60, 60);
    tx.post_raw(0xDEAD_0000, 60, 60);
    tx.doorbell();
    card.run_until_idle();
    let v = card.take_violations();
    assert!(matches!(
        v.as_slice(),
        [
            Violation::DeviceAccess {
                problem: onic_sim::AccessProblem::OutOfRange,
                ..
            },
            Violation::DeviceAccess {
                problem: onic_sim::AccessProblem::Unmapped,
                ..
            }
        ]
    ));
    assert_eq!(card.take_egress(0).len(), 1);
    tx.free();
}

#[test]
fn device_write_into_a_to_device_page_is_refused() {
    let card = ready_card();
    let mut rx = rx_every(&card);
    let dma = card.dma();
    // Swap slot 0's page for one mapped ToDevice.
    let old = rx.pages[0].take().unwrap();
    dma.free_page(old.unmap(&dma, onic_hal::Direction::FromDevice));
    let p = dma
        .map_page(dma.alloc_page().unwrap(), onic_hal::Direction::ToDevice)
        .unwrap();
    rx.desc.write_u64(0, p.dma_addr().get());
    card.inject(0, &frame(UNICAST, 0x0800, 64, 0));
    card.run_until_idle();
    assert!(matches!(
        card.take_violations().as_slice(),
        [Violation::DeviceAccess {
            problem: onic_sim::AccessProblem::WrongDirection,
            ..
        }]
    ));
    dma.free_page(p.unmap(&dma, onic_hal::Direction::ToDevice));
    rx.free();
}

#[test]
#[should_panic(expected = "onic-sim violation")]
fn strict_mode_panics_on_violation() {
    let card = card_with(|c| c.strict = true);
    card.shell().write32(0x0080_0000 - 4, 1);
}

#[test]
fn completion_lengths_are_overridden_in_order() {
    let card = ready_card();
    let rx = rx_every(&card);
    card.faults().override_completion_lengths(&[7, 3000]);
    for i in 0..3 {
        card.inject(0, &frame(UNICAST, 0x0800, 100, i));
    }
    card.run_until_idle();
    let lens: Vec<u16> = (0..3).map(|i| rx.entry(i).len).collect();
    assert_eq!(lens, [7, 3000, 100]);
    // The data went where it always goes: one buffer each, the descriptors consumed in order.
    assert_eq!(card.stats().completions, 3);
    rx.free();
}

#[test]
fn frozen_color_keeps_the_first_laps_color_after_a_wrap() {
    let card = ready_card();
    let mut rx = rx_every(&card);
    let usable = rx.usable();
    card.faults().freeze_cmpt_color(true);
    for i in 0..usable + 1 {
        card.inject(0, &frame(UNICAST, 0x0800, 64, i as u8));
        card.run_until_idle();
        // Consume as the driver would so that the ring never fills.
        if i < usable {
            assert!(rx.poll(4096).is_some());
            rx.refill();
            rx.cmpt_doorbell(true);
        }
    }
    // The entry of the second lap carries color 1 (the first lap's); a driver expects 0.
    assert!(rx.entry(0).color);
    assert!(rx.poll(4096).is_none());
    card.faults().freeze_cmpt_color(false);
    rx.free();
}

#[test]
fn frozen_status_record_stays_while_entries_are_written() {
    let card = ready_card();
    let rx = rx_every(&card);
    card.inject(0, &frame(UNICAST, 0x0800, 64, 0));
    card.run_until_idle();
    assert_eq!(rx.cmpt_status().0, 1);
    rx.cmpt_doorbell(true);
    card.faults().freeze_cmpt_status(true);
    card.inject(0, &frame(UNICAST, 0x0800, 64, 1));
    card.run_until_idle();
    rx.cmpt_doorbell(true);
    assert_eq!(rx.cmpt_status().0, 1);
    assert!(rx.entry(1).color);
    card.faults().freeze_cmpt_status(false);
    rx.cmpt_doorbell(true);
    assert_eq!(rx.cmpt_status().0, 2);
    rx.free();
}

#[test]
fn arbitrary_device_writes_land_inside_device_memory_only() {
    let card = ready_card();
    let rx = rx_every(&card);
    let at = rx.cmpt.dma_addr();
    card.faults()
        .device_write(at, &0x0000_0064_0000_0002u64.to_le_bytes())
        .unwrap();
    assert_eq!((rx.entry(0).color, rx.entry(0).len), (true, 100));
    let outside = onic_hal::DmaAddr::new(0x10);
    let v = card.faults().device_write(outside, &[1, 2, 3]).unwrap_err();
    assert!(matches!(
        v,
        Violation::DeviceAccess {
            access: onic_sim::DeviceAccess::FaultWrite,
            ..
        }
    ));
    // The test's own mistake is not the driver's: nothing recorded.
    assert_eq!(card.violations(), []);
    rx.free();
}

/// An error the QDMA detects sets its leaf and group status bits and, while GLBL_ERR_INT is
/// armed, sends one error interrupt to the vector it names; the arm bit then clears.
#[test]
fn a_detected_error_sets_its_status_and_interrupts_once_per_arming() {
    use onic_hal::layout::csr::GlblErrInt;
    use onic_hal::regs::qdma::{self, errors};
    let card = ready_card();
    card.take_interrupts();
    let pf0 = onic_hal::FunctionId::new(0).unwrap();
    // Unarmed: status only.
    card.qdma(0)
        .write(qdma::GLBL_ERR_INT, GlblErrInt::new(pf0, 9, false));
    assert!(!card.faults().raise_error(2, 0x8));
    assert_eq!(card.take_interrupts(), []);
    assert_eq!(card.qdma(0).read(qdma::GLBL_ERR_STAT), errors::GROUP_ST_C2H);
    assert_eq!(card.qdma(0).read(qdma::C2H_ERR_STAT), 0x8);
    // Armed: one interrupt, then disarmed.
    card.qdma(0)
        .write(qdma::GLBL_ERR_INT, GlblErrInt::new(pf0, 9, true));
    assert!(card.faults().raise_error(4, 0x1));
    assert_eq!(
        card.take_interrupts(),
        [onic_sim::Interrupt { func: 0, vector: 9 }]
    );
    assert_eq!(
        card.qdma(0).read(qdma::GLBL_ERR_STAT),
        errors::GROUP_ST_C2H | errors::GROUP_ST_H2C_V4
    );
    assert_eq!(card.qdma(0).read(qdma::H2C_ERR_STAT), 0x1);
    assert!(!card.qdma(0).read(qdma::GLBL_ERR_INT).arm());
    assert!(!card.faults().raise_error(4, 0x2));
    assert_eq!(card.take_interrupts(), []);
    // Nothing for a leaf that does not exist or no bits.
    assert!(!card.faults().raise_error(7, 1));
    assert!(!card.faults().raise_error(0, 0));
    assert_eq!(card.qdma(0).read(qdma::GLBL_DSC_ERR_STS), 0);
    assert_eq!(card.violations(), []);
}
