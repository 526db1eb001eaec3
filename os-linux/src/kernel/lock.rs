//! A kernel spinlock, taken with bottom halves disabled, as the lock of the model card: the card
//! is used from process context (probe, ethtool), from softirq context (NAPI, transmit, the
//! engine timer), never from hard-IRQ context.

use core::ffi::c_void;
use core::ptr::NonNull;

use crate::simcard::RawLock;

use super::ffi;

/// An owned `spinlock_t` allocated by the C glue.
pub struct KLock(NonNull<c_void>);

impl KLock {
    /// A new unlocked lock, or `None` when out of memory.
    pub fn new() -> Option<Self> {
        // SAFETY: allocates and initializes a spinlock; no preconditions.
        NonNull::new(unsafe { ffi::onic_lock_new() }).map(Self)
    }
}

impl Drop for KLock {
    fn drop(&mut self) {
        // SAFETY: the lock came from onic_lock_new and nobody holds it (we own it exclusively).
        unsafe { ffi::onic_lock_free(self.0.as_ptr()) };
    }
}

// SAFETY: spin_lock_bh/spin_unlock_bh are the kernel's mutual exclusion with acquire/release
// semantics; the pointer is valid until drop.
unsafe impl RawLock for KLock {
    fn lock(&self) {
        // SAFETY: valid lock (type invariant).
        unsafe { ffi::onic_lock_bh(self.0.as_ptr()) };
    }
    fn unlock(&self) {
        // SAFETY: valid lock, held by this thread (RawLock contract of the caller).
        unsafe { ffi::onic_unlock_bh(self.0.as_ptr()) };
    }
}

// SAFETY: a kernel spinlock may be taken and released from any CPU.
unsafe impl Send for KLock {}
// SAFETY: as above.
unsafe impl Sync for KLock {}
