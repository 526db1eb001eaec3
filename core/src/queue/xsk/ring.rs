//! The index rings between the application and the driver: fill, completion, RX and TX
//! ([`XskRing`]), and the descriptor of an RX or TX ring entry ([`XskDesc`]).

use core::cell::Cell;

/// An entry of an RX or TX ring: a frame in the UMEM. `addr` is the UMEM address of the frame's
/// first byte (chunk start + offset in the chunk), `len` its length.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct XskDesc {
    /// UMEM address of the first byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// Option bits (none are defined here; the driver writes 0 and ignores what it reads).
    pub options: u32,
}

/// Why a ring could not be made over the storage given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RingSizeError {
    /// Entries of the storage given.
    pub len: usize,
}

/// A single-producer, single-consumer ring of `T` over storage the caller owns, laid out as
/// AF_XDP lays its rings out: a power-of-two number of entries and two free-running 32-bit
/// indices, the producer's and the consumer's. The entry of index `i` is `slots[i & mask]`;
/// the ring holds `producer - consumer` entries (wrapping arithmetic), so it is full when that
/// equals the capacity and no entry is wasted.
///
/// For the fill and completion rings `T` is a UMEM address (`u64`); for RX and TX rings an
/// [`XskDesc`]. One side only produces, the other only consumes: the application produces into
/// the fill and TX rings, the driver into the RX and completion rings.
///
/// Both sides use the ring through a shared reference; the indices and entries are [`Cell`]s,
/// so the ring stays in one thread (it is not `Sync`): the model, the bare-metal image and the
/// tests, where the application runs in the driver's context. A host whose application runs
/// elsewhere (a user process) keeps its rings in shared memory with atomic indices and is a
/// provider of its own (the kernel module's `xsk_buff_pool`).
pub struct XskRing<'r, T> {
    slots: &'r [Cell<T>],
    mask: u32,
    producer: Cell<u32>,
    consumer: Cell<u32>,
}

impl<'r, T: Copy> XskRing<'r, T> {
    /// A ring over `slots`, empty.
    ///
    /// # Errors
    ///
    /// The length of `slots` is not a power of two, or not within 1..=2^31.
    pub fn new(slots: &'r [Cell<T>]) -> Result<Self, RingSizeError> {
        let len = slots.len();
        let ok = len.is_power_of_two() && len <= 1 << 31;
        if !ok {
            return Err(RingSizeError { len });
        }
        Ok(Self {
            slots,
            // CAST: len <= 2^31, so len - 1 fits u32.
            mask: (len - 1) as u32,
            producer: Cell::new(0),
            consumer: Cell::new(0),
        })
    }

    /// Entries the ring can hold.
    #[must_use]
    pub const fn capacity(&self) -> u32 {
        self.mask + 1
    }

    /// Entries in the ring now.
    #[must_use]
    pub fn len(&self) -> u32 {
        self.producer.get().wrapping_sub(self.consumer.get())
    }

    /// Whether the ring is empty.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entries the producer may still add.
    #[must_use]
    pub fn free(&self) -> u32 {
        self.capacity() - self.len()
    }

    /// The producer's index (free-running).
    #[must_use]
    pub fn producer(&self) -> u32 {
        self.producer.get()
    }

    /// The consumer's index (free-running).
    #[must_use]
    pub fn consumer(&self) -> u32 {
        self.consumer.get()
    }

    fn slot(&self, index: u32) -> &Cell<T> {
        // In bounds: the mask is below the storage's length.
        &self.slots[(index & self.mask) as usize]
    }

    /// Adds an entry (the producer's side).
    ///
    /// # Errors
    ///
    /// The ring is full: the entry comes back.
    pub fn produce(&self, entry: T) -> Result<(), T> {
        if self.free() == 0 {
            return Err(entry);
        }
        let p = self.producer.get();
        self.slot(p).set(entry);
        self.producer.set(p.wrapping_add(1));
        Ok(())
    }

    /// The oldest entry, left in the ring (the consumer's side).
    #[must_use]
    pub fn peek(&self) -> Option<T> {
        (!self.is_empty()).then(|| self.slot(self.consumer.get()).get())
    }

    /// Takes the oldest entry (the consumer's side).
    pub fn consume(&self) -> Option<T> {
        let e = self.peek()?;
        self.consumer.set(self.consumer.get().wrapping_add(1));
        Some(e)
    }

    /// The entries, oldest first, left in the ring (for a census or a debugger).
    pub fn entries(&self) -> impl Iterator<Item = T> + '_ {
        let c = self.consumer.get();
        (0..self.len()).map(move |i| self.slot(c.wrapping_add(i)).get())
    }
}

impl<T> core::fmt::Debug for XskRing<'_, T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("XskRing")
            .field("capacity", &(self.mask + 1))
            .field("producer", &self.producer.get())
            .field("consumer", &self.consumer.get())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::vec::Vec;

    use super::*;

    #[test]
    fn sizes_must_be_powers_of_two() {
        let s: Vec<Cell<u64>> = (0..6).map(|_| Cell::new(0)).collect();
        assert_eq!(XskRing::new(&s).err(), Some(RingSizeError { len: 6 }));
        assert!(XskRing::new(&s[..0]).is_err());
        assert!(XskRing::new(&s[..4]).is_ok());
        assert!(XskRing::new(&s[..1]).is_ok());
    }

    #[test]
    fn fifo_order_full_and_empty_across_the_index_wrap() {
        let s: Vec<Cell<u64>> = (0..4).map(|_| Cell::new(0)).collect();
        let r = XskRing::new(&s).unwrap();
        // Start just below the 32-bit wrap of both indices.
        r.producer.set(u32::MAX - 1);
        r.consumer.set(u32::MAX - 1);
        for i in 0..4 {
            r.produce(i).unwrap();
        }
        assert_eq!(r.produce(9), Err(9), "full: every entry used");
        assert_eq!(r.len(), 4);
        assert_eq!(r.entries().collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(r.peek(), Some(0));
        assert_eq!(r.consume(), Some(0));
        r.produce(4).unwrap();
        let got: Vec<_> = core::iter::from_fn(|| r.consume()).collect();
        assert_eq!(got, [1, 2, 3, 4]);
        assert!(r.is_empty());
        assert_eq!(r.consume(), None);
        assert_eq!(r.producer(), 3, "the indices wrapped");
    }
}
