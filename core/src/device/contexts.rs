//! QDMA indirect context programming (hardware.md §5), crate-private: [`crate::Device`] programs
//! the contexts. The queues' doorbells are [`crate::queue::doorbell`].

use onic_hal::layout::ctxt::{CtxtOp, IndCtxtCmd};
use onic_hal::regs::qdma;
use onic_hal::{DelayNs, RegisterAccess, RegisterWindow};
#[cfg(feature = "raw-registers")]
use {onic_hal::layout::ctxt::CtxtSel, onic_hal::AbsQueueId};

use crate::error::{Error, Result};

/// Reads of IND_CTXT_CMD before a busy command is given up (hardware.md §5.1: about 500 ms).
pub(crate) const CTXT_POLL_LIMIT: u32 = 5000;
/// Wait between two reads of a busy IND_CTXT_CMD, in microseconds.
pub(crate) const CTXT_POLL_INTERVAL_US: u32 = 100;

/// Runs one indirect context command ([`IndCtxtCmd::queue`] for a queue's context,
/// [`IndCtxtCmd::fmap`] for a function's map): for WRITE, the 8 DATA and 8 MASK registers
/// interleaved (DATA\[i\], MASK\[i\] = all ones), then the command, then a bounded poll of the
/// busy bit.
///
/// # Errors
///
/// [`Error::ContextBusy`] when the busy bit is still set after [`CTXT_POLL_LIMIT`] reads.
pub(crate) fn context_command<W: RegisterWindow, D: DelayNs>(
    bar0: &W,
    delay: &mut D,
    command: IndCtxtCmd,
    data: &[u32; qdma::IND_CTXT_WORDS],
) -> Result<()> {
    if command.op() == Ok(CtxtOp::Write) {
        for (i, &word) in data.iter().enumerate() {
            bar0.write(qdma::ind_ctxt_data(i), word);
            bar0.write(qdma::ind_ctxt_mask(i), u32::MAX);
        }
    }
    bar0.write(qdma::IND_CTXT_CMD, command);
    for attempt in 0..CTXT_POLL_LIMIT {
        if !bar0.read(qdma::IND_CTXT_CMD).busy() {
            return Ok(());
        }
        if attempt + 1 < CTXT_POLL_LIMIT {
            delay.delay_us(CTXT_POLL_INTERVAL_US);
        }
    }
    onic_hal::error!(
        "onic: context command {:#x} still busy after {} reads",
        command.bits(),
        CTXT_POLL_LIMIT
    );
    Err(Error::ContextBusy {
        command: command.bits(),
    })
}

/// Reads the 8 DATA words of context `sel` of absolute queue `qid`: a register-level look below
/// the driver, for the bare-metal self-test and tools (feature `raw-registers`, with
/// [`crate::Device::raw_registers`]'s QDMA window). It does not take the card's context-command
/// lock.
///
/// # Errors
///
/// [`Error::ContextBusy`] when the command stays busy.
#[cfg(feature = "raw-registers")]
pub fn context_read<W: RegisterWindow, D: DelayNs>(
    bar0: &W,
    delay: &mut D,
    sel: CtxtSel,
    qid: AbsQueueId,
) -> Result<[u32; qdma::IND_CTXT_WORDS]> {
    let command = IndCtxtCmd::queue(sel, CtxtOp::Read, qid);
    context_command(bar0, delay, command, &[0; qdma::IND_CTXT_WORDS])?;
    let mut out = [0; qdma::IND_CTXT_WORDS];
    for (i, w) in out.iter_mut().enumerate() {
        *w = bar0.read(qdma::ind_ctxt_data(i));
    }
    Ok(out)
}
