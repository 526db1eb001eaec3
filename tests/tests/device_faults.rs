//! A device that gets stuck or lies, in each of the ways the model can be told to: the queue
//! notices after a bounded number of polls, enters a typed error state (counted), stops asking to
//! be polled, and a restart brings it back with every page and buffer accounted for. The page
//! census is checked at every step and after teardown.

use onic_core::error::QueueError;
use onic_core::queue::rx::{PollOutcome, RX_STALL_POLLS_DEFAULT};
use onic_embed::port::{Host, PortError, TxClean, TxLock, XmitResult};
use onic_testkit::device::{status_word, DeviceMemory, DeviceRing};
use onic_tests::datapath::{Harness, Setup};

/// Polls pair 0 of function 0 until its RX queue reports an error; checks that every poll before
/// asked to be polled again and consumed nothing, and that the error comes exactly at the limit.
fn poll_until_error(h: &mut Harness<'_>) -> QueueError {
    for i in 1..=u32::from(RX_STALL_POLLS_DEFAULT) {
        let out = h.poll(0, 0, 64).rx;
        assert_eq!(out.done, 0, "poll {i}: {out:?}");
        if i < u32::from(RX_STALL_POLLS_DEFAULT) {
            assert!(out.more && out.error.is_none(), "poll {i}: {out:?}");
        } else {
            let e = out.error.expect("no error at the stall limit");
            assert_eq!(
                out,
                PollOutcome {
                    error: Some(e),
                    ..PollOutcome::default()
                },
                "an error state must not ask to be polled"
            );
            return e;
        }
        h.check_census();
    }
    unreachable!()
}

/// The queue stays in its error state, reports it on every poll, touches nothing.
fn stays_stopped(h: &mut Harness<'_>, e: QueueError) {
    let doorbells = *h.queue(0, 0).pair.rx.stats();
    for _ in 0..3 {
        let out = h.poll(0, 0, 64).rx;
        assert_eq!(
            (out.error, out.more, out.armed, out.done),
            (Some(e), false, false, 0)
        );
    }
    let p = h.queue(0, 0).pair;
    let after = p.rx.stats();
    assert_eq!(after.cmpt_doorbells, doorbells.cmpt_doorbells);
    assert_eq!(after.c2h_doorbells, doorbells.c2h_doorbells);
    assert_eq!(after.queue_errors, 1);
    assert_eq!(p.error(), Some(e));
    h.check_census();
}

/// Restarts pair 0 and checks that traffic flows again and every frame is accounted for.
fn restart_and_flow(h: &mut Harness<'_>, sizes: &[usize]) {
    h.restart(0, 0).expect("restart");
    let rx = &h.queue(0, 0).pair.rx;
    assert_eq!(rx.error(), None);
    assert_eq!(rx.stats().restarts, 1);
    assert_eq!(rx.posted(), 62, "the ring is full again");
    h.check_pages();
    let before = h.delivered.len();
    // In batches small enough that the device never runs out of descriptors.
    for (i, &len) in sizes.iter().cycle().take(40).enumerate() {
        h.inject(0, i as u16, len);
        if i % 4 == 3 {
            h.drain();
        }
    }
    h.drain();
    assert_eq!(h.delivered.len() - before, 40 - multi(h, sizes));
    h.check_delivery();
    h.check_pages();
}

/// Completion colors stop flipping; 40 frames are received, then 40 more: 23 fill the first
/// lap, 17 come after the wrap with the first lap's color (the ring of `ring_size_idx(1)`).
fn wrap_with_frozen_color(h: &mut Harness<'_>) {
    h.card.faults().freeze_cmpt_color(true);
    for i in 0..40 {
        h.inject(0, i, 100);
    }
    h.drain();
    for i in 0..40 {
        h.inject(0, i, 100);
    }
    h.settle();
}

/// Frames of `sizes` (cycled over 40) that span several buffers of the setup.
fn multi(h: &Harness<'_>, sizes: &[usize]) -> usize {
    let buf = onic_core::BufSizeIdx::new(h.setup.buf_idx).unwrap().bytes() as usize;
    sizes.iter().cycle().take(40).filter(|&&l| l > buf).count()
}

#[test]
fn a_completion_color_that_never_flips_is_detected_and_recovered() {
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    wrap_with_frozen_color(&mut h);
    let out = h.poll(0, 0, 64).rx;
    assert_eq!(out.done, 23);
    assert!(out.more && out.error.is_none());
    let e = poll_until_error(&mut h);
    assert_eq!(
        e,
        QueueError::CmptNotVisible {
            cidx: 0,
            pidx: 17,
            polls: RX_STALL_POLLS_DEFAULT
        }
    );
    stays_stopped(&mut h, e);
    card.faults().freeze_cmpt_color(false);
    let stats = *h.queue(0, 0).pair.rx.stats();
    assert_eq!(stats.stall_polls, u64::from(RX_STALL_POLLS_DEFAULT));
    restart_and_flow(&mut h, &[100, 700]);
    // The 17 frames left in the completion ring were lost with the restart, and counted.
    assert_eq!(h.queue(0, 0).pair.rx.stats().rx_abandoned, 17);
    h.teardown();
}

#[test]
fn a_status_record_that_never_moves_is_detected_and_recovered() {
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    for i in 0..10 {
        h.inject(0, i, 200);
    }
    h.drain();
    card.faults().freeze_cmpt_status(true);
    for i in 0..5 {
        h.inject(0, i, 200);
    }
    h.settle();
    // The status record still says 10: the poll catches up with it, arms, and finds the new
    // entry at its consumer index that nobody reported.
    let e = poll_until_error(&mut h);
    assert_eq!(
        e,
        QueueError::CmptUnreported {
            cidx: 10,
            polls: RX_STALL_POLLS_DEFAULT
        }
    );
    stays_stopped(&mut h, e);
    card.faults().freeze_cmpt_status(false);
    restart_and_flow(&mut h, &[60, 1514]);
    assert_eq!(h.queue(0, 0).pair.rx.stats().rx_abandoned, 5);
    h.teardown();
}

/// A shell that passes frames up to 9000 bytes into 1024-byte buffers (a jumbo build).
fn jumbo() -> Setup {
    Setup::new().ring_size_idx(1).buf_idx(3).max_frame_len(9000)
}

#[test]
fn a_completion_claiming_more_buffers_than_the_frame_used_is_detected_and_recovered() {
    // The case of the issue: a 1000-byte frame took one descriptor, its completion says 1500
    // bytes (two buffers, below the largest frame). The driver consumes two descriptors; the
    // device one. With the ring full again the device then has no descriptor at all while the
    // driver believes 62 are posted.
    let setup = jumbo();
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    for i in 0..5 {
        h.inject(0, i, 3000);
    }
    h.drain();
    assert_eq!(h.queue(0, 0).pair.rx.stats().rx_multi_buffer, 5);
    card.faults().override_completion_lengths(&[1500]);
    h.inject(0, 1, 1000);
    h.settle();
    let out = h.poll(0, 0, 64).rx;
    assert_eq!(out.done, 1);
    assert!(out.more, "the device's consumer index disagrees: poll again");
    assert_eq!(h.queue(0, 0).pair.rx.stats().rx_multi_buffer, 6);
    // Every frame from now on is dropped by the device for lack of descriptors.
    let no_desc = card.stats().c2h_no_desc_dropped;
    for i in 0..10 {
        h.inject(0, i, 100);
    }
    h.settle();
    assert_eq!(card.stats().c2h_no_desc_dropped, no_desc + 10);
    assert_eq!(h.queue(0, 0).pair.rx.posted(), 62);
    let e = poll_until_error(&mut h);
    assert_eq!(
        e,
        QueueError::C2hOutOfStep {
            device: 16,
            driver: 17,
            polls: RX_STALL_POLLS_DEFAULT
        }
    );
    stays_stopped(&mut h, e);
    restart_and_flow(&mut h, &[100, 1000, 2500, 9000]);
    h.teardown();
}

#[test]
fn a_completion_claiming_fewer_buffers_than_the_frame_used_is_detected_and_recovered() {
    // A 2500-byte frame took three descriptors, its completion says 1000 bytes (one buffer).
    let setup = jumbo();
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    card.faults().override_completion_lengths(&[1000]);
    h.inject(0, 1, 2500);
    h.settle();
    let out = h.poll(0, 0, 64).rx;
    assert_eq!((out.done, out.more), (1, true));
    let e = poll_until_error(&mut h);
    assert_eq!(
        e,
        QueueError::C2hOutOfStep {
            device: 3,
            driver: 1,
            polls: RX_STALL_POLLS_DEFAULT
        }
    );
    stays_stopped(&mut h, e);
    restart_and_flow(&mut h, &[1500, 64]);
    h.teardown();
}

#[test]
fn the_check_of_the_c2h_status_record_can_be_switched_off() {
    // A device that does not write the C2H status record: the record stays at 0 while the
    // driver's index moves. With the check off the queue idles normally.
    let setup = Setup::new().ring_size_idx(1).c2h_status_check(false);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    for i in 0..5 {
        h.inject(0, i, 100);
    }
    h.drain();
    let desc = DeviceRing::c2h(h.queue(0, 0).pair.rx.desc_ring_dma_addr(), 63);
    card.write_word(desc.status(), 0).unwrap();
    let out = h.poll(0, 0, 64).rx;
    assert_eq!((out.armed, out.more, out.error), (true, false, None));
    h.teardown();
}

#[test]
fn a_stalled_tx_writeback_on_a_stopped_queue_is_detected_and_recovered() {
    let setup = Setup::new().ring_size_idx(1).stack_stall_reclaims(500);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    card.faults().stall_h2c_writeback(true);
    let frames: Vec<_> = (0..62u16).map(|i| h.frame(i, 64)).collect();
    assert_eq!(h.transmit(0, 0, &frames).len(), 62);
    assert!(h.queue(0, 0).stack.is_stopped());
    h.settle();
    // The OS waits for room; the queue's polls reclaim and find nothing.
    let mut polls = 0;
    while h.queue(0, 0).stack.error().is_none() {
        h.poll(0, 0, 64);
        polls += 1;
        h.check_census();
        assert!(polls <= 500, "no error after 500 reclaims");
    }
    assert_eq!(polls, 500);
    let e = h.queue(0, 0).stack.error().unwrap();
    assert_eq!(
        e,
        QueueError::H2cStalled {
            cidx: 0,
            in_flight: 62,
            reclaims: 500
        }
    );
    // A queue in its error state takes no frame and leaves it with the stack (the core's
    // `TxError::Queue`, which the port reports as a drop).
    let host = h.host(0).clone();
    let skb = host.packet(&frames[0].1).unwrap();
    let mut clean = TxClean::default();
    let r = h.port(0).queue::<TxLock, _>(0, |p, t| p.xmit(t, skb, &mut clean));
    assert_eq!(r, XmitResult::Dropped);
    assert!(clean.error, "the reclaim reports the error state");
    assert_eq!(h.queue(0, 0).stack.error(), Some(e));
    assert_eq!(h.os_tx_live(), 63);
    host.skb_done(skb, None);
    assert_eq!(h.os_tx_live(), 62);
    h.restart(0, 0).expect("restart");
    let tx = h.queue(0, 0).stack;
    assert_eq!((tx.error(), tx.in_flight(), tx.is_stopped()), (None, 0, false));
    assert_eq!((tx.stats().tx_aborted, tx.stats().queue_errors), (62, 1));
    // Every OS buffer came back to the OS.
    assert_eq!(h.os_tx_live(), 0);
    h.check_pages();
    card.faults().stall_h2c_writeback(false);
    let frames: Vec<_> = (0..20u16).map(|i| h.frame(i, 64)).collect();
    assert_eq!(h.transmit(0, 0, &frames).len(), 20);
    h.drain();
    assert_eq!(h.queue(0, 0).stack.stats().tx_packets, 20);
    assert_eq!(h.os_tx_live(), 0);
    h.teardown();
}

#[test]
fn a_tx_queue_that_is_not_stopped_does_not_count_a_stall() {
    // Buffers in flight on a queue with room: the OS is not waiting, nothing spins. No error,
    // however often the queue is reclaimed.
    let setup = Setup::new().ring_size_idx(1).stack_stall_reclaims(10);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    card.faults().stall_h2c_writeback(true);
    let frames: Vec<_> = (0..20u16).map(|i| h.frame(i, 64)).collect();
    h.transmit(0, 0, &frames);
    h.settle();
    for _ in 0..50 {
        h.poll(0, 0, 64);
    }
    let tx = h.queue(0, 0).stack;
    assert_eq!(tx.error(), None);
    assert_eq!(tx.stats().stall_reclaims, 0);
    card.faults().stall_h2c_writeback(false);
    h.drain();
    h.teardown();
}

#[test]
fn an_arbitrary_tx_writeback_index_stops_the_queue_and_a_restart_recovers() {
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    card.faults().stall_h2c_writeback(true);
    let frames: Vec<_> = (0..10u16).map(|i| h.frame(i, 64)).collect();
    h.transmit(0, 0, &frames);
    h.settle();
    // The device writes a consumer index beyond what was posted.
    let ring = DeviceRing::h2c(h.queue(0, 0).stack.ring_dma_addr(), 63);
    card.write_word(ring.status(), status_word(0, 40, false)).unwrap();
    assert!(h.reclaim(0, 0).error);
    let e = h.queue(0, 0).stack.error();
    assert_eq!(
        e,
        Some(QueueError::H2cCidx {
            cidx: 40,
            clean: 0,
            published: 10
        })
    );
    h.check_census();
    card.faults().stall_h2c_writeback(false);
    h.restart(0, 0).expect("restart");
    assert_eq!(h.os_tx_live(), 0);
    assert_eq!(h.queue(0, 0).stack.stats().tx_aborted, 10);
    let frames: Vec<_> = (0..5u16).map(|i| h.frame(i, 100)).collect();
    h.transmit(0, 0, &frames);
    h.drain();
    assert_eq!(h.queue(0, 0).stack.stats().tx_packets, 5);
    h.teardown();
}

#[test]
fn a_status_pidx_beyond_the_ring_is_recovered_by_a_restart() {
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    card.faults().cmpt_status_pidx_jump();
    for i in 0..3 {
        h.inject(0, i, 100);
    }
    h.settle();
    let out = h.poll(0, 0, 64).rx;
    assert_eq!(
        out.error,
        Some(QueueError::CmptPidxOutOfRange { pidx: 70, usable: 63 })
    );
    assert!(!out.more && !out.armed);
    h.check_census();
    restart_and_flow(&mut h, &[64, 1514]);
    // The status record was out of range, so only the entries that carried the expected color
    // could be counted: the three frames.
    assert_eq!(h.queue(0, 0).pair.rx.stats().rx_abandoned, 3);
    h.teardown();
}

#[test]
fn a_restart_of_a_healthy_busy_pair_loses_no_page() {
    // Pages everywhere at once: in the ring, with the OS, in TX flight (XDP_TX on a stalled
    // writeback), in the pool. A restart returns what the queues hold and the census holds.
    fn mixed_tx(id: u64) -> onic_tests::datapath::Action {
        if id.is_multiple_of(2) {
            onic_tests::datapath::Action::Tx
        } else {
            onic_tests::datapath::Action::Pass
        }
    }
    let setup = Setup::new().ring_size_idx(1).policy(mixed_tx);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    card.faults().stall_h2c_writeback(true);
    for i in 0..30 {
        h.inject(0, i, 300);
    }
    h.settle();
    h.poll(0, 0, 64);
    assert!(h.queue(0, 0).pair.tx.pool_pages_in_flight() > 0);
    assert!(h.os_held() > 0);
    for i in 0..7 {
        h.inject(0, i, 300);
    }
    h.settle();
    h.check_census();
    h.restart(0, 0).expect("restart");
    h.check_pages();
    let p = h.queue(0, 0).pair;
    assert_eq!(p.tx.pool_pages_in_flight(), 0);
    assert_eq!(p.rx.stats().rx_abandoned, 7);
    card.faults().stall_h2c_writeback(false);
    h.return_os_pages(usize::MAX);
    h.check_pages();
    h.teardown();
}

#[test]
fn a_tx_writeback_index_past_what_was_published_is_a_lie() {
    // Packets queued within a batch (xmit-more) and not yet published: the device cannot have
    // consumed them, so a writeback naming them is refused rather than freeing buffers the
    // device would read later.
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    let frames: Vec<_> = (0..4u16).map(|i| h.frame(i, 64)).collect();
    assert_eq!(h.transmit_unflushed(0, 0, &frames).len(), 4);
    assert_eq!(h.os_tx_live(), 4);
    assert!(h.queue(0, 0).stack.has_unpublished());
    let ring = DeviceRing::h2c(h.queue(0, 0).stack.ring_dma_addr(), 63);
    card.write_word(ring.status(), status_word(0, 2, false)).unwrap();
    h.reclaim(0, 0);
    assert_eq!(
        h.queue(0, 0).stack.error(),
        Some(QueueError::H2cCidx {
            cidx: 2,
            clean: 0,
            published: 0
        })
    );
    assert_eq!(h.os_tx_live(), 4, "no buffer was handed back on the lie");
    h.restart(0, 0).expect("restart");
    assert_eq!(h.os_tx_live(), 0);
    h.settle();
    // Nothing the device was never told about was ever read.
    assert_eq!(card.take_egress(0).len(), 0);
    h.teardown();
}

#[test]
fn a_context_engine_that_stays_busy_fails_the_restart_and_keeps_every_page() {
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    wrap_with_frozen_color(&mut h);
    h.poll(0, 0, 64);
    let e = poll_until_error(&mut h);
    assert!(matches!(e, QueueError::CmptNotVisible { .. }), "{e:?}");
    card.faults().freeze_cmpt_color(false);
    // The context engine wedges: the restart can neither invalidate nor program a context.
    card.faults().hold_context_commands(true);
    let posted = h.queue(0, 0).pair.rx.posted();
    let err = h.restart(0, 0).expect_err("a restart on a wedged context engine");
    assert!(
        matches!(err, PortError::Core(onic_core::Error::ContextBusy { .. })),
        "{err:?}"
    );
    let v = h.queue(0, 0);
    for ring in [
        v.pair.rx.error(),
        v.pair.tx.error(),
        v.stack.error(),
        v.xmit.error(),
    ] {
        assert_eq!(ring, Some(QueueError::Restart));
    }
    // The device may still use the ring: every posted page stays in its slot, none is freed.
    assert_eq!(v.pair.rx.posted(), posted);
    h.check_census();
    stays_stopped_after_restart(&mut h);
    // A port whose queues run refuses to invalidate every context (that is for a port that
    // is down, below).
    let busy = h.port(0).control(|p, c| p.invalidate_all_queues(c));
    assert_eq!(busy, Err(PortError::Busy));
    // The engine recovers: the next restart brings the queue back.
    card.faults().hold_context_commands(false);
    h.restart(0, 0).expect("restart once the engine answers");
    assert_eq!(h.queue(0, 0).pair.rx.error(), None);
    assert_eq!(h.queue(0, 0).pair.rx.posted(), 62);
    h.check_pages();
    for i in 0..8 {
        h.inject(0, i, 300);
    }
    h.drain();
    h.check_delivery();
    h.check_pages();
    // What a driver checks before it lets a card it cut off reach memory again: no stale
    // context may remain. Not while the engine is wedged; once it answers, every one is gone.
    h.port(0).stop().expect("queues stopped");
    card.faults().hold_context_commands(true);
    assert!(h.port(0).control(|p, c| p.invalidate_all_queues(c)).is_err());
    card.faults().hold_context_commands(false);
    h.port(0)
        .control(|p, c| p.invalidate_all_queues(c))
        .expect("every context invalidated");
    assert_eq!(card.violations(), []);
    h.port(0).open().expect("queues started again");
    h.check_pages();
    h.teardown();
}

/// A queue whose restart failed asks for nothing and touches nothing.
fn stays_stopped_after_restart(h: &mut Harness<'_>) {
    let before = *h.queue(0, 0).pair.rx.stats();
    for _ in 0..3 {
        let out = h.poll(0, 0, 64).rx;
        assert_eq!(
            (out.error, out.more, out.armed, out.done),
            (Some(QueueError::Restart), false, false, 0)
        );
    }
    let after = h.queue(0, 0).pair.rx.stats();
    assert_eq!(after.cmpt_doorbells, before.cmpt_doorbells);
    assert_eq!(after.c2h_doorbells, before.c2h_doorbells);
    h.check_census();
}
