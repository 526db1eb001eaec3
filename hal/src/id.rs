//! The three kinds of index the QDMA and the shell use, each its own type so that one cannot be
//! passed where another is meant (hardware.md §1.3, §4.2, §6):
//!
//! - [`FunctionId`]: a PCI function of the shell (an OpenNIC PF, 0..=3).
//! - [`QueueId`]: a queue counted from its function's first queue: what the doorbells, the RSS
//!   indirection table and the OS's channels speak.
//! - [`AbsQueueId`]: a queue in the QDMA's own queue space: what the indirect contexts and the
//!   error registers speak.
//!
//! An absolute queue is the function's `qbase` plus a relative queue; [`FunctionId::abs_queue`]
//! and [`AbsQueueId::relative_to`] are the only ways across, and both check the function's range.

use core::fmt;

/// Number of PCI functions the shell's QDMA subsystem serves (hardware.md §1.3).
pub const MAX_FUNCTIONS: u8 = 4;

/// Queues each function may own: the driver places function `f`'s queues at absolute queue ids
/// `64 f ..` (hardware.md §1.3, `ONIC_MAX_QUEUES`).
pub const MAX_QUEUES_PER_FUNCTION: u16 = 64;

/// A PCI function of the shell (0..=3).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct FunctionId(u8);

impl FunctionId {
    /// Function 0, the master PF.
    pub const MASTER: Self = Self(0);

    /// The function `func`, if the shell serves it.
    #[must_use]
    pub const fn new(func: u8) -> Option<Self> {
        if func < MAX_FUNCTIONS {
            Some(Self(func))
        } else {
            None
        }
    }

    /// The function number.
    #[must_use]
    pub const fn get(self) -> u8 {
        self.0
    }

    /// The function number as an index into per-function tables.
    #[must_use]
    pub const fn index(self) -> usize {
        self.0 as usize
    }

    /// Whether this is the master PF (function 0), which programs the global CSRs, enables the
    /// CMACs and owns the error interrupt.
    #[must_use]
    pub const fn is_master(self) -> bool {
        self.0 == 0
    }

    /// The CMAC port this function's traffic uses and whose statistics and link it reports:
    /// CMAC 0 for function 0, CMAC 1 otherwise (hardware.md §1.3).
    #[must_use]
    pub const fn port(self) -> u8 {
        if self.0 == 0 {
            0
        } else {
            1
        }
    }

    /// Absolute id of the function's first queue.
    #[must_use]
    pub const fn qbase(self) -> AbsQueueId {
        AbsQueueId(self.0 as u16 * MAX_QUEUES_PER_FUNCTION)
    }

    /// The absolute id of the function's queue `qid`, if the function may own it.
    #[must_use]
    pub const fn abs_queue(self, qid: QueueId) -> Option<AbsQueueId> {
        if qid.0 < MAX_QUEUES_PER_FUNCTION {
            Some(AbsQueueId(self.qbase().0 + qid.0))
        } else {
            None
        }
    }
}

impl fmt::Display for FunctionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// The accessors and `Display` of a queue-number type (a `u16` inside).
macro_rules! queue_number {
    ($t:ident) => {
        impl $t {
            /// The queue number.
            #[must_use]
            pub const fn get(self) -> u16 {
                self.0
            }

            /// The queue number as an index into per-queue tables.
            #[must_use]
            pub const fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    };
}

/// A queue counted from its function's first queue (function-relative).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct QueueId(u16);

impl QueueId {
    /// The function's queue number `qid`. Whether the function has it is for its configuration
    /// to check.
    #[must_use]
    pub const fn new(qid: u16) -> Self {
        Self(qid)
    }
}

queue_number!(QueueId);

/// A queue in the QDMA's queue space (absolute: the function's `qbase` plus its relative id).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct AbsQueueId(u16);

impl AbsQueueId {
    /// The absolute queue `qid`, as a register field carries it (the context command's qid field,
    /// the first-error registers).
    #[must_use]
    pub const fn new(qid: u16) -> Self {
        Self(qid)
    }

    /// This queue counted from `func`'s first queue, if it falls in the function's range.
    #[must_use]
    pub const fn relative_to(self, func: FunctionId) -> Option<QueueId> {
        let base = func.qbase().0;
        if self.0 >= base && self.0 - base < MAX_QUEUES_PER_FUNCTION {
            Some(QueueId(self.0 - base))
        } else {
            None
        }
    }
}

queue_number!(AbsQueueId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_are_checked() {
        assert_eq!(FunctionId::new(3).map(FunctionId::get), Some(3));
        assert_eq!(FunctionId::new(4), None);
        assert!(FunctionId::MASTER.is_master());
        assert_eq!(FunctionId::new(2).unwrap().port(), 1);
    }

    #[test]
    fn absolute_and_relative_queues_convert_within_the_function() {
        let pf1 = FunctionId::new(1).unwrap();
        assert_eq!(pf1.qbase(), AbsQueueId::new(64));
        assert_eq!(pf1.abs_queue(QueueId::new(5)), Some(AbsQueueId::new(69)));
        assert_eq!(pf1.abs_queue(QueueId::new(64)), None);
        assert_eq!(AbsQueueId::new(69).relative_to(pf1), Some(QueueId::new(5)));
        assert_eq!(AbsQueueId::new(63).relative_to(pf1), None);
        assert_eq!(AbsQueueId::new(128).relative_to(pf1), None);
    }
}
