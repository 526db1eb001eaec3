//! The TX path against arbitrary writeback indices and arbitrary frames on every entry point:
//! OS frames of any length (`xmit_os`), frames of another pool at any offset and length
//! (`xmit_remote`), batches of redirected frames (`xdp_xmit`), XDP_TX frames (`xmit_pool`),
//! xmit-more batches, the H2C status record overwritten with any consumer index, writebacks
//! withheld, stall limits, restarts. After every step: the page census holds, every OS buffer
//! is either on the ring or back with the OS, a refused frame came back with the error its
//! length calls for, and the model saw no device read outside a buffer the driver was given (a
//! descriptor past a buffer, or a buffer handed back while the device could still read it).

#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use onic_core::queue::tx::{PoolFrame, TxError, ETH_ZLEN, TX_MAX_FRAME};
use onic_core::xdp::{xdp_xmit, XdpFrame};
use onic_hal::{Direction, DmaMemory, DmaPage, PAGE_SIZE};
use onic_testkit::device::{status_word, DeviceMemory, DeviceRing};
use onic_tests::datapath::{HFrame, HPool, Harness, Setup};

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
    Poll,
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
    let page = h.funcs[0].pairs[0].pool.alloc()?;
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
            let func = &mut h.funcs[0];
            let db = func.dev.doorbells();
            if let Err(e) = func.pairs[0].tx.xmit_os(&db, HFrame::Os { page, len, dma }, more) {
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
            let func = &mut h.funcs[0];
            let db = func.dev.doorbells();
            if let Err(e) = func.pairs[0].tx.xmit_remote(&db, f, more) {
                let (offset, len) = (usize::from(offset), usize::from(len));
                // A redirected frame arrives padded (its own pool's path pads it): a shorter one
                // is refused, as is anything `refusal_fits` allows.
                let short = matches!(e, TxError::BadLength(_)) && len < ETH_ZLEN;
                assert!(short || refusal_fits(&e, offset, len, PAGE_SIZE), "{e:?}");
                recycle_refused(&mut func.pairs[0].pool, e.into_inner());
            }
        }
        Op::XdpXmit { frames, flush } => {
            let mut batch = Vec::new();
            for (offset, len) in frames.into_iter().take(8) {
                let Some(page) = pool_page(h) else { break };
                batch.push(Some(redirected(page, offset, len)));
            }
            let func = &mut h.funcs[0];
            let db = func.dev.doorbells();
            let sent = xdp_xmit(&mut func.pairs[0].tx, &db, &mut batch, flush);
            assert!(batch[..sent].iter().all(Option::is_none));
            for f in batch.into_iter().flatten() {
                recycle_refused(&mut func.pairs[0].pool, f);
            }
        }
        Op::Pool { offset, len, more } => {
            let Some(page) = pool_page(h) else { return };
            let func = &mut h.funcs[0];
            let db = func.dev.doorbells();
            let pair = &mut func.pairs[0];
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
            let ring = DeviceRing::h2c(h.funcs[0].pairs[0].tx.ring_dma_addr(), USABLE);
            h.card
                .write_word(ring.status(), status_word(pidx, cidx, false))
                .expect("the status slot is the device's to write");
        }
        Op::Stall(on) => h.card.faults().stall_h2c_writeback(on),
        Op::Settle => h.settle(),
        Op::Reclaim => h.reclaim(0, 0),
        Op::Poll => {
            h.poll(0, 0, 64);
        }
        Op::Flush => {
            let func = &mut h.funcs[0];
            let db = func.dev.doorbells();
            func.pairs[0].tx.flush(&db);
        }
        Op::StallLimit(n) => h.funcs[0].pairs[0].tx.set_stall_limit(u32::from(n)),
        Op::Restart => h.restart(0, 0).expect("restart"),
    }
}

fuzz_target!(|ops: Vec<Op>| {
    let setup = Setup::new().ring_size_idx(1);
    let card = setup.card();
    let rings = setup.recycle_rings();
    let mut h = Harness::new(&card, &setup, &rings);
    for op in ops.into_iter().take(128) {
        step(&mut h, op);
        h.check_census();
        let tx = &h.funcs[0].pairs[0].tx;
        assert_eq!(
            h.os_tx_live,
            tx.in_flight_by_owner().os as usize,
            "OS buffers vs the ring"
        );
        assert_eq!(card.violations(), [], "device access outside a buffer");
    }
    card.faults().clear();
    h.restart(0, 0).expect("restart");
    assert_eq!(h.os_tx_live, 0);
    h.check_pages();
    h.drain();
    h.teardown();
});
