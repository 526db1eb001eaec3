//! ethtool-style settings sequences against a device brought up on the model: `-X` (table, key,
//! hash function, `equal`, `weight`, `default`), `-L`, `-G`, MTU changes, `-N rx-flow-hash`, in
//! any order with any values. A refused request must change nothing (state and registers); after
//! every request the shell must hold exactly what the driver's state says, every table entry
//! must name a queue pair in use (the shell steers a frame of that bucket to a queue outside the
//! pairs the OS runs otherwise), and the model must have seen no bad register write.

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use onic_core::device::settings::{self, ChannelsRequest, NetSettings, RingRequest};
use onic_core::device::rss_control::{HashFunction, RssConfig};
use onic_core::{BufSizeIdx, Device, DeviceConfig, RingSizeIdx};
use onic_sim::{Card, CardConfig, QdmaWindow, ShellWindow, Wire};

#[derive(Arbitrary, Debug)]
enum Op {
    Set {
        indir: Option<Vec<u16>>,
        key: Option<Vec<u8>>,
        hfunc: u8,
    },
    Equal(u16),
    Weights(Vec<u32>),
    Reset,
    Channels {
        rx: u32,
        tx: u32,
        other: u32,
        combined: u32,
    },
    Rings {
        rx: u32,
        tx: u32,
        rx_mini: u32,
        rx_jumbo: u32,
    },
    Mtu(u32),
    FlowHash {
        flow_type: u32,
        fields: u64,
    },
    ReadFlowHash(u32),
}

#[derive(Arbitrary, Debug)]
struct Input {
    func: bool,
    queues: u8,
    ops: Vec<Op>,
}

type Dev<'c> = Device<QdmaWindow<'c>, ShellWindow<'c>>;

/// The shell holds what the state says, and the table only names queue pairs in use.
fn check(dev: &Dev<'_>) {
    let rss: RssConfig = dev.rss();
    let (table, key) = dev.rss_read_back();
    assert_eq!(&table, rss.table(), "indirection table in the shell");
    assert_eq!(&key, rss.key(), "key in the shell");
    let ch = dev.channels();
    assert!(ch.combined >= 1 && ch.combined <= ch.max_combined, "{ch:?}");
    let max_entry = table.entries().iter().copied().max().unwrap_or(0);
    assert!(max_entry < ch.combined, "table names a queue not in use");
}

fn step(dev: &mut Dev<'_>, net: &mut NetSettings, op: Op) {
    let before = (dev.rss(), dev.channels());
    let net_before = *net;
    let refused = match op {
        Op::Set { indir, key, hfunc } => {
            let hf = HashFunction::from_ethtool(hfunc);
            dev.rss_set(indir.as_deref(), key.as_deref(), hf).is_err()
        }
        Op::Equal(n) => dev.rss_equal(n).is_err(),
        Op::Weights(w) => dev.rss_weights(&w).is_err(),
        Op::Reset => dev.rss_reset().is_err(),
        Op::Channels {
            rx,
            tx,
            other,
            combined,
        } => {
            let req = ChannelsRequest {
                rx,
                tx,
                other,
                combined,
            };
            let r = dev.set_channels(req);
            if r.is_ok() {
                assert_eq!(u32::from(dev.channels().combined), combined);
            }
            r.is_err()
        }
        Op::Rings {
            rx,
            tx,
            rx_mini,
            rx_jumbo,
        } => {
            let req = RingRequest {
                rx,
                tx,
                rx_mini,
                rx_jumbo,
            };
            match net.set_rings(req) {
                Ok((r, t)) => {
                    assert_eq!((r.usable(), t.usable()), (rx as u16, tx as u16));
                    assert_eq!(net.rings().rx, rx);
                    false
                }
                Err(_) => true,
            }
        }
        Op::Mtu(mtu) => {
            let r = net.set_mtu(mtu);
            assert_eq!(r.is_ok(), (settings::MIN_MTU..=net.max_mtu()).contains(&mtu));
            r.is_err()
        }
        Op::FlowHash { flow_type, fields } => {
            let r = settings::set_rx_flow_hash(flow_type, fields);
            assert_eq!(r.is_ok(), settings::rx_flow_hash(flow_type) == Ok(fields));
            r.is_err()
        }
        Op::ReadFlowHash(t) => settings::rx_flow_hash(t).is_err(),
    };
    if refused {
        assert_eq!(dev.rss(), before.0, "a refused request changed the RSS state");
        assert_eq!(dev.channels(), before.1, "a refused request changed the channels");
        assert_eq!(*net, net_before, "a refused request changed the settings");
    }
}

fuzz_target!(|input: Input| {
    let mut cc = CardConfig::default();
    cc.wire = Wire::Open;
    let card = Card::new(cc);
    let func = u8::from(input.func);
    let queues = u16::from(input.queues % 64) + 1;
    let cfg = DeviceConfig::new(func, queues).expect("config");
    let mut delay = card.delay();
    let mut dev = Device::init(card.qdma(func), card.shell(), &mut delay, cfg).expect("bring-up");
    let idx = |i| RingSizeIdx::new(i).expect("ring");
    let mut net = NetSettings::new(
        idx(8),
        idx(0),
        BufSizeIdx::new(onic_core::config::RX_BUF_SIZE_INDEX_DEFAULT).expect("buffer"),
        1514,
    );
    check(&dev);
    for op in input.ops.into_iter().take(64) {
        step(&mut dev, &mut net, op);
        check(&dev);
    }
    assert_eq!(card.violations(), []);
    let (r, _, _) = dev.teardown(&mut delay);
    r.expect("teardown");
});
