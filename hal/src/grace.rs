//! Grace periods: how a control path replaces data that datapaths read without a lock.
//!
//! A datapath reads some state on every packet (the RSS hasher made from the shell's key) while
//! a control call may replace it (`ethtool -X hkey`). Readers must not take a lock, and must
//! never see half of the old and half of the new. [`Published`] keeps two versions: readers use
//! the active one; a writer rebuilds the other, makes it active, and then waits out a *grace
//! period* ([`GracePeriod::synchronize`]): every reader that might still hold the old version
//! has finished, so the next change may rebuild it.
//!
//! What a grace period is belongs to the OS: in the Linux kernel, `synchronize_net` (every
//! NAPI poll runs with bottom halves off, an RCU read-side section); on a single-threaded
//! bare-metal image, nothing to wait for, because no reader runs while the writer does. A
//! reader proves it is inside a read-side section with a [`ReadSection`], made where the OS
//! hands over control (like the tokens of [`crate::exec`]).

use core::cell::UnsafeCell;
use core::fmt;
use core::marker::PhantomData;
use core::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The OS's grace period.
///
/// # Safety
///
/// [`GracePeriod::synchronize`] returns only once every read-side section ([`ReadSection`])
/// that had begun when it was called has ended.
pub unsafe trait GracePeriod {
    /// Waits until every read-side section that began before the call has ended.
    fn synchronize(&self);
}

/// No readers run while a writer does (a single-threaded image, where the datapath and control
/// calls take turns): nothing to wait for.
///
/// Where that holds, no [`ReadSection`] is alive during a change, so the contract holds
/// trivially; a `ReadSection` made on such a system must end before the next control call.
#[derive(Clone, Copy, Debug, Default)]
pub struct TakingTurns;

// SAFETY: on a system that uses `TakingTurns`, no read-side section is alive when a writer runs
// (see the type's docs and `ReadSection::new`'s contract), so there is nothing to wait for.
unsafe impl GracePeriod for TakingTurns {
    fn synchronize(&self) {}
}

/// The proof that the running code is inside a read-side section of the grace period that the
/// writers of what it reads wait out.
pub struct ReadSection<'a> {
    _section: PhantomData<(&'a (), *const ())>,
}

impl ReadSection<'_> {
    /// A read-side section, for as long as the value lives.
    ///
    /// # Safety
    ///
    /// For the value's whole life the caller stays inside a read-side section of the
    /// [`GracePeriod`] every writer of the data it reads waits out (in the Linux kernel: bottom
    /// halves off, as in a NAPI poll, or `rcu_read_lock` held; with [`TakingTurns`]: no writer
    /// runs until the value is dropped).
    #[must_use]
    pub const unsafe fn new() -> Self {
        Self {
            _section: PhantomData,
        }
    }
}

impl fmt::Debug for ReadSection<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ReadSection")
    }
}

/// A grace period for threads that share nothing else: readers count themselves in one of two
/// counters, by the parity of an epoch; a writer flips the epoch and waits for the old parity's
/// count to drain, twice, so every section that began before it has ended (the two-phase scheme
/// of user-space RCU). Readers never wait; writers spin. For hosts with threads and no OS grace
/// period of their own (tests, user-space drivers).
#[derive(Debug, Default)]
pub struct Counted {
    epoch: AtomicUsize,
    readers: [AtomicUsize; 2],
    writing: AtomicBool,
}

impl Counted {
    /// No reader, no writer.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            epoch: AtomicUsize::new(0),
            readers: [AtomicUsize::new(0), AtomicUsize::new(0)],
            writing: AtomicBool::new(false),
        }
    }

    /// Enters a read-side section, until the value is dropped.
    pub fn section(&self) -> CountedSection<'_> {
        loop {
            let parity = self.epoch.load(Ordering::SeqCst) & 1;
            self.readers[parity].fetch_add(1, Ordering::SeqCst);
            // Counted under the parity that is still current: a writer flipping after this
            // waits for us.
            if self.epoch.load(Ordering::SeqCst) & 1 == parity {
                return CountedSection {
                    grace: self,
                    parity,
                    // SAFETY: counted in `readers[parity]` until dropped, which `synchronize`
                    // waits out (see its comment).
                    section: unsafe { ReadSection::new() },
                };
            }
            self.readers[parity].fetch_sub(1, Ordering::SeqCst);
        }
    }
}

// SAFETY: a section is counted in `readers[p]` (p the epoch's parity it saw after counting
// itself) from before it reads until it is dropped. `synchronize` flips the epoch and waits for
// the old parity's count to reach zero, twice: a section that began before the call was counted
// under the parity current at one of the two flips, and is waited out there. Writers exclude
// each other (`writing`).
unsafe impl GracePeriod for Counted {
    fn synchronize(&self) {
        while self
            .writing
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            core::hint::spin_loop();
        }
        for _ in 0..2 {
            let old = self.epoch.fetch_add(1, Ordering::SeqCst) & 1;
            while self.readers[old].load(Ordering::SeqCst) != 0 {
                core::hint::spin_loop();
            }
        }
        self.writing.store(false, Ordering::Release);
    }
}

/// A read-side section of a [`Counted`] grace period; it ends when dropped. Reads take
/// `&section` (it dereferences to a [`ReadSection`]).
#[derive(Debug)]
pub struct CountedSection<'a> {
    grace: &'a Counted,
    parity: usize,
    section: ReadSection<'a>,
}

impl<'a> core::ops::Deref for CountedSection<'a> {
    type Target = ReadSection<'a>;

    fn deref(&self) -> &ReadSection<'a> {
        &self.section
    }
}

impl Drop for CountedSection<'_> {
    fn drop(&mut self) {
        self.grace.readers[self.parity].fetch_sub(1, Ordering::SeqCst);
    }
}

/// Another writer was changing the value at the same moment; nothing was changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct WriterBusy;

impl fmt::Display for WriterBusy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("another writer is changing the published value")
    }
}

/// A value readers use without a lock while writers replace it: see the module docs.
pub struct Published<T> {
    slots: [UnsafeCell<T>; 2],
    /// The slot readers use.
    active: AtomicUsize,
    /// A writer is rebuilding the inactive slot.
    writing: AtomicBool,
}

// SAFETY: readers get `&T` of the active slot only; a writer gets `&mut T` only of the inactive
// slot, which no reader holds (`Published::update`), and writers exclude each other
// (`writing`). The value is handed between threads, so `T: Send`; read from several at once,
// so `T: Sync`.
unsafe impl<T: Send + Sync> Sync for Published<T> {}

impl<T: Clone> Published<T> {
    /// `value`, published; the other slot starts as a copy of it.
    pub fn new(value: T) -> Self {
        Self::with_slots(value.clone(), value)
    }
}

impl<T> Published<T> {
    /// `active` published, `spare` the slot the first change rebuilds (for types too large to
    /// clone on the stack, both made in place by the caller).
    pub const fn with_slots(active: T, spare: T) -> Self {
        Self {
            slots: [UnsafeCell::new(active), UnsafeCell::new(spare)],
            active: AtomicUsize::new(0),
            writing: AtomicBool::new(false),
        }
    }

    /// The value readers see now, for as long as the section lasts.
    #[inline]
    pub fn read<'s>(&'s self, _section: &'s ReadSection<'_>) -> &'s T {
        // Acquire: pairs with the writer's release store, so the rebuilt slot is complete.
        let i = self.active.load(Ordering::Acquire) & 1;
        // SAFETY: slot `i` was active when loaded, and a writer rebuilds only the inactive slot
        // after a grace period that began after the switch away from it; our read-side section
        // (which began before this load) keeps that grace period from ending while the
        // reference lives.
        unsafe { &*self.slots[i].get() }
    }

    /// The value as it is now, through exclusive access (no reader can hold it).
    pub fn get_mut(&mut self) -> &mut T {
        let i = *self.active.get_mut() & 1;
        self.slots[i].get_mut()
    }

    /// Replaces the value: `rebuild` turns the inactive slot (last version but one) into the new
    /// value, which then becomes active, and the grace period is waited out before returning, so
    /// the old version may be rebuilt by the next change. Readers see the old or the new value,
    /// never a mix.
    ///
    /// # Errors
    ///
    /// [`WriterBusy`] when another writer runs at the same moment (nothing changes).
    pub fn update<G: GracePeriod + ?Sized>(
        &self,
        grace: &G,
        rebuild: impl FnOnce(&mut T),
    ) -> Result<(), WriterBusy> {
        if self
            .writing
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            return Err(WriterBusy);
        }
        let next = (self.active.load(Ordering::Relaxed) + 1) & 1;
        // SAFETY: we are the only writer (`writing`), and no reader holds slot `next`: every
        // section that could have loaded it before the switch away from it was waited out by
        // that switch's grace period (below, in the previous call), and sections that began
        // after the switch load the other slot.
        rebuild(unsafe { &mut *self.slots[next].get() });
        // Release: the rebuilt slot is complete before a reader can load its index.
        self.active.store(next, Ordering::Release);
        grace.synchronize();
        self.writing.store(false, Ordering::Release);
        Ok(())
    }
}

impl<T> fmt::Debug for Published<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Published")
            .field("active", &self.active.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    extern crate std;

    use std::thread;
    use std::vec::Vec;

    use super::*;

    const WORDS: usize = 64;

    #[test]
    fn readers_see_one_version_whole_while_a_writer_replaces_it() {
        let grace = Counted::new();
        let value = Published::new([0u64; WORDS]);
        let versions = if cfg!(miri) { 8 } else { 2000 };
        let done = AtomicBool::new(false);
        thread::scope(|s| {
            let readers: Vec<_> = (0..2)
                .map(|_| {
                    s.spawn(|| {
                        let (mut seen, mut reads) = (0u64, 0u64);
                        while !done.load(Ordering::SeqCst) || reads == 0 {
                            let section = grace.section();
                            let v = value.read(&section);
                            let first = v[0];
                            // Give the writer time to come round twice, as a slow reader would.
                            thread::yield_now();
                            assert!(v.iter().all(|&w| w == first), "a mix of two versions");
                            assert!(first >= seen, "an older version after a newer one");
                            seen = first;
                            reads += 1;
                        }
                    })
                })
                .collect();
            for n in 1..=versions {
                value.update(&grace, |v| v.fill(n)).unwrap();
            }
            done.store(true, Ordering::SeqCst);
            for r in readers {
                r.join().unwrap();
            }
        });
        let mut value = value;
        assert_eq!(value.get_mut()[0], versions);
    }

    #[test]
    fn a_second_writer_at_the_same_moment_changes_nothing() {
        let value = Published::new(1u32);
        let mut inner = None;
        value
            .update(&TakingTurns, |v| {
                inner = Some(value.update(&TakingTurns, |w| *w = 3));
                *v = 2;
            })
            .unwrap();
        assert_eq!(inner, Some(Err(WriterBusy)));
        // SAFETY: single-threaded, no writer runs while the section lives.
        let section = unsafe { ReadSection::new() };
        assert_eq!(*value.read(&section), 2);
    }
}
