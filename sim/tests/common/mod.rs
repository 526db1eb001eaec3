//! A tiny test driver for the model, written from the spec (no onic-core): it programs contexts
//! through the IND_CTXT registers as hardware.md §5 describes, and posts descriptors as raw
//! little-endian bytes in DMA memory.

#![allow(dead_code)]

use onic_hal::regs::{cmac, qdma, shell};
use onic_hal::{
    AddrLimit, BlockReg, CoherentRegion, Direction, DmaMemory, DmaPage, RegValue, RegisterAccess, PAGE_SIZE,
};
use onic_sim::{Card, CardConfig, SimDma};

pub const SEL_SW_C2H: u32 = 0;
pub const SEL_SW_H2C: u32 = 1;
pub const SEL_HW_C2H: u32 = 2;
pub const SEL_HW_H2C: u32 = 3;
pub const SEL_CR_C2H: u32 = 4;
pub const SEL_CR_H2C: u32 = 5;
pub const SEL_CMPT: u32 = 6;
pub const SEL_PFCH: u32 = 7;
pub const SEL_FMAP: u32 = 12;
pub const OP_CLEAR: u32 = 0;
pub const OP_WRITE: u32 = 1;
pub const OP_READ: u32 = 2;
pub const OP_INVALIDATE: u32 = 3;

/// Ring-size index 1 = 64 entries (63 usable), small enough for Miri.
pub const SMALL_RING: u32 = 1;
/// Buffer-size index 8 = 4096 bytes, 1 = 256 bytes.
pub const BUF_4K: u32 = 8;
pub const BUF_256: u32 = 1;

pub fn card() -> Card {
    Card::new(CardConfig::default())
}

pub fn card_with(f: impl FnOnce(&mut CardConfig)) -> Card {
    let mut cfg = CardConfig::default();
    f(&mut cfg);
    Card::new(cfg)
}

pub fn ctxt_cmd(card: &Card, sel: u32, op: u32, q: u32) -> u32 {
    let bar0 = card.qdma(0);
    let cmd = (sel << 1) | (op << 5) | (q << 7);
    bar0.write(qdma::IND_CTXT_CMD, RegValue::from_bits(cmd));
    assert_eq!(bar0.read(qdma::IND_CTXT_CMD).bits() & 1, 0, "busy");
    cmd
}

pub fn ctxt_write(card: &Card, sel: u32, q: u32, words: &[u32]) {
    let bar0 = card.qdma(0);
    for i in 0..qdma::IND_CTXT_WORDS {
        bar0.write(qdma::ind_ctxt_data(i), words.get(i).copied().unwrap_or(0));
        bar0.write(qdma::ind_ctxt_mask(i), 0xFFFF_FFFF);
    }
    ctxt_cmd(card, sel, OP_WRITE, q);
}

pub fn ctxt_read(card: &Card, sel: u32, q: u32) -> [u32; 8] {
    ctxt_cmd(card, sel, OP_READ, q);
    let bar0 = card.qdma(0);
    core::array::from_fn(|i| bar0.read(qdma::ind_ctxt_data(i)))
}

/// hardware.md §3 global CSR init with the reference tables.
pub fn init_globals(card: &Card) {
    let bar0 = card.qdma(0);
    for i in 0..qdma::GLOBAL_TABLE_LEN {
        bar0.write(qdma::glbl_rng_sz(i), qdma::tables::RING_SIZES[i]);
        bar0.write(qdma::c2h_buf_sz(i), qdma::tables::C2H_BUF_SIZES[i]);
        bar0.write(qdma::c2h_timer_cnt(i), qdma::tables::C2H_TIMER_COUNTS[i]);
        bar0.write(qdma::c2h_cnt_th(i), qdma::tables::C2H_COUNT_THRESHOLDS[i]);
    }
    bar0.write(qdma::C2H_INT_TIMER_TICK, qdma::tables::C2H_INT_TIMER_TICK_VALUE);
    bar0.write(qdma::GLBL_DSC_CFG, RegValue::from_bits(0x30));
}

/// FMAP + QCONF + indirection table (entry k = k mod qmax) for `func`, qbase = 64 x func.
pub fn setup_function(card: &Card, func: u8, qmax: u32) {
    let qbase = 64 * u32::from(func);
    ctxt_cmd(card, SEL_FMAP, OP_CLEAR, u32::from(func));
    ctxt_write(card, SEL_FMAP, u32::from(func), &[qbase, qmax]);
    let bar2 = card.shell();
    bar2.write(
        shell::qconf(onic_hal::FunctionId::new(func).unwrap()),
        (qbase << 16) | qmax,
    );
    for k in 0..shell::INDIR_TABLE_ENTRIES {
        bar2.write(
            shell::indir_table(onic_hal::FunctionId::new(func).unwrap(), k),
            k as u32 % qmax,
        );
    }
}

/// hardware.md §10.2 enable sequence for every present CMAC.
pub fn enable_cmacs(card: &Card) {
    let bar2 = card.shell();
    for port in 0..2u8 {
        let base = cmac::cmac_base(port);
        if bar2.read(cmac::CORE_VERSION.on(base)) != cmac::CORE_VERSION_EXPECTED {
            break;
        }
        bar2.write(shell::SHELL_RESET, shell::reset_bits::cmac(port));
        while bar2.read(shell::SHELL_STATUS) & shell::reset_bits::cmac(port) == 0 {}
        for w in cmac::ENABLE_RSFEC.iter().chain(cmac::ENABLE_MAC.iter()) {
            bar2.write(w.reg.on(base), w.value);
        }
    }
}

/// A card with globals, both functions (8 queues each) and both CMACs set up.
pub fn ready_card_with(f: impl FnOnce(&mut CardConfig)) -> Card {
    let card = card_with(f);
    init_globals(&card);
    setup_function(&card, 0, 8);
    setup_function(&card, 1, 8);
    enable_cmacs(&card);
    assert_eq!(card.violations(), []);
    card
}

pub fn ready_card() -> Card {
    ready_card_with(|_| {})
}

pub fn adapter_counter(card: &Card, port: u8, reg: BlockReg<u32>) -> u32 {
    card.shell().read(reg.on(cmac::adapter_base(port)))
}

/// A transmit (H2C) queue with 16-byte descriptors.
pub struct TxQueue<'a> {
    pub card: &'a Card,
    pub func: u8,
    pub qid: u16,
    pub ring: CoherentRegion<SimDma<'a>>,
    pub size: u32,
    pub pidx: u32,
    pub pages: Vec<DmaPage>,
}

impl<'a> TxQueue<'a> {
    pub fn new(card: &'a Card, func: u8, qid: u16, rngsz_idx: u32) -> Self {
        let size = qdma::tables::RING_SIZES[rngsz_idx as usize];
        let ring = CoherentRegion::new(card.dma(), 16 * size as usize, AddrLimit::Below4G).unwrap();
        let abs = 64 * u32::from(func) + u32::from(qid);
        let base = ring.dma_addr();
        ctxt_cmd(card, SEL_SW_H2C, OP_CLEAR, abs);
        let w1 = 0x0011000D | (rngsz_idx << 12);
        ctxt_write(
            card,
            SEL_SW_H2C,
            abs,
            &[
                u32::from(func) << 17,
                w1,
                base.low32(),
                base.high32(),
                u32::from(qid),
            ],
        );
        ctxt_cmd(card, SEL_HW_H2C, OP_CLEAR, abs);
        ctxt_cmd(card, SEL_CR_H2C, OP_CLEAR, abs);
        Self {
            card,
            func,
            qid,
            ring,
            size,
            pidx: 0,
            pages: Vec::new(),
        }
    }

    pub fn abs(&self) -> u32 {
        64 * u32::from(self.func) + u32::from(self.qid)
    }

    /// Writes one descriptor for `frame` (copied into a fresh mapped page), metadata = `metadata`.
    pub fn post_with_metadata(&mut self, frame: &[u8], metadata: u32) -> u64 {
        let dma = self.card.dma();
        let mut page = dma
            .map_page(dma.alloc_page().unwrap(), Direction::ToDevice)
            .unwrap();
        page.bytes_mut()[..frame.len()].copy_from_slice(frame);
        dma.sync_for_device(&page, 0, frame.len(), Direction::ToDevice);
        let addr = page.dma_addr().get();
        self.post_raw(addr, frame.len() as u16, metadata);
        self.pages.push(page);
        addr
    }

    pub fn post(&mut self, frame: &[u8]) -> u64 {
        self.post_with_metadata(frame, frame.len() as u32)
    }

    pub fn post_raw(&mut self, addr: u64, len: u16, metadata: u32) {
        let off = 16 * self.pidx as usize;
        self.ring
            .write_u64(off, u64::from(metadata) | u64::from(len) << 32);
        self.ring.write_u64(off + 8, addr);
        self.pidx = (self.pidx + 1) % (self.size - 1);
    }

    pub fn doorbell(&self) {
        self.card.qdma(self.func).write(
            qdma::dmap_sel_h2c_dsc_pidx(onic_hal::QueueId::new(self.qid)),
            RegValue::from_bits(self.pidx),
        );
    }

    /// (pidx, cidx) of the status record in the last slot.
    pub fn status(&self) -> (u32, u32) {
        let v = self.ring.read_u64(16 * (self.size as usize - 1));
        ((v & 0xFFFF) as u32, ((v >> 16) & 0xFFFF) as u32)
    }

    pub fn free(mut self) {
        let dma = self.card.dma();
        for p in self.pages.drain(..) {
            dma.free_page(p.unmap(&dma, Direction::ToDevice));
        }
    }
}

/// A receive queue: C2H descriptor ring with one page per slot, completion ring.
pub struct RxQueue<'a> {
    pub card: &'a Card,
    pub func: u8,
    pub qid: u16,
    pub desc: CoherentRegion<SimDma<'a>>,
    pub cmpt: CoherentRegion<SimDma<'a>>,
    pub size: u32,
    pub pages: Vec<Option<DmaPage>>,
    /// Next completion to read.
    pub cmpt_cidx: u32,
    pub color: bool,
    pub desc_pidx: u32,
    pub desc_cidx: u32,
    pub opts: RxOpts,
}

/// Options for [`RxQueue::with`].
#[derive(Clone, Copy)]
pub struct RxOpts {
    pub rngsz_idx: u32,
    pub bufsz_idx: u32,
    pub counter_idx: u32,
    pub timer_idx: u32,
    pub trig_mode: u32,
    pub cmpt_desc_sz: u32,
    pub initial_pidx: Option<u32>,
    pub arm: bool,
    /// Slots that get a page (the rest keep a zero descriptor); `None` = every slot.
    pub pages: Option<u32>,
}

impl RxOpts {
    /// The defaults with trigger mode 1 (every packet): each completion entry is written, its
    /// status and interrupt follow at once.
    pub fn every_packet() -> Self {
        Self {
            trig_mode: 1,
            ..Self::default()
        }
    }
}

impl Default for RxOpts {
    fn default() -> Self {
        Self {
            rngsz_idx: SMALL_RING,
            bufsz_idx: BUF_4K,
            counter_idx: 0,
            timer_idx: 0,
            trig_mode: 5,
            cmpt_desc_sz: 0,
            initial_pidx: None,
            arm: true,
            pages: None,
        }
    }
}

/// Points every entry of function 0's indirection table at its queue `qid`.
pub fn steer_function_0_to(card: &Card, qid: u32) {
    let f0 = onic_hal::FunctionId::new(0).unwrap();
    for k in 0..shell::INDIR_TABLE_ENTRIES {
        card.shell().write(shell::indir_table(f0, k), qid);
    }
}

/// A parsed completion entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cmpt {
    pub color: bool,
    pub err: bool,
    pub qid: u16,
    pub len: u16,
    pub pkt_id: u16,
}

impl<'a> RxQueue<'a> {
    pub fn new(card: &'a Card, func: u8, qid: u16) -> Self {
        Self::with(card, func, qid, RxOpts::default())
    }

    pub fn with(card: &'a Card, func: u8, qid: u16, o: RxOpts) -> Self {
        let size = qdma::tables::RING_SIZES[o.rngsz_idx as usize];
        let dma = card.dma();
        let desc = CoherentRegion::new(dma, 8 * size as usize, AddrLimit::Below4G).unwrap();
        let esize = 8usize << o.cmpt_desc_sz;
        let cmpt = CoherentRegion::new(dma, esize * size as usize, AddrLimit::Below4G).unwrap();
        let mut pages = Vec::new();
        for i in 0..o.pages.unwrap_or(size - 1).min(size - 1) {
            let page = dma
                .map_page(dma.alloc_page().unwrap(), Direction::FromDevice)
                .unwrap();
            desc.write_u64(8 * i as usize, page.dma_addr().get());
            pages.push(Some(page));
        }
        let abs = 64 * u32::from(func) + u32::from(qid);
        let f = u32::from(func);
        ctxt_cmd(card, SEL_SW_C2H, OP_CLEAR, abs);
        let d = desc.dma_addr();
        ctxt_write(
            card,
            SEL_SW_C2H,
            abs,
            &[
                f << 17,
                0x00100003 | (o.rngsz_idx << 12),
                d.low32(),
                d.high32(),
                0,
            ],
        );
        ctxt_cmd(card, SEL_HW_C2H, OP_CLEAR, abs);
        ctxt_cmd(card, SEL_CR_C2H, OP_CLEAR, abs);
        ctxt_cmd(card, SEL_PFCH, OP_CLEAR, abs);
        ctxt_write(
            card,
            SEL_PFCH,
            abs,
            &[0x08000000 | (o.bufsz_idx << 1), 0x00002000],
        );
        ctxt_cmd(card, SEL_CMPT, OP_CLEAR, abs);
        let c = cmpt.dma_addr().get();
        let w0 = 0x08000001
            | 1 << 1
            | o.trig_mode << 2
            | f << 5
            | o.counter_idx << 17
            | o.timer_idx << 21
            | o.rngsz_idx << 28;
        let w1 = (((c >> 12) & 0x3FF_FFFF) as u32) << 6;
        let w2 = (c >> 38) as u32 | o.cmpt_desc_sz << 26;
        ctxt_write(
            card,
            SEL_CMPT,
            abs,
            &[w0, w1, w2, 0x10000000, u32::from(qid) << 4],
        );
        let mut q = Self {
            card,
            func,
            qid,
            desc,
            cmpt,
            size,
            pages,
            cmpt_cidx: 0,
            color: true,
            desc_pidx: 0,
            desc_cidx: 0,
            opts: o,
        };
        let pidx = o.initial_pidx.unwrap_or(size - 2);
        q.set_desc_pidx(pidx);
        q.cmpt_doorbell(o.arm);
        q
    }

    pub fn abs(&self) -> u16 {
        64 * u16::from(self.func) + self.qid
    }

    pub fn usable(&self) -> u32 {
        self.size - 1
    }

    pub fn set_desc_pidx(&mut self, pidx: u32) {
        self.desc_pidx = pidx;
        self.card.qdma(self.func).write(
            qdma::dmap_sel_c2h_dsc_pidx(onic_hal::QueueId::new(self.qid)),
            RegValue::from_bits(pidx),
        );
    }

    pub fn cmpt_doorbell(&self, arm: bool) {
        // The doorbell carries the trigger settings too (hardware.md §6); stat_en on.
        let o = &self.opts;
        let v = self.cmpt_cidx
            | o.counter_idx << 16
            | o.timer_idx << 20
            | o.trig_mode << 24
            | 1 << 27
            | u32::from(arm) << 28;
        self.card.qdma(self.func).write(
            qdma::dmap_sel_cmpt_cidx(onic_hal::QueueId::new(self.qid)),
            RegValue::from_bits(v),
        );
    }

    pub fn esize(&self) -> usize {
        self.cmpt.len() / self.size as usize
    }

    /// (pidx, cidx, color) of the completion status record.
    pub fn cmpt_status(&self) -> (u32, u32, bool) {
        let v = self.cmpt.read_u64(self.esize() * (self.size as usize - 1));
        (
            (v & 0xFFFF) as u32,
            ((v >> 16) & 0xFFFF) as u32,
            (v >> 32) & 1 == 1,
        )
    }

    pub fn entry(&self, i: u32) -> Cmpt {
        let v = self.cmpt.read_u64(self.esize() * i as usize);
        Cmpt {
            color: v & 2 != 0,
            err: v & 4 != 0,
            qid: ((v >> 16) & 0x7FF) as u16,
            len: (v >> 32) as u16,
            pkt_id: (v >> 48) as u16,
        }
    }

    /// Reads the next completion if its color says it is new; returns it with the frame bytes
    /// (gathered over as many buffers as the length needs), and recycles the descriptors.
    pub fn poll(&mut self, bufsz: usize) -> Option<(Cmpt, Vec<u8>)> {
        let e = self.entry(self.cmpt_cidx);
        if e.color != self.color {
            return None;
        }
        self.cmpt_cidx = (self.cmpt_cidx + 1) % self.usable();
        if self.cmpt_cidx == 0 {
            self.color = !self.color;
        }
        let dma = self.card.dma();
        let mut data = Vec::new();
        let mut left = usize::from(e.len);
        loop {
            let slot = self.desc_cidx as usize;
            let page = self.pages[slot]
                .as_ref()
                .expect("completion for a slot without a page");
            let n = left.min(bufsz).min(PAGE_SIZE);
            dma.sync_for_cpu(page, 0, n, Direction::FromDevice);
            data.extend_from_slice(&page.bytes()[..n]);
            left -= n;
            self.desc_cidx = (self.desc_cidx + 1) % self.usable();
            if left == 0 {
                break;
            }
        }
        Some((e, data))
    }

    /// Hands back every consumed descriptor (pidx = cidx - 1, i.e. all but one slot posted).
    pub fn refill(&mut self) {
        let p = (self.desc_cidx + self.usable() - 1) % self.usable();
        self.set_desc_pidx(p);
    }

    pub fn free(mut self) {
        let dma = self.card.dma();
        for p in self.pages.drain(..).flatten() {
            dma.free_page(p.unmap(&dma, Direction::FromDevice));
        }
    }
}

/// An Ethernet frame: dst, src, ethertype, payload padded to `len`.
pub fn frame(dst: [u8; 6], ethertype: u16, len: usize, fill: u8) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&[0x00, 0x0A, 0x35, 0x01, 0x02, 0x03]);
    f.extend_from_slice(&ethertype.to_be_bytes());
    while f.len() < len {
        f.push(fill.wrapping_add(f.len() as u8));
    }
    f.truncate(len);
    f
}

pub const UNICAST: [u8; 6] = [0x00, 0x0A, 0x35, 0xAA, 0xBB, 0xCC];
pub const BROADCAST: [u8; 6] = [0xFF; 6];
pub const MULTICAST: [u8; 6] = [0x01, 0x00, 0x5E, 0x00, 0x00, 0x01];

/// An IPv4 frame with the given protocol, addresses and 4 L4 bytes, padded to 64 bytes.
pub fn ipv4(proto: u8, src: [u8; 4], dst: [u8; 4], l4: [u8; 4]) -> Vec<u8> {
    let mut f = frame(UNICAST, 0x0800, 14, 0);
    f.extend_from_slice(&[0x45, 0, 0, 46, 0, 0, 0, 0, 64, proto, 0, 0]);
    f.extend_from_slice(&src);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&l4);
    f.resize(64, 0);
    f
}
