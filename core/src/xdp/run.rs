//! The XDP dispatch of a queue pair's poll: every frame through the attached program (if any),
//! verdicts carried out on the pair's own rings, redirects flushed once at the end.

use onic_hal::{DmaMemory, RegisterWindow};

use super::buff::{XdpBuff, XdpRxHash, XdpRxq};
use super::redirect::{RedirectTable, Redirected, XdpFrame};
use super::{RawXdpProgram, XdpAction};
use crate::config::RX_HEADROOM;
use crate::queue::dispatch::sealed::Dispatch;
use crate::queue::doorbell::Doorbells;
use crate::queue::pair::{pass_up, PassInfo, QueuePair, RxSink};
use crate::queue::pool::{PageProvider, PoolPage};
use crate::queue::rx::{FrameHandler, Handled, PollOutcome, RxFrame, RxLen, RxQueue};
use crate::queue::tx::{PoolFrame, TxFrame, TxQueue, TxSlot, ETH_ZLEN};
use crate::rss::RxHasher;
use crate::stats::counters::PairStats;

/// The XDP dispatch of an [`RxContext`](crate::RxContext): the program (if any), where
/// redirected frames go, and what the program may ask about a frame. With it,
/// [`QueuePair::poll`] carries out each verdict:
///
/// - PASS: the page goes to the context's sink (a refusal recycles it, `rx_pass_refused`).
/// - DROP, ABORTED, a raw verdict that is no [`XdpAction`]: the page is recycled
///   (`rx_xdp_drop`; also `rx_xdp_aborted` or `rx_xdp_invalid`).
/// - TX: the same page is queued on the pair's TX queue; once sent it stays parked in its TX
///   slot until a later XDP_TX frame of that slot sends it to the RX ring (the pool gets it
///   back at teardown); on a full ring it is recycled at once (`rx_xdp_tx_errors`).
/// - REDIRECT: the frame is padded, synced for the device and handed to `redirect`; a refusal
///   recycles it (`rx_xdp_redirect_errors`).
///
/// After the frames, the pair's TX doorbell is rung once for the poll's XDP_TX frames and the
/// redirect table is flushed if anything was redirected. TX and REDIRECT need pages the device
/// may read ([`PageProvider::device_readable`]); otherwise they fail like a full ring.
///
/// Without a program (`prog` is `None`) the poll is the one of [`crate::PassAll`]: every frame
/// goes to the sink untouched, one test per poll, no hash, no buffer view.
///
/// ```
/// use onic_core::xdp::{NoRedirect, XdpAction, XdpBuff, XdpDispatch};
/// use onic_core::{PassInfo, RxContext, RxFrame, XdpRxq};
/// # use onic_hal::DmaPage;
///
/// let mut drop_all = |_: &mut XdpBuff<'_>| XdpAction::Drop;
/// let mut to_os = |f: RxFrame<DmaPage>, _: PassInfo| -> Result<(), RxFrame<DmaPage>> { Err(f) };
/// let ctx = RxContext {
///     sink: &mut to_os,
///     rxq: XdpRxq::default(),
///     dispatch: XdpDispatch {
///         prog: Some(&mut drop_all),
///         redirect: &mut NoRedirect,
///         origin: 0,
///         hasher: None,
///     },
/// };
/// # let _ = ctx;
/// ```
pub struct XdpDispatch<'x, Prog: ?Sized, R> {
    /// The attached program; `None` hands every frame to the sink untouched.
    pub prog: Option<&'x mut Prog>,
    /// Where XDP_REDIRECT frames go.
    pub redirect: &'x mut R,
    /// This pair's pool index, recorded in redirected frames ([`XdpFrame::origin`]) so their
    /// pages find the way back.
    pub origin: u32,
    /// Computes the RX hash each frame is given when a program runs (`None`: no hash; the
    /// program's [`XdpBuff::rx_hash`] reports no data): a [`crate::rss::ShellHasher`], or an
    /// accelerated [`RxHasher`].
    pub hasher: Option<&'x dyn RxHasher>,
}

impl<Prog: ?Sized, R> core::fmt::Debug for XdpDispatch<'_, Prog, R> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("XdpDispatch")
            .field("attached", &self.prog.is_some())
            .field("origin", &self.origin)
            .field("hashes", &self.hasher.is_some())
            .finish_non_exhaustive()
    }
}

impl<Pg, Prog, R> Dispatch<Pg> for XdpDispatch<'_, Prog, R>
where
    Pg: PoolPage,
    Prog: RawXdpProgram + ?Sized,
    R: RedirectTable<Pg>,
{
    #[inline]
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
        // The program is looked at once per poll: without one, the loop is the plain one.
        let Some(prog) = self.prog.as_deref_mut() else {
            return pair.rx_to_sink(budget, db, sink, rxq);
        };
        let (rx, tx, pool, stats) = pair.parts_mut();
        let mut runner = Runner {
            tx,
            db,
            stats,
            prog,
            sink,
            redirect: &mut *self.redirect,
            rxq,
            origin: self.origin,
            hash: NoHash,
            redirected: false,
        };
        // The hash source is chosen once per poll too: a poll without one tests for it in no
        // frame (each source has a loop of its own).
        let (out, redirected) = match self.hasher {
            None => runner.run(rx, budget, pool),
            Some(h) => runner.with_hash(WithHash(h)).run(rx, budget, pool),
        };
        tx.flush(db);
        if redirected {
            self.redirect.flush();
        }
        out
    }
}

/// Where the frames of a poll get their RX hash from.
trait HashSource {
    /// The hash of the `len` bytes at `offset` in `page` (the frame as received), if the poll
    /// computes one.
    fn hash<Pg: PoolPage>(&self, page: &Pg, offset: u16, len: u16) -> Option<XdpRxHash>;
}

/// No hash: the program's [`XdpBuff::rx_hash`] reports no data.
struct NoHash;

impl HashSource for NoHash {
    #[inline(always)]
    fn hash<Pg: PoolPage>(&self, _: &Pg, _: u16, _: u16) -> Option<XdpRxHash> {
        None
    }
}

/// Every frame hashed by the poll's [`RxHasher`].
struct WithHash<'h>(&'h dyn RxHasher);

impl HashSource for WithHash<'_> {
    #[inline(always)]
    fn hash<Pg: PoolPage>(&self, page: &Pg, offset: u16, len: u16) -> Option<XdpRxHash> {
        let start = usize::from(offset);
        let frame = page.bytes().get(start..start + usize::from(len)).unwrap_or(&[]);
        Some(XdpRxHash::compute(self.0, frame))
    }
}

/// The frame handler of a poll with a program.
struct Runner<'r, D: DmaMemory, Pg, F, TSt, W, Prog: ?Sized, S, R, H> {
    tx: &'r mut TxQueue<D, Pg, F, TSt>,
    db: &'r Doorbells<W>,
    stats: &'r mut PairStats,
    prog: &'r mut Prog,
    sink: &'r mut S,
    redirect: &'r mut R,
    rxq: XdpRxq,
    origin: u32,
    hash: H,
    redirected: bool,
}

/// What the program left behind.
struct Ran {
    raw: u32,
    target: Option<u32>,
    meta_len: u8,
    offset: u16,
    len: u16,
    /// Highest frame end during the run, from the page start.
    high_water: usize,
}

impl<D, P, F, TSt, W, Prog, S, R, H> FrameHandler<P> for Runner<'_, D, P::Page, F, TSt, W, Prog, S, R, H>
where
    D: DmaMemory,
    P: PageProvider,
    F: TxFrame,
    TSt: AsMut<[TxSlot<P::Page, F>]>,
    W: RegisterWindow,
    Prog: RawXdpProgram + ?Sized,
    S: RxSink<P::Page>,
    R: RedirectTable<P::Page>,
    H: HashSource,
{
    /// Always inlined: it is the body of the RX loop of a poll with a program.
    #[inline(always)]
    fn handle(&mut self, mut page: P::Page, rx_len: RxLen, pool: &mut P) -> Handled<P::Page> {
        // CAST: RX_HEADROOM (256) fits u16.
        let offset = RX_HEADROOM as u16;
        let len = rx_len.get();
        let hash = self.hash.hash(&page, offset, len);
        let ran = run_program(self.prog, &mut page, rx_len, self.rxq, hash);
        let Some(ran) = ran else {
            // The frame does not fit the buffer layout (a page provider with odd pages).
            self.stats.rx_xdp_aborted += 1;
            self.stats.rx_xdp_drop += 1;
            return Handled::Recycle(RxFrame { page, offset, len });
        };
        let frame = RxFrame {
            page,
            offset: ran.offset,
            len: ran.len,
        };
        match XdpAction::from_raw(ran.raw) {
            Some(XdpAction::Pass) => {
                self.stats.rx_xdp_pass += 1;
                let info = PassInfo {
                    meta_len: ran.meta_len,
                    rxq: self.rxq,
                    hash,
                };
                match pass_up(self.sink, self.stats, frame, info) {
                    Handled::Recycle(f) => recycle(f, ran.high_water),
                    kept => kept,
                }
            }
            Some(XdpAction::Drop) => self.discard(frame, ran.high_water),
            Some(XdpAction::Aborted) => self.refused(frame, ran.high_water, false),
            None => self.refused(frame, ran.high_water, true),
            Some(XdpAction::Tx) => self.xdp_tx(frame, ran.high_water, pool),
            Some(XdpAction::Redirect) => self.xdp_redirect(frame, &ran, pool),
        }
    }
}

/// Runs the program over the frame; `None` if the frame does not fit the XDP layout.
fn run_program<Pg: PoolPage, Prog: RawXdpProgram + ?Sized>(
    prog: &mut Prog,
    page: &mut Pg,
    len: RxLen,
    rxq: XdpRxq,
    hash: Option<XdpRxHash>,
) -> Option<Ran> {
    let mut buff = XdpBuff::received(page.bytes_mut(), len, rxq).ok()?;
    if let Some(h) = hash {
        buff = buff.with_rx_hash(h);
    }
    let raw = prog.run_raw(&mut buff);
    let (_, data, _) = buff.offsets();
    Some(Ran {
        raw,
        target: buff.redirect_target(),
        meta_len: u8::try_from(buff.meta_len()).ok()?,
        offset: u16::try_from(data).ok()?,
        len: u16::try_from(buff.len()).ok()?,
        high_water: buff.high_water(),
    })
}

/// A frame to recycle, stretched so that the pool syncs every byte the CPU may have written
/// (the program may have grown the frame and trimmed it again).
fn recycle<Pg>(f: RxFrame<Pg>, high_water: usize) -> Handled<Pg> {
    let end = usize::from(f.offset) + usize::from(f.len);
    let len = high_water.max(end).saturating_sub(RX_HEADROOM as usize);
    Handled::Recycle(RxFrame {
        page: f.page,
        offset: RX_HEADROOM as u16,
        len: u16::try_from(len).unwrap_or(u16::MAX),
    })
}

impl<'r, D, Pg, F, TSt, W, Prog: ?Sized, S, R, H> Runner<'r, D, Pg, F, TSt, W, Prog, S, R, H>
where
    D: DmaMemory,
    Pg: PoolPage,
    F: TxFrame,
    TSt: AsMut<[TxSlot<Pg, F>]>,
    W: RegisterWindow,
{
    /// XDP_ABORTED (`invalid`: a raw verdict that is no [`XdpAction`]): counted and dropped. Cold,
    /// so that the common verdicts keep the loop's registers.
    #[cold]
    #[inline(never)]
    fn refused(&mut self, f: RxFrame<Pg>, high_water: usize, invalid: bool) -> Handled<Pg> {
        if invalid {
            self.stats.rx_xdp_invalid += 1;
        } else {
            self.stats.rx_xdp_aborted += 1;
        }
        self.discard(f, high_water)
    }

    /// The same runner with another hash source.
    fn with_hash<H2>(self, hash: H2) -> Runner<'r, D, Pg, F, TSt, W, Prog, S, R, H2> {
        Runner {
            tx: self.tx,
            db: self.db,
            stats: self.stats,
            prog: self.prog,
            sink: self.sink,
            redirect: self.redirect,
            rxq: self.rxq,
            origin: self.origin,
            hash,
            redirected: self.redirected,
        }
    }

    /// Takes up to `budget` frames of `rx` through the program; also tells whether a frame was
    /// redirected.
    fn run<P, RSt>(
        &mut self,
        rx: &mut RxQueue<D, Pg, RSt>,
        budget: usize,
        pool: &mut P,
    ) -> (PollOutcome, bool)
    where
        P: PageProvider<Page = Pg>,
        RSt: AsMut<[Option<Pg>]>,
        Prog: RawXdpProgram,
        S: RxSink<Pg>,
        R: RedirectTable<Pg>,
        H: HashSource,
    {
        let out = rx.poll(budget, self.db, pool, self);
        (out, self.redirected)
    }

    fn discard(&mut self, f: RxFrame<Pg>, high_water: usize) -> Handled<Pg> {
        self.stats.rx_xdp_drop += 1;
        recycle(f, high_water)
    }

    /// Cleans bytes past the frame's end that the program wrote before trimming, so that a later
    /// write-back of those cache lines cannot land on data the device writes into the page.
    fn sync_beyond_end<P: PageProvider<Page = Pg>>(pool: &P, f: &RxFrame<Pg>, high_water: usize) {
        let end = usize::from(f.offset) + usize::from(f.len);
        if high_water > end {
            pool.sync_for_device(&f.page, end, high_water - end);
        }
    }

    #[inline(always)]
    fn xdp_tx<P: PageProvider<Page = Pg>>(
        &mut self,
        f: RxFrame<Pg>,
        high_water: usize,
        pool: &mut P,
    ) -> Handled<Pg> {
        self.stats.rx_xdp_tx += 1;
        if !pool.device_readable() {
            return self.tx_failed(f, high_water);
        }
        Self::sync_beyond_end(pool, &f, high_water);
        let pf = PoolFrame {
            page: f.page,
            offset: f.offset,
            len: f.len,
        };
        // `more`: the doorbell is rung once, after the poll.
        match self.tx.xmit_pool(self.db, pool, pf, true) {
            Ok(back) => Handled::ToTx(back),
            Err(e) => {
                // Deviation: the reference driver leaks the page here (hardware.md §15 item 13).
                let pf = e.into_inner();
                self.tx_failed(
                    RxFrame {
                        page: pf.page,
                        offset: pf.offset,
                        len: pf.len,
                    },
                    high_water,
                )
            }
        }
    }

    /// An XDP_TX frame that could not be queued: counted and dropped. Cold, as [`Self::refused`].
    #[cold]
    #[inline(never)]
    fn tx_failed(&mut self, f: RxFrame<Pg>, high_water: usize) -> Handled<Pg> {
        self.stats.rx_xdp_tx_errors += 1;
        self.discard(f, high_water)
    }

    fn xdp_redirect<P: PageProvider<Page = Pg>>(
        &mut self,
        mut f: RxFrame<Pg>,
        ran: &Ran,
        pool: &mut P,
    ) -> Handled<Pg>
    where
        R: RedirectTable<Pg>,
    {
        let high_water = ran.high_water;
        let off = usize::from(f.offset);
        let mut len = usize::from(f.len);
        let addr_ok = f.page.dma_addr().checked_add(f.offset.into()).is_some();
        if !pool.device_readable() || !addr_ok {
            return self.redirect_failed(f, high_water);
        }
        if len < ETH_ZLEN {
            let Some(pad) = f.page.bytes_mut().get_mut(off + len..off + ETH_ZLEN) else {
                return self.redirect_failed(f, high_water);
            };
            pad.fill(0);
            len = ETH_ZLEN;
            // CAST: ETH_ZLEN fits u16.
            f.len = ETH_ZLEN as u16;
        }
        let high_water = high_water.max(off + len);
        // The target's device reads the page from here on; it may have been rewritten.
        pool.sync_for_device(&f.page, off, high_water - off);
        let xf = XdpFrame {
            page: f.page,
            offset: f.offset,
            len: f.len,
            origin: self.origin,
        };
        match self.redirect.redirect(ran.target, xf, ran.meta_len) {
            Ok(Redirected::Queued) => {
                self.stats.rx_xdp_redirect += 1;
                self.redirected = true;
                Handled::ToTx(None)
            }
            Ok(Redirected::Copied(xf)) => {
                self.stats.rx_xdp_redirect += 1;
                self.redirected = true;
                recycle(
                    RxFrame {
                        page: xf.page,
                        offset: xf.offset,
                        len: xf.len,
                    },
                    high_water,
                )
            }
            Err(xf) => self.redirect_failed(
                RxFrame {
                    page: xf.page,
                    offset: xf.offset,
                    len: xf.len,
                },
                high_water,
            ),
        }
    }

    fn redirect_failed(&mut self, f: RxFrame<Pg>, high_water: usize) -> Handled<Pg> {
        self.stats.rx_xdp_redirect_errors += 1;
        self.discard(f, high_water)
    }
}
