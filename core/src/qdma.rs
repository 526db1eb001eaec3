//! QDMA register programming: queue doorbells (hardware.md §6), and a raw context read for tools.
//! The indirect context commands themselves run in [`onic_hal::context`]; [`crate::Device`]
//! issues them.

#[cfg(feature = "raw-registers")]
use onic_hal::context::context_command;
#[cfg(feature = "raw-registers")]
use onic_hal::layout::ctxt::{CtxtOp, CtxtSel};
use onic_hal::layout::doorbell::{C2hPidxDb, CmptCidxDb, H2cPidxDb};
use onic_hal::regs::qdma;
#[cfg(feature = "raw-registers")]
use onic_hal::DelayNs;
use onic_hal::RegisterWindow;

#[cfg(feature = "raw-registers")]
use crate::error::Result;

/// Reads a context's 8 DATA words: a register-level look below the driver, for the bare-metal
/// self-test and tools (feature `raw-registers`, with [`crate::Device::raw_registers`]'s QDMA
/// window). It does not take the card's context-command lock.
///
/// # Errors
///
/// [`Error::ContextBusy`] when the command stays busy.
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
        *w = bar0.read32(qdma::ind_ctxt_data(i));
    }
    Ok(out)
}

/// The queue doorbells of one function (BAR0, function-relative queue ids, hardware.md §6). Writing
/// a doorbell is the release point of a ring update: the [`RegisterWindow`] contract orders earlier
/// DMA-memory writes before it.
#[derive(Clone, Copy, Debug)]
pub struct Doorbells<W> {
    bar0: W,
}

impl<W: RegisterWindow> Doorbells<W> {
    /// Doorbells through `bar0`.
    pub const fn new(bar0: W) -> Self {
        Self { bar0 }
    }

    /// Publishes a new H2C (TX) producer index.
    pub fn h2c_pidx(&self, qid: u16, pidx: u16) {
        self.bar0.write32(
            qdma::dmap_sel_h2c_dsc_pidx(qid),
            H2cPidxDb::new(pidx, false).bits(),
        );
    }

    /// Publishes a new C2H (RX descriptor) producer index.
    pub fn c2h_pidx(&self, qid: u16, pidx: u16) {
        self.bar0.write32(
            qdma::dmap_sel_c2h_dsc_pidx(qid),
            C2hPidxDb::new(pidx, false).bits(),
        );
    }

    /// Publishes the completion consumer index with the driver's trigger settings (timer + count,
    /// status writeback on) and, with `arm`, re-arms the queue interrupt.
    pub fn cmpt_cidx(&self, qid: u16, cidx: u16, arm: bool) {
        self.bar0.write32(
            qdma::dmap_sel_cmpt_cidx(qid),
            CmptCidxDb::reference(cidx, arm).bits(),
        );
    }
}
