//! The shell's RX hash, bit for bit (hardware.md §9.4).
//!
//! # The hash
//!
//! Let `K` be the 320-bit key integer whose bit `j` is bit `j % 8` of key byte `j / 8` (ethtool
//! order), and `window(j)` the 32 bits of `K` starting at bit `j`. The shell builds a 108-bit
//! vector `X` from the frame and computes `hash = XOR of window(j) over every set bit j of X`.
//!
//! `X` holds, from bit 0 up: a 4-bit VLAN nibble (always 0 in this model, see below), the IPv4
//! protocol, the source address, the destination address and the 4 bytes after the IPv4 header,
//! each byte with its bit `b` at `X` bit `first + b` and bytes in wire order. Above the nibble, `X`
//! is therefore the 13 bytes of a [`ShellTuple`] laid end to end, byte `i` starting at bit
//! `4 + 8 i`, which is what makes a table per byte position work: [`ShellHasher`] keeps, for every
//! position `i` and byte value `v`, the XOR of the windows of the set bits of `v`, and hashes with
//! 13 lookups. [`shell_hash_reference`] follows the definition one bit at a time, with a parser of
//! its own, to check the fast path.
//!
//! [`ShellHasher::hash_frame`] takes the common frame (untagged IPv4 with a 20-byte header, at
//! least [`COMMON_LEN`] bytes: see [`common_case`]) without the parser: one length check, one
//! compare, the 13 bytes read at fixed offsets straight into the lookups, and the hash type from
//! one more lookup. Every other frame goes through [`ShellTuple`]'s parser.
//!
//! # Parsing rules (RTL)
//!
//! - IPv4 when the EtherType at bytes 12-13 is `08 00` (IP header at byte 14), or `81 00` with
//!   `08 00` at bytes 16-17 (IP header at byte 18). The IP version nibble is not checked.
//! - The 4 "L4" bytes are taken at IP offset `4 * IHL` for IHL 5..15, whatever the protocol and
//!   also for fragments; for IHL < 5 they count as 0.
//! - Any other frame gives `X = 0` (hash 0), except a frame with `81 00` at bytes 12-13 and
//!   something other than `08 00` at bytes 16-17 (QinQ, VLAN + IPv6, ...): when the low nibble
//!   `n` of byte 18 is 5 or more, the shell still hashes the 4 bytes at `18 + 4 n` as the L4
//!   bytes, with protocol and addresses 0.
//! - The VLAN nibble is 0: the RTL only leaks a neighbouring packet's nibble in when tagged
//!   packets arrive back to back, which a software model cannot know (hardware.md §9.4 quirk 2).
//!
//! # Frames too short for a field
//!
//! A real frame always contains the bytes the shell looks at (the minimum frame is 60 bytes plus
//! FCS). A buffer given to this module may be shorter; bytes past its end are taken as 0, exactly
//! as if the buffer were zero-padded to 82 bytes ([`PARSE_SPAN`]). The hash type of such a frame is
//! [`RssHashType::None`] when a byte it depends on is missing. Nothing panics on any input.

use core::net::Ipv4Addr;

use super::{ipproto, RssHashType, RssKey, RxHash, KEY_LEN};

/// Bytes of the hash input above the VLAN nibble: protocol, source address, destination address
/// and the 4 bytes after the IPv4 header.
pub const TUPLE_LEN: usize = 13;

/// Number of bits of the shell's hash input vector `X`.
pub const INPUT_BITS: usize = 108;

/// Number of frame bytes the shell's parser can reach: an 802.1Q-tagged Ethernet header (18),
/// the longest IPv4 header (60) and 4 L4 bytes.
pub const PARSE_SPAN: usize = 18 + 60 + 4;

const ETHERTYPE_IPV4: [u8; 2] = [0x08, 0x00];
const ETHERTYPE_VLAN: [u8; 2] = [0x81, 0x00];
const IP_UNTAGGED: usize = 14;
const IP_TAGGED: usize = 18;
const IPV4_MIN_HDR: usize = 20;
/// X bit of the first tuple byte (the protocol): bits 0..3 are the VLAN nibble.
const TUPLE_FIRST_BIT: usize = 4;

/// Outcome of parsing a buffer.
enum Parsed<R> {
    /// The buffer ends before a byte the parser needs.
    Short,
    /// Not IPv4 and not the tagged quirk: the input is all zero.
    NotIpv4,
    /// The result of the visitor on the tuple.
    Done(R),
}

/// The shell's hash input for one frame (bits 4..107 of `X`, hardware.md §9.4) and the hash type it
/// gives.
///
/// Parse a frame once with [`ShellTuple::parse`], or build the tuple from fields already parsed
/// with [`ShellTuple::new`] / [`ShellTuple::ipv4`]; then hash it with
/// [`ShellHasher::hash_tuple`] as often as needed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ShellTuple {
    /// Protocol, source address, destination address, L4 bytes, in wire order.
    bytes: [u8; TUPLE_LEN],
    kind: RssHashType,
}

/// Whether the 4 bytes after the IPv4 header identify a flow for `protocol` (ports, or the ESP
/// SPI).
const fn has_flow_l4_bytes(protocol: u8) -> bool {
    matches!(
        protocol,
        ipproto::TCP | ipproto::UDP | ipproto::UDPLITE | ipproto::SCTP | ipproto::DCCP | ipproto::ESP
    )
}

/// The hash type the shell's input gives for an IPv4 header of version 4 and IHL ≥ 5 whose 4 L4
/// bytes lie inside the frame: `L4Ipv4` for an unfragmented packet (`flags_fragment`, bytes 6-7
/// of the header, has neither MF nor an offset) of a protocol whose first 4 bytes identify a flow,
/// else `None`. For implementations that parse the common case themselves (`onic-accel`).
#[must_use]
pub const fn ipv4_hash_type(protocol: u8, flags_fragment: u16) -> RssHashType {
    // One lookup rather than a branch: where it is inlined, the table loads of the hash need not
    // wait for (or be split around) the fragment test.
    KIND_BY_FRAGMENT_PROTOCOL[(flags_fragment & 0x3FFF != 0) as usize][protocol as usize]
}

/// The hash type of an IPv4 packet with IHL ≥ 5 whose L4 bytes are all present, by whether it is
/// a fragment (MF set or an offset) and by protocol.
const KIND_BY_FRAGMENT_PROTOCOL: [[RssHashType; 256]; 2] = {
    let mut t = [[RssHashType::None; 256]; 2];
    let mut p = 0;
    while p < 256 {
        if has_flow_l4_bytes(p as u8) {
            t[0][p] = RssHashType::L4Ipv4;
        }
        p += 1;
    }
    t
};

impl ShellTuple {
    /// The all-zero input of every non-IPv4 frame: hash 0, type [`RssHashType::None`].
    pub const ZERO: ShellTuple = ShellTuple {
        bytes: [0; TUPLE_LEN],
        kind: RssHashType::None,
    };

    /// A tuple from fields parsed elsewhere; `l4` are the 4 bytes after the IPv4 header (ports in
    /// network order for TCP/UDP), `kind` is what the caller knows the hash covers.
    #[must_use]
    pub const fn new(protocol: u8, src: Ipv4Addr, dst: Ipv4Addr, l4: [u8; 4], kind: RssHashType) -> Self {
        let s = src.octets();
        let d = dst.octets();
        Self {
            bytes: [
                protocol, s[0], s[1], s[2], s[3], d[0], d[1], d[2], d[3], l4[0], l4[1], l4[2], l4[3],
            ],
            kind,
        }
    }

    /// The tuple of an unfragmented IPv4 packet with IHL ≥ 5 whose first 4 payload bytes are
    /// `src_port` and `dst_port` in network order; the type follows the protocol as in
    /// [`RssHashType`] (`L4Ipv4` for TCP, UDP, UDP-Lite, SCTP, DCCP and ESP, else `None`).
    #[must_use]
    pub const fn ipv4(protocol: u8, src: Ipv4Addr, dst: Ipv4Addr, src_port: u16, dst_port: u16) -> Self {
        let sp = src_port.to_be_bytes();
        let dp = dst_port.to_be_bytes();
        let kind = if has_flow_l4_bytes(protocol) {
            RssHashType::L4Ipv4
        } else {
            RssHashType::None
        };
        Self::new(protocol, src, dst, [sp[0], sp[1], dp[0], dp[1]], kind)
    }

    /// Parses a frame (bytes from the first destination-MAC byte on) exactly as the shell does.
    /// See the module docs for the rules, the hash type and frames shorter than a field.
    #[inline]
    #[must_use]
    pub fn parse(frame: &[u8]) -> Self {
        Self::visit(frame, Self::ZERO, |t| *t)
    }

    /// Parses `frame` and hands its tuple to `f`; a frame whose input is all zero because it is not
    /// IPv4 gives `not_ipv4` without calling `f`.
    ///
    /// Calling `f` where each parse outcome is known, rather than returning a tuple to hash
    /// afterwards, lets the hasher index its tables straight from the frame's bytes instead of
    /// merging the outcomes into one set of registers first.
    #[inline(always)]
    pub(crate) fn visit<R>(frame: &[u8], not_ipv4: R, f: impl Fn(&ShellTuple) -> R) -> R {
        match Self::visit_within(frame, frame.len(), &f) {
            Parsed::Done(r) => r,
            Parsed::NotIpv4 => not_ipv4,
            Parsed::Short => f(&Self::parse_short(frame)),
        }
    }

    /// The slow path for buffers that end before a field: parse a zero-padded copy.
    #[cold]
    #[inline(never)]
    fn parse_short(frame: &[u8]) -> Self {
        let mut padded = [0u8; PARSE_SPAN];
        for (dst, src) in padded.iter_mut().zip(frame) {
            *dst = *src;
        }
        // The padded copy holds every byte the parser can reach, so it is never short.
        match Self::visit_within(&padded, frame.len(), &|t| *t) {
            Parsed::Done(t) => t,
            Parsed::NotIpv4 | Parsed::Short => Self::ZERO,
        }
    }

    /// Parses `buf`, whose bytes past `len` are padding, and hands the tuple to `f`.
    #[inline(always)]
    fn visit_within<R>(buf: &[u8], len: usize, f: &impl Fn(&ShellTuple) -> R) -> Parsed<R> {
        let (Some(&e0), Some(&e1)) = (buf.get(12), buf.get(13)) else {
            return Parsed::Short;
        };
        let ip = if [e0, e1] == ETHERTYPE_IPV4 {
            IP_UNTAGGED
        } else if [e0, e1] == ETHERTYPE_VLAN {
            let (Some(&i0), Some(&i1)) = (buf.get(16), buf.get(17)) else {
                return Parsed::Short;
            };
            if [i0, i1] == ETHERTYPE_IPV4 {
                IP_TAGGED
            } else {
                return match Self::parse_tagged_other(buf) {
                    Some(t) if t == Self::ZERO => Parsed::NotIpv4,
                    Some(t) => Parsed::Done(f(&t)),
                    None => Parsed::Short,
                };
            }
        } else {
            return Parsed::NotIpv4;
        };
        // The common case first: version 4, IHL 5, header and ports inside the frame.
        if let (Some(&0x45), true) = (buf.get(ip), ip + IPV4_MIN_HDR + 4 <= len) {
            if let Some(Ok(h)) = buf
                .get(ip..ip + IPV4_MIN_HDR + 4)
                .map(<&[u8; IPV4_MIN_HDR + 4]>::try_from)
            {
                let kind = ipv4_hash_type(h[9], u16::from_be_bytes([h[6], h[7]]));
                return Parsed::Done(f(&Self {
                    bytes: [
                        h[9], h[12], h[13], h[14], h[15], h[16], h[17], h[18], h[19], h[20], h[21], h[22],
                        h[23],
                    ],
                    kind,
                }));
            }
        }
        let Some(hdr) = buf.get(ip..ip + IPV4_MIN_HDR) else {
            return Parsed::Short;
        };
        let Ok(hdr) = <&[u8; IPV4_MIN_HDR]>::try_from(hdr) else {
            return Parsed::Short;
        };
        let ihl = usize::from(hdr[0] & 0x0F);
        let l4_at = ip + 4 * ihl;
        let l4: [u8; 4] = if ihl >= 5 {
            match buf.get(l4_at..l4_at + 4).map(<&[u8; 4]>::try_from) {
                Some(Ok(l4)) => *l4,
                _ => return Parsed::Short,
            }
        } else {
            [0; 4]
        };
        let protocol = hdr[9];
        let kind = if hdr[0] >> 4 != 4 || ip + IPV4_MIN_HDR > len {
            RssHashType::None
        } else if ihl < 5 {
            RssHashType::L3Ipv4
        } else if (u16::from_be_bytes([hdr[6], hdr[7]]) & 0x3FFF) != 0
            || l4_at + 4 > len
            || !has_flow_l4_bytes(protocol)
        {
            // A fragment (MF set or offset non-zero), L4 bytes cut off, or a protocol whose first
            // 4 bytes are no flow key.
            RssHashType::None
        } else {
            RssHashType::L4Ipv4
        };
        Parsed::Done(f(&Self {
            bytes: [
                protocol, hdr[12], hdr[13], hdr[14], hdr[15], hdr[16], hdr[17], hdr[18], hdr[19], l4[0],
                l4[1], l4[2], l4[3],
            ],
            kind,
        }))
    }

    /// A tagged frame whose inner EtherType is not IPv4: the RTL quirk of hardware.md §9.4. `None`
    /// when the buffer ends before a byte it needs.
    #[cold]
    fn parse_tagged_other(buf: &[u8]) -> Option<Self> {
        let nibble = usize::from(*buf.get(IP_TAGGED)? & 0x0F);
        if nibble < 5 {
            return Some(Self::ZERO);
        }
        let at = IP_TAGGED + 4 * nibble;
        let l4: &[u8; 4] = buf.get(at..at + 4)?.try_into().ok()?;
        let mut bytes = [0; TUPLE_LEN];
        bytes[9] = l4[0];
        bytes[10] = l4[1];
        bytes[11] = l4[2];
        bytes[12] = l4[3];
        Some(Self {
            bytes,
            kind: RssHashType::None,
        })
    }

    /// The 13 input bytes in hash order: protocol, source address, destination address, L4 bytes.
    #[must_use]
    pub const fn as_bytes(&self) -> &[u8; TUPLE_LEN] {
        &self.bytes
    }

    /// The IPv4 protocol (0 for non-IPv4 frames).
    #[must_use]
    pub const fn protocol(&self) -> u8 {
        self.bytes[0]
    }

    /// The IPv4 source address (0.0.0.0 for non-IPv4 frames).
    #[must_use]
    pub const fn src(&self) -> Ipv4Addr {
        let b = &self.bytes;
        Ipv4Addr::new(b[1], b[2], b[3], b[4])
    }

    /// The IPv4 destination address (0.0.0.0 for non-IPv4 frames).
    #[must_use]
    pub const fn dst(&self) -> Ipv4Addr {
        let b = &self.bytes;
        Ipv4Addr::new(b[5], b[6], b[7], b[8])
    }

    /// The 4 bytes after the IPv4 header as hashed (0 when IHL < 5).
    #[must_use]
    pub const fn l4_bytes(&self) -> [u8; 4] {
        let b = &self.bytes;
        [b[9], b[10], b[11], b[12]]
    }

    /// The first two L4 bytes as a big-endian number: the source port for TCP and UDP.
    #[must_use]
    pub const fn src_port(&self) -> u16 {
        u16::from_be_bytes([self.bytes[9], self.bytes[10]])
    }

    /// The next two L4 bytes as a big-endian number: the destination port for TCP and UDP.
    #[must_use]
    pub const fn dst_port(&self) -> u16 {
        u16::from_be_bytes([self.bytes[11], self.bytes[12]])
    }

    /// What the hash of this tuple covers.
    #[must_use]
    pub const fn kind(&self) -> RssHashType {
        self.kind
    }

    /// The same input with another hash type.
    #[must_use]
    pub const fn with_kind(self, kind: RssHashType) -> Self {
        Self {
            bytes: self.bytes,
            kind,
        }
    }
}

/// 32 key bits starting at bit `j` of the little-endian key integer `K` (hardware.md §9.4); key
/// bits past the 320th are 0.
const fn key_window(key: &[u8; KEY_LEN], j: usize) -> u32 {
    // Five bytes from byte j/8 hold the 32 bits for any bit offset 0..7 within the first byte.
    let mut acc: u64 = 0;
    let mut n = 0;
    while n < 5 {
        let i = j / 8 + n;
        if i < KEY_LEN {
            acc |= (key[i] as u64) << (8 * n);
        }
        n += 1;
    }
    (acc >> (j % 8)) as u32
}

/// Frame bytes the common case reads: the Ethernet header, a 20-byte IPv4 header and the 4 L4
/// bytes.
pub const COMMON_LEN: usize = IP_UNTAGGED + IPV4_MIN_HDR + 4;

/// The first [`COMMON_LEN`] bytes of `frame` when it is the shell parser's common case: untagged
/// (EtherType `08 00`), IPv4 header byte 0 `0x45` (version 4, IHL 5), and long enough for the 4
/// L4 bytes; `None` for any other frame. The parser's own first test is the same, so a frame
/// taken here gets exactly what the parser would give it.
#[inline(always)]
#[must_use]
pub fn common_case(frame: &[u8]) -> Option<&[u8; COMMON_LEN]> {
    let head = frame.first_chunk::<COMMON_LEN>()?;
    (head[12..=IP_UNTAGGED] == [ETHERTYPE_IPV4[0], ETHERTYPE_IPV4[1], 0x45]).then_some(head)
}

/// `N` bytes of `head` from `at` (`at + N <= COMMON_LEN` at every call, so that, inlined, no
/// check remains).
#[inline(always)]
fn fixed<const N: usize>(head: &[u8; COMMON_LEN], at: usize) -> [u8; N] {
    core::array::from_fn(|i| head[at + i])
}

/// Per-position tables, aligned to a cache line so that each 1 KiB row spans exactly 16 lines.
#[derive(Clone)]
#[repr(C, align(64))]
struct Tables([[u32; 256]; TUPLE_LEN]);

/// Fills `t[i][v]` with the XOR of `window(4 + 8 i + b)` over the set bits `b` of `v`.
const fn fill_tables(t: &mut [[u32; 256]; TUPLE_LEN], key: &[u8; KEY_LEN]) {
    let mut row = 0;
    while row < TUPLE_LEN {
        t[row][0] = 0;
        let mut v = 1usize;
        while v < 256 {
            // v = (v without its lowest set bit) + that bit: one table entry already built plus
            // one window.
            let bit = v.trailing_zeros() as usize;
            t[row][v] = t[row][v & (v - 1)] ^ key_window(key, TUPLE_FIRST_BIT + 8 * row + bit);
            v += 1;
        }
        row += 1;
    }
}

/// The shell's hash for one key, table-driven: 13 lookups and XORs per frame.
///
/// The tables take 13 KiB (13 positions × 256 values × 4 bytes), built once per key; a hash
/// touches one cache line per position. [`ShellHasher::new`] is a `const fn`, so a hasher for a
/// fixed key can be a `static` (in flash on a microcontroller); [`ShellHasher::rekey`] rebuilds in
/// place, without a second 13 KiB on the stack.
#[derive(Clone)]
pub struct ShellHasher {
    tables: Tables,
    key: RssKey,
}

impl ShellHasher {
    /// Precomputes the tables for `key`.
    #[must_use]
    pub const fn new(key: &RssKey) -> Self {
        let mut tables = Tables([[0; 256]; TUPLE_LEN]);
        fill_tables(&mut tables.0, key.as_bytes());
        Self { tables, key: *key }
    }

    /// Rebuilds the tables for another key, in place.
    pub fn rekey(&mut self, key: &RssKey) {
        fill_tables(&mut self.tables.0, key.as_bytes());
        self.key = *key;
    }

    /// The key the tables were built for.
    #[must_use]
    pub const fn key(&self) -> &RssKey {
        &self.key
    }

    /// The hash of a parsed tuple.
    #[inline]
    #[must_use]
    pub fn hash_tuple(&self, tuple: &ShellTuple) -> RxHash {
        RxHash {
            value: self.hash_input(&tuple.bytes),
            kind: tuple.kind,
        }
    }

    /// The hash of the 13 input bytes (protocol, source, destination, L4 bytes), no type.
    #[inline]
    #[must_use]
    pub fn hash_input(&self, bytes: &[u8; TUPLE_LEN]) -> u32 {
        // One lookup per byte position; the array lengths match, so no bounds check remains.
        self.tables
            .0
            .iter()
            .zip(bytes)
            .fold(0, |h, (row, &b)| h ^ row[usize::from(b)])
    }

    /// Parses and hashes one frame (bytes from the destination MAC on).
    #[inline]
    #[must_use]
    pub fn hash_frame(&self, frame: &[u8]) -> RxHash {
        self.hash_frame_with_protocol(frame).hash
    }

    /// Parses and hashes one frame, with the IPv4 protocol the hash type depends on.
    #[inline]
    #[must_use]
    pub fn hash_frame_with_protocol(&self, frame: &[u8]) -> super::FrameHash {
        match common_case(frame) {
            Some(head) => self.hash_common(head),
            None => self.hash_frame_general(frame),
        }
    }

    /// The common case ([`common_case`]): every field at a fixed offset of `head`, one table
    /// lookup per input byte, no parser.
    #[inline(always)]
    fn hash_common(&self, head: &[u8; COMMON_LEN]) -> super::FrameHash {
        let t = &self.tables.0;
        let protocol = head[IP_UNTAGGED + 9];
        // Source and destination address (frame bytes 26..34) in one load, the L4 bytes in
        // another; the first byte on the wire is the low byte, tuple position 1 and 9.
        let addrs = u64::from_le_bytes(fixed(head, IP_UNTAGGED + 12));
        let l4 = u32::from_le_bytes(fixed(head, IP_UNTAGGED + IPV4_MIN_HDR));
        let byte = |v: u64, n: u32| usize::from((v >> (8 * n)) as u8);
        let low = t[0][usize::from(protocol)]
            ^ t[1][byte(addrs, 0)]
            ^ t[2][byte(addrs, 1)]
            ^ t[3][byte(addrs, 2)]
            ^ t[4][byte(addrs, 3)];
        let high = t[5][byte(addrs, 4)] ^ t[6][byte(addrs, 5)] ^ t[7][byte(addrs, 6)] ^ t[8][byte(addrs, 7)];
        let l4 = u64::from(l4);
        let ports = t[9][byte(l4, 0)] ^ t[10][byte(l4, 1)] ^ t[11][byte(l4, 2)] ^ t[12][byte(l4, 3)];
        let flags = u16::from_be_bytes(fixed(head, IP_UNTAGGED + 6));
        super::FrameHash {
            hash: RxHash {
                value: low ^ high ^ ports,
                kind: ipv4_hash_type(protocol, flags),
            },
            protocol,
        }
    }

    /// Every frame outside the common case, through the parser (out of line, so that the
    /// common case stays small where it is inlined).
    #[inline(never)]
    fn hash_frame_general(&self, frame: &[u8]) -> super::FrameHash {
        // The hash of the all-zero input is 0: no window is XORed in.
        ShellTuple::visit(frame, super::FrameHash::default(), |t| super::FrameHash {
            hash: self.hash_tuple(t),
            protocol: t.protocol(),
        })
    }

    /// Hashes `frames[i]` into `out[i]` for as many frames as both slices hold; returns that count.
    #[inline]
    pub fn hash_frames(&self, frames: &[&[u8]], out: &mut [RxHash]) -> usize {
        let n = frames.len().min(out.len());
        for (o, f) in out.iter_mut().zip(frames) {
            *o = self.hash_frame(f);
        }
        n
    }
}

impl Default for ShellHasher {
    /// A hasher for the RTL reset key.
    fn default() -> Self {
        Self::new(&RssKey::DEFAULT)
    }
}

impl core::fmt::Debug for ShellHasher {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ShellHasher")
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

/// The shell's hash of `frame`, computed from the definition one bit at a time with a parser of its
/// own (the one in [`ShellTuple::parse`] is not used). For tests; some hundreds of times slower than
/// [`ShellHasher::hash_frame`].
#[must_use]
pub fn shell_hash_reference(key: &RssKey, frame: &[u8]) -> u32 {
    let x = reference_input(frame);
    let k = key.as_bytes();
    let key_bit = |n: usize| -> u32 { k.get(n / 8).map_or(0, |byte| u32::from(byte >> (n % 8)) & 1) };
    let mut hash = 0;
    for j in 0..INPUT_BITS {
        if (x >> j) & 1 == 1 {
            let mut window = 0u32;
            for t in 0..32 {
                window |= key_bit(j + t) << t;
            }
            hash ^= window;
        }
    }
    hash
}

/// The 108-bit input `X` of hardware.md §9.4, built field by field from the frame; missing bytes
/// are 0.
fn reference_input(frame: &[u8]) -> u128 {
    let byte = |i: usize| frame.get(i).copied().unwrap_or(0);
    // Field byte `b` placed with its bit 0 at X bit `at`.
    let place = |x: &mut u128, at: usize, b: u8| *x |= u128::from(b) << at;
    let outer = [byte(12), byte(13)];
    let inner = [byte(16), byte(17)];
    let mut x = 0u128;
    let ip = if outer == [0x08, 0x00] {
        Some(14)
    } else if outer == [0x81, 0x00] && inner == [0x08, 0x00] {
        Some(18)
    } else {
        None
    };
    if let Some(ip) = ip {
        place(&mut x, 4, byte(ip + 9));
        for n in 0..4 {
            place(&mut x, 12 + 8 * n, byte(ip + 12 + n));
            place(&mut x, 44 + 8 * n, byte(ip + 16 + n));
        }
        let ihl = usize::from(byte(ip) & 0xF);
        if ihl >= 5 {
            for n in 0..4 {
                place(&mut x, 76 + 8 * n, byte(ip + 4 * ihl + n));
            }
        }
    } else if outer == [0x81, 0x00] {
        let nibble = usize::from(byte(18) & 0xF);
        if nibble >= 5 {
            for n in 0..4 {
                place(&mut x, 76 + 8 * n, byte(18 + 4 * nibble + n));
            }
        }
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp_frame() -> [u8; 64] {
        let mut f = [0u8; 64];
        f[12] = 0x08;
        f[14] = 0x45;
        f[14 + 9] = 17;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&1234u16.to_be_bytes());
        f[36..38].copy_from_slice(&5678u16.to_be_bytes());
        f
    }

    #[test]
    fn window_zero_is_first_key_word() {
        assert_eq!(key_window(RssKey::DEFAULT.as_bytes(), 0), 0xD6E31417);
        assert_eq!(key_window(RssKey::DEFAULT.as_bytes(), 32), 0x376CC87E);
        // The top of the key: only 8 real bits remain at bit 312.
        assert_eq!(key_window(RssKey::DEFAULT.as_bytes(), 312), 0x7C);
    }

    #[test]
    #[cfg_attr(miri, ignore = "plain values only; slow under Miri")]
    fn spec_udp_vector() {
        let h = ShellHasher::new(&RssKey::DEFAULT);
        let f = udp_frame();
        let rx = h.hash_frame(&f);
        assert_eq!(rx.value, 0x2F39E0E6);
        assert_eq!(rx.table_index(), 102);
        assert_eq!(rx.kind, RssHashType::L4Ipv4);
        assert_eq!(shell_hash_reference(&RssKey::DEFAULT, &f), 0x2F39E0E6);
    }

    #[test]
    fn tuple_constructor_matches_parser() {
        let t = ShellTuple::ipv4(
            17,
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            1234,
            5678,
        );
        assert_eq!(t, ShellTuple::parse(&udp_frame()));
        assert_eq!(t.src_port(), 1234);
        assert_eq!(t.dst_port(), 5678);
    }

    #[test]
    #[cfg_attr(miri, ignore = "plain values only; slow under Miri")]
    fn rekey_equals_new() {
        let mut h = ShellHasher::new(&RssKey::DEFAULT);
        h.rekey(&RssKey::MICROSOFT);
        let fresh = ShellHasher::new(&RssKey::MICROSOFT);
        let f = udp_frame();
        assert_eq!(h.hash_frame(&f), fresh.hash_frame(&f));
        assert_eq!(h.key(), &RssKey::MICROSOFT);
    }

    #[test]
    #[cfg_attr(miri, ignore = "plain values only; slow under Miri")]
    fn batch_hashes_each_frame() {
        let h = ShellHasher::default();
        let a = udp_frame();
        let b = [0u8; 20];
        let mut out = [RxHash::default(); 3];
        assert_eq!(h.hash_frames(&[&a, &b], &mut out), 2);
        assert_eq!(out[0].value, 0x2F39E0E6);
        assert_eq!(out[1].value, 0);
    }
}
