//! Indirect queue contexts and the IND_CTXT_CMD word (hardware.md §4.2, §5).
//!
//! A context is programmed through IND_CTXT_DATA\[0..7\] (its words, then zeros), all eight
//! IND_CTXT_MASK registers set to 0xFFFFFFFF, and a command word ([`IndCtxtCmd`]); the register
//! offsets are in [`crate::regs::qdma`]. Each context type here is a tuple struct over its words
//! `[u32; N]`, with the spec's field names. Field positions are written as `Wi + bit`: bits are
//! numbered across all words (bit `b` of word `i` is bit `32 * i + b`), so a field the spec splits
//! over two words, such as the prefetch context's `sw_crdt`, is one range and its accessors handle
//! the split.
//!
//! Queue contexts take the absolute qid (qbase + queue index) in the command; the FMAP context takes
//! the function number.

use bitfield::bitfield;

use super::desc::{CmptEntrySize, DescSize};
use super::doorbell::TrigMode;
use super::words::word_array_bitrange;
use super::{code_enum, register_u32};
use crate::addr::DmaAddr;
use crate::id::{AbsQueueId, FunctionId};
use crate::regs::qdma::IND_CTXT_WORDS;

/// First bit of word 0.
const W0: usize = 0;
/// First bit of word 1.
const W1: usize = 32;
/// First bit of word 2.
const W2: usize = 64;
/// First bit of word 3.
const W3: usize = 96;
/// First bit of word 4.
const W4: usize = 128;

/// Address bits below the 4 KiB page that the completion and interrupt contexts do not store.
const PAGE_SHIFT: u32 = 12;

/// Declares the word conversions every context type has.
macro_rules! ctxt_words {
    ($name:ident, $n:literal) => {
        word_array_bitrange!($name);

        impl $name {
            /// Number of 32-bit context words.
            pub const WORDS: usize = $n;

            /// The context words W0..W(N-1).
            #[must_use]
            pub const fn words(&self) -> [u32; $n] {
                self.0
            }

            /// A context with exactly these words (for example as read back with a READ command).
            #[must_use]
            pub const fn from_words(words: [u32; $n]) -> Self {
                Self(words)
            }

            /// The eight IND_CTXT_DATA values for a WRITE command: the context words, then zeros.
            #[must_use]
            pub fn data_regs(&self) -> [u32; IND_CTXT_WORDS] {
                let mut regs = [0; IND_CTXT_WORDS];
                for (reg, word) in regs.iter_mut().zip(self.0) {
                    *reg = word;
                }
                regs
            }
        }

        const _: () = assert!($n <= IND_CTXT_WORDS);
    };
}

code_enum! {
    /// Context selector, the `sel` field of IND_CTXT_CMD (hardware.md §5.1).
    pub enum CtxtSel {
        /// 0: software descriptor context of a C2H (receive) ring.
        SwC2h = 0,
        /// 1: software descriptor context of an H2C (transmit) ring.
        SwH2c = 1,
        /// 2: hardware context of a C2H ring.
        HwC2h = 2,
        /// 3: hardware context of an H2C ring.
        HwH2c = 3,
        /// 4: credit context of a C2H ring.
        CrC2h = 4,
        /// 5: credit context of an H2C ring.
        CrH2c = 5,
        /// 6: completion (CMPT) ring context.
        Cmpt = 6,
        /// 7: C2H prefetch context.
        Pfch = 7,
        /// 8: interrupt coalescing (aggregation ring) context; unused by the reference driver.
        IntrCoal = 8,
        /// 9: PASID RAM low; unused.
        PasidLow = 9,
        /// 10: PASID RAM high; unused.
        PasidHigh = 10,
        /// 11: timer context; unused.
        Timer = 11,
        /// 12: function map; the command's qid field carries the function number.
        Fmap = 12,
    }
}

code_enum! {
    /// Context operation, the `op` field of IND_CTXT_CMD (hardware.md §5.1).
    pub enum CtxtOp {
        /// 0: clear the context.
        Clear = 0,
        /// 1: write IND_CTXT_DATA into the context (under IND_CTXT_MASK).
        Write = 1,
        /// 2: read the context into IND_CTXT_DATA.
        Read = 2,
        /// 3: invalidate the context.
        Invalidate = 3,
    }
}

bitfield! {
    /// IND_CTXT_CMD (BAR0 + 0x844), hardware.md §5.1. Bits 31:18 are written as 0.
    ///
    /// `sel` and `op` decode to their enums; `op` has no undefined code, `sel` codes 13 to 15 decode
    /// to an [`UnknownCode`](super::UnknownCode) error.
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct IndCtxtCmd(u32);
    impl Debug;
    /// \[0\]: busy, read-only: 1 while the command executes. Written as 0.
    pub busy, set_busy: 0;
    /// \[4:1\]: which context.
    pub u8, from try_into CtxtSel, sel, set_sel: 4, 1;
    /// \[6:5\]: what to do with it.
    pub u8, from try_into CtxtOp, op, set_op: 6, 5;
    /// \[17:7\]: absolute qid for queue contexts, the function number for FMAP.
    pub u16, qid, set_qid: 17, 7;
}
register_u32!(IndCtxtCmd);

impl IndCtxtCmd {
    /// The command word `sel << 1 | op << 5 | qid << 7` (busy 0) for a queue context: `sel` is any
    /// selector but [`CtxtSel::Fmap`], `qid` the absolute queue (only its low 11 bits fit).
    #[must_use]
    pub fn queue(sel: CtxtSel, op: CtxtOp, qid: AbsQueueId) -> Self {
        debug_assert!(sel != CtxtSel::Fmap, "the FMAP context is addressed by function");
        Self::with_field(sel, op, qid.get())
    }

    /// The command word for function `func`'s FMAP context: the qid field carries the function.
    #[must_use]
    pub fn fmap(op: CtxtOp, func: FunctionId) -> Self {
        Self::with_field(CtxtSel::Fmap, op, u16::from(func.get()))
    }

    fn with_field(sel: CtxtSel, op: CtxtOp, qid: u16) -> Self {
        let mut cmd = Self(0);
        cmd.set_sel(sel);
        cmd.set_op(op);
        cmd.set_qid(qid);
        cmd
    }
}

bitfield! {
    /// Software descriptor context of an H2C or C2H ring (selector 1 / 0), 5 words,
    /// hardware.md §5.2.
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct SwCtxt([u32; 5]);
    no default BitRange;
    impl Debug;
    /// W0 \[15:0\]: producer index.
    pub u16, pidx, set_pidx: W0 + 15, W0;
    /// W0 \[16\]: interrupt armed.
    pub irq_arm, set_irq_arm: W0 + 16;
    /// W0 \[24:17\]: PCI function.
    pub u8, func_id, set_func_id: W0 + 24, W0 + 17;
    /// W1 \[0\]: queue enable.
    pub qen, set_qen: W1;
    /// W1 \[1\]: fetch credits from the PIDX doorbell.
    pub fcrd_en, set_fcrd_en: W1 + 1;
    /// W1 \[2\]: writeback/interrupt after the pending check.
    pub wbi_chk, set_wbi_chk: W1 + 2;
    /// W1 \[3\]: writeback/interrupt at the writeback interval.
    pub wbi_intvl_en, set_wbi_intvl_en: W1 + 3;
    /// W1 \[4\]: address translation.
    pub at, set_at: W1 + 4;
    /// W1 \[7:5\]: fetch_max.
    pub u8, fetch_max, set_fetch_max: W1 + 7, W1 + 5;
    /// W1 \[15:12\]: GLBL_RNG_SZ index of the ring size.
    pub u8, rngsz_idx, set_rngsz_idx: W1 + 15, W1 + 12;
    /// W1 \[17:16\]: descriptor size (every code is defined, so this always decodes).
    pub u8, from try_into DescSize, desc_sz, set_desc_sz: W1 + 17, W1 + 16;
    /// W1 \[18\]: bypass.
    pub bypass, set_bypass: W1 + 18;
    /// W1 \[19\]: mm_chn.
    pub mm_chn, set_mm_chn: W1 + 19;
    /// W1 \[20\]: status writeback enable.
    pub wbk_en, set_wbk_en: W1 + 20;
    /// W1 \[21\]: interrupt enable.
    pub irq_en, set_irq_en: W1 + 21;
    /// W1 \[24:22\]: port id.
    pub u8, port_id, set_port_id: W1 + 24, W1 + 22;
    /// W1 \[25\]: irq_no_last.
    pub irq_no_last, set_irq_no_last: W1 + 25;
    /// W1 \[27:26\]: error.
    pub u8, err, set_err: W1 + 27, W1 + 26;
    /// W1 \[28\]: error writeback sent.
    pub err_wb_sent, set_err_wb_sent: W1 + 28;
    /// W1 \[29\]: interrupt requested.
    pub irq_req, set_irq_req: W1 + 29;
    /// W1 \[30\]: marker disable.
    pub mrkr_dis, set_mrkr_dis: W1 + 30;
    /// W1 \[31\]: memory-mapped queue (0 = stream).
    pub is_mm, set_is_mm: W1 + 31;
    /// W2, W3: ring DMA address, bits 31:0 in W2 and 63:32 in W3.
    pub u64, desc_base, set_desc_base: W3 + 31, W2;
    /// W4 \[10:0\]: MSI-X vector.
    pub u16, vec, set_vec: W4 + 10, W4;
    /// W4 \[11\]: interrupt aggregation.
    pub intr_aggr, set_intr_aggr: W4 + 11;
}
ctxt_words!(SwCtxt, 5);

impl SwCtxt {
    /// The reference driver's H2C (transmit) context: function `func`, ring at `ring`, ring size
    /// index `rngsz_idx` (the driver uses 0 = 4096 entries), vector `vec` (stored although interrupts
    /// stay off); queue enabled, writeback at the interval and after the pending check, 16-byte
    /// descriptors, status writeback on, stream mode. W1 = 0x0011000D with `rngsz_idx` 0.
    #[must_use]
    pub fn reference_h2c(func: FunctionId, ring: DmaAddr, rngsz_idx: u8, vec: u16) -> Self {
        let mut c = Self::default();
        c.set_func_id(func.get());
        c.set_qen(true);
        c.set_wbi_chk(true);
        c.set_wbi_intvl_en(true);
        c.set_rngsz_idx(rngsz_idx);
        c.set_desc_sz(DescSize::B16);
        c.set_wbk_en(true);
        c.set_desc_base(ring.get());
        c.set_vec(vec);
        c
    }

    /// The reference driver's C2H (receive) context: function `func`, ring at `ring`, ring size
    /// index `rngsz_idx` (the driver uses 8 = 1024 entries), vector 0; queue enabled, credits from
    /// the PIDX doorbell, 8-byte descriptors, status writeback on, stream mode. W1 = 0x00108003 with
    /// `rngsz_idx` 8.
    #[must_use]
    pub fn reference_c2h(func: FunctionId, ring: DmaAddr, rngsz_idx: u8) -> Self {
        let mut c = Self::default();
        c.set_func_id(func.get());
        c.set_qen(true);
        c.set_fcrd_en(true);
        c.set_rngsz_idx(rngsz_idx);
        c.set_desc_sz(DescSize::B8);
        c.set_wbk_en(true);
        c.set_desc_base(ring.get());
        c
    }
}

bitfield! {
    /// Hardware context of an H2C or C2H ring (selector 3 / 2), 2 words, hardware.md §5.3.
    /// Read-only state kept by the IP; the driver only clears and invalidates it.
    ///
    /// The spec describes these fields in prose only; the names are that prose in snake_case.
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct HwCtxt([u32; 2]);
    no default BitRange;
    impl Debug;
    /// W0 \[15:0\]: consumer index.
    pub u16, cidx, set_cidx: W0 + 15, W0;
    /// W0 \[31:16\]: credits used.
    pub u16, credits_used, set_credits_used: W0 + 31, W0 + 16;
    /// W1 \[8\]: descriptor pending.
    pub desc_pending, set_desc_pending: W1 + 8;
    /// W1 \[9\]: idle-stopped.
    pub idle_stopped, set_idle_stopped: W1 + 9;
    /// W1 \[10\]: event pending.
    pub event_pending, set_event_pending: W1 + 10;
    /// W1 \[14:11\]: fetch pending.
    pub u8, fetch_pending, set_fetch_pending: W1 + 14, W1 + 11;
}
ctxt_words!(HwCtxt, 2);

bitfield! {
    /// Credit context of an H2C or C2H ring (selector 5 / 4), 1 word, hardware.md §5.4. The driver
    /// only clears and invalidates it. The field name is the spec's prose in snake_case.
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct CreditCtxt([u32; 1]);
    no default BitRange;
    impl Debug;
    /// W0 \[15:0\]: credits received.
    pub u16, credits_received, set_credits_received: W0 + 15, W0;
}
ctxt_words!(CreditCtxt, 1);

bitfield! {
    /// C2H prefetch context (selector 7), 2 words, hardware.md §5.5.
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct PfchCtxt([u32; 2]);
    no default BitRange;
    impl Debug;
    /// W0 \[0\]: bypass.
    pub bypass, set_bypass: W0;
    /// W0 \[4:1\]: C2H_BUF_SZ index of the buffer size.
    pub u8, bufsz_idx, set_bufsz_idx: W0 + 4, W0 + 1;
    /// W0 \[7:5\]: port id.
    pub u8, port_id, set_port_id: W0 + 7, W0 + 5;
    /// W0 \[26\]: error.
    pub err, set_err: W0 + 26;
    /// W0 \[27\]: prefetch enable.
    pub pfch_en, set_pfch_en: W0 + 27;
    /// W0 \[28\]: prefetch in progress.
    pub in_pfch, set_in_pfch: W0 + 28;
    /// Software credits, split over two words: sw_crdt\[2:0\] in W0 \[31:29\] and sw_crdt\[15:3\] in
    /// W1 \[12:0\].
    pub u16, sw_crdt, set_sw_crdt: W1 + 12, W0 + 29;
    /// W1 \[13\]: context valid.
    pub valid, set_valid: W1 + 13;
}
ctxt_words!(PfchCtxt, 2);

impl PfchCtxt {
    /// The reference driver's prefetch context: buffer size index `bufsz_idx` (the driver uses
    /// 8 = 4096 bytes), prefetch on, valid. With index 8: W0 = 0x08000010, W1 = 0x00002000.
    #[must_use]
    pub fn reference(bufsz_idx: u8) -> Self {
        let mut c = Self::default();
        c.set_bufsz_idx(bufsz_idx);
        c.set_pfch_en(true);
        c.set_valid(true);
        c
    }
}

bitfield! {
    /// Completion (CMPT) ring context (selector 6), 5 words, hardware.md §5.6.
    ///
    /// The ring base is stored without its low 12 bits: the ring must be 4 KiB aligned. Use
    /// [`base_addr`](Self::base_addr) / [`set_base_addr`](Self::set_base_addr) for the address;
    /// `baddr_4k` is the stored value, the address shifted right by 12.
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct CmptCtxt([u32; 5]);
    no default BitRange;
    impl Debug;
    /// W0 \[0\]: write the status record to the ring's last slot.
    pub stat_en, set_stat_en: W0;
    /// W0 \[1\]: interrupt enable.
    pub intr_en, set_intr_en: W0 + 1;
    /// W0 \[4:2\]: trigger mode; codes 6 and 7 are undefined and decode to an error.
    pub u8, from try_into TrigMode, trig_mode, set_trig_mode: W0 + 4, W0 + 2;
    /// W0 \[12:5\]: PCI function.
    pub u8, func_id, set_func_id: W0 + 12, W0 + 5;
    /// W0 \[20:17\]: C2H_CNT_TH index of the count threshold.
    pub u8, counter_idx, set_counter_idx: W0 + 20, W0 + 17;
    /// W0 \[24:21\]: C2H_TIMER_CNT index of the timer.
    pub u8, timer_idx, set_timer_idx: W0 + 24, W0 + 21;
    /// W0 \[26:25\]: interrupt state.
    pub u8, intr_st, set_intr_st: W0 + 26, W0 + 25;
    /// W0 \[27\]: color; the reference driver starts every ring with 1.
    pub color, set_color: W0 + 27;
    /// W0 \[31:28\]: GLBL_RNG_SZ index of the ring size.
    pub u8, rngsz_idx, set_rngsz_idx: W0 + 31, W0 + 28;
    /// Ring base address bits 63:12 (the spec's baddr, as a 4 KiB page number): address bits
    /// 37:12 in W1 \[31:6\], address bits 63:38 in W2 \[25:0\].
    pub u64, baddr_4k, set_baddr_4k: W2 + 25, W1 + 6;
    /// W2 \[27:26\]: completion entry size (every code is defined, so this always decodes).
    pub u8, from try_into CmptEntrySize, desc_sz, set_desc_sz: W2 + 27, W2 + 26;
    /// Producer index, split over two words: pidx\[3:0\] in W2 \[31:28\] and pidx\[15:4\] in
    /// W3 \[11:0\].
    pub u16, pidx, set_pidx: W3 + 11, W2 + 28;
    /// W3 \[27:12\]: consumer index.
    pub u16, cidx, set_cidx: W3 + 27, W3 + 12;
    /// W3 \[28\]: context valid.
    pub valid, set_valid: W3 + 28;
    /// W3 \[30:29\]: error.
    pub u8, err, set_err: W3 + 30, W3 + 29;
    /// W3 \[31\]: user trigger pending.
    pub user_trig_pend, set_user_trig_pend: W3 + 31;
    /// W4 \[0\]: timer running.
    pub timer_running, set_timer_running: W4;
    /// W4 \[1\]: full update.
    pub full_upd, set_full_upd: W4 + 1;
    /// W4 \[2\]: overflow check disable (0 = check on).
    pub ovf_chk_dis, set_ovf_chk_dis: W4 + 2;
    /// W4 \[3\]: address translation.
    pub at, set_at: W4 + 3;
    /// W4 \[14:4\]: MSI-X vector.
    pub u16, vec, set_vec: W4 + 14, W4 + 4;
    /// W4 \[15\]: interrupt aggregation (0 = direct interrupt).
    pub intr_aggr, set_intr_aggr: W4 + 15;
}
ctxt_words!(CmptCtxt, 5);

impl CmptCtxt {
    /// The ring base address (its low 12 bits are not stored and read as 0).
    #[must_use]
    pub fn base_addr(&self) -> DmaAddr {
        DmaAddr::new(self.baddr_4k() << PAGE_SHIFT)
    }

    /// Stores the ring base address. Its low 12 bits are dropped: the hardware requires a 4 KiB
    /// aligned ring, and an unaligned `addr` is stored as the start of its page.
    pub fn set_base_addr(&mut self, addr: DmaAddr) {
        self.set_baddr_4k(addr.get() >> PAGE_SHIFT);
    }

    /// The reference driver's completion context: status writeback and interrupt on, trigger mode 5
    /// (timer or count) with counter and timer index 0, function `func`, starting color 1, ring size
    /// index `rngsz_idx` (the driver uses 8 = 1024 entries), ring at `ring` (4 KiB aligned), entry
    /// size `entry_size` (the driver uses 8 bytes), valid, vector `vec`, direct interrupt. For PF0,
    /// index 8, 8-byte entries: W0 = 0x88000017, W3 = 0x10000000, W4 = `vec << 4`.
    #[must_use]
    pub fn reference(
        func: FunctionId,
        ring: DmaAddr,
        rngsz_idx: u8,
        entry_size: CmptEntrySize,
        vec: u16,
    ) -> Self {
        let mut c = Self::default();
        c.set_stat_en(true);
        c.set_intr_en(true);
        c.set_trig_mode(TrigMode::TimerCount);
        c.set_func_id(func.get());
        c.set_counter_idx(0);
        c.set_timer_idx(0);
        c.set_color(true);
        c.set_rngsz_idx(rngsz_idx);
        c.set_base_addr(ring);
        c.set_desc_sz(entry_size);
        c.set_valid(true);
        c.set_vec(vec);
        c
    }
}

bitfield! {
    /// Interrupt-coalescing (aggregation ring) context (selector 8), 3 words, hardware.md §5.7. The
    /// reference driver does not use interrupt aggregation; this is here for completeness.
    ///
    /// The ring base is stored as a 4 KiB page number (`baddr_4k`, the address shifted right by
    /// 12). The spec gives `intr_st` and `page_size` in prose only ("interrupt state", "ring page
    /// size code").
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct IntrCtxt([u32; 3]);
    no default BitRange;
    impl Debug;
    /// W0 \[0\]: context valid.
    pub valid, set_valid: W0;
    /// W0 \[11:1\]: MSI-X vector.
    pub u16, vec, set_vec: W0 + 11, W0 + 1;
    /// W0 \[13\]: interrupt state.
    pub intr_st, set_intr_st: W0 + 13;
    /// W0 \[14\]: color.
    pub color, set_color: W0 + 14;
    /// Ring page number P = address >> 12, split over three words: P\[16:0\] in W0 \[31:15\],
    /// P\[48:17\] in W1, P\[51:49\] in W2 \[2:0\].
    pub u64, baddr_4k, set_baddr_4k: W2 + 2, W0 + 15;
    /// W2 \[5:3\]: ring page size code.
    pub u8, page_size, set_page_size: W2 + 5, W2 + 3;
    /// W2 \[17:6\]: producer index.
    pub u16, pidx, set_pidx: W2 + 17, W2 + 6;
    /// W2 \[18\]: address translation.
    pub at, set_at: W2 + 18;
}
ctxt_words!(IntrCtxt, 3);

impl IntrCtxt {
    /// The ring base address (its low 12 bits are not stored and read as 0).
    #[must_use]
    pub fn base_addr(&self) -> DmaAddr {
        DmaAddr::new(self.baddr_4k() << PAGE_SHIFT)
    }

    /// Stores the ring base address as its page number; the low 12 bits are dropped.
    pub fn set_base_addr(&mut self, addr: DmaAddr) {
        self.set_baddr_4k(addr.get() >> PAGE_SHIFT);
    }
}

bitfield! {
    /// Function map context (selector 12), 2 words, hardware.md §4.2: which absolute queues belong
    /// to a function. The command's qid field carries the function number.
    #[derive(Clone, Copy, PartialEq, Eq, Default)]
    #[cfg_attr(feature = "defmt", derive(defmt::Format))]
    pub struct FmapCtxt([u32; 2]);
    no default BitRange;
    impl Debug;
    /// W0 \[10:0\]: absolute qid of the function's first queue.
    pub u16, qbase, set_qbase: W0 + 10, W0;
    /// W1 \[11:0\]: number of queues.
    pub u16, qmax, set_qmax: W1 + 11, W1;
}
ctxt_words!(FmapCtxt, 2);

impl FmapCtxt {
    /// The map of a function owning `qmax` queues from absolute qid `qbase` (the reference driver:
    /// `qbase = function * 64`). Only the low 11 bits of `qbase` and 12 bits of `qmax` fit.
    #[must_use]
    pub fn new(qbase: AbsQueueId, qmax: u16) -> Self {
        let mut c = Self::default();
        c.set_qbase(qbase.get());
        c.set_qmax(qmax);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pf(n: u8) -> FunctionId {
        FunctionId::new(n).unwrap()
    }
    use crate::layout::UnknownCode;

    /// For each field: setting it to `ones` in an all-zero context gives exactly `words`, and setting
    /// it to `zero` in an all-ones context clears exactly those bits.
    macro_rules! isolation {
        ($ty:ident: $($set:ident($ones:expr, $zero:expr) => $words:expr;)+) => {$({
            let words: [u32; $ty::WORDS] = $words;
            let mut c = $ty::default();
            c.$set($ones);
            assert_eq!(c.words(), words, "{} on zeros", stringify!($set));
            let mut c = $ty::from_words([u32::MAX; $ty::WORDS]);
            c.$set($zero);
            assert_eq!(c.words(), words.map(|w| !w), "{} on ones", stringify!($set));
        })+};
    }

    #[test]
    fn sw_ctxt_spec_examples() {
        // hardware.md §5.2: H2C on PF0, ring 0x0000000123456000, vector 1.
        let h2c = SwCtxt::reference_h2c(pf(0), DmaAddr::new(0x0000_0001_2345_6000), 0, 1);
        assert_eq!(
            h2c.words(),
            [0x00000000, 0x0011000D, 0x23456000, 0x00000001, 0x00000001]
        );
        assert_eq!(
            h2c.data_regs(),
            [0x00000000, 0x0011000D, 0x23456000, 0x00000001, 0x00000001, 0, 0, 0]
        );
        // C2H on PF1, ring 0x0000000200000000.
        let c2h = SwCtxt::reference_c2h(pf(1), DmaAddr::new(0x0000_0002_0000_0000), 8);
        assert_eq!(
            c2h.words(),
            [0x00020000, 0x00108003, 0x00000000, 0x00000002, 0x00000000]
        );
        // W0 = func << 17; W1 as in the table for any function and ring.
        let h2c = SwCtxt::reference_h2c(pf(1), DmaAddr::new(0x8000_1000), 0, 7);
        assert_eq!(h2c.words(), [0x00020000, 0x0011000D, 0x80001000, 0, 7]);
        let c2h = SwCtxt::reference_c2h(pf(3), DmaAddr::new(0xFFFF_FFFF_FFFF_F000), 8);
        assert_eq!(c2h.words(), [0x00060000, 0x00108003, 0xFFFFF000, 0xFFFFFFFF, 0]);
    }

    #[test]
    fn sw_ctxt_decodes_fields() {
        let c = SwCtxt::from_words([0x00020000, 0x00108003, 0x00000000, 0x00000002, 0x00000000]);
        assert_eq!(c.func_id(), 1);
        assert!(c.qen() && c.fcrd_en() && c.wbk_en());
        assert!(!c.wbi_chk() && !c.wbi_intvl_en() && !c.irq_en() && !c.is_mm());
        assert_eq!(c.rngsz_idx(), 8);
        assert_eq!(c.desc_sz(), Ok(DescSize::B8));
        assert_eq!(c.desc_base(), 0x0000_0002_0000_0000);
        assert_eq!(c.vec(), 0);
        let c = SwCtxt::reference_h2c(pf(0), DmaAddr::new(0x1000), 0, 1);
        assert_eq!(c.desc_sz(), Ok(DescSize::B16));
        assert_eq!(c.vec(), 1);
    }

    #[test]
    fn sw_ctxt_field_isolation() {
        isolation! { SwCtxt:
            set_pidx(u16::MAX, 0) => [0x0000_FFFF, 0, 0, 0, 0];
            set_irq_arm(true, false) => [1 << 16, 0, 0, 0, 0];
            set_func_id(u8::MAX, 0) => [0x01FE_0000, 0, 0, 0, 0];
            set_qen(true, false) => [0, 1 << 0, 0, 0, 0];
            set_fcrd_en(true, false) => [0, 1 << 1, 0, 0, 0];
            set_wbi_chk(true, false) => [0, 1 << 2, 0, 0, 0];
            set_wbi_intvl_en(true, false) => [0, 1 << 3, 0, 0, 0];
            set_at(true, false) => [0, 1 << 4, 0, 0, 0];
            set_fetch_max(u8::MAX, 0) => [0, 0x0000_00E0, 0, 0, 0];
            set_rngsz_idx(u8::MAX, 0) => [0, 0x0000_F000, 0, 0, 0];
            set_desc_sz(DescSize::B64, DescSize::B8) => [0, 0x0003_0000, 0, 0, 0];
            set_bypass(true, false) => [0, 1 << 18, 0, 0, 0];
            set_mm_chn(true, false) => [0, 1 << 19, 0, 0, 0];
            set_wbk_en(true, false) => [0, 1 << 20, 0, 0, 0];
            set_irq_en(true, false) => [0, 1 << 21, 0, 0, 0];
            set_port_id(u8::MAX, 0) => [0, 0x01C0_0000, 0, 0, 0];
            set_irq_no_last(true, false) => [0, 1 << 25, 0, 0, 0];
            set_err(u8::MAX, 0) => [0, 0x0C00_0000, 0, 0, 0];
            set_err_wb_sent(true, false) => [0, 1 << 28, 0, 0, 0];
            set_irq_req(true, false) => [0, 1 << 29, 0, 0, 0];
            set_mrkr_dis(true, false) => [0, 1 << 30, 0, 0, 0];
            set_is_mm(true, false) => [0, 1 << 31, 0, 0, 0];
            set_desc_base(u64::MAX, 0) => [0, 0, u32::MAX, u32::MAX, 0];
            set_vec(u16::MAX, 0) => [0, 0, 0, 0, 0x0000_07FF];
            set_intr_aggr(true, false) => [0, 0, 0, 0, 1 << 11];
        }
    }

    #[test]
    fn hw_and_credit_ctxt_fields() {
        isolation! { HwCtxt:
            set_cidx(u16::MAX, 0) => [0x0000_FFFF, 0];
            set_credits_used(u16::MAX, 0) => [0xFFFF_0000, 0];
            set_desc_pending(true, false) => [0, 1 << 8];
            set_idle_stopped(true, false) => [0, 1 << 9];
            set_event_pending(true, false) => [0, 1 << 10];
            set_fetch_pending(u8::MAX, 0) => [0, 0x0000_7800];
        }
        isolation! { CreditCtxt:
            set_credits_received(u16::MAX, 0) => [0x0000_FFFF];
        }
        let hw = HwCtxt::from_words([0x0010_0FFE, 0x0000_4500]);
        assert_eq!(hw.cidx(), 0xFFE);
        assert_eq!(hw.credits_used(), 0x10);
        assert!(hw.desc_pending() && !hw.idle_stopped() && hw.event_pending());
        assert_eq!(hw.fetch_pending(), 8);
        assert_eq!(hw.data_regs(), [0x0010_0FFE, 0x0000_4500, 0, 0, 0, 0, 0, 0]);
        assert_eq!(CreditCtxt::from_words([0xABCD_1234]).credits_received(), 0x1234);
        assert_eq!((HwCtxt::WORDS, CreditCtxt::WORDS), (2, 1));
    }

    #[test]
    fn pfch_ctxt_spec_example() {
        // hardware.md §5.5.
        let c = PfchCtxt::reference(8);
        assert_eq!(c.words(), [0x08000010, 0x00002000]);
        assert_eq!(c.data_regs(), [0x08000010, 0x00002000, 0, 0, 0, 0, 0, 0]);
        assert_eq!(c.bufsz_idx(), 8);
        assert!(c.pfch_en() && c.valid() && !c.bypass() && !c.in_pfch());
        assert_eq!(c.sw_crdt(), 0);
        assert_eq!(PfchCtxt::reference(0).words(), [0x08000000, 0x00002000]);
        assert_eq!(PfchCtxt::reference(15).words(), [0x0800001E, 0x00002000]);
    }

    #[test]
    fn pfch_ctxt_sw_crdt_split() {
        // sw_crdt[2:0] -> W0[31:29], sw_crdt[15:3] -> W1[12:0].
        let mut c = PfchCtxt::default();
        c.set_sw_crdt(0x1234);
        assert_eq!(c.words(), [0x4 << 29, 0x1234 >> 3]);
        assert_eq!(c.words(), [0x8000_0000, 0x0000_0246]);
        assert_eq!(c.sw_crdt(), 0x1234);
        c.set_sw_crdt(7);
        assert_eq!(c.words(), [0xE000_0000, 0]);
        c.set_sw_crdt(8);
        assert_eq!(c.words(), [0, 1]);
        // The split field leaves the neighbouring in_pfch (W0[28]) and valid (W1[13]) alone.
        let mut c = PfchCtxt::reference(8);
        c.set_in_pfch(true);
        c.set_sw_crdt(u16::MAX);
        assert_eq!(c.words(), [0xF800_0010, 0x0000_3FFF]);
        assert!(c.in_pfch() && c.valid());
        assert_eq!(PfchCtxt::from_words([0xE000_0000, 0x1FFF]).sw_crdt(), u16::MAX);
    }

    #[test]
    fn pfch_ctxt_field_isolation() {
        isolation! { PfchCtxt:
            set_bypass(true, false) => [1 << 0, 0];
            set_bufsz_idx(u8::MAX, 0) => [0x0000_001E, 0];
            set_port_id(u8::MAX, 0) => [0x0000_00E0, 0];
            set_err(true, false) => [1 << 26, 0];
            set_pfch_en(true, false) => [1 << 27, 0];
            set_in_pfch(true, false) => [1 << 28, 0];
            set_sw_crdt(u16::MAX, 0) => [0xE000_0000, 0x0000_1FFF];
            set_valid(true, false) => [0, 1 << 13];
        }
    }

    #[test]
    fn cmpt_ctxt_spec_examples() {
        // hardware.md §5.6: PF0, ring 0x0000000300000000, vector 1.
        let c = CmptCtxt::reference(
            pf(0),
            DmaAddr::new(0x0000_0003_0000_0000),
            8,
            CmptEntrySize::B8,
            1,
        );
        assert_eq!(
            c.words(),
            [0x88000017, 0x0C000000, 0x00000000, 0x10000000, 0x00000010]
        );
        assert_eq!(
            c.data_regs(),
            [0x88000017, 0x0C000000, 0x00000000, 0x10000000, 0x00000010, 0, 0, 0]
        );
        // PF1: W0 = 0x88000017 | 1 << 5.
        let c = CmptCtxt::reference(
            pf(1),
            DmaAddr::new(0x0000_0003_0000_0000),
            8,
            CmptEntrySize::B8,
            1,
        );
        assert_eq!(c.words()[0], 0x88000037);
        // The formulas of §5.6 for another ring: W1 = ((addr >> 12) & 0x3FFFFFF) << 6, W2 = addr >> 38.
        let c = CmptCtxt::reference(
            pf(2),
            DmaAddr::new(0x0000_00AB_CDEF_1000),
            8,
            CmptEntrySize::B8,
            7,
        );
        assert_eq!(
            c.words(),
            [0x88000057, 0xAF37BC40, 0x00000002, 0x10000000, 0x00000070]
        );
        let c = CmptCtxt::reference(
            pf(0),
            DmaAddr::new(0xFEDC_BA98_7654_3000),
            8,
            CmptEntrySize::B8,
            0,
        );
        assert_eq!(c.words()[1..3], [0x61D950C0, 0x03FB72EA]);
        assert_eq!(c.base_addr(), DmaAddr::new(0xFEDC_BA98_7654_3000));
        // The entry size lands in W2[27:26].
        let c = CmptCtxt::reference(pf(0), DmaAddr::new(0), 8, CmptEntrySize::B32, 0);
        assert_eq!(c.words()[2], 0x0800_0000);
    }

    #[test]
    fn cmpt_ctxt_decodes_fields() {
        let c = CmptCtxt::from_words([0x88000037, 0x0C000000, 0x00000000, 0x10000000, 0x00000010]);
        assert!(c.stat_en() && c.intr_en() && c.color() && c.valid());
        assert_eq!(c.trig_mode(), Ok(TrigMode::TimerCount));
        assert_eq!(c.func_id(), 1);
        assert_eq!((c.counter_idx(), c.timer_idx(), c.intr_st()), (0, 0, 0));
        assert_eq!(c.rngsz_idx(), 8);
        assert_eq!(c.base_addr(), DmaAddr::new(0x0000_0003_0000_0000));
        assert_eq!(c.baddr_4k(), 0x30_0000);
        assert_eq!(c.desc_sz(), Ok(CmptEntrySize::B8));
        assert_eq!((c.pidx(), c.cidx()), (0, 0));
        assert_eq!(c.vec(), 1);
        assert!(!c.intr_aggr());
        // Undefined trigger codes decode to an error, not a panic.
        assert_eq!(
            CmptCtxt::from_words([0x1C, 0, 0, 0, 0]).trig_mode(),
            Err(UnknownCode(7))
        );
        assert_eq!(
            CmptCtxt::from_words([0x18, 0, 0, 0, 0]).trig_mode(),
            Err(UnknownCode(6))
        );
    }

    #[test]
    fn cmpt_ctxt_base_and_pidx_splits() {
        let mut c = CmptCtxt::default();
        c.set_base_addr(DmaAddr::new(0xFFFF_FFFF_FFFF_F000));
        assert_eq!(c.words(), [0, 0xFFFF_FFC0, 0x03FF_FFFF, 0, 0]);
        assert_eq!(c.base_addr(), DmaAddr::new(0xFFFF_FFFF_FFFF_F000));
        // Bits 11:0 are not stored.
        c.set_base_addr(DmaAddr::new(0x1234_5FFF));
        assert_eq!(c.base_addr(), DmaAddr::new(0x1234_5000));
        assert_eq!(c.words(), [0, 0x1234_5000 >> 6, 0, 0, 0]);
        assert_eq!(c.words()[1], 0x0048_D140);
        // pidx[3:0] -> W2[31:28], pidx[15:4] -> W3[11:0].
        let mut c = CmptCtxt::default();
        c.set_pidx(0x1234);
        assert_eq!(c.words(), [0, 0, 0x4000_0000, 0x0000_0123, 0]);
        assert_eq!(c.pidx(), 0x1234);
        c.set_pidx(1022);
        assert_eq!(c.words(), [0, 0, 0xE000_0000, 0x0000_003F, 0]);
        assert_eq!(
            CmptCtxt::from_words([0, 0, 0xF000_0000, 0xFFF, 0]).pidx(),
            u16::MAX
        );
    }

    #[test]
    fn cmpt_ctxt_field_isolation() {
        isolation! { CmptCtxt:
            set_stat_en(true, false) => [1 << 0, 0, 0, 0, 0];
            set_intr_en(true, false) => [1 << 1, 0, 0, 0, 0];
            set_func_id(u8::MAX, 0) => [0x0000_1FE0, 0, 0, 0, 0];
            set_counter_idx(u8::MAX, 0) => [0x001E_0000, 0, 0, 0, 0];
            set_timer_idx(u8::MAX, 0) => [0x01E0_0000, 0, 0, 0, 0];
            set_intr_st(u8::MAX, 0) => [0x0600_0000, 0, 0, 0, 0];
            set_color(true, false) => [1 << 27, 0, 0, 0, 0];
            set_rngsz_idx(u8::MAX, 0) => [0xF000_0000, 0, 0, 0, 0];
            set_baddr_4k(u64::MAX, 0) => [0, 0xFFFF_FFC0, 0x03FF_FFFF, 0, 0];
            set_desc_sz(CmptEntrySize::B64, CmptEntrySize::B8) => [0, 0, 0x0C00_0000, 0, 0];
            set_pidx(u16::MAX, 0) => [0, 0, 0xF000_0000, 0x0000_0FFF, 0];
            set_cidx(u16::MAX, 0) => [0, 0, 0, 0x0FFF_F000, 0];
            set_valid(true, false) => [0, 0, 0, 1 << 28, 0];
            set_err(u8::MAX, 0) => [0, 0, 0, 0x6000_0000, 0];
            set_user_trig_pend(true, false) => [0, 0, 0, 1 << 31, 0];
            set_timer_running(true, false) => [0, 0, 0, 0, 1 << 0];
            set_full_upd(true, false) => [0, 0, 0, 0, 1 << 1];
            set_ovf_chk_dis(true, false) => [0, 0, 0, 0, 1 << 2];
            set_at(true, false) => [0, 0, 0, 0, 1 << 3];
            set_vec(u16::MAX, 0) => [0, 0, 0, 0, 0x0000_7FF0];
            set_intr_aggr(true, false) => [0, 0, 0, 0, 1 << 15];
        }
        // The trigger mode has no all-ones code: check its extent with the largest defined code
        // and by decoding.
        let mut c = CmptCtxt::default();
        c.set_trig_mode(TrigMode::TimerCount);
        assert_eq!(c.words(), [5 << 2, 0, 0, 0, 0]);
        let mut words = [u32::MAX; 5];
        words[0] &= !0x1C;
        assert_eq!(CmptCtxt::from_words(words).trig_mode(), Ok(TrigMode::Off));
    }

    #[test]
    fn intr_ctxt_fields() {
        isolation! { IntrCtxt:
            set_valid(true, false) => [1 << 0, 0, 0];
            set_vec(u16::MAX, 0) => [0x0000_0FFE, 0, 0];
            set_intr_st(true, false) => [1 << 13, 0, 0];
            set_color(true, false) => [1 << 14, 0, 0];
            set_baddr_4k(u64::MAX, 0) => [0xFFFF_8000, u32::MAX, 0x0000_0007];
            set_page_size(u8::MAX, 0) => [0, 0, 0x0000_0038];
            set_pidx(u16::MAX, 0) => [0, 0, 0x0003_FFC0];
            set_at(true, false) => [0, 0, 1 << 18];
        }
        // P = addr >> 12: P[16:0] -> W0[31:15], P[48:17] -> W1, P[51:49] -> W2[2:0].
        let mut c = IntrCtxt::default();
        c.set_base_addr(DmaAddr::new(0xFEDC_BA98_7654_3000));
        assert_eq!(c.words(), [0xB2A1_8000, 0xF6E5_D4C3, 0x0000_0007]);
        assert_eq!(c.base_addr(), DmaAddr::new(0xFEDC_BA98_7654_3000));
        assert_eq!(IntrCtxt::WORDS, 3);
    }

    #[test]
    fn fmap_ctxt_spec_examples() {
        // hardware.md §4.2: PF0 and PF1 with 8 queues each.
        let pf0 = FmapCtxt::new(AbsQueueId::new(0), 8);
        assert_eq!(pf0.data_regs(), [0x00000000, 0x00000008, 0, 0, 0, 0, 0, 0]);
        let pf1 = FmapCtxt::new(AbsQueueId::new(64), 8);
        assert_eq!(pf1.words(), [0x00000040, 0x00000008]);
        assert_eq!(pf1.data_regs(), [0x00000040, 0x00000008, 0, 0, 0, 0, 0, 0]);
        assert_eq!((pf1.qbase(), pf1.qmax()), (64, 8));
        assert_eq!(FmapCtxt::new(AbsQueueId::new(192), 64).words(), [0xC0, 0x40]);
        isolation! { FmapCtxt:
            set_qbase(u16::MAX, 0) => [0x0000_07FF, 0];
            set_qmax(u16::MAX, 0) => [0, 0x0000_0FFF];
        }
    }

    #[test]
    fn ind_ctxt_cmd_spec_examples() {
        use CtxtOp::{Clear, Invalidate, Write};
        let cmd = |sel, op, q| IndCtxtCmd::queue(sel, op, AbsQueueId::new(q)).bits();
        let fmap = |op, f| IndCtxtCmd::fmap(op, pf(f)).bits();
        // hardware.md §5.1 examples.
        assert_eq!(cmd(CtxtSel::SwH2c, Invalidate, 5), 0x2E2);
        assert_eq!(cmd(CtxtSel::Cmpt, Invalidate, 69), 0x22EC);
        assert_eq!(fmap(Clear, 1), 0x98);
        assert_eq!(fmap(Write, 0), 0x38);
        // hardware.md §4.2: PF0 CLEAR 0x18, WRITE 0x38; PF1 CLEAR 0x98, WRITE 0xB8.
        assert_eq!(fmap(Clear, 0), 0x18);
        assert_eq!(fmap(Write, 1), 0xB8);
        for f in 0..4u8 {
            let f128 = u32::from(f) * 128;
            assert_eq!(fmap(Clear, f), 0x18 + f128);
            assert_eq!(fmap(Write, f), 0x38 + f128);
            assert_eq!(fmap(CtxtOp::Read, f), 0x58 + f128);
        }
        // The §5.1 formulas, for a few absolute qids.
        for q in [0u16, 1, 5, 64, 69, 511, 2047] {
            let q128 = u32::from(q) * 128;
            assert_eq!(cmd(CtxtSel::SwH2c, Write, q), 0x22 + q128);
            assert_eq!(cmd(CtxtSel::SwC2h, Write, q), 0x20 + q128);
            assert_eq!(cmd(CtxtSel::Cmpt, Write, q), 0x2C + q128);
            assert_eq!(cmd(CtxtSel::Pfch, Write, q), 0x2E + q128);
            for sel in 0..12u8 {
                let s = CtxtSel::try_from(sel).unwrap();
                assert_eq!(cmd(s, Clear, q), 2 * u32::from(sel) + q128);
                assert_eq!(cmd(s, Invalidate, q), 0x60 + 2 * u32::from(sel) + q128);
                assert_eq!(cmd(s, CtxtOp::Read, q), 0x40 + 2 * u32::from(sel) + q128);
            }
        }
        // qid has 11 bits; nothing spills into bits 31:18.
        assert_eq!(cmd(CtxtSel::SwC2h, Clear, u16::MAX), 0x0003_FF80);
    }

    #[test]
    fn ind_ctxt_cmd_decodes() {
        // A read-back with busy set.
        let c = IndCtxtCmd::from_bits(0x22ED);
        assert!(c.busy());
        assert_eq!(c.sel(), Ok(CtxtSel::Cmpt));
        assert_eq!(c.op(), Ok(CtxtOp::Invalidate));
        assert_eq!(c.qid(), 69);
        assert!(!IndCtxtCmd::from_bits(0x22EC).busy());
        // Selectors 13..15 are undefined.
        assert_eq!(IndCtxtCmd::from_bits(13 << 1).sel(), Err(UnknownCode(13)));
        assert_eq!(IndCtxtCmd::from_bits(0x1E).sel(), Err(UnknownCode(15)));
        // Bits 31:18 are ignored by every field.
        let c = IndCtxtCmd::from_bits(0xFFFC_0000);
        assert!(!c.busy());
        assert_eq!(
            (c.sel(), c.op(), c.qid()),
            (Ok(CtxtSel::SwC2h), Ok(CtxtOp::Clear), 0)
        );
        // Field isolation.
        let mut c = IndCtxtCmd::default();
        c.set_busy(true);
        assert_eq!(c.bits(), 1);
        let mut c = IndCtxtCmd::default();
        c.set_op(CtxtOp::Invalidate);
        assert_eq!(c.bits(), 0x60);
        let mut c = IndCtxtCmd::default();
        c.set_qid(u16::MAX);
        assert_eq!(c.bits(), 0x0003_FF80);
        let mut c = IndCtxtCmd::default();
        c.set_sel(CtxtSel::Fmap);
        assert_eq!(c.bits(), 0x18);
        assert_eq!(IndCtxtCmd::from_bits(!0x1E).sel(), Ok(CtxtSel::SwC2h));
    }

    #[test]
    fn selector_and_op_codes() {
        let sels = [
            CtxtSel::SwC2h,
            CtxtSel::SwH2c,
            CtxtSel::HwC2h,
            CtxtSel::HwH2c,
            CtxtSel::CrC2h,
            CtxtSel::CrH2c,
            CtxtSel::Cmpt,
            CtxtSel::Pfch,
            CtxtSel::IntrCoal,
            CtxtSel::PasidLow,
            CtxtSel::PasidHigh,
            CtxtSel::Timer,
            CtxtSel::Fmap,
        ];
        for (code, sel) in sels.into_iter().enumerate() {
            assert_eq!(usize::from(sel.code()), code);
            assert_eq!(CtxtSel::try_from(sel.code()), Ok(sel));
        }
        for bad in 13..=u8::MAX {
            assert_eq!(CtxtSel::try_from(bad), Err(UnknownCode(bad)));
        }
        let ops = [CtxtOp::Clear, CtxtOp::Write, CtxtOp::Read, CtxtOp::Invalidate];
        for (code, op) in ops.into_iter().enumerate() {
            assert_eq!(usize::from(op.code()), code);
            assert_eq!(CtxtOp::try_from(op.code()), Ok(op));
        }
        assert_eq!(CtxtOp::try_from(4), Err(UnknownCode(4)));
    }

    #[test]
    fn round_trips() {
        let patterns = [0u32, u32::MAX, 0xA5A5_5A5A, 0x0123_4567, 0xFEDC_BA98];
        for p in patterns {
            let w5 = [p, p.rotate_left(7), !p, p ^ 0x8000_0001, p.rotate_right(3)];
            assert_eq!(SwCtxt::from_words(w5).words(), w5);
            assert_eq!(CmptCtxt::from_words(w5).words(), w5);
            assert_eq!(HwCtxt::from_words([w5[0], w5[1]]).words(), [w5[0], w5[1]]);
            assert_eq!(PfchCtxt::from_words([w5[2], w5[3]]).words(), [w5[2], w5[3]]);
            assert_eq!(FmapCtxt::from_words([w5[3], w5[4]]).words(), [w5[3], w5[4]]);
            assert_eq!(
                IntrCtxt::from_words([w5[0], w5[2], w5[4]]).words(),
                [w5[0], w5[2], w5[4]]
            );
            assert_eq!(CreditCtxt::from_words([p]).words(), [p]);
            assert_eq!(IndCtxtCmd::from_bits(p).bits(), p);
            // Rebuilding a context from its decoded fields gives the defined bits back.
            let c = SwCtxt::from_words(w5);
            let mut r = SwCtxt::default();
            r.set_pidx(c.pidx());
            r.set_irq_arm(c.irq_arm());
            r.set_func_id(c.func_id());
            r.set_desc_base(c.desc_base());
            r.set_vec(c.vec());
            r.set_intr_aggr(c.intr_aggr());
            assert_eq!(r.words()[0], w5[0] & 0x01FF_FFFF);
            assert_eq!(r.words()[2..4], w5[2..4]);
            assert_eq!(r.words()[4], w5[4] & 0xFFF);
        }
        assert_eq!(
            (SwCtxt::WORDS, CmptCtxt::WORDS, PfchCtxt::WORDS, FmapCtxt::WORDS),
            (5, 5, 2, 2)
        );
    }

    #[test]
    fn debug_prints_field_names() {
        extern crate std;
        use std::format;
        let s = format!("{:x?}", PfchCtxt::reference(8));
        assert!(s.contains("bufsz_idx: 8"), "{s}");
        assert!(s.contains("sw_crdt: 0"), "{s}");
        assert!(s.contains("valid: true"), "{s}");
        let s = format!("{:?}", IndCtxtCmd::fmap(CtxtOp::Write, pf(1)));
        assert!(s.contains("sel: Ok(Fmap)") && s.contains("qid: 1"), "{s}");
    }
}
