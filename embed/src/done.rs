//! Where completed TX frames go: OS pages are unmapped and freed (or kept for reuse), redirected
//! pages go back to the pool that owns them through its recycle ring.

use alloc::vec::Vec;

use onic_core::queue::pool::{release_to_hal, RecycleRing};
use onic_core::queue::tx::TxDone;
use onic_core::xdp::{return_to_origin, XdpFrame};
use onic_hal::{Direction, DmaMemory, DmaPage};

use crate::frame::Frame;

/// What a [`FrameDone`] did, counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DoneCounts {
    /// Frames handed to [`TxDone::os_done`].
    pub os_done: u64,
    /// Frames handed to [`TxDone::remote_done`].
    pub remote_done: u64,
    /// OS pages unmapped and freed, or kept for reuse ([`FrameDone::keep_os_pages`]).
    pub os_freed: u64,
    /// Redirected pages that went back to their pool's recycle ring.
    pub returned: u64,
    /// Redirected pages released to the HAL (their ring was full or did not exist).
    pub released: u64,
}

/// The standard [`TxDone`] of [`Frame`]s (and of bare [`XdpFrame`]s).
///
/// `rings[origin]` is the recycle ring of the pool a redirected frame's `origin` names.
pub struct FrameDone<'r, M> {
    rings: &'r [&'r RecycleRing],
    dma: M,
    keep: Option<&'r mut Vec<DmaPage>>,
    /// What it did so far.
    pub counts: DoneCounts,
}

impl<'r, M: DmaMemory> FrameDone<'r, M> {
    /// Frees OS pages in `dma` and returns redirected pages through `rings`.
    pub const fn new(rings: &'r [&'r RecycleRing], dma: M) -> Self {
        Self {
            rings,
            dma,
            keep: None,
            counts: DoneCounts {
                os_done: 0,
                remote_done: 0,
                os_freed: 0,
                returned: 0,
                released: 0,
            },
        }
    }

    /// Puts finished OS pages, still mapped, on `free` for the OS to write its next frames into,
    /// instead of freeing them.
    #[must_use]
    pub fn keep_os_pages(mut self, free: &'r mut Vec<DmaPage>) -> Self {
        self.keep = Some(free);
        self
    }

    /// Gives a finished frame back to its owner (without counting it as done). An OS page is
    /// unmapped and freed in the memory it was mapped in (the frame's own).
    pub fn finish<N: DmaMemory>(&mut self, frame: Frame<N>) {
        match frame {
            Frame::Os { page, dma, .. } => {
                self.counts.os_freed += 1;
                match self.keep.as_deref_mut() {
                    Some(free) => free.push(page),
                    None => dma.free_page(page.unmap(&dma, Direction::ToDevice)),
                }
            }
            Frame::Xdp(f) => self.finish_xdp(f),
        }
    }

    /// Gives a redirected frame's page back to its pool, or to the HAL when its ring is full.
    #[inline(always)]
    pub fn finish_xdp(&mut self, frame: XdpFrame<DmaPage>) {
        match return_to_origin(self.rings, frame) {
            Ok(()) => self.counts.returned += 1,
            Err(page) => {
                self.counts.released += 1;
                release_to_hal(&self.dma, Direction::Bidirectional, page);
            }
        }
    }
}

impl<M: DmaMemory, N: DmaMemory> TxDone<Frame<N>> for FrameDone<'_, M> {
    fn os_done(&mut self, frame: Frame<N>) {
        self.counts.os_done += 1;
        self.finish(frame);
    }

    fn remote_done(&mut self, frame: Frame<N>) {
        self.counts.remote_done += 1;
        self.finish(frame);
    }
}

// Always inlined, with `finish_xdp`: they are the per-frame body of a redirect target's reclaim.
impl<M: DmaMemory> TxDone<XdpFrame<DmaPage>> for FrameDone<'_, M> {
    #[inline(always)]
    fn os_done(&mut self, frame: XdpFrame<DmaPage>) {
        self.counts.os_done += 1;
        self.finish_xdp(frame);
    }

    #[inline(always)]
    fn remote_done(&mut self, frame: XdpFrame<DmaPage>) {
        self.counts.remote_done += 1;
        self.finish_xdp(frame);
    }
}
