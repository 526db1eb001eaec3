//! Two ports of the model card driven through the door the kernel module uses (`Port`, here as
//! `SoloPort` over `ModelHost`): frames cross the cable both ways through the stack's TX rings,
//! an XDP program sends some back (XDP_TX) and redirects others out of the other port's
//! redirect-in ring, and after teardown every page is home and the model saw no violation.

use onic_core::xdp::{XdpAction, XdpBuff};
use onic_core::{BufSizeIdx, RingSizeIdx};
use onic_embed::model::{CardHost, CensusError, ModelHost, PoolCensus};
use onic_embed::port::{
    PortConfig, PortError, QueueTuning, RxBufSizes, SoloPort, TxClean, TxLock, XmitLock, XmitResult,
};
use onic_sim::{Card, CardConfig};

type Prog = Box<dyn FnMut(&mut XdpBuff<'_>) -> XdpAction>;
type Host<'c> = CardHost<'c, Prog>;

fn config(func: u8) -> PortConfig {
    PortConfig {
        func,
        max_queues: 2,
        queues: 2,
        tx_ring: RingSizeIdx::new(1).unwrap(),
        rx_ring: RingSizeIdx::new(1).unwrap(),
        rs_fec: true,
    }
}

/// An IPv4/UDP frame of 100 bytes carrying `n` in its source port and its last byte.
fn frame(n: u8) -> Vec<u8> {
    let mut f = vec![0u8; 100];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[23] = 17;
    f[34..36].copy_from_slice(&[0x10, n]);
    f[99] = n;
    f
}

/// Sends `frames` from queue 0 of `port`, then rings the doorbell.
fn send(port: &mut SoloPort<Host<'_>>, host: &Host<'_>, frames: &[Vec<u8>]) {
    for f in frames {
        let skb = host.packet(f).unwrap();
        let mut done = TxClean::default();
        let r = port.queue::<TxLock, _>(0, |p, t| p.xmit(t, skb, &mut done));
        assert_eq!(r, XmitResult::Ok);
    }
    port.queue::<TxLock, _>(0, |p, t| p.tx_flush(t));
}

/// Lets the card work and polls every queue of both ports until nothing moves; the TX rings
/// are reclaimed as the module's NAPI poll does. Returns the frames the program redirected.
fn run(card: &Card, ports: &mut [&mut SoloPort<Host<'_>>; 2], progs: [Option<u16>; 2]) {
    for _ in 0..50 {
        card.run_until_idle();
        card.advance_time(10_000);
        card.run_until_idle();
        let mut busy = false;
        for (p, port) in ports.iter_mut().enumerate() {
            for q in 0..2 {
                let r = port.poll(q, 64, (), progs[p]);
                busy |= r.done > 0 || r.tx_pending;
                let c = port.queue::<TxLock, _>(q, |p, t| p.tx_clean(t, 64));
                busy |= c.in_flight > 0;
                let x = port.queue::<XmitLock, _>(q, |p, t| p.xmit_clean(t));
                busy |= x.in_flight > 0;
            }
        }
        if !busy {
            return;
        }
    }
    panic!("the datapath did not settle");
}

/// The page census of both ports' pools, checked; every pool accounts for all its pages.
fn census(host: &Host<'_>, a: &mut SoloPort<Host<'_>>, b: &mut SoloPort<Host<'_>>) -> Vec<PoolCensus> {
    let mut holdings = a.holdings().unwrap();
    holdings.extend(b.holdings().unwrap());
    assert_eq!(holdings.len(), 4, "two running queue indices per port");
    host.check_census(&holdings).unwrap_or_else(|e| panic!("{e}"))
}

/// Both functions of `card` as opened ports, with their hosts.
fn two_ports(card: &Card) -> (Host<'_>, Host<'_>, SoloPort<Host<'_>>, SoloPort<Host<'_>>) {
    let h0: Host<'_> = ModelHost::new(card);
    let h1 = h0.for_port(1);
    let mut a = SoloPort::new(h0.regs(0), h0.delay(), h0.clone(), config(0)).unwrap();
    let mut b = SoloPort::new(h1.regs(1), h1.delay(), h1.clone(), config(1)).unwrap();
    a.open().unwrap();
    b.open().unwrap();
    (h0, h1, a, b)
}

/// Stops and removes both ports, gives the pools' spare pages back, and checks that no page of
/// the card's memory is left.
fn teardown(card: &Card, h0: &Host<'_>, mut a: SoloPort<Host<'_>>, mut b: SoloPort<Host<'_>>) {
    a.stop().unwrap();
    b.stop().unwrap();
    a.remove();
    b.remove();
    h0.free_spare();
    assert_eq!(card.dma_stats().live_pages, 0);
}

#[test]
fn frames_cross_the_cable_through_the_ports_the_module_drives() {
    let card = Card::new(CardConfig::default());
    let (h0, h1, mut a, mut b) = two_ports(&card);

    // Plain traffic a -> b: every frame reaches b's stack, byte for byte.
    let sent: Vec<Vec<u8>> = (0..10).map(frame).collect();
    send(&mut a, &h0, &sent);
    run(&card, &mut [&mut a, &mut b], [None, None]);
    let mut data = Vec::new();
    let n = h1.drain_received(|r| {
        assert!(r.port == 1 && r.hash.is_some());
        data.push(r.data().to_vec());
    });
    assert_eq!(n, 10);
    data.sort_by_key(|d| d[99]);
    assert_eq!(data, sent);
    assert_eq!(b.port().link_stats().rx_packets, 10);
    assert_eq!(a.port().link_stats().tx_packets, 10);

    // On b, a program: even frames go back out of b (XDP_TX, arriving at a), odd frames are
    // redirected (to a's redirect-in ring, arriving at b again, then passed), frame 9 dropped.
    let mut seen = [0u8; 10];
    let prog: Prog = Box::new(move |x: &mut XdpBuff<'_>| {
        let n = x.data()[99];
        seen[usize::from(n)] += 1;
        match (n, seen[usize::from(n)]) {
            (9, _) => XdpAction::Drop,
            (_, 2..) => XdpAction::Pass,
            (n, _) if n % 2 == 0 => XdpAction::Tx,
            _ => x.redirect(7),
        }
    });
    let pid = h1.attach(prog);
    send(&mut a, &h0, &sent);
    for round in 0..4 {
        run(&card, &mut [&mut a, &mut b], [None, Some(pid)]);
        // Every page somewhere, with frames still held by the stacks and redirects pending.
        let census = census(&h0, &mut a, &mut b);
        if round == 0 {
            assert_eq!(census.iter().map(|c| c.redirected).sum::<u64>(), 4);
        }
        for r in h1.take_redirects() {
            assert_eq!((r.from, r.target), (1, Some(7)));
            let n = a.queue::<XmitLock, _>(0, |p, t| p.xdp_xmit(t, &[r.frame], true));
            assert_eq!(n, Ok(1));
        }
    }
    let mut even = Vec::new();
    h0.drain_received(|r| even.push(r.data()[99]));
    even.sort_unstable();
    assert_eq!(even, [0, 2, 4, 6, 8], "XDP_TX frames cross back to a");
    let mut odd = Vec::new();
    h1.drain_received(|r| odd.push(r.data()[99]));
    odd.sort_unstable();
    assert_eq!(odd, [1, 3, 5, 7], "redirected frames come round once and pass");

    // Teardown: every page home, nothing leaked, no violation.
    a.stop().unwrap();
    b.stop().unwrap();
    h0.free_spare();
    assert_eq!(h0.census(), Default::default());
    a.remove();
    b.remove();
    let s = card.dma_stats();
    assert_eq!((s.live_pages, s.live_regions), (0, 0));
    assert_eq!(card.violations(), []);
}

#[test]
fn the_census_finds_a_frame_the_stack_holds_that_the_port_did_not_hand_over() {
    let card = Card::new(CardConfig::default());
    let (h0, h1, mut a, mut b) = two_ports(&card);
    send(&mut a, &h0, &[frame(1)]);
    run(&card, &mut [&mut a, &mut b], [None, None]);
    let mut holdings = a.holdings().unwrap();
    holdings.extend(b.holdings().unwrap());
    assert!(h0.check_census(&holdings).is_ok());
    // The port's count of frames handed over, off by one: the census sees the difference.
    let (_, h) = holdings.iter_mut().find(|(_, h)| h.to_os == 1).unwrap();
    h.to_os = 2;
    assert!(matches!(
        h0.check_census(&holdings),
        Err(CensusError::Stack {
            to_os: 2,
            held: 1,
            ..
        })
    ));
    h1.drain_received(|_| ());
    teardown(&card, &h0, a, b);
}

#[test]
fn a_stack_that_holds_its_frames_keeps_their_pages_until_it_gives_them_back() {
    let card = Card::new(CardConfig::default());
    let (h0, h1, mut a, mut b) = two_ports(&card);
    // Queues are built with the tuning of the last `open`: refused while up.
    let buf = BufSizeIdx::new(3).unwrap();
    let tuning = QueueTuning {
        bufs: RxBufSizes::all(buf),
        ..QueueTuning::default()
    };
    assert_eq!(b.set_tuning(tuning), Err(PortError::Busy));
    b.stop().unwrap();
    b.set_tuning(tuning).unwrap();
    h1.set_pool_config(Some(1), tuning.bufs);
    b.open().unwrap();
    assert!(b.inspect_all().iter().all(|v| v.pair.rx.config().buf == buf));
    let frames: Vec<_> = (0..6).map(frame).collect();
    send(&mut a, &h0, &frames);
    run(&card, &mut [&mut a, &mut b], [None, None]);
    let mut seen = Vec::new();
    h1.look_received(|r| seen.push(r.data()[99]));
    seen.sort_unstable();
    assert_eq!(seen, [0, 1, 2, 3, 4, 5]);
    // Looking gives nothing back: the stack holds all six pages, the census says so.
    let held = |c: &[PoolCensus]| c.iter().map(|p| p.received).sum::<u64>();
    assert_eq!(held(&census(&h0, &mut a, &mut b)), 6);
    assert_eq!(h1.release_received(2), 2);
    assert_eq!(held(&census(&h0, &mut a, &mut b)), 4);
    let to_os: u64 = b.inspect_all().iter().map(|v| v.pair.rx.stats().to_os).sum();
    assert_eq!(to_os, 6);
    assert_eq!(h1.release_received(usize::MAX), 4);
    assert_eq!(held(&census(&h0, &mut a, &mut b)), 0);
    teardown(&card, &h0, a, b);
}

/// An IPv4/UDP frame of `len` bytes with `n` in its source port and its last byte.
fn long_frame(n: u8, len: usize) -> Vec<u8> {
    let mut f = frame(n);
    f.resize(len, 0);
    f[len - 1] = n;
    f
}

#[test]
fn each_queue_is_built_with_its_own_buffer_size_and_drops_what_does_not_fit_it() {
    let card = Card::new(CardConfig::default());
    let (h0, h1, mut a, mut b) = two_ports(&card);
    // Queue 0 with buffers of 3520 bytes, queue 1 with buffers of 512.
    let (big, small) = (BufSizeIdx::new(5).unwrap(), BufSizeIdx::new(2).unwrap());
    let bufs = RxBufSizes::cycle(&[big, small]).unwrap();
    b.stop().unwrap();
    b.set_tuning(QueueTuning {
        bufs,
        ..QueueTuning::default()
    })
    .unwrap();
    h1.set_pool_config(Some(1), bufs);
    b.open().unwrap();
    let built: Vec<u32> = b
        .inspect_all()
        .iter()
        .map(|v| v.pair.rx.config().buf.bytes())
        .collect();
    assert_eq!(built, [3520, 512]);
    // The MTU is bounded by the smallest buffer: a frame may arrive on any queue.
    let (_, max_mtu) = b.control(|p, t| p.mtu_range(t)).unwrap();
    assert_eq!(max_mtu, 512 - 14);
    // 600-byte frames of many flows: those RSS sends to queue 0 reach the stack, those on
    // queue 1 span two buffers and are dropped and counted.
    let frames: Vec<_> = (0..32).map(|n| long_frame(n, 600)).collect();
    send(&mut a, &h0, &frames);
    run(&card, &mut [&mut a, &mut b], [None, None]);
    let mut per_queue = [0u64; 2];
    h1.drain_received(|r| {
        assert_eq!(r.data().len(), 600);
        per_queue[usize::from(r.qid)] += 1;
    });
    let dropped: Vec<u64> = b
        .inspect_all()
        .iter()
        .map(|v| v.pair.rx.stats().rx_multi_buffer)
        .collect();
    assert_eq!(
        per_queue[1], 0,
        "no frame longer than queue 1's buffer reaches the stack"
    );
    assert_eq!(dropped[0], 0);
    assert!(per_queue[0] > 0 && dropped[1] > 0, "RSS used both queues");
    assert_eq!(per_queue[0] + dropped[1], 32);
    census(&h0, &mut a, &mut b);
    teardown(&card, &h0, a, b);
}

#[test]
fn a_restarted_queue_whose_pool_refuses_a_page_starts_empty_and_its_next_poll_fills_it() {
    let card = Card::new(CardConfig::default());
    let (h0, h1, mut a, mut b) = two_ports(&card);
    let usable = RingSizeIdx::new(1).unwrap().usable();
    let ring = |b: &mut SoloPort<Host<'_>>| {
        let v = b.inspect(1).unwrap();
        let s = v.pair.rx.stats();
        (v.pair.rx.posted(), s.refill_alloc_failures, s.restarts)
    };
    // A full ring: every usable descriptor but the one that tells full from empty.
    let full = ring(&mut b).0;
    assert_eq!(full, usable - 1);
    // The host refuses one page: the restarted ring takes none (a refill stops at the first
    // refusal), and no interrupt will come for an empty ring.
    h1.refuse_page_allocs(1);
    b.restart_queue(1).unwrap();
    assert_eq!(ring(&mut b), (0, 1, 1));
    // The next poll (as a host's housekeeping schedules for a ring it sees short) fills it.
    b.poll(1, 64, (), None);
    assert_eq!(ring(&mut b), (full, 1, 1));
    // Both queues receive again, and every page is accounted for.
    let frames: Vec<_> = (0..16).map(frame).collect();
    send(&mut a, &h0, &frames);
    run(&card, &mut [&mut a, &mut b], [None, None]);
    let mut per_queue = [0u32; 2];
    let n = h1.drain_received(|r| per_queue[usize::from(r.qid)] += 1);
    assert_eq!(n, 16);
    assert!(
        per_queue.iter().all(|&c| c > 0),
        "RSS used both queues: {per_queue:?}"
    );
    census(&h0, &mut a, &mut b);
    teardown(&card, &h0, a, b);
}

#[test]
fn a_target_with_no_room_left_fails_the_redirect_and_the_driver_counts_it() {
    let card = Card::new(CardConfig::default());
    let (h0, h1, mut a, mut b) = two_ports(&card);
    let prog = h1.attach(Box::new(|x: &mut XdpBuff<'_>| x.redirect(5)));
    h1.limit_target(5, 2);
    let frames: Vec<_> = (0..6).map(frame).collect();
    send(&mut a, &h0, &frames);
    run(&card, &mut [&mut a, &mut b], [None, Some(prog)]);
    let taken = h1.take_redirects();
    assert_eq!(taken.len(), 2);
    assert!(taken.iter().all(|r| r.target == Some(5)));
    let (ok, failed) = b
        .inspect_all()
        .iter()
        .map(|v| {
            (
                v.pair.stats().rx_xdp_redirect,
                v.pair.stats().rx_xdp_redirect_errors,
            )
        })
        .fold((0, 0), |(a, b), (c, d)| (a + c, b + d));
    assert_eq!((ok, failed), (2, 4));
    assert_eq!(
        census(&h0, &mut a, &mut b)
            .iter()
            .map(|p| p.redirected)
            .sum::<u64>(),
        2
    );
    for r in taken {
        h1.return_frame(r.frame);
    }
    teardown(&card, &h0, a, b);
}

/// `shut_down` says whether the function's release completed: it does on a sound card, and
/// with the QDMA's context engine wedged the FMAP clear never completes and the caller is told
/// so (where `remove` could only log it). The bring-up found the card's two CMACs.
#[test]
fn shut_down_reports_whether_the_function_was_released() {
    let card = Card::new(CardConfig::default());
    let (h0, _h1, mut a, mut b) = two_ports(&card);
    assert_eq!((a.port().cmacs(), b.port().cmacs()), (2, 2));
    a.stop().unwrap();
    b.stop().unwrap();
    b.shut_down().unwrap();
    card.faults().hold_context_commands(true);
    let wedged = a.shut_down();
    card.faults().hold_context_commands(false);
    assert!(
        matches!(wedged, Err(PortError::Core(onic_core::Error::ContextBusy { .. }))),
        "{wedged:?}"
    );
    h0.free_spare();
    assert_eq!(card.dma_stats().live_pages, 0);
}

/// `rss_set` says which parts it wrote, `rss_config` is the state the driver holds (the shell's
/// read-back agrees), and the key a change writes is the one the polls' hasher is published
/// with; a refused request writes and publishes nothing.
#[test]
fn an_rss_change_reports_what_it_wrote_and_publishes_the_new_key_to_the_polls() {
    use onic_core::device::rss_control::RssParts;
    use onic_core::rss::RssKey;
    use onic_embed::port::{RSS_INDIR_SIZE, RSS_KEY_SIZE};

    let card = Card::new(CardConfig::default());
    let (h0, _h1, mut a, b) = two_ports(&card);
    assert_eq!(a.published_key(), RssKey::DEFAULT);
    let table = [1u32; RSS_INDIR_SIZE];
    let wrote = a.control(|p, c| p.rss_set(c, Some(&table), None)).unwrap();
    assert_eq!(wrote, RssParts::TABLE);
    let key = RssKey::MICROSOFT;
    let wrote = a
        .control(|p, c| p.rss_set(c, None, Some(key.as_bytes())))
        .unwrap();
    assert_eq!(wrote, RssParts::KEY);
    assert_eq!(a.published_key(), key);
    let cfg = a.control(|p, c| p.rss_config(c)).unwrap();
    assert!(cfg.table().entries().iter().all(|&e| e == 1));
    assert_eq!(*cfg.key(), key);
    let (mut shell_table, mut shell_key) = ([0u32; RSS_INDIR_SIZE], [0u8; RSS_KEY_SIZE]);
    a.port().rss_get(Some(&mut shell_table), Some(&mut shell_key));
    assert_eq!((shell_table, shell_key), (table, *key.as_bytes()));

    let beyond = [2u32; RSS_INDIR_SIZE];
    assert!(a
        .control(|p, c| p.rss_set(c, Some(&beyond), Some(RssKey::DEFAULT.as_bytes())))
        .is_err());
    assert_eq!(a.control(|p, c| p.rss_config(c)).unwrap(), cfg);
    assert_eq!(a.published_key(), key);
    teardown(&card, &h0, a, b);
}
