//! AF_XDP zero copy through the port over the model: queue 1 of a port switches to the UMEM of a
//! socket bound to it while queue 0 keeps running; redirected frames reach the socket's RX ring
//! without a copy, passed ones reach the stack as copies, XDP_TX and the application's TX frames
//! leave the card byte for byte, and after each step every chunk of the UMEM is in exactly one
//! place. Switching back and unbinding leave no page of the model behind.

use onic_core::queue::source::SourceKind;
use onic_core::xdp::{XdpAction, XdpBuff};
use onic_core::RingSizeIdx;
use onic_embed::model::{CardHost, ModelHost, XskCensus, XskConfig, XskError};
use onic_embed::port::{PortConfig, PortError, SoloPort, TxClean, TxLock, XskRefusal, RSS_INDIR_SIZE};
use onic_sim::{Card, CardConfig, Wire};

type Prog = Box<dyn FnMut(&mut XdpBuff<'_>) -> XdpAction>;
type Host<'c> = CardHost<'c, Prog>;

const XSK_Q: u16 = 1;

fn config() -> PortConfig {
    PortConfig {
        func: 0,
        max_queues: 2,
        queues: 2,
        tx_ring: RingSizeIdx::new(1).unwrap(),
        rx_ring: RingSizeIdx::new(1).unwrap(),
        rs_fec: true,
    }
}

/// A frame of `len` bytes whose byte 20 says what the program does with it, bytes 21..25 carry
/// `tag`.
fn frame(kind: u8, tag: u32, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len)
        .map(|i| (i as u32).wrapping_mul(13).wrapping_add(tag) as u8)
        .collect();
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[20] = kind;
    f[21..25].copy_from_slice(&tag.to_le_bytes());
    f
}

fn program() -> Prog {
    Box::new(|x: &mut XdpBuff<'_>| match x.data()[20] {
        0 => x.redirect(u32::from(XSK_Q)),
        1 => XdpAction::Pass,
        2 => XdpAction::Drop,
        _ => XdpAction::Tx,
    })
}

fn settle(card: &Card, port: &mut SoloPort<Host<'_>>, prog: Option<u16>) {
    for _ in 0..20 {
        card.run_until_idle();
        card.advance_time(10_000);
        card.run_until_idle();
        let mut busy = false;
        for q in 0..2 {
            let r = port.poll(q, 64, (), prog);
            busy |= r.done > 0 || r.tx_pending;
            busy |= port.queue::<TxLock, _>(q, |p, t| p.tx_clean(t, 64)).in_flight > 0;
        }
        if !busy {
            return;
        }
    }
    panic!("the datapath did not settle");
}

/// The UMEM census of the socket on queue 1 against the port's holdings, checked.
fn census(host: &Host<'_>, port: &mut SoloPort<Host<'_>>) -> XskCensus {
    let h = port.xsk_holdings().unwrap();
    let mine = h.iter().find(|h| h.qid == XSK_Q);
    host.with_xsk(XSK_Q, |s| s.census_strict(mine))
        .unwrap()
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn a_queue_switches_to_umem_frames_and_back_with_every_chunk_accounted() {
    let mut cc = CardConfig::default();
    cc.wire = Wire::Open;
    let card = Card::new(cc);
    let host: Host<'_> = ModelHost::new(&card);
    let mut port = SoloPort::new(host.regs(0), host.delay(), host.clone(), config()).unwrap();
    port.open().unwrap();
    let table = [u32::from(XSK_Q); RSS_INDIR_SIZE];
    port.control(|p, c| p.rss_set(c, Some(&table), None)).unwrap();

    // No socket yet: the port refuses the switch.
    assert_eq!(
        port.set_queue_source(XSK_Q, SourceKind::Xsk),
        Err(PortError::Xsk(XskRefusal::NotBound))
    );
    let cfg = XskConfig {
        chunks: 256,
        chunk_size: 4096,
        headroom: 0,
        rings: [128, 32, 32, 32],
    };
    host.xsk_bind(XSK_Q, cfg).unwrap();
    assert_eq!(host.xsk_bind(XSK_Q, cfg), Err(XskError::Bound));
    host.with_xsk(XSK_Q, |s| s.app_fill(128)).unwrap();
    port.set_queue_source(XSK_Q, SourceKind::Xsk).unwrap();
    let c = census(&host, &mut port);
    assert!(
        c.driver_rx >= 62,
        "the RX ring took its frames from the fill ring: {c:?}"
    );
    assert_eq!(c.driver_rx + c.fill, 128);

    let pid = host.attach(program());
    receive(&card, &host, &mut port, pid);
    let x = xsk_counters(&mut port);
    let redirected: Vec<u64> = (0..24u64).filter(|i| i % 4 == 0).map(|i| 60 + 37 * i).collect();
    assert_eq!(
        (x.rx_packets, x.rx_bytes, x.tx_packets),
        (6, redirected.iter().sum(), 0),
        "the redirects into the UMEM are counted, with their bytes"
    );
    send(&card, &host, &mut port, pid);
    let sent: u64 = (0..10u64).map(|i| (30 + 90 * i).max(60)).sum();
    let x = xsk_counters(&mut port);
    assert_eq!(
        (x.tx_packets, x.tx_bytes),
        (10, sent),
        "the application's frames are counted as sent"
    );

    // Back to the page pool: every chunk returns; the socket can go; nothing is left.
    port.set_queue_source(XSK_Q, SourceKind::Pages).unwrap();
    assert_eq!(
        xsk_counters(&mut port),
        x,
        "the counters outlive the queue's switch back to pages"
    );
    let c = census(&host, &mut port);
    assert_eq!((c.driver_rx, c.driver_tx), (0, 0));
    assert_eq!(c.idle + c.fill + c.free, 256);
    host.with_xsk(XSK_Q, |s| s.app_fill(128));
    card.inject(0, &frame(1, 5000, 100));
    settle(&card, &mut port, Some(pid));
    let mut n = 0;
    host.drain_received(|_| n += 1);
    assert_eq!(n, 1, "queue 1 receives into pages again");
    let stats = host.xsk_unbind(XSK_Q).unwrap();
    assert_eq!(stats.rx_delivered, 6);
    assert_eq!((stats.tx_taken, stats.completed), (10, 10));
    port.remove();
    host.free_spare();
    assert_eq!(card.dma_stats().live_pages, 0);
    assert_eq!(card.violations(), []);
}

/// Queue 1's AF_XDP counters as published (what `ethtool -S` shows as `rx1_xsk_*`, `tx1_xsk_*`).
fn xsk_counters(port: &mut SoloPort<Host<'_>>) -> onic_core::stats::XskStats {
    port.control(|p, _| p.queue_counters(XSK_Q))
        .expect("queue 1 exists")
        .xsk
}

/// Frames of every verdict arrive on the queue running on the UMEM.
fn receive(card: &Card, host: &Host<'_>, port: &mut SoloPort<Host<'_>>, pid: u16) {
    // RX: 0 redirect (zero copy), 1 pass (a copy), 2 drop, 3 XDP_TX.
    let frames: Vec<Vec<u8>> = (0..24)
        .map(|i| frame((i % 4) as u8, i, 60 + 37 * i as usize))
        .collect();
    for f in &frames {
        card.inject(0, f);
    }
    settle(card, port, Some(pid));
    census(host, port);
    let got: Vec<Vec<u8>> = host
        .with_xsk(XSK_Q, |s| {
            let mut out = Vec::new();
            while let Some(d) = s.app_take_rx() {
                out.push(s.frame(d).unwrap());
                s.app_release(d.addr);
            }
            out
        })
        .unwrap();
    let want = |k: u8| frames.iter().filter(|f| f[20] == k).cloned().collect::<Vec<_>>();
    assert_eq!(got, want(0), "redirected frames reach the RX ring byte for byte");
    let mut passed = Vec::new();
    host.drain_received(|r| passed.push(r.data().to_vec()));
    assert_eq!(passed, want(1), "passed frames reach the stack as copies");
    assert_eq!(card.take_egress(0), want(3), "XDP_TX from the UMEM frames");
    census(host, port);
}

/// The application sends from its UMEM while the stack sends on queue 0.
fn send(card: &Card, host: &Host<'_>, port: &mut SoloPort<Host<'_>>, pid: u16) {
    // TX from the application; the stack's queue 0 keeps sending meanwhile.
    let out: Vec<Vec<u8>> = (0..10).map(|i| frame(9, 100 + i, 30 + 90 * i as usize)).collect();
    host.with_xsk(XSK_Q, |s| {
        for f in &out {
            assert!(s.app_send(f));
        }
    });
    let skb = host.packet(&frame(7, 999, 200)).unwrap();
    let r = port.queue::<TxLock, _>(0, |p, t| p.xmit(t, skb, &mut TxClean::default()));
    assert_eq!(r, onic_embed::port::XmitResult::Ok);
    port.queue::<TxLock, _>(0, |p, t| p.tx_flush(t));
    settle(card, port, Some(pid));
    let c = census(host, port);
    assert_eq!(c.comp, 10, "every sent frame completed");
    let mut egress = card.take_egress(0);
    let stack = egress
        .iter()
        .position(|f| f[20] == 7)
        .expect("the stack's frame went out");
    assert_eq!(egress.remove(stack), frame(7, 999, 200));
    let padded: Vec<Vec<u8>> = out
        .iter()
        .map(|f| {
            let mut p = f.clone();
            p.resize(f.len().max(60), 0);
            p
        })
        .collect();
    assert_eq!(
        egress, padded,
        "the application's frames, short ones padded to 60"
    );
    host.with_xsk(XSK_Q, |s| s.app_reap());
}

/// A queue switched to a socket that went away while the port was down opens on its page pool.
#[test]
fn a_queue_whose_socket_went_away_while_down_opens_on_pages() {
    let mut cc = CardConfig::default();
    cc.wire = Wire::Open;
    let card = Card::new(cc);
    let host: Host<'_> = ModelHost::new(&card);
    let mut port = SoloPort::new(host.regs(0), host.delay(), host.clone(), config()).unwrap();
    port.open().unwrap();
    let cfg = XskConfig {
        chunks: 256,
        chunk_size: 4096,
        headroom: 0,
        rings: [128, 32, 32, 32],
    };
    host.xsk_bind(XSK_Q, cfg).unwrap();
    host.with_xsk(XSK_Q, |s| s.app_fill(128));
    port.set_queue_source(XSK_Q, SourceKind::Xsk).unwrap();
    assert!(
        matches!(host.xsk_unbind(XSK_Q), Err(XskError::InUse { .. })),
        "the driver holds chunks"
    );
    port.stop().unwrap();
    host.xsk_unbind(XSK_Q).unwrap();
    port.open().unwrap();
    let source = port.control(|p, c| p.queue_source(c, XSK_Q)).unwrap();
    assert_eq!(source, SourceKind::Pages);
    assert!(port.xsk_holdings().unwrap().is_empty());
    port.remove();
    host.free_spare();
    assert_eq!(card.dma_stats().live_pages, 0);
}

/// The chunk sizes AF_XDP takes on 4 KiB pages, 2048 and 4096, are the only ones a socket binds
/// with; a 2 KiB chunk whose headroom leaves no room for the RX headroom and a buffer that holds
/// a 1514-byte frame binds (AF_XDP takes it) but the port refuses to run a queue on it.
#[test]
fn chunk_sizes_and_headrooms_that_cannot_work_are_refused() {
    let card = Card::new(CardConfig::default());
    let host: Host<'_> = ModelHost::new(&card);
    let with = |chunk_size, headroom| XskConfig {
        chunks: 256,
        chunk_size,
        headroom,
        rings: [128, 32, 32, 32],
    };
    for size in [3000, 1024, 8192, 0, 2047, u32::MAX] {
        assert_eq!(
            host.xsk_bind(XSK_Q, with(size, 0)),
            Err(XskError::ChunkSize(size)),
            "chunks of {size} bytes"
        );
    }
    // No room for a frame at all: refused at bind time.
    for headroom in [2048 - 256, 4000] {
        assert_eq!(
            host.xsk_bind(XSK_Q, with(2048, headroom)),
            Err(XskError::Headroom(headroom))
        );
    }
    assert_eq!(card.dma_stats().live_pages, 0, "a refused bind keeps no page");

    let mut port = SoloPort::new(host.regs(0), host.delay(), host.clone(), config()).unwrap();
    port.open().unwrap();
    // DPDK's and libxdp's 256 bytes of headroom in a 2 KiB chunk: 1792 bytes of room, where the
    // RX headroom and a 1792-byte buffer need 2048. The queue stays on its page pool.
    host.xsk_bind(XSK_Q, with(2048, 256)).unwrap();
    host.with_xsk(XSK_Q, |s| s.app_fill(128));
    assert_eq!(
        port.set_queue_source(XSK_Q, SourceKind::Xsk),
        Err(PortError::Xsk(XskRefusal::ChunkTooSmall {
            room: 1792,
            need: 2048
        }))
    );
    assert_eq!(
        port.control(|p, c| p.queue_source(c, XSK_Q)).unwrap(),
        SourceKind::Pages
    );
    host.xsk_unbind(XSK_Q).unwrap();
    // Without headroom the 2 KiB chunk runs.
    host.xsk_bind(XSK_Q, with(2048, 0)).unwrap();
    host.with_xsk(XSK_Q, |s| s.app_fill(128));
    port.set_queue_source(XSK_Q, SourceKind::Xsk).unwrap();
    port.set_queue_source(XSK_Q, SourceKind::Pages).unwrap();
    host.xsk_unbind(XSK_Q).unwrap();
    port.remove();
    host.free_spare();
    assert_eq!(card.dma_stats().live_pages, 0);
}

/// 2 KiB chunks, each in a model page of its own: frames of 60 to 1514 bytes received into the
/// UMEM, sent back by XDP_TX and by the application from their chunks, the application's own
/// frames, and frames of 3000 bytes from a shell that passes them (each spans two 1792-byte
/// buffers; the port drops it): no byte of any page past its chunk changes, every frame arrives
/// byte for byte.
#[test]
fn the_device_and_the_driver_never_write_past_a_2k_chunk() {
    let mut cc = CardConfig::default();
    cc.wire = Wire::Open;
    cc.max_frame_len = 9000;
    let card = Card::new(cc);
    let host: Host<'_> = ModelHost::new(&card);
    let mut port = SoloPort::new(host.regs(0), host.delay(), host.clone(), config()).unwrap();
    port.open().unwrap();
    let table = [u32::from(XSK_Q); RSS_INDIR_SIZE];
    port.control(|p, c| p.rss_set(c, Some(&table), None)).unwrap();
    let cfg = XskConfig {
        chunks: 256,
        chunk_size: 2048,
        headroom: 0,
        rings: [128, 64, 64, 64],
    };
    host.xsk_bind(XSK_Q, cfg).unwrap();
    host.with_xsk(XSK_Q, |s| s.app_fill(128));
    port.set_queue_source(XSK_Q, SourceKind::Xsk).unwrap();
    let pid = host.attach(program());
    let lens = [60, 61, 64, 128, 511, 1000, 1500, 1513, 1514];
    let mut redirected = Vec::new();
    for (i, &len) in lens.iter().cycle().take(40).enumerate() {
        // Redirects into the socket and XDP_TX, in turn.
        let kind = if i % 2 == 0 { 0 } else { 3 };
        let f = frame(kind, i as u32, len);
        if kind == 0 {
            redirected.push(f.clone());
        }
        card.inject(0, &f);
        if i % 8 == 7 {
            settle(&card, &mut port, Some(pid));
        }
    }
    settle(&card, &mut port, Some(pid));
    let txed: Vec<Vec<u8>> = card.take_egress(0);
    assert_eq!(txed.len(), 20, "every XDP_TX frame left");
    assert_eq!(
        host.xsk_overruns(XSK_Q),
        Some(0),
        "the chunks back with the application or on the free list: nothing past their end"
    );
    // The application reads each frame and sends it back from its chunk, then sends frames of
    // its own up to a whole chunk.
    let got = host
        .with_xsk(XSK_Q, |s| {
            let mut got = Vec::new();
            while let Some(d) = s.app_take_rx() {
                got.push(s.frame(d).unwrap());
                s.app_tx(d).unwrap();
            }
            for len in [60, 1000, 1514] {
                assert!(s.app_send(&frame(9, len as u32, len)), "a frame of {len} bytes");
            }
            assert!(!s.app_send(&[0; 2049]), "a frame longer than the chunk");
            let idle = *s.idle.last().unwrap();
            assert_eq!(
                s.with_chunk(idle, |b| b.len()),
                Ok(2048),
                "the application's chunk"
            );
            got
        })
        .unwrap();
    assert_eq!(got, redirected, "every redirected frame, byte for byte");
    settle(&card, &mut port, Some(pid));
    let out = card.take_egress(0);
    assert_eq!(out.len(), 23);
    assert_eq!(out[..20], redirected[..], "sent back from their chunks");
    for (f, len) in out[20..].iter().zip([60, 1000, 1514]) {
        assert_eq!(f, &frame(9, len as u32, len));
    }
    // Frames the port does not take: each fills one 1792-byte buffer and the start of the next.
    for i in 0..4 {
        card.inject(0, &frame(0, 1000 + i, 3000));
    }
    settle(&card, &mut port, Some(pid));
    assert!(card.take_egress(0).is_empty());
    assert_eq!(host.with_xsk(XSK_Q, |s| s.rx.len()), Some(0), "nothing delivered");
    host.with_xsk(XSK_Q, |s| s.app_reap());
    census(&host, &mut port);
    // Every chunk back from the driver: each page is looked at.
    port.set_queue_source(XSK_Q, SourceKind::Pages).unwrap();
    assert_eq!(
        host.xsk_overruns(XSK_Q),
        Some(0),
        "no page changed past its chunk"
    );
    host.xsk_unbind(XSK_Q).unwrap();
    port.remove();
    host.free_spare();
    assert_eq!(card.dma_stats().live_pages, 0);
    assert_eq!(card.violations(), []);
}
