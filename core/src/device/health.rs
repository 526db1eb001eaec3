//! What a health report shows of the device: a queue's contexts as the QDMA holds them (read
//! back with the indirect context READ command, hardware.md §5), and the identity registers of
//! the shell and the port's CMAC (`devlink dev info`).
//!
//! Reading a context is a context command like any other: it runs under the card's lock, and the
//! eight data registers are read before the lock is let go, so another function's command cannot
//! overwrite them in between.

use onic_hal::context::context_command;
use onic_hal::layout::ctxt::{CmptCtxt, CtxtOp, CtxtSel, HwCtxt, IndCtxtCmd, PfchCtxt, SwCtxt};
use onic_hal::regs::{cmac, qdma, shell};
use onic_hal::{AbsQueueId, DelayNs, QueueId, RegisterAccess, RegisterWindow, SharedGuard, SharedLock};

use super::Device;
use crate::error::Result;

/// The contexts of one queue index as the QDMA holds them: its H2C ring (the one the queue's
/// number names) and its C2H ring with the completion and prefetch contexts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct QueueContexts {
    /// The absolute queue id the contexts belong to.
    pub abs: u16,
    /// Software context of the H2C ring (producer index, enable, error).
    pub tx_sw: SwCtxt,
    /// Hardware context of the H2C ring (consumer index, pending work).
    pub tx_hw: HwCtxt,
    /// Software context of the C2H ring.
    pub rx_sw: SwCtxt,
    /// Hardware context of the C2H ring.
    pub rx_hw: HwCtxt,
    /// Completion ring context (producer and consumer index, color, error).
    pub cmpt: CmptCtxt,
    /// Prefetch context of the C2H ring.
    pub pfch: PfchCtxt,
}

/// The identity registers of a function's device (`devlink dev info`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct DeviceIdentity {
    /// BUILD_STATUS: the shell's build timestamp (MMDDhhmm unless set at build, hardware.md §2.2).
    pub shell_build: u32,
    /// CORE_VERSION of the function's CMAC (0x301 on the shell's, hardware.md §10.1).
    pub cmac_version: u32,
}

impl<Q: RegisterWindow, S: RegisterWindow, L: SharedLock> Device<Q, S, L> {
    /// Reads the `N` context words of `sel` of absolute queue `abs`, the command and the data
    /// registers under the card's lock.
    fn context_words<D: DelayNs, const N: usize>(
        &self,
        delay: &mut D,
        sel: CtxtSel,
        abs: AbsQueueId,
    ) -> Result<[u32; N]> {
        self.engine(|| {
            let _held = SharedGuard::new(&self.lock);
            let command = IndCtxtCmd::queue(sel, CtxtOp::Read, abs);
            context_command(&self.qdma, delay, command, &[0; qdma::IND_CTXT_WORDS])?;
            let mut out = [0; N];
            for (i, w) in out.iter_mut().enumerate() {
                *w = self.qdma.read(qdma::ind_ctxt_data(i));
            }
            Ok(out)
        })
    }

    /// The contexts of the function's queue `qid` (both directions), read back from the QDMA for
    /// a health dump. Nothing is written but the READ commands. Process context, as every
    /// context command.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Config`] for a queue pair the function does not have;
    /// [`crate::Error::ContextBusy`] when the engine does not answer.
    pub fn queue_contexts<D: DelayNs>(&self, delay: &mut D, qid: QueueId) -> Result<QueueContexts> {
        let abs = self.cfg.check_queue(qid)?;
        Ok(QueueContexts {
            abs: abs.get(),
            tx_sw: SwCtxt::from_words(self.context_words(delay, CtxtSel::SwH2c, abs)?),
            tx_hw: HwCtxt::from_words(self.context_words(delay, CtxtSel::HwH2c, abs)?),
            rx_sw: SwCtxt::from_words(self.context_words(delay, CtxtSel::SwC2h, abs)?),
            rx_hw: HwCtxt::from_words(self.context_words(delay, CtxtSel::HwC2h, abs)?),
            cmpt: CmptCtxt::from_words(self.context_words(delay, CtxtSel::Cmpt, abs)?),
            pfch: PfchCtxt::from_words(self.context_words(delay, CtxtSel::Pfch, abs)?),
        })
    }

    /// The identity registers (`devlink dev info`): the shell's build stamp and the function's
    /// CMAC's version. Registers are only read: any context.
    pub fn identity(&self) -> DeviceIdentity {
        let base = cmac::cmac_base(self.cfg.func.port());
        DeviceIdentity {
            shell_build: self.shell.read(shell::BUILD_STATUS),
            cmac_version: self.shell.read(cmac::CORE_VERSION.on(base)),
        }
    }
}
