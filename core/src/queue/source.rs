//! A queue pair's buffer source chosen when the pair is built: the page pool or an XSK pool
//! (frames of an application's UMEM), behind the one [`PageProvider`] seam.
//!
//! A [`QueuePair`](crate::queue::pair::QueuePair) names its provider's type, so a host that
//! runs some queues on pages and others on UMEM frames, and switches a queue from one to the
//! other, gives every pair the same provider type: [`BufSource`], which is one or the other for
//! the pair's whole life. Its buffers are [`SourceBuf`]s, a page or a UMEM frame. The RX and TX
//! queues see one provider and one buffer type; no queue code knows which it is. Switching a
//! queue's source is building its pair again (the old pair torn down first, so that every buffer
//! went back to its own provider).
//!
//! # Ownership
//!
//! A buffer goes back to the provider it came from: a pair never hands its buffers to another
//! pair's provider, and a [`BufSource`] never changes its kind. A buffer of the other kind given
//! to a [`BufSource`] anyway (a host's bug) has no provider here to go back to: it is counted in
//! [`BufSource::foreign`] and parked, never handed out again, so it cannot be held twice. The
//! host takes parked buffers back with [`BufSource::take_foreign`] (at the latest when it tears
//! the pair down) and returns each to its own provider. Only when more than [`FOREIGN_PARK`] are
//! parked at once is one dropped (counted in [`BufSource::lost`]; for a HAL page that leaks it,
//! as a torn-down queue's unreclaimable pages are leaked).

use crate::queue::pool::{PageProvider, PoolPage};
use heapless::Vec;
use onic_hal::DmaAddr;

/// How many buffers of the other kind a [`BufSource`] holds for its host to take back.
pub const FOREIGN_PARK: usize = 4;

/// Which source a [`BufSource`] is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum SourceKind {
    /// The page pool.
    #[default]
    Pages,
    /// An XSK pool: frames of an application's UMEM.
    Xsk,
}

/// A buffer of a [`BufSource`]: a page of the page pool, or a frame of an XSK pool.
#[derive(Debug)]
pub enum SourceBuf<P, X> {
    /// A page pool's page.
    Page(P),
    /// A UMEM frame.
    Xsk(X),
}

impl<P, X> SourceBuf<P, X> {
    /// The source this buffer came from.
    #[must_use]
    pub const fn kind(&self) -> SourceKind {
        match self {
            Self::Page(_) => SourceKind::Pages,
            Self::Xsk(_) => SourceKind::Xsk,
        }
    }
}

impl<P: PoolPage, X: PoolPage> PoolPage for SourceBuf<P, X> {
    #[inline]
    fn dma_addr(&self) -> DmaAddr {
        match self {
            Self::Page(p) => p.dma_addr(),
            Self::Xsk(x) => x.dma_addr(),
        }
    }

    #[inline]
    fn bytes(&self) -> &[u8] {
        match self {
            Self::Page(p) => p.bytes(),
            Self::Xsk(x) => x.bytes(),
        }
    }

    #[inline]
    fn bytes_mut(&mut self) -> &mut [u8] {
        match self {
            Self::Page(p) => p.bytes_mut(),
            Self::Xsk(x) => x.bytes_mut(),
        }
    }
}

/// The provider of a pair whose buffers come from a page pool `P` or an XSK pool `X`, fixed
/// when the pair is built (module docs).
#[derive(Debug)]
pub struct BufSource<P: PageProvider, X: PageProvider> {
    inner: Inner<P, X>,
    strays: Strays<SourceBuf<P::Page, X::Page>>,
}

/// The buffers of the other kind a [`BufSource`] was given, and their counts.
#[derive(Debug)]
struct Strays<B> {
    foreign: u64,
    parked: Vec<B, FOREIGN_PARK>,
    lost: u64,
}

impl<B> Strays<B> {
    const fn new() -> Self {
        Self {
            foreign: 0,
            parked: Vec::new(),
            lost: 0,
        }
    }

    /// Parks a buffer of the other kind (module docs).
    fn park(&mut self, buf: B) {
        self.foreign += 1;
        if self.parked.push(buf).is_err() {
            self.lost += 1;
        }
    }
}

#[derive(Debug)]
enum Inner<P, X> {
    Pages(P),
    Xsk(X),
}

impl<P: PageProvider, X: PageProvider> BufSource<P, X> {
    /// A source of pages from `pool`.
    pub const fn pages(pool: P) -> Self {
        Self {
            inner: Inner::Pages(pool),
            strays: Strays::new(),
        }
    }

    /// A source of UMEM frames from `pool`.
    pub const fn xsk(pool: X) -> Self {
        Self {
            inner: Inner::Xsk(pool),
            strays: Strays::new(),
        }
    }

    /// Which source this is.
    #[must_use]
    pub const fn kind(&self) -> SourceKind {
        match self.inner {
            Inner::Pages(_) => SourceKind::Pages,
            Inner::Xsk(_) => SourceKind::Xsk,
        }
    }

    /// The page pool, if this is one.
    #[must_use]
    pub const fn as_pages(&self) -> Option<&P> {
        match &self.inner {
            Inner::Pages(p) => Some(p),
            Inner::Xsk(_) => None,
        }
    }

    /// The page pool, writable, if this is one.
    pub fn as_pages_mut(&mut self) -> Option<&mut P> {
        match &mut self.inner {
            Inner::Pages(p) => Some(p),
            Inner::Xsk(_) => None,
        }
    }

    /// The XSK pool, if this is one.
    #[must_use]
    pub const fn as_xsk(&self) -> Option<&X> {
        match &self.inner {
            Inner::Xsk(x) => Some(x),
            Inner::Pages(_) => None,
        }
    }

    /// The XSK pool, writable, if this is one.
    pub fn as_xsk_mut(&mut self) -> Option<&mut X> {
        match &mut self.inner {
            Inner::Xsk(x) => Some(x),
            Inner::Pages(_) => None,
        }
    }

    /// Buffers of the other kind that were given back here (module docs): zero unless a host
    /// mixed up its pairs' buffers.
    #[must_use]
    pub const fn foreign(&self) -> u64 {
        self.strays.foreign
    }

    /// Buffers of the other kind dropped because [`FOREIGN_PARK`] were already parked.
    #[must_use]
    pub const fn lost(&self) -> u64 {
        self.strays.lost
    }

    /// How many buffers of the other kind are parked for the host to take back.
    #[must_use]
    pub fn parked(&self) -> usize {
        self.strays.parked.len()
    }

    /// A parked buffer of the other kind, for the host to return to the provider it came from.
    pub fn take_foreign(&mut self) -> Option<SourceBuf<P::Page, X::Page>> {
        self.strays.parked.pop()
    }
}

impl<P: PageProvider, X: PageProvider> PageProvider for BufSource<P, X> {
    type Page = SourceBuf<P::Page, X::Page>;

    #[inline]
    fn alloc_page(&mut self) -> Option<Self::Page> {
        match &mut self.inner {
            Inner::Pages(p) => p.alloc_page().map(SourceBuf::Page),
            Inner::Xsk(x) => x.alloc_page().map(SourceBuf::Xsk),
        }
    }

    #[inline]
    fn recycle_direct(&mut self, page: Self::Page, dirty_len: usize) {
        match (&mut self.inner, page) {
            (Inner::Pages(p), SourceBuf::Page(b)) => p.recycle_direct(b, dirty_len),
            (Inner::Xsk(x), SourceBuf::Xsk(b)) => x.recycle_direct(b, dirty_len),
            (_, other) => self.strays.park(other),
        }
    }

    #[inline]
    fn reuse(&mut self, page: Self::Page, dirty_len: usize) -> Option<Self::Page> {
        match (&mut self.inner, page) {
            (Inner::Pages(p), SourceBuf::Page(b)) => p.reuse(b, dirty_len).map(SourceBuf::Page),
            (Inner::Xsk(x), SourceBuf::Xsk(b)) => x.reuse(b, dirty_len).map(SourceBuf::Xsk),
            (_, other) => {
                self.strays.park(other);
                self.alloc_page()
            }
        }
    }

    fn release_page(&mut self, page: Self::Page) {
        match (&mut self.inner, page) {
            (Inner::Pages(p), SourceBuf::Page(b)) => p.release_page(b),
            (Inner::Xsk(x), SourceBuf::Xsk(b)) => x.release_page(b),
            (_, other) => self.strays.park(other),
        }
    }

    #[inline]
    fn sync_for_cpu(&self, page: &Self::Page, offset: usize, len: usize) {
        match (&self.inner, page) {
            (Inner::Pages(p), SourceBuf::Page(b)) => p.sync_for_cpu(b, offset, len),
            (Inner::Xsk(x), SourceBuf::Xsk(b)) => x.sync_for_cpu(b, offset, len),
            _ => {}
        }
    }

    #[inline]
    fn sync_for_device(&self, page: &Self::Page, offset: usize, len: usize) {
        match (&self.inner, page) {
            (Inner::Pages(p), SourceBuf::Page(b)) => p.sync_for_device(b, offset, len),
            (Inner::Xsk(x), SourceBuf::Xsk(b)) => x.sync_for_device(b, offset, len),
            _ => {}
        }
    }

    fn device_readable(&self) -> bool {
        match &self.inner {
            Inner::Pages(p) => p.device_readable(),
            Inner::Xsk(x) => x.device_readable(),
        }
    }

    fn may_run_short(&self) -> bool {
        match &self.inner {
            Inner::Pages(p) => p.may_run_short(),
            Inner::Xsk(x) => x.may_run_short(),
        }
    }

    fn batches(&self) -> bool {
        match &self.inner {
            Inner::Pages(p) => p.batches(),
            Inner::Xsk(x) => x.batches(),
        }
    }

    fn refill_begin(&mut self, empty: usize) {
        match &mut self.inner {
            Inner::Pages(p) => p.refill_begin(empty),
            Inner::Xsk(x) => x.refill_begin(empty),
        }
    }

    fn refill_end(&mut self) {
        match &mut self.inner {
            Inner::Pages(p) => p.refill_end(),
            Inner::Xsk(x) => x.refill_end(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::vec::Vec;

    use onic_hal::{Direction, DmaMemory, DmaPage};
    use onic_sim::{Card, CardConfig};

    use super::*;
    use crate::queue::pool::{PagePool, PoolConfig};
    use crate::queue::xsk::{Umem, UmemChunk, UmemConfig, XskPool, XskRing, UMEM_CHUNK_SIZE};

    #[test]
    fn each_source_hands_out_and_takes_back_its_own_kind_only() {
        let card = Card::new(CardConfig::default());
        let dma = card.dma();
        let dir = Direction::Bidirectional;
        let mut pages: Vec<DmaPage> = (0..4)
            .map(|_| dma.map_page(dma.alloc_page().unwrap(), dir).unwrap())
            .collect();
        {
            let chunks: Vec<UmemChunk<'_>> = pages.iter_mut().map(UmemChunk::new).collect();
            let umem = Umem::new(&chunks, UmemConfig { headroom: 0, dir }).unwrap();
            let fill_slots: Vec<core::cell::Cell<u64>> = (0..4).map(|_| core::cell::Cell::new(0)).collect();
            let fill = XskRing::new(&fill_slots).unwrap();
            fill.produce(UMEM_CHUNK_SIZE as u64).unwrap();
            let xsk = XskPool::new(dma, umem, &fill, 2048).unwrap();
            let mut x: BufSource<PagePool<'_, onic_sim::SimDma<'_>>, _> = BufSource::xsk(xsk);
            assert_eq!(x.kind(), SourceKind::Xsk);
            let b = x.alloc_page().unwrap();
            assert_eq!(b.kind(), SourceKind::Xsk);
            assert!(x.alloc_page().is_none(), "one fill entry, one frame");
            x.recycle_direct(b, 0);
            assert_eq!(x.as_xsk().unwrap().free_len(), 1);

            let pool: PagePool<'_, _, 128> = PagePool::new(dma, PoolConfig::rx(dir, 2048), None);
            let mut p: BufSource<_, XskPool<'_, '_, onic_sim::SimDma<'_>>> = BufSource::pages(pool);
            let page = p.alloc_page().unwrap();
            assert_eq!(page.kind(), SourceKind::Pages);
            // A buffer of the other kind is parked and counted, never handed out again.
            let f = x.alloc_page().unwrap();
            p.recycle_direct(f, 0);
            assert_eq!((p.foreign(), p.parked(), p.lost()), (1, 1, 0));
            x.recycle_direct(page, 0);
            assert_eq!((x.foreign(), x.parked(), x.lost()), (1, 1, 0));
            assert_eq!(
                umem.counts().held,
                1,
                "the parked frame stays held, never doubled"
            );
            assert!(p.alloc_page().is_some_and(|b| {
                let page = b.kind() == SourceKind::Pages;
                p.recycle_direct(b, 0);
                page
            }));

            // The host takes each parked buffer back to its own provider: nothing is lost.
            let f = p.take_foreign().unwrap();
            assert!(p.take_foreign().is_none());
            x.recycle_direct(f, 0);
            assert_eq!(x.as_xsk().unwrap().free_len(), 1);
            let page = x.take_foreign().unwrap();
            p.release_page(page);
            assert_eq!(umem.counts().held, 0);
        }
        for page in pages {
            dma.free_page(page.unmap(&dma, dir));
        }
    }

    /// A buffer that is only a number: what a full park drops costs no memory.
    #[derive(Debug, PartialEq, Eq)]
    struct Token(u32);

    impl PoolPage for Token {
        fn dma_addr(&self) -> DmaAddr {
            DmaAddr::new(u64::from(self.0))
        }
        fn bytes(&self) -> &[u8] {
            &[]
        }
        fn bytes_mut(&mut self) -> &mut [u8] {
            &mut []
        }
    }

    /// Hands out tokens counting up, and counts the ones it gets back.
    #[derive(Default)]
    struct Tokens {
        next: u32,
        back: u32,
    }

    impl PageProvider for Tokens {
        type Page = Token;
        fn alloc_page(&mut self) -> Option<Token> {
            self.next += 1;
            Some(Token(self.next))
        }
        fn recycle_direct(&mut self, _: Token, _: usize) {
            self.back += 1;
        }
        fn release_page(&mut self, _: Token) {
            self.back += 1;
        }
        fn sync_for_cpu(&self, _: &Token, _: usize, _: usize) {}
        fn sync_for_device(&self, _: &Token, _: usize, _: usize) {}
    }

    #[test]
    fn a_full_park_drops_one_and_counts_it() {
        let mut other = Tokens::default();
        let mut x: BufSource<Tokens, Tokens> = BufSource::xsk(Tokens::default());
        for _ in 0..=FOREIGN_PARK {
            let t = other.alloc_page().unwrap();
            x.release_page(SourceBuf::Page(t));
        }
        assert_eq!(x.foreign(), FOREIGN_PARK as u64 + 1);
        assert_eq!((x.parked(), x.lost()), (FOREIGN_PARK, 1));
        while let Some(b) = x.take_foreign() {
            match b {
                SourceBuf::Page(t) => other.release_page(t),
                SourceBuf::Xsk(_) => panic!("only pages were parked"),
            }
        }
        assert_eq!(
            other.back as usize, FOREIGN_PARK,
            "all but the dropped one came back"
        );
        assert_eq!(x.as_xsk().unwrap().back, 0, "none went to the wrong provider");
    }
}
