//! Posting: the unposted slots of the descriptor ring filled with pages and handed to the device,
//! a run of descriptors at a time, with one C2H PIDX doorbell per refill.

use onic_hal::layout::desc::C2H_DESC_BYTES;
use onic_hal::{DmaMemory, RegisterWindow};

use super::desc::{desc_word, release_unaddressable};
use super::{RxQueue, REFILL_BATCH_MAX};
use crate::queue::doorbell::Doorbells;
use crate::queue::pool::{PageProvider, PoolPage};

impl<D: DmaMemory, Pg: PoolPage, St: AsMut<[Option<Pg>]>> RxQueue<D, Pg, St> {
    /// Posts pages into every free slot (up to all but one, so that "full" differs from "empty"),
    /// without a doorbell. Returns the descriptors posted in total.
    ///
    /// The unposted slots are the ring from `tail` to `head`, oldest first: a slot joins them at
    /// the back when its completion is consumed, and leaves at the front when posted. A consumed
    /// slot always keeps a page (its own, or the one that took its place), and
    /// [`DescRing::deliver`] writes the descriptor of a page that takes a slot's place as it puts
    /// it there; the device never writes the descriptor ring (hardware.md §7.4), so a page that
    /// stays keeps its descriptor. So only the `unready` slots at the front (empty after a start
    /// or a drain, or left by a refill that ran out of pages) need a page and a descriptor
    /// written; the slots behind them are posted as they are.
    ///
    /// [`DescRing::deliver`]: super::desc::DescRing::deliver
    pub(super) fn fill<P: PageProvider<Page = Pg>>(&mut self, pool: &mut P) -> u16 {
        let target = self.didx.len() - 1;
        self.desc.unready = self.desc.unready.min(self.didx.len() - self.posted);
        while self.posted < target && self.desc.unready > 0 {
            // A run of slots up to the end of the ring, written with one bounds check.
            let tail = self.tail;
            let run = (target - self.posted)
                .min(self.desc.unready)
                .min(self.didx.len() - tail)
                .min(REFILL_BATCH_MAX);
            let n = self.stage(tail, usize::from(run), pool);
            // CAST: n <= run, a u16.
            let n16 = n as u16;
            self.tail = self.didx.add(tail, n16);
            self.posted += n16;
            self.desc.unready -= n16;
            if n16 < run {
                return self.posted;
            }
        }
        let ready = target - self.posted;
        self.tail = self.didx.add(self.tail, ready);
        self.posted = target;
        self.posted
    }

    /// Writes the descriptors of `run` slots from `tail` (which do not cross the end of the ring)
    /// into ring memory, each slot given a page from `pool` if it has none; returns how many are
    /// written (all but those from the first slot left without a page). The descriptors are made
    /// and written in one pass, with one bounds check for the run.
    ///
    /// A slot's page whose bytes do not all have a device address (whether it was just taken
    /// from `pool` or put in the slot by [`DescRing::deliver`]) is never posted: it is released
    /// to `pool` for good, counted, and the run stops there with the slot empty, to be filled by
    /// a later refill as after an allocation failure.
    ///
    /// [`DescRing::deliver`]: super::desc::DescRing::deliver
    #[inline]
    fn stage<P: PageProvider<Page = Pg>>(&mut self, tail: u16, run: usize, pool: &mut P) -> usize {
        let start = usize::from(tail);
        let Some(slots) = self.desc.slots.as_mut().get_mut(start..start + run) else {
            return 0;
        };
        let batches = pool.batches();
        if batches {
            pool.refill_begin(slots.iter().filter(|s| s.is_none()).count());
        }
        // The counters stay in locals during the loop, so that nothing in it writes through
        // `self` next to the slots it walks.
        let mut added = 0u32;
        let mut failed = false;
        let mut refused = 0u32;
        let mut slots = slots.iter_mut();
        let written = self
            .desc
            .region
            .write_u64s_with(C2H_DESC_BYTES * start, C2H_DESC_BYTES, run, |_| {
                let slot = slots.next()?;
                if slot.is_none() {
                    let Some(p) = pool.alloc_page() else {
                        failed = true;
                        return None;
                    };
                    *slot = Some(p);
                    added += 1;
                }
                let word = slot.as_ref().and_then(desc_word);
                if word.is_none() {
                    refused += release_unaddressable(slot, pool);
                }
                word
            });
        if batches {
            pool.refill_end();
        }
        if failed {
            self.stats.refill_alloc_failures += 1;
        }
        self.stats.refill_bad_pages += u64::from(refused);
        // No underflow: a page refused was in the slot, so counted before or added just now.
        self.desc.pages = self.desc.pages + added - refused;
        written
    }

    /// Posts what can be posted and, if anything was, hands it to the device with one doorbell.
    /// The doorbell write orders the descriptor writes before it (the [`RegisterWindow`] release
    /// contract).
    pub(super) fn refill<W: RegisterWindow, P: PageProvider<Page = Pg>>(
        &mut self,
        db: &Doorbells<W>,
        pool: &mut P,
    ) {
        let before = self.tail;
        self.fill(pool);
        if self.tail != before && self.started {
            db.c2h_pidx(self.cfg.qid, self.tail);
            self.stats.c2h_doorbells += 1;
        }
    }

    /// Descriptors free to post.
    pub(super) const fn deficit(&self) -> u16 {
        self.didx.len() - 1 - self.posted
    }
}
