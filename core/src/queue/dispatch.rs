//! What a poll of a queue pair is given besides the pair: [`RxContext`], the sink and queue
//! identity every poll needs, and its dispatch part, the type that decides what becomes of each
//! received frame ([`RxDispatch`]).
//!
//! There is one context type and one [`QueuePair::poll`] whatever the crate's features:
//!
//! - [`PassAll`] hands every frame to the sink as received (no program);
//! - with the `xdp` feature, `xdp::XdpDispatch` runs the attached XDP program, if any, and
//!   carries out its verdicts.
//!
//! The poll is generic over the dispatch part, so each compiles to a loop of its own: the
//! [`PassAll`] poll contains nothing of XDP.

use onic_hal::{DmaMemory, RegisterWindow};

use crate::queue::doorbell::Doorbells;
use crate::queue::pair::{PairPoll, QueuePair, RxSink, XdpRxq};
use crate::queue::pool::PageProvider;
use crate::queue::rx::PollOutcome;
use crate::queue::tx::{TxDone, TxFrame, TxSlot};

impl<D, P, F, RSt, TSt> QueuePair<D, P, F, RSt, TSt>
where
    D: DmaMemory,
    P: PageProvider,
    F: TxFrame,
    RSt: AsMut<[Option<P::Page>]>,
    TSt: AsMut<[TxSlot<P::Page, F>]>,
{
    /// One poll of the pair: reclaim the TX queue, then take up to `budget` received frames as
    /// `ctx.dispatch` decides. With [`PassAll`] every frame goes to `ctx.sink`
    /// (a refusal recycles the page, `rx_pass_refused`); with the `xdp` feature's
    /// `xdp::XdpDispatch` the attached program, if any, runs on each frame, its verdicts are
    /// carried out, and what they queued for the device is flushed before the poll returns.
    pub fn poll<W, S, X, C>(
        &mut self,
        budget: usize,
        db: &Doorbells<W>,
        ctx: &mut RxContext<'_, S, X>,
        done: &mut C,
    ) -> PairPoll
    where
        W: RegisterWindow,
        S: RxSink<P::Page>,
        X: RxDispatch<P::Page>,
        C: TxDone<F>,
    {
        let tx = self.tx.reclaim(done);
        let rx = ctx.dispatch.rx(self, budget, db, ctx.sink, ctx.rxq);
        PairPoll { tx, rx }
    }
}

/// What one [`QueuePair::poll`] needs besides the pair: where passed frames go, which queue they
/// came in on, and the dispatch part `X` ([`PassAll`] unless given).
///
/// ```
/// use onic_core::{PassAll, PassInfo, RxContext, RxFrame, XdpRxq};
/// # use onic_hal::DmaPage;
///
/// let mut to_os = |f: RxFrame<DmaPage>, _: PassInfo| -> Result<(), RxFrame<DmaPage>> {
///     Err(f) // a real sink keeps the page
/// };
/// let ctx = RxContext {
///     sink: &mut to_os,
///     rxq: XdpRxq { queue_index: 3, port: 0 },
///     dispatch: PassAll,
/// };
/// # let _ = ctx;
/// ```
pub struct RxContext<'x, S, X = PassAll> {
    /// Where the frames go: every frame with [`PassAll`], the XDP_PASS frames with a program.
    pub sink: &'x mut S,
    /// The queue and port (reported to the sink with each frame, and to a program).
    pub rxq: XdpRxq,
    /// What becomes of each frame before (or instead of) the sink.
    pub dispatch: X,
}

impl<S, X: core::fmt::Debug> core::fmt::Debug for RxContext<'_, S, X> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RxContext")
            .field("rxq", &self.rxq)
            .field("dispatch", &self.dispatch)
            .finish_non_exhaustive()
    }
}

/// The dispatch part of an [`RxContext`]: how a poll takes the received frames of a pair whose
/// pages are `Pg`. Implemented by [`PassAll`] and, with the `xdp` feature, by
/// `xdp::XdpDispatch`; sealed, since a dispatch works on the pair's private state.
pub trait RxDispatch<Pg>: sealed::Dispatch<Pg> {}

impl<Pg, T: sealed::Dispatch<Pg>> RxDispatch<Pg> for T {}

/// No program: every frame goes to the sink as received, with no hash and no buffer view; the
/// only decision per frame is whether the sink kept the page (a refusal recycles it and counts
/// `rx_pass_refused`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PassAll;

/// The trait's own `rx` is this dispatch.
impl<Pg> sealed::Dispatch<Pg> for PassAll {}

/// The crate-private half of [`RxDispatch`]: the one method a poll calls.
pub(crate) mod sealed {
    use super::*;

    /// Takes up to `budget` received frames of a pair whose TX queue the poll has just
    /// reclaimed; whatever the dispatch queued for the device (XDP_TX, redirects) is flushed
    /// before it returns.
    pub trait Dispatch<Pg> {
        /// The RX half of [`QueuePair::poll`]; as given here, [`PassAll`]'s: every frame to
        /// `sink`.
        #[inline(always)]
        fn rx<D, P, F, RSt, TSt, W, S>(
            &mut self,
            pair: &mut QueuePair<D, P, F, RSt, TSt>,
            budget: usize,
            db: &Doorbells<W>,
            sink: &mut S,
            rxq: XdpRxq,
        ) -> PollOutcome
        where
            D: DmaMemory,
            P: PageProvider<Page = Pg>,
            F: TxFrame,
            RSt: AsMut<[Option<Pg>]>,
            TSt: AsMut<[TxSlot<Pg, F>]>,
            W: RegisterWindow,
            S: RxSink<Pg>,
        {
            pair.rx_to_sink(budget, db, sink, rxq)
        }
    }
}
