//! A traffic generator inside the emulated card: UDP frames arriving at one of its ports at a
//! fixed interval of the emulator's clock, as if a sending machine were cabled to it. Under
//! QEMU's `-icount` that clock is the guest's instruction count, so the frames arrive at the
//! same point of the guest's work in every run and a benchmark of the receiving guest repeats
//! exactly (`cargo xtask vm-bench --sender card`). Its knobs are registers of the control window
//! ([`crate::ctl`]); a real card has no such thing.
//!
//! Each frame is Ethernet II / IPv4 / UDP: from [`SRC_MAC`], [`SRC_IP`] and [`SRC_PORT`] to the
//! configured MAC, address and port; IPv4 with IHL 5, TTL 64, DF, the header checksum and the
//! identification the low 16 bits of the sequence number; UDP with its checksum (as a kernel's
//! socket sends it); the payload begins with the frame's 64-bit sequence number (big-endian, from
//! 0, never reset), the rest is zero.

/// Source MAC of the generated frames (locally administered).
pub const SRC_MAC: [u8; 6] = [0x02, 0x00, 0x00, 0x00, 0x0C, 0x01];
/// Source IPv4 address: 192.0.2.1 (TEST-NET-1).
pub const SRC_IP: [u8; 4] = [192, 0, 2, 1];
/// Source UDP port.
pub const SRC_PORT: u16 = 9000;
/// Shortest frame (without FCS): the Ethernet minimum.
pub const MIN_LEN: u32 = 60;
/// Longest frame (without FCS): a 1500-byte MTU.
pub const MAX_LEN: u32 = 1514;
/// Shortest interval between two frames, in nanoseconds of the emulator's clock.
pub const MIN_INTERVAL_NS: u32 = 1000;
/// At most this many frames arrive in one [`Generator::due`]: when the emulator's clock jumped
/// by more intervals than that (the card was not run for a while), the frames beyond it are not
/// sent and the schedule restarts one interval after that moment, instead of flooding the
/// receiver with every frame it "missed".
pub const MAX_BURST: u32 = 64;

use onic_sim::inet::{checksum, sum_words};

const ETH_LEN: usize = 14;
const IP_LEN: usize = 20;
const UDP_LEN: usize = 8;
const HEADERS: usize = ETH_LEN + IP_LEN + UDP_LEN;

/// The generator's knobs and schedule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generator {
    /// The card port the frames arrive at (or leave, with [`Generator::egress`]).
    pub port: u8,
    /// The frames leave [`Generator::port`] onto its wire instead of arriving at it.
    pub egress: bool,
    /// Frame length without FCS ([`MIN_LEN`]..=[`MAX_LEN`]; only [`Generator::set_len`] sets
    /// it, so a frame always has room for its headers and sequence number).
    len: u32,
    /// Nanoseconds between two frames (at least [`MIN_INTERVAL_NS`]).
    interval_ns: u32,
    /// Destination MAC.
    pub dst_mac: [u8; 6],
    /// Destination IPv4 address.
    pub dst_ip: [u8; 4],
    /// Destination UDP port.
    pub dst_port: u16,
    /// Frames generated so far (the next frame's sequence number).
    generated: u64,
    /// `Some(t)`: running, the next frame is due at time `t` (`None` inside: at the next run).
    next: Option<Option<u64>>,
}

impl Default for Generator {
    /// Stopped; 60-byte frames every 20 us to the broadcast MAC, 192.0.2.2 port 9, at port 0.
    fn default() -> Self {
        Self {
            port: 0,
            egress: false,
            len: MIN_LEN,
            interval_ns: 20_000,
            dst_mac: [0xFF; 6],
            dst_ip: [192, 0, 2, 2],
            dst_port: 9,
            generated: 0,
            next: None,
        }
    }
}

impl Generator {
    /// Frame length without FCS.
    #[must_use]
    pub fn frame_len(&self) -> u32 {
        self.len
    }

    /// Nanoseconds between two frames.
    #[must_use]
    pub fn interval_ns(&self) -> u32 {
        self.interval_ns
    }

    /// Frames generated so far.
    #[must_use]
    pub fn generated(&self) -> u64 {
        self.generated
    }

    /// Whether it is running.
    #[must_use]
    pub fn running(&self) -> bool {
        self.next.is_some()
    }

    /// Starts (the first frame at the next [`Generator::due`]) or stops it. Starting a running
    /// generator changes nothing.
    pub fn set_running(&mut self, on: bool) {
        match (on, self.next) {
            (true, None) => self.next = Some(None),
            (false, _) => self.next = None,
            _ => {}
        }
    }

    /// Sets the frame length; a length outside [`MIN_LEN`]..=[`MAX_LEN`] is ignored.
    pub fn set_len(&mut self, len: u32) {
        if (MIN_LEN..=MAX_LEN).contains(&len) {
            self.len = len;
        }
    }

    /// Sets the interval; one under [`MIN_INTERVAL_NS`] is ignored. It applies from the frame
    /// after the next.
    pub fn set_interval(&mut self, ns: u32) {
        if ns >= MIN_INTERVAL_NS {
            self.interval_ns = ns;
        }
    }

    /// Sets the destination UDP port; 0 is ignored.
    pub fn set_dst_port(&mut self, port: u32) {
        if let Ok(p @ 1..) = u16::try_from(port) {
            self.dst_port = p;
        }
    }

    /// The time of the next frame, if running and scheduled.
    #[must_use]
    pub fn next_at(&self) -> Option<u64> {
        self.next.flatten()
    }

    /// The frames due by time `now_ns` (at most [`MAX_BURST`]), each counted; the schedule moves
    /// past them.
    pub fn due(&mut self, now_ns: u64) -> Vec<Vec<u8>> {
        let Some(next) = self.next else {
            return Vec::new();
        };
        let mut at = next.unwrap_or(now_ns);
        let step = u64::from(self.interval_ns);
        let mut frames = Vec::new();
        while at <= now_ns {
            if frames.len() == MAX_BURST as usize {
                // A jump of more than MAX_BURST intervals: the rest are not sent.
                at = now_ns.saturating_add(step);
                break;
            }
            frames.push(self.frame(self.generated));
            self.generated = self.generated.wrapping_add(1);
            at = at.saturating_add(step);
        }
        self.next = Some(Some(at));
        frames
    }

    /// Frame number `seq` as the current knobs make it.
    #[must_use]
    pub fn frame(&self, seq: u64) -> Vec<u8> {
        let len = self.len as usize;
        let mut f = vec![0u8; len];
        f[0..6].copy_from_slice(&self.dst_mac);
        f[6..12].copy_from_slice(&SRC_MAC);
        f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
        let ip_total = (len - ETH_LEN) as u16;
        let udp_len = (len - ETH_LEN - IP_LEN) as u16;
        {
            let ip = &mut f[ETH_LEN..ETH_LEN + IP_LEN];
            ip[0] = 0x45;
            ip[2..4].copy_from_slice(&ip_total.to_be_bytes());
            ip[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
            ip[6] = 0x40; // DF, fragment offset 0
            ip[8] = 64;
            ip[9] = 17; // UDP
            ip[12..16].copy_from_slice(&SRC_IP);
            ip[16..20].copy_from_slice(&self.dst_ip);
            let sum = checksum(0, ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        f[HEADERS..HEADERS + 8].copy_from_slice(&seq.to_be_bytes());
        let udp = &mut f[ETH_LEN + IP_LEN..];
        udp[0..2].copy_from_slice(&SRC_PORT.to_be_bytes());
        udp[2..4].copy_from_slice(&self.dst_port.to_be_bytes());
        udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
        // The pseudo-header: addresses, protocol, UDP length.
        let mut pseudo = [0u8; 12];
        pseudo[0..4].copy_from_slice(&SRC_IP);
        pseudo[4..8].copy_from_slice(&self.dst_ip);
        pseudo[9] = 17;
        pseudo[10..12].copy_from_slice(&udp_len.to_be_bytes());
        let sum = match checksum(sum_words(0, &pseudo), udp) {
            // A computed 0 is sent as all ones (RFC 768): 0 means "no checksum".
            0 => 0xFFFF,
            s => s,
        };
        udp[6..8].copy_from_slice(&sum.to_be_bytes());
        f
    }
}
