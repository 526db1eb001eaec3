//! A pass sink that keeps every page it is handed, as an OS does until it gives them back.

use alloc::vec::Vec;

use onic_core::queue::rx::RxFrame;
use onic_core::{PassInfo, RxSink};
use onic_hal::DmaPage;

/// Keeps passed pages in `held`, each tagged with `origin` (the pool it must go back to), up to
/// `cap` pages; beyond that it refuses (the RX path recycles the page and counts it). Each frame
/// is shown to `observe` before it is kept.
pub struct OsQueue<'q, T, O> {
    held: &'q mut Vec<(T, DmaPage)>,
    origin: T,
    cap: usize,
    observe: O,
    /// Frames kept.
    pub passed: u64,
    /// Frames refused.
    pub refused: u64,
}

impl<'q, T: Copy> OsQueue<'q, T, fn(&RxFrame<DmaPage>, PassInfo)> {
    /// Keeps every page in `held`, tagged with `origin`.
    pub fn new(held: &'q mut Vec<(T, DmaPage)>, origin: T) -> Self {
        Self::observed(held, origin, |_, _| {})
    }
}

impl<'q, T: Copy, O: FnMut(&RxFrame<DmaPage>, PassInfo)> OsQueue<'q, T, O> {
    /// As [`OsQueue::new`], showing each frame to `observe` first.
    pub fn observed(held: &'q mut Vec<(T, DmaPage)>, origin: T, observe: O) -> Self {
        Self {
            held,
            origin,
            cap: usize::MAX,
            observe,
            passed: 0,
            refused: 0,
        }
    }

    /// Holds at most `cap` pages in all (counting those already held).
    #[must_use]
    pub fn with_cap(mut self, cap: usize) -> Self {
        self.cap = cap;
        self
    }
}

impl<T: Copy, O: FnMut(&RxFrame<DmaPage>, PassInfo)> RxSink<DmaPage> for OsQueue<'_, T, O> {
    fn pass(&mut self, frame: RxFrame<DmaPage>, info: PassInfo) -> Result<(), RxFrame<DmaPage>> {
        if self.held.len() >= self.cap {
            self.refused += 1;
            return Err(frame);
        }
        (self.observe)(&frame, info);
        self.passed += 1;
        self.held.push((self.origin, frame.page));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use alloc::vec::Vec;

    use onic_core::queue::rx::RxFrame;
    use onic_core::{PassInfo, RxSink};
    use onic_hal::{Direction, DmaMemory, DmaPage};
    use onic_sim::{Card, CardConfig};

    use super::OsQueue;

    fn frame(page: DmaPage) -> RxFrame<DmaPage> {
        RxFrame {
            page,
            offset: 256,
            len: 60,
        }
    }

    #[test]
    fn keeps_pages_up_to_its_cap_and_shows_each_to_its_observer() {
        let card = Card::new(CardConfig::default());
        let dma = card.dma();
        let page = || {
            dma.map_page(dma.alloc_page().unwrap(), Direction::FromDevice)
                .unwrap()
        };
        let mut held = Vec::new();
        let mut seen = 0;
        let mut sink = OsQueue::observed(&mut held, 7u16, |_: &RxFrame<DmaPage>, _| seen += 1).with_cap(1);
        assert!(sink.pass(frame(page()), PassInfo::default()).is_ok());
        let back = sink.pass(frame(page()), PassInfo::default()).unwrap_err();
        assert_eq!((sink.passed, sink.refused), (1, 1));
        assert_eq!(seen, 1);
        for p in held
            .drain(..)
            .map(|(origin, p)| {
                assert_eq!(origin, 7);
                p
            })
            .chain([back.page])
        {
            dma.free_page(p.unmap(&dma, Direction::FromDevice));
        }
        assert_eq!(card.dma_stats().live_pages, 0);
    }
}
