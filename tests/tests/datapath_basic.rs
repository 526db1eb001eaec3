//! The datapath end to end through the model: both ports, several queues, every sink action,
//! statistics of the driver against the model's and the CMAC's.

use onic_sim::Wire;
use onic_tests::datapath::{drop_all, mixed, Harness, Setup};

#[test]
fn receive_on_both_ports_over_four_queues() {
    let setup = Setup::new().functions(2).queues(4).ring_size_idx(2);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    for i in 0..300u16 {
        h.inject((i % 2) as u8, i, 60 + usize::from(i) * 5);
        if i % 50 == 49 {
            h.drain();
        }
    }
    h.drain();
    h.check_delivery();
    assert_eq!(h.delivered.len(), 300 - 9); // 9 frames exceed the 1514-byte shell limit
                                            // RSS spread the flows over every queue of both functions.
    for v in h.queues() {
        assert!(v.pair.rx.stats().rx_packets > 20, "{:?}", v.pair.rx.stats());
    }
    h.check_stats();
    h.teardown();
}

#[test]
fn every_sink_action_keeps_the_census() {
    let setup = Setup::new().functions(2).queues(2).ring_size_idx(1).policy(mixed);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    for round in 0..6u16 {
        for i in 0..40u16 {
            h.inject((i % 2) as u8, round * 40 + i, 60 + usize::from(i) * 30);
        }
        h.settle();
        for f in 0..2 {
            for q in 0..2 {
                h.poll(f, q, 16);
                h.check_pages();
            }
        }
        h.return_os_pages(10);
        h.check_pages();
    }
    h.drain();
    h.check_delivery();
    // Everything sent back out went out (open wire: it shows up as egress only).
    let egress = card.take_egress(0).len() + card.take_egress(1).len();
    let sent_back = h.sent_back.len() as u64;
    let qs = h.queues();
    let xdp_errors: u64 = qs.iter().map(|v| v.pair.stats().rx_xdp_tx_errors).sum();
    assert_eq!(egress as u64 + xdp_errors, sent_back);
    assert!(qs.iter().any(|v| v.pair.stats().rx_xdp_redirect > 0));
    // XDP_TX on the queues' own rings, redirects on the redirect-in rings.
    assert!(qs.iter().any(|v| v.pair.tx.stats().tx_packets > 0));
    assert!(qs.iter().any(|v| v.xmit.stats().tx_packets > 0));
    drop(qs);
    h.check_stats();
    h.teardown();
}

#[test]
fn cable_carries_os_frames_from_pf0_to_pf1() {
    let setup = Setup::new()
        .functions(2)
        .queues(2)
        .ring_size_idx(1)
        .wire(Wire::Cable);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    let frames: Vec<_> = (0..40u16).map(|i| h.frame(i, 60 + usize::from(i) * 20)).collect();
    let queued = h.transmit(0, 1, &frames);
    assert_eq!(queued.len(), 40);
    // The queued frames arrive at port 1 and reach function 1's queues.
    h.injected[1].extend(queued.iter().copied());
    h.drain();
    h.check_delivery();
    let mut got = h.delivered.clone();
    got.sort_unstable();
    assert_eq!(got, queued);
    h.check_stats();
    h.teardown();
}

#[test]
fn os_transmit_batches_back_pressure_and_wake() {
    let setup = Setup::new().queues(1).ring_size_idx(1).policy(drop_all);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    // 100 frames in one batch on a 63-entry ring: 62 fit, the rest are refused.
    let frames: Vec<_> = (0..100u16).map(|i| h.frame(i, 100)).collect();
    let queued = h.transmit(0, 0, &frames);
    assert_eq!(queued.len(), 62);
    assert_eq!(h.os_tx_refused, 38);
    let tx = h.queue(0, 0).stack;
    assert!(tx.is_stopped());
    assert_eq!(tx.stats().doorbells, 1);
    h.check_pages();
    h.drain();
    let tx = h.queue(0, 0).stack;
    assert!(!tx.is_stopped());
    assert_eq!(tx.stats().wakes, 1);
    assert_eq!(card.take_egress(0).len(), 62);
    h.check_stats();
    h.teardown();
}
