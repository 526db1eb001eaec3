//! The DMA memory model: addresses, limits, misuse detection, leak accounting, foreign mappings.

mod common;

use core::ptr::NonNull;

use common::*;
use onic_hal::{AddrLimit, CoherentRegion, Direction, DmaAddr, DmaError, DmaMemory, PAGE_SIZE};
use onic_sim::{dma, AccessProblem, Card, DeviceAccess, HostDmaProblem, SimDma, Violation, Wire};

#[test]
fn coherent_regions_are_zeroed_aligned_and_below_4g() {
    let card = card();
    let r = CoherentRegion::new(card.dma(), 8192, AddrLimit::Below4G).unwrap();
    assert!(r.dma_addr().is_aligned(4096));
    assert!(r.dma_addr().fits_below_4g(8192));
    assert!(r.dma_addr().get() >= dma::COHERENT_LOW_BASE);
    assert_eq!(r.read_u64(8184), 0);
    let any = CoherentRegion::new(card.dma(), 100, AddrLimit::Any).unwrap();
    assert!(any.dma_addr().get() >= dma::COHERENT_HIGH_BASE);
    assert_eq!(card.dma_stats().live_regions, 2);
    drop(r);
    drop(any);
    assert_eq!(card.dma_stats().live_regions, 0);
    assert_eq!(
        card.dma().alloc_coherent(0, AddrLimit::Any).err(),
        Some(DmaError::InvalidRequest)
    );
}

#[test]
fn below_4g_space_runs_out() {
    let card = card_with(|c| c.dma.below_4g_bytes = 3 * PAGE_SIZE as u64);
    let a = CoherentRegion::new(card.dma(), 2 * PAGE_SIZE, AddrLimit::Below4G).unwrap();
    assert!(CoherentRegion::new(card.dma(), 2 * PAGE_SIZE, AddrLimit::Below4G).is_err());
    // Addresses are never reused, so freeing does not give the space back.
    drop(a);
    let b = CoherentRegion::new(card.dma(), PAGE_SIZE, AddrLimit::Below4G).unwrap();
    assert!(CoherentRegion::new(card.dma(), PAGE_SIZE, AddrLimit::Below4G).is_err());
    drop(b);
}

#[test]
fn pages_are_poisoned_and_mapped_at_fake_addresses() {
    let card = card();
    let dma = card.dma();
    let page = dma.alloc_page().unwrap();
    let p = dma.map_page(page, Direction::Bidirectional).unwrap();
    assert!(p.dma_addr().get() >= dma::PAGE_MAP_BASE);
    assert_ne!(p.dma_addr().get(), p.mem().cpu_ptr().as_ptr() as u64);
    assert!(p.bytes().iter().all(|&b| b == 0x5A));
    dma.sync_for_cpu(&p, 0, PAGE_SIZE, Direction::Bidirectional);
    dma.sync_for_device(&p, 256, 1514, Direction::Bidirectional);
    let stats = card.dma_stats();
    assert_eq!(
        (
            stats.live_pages,
            stats.mapped_pages,
            stats.syncs_for_cpu,
            stats.syncs_for_device
        ),
        (1, 1, 1, 1)
    );
    dma.free_page(p.unmap(&dma, Direction::Bidirectional));
    assert_eq!(card.dma_stats().live_pages, 0);
    assert_eq!(card.violations(), []);
}

#[test]
fn host_side_misuse_is_reported() {
    let card = card();
    let dma = card.dma();
    let p = dma
        .map_page(dma.alloc_page().unwrap(), Direction::FromDevice)
        .unwrap();
    // Sync past the page, sync with the wrong direction.
    dma.sync_for_cpu(&p, 4000, 200, Direction::FromDevice);
    dma.sync_for_device(&p, 0, 10, Direction::ToDevice);
    // Unmap with another direction (still unmaps).
    let mem = p.unmap(&dma, Direction::ToDevice);
    // Map it again, then try to free the page while mapped through a split token.
    let p = dma.map_page(mem, Direction::ToDevice).unwrap();
    let (mem, _) = p.into_parts();
    dma.free_page(mem);
    let problems: Vec<HostDmaProblem> = card
        .take_violations()
        .into_iter()
        .map(|v| match v {
            Violation::HostDma { problem, .. } => problem,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        problems,
        [
            HostDmaProblem::SyncOutOfRange,
            HostDmaProblem::SyncDirection,
            HostDmaProblem::DirectionMismatch,
            HostDmaProblem::FreeWhileMapped,
        ]
    );
    assert_eq!(card.dma_stats().live_pages, 0);
}

#[test]
fn no_leaks_after_a_full_queue_lifecycle() {
    let card = ready_card();
    {
        let tx = TxQueue::new(&card, 0, 0, SMALL_RING);
        let rx = RxQueue::new(&card, 0, 0);
        assert_eq!(card.dma_stats().live_regions, 3);
        assert_eq!(card.dma_stats().live_pages, 63);
        tx.free();
        rx.free();
    }
    let s = card.dma_stats();
    assert_eq!((s.live_regions, s.live_pages, s.mapped_pages), (0, 0, 0));
    assert_eq!(s.regions_allocated, 3);
}

#[test]
fn leaked_memory_is_visible_and_reclaimable() {
    let card = card();
    let dma = card.dma();
    let page = dma
        .map_page(dma.alloc_page().unwrap(), Direction::ToDevice)
        .unwrap();
    let region = dma.alloc_coherent(4096, AddrLimit::Below4G).unwrap();
    // The driver "loses" its tokens (they have no destructor).
    let _lost = (page, region);
    let s = card.dma_stats();
    assert_eq!((s.live_regions, s.live_pages), (1, 1));
    // SAFETY: the tokens were forgotten above and are never used again.
    unsafe { card.reclaim_all_dma() };
    assert_eq!(card.dma_stats().live_pages, 0);
}

// ---------------------------------------------------------------------------------------------
// Foreign mappings: host memory the model did not allocate (an OS's packet buffers).

/// A host buffer the model does not own. After `new` the test touches it only through `base`
/// (raw pointers), as a driver would touch memory it has mapped for a device.
struct HostBuf {
    _owner: Vec<u8>,
    base: *mut u8,
    len: usize,
}

impl HostBuf {
    fn new(len: usize, fill: impl FnOnce(&mut [u8])) -> Self {
        let mut owner = vec![0xEEu8; len];
        fill(&mut owner);
        let base = owner.as_mut_ptr();
        Self {
            _owner: owner,
            base,
            len,
        }
    }

    fn ptr(&self, off: usize) -> NonNull<u8> {
        assert!(off < self.len);
        NonNull::new(self.base.wrapping_add(off)).unwrap()
    }

    /// Maps `len` bytes at `off`. Each test ends every mapping (unmap or reclaim) before the
    /// buffer goes away.
    fn map(&self, dma: SimDma<'_>, off: usize, len: usize, dir: Direction) -> DmaAddr {
        assert!(off + len <= self.len);
        // SAFETY: the bytes are initialized, stay allocated until the test unmaps or reclaims
        // the mapping, are reached through `base` only, and nothing else runs meanwhile.
        unsafe { dma.map_foreign(self.ptr(off), len, dir) }.unwrap()
    }

    fn bytes(&self, off: usize, len: usize) -> Vec<u8> {
        assert!(off + len <= self.len);
        let mut out = vec![0u8; len];
        // SAFETY: the range is inside the buffer, which is alive; `out` is a separate buffer and
        // no model call runs during the copy.
        unsafe { core::ptr::copy_nonoverlapping(self.base.add(off), out.as_mut_ptr(), len) };
        out
    }
}

/// Every received frame goes to function 0's queue 0, which completes each packet at once.
fn steer_all_to_queue_0(card: &Card) -> RxQueue<'_> {
    steer_function_0_to(card, 0);
    RxQueue::with(
        card,
        0,
        0,
        RxOpts {
            trig_mode: 1,
            pages: Some(0),
            ..RxOpts::default()
        },
    )
}

fn device_problems(card: &Card) -> Vec<(DeviceAccess, DmaAddr, usize, AccessProblem)> {
    card.take_violations()
        .into_iter()
        .map(|v| match v {
            Violation::DeviceAccess {
                access,
                addr,
                len,
                problem,
            } => (access, addr, len, problem),
            other => panic!("{other:?}"),
        })
        .collect()
}

fn host_problems(card: &Card) -> Vec<HostDmaProblem> {
    card.take_violations()
        .into_iter()
        .map(|v| match v {
            Violation::HostDma { problem, .. } => problem,
            other => panic!("{other:?}"),
        })
        .collect()
}

#[test]
fn foreign_buffers_at_odd_offsets_carry_rx_and_tx_frames() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    let dma = card.dma();
    let out = frame(UNICAST, 0x0800, 90, 7);
    let buf = HostBuf::new(3 * PAGE_SIZE, |b| b[0x1235..0x1235 + 90].copy_from_slice(&out));

    // RX: the C2H engine writes a frame into a FromDevice mapping 0x123 bytes into the buffer.
    let rx_at = buf.map(dma, 0x123, 200, Direction::FromDevice);
    assert!(rx_at.get() >= dma::FOREIGN_MAP_BASE);
    assert_eq!(
        rx_at.get() % PAGE_SIZE as u64,
        buf.ptr(0x123).as_ptr() as u64 % PAGE_SIZE as u64
    );
    let rx = steer_all_to_queue_0(&card);
    rx.desc.write_u64(0, rx_at.get());
    let inn = frame(UNICAST, 0x0800, 100, 3);
    card.inject(0, &inn);
    card.run_until_idle();
    assert_eq!(rx.entry(0).len, 100);
    dma.sync_foreign(rx_at, 0, 100, Direction::FromDevice, true);
    assert_eq!(buf.bytes(0x123, 100), inn);
    // Bytes around the frame are untouched.
    assert_eq!(buf.bytes(0x122, 1), [0xEE]);
    assert_eq!(buf.bytes(0x123 + 100, 100), [0xEE; 100]);

    // TX: the H2C engine reads a frame from a ToDevice mapping that crosses a page boundary.
    let tx_at = buf.map(dma, 0x1235, 90, Direction::ToDevice);
    assert_eq!(
        tx_at.get() % PAGE_SIZE as u64,
        buf.base.wrapping_add(0x1235) as u64 % PAGE_SIZE as u64
    );
    dma.sync_foreign(tx_at, 0, 90, Direction::ToDevice, false);
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    tx.post_raw(tx_at.get(), 90, 90);
    tx.doorbell();
    card.run_until_idle();
    assert_eq!(card.take_egress(0), [out]);

    assert_eq!(card.violations(), []);
    let s = card.dma_stats();
    assert_eq!((s.live_foreign, s.foreign_mapped), (2, 2));
    assert_eq!((s.syncs_for_cpu, s.syncs_for_device), (1, 1));
    dma.unmap_foreign(rx_at, 200, Direction::FromDevice);
    dma.unmap_foreign(tx_at, 90, Direction::ToDevice);
    assert_eq!(card.violations(), []);
    assert_eq!(card.dma_stats().live_foreign, 0);
    rx.free();
    tx.free();
}

#[test]
fn foreign_access_crossing_the_end_is_out_of_range() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    let dma = card.dma();
    let f = frame(UNICAST, 0x0800, 60, 1);
    let buf = HostBuf::new(256, |b| b[5..65].copy_from_slice(&f));
    let at = buf.map(dma, 5, 64, Direction::ToDevice);
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    // The first descriptor ends exactly at the end of the mapping; the second one byte past it.
    tx.post_raw(at.get() + 4, 60, 60);
    tx.post_raw(at.get() + 5, 60, 60);
    tx.doorbell();
    card.run_until_idle();
    assert_eq!(
        device_problems(&card),
        [(
            DeviceAccess::H2cDataRead,
            DmaAddr::new(at.get() + 5),
            60,
            AccessProblem::OutOfRange
        )]
    );
    assert_eq!(card.take_egress(0).len(), 1);
    dma.unmap_foreign(at, 64, Direction::ToDevice);
    tx.free();
}

#[test]
fn foreign_mapping_direction_is_enforced() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    let dma = card.dma();
    let buf = HostBuf::new(2 * PAGE_SIZE, |_| {});
    // The device may not write a ToDevice mapping...
    let to_dev = buf.map(dma, 1, 128, Direction::ToDevice);
    let rx = steer_all_to_queue_0(&card);
    rx.desc.write_u64(0, to_dev.get());
    card.inject(0, &frame(UNICAST, 0x0800, 64, 0));
    card.run_until_idle();
    assert_eq!(
        device_problems(&card),
        [(
            DeviceAccess::C2hDataWrite,
            to_dev,
            64,
            AccessProblem::WrongDirection
        )]
    );
    assert_eq!(buf.bytes(1, 128), [0xEE; 128]);
    // ...nor read a FromDevice one.
    let from_dev = buf.map(dma, PAGE_SIZE + 3, 128, Direction::FromDevice);
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    tx.post_raw(from_dev.get(), 60, 60);
    tx.doorbell();
    card.run_until_idle();
    assert_eq!(
        device_problems(&card),
        [(
            DeviceAccess::H2cDataRead,
            from_dev,
            60,
            AccessProblem::WrongDirection
        )]
    );
    assert!(card.take_egress(0).is_empty());
    // A Bidirectional mapping allows both.
    let both = buf.map(dma, 700, 128, Direction::Bidirectional);
    rx.desc.write_u64(8, both.get());
    let f = frame(UNICAST, 0x0800, 64, 9);
    card.inject(0, &f);
    card.run_until_idle();
    tx.post_raw(both.get(), 64, 64);
    tx.doorbell();
    card.run_until_idle();
    assert_eq!(card.violations(), []);
    assert_eq!(card.take_egress(0), [f]);
    dma.unmap_foreign(to_dev, 128, Direction::ToDevice);
    dma.unmap_foreign(from_dev, 128, Direction::FromDevice);
    dma.unmap_foreign(both, 128, Direction::Bidirectional);
    assert_eq!(card.violations(), []);
    rx.free();
    tx.free();
}

#[test]
fn unmapped_foreign_address_is_freed_and_never_reused() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    let dma = card.dma();
    let buf = HostBuf::new(3 * PAGE_SIZE, |_| {});
    let first = buf.map(dma, 0x10, 100, Direction::ToDevice);
    dma.unmap_foreign(first, 100, Direction::ToDevice);
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    tx.post_raw(first.get(), 60, 60);
    tx.doorbell();
    card.run_until_idle();
    assert_eq!(
        device_problems(&card),
        [(DeviceAccess::H2cDataRead, first, 60, AccessProblem::Freed)]
    );
    // The same bytes mapped again get a new address; a mapping takes every page it spans.
    let page = |a: DmaAddr| a.get() / PAGE_SIZE as u64;
    let in_page = |off: usize| buf.ptr(off).as_ptr() as u64 % PAGE_SIZE as u64;
    let second = buf.map(dma, 0x10, 100, Direction::ToDevice);
    let wide = buf.map(dma, 0x20, 2 * PAGE_SIZE, Direction::ToDevice);
    let third = buf.map(dma, 0x10, 100, Direction::ToDevice);
    let spans = |off: usize, len: usize| (in_page(off) as usize + len).div_ceil(PAGE_SIZE) as u64;
    assert_eq!(page(second), page(first) + spans(0x10, 100));
    assert_eq!(page(wide), page(second) + spans(0x10, 100));
    assert_eq!(page(third), page(wide) + spans(0x20, 2 * PAGE_SIZE));
    for (a, off) in [(second, 0x10), (wide, 0x20), (third, 0x10)] {
        assert_eq!(a.get() % PAGE_SIZE as u64, in_page(off));
    }
    // A zero-length mapping is refused and takes nothing.
    // SAFETY: nothing is mapped (the call fails).
    let zero = unsafe { dma.map_foreign(buf.ptr(0), 0, Direction::ToDevice) };
    assert_eq!(zero, Err(DmaError::InvalidRequest));
    let s = card.dma_stats();
    assert_eq!((s.live_foreign, s.foreign_mapped), (3, 4));
    for a in [second, third] {
        dma.unmap_foreign(a, 100, Direction::ToDevice);
    }
    dma.unmap_foreign(wide, 2 * PAGE_SIZE, Direction::ToDevice);
    assert_eq!(card.violations(), []);
    assert_eq!(card.dma_stats().live_foreign, 0);
    tx.free();
}

#[test]
fn foreign_unmap_misuse_is_reported_and_changes_nothing() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    let dma = card.dma();
    let f = frame(UNICAST, 0x0800, 60, 4);
    let buf = HostBuf::new(128, |b| b[3..63].copy_from_slice(&f));
    let at = buf.map(dma, 3, 60, Direction::ToDevice);
    dma.unmap_foreign(at, 61, Direction::ToDevice);
    dma.unmap_foreign(at, 60, Direction::Bidirectional);
    dma.unmap_foreign(DmaAddr::new(at.get() + 1), 60, Direction::ToDevice);
    assert_eq!(
        host_problems(&card),
        [
            HostDmaProblem::LengthMismatch,
            HostDmaProblem::DirectionMismatch,
            HostDmaProblem::NotMapped,
        ]
    );
    // Still mapped: the device reads it.
    assert_eq!(card.dma_stats().live_foreign, 1);
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    tx.post_raw(at.get(), 60, 60);
    tx.doorbell();
    card.run_until_idle();
    assert_eq!(card.take_egress(0), [f]);
    dma.unmap_foreign(at, 60, Direction::ToDevice);
    assert_eq!(card.violations(), []);
    // Unmapping twice.
    dma.unmap_foreign(at, 60, Direction::ToDevice);
    assert_eq!(host_problems(&card), [HostDmaProblem::NotMapped]);
    assert_eq!(card.dma_stats().live_foreign, 0);
    tx.free();
}

#[test]
fn foreign_syncs_are_counted_and_checked() {
    let card = card();
    let dma = card.dma();
    let buf = HostBuf::new(512, |_| {});
    let rx = buf.map(dma, 9, 300, Direction::FromDevice);
    let both = buf.map(dma, 400, 100, Direction::Bidirectional);
    dma.sync_foreign(rx, 0, 300, Direction::FromDevice, true);
    dma.sync_foreign(rx, 100, 200, Direction::FromDevice, false);
    dma.sync_foreign(both, 0, 10, Direction::ToDevice, false);
    dma.sync_foreign(both, 90, 10, Direction::FromDevice, true);
    assert_eq!(card.violations(), []);
    dma.sync_foreign(rx, 100, 201, Direction::FromDevice, true);
    dma.sync_foreign(rx, usize::MAX, 2, Direction::FromDevice, true);
    dma.sync_foreign(rx, 0, 4, Direction::ToDevice, false);
    dma.sync_foreign(DmaAddr::new(rx.get() + 8), 0, 4, Direction::FromDevice, true);
    assert_eq!(
        host_problems(&card),
        [
            HostDmaProblem::SyncOutOfRange,
            HostDmaProblem::SyncOutOfRange,
            HostDmaProblem::SyncDirection,
            HostDmaProblem::NotMapped,
        ]
    );
    dma.unmap_foreign(rx, 300, Direction::FromDevice);
    dma.sync_foreign(rx, 0, 4, Direction::FromDevice, true);
    assert_eq!(host_problems(&card), [HostDmaProblem::NotMapped]);
    let s = card.dma_stats();
    assert_eq!((s.syncs_for_cpu, s.syncs_for_device), (6, 3));
    dma.unmap_foreign(both, 100, Direction::Bidirectional);
    assert_eq!(card.violations(), []);
}

#[test]
fn leaked_foreign_mapping_is_visible_and_reclaimed_without_freeing() {
    let card = ready_card_with(|c| c.wire = Wire::Open);
    let dma = card.dma();
    let buf = HostBuf::new(64, |b| b.fill(0x11));
    let at = buf.map(dma, 0, 64, Direction::ToDevice);
    let s = card.dma_stats();
    assert_eq!((s.live_foreign, s.foreign_mapped), (1, 1));
    // SAFETY: no DMA token of this card exists; the foreign buffer is not the model's and stays
    // usable.
    unsafe { card.reclaim_all_dma() };
    let s = card.dma_stats();
    assert_eq!((s.live_foreign, s.foreign_mapped), (0, 1));
    // The address is dead now: the device sees freed memory, the host bytes are intact.
    let mut tx = TxQueue::new(&card, 0, 0, SMALL_RING);
    tx.post_raw(at.get(), 60, 60);
    tx.doorbell();
    card.run_until_idle();
    assert_eq!(
        device_problems(&card),
        [(DeviceAccess::H2cDataRead, at, 60, AccessProblem::Freed)]
    );
    dma.unmap_foreign(at, 64, Direction::ToDevice);
    assert_eq!(host_problems(&card), [HostDmaProblem::NotMapped]);
    assert_eq!(buf.bytes(0, 64), [0x11; 64]);
    tx.free();
}
