//! The shell side of the model: BAR2 decoding (system configuration, per-function QDMA subsystem
//! blocks, CMACs, packet adapters), the receive path from a port to the QDMA, and the wire.

use onic_hal::regs::cmac::{self as cmac_regs, adapter, adapter_base, cmac_base};
use onic_hal::regs::shell::{
    reset_bits, HASH_KEY_OFFSET, HASH_KEY_WORDS, INDIR_TABLE_ENTRIES, INDIR_TABLE_OFFSET, QCONF_OFFSET,
    QDMA_FUNC_BASE, QDMA_FUNC_STRIDE, SHELL_END,
};
use onic_hal::Bar;

use crate::card::{Arrival, FuncBlock, State, UNMAPPED};
use crate::cmac::{AdapterCounters, LineError, RxVerdict};
use crate::config::{ResetBehavior, Violation, Wire};

/// Raw offsets of the registers the model decodes by value, taken from the `onic_hal::regs`
/// handles (system registers absolute, CMAC registers relative to the CMAC base).
mod off {
    use onic_hal::regs::{cmac, shell};

    pub(super) const BUILD_STATUS: u32 = shell::BUILD_STATUS.offset();
    pub(super) const SYSTEM_STATUS: u32 = shell::SYSTEM_STATUS.offset();
    pub(super) const SHELL_STATUS: u32 = shell::SHELL_STATUS.offset();
    pub(super) const USER_STATUS: u32 = shell::USER_STATUS.offset();
    pub(super) const SYSTEM_RESET: u32 = shell::SYSTEM_RESET.offset();
    pub(super) const SHELL_RESET: u32 = shell::SHELL_RESET.offset();
    pub(super) const USER_RESET: u32 = shell::USER_RESET.offset();
    pub(super) const CORE_VERSION: u32 = cmac::CORE_VERSION.offset();
    pub(super) const STAT_RX_STATUS: u32 = cmac::STAT_RX_STATUS.offset();
    pub(super) const STAT_TX_STATUS: u32 = cmac::STAT_TX_STATUS.offset();
    pub(super) const TICK: u32 = cmac::TICK.offset();
}

/// Value of the (read-only) build timestamp register.
const BUILD_STAMP: u32 = 0x0101_0000;
/// SHELL_STATUS / USER_STATUS bits that exist (0..9, hardware.md §2.2).
const STATUS_BITS: u32 = 0x3FF;
/// Size of a CMAC's register window.
const CMAC_WINDOW: u32 = 0x2000;
/// Size of a packet adapter's register window.
const ADAPTER_WINDOW: u32 = 0x1000;

fn reg_violation(offset: u32, value: u32, reason: &'static str) -> Violation {
    Violation::Register {
        bar: Bar::Shell,
        offset,
        value,
        reason,
    }
}

/// Where a BAR2 offset lands.
enum Target {
    System(u32),
    Func(usize, u32),
    Cmac(usize, u32),
    Adapter(usize, u32),
    Unmapped,
}

impl State {
    fn decode_shell(&self, offset: u32) -> Target {
        if !offset.is_multiple_of(4) || offset >= SHELL_END {
            return Target::Unmapped;
        }
        if offset < QDMA_FUNC_BASE {
            return Target::System(offset);
        }
        let funcs_end = QDMA_FUNC_BASE + QDMA_FUNC_STRIDE * self.funcs.len() as u32;
        if offset < funcs_end {
            let rel = offset - QDMA_FUNC_BASE;
            return Target::Func((rel / QDMA_FUNC_STRIDE) as usize, rel % QDMA_FUNC_STRIDE);
        }
        for p in 0..self.ports.len() {
            let port = p as u8;
            if let Some(rel) = offset.checked_sub(cmac_base(port)).filter(|r| *r < CMAC_WINDOW) {
                return Target::Cmac(p, rel);
            }
            if let Some(rel) = offset
                .checked_sub(adapter_base(port))
                .filter(|r| *r < ADAPTER_WINDOW)
            {
                return Target::Adapter(p, rel);
            }
        }
        Target::Unmapped
    }

    pub(crate) fn shell_read(&mut self, offset: u32) -> u32 {
        match self.decode_shell(offset) {
            Target::System(o) => match o {
                off::BUILD_STATUS => BUILD_STAMP,
                off::SYSTEM_STATUS => 1,
                off::SHELL_STATUS => self.shell_status_read(),
                off::USER_STATUS => STATUS_BITS,
                off::SYSTEM_RESET | off::SHELL_RESET | off::USER_RESET => 0,
                _ => UNMAPPED,
            },
            Target::Func(f, rel) => {
                let b = &self.funcs[f];
                match rel {
                    QCONF_OFFSET => b.qconf,
                    r if (INDIR_TABLE_OFFSET..INDIR_TABLE_OFFSET + 4 * INDIR_TABLE_ENTRIES as u32)
                        .contains(&r) =>
                    {
                        b.indir[((r - INDIR_TABLE_OFFSET) / 4) as usize]
                    }
                    r if (HASH_KEY_OFFSET..HASH_KEY_OFFSET + 4 * HASH_KEY_WORDS as u32).contains(&r) => {
                        b.key[((r - HASH_KEY_OFFSET) / 4) as usize]
                    }
                    _ => UNMAPPED,
                }
            }
            Target::Cmac(p, rel) => self.cmac_read(p, rel),
            Target::Adapter(p, rel) => self.ports[p].adapter.read(rel).unwrap_or(UNMAPPED),
            Target::Unmapped => UNMAPPED,
        }
    }

    /// Which port's transmitter CMAC `p`'s receiver hears: its own in near-end loopback or behind
    /// a loopback plug, the other port's over the cable; none on an open wire or a link that is
    /// down.
    fn rx_source(&self, p: usize) -> Option<usize> {
        if self.ports[p].gt_loopback() {
            return Some(p);
        }
        if !self.ports[p].link_up {
            return None;
        }
        match self.cfg.wire {
            Wire::Cable => Some(p ^ 1).filter(|&peer| peer < self.ports.len()),
            Wire::Loopback => Some(p),
            Wire::Open => None,
        }
    }

    /// Whether CMAC `p` receives a signal it can lock onto: a transmitter on the other end (or
    /// an open wire, where the model keeps the link up as before), encoding RS-FEC exactly when
    /// `p`'s receiver decodes it. With the two ends disagreeing the receiver never aligns:
    /// STAT_RX_STATUS reads down and no frame gets through, as on a real link whose ends run
    /// different FEC settings.
    pub(crate) fn rx_signal(&self, p: usize) -> bool {
        let port = &self.ports[p];
        if !port.link_up && !port.gt_loopback() {
            return false;
        }
        match self.rx_source(p) {
            Some(src) => self.ports[src].rsfec_tx() == port.rsfec_rx(),
            None => true,
        }
    }

    fn cmac_read(&mut self, p: usize, rel: u32) -> u32 {
        let port = &self.ports[p];
        match rel {
            off::CORE_VERSION => cmac_regs::CORE_VERSION_EXPECTED,
            off::STAT_RX_STATUS => {
                let latched_down = core::mem::take(&mut self.ports[p].link_down_latched);
                if latched_down || !self.rx_signal(p) {
                    0
                } else {
                    cmac_regs::STAT_RX_STATUS_UP
                }
            }
            off::STAT_TX_STATUS | off::TICK => 0,
            r => port.read_stat(r).unwrap_or_else(|| port.reg(r)),
        }
    }

    fn shell_status_read(&mut self) -> u32 {
        if self.in_reset != 0 {
            match self.cfg.shell_reset {
                ResetBehavior::Never => {}
                ResetBehavior::AfterReads(_) if self.reset_reads_left > 0 => self.reset_reads_left -= 1,
                _ => self.complete_reset(),
            }
        }
        STATUS_BITS & !self.in_reset
    }

    fn complete_reset(&mut self) {
        let bits = core::mem::take(&mut self.in_reset);
        for (p, port) in self.ports.iter_mut().enumerate() {
            let port_no = p as u8;
            if bits & reset_bits::cmac(port_no) != 0 {
                port.reset_mac();
            }
            let adapter_bit = if port_no == 0 {
                reset_bits::ADAPTER0
            } else {
                reset_bits::ADAPTER1
            };
            if bits & adapter_bit != 0 {
                port.reset_adapter();
            }
        }
        if bits & reset_bits::QDMA0 != 0 {
            for f in &mut self.funcs {
                *f = FuncBlock::new();
            }
        }
    }

    pub(crate) fn shell_write(&mut self, offset: u32, value: u32) {
        match self.decode_shell(offset) {
            Target::System(o) => match o {
                off::SYSTEM_RESET => {
                    self.in_reset = STATUS_BITS;
                    self.complete_reset();
                }
                off::SHELL_RESET => {
                    self.in_reset |= value & STATUS_BITS;
                    match self.cfg.shell_reset {
                        ResetBehavior::Immediate | ResetBehavior::AfterReads(0) => self.complete_reset(),
                        ResetBehavior::AfterReads(n) => self.reset_reads_left = n,
                        ResetBehavior::Never => {}
                    }
                }
                off::USER_RESET => {}
                _ => self.violate(reg_violation(
                    offset,
                    value,
                    "write to a read-only or unimplemented shell register",
                )),
            },
            Target::Func(f, rel) => {
                let max_q = u32::from(self.cfg.max_queues_per_function);
                let total = u32::from(self.cfg.total_queues);
                let b = &mut self.funcs[f];
                match rel {
                    QCONF_OFFSET => {
                        b.qconf = value;
                        let (qbase, numq) = (value >> 16, value & 0xFFFF);
                        if numq > max_q || qbase + numq > total {
                            self.violate(reg_violation(
                                offset,
                                value,
                                "QCONF range beyond the function's queues",
                            ));
                        }
                    }
                    r if (INDIR_TABLE_OFFSET..INDIR_TABLE_OFFSET + 4 * INDIR_TABLE_ENTRIES as u32)
                        .contains(&r) =>
                    {
                        // Only [15:0] is used; the upper half is whatever the register held before.
                        let e = &mut b.indir[((r - INDIR_TABLE_OFFSET) / 4) as usize];
                        *e = (*e & 0xFFFF_0000) | (value & 0xFFFF);
                    }
                    r if (HASH_KEY_OFFSET..HASH_KEY_OFFSET + 4 * HASH_KEY_WORDS as u32).contains(&r) => {
                        b.key[((r - HASH_KEY_OFFSET) / 4) as usize] = value;
                    }
                    _ => self.violate(reg_violation(
                        offset,
                        value,
                        "write to an unimplemented shell register",
                    )),
                }
            }
            Target::Cmac(p, rel) => match rel {
                off::TICK => {
                    if value & cmac_regs::TICK_LATCH != 0 {
                        self.ports[p].tick();
                    }
                }
                off::CORE_VERSION | off::STAT_TX_STATUS | off::STAT_RX_STATUS => {
                    self.violate(reg_violation(offset, value, "write to a read-only CMAC register"));
                }
                r if self.ports[p].read_stat(r).is_some() => {
                    self.violate(reg_violation(
                        offset,
                        value,
                        "write to a CMAC statistics register",
                    ));
                }
                r => {
                    self.ports[p].regs.insert(r, value);
                }
            },
            Target::Adapter(..) => self.violate(reg_violation(
                offset,
                value,
                "write to a read-only adapter counter",
            )),
            Target::Unmapped => {
                self.violate(reg_violation(offset, value, "write to an unmapped shell address"))
            }
        }
    }

    // ---------------------------------------------------------------------------------------
    // The wire and the receive path.

    /// A frame leaves CMAC `port` toward the outside (or, in near-end loopback, comes straight
    /// back to the port's own receiver and goes nowhere else).
    pub(crate) fn send_on_wire(&mut self, port: usize, frame: alloc::vec::Vec<u8>) {
        if self.ports[port].gt_loopback() {
            self.rx_queue[port].push_back(Arrival { frame });
            return;
        }
        if !self.ports[port].link_up {
            return;
        }
        if self.cfg.capture_egress {
            self.egress[port].push(frame.clone());
        }
        match self.cfg.wire {
            Wire::Cable => {
                let peer = port ^ 1;
                // A port in near-end loopback hears only itself: what the cable brings is lost.
                if peer < self.ports.len() && !self.ports[peer].gt_loopback() {
                    self.rx_queue[peer].push_back(Arrival { frame });
                }
            }
            Wire::Loopback => self.rx_queue[port].push_back(Arrival { frame }),
            Wire::Open => {}
        }
    }

    /// Every frame already waiting at a port goes through MAC, adapter and C2H.
    pub(crate) fn rx_round(&mut self) -> bool {
        let mut progress = false;
        for p in 0..self.rx_queue.len() {
            let n = self.rx_queue[p].len();
            for _ in 0..n {
                if let Some(a) = self.rx_queue[p].pop_front() {
                    self.receive(p, &a.frame);
                    progress = true;
                }
            }
        }
        progress
    }

    /// The symbol errors the next frame picked up on the line, if the fault knobs give it any.
    fn next_line_error(&mut self) -> Option<LineError> {
        let f = &mut self.faults;
        if f.fec_correctable_next > 0 {
            f.fec_correctable_next -= 1;
            Some(LineError::Correctable)
        } else if f.fec_uncorrectable_next > 0 {
            f.fec_uncorrectable_next -= 1;
            Some(LineError::Uncorrectable)
        } else {
            None
        }
    }

    fn receive(&mut self, p: usize, frame: &[u8]) {
        if self.faults.drop_next > 0 {
            self.faults.drop_next -= 1;
            self.stats.wire_dropped += 1;
            return;
        }
        if self.rng.chance_ppm(self.faults.drop_rate_ppm) {
            self.stats.wire_dropped += 1;
            return;
        }
        if !self.rx_signal(p) {
            self.stats.link_down_dropped += 1;
            return;
        }
        let line_error = self.next_line_error();
        let mut fcs_ok = if self.faults.bad_fcs_next > 0 {
            self.faults.bad_fcs_next -= 1;
            false
        } else {
            true
        };
        let max = self.cfg.max_frame_len;
        let port = &mut self.ports[p];
        if let Some(e) = line_error {
            fcs_ok &= port.fec_decode(e);
        }
        if !port.rx_enabled() {
            self.stats.rx_disabled_dropped += 1;
            return;
        }
        let len = frame.len();
        match port.count_rx(frame, fcs_ok, max) {
            RxVerdict::Consumed => {}
            RxVerdict::Error => AdapterCounters::count(&mut port.adapter.rx_err, len),
            RxVerdict::Deliver => {
                AdapterCounters::count(&mut port.adapter.rx_recv, len);
                if !self.c2h_deliver(p as u8, frame) {
                    AdapterCounters::count(&mut self.ports[p].adapter.rx_drop, len);
                }
            }
        }
    }
}

/// Keeps the adapter block layout constant referenced (its size bounds [`ADAPTER_WINDOW`]).
const _: () = assert!(adapter::BLOCK_LEN <= ADAPTER_WINDOW);
