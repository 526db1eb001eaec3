//! A memory that declares its syncs no-ops (`DmaMemory::SYNC_IS_NOOP`) is never asked for one by
//! the page pool, on any recycling path. Lives outside the library because declaring the flag
//! means implementing the `unsafe` HAL trait, which `onic-core` itself never does.

use onic_core::{PageBurst, PagePool, PageProvider, PoolConfig, RecycleRing};
use onic_hal::{Direction, DmaMemory, DmaPage};
use onic_sim::{Card, CardConfig};

fn cfg() -> PoolConfig {
    PoolConfig {
        bulk: 4,
        ..PoolConfig::rx(Direction::FromDevice, 3520)
    }
}

/// Every one of the pool's `n` pages is back in it: the census adds up (no page lost or counted
/// twice) with all of them in the pool.
fn all_in_pool<D: DmaMemory, const C: usize>(pool: &PagePool<'_, D, C>, n: u64) {
    let in_pool = pool.page_counts(0, 0, 0, 0).map(|c| c.in_pool);
    assert_eq!(in_pool, Some(n), "census of the pool's {n} pages");
    assert_eq!(pool.stats().live_pages(), n);
}

/// The model's memory, declared to need no syncs. The model still counts every sync it is
/// asked for, which is how a test sees that the pool asks for none.
struct SyncFree<'c>(onic_sim::SimDma<'c>);

// SAFETY: forwards every call unchanged to the model, which upholds the contract. The flag is
// the test's claim, not the model's: the model's syncs only count and check, and the pages
// involved are the model's plain host memory, so a skipped sync changes no byte.
unsafe impl DmaMemory for SyncFree<'_> {
    const SYNC_IS_NOOP: bool = true;

    fn alloc_coherent(
        &self,
        len: usize,
        limit: onic_hal::dma::AddrLimit,
    ) -> Result<onic_hal::dma::RawRegion, onic_hal::DmaError> {
        self.0.alloc_coherent(len, limit)
    }
    unsafe fn free_coherent(&self, region: onic_hal::dma::RawRegion) {
        // SAFETY: the caller upholds the same contract for the model.
        unsafe { self.0.free_coherent(region) };
    }
    fn alloc_page(&self) -> Result<onic_hal::PageMem, onic_hal::DmaError> {
        self.0.alloc_page()
    }
    fn free_page(&self, page: onic_hal::PageMem) {
        self.0.free_page(page);
    }
    fn map_page(
        &self,
        page: onic_hal::PageMem,
        dir: Direction,
    ) -> Result<DmaPage, (onic_hal::PageMem, onic_hal::DmaError)> {
        self.0.map_page(page, dir)
    }
    unsafe fn unmap_page(&self, page: DmaPage, dir: Direction) -> onic_hal::PageMem {
        // SAFETY: the caller upholds the same contract for the model.
        unsafe { self.0.unmap_page(page, dir) }
    }
    fn sync_for_cpu(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction) {
        self.0.sync_for_cpu(page, offset, len, dir);
    }
    fn sync_for_device(&self, page: &DmaPage, offset: usize, len: usize, dir: Direction) {
        self.0.sync_for_device(page, offset, len, dir);
    }
}

#[test]
fn memory_without_syncs_is_never_synced_on_recycling() {
    let card = Card::new(CardConfig::default());
    let ring = RecycleRing::new();
    let mut pool: PagePool<'_, _, 4> = PagePool::new(SyncFree(card.dma()), cfg(), Some(&ring));
    let mut burst: PageBurst<4> = PageBurst::new();
    assert_eq!(pool.alloc_bulk(&mut burst), 4);
    pool.recycle_bulk(&mut burst, 100);
    let p = pool.alloc().unwrap();
    pool.recycle(p, 100);
    let p = pool.alloc().unwrap();
    let p = pool.reuse(p, 100).unwrap();
    ring.recycle(p, 100).unwrap();
    assert_eq!(pool.alloc_bulk(&mut burst), 4);
    pool.recycle_bulk(&mut burst, 100);
    assert_eq!(card.dma_stats().syncs_for_device, 0);
    all_in_pool(&pool, 4);
    drop(pool);
    assert_eq!(card.dma_stats().live_pages, 0);
}
