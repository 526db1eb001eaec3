//! A raw QDMA context read for tools (feature `raw-registers`). The indirect context commands
//! themselves run in [`onic_hal::context`]; [`crate::Device`] issues them, and the queues'
//! doorbells are [`crate::queue::doorbell`].

use onic_hal::context::context_command;
use onic_hal::layout::ctxt::{CtxtOp, CtxtSel};
use onic_hal::regs::qdma;
use onic_hal::{DelayNs, RegisterAccess, RegisterWindow};

use crate::error::Result;

/// Reads a context's 8 DATA words: a register-level look below the driver, for the bare-metal
/// self-test and tools (feature `raw-registers`, with [`crate::Device::raw_registers`]'s QDMA
/// window). It does not take the card's context-command lock.
///
/// # Errors
///
/// [`crate::Error::ContextBusy`] when the command stays busy.
#[cfg(feature = "raw-registers")]
pub fn context_read<W: RegisterWindow, D: DelayNs>(
    bar0: &W,
    delay: &mut D,
    sel: CtxtSel,
    qid: u16,
) -> Result<[u32; qdma::IND_CTXT_WORDS]> {
    context_command(bar0, delay, sel, CtxtOp::Read, qid, &[0; qdma::IND_CTXT_WORDS])?;
    let mut out = [0; qdma::IND_CTXT_WORDS];
    for (i, w) in out.iter_mut().enumerate() {
        *w = bar0.read(qdma::ind_ctxt_data(i));
    }
    Ok(out)
}
