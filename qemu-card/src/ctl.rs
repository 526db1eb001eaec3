//! The test-control window: a register block that exists only on the emulated card, in the BAR
//! of a third PCI function (`onic-card-ctl`) that no driver binds. A test inside the guest
//! reaches the model's fault knobs through it (`devmem`), the way `sim=1`'s module parameters
//! reach them in simulation mode. A real card has nothing like it.
//!
//! Every register is 32 bits; offsets are bytes from the start of the BAR. Reads of an unknown
//! offset return 0; writes to one are ignored.

/// Reads [`MAGIC_VALUE`] ("ONIC" in little-endian ASCII): the window is there.
pub const MAGIC: u32 = 0x00;
/// The value of [`MAGIC`].
pub const MAGIC_VALUE: u32 = u32::from_le_bytes(*b"ONIC");
/// Reads the layout's version, [`VERSION_VALUE`].
pub const VERSION: u32 = 0x04;
/// The value of [`VERSION`].
pub const VERSION_VALUE: u32 = 6;
/// Bit *p* set: port *p*'s link is up. Reads the current state; writes set it (the CMAC then
/// reports the change as the real one does, latched low in STAT_RX_STATUS).
pub const LINK: u32 = 0x08;
/// 1: the H2C engine stops writing TX status back (a hung engine); 0: it catches up.
pub const TX_STALL: u32 = 0x0C;
/// 1: completion rings keep their color across a wrap (a broken device); 0: normal.
pub const CMPT_FREEZE: u32 = 0x10;
/// Write `kind << 16 | n`: the next `n` completion entries lie: kind 1 sets the error bit, 2
/// reports length 0, 3 a length larger than the buffers posted.
pub const CORRUPT_CMPT: u32 = 0x14;
/// Write `n`: the next `n` frames arriving at any port are lost on the wire.
pub const DROP_FRAMES: u32 = 0x18;
/// Write `n`: the next `n` frames arrive with a bad FCS.
pub const BAD_FCS: u32 = 0x1C;
/// Reads how many violations the model recorded (driver mistakes the hardware would refuse or
/// corrupt data on: see `onic_sim::Violation`); a write clears it, [`BUS_FAULTS`] and
/// [`BLOCKED_DMA`].
pub const VIOLATIONS: u32 = 0x20;
/// Reads how many device accesses the host bus refused (IOMMU faults among them).
pub const BUS_FAULTS: u32 = 0x24;
/// 1: the card is gone from the bus (surprise removal): every BAR read returns all ones, writes
/// are dropped, the engines stop. 0: it is back, reset to its power-on state (PCIe resets a
/// function whose link went down); the driver must probe it again.
pub const GONE: u32 = 0x28;
/// Reads how many MSI-X messages the card sent, all functions.
pub const INTERRUPTS: u32 = 0x2C;
/// Reads how many device accesses of a size other than 32 bits, or not 32-bit aligned, the
/// card's BARs got (the shell's AXI-Lite registers take 32-bit accesses only).
pub const BAD_MMIO: u32 = 0x30;
/// Write `leaf << 24 | bits`: the QDMA detects an error: `bits` (24 of them) of leaf status
/// register `leaf` (an index of `onic_hal::regs::qdma::errors::LEAF_STATUS`) and its group in
/// GLBL_ERR_STAT are set, and the error interrupt goes out if GLBL_ERR_INT is armed.
pub const RAISE_ERROR: u32 = 0x34;
/// 1: completion status records are no longer written (the producer index the driver reads
/// stays where it was while entries keep coming: a frozen completion ring); 0: normal.
pub const CMPT_STATUS_FREEZE: u32 = 0x38;
/// 1: the QDMA's context engine is wedged: IND_CTXT_CMD reads busy and commands written
/// meanwhile are lost (a driver can then neither program nor invalidate a queue); 0: normal.
pub const CTXT_BUSY: u32 = 0x3C;
/// Reads how many device accesses never left the card because their function's bus mastering
/// was off (a driver that cut a misbehaving card off from memory); not violations.
pub const BLOCKED_DMA: u32 = 0x40;
/// Write `uncorrectable << 16 | correctable`: the next `correctable` frames arriving at any port
/// carry RS-FEC codeword errors the decoder corrects, the `uncorrectable` after them errors it
/// cannot (`onic_sim::Faults::fec_errors_next_frames`).
pub const FEC_ERRORS: u32 = 0x44;

/// The traffic generator (`crate::gen`): UDP frames arriving at a port of the card at a fixed
/// interval of the emulator's clock (QEMU's virtual clock; under `-icount`, the guest's
/// instructions), as from a sending machine on the cable. A real card has nothing like it.
/// Every knob reads back its current value; a write of a value out of range is ignored.
///
/// The port the frames arrive at (0..ports).
pub const GEN_PORT: u32 = 0x48;
/// Frame length without FCS, 60..=1514 (default 60).
pub const GEN_LEN: u32 = 0x4C;
/// Nanoseconds of the emulator's clock between two frames, at least 1000 (default 20 000). At
/// most 64 frames arrive at once: after a jump of the clock by more intervals than that, the
/// frames beyond them are not sent and the schedule restarts.
pub const GEN_INTERVAL_NS: u32 = 0x50;
/// Destination MAC, its first two bytes: `mac[0] << 8 | mac[1]` (default ff:ff).
pub const GEN_DST_MAC_HI: u32 = 0x54;
/// Destination MAC, its last four bytes, big-endian: `mac[2] << 24 | .. | mac[5]`.
pub const GEN_DST_MAC_LO: u32 = 0x58;
/// Destination IPv4 address, big-endian: 192.0.2.2 is 0xC000_0202 (the default).
pub const GEN_DST_IP: u32 = 0x5C;
/// Destination UDP port, 1..=65535 (default 9).
pub const GEN_DST_PORT: u32 = 0x60;
/// 1: start (the first frame at once); 0: stop. Reads whether it runs.
pub const GEN_RUN: u32 = 0x64;
/// Read only: frames generated since the card was created (the low 32 bits).
pub const GEN_FRAMES: u32 = 0x68;
/// 0 (the default): the frames arrive at [`GEN_PORT`] from its wire. 1: they leave
/// [`GEN_PORT`] onto its wire, as if the card had sent them, to whatever the port is cabled to
/// (the other port, or a QEMU network backend and through it another NIC), without passing the
/// card's transmit path; so the same traffic, on the same clock, can feed a NIC that is not the
/// card. Other values are ignored.
pub const GEN_EGRESS: u32 = 0x6C;

/// Size of the control BAR.
pub const BAR_SIZE: u64 = 0x1000;

/// Every register above by the name the guest's shell scripts use (`CTL_<name>`): `cargo xtask`
/// writes them into the VM's `/etc/onic/ctl.sh`, so the scripts take the offsets from here.
pub const SHELL_NAMES: [(&str, u32); 28] = [
    ("MAGIC", MAGIC),
    ("VERSION", VERSION),
    ("LINK", LINK),
    ("TX_STALL", TX_STALL),
    ("CMPT_FREEZE", CMPT_FREEZE),
    ("CORRUPT_CMPT", CORRUPT_CMPT),
    ("DROP_FRAMES", DROP_FRAMES),
    ("BAD_FCS", BAD_FCS),
    ("VIOLATIONS", VIOLATIONS),
    ("BUS_FAULTS", BUS_FAULTS),
    ("GONE", GONE),
    ("INTERRUPTS", INTERRUPTS),
    ("BAD_MMIO", BAD_MMIO),
    ("RAISE_ERROR", RAISE_ERROR),
    ("CMPT_STATUS_FREEZE", CMPT_STATUS_FREEZE),
    ("CTXT_BUSY", CTXT_BUSY),
    ("BLOCKED_DMA", BLOCKED_DMA),
    ("FEC_ERRORS", FEC_ERRORS),
    ("GEN_PORT", GEN_PORT),
    ("GEN_LEN", GEN_LEN),
    ("GEN_INTERVAL_NS", GEN_INTERVAL_NS),
    ("GEN_DST_MAC_HI", GEN_DST_MAC_HI),
    ("GEN_DST_MAC_LO", GEN_DST_MAC_LO),
    ("GEN_DST_IP", GEN_DST_IP),
    ("GEN_DST_PORT", GEN_DST_PORT),
    ("GEN_RUN", GEN_RUN),
    ("GEN_FRAMES", GEN_FRAMES),
    ("GEN_EGRESS", GEN_EGRESS),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shell_names_are_distinct_aligned_and_inside_the_bar() {
        for (i, (name, off)) in SHELL_NAMES.iter().enumerate() {
            assert_eq!(off % 4, 0, "{name}");
            assert!(u64::from(*off) + 4 <= BAR_SIZE, "{name}");
            for (other, o) in &SHELL_NAMES[i + 1..] {
                assert_ne!(name, other);
                assert_ne!(off, o, "{name} and {other}");
            }
        }
        // The registers are laid out word after word from MAGIC to GEN_EGRESS: a register added
        // at the end without a shell name leaves a gap here.
        assert_eq!(SHELL_NAMES.len() as u32, GEN_EGRESS / 4 + 1);
    }
}
