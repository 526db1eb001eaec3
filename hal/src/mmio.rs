//! The real MMIO backend: a [`RegisterWindow`] over a mapped BAR, built on `volatile-register`.
//! Used by the bare-metal image and by the Linux module on real hardware.

use core::marker::PhantomData;
use core::ptr::NonNull;
use volatile_register::RW;

use crate::barrier;
use crate::window::{RegisterWindow, UNMAPPED_READ};

/// A mapped BAR seen as an array of 32-bit registers.
///
/// # Invariants
///
/// `base` points to `len` bytes of device memory mapped uncached for the CPU, 4-byte aligned, valid
/// for volatile 32-bit reads and writes for `'a`.
pub struct Mmio<'a> {
    base: NonNull<RW<u32>>,
    len: usize,
    _mapping: PhantomData<&'a ()>,
}

impl<'a> Mmio<'a> {
    /// Wraps a mapped BAR.
    ///
    /// # Safety
    ///
    /// The caller promises that `base` is the start of a mapping of `len` bytes of this device's
    /// BAR, 4-byte aligned, valid for volatile reads and writes for the whole of `'a`, and that the
    /// device programmed through the window only reaches DMA memory handed to it through the
    /// driver's [`crate::dma::DmaMemory`] (i.e. the IOMMU or the device's own configuration does not
    /// let it scribble over unrelated memory).
    pub unsafe fn new(base: NonNull<u8>, len: usize) -> Self {
        Self {
            base: base.cast(),
            len,
            _mapping: PhantomData,
        }
    }

    fn reg(&self, offset: u32) -> Option<&RW<u32>> {
        let off = offset as usize;
        if !off.is_multiple_of(4) || off.checked_add(4)? > self.len {
            return None;
        }
        // SAFETY: `off + 4 <= len` and `off` is 4-byte aligned, so the register lies inside the
        // mapping that the type invariant guarantees is valid for 'a; `RW<u32>` is a transparent
        // wrapper over an `UnsafeCell<u32>`, so a shared reference to it permits volatile writes.
        Some(unsafe { &*self.base.as_ptr().add(off / 4) })
    }
}

// SAFETY: one volatile access per call at the checked offset (out-of-window or misaligned offsets
// never reach memory); `barrier::before_write` orders earlier DMA-memory writes before each
// register write, and `barrier::after_read` later DMA-memory reads after each register read, with
// the instruction Linux's `writel`/`readl` use on the target.
unsafe impl RegisterWindow for Mmio<'_> {
    fn read32(&self, offset: u32) -> u32 {
        match self.reg(offset) {
            Some(r) => {
                let v = r.read();
                barrier::after_read(v);
                v
            }
            None => UNMAPPED_READ,
        }
    }

    fn write32(&self, offset: u32, value: u32) {
        if let Some(r) = self.reg(offset) {
            barrier::before_write();
            // SAFETY: `r` is a register inside the mapped BAR (see `reg`); what the write makes the
            // device do is covered by the contract of `Mmio::new`.
            unsafe { r.write(value) };
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_writes_inside_the_window_only() {
        let mut backing = [0u32; 4];
        let base = NonNull::new(backing.as_mut_ptr().cast::<u8>()).unwrap();
        {
            // SAFETY: `backing` is 16 bytes of aligned memory that outlives the window, which is
            // dropped at the end of this block before `backing` is read directly.
            let w = unsafe { Mmio::new(base, 16) };
            w.write32(4, 0x1234_5678);
            w.write32(16, 1); // outside: dropped
            w.write32(2, 1); // misaligned: dropped
            assert_eq!(w.read32(4), 0x1234_5678);
            assert_eq!(w.read32(16), UNMAPPED_READ);
            assert_eq!(w.read32(6), UNMAPPED_READ);
        }
        assert_eq!(backing, [0, 0x1234_5678, 0, 0]);
    }
}
