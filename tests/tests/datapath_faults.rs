//! Every datapath fault of issue #4 injected through the model: the expected counters, the queue
//! keeps (or, for a broken ring, stops) working, and no page is lost.

use onic_core::error::QueueError;
use onic_embed::port::{Host, TxClean, TxLock, XmitResult};
use onic_sim::Corruption;
use onic_tests::datapath::{drop_all, pass_all, Harness, Setup};

#[test]
fn page_allocation_failure_on_replacement_drops_the_frame_and_polling_continues() {
    // One page per slow-path call and every frame kept by the OS: the pool's cache stays empty, so
    // each replacement page comes from the HAL, where the model makes allocations fail.
    let setup = Setup::new().ring_size_idx(1).bulk(1).policy(pass_all);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    for i in 0..10 {
        h.inject(0, i, 200);
    }
    h.settle();
    card.faults().fail_next_page_allocs(4);
    let out = h.poll(0, 0, 64);
    assert_eq!(out.rx.done, 10);
    assert_eq!(out.rx.error, None);
    let s = *h.queue(0, 0).pair.rx.stats();
    assert_eq!((s.rx_no_page, s.rx_packets, s.to_os), (4, 6, 6));
    // No slot lost its page: the dropped frames' pages were reused in place, the pages that went
    // to the OS were replaced from the pool, and the refill of this poll even filled the one slot
    // left empty at start: every slot holds a page (63), and the spare the first delivered frame
    // needed stays for the next frame whose page leaves.
    let rx = &h.queue(0, 0).pair.rx;
    assert_eq!(rx.pages_in_ring(), 64);
    assert!(rx.has_spare());
    h.check_pages();
    // Polling goes on normally.
    for i in 0..30 {
        h.inject(0, i, 300);
    }
    h.drain();
    h.check_delivery();
    h.check_stats();
    assert_eq!(h.delivered.len(), 36);
    h.teardown();
}

#[test]
fn page_allocation_failure_at_fill_leaves_a_consistent_ring_refilled_later() {
    let setup = Setup::new().ring_size_idx(1).bulk(8);
    let card = setup.card();
    // The first slow-path call of the queue's pool fails outright: the ring starts empty.
    card.faults().fail_next_page_allocs(1);
    let mut h = Harness::new(&card, &setup);
    let rx = &h.queue(0, 0).pair.rx;
    assert_eq!(rx.posted(), 0);
    assert_eq!(rx.stats().refill_alloc_failures, 1);
    h.check_pages();
    // Frames arriving now find no descriptor: the model drops and counts them.
    h.inject(0, 1, 100);
    h.inject(0, 2, 100);
    h.settle();
    assert_eq!(card.stats().c2h_no_desc_dropped, 2);
    // The next poll refills the ring (it is below one refill batch) and traffic flows.
    let out = h.poll(0, 0, 64);
    assert_eq!(out.rx.done, 0);
    assert_eq!(h.queue(0, 0).pair.rx.posted(), 62);
    for i in 0..20 {
        h.inject(0, i, 100);
    }
    h.drain();
    h.check_delivery();
    assert_eq!(h.delivered.len(), 20);
    h.check_stats();
    h.teardown();
}

#[test]
fn completion_error_bit_and_bad_lengths_are_counted_drops() {
    let setup = Setup::new().ring_size_idx(2).policy(drop_all);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    let live = card.dma_stats().live_pages;
    for (how, n) in [
        (Corruption::ErrBit, 3),
        (Corruption::LengthZero, 2),
        (Corruption::LengthTooLarge, 4),
    ] {
        card.faults().corrupt_next_completions(n, how);
        for i in 0..n {
            h.inject(0, i as u16, 500);
        }
        h.settle();
        h.inject(0, 99, 80);
        h.drain();
    }
    let s = *h.queue(0, 0).pair.rx.stats();
    assert_eq!(s.rx_cmpt_errors, 3);
    assert_eq!(s.rx_bad_length, 6);
    assert_eq!(s.rx_packets, 3);
    // The good frame after each burst came through intact: the ring stayed in step.
    assert_eq!(h.delivered.len(), 3);
    h.check_delivery();
    h.check_stats();
    // Dropped frames cost no page.
    assert_eq!(card.dma_stats().live_pages, live);
    h.teardown();
}

#[test]
fn status_pidx_beyond_the_ring_stops_the_queue_without_losing_pages() {
    let setup = Setup::new().queues(2).ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    for i in 0..40 {
        h.inject(0, i, 100);
    }
    h.settle();
    for q in 0..2 {
        h.poll(0, q, 64);
    }
    let before = h.delivered.len();
    card.faults().cmpt_status_pidx_jump();
    for i in 0..40 {
        h.inject(0, i, 100);
    }
    h.settle();
    let outs: Vec<_> = (0..2).map(|q| h.poll(0, q, 64)).collect();
    let broken: Vec<_> = outs.iter().filter_map(|o| o.rx.error).collect();
    assert_eq!(broken.len(), 1, "{outs:?}");
    assert!(matches!(
        broken[0],
        QueueError::CmptPidxOutOfRange { pidx: 70, usable: 63 }
    ));
    // The broken queue reports the same error on every poll and does nothing else; the other one
    // keeps going.
    let q_bad = outs.iter().position(|o| o.rx.error.is_some()).unwrap();
    let again = h.poll(0, q_bad, 64);
    assert_eq!(again.rx.error, Some(broken[0]));
    assert_eq!(again.rx.done, 0);
    assert!(h.delivered.len() >= before);
    // The census still holds: the broken ring keeps its pages until teardown returns them.
    h.check_census();
    h.teardown();
}

#[test]
fn tx_ring_full_is_a_typed_error_and_leaks_nothing() {
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    let frames: Vec<_> = (0..70u16).map(|i| h.frame(i, 64)).collect();
    let queued = h.transmit(0, 0, &frames);
    assert_eq!(queued.len(), 62);
    assert_eq!(h.os_tx_refused, 8);
    assert_eq!(h.queue(0, 0).stack.stats().tx_busy, 8);
    // Refused frames were handed back and freed: only the 62 queued buffers are alive.
    assert_eq!(h.os_tx_live(), 62);
    h.check_pages();
    h.drain();
    assert_eq!(h.os_tx_live(), 0);
    h.teardown();
}

#[test]
fn stalled_tx_writeback_holds_buffers_until_it_catches_up() {
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    card.faults().stall_h2c_writeback(true);
    let frames: Vec<_> = (0..20u16).map(|i| h.frame(i, 64)).collect();
    h.transmit(0, 0, &frames);
    h.settle();
    h.reclaim(0, 0);
    assert_eq!(card.take_egress(0).len(), 20);
    // Sent, but the device has not said so: the driver keeps every buffer.
    assert_eq!(h.queue(0, 0).stack.in_flight(), 20);
    assert_eq!(h.os_tx_live(), 20);
    card.faults().stall_h2c_writeback(false);
    h.settle();
    h.reclaim(0, 0);
    assert_eq!(h.queue(0, 0).stack.in_flight(), 0);
    assert_eq!(h.os_tx_live(), 0);
    h.check_pages();
    h.teardown();
}

#[test]
fn xdp_tx_on_a_full_ring_recycles_the_page() {
    // Every frame is sent back out (XDP_TX) on a ring the device is not draining (stalled
    // writeback): once the TX ring is full, the pages are recycled and counted, not leaked
    // (hardware.md §15 item 13).
    fn tx_all(_: u64) -> onic_tests::datapath::Action {
        onic_tests::datapath::Action::Tx
    }
    let setup = Setup::new().ring_size_idx(1).policy(tx_all);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    card.faults().stall_h2c_writeback(true);
    for i in 0..50 {
        h.inject(0, i, 100);
    }
    h.settle();
    h.poll(0, 0, 64);
    for i in 0..50 {
        h.inject(0, i, 100);
    }
    h.settle();
    h.poll(0, 0, 64);
    let p = h.queue(0, 0).pair;
    assert_eq!(p.stats().rx_xdp_tx, 100);
    assert_eq!(p.stats().rx_xdp_tx_errors, 100 - 62);
    assert_eq!(p.tx.pool_pages_in_flight(), 62);
    h.check_pages();
    card.faults().stall_h2c_writeback(false);
    h.drain();
    h.check_delivery();
    assert_eq!(card.take_egress(0).len(), 62);
    h.teardown();
}

#[test]
fn refused_frames_come_back_to_the_stack() {
    // The core's `TxError::Full` with the frame in it is the port's `Busy`: the packet is still
    // the stack's (tx_length.rs checks the core's error values on a bare TX queue).
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    let frames: Vec<_> = (0..63u16).map(|i| h.frame(i, 64)).collect();
    let queued = h.transmit(0, 0, &frames[..62]);
    assert_eq!(queued.len(), 62);
    let host = h.host(0).clone();
    let skb = host.packet(&frames[62].1).unwrap();
    let mut clean = TxClean::default();
    let r = h.port(0).queue::<TxLock, _>(0, |p, t| p.xmit(t, skb, &mut clean));
    assert_eq!(r, XmitResult::Busy);
    assert_eq!(h.os_tx_live(), 63, "the refused packet is still the stack's");
    host.skb_done(skb, None);
    assert_eq!(h.os_tx_live(), 62);
    h.drain();
    h.teardown();
}
