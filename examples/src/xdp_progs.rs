//! The XDP programs built into `onic run --xdp <name>`, each a few lines over the public API of
//! `onic_core::xdp`.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;

use onic_core::xdp::{swap_macs, XdpAction, XdpBuff, XdpProgram};

/// Redirect target number of the other port in `onic run`'s redirect table.
pub const OTHER_PORT: u32 = 0;

/// Names accepted by `--xdp`, with what they do.
pub const PROGRAMS: &[(&str, &str)] = &[
    ("pass", "every frame to the OS"),
    ("drop", "drop every frame"),
    (
        "tx",
        "swap the MAC addresses and send the frame back out of its port",
    ),
    ("redirect", "send every frame out of the other port"),
    ("drop-udp", "drop UDP datagrams to --udp-port, pass the rest"),
    ("count", "count frames and bytes per flow, pass everything"),
    (
        "icmp-echo",
        "answer IPv4 ICMP echo requests in place (XDP_TX), pass the rest",
    ),
    (
        "arp-bounce",
        "redirect ARP frames once to the next port, marked; drop marked ones",
    ),
];

/// XDP_PASS.
pub fn pass(_: &mut XdpBuff<'_>) -> XdpAction {
    XdpAction::Pass
}

/// XDP_DROP.
pub fn drop_all(_: &mut XdpBuff<'_>) -> XdpAction {
    XdpAction::Drop
}

/// Swaps destination and source MAC, then XDP_TX.
pub fn swap_macs_and_tx(x: &mut XdpBuff<'_>) -> XdpAction {
    swap_macs(x.data_mut());
    XdpAction::Tx
}

/// XDP_REDIRECT to the other port.
pub fn redirect_other_port(x: &mut XdpBuff<'_>) -> XdpAction {
    x.redirect(OTHER_PORT)
}

/// An IPv4 frame's flow: (source, destination, protocol, source port, destination port); ports
/// are the 4 bytes after the IPv4 header (0 if the frame ends before).
pub type Flow = (Ipv4Addr, Ipv4Addr, u8, u16, u16);

/// Parses the IPv4 flow of an Ethernet frame (no VLAN tags); `None` for anything else.
pub fn ipv4_flow(frame: &[u8]) -> Option<Flow> {
    if frame.get(12..14)? != [0x08, 0x00] {
        return None;
    }
    let ip = frame.get(14..)?;
    let ihl = usize::from(ip.first()? & 0x0F) * 4;
    let addr =
        |o: usize| -> Option<Ipv4Addr> { Some(Ipv4Addr::from(<[u8; 4]>::try_from(ip.get(o..o + 4)?).ok()?)) };
    let port = |o: usize| ip.get(o..o + 2).map_or(0, |b| u16::from_be_bytes([b[0], b[1]]));
    Some((addr(12)?, addr(16)?, *ip.get(9)?, port(ihl), port(ihl + 2)))
}

/// Drops UDP datagrams to `port`.
pub fn drop_udp_to(x: &XdpBuff<'_>, port: u16) -> XdpAction {
    match ipv4_flow(x.data()) {
        Some((_, _, 17, _, dport)) if dport == port => XdpAction::Drop,
        _ => XdpAction::Pass,
    }
}

/// Turns an IPv4 ICMP echo request (20-byte IP header) into its reply in place and sends it
/// back (XDP_TX): MACs and addresses exchanged, type 8 -> 0, the checksum adjusted for the type
/// change (RFC 1624) with the same 16-bit arithmetic as `os-linux/xdp/xdp_tx.c`, which reads the
/// field in the machine's (little-endian) order. Everything else passes.
pub fn icmp_echo(x: &mut XdpBuff<'_>) -> XdpAction {
    let d = x.data_mut();
    if d.len() < 42 || d[12..14] != [0x08, 0x00] || d[14] & 0x0f != 5 || d[23] != 1 || d[34] != 8 {
        return XdpAction::Pass;
    }
    for i in 0..6 {
        d.swap(i, i + 6);
    }
    for i in 26..30 {
        d.swap(i, i + 4);
    }
    d[34] = 0;
    let sum = u32::from(u16::from_le_bytes([d[36], d[37]])) + u32::from(0x0800u16.swap_bytes());
    let folded = (sum + (sum >> 16)) as u16;
    d[36..38].copy_from_slice(&folded.to_le_bytes());
    XdpAction::Tx
}

/// Mark of a frame [`arp_bounce`] redirected (the byte after the Ethernet header).
pub const BOUNCE_MARK: u8 = 0xee;

/// The twin of `os-linux/xdp/xdp_redirect.c`: an ARP frame is marked and redirected to the port
/// after the one it came in on (port 0 -> port 1; port 1 has no next port, so the redirect
/// fails); a marked ARP frame is dropped; everything else passes.
pub fn arp_bounce(x: &mut XdpBuff<'_>) -> XdpAction {
    let port = x.ingress_port();
    let d = x.data_mut();
    if d.len() < 15 || d[12..14] != [0x08, 0x06] {
        return XdpAction::Pass;
    }
    if d[14] == BOUNCE_MARK {
        return XdpAction::Drop;
    }
    d[14] = BOUNCE_MARK;
    x.redirect(if port == 0 { OTHER_PORT } else { u32::MAX })
}

/// A built-in program, ready to attach.
#[derive(Debug)]
pub enum Builtin {
    /// [`pass`].
    Pass,
    /// [`drop_all`].
    Drop,
    /// [`swap_macs_and_tx`].
    Tx,
    /// [`redirect_other_port`].
    Redirect,
    /// [`drop_udp_to`] this port.
    DropUdp(u16),
    /// Frames and bytes per flow (`None`: not IPv4); passes everything.
    Count(BTreeMap<Option<Flow>, (u64, u64)>),
    /// [`icmp_echo`].
    IcmpEcho,
    /// [`arp_bounce`].
    ArpBounce,
}

impl Builtin {
    /// The program called `name`.
    ///
    /// # Errors
    ///
    /// An unknown name.
    pub fn by_name(name: &str, udp_port: u16) -> Result<Self, String> {
        Ok(match name {
            "pass" => Self::Pass,
            "drop" => Self::Drop,
            "tx" => Self::Tx,
            "redirect" => Self::Redirect,
            "drop-udp" => Self::DropUdp(udp_port),
            "count" => Self::Count(BTreeMap::new()),
            "icmp-echo" => Self::IcmpEcho,
            "arp-bounce" => Self::ArpBounce,
            _ => {
                let known: Vec<&str> = PROGRAMS.iter().map(|p| p.0).collect();
                return Err(format!(
                    "unknown XDP program '{name}' (built in: {})",
                    known.join(", ")
                ));
            }
        })
    }
}

impl XdpProgram for Builtin {
    fn run(&mut self, x: &mut XdpBuff<'_>) -> XdpAction {
        match self {
            Self::Pass => pass(x),
            Self::Drop => drop_all(x),
            Self::Tx => swap_macs_and_tx(x),
            Self::Redirect => redirect_other_port(x),
            Self::DropUdp(port) => drop_udp_to(x, *port),
            Self::IcmpEcho => icmp_echo(x),
            Self::ArpBounce => arp_bounce(x),
            Self::Count(flows) => {
                let e = flows.entry(ipv4_flow(x.data())).or_default();
                e.0 += 1;
                e.1 += x.len() as u64;
                XdpAction::Pass
            }
        }
    }
}
