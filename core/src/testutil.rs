//! Shared fixtures of the unit tests: a model card with one function brought up.

use std::vec::Vec;

use onic_hal::{DmaAddr, DmaPage};
use onic_sim::{Card, CardConfig, QdmaWindow, ShellWindow};

use crate::config::DeviceConfig;
use crate::device::Device;
use crate::queue::pool::{PageProvider, PoolPage};

/// A card whose PF0 is brought up by the driver with `queues` queues.
pub(crate) fn card() -> Card {
    Card::new(CardConfig::default())
}

/// The device of a model card's function.
pub(crate) type SimDevice<'c> = Device<QdmaWindow<'c>, ShellWindow<'c>>;

/// Brings up PF0 with `queues` queue pairs.
pub(crate) fn device(card: &Card, queues: u16) -> SimDevice<'_> {
    let cfg = DeviceConfig::new(0, queues).unwrap();
    let (dev, _) = Device::init(card.qdma(0), card.shell(), &mut card.delay(), cfg).unwrap();
    assert_eq!(card.violations(), []);
    dev
}

/// A pool page that claims the device address a test gave it (a provider that lies about where
/// its pages are, or pages at the top of the address space, which no model can map).
#[derive(Debug)]
pub(crate) struct Placed {
    pub(crate) page: DmaPage,
    pub(crate) addr: DmaAddr,
}

impl PoolPage for Placed {
    fn dma_addr(&self) -> DmaAddr {
        self.addr
    }

    fn bytes(&self) -> &[u8] {
        self.page.bytes()
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        self.page.bytes_mut()
    }
}

/// A provider over `pool` whose pages are where the pool mapped them, except allocation number
/// `n` (counted from 0) of each `(n, addr)` in `lies`, which claims `addr`; it records the
/// claimed addresses of the pages released to it.
pub(crate) struct Placing<P> {
    pub(crate) pool: P,
    pub(crate) allocs: usize,
    pub(crate) lies: Vec<(usize, u64)>,
    pub(crate) released: Vec<u64>,
    /// Set: the provider says it batches, and records each refill as `[empty slots it was
    /// told of, pages it handed out before the refill's end]`.
    pub(crate) refills: Option<Vec<[usize; 2]>>,
    in_refill: bool,
}

impl<P> Placing<P> {
    /// A provider over `pool` that does not lie yet.
    pub(crate) fn new(pool: P) -> Self {
        Self {
            pool,
            allocs: 0,
            lies: Vec::new(),
            released: Vec::new(),
            refills: None,
            in_refill: false,
        }
    }
}

impl<P: PageProvider<Page = DmaPage>> PageProvider for Placing<P> {
    type Page = Placed;

    fn alloc_page(&mut self) -> Option<Placed> {
        let page = self.pool.alloc_page()?;
        let n = self.allocs;
        self.allocs += 1;
        if let (true, Some(last)) = (self.in_refill, self.refills.as_mut().and_then(|r| r.last_mut())) {
            last[1] += 1;
        }
        let addr = match self.lies.iter().find(|l| l.0 == n) {
            Some(&(_, a)) => DmaAddr::new(a),
            None => page.dma_addr(),
        };
        Some(Placed { page, addr })
    }

    fn recycle_direct(&mut self, p: Placed, dirty_len: usize) {
        self.pool.recycle_direct(p.page, dirty_len);
    }

    fn release_page(&mut self, p: Placed) {
        self.released.push(p.addr.get());
        self.pool.release_page(p.page);
    }

    fn sync_for_cpu(&self, p: &Placed, offset: usize, len: usize) {
        self.pool.sync_for_cpu(&p.page, offset, len);
    }

    fn sync_for_device(&self, p: &Placed, offset: usize, len: usize) {
        self.pool.sync_for_device(&p.page, offset, len);
    }

    fn batches(&self) -> bool {
        self.refills.is_some()
    }

    fn refill_begin(&mut self, empty: usize) {
        assert!(!self.in_refill, "a refill began inside another");
        if let Some(r) = self.refills.as_mut() {
            r.push([empty, 0]);
            self.in_refill = true;
        }
    }

    fn refill_end(&mut self) {
        assert!(self.in_refill, "a refill ended that never began");
        self.in_refill = false;
    }
}
