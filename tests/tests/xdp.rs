//! XDP end to end through the model: every verdict, redirect targets, buffer adjustments, RX hash
//! metadata, `xdp_xmit`, and program swaps under traffic, with the page census checked after
//! every step and every page accounted for at teardown.

use std::cell::Cell;

use onic_core::device::rss_control::IndirectionTable;
use onic_core::queue::pool::PageCounts;
use onic_core::xdp::{xdp_xmit, RawXdpProgram, XdpAction, XdpBuff, XdpFrame, XdpSlot};
use onic_sim::Wire;
use onic_tests::datapath::{frame_id, targets, HFrame, Harness, Setup};

fn pass(_: &mut XdpBuff<'_>) -> XdpAction {
    XdpAction::Pass
}

fn drop_all(_: &mut XdpBuff<'_>) -> XdpAction {
    XdpAction::Drop
}

fn swap_macs_and_tx(x: &mut XdpBuff<'_>) -> XdpAction {
    let d = x.data_mut();
    for i in 0..6 {
        d.swap(i, i + 6);
    }
    XdpAction::Tx
}

/// A raw program returning a fixed raw value (as a BPF program could).
struct Raw(u32);

impl RawXdpProgram for Raw {
    fn run_raw(&mut self, _: &mut XdpBuff<'_>) -> u32 {
        self.0
    }
}

/// Sum of a pair counter over every pair.
fn total(h: &Harness<'_>, f: impl Fn(&onic_core::PairStats) -> u64) -> u64 {
    h.pairs().map(|p| f(p.stats())).sum()
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
    let rings = setup.recycle_rings();
    let mut h = Harness::new(&card, &setup, &rings);
    let mut progs: [(&str, Box<dyn RawXdpProgram>); 4] = [
        ("pass", Box::new(pass)),
        ("drop", Box::new(drop_all)),
        ("aborted", Box::new(Raw(0))),
        ("unknown", Box::new(Raw(99))),
    ];
    for (_, prog) in &mut progs {
        inject_burst(&mut h, 0, 40, 60);
        h.drain_xdp(prog.as_mut());
        h.check_pages();
        h.return_os_pages(usize::MAX);
        h.check_pages();
    }
    assert_eq!(total(&h, |s| s.rx_xdp_pass), 40);
    assert_eq!(total(&h, |s| s.rx_xdp_drop), 120);
    assert_eq!(total(&h, |s| s.rx_xdp_aborted), 40);
    // The unknown value is handled like ABORTED but counted as an exception of its own.
    assert_eq!(total(&h, |s| s.rx_xdp_invalid), 40);
    h.check_delivery();
    h.check_stats();
    h.teardown();
}

#[test]
fn no_program_passes_frames_untouched_with_no_xdp_counts() {
    let setup = Setup::new().queues(2).ring_size_idx(1);
    let card = setup.card();
    let rings = setup.recycle_rings();
    let mut h = Harness::new(&card, &setup, &rings);
    inject_burst(&mut h, 0, 30, 100);
    for _ in 0..4 {
        h.settle();
        for q in 0..2 {
            h.poll_with(0, q, 64, None);
            h.check_pages();
        }
    }
    assert_eq!(h.os_pages.len(), 30);
    let page = &h.os_pages[0].1;
    assert_eq!(frame_id(&onic_hal::DmaPage::bytes(page)[256..]), h.delivered[0]);
    for p in h.pairs() {
        assert_eq!(*p.stats(), onic_core::PairStats::default());
    }
    assert_eq!(h.last_pass_info.map(|i| (i.meta_len, i.hash)), Some((0, None)));
    h.check_delivery();
    h.teardown();
}

#[test]
fn xdp_tx_sends_the_same_page_back_with_one_doorbell_per_poll() {
    let setup = Setup::new().ring_size_idx(2);
    let card = setup.card();
    let rings = setup.recycle_rings();
    let mut h = Harness::new(&card, &setup, &rings);
    let ids = inject_burst(&mut h, 0, 30, 80);
    h.settle();
    let doorbells = h.funcs[0].pairs[0].tx.stats().doorbells;
    let out = h.poll_with(0, 0, 64, Some(&mut swap_macs_and_tx));
    assert_eq!(out.rx.done, 30);
    let p = &h.funcs[0].pairs[0];
    assert_eq!(p.stats().rx_xdp_tx, 30);
    assert_eq!(
        p.tx.stats().doorbells,
        doorbells + 1,
        "one H2C doorbell for the poll"
    );
    // The pages are on the TX ring, not copied: 30 pool pages in flight.
    assert_eq!(p.tx.pool_pages_in_flight(), 30);
    h.check_pages();
    h.drain_xdp(&mut swap_macs_and_tx);
    let out = card.take_egress(0);
    assert_eq!(out.len(), 30);
    for (f, id) in out.iter().zip(&ids) {
        assert_eq!(frame_id(f), *id);
        assert_eq!(f[..6], [0x00, 0x0A, 0x35, 0x01, 0x02, 0x03], "MACs swapped");
        assert_eq!(f[6..12], [0x00, 0x0A, 0x35, 0xAA, 0xBB, 0xCC]);
    }
    assert_eq!(h.funcs[0].pairs[0].tx.pool_pages_in_flight(), 0);
    h.check_stats();
    h.teardown();
}

#[test]
fn xdp_tx_on_a_tiny_ring_with_delayed_reclaim_loses_no_page() {
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let rings = setup.recycle_rings();
    let mut h = Harness::new(&card, &setup, &rings);
    // The device sends but does not report completions: nothing is reclaimed for a while.
    card.faults().stall_h2c_writeback(true);
    for _ in 0..2 {
        inject_burst(&mut h, 0, 50, 100);
        h.settle();
        h.poll_with(0, 0, 64, Some(&mut swap_macs_and_tx));
        h.check_pages();
    }
    let p = &h.funcs[0].pairs[0];
    assert_eq!(p.stats().rx_xdp_tx, 100);
    // A 63-entry ring holds 62 frames; the other 38 are counted and their pages recycled.
    assert_eq!(p.stats().rx_xdp_tx_errors, 38);
    assert_eq!(p.stats().rx_xdp_drop, 38);
    assert_eq!(p.tx.pool_pages_in_flight(), 62);
    let counts = h.page_counts();
    assert_eq!(counts.in_tx_flight, 62);
    assert_eq!(counts.total(), h.live_pool_pages());
    card.faults().stall_h2c_writeback(false);
    h.drain_xdp(&mut swap_macs_and_tx);
    h.check_delivery();
    assert_eq!(card.take_egress(0).len(), 62);
    assert_eq!(h.page_counts().in_tx_flight, 0);
    // Sent and reclaimed, each page waits in its TX slot for the RX ring.
    assert_eq!(h.page_counts().tx_parked, 62);
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
    let rings = setup.recycle_rings();
    let mut h = Harness::new(&card, &setup, &rings);
    h.user_sink.cap = usize::MAX;
    let ids = inject_burst(&mut h, 0, 90, 64);
    h.drain_xdp(&mut spread);
    h.check_delivery();
    let want = |r: u64| ids.iter().filter(|&&id| id % 3 == r).count();
    let port1 = card.take_egress(1);
    let port0 = card.take_egress(0);
    assert_eq!(port1.len(), want(0), "redirected out of the other port");
    assert_eq!(port0.len(), want(1), "redirected to the next queue of port 0");
    assert_eq!(h.user_sink.frames.len(), want(2), "copied by the user sink");
    assert!(port1.iter().all(|f| frame_id(f).is_multiple_of(3)));
    assert!(h.user_sink.frames.iter().all(|f| frame_id(f) % 3 == 2));
    assert_eq!(total(&h, |s| s.rx_xdp_redirect), 90);
    assert_eq!(total(&h, |s| s.rx_xdp_redirect_errors), 0);
    // The user sink was flushed at the end of the polls that gave it frames.
    assert!(h.user_sink.flushes > 0);
    h.check_stats();
    h.teardown();
}

#[test]
fn failed_redirects_are_counted_and_recycled() {
    let setup = Setup::new().queues(1).ring_size_idx(1);
    let card = setup.card();
    let rings = setup.recycle_rings();
    let mut h = Harness::new(&card, &setup, &rings);
    h.user_sink.cap = 5;
    let mut prog = |x: &mut XdpBuff<'_>| match frame_id(x.data()) % 4 {
        // One function: no other port. One queue: no next queue. Target 9: no entry.
        0 => x.redirect(targets::OTHER_PORT),
        1 => x.redirect(9),
        2 => XdpAction::Redirect, // no target chosen at all
        _ => x.redirect(targets::USER_SINK),
    };
    inject_burst(&mut h, 0, 40, 64);
    h.drain_xdp(&mut prog);
    h.check_delivery();
    assert_eq!(total(&h, |s| s.rx_xdp_redirect), 5);
    assert_eq!(total(&h, |s| s.rx_xdp_redirect_errors), 35);
    assert_eq!(total(&h, |s| s.rx_xdp_drop), 35);
    assert_eq!(h.user_sink.frames.len(), 5);
    h.teardown();
}

#[test]
fn head_tail_and_metadata_adjustments_reach_the_wire_and_the_os() {
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let rings = setup.recycle_rings();
    let mut h = Harness::new(&card, &setup, &rings);
    let (id, original) = h.frame(1, 200);
    card.inject(0, &original);
    h.injected[0].push(id);
    // Push a 4-byte tag in front, trim 2 bytes at the end, send back.
    let mut edit = |x: &mut XdpBuff<'_>| {
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
    h.drain_xdp(&mut edit);
    let out = card.take_egress(0);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0][..4], [0xDE, 0xAD, 0xBE, 0xEF]);
    assert_eq!(out[0][4..], original[..original.len() - 2]);
    // Metadata in front of a passed frame is reported to the OS.
    let (id, f) = h.frame(2, 100);
    card.inject(0, &f);
    h.injected[0].push(id);
    let mut meta = |x: &mut XdpBuff<'_>| {
        if x.adjust_meta(-8).is_err() {
            return XdpAction::Aborted;
        }
        x.meta_mut().copy_from_slice(&7u64.to_le_bytes());
        XdpAction::Pass
    };
    h.drain_xdp(&mut meta);
    assert_eq!(h.last_pass_info.map(|i| i.meta_len), Some(8));
    let page = &h.os_pages[0].1;
    assert_eq!(onic_hal::DmaPage::bytes(page)[248..256], 7u64.to_le_bytes());
    h.check_delivery();
    h.teardown();
}

#[test]
fn rx_hash_metadata_names_the_queue_the_shell_chose() {
    let setup = Setup::new().queues(4).ring_size_idx(1);
    let card = setup.card();
    let rings = setup.recycle_rings();
    let mut h = Harness::new(&card, &setup, &rings);
    let table = IndirectionTable::round_robin(4);
    let checked = Cell::new(0u32);
    let mut prog = |x: &mut XdpBuff<'_>| {
        let Ok(hash) = x.rx_hash() else {
            return XdpAction::Aborted;
        };
        assert_eq!(table.queue_for(hash.value).get(), x.rx_queue_index());
        assert_eq!(hash.xdp_type, onic_core::rss::xdp::TYPE_L4_IPV4_UDP);
        assert_eq!(x.ingress_port(), 0);
        checked.set(checked.get() + 1);
        XdpAction::Drop
    };
    inject_burst(&mut h, 0, 60, 64);
    h.drain_xdp(&mut prog);
    assert_eq!(checked.get(), 60);
    assert!(h.pairs().filter(|p| p.stats().rx_xdp_drop > 0).count() > 1);
    h.teardown();
}

/// A frame of "another device" for `xdp_xmit`: a page of function 1's first pool, as a
/// redirected frame of that device would be.
fn foreign_frame<'c>(h: &mut Harness<'c>, len: usize) -> (u64, HFrame<'c>) {
    let (id, data) = h.frame(3, len);
    let origin = usize::from(h.setup.queues); // global index of function 1, queue 0
    let pool = &mut h.funcs[1].pairs[0].pool;
    let mut page = pool.alloc().unwrap();
    page.bytes_mut()[256..256 + data.len()].copy_from_slice(&data);
    onic_core::PageProvider::sync_for_device(pool, &page, 256, data.len());
    let f = XdpFrame {
        page,
        offset: 256,
        len: data.len() as u16,
        origin: origin as u32,
    };
    (id, HFrame::Xdp(f))
}

/// The owner takes back a frame `xdp_xmit` did not queue.
fn take_back(h: &mut Harness<'_>, f: HFrame<'_>) {
    let HFrame::Xdp(f) = f else {
        panic!("not a foreign frame")
    };
    let dirty = f.dirty_len();
    h.funcs[1].pairs[0].pool.recycle(f.page, dirty);
}

#[test]
fn xdp_xmit_partial_failure_returns_the_count_and_frees_nothing_it_does_not_own() {
    let setup = Setup::new().functions(2).ring_size_idx(1);
    let card = setup.card();
    let rings = setup.recycle_rings();
    let mut h = Harness::new(&card, &setup, &rings);
    card.faults().stall_h2c_writeback(true);
    // 59 of the ring's 62 slots taken by OS frames: 3 left.
    let frames: Vec<_> = (0..59u16).map(|i| h.frame(i, 100)).collect();
    assert_eq!(h.transmit(0, 0, &frames).len(), 59);
    let mut batch: Vec<Option<HFrame<'_>>> = Vec::new();
    let mut ids = Vec::new();
    for _ in 0..7 {
        let (id, f) = foreign_frame(&mut h, 120);
        ids.push(id);
        batch.push(Some(f));
    }
    let doorbells = h.funcs[0].pairs[0].tx.stats().doorbells;
    let sent = {
        let func = &mut h.funcs[0];
        let db = func.dev.doorbells();
        xdp_xmit(&mut func.pairs[0].tx, &db, &mut batch, true)
    };
    assert_eq!(sent, 3);
    // The queued ones are the queue's now; the rest are untouched and still the caller's.
    assert!(batch[..3].iter().all(Option::is_none));
    assert!(batch[3..].iter().all(Option::is_some));
    let tx = &h.funcs[0].pairs[0].tx;
    assert_eq!((tx.stats().tx_xdp_xmit, tx.stats().tx_xdp_xmit_errors), (3, 4));
    assert_eq!(tx.in_flight_by_owner().remote, 3);
    // The full ring published the batch; the flush found nothing more to publish.
    assert_eq!(tx.stats().doorbells, doorbells + 1);
    // The owner takes back what was not queued; nothing was freed twice or lost.
    for f in batch.into_iter().flatten() {
        take_back(&mut h, f);
    }
    h.check_pages();
    card.faults().stall_h2c_writeback(false);
    h.drain();
    let out = card.take_egress(0);
    assert_eq!(out.len(), 62);
    let tail: Vec<u64> = out[59..].iter().map(|f| frame_id(f)).collect();
    assert_eq!(tail, ids[..3]);
    // The sent frames' pages went home through function 1's recycle ring.
    assert_eq!(h.page_counts().in_tx_flight, 0);
    h.teardown();
}

#[test]
fn xdp_xmit_without_flush_publishes_nothing_until_a_flush() {
    let setup = Setup::new().functions(2).ring_size_idx(1);
    let card = setup.card();
    let rings = setup.recycle_rings();
    let mut h = Harness::new(&card, &setup, &rings);
    let mut batch: Vec<Option<HFrame<'_>>> = (0..4).map(|_| Some(foreign_frame(&mut h, 80).1)).collect();
    let func = &mut h.funcs[0];
    let db = func.dev.doorbells();
    assert_eq!(xdp_xmit(&mut func.pairs[0].tx, &db, &mut batch, false), 4);
    assert!(func.pairs[0].tx.has_unpublished());
    card.run_until_idle();
    assert!(card.take_egress(0).is_empty());
    assert_eq!(xdp_xmit(&mut func.pairs[0].tx, &db, &mut [], true), 0);
    assert!(!func.pairs[0].tx.has_unpublished());
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
    let rings = setup.recycle_rings();
    let mut h = Harness::new(&card, &setup, &rings);
    h.user_sink.cap = usize::MAX;
    let mut slot: XdpSlot<Box<dyn RawXdpProgram>> = XdpSlot::new();
    type Make = fn() -> Option<Box<dyn RawXdpProgram>>;
    let programs: [Make; 6] = [
        || Some(Box::new(pass)),
        || Some(Box::new(drop_all)),
        || None,
        || Some(Box::new(swap_macs_and_tx)),
        || Some(Box::new(spread)),
        || Some(Box::new(Raw(1234))),
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
                h.poll_with(f, q, 5, slot.program_mut().map(|p| p.as_mut() as _));
                h.check_pages();
            }
        }
        match programs[round % programs.len()]() {
            Some(p) => {
                slot.attach(p);
            }
            None => {
                slot.detach();
            }
        }
        for f in 0..2 {
            for q in 0..2 {
                h.poll_with(f, q, 64, slot.program_mut().map(|p| p.as_mut() as _));
                h.check_pages();
            }
        }
        h.return_os_pages(8);
        h.check_pages();
    }
    h.drain_xdp(&mut pass);
    h.check_delivery();
    assert_eq!(h.delivered.len() as u64, injected);
    assert!(slot.changes() >= 15);
    let c: PageCounts = h.page_counts();
    assert_eq!(c.in_tx_flight, 0);
    h.teardown();
}
