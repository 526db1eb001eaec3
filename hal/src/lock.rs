//! Locks the OS provides for device state that several PCI functions of one card share.
//!
//! The QDMA's indirect context registers (IND_CTXT_DATA, IND_CTXT_MASK, IND_CTXT_CMD,
//! hardware.md §5.1) exist once per card, but every PCI function reaches them through its own BAR0.
//! A command is a sequence of up to 18 register accesses; if two functions' sequences interleave,
//! one function's command runs with the other's data words. The reference driver serialises every
//! command with one global lock; here the OS hands the driver core one [`SharedLock`] per card, and
//! the core takes it around each command sequence.

/// A mutual-exclusion lock without data, shared by every function of one card.
///
/// # Safety
///
/// Between a [`SharedLock::lock`] and the matching [`SharedLock::unlock`] on any handle of the
/// same card, no other `lock` of a handle of that card returns. `lock` has acquire and `unlock`
/// release semantics. The core never calls `lock` while holding the lock, and calls it only from
/// contexts in which the implementation may wait (the Linux module: process context).
pub unsafe trait SharedLock {
    /// Takes the lock, waiting while another function holds it.
    fn lock(&self);
    /// Releases the lock the caller took.
    fn unlock(&self);
}

/// No lock: one context drives the whole card (the bare-metal image, single-threaded tools and
/// tests), so command sequences cannot interleave. It may move to another thread with everything
/// it guards, but is not `Sync`: a device over it cannot be shared between threads, which would
/// let two of them run commands at once.
///
/// ```compile_fail
/// fn shared<T: Sync>() {}
/// shared::<onic_hal::Unshared>();
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unshared {
    _one_context: core::marker::PhantomData<core::cell::Cell<()>>,
}

impl Unshared {
    /// The lock of a card one context drives.
    pub const NEW: Self = Self {
        _one_context: core::marker::PhantomData,
    };
}

// SAFETY: `Unshared` is only for cards driven by a single context, where no two command sequences
// can overlap; there is nothing to exclude.
unsafe impl SharedLock for Unshared {
    fn lock(&self) {}
    fn unlock(&self) {}
}

// SAFETY: forwards to `T`, which upholds the contract.
unsafe impl<T: SharedLock + ?Sized> SharedLock for &T {
    fn lock(&self) {
        (**self).lock();
    }
    fn unlock(&self) {
        (**self).unlock();
    }
}

/// Holds a [`SharedLock`] until dropped.
#[must_use = "the lock is released when the guard is dropped"]
pub struct SharedGuard<'a, L: SharedLock + ?Sized>(&'a L);

impl<'a, L: SharedLock + ?Sized> SharedGuard<'a, L> {
    /// Takes `lock`.
    pub fn new(lock: &'a L) -> Self {
        lock.lock();
        Self(lock)
    }
}

impl<L: SharedLock + ?Sized> Drop for SharedGuard<'_, L> {
    fn drop(&mut self) {
        self.0.unlock();
    }
}
