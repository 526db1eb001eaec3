//! XDP end to end through the model: every verdict, redirect targets, buffer adjustments, RX hash
//! metadata, `xdp_xmit`, and program swaps under traffic, with the page census checked after
//! every step and every page accounted for at teardown.

use std::cell::Cell;
use std::rc::Rc;

use onic_core::device::rss_control::IndirectionTable;
use onic_core::xdp::{swap_macs, RawXdpProgram, XdpAction, XdpBuff, XdpSlot};
use onic_sim::Wire;
use onic_tests::datapath::{frame_id, targets, Harness, Prog, Setup};

fn pass(_: &mut XdpBuff<'_>) -> XdpAction {
    XdpAction::Pass
}

fn drop_all(_: &mut XdpBuff<'_>) -> XdpAction {
    XdpAction::Drop
}

fn swap_macs_and_tx(x: &mut XdpBuff<'_>) -> XdpAction {
    swap_macs(x.data_mut());
    XdpAction::Tx
}

/// A raw program returning a fixed raw value (as a BPF program could).
struct Raw(u32);

impl RawXdpProgram for Raw {
    fn run_raw(&mut self, _: &mut XdpBuff<'_>) -> u32 {
        self.0
    }
}

/// Sum of a pair counter over every queue.
fn total(h: &mut Harness<'_>, f: impl Fn(&onic_core::PairStats) -> u64) -> u64 {
    h.queues().iter().map(|v| f(v.pair.stats())).sum()
}

fn inject_burst(h: &mut Harness<'_>, port: u8, n: u16, len: usize) -> Vec<u64> {
    (0..n)
        .map(|i| h.inject(port, i, len + usize::from(i) * 7))
        .collect()
}

#[test]
fn pass_drop_aborted_and_unknown_verdicts_keep_every_page() {
    let setup = Setup::new().queues(2).ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    let progs = [
        h.attach(pass),
        h.attach(drop_all),
        h.attach(Raw(0)),
        h.attach(Raw(99)),
    ];
    for prog in progs {
        inject_burst(&mut h, 0, 40, 60);
        h.drain_xdp(prog);
        h.check_pages();
        h.return_os_pages(usize::MAX);
        h.check_pages();
    }
    assert_eq!(total(&mut h, |s| s.rx_xdp_pass), 40);
    assert_eq!(total(&mut h, |s| s.rx_xdp_drop), 120);
    assert_eq!(total(&mut h, |s| s.rx_xdp_aborted), 40);
    // The unknown value is handled like ABORTED but counted as an exception of its own.
    assert_eq!(total(&mut h, |s| s.rx_xdp_invalid), 40);
    h.check_delivery();
    h.check_stats();
    h.teardown();
}

#[test]
fn no_program_passes_frames_untouched_with_no_xdp_counts() {
    let setup = Setup::new().queues(2).ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    inject_burst(&mut h, 0, 30, 100);
    for _ in 0..4 {
        h.settle();
        for q in 0..2 {
            h.poll_with(0, q, 64, None);
            h.check_pages();
        }
    }
    assert_eq!(h.os_held(), 30);
    let mut first = None;
    h.with_os_frames(0, |r| {
        first.get_or_insert((r.at.offset, frame_id(&onic_hal::DmaPage::bytes(&r.page)[256..])));
    });
    assert_eq!(first, Some((256, h.delivered[0])));
    for v in h.queues() {
        assert_eq!(*v.pair.stats(), onic_core::PairStats::default());
    }
    // No metadata; the hash the stack gets is the shell's, computed by the driver (L4).
    let last = h.last_pass.unwrap();
    assert_eq!((last.at.meta, last.hash.map(|x| x.kind)), (0, Some(3)));
    h.check_delivery();
    h.teardown();
}

#[test]
fn xdp_tx_sends_the_same_page_back_with_one_doorbell_per_poll() {
    let setup = Setup::new().ring_size_idx(2);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    let ids = inject_burst(&mut h, 0, 30, 80);
    h.settle();
    let doorbells = h.queue(0, 0).pair.tx.stats().doorbells;
    let swap = h.attach(swap_macs_and_tx);
    let out = h.poll_with(0, 0, 64, Some(swap));
    assert_eq!(out.rx.done, 30);
    let p = h.queue(0, 0).pair;
    assert_eq!(p.stats().rx_xdp_tx, 30);
    assert_eq!(
        p.tx.stats().doorbells,
        doorbells + 1,
        "one H2C doorbell for the poll"
    );
    // The pages are on the TX ring, not copied: 30 pool pages in flight.
    assert_eq!(p.tx.pool_pages_in_flight(), 30);
    h.check_pages();
    h.drain_xdp(swap);
    let out = card.take_egress(0);
    assert_eq!(out.len(), 30);
    for (f, id) in out.iter().zip(&ids) {
        assert_eq!(frame_id(f), *id);
        assert_eq!(f[..6], [0x00, 0x0A, 0x35, 0x01, 0x02, 0x03], "MACs swapped");
        assert_eq!(f[6..12], [0x00, 0x0A, 0x35, 0xAA, 0xBB, 0xCC]);
    }
    assert_eq!(h.queue(0, 0).pair.tx.pool_pages_in_flight(), 0);
    h.check_stats();
    h.teardown();
}

#[test]
fn xdp_tx_on_a_tiny_ring_with_delayed_reclaim_loses_no_page() {
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    // The device sends but does not report completions: nothing is reclaimed for a while.
    card.faults().stall_h2c_writeback(true);
    let swap = h.attach(swap_macs_and_tx);
    for _ in 0..2 {
        inject_burst(&mut h, 0, 50, 100);
        h.settle();
        h.poll_with(0, 0, 64, Some(swap));
        h.check_pages();
    }
    let p = h.queue(0, 0).pair;
    assert_eq!(p.stats().rx_xdp_tx, 100);
    // A 63-entry ring holds 62 frames; the other 38 are counted and their pages recycled.
    assert_eq!(p.stats().rx_xdp_tx_errors, 38);
    assert_eq!(p.stats().rx_xdp_drop, 38);
    assert_eq!(p.tx.pool_pages_in_flight(), 62);
    assert_eq!(h.holdings().in_tx_flight, 62);
    h.check_census();
    card.faults().stall_h2c_writeback(false);
    h.drain_xdp(swap);
    h.check_delivery();
    assert_eq!(card.take_egress(0).len(), 62);
    let held = h.holdings();
    assert_eq!(held.in_tx_flight, 0);
    // Sent and reclaimed, each page waits in its TX slot for the RX ring.
    assert_eq!(held.tx_parked, 62);
    h.teardown();
}

/// Redirects by frame id: to the other port, the next queue, or the user sink.
fn spread(x: &mut XdpBuff<'_>) -> XdpAction {
    match frame_id(x.data()) % 3 {
        0 => x.redirect(targets::OTHER_PORT),
        1 => x.redirect(targets::NEXT_QUEUE),
        _ => x.redirect(targets::USER_SINK),
    }
}

#[test]
fn redirect_to_the_other_port_the_next_queue_and_a_user_sink() {
    let setup = Setup::new().functions(2).queues(2).ring_size_idx(2);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    h.user_sink.cap = usize::MAX;
    let ids = inject_burst(&mut h, 0, 90, 64);
    let prog = h.attach(spread);
    h.drain_xdp(prog);
    h.check_delivery();
    let want = |r: u64| ids.iter().filter(|&&id| id % 3 == r).count();
    let port1 = card.take_egress(1);
    let port0 = card.take_egress(0);
    assert_eq!(port1.len(), want(0), "redirected out of the other port");
    assert_eq!(port0.len(), want(1), "redirected to the next queue of port 0");
    assert_eq!(h.user_sink.frames.len(), want(2), "copied by the user sink");
    assert!(port1.iter().all(|f| frame_id(f).is_multiple_of(3)));
    assert!(h.user_sink.frames.iter().all(|f| frame_id(f) % 3 == 2));
    assert_eq!(total(&mut h, |s| s.rx_xdp_redirect), 90);
    assert_eq!(total(&mut h, |s| s.rx_xdp_redirect_errors), 0);
    // The user sink was flushed at the end of the polls that gave it frames.
    assert!(h.user_sink.flushes > 0);
    h.check_stats();
    h.teardown();
}

#[test]
fn failed_redirects_are_counted_and_recycled() {
    let setup = Setup::new().queues(1).ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    h.user_sink.cap = 5;
    let prog = |x: &mut XdpBuff<'_>| match frame_id(x.data()) % 4 {
        // One function: no other port. One queue: no next queue. Target 9: no entry.
        0 => x.redirect(targets::OTHER_PORT),
        1 => x.redirect(9),
        2 => XdpAction::Redirect, // no target chosen at all
        _ => x.redirect(targets::USER_SINK),
    };
    inject_burst(&mut h, 0, 40, 64);
    let prog = h.attach(prog);
    h.drain_xdp(prog);
    h.check_delivery();
    assert_eq!(total(&mut h, |s| s.rx_xdp_redirect), 5);
    assert_eq!(total(&mut h, |s| s.rx_xdp_redirect_errors), 35);
    assert_eq!(total(&mut h, |s| s.rx_xdp_drop), 35);
    assert_eq!(h.user_sink.frames.len(), 5);
    h.teardown();
}

#[test]
fn head_tail_and_metadata_adjustments_reach_the_wire_and_the_os() {
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    let (id, original) = h.frame(1, 200);
    card.inject(0, &original);
    h.injected[0].push(id);
    // Push a 4-byte tag in front, trim 2 bytes at the end, send back.
    let edit = |x: &mut XdpBuff<'_>| {
        if x.adjust_head(-4).is_err() || x.adjust_tail(-2).is_err() {
            return XdpAction::Aborted;
        }
        x.data_mut()[..4].copy_from_slice(&[0xDE, 0xAD, 0xBE, 0xEF]);
        // Out-of-bounds requests fail and change nothing.
        assert!(x.adjust_head(-1000).is_err());
        assert!(x.adjust_tail(4000).is_err());
        assert!(x.adjust_meta(-3).is_err());
        XdpAction::Tx
    };
    let edit = h.attach(edit);
    h.drain_xdp(edit);
    let out = card.take_egress(0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0][..4], [0xDE, 0xAD, 0xBE, 0xEF]);
    assert_eq!(out[0][4..], original[..original.len() - 2]);
    // Metadata in front of a passed frame is reported to the OS.
    let (id, f) = h.frame(2, 100);
    card.inject(0, &f);
    h.injected[0].push(id);
    let meta = |x: &mut XdpBuff<'_>| {
        if x.adjust_meta(-8).is_err() {
            return XdpAction::Aborted;
        }
        x.meta_mut().copy_from_slice(&7u64.to_le_bytes());
        XdpAction::Pass
    };
    let meta = h.attach(meta);
    h.drain_xdp(meta);
    assert_eq!(h.last_pass.map(|p| p.at.meta), Some(8));
    let mut before = Vec::new();
    h.with_os_frames(0, |r| {
        let at = usize::from(r.at.offset);
        before.push(onic_hal::DmaPage::bytes(&r.page)[at - 8..at].to_vec());
    });
    assert_eq!(before, [7u64.to_le_bytes()]);
    h.check_delivery();
    h.teardown();
}

#[test]
fn rx_hash_metadata_names_the_queue_the_shell_chose() {
    let setup = Setup::new().queues(4).ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    let table = IndirectionTable::round_robin(4);
    let checked = Rc::new(Cell::new(0u32));
    let count = Rc::clone(&checked);
    let prog = move |x: &mut XdpBuff<'_>| {
        let Ok(hash) = x.rx_hash() else {
            return XdpAction::Aborted;
        };
        assert_eq!(table.queue_for(hash.value).get(), x.rx_queue_index());
        assert_eq!(hash.xdp_type, onic_core::rss::xdp::TYPE_L4_IPV4_UDP);
        assert_eq!(x.ingress_port(), 0);
        count.set(count.get() + 1);
        XdpAction::Drop
    };
    inject_burst(&mut h, 0, 60, 64);
    let prog = h.attach(prog);
    h.drain_xdp(prog);
    assert_eq!(checked.get(), 60);
    assert!(
        h.queues()
            .iter()
            .filter(|v| v.pair.stats().rx_xdp_drop > 0)
            .count()
            > 1
    );
    h.teardown();
}

/// `n` frames of "another device" for `xdp_xmit`: received by function 1, whose program
/// redirects them to the harness ([`targets::HOLD`]), as another driver's redirected frames
/// wait for `ndo_xdp_xmit`. Returns their ids and the frames, in order.
fn foreign_frames(h: &mut Harness<'_>, n: u16, len: usize) -> (Vec<u64>, Vec<u32>) {
    let hold = h.attach(|x: &mut XdpBuff<'_>| x.redirect(targets::HOLD));
    let mut ids = Vec::new();
    let mut frames = Vec::new();
    // In batches the RX ring takes whole.
    for start in (0..n).step_by(30) {
        for i in start..n.min(start + 30) {
            ids.push(h.inject(1, i, len));
        }
        h.drain_xdp(hold);
        frames.extend(h.take_held());
    }
    assert_eq!(frames.len(), ids.len());
    let got: Vec<u64> = frames
        .iter()
        .map(|&f| frame_id(&h.host(0).frame_data(f)))
        .collect();
    assert_eq!(got, ids);
    (ids, frames)
}

#[test]
fn xdp_xmit_partial_failure_returns_the_count_and_frees_nothing_it_does_not_own() {
    let setup = Setup::new().functions(2).ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    let (ids, frames) = foreign_frames(&mut h, 66, 120);
    card.faults().stall_h2c_writeback(true);
    // 59 of the redirect-in ring's 62 slots taken: 3 left.
    assert_eq!(h.xdp_xmit(0, 0, &frames[..59], true), 59);
    let doorbells = h.queue(0, 0).xmit.stats().doorbells;
    let sent = h.xdp_xmit(0, 0, &frames[59..], true);
    assert_eq!(sent, 3);
    // The queued ones are the queue's now; the rest are untouched and still the caller's.
    let rest = &frames[62..];
    for (&f, &id) in rest.iter().zip(&ids[62..]) {
        assert_eq!(frame_id(&h.host(0).frame_data(f)), id);
    }
    let tx = h.queue(0, 0).xmit;
    assert_eq!((tx.stats().tx_xdp_xmit, tx.stats().tx_xdp_xmit_errors), (62, 4));
    assert_eq!(tx.in_flight_by_owner().remote, 62);
    // The full ring published the batch; the flush found nothing more to publish.
    assert_eq!(tx.stats().doorbells, doorbells + 1);
    // The owner takes back what was not queued; nothing was freed twice or lost.
    for &f in rest {
        h.return_frame(f);
    }
    h.check_pages();
    card.faults().stall_h2c_writeback(false);
    h.drain();
    let out = card.take_egress(0);
    assert_eq!(out.len(), 62);
    let tail: Vec<u64> = out[59..].iter().map(|f| frame_id(f)).collect();
    assert_eq!(tail, ids[59..62]);
    // The sent frames' pages went home to function 1's pool.
    assert_eq!(h.pool_census().iter().map(|c| c.redirected).sum::<u64>(), 0);
    h.check_delivery();
    h.teardown();
}

#[test]
fn xdp_xmit_without_flush_publishes_nothing_until_a_flush() {
    let setup = Setup::new().functions(2).ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    let (_, frames) = foreign_frames(&mut h, 4, 80);
    assert_eq!(h.xdp_xmit(0, 0, &frames, false), 4);
    assert!(h.queue(0, 0).xmit.has_unpublished());
    card.run_until_idle();
    assert!(card.take_egress(0).is_empty());
    assert_eq!(h.xdp_xmit(0, 0, &[], true), 0);
    assert!(!h.queue(0, 0).xmit.has_unpublished());
    card.run_until_idle();
    assert_eq!(card.take_egress(0).len(), 4);
    h.drain();
    h.teardown();
}

#[test]
fn program_swap_under_traffic_loses_no_frame_and_no_page() {
    let setup = Setup::new()
        .functions(2)
        .queues(2)
        .ring_size_idx(2)
        .wire(Wire::Open);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    h.user_sink.cap = usize::MAX;
    let mut slot: XdpSlot<Prog> = XdpSlot::new();
    let pass = h.attach(pass);
    let programs: [Option<Prog>; 6] = [
        Some(pass),
        Some(h.attach(drop_all)),
        None,
        Some(h.attach(swap_macs_and_tx)),
        Some(h.attach(spread)),
        Some(h.attach(Raw(1234))),
    ];
    let mut injected = 0u64;
    for round in 0..18usize {
        for i in 0..24u16 {
            h.inject((i % 2) as u8, round as u16 * 24 + i, 60 + usize::from(i) * 40);
            injected += 1;
        }
        h.settle();
        // Half a poll with the current program, swap, then the rest: the frames still in the
        // rings meet the new program.
        for f in 0..2 {
            for q in 0..2 {
                h.poll_with(f, q, 5, slot.program_mut().copied());
                h.check_pages();
            }
        }
        match programs[round % programs.len()] {
            Some(p) => {
                slot.attach(p);
            }
            None => {
                slot.detach();
            }
        }
        for f in 0..2 {
            for q in 0..2 {
                h.poll_with(f, q, 64, slot.program_mut().copied());
                h.check_pages();
            }
        }
        h.return_os_pages(8);
        h.check_pages();
    }
    h.drain_xdp(pass);
    h.check_delivery();
    assert_eq!(h.delivered.len() as u64, injected);
    assert!(slot.changes() >= 15);
    assert_eq!(h.holdings().in_tx_flight, 0);
    h.teardown();
}
