//! The RX queue's unit tests, on the simulated card.

use std::vec::Vec;

use onic_hal::layout::desc::{C2hDesc, CmptEntry, WbStatus};
use onic_hal::{Direction, DmaPage, PAGE_SIZE};
use onic_sim::{Card, Corruption, SimDelay};

use super::desc::desc_word;
use super::*;
use crate::config::{RingSizeIdx, RX_HEADROOM};
use crate::moderation::{ModerationError, QueueModeration, RxModeration};
use crate::queue::pool::{PagePool, PoolConfig};
use crate::testutil::{self, Placed, SimDevice};

/// RX queue 0 of PF0 with 64-entry rings (63 usable): small enough for Miri.
fn small_cfg() -> RxQueueConfig {
    RxQueueConfig {
        desc_ring: RingSizeIdx::new(1).unwrap(),
        cmpt_ring: RingSizeIdx::new(1).unwrap(),
        ..RxQueueConfig::new(onic_hal::QueueId::new(0))
    }
}

fn frame(len: usize, seed: u8) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len).map(|i| seed.wrapping_add(i as u8)).collect();
    f[..6].copy_from_slice(&[0x00, 0x0A, 0x35, 0x11, 0x22, 0x33]);
    f
}

/// Lets the model deliver what was injected and fire the completion timer.
fn settle(card: &Card) {
    card.run_until_idle();
    card.advance_time(2_000);
    card.run_until_idle();
}

type Pool<'c> = PagePool<'static, onic_sim::SimDma<'c>, 16>;

fn pool(card: &Card, bulk: usize) -> Pool<'_> {
    let cfg = PoolConfig {
        bulk,
        ..PoolConfig::rx(Direction::FromDevice, small_cfg().buf.bytes())
    };
    PagePool::new(card.dma(), cfg, None)
}

type TestRx<'c> = RxQueue<onic_sim::SimDma<'c>, DmaPage, [Option<DmaPage>; 63]>;

/// A device on `card` (one queue), its delay, a pool taking `bulk` pages per slow call, and RX
/// queue 0 on the small rings with `opts`, not started.
fn queue(
    card: &Card,
    bulk: usize,
    opts: Option<RxOptions>,
) -> (SimDevice<'_>, SimDelay<'_>, Pool<'_>, TestRx<'_>) {
    queue_on(card, bulk, small_cfg(), opts)
}

/// As [`queue`], on the rings of `cfg` (a descriptor ring of 63 usable entries).
fn queue_on(
    card: &Card,
    bulk: usize,
    cfg: RxQueueConfig,
    opts: Option<RxOptions>,
) -> (SimDevice<'_>, SimDelay<'_>, Pool<'_>, TestRx<'_>) {
    let opts = opts.unwrap_or(RxOptions::for_queue(&cfg));
    let rx = RxQueue::new(card.dma(), cfg, opts, [const { None }; 63]).unwrap();
    (testutil::device(card, 1), card.delay(), pool(card, bulk), rx)
}

/// As [`queue`], with the default options, and started (every page it can get posted).
fn started(card: &Card, bulk: usize) -> (SimDevice<'_>, SimDelay<'_>, Pool<'_>, TestRx<'_>) {
    let (dev, mut delay, mut pool, mut rx) = queue(card, bulk, None);
    rx.start(&dev, &mut delay, &mut pool).unwrap();
    (dev, delay, pool, rx)
}

/// Tears `rx` down, then checks that every page went back to the model and that the model saw
/// no violation.
fn finish<'c>(
    card: &'c Card,
    dev: &SimDevice<'c>,
    delay: &mut SimDelay<'c>,
    mut pool: Pool<'c>,
    rx: TestRx<'c>,
) {
    rx.teardown(dev, delay, &mut pool).0.unwrap();
    drop(pool);
    assert_eq!(card.dma_stats().live_pages, 0);
    assert_eq!(card.violations(), []);
}

fn copy_sink(out: &mut Vec<Vec<u8>>) -> impl FnMut(RxFrame<DmaPage>, &mut Pool<'_>) -> Handled<DmaPage> + '_ {
    |f, _| {
        out.push(f.data().to_vec());
        Handled::Recycle(f)
    }
}

#[test]
fn receive_sync_and_rearm() {
    let card = testutil::card();
    let (dev, mut delay, mut pool, mut rx) = started(&card, 64);
    let db = dev.doorbells();
    // Every page is posted, all but one slot (62 of 63).
    assert_eq!(rx.posted(), 62);
    assert_eq!(rx.pages_in_ring(), 62);
    let sent: Vec<Vec<u8>> = (0..3).map(|i| frame(60 + 100 * i, i as u8)).collect();
    for f in &sent {
        card.inject(0, f);
    }
    settle(&card);
    let syncs = card.dma_stats().syncs_for_cpu;
    let mut got = Vec::new();
    let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
    assert_eq!(got, sent);
    assert_eq!(
        out,
        PollOutcome {
            done: 3,
            armed: true,
            more: false,
            error: None
        }
    );
    assert_eq!(card.dma_stats().syncs_for_cpu, syncs + 3);
    assert_eq!(rx.stats().rx_packets, 3);
    assert_eq!(rx.stats().rx_bytes, 60 + 160 + 260);
    // Each received page went back into its slot: the ring still holds 62 pages, 59 of them
    // posted (3 free descriptors are below the refill batch of 7, so not yet handed back),
    // and the queue holds the spare page it took before the first delivery.
    assert_eq!(rx.pages_in_ring(), 63);
    assert!(rx.has_spare());
    assert_eq!(rx.posted(), 59);
    let counts = pool.page_counts(rx.pages_in_ring(), 0, 0, 0).unwrap();
    assert_eq!(counts.total(), card.dma_stats().live_pages as u64);
    // Nothing new: the poll re-arms and reports no more work.
    let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
    assert_eq!((out.done, out.armed, out.more), (0, true, false));
    let (r, slots) = rx.teardown(&dev, &mut delay, &mut pool);
    r.unwrap();
    let slots = slots.expect("the storage comes back");
    assert!(slots.iter().all(Option::is_none), "the storage comes back empty");
    drop(pool);
    assert_eq!(card.dma_stats().live_pages, 0);
    assert_eq!(card.violations(), []);
}

#[test]
fn budget_and_color_across_wraps() {
    let card = testutil::card();
    let (dev, mut delay, mut pool, mut rx) = started(&card, 64);
    let db = dev.doorbells();
    let mut got = Vec::new();
    let mut sent = Vec::new();
    // 150 frames in bursts of 40 (more than a refill batch, less than the ring), polled with a
    // budget of 16: the completion ring (63 entries) wraps twice, the color flips twice. Under
    // Miri, 70 frames (one wrap) keep the run short.
    let total = if cfg!(miri) { 70 } else { 150 };
    for burst in 0..4u8 {
        for i in 0..40u8 {
            if sent.len() == total {
                break;
            }
            let f = frame(60 + usize::from(i), burst.wrapping_mul(40).wrapping_add(i));
            card.inject(0, &f);
            sent.push(f);
        }
        settle(&card);
        loop {
            let out = rx.poll(16, &db, &mut pool, &mut copy_sink(&mut got));
            assert!(out.done <= 16);
            if out.armed && !out.more {
                break;
            }
            settle(&card);
        }
    }
    assert_eq!(got, sent);
    assert_eq!(
        rx.color,
        if cfg!(miri) {
            Color::INITIAL.flip()
        } else {
            Color::INITIAL
        }
    );
    assert_eq!(rx.stats().rx_dropped(), 0);
    assert_eq!(card.stats().c2h_no_desc_dropped, 0);
    finish(&card, &dev, &mut delay, pool, rx);
}

#[test]
fn batches_end_where_the_descriptor_ring_wraps() {
    // A completion ring (127 entries) larger than the descriptor ring (63): a batch of
    // entries would run past the descriptor ring's end, so it stops there and the head wraps
    // between batches. Every frame arrives in order, no descriptor is left pointing at
    // another page, and the head stays an entry of the ring.
    let card = testutil::card();
    let cfg = RxQueueConfig {
        desc_ring: RingSizeIdx::new(1).unwrap(),
        cmpt_ring: RingSizeIdx::new(2).unwrap(),
        ..RxQueueConfig::new(onic_hal::QueueId::new(0))
    };
    // Refills of 10, which do not divide 63: batches bounded by the next refill alone would
    // cross the descriptor ring's end.
    let opts = RxOptions {
        refill_batch: 10,
        ..RxOptions::for_queue(&cfg)
    };
    let (dev, mut delay, mut pool, mut rx) = queue_on(&card, 64, cfg, Some(opts));
    rx.start(&dev, &mut delay, &mut pool).unwrap();
    let db = dev.doorbells();
    let mut got = Vec::new();
    let mut sent = Vec::new();
    let total = if cfg!(miri) { 80 } else { 200 };
    let mut seed = 0u8;
    while sent.len() < total {
        for _ in 0..50 {
            let f = frame(60 + usize::from(seed % 70), seed);
            seed = seed.wrapping_add(1);
            card.inject(0, &f);
            sent.push(f);
        }
        settle(&card);
        loop {
            let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
            assert!(rx.didx.contains(rx.head), "head {} outside the ring", rx.head);
            assert_descriptors_match(&rx);
            if out.armed && !out.more {
                break;
            }
            settle(&card);
        }
    }
    assert_eq!(got, sent);
    assert_eq!(rx.stats().rx_dropped(), 0);
    assert_eq!(card.stats().c2h_no_desc_dropped, 0);
    finish(&card, &dev, &mut delay, pool, rx);
}

#[test]
fn overload_never_overflows_the_completion_ring() {
    let card = testutil::card();
    let (dev, mut delay, mut pool, mut rx) = started(&card, 64);
    let db = dev.doorbells();
    // The device fills every posted descriptor: the completion ring holds 62 unread entries.
    let mut injected = 0u64;
    for i in 0..70u8 {
        card.inject(0, &frame(64, i));
        injected += 1;
    }
    settle(&card);
    // Overload: the device works while the poll runs (after each frame it takes what the
    // descriptors handed back so far allow), so descriptors refilled mid-poll come straight
    // back as completions before the poll ends.
    let total = if cfg!(miri) { 150 } else { 600 };
    let mut received = 0u64;
    // Bounded: a queue the device stopped would never deliver the total.
    for _ in 0..total {
        if received >= total {
            break;
        }
        let mut sink = |f: RxFrame<DmaPage>, _: &mut Pool<'_>| {
            received += 1;
            card.inject(0, &frame(64, injected as u8));
            injected += 1;
            card.run_until_idle();
            Handled::Recycle(f)
        };
        rx.poll(64, &db, &mut pool, &mut sink);
        settle(&card);
    }
    // Drain what is left.
    for _ in 0..4 {
        rx.poll(
            64,
            &db,
            &mut pool,
            &mut |f: RxFrame<DmaPage>, _: &mut Pool<'_>| {
                received += 1;
                Handled::Recycle(f)
            },
        );
    }
    let model = card.stats();
    assert_eq!(card.violations(), [], "no completion-ring overflow");
    assert!(received >= total);
    assert_eq!(model.cmpt_full_dropped, 0);
    assert!(model.c2h_no_desc_dropped > 0, "the device was overloaded");
    // Every frame is accounted for: received, or dropped by the device for lack of
    // descriptors (counted by the adapter as rx drops); none went missing in between.
    assert_eq!(injected, received + model.c2h_no_desc_dropped);
    assert_eq!(rx.stats().rx_packets, received);
    assert_eq!(rx.stats().rx_dropped(), 0);
    rx.teardown(&dev, &mut delay, &mut pool).0.unwrap();
    drop(pool);
    assert_eq!(card.dma_stats().live_pages, 0);
}

#[test]
fn bad_completions_are_counted_drops() {
    let card = testutil::card();
    let (dev, mut delay, mut pool, mut rx) = started(&card, 64);
    let db = dev.doorbells();
    let live = card.dma_stats().live_pages;
    for how in [
        Corruption::ErrBit,
        Corruption::LengthZero,
        Corruption::LengthTooLarge,
    ] {
        card.faults().corrupt_next_completions(1, how);
        card.inject(0, &frame(100, 1));
        card.run_until_idle();
    }
    let good = frame(64, 9);
    card.inject(0, &good);
    settle(&card);
    let mut got = Vec::new();
    let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
    assert_eq!(out.done, 4);
    assert_eq!(got, [good]);
    let s = rx.stats();
    assert_eq!((s.rx_cmpt_errors, s.rx_bad_length, s.rx_packets), (1, 2, 1));
    // The dropped frames' pages stayed in the ring; nothing was allocated for them.
    assert_eq!(card.dma_stats().live_pages, live);
    assert_eq!(
        pool.page_counts(rx.pages_in_ring(), 0, 0, 0).unwrap().total(),
        live as u64
    );
    finish(&card, &dev, &mut delay, pool, rx);
}

#[test]
fn status_pidx_beyond_the_ring_stops_the_queue() {
    let card = testutil::card();
    let (dev, mut delay, mut pool, mut rx) = started(&card, 64);
    let db = dev.doorbells();
    card.faults().cmpt_status_pidx_jump();
    card.inject(0, &frame(80, 0));
    settle(&card);
    let mut got = Vec::new();
    let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
    let err = Some(QueueError::CmptPidxOutOfRange { pidx: 70, usable: 63 });
    assert_eq!(
        out,
        PollOutcome {
            error: err,
            ..PollOutcome::default()
        }
    );
    assert!(got.is_empty());
    // It stays stopped: no access to the rings, no doorbell.
    card.inject(0, &frame(80, 0));
    settle(&card);
    assert_eq!(rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got)).error, err);
    assert_eq!(rx.stats().cmpt_doorbells, 0);
    finish(&card, &dev, &mut delay, pool, rx);
}

#[test]
fn no_replacement_page_drops_the_frame_and_keeps_the_ring() {
    let card = testutil::card();
    // One page per slow call: the cache stays empty while every page is in use, so a
    // replacement has to come from the HAL.
    let (dev, mut delay, mut pool, mut rx) = started(&card, 1);
    let db = dev.doorbells();
    let mut os: Vec<DmaPage> = Vec::new();
    card.inject(0, &frame(90, 1));
    card.inject(0, &frame(91, 2));
    settle(&card);
    card.faults().fail_next_page_allocs(1);
    let mut sink = |f: RxFrame<DmaPage>, _: &mut Pool<'_>| {
        os.push(f.page);
        Handled::ToOs
    };
    let out = rx.poll(64, &db, &mut pool, &mut sink);
    assert_eq!(out.done, 2);
    assert_eq!(rx.stats().rx_no_page, 1);
    assert_eq!(rx.stats().to_os, 1);
    assert_eq!(os.len(), 1);
    assert_eq!(os[0].bytes()[256..256 + 91], frame(91, 2)[..]);
    // 62 posted pages + 1 that went to the OS: a page from the pool took its slot, and the
    // spare the second frame needed before it was handed over stays for the next frame whose
    // page leaves: 62 pages in slots and the spare.
    assert_eq!(rx.pages_in_ring(), 63);
    let counts = pool
        .page_counts(rx.pages_in_ring(), 0, 0, rx.stats().to_os)
        .unwrap();
    assert_eq!(counts.with_os, 1);
    for p in os {
        pool.return_from_os(p, 91);
    }
    finish(&card, &dev, &mut delay, pool, rx);
}

#[test]
fn completion_without_posted_descriptors_stops_the_queue() {
    let card = testutil::card();
    let (dev, mut delay, mut pool, mut rx) = queue(&card, 64, None);
    let db = dev.doorbells();
    // The pool cannot get a page: the ring starts with nothing posted.
    card.faults().fail_next_page_allocs(1);
    rx.start(&dev, &mut delay, &mut pool).unwrap();
    assert_eq!(rx.posted(), 0);
    // A device that reports a completion anyway (written here by hand: entry 0 with the
    // first lap's color, 100 bytes; status pidx 1).
    let mut e = CmptEntry::default();
    e.set_color(true);
    e.set_pkt_len(100);
    rx.cmpt.write_u64(0, e.to_word());
    let mut st = WbStatus::default();
    st.set_pidx(1);
    rx.cmpt.write_u64(8 * 63, st.to_word());
    card.faults().fail_next_page_allocs(1);
    let mut got = Vec::new();
    let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
    assert_eq!(out.error, Some(QueueError::C2hOverrun { needed: 1, posted: 0 }));
    assert!(got.is_empty());
    rx.teardown(&dev, &mut delay, &mut pool).0.unwrap();
    drop(pool);
    assert_eq!(card.dma_stats().live_pages, 0);
}

#[test]
fn completions_arriving_during_the_poll_are_caught_by_the_recheck() {
    let card = testutil::card();
    let (dev, mut delay, mut pool, mut rx) = started(&card, 64);
    let db = dev.doorbells();
    card.inject(0, &frame(100, 1));
    settle(&card);
    // While the first frame is being handled, two more arrive and are completed; the status
    // record read at the start of the poll does not show them (no trigger fired: not armed).
    let mut n = 0;
    let mut sink = |f: RxFrame<DmaPage>, _: &mut Pool<'_>| {
        if n == 0 {
            card.inject(0, &frame(101, 2));
            card.inject(0, &frame(102, 3));
            card.run_until_idle();
        }
        n += 1;
        Handled::Recycle(f)
    };
    let out = rx.poll(64, &db, &mut pool, &mut sink);
    // The poll caught up with what it knew and armed; the armed doorbell made the device
    // rewrite the status record, and the re-check saw the two new completions.
    assert_eq!((out.done, out.armed, out.more), (1, true, true));
    assert_eq!(rx.stats().rearm_rechecks, 1);
    let out = rx.poll(64, &db, &mut pool, &mut sink);
    assert_eq!((out.done, out.armed, out.more), (2, true, false));
    finish(&card, &dev, &mut delay, pool, rx);
}

#[test]
fn sixteen_byte_completions_and_multi_buffer_drop() {
    let card = onic_sim::Card::new({
        let mut c = onic_sim::CardConfig::default();
        c.max_frame_len = 9000;
        c
    });
    let dev = testutil::device(&card, 1);
    let mut delay = card.delay();
    let db = dev.doorbells();
    let cfg = RxQueueConfig {
        cmpt_entry: onic_hal::layout::desc::CmptEntrySize::B16,
        buf: crate::config::BufSizeIdx::new(3).unwrap(), // 1024 bytes
        ..small_cfg()
    };
    let mut pool: Pool<'_> = PagePool::new(
        card.dma(),
        PoolConfig::rx(Direction::FromDevice, cfg.buf.bytes()),
        None,
    );
    let slots: [Option<DmaPage>; 63] = [const { None }; 63];
    let opts = RxOptions {
        max_frame_len: 9000,
        ..RxOptions::for_queue(&cfg)
    };
    let mut rx = RxQueue::new(card.dma(), cfg, opts, slots).unwrap();
    rx.start(&dev, &mut delay, &mut pool).unwrap();
    let small = frame(1000, 3);
    card.inject(0, &frame(2500, 1)); // three buffers
    card.inject(0, &small);
    settle(&card);
    let mut got = Vec::new();
    let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
    assert_eq!(out.done, 2);
    assert_eq!(got, [small]);
    assert_eq!(rx.stats().rx_multi_buffer, 1);
    assert_eq!(rx.posted(), 62 - 4);
    finish(&card, &dev, &mut delay, pool, rx);
}

#[test]
fn restart_returns_every_page_and_counts_what_was_left() {
    let card = testutil::card();
    let opts = RxOptions {
        stall_polls: 4,
        ..RxOptions::for_queue(&small_cfg())
    };
    let (dev, mut delay, mut pool, mut rx) = queue(&card, 64, Some(opts));
    let db = dev.doorbells();
    rx.start(&dev, &mut delay, &mut pool).unwrap();
    // The status record stops moving; two frames land in the ring unreported.
    card.faults().freeze_cmpt_status(true);
    card.inject(0, &frame(80, 1));
    card.inject(0, &frame(81, 2));
    settle(&card);
    let mut got = Vec::new();
    for i in 1..=4u16 {
        let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
        if i < 4 {
            assert_eq!((out.done, out.armed, out.more, out.error), (0, true, true, None));
        } else {
            let e = QueueError::CmptUnreported { cidx: 0, polls: 4 };
            assert_eq!(
                out,
                PollOutcome {
                    error: Some(e),
                    ..PollOutcome::default()
                }
            );
        }
    }
    assert!(got.is_empty());
    card.faults().freeze_cmpt_status(false);
    let live = card.dma_stats().live_pages;
    rx.restart(&dev, &mut delay, &mut pool).unwrap();
    // The same pages went back to the pool and into the ring again: nothing new, nothing lost.
    assert_eq!(card.dma_stats().live_pages, live);
    assert_eq!((rx.posted(), rx.pages_in_ring()), (62, 62));
    let s = rx.stats();
    assert_eq!((s.rx_abandoned, s.restarts, s.queue_errors), (2, 1, 1));
    assert_eq!(
        pool.page_counts(rx.pages_in_ring(), 0, 0, 0).unwrap().total(),
        live as u64
    );
    let f = frame(90, 3);
    card.inject(0, &f);
    settle(&card);
    let out = rx.poll(64, &db, &mut pool, &mut copy_sink(&mut got));
    assert_eq!((out.done, out.armed, out.more, out.error), (1, true, false, None));
    assert_eq!(got, [f]);
    finish(&card, &dev, &mut delay, pool, rx);
}

/// Checks what a refill posts without walking the slots ([`RxQueue::unready`]): each posted
/// slot, and each unposted slot after the ones the next refill walks, holds a page its
/// descriptor in ring memory points at.
fn assert_descriptors_match(rx: &TestRx<'_>) {
    let len = rx.didx.len();
    let region = len - rx.posted;
    let walked = rx.desc.unready.min(region);
    for k in 0..len {
        let i = rx.didx.add(rx.head, k);
        let trusted = k < rx.posted || k - rx.posted >= walked;
        if !trusted {
            continue;
        }
        let page = rx.desc.slots[usize::from(i)]
            .as_ref()
            .unwrap_or_else(|| panic!("slot {i} ({k} from head) trusted without a page"));
        let word = rx.desc.region.read_u64(C2H_DESC_BYTES * usize::from(i));
        assert_eq!(
            Some(word),
            desc_word(page),
            "slot {i} ({k} from head): descriptor of another page"
        );
    }
}

#[test]
fn descriptors_follow_the_pages_through_reuse_replacement_starvation_and_restart() {
    let card = testutil::card();
    // One page per slow call, so that failed allocations starve the refill.
    let (dev, mut delay, mut pool, mut rx) = started(&card, 1);
    let db = dev.doorbells();
    assert_descriptors_match(&rx);
    let mut sent = Vec::new();
    let mut got: Vec<Vec<u8>> = Vec::new();
    let mut os: Vec<DmaPage> = Vec::new();
    let mut n = 0usize;
    // 12 rounds of 20 frames wrap the 63-entry ring almost four times.
    for round in 0..12u8 {
        for i in 0..20u8 {
            let f = frame(64 + usize::from(i), round.wrapping_mul(31).wrapping_add(i));
            card.inject(0, &f);
            sent.push(f);
        }
        settle(&card);
        if round % 4 == 2 {
            // The spare and the refill go without pages for a while.
            card.faults().fail_next_page_allocs(3);
        }
        {
            // Every third frame goes to the OS (the spare takes its slot), the others are
            // recycled (the page stays).
            let mut sink = |f: RxFrame<DmaPage>, _: &mut Pool<'_>| {
                got.push(f.data().to_vec());
                n += 1;
                if n.is_multiple_of(3) {
                    os.push(f.page);
                    Handled::ToOs
                } else {
                    Handled::Recycle(f)
                }
            };
            while rx.poll(64, &db, &mut pool, &mut sink).more {}
        }
        assert_descriptors_match(&rx);
        for p in os.drain(..) {
            pool.return_from_os(p, 128);
        }
        if round == 6 {
            rx.restart(&dev, &mut delay, &mut pool).unwrap();
            assert_descriptors_match(&rx);
        }
    }
    // Every frame the queue delivered is one that was sent, in order and intact: the device
    // wrote each into the page of the slot the queue took it from.
    let s = rx.stats();
    assert!(
        s.rx_no_page > 0 && s.refill_alloc_failures > 0,
        "the pool ran dry"
    );
    // The rest were dropped for lack of a spare page, or by the device for lack of posted
    // descriptors while the refill starved.
    let no_desc = card.stats().c2h_no_desc_dropped;
    assert_eq!(got.len() as u64 + s.rx_no_page + no_desc, sent.len() as u64);
    let mut rest = sent.iter();
    for g in &got {
        assert!(
            rest.any(|f| f == g),
            "a delivered frame that was not sent, or out of order"
        );
    }
    finish(&card, &dev, &mut delay, pool, rx);
}

type PlacedRx<'c> = RxQueue<onic_sim::SimDma<'c>, Placed, [Option<Placed>; 63]>;
type Placing<'c> = testutil::Placing<Pool<'c>>;

/// Every posted slot's descriptor points RX_HEADROOM bytes into the page the slot holds, at
/// the address the page claims; the census holds.
fn assert_posted_pages_match(rx: &PlacedRx<'_>, p: &Placing<'_>, with_os: u64) {
    for k in 0..rx.posted {
        let i = usize::from(rx.didx.add(rx.head, k));
        let page = rx.desc.slots[i].as_ref().expect("a posted slot holds a page");
        let word = rx.desc.region.read_u64(C2H_DESC_BYTES * i);
        let want = C2hDesc::new(DmaAddr::new(page.addr.get() + u64::from(RX_HEADROOM)));
        assert_eq!(word, want.to_word(), "slot {i}");
    }
    assert!(p.pool.page_counts(rx.pages_in_ring(), 0, 0, with_os).is_some());
}

/// A refill never posts a page whose bytes run past 2^64: the last page that fits is
/// posted, one a byte higher is released for good and counted, and the next refill fills
/// its slot with another page.
#[test]
fn a_page_that_wraps_past_the_address_space_is_never_posted() {
    let card = testutil::card();
    let (dev, mut delay) = (testutil::device(&card, 1), card.delay());
    let db = dev.doorbells();
    let last = 0u64.wrapping_sub(PAGE_SIZE as u64);
    let mut p = Placing::new(pool(&card, 64));
    p.lies = std::vec![(1, last), (2, last + 1), (3, u64::MAX)];
    let cfg = small_cfg();
    let mut rx: PlacedRx<'_> =
        RxQueue::new(card.dma(), cfg, RxOptions::for_queue(&cfg), [const { None }; 63]).unwrap();
    rx.start(&dev, &mut delay, &mut p).unwrap();
    // Slots 0 and 1 posted (slot 1 at the last page that fits); the third page refused.
    assert_eq!((rx.posted(), rx.stats().refill_bad_pages), (2, 1));
    assert_eq!(p.released, [last + 1]);
    assert_posted_pages_match(&rx, &p, 0);
    let mut sink = |f: RxFrame<Placed>, _: &mut Placing<'_>| Handled::Recycle(f);
    rx.poll(64, &db, &mut p, &mut sink);
    assert_eq!((rx.posted(), rx.stats().refill_bad_pages), (2, 2));
    rx.poll(64, &db, &mut p, &mut sink);
    assert_eq!((rx.posted(), rx.stats().refill_bad_pages), (62, 2));
    assert_eq!(p.released, [last + 1, u64::MAX]);
    assert_eq!(rx.stats().refill_alloc_failures, 0);
    assert_posted_pages_match(&rx, &p, 0);
    rx.teardown(&dev, &mut delay, &mut p).0.unwrap();
    drop(p);
    assert_eq!(card.dma_stats().live_pages, 0);
    assert_eq!(card.violations(), []);
}

/// A page that takes a received page's place (from the pool, as the frame went to the OS)
/// and wraps past 2^64 is not posted either: it waits in its slot at the back of the
/// unposted ones, and the refill that reaches the slot releases it.
#[test]
fn a_replacement_page_that_wraps_is_released_by_the_refill() {
    let card = testutil::card();
    let (dev, mut delay) = (testutil::device(&card, 1), card.delay());
    let db = dev.doorbells();
    let mut p = Placing::new(pool(&card, 64));
    let cfg = small_cfg();
    let opts = RxOptions {
        refill_batch: 1,
        ..RxOptions::for_queue(&cfg)
    };
    let mut rx: PlacedRx<'_> = RxQueue::new(card.dma(), cfg, opts, [const { None }; 63]).unwrap();
    rx.start(&dev, &mut delay, &mut p).unwrap();
    assert_eq!((p.allocs, rx.posted()), (62, 62));
    // The spare is allocation 62, the first frame's replacement 63.
    let bad = u64::MAX - 100;
    p.lies.push((63, bad));
    let mut os = Vec::new();
    let mut to_os = |f: RxFrame<Placed>, _: &mut Placing<'_>| {
        os.push(f.page);
        Handled::ToOs
    };
    card.inject(0, &frame(80, 1));
    settle(&card);
    assert_eq!(rx.poll(64, &db, &mut p, &mut to_os).done, 1);
    // The refill posted the empty slot ahead of it; the bad page is not posted.
    assert_eq!((rx.posted(), rx.stats().refill_bad_pages), (62, 0));
    assert_posted_pages_match(&rx, &p, 1);
    let mut recycle = |f: RxFrame<Placed>, _: &mut Placing<'_>| Handled::Recycle(f);
    card.inject(0, &frame(80, 2));
    settle(&card);
    // This poll's refills reach the bad page's slot: released, and the slot filled again.
    assert_eq!(rx.poll(64, &db, &mut p, &mut recycle).done, 1);
    assert_eq!((rx.posted(), rx.stats().refill_bad_pages), (62, 1));
    assert_eq!(p.released, [bad]);
    assert_posted_pages_match(&rx, &p, 1);
    for page in os.drain(..) {
        p.pool.return_from_os(page.page, 128);
    }
    rx.teardown(&dev, &mut delay, &mut p).0.unwrap();
    drop(p);
    assert_eq!(card.dma_stats().live_pages, 0);
    assert_eq!(card.violations(), []);
}

/// A provider that takes its buffers in batches hears of each refill run with the number of
/// empty slots in it (not the run's length: a slot that kept its page needs none), is asked
/// for no more than that before the run's end, and hears of the end.
#[test]
fn a_batching_provider_is_told_each_refill_runs_empty_slots() {
    let card = testutil::card();
    let (dev, mut delay) = (testutil::device(&card, 1), card.delay());
    let db = dev.doorbells();
    let mut p = Placing::new(pool(&card, 64));
    p.refills = Some(Vec::new());
    let cfg = small_cfg();
    let mut rx: PlacedRx<'_> =
        RxQueue::new(card.dma(), cfg, RxOptions::for_queue(&cfg), [const { None }; 63]).unwrap();
    rx.start(&dev, &mut delay, &mut p).unwrap();
    // The start's refill: 62 empty slots, 62 pages.
    assert_eq!(p.refills.as_deref(), Some(&[[62, 62]][..]));
    // Eight frames recycled in their slots: the refill's run of seven starts at the one slot
    // the start left unposted (a ring holds one less than its slots), the only one that needs a
    // page; the other six kept theirs.
    inject_n(&card, 8, 1);
    settle(&card);
    let mut recycle = |f: RxFrame<Placed>, _: &mut Placing<'_>| Handled::Recycle(f);
    assert_eq!(rx.poll(64, &db, &mut p, &mut recycle).done, 8);
    assert_eq!(p.refills.as_deref(), Some(&[[62, 62], [1, 1]][..]));
    // Refills post an eighth of the ring at a time: seven again, the eighth waits.
    assert_eq!(rx.posted(), 61);
    rx.teardown(&dev, &mut delay, &mut p).0.unwrap();
    drop(p);
    assert_eq!(card.dma_stats().live_pages, 0);
    assert_eq!(card.violations(), []);
}

/// Injects `n` frames of seed `seed` and lets the model complete them (no time passes).
fn inject_n(card: &Card, n: u8, seed: u8) -> Vec<Vec<u8>> {
    let sent: Vec<Vec<u8>> = (0..n).map(|i| frame(80, seed.wrapping_add(i))).collect();
    for f in &sent {
        card.inject(0, f);
    }
    card.run_until_idle();
    sent
}

/// Advances the model's clock by `ns` and returns the interrupts it raised meanwhile.
fn interrupts_after(card: &Card, ns: u64) -> usize {
    card.advance_time(ns);
    card.run_until_idle();
    card.take_interrupts().len()
}

/// A running queue changes its timer and count indices only through the CMPT CIDX doorbell
/// that ends a poll (crate::moderation): a change made while completions wait unreported
/// leaves them under the old trigger, the next poll delivers them all and its doorbell hands
/// the queue the new entries; turning adaptive off puts the fixed setting back the same way.
/// No frame is lost and every page is accounted for.
#[test]
fn a_running_queue_changes_its_moderation_with_frames_in_flight() {
    let card = testutil::card();
    let (dev, mut delay, mut pool, mut rx) = started(&card, 64);
    let q0 = onic_hal::QueueId::new(0);
    card.take_interrupts();
    let mut got = Vec::new();
    let mut sent = Vec::new();

    // Adaptive on, queue 0 at the top level (20 us, 192): the context still holds the
    // reference (1 us, 64), so frames in flight now fire after 1 us.
    dev.set_rx_adaptive(true);
    let top = dev.set_rx_queue_level(q0, 4).unwrap();
    sent.extend(inject_n(&card, 5, 0));
    assert_eq!(interrupts_after(&card, 2_000), 1, "the old trigger: 1 us");
    let out = rx.poll(64, &dev.rx_doorbells(q0), &mut pool, &mut copy_sink(&mut got));
    assert_eq!((out.done, out.armed), (5, true));

    // From that doorbell on the queue waits 20 us. Frames in flight, unreported; the level
    // drops to 0 (1 us, 16) meanwhile: they stay under the 20 us timer until a poll.
    sent.extend(inject_n(&card, 5, 10));
    assert_eq!(interrupts_after(&card, 2_000), 0, "20 us have not passed");
    let low = dev.set_rx_queue_level(q0, 0).unwrap();
    assert_eq!((top.usecs(), low.usecs(), low.frames()), (20, 1, 16));
    assert_eq!(interrupts_after(&card, 5_000), 0, "still the 20 us timer");
    assert_eq!(interrupts_after(&card, 15_000), 1, "the 20 us timer fires");
    let out = rx.poll(64, &dev.rx_doorbells(q0), &mut pool, &mut copy_sink(&mut got));
    assert_eq!((out.done, out.armed), (5, true));

    // Level 0 from that doorbell: 16 completions fire at once, no time passing.
    sent.extend(inject_n(&card, 16, 20));
    assert_eq!(interrupts_after(&card, 0), 1, "the count of 16");
    let out = rx.poll(64, &dev.rx_doorbells(q0), &mut pool, &mut copy_sink(&mut got));
    assert_eq!(out.done, 16);

    // Adaptive off: back on the fixed setting, here the longest timer with a count of 192.
    dev.set_rx_moderation(RxModeration::for_request(20, 192).unwrap());
    assert_eq!(
        dev.set_rx_queue_level(q0, 2),
        Ok(RxModeration::adaptive(2).unwrap())
    );
    dev.set_rx_adaptive(false);
    assert_eq!(
        dev.set_rx_queue_level(q0, 0),
        Err(ModerationError::NotAdaptive { qid: 0 }),
        "a late decision does not land"
    );
    assert_eq!(
        dev.rx_queue_moderation(q0),
        Ok(QueueModeration::Fixed(
            RxModeration::for_request(20, 192).unwrap()
        ))
    );
    let out = rx.poll(64, &dev.rx_doorbells(q0), &mut pool, &mut copy_sink(&mut got));
    assert_eq!(out.done, 0);
    sent.extend(inject_n(&card, 16, 40));
    assert_eq!(
        interrupts_after(&card, 2_000),
        0,
        "16 completions and 2 us: below both"
    );
    assert_eq!(interrupts_after(&card, 18_000), 1, "the fixed 20 us timer");
    let out = rx.poll(64, &dev.rx_doorbells(q0), &mut pool, &mut copy_sink(&mut got));
    assert_eq!(out.done, 16);
    assert_eq!(got, sent, "every frame, in order");
    assert_eq!(
        dev.rx_queue_moderation(onic_hal::QueueId::new(1)),
        Err(ModerationError::Queue { qid: 1, queues: 1 })
    );
    let counts = pool.page_counts(rx.pages_in_ring(), 0, 0, 0).unwrap();
    assert_eq!(counts.total(), card.dma_stats().live_pages as u64);
    finish(&card, &dev, &mut delay, pool, rx);
}
