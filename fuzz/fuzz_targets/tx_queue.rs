//! The core's TX queue on its own (a bare queue pair, outside any port: onic-embed's door hands
//! the queue only buffers its host made, so frames no host makes are fed here) against
//! arbitrary writeback indices and arbitrary frames on every entry point:
//! OS frames of any length (`xmit_os`), frames of another pool at any offset and length
//! (`xmit_remote`), batches of redirected frames (`xdp_xmit`), XDP_TX frames (`xmit_pool`),
//! xmit-more batches, the H2C status record overwritten with any consumer index, writebacks
//! withheld, stall limits, restarts. After every step: the pool's pages are all in the pool or
//! on the ring, every OS buffer
//! is either on the ring or back with the OS, a refused frame came back with the error its
//! length calls for, and the model saw no device read outside a buffer the driver was given (a
//! descriptor past a buffer, or a buffer handed back while the device could still read it).

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use onic_core::queue::pool::{PagePool, RecycleRing};
use onic_core::queue::tx::{PoolFrame, TxError, ETH_ZLEN, TX_MAX_FRAME};
use onic_core::xdp::{xdp_xmit, XdpFrame};
use onic_core::{Device, DeviceConfig, QueueId, RingSizeIdx, RxQueueConfig};
use onic_embed::done::FrameDone;
use onic_embed::frame::Frame;
use onic_embed::set::{build_pair, census, Pair, Slots};
use onic_embed::tuning::PairSpec;
use onic_hal::{Direction, DmaMemory, DmaPage, PAGE_SIZE};
use onic_sim::{Card, CardConfig, QdmaWindow, ShellWindow, SimDma, Wire};
use onic_testkit::device::{status_word, DeviceMemory, DeviceRing};

/// A frame on the queue: an OS page, or a page of the pair's pool.
type HFrame<'c> = Frame<SimDma<'c>>;
/// The pair's pool.
type HPool<'c> = PagePool<'c, SimDma<'c>>;

/// Function 0 of a card with one started queue pair (64-entry rings) whose pool recycles
/// through `ring` (frames of this pool name it as origin 0); OS buffers the queue holds.
struct Harness<'c> {
    card: &'c Card,
    dev: Device<QdmaWindow<'c>, ShellWindow<'c>>,
    pair: Pair<'c, SimDma<'c>, HFrame<'c>>,
    ring: &'c RecycleRing,
    os_tx_live: usize,
}

impl<'c> Harness<'c> {
    fn new(card: &'c Card, ring: &'c RecycleRing) -> Self {
        let mut delay = card.delay();
        let cfg = DeviceConfig::new(0, 1).expect("device config");
        let (dev, _) = Device::init(card.qdma(0), card.shell(), &mut delay, cfg).expect("init");
        let size = RingSizeIdx::new(1).expect("ring size");
        let buf = RxQueueConfig::new(QueueId::new(0)).buf;
        let spec = PairSpec::new(QueueId::new(0), size, buf);
        let mut pair = build_pair(card.dma(), &spec, Slots::for_spec(&spec), Some(ring)).expect("pair");
        pair.start(&dev, &mut delay).expect("start");
        Self {
            card,
            dev,
            pair,
            ring,
            os_tx_live: 0,
        }
    }

    /// Reclaims the TX queue: OS buffers are freed, pool pages go home.
    fn reclaim(&mut self) {
        let rings = [self.ring];
        let mut done = FrameDone::new(&rings, self.card.dma());
        self.pair.tx.reclaim(&mut done);
        self.os_tx_live -= done.counts.os_freed as usize;
    }

    /// Restarts the pair (its buffers back to their owners).
    fn restart(&mut self) -> onic_core::Result<()> {
        let rings = [self.ring];
        let mut done = FrameDone::new(&rings, self.card.dma());
        let mut delay = self.card.delay();
        let r = self.pair.restart(&self.dev, &mut delay, &mut done);
        self.os_tx_live -= done.counts.os_freed as usize;
        r
    }

    /// Every page the pool took is in the pool, the RX ring or TX flight, and the model's live
    /// pages are the pool's and the OS buffers.
    fn check_census(&self) {
        let c = census(core::iter::once(&self.pair));
        let live = self.pair.pool.stats().live_pages();
        assert_eq!(c.total(), live, "page census {c:?}");
        assert_eq!(self.card.dma_stats().live_pages as u64, live + self.os_tx_live as u64);
    }

    /// Tears the pair and the function down; nothing may be left.
    fn teardown(self) {
        let mut delay = self.card.delay();
        let rings = [self.ring];
        let mut done = FrameDone::new(&rings, self.card.dma());
        let (r, pool, _, _) = self.pair.teardown(&self.dev, &mut delay, &mut done);
        r.expect("pair teardown");
        drop(pool);
        let (r, _, _) = self.dev.teardown(&mut delay);
        r.expect("device teardown");
        let s = self.card.dma_stats();
        assert_eq!((s.live_pages, s.mapped_pages, s.live_regions), (0, 0, 0), "leak");
        assert_eq!(self.card.violations(), []);
    }
}

#[derive(Arbitrary, Debug)]
enum Op {
    Os { len: u32, more: bool },
    Remote { offset: u16, len: u16, more: bool },
    XdpXmit { frames: Vec<(u16, u16)>, flush: bool },
    Pool { offset: u16, len: u16, more: bool },
    Writeback { cidx: u16, pidx: u16 },
    Stall(bool),
    Settle,
    Reclaim,
    Flush,
    StallLimit(u8),
    Restart,
}

/// Usable entries of the setup's ring (ring-size index 1: 64 entries).
const USABLE: u16 = 63;

/// Whether a refusal is the one the frame's extent calls for (`Full` and `Queue` depend on the
/// ring, not on the frame).
fn refusal_fits<B>(e: &TxError<B>, offset: usize, len: usize, room: usize) -> bool {
    match e {
        TxError::BadLength(_) => len == 0 || len > TX_MAX_FRAME,
        TxError::BeyondBuffer(_) => offset + len.max(ETH_ZLEN) > room,
        TxError::Full(_) | TxError::Queue(..) => true,
    }
}

/// A frame another pair redirected here: a page of that pair's pool.
fn redirected<'c>(page: DmaPage, offset: u16, len: u16) -> HFrame<'c> {
    HFrame::Xdp(XdpFrame {
        page,
        offset,
        len,
        origin: 0,
    })
}

/// A redirected frame the TX queue gave back: its page goes back to the pool.
fn recycle_refused(pool: &mut HPool<'_>, f: HFrame<'_>) {
    let HFrame::Xdp(x) = f else {
        panic!("another frame came back")
    };
    pool.recycle(x.page, 0);
}

fn os_page(h: &mut Harness<'_>) -> DmaPage {
    let dma = h.card.dma();
    let mut page = dma
        .map_page(dma.alloc_page().expect("page"), Direction::ToDevice)
        .expect("map");
    page.bytes_mut().fill(0x11);
    dma.sync_for_device(&page, 0, PAGE_SIZE, Direction::ToDevice);
    page
}

fn pool_page(h: &mut Harness<'_>) -> Option<DmaPage> {
    let dma = h.card.dma();
    let page = h.pair.pool.alloc()?;
    dma.sync_for_device(&page, 0, PAGE_SIZE, Direction::Bidirectional);
    Some(page)
}

fn step(h: &mut Harness<'_>, op: Op) {
    let dma = h.card.dma();
    match op {
        Op::Os { len, more } => {
            let len = (len % 70_000) as usize;
            let page = os_page(h);
            h.os_tx_live += 1;
            let db = h.dev.doorbells();
            if let Err(e) = h.pair.tx.xmit_os(&db, HFrame::Os { page, len, dma }, more) {
                assert!(refusal_fits(&e, 0, len, PAGE_SIZE), "{e:?}");
                let HFrame::Os { page, .. } = e.into_inner() else {
                    panic!("another frame came back")
                };
                dma.free_page(page.unmap(&dma, Direction::ToDevice));
                h.os_tx_live -= 1;
            }
        }
        Op::Remote { offset, len, more } => {
            let Some(page) = pool_page(h) else { return };
            let f = redirected(page, offset, len);
            let db = h.dev.doorbells();
            if let Err(e) = h.pair.tx.xmit_remote(&db, f, more) {
                let (offset, len) = (usize::from(offset), usize::from(len));
                // A redirected frame arrives padded (its own pool's path pads it): a shorter one
                // is refused, as is anything `refusal_fits` allows.
                let short = matches!(e, TxError::BadLength(_)) && len < ETH_ZLEN;
                assert!(short || refusal_fits(&e, offset, len, PAGE_SIZE), "{e:?}");
                recycle_refused(&mut h.pair.pool, e.into_inner());
            }
        }
        Op::XdpXmit { frames, flush } => {
            let mut batch = Vec::new();
            for (offset, len) in frames.into_iter().take(8) {
                let Some(page) = pool_page(h) else { break };
                batch.push(Some(redirected(page, offset, len)));
            }
            let db = h.dev.doorbells();
            let sent = xdp_xmit(&mut h.pair.tx, &db, &mut batch, flush);
            assert!(batch[..sent].iter().all(Option::is_none));
            for f in batch.into_iter().flatten() {
                recycle_refused(&mut h.pair.pool, f);
            }
        }
        Op::Pool { offset, len, more } => {
            let Some(page) = pool_page(h) else { return };
            let db = h.dev.doorbells();
            let pair = &mut h.pair;
            let f = PoolFrame { page, offset, len };
            match pair.tx.xmit_pool(&db, &mut pair.pool, f, more) {
                // A page parked in the slot (synced for the device on its way out) goes back to
                // the pool.
                Ok(back) => {
                    if let Some(p) = back {
                        pair.pool.recycle(p, 0);
                    }
                }
                Err(e) => {
                    assert!(
                        refusal_fits(&e, usize::from(offset), usize::from(len), PAGE_SIZE),
                        "{e:?}"
                    );
                    let f = e.into_inner();
                    assert_eq!((f.offset, f.len), (offset, len), "the frame came back changed");
                    pair.pool.recycle(f.page, 0);
                }
            }
        }
        Op::Writeback { cidx, pidx } => {
            // The device reads everything it was told about first, so whatever index in the
            // driver's window the record names, the device is done with those buffers.
            h.card.run_until_idle();
            let ring = DeviceRing::h2c(h.pair.tx.ring_dma_addr(), USABLE);
            h.card
                .write_word(ring.status(), status_word(pidx, cidx, false))
                .expect("the status slot is the device's to write");
        }
        Op::Stall(on) => h.card.faults().stall_h2c_writeback(on),
        Op::Settle => {
            h.card.run_until_idle();
            h.card.advance_time(2_000);
            h.card.run_until_idle();
        }
        Op::Reclaim => h.reclaim(),
        Op::Flush => {
            let db = h.dev.doorbells();
            h.pair.tx.flush(&db);
        }
        Op::StallLimit(n) => h.pair.tx.set_stall_limit(u32::from(n)),
        Op::Restart => h.restart().expect("restart"),
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let mut cc = CardConfig::default();
    cc.wire = Wire::Open;
    let card = Card::new(cc);
    let ring = RecycleRing::new();
    let mut h = Harness::new(&card, &ring);
    for op in ops.into_iter().take(128) {
        step(&mut h, op);
        h.check_census();
        let tx = &h.pair.tx;
        assert_eq!(
            h.os_tx_live,
            tx.in_flight_by_owner().os as usize,
            "OS buffers vs the ring"
        );
        assert_eq!(card.violations(), [], "device access outside a buffer");
    }
    card.faults().clear();
    h.restart().expect("restart");
    assert_eq!(h.os_tx_live, 0);
    h.check_census();
    assert!(h.pair.tx.error().is_none());
    h.teardown();
});
