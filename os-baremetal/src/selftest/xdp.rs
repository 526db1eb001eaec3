//! XDP-style decisions for received frames, through the core's `FrameSink` / `Verdict` seam.
//!
//! This module is the only place that knows how a verdict is reached and carried out:
//!
//! - [`Program`] is what a PF runs on each frame (pass, drop, reflect, redirect). It sees the
//!   frame's bytes, may rewrite them, and returns an [`Action`].
//! - [`Dispatch`] is the `FrameSink` a pair poll gets: it shows the frame to the test's tap, runs
//!   the program and turns the action into a `Verdict`: XDP_PASS hands the page to the OS,
//!   XDP_DROP recycles it, XDP_TX sends it back out on the pair's own TX queue (the core queues
//!   it and rings the doorbell once per poll), and a redirect queues it on the other PF's TX
//!   queue of the same index with `TxQueue::xmit_remote`. A redirected page comes back to its
//!   pool through the pool's `RecycleRing` when that queue completes it
//!   (`datapath::Done::remote_done`).
//!
//! When the core's XDP layer lands (a program trait, a buffer view with `adjust_head`/`tail`/
//! `meta`, a redirect table, `xdp_xmit`), the programs here become implementations of that trait
//! and `Dispatch` gives way to the core's dispatcher with a redirect table naming the other PF's
//! queues; the rest of the self-test only sets [`Program`]s and reads the counters.

use onic_core::qdma::Doorbells;
use onic_core::queue_pair::{FrameSink, Verdict};
use onic_core::rx::RxFrame;
use onic_hal::{Direction, DmaMemory, DmaPage};
use onic_sim::QdmaWindow;

use super::datapath::{Frame, Home, Os, Txq};
use super::frames;
use super::SimDmaMem;
use crate::model::Guarded;

/// What a program decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// XDP_PASS: to the OS.
    Pass,
    /// XDP_DROP.
    Drop,
    /// XDP_TX: back out of the port it came in on.
    Tx,
    /// XDP_REDIRECT: out of the other PF's port.
    Redirect,
}

/// The programs the self-test runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Program {
    /// Every frame to the OS.
    Pass,
    /// Every frame dropped.
    Drop,
    /// Frames as sent by the far end are sent back with their MAC addresses swapped (XDP_TX);
    /// anything else is passed.
    Reflect,
    /// Frames as sent by the far end go out of the other PF's port with their MAC addresses
    /// swapped (redirect); anything else, such as those same frames coming back in over the
    /// cable, is passed.
    Redirect,
}

impl Program {
    /// Runs the program on a frame's bytes.
    pub fn run(self, data: &mut [u8]) -> Action {
        match self {
            Self::Pass => Action::Pass,
            Self::Drop => Action::Drop,
            Self::Reflect | Self::Redirect => {
                if data.get(..6) != Some(&frames::DST_MAC[..]) {
                    return Action::Pass;
                }
                frames::swap_macs(data);
                if self == Self::Reflect {
                    Action::Tx
                } else {
                    Action::Redirect
                }
            }
        }
    }
}

/// What the programs of one pair decided (the core counts what became of the pages:
/// `RxStats::{to_os, recycled, to_tx}` and `PairStats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Verdicts {
    /// XDP_PASS.
    pub pass: u64,
    /// XDP_DROP.
    pub drop: u64,
    /// XDP_TX.
    pub tx: u64,
    /// Redirects queued on the target.
    pub redirect: u64,
    /// Redirects the target refused (ring full, no target); the frame was dropped.
    pub redirect_failed: u64,
}

/// The doorbells of a PF as the image holds them.
pub type Db<'x, 'c> = Doorbells<&'x Guarded<QdmaWindow<'c>>>;

/// Where a pair's redirects go: the other PF's TX queue of the same index, with that PF's
/// doorbells.
pub struct Redirect<'x, 'c, 's> {
    /// The target queue.
    pub tx: &'x mut Txq<'c, 's>,
    /// Its function's doorbells.
    pub db: &'x Db<'x, 'c>,
}

/// The frame sink of one pair poll.
pub struct Dispatch<'x, 'c, 's> {
    /// The PF's program.
    pub program: Program,
    /// Global index of the polled pair (the owner of the pages).
    pub origin: u8,
    /// The recycle ring of the pair's pool (the way home of a redirected or passed page).
    pub home: Home,
    /// Sees every frame before the program (the self-test's checks).
    pub tap: &'x mut dyn FnMut(&[u8]),
    /// Where passed pages go.
    pub os: &'x mut Os,
    /// The redirect target, if any.
    pub redirect: Option<Redirect<'x, 'c, 's>>,
    /// The pair's decision counters.
    pub verdicts: &'x mut Verdicts,
    /// The DMA memory of the pages (syncs before a redirect).
    pub dma: SimDmaMem<'c>,
}

impl FrameSink<DmaPage> for Dispatch<'_, '_, '_> {
    fn frame(&mut self, mut f: RxFrame<DmaPage>) -> Verdict<DmaPage> {
        (self.tap)(f.data());
        match self.program.run(f.data_mut()) {
            Action::Drop => {
                self.verdicts.drop += 1;
                Verdict::Drop(f)
            }
            Action::Pass => {
                self.verdicts.pass += 1;
                self.os.take(self.origin, self.home, f.len, f.page, self.dma);
                Verdict::Pass
            }
            Action::Tx => {
                self.verdicts.tx += 1;
                Verdict::Tx(f)
            }
            Action::Redirect => self.redirect(f),
        }
    }
}

impl Dispatch<'_, '_, '_> {
    fn redirect(&mut self, f: RxFrame<DmaPage>) -> Verdict<DmaPage> {
        let Some(r) = self.redirect.as_mut() else {
            self.verdicts.redirect_failed += 1;
            return Verdict::Drop(f);
        };
        // The program rewrote the frame: its bytes become the device's before it is queued.
        self.dma.sync_for_device(
            &f.page,
            usize::from(f.offset),
            usize::from(f.len),
            Direction::Bidirectional,
        );
        let frame = Frame::Remote {
            page: f.page,
            offset: f.offset,
            len: f.len,
            home: self.home,
            dma: self.dma,
        };
        // `more`: the poll publishes the target's batch once it is over.
        match r.tx.xmit_remote(r.db, frame, true) {
            Ok(()) => {
                self.verdicts.redirect += 1;
                Verdict::Redirected
            }
            Err(e) => {
                self.verdicts.redirect_failed += 1;
                // The frame built above, refused: its page goes back to this pair's pool.
                let (page, offset, len) = e.into_inner().into_parts();
                Verdict::Drop(RxFrame { page, offset, len })
            }
        }
    }
}
