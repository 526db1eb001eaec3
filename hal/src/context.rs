//! Running the QDMA's indirect context commands (hardware.md §5.1), and [`Quiesced`], the proof
//! that a queue's contexts were invalidated.
//!
//! A queue's rings and posted pages may be given back to the allocator only once the device no
//! longer reaches them. That moment is the end of the queue's context INVALIDATE commands
//! (hardware.md §5.8, §13.4): with its contexts invalid the queue fetches no descriptor and writes
//! no completion or packet. [`invalidate_queue`] runs those commands and, when every one of them
//! completed, hands out a [`Quiesced`] token; nothing else in safe code makes one. The token is
//! what [`CoherentRegion::release`](crate::dma::CoherentRegion::release) asks for, and what the
//! driver core asks for before it gives a queue's pages back to their pool.

use crate::layout::ctxt::{CtxtOp, CtxtSel, IndCtxtCmd};
use crate::regs::qdma;
use crate::{AbsQueueId, DelayNs, RegisterAccess, RegisterWindow, SharedGuard, SharedLock};

/// Reads of IND_CTXT_CMD before a busy command is given up (hardware.md §5.1: about 500 ms).
pub const CTXT_POLL_LIMIT: u32 = 5000;
/// Wait between two reads of a busy IND_CTXT_CMD, in microseconds.
pub const CTXT_POLL_INTERVAL_US: u32 = 100;

/// What a 32-bit read of a card that does not answer returns (a PCIe read completed by the root
/// complex after the card left the bus).
pub const NOT_ANSWERING: u32 = u32::MAX;

/// An indirect context command that stayed busy past [`CTXT_POLL_LIMIT`] reads, or whose
/// register read [`NOT_ANSWERING`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct ContextBusy {
    /// The command word written to IND_CTXT_CMD.
    pub command: u32,
}

/// Runs one indirect context command ([`IndCtxtCmd::queue`] for a queue's context,
/// [`IndCtxtCmd::fmap`] for a function's map): for WRITE, the 8 DATA and 8 MASK registers
/// interleaved (DATA\[i\], MASK\[i\] = all ones), then the command, then a bounded poll of the
/// busy bit.
///
/// The caller serialises commands of all functions of the card ([`crate::SharedLock`]).
///
/// # Errors
///
/// [`ContextBusy`] when the busy bit is still set after [`CTXT_POLL_LIMIT`] reads, or at once
/// when IND_CTXT_CMD reads all ones (the card does not answer).
pub fn context_command<W: RegisterWindow, D: DelayNs>(
    bar0: &W,
    delay: &mut D,
    command: IndCtxtCmd,
    data: &[u32; qdma::IND_CTXT_WORDS],
) -> Result<(), ContextBusy> {
    if command.op() == Ok(CtxtOp::Write) {
        for (i, &word) in data.iter().enumerate() {
            bar0.write(qdma::ind_ctxt_data(i), word);
            bar0.write(qdma::ind_ctxt_mask(i), u32::MAX);
        }
    }
    bar0.write(qdma::IND_CTXT_CMD, command);
    for attempt in 0..CTXT_POLL_LIMIT {
        let now = bar0.read(qdma::IND_CTXT_CMD);
        if crate::RegValue::bits(now) == NOT_ANSWERING {
            // Bits 31:18 read 0 on a live card: all ones is a read nobody answered (the card
            // left the bus, or its link is down). Polling on would only take the limit's time,
            // command after command (seen: 1.7 s each on a removed card, minutes per removal).
            crate::error!(
                "onic: context command {:#x}: IND_CTXT_CMD reads all ones, the card does not answer",
                command.bits()
            );
            return Err(ContextBusy {
                command: command.bits(),
            });
        }
        if !now.busy() {
            return Ok(());
        }
        if attempt + 1 < CTXT_POLL_LIMIT {
            delay.delay_us(CTXT_POLL_INTERVAL_US);
        }
    }
    crate::error!(
        "onic: context command {:#x} still busy after {} reads",
        command.bits(),
        CTXT_POLL_LIMIT
    );
    Err(ContextBusy {
        command: command.bits(),
    })
}

/// Which side of a queue: the contexts an INVALIDATE must reach differ (hardware.md §5.8).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub enum QueueSide {
    /// Transmit (H2C): software, hardware and credit contexts.
    Tx,
    /// Receive (C2H): software, hardware, credit, prefetch and completion contexts.
    Rx,
}

impl QueueSide {
    /// The contexts of this side, in the order they are invalidated.
    #[must_use]
    pub const fn contexts(self) -> &'static [CtxtSel] {
        match self {
            Self::Tx => &[CtxtSel::SwH2c, CtxtSel::HwH2c, CtxtSel::CrH2c],
            Self::Rx => &[
                CtxtSel::SwC2h,
                CtxtSel::HwC2h,
                CtxtSel::CrC2h,
                CtxtSel::Pfch,
                CtxtSel::Cmpt,
            ],
        }
    }
}

/// Proof that one queue's contexts were invalidated and every INVALIDATE completed: the device
/// no longer reaches that queue's rings nor the pages posted on them.
///
/// Only [`invalidate_queue`] makes one in safe code. It names the queue (side and absolute id),
/// and the driver core's queues accept only the proof for themselves.
#[derive(Debug, PartialEq, Eq)]
pub struct Quiesced {
    side: QueueSide,
    qid: AbsQueueId,
}

impl Quiesced {
    /// A proof made by hand, for an edge that knows the device is idle by other means (a card that
    /// is gone or reset, a model whose DMA has stopped).
    ///
    /// # Safety
    ///
    /// The device must no longer read or write the memory the token will release: no context,
    /// descriptor or register of the card points at it, and no DMA to it is in flight.
    #[must_use]
    pub const unsafe fn assume(side: QueueSide, qid: AbsQueueId) -> Self {
        Self { side, qid }
    }

    /// The side of the queue whose contexts were invalidated.
    #[must_use]
    pub const fn side(&self) -> QueueSide {
        self.side
    }

    /// The absolute queue id whose contexts were invalidated.
    #[must_use]
    pub const fn qid(&self) -> AbsQueueId {
        self.qid
    }

    /// Whether this is the proof for queue `qid` on `side`.
    #[must_use]
    pub fn names(&self, side: QueueSide, qid: AbsQueueId) -> bool {
        self.side == side && self.qid == qid
    }
}

/// Invalidates every context of queue `abs_qid` on `side` (hardware.md §5.8), each command under
/// `lock`, the card's context-command lock. A command that stays busy ends the sequence: the
/// next command must not be written while one is still in progress.
///
/// When a command fails and the window can cut the device off from memory
/// ([`RegisterWindow::cut_off`]: a card that has left the bus, or one whose bus mastering the OS
/// switched off), the proof is made all the same: the device reaches no memory.
///
/// # Errors
///
/// [`ContextBusy`] for the first command that did not complete: the device may still use the
/// queue, so no proof is made.
pub fn invalidate_queue<W: RegisterWindow, L: SharedLock + ?Sized, D: DelayNs>(
    bar0: &W,
    lock: &L,
    delay: &mut D,
    side: QueueSide,
    abs_qid: AbsQueueId,
) -> Result<Quiesced, ContextBusy> {
    match invalidate_contexts(bar0, lock, delay, side, abs_qid) {
        Ok(()) => Ok(Quiesced { side, qid: abs_qid }),
        Err(e) => cut_off_proof(bar0, side, abs_qid).ok_or(e),
    }
}

/// The proof for queue `abs_qid` on `side` without its invalidation, when the window cuts the
/// device off from memory ([`RegisterWindow::cut_off`]); `None` when it cannot. For a driver
/// whose context commands do not complete.
pub fn cut_off_proof<W: RegisterWindow>(bar0: &W, side: QueueSide, abs_qid: AbsQueueId) -> Option<Quiesced> {
    if !bar0.cut_off() {
        return None;
    }
    crate::warn!(
        "onic: the card reaches no memory (off the bus or its DMA switched off): queue {}'s memory is released without its invalidation",
        abs_qid.get()
    );
    Some(Quiesced { side, qid: abs_qid })
}

/// Invalidates every context of queue `abs_qid` on `side`, as [`invalidate_queue`] does, but
/// with no fallback: `Ok` only when every command completed. For a driver that must know the
/// card holds no stale context of the queue (before it lets the card reach memory again after
/// [`RegisterWindow::cut_off`]).
///
/// # Errors
///
/// [`ContextBusy`] for the command that did not complete; the ones after it are not issued.
pub fn invalidate_contexts<W: RegisterWindow, L: SharedLock + ?Sized, D: DelayNs>(
    bar0: &W,
    lock: &L,
    delay: &mut D,
    side: QueueSide,
    abs_qid: AbsQueueId,
) -> Result<(), ContextBusy> {
    for &sel in side.contexts() {
        let _held = SharedGuard::new(lock);
        let command = IndCtxtCmd::queue(sel, CtxtOp::Invalidate, abs_qid);
        context_command(bar0, delay, command, &[0; qdma::IND_CTXT_WORDS])?;
    }
    Ok(())
}

#[cfg(all(test, feature = "alloc"))]
mod tests {
    extern crate std;

    use std::vec::Vec;

    use super::*;
    use crate::recording::{AccessKind, Preset, PresetValue, Recorder};
    use crate::{Bar, Unshared};

    /// No waiting: the recorder's registers answer at once.
    struct NoWait;

    impl DelayNs for NoWait {
        fn delay_ns(&mut self, _ns: u32) {}
    }

    fn commands(rec: &Recorder) -> Vec<u32> {
        rec.log()
            .iter()
            .filter(|a| a.kind == AccessKind::Write && a.offset == qdma::IND_CTXT_CMD.offset())
            .map(|a| a.value)
            .collect()
    }

    #[test]
    fn every_context_of_the_side_is_invalidated_before_the_proof() {
        let rec = Recorder::opennic();
        let proof = invalidate_queue(
            &rec.window(Bar::Qdma),
            &Unshared::NEW,
            &mut NoWait,
            QueueSide::Rx,
            AbsQueueId::new(9),
        )
        .unwrap();
        assert!(proof.names(QueueSide::Rx, AbsQueueId::new(9)));
        let want: Vec<u32> = QueueSide::Rx
            .contexts()
            .iter()
            .map(|&sel| IndCtxtCmd::queue(sel, CtxtOp::Invalidate, AbsQueueId::new(9)).bits())
            .collect();
        assert_eq!(commands(&rec), want);
    }

    #[test]
    #[cfg_attr(miri, ignore = "5 000 register reads; slow under Miri")]
    fn a_command_that_stays_busy_makes_no_proof_and_no_command_follows_it() {
        let rec = Recorder::opennic();
        rec.add_preset(Preset {
            name: "busy",
            bar: Bar::Qdma,
            start: qdma::IND_CTXT_CMD.offset(),
            end: qdma::IND_CTXT_CMD.offset() + 4,
            value: PresetValue::Fixed(1),
        });
        let err = invalidate_queue(
            &rec.window(Bar::Qdma),
            &Unshared::NEW,
            &mut NoWait,
            QueueSide::Tx,
            AbsQueueId::new(3),
        )
        .unwrap_err();
        assert_eq!(
            err,
            ContextBusy {
                command: IndCtxtCmd::queue(CtxtSel::SwH2c, CtxtOp::Invalidate, AbsQueueId::new(3)).bits()
            }
        );
        // Writing the next command while this one is in progress would land on it.
        assert_eq!(commands(&rec).len(), 1);
    }

    #[test]
    fn a_card_that_does_not_answer_is_given_up_at_the_first_read() {
        let rec = Recorder::opennic();
        rec.add_preset(Preset {
            name: "gone",
            bar: Bar::Qdma,
            start: qdma::IND_CTXT_CMD.offset(),
            end: qdma::IND_CTXT_CMD.offset() + 4,
            value: PresetValue::Fixed(NOT_ANSWERING),
        });
        let err = invalidate_queue(
            &rec.window(Bar::Qdma),
            &Unshared::NEW,
            &mut NoWait,
            QueueSide::Rx,
            AbsQueueId::new(5),
        )
        .unwrap_err();
        assert_eq!(
            err.command,
            IndCtxtCmd::queue(CtxtSel::SwC2h, CtxtOp::Invalidate, AbsQueueId::new(5)).bits()
        );
        let reads = rec
            .log()
            .iter()
            .filter(|a| a.kind == AccessKind::Read && a.offset == qdma::IND_CTXT_CMD.offset())
            .count();
        assert_eq!(
            reads, 1,
            "one read in all: not the poll limit, and no command after it"
        );
    }

    /// A window whose device has left the bus: every register reads all ones, and it says so.
    struct Gone;

    // SAFETY: no register is reached; reads return what a card off the bus answers.
    unsafe impl RegisterWindow for Gone {
        fn read32(&self, _offset: u32) -> u32 {
            NOT_ANSWERING
        }
        fn write32(&self, _offset: u32, _value: u32) {}
        fn cut_off(&self) -> bool {
            true
        }
    }

    /// A live card whose context engine stays busy; its OS can switch its DMA off.
    struct Wedged {
        busy: bool,
        cut: core::cell::Cell<u32>,
    }

    // SAFETY: no register is reached; IND_CTXT_CMD reads busy or idle, the rest 0.
    unsafe impl RegisterWindow for Wedged {
        fn read32(&self, offset: u32) -> u32 {
            u32::from(offset == qdma::IND_CTXT_CMD.offset() && self.busy)
        }
        fn write32(&self, _offset: u32, _value: u32) {}
        fn cut_off(&self) -> bool {
            self.cut.set(self.cut.get() + 1);
            true
        }
    }

    #[test]
    fn a_failed_invalidation_cuts_the_device_off_and_only_then_gives_the_proof() {
        let idle = Wedged {
            busy: false,
            cut: core::cell::Cell::new(0),
        };
        invalidate_queue(
            &idle,
            &Unshared::NEW,
            &mut NoWait,
            QueueSide::Rx,
            AbsQueueId::new(3),
        )
        .unwrap();
        assert_eq!(idle.cut.get(), 0, "a device that answers is not cut off");
        let wedged = Wedged {
            busy: true,
            cut: core::cell::Cell::new(0),
        };
        let proof = invalidate_queue(
            &wedged,
            &Unshared::NEW,
            &mut NoWait,
            QueueSide::Rx,
            AbsQueueId::new(3),
        )
        .unwrap();
        assert!(proof.names(QueueSide::Rx, AbsQueueId::new(3)));
        assert_eq!(wedged.cut.get(), 1);
        // The strict form never takes the cut-off for an answer.
        assert!(invalidate_contexts(
            &wedged,
            &Unshared::NEW,
            &mut NoWait,
            QueueSide::Rx,
            AbsQueueId::new(3)
        )
        .is_err());
        assert_eq!(wedged.cut.get(), 1);
    }

    #[test]
    fn a_card_that_left_the_bus_gives_the_proof_without_the_invalidation() {
        let proof = invalidate_queue(
            &Gone,
            &Unshared::NEW,
            &mut NoWait,
            QueueSide::Tx,
            AbsQueueId::new(7),
        )
        .unwrap();
        assert!(proof.names(QueueSide::Tx, AbsQueueId::new(7)));
    }
}
