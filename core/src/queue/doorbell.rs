//! The QDMA queue doorbells (hardware.md §6): how a queue hands new descriptors to the device and
//! acknowledges completions.

use onic_hal::layout::doorbell::{C2hPidxDb, CmptCidxDb, H2cPidxDb};
use onic_hal::regs::qdma;
use onic_hal::{QueueId, RegisterAccess, RegisterWindow};

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
    pub fn h2c_pidx(&self, qid: QueueId, pidx: u16) {
        self.bar0
            .write(qdma::dmap_sel_h2c_dsc_pidx(qid), H2cPidxDb::new(pidx, false));
    }

    /// Publishes a new C2H (RX descriptor) producer index.
    pub fn c2h_pidx(&self, qid: QueueId, pidx: u16) {
        self.bar0
            .write(qdma::dmap_sel_c2h_dsc_pidx(qid), C2hPidxDb::new(pidx, false));
    }

    /// Publishes the completion consumer index with the driver's trigger settings (timer + count,
    /// status writeback on) and, with `arm`, re-arms the queue interrupt.
    pub fn cmpt_cidx(&self, qid: QueueId, cidx: u16, arm: bool) {
        self.bar0
            .write(qdma::dmap_sel_cmpt_cidx(qid), CmptCidxDb::reference(cidx, arm));
    }
}
