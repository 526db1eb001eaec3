//! Interrupt moderation of the RX queues (`ethtool -c/-C rx-usecs, rx-frames`).
//!
//! The QDMA raises a queue's interrupt (and writes its completion status) when the completions
//! not yet reported reach a count threshold or when a timer started by the first of them runs
//! out, whichever comes first (trigger mode 5, hardware.md §8.5). Count and timer are not
//! given as values but as indices into two global tables written at bring-up: C2H_CNT_TH and
//! C2H_TIMER_CNT (hardware.md §3.1, `onic_hal::regs::qdma::tables`), whose timer ticks are
//! C2H_INT_TIMER_TICK user-clock cycles long (100 ns). A queue's indices sit in its completion
//! context and in every CMPT CIDX doorbell (hardware.md §5.6, §6): the doorbell that ends each
//! poll sets them again, so a change takes effect at each queue's next poll, with the queues
//! running and nothing to restart.

use onic_hal::regs::qdma::tables::{C2H_COUNT_THRESHOLDS, C2H_TIMER_COUNTS, C2H_TIMER_TICK_NS};

/// A queue's moderation: which entries of the two tables its trigger uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct RxModeration {
    timer_idx: u8,
    counter_idx: u8,
}

impl Default for RxModeration {
    fn default() -> Self {
        Self::REFERENCE
    }
}

impl RxModeration {
    /// The reference driver's: entry 0 of both tables (10 ticks = 1 µs, 64 completions).
    pub const REFERENCE: Self = Self {
        timer_idx: 0,
        counter_idx: 0,
    };

    /// Largest `rx-usecs`: the longest timer of the table, 200 ticks.
    pub const MAX_USECS: u32 = max(&C2H_TIMER_COUNTS) * C2H_TIMER_TICK_NS / 1000;
    /// Smallest `rx-frames`: the smallest count threshold of the table.
    pub const MIN_FRAMES: u32 = min(&C2H_COUNT_THRESHOLDS);
    /// Largest `rx-frames`: the largest count threshold of the table.
    pub const MAX_FRAMES: u32 = max(&C2H_COUNT_THRESHOLDS);

    /// The entries that come closest to `usecs` and `frames` without exceeding them: the queue
    /// never waits longer, nor for more completions, than asked (0 µs takes the shortest timer,
    /// 0.2 µs). Two entries of equal value: the lower index (the reference's entry 0 for 1 µs
    /// and 64 completions). `None` for a time above [`Self::MAX_USECS`] or a count outside
    /// [`Self::MIN_FRAMES`]`..=`[`Self::MAX_FRAMES`].
    #[must_use]
    pub fn for_request(usecs: u32, frames: u32) -> Option<Self> {
        if usecs > Self::MAX_USECS || !(Self::MIN_FRAMES..=Self::MAX_FRAMES).contains(&frames) {
            return None;
        }
        let ns = usecs.saturating_mul(1000);
        let timer = best_not_above(&C2H_TIMER_COUNTS, |ticks| ticks * C2H_TIMER_TICK_NS <= ns)
            .or_else(|| smallest(&C2H_TIMER_COUNTS))?;
        let counter = best_not_above(&C2H_COUNT_THRESHOLDS, |n| n <= frames)?;
        Some(Self {
            timer_idx: timer,
            counter_idx: counter,
        })
    }

    /// The timer's table index (C2H_TIMER_CNT).
    #[must_use]
    pub const fn timer_idx(self) -> u8 {
        self.timer_idx
    }

    /// The count threshold's table index (C2H_CNT_TH).
    #[must_use]
    pub const fn counter_idx(self) -> u8 {
        self.counter_idx
    }

    /// The timer in ns.
    #[must_use]
    pub fn timer_ns(self) -> u32 {
        C2H_TIMER_COUNTS
            .get(usize::from(self.timer_idx))
            .map_or(0, |t| t * C2H_TIMER_TICK_NS)
    }

    /// The timer in whole µs, as `ethtool -c` reports it (0.2 to 0.8 µs show as 0).
    #[must_use]
    pub fn usecs(self) -> u32 {
        self.timer_ns() / 1000
    }

    /// The count threshold in completions.
    #[must_use]
    pub fn frames(self) -> u32 {
        C2H_COUNT_THRESHOLDS
            .get(usize::from(self.counter_idx))
            .copied()
            .unwrap_or(0)
    }

    /// The two indices in one byte (timer high nibble), for an atomic.
    #[must_use]
    pub const fn to_bits(self) -> u8 {
        self.timer_idx << 4 | self.counter_idx & 0xF
    }

    /// Back from [`Self::to_bits`].
    #[must_use]
    pub const fn from_bits(bits: u8) -> Self {
        Self {
            timer_idx: bits >> 4,
            counter_idx: bits & 0xF,
        }
    }
}

/// The index of the largest entry that `fits`, the lowest index among equal ones.
fn best_not_above(table: &[u32], fits: impl Fn(u32) -> bool) -> Option<u8> {
    let mut best: Option<(u32, usize)> = None;
    for (i, &v) in table.iter().enumerate() {
        if fits(v) && best.is_none_or(|(b, _)| v > b) {
            best = Some((v, i));
        }
    }
    best.and_then(|(_, i)| u8::try_from(i).ok())
}

/// The index of the smallest entry.
fn smallest(table: &[u32]) -> Option<u8> {
    let mut best: Option<(u32, usize)> = None;
    for (i, &v) in table.iter().enumerate() {
        if best.is_none_or(|(b, _)| v < b) {
            best = Some((v, i));
        }
    }
    best.and_then(|(_, i)| u8::try_from(i).ok())
}

const fn max(t: &[u32]) -> u32 {
    let mut m = 0;
    let mut i = 0;
    while i < t.len() {
        if t[i] > m {
            m = t[i];
        }
        i += 1;
    }
    m
}

const fn min(t: &[u32]) -> u32 {
    let mut m = u32::MAX;
    let mut i = 0;
    while i < t.len() {
        if t[i] < m {
            m = t[i];
        }
        i += 1;
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reference_is_one_microsecond_and_64_completions() {
        let r = RxModeration::default();
        assert_eq!((r.timer_idx(), r.counter_idx()), (0, 0));
        assert_eq!((r.usecs(), r.timer_ns(), r.frames()), (1, 1000, 64));
        assert_eq!(RxModeration::for_request(1, 64), Some(r), "ties take entry 0");
        assert_eq!(RxModeration::from_bits(r.to_bits()), r);
    }

    #[test]
    fn requests_round_down_to_a_table_entry() {
        let m = RxModeration::for_request(7, 100).unwrap();
        assert_eq!((m.usecs(), m.frames()), (5, 96));
        let m = RxModeration::for_request(20, 192).unwrap();
        assert_eq!(
            (m.timer_idx(), m.counter_idx(), m.usecs(), m.frames()),
            (15, 15, 20, 192)
        );
        let m = RxModeration::for_request(0, 2).unwrap();
        assert_eq!((m.timer_ns(), m.frames()), (200, 2), "0 µs: the shortest timer");
        let m = RxModeration::for_request(3, 50).unwrap();
        assert_eq!((m.usecs(), m.frames()), (3, 48));
        assert_eq!(RxModeration::from_bits(m.to_bits()), m);
    }

    #[test]
    fn requests_outside_the_tables_are_refused() {
        assert_eq!(
            (
                RxModeration::MAX_USECS,
                RxModeration::MIN_FRAMES,
                RxModeration::MAX_FRAMES
            ),
            (20, 2, 192)
        );
        assert_eq!(RxModeration::for_request(21, 64), None);
        assert_eq!(RxModeration::for_request(1, 1), None);
        assert_eq!(RxModeration::for_request(1, 0), None);
        assert_eq!(RxModeration::for_request(1, 193), None);
        assert_eq!(RxModeration::for_request(u32::MAX, u32::MAX), None);
    }
}
