//! Receive-side scaling, the hashing side: the shell's own RX hash and standard Toeplitz
//! (hardware.md §9). The per-function indirection table and key, and their programming, are device
//! control: [`crate::device::rss_control`].
//!
//! The OpenNIC shell picks the RX queue of a frame as `indirection[hash & 0x7F] + qbase`, where
//! `hash` is the shell's own XOR hash (hardware.md §9.4, *not* standard Toeplitz) over protocol,
//! IPv4 addresses and the 4 bytes after the IPv4 header. The completion entry does not carry the
//! hash, so the driver recomputes it in software whenever it wants to hand an RX hash to the OS
//! (Linux `skb->hash`, XDP `rx_hash` metadata) or predict the queue of a flow.
//!
//! - [`shell_hash`]: [`ShellTuple`] (the parsed 108-bit input), [`ShellHasher`] (table-driven, one
//!   per key) and [`shell_hash_reference`] (bit-serial, for tests).
//! - [`toeplitz`]: the Microsoft RSS Toeplitz hash as other NICs compute it, [`Toeplitz`]
//!   (table-driven) and [`toeplitz_reference`].
//! - [`PublishedHasher`]: the shell hash under the key the shell holds, as datapaths read it
//!   without a lock while the function's `Rss` (its one writer) replaces it through the OS's
//!   grace period ([`onic_hal::grace`]).
//!
//! # Calling it from the RX path without parsing twice
//!
//! ```
//! use onic_core::device::rss_control::IndirectionTable;
//! use onic_core::rss::{RssKey, ShellHasher, ShellTuple};
//!
//! // Once per key (13 KiB of tables; `const`-evaluable, so it can live in a `static`).
//! static HASHER: ShellHasher = ShellHasher::new(&RssKey::DEFAULT);
//! let table = IndirectionTable::round_robin(4);
//!
//! let frame = [0u8; 64]; // the received frame, from the destination MAC on
//! let tuple = ShellTuple::parse(&frame); // parse once ...
//! let rx = HASHER.hash_tuple(&tuple); // ... hash as often as needed
//! let queue = table.queue_for(rx.value);
//! let xdp_type = rx.kind.xdp_rss_type_for(tuple.protocol());
//! # let _ = (queue, xdp_type);
//! ```
//!
//! Everything here is allocation-free and free of `unsafe`; nothing panics on any frame bytes or
//! argument value.

use core::fmt;

use onic_hal::regs::shell::{DEFAULT_HASH_KEY_WORDS, HASH_KEY_WORDS, INDIR_TABLE_ENTRIES};

mod published;
pub mod shell_hash;
pub mod toeplitz;

pub use published::PublishedHasher;

pub use shell_hash::{
    common_case, ipv4_hash_type, shell_hash_reference, ShellHasher, ShellTuple, COMMON_LEN,
};
pub use toeplitz::{toeplitz_reference, Toeplitz};

/// Length of the shell's RSS key in bytes (10 registers of 32 bits, hardware.md §9.1).
pub const KEY_LEN: usize = 4 * HASH_KEY_WORDS;

/// Number of entries of the shell's indirection table (hardware.md §9.1).
pub const TABLE_LEN: usize = INDIR_TABLE_ENTRIES;

/// Mask applied to a hash to index the indirection table: only the low 7 bits are used
/// (hardware.md §9.4).
pub const TABLE_INDEX_MASK: u32 = (TABLE_LEN as u32) - 1;

/// A 40-byte RSS key in ethtool byte order (the order `ethtool -X hkey` takes and `ethtool -x`
/// prints).
///
/// Register word `k` of the shell holds bytes `4k..4k+4` with byte `4k` in bits 7..0
/// (hardware.md §9.2); [`RssKey::to_register_words`] and [`RssKey::from_register_words`] convert.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RssKey([u8; KEY_LEN]);

impl RssKey {
    /// The key the shell's RTL holds after reset (hardware.md §9.3). It is not the common Microsoft
    /// key.
    pub const DEFAULT: RssKey = RssKey::from_register_words(DEFAULT_HASH_KEY_WORDS);

    /// The Microsoft RSS verification key (`6d 5a 56 da ...`), which many NICs use as their default
    /// and which the published Toeplitz test vectors are computed with.
    pub const MICROSOFT: RssKey = RssKey([
        0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0, 0xd0,
        0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42,
        0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
    ]);

    /// A key from its 40 bytes in ethtool order.
    #[must_use]
    pub const fn new(bytes: [u8; KEY_LEN]) -> Self {
        Self(bytes)
    }

    /// A key from a byte slice, which must be exactly [`KEY_LEN`] bytes long.
    ///
    /// # Errors
    ///
    /// [`RssError::KeyLength`] for any other length.
    pub fn from_slice(bytes: &[u8]) -> Result<Self, RssError> {
        match <[u8; KEY_LEN]>::try_from(bytes) {
            Ok(b) => Ok(Self(b)),
            Err(_) => Err(RssError::KeyLength {
                len: bytes.len(),
                min: KEY_LEN,
                max: KEY_LEN,
            }),
        }
    }

    /// The key as the shell's 10 hash-key registers hold it: word `k` = bytes `4k..4k+4`,
    /// little-endian (byte `4k` in bits 7..0), hardware.md §9.2.
    #[must_use]
    pub const fn from_register_words(words: [u32; HASH_KEY_WORDS]) -> Self {
        let mut bytes = [0u8; KEY_LEN];
        let mut k = 0;
        while k < HASH_KEY_WORDS {
            let w = words[k].to_le_bytes();
            bytes[4 * k] = w[0];
            bytes[4 * k + 1] = w[1];
            bytes[4 * k + 2] = w[2];
            bytes[4 * k + 3] = w[3];
            k += 1;
        }
        Self(bytes)
    }

    /// The register values that load this key: the inverse of [`RssKey::from_register_words`].
    #[must_use]
    pub const fn to_register_words(&self) -> [u32; HASH_KEY_WORDS] {
        let mut words = [0u32; HASH_KEY_WORDS];
        let mut k = 0;
        while k < HASH_KEY_WORDS {
            let b = &self.0;
            words[k] = u32::from_le_bytes([b[4 * k], b[4 * k + 1], b[4 * k + 2], b[4 * k + 3]]);
            k += 1;
        }
        words
    }

    /// The key bytes in ethtool order.
    #[must_use]
    pub const fn as_bytes(&self) -> &[u8; KEY_LEN] {
        &self.0
    }
}

impl Default for RssKey {
    /// The RTL reset key, [`RssKey::DEFAULT`].
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl fmt::Debug for RssKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RssKey(")?;
        for (i, b) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ":")?;
            }
            write!(f, "{b:02x}")?;
        }
        write!(f, ")")
    }
}

/// What a hash value covers, in the sense a consumer of an RX hash needs it (Linux `skb->hash` with
/// `PKT_HASH_TYPE_*`, XDP `bpf_xdp_metadata_rx_hash` with `enum xdp_rss_hash_type`).
///
/// The shell always hashes the 4 bytes after the IPv4 header, whatever the protocol, and also for
/// fragments (hardware.md §9.4). Those bytes identify a flow only for some protocols, so the type
/// is decided as follows (see [`ShellTuple::parse`]):
///
/// | Frame | Type | Why |
/// | --- | --- | --- |
/// | IPv4 TCP, UDP, UDP-Lite, SCTP, DCCP, not a fragment | [`L4Ipv4`](Self::L4Ipv4) | the 4 bytes are the source and destination ports |
/// | IPv4 ESP, not a fragment | [`L4Ipv4`](Self::L4Ipv4) | the 4 bytes are the SPI |
/// | IPv4 with IHL < 5 | [`L3Ipv4`](Self::L3Ipv4) | the shell zeroes the 4 bytes: only protocol and addresses count |
/// | IPv4 fragment (MF set or offset ≠ 0), any protocol | [`None`](Self::None) | the 4 bytes are ports in the first fragment only and payload in the others: packets of one flow hash differently |
/// | IPv4 ICMP, IGMP, GRE, any other protocol | [`None`](Self::None) | the 4 bytes are per-packet fields (ICMP checksum, lengths, ...) |
/// | IPv4 frame cut short before the end of the fields the type needs | [`None`](Self::None) | missing bytes were hashed as 0 |
/// | EtherType 0x0800 but IP version ≠ 4 | [`None`](Self::None) | the shell does not check the version; the value is not a flow hash |
/// | non-IPv4 (IPv6, ARP, QinQ, ...) | [`None`](Self::None) | hash 0, or the tagged-non-IPv4 quirk of hardware.md §9.4 |
///
/// `None` still comes with the value the shell computed (it decides the queue); it only says the
/// value must not be used as a flow hash, so the OS computes its own.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum RssHashType {
    /// The hash covers the IPv4 addresses, the protocol and the L4 ports (or the ESP SPI).
    /// Linux: `PKT_HASH_TYPE_L4`; XDP: see [`RssHashType::xdp_rss_type_for`].
    L4Ipv4,
    /// The hash covers only IPv4 protocol and addresses. Linux: `PKT_HASH_TYPE_L3`; XDP:
    /// `XDP_RSS_TYPE_L3_IPV4`.
    L3Ipv4,
    /// The value is not a flow hash. Linux: `PKT_HASH_TYPE_NONE` (do not set `skb->hash`); XDP:
    /// `XDP_RSS_TYPE_NONE`.
    #[default]
    None,
}

/// Values of Linux's `enum xdp_rss_hash_type` (include/net/xdp.h), as the XDP `rx_hash` kfunc
/// reports them.
pub mod xdp {
    /// `XDP_RSS_TYPE_NONE` (also `XDP_RSS_TYPE_L2`).
    pub const TYPE_NONE: u32 = 0;
    /// `XDP_RSS_L3_IPV4`.
    pub const L3_IPV4: u32 = 1 << 0;
    /// `XDP_RSS_L3_IPV6`.
    pub const L3_IPV6: u32 = 1 << 1;
    /// `XDP_RSS_L3_DYNHDR`.
    pub const L3_DYNHDR: u32 = 1 << 2;
    /// `XDP_RSS_L4`.
    pub const L4: u32 = 1 << 3;
    /// `XDP_RSS_L4_TCP`.
    pub const L4_TCP: u32 = 1 << 4;
    /// `XDP_RSS_L4_UDP`.
    pub const L4_UDP: u32 = 1 << 5;
    /// `XDP_RSS_L4_SCTP`.
    pub const L4_SCTP: u32 = 1 << 6;
    /// `XDP_RSS_L4_IPSEC`.
    pub const L4_IPSEC: u32 = 1 << 7;
    /// `XDP_RSS_L4_ICMP`.
    pub const L4_ICMP: u32 = 1 << 8;
    /// `XDP_RSS_TYPE_L3_IPV4`.
    pub const TYPE_L3_IPV4: u32 = L3_IPV4;
    /// `XDP_RSS_TYPE_L4_IPV4_TCP`.
    pub const TYPE_L4_IPV4_TCP: u32 = L3_IPV4 | L4 | L4_TCP;
    /// `XDP_RSS_TYPE_L4_IPV4_UDP`.
    pub const TYPE_L4_IPV4_UDP: u32 = L3_IPV4 | L4 | L4_UDP;
    /// `XDP_RSS_TYPE_L4_IPV4_SCTP`.
    pub const TYPE_L4_IPV4_SCTP: u32 = L3_IPV4 | L4 | L4_SCTP;
    /// `XDP_RSS_TYPE_L4_IPV4_IPSEC`.
    pub const TYPE_L4_IPV4_IPSEC: u32 = L3_IPV4 | L4 | L4_IPSEC;
    /// An L4 hash over IPv4 whose L4 protocol has no flag of its own (UDP-Lite, DCCP): the
    /// `XDP_RSS_L3_IPV4 | XDP_RSS_L4` bit combination, which has no enumerator name in Linux.
    pub const TYPE_L4_IPV4_OTHER: u32 = L3_IPV4 | L4;
}

/// IP protocol numbers the hash type depends on.
pub(crate) mod ipproto {
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// DCCP.
    pub const DCCP: u8 = 33;
    /// ESP.
    pub const ESP: u8 = 50;
    /// SCTP.
    pub const SCTP: u8 = 132;
    /// UDP-Lite.
    pub const UDPLITE: u8 = 136;
}

impl RssHashType {
    /// The `enum xdp_rss_hash_type` value when the IP protocol is not at hand: `L4Ipv4` gives
    /// `XDP_RSS_L3_IPV4 | XDP_RSS_L4` (0x09), `L3Ipv4` gives `XDP_RSS_TYPE_L3_IPV4` (0x01), `None`
    /// gives `XDP_RSS_TYPE_NONE` (0). Prefer [`RssHashType::xdp_rss_type_for`].
    #[must_use]
    pub const fn xdp_rss_type(self) -> u32 {
        match self {
            Self::L4Ipv4 => xdp::TYPE_L4_IPV4_OTHER,
            Self::L3Ipv4 => xdp::TYPE_L3_IPV4,
            Self::None => xdp::TYPE_NONE,
        }
    }

    /// The `enum xdp_rss_hash_type` value for a frame with IPv4 protocol `ip_protocol` (from
    /// [`ShellTuple::protocol`]):
    ///
    /// | Type | Protocol | XDP value |
    /// | --- | --- | --- |
    /// | `L4Ipv4` | TCP (6) | `XDP_RSS_TYPE_L4_IPV4_TCP` (0x19) |
    /// | `L4Ipv4` | UDP (17) | `XDP_RSS_TYPE_L4_IPV4_UDP` (0x29) |
    /// | `L4Ipv4` | SCTP (132) | `XDP_RSS_TYPE_L4_IPV4_SCTP` (0x49) |
    /// | `L4Ipv4` | ESP (50) | `XDP_RSS_TYPE_L4_IPV4_IPSEC` (0x89) |
    /// | `L4Ipv4` | UDP-Lite, DCCP | `XDP_RSS_L3_IPV4 \| XDP_RSS_L4` (0x09) |
    /// | `L3Ipv4` | any | `XDP_RSS_TYPE_L3_IPV4` (0x01) |
    /// | `None` | any | `XDP_RSS_TYPE_NONE` (0) |
    #[must_use]
    pub const fn xdp_rss_type_for(self, ip_protocol: u8) -> u32 {
        match self {
            Self::L4Ipv4 => match ip_protocol {
                ipproto::TCP => xdp::TYPE_L4_IPV4_TCP,
                ipproto::UDP => xdp::TYPE_L4_IPV4_UDP,
                ipproto::SCTP => xdp::TYPE_L4_IPV4_SCTP,
                ipproto::ESP => xdp::TYPE_L4_IPV4_IPSEC,
                _ => xdp::TYPE_L4_IPV4_OTHER,
            },
            Self::L3Ipv4 => xdp::TYPE_L3_IPV4,
            Self::None => xdp::TYPE_NONE,
        }
    }

    /// Short lower-case name: `l4`, `l3` or `none`.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::L4Ipv4 => "l4",
            Self::L3Ipv4 => "l3",
            Self::None => "none",
        }
    }
}

impl fmt::Display for RssHashType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The RX hash of one frame: the value the shell computed and what it covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RxHash {
    /// The 32-bit hash, exactly as the shell's RTL computes it.
    pub value: u32,
    /// What the value covers.
    pub kind: RssHashType,
}

/// The shell's RX hash of a received frame and the IPv4 protocol it was parsed with (0 when not
/// IPv4): what the RX path hands an XDP program or the OS.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FrameHash {
    /// The hash and what it covers.
    pub hash: RxHash,
    /// The IPv4 protocol ([`ShellTuple::protocol`]), for [`RssHashType::xdp_rss_type_for`].
    pub protocol: u8,
}

/// Something that computes the shell's RX hash of received frames, bit for bit as the RTL does:
/// [`ShellHasher`] (table-driven, portable, the reference every other implementation is checked
/// against), or an accelerated implementation from another crate (`onic-accel`: carry-less
/// multiply) that the RX path takes through this trait.
pub trait RxHasher {
    /// The hash of `frame` (bytes from the destination MAC on), with its protocol.
    fn frame_hash(&self, frame: &[u8]) -> FrameHash;
}

impl RxHasher for ShellHasher {
    #[inline]
    fn frame_hash(&self, frame: &[u8]) -> FrameHash {
        self.hash_frame_with_protocol(frame)
    }
}

impl RxHash {
    /// The indirection-table index the shell uses for this hash: `value & 0x7F`.
    #[must_use]
    pub const fn table_index(&self) -> usize {
        (self.value & TABLE_INDEX_MASK) as usize
    }
}

/// Why an RSS operation was refused. Every operation that returns one has changed nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum RssError {
    /// A key of `len` bytes where `min..=max` bytes are accepted (40 and 40 for the shell).
    KeyLength {
        /// Length given.
        len: usize,
        /// Shortest accepted.
        min: usize,
        /// Longest accepted.
        max: usize,
    },
    /// An indirection table of `len` entries; the shell's has exactly 128.
    TableLength {
        /// Number of entries given.
        len: usize,
    },
    /// Entry `index` names queue `queue`, but the function has only `rx_queues` RX queues.
    QueueOutOfRange {
        /// Table index of the first offending entry.
        index: usize,
        /// The queue it names.
        queue: u16,
        /// Number of RX queues of the function.
        rx_queues: u16,
    },
    /// A hash function other than Toeplitz (what the shell reports) or "no change". Carries the
    /// ethtool `hfunc` bits given.
    UnsupportedHashFunction(u8),
    /// A function with no RX queue.
    NoQueues,
    /// `equal n` with `n` = 0 or more than the `rx_queues` RX queues.
    EqualOutOfRange {
        /// The `n` given.
        n: u16,
        /// Number of RX queues of the function.
        rx_queues: u16,
    },
    /// `weight ...` with every weight 0.
    WeightsAllZero,
    /// `weight ...` whose sum exceeds the 128 table entries (ethtool's rule).
    WeightSumTooLarge {
        /// Sum of the weights.
        sum: u64,
    },
    /// A new RX queue count below a queue the user-set table still names.
    QueuesInUse {
        /// Queue count asked for.
        rx_queues: u16,
        /// Highest queue the table names.
        max_entry: u16,
    },
    /// A change through one function's RSS state with another function's device: the state
    /// would have been written to the wrong function's registers.
    OtherFunction {
        /// The function the state belongs to.
        owner: onic_hal::FunctionId,
        /// The function of the device given.
        given: onic_hal::FunctionId,
    },
    /// Another writer was rebuilding the datapaths' hasher at the same moment: the new key is in
    /// the shell, the hasher still has the old one.
    HasherBusy,
}

impl fmt::Display for RssError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::KeyLength { len, min, max } if min == max => {
                write!(f, "RSS key of {len} bytes, expected {min}")
            }
            Self::KeyLength { len, min, max } => {
                write!(f, "RSS key of {len} bytes, expected {min} to {max}")
            }
            Self::TableLength { len } => {
                write!(f, "indirection table of {len} entries, expected {TABLE_LEN}")
            }
            Self::QueueOutOfRange {
                index,
                queue,
                rx_queues,
            } => write!(
                f,
                "indirection entry {index} names queue {queue}, but there are only {rx_queues} RX queues"
            ),
            Self::UnsupportedHashFunction(h) => write!(
                f,
                "hash function 0x{h:x} not supported (only toeplitz or no change)"
            ),
            Self::NoQueues => write!(f, "no RX queues"),
            Self::EqualOutOfRange { n, rx_queues } => {
                write!(f, "equal {n}: must be 1 to {rx_queues} (the number of RX queues)")
            }
            Self::WeightsAllZero => write!(f, "at least one weight must be non-zero"),
            Self::WeightSumTooLarge { sum } => write!(
                f,
                "total weight {sum} exceeds the size of the indirection table ({TABLE_LEN})"
            ),
            Self::QueuesInUse { rx_queues, max_entry } => write!(
                f,
                "cannot use {rx_queues} RX queues: the indirection table names queue {max_entry}"
            ),
            Self::OtherFunction { owner, given } => write!(
                f,
                "the RSS state of function {owner} was given the device of function {given}"
            ),
            Self::HasherBusy => f.write_str("another writer was rebuilding the datapaths' RSS hasher"),
        }
    }
}

impl core::error::Error for RssError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_key_bytes_match_spec() {
        // hardware.md §9.3, as ethtool key bytes.
        let expected = [
            0x17, 0x14, 0xe3, 0xd6, 0x7e, 0xc8, 0x6c, 0x37, 0xa6, 0xa7, 0x1b, 0x01, 0xbb, 0x91, 0x1b, 0xdc,
            0x24, 0xe2, 0x72, 0x78, 0x4b, 0x40, 0xd0, 0xbf, 0xb8, 0x74, 0x03, 0x26, 0x6f, 0x0f, 0x27, 0xd9,
            0x86, 0x43, 0xdc, 0x18, 0xde, 0x37, 0x9c, 0x7c,
        ];
        assert_eq!(RssKey::DEFAULT.as_bytes(), &expected);
        assert_eq!(RssKey::DEFAULT.to_register_words(), DEFAULT_HASH_KEY_WORDS);
        assert_eq!(RssKey::default(), RssKey::DEFAULT);
    }

    #[test]
    fn register_words_follow_spec_example() {
        let w = RssKey::MICROSOFT.to_register_words();
        assert_eq!(w[0], 0xDA565A6D);
        assert_eq!(w[1], 0xC20E5B25);
        assert_eq!(w[9], 0xFA01ACBE);
        assert_eq!(RssKey::from_register_words(w), RssKey::MICROSOFT);
    }

    #[test]
    fn key_from_slice_checks_length() {
        assert_eq!(
            RssKey::from_slice(RssKey::MICROSOFT.as_bytes()),
            Ok(RssKey::MICROSOFT)
        );
        assert_eq!(
            RssKey::from_slice(&[0; 39]),
            Err(RssError::KeyLength {
                len: 39,
                min: 40,
                max: 40
            })
        );
        assert!(RssKey::from_slice(&[0; 52]).is_err());
    }

    #[test]
    fn xdp_mapping() {
        assert_eq!(RssHashType::L4Ipv4.xdp_rss_type_for(6), 0x19);
        assert_eq!(RssHashType::L4Ipv4.xdp_rss_type_for(17), 0x29);
        assert_eq!(RssHashType::L4Ipv4.xdp_rss_type_for(132), 0x49);
        assert_eq!(RssHashType::L4Ipv4.xdp_rss_type_for(50), 0x89);
        assert_eq!(RssHashType::L4Ipv4.xdp_rss_type_for(136), 0x09);
        assert_eq!(RssHashType::L3Ipv4.xdp_rss_type_for(6), 0x01);
        assert_eq!(RssHashType::None.xdp_rss_type_for(6), 0);
        assert_eq!(RssHashType::L4Ipv4.xdp_rss_type(), 0x09);
    }
}
