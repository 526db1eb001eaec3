//! Test frames: many flows (UDP, TCP and ICMP over IPv4, VLAN-tagged UDP, a non-IP ethertype) and
//! any length, each carrying a frame id in its last four bytes. A frame is a pure function of
//! (flow, length, id), so the receiver checks every byte by building the frame again.

/// Kinds of flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Udp,
    Tcp,
    Icmp,
    VlanUdp,
    NonIp,
}

/// One flow: a 5-tuple-ish description.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Flow {
    pub kind: Kind,
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub sport: u16,
    pub dport: u16,
    pub vlan: u16,
}

/// Frame lengths used (without FCS, so 60 is a 64-byte wire frame and 1514 a 1518-byte one).
pub const SIZES: [usize; 22] = [
    60, 61, 64, 99, 127, 128, 200, 255, 256, 257, 300, 511, 512, 513, 777, 1000, 1023, 1024, 1025, 1400,
    1500, 1514,
];

/// Frames longer than the shell passes (1514 bytes without FCS): the MAC drops them.
pub const OVERSIZE: [usize; 3] = [1515, 1600, MAX_BUILD];

/// Longest frame [`build`] makes.
pub const MAX_BUILD: usize = 2000;

/// Source MAC address of every test frame (the far end of the wire).
pub const SRC_MAC: [u8; 6] = [0x00, 0x0A, 0x35, 0x01, 0x02, 0x03];
/// Destination MAC address of every test frame (the card's ports).
pub const DST_MAC: [u8; 6] = [0x00, 0x0A, 0x35, 0xAA, 0xBB, 0xCC];
/// IEEE 802 local experimental ethertype.
const ETHERTYPE_EXPERIMENTAL: u16 = 0x88B5;

fn mix(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    x ^= x >> 33;
    x = x.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    x ^ (x >> 33)
}

/// Flow number `i`: a deterministic mix of kinds, addresses and ports.
#[must_use]
pub fn flow(i: u32) -> Flow {
    let h = mix(u64::from(i) + 1);
    let kind = match i % 8 {
        0..=2 => Kind::Udp,
        3..=4 => Kind::Tcp,
        5 => Kind::VlanUdp,
        6 => Kind::Icmp,
        _ => Kind::NonIp,
    };
    let g = mix(h);
    let (a, b) = (h.to_le_bytes(), g.to_le_bytes());
    Flow {
        kind,
        src: [10, a[0], a[1], a[2]],
        dst: [a[3], a[4], a[5], a[6]],
        sport: u16::from_le_bytes([b[0], b[1]]),
        dport: u16::from_le_bytes([b[2], b[3]]),
        vlan: u16::from_le_bytes([b[4], b[5]]) & 0xFFF,
    }
}

/// Builds `len` bytes of flow `f`'s frame number `id` into `out` (at most [`MAX_BUILD`] bytes)
/// and returns them.
pub fn build<'a>(f: &Flow, len: usize, id: u32, out: &'a mut [u8; MAX_BUILD]) -> &'a [u8] {
    let len = len.clamp(60, MAX_BUILD);
    let buf = &mut out[..len];
    buf.fill(0);
    buf[0..6].copy_from_slice(&DST_MAC);
    buf[6..12].copy_from_slice(&SRC_MAC);
    let mut at = 12;
    if f.kind == Kind::VlanUdp {
        buf[12..14].copy_from_slice(&0x8100u16.to_be_bytes());
        buf[14..16].copy_from_slice(&f.vlan.to_be_bytes());
        at = 16;
    }
    let payload_start = if f.kind == Kind::NonIp {
        buf[at..at + 2].copy_from_slice(&ETHERTYPE_EXPERIMENTAL.to_be_bytes());
        at + 2
    } else {
        buf[at..at + 2].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip = at + 2;
        let proto = match f.kind {
            Kind::Tcp => 6,
            Kind::Icmp => 1,
            _ => 17,
        };
        let total = (len - ip) as u16;
        buf[ip] = 0x45;
        buf[ip + 2..ip + 4].copy_from_slice(&total.to_be_bytes());
        buf[ip + 4..ip + 6].copy_from_slice(&(id as u16).to_be_bytes());
        buf[ip + 8] = 64;
        buf[ip + 9] = proto;
        buf[ip + 12..ip + 16].copy_from_slice(&f.src);
        buf[ip + 16..ip + 20].copy_from_slice(&f.dst);
        let l4 = ip + 20;
        match f.kind {
            Kind::Icmp => {
                buf[l4] = 8; // echo request
                buf[l4 + 4..l4 + 6].copy_from_slice(&f.sport.to_be_bytes());
                l4 + 8
            }
            Kind::Tcp => {
                buf[l4..l4 + 2].copy_from_slice(&f.sport.to_be_bytes());
                buf[l4 + 2..l4 + 4].copy_from_slice(&f.dport.to_be_bytes());
                buf[l4 + 12] = 5 << 4;
                l4 + 20
            }
            _ => {
                buf[l4..l4 + 2].copy_from_slice(&f.sport.to_be_bytes());
                buf[l4 + 2..l4 + 4].copy_from_slice(&f.dport.to_be_bytes());
                buf[l4 + 4..l4 + 6].copy_from_slice(&((len - l4) as u16).to_be_bytes());
                l4 + 8
            }
        }
    };
    for (i, byte) in buf.iter_mut().enumerate().skip(payload_start) {
        *byte = (id as u8) ^ (i as u8).wrapping_mul(31);
    }
    buf[len - 4..].copy_from_slice(&id.to_le_bytes());
    buf
}

/// The id a frame carries (its last four bytes).
#[must_use]
pub fn id_of(frame: &[u8]) -> Option<u32> {
    let tail: [u8; 4] = frame.get(frame.len().checked_sub(4)?..)?.try_into().ok()?;
    Some(u32::from_le_bytes(tail))
}

/// Whether `frame` is a test frame with its MAC addresses swapped: one an XDP program sent back.
#[must_use]
pub fn is_swapped(frame: &[u8]) -> bool {
    frame.get(..6) == Some(&SRC_MAC[..]) && frame.get(6..12) == Some(&DST_MAC[..])
}
