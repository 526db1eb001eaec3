//! Zero-copy transmit: frames the application put in its TX ring go on a TX queue from their
//! UMEM chunk ([`UmemTxFrame`]), and their addresses into the completion ring once the device is
//! done ([`XskTx`], a [`TxDone`]).

use onic_hal::{DmaAddr, DmaMemory, DmaPage, RegisterWindow};

use super::ring::{XskDesc, XskRing};
use super::umem::{Umem, UMEM_CHUNK_SIZE};
use crate::queue::doorbell::Doorbells;
use crate::queue::tx::{TxDone, TxError, TxFrame, TxQueue, TxSlot, ETH_ZLEN};

/// A frame of the application's TX ring, on its way to the device from its UMEM chunk. Owning it
/// is owning the chunk until the completion hands the chunk back ([`XskTx::complete`]).
#[derive(Debug)]
pub struct UmemTxFrame<'u> {
    page: &'u mut DmaPage,
    index: u32,
    desc: XskDesc,
    /// The frame's offset in the chunk.
    offset: u16,
    /// Bytes from the offset that are the frame's and visible to the device: the length, or
    /// [`ETH_ZLEN`] for a shorter frame (zero-padded when it was taken).
    ready: u16,
}

impl UmemTxFrame<'_> {
    /// The descriptor the application gave (its address goes into the completion ring).
    #[must_use]
    pub const fn desc(&self) -> XskDesc {
        self.desc
    }

    /// The chunk's index in its UMEM.
    #[must_use]
    pub const fn index(&self) -> u32 {
        self.index
    }
}

impl TxFrame for UmemTxFrame<'_> {
    fn dma_addr(&self) -> DmaAddr {
        // No overflow: the whole page is addressable (`Umem::new`) and the offset is inside it.
        DmaAddr::new(self.page.dma_addr().get() + u64::from(self.offset))
    }

    fn len(&self) -> usize {
        self.desc.len as usize
    }

    /// The rest of the chunk from the frame's first byte.
    fn buffer_len(&self) -> usize {
        UMEM_CHUNK_SIZE - usize::from(self.offset)
    }

    /// A short frame was zero-padded and synced when it was taken from the ring.
    fn pad_to(&mut self, min_len: usize) -> bool {
        usize::from(self.ready) >= min_len
    }
}

/// Counters of an [`XskTx`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "defmt", derive(defmt::Format))]
pub struct XskTxStats {
    /// Frames taken from the TX ring.
    pub taken: u64,
    /// TX ring entries refused: outside the UMEM, empty, running (with their padding) past their
    /// chunk, or naming a chunk that is not the application's. Consumed; the chunk stays where it
    /// is and no completion is written for it.
    pub invalid: u64,
    /// Takes that stopped because the completion ring had no room for one more frame.
    pub completion_full: u64,
    /// Frames whose address went into the completion ring.
    pub completed: u64,
    /// Frames the TX queue refused for a reason other than a full ring: completed at once.
    pub refused: u64,
}

/// The driver's side of an application's TX ring and completion ring over a [`Umem`].
///
/// A frame is taken from the TX ring only when the completion ring has room for it and for every
/// frame taken before and not completed yet, so a completion always finds a slot (the kernel
/// reserves its completion entry the same way). [`TxDone`] for [`UmemTxFrame`] completes: the
/// chunk goes back to the application and its descriptor's address into the completion ring,
/// whether the device sent the frame or the queue was torn down before it did.
pub struct XskTx<'u, 'r, D> {
    dma: D,
    umem: Umem<'u>,
    ring: &'r XskRing<'r, XskDesc>,
    completion: &'r XskRing<'r, u64>,
    /// Frames taken and not completed.
    outstanding: u32,
    /// A frame a full TX queue gave back, sent first next time.
    stash: Option<UmemTxFrame<'u>>,
    stats: XskTxStats,
}

impl<'u, 'r, D: DmaMemory> XskTx<'u, 'r, D> {
    /// The driver's side of `ring` (TX) and `completion` over `umem`; `dma` syncs what the
    /// application wrote for the device.
    pub const fn new(
        dma: D,
        umem: Umem<'u>,
        ring: &'r XskRing<'r, XskDesc>,
        completion: &'r XskRing<'r, u64>,
    ) -> Self {
        Self {
            dma,
            umem,
            ring,
            completion,
            outstanding: 0,
            stash: None,
            stats: XskTxStats {
                taken: 0,
                invalid: 0,
                completion_full: 0,
                completed: 0,
                refused: 0,
            },
        }
    }

    /// Frames taken and not completed yet (on a TX ring, held back after a full queue, or in the
    /// caller's hands).
    #[must_use]
    pub const fn outstanding(&self) -> u32 {
        self.outstanding
    }

    /// Whether a frame a full queue gave back waits to be sent first.
    #[must_use]
    pub const fn has_stashed(&self) -> bool {
        self.stash.is_some()
    }

    /// The counters.
    #[must_use]
    pub const fn stats(&self) -> &XskTxStats {
        &self.stats
    }

    /// The next frame to send: one given back by [`XskTx::put_back`], else the next valid entry
    /// of the TX ring. `None` when the ring is empty or the completion ring has no room left for
    /// one more frame.
    pub fn take(&mut self) -> Option<UmemTxFrame<'u>> {
        if let Some(f) = self.stash.take() {
            return Some(f);
        }
        if self.completion.free() <= self.outstanding {
            self.stats.completion_full += 1;
            return None;
        }
        while let Some(desc) = self.ring.consume() {
            if let Some(f) = self.frame(desc) {
                self.stats.taken += 1;
                self.outstanding += 1;
                return Some(f);
            }
            self.stats.invalid += 1;
        }
        None
    }

    /// Checks a TX ring entry and takes its chunk: the frame padded to [`ETH_ZLEN`] with zeros
    /// if shorter, and synced for the device.
    fn frame(&self, desc: XskDesc) -> Option<UmemTxFrame<'u>> {
        let index = self.umem.chunk_of(desc.addr)?;
        // CAST: below the chunk size, a u16.
        let offset = (desc.addr % UMEM_CHUNK_SIZE as u64) as usize;
        let len = desc.len as usize;
        let ready = len.max(ETH_ZLEN);
        if len == 0 || offset + ready > UMEM_CHUNK_SIZE {
            return None;
        }
        let page = self.umem.take_app(index)?;
        if let Some(pad) = page.bytes_mut().get_mut(offset + len..offset + ready) {
            pad.fill(0);
        }
        self.dma
            .sync_for_device(page, offset, ready, self.umem.config().dir);
        Some(UmemTxFrame {
            page,
            index,
            desc,
            // CAST: both below the chunk size (checked above), u16.
            offset: offset as u16,
            ready: ready as u16,
        })
    }

    /// Sends up to `budget` frames of the TX ring on `queue`, whose frames are UMEM frames, with
    /// one doorbell at the end; returns the frames queued. A full queue keeps the frame for the
    /// next call ([`XskTx::put_back`]); a frame the queue refuses otherwise is completed at once
    /// (counted as `refused`).
    pub fn send<Dq: DmaMemory, Pg, St, W>(
        &mut self,
        queue: &mut TxQueue<Dq, Pg, UmemTxFrame<'u>, St>,
        db: &Doorbells<W>,
        budget: u32,
    ) -> u32
    where
        Pg: crate::queue::pool::PoolPage,
        St: AsMut<[TxSlot<Pg, UmemTxFrame<'u>>]>,
        W: RegisterWindow,
    {
        let mut sent = 0;
        while sent < budget {
            let Some(f) = self.take() else { break };
            match queue.xmit_os(db, f, true) {
                Ok(()) => sent += 1,
                Err(TxError::Full(f)) => {
                    // The stash is empty: `take` emptied it before handing this frame out.
                    if let Err(f) = self.put_back(f) {
                        self.complete(f);
                    }
                    break;
                }
                Err(e) => {
                    self.stats.refused += 1;
                    self.complete(e.into_inner());
                }
            }
        }
        queue.flush(db);
        sent
    }
}

impl<'u, D> XskTx<'u, '_, D> {
    /// Keeps a frame a full TX queue refused, to be sent first by the next [`XskTx::take`].
    ///
    /// # Errors
    ///
    /// A frame is kept already: this one comes back (complete it, or keep it).
    pub fn put_back(&mut self, frame: UmemTxFrame<'u>) -> Result<(), UmemTxFrame<'u>> {
        if self.stash.is_some() {
            return Err(frame);
        }
        self.stash = Some(frame);
        Ok(())
    }

    /// The device is done with `frame` (or will never send it): the chunk goes back to the
    /// application and the descriptor's address into the completion ring.
    pub fn complete(&mut self, frame: UmemTxFrame<'u>) {
        let addr = frame.desc.addr;
        self.umem.give_app(frame.index, frame.page);
        // Room was reserved when the frame was taken (`take`): this cannot fail.
        let _ = self.completion.produce(addr);
        self.outstanding = self.outstanding.saturating_sub(1);
        self.stats.completed += 1;
    }

    /// Completes the frame a full queue gave back, if one waits (at teardown, when it will not
    /// be sent).
    pub fn drop_stash(&mut self) {
        if let Some(f) = self.stash.take() {
            self.complete(f);
        }
    }
}

impl<'u, D> Drop for XskTx<'u, '_, D> {
    fn drop(&mut self) {
        self.drop_stash();
    }
}

impl<'u, D: DmaMemory> TxDone<UmemTxFrame<'u>> for XskTx<'u, '_, D> {
    fn os_done(&mut self, frame: UmemTxFrame<'u>) {
        self.complete(frame);
    }

    fn remote_done(&mut self, frame: UmemTxFrame<'u>) {
        self.complete(frame);
    }
}

impl<D> core::fmt::Debug for XskTx<'_, '_, D> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("XskTx")
            .field("outstanding", &self.outstanding)
            .field("stashed", &self.stash.is_some())
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}
