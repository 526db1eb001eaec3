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
use onic_core::device::rss_control::{HashFunction, Rss};
use onic_core::rss::PublishedHasher;
use onic_core::{BufSizeIdx, Device, DeviceConfig, RingSizeIdx};
use onic_hal::grace::TakingTurns;
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

/// The shell holds what the state says, the datapaths' hasher has the same key, and the table
/// only names queue pairs in use.
fn check(dev: &Dev<'_>, rss: &Rss, soft: &mut PublishedHasher) {
    let (table, key) = dev.rss_read_back();
    assert_eq!(&table, rss.config().table(), "indirection table in the shell");
    assert_eq!(&key, rss.config().key(), "key in the shell");
    assert_eq!(soft.current_key(), key, "key of the datapaths' hasher");
    let ch = rss.channels(dev);
    assert!(ch.combined >= 1 && ch.combined <= ch.max_combined, "{ch:?}");
    let max_entry = table.entries().iter().copied().max().unwrap_or(0);
    assert!(max_entry < ch.combined, "table names a queue not in use");
}

fn step(dev: &Dev<'_>, rss: &mut Rss, soft: &PublishedHasher, net: &mut NetSettings, op: Op) {
    let before = (*rss.config(), rss.channels(dev));
    let net_before = *net;
    let refused = match op {
        Op::Set { indir, key, hfunc } => {
            let hf = HashFunction::from_ethtool(hfunc);
            rss.set(dev, soft, &TakingTurns, indir.as_deref(), key.as_deref(), hf)
                .is_err()
        }
        Op::Equal(n) => rss.equal(dev, n).is_err(),
        Op::Weights(w) => rss.weights(dev, &w).is_err(),
        Op::Reset => rss.reset(dev).is_err(),
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
            let r = rss.set_channels(dev, req);
            if r.is_ok() {
                assert_eq!(u32::from(rss.channels(dev).combined), combined);
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
        assert_eq!(*rss.config(), before.0, "a refused request changed the RSS state");
        assert_eq!(
            rss.channels(dev),
            before.1,
            "a refused request changed the channels"
        );
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
    let (dev, mut rss) = Device::init(card.qdma(func), card.shell(), &mut delay, cfg).expect("bring-up");
    let idx = |i| RingSizeIdx::new(i).expect("ring");
    let mut net = NetSettings::new(
        idx(8),
        idx(0),
        BufSizeIdx::new(onic_core::config::RX_BUF_SIZE_INDEX_DEFAULT).expect("buffer"),
        1514,
    );
    let mut soft = Box::new(PublishedHasher::new(rss.config().key()));
    check(&dev, &rss, &mut soft);
    for op in input.ops.into_iter().take(64) {
        step(&dev, &mut rss, &soft, &mut net, op);
        check(&dev, &rss, &mut soft);
    }
    assert_eq!(card.violations(), []);
    let (r, _, _) = dev.teardown(&mut delay);
    r.expect("teardown");
});
