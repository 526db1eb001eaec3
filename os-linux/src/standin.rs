//! STAND-IN datapath: the smallest TX and RX rings that carry frames through the QDMA (or the
//! model), so the module can be loaded, brought up and pinged before the driver core's datapath
//! (RX/TX queue pairs with the page pool, XDP dispatch) lands. It copies every frame: TX copies
//! the frame into a page that belongs to the ring slot, RX copies the received bytes out to the
//! OS and reposts the same page. No page pool, no zero copy, no XDP.
//!
//! [`crate::port::Port`] only talks to these rings through [`TxRing::xmit`], [`TxRing::reclaim`],
//! [`RxRing::poll`] and the start/teardown functions; the core's `QueuePair` replaces them
//! behind the same calls.

use alloc::vec::Vec;

use onic_core::config::RX_HEADROOM;
use onic_core::{Device, RxQueueConfig, TxQueueConfig};
use onic_hal::layout::desc::{C2hDesc, CmptEntry, H2cDesc, WbStatus, C2H_DESC_BYTES, H2C_DESC_BYTES};
use onic_hal::{
    AddrLimit, CoherentRegion, DelayNs, Direction, DmaMemory, DmaPage, RegisterWindow, PAGE_SIZE,
};

use crate::counters::{RxCounters, TxCounters};
use crate::errno::{self, Errno};

/// Shortest frame handed to the MAC: the driver pads to `ETH_ZLEN` (spec §7.1).
pub const ETH_ZLEN: usize = 60;

/// Bytes for a ring of `entries` slots of `entry` bytes (status slot included), whole pages.
fn ring_bytes(entries: u16, entry: usize) -> usize {
    (usize::from(entries) * entry).next_multiple_of(PAGE_SIZE)
}

/// Allocates and maps one packet page.
fn page<D: DmaMemory>(dma: &D, dir: Direction) -> Result<DmaPage, Errno> {
    let mem = dma.alloc_page().map_err(errno::from_dma)?;
    dma.map_page(mem, dir).map_err(|(mem, e)| {
        dma.free_page(mem);
        errno::from_dma(e)
    })
}

fn release<D: DmaMemory>(dma: &D, p: DmaPage, dir: Direction) {
    let mem = dma.unmap_page(p, dir);
    dma.free_page(mem);
}

/// Why a transmit did not queue the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxRefused {
    /// The ring is full: stop the queue and retry after a reclaim.
    Busy,
    /// The frame cannot be sent (empty or longer than a page); it was dropped.
    Dropped,
}

/// STAND-IN TX ring: one H2C ring, one page per slot.
pub struct TxRing<D: DmaMemory> {
    cfg: TxQueueConfig,
    ring: CoherentRegion<D>,
    pages: Vec<DmaPage>,
    usable: u16,
    next_to_use: u16,
    next_to_clean: u16,
    unflushed: bool,
}

impl<D: DmaMemory + Clone> TxRing<D> {
    /// Allocates the ring and its pages and programs the queue's contexts.
    ///
    /// # Errors
    ///
    /// `ENOMEM` when memory runs out, the core's error otherwise; nothing is left allocated.
    pub fn start<R: RegisterWindow, L: DelayNs>(
        dev: &Device<R, R>,
        delay: &mut L,
        dma: &D,
        cfg: TxQueueConfig,
    ) -> Result<Self, Errno> {
        let entries = cfg.ring.entries();
        let usable = cfg.ring.usable();
        let ring = CoherentRegion::new(
            dma.clone(),
            ring_bytes(entries, H2C_DESC_BYTES),
            AddrLimit::Below4G,
        )
        .map_err(errno::from_dma)?;
        let mut pages = Vec::new();
        if pages.try_reserve_exact(usize::from(usable)).is_err() {
            return Err(errno::ENOMEM);
        }
        let mut ring = Self {
            cfg,
            ring,
            pages,
            usable,
            next_to_use: 0,
            next_to_clean: 0,
            unflushed: false,
        };
        for _ in 0..usable {
            match page(dma, Direction::ToDevice) {
                Ok(p) => ring.pages.push(p),
                Err(e) => {
                    ring.free_pages(dma);
                    return Err(e);
                }
            }
        }
        if let Err(e) = dev.init_tx_queue(delay, &cfg, ring.ring.dma_addr()) {
            ring.free_pages(dma);
            return Err(errno::from_core(&e));
        }
        Ok(ring)
    }

    fn free_pages(&mut self, dma: &D) {
        for p in self.pages.drain(..) {
            release(dma, p, Direction::ToDevice);
        }
    }

    /// Invalidates the queue's contexts and frees the ring and its pages.
    pub fn teardown<R: RegisterWindow, L: DelayNs>(mut self, dev: &Device<R, R>, delay: &mut L, dma: &D) {
        let _ = dev.teardown_tx_queue(delay, self.cfg.qid);
        self.free_pages(dma);
    }

    fn in_flight(&self) -> u16 {
        (self.next_to_use + self.usable - self.next_to_clean) % self.usable
    }

    /// Free slots (one always stays empty so that full and empty differ, spec §8.2).
    #[must_use]
    pub fn free_slots(&self) -> u16 {
        self.usable - 1 - self.in_flight()
    }

    /// Takes back the slots the device consumed (status record cidx, spec §7.4). Returns how
    /// many were freed. A cidx outside the ring is ignored.
    pub fn reclaim(&mut self) -> u16 {
        let status = WbStatus::from_word(self.ring.read_u64(usize::from(self.usable) * H2C_DESC_BYTES));
        let cidx = status.cidx();
        if cidx >= self.usable {
            return 0;
        }
        let freed = (cidx + self.usable - self.next_to_clean) % self.usable;
        if freed > self.in_flight() {
            return 0;
        }
        self.next_to_clean = cidx;
        freed
    }

    /// Copies `frame` into the next slot and writes its descriptor; rings the doorbell unless
    /// `more` frames follow (xmit_more) and the ring still has room.
    ///
    /// # Errors
    ///
    /// [`TxRefused::Busy`] when the ring is full (nothing written), [`TxRefused::Dropped`] for a
    /// frame that does not fit a page.
    pub fn xmit<W: RegisterWindow>(
        &mut self,
        dma: &D,
        db: &onic_core::qdma::Doorbells<W>,
        frame: &[u8],
        more: bool,
        counters: &TxCounters,
    ) -> Result<(), TxRefused> {
        if frame.is_empty() || frame.len() > PAGE_SIZE {
            counters.dropped.add(1);
            return Err(TxRefused::Dropped);
        }
        if self.free_slots() == 0 {
            self.reclaim();
            if self.free_slots() == 0 {
                counters.busy.add(1);
                self.flush(db);
                return Err(TxRefused::Busy);
            }
        }
        let slot = usize::from(self.next_to_use);
        let len = frame.len().max(ETH_ZLEN);
        let page = &mut self.pages[slot];
        let bytes = page.bytes_mut();
        bytes[..frame.len()].copy_from_slice(frame);
        bytes[frame.len()..len].fill(0);
        dma.sync_for_device(page, 0, len, Direction::ToDevice);
        // `len` is at most PAGE_SIZE (4096), which fits the descriptor's 16-bit length.
        let desc = H2cDesc::new(page.dma_addr(), len as u16).to_words();
        self.ring.write_u64(slot * H2C_DESC_BYTES, desc[0]);
        self.ring.write_u64(slot * H2C_DESC_BYTES + 8, desc[1]);
        self.next_to_use = (self.next_to_use + 1) % self.usable;
        self.unflushed = true;
        counters.packets.add(1);
        counters.bytes.add(frame.len() as u64);
        if !more || self.free_slots() == 0 {
            self.flush(db);
        }
        Ok(())
    }

    /// Rings the H2C doorbell if descriptors were written since the last one.
    pub fn flush<W: RegisterWindow>(&mut self, db: &onic_core::qdma::Doorbells<W>) {
        if self.unflushed {
            db.h2c_pidx(self.cfg.qid, self.next_to_use);
            self.unflushed = false;
        }
    }
}

/// What an RX poll did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxPoll {
    /// Completions consumed (counts against the NAPI budget).
    pub done: usize,
}

/// Where received frames go (the kernel builds an skb and hands it to GRO).
pub trait RxSink {
    /// Takes a copy of one frame. Returns `false` if the OS could not take it (counted as drop).
    fn frame(&mut self, frame: &[u8]) -> bool;
}

/// STAND-IN RX ring: C2H descriptor ring, completion ring, one page per descriptor, reposted in
/// place after each frame is copied out.
pub struct RxRing<D: DmaMemory> {
    cfg: RxQueueConfig,
    desc: CoherentRegion<D>,
    cmpt: CoherentRegion<D>,
    pages: Vec<DmaPage>,
    usable: u16,
    /// Next descriptor slot the device fills (the oldest outstanding one).
    desc_next: u16,
    /// The C2H PIDX last written.
    desc_pidx: u16,
    /// Next completion entry to look at.
    cmpt_next: u16,
    /// Color of a new completion entry (the CMPT context starts with color 1, spec §8.4).
    color: bool,
}

impl<D: DmaMemory + Clone> RxRing<D> {
    /// Allocates the rings and pages, points every descriptor at its page (headroom first) and
    /// programs the queue (all but one descriptor handed to the device, interrupt armed).
    ///
    /// # Errors
    ///
    /// As [`TxRing::start`].
    pub fn start<R: RegisterWindow, L: DelayNs>(
        dev: &Device<R, R>,
        delay: &mut L,
        dma: &D,
        cfg: RxQueueConfig,
    ) -> Result<Self, Errno> {
        let usable = cfg.desc_ring.usable();
        let desc = CoherentRegion::new(
            dma.clone(),
            ring_bytes(cfg.desc_ring.entries(), C2H_DESC_BYTES),
            AddrLimit::Below4G,
        )
        .map_err(errno::from_dma)?;
        let cmpt = CoherentRegion::new(
            dma.clone(),
            ring_bytes(cfg.cmpt_ring.entries(), cfg.cmpt_entry.bytes()),
            AddrLimit::Below4G,
        )
        .map_err(errno::from_dma)?;
        let mut pages = Vec::new();
        if pages.try_reserve_exact(usize::from(usable)).is_err() {
            return Err(errno::ENOMEM);
        }
        let mut ring = Self {
            cfg,
            desc,
            cmpt,
            pages,
            usable,
            desc_next: 0,
            desc_pidx: usable - 1,
            cmpt_next: 0,
            color: true,
        };
        for i in 0..usize::from(usable) {
            let p = match page(dma, Direction::FromDevice) {
                Ok(p) => p,
                Err(e) => {
                    ring.free_pages(dma);
                    return Err(e);
                }
            };
            let addr = p
                .dma_addr()
                .checked_add(u64::from(RX_HEADROOM))
                .unwrap_or(p.dma_addr());
            ring.desc
                .write_u64(i * C2H_DESC_BYTES, C2hDesc::new(addr).to_word());
            ring.pages.push(p);
        }
        let desc_addr = ring.desc.dma_addr();
        let cmpt_addr = ring.cmpt.dma_addr();
        if let Err(e) = dev.init_rx_queue(delay, &cfg, desc_addr, cmpt_addr, ring.desc_pidx) {
            ring.free_pages(dma);
            return Err(errno::from_core(&e));
        }
        Ok(ring)
    }

    fn free_pages(&mut self, dma: &D) {
        for p in self.pages.drain(..) {
            release(dma, p, Direction::FromDevice);
        }
    }

    /// Invalidates the queue's contexts and frees rings and pages.
    pub fn teardown<R: RegisterWindow, L: DelayNs>(mut self, dev: &Device<R, R>, delay: &mut L, dma: &D) {
        let _ = dev.teardown_rx_queue(delay, self.cfg.qid);
        self.free_pages(dma);
    }

    /// Consumes up to `budget` completions: each frame is copied to `sink` and its page reposted.
    /// Writes the C2H PIDX for the reposted descriptors and the CMPT CIDX (without arming; see
    /// [`RxRing::rearm`]).
    pub fn poll<W: RegisterWindow, S: RxSink>(
        &mut self,
        dma: &D,
        db: &onic_core::qdma::Doorbells<W>,
        budget: usize,
        sink: &mut S,
        counters: &RxCounters,
    ) -> RxPoll {
        let entry = self.cfg.cmpt_entry.bytes();
        let room = self.cfg.buf.bytes() as usize;
        let mut done = 0;
        while done < budget {
            let e = CmptEntry::from_word(self.cmpt.read_u64(usize::from(self.cmpt_next) * entry));
            if e.color() != self.color {
                break;
            }
            let slot = usize::from(self.desc_next);
            let len = usize::from(e.pkt_len());
            let page = &self.pages[slot];
            if e.err() || len == 0 || len > room {
                counters.errors.add(1);
            } else {
                let start = RX_HEADROOM as usize;
                dma.sync_for_cpu(page, start, len, Direction::FromDevice);
                counters.packets.add(1);
                counters.bytes.add(len as u64);
                if !sink.frame(&page.bytes()[start..start + len]) {
                    counters.drops.add(1);
                }
                dma.sync_for_device(page, start, len, Direction::FromDevice);
            }
            self.desc_next = (self.desc_next + 1) % self.usable;
            self.cmpt_next = (self.cmpt_next + 1) % self.cfg.cmpt_ring.usable();
            if self.cmpt_next == 0 {
                self.color = !self.color;
            }
            done += 1;
        }
        if done > 0 {
            // Every consumed slot got its page back: hand the same number of descriptors on.
            self.desc_pidx = (self.desc_pidx + done as u16 % self.usable) % self.usable;
            db.c2h_pidx(self.cfg.qid, self.desc_pidx);
            db.cmpt_cidx(self.cfg.qid, self.cmpt_next, false);
        }
        RxPoll { done }
    }

    /// Re-arms the queue's interrupt after NAPI completed (CMPT CIDX doorbell with irq_arm).
    pub fn rearm<W: RegisterWindow>(&self, db: &onic_core::qdma::Doorbells<W>) {
        db.cmpt_cidx(self.cfg.qid, self.cmpt_next, true);
    }
}
