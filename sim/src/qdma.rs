//! The QDMA side of the model: BAR0 decoding (CSRs, indirect contexts, doorbells) and the H2C,
//! C2H and completion engines.

use alloc::vec;
use alloc::vec::Vec;

use onic_hal::regs::qdma as regs;
use onic_hal::regs::shell::INDIR_ENTRY_MASK;
use onic_hal::{AbsQueueId, Bar, DmaAddr, Reg};

use crate::card::{QueueRt, State, UNMAPPED};
use crate::config::{Corruption, DeviceAccess, Violation};
use crate::fields::{
    bits, cmpt_entry, cmpt_status, desc_status, doorbell, hw, op, sel, CmptCtxt, CtxtCmd, Fmap, H2cDesc,
    PfchCtxt, SwCtxt,
};
use crate::rss::shell_hash;

/// Raw offsets of the registers the model decodes by value, taken from the `onic_hal::regs`
/// handles.
mod off {
    use onic_hal::regs::qdma;
    use onic_hal::QueueId;

    pub(super) const IND_CTXT_CMD: u32 = qdma::IND_CTXT_CMD.offset();
    pub(super) const C2H_PFCH_CACHE_DEPTH: u32 = qdma::C2H_PFCH_CACHE_DEPTH.offset();
    pub(super) const C2H_CMPL_COAL_BUF_DEPTH: u32 = qdma::C2H_CMPL_COAL_BUF_DEPTH.offset();
    pub(super) const GLBL2_CHANNEL_QDMA_CAP: u32 = qdma::GLBL2_CHANNEL_QDMA_CAP.offset();
    /// Doorbells within a queue's block.
    pub(super) const DB_INT_CIDX: u32 =
        qdma::dmap_sel_int_cidx(QueueId::new(0)).offset() - qdma::DMAP_SEL_BASE;
    pub(super) const DB_H2C_PIDX: u32 =
        qdma::dmap_sel_h2c_dsc_pidx(QueueId::new(0)).offset() - qdma::DMAP_SEL_BASE;
    pub(super) const DB_C2H_PIDX: u32 =
        qdma::dmap_sel_c2h_dsc_pidx(QueueId::new(0)).offset() - qdma::DMAP_SEL_BASE;
}

/// Highest abs qid the 11-bit fields can name, plus one.
const QID_SPACE: u32 = 2048;
/// End of BAR0 as modelled: the doorbell blocks of 2048 queues.
const BAR0_LEN: u32 = regs::DMAP_SEL_BASE + regs::DMAP_SEL_STRIDE * QID_SPACE;
/// Length of one user-clock cycle (250 MHz), the unit of C2H_INT_TIMER_TICK.
const USER_CLOCK_NS: u64 = 4;
/// Largest ring the 16-bit indices can address.
const MAX_RING: u32 = 1 << 16;
/// Size of the status record written into a ring's last slot.
const STATUS_LEN: usize = 8;

fn reg_violation(offset: u32, value: u32, reason: &'static str) -> Violation {
    Violation::Register {
        bar: Bar::Qdma,
        offset,
        value,
        reason,
    }
}

impl State {
    // ---------------------------------------------------------------------------------------
    // Global tables as the driver programmed them.

    fn csr<F>(&self, reg: Reg<F>) -> u32 {
        self.csr_at(reg.offset())
    }

    fn csr_at(&self, offset: u32) -> u32 {
        self.csr.get(&offset).copied().unwrap_or(0)
    }

    /// GLBL_RNG_SZ\[idx\] if it is usable: at least 2 entries (one for data, one for the status
    /// record) and at most 65536 (indices are 16 bits).
    pub(crate) fn ring_size(&self, idx: usize) -> Option<u32> {
        Some(self.csr(regs::glbl_rng_sz(idx))).filter(|s| (2..=MAX_RING).contains(s))
    }

    fn buf_size(&self, idx: usize) -> u32 {
        self.csr(regs::c2h_buf_sz(idx))
    }

    fn timer_ns(&self, idx: usize) -> u64 {
        let tick_cycles = u64::from(self.csr(regs::C2H_INT_TIMER_TICK).max(1));
        u64::from(self.csr(regs::c2h_timer_cnt(idx))) * tick_cycles * USER_CLOCK_NS
    }

    fn count_threshold(&self, idx: usize) -> u32 {
        self.csr(regs::c2h_cnt_th(idx))
    }

    /// GLBL_DSC_CFG wb_acc_int: writeback every 4 << code descriptors.
    fn wb_interval(&self) -> u32 {
        4 << bits(self.csr(regs::GLBL_DSC_CFG), 2, 0)
    }

    pub(crate) fn ctx(&self, s: u8, key: u16) -> [u32; 8] {
        self.ctxt.get(&(s, key)).copied().unwrap_or([0; 8])
    }

    fn ctx_mut(&mut self, s: u8, key: u16) -> &mut [u32; 8] {
        self.ctxt.entry((s, key)).or_insert([0; 8])
    }

    fn rt(&mut self, qid: AbsQueueId) -> &mut QueueRt {
        self.rt.entry(qid).or_default()
    }

    // ---------------------------------------------------------------------------------------
    // BAR0 register access.

    pub(crate) fn qdma_read(&mut self, func: u8, offset: u32) -> u32 {
        if func >= self.cfg.functions || !offset.is_multiple_of(4) || offset >= BAR0_LEN {
            return UNMAPPED;
        }
        for i in 0..regs::IND_CTXT_WORDS {
            if offset == regs::ind_ctxt_data(i).offset() {
                return self.ind_data[i];
            }
            if offset == regs::ind_ctxt_mask(i).offset() {
                return self.ind_mask[i];
            }
        }
        match offset {
            off::IND_CTXT_CMD => self.ind_cmd & !1 | u32::from(self.faults.hold_ctxt_cmds),
            off::C2H_PFCH_CACHE_DEPTH => self.cfg.pfch_cache_depth,
            off::C2H_CMPL_COAL_BUF_DEPTH => self.cfg.cmpl_coal_buf_depth,
            off::GLBL2_CHANNEL_QDMA_CAP => u32::from(self.cfg.total_queues),
            o if o >= regs::DMAP_SEL_BASE => 0,
            o => self.csr_at(o),
        }
    }

    pub(crate) fn qdma_write(&mut self, func: u8, offset: u32, value: u32) {
        if func >= self.cfg.functions {
            return self.violate(reg_violation(
                offset,
                value,
                "write through the BAR0 of a missing function",
            ));
        }
        if !offset.is_multiple_of(4) || offset >= BAR0_LEN {
            return self.violate(reg_violation(offset, value, "misaligned or outside BAR0"));
        }
        for i in 0..regs::IND_CTXT_WORDS {
            if offset == regs::ind_ctxt_data(i).offset() {
                self.ind_data[i] = value;
                self.ind_writer[i] = func;
                return;
            }
            if offset == regs::ind_ctxt_mask(i).offset() {
                self.ind_mask[i] = value;
                self.ind_writer[8 + i] = func;
                return;
            }
        }
        match offset {
            off::IND_CTXT_CMD => self.context_command(func, value),
            off::C2H_PFCH_CACHE_DEPTH | off::C2H_CMPL_COAL_BUF_DEPTH | off::GLBL2_CHANNEL_QDMA_CAP => {
                self.violate(reg_violation(offset, value, "write to a read-only register"));
            }
            o if o >= regs::DMAP_SEL_BASE => self.doorbell(func, o, value),
            o => {
                self.csr.insert(o, value);
            }
        }
    }

    /// An error the QDMA detected (fault knob): `bits` are set in leaf status register `leaf`
    /// of [`regs::errors::LEAF_STATUS`] and its group bit in GLBL_ERR_STAT (the first of its
    /// bits: the older map's for H2C, as the reference driver enables). If GLBL_ERR_INT is
    /// armed, the error interrupt goes to the vector it names and the arm bit clears (one
    /// interrupt per arming). Returns whether an interrupt was sent; an unknown `leaf` or no bits
    /// change nothing.
    pub(crate) fn raise_error(&mut self, leaf: usize, bits: u32) -> bool {
        let Some(l) = regs::errors::LEAF_STATUS.get(leaf) else {
            return false;
        };
        if bits == 0 {
            return false;
        }
        let group = 1 << l.group_bits.trailing_zeros();
        *self.csr.entry(l.reg.offset()).or_insert(0) |= bits;
        *self.csr.entry(regs::GLBL_ERR_STAT.offset()).or_insert(0) |= group;
        let mut int = onic_hal::layout::csr::GlblErrInt::from_bits(self.csr(regs::GLBL_ERR_INT));
        if !int.arm() {
            return false;
        }
        self.interrupts.push(crate::config::Interrupt {
            func: int.func(),
            vector: int.vec(),
        });
        int.set_arm(false);
        self.csr.insert(regs::GLBL_ERR_INT.offset(), int.bits());
        true
    }

    // ---------------------------------------------------------------------------------------
    // Indirect contexts (hardware.md §5).

    fn context_command(&mut self, func: u8, value: u32) {
        let cmd = CtxtCmd::decode(value);
        self.ind_cmd = value & !1;
        if self.faults.hold_ctxt_cmds {
            return;
        }
        if cmd.reserved != 0 {
            return self.violate(reg_violation(
                regs::IND_CTXT_CMD.offset(),
                value,
                "reserved bits set in IND_CTXT_CMD",
            ));
        }
        let key_ok = match cmd.sel {
            sel::FMAP => cmd.qid < u16::from(self.cfg.functions),
            0..=sel::TIMER => u32::from(cmd.qid) < u32::from(self.cfg.total_queues),
            _ => {
                return self.violate(reg_violation(
                    regs::IND_CTXT_CMD.offset(),
                    value,
                    "invalid context selector",
                ));
            }
        };
        if !key_ok {
            let why = if cmd.sel == sel::FMAP {
                "FMAP context of a missing function"
            } else {
                "context of a queue beyond the QDMA's queues"
            };
            return self.violate(reg_violation(regs::IND_CTXT_CMD.offset(), value, why));
        }
        let key = (cmd.sel, cmd.qid);
        match cmd.op {
            op::CLEAR => {
                self.ctxt.insert(key, [0; 8]);
            }
            op::WRITE => {
                if self.ind_writer.iter().any(|&w| w != func) {
                    // The hardware would program the context with the other function's words.
                    self.violate(reg_violation(
                        regs::IND_CTXT_CMD.offset(),
                        value,
                        "context WRITE with data or mask words another function wrote (commands interleaved)",
                    ));
                }
                let old = self.ctx(cmd.sel, cmd.qid);
                let mut new = [0u32; 8];
                for i in 0..8 {
                    new[i] = (old[i] & !self.ind_mask[i]) | (self.ind_data[i] & self.ind_mask[i]);
                }
                self.ctxt.insert(key, new);
                self.check_written_context(cmd.sel, AbsQueueId::new(cmd.qid), &new);
            }
            op::READ => {
                let mut w = self.ctx(cmd.sel, cmd.qid);
                if cmd.sel == sel::HW_H2C || cmd.sel == sel::HW_C2H {
                    let sw = if cmd.sel == sel::HW_H2C {
                        sel::SW_H2C
                    } else {
                        sel::SW_C2H
                    };
                    let pidx = SwCtxt::decode(&self.ctx(sw, cmd.qid)).pidx;
                    let pending = pidx != hw::cidx(&w);
                    hw::set_pending(&mut w, pending);
                }
                self.ind_data = w;
                return;
            }
            op::INVALIDATE => {
                let w = self.ctx_mut(cmd.sel, cmd.qid);
                match cmd.sel {
                    sel::SW_C2H | sel::SW_H2C => SwCtxt::invalidate(w),
                    sel::PFCH => PfchCtxt::invalidate(w),
                    sel::CMPT => CmptCtxt::invalidate(w),
                    _ => *w = [0; 8],
                }
            }
            // `op` is a 2-bit field.
            _ => return,
        }
        // CLEAR, WRITE and INVALIDATE restart the engine state tied to the context.
        if cmd.sel != sel::FMAP {
            let rt = self.rt(AbsQueueId::new(cmd.qid));
            match cmd.sel {
                sel::SW_H2C => {
                    rt.h2c_since_wb = 0;
                    rt.h2c_wb_owed = false;
                    rt.h2c_error = false;
                }
                sel::SW_C2H => rt.c2h_error = false,
                sel::CMPT => {
                    rt.armed = false;
                    rt.unreported = 0;
                    rt.deadline = None;
                    rt.trigger_pending = false;
                }
                _ => {}
            }
        }
    }

    /// Checks the driver's context values the model relies on, at WRITE time.
    fn check_written_context(&mut self, s: u8, qid: AbsQueueId, w: &[u32; 8]) {
        let below_4g = self.dma.rings_below_4g();
        let (enabled, base) = match s {
            sel::SW_C2H | sel::SW_H2C => {
                let c = SwCtxt::decode(w);
                if c.qen && c.func >= self.cfg.functions {
                    self.violate(Violation::Queue {
                        qid,
                        reason: "software context names a missing function",
                    });
                }
                (c.qen, c.base)
            }
            sel::CMPT => {
                let c = CmptCtxt::decode(w);
                (c.valid, c.base)
            }
            sel::FMAP => {
                let f = Fmap::decode(w);
                if f.qmax > self.cfg.max_queues_per_function
                    || u32::from(f.qbase) + u32::from(f.qmax) > u32::from(self.cfg.total_queues)
                {
                    self.violate(Violation::Queue {
                        qid: AbsQueueId::new(f.qbase),
                        reason: "FMAP qmax beyond the queues a function may have",
                    });
                }
                return;
            }
            _ => return,
        };
        if enabled && below_4g && !DmaAddr::new(base).fits_below_4g(1) {
            self.violate(Violation::Queue {
                qid,
                reason: "ring base at or above 4 GiB (the coherent DMA mask is 32-bit)",
            });
        }
        if enabled && base & 0xFFF != 0 {
            self.violate(Violation::Queue {
                qid,
                reason: "ring base not 4 KiB aligned",
            });
        }
    }

    // ---------------------------------------------------------------------------------------
    // Doorbells (hardware.md §6).

    fn doorbell(&mut self, func: u8, offset: u32, value: u32) {
        let rel = offset - regs::DMAP_SEL_BASE;
        let qid = (rel / regs::DMAP_SEL_STRIDE) as u16;
        let kind = rel % regs::DMAP_SEL_STRIDE;
        let fmap = Fmap::decode(&self.ctx(sel::FMAP, u16::from(func)));
        if kind == off::DB_INT_CIDX {
            return self.violate(reg_violation(
                offset,
                value,
                "INTR_CIDX: interrupt aggregation is not used",
            ));
        }
        if qid >= fmap.qmax {
            return self.violate(reg_violation(
                offset,
                value,
                "doorbell of a queue outside the function's FMAP",
            ));
        }
        let abs = AbsQueueId::new((fmap.qbase + qid) & 0x7FF);
        match kind {
            off::DB_H2C_PIDX | off::DB_C2H_PIDX => {
                let (pidx, _arm, reserved) = doorbell::pidx(value);
                if reserved != 0 {
                    return self.violate(reg_violation(
                        offset,
                        value,
                        "reserved bits set in a PIDX doorbell",
                    ));
                }
                let s = if kind == off::DB_H2C_PIDX {
                    sel::SW_H2C
                } else {
                    sel::SW_C2H
                };
                let sw = SwCtxt::decode(&self.ctx(s, abs.get()));
                if !sw.qen {
                    return self.violate(reg_violation(offset, value, "PIDX doorbell of a disabled queue"));
                }
                let size = self.ring_size(sw.rngsz_idx);
                if size.is_some_and(|size| u32::from(pidx) >= size - 1) {
                    return self.violate(reg_violation(offset, value, "PIDX beyond the ring"));
                }
                SwCtxt::set_pidx(self.ctx_mut(s, abs.get()), pidx);
            }
            _ => self.cmpt_doorbell(offset, abs, value),
        }
    }

    fn cmpt_doorbell(&mut self, offset: u32, qid: AbsQueueId, value: u32) {
        let d = doorbell::CmptCidx::decode(value);
        if d.reserved != 0 {
            return self.violate(reg_violation(
                offset,
                value,
                "reserved bits set in a CMPT CIDX doorbell",
            ));
        }
        let c = CmptCtxt::decode(&self.ctx(sel::CMPT, qid.get()));
        if !c.valid {
            return self.violate(reg_violation(
                offset,
                value,
                "CMPT CIDX doorbell of an invalid completion ring",
            ));
        }
        let size = self.ring_size(c.rngsz_idx);
        if size.is_some_and(|size| u32::from(d.cidx) >= size - 1) {
            return self.violate(reg_violation(offset, value, "CMPT CIDX beyond the ring"));
        }
        let w = self.ctx_mut(sel::CMPT, qid.get());
        CmptCtxt::set_cidx(w, d.cidx);
        CmptCtxt::set_trigger(w, d.counter_idx, d.timer_idx, d.trig_mode);
        if d.stat_en {
            self.write_cmpt_status(qid);
        }
        if d.irq_arm {
            self.rt(qid).armed = true;
            self.try_fire(qid);
        }
    }

    // ---------------------------------------------------------------------------------------
    // H2C engine.

    /// The function whose QCONF range claims `qid`, if any (hardware.md §2.3).
    fn qconf_owner(&self, qid: AbsQueueId) -> Option<u8> {
        self.funcs
            .iter()
            .position(|f| {
                let qbase = f.qconf >> 16;
                let numq = f.qconf & 0xFFFF;
                u32::from(qid.get()) >= qbase && u32::from(qid.get()) < qbase + numq
            })
            .and_then(|f| u8::try_from(f).ok())
    }

    pub(crate) fn h2c_round(&mut self) -> bool {
        if let Some(q) = self.h2c_stall {
            if self.qconf_owner(q).is_none() {
                return false;
            }
            self.h2c_stall = None;
        }
        let qids: Vec<AbsQueueId> = self
            .ctxt
            .keys()
            .filter(|(s, _)| *s == sel::SW_H2C)
            .map(|&(_, q)| AbsQueueId::new(q))
            .collect();
        let mut progress = false;
        for q in qids {
            progress |= self.h2c_queue(q);
            if self.h2c_stall.is_some() {
                break;
            }
        }
        progress
    }

    fn h2c_fail(&mut self, qid: AbsQueueId, reason: &'static str) -> bool {
        self.rt(qid).h2c_error = true;
        self.violate(Violation::Queue { qid, reason });
        false
    }

    fn h2c_queue(&mut self, qid: AbsQueueId) -> bool {
        let sw = SwCtxt::decode(&self.ctx(sel::SW_H2C, qid.get()));
        if !sw.qen || self.rt(qid).h2c_error {
            return false;
        }
        let mut progress = false;
        let size = self.ring_size(sw.rngsz_idx);
        let stride = 8u64 << sw.desc_sz;
        let mut cidx = hw::cidx(&self.ctx(sel::HW_H2C, qid.get()));
        if self.rt(qid).h2c_wb_owed && !self.faults.stall_h2c_wb && size.is_some() {
            self.h2c_writeback(qid, &sw, cidx);
            progress = true;
        }
        if sw.pidx == cidx {
            return progress;
        }
        let Some(size) = size else {
            return self.h2c_fail(qid, "H2C ring size table entry not programmed (or beyond 65536)");
        };
        if sw.is_mm || sw.bypass {
            return self.h2c_fail(qid, "memory-mapped or bypass H2C queues are not modeled");
        }
        if stride < 16 {
            return self.h2c_fail(qid, "H2C stream descriptors are 16 bytes (desc_sz 1)");
        }
        let usable = (size - 1) as u16;
        if sw.pidx >= usable || cidx >= usable {
            return self.h2c_fail(qid, "H2C pidx or cidx beyond the ring (ring size changed?)");
        }
        let interval = self.wb_interval();
        let mut n = 0;
        while cidx != sw.pidx && n < self.cfg.h2c_batch {
            let mut raw = [0u8; 16];
            let at = sw.base.wrapping_add(stride * u64::from(cidx));
            if let Err(v) = self
                .dma
                .device_read(sw.func, at, &mut raw, DeviceAccess::H2cDescFetch)
            {
                self.violate(v);
                self.rt(qid).h2c_error = true;
                break;
            }
            let Some(func) = self.qconf_owner(qid) else {
                self.h2c_stall = Some(qid);
                self.violate(Violation::H2cStalled { qid });
                break;
            };
            self.transmit_descriptor(qid, cidx, H2cDesc::decode(&raw), func, sw.func);
            cidx = (cidx + 1) % usable;
            n += 1;
            self.stats.h2c_descriptors += 1;
            hw::set_cidx(self.ctx_mut(sel::HW_H2C, qid.get()), cidx);
            let rt = self.rt(qid);
            rt.h2c_since_wb += 1;
            if sw.wbi_intvl_en && rt.h2c_since_wb >= interval {
                rt.h2c_since_wb = 0;
                self.h2c_writeback(qid, &sw, cidx);
            }
        }
        if n > 0 && cidx == sw.pidx && sw.wbi_chk {
            self.h2c_writeback(qid, &sw, cidx);
        }
        progress || n > 0
    }

    fn h2c_writeback(&mut self, qid: AbsQueueId, sw: &SwCtxt, cidx: u16) {
        if !sw.wbk_en {
            return;
        }
        if self.faults.stall_h2c_wb {
            self.rt(qid).h2c_wb_owed = true;
            return;
        }
        self.rt(qid).h2c_wb_owed = false;
        let Some(size) = self.ring_size(sw.rngsz_idx) else {
            return;
        };
        let at = sw.base.wrapping_add((8u64 << sw.desc_sz) * u64::from(size - 1));
        let rec = desc_status(sw.pidx, cidx).to_le_bytes();
        if let Err(v) = self
            .dma
            .device_write(sw.func, at, &rec, DeviceAccess::H2cStatusWrite)
        {
            self.violate(v);
        }
    }

    /// One H2C packet: shell checks, data fetch (as PCI function `requester`, the queue's
    /// context function), adapter, CMAC, wire (the port of `func`, the QCONF owner).
    fn transmit_descriptor(&mut self, qid: AbsQueueId, index: u16, d: H2cDesc, func: u8, requester: u8) {
        let port = usize::from(func);
        if port >= self.ports.len() {
            return self.violate(Violation::Queue {
                qid,
                reason: "the function owning this queue has no CMAC port",
            });
        }
        let len = usize::from(d.len);
        let drop =
            |s: &mut Self| crate::cmac::AdapterCounters::count(&mut s.ports[port].adapter.tx_drop, len);
        if d.len == 0 {
            drop(self);
            return self.violate(Violation::Queue {
                qid,
                reason: "zero-length H2C descriptor",
            });
        }
        if d.metadata & 0xFFFF != u32::from(d.len) {
            drop(self);
            return self.violate(Violation::MetadataMismatch {
                qid,
                index,
                metadata: d.metadata,
                len: d.len,
            });
        }
        let mut frame = vec![0u8; len];
        if let Err(v) = self
            .dma
            .device_read(requester, d.addr, &mut frame, DeviceAccess::H2cDataRead)
        {
            drop(self);
            return self.violate(v);
        }
        if len > self.cfg.max_frame_len {
            return drop(self);
        }
        if !self.ports[port].tx_enabled() {
            self.stats.tx_disabled_dropped += 1;
            return drop(self);
        }
        crate::cmac::AdapterCounters::count(&mut self.ports[port].adapter.tx_sent, len);
        self.ports[port].count_tx(&frame);
        self.stats.tx_frames += 1;
        self.send_on_wire(port, frame);
    }

    // ---------------------------------------------------------------------------------------
    // C2H engine.

    /// A good frame from port `func`'s adapter enters the QDMA. Returns `false` if it is dropped
    /// (the adapter then counts it in rx_drop).
    pub(crate) fn c2h_deliver(&mut self, func: u8, frame: &[u8]) -> bool {
        let Some(block) = self.funcs.get(usize::from(func)) else {
            return false;
        };
        let hash = shell_hash(&block.key, frame);
        let entry_idx = (hash & 0x7F) as u8;
        let entry = (block.indir[usize::from(entry_idx)] & INDIR_ENTRY_MASK) as u16;
        let qbase = (block.qconf >> 16) as u16;
        let numq = (block.qconf & 0xFFFF) as u16;
        let qid = AbsQueueId::new(qbase.wrapping_add(entry) & 0x7FF);
        // A function with queues must steer into them. One without (numq 0: not brought up, or
        // being removed while its port still receives, hardware.md §13.5) sends frames to the
        // queues its qbase names, which drop them unless another function owns them.
        let owner = self.qconf_owner(qid).filter(|&o| o != func);
        if numq > 0 && entry >= numq {
            self.violate(Violation::IndirectionOutOfRange {
                func,
                entry: entry_idx,
                value: entry,
                numq,
            });
        } else if let Some(owner) = owner {
            self.violate(Violation::SteeredAcross { func, qid, owner });
        }
        self.c2h_queue(qid, frame)
    }

    fn c2h_fail(&mut self, qid: AbsQueueId, reason: &'static str) -> bool {
        self.rt(qid).c2h_error = true;
        self.violate(Violation::Queue { qid, reason });
        false
    }

    fn c2h_queue(&mut self, qid: AbsQueueId, frame: &[u8]) -> bool {
        let sw = SwCtxt::decode(&self.ctx(sel::SW_C2H, qid.get()));
        let pf = PfchCtxt::decode(&self.ctx(sel::PFCH, qid.get()));
        let cm = CmptCtxt::decode(&self.ctx(sel::CMPT, qid.get()));
        if !(sw.qen && pf.valid && cm.valid) || self.rt(qid).c2h_error {
            self.stats.c2h_no_queue_dropped += 1;
            return false;
        }
        if sw.is_mm || sw.bypass || pf.bypass {
            return self.c2h_fail(qid, "memory-mapped or bypass C2H queues are not modeled");
        }
        let bufsz = self.buf_size(pf.bufsz_idx) as usize;
        let (Some(size), Some(csize)) = (self.ring_size(sw.rngsz_idx), self.ring_size(cm.rngsz_idx)) else {
            return self.c2h_fail(qid, "ring size table entry not programmed (or beyond 65536)");
        };
        if bufsz == 0 {
            return self.c2h_fail(qid, "buffer size table entry not programmed");
        }
        let usable = size - 1;
        let cusable = csize - 1;
        let cidx = u32::from(hw::cidx(&self.ctx(sel::HW_C2H, qid.get())));
        if u32::from(sw.pidx) >= usable || cidx >= usable || u32::from(cm.pidx) >= cusable {
            return self.c2h_fail(qid, "C2H or CMPT index beyond the ring (ring size changed?)");
        }
        let avail = (u32::from(sw.pidx) + usable - cidx) % usable;
        let needed = frame.len().div_ceil(bufsz).max(1);
        if (avail as usize) < needed {
            self.stats.c2h_no_desc_dropped += 1;
            return false;
        }
        if (u32::from(cm.pidx) + 1) % cusable == u32::from(cm.cidx) {
            self.stats.cmpt_full_dropped += 1;
            if !cm.ovf_chk_dis {
                CmptCtxt::set_err(self.ctx_mut(sel::CMPT, qid.get()), 1);
                self.rt(qid).c2h_error = true;
                self.violate(Violation::CmptOverflow {
                    qid,
                    pidx: cm.pidx,
                    cidx: cm.cidx,
                });
            }
            return false;
        }
        // Data: one buffer per descriptor.
        let stride = 8u64 << sw.desc_sz;
        for (i, chunk) in frame.chunks(bufsz).enumerate() {
            let slot = (cidx + i as u32) % usable;
            let mut raw = [0u8; 8];
            let at = sw.base.wrapping_add(stride * u64::from(slot));
            if let Err(v) = self
                .dma
                .device_read(sw.func, at, &mut raw, DeviceAccess::C2hDescFetch)
            {
                self.violate(v);
                self.rt(qid).c2h_error = true;
                return false;
            }
            let dst = u64::from_le_bytes(raw);
            if let Err(v) = self
                .dma
                .device_write(sw.func, dst, chunk, DeviceAccess::C2hDataWrite)
            {
                self.violate(v);
            }
        }
        let new_cidx = ((cidx + needed as u32) % usable) as u16;
        hw::set_cidx(self.ctx_mut(sel::HW_C2H, qid.get()), new_cidx);
        if sw.wbk_en {
            let at = sw.base.wrapping_add(stride * u64::from(usable));
            let rec = desc_status(sw.pidx, new_cidx).to_le_bytes();
            if let Err(v) = self
                .dma
                .device_write(sw.func, at, &rec, DeviceAccess::C2hStatusWrite)
            {
                self.violate(v);
            }
        }
        self.c2h_complete(qid, &cm, cusable, frame.len(), needed.saturating_mul(bufsz));
        true
    }

    /// Writes the completion entry of a frame of `frame_len` bytes that filled `buffered` bytes
    /// of C2H buffers, moves the CMPT producer index (`cusable` entries, flipping the color on
    /// wrap) and runs the completion triggers.
    fn c2h_complete(
        &mut self,
        qid: AbsQueueId,
        cm: &CmptCtxt,
        cusable: u32,
        frame_len: usize,
        buffered: usize,
    ) {
        self.pkt_id = self.pkt_id.wrapping_add(1);
        let mut len = self.faults.len_override.pop_front().unwrap_or(frame_len as u16);
        let mut err = false;
        if self.faults.corrupt_next > 0 {
            self.faults.corrupt_next -= 1;
            match self.faults.corruption {
                Some(Corruption::ErrBit) => err = true,
                Some(Corruption::LengthZero) => len = 0,
                Some(Corruption::LengthTooLarge) => {
                    len = u16::try_from(buffered.saturating_add(1)).unwrap_or(u16::MAX);
                }
                None => {}
            }
        }
        let esize = 8usize << cm.desc_sz;
        let mut entry = vec![0u8; esize];
        entry[..8].copy_from_slice(&cmpt_entry(cm.color, err, qid.get(), len, self.pkt_id).to_le_bytes());
        let at = cm.base.wrapping_add(esize as u64 * u64::from(cm.pidx));
        if let Err(v) = self
            .dma
            .device_write(cm.func, at, &entry, DeviceAccess::CmptEntryWrite)
        {
            self.violate(v);
        }
        let pidx = ((u32::from(cm.pidx) + 1) % cusable) as u16;
        let flip = pidx == 0 && !self.faults.freeze_color;
        let w = self.ctx_mut(sel::CMPT, qid.get());
        CmptCtxt::set_pidx(w, pidx);
        if flip {
            CmptCtxt::set_color(w, !cm.color);
        }
        self.stats.completions += 1;
        self.on_completion(qid);
    }

    // ---------------------------------------------------------------------------------------
    // Completion triggers (hardware.md §8.4, §8.5).

    fn on_completion(&mut self, qid: AbsQueueId) {
        let cm = CmptCtxt::decode(&self.ctx(sel::CMPT, qid.get()));
        let threshold = self.count_threshold(cm.counter_idx);
        let timer_ns = self.timer_ns(cm.timer_idx);
        let now = self.now_ns;
        let rt = self.rt(qid);
        rt.unreported += 1;
        let count_hit = rt.unreported >= threshold;
        match cm.trig_mode {
            // Every completion.
            1 => rt.trigger_pending = true,
            // Count only.
            2 => rt.trigger_pending |= count_hit,
            // Timer only.
            4 => {
                rt.deadline.get_or_insert(now.saturating_add(timer_ns));
            }
            // Timer or count, whichever first.
            5 => {
                if count_hit {
                    rt.trigger_pending = true;
                } else {
                    rt.deadline.get_or_insert(now.saturating_add(timer_ns));
                }
            }
            // 0 = off; 3 = user trigger, which the shell never sends; 6/7 reserved.
            _ => {}
        }
        self.try_fire(qid);
    }

    pub(crate) fn advance_time(&mut self, ns: u64) {
        self.now_ns = self.now_ns.saturating_add(ns);
        let now = self.now_ns;
        let due: Vec<AbsQueueId> = self
            .rt
            .iter()
            .filter(|(_, r)| r.deadline.is_some_and(|d| d <= now))
            .map(|(&q, _)| q)
            .collect();
        for q in due {
            let rt = self.rt(q);
            rt.deadline = None;
            if rt.unreported > 0 {
                rt.trigger_pending = true;
            }
            self.try_fire(q);
        }
    }

    /// Fires a pending trigger if the queue is armed: status write and interrupt.
    fn try_fire(&mut self, qid: AbsQueueId) {
        let rt = self.rt(qid);
        if !(rt.trigger_pending && rt.armed) {
            return;
        }
        rt.trigger_pending = false;
        rt.armed = false;
        rt.unreported = 0;
        rt.deadline = None;
        let cm = CmptCtxt::decode(&self.ctx(sel::CMPT, qid.get()));
        if cm.stat_en {
            self.write_cmpt_status(qid);
        }
        if cm.intr_en {
            if cm.intr_aggr {
                self.violate(Violation::Queue {
                    qid,
                    reason: "interrupt aggregation is not modeled",
                });
            } else {
                self.interrupts.push(crate::config::Interrupt {
                    func: cm.func,
                    vector: cm.vec,
                });
            }
        }
    }

    fn write_cmpt_status(&mut self, qid: AbsQueueId) {
        if self.faults.freeze_cmpt_status {
            return;
        }
        let cm = CmptCtxt::decode(&self.ctx(sel::CMPT, qid.get()));
        let Some(size) = self.ring_size(cm.rngsz_idx) else {
            return;
        };
        let mut pidx = cm.pidx;
        if core::mem::take(&mut self.faults.cmpt_pidx_jump) {
            pidx = (size - 1 + 7).min(0xFFFF) as u16;
        }
        let armed = u32::from(self.rt(qid).armed);
        let esize = 8u64 << cm.desc_sz;
        let at = cm.base.wrapping_add(esize * u64::from(size - 1));
        let rec = cmpt_status(pidx, cm.cidx, cm.color, armed).to_le_bytes();
        if let Err(v) = self
            .dma
            .device_write(cm.func, at, &rec[..STATUS_LEN], DeviceAccess::CmptStatusWrite)
        {
            self.violate(v);
        }
    }
}
