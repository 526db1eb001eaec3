//! RSS vectors and properties: the shell hash against hardware.md §9.4 and an independent model,
//! the Microsoft Toeplitz vectors, table-driven == bit-serial reference for random keys and inputs.
//! (The ethtool state rules and the register sequences of hardware.md §9.2 are tested inside the
//! crate, `device::rss_control::ethtool_tests`: the programming is crate-private.)

use std::net::{Ipv4Addr, Ipv6Addr};

use onic_core::rss::toeplitz::{ipv4_input, ipv4_ports_input, ipv6_input, ipv6_ports_input};
use onic_core::rss::{
    shell_hash_reference, toeplitz_reference, RssHashType, RssKey, RxHash, ShellHasher, ShellTuple, Toeplitz,
};
use proptest::prelude::*;

// ------------------------------------------------------------------------------------------------
// Frame building

const MAC: [u8; 12] = [0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02];

/// An IPv4 frame: optional 802.1Q tag, IHL `ihl` (options filled with NOPs; for IHL < 5 the fixed
/// 20-byte header is still written), flags/fragment-offset field `frag`, then `l4` and zero padding
/// to 60 bytes.
fn ipv4_frame(
    vlan: Option<u16>,
    ihl: u8,
    protocol: u8,
    src: [u8; 4],
    dst: [u8; 4],
    frag: u16,
    l4: &[u8],
) -> Vec<u8> {
    let mut f = MAC.to_vec();
    if let Some(tci) = vlan {
        f.extend_from_slice(&[0x81, 0x00]);
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&[0x08, 0x00]);
    let hdr_len = 4 * usize::from(ihl).max(5);
    let total = (hdr_len + l4.len()) as u16;
    let mut ip = vec![0u8; hdr_len];
    ip[0] = 0x40 | ihl;
    ip[2..4].copy_from_slice(&total.to_be_bytes());
    ip[4..6].copy_from_slice(&0x1234u16.to_be_bytes());
    ip[6..8].copy_from_slice(&frag.to_be_bytes());
    ip[8] = 64;
    ip[9] = protocol;
    ip[12..16].copy_from_slice(&src);
    ip[16..20].copy_from_slice(&dst);
    for b in &mut ip[20..] {
        *b = 0x01; // NOP option
    }
    f.extend_from_slice(&ip);
    f.extend_from_slice(l4);
    while f.len() < 60 {
        f.push(0);
    }
    f
}

fn ports(src: u16, dst: u16) -> Vec<u8> {
    let mut v = src.to_be_bytes().to_vec();
    v.extend_from_slice(&dst.to_be_bytes());
    // A little L4 payload after the ports, which must not matter.
    v.extend_from_slice(&[0xAA; 16]);
    v
}

fn udp_10_0_0_1() -> Vec<u8> {
    ipv4_frame(None, 5, 17, [10, 0, 0, 1], [10, 0, 0, 2], 0, &ports(1234, 5678))
}

fn hasher() -> ShellHasher {
    ShellHasher::new(&RssKey::DEFAULT)
}

/// Hash with the table-driven path, check it against the reference, return it.
fn shell(frame: &[u8]) -> RxHash {
    let rx = hasher().hash_frame(frame);
    assert_eq!(
        rx.value,
        shell_hash_reference(&RssKey::DEFAULT, frame),
        "table-driven and reference disagree on {frame:02x?}"
    );
    rx
}

// ------------------------------------------------------------------------------------------------
// hardware.md §9.4 vectors (default key)

#[test]
fn spec_ipv4_udp_untagged() {
    let rx = shell(&udp_10_0_0_1());
    assert_eq!(rx.value, 0x2F39E0E6);
    assert_eq!(rx.value & 0x7F, 102);
    assert_eq!(rx.kind, RssHashType::L4Ipv4);
}

#[test]
fn spec_ipv4_udp_vlan_tagged() {
    let f = ipv4_frame(
        Some(0x0123),
        5,
        17,
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        0,
        &ports(1234, 5678),
    );
    let rx = shell(&f);
    assert_eq!(rx.value, 0x2F39E0E6, "the VLAN nibble is taken as 0");
    assert_eq!(rx.kind, RssHashType::L4Ipv4);
    // A VID with non-zero bits 11..8 changes nothing either.
    let f = ipv4_frame(
        Some(0x0F23),
        5,
        17,
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        0,
        &ports(1234, 5678),
    );
    assert_eq!(shell(&f).value, 0x2F39E0E6);
}

#[test]
fn spec_ipv4_tcp() {
    let f = ipv4_frame(
        None,
        5,
        6,
        [192, 168, 1, 10],
        [192, 168, 1, 20],
        0x4000,
        &ports(40000, 80),
    );
    let rx = shell(&f);
    assert_eq!(rx.value, 0x40DB35BD);
    assert_eq!(rx.table_index(), 61);
    assert_eq!(rx.kind, RssHashType::L4Ipv4, "DF alone is not a fragment");
    assert_eq!(rx.kind.xdp_rss_type_for(ShellTuple::parse(&f).protocol()), 0x19);
    let tagged = ipv4_frame(
        Some(7),
        5,
        6,
        [192, 168, 1, 10],
        [192, 168, 1, 20],
        0,
        &ports(40000, 80),
    );
    assert_eq!(shell(&tagged).value, 0x40DB35BD);
}

#[test]
fn spec_ipv4_icmp() {
    let f = ipv4_frame(
        None,
        5,
        1,
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        0,
        &[0x08, 0x00, 0x12, 0x34, 0, 1, 0, 1],
    );
    let rx = shell(&f);
    assert_eq!(rx.value, 0x4D1589D1);
    assert_eq!(rx.table_index(), 81);
    assert_eq!(rx.kind, RssHashType::None, "ICMP's first 4 bytes are no flow key");
}

#[test]
fn spec_ipv6_hashes_to_zero() {
    let mut f = MAC.to_vec();
    f.extend_from_slice(&[0x86, 0xDD, 0x60, 0, 0, 0, 0, 20, 6, 64]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]);
    f.extend_from_slice(&[0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2]);
    f.extend_from_slice(&ports(1234, 80));
    let rx = shell(&f);
    assert_eq!(
        rx,
        RxHash {
            value: 0,
            kind: RssHashType::None
        }
    );
    assert_eq!(rx.table_index(), 0);
    assert_eq!(ShellTuple::parse(&f), ShellTuple::ZERO);
}

#[test]
fn sctp_vector_from_independent_model() {
    let f = ipv4_frame(
        None,
        5,
        132,
        [172, 16, 0, 1],
        [172, 16, 0, 2],
        0,
        &ports(5000, 6000),
    );
    let rx = shell(&f);
    assert_eq!(rx.value, 0x8342B823);
    assert_eq!(rx.kind.xdp_rss_type_for(132), 0x49);
}

// ------------------------------------------------------------------------------------------------
// Parsing rules

#[test]
fn ihl_below_5_zeroes_the_l4_bytes() {
    for ihl in 0..5 {
        let f = ipv4_frame(None, ihl, 17, [10, 0, 0, 1], [10, 0, 0, 2], 0, &ports(1234, 5678));
        let rx = shell(&f);
        // Value from the independent model of hardware.md §9.4: protocol and addresses only.
        assert_eq!(rx.value, 0x89B00C8E, "ihl {ihl}");
        assert_eq!(rx.kind, RssHashType::L3Ipv4, "ihl {ihl}");
        assert_eq!(ShellTuple::parse(&f).l4_bytes(), [0; 4]);
    }
}

#[test]
fn ihl_6_to_15_takes_l4_bytes_after_options() {
    for ihl in 5..=15 {
        for vlan in [None, Some(0x0456)] {
            let f = ipv4_frame(vlan, ihl, 17, [10, 0, 0, 1], [10, 0, 0, 2], 0, &ports(1234, 5678));
            let rx = shell(&f);
            assert_eq!(
                rx.value, 0x2F39E0E6,
                "ihl {ihl} vlan {vlan:?}: options are not hashed"
            );
            assert_eq!(rx.kind, RssHashType::L4Ipv4);
        }
    }
    // IHL 15, tagged: the L4 bytes end at byte 82, the last byte the shell can reach.
    let f = ipv4_frame(
        Some(1),
        15,
        17,
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        0,
        &ports(1234, 5678),
    );
    assert_eq!(&f[78..82], &[0x04, 0xD2, 0x16, 0x2E]);
    assert_eq!(shell(&f[..82]).kind, RssHashType::L4Ipv4);
    assert_eq!(shell(&f[..81]).kind, RssHashType::None);
}

#[test]
fn every_protocol_hashes_its_first_4_bytes() {
    let l4 = [0xDE, 0xAD, 0xBE, 0xEF];
    for protocol in [0u8, 1, 2, 4, 6, 17, 41, 47, 50, 51, 89, 132, 136, 255] {
        let f = ipv4_frame(None, 5, protocol, [1, 2, 3, 4], [5, 6, 7, 8], 0, &l4);
        let rx = shell(&f);
        let t = ShellTuple::new(
            protocol,
            Ipv4Addr::new(1, 2, 3, 4),
            Ipv4Addr::new(5, 6, 7, 8),
            l4,
            rx.kind,
        );
        assert_eq!(hasher().hash_tuple(&t).value, rx.value, "protocol {protocol}");
        let l4_type = matches!(protocol, 6 | 17 | 33 | 50 | 132 | 136);
        let want = if l4_type {
            RssHashType::L4Ipv4
        } else {
            RssHashType::None
        };
        assert_eq!(rx.kind, want, "protocol {protocol}");
    }
}

#[test]
fn fragments_are_hashed_like_any_packet_but_typed_none() {
    let whole = shell(&udp_10_0_0_1());
    // First fragment (MF), middle fragment (MF + offset), last fragment (offset only).
    for frag in [0x2000u16, 0x2000 | 185, 370] {
        let f = ipv4_frame(
            None,
            5,
            17,
            [10, 0, 0, 1],
            [10, 0, 0, 2],
            frag,
            &ports(1234, 5678),
        );
        let rx = shell(&f);
        assert_eq!(
            rx.value, whole.value,
            "frag field {frag:#x}: same 4 bytes, same hash"
        );
        assert_eq!(rx.kind, RssHashType::None, "frag field {frag:#x}");
    }
    // A non-first fragment carries payload where the ports would be: another hash.
    let f = ipv4_frame(None, 5, 17, [10, 0, 0, 1], [10, 0, 0, 2], 185, &[0x55; 8]);
    assert_ne!(shell(&f).value, whole.value);
}

#[test]
fn ip_version_is_not_checked_but_typed_none() {
    let mut f = udp_10_0_0_1();
    f[14] = 0x65;
    let rx = shell(&f);
    assert_eq!(rx.value, 0x2F39E0E6);
    assert_eq!(rx.kind, RssHashType::None);
}

#[test]
fn non_ipv4_frames_hash_to_zero() {
    let mut arp = MAC.to_vec();
    arp.extend_from_slice(&[0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4, 0, 1]);
    arp.resize(60, 0xAB);
    // 802.1ad S-tag (88 a8) in front of IPv4: not recognised.
    let mut qinq_ad = MAC.to_vec();
    qinq_ad.extend_from_slice(&[0x88, 0xA8, 0x00, 0x05, 0x08, 0x00]);
    qinq_ad.extend_from_slice(&udp_10_0_0_1()[14..]);
    // Tagged non-IPv4 with a low nibble of byte 18 below 5: no quirk.
    let mut tagged_arp = MAC.to_vec();
    tagged_arp.extend_from_slice(&[0x81, 0x00, 0x00, 0x05, 0x08, 0x06, 0x04, 0xFF, 0xFF]);
    tagged_arp.resize(64, 0x77);
    // Raw bytes: EtherType 0x0000.
    let zeros = [0u8; 64];
    for f in [&arp[..], &qinq_ad, &tagged_arp, &zeros] {
        assert_eq!(
            shell(f),
            RxHash {
                value: 0,
                kind: RssHashType::None
            },
            "{f:02x?}"
        );
    }
}

#[test]
fn tagged_non_ipv4_quirk_qinq() {
    // 81 00 | outer TCI | 81 00 | inner TCI 0x05xx: the low nibble of byte 18 is 5, so the shell
    // reads bytes 38..42 as the L4 bytes.
    let mut f = MAC.to_vec();
    f.extend_from_slice(&[0x81, 0x00, 0x00, 0x64, 0x81, 0x00, 0x05, 0x00, 0x08, 0x00]);
    f.resize(38, 0x11);
    f.extend_from_slice(&[0xDE, 0xAD, 0xBE, 0xEF]);
    f.resize(64, 0x22);
    let rx = shell(&f);
    assert_eq!(rx.value, 0xEE5F18B3, "value from the independent model");
    assert_eq!(rx.kind, RssHashType::None);
    let t = ShellTuple::parse(&f);
    assert_eq!(
        (t.protocol(), t.src(), t.dst()),
        (0, Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED)
    );
    assert_eq!(t.l4_bytes(), [0xDE, 0xAD, 0xBE, 0xEF]);
    // Inner VID below 0x500: nibble 4, no quirk.
    f[18] = 0x04;
    assert_eq!(shell(&f).value, 0);
}

#[test]
fn tagged_non_ipv4_quirk_vlan_ipv6() {
    // VLAN + IPv6 with traffic class 0xB0: byte 18 = 0x6B, nibble 11, bytes 62..66 hashed.
    let mut f = MAC.to_vec();
    f.extend_from_slice(&[0x81, 0x00, 0x00, 0x0A, 0x86, 0xDD, 0x6B, 0x00, 0, 0, 0, 8, 17, 64]);
    f.resize(62, 0x33);
    f.extend_from_slice(&[1, 2, 3, 4]);
    f.resize(90, 0x44);
    let rx = shell(&f);
    assert_eq!(rx.value, 0x7528319C, "value from the independent model");
    assert_eq!(rx.kind, RssHashType::None);
    // Traffic class 0x00 (nibble 0): hash 0.
    f[18] = 0x60;
    assert_eq!(shell(&f).value, 0);
    // Nibble 15 reaches byte 78..82, the end of what the shell can see.
    f[18] = 0x6F;
    f[78..82].copy_from_slice(&[1, 2, 3, 4]);
    assert_eq!(shell(&f).value, 0x7528319C);
}

#[test]
fn truncated_frames_read_missing_bytes_as_zero() {
    // Each frame with the end of the last byte its hash depends on.
    let frames = [
        (udp_10_0_0_1(), 14 + 20 + 4),
        (
            ipv4_frame(Some(9), 15, 6, [9, 8, 7, 6], [5, 4, 3, 2], 0, &ports(1, 2)),
            18 + 60 + 4,
        ),
        (
            ipv4_frame(None, 3, 17, [9, 8, 7, 6], [5, 4, 3, 2], 0, &ports(1, 2)),
            14 + 20,
        ),
    ];
    for (full, needed) in &frames {
        for len in 0..=full.len() {
            let cut = &full[..len];
            let rx = shell(cut);
            // Zero-padding the cut frame must not change anything.
            let mut padded = cut.to_vec();
            padded.resize(128, 0);
            assert_eq!(rx.value, hasher().hash_frame(&padded).value, "len {len}");
            let complete = hasher().hash_frame(full);
            if len >= *needed {
                assert_eq!(rx, complete, "len {len}");
            } else if complete.kind == RssHashType::L4Ipv4 {
                assert_eq!(rx.kind, RssHashType::None, "len {len}: cut before the ports");
            }
        }
    }
    assert_eq!(shell(&[]), RxHash::default());
    // Cut inside the addresses: the missing address bytes count as 0.
    let cut = &udp_10_0_0_1()[..28];
    let t = ShellTuple::parse(cut);
    assert_eq!(t.src(), Ipv4Addr::new(10, 0, 0, 0));
    assert_eq!(t.kind(), RssHashType::None);
}

#[test]
fn tuple_built_from_fields_hashes_like_the_frame() {
    let t = ShellTuple::ipv4(
        6,
        Ipv4Addr::new(192, 168, 1, 10),
        Ipv4Addr::new(192, 168, 1, 20),
        40000,
        80,
    );
    assert_eq!(
        hasher().hash_tuple(&t),
        RxHash {
            value: 0x40DB35BD,
            kind: RssHashType::L4Ipv4
        }
    );
    assert_eq!(hasher().hash_input(t.as_bytes()), 0x40DB35BD);
    let icmp = ShellTuple::ipv4(
        1,
        Ipv4Addr::new(10, 0, 0, 1),
        Ipv4Addr::new(10, 0, 0, 2),
        0x0800,
        0x1234,
    );
    assert_eq!(hasher().hash_tuple(&icmp).value, 0x4D1589D1);
    assert_eq!(icmp.kind(), RssHashType::None);
}

#[test]
fn static_hasher_is_const_evaluated() {
    static H: ShellHasher = ShellHasher::new(&RssKey::DEFAULT);
    assert_eq!(H.hash_frame(&udp_10_0_0_1()).value, 0x2F39E0E6);
}

// ------------------------------------------------------------------------------------------------
// Microsoft Toeplitz vectors ("Verifying the RSS Hash Calculation"), Microsoft key

struct MsV4 {
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
    l3: u32,
    l4: u32,
}

const MS_IPV4: [MsV4; 5] = [
    MsV4 {
        src: [66, 9, 149, 187],
        dst: [161, 142, 100, 80],
        sport: 2794,
        dport: 1766,
        l3: 0x323e8fc2,
        l4: 0x51ccc178,
    },
    MsV4 {
        src: [199, 92, 111, 2],
        dst: [65, 69, 140, 83],
        sport: 14230,
        dport: 4739,
        l3: 0xd718262a,
        l4: 0xc626b0ea,
    },
    MsV4 {
        src: [24, 19, 198, 95],
        dst: [12, 22, 207, 184],
        sport: 12898,
        dport: 38024,
        l3: 0xd2d0a5de,
        l4: 0x5c2b394a,
    },
    MsV4 {
        src: [38, 27, 205, 30],
        dst: [209, 142, 163, 6],
        sport: 48228,
        dport: 2217,
        l3: 0x82989176,
        l4: 0xafc7327f,
    },
    MsV4 {
        src: [153, 39, 163, 191],
        dst: [202, 188, 127, 2],
        sport: 44251,
        dport: 1303,
        l3: 0x5d1809c5,
        l4: 0x10e828a2,
    },
];

const MS_IPV6: [(&str, &str, u16, u16, u32, u32); 3] = [
    (
        "3ffe:2501:200:1fff::7",
        "3ffe:2501:200:3::1",
        2794,
        1766,
        0x2cc18cd5,
        0x40207d3d,
    ),
    (
        "3ffe:501:8::260:97ff:fe40:efab",
        "ff02::1",
        14230,
        4739,
        0x0f0c461c,
        0xdde51bbf,
    ),
    (
        "3ffe:1900:4545:3:200:f8ff:fe21:67cf",
        "fe80::200:f8ff:fe21:67cf",
        44251,
        38024,
        0x4b61e985,
        0x02d1feef,
    ),
];

#[test]
fn microsoft_ipv4_vectors() {
    let key = RssKey::MICROSOFT;
    let t = Toeplitz::new(key.as_bytes()).unwrap();
    for v in &MS_IPV4 {
        let (s, d) = (Ipv4Addr::from(v.src), Ipv4Addr::from(v.dst));
        assert_eq!(t.hash_ipv4(s, d), v.l3, "{s} -> {d}");
        assert_eq!(
            t.hash_ipv4_ports(s, d, v.sport, v.dport),
            v.l4,
            "{s}:{} -> {d}:{}",
            v.sport,
            v.dport
        );
        assert_eq!(t.hash(&ipv4_input(s, d)), v.l3);
        assert_eq!(toeplitz_reference(key.as_bytes(), &ipv4_input(s, d)), v.l3);
        assert_eq!(
            toeplitz_reference(key.as_bytes(), &ipv4_ports_input(s, d, v.sport, v.dport)),
            v.l4
        );
    }
}

#[test]
fn microsoft_ipv6_vectors() {
    let key = RssKey::MICROSOFT;
    let t = Toeplitz::new(key.as_bytes()).unwrap();
    for &(src, dst, sport, dport, l3, l4) in &MS_IPV6 {
        let (s, d): (Ipv6Addr, Ipv6Addr) = (src.parse().unwrap(), dst.parse().unwrap());
        assert_eq!(t.hash_ipv6(s, d), l3, "{s} -> {d}");
        assert_eq!(
            t.hash_ipv6_ports(s, d, sport, dport),
            l4,
            "[{s}]:{sport} -> [{d}]:{dport}"
        );
        assert_eq!(t.hash(&ipv6_ports_input(s, d, sport, dport)), l4);
        assert_eq!(toeplitz_reference(key.as_bytes(), &ipv6_input(s, d)), l3);
        assert_eq!(
            toeplitz_reference(key.as_bytes(), &ipv6_ports_input(s, d, sport, dport)),
            l4
        );
    }
}

#[test]
fn shell_hash_is_not_toeplitz() {
    // The same IPv4 4-tuple under the same key gives different values: hardware.md §9.4 is its own
    // hash.
    let f = ipv4_frame(
        None,
        5,
        6,
        [66, 9, 149, 187],
        [161, 142, 100, 80],
        0,
        &ports(2794, 1766),
    );
    let shell = ShellHasher::new(&RssKey::MICROSOFT).hash_frame(&f).value;
    assert_eq!(shell, shell_hash_reference(&RssKey::MICROSOFT, &f));
    assert_ne!(shell, 0x51ccc178);
}

// ------------------------------------------------------------------------------------------------
// Table-driven == reference, random keys and inputs

/// Random frames biased towards what the parser distinguishes: untagged IPv4, tagged IPv4,
/// tagged non-IPv4 (quirk), anything else; random IHL, lengths 0..100.
fn frame_strategy() -> impl Strategy<Value = Vec<u8>> {
    (0u8..5, prop::collection::vec(any::<u8>(), 0..100)).prop_map(|(shape, mut f)| {
        let mut set = |i: usize, v: u8| {
            if let Some(b) = f.get_mut(i) {
                *b = v;
            }
        };
        match shape {
            0 => {
                set(12, 0x08);
                set(13, 0x00);
            }
            1 => {
                set(12, 0x81);
                set(13, 0x00);
                set(16, 0x08);
                set(17, 0x00);
            }
            2 => {
                set(12, 0x81);
                set(13, 0x00);
            }
            3 => {
                // Untagged IPv4 with IHL 5 and version 4: the common case.
                set(12, 0x08);
                set(13, 0x00);
                set(14, 0x45);
            }
            _ => {}
        }
        f
    })
}

proptest! {
    #[test]
    fn shell_table_equals_reference(key in prop::collection::vec(any::<u8>(), 40), frame in frame_strategy()) {
        let key = RssKey::from_slice(&key).unwrap();
        let h = ShellHasher::new(&key);
        prop_assert_eq!(h.hash_frame(&frame).value, shell_hash_reference(&key, &frame));
    }

    #[test]
    fn shell_common_case_equals_parser_and_reference(
        key in prop::collection::vec(any::<u8>(), 40),
        mut frame in prop::collection::vec(any::<u8>(), 38..100),
        protocol in prop_oneof![Just(6u8), Just(17), Just(50), any::<u8>()],
        frag in prop_oneof![Just(0u16), Just(0x4000), any::<u16>()],
    ) {
        // Untagged, version 4, IHL 5, long enough: the fixed-offset path of `hash_frame`. It must
        // give what the general parser gives (value, type, protocol) and the reference value.
        frame[12..15].copy_from_slice(&[0x08, 0x00, 0x45]);
        frame[14 + 9] = protocol;
        frame[14 + 6..14 + 8].copy_from_slice(&frag.to_be_bytes());
        let key = RssKey::from_slice(&key).unwrap();
        let h = ShellHasher::new(&key);
        let got = h.hash_frame_with_protocol(&frame);
        let tuple = ShellTuple::parse(&frame);
        prop_assert_eq!(got.hash, h.hash_tuple(&tuple));
        prop_assert_eq!(got.protocol, tuple.protocol());
        prop_assert_eq!(got.hash.value, shell_hash_reference(&key, &frame));
        prop_assert_eq!(h.hash_frame(&frame), got.hash);
    }

    #[test]
    fn shell_tuple_hash_equals_reference_of_built_frame(
        key in prop::collection::vec(any::<u8>(), 40),
        protocol in any::<u8>(),
        src in any::<[u8; 4]>(),
        dst in any::<[u8; 4]>(),
        l4 in any::<[u8; 4]>(),
        ihl in 5u8..=15,
        vlan in prop::option::of(any::<u16>()),
    ) {
        let key = RssKey::from_slice(&key).unwrap();
        let frame = ipv4_frame(vlan, ihl, protocol, src, dst, 0, &l4);
        let t = ShellTuple::new(protocol, src.into(), dst.into(), l4, RssHashType::None);
        prop_assert_eq!(ShellHasher::new(&key).hash_tuple(&t).value, shell_hash_reference(&key, &frame));
        prop_assert_eq!(*ShellTuple::parse(&frame).as_bytes(), *t.as_bytes());
    }

    #[test]
    fn shell_hash_is_linear(
        key in prop::collection::vec(any::<u8>(), 40),
        a in any::<[u8; 13]>(),
        b in any::<[u8; 13]>(),
    ) {
        // XOR of inputs -> XOR of hashes: the property the per-byte tables rest on.
        let h = ShellHasher::new(&RssKey::from_slice(&key).unwrap());
        let mut c = [0u8; 13];
        for i in 0..13 {
            c[i] = a[i] ^ b[i];
        }
        prop_assert_eq!(h.hash_input(&c), h.hash_input(&a) ^ h.hash_input(&b));
    }

    #[test]
    fn toeplitz_table_equals_reference(
        key in prop::collection::vec(any::<u8>(), 4..=52),
        input in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let t = Toeplitz::new(&key).unwrap();
        prop_assert_eq!(t.hash(&input), toeplitz_reference(&key, &input));
    }

    #[test]
    fn toeplitz_tuple_helpers_equal_reference(
        key in prop::collection::vec(any::<u8>(), 40),
        s4 in any::<[u8; 4]>(), d4 in any::<[u8; 4]>(),
        s6 in any::<[u8; 16]>(), d6 in any::<[u8; 16]>(),
        sp in any::<u16>(), dp in any::<u16>(),
    ) {
        let t = Toeplitz::new(&key).unwrap();
        let (s4, d4, s6, d6) = (Ipv4Addr::from(s4), Ipv4Addr::from(d4), Ipv6Addr::from(s6), Ipv6Addr::from(d6));
        prop_assert_eq!(t.hash_ipv4(s4, d4), toeplitz_reference(&key, &ipv4_input(s4, d4)));
        prop_assert_eq!(t.hash_ipv4_ports(s4, d4, sp, dp), toeplitz_reference(&key, &ipv4_ports_input(s4, d4, sp, dp)));
        prop_assert_eq!(t.hash_ipv6(s6, d6), toeplitz_reference(&key, &ipv6_input(s6, d6)));
        prop_assert_eq!(t.hash_ipv6_ports(s6, d6, sp, dp), toeplitz_reference(&key, &ipv6_ports_input(s6, d6, sp, dp)));
    }

    #[test]
    fn any_bytes_parse_without_panic(frame in prop::collection::vec(any::<u8>(), 0..200)) {
        let t = ShellTuple::parse(&frame);
        let rx = hasher().hash_tuple(&t);
        prop_assert_eq!(rx.value, shell_hash_reference(&RssKey::DEFAULT, &frame));
    }
}
