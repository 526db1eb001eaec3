//! [`PublishedHasher`]: the shell's hash under the key the shell holds, as every datapath reads it.

use onic_hal::grace::{GracePeriod, Published, ReadSection, WriterBusy};

use super::{RssKey, ShellHasher};

/// The software copy of one function's RSS hash, for the datapaths that hash frames themselves
/// (the packet's hash for the OS, XDP's RX-hash metadata): a [`ShellHasher`] for the key the
/// shell holds, published through a grace period ([`onic_hal::grace`]).
///
/// Its one writer is the function's [`Rss`](crate::device::rss_control::Rss): whenever a change
/// writes a new key to the shell, the same call rebuilds the hasher, so the two never disagree
/// after the call returns. Datapaths read it inside a read-side section and see the old key's
/// hasher or the new one, whole, never a mix.
///
/// 26 KiB (two hashers of 13 KiB): hosts keep it where their datapaths reach it, in a `static` or
/// on the heap, built in place (`new` is `const`).
pub struct PublishedHasher(Published<ShellHasher>);

impl PublishedHasher {
    /// A hasher for `key`, the key the function's shell holds now (after bring-up: the RTL's reset
    /// key, [`RssKey::DEFAULT`]).
    #[must_use]
    pub const fn new(key: &RssKey) -> Self {
        Self(Published::with_slots(
            ShellHasher::new(key),
            ShellHasher::new(key),
        ))
    }

    /// The hasher datapaths use now, for as long as the read-side section lasts.
    #[inline]
    pub fn read<'s>(&'s self, section: &'s ReadSection<'_>) -> &'s ShellHasher {
        self.0.read(section)
    }

    /// Makes `key` the published key: the spare hasher is rebuilt for it and made current, then
    /// the grace period is waited out. For [`Rss`](crate::device::rss_control::Rss) only.
    pub(crate) fn rekey<G: GracePeriod + ?Sized>(&self, grace: &G, key: &RssKey) -> Result<(), WriterBusy> {
        self.0.update(grace, |h| h.rekey(key))
    }

    /// The current hasher, through exclusive access (no writer can run meanwhile, so no
    /// read-side section is needed).
    pub fn current(&mut self) -> &ShellHasher {
        self.0.get_mut()
    }

    /// The key of the current hasher, through exclusive access.
    pub fn current_key(&mut self) -> RssKey {
        *self.current().key()
    }
}

impl core::fmt::Debug for PublishedHasher {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_tuple("PublishedHasher").field(&self.0).finish()
    }
}
