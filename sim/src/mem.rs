//! Host memory blocks that back the model's DMA memory. All of the crate's `unsafe` lives here.
//!
//! A [`Block`] is one heap allocation of a whole number of 4 KiB pages, 4 KiB aligned. The driver
//! reaches it through the raw pointer that [`Block::ptr`] hands out (inside a `RawRegion` or a
//! `PageMem` token); the model reaches it only through [`Block::read`] and [`Block::write`], which
//! copy through raw pointers derived from the same allocation pointer and never create a
//! reference into the memory. That keeps the two sides from asserting conflicting Rust aliasing
//! claims over bytes the other side may be changing, which is what Miri checks.
//!
//! A [`Foreign`] is host memory the model did not allocate (an OS buffer mapped for the device,
//! like an IOMMU mapping). The model never owns or frees it; it copies in and out through the
//! caller's pointer in the same reference-free way, within the mapped length and only in the
//! directions the mapping allows.

use alloc::alloc::{alloc_zeroed, dealloc, Layout};
use core::ptr::{self, NonNull};

use onic_hal::{Direction, PAGE_SIZE};

/// One 4 KiB-aligned heap allocation owned by the model.
///
/// # Invariants
///
/// `ptr` was returned by `alloc_zeroed` with `Layout::from_size_align(len, PAGE_SIZE)` and has not
/// been deallocated; `len > 0` and is a multiple of [`PAGE_SIZE`]. A `Block` is the only owner of
/// the allocation (it is neither `Clone` nor `Copy`); [`Block::free`] consumes it.
#[derive(Debug)]
pub(crate) struct Block {
    ptr: NonNull<u8>,
    len: usize,
}

impl Block {
    /// Allocates `len` bytes rounded up to whole pages, zeroed. `None` for a zero length, a size
    /// overflow or an allocation failure.
    pub(crate) fn alloc(len: usize) -> Option<Self> {
        if len == 0 {
            return None;
        }
        let len = len.checked_next_multiple_of(PAGE_SIZE)?;
        let layout = Layout::from_size_align(len, PAGE_SIZE).ok()?;
        // SAFETY: the layout has a non-zero size (len >= PAGE_SIZE).
        let raw = unsafe { alloc_zeroed(layout) };
        let ptr = NonNull::new(raw)?;
        Some(Self { ptr, len })
    }

    /// The allocation pointer, to hand to the driver inside a DMA token.
    pub(crate) fn ptr(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Length in bytes (whole pages).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    fn in_bounds(&self, offset: usize, len: usize) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// Copies `out.len()` bytes starting at `offset` into `out`. Returns `false` (and copies
    /// nothing) if the range is not inside the block.
    pub(crate) fn read(&self, offset: usize, out: &mut [u8]) -> bool {
        if !self.in_bounds(offset, out.len()) {
            return false;
        }
        // SAFETY: `offset + out.len() <= self.len` (checked above), so the source range lies in the
        // live allocation (type invariant); `out` is a distinct Rust buffer, so the ranges do not
        // overlap. No reference into the block is created.
        unsafe { ptr::copy_nonoverlapping(self.ptr.as_ptr().add(offset), out.as_mut_ptr(), out.len()) };
        true
    }

    /// Copies `data` into the block at `offset`. Returns `false` (and writes nothing) if the range
    /// is not inside the block.
    pub(crate) fn write(&self, offset: usize, data: &[u8]) -> bool {
        if !self.in_bounds(offset, data.len()) {
            return false;
        }
        // SAFETY: the destination range is inside the live allocation (checked above, type
        // invariant) and `data` is a distinct Rust buffer. The model only runs while the driver is
        // not executing (single-threaded, step-driven), so no CPU-side reference is in use.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(offset), data.len()) };
        true
    }

    /// Sets every byte of the block to `byte` (poisoning fresh packet pages).
    pub(crate) fn fill(&self, byte: u8) {
        // SAFETY: the whole block is the live allocation (type invariant); no reference into it is
        // created.
        unsafe { ptr::write_bytes(self.ptr.as_ptr(), byte, self.len) };
    }

    /// Returns the memory to the heap.
    ///
    /// The caller (the DMA model) only frees a block once the driver has handed back the token
    /// that carried its pointer, so no CPU-side user remains (the `DmaMemory` contract).
    pub(crate) fn free(self) {
        // Cannot fail: the same size and alignment succeeded in `alloc`.
        if let Ok(layout) = Layout::from_size_align(self.len, PAGE_SIZE) {
            // SAFETY: `ptr` came from `alloc_zeroed` with exactly this layout and is deallocated
            // only here, once, because `free` consumes the only owner (type invariant).
            unsafe { dealloc(self.ptr.as_ptr(), layout) };
        }
    }
}

/// Host bytes the model did not allocate, reached by the device through a foreign mapping.
///
/// # Invariants
///
/// From [`Foreign::new`] until the value is dropped, the `len` bytes at `ptr` are valid for reads
/// unless `dir` is [`Direction::FromDevice`] (and then initialized), and valid for writes unless
/// `dir` is [`Direction::ToDevice`]; nothing accesses them in a way that conflicts with a copy made
/// here while a call on the model runs. `len > 0`. The value does not own the bytes: dropping it
/// only ends the model's right to touch them.
#[derive(Debug)]
pub(crate) struct Foreign {
    ptr: NonNull<u8>,
    len: usize,
    dir: Direction,
}

impl Foreign {
    /// Wraps `len` bytes of someone else's memory at `ptr`, reachable in direction `dir`.
    ///
    /// # Safety
    ///
    /// The bytes satisfy the type invariants for as long as the returned value exists.
    pub(crate) unsafe fn new(ptr: NonNull<u8>, len: usize, dir: Direction) -> Self {
        Self { ptr, len, dir }
    }

    /// Mapped length in bytes (exactly what the caller mapped, not rounded).
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Direction of the mapping.
    pub(crate) fn dir(&self) -> Direction {
        self.dir
    }

    fn in_bounds(&self, offset: usize, len: usize) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.len)
    }

    /// Copies `out.len()` bytes starting at `offset` into `out`. Returns `false` (and copies
    /// nothing) if the range is outside the mapping or the mapping is device-write-only.
    pub(crate) fn read(&self, offset: usize, out: &mut [u8]) -> bool {
        if self.dir == Direction::FromDevice || !self.in_bounds(offset, out.len()) {
            return false;
        }
        // SAFETY: the source range is inside the `len` readable, initialized bytes (checked above,
        // type invariant); `out` is a buffer the model owns, a Rust allocation the mapped bytes
        // cannot overlap. No reference into the foreign bytes is created.
        unsafe { ptr::copy_nonoverlapping(self.ptr.as_ptr().add(offset), out.as_mut_ptr(), out.len()) };
        true
    }

    /// Copies `data` into the mapping at `offset`. Returns `false` (and writes nothing) if the
    /// range is outside the mapping or the mapping is device-read-only.
    pub(crate) fn write(&self, offset: usize, data: &[u8]) -> bool {
        if self.dir == Direction::ToDevice || !self.in_bounds(offset, data.len()) {
            return false;
        }
        // SAFETY: the destination range is inside the `len` writable bytes (checked above, type
        // invariant) and `data` is a distinct buffer the model owns. No reference into the
        // foreign bytes is created, so a CPU-side raw pointer to them stays usable.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(offset), data.len()) };
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_write_round_trip_and_bounds() {
        let b = Block::alloc(10).unwrap();
        assert_eq!(b.len(), PAGE_SIZE);
        let mut out = [0xFFu8; 4];
        assert!(b.read(0, &mut out));
        assert_eq!(out, [0; 4]);
        assert!(b.write(PAGE_SIZE - 4, &[1, 2, 3, 4]));
        assert!(b.read(PAGE_SIZE - 4, &mut out));
        assert_eq!(out, [1, 2, 3, 4]);
        assert!(!b.write(PAGE_SIZE - 3, &[1, 2, 3, 4]));
        assert!(!b.read(usize::MAX, &mut out));
        b.fill(0x5A);
        assert!(b.read(8, &mut out));
        assert_eq!(out, [0x5A; 4]);
        b.free();
        assert!(Block::alloc(0).is_none());
    }

    #[test]
    fn foreign_bytes_respect_bounds_and_direction() {
        let mut host = [0u8; 16];
        let ptr = NonNull::new(host.as_mut_ptr()).unwrap();
        // SAFETY: `host` is initialized, outlives every value made here, and is only touched
        // through `ptr` until the last one is gone.
        let wrap = |dir| unsafe { Foreign::new(ptr, 16, dir) };
        let mut out = [0u8; 4];
        {
            let both = wrap(Direction::Bidirectional);
            assert_eq!((both.len(), both.dir()), (16, Direction::Bidirectional));
            assert!(both.write(12, &[1, 2, 3, 4]));
            assert!(!both.write(13, &[1, 2, 3, 4]));
            assert!(both.read(12, &mut out));
            assert_eq!(out, [1, 2, 3, 4]);
            assert!(!both.read(usize::MAX, &mut out));
        }
        {
            let to_dev = wrap(Direction::ToDevice);
            assert!(!to_dev.write(0, &[9]));
            assert!(to_dev.read(8, &mut out));
            assert_eq!(out, [0, 0, 0, 0]);
        }
        {
            let from_dev = wrap(Direction::FromDevice);
            assert!(!from_dev.read(0, &mut out));
            assert!(from_dev.write(0, &[9]));
        }
        assert_eq!(host[..4], [9, 0, 0, 0]);
        assert_eq!(host[12..], [1, 2, 3, 4]);
    }
}
