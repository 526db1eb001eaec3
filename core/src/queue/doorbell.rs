//! The QDMA queue doorbells (hardware.md §6): how a queue hands new descriptors to the device and
//! acknowledges completions.

use onic_hal::layout::doorbell::{C2hPidxDb, CmptCidxDb, H2cPidxDb};
use onic_hal::regs::qdma;
use onic_hal::{QueueId, RegisterAccess, RegisterWindow};

use crate::moderation::RxModeration;

/// The queue doorbells of one function (BAR0, function-relative queue ids, hardware.md §6). Writing
/// a doorbell is the release point of a ring update: the [`RegisterWindow`] contract orders earlier
/// DMA-memory writes before it.
#[derive(Clone, Copy, Debug)]
pub struct Doorbells<W> {
    bar0: W,
    moderation: RxModeration,
}

impl<W: RegisterWindow> Doorbells<W> {
    /// Doorbells through `bar0`.
    pub const fn new(bar0: W) -> Self {
        Self {
            bar0,
            moderation: RxModeration::REFERENCE,
        }
    }

    /// The same doorbells, their CMPT CIDX writes setting `moderation` (the reference's is
    /// [`RxModeration::REFERENCE`]).
    #[must_use]
    pub fn with_moderation(self, moderation: RxModeration) -> Self {
        Self { moderation, ..self }
    }

    /// The moderation the CMPT CIDX writes carry.
    #[must_use]
    pub const fn moderation(&self) -> RxModeration {
        self.moderation
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
    /// status writeback on, the moderation's timer and count indices: the queue's trigger
    /// follows them from here on) and, with `arm`, re-arms the queue interrupt.
    pub fn cmpt_cidx(&self, qid: QueueId, cidx: u16, arm: bool) {
        let mut db = CmptCidxDb::reference(cidx, arm);
        db.set_timer_idx(self.moderation.timer_idx());
        db.set_counter_idx(self.moderation.counter_idx());
        self.bar0.write(qdma::dmap_sel_cmpt_cidx(qid), db);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use onic_hal::recording::Recorder;
    use onic_hal::Bar;

    #[test]
    fn the_cmpt_doorbell_carries_the_moderation() {
        let rec = Recorder::opennic();
        let w = rec.window(Bar::Qdma);
        let qid = QueueId::new(3);
        Doorbells::new(&w).cmpt_cidx(qid, 42, true);
        let m = RxModeration::for_request(10, 128).unwrap();
        Doorbells::new(&w).with_moderation(m).cmpt_cidx(qid, 42, false);
        let log = rec.log();
        // hardware.md §6: the reference's value, then timer index 12 (100 ticks) in [23:20] and
        // count index 11 (128) in [19:16].
        assert_eq!((log[0].offset, log[0].value), (0x1803C, 0x1D00_002A));
        assert_eq!(log[1].value, 0x0D00_002A | 12 << 20 | 11 << 16);
    }
}
