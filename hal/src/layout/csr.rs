//! Fields of the global QDMA registers whose values the driver computes (hardware.md §3.2, §3.3,
//! §11.3).
//!
//! Only the master PF writes these. The offsets are in [`crate::regs::qdma`]. The exact hardware
//! meaning of several encodings (max_dsc_fetch, the prefetch and coalescing fields) is defined in
//! Xilinx PG302, not in the spec; the `reference` constructors reproduce the reference driver's
//! values (hardware.md §15 item 3).

use bitfield::bitfield;

use super::register_u32;
use crate::id::FunctionId;

bitfield! {
    /// GLBL_DSC_CFG (BAR0 + 0x250), hardware.md §3.2.
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct GlblDscCfg(u32);
    impl Debug;
    /// \[2:0\]: writeback interval code: every `4 << wb_acc_int` descriptors (0 = 4 ... 7 = 512).
    pub u8, wb_acc_int, set_wb_acc_int: 2, 0;
    /// \[5:3\]: max_dsc_fetch (the reference driver writes 6).
    pub u8, max_dsc_fetch, set_max_dsc_fetch: 5, 3;
}
register_u32!(GlblDscCfg);

impl GlblDscCfg {
    /// The reference driver's value: writeback every 4 descriptors, max_dsc_fetch 6 (0x00000030).
    #[must_use]
    pub fn reference() -> Self {
        let mut r = Self(0);
        r.set_wb_acc_int(0);
        r.set_max_dsc_fetch(6);
        r
    }

    /// The writeback interval in descriptors that `wb_acc_int` encodes (4 to 512).
    #[must_use]
    pub fn wb_interval_descs(&self) -> u16 {
        4 << self.wb_acc_int()
    }
}

bitfield! {
    /// C2H_PFCH_CFG (BAR0 + 0xB08), hardware.md §3.2.
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct C2hPfchCfg(u32);
    impl Debug;
    /// \[8:0\]: stop-prefetch threshold.
    pub u16, fl_th, set_fl_th: 8, 0;
    /// \[17:9\]: prefetch entries per queue.
    pub u16, num_pfch, set_num_pfch: 17, 9;
    /// \[24:18\]: pfch_qcnt.
    pub u8, pfch_qcnt, set_pfch_qcnt: 24, 18;
    /// \[31:25\]: evt_qcnt_th.
    pub u8, evt_qcnt_th, set_evt_qcnt_th: 31, 25;
}
register_u32!(C2hPfchCfg);

impl C2hPfchCfg {
    /// The reference driver's value for the prefetch cache depth `cache_depth` (D, read from
    /// C2H_PFCH_CACHE_DEPTH just before): fl_th = 256, num_pfch = 8, pfch_qcnt = D/2,
    /// evt_qcnt_th = D/2 - 2, each field keeping the low bits that fit its width
    /// (hardware.md §3.2). D = 16 gives 0x0C201100, D = 64 gives 0x3C801100.
    ///
    /// Defined for every D, without panic or overflow. For D < 4, D/2 - 2 is negative: it is
    /// computed in wrapping 32-bit arithmetic, as the reference driver's unsigned formula does, so
    /// evt_qcnt_th receives the low 7 bits of the two's complement: 126 for D = 0 or 1, 127 for
    /// D = 2 or 3. That is what such a device would be programmed with; a real cache that shallow
    /// is not expected. For D >= 256, D/2 does not fit pfch_qcnt's 7 bits and only its low 7 bits
    /// are kept; no field spills into its neighbour.
    #[must_use]
    pub fn reference(cache_depth: u32) -> Self {
        const SEVEN_BITS: u32 = 0x7F;
        let half = cache_depth >> 1;
        let mut r = Self(0);
        r.set_fl_th(256);
        r.set_num_pfch(8);
        r.set_pfch_qcnt((half & SEVEN_BITS) as u8);
        r.set_evt_qcnt_th((half.wrapping_sub(2) & SEVEN_BITS) as u8);
        r
    }
}

bitfield! {
    /// C2H_WB_COAL_CFG (BAR0 + 0xB50), hardware.md §3.2.
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct C2hWbCoalCfg(u32);
    impl Debug;
    /// \[0\]: done_glb_flush.
    pub done_glb_flush, set_done_glb_flush: 0;
    /// \[1\]: set_glb_flush.
    pub set_glb_flush, set_set_glb_flush: 1;
    /// \[13:2\]: tick_cnt.
    pub u16, tick_cnt, set_tick_cnt: 13, 2;
    /// \[25:14\]: tick_val.
    pub u16, tick_val, set_tick_val: 25, 14;
    /// \[31:26\]: max_buf_sz.
    pub u8, max_buf_sz, set_max_buf_sz: 31, 26;
}
register_u32!(C2hWbCoalCfg);

impl C2hWbCoalCfg {
    /// The reference driver's value for the completion coalesce buffer depth `coal_buf_depth` (B,
    /// read from C2H_CMPL_COAL_BUF_DEPTH just before): tick_cnt = 5, tick_val = 25, max_buf_sz = B
    /// (no "- 2") keeping its low 6 bits, flush bits 0. That is `0x00064014 + ((B << 26) & 0xFC000000)`;
    /// B = 32 gives 0x80064014. Defined for every B without panic.
    #[must_use]
    pub fn reference(coal_buf_depth: u32) -> Self {
        const SIX_BITS: u32 = 0x3F;
        let mut r = Self(0);
        r.set_tick_cnt(5);
        r.set_tick_val(25);
        r.set_max_buf_sz((coal_buf_depth & SIX_BITS) as u8);
        r
    }
}

bitfield! {
    /// H2C_REQ_THROT (BAR0 + 0xE24), hardware.md §3.2.
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct H2cReqThrot(u32);
    impl Debug;
    /// \[15:0\]: data threshold.
    pub u16, data_thresh, set_data_thresh: 15, 0;
    /// \[16\]: enable data throttling.
    pub en_data_throt, set_en_data_throt: 16;
    /// \[25:17\]: request threshold.
    pub u16, req_thresh, set_req_thresh: 25, 17;
    /// \[31\]: enable request throttling.
    pub en_req_throt, set_en_req_throt: 31;
}
register_u32!(H2cReqThrot);

impl H2cReqThrot {
    /// The reference driver's value: data_thresh 0x4000 with data throttling on, req_thresh 0x60
    /// with request throttling off (0x00C14000).
    #[must_use]
    pub fn reference() -> Self {
        let mut r = Self(0);
        r.set_data_thresh(0x4000);
        r.set_en_data_throt(true);
        r.set_req_thresh(0x60);
        r.set_en_req_throt(false);
        r
    }
}

bitfield! {
    /// GLBL_ERR_INT (BAR0 + 0xB04), hardware.md §3.3, §11.3: routes the QDMA error interrupt to an
    /// MSI-X vector of a function.
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct GlblErrInt(u32);
    impl Debug;
    /// \[7:0\]: PCI function.
    pub u8, func, set_func: 7, 0;
    /// \[22:12\]: MSI-X vector of that function.
    pub u16, vec, set_vec: 22, 12;
    /// \[24\]: armed.
    pub arm, set_arm: 24;
}
register_u32!(GlblErrInt);

impl GlblErrInt {
    /// `func + (vec << 12) + (arm << 24)`; only the low 11 bits of `vec` fit. The reference driver
    /// writes it unarmed, then armed, with vector n + 1 (PF0 with 8 queue vectors: 0x00009000, then
    /// 0x01009000), and 0 at teardown.
    #[must_use]
    pub fn new(func: FunctionId, vec: u16, arm: bool) -> Self {
        let mut r = Self(0);
        r.set_func(func.get());
        r.set_vec(vec);
        r.set_arm(arm);
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pf(n: u8) -> FunctionId {
        FunctionId::new(n).unwrap()
    }

    #[test]
    fn glbl_dsc_cfg() {
        assert_eq!(GlblDscCfg::reference().bits(), 0x00000030);
        assert_eq!(GlblDscCfg::reference().wb_interval_descs(), 4);
        let intervals = [4, 8, 16, 32, 64, 128, 256, 512];
        for (code, descs) in (0u8..).zip(intervals) {
            let mut r = GlblDscCfg::default();
            r.set_wb_acc_int(code);
            assert_eq!(r.wb_interval_descs(), descs);
            assert_eq!(r.bits(), u32::from(code));
        }
        let mut r = GlblDscCfg::default();
        r.set_wb_acc_int(u8::MAX);
        assert_eq!(r.bits(), 0x7);
        let mut r = GlblDscCfg::default();
        r.set_max_dsc_fetch(u8::MAX);
        assert_eq!(r.bits(), 0x38);
        let r = GlblDscCfg::from_bits(u32::MAX);
        assert_eq!(
            (r.wb_acc_int(), r.max_dsc_fetch(), r.wb_interval_descs()),
            (7, 7, 512)
        );
    }

    #[test]
    fn c2h_pfch_cfg_spec_examples() {
        assert_eq!(C2hPfchCfg::reference(16).bits(), 0x0C201100);
        assert_eq!(C2hPfchCfg::reference(64).bits(), 0x3C801100);
        let r = C2hPfchCfg::reference(64);
        assert_eq!(
            (r.fl_th(), r.num_pfch(), r.pfch_qcnt(), r.evt_qcnt_th()),
            (256, 8, 32, 30)
        );
    }

    #[test]
    fn c2h_pfch_cfg_small_and_large_depths() {
        // D/2 - 2 wraps for D < 4; the field keeps the low 7 bits.
        assert_eq!(C2hPfchCfg::reference(0).bits(), 0xFC001100);
        assert_eq!(C2hPfchCfg::reference(1).bits(), 0xFC001100);
        assert_eq!(C2hPfchCfg::reference(2).bits(), 0xFE041100);
        assert_eq!(C2hPfchCfg::reference(3).bits(), 0xFE041100);
        assert_eq!(C2hPfchCfg::reference(4).bits(), 0x00081100);
        assert_eq!(C2hPfchCfg::reference(0).evt_qcnt_th(), 126);
        assert_eq!(C2hPfchCfg::reference(3).evt_qcnt_th(), 127);
        // D = 254: 127 and 125 still fit; D = 256: D/2 = 128 keeps its low 7 bits (0).
        assert_eq!(C2hPfchCfg::reference(254).bits(), 0xFBFC1100);
        assert_eq!(C2hPfchCfg::reference(256).bits(), 0xFC001100);
        assert_eq!(C2hPfchCfg::reference(u32::MAX).bits(), 0xFBFC1100);
        // fl_th and num_pfch never change, whatever D.
        for d in [0, 1, 2, 3, 5, 255, 256, 257, 0x8000_0000, u32::MAX - 1, u32::MAX] {
            let r = C2hPfchCfg::reference(d);
            assert_eq!(r.bits() & 0x3FFFF, 0x1100, "D = {d}");
        }
    }

    #[test]
    fn c2h_pfch_cfg_field_isolation() {
        let mut r = C2hPfchCfg::default();
        r.set_fl_th(u16::MAX);
        assert_eq!(r.bits(), 0x0000_01FF);
        let mut r = C2hPfchCfg::default();
        r.set_num_pfch(u16::MAX);
        assert_eq!(r.bits(), 0x0003_FE00);
        let mut r = C2hPfchCfg::default();
        r.set_pfch_qcnt(u8::MAX);
        assert_eq!(r.bits(), 0x01FC_0000);
        let mut r = C2hPfchCfg::default();
        r.set_evt_qcnt_th(u8::MAX);
        assert_eq!(r.bits(), 0xFE00_0000);
    }

    #[test]
    fn c2h_wb_coal_cfg() {
        assert_eq!(C2hWbCoalCfg::reference(32).bits(), 0x80064014);
        assert_eq!(C2hWbCoalCfg::reference(0).bits(), 0x00064014);
        assert_eq!(C2hWbCoalCfg::reference(63).bits(), 0xFC064014);
        assert_eq!(C2hWbCoalCfg::reference(64).bits(), 0x00064014);
        for b in [0u32, 1, 16, 31, 32, 33, 63, 64, 65, 1000, u32::MAX] {
            let expected = 0x00064014u32.wrapping_add((b << 26) & 0xFC000000);
            assert_eq!(C2hWbCoalCfg::reference(b).bits(), expected, "B = {b}");
        }
        let r = C2hWbCoalCfg::reference(32);
        assert_eq!((r.tick_cnt(), r.tick_val(), r.max_buf_sz()), (5, 25, 32));
        assert!(!r.done_glb_flush() && !r.set_glb_flush());

        let check = |f: fn(&mut C2hWbCoalCfg), bits: u32| {
            let mut r = C2hWbCoalCfg::default();
            f(&mut r);
            assert_eq!(r.bits(), bits);
        };
        check(|r| r.set_done_glb_flush(true), 1 << 0);
        check(|r| r.set_set_glb_flush(true), 1 << 1);
        check(|r| r.set_tick_cnt(u16::MAX), 0x0000_3FFC);
        check(|r| r.set_tick_val(u16::MAX), 0x03FF_C000);
        check(|r| r.set_max_buf_sz(u8::MAX), 0xFC00_0000);
    }

    #[test]
    fn h2c_req_throt() {
        assert_eq!(H2cReqThrot::reference().bits(), 0x00C14000);
        let r = H2cReqThrot::from_bits(0x00C14000);
        assert_eq!((r.data_thresh(), r.req_thresh()), (0x4000, 0x60));
        assert!(r.en_data_throt() && !r.en_req_throt());

        let check = |f: fn(&mut H2cReqThrot), bits: u32| {
            let mut r = H2cReqThrot::default();
            f(&mut r);
            assert_eq!(r.bits(), bits);
        };
        check(|r| r.set_data_thresh(u16::MAX), 0x0000_FFFF);
        check(|r| r.set_en_data_throt(true), 1 << 16);
        check(|r| r.set_req_thresh(u16::MAX), 0x03FE_0000);
        check(|r| r.set_en_req_throt(true), 1 << 31);
    }

    #[test]
    fn glbl_err_int_spec_values() {
        // hardware.md §11.3: PF0 with n = 8 queue vectors, error vector n + 1 = 9.
        assert_eq!(GlblErrInt::new(pf(0), 9, false).bits(), 0x00009000);
        assert_eq!(GlblErrInt::new(pf(0), 9, true).bits(), 0x01009000);
        assert_eq!(GlblErrInt::default().bits(), 0);
        // The formula func + ((n + 1) << 12) + (arm << 24) for other values.
        assert_eq!(GlblErrInt::new(pf(1), 8, true).bits(), 0x01008001);
        assert_eq!(GlblErrInt::new(pf(3), 65, false).bits(), 0x00041003);
        let r = GlblErrInt::from_bits(0x01009000);
        assert_eq!((r.func(), r.vec(), r.arm()), (0, 9, true));

        let check = |f: fn(&mut GlblErrInt), bits: u32| {
            let mut r = GlblErrInt::default();
            f(&mut r);
            assert_eq!(r.bits(), bits);
        };
        check(|r| r.set_func(u8::MAX), 0x0000_00FF);
        check(|r| r.set_vec(u16::MAX), 0x007F_F000);
        check(|r| r.set_arm(true), 1 << 24);
    }

    #[test]
    fn round_trips() {
        for bits in [0, u32::MAX, 0x0C201100, 0x80064014, 0xA5A5_5A5A] {
            assert_eq!(GlblDscCfg::from_bits(bits).bits(), bits);
            assert_eq!(C2hPfchCfg::from_bits(bits).bits(), bits);
            assert_eq!(C2hWbCoalCfg::from_bits(bits).bits(), bits);
            assert_eq!(H2cReqThrot::from_bits(bits).bits(), bits);
            assert_eq!(u32::from(GlblErrInt::from(bits)), bits);
        }
    }
}
