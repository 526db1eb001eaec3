//! XDP_REDIRECT: frames leaving their pair for another TX queue, a table of targets, or a user
//! sink, and their way back to the pool that owns their page.
//!
//! A redirected frame is an [`XdpFrame`]: the page, where the frame lies in it, and `origin`, the
//! index of the pool that owns the page. Whoever ends up holding it gives the page back through
//! that pool's [`RecycleRing`] ([`return_to_origin`]), because the owning pool belongs to another
//! context.

use onic_hal::{DmaAddr, DmaMemory, RegisterWindow};

use crate::config::written_after_headroom;
use crate::queue::doorbell::Doorbells;
use crate::queue::pool::{PoolPage, RecycleRing};
use crate::queue::tx::{TxFrame, TxQueue, TxSlot};

/// A frame in a page of some pool, on its way to a redirect target.
#[derive(Debug)]
pub struct XdpFrame<Pg> {
    /// The page.
    pub page: Pg,
    /// Offset of the frame's first byte in the page.
    pub offset: u16,
    /// Frame length (at least `ETH_ZLEN`: short frames are padded before they leave).
    pub len: u16,
    /// Index of the pool that owns the page (the caller's numbering, e.g. the global pair index,
    /// [`XdpDispatch::origin`](super::XdpDispatch::origin)), for [`return_to_origin`].
    ///
    /// 32 bits (as [`XdpDispatch::origin`](super::XdpDispatch::origin)): as a `u16`, the frame
    /// went to its target through a `dyn` call, in memory, and the target read this field
    /// together with the padding behind it as one 32-bit load, which the CPU cannot forward from
    /// the caller's 16-bit store (a stall on every redirected frame).
    pub origin: u32,
}

impl<Pg> XdpFrame<Pg> {
    /// Bytes of the page after the RX headroom the CPU may have written: the length to sync for
    /// the device when the page is recycled.
    #[must_use]
    pub fn dirty_len(&self) -> usize {
        written_after_headroom(self.offset, self.len)
    }
}

impl<Pg: PoolPage> TxFrame for XdpFrame<Pg> {
    fn dma_addr(&self) -> DmaAddr {
        // The redirect path checked that the sum does not overflow before the frame left.
        let base = self.page.dma_addr();
        base.checked_add(u64::from(self.offset)).unwrap_or(base)
    }

    fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// The rest of the page from the frame's offset (0 when the offset is past the page or its
    /// device address does not exist).
    fn buffer_len(&self) -> usize {
        let base = self.page.dma_addr();
        if base.checked_add(u64::from(self.offset)).is_none() {
            return 0;
        }
        self.page.bytes().len().saturating_sub(usize::from(self.offset))
    }

    /// Redirected frames are padded (and synced) before they leave their pool's context, so
    /// there is nothing to do; a frame still too short is refused.
    fn pad_to(&mut self, min_len: usize) -> bool {
        usize::from(self.len) >= min_len
    }
}

/// A TX frame type that can carry redirected frames (e.g. an enum with a variant for OS frames
/// and one for [`XdpFrame`]s).
///
/// `F::from_xdp(f).into_xdp()` must give `Ok(f)` back: that is how a frame a TX queue refused
/// returns to the redirect path to be recycled.
pub trait FromXdpFrame<Pg>: Sized {
    /// Wraps a redirected frame.
    fn from_xdp(frame: XdpFrame<Pg>) -> Self;
    /// Unwraps it again; `Err(self)` if this frame is not a redirected one.
    ///
    /// # Errors
    ///
    /// The frame itself, when it carries no [`XdpFrame`].
    fn into_xdp(self) -> Result<XdpFrame<Pg>, Self>;
}

impl<Pg> FromXdpFrame<Pg> for XdpFrame<Pg> {
    fn from_xdp(frame: XdpFrame<Pg>) -> Self {
        frame
    }

    fn into_xdp(self) -> Result<XdpFrame<Pg>, Self> {
        Ok(self)
    }
}

/// What a redirect target did with a frame it accepted.
#[derive(Debug)]
pub enum Redirected<Pg> {
    /// It keeps the page (queued on a TX ring, held by a zero-copy ring) and gives it back to
    /// the owning pool later.
    Queued,
    /// It copied the frame (an AF_XDP-style ring in copy mode): the page comes back at once and
    /// is recycled by the RX path.
    Copied(XdpFrame<Pg>),
}

/// One redirect target: a TX queue of another pair or port, or a user sink such as an
/// AF_XDP-style ring.
pub trait RedirectTarget<Pg> {
    /// Takes one frame. Its bytes have been synced for the device and it is at least `ETH_ZLEN`
    /// long.
    ///
    /// # Errors
    ///
    /// The frame comes back when the target cannot take it (full); the RX path recycles it and
    /// counts a redirect error.
    fn enqueue(&mut self, frame: XdpFrame<Pg>) -> Result<Redirected<Pg>, XdpFrame<Pg>>;

    /// Publishes what was enqueued since the last flush (a doorbell, a ring's producer index).
    fn flush(&mut self);
}

/// Where a queue's redirected frames go: the table the program's target index refers to.
pub trait RedirectTable<Pg> {
    /// Takes one frame for target `target` (`None` when the program returned REDIRECT without
    /// choosing one: a table backed by the OS may know the target on its own). `meta_len` bytes
    /// of XDP metadata the program left right in front of the frame (0 to 32,
    /// [`crate::xdp::XDP_META_MAX`]) travel with it to targets that carry metadata (an OS's
    /// redirect, which may hand the frame to another program); a TX queue sends none.
    ///
    /// # Errors
    ///
    /// The frame comes back when there is no such target or it cannot take the frame.
    fn redirect(
        &mut self,
        target: Option<u32>,
        frame: XdpFrame<Pg>,
        meta_len: u8,
    ) -> Result<Redirected<Pg>, XdpFrame<Pg>>;

    /// Flushes every target that took a frame since the last flush. Called at the end of each
    /// poll that redirected anything.
    fn flush(&mut self);
}

/// A table with no target: every redirect fails (and is counted).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRedirect;

impl<Pg> RedirectTable<Pg> for NoRedirect {
    fn redirect(
        &mut self,
        _: Option<u32>,
        frame: XdpFrame<Pg>,
        _: u8,
    ) -> Result<Redirected<Pg>, XdpFrame<Pg>> {
        Err(frame)
    }

    fn flush(&mut self) {}
}

/// A TX queue as a redirect target: frames are queued with the doorbell deferred to
/// [`RedirectTarget::flush`], so a poll that redirects many frames rings it once.
pub struct TxTarget<'q, D: DmaMemory, Pg, F, St, W> {
    queue: &'q mut TxQueue<D, Pg, F, St>,
    db: &'q Doorbells<W>,
}

impl<'q, D: DmaMemory, Pg, F, St, W> TxTarget<'q, D, Pg, F, St, W> {
    /// A target queuing on `queue`, whose doorbells are `db`.
    pub const fn new(queue: &'q mut TxQueue<D, Pg, F, St>, db: &'q Doorbells<W>) -> Self {
        Self { queue, db }
    }
}

impl<D, Pg, F, St, W> RedirectTarget<Pg> for TxTarget<'_, D, Pg, F, St, W>
where
    D: DmaMemory,
    Pg: PoolPage,
    F: TxFrame + FromXdpFrame<Pg>,
    St: AsMut<[TxSlot<Pg, F>]>,
    W: RegisterWindow,
{
    fn enqueue(&mut self, frame: XdpFrame<Pg>) -> Result<Redirected<Pg>, XdpFrame<Pg>> {
        match self.queue.xmit_remote(self.db, F::from_xdp(frame), true) {
            Ok(()) => Ok(Redirected::Queued),
            // A conforming `FromXdpFrame` always gives the frame back; a frame that cannot be
            // unwrapped is dropped here (its type's `Drop` decides what becomes of the page).
            Err(e) => e
                .into_inner()
                .into_xdp()
                .map_or_else(|_| Ok(Redirected::Queued), Err),
        }
    }

    fn flush(&mut self) {
        self.queue.flush(self.db);
    }
}

impl<D: DmaMemory, Pg, F, St, W> core::fmt::Debug for TxTarget<'_, D, Pg, F, St, W> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TxTarget")
            .field("queue", &self.queue)
            .finish_non_exhaustive()
    }
}

/// A table of up to `N` redirect targets, indexed by the program's target number (like a BPF
/// devmap). Only targets that took a frame since the last flush are flushed.
pub struct DevMap<'t, Pg, const N: usize> {
    entries: [Option<&'t mut dyn RedirectTarget<Pg>>; N],
    dirty: [bool; N],
}

impl<'t, Pg, const N: usize> DevMap<'t, Pg, N> {
    /// An empty table.
    #[must_use]
    pub fn new() -> Self {
        Self {
            entries: [const { None }; N],
            dirty: [false; N],
        }
    }

    /// Puts `target` at `index`, returning what was there.
    ///
    /// # Errors
    ///
    /// The target comes back if `index` is outside the table.
    #[allow(clippy::type_complexity)]
    pub fn insert(
        &mut self,
        index: u32,
        target: &'t mut dyn RedirectTarget<Pg>,
    ) -> Result<Option<&'t mut dyn RedirectTarget<Pg>>, &'t mut dyn RedirectTarget<Pg>> {
        let Some(slot) = usize::try_from(index).ok().and_then(|i| self.entries.get_mut(i)) else {
            return Err(target);
        };
        Ok(slot.replace(target))
    }

    /// Removes the target at `index` (flushing it first if it has unflushed frames).
    pub fn remove(&mut self, index: u32) -> Option<&'t mut dyn RedirectTarget<Pg>> {
        let i = usize::try_from(index).ok()?;
        let t = self.entries.get_mut(i)?.take()?;
        if self.dirty.get(i).copied().unwrap_or(false) {
            t.flush();
            self.dirty[i] = false;
        }
        Some(t)
    }
}

impl<Pg, const N: usize> Default for DevMap<'_, Pg, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<Pg, const N: usize> RedirectTable<Pg> for DevMap<'_, Pg, N> {
    fn redirect(
        &mut self,
        target: Option<u32>,
        frame: XdpFrame<Pg>,
        _meta_len: u8,
    ) -> Result<Redirected<Pg>, XdpFrame<Pg>> {
        let Some(i) = target.and_then(|t| usize::try_from(t).ok()) else {
            return Err(frame);
        };
        let Some(Some(t)) = self.entries.get_mut(i) else {
            return Err(frame);
        };
        let r = t.enqueue(frame)?;
        // A copying target still has a ring to publish: flush it too.
        if let Some(d) = self.dirty.get_mut(i) {
            *d = true;
        }
        Ok(r)
    }

    fn flush(&mut self) {
        for (entry, dirty) in self.entries.iter_mut().zip(self.dirty.iter_mut()) {
            if *dirty {
                if let Some(t) = entry {
                    t.flush();
                }
                *dirty = false;
            }
        }
    }
}

impl<Pg, const N: usize> core::fmt::Debug for DevMap<'_, Pg, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DevMap")
            .field("targets", &self.entries.iter().filter(|e| e.is_some()).count())
            .finish()
    }
}

/// Gives a redirected frame's page back to the pool that owns it, through that pool's recycle
/// ring (`rings[frame.origin]`).
///
/// # Errors
///
/// The page comes back when the ring is full or `origin` names no ring; the caller then releases
/// it to the HAL ([`crate::queue::pool::release_to_hal`]).
pub fn return_to_origin<Pg>(rings: &[&RecycleRing<Pg>], frame: XdpFrame<Pg>) -> Result<(), Pg> {
    let dirty = frame.dirty_len();
    let ring = usize::try_from(frame.origin).ok().and_then(|i| rings.get(i));
    match ring {
        Some(ring) => ring.recycle(frame.page, dirty),
        None => Err(frame.page),
    }
}

#[cfg(test)]
mod tests {
    use std::vec::Vec;

    use super::*;

    /// A user sink: copies up to `cap` frames, then refuses.
    struct CopyRing {
        frames: Vec<Vec<u8>>,
        cap: usize,
        flushes: usize,
    }

    impl RedirectTarget<Vec<u8>> for CopyRing {
        fn enqueue(&mut self, frame: XdpFrame<Vec<u8>>) -> Result<Redirected<Vec<u8>>, XdpFrame<Vec<u8>>> {
            if self.frames.len() == self.cap {
                return Err(frame);
            }
            let s = usize::from(frame.offset);
            self.frames
                .push(frame.page[s..s + usize::from(frame.len)].to_vec());
            Ok(Redirected::Copied(frame))
        }
        fn flush(&mut self) {
            self.flushes += 1;
        }
    }

    /// A zero-copy sink: keeps pages.
    #[derive(Default)]
    struct Keep {
        pages: Vec<XdpFrame<Vec<u8>>>,
        flushes: usize,
    }

    impl RedirectTarget<Vec<u8>> for Keep {
        fn enqueue(&mut self, frame: XdpFrame<Vec<u8>>) -> Result<Redirected<Vec<u8>>, XdpFrame<Vec<u8>>> {
            self.pages.push(frame);
            Ok(Redirected::Queued)
        }
        fn flush(&mut self) {
            self.flushes += 1;
        }
    }

    fn frame(tag: u8) -> XdpFrame<Vec<u8>> {
        XdpFrame {
            page: std::vec![tag; 512],
            offset: 256,
            len: 60,
            origin: 0,
        }
    }

    #[test]
    fn devmap_routes_by_index_and_flushes_only_what_took_frames() {
        let mut copy = CopyRing {
            frames: Vec::new(),
            cap: 1,
            flushes: 0,
        };
        let mut keep = Keep::default();
        let mut spare = Keep::default();
        {
            let mut map: DevMap<'_, Vec<u8>, 4> = DevMap::new();
            assert!(map.insert(0, &mut copy).is_ok_and(|old| old.is_none()));
            assert!(map.insert(2, &mut keep).is_ok_and(|old| old.is_none()));
            assert!(map.insert(4, &mut spare).is_err());
            assert!(matches!(
                map.redirect(Some(0), frame(1), 0),
                Ok(Redirected::Copied(_))
            ));
            // Full copy ring, empty entry, no target, index beyond the table: the frame comes back.
            assert_eq!(map.redirect(Some(0), frame(2), 0).unwrap_err().page[0], 2);
            assert!(map.redirect(Some(1), frame(3), 0).is_err());
            assert!(map.redirect(None, frame(4), 0).is_err());
            assert!(map.redirect(Some(u32::MAX), frame(5), 0).is_err());
            assert!(matches!(
                map.redirect(Some(2), frame(6), 0),
                Ok(Redirected::Queued)
            ));
            map.flush();
            map.flush();
        }
        assert_eq!(copy.frames.len(), 1);
        // Both targets that took frames were flushed once, however many flushes followed.
        assert_eq!(copy.flushes, 1);
        assert_eq!(keep.flushes, 1);
        assert_eq!(keep.pages.len(), 1);
    }

    #[test]
    fn pages_go_back_through_the_origin_ring() {
        let ring: RecycleRing<Vec<u8>> = RecycleRing::new();
        let rings = [&ring];
        return_to_origin(&rings, frame(1)).unwrap();
        assert_eq!(ring.len(), 1);
        let stray = XdpFrame {
            origin: 1,
            ..frame(2)
        };
        assert_eq!(return_to_origin(&rings, stray).unwrap_err()[0], 2);
        assert_eq!(frame(0).dirty_len(), 60);
    }
}
