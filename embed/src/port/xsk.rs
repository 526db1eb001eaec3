//! AF_XDP zero copy through the port: a queue index whose RX buffers are frames of the UMEM bound
//! to it (an XSK pool the host keeps) instead of its page pool's pages, and whose XDP_TX ring also
//! carries the application's TX frames.
//!
//! The queue pair is the same either way: its provider is the core's
//! [`BufSource`](onic_core::queue::source::BufSource) over the host's page pool ([`HostPool`])
//! or its XSK pool ([`HostXsk`]), fixed when the pair is built; `Port::set_queue_source` builds
//! the pair of one queue index again with the other source while the others keep running.
//!
//! What happens to a UMEM frame ([`XskBuf`]) on each path:
//!
//! - refill: [`Host::xsk_alloc`] (the pool's free list, then the fill ring);
//! - XDP_DROP, ABORTED, a failed verdict: the frame stays in its RX slot;
//! - XDP_TX: sent from its chunk, parked in its TX slot, back to the RX ring (as a page);
//! - XDP_REDIRECT: [`Host::xsk_redirect`] (an xskmap: into the socket's RX ring, no copy);
//! - XDP_PASS, no program: [`Host::rx_deliver_copy`] copies it; the frame stays in its slot;
//! - the application's TX ring: [`Host::xsk_tx_take`] onto the XDP_TX ring, completed through
//!   [`Host::xsk_tx_done`] into the completion ring;
//! - restart, switch, teardown: every frame back through [`Host::xsk_free`], every TX frame
//!   through [`Host::xsk_tx_done`].
//!
//! [`HostPool`]: super::sinks::HostPool
//! [`HostXsk`]: super::sinks::HostXsk
//! [`XskBuf`]: super::XskBuf

use alloc::vec::Vec;
use onic_core::queue::source::SourceKind;

use super::contexts::{Control, QueueTokens, Quiet, Token};
use super::error::{PortError, PortResult, XskRefusal};
use super::host::Host;
use super::sinks::TxItem;
use super::umem::XskTxDesc;
use super::Port;

/// The source of queue index `q` in a port's bit set of queues on UMEM frames.
pub(crate) const fn source_of(xsk: u64, q: u16) -> SourceKind {
    if q < 64 && xsk & (1 << q) != 0 {
        SourceKind::Xsk
    } else {
        SourceKind::Pages
    }
}

/// Where the UMEM frames of a queue index on an XSK pool are, as its rings hold them: with the
/// host's count (its XSK pool's free list, the application's rings) the census of the UMEM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskHoldings {
    /// The queue index.
    pub qid: u16,
    /// In an RX ring slot.
    pub in_rx_ring: u64,
    /// On the XDP_TX ring after XDP_TX, not yet completed.
    pub in_tx_flight: u64,
    /// Sent after XDP_TX, parked in an XDP_TX slot.
    pub tx_parked: u64,
    /// Frames of the application's TX ring on the XDP_TX ring, not yet completed.
    pub app_tx_in_flight: u64,
    /// Buffers of the other kind given back to the pair's source (always 0: none is lost or
    /// doubled silently).
    pub foreign: u64,
    /// Frames whose chunk was too small for the queue's buffers (given back, never posted).
    pub too_small: u64,
}

impl<H: Host> Port<H> {
    /// Makes queue index `q` (the index of `queue`'s tokens) take its RX buffers from `source`:
    /// [`SourceKind::Xsk`], the XSK pool the host bound to it ([`Host::xsk_bound`]), or back to
    /// [`SourceKind::Pages`], its page pool (Linux: `XDP_SETUP_XSK_POOL` with a pool, without
    /// one). While the port is up and `q` in use, the queue's NAPI pair (RX and XDP_TX) is built
    /// again on the new source, the old one's buffers all returned first; its stack TX and
    /// redirect-in rings and every other queue keep running. While down, the choice is kept
    /// for the next `open`. The queue's NAPI context is stopped (`queue`).
    ///
    /// # Errors
    ///
    /// `Invalid` for an index the port does not own; `Xsk` for an XSK source the host has not
    /// bound (`NotBound`) or whose frames are too small (`ChunkTooSmall`: a chunk less the UMEM
    /// headroom must hold the RX headroom and a C2H buffer that holds the largest frame, up to
    /// the chunk's end; the queue then runs on the buffer
    /// [`crate::tuning::QueueTuning::xsk_buf`] picks: its own 3520 bytes in a 4 KiB chunk with up
    /// to 320 bytes of headroom, 2048 with up to 1792, 1792 in a 2 KiB chunk without headroom);
    /// `WrongContext` for another port's tokens; the errors of starting the new pair (the queue
    /// then runs on its old source again, which [`Port::queue_source`] reports).
    pub fn set_queue_source(
        &self,
        ctl: &mut Token<'_, Control>,
        queue: &mut QueueTokens<'_>,
        source: SourceKind,
    ) -> PortResult<()> {
        let c = self.ctl(ctl)?;
        let q = queue.napi.index();
        let cells = self.queues.get(usize::from(q)).ok_or(PortError::Invalid)?;
        if source == SourceKind::Xsk {
            let room = self
                .host
                .xsk_bound(q)
                .ok_or(PortError::Xsk(XskRefusal::NotBound))?;
            if let Err(need) = c.tuning.xsk_buf(q, room) {
                return Err(PortError::Xsk(XskRefusal::ChunkTooSmall { room, need }));
            }
        }
        let bit = 1u64 << q;
        let before = c.xsk;
        c.xsk = match source {
            SourceKind::Xsk => c.xsk | bit,
            SourceKind::Pages => c.xsk & !bit,
        };
        let ch = c.rss.channels(&self.dev);
        if !c.up || q >= ch.combined || c.xsk == before {
            return Ok(());
        }
        let (rx_ring, tx_ring) = c.net.ring_sizes();
        let r = self.rings(&mut c.delay).switch_napi(
            cells,
            queue,
            &c.tuning,
            (ch.max_combined, source),
            (tx_ring, rx_ring),
        );
        match r {
            Ok(mem) => {
                if let Some(m) = c.mems.get_mut(usize::from(q)) {
                    *m = Some(mem);
                }
                Ok(())
            }
            Err(e) => {
                c.xsk = before;
                Err(e)
            }
        }
    }

    /// The buffer source queue index `q` runs on (or will, once started).
    ///
    /// # Errors
    ///
    /// `WrongContext` for another port's token.
    pub fn queue_source(&self, ctl: &mut Token<'_, Control>, q: u16) -> PortResult<SourceKind> {
        Ok(source_of(self.ctl(ctl)?.xsk, q))
    }

    /// Where the UMEM frames of every running queue index on an XSK pool are, as the port's
    /// rings hold them (the datapath stopped, `quiet`).
    ///
    /// # Errors
    ///
    /// `NoMemory`; `WrongContext` for another port's tokens.
    pub fn xsk_holdings(
        &self,
        ctl: &mut Token<'_, Control>,
        quiet: &mut Quiet<'_>,
    ) -> PortResult<Vec<XskHoldings>> {
        self.ctl(ctl)?;
        let mut out = Vec::new();
        for (q, queue) in (0..).zip(&self.queues) {
            let mut t = quiet.queue(q);
            let (napi, _, _) = queue.open(&mut t)?;
            let Some(pair) = &napi.pair else { continue };
            let Some(x) = pair.pool.as_xsk() else { continue };
            let by_owner = pair.tx.in_flight_by_owner();
            out.try_reserve(1).map_err(|_| PortError::NoMemory)?;
            out.push(XskHoldings {
                qid: q,
                in_rx_ring: pair.rx.pages_in_ring(),
                in_tx_flight: u64::from(by_owner.pool),
                tx_parked: pair.tx.pool_pages_parked(),
                app_tx_in_flight: u64::from(by_owner.os),
                foreign: pair.pool.foreign(),
                too_small: x.too_small,
            });
        }
        Ok(out)
    }
}

/// Sends up to `budget` frames of the application's TX ring of queue `qid` on its XDP_TX ring
/// (one doorbell at the end); returns how many, and their bytes. The host hands them over in
/// batches of up to 16, never more than the ring has room for, so none waits outside a ring;
/// one the ring refuses anyway (its queue in its error state) is completed at once.
pub(crate) fn xsk_send<H: Host, W: onic_hal::RegisterWindow>(
    host: &H,
    pair: &mut super::queues::NapiPair<H>,
    db: &onic_core::queue::doorbell::Doorbells<W>,
    (qid, budget): (u16, u32),
) -> (u64, u64) {
    const BATCH: usize = 16;
    let none = XskTxDesc {
        addr: 0,
        len: 0,
        dma: onic_hal::DmaAddr::new(0),
    };
    let mut descs = [none; BATCH];
    let (mut sent, mut bytes) = (0u32, 0u64);
    loop {
        let room = usize::try_from(budget.saturating_sub(sent))
            .unwrap_or(usize::MAX)
            .min(usize::from(pair.tx.free()))
            .min(BATCH);
        if room == 0 {
            break;
        }
        let taken = descs.get_mut(..room).map_or(0, |d| host.xsk_tx_take(qid, d));
        for &desc in descs.iter().take(taken.min(room)) {
            let len = u64::from(desc.len);
            match pair.tx.xmit_os(db, TxItem::Xsk { qid, desc }, true) {
                Ok(()) => {
                    sent += 1;
                    bytes += len;
                }
                Err(e) => {
                    if let TxItem::Xsk { desc, .. } = e.into_inner() {
                        host.xsk_tx_done(qid, desc);
                    }
                }
            }
        }
        if taken < room {
            break;
        }
    }
    if sent > 0 {
        pair.tx.flush(db);
    }
    (u64::from(sent), bytes)
}
