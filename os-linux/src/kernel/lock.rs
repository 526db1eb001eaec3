//! The kernel locks the Rust side uses: a spinlock taken with interrupts disabled as the lock of
//! the model card (the card is used from process context, from softirq context, and from the
//! netpoll path, which runs with interrupts disabled), and the card's context-command mutex.

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

// SAFETY: spin_lock_irqsave/spin_unlock_irqrestore are the kernel's mutual exclusion with acquire/release
// semantics; the pointer is valid until drop.
unsafe impl RawLock for KLock {
    fn lock(&self) {
        // SAFETY: valid lock (type invariant).
        unsafe { ffi::onic_lock(self.0.as_ptr()) };
    }
    fn unlock(&self) {
        // SAFETY: valid lock, held by this thread (RawLock contract of the caller).
        unsafe { ffi::onic_unlock(self.0.as_ptr()) };
    }
}

// SAFETY: a kernel spinlock may be taken and released from any CPU.
unsafe impl Send for KLock {}
// SAFETY: as above.
unsafe impl Sync for KLock {}

/// A card's context-command mutex, owned by the C glue (one per card, shared by the card's
/// functions); borrowed for the life of the ports built with it.
pub struct KCardLock(NonNull<c_void>);

impl KCardLock {
    /// The mutex at `lock`.
    ///
    /// # Safety
    ///
    /// `lock` is an initialized `struct mutex *` that outlives every use of this handle.
    pub const unsafe fn new(lock: NonNull<c_void>) -> Self {
        Self(lock)
    }
}

// SAFETY: mutex_lock/mutex_unlock exclude every other holder of the same mutex, with acquire and
// release semantics; the core takes it only from process context (probe, open, stop, remove,
// the reset work), where sleeping is allowed, and never while holding it.
unsafe impl onic_hal::SharedLock for KCardLock {
    fn lock(&self) {
        // SAFETY: valid mutex (constructor contract).
        unsafe { ffi::onic_ctx_lock(self.0.as_ptr()) };
    }
    fn unlock(&self) {
        // SAFETY: valid mutex, held by this thread (SharedLock contract).
        unsafe { ffi::onic_ctx_unlock(self.0.as_ptr()) };
    }
}

// SAFETY: a kernel mutex may be taken from any thread in process context.
unsafe impl Send for KCardLock {}
// SAFETY: as above.
unsafe impl Sync for KCardLock {}
