//! Property test of AF_XDP zero copy through the port (`SoloPort` over `ModelHost`), the door
//! every host uses: queue 1 of a port switches between its page pool and the UMEM of a socket
//! bound to it at random while frames arrive, an XDP program chooses DROP, PASS, TX, REDIRECT
//! (into the socket) or ABORTED by the frame's byte 42, and the application fills, reads,
//! forwards (l2fwd), sends and reaps at random, and sometimes hands the driver garbage (fill
//! entries outside the UMEM or named twice, TX descriptors past their chunk, a corrupted producer
//! index; a chunk named in the TX ring while the driver holds it is spoilt for the rest of the
//! run, as the driver may send it after delivering it). After every step the UMEM census must hold: every chunk the application's (named once
//! by its idle list and rings), on the socket's free list, or held by the port's rings exactly as
//! the port counts them. Queue restarts and port stop/open come at random too. At the end the
//! queue goes back to its page pool, every chunk must be the application's or free, the socket
//! unbinds, the port goes and the model has no page left. Frames the application reads are
//! checked byte for byte against those injected. The UMEM's chunks are 4 KiB in one test and
//! 2 KiB (DPDK's AF_XDP default, 1792-byte C2H buffers) in the other; with 2 KiB chunks no byte
//! of a chunk's page past the chunk may change.
//!
//! `PROPTEST_CASES` sets the number of cases (default 24).

use std::collections::{HashMap, HashSet};

use onic_core::queue::source::SourceKind;
use onic_core::queue::xsk::XskDesc;
use onic_core::xdp::{XdpAction, XdpBuff};
use onic_core::RingSizeIdx;
use onic_embed::model::{CardHost, ModelHost, XskConfig, XskError};
use onic_embed::port::{PortConfig, PortError, SoloPort, TxLock, XskRefusal, RSS_INDIR_SIZE};
use onic_sim::{Card, CardConfig, Wire};
use proptest::prelude::*;

type Prog = Box<dyn FnMut(&mut XdpBuff<'_>) -> XdpAction>;
type Host<'c> = CardHost<'c, Prog>;

const Q: u16 = 1;

#[derive(Clone, Debug)]
enum Op {
    /// Frames of (verdict, length) at the port, then the model run until idle.
    Inject(Vec<(u8, usize)>),
    /// Polls both queues with this budget.
    Poll(u32),
    Fill(usize),
    /// The application reads up to `n` frames of its RX ring; with `fwd`, sends them back.
    ReadRx {
        n: usize,
        fwd: bool,
    },
    Reap,
    Send(Vec<usize>),
    /// The source of queue 1 switches (pages <-> UMEM).
    Switch,
    Restart,
    /// The port stops (every queue torn down) and opens again: queue 1 comes back on the UMEM.
    StopOpen,
    /// Garbage from the application: 0 a fill entry past the UMEM, 1 a fill entry naming a
    /// chunk already in the fill ring, 2 a TX descriptor past its chunk, 3 a TX descriptor of a
    /// chunk the driver holds, 4 an impossible fill producer index (then repaired).
    Bad(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => prop::collection::vec((0u8..5, 60usize..=1514), 1..30).prop_map(Op::Inject),
        3 => (1u32..80).prop_map(Op::Poll),
        2 => (0usize..100).prop_map(Op::Fill),
        2 => (0usize..40, any::<bool>()).prop_map(|(n, fwd)| Op::ReadRx { n, fwd }),
        1 => Just(Op::Reap),
        2 => prop::collection::vec(1usize..=1514, 1..16).prop_map(Op::Send),
        1 => Just(Op::Switch),
        1 => Just(Op::Restart),
        1 => Just(Op::StopOpen),
        1 => (0u8..5).prop_map(Op::Bad),
    ]
}

#[derive(Clone, Debug)]
struct Case {
    chunks: u32,
    chunk_size: u32,
    headroom: u16,
    ops: Vec<Op>,
}

/// A run with chunks of `chunk_size` bytes. 4 KiB chunks: without headroom and with up to 320
/// bytes of it they run on 3520-byte buffers, with 1900 bytes on 1792-byte ones, with 2100 the
/// port refuses them. 2 KiB chunks: without headroom they run on 1792-byte buffers, with 256
/// bytes (DPDK's and libxdp's default) the port refuses them.
fn case(chunk_size: u32) -> impl Strategy<Value = Case> {
    let headroom = if chunk_size == 2048 {
        prop_oneof![4 => Just(0u16), 1 => Just(256)].boxed()
    } else {
        prop_oneof![3 => Just(0u16), 1 => Just(128), 1 => Just(320), 1 => Just(1900), 1 => Just(2100)].boxed()
    };
    (80u32..400, headroom, prop::collection::vec(op(), 1..80)).prop_map(move |(chunks, headroom, ops)| Case {
        chunks,
        chunk_size,
        headroom,
        ops,
    })
}

/// An IPv4/UDP frame (the tag in its source port, so that RSS spreads frames over both
/// queues) whose byte 42 is the verdict, bytes 43..47 the tag; a short one is just bytes.
fn tagged(kind: u8, tag: u32, len: usize) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len)
        .map(|i| (i as u32).wrapping_mul(7).wrapping_add(tag) as u8)
        .collect();
    if len >= 47 {
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        f[14] = 0x45;
        f[20..22].copy_from_slice(&[0, 0]);
        f[23] = 17;
        f[34..36].copy_from_slice(&(tag as u16).to_be_bytes());
        f[42] = kind;
        f[43..47].copy_from_slice(&tag.to_le_bytes());
    }
    f
}

fn tag_of(f: &[u8]) -> u32 {
    u32::from_le_bytes(f[43..47].try_into().unwrap())
}

fn program() -> Prog {
    Box::new(|x: &mut XdpBuff<'_>| match x.data()[42] {
        0 => XdpAction::Drop,
        1 => XdpAction::Pass,
        2 => XdpAction::Tx,
        3 => x.redirect(u32::from(Q)),
        _ => XdpAction::Aborted,
    })
}

struct World<'c> {
    card: &'c Card,
    host: Host<'c>,
    port: SoloPort<Host<'c>>,
    prog: u16,
    injected: HashMap<u32, Vec<u8>>,
    next_tag: u32,
    xsk: bool,
    chunk_size: u32,
    headroom: u16,
    /// Garbage entries the application made (an upper bound of what the census may find).
    garbage: u32,
    /// Chunks the application put in its TX ring while the driver held them (`Bad(3)`).
    sent_unowned: HashSet<u64>,
}

impl World<'_> {
    fn census(&mut self) {
        let h = self.port.xsk_holdings().unwrap();
        let mine = h.iter().find(|h| h.qid == Q);
        assert_eq!(
            mine.is_some(),
            self.xsk,
            "the port runs queue 1 on the UMEM exactly while switched"
        );
        let r = self.host.with_xsk(Q, |s| s.census(mine)).unwrap();
        match r {
            Ok(c) => assert!(
                c.garbage <= self.garbage,
                "garbage the application did not make: {c:?}"
            ),
            Err(e) => panic!("{e}"),
        }
        let pools = self.port.holdings().unwrap();
        self.host.check_census(&pools).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            self.host.xsk_overruns(Q),
            Some(0),
            "a page written past its chunk"
        );
    }

    fn poll(&mut self, budget: u32) {
        for q in 0..2 {
            self.port.poll(q, budget, (), Some(self.prog));
            self.port.queue::<TxLock, _>(q, |p, t| p.tx_clean(t, budget));
        }
        self.host.drain_received(|r| {
            let tag = tag_of(r.data());
            assert_eq!(
                Some(&r.data().to_vec()),
                self.injected.get(&tag),
                "a passed frame"
            );
        });
        // Redirects from a queue on pages go to the host (a devmap here): given back.
        for r in self.host.take_redirects() {
            self.host.return_frame(r.frame);
        }
        self.card.take_egress(0);
    }

    fn read_rx(&mut self, n: usize, fwd: bool) {
        let (injected, sent_unowned) = (&self.injected, &self.sent_unowned);
        self.host.with_xsk(Q, |s| {
            for _ in 0..n {
                let Some(d) = s.app_take_rx() else { break };
                // A chunk the application once put in its TX ring while the driver held it
                // (`Bad(3)`) may have been taken for TX after the driver delivered it here, and
                // completed and written again since: the application's own doing. Its bytes
                // prove nothing; a chunk on its way back through the completion ring is let go.
                let spoilt = sent_unowned.contains(&(d.addr - d.addr % u64::from(s.chunk_size())));
                match s.frame(d) {
                    Ok(f) if !spoilt => {
                        let tag = tag_of(&f);
                        assert_eq!(Some(&f), injected.get(&tag), "a redirected frame, byte for byte");
                    }
                    Ok(_) => {}
                    Err(XskError::NotOwned(_)) if spoilt => continue,
                    Err(e) => panic!("a redirected frame's chunk: {e}"),
                }
                if !(fwd && s.app_tx(d).is_ok()) {
                    s.app_release(d.addr);
                }
            }
        });
    }

    fn bad(&mut self, kind: u8) {
        let sent_unowned = &mut self.sent_unowned;
        self.host.with_xsk(Q, |s| {
            let chunks = u64::from(s.chunks());
            let size = u64::from(s.chunk_size());
            match kind {
                0 => {
                    let _ = s.fill.produce(chunks * size + 5);
                }
                1 => {
                    let first = s.fill.entries().next();
                    if let Some(a) = first {
                        let _ = s.fill.produce(a);
                    }
                }
                2 => {
                    if let Some(&a) = s.idle.last() {
                        let d = XskDesc {
                            addr: a + size - 10,
                            len: 100,
                            options: 0,
                        };
                        let _ = s.tx.produce(d);
                    }
                }
                3 => {
                    // A chunk the application does not own now (the driver's, or free).
                    let theirs = (0..chunks)
                        .map(|i| i * size)
                        .find(|&a| s.with_chunk(a, |_| ()).is_err());
                    if let Some(addr) = theirs {
                        let put = s.tx.produce(XskDesc {
                            addr,
                            len: 60,
                            options: 0,
                        });
                        if put.is_ok() {
                            sent_unowned.insert(addr);
                        }
                    }
                }
                _ => {
                    let p = s.fill.producer();
                    s.fill.set_producer(p.wrapping_add(1 << 30));
                    assert!(s.fill.consume().is_none() && s.fill.bad_index > 0);
                    // The application repairs its index.
                    s.fill.set_producer(p);
                }
            }
        });
    }
}

fn run(c: &Case) {
    let mut cc = CardConfig::default();
    cc.wire = Wire::Open;
    let card = Card::new(cc);
    let host: Host<'_> = ModelHost::new(&card);
    let cfg = PortConfig {
        func: 0,
        max_queues: 2,
        queues: 2,
        tx_ring: RingSizeIdx::new(1).unwrap(),
        rx_ring: RingSizeIdx::new(1).unwrap(),
        rs_fec: true,
    };
    let mut port = SoloPort::new(host.regs(0), host.delay(), host.clone(), cfg).unwrap();
    port.open().unwrap();
    // Half the table to each queue: both see traffic.
    let mut table = [0u32; RSS_INDIR_SIZE];
    for (i, e) in table.iter_mut().enumerate() {
        *e = (i % 2) as u32;
    }
    port.control(|p, c| p.rss_set(c, Some(&table), None)).unwrap();
    let xcfg = XskConfig {
        chunks: c.chunks,
        chunk_size: c.chunk_size,
        headroom: c.headroom,
        rings: [128, 64, 64, 64],
    };
    host.xsk_bind(Q, xcfg).unwrap();
    let prog = host.attach(program());
    let mut w = World {
        card: &card,
        host,
        port,
        prog,
        injected: HashMap::new(),
        next_tag: 0,
        xsk: false,
        chunk_size: c.chunk_size,
        headroom: c.headroom,
        garbage: 0,
        sent_unowned: HashSet::new(),
    };
    // The run starts on the UMEM, the fill ring full; `Switch` goes back and forth from there.
    w.host.with_xsk(Q, |s| s.app_fill(128));
    step(&mut w, &Op::Switch);
    w.census();
    for op in &c.ops {
        step(&mut w, op);
        w.census();
    }
    finish(w);
}

fn step(w: &mut World<'_>, op: &Op) {
    match op {
        Op::Inject(frames) => {
            for &(k, len) in frames {
                let f = tagged(k, w.next_tag, len);
                w.injected.insert(w.next_tag, f.clone());
                w.next_tag += 1;
                w.card.inject(0, &f);
            }
            w.card.run_until_idle();
            w.card.advance_time(10_000);
            w.card.run_until_idle();
        }
        Op::Poll(b) => w.poll(*b),
        Op::Fill(n) => drop(w.host.with_xsk(Q, |s| s.app_fill(*n))),
        Op::ReadRx { n, fwd } => w.read_rx(*n, *fwd),
        Op::Reap => drop(w.host.with_xsk(Q, |s| s.app_reap())),
        Op::Send(lens) => {
            let frames: Vec<Vec<u8>> = lens.iter().map(|&l| tagged(9, 0, l)).collect();
            w.host
                .with_xsk(Q, |s| frames.iter().take_while(|f| s.app_send(f)).count());
        }
        Op::Switch => {
            let to = if w.xsk { SourceKind::Pages } else { SourceKind::Xsk };
            let r = w.port.set_queue_source(Q, to);
            if to == SourceKind::Xsk && w.chunk_size - u32::from(w.headroom) < 2048 {
                // A chunk that leaves less than 2048 bytes behind its headroom cannot hold the RX
                // headroom and a buffer that holds a 1514-byte frame (1792 bytes): refused, the
                // queue stays on pages. Otherwise it runs on buffers that reach the chunk's end
                // (`case`).
                assert!(
                    matches!(r, Err(PortError::Xsk(XskRefusal::ChunkTooSmall { room, need })) if room < need),
                    "{r:?}"
                );
            } else {
                r.unwrap();
                w.xsk = !w.xsk;
            }
        }
        Op::Restart => w
            .port
            .quiesced(|p, c, q| p.restart_queue(c, &mut q.queue(Q)))
            .unwrap(),
        Op::StopOpen => {
            w.port.stop().unwrap();
            // Down: the driver holds no chunk.
            let c = w.host.with_xsk(Q, |s| s.census(None)).unwrap();
            let c = c.unwrap_or_else(|e| panic!("{e}"));
            assert_eq!((c.driver_rx, c.driver_tx), (0, 0));
            w.port.open().unwrap();
        }
        Op::Bad(k) => {
            w.garbage += 1;
            w.bad(*k);
        }
    }
}

fn finish(mut w: World<'_>) {
    w.card.run_until_idle();
    w.poll(256);
    if w.xsk {
        w.port.set_queue_source(Q, SourceKind::Pages).unwrap();
        w.xsk = false;
    }
    w.census();
    let c = w.host.with_xsk(Q, |s| s.census(None)).unwrap().unwrap();
    assert_eq!((c.driver_rx, c.driver_tx), (0, 0), "the driver holds no chunk");
    assert!(c.garbage <= w.garbage, "garbage the application did not make");
    let st = w.host.xsk_unbind(Q).unwrap();
    if std::env::var("XSK_STATS").is_ok() {
        eprintln!("{st:?}");
    }
    w.port.remove();
    w.host.free_spare();
    assert_eq!(
        w.card.dma_stats().live_pages,
        0,
        "every page of the model is back"
    );
    assert_eq!(w.card.violations(), []);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24),
        ..ProptestConfig::default()
    })]

    #[test]
    fn no_umem_frame_is_lost_or_held_twice_through_the_port(c in case(4096)) {
        run(&c);
    }

    #[test]
    fn no_2k_umem_frame_is_lost_or_held_twice_or_overrun_through_the_port(c in case(2048)) {
        run(&c);
    }
}
