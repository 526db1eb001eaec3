//! One poll of a queue pair, for every caller that drives a pair itself: the port's NAPI poll,
//! and the rigs and tests that measure or check the core below the port. The one place outside
//! the core that puts a poll's [`RxContext`] together.

use onic_core::queue::doorbell::Doorbells;
use onic_core::queue::pair::PairPoll;
use onic_core::queue::pool::PageProvider;
use onic_core::queue::tx::{TxDone, TxFrame, TxSlot};
use onic_core::{QueuePair, RxContext, RxDispatch, RxSink, XdpRxq};
use onic_hal::{DmaMemory, RegisterWindow};

/// Polls `pair` once (`QueuePair::poll`): reclaims its TX ring into `done`, then takes up to
/// `budget` received frames of queue `rxq` as `dispatch` decides (`PassAll`: each to `sink`;
/// an `XdpDispatch`: through its program, if any, with its redirect table, pool index and
/// hasher), ringing the doorbells `db`.
pub fn poll_pair<D, P, F, RSt, TSt, W, S, X, C>(
    pair: &mut QueuePair<D, P, F, RSt, TSt>,
    (budget, db): (usize, &Doorbells<W>),
    (sink, rxq): (&mut S, XdpRxq),
    dispatch: X,
    done: &mut C,
) -> PairPoll
where
    D: DmaMemory,
    P: PageProvider,
    F: TxFrame,
    RSt: AsMut<[Option<P::Page>]>,
    TSt: AsMut<[TxSlot<P::Page, F>]>,
    W: RegisterWindow,
    S: RxSink<P::Page>,
    X: RxDispatch<P::Page>,
    C: TxDone<F>,
{
    let mut ctx = RxContext { sink, rxq, dispatch };
    pair.poll(budget, db, &mut ctx, done)
}
