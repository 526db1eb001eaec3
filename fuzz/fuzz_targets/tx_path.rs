//! The TX path through onic-embed's port, as every host drives it (the datapath harness): the
//! stack's packets of any length in xmit-more batches (`Port::xmit`, `tx_flush`), redirected
//! frames of any length in batches onto the redirect-in ring (`Port::xdp_xmit`), XDP_TX frames
//! whose program moved their head and tail anywhere (the queue's own ring), any H2C writeback
//! index on any of the three TX rings, withheld writebacks, a stall limit on the stack's ring,
//! reclaims, polls, restarts. After every step: the page census holds, every packet of the
//! stack is on its ring or back with the stack, a refused packet is one its length or the
//! ring's state calls for, and the model saw no device read outside a buffer the driver was
//! given. The core's TX entry points with frames no host makes are `tx_queue`'s.

#![no_main]

use std::cell::Cell;
use std::rc::Rc;

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use onic_core::queue::tx::ETH_ZLEN;
use onic_core::xdp::{XdpAction, XdpBuff};
use onic_embed::port::{Host, TxClean, TxLock, XmitResult};
use onic_testkit::device::{status_word, DeviceMemory, DeviceRing};
use onic_tests::datapath::{targets, Harness, Prog, Setup};

#[derive(Arbitrary, Debug)]
enum Op {
    Os { len: u16, more: bool },
    Foreign { n: u8, len: u16 },
    XdpXmit { n: u8, flush: bool },
    XdpTx { len: u16, head: i16, tail: i16 },
    Writeback { ring: u8, cidx: u16, pidx: u16 },
    Stall(bool),
    Settle,
    Reclaim,
    Poll,
    Flush,
    Restart,
}

#[derive(Arbitrary, Debug)]
struct Input {
    stall_limit: u8,
    ops: Vec<Op>,
}

/// Usable entries of the setup's rings (ring-size index 1: 64 entries).
const USABLE: u16 = 63;

/// What a run keeps beside the harness: the programs, the head and tail moves of the next
/// XDP_TX frames, and the redirected frames of port 1 waiting for `xdp_xmit`.
struct Run {
    hold: Prog,
    tx_edit: Prog,
    edit: Rc<Cell<(isize, isize)>>,
    held: Vec<u32>,
}

impl Run {
    fn new(h: &mut Harness<'_>) -> Self {
        let edit = Rc::new(Cell::new((0, 0)));
        let moves = Rc::clone(&edit);
        let tx_edit = h.attach(move |x: &mut XdpBuff<'_>| {
            let (head, tail) = moves.get();
            // A move the buffer cannot take fails and changes nothing.
            let _ = x.adjust_head(head);
            let _ = x.adjust_tail(tail);
            XdpAction::Tx
        });
        let hold = h.attach(|x: &mut XdpBuff<'_>| x.redirect(targets::HOLD));
        Self {
            hold,
            tx_edit,
            edit,
            held: Vec::new(),
        }
    }
}

/// A packet of the stack of `len` bytes on queue 0 of port 0.
fn os(h: &mut Harness<'_>, len: usize, more: bool) {
    let host = h.host(0).clone();
    let Some(skb) = host.packet_with(len, |b| b.fill(0x11)) else {
        return;
    };
    let mut clean = TxClean::default();
    let r = h.port(0).queue::<TxLock, _>(0, |p, t| p.xmit(t, skb, &mut clean));
    let stack = h.queue(0, 0).stack;
    match r {
        XmitResult::Ok | XmitResult::OkStop => {}
        XmitResult::Busy => {
            assert!(stack.free() == 0 || stack.is_stopped(), "busy with room");
            host.skb_done(skb, None);
        }
        XmitResult::Dropped => {
            assert!(
                len < ETH_ZLEN || stack.error().is_some(),
                "a {len}-byte packet dropped by a healthy ring"
            );
            host.skb_done(skb, None);
        }
    }
    if !more {
        h.port(0).queue::<TxLock, _>(0, |p, t| p.tx_flush(t));
    }
}

fn step(h: &mut Harness<'_>, run: &mut Run, op: Op) {
    match op {
        Op::Os { len, more } => os(h, usize::from(len % 4097), more),
        Op::Foreign { n, len } => {
            for i in 0..u16::from(n % 8) {
                h.inject(1, i, usize::from(len % 1600));
            }
            h.settle();
            h.poll_with(1, 0, 64, Some(run.hold));
            run.held.extend(h.take_held());
        }
        Op::XdpXmit { n, flush } => {
            let k = usize::from(n % 9).min(run.held.len());
            let batch: Vec<u32> = run.held.drain(..k).collect();
            let sent = h.xdp_xmit(0, 0, &batch, flush);
            assert!(sent <= batch.len());
            // What the ring did not take is still the caller's, first in line again.
            run.held.splice(0..0, batch[sent..].iter().copied());
        }
        Op::XdpTx { len, head, tail } => {
            run.edit.set((isize::from(head), isize::from(tail)));
            h.inject(0, len, usize::from(len % 1600));
            h.settle();
            h.poll_with(0, 0, 64, Some(run.tx_edit));
        }
        Op::Writeback { ring, cidx, pidx } => {
            // The device reads everything it was told about first, so whatever index in the
            // driver's window the record names, the device is done with those buffers.
            h.card.run_until_idle();
            let v = h.queue(0, 0);
            let base = match ring % 3 {
                0 => v.stack.ring_dma_addr(),
                1 => v.pair.tx.ring_dma_addr(),
                _ => v.xmit.ring_dma_addr(),
            };
            let at = DeviceRing::h2c(base, USABLE).status();
            h.card
                .write_word(at, status_word(pidx, cidx, false))
                .expect("the status slot is the device's to write");
        }
        Op::Stall(on) => h.card.faults().stall_h2c_writeback(on),
        Op::Settle => h.settle(),
        Op::Reclaim => {
            h.reclaim(0, 0);
        }
        Op::Poll => {
            h.poll_with(0, 0, 64, Some(run.tx_edit));
        }
        Op::Flush => h.port(0).queue::<TxLock, _>(0, |p, t| p.tx_flush(t)),
        Op::Restart => h.restart(0, 0).expect("restart"),
    }
}

fuzz_target!(|input: Input| {
    let setup = Setup::new()
        .functions(2)
        .ring_size_idx(1)
        .stack_stall_reclaims(u32::from(input.stall_limit));
    let card = setup.card();
    let mut h = Harness::new(&card, &setup);
    let mut run = Run::new(&mut h);
    for op in input.ops.into_iter().take(128) {
        step(&mut h, &mut run, op);
        h.check_census();
        let live = h.os_tx_live();
        let on_ring = h.queue(0, 0).stack.in_flight_by_owner().os;
        assert_eq!(live, on_ring as usize, "packets of the stack vs the ring");
        assert_eq!(card.violations(), [], "device access outside a buffer");
    }
    card.faults().clear();
    for f in run.held.drain(..) {
        h.return_frame(f);
    }
    h.restart(0, 0).expect("restart");
    assert_eq!(h.os_tx_live(), 0);
    h.check_pages();
    h.drain();
    h.teardown();
});
