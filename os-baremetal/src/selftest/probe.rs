//! A minimal receive-ring reader, standing in for `onic-core`'s RX datapath until it is merged:
//! it owns one RX queue's descriptor ring (one page per slot), its completion ring, and reads
//! completions by their color bit. Contexts and doorbells go through `onic-core`
//! (`Device::init_rx_queue`, `Doorbells`); only the ring walking is here. The `datapath` group
//! replaces it with the core's rings.

use core::fmt;

use heapless::Vec;
use onic_core::config::RX_HEADROOM;
use onic_core::RxQueueConfig;
use onic_hal::layout::desc::{C2hDesc, CmptEntry, C2H_DESC_BYTES, CMPT_ENTRY_BYTES};
use onic_hal::{AddrLimit, CoherentRegion, Direction, DmaError, DmaMemory, DmaPage};

use super::{SimDevice, SimDmaMem};
use crate::time::TscDelay;

/// Largest ring the probe handles (usable slots).
pub const MAX_SLOTS: usize = 255;
/// Largest frame the probe reassembles.
pub const MAX_FRAME: usize = 2048;

/// Why a probe queue could not be set up.
#[derive(Debug)]
pub enum SetupError {
    /// DMA memory (rings or pages).
    Dma(DmaError),
    /// The core refused or failed the context programming.
    Core(onic_core::Error),
    /// The ring is larger than [`MAX_SLOTS`].
    RingTooLarge(u16),
}

impl fmt::Display for SetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Dma(e) => write!(f, "DMA: {e}"),
            Self::Core(e) => write!(f, "onic-core: {e}"),
            Self::RingTooLarge(n) => write!(f, "ring of {n} slots is too large for the probe"),
        }
    }
}

/// Per-queue counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct QueueStats {
    /// Frames received intact.
    pub packets: u64,
    /// Bytes of those frames.
    pub bytes: u64,
    /// Frames that needed more than one buffer.
    pub multi_buffer: u64,
    /// Completions flagged with an error or carrying an impossible length.
    pub errors: u64,
    /// Poll calls.
    pub polls: u64,
    /// Polls that used their whole budget (the queue stayed scheduled).
    pub budget_exhausted: u64,
}

/// One RX queue driven by the probe.
pub struct RxProbe<'c> {
    /// The function owning the queue.
    pub func: u8,
    /// The queue's configuration (qid, vector, buffer size, rings).
    pub cfg: RxQueueConfig,
    /// Counters.
    pub stats: QueueStats,
    dma: SimDmaMem<'c>,
    desc: CoherentRegion<SimDmaMem<'c>>,
    cmpt: CoherentRegion<SimDmaMem<'c>>,
    pages: Vec<DmaPage, MAX_SLOTS>,
    usable: u16,
    desc_cidx: u16,
    cmpt_cidx: u16,
    color: bool,
}

impl<'c> RxProbe<'c> {
    /// Allocates the rings and pages and programs the queue through `onic-core`.
    ///
    /// # Errors
    ///
    /// [`SetupError`]; whatever was allocated is released again.
    pub fn new(dev: &SimDevice<'c>, dma: SimDmaMem<'c>, cfg: RxQueueConfig) -> Result<Self, SetupError> {
        let usable = cfg.desc_ring.usable();
        if usize::from(usable) > MAX_SLOTS || cfg.cmpt_ring.usable() != usable {
            return Err(SetupError::RingTooLarge(usable));
        }
        let entries = usize::from(cfg.desc_ring.entries());
        let desc = CoherentRegion::new(dma, entries * C2H_DESC_BYTES, AddrLimit::Below4G)
            .map_err(SetupError::Dma)?;
        let cmpt = CoherentRegion::new(dma, entries * CMPT_ENTRY_BYTES, AddrLimit::Below4G)
            .map_err(SetupError::Dma)?;
        let mut q = Self {
            func: dev.function().number(),
            cfg,
            stats: QueueStats::default(),
            dma,
            desc,
            cmpt,
            pages: Vec::new(),
            usable,
            desc_cidx: 0,
            cmpt_cidx: 0,
            color: true,
        };
        for slot in 0..usize::from(usable) {
            let mem = dma.alloc_page().map_err(SetupError::Dma)?;
            let page = dma.map_page(mem, Direction::FromDevice).map_err(|(mem, e)| {
                dma.free_page(mem);
                SetupError::Dma(e)
            })?;
            let buffer = page
                .dma_addr()
                .checked_add(u64::from(RX_HEADROOM))
                .unwrap_or_default();
            q.desc
                .write_u64(slot * C2H_DESC_BYTES, C2hDesc::new(buffer).to_word());
            // Cannot fail: at most MAX_SLOTS slots (checked above).
            let _ = q.pages.push(page);
        }
        dev.init_rx_queue(
            &mut TscDelay,
            &cfg,
            q.desc.dma_addr(),
            q.cmpt.dma_addr(),
            usable - 1,
        )
        .map_err(SetupError::Core)?;
        Ok(q)
    }

    /// The completion ring's DMA address.
    #[must_use]
    pub fn cmpt_addr(&self) -> onic_hal::DmaAddr {
        self.cmpt.dma_addr()
    }

    /// Reads up to `budget` completions, hands each good frame to `on_frame` (bytes and
    /// completion entry) and each bad completion to it with an empty slice, gives the used
    /// descriptors back, and re-arms the interrupt if the budget was not used up. Returns the
    /// number of completions read.
    pub fn poll(
        &mut self,
        dev: &SimDevice<'c>,
        budget: usize,
        on_frame: &mut impl FnMut(&[u8], CmptEntry),
    ) -> usize {
        self.stats.polls += 1;
        let bufsz = self.cfg.buf.bytes() as usize;
        let usable = usize::from(self.usable);
        let mut frame = [0u8; MAX_FRAME];
        let mut done = 0;
        while done < budget {
            let e = CmptEntry::from_word(self.cmpt.read_u64(usize::from(self.cmpt_cidx) * CMPT_ENTRY_BYTES));
            if e.color() != self.color {
                break;
            }
            let len = usize::from(e.pkt_len());
            let buffers = len.div_ceil(bufsz).max(1);
            let sane = !e.err() && len > 0 && len <= MAX_FRAME && buffers < usable;
            if sane {
                let mut off = 0;
                for i in 0..buffers {
                    let page = &self.pages[(usize::from(self.desc_cidx) + i) % usable];
                    let n = (len - off).min(bufsz);
                    let start = RX_HEADROOM as usize;
                    self.dma.sync_for_cpu(page, start, n, Direction::FromDevice);
                    frame[off..off + n].copy_from_slice(&page.bytes()[start..start + n]);
                    off += n;
                }
                self.stats.packets += 1;
                self.stats.bytes += len as u64;
                if buffers > 1 {
                    self.stats.multi_buffer += 1;
                }
                on_frame(&frame[..len], e);
            } else {
                self.stats.errors += 1;
                on_frame(&[], e);
            }
            // The buffers go straight back to the device (the page stays mapped in its slot).
            let used = if sane { buffers } else { 1 };
            for i in 0..used {
                let page = &self.pages[(usize::from(self.desc_cidx) + i) % usable];
                self.dma
                    .sync_for_device(page, RX_HEADROOM as usize, bufsz, Direction::FromDevice);
            }
            self.desc_cidx = ((usize::from(self.desc_cidx) + used) % usable) as u16;
            self.cmpt_cidx += 1;
            if self.cmpt_cidx == self.usable {
                self.cmpt_cidx = 0;
                self.color = !self.color;
            }
            done += 1;
        }
        let db = dev.doorbells();
        if done > 0 {
            db.c2h_pidx(self.cfg.qid, (self.desc_cidx + self.usable - 1) % self.usable);
        }
        let rearm = done < budget;
        if !rearm {
            self.stats.budget_exhausted += 1;
        }
        db.cmpt_cidx(self.cfg.qid, self.cmpt_cidx, rearm);
        done
    }

    /// Invalidates the queue's contexts, then frees its pages and rings.
    ///
    /// # Errors
    ///
    /// What `Device::teardown_rx_queue` reports; the memory is released in any case.
    pub fn teardown(self, dev: &SimDevice<'c>) -> onic_core::Result<()> {
        dev.teardown_rx_queue(&mut TscDelay, self.cfg.qid)
    }
}

impl Drop for RxProbe<'_> {
    fn drop(&mut self) {
        for page in self.pages.drain(..) {
            let mem = self.dma.unmap_page(page, Direction::FromDevice);
            self.dma.free_page(mem);
        }
    }
}
