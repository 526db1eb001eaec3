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
