//! The model card: its state, the public handles (BAR windows, DMA memory, delay, fault knobs)
//! and the traffic API.

use alloc::collections::{BTreeMap, VecDeque};
use alloc::vec::Vec;
use core::cell::RefCell;
use core::ptr::NonNull;

use onic_hal::dma::RawRegion;
use onic_hal::regs::shell::{DEFAULT_HASH_KEY_WORDS, HASH_KEY_WORDS, INDIR_TABLE_ENTRIES};
use onic_hal::window::UNMAPPED_READ;
use onic_hal::{
    AbsQueueId, AddrLimit, DelayNs, Direction, DmaAddr, DmaError, DmaMemory, DmaPage, PageMem, RegisterWindow,
};

use crate::cmac::Port;
use crate::config::{
    CardConfig, Corruption, DmaStats, FaultState, Interrupt, ResetBehavior, SimStats, Violation, XorShift,
};
use crate::dma::DmaState;

/// Upper half of every indirection entry after reset: the RTL does not clear the upper bits of
/// an entry on read (hardware.md §2.3), so the model shows a pattern a driver must mask away.
pub(crate) const INDIR_STALE_PATTERN: u32 = 0xDEAD_0000;

/// Per-queue state the engines keep besides the context words.
#[derive(Clone, Debug, Default)]
pub(crate) struct QueueRt {
    /// H2C descriptors consumed since the last interval writeback.
    pub h2c_since_wb: u32,
    /// An H2C writeback was suppressed by the stall knob and is still owed.
    pub h2c_wb_owed: bool,
    /// The H2C queue hit an error (bad ring, bad descriptor fetch) and stopped.
    pub h2c_error: bool,
    /// The C2H queue hit an error and drops everything.
    pub c2h_error: bool,
    /// Interrupt armed by the last CMPT CIDX doorbell.
    pub armed: bool,
    /// Completions written since the last trigger fired.
    pub unreported: u32,
    /// Completion timer deadline (virtual ns).
    pub deadline: Option<u64>,
    /// A trigger condition was met and waits for the arm.
    pub trigger_pending: bool,
}

/// A frame on its way into a port's MAC.
#[derive(Clone, Debug)]
pub(crate) struct Arrival {
    pub frame: Vec<u8>,
}

/// Shell-side state of one PCI function's QDMA subsystem block.
#[derive(Clone, Debug)]
pub(crate) struct FuncBlock {
    pub qconf: u32,
    pub indir: [u32; INDIR_TABLE_ENTRIES],
    pub key: [u32; HASH_KEY_WORDS],
}

impl FuncBlock {
    pub(crate) fn new() -> Self {
        Self {
            qconf: 0,
            indir: [INDIR_STALE_PATTERN; INDIR_TABLE_ENTRIES],
            key: DEFAULT_HASH_KEY_WORDS,
        }
    }
}

/// Everything the model knows.
pub(crate) struct State {
    pub cfg: CardConfig,
    pub now_ns: u64,
    pub rng: XorShift,
    pub faults: FaultState,
    pub violations: Vec<Violation>,
    pub interrupts: Vec<Interrupt>,
    pub stats: SimStats,
    pub dma: DmaState,
    // BAR0
    pub csr: BTreeMap<u32, u32>,
    pub ind_data: [u32; 8],
    pub ind_mask: [u32; 8],
    /// The function that last wrote each DATA (0..8) and MASK (8..16) register: the registers
    /// exist once per card, so a WRITE command issued by one function must find only its own.
    pub ind_writer: [u8; 16],
    pub ind_cmd: u32,
    pub ctxt: BTreeMap<(u8, u16), [u32; 8]>,
    pub rt: BTreeMap<AbsQueueId, QueueRt>,
    pub h2c_stall: Option<AbsQueueId>,
    pub pkt_id: u16,
    // BAR2
    pub funcs: Vec<FuncBlock>,
    pub ports: Vec<Port>,
    pub in_reset: u32,
    pub reset_reads_left: u32,
    // wire
    pub rx_queue: Vec<VecDeque<Arrival>>,
    pub egress: Vec<Vec<Vec<u8>>>,
}

impl State {
    fn new(mut cfg: CardConfig) -> Self {
        cfg.functions = cfg.functions.clamp(1, onic_hal::id::MAX_FUNCTIONS);
        cfg.ports = cfg.ports.clamp(1, onic_hal::regs::cmac::MAX_PORTS);
        cfg.total_queues = cfg.total_queues.clamp(1, 2048);
        let ports = usize::from(cfg.ports);
        Self {
            now_ns: 0,
            rng: XorShift::new(cfg.seed),
            faults: FaultState::default(),
            violations: Vec::new(),
            interrupts: Vec::new(),
            stats: SimStats::default(),
            dma: DmaState::new(cfg.dma.clone()),
            csr: BTreeMap::new(),
            ind_data: [0; 8],
            ind_mask: [0; 8],
            ind_writer: [0; 16],
            ind_cmd: 0,
            ctxt: BTreeMap::new(),
            rt: BTreeMap::new(),
            h2c_stall: None,
            pkt_id: 0,
            funcs: (0..cfg.functions).map(|_| FuncBlock::new()).collect(),
            ports: (0..ports).map(|_| Port::new()).collect(),
            in_reset: 0,
            reset_reads_left: 0,
            rx_queue: (0..ports).map(|_| VecDeque::new()).collect(),
            egress: (0..ports).map(|_| Vec::new()).collect(),
            cfg,
        }
    }

    /// Records a violation, or panics in strict mode.
    pub(crate) fn violate(&mut self, v: Violation) {
        assert!(!self.cfg.strict, "onic-sim violation: {v}");
        self.violations.push(v);
    }
}

/// A behavioral model of one OpenNIC card: the shell, the QDMA IP, the CMAC ports and what is
/// plugged into them, plus the host DMA memory the driver gives the device.
///
/// The card is single-threaded and step-driven: register writes and [`Card::inject`] only record
/// work; [`Card::step`] / [`Card::run_until_idle`] perform it and [`Card::advance_time`] moves the
/// virtual clock that completion timers use. Nothing happens on its own.
///
/// Dropping a card does not free DMA memory the driver still holds tokens for (that memory is
/// leaked, because a token may outlive the card); free everything through [`SimDma`] first, or
/// call [`Card::reclaim_all_dma`].
pub struct Card {
    st: RefCell<State>,
}

impl core::fmt::Debug for Card {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let st = self.st.borrow();
        f.debug_struct("Card")
            .field("now_ns", &st.now_ns)
            .field("violations", &st.violations.len())
            .finish_non_exhaustive()
    }
}

impl Default for Card {
    fn default() -> Self {
        Self::new(CardConfig::default())
    }
}

impl Card {
    /// Builds a card in its power-on state. Out-of-range counts in `cfg` are clamped (functions
    /// 1..=4, ports 1..=2, total queues 1..=2048).
    #[must_use]
    pub fn new(cfg: CardConfig) -> Self {
        Self {
            st: RefCell::new(State::new(cfg)),
        }
    }

    /// Builds a card whose DMA goes through `bus` (a PCI device model's DMA in an emulator),
    /// not to memory of the model's own: the driver allocates and maps its memory with its OS,
    /// and every descriptor fetch, data transfer and status or completion write is a bus access
    /// by the PCI function named in the queue's context. The DMA memory handle
    /// ([`Card::dma`]) still works but the device never reaches what it hands out.
    #[must_use]
    pub fn with_bus(cfg: CardConfig, bus: alloc::boxed::Box<dyn crate::dma::DeviceBus>) -> Self {
        let mut st = State::new(cfg);
        st.dma.attach_bus(bus);
        Self { st: RefCell::new(st) }
    }

    /// The virtual time at which the next completion timer expires, if one is running: an
    /// embedding that drives the clock itself ([`Card::advance_time`]) wakes the card then.
    #[must_use]
    pub fn next_deadline_ns(&self) -> Option<u64> {
        self.with(|s| s.rt.values().filter_map(|r| r.deadline).min())
    }

    pub(crate) fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        f(&mut self.st.borrow_mut())
    }

    /// The configuration in effect (after clamping).
    #[must_use]
    pub fn config(&self) -> CardConfig {
        self.with(|s| s.cfg.clone())
    }

    /// BAR0 (QDMA configuration space) as seen by PCI function `func`. Global CSRs and contexts
    /// are shared; doorbells are function-relative (the IP adds the function's FMAP qbase).
    #[must_use]
    pub fn qdma(&self, func: u8) -> QdmaWindow<'_> {
        QdmaWindow { card: self, func }
    }

    /// BAR2 (shell register space), the same for every function.
    #[must_use]
    pub fn shell(&self) -> ShellWindow<'_> {
        ShellWindow { card: self }
    }

    /// The host DMA memory the device reaches.
    #[must_use]
    pub fn dma(&self) -> SimDma<'_> {
        SimDma { card: self }
    }

    /// A delay provider that advances the virtual clock and lets the card work meanwhile.
    #[must_use]
    pub fn delay(&self) -> SimDelay<'_> {
        SimDelay { card: self }
    }

    /// The fault knobs.
    #[must_use]
    pub fn faults(&self) -> Faults<'_> {
        Faults { card: self }
    }

    /// A frame arrives at `port` from outside (the far end of the wire). Ignored for a port that
    /// does not exist.
    pub fn inject(&self, port: u8, frame: &[u8]) {
        self.with(|s| {
            if let Some(q) = s.rx_queue.get_mut(usize::from(port)) {
                s.stats.injected += 1;
                q.push_back(Arrival {
                    frame: frame.to_vec(),
                });
            }
        });
    }

    /// A frame leaves `port` toward its wire as if the card had sent it (through the port's
    /// loopback or link state, to the cable's far end or the captured egress), without passing
    /// the card's transmit path: a traffic source outside the shell. Ignored for a port that does
    /// not exist.
    pub fn emit(&self, port: u8, frame: &[u8]) {
        self.with(|s| {
            let port = usize::from(port);
            if port < s.ports.len() {
                s.stats.emitted += 1;
                s.send_on_wire(port, frame.to_vec());
            }
        });
    }

    /// Does the pending work once: each H2C queue with new descriptors consumes up to
    /// [`CardConfig::h2c_batch`] of them, then every frame already waiting at a port goes through
    /// the MAC, the adapter and the C2H engine. Frames sent during this step reach their receiving
    /// port in the next step. Returns whether anything happened.
    pub fn step(&self) -> bool {
        self.with(|s| {
            let tx = s.h2c_round();
            let rx = s.rx_round();
            tx || rx
        })
    }

    /// Steps until nothing is left to do (at most one million steps); returns the number of steps
    /// that made progress.
    pub fn run_until_idle(&self) -> usize {
        let mut n = 0;
        while n < 1_000_000 && self.step() {
            n += 1;
        }
        n
    }

    /// Advances the virtual clock by `ns` and fires completion timers that expire.
    pub fn advance_time(&self, ns: u64) {
        self.with(|s| s.advance_time(ns));
    }

    /// The virtual clock in nanoseconds.
    #[must_use]
    pub fn now_ns(&self) -> u64 {
        self.with(|s| s.now_ns)
    }

    /// Frames that left `port` toward the outside since the last call (oldest first).
    pub fn take_egress(&self, port: u8) -> Vec<Vec<u8>> {
        self.with(|s| {
            s.egress
                .get_mut(usize::from(port))
                .map(core::mem::take)
                .unwrap_or_default()
        })
    }

    /// Interrupts raised since the last call (oldest first).
    pub fn take_interrupts(&self) -> Vec<Interrupt> {
        self.with(|s| core::mem::take(&mut s.interrupts))
    }

    /// Every violation recorded so far.
    #[must_use]
    pub fn violations(&self) -> Vec<Violation> {
        self.with(|s| s.violations.clone())
    }

    /// Takes the recorded violations, leaving the list empty.
    pub fn take_violations(&self) -> Vec<Violation> {
        self.with(|s| core::mem::take(&mut s.violations))
    }

    /// The model's own counters.
    #[must_use]
    pub fn stats(&self) -> SimStats {
        self.with(|s| s.stats)
    }

    /// DMA memory bookkeeping (live allocations, syncs).
    #[must_use]
    pub fn dma_stats(&self) -> DmaStats {
        self.with(|s| s.dma.stats)
    }

    /// Takes the link of `port` up or down. A link that went down reads 0 in STAT_RX_STATUS once
    /// even after it came back (the latch of hardware.md §10.3). While down, nothing is sent or
    /// received.
    pub fn set_link(&self, port: u8, up: bool) {
        self.with(|s| {
            if let Some(p) = s.ports.get_mut(usize::from(port)) {
                if p.link_up && !up {
                    p.link_down_latched = true;
                }
                p.link_up = up;
            }
        });
    }

    /// Whether the link of `port` is up (`false` for a port that does not exist).
    #[must_use]
    pub fn link_up(&self, port: u8) -> bool {
        self.with(|s| s.ports.get(usize::from(port)).is_some_and(|p| p.link_up))
    }

    /// Changes how SHELL_RESET completes, for resets started from now on.
    pub fn set_shell_reset(&self, behavior: ResetBehavior) {
        self.with(|s| s.cfg.shell_reset = behavior);
    }

    /// The live (not latched) value of CMAC counter `name` (an ethtool name from
    /// `onic_hal::regs::cmac::CMAC_STATS`) of `port`; 0 for an unknown name or port.
    #[must_use]
    pub fn cmac_counter(&self, port: u8, name: &str) -> u64 {
        self.with(|s| s.ports.get(usize::from(port)).map_or(0, |p| p.live.get(name)))
    }

    /// The abs qid whose packet blocks the shell's H2C stream, if TX is stalled (hardware.md §14).
    #[must_use]
    pub fn h2c_stalled(&self) -> Option<AbsQueueId> {
        self.with(|s| s.h2c_stall)
    }

    /// Frees every DMA allocation still live (regions and pages), e.g. at the end of a test whose
    /// driver leaked on purpose, and ends every foreign mapping still live without touching the
    /// foreign memory (it is not the model's). Their device addresses read as freed from then on.
    /// Check [`Card::dma_stats`] first to see what was leaked (`live_regions`, `live_pages`,
    /// `mapped_pages`, `live_foreign`); this call sets those counts to 0.
    ///
    /// # Safety
    ///
    /// No token (`RawRegion`, `PageMem`, `DmaPage`, `CoherentRegion`) for this card's memory may be
    /// used afterwards, not even dropped through the allocator: the memory it points to is gone.
    pub unsafe fn reclaim_all_dma(&self) {
        self.with(|s| s.dma.reclaim_all());
    }
}

/// BAR0 of one PCI function. Cheap to copy.
#[derive(Clone, Copy, Debug)]
pub struct QdmaWindow<'a> {
    card: &'a Card,
    func: u8,
}

impl QdmaWindow<'_> {
    /// The PCI function this window belongs to.
    #[must_use]
    pub fn func(&self) -> u8 {
        self.func
    }
}

// SAFETY: each call performs exactly one decoded register access on the model, in call order;
// misaligned or out-of-window offsets read UNMAPPED_READ and drop writes; the model runs on the
// caller's thread only when called, so every earlier CPU write to DMA memory is visible to it.
unsafe impl RegisterWindow for QdmaWindow<'_> {
    fn read32(&self, offset: u32) -> u32 {
        self.card.with(|s| s.qdma_read(self.func, offset))
    }

    fn write32(&self, offset: u32, value: u32) {
        self.card.with(|s| s.qdma_write(self.func, offset, value));
    }
}

/// BAR2, the shell register space. Cheap to copy.
#[derive(Clone, Copy, Debug)]
pub struct ShellWindow<'a> {
    card: &'a Card,
}

// SAFETY: as for `QdmaWindow`: one decoded access per call, unmapped reads return UNMAPPED_READ,
// the model only runs when called.
unsafe impl RegisterWindow for ShellWindow<'_> {
    fn read32(&self, offset: u32) -> u32 {
        self.card.with(|s| s.shell_read(offset))
    }

    fn write32(&self, offset: u32, value: u32) {
        self.card.with(|s| s.shell_write(offset, value));
    }
}

/// The card's host DMA memory. Cheap to copy.
///
/// Misuse (freeing an unknown region, freeing a mapped page, syncing an unmapped page...) is
/// recorded as a [`Violation`]; the offending operation is not performed (memory that cannot be
/// freed safely is leaked rather than released).
///
/// Besides the [`DmaMemory`] implementation, [`SimDma::map_foreign`] lets the device reach host
/// memory the model did not allocate (an OS's packet buffers), as an IOMMU mapping does.
#[derive(Clone, Copy, Debug)]
pub struct SimDma<'a> {
    card: &'a Card,
}

impl SimDma<'_> {
    /// Maps `len` bytes of host memory at `ptr` for the device (dir as the DMA API's).
    ///
    /// The device address comes from [`crate::dma::FOREIGN_MAP_BASE`] up, has the same offset
    /// within its page as `ptr`, and is never handed out again. Device accesses are checked like
    /// those to a page mapping: within the mapped length only, no device write to a
    /// [`Direction::ToDevice`] mapping, no device read of a [`Direction::FromDevice`] one.
    ///
    /// # Errors
    ///
    /// [`DmaError::InvalidRequest`] for a zero length or a range that overflows the address space;
    /// [`DmaError::OutOfMemory`] once the foreign device address range is used up.
    ///
    /// # Safety
    ///
    /// The bytes stay valid (not freed) until `unmap_foreign` of the returned address (or
    /// [`Card::reclaim_all_dma`]): readable and initialized unless `dir` is
    /// [`Direction::FromDevice`], writable through `ptr` unless `dir` is [`Direction::ToDevice`].
    /// As with a real device, while a call on the card runs the CPU neither writes bytes the
    /// device may read nor accesses bytes the device may write (no other thread does, and no
    /// reference to them is held across the call).
    pub unsafe fn map_foreign(
        &self,
        ptr: NonNull<u8>,
        len: usize,
        dir: Direction,
    ) -> Result<DmaAddr, DmaError> {
        // SAFETY: the caller keeps the bytes valid as `DmaState::map_foreign` requires, until the
        // mapping is ended by `unmap_foreign` or `reclaim_all_dma`.
        self.card.with(|s| unsafe { s.dma.map_foreign(ptr, len, dir) })
    }

    /// Makes `len` bytes of host memory at `ptr` reachable by the device at `addr`, an address
    /// the OS's DMA API chose for them (so the model plays the device behind that API: `ptr` is
    /// what the OS says the address reaches, a bounce buffer included). Checked and ended
    /// ([`SimDma::unmap_foreign`]) like a [`SimDma::map_foreign`] mapping.
    ///
    /// # Errors
    ///
    /// [`DmaError::InvalidRequest`] for an empty or wrapping range, or one that overlaps a live
    /// mapping (also recorded as [`Violation::HostDma`] `DoubleMap`).
    ///
    /// # Safety
    ///
    /// As [`SimDma::map_foreign`].
    pub unsafe fn attach_foreign(
        &self,
        addr: DmaAddr,
        ptr: NonNull<u8>,
        len: usize,
        dir: Direction,
    ) -> Result<(), DmaError> {
        self.card.with(|s| {
            // SAFETY: forwarded contract.
            match unsafe { s.dma.attach_foreign(addr, ptr, len, dir) } {
                Ok(()) => Ok(()),
                Err(v) => {
                    s.violate(v);
                    Err(DmaError::InvalidRequest)
                }
            }
        })
    }

    /// Ends a mapping made by map_foreign or attach_foreign (`addr`, `len`, `dir` as
    /// returned/passed then).
    ///
    /// An `addr` that does not start a live foreign mapping, or a different `len` or `dir`, is
    /// recorded as a [`Violation::HostDma`] (`NotMapped`, `LengthMismatch`, `DirectionMismatch`)
    /// and the mapping, if any, stays live. Once unmapped, the device reaches nothing at `addr`
    /// (an access is reported as freed), and the memory is the caller's again.
    pub fn unmap_foreign(&self, addr: DmaAddr, len: usize, dir: Direction) {
        self.card.with(|s| {
            if let Some(v) = s.dma.unmap_foreign(addr, len, dir) {
                s.violate(v);
            }
        });
    }

    /// Sync of part of a foreign mapping: `offset`/`len` relative to `addr` (the mapped address).
    ///
    /// `for_cpu` selects `sync_for_cpu` (true) or `sync_for_device` (false); both are counted in
    /// [`DmaStats`]. Memory is plain host memory, so a sync moves no data; it is only checked (an
    /// unknown address, a range past the mapping or a direction the mapping does not allow is a
    /// [`Violation::HostDma`]).
    pub fn sync_foreign(&self, addr: DmaAddr, offset: usize, len: usize, dir: Direction, for_cpu: bool) {
        self.card.with(|s| {
            if let Some(v) = s.dma.sync_foreign(addr, offset, len, dir, for_cpu) {
                s.violate(v);
            }
        });
    }
}

// SAFETY: regions and pages are fresh heap blocks (zeroed, 4 KiB aligned, page-sized multiples)
// owned by the model until the driver returns the token, and the model never frees a block whose
// token it has not been handed back; device addresses map exactly to those blocks (foreign
// mappings use a separate address range no token carries); below-4-GiB regions get addresses
// below 4 GiB. Memory is plain host memory, so syncs need no work.
unsafe impl DmaMemory for SimDma<'_> {
    fn alloc_coherent(&self, len: usize, limit: AddrLimit) -> Result<RawRegion, DmaError> {
        let (ptr, addr) = self.card.with(|s| s.dma.alloc_coherent(len, limit))?;
        // SAFETY: `ptr` is a fresh zeroed allocation of at least `len` bytes, 4 KiB aligned, that
        // nothing else uses until the region is freed; the device reaches it at `addr`.
        Ok(unsafe { RawRegion::from_raw(ptr, addr, len) })
    }

    unsafe fn free_coherent(&self, region: RawRegion) {
        self.card.with(|s| {
            if let Some(v) = s
                .dma
                .free_coherent(region.cpu_ptr(), region.dma_addr(), region.len())
            {
                s.violate(v);
            }
        });
    }

    fn alloc_page(&self) -> Result<PageMem, DmaError> {
        let ptr = self.card.with(|s| s.dma.alloc_page())?;
        // SAFETY: `ptr` is a fresh PAGE_SIZE, PAGE_SIZE-aligned allocation owned by the token.
        Ok(unsafe { PageMem::from_raw(ptr) })
    }

    fn free_page(&self, page: PageMem) {
        self.card.with(|s| {
            if let Some(v) = s.dma.free_page(page.cpu_ptr()) {
                s.violate(v);
            }
        });
    }

    fn map_page(&self, page: PageMem, dir: Direction) -> Result<DmaPage, (PageMem, DmaError)> {
        match self.card.with(|s| s.dma.map_page(page.cpu_ptr(), dir)) {
            // SAFETY: the model now resolves `addr` to exactly this page until it is unmapped.
            Ok(addr) => Ok(unsafe { DmaPage::from_raw(page, addr) }),
            Err(v) => {
                self.card.with(|s| s.violate(v));
                Err((page, DmaError::MapFailed))
            }
        }
    }

    unsafe fn unmap_page(&self, page: DmaPage, dir: Direction) -> PageMem {
        let (mem, addr) = page.into_parts();
        self.card.with(|s| {
            if let Some(v) = s.dma.unmap_page(mem.cpu_ptr(), addr, dir) {
                s.violate(v);
            }
        });
        mem
    }

    fn sync_for_cpu(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction) {
        self.card.with(|s| {
            if let Some(v) = s
                .dma
                .sync(page.mem().cpu_ptr(), page.dma_addr(), offset, len, dir, true)
            {
                s.violate(v);
            }
        });
    }

    fn sync_for_device(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction) {
        self.card.with(|s| {
            if let Some(v) = s
                .dma
                .sync(page.mem().cpu_ptr(), page.dma_addr(), offset, len, dir, false)
            {
                s.violate(v);
            }
        });
    }
}

/// A delay provider over the card's virtual clock: waiting `ns` runs the card until idle, advances
/// the clock by `ns` (firing completion timers) and runs it until idle again, as the hardware keeps
/// working while the CPU waits. Cheap to copy.
#[derive(Clone, Copy, Debug)]
pub struct SimDelay<'a> {
    card: &'a Card,
}

impl DelayNs for SimDelay<'_> {
    fn delay_ns(&mut self, ns: u32) {
        // Work already posted happens at once, then the time passes and timers fire.
        self.card.run_until_idle();
        self.card.advance_time(u64::from(ns));
        self.card.run_until_idle();
    }
}

/// The fault knobs of a card. Cheap to copy.
#[derive(Clone, Copy, Debug)]
pub struct Faults<'a> {
    card: &'a Card,
}

impl Faults<'_> {
    /// The next `n` frames arriving at any port are lost on the wire.
    pub fn drop_next_frames(&self, n: u32) {
        self.card.with(|s| s.faults.drop_next = n);
    }

    /// Each frame arriving at a port is lost with probability `ppm` / 1 000 000 (seeded).
    pub fn set_drop_rate_ppm(&self, ppm: u32) {
        self.card.with(|s| s.faults.drop_rate_ppm = ppm.min(1_000_000));
    }

    /// The next `n` frames arriving at any port carry a bad FCS.
    pub fn bad_fcs_next_frames(&self, n: u32) {
        self.card.with(|s| s.faults.bad_fcs_next = n);
    }

    /// The next `correctable` frames arriving at any port carry symbol errors an RS-FEC decoder
    /// corrects, the `uncorrectable` frames after them more errors than it corrects. What the
    /// receiving CMAC makes of them depends on its RS-FEC settings (RSFEC_CONF_ENABLE,
    /// RSFEC_CONF_IND_CORRECTION): corrected and counted in `stat_rx_rsfec_corrected_cw`, or
    /// counted in `stat_rx_rsfec_uncorrected_cw` and received with a bad FCS; without RS-FEC every
    /// such frame arrives with a bad FCS.
    pub fn fec_errors_next_frames(&self, correctable: u32, uncorrectable: u32) {
        self.card.with(|s| {
            s.faults.fec_correctable_next = correctable;
            s.faults.fec_uncorrectable_next = uncorrectable;
        });
    }

    /// The QDMA detects an error: `bits` of leaf status register `leaf` (an index of
    /// `onic_hal::regs::qdma::errors::LEAF_STATUS`) and its group in GLBL_ERR_STAT are set, and
    /// the error interrupt is sent if armed. Returns whether it was.
    pub fn raise_error(&self, leaf: usize, bits: u32) -> bool {
        self.card.with(|s| s.raise_error(leaf, bits))
    }

    /// The next `n` completion entries are corrupted as `how`.
    pub fn corrupt_next_completions(&self, n: u32, how: Corruption) {
        self.card.with(|s| {
            s.faults.corrupt_next = n;
            s.faults.corruption = Some(how);
        });
    }

    /// While on, H2C status writebacks are withheld (and written once it is turned off).
    pub fn stall_h2c_writeback(&self, on: bool) {
        self.card.with(|s| s.faults.stall_h2c_wb = on);
    }

    /// The next completion status record carries a pidx beyond the ring (once).
    pub fn cmpt_status_pidx_jump(&self) {
        self.card.with(|s| s.faults.cmpt_pidx_jump = true);
    }

    /// The next completion entries (of any queue, in the order they are written) report these
    /// lengths instead of the length of their frame; the data is written as usual (one buffer per
    /// descriptor, as many descriptors as the real frame needs). Replaces lengths still pending.
    pub fn override_completion_lengths(&self, lens: &[u16]) {
        self.card
            .with(|s| s.faults.len_override = lens.iter().copied().collect());
    }

    /// While on, completion rings keep their color bit when their producer index wraps to 0, so
    /// every entry of the second lap carries the first lap's color.
    pub fn freeze_cmpt_color(&self, on: bool) {
        self.card.with(|s| s.faults.freeze_color = on);
    }

    /// While on, completion status records are not written (neither on a trigger nor on a CMPT
    /// CIDX doorbell with stat_en): the producer index the driver reads stays where it was, while
    /// entries keep being written.
    pub fn freeze_cmpt_status(&self, on: bool) {
        self.card.with(|s| s.faults.freeze_cmpt_status = on);
    }

    /// While on, the QDMA's context engine is wedged: IND_CTXT_CMD reads with its busy bit set
    /// and a command written meanwhile is never carried out (it is lost, not queued); the
    /// engines go on with the contexts they have. Off: commands complete again at once.
    pub fn hold_context_commands(&self, on: bool) {
        self.card.with(|s| s.faults.hold_ctxt_cmds = on);
    }

    /// The device writes `data` at device address `addr`, as a DMA write of its own (an arbitrary
    /// completion entry, a status record with any index...). The write is checked like every
    /// device access: it must fall inside memory the device may write.
    ///
    /// # Errors
    ///
    /// The violation the write would be (it is not performed and not recorded: it is the test's
    /// mistake, not the driver's).
    pub fn device_write(&self, addr: DmaAddr, data: &[u8]) -> Result<(), Violation> {
        self.card.with(|s| {
            s.dma
                .device_write(0, addr.get(), data, crate::config::DeviceAccess::FaultWrite)
        })
    }

    /// The next `n` page allocations fail with `OutOfMemory`.
    pub fn fail_next_page_allocs(&self, n: u32) {
        self.card.with(|s| s.dma.fail_page_allocs = n);
    }

    /// Turns every knob off.
    pub fn clear(&self) {
        self.card.with(|s| {
            s.faults = FaultState::default();
            s.dma.fail_page_allocs = 0;
        });
    }
}

/// Reads of a BAR that decode to nothing.
pub(crate) const UNMAPPED: u32 = UNMAPPED_READ;
