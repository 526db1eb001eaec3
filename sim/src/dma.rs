//! The DMA memory model: coherent regions and packet pages backed by host memory, foreign
//! mappings of host memory the model did not allocate, fake device addresses, and the translation
//! every device-side access goes through.
//!
//! A card built with [`crate::Card::with_bus`] has no memory of its own: every device access goes
//! to the [`DeviceBus`] (a PCI device model's DMA, through whatever IOMMU the host bus has), with
//! the PCI function that owns the queue as the requester.
//!
//! Device addresses are never host pointers. Coherent regions below 4 GiB come from
//! [`COHERENT_LOW_BASE`] up, coherent regions without a limit from [`COHERENT_HIGH_BASE`] up, page
//! mappings from [`PAGE_MAP_BASE`] up and foreign mappings from [`FOREIGN_MAP_BASE`] up. No device
//! address is ever handed out twice, so an access through a stale address always lands on a freed
//! range and is reported as such.

use alloc::boxed::Box;
use alloc::collections::BTreeMap;

use onic_hal::{AddrLimit, Direction, DmaAddr, PAGE_SIZE};

use crate::config::{AccessProblem, DeviceAccess, DmaConfig, DmaStats, HostDmaProblem, Violation};
use crate::mem::{Block, Foreign};

/// First device address of coherent regions allocated with [`AddrLimit::Below4G`].
pub const COHERENT_LOW_BASE: u64 = 0x1000_0000;
/// First device address of coherent regions allocated with [`AddrLimit::Any`].
pub const COHERENT_HIGH_BASE: u64 = 0x80_0000_0000;
/// First device address of packet page mappings.
pub const PAGE_MAP_BASE: u64 = 0x1_0000_0000;
/// First device address of foreign mappings (host memory the model did not allocate, see
/// [`crate::SimDma::map_foreign`]). A mapping keeps its pointer's offset within the page and takes
/// the whole pages it spans. The base sits far above the other ranges, since OS buffers are
/// mapped per packet and the address space is never reused.
pub const FOREIGN_MAP_BASE: u64 = 0x1000_0000_0000;

/// The host bus a card's DMA goes through when the card is a device of an emulator (see
/// [`crate::Card::with_bus`]) instead of owning its DMA memory.
///
/// `func` is the requester: the PCI function named by the queue's context (its SW or CMPT
/// context `func`), so that an IOMMU translates the access in that function's domain. An `Err`
/// is the access not carried out: [`BusError::Refused`] (no mapping in the IOMMU, nothing
/// behind the address), recorded as [`AccessProblem::BusFault`], or [`BusError::MasterOff`],
/// recorded as [`AccessProblem::MasterOff`]; either is then treated like any refused access.
pub trait DeviceBus {
    /// Reads `out.len()` bytes of host memory at `addr` for PCI function `func`.
    ///
    /// # Errors
    ///
    /// The bus refused the read.
    fn read(&self, func: u8, addr: u64, out: &mut [u8]) -> Result<(), BusError>;

    /// Writes `data` to host memory at `addr` for PCI function `func`.
    ///
    /// # Errors
    ///
    /// The bus refused the write.
    fn write(&self, func: u8, addr: u64, data: &[u8]) -> Result<(), BusError>;
}

/// Why the host bus did not carry out a device access.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BusError {
    /// The bus refused it: an IOMMU without a mapping for the address, nothing behind it.
    Refused,
    /// The requesting function's bus mastering is off: the access never left the card.
    MasterOff,
}

/// The bus of a card that is a device of an emulator.
struct Bus(Box<dyn DeviceBus>);

impl core::fmt::Debug for Bus {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("DeviceBus")
    }
}

/// A live coherent region.
#[derive(Debug)]
struct Region {
    block: Block,
    /// Length the driver asked for (the block is rounded up to pages).
    len: usize,
}

/// A live packet page, keyed by its host address.
#[derive(Debug)]
struct Page {
    block: Block,
    mapping: Option<(u64, Direction)>,
}

/// Where a device address resolved to.
pub(crate) enum Target<'a> {
    Region(&'a Block, usize),
    Page(&'a Block, usize),
    Foreign(&'a Foreign, usize),
}

/// State of the DMA memory model.
#[derive(Debug)]
pub(crate) struct DmaState {
    cfg: DmaConfig,
    /// Coherent regions by device address.
    regions: BTreeMap<u64, Region>,
    /// Packet pages by host address.
    pages: BTreeMap<usize, Page>,
    /// Page mappings: device address -> host address of the page.
    mappings: BTreeMap<u64, usize>,
    /// Foreign mappings by device address (the first mapped byte, not the page).
    foreign: BTreeMap<u64, Foreign>,
    /// Device ranges that were live once and are gone: start -> length.
    dead: BTreeMap<u64, u64>,
    next_low: u64,
    next_high: u64,
    next_map: u64,
    /// Next free page of the foreign mapping range.
    next_foreign: u64,
    pub(crate) stats: DmaStats,
    pub(crate) fail_page_allocs: u32,
    /// Set for a card behind a host bus: device accesses go there, not to the model's memory.
    bus: Option<Bus>,
}

impl DmaState {
    pub(crate) fn new(cfg: DmaConfig) -> Self {
        Self {
            cfg,
            regions: BTreeMap::new(),
            pages: BTreeMap::new(),
            mappings: BTreeMap::new(),
            foreign: BTreeMap::new(),
            dead: BTreeMap::new(),
            next_low: COHERENT_LOW_BASE,
            next_high: COHERENT_HIGH_BASE,
            next_map: PAGE_MAP_BASE,
            next_foreign: FOREIGN_MAP_BASE,
            stats: DmaStats::default(),
            fail_page_allocs: 0,
            bus: None,
        }
    }

    /// Sends every later device access to `bus`.
    pub(crate) fn attach_bus(&mut self, bus: Box<dyn DeviceBus>) {
        self.bus = Some(Bus(bus));
    }

    pub(crate) fn rings_below_4g(&self) -> bool {
        self.cfg.rings_below_4g
    }

    /// Records that the whole pages of `[start, start + len)` were live once and are gone, merged
    /// with adjacent dead ranges, so the record stays small however many mappings come and go
    /// (device ranges never share a page with another live range, so rounding is exact).
    fn bury(&mut self, start: u64, len: u64) {
        let page = PAGE_SIZE as u64;
        let mut s = start - start % page;
        let mut e = start.saturating_add(len).div_ceil(page).saturating_mul(page);
        if let Some((&ps, &pl)) = self.dead.range(..=s).next_back() {
            if ps.saturating_add(pl) >= s {
                s = ps;
                e = e.max(ps.saturating_add(pl));
                self.dead.remove(&ps);
            }
        }
        while let Some((&ns, &nl)) = self.dead.range(s..).next() {
            if ns > e {
                break;
            }
            e = e.max(ns.saturating_add(nl));
            self.dead.remove(&ns);
        }
        self.dead.insert(s, e - s);
    }

    /// Allocates a coherent region: (host pointer, device address, length).
    pub(crate) fn alloc_coherent(
        &mut self,
        len: usize,
        limit: AddrLimit,
    ) -> Result<(core::ptr::NonNull<u8>, DmaAddr), onic_hal::DmaError> {
        use onic_hal::DmaError;
        if len == 0 {
            return Err(DmaError::InvalidRequest);
        }
        let span = len
            .checked_next_multiple_of(PAGE_SIZE)
            .ok_or(DmaError::InvalidRequest)? as u64;
        let addr = match limit {
            AddrLimit::Below4G => {
                let end = COHERENT_LOW_BASE
                    .saturating_add(self.cfg.below_4g_bytes)
                    .min(1 << 32);
                if self.next_low.checked_add(span).is_none_or(|e| e > end) {
                    return Err(DmaError::OutOfMemory);
                }
                self.next_low
            }
            AddrLimit::Any => self.next_high,
        };
        let block = Block::alloc(len).ok_or(DmaError::OutOfMemory)?;
        match limit {
            AddrLimit::Below4G => self.next_low += span,
            AddrLimit::Any => self.next_high += span,
        }
        let ptr = block.ptr();
        self.regions.insert(addr, Region { block, len });
        self.stats.live_regions += 1;
        self.stats.regions_allocated += 1;
        Ok((ptr, DmaAddr::new(addr)))
    }

    /// Frees a coherent region given back by the driver.
    pub(crate) fn free_coherent(
        &mut self,
        ptr: core::ptr::NonNull<u8>,
        addr: DmaAddr,
        len: usize,
    ) -> Option<Violation> {
        let known = self
            .regions
            .get(&addr.get())
            .is_some_and(|r| r.block.ptr() == ptr && r.len == len);
        if !known {
            return Some(Violation::HostDma {
                problem: HostDmaProblem::UnknownRegion,
                addr,
            });
        }
        let region = self.regions.remove(&addr.get())?;
        self.bury(addr.get(), region.block.len() as u64);
        region.block.free();
        self.stats.live_regions -= 1;
        None
    }

    /// Allocates a packet page.
    pub(crate) fn alloc_page(&mut self) -> Result<core::ptr::NonNull<u8>, onic_hal::DmaError> {
        use onic_hal::DmaError;
        if self.fail_page_allocs > 0 {
            self.fail_page_allocs -= 1;
            self.stats.page_alloc_failures += 1;
            return Err(DmaError::OutOfMemory);
        }
        if self.cfg.page_budget.is_some_and(|b| self.pages.len() >= b) {
            self.stats.page_alloc_failures += 1;
            return Err(DmaError::OutOfMemory);
        }
        let block = Block::alloc(PAGE_SIZE).ok_or(DmaError::OutOfMemory)?;
        if let Some(p) = self.cfg.page_poison {
            block.fill(p);
        }
        let ptr = block.ptr();
        self.pages
            .insert(ptr.as_ptr() as usize, Page { block, mapping: None });
        self.stats.live_pages += 1;
        self.stats.pages_allocated += 1;
        Ok(ptr)
    }

    /// Frees a page given back by the driver.
    pub(crate) fn free_page(&mut self, ptr: core::ptr::NonNull<u8>) -> Option<Violation> {
        let key = ptr.as_ptr() as usize;
        let Some(page) = self.pages.get(&key) else {
            return Some(Violation::HostDma {
                problem: HostDmaProblem::UnknownPage,
                addr: DmaAddr::new(0),
            });
        };
        let mut violation = None;
        if let Some((iova, _)) = page.mapping {
            violation = Some(Violation::HostDma {
                problem: HostDmaProblem::FreeWhileMapped,
                addr: DmaAddr::new(iova),
            });
            self.mappings.remove(&iova);
            self.bury(iova, PAGE_SIZE as u64);
            self.stats.mapped_pages -= 1;
        }
        if let Some(page) = self.pages.remove(&key) {
            page.block.free();
            self.stats.live_pages -= 1;
        }
        violation
    }

    /// Maps a page; `Err` carries the violation (the page stays with the driver).
    pub(crate) fn map_page(
        &mut self,
        ptr: core::ptr::NonNull<u8>,
        dir: Direction,
    ) -> Result<DmaAddr, Violation> {
        let key = ptr.as_ptr() as usize;
        let Some(page) = self.pages.get_mut(&key) else {
            return Err(Violation::HostDma {
                problem: HostDmaProblem::UnknownPage,
                addr: DmaAddr::new(0),
            });
        };
        if let Some((iova, _)) = page.mapping {
            return Err(Violation::HostDma {
                problem: HostDmaProblem::DoubleMap,
                addr: DmaAddr::new(iova),
            });
        }
        let iova = self.next_map;
        self.next_map += PAGE_SIZE as u64;
        page.mapping = Some((iova, dir));
        self.mappings.insert(iova, key);
        self.stats.mapped_pages += 1;
        Ok(DmaAddr::new(iova))
    }

    /// Unmaps a page.
    pub(crate) fn unmap_page(
        &mut self,
        ptr: core::ptr::NonNull<u8>,
        addr: DmaAddr,
        dir: Direction,
    ) -> Option<Violation> {
        let key = ptr.as_ptr() as usize;
        let page = match self.pages.get_mut(&key) {
            Some(p) if p.mapping.is_some_and(|(a, _)| a == addr.get()) => p,
            _ => {
                return Some(Violation::HostDma {
                    problem: HostDmaProblem::NotMapped,
                    addr,
                })
            }
        };
        let mapped_dir = page.mapping.map(|(_, d)| d);
        page.mapping = None;
        self.mappings.remove(&addr.get());
        self.bury(addr.get(), PAGE_SIZE as u64);
        self.stats.mapped_pages -= 1;
        if mapped_dir != Some(dir) {
            return Some(Violation::HostDma {
                problem: HostDmaProblem::DirectionMismatch,
                addr,
            });
        }
        None
    }

    /// Checks a sync call.
    pub(crate) fn sync(
        &mut self,
        ptr: core::ptr::NonNull<u8>,
        addr: DmaAddr,
        offset: usize,
        len: usize,
        dir: Direction,
        for_cpu: bool,
    ) -> Option<Violation> {
        if for_cpu {
            self.stats.syncs_for_cpu += 1;
        } else {
            self.stats.syncs_for_device += 1;
        }
        let key = ptr.as_ptr() as usize;
        let mapping = self.pages.get(&key).and_then(|p| p.mapping);
        let Some((iova, mapped_dir)) = mapping.filter(|(a, _)| *a == addr.get()) else {
            return Some(Violation::HostDma {
                problem: HostDmaProblem::NotMapped,
                addr,
            });
        };
        if offset.checked_add(len).is_none_or(|end| end > PAGE_SIZE) {
            return Some(Violation::HostDma {
                problem: HostDmaProblem::SyncOutOfRange,
                addr: DmaAddr::new(iova),
            });
        }
        if mapped_dir != dir && mapped_dir != Direction::Bidirectional {
            return Some(Violation::HostDma {
                problem: HostDmaProblem::SyncDirection,
                addr: DmaAddr::new(iova),
            });
        }
        None
    }

    /// Maps `len` bytes of host memory at `ptr` that the model did not allocate.
    ///
    /// # Safety
    ///
    /// The bytes meet the invariants of [`Foreign`] for `dir` until the mapping leaves the live
    /// set (through [`DmaState::unmap_foreign`] or [`DmaState::reclaim_all`]).
    pub(crate) unsafe fn map_foreign(
        &mut self,
        ptr: core::ptr::NonNull<u8>,
        len: usize,
        dir: Direction,
    ) -> Result<DmaAddr, onic_hal::DmaError> {
        use onic_hal::DmaError;
        let host = ptr.as_ptr().addr();
        if len == 0 || host.checked_add(len).is_none() {
            return Err(DmaError::InvalidRequest);
        }
        let in_page = host % PAGE_SIZE;
        let span = in_page
            .checked_add(len)
            .and_then(|n| n.checked_next_multiple_of(PAGE_SIZE))
            .ok_or(DmaError::InvalidRequest)? as u64;
        let next = self.next_foreign.checked_add(span).ok_or(DmaError::OutOfMemory)?;
        let addr = self.next_foreign + in_page as u64;
        self.next_foreign = next;
        // SAFETY: the caller keeps the bytes valid for `dir` until the mapping is removed from
        // `foreign`, which is when the `Foreign` value is dropped.
        let mem = unsafe { Foreign::new(ptr, len, dir) };
        self.foreign.insert(addr, mem);
        self.stats.live_foreign += 1;
        self.stats.foreign_mapped += 1;
        Ok(DmaAddr::new(addr))
    }

    /// Attaches `len` bytes of host memory at `ptr` as a foreign mapping at device address
    /// `addr`, which the OS chose (its DMA API's address: the model is then the device behind
    /// that API). Refused when the range is empty, wraps, or overlaps a live range of any kind.
    ///
    /// # Safety
    ///
    /// As [`DmaState::map_foreign`].
    pub(crate) unsafe fn attach_foreign(
        &mut self,
        addr: DmaAddr,
        ptr: core::ptr::NonNull<u8>,
        len: usize,
        dir: Direction,
    ) -> Result<(), Violation> {
        let start = addr.get();
        let overlap = Violation::HostDma {
            problem: HostDmaProblem::DoubleMap,
            addr,
        };
        let Some(end) = start.checked_add(len as u64).filter(|_| len > 0) else {
            return Err(overlap);
        };
        let live = |s: u64, l: u64| s < end && start < s.saturating_add(l);
        let clash = self
            .foreign
            .range(..end)
            .next_back()
            .is_some_and(|(&s, m)| live(s, m.len() as u64))
            || self
                .regions
                .range(..end)
                .next_back()
                .is_some_and(|(&s, r)| live(s, r.len as u64))
            || self
                .mappings
                .range(..end)
                .next_back()
                .is_some_and(|(&s, _)| live(s, PAGE_SIZE as u64));
        if clash {
            return Err(overlap);
        }
        // The OS reuses its addresses: whatever died here before is not this mapping.
        // Dead ranges are disjoint and sorted: the ones that overlap are the last ones below `end`.
        let stale: alloc::vec::Vec<u64> = self
            .dead
            .range(..end)
            .rev()
            .take_while(|(&s, &l)| s.saturating_add(l) > start)
            .map(|(&s, _)| s)
            .collect();
        for s in stale {
            self.dead.remove(&s);
        }
        // SAFETY: the caller keeps the bytes valid for `dir` until the mapping is removed from
        // `foreign`, which is when the `Foreign` value is dropped.
        let mem = unsafe { Foreign::new(ptr, len, dir) };
        self.foreign.insert(start, mem);
        self.stats.live_foreign += 1;
        self.stats.foreign_mapped += 1;
        Ok(())
    }

    /// Ends a foreign mapping. A call that does not match a live mapping exactly (start address,
    /// length, direction) changes nothing and returns the violation.
    pub(crate) fn unmap_foreign(&mut self, addr: DmaAddr, len: usize, dir: Direction) -> Option<Violation> {
        let problem = match self.foreign.get(&addr.get()) {
            None => Some(HostDmaProblem::NotMapped),
            Some(m) if m.len() != len => Some(HostDmaProblem::LengthMismatch),
            Some(m) if m.dir() != dir => Some(HostDmaProblem::DirectionMismatch),
            Some(_) => None,
        };
        if let Some(problem) = problem {
            return Some(Violation::HostDma { problem, addr });
        }
        let m = self.foreign.remove(&addr.get())?;
        self.bury(addr.get(), m.len() as u64);
        self.stats.live_foreign -= 1;
        None
    }

    /// Checks a sync call on part of a foreign mapping (`offset`/`len` relative to `addr`).
    pub(crate) fn sync_foreign(
        &mut self,
        addr: DmaAddr,
        offset: usize,
        len: usize,
        dir: Direction,
        for_cpu: bool,
    ) -> Option<Violation> {
        if for_cpu {
            self.stats.syncs_for_cpu += 1;
        } else {
            self.stats.syncs_for_device += 1;
        }
        let fail = |problem| Some(Violation::HostDma { problem, addr });
        let Some(m) = self.foreign.get(&addr.get()) else {
            return fail(HostDmaProblem::NotMapped);
        };
        if offset.checked_add(len).is_none_or(|end| end > m.len()) {
            return fail(HostDmaProblem::SyncOutOfRange);
        }
        if m.dir() != dir && m.dir() != Direction::Bidirectional {
            return fail(HostDmaProblem::SyncDirection);
        }
        None
    }

    /// Resolves a device access of `len` bytes at `addr`.
    pub(crate) fn translate(
        &self,
        addr: u64,
        len: usize,
        access: DeviceAccess,
    ) -> Result<Target<'_>, Violation> {
        let fail = |problem| Violation::DeviceAccess {
            access,
            addr: DmaAddr::new(addr),
            len,
            problem,
        };
        let end = addr
            .checked_add(len as u64)
            .ok_or_else(|| fail(AccessProblem::OutOfRange))?;
        if let Some((&start, region)) = self.regions.range(..=addr).next_back() {
            let off = (addr - start) as usize;
            if off < region.len {
                if end - start > region.len as u64 {
                    return Err(fail(AccessProblem::OutOfRange));
                }
                return Ok(Target::Region(&region.block, off));
            }
        }
        if let Some((&start, &key)) = self.mappings.range(..=addr).next_back() {
            let off = (addr - start) as usize;
            if off < PAGE_SIZE {
                if end - start > PAGE_SIZE as u64 {
                    return Err(fail(AccessProblem::OutOfRange));
                }
                let page = self
                    .pages
                    .get(&key)
                    .ok_or_else(|| fail(AccessProblem::Unmapped))?;
                let dir = page.mapping.map_or(Direction::Bidirectional, |(_, d)| d);
                let bad_dir = match dir {
                    Direction::ToDevice => access.is_write(),
                    Direction::FromDevice => !access.is_write(),
                    Direction::Bidirectional => false,
                };
                if bad_dir {
                    return Err(fail(AccessProblem::WrongDirection));
                }
                return Ok(Target::Page(&page.block, off));
            }
        }
        if let Some((&start, mem)) = self.foreign.range(..=addr).next_back() {
            let off = (addr - start) as usize;
            if off < mem.len() {
                if end - start > mem.len() as u64 {
                    return Err(fail(AccessProblem::OutOfRange));
                }
                let bad_dir = match mem.dir() {
                    Direction::ToDevice => access.is_write(),
                    Direction::FromDevice => !access.is_write(),
                    Direction::Bidirectional => false,
                };
                if bad_dir {
                    return Err(fail(AccessProblem::WrongDirection));
                }
                return Ok(Target::Foreign(mem, off));
            }
        }
        if let Some((&start, &dead_len)) = self.dead.range(..=addr).next_back() {
            if addr - start < dead_len {
                return Err(fail(AccessProblem::Freed));
            }
        }
        Err(fail(AccessProblem::Unmapped))
    }

    /// Device read of `out.len()` bytes at `addr`, requested by PCI function `func`.
    pub(crate) fn device_read(
        &self,
        func: u8,
        addr: u64,
        out: &mut [u8],
        access: DeviceAccess,
    ) -> Result<(), Violation> {
        if let Some(Bus(bus)) = &self.bus {
            return bus
                .read(func, addr, out)
                .map_err(|e| bus_fault(e, access, addr, out.len()));
        }
        // Translation checked the range and the direction, so the copy cannot fail.
        match self.translate(addr, out.len(), access)? {
            Target::Region(b, o) | Target::Page(b, o) => b.read(o, out),
            Target::Foreign(m, o) => m.read(o, out),
        };
        Ok(())
    }

    /// Device write of `data` at `addr`, requested by PCI function `func`.
    pub(crate) fn device_write(
        &self,
        func: u8,
        addr: u64,
        data: &[u8],
        access: DeviceAccess,
    ) -> Result<(), Violation> {
        if let Some(Bus(bus)) = &self.bus {
            return bus
                .write(func, addr, data)
                .map_err(|e| bus_fault(e, access, addr, data.len()));
        }
        match self.translate(addr, data.len(), access)? {
            Target::Region(b, o) | Target::Page(b, o) => b.write(o, data),
            Target::Foreign(m, o) => m.write(o, data),
        };
        Ok(())
    }

    /// Frees every live allocation and ends every foreign mapping, without touching the foreign
    /// memory itself (see [`crate::Card::reclaim_all_dma`]).
    pub(crate) fn reclaim_all(&mut self) {
        for (addr, r) in core::mem::take(&mut self.regions) {
            self.bury(addr, r.block.len() as u64);
            r.block.free();
        }
        for (_, p) in core::mem::take(&mut self.pages) {
            if let Some((iova, _)) = p.mapping {
                self.bury(iova, PAGE_SIZE as u64);
            }
            p.block.free();
        }
        self.mappings.clear();
        for (addr, m) in core::mem::take(&mut self.foreign) {
            self.bury(addr, m.len() as u64);
        }
        self.stats.live_regions = 0;
        self.stats.live_pages = 0;
        self.stats.mapped_pages = 0;
        self.stats.live_foreign = 0;
    }
}

/// The violation of an access the host bus did not carry out.
fn bus_fault(e: BusError, access: DeviceAccess, addr: u64, len: usize) -> Violation {
    Violation::DeviceAccess {
        access,
        addr: DmaAddr::new(addr),
        len,
        problem: match e {
            BusError::Refused => AccessProblem::BusFault,
            BusError::MasterOff => AccessProblem::MasterOff,
        },
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;
    use core::ptr::NonNull;

    use super::*;

    const WRITE: DeviceAccess = DeviceAccess::C2hDataWrite;
    const READ: DeviceAccess = DeviceAccess::H2cDataRead;

    fn problem(r: Result<(), Violation>) -> Option<AccessProblem> {
        match r {
            Ok(()) => None,
            Err(Violation::DeviceAccess { problem, .. }) => Some(problem),
            Err(other) => panic!("{other:?}"),
        }
    }

    #[test]
    fn foreign_device_accesses_are_bounded_to_the_mapping() {
        let mut host = [0u8; 64];
        let base = host.as_mut_ptr();
        let ptr = NonNull::new(base.wrapping_add(7)).unwrap();
        let mut st = DmaState::new(DmaConfig::default());
        // SAFETY: `host` outlives the mapping (unmapped below) and is only reached through `base`
        // while it is live.
        let at = unsafe { st.map_foreign(ptr, 40, Direction::Bidirectional) }
            .unwrap()
            .get();
        assert_eq!(at % PAGE_SIZE as u64, ptr.as_ptr() as u64 % PAGE_SIZE as u64);
        assert_eq!(problem(st.device_write(0, at + 36, &[1, 2, 3, 4], WRITE)), None);
        assert_eq!(
            problem(st.device_write(0, at + 37, &[1, 2, 3, 4], WRITE)),
            Some(AccessProblem::OutOfRange)
        );
        // Bytes of the first page before the mapping were never mapped.
        if at % PAGE_SIZE as u64 > 0 {
            assert_eq!(
                problem(st.device_write(0, at - 1, &[0], WRITE)),
                Some(AccessProblem::Unmapped)
            );
        }
        let mut out = [0u8; 5];
        assert_eq!(problem(st.device_read(0, at + 35, &mut out, READ)), None);
        assert_eq!(out, [0, 1, 2, 3, 4]);
        assert_eq!(
            st.unmap_foreign(DmaAddr::new(at), 40, Direction::Bidirectional),
            None
        );
        assert_eq!(
            problem(st.device_read(0, at, &mut out, READ)),
            Some(AccessProblem::Freed)
        );
        assert_eq!(
            problem(st.device_read(0, at + 39, &mut out[..1], READ)),
            Some(AccessProblem::Freed)
        );
        assert_eq!(host[43..47], [1, 2, 3, 4]);
        assert_eq!((st.stats.live_foreign, st.stats.foreign_mapped), (0, 1));
    }

    #[test]
    fn attached_mappings_live_at_the_os_address_and_may_reuse_it() {
        let mut host = [0u8; 64];
        let ptr = NonNull::new(host.as_mut_ptr()).unwrap();
        let mut st = DmaState::new(DmaConfig::default());
        let at = DmaAddr::new(0x4321_0100);
        // SAFETY: `host` outlives the mappings (detached below) and is only reached through them.
        let attach =
            |st: &mut DmaState, len| unsafe { st.attach_foreign(at, ptr, len, Direction::FromDevice) };
        assert_eq!(attach(&mut st, 64), Ok(()));
        assert_eq!(problem(st.device_write(0, at.get() + 60, &[9; 4], WRITE)), None);
        assert_eq!(
            problem(st.device_write(0, at.get() + 61, &[9; 4], WRITE)),
            Some(AccessProblem::OutOfRange)
        );
        assert_eq!(
            problem(st.device_read(0, at.get(), &mut [0; 4], READ)),
            Some(AccessProblem::WrongDirection)
        );
        // The same or an overlapping range cannot be attached twice, nor an empty one.
        assert!(matches!(
            attach(&mut st, 8),
            Err(Violation::HostDma {
                problem: HostDmaProblem::DoubleMap,
                ..
            })
        ));
        assert!(attach(&mut st, 0).is_err());
        assert_eq!(st.unmap_foreign(at, 64, Direction::FromDevice), None);
        assert_eq!(
            problem(st.device_write(0, at.get(), &[1], WRITE)),
            Some(AccessProblem::Freed)
        );
        // The OS reuses its addresses.
        assert_eq!(attach(&mut st, 32), Ok(()));
        assert_eq!(problem(st.device_write(0, at.get(), &[1], WRITE)), None);
        assert_eq!(st.unmap_foreign(at, 32, Direction::FromDevice), None);
        assert_eq!(host[60..64], [9; 4]);
        assert_eq!(host[0], 1);
    }

    #[test]
    fn the_record_of_dead_ranges_stays_small() {
        let mut st = DmaState::new(DmaConfig::default());
        let fake = NonNull::new(core::ptr::without_provenance_mut(0x9000)).unwrap();
        let mut addrs = Vec::new();
        for _ in 0..1000 {
            // SAFETY: nothing accesses these mappings.
            addrs.push(unsafe { st.map_foreign(fake, 100, Direction::ToDevice) }.unwrap());
        }
        // Freed out of order: odd ones first, then even ones.
        for a in addrs.iter().skip(1).step_by(2).chain(addrs.iter().step_by(2)) {
            assert_eq!(st.unmap_foreign(*a, 100, Direction::ToDevice), None);
        }
        assert_eq!(st.dead.len(), 1);
        assert_eq!(
            problem(st.device_read(0, addrs[500].get(), &mut [0; 1], READ)),
            Some(AccessProblem::Freed)
        );
    }

    #[test]
    fn foreign_addresses_take_whole_pages_and_stay_clear_of_other_ranges() {
        let mut st = DmaState::new(DmaConfig::default());
        // The pointers are never dereferenced: nothing accesses the mappings.
        let fake = |addr: usize| NonNull::new(core::ptr::without_provenance_mut(addr)).unwrap();
        let map = |st: &mut DmaState, addr: usize, len: usize| {
            // SAFETY: no device access is made to these mappings, so the bytes are never touched.
            unsafe { st.map_foreign(fake(addr), len, Direction::ToDevice) }.map(DmaAddr::get)
        };
        assert_eq!(map(&mut st, 0x5000, 1), Ok(FOREIGN_MAP_BASE));
        assert_eq!(map(&mut st, 0x5FFF, 2), Ok(FOREIGN_MAP_BASE + 0x1FFF));
        assert_eq!(map(&mut st, 0x6001, 0x2000), Ok(FOREIGN_MAP_BASE + 0x3001));
        assert_eq!(map(&mut st, 0x7000, 4), Ok(FOREIGN_MAP_BASE + 0x6000));
        assert_eq!(map(&mut st, 0x7000, 0), Err(onic_hal::DmaError::InvalidRequest));
        assert_eq!(
            map(&mut st, usize::MAX - 2, 4),
            Err(onic_hal::DmaError::InvalidRequest)
        );
        assert_eq!(st.stats.live_foreign, 4);
        st.reclaim_all();
        assert_eq!((st.stats.live_foreign, st.stats.foreign_mapped), (0, 4));
        assert_eq!(
            problem(st.device_read(0, FOREIGN_MAP_BASE + 0x3001, &mut [0; 4], READ)),
            Some(AccessProblem::Freed)
        );
        // Far from every other range, even after a very long run.
        const { assert!(FOREIGN_MAP_BASE > COHERENT_HIGH_BASE + (1 << 40)) };
    }
}
