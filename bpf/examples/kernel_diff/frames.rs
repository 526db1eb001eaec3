//! The frames every program runs on: each class the engine's tests know (IPv4 UDP/TCP/ICMP via
//! the tests' `ipv4` and `arp` builders, plus IPv6, VLAN and QinQ tags), runts from 10 bytes (below
//! the Ethernet header: the kernel refuses to test-run those) up, full-size and jumbo-ish frames,
//! and headers that lie (bad IHL, lengths past the end, a v6 header in a v4 ethertype, truncated
//! headers). Every frame is the same on every run.

use crate::common::{arp, ipv4};

const DST: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const SRC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

/// Ethernet header with `ethertype` followed by `payload`.
fn eth(ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + payload.len());
    f.extend_from_slice(&DST);
    f.extend_from_slice(&SRC);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The Internet checksum of `b`.
fn csum(b: &[u8]) -> u16 {
    let mut s: u32 = b
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while s > 0xffff {
        s = (s & 0xffff) + (s >> 16);
    }
    !(s as u16)
}

/// `ipv4()` of the engine's tests with a correct header checksum and a payload pattern.
fn v4(proto: u8, sport: u16, dport: u16, len: usize) -> Vec<u8> {
    let mut f = ipv4([10, 0, 0, 1], [10, 0, 0, 2], proto, sport, dport, len);
    for (i, b) in f.iter_mut().enumerate().skip(42) {
        *b = i as u8;
    }
    let sum = csum(&f[14..34]);
    f[24..26].copy_from_slice(&sum.to_be_bytes());
    f
}

/// An IPv4 TCP segment with `flags` (a 20-byte TCP header).
fn tcp4(dport: u16, flags: u8, len: usize) -> Vec<u8> {
    let mut f = v4(6, 40000, dport, len.max(54));
    f[38..42].copy_from_slice(&0x1000_0000u32.to_be_bytes());
    f[46] = 0x50;
    f[47] = flags;
    f[48..50].copy_from_slice(&0xffffu16.to_be_bytes());
    f
}

/// An ICMP echo request (type 8) or reply (type 0) with a correct ICMP checksum.
fn icmp4(ty: u8) -> Vec<u8> {
    let mut f = v4(1, 0, 0, 98);
    f[34..42].copy_from_slice(&[ty, 0, 0, 0, 0x12, 0x34, 0, 1]);
    let sum = csum(&f[34..]);
    f[36..38].copy_from_slice(&sum.to_be_bytes());
    f
}

/// An IPv6 packet with next header `nh` and `payload`.
fn v6(nh: u8, payload: &[u8]) -> Vec<u8> {
    let mut h = vec![0x60, 0, 0, 0];
    h.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    h.extend_from_slice(&[nh, 64]);
    h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    h.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    h.extend_from_slice(payload);
    eth(0x86dd, &h)
}

/// A UDP (17) or TCP (6) header for ports `sport`/`dport` and `pad` payload bytes.
fn l4(proto: u8, sport: u16, dport: u16, pad: usize) -> Vec<u8> {
    let mut p = Vec::new();
    p.extend_from_slice(&sport.to_be_bytes());
    p.extend_from_slice(&dport.to_be_bytes());
    if proto == 6 {
        p.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0xff, 0xff, 0, 0, 0, 0]);
    } else {
        p.extend_from_slice(&((8 + pad) as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0]);
    }
    p.extend((0..pad).map(|i| i as u8));
    p
}

/// Puts 802.1Q tags (`tpid`, VLAN id) between the addresses and the ethertype of `f`.
fn tagged(f: &[u8], tags: &[(u16, u16)]) -> Vec<u8> {
    let mut out = f[..12].to_vec();
    for (tpid, vid) in tags {
        out.extend_from_slice(&tpid.to_be_bytes());
        out.extend_from_slice(&vid.to_be_bytes());
    }
    out.extend_from_slice(&f[12..]);
    out
}

/// The frame set: (name, bytes).
pub fn all() -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<(&str, Vec<u8>)> = Vec::new();
    for len in [10, 14, 20, 33] {
        v.push(("runt", v4(17, 1, 2, 60)[..len].to_vec()));
    }
    v.push(("arp-request", arp()));
    for len in [60, 64, 128, 512, 1514, 3000, 3520] {
        v.push(("ipv4-udp", v4(17, 1234, 5678, len)));
    }
    for port in [53, 9, 4789, 7999] {
        v.push(("ipv4-udp-port", v4(17, 1234, port, 128)));
    }
    v.push(("ipv4-tcp-syn", tcp4(80, 0x02, 60)));
    v.push(("ipv4-tcp-ack", tcp4(80, 0x10, 1514)));
    v.push(("ipv4-tcp-synack", tcp4(8080, 0x12, 74)));
    v.push(("ipv4-tcp-rst", tcp4(22, 0x04, 60)));
    v.push(("icmp-echo-request", icmp4(8)));
    v.push(("icmp-echo-reply", icmp4(0)));
    v.push(("ipv4-ipip", v4(4, 0, 0, 120)));
    v.push(("ipv4-gre", v4(47, 0, 0, 120)));
    v.push(("ipv4-ttl1", {
        let mut f = v4(17, 1, 2, 100);
        f[22] = 1;
        f
    }));
    v.push(("ipv4-fragment", {
        let mut f = v4(17, 1, 2, 200);
        f[20] = 0x20;
        f
    }));
    v.push(("ipv4-options", {
        let mut f = v4(17, 1, 2, 128);
        f[14] = 0x46;
        f
    }));
    v.extend(ipv6_frames());
    v.extend(tagged_frames());
    v.extend(malformed_frames());
    v.into_iter()
        .enumerate()
        .map(|(i, (n, f))| (format!("{i:02}-{n}-{}", f.len()), f))
        .collect()
}

fn ipv6_frames() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("ipv6-udp", v6(17, &l4(17, 1234, 5678, 40))),
        ("ipv6-udp-1514", v6(17, &l4(17, 1234, 53, 1446))),
        ("ipv6-tcp-syn", v6(6, &l4(6, 40000, 80, 0))),
        ("ipv6-icmp-echo", v6(58, &[128, 0, 0, 0, 0, 1, 0, 1, 1, 2, 3, 4])),
        ("ipv6-hopopts-udp", {
            let mut p = vec![17, 0, 5, 2, 0, 0, 1, 0];
            p.extend_from_slice(&l4(17, 1, 2, 20));
            v6(0, &p)
        }),
        ("ipv6-truncated", v6(17, &[])[..40].to_vec()),
    ]
}

fn tagged_frames() -> Vec<(&'static str, Vec<u8>)> {
    let udp = v4(17, 1234, 5678, 100);
    vec![
        ("vlan-ipv4", tagged(&udp, &[(0x8100, 100)])),
        ("vlan-prio-ipv4", tagged(&udp, &[(0x8100, 0xe000 | 4011)])),
        ("qinq-ipv4", tagged(&udp, &[(0x88a8, 10), (0x8100, 20)])),
        ("vlan-ipv6", tagged(&v6(17, &l4(17, 1, 2, 10)), &[(0x8100, 7)])),
        ("vlan-arp", tagged(&arp(), &[(0x8100, 1)])),
        ("vlan-only-tag", tagged(&udp[..14], &[(0x8100, 5)])),
    ]
}

fn malformed_frames() -> Vec<(&'static str, Vec<u8>)> {
    let with = |f: fn(&mut Vec<u8>)| {
        let mut v = v4(17, 1, 2, 100);
        f(&mut v);
        v
    };
    vec![
        ("ipv4-ihl4", with(|f| f[14] = 0x44)),
        ("ipv4-ihl15", with(|f| f[14] = 0x4f)),
        (
            "ipv4-totlen-long",
            with(|f| f[16..18].copy_from_slice(&9000u16.to_be_bytes())),
        ),
        ("ipv4-version6", with(|f| f[14] = 0x65)),
        ("ipv4-header-cut", v4(17, 1, 2, 60)[..30].to_vec()),
        ("ipv4-udp-cut", v4(17, 1, 2, 60)[..38].to_vec()),
        ("ipv6-plen-long", {
            let mut f = v6(17, &l4(17, 1, 2, 8));
            f[18..20].copy_from_slice(&4000u16.to_be_bytes());
            f
        }),
        ("unknown-ethertype", eth(0x88b5, &[0xab; 50])),
        ("llc-length", eth(46, &[0x42; 46])),
        ("broadcast-ipv4", with(|f| f[..6].fill(0xff))),
        ("multicast-ipv6", {
            let mut f = v6(17, &l4(17, 1, 2, 8));
            f[..6].copy_from_slice(&[0x33, 0x33, 0, 0, 0, 1]);
            f
        }),
        ("zeros-1514", vec![0; 1514]),
    ]
}
