//! The poll: completions read in batches and each frame delivered or dropped, descriptors handed
//! back on the way, and at the end the completion entries acknowledged, the interrupt re-armed
//! and the caller told what to do next ([`PollOutcome`]).

use core::sync::atomic::{fence, Ordering};

use onic_hal::layout::desc::CmptEntry;
use onic_hal::{DmaMemory, RegisterWindow};

use super::claims::Claim;
use super::desc::Tally;
use super::{FrameHandler, PollOutcome, RxQueue, REFILL_BATCH_MAX};
use crate::error::{QueueError, Result};
use crate::queue::doorbell::Doorbells;
use crate::queue::pool::{PageProvider, PoolPage};
use crate::queue::ring::Color;

/// What [`RxQueue::complete_batch`] did.
struct Batch {
    /// Completion entries consumed.
    taken: u16,
    /// It stopped at an entry without the expected color (not written yet).
    not_visible: bool,
    /// The error that put the queue in its error state, if one did.
    failed: Option<QueueError>,
}

impl<D: DmaMemory, Pg: PoolPage, St: AsMut<[Option<Pg>]>> RxQueue<D, Pg, St> {
    /// Consumes up to `budget` completions: each frame goes to `sink` (or is dropped and
    /// counted), its slot gets a replacement page, descriptors are handed back in batches, and
    /// when the poll catches up the completion interrupt is re-armed.
    ///
    /// The status record is read once per poll (it bounds the loop); each entry must also carry
    /// the expected color. After re-arming, the record is read again: the CMPT CIDX doorbell makes
    /// the device rewrite it, and if it shows new completions the caller is told to poll again at
    /// once instead of waiting for the interrupt (which the device raises anyway, so nothing is
    /// lost if the second read is stale).
    pub(crate) fn poll<W: RegisterWindow, P: PageProvider<Page = Pg>, S: FrameHandler<P>>(
        &mut self,
        budget: usize,
        db: &Doorbells<W>,
        pool: &mut P,
        sink: &mut S,
    ) -> PollOutcome {
        if let Some(e) = self.error {
            return PollOutcome {
                error: Some(e),
                ..PollOutcome::default()
            };
        }
        if budget == 0 {
            return PollOutcome {
                more: true,
                ..PollOutcome::default()
            };
        }
        let Some(pidx) = self.status_pidx() else {
            return self.outcome(0, false, false);
        };
        let mut done = 0;
        let mut not_ready = false;
        // The consumer index and the expected color stay in registers during the loop (nothing
        // in it reads them from `self`) and are stored back when it ends.
        let mut cidx = self.cmpt_cidx;
        let mut color = self.color;
        let mut tally = Tally::default();
        while done < budget && cidx != pidx {
            let n = self.batch_len(cidx, pidx, budget - done);
            let Batch {
                taken,
                not_visible,
                failed,
            } = self.complete_batch(cidx, n, color, pool, sink, &mut tally);
            // A batch never crosses the end of the ring: reaching it wraps to 0 and flips the
            // color.
            cidx = self.cring.add(cidx, taken);
            if cidx == 0 && taken > 0 {
                color = color.flip();
            }
            done += usize::from(taken);
            if let Some(e) = failed {
                self.cmpt_cidx = cidx;
                self.color = color;
                self.stats.add(tally);
                self.fail(e);
                return self.outcome(done, false, false);
            }
            if not_visible {
                self.stats.cmpt_not_ready += 1;
                not_ready = true;
                break;
            }
            if self.deficit() >= self.opts.refill_batch {
                // Every descriptor handed back may come back as a completion before the next
                // CIDX update: free the consumed completion entries first, so the completion
                // ring (as large as the descriptor ring) can always take them.
                self.ack(db, cidx, false);
                self.refill(db, pool);
            }
        }
        self.cmpt_cidx = cidx;
        self.color = color;
        self.stats.add(tally);
        self.end_poll(db, pool, budget, done, pidx, not_ready)
    }

    /// The end of a poll that consumed `done` entries up to the status record's `pidx` (`not_ready`:
    /// it stopped at an entry whose color was not there yet): completion entries acknowledged,
    /// re-armed if it caught up, descriptors refilled, and a device that claims completions it
    /// does not deliver watched.
    fn end_poll<W: RegisterWindow, P: PageProvider<Page = Pg>>(
        &mut self,
        db: &Doorbells<W>,
        pool: &mut P,
        budget: usize,
        done: usize,
        pidx: u16,
        not_ready: bool,
    ) -> PollOutcome {
        if done > 0 {
            self.stalled = 0;
        }
        let armed = self.cmpt_cidx == pidx && !not_ready && done < budget;
        if armed || self.cmpt_cidx != self.cmpt_acked {
            // Caught up: give the consumed entries back and re-arm. Otherwise give them back
            // without arming: the device can reuse them, and with status writeback on it
            // refreshes the status record for the next poll (the reference driver writes nothing
            // here and can be left with a stale record, hardware.md §15 item 10).
            self.ack(db, self.cmpt_cidx, armed);
        }
        if self.deficit() >= self.opts.refill_batch || self.posted < self.opts.refill_batch {
            self.refill(db, pool);
        }
        if armed {
            self.stats.rearms += 1;
            let more = self.status_pidx_quiet().is_some_and(|p| p != self.cmpt_cidx);
            if more {
                self.stats.rearm_rechecks += 1;
                return self.outcome(done, true, true);
            }
            // Caught up with everything the device reported: does it claim anything else?
            let Some(claim) = self.idle_claim() else {
                self.stalled = 0;
                return self.outcome(done, true, false);
            };
            if done == 0 && self.stall(claim) {
                return self.outcome(done, false, false);
            }
            return self.outcome(done, true, true);
        }
        if not_ready && done == 0 {
            let claim = Claim::NotVisible {
                cidx: self.cmpt_cidx,
                pidx,
            };
            if self.stall(claim) {
                return self.outcome(0, false, false);
            }
        }
        self.outcome(done, false, true)
    }

    /// Writes the CMPT CIDX doorbell: completion entries before `cidx` are free again; with
    /// `arm`, the next completion raises the interrupt.
    fn ack<W: RegisterWindow>(&mut self, db: &Doorbells<W>, cidx: u16, arm: bool) {
        db.cmpt_cidx(self.cfg.qid, cidx, arm);
        self.cmpt_acked = cidx;
        self.stats.cmpt_doorbells += 1;
    }

    fn outcome(&self, done: usize, armed: bool, more: bool) -> PollOutcome {
        PollOutcome {
            done,
            armed: armed && self.error.is_none(),
            more: more && self.error.is_none(),
            error: self.error,
        }
    }

    /// Entries of the next batch from `cidx`: up to the producer index `pidx`, `budget`, the end
    /// of the ring (where the color flips), [`REFILL_BATCH_MAX`], the next refill (the
    /// descriptors still to consume before the deficit reaches the refill batch; at least one),
    /// and the end of the descriptor ring (so that a batch moves its head on without a wrap
    /// test per frame; at least one).
    #[inline]
    fn batch_len(&self, cidx: u16, pidx: u16, budget: usize) -> usize {
        let to_refill = self.opts.refill_batch.saturating_sub(self.deficit()).max(1);
        let to_desc_end = self.didx.len().saturating_sub(self.head).max(1);
        let n = self
            .cring
            .distance(cidx, pidx)
            .min(self.cring.len() - cidx)
            .min(to_refill)
            .min(to_desc_end)
            .min(REFILL_BATCH_MAX);
        usize::from(n).min(budget)
    }

    /// Reads and handles up to `n` completion entries from `cidx` (which do not cross the end of
    /// the ring), each as it is reached: its color checked (an entry without the expected one is
    /// not written yet, and ends the batch unread), then validation, descriptor accounting,
    /// delivery or drop. It also stops after the first entry that is not a good single-buffer
    /// frame: the general path may have taken several descriptors, and the caller checks for a
    /// refill before going on.
    ///
    /// The common case is tested first, with the same checks folded into one comparison: no
    /// error bit, a posted descriptor, and a length from 1 up to both the largest frame and one
    /// buffer ([`RxQueue::single_limit`]). Such a frame takes exactly one descriptor and passes
    /// every check of the general path, which handles everything else. The descriptor ring's
    /// head (as a `usize`, so that it indexes without a widening per frame) and posted count
    /// stay in locals while the common case runs (nothing in it reads them from `self`) and are
    /// stored back before the general path, which reads them. The batch ends at the descriptor
    /// ring's end at the latest, so the head moves on by one without a wrap test; `end_run`
    /// wraps it once. The entries are read in place (no copy): the delivery borrows only the
    /// descriptor ring ([`DescRing`]), not the completion ring being read.
    ///
    /// [`DescRing`]: super::desc::DescRing
    #[inline(always)]
    fn complete_batch<P: PageProvider<Page = Pg>, S: FrameHandler<P>>(
        &mut self,
        cidx: u16,
        n: usize,
        color: Color,
        pool: &mut P,
        sink: &mut S,
        tally: &mut Tally,
    ) -> Batch {
        // The color bit of a word, and the word's bits under it when it carries `color`: one mask
        // and one compare per entry.
        let mut only_color = CmptEntry::from_word(0);
        only_color.set_color(true);
        let mask = only_color.to_word();
        let want = if color.bit() { mask } else { 0 };
        let mut head = usize::from(self.head);
        let mut posted = self.posted;
        let limit = self.single_limit;
        let stride = self.cmpt_stride;
        let mut taken = 0u16;
        // Three exits, each storing the indices back through `end_run`: a single exit (a labelled
        // block yielding where the run stopped) measured 5 to 10 instructions more per frame, the
        // stop reason becoming a flag stored on every entry.
        for word in self.cmpt.u64s(stride * usize::from(cidx), stride, n) {
            if word & mask != want {
                return self.end_run(head, posted, taken, true);
            }
            // The entry is the device's; everything it describes (the frame data) is read after
            // it.
            fence(Ordering::Acquire);
            taken += 1;
            let entry = CmptEntry::from_word(word);
            let len = u32::from(entry.pkt_len());
            if !entry.err() && posted > 0 && len.wrapping_sub(1) < limit {
                let first = head;
                // No wrap: the batch ends at the descriptor ring's end at the latest
                // (`batch_len`); `end_run` wraps an index that reached it.
                head = first + 1;
                posted -= 1;
                self.desc.deliver(first, len, pool, sink, tally);
                continue;
            }
            let mut batch = self.end_run(head, posted, taken, false);
            batch.failed = self.complete_general(entry, pool, sink, tally).err();
            return batch;
        }
        self.end_run(head, posted, taken, false)
    }

    /// Stores the indices a run of [`RxQueue::complete_batch`] kept in registers and says what
    /// the run did.
    #[inline(always)]
    fn end_run(&mut self, head: usize, posted: u16, taken: u16, not_visible: bool) -> Batch {
        // CAST: `head` is at most the ring's length, a u16. Written here rather than as a `Ring`
        // helper that also guards larger values: that form cost the loops 1 to 2 instructions
        // per frame more (XDP_DROP 64.0 -> 65.1, PASS 110.1 -> 112.1, callgrind).
        self.head = if head == usize::from(self.didx.len()) {
            0
        } else {
            head as u16
        };
        self.posted = posted;
        Batch {
            taken,
            not_visible,
            failed: None,
        }
    }

    /// [`RxQueue::complete_batch`] for anything but a good single-buffer frame.
    #[inline(never)]
    fn complete_general<P: PageProvider<Page = Pg>, S: FrameHandler<P>>(
        &mut self,
        entry: CmptEntry,
        pool: &mut P,
        sink: &mut S,
        tally: &mut Tally,
    ) -> Result<(), QueueError> {
        let len = u32::from(entry.pkt_len());
        let room = u32::from(self.posted) * self.buf_bytes;
        let len_ok = len != 0 && len <= self.opts.max_frame_len && len <= room;
        // A valid length tells how many buffers the frame took; for an invalid one the best guess
        // is one (exact whenever the largest frame fits one buffer).
        let needed = if !len_ok || len <= self.buf_bytes {
            1
        } else {
            u16::try_from(len.div_ceil(self.buf_bytes)).unwrap_or(u16::MAX)
        };
        if needed > self.posted {
            return Err(QueueError::C2hOverrun {
                needed,
                posted: self.posted,
            });
        }
        let first = self.head;
        self.head = self.didx.add(self.head, needed);
        self.posted -= needed;
        // Dropped frames leave their pages in place: the slots are now unposted and go back to
        // the device with the next refill. The CPU never touched those pages, so no sync is due.
        if entry.err() {
            self.stats.rx_cmpt_errors += 1;
            return Ok(());
        }
        if !len_ok {
            self.stats.rx_bad_length += 1;
            return Ok(());
        }
        if needed > 1 {
            self.stats.rx_multi_buffer += 1;
            return Ok(());
        }
        self.desc.deliver(usize::from(first), len, pool, sink, tally);
        Ok(())
    }
}
