//! Descriptors, completion entries and status (writeback) records in ring memory (hardware.md §7).
//!
//! H2C is the transmit direction, C2H the receive direction. All multi-byte fields are
//! little-endian; the reference driver packs them as 64-bit words, and the `*_word(s)` methods use
//! the same words (word 0 is bytes 0-7). Nothing here touches DMA memory: the ring code moves the
//! words in and out of its coherent region.

use bitfield::bitfield;

use super::code_enum;
use crate::addr::DmaAddr;

/// Size of an H2C stream descriptor in bytes (hardware.md §7.1).
pub const H2C_DESC_BYTES: usize = 16;
/// Size of a C2H stream descriptor in bytes (hardware.md §7.2).
pub const C2H_DESC_BYTES: usize = 8;
/// Size of the completion entries the shell writes and the reference driver configures (8 bytes,
/// [`CmptEntrySize::B8`]; hardware.md §7.3).
pub const CMPT_ENTRY_BYTES: usize = CmptEntrySize::B8.bytes();
/// Meaningful bytes of the status record in a ring's last slot (hardware.md §7.4).
pub const WB_STATUS_BYTES: usize = 8;

code_enum! {
    /// Descriptor size code of the software descriptor context's `desc_sz` (hardware.md §5.2).
    pub enum DescSize {
        /// 8-byte descriptors (C2H stream).
        B8 = 0,
        /// 16-byte descriptors (H2C stream).
        B16 = 1,
        /// 32-byte descriptors.
        B32 = 2,
        /// 64-byte descriptors.
        B64 = 3,
    }
}

impl DescSize {
    /// Size of one descriptor in bytes.
    #[must_use]
    pub const fn bytes(self) -> usize {
        8 << self.code()
    }
}

code_enum! {
    /// Completion entry size code of the completion context's `desc_sz` (hardware.md §5.6, §7.3).
    pub enum CmptEntrySize {
        /// 8-byte entries: what the shell sends and the reference driver configures.
        B8 = 0,
        /// 16-byte entries.
        B16 = 1,
        /// 32-byte entries.
        B32 = 2,
        /// 64-byte entries.
        B64 = 3,
    }
}

impl CmptEntrySize {
    /// Size of one completion entry in bytes.
    #[must_use]
    pub const fn bytes(self) -> usize {
        8 << self.code()
    }
}

bitfield! {
    /// H2C stream descriptor, 16 bytes (hardware.md §7.1). One descriptor carries one whole frame.
    ///
    /// Bits 63:0 are word 0 (bytes 0-7), bits 127:64 are word 1 (bytes 8-15).
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct H2cDesc(u128);
    impl Debug;
    /// Word 0 \[31:0\], handed to the shell as the packet's metadata. The shell takes bits 15:0 as
    /// the packet size, so they must equal `len`.
    pub u32, metadata, set_metadata: 31, 0;
    /// Word 0 \[47:32\]: bytes in this buffer.
    #[allow(clippy::len_without_is_empty)] // a field of the descriptor, not a container length
    pub u16, len, set_len: 47, 32;
    /// Word 0 \[63:48\]: reserved on QDMA 4.0 (written 0; SOP/EOP flags only on later IP versions).
    pub u16, reserved, set_reserved: 63, 48;
    /// Word 1: DMA address of the first byte to send.
    pub u64, src_addr, set_src_addr: 127, 64;
}

impl H2cDesc {
    /// The descriptor the reference driver writes for a `len`-byte frame at `addr`:
    /// `metadata = len`, `len`, reserved 0, `src_addr = addr`.
    #[must_use]
    pub fn new(addr: DmaAddr, len: u16) -> Self {
        let mut d = Self(0);
        d.set_metadata(u32::from(len));
        d.set_len(len);
        d.set_src_addr(addr.get());
        d
    }

    /// The 16 bytes as they lie in ring memory.
    #[must_use]
    pub const fn to_bytes(self) -> [u8; H2C_DESC_BYTES] {
        self.0.to_le_bytes()
    }

    /// Decodes 16 bytes of ring memory.
    #[must_use]
    pub const fn from_bytes(bytes: &[u8; H2C_DESC_BYTES]) -> Self {
        Self(u128::from_le_bytes(*bytes))
    }

    /// The two 64-bit words (word 0 = bytes 0-7).
    #[must_use]
    pub const fn to_words(self) -> [u64; 2] {
        [self.0 as u64, (self.0 >> 64) as u64]
    }

    /// Builds a descriptor from its two 64-bit words (word 0 = bytes 0-7).
    #[must_use]
    pub const fn from_words(words: [u64; 2]) -> Self {
        Self((words[1] as u128) << 64 | words[0] as u128)
    }
}

bitfield! {
    /// C2H stream descriptor, 8 bytes (hardware.md §7.2). The IP writes up to one C2H buffer size
    /// (C2H_BUF_SZ\[bufsz_idx\]) starting at `dst_addr`.
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct C2hDesc(u64);
    impl Debug;
    /// \[63:0\]: DMA address the packet data is written to.
    pub u64, dst_addr, set_dst_addr: 63, 0;
}

impl C2hDesc {
    /// A descriptor pointing at `addr`.
    #[must_use]
    pub const fn new(addr: DmaAddr) -> Self {
        Self(addr.get())
    }

    /// The 8 bytes as they lie in ring memory.
    #[must_use]
    pub const fn to_bytes(self) -> [u8; C2H_DESC_BYTES] {
        self.0.to_le_bytes()
    }

    /// Decodes 8 bytes of ring memory.
    #[must_use]
    pub const fn from_bytes(bytes: &[u8; C2H_DESC_BYTES]) -> Self {
        Self(u64::from_le_bytes(*bytes))
    }

    /// The 64-bit word.
    #[must_use]
    pub const fn to_word(self) -> u64 {
        self.0
    }

    /// Builds a descriptor from its 64-bit word.
    #[must_use]
    pub const fn from_word(word: u64) -> Self {
        Self(word)
    }
}

bitfield! {
    /// The 8-byte completion entry the shell and the IP write for every received packet
    /// (hardware.md §7.3).
    ///
    /// The spec defines only this 8-byte format (the shell always sends 8-byte user completions);
    /// with a larger [`CmptEntrySize`] this type describes nothing beyond what the spec says.
    /// The color and error positions rely on the IP's default completion format (hardware.md §15
    /// item 4).
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct CmptEntry(u64);
    impl Debug;
    /// \[0\]: format / user bit; the shell sends 0.
    pub user_bit, set_user_bit: 0;
    /// \[1\]: color (phase) bit, inserted by the IP; flips each time the IP's pidx wraps.
    pub color, set_color: 1;
    /// \[2\]: error bit, inserted by the IP.
    pub err, set_err: 2;
    /// \[26:16\]: absolute qid of the packet (the driver ignores it).
    pub u16, qid, set_qid: 26, 16;
    /// \[47:32\]: packet length in bytes.
    pub u16, pkt_len, set_pkt_len: 47, 32;
    /// \[63:48\]: running 16-bit count of C2H packets handed to the IP, starting at 1 (ignored).
    pub u16, pkt_id, set_pkt_id: 63, 48;
}

impl CmptEntry {
    /// Decodes the entry's 64-bit word.
    #[must_use]
    pub const fn from_word(word: u64) -> Self {
        Self(word)
    }

    /// The 64-bit word.
    #[must_use]
    pub const fn to_word(self) -> u64 {
        self.0
    }

    /// Decodes the entry's 8 bytes of ring memory.
    #[must_use]
    pub const fn from_bytes(bytes: &[u8; CMPT_ENTRY_BYTES]) -> Self {
        Self(u64::from_le_bytes(*bytes))
    }

    /// The 8 bytes as they lie in ring memory.
    #[must_use]
    pub const fn to_bytes(self) -> [u8; CMPT_ENTRY_BYTES] {
        self.0.to_le_bytes()
    }
}

bitfield! {
    /// Status (writeback) record the IP writes into the first 8 bytes of a ring's last slot
    /// (hardware.md §7.4). `color` and `intr_state` are defined for the completion ring's record
    /// only.
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct WbStatus(u64);
    impl Debug;
    /// \[15:0\]: producer index (for the completion ring: the next entry the IP will write).
    pub u16, pidx, set_pidx: 15, 0;
    /// \[31:16\]: consumer index (for the H2C ring: the next descriptor the IP will consume).
    pub u16, cidx, set_cidx: 31, 16;
    /// \[32\]: the completion ring's current color.
    pub color, set_color: 32;
    /// \[34:33\]: interrupt state of the completion ring.
    pub u8, intr_state, set_intr_state: 34, 33;
}

impl WbStatus {
    /// Decodes the record's 64-bit word.
    #[must_use]
    pub const fn from_word(word: u64) -> Self {
        Self(word)
    }

    /// The 64-bit word.
    #[must_use]
    pub const fn to_word(self) -> u64 {
        self.0
    }

    /// Decodes the record's 8 bytes of ring memory.
    #[must_use]
    pub const fn from_bytes(bytes: &[u8; WB_STATUS_BYTES]) -> Self {
        Self(u64::from_le_bytes(*bytes))
    }

    /// The 8 bytes as they lie in ring memory.
    #[must_use]
    pub const fn to_bytes(self) -> [u8; WB_STATUS_BYTES] {
        self.0.to_le_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h2c_desc_matches_hand_built_bytes() {
        // A 60-byte frame at 0x0000_0001_2345_6100 (hardware.md §7.1: metadata = len = 60).
        let d = H2cDesc::new(DmaAddr::new(0x0000_0001_2345_6100), 60);
        let expected: [u8; 16] = [
            0x3C, 0x00, 0x00, 0x00, // metadata
            0x3C, 0x00, // len
            0x00, 0x00, // reserved
            0x00, 0x61, 0x45, 0x23, 0x01, 0x00, 0x00, 0x00, // src_addr
        ];
        assert_eq!(d.to_bytes(), expected);
        assert_eq!(d.to_words(), [0x0000_003C_0000_003C, 0x0000_0001_2345_6100]);
        assert_eq!(H2cDesc::from_bytes(&expected), d);
        assert_eq!(d.metadata(), 60);
        assert_eq!(d.len(), 60);
        assert_eq!(d.reserved(), 0);
        assert_eq!(d.src_addr(), 0x0000_0001_2345_6100);
    }

    #[test]
    fn h2c_desc_more_vectors() {
        // 1514 bytes (0x5EA) at a high address.
        let d = H2cDesc::new(DmaAddr::new(0xFEDC_BA98_7654_3210), 1514);
        assert_eq!(
            d.to_bytes(),
            [0xEA, 0x05, 0, 0, 0xEA, 0x05, 0, 0, 0x10, 0x32, 0x54, 0x76, 0x98, 0xBA, 0xDC, 0xFE]
        );
        // Maximum length.
        let d = H2cDesc::new(DmaAddr::new(0x1000), 0xFFFF);
        assert_eq!(d.to_words(), [0x0000_FFFF_0000_FFFF, 0x1000]);
        // The reserved bits and the upper metadata bits are decoded, not dropped.
        let d = H2cDesc::from_words([0xABCD_1234_8765_4321, 7]);
        assert_eq!(d.metadata(), 0x8765_4321);
        assert_eq!(d.len(), 0x1234);
        assert_eq!(d.reserved(), 0xABCD);
        assert_eq!(d.src_addr(), 7);
    }

    #[test]
    fn h2c_desc_field_isolation() {
        let mut d = H2cDesc::default();
        d.set_metadata(u32::MAX);
        assert_eq!(d.to_words(), [0x0000_0000_FFFF_FFFF, 0]);
        let mut d = H2cDesc::default();
        d.set_len(u16::MAX);
        assert_eq!(d.to_words(), [0x0000_FFFF_0000_0000, 0]);
        let mut d = H2cDesc::default();
        d.set_reserved(u16::MAX);
        assert_eq!(d.to_words(), [0xFFFF_0000_0000_0000, 0]);
        let mut d = H2cDesc::default();
        d.set_src_addr(u64::MAX);
        assert_eq!(d.to_words(), [0, u64::MAX]);
    }

    #[test]
    fn h2c_desc_round_trips() {
        for words in [
            [0, 0],
            [u64::MAX, u64::MAX],
            [0x0123_4567_89AB_CDEF, 0xFEDC_BA98_7654_3210],
        ] {
            let d = H2cDesc::from_words(words);
            assert_eq!(d.to_words(), words);
            assert_eq!(H2cDesc::from_bytes(&d.to_bytes()), d);
        }
    }

    #[test]
    fn c2h_desc_vectors() {
        // Driver: page DMA address + 256.
        let d = C2hDesc::new(DmaAddr::new(0x0000_0000_8765_4100));
        assert_eq!(d.to_bytes(), [0x00, 0x41, 0x65, 0x87, 0, 0, 0, 0]);
        assert_eq!(d.to_word(), 0x8765_4100);
        assert_eq!(d.dst_addr(), 0x8765_4100);
        let bytes = [0xEF, 0xCD, 0xAB, 0x89, 0x67, 0x45, 0x23, 0x01];
        let d = C2hDesc::from_bytes(&bytes);
        assert_eq!(d.dst_addr(), 0x0123_4567_89AB_CDEF);
        assert_eq!(d.to_bytes(), bytes);
        assert_eq!(C2hDesc::from_word(d.to_word()), d);
        let mut d = C2hDesc::default();
        d.set_dst_addr(u64::MAX);
        assert_eq!(d.to_word(), u64::MAX);
    }

    #[test]
    fn cmpt_entry_decodes_hand_built_bytes() {
        // Color 1, no error, abs qid 69, 1514-byte packet, packet id 1 (hardware.md §7.3).
        let bytes = [0x02, 0x00, 0x45, 0x00, 0xEA, 0x05, 0x01, 0x00];
        let e = CmptEntry::from_bytes(&bytes);
        assert!(!e.user_bit());
        assert!(e.color());
        assert!(!e.err());
        assert_eq!(e.qid(), 69);
        assert_eq!(e.pkt_len(), 1514);
        assert_eq!(e.pkt_id(), 1);
        assert_eq!(e.to_word(), 0x0001_05EA_0045_0002);
        assert_eq!(e.to_bytes(), bytes);

        // Error set, color 0, qid 2047 (all 11 bits), length 64, id 0xFFFF.
        let e = CmptEntry::from_word(0xFFFF_0040_07FF_0004);
        assert!(e.err());
        assert!(!e.color());
        assert_eq!(e.qid(), 0x7FF);
        assert_eq!(e.pkt_len(), 64);
        assert_eq!(e.pkt_id(), 0xFFFF);
    }

    #[test]
    fn cmpt_entry_ignores_bits_outside_fields() {
        // Bits 15:3 and 31:27 are not fields: a device writing them changes no field.
        let e = CmptEntry::from_word(0x0000_0000_F800_FFF8);
        assert!(!e.user_bit() && !e.color() && !e.err());
        assert_eq!((e.qid(), e.pkt_len(), e.pkt_id()), (0, 0, 0));
    }

    #[test]
    fn cmpt_entry_field_isolation() {
        let check = |f: fn(&mut CmptEntry), word: u64| {
            let mut e = CmptEntry::default();
            f(&mut e);
            assert_eq!(e.to_word(), word);
        };
        check(|e| e.set_user_bit(true), 1 << 0);
        check(|e| e.set_color(true), 1 << 1);
        check(|e| e.set_err(true), 1 << 2);
        check(|e| e.set_qid(u16::MAX), 0x0000_0000_07FF_0000);
        check(|e| e.set_pkt_len(u16::MAX), 0x0000_FFFF_0000_0000);
        check(|e| e.set_pkt_id(u16::MAX), 0xFFFF_0000_0000_0000);
    }

    #[test]
    fn wb_status_vectors() {
        // CMPT status: pidx 17, cidx 5, color 1, interrupt state 2.
        let bytes = [0x11, 0x00, 0x05, 0x00, 0x05, 0, 0, 0];
        let s = WbStatus::from_bytes(&bytes);
        assert_eq!(s.pidx(), 17);
        assert_eq!(s.cidx(), 5);
        assert!(s.color());
        assert_eq!(s.intr_state(), 2);
        assert_eq!(s.to_word(), 0x0000_0005_0005_0011);
        assert_eq!(s.to_bytes(), bytes);
        // H2C status: cidx 4094 (0xFFE).
        let s = WbStatus::from_word(0x0FFE_0000);
        assert_eq!(
            (s.pidx(), s.cidx(), s.color(), s.intr_state()),
            (0, 4094, false, 0)
        );
        // Bits 63:35 are not fields.
        let s = WbStatus::from_word(0xFFFF_FFF8_0000_0000);
        assert_eq!((s.pidx(), s.cidx(), s.color(), s.intr_state()), (0, 0, false, 0));
    }

    #[test]
    fn wb_status_field_isolation_and_round_trip() {
        let mut s = WbStatus::default();
        s.set_pidx(u16::MAX);
        assert_eq!(s.to_word(), 0xFFFF);
        let mut s = WbStatus::default();
        s.set_cidx(u16::MAX);
        assert_eq!(s.to_word(), 0xFFFF_0000);
        let mut s = WbStatus::default();
        s.set_color(true);
        assert_eq!(s.to_word(), 1 << 32);
        let mut s = WbStatus::default();
        s.set_intr_state(u8::MAX);
        assert_eq!(s.to_word(), 0b11 << 33);
        for w in [0, u64::MAX, 0x0123_4567_89AB_CDEF] {
            assert_eq!(
                WbStatus::from_bytes(&WbStatus::from_word(w).to_bytes()).to_word(),
                w
            );
            assert_eq!(
                CmptEntry::from_bytes(&CmptEntry::from_word(w).to_bytes()).to_word(),
                w
            );
        }
    }

    #[test]
    fn size_codes() {
        assert_eq!(H2C_DESC_BYTES, 16);
        assert_eq!(C2H_DESC_BYTES, 8);
        assert_eq!(CMPT_ENTRY_BYTES, 8);
        let sizes = [(0, 8), (1, 16), (2, 32), (3, 64)];
        for (code, bytes) in sizes {
            let c = CmptEntrySize::try_from(code).unwrap();
            assert_eq!((c.code(), c.bytes()), (code, bytes));
            let d = DescSize::try_from(code).unwrap();
            assert_eq!((d.code(), d.bytes()), (code, bytes));
            assert_eq!(u8::from(c), code);
        }
        assert_eq!(DescSize::B16.bytes(), H2C_DESC_BYTES);
        assert_eq!(DescSize::B8.bytes(), C2H_DESC_BYTES);
        for bad in [4u8, 5, 0x80, u8::MAX] {
            assert_eq!(CmptEntrySize::try_from(bad), Err(crate::layout::UnknownCode(bad)));
            assert_eq!(DescSize::try_from(bad), Err(crate::layout::UnknownCode(bad)));
        }
        assert_eq!(DescSize::default(), DescSize::B8);
        assert_eq!(CmptEntrySize::default(), CmptEntrySize::B8);
    }
}
