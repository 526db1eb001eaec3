//! Allocation that fails with `None` instead of panicking: in the kernel a Rust panic panics
//! the machine, and `Box::new`, `Vec::push` and `Vec::resize_with` panic when the allocator
//! refuses (`cargo xtask panic-paths` checks the module's object for such paths).

use alloc::boxed::Box;
use alloc::vec::Vec;
use core::alloc::Layout;
use core::ptr::NonNull;

use onic_core::rss::{PublishedHasher, RssKey};

/// Room for one `T` from the global allocator (a dangling pointer for a zero-sized `T`, as
/// `Box` uses), or `None`.
fn alloc_one<T>() -> Option<NonNull<T>> {
    let layout = Layout::new::<T>();
    if layout.size() == 0 {
        return Some(NonNull::dangling());
    }
    // SAFETY: the layout has a non-zero size.
    NonNull::new(unsafe { alloc::alloc::alloc(layout) }.cast::<T>())
}

/// `v` on the heap, or `None` (and `v` dropped) when the allocation fails.
pub fn try_box<T>(v: T) -> Option<Box<T>> {
    let p = alloc_one::<T>()?;
    // SAFETY: `p` is room for a `T` from the global allocator with `T`'s layout (or the
    // dangling pointer of a zero-sized `T`): writing moves `v` in, and the box then owns it
    // exactly as `Box::new` would.
    unsafe {
        p.as_ptr().write(v);
        Some(Box::from_raw(p.as_ptr()))
    }
}

/// A heap copy of `*src` made byte by byte, so a large value never passes through the stack,
/// or `None` when the allocation fails.
///
/// # Safety
///
/// `T` is plain data: no pointers it owns, no `Drop` with effects, so a bitwise copy of a
/// valid value is a valid, independent value.
unsafe fn try_box_copy<T>(src: &T) -> Option<Box<T>> {
    let p = alloc_one::<T>()?;
    // SAFETY: the destination is fresh room for a `T`, which cannot overlap `src`; the copy is
    // a valid `T` (caller's contract); the box owns it as `try_box` does.
    unsafe {
        core::ptr::copy_nonoverlapping(src, p.as_ptr(), 1);
        Some(Box::from_raw(p.as_ptr()))
    }
}

/// The published RSS hasher for the RTL's reset key, built at compile time.
static DEFAULT_HASHER: PublishedHasher = PublishedHasher::new(&RssKey::DEFAULT);

/// A published RSS hasher for the RTL's reset key on the heap (26 KiB, more than a kernel stack
/// holds: copied from a compile-time value, never built on the stack), or `None`.
pub fn try_box_default_hasher() -> Option<Box<PublishedHasher>> {
    // SAFETY: a `PublishedHasher` is plain data (integer tables, key bytes, an atomic index and
    // flag, no pointers, no `Drop`), and the static's copy is never changed (nothing writes it).
    unsafe { try_box_copy(&DEFAULT_HASHER) }
}

/// A vector of `n` values made by `f(0)`, `f(1)`, ..., or `None` when the allocation fails.
pub fn try_vec_with<T>(n: usize, mut f: impl FnMut(usize) -> T) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).ok()?;
    // Written into the reserved room, not pushed: `push` keeps a growth path that panics.
    let mut written = 0;
    for (i, slot) in v.spare_capacity_mut().iter_mut().take(n).enumerate() {
        slot.write(f(i));
        written += 1;
    }
    // SAFETY: the first `written` slots of the spare capacity were initialized above.
    unsafe { v.set_len(written) };
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_land_on_the_heap_whole() {
        assert_eq!(*try_box([7u8; 3000]).unwrap(), [7u8; 3000]);
        assert_eq!(*try_box(()).unwrap(), ());
        let src = [1u64, 2, 3];
        // SAFETY: an integer array is plain data.
        assert_eq!(*unsafe { try_box_copy(&src) }.unwrap(), src);
        let v = try_vec_with(5, |i| i * 10).unwrap();
        assert_eq!(v, [0, 10, 20, 30, 40]);
        assert!(try_vec_with(0, |i| i).unwrap().is_empty());
    }

    #[test]
    fn an_impossible_size_is_refused_not_a_panic() {
        assert!(try_vec_with::<u64>(usize::MAX / 4, |_| 0).is_none());
    }
}
