//! The settings ethtool changes on a function, each checked all-or-nothing before anything
//! changes: channels (`-L`), ring sizes (`-G`), the MTU, the RX flow hash (`-n/-N
//! rx-flow-hash`), which the shell fixes (hardware.md §9.4), and the RX interrupt moderation
//! (`-C`, [`crate::moderation`]).

use core::fmt;

use onic_hal::regs::qdma::tables::RING_SIZES;

use crate::config::{BufSizeIdx, RingSizeIdx};
use crate::moderation::{ModerationError, RxModeration};
use crate::rss::RssError;

/// Why an ethtool request was refused. Nothing was changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum EthtoolError {
    /// An RSS request (`-X`) or a channel change the RSS table does not allow.
    Rss(RssError),
    /// `-L combined n` outside `1..=max`.
    Channels {
        /// Count asked for.
        requested: u32,
        /// The function's queue pairs.
        max: u16,
    },
    /// `-L rx n` / `tx n` / `other n`: the queues come in pairs, only `combined` is supported.
    ChannelsNotCombined,
    /// `-G` with a ring size the QDMA ring-size table does not have.
    RingSize {
        /// Descriptors asked for.
        requested: u32,
    },
    /// `-G` for rings this device does not have (mini, jumbo).
    RingKind,
    /// An MTU outside `min..=max`.
    Mtu {
        /// MTU asked for.
        requested: u32,
        /// Smallest accepted.
        min: u32,
        /// Largest accepted.
        max: u32,
    },
    /// `-N rx-flow-hash` asking for other fields than the shell hashes: the shell's hash input
    /// is fixed in the RTL.
    FlowHashFixed {
        /// The flow type.
        flow_type: u32,
        /// The fields asked for (`RXH_*` bits).
        requested: u64,
    },
    /// A flow type ethtool does not define.
    FlowType(u32),
    /// `-C rx-usecs` above the longest completion timer, or `rx-frames` outside the count
    /// thresholds ([`crate::moderation::RxModeration::for_request`]).
    Coalesce {
        /// `rx-usecs` asked for.
        usecs: u32,
        /// `rx-frames` asked for.
        frames: u32,
    },
    /// An RX queue's moderation change the core refused ([`crate::moderation`]).
    Moderation(ModerationError),
    /// `--set-fec` with no mode, several modes, or bits ethtool does not define: exactly one of
    /// auto, off and rs is a request ([`crate::device::line::FecMode::from_ethtool`]).
    Fec {
        /// ethtool's FEC mode bits asked for.
        requested: u32,
    },
    /// `--set-fec baser` or `llrs`: the CMAC has RS-FEC only.
    FecUnsupported {
        /// ethtool's FEC mode bits asked for.
        requested: u32,
    },
}

/// `ethtool -C rx-usecs, rx-frames`: the moderation coming closest without exceeding either
/// ([`RxModeration::for_request`]).
///
/// # Errors
///
/// [`EthtoolError::Coalesce`] for a time or count the QDMA's tables cannot give.
pub fn rx_moderation_for(usecs: u32, frames: u32) -> Result<RxModeration, EthtoolError> {
    RxModeration::for_request(usecs, frames).ok_or(EthtoolError::Coalesce { usecs, frames })
}

impl fmt::Display for EthtoolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Rss(e) => write!(f, "RSS: {e}"),
            Self::Channels { requested, max } => {
                write!(f, "{requested} combined channels asked for, the function has 1..={max}")
            }
            Self::ChannelsNotCombined => f.write_str("only combined channels are supported (RX and TX come in pairs)"),
            Self::RingSize { requested } => write!(
                f,
                "no ring of {requested} descriptors in the QDMA ring-size table (sizes: 63, 127, 191, 255, 383, 511, 767, 1023, 1535, 3071, 4095, 6143, 8191, 12287, 16383)"
            ),
            Self::RingKind => f.write_str("only RX and TX rings can be sized"),
            Self::Mtu { requested, min, max } => write!(f, "MTU {requested} is outside {min}..={max}"),
            Self::FlowHashFixed { flow_type, requested } => write!(
                f,
                "flow type {flow_type}: the shell's hash fields are fixed, {requested:#x} cannot be set"
            ),
            Self::FlowType(t) => write!(f, "unknown flow type {t}"),
            Self::Coalesce { usecs, frames } => write!(
                f,
                "rx-usecs {usecs}, rx-frames {frames}: the completion timers go up to {} us, the count thresholds from {} to {}",
                RxModeration::MAX_USECS,
                RxModeration::MIN_FRAMES,
                RxModeration::MAX_FRAMES
            ),
            Self::Moderation(e) => write!(f, "{e}"),
            Self::Fec { requested } => write!(
                f,
                "FEC modes {requested:#x}: one of auto, off and rs, alone"
            ),
            Self::FecUnsupported { requested } => {
                write!(f, "FEC modes {requested:#x}: the CMAC has RS-FEC only")
            }
        }
    }
}

impl core::error::Error for EthtoolError {}

impl From<ModerationError> for EthtoolError {
    fn from(e: ModerationError) -> Self {
        Self::Moderation(e)
    }
}

impl From<RssError> for EthtoolError {
    fn from(e: RssError) -> Self {
        Self::Rss(e)
    }
}

/// `ethtool -l`: the channel counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Channels {
    /// Queue pairs the function owns (its FMAP range): the most `-L combined` accepts.
    pub max_combined: u16,
    /// Queue pairs in use (RX queues the RSS table spreads over).
    pub combined: u16,
}

/// An `ethtool -L` request (Linux `struct ethtool_channels`, counts only).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ChannelsRequest {
    /// RX-only channels (must be 0).
    pub rx: u32,
    /// TX-only channels (must be 0).
    pub tx: u32,
    /// Other channels (must be 0).
    pub other: u32,
    /// Queue pairs.
    pub combined: u32,
}

/// Checks a channel request against a function with `max` queue pairs; returns the pair count.
///
/// # Errors
///
/// [`EthtoolError::ChannelsNotCombined`], [`EthtoolError::Channels`].
pub fn check_channels(req: ChannelsRequest, max: u16) -> Result<u16, EthtoolError> {
    if req.rx != 0 || req.tx != 0 || req.other != 0 {
        return Err(EthtoolError::ChannelsNotCombined);
    }
    match u16::try_from(req.combined) {
        Ok(n) if n >= 1 && n <= max => Ok(n),
        _ => Err(EthtoolError::Channels {
            requested: req.combined,
            max,
        }),
    }
}

/// The ring size for `descriptors` usable descriptors: the first GLBL_RNG_SZ entry with
/// `descriptors + 1` entries (one is the status slot).
///
/// # Errors
///
/// [`EthtoolError::RingSize`] when the table has no such entry.
fn ring_for(descriptors: u32) -> Result<RingSizeIdx, EthtoolError> {
    let err = EthtoolError::RingSize {
        requested: descriptors,
    };
    let entries = descriptors.checked_add(1).ok_or(err)?;
    let i = RING_SIZES.iter().position(|&n| n == entries).ok_or(err)?;
    RingSizeIdx::new(u8::try_from(i).map_err(|_| err)?).map_err(|_| err)
}

/// `ethtool -g` / `-G` view: descriptors per ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RingParams {
    /// Largest RX ring.
    pub rx_max: u32,
    /// Largest TX ring.
    pub tx_max: u32,
    /// Current RX ring (C2H descriptors; the completion ring has the same size).
    pub rx: u32,
    /// Current TX ring.
    pub tx: u32,
}

/// An `ethtool -G` request (Linux `struct ethtool_ringparam`, pending counts).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RingRequest {
    /// RX descriptors.
    pub rx: u32,
    /// TX descriptors.
    pub tx: u32,
    /// RX mini ring (must be 0).
    pub rx_mini: u32,
    /// RX jumbo ring (must be 0).
    pub rx_jumbo: u32,
}

/// Smallest MTU (Linux `ETH_MIN_MTU`).
pub const MIN_MTU: u32 = 68;
/// Ethernet header bytes between the MTU and the frame length (the shell's frame length has no
/// FCS).
const ETH_HEADER: u32 = 14;

/// The settings `ethtool -G` and MTU changes act on, validated as a whole; the OS shim recreates
/// the queues with them (rings) or just applies them (MTU).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct NetSettings {
    rx_ring: RingSizeIdx,
    tx_ring: RingSizeIdx,
    buf: BufSizeIdx,
    max_frame_len: u32,
    mtu: u32,
}

impl NetSettings {
    /// Settings for queues with these rings and buffer, on a shell passing frames up to
    /// `max_frame_len` bytes (without FCS; the stock shell: 1514), with the largest MTU they
    /// allow.
    #[must_use]
    pub fn new(rx_ring: RingSizeIdx, tx_ring: RingSizeIdx, buf: BufSizeIdx, max_frame_len: u32) -> Self {
        let mut s = Self {
            rx_ring,
            tx_ring,
            buf,
            max_frame_len,
            mtu: MIN_MTU,
        };
        s.mtu = s.max_mtu().max(MIN_MTU);
        s
    }

    /// `ethtool -g`.
    #[must_use]
    pub fn rings(&self) -> RingParams {
        let max = RING_SIZES.iter().copied().max().unwrap_or(0).saturating_sub(1);
        RingParams {
            rx_max: max,
            tx_max: max,
            rx: u32::from(self.rx_ring.usable()),
            tx: u32::from(self.tx_ring.usable()),
        }
    }

    /// The ring sizes.
    #[must_use]
    pub const fn ring_sizes(&self) -> (RingSizeIdx, RingSizeIdx) {
        (self.rx_ring, self.tx_ring)
    }

    /// `ethtool -G`: both sizes must be in the QDMA ring-size table; returns the new sizes.
    ///
    /// # Errors
    ///
    /// [`EthtoolError::RingKind`] for mini or jumbo rings, [`EthtoolError::RingSize`]; nothing
    /// changes then.
    pub fn set_rings(&mut self, req: RingRequest) -> Result<(RingSizeIdx, RingSizeIdx), EthtoolError> {
        if req.rx_mini != 0 || req.rx_jumbo != 0 {
            return Err(EthtoolError::RingKind);
        }
        let rx = ring_for(req.rx)?;
        let tx = ring_for(req.tx)?;
        self.rx_ring = rx;
        self.tx_ring = tx;
        Ok((rx, tx))
    }

    /// The largest MTU: a frame must fit one C2H buffer (frames spanning several buffers are
    /// dropped: no multi-buffer support yet) and the shell's largest frame.
    #[must_use]
    pub fn max_mtu(&self) -> u32 {
        self.buf
            .bytes()
            .min(self.max_frame_len)
            .saturating_sub(ETH_HEADER)
    }

    /// The MTU.
    #[must_use]
    pub const fn mtu(&self) -> u32 {
        self.mtu
    }

    /// Sets the MTU.
    ///
    /// # Errors
    ///
    /// [`EthtoolError::Mtu`] outside [`MIN_MTU`]`..=`[`NetSettings::max_mtu`]; nothing changes.
    pub fn set_mtu(&mut self, mtu: u32) -> Result<(), EthtoolError> {
        let max = self.max_mtu();
        if mtu < MIN_MTU || mtu > max {
            return Err(EthtoolError::Mtu {
                requested: mtu,
                min: MIN_MTU,
                max,
            });
        }
        self.mtu = mtu;
        Ok(())
    }
}

/// ethtool flow types (`ETHTOOL_GRXFH` / `-n rx-flow-hash`) and hash-field bits.
pub mod flow {
    /// `TCP_V4_FLOW`.
    pub const TCP_V4: u32 = 0x01;
    /// `UDP_V4_FLOW`.
    pub const UDP_V4: u32 = 0x02;
    /// `SCTP_V4_FLOW`.
    pub const SCTP_V4: u32 = 0x03;
    /// `AH_ESP_V4_FLOW`.
    pub const AH_ESP_V4: u32 = 0x04;
    /// `TCP_V6_FLOW`.
    pub const TCP_V6: u32 = 0x05;
    /// `UDP_V6_FLOW`.
    pub const UDP_V6: u32 = 0x06;
    /// `SCTP_V6_FLOW`.
    pub const SCTP_V6: u32 = 0x07;
    /// `AH_ESP_V6_FLOW`.
    pub const AH_ESP_V6: u32 = 0x08;
    /// `AH_V4_FLOW`.
    pub const AH_V4: u32 = 0x09;
    /// `ESP_V4_FLOW`.
    pub const ESP_V4: u32 = 0x0a;
    /// `AH_V6_FLOW`.
    pub const AH_V6: u32 = 0x0b;
    /// `ESP_V6_FLOW`.
    pub const ESP_V6: u32 = 0x0c;
    /// `IPV4_USER_FLOW`.
    pub const IPV4_USER: u32 = 0x0d;
    /// `IPV6_USER_FLOW`.
    pub const IPV6_USER: u32 = 0x0e;
    /// `IPV4_FLOW`.
    pub const IPV4: u32 = 0x10;
    /// `IPV6_FLOW`.
    pub const IPV6: u32 = 0x11;
    /// `ETHER_FLOW`.
    pub const ETHER: u32 = 0x12;

    /// `FLOW_EXT | FLOW_MAC_EXT | FLOW_RSS`: flags ethtool may set on a flow type; they do not
    /// change which fields are hashed.
    pub const FLAGS: u32 = 0x8000_0000 | 0x4000_0000 | 0x2000_0000;

    /// `RXH_L3_PROTO`: the IP protocol.
    pub const RXH_L3_PROTO: u64 = 1 << 3;
    /// `RXH_IP_SRC`.
    pub const RXH_IP_SRC: u64 = 1 << 4;
    /// `RXH_IP_DST`.
    pub const RXH_IP_DST: u64 = 1 << 5;
    /// `RXH_L4_B_0_1`: the first two bytes after the IP header (source port).
    pub const RXH_L4_B_0_1: u64 = 1 << 6;
    /// `RXH_L4_B_2_3`: the next two (destination port).
    pub const RXH_L4_B_2_3: u64 = 1 << 7;
}

/// What the shell hashes for a flow type (`ethtool -n eth0 rx-flow-hash udp4`), stated as it is:
/// for every IPv4 frame, whatever its protocol, the protocol number, the source and destination
/// addresses and the 4 bytes after the IPv4 header (hardware.md §9.4; for TCP/UDP/SCTP those are
/// the ports, for other protocols whatever lies there). IPv6 and non-IP frames are not hashed
/// (value 0, table entry 0). The flag bits of [`flow::FLAGS`] are ignored.
///
/// # Errors
///
/// [`EthtoolError::FlowType`] for a value ethtool does not define.
pub const fn rx_flow_hash(flow_type: u32) -> Result<u64, EthtoolError> {
    use flow::*;
    match flow_type & !FLAGS {
        TCP_V4 | UDP_V4 | SCTP_V4 | AH_ESP_V4 | AH_V4 | ESP_V4 | IPV4_USER | IPV4 => {
            Ok(RXH_L3_PROTO | RXH_IP_SRC | RXH_IP_DST | RXH_L4_B_0_1 | RXH_L4_B_2_3)
        }
        TCP_V6 | UDP_V6 | SCTP_V6 | AH_ESP_V6 | AH_V6 | ESP_V6 | IPV6_USER | IPV6 | ETHER => Ok(0),
        other => Err(EthtoolError::FlowType(other)),
    }
}

/// `ethtool -N eth0 rx-flow-hash ...`: accepted only if it asks for exactly what the shell
/// already hashes (the RTL's input is fixed).
///
/// # Errors
///
/// [`EthtoolError::FlowHashFixed`], [`EthtoolError::FlowType`].
pub const fn set_rx_flow_hash(flow_type: u32, fields: u64) -> Result<(), EthtoolError> {
    match rx_flow_hash(flow_type) {
        Ok(f) if f == fields => Ok(()),
        Ok(_) => Err(EthtoolError::FlowHashFixed {
            flow_type,
            requested: fields,
        }),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn channels_are_combined_and_bounded() {
        let ok = ChannelsRequest {
            combined: 4,
            ..ChannelsRequest::default()
        };
        assert_eq!(check_channels(ok, 8), Ok(4));
        assert_eq!(
            check_channels(ChannelsRequest { combined: 9, ..ok }, 8),
            Err(EthtoolError::Channels { requested: 9, max: 8 })
        );
        assert!(check_channels(ChannelsRequest { combined: 0, ..ok }, 8).is_err());
        assert!(check_channels(
            ChannelsRequest {
                combined: u32::MAX,
                ..ok
            },
            8
        )
        .is_err());
        assert_eq!(
            check_channels(ChannelsRequest { rx: 1, ..ok }, 8),
            Err(EthtoolError::ChannelsNotCombined)
        );
    }

    #[test]
    fn rings_come_from_the_table_and_bad_sizes_change_nothing() {
        let r = |i| RingSizeIdx::new(i).unwrap();
        let mut s = NetSettings::new(r(8), r(0), BufSizeIdx::new(5).unwrap(), 1514);
        assert_eq!(
            s.rings(),
            RingParams {
                rx_max: 16383,
                tx_max: 16383,
                rx: 1023,
                tx: 4095
            }
        );
        let before = s;
        for bad in [
            RingRequest {
                rx: 1000,
                tx: 4095,
                ..RingRequest::default()
            },
            RingRequest {
                rx: 1023,
                tx: 0,
                ..RingRequest::default()
            },
            RingRequest {
                rx: u32::MAX,
                tx: 4095,
                ..RingRequest::default()
            },
            RingRequest {
                rx: 1023,
                tx: 4095,
                rx_mini: 1,
                ..RingRequest::default()
            },
        ] {
            assert!(s.set_rings(bad).is_err());
            assert_eq!(s, before);
        }
        let (rx, tx) = s
            .set_rings(RingRequest {
                rx: 511,
                tx: 63,
                ..RingRequest::default()
            })
            .unwrap();
        assert_eq!((rx.entries(), tx.entries()), (512, 64));
        assert_eq!(s.rings().rx, 511);
    }

    #[test]
    fn mtu_is_bounded_by_the_buffer_and_the_shell() {
        let r = RingSizeIdx::new(8).unwrap();
        let mut s = NetSettings::new(r, r, BufSizeIdx::new(5).unwrap(), 1514);
        assert_eq!((s.mtu(), s.max_mtu()), (1500, 1500));
        assert_eq!(
            s.set_mtu(1501),
            Err(EthtoolError::Mtu {
                requested: 1501,
                min: 68,
                max: 1500
            })
        );
        assert!(s.set_mtu(67).is_err());
        assert_eq!(s.mtu(), 1500);
        s.set_mtu(9000 - 8000).unwrap();
        assert_eq!(s.mtu(), 1000);
        // A jumbo shell with 3520-byte buffers: a frame must still fit one buffer.
        let jumbo = NetSettings::new(r, r, BufSizeIdx::new(5).unwrap(), 9600);
        assert_eq!(jumbo.max_mtu(), 3520 - 14);
    }

    #[test]
    fn flow_hash_reports_what_the_shell_hashes_and_refuses_changes() {
        let v4 = flow::RXH_L3_PROTO
            | flow::RXH_IP_SRC
            | flow::RXH_IP_DST
            | flow::RXH_L4_B_0_1
            | flow::RXH_L4_B_2_3;
        assert_eq!(rx_flow_hash(flow::UDP_V4), Ok(v4));
        assert_eq!(rx_flow_hash(flow::IPV4), Ok(v4));
        assert_eq!(rx_flow_hash(flow::UDP_V4 | 0x8000_0000), Ok(v4));
        assert_eq!(rx_flow_hash(flow::TCP_V6), Ok(0));
        assert_eq!(rx_flow_hash(0x77), Err(EthtoolError::FlowType(0x77)));
        assert_eq!(set_rx_flow_hash(flow::TCP_V4, v4), Ok(()));
        assert_eq!(
            set_rx_flow_hash(flow::TCP_V4, flow::RXH_IP_SRC | flow::RXH_IP_DST),
            Err(EthtoolError::FlowHashFixed {
                flow_type: flow::TCP_V4,
                requested: 0x30
            })
        );
    }
}
