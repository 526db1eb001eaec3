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
