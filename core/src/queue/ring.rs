//! Ring index arithmetic and the completion color (hardware.md §8.2, §8.4).
//!
//! Every QDMA ring has `count` entries of which the last holds the status record, so indices run
//! `0..usable` (`usable = count - 1`) and wrap modulo `usable`. The helpers here never produce an
//! index outside `0..usable`, whatever they are given: a value read from device memory that went
//! through them can at worst name the wrong slot, never a slot outside the ring. Callers still
//! validate device-written indices first (see the RX and TX queues) so that "wrong slot" is caught
//! too.

/// The index space of one ring: `0..len`, wrapping modulo `len`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Ring {
    len: u16,
}

impl Ring {
    /// The index space of a ring with `len` usable entries; `None` below 2 (a ring with one usable
    /// entry can never hold anything, because a full ring keeps one entry free).
    #[must_use]
    pub const fn new(len: u16) -> Option<Self> {
        if len >= 2 {
            Some(Self { len })
        } else {
            None
        }
    }

    /// Number of usable entries.
    #[must_use]
    #[allow(clippy::len_without_is_empty)] // never empty: `new` refuses fewer than 2 entries
    pub const fn len(self) -> u16 {
        self.len
    }

    /// Whether `i` names an entry of the ring.
    #[must_use]
    pub const fn contains(self, i: u16) -> bool {
        i < self.len
    }

    /// `i + n`, wrapped. Computed in 32 bits, so it cannot overflow.
    ///
    /// The common case (an index of the ring plus at most a ring's length) wraps with one
    /// comparison instead of a division; anything else takes the remainder. Both give
    /// `(i + n) % len`.
    #[must_use]
    #[inline]
    pub const fn add(self, i: u16, n: u16) -> u16 {
        let len = self.len as u32;
        let sum = i as u32 + n as u32;
        if i < self.len && n <= self.len {
            // sum < 2 * len
            (if sum >= len { sum - len } else { sum }) as u16
        } else {
            // `len` is at least 1 (the constructor's check); saying so spares a panic path.
            (sum % nonzero(len)) as u16
        }
    }

    /// The entry after `i` (`(i + 1) % len`, with one comparison for an entry of the ring).
    #[must_use]
    #[inline]
    pub const fn next(self, i: u16) -> u16 {
        if i < self.len - 1 {
            i + 1
        } else {
            self.add(i, 1)
        }
    }

    /// How many steps forward `to` is from `from` (0 when equal).
    ///
    /// Without divisions when both are entries of the ring (the common case); otherwise each is
    /// reduced modulo `len` first. Both give `(to % len + len - from % len) % len`.
    #[must_use]
    #[inline]
    pub const fn distance(self, from: u16, to: u16) -> u16 {
        if from < self.len && to < self.len {
            if to >= from {
                to - from
            } else {
                // to + len - from < len, and cannot overflow: computed in 32 bits.
                (to as u32 + self.len as u32 - from as u32) as u16
            }
        } else {
            let len = nonzero(self.len as u32);
            ((to as u32 % len + len - from as u32 % len) % len) as u16
        }
    }

    /// Whether `x` lies in the forward window from `from` to `to`, both ends included. This is the
    /// check for a device-reported consumer index: it must not be behind what was already cleaned
    /// nor ahead of what was handed to the device.
    #[must_use]
    pub const fn within(self, from: u16, to: u16, x: u16) -> bool {
        self.contains(x) && self.distance(from, x) <= self.distance(from, to)
    }

    /// Entries in use between a consumer index and a producer index.
    #[must_use]
    pub const fn used(self, cidx: u16, pidx: u16) -> u16 {
        self.distance(cidx, pidx)
    }

    /// Entries a producer may still fill: a full ring keeps one entry free so that "full" and
    /// "empty" differ (`pidx == cidx` means empty).
    #[must_use]
    pub const fn free(self, cidx: u16, pidx: u16) -> u16 {
        self.len - 1 - self.used(cidx, pidx)
    }
}

/// The color (phase) bit of a completion ring. The device writes each entry with its current color
/// and flips it every time its producer index wraps to 0; the driver expects color 1 on the first
/// lap (the completion context's initial color, hardware.md §5.6) and flips its expectation
/// whenever its own consumer index wraps. An entry is new exactly when its color equals the
/// expected one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct Color(bool);

impl Color {
    /// The color of the first lap.
    pub(crate) const INITIAL: Self = Self(true);

    /// The color a bit read from an entry or status record stands for.
    #[must_use]
    pub(crate) const fn from_bit(bit: bool) -> Self {
        Self(bit)
    }

    /// The bit.
    #[must_use]
    pub const fn bit(self) -> bool {
        self.0
    }

    /// The other color.
    #[must_use]
    pub const fn flip(self) -> Self {
        Self(!self.0)
    }
}

/// `n`, or 1 for 0: a divisor the compiler knows is not zero.
const fn nonzero(n: u32) -> u32 {
    if n == 0 {
        1
    } else {
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_wraps() {
        let r = Ring::new(63).unwrap();
        assert_eq!(r.next(62), 0);
        assert_eq!(r.add(60, 5), 2);
        assert_eq!(r.add(u16::MAX, u16::MAX), ((2 * 65535u32) % 63) as u16);
        assert_eq!(r.distance(60, 2), 5);
        assert_eq!(r.distance(2, 2), 0);
        assert_eq!(r.free(0, 0), 62);
        assert_eq!(r.free(5, 4), 0);
        assert!(Ring::new(1).is_none());
    }

    #[test]
    fn out_of_range_inputs_stay_in_range() {
        let r = Ring::new(1023).unwrap();
        for x in [1023, 4000, u16::MAX] {
            assert!(r.add(x, 1) < 1023);
            assert!(r.distance(x, 0) < 1023);
            assert!(!r.within(0, 10, x));
        }
    }

    #[test]
    fn within_window() {
        let r = Ring::new(10).unwrap();
        // Window 8 -> 2 (wrapping): 8, 9, 0, 1, 2.
        for x in [8, 9, 0, 1, 2] {
            assert!(r.within(8, 2, x), "{x}");
        }
        for x in [3, 4, 7] {
            assert!(!r.within(8, 2, x), "{x}");
        }
        assert!(r.within(4, 4, 4));
        assert!(!r.within(4, 4, 5));
    }

    #[test]
    fn largest_ring_wraps_like_the_remainder() {
        let r = Ring::new(u16::MAX).unwrap();
        assert_eq!(r.add(u16::MAX - 1, 1), 0);
        assert_eq!(r.add(u16::MAX - 1, u16::MAX), u16::MAX - 1);
        assert_eq!(r.next(u16::MAX - 1), 0);
        assert_eq!(r.distance(u16::MAX - 1, 0), 1);
    }

    #[test]
    fn color_flips() {
        assert!(Color::INITIAL.bit());
        assert_eq!(Color::INITIAL.flip().flip(), Color::INITIAL);
        assert_eq!(Color::from_bit(false), Color::INITIAL.flip());
    }

    proptest::proptest! {
        #[test]
        #[cfg_attr(miri, ignore)]
        fn add_and_distance_equal_the_remainder_formulas(len in 2u16.., i in 0u16.., n in 0u16..) {
            // The division-free paths must give exactly what the plain remainders give, for
            // in-range and out-of-range inputs alike (small values make in-range inputs likely).
            // `len + 1` is taken in u32: `len` may be u16::MAX (the remainder still fits u16).
            let n_wide = (u32::from(n) % (u32::from(len) + 1)) as u16;
            for (i, n) in [(i, n), (i % len, n % len), (i % len, n_wide), (i % len, len)] {
                let l = u32::from(len);
                let r = Ring::new(len).unwrap();
                proptest::prop_assert_eq!(u32::from(r.add(i, n)), (u32::from(i) + u32::from(n)) % l);
                proptest::prop_assert_eq!(u32::from(r.next(i)), (u32::from(i) + 1) % l);
                proptest::prop_assert_eq!(
                    u32::from(r.distance(i, n)),
                    (u32::from(n) % l + l - u32::from(i) % l) % l
                );
            }
        }

        #[test]
        #[cfg_attr(miri, ignore)]
        fn distance_inverts_add(len in 2u16.., i in 0u16.., n in 0u16..) {
            let r = Ring::new(len).unwrap();
            let i = i % len;
            let n = n % len;
            proptest::prop_assert_eq!(r.distance(i, r.add(i, n)), n);
            proptest::prop_assert!(r.within(i, r.add(i, n), r.add(i, n / 2)));
        }
    }
}
