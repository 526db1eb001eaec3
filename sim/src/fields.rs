//! The model's own decoder for contexts, descriptors, doorbells and completion formats, written
//! from the tables of hardware.md (§5, §6, §7) independently of `onic-hal`'s layouts, so that a bit
//! position mistake on the driver side is not silently shared by the model.

/// Bits `hi..=lo` of `w`.
pub(crate) const fn bits(w: u32, hi: u32, lo: u32) -> u32 {
    let width = hi - lo + 1;
    let mask = if width == 32 { u32::MAX } else { (1 << width) - 1 };
    (w >> lo) & mask
}

/// Bit `b` of `w`.
pub(crate) const fn bit(w: u32, b: u32) -> bool {
    (w >> b) & 1 == 1
}

/// Replaces bits `hi..=lo` of `w` with `v` (truncated to the field).
pub(crate) fn set_bits(w: &mut u32, hi: u32, lo: u32, v: u32) {
    let width = hi - lo + 1;
    let mask = if width == 32 { u32::MAX } else { (1 << width) - 1 };
    *w = (*w & !(mask << lo)) | ((v & mask) << lo);
}

/// Indirect context selectors (hardware.md §5.1).
pub(crate) mod sel {
    pub const SW_C2H: u8 = 0;
    pub const SW_H2C: u8 = 1;
    pub const HW_C2H: u8 = 2;
    pub const HW_H2C: u8 = 3;
    pub const CMPT: u8 = 6;
    pub const PFCH: u8 = 7;
    pub const TIMER: u8 = 11;
    pub const FMAP: u8 = 12;
}

/// Indirect context operations (hardware.md §5.1).
pub(crate) mod op {
    pub const CLEAR: u32 = 0;
    pub const WRITE: u32 = 1;
    pub const READ: u32 = 2;
    pub const INVALIDATE: u32 = 3;
}

/// A decoded IND_CTXT_CMD word: [0] busy, [4:1] sel, [6:5] op, [17:7] qid, [31:18] reserved.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CtxtCmd {
    pub sel: u8,
    pub op: u32,
    pub qid: u16,
    pub reserved: u32,
}

impl CtxtCmd {
    pub(crate) fn decode(v: u32) -> Self {
        Self {
            sel: bits(v, 4, 1) as u8,
            op: bits(v, 6, 5),
            qid: bits(v, 17, 7) as u16,
            reserved: bits(v, 31, 18) | bits(v, 0, 0),
        }
    }
}

/// Software descriptor context (sel 0/1, hardware.md §5.2).
#[derive(Clone, Copy, Debug)]
pub(crate) struct SwCtxt {
    pub pidx: u16,
    pub func: u8,
    pub qen: bool,
    pub wbi_chk: bool,
    pub wbi_intvl_en: bool,
    pub rngsz_idx: usize,
    pub desc_sz: u32,
    pub bypass: bool,
    pub wbk_en: bool,
    pub is_mm: bool,
    pub base: u64,
}

impl SwCtxt {
    pub(crate) fn decode(w: &[u32; 8]) -> Self {
        Self {
            pidx: bits(w[0], 15, 0) as u16,
            func: bits(w[0], 24, 17) as u8,
            qen: bit(w[1], 0),
            wbi_chk: bit(w[1], 2),
            wbi_intvl_en: bit(w[1], 3),
            rngsz_idx: bits(w[1], 15, 12) as usize,
            desc_sz: bits(w[1], 17, 16),
            bypass: bit(w[1], 18),
            wbk_en: bit(w[1], 20),
            is_mm: bit(w[1], 31),
            base: u64::from(w[2]) | u64::from(w[3]) << 32,
        }
    }

    pub(crate) fn set_pidx(w: &mut [u32; 8], pidx: u16) {
        set_bits(&mut w[0], 15, 0, u32::from(pidx));
    }

    /// Clears qen (INVALIDATE).
    pub(crate) fn invalidate(w: &mut [u32; 8]) {
        set_bits(&mut w[1], 0, 0, 0);
    }
}

/// Hardware context (sel 2/3, hardware.md §5.3): W0 [15:0] cidx, W1 [8] descriptors pending.
pub(crate) mod hw {
    use super::{bits, set_bits};

    pub(crate) fn cidx(w: &[u32; 8]) -> u16 {
        bits(w[0], 15, 0) as u16
    }

    pub(crate) fn set_cidx(w: &mut [u32; 8], cidx: u16) {
        set_bits(&mut w[0], 15, 0, u32::from(cidx));
    }

    pub(crate) fn set_pending(w: &mut [u32; 8], pending: bool) {
        set_bits(&mut w[1], 8, 8, u32::from(pending));
    }
}

/// Prefetch context (sel 7, hardware.md §5.5).
#[derive(Clone, Copy, Debug)]
pub(crate) struct PfchCtxt {
    pub bypass: bool,
    pub bufsz_idx: usize,
    pub valid: bool,
}

impl PfchCtxt {
    pub(crate) fn decode(w: &[u32; 8]) -> Self {
        Self {
            bypass: bit(w[0], 0),
            bufsz_idx: bits(w[0], 4, 1) as usize,
            valid: bit(w[1], 13),
        }
    }

    pub(crate) fn invalidate(w: &mut [u32; 8]) {
        set_bits(&mut w[1], 13, 13, 0);
    }
}

/// Completion context (sel 6, hardware.md §5.6).
#[derive(Clone, Copy, Debug)]
pub(crate) struct CmptCtxt {
    pub stat_en: bool,
    pub intr_en: bool,
    pub trig_mode: u32,
    pub func: u8,
    pub counter_idx: usize,
    pub timer_idx: usize,
    pub color: bool,
    pub rngsz_idx: usize,
    pub base: u64,
    pub desc_sz: u32,
    pub pidx: u16,
    pub cidx: u16,
    pub valid: bool,
    pub vec: u16,
    pub intr_aggr: bool,
    /// W4\[2\]: the overflow check is off (the driver leaves it on, hardware.md §5.6).
    pub ovf_chk_dis: bool,
}

impl CmptCtxt {
    pub(crate) fn decode(w: &[u32; 8]) -> Self {
        let base = u64::from(bits(w[1], 31, 6)) << 12 | u64::from(bits(w[2], 25, 0)) << 38;
        Self {
            stat_en: bit(w[0], 0),
            intr_en: bit(w[0], 1),
            trig_mode: bits(w[0], 4, 2),
            func: bits(w[0], 12, 5) as u8,
            counter_idx: bits(w[0], 20, 17) as usize,
            timer_idx: bits(w[0], 24, 21) as usize,
            color: bit(w[0], 27),
            rngsz_idx: bits(w[0], 31, 28) as usize,
            base,
            desc_sz: bits(w[2], 27, 26),
            pidx: (bits(w[2], 31, 28) | bits(w[3], 11, 0) << 4) as u16,
            cidx: bits(w[3], 27, 12) as u16,
            valid: bit(w[3], 28),
            vec: bits(w[4], 14, 4) as u16,
            intr_aggr: bit(w[4], 15),
            ovf_chk_dis: bit(w[4], 2),
        }
    }

    /// Sets the context's error field (W3 \[30:29\]).
    pub(crate) fn set_err(w: &mut [u32; 8], err: u32) {
        set_bits(&mut w[3], 30, 29, err);
    }

    pub(crate) fn set_pidx(w: &mut [u32; 8], pidx: u16) {
        set_bits(&mut w[2], 31, 28, u32::from(pidx) & 0xF);
        set_bits(&mut w[3], 11, 0, u32::from(pidx) >> 4);
    }

    pub(crate) fn set_cidx(w: &mut [u32; 8], cidx: u16) {
        set_bits(&mut w[3], 27, 12, u32::from(cidx));
    }

    pub(crate) fn set_color(w: &mut [u32; 8], color: bool) {
        set_bits(&mut w[0], 27, 27, u32::from(color));
    }

    pub(crate) fn set_trigger(w: &mut [u32; 8], counter_idx: u32, timer_idx: u32, trig_mode: u32) {
        set_bits(&mut w[0], 20, 17, counter_idx);
        set_bits(&mut w[0], 24, 21, timer_idx);
        set_bits(&mut w[0], 4, 2, trig_mode);
    }

    pub(crate) fn invalidate(w: &mut [u32; 8]) {
        set_bits(&mut w[3], 28, 28, 0);
    }
}

/// FMAP context (sel 12, hardware.md §4.2): W0 [10:0] qbase, W1 [11:0] qmax.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Fmap {
    pub qbase: u16,
    pub qmax: u16,
}

impl Fmap {
    pub(crate) fn decode(w: &[u32; 8]) -> Self {
        Self {
            qbase: bits(w[0], 10, 0) as u16,
            qmax: bits(w[1], 11, 0) as u16,
        }
    }
}

/// An H2C stream descriptor (hardware.md §7.1): metadata, length, source address.
#[derive(Clone, Copy, Debug)]
pub(crate) struct H2cDesc {
    pub metadata: u32,
    pub len: u16,
    pub addr: u64,
}

impl H2cDesc {
    pub(crate) fn decode(b: &[u8; 16]) -> Self {
        let w0 = u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
        let w1 = u64::from_le_bytes([b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]]);
        Self {
            metadata: w0 as u32,
            len: (w0 >> 32) as u16,
            addr: w1,
        }
    }
}

/// Doorbell fields (hardware.md §6).
pub(crate) mod doorbell {
    use super::{bit, bits};

    /// H2C/C2H PIDX: ([15:0] pidx, [16] irq_arm, reserved bits).
    pub(crate) fn pidx(v: u32) -> (u16, bool, u32) {
        (bits(v, 15, 0) as u16, bit(v, 16), bits(v, 31, 17))
    }

    /// CMPT CIDX: [15:0] cidx, [19:16] counter_idx, [23:20] timer_idx, [26:24] trig_mode,
    /// [27] stat_en, [28] irq_arm, [31:29] reserved.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct CmptCidx {
        pub cidx: u16,
        pub counter_idx: u32,
        pub timer_idx: u32,
        pub trig_mode: u32,
        pub stat_en: bool,
        pub irq_arm: bool,
        pub reserved: u32,
    }

    impl CmptCidx {
        pub(crate) fn decode(v: u32) -> Self {
            Self {
                cidx: bits(v, 15, 0) as u16,
                counter_idx: bits(v, 19, 16),
                timer_idx: bits(v, 23, 20),
                trig_mode: bits(v, 26, 24),
                stat_en: bit(v, 27),
                irq_arm: bit(v, 28),
                reserved: bits(v, 31, 29),
            }
        }
    }
}

/// The 8-byte completion entry the shell + IP write (hardware.md §7.3): [1] color, [2] error,
/// [26:16] abs qid, [47:32] length, [63:48] packet id.
pub(crate) fn cmpt_entry(color: bool, err: bool, qid: u16, len: u16, pkt_id: u16) -> u64 {
    u64::from(color) << 1
        | u64::from(err) << 2
        | u64::from(qid & 0x7FF) << 16
        | u64::from(len) << 32
        | u64::from(pkt_id) << 48
}

/// Descriptor ring status record (hardware.md §7.4): [15:0] pidx, [31:16] cidx.
pub(crate) fn desc_status(pidx: u16, cidx: u16) -> u64 {
    u64::from(pidx) | u64::from(cidx) << 16
}

/// Completion ring status record (hardware.md §7.4): [15:0] pidx, [31:16] cidx, [32] color,
/// [34:33] interrupt state.
pub(crate) fn cmpt_status(pidx: u16, cidx: u16, color: bool, intr_state: u32) -> u64 {
    u64::from(pidx) | u64::from(cidx) << 16 | u64::from(color) << 32 | u64::from(intr_state & 3) << 33
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_worked_examples_decode() {
        // hardware.md §5.2: H2C on PF0, ring at 0x123456000, vector 1.
        let h2c = SwCtxt::decode(&[0, 0x0011000D, 0x23456000, 1, 1, 0, 0, 0]);
        assert!(h2c.qen && h2c.wbi_chk && h2c.wbi_intvl_en && h2c.wbk_en && !h2c.is_mm);
        assert_eq!((h2c.rngsz_idx, h2c.desc_sz, h2c.base), (0, 1, 0x1_2345_6000));
        // C2H on PF1, ring at 0x200000000.
        let c2h = SwCtxt::decode(&[0x00020000, 0x00108003, 0, 2, 0, 0, 0, 0]);
        assert_eq!(
            (c2h.func, c2h.rngsz_idx, c2h.desc_sz, c2h.base),
            (1, 8, 0, 0x2_0000_0000)
        );
        assert!(c2h.qen && c2h.wbk_en && !c2h.wbi_chk);
        // hardware.md §5.6: PF0, CMPT ring at 0x300000000, vector 1.
        let cmpt = CmptCtxt::decode(&[0x88000017, 0x0C000000, 0, 0x10000000, 0x10, 0, 0, 0]);
        assert!(cmpt.stat_en && cmpt.intr_en && cmpt.color && cmpt.valid);
        assert_eq!((cmpt.trig_mode, cmpt.rngsz_idx, cmpt.vec), (5, 8, 1));
        assert_eq!(
            (cmpt.base, cmpt.desc_sz, cmpt.pidx, cmpt.cidx),
            (0x3_0000_0000, 0, 0, 0)
        );
        // hardware.md §5.5.
        let p = PfchCtxt::decode(&[0x08000010, 0x00002000, 0, 0, 0, 0, 0, 0]);
        assert!(p.valid && !p.bypass);
        assert_eq!(p.bufsz_idx, 8);
        // hardware.md §4.2: PF1 with 8 queues.
        let f = Fmap::decode(&[0x40, 8, 0, 0, 0, 0, 0, 0]);
        assert_eq!((f.qbase, f.qmax), (64, 8));
        // hardware.md §5.1 command examples.
        let c = CtxtCmd::decode(0x22EC);
        assert_eq!((c.sel, c.op, c.qid, c.reserved), (6, 3, 69, 0));
        let c = CtxtCmd::decode(0xB8);
        assert_eq!((c.sel, c.op, c.qid), (12, 1, 1));
        // hardware.md §6: CMPT CIDX of queue 3 set to 42 with arm.
        let d = doorbell::CmptCidx::decode(0x1D00002A);
        assert_eq!((d.cidx, d.trig_mode, d.counter_idx, d.timer_idx), (42, 5, 0, 0));
        assert!(d.stat_en && d.irq_arm);
    }

    #[test]
    fn cmpt_pidx_split_round_trips() {
        let mut w = [0u32; 8];
        CmptCtxt::set_pidx(&mut w, 1022);
        CmptCtxt::set_cidx(&mut w, 77);
        let c = CmptCtxt::decode(&w);
        assert_eq!((c.pidx, c.cidx), (1022, 77));
    }
}
