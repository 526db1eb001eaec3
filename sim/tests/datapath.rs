//! H2C and C2H datapath through the model, driven by the test driver in `common`.

mod common;

use common::*;
use onic_hal::regs::cmac::adapter;
use onic_hal::regs::{qdma, shell};
use onic_hal::{RegValue, RegisterAccess};
use onic_sim::{Interrupt, Violation, Wire};

#[test]
fn h2c_send_with_writeback() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    let mut tx = TxQueue::new(&card, 0, 2, SMALL_RING);
    let frames: Vec<Vec<u8>> = (0..3)
        .map(|i| frame(UNICAST, 0x0800, 60 + i * 10, i as u8))
        .collect();
    for f in &frames {
        tx.post(f);
    }
    tx.doorbell();
    assert!(card.step());
    assert_eq!(card.take_egress(0), frames);
    assert_eq!(card.take_egress(1), Vec::<Vec<u8>>::new());
    // Nothing pending after the last descriptor: the status record shows cidx = pidx (wbi_chk).
    assert_eq!(tx.status(), (3, 3));
    assert_eq!(adapter_counter(&card, 0, adapter::TX_SENT_PKTS), 3);
    assert_eq!(adapter_counter(&card, 0, adapter::TX_SENT_BYTES), 60 + 70 + 80);
    // The hardware context reports the consumer index.
    assert_eq!(ctxt_read(&card, SEL_HW_H2C, tx.abs())[0] & 0xFFFF, 3);
    assert!(!card.step());
    assert_eq!(card.violations(), []);
    tx.free();
}

#[test]
fn h2c_interval_writeback_every_four_descriptors() {
    let card = ready_card_with(|c| {
        c.wire = Wire::Open;
        c.h2c_batch = 6;
    });
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    for i in 0..9 {
        tx.post(&frame(UNICAST, 0x0800, 60, i));
    }
    tx.doorbell();
    card.step();
    // 6 consumed, still pending: only the interval writeback at 4 happened.
    assert_eq!(tx.status(), (9, 4));
    card.step();
    assert_eq!(tx.status(), (9, 9));
    assert_eq!(card.take_egress(0).len(), 9);
    tx.free();
}

#[test]
fn h2c_ring_wraps() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    let mut tx = TxQueue::new(&card, 1, 0, SMALL_RING);
    let mut sent = 0u32;
    for round in 0..3u8 {
        for i in 0..40u8 {
            tx.post(&frame(UNICAST, 0x0800, 60, round ^ i));
        }
        tx.doorbell();
        card.run_until_idle();
        sent += 40;
        assert_eq!(tx.status().1, sent % 63);
        assert_eq!(card.take_egress(1).len(), 40);
        // Give the pages back as a driver would after reclaim.
        let dma = card.dma();
        for p in tx.pages.drain(..) {
            onic_hal::DmaMemory::free_page(&dma, p.unmap(&dma, onic_hal::Direction::ToDevice));
        }
    }
    assert_eq!(card.violations(), []);
    tx.free();
}

#[test]
fn c2h_receive_with_color_flip_across_wraps() {
    let card = ready_card();
    // Steer everything of function 0 to queue 0.
    steer_function_0_to(&card, 0);
    let mut rx = RxQueue::with(&card, 0, 0, RxOpts::every_packet());
    let usable = rx.usable();
    let total = 2 * usable + 5;
    let mut seen_colors = Vec::new();
    for i in 0..total {
        let f = frame(UNICAST, 0x0800, 64 + (i as usize % 7), i as u8);
        card.inject(0, &f);
        card.run_until_idle();
        let (e, data) = rx.poll(4096).expect("completion");
        assert_eq!(data, f);
        assert_eq!(usize::from(e.len), f.len());
        assert_eq!(e.qid, 0);
        assert_eq!(e.pkt_id, (i + 1) as u16);
        seen_colors.push(e.color);
        rx.refill();
        rx.cmpt_doorbell(true);
    }
    // Color 1 for the first lap, 0 for the second, 1 again after the second wrap.
    assert!(seen_colors[..usable as usize].iter().all(|&c| c));
    assert!(seen_colors[usable as usize..2 * usable as usize]
        .iter()
        .all(|&c| !c));
    assert!(seen_colors[2 * usable as usize..].iter().all(|&c| c));
    let (pidx, _, color) = rx.cmpt_status();
    assert_eq!((pidx, color), (total % usable, true));
    assert_eq!(card.violations(), []);
    rx.free();
}

#[test]
fn multi_descriptor_frame_spans_buffers() {
    let card = ready_card();
    for k in 0..shell::INDIR_TABLE_ENTRIES {
        card.shell()
            .write(shell::indir_table(onic_hal::FunctionId::new(0).unwrap(), k), 1);
    }
    let mut rx = RxQueue::with(
        &card,
        0,
        1,
        RxOpts {
            bufsz_idx: BUF_256,
            trig_mode: 1,
            ..RxOpts::default()
        },
    );
    let f = frame(UNICAST, 0x0800, 600, 7);
    card.inject(0, &f);
    card.run_until_idle();
    let (e, data) = rx.poll(256).unwrap();
    assert_eq!((e.len, e.qid), (600, 1));
    assert_eq!(data, f);
    assert_eq!(rx.desc_cidx, 3);
    // The hardware context agrees: three descriptors consumed, one completion.
    assert_eq!(ctxt_read(&card, SEL_HW_C2H, u32::from(rx.abs()))[0] & 0xFFFF, 3);
    assert_eq!(rx.cmpt_status().0, 1);
    // Not enough descriptors for a frame: all or nothing.
    rx.set_desc_pidx(5);
    card.inject(0, &f);
    card.run_until_idle();
    assert!(rx.poll(256).is_none());
    assert_eq!(adapter_counter(&card, 0, adapter::RX_DROP_PKTS), 1);
    assert_eq!(ctxt_read(&card, SEL_HW_C2H, u32::from(rx.abs()))[0] & 0xFFFF, 3);
    rx.free();
}

#[test]
fn drop_on_no_descriptors_counts_in_adapter() {
    let card = ready_card();
    let rx = RxQueue::with(
        &card,
        0,
        0,
        RxOpts {
            initial_pidx: Some(0),
            ..RxOpts::default()
        },
    );
    steer_function_0_to(&card, 0);
    card.inject(0, &frame(UNICAST, 0x0800, 100, 0));
    card.run_until_idle();
    assert_eq!(adapter_counter(&card, 0, adapter::RX_RECV_PKTS), 1);
    assert_eq!(adapter_counter(&card, 0, adapter::RX_DROP_PKTS), 1);
    assert_eq!(adapter_counter(&card, 0, adapter::RX_DROP_BYTES), 100);
    assert_eq!(card.stats().c2h_no_desc_dropped, 1);
    // Frames for a queue without contexts are dropped the same way.
    for k in 0..shell::INDIR_TABLE_ENTRIES {
        card.shell()
            .write(shell::indir_table(onic_hal::FunctionId::new(0).unwrap(), k), 5);
    }
    card.inject(0, &frame(UNICAST, 0x0800, 100, 0));
    card.run_until_idle();
    assert_eq!(adapter_counter(&card, 0, adapter::RX_DROP_PKTS), 2);
    assert_eq!(card.stats().c2h_no_queue_dropped, 1);
    rx.free();
}

#[test]
fn cable_carries_pf0_tx_to_pf1_rx() {
    let card = ready_card();
    let mut rx = RxQueue::with(&card, 1, 0, RxOpts::every_packet());
    for k in 0..shell::INDIR_TABLE_ENTRIES {
        card.shell()
            .write(shell::indir_table(onic_hal::FunctionId::new(1).unwrap(), k), 0);
    }
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    let f = frame(BROADCAST, 0x0806, 60, 3);
    tx.post(&f);
    tx.doorbell();
    card.run_until_idle();
    assert_eq!(card.take_egress(0), vec![f.clone()]);
    let (e, data) = rx.poll(4096).unwrap();
    assert_eq!(data, f);
    // PF1's queue 0 is abs qid 64.
    assert_eq!(e.qid, 64);
    assert_eq!(card.take_interrupts(), vec![Interrupt { func: 1, vector: 0 }]);
    assert_eq!(card.violations(), []);
    tx.free();
    rx.free();
}

#[test]
fn loopback_wire_returns_frames_to_the_same_port() {
    let card = ready_card_with(|c| c.wire = Wire::Loopback);
    let mut rx = RxQueue::with(&card, 0, 0, RxOpts::every_packet());
    steer_function_0_to(&card, 0);
    let mut tx = TxQueue::new(&card, 0, 1, SMALL_RING);
    let f = frame(UNICAST, 0x0800, 70, 1);
    tx.post(&f);
    tx.doorbell();
    card.run_until_idle();
    assert_eq!(rx.poll(4096).unwrap().1, f);
    assert_eq!(adapter_counter(&card, 1, adapter::RX_RECV_PKTS), 0);
    tx.free();
    rx.free();
}

#[test]
fn rss_steers_the_spec_flow_to_entry_102() {
    let card = ready_card();
    // Entry 102 -> queue 3, everything else -> queue 0.
    for k in 0..shell::INDIR_TABLE_ENTRIES {
        card.shell().write(
            shell::indir_table(onic_hal::FunctionId::new(0).unwrap(), k),
            if k == 102 { 3 } else { 0 },
        );
    }
    let opts = RxOpts::every_packet();
    let mut q0 = RxQueue::with(&card, 0, 0, opts);
    let mut q3 = RxQueue::with(&card, 0, 3, opts);
    let udp = ipv4(17, [10, 0, 0, 1], [10, 0, 0, 2], [0x04, 0xD2, 0x16, 0x2E]);
    card.inject(0, &udp);
    // TCP 192.168.1.10:40000 -> 192.168.1.20:80 hashes to entry 61 -> queue 0.
    let tcp = ipv4(6, [192, 168, 1, 10], [192, 168, 1, 20], [0x9C, 0x40, 0x00, 0x50]);
    card.inject(0, &tcp);
    card.run_until_idle();
    let (e, data) = q3.poll(4096).unwrap();
    assert_eq!((e.qid, data), (3, udp));
    let (e, data) = q0.poll(4096).unwrap();
    assert_eq!((e.qid, data), (0, tcp));
    assert!(q3.poll(4096).is_none());
    assert_eq!(card.violations(), []);
    q0.free();
    q3.free();
}

#[test]
fn indirection_entry_beyond_numq_is_reported() {
    let card = ready_card();
    card.shell()
        .write(shell::indir_table(onic_hal::FunctionId::new(0).unwrap(), 0), 9); // numq is 8
    let mut f = frame(UNICAST, 0x86DD, 80, 0); // IPv6 hashes to 0
    f[14] = 0x60;
    card.inject(0, &f);
    card.run_until_idle();
    assert_eq!(
        card.violations(),
        [Violation::IndirectionOutOfRange {
            func: 0,
            entry: 0,
            value: 9,
            numq: 8
        }]
    );
}

/// A removed function's port still receives (the CMACs stay enabled): with QCONF = 0 its old
/// table steers frames into function 0's queues, with its qbase kept (numq 0) they stay with its
/// own, invalid queues and are dropped.
#[test]
fn frames_of_a_function_without_queues_stay_out_of_other_functions_queues() {
    let card = ready_card();
    let f1 = onic_hal::FunctionId::new(1).unwrap();
    let mut f = frame(UNICAST, 0x86DD, 80, 0); // IPv6 hashes to entry 0, which names queue 0
    f[14] = 0x60;
    card.shell().write(shell::qconf(f1), 0);
    card.inject(1, &f);
    card.run_until_idle();
    assert_eq!(
        card.violations(),
        [Violation::SteeredAcross {
            func: 1,
            qid: onic_hal::AbsQueueId::new(0),
            owner: 0
        }]
    );
    card.take_violations();
    card.shell()
        .write(shell::qconf(f1), shell::qconf_value(f1.qbase(), 0));
    card.inject(1, &f);
    card.run_until_idle();
    assert_eq!(card.violations(), []);
}

#[test]
fn trigger_timer_count_and_arm() {
    let card = ready_card();
    steer_function_0_to(&card, 0);
    // Count threshold index 1 = 2 entries; timer index 0 = 10 ticks x 25 cycles x 4 ns = 1 us.
    let mut rx = RxQueue::with(
        &card,
        0,
        0,
        RxOpts {
            counter_idx: 1,
            ..RxOpts::default()
        },
    );
    let f = frame(UNICAST, 0x0800, 64, 0);
    card.inject(0, &f);
    card.run_until_idle();
    // One completion: below the count, timer running. The status record is stale.
    assert_eq!(card.take_interrupts(), []);
    assert_eq!(rx.cmpt_status().0, 0);
    card.advance_time(999);
    assert_eq!(card.take_interrupts(), []);
    card.advance_time(1);
    assert_eq!(card.take_interrupts(), [Interrupt { func: 0, vector: 0 }]);
    assert_eq!(rx.cmpt_status().0, 1);
    rx.poll(4096).unwrap();
    rx.refill();

    // Not armed: the timer expires but nothing fires until the arming doorbell.
    card.inject(0, &f);
    card.run_until_idle();
    card.advance_time(5_000);
    assert_eq!(card.take_interrupts(), []);
    assert_eq!(rx.cmpt_status().0, 1);
    rx.cmpt_doorbell(true);
    assert_eq!(card.take_interrupts(), [Interrupt { func: 0, vector: 0 }]);
    assert_eq!(rx.cmpt_status().0, 2);
    rx.poll(4096).unwrap();
    rx.refill();

    // Count threshold: two completions fire at once, no time needed.
    rx.cmpt_doorbell(true);
    card.inject(0, &f);
    card.inject(0, &f);
    card.run_until_idle();
    assert_eq!(card.take_interrupts().len(), 1);
    assert_eq!(rx.cmpt_status().0, 4);

    // Arming consumes: a second trigger without re-arming raises nothing.
    rx.poll(4096).unwrap();
    rx.poll(4096).unwrap();
    card.inject(0, &f);
    card.inject(0, &f);
    card.run_until_idle();
    assert_eq!(card.take_interrupts(), []);
    // A doorbell with stat_en but no arm refreshes the status record only.
    rx.cmpt_doorbell(false);
    assert_eq!(rx.cmpt_status().0, 6);
    assert_eq!(card.take_interrupts(), []);
    rx.free();
}

#[test]
fn completion_ring_overflow_is_flagged_and_stops_the_queue() {
    let card = ready_card();
    steer_function_0_to(&card, 0);
    let mut rx = RxQueue::with(&card, 0, 0, RxOpts::every_packet());
    let usable = rx.usable();
    let f = frame(UNICAST, 0x0800, 64, 0);
    // The driver never advances the CMPT cidx: after usable - 1 entries the ring is full.
    for _ in 0..usable + 2 {
        card.inject(0, &f);
        card.run_until_idle();
        // Keep descriptors available.
        while rx.poll(4096).is_some() {}
        rx.refill();
    }
    // The first frame that finds the ring full is an overflow (the driver's fault): the QDMA
    // flags the queue and stops it, so the next frames find no queue.
    assert_eq!(card.stats().cmpt_full_dropped, 1);
    assert_eq!(card.stats().c2h_no_queue_dropped, 2);
    assert_eq!(adapter_counter(&card, 0, adapter::RX_DROP_PKTS), 3);
    assert_eq!(card.stats().completions, u64::from(usable - 1));
    let v = card.take_violations();
    assert!(
        matches!(v.as_slice(), [Violation::CmptOverflow { pidx, cidx: 0, .. }] if u64::from(*pidx) + 1 == u64::from(usable)),
        "{v:?}"
    );
    rx.free();
}

#[test]
fn bigger_completion_entries_use_their_stride() {
    let card = ready_card();
    steer_function_0_to(&card, 0);
    let mut rx = RxQueue::with(
        &card,
        0,
        0,
        RxOpts {
            trig_mode: 1,
            cmpt_desc_sz: 2,
            ..RxOpts::default()
        },
    );
    assert_eq!(rx.esize(), 32);
    for i in 0..3 {
        card.inject(0, &frame(UNICAST, 0x0800, 64 + i, 0));
    }
    card.run_until_idle();
    for i in 0..3 {
        let (e, _) = rx.poll(4096).unwrap();
        assert_eq!(usize::from(e.len), 64 + i);
    }
    rx.cmpt_doorbell(true);
    assert_eq!(rx.cmpt_status().0, 3);
    rx.free();
}

#[test]
fn doorbells_are_function_relative() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    // PF1 queue 5 = abs 69, rung at 0x18054 through PF1's BAR0.
    let mut tx = TxQueue::new(&card, 1, 5, SMALL_RING);
    tx.post(&frame(UNICAST, 0x0800, 60, 0));
    card.qdma(1).write(
        qdma::dmap_sel_h2c_dsc_pidx(onic_hal::QueueId::new(5)),
        RegValue::from_bits(1),
    );
    card.run_until_idle();
    assert_eq!(card.take_egress(1).len(), 1);
    // The same doorbell through PF0 targets abs 5, which has no context.
    card.qdma(0).write(
        qdma::dmap_sel_h2c_dsc_pidx(onic_hal::QueueId::new(5)),
        RegValue::from_bits(1),
    );
    assert!(matches!(
        card.take_violations().as_slice(),
        [Violation::Register { reason, .. }] if reason.contains("disabled")
    ));
    // Queue 8 is outside PF1's FMAP (qmax 8).
    card.qdma(1).write(
        qdma::dmap_sel_h2c_dsc_pidx(onic_hal::QueueId::new(8)),
        RegValue::from_bits(1),
    );
    assert!(matches!(
        card.take_violations().as_slice(),
        [Violation::Register { reason, .. }] if reason.contains("FMAP")
    ));
    tx.free();
}

/// The reference driver's geometry and values: 4096-entry TX ring (index 0), 1024-entry RX and
/// completion rings (index 8), 4 KiB buffers, C2H PIDX = 256 and CMPT CIDX = 0x1D000000 at open
/// (hardware.md §5.2, §5.6, §13.2). Only the 256 posted slots get pages.
#[test]
fn reference_driver_geometry() {
    let card = ready_card();
    let mut tx = TxQueue::new(&card, 0, 0, 0);
    assert_eq!(tx.size, 4096);
    // The context words are exactly the spec's (W1 = 0x0011000D for TX).
    assert_eq!(ctxt_read(&card, SEL_SW_H2C, 0)[1], 0x0011000D);
    let mut rx = RxQueue::with(
        &card,
        0,
        1,
        RxOpts {
            rngsz_idx: 8,
            initial_pidx: Some(256),
            pages: Some(256),
            ..RxOpts::default()
        },
    );
    assert_eq!(ctxt_read(&card, SEL_SW_C2H, 1)[1], 0x00108003);
    assert_eq!(ctxt_read(&card, SEL_PFCH, 1)[..2], [0x08000010, 0x00002000]);
    let cmpt = ctxt_read(&card, SEL_CMPT, 1);
    assert_eq!((cmpt[0], cmpt[3], cmpt[4]), (0x88000017, 0x10000000, 1 << 4));
    // The spec's doorbell value for the arming CIDX write.
    card.qdma(0).write(
        qdma::dmap_sel_cmpt_cidx(onic_hal::QueueId::new(1)),
        RegValue::from_bits(0x1D000000),
    );
    for k in 0..shell::INDIR_TABLE_ENTRIES {
        card.shell()
            .write(shell::indir_table(onic_hal::FunctionId::new(0).unwrap(), k), 1);
    }
    let f = frame(UNICAST, 0x0800, 1514, 9);
    tx.post(&f);
    tx.doorbell();
    card.inject(0, &f);
    card.run_until_idle();
    card.advance_time(1_000);
    assert_eq!(card.take_interrupts(), [Interrupt { func: 0, vector: 1 }]);
    assert_eq!(rx.cmpt_status(), (1, 0, true));
    assert_eq!(rx.poll(4096).unwrap().1, f);
    assert_eq!(tx.status(), (1, 1));
    // Status records sit in the last slots: byte 65520 of the TX ring, 8184 of the CMPT ring.
    assert_eq!(tx.ring.read_u64(65520) >> 16 & 0xFFFF, 1);
    assert_eq!(rx.cmpt.read_u64(8184) & 0xFFFF, 1);
    assert_eq!(card.violations(), []);
    tx.free();
    rx.free();
}

#[test]
fn an_emitted_frame_leaves_its_port_like_a_sent_one_but_only_while_the_link_is_up() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    let f = frame(UNICAST, 0x0800, 60, 7);
    card.emit(0, &f);
    card.emit(9, &f); // no such port: ignored
    assert_eq!(card.take_egress(0), vec![f.clone()]);
    assert_eq!(card.take_egress(1), Vec::<Vec<u8>>::new());
    // It bypasses the transmit path: the adapter counted nothing sent.
    assert_eq!(adapter_counter(&card, 0, adapter::TX_SENT_PKTS), 0);
    card.set_link(0, false);
    card.emit(0, &f);
    assert_eq!(card.take_egress(0), Vec::<Vec<u8>>::new());
    assert_eq!(card.stats().emitted, 2);
    assert_eq!(card.violations(), []);
}

#[test]
fn an_emitted_frame_crosses_the_cable_to_the_other_port() {
    let card = ready_card_with(|c| c.wire = Wire::Cable);
    let f = frame(UNICAST, 0x0800, 60, 3);
    card.emit(1, &f);
    assert_eq!(card.take_egress(1), vec![f]);
    card.run_until_idle();
    // Port 0's MAC received it; port 1's did not.
    assert_eq!(card.stats().emitted, 1);
    assert_eq!(card.cmac_counter(0, "stat_rx_total_pkts"), 1);
    assert_eq!(card.cmac_counter(1, "stat_rx_total_pkts"), 0);
}
