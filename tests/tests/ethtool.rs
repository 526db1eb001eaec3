//! The ethtool surface: the `ethtool -S` list against the model's and the registers' counters,
//! the stats64 view, and every control refusing bad input with no register write and no state
//! change.

use onic_core::config::DeviceConfig;
use onic_core::device::rss_control::{HashFunction, Rss};
use onic_core::device::settings::{ChannelsRequest, EthtoolError};
use onic_core::rss::{PublishedHasher, RssError, RssKey};
use onic_core::stats::ethtool::{c_driver_stat_name, EthtoolStats, Stats64};
use onic_core::stats::QueueCounters;
use onic_core::xdp::{XdpAction, XdpBuff};
use onic_core::{Device, Error};
use onic_hal::grace::TakingTurns;
use onic_hal::recording::{Recorder, RecordingWindow};
use onic_hal::{Bar, DelayNs};
use onic_tests::datapath::{frame_id, Harness, Setup};

struct NoDelay;

impl DelayNs for NoDelay {
    fn delay_ns(&mut self, _: u32) {}
}

type RecDevice<'r> = Device<RecordingWindow<'r>, RecordingWindow<'r>>;

fn recorded(rec: &Recorder, func: u8, queues: u16) -> (RecDevice<'_>, Rss) {
    let cfg = DeviceConfig::new(func, queues).unwrap();
    Device::init(rec.window(Bar::Qdma), rec.window(Bar::Shell), &mut NoDelay, cfg).unwrap()
}

#[test]
fn ethtool_s_reads_full_width_hardware_counters_in_the_reference_order() {
    let rec = Recorder::opennic();
    let (dev, _) = recorded(&rec, 1, 8);
    rec.take_log();
    let qs = [QueueCounters::default(); 8];
    let s = EthtoolStats::new(dev.hw_counters(), &qs);
    // One TICK, then every counter in full: the recording bus answers each read with a pattern
    // of its own address, so the high words show up in the values.
    assert_eq!(rec.log()[0].to_string(), "W 2 0x0000c2b0 0x00000001");
    let entries: Vec<_> = s.iter().collect();
    assert_eq!(entries.len(), 71 + 8 * 39 + 11);
    for (i, (name, _)) in entries.iter().take(71).enumerate() {
        assert_eq!(Some(name.to_string().as_str()), c_driver_stat_name(i));
    }
    assert_eq!(entries[0].1, 0xC504_5A00_C500, "48-bit CMAC counter");
    assert_eq!(entries[59].1, 0x5A00_F004_5A00_F000, "64-bit adapter counter");
    assert!(entries.iter().take(64).all(|(_, v)| *v > u64::from(u32::MAX)));
}

#[test]
fn ethtool_s_and_stats64_agree_with_the_model_after_xdp_traffic() {
    let setup = Setup::new().queues(2).ring_size_idx(1);
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    let prog = |x: &mut XdpBuff<'_>| match frame_id(x.data()) % 4 {
        0 => XdpAction::Drop,
        1 => XdpAction::Pass,
        2 => XdpAction::Tx,
        _ => x.redirect(7), // no such target: a counted redirect error
    };
    let prog = h.attach(prog);
    for i in 0..80u16 {
        h.inject(0, i, 60 + usize::from(i) * 11);
    }
    h.drain_xdp(prog);
    // Overflow the RX ring while nobody polls: the adapter drops what has no descriptor.
    for i in 0..300u16 {
        h.inject(0, i, 64);
    }
    h.settle();
    // What `ethtool -S` and `ndo_get_stats64` read: the port's published counters.
    let qs: Vec<QueueCounters> = h
        .port(0)
        .control(|p, c| p.queue_snapshots(c))
        .expect("queue snapshots");
    let port = h.port(0).port();
    let s = EthtoolStats::new(port.hw_counters(), &qs);
    let sum = |f: fn(&QueueCounters) -> u64| qs.iter().map(f).sum::<u64>();
    assert_eq!(s.get("rx_xdp_drop"), Some(20 + 20));
    assert_eq!(s.get("rx_xdp_pass"), Some(20));
    assert_eq!(s.get("rx_xdp_tx"), Some(20));
    assert_eq!(s.get("rx_xdp_redirect"), Some(0));
    assert_eq!(s.get("rx_xdp_tx_errors"), Some(0));
    assert_eq!(
        s.get("rx0_xdp_redirect_errors").unwrap() + s.get("rx1_xdp_redirect_errors").unwrap(),
        20
    );
    assert_eq!(
        s.get("rx0_packets").unwrap() + s.get("rx1_packets").unwrap(),
        sum(|c| c.rx.rx_packets)
    );
    assert_eq!(
        s.get("stat_rx_total_good_pkts"),
        Some(card.cmac_counter(0, "stat_rx_total_good_pkts"))
    );
    assert_eq!(s.get("stat_tx_total_good_pkts"), Some(20));
    assert_eq!(s.get("tx0_packets").unwrap() + s.get("tx1_packets").unwrap(), 20);
    assert!(s.get("rx_pp_alloc_fast").unwrap() > 0);
    let st = port.link_stats();
    let drops = st.rx_missed_errors;
    assert_eq!(drops, s.get("stat_adapt_rx_drop").unwrap());
    assert!(drops > 0);
    assert_eq!(st, Stats64::from_queues(&qs, drops));
    assert_eq!(st.rx_packets, 80);
    assert_eq!(st.tx_packets, 20);
    assert_eq!(st.rx_missed_errors, card.stats().c2h_no_desc_dropped);
    assert!(port.link_up());
    card.set_link(0, false);
    assert!(!port.link_up());
    card.set_link(0, true);
    h.drain_xdp(prog);
    h.teardown();
}

#[test]
fn bad_channel_and_rss_requests_write_nothing_and_change_nothing() {
    let rec = Recorder::opennic();
    let (dev, mut rss) = recorded(&rec, 0, 8);
    let mut soft = PublishedHasher::new(rss.config().key());
    assert_eq!(rss.channels(&dev).max_combined, 8);
    assert_eq!(rss.channels(&dev).combined, 8);
    let before = *rss.config();
    rec.take_log();
    let req = |combined| ChannelsRequest {
        combined,
        ..ChannelsRequest::default()
    };
    assert_eq!(
        rss.set_channels(&dev, req(9)),
        Err(EthtoolError::Channels { requested: 9, max: 8 })
    );
    assert!(rss.set_channels(&dev, req(0)).is_err());
    assert_eq!(
        rss.set_channels(&dev, ChannelsRequest { tx: 2, ..req(4) }),
        Err(EthtoolError::ChannelsNotCombined)
    );
    assert!(matches!(
        rss.set(
            &dev,
            &soft,
            &TakingTurns,
            Some(&[8; 128]),
            None,
            HashFunction::NoChange
        ),
        Err(Error::Rss(RssError::QueueOutOfRange { .. }))
    ));
    assert!(rss
        .set(
            &dev,
            &soft,
            &TakingTurns,
            None,
            Some(&[0; 39]),
            HashFunction::NoChange
        )
        .is_err());
    assert!(rss
        .set(&dev, &soft, &TakingTurns, None, None, HashFunction::Other(2))
        .is_err());
    assert!(rss.equal(&dev, 9).is_err());
    assert!(rss.weights(&dev, &[0, 0]).is_err());
    assert!(rec.log().is_empty(), "a refused request wrote {:?}", rec.log());
    assert_eq!(*rss.config(), before);
    assert_eq!(
        soft.current_key(),
        RssKey::DEFAULT,
        "a refused key is not published"
    );
    // A user-set table naming queue 7 keeps -L from going below 8 pairs.
    let mut table = [0u16; 128];
    table[5] = 7;
    rss.set(
        &dev,
        &soft,
        &TakingTurns,
        Some(&table),
        None,
        HashFunction::NoChange,
    )
    .unwrap();
    let before = *rss.config();
    rec.take_log();
    assert_eq!(
        rss.set_channels(&dev, req(4)),
        Err(EthtoolError::Rss(RssError::QueuesInUse {
            rx_queues: 4,
            max_entry: 7
        }))
    );
    assert!(rec.log().is_empty());
    assert_eq!(*rss.config(), before);
    // The shim's check before it stops the interface refuses the same request, for the same
    // reason, and writes nothing either; a request that fits passes it without a change.
    assert_eq!(
        rss.check_set_channels(&dev, req(4)),
        Err(EthtoolError::Rss(RssError::QueuesInUse {
            rx_queues: 4,
            max_entry: 7
        }))
    );
    assert_eq!(
        rss.check_set_channels(&dev, req(9)),
        Err(EthtoolError::Channels { requested: 9, max: 8 })
    );
    assert_eq!(rss.check_set_channels(&dev, req(8)), Ok(()));
    assert!(rec.log().is_empty());
    assert_eq!(*rss.config(), before);
    // Going back to a default table, -L 4 spreads it over 4 pairs.
    rss.reset(&dev).unwrap();
    rss.set_channels(&dev, req(4)).unwrap();
    assert_eq!(rss.channels(&dev).combined, 4);
    let (table, _) = dev.rss_read_back();
    assert_eq!(table.entries().iter().max(), Some(&3));
}

#[test]
fn an_rss_state_refuses_the_device_of_another_function() {
    // PF0's state with PF1's device would write PF0's table and key into PF1's registers.
    let rec = Recorder::opennic();
    let (pf0, mut rss0) = recorded(&rec, 0, 8);
    let (pf1, _) = recorded(&rec, 1, 4);
    let soft = PublishedHasher::new(rss0.config().key());
    let before = *rss0.config();
    rec.take_log();
    let refusal = RssError::OtherFunction {
        owner: pf0.function(),
        given: pf1.function(),
    };
    let other = Error::Rss(refusal);
    assert_eq!(rss0.equal(&pf1, 2), Err(other));
    assert_eq!(rss0.reset(&pf1), Err(other));
    assert_eq!(
        rss0.set(
            &pf1,
            &soft,
            &TakingTurns,
            None,
            Some(&[7; 40]),
            HashFunction::NoChange
        ),
        Err(other)
    );
    let req = ChannelsRequest {
        combined: 2,
        ..ChannelsRequest::default()
    };
    assert_eq!(rss0.set_channels(&pf1, req), Err(EthtoolError::Rss(refusal)));
    assert_eq!(
        rss0.check_set_channels(&pf1, req),
        Err(EthtoolError::Rss(refusal))
    );
    assert!(rec.log().is_empty(), "a refused request wrote {:?}", rec.log());
    assert_eq!(*rss0.config(), before);
    // With its own device the same change goes through.
    assert!(rss0.equal(&pf0, 2).is_ok());
}
