//! The DMA memory model: addresses, limits, misuse detection, leak accounting.

mod common;

use common::*;
use onic_hal::{AddrLimit, CoherentRegion, Direction, DmaError, DmaMemory, PAGE_SIZE};
use onic_sim::{dma, HostDmaProblem, Violation};

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
    dma.free_page(dma.unmap_page(p, Direction::Bidirectional));
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
    let mem = dma.unmap_page(p, Direction::ToDevice);
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
