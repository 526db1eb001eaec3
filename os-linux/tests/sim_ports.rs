//! The module's Rust side on the host: two ports over the simulation backend (the same code the
//! module runs with `sim=1`), frames across the model's cable, ethtool tables, teardown without
//! leaks.

use std::sync::Arc;

use onic_core::RingSizeIdx;
use onic_linux::ethtool::{ETH_GSTRING_LEN, ETH_SS_STATS};
use onic_linux::port::{Port, PortConfig, XmitResult};
use onic_linux::simcard::{sim_config, SimBar, SimCard, SimDelay, SimDma, SimRegs, SpinLock};
use onic_linux::standin::RxSink;

type SimPort = Port<SimRegs<SpinLock>, SimDma<SpinLock>, SimDelay<SpinLock>>;

fn port(card: &Arc<SimCard<SpinLock>>, func: u8, queues: u16) -> SimPort {
    let cfg = PortConfig {
        func,
        max_queues: 8,
        queues,
        tx_ring: RingSizeIdx::new(1).unwrap(),
        rx_ring: RingSizeIdx::new(1).unwrap(),
    };
    Port::new(
        SimRegs::new(card, SimBar::Qdma(func)),
        SimRegs::new(card, SimBar::Shell),
        SimDma::new(card),
        SimDelay::new(card),
        cfg,
    )
    .expect("port comes up")
}

#[derive(Default)]
struct Collect(Vec<Vec<u8>>);

impl RxSink for Collect {
    fn frame(&mut self, frame: &[u8]) -> bool {
        self.0.push(frame.to_vec());
        true
    }
}

fn frame(n: u8, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    for (i, b) in f[14..].iter_mut().enumerate() {
        *b = n.wrapping_add(i as u8);
    }
    f
}

/// Polls every queue of `p` until nothing more arrives; interrupts tell which.
fn drain(card: &SimCard<SpinLock>, p: &SimPort, func: u8, got: &mut Collect) -> usize {
    let mut polls = 0;
    for _ in 0..20 {
        let irqs = card.tick(10_000);
        for irq in irqs.iter().filter(|i| i.func == func) {
            polls += 1;
            // SAFETY: single-threaded test: this is the queue's only poller.
            let n = unsafe { p.poll(irq.vector, 64, got) };
            if n < 64 {
                // SAFETY: as above.
                unsafe { p.rearm(irq.vector) };
            }
        }
    }
    polls
}

#[test]
fn frames_cross_the_cable_both_ways_and_nothing_leaks() {
    let card = SimCard::new(SpinLock::default(), sim_config());
    let a = port(&card, 0, 2);
    let b = port(&card, 1, 2);
    // SAFETY: single-threaded test: control calls never overlap datapath calls.
    unsafe {
        a.open().unwrap();
        b.open().unwrap();
    }
    assert!(a.link_up() && b.link_up());

    let sent: Vec<Vec<u8>> = (0..10).map(|i| frame(i, 60 + usize::from(i) * 100)).collect();
    for (i, f) in sent.iter().enumerate() {
        // SAFETY: single-threaded: the queue's only transmitter.
        let r = unsafe { a.xmit((i % 2) as u16, f, i + 1 < sent.len()) };
        assert_eq!(r, XmitResult::Ok);
    }
    // A short frame is padded to 60 bytes on the wire.
    // SAFETY: as above.
    assert_eq!(unsafe { a.xmit(0, &frame(99, 42), false) }, XmitResult::Ok);

    let mut got = Collect::default();
    assert!(drain(&card, &b, 1, &mut got) > 0);
    assert_eq!(got.0.len(), 11);
    for f in &sent {
        assert!(got.0.contains(f), "frame of {} bytes arrived", f.len());
    }
    assert!(got.0.iter().any(|f| f.len() == 60 && f[14] == 99));

    // And back.
    let mut back = Collect::default();
    // SAFETY: as above.
    assert_eq!(unsafe { b.xmit(1, &sent[3], false) }, XmitResult::Ok);
    drain(&card, &a, 0, &mut back);
    assert_eq!(back.0, vec![sent[3].clone()]);

    let sa = a.link_stats();
    let sb = b.link_stats();
    assert_eq!((sa.tx_packets, sb.rx_packets), (11, 11));
    assert_eq!((sb.tx_packets, sa.rx_packets), (1, 1));

    // ethtool -S: the reference names first, the hardware counters of the port.
    assert_eq!(a.sset_count(ETH_SS_STATS), Ok(71 + 8 * 16));
    let mut name = [0u8; ETH_GSTRING_LEN];
    assert!(a.stat_name(0, &mut name));
    assert!(name.starts_with(b"stat_tx_total_pkts\0"));
    let mut vals = vec![0u64; a.stats_count()];
    a.ethtool_stats(&mut vals);
    assert_eq!(vals[0], 11, "stat_tx_total_pkts of port 0");
    assert_eq!(vals[71] + vals[81], 1, "rx_queue_{{0,1}}_packets of port 0");
    assert_eq!(vals[71 + 8 * 10], 6, "tx_queue_0_packets of port 0");

    // ethtool -x / -X: the default spread, a user table, a bad table refused without a write.
    let mut t = [0u32; 128];
    a.rss_get(Some(&mut t), None);
    assert!(t.iter().enumerate().all(|(k, &e)| e == k as u32 % 2));
    let mut key = [0u8; 40];
    a.rss_get(None, Some(&mut key));
    assert_eq!(&key[..4], &[0x17, 0x14, 0xe3, 0xd6], "RTL reset key, spec §9.3");
    let ones = [1u32; 128];
    let mut bad = [0u32; 128];
    bad[5] = 2;
    // SAFETY: single-threaded test.
    unsafe {
        assert_eq!(
            a.rss_set(Some(&bad), Some(&[7; 40])),
            Err(onic_linux::errno::EINVAL)
        );
        a.rss_get(Some(&mut t), Some(&mut key));
        assert_eq!(t[0], 0, "nothing written");
        assert_eq!(key[0], 0x17, "nothing written");
        a.rss_set(Some(&ones), Some(&[7; 40])).unwrap();
    }
    a.rss_get(Some(&mut t), Some(&mut key));
    assert_eq!((t, key), (ones, [7; 40]));

    // TX reclaim frees the slots the device consumed.
    card.tick(1_000);
    // SAFETY: as above.
    assert_eq!(unsafe { a.tx_reclaim(0) }, 62);

    // SAFETY: as above.
    unsafe {
        a.stop();
        b.stop();
    }
    a.remove();
    b.remove();
    card.with(|c| {
        assert_eq!(c.violations(), vec![]);
        let d = c.dma_stats();
        assert_eq!((d.live_regions, d.live_pages), (0, 0), "no DMA memory left");
    });
}

#[test]
fn ring_sizes_and_reconfiguration_are_checked() {
    assert_eq!(
        SimPort::ring_indices(63, 1023).map(|(t, r)| (t.index(), r.index())),
        Ok((1, 8))
    );
    assert!(SimPort::ring_indices(100, 1023).is_err());
    assert!(SimPort::ring_indices(u32::MAX, 1023).is_err());
    let card = SimCard::new(SpinLock::default(), sim_config());
    let a = port(&card, 0, 1);
    let r = RingSizeIdx::new(2).unwrap();
    // SAFETY: single-threaded test.
    unsafe {
        assert_eq!(a.reconfigure(9, r, r), Err(onic_linux::errno::EINVAL));
        assert_eq!(a.reconfigure(0, r, r), Err(onic_linux::errno::EINVAL));
        a.open().unwrap();
        assert_eq!(a.reconfigure(4, r, r), Err(onic_linux::errno::EBUSY));
        a.stop();
        a.reconfigure(4, r, r).unwrap();
        assert_eq!(a.config().queues, 4);
        a.open().unwrap();
        assert_eq!(a.change_mtu(9000), Err(onic_linux::errno::EINVAL));
        a.change_mtu(1400).unwrap();
    }
    a.remove();
    card.with(|c| assert_eq!(c.dma_stats().live_pages, 0));
}
