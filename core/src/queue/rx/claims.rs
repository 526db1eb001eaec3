//! What the device claims, checked: the completion status record's producer index (validated),
//! the work a device claims that a poll cannot find ([`Claim`]) and the count of such polls that
//! puts the queue in its error state, and the completions left unconsumed at a restart.

use onic_hal::layout::desc::{CmptEntry, WbStatus, C2H_DESC_BYTES};
use onic_hal::DmaMemory;

use super::RxQueue;
use crate::error::QueueError;
use crate::queue::pool::PoolPage;
use crate::queue::ring::Color;

/// Why a poll that consumed nothing thinks the device claims work.
#[derive(Clone, Copy)]
pub(super) enum Claim {
    /// The status record reports completions up to `pidx`; the entry at `cidx` lacks the
    /// expected color.
    NotVisible { cidx: u16, pidx: u16 },
    /// The entry at `cidx` has the expected color, the status record does not report it.
    Unreported { cidx: u16 },
    /// Everything reported is consumed, but the device's C2H consumer index is `device`, not the
    /// driver's `driver`.
    OutOfStep { device: u16, driver: u16 },
}

impl Claim {
    const fn error(self, polls: u16) -> QueueError {
        match self {
            Self::NotVisible { cidx, pidx } => QueueError::CmptNotVisible { cidx, pidx, polls },
            Self::Unreported { cidx } => QueueError::CmptUnreported { cidx, polls },
            Self::OutOfStep { device, driver } => QueueError::C2hOutOfStep {
                device,
                driver,
                polls,
            },
        }
    }
}

impl<D: DmaMemory, Pg: PoolPage, St: AsMut<[Option<Pg>]>> RxQueue<D, Pg, St> {
    /// Counts a poll that made no progress while the device claims work; enters the error state
    /// (and returns `true`) once [`RxOptions::stall_polls`] such polls came in a row.
    ///
    /// [`RxOptions::stall_polls`]: super::RxOptions::stall_polls
    pub(super) fn stall(&mut self, claim: Claim) -> bool {
        self.stats.stall_polls += 1;
        self.stalled = self.stalled.saturating_add(1);
        if self.opts.stall_polls == 0 || self.stalled < self.opts.stall_polls {
            return false;
        }
        self.fail(claim.error(self.stalled));
        true
    }

    /// After a poll consumed everything the status record reported: whether the device claims
    /// more anyway. An entry of the expected color at the consumer index is a completion the
    /// record does not report; a C2H consumer index (from the descriptor ring's status record)
    /// other than the driver's means the device consumed descriptors no consumed completion
    /// accounts for, or the completions claimed descriptors the device never used.
    pub(super) fn idle_claim(&self) -> Option<Claim> {
        let off = self.cmpt_stride * usize::from(self.cmpt_cidx);
        let entry = CmptEntry::from_word(self.cmpt.read_u64(off));
        if Color::from_bit(entry.color()) == self.color {
            return Some(Claim::Unreported { cidx: self.cmpt_cidx });
        }
        if !self.opts.check_c2h_status || !self.started {
            return None;
        }
        let rec = WbStatus::from_word(
            self.desc
                .region
                .read_u64(C2H_DESC_BYTES * usize::from(self.didx.len())),
        );
        let device = rec.cidx();
        (device != self.head).then_some(Claim::OutOfStep {
            device,
            driver: self.head,
        })
    }

    /// The completion status record's producer index, validated; an index outside the ring
    /// puts the queue in its error state.
    pub(super) fn status_pidx(&mut self) -> Option<u16> {
        let pidx = self.read_status().pidx();
        if self.cring.contains(pidx) {
            Some(pidx)
        } else {
            self.fail(QueueError::CmptPidxOutOfRange {
                pidx,
                usable: self.cring.len(),
            });
            None
        }
    }

    /// As [`Self::status_pidx`] for the re-check after arming: a bad index is left for the next
    /// poll to report.
    pub(super) fn status_pidx_quiet(&self) -> Option<u16> {
        let pidx = self.read_status().pidx();
        self.cring.contains(pidx).then_some(pidx)
    }

    fn read_status(&self) -> WbStatus {
        let off = self.cmpt_stride * usize::from(self.cring.len());
        WbStatus::from_word(self.cmpt.read_u64(off))
    }

    /// Completions the device wrote that the queue has not consumed: as many as the status
    /// record reports (when its index is valid), or as many entries in a row carry the expected
    /// color, whichever is more.
    pub(super) fn unconsumed(&self) -> u16 {
        let reported = self
            .status_pidx_quiet()
            .map_or(0, |p| self.cring.distance(self.cmpt_cidx, p));
        let mut visible = 0;
        let (mut i, mut color) = (self.cmpt_cidx, self.color);
        while visible < self.cring.len() {
            let entry = CmptEntry::from_word(self.cmpt.read_u64(self.cmpt_stride * usize::from(i)));
            if Color::from_bit(entry.color()) != color {
                break;
            }
            visible += 1;
            i = self.cring.next(i);
            if i == 0 {
                color = color.flip();
            }
        }
        reported.max(visible)
    }
}
