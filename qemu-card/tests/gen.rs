//! The traffic generator of the control window: the frames it builds, the schedule it keeps on
//! the emulator's clock, and the knobs it refuses.

use onic_qemu_card::ctl;
use onic_qemu_card::gen::{self, Generator};
use onic_qemu_card::model::{Host, Model, ModelConfig};
use onic_sim::{BusError, DeviceBus};
use std::cell::RefCell;
use std::rc::Rc;

/// A host with no memory behind it: the generated frames find no RX queue and are dropped by
/// the card, which still counts them as arrived.
#[derive(Clone, Default)]
struct NoHost;

/// A bus with no memory behind it: every DMA the card tries is refused.
macro_rules! no_memory {
    ($host:ty) => {
        impl DeviceBus for $host {
            fn read(&self, _: u8, _: u64, _: &mut [u8]) -> Result<(), BusError> {
                Err(BusError::Refused)
            }
            fn write(&self, _: u8, _: u64, _: &[u8]) -> Result<(), BusError> {
                Err(BusError::Refused)
            }
        }
    };
}

no_memory!(NoHost);

impl Host for NoHost {
    fn irq(&self, _: u8, _: u16) {}
    fn egress(&self, _: u8, _: &[u8]) {}
    fn log(&self, _: &str) {}
}

const CFG: ModelConfig = ModelConfig {
    functions: 2,
    ports: 2,
    total_queues: 512,
    open_ports: false,
};

/// The ones' complement sum of `bytes`, folded (written apart from the generator's own).
fn folded_sum(parts: &[&[u8]]) -> u16 {
    let mut s: u32 = 0;
    for p in parts {
        for w in p.chunks(2) {
            s += u32::from(w[0]) << 8 | u32::from(*w.get(1).unwrap_or(&0));
        }
    }
    while s > 0xFFFF {
        s = (s & 0xFFFF) + (s >> 16);
    }
    s as u16
}

fn arrived<H: Host>(m: &Model<H>) -> u64 {
    m.sim_stats().injected
}

#[test]
fn a_frame_is_ethernet_ipv4_udp_with_valid_checksums_and_its_sequence_number() {
    let mut g = Generator::default();
    g.dst_mac = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
    g.dst_ip = [192, 0, 2, 2];
    g.dst_port = 5201;
    for (len, seq) in [(60u32, 0u64), (61, 7), (500, 0x1_0000_0001), (1514, 12345)] {
        g.set_len(len);
        let f = g.frame(seq);
        assert_eq!(f.len(), len as usize);
        assert_eq!(&f[0..6], &g.dst_mac);
        assert_eq!(&f[6..12], &gen::SRC_MAC);
        assert_eq!(&f[12..14], &[0x08, 0x00]);
        let ip = &f[14..34];
        assert_eq!(ip[0], 0x45, "IPv4, IHL 5");
        assert_eq!(u16::from_be_bytes([ip[2], ip[3]]), len as u16 - 14);
        assert_eq!(u16::from_be_bytes([ip[4], ip[5]]), seq as u16, "identification");
        assert_eq!(&ip[6..8], &[0x40, 0], "DF, offset 0");
        assert_eq!((ip[8], ip[9]), (64, 17), "TTL 64, UDP");
        assert_eq!(&ip[12..16], &[192, 0, 2, 1]);
        assert_eq!(&ip[16..20], &[192, 0, 2, 2]);
        assert_eq!(folded_sum(&[ip]), 0xFFFF, "IPv4 header checksum of {len}");
        let udp = &f[34..];
        let udp_len = len as u16 - 34;
        assert_eq!(u16::from_be_bytes([udp[0], udp[1]]), gen::SRC_PORT);
        assert_eq!(u16::from_be_bytes([udp[2], udp[3]]), 5201);
        assert_eq!(u16::from_be_bytes([udp[4], udp[5]]), udp_len);
        assert_ne!(&udp[6..8], &[0, 0], "a checksum is sent");
        let mut pseudo = [0u8; 12];
        pseudo[..4].copy_from_slice(&[192, 0, 2, 1]);
        pseudo[4..8].copy_from_slice(&[192, 0, 2, 2]);
        pseudo[9] = 17;
        pseudo[10..].copy_from_slice(&udp_len.to_be_bytes());
        assert_eq!(folded_sum(&[&pseudo, udp]), 0xFFFF, "UDP checksum of {len}");
        assert_eq!(&udp[8..16], &seq.to_be_bytes(), "sequence number");
        assert!(udp[16..].iter().all(|&b| b == 0));
    }
}

#[test]
fn the_knobs_reach_the_frames_through_the_control_window() {
    let mut m = Model::new(CFG, NoHost);
    m.ctl_write(ctl::GEN_DST_MAC_HI.into(), 0x5254);
    m.ctl_write(ctl::GEN_DST_MAC_LO.into(), 0x00AB_CDEF);
    m.ctl_write(ctl::GEN_DST_IP.into(), 0xC000_0202);
    m.ctl_write(ctl::GEN_DST_PORT.into(), 7777);
    m.ctl_write(ctl::GEN_LEN.into(), 1514);
    m.ctl_write(ctl::GEN_INTERVAL_NS.into(), 5000);
    m.ctl_write(ctl::GEN_PORT.into(), 1);
    assert_eq!(m.ctl_read(ctl::GEN_DST_MAC_HI.into()), 0x5254);
    assert_eq!(m.ctl_read(ctl::GEN_DST_MAC_LO.into()), 0x00AB_CDEF);
    assert_eq!(m.ctl_read(ctl::GEN_DST_IP.into()), 0xC000_0202);
    assert_eq!(m.ctl_read(ctl::GEN_DST_PORT.into()), 7777);
    assert_eq!(m.ctl_read(ctl::GEN_LEN.into()), 1514);
    assert_eq!(m.ctl_read(ctl::GEN_INTERVAL_NS.into()), 5000);
    assert_eq!(m.ctl_read(ctl::GEN_PORT.into()), 1);
    assert_eq!(m.ctl_read(ctl::VERSION.into()), 6);
    let mut g = Generator::default();
    g.dst_mac = [0x52, 0x54, 0x00, 0xAB, 0xCD, 0xEF];
    g.dst_port = 7777;
    g.set_len(1514);
    let f = g.frame(0);
    assert_eq!(&f[0..6], &[0x52, 0x54, 0x00, 0xAB, 0xCD, 0xEF]);
    assert_eq!(&f[30..34], &[192, 0, 2, 2]);
}

#[test]
fn frames_arrive_at_the_interval_across_runs_and_a_long_jump_is_bounded() {
    let mut m = Model::new(CFG, NoHost);
    m.ctl_write(ctl::GEN_INTERVAL_NS.into(), 10_000);
    assert_eq!(m.run(1_000), None, "stopped: nothing to wake for");
    m.ctl_write(ctl::GEN_RUN.into(), 1);
    assert_eq!(m.ctl_read(ctl::GEN_RUN.into()), 1);
    // The first frame at once, the next one interval later.
    assert_eq!(m.run(5_000), Some(15_000));
    assert_eq!(arrived(&m), 1);
    assert_eq!(m.run(14_999), Some(15_000), "not yet");
    assert_eq!(arrived(&m), 1);
    assert_eq!(m.run(15_000), Some(25_000));
    assert_eq!(arrived(&m), 2);
    // Late by 9.5 intervals: the frames due meanwhile arrive, on the original phase.
    assert_eq!(m.run(110_000), Some(115_000));
    assert_eq!(arrived(&m), 11);
    assert_eq!(m.ctl_read(ctl::GEN_FRAMES.into()), 11);
    // A jump of a million intervals: MAX_BURST frames, then the schedule restarts from now.
    let now = 115_000 + 10_000_000_000;
    assert_eq!(m.run(now), Some(now + 10_000));
    assert_eq!(arrived(&m), 11 + u64::from(gen::MAX_BURST));
    // A new interval applies from the frame after the next.
    m.ctl_write(ctl::GEN_INTERVAL_NS.into(), 2_000);
    assert_eq!(m.run(now + 10_000), Some(now + 12_000));
    assert_eq!(arrived(&m), 12 + u64::from(gen::MAX_BURST));
}

#[test]
fn a_stopped_or_gone_generator_sends_nothing() {
    let mut m = Model::new(CFG, NoHost);
    m.ctl_write(ctl::GEN_RUN.into(), 1);
    assert_eq!(m.run(0), Some(20_000), "20 us by default");
    m.ctl_write(ctl::GEN_RUN.into(), 0);
    assert_eq!(m.ctl_read(ctl::GEN_RUN.into()), 0);
    assert_eq!(m.run(1_000_000), None);
    assert_eq!(arrived(&m), 1);
    // Started again: at once, not at the old schedule's frames.
    m.ctl_write(ctl::GEN_RUN.into(), 1);
    assert_eq!(m.run(2_000_000), Some(2_020_000));
    assert_eq!(arrived(&m), 2);
    m.ctl_write(ctl::GONE.into(), 1);
    assert_eq!(m.run(3_000_000), None);
    assert_eq!(m.ctl_read(ctl::GEN_FRAMES.into()), 2);
}

#[test]
fn knob_values_out_of_range_are_ignored() {
    let mut m = Model::new(CFG, NoHost);
    let knobs = [
        (ctl::GEN_LEN, 59),
        (ctl::GEN_LEN, 1515),
        (ctl::GEN_LEN, u32::MAX),
        (ctl::GEN_INTERVAL_NS, 999),
        (ctl::GEN_INTERVAL_NS, 0),
        (ctl::GEN_PORT, 2),
        (ctl::GEN_PORT, 256),
        (ctl::GEN_DST_PORT, 0),
        (ctl::GEN_DST_PORT, 65_536),
        (ctl::GEN_DST_MAC_HI, 0x1_0000),
        (ctl::GEN_RUN, 2),
        (ctl::GEN_FRAMES, 5),
        (ctl::GEN_EGRESS, 2),
    ];
    for (reg, bad) in knobs {
        let before = m.ctl_read(reg.into());
        m.ctl_write(reg.into(), bad);
        assert_eq!(m.ctl_read(reg.into()), before, "{reg:#x} <- {bad}");
    }
    assert_eq!(m.ctl_read(ctl::GEN_LEN.into()), 60);
    assert_eq!(m.ctl_read(ctl::GEN_INTERVAL_NS.into()), 20_000);
    assert_eq!(m.ctl_read(ctl::GEN_DST_MAC_HI.into()), 0xFFFF);
    assert_eq!(m.run(0), None, "still stopped");
    // The edges are taken.
    m.ctl_write(ctl::GEN_LEN.into(), 60);
    m.ctl_write(ctl::GEN_INTERVAL_NS.into(), 1000);
    m.ctl_write(ctl::GEN_DST_PORT.into(), 65_535);
    assert_eq!(m.ctl_read(ctl::GEN_INTERVAL_NS.into()), 1000);
    assert_eq!(m.ctl_read(ctl::GEN_DST_PORT.into()), 65_535);
}

/// A frame that left the card: its port and bytes.
type Left = (u8, Vec<u8>);

/// A host that keeps what leaves the card's ports (no memory behind it either).
#[derive(Clone, Default)]
struct Wire(Rc<RefCell<Vec<Left>>>);

no_memory!(Wire);

impl Host for Wire {
    fn irq(&self, _: u8, _: u16) {}
    fn egress(&self, port: u8, frame: &[u8]) {
        self.0.borrow_mut().push((port, frame.to_vec()));
    }
    fn log(&self, _: &str) {}
}

#[test]
fn in_egress_mode_the_frames_leave_the_port_to_its_backend_on_the_same_schedule() {
    let wire = Wire::default();
    let cfg = ModelConfig {
        open_ports: true,
        ..CFG
    };
    let mut m = Model::new(cfg, wire.clone());
    m.ctl_write(ctl::GEN_PORT.into(), 1);
    m.ctl_write(ctl::GEN_EGRESS.into(), 1);
    m.ctl_write(ctl::GEN_DST_PORT.into(), 4242);
    m.ctl_write(ctl::GEN_INTERVAL_NS.into(), 10_000);
    assert_eq!(m.ctl_read(ctl::GEN_EGRESS.into()), 1);
    m.ctl_write(ctl::GEN_RUN.into(), 1);
    assert_eq!(m.run(0), Some(10_000));
    assert_eq!(m.run(10_000), Some(20_000));
    let sent = wire.0.borrow().clone();
    assert_eq!(sent.len(), 2);
    let mut g = Generator::default();
    g.dst_port = 4242;
    for (seq, (port, frame)) in sent.iter().enumerate() {
        assert_eq!(*port, 1);
        assert_eq!(frame, &g.frame(seq as u64));
    }
    // Nothing arrived at the card's own ports, and the card sent nothing of its own.
    assert_eq!(arrived(&m), 0);
    assert_eq!(m.sim_stats().emitted, 2);
    // Back to arriving at the port: nothing more leaves it.
    m.ctl_write(ctl::GEN_EGRESS.into(), 0);
    assert_eq!(m.run(20_000), Some(30_000));
    assert_eq!(wire.0.borrow().len(), 2);
    assert_eq!(m.sim_stats().injected, 1);
}
