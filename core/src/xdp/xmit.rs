//! `xdp_xmit`: this device as a redirect target (Linux `ndo_xdp_xmit`).

use onic_hal::{DmaMemory, RegisterWindow};

use crate::queue::doorbell::Doorbells;
use crate::queue::pool::PoolPage;
use crate::queue::tx::{TxFrame, TxQueue, TxSlot};

/// Queues a batch of frames owned by someone else (another device's redirected frames) on `tx`,
/// with Linux's `ndo_xdp_xmit` contract:
///
/// - frames are taken in order and queuing stops at the first one that cannot be queued (ring
///   full, bad length, queue error);
/// - the return value is how many were queued: `frames[..n]` are now the queue's (each comes
///   back through [`crate::queue::tx::TxDone::remote_done`] when the device is done), `frames[n..]` are
///   untouched and still the caller's: nothing the caller owns is freed, so it can free them
///   itself (the reference driver frees frames it failed to send, which the kernel then frees
///   again);
/// - a `None` entry ends the batch like a frame that does not fit;
/// - with `flush`, one H2C doorbell publishes the batch; without, it is published by a later
///   flush (or at once if the ring filled up).
///
/// Counts `tx_xdp_xmit` (queued) and `tx_xdp_xmit_errors` (not queued) on the queue.
pub fn xdp_xmit<D: DmaMemory, Pg: PoolPage, F: TxFrame, St: AsMut<[TxSlot<Pg, F>]>, W: RegisterWindow>(
    tx: &mut TxQueue<D, Pg, F, St>,
    db: &Doorbells<W>,
    frames: &mut [Option<F>],
    flush: bool,
) -> usize {
    let mut sent = 0;
    for slot in frames.iter_mut() {
        let Some(f) = slot.take() else { break };
        match tx.xmit_remote(db, f, true) {
            Ok(()) => sent += 1,
            Err(e) => {
                *slot = Some(e.into_inner());
                break;
            }
        }
    }
    let s = tx.stats_mut();
    s.tx_xdp_xmit += sent as u64;
    s.tx_xdp_xmit_errors += (frames.len() - sent) as u64;
    if flush {
        tx.flush(db);
    }
    sent
}
