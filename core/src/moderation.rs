//! Interrupt moderation of the RX queues (`ethtool -c/-C rx-usecs, rx-frames, adaptive-rx`).
//!
//! The QDMA raises a queue's interrupt (and writes its completion status) when the completions
//! not yet reported reach a count threshold or when a timer started by the first of them runs
//! out, whichever comes first (trigger mode 5, hardware.md §8.5). Count and timer are not
//! given as values but as indices into two tables of 16 entries: C2H_CNT_TH and C2H_TIMER_CNT
//! (hardware.md §3.1, `onic_hal::regs::qdma::tables`), written once by the master function at
//! bring-up and shared by every function, whose timer ticks are C2H_INT_TIMER_TICK user-clock
//! cycles long (100 ns). The tables are never rewritten: a setting is a pair of indices, and
//! each queue has its own pair.
//!
//! # Changing a running queue's indices
//!
//! A queue's indices sit in two places: its completion (CMPT) context (hardware.md §5.6) and
//! every CMPT CIDX doorbell (hardware.md §6), whose counter_idx and timer_idx fields the IP
//! takes as the queue's trigger from that write on. The context is written only at bring-up,
//! after a CLEAR (hardware.md §5.8): a WRITE to a running queue's context would also set its
//! ring indices, color and valid bit, and lose the completions in flight. So a running queue
//! changes its indices only through the doorbell that ends each poll: the new pair is stored in
//! [`RxModerations`] (a relaxed atomic per queue), the queue's next poll reads it and writes it
//! with its CIDX, and a queue started later gets it in its context. Nothing is stopped, no
//! completion is rewritten, and a poll that read the old pair sets the new one at its next
//! doorbell.
//!
//! # Fixed and adaptive
//!
//! `ethtool -C rx-usecs, rx-frames` sets one pair for every queue of the function ([`Fixed`]).
//! `ethtool -C adaptive-rx on` hands each queue to the OS's adaptive moderation (Linux: the DIM
//! library), which picks one of [`ADAPTIVE_LEVELS`] levels per queue from what the queue
//! received; [`RxModeration::adaptive`] maps the levels onto table entries. `adaptive-rx off`
//! puts every queue back on the fixed pair, which a late level change can no longer undo (the
//! per-queue word carries whether the queue is adaptive, and a level change is a
//! compare-exchange on it).
//!
//! [`Fixed`]: QueueModeration::Fixed

use core::fmt;
use core::sync::atomic::{AtomicBool, AtomicU16, AtomicU8, Ordering};

use onic_hal::id::MAX_QUEUES_PER_FUNCTION;
use onic_hal::regs::qdma::tables::{C2H_COUNT_THRESHOLDS, C2H_TIMER_COUNTS, C2H_TIMER_TICK_NS};
use onic_hal::QueueId;

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

    /// The table entries of adaptive level `level` (0 moderates least): the ladder DIM climbs
    /// as a queue's traffic grows. Each level waits longer and for more completions than the
    /// one below; level 0 fires no later than the reference (1 µs, 16 completions), level 4 is
    /// the tables' largest (20 µs, 192).
    ///
    /// # Errors
    ///
    /// [`ModerationError::Level`] for a level from [`ADAPTIVE_LEVELS`] on.
    pub const fn adaptive(level: u8) -> Result<Self, ModerationError> {
        if level as usize >= LADDER.len() {
            return Err(ModerationError::Level { level });
        }
        Ok(LADDER[level as usize])
    }
}

/// Adaptive levels: the five profiles of Linux's DIM library (`NET_DIM_PARAMS_NUM_PROFILES`).
pub const ADAPTIVE_LEVELS: u8 = 5;

/// The level every queue starts at when adaptive moderation is turned on (DIM's default
/// profile index, `NET_DIM_DEF_PROFILE_EQE`).
pub const ADAPTIVE_START: u8 = 1;

/// The adaptive ladder as (timer, count) indices into the tables of hardware.md §3.1:
/// 10 ticks and 16, 30 and 32, 50 and 64, 100 and 128, 200 and 192.
const LADDER: [RxModeration; ADAPTIVE_LEVELS as usize] = [
    RxModeration {
        timer_idx: 0,
        counter_idx: 4,
    },
    RxModeration {
        timer_idx: 9,
        counter_idx: 6,
    },
    RxModeration {
        timer_idx: 10,
        counter_idx: 0,
    },
    RxModeration {
        timer_idx: 12,
        counter_idx: 11,
    },
    RxModeration {
        timer_idx: 15,
        counter_idx: 15,
    },
];

/// Why a queue's moderation was not changed (nothing was).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
#[non_exhaustive]
pub enum ModerationError {
    /// A queue the function does not have.
    Queue {
        /// The queue asked for.
        qid: u16,
        /// The function's queues.
        queues: u16,
    },
    /// An adaptive level from [`ADAPTIVE_LEVELS`] on.
    Level {
        /// The level asked for.
        level: u8,
    },
    /// A level change for a queue on the fixed setting: adaptive moderation is off (or was
    /// turned off after the change was decided).
    NotAdaptive {
        /// The queue.
        qid: u16,
    },
}

impl fmt::Display for ModerationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::Queue { qid, queues } => {
                write!(f, "RX queue {qid}: the function has {queues} queues")
            }
            Self::Level { level } => write!(f, "adaptive level {level}: the levels are 0..{ADAPTIVE_LEVELS}"),
            Self::NotAdaptive { qid } => write!(
                f,
                "RX queue {qid} is on the fixed moderation (adaptive-rx is off)"
            ),
        }
    }
}

impl core::error::Error for ModerationError {}

/// One RX queue's moderation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum QueueModeration {
    /// The function's fixed setting (`ethtool -C rx-usecs, rx-frames`).
    Fixed(RxModeration),
    /// Adaptive, at this level of [`RxModeration::adaptive`].
    Adaptive(u8),
}

/// Bit of a queue word: the queue is adaptive, its level in bits 10:8.
const ADAPTIVE_BIT: u16 = 1 << 15;

impl QueueModeration {
    /// The table entries the queue's trigger uses.
    #[must_use]
    pub fn entries(self) -> RxModeration {
        match self {
            Self::Fixed(m) => m,
            Self::Adaptive(level) => RxModeration::adaptive(level).unwrap_or_default(),
        }
    }

    const fn to_word(self) -> u16 {
        match self {
            Self::Fixed(m) => m.to_bits() as u16,
            Self::Adaptive(level) => ADAPTIVE_BIT | (level as u16 & 7) << 8,
        }
    }

    const fn from_word(w: u16) -> Self {
        if w & ADAPTIVE_BIT != 0 {
            Self::Adaptive((w >> 8 & 7) as u8)
        } else {
            // CAST: the low byte holds `RxModeration::to_bits`.
            Self::Fixed(RxModeration::from_bits(w as u8))
        }
    }
}

/// The RX moderation of one function: its fixed setting, whether adaptive moderation is on,
/// and each queue's current setting, which its doorbells and context carry. Every access is
/// `Relaxed`: each word carries only itself. The fixed setting and the on/off switch are
/// written by the control path only (one writer at a time); a queue's word also by the OS's
/// adaptive algorithm, through [`Self::set_level`], which only changes an adaptive queue.
#[derive(Debug)]
pub struct RxModerations {
    fixed: AtomicU8,
    adaptive: AtomicBool,
    queues: [AtomicU16; MAX_QUEUES_PER_FUNCTION as usize],
}

impl Default for RxModerations {
    fn default() -> Self {
        Self::new()
    }
}

impl RxModerations {
    /// The reference's setting on every queue, adaptive moderation off.
    #[must_use]
    pub const fn new() -> Self {
        const REF: u16 = QueueModeration::Fixed(RxModeration::REFERENCE).to_word();
        Self {
            fixed: AtomicU8::new(RxModeration::REFERENCE.to_bits()),
            adaptive: AtomicBool::new(false),
            queues: [const { AtomicU16::new(REF) }; MAX_QUEUES_PER_FUNCTION as usize],
        }
    }

    /// The fixed setting (`ethtool -c rx-usecs, rx-frames`), also while adaptive is on.
    #[must_use]
    pub fn fixed(&self) -> RxModeration {
        RxModeration::from_bits(self.fixed.load(Ordering::Relaxed))
    }

    /// Whether adaptive moderation is on (`ethtool -c adaptive-rx`).
    #[must_use]
    pub fn is_adaptive(&self) -> bool {
        self.adaptive.load(Ordering::Relaxed)
    }

    /// Sets the fixed setting: every queue takes it at once unless adaptive moderation is on,
    /// in which case it waits for `adaptive-rx off`. Control path only.
    pub fn set_fixed(&self, m: RxModeration) {
        self.fixed.store(m.to_bits(), Ordering::Relaxed);
        if !self.is_adaptive() {
            self.put_all(QueueModeration::Fixed(m));
        }
    }

    /// Turns adaptive moderation on (every queue at [`ADAPTIVE_START`]) or off (every queue
    /// back on the fixed setting). Turning on what is on, or off what is off, changes nothing:
    /// the queues keep their levels. Control path only.
    pub fn set_adaptive(&self, on: bool) {
        if self.adaptive.swap(on, Ordering::Relaxed) == on {
            return;
        }
        self.put_all(if on {
            QueueModeration::Adaptive(ADAPTIVE_START)
        } else {
            QueueModeration::Fixed(self.fixed())
        });
    }

    /// Queue `qid`'s current setting (any queue id of the function; `None` beyond
    /// [`MAX_QUEUES_PER_FUNCTION`]).
    #[must_use]
    pub fn queue(&self, qid: QueueId) -> Option<QueueModeration> {
        let w = self.queues.get(usize::from(qid.get()))?;
        Some(QueueModeration::from_word(w.load(Ordering::Relaxed)))
    }

    /// Moves adaptive queue `qid` to `level`, returning the entries its next doorbell carries.
    /// Any context: a compare-exchange on the queue's word, which fails for a queue on the
    /// fixed setting, so a decision taken before `adaptive-rx off` cannot land after it.
    ///
    /// # Errors
    ///
    /// [`ModerationError::Level`] for a level beyond the ladder, [`ModerationError::Queue`]
    /// beyond [`MAX_QUEUES_PER_FUNCTION`], [`ModerationError::NotAdaptive`] for a queue on the
    /// fixed setting.
    pub fn set_level(&self, qid: QueueId, level: u8) -> Result<RxModeration, ModerationError> {
        let m = RxModeration::adaptive(level)?;
        let word = self
            .queues
            .get(usize::from(qid.get()))
            .ok_or(ModerationError::Queue {
                qid: qid.get(),
                queues: MAX_QUEUES_PER_FUNCTION,
            })?;
        let new = QueueModeration::Adaptive(level).to_word();
        word.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |w| {
            (w & ADAPTIVE_BIT != 0).then_some(new)
        })
        .map_err(|_| ModerationError::NotAdaptive { qid: qid.get() })?;
        Ok(m)
    }

    fn put_all(&self, q: QueueModeration) {
        for w in &self.queues {
            w.store(q.to_word(), Ordering::Relaxed);
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

    #[test]
    fn the_adaptive_ladder_climbs_through_table_entries() {
        let mut prev: Option<RxModeration> = None;
        for level in 0..ADAPTIVE_LEVELS {
            let m = RxModeration::adaptive(level).unwrap();
            // Each level is a pair of table entries `ethtool -C` would also pick.
            assert_eq!(
                RxModeration::for_request(m.usecs(), m.frames()),
                Some(m),
                "level {level}"
            );
            if let Some(p) = prev {
                assert!(
                    m.timer_ns() > p.timer_ns() && m.frames() > p.frames(),
                    "level {level}"
                );
            }
            prev = Some(m);
        }
        let low = RxModeration::adaptive(0).unwrap();
        assert_eq!((low.usecs(), low.frames()), (1, 16));
        let high = RxModeration::adaptive(ADAPTIVE_LEVELS - 1).unwrap();
        assert_eq!(
            (high.usecs(), high.frames()),
            (RxModeration::MAX_USECS, RxModeration::MAX_FRAMES)
        );
        assert_eq!(
            RxModeration::adaptive(ADAPTIVE_LEVELS),
            Err(ModerationError::Level { level: 5 })
        );
        assert_eq!(
            RxModeration::adaptive(u8::MAX),
            Err(ModerationError::Level { level: 255 })
        );
    }

    fn q(n: u16) -> QueueId {
        QueueId::new(n)
    }

    #[test]
    fn queues_follow_the_fixed_setting_until_adaptive_is_on() {
        let m = RxModerations::new();
        assert!(!m.is_adaptive());
        assert_eq!(
            m.queue(q(0)),
            Some(QueueModeration::Fixed(RxModeration::REFERENCE))
        );
        let f = RxModeration::for_request(10, 128).unwrap();
        m.set_fixed(f);
        assert_eq!(m.queue(q(63)), Some(QueueModeration::Fixed(f)));
        assert_eq!(m.queue(q(64)), None);
        assert_eq!(
            m.set_level(q(3), 2),
            Err(ModerationError::NotAdaptive { qid: 3 }),
            "no level change while off"
        );
        assert_eq!(m.queue(q(3)), Some(QueueModeration::Fixed(f)));

        m.set_adaptive(true);
        assert!(m.is_adaptive());
        assert_eq!(m.queue(q(5)), Some(QueueModeration::Adaptive(ADAPTIVE_START)));
        assert_eq!(m.set_level(q(5), 4), RxModeration::adaptive(4));
        assert_eq!(
            m.queue(q(5)).unwrap().entries(),
            RxModeration::adaptive(4).unwrap()
        );
        assert_eq!(
            m.queue(q(6)),
            Some(QueueModeration::Adaptive(ADAPTIVE_START)),
            "per queue"
        );
        m.set_adaptive(true);
        assert_eq!(
            m.queue(q(5)),
            Some(QueueModeration::Adaptive(4)),
            "on again: kept"
        );

        // A fixed change while adaptive waits for `adaptive-rx off`.
        let g = RxModeration::for_request(0, 2).unwrap();
        m.set_fixed(g);
        assert_eq!(m.fixed(), g);
        assert_eq!(m.queue(q(5)), Some(QueueModeration::Adaptive(4)));
        m.set_adaptive(false);
        for n in 0..MAX_QUEUES_PER_FUNCTION {
            assert_eq!(m.queue(q(n)), Some(QueueModeration::Fixed(g)), "queue {n}");
        }
    }

    #[test]
    fn a_level_decided_before_adaptive_went_off_does_not_land() {
        let m = RxModerations::new();
        m.set_adaptive(true);
        m.set_adaptive(false);
        // The OS's work item ran late: the queue stays on the fixed setting.
        assert_eq!(m.set_level(q(1), 3), Err(ModerationError::NotAdaptive { qid: 1 }));
        assert_eq!(
            m.queue(q(1)),
            Some(QueueModeration::Fixed(RxModeration::REFERENCE))
        );
        m.set_adaptive(true);
        assert_eq!(
            m.set_level(q(64), 0),
            Err(ModerationError::Queue { qid: 64, queues: 64 })
        );
        assert_eq!(m.set_level(q(1), 5), Err(ModerationError::Level { level: 5 }));
        assert_eq!(m.queue(q(1)), Some(QueueModeration::Adaptive(ADAPTIVE_START)));
    }

    #[test]
    fn queue_words_round_trip() {
        for level in 0..ADAPTIVE_LEVELS {
            let a = QueueModeration::Adaptive(level);
            assert_eq!(QueueModeration::from_word(a.to_word()), a);
        }
        for (u, f) in [(1, 64), (0, 2), (20, 192), (5, 96)] {
            let x = QueueModeration::Fixed(RxModeration::for_request(u, f).unwrap());
            assert_eq!(QueueModeration::from_word(x.to_word()), x);
        }
    }
}
