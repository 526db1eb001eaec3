//! A raw QDMA context read for tools (feature `raw-registers`). The indirect context commands
//! themselves run in [`onic_hal::context`]; [`crate::Device`] issues them, and the queues'
//! doorbells are [`crate::queue::doorbell`].

use onic_hal::context::context_command;
use onic_hal::layout::ctxt::{CtxtOp, IndCtxtCmd};
use onic_hal::regs::qdma;
use onic_hal::{DelayNs, RegisterAccess, RegisterWindow};
#[cfg(feature = "raw-registers")]
use {onic_hal::layout::ctxt::CtxtSel, onic_hal::AbsQueueId};

use crate::error::Result;

/// Reads the 8 DATA words of context `sel` of absolute queue `qid`: a register-level look below
/// the driver, for the bare-metal self-test and tools (feature `raw-registers`, with
/// [`crate::Device::raw_registers`]'s QDMA window). It does not take the card's context-command
/// lock.
///
/// # Errors
///
/// [`crate::Error::ContextBusy`] when the command stays busy.
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
